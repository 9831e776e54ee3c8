import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  DOCUMENTED_CODES,
  DOCUMENTED_STATUSES,
  expectNothingForwarded,
  OTHER_SECRET,
  SECRET,
  settle,
  startFixture,
  type Fixture,
} from '../helpers/adversarial.js';
import { b64url, HS256, nowNonce, sign, token } from '../helpers/tokens.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';

/**
 * Property tests over real sockets. Keygate runs in this process, so a crash
 * fails the run. Runs per property are kept modest (the suite shares 2 cores);
 * raise KEYGATE_PROPERTY_RUNS to search harder.
 */
const RUNS = Number(process.env.KEYGATE_PROPERTY_RUNS ?? 150);
const B64URL = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'];
const b64urlString = (max: number, min = 0) =>
  fc.string({ unit: fc.constantFrom(...B64URL), minLength: min, maxLength: max });
const visible = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  maxLength: 80,
});
const TOKEN_CHARS = [..."!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"];
const headerName = fc.string({ unit: fc.constantFrom(...TOKEN_CHARS), minLength: 1, maxLength: 24 });
// Framing headers are exercised by the smuggling suite; here they would only make requests wait for a body.
const FRAMING = new Set(['content-length', 'transfer-encoding', 'expect', 'host', 'connection', 'upgrade']);

/** One request on a fresh connection that the server closes after answering. */
async function ask(f: Fixture, head: string): Promise<{ status: number; code: unknown; text: string }> {
  const r = await exchange(f.gate.port, `${head}Connection: close\r\n\r\n`, { quietMs: 2_000, maxMs: 5_000 });
  const body = firstBody(r.text) as { code?: unknown } | undefined;
  return { status: r.statuses[0] ?? 0, code: body?.code, text: r.text };
}

function expectDocumented(answer: { status: number; code: unknown; text: string }): void {
  expect(DOCUMENTED_STATUSES.has(answer.status), answer.text).toBe(true);
  if (answer.code !== undefined) expect(DOCUMENTED_CODES.has(answer.code as number), answer.text).toBe(true);
}

