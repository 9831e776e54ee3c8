import { describe, expect, it } from 'vitest';
import { compileRouteTable } from '../../src/policy/compile-route-table.js';
import { findRoute } from '../../src/policy/find-route.js';
import { compileRoute, DEFAULT_MATCHING } from '../../src/policy/routes.js';
import { authorize } from '../../src/pipeline/authorize.js';
import { prepareKey } from '../../src/keys/prepared-key.js';
import { makeKey } from '../helpers/make-key.js';

const errors: string[] = [];
const routes = compileRouteTable(
  [
    compileRoute({ method: 'GET', path: '/api/v3/viewer/accounts', scopes: ['accounts:read'] }, 'r0', errors)!,
    compileRoute(
      { method: ['POST', 'PUT'], path: '/api/v3/items/:id', scopes: ['items:write', 'items:read'] },
      'r1',
      errors,
    )!,
    compileRoute({ method: 'DELETE', path: '/api/v3/items/:id', scopes: ['items:delete'] }, 'r2', errors)!,
    compileRoute({ method: '*', path: '/api/v3/open/*', scopes: [] }, 'r3', errors)!,
  ],
  DEFAULT_MATCHING,
  errors,
);

describe('authorize: allow-list, listed route, scopes (all 403 10403)', () => {
  // method is "POST>DELETE" for a POST whose allowed override asks for DELETE.
  const cases: Array<
    [string, { scopes?: string[]; allowIps?: string[] }, string | undefined, string, string, 'deny' | 'allow', string]
  > = [
    ['scope held', {}, '127.0.0.1', 'GET', '/api/v3/viewer/accounts', 'deny', 'ok:/api/v3/viewer/accounts'],
    ['scope missing', { scopes: ['other'] }, '127.0.0.1', 'GET', '/api/v3/viewer/accounts', 'deny', 'scope_denied'],
    ['one of two scopes', { scopes: ['items:write'] }, '1.1.1.1', 'PUT', '/api/v3/items/7', 'deny', 'scope_denied'],
    [
      'both scopes',
      { scopes: ['items:write', 'items:read'] },
      '1.1.1.1',
      'PUT',
      '/api/v3/items/7',
      'deny',
      'ok:/api/v3/items/:id',
    ],
    ['method not listed', {}, '1.1.1.1', 'DELETE', '/api/v3/viewer/accounts', 'deny', 'route_not_listed'],
    ['unlisted route, deny', {}, '1.1.1.1', 'GET', '/api/v3/admin', 'deny', 'route_not_listed'],
    ['unlisted route, allow', {}, '1.1.1.1', 'GET', '/api/v3/admin', 'allow', 'ok:unlisted'],
    ['route with no scopes', { scopes: [] }, '1.1.1.1', 'PATCH', '/api/v3/open/a/b', 'deny', 'ok:/api/v3/open/*'],
    [
      'IP on the allow-list',
      { allowIps: ['10.0.0.0/8'] },
      '10.2.3.4',
      'GET',
      '/api/v3/viewer/accounts',
      'deny',
      'ok:/api/v3/viewer/accounts',
    ],
    [
      'IP-mapped IPv6 on the allow-list',
      { allowIps: ['10.0.0.0/8'] },
      '::ffff:10.2.3.4',
      'GET',
      '/api/v3/viewer/accounts',
      'deny',
      'ok:/api/v3/viewer/accounts',
    ],
    [
      'IP off the allow-list',
      { allowIps: ['10.0.0.0/8'] },
      '11.0.0.1',
      'GET',
      '/api/v3/viewer/accounts',
      'deny',
      'ip_denied',
    ],
    [
      'unknown caller IP with an allow-list',
      { allowIps: ['10.0.0.0/8'] },
      undefined,
      'GET',
      '/api/v3/viewer/accounts',
      'deny',
      'ip_denied',
    ],
    [
      'IP checked before the route',
      { allowIps: ['10.0.0.0/8'] },
      '11.0.0.1',
      'GET',
      '/api/v3/admin',
      'deny',
      'ip_denied',
    ],
    [
      'override: scopes of both routes, the overridden one logged',
      { scopes: ['items:write', 'items:read', 'items:delete'] },
      '1.1.1.1',
      'POST>DELETE',
      '/api/v3/items/7',
      'deny',
      'ok:/api/v3/items/:id',
    ],
    [
      "override: the overridden route's scope missing",
      { scopes: ['items:write', 'items:read'] },
      '1.1.1.1',
      'POST>DELETE',
      '/api/v3/items/7',
      'deny',
      'scope_denied',
    ],
    [
      "override: the request method's scope missing",
      { scopes: ['items:delete'] },
      '1.1.1.1',
      'POST>DELETE',
      '/api/v3/items/7',
      'deny',
      'scope_denied',
    ],
    [
      'override to an unlisted method, deny',
      {},
      '1.1.1.1',
      'GET>PATCH',
      '/api/v3/viewer/accounts',
      'deny',
      'route_not_listed',
    ],
    [
      "override to an unlisted method, allow: the listed one's scopes still apply",
      { scopes: [] },
      '1.1.1.1',
      'GET>PATCH',
      '/api/v3/viewer/accounts',
      'allow',
      'scope_denied',
    ],
    [
      'override to an unlisted method, allow, scope held',
      {},
      '1.1.1.1',
      'GET>PATCH',
      '/api/v3/viewer/accounts',
      'allow',
      'ok:/api/v3/viewer/accounts',
    ],
  ];
  it.each(cases)('%s', async (_name, key, ip, method, path, unlisted, expected) => {
    const prepared = prepareKey(makeKey({ apiKey: 'k', ...key }));
    const r = authorize(prepared, ip, findRoute(routes, method.split('>'), path), unlisted);
    if (expected.startsWith('ok:')) expect(r).toEqual({ ok: true, route: expected.slice(3) });
    else expect(r).toEqual({ ok: false, code: 10403, reason: expected });
  });
  it('compiled the routes without errors', () => expect(errors).toEqual([]));
});
