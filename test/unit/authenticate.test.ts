import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import type { Reason } from '../../src/errors.js';
import { createAuthenticator, type AuthenticateOptions } from '../../src/pipeline/authenticate.js';
import { createKeyCache } from '../../src/store/key-cache.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { createReplayFence } from '../../src/store/replay-fence.js';
import type { Store } from '../../src/store/store.js';
import { compileRateLimit } from '../../src/policy/rate-limit-spec.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { makeKey } from '../helpers/make-key.js';
import { HS256, sign } from '../helpers/tokens.js';

const NOW_MS = Date.parse('2026-11-22T09:00:00Z');
const NOW_NS = BigInt(NOW_MS) * 1_000_000n;
const SECRET = 'authenticate-secret-0123456789';
const OLD_SECRET = 'authenticate-old-secret-012345';
const OPTIONS: AuthenticateOptions = {
  maxTokenBytes: 4096,
  defaultRecvWindowSeconds: 30,
  maxRecvWindowSeconds: 60,
  defaultRateLimit: undefined,
};
const iso = (ms: number) => new Date(ms).toISOString();

const KEYS: KeyRecord[] = [
  makeKey({ apiKey: 'good', id: 'key-good', secret: SECRET }),
  makeKey({ apiKey: 'revoked', id: 'key-revoked', secret: SECRET, state: 'revoked' }),
  makeKey({ apiKey: 'lapsed', id: 'key-lapsed', secret: SECRET, expiresAt: iso(NOW_MS - 1) }),
  makeKey({ apiKey: 'expiring', id: 'key-expiring', secret: SECRET, expiresAt: iso(NOW_MS + 1) }),
  makeKey({
    apiKey: 'rotated',
    id: 'key-rotated',
    secret: SECRET,
    previousSecrets: [{ secret: OLD_SECRET, validUntil: iso(NOW_MS + 60_000) }],
  }),
  makeKey({
    apiKey: 'rotated-lapsed',
    id: 'key-rotated-lapsed',
    secret: SECRET,
    previousSecrets: [{ secret: OLD_SECRET, validUntil: iso(NOW_MS) }],
  }),
  makeKey({ apiKey: 'limited', id: 'key-limited', secret: SECRET, rateLimit: { rate: '1/s' } }),
];

let nonces = 0n;
/** A token for `sub`, its nonce `offsetMs` from the clock's now (each one distinct). */
function tokenFor(
  sub: string,
  options: { secret?: string; offsetMs?: number; header?: object; extra?: object } = {},
): string {
  const nonce = (NOW_NS + BigInt(options.offsetMs ?? 0) * 1_000_000n + nonces++).toString();
  return sign(options.header ?? HS256, { type: 'OpenAPIV2', sub, nonce, ...options.extra }, options.secret ?? SECRET);
}
const bearer = (token: string) => ['Authorization', `Bearer ${token}`];

/** The authenticator over the memory store and a clock that stays at NOW_MS unless a test moves it. */
function setup(options: Partial<AuthenticateOptions> = {}) {
  const clock = manualClock(NOW_MS);
  const store = createMemoryStore({ keys: KEYS }, { clock });
  const keys = createKeyCache({ ttlMs: 5_000, negativeTtlMs: 1_000, maxEntries: 100 }, { store, clock });
  const authenticate = createAuthenticator({ ...OPTIONS, ...options }, { keys, store, clock });
  return { authenticate, clock, close: () => (keys.close(), store.close()) };
}

