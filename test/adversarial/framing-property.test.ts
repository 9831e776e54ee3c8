import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DOCUMENTED_STATUSES, settle, startFixture, type Fixture } from '../helpers/adversarial.js';
import { headerNames } from '../helpers/recording-upstream.js';
import { exchange } from '../helpers/raw-socket.js';
import { guard } from '../helpers/slowdown.js';

/**
 * Random header lists against the forwarding path: any mix of Connection
 * tokens, framing headers, header counts near the limit and bodies on every
 * method. Whatever the client sends, the upstream gets exactly one request per
 * client request, with the client's body intact and exactly one X-Api-Key-Id;
 * or Keygate refuses with a documented status and nothing reaches the upstream.
 */
const RUNS = Number(process.env.KEYGATE_PROPERTY_RUNS ?? 150);
const MAX_HEADERS = 100; // KEYGATE_MAX_HEADER_COUNT's default

const CONNECTION_TOKENS = [
  'content-length',
  'transfer-encoding',
  'host',
  'x-api-key-id',
  'x-forwarded-for',
  'x-request-id',
  'authorization',
  'keep-alive',
  'close',
  'upgrade',
  'te',
  'x-extra',
  'X-Api-Key',
  'Content-Length',
];
const METHODS: Array<[string, string]> = [
  ['GET', '/api/v3/viewer/accounts'],
  ['GET', '/api/v3/files/a'],
  ['HEAD', '/api/v3/files/a'],
  ['POST', '/api/v3/items/1'],
  ['PUT', '/api/v3/items/1'],
  ['PATCH', '/api/v3/items/1'],
  ['DELETE', '/api/v3/items/1'],
  ['OPTIONS', '/api/v3/items/1'],
  ['OPTIONS', '/status'],
  ['POST', '/status'],
];
// A body that, if it were ever read as a request, would claim another identity.
const bodyText = fc.oneof(
  fc.constant(''),
  fc.constant('GET /api/v3/admin HTTP/1.1\r\nHost: x\r\nX-Api-Key-Id: admin\r\n\r\n'),
  fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 200 }),
);

const request = fc.record({
  target: fc.constantFrom(...METHODS),
  connection: fc.option(fc.array(fc.constantFrom(...CONNECTION_TOKENS), { minLength: 1, maxLength: 4 }), {
    nil: undefined,
  }),
  framing: fc.constantFrom('content-length', 'chunked', 'none', 'content-length-zero'),
  body: bodyText,
  fillers: fc.oneof(fc.integer({ min: 0, max: 5 }), fc.integer({ min: MAX_HEADERS - 8, max: MAX_HEADERS + 3 })),
  spoofId: fc.boolean(),
  extraKeepAlive: fc.boolean(),
});

describe('adversarial: framing property (fast-check)', () => {
  let f: Fixture;
  let tried = 0;
  let forwarded = 0;
  beforeAll(async () => {
    f = await startFixture();
  });
  afterAll(async () => {
    console.log(`[framing-property] ${tried} random requests, ${forwarded} forwarded`);
    await f.close();
  });
  beforeEach(() => f.upstream.reset());

  it(
    'one client request → at most one upstream request, body intact, one X-Api-Key-Id',
    async () => {
      await fc.assert(
        fc.asyncProperty(request, async (r) => {
          tried++;
          f.upstream.reset();
          const [method, path] = r.target;
          const isPublic = path === '/status';
          const lines: string[] = ['Host: x'];
          if (!isPublic) lines.push(`Authorization: Bearer ${f.tok()}`);
          if (r.spoofId) lines.push('X-Api-Key-Id: admin');
          if (r.extraKeepAlive) lines.push('Keep-Alive: timeout=600');
          // "close" always, so each exchange ends when Keygate closes instead of on a quiet timer.
          lines.push(`Connection: ${[...(r.connection ?? []), 'close'].join(', ')}`);
          for (let i = 0; i < r.fillers; i++) lines.push(`X-Fill-${i}: ${i}`);
          let body = '';
          if (r.framing === 'content-length') {
            lines.push(`Content-Length: ${Buffer.byteLength(r.body)}`);
            body = r.body;
          } else if (r.framing === 'content-length-zero') {
            lines.push('Content-Length: 0');
          } else if (r.framing === 'chunked') {
            lines.push('Transfer-Encoding: chunked');
            body = (r.body ? `${Buffer.byteLength(r.body).toString(16)}\r\n${r.body}\r\n` : '') + '0\r\n\r\n';
          }
          const sentBody = r.framing === 'content-length' || r.framing === 'chunked' ? r.body : '';
          const answer = await exchange(
            f.gate.port,
            `${method} ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n${body}`,
            { quietMs: 2_000, maxMs: 5_000 },
          );
          await settle(20);
          const status = answer.statuses[0] ?? 0;
          expect(answer.statuses.length, answer.text).toBeLessThanOrEqual(1);
          if (status === 200) {
            forwarded++;
            expect(f.upstream.received.map((a) => `${a.method} ${a.url}`)).toEqual([`${method} ${path}`]);
            const got = f.upstream.received[0]!;
            expect(got.complete).toBe(true);
            expect(got.body).toBe(sentBody);
            const ids = headerNames(got.rawHeaders).filter((n) =>
              n
                .toLowerCase()
                .replace(/[^a-z0-9]/g, '-')
                .startsWith('x-api-key'),
            );
            expect(ids).toEqual(isPublic ? [] : ['x-api-key-id']);
            if (!isPublic) expect(got.headers['x-api-key-id']).toBe('key-good');
            expect(lines.length).toBeLessThanOrEqual(MAX_HEADERS);
          } else {
            expect(DOCUMENTED_STATUSES.has(status), answer.text).toBe(true);
            expect(status).toBeGreaterThanOrEqual(400);
            expect(f.upstream.received).toEqual([]);
            expect(f.upstream.wire()).toBe('');
          }
        }),
        { numRuns: RUNS },
      );
    },
    guard(180_000),
  );
});
