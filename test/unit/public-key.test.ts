import { createHash, generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { algOfPrivateKey, importPublicKey, publicKeyFingerprint } from '../../src/keys/public-key.js';

const ED = generateKeyPairSync('ed25519');
const P256 = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const P384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
const RSA = generateKeyPairSync('rsa', { modulusLength: 1024 });
const spki = (k: typeof ED.publicKey) => k.export({ type: 'spki', format: 'pem' }).toString();

describe('importPublicKey: one SPKI PEM of the key type the alg names', () => {
  const cases: Array<[string, string, 'EdDSA' | 'ES256', string | undefined]> = [
    ['Ed25519 for EdDSA', spki(ED.publicKey), 'EdDSA', undefined],
    ['P-256 for ES256', spki(P256.publicKey), 'ES256', undefined],
    [
      'with CRLF line ends and blank lines around',
      `\r\n${spki(ED.publicKey).replace(/\n/g, '\r\n')}\n\n`,
      'EdDSA',
      undefined,
    ],
    ['Ed25519 declared ES256', spki(ED.publicKey), 'ES256', 'a key for EdDSA, not for ES256'],
    ['P-256 declared EdDSA', spki(P256.publicKey), 'EdDSA', 'a key for ES256, not for EdDSA'],
    ['P-384 for ES256', spki(P384.publicKey), 'ES256', 'neither an Ed25519 nor a P-256 key'],
    ['RSA for EdDSA', spki(RSA.publicKey), 'EdDSA', 'neither an Ed25519 nor a P-256 key'],
    [
      'a private key',
      ED.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      'EdDSA',
      'SPKI public key in PEM form',
    ],
    ['two PEMs', spki(ED.publicKey) + spki(ED.publicKey), 'EdDSA', 'one SPKI public key'],
    [
      'garbage inside the armour',
      '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n',
      'EdDSA',
      'not a readable',
    ],
    ['an HS256-style secret', 'plain-secret-0123456789abcdef', 'EdDSA', 'SPKI public key in PEM form'],
  ];
  it.each(cases)('%s', (_name, pem, alg, error) => {
    const r = importPublicKey(pem, alg);
    if (error === undefined) expect(r).toHaveProperty('key');
    else expect((r as { error: string }).error).toContain(error);
  });
});

describe('publicKeyFingerprint and algOfPrivateKey', () => {
  it('the fingerprint is sha256: + hex SHA-256 of the DER SPKI bytes', () => {
    const der = ED.publicKey.export({ type: 'spki', format: 'der' });
    expect(publicKeyFingerprint(ED.publicKey)).toBe(`sha256:${createHash('sha256').update(der).digest('hex')}`);
    expect(publicKeyFingerprint(ED.publicKey)).not.toBe(publicKeyFingerprint(P256.publicKey));
  });
  it('names the alg of a private key, never of a public one or another type', () => {
    expect(algOfPrivateKey(ED.privateKey)).toBe('EdDSA');
    expect(algOfPrivateKey(P256.privateKey)).toBe('ES256');
    expect(algOfPrivateKey(ED.publicKey)).toBeUndefined();
    expect(algOfPrivateKey(P384.privateKey)).toBeUndefined();
    expect(algOfPrivateKey(RSA.privateKey)).toBeUndefined();
  });
});