describe('authenticate: one request, the first failing step decides', () => {
  // Expected: 'ok:<key id>' or the denial reason (its code comes from the catalogue).
  const cases: Array<[name: string, expected: `ok:${string}` | Reason, rawHeaders: () => string[]]> = [
    ['a good token', 'ok:key-good', () => bearer(tokenFor('good'))],
    ['no Authorization header', 'missing_header', () => ['Host', 'x']],
    ['an empty Authorization header', 'missing_header', () => ['Authorization', '']],
    ['Basic instead of Bearer', 'bad_header_format', () => ['Authorization', 'Basic Zm9vOmJhcg==']],
    ['two Authorization headers', 'duplicate_header', () => [...bearer(tokenFor('good')), ...bearer(tokenFor('good'))]],
    ['a token that is not a JWS', 'malformed', () => bearer('not-a-token')],
    [
      'a token longer than maxTokenBytes',
      'token_too_large',
      () => bearer(tokenFor('good', { extra: { pad: 'x'.repeat(5_000) } })),
    ],
    ['alg HS512 in the header', 'bad_header', () => bearer(tokenFor('good', { header: { alg: 'HS512', typ: 'JWT' } }))],
    ['a wrong type claim', 'bad_claims', () => bearer(tokenFor('good', { extra: { type: 'OpenAPI' } }))],
    [
      'recv_window above the maximum',
      'recv_window_too_large',
      () => bearer(tokenFor('good', { extra: { recv_window: '61' } })),
    ],
    ['a nonce 31 s old (default window 30 s)', 'nonce_window', () => bearer(tokenFor('good', { offsetMs: -31_000 }))],
    ['a nonce 31 s ahead', 'nonce_window', () => bearer(tokenFor('good', { offsetMs: 31_000 }))],
    ['a nonce 29 s old', 'ok:key-good', () => bearer(tokenFor('good', { offsetMs: -29_000 }))],
    ['a sub that names no key', 'unknown_key', () => bearer(tokenFor('nobody'))],
    ['a revoked key', 'revoked', () => bearer(tokenFor('revoked'))],
    ['a key past its expiresAt', 'expired_key', () => bearer(tokenFor('lapsed'))],
    ['a key 1 ms before its expiresAt', 'ok:key-expiring', () => bearer(tokenFor('expiring'))],
    [
      'a token signed with another secret',
      'bad_signature',
      () => bearer(tokenFor('good', { secret: 'another-secret-0123456789' })),
    ],
    [
      'rotation: the previous secret inside its grace period',
      'ok:key-rotated',
      () => bearer(tokenFor('rotated', { secret: OLD_SECRET })),
    ],
    [
      'rotation: the previous secret at its grace period end',
      'bad_signature',
      () => bearer(tokenFor('rotated-lapsed', { secret: OLD_SECRET })),
    ],
    ['rotation: the new secret', 'ok:key-rotated-lapsed', () => bearer(tokenFor('rotated-lapsed'))],
    // Order: cheap checks first, and a key check before the signature.
    [
      'an old nonce for an unknown key: the time window decides',
      'nonce_window',
      () => bearer(tokenFor('nobody', { offsetMs: -31_000 })),
    ],
    [
      'a forged token for an unknown key: unknown_key, no crypto',
      'unknown_key',
      () => bearer(tokenFor('nobody', { secret: 'forged-secret-0123456789' })),
    ],
    [
      'a forged token for a revoked key: revoked',
      'revoked',
      () => bearer(tokenFor('revoked', { secret: 'forged-secret-0123456789' })),
    ],
    [
      'a forged token for a lapsed key: expired_key',
      'expired_key',
      () => bearer(tokenFor('lapsed', { secret: 'forged-secret-0123456789' })),
    ],
  ];

  it.each(cases)('%s → %s', async (_name, expected, rawHeaders) => {
    const { authenticate, close } = setup();
    try {
      const r = await authenticate(rawHeaders());
      if (expected.startsWith('ok:'))
        expect(r.ok && { ok: r.ok, id: r.key.record.id, rate: r.rate }).toEqual({
          ok: true,
          id: expected.slice(3),
          rate: undefined,
        });
      else expect(r).toMatchObject({ ok: false, reason: expected });
    } finally {
      await close();
    }
  });
});

describe('authenticate: what one request leaves for the next (replay guard and rate limit, one store call)', () => {
  it('a token passes once; the same token again is a replay', async () => {
    const { authenticate, close } = setup();
    const t = tokenFor('good');
    expect((await authenticate(bearer(t))).ok).toBe(true);
    expect(await authenticate(bearer(t))).toMatchObject({
      ok: false,
      reason: 'replay',
      code: 40106,
      keyId: 'key-good',
    });
    await close();
  });

  it('a forged token does not burn its nonce: the real token with that nonce still passes', async () => {
    const { authenticate, close } = setup();
    const real = tokenFor('good');
    const [header, payload] = real.split('.') as [string, string];
    const forged = `${header}.${payload}.${sign(HS256, 'x', 'forged-secret-0123456789').split('.')[2]}`;
    expect(await authenticate(bearer(forged))).toMatchObject({ ok: false, reason: 'bad_signature' });
    expect((await authenticate(bearer(real))).ok).toBe(true);
    await close();
  });

  it.each<[name: string, apiKey: string, defaultRateLimit: string | undefined]>([
    ["the key's own limit (1/s)", 'limited', undefined],
    ["the policy's defaultRateLimit (1/s) for a key without one", 'good', '1/s'],
  ])(
    '%s: the second request in a second is limited, not burned, and passes once allowed',
    async (_name, apiKey, defaultRate) => {
      const { authenticate, clock, close } = setup(
        defaultRate ? { defaultRateLimit: compileRateLimit({ rate: defaultRate }) } : {},
      );
      const first = await authenticate(bearer(tokenFor(apiKey)));
      expect(first.ok && first.rate?.states[0]?.remaining).toBe(0);
      const second = tokenFor(apiKey);
      const limited = await authenticate(bearer(second));
      expect(limited).toMatchObject({
        ok: false,
        reason: 'rate_limited',
        code: 10429,
        keyId: expect.any(String),
        rate: { limits: [{ burst: 1, name: 'keygate' }] },
      });
      expect(!limited.ok && 'rate' in limited && limited.rate.states[0]?.retryAfterUs).toBeGreaterThan(0);
      clock.advance(1_000);
      expect((await authenticate(bearer(second))).ok).toBe(true);
      await close();
    },
  );
});

