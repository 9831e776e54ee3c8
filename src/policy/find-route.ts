import type { RouteTable } from './route-table.js';
import { costOf, isPrefixRoot, type RouteMatch } from './routes.js';

/**
 * The route a request is authorized against. `methods` is the request method,
 * and second, the method an allowed override header or `_method` asks for
 * (src/pipeline/check-override.ts): then both must be authorized, so the
 * scopes of both routes are required.
 */
export function findRoute(table: RouteTable, methods: readonly string[], path: string): RouteMatch | undefined {
  const first = table.match(methods[0] as string, path);
  if (methods.length === 1) return first;
  const second = table.match(methods[1] as string, path);
  if (!first || !second) {
    const found = first ?? second;
    return found && { pattern: found.pattern, scopes: found.scopes, ...costOf(found, found), partial: true };
  }
  if (first === second) return first;
  // The upstream runs the overridden method's handler: log that pattern, require both routes' scopes.
  return {
    pattern: second.pattern,
    scopes: [...new Set([...first.scopes, ...second.scopes])],
    ...costOf(first, second),
  };
}

/**
 * The route of an `/api/v3/` path. The prefix without its slash (`/api/v3`) is read as `/api/v3/` too: a
 * router mounted at the prefix (Express `app.use('/api/v3', router)`, Fastify's `prefix`) runs its `/`
 * handler for it whatever its own trailing-slash setting. With `trailingSlash: strict` the two are different
 * routes, so the key needs the scopes of both when both are listed (with `ignore` the table already reads
 * them as one route).
 */
export function findApiRoute(
  table: RouteTable,
  methods: readonly string[],
  path: string,
  prefix: string,
): RouteMatch | undefined {
  const route = findRoute(table, methods, path);
  if (table.matching.trailingSlash === 'ignore' || !isPrefixRoot(path, prefix, table.matching)) return route;
  const mounted = findRoute(table, methods, prefix);
  if (!route || !mounted || route === mounted) return route ?? mounted;
  // The mounted router's `/` handler is the one that runs: log its pattern, require both routes' scopes.
  return {
    pattern: mounted.pattern,
    scopes: [...new Set([...route.scopes, ...mounted.scopes])],
    ...costOf(route, mounted),
    ...((route.partial || mounted.partial) && { partial: true as const }),
  };
}
