import { describe, expect, it } from 'vitest';
import { startKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { parseExposition, valueOf } from '../helpers/exposition.js';
import { exchange, statusOf } from '../helpers/raw-socket.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { useGate } from '../helpers/gate.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const SECRET = 'plain-secret-0123456789abcdef';

describe('forwarding: what the upstream receives', () => {
  const kg = useGate({
    keys: [makeKey({ apiKey: 'good', secret: SECRET, id: 'key-good', scopes: ['accounts:read', 'items:write'] })],
    policy: `
routes:
  - { method: GET, path: /api/v3/viewer/accounts, scopes: [accounts:read] }
  - { method: [POST, PUT], path: /api/v3/items/:id, scopes: [items:write] }
  - { method: GET, path: /api/v3/files/*, scopes: [accounts:read] }
public:
  - { method: GET, path: /status }
`,
    resetUpstream: true,
  });

  it('injects X-Api-Key-Id and strips the token and every spoofed identity header', async () => {
    const res = await send(kg.gate.url, `${ACCOUNTS_PATH}?limit=5`, {
      headers: {
        ...bearer(token('good', SECRET)),
        'X-Api-Key-Id': 'admin',
        'x-api-key-id': 'admin2',
        'X-API-KEY-ID': 'admin3',
        x_api_key_id: 'admin4',
        'X-Api-Key-Scopes': 'everything',
        'x-forwarded-for': '1.2.3.4',
        forwarded: 'for=1.2.3.4',
        'x-real-ip': '1.2.3.4',
        x_forwarded_for: '1.2.3.4',
        connection: 'keep-alive, X-Api-Key-Id',
        'x-request-id': 'client-req-1',
      },
    });
    expect(res.status).toBe(200);
    expect(kg.upstream.received).toHaveLength(1);
    const got = kg.upstream.received[0]!;
    expect(got.url).toBe(`${ACCOUNTS_PATH}?limit=5`);
    expect(got.headers.authorization).toBeUndefined();
    const identity = got.rawHeaders
      .filter((_, i) => i % 2 === 0)
      .filter((n) => n.toLowerCase().replaceAll('_', '-').startsWith('x-api-key'));
    expect(identity).toEqual(['x-api-key-id']);
    expect(got.headers['x-api-key-id']).toBe('key-good');
    expect(got.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(got.headers['x-forwarded-proto']).toBe('http');
    expect(got.headers['x-forwarded-host']).toBe(new URL(kg.gate.url).host);
    expect(got.headers.forwarded).toBeUndefined();
    expect(got.headers['x-real-ip']).toBeUndefined();
    expect(got.headers.x_forwarded_for).toBeUndefined();
    expect(got.headers.connection).not.toMatch(/x-api-key-id/i);
    expect(got.headers['x-request-id']).toBe('client-req-1');
    expect(res.headers['x-request-id']).toBe('client-req-1');
  });

  it('keeps a sane client X-Request-Id and replaces an unsafe one', async () => {
    await send(kg.gate.url, ACCOUNTS_PATH, {
      headers: { ...bearer(token('good', SECRET)), 'x-request-id': 'abc-123' },
    });
    await send(kg.gate.url, ACCOUNTS_PATH, {
      headers: { ...bearer(token('good', SECRET)), 'x-request-id': 'bad id with spaces' },
    });
    expect(kg.upstream.received[0]!.headers['x-request-id']).toBe('abc-123');
    expect(kg.upstream.received[1]!.headers['x-request-id']).not.toBe('bad id with spaces');
  });

  it('forwards the body and method of a scoped POST, matching :param routes', async () => {
    const res = await send(kg.gate.url, '/api/v3/items/42', {
      method: 'POST',
      headers: { ...bearer(token('good', SECRET)), 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    expect(res.status).toBe(200);
    expect(kg.upstream.received[0]).toMatchObject({ method: 'POST', url: '/api/v3/items/42', body: '{"a":1}' });
    const wrongMethod = await send(kg.gate.url, '/api/v3/items/42', {
      method: 'DELETE',
      headers: bearer(token('good', SECRET)),
    });
    expect(wrongMethod.status).toBe(403);
  });

  it('matches a final * route', async () => {
    expect(
      (await send(kg.gate.url, '/api/v3/files/a/b/c.txt', { headers: bearer(token('good', SECRET)) })).status,
    ).toBe(200);
  });

  it('forwards listed public paths without authentication and without identity', async () => {
    const res = await send(kg.gate.url, '/status', {
      headers: { 'x-api-key-id': 'spoof', authorization: 'Bearer whatever' },
    });
    expect(res.status).toBe(200);
    expect(kg.upstream.received[0]!.headers['x-api-key-id']).toBeUndefined();
    expect(kg.upstream.received[0]!.headers.authorization).toBeUndefined();
    expect((await send(kg.gate.url, '/status2')).status).toBe(404);
    expect((await send(kg.gate.url, '/status', { method: 'POST' })).status).toBe(404);
  });

  it('passes the upstream status and body through', async () => {
    kg.upstream.handler = (_req, res) => {
      res.statusCode = 418;
      res.setHeader('x-upstream', 'yes');
      res.end('teapot');
    };
    const res = await send(kg.gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)) });
    expect(res.status).toBe(418);
    expect(res.body).toBe('teapot');
    expect(res.headers['x-upstream']).toBe('yes');
  });

  it('refuses odd request targets sent raw, never forwarding them', async () => {
    const t = token('good', SECRET);
    for (const target of [
      '/api/v3/viewer/../viewer/accounts',
      '//api/v3/viewer/accounts',
      '/api/v3/viewer%2Faccounts',
      'http://127.0.0.1/api/v3/viewer/accounts',
      '*',
    ]) {
      const reply = (
        await exchange(kg.gate.port, `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t}\r\n\r\n`)
      ).text;
      expect(statusOf(reply), target).toBe(400);
    }
    expect(kg.upstream.received).toHaveLength(0);
  });
});

describe('forwarding: public /api/v3/ routes (opt-in)', () => {
  const kg = useGate({
    keys: [makeKey({ apiKey: 'good', secret: SECRET, id: 'key-good', scopes: ['accounts:read'] })],
    policy: `
routes:
  - { method: GET, path: /api/v3/viewer/accounts, scopes: [accounts:read] }
public:
  - { method: GET, path: /api/v3/asset_pairs }
  - { method: GET, path: /api/v3/asset_pairs/:name/depth }
  - { method: GET, path: /api/v3/time }
timeEndpoint: false
methodOverride: [X-HTTP-Method-Override]
`,
    resetUpstream: true,
  });
  const requestsCounted = async (code: string) =>
    valueOf(parseExposition((await send(kg.gate.adminUrl, '/metrics')).body), 'keygate_requests_total', { code }) ?? 0;

  it('logs the public /api/v3/ routes at warn on start', () => {
    const warned = kg.gate.logs
      .map((l) => JSON.parse(l) as { level: number; publicApiRoutes?: string[] })
      .filter((l) => l.publicApiRoutes);
    expect(warned).toHaveLength(1);
    expect(warned[0]!.level).toBe(40);
    expect(warned[0]!.publicApiRoutes).toEqual([
      'GET /api/v3/asset_pairs',
      'GET /api/v3/asset_pairs/:name/depth',
      'GET /api/v3/time',
    ]);
  });

  it('forwards a listed route without verifying anything and without any identity, counted as public', async () => {
    const before = await requestsCounted('public');
    const t = token('good', SECRET);
    const spoofed = {
      authorization: `Bearer ${t}`,
      'X-Api-Key-Id': 'key-admin',
      x_api_key_id: 'key-admin',
      'X-Api-Key-Scopes': 'all',
      'x-forwarded-for': '1.2.3.4',
    };
    const cases: Array<[string, Record<string, string>]> = [
      ['/api/v3/asset_pairs', {}],
      ['/api/v3/asset_pairs?page=2', spoofed],
      ['/api/v3/asset_pairs/BTC-USDT/depth', spoofed],
      // The upstream's router reads these as the listed routes (case folded, trailing slash ignored): so does Keygate.
      ['/API/V3/Asset_Pairs/', spoofed],
      ['/api/v3/time', {}],
    ];
    for (const [path, headers] of cases) expect((await send(kg.gate.url, path, { headers })).status, path).toBe(200);
    expect(kg.upstream.received.map((r) => r.url)).toEqual(cases.map(([path]) => path));
    for (const r of kg.upstream.received) {
      const names = r.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
      expect(
        names.filter((n) => n === 'authorization' || n.replace(/_/g, '-').startsWith('x-api-key')),
        r.url,
      ).toEqual([]);
      expect(r.headers['x-forwarded-for'], r.url).toBe('127.0.0.1');
    }
    expect((await requestsCounted('public')) - before).toBe(cases.length);
    // Nothing was verified, so the token carried on the public calls was not spent: it still works where it is needed.
    const authed = await send(kg.gate.url, ACCOUNTS_PATH, { headers: bearer(t) });
    expect(authed.status).toBe(200);
    expect(kg.upstream.received.at(-1)!.headers['x-api-key-id']).toBe('key-good');
  });

  it('anything not listed stays authenticated: other methods, other paths under the same prefix', async () => {
    for (const [method, path, override] of [
      ['POST', '/api/v3/asset_pairs', undefined],
      ['GET', '/api/v3/asset_pairs/BTC-USDT/trades', undefined],
      ['GET', '/api/v3/asset_pairs/BTC-USDT/depth/full', undefined],
      ['GET', ACCOUNTS_PATH, undefined],
      // An allowed override: the request is public only if both of its methods are; here only GET is.
      ['POST', '/api/v3/asset_pairs', 'GET'],
    ] as const) {
      const r = await send(kg.gate.url, path, {
        method,
        headers: { 'x-api-key-id': 'key-admin', ...(override && { 'x-http-method-override': override }) },
      });
      expect([path, r.status, r.json()]).toEqual([path, 401, { code: 40004, message: 'Unauthorized' }]);
    }
    expect(kg.upstream.received).toHaveLength(0);
  });
});

describe('forwarding: upstream failures', () => {
  it('answers 502 JSON when the upstream refuses connections', async () => {
    const dead = await startRecordingUpstream();
    const url = dead.url;
    await dead.close();
    const gate = await startKeygate({ upstream: url, keys: [makeKey({ apiKey: 'good', secret: SECRET })] });
    try {
      const res = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)) });
      expect(res.status).toBe(502);
      expect(res.json()).toEqual({ code: 50200, message: 'Bad gateway' });
    } finally {
      await gate.close();
    }
  });

  it('answers 504 JSON when the upstream does not answer in time, and keeps serving', async () => {
    const upstream = await startRecordingUpstream();
    const gate = await startKeygate({
      upstream: upstream.url,
      keys: [makeKey({ apiKey: 'good', secret: SECRET })],
      env: { KEYGATE_UPSTREAM_TIMEOUT_MS: '200' },
    });
    try {
      upstream.handler = () => {}; // never answers
      const started = Date.now();
      const res = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)) });
      expect(res.status).toBe(504);
      expect(res.json()).toEqual({ code: 50400, message: 'Gateway timeout' });
      expect(Date.now() - started).toBeLessThan(2_000);
      upstream.handler = undefined;
      expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)) })).status).toBe(200);
    } finally {
      await gate.close();
      await upstream.close();
    }
  });

  it('cuts the client connection when the upstream dies mid-response, without crashing', async () => {
    const upstream = await startRecordingUpstream();
    const gate = await startKeygate({ upstream: upstream.url, keys: [makeKey({ apiKey: 'good', secret: SECRET })] });
    try {
      upstream.handler = (_req, res) => {
        res.writeHead(200, { 'content-length': '1000' });
        res.write('partial');
        setTimeout(() => res.socket?.destroy(), 20);
      };
      await expect(send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)) })).rejects.toThrow();
      upstream.handler = undefined;
      expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)) })).status).toBe(200);
    } finally {
      await gate.close();
      await upstream.close();
    }
  });
});

