// Tested in test/e2e/render.test.ts.
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  codeOf,
  ERROR_CODES,
  ERRORS,
  errorBody,
  REASONS_WITH_MESSAGE,
  type ErrorCode,
  type Reason,
} from '../errors.js';

// Bodies are fixed per code (and per reason for the few with a message of their own): build them once.
const BODIES = new Map<ErrorCode, Buffer>(
  ERROR_CODES.map((code) => [code, Buffer.from(JSON.stringify(errorBody(code)))]),
);
const REASON_BODIES = new Map<Reason, Buffer>(
  REASONS_WITH_MESSAGE.map((r) => [r, Buffer.from(JSON.stringify(errorBody(codeOf(r), r)))]),
);

/**
 * Headers HTTP requires or expects for a status, whatever the code:
 *  - 401 must carry a challenge (RFC 9110 §15.5.2); the scheme clients must use is Bearer.
 *  - 503 says when to come back (RFC 9110 §10.2.3): Keygate answers 503 when its store
 *    did not answer within KEYGATE_REDIS_TIMEOUT_MS (it reconnects every 0.5 s at most) or
 *    while it sheds load past KEYGATE_MAX_IN_FLIGHT, so one second is an honest hint,
 *    short enough not to stall a well-behaved client.
 */
type HeaderPairs = readonly (readonly [string, string])[];
const STATUS_HEADERS: ReadonlyMap<number, HeaderPairs> = new Map([
  [401, [['www-authenticate', 'Bearer']]],
  [503, [['retry-after', '1']]],
]);
const NO_HEADERS: HeaderPairs = [];

function statusHeaders(status: number): HeaderPairs {
  return STATUS_HEADERS.get(status) ?? NO_HEADERS;
}

/** The whole answer to a request Node's parser refused: fixed per code too, so built once. */
function rawAnswer(code: ErrorCode): Buffer {
  const body = BODIES.get(code) as Buffer;
  const status = ERRORS[code].status;
  let head =
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
    'Content-Type: application/json\r\n' +
    `Content-Length: ${body.length}\r\n` +
    'Cache-Control: no-store\r\n';
  for (const [k, v] of statusHeaders(status)) head += `${k}: ${v}\r\n`;
  head += 'Connection: close\r\n\r\n';
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
}
const RAW_ANSWERS = new Map<ErrorCode, Buffer>(ERROR_CODES.map((code) => [code, rawAnswer(code)]));

/**
 * For requests Node's parser refused (no ServerResponse exists): writes the
 * catalogue's status and body straight to the socket and closes it. Returns the status.
 */
export function renderRawError(socket: Duplex, code: ErrorCode): number {
  socket.end(RAW_ANSWERS.get(code) as Buffer);
  return ERRORS[code].status;
}

/**
 * The only place an error becomes an HTTP response. The status is the catalogue's, except where an
 * asking proxy can only pass some statuses on (nginx auth_request: 401/403, `forcedStatus`). A forced
 * status is not the answer the client gets, so it carries none of its own headers (a 401's
 * WWW-Authenticate would be copied to the client by nginx): the render step adds the real ones.
 */
export function renderError(
  res: ServerResponse,
  code: ErrorCode,
  extraHeaders?: Record<string, string>,
  forcedStatus?: number,
  reason?: Reason,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const own = reason === undefined ? undefined : REASON_BODIES.get(reason);
  const body: Buffer = own === undefined ? (BODIES.get(code) as Buffer) : own;
  res.statusCode = forcedStatus ?? ERRORS[code].status;
  res.setHeader('content-type', 'application/json');
  res.setHeader('content-length', body.length);
  res.setHeader('cache-control', 'no-store');
  if (forcedStatus === undefined) for (const [k, v] of statusHeaders(res.statusCode)) res.setHeader(k, v);
  if (extraHeaders) for (const [k, v] of Object.entries(extraHeaders)) res.setHeader(k, v);
  res.end(body);
}

const BLOCKED_BODY = BODIES.get(10429) as Buffer;
const BLOCKED_LENGTH = String(BLOCKED_BODY.length);

/**
 * The 429 10429 to a client IP whose failed-authentication budget is empty, as renderError
 * and limitedHeaders would write it for a proxy-mode refusal, in one head: only the request id and the
 * seconds vary. For the
 * flood it answers, no per-header setHeader and no header map: the pairs go to writeHead as they are.
 * `seconds` is Retry-After (the next failure fits), `fullSeconds` RateLimit's t (the whole burst is back).
 */
export function renderBlocked(
  res: ServerResponse,
  requestId: string,
  limit: { readonly name: string; readonly policyHeader: string },
  seconds: number,
  fullSeconds: number,
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const s = String(seconds);
  res.writeHead(ERRORS[10429].status, [
    'content-type',
    'application/json',
    'content-length',
    BLOCKED_LENGTH,
    'cache-control',
    'no-store',
    'x-request-id',
    requestId,
    'retry-after',
    s,
    'ratelimit-policy',
    limit.policyHeader,
    'ratelimit',
    `"${limit.name}";r=0;t=${fullSeconds}`,
  ]);
  res.end(BLOCKED_BODY);
}
