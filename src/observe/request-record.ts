// Tested in test/e2e/logging.test.ts, test/e2e/metrics.test.ts (the log line and the counts of every outcome).
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { ErrorCode, Reason } from '../errors.js';
import type { KeyRecord } from '../keys/key-record.js';
import { outcomeOf } from '../keys/outcome-usage.js';
import type { OutcomeStore } from '../store/store.js';
import { createRequestLogger } from './request-logger.js';
import { OK, PUBLIC, TIME, statusClass, type Metrics, type UpstreamCause } from './metrics.js';

/**
 * Per-request facts: the outcome, the one log line and the metrics, all
 * written once when the response closes. Every field is a request-line field
 * (REQUEST_LINE_FIELDS in request-logger.ts); never the token, never the key's owner.
 */
export interface RequestLog {
  requestId: string;
  method: string | undefined;
  route: string | undefined;
  clientIp: string | undefined;
  keyId?: string;
  code?: ErrorCode | typeof OK | typeof PUBLIC | typeof TIME;
  reason?: Reason;
  status?: number;
  authMs?: number;
  upstreamMs?: number;
  /** Why the upstream did not answer (502/504 from a failed exchange): a fixed label, never the error text. */
  upstreamCause?: UpstreamCause;
  durationMs?: number;
  aborted?: true;
  /** Only on a parser error: the parser's error code, never its raw bytes. */
  parserError?: string | undefined;
  /** With tracing on: the request's trace and its SERVER span (hex), so logs and traces join. */
  trace_id?: string;
  span_id?: string;
  /** Not a line field: the trace id when the trace is sampled, named by the latency histograms' exemplars. */
  exemplar?: string;
  /**
   * Not a line field: the key whose signature verified this request (authenticated, or refused after the
   * signature checked out), whose usage by outcome the request counts in. Never set before the signature
   * verified: an unknown key or a forged token counts nothing (keys/outcome-usage.ts).
   */
  usageKey?: KeyRecord | undefined;
}

export interface RequestRecorder {
  /**
   * A request admitted to the path: counted in flight, and recorded once when its response
   * closes, however it ends. Returns its log, which the steps fill in.
   */
  open(res: ServerResponse, requestId: string, method: string | undefined, started: number): RequestLog;
  /** Writes one outcome as its metrics and its log line (also for refusals with no response object). */
  record(log: RequestLog): void;
  /**
   * This request's outcome is counted in the metrics but gets no request line of its own: it is accounted
   * for in a summary line instead (a blocked client IP's refusals, gateway/blocked-request-log.ts).
   */
  unlogged(log: RequestLog): void;
}

const LOG = Symbol('requestLog');
const STARTED = Symbol('requestStarted');
type OpenResponse = ServerResponse & { [LOG]?: RequestLog; [STARTED]?: number };

/** The one place an outcome becomes metrics and a log line. */
export function createRequestRecorder(deps: {
  logger: Logger;
  metrics: Metrics;
  /** Where a verified key's outcome is counted (the store); absent: not counted. */
  usage?: Pick<OutcomeStore, 'countOutcome'> | undefined;
}): RequestRecorder {
  const { metrics, usage } = deps;
  const bound = metrics.bound;
  const requestLogger = createRequestLogger(deps.logger);
  const summarised = new WeakSet<RequestLog>();
  // One 'close' listener for every response (never a closure per request): the request's log and start
  // time ride on the response itself, under a symbol no other code reads.
  function closed(this: ServerResponse) {
    const open = this as OpenResponse;
    const log = open[LOG] as RequestLog;
    metrics.inflight.dec();
    if (log.status === undefined) log.status = this.statusCode;
    log.durationMs = roundMs(performance.now() - (open[STARTED] as number));
    if (!this.writableFinished) log.aborted = true;
    record(log);
  }
  const open = (res: ServerResponse, requestId: string, method: string | undefined, started: number) => {
    metrics.inflight.inc();
    // Every field the steps and the close may set, declared here: the object keeps one shape from its
    // birth, its fields in the object itself (adding them one by one grew a separate property store).
    // Undefined fields are not written to the line.
    const log: RequestLog = {
      requestId,
      method,
      route: undefined,
      clientIp: undefined,
      keyId: undefined,
      code: undefined,
      reason: undefined,
      status: undefined,
      upstreamMs: undefined,
      upstreamCause: undefined,
      durationMs: undefined,
      aborted: undefined,
      usageKey: undefined,
    };
    // 'close' is emitted once per response, however it ends. The log object becomes the line: no copy.
    (res as OpenResponse)[LOG] = log;
    (res as OpenResponse)[STARTED] = started;
    res.on('close', closed);
    return log;
  };
  const record = (log: RequestLog) => {
    bound.requests.get(String(log.code))?.inc();
    if (log.reason !== undefined) bound.rejections[log.reason].inc();
    if (log.upstreamMs !== undefined) {
      const cls =
        log.code === OK || log.code === PUBLIC
          ? statusClass(log.status ?? 0)
          : log.reason === 'upstream_timeout'
            ? 'timeout'
            : 'error';
      bound.upstreamSeconds.get(cls)?.observe(log.upstreamMs / 1000, log.exemplar);
    }
    if (log.upstreamCause !== undefined) bound.upstreamErrors[log.upstreamCause].inc();
    // Usage by outcome, once per request like the metrics: an increment in the store's in-process counts.
    const key = log.usageKey;
    if (key !== undefined && usage !== undefined) {
      const outcome = outcomeOf(log.reason, log.code === OK);
      if (outcome !== undefined) usage.countOutcome(key.apiKey, key.owner, outcome);
    }
    // warn: Keygate answered an error code (a number; the outcome labels are strings) with a 5xx status.
    if (summarised.has(log)) return;
    requestLogger(log, typeof log.code === 'number' && (log.status ?? 0) >= 500);
  };
  return { open, record, unlogged: (log) => void summarised.add(log) };
}

/** Milliseconds to three decimals, as logged. */
export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
