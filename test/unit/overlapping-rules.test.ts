import { describe, expect, it } from 'vitest';
import { overlappingRules } from '../../src/policy/overlapping-rules.js';
import { compileRoute, DEFAULT_MATCHING, type RouteMatching } from '../../src/policy/routes.js';

type Row = [method: string | string[], path: string, scopes?: string[]];

const STRICT: RouteMatching = { caseSensitive: true, trailingSlash: 'strict' };

describe('overlappingRules: could one request match a rule of each list?', () => {
  const rules = (rows: Row[], name: string) =>
    rows.map(([method, path], i) => compileRoute({ method, path }, `${name}[${i}]`, [])!);
  // [name, matching, public rule, authenticated rule, overlap expected]
  const cases: Array<[string, RouteMatching, Row, Row, boolean]> = [
    ['same literal path and method', DEFAULT_MATCHING, ['GET', '/api/v3/ping'], ['GET', '/api/v3/ping'], true],
    ['same path, other method', DEFAULT_MATCHING, ['GET', '/api/v3/ping'], ['POST', '/api/v3/ping'], false],
    ['HEAD is served by a GET route', DEFAULT_MATCHING, ['GET', '/api/v3/ping'], ['HEAD', '/api/v3/ping'], true],
    ['any method', DEFAULT_MATCHING, ['GET', '/api/v3/ping'], ['*', '/api/v3/ping'], true],
    ['literal under :param', DEFAULT_MATCHING, ['GET', '/api/v3/pairs/tickers'], ['GET', '/api/v3/pairs/:name'], true],
    ['literal under a catch-all', DEFAULT_MATCHING, ['GET', '/api/v3/pairs/x/depth'], ['GET', '/api/v3/*'], true],
    ['different depths', DEFAULT_MATCHING, ['GET', '/api/v3/pairs/:name/depth'], ['GET', '/api/v3/pairs/:name'], false],
    ['other literal', DEFAULT_MATCHING, ['GET', '/api/v3/pairs'], ['GET', '/api/v3/viewer/pairs'], false],
    ['case folded', DEFAULT_MATCHING, ['GET', '/api/v3/Pairs'], ['GET', '/api/v3/pairs'], true],
    ['case kept', STRICT, ['GET', '/api/v3/Pairs'], ['GET', '/api/v3/pairs'], false],
    ['trailing slash ignored', DEFAULT_MATCHING, ['GET', '/api/v3/pairs/'], ['GET', '/api/v3/pairs'], true],
    ['trailing slash strict', STRICT, ['GET', '/api/v3/pairs/'], ['GET', '/api/v3/pairs'], false],
    [
      '/x/ is taken by /x/* (the last segment may be empty)',
      STRICT,
      ['GET', '/api/v3/pairs/'],
      ['GET', '/api/v3/pairs/*'],
      true,
    ],
  ];
  it.each(cases)('%s', (_name, matching, open, closed, expected) => {
    const found = overlappingRules(rules([open], 'public'), rules([closed], 'routes'), matching);
    expect(found.complete).toBe(true);
    expect(found.pairs.map(([a, b]) => [a.where, b.where])).toEqual(expected ? [['public[0]', 'routes[0]']] : []);
  });

  it('pairs only across the lists, never within one', () => {
    const found = overlappingRules(
      rules(
        [
          ['GET', '/api/v3/a/:x'],
          ['GET', '/api/v3/a/b'],
        ],
        'public',
      ),
      rules(
        [
          ['GET', '/api/v3/b/:y'],
          ['GET', '/api/v3/b/c'],
        ],
        'routes',
      ),
      DEFAULT_MATCHING,
    );
    expect(found.pairs).toEqual([]);
  });
});
