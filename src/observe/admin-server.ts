import { createServer, type Server } from 'node:http';
import type { Registry, RegistryContentType } from 'prom-client';
import type { Limits } from '../config/read-limits.js';
import { serverTimeouts } from '../config/server-timeouts.js';

export interface Readiness {
  /** Resolves to undefined when ready, or a machine-readable reason. */
  (): Promise<string | undefined>;
}

/**
 * The admin port: /metrics, /healthz, /readyz. Never served on the proxy port.
 * It gets the proxy port's slow-client limits: bound to loopback by default,
 * but where it is opened to Prometheus, a slowloris there must not pile up sockets.
 */
export function createAdminServer(
  options: { limits: Pick<Limits, 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs' | 'maxHeaderBytes'> },
  deps: {
    metrics: { readonly registry: Pick<Registry<RegistryContentType>, 'metrics' | 'contentType'> };
    ready: Readiness;
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
        (reason) =>
          reason === undefined ? json(200, { status: 'ready' }) : json(503, { status: 'not ready', reason }),
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
    json(404, { status: 'not found' });
  });
}
