import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { caddyVersion } from '../helpers/caddy.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import {
  ASSERTION_AUDIENCE,
  clientView,
  lineDiff,
  runRow,
  startWorld,
  upstreamView,
  type Outcome,
  type ParityRow,
  type Recipe,
  type World,
} from '../helpers/forward-auth-parity.js';
import { bearer } from '../helpers/http.js';
import { waitStoreReady } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { createAssertionVerifier } from '../../src/client/verify-assertion.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { nowNonce, token } from '../helpers/tokens.js';
import { guard } from '../helpers/slowdown.js';
import { until } from '../helpers/redis-topology.js';

const SECRET = 'plain-secret-0123456789abcdef';
const KEYS: KeyRecord[] = [
  makeKey({ apiKey: 'good', secret: SECRET, id: 'key-good', scopes: ['accounts:read', 'orders:write', 'time:read'] }),
  makeKey({ apiKey: 'owned', secret: SECRET, id: 'key-owned', owner: 'acct_42' }),
  makeKey({ apiKey: 'metered', secret: SECRET, id: 'key-metered', rateLimit: { rate: '100/s', burst: 50 } }),
  makeKey({ apiKey: 'limited', secret: SECRET, id: 'key-limited', rateLimit: { rate: '1/m', burst: 1 } }),
  makeKey({ apiKey: 'noscope', secret: SECRET, scopes: ['other:read'] }),
  makeKey({ apiKey: 'faraway', secret: SECRET, allowIps: ['10.0.0.0/8'] }),
  makeKey({ apiKey: 'revoked', secret: SECRET, state: 'revoked', revokedAt: '2026-01-01T00:00:00Z' }),
];
const ROUTES = `routes:
  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }
  - { method: POST, path: /api/v3/orders, scopes: [orders:write] }
  - { method: GET, path: /api/v3/admin/users, scopes: [admin:read] }
public:
  - { method: GET, path: /public/* }
`;
const auth = (apiKey: string, extra: Record<string, unknown> = {}) => bearer(token(apiKey, SECRET, extra));
const good = () => auth('good');
/** Every name a client might use to claim an identity or re-route the request. */
const FORGED = {
  'X-Api-Key-Id': 'forged',
  'X-Api-Key-Owner': 'forged-owner',
  'X-Api-Key': 'forged-key',
  x_api_key_id: 'forged-underscore',
  'X-Original-URL': '/api/v3/admin/users',
  'X-Rewrite-Url': '/api/v3/admin/users',
  Forwarded: 'for=203.0.113.9',
  'X-Real-IP': '203.0.113.9',
  'X-Forwarded-Port': '443',
  'X-Keygate-Assertion': 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJmb3JnZWQifQ.',
  x_keygate_assertion: 'forged-underscore-assertion',
};

/**
 * The rows: every seed row of the contract's error table, Keygate's own refusals a client can
 * provoke, 429, the nonce window's 40106 with X-Server-Time, allowed requests (plain, with an owner,
 * rate-limited, with a body), a public route, the clock endpoint, and attacks on what the service
 * receives (forged identity, rewrite headers, method overrides, a second description of the request).
 */
