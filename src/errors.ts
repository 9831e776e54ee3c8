/**
 * The one catalogue of outcomes Keygate can answer with.
 *
 * The first five entries are the contract from the service's authentication
 * document (status, code and message are fixed there). The rest are Keygate's
 * own answers for requests it cannot or will not forward. Only the HTTP layer
 * turns an entry into a response body; checks return a reason, and the reason
 * carries its code (see REASONS), so no call site can pair them wrongly.
 */
export const ERRORS = Object.freeze({
  40004: { status: 401, message: 'Unauthorized' },
  40106: { status: 401, message: 'Invalid Token' },
  40107: { status: 400, message: 'Unexpected request header' },
  10403: { status: 403, message: 'Permission denied' },
  10013: { status: 404, message: 'Resource not found' },
  // "10" followed by the HTTP status, like 10403; clients of this signing scheme (CCXT) already map it to a rate-limit error.
  10429: { status: 429, message: 'Too Many Requests' },
  // Keygate's own codes (not part of the seed contract).
  40000: { status: 400, message: 'Bad request target' },
  40300: { status: 403, message: 'Forbidden' },
  40400: { status: 404, message: 'Not found' },
  40800: { status: 408, message: 'Request timeout' },
  41300: { status: 413, message: 'Payload too large' },
  43100: { status: 431, message: 'Request header fields too large' },
  50000: { status: 500, message: 'Internal error' },
  50200: { status: 502, message: 'Bad gateway' },
  50300: { status: 503, message: 'Service unavailable' },
  50400: { status: 504, message: 'Gateway timeout' },
} as const);

export type ErrorCode = keyof typeof ERRORS;

export const ERROR_CODES = Object.freeze(Object.keys(ERRORS).map(Number) as ErrorCode[]);

const reason = <C extends ErrorCode>(code: C, description: string) => ({ code, description }) as const;
/** A reason whose answer says more than its code's message: what the client must do differs (clients may branch on it). */
const reasonWithMessage = <C extends ErrorCode>(code: C, description: string, message: string) =>
  ({ code, description, message }) as const;

/**
 * Operator-facing reasons, each with the one code it is answered with.
 * Clients only ever see the code; logs and the
 * `keygate_auth_rejections_total{code,reason}` metric carry the reason.
 */
