import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ERROR_CODES } from '../errors.js';

/** Outcome label for a forwarded request in keygate_requests_total{code}. */
export const OK = 'ok';

export interface Metrics {
  readonly registry: Registry;
  readonly requests: Counter<'code'>;
  readonly rejections: Counter<'code' | 'reason'>;
  readonly authSeconds: Histogram<'outcome'>;
  readonly upstreamSeconds: Histogram<'status_class'>;
  readonly inflight: Gauge;
  readonly keyCache: Counter<'event'>;
  readonly redisErrors: Counter<'kind'>;
  readonly redisUp: Gauge;
  readonly invalidations: Counter;
}

/**
 * One Registry per Keygate instance (no global state). Every label takes a
 * value from a fixed set: codes, reasons, outcomes, status classes. Never a
 * key, a path or an IP.
 */
export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaultMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'keygate_' });
  const requests = new Counter({
    name: 'keygate_requests_total',
    help: 'Requests by outcome code: "ok" for forwarded, otherwise the error code answered',
    labelNames: ['code'],
    registers: [registry],
  });
  const rejections = new Counter({
    name: 'keygate_auth_rejections_total',
    help: 'Requests refused, by error code and operator-facing reason',
    labelNames: ['code', 'reason'],
    registers: [registry],
  });
  // Pre-create the series so dashboards and rate() see zeros, not gaps.
  requests.inc({ code: OK }, 0);
  for (const code of ERROR_CODES) requests.inc({ code: String(code) }, 0);
  const metrics: Metrics = {
    registry,
    requests,
    rejections,
    authSeconds: new Histogram({
      name: 'keygate_auth_duration_seconds',
      help: 'Time to reach an authentication/authorization decision',
      labelNames: ['outcome'],
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1],
      registers: [registry],
    }),
    upstreamSeconds: new Histogram({
      name: 'keygate_upstream_duration_seconds',
      help: 'Time from forwarding to the upstream response headers',
      labelNames: ['status_class'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    inflight: new Gauge({ name: 'keygate_inflight_requests', help: 'Requests being handled now', registers: [registry] }),
    keyCache: new Counter({
      name: 'keygate_key_cache_events_total',
      help: 'Key cache lookups and evictions (event: hit, miss, evict_change, evict_flush, evict_size)',
      labelNames: ['event'],
      registers: [registry],
    }),
    redisErrors: new Counter({
      name: 'keygate_redis_errors_total',
      help: 'Redis commands that failed (kind: timeout, error)',
      labelNames: ['kind'],
      registers: [registry],
    }),
    redisUp: new Gauge({ name: 'keygate_redis_up', help: '1 when the Redis command connection is ready, 0 otherwise (absent in memory mode)', aggregator: 'min', registers: [registry] }),
    invalidations: new Counter({
      name: 'keygate_key_invalidations_total',
      help: 'Key change notifications received (pub/sub or local)',
      registers: [registry],
    }),
  };
  return metrics;
}
