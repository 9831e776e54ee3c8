import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { loadAssertionKeys, newAssertionKey, type AssertionKeySet } from '../../src/assertion/assertion-keys.js';
import { createAssertionSigner, type AssertionOptions } from '../../src/assertion/assertion-signer.js';
import { parseKeyRecord, type KeyRecord } from '../../src/keys/key-record.js';

function keySet(keys: Record<string, string>[]): AssertionKeySet {
  const file = join(mkdtempSync(join(tmpdir(), 'keygate-signer-')), 'keys.json');
  writeFileSync(file, JSON.stringify({ keys }));
  chmodSync(file, 0o600);
  return loadAssertionKeys(file, undefined);
}
function record(overrides: Record<string, unknown> = {}): KeyRecord {
  const { record: r } = parseKeyRecord(
    {
      id: 'key-1',
      apiKey: 'api-1',
      apiSecret: 'secret-0123456789abcdef-0123',
      scopes: ['a:read', 'b:write'],
      allowIps: [],
      createdAt: '2026-01-01T00:00:00Z',
      ...overrides,
    },
    'test',
  );
  return r!;
}
const REQUEST = { requestId: 'r-1', method: 'GET', target: '/api/v3/x?y=1' };
const OPTIONS: AssertionOptions = {
  audience: 'aud',
  issuer: 'keygate',
  ttlSeconds: 60,
  mode: 'identity',
  maxEntries: 2,
};

function setup(options: Partial<AssertionOptions> = {}) {
  const clock = manualClock(Date.parse('2026-06-01T00:00:00Z'));
  let keys = keySet([newAssertionKey('EdDSA', 'one')]);
  const counts = { identity: 0, request: 0, hits: 0 };
  const signer = createAssertionSigner(
    { ...OPTIONS, ...options },
    {
      clock,
      keys: () => keys,
      events: { onSigned: (mode) => counts[mode]++, onCacheHit: () => counts.hits++ },
    },
  );
  const verify = async (jws: string) =>
    (
      await jwtVerify(jws, createLocalJWKSet(keys.jwks as never), {
        audience: 'aud',
        currentDate: new Date(clock.nowMs()),
        typ: 'keygate-assertion+jwt',
      })
    ).payload;
  return { clock, signer, counts, verify, setKeys: (k: AssertionKeySet) => (keys = k) };
}

describe('assertion signer', () => {
  it('identity mode: one signature per key, re-signed after three quarters of the TTL', async () => {
    const { clock, signer, counts, verify } = setup();
    const r = record();
    const first = signer.sign(r, REQUEST);
    expect(signer.sign(r, { ...REQUEST, requestId: 'r-2' })).toBe(first);
    expect(counts).toEqual({ identity: 1, request: 0, hits: 1 });
    expect(await verify(first)).toEqual({
      iss: 'keygate',
      aud: 'aud',
      sub: 'key-1',
      scope: 'a:read b:write',
      iat: clock.nowMs() / 1000,
      exp: clock.nowMs() / 1000 + 60,
    });
    clock.advance(44_999);
    expect(signer.sign(r, REQUEST)).toBe(first);
    clock.advance(1);
    const second = signer.sign(r, REQUEST);
    expect(second).not.toBe(first);
    expect(counts.identity).toBe(2);
    // What the upstream got always had at least a quarter of the TTL left.
    expect((await verify(second)).exp).toBe(clock.nowMs() / 1000 + 60);
  });

  it('re-signs at once when the key record or the signing key changes', async () => {
    const { signer, counts, verify, setKeys } = setup();
    const first = signer.sign(record(), REQUEST);
    // A new record object with the same identity (a cache refill) is still a hit.
    expect(signer.sign(record(), REQUEST)).toBe(first);
    const rescoped = signer.sign(record({ scopes: ['a:read'] }), REQUEST);
    expect(rescoped).not.toBe(first);
    expect((await verify(rescoped)).scope).toBe('a:read');
    setKeys(keySet([newAssertionKey('ES256', 'two')]));
    const rotated = signer.sign(record({ scopes: ['a:read'] }), REQUEST);
    expect(rotated).not.toBe(rescoped);
    expect(JSON.parse(Buffer.from(rotated.split('.')[0]!, 'base64url').toString())).toEqual({
      alg: 'ES256',
      kid: 'two',
      typ: 'keygate-assertion+jwt',
    });
    await verify(rotated);
    expect(counts).toEqual({ identity: 3, request: 0, hits: 1 });
  });

  it('never outlives the key: exp is at most the key expiry', async () => {
    const { clock, signer, verify } = setup();
    const expiresAt = new Date(clock.nowMs() + 10_000).toISOString();
    const payload = await verify(signer.sign(record({ expiresAt, owner: 'acct' }), REQUEST));
    expect(payload.exp).toBe(clock.nowMs() / 1000 + 10);
    expect(payload.owner).toBe('acct');
  });

  it('keeps at most maxEntries keys', () => {
    const { signer, counts } = setup();
    for (const id of ['k1', 'k2', 'k3', 'k1']) signer.sign(record({ id }), REQUEST);
    // k1 was the oldest when k3 came in: signed again.
    expect(counts.identity).toBe(4);
  });

  it('request mode: signs every request, bound to jti, htm and htu', async () => {
    const { signer, counts, verify } = setup({ mode: 'request' });
    const a = signer.sign(record(), REQUEST);
    const b = signer.sign(record(), { requestId: 'r-2', method: 'POST', target: '/api/v3/orders' });
    expect(a).not.toBe(b);
    expect(await verify(a)).toMatchObject({ jti: 'r-1', htm: 'GET', htu: '/api/v3/x?y=1', sub: 'key-1' });
    expect(await verify(b)).toMatchObject({ jti: 'r-2', htm: 'POST', htu: '/api/v3/orders' });
    expect(counts).toEqual({ identity: 0, request: 2, hits: 0 });
  });
});
