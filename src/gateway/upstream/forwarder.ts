// Tested in test/e2e/forwarding.test.ts, test/e2e/create-gateway.test.ts, test/adversarial/upstream-faults.test.ts.
import { Pool, type Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import { UpstreamExchange, type ExchangeShared, type ForwardRequest } from './upstream-exchange.js';
import { createUpstreamFailureLog } from './upstream-failure-log.js';

export type { ForwardOutcome, ForwardRequest } from './upstream-exchange.js';

export interface ForwarderOptions {
  readonly upstream: URL;
  /** From being asked (socket assigned, request written) to the upstream's response head; also the idle limit inside its body. */
  readonly timeoutMs: number;
  readonly maxSockets: number;
  /** How long a request may wait for a free upstream connection (then 503 upstream_busy). */
  readonly queueTimeoutMs: number;
  /** A request body still arriving after the grace period must average at least this rate (0 = no minimum). */
  readonly minBodyBytesPerSecond: number;
  readonly bodyRateGraceMs: number;
}

export interface Forwarder {
  /**
   * Forwards the request as checked: its target byte for byte, its upstream head, and its body streamed
   * from `req`, or `bytes` when the body was already read whole (a body bound by body_sha256), sent
   * with its exact length. `request.passed` is called once with the outcome.
   */
  forward(request: ForwardRequest, bytes: Buffer | undefined): void;
  close(): Promise<void>;
}

/**
 * Keygate's own forwarding, on an undici Pool. The upstream request is built
 * from the checked request only: the path as checked, the headers chosen by
 * forward-headers.ts, and a body that is sent with its exact Content-Length,
 * chunked, or not at all, as Keygate's parser framed it. The upstream's answer
 * is checked and relayed by its UpstreamExchange (upstream-exchange.ts);
 * undici itself refuses 101 and an unsolicited 100.
 *
 * Waits are bounded: a request that gets no upstream connection within
 * queueTimeoutMs is answered 503 upstream_busy; a body that trickles in below
 * minBodyBytesPerSecond is cut (408 body_too_slow) so that slow clients cannot
 * hold the pool; an upstream that does not answer within timeoutMs gets 504.
 */
export function createForwarder(options: ForwarderOptions, deps: { logger: Logger; clock: Clock }): Forwarder {
  const pool = new Pool(options.upstream.origin, {
    connections: options.maxSockets,
    pipelining: 1,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    strictContentLength: true,
    connectTimeout: Math.min(options.timeoutMs, 10_000),
  });
  // The upstream closing an idle pooled connection is routine; errors reach the request they belong to.
  pool.on('connectionError', () => {});

  // One sweep for every bounded wait, instead of a timer per request.
  const shared: ExchangeShared = {
    waiting: new Set(),
    uploading: new Set(),
    minBodyBytesPerSecond: options.minBodyBytesPerSecond,
    bodyRateGraceMs: options.bodyRateGraceMs,
    logger: deps.logger,
    failures: createUpstreamFailureLog({ upstream: options.upstream.origin }, deps),
  };
  const { waiting, uploading } = shared;
  const sweepEvery = Math.max(10, Math.min(250, Math.floor(options.queueTimeoutMs / 4)));
  const sweeper = setInterval(() => {
    const now = performance.now();
    for (const x of waiting) if (now - x.queuedAt >= options.queueTimeoutMs) x.giveUp('upstream_busy');
    if (options.minBodyBytesPerSecond > 0) for (const x of uploading) x.checkRate(now);
  }, sweepEvery);
  sweeper.unref();

  return {
    forward(request, bytes) {
      const exchange = new UpstreamExchange(shared, request);
      const { req } = request;
      const { headers, body } = request.head;
      // Bytes read whole are sent with their length (a chunked request's bytes too: the same bytes, framed by length).
      if (bytes !== undefined) headers.push('content-length', String(bytes.length));
      else if (typeof body === 'number') headers.push('content-length', String(body));
      pool.dispatch(
        {
          origin: options.upstream.origin,
          method: req.method as Dispatcher.HttpMethod,
          // The checked request target, sent byte for byte.
          path: req.url as string,
          headers,
          // No body: undici writes no framing. A length: undici checks the bytes sent against it. Chunked: no length given.
          body: bytes ?? (body === 'none' || body === 0 ? null : req),
        },
        exchange,
      );
    },
    async close() {
      clearInterval(sweeper);
      await pool.destroy();
    },
  };
}
