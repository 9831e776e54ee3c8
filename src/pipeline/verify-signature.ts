import { compactVerify } from 'jose';
import { deny, type Denial } from '../errors.js';
import type { VerifyKey } from '../store/key-cache.js';

const OPTIONS = { algorithms: ['HS256'] };

/**
 * HS256 verification with jose, pinned to HS256, with each secret imported
 * once as a CryptoKey (see key-cache.ts). The secret is the plain string; a
 * token signed with a Base64 form of it fails here. After a rotation the
 * previous secret verifies too, until its grace period ends (`nowMs`).
 */
export async function verifySignature(token: string, keys: readonly VerifyKey[], nowMs: number): Promise<{ ok: true } | Denial> {
  for (const k of keys) {
    if (k.validUntilMs <= nowMs) continue;
    try {
      await compactVerify(token, k.key, OPTIONS);
      return { ok: true };
    } catch {
      // try the next secret, if any
    }
  }
  return deny('bad_signature');
}
