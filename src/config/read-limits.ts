// Tested in test/unit/load-config.test.ts, test/adversarial/limits.test.ts, test/e2e/overload.test.ts.
import { readEnvInt, type Env } from './read-env-int.js';

/** The size, time and concurrency bounds, each an integer setting with a default: docs/reference/configuration.md lists them. */
export interface Limits {
  readonly maxTokenBytes: number;
  readonly upstreamTimeoutMs: number;
  readonly redisCommandTimeoutMs: number;
  readonly keyCacheTtlMs: number;
  readonly keyCacheNegativeTtlMs: number;
  readonly keyCacheMaxEntries: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxHeaderBytes: number;
  /** Requests in progress per process beyond which a new one is shed at once (503 overloaded). */
  readonly maxInFlight: number;
  /** More header fields than this: 431 too_many_headers. */
  readonly maxHeaderCount: number;
  /** Longest wait for a free upstream connection before 503 upstream_busy. */
  readonly upstreamQueueTimeoutMs: number;
  /** A body still arriving after bodyRateGraceMs must average at least this many bytes per second (0 = off). */
  readonly minBodyBytesPerSecond: number;
  readonly bodyRateGraceMs: number;
  /** The largest body a token's body_sha256 may bind (read whole before forwarding); over it 413 bound_body_too_large. */
  readonly boundBodyMaxBytes: number;
  readonly shutdownTimeoutMs: number;
  readonly upstreamMaxSockets: number;
  /** WebSocket streams one key may hold open on one instance (429 streams_limited past it). */
  readonly maxStreamsPerKey: number;
  /** A stream with no byte relayed either way for this long is closed (1001). */
  readonly streamIdleTimeoutMs: number;
  /** How long Keygate's close frames may take (a frame under way must end first) before a stream's connections are cut. */
  readonly streamCloseGraceMs: number;
}

/** Each limit with its default and bounds; problems are recorded, never thrown. */
export function readLimits(env: Env, problems: string[]): Limits {
  const int = (name: string, def: number, min: number, max: number) => readEnvInt(env, name, def, min, max, problems);
  const limits: Limits = {
    maxTokenBytes: int('KEYGATE_MAX_TOKEN_BYTES', 4096, 256, 65536),
    upstreamTimeoutMs: int('KEYGATE_UPSTREAM_TIMEOUT_MS', 30_000, 1, 3_600_000),
    redisCommandTimeoutMs: int('KEYGATE_REDIS_TIMEOUT_MS', 500, 1, 60_000),
    keyCacheTtlMs: int('KEYGATE_KEY_CACHE_TTL_MS', 1_000, 0, 3_600_000),
    keyCacheNegativeTtlMs: int('KEYGATE_KEY_CACHE_NEGATIVE_TTL_MS', 1_000, 0, 60_000),
    keyCacheMaxEntries: int('KEYGATE_KEY_CACHE_MAX', 100_000, 1, 10_000_000),
    headersTimeoutMs: int('KEYGATE_HEADERS_TIMEOUT_MS', 10_000, 1, 600_000),
    requestTimeoutMs: int('KEYGATE_REQUEST_TIMEOUT_MS', 60_000, 1, 3_600_000),
    keepAliveTimeoutMs: int('KEYGATE_KEEP_ALIVE_TIMEOUT_MS', 5_000, 1, 600_000),
    maxHeaderBytes: int('KEYGATE_MAX_HEADER_BYTES', 16_384, 1024, 1_048_576),
    maxHeaderCount: int('KEYGATE_MAX_HEADER_COUNT', 100, 8, 1_000),
    maxInFlight: int('KEYGATE_MAX_IN_FLIGHT', 1_024, 1, 1_000_000),
    upstreamQueueTimeoutMs: int('KEYGATE_UPSTREAM_QUEUE_TIMEOUT_MS', 2_000, 1, 600_000),
    minBodyBytesPerSecond: int('KEYGATE_MIN_BODY_BYTES_PER_SECOND', 1_024, 0, 1_073_741_824),
    bodyRateGraceMs: int('KEYGATE_BODY_RATE_GRACE_MS', 2_000, 1, 600_000),
    boundBodyMaxBytes: int('KEYGATE_BOUND_BODY_MAX_BYTES', 1_048_576, 0, 268_435_456),
    shutdownTimeoutMs: int('KEYGATE_SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    upstreamMaxSockets: int('KEYGATE_UPSTREAM_MAX_SOCKETS', 256, 1, 65_536),
    maxStreamsPerKey: int('KEYGATE_MAX_STREAMS_PER_KEY', 16, 1, 100_000),
    streamIdleTimeoutMs: int('KEYGATE_STREAM_IDLE_TIMEOUT_MS', 300_000, 1_000, 86_400_000),
    streamCloseGraceMs: int('KEYGATE_STREAM_CLOSE_GRACE_MS', 500, 10, 60_000),
  };
  if (limits.headersTimeoutMs > limits.requestTimeoutMs)
    problems.push('KEYGATE_HEADERS_TIMEOUT_MS: must not exceed KEYGATE_REQUEST_TIMEOUT_MS');
  return limits;
}
