import { compileAutomaton } from './compile-automaton.js';
import type { RouteTable } from './route-table.js';
import { costOf, type RouteMatch, type RouteMatching, type RouteRule } from './routes.js';

const EXACT: RouteMatching = Object.freeze({ caseSensitive: true, trailingSlash: 'strict' });

/**
 * Compiles a list of rules into the table requests are matched against
 * (see route-table.ts). With folding on, a second, exact automaton reads the
 * path as a strict router would; its load-time findings are the folded
 * table's, so only the folded one reports them into `problems`.
 */
export function compileRouteTable(
  rules: readonly RouteRule[],
  matching: RouteMatching,
  problems: string[],
): RouteTable {
  const found = new Set<string>();
  const folded = compileAutomaton(rules, matching, found);
  const exact =
    matching.caseSensitive && matching.trailingSlash === 'strict' ? folded : compileAutomaton(rules, EXACT, new Set());
  problems.push(...found);
  return {
    rules,
    matching,
    states: folded.states + (exact === folded ? 0 : exact.states),
    match(method: string, path: string): RouteMatch | undefined {
      const a = folded.match(method, path);
      if (exact === folded) return a;
      const b = exact.match(method, path);
      // b without a cannot happen (folding only merges paths); a without b: a spelling of a listed route.
      if (!b || a === b || !a) return a ?? b;
      return {
        pattern: a.pattern,
        scopes: a.scopes.concat(b.scopes.filter((x) => !a.scopes.includes(x))),
        ...costOf(a, b),
      };
    },
  };
}
