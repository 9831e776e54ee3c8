import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { Reason } from '../../errors.js';
import type { UpstreamCause } from '../../observe/metrics.js';
import { roundMs } from '../../observe/request-record.js';
import type { UpstreamHead } from '../../pipeline/forward-headers.js';
import { hasNoContent, responseHead } from './response-head.js';
import type { UpstreamFailureLog } from './upstream-failure-log.js';

/**
 * What became of a forwarded request: the upstream's status, or the reason Keygate answers with instead
 * (with the cause when the upstream itself failed: no connection, no answer, not HTTP).
 */
export type ForwardOutcome =
  { readonly status: number } | { readonly reason: Reason; readonly cause?: UpstreamCause | undefined };

/**
 * One request to forward: the request path's own per-request object (its Walk), read in place, so
 * forwarding builds no argument object and no callback closure per request.
 */
export interface ForwardRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The upstream head as built (forward-headers.ts): header list and body framing. */
  readonly head: UpstreamHead;
  /** The request's id: added to the response when the upstream sends no X-Request-Id. */
  readonly log: { readonly requestId: string };
  /** Keygate's own response headers (RateLimit), appended after the upstream's: [name, value, …]. */
  readonly responseHeaders: readonly string[] | undefined;
  /**
   * Called exactly once per forwarded request, before anything is written to the client for it, with
   * the time from handing it to the forwarder until then.
   */
  passed(outcome: ForwardOutcome, upstreamMs?: number): void;
}

/** What every exchange of one forwarder shares: the sets its sweeper walks, the body-rate bound, the logger. */
export interface ExchangeShared {
  /** Exchanges waiting for an upstream connection. */
  readonly waiting: Set<UpstreamExchange>;
  /** Exchanges whose request body is still arriving. */
  readonly uploading: Set<UpstreamExchange>;
  readonly minBodyBytesPerSecond: number;
  readonly bodyRateGraceMs: number;
  readonly logger: Logger;
  readonly failures: UpstreamFailureLog;
}

