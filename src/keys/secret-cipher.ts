// Tested in test/e2e/secret-cipher.test.ts, test/process/secret-env.test.ts.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { fingerprintKeyOf, fingerprintWith } from './secret-fingerprint.js';

/**
 * Secrets at rest: AES-256-GCM with a random 96-bit IV, the key record's id
 * as additional authenticated data (a sealed secret moved to another record
 * fails to open), and a key id so that an older encryption key can still
 * open what it sealed until `keygate keys reencrypt` has run.
 *
 * Sealed form: kg1.<kid>.<iv>.<ciphertext>.<tag> (base64url parts).
 */
export interface SecretCipher {
  seal(plain: string, aad: string): string;
  /** Throws SecretCipherError when no configured key opens it or it was tampered with. */
  open(sealed: string, aad: string): string;
  /** True when `sealed` was sealed with the current key. */
  isCurrent(sealed: string): boolean;
  /**
   * The secret's keyed fingerprints (secret-fingerprint.ts), with the current key first, then each
   * previous one: what a leak report is looked up by, never the secret.
   */
  fingerprints(secret: string): string[];
}

export class SecretCipherError extends Error {
  override readonly name = 'SecretCipherError';
}

const PREFIX = 'kg1';

/** True for a secret in sealed form (kg1.…): what a store without an encryption key must never hold in plain. */
export function isSealedSecret(secret: string): boolean {
  return secret.startsWith(`${PREFIX}.`);
}

function kidOf(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/** `options` is what config read (SecretEncryptionKeys in src/config/secret-encryption.ts). */
export function createSecretCipher(options: { current: Buffer; previous?: readonly Buffer[] }): SecretCipher {
  const currentKid = kidOf(options.current);
  const keys = new Map<string, Buffer>([[currentKid, options.current]]);
  for (const k of options.previous ?? []) keys.set(kidOf(k), k);
  const fingerprintKeys = [options.current, ...(options.previous ?? [])].map(fingerprintKeyOf);

  return {
    seal(plain, aad) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', options.current, iv);
      cipher.setAAD(Buffer.from(aad));
      const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return [
        PREFIX,
        currentKid,
        iv.toString('base64url'),
        ct.toString('base64url'),
        cipher.getAuthTag().toString('base64url'),
      ].join('.');
    },
    open(sealed, aad) {
      const [prefix, kid, iv, ct, tag, extra] = sealed.split('.');
      if (prefix !== PREFIX || !kid || !iv || ct === undefined || !tag || extra !== undefined)
        throw new SecretCipherError('sealed secret has an unknown format');
      const key = keys.get(kid);
      if (!key) throw new SecretCipherError(`sealed with encryption key ${kid}, which is not configured`);
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
        decipher.setAAD(Buffer.from(aad));
        decipher.setAuthTag(Buffer.from(tag, 'base64url'));
        return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
      } catch {
        throw new SecretCipherError('sealed secret failed authentication (wrong key, wrong record or tampered)');
      }
    },
    isCurrent(sealed) {
      return sealed.split('.')[1] === currentKid;
    },
    fingerprints: (secret) => fingerprintKeys.map((k) => fingerprintWith(k, secret)),
  };
}

/** Opens every sealed secret in an external record in place of `encSecret`. */
export function openExternal(o: Record<string, unknown>, cipher: SecretCipher | undefined): Record<string, unknown> {
  const aad = typeof o.id === 'string' ? o.id : String(o.apiKey);
  const open = (e: Record<string, unknown>): Record<string, unknown> => {
    if (typeof e.encSecret !== 'string') return e;
    if (!cipher) throw new SecretCipherError('key secret is encrypted but KEYGATE_SECRET_ENCRYPTION_KEY is not set');
    const { encSecret, ...rest } = e;
    return { ...rest, apiSecret: cipher.open(encSecret, aad) };
  };
  const out = open(o);
  if (Array.isArray(o.previousSecrets))
    out.previousSecrets = (o.previousSecrets as Record<string, unknown>[]).map(open);
  return out;
}
