// Tested in test/e2e/metrics.test.ts, test/unit/scrape-time-metrics.test.ts, test/repo/metrics-catalogue.test.ts.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ERROR_CODES, REASONS, type Reason } from '../errors.js';
import { KEY_ALGS, type KeyAlg } from '../keys/public-key.js';
import { packageVersion } from './package-version.js';
import { counterSlots, ScrapeTimeHistogram, type Incrementable, type Observable } from './scrape-time-metrics.js';

/** Outcome label for a forwarded request in keygate_requests_total{code}. */
export const OK = 'ok';
/** Outcome label for GET /api/v3/time, answered by Keygate itself. */
export const TIME = 'time';
/** Outcome label for a request on a route in the policy's `public` list: forwarded without authentication. */
export const PUBLIC = 'public';
/** The outcome labels that are not error codes. */
export const OUTCOMES = [OK, PUBLIC, TIME] as const;

export interface Metrics {
  readonly registry: Registry;
  readonly requests: Counter<'code'>;
  readonly rejections: Counter<'code' | 'reason'>;
  readonly admittedTokens: Counter<'alg'>;
  readonly authSeconds: Histogram<'outcome'>;
  readonly upstreamSeconds: Histogram<'status_class'>;
  readonly upstreamErrors: Counter<'cause'>;
  /** Requests being handled now: a plain number on the request path, read by the gauge at scrape time. */
  readonly inflight: InFlight;
  readonly keyCache: Counter<'event'>;
  /** 1 while the Redis maxmemory-policy may evict nonces (redis-server-checks.ts). */
  readonly redisMayEvict: Gauge;
  /** The Redis server's evicted_keys (summed over Cluster masters). */
  readonly redisEvictedKeys: Gauge;
  /** Stored public keys refused when a key was loaded (weak-public-key.ts). */
  readonly refusedPublicKeys: Counter;
  /** Times this instance found the Redis keystore emptied (keystore-epoch.ts). */
  readonly redisKeystoreEmptied: Counter;
  readonly redisErrors: Counter<'kind'>;
  readonly redisUp: Gauge<'connection'>;
  readonly invalidations: Counter<'scope'>;
  /** X-Keygate-Assertion signatures made, by mode (identity: cache misses and refreshes; request: every pass). */
  readonly assertionsSigned: Counter<'mode'>;
  /** Identity assertions served from the per-key cache, without signing. */
  readonly assertionCacheHits: Counter;
  /** Spans tracing did not export: its queue was full, or the exporter failed the batch (tracing/otel-tracing.ts). */
  readonly spansDropped: Counter<'reason'>;
  readonly buildInfo: Gauge<'version' | 'node_version'>;
  /** Webhook attempts and events (webhook-delivery.ts): delivered, failed (retried later), given_up. */
  readonly webhookDeliveries: Counter<'outcome'>;
  /** Events not yet delivered, group-wide (read by every consumer after each round). */
  readonly webhookPending: Gauge;
  /** Regions: seconds since the newest own keystore heartbeat was heard back on this region's replica (docs/regions.md). */
  readonly keystoreStaleness: Gauge;
  /** Regions: admits run on another region's request-state Redis, their round trip, by home region. */
  readonly remoteAdmitSeconds: Histogram<'home'>;
  /** Regions on: registers the two metrics above, the gauge read from `staleness` at scrape time. */
  enableRegions(staleness: () => number | undefined): void;
  /** Children bound once per label value: the request path never looks a label set up. */
  readonly bound: BoundMetrics;
}

export interface InFlight {
  inc(): void;
  dec(): void;
  readonly value: number;
}

export interface BoundMetrics {
  /** keygate_requests_total by outcome code ("ok", "public", "time" or an error code). */
  readonly requests: ReadonlyMap<string, Incrementable>;
  readonly rejections: Readonly<Record<Reason, Incrementable>>;
  readonly admittedTokens: Readonly<Record<KeyAlg, Incrementable>>;
  readonly authSeconds: Readonly<Record<(typeof LABEL_VALUES.authOutcome)[number], Observable>>;
  readonly upstreamSeconds: ReadonlyMap<string, Observable>;
  readonly upstreamErrors: Readonly<Record<UpstreamCause, Incrementable>>;
  readonly assertionsSigned: Readonly<Record<(typeof LABEL_VALUES.assertionMode)[number], Incrementable>>;
}

