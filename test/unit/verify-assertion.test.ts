import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { createAssertionVerifier, type AssertionErrorCode } from '../../src/client/verify-assertion.js';
import { loadAssertionKeys, newAssertionKey, type AssertionKeySet } from '../../src/assertion/assertion-keys.js';
import { createAssertionSigner } from '../../src/assertion/assertion-signer.js';
import { parseKeyRecord } from '../../src/keys/key-record.js';

function keySet(keys: Record<string, string>[]): AssertionKeySet {
  const file = join(mkdtempSync(join(tmpdir(), 'keygate-verify-')), 'keys.json');
  writeFileSync(file, JSON.stringify({ keys }));
  chmodSync(file, 0o600);
  return loadAssertionKeys(file, undefined);
}
const { record } = parseKeyRecord(
  {
    id: 'key-9',
    apiKey: 'api-9',
    apiSecret: 'secret-0123456789abcdef-0123',
    owner: 'acct-3',
    scopes: ['orders:read', 'orders:write'],
    allowIps: [],
    createdAt: '2026-01-01T00:00:00Z',
  },
  'test',
);
const REQUEST = { requestId: 'req-5', method: 'POST', target: '/api/v3/orders?x=1' };
const published = keySet([newAssertionKey('EdDSA', 'live'), newAssertionKey('ES256', 'other')]);
const unpublished = keySet([newAssertionKey('EdDSA', 'live')]); // same kid, another key
const stranger = keySet([newAssertionKey('EdDSA', 'stranger')]);

function signed(mode: 'identity' | 'request', keys = published, options: { audience?: string; ago?: number } = {}) {
  const clock = manualClock(Date.now() - (options.ago ?? 0));
  const signer = createAssertionSigner(
    { audience: options.audience ?? 'orders', issuer: 'keygate', ttlSeconds: 60, mode, maxEntries: 10 },
    { clock, keys: () => keys },
  );
  return signer.sign(record!, REQUEST);
}
function tamper(jws: string): string {
  const [h, p, s] = jws.split('.');
  const claims = JSON.parse(Buffer.from(p!, 'base64url').toString()) as Record<string, unknown>;
  return [h, Buffer.from(JSON.stringify({ ...claims, sub: 'admin' })).toString('base64url'), s].join('.');
}

const verify = createAssertionVerifier({ jwks: published.jwks as never, audience: 'orders' });

describe('keygate/verify: the verifier an upstream uses', () => {
  it('returns the identity of a valid assertion', async () => {
    const identity = await verify(signed('identity'));
    expect(identity).toMatchObject({
      keyId: 'key-9',
      owner: 'acct-3',
      scopes: ['orders:read', 'orders:write'],
      kid: 'live',
      request: undefined,
    });
    expect(identity.expiresAt.getTime() - identity.issuedAt.getTime()).toBe(60_000);
    const bound = await verify(signed('request'), { method: 'POST', target: '/api/v3/orders?x=1' });
    expect(bound.request).toEqual({ id: 'req-5', method: 'POST', target: '/api/v3/orders?x=1' });
  });

  const wrongTyp = async () => {
    const key = published.signing;
    return new SignJWT({ sub: 'key-9', scope: '' })
      .setProtectedHeader({ alg: 'EdDSA', kid: 'live', typ: 'JWT' })
      .setIssuer('keygate')
      .setAudience('orders')
      .setIssuedAt()
      .setExpirationTime('1m')
      .sign(key.privateKey!);
  };
  it.each<[string, () => Promise<string> | string, AssertionErrorCode, Parameters<typeof verify>[1]?]>([
    ['tampered claims', () => tamper(signed('identity')), 'bad_signature'],
    ['signed by an unpublished key under a published kid', () => signed('identity', unpublished), 'bad_signature'],
    ['expired', () => signed('identity', published, { ago: 120_000 }), 'expired'],
    ['for another audience', () => signed('identity', published, { audience: 'billing' }), 'wrong_audience'],
    ['signed with a kid that is not published', () => signed('identity', stranger), 'unknown_kid'],
    ['a JWT of another typ, same key', wrongTyp, 'wrong_typ'],
    ['not a JWS', () => 'not-a-jws', 'malformed'],
    ['absent', () => '', 'missing'],
    ['request-bound, checked without the request', () => signed('request'), 'wrong_request'],
    [
      'request-bound, replayed on another target',
      () => signed('request'),
      'wrong_request',
      { method: 'POST', target: '/api/v3/orders?x=2' },
    ],
    [
      'request-bound, replayed with another method',
      () => signed('request'),
      'wrong_request',
      { method: 'DELETE', target: '/api/v3/orders?x=1' },
    ],
  ])('refuses an assertion %s: %s', async (_name, make, code, received) => {
    await expect(verify(await make(), received)).rejects.toMatchObject({ name: 'AssertionError', code });
  });

  it('refuses two headers (an array) as missing, never picking one', async () => {
    const good = signed('identity');
    await expect(verify([good, good])).rejects.toMatchObject({ code: 'missing' });
  });
});
