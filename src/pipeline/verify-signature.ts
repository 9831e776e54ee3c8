import { compactVerify } from 'jose';
import { deny, type Denial } from '../errors.js';

const OPTIONS = { algorithms: ['HS256'] };

/**
 * HS256 verification with jose, pinned to HS256, with the key's secret
 * imported once as a CryptoKey (see key-cache.ts). The secret is the plain
 * string; a token signed with a Base64 form of it fails here.
 */
export async function verifySignature(token: string, verifyKey: CryptoKey): Promise<{ ok: true } | Denial> {
  try {
    await compactVerify(token, verifyKey, OPTIONS);
    return { ok: true };
  } catch {
    return deny(40106, 'bad_signature');
  }
}