export const REASONS = Object.freeze({
  missing_header: reason(40004, 'Authorization header missing or empty'),
  bad_header_format: reason(40107, 'Authorization header is not exactly "Bearer <token>"'),
  duplicate_header: reason(40107, 'more than one Authorization header'),
  malformed: reason(40106, 'token is not a well-formed compact JWS with a JSON header and payload'),
  token_too_large: reason(40106, 'token longer than the configured maximum'),
  bad_header: reason(40106, 'JWT header is not typ JWT with alg HS256, EdDSA or ES256'),
  bad_claims: reason(40106, 'payload claims missing, of the wrong type or with the wrong value'),
  expired: reason(40106, 'exp claim is in the past or nbf in the future'),
  recv_window_too_large: reason(40106, 'recv_window above the configured maximum'),
  nonce_window: reason(40106, 'nonce outside recv_window of the server time'),
  bad_signature: reason(40106, "signature does not verify with the key's credential of the token's alg"),
  replay: reason(40106, 'nonce already used by this key inside its window'),
  unbound: reason(
    40106,
    "the key's binding is required and the token lacks method and path, or body_sha256 for a request with a body",
  ),
  binding_mismatch: reason(40106, "the token's method, path or body_sha256 claim differs from the request's"),
  body_not_bindable: reason(
    40106,
    'body_sha256 in forward-auth mode, where the request body never reaches Keygate: it cannot be checked',
  ),
  fenced: reason(
    40106,
    'nonce older than the last Redis failover (KEYGATE_REPLAY_FENCE) or emptied keystore this instance saw (replay fence): retry with a fresh token',
  ),
  rate_limited: reason(
    10429,
    "key over its rate limit (its own or the policy's defaultRateLimit); nothing recorded, the token may be retried",
  ),
  cost_exceeds_burst: reasonWithMessage(
    10429,
    "the route's cost is above the burst of a budget that applies (the key's or its owner's): it can never fit, so no Retry-After",
    'Request cost exceeds burst',
  ),
  streams_limited: reason(10429, 'the key already holds KEYGATE_MAX_STREAMS_PER_KEY open streams on this instance'),
  owner_rate_limited: reason(
    10429,
    "the key's owner over its budget (its own or the policy's defaultOwnerRateLimit); nothing recorded, the token may be retried",
  ),
  credits_exhausted: reason(
    10429,
    "the key's or its owner's credits lack the route's cost; nothing recorded, Retry-After says when they are refilled (none without a refill)",
  ),
  ip_blocked: reason(
    10429,
    "client IP's failed-authentication budget (failedAuthLimit) is empty: refused before any signature check until it refills",
  ),
  unknown_key: reason(10013, 'sub names no key'),
  revoked: reason(10013, 'key is revoked'),
  expired_key: reason(10013, 'key passed its expiry time'),
  ip_denied: reason(10403, 'caller IP is not on the key allow-list'),
  scope_denied: reason(10403, 'key lacks a scope the route requires'),
  route_not_listed: reason(10403, 'route is not in the routes file and unlisted routes are denied'),
  store_unavailable: reason(50300, 'key or nonce store did not answer in time'),
  keystore_stale: reason(
    50300,
    "regions: this instance has not heard its own keystore heartbeat back on its region's keystore replica within KEYGATE_KEYSTORE_MAX_STALENESS_MS (a revocation may not have arrived)",
  ),
  home_unreachable: reason(
    50300,
    "regions: the request-state Redis of the key's home region did not answer in time (or is fenced); nothing admitted",
  ),
  home_moved: reason(
    40106,
    "regions: the key's (or its owner's) home moved and the token's nonce is not after the move plus the largest recv_window, the staleness bound and the command timeout: retry with a fresh token",
  ),
  bad_target: reason(40000, 'request target is not a plain origin-form path'),
  path_too_long: reason(40000, 'request path longer than MAX_PATH_BYTES'),
  too_many_segments: reason(40000, 'request path has more than MAX_PATH_SEGMENTS segments'),
  method_override: reason(
    40000,
    'method-override header or _method parameter the policy does not allow, or an unusable one',
  ),
  untrusted_peer: reason(40300, 'forward-auth check from a peer that is not in trustedProxies'),
  bad_check: reason(40000, 'forward-auth check that does not describe exactly one original request'),
  no_route: reason(40400, 'path outside /api/v3/ that is not listed as public'),
  bad_request: reason(40000, 'HTTP parser refused the request line, a header or the message framing'),
  ambiguous_header: reason(40000, 'a header that must appear once (Host) appears more than once'),
  bad_framing: reason(40000, 'Transfer-Encoding other than a single "chunked"'),
  bad_upgrade: reason(
    40000,
    'upgrade request with a body, or a WebSocket handshake Keygate cannot relay (Upgrade repeated, Sec-WebSocket-Key or -Version missing, malformed or repeated)',
  ),
  upgrade_not_allowed: reason(
    40000,
    'WebSocket upgrade to a route without `upgrade: websocket` (or a public route, a method other than GET, not HTTP/1.1)',
  ),
  request_timeout: reason(40800, 'request headers or body not received within the configured timeout'),
  body_too_slow: reason(40800, 'request body arrived slower than the configured minimum rate'),
  bound_body_too_large: reason(
    41300,
    'a body bound by body_sha256 larger than KEYGATE_BOUND_BODY_MAX_BYTES: refused before anything is forwarded',
  ),
  headers_too_large: reason(43100, 'request headers larger than the configured maximum'),
  too_many_headers: reason(43100, 'more header fields than the configured maximum'),
  internal_error: reason(50000, 'unexpected error inside Keygate (logged with its stack)'),
  upstream_error: reason(50200, 'upstream refused or reset the connection'),
  upstream_bad_response: reason(50200, 'upstream answered with an invalid status line, status or header'),
  upstream_busy: reason(50300, 'no upstream connection became free within the queue timeout'),
  overloaded: reason(50300, 'more requests in progress than KEYGATE_MAX_IN_FLIGHT: shed before any token work'),
  upstream_timeout: reason(50400, 'upstream did not answer within the timeout'),
} as const);

