import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { OutgoingHttpHeaders } from 'node:http';
import { createToken } from '../../src/client/create-token.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { HS256, claims, nowNonce, sign, token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const SECRET = 'plain-secret-0123456789abcdef';
const KEYS: KeyRecord[] = [
  makeKey({ apiKey: 'good', secret: SECRET, id: 'key-good' }),
  makeKey({ apiKey: 'noscope', secret: SECRET, scopes: ['other:read'] }),
  makeKey({ apiKey: 'faraway', secret: SECRET, allowIps: ['10.0.0.0/8', '2001:db8::/32'] }),
  makeKey({ apiKey: 'local', secret: SECRET, allowIps: ['127.0.0.1/32', '::1'] }),
  makeKey({ apiKey: 'mapped', secret: SECRET, allowIps: ['::ffff:127.0.0.0/104'] }),
  makeKey({ apiKey: 'revoked', secret: SECRET, state: 'revoked', revokedAt: '2026-01-01T00:00:00Z' }),
  makeKey({ apiKey: 'lapsed', secret: SECRET, expiresAt: '2020-01-01T00:00:00Z' }),
];

interface Case {
  name: string;
  headers: () => OutgoingHttpHeaders;
  path?: string;
  status: number;
  code?: number;
  message?: string;
}

const ok =
  (apiKey: string, extra: Record<string, unknown> = {}) =>
  () =>
    bearer(token(apiKey, SECRET, extra));

/** Every row of the seed's error table, and each rule of the core issue, over real sockets. */
const CASES: Case[] = [
  { name: 'valid token', headers: ok('good'), status: 200 },
  { name: 'valid token with recv_window "5"', headers: ok('good', { recv_window: '5' }), status: 200 },
  { name: 'client module token', headers: () => ({}), status: 200 },
  // 40004
  { name: 'no Authorization header', headers: () => ({}), status: 401, code: 40004, message: 'Unauthorized' },
  {
    name: 'empty Authorization header',
    headers: () => ({ authorization: '' }),
    status: 401,
    code: 40004,
    message: 'Unauthorized',
  },
  // 40107
  {
    name: 'lower-case bearer',
    headers: () => ({ authorization: `bearer ${token('good', SECRET)}` }),
    status: 400,
    code: 40107,
    message: 'Unexpected request header',
  },
  {
    name: 'two spaces',
    headers: () => ({ authorization: `Bearer  ${token('good', SECRET)}` }),
    status: 400,
    code: 40107,
    message: 'Unexpected request header',
  },
  {
    name: 'extra part',
    headers: () => ({ authorization: `Bearer ${token('good', SECRET)} more` }),
    status: 400,
    code: 40107,
    message: 'Unexpected request header',
  },
  {
    name: 'Basic scheme',
    headers: () => ({ authorization: 'Basic Zm9vOmJhcg==' }),
    status: 400,
    code: 40107,
    message: 'Unexpected request header',
  },
  {
    name: 'duplicate Authorization headers',
    headers: () =>
      ({
        authorization: [`Bearer ${token('good', SECRET)}`, `Bearer ${token('good', SECRET)}`],
      }) as unknown as OutgoingHttpHeaders,
    status: 400,
    code: 40107,
  },
  // 40106
  { name: 'garbage token', headers: () => bearer('not-a-jwt'), status: 401, code: 40106, message: 'Invalid Token' },
  { name: 'wrong secret', headers: () => bearer(token('good', 'another-secret-0123456789')), status: 401, code: 40106 },
  {
    name: 'secret Base64-encoded before signing',
    headers: () => bearer(token('good', Buffer.from(SECRET).toString('base64'))),
    status: 401,
    code: 40106,
  },
  {
    name: 'alg none',
    headers: () =>
      bearer(`${sign({ alg: 'none', typ: 'JWT' }, claims('good'), SECRET).split('.').slice(0, 2).join('.')}.`),
    status: 401,
    code: 40106,
  },
  {
    name: 'HS512',
    headers: () => bearer(sign({ alg: 'HS512', typ: 'JWT' }, claims('good'), SECRET, 'sha512')),
    status: 401,
    code: 40106,
  },
  { name: 'type not OpenAPIV2', headers: ok('good', { type: 'OpenAPIV1' }), status: 401, code: 40106 },
  { name: 'nonce 31 s old', headers: ok('good', { nonce: nowNonce(-31_000) }), status: 401, code: 40106 },
  // The nonce is made when the case runs: one made at import time drifts into the window on a busy machine.
  {
    name: 'nonce 31 s ahead',
    headers: () => bearer(token('good', SECRET, { nonce: nowNonce(31_000) })),
    status: 401,
    code: 40106,
  },
  {
    name: 'nonce 6 s old with recv_window "5"',
    headers: ok('good', { nonce: nowNonce(-6_000), recv_window: '5' }),
    status: 401,
    code: 40106,
  },
  { name: 'recv_window above the cap', headers: ok('good', { recv_window: '3600' }), status: 401, code: 40106 },
  {
    name: 'exp in the past',
    headers: ok('good', { exp: Math.floor(Date.now() / 1000) - 10 }),
    status: 401,
    code: 40106,
  },
  {
    name: 'nonce as number',
    headers: () => bearer(sign(HS256, { type: 'OpenAPIV2', sub: 'good', nonce: Date.now() * 1e6 }, SECRET)),
    status: 401,
    code: 40106,
  },
  // 10013
  { name: 'unknown key', headers: ok('nobody'), status: 404, code: 10013, message: 'Resource not found' },
  { name: 'revoked key', headers: ok('revoked'), status: 404, code: 10013 },
  { name: 'expired key', headers: ok('lapsed'), status: 404, code: 10013 },
  // 10403
  {
    name: 'key without the route scope',
    headers: ok('noscope'),
    status: 403,
    code: 10403,
    message: 'Permission denied',
  },
  { name: 'caller IP not on the allow-list', headers: ok('faraway'), status: 403, code: 10403 },
  { name: 'caller IP on the allow-list', headers: ok('local'), status: 200 },
  { name: 'allow-list in IPv4-mapped IPv6 form', headers: ok('mapped'), status: 200 },
  { name: 'route not in the routes file', path: '/api/v3/admin/users', headers: ok('good'), status: 403, code: 10403 },
  {
    name: 'route in another case is the listed route (caseSensitiveRoutes: false)',
    path: '/api/v3/Viewer/accounts',
    headers: ok('good'),
    status: 200,
  },
  {
    name: 'route with a trailing slash is the listed route (trailingSlash: ignore)',
    path: '/api/v3/viewer/accounts/',
    headers: ok('good'),
    status: 200,
  },
  {
    name: 'another spelling of the route still needs its scope',
    path: '/API/V3/VIEWER/ACCOUNTS/',
    headers: ok('noscope'),
    status: 403,
    code: 10403,
  },
  {
    name: 'upper-case /API/v3/, not listed: authenticated, then 10403',
    path: '/API/v3/admin/users',
    headers: ok('good'),
    status: 403,
    code: 10403,
  },
  // Keygate's own
  {
    name: 'path outside /api/v3/',
    path: '/internal/admin',
    headers: ok('good'),
    status: 404,
    code: 40400,
    message: 'Not found',
  },
  {
    name: 'upper-case /API/v3/ without a token: authenticated like /api/v3/',
    path: '/API/v3/viewer/accounts',
    headers: () => ({}),
    status: 401,
    code: 40004,
  },
  { name: 'path of 65 segments', path: `/api/v3${'/a'.repeat(63)}`, headers: ok('good'), status: 400, code: 40000 },
  {
    name: 'method-override header not allowed by the policy',
    headers: () => ({ ...ok('good')(), 'x-http-method-override': 'DELETE' }),
    status: 400,
    code: 40000,
  },
  {
    name: 'encoded dot-dot',
    path: '/api/v3/%2e%2e/admin',
    headers: ok('good'),
    status: 400,
    code: 40000,
    message: 'Bad request target',
  },
];

