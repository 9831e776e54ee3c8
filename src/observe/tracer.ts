// Tested in test/e2e/tracing.test.ts (the implementation in tracing/otel-tracing.ts behind this interface).
import type { IncomingMessage } from 'node:http';

/**
 * What the request path asks of tracing. Only the shape lives here: the OpenTelemetry packages are loaded
 * (tracing/otel-tracing.ts, by a dynamic import in create-keygate.ts) only when an exporter endpoint is
 * set. With tracing off the path holds `undefined` instead of a tracer: one branch per request, nothing
 * allocated, and `traceparent`/`tracestate` pass through as the client sent them.
 */
export interface RequestTracer {
  /**
   * The SERVER span of one request, started at `startedAt` (performance.now()): the child of the client's
   * span when `traceparent` is valid, otherwise the root of a new trace.
   */
  startServer(req: IncomingMessage, startedAt: number): RequestSpan;
}

/** What ends a request's SERVER span: the outcome, as the request line records it, and what only the span carries. */
export interface SpanOutcome {
  readonly method: string | undefined;
  readonly route: string | undefined;
  readonly path: string | undefined;
  readonly status: number | undefined;
  readonly code: string | number | undefined;
  readonly reason: string | undefined;
  readonly keyId: string | undefined;
  readonly owner: string | undefined;
  readonly cost: number | undefined;
  readonly clientIp: string | undefined;
}

export interface RequestSpan {
  /** 32 and 16 lowercase hex digits: written on the request line as trace_id and span_id. */
  readonly traceId: string;
  readonly spanId: string;
  /** The sampler kept this trace: it is exported, and may be a metric's exemplar. */
  readonly sampled: boolean;
  /**
   * The upstream exchange begins: a CLIENT span when the trace is sampled. Returns the `traceparent` to
   * send upstream (that span's, or the SERVER span's id with the sampled flag off) and the `tracestate`.
   */
  startUpstream(method: string, path: string): { traceparent: string; tracestate?: string };
  /** The upstream answered (its status) or failed (the reason Keygate answered with). */
  endUpstream(status: number | undefined, reason: string | undefined): void;
  /** The store's admission round trip (Redis) begins and ends: a CLIENT span when sampled. */
  startAdmit(): void;
  endAdmit(failed: boolean): void;
  /** The response closed: attributes, ERROR status and the refusal event when refused; ends the span (see keepOpen). */
  end(outcome: SpanOutcome): void;
  /** A WebSocket stream was joined (101): `end` records the outcome but the span lasts until `streamEnded`. */
  keepOpen(): void;
  /** The stream closed: an event `keygate.stream.closed` with the reason (Keygate's: revoked, expired, scope, idle, shutdown; or upstream, client), then the span ends. */
  streamEnded(reason: string): void;
}

/** Tracing as the wiring holds it: the tracer, and the exporter to flush at shutdown. */
export interface Tracing {
  readonly tracer: RequestTracer;
  /** Exports what is queued (bounded by OTEL_BSP_EXPORT_TIMEOUT) and stops. */
  shutdown(): Promise<void>;
}

/** Where the request path finds the tracer: present only while tracing is configured; filled in once it has loaded. */
export interface TracerSlot {
  tracer: RequestTracer | undefined;
}

/**
 * Keygate's trace context replaces the client's in the headers sent upstream: every `traceparent` and
 * `tracestate` the client sent is removed (Keygate chooses what it forwards), then Keygate's are added.
 */
export function withTraceContext(headers: string[], context: { traceparent: string; tracestate?: string }): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    const name = headers[i] as string;
    if (name.length !== 10 && name.length !== 11) continue;
    const lower = name.toLowerCase();
    if (lower === 'traceparent' || lower === 'tracestate') headers.splice(i, 2);
  }
  headers.push('traceparent', context.traceparent);
  if (context.tracestate !== undefined && context.tracestate !== '') headers.push('tracestate', context.tracestate);
}
