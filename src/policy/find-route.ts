import type { RouteTable } from './route-table.js';
import type { RouteMatch } from './routes.js';

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
    return found && { pattern: found.pattern, scopes: found.scopes, partial: true };
  }
  if (first === second) return first;
  // The upstream runs the overridden method's handler: log that pattern, require both routes' scopes.
  return { pattern: second.pattern, scopes: [...new Set([...first.scopes, ...second.scopes])] };
}
