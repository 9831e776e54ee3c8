import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { codeOf, ERRORS } from '../../src/errors.js';
import {
  expectNothingForwarded,
  OTHER_SECRET,
  SECRET,
  settle,
  startFixture,
  type Fixture,
} from '../helpers/adversarial.js';
import { bearer, send } from '../helpers/http.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { b64url, claims, HS256, nowNonce, sign, token } from '../helpers/tokens.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';
import { MALFORMED_TOKENS, type TokenKit } from '../helpers/cases/malformed-tokens.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const ok = { type: 'OpenAPIV2', sub: 'good' };
const payload = (extra: Record<string, unknown> = {}) => ({ ...ok, nonce: nowNonce(), ...extra });
const parts = () => token('good', SECRET).split('.') as [string, string, string];
const raw = (h: string, p: string, s: string) => `${h}.${p}.${s}`;
/** Signs arbitrary header/payload JSON text (to keep duplicate keys, odd spacing...). */
const signText = (headerJson: string, payloadJson: string, secret = SECRET) =>
  sign(b64url(headerJson), b64url(payloadJson), secret);

type Case = [name: string, make: () => string, status: number, code?: number];

/** Tokens for key "good", each with a fresh nonce, for the shared table. */
const kit: TokenKit = {
  claims: (extra = {}) => payload(extra),
  sign: (header, body, alg) => sign(header, body, SECRET, alg),
  parts,
};

/** Hostile tokens, end to end over real sockets. Everything but the valid ones must be refused and must not reach the upstream. */
const CASES: Case[] = [
  ['valid token (control)', () => token('good', SECRET), 200],
  // Refused by decodeToken: the table test/unit/decode-token.test.ts calls decodeToken with.
  ...MALFORMED_TOKENS.map(([name, make, reason]): Case => [
    name,
    () => make(kit),
    ERRORS[codeOf(reason)].status,
    codeOf(reason),
  ]),
  // alg / header
  [
    'jwk header with the attacker’s own secret',
    () =>
      sign(
        { ...HS256, jwk: { kty: 'oct', k: b64url('attacker-secret-0123456789') } },
        payload(),
        'attacker-secret-0123456789',
      ),
    401,
    40106,
  ],
  // shape
  [
    'signature with one flipped character',
    () => {
      const [h, p, s] = parts();
      return raw(h, p, (s[0] === 'A' ? 'B' : 'A') + s.slice(1));
    },
    401,
    40106,
  ],
  // numbers where strings are required
  [
    'nonce as BigInt-looking number text',
    () => signText(JSON.stringify(HS256), `{"type":"OpenAPIV2","sub":"good","nonce":${nowNonce()}}`),
    401,
    40106,
  ],
  // nonce forms
  ['nonce "0"', () => sign(HS256, payload({ nonce: '0' }), SECRET), 401, 40106],
  ['nonce 31 s in the past', () => sign(HS256, payload({ nonce: nowNonce(-31_000) }), SECRET), 401, 40106],
  [
    'nonce in milliseconds, not nanoseconds',
    () => sign(HS256, payload({ nonce: String(Date.now()) }), SECRET),
    401,
    40106,
  ],
  // recv_window forms
  ['recv_window "60" (the cap)', () => sign(HS256, payload({ recv_window: '60' }), SECRET), 200],
  ['recv_window "1"', () => sign(HS256, payload({ recv_window: '1' }), SECRET), 200],
  // claims and keys
  ['exp in the past', () => sign(HS256, payload({ exp: Math.floor(Date.now() / 1000) - 1 }), SECRET), 401, 40106],
  ['exp 1e308', () => sign(HS256, payload({ exp: 1e308 }), SECRET), 200],
  ['nbf in the future', () => sign(HS256, payload({ nbf: Math.floor(Date.now() / 1000) + 60 }), SECRET), 401, 40106],
  ['signed with the other key’s secret', () => sign(HS256, payload(), OTHER_SECRET), 401, 40106],
  [
    'secret Base64-encoded before signing',
    () => sign(HS256, payload(), Buffer.from(SECRET).toString('base64')),
    401,
    40106,
  ],
  [
    'secret as raw bytes of its Base64 decoding',
    () => sign(HS256, payload(), Buffer.from(SECRET, 'base64')),
    401,
    40106,
  ],
  ['sub with a NUL byte', () => sign(HS256, payload({ sub: 'good\u0000' }), SECRET), 404, 10013],
  ['sub "../good"', () => sign(HS256, payload({ sub: '../good' }), SECRET), 404, 10013],
  ['sub "good:x" (store key separator)', () => sign(HS256, payload({ sub: 'good:x' }), SECRET), 404, 10013],
  ['sub "*"', () => sign(HS256, payload({ sub: '*' }), SECRET), 404, 10013],
  ['sub "GOOD" (case)', () => sign(HS256, payload({ sub: 'GOOD' }), SECRET), 404, 10013],
  // duplicate JSON members: the decoder and the verifier see the same (last) value
  [
    'duplicate sub, last one signed for',
    () => signText(JSON.stringify(HS256), `{"type":"OpenAPIV2","sub":"other","nonce":"${nowNonce()}","sub":"good"}`),
    200,
  ],
  [
    'duplicate sub, first one signed for',
    () => signText(JSON.stringify(HS256), `{"type":"OpenAPIV2","sub":"good","nonce":"${nowNonce()}","sub":"other"}`),
    401,
    40106,
  ],
  [
    'duplicate alg: none then HS256',
    () => signText('{"alg":"none","typ":"JWT","alg":"HS256"}', JSON.stringify(payload())),
    200,
  ],
  [
    'duplicate alg: HS256 then none',
    () => signText('{"alg":"HS256","typ":"JWT","alg":"none"}', JSON.stringify(payload())),
    401,
    40106,
  ],
];