export type Reason = keyof typeof REASONS;

/** A check's verdict: either pass (with data) or deny with a code and a reason. */
export interface Denial {
  readonly ok: false;
  readonly code: ErrorCode;
  readonly reason: Reason;
}

// One frozen verdict per reason: denying allocates nothing.
const DENIALS = Object.freeze(
  Object.fromEntries(
    Object.entries(REASONS).map(([r, { code }]) => [r, Object.freeze({ ok: false, code, reason: r })]),
  ),
) as Readonly<Record<Reason, Denial>>;

/** The verdict for a reason; its code comes from the catalogue. */
export function deny(reason: Reason): Denial {
  return DENIALS[reason];
}

/** The code a reason is answered with. */
export function codeOf(reason: Reason): ErrorCode {
  return REASONS[reason].code;
}

export interface ErrorBody {
  code: number;
  message: string;
}

/** The body of an answer: the code's message, or the reason's own where it has one (`cost_exceeds_burst`). */
export function errorBody(code: ErrorCode, reason?: Reason): ErrorBody {
  const entry = reason === undefined ? undefined : (REASONS[reason] as { readonly message?: string });
  return { code, message: entry?.message ?? ERRORS[code].message };
}

/** The reasons answered with a message of their own. */
export const REASONS_WITH_MESSAGE = Object.freeze(
  (Object.keys(REASONS) as Reason[]).filter((r) => 'message' in REASONS[r]),
);

/**
 * The management API's answers (its own listener; not the signing contract's codes).
 * Bodies are `{ "error": <name>, "message": <text>, "problems"?: [...] }`, described in
 * config/management-openapi.json; the `error` name is what clients branch on.
 */
export const MANAGEMENT_ERRORS = Object.freeze({
  unauthorized: { status: 401, message: 'a management token is required: Authorization: Bearer <token>' },
  read_only_token: { status: 403, message: 'this token has read access only' },
  not_found: { status: 404, message: 'no such key' },
  no_route: { status: 404, message: 'no such route' },
  method_not_allowed: { status: 405, message: 'method not allowed on this route' },
  invalid_request: { status: 400, message: 'the request is invalid; nothing was changed (see problems)' },
  not_json: { status: 415, message: 'the body must be JSON (Content-Type: application/json)' },
  body_too_large: { status: 413, message: 'the body is larger than 64 KiB' },
  conflict: { status: 409, message: "the key's state does not allow this change" },
  signature_invalid: {
    status: 401,
    message:
      'the report is not signed by a GitHub secret scanning key in force (Github-Public-Key-Identifier, Github-Public-Key-Signature)',
  },
  report_too_large: { status: 413, message: 'the report is larger than 1 MiB' },
  audit_needs_redis: {
    status: 501,
    message:
      'the audit log is kept in Redis: with the embedded store keys change only in the keys file (KEYGATE_KEYS_FILE), so Keygate has no audit to read',
  },
  credits_need_redis: {
    status: 501,
    message:
      'credits are set and topped up over the API in Redis only: with the embedded store they are set in the keys file (KEYGATE_KEYS_FILE) and spent in this process only; nothing was changed (see problems)',
  },
  webhooks_need_redis: {
    status: 501,
    message:
      'webhook deliveries are kept in Redis: with the embedded store Keygate sends no webhooks (KEYGATE_WEBHOOK_URL needs KEYGATE_REDIS_URL)',
  },
  writes_need_redis: {
    status: 409,
    message: 'writes need Redis: with the embedded store the keys file (KEYGATE_KEYS_FILE) is the source of keys',
  },
  store_unavailable: {
    status: 503,
    message: 'the key store did not answer; nothing was changed, or retry with the same Idempotency-Key',
  },
  not_durable: {
    status: 503,
    message:
      'the change was written but fewer Redis replicas than required acknowledged it in time: it may or may not survive a failover; retry the same operation',
  },
  internal_error: { status: 500, message: 'internal error' },
} as const);

export type ManagementError = keyof typeof MANAGEMENT_ERRORS;
