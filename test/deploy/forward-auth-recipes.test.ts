import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/load-config.js';
import { forwardHeaders } from '../../src/pipeline/forward-headers.js';
import { OVERRIDE_HEADERS } from '../../src/policy/method-override.js';
import { repoRoot } from '../helpers/deploy.js';
import { podContainers, readManifests, render, type Manifest } from '../helpers/kustomize.js';
import { section } from '../helpers/markdown.js';

/**
 * The contract for what the service receives, whatever the mode (docs/security.md, "What the
 * service receives"), against the recipes no binary runs here: Traefik, Envoy and ingress-nginx
 * are checked through their shipped files' own header lists. nginx and Caddy run for real in
 * forward-auth-parity.test.ts. Each list below is a line of the contract; a recipe that stops
 * stripping or sending one of these headers fails here.
 */

/** Never reach the service from the client, in any mode. */
const REMOVED = [
  'authorization',
  'x-api-key-id',
  'x-api-key-owner',
  'x-keygate-assertion',
  'x-original-url',
  'x-rewrite-url',
  'forwarded',
  'x-forwarded-port',
  'x-real-ip',
] as const;
/** What Keygate must see on a check to apply proxy mode's checks: the token, the request id, every method override. */
const TO_KEYGATE = ['authorization', 'x-request-id', ...OVERRIDE_HEADERS] as const;
/** Headers a refusal carries in proxy mode (besides framing): the client must get them through the proxy. */
const REFUSAL = [
  'content-type',
  'cache-control',
  'www-authenticate',
  'retry-after',
  'ratelimit-policy',
  'ratelimit',
  'x-server-time',
  'x-request-id',
] as const;
/** Keygate's own fields on an allowed answer (a rate-limited key). */
const ON_SUCCESS = ['ratelimit-policy', 'ratelimit'] as const;
const IDENTITY = ['x-api-key-id', 'x-api-key-owner', 'x-keygate-assertion'] as const;

const lower = (names: readonly string[]) => names.map((n) => n.toLowerCase());
const underscored = (name: string) => name.replace(/-/g, '_');
const read = (file: string) => readFileSync(join(repoRoot, file), 'utf8');
const headerComment = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('#'))
    .join('\n');

describe('the contract is the code: proxy mode removes every header the contract names', () => {
  it.each(REMOVED.flatMap((n) => [n, n.toUpperCase(), underscored(n)]))('%s', (name) => {
    const head = forwardHeaders(['Host', 'api.example.com', name, 'client-value'], {
      peerIp: '203.0.113.9',
      peerTrusted: false,
      requestId: 'rid',
    });
    if (!head.ok) throw new Error('refused');
    const got = lower(head.headers.filter((_, i) => i % 2 === 0));
    expect(got).not.toContain(name.toLowerCase());
    expect(head.headers).not.toContain('client-value');
  });

  it('docs/security.md states the contract: every removed header, what Keygate must see, and each recipe', () => {
    const text = section(read('docs/security.md'), 'What the service receives');
    for (const name of [...REMOVED, ...OVERRIDE_HEADERS]) expect(text.toLowerCase(), name).toContain(`\`${name}\``);
    for (const recipe of ['nginx', 'ingress-nginx', 'Traefik', 'Envoy', 'Caddy']) expect(text).toContain(recipe);
  });
});

type TraefikFile = {
  http: {
    middlewares: Record<
      string,
      {
        forwardAuth?: {
          address: string;
          trustForwardHeader: boolean;
          authRequestHeaders: string[];
          authResponseHeaders: string[];
        };
        headers?: { customRequestHeaders: Record<string, string> };
      }
    >;
    routers: Record<string, { rule: string; middlewares: string[]; service: string }>;
    services: Record<string, { loadBalancer: { servers: Array<{ url: string }> } }>;
  };
};

