// Tested in test/e2e/admin-endpoints.test.ts.
import { createServer, type Server } from 'node:http';
import type { Registry, RegistryContentType } from 'prom-client';
import type { Limits } from '../config/read-limits.js';
import { serverTimeouts } from '../config/server-timeouts.js';
import type { NotReady } from './readiness.js';

/** Where the admin port publishes the assertion keys' public parts. */
export const JWKS_PATH = '/.well-known/jwks.json';
/** Cache-Control max-age of the JWK Set; docs/security.md's rotation steps wait this long for caches. */
export const JWKS_MAX_AGE_SECONDS = 60;

export interface Readiness {
  /** Resolves to undefined when ready, or a machine-readable reason (with a cause for redis_unreachable). */
  (): Promise<(Pick<NotReady, 'cause' | 'err'> & { readonly reason: string }) | undefined>;
}

/**
 * The admin port: /metrics, /healthz, /readyz, and /.well-known/jwks.json when the assertion is on.
 * Never served on the proxy port.
 * It gets the proxy port's slow-client limits: bound to loopback by default,
 * but where it is opened to Prometheus, a slowloris there must not pile up sockets.
 */
export function createAdminServer(
  options: { limits: Pick<Limits, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxHeaderBytes'> },
  deps: {
    metrics: { readonly registry: Pick<Registry<RegistryContentType>, 'metrics' | 'contentType'> };
    ready: Readiness;
    /** The assertion's public keys (GET /.well-known/jwks.json); absent = the assertion is off, 404. */
    jwks?: () => unknown;
  },
): Server {
  return createServer(serverTimeouts(options.limits), (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const json = (status: number, body: unknown) => {
      res.statusCode = status;
      res.setHeader('content-type', 'application/json');
      res.setHeader('cache-control', 'no-store');
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(405, { status: 'method not allowed' });
    if (path === '/healthz') return json(200, { status: 'ok' });
    if (path === '/readyz') {
      deps.ready().then(
        (notReady) =>
          notReady === undefined ? json(200, { status: 'ready' }) : json(503, { status: 'not ready', ...notReady }),
        (err: Error) => json(503, { status: 'not ready', reason: err.message }),
      );
      return;
    }
    if (path === '/metrics') {
      deps.metrics.registry.metrics().then(
        (text) => {
          res.setHeader('content-type', deps.metrics.registry.contentType);
          res.end(text);
        },
        () => json(500, { status: 'metrics failed' }),
      );
      return;
    }
    if (path === JWKS_PATH && deps.jwks !== undefined) {
      res.statusCode = 200;
      res.setHeader('content-type', 'application/jwk-set+json');
      // Far below how long a retired key stays published (at least one TTL plus this), so verifiers see a new key in time.
      res.setHeader('cache-control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`);
      return void res.end(JSON.stringify(deps.jwks()));
    }
    json(404, { status: 'not found' });
  });
}