describe('adversarial: property tests (fast-check)', () => {
  let f: Fixture;
  let tried = 0;
  /** A documented refusal, and nothing reached the upstream. */
  const expectRefused = (answer: { status: number; code: unknown; text: string }) => {
    expectDocumented(answer);
    expect(answer.status).toBeGreaterThanOrEqual(400);
    expect(f.upstream.received).toEqual([]);
  };
  beforeAll(async () => {
    f = await startFixture();
  });
  afterAll(async () => {
    console.log(`[property] ${tried} random requests sent`);
    await f.close();
  });
  beforeEach(() => f.upstream.reset());

  const get = (auth: string) => `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\n`;

  it('random token-shaped strings: never 2xx, always a documented answer, nothing forwarded', async () => {
    const dotted = fc.array(b64urlString(120), { minLength: 1, maxLength: 6 }).map((parts) => parts.join('.'));
    await fc.assert(
      fc.asyncProperty(fc.oneof(dotted, b64urlString(400), visible), async (tok) => {
        tried++;
        const answer = await ask(f, get(`Bearer ${tok}`));
        expectRefused(answer);
      }),
      { numRuns: RUNS },
    );
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('structured JWTs with random headers, claims and a wrong or forged signature: never 2xx', async () => {
    const header = fc.oneof(
      fc.constant(HS256),
      fc.record(
        {
          alg: fc.oneof(fc.constantFrom('HS256', 'none', 'HS512', 'RS256', 'hs256'), fc.string()),
          typ: fc.oneof(fc.constant('JWT'), fc.string()),
        },
        { requiredKeys: [] },
      ),
      fc.jsonValue(),
    );
    const claimsArb = fc.record(
      {
        type: fc.oneof(fc.constant('OpenAPIV2'), fc.jsonValue()),
        sub: fc.oneof(fc.constantFrom('good', 'other', 'nobody'), fc.jsonValue()),
        nonce: fc.oneof(
          fc.constant(null).map(() => nowNonce()),
          fc.string(),
          fc.bigInt().map(String),
          fc.double(),
        ),
        recv_window: fc.oneof(fc.constantFrom('1', '30', '60', '61', '0'), fc.jsonValue()),
        exp: fc.oneof(fc.integer(), fc.jsonValue()),
      },
      { requiredKeys: [] },
    );
    const signature = fc.oneof(
      fc.constant('wrong-secret'),
      fc.constant('other-secret'),
      b64urlString(43, 43).map((s) => ({ raw: s })),
    );
    await fc.assert(
      fc.asyncProperty(header, claimsArb, signature, async (h, c, s) => {
        tried++;
        let tok: string;
        if (typeof s === 'object')
          tok = `${b64url(JSON.stringify(h) ?? 'null')}.${b64url(JSON.stringify(c) ?? 'null')}.${s.raw}`;
        else
          tok = sign(
            h,
            c,
            s === 'wrong-secret' ? 'wrong-secret-0123456789' : c.sub === 'other' ? SECRET : OTHER_SECRET,
          );
        const answer = await ask(f, get(`Bearer ${tok}`));
        expectRefused(answer);
      }),
      { numRuns: RUNS },
    );
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('any edit of a fresh valid token (replace, insert or delete one character) is refused', async () => {
    const edit = fc.record({
      at: fc.nat(),
      kind: fc.constantFrom('replace', 'insert', 'delete'),
      ch: fc.constantFrom(...B64URL, '.', '=', '+', '/'),
    });
    await fc.assert(
      fc.asyncProperty(edit, async ({ at, kind, ch }) => {
        const original = token('good', SECRET);
        const i = at % original.length;
        const edited =
          kind === 'delete'
            ? original.slice(0, i) + original.slice(i + 1)
            : original.slice(0, i) + ch + original.slice(kind === 'replace' ? i + 1 : i);
        fc.pre(edited !== original);
        tried++;
        const answer = await ask(f, get(`Bearer ${edited}`));
        expectDocumented(answer);
        expect(answer.status, `${kind} ${JSON.stringify(ch)} at ${i}`).toBeGreaterThanOrEqual(400);
        expect(f.upstream.received).toEqual([]);
      }),
      { numRuns: RUNS },
    );
  });

  it('random extra headers around a missing or bad token: never 2xx, documented answers, no crash', async () => {
    const headers = fc
      .array(fc.tuple(headerName, visible), { maxLength: 12 })
      .map((hs) => hs.filter(([n]) => !FRAMING.has(n.toLowerCase())));
    const auth = fc.oneof(
      fc.constant(''),
      fc.constant('Authorization: Bearer a.b.c\r\n'),
      visible.map((v) => `Authorization: ${v}\r\n`),
    );
    await fc.assert(
      fc.asyncProperty(headers, auth, async (hs, a) => {
        tried++;
        const head = `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\n${a}${hs.map(([n, v]) => `${n}: ${v}\r\n`).join('')}`;
        const answer = await ask(f, head);
        expectRefused(answer);
      }),
      { numRuns: RUNS },
    );
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('random paths with a valid token: refused, or forwarded with exactly the bytes that were checked', async () => {
    const seg = fc.oneof(
      fc.string({ unit: fc.constantFrom(..."abcXYZ019-._~!$&'()*+,=:@%;\\"), maxLength: 8 }),
      fc.constantFrom(
        '.',
        '..',
        '%2e',
        '%2E%2e',
        '%2f',
        '%5C',
        '%00',
        '%41',
        '%C3%A9',
        '%zz',
        'files',
        'viewer',
        'accounts',
      ),
    );
    const target = fc
      .tuple(fc.array(seg, { maxLength: 5 }), fc.option(visible.map((q) => q.replace(/[ #]/g, ''))))
      .map(([segs, q]) => `/api/v3/files/${segs.join('/')}${q === null ? '' : `?${q}`}`);
    await fc.assert(
      fc.asyncProperty(target, async (t) => {
        tried++;
        f.upstream.reset();
        const answer = await ask(f, `GET ${t} HTTP/1.1\r\nHost: x\r\n${f.auth()}`);
        expectDocumented(answer.status === 200 ? { ...answer, status: 400 } : answer);
        if (answer.status === 200) {
          await settle(5);
          expect(f.upstream.received.map((a) => a.url)).toEqual([t]);
        } else {
          expect([400, 403, 404]).toContain(answer.status);
          expect(f.upstream.received).toEqual([]);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('random bytes on the socket never crash Keygate and never reach the upstream', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 400 }), async (bytes) => {
        tried++;
        await exchange(f.gate.port, Buffer.from(bytes), { quietMs: 50, maxMs: 1_000 });
      }),
      { numRuns: RUNS },
    );
    await settle();
    expectNothingForwarded(f.upstream);
    // Still serving.
    const answer = await ask(f, `GET /api/v3/viewer/accounts HTTP/1.1\r\nHost: x\r\n${f.auth()}`);
    expect(answer.status).toBe(200);
  });
});
