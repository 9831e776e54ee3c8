// Tested in test/e2e/tracing.test.ts, test/e2e/tracing-export.test.ts.
// Loaded only by a dynamic import from create-keygate.ts when an OTLP endpoint is set: a Keygate without
// tracing never loads this file or a single OpenTelemetry package (test/process/tracing.test.ts).
import { randomFillSync } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SamplingResult,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { TracingSettings } from '../../config/read-tracing.js';
import type { RequestSpan, RequestTracer, SpanOutcome, Tracing } from '../tracer.js';

export interface TracingDeps {
  /** Spans not exported: the queue was full (OTEL_BSP_MAX_QUEUE_SIZE), or the exporter failed the batch. */
  readonly onDropped: (reason: 'queue_full' | 'export_failed', count: number) => void;
  readonly version: string;
}

export interface TracingOptions {
  /** The store is Redis: the admission round trip gets a CLIENT span (the memory store has no round trip). */
  readonly redisAdmit: boolean;
  /** Proxy mode's upstream, named on the upstream CLIENT span. */
  readonly upstream: URL | undefined;
}

const propagator = new W3CTraceContextPropagator();
/** The most a shutdown waits for the last export. */
const SHUTDOWN_BOUND_MS = 5_000;

/** Builds the tracer from the settings: its own provider (never registered globally), sampler, exporter and queue. */
export async function createTracing(
  settings: TracingSettings,
  options: TracingOptions,
  deps: TracingDeps,
): Promise<Tracing> {
  // Only the exporter of the protocol in use is loaded.
  const { OTLPTraceExporter } =
    settings.protocol === 'http/json'
      ? await import('@opentelemetry/exporter-trace-otlp-http')
      : await import('@opentelemetry/exporter-trace-otlp-proto');
  const exporter = new OTLPTraceExporter({
    url: settings.endpoint,
    headers: { ...settings.headers },
    timeoutMillis: settings.batch.exportTimeoutMillis,
  });
  const processor = new CountingProcessor(exporter, settings.batch, deps.onDropped);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      ...settings.resourceAttributes,
      'service.name': settings.serviceName,
      'service.version': deps.version,
    }),
    sampler: sampler(settings),
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer('keygate', deps.version);
  return {
    tracer: {
      startServer: (req, startedAt) => new OtelRequestSpan(tracer, req, startedAt, options),
    } satisfies RequestTracer,
    // A collector that is down or hangs must not hold the shutdown: what is not sent by then is dropped.
    shutdown: () => {
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.min(settings.batch.exportTimeoutMillis, SHUTDOWN_BOUND_MS));
        timer.unref();
      });
      return Promise.race([provider.shutdown().catch(() => {}), bound]).finally(() => clearTimeout(timer));
    },
  };
}

