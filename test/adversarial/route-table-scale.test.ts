import { describe, expect, it } from 'vitest';
import { compileRouteTable } from '../../src/policy/compile-route-table.js';
import type { RouteTable } from '../../src/policy/route-table.js';
import { compileRoute, DEFAULT_MATCHING, type RouteMatching } from '../../src/policy/routes.js';

type Row = [method: string | string[], path: string, scopes?: string[]];

function table(rows: Row[], matching: RouteMatching = DEFAULT_MATCHING): { t: RouteTable; problems: string[] } {
  const problems: string[] = [];
  const rules = rows.flatMap(
    ([method, path, scopes], i) => compileRoute({ method, path, scopes: scopes ?? [] }, `routes[${i}]`, problems) ?? [],
  );
  return { t: compileRouteTable(rules, matching, problems), problems };
}

// Moved out of the unit tier (test/unit/compile-route-table.test.ts keeps the matching rules), which must stay quick
// (issue 40): this compiles 2,000-route tables and times 160,000 matches (interleaved, best of batches).
describe('route table: matching cost does not grow with the number of routes', () => {
  /** A policy of n routes shaped like real APIs: resources, :id, sub-resources, a catch-all last. */
  function policy(n: number): Row[] {
    const rows: Row[] = [];
    for (let i = 0; rows.length < n - 1; i++) {
      rows.push(['GET', `/api/v3/res${i}/:id/sub${i % 7}/:sub`, [`r${i}`]]);
      rows.push([['POST', 'PUT'], `/api/v3/res${i}/:id`, [`w${i}`]]);
      rows.push(['GET', `/api/v3/res${i}/list`, [`r${i}`]]);
    }
    rows.length = n - 1;
    rows.push([['GET', 'HEAD'], '/api/v3/*', ['read']]);
    return rows;
  }
  const normal = '/api/v3/res1/42/sub1/9';
  // The hostile target: as many short segments as step 1 lets through, no route matching.
  const worst = `/api/v3/${'x/'.repeat(61)}x`;

  it('small and large policies compile without problems and agree', () => {
    for (const n of [10, 2000]) {
      const { t, problems } = table(policy(n));
      expect(problems).toEqual([]);
      expect(t.match('GET', normal)?.pattern).toBe('/api/v3/res1/:id/sub1/:sub');
      expect(t.match('GET', worst)?.pattern).toBe('/api/v3/*');
      expect(t.match('DELETE', worst)).toBeUndefined();
    }
  });

  it('best-of-batches time at 2,000 routes is within 3x of 10 routes (a per-rule scan is ~200x)', () => {
    const small = table(policy(10)).t;
    const large = table(policy(2000)).t;
    // Interleaved batches, best of each: a loaded machine slows every batch, not one side.
    const best = { small: Infinity, large: Infinity };
    let sink = 0;
    for (let round = 0; round < 40; round++) {
      for (const [name, t] of [
        ['small', small],
        ['large', large],
      ] as const) {
        const t0 = performance.now();
        for (let i = 0; i < 2000; i++) {
          sink += t.match('GET', normal) ? 1 : 0;
          sink += t.match('DELETE', worst) ? 1 : 0;
        }
        best[name] = Math.min(best[name], performance.now() - t0);
      }
    }
    expect(sink).toBe(40 * 2 * 2000);
    expect(best.large / best.small).toBeLessThan(3);
  });
});
