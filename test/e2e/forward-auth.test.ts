import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/load-config.js';
import { ConfigError } from '../../src/files/config-error.js';
import { ERRORS, type ErrorCode } from '../../src/errors.js';
import { repoRoot } from '../helpers/deploy.js';
import { send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { render, podContainers, type Manifest } from '../helpers/kustomize.js';
import { FORWARD_AUTH_CONF, PLACEHOLDERS } from '../helpers/nginx.js';
import { token } from '../helpers/tokens.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const SECRET = 'plain-secret-0123456789abcdef';
const traefik = parse(readFileSync(join(repoRoot, 'deploy/traefik/forward-auth.yaml'), 'utf8')) as {
  http: {
    middlewares: {
      keygate: {
        forwardAuth: {
          address: string;
          trustForwardHeader: boolean;
          authRequestHeaders: string[];
          authResponseHeaders: string[];
        };
      };
    };
    routers: Record<string, { middlewares: string[]; service: string }>;
  };
};
const envoy = parse(readFileSync(join(repoRoot, 'deploy/envoy/forward-auth.yaml'), 'utf8')) as Record<string, unknown>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const hcm = (envoy as any).static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const extAuthz = hcm.http_filters.find((f: any) => f.name === 'envoy.filters.http.ext_authz').typed_config;
const ENVOY_PREFIX: string = extAuthz.http_service.path_prefix;

const seedBody = (code: ErrorCode) => JSON.stringify({ code, message: ERRORS[code].message });

describe('forward-auth configuration', () => {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-fa-config-'));
  const trusting = join(dir, 'trusting.yaml');
  writeFileSync(trusting, 'trustedProxies: [127.0.0.1/32]\n');
  const trustingNobody = join(dir, 'nobody.yaml');
  writeFileSync(trustingNobody, 'trustedProxies: []\n');
  it.each([
    {
      name: 'forward-auth needs no upstream',
      env: { KEYGATE_MODE: 'forward-auth', KEYGATE_CONFIG: trusting },
      ok: true,
    },
    {
      name: 'forward-auth with a path prefix',
      env: {
        KEYGATE_MODE: 'forward-auth',
        KEYGATE_CONFIG: trusting,
        KEYGATE_FORWARD_AUTH_PATH_PREFIX: '/keygate-check',
      },
      ok: true,
    },
    {
      name: 'forward-auth with empty trustedProxies',
      env: { KEYGATE_MODE: 'forward-auth', KEYGATE_CONFIG: trustingNobody },
      problem: 'must list trustedProxies',
    },
    {
      name: 'forward-auth with the default policy (trusts nobody)',
      env: { KEYGATE_MODE: 'forward-auth' },
      problem: 'must list trustedProxies',
    },
    {
      name: 'unknown mode',
      env: { KEYGATE_MODE: 'sidecar', KEYGATE_UPSTREAM: 'http://127.0.0.1:3000' },
      problem: 'KEYGATE_MODE',
    },
    {
      name: 'proxy mode still needs an upstream',
      env: { KEYGATE_MODE: 'proxy' },
      problem: 'KEYGATE_UPSTREAM: required',
    },
    {
      name: 'prefix in proxy mode',
      env: { KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', KEYGATE_FORWARD_AUTH_PATH_PREFIX: '/x' },
      problem: 'only used with KEYGATE_MODE=forward-auth',
    },
    {
      name: 'prefix with a trailing slash',
      env: { KEYGATE_MODE: 'forward-auth', KEYGATE_CONFIG: trusting, KEYGATE_FORWARD_AUTH_PATH_PREFIX: '/x/' },
      problem: 'KEYGATE_FORWARD_AUTH_PATH_PREFIX',
    },
    {
      name: 'prefix with a dot-dot segment',
      env: { KEYGATE_MODE: 'forward-auth', KEYGATE_CONFIG: trusting, KEYGATE_FORWARD_AUTH_PATH_PREFIX: '/a/../b' },
      problem: 'KEYGATE_FORWARD_AUTH_PATH_PREFIX',
    },
  ])('$name', ({ env, ok, problem }) => {
    if (ok) {
      const c = loadConfig(env);
      expect(c.mode).toBe('forward-auth');
      expect(c.upstream).toBeUndefined();
      return;
    }
    let err: unknown;
    try {
      loadConfig(env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems.join('\n')).toContain(problem);
  });
});

describe('forward-auth over real sockets: Traefik and Envoy requests as their documentation describes them', () => {
  let kg: RunningKeygate;
  const KEYS = [
    makeKey({ apiKey: 'good', secret: SECRET, id: 'key-good' }),
    makeKey({ apiKey: 'office', secret: SECRET, id: 'key-office', allowIps: ['203.0.113.0/24'] }),
    makeKey({ apiKey: 'owned', secret: SECRET, id: 'key-owned', owner: 'acct_42' }),
  ];

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-fa-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      `routes:\n  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }\npublic:\n  - { method: GET, path: /public/* }\ntrustedProxies: [127.0.0.1/32]\n`,
    );
    kg = await startKeygate({
      upstream: 'http://unused.invalid',
      keys: KEYS,
      env: { KEYGATE_MODE: 'forward-auth', KEYGATE_CONFIG: policy, KEYGATE_FORWARD_AUTH_PATH_PREFIX: ENVOY_PREFIX },
    });
  });
  afterAll(() => kg?.close());

  /**
   * Traefik ForwardAuth: a GET to the configured address, carrying the client headers named in
   * authRequestHeaders (taken from the shipped snippet) and X-Forwarded-Method/-Proto/-Host/-Uri/-For.
   */
  const traefikCheck = (client: { method: string; uri: string; ip?: string; headers: Record<string, string> }) => {
    const fa = traefik.http.middlewares.keygate.forwardAuth;
    const headers: Record<string, string> = {};
    for (const name of fa.authRequestHeaders) {
      const v = Object.entries(client.headers).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
      if (v !== undefined) headers[name] = v;
    }
    Object.assign(headers, {
      'X-Forwarded-Method': client.method,
      'X-Forwarded-Proto': 'https',
      'X-Forwarded-Host': 'api.example.com',
      'X-Forwarded-Uri': client.uri,
      'X-Forwarded-For': client.ip ?? '198.51.100.9',
    });
    return send(kg.url, new URL(fa.address.replace('__KEYGATE__', 'keygate:8000')).pathname, { headers });
  };

  /**
   * Envoy ext_authz HTTP service: the check keeps the original method, its path is path_prefix +
   * the original path, and it carries Host, Authorization, Content-Length and the allowed_headers.
   */
  const envoyCheck = (client: { method: string; path: string; headers: Record<string, string> }) => {
    const allowed = new Set([
      'host',
      'authorization',
      'content-length',
      ...extAuthz.allowed_headers.patterns.map((p: { exact: string }) => p.exact),
    ]);
    const headers: Record<string, string> = { 'content-length': '0' };
    for (const [k, v] of Object.entries(client.headers)) if (allowed.has(k.toLowerCase())) headers[k] = v;
    return send(kg.url, `${ENVOY_PREFIX}${client.path}`, { method: client.method, headers });
  };

  it("Traefik: allowed is 200 with an empty body, X-Api-Key-Id and X-Request-Id; the X-Api-Key-Id a client sends never reaches Keygate's answer", async () => {
    const r = await traefikCheck({
      method: 'GET',
      uri: `${ACCOUNTS_PATH}?page=1`,
      headers: {
        Authorization: `Bearer ${token('good', SECRET)}`,
        'X-Request-Id': 'req-traefik-1',
        'X-Api-Key-Id': 'forged',
      },
    });
    expect(r.status).toBe(200);
    expect(r.body).toBe('');
    expect(r.headers['x-api-key-id']).toBe('key-good');
    expect(r.headers['x-request-id']).toBe('req-traefik-1');
    expect(r.headers['x-keygate-code']).toBeUndefined();
  });

  it.each<{ name: string; headers: Record<string, string>; code: ErrorCode }>([
    { name: 'no token', headers: {}, code: 40004 },
    { name: 'bad header format', headers: { Authorization: 'Basic Zm9vOmJhcg==' }, code: 40107 },
    { name: 'unknown key', headers: { Authorization: `Bearer ${token('nobody', SECRET)}` }, code: 10013 },
    {
      name: 'bad signature',
      headers: { Authorization: `Bearer ${token('good', 'wrong-secret-0123456789')}` },
      code: 40106,
    },
  ])(
    'Traefik: refused ($name) with the seed status, body and headers as they are (no X-Keygate-Code: the client sees this answer)',
    async ({ headers, code }) => {
      const r = await traefikCheck({ method: 'GET', uri: ACCOUNTS_PATH, headers });
      expect(r.status).toBe(ERRORS[code].status);
      expect(r.body).toBe(seedBody(code));
      expect(r.headers['x-keygate-code']).toBeUndefined();
      expect(r.headers['www-authenticate']).toBe(r.status === 401 ? 'Bearer' : undefined);
    },
  );

  it('Traefik: the original method is what is authorised (route is GET only) and X-Forwarded-For decides the caller IP', async () => {
    const post = await traefikCheck({
      method: 'POST',
      uri: ACCOUNTS_PATH,
      headers: { Authorization: `Bearer ${token('good', SECRET)}` },
    });
    expect([post.status, post.body]).toEqual([403, seedBody(10403)]);
    const inside = await traefikCheck({
      method: 'GET',
      uri: ACCOUNTS_PATH,
      ip: '203.0.113.5',
      headers: { Authorization: `Bearer ${token('office', SECRET)}` },
    });
    expect(inside.status).toBe(200);
    const outside = await traefikCheck({
      method: 'GET',
      uri: ACCOUNTS_PATH,
      ip: '198.51.100.9',
      headers: { Authorization: `Bearer ${token('office', SECRET)}` },
    });
    expect([outside.status, outside.body]).toEqual([403, seedBody(10403)]);
  });

  it('Envoy: allowed on the prefixed path; refused with the exact seed answer; the original method counts', async () => {
    const okR = await envoyCheck({
      method: 'GET',
      path: ACCOUNTS_PATH,
      headers: {
        Authorization: `Bearer ${token('good', SECRET)}`,
        'x-request-id': 'envoy-1',
        'x-forwarded-for': '198.51.100.9',
        'x-api-key-id': 'forged',
      },
    });
    expect([okR.status, okR.body, okR.headers['x-api-key-id'], okR.headers['x-request-id']]).toEqual([
      200,
      '',
      'key-good',
      'envoy-1',
    ]);
    const bad = await envoyCheck({
      method: 'GET',
      path: ACCOUNTS_PATH,
      headers: { Authorization: `Bearer  ${token('good', SECRET)}` },
    });
    expect([bad.status, bad.body, bad.headers['x-keygate-code']]).toEqual([400, seedBody(40107), undefined]);
    const del = await envoyCheck({
      method: 'DELETE',
      path: ACCOUNTS_PATH,
      headers: { Authorization: `Bearer ${token('good', SECRET)}` },
    });
    expect([del.status, del.body]).toEqual([403, seedBody(10403)]);
  });

  it('public routes are allowed with an empty X-Api-Key-Id and X-Api-Key-Owner, so a proxy overwrites any client copy', async () => {
    const r = await envoyCheck({ method: 'GET', path: '/public/logo', headers: { 'x-api-key-owner': 'forged' } });
    expect(r.status).toBe(200);
    expect([r.headers['x-api-key-id'], r.headers['x-api-key-owner']]).toEqual(['', '']);
  });

  it.each([
    ['a key with an owner', 'owned', 'key-owned', 'acct_42'],
    ['a key without one (empty, so a client copy is overwritten)', 'good', 'key-good', ''],
  ])('X-Api-Key-Owner beside X-Api-Key-Id: %s', async (_name, sub, id, owner) => {
    const r = await traefikCheck({
      method: 'GET',
      uri: ACCOUNTS_PATH,
      headers: { Authorization: `Bearer ${token(sub, SECRET)}`, 'X-Api-Key-Owner': 'forged' },
    });
    expect([r.status, r.headers['x-api-key-id'], r.headers['x-api-key-owner']]).toEqual([200, id, owner]);
  });

  it('a check from an untrusted peer claiming another URI is refused (403 40300) and burns no nonce', async () => {
    const t = token('good', SECRET);
    const r = await send(kg.url, '/', {
      from: '127.0.0.2',
      headers: { authorization: `Bearer ${t}`, 'x-original-method': 'GET', 'x-original-uri': ACCOUNTS_PATH },
    });
    expect([r.status, r.body, r.headers['x-keygate-code']]).toEqual([403, seedBody(40300), undefined]);
    const again = await traefikCheck({ method: 'GET', uri: ACCOUNTS_PATH, headers: { Authorization: `Bearer ${t}` } });
    expect(again.status).toBe(200);
  });

  it('two descriptions of the original request are refused (400 40000) before the token is looked at', async () => {
    const t = token('good', SECRET);
    const r = await send(kg.url, '/', {
      headers: {
        authorization: `Bearer ${t}`,
        'x-original-method': 'GET',
        'x-original-uri': '/public/x',
        'x-forwarded-method': 'GET',
        'x-forwarded-uri': ACCOUNTS_PATH,
      },
    });
    expect([r.status, r.body]).toEqual([400, seedBody(40000)]);
    const again = await traefikCheck({ method: 'GET', uri: ACCOUNTS_PATH, headers: { Authorization: `Bearer ${t}` } });
    expect(again.status).toBe(200);
  });

  it('a check with Host twice is refused (400 40000) like any request on the proxy port, the clock endpoint included', async () => {
    for (const uri of [ACCOUNTS_PATH, '/api/v3/time']) {
      const check = (hosts: string) =>
        exchange(
          kg.port,
          `GET / HTTP/1.1\r\n${hosts}Authorization: Bearer ${token('good', SECRET)}\r\nX-Forwarded-Method: GET\r\nX-Forwarded-Uri: ${uri}\r\n\r\n`,
        );
      const twice = await check('Host: a.test\r\nHost: b.test\r\n');
      expect([twice.statuses, firstBody(twice.text)]).toEqual([[400], JSON.parse(seedBody(40000))]);
      expect((await check('Host: a.test\r\n')).statuses).toEqual([200]);
    }
  });

  it('X-Keygate-Refusal-Status (nginx) turns a refusal into 401 or 403 with the code and none of the status headers; other values are ignored', async () => {
    const base = {
      'x-original-method': 'GET',
      'x-original-uri': ACCOUNTS_PATH,
      authorization: `Bearer ${token('nobody', SECRET)}`,
    };
    const as401 = await send(kg.url, '/', { headers: { ...base, 'x-keygate-refusal-status': '401' } });
    expect([as401.status, as401.headers['x-keygate-code']]).toEqual([401, '10013']);
    // nginx copies a 401 check's WWW-Authenticate onto the client's answer: the render step adds the real one.
    const noToken = await send(kg.url, '/', {
      headers: { 'x-original-method': 'GET', 'x-original-uri': ACCOUNTS_PATH, 'x-keygate-refusal-status': '401' },
    });
    expect([noToken.status, noToken.headers['x-keygate-code'], noToken.headers['www-authenticate']]).toEqual([
      401,
      '40004',
      undefined,
    ]);
    const ignored = await send(kg.url, '/', { headers: { ...base, 'x-keygate-refusal-status': '200' } });
    expect([ignored.status, ignored.body, ignored.headers['x-keygate-code']]).toEqual([
      404,
      seedBody(10013),
      undefined,
    ]);
  });

  it('the clock endpoint asked as a check: the answer itself, or (nginx, forced status) X-Keygate-Code: time and the answer from the render step', async () => {
    const direct = await traefikCheck({ method: 'GET', uri: '/api/v3/time', headers: {} });
    expect([direct.status, direct.headers['x-api-key-id'], direct.headers['x-keygate-code']]).toEqual([
      200,
      undefined,
      undefined,
    ]);
    expect(direct.headers['x-server-time']).toMatch(/^\d{19}$/);
    expect(direct.body).toBe(`{"serverTime":"${direct.headers['x-server-time']}"}`);
    const forced = await send(kg.url, '/', {
      headers: { 'x-original-method': 'HEAD', 'x-original-uri': '/api/v3/time', 'x-keygate-refusal-status': '403' },
    });
    expect([forced.status, forced.headers['x-keygate-code'], forced.headers['x-server-time'], forced.body]).toEqual([
      403,
      'time',
      undefined,
      '',
    ]);
    const rendered = await send(kg.url, '/_keygate/refused', { headers: { 'x-keygate-render': 'time' } });
    expect([rendered.status, rendered.headers['content-type'], rendered.headers['x-keygate-code']]).toEqual([
      200,
      'application/json',
      undefined,
    ]);
    expect(rendered.body).toBe(`{"serverTime":"${rendered.headers['x-server-time']}"}`);
  });

  it('render requests (nginx error_page) answer the named catalogue entry, are never an allow, and are not counted again', async () => {
    const count = async () =>
      (await kg.keygate.metrics.registry.getSingleMetricAsString('keygate_requests_total'))
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .join('\n');
    const before = await count();
    const r = await send(kg.url, '/_keygate/refused', {
      headers: { 'x-keygate-render': '10403', 'x-request-id': 'rid-1' },
    });
    expect([r.status, r.body, r.headers['x-request-id'], r.headers['x-keygate-code']]).toEqual([
      403,
      seedBody(10403),
      'rid-1',
      undefined,
    ]);
    const bogus = await send(kg.url, '/', { headers: { 'x-keygate-render': '20000' } });
    expect([bogus.status, bogus.body]).toEqual([500, seedBody(50000)]);
    expect(await count()).toBe(before);
    // From an untrusted peer it is just an untrusted check.
    const untrusted = await send(kg.url, '/', { from: '127.0.0.2', headers: { 'x-keygate-render': '10403' } });
    expect([untrusted.status, untrusted.body]).toEqual([403, seedBody(40300)]);
  });
});