const ROWS: ParityRow[] = [
  { name: '40004 no Authorization header', path: ACCOUNTS_PATH, headers: () => ({}) },
  {
    name: '40106 bad signature',
    path: ACCOUNTS_PATH,
    headers: () => bearer(token('good', 'another-secret-0123456789')),
  },
  { name: '40106 malformed token', path: ACCOUNTS_PATH, headers: () => bearer('not-a-jwt') },
  {
    name: '40106 nonce outside recv_window (X-Server-Time)',
    path: ACCOUNTS_PATH,
    headers: () => auth('good', { nonce: nowNonce(-31_000) }),
  },
  {
    name: '40106 secret Base64-encoded before signing',
    path: ACCOUNTS_PATH,
    headers: () => bearer(token('good', Buffer.from(SECRET).toString('base64'))),
  },
  {
    name: '40107 two spaces after Bearer',
    path: ACCOUNTS_PATH,
    headers: () => ({ authorization: `Bearer  ${token('good', SECRET)}` }),
  },
  { name: '40107 Basic scheme', path: ACCOUNTS_PATH, headers: () => ({ authorization: 'Basic Zm9vOmJhcg==' }) },
  { name: '10403 key lacks the scope', path: ACCOUNTS_PATH, headers: () => auth('noscope') },
  { name: '10403 caller IP not on the allow-list', path: ACCOUNTS_PATH, headers: () => auth('faraway') },
  { name: '10403 route the key may not call', path: '/api/v3/admin/users', headers: good },
  { name: '10013 unknown key', path: ACCOUNTS_PATH, headers: () => auth('nobody') },
  { name: '10013 revoked key', path: ACCOUNTS_PATH, headers: () => auth('revoked') },
  { name: '10429 rate limit used up', path: ACCOUNTS_PATH, headers: () => auth('limited'), before: 1 },
  { name: '40400 path outside /api/v3/', path: '/internal/admin', headers: good },
  { name: '40000 encoded dot-dot', path: '/api/v3/%2e%2e/admin', headers: good },
  { name: '200 allowed', path: `${ACCOUNTS_PATH}?page=2`, headers: good },
  { name: '200 allowed, key with an owner', path: ACCOUNTS_PATH, headers: () => auth('owned') },
  { name: '200 allowed, rate-limited key (RateLimit fields)', path: ACCOUNTS_PATH, headers: () => auth('metered') },
  {
    name: '200 allowed POST with a body',
    method: 'POST',
    path: '/api/v3/orders',
    headers: () => ({ ...good(), 'content-type': 'application/json' }),
    body: '{"side":"buy"}',
  },
  { name: '200 public route, no token', path: '/public/logo', headers: () => ({}) },
  {
    name: '200 public route, token and forged identity',
    path: '/public/logo',
    headers: () => ({ ...good(), ...FORGED }),
  },
  { name: '200 forged identity and rewrite headers', path: ACCOUNTS_PATH, headers: () => ({ ...good(), ...FORGED }) },
  {
    name: '200 client-sent X-Original-URI / X-Forwarded-Uri',
    path: ACCOUNTS_PATH,
    headers: () => ({
      ...good(),
      'X-Original-URI': '/public/logo',
      'X-Original-Method': 'GET',
      'X-Forwarded-Uri': '/public/logo',
    }),
  },
  {
    name: '200 client-sent X-Keygate-Render',
    path: ACCOUNTS_PATH,
    headers: () => ({ ...good(), 'X-Keygate-Render': '10403' }),
  },
  {
    name: '40000 X-HTTP-Method-Override',
    path: ACCOUNTS_PATH,
    headers: () => ({ ...good(), 'X-HTTP-Method-Override': 'DELETE' }),
  },
  {
    name: '40000 X_HTTP_Method_Override (folded spelling)',
    path: ACCOUNTS_PATH,
    headers: () => ({ ...good(), X_HTTP_Method_Override: 'DELETE' }),
    unlike: {
      nginx: {
        because: 'nginx drops header names with "_" (ignore_invalid_headers): neither Keygate nor the service sees it',
        asIf: { name: 'without it', path: ACCOUNTS_PATH, headers: good },
      },
    },
  },
  { name: '40000 X-Method-Override', path: ACCOUNTS_PATH, headers: () => ({ ...good(), 'X-Method-Override': 'POST' }) },
  { name: '40000 _method in the query', path: `${ACCOUNTS_PATH}?_method=DELETE`, headers: good },
  { name: '200 /api/v3/time, timeEndpoint on (Keygate answers)', path: '/api/v3/time', headers: () => ({}) },
  { name: '200 HEAD /api/v3/time, timeEndpoint on', method: 'HEAD', path: '/api/v3/time', headers: () => ({}) },
];

const TIME_OFF_ROWS: ParityRow[] = [
  { name: '40004 /api/v3/time, timeEndpoint off, no token', path: '/api/v3/time', headers: () => ({}) },
  { name: '200 /api/v3/time, timeEndpoint off (the service answers)', path: '/api/v3/time', headers: good },
];

const RECIPES: Recipe[] = ['nginx', 'caddy'];
/** The closing note's table: one line per row, each recipe "=" (same answer and same upstream request) or the difference. */
const table: string[] = [];

function tableLine(
  row: ParityRow,
  proxy: Outcome,
  recipes: Record<string, Outcome>,
  references: Record<string, Outcome>,
): string {
  const p = clientView(proxy);
  const cells = RECIPES.map((name) => {
    const r = recipes[name]!;
    const ref = references[name]!;
    const want = clientView(ref);
    const c = clientView(r);
    const sameUp = JSON.stringify(upstreamView(r)) === JSON.stringify(upstreamView(ref));
    const same = c.status === want.status && c.body === want.body && lineDiff(want.headers, c.headers) === '' && sameUp;
    const unlike = row.unlike?.[name];
    if (same) return unlike ? `${c.status}, as proxy mode answers it ${unlike.asIf.name}: ${unlike.because}` : '=';
    return `${c.status} ${lineDiff(want.headers, c.headers)}${sameUp ? '' : ' upstream differs'}`;
  });
  const code = p.status >= 400 ? (JSON.parse(proxy.reply.body) as { code: number }).code : '';
  const up = proxy.received.length > 0 ? 'forwarded' : '-';
  return `| ${row.name} | ${p.status} ${code} | ${up} | ${cells.join(' | ')} |`;
}

