import { createHash, createPublicKey, type KeyObject } from 'node:crypto';
import { ecSpkiProblem } from './weak-public-key.js';

/**
 * The signing algorithms a key may have. HS256 is the contract's scheme (a
 * shared secret); EdDSA (Ed25519) and ES256 (ECDSA P-256 with SHA-256) are
 * per-key options where Keygate holds only the client's public key.
 */
export const KEY_ALGS = ['HS256', 'EdDSA', 'ES256'] as const;
export type KeyAlg = (typeof KEY_ALGS)[number];
export type PublicKeyAlg = Exclude<KeyAlg, 'HS256'>;

export function isKeyAlg(v: unknown): v is KeyAlg {
  return typeof v === 'string' && (KEY_ALGS as readonly string[]).includes(v);
}

/** What node:crypto calls each alg's key type, to pin a PEM to the alg it is declared with. */
function algOfKeyObject(key: KeyObject): PublicKeyAlg | undefined {
  if (key.asymmetricKeyType === 'ed25519') return 'EdDSA';
  if (key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1') return 'ES256';
  return undefined;
}

/**
 * An SPKI PEM ("-----BEGIN PUBLIC KEY-----") imported as a KeyObject, checked
 * to be the key type `alg` names: an Ed25519 PEM declared ES256 (or a P-384
 * key, an RSA key, a private key) is refused here, at write and load time, so
 * the request path never meets a key of the wrong kind.
 */
export function importPublicKey(pem: string, alg: PublicKeyAlg): { key: KeyObject } | { error: string } {
  const text = pem.trim();
  // createPublicKey would also accept a private key (and derive its public half): an operator who
  // pastes a private key is told so, rather than Keygate storing the client's credential after all.
  if (
    !text.startsWith('-----BEGIN PUBLIC KEY-----') ||
    !text.endsWith('-----END PUBLIC KEY-----') ||
    text.split('-----BEGIN').length !== 2
  )
    return { error: 'must be one SPKI public key in PEM form (-----BEGIN PUBLIC KEY-----)' };
  // Checked before node:crypto imports it: the P-256 point at infinity imports, then aborts the
  // process when its details are read (weak-public-key.ts).
  const body = text.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, '').replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(body)) return { error: 'is not a readable SPKI public key' };
  const ecProblem = ecSpkiProblem(Buffer.from(body, 'base64'));
  if (ecProblem !== undefined) return { error: ecProblem };
  let key: KeyObject;
  try {
    key = createPublicKey({ key: text, format: 'pem' });
  } catch {
    return { error: 'is not a readable SPKI public key' };
  }
  const actual = algOfKeyObject(key);
  if (actual !== alg)
    return {
      error: `is ${actual === undefined ? 'neither an Ed25519 nor a P-256 key' : `a key for ${actual}`}, not for ${alg}`,
    };
  return { key };
}

/** The PEM as Keygate stores it: re-exported from the key, so one key has one spelling (line breaks, trailing text). */
export function canonicalPem(key: KeyObject): string {
  return key.export({ type: 'spki', format: 'pem' }).toString();
}

/** The alg a client's private key signs with (from its key type), or undefined for any other kind of key. */
export function algOfPrivateKey(key: KeyObject): PublicKeyAlg | undefined {
  return key.type === 'private' ? algOfKeyObject(key) : undefined;
}

/**
 * "sha256:" + the hex SHA-256 of the key's DER SPKI bytes: the same value as
 * `openssl pkey -pubin -in key.pem -outform DER | sha256sum`, so an operator
 * or a tenant can check which public key a Keygate key holds without the PEM.
 */
export function publicKeyFingerprint(key: KeyObject): string {
  return `sha256:${createHash('sha256')
    .update(key.export({ type: 'spki', format: 'der' }))
    .digest('hex')}`;
}