// docs/security.md "Header mutation": only X-Forwarded-For/-Proto/-Host carry a trusted proxy's values on;
// Forwarded, X-Forwarded-Port and X-Real-IP are dropped from every peer, trusted or not.
describe.each([
  [
    'a trusted proxy',
    '127.0.0.1/32',
    {
      'x-forwarded-for': '203.0.113.7, 127.0.0.1',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'api.example.com',
    },
  ],
  [
    'an untrusted peer',
    '10.0.0.0/8',
    { 'x-forwarded-for': '127.0.0.1', 'x-forwarded-proto': 'http', 'x-forwarded-host': '127.0.0.1' },
  ],
])('forwarding headers from %s', (_name, cidr, expected) => {
  const kg = useGate({
    keys: [makeKey({ apiKey: 'good', secret: SECRET })],
    policy: `routes:\n  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }\ntrustedProxies: [${cidr}]\n`,
  });

  it('keeps or replaces X-Forwarded-For/-Proto/-Host, and always drops Forwarded, X-Forwarded-Port and X-Real-IP', async () => {
    const res = await send(kg.gate.url, ACCOUNTS_PATH, {
      headers: {
        ...bearer(token('good', SECRET)),
        host: '127.0.0.1',
        forwarded: 'for=203.0.113.7;proto=https',
        'x-forwarded-for': '203.0.113.7',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'api.example.com',
        'x-forwarded-port': '443',
        'x-real-ip': '203.0.113.7',
      },
    });
    expect(res.status).toBe(200);
    const got = kg.upstream.received.at(-1)!.headers;
    expect({
      'x-forwarded-for': got['x-forwarded-for'],
      'x-forwarded-proto': got['x-forwarded-proto'],
      'x-forwarded-host': got['x-forwarded-host'],
    }).toEqual(expected);
    for (const dropped of ['forwarded', 'x-forwarded-port', 'x-real-ip']) expect(got[dropped], dropped).toBeUndefined();
  });
});
