// Tested in test/adversarial/limits.test.ts (headers and body timeouts on every listener), test/e2e/admin-endpoints.test.ts.
import type { ServerOptions } from 'node:http';
import type { Limits } from './read-limits.js';

/**
 * The slow-client limits every Keygate listener applies (KEYGATE_HEADERS_TIMEOUT_MS,
 * KEYGATE_REQUEST_TIMEOUT_MS, KEYGATE_KEEP_ALIVE_TIMEOUT_MS, KEYGATE_MAX_HEADER_BYTES).
 */
export function serverTimeouts(
  limits: Pick<Limits, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxHeaderBytes'>,
): ServerOptions {
  return {
    maxHeaderSize: limits.maxHeaderBytes,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // headersTimeout/requestTimeout are only enforced when this timer runs (Node's default: every 30 s).
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
  };
}
