import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import express4 from 'express4';
import Fastify from 'fastify';

/** One route of the shared table: the policy lists it, the upstream serves it, in the same order. */
export interface TableRoute {
  readonly methods: readonly string[];
  readonly path: string;
}

export type RouterKind = 'express5' | 'express4' | 'fastify';

export interface RouterUpstream {
  readonly url: string;
  /** Test id (X-Test-Id) → index of the route whose handler ran. */
  readonly ran: Map<string, number>;
  close(): Promise<void>;
}

/**
 * What frameworks commonly put in front of their router, and what an
 * attacker hopes for: X-Original-URL / X-Rewrite-URL replace the path (IIS,
 * Symfony, Zend), and a POST's method is replaced by X-HTTP-Method-Override,
 * X-HTTP-Method, X-Method-Override or `_method` (the method-override middleware,
 * Rails, Laravel). Applied to the raw request before the framework sees it.
 */
function frontMiddleware(req: IncomingMessage): void {
  const rewrite = req.headers['x-original-url'] ?? req.headers['x-rewrite-url'];
  if (typeof rewrite === 'string') req.url = rewrite;
  if (req.method !== 'POST') return;
  const q = new URL(req.url ?? '/', 'http://x').searchParams.get('_method');
  const o =
    req.headers['x-http-method-override'] ?? req.headers['x-http-method'] ?? req.headers['x-method-override'] ?? q;
  if (typeof o === 'string' && o.length > 0) req.method = o.toUpperCase();
}

/**
 * A real Express (5 or 4) or Fastify app serving `table` with the given router
 * settings. Every handler records which route ran, keyed by the X-Test-Id the
 * test sent, so the test knows what the upstream executed, not just what it answered.
 * With `mountAt` ("/api/v3"), the routes are served the way an app usually splits its API off: by a
 * router mounted there (Express `app.use(mountAt, router)`, a Fastify plugin with that `prefix`), each
 * route's path written relative to it, so `/api/v3/` is the router's `/` handler.
 */
export async function startRouterUpstream(
  kind: RouterKind,
  table: readonly TableRoute[],
  strict: boolean,
  mountAt?: string,
): Promise<RouterUpstream> {
  const relative = (path: string) => (mountAt === undefined ? path : path.slice(mountAt.length));
  const ran = new Map<string, number>();
  const record = (req: IncomingMessage, i: number) => {
    const id = req.headers['x-test-id'];
    if (typeof id === 'string') ran.set(id, i);
  };
  let server: Server;
  if (kind === 'fastify') {
    // Fastify's own defaults are case-sensitive and strict about the trailing slash; "relaxed" turns both off.
    const app = Fastify({
      routerOptions: strict ? {} : { caseSensitive: false, ignoreTrailingSlash: true },
      serverFactory: (handler) => createServer((req, res) => (frontMiddleware(req), handler(req, res))),
    });
    const routes = (scope: typeof app) =>
      table.forEach((r, i) => {
        scope.route({
          method: [...r.methods],
          url: relative(r.path),
          handler: async (req, reply) => (record(req.raw, i), reply.send('')),
        });
      });
    if (mountAt === undefined) routes(app);
    else await app.register(async (scope) => routes(scope as unknown as typeof app), { prefix: mountAt });
    await app.listen({ port: 0, host: '127.0.0.1' });
    server = app.server;
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, ran, close: () => app.close() };
  }
  const app = kind === 'express5' ? express() : express4();
  if (strict) {
    app.set('case sensitive routing', true);
    app.set('strict routing', true);
  }
  const router =
    mountAt === undefined
      ? app
      : kind === 'express5'
        ? express.Router({ caseSensitive: strict, strict })
        : express4.Router({ caseSensitive: strict, strict });
  if (mountAt !== undefined) app.use(mountAt, router as never);
  table.forEach((r, i) => {
    // Express 5 (path-to-regexp 8) names its wildcards.
    const path = kind === 'express5' ? relative(r.path).replace(/\*$/, '*rest') : relative(r.path);
    for (const m of r.methods) {
      (
        router as unknown as Record<string, (p: string, h: (req: IncomingMessage, res: ServerResponse) => void) => void>
      )[m.toLowerCase()]!(path, (req, res) => {
        record(req, i);
        res.end();
      });
    }
  });
  server = createServer((req, res) => {
    frontMiddleware(req);
    (app as unknown as (req: IncomingMessage, res: ServerResponse) => void)(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ran,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