/** The same request through proxy mode and each recipe: same answer to the client, same request to the service. */
function expectParity(proxy: Outcome, recipe: Outcome, name: string) {
  expect(clientView(recipe), `${name}: the client's answer`).toEqual(clientView(proxy));
  expect(upstreamView(recipe), `${name}: what the service received`).toEqual(upstreamView(proxy));
  for (const got of recipe.received) {
    const names = got.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    for (const never of [
      'authorization',
      'x-original-url',
      'x-rewrite-url',
      'x_api_key_id',
      'x-api-key',
      'forwarded',
      'x-real-ip',
    ])
      expect(names, `${name}: ${never} reached the service`).not.toContain(never);
    expect(['key-good', 'key-owned', 'key-metered', undefined]).toContain(got.headers['x-api-key-id']);
  }
}

/**
 * With the assertion on: every request the service got with a key carries exactly one
 * X-Keygate-Assertion, Keygate's, which verifies against that world's admin JWKS and names the same
 * key; a request without a key (a public route) carries none, whatever the client sent.
 */
async function expectAssertions(world: World, o: Outcome, name: string) {
  const verify = createAssertionVerifier({
    jwks: `${world.keygate.adminUrl}/.well-known/jwks.json`,
    audience: ASSERTION_AUDIENCE,
  });
  for (const got of o.received) {
    const lines = got.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.replace(/[^a-z]/gi, '').toLowerCase());
    const copies = lines.filter((n) => n === 'xkeygateassertion').length;
    const keyId = got.headers['x-api-key-id'];
    if (keyId === undefined || keyId === '') {
      expect(copies, `${name}: an assertion reached the service without a key`).toBe(0);
      continue;
    }
    expect(copies, `${name}: X-Keygate-Assertion lines`).toBe(1);
    const identity = await verify(got.headers['x-keygate-assertion']);
    expect(identity.keyId, name).toBe(keyId);
  }
}

describe('forward-auth parity: proxy mode and the shipped recipes on real nginx and Caddy give the same answers', () => {
  let upstream: RecordingUpstream;
  const on: Record<string, World> = {};
  const off: Record<string, World> = {};

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    for (const mode of ['proxy', ...RECIPES] as const) {
      // The signed identity assertion is on here (each world with its own key), off in the other worlds.
      on[mode] = await startWorld(mode, { upstream, keys: KEYS, policy: ROUTES, redis: true, assertion: true });
      off[mode] = await startWorld(mode, {
        upstream,
        keys: KEYS,
        policy: `${ROUTES.replace('routes:\n', 'routes:\n  - { method: GET, path: /api/v3/time, scopes: [time:read] }\n')}timeEndpoint: false\n`,
        redis: false,
      });
    }
  }, guard(60_000));

  afterAll(async () => {
    if (table.length > 0)
      console.log(
        `[forward-auth-parity] caddy ${caddyVersion()}, ${RECIPES.join(', ')} vs proxy mode ("=": same status, body, header lines and upstream request)\n` +
          `| row | proxy mode | upstream | ${RECIPES.join(' | ')} |\n|---|---|---|${RECIPES.map(() => '---').join('|')}|\n${table.join('\n')}`,
      );
    for (const w of [...Object.values(on), ...Object.values(off)]) await w.stop();
    await upstream?.close();
  });

  const check = async (worlds: Record<string, World>, row: ParityRow) => {
    const proxy = await runRow(worlds.proxy!, upstream, row);
    const recipes: Record<string, Outcome> = {};
    const references: Record<string, Outcome> = {};
    for (const name of RECIPES) {
      recipes[name] = await runRow(worlds[name]!, upstream, row);
      const asIf = row.unlike?.[name]?.asIf;
      references[name] = asIf ? await runRow(worlds.proxy!, upstream, asIf) : proxy;
    }
    table.push(tableLine(row, proxy, recipes, references));
    for (const name of RECIPES) expectParity(references[name]!, recipes[name]!, name);
    if (worlds === on)
      for (const [name, o] of [['proxy', proxy] as const, ...RECIPES.map((n) => [n, recipes[n]!] as const)])
        await expectAssertions(worlds[name]!, o, name);
    return proxy;
  };

  it.each(ROWS)('$name', async (row) => {
    await check(on, row);
  });

  it.each(TIME_OFF_ROWS)('$name', async (row) => {
    await check(off, row);
  });

  it(
    '503 50300 with Redis down: the same answer everywhere, nothing forwarded; served again once Redis is back',
    async () => {
      for (const w of Object.values(on)) await w.redis!.kill();
      try {
        const proxy = await check(on, { name: '50300 Redis down', path: ACCOUNTS_PATH, headers: good });
        expect([proxy.reply.status, proxy.received]).toEqual([503, []]);
      } finally {
        for (const w of Object.values(on)) await w.redis!.start();
      }
      // The key write goes over the management connection, which reconnects on its own schedule
      // (after the command connection PING answers, on a loaded machine seconds later): retried until it lands.
      for (const w of Object.values(on)) {
        const store = w.keygate.keygate.store;
        await waitStoreReady(store, 15_000);
        for (const k of KEYS)
          await until(`key ${k.apiKey} written again once Redis is back`, () => store.putKey(k).then(() => true));
      }
    },
    guard(30_000),
  );
});
