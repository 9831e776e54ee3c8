// Tested in test/unit/compile-route-table.test.ts, test/unit/load-policy.test.ts ("is more specific than").
import { hasMethod, sameMethods, showRule, whereAfter, type RouteRule } from './routes.js';
import type { Shape } from './route-trie.js';

/** Kind ranks at one position: a literal beats a :param beats the end of a pattern beats a `*`. */
function rank(shape: Shape, i: number): number {
  const step = shape[i];
  if (!step) return 2;
  return step.kind === 'lit' ? 4 : step.kind === 'param' ? 3 : 1;
}

/**
 * Load-time lint of one list: `a` is listed before `b` and some path matches
 * both. Express runs the first listed, the other routers the most specific;
 * they agree only if `a` is the more specific (decided at the first position
 * where the kinds differ). Returns the problem to report, if any.
 */
export function orderProblem(a: RouteRule, sa: Shape, b: RouteRule, sb: Shape): string | undefined {
  const headVsGet =
    (hasMethod(a, 'GET') && !hasMethod(a, 'HEAD') && hasMethod(b, 'HEAD')) ||
    (hasMethod(b, 'GET') && !hasMethod(b, 'HEAD') && hasMethod(a, 'HEAD'));
  if (!sameMethods(a, b) && !headVsGet) return undefined;
  for (let i = 0; i < Math.max(sa.length, sb.length); i++) {
    const ra = rank(sa, i);
    const rb = rank(sb, i);
    if (ra > rb) return undefined;
    if (rb > ra)
      return `${b.where} (${showRule(b)}) is more specific than ${whereAfter(b, a)} (${showRule(a)}) and some paths match both: list it first, so that every router picks the same route`;
    if (ra === 1) break; // both `*`: the same from here on
  }
  // Same shape, methods overlapping only through HEAD: an explicit HEAD route listed after a GET one.
  if (hasMethod(a, 'GET') && !hasMethod(a, 'HEAD') && hasMethod(b, 'HEAD'))
    return `${b.where} (${showRule(b)}) lists HEAD for a path ${whereAfter(b, a)} (${showRule(a)}) serves with GET: list the HEAD route first`;
  return undefined;
}
