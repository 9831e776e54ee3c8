import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectNothingForwarded, OTHER_SECRET, SECRET, settle, startFixture, type Fixture } from '../helpers/adversarial.js';
import { bearer, send } from '../helpers/http.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { b64url, claims, HS256, nowNonce, sign, token } from '../helpers/tokens.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const ok = { type: 'OpenAPIV2', sub: 'good' };
const payload = (extra: Record<string, unknown> = {}) => ({ ...ok, nonce: nowNonce(), ...extra });
const withHeader = (header: unknown, extra: Record<string, unknown> = {}) => sign(header, payload(extra), SECRET);
const parts = () => token('good', SECRET).split('.') as [string, string, string];
const raw = (h: string, p: string, s: string) => `${h}.${p}.${s}`;
/** Signs arbitrary header/payload JSON text (to keep duplicate keys, odd spacing...). */
const signText = (headerJson: string, payloadJson: string, secret = SECRET) => sign(b64url(headerJson), b64url(payloadJson), secret);

type Case = [name: string, make: () => string, status: number, code?: number];

/** Hostile tokens, end to end over real sockets. Everything but the valid ones must be refused and must not reach the upstream. */
const CASES: Case[] = [
  ['valid token (control)', () => token('good', SECRET), 200],
  // alg / header
  ['alg none, empty signature', () => `${b64url(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${b64url(JSON.stringify(payload()))}.`, 401, 40106],
  ['alg none, HS256 signature', () => withHeader({ alg: 'none', typ: 'JWT' }), 401, 40106],
  ['alg None', () => withHeader({ alg: 'None', typ: 'JWT' }), 401, 40106],
  ['alg NONE', () => withHeader({ alg: 'NONE', typ: 'JWT' }), 401, 40106],
  ['alg HS384 (signed HS384)', () => sign({ alg: 'HS384', typ: 'JWT' }, payload(), SECRET, 'sha384'), 401, 40106],
  ['alg HS512 (signed HS512)', () => sign({ alg: 'HS512', typ: 'JWT' }, payload(), SECRET, 'sha512'), 401, 40106],
  ['alg HS384 header, HS256 signature', () => withHeader({ alg: 'HS384', typ: 'JWT' }), 401, 40106],
  ['alg RS256', () => withHeader({ alg: 'RS256', typ: 'JWT' }), 401, 40106],
  ['alg ES256', () => withHeader({ alg: 'ES256', typ: 'JWT' }), 401, 40106],
  ['alg hs256', () => withHeader({ alg: 'hs256', typ: 'JWT' }), 401, 40106],
  ['alg as array', () => withHeader({ alg: ['HS256'], typ: 'JWT' }), 401, 40106],
  ['crit header', () => withHeader({ ...HS256, crit: ['exp'] }), 401, 40106],
  ['crit empty list', () => withHeader({ ...HS256, crit: [] }), 401, 40106],
  ['b64 false', () => withHeader({ ...HS256, b64: false }), 401, 40106],
  ['typ missing', () => withHeader({ alg: 'HS256' }), 401, 40106],
  ['jwk header with the attacker’s own secret', () => sign({ ...HS256, jwk: { kty: 'oct', k: b64url('attacker-secret-0123456789') } }, payload(), 'attacker-secret-0123456789'), 401, 40106],
  ['header JSON null', () => raw(b64url('null'), parts()[1], parts()[2]), 401, 40106],
  ['header not JSON', () => raw(b64url('{alg:HS256}'), parts()[1], parts()[2]), 401, 40106],
  ['header not UTF-8', () => raw(b64url(Buffer.from([0x7b, 0xc3, 0x28, 0x7d])), parts()[1], parts()[2]), 401, 40106],
  ['header is a JSON array', () => raw(b64url('["HS256"]'), parts()[1], parts()[2]), 401, 40106],
  // shape
  ['two segments', () => parts().slice(0, 2).join('.'), 401, 40106],
  ['four segments', () => `${token('good', SECRET)}.x`, 401, 40106],
  ['five segments (JWE shape)', () => `${token('good', SECRET)}.x.y`, 401, 40106],
  ['empty signature', () => `${parts()[0]}.${parts()[1]}.`, 401, 40106],
  ['truncated signature', () => `${parts()[0]}.${parts()[1]}.${parts()[2].slice(0, 42)}`, 401, 40106],
  ['signature with one flipped character', () => { const [h, p, s] = parts(); return raw(h, p, (s[0] === 'A' ? 'B' : 'A') + s.slice(1)); }, 401, 40106],
  ['signature with a non-canonical last character (same bytes, other spelling)', () => {
    const [h, p, s] = parts();
    const i = B64.indexOf(s[42]!);
    return raw(h, p, s.slice(0, 42) + B64[(i & ~3) | ((i + 1) & 3)]);
  }, 401, 40106],
  ['signature in standard base64 (+/)', () => {
    const [h, p, s] = parts();
    const std = s.replaceAll('-', '+').replaceAll('_', '/');
    return raw(h, p, std === s ? `+${s.slice(1)}` : std); // a signature without - or _ gets a + of its own
  }, 401, 40106],
  ['padding "=" on the payload', () => { const [h, p, s] = parts(); return raw(h, `${p}=`, s); }, 401, 40106],
  ['empty header segment', () => { const [, p, s] = parts(); return raw('', p, s); }, 401, 40106],
  ['only dots', () => '..', 401, 40106],
  ['payload not JSON', () => raw(parts()[0], b64url('{"type":'), parts()[2]), 401, 40106],
  ['payload not UTF-8', () => raw(parts()[0], b64url(Buffer.from([0x7b, 0xff, 0xfe, 0x7d])), parts()[2]), 401, 40106],
  ['payload JSON number', () => sign(HS256, 42, SECRET), 401, 40106],
  ['payload JSON null', () => sign(HS256, null, SECRET), 401, 40106],
  ['token over KEYGATE_MAX_TOKEN_BYTES (5000 bytes)', () => sign(HS256, payload({ pad: 'x'.repeat(5000) }), SECRET), 401, 40106],
  // numbers where strings are required
  ['type as number', () => sign(HS256, payload({ type: 2 }), SECRET), 401, 40106],
  ['sub as number', () => sign(HS256, payload({ sub: 1 }), SECRET), 401, 40106],
  ['sub as list', () => sign(HS256, payload({ sub: ['good'] }), SECRET), 401, 40106],
  ['sub 257 characters', () => sign(HS256, payload({ sub: 'g'.repeat(257) }), SECRET), 401, 40106],
  ['nonce as number', () => sign(HS256, payload({ nonce: Date.now() * 1e6 }), SECRET), 401, 40106],
  ['nonce as BigInt-looking number text', () => signText(JSON.stringify(HS256), `{"type":"OpenAPIV2","sub":"good","nonce":${nowNonce()}}`), 401, 40106],
  ['recv_window as number 30', () => sign(HS256, payload({ recv_window: 30 }), SECRET), 401, 40106],
  ['exp as string', () => sign(HS256, payload({ exp: String(Math.floor(Date.now() / 1000) + 60) }), SECRET), 401, 40106],
  // nonce forms
  ['nonce " 1"', () => sign(HS256, payload({ nonce: ' 1' }), SECRET), 401, 40106],
  ['nonce with leading space before a good value', () => sign(HS256, payload({ nonce: ` ${nowNonce()}` }), SECRET), 401, 40106],
  ['nonce "1e18"', () => sign(HS256, payload({ nonce: '1e18' }), SECRET), 401, 40106],
  ['nonce "-1"', () => sign(HS256, payload({ nonce: '-1' }), SECRET), 401, 40106],
  ['nonce "0x1"', () => sign(HS256, payload({ nonce: '0x1' }), SECRET), 401, 40106],
  ['nonce 25 digits', () => sign(HS256, payload({ nonce: '1'.repeat(25) }), SECRET), 401, 40106],
  ['nonce float', () => sign(HS256, payload({ nonce: `${nowNonce()}.5` }), SECRET), 401, 40106],
  ['nonce "+" prefix', () => sign(HS256, payload({ nonce: `+${nowNonce()}` }), SECRET), 401, 40106],
  ['nonce with a trailing newline', () => sign(HS256, payload({ nonce: `${nowNonce()}\n` }), SECRET), 401, 40106],
  ['nonce in fullwidth digits', () => sign(HS256, payload({ nonce: '１２３' }), SECRET), 401, 40106],
  ['nonce "0"', () => sign(HS256, payload({ nonce: '0' }), SECRET), 401, 40106],
  ['nonce 31 s in the past', () => sign(HS256, payload({ nonce: nowNonce(-31_000) }), SECRET), 401, 40106],
  ['nonce in milliseconds, not nanoseconds', () => sign(HS256, payload({ nonce: String(Date.now()) }), SECRET), 401, 40106],
  // recv_window forms
  ['recv_window "0"', () => sign(HS256, payload({ recv_window: '0' }), SECRET), 401, 40106],
  ['recv_window "-1"', () => sign(HS256, payload({ recv_window: '-1' }), SECRET), 401, 40106],
  ['recv_window "3.5"', () => sign(HS256, payload({ recv_window: '3.5' }), SECRET), 401, 40106],
  ['recv_window huge', () => sign(HS256, payload({ recv_window: '9'.repeat(30) }), SECRET), 401, 40106],
  ['recv_window above the cap ("61")', () => sign(HS256, payload({ recv_window: '61' }), SECRET), 401, 40106],
  ['recv_window "05"', () => sign(HS256, payload({ recv_window: '05' }), SECRET), 401, 40106],
  ['recv_window "1e1"', () => sign(HS256, payload({ recv_window: '1e1' }), SECRET), 401, 40106],
  ['recv_window " 5"', () => sign(HS256, payload({ recv_window: ' 5' }), SECRET), 401, 40106],
  ['recv_window "60" (the cap)', () => sign(HS256, payload({ recv_window: '60' }), SECRET), 200],
  ['recv_window "1"', () => sign(HS256, payload({ recv_window: '1' }), SECRET), 200],
  // claims and keys
  ['exp in the past', () => sign(HS256, payload({ exp: Math.floor(Date.now() / 1000) - 1 }), SECRET), 401, 40106],
  ['exp 1e308', () => sign(HS256, payload({ exp: 1e308 }), SECRET), 200],
  ['nbf in the future', () => sign(HS256, payload({ nbf: Math.floor(Date.now() / 1000) + 60 }), SECRET), 401, 40106],
  ['type OpenAPIV1', () => sign(HS256, payload({ type: 'OpenAPIV1' }), SECRET), 401, 40106],
  ['signed with the other key’s secret', () => sign(HS256, payload(), OTHER_SECRET), 401, 40106],
  ['secret Base64-encoded before signing', () => sign(HS256, payload(), Buffer.from(SECRET).toString('base64')), 401, 40106],
  ['secret as raw bytes of its Base64 decoding', () => sign(HS256, payload(), Buffer.from(SECRET, 'base64')), 401, 40106],
  ['sub with a NUL byte', () => sign(HS256, payload({ sub: 'good\u0000' }), SECRET), 404, 10013],
  ['sub "../good"', () => sign(HS256, payload({ sub: '../good' }), SECRET), 404, 10013],
  ['sub "good:x" (store key separator)', () => sign(HS256, payload({ sub: 'good:x' }), SECRET), 404, 10013],
  ['sub "*"', () => sign(HS256, payload({ sub: '*' }), SECRET), 404, 10013],
  ['sub "GOOD" (case)', () => sign(HS256, payload({ sub: 'GOOD' }), SECRET), 404, 10013],
  // duplicate JSON members: the decoder and the verifier see the same (last) value
  ['duplicate sub, last one signed for', () => signText(JSON.stringify(HS256), `{"type":"OpenAPIV2","sub":"other","nonce":"${nowNonce()}","sub":"good"}`), 200],
  ['duplicate sub, first one signed for', () => signText(JSON.stringify(HS256), `{"type":"OpenAPIV2","sub":"good","nonce":"${nowNonce()}","sub":"other"}`), 401, 40106],
  ['duplicate alg: none then HS256', () => signText('{"alg":"none","typ":"JWT","alg":"HS256"}', JSON.stringify(payload())), 200],
  ['duplicate alg: HS256 then none', () => signText('{"alg":"HS256","typ":"JWT","alg":"none"}', JSON.stringify(payload())), 401, 40106],
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

  it.each(CASES.map(([name, make, status, code]) => [name, status, code ?? '', make] as const))('%s → %i %s', async (_name, status, code, make) => {
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
  });

  it('a token too big for the header limit gets 431 and a closed connection, not a crash', async () => {
    const huge = sign(HS256, payload({ pad: 'x'.repeat(20_000) }), SECRET);
    const r = await exchange(f.gate.port, `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${huge}\r\n\r\n`);
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
    expect((await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET, { nonce })) })).status).toBe(200);
    const res = await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET, { nonce: `0${nonce}` })) });
    expect(res.json()).toEqual({ code: 40106, message: 'Invalid Token' });
    await settle();
    expect(f.upstream.received).toHaveLength(1);
  });

  it('a replay with a different path or method is still a replay', async () => {
    const t = token('good', SECRET);
    expect((await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(t) })).status).toBe(200);
    expect((await send(f.gate.url, '/api/v3/items/7', { method: 'DELETE', headers: bearer(t) })).json()).toEqual({ code: 40106, message: 'Invalid Token' });
    await settle();
    expect(f.upstream.received.map((a) => a.method)).toEqual(['GET']);
  });

  it('50 concurrent copies of one token: exactly one 200, 49 × 40106, one request upstream', async () => {
    const t = token('good', SECRET);
    const replies = await Promise.all(Array.from({ length: 50 }, () => send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(t) })));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(1);
    expect(replies.filter((r) => r.status === 401 && (r.json() as { code: number }).code === 40106)).toHaveLength(49);
    await settle();
    expect(f.upstream.received).toHaveLength(1);
  });

  it('50 concurrent tokens sharing one nonce under two keys: one 200 per key', async () => {
    const nonce = nowNonce();
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(i % 2 ? token('good', SECRET, { nonce }) : token('other', OTHER_SECRET, { nonce })) })),
    );
    expect(replies.filter((r) => r.status === 200)).toHaveLength(2);
    await settle();
    expect(f.upstream.received.map((a) => a.headers['x-api-key-id']).sort()).toEqual(['key-good', 'key-other']);
  });

  it('a forged token does not burn the nonce for the real client', async () => {
    const nonce = nowNonce();
    expect((await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', OTHER_SECRET, { nonce })) })).status).toBe(401);
    expect((await send(f.gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET, { nonce })) })).status).toBe(200);
  });

  it('a token refused with 40106 carries the same body as the seed, whatever the reason', async () => {
    const bodies = new Set<string>();
    for (const t of [sign(HS256, claims('good', { nonce: '-1' }), SECRET), 'a.b.c', sign({ alg: 'none' }, claims('good'), SECRET)]) {
      const r = await exchange(f.gate.port, `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t}\r\n\r\n`);
      bodies.add(JSON.stringify(firstBody(r.text)));
    }
    expect([...bodies]).toEqual(['{"code":40106,"message":"Invalid Token"}']);
  });
});
