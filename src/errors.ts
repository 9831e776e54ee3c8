/**
 * The one catalogue of outcomes Keygate can answer with.
 *
 * The first five entries are the contract from the service's authentication
 * document (status, code and message are fixed there). The rest are Keygate's
 * own answers for requests it cannot or will not forward. Only the HTTP layer
 * turns an entry into a response body; checks return a code and a reason.
 */
export const ERRORS = Object.freeze({
  40004: { status: 401, message: 'Unauthorized' },
  40106: { status: 401, message: 'Invalid Token' },
  40107: { status: 400, message: 'Unexpected request header' },
  10403: { status: 403, message: 'Permission denied' },
  10013: { status: 404, message: 'Resource not found' },
  // Keygate's own codes (not part of the seed contract).
  40000: { status: 400, message: 'Bad request target' },
  40400: { status: 404, message: 'Not found' },
  // Refused by Node's HTTP parser before a request object exists.
  40800: { status: 408, message: 'Request timeout' },
  43100: { status: 431, message: 'Request header fields too large' },
  50200: { status: 502, message: 'Bad gateway' },
  50300: { status: 503, message: 'Service unavailable' },
  50400: { status: 504, message: 'Gateway timeout' },
} as const);

export type ErrorCode = keyof typeof ERRORS;

export const ERROR_CODES = Object.freeze(Object.keys(ERRORS).map(Number) as ErrorCode[]);

/**
 * Operator-facing reasons. Clients only ever see the code; logs and the
 * `keygate_auth_rejections_total{reason}` metric carry the reason.
 */
export const REASONS = Object.freeze({
  missing_header: 'Authorization header missing or empty',
  bad_header_format: 'Authorization header is not exactly "Bearer <token>"',
  duplicate_header: 'more than one Authorization header',
  malformed: 'token is not a well-formed compact JWS with a JSON header and payload',
  token_too_large: 'token longer than the configured maximum',
  bad_header: 'JWT header is not alg HS256 / typ JWT',
  bad_claims: 'payload claims missing, of the wrong type or with the wrong value',
  expired: 'exp claim is in the past or nbf in the future',
  recv_window_too_large: 'recv_window above the configured maximum',
  nonce_window: 'nonce outside recv_window of the server time',
  bad_signature: 'HS256 signature does not verify with the key secret',
  replay: 'nonce already used by this key inside its window',
  unknown_key: 'sub names no key',
  revoked: 'key is revoked',
  expired_key: 'key passed its expiry time',
  ip_denied: 'caller IP is not on the key allow-list',
  scope_denied: 'key lacks a scope the route requires',
  route_not_listed: 'route is not in the routes file and unlisted routes are denied',
  store_unavailable: 'key or nonce store did not answer in time',
  bad_target: 'request target is not a plain origin-form path',
  path_too_long: 'request path longer than MAX_PATH_BYTES',
  too_many_segments: 'request path has more than MAX_PATH_SEGMENTS segments',
  method_override: 'method-override header or _method parameter the policy does not allow, or an unusable one',
  no_route: 'path outside /api/v3/ that is not listed as public',
  bad_request: 'HTTP parser refused the request line, a header or the message framing',
  request_timeout: 'request headers or body not received within the configured timeout',
  headers_too_large: 'request headers larger than the configured maximum',
  upstream_error: 'upstream refused or reset the connection',
  upstream_timeout: 'upstream did not answer within the timeout',
} as const);

export type Reason = keyof typeof REASONS;

/** A check's verdict: either pass (with data) or deny with a code and a reason. */
export interface Denial {
  readonly ok: false;
  readonly code: ErrorCode;
  readonly reason: Reason;
}

export function deny(code: ErrorCode, reason: Reason): Denial {
  return { ok: false, code, reason };
}

export interface ErrorBody {
  code: number;
  message: string;
}

export function errorBody(code: ErrorCode): ErrorBody {
  return { code, message: ERRORS[code].message };
}