/** Every label value each Keygate metric can take (docs/reference/metrics.md lists the same). */
export const LABEL_VALUES = Object.freeze({
  authOutcome: ['allow', 'deny', 'error'] as const,
  tokenAlg: KEY_ALGS,
  upstreamStatusClass: ['1xx', '2xx', '3xx', '4xx', '5xx', 'error', 'timeout'] as const,
  upstreamErrorCause: ['dns', 'refused', 'unreachable', 'tls', 'reset', 'timeout', 'bad_response', 'other'] as const,
  keyCacheEvent: ['hit', 'miss', 'evict_change', 'evict_flush', 'evict_size'] as const,
  redisErrorKind: ['timeout', 'error'] as const,
  redisConnection: ['command', 'subscriber', 'management'] as const,
  invalidationScope: ['key', 'all'] as const,
  assertionMode: ['identity', 'request'] as const,
  spanDropReason: ['queue_full', 'export_failed'] as const,
  webhookOutcome: ['delivered', 'failed', 'given_up'] as const,
});

/** Why a forwarded request got no answer from the upstream (keygate_upstream_errors_total{cause}). */
export type UpstreamCause = (typeof LABEL_VALUES.upstreamErrorCause)[number];

/**
 * Tracing on: /metrics answers in OpenMetrics, the exposition format that carries the latency
 * histograms' exemplars (a sampled trace id per bucket). Tracing off, it stays the Prometheus text format.
 */
export function exposeExemplars(metrics: Pick<Metrics, 'registry'>): void {
  metrics.registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE as never);
}

/** Upstream status → bounded label ("2xx"…; anything odd counts as "5xx"). */
export function statusClass(status: number): string {
  return status >= 100 && status <= 599 ? `${Math.floor(status / 100)}xx` : '5xx';
}

/**
 * One Registry per Keygate instance (no global state). Every label takes a
 * value from a fixed set: codes, reasons, outcomes, status classes. Never a
 * key, a path or an IP. prom-client's default process metrics keep their
 * standard names (process_*, nodejs_*) so existing Node dashboards find them;
 * Keygate's own are keygate_*.
 */