describe('Traefik recipe (deploy/traefik/forward-auth.yaml): its header lists', () => {
  const text = read('deploy/traefik/forward-auth.yaml');
  const t = (parse(text) as TraefikFile).http;
  const fa = t.middlewares.keygate!.forwardAuth!;
  const strip = t.middlewares['keygate-strip']!.headers!.customRequestHeaders;
  const stripped = lower(Object.keys(strip).filter((k) => strip[k] === ''));
  /** Traefik sets these itself from the connection on every proxied request; the recipe says so. */
  const TRAEFIK_SETS = ['x-forwarded-port', 'x-real-ip'];

  it.each(TO_KEYGATE.flatMap((n) => (n.startsWith('x-') && n !== 'x-request-id' ? [n, underscored(n)] : [n])))(
    'sends Keygate %s',
    (name) => expect(lower(fa.authRequestHeaders)).toContain(name),
  );

  it('sends Keygate no client header that describes another request, and trusts no client X-Forwarded-*', () => {
    for (const h of lower(fa.authRequestHeaders)) expect(h).not.toMatch(/^x-(original|forwarded|keygate)-/);
    expect(fa.trustForwardHeader).toBe(false);
  });

  it.each(REMOVED)('the service never gets the client copy of %s', (name) => {
    const how = IDENTITY.includes(name as (typeof IDENTITY)[number])
      ? lower(fa.authResponseHeaders) // Traefik deletes the client copy of every authResponseHeaders name
      : TRAEFIK_SETS.includes(name)
        ? (expect(headerComment(text).toLowerCase()).toContain(name), [name])
        : stripped;
    expect(how).toContain(name);
    // The "_" spellings a CGI-style server reads as the same header.
    if (!TRAEFIK_SETS.includes(name) && name !== 'forwarded') expect(stripped).toContain(underscored(name));
  });

  it('every router to the service runs the check first, then the strip', () => {
    const toService = Object.values(t.routers).filter((r) => r.service === 'api');
    expect(toService.length).toBeGreaterThan(0);
    for (const r of toService) expect(r.middlewares.slice(0, 2)).toEqual(['keygate', 'keygate-strip']);
  });

  it('the clock endpoint goes to Keygate itself, and no client header can make it a check; the recipe says when to delete it', () => {
    const time = t.routers['keygate-time']!;
    expect(time.rule).toContain('Path(`/api/v3/time`)');
    expect(t.services[time.service]!.loadBalancer.servers[0]!.url).toBe(fa.address.replace(/\/$/, ''));
    const cleared = t.middlewares[time.middlewares[0]!]!.headers!.customRequestHeaders;
    for (const h of ['X-Forwarded-Method', 'X-Forwarded-Uri', 'X-Original-Method', 'X-Original-URI', 'Authorization'])
      expect(cleared[h]).toBe('');
    expect(headerComment(text)).toContain('timeEndpoint: false');
  });

  it('says what it cannot do: RateLimit fields on allowed answers, empty identity headers', () => {
    expect(headerComment(text)).toMatch(/RateLimit fields on allowed answers/);
    expect(headerComment(text)).toMatch(/empty value/);
  });
});

describe('Envoy recipe (deploy/envoy/forward-auth.yaml): its header lists', () => {
  const text = read('deploy/envoy/forward-auth.yaml');
  // The bootstrap's shape is Envoy's: parse() returns it untyped, and each list is typed where it is read.
  const hcm = parse(text).static_resources.listeners[0].filter_chains[0].filters[0].typed_config;
  const filters = hcm.http_filters as Array<{ name: string; typed_config: Record<string, unknown> }>;
  const names = filters.map((f) => f.name);
  const filter = (name: string) => filters.find((f) => f.name === name)!.typed_config as never;
  const extAuthz = filter('envoy.filters.http.ext_authz') as {
    allowed_headers: { patterns: Array<{ exact: string }> };
    http_service: {
      path_prefix: string;
      authorization_response: Record<string, { patterns: Array<{ exact: string }> }>;
    };
  };
  const exact = (l: { patterns: Array<{ exact: string }> }) => l.patterns.map((p) => p.exact);
  const mutation = filter('envoy.filters.http.header_mutation') as {
    mutations: { request_mutations: Array<{ remove?: string }> };
  };
  const removedBefore = mutation.mutations.request_mutations.flatMap((m) => (m.remove ? [m.remove] : []));
  type Route = {
    match: { prefix?: string; path?: string };
    route: { cluster: string; prefix_rewrite?: string };
    request_headers_to_remove?: string[];
    typed_per_filter_config?: Record<string, { disabled?: boolean }>;
  };
  const routes = hcm.route_config.virtual_hosts[0].routes as Route[];

  it('removes the client copies before the check (header_mutation, then ext_authz, then the router)', () => {
    expect(names.indexOf('envoy.filters.http.header_mutation')).toBeLessThan(
      names.indexOf('envoy.filters.http.ext_authz'),
    );
    expect(names.indexOf('envoy.filters.http.ext_authz')).toBeLessThan(names.indexOf('envoy.filters.http.router'));
  });

  it.each(REMOVED)('the service never gets the client copy of %s', (name) => {
    if (name === 'authorization') {
      // Kept for the check, removed on the way to the service.
      for (const r of routes.filter((x) => x.route.cluster === 'service'))
        expect(r.request_headers_to_remove).toContain('authorization');
    } else expect(removedBefore).toContain(name);
  });

  it('drops every header spelt with "_" (the connection manager), so no folded spelling reaches Keygate or the service', () => {
    expect(hcm.common_http_protocol_options.headers_with_underscores_action).toBe('DROP_HEADER');
  });

  it.each(TO_KEYGATE.filter((n) => n !== 'authorization'))('sends Keygate %s (Authorization is always sent)', (name) =>
    expect(exact(extAuthz.allowed_headers)).toContain(name),
  );

  it.each(REFUSAL)('a refusal reaches the client with %s', (name) =>
    expect(exact(extAuthz.http_service.authorization_response.allowed_client_headers!)).toContain(name),
  );

  it.each(ON_SUCCESS)('an allowed answer gets Keygate %s', (name) =>
    expect(exact(extAuthz.http_service.authorization_response.allowed_client_headers_on_success!)).toContain(name),
  );

  it.each(IDENTITY)('the service gets Keygate %s', (name) =>
    expect(exact(extAuthz.http_service.authorization_response.allowed_upstream_headers!)).toContain(name),
  );

  it('the clock endpoint goes to Keygate itself, unchecked, on the prefixed path; the recipe says when to delete it', () => {
    const time = routes.find((r) => r.match.path === '/api/v3/time')!;
    expect(time.route.cluster).toBe('keygate');
    expect(time.route.prefix_rewrite).toBe(`${extAuthz.http_service.path_prefix}/api/v3/time`);
    expect(time.typed_per_filter_config!['envoy.filters.http.ext_authz']!.disabled).toBe(true);
    for (const h of ['authorization', 'x-original-uri', 'x-forwarded-uri'])
      expect(time.request_headers_to_remove).toContain(h);
    expect(routes.indexOf(time)).toBe(0);
    expect(headerComment(text)).toContain('timeEndpoint: false');
  });
});

