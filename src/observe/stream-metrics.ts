// Tested in test/e2e/metrics.test.ts.
import { Counter, Gauge, type Registry } from 'prom-client';
import { ERROR_CODES } from '../errors.js';

/** Why a stream ended: the values of keygate_streams_closed_total{reason} (docs/reference/metrics.md lists them). */
export const STREAM_CLOSE_REASONS = [
  'revoked',
  'expired',
  'scope',
  'rotated',
  'shutdown',
  'idle',
  'upstream',
  'client',
] as const;
export type StreamCloseReason = (typeof STREAM_CLOSE_REASONS)[number];

/** The WebSocket streams' metrics: none carries a key, a path or an IP. */
export interface StreamMetrics {
  /** Streams joined and relaying now (keygate_open_streams). */
  readonly open: { inc(): void; dec(): void };
  readonly closed: Readonly<Record<StreamCloseReason, { inc(): void }>>;
  /** An upgrade request answered with an error code instead of 101. */
  refused(code: number): void;
}

/**
 * Registered on the instance's own registry beside the request metrics (metrics.ts), with every
 * label value pre-created so dashboards see zeros, not gaps.
 */
export function createStreamMetrics(registry: Registry): StreamMetrics {
  const open = new Gauge({
    name: 'keygate_open_streams',
    help: 'WebSocket streams open now (upgraded, relaying); no per-key label',
    registers: [registry],
  });
  const closed = new Counter({
    name: 'keygate_streams_closed_total',
    help: 'WebSocket streams ended, by reason (revoked, expired, scope, shutdown, idle, upstream, client)',
    labelNames: ['reason'],
    registers: [registry],
  });
  const refusals = new Counter({
    name: 'keygate_upgrade_refusals_total',
    help: 'Upgrade requests answered with an error instead of 101, by error code',
    labelNames: ['code'],
    registers: [registry],
  });
  open.set(0);
  const refusedBy = new Map<number, { inc(): void }>(
    ERROR_CODES.map((code) => {
      const child = refusals.labels({ code: String(code) });
      child.inc(0);
      return [code, child];
    }),
  );
  return {
    open: { inc: () => open.inc(), dec: () => open.dec() },
    closed: Object.fromEntries(
      STREAM_CLOSE_REASONS.map((reason) => {
        const child = closed.labels({ reason });
        child.inc(0);
        return [reason, child];
      }),
    ) as Record<StreamCloseReason, { inc(): void }>,
    refused: (code) => refusedBy.get(code)?.inc(),
  };
}
