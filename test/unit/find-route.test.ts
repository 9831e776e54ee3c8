import { describe, expect, it } from 'vitest';
import { compileRouteTable } from '../../src/policy/compile-route-table.js';
import { findApiRoute } from '../../src/policy/find-route.js';
import { API_PREFIX } from '../../src/policy/policy.js';
import {
  compileRoute,
  DEFAULT_MATCHING,
  isUnderPrefix,
  type RouteMatch,
  type RouteMatching,
} from '../../src/policy/routes.js';

const STRICT: RouteMatching = { caseSensitive: true, trailingSlash: 'strict' };
const SLASH_ONLY: RouteMatching = { caseSensitive: false, trailingSlash: 'strict' };

/** What authorization reads from a match. */
const view = (m: RouteMatch | undefined) => m && { pattern: m.pattern, scopes: m.scopes };

function table(rows: Array<[string, string, string[]]>, matching: RouteMatching) {
  const problems: string[] = [];
  const rules = rows.flatMap(
    ([method, path, scopes], i) => compileRoute({ method, path, scopes }, `r[${i}]`, problems) ?? [],
  );
  const t = compileRouteTable(rules, matching, problems);
  expect(problems).toEqual([]);
  return t;
}

describe('isUnderPrefix: /api/v3 without its slash is an /api/v3/ path under every matching', () => {
  it.each([
    ['/api/v3', DEFAULT_MATCHING, true],
    ['/api/v3', STRICT, true],
    ['/api/v3', SLASH_ONLY, true],
    ['/API/V3', SLASH_ONLY, true],
    ['/API/V3', STRICT, false],
    ['/api/v3/', STRICT, true],
    ['/api/v3x', DEFAULT_MATCHING, false],
    ['/api/v', STRICT, false],
    ['/api', DEFAULT_MATCHING, false],
  ] as const)('%s under %o: %s', (path, matching, under) => {
    expect(isUnderPrefix(path, API_PREFIX, matching)).toBe(under);
  });
});

describe('findApiRoute: /api/v3 is also read as /api/v3/ (a router mounted at the prefix runs its "/" handler)', () => {
  const rows: Array<[string, string, string[]]> = [
    ['GET', '/api/v3/items/:id', ['items']],
    ['GET', '/api/v3/', ['admin']],
  ];

  it.each([STRICT, SLASH_ONLY])('trailingSlash strict (%o): /api/v3 gets the "/" route', (matching) => {
    const t = table(rows, matching);
    expect(view(findApiRoute(t, ['GET'], '/api/v3', API_PREFIX))).toEqual({ pattern: '/api/v3/', scopes: ['admin'] });
    expect(view(findApiRoute(t, ['GET'], '/api/v3/', API_PREFIX))).toEqual({ pattern: '/api/v3/', scopes: ['admin'] });
    // Other paths are untouched.
    expect(findApiRoute(t, ['GET'], '/api/v3/items/7', API_PREFIX)?.pattern).toBe('/api/v3/items/:id');
    expect(findApiRoute(t, ['POST'], '/api/v3', API_PREFIX)).toBeUndefined();
  });

  it('both /api/v3 and /api/v3/ listed, strict: the key needs the scopes of both', () => {
    const t = table([['GET', '/api/v3', ['root']], ...rows], STRICT);
    expect(view(findApiRoute(t, ['GET'], '/api/v3', API_PREFIX))).toEqual({
      pattern: '/api/v3/',
      scopes: ['root', 'admin'],
    });
    expect(view(findApiRoute(t, ['GET'], '/api/v3/', API_PREFIX))).toEqual({ pattern: '/api/v3/', scopes: ['admin'] });
  });

  it('with a method override, one route for only one of the two methods stays partial', () => {
    const t = table(rows, STRICT);
    expect(findApiRoute(t, ['POST', 'GET'], '/api/v3', API_PREFIX)).toMatchObject({
      pattern: '/api/v3/',
      partial: true,
    });
  });

  it('trailingSlash ignore: the table already reads /api/v3 as /api/v3/', () => {
    const t = table(rows, DEFAULT_MATCHING);
    expect(view(findApiRoute(t, ['GET'], '/API/V3', API_PREFIX))).toEqual({ pattern: '/api/v3/', scopes: ['admin'] });
  });
});