const STATUS_TEXT = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * One forwarded request as undici's dispatch handler: the upstream's answer is
 * checked before a byte of it reaches the client (a final status outside
 * 200–599, a status text with control characters, or a header Node will not
 * write becomes 502) and then relayed; `giveUp` answers the client instead of
 * the upstream (queue wait or body rate exceeded, decided by the forwarder's sweep).
 */
export class UpstreamExchange implements Dispatcher.DispatchHandler {
  readonly queuedAt = performance.now();
  private abortFn: ((err?: Error) => void) | undefined;
  private answered = false;
  private finished = false;
  private resumeFn: (() => void) | undefined;
  private rateFrom = 0;
  private rateBytes = 0;
  private held: Buffer | undefined;
  /** The client's response was ended at its head (no content): what undici says after that is not the client's business. */
  private endedAtHead = false;

  private readonly req: IncomingMessage;
  private readonly res: ServerResponse;

  constructor(
    private readonly shared: ExchangeShared,
    private readonly request: ForwardRequest,
  ) {
    const { req, res } = request;
    this.req = req;
    this.res = res;
    shared.waiting.add(this);
    // One listener function for every exchange (never a closure per request): the exchange rides on
    // its request and response under a symbol no other code reads.
    (res as Carrier)[EXCHANGE] = this;
    if (this.bodyArriving()) {
      this.rateFrom = this.queuedAt;
      this.rateBytes = req.socket.bytesRead;
      shared.uploading.add(this);
      (req as Carrier)[EXCHANGE] = this;
      req.on('end', bodyReceived);
    }
    res.on('close', clientClosed);
  }

  /**
   * Whether the request's body is still arriving, by the framing the parser read: a request handed over
   * from the request listener itself is not yet marked complete even when it has no body.
   */
  private bodyArriving(): boolean {
    const framing = this.request.head.body;
    return !this.req.complete && framing !== 'none' && framing !== 0;
  }

  /** The client's response closed, however it ended. */
  closed() {
    this.finished = true;
    this.shared.waiting.delete(this);
    this.shared.uploading.delete(this);
    // The client went away: release the upstream exchange too.
    if (!this.res.writableFinished) this.abortFn?.();
  }

  /** The request body has all arrived: no longer a body whose rate is watched. */
  received() {
    this.shared.uploading.delete(this);
  }

  /** Answer the client instead of the upstream, and drop the upstream exchange. */
  giveUp(reason: Reason) {
    this.shared.waiting.delete(this);
    this.shared.uploading.delete(this);
    // A body Keygate will not read leaves the connection unusable: close it after the answer.
    if (this.bodyArriving() && !this.res.headersSent) this.res.setHeader('connection', 'close');
    this.settle({ reason });
    const abort = this.abortFn;
    this.abortFn = noop; // a later onConnect aborts at once
    // Aborting also destroys the client's request stream (undici's body), which would cut the
    // answer just written: release the upstream exchange once the answer is out instead.
    if (abort) this.res.once('close', () => abort());
  }

  checkRate(now: number) {
    const socket = this.req.socket;
    // Paused means the upstream is not reading fast enough: not the client's fault.
    if (this.req.isPaused()) {
      this.rateFrom = now;
      this.rateBytes = socket.bytesRead;
      return;
    }
    const elapsed = now - this.rateFrom;
    if (elapsed < this.shared.bodyRateGraceMs) return;
    if (((socket.bytesRead - this.rateBytes) * 1000) / elapsed >= this.shared.minBodyBytesPerSecond) return;
    if (this.answered) {
      this.shared.uploading.delete(this);
      this.res.destroy();
      return;
    }
    this.giveUp('body_too_slow');
  }

  private settle(outcome: ForwardOutcome) {
    if (this.answered) return;
    this.answered = true;
    this.request.passed(outcome, roundMs(performance.now() - this.queuedAt));
  }

  onConnect(abort: (err?: Error) => void) {
    this.shared.waiting.delete(this);
    if (this.abortFn === noop || this.finished) return abort();
    this.abortFn = abort;
  }

  onHeaders(status: number, raw: Buffer[], resume: () => void, statusText: string): boolean {
    if (status < 100) return this.badResponse();
    if (status < 200) return true; // 1xx informational answers are not relayed (undici refuses 101 and a stray 100)
    const res = this.res;
    if (this.answered || res.destroyed) {
      this.abortFn?.();
      return false;
    }
    if (status > 599 || !STATUS_TEXT.test(statusText)) return this.badResponse();
    const head = responseHead(raw, this.request.log.requestId, status);
    const extra = this.request.responseHeaders;
    if (extra) head.push(...extra);
    try {
      res.writeHead(status, statusText || undefined, head);
    } catch {
      return this.badResponse(); // a header name or value Node refuses to write
    }
    this.settle({ status });
    this.resumeFn = resume;
    if (hasNoContent(this.req.method, status)) {
      // Complete for the client now: undici refuses a 204/304 whose Content-Length is not 0
      // (it counts the bytes it never gets) and would otherwise cut a finished answer.
      this.endedAtHead = true;
      res.end();
    }
    return true;
  }

  private badResponse(): false {
    this.settle({ reason: 'upstream_bad_response' });
    this.abortFn?.();
    return false;
  }

  onData(chunk: Buffer): boolean {
    if (this.endedAtHead) return true; // llhttp gives a bodiless response no data; never write past its end
    // The latest chunk is held until the end of this tick: a response whose body arrives
    // with its end leaves in one write (res.end(chunk)) instead of two; a streamed body is
    // never delayed past the tick its bytes arrived in.
    if (this.held !== undefined) this.res.write(this.held);
    else if (toFlush.push(this) === 1) queueMicrotask(flushHeld);
    this.held = chunk;
    if (!this.res.writableNeedDrain) return true;
    this.res.once('drain', this.resumeFn as () => void);
    return false;
  }

  /** The chunk still held at the end of the tick it arrived in goes out (see onData). */
  flush() {
    const held = this.held;
    this.held = undefined;
    if (held !== undefined && !this.res.writableEnded) this.res.write(held);
  }

  onComplete() {
    if (this.endedAtHead) return;
    const held = this.held;
    this.held = undefined;
    if (held === undefined) this.res.end();
    else this.res.end(held);
  }

  onError(err: Error & { code?: string }) {
    this.shared.waiting.delete(this);
    this.shared.uploading.delete(this);
    if (this.endedAtHead) return;
    if (this.answered) {
      // The status line is already out (or Keygate answered): a cut connection is the only honest signal left.
      if (!this.res.writableFinished) this.res.destroy();
      return;
    }
    const cause = upstreamCause(err);
    this.shared.failures.note(cause, err);
    this.settle({ reason: upstreamFailure(err), cause });
  }
}

function noop() {}

/** Exchanges holding a chunk this tick: one microtask flushes them all (no closure per exchange). */
const toFlush: UpstreamExchange[] = [];
function flushHeld() {
  // Walked by index, so one added meanwhile is flushed too; emptied whatever a write does.
  try {
    for (let i = 0; i < toFlush.length; i++) (toFlush[i] as UpstreamExchange).flush();
  } finally {
    toFlush.length = 0;
  }
}

const EXCHANGE = Symbol('upstreamExchange');
type Carrier = { [EXCHANGE]?: UpstreamExchange };

function clientClosed(this: ServerResponse) {
  (this as Carrier)[EXCHANGE]?.closed();
}

function bodyReceived(this: IncomingMessage) {
  (this as Carrier)[EXCHANGE]?.received();
}

/** undici's or Node's error → the cause label an operator (and an alert) can act on. */
export function upstreamCause(err: Error & { code?: string }): UpstreamCause {
  // Where undici wraps the socket's own error, the wrapped one names the cause.
  const inner = (err as { cause?: unknown }).cause;
  return causeOf(err) ?? (inner instanceof Error ? causeOf(inner) : undefined) ?? 'other';
}

function causeOf(err: Error & { code?: string }): UpstreamCause | undefined {
  const code = err.code ?? '';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_FAIL' || code === 'EAI_NODATA') return 'dns';
  if (code === 'ECONNREFUSED') return 'refused';
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'EHOSTDOWN' || code === 'ENETDOWN')
    return 'unreachable';
  if (code === 'EPROTO' || /^ERR_(SSL|TLS)_|CERT|UNABLE_TO_VERIFY/.test(code)) return 'tls';
  if (code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'ETIMEDOUT')
    return 'timeout';
  if (upstreamFailure(err) === 'upstream_bad_response') return 'bad_response';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED')
    return 'reset';
  return undefined;
}

/** undici's error → the reason Keygate answers with: too slow (504), spoke broken HTTP (502), or refused/reset (502). */
function upstreamFailure(err: Error & { code?: string }): Reason {
  const code = err.code ?? '';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'upstream_timeout';
  // llhttp refused the response, or undici refused an unrequested 101 / a stray 100.
  if (
    err.name === 'HTTPParserError' ||
    code.startsWith('HPE_') ||
    (code === 'UND_ERR_SOCKET' && /^bad (upgrade|response)$/.test(err.message))
  )
    return 'upstream_bad_response';
  return 'upstream_error';
}