function sampler(settings: TracingSettings): Sampler {
  const ratio = new TraceIdRatioBasedSampler(settings.samplerRatio);
  switch (settings.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new DrawnRatioSampler(settings.samplerRatio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * `traceidratio` that a client cannot steer. The SDK's ratio sampler decides on the trace id, and a request's trace
 * id is the client's whenever it sends a `traceparent`: ids whose four 32-bit words XOR to 0 were always kept, so a
 * client could have every request of its own exported (and any other of its choosing dropped). A sampler that does
 * not follow the parent decides here on a number Keygate draws (crypto random, drawn in batches), with the same
 * probability; the trace id is still the client's, so a kept request joins its trace.
 */
class DrawnRatioSampler implements Sampler {
  private readonly bound: number;
  private readonly pool = new Uint32Array(256);
  private next = this.pool.length;

  constructor(private readonly ratio: number) {
    // Out of 2^32: 1 keeps every draw, 0 none.
    this.bound = Math.floor(Math.min(1, Math.max(0, ratio)) * 0x1_0000_0000);
  }

  shouldSample(): SamplingResult {
    if (this.next === this.pool.length) {
      randomFillSync(this.pool);
      this.next = 0;
    }
    const draw = this.pool[this.next++] as number;
    return { decision: draw < this.bound ? SamplingDecision.RECORD_AND_SAMPLED : SamplingDecision.NOT_RECORD };
  }

  toString(): string {
    return `DrawnRatioSampler{${this.ratio}}`;
  }
}

/**
 * One request's spans. The SERVER span starts when the request is admitted; the CLIENT spans (upstream,
 * Redis admit) only when the trace is sampled. Attributes are set from the outcome once, when the
 * response closes: never a header, the token, a secret or an API key (the key id names the key).
 */
class OtelRequestSpan implements RequestSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
  private readonly span: Span;
  private readonly parent: Context;
  private upstream: Span | undefined;
  private admit: Span | undefined;
  private streaming = false;

  constructor(
    private readonly tracer: Tracer,
    req: IncomingMessage,
    startedAt: number,
    private readonly options: TracingOptions,
  ) {
    const remote = propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
    this.span = tracer.startSpan(
      req.method ?? 'HTTP',
      { kind: SpanKind.SERVER, startTime: startedAt, attributes: { 'server.port': req.socket.localPort ?? 0 } },
      remote,
    );
    const context = this.span.spanContext();
    this.traceId = context.traceId;
    this.spanId = context.spanId;
    this.sampled = (context.traceFlags & TraceFlags.SAMPLED) !== 0;
    this.parent = trace.setSpan(ROOT_CONTEXT, this.span);
  }

  startUpstream(method: string, path: string) {
    const upstream = this.options.upstream;
    let context = this.parent;
    if (this.span.isRecording()) {
      const attributes: Attributes = { 'http.request.method': method, 'url.path': path };
      if (upstream !== undefined) {
        attributes['server.address'] = upstream.hostname;
        attributes['server.port'] = Number(upstream.port) || (upstream.protocol === 'https:' ? 443 : 80);
        // The checked path, never the query: a query is the client's business, not the trace's.
        attributes['url.full'] = upstream.origin + path;
      }
      this.upstream = this.tracer.startSpan(method, { kind: SpanKind.CLIENT, attributes }, this.parent);
      context = trace.setSpan(ROOT_CONTEXT, this.upstream);
    }
    const carrier: { traceparent: string; tracestate?: string } = { traceparent: '' };
    // Unsampled, the SERVER span is the upstream's parent, with the sampled flag off (W3C Trace Context).
    propagator.inject(context, carrier, defaultTextMapSetter);
    return carrier;
  }

  endUpstream(status: number | undefined, reason: string | undefined) {
    const span = this.upstream;
    if (span === undefined) return;
    this.upstream = undefined;
    if (status !== undefined) {
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    } else {
      span.setAttribute('error.type', reason ?? 'error');
      span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
    }
    span.end();
  }

  startAdmit() {
    if (!this.options.redisAdmit || !this.span.isRecording()) return;
    this.admit = this.tracer.startSpan(
      'redis admit',
      { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'redis', 'db.operation.name': 'admit' } },
      this.parent,
    );
  }

  endAdmit(failed: boolean) {
    const span = this.admit;
    if (span === undefined) return;
    this.admit = undefined;
    if (failed) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }

  keepOpen() {
    this.streaming = true;
  }

  streamEnded(reason: string) {
    const closedBy = reason === 'upstream' || reason === 'client' ? reason : 'keygate';
    this.span.addEvent('keygate.stream.closed', {
      'keygate.stream.close_reason': reason,
      'keygate.stream.closed_by': closedBy,
    });
    this.span.end();
  }

  end(o: SpanOutcome) {
    const span = this.span;
    // The client went away first: what was still open ends with the request.
    this.endAdmit(true);
    this.endUpstream(undefined, 'aborted');
    if (!span.isRecording()) return void (this.streaming || span.end());
    const method = o.method ?? 'HTTP';
    span.updateName(o.route === undefined ? method : `${method} ${o.route}`);
    const a: Attributes = { 'http.request.method': o.method ?? '_OTHER' };
    if (o.path !== undefined) a['url.path'] = o.path;
    if (o.route !== undefined) a['http.route'] = o.route;
    if (o.status !== undefined) a['http.response.status_code'] = o.status;
    if (o.clientIp !== undefined) a['client.address'] = o.clientIp;
    if (o.code !== undefined) a['keygate.code'] = String(o.code);
    if (o.reason !== undefined) a['keygate.reason'] = o.reason;
    if (o.keyId !== undefined) a['keygate.key_id'] = o.keyId;
    if (o.owner !== undefined) a['keygate.owner'] = o.owner;
    if (o.cost !== undefined) a['keygate.route_cost'] = o.cost;
    span.setAttributes(a);
    if (o.reason !== undefined) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: o.reason });
      span.addEvent('keygate.refused', { 'keygate.code': String(o.code), 'keygate.reason': o.reason });
    } else if (o.status !== undefined && o.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    if (!this.streaming) span.end();
  }
}

/**
 * The batch processor with its drops counted. The SDK's processor drops a span when its queue is full
 * and counts that only in a private field; this wrapper keeps the same count from outside (spans handed
 * in, minus spans the processor has taken out for export) and drops, counted, before the SDK would. An
 * export that fails (the receiver down, after the exporter's own retries) drops its batch, counted too.
 * Either way the queue stays bounded and no request waits on the exporter.
 */
class CountingProcessor implements SpanProcessor {
  private queued = 0;
  private readonly inner: BatchSpanProcessor;
  private readonly maxQueueSize: number;

  constructor(
    exporter: SpanExporter,
    batch: TracingSettings['batch'],
    private readonly onDropped: TracingDeps['onDropped'],
  ) {
    this.maxQueueSize = batch.maxQueueSize;
    const counting: SpanExporter = {
      export: (spans: ReadableSpan[], done: (result: ExportResult) => void) => {
        this.queued = Math.max(0, this.queued - spans.length);
        exporter.export(spans, (result) => {
          if (result.code !== ExportResultCode.SUCCESS) onDropped('export_failed', spans.length);
          done(result);
        });
      },
      shutdown: () => exporter.shutdown(),
      forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
    };
    this.inner = new BatchSpanProcessor(counting, { ...batch });
  }

  onStart(span: Parameters<SpanProcessor['onStart']>[0], context: Context) {
    this.inner.onStart(span, context);
  }

  onEnd(span: ReadableSpan) {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queued >= this.maxQueueSize) return this.onDropped('queue_full', 1);
    this.queued++;
    this.inner.onEnd(span);
  }

  forceFlush() {
    return this.inner.forceFlush();
  }

  shutdown() {
    return this.inner.shutdown();
  }
}
