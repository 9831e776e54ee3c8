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

const STRICT: RouteMatching = { caseSensitive: true, trailingSlash: 'strict' };
const CASE_ONLY: RouteMatching = { caseSensitive: true, trailingSlash: 'ignore' };
const SLASH_ONLY: RouteMatching = { caseSensitive: false, trailingSlash: 'strict' };

// The policy, plus the shapes each rule below needs.
const POLICY: Row[] = [
  ['GET', '/api/v3/admin/users', ['admin']],
  ['POST', '/api/v3/items/new', ['items:create']],
  [['POST', 'DELETE'], '/api/v3/items/:id', ['items:write']],
  ['GET', '/api/v3/items/:id/parts/:part', ['items:read']],
  ['HEAD', '/api/v3/files/meta', ['files:meta']],
  ['GET', '/api/v3/files/meta', ['files:read']],
  ['GET', '/api/v3/files/*', ['files:read']],
  ['GET', '/api/v3/a%2Ab', ['odd']],
  ['*', '/api/v3/open/*', []],
  [['GET', 'HEAD'], '/api/v3/*', ['read']],
];

describe('route table: matching rules', () => {
  // [matching, method, path, expected pattern or undefined]
  const cases: Array<[string, RouteMatching, string, string, string | undefined]> = [
    // Plain matching, first match wins.
    ['exact', DEFAULT_MATCHING, 'GET', '/api/v3/admin/users', '/api/v3/admin/users'],
    ['literal before :param', DEFAULT_MATCHING, 'POST', '/api/v3/items/new', '/api/v3/items/new'],
    [':param', DEFAULT_MATCHING, 'DELETE', '/api/v3/items/7', '/api/v3/items/:id'],
    [
      'method not listed on the literal falls through to :param',
      DEFAULT_MATCHING,
      'DELETE',
      '/api/v3/items/new',
      '/api/v3/items/:id',
    ],
    ['two :params', DEFAULT_MATCHING, 'GET', '/api/v3/items/7/parts/x', '/api/v3/items/:id/parts/:part'],
    [':param never matches an empty segment', DEFAULT_MATCHING, 'DELETE', '/api/v3/items/', undefined],
    ['* takes several segments', DEFAULT_MATCHING, 'GET', '/api/v3/files/a/b/c', '/api/v3/files/*'],
    ['* takes an empty last segment', DEFAULT_MATCHING, 'GET', '/api/v3/files/', '/api/v3/files/*'],
    ['* needs a segment', DEFAULT_MATCHING, 'PUT', '/api/v3/open', undefined],
    ['method "*"', DEFAULT_MATCHING, 'PATCH', '/api/v3/open/x', '/api/v3/open/*'],
    ['catch-all last', DEFAULT_MATCHING, 'GET', '/api/v3/anything/else', '/api/v3/*'],
    ['unlisted method', DEFAULT_MATCHING, 'PUT', '/api/v3/admin/users', undefined],
    ['not under any route', DEFAULT_MATCHING, 'GET', '/other', undefined],
    [
      'extra segment after a literal route goes to the catch-all',
      DEFAULT_MATCHING,
      'GET',
      '/api/v3/admin/users/x',
      '/api/v3/*',
    ],
    ['extra segment, no catch-all for POST', DEFAULT_MATCHING, 'POST', '/api/v3/items/new/x', undefined],
    // Case.
    ['case folded by default', DEFAULT_MATCHING, 'GET', '/api/v3/ADMIN/users', '/api/v3/admin/users'],
    ['mixed case folded by default', DEFAULT_MATCHING, 'GET', '/Api/V3/Admin/Users', '/api/v3/admin/users'],
    ['case-sensitive: another route', CASE_ONLY, 'GET', '/api/v3/ADMIN/users', '/api/v3/*'],
    ['case-sensitive: no route', CASE_ONLY, 'POST', '/api/v3/Items/new', undefined],
    ['escape hex case never matters', STRICT, 'GET', '/api/v3/a%2ab', '/api/v3/a%2Ab'],
    ['escape hex case, folded', DEFAULT_MATCHING, 'GET', '/api/v3/A%2aB', '/api/v3/a%2Ab'],
    // Trailing slash.
    ['trailing slash ignored by default', DEFAULT_MATCHING, 'GET', '/api/v3/admin/users/', '/api/v3/admin/users'],
    ['trailing slash after :param', DEFAULT_MATCHING, 'DELETE', '/api/v3/items/7/', '/api/v3/items/:id'],
    ['trailing slash and case', DEFAULT_MATCHING, 'GET', '/API/V3/ADMIN/USERS/', '/api/v3/admin/users'],
    ['strict: the trailing slash variant is another path', SLASH_ONLY, 'GET', '/api/v3/admin/users/', '/api/v3/*'],
    ['strict: no route for it', SLASH_ONLY, 'POST', '/api/v3/items/new/', undefined],
    ['only one trailing slash is ignored', DEFAULT_MATCHING, 'POST', '/api/v3/items/7/x/', undefined],
    // HEAD.
    [
      'HEAD as GET where no HEAD route is listed',
      DEFAULT_MATCHING,
      'HEAD',
      '/api/v3/admin/users',
      '/api/v3/admin/users',
    ],
    ['HEAD as GET, :param route', DEFAULT_MATCHING, 'HEAD', '/api/v3/items/7/parts/x', '/api/v3/items/:id/parts/:part'],
    ['HEAD route listed: used', DEFAULT_MATCHING, 'HEAD', '/api/v3/files/meta', '/api/v3/files/meta'],
    ['GET beside a HEAD route', DEFAULT_MATCHING, 'GET', '/api/v3/files/meta', '/api/v3/files/meta'],
    [
      'HEAD where only POST is listed: the next route listing GET or HEAD',
      DEFAULT_MATCHING,
      'HEAD',
      '/api/v3/items/new',
      '/api/v3/*',
    ],
    ['HEAD with no GET or HEAD route at all', DEFAULT_MATCHING, 'HEAD', '/api/v3/open/x', '/api/v3/open/*'],
    ['HEAD as GET, strict matching too', STRICT, 'HEAD', '/api/v3/admin/users', '/api/v3/admin/users'],
  ];
  const tables = new Map<RouteMatching, RouteTable>();
  it.each(cases)('%s', (_name, matching, method, path, expected) => {
    if (!tables.has(matching)) {
      const { t, problems } = table(POLICY, matching);
      expect(problems).toEqual([]);
      tables.set(matching, t);
    }
    expect(tables.get(matching)?.match(method, path)?.pattern).toBe(expected);
  });

  // Folding never weakens: a spelling an exact (case-sensitive, strict) router would route elsewhere needs both routes' scopes.
  const scopes: Array<[string, RouteMatching, string, string, string[] | undefined]> = [
    ['canonical spelling: its own scopes', DEFAULT_MATCHING, 'GET', '/api/v3/admin/users', ['admin']],
    [
      'other case: also the catch-all an exact router runs',
      DEFAULT_MATCHING,
      'GET',
      '/api/v3/ADMIN/Users',
      ['admin', 'read'],
    ],
    ['trailing slash: also the catch-all', DEFAULT_MATCHING, 'GET', '/api/v3/admin/users/', ['admin', 'read']],
    ['no exact route at all: the folded one', DEFAULT_MATCHING, 'POST', '/api/v3/Items/new/', ['items:create']],
    ['exact matching: one reading', STRICT, 'GET', '/api/v3/admin/users', ['admin']],
    ['exact matching, other case: the catch-all only', STRICT, 'GET', '/api/v3/ADMIN/Users', ['read']],
    ['no route', DEFAULT_MATCHING, 'PUT', '/api/v3/Admin/users/', undefined],
  ];
  it.each(scopes)('scopes: %s', (_name, matching, method, path, expected) => {
    expect(table(POLICY, matching).t.match(method, path)?.scopes).toEqual(expected);
  });

  it('root and public-style routes', () => {
    const { t, problems } = table([
      ['GET', '/'],
      ['GET', '/status'],
      ['GET', '/docs/*'],
    ]);
    expect(problems).toEqual([]);
    expect(
      ['/', '/status', '/STATUS/', '/docs/', '/docs/a', '/doc', 'status', ''].map((p) => t.match('GET', p)?.pattern),
    ).toEqual(['/', '/status', '/status', '/docs/*', '/docs/*', undefined, undefined, undefined]);
  });

  it('a pattern with a trailing slash: strict keeps it apart, ignore folds it', () => {
    expect(table([['GET', '/a/']], STRICT).t.match('GET', '/a')).toBeUndefined();
    expect(table([['GET', '/a/']], STRICT).t.match('GET', '/a/')?.pattern).toBe('/a/');
    expect(table([['GET', '/a/']]).t.match('GET', '/a')?.pattern).toBe('/a/');
  });
});

