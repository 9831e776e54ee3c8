import { createHmac, timingSafeEqual, verify } from 'node:crypto';
import { deny, type Denial } from '../errors.js';
import type { VerifyKey } from '../keys/prepared-key.js';
import type { KeyAlg } from '../keys/public-key.js';

/** An HS256 signature is one SHA-256 output; Ed25519 and ES256 (r‖s) signatures are 64 bytes. */
const SIGNATURE_BYTES: Readonly<Record<KeyAlg, number>> = { HS256: 32, EdDSA: 64, ES256: 64 };

/**
 * HS256 verification with node:crypto: HMAC-SHA256 over the signing input
 * (the token up to its second '.') with each secret's KeyObject, created once
 * in key-cache.ts, then a constant-time compare of the 32 signature bytes.
 *
 * Synchronous on purpose: jose v6 verifies through WebCrypto, which sends
 * every HMAC to libuv's thread pool and back; one HMAC over a few hundred
 * bytes costs far less than that round trip.
 *
 * This step checks the signature only. decodeToken has already pinned the
 * header to HS256/JWT and refused non-canonical base64url (a signature has one
 * spelling), so neither check is repeated here. The secret is the plain string
 * (its UTF-8 bytes); a token signed with a Base64 form of it fails. After a
 * rotation the previous secret verifies too, until its grace period ends
 * (`validUntilMs`, compared with `nowMs`). The credential that verified is returned: a stream ends with it. jose's compactVerify, pinned to
 * HS256, is the reference this is tested against (test/unit/verify-signature.test.ts).
 *
 * EdDSA and ES256 keys verify with crypto.verify and the public KeyObject made
 * once per cache fill, as the HMAC key is; ES256 expects the JWS r‖s form.
 * The alg is pinned per credential: `alg` (the token header's) selects which
 * of the key's credentials may verify it, so an HS256 token is never checked
 * against a public key (the public key as an HMAC secret) and an EdDSA token
 * for an HS256 key has nothing to verify against. During a rotation's grace
 * period an HS256 → EdDSA key holds one credential of each.
 */
export function verifySignature(
  token: string,
  alg: KeyAlg,
  keys: readonly VerifyKey[],
  nowMs: number,
): { ok: true; credential: VerifyKey } | Denial {
  const first = token.indexOf('.');
  const second = first < 0 ? -1 : token.indexOf('.', first + 1);
  // Fail closed on a shape decodeToken should already have refused, rather than
  // pick a signing input from a token that has none or more than one.
  if (second < 0 || token.indexOf('.', second + 1) !== -1) return deny('bad_signature');
  const signature = Buffer.from(token.slice(second + 1), 'base64url');
  // timingSafeEqual throws on unequal lengths; a wrong length is simply a bad signature.
  if (signature.length !== SIGNATURE_BYTES[alg]) return deny('bad_signature');
  const signingInput = token.slice(0, second);
  for (const k of keys) {
    if (k.alg !== alg || k.validUntilMs <= nowMs) continue;
    if (k.alg === 'HS256') {
      const expected = createHmac('sha256', k.key).update(signingInput).digest();
      if (timingSafeEqual(expected, signature)) return { ok: true, credential: k };
    } else if (verifyPublic(k, signingInput, signature)) return { ok: true, credential: k };
  }
  return deny('bad_signature');
}

/** Ed25519 takes no digest (null); ES256 is ECDSA over SHA-256. A signature OpenSSL cannot parse is simply false. */
function verifyPublic(k: Exclude<VerifyKey, { alg: 'HS256' }>, signingInput: string, signature: Buffer): boolean {
  try {
    return verify(k.alg === 'EdDSA' ? null : 'sha256', Buffer.from(signingInput, 'latin1'), k.key, signature);
  } catch {
    return false;
  }
}