describe('shipped forward-auth snippets', () => {
  it('nginx: the header documents exactly the placeholders the file uses, and the wiring the tests rely on is there', () => {
    const conf = readFileSync(FORWARD_AUTH_CONF, 'utf8');
    const header = conf.slice(0, conf.indexOf('\nworker_processes'));
    const used = new Set(conf.slice(header.length).match(/__[A-Z_]+__/g));
    expect([...used].sort()).toEqual([...PLACEHOLDERS].sort());
    for (const p of PLACEHOLDERS) expect(header).toContain(p);
    for (const line of [
      'auth_request /_keygate/check;',
      'auth_request_set $keygate_key_id $upstream_http_x_api_key_id;',
      'proxy_set_header X-Api-Key-Id $keygate_key_id;',
      'auth_request_set $keygate_key_owner $upstream_http_x_api_key_owner;',
      'proxy_set_header X-Api-Key-Owner $keygate_key_owner;',
      'proxy_set_header X-Original-URI $request_uri;',
      'proxy_set_header X-Original-Method $request_method;',
      'proxy_set_header X-Keygate-Refusal-Status 403;',
      'proxy_set_header X-Keygate-Render $keygate_code;',
      'error_page 401 403 = /_keygate/refused;',
    ])
      expect(conf).toContain(line);
  });

  it('Traefik: ForwardAuth to Keygate, no trust in client X-Forwarded-*, X-Api-Key-Id copied onto the forwarded request', () => {
    const fa = traefik.http.middlewares.keygate.forwardAuth;
    expect(fa.address).toBe('http://__KEYGATE__/');
    expect(fa.trustForwardHeader).toBe(false);
    expect(fa.authRequestHeaders).toContain('Authorization');
    expect(fa.authRequestHeaders.map((h) => h.toLowerCase())).not.toContain('x-original-uri');
    expect(fa.authResponseHeaders).toEqual(expect.arrayContaining(['X-Api-Key-Id', 'X-Api-Key-Owner']));
    // Every router to the service is checked; only the clock endpoint's router goes to Keygate itself.
    for (const router of Object.values(traefik.http.routers))
      expect(router.middlewares).toContain(router.service === 'keygate' ? 'keygate-time' : 'keygate');
  });

  it('Envoy: ext_authz before the router, fails closed, path prefix as Keygate expects it, X-Api-Key-Id to the upstream', () => {
    const names = hcm.http_filters.map((f: { name: string }) => f.name);
    expect(names.indexOf('envoy.filters.http.ext_authz')).toBeLessThan(names.indexOf('envoy.filters.http.router'));
    expect(extAuthz['@type']).toBe('type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz');
    expect(extAuthz.failure_mode_allow).toBe(false);
    expect(ENVOY_PREFIX).toMatch(/^\/[a-z-]+$/);
    expect(extAuthz.http_service.authorization_response.allowed_upstream_headers.patterns).toEqual(
      expect.arrayContaining([{ exact: 'x-api-key-id' }, { exact: 'x-api-key-owner' }]),
    );
    expect(extAuthz.allowed_headers.patterns).toContainEqual({ exact: 'x-forwarded-for' });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const clusters = (envoy as any).static_resources.clusters.map((c: { name: string }) => c.name);
    expect(clusters).toContain(extAuthz.http_service.server_uri.cluster);
  });

  it("Kubernetes (ingress-nginx): valid manifests; Keygate in forward-auth mode trusting the ingress; the Ingress asks Keygate's Service", () => {
    const dir = join(repoRoot, 'deploy/kubernetes/forward-auth');
    const manifests: Manifest[] = render(dir);
    const MODELS: Record<string, new (d: never) => { validate(): void }> = {
      'apps/v1/Deployment': Deployment,
      'v1/Service': Service,
      'v1/ConfigMap': ConfigMap,
      'networking.k8s.io/v1/Ingress': Ingress,
      'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
    };
    for (const m of manifests) new MODELS[`${m.apiVersion}/${m.kind}`]!(m as never).validate();
    const find = (kind: string) => manifests.find((m) => m.kind === kind)!;
    const container = podContainers(find('Deployment'))[0] as {
      env: Array<{ name: string; value?: string }>;
      ports: Array<{ name: string; containerPort: number }>;
    };
    const policyFile = join(mkdtempSync(join(tmpdir(), 'keygate-fa-k8s-')), 'routes.yaml');
    writeFileSync(policyFile, (find('ConfigMap') as unknown as { data: Record<string, string> }).data['routes.yaml']!);
    const env = Object.fromEntries(
      container.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value as string]),
    );
    // The Secret's files (mounted under /run/secrets/keygate in the Pod) as the kubelet would lay them out.
    const secretDir = mkdtempSync(join(tmpdir(), 'keygate-fa-secrets-'));
    const secretValues: Record<string, string> = {
      KEYGATE_REDIS_URL_FILE: 'redis://127.0.0.1:6379',
      KEYGATE_SECRET_ENCRYPTION_KEY_FILE: randomBytes(32).toString('base64'),
    };
    for (const [name, path] of Object.entries(env)) {
      if (!name.endsWith('_FILE')) continue;
      expect(secretValues[name], `${name}: a secret file this test knows how to fill`).toBeDefined();
      const local = join(secretDir, path.split('/').pop()!);
      writeFileSync(local, secretValues[name]!);
      env[name] = local;
    }
    const config = loadConfig({ ...env, KEYGATE_CONFIG: policyFile });
    expect(config.mode).toBe('forward-auth');
    expect(config.policy.trustedProxyCidrs.length).toBeGreaterThan(0);
    const annotations = find('Ingress').metadata.annotations!;
    const authUrl = new URL(annotations['nginx.ingress.kubernetes.io/auth-url']!);
    const service = find('Service') as unknown as {
      metadata: { name: string };
      spec: { ports: Array<{ port: number; targetPort: string }> };
    };
    expect(authUrl.hostname.split('.')[0]).toBe(service.metadata.name);
    expect(Number(authUrl.port)).toBe(service.spec.ports[0]!.port);
    expect(container.ports.find((p) => p.name === service.spec.ports[0]!.targetPort)!.containerPort).toBe(config.port);
    // auth-method makes ingress-nginx send X-Original-URI, which Keygate reads.
    expect(annotations['nginx.ingress.kubernetes.io/auth-method']).toBe('GET');
    expect(annotations['nginx.ingress.kubernetes.io/auth-response-headers']!.split(',').map((h) => h.trim())).toEqual(
      expect.arrayContaining(['X-Api-Key-Id', 'X-Api-Key-Owner']),
    );
  });
});