describe.each(['memory', 'redis'] as const)('authentication over real sockets (%s store)', (kind) => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let redis: TestRedis | undefined;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    if (kind === 'redis') {
      redis = await startRedis({ shared: true });
      await redis.flush();
    }
    gate = await startKeygate({ upstream: upstream.url, keys: KEYS, ...(redis && { redisUrl: redis.url }) });
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
    await redis?.stop();
  });
  beforeEach(() => {
    upstream.received.length = 0;
  });

  it.each(CASES)('$name → $status $code', async (c) => {
    let headers = c.headers();
    if (c.name === 'client module token') headers = bearer(await createToken({ apiKey: 'good', apiSecret: SECRET }));
    const res = await send(gate.url, c.path ?? ACCOUNTS_PATH, { headers });
    expect(res.status).toBe(c.status);
    if (c.status === 200) {
      expect(upstream.received).toHaveLength(1);
      return;
    }
    expect(res.headers['content-type']).toBe('application/json');
    const body = res.json() as { code: number; message: string };
    expect(Object.keys(body)).toEqual(['code', 'message']);
    expect(body.code).toBe(c.code);
    if (c.message) expect(body.message).toBe(c.message);
    expect(upstream.received).toHaveLength(0);
  });

  it('rejects a replayed token (sequential) with 40106', async () => {
    const t = token('good', SECRET);
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t) })).status).toBe(200);
    const again = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t) });
    expect(again.status).toBe(401);
    expect(again.json()).toEqual({ code: 40106, message: 'Invalid Token' });
    expect(upstream.received).toHaveLength(1);
  });

  it('lets exactly one of 50 concurrent copies of a token through', async () => {
    const t = token('good', SECRET);
    const replies = await Promise.all(
      Array.from({ length: 50 }, () => send(gate.url, ACCOUNTS_PATH, { headers: bearer(t) })),
    );
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 401)).toHaveLength(49);
    expect(upstream.received).toHaveLength(1);
  });

  it('accepts the same nonce under two different keys', async () => {
    const nonce = nowNonce();
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET, { nonce })) })).status).toBe(
      200,
    );
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('local', SECRET, { nonce })) })).status).toBe(
      200,
    );
  });

  it('does not burn a nonce with a forged signature', async () => {
    const nonce = nowNonce();
    expect(
      (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', 'forged-secret-0123456789', { nonce })) }))
        .status,
    ).toBe(401);
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET, { nonce })) })).status).toBe(
      200,
    );
  });

  it('counts every outcome by code and reason in the metrics', async () => {
    await send(gate.url, ACCOUNTS_PATH, { headers: bearer('x.y.z') });
    const text = await (await fetch(`${gate.adminUrl}/metrics`)).text();
    expect(text).toMatch(/keygate_requests_total\{code="ok"\} [1-9]/);
    expect(text).toMatch(/keygate_requests_total\{code="40106"\} [1-9]/);
    expect(text).toMatch(/keygate_auth_rejections_total\{code="40106",reason="malformed"\} [1-9]/);
    expect(text).toMatch(/keygate_auth_rejections_total\{code="40106",reason="replay"\} [1-9]/);
    expect(text).toMatch(/keygate_auth_rejections_total\{code="10403",reason="ip_denied"\} [1-9]/);
  });
});
