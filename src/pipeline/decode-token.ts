import { deny, type Denial } from '../errors.js';

/** What a token claims, before its signature is checked. */
export interface Claims {
  readonly ok: true;
  readonly sub: string;
  /** The nonce as sent (normalised decimal), for the replay guard. */
  readonly nonce: string;
  readonly nonceNs: bigint;
  readonly recvWindowSeconds: number;
  readonly exp: number | undefined;
  readonly nbf: number | undefined;
}

export interface DecodeOptions {
  readonly maxTokenBytes: number;
  readonly defaultRecvWindowSeconds: number;
  readonly maxRecvWindowSeconds: number;
}

const SEGMENT = /^[A-Za-z0-9_-]+$/;
// The 43rd character of a 32-byte signature carries 4 bits; the 2 spare bits must be zero,
// or four spellings of one signature would all verify.
const CANONICAL_LAST = /[AEIMQUYcgkosw048]$/;
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

/**
 * Cheap structural checks before any crypto: three base64url parts, a JSON
 * header that says HS256/JWT, a JSON payload with the claims the contract
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
  // An HS256 signature is 32 bytes: 43 base64url characters.
  if (s.length !== 43 || !SEGMENT.test(h) || !SEGMENT.test(p) || !SEGMENT.test(s) || !CANONICAL_LAST.test(s))
    return deny('malformed');

  const header = parseJsonObject(h);
  const payload = parseJsonObject(p);
  if (!header || !payload) return deny('malformed');
  if (header.alg !== 'HS256' || header.typ !== 'JWT' || header.crit !== undefined || header.b64 !== undefined) {
    return deny('bad_header');
  }

  const { type, sub, nonce, recv_window: recvWindow, exp, nbf } = payload;
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
  const nonceNs = BigInt(nonce);
  return { ok: true, sub, nonce: nonceNs.toString(), nonceNs, recvWindowSeconds, exp, nbf };
}
