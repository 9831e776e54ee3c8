import type { ErrorCode, Reason } from '../errors.js';

/**
 * The one code each reason is answered with. Used to pre-create every
 * `keygate_auth_rejections_total{code,reason}` series at zero (so rate() and
 * alerts see a series from the first scrape) and to keep the README table
 * honest: test/metrics-catalogue.test.ts checks every `deny(code, reason)` in
 * src/ and every README row against this table.
 */
export const REASON_CODE: Readonly<Record<Reason, ErrorCode>> = Object.freeze({
  missing_header: 40004,
  bad_header_format: 40107,
  duplicate_header: 40107,
  malformed: 40106,
  token_too_large: 40106,
  bad_header: 40106,
  bad_claims: 40106,
  expired: 40106,
  recv_window_too_large: 40106,
  nonce_window: 40106,
  bad_signature: 40106,
  replay: 40106,
  unknown_key: 10013,
  revoked: 10013,
  expired_key: 10013,
  ip_denied: 10403,
  scope_denied: 10403,
  route_not_listed: 10403,
  store_unavailable: 50300,
  bad_target: 40000,
  path_too_long: 40000,
  too_many_segments: 40000,
  method_override: 40000,
  no_route: 40400,
  upstream_error: 50200,
  upstream_timeout: 50400,
  bad_request: 40000,
  request_timeout: 40800,
  headers_too_large: 43100,
});
