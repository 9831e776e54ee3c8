import { deny, type Denial } from '../errors.js';
import type { KeyAlg } from '../keys/public-key.js';

/** What a token claims, before its signature is checked. */
export interface Claims {
  readonly ok: true;
  /** The header's alg: the signature step checks the token only against its key's credentials of this alg. */
  readonly alg: KeyAlg;
  readonly sub: string;
  /** The nonce as sent (normalised decimal), for the replay guard. */
  readonly nonce: string;
  readonly nonceNs: bigint;
  readonly recvWindowSeconds: number;
  readonly exp: number | undefined;
  readonly nbf: number | undefined;
  /** Binding claims (check-binding.ts): the request method, its target as sent, its body's digest. */
  readonly method: string | undefined;
  readonly path: string | undefined;
  readonly bodySha256: string | undefined;
}

export interface DecodeOptions {
  readonly maxTokenBytes: number;
  readonly defaultRecvWindowSeconds: number;
  readonly maxRecvWindowSeconds: number;
}

const SEGMENT = /^[A-Za-z0-9_-]+$/;
/**
 * Each alg's signature length in base64url characters, and the characters its
 * last one may be. HS256: 32 bytes in 43 characters, the last carrying 4 bits
 * and 2 spare ones that must be zero. EdDSA and ES256 (JWS r‖s): 64 bytes in
 * 86 characters, the last carrying 2 bits and 4 spare ones. Without this, 4 or
 * 16 spellings of one signature would all verify. A DER-encoded ES256
 * signature (70 to 72 bytes) has no place here: it is malformed.
 */
const SIGNATURE_SHAPE: Readonly<Record<KeyAlg, { length: number; last: RegExp }>> = {
  HS256: { length: 43, last: /[AEIMQUYcgkosw048]$/ },
  EdDSA: { length: 86, last: /[AQgw]$/ },
  ES256: { length: 86, last: /[AQgw]$/ },
};
const NONCE = /^\d{1,20}$/;
const RECV_WINDOW = /^[1-9]\d{0,5}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

function parseJsonObject(segment: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(utf8.decode(Buffer.from(segment, 'base64url')));
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** What a header segment says: its alg, or why it is refused. */
type HeaderVerdict = KeyAlg | 'malformed' | 'bad_header';

function readHeader(h: string): HeaderVerdict {
  const header = parseJsonObject(h);
  if (!header) return 'malformed';
  // Only the three algs, never "none". Headers that name a key (jwk, jku, x5u, x5c, kid) are ignored:
  // the key is always the one stored for `sub`, so a token cannot bring its own.
  const alg = header.alg;
  if (
    (alg !== 'HS256' && alg !== 'EdDSA' && alg !== 'ES256') ||
    header.typ !== 'JWT' ||
    header.crit !== undefined ||
    header.b64 !== undefined
  ) {
    return 'bad_header';
  }
  return alg;
}

/**
 * The verdict depends on the segment's characters alone, and clients send one of a few headers
 * ({"alg":"HS256","typ":"JWT"} spelled their library's way), so the verdicts of recent segments are
 * kept: a token's header is then one Map lookup, not a base64url decode, a UTF-8 decode and a
 * JSON.parse per request (the token decode was a large part of a request's CPU). Bounded: a
 * client sending a new header each time only refills it; cleared whole when full.
 */
const HEADER_CACHE_MAX = 64;
const HEADER_CACHE_SEGMENT_MAX = 256;
// A memo of a pure function (nothing a test or a caller could need to control), so module-level.
const headerCache = new Map<string, HeaderVerdict>();

function headerVerdict(h: string): HeaderVerdict {
  let verdict = headerCache.get(h);
  if (verdict !== undefined) return verdict;
  verdict = readHeader(h);
  if (h.length <= HEADER_CACHE_SEGMENT_MAX) {
    if (headerCache.size >= HEADER_CACHE_MAX) headerCache.clear();
    headerCache.set(h, verdict);
  }
  return verdict;
}

/**
 * Cheap structural checks before any crypto: three base64url parts, a JSON
 * header that says JWT with alg HS256, EdDSA or ES256, a signature of that
 * alg's length and canonical spelling, a JSON payload with the claims the contract
 * requires, of the types it requires. Every failure here is 40106.
 */
export function decodeToken(token: string, options: DecodeOptions): Claims | Denial {
  if (token.length > options.maxTokenBytes) return deny('token_too_large');
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first <= 0 || second <= first + 1 || token.indexOf('.', second + 1) !== -1) return deny('malformed');
  const h = token.slice(0, first);
  const p = token.slice(first + 1, second);
  const s = token.slice(second + 1);
  // Both signature lengths are small: a longer segment is refused before any decoding.
  if (s.length > 86 || !SEGMENT.test(h) || !SEGMENT.test(p) || !SEGMENT.test(s)) return deny('malformed');

  const verdict = headerVerdict(h);
  const payload = parseJsonObject(p);
  if (verdict === 'malformed' || !payload) return deny('malformed');
  if (verdict === 'bad_header') return deny('bad_header');
  const alg = verdict;
  const shape = SIGNATURE_SHAPE[alg];
  if (s.length !== shape.length || !shape.last.test(s)) return deny('malformed');

  const { type, sub, nonce, recv_window: recvWindow, exp, nbf, method, path, body_sha256: bodySha256 } = payload;
  if (type !== 'OpenAPIV2') return deny('bad_claims');
  if (typeof sub !== 'string' || sub.length === 0 || sub.length > 256) return deny('bad_claims');
  if (typeof nonce !== 'string' || !NONCE.test(nonce)) return deny('bad_claims');
  let recvWindowSeconds = options.defaultRecvWindowSeconds;
  if (recvWindow !== undefined) {
    if (typeof recvWindow !== 'string' || !RECV_WINDOW.test(recvWindow)) return deny('bad_claims');
    recvWindowSeconds = Number(recvWindow);
    if (recvWindowSeconds > options.maxRecvWindowSeconds) return deny('recv_window_too_large');
  }
  if (exp !== undefined && (typeof exp !== 'number' || !Number.isFinite(exp))) return deny('bad_claims');
  if (nbf !== undefined && (typeof nbf !== 'number' || !Number.isFinite(nbf))) return deny('bad_claims');
  // The binding claims are optional; present, they must be strings (their values are check-binding.ts's).
  if (method !== undefined && typeof method !== 'string') return deny('bad_claims');
  if (path !== undefined && typeof path !== 'string') return deny('bad_claims');
  if (bodySha256 !== undefined && typeof bodySha256 !== 'string') return deny('bad_claims');
  const nonceNs = BigInt(nonce);
  return {
    ok: true,
    alg,
    sub,
    // Normalised: leading zeros dropped (only then a new string).
    nonce: nonce.length === 1 || nonce.charCodeAt(0) !== 0x30 ? nonce : nonceNs.toString(),
    nonceNs,
    recvWindowSeconds,
    exp,
    nbf,
    method,
    path,
    bodySha256,
  };
}
