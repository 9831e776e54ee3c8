import { compileAutomaton } from './compile-automaton.js';
import { hasMethod, sameMethods, type RouteRule, type RouteMatching } from './routes.js';

/**
 * Load-time lint across two lists (public /api/v3/ routes against routes):
 * pairs of rules, one from each list, that some request could match both: a
 * path both patterns accept under `matching` (the folded reading, which accepts
 * every path the exact one does), with a method both take (HEAD taking a GET
 * route, as the table does). Built by the same construction as the table, on
 * the two lists together, so "could match" means exactly what matching does.
 */
export function overlappingRules(
  a: readonly RouteRule[],
  b: readonly RouteRule[],
  matching: RouteMatching,
): { pairs: Array<[RouteRule, RouteRule]>; complete: boolean } {
  const all = [...a, ...b];
  // Same-route and listing-order findings are about one list; each list's own table reports them.
  const automaton = compileAutomaton(all, matching, new Set());
  const pairs: Array<[RouteRule, RouteRule]> = [];
  for (const key of automaton.overlaps) {
    const [i, j] = key.split(',').map(Number) as [number, number];
    if (i >= a.length || j < a.length) continue;
    const x = all[i] as RouteRule;
    const y = all[j] as RouteRule;
    if (
      sameMethods(x, y) ||
      (hasMethod(x, 'GET') && hasMethod(y, 'HEAD')) ||
      (hasMethod(y, 'GET') && hasMethod(x, 'HEAD'))
    )
      pairs.push([x, y]);
  }
  return { pairs, complete: automaton.complete };
}
