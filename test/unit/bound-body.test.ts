import { createHash } from 'node:crypto';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declaredTooLarge, readBoundBody, type BoundBody, type BoundBodyLimits } from '../../src/gateway/bound-body.js';

const MAX = 1024;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('base64url');

/** A real server whose handler reads each request's body with readBoundBody and hands the verdict to the test. */
let server: Server;
let port: number;
const verdicts: Array<(v: BoundBody, req: IncomingMessage) => void> = [];
const NO_PACE: BoundBodyLimits = { maxBytes: MAX, minBytesPerSecond: 0, graceMs: 0 };
let limits = NO_PACE;
beforeAll(async () => {
  server = createServer((req, res) => {
    readBoundBody(req, limits, (v) => {
      verdicts.shift()?.(v, req);
      if (v.ok) res.end('ok');
      else if (v.reason === 'bound_body_too_large') res.writeHead(413, { connection: 'close' }).end();
      else if (v.reason === 'body_too_slow') res.writeHead(408, { connection: 'close' }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const next = () => new Promise<BoundBody>((resolve) => verdicts.push((v) => resolve(v)));

function post(body: Buffer, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ port, method: 'POST', path: '/', headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('readBoundBody: the whole body, hashed as it arrives, bounded', () => {
  it('reads a body with a length byte for byte and hashes exactly those bytes', async () => {
    const body = Buffer.from([0, 1, 2, 0xff, 0x0d, 0x0a, 0x80, 0x7f]);
    const seen = next();
    expect(await post(body)).toBe(200);
    const v = await seen;
    expect(v.ok && v.bytes.equals(body)).toBe(true);
    expect(v.ok && v.sha256).toBe(sha(body));
  });

  it('reads a chunked body across several chunks into the bytes the chunks carry', async () => {
    const seen = next();
    const socket = connect(port, '127.0.0.1');
    socket.write(
      'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n',
    );
    const v = await seen;
    socket.destroy();
    expect(v.ok && v.bytes.toString()).toBe('abcdefg');
    expect(v.ok && v.sha256).toBe(sha('abcdefg'));
  });

  it('a body exactly at the bound passes; one byte over stops reading and says so', async () => {
    const at = next();
    expect(await post(Buffer.alloc(MAX, 7))).toBe(200);
    expect((await at).ok).toBe(true);
    const over = next();
    expect(await post(Buffer.alloc(MAX + 1, 7))).toBe(413);
    expect(await over).toEqual({ ok: false, reason: 'bound_body_too_large' });
  });

  it('a client that goes away mid-body ends as aborted, once', async () => {
    const seen = next();
    const socket = connect(port, '127.0.0.1');
    socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhalf');
    setTimeout(() => socket.destroy(), 50);
    expect(await seen).toEqual({ ok: false, reason: 'aborted' });
    expect(verdicts).toHaveLength(0);
  });
});

describe('readBoundBody: the minimum pace', () => {
  it('a body that trickles in below the minimum after the grace is cut as body_too_slow; a steady one is read', async () => {
    limits = { maxBytes: MAX, minBytesPerSecond: 1000, graceMs: 100 };
    try {
      const slow = next();
      const socket = connect(port, '127.0.0.1');
      socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab');
      const started = performance.now();
      expect(await slow).toEqual({ ok: false, reason: 'body_too_slow' });
      expect(performance.now() - started).toBeGreaterThanOrEqual(90);
      socket.destroy();
      const steady = next();
      expect(await post(Buffer.alloc(MAX, 1))).toBe(200);
      expect((await steady).ok).toBe(true);
    } finally {
      limits = NO_PACE;
    }
  });
});

describe('declaredTooLarge', () => {
  it('only a declared length over the bound is too large: chunked and no body are read to find out', () => {
    expect(declaredTooLarge(MAX + 1, MAX)).toBe(true);
    expect(declaredTooLarge(MAX, MAX)).toBe(false);
    expect(declaredTooLarge('chunked', MAX)).toBe(false);
    expect(declaredTooLarge('none', MAX)).toBe(false);
  });
});