describe('route table: refused at load', () => {
  const refused: Array<[string, RouteMatching, Row[], string]> = [
    [
      'same route in another case',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/Items'],
        ['GET', '/api/v3/items'],
      ],
      'routes[0] and routes[1] are the same route under caseSensitiveRoutes: false',
    ],
    [
      'same route with a trailing slash',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/items'],
        ['GET', '/api/v3/items/'],
      ],
      'routes[0] and routes[1] are the same route under caseSensitiveRoutes: false, trailingSlash: ignore',
    ],
    [
      'same route, other param name',
      STRICT,
      [
        ['PUT', '/api/v3/items/:id'],
        [['POST', 'PUT'], '/api/v3/items/:key'],
      ],
      'routes[0] and routes[1] are the same route',
    ],
    [
      'same wildcard route, method "*"',
      STRICT,
      [
        ['GET', '/api/v3/f/*'],
        ['*', '/api/v3/f/*'],
      ],
      'routes[0] and routes[1] are the same route',
    ],
    [
      'catch-all listed first',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/*', ['read']],
        ['GET', '/api/v3/admin/users', ['admin']],
      ],
      'routes[1] (GET /api/v3/admin/users) is more specific than routes[0] (GET /api/v3/*)',
    ],
    [
      ':param before a literal',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/items/:id'],
        ['GET', '/api/v3/items/new'],
      ],
      'routes[1] (GET /api/v3/items/new) is more specific',
    ],
    [
      '* before :param',
      DEFAULT_MATCHING,
      [
        ['*', '/api/v3/f/*'],
        ['DELETE', '/api/v3/f/:id'],
      ],
      'routes[1] (DELETE /api/v3/f/:id) is more specific',
    ],
    [
      'partial overlap, less specific first',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/:a/x'],
        ['GET', '/api/v3/b/:c'],
      ],
      'routes[1] (GET /api/v3/b/:c) is more specific',
    ],
    [
      '/a/* before /a, trailing slash ignored',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/a/*'],
        ['GET', '/api/v3/a'],
      ],
      'routes[1] (GET /api/v3/a) is more specific',
    ],
    [
      'GET route listed before a HEAD route',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/a'],
        ['HEAD', '/api/v3/a'],
      ],
      'list the HEAD route first',
    ],
    [
      'HEAD-as-GET overlap, less specific first',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/:x'],
        ['HEAD', '/api/v3/a'],
      ],
      'routes[1] (HEAD /api/v3/a) is more specific',
    ],
  ];
  it.each(refused)('%s', (_name, matching, rows, message) => {
    const { problems } = table(rows, matching);
    expect(problems.join('\n')).toContain(message);
  });

  const accepted: Array<[string, RouteMatching, Row[]]> = [
    [
      'same path, other methods',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/items/:id'],
        ['DELETE', '/api/v3/items/:key'],
      ],
    ],
    [
      'case differs, case-sensitive',
      STRICT,
      [
        ['GET', '/api/v3/Items'],
        ['GET', '/api/v3/items'],
      ],
    ],
    [
      'trailing slash differs, strict',
      STRICT,
      [
        ['GET', '/api/v3/items'],
        ['GET', '/api/v3/items/'],
      ],
    ],
    [
      '/a/* after /a, strict (no overlap)',
      STRICT,
      [
        ['GET', '/api/v3/a/*'],
        ['GET', '/api/v3/a'],
      ],
    ],
    [
      'more specific first',
      DEFAULT_MATCHING,
      [
        ['GET', '/api/v3/items/new'],
        ['GET', '/api/v3/items/:id'],
        ['GET', '/api/v3/*'],
      ],
    ],
    [
      'no overlap in methods',
      DEFAULT_MATCHING,
      [
        ['POST', '/api/v3/*'],
        ['GET', '/api/v3/a'],
      ],
    ],
    [
      'HEAD route before the GET one',
      DEFAULT_MATCHING,
      [
        ['HEAD', '/api/v3/a'],
        ['GET', '/api/v3/a'],
      ],
    ],
  ];
  it.each(accepted)('accepted: %s', (_name, matching, rows) => {
    expect(table(rows, matching).problems).toEqual([]);
  });
});
