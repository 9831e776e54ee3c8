import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { KEYS, settle, startFixture, type Fixture } from '../helpers/adversarial.js';
import { startKeygate } from '../helpers/keygate.js';
import { freePort } from '../helpers/free-port.js';
import { token } from '../helpers/tokens.js';
import { SECRET } from '../helpers/adversarial.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const UPSTREAM_TIMEOUT_MS = 500;
/** Upper bound for "within the configured timeout": the timeout plus generous slack for a busy 2-core machine. */
const WITHIN_MS = UPSTREAM_TIMEOUT_MS + 1_500;
const measured: Record<string, number> = {};

/**
 * Upstream faults: refused, reset before or during the response, stalled
 * before headers, mid-body and mid-request. The client always gets a
 * complete 502/504 JSON answer when no response has started, or a cut
 * connection when one has; never a hang, and Keygate keeps serving.
 */
describe('adversarial: upstream faults', () => {
  let f: Fixture;
  let faults = 0;
  const get = (extra = '') =>
    `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('good', SECRET)}\r\n${extra}\r\n`;

  beforeAll(async () => {
    f = await startFixture({ env: { KEYGATE_UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS) } });
  });
  afterAll(async () => {
    console.log(`[upstream-faults] ${faults} faults injected; measured ms: ${JSON.stringify(measured)}`);
    await f.close();
  });
  beforeEach(() => f.upstream.reset());
  const stillServing = async () => {
    f.upstream.reset();
    const r = await exchange(f.gate.port, get('Connection: close\r\n'), { quietMs: 3_000 });
    expect(r.statuses).toEqual([200]);
  };

  it('refused (nothing listening): 502 JSON, fast', async () => {
    const port = await freePort();
    const gate = await startKeygate({ upstream: `http://127.0.0.1:${port}`, keys: KEYS });
    try {
      faults++;
      const r = await exchange(gate.port, get('Connection: close\r\n'), { quietMs: 3_000 });
      measured.refused502 = Math.round(r.ms);
      expect(r.statuses).toEqual([502]);
      expect(firstBody(r.text)).toEqual({ code: 50200, message: 'Bad gateway' });
      expect(r.closed).toBe(true);
      expect(r.ms).toBeLessThan(WITHIN_MS);
    } finally {
      await gate.close();
    }
  });

  it('reset before any response (upstream accepts, then destroys the socket): 502 JSON', async () => {
    faults++;
    f.upstream.handler = (req) => req.socket.destroy();
    const r = await exchange(f.gate.port, get('Connection: close\r\n'), { quietMs: 3_000 });
    measured.reset502 = Math.round(r.ms);
    expect(r.statuses).toEqual([502]);
    expect(firstBody(r.text)).toEqual({ code: 50200, message: 'Bad gateway' });
    expect(r.closed).toBe(true);
    await stillServing();
  });

  it('a raw TCP upstream that answers garbage: 502 JSON', async () => {
    const bad: Server = createServer((s) => {
      s.on('error', () => {});
      s.on('data', () => s.end('NOT HTTP AT ALL\r\n\r\n'));
    });
    await new Promise<void>((r) => bad.listen(0, '127.0.0.1', r));
    const gate = await startKeygate({
      upstream: `http://127.0.0.1:${(bad.address() as { port: number }).port}`,
      keys: KEYS,
    });
    try {
      faults++;
      const r = await exchange(gate.port, get('Connection: close\r\n'), { quietMs: 3_000 });
      expect(r.statuses).toEqual([502]);
      expect(r.ms).toBeLessThan(WITHIN_MS);
    } finally {
      await gate.close();
      bad.close();
    }
  });

  it('reset mid-response: the client connection is cut promptly (status line already sent), Keygate keeps serving', async () => {
    faults++;
    f.upstream.handler = (_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('partial');
      setTimeout(() => res.socket?.destroy(), 30);
    };
    const r = await exchange(f.gate.port, get(), { quietMs: 3_000 });
    measured.resetMidResponseCut = Math.round(r.ms);
    expect(r.statuses).toEqual([200]);
    expect(r.text.endsWith('partial')).toBe(true);
    expect(r.closed).toBe(true);
    expect(r.ms).toBeLessThan(WITHIN_MS);
    await stillServing();
  });

  it('stall before the response headers: 504 JSON within the configured timeout', async () => {
    faults++;
    f.upstream.handler = () => {}; // never answers
    const r = await exchange(f.gate.port, get('Connection: close\r\n'), { quietMs: 5_000 });
    measured.stall504 = Math.round(r.ms);
    expect(r.statuses).toEqual([504]);
    expect(firstBody(r.text)).toEqual({ code: 50400, message: 'Gateway timeout' });
    expect(r.closed).toBe(true);
    expect(r.ms).toBeGreaterThanOrEqual(UPSTREAM_TIMEOUT_MS - 20);
    expect(r.ms).toBeLessThan(WITHIN_MS);
    await stillServing();
  });

  it('stall before the response headers, keep-alive client: 504 and the connection stays usable', async () => {
    faults++;
    let first = true;
    f.upstream.handler = (_req, res) => {
      if (first) {
        first = false;
        return;
      }
      res.end('second');
    };
    const r = await exchange(f.gate.port, [get(), 900, get()], { quietMs: 3_000 });
    expect(r.statuses).toEqual([504, 200]);
    expect(r.text.endsWith('second')).toBe(true);
  });

  it('stall mid-response (headers sent, then silence): the client connection is cut after the timeout', async () => {
    faults++;
    f.upstream.handler = (_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('started');
    };
    const r = await exchange(f.gate.port, get(), { quietMs: 5_000 });
    measured.stallMidResponseCut = Math.round(r.ms);
    expect(r.statuses).toEqual([200]);
    expect(r.closed).toBe(true);
    expect(r.ms).toBeGreaterThanOrEqual(UPSTREAM_TIMEOUT_MS - 20);
    expect(r.ms).toBeLessThan(WITHIN_MS);
    await stillServing();
  });

  it('stall with Expect: 100-continue: still 504 within the timeout', async () => {
    faults++;
    f.upstream.handler = () => {};
    const r = await exchange(
      f.gate.port,
      [
        `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('good', SECRET)}\r\nExpect: 100-continue\r\nContent-Length: 3\r\nConnection: close\r\n\r\n`,
        50,
        'abc',
      ],
      { quietMs: 5_000 },
    );
    measured.stallExpect504 = Math.round(r.ms);
    expect(r.statuses).toEqual([100, 504]);
    expect(r.ms).toBeLessThan(WITHIN_MS);
  });

  it('upstream never reads the request body: 504 within the timeout', async () => {
    faults++;
    f.upstream.handler = (req) => req.pause();
    const big = 'x'.repeat(4 * 1024 * 1024);
    const r = await exchange(
      f.gate.port,
      `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('good', SECRET)}\r\nContent-Length: ${big.length}\r\nConnection: close\r\n\r\n${big}`,
      { quietMs: 5_000 },
    );
    measured.stallReadingBody504 = Math.round(r.ms);
    expect(r.statuses).toEqual([504]);
    expect(r.closed).toBe(true);
    expect(r.ms).toBeLessThan(WITHIN_MS + 1_000);
    await stillServing();
  });

  it('after all of the above, the agent holds no stray upstream connections', async () => {
    await settle(200);
    // Idle keep-alive sockets may remain; stalled or reset exchanges must not.
    expect(await f.upstream.connections()).toBeLessThanOrEqual(2);
  });
});
