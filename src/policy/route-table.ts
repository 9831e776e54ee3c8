// Tested in test/unit/compile-route-table.test.ts, test/unit/find-route.test.ts.
import type { RouteMatch, RouteMatching, RouteRule } from './routes.js';

/**
 * A policy's routes compiled once, at load (compile-route-table.ts), into a
 * deterministic automaton over path segments (compile-automaton.ts): a request
 * walks its path's segments once, with one map lookup per segment, whatever
 * the number of routes. No backtracking, no per-rule work, so the cost of a
 * hostile path does not grow with the policy.
 *
 * Loading also refuses policies whose meaning would depend on the upstream's
 * router: two routes that are the same under the chosen matching (reported with
 * both lines), and overlapping routes listed less specific first
 * (order-problem.ts), where Express (first listed wins) and Fastify, Spring,
 * Go or ASP.NET (most specific wins) would run different handlers.
 */
export interface RouteTable {
  readonly rules: readonly RouteRule[];
  readonly matching: RouteMatching;
  /** Number of compiled states (reported at load; bounded by MAX_STATES). */
  readonly states: number;
  /**
   * The first listed route for this method and path, HEAD falling back to GET.
   * With case folded or the trailing slash ignored, the path is also read
   * exactly (as a case-sensitive, strict router would); when the two readings
   * reach different routes, the answer carries both routes' scopes, so the
   * folding defaults are never weaker than an upstream that does not fold.
   */
  match(method: string, path: string): RouteMatch | undefined;
}
