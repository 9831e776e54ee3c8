// Tested in test/e2e/secret-scanning.test.ts.
import { createHmac, hkdfSync } from 'node:crypto';

/**
 * A secret's keyed fingerprint: HMAC-SHA256 of the secret, hex. The one way a leak report finds its
 * key (the Redis hash `{keystore}:fingerprints`, fingerprint → apiKey), so no report ever scans keys.
 *
 * With KEYGATE_SECRET_ENCRYPTION_KEY the HMAC key is derived from the encryption key (HKDF-SHA256,
 * its own label), so whoever reads Redis without the encryption key can neither open a sealed
 * secret nor test a guess against a fingerprint: a 238-bit random secret cannot be guessed anyway,
 * and without the key not even a weak imported one can. Without encryption the secrets are stored
 * as they are, so the fingerprint (keyed with a fixed label) tells a reader of Redis nothing more.
 */
const LABEL = 'keygate secret fingerprint v1';
const UNKEYED = Buffer.from(LABEL);

export const fingerprintKeyOf = (encryptionKey: Buffer): Buffer =>
  Buffer.from(hkdfSync('sha256', encryptionKey, Buffer.alloc(0), LABEL, 32));

export const fingerprintWith = (key: Buffer, secret: string): string =>
  createHmac('sha256', key).update(secret, 'utf8').digest('hex');

/** Every fingerprint a secret may be stored under: the current key's first (what a write stores). */
export function secretFingerprints(
  secret: string,
  cipher: { fingerprints(secret: string): string[] } | undefined,
): string[] {
  return cipher ? cipher.fingerprints(secret) : [fingerprintWith(UNKEYED, secret)];
}
