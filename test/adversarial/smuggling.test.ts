import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectNothingForwarded, settle, startFixture, type Fixture } from '../helpers/adversarial.js';
import { headerNames } from '../helpers/recording-upstream.js';
import { exchange } from '../helpers/raw-socket.js';

/**
 * Request smuggling and framing, over raw sockets. Each case asserts the
 * answer, whether the connection was closed, and what the upstream got on
 * the wire: ambiguous framing is refused with 400 and a closed connection and
 * never reaches the upstream; bodies are never read as requests.
 */
describe('adversarial: smuggling and framing', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await startFixture();
  });
  afterAll(() => f.close());
  beforeEach(() => f.upstream.reset());

  const smuggled = 'GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\nX-Api-Key-Id: admin\r\n\r\n';
  const hex = (s: string) => Buffer.byteLength(s).toString(16);

  // Each request is sent twice: without credentials and with a valid token.
  const ambiguous: Array<[string, (auth: string) => string]> = [
    [
      'CL then TE',
      (a) =>
        `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
    ],
    [
      'TE then CL',
      (a) =>
        `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n${smuggled}`,
    ],
    [
      'TE: chunked, identity',
      (a) =>
        `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${smuggled}`,
    ],
    [
      'TE: identity',
      (a) =>
        `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding: identity\r\nContent-Length: 3\r\n\r\nabc`,
    ],
    [
      'TE: xchunked',
      (a) => `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n`,
    ],
    [
      'TE twice (chunked, identity)',
      (a) =>
        `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n`,
    ],
    [
      'space before colon in TE',
      (a) => `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n${smuggled}`,
    ],
    [
      'Content-Length twice, same value',
      (a) => `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc`,
    ],
    [
      'Content-Length twice, different values',
      (a) => `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd`,
    ],
    ['Content-Length list', (a) => `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Content-Length: 3, 3\r\n\r\nabc`],
    ['Content-Length +3', (a) => `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Content-Length: +3\r\n\r\nabc`],
    ['Content-Length -1', (a) => `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Content-Length: -1\r\n\r\nabc`],
    ['Content-Length 0x3', (a) => `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${a}Content-Length: 0x3\r\n\r\nabc`],
    ['bare LF line endings', (a) => `GET /api/v3/viewer/accounts HTTP/1.1\nHost: x\n${a.replace('\r\n', '\n')}\n`],
    ['bare LF after one header', (a) => `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\nX-A: b\r\n${a}\r\n`],
    ['bare CR inside the headers', (a) => `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\rX-A: b\r\n${a}\r\n`],
    ['NUL in a header value', (a) => `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n${a}\r\n`],
    ['NUL in a header name', (a) => `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\nX-\u0000A: ab\r\n${a}\r\n`],
    [
      'NUL in the Authorization value',
      (a) =>
        `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\n${a ? a.replace('Bearer ', 'Bearer \u0000') : 'Authorization: Bearer \u0000x\r\n'}\r\n`,
    ],
    [
      'obs-fold in another header',
      (a) => `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n${a}\r\n`,
    ],
    ['header without a colon', (a) => `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\nX-A b\r\n${a}\r\n`],
    ['missing Host on HTTP/1.1', (a) => `GET /api/v3/viewer/accounts HTTP/1.1\r\n${a}\r\n`],
    ['HTTP/2 preface', () => 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'],
    [
      'chunk size with 0x prefix',
      (a) => `POST /status HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n`,
    ],
  ];
  for (const [name, build] of ambiguous) {
    it.each([
      ['without credentials', false],
      ['with a valid token', true],
    ])(`${name} (%s) → 400, closed, nothing forwarded`, async (_label, withAuth) => {
      const r = await exchange(f.gate.port, build(withAuth ? f.auth() : ''));
      await settle();
      expect(r.statuses).toEqual([400]);
      expect(r.closed).toBe(true);
      expectNothingForwarded(f.upstream);
    });
  }

  it('Authorization split by obs-fold → 400, closed, nothing forwarded', async () => {
    const t = f.tok();
    const r = await exchange(
      f.gate.port,
      `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n ${t}\r\n\r\n`,
    );
    expect(r.statuses).toEqual([400]);
    expect(r.closed).toBe(true);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  // http-proxy used to rewrite a bodyless-looking DELETE/OPTIONS to Content-Length: 0 while still
  // streaming the chunked body after it: the body became a second request on the upstream connection.
  it.each([
    ['DELETE (authenticated)', 'DELETE', '/api/v3/items/1', true],
    ['OPTIONS (authenticated)', 'OPTIONS', '/api/v3/items/1', true],
    ['OPTIONS on a public route (no credentials)', 'OPTIONS', '/status', false],
  ])('chunked body on %s reaches the upstream as a body, never as a request', async (_name, method, path, withAuth) => {
    const r = await exchange(
      f.gate.port,
      `${method} ${path} HTTP/1.1\r\nHost: x\r\n${withAuth ? f.auth() : ''}Transfer-Encoding: chunked\r\n\r\n${hex(smuggled)}\r\n${smuggled}\r\n0\r\n\r\n`,
    );
    await settle(100);
    expect(r.statuses).toEqual([200]);
    expect(f.upstream.received.map((a) => `${a.method} ${a.url}`)).toEqual([`${method} ${path}`]);
    expect(f.upstream.received[0]!.body).toBe(smuggled);
    // Framed by Keygate from what its parser read: chunked, or (when the whole body had already
    // arrived) its exact length; never both, never neither, so the body stays a body.
    const wire = f.upstream.wire();
    const chunked = /\r\ntransfer-encoding: chunked\r\n/i.test(wire);
    const length = /\r\ncontent-length: (\d+)\r\n/i.exec(wire);
    expect(chunked !== (length !== null)).toBe(true);
    if (length) expect(Number(length[1])).toBe(Buffer.byteLength(smuggled));
  });

  it('pipelined: two requests without credentials → 401, 401, nothing forwarded', async () => {
    const req = 'GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\n\r\n';
    const r = await exchange(f.gate.port, req + req);
    expect(r.statuses).toEqual([401, 401]);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('pipelined: denied request, then a good one → 401, 200; only the good one forwarded', async () => {
    const r = await exchange(
      f.gate.port,
      `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\n\r\nGET /api/v3/viewer/accounts?second HTTP/1.1\r\nHost: x\r\n${f.auth()}\r\n`,
    );
    expect(r.statuses).toEqual([401, 200]);
    await settle();
    expect(f.upstream.received.map((a) => a.url)).toEqual(['/api/v3/viewer/accounts?second']);
    expect(f.upstream.received[0]!.headers['x-api-key-id']).toBe('key-good');
  });

  it('pipelined: good request, then one without credentials → 200, 401; only the first forwarded', async () => {
    const r = await exchange(
      f.gate.port,
      `GET /api/v3/viewer/accounts?first HTTP/1.1\r\nHost: x\r\n${f.auth()}\r\nGET /api/v3/viewer/accounts?second HTTP/1.1\r\nHost: x\r\n\r\n`,
    );
    expect(r.statuses).toEqual([200, 401]);
    await settle();
    expect(f.upstream.received.map((a) => a.url)).toEqual(['/api/v3/viewer/accounts?first']);
  });

  it('pipelined: a denied request carrying a request in its body → one 401, connection closed, body never parsed', async () => {
    const r = await exchange(
      f.gate.port,
      `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\nContent-Length: ${Buffer.byteLength(smuggled)}\r\n\r\n${smuggled}`,
    );
    expect(r.statuses).toEqual([401]);
    expect(r.closed).toBe(true);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('pipelined: a denied chunked request carrying a request in its body → one 401, closed', async () => {
    const r = await exchange(
      f.gate.port,
      `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer x.y.z\r\nTransfer-Encoding: chunked\r\n\r\n${hex(smuggled)}\r\n${smuggled}\r\n0\r\n\r\n`,
    );
    expect(r.statuses).toEqual([401]);
    expect(r.closed).toBe(true);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('pipelined: a refused target, then a good request → 400 and closed before the second is read', async () => {
    const r = await exchange(
      f.gate.port,
      `GET /api/v3/../admin HTTP/1.1\r\nHost: x\r\n${f.auth()}\r\nGET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\n${f.auth()}\r\n`,
    );
    expect(r.statuses).toEqual([400]);
    expect(r.closed).toBe(true);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('Expect: 100-continue without credentials gets no 100 Continue, a 401 and a closed connection', async () => {
    const r = await exchange(
      f.gate.port,
      'POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n',
    );
    expect(r.statuses).toEqual([401]);
    expect(r.closed).toBe(true);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('Expect: 100-continue with a valid token gets 100 Continue, then the upstream answer', async () => {
    const r = await exchange(f.gate.port, [
      `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${f.auth()}Expect: 100-continue\r\nContent-Length: 3\r\n\r\n`,
      100,
      'abc',
    ]);
    expect(r.statuses).toEqual([100, 200]);
    await settle();
    expect(f.upstream.received).toHaveLength(1);
    expect(f.upstream.received[0]).toMatchObject({ method: 'POST', url: '/api/v3/items/1', body: 'abc' });
    expect(f.upstream.received[0]!.headers.expect).toBeUndefined();
  });

  it('chunked trailers are not forwarded: neither the Trailer header nor trailer fields', async () => {
    const r = await exchange(
      f.gate.port,
      `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${f.auth()}Transfer-Encoding: chunked\r\nTrailer: X-Api-Key-Id, Authorization\r\n\r\n3\r\nabc\r\n0\r\nX-Api-Key-Id: admin\r\nAuthorization: Bearer forged\r\n\r\n`,
    );
    expect(r.statuses).toEqual([200]);
    await settle();
    const got = f.upstream.received[0]!;
    expect(got.body).toBe('abc');
    expect(got.rawTrailers).toEqual([]);
    expect(got.headers.trailer).toBeUndefined();
    expect(got.headers['x-api-key-id']).toBe('key-good');
    expect(f.upstream.wire()).not.toMatch(/admin|forged/);
  });

  it('CONNECT gets 400 and a closed connection, with or without credentials', async () => {
    for (const data of [
      `CONNECT 127.0.0.1:${f.upstream.port} HTTP/1.1\r\nHost: 127.0.0.1:${f.upstream.port}\r\n\r\n`,
      `CONNECT /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\n${f.auth()}\r\n`,
    ]) {
      const r = await exchange(f.gate.port, data);
      expect(r.statuses, data).toEqual([400]);
      expect(r.closed).toBe(true);
      expect(r.text).toContain('{"code":40000,"message":"Bad request target"}');
    }
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('Upgrade: websocket without credentials → 401, never 101, nothing forwarded', async () => {
    const r = await exchange(
      f.gate.port,
      'GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    expect(r.statuses).toEqual([401]);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('a WebSocket upgrade with a valid token to a route without upgrade: websocket → 400, never 101, nothing forwarded', async () => {
    f.upstream.handler = (req, res) => {
      // An upstream that would happily switch protocols if asked.
      if (req.headers.upgrade) {
        res.writeHead(101, { connection: 'upgrade', upgrade: String(req.headers.upgrade) });
        res.end();
        return;
      }
      res.end('plain');
    };
    const r = await exchange(
      f.gate.port,
      `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\n${f.auth()}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
    );
    expect(r.statuses).toEqual([400]);
    expect(r.text).toContain('"code":40000');
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('an Upgrade header without Connection: upgrade is forwarded as plain HTTP: the upstream never sees Upgrade', async () => {
    f.upstream.handler = (_req, res) => res.end('plain');
    const r = await exchange(
      f.gate.port,
      `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\n${f.auth()}Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
    );
    expect(r.statuses).toEqual([200]);
    await settle();
    const got = f.upstream.received[0]!;
    expect(got.headers.upgrade).toBeUndefined();
  });

  it('h2c upgrade on a public route is forwarded as plain HTTP, without Upgrade or HTTP2-Settings', async () => {
    const r = await exchange(
      f.gate.port,
      'GET /status HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n',
    );
    expect(r.statuses).toEqual([200]);
    await settle();
    const names = headerNames(f.upstream.received[0]!.rawHeaders).map((n) => n.toLowerCase());
    expect(names).not.toContain('upgrade');
    expect(names).not.toContain('http2-settings');
  });
});
