import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPolicy } from '../../src/policy/load-policy.js';
import { DEFAULT_ROUTES_FILE } from '../../src/policy/policy.js';

const file = (name: string, text: string) => {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-policy-'));
  writeFileSync(join(dir, name), text);
  return join(dir, name);
};

/** Every problem loadPolicy reports for the file (loadConfig throws them as one ConfigError). */
const problemsOf = (path: string): string[] => {
  const problems: string[] = [];
  loadPolicy(path, problems);
  return problems;
};

/** The policy of a file that loads without a problem. */
const loaded = (path: string) => {
  const problems: string[] = [];
  const policy = loadPolicy(path, problems);
  expect(problems).toEqual([]);
  return policy;
};

describe('loadPolicy', () => {
  it('route matching and method override: safe defaults, explicit settings', () => {
    const d = loaded(DEFAULT_ROUTES_FILE);
    expect(d.matching).toEqual({ caseSensitive: false, trailingSlash: 'ignore' });
    expect([...d.methodOverride]).toEqual([]);
    const policy = file(
      'p.yaml',
      'routes: []\ncaseSensitiveRoutes: true\ntrailingSlash: strict\nmethodOverride: [X-HTTP-Method-Override, _method]\n',
    );
    const c = loaded(policy);
    expect(c.matching).toEqual({ caseSensitive: true, trailingSlash: 'strict' });
    expect([...c.methodOverride]).toEqual(['x-http-method-override', '_method']);
  });

  // [policy text, problem expected]
  const refusedPolicies: Array<[string, string, string]> = [
    ['caseSensitiveRoutes not a boolean', 'caseSensitiveRoutes: "no"\n', 'caseSensitiveRoutes must be true or false'],
    ['trailingSlash unknown', 'trailingSlash: redirect\n', 'trailingSlash must be "ignore" or "strict"'],
    [
      'methodOverride unknown name',
      'methodOverride: [X-Override]\n',
      'methodOverride must be a list of names among x-http-method-override',
    ],
    ['methodOverride not a list', 'methodOverride: true\n', 'methodOverride must be a list'],
    [
      'two routes the same under the default matching, both lines named',
      'routes:\n  - { method: GET, path: /api/v3/Items/:id, scopes: [a] }\n  # a comment\n  - { method: GET, path: /api/v3/items/:key/, scopes: [b] }\n',
      'p.yaml: routes[0] (line 2) and routes[1] (line 4) are the same route under caseSensitiveRoutes: false, trailingSlash: ignore',
    ],
    [
      'catch-all before a specific route, both lines named',
      'routes:\n  - method: [GET, HEAD]\n    path: /api/v3/*\n    scopes: [read]\n  - { method: GET, path: /api/v3/admin/users, scopes: [admin] }\n',
      'p.yaml: routes[1] (line 5) (GET /api/v3/admin/users) is more specific than routes[0] (line 2) (GET,HEAD /api/v3/*)',
    ],
    // Public /api/v3/ routes: opt-in, one by one, never overlapping an authenticated route.
    [
      'public catch-all /api/v3/*',
      'public:\n  - { method: GET, path: /api/v3/* }\n',
      'p.yaml: public[0].path: public route /api/v3/* names no fixed segment after /api/v3/',
    ],
    [
      'public catch-all /api/v3/:x/*',
      'public:\n  - { method: GET, path: /api/v3/:market/* }\n',
      'public[0].path: public route /api/v3/:market/* names no fixed segment after /api/v3/',
    ],
    [
      'public /api/v3/:x',
      'public:\n  - { method: GET, path: /api/v3/:anything }\n',
      'public route /api/v3/:anything names no fixed segment',
    ],
    [
      'public catch-all spelt /API/V3/* when case is folded',
      'public:\n  - { method: GET, path: /API/V3/* }\n',
      'public route /API/V3/* names no fixed segment',
    ],
    [
      'public /api/v3 itself',
      'trailingSlash: strict\npublic:\n  - { method: GET, path: /api/v3 }\n',
      'public route /api/v3 names no fixed segment',
    ],
    [
      'public route overlapping an authenticated :param route, both rules named',
      'routes:\n  - { method: GET, path: /api/v3/asset_pairs/:name, scopes: [read] }\npublic:\n  - { method: GET, path: /api/v3/asset_pairs/tickers }\n',
      'p.yaml: public[0] (line 4) (public GET /api/v3/asset_pairs/tickers) and routes[0] (line 2) (authenticated GET /api/v3/asset_pairs/:name) could both match one request',
    ],
    [
      'public route that is an authenticated route spelt in another case',
      'routes:\n  - { method: GET, path: /api/v3/viewer/accounts, scopes: [read] }\npublic:\n  - { method: GET, path: /API/v3/Viewer/Accounts/ }\n',
      'public[0] (line 4) (public GET /API/v3/Viewer/Accounts/) and routes[0] (line 2) (authenticated GET /api/v3/viewer/accounts) could both match',
    ],
    [
      'public route under an authenticated catch-all',
      'routes:\n  - { method: "*", path: /api/v3/*, scopes: [all] }\npublic:\n  - { method: GET, path: /api/v3/ping }\n',
      '(public GET /api/v3/ping) and routes[0] (line 2) (authenticated * /api/v3/*) could both match one request',
    ],
    [
      'public GET and authenticated HEAD on one path (HEAD is served by a GET route)',
      'routes:\n  - { method: HEAD, path: /api/v3/ping, scopes: [a] }\npublic:\n  - { method: GET, path: /api/v3/ping }\n',
      '(public GET /api/v3/ping) and routes[0] (line 2) (authenticated HEAD /api/v3/ping) could both match',
    ],
    ['timeEndpoint not a boolean', 'timeEndpoint: "off"\n', 'timeEndpoint must be true or false'],
    [
      'a route for /api/v3/time while Keygate answers it',
      'routes:\n  - { method: GET, path: /api/v3/Time/, scopes: [a] }\n',
      'routes[0].path: GET /api/v3/Time/ is never reached while Keygate answers GET /api/v3/time itself; set timeEndpoint: false',
    ],
    [
      'route longer than a request may be',
      `routes:\n  - { method: GET, path: /api/v3${'/a'.repeat(63)}, scopes: [] }\n`,
      'longer than requests may be (4096 bytes, 64 segments)',
    ],
  ];
  it.each(refusedPolicies)('refuses a policy: %s', (_name, text, problem) => {
    const policy = file('p.yaml', text);
    const problems = problemsOf(policy);
    expect(problems).not.toEqual([]);
    expect(problems.join('\n')).toContain(problem);
  });

  it('names lines in a JSON policy too', () => {
    const policy = file(
      'p.json',
      '{"routes": [\n {"method": "GET", "path": "/api/v3/a", "scopes": []},\n {"method": "GET", "path": "/api/v3/A", "scopes": []}\n]}\n',
    );
    expect(problemsOf(policy).join('\n')).toMatch(
      /routes\[0\] \(line 2\) and .*routes\[1\] \(line 3\) are the same route/,
    );
  });

  it('a public route under /API/v3/ is outside /api/v3/ when routes are case-sensitive', () => {
    const policy = file('p.yaml', 'caseSensitiveRoutes: true\npublic:\n  - { method: GET, path: /API/v3/* }\n');
    const p = loaded(policy);
    expect([p.publicRoutes.rules.length, p.publicApiRoutes.rules.length]).toEqual([1, 0]);
  });

  it('public /api/v3/ routes: none by default; accepted one by one beside routes they cannot overlap', () => {
    expect(loaded(DEFAULT_ROUTES_FILE).publicApiRoutes.rules).toEqual([]);
    const policy = file(
      'p.yaml',
      [
        'routes:',
        '  - { method: GET, path: /api/v3/viewer/*, scopes: [read] }',
        '  - { method: POST, path: /api/v3/asset_pairs/:name/orders, scopes: [trade] }',
        '  - { method: POST, path: /api/v3/ping, scopes: [a] }',
        'public:',
        '  - { method: GET, path: /api/v3/ping }',
        '  - { method: GET, path: /api/v3/asset_pairs }',
        '  - { method: GET, path: /api/v3/asset_pairs/:name/depth }',
        '  - { method: GET, path: /api/contract/v2/* }',
        '  - { method: GET, path: /status }',
        'timeEndpoint: false',
        '',
      ].join('\n'),
    );
    const p = loaded(policy);
    expect(p.publicApiRoutes.rules.map((r) => r.pattern)).toEqual([
      '/api/v3/ping',
      '/api/v3/asset_pairs',
      '/api/v3/asset_pairs/:name/depth',
    ]);
    expect(p.publicRoutes.rules.map((r) => r.pattern)).toEqual(['/api/contract/v2/*', '/status']);
    expect(p.timeEndpoint).toBe(false);
    expect(loaded(DEFAULT_ROUTES_FILE).timeEndpoint).toBe(true);
  });

  it('with timeEndpoint: false a route may name /api/v3/time', () => {
    const policy = file('p.yaml', 'timeEndpoint: false\npublic:\n  - { method: GET, path: /api/v3/time }\n');
    expect(loaded(policy).publicApiRoutes.rules).toHaveLength(1);
  });

  it('a route may say upgrade: websocket, and its match carries it; nothing else is accepted there', () => {
    const policy = loaded(
      file(
        'p.yaml',
        'routes:\n  - { method: GET, path: /api/v3/stream/:c, scopes: [s], upgrade: websocket }\n  - { method: GET, path: /api/v3/plain, scopes: [s] }\n',
      ),
    );
    expect(policy.routes.match('GET', '/api/v3/stream/orders')?.upgrade).toBe('websocket');
    expect(policy.routes.match('GET', '/api/v3/plain')?.upgrade).toBeUndefined();
    expect(
      problemsOf(
        file('p.yaml', 'routes:\n  - { method: GET, path: /api/v3/stream, scopes: [s], upgrade: h2c }\n'),
      ).join(),
    ).toMatch(/upgrade/);
    expect(
      problemsOf(file('p.yaml', 'public:\n  - { method: GET, path: /stream, upgrade: websocket }\n')).join(),
    ).toMatch(/upgrade/);
  });

  it('upgrade on a public route is refused with why, once, and reported with the other problems', () => {
    const problems = problemsOf(
      file(
        'p.yaml',
        'public:\n  - { method: GET, path: /ok }\n  - { method: GET, path: /stream, upgrade: websocket }\nroutes:\n  - { method: GET, path: /api/v3/x, scopes: [s], cost: 0 }\n',
      ),
    );
    const upgrade = problems.filter((p) => p.includes('upgrade'));
    expect(upgrade).toHaveLength(1);
    expect(upgrade[0]).toMatch(
      /p\.yaml: public\[1\]\.upgrade: upgrade: websocket needs an authenticated route \(a public route never upgrades\)/,
    );
    expect(problems.join('\n')).not.toMatch(/typo/);
    expect(problems.some((p) => p.includes('routes[0].cost'))).toBe(true);
  });
});