export function createMetrics(options: { defaultMetrics?: boolean; version?: string } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry });
  // The request path's metrics: counted in typed arrays by label-set slot (scrape-time-metrics.ts), added to
  // prom-client at scrape. The slots are in the order the series were pre-created before, so the
  // exposition keeps its order.
  const requestCodes = [...OUTCOMES, ...ERROR_CODES.map(String)];
  const requestSlots = counterSlots(requestCodes.map((code) => ({ code })));
  const requests: Counter<'code'> = new Counter({
    name: 'keygate_requests_total',
    help: 'Requests by outcome code: "ok" for forwarded after authentication, "public" for forwarded on a public route, "time" for GET /api/v3/time, otherwise the error code answered',
    labelNames: ['code'],
    registers: [registry],
    collect: () => requestSlots.flush(requests),
  });
  const reasons = Object.entries(REASONS) as Array<[Reason, { code: number }]>;
  const rejectionSlots = counterSlots(reasons.map(([reason, { code }]) => ({ code: String(code), reason })));
  const rejections: Counter<'code' | 'reason'> = new Counter({
    name: 'keygate_auth_rejections_total',
    help: 'Requests refused, by error code and operator-facing reason',
    labelNames: ['code', 'reason'],
    registers: [registry],
    collect: () => rejectionSlots.flush(rejections),
  });
  // Pre-create the series so dashboards and rate() see zeros, not gaps.
  for (const code of requestCodes) requests.inc({ code }, 0);
  for (const [reason, { code }] of reasons) rejections.inc({ code: String(code), reason }, 0);
  // Three values at most: how far a move from HS256 to EdDSA/ES256 has got, never which key.
  const algSlots = counterSlots(KEY_ALGS.map((alg) => ({ alg })));
  const admittedTokens: Counter<'alg'> = new Counter({
    name: 'keygate_admitted_tokens_total',
    help: 'Requests admitted after authentication and authorization, by the alg their token was signed with (HS256, EdDSA, ES256)',
    labelNames: ['alg'],
    registers: [registry],
    collect: () => algSlots.flush(admittedTokens),
  });
  for (const alg of KEY_ALGS) admittedTokens.inc({ alg }, 0);
  let stalenessOf: () => number | undefined = () => undefined;
  // Registered only with regions on (enableRegions): without them nothing changes on /metrics.
  const keystoreStaleness = new Gauge({
    name: 'keygate_keystore_staleness_seconds',
    help: "Regions: seconds since the newest heartbeat this instance wrote through the keystore master was heard back on its region's keystore replica (above KEYGATE_KEYSTORE_MAX_STALENESS_MS: 503 keystore_stale; +Inf before the first); absent without regions",
    aggregator: 'max',
    registers: [],
    collect() {
      const v = stalenessOf();
      if (v !== undefined) this.set(v);
    },
  });
  const remoteAdmitSeconds = new Histogram({
    name: 'keygate_remote_admit_duration_seconds',
    help: "Regions: admits run on another region's request-state Redis (the key's home), their round trip, by home region",
    labelNames: ['home'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1],
    registers: [],
  });
  const authSeconds = new ScrapeTimeHistogram(
    {
      name: 'keygate_auth_duration_seconds',
      help: 'Time from request start to the authentication/authorization decision on /api/v3/ (outcome: allow, deny, error = store unavailable)',
      labelNames: ['outcome'] as const,
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1],
      registers: [registry],
    },
    LABEL_VALUES.authOutcome.map((outcome) => ({ outcome })),
  );
  const upstreamSeconds = new ScrapeTimeHistogram(
    {
      name: 'keygate_upstream_duration_seconds',
      help: 'Time from forwarding to the upstream response headers (status_class: 1xx-5xx, error = 502, timeout = 504)',
      labelNames: ['status_class'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    },
    LABEL_VALUES.upstreamStatusClass.map((c) => ({ status_class: c })),
  );
  const upstreamErrors = new Counter({
    name: 'keygate_upstream_errors_total',
    help: 'Forwarded requests the upstream did not answer, by cause (dns, refused, unreachable, tls, reset, timeout, bad_response, other)',
    labelNames: ['cause'],
    registers: [registry],
  });
  let live = 0;
  const inflight: InFlight = {
    inc: () => void live++,
    dec: () => void live--,
    get value() {
      return live;
    },
  };
  new Gauge({
    name: 'keygate_inflight_requests',
    help: 'Requests being handled now',
    registers: [registry],
    collect() {
      this.set(live);
    },
  });
  const assertionsSigned = new Counter({
    name: 'keygate_assertions_signed_total',
    help: 'X-Keygate-Assertion signatures made (mode: identity = cache misses and refreshes, request = every pass)',
    labelNames: ['mode'],
    registers: [registry],
  });
  const bound: BoundMetrics = {
    requests: new Map(requestCodes.map((code, i) => [code, requestSlots.child(i)])),
    rejections: Object.fromEntries(reasons.map(([reason], i) => [reason, rejectionSlots.child(i)])) as Record<
      Reason,
      Incrementable
    >,
    admittedTokens: Object.fromEntries(KEY_ALGS.map((alg, i) => [alg, algSlots.child(i)])) as Record<
      KeyAlg,
      Incrementable
    >,
    authSeconds: {
      allow: authSeconds.child(0),
      deny: authSeconds.child(1),
      error: authSeconds.child(2),
    },
    upstreamSeconds: new Map(LABEL_VALUES.upstreamStatusClass.map((c, i) => [c, upstreamSeconds.child(i)])),
    // Bound at 0: an alert on one cause sees a series from the first scrape.
    upstreamErrors: Object.fromEntries(
      LABEL_VALUES.upstreamErrorCause.map((cause) => {
        const child = upstreamErrors.labels({ cause });
        child.inc(0);
        return [cause, child];
      }),
    ) as Record<UpstreamCause, Incrementable>,
    assertionsSigned: {
      identity: assertionsSigned.labels({ mode: 'identity' }),
      request: assertionsSigned.labels({ mode: 'request' }),
    },
  };
  const metrics: Metrics = {
    bound,
    registry,
    requests,
    rejections,
    admittedTokens,
    authSeconds,
    upstreamSeconds,
    upstreamErrors,
    inflight,
    keyCache: new Counter({
      name: 'keygate_key_cache_events_total',
      help: 'Key cache lookups and evictions (event: hit, miss, evict_change, evict_flush, evict_size)',
      labelNames: ['event'],
      registers: [registry],
    }),
    redisMayEvict: new Gauge({
      name: 'keygate_redis_may_evict',
      help: '1 while the Redis maxmemory-policy is not noeviction (nonces may be evicted; requests are refused unless KEYGATE_ALLOW_EVICTING_REDIS=true), 0 under noeviction',
      aggregator: 'max',
      registers: [registry],
    }),
    redisEvictedKeys: new Gauge({
      name: 'keygate_redis_evicted_keys',
      help: "The Redis server's evicted_keys (INFO stats, summed over Cluster masters), read every 5 s: any rise under KEYGATE_ALLOW_EVICTING_REDIS=true may have let a token in twice",
      aggregator: 'max',
      registers: [registry],
    }),
    refusedPublicKeys: new Counter({
      name: 'keygate_refused_public_keys_total',
      help: 'Stored EdDSA/ES256 public keys refused when their key was loaded into the cache (small-order, non-canonical or compressed point): tokens for that key fail',
      registers: [registry],
    }),
    redisKeystoreEmptied: new Counter({
      name: 'keygate_redis_keystore_emptied_total',
      help: "Times this instance found the Redis keystore's epoch marker gone (FLUSHDB/FLUSHALL, a restart without persistence): replay fence raised, key caches flushed",
      registers: [registry],
    }),
    redisErrors: new Counter({
      name: 'keygate_redis_errors_total',
      help: 'Redis commands that failed (kind: timeout, error)',
      labelNames: ['kind'],
      registers: [registry],
    }),
    redisUp: new Gauge({
      name: 'keygate_redis_up',
      help: '1 when the Redis connection is ready, 0 otherwise (connection: command, subscriber; absent in memory mode)',
      labelNames: ['connection'],
      // With KEYGATE_WORKERS > 1 the primary sums workers' registries: the lowest value is the honest one.
      aggregator: 'min',
      registers: [registry],
    }),
    invalidations: new Counter({
      name: 'keygate_key_invalidations_total',
      help: 'Key change notifications received (scope: key = one key, all = flush after reconnect or "*")',
      labelNames: ['scope'],
      registers: [registry],
    }),
    assertionsSigned,
    assertionCacheHits: new Counter({
      name: 'keygate_assertion_cache_hits_total',
      help: 'Identity assertions (X-Keygate-Assertion) served from the per-key cache, without signing',
      registers: [registry],
    }),
    spansDropped: new Counter({
      name: 'keygate_trace_spans_dropped_total',
      help: 'Spans not exported (tracing on): queue_full = the export queue (OTEL_BSP_MAX_QUEUE_SIZE) was full; export_failed = the collector did not take the batch',
      labelNames: ['reason'],
      registers: [registry],
    }),
    buildInfo: new Gauge({
      name: 'keygate_build_info',
      help: 'Always 1; the running Keygate version and Node.js version as labels',
      labelNames: ['version', 'node_version'],
      // With KEYGATE_WORKERS > 1 every worker reports the same series: keep 1, not the sum.
      aggregator: 'max',
      registers: [registry],
    }),
    webhookDeliveries: new Counter({
      name: 'keygate_webhook_deliveries_total',
      help: 'Webhook deliveries by outcome: delivered (answered 2xx), failed (an attempt not answered 2xx in time; retried), given_up (retried for 24 h, or its audit entry was trimmed)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    webhookPending: new Gauge({
      name: 'keygate_webhook_pending',
      help: 'Key events not yet delivered to the webhook receiver (being attempted or waiting for a retry), for the whole keystore: every instance reports the same count',
      // The same group-wide count from every worker: the largest, not the sum.
      aggregator: 'max',
      registers: [registry],
    }),
    keystoreStaleness,
    remoteAdmitSeconds,
    enableRegions(read) {
      stalenessOf = read;
      registry.registerMetric(keystoreStaleness);
      registry.registerMetric(remoteAdmitSeconds);
    },
  };

  // The usual *_build_info convention: 1, with the build in labels, so it can be joined onto any series.
  metrics.buildInfo.set({ version: options.version ?? packageVersion(), node_version: process.version }, 1);
  for (const event of LABEL_VALUES.keyCacheEvent) metrics.keyCache.inc({ event }, 0);
  for (const kind of LABEL_VALUES.redisErrorKind) metrics.redisErrors.inc({ kind }, 0);
  for (const scope of LABEL_VALUES.invalidationScope) metrics.invalidations.inc({ scope }, 0);
  for (const reason of LABEL_VALUES.spanDropReason) metrics.spansDropped.inc({ reason }, 0);
  for (const outcome of LABEL_VALUES.webhookOutcome) metrics.webhookDeliveries.inc({ outcome }, 0);
  return metrics;
}
