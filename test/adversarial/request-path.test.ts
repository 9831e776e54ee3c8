import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectNothingForwarded, KEYS, SECRET, settle, startFixture, type Fixture } from '../helpers/adversarial.js';
import { parseExposition, valueOf } from '../helpers/exposition.js';
import { startKeygate } from '../helpers/keygate.js';
import { token } from '../helpers/tokens.js';
import { headerNames } from '../helpers/recording-upstream.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

/**
 * The six ways forwarding broke Keygate's promises before it owned the request
 * path (issue "Own the request path"). Each case checks the client's answer
 * and the exact bytes the recording upstream received.
 */
const SMUGGLED = `GET /api/v3/admin HTTP/1.1\r\nHost: x\r\nX-Api-Key-Id: admin\r\n\r\n`;
const hex = (s: string) => Buffer.byteLength(s).toString(16);
/** The head of the first request on the upstream's wire frames the body exactly once: chunked, or its exact length. */
function expectFramedOnce(wire: string, body: string) {
  const head = wire.slice(0, wire.indexOf('\r\n\r\n') + 2);
  const chunked = /\r\ntransfer-encoding: chunked\r\n/i.test(head);
  const lengths = [...head.matchAll(/\r\ncontent-length: *(\d+)\r\n/gi)].map((m) => Number(m[1]));
  expect(chunked ? 1 : lengths.length, head).toBe(1);
  if (!chunked) expect(lengths[0]).toBe(Buffer.byteLength(body));
}

describe('adversarial: Keygate owns the request path', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await startFixture();
  });
  afterAll(() => f.close());
  beforeEach(() => f.upstream.reset());

  describe("1. Connection cannot name framing, Host or Keygate's headers", () => {
    const cases: Array<[string, string, string, boolean]> = [];
    for (const method of ['GET', 'HEAD', 'DELETE', 'OPTIONS']) {
      const path = method === 'DELETE' || method === 'OPTIONS' ? '/api/v3/items/1' : '/api/v3/files/a';
      for (const named of [
        'content-length',
        'Content-Length',
        'transfer-encoding',
        'close, transfer-encoding',
        'content-length, host, x-api-key-id, x-forwarded-for',
      ]) {
        cases.push([`${method} + Connection: ${named} + Content-Length body`, method, `${path}`, false]);
        cases.push([`${method} + Connection: ${named} + chunked body`, method, `${path}`, true]);
      }
    }
    // The public OPTIONS route: no credentials needed at all.
    cases.push(['public OPTIONS + Connection: content-length, no credentials', 'OPTIONS', '/status', false]);

    it.each(cases)('%s: one request upstream, body intact, one X-Api-Key-Id', async (name, method, path, chunked) => {
      const connection = /Connection: (.*) \+/.exec(name)?.[1] ?? 'content-length';
      const auth = path === '/status' ? '' : f.auth();
      const framing = chunked
        ? `Transfer-Encoding: chunked\r\n\r\n${hex(SMUGGLED)}\r\n${SMUGGLED}\r\n0\r\n\r\n`
        : `Content-Length: ${Buffer.byteLength(SMUGGLED)}\r\n\r\n${SMUGGLED}`;
      const r = await exchange(
        f.gate.port,
        `${method} ${path} HTTP/1.1\r\nHost: x\r\n${auth}Connection: ${connection}\r\n${framing}`,
      );
      // Until the body has fully arrived upstream (a loaded machine may take a while), then a little more.
      for (let waited = 0; waited < 3_000 && !f.upstream.received[0]?.complete; waited += 20) await settle(20);
      await settle(50);
      expect(r.statuses).toEqual([200]);
      expect(f.upstream.received.map((a) => `${a.method} ${a.url}`)).toEqual([`${method} ${path}`]);
      expectFramedOnce(f.upstream.wire(), SMUGGLED);
      const got = f.upstream.received[0]!;
      expect(got.body).toBe(SMUGGLED);
      const ids = headerNames(got.rawHeaders).filter((n) => n.toLowerCase() === 'x-api-key-id');
      expect(ids).toHaveLength(path === '/status' ? 0 : 1);
      if (path !== '/status') expect(got.headers['x-api-key-id']).toBe('key-good');
      expect(got.headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(got.headers.host).toBe('x');
    });

    it('Connection may still remove an extension hop-by-hop header', async () => {
      const r = await exchange(
        f.gate.port,
        `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\n${f.auth()}Connection: x-trace-hop\r\nX-Trace-Hop: 1\r\nX-Kept: 2\r\n\r\n`,
      );
      expect(r.statuses).toEqual([200]);
      await settle();
      expect(f.upstream.received[0]!.headers['x-trace-hop']).toBeUndefined();
      expect(f.upstream.received[0]!.headers['x-kept']).toBe('2');
    });
  });

  describe('2. a request with more header fields than Keygate can see whole is refused', () => {
    const fillers = (n: number) => Array.from({ length: n }, (_, i) => `F${i}: v\r\n`).join('');
    it('~2,000 fillers, then Content-Length and a body holding a request: 431, nothing forwarded', async () => {
      const r = await exchange(
        f.gate.port,
        `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\n${f.auth()}${fillers(1_998)}Content-Length: ${Buffer.byteLength(SMUGGLED)}\r\n\r\n${SMUGGLED}`,
      );
      expect(r.statuses).toEqual([431]);
      expect(firstBody(r.text)).toEqual({ code: 43100, message: 'Request header fields too large' });
      expect(r.closed).toBe(true);
      await settle();
      expectNothingForwarded(f.upstream);
    });
    it('a duplicate Authorization placed past the limit: 431, nothing forwarded', async () => {
      const r = await exchange(
        f.gate.port,
        `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\n${f.auth()}${fillers(150)}Authorization: Bearer ${f.tok()}\r\n\r\n`,
      );
      expect(r.statuses).toEqual([431]);
      await settle();
      expectNothingForwarded(f.upstream);
    });
    it('exactly at the limit (100 fields) is served; one more is refused', async () => {
      // Host + Authorization + 98 fillers = 100 fields.
      const at = await exchange(
        f.gate.port,
        `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\n${f.auth()}${fillers(98)}\r\n`,
      );
      expect(at.statuses).toEqual([200]);
      const over = await exchange(
        f.gate.port,
        `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\n${f.auth()}${fillers(99)}\r\n`,
      );
      expect(over.statuses).toEqual([431]);
      await settle();
      expect(f.upstream.received).toHaveLength(1);
    });
  });

  describe('6. the path is forwarded byte for byte', () => {
    it.each([
      '/api/v3/files/http:/x',
      '/api/v3/files/a:b@c',
      "/api/v3/files/it's",
      '/api/v3/files/%41%20b',
      '/api/v3/files/x?u=http://y/&z=%2F',
    ])('%s', async (target) => {
      const r = await exchange(f.gate.port, `GET ${target} HTTP/1.1\r\nHost: x\r\n${f.auth()}\r\n`);
      await settle();
      if (r.statuses[0] === 200) {
        expect(f.upstream.received.map((a) => a.url)).toEqual([target]);
        expect(f.upstream.wire().startsWith(`GET ${target} HTTP/1.1\r\n`)).toBe(true);
      } else {
        // Refused at step 1 (a structure-hiding escape): then nothing at all reaches the upstream.
        expect(r.statuses).toEqual([400]);
        expectNothingForwarded(f.upstream);
      }
    });
  });
});

