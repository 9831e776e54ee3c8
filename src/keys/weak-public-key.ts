import type { KeyObject } from 'node:crypto';

/*
 * Checks node:crypto does not make on a client's public key.
 *
 * Ed25519: OpenSSL imports any 32 bytes as a public key and verifies RFC 8032's
 * cofactorless equation without looking at A. With A of small order (the
 * identity, say) one fixed signature (R = identity, S = 0) verifies for every
 * message: whoever knows the apiKey mints tokens. So a key is decoded here as
 * RFC 8032 §5.1.3 says, by hand on BigInt field arithmetic: y must be below p
 * (one spelling per point), x must exist, x = 0 must not carry the sign bit,
 * and [8]A must not be the identity (the 8 points of order 1, 2, 4 and 8).
 * Points with a small-order component beside a large one ("mixed order") are
 * not refused: nobody without the private key can sign for them, they only make
 * cofactored and cofactorless verifiers disagree, and telling them apart costs
 * a 253-bit scalar multiplication per key (docs/security.md says so).
 *
 * P-256: node:crypto (OpenSSL 3.0) refuses a point off the curve at import
 * (test/unit/weak-public-key.test.ts checks that rather than assume it), but
 * imports the point at infinity (SPKI bit string 00 00) and then aborts the
 * whole process (a native assertion) when `asymmetricKeyDetails` is read; it
 * also imports the compressed (02/03) and hybrid (06/07) forms and keeps them
 * as given. So an EC key's DER is checked here BEFORE node:crypto sees it:
 * the uncompressed P-256 layout only (one key, one stored spelling).
 */

const P = 2n ** 255n - 19n;

function mod(a: bigint): bigint {
  const r = a % P;
  return r < 0n ? r + P : r;
}

function pow(base: bigint, exp: bigint): bigint {
  let result = 1n;
  let b = mod(base);
  let e = exp;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
    e >>= 1n;
  }
  return result;
}

const D = mod(-121665n * pow(121666n, P - 2n));
const SQRT_M1 = pow(2n, (P - 1n) / 4n);

/** Extended twisted Edwards coordinates (X:Y:Z:T), a = -1. */
interface Point {
  x: bigint;
  y: bigint;
  z: bigint;
}

/** dbl-2008-hwcd for a = -1 (T is not needed to double). */
function double(p: Point): Point {
  const a = (p.x * p.x) % P;
  const b = (p.y * p.y) % P;
  const c = (2n * p.z * p.z) % P;
  const d = mod(-a);
  const e = mod((p.x + p.y) * (p.x + p.y) - a - b);
  const g = mod(d + b);
  const f = mod(g - c);
  const h = mod(d - b);
  return { x: (e * f) % P, y: (g * h) % P, z: (f * g) % P };
}

const SMALL_ORDER = 'is a small-order Ed25519 point (every signature with R = identity and S = 0 would verify)';

/**
 * Why 32 encoded bytes are not an Ed25519 public key Keygate accepts, or
 * undefined. RFC 8032 §5.1.3, step by step, then the small-order check.
 */
export function ed25519PointProblem(encoded: Uint8Array): string | undefined {
  if (encoded.length !== 32) return 'is not a 32-byte Ed25519 point';
  const sign = (encoded[31] ?? 0) >> 7;
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? (encoded[i] ?? 0) & 0x7f : (encoded[i] ?? 0));
  if (y >= P) return 'is a non-canonical Ed25519 encoding (y is not below 2^255 - 19)';
  // x² = (y² - 1) / (d y² + 1); the square root as in §5.1.3 step 3.
  const y2 = (y * y) % P;
  const u = mod(y2 - 1n);
  const v = mod(D * y2 + 1n);
  const v3 = (v * v * v) % P;
  let x = (u * v3 * pow(u * v3 * v3 * v, (P - 5n) / 8n)) % P;
  const vx2 = (v * x * x) % P;
  if (vx2 !== u) {
    if (vx2 !== mod(-u)) return 'is not a point on the Ed25519 curve';
    x = (x * SQRT_M1) % P;
  }
  if (x === 0n && sign === 1) return 'is a non-canonical Ed25519 encoding (x is 0 with the sign bit set)';
  if (Number(x & 1n) !== sign) x = P - x;
  let q: Point = { x, y, z: 1n };
  for (let i = 0; i < 3; i++) q = double(q);
  // [8]A is the identity (0 : Z : Z) exactly when A has order 1, 2, 4 or 8.
  if (q.x === 0n && q.y === q.z) return SMALL_ORDER;
  return undefined;
}

/** The DER SPKI prefix of every Ed25519 public key: SEQ { SEQ { OID 1.3.101.112 }, BIT STRING (33) 00 ... }. */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
/** SEQ { SEQ { id-ecPublicKey, prime256v1 }, BIT STRING (66) 00 04 ... }: the uncompressed P-256 point. */
const P256_UNCOMPRESSED_PREFIX = Buffer.from('3059301306072a8648ce3d020106082a8648ce3d03010703420004', 'hex');

const EC_PUBLIC_KEY_OID = Buffer.from('06072a8648ce3d0201', 'hex');
const P256_OID = Buffer.from('06082a8648ce3d030107', 'hex');

export const P256_FORM_PROBLEM =
  'is a P-256 key not in uncompressed form (the point at infinity, or a compressed or hybrid point): Keygate takes 04 || X || Y only';

/**
 * For the DER bytes of an SPKI key before it is imported: undefined unless it
 * is an EC key (id-ecPublicKey in its algorithm identifier), which must then be
 * exactly an uncompressed P-256 point.
 */
export function ecSpkiProblem(der: Buffer): string | undefined {
  const head = der.subarray(0, 24);
  if (head.indexOf(EC_PUBLIC_KEY_OID) === -1) return undefined;
  if (der.length === 91 && der.subarray(0, 27).equals(P256_UNCOMPRESSED_PREFIX)) return undefined;
  return der.subarray(0, 32).indexOf(P256_OID) === -1 ? 'is neither an Ed25519 nor a P-256 key' : P256_FORM_PROBLEM;
}

/**
 * Why an imported public key (Ed25519 or P-256, as importPublicKey checked) is
 * refused, or undefined. One sentence, read after the field name
 * ("publicKey: is a small-order Ed25519 point ...").
 */
export function publicKeyProblem(key: KeyObject): string | undefined {
  const der = key.export({ type: 'spki', format: 'der' });
  if (key.asymmetricKeyType === 'ed25519') {
    if (der.length !== 44 || !der.subarray(0, 12).equals(ED25519_SPKI_PREFIX)) return 'is not a plain Ed25519 SPKI key';
    return ed25519PointProblem(der.subarray(12));
  }
  if (key.asymmetricKeyType === 'ec') {
    return ecSpkiProblem(der);
  }
  return 'is neither an Ed25519 nor a P-256 key';
}