describe('authenticate: the replay fence (a Redis failover seen by this instance)', () => {
  function fenced(raiseDuringAdmit: boolean) {
    const clock = manualClock(NOW_MS);
    const fence = createReplayFence({ clock });
    const memory = createMemoryStore({ keys: KEYS }, { clock });
    // The failover arrives while the admit is under way: the answer may come from the new master.
    const store: Store = raiseDuringAdmit
      ? {
          ...memory,
          admit: async (...args) => {
            const admission = await memory.admit(...args);
            fence.raise('switch_master');
            return admission;
          },
        }
      : memory;
    const keys = createKeyCache({ ttlMs: 5_000, negativeTtlMs: 1_000, maxEntries: 100 }, { store, clock });
    const authenticate = createAuthenticator(OPTIONS, { keys, store, clock, fence });
    return { authenticate, clock, fence, close: () => (keys.close(), memory.close()) };
  }

  it('refuses a nonce older than the failover, and takes one from after it', async () => {
    const { authenticate, clock, fence, close } = fenced(false);
    const before = tokenFor('good');
    clock.advance(1);
    fence.raise('switch_master');
    expect(await authenticate(bearer(before))).toEqual({ ok: false, code: 40106, reason: 'fenced' });
    expect((await authenticate(bearer(tokenFor('good', { offsetMs: 1 })))).ok).toBe(true);
    await close();
  });

  it('refuses on the answer when the failover was seen while the admit was under way', async () => {
    const { authenticate, clock, close } = fenced(true);
    const t = tokenFor('good');
    clock.advance(1);
    // The key is proven: its id is logged, and its record names where the refusal is counted (usage by outcome).
    const refused = (await authenticate(bearer(t))) as { record?: { apiKey: string } };
    expect(refused).toMatchObject({ ok: false, code: 40106, reason: 'fenced', keyId: 'key-good' });
    expect(refused.record?.apiKey).toBe('good');
    await close();
  });
});

describe('authenticate: binding claims (issue 43), after the signature and before the nonce is used', () => {
  const GET = { method: 'GET', asked: { url: '/api/v3/orders?symbol=BTC' }, head: { body: 'none' as const } };
  const bound = (path: string, method = 'GET') => ({ extra: { method, path } });

  it('a token bound to another target is refused without using its nonce: the same token then passes where it belongs', async () => {
    const { authenticate, close } = setup();
    const token = tokenFor('good', bound('/api/v3/orders?symbol=BTC'));
    const other = await authenticate(bearer(token), { ...GET, asked: { url: '/api/v3/orders?symbol=ETH' } });
    expect(other).toMatchObject({ ok: false, reason: 'binding_mismatch', keyId: 'key-good' });
    expect(await authenticate(bearer(token), GET)).toMatchObject({ ok: true });
    // Now used: a replay is refused as one.
    expect(await authenticate(bearer(token), GET)).toMatchObject({ ok: false, reason: 'replay' });
    await close();
  });

  it('a forged token with binding claims is refused for its signature first', async () => {
    const { authenticate, close } = setup();
    const token = tokenFor('good', { ...bound('/elsewhere'), secret: 'another-secret-0123456789' });
    expect(await authenticate(bearer(token), GET)).toMatchObject({ ok: false, reason: 'bad_signature' });
    await close();
  });

  it('a body to check is handed on as the digest to compare once read; a caller that gives no request matches no claim', async () => {
    const { authenticate, close } = setup();
    const post = { method: 'POST', asked: { url: '/api/v3/orders' }, head: { body: 12 } };
    const token = tokenFor('good', { extra: { method: 'POST', path: '/api/v3/orders', body_sha256: 'digest' } });
    expect(await authenticate(bearer(token), post)).toMatchObject({ ok: true, bodySha256: 'digest' });
    expect(await authenticate(bearer(tokenFor('good', bound('/api/v3/orders'))))).toMatchObject({
      reason: 'binding_mismatch',
    });
    await close();
  });

  it('forward-auth (bodyUnseen) refuses body_sha256 with its own reason', async () => {
    const { authenticate, close } = setup({ bodyUnseen: true });
    const token = tokenFor('good', { extra: { body_sha256: '47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU' } });
    expect(await authenticate(bearer(token), GET)).toMatchObject({ ok: false, reason: 'body_not_bindable' });
    await close();
  });
});