/** A raw TCP upstream answering every request with fixed bytes. */
async function rawUpstream(answer: string): Promise<{ url: string; server: Server; requests: () => number }> {
  let requests = 0;
  const server = createServer((s: Socket) => {
    s.on('error', () => {});
    s.on('data', () => {
      requests++;
      s.write(answer);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server, requests: () => requests };
}

describe('adversarial: what comes back from the upstream is checked before it is relayed', () => {
  const get = () =>
    `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('good', SECRET)}\r\nConnection: close\r\n\r\n`;
  const answers: Array<[string, string]> = [
    ['status 099 (below 100)', 'HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok'],
    ['status 000', 'HTTP/1.1 000 Zero\r\nContent-Length: 2\r\n\r\nok'],
    ['status 600', 'HTTP/1.1 600 Big\r\nContent-Length: 2\r\n\r\nok'],
    ['status 999', 'HTTP/1.1 999 Bigger\r\nContent-Length: 2\r\n\r\nok'],
    ['control character in the reason phrase', 'HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nok'],
    ['ESC in the reason phrase', 'HTTP/1.1 200 \x1b[31mred\r\nContent-Length: 2\r\n\r\nok'],
    [
      '101 Switching Protocols (never requested)',
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
    ],
    ['100 Continue that was never asked for, then nothing', 'HTTP/1.1 100 Continue\r\n\r\n'],
    ['a NUL in a header value', 'HTTP/1.1 200 OK\r\nX-Bad: a\x00b\r\nContent-Length: 2\r\n\r\nok'],
  ];
  it.each(answers)(
    '%s: 502 50200, no crash, in-flight back to 0, the next request is served',
    async (_name, answer) => {
      const bad = await rawUpstream(answer);
      const gate = await startKeygate({ upstream: bad.url, keys: KEYS, env: { KEYGATE_UPSTREAM_TIMEOUT_MS: '1000' } });
      try {
        for (let i = 0; i < 3; i++) {
          const r = await exchange(gate.port, get(), { quietMs: 3_000 });
          expect(r.statuses).toEqual([502]);
          expect(firstBody(r.text)).toEqual({ code: 50200, message: 'Bad gateway' });
          expect(r.text).not.toContain('Switching');
        }
        expect(bad.requests()).toBeGreaterThanOrEqual(3);
        const metrics = parseExposition(await (await fetch(`${gate.adminUrl}/metrics`)).text());
        await settle();
        expect(
          valueOf(parseExposition(await (await fetch(`${gate.adminUrl}/metrics`)).text()), 'keygate_inflight_requests'),
        ).toBe(0);
        expect(
          valueOf(metrics, 'keygate_auth_rejections_total', { code: '50200', reason: 'upstream_bad_response' }),
        ).toBe(3);
      } finally {
        await gate.close();
        bad.server.close();
      }
    },
  );

  it('an informational 103 before the answer is not relayed; the final answer is', async () => {
    const up = await rawUpstream(
      'HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
    );
    const gate = await startKeygate({ upstream: up.url, keys: KEYS });
    try {
      const r = await exchange(gate.port, get(), { quietMs: 3_000 });
      expect(r.statuses).toEqual([200]);
      expect(r.text.endsWith('ok')).toBe(true);
    } finally {
      await gate.close();
      up.server.close();
    }
  });
});

describe('adversarial: slow clients cannot starve the upstream pool', () => {
  const slowBody = (port: number, tok: string) =>
    exchange(
      port,
      [
        `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${tok}\r\nContent-Length: 100\r\n\r\n`,
        'a',
        400,
        'b',
        400,
        'c',
        400,
        'd',
        400,
        'e',
        400,
        'f',
      ],
      { quietMs: 3_000, maxMs: 8_000 },
    );

  it('bodies below the minimum rate are cut (408 40800) and a waiting request is then served', async () => {
    const f = await startFixture({
      env: {
        KEYGATE_UPSTREAM_MAX_SOCKETS: '2',
        KEYGATE_MIN_BODY_BYTES_PER_SECOND: '64',
        KEYGATE_BODY_RATE_GRACE_MS: '500',
        KEYGATE_UPSTREAM_QUEUE_TIMEOUT_MS: '5000',
      },
    });
    try {
      const slow = [slowBody(f.gate.port, f.tok()), slowBody(f.gate.port, f.tok())];
      await settle(200); // both hold an upstream socket now
      const started = performance.now();
      const next = await exchange(
        f.gate.port,
        `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\n${f.auth()}Connection: close\r\n\r\n`,
        { quietMs: 3_000 },
      );
      expect(next.statuses).toEqual([200]);
      // Served once the rate minimum cut the slow bodies: without it, the request would have waited the whole queue
      // timeout (5 s) and got 503. The status says which happened; the bound is that timeout, not a speed.
      expect(performance.now() - started).toBeLessThan(5_000);
      for (const r of await Promise.all(slow)) {
        expect(r.statuses).toEqual([408]);
        expect(firstBody(r.text)).toEqual({ code: 40800, message: 'Request timeout' });
        expect(r.closed).toBe(true);
      }
      // The slow bodies never completed upstream.
      expect(f.upstream.received.filter((a) => a.method === 'POST' && a.complete)).toHaveLength(0);
      expect(f.upstream.received.filter((a) => a.method === 'GET')).toHaveLength(1);
    } finally {
      await f.close();
    }
  });

  it('with no rate minimum, a request waits for a connection at most the queue timeout (503 50300)', async () => {
    const f = await startFixture({
      env: {
        KEYGATE_UPSTREAM_MAX_SOCKETS: '2',
        KEYGATE_MIN_BODY_BYTES_PER_SECOND: '0',
        KEYGATE_UPSTREAM_QUEUE_TIMEOUT_MS: '300',
      },
    });
    try {
      const slow = [slowBody(f.gate.port, f.tok()), slowBody(f.gate.port, f.tok())];
      await settle(200);
      const next = await exchange(
        f.gate.port,
        `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\n${f.auth()}Connection: close\r\n\r\n`,
        { quietMs: 3_000 },
      );
      expect(next.statuses).toEqual([503]);
      expect(firstBody(next.text)).toEqual({ code: 50300, message: 'Service unavailable' });
      expect(next.ms).toBeLessThan(2_000);
      const metrics = parseExposition(await (await fetch(`${f.gate.adminUrl}/metrics`)).text());
      expect(valueOf(metrics, 'keygate_auth_rejections_total', { code: '50300', reason: 'upstream_busy' })).toBe(1);
      await Promise.all(slow);
      await settle(100);
      // The queued GET never reached the upstream after its client was answered.
      expect(f.upstream.received.filter((a) => a.method === 'GET')).toHaveLength(0);
    } finally {
      await f.close();
    }
  });
});