describe.each(['memory', 'redis'] as const)('adversarial tokens end to end (%s store)', (kind) => {
  let f: Fixture;
  let redis: TestRedis | undefined;
  beforeAll(async () => {
    if (kind === 'redis') {
      redis = await startRedis({ shared: true });
      await redis.flush();
    }
    f = await startFixture(redis ? { redisUrl: redis.url } : {});
  });
  afterAll(async () => {
    await f?.close();
    await redis?.stop();
  });
  beforeEach(() => f.upstream.reset());

  it.each(CASES.map(([name, make, status, code]) => [name, status, code ?? '', make] as const))(
    '%s → %i %s',
    async (_name, status, code, make) => {
      const res = await send(f.gate.url, `${ACCOUNTS_PATH}?probe=1`, { headers: bearer(make()) });
      expect(res.status).toBe(status);
      await settle();
      if (status === 200) {
        expect(f.upstream.received.map((a) => a.url)).toEqual([`${ACCOUNTS_PATH}?probe=1`]);
        expect(f.upstream.received[0]!.headers['x-api-key-id']).toBe('key-good');
        expect(f.upstream.received[0]!.headers.authorization).toBeUndefined();
        return;
      }
      expect(res.headers['content-type']).toBe('application/json');
      expect(res.json()).toMatchObject({ code });
      expectNothingForwarded(f.upstream);
    },
  );

  it('a token too big for the header limit gets 431 and a closed connection, not a crash', async () => {
    const huge = sign(HS256, payload({ pad: 'x'.repeat(20_000) }), SECRET);
    const r = await exchange(
      f.gate.port,
      `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${huge}\r\n\r\n`,
    );
    expect(r.statuses).toEqual([431]);
    expect(r.closed).toBe(true);
    await settle();
    expectNothingForwarded(f.upstream);
    expect((await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)) })).status).toBe(200);
  });

  it('a token just under the token cap but with a bad signature gets 40106 (decoded, then refused)', async () => {
    const body = payload({ pad: 'x'.repeat(2_800) });
    const t = sign(HS256, body, 'wrong-secret-0123456789');
    expect(t.length).toBeLessThan(f.gate.config.limits.maxTokenBytes);
    const res = await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(t) });
    expect(res.json()).toEqual({ code: 40106, message: 'Invalid Token' });
    expectNothingForwarded(f.upstream);
  });

  it('sequential replay: the second use gets 40106 and only the first reaches the upstream', async () => {
    const t = token('good', SECRET);
    expect((await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(t) })).status).toBe(200);
    for (let i = 0; i < 5; i++) {
      const again = await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(t) });
      expect(again.json()).toEqual({ code: 40106, message: 'Invalid Token' });
    }
    await settle();
    expect(f.upstream.received).toHaveLength(1);
  });

  it('the same nonce value spelled with leading zeros is still a replay', async () => {
    const nonce = nowNonce();
    expect((await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET, { nonce })) })).status).toBe(
      200,
    );
    const res = await send(f.gate.url, ACCOUNTS_PATH, {
      headers: bearer(token('good', SECRET, { nonce: `0${nonce}` })),
    });
    expect(res.json()).toEqual({ code: 40106, message: 'Invalid Token' });
    await settle();
    expect(f.upstream.received).toHaveLength(1);
  });

  it('a replay with a different path or method is still a replay', async () => {
    const t = token('good', SECRET);
    expect((await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(t) })).status).toBe(200);
    expect((await send(f.gate.url, '/api/v3/items/7', { method: 'DELETE', headers: bearer(t) })).json()).toEqual({
      code: 40106,
      message: 'Invalid Token',
    });
    await settle();
    expect(f.upstream.received.map((a) => a.method)).toEqual(['GET']);
  });

  it('50 concurrent copies of one token: exactly one 200, 49 × 40106, one request upstream', async () => {
    const t = token('good', SECRET);
    const replies = await Promise.all(
      Array.from({ length: 50 }, () => send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(t) })),
    );
    expect(replies.filter((r) => r.status === 200)).toHaveLength(1);
    expect(replies.filter((r) => r.status === 401 && (r.json() as { code: number }).code === 40106)).toHaveLength(49);
    await settle();
    expect(f.upstream.received).toHaveLength(1);
  });

  it('50 concurrent tokens sharing one nonce under two keys: one 200 per key', async () => {
    const nonce = nowNonce();
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        send(f.gate.url, ACCOUNTS_PATH, {
          headers: bearer(i % 2 ? token('good', SECRET, { nonce }) : token('other', OTHER_SECRET, { nonce })),
        }),
      ),
    );
    expect(replies.filter((r) => r.status === 200)).toHaveLength(2);
    await settle();
    expect(f.upstream.received.map((a) => a.headers['x-api-key-id']).sort()).toEqual(['key-good', 'key-other']);
  });

  it('a forged token does not burn the nonce for the real client', async () => {
    const nonce = nowNonce();
    expect(
      (await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', OTHER_SECRET, { nonce })) })).status,
    ).toBe(401);
    expect((await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET, { nonce })) })).status).toBe(
      200,
    );
  });

  it('a token refused with 40106 carries the same body as the seed, whatever the reason', async () => {
    const bodies = new Set<string>();
    for (const t of [
      sign(HS256, claims('good', { nonce: '-1' }), SECRET),
      'a.b.c',
      sign({ alg: 'none' }, claims('good'), SECRET),
    ]) {
      const r = await exchange(
        f.gate.port,
        `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t}\r\n\r\n`,
      );
      bodies.add(JSON.stringify(firstBody(r.text)));
    }
    expect([...bodies]).toEqual(['{"code":40106,"message":"Invalid Token"}']);
  });
});
