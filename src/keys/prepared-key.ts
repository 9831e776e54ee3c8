// Tested in test/unit/verify-signature.test.ts, test/unit/authorize.test.ts, test/unit/key-charge.test.ts.
import { createHash, createSecretKey, type KeyObject, type VerifyKeyObjectInput } from 'node:crypto';
import type { BlockList } from 'node:net';
import { parseCidrList } from '../net/cidr.js';
import { MAX_PREVIOUS_SECRETS, type KeyRecord, type PreviousSecret } from './key-record.js';
import { importPublicKey, type KeyAlg } from './public-key.js';
import { compileRateLimit, type CompiledLimit } from '../policy/rate-limit-spec.js';
import { publicKeyProblem } from './weak-public-key.js';

/**
 * One credential imported once as a node:crypto KeyObject, pinned to its alg:
 * an HS256 secret key, or an EdDSA/ES256 public key (ES256 with the JWS r‖s
 * signature encoding already attached). A token is checked only against the
 * credentials of its own alg, so a public key is never an HMAC secret.
 * Previous (rotated) credentials carry their deadline.
 */
export type VerifyKey = (
  | { readonly alg: 'HS256'; readonly key: KeyObject }
  | { readonly alg: 'EdDSA'; readonly key: KeyObject }
  | { readonly alg: 'ES256'; readonly key: VerifyKeyObjectInput }
) & {
  readonly validUntilMs: number;
  /**
   * Which credential this is, the same in every copy of the record (a digest of its alg and secret or
   * public key, never the secret itself): a stream remembers the credential that opened it, and ends
   * when a later copy of its key no longer holds it (stream-registry.ts).
   */
  readonly id: string;
};

/** A key made ready for the hot path: secrets imported once, allow-list and scopes compiled. */
export interface PreparedKey {
  readonly record: KeyRecord;
  /** Current credential first, then rotated ones still in their grace period. */
  readonly verifyKeys: readonly VerifyKey[];
  /** expiresAt as epoch ms (Infinity when the key does not expire). */
  readonly expiresAtMs: number;
  readonly allowList: BlockList | null;
  readonly scopes: ReadonlySet<string>;
  /** The key's own rate limit, compiled; undefined = the policy default applies. */
  readonly rateLimit: CompiledLimit | undefined;
  /**
   * Stored public keys left out of verifyKeys, and why (weak-public-key.ts): a key written before
   * Keygate checked them. Empty for every key that entered through a checked door.
   */
  readonly refusedCredentials: readonly string[];
}

/**
 * The secret's UTF-8 bytes, as the contract says (never Base64-decoded). Made
 * into a KeyObject once per secret, so the hot path does not copy the secret
 * into a new HMAC key for every request.
 */
function importSecret(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret, 'utf8'));
}

/**
 * A credential as a VerifyKey. The record was validated by parseKeyRecord (a
 * secret for HS256, a PEM of the alg's key type otherwise); anything else is a
 * bug, and throwing fails the cache fill closed rather than admit a token.
 */
function importCredential(
  c: Pick<PreviousSecret, 'secret' | 'alg' | 'publicKey'>,
  validUntilMs: number,
  refused: string[],
): VerifyKey | undefined {
  const alg: KeyAlg = c.alg ?? 'HS256';
  if (alg === 'HS256') {
    if (c.secret === undefined) throw new Error('HS256 credential without a secret');
    return { alg, key: importSecret(c.secret), validUntilMs, id: credentialId(alg, c.secret) };
  }
  // A weak key stored before the check (or written by an older Keygate) verifies nothing: a token
  // for it is refused like any bad signature, and the cache reports it (log line and metric).
  const imported = importPublicKey(c.publicKey ?? '', alg);
  const weak = 'error' in imported ? imported.error : publicKeyProblem(imported.key);
  if (weak !== undefined || 'error' in imported) {
    refused.push(`${alg} public key ${weak}`);
    return undefined;
  }
  const id = credentialId(alg, c.publicKey ?? '');
  return alg === 'ES256'
    ? { alg, key: { key: imported.key, dsaEncoding: 'ieee-p1363' }, validUntilMs, id }
    : { alg, key: imported.key, validUntilMs, id };
}

/** A credential's identity: SHA-256 of its alg and material, so no copy of a secret is kept beside the KeyObject. */
function credentialId(alg: KeyAlg, material: string): string {
  return createHash('sha256').update(alg).update('\0').update(material).digest('base64url');
}

/** Built once per cache fill (src/store/key-cache.ts), so the pipeline never parses a record per request. */
export function prepareKey(record: KeyRecord): PreparedKey {
  const refused: string[] = [];
  const verifyKeys: VerifyKey[] = [];
  const current = importCredential(record, Infinity, refused);
  if (current) verifyKeys.push(current);
  // The newest MAX_PREVIOUS_SECRETS only: what a forged token can cost stays bounded.
  const previous = [...(record.previousSecrets ?? [])]
    .sort((x, y) => Date.parse(y.validUntil) - Date.parse(x.validUntil))
    .slice(0, MAX_PREVIOUS_SECRETS);
  for (const p of previous) {
    const v = importCredential(p, Date.parse(p.validUntil), refused);
    if (v) verifyKeys.push(v);
  }
  return {
    record,
    verifyKeys,
    expiresAtMs: record.expiresAt === undefined ? Infinity : Date.parse(record.expiresAt),
    allowList: record.allowIps.length > 0 ? parseCidrList(record.allowIps, 'allowIps').list : null,
    scopes: new Set(record.scopes),
    rateLimit: record.rateLimit && compileRateLimit(record.rateLimit),
    refusedCredentials: refused,
  };
}