describe('ingress-nginx recipe (deploy/kubernetes/forward-auth): its header lists', () => {
  const dir = join(repoRoot, 'deploy/kubernetes/forward-auth');
  const ingress = readManifests(join(dir, 'ingress.yaml'))[0]!;
  const strip = readManifests(join(dir, 'ingress-nginx-headers.yaml'))[0] as Manifest & {
    data: Record<string, string>;
  };
  const copied = lower(
    ingress.metadata.annotations!['nginx.ingress.kubernetes.io/auth-response-headers']!.split(',').map((h) => h.trim()),
  );
  /** The controller sets X-Real-IP itself (from the connection). */
  const CONTROLLER_SETS = ['x-real-ip'];

  it.each(REMOVED)('the service never gets the client copy of %s', (name) => {
    if (IDENTITY.includes(name as (typeof IDENTITY)[number])) expect(copied).toContain(name);
    else if (CONTROLLER_SETS.includes(name)) expect(read('deploy/kubernetes/forward-auth/ingress.yaml')).toBeTruthy();
    else expect(lower(Object.keys(strip.data).filter((k) => strip.data[k] === ''))).toContain(name);
  });
});

describe('Kubernetes forward-auth example (deploy/kubernetes/forward-auth), as kubectl kustomize renders it', () => {
  const dir = join(repoRoot, 'deploy/kubernetes/forward-auth');
  const objects = render(dir);
  const find = (kind: string) => objects.find((m) => m.kind === kind)!;
  type Probe = { httpGet: { path: string; port: string | number } };
  const container = podContainers(find('Deployment'))[0] as {
    env: Array<{ name: string; value?: string }>;
    ports: Array<{ name: string; containerPort: number }>;
    startupProbe?: Probe;
    readinessProbe?: Probe;
    livenessProbe?: Probe;
    lifecycle?: Record<string, { exec?: { command: string[] }; sleep?: { seconds: number } }>;
  };
  const policyText = (find('ConfigMap') as unknown as { data: Record<string, string> }).data['routes.yaml']!;
  const policyFile = join(mkdtempSync(join(tmpdir(), 'keygate-fa-k8s-')), 'routes.yaml');
  writeFileSync(policyFile, policyText);
  // The Secret's files as the kubelet mounts them (redis-url, secret-encryption-key), under a temp dir.
  const secretsDir = mkdtempSync(join(tmpdir(), 'keygate-fa-secrets-'));
  writeFileSync(join(secretsDir, 'redis-url'), 'redis://:password@redis:6379\n');
  writeFileSync(join(secretsDir, 'secret-encryption-key'), `${randomBytes(32).toString('base64')}\n`);
  const mounted = (value: string) =>
    value.startsWith('/run/secrets/keygate/') ? join(secretsDir, value.slice('/run/secrets/keygate/'.length)) : value;
  const env = Object.fromEntries(
    container.env.filter((e) => e.value !== undefined).map((e) => [e.name, mounted(e.value!)]),
  );
  const config = loadConfig({ ...env, KEYGATE_CONFIG: policyFile });

  it('passes secrets as files, never as environment variables', () => {
    expect(container.env.filter((e) => e.value === undefined).map((e) => e.name)).toEqual([]);
    expect(config.redisUrl).toBe('redis://:password@redis:6379');
    expect(config.secretEncryptionKeys!.current).toHaveLength(32);
  });
  const port = (p: string | number) =>
    typeof p === 'number' ? p : container.ports.find((x) => x.name === p)!.containerPort;

  it('every probe asks the admin port, which listens beyond loopback (the kubelet probes the Pod IP)', () => {
    const probes = [container.startupProbe, container.readinessProbe, container.livenessProbe];
    for (const p of probes) expect(port(p!.httpGet.port)).toBe(config.adminPort);
    expect(config.adminHost).not.toMatch(/^(127\.|::1$|localhost$)/);
    expect(container.readinessProbe!.httpGet.path).toBe('/readyz');
  });

  it('every lifecycle hook works on the shipped image: the kubelet sleeps, or the command exists there', () => {
    // The runtime stage is distroless (Dockerfile): node, plus the keygate and env links it copies. No shell, no sleep.
    const dockerfile = read('Dockerfile');
    expect(dockerfile).toContain('FROM ${RUNTIME_IMAGE} AS runtime');
    expect(dockerfile).toContain('gcr.io/distroless/nodejs20');
    const inImage = new Set(['node', '/nodejs/bin/node', 'keygate', '/usr/local/bin/keygate', 'env', '/usr/bin/env']);
    const hooks = Object.values(container.lifecycle ?? {});
    expect(hooks.length).toBeGreaterThan(0);
    for (const h of hooks) {
      if (h.exec) expect(inImage, `hook command ${h.exec.command[0]}`).toContain(h.exec.command[0]);
      else expect(h.sleep!.seconds).toBeGreaterThan(0);
    }
    const grace = (find('Deployment').spec as { template: { spec: { terminationGracePeriodSeconds: number } } })
      .template.spec.terminationGracePeriodSeconds;
    expect(grace * 1000).toBeGreaterThan((hooks[0]!.sleep?.seconds ?? 5) * 1000 + config.limits.shutdownTimeoutMs);
  });

  it('trusts only the Pod CIDR its text names, and the NetworkPolicy admits only the ingress controller to the check port', () => {
    expect(config.mode).toBe('forward-auth');
    const cidrs = config.policy.trustedProxyCidrs;
    expect(cidrs).toHaveLength(1);
    expect(read('deploy/kubernetes/forward-auth/configmap.yaml')).toContain(`replace it with yours`);
    expect(read('deploy/kubernetes/forward-auth/configmap.yaml')).toContain(String(cidrs[0]));
    expect(Number(String(cidrs[0]).split('/')[1])).toBeGreaterThanOrEqual(16);
    type Peer = {
      namespaceSelector?: { matchLabels: Record<string, string> };
      podSelector?: { matchLabels: Record<string, string> };
    };
    const np = find('NetworkPolicy') as Manifest & {
      spec: { policyTypes: string[]; ingress: Array<{ from?: Peer[]; ports: Array<{ port: string | number }> }> };
    };
    expect(np.spec.policyTypes).toContain('Ingress');
    const toCheck = np.spec.ingress.filter((r) => r.ports.some((p) => port(p.port) === config.port));
    expect(toCheck).toHaveLength(1);
    expect(toCheck[0]!.from).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } },
        podSelector: {
          matchLabels: { 'app.kubernetes.io/name': 'ingress-nginx', 'app.kubernetes.io/component': 'controller' },
        },
      },
    ]);
    // Nothing else reaches the check port; the admin port only from the monitoring namespace.
    for (const r of np.spec.ingress.filter((x) => x !== toCheck[0])) {
      expect(r.ports.map((p) => port(p.port))).toEqual([config.adminPort]);
      expect(r.from).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }]);
    }
  });
});
