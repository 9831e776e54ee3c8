import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness/free-port.mjs';
import { waitForRedis } from '../../scripts/harness/redis-server.mjs';
import { loadConfig } from '../../src/config/load-config.js';
import { loadManagementTokens, matchToken } from '../../src/config/management-tokens.js';
import { loadPolicy } from '../../src/policy/load-policy.js';
import { OTEL_SETTING_NAMES } from '../../src/config/read-tracing.js';
import { envNamesInCode, flag, repoRoot } from '../helpers/deploy.js';
import { parseDockerfile } from '../helpers/dockerfile.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import {
  KUBECTL_MISSING,
  kustomization,
  patchFiles,
  podContainers,
  readManifests,
  render,
  type Manifest,
} from '../helpers/kustomize.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { redisServerAvailable } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';
import { serveKeygate, type ServedKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const k8s = join(repoRoot, 'deploy/kubernetes');
const base = join(k8s, 'base');
const overlay = join(k8s, 'overlays/example');

/** kubernetes-models classes by apiVersion/kind: validate() checks the object against the Kubernetes (or CRD) OpenAPI schema. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
};

function validateManifest(m: Manifest): void {
  const Model = MODELS[`${m.apiVersion}/${m.kind}`];
  if (!Model) throw new Error(`no schema for ${m.apiVersion}/${m.kind}`);
  // kubectl kustomize folds a generated Secret's long base64 values over lines; the API server's
  // base64 decoder skips line breaks, the schema's "byte" format does not.
  const data = m.kind === 'Secret' ? (m.data as Record<string, string> | undefined) : undefined;
  const unfolded = data
    ? { ...m, data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.replace(/\s/g, '')])) }
    : m;
  new Model(unfolded as never).validate();
}

/**
 * The example as an operator gets it from a fresh checkout: deploy/kubernetes copied (without any
 * secrets/ this checkout may hold), `sh generate-secrets.sh` run as docs/deploying.md says, then
 * `kubectl kustomize`, exactly what `kubectl apply -k` sends.
 */
function freshExample(): { dir: string; overlay: string; objects: Manifest[]; token: string; scriptOutput: string } {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-k8s-checkout-'));
  cpSync(k8s, join(dir, 'kubernetes'), {
    recursive: true,
    filter: (src) => relative(overlay, src) !== 'secrets',
  });
  const copy = join(dir, 'kubernetes/overlays/example');
  const scriptOutput = execFileSync('sh', [join(copy, 'generate-secrets.sh')], {
    encoding: 'utf8',
    env: { ...process.env, GITHUB_SCANNING_KEYS: githubKeysStandIn() },
  });
  const printed = /^\s+(kgm_[A-Za-z0-9_-]{43})$/m.exec(scriptOutput);
  if (!printed) throw new Error(`generate-secrets.sh printed no management token:\n${scriptOutput}`);
  return { dir, overlay: copy, objects: render(copy), token: printed[1]!, scriptOutput };
}

/**
 * GitHub's secret scanning keys as api.github.com answers them, with a P-256 key of this run standing in
 * for GitHub's (the suite has no network): generate-secrets.sh copies it from GITHUB_SCANNING_KEYS.
 */
function githubKeysStandIn(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'keygate-github-keys-')), 'keys.json');
  const key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey.export({ type: 'spki', format: 'pem' });
  writeFileSync(
    file,
    JSON.stringify({
      public_keys: [
        { key_identifier: 'bcb53661c06b4728e59d897fb6165d5c9cda0fd9cdf9d09ead458168deb7518c', key, is_current: true },
      ],
    }),
  );
  return file;
}

type Env = {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; configMapKeyRef?: unknown };
};
type Container = {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  ports?: Array<{ name: string; containerPort: number }>;
  env?: Env[];
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
  readinessProbe?: { httpGet?: { path: string; port: string | number }; exec?: { command: string[] } };
  livenessProbe?: { httpGet?: { path: string; port: string | number }; tcpSocket?: { port: string | number } };
  startupProbe?: { httpGet: { path: string; port: string | number } };
  lifecycle?: { preStop?: { sleep?: { seconds: number }; exec?: { command: string[] } } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { drop?: string[] };
  };
};
type Volume = {
  name: string;
  configMap?: { name: string };
  secret?: { secretName: string; defaultMode?: number };
};
type PodSpec = {
  containers: Container[];
  volumes?: Volume[];
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; runAsGroup?: number; fsGroup?: number };
  terminationGracePeriodSeconds?: number;
  automountServiceAccountToken?: boolean;
  serviceAccountName?: string;
};
type PodTemplate = {
  metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
  spec: PodSpec;
};
type Rule = {
  from?: Array<{
    namespaceSelector?: { matchLabels: Record<string, string> };
    podSelector?: unknown;
    ipBlock?: unknown;
  }>;
  ports: Array<{ port: string | number; protocol: string }>;
};
type Policy = Manifest & {
  spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: Rule[] };
};

describe('Kubernetes manifests', () => {
  const files = readdirSync(k8s, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile() && d.name.endsWith('.yaml') && d.name !== 'kustomization.yaml')
    .map((d) => join(d.parentPath, d.name))
    // What generate-secrets.sh writes in a checkout that ran it is not a manifest.
    .filter((f) => !relative(overlay, f).startsWith('secrets/'));
  const patches = new Set([...patchFiles(base), ...patchFiles(overlay)]);

  it.each(files.filter((f) => !patches.has(f)).map((f) => [relative(k8s, f), f]))(
    '%s is valid against the Kubernetes schemas',
    (_name, file) => {
      const docs = readManifests(file);
      expect(docs.length).toBeGreaterThan(0);
      for (const m of docs) validateManifest(m);
    },
  );

  it('base, and the example on a fresh checkout after generate-secrets.sh, render to valid objects', () => {
    for (const objects of [render(base), freshExample().objects]) {
      expect(objects.length).toBeGreaterThan(0);
      for (const m of objects) validateManifest(m);
    }
  });

  it.each([
    ['a string replica count', (d: Manifest) => ((d.spec as { replicas: unknown }).replicas = 'three')],
    [
      'a non-boolean readOnlyRootFilesystem',
      (d: Manifest) =>
        ((
          (d.spec as { template: { spec: PodSpec } }).template.spec.containers[1]!.securityContext as Record<
            string,
            unknown
          >
        ).readOnlyRootFilesystem = 'yes'),
    ],
    [
      'a probe without a port',
      (d: Manifest) =>
        delete (
          (d.spec as { template: { spec: PodSpec } }).template.spec.containers[1]!.readinessProbe!.httpGet as Partial<{
            port: unknown;
          }>
        ).port,
    ],
    [
      'a container without a name',
      (d: Manifest) =>
        delete ((d.spec as { template: { spec: PodSpec } }).template.spec.containers[0] as Partial<Container>).name,
    ],
    [
      'a secret volume mode that is not a number',
      (d: Manifest) =>
        ((d.spec as { template: { spec: PodSpec } }).template.spec.volumes!.find((v) => v.secret)!.secret!.defaultMode =
          '0440' as never),
    ],
  ])('the validator refuses %s', (_name, breakIt) => {
    const d = structuredClone(readManifests(join(base, 'deployment.yaml'))[0]!);
    breakIt(d);
    expect(() => validateManifest(d)).toThrow();
  });

  it('the validator refuses an HPA without maxReplicas', () => {
    const hpa = structuredClone(readManifests(join(base, 'hpa.yaml'))[0]!);
    delete (hpa.spec as Partial<{ maxReplicas: number }>).maxReplicas;
    expect(() => validateManifest(hpa)).toThrow();
  });

  it('renders with the real kubectl kustomize, and the overlay builds on the base', () => {
    expect(kustomization(overlay).resources).toContain('../../base');
    // Every object of the base comes out of the overlay too (kubectl kustomize resolved ../../base).
    const key = (m: Manifest) => `${m.kind}/${m.metadata.name}`;
    const fromOverlay = new Set(freshExample().objects.map(key));
    for (const m of render(base)) expect(fromOverlay.has(key(m)), key(m)).toBe(true);
    // A broken kustomization is an error, never a partial render.
    const broken = mkdtempSync(join(tmpdir(), 'keygate-kustomize-'));
    writeFileSync(
      join(broken, 'kustomization.yaml'),
      'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - missing.yaml\n',
    );
    expect(() => render(broken)).toThrow(/kubectl kustomize .* failed/);
  });

  it('fails, naming what to install, when kubectl is missing (never skips)', () => {
    const path = process.env.PATH;
    process.env.PATH = mkdtempSync(join(tmpdir(), 'keygate-empty-path-'));
    try {
      expect(() => render(base)).toThrow(KUBECTL_MISSING);
    } finally {
      process.env.PATH = path;
    }
  });
});

describe('the example ships no secret: generate-secrets.sh makes them', () => {
  it('has no Secret manifest and no placeholder, and git ignores what the script writes', () => {
    const shipped = readdirSync(k8s, { recursive: true, withFileTypes: true })
      .filter((d) => d.isFile() && !relative(overlay, join(d.parentPath, d.name)).startsWith('secrets/'))
      .map((d) => join(d.parentPath, d.name));
    for (const f of shipped) {
      const text = readFileSync(f, 'utf8');
      expect(text, relative(repoRoot, f)).not.toMatch(/change-?me/i);
      if (f.endsWith('.yaml'))
        for (const m of readManifests(f)) expect(m.kind, relative(repoRoot, f)).not.toBe('Secret');
    }
    const ignored = spawnSync('git', ['check-ignore', '-q', 'deploy/kubernetes/overlays/example/secrets/redis-url'], {
      cwd: repoRoot,
    });
    expect(ignored.status, 'secrets/ is in the overlay .gitignore').toBe(0);
  });

  it('before the script has run, the overlay does not build, and the error names secrets/', () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-k8s-unprepared-'));
    cpSync(k8s, dir, { recursive: true, filter: (src) => relative(overlay, src) !== 'secrets' });
    // The error docs/deploying.md tells the operator to read as "run generate-secrets.sh first".
    expect(() => render(join(dir, 'overlays/example'))).toThrow(
      /overlays\/example\/secrets: no such file or directory/,
    );
  });

  it('writes random values (two checkouts share none), files only its owner reads, and refuses to overwrite', () => {
    const a = freshExample();
    const b = freshExample();
    const files = readdirSync(join(a.overlay, 'secrets')).sort();
    expect(files).toEqual([
      'github-scanning-keys.json',
      'management-tokens.yaml',
      'redis-auth.conf',
      'redis-password',
      'redis-url',
      'secret-encryption-key',
      'webhook-secret',
    ]);
    for (const f of files) {
      // GitHub's public keys are the same for everyone (here: each checkout's own stand-in).
      if (f !== 'github-scanning-keys.json')
        expect(readFileSync(join(a.overlay, 'secrets', f), 'utf8'), f).not.toBe(
          readFileSync(join(b.overlay, 'secrets', f), 'utf8'),
        );
      expect(
        spawnSync('stat', ['-c', '%a', join(a.overlay, 'secrets', f)], { encoding: 'utf8' }).stdout.trim(),
        f,
      ).toBe('600');
    }
    expect(a.token).not.toBe(b.token);
    const again = spawnSync('sh', [join(a.overlay, 'generate-secrets.sh')], { encoding: 'utf8' });
    expect([again.status, again.stderr]).toEqual([1, expect.stringContaining('not overwriting')]);
    rmSync(a.dir, { recursive: true, force: true });
    rmSync(b.dir, { recursive: true, force: true });
  });
});

describe('the example overlay matches what the code reads', () => {
  const example = freshExample();
  const objects = example.objects;
  const find = (kind: string, name: string) => {
    const m = objects.find((o) => o.kind === kind && o.metadata.name === name);
    if (!m) throw new Error(`no ${kind}/${name}`);
    return m;
  };
  /** A generated Secret, by the name before kustomize's content-hash suffix. */
  const generatedSecret = (name: string) => {
    const m = objects.find((o) => o.kind === 'Secret' && new RegExp(`^${name}-[a-z0-9]{10}$`).test(o.metadata.name));
    if (!m) throw new Error(`no generated Secret ${name}`);
    return m as Manifest & { data: Record<string, string> };
  };
  const deployment = find('Deployment', 'keygate');
  const pod = (deployment.spec as { template: PodTemplate }).template;
  const redisSet = find('StatefulSet', 'redis');
  const redisPod = (redisSet.spec as { template: PodTemplate }).template;
  const container = (name: string) => pod.spec.containers.find((c) => c.name === name)!;
  const keygate = container('keygate');
  const upstream = container('upstream');
  const redis = redisPod.spec.containers.find((c) => c.name === 'redis')!;
  const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
    Object.entries(selector).every(([k, v]) => labels[k] === v);
  const portNumber = (c: Container, port: string | number) =>
    typeof port === 'number' ? port : c.ports!.find((p) => p.name === port)!.containerPort;

  /**
   * A container's mounts as the kubelet would lay them out, under a temp dir: ConfigMap and Secret
   * volumes hold their files, any other volume is an empty directory. `at` maps a path in the
   * container to that dir.
   */
  function podFilesystem(spec: PodSpec, c: Container): { root: string; at: (path: string) => string } {
    const root = mkdtempSync(join(tmpdir(), 'keygate-pod-'));
    const mounts = c.volumeMounts ?? [];
    for (const mount of mounts) {
      const dir = join(root, mount.mountPath);
      mkdirSync(dir, { recursive: true });
      const volume = spec.volumes?.find((v) => v.name === mount.name);
      if (volume?.configMap) {
        const cm = find('ConfigMap', volume.configMap.name) as Manifest & { data: Record<string, string> };
        for (const [file, content] of Object.entries(cm.data)) writeFileSync(join(dir, file), content);
      } else if (volume?.secret) {
        const secret = find('Secret', volume.secret.secretName) as Manifest & { data: Record<string, string> };
        for (const [file, content] of Object.entries(secret.data))
          writeFileSync(join(dir, file), Buffer.from(content, 'base64'));
      }
    }
    const at = (path: string) =>
      mounts.some((m) => path === m.mountPath || path.startsWith(`${m.mountPath}/`)) ? join(root, path) : path;
    return { root, at };
  }

  /** Keygate's environment as the kubelet would build it, with its mounts laid out in a temp dir. */
  function keygateEnv(): Record<string, string> {
    const fs = podFilesystem(pod.spec, keygate);
    const env: Record<string, string> = {};
    for (const e of keygate.env!) {
      if (e.value === undefined) throw new Error(`${e.name}: not a plain value (secrets are files here)`);
      env[e.name] = fs.at(e.value);
    }
    return env;
  }

  it('sets only variables the code reads, all documented, and passes every secret as a file', () => {
    const known = envNamesInCode();
    const configDoc = readFileSync(join(repoRoot, 'docs/reference/configuration.md'), 'utf8');
    for (const e of keygate.env!) {
      // The standard OpenTelemetry variables are the platform's names, read by src/config/read-tracing.ts.
      const read = e.name.startsWith('OTEL_') ? OTEL_SETTING_NAMES.includes(e.name) : known.has(e.name);
      expect(read, `${e.name} is read by the code`).toBe(true);
      expect(configDoc, `${e.name} is documented`).toContain(`\`${e.name}\``);
      // Never an environment variable from a Secret: `kubectl describe` and /proc/<pid>/environ would show it.
      expect(e.valueFrom, e.name).toBeUndefined();
    }
    const names = keygate.env!.map((e) => e.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'KEYGATE_REDIS_URL_FILE',
        'KEYGATE_SECRET_ENCRYPTION_KEY_FILE',
        'KEYGATE_MANAGEMENT_TOKENS_FILE',
      ]),
    );
    for (const secret of ['KEYGATE_REDIS_URL', 'KEYGATE_SECRET_ENCRYPTION_KEY', 'KEYGATE_REDIS_PASSWORD'])
      expect(names, secret).not.toContain(secret);
  });

  it('mounts the generated Secret read-only, readable by Keygate (group 1000) and by no one else', () => {
    const volume = pod.spec.volumes!.find((v) => v.secret)!;
    expect(volume.secret!.secretName).toBe(generatedSecret('keygate-secrets').metadata.name);
    expect(volume.secret!.defaultMode).toBe(0o440);
    expect(pod.spec.securityContext!.fsGroup).toBe(pod.spec.securityContext!.runAsGroup);
    expect(keygate.volumeMounts!.find((m) => m.name === volume.name)!.readOnly).toBe(true);
    // The upstream container (your service) does not see Keygate's secrets.
    expect(upstream.volumeMounts ?? []).toEqual([]);
    expect(Object.keys(generatedSecret('keygate-secrets').data).sort()).toEqual([
      'management-tokens.yaml',
      'redis-url',
      'secret-encryption-key',
      'webhook-secret',
    ]);
  });

  it('loads: the encryption key is 32 random bytes, the policy loads, the printed token is a write token', () => {
    const config = loadConfig(keygateEnv());
    expect(config.secretEncryptionKeys!.current).toHaveLength(32);
    expect(config.redis?.mode).toBe('standalone');
    expect(config.redisUrl).toMatch(/^redis:\/\/:[0-9a-f]{64}@redis:6379$/);
    expect(config.configFile).toMatch(/\/etc\/keygate\/routes\.yaml$/);
    const problems: string[] = [];
    loadPolicy(config.configFile, problems);
    expect(problems).toEqual([]);
    const tokens = loadManagementTokens(config.management!.tokensFile);
    expect(matchToken(tokens, example.token)).toMatchObject({ name: 'operator', access: 'write' });
    expect(matchToken(tokens, `${example.token}x`)).toBeUndefined();
  });

  it('runs the upstream on 127.0.0.1 at the port Keygate forwards to, with no port exposed', () => {
    const config = loadConfig(keygateEnv());
    expect(['127.0.0.1', 'localhost']).toContain(config.upstream!.hostname);
    expect(upstream.args![0]).toBe('demo-upstream');
    expect(flag(upstream.args!, '--host')).toBe('127.0.0.1');
    expect(flag(upstream.args!, '--port')).toBe(config.upstream!.port);
    expect(upstream.ports).toBeUndefined();
    expect(keygate.args).toEqual(['serve']);
  });

  it('names the proxy, admin and management ports as the config has them, and each Service targets its own', () => {
    const config = loadConfig(keygateEnv());
    expect(portNumber(keygate, 'http')).toBe(config.port);
    expect(portNumber(keygate, 'admin')).toBe(config.adminPort);
    expect(portNumber(keygate, 'management')).toBe(config.management!.port);
    // Keygate's default is loopback; probes, Prometheus and the settings backend come in on the Pod IP.
    expect(loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:1' }).adminHost).toBe('127.0.0.1');
    expect(config.adminHost).toBe('0.0.0.0');
    expect(config.management!.host).toBe('0.0.0.0');
    type Svc = Manifest & {
      spec: { selector: Record<string, string>; ports: Array<{ name: string; targetPort: string }> };
    };
    for (const [name, port] of [
      ['keygate', config.port],
      ['keygate-metrics', config.adminPort],
      ['keygate-management', config.management!.port],
    ] as const) {
      const svc = find('Service', name) as Svc;
      expect(matches(svc.spec.selector, pod.metadata.labels), name).toBe(true);
      expect(
        svc.spec.ports.map((p) => portNumber(keygate, p.targetPort)),
        name,
      ).toEqual([port]);
    }
  });

  describe('probes and scraping, against a running Keygate', () => {
    let gate: RunningKeygate;
    beforeAll(async () => {
      // /readyz also wants at least one key loaded (no_keys otherwise).
      gate = await startKeygate({ upstream: 'http://127.0.0.1:9', keys: [makeKey({ apiKey: 'probe' })] });
    });
    afterAll(() => gate?.close());

    it('probe the admin port, on paths the admin server answers 200', async () => {
      const config = loadConfig(keygateEnv());
      const probes = {
        readiness: keygate.readinessProbe!.httpGet!,
        liveness: keygate.livenessProbe!.httpGet!,
        startup: keygate.startupProbe!.httpGet,
      };
      expect(probes.readiness.path).toBe('/readyz');
      expect(probes.liveness.path).toBe('/healthz');
      for (const [kind, probe] of Object.entries(probes)) {
        expect(portNumber(keygate, probe.port), kind).toBe(config.adminPort);
        expect((await send(gate.adminUrl, probe.path)).status, kind).toBe(200);
      }
      // The proxy port does not answer them: admin endpoints never share it.
      expect((await send(gate.url, '/healthz')).status).toBe(404);
    });

    it('annotate the Pod for Prometheus, and the ServiceMonitor example selects the metrics Service', async () => {
      const config = loadConfig(keygateEnv());
      const a = pod.metadata.annotations!;
      expect(a['prometheus.io/scrape']).toBe('true');
      expect(Number(a['prometheus.io/port'])).toBe(config.adminPort);
      expect((await send(gate.adminUrl, a['prometheus.io/path']!)).body).toContain('keygate_requests_total');
      const [monitor] = readManifests(join(overlay, 'servicemonitor.yaml')) as Array<
        Manifest & {
          spec: { selector: { matchLabels: Record<string, string> }; endpoints: Array<{ port: string; path: string }> };
        }
      >;
      const metricsSvc = objects.filter(
        (o) => o.kind === 'Service' && matches(monitor!.spec.selector.matchLabels, o.metadata.labels ?? {}),
      ) as Array<Manifest & { spec: { ports: Array<{ name: string }> } }>;
      expect(metricsSvc.map((s) => s.metadata.name)).toEqual(['keygate-metrics']);
      for (const ep of monitor!.spec.endpoints) {
        expect(metricsSvc[0]!.spec.ports.map((p) => p.name)).toContain(ep.port);
        expect(ep.path).toBe(a['prometheus.io/path']);
      }
    });
  });

  it('locks every container down: non-root, read-only root filesystem, no capabilities, resources set', () => {
    const dockerUser = parseDockerfile(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'))
      .stages.at(-1)!
      .instructions.filter((i) => i.keyword === 'USER')
      .at(-1)!
      .args.split(':')
      .map(Number);
    expect(pod.spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: dockerUser[0],
      runAsGroup: dockerUser[1],
    });
    expect(pod.spec.automountServiceAccountToken).toBe(false);
    expect(find('ServiceAccount', pod.spec.serviceAccountName!)).toBeDefined();
    expect(redisPod.spec.securityContext).toMatchObject({ runAsNonRoot: true });
    expect(redisPod.spec.automountServiceAccountToken).toBe(false);
    for (const c of [...pod.spec.containers, ...redisPod.spec.containers]) {
      expect(c.securityContext, c.name).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      for (const r of ['cpu', 'memory']) {
        expect(c.resources?.requests?.[r], `${c.name} requests ${r}`).toBeDefined();
        expect(c.resources?.limits?.[r], `${c.name} limits ${r}`).toBeDefined();
      }
    }
  });

  it('gives the Pod time for preStop plus the drain deadline before SIGKILL', () => {
    const config = loadConfig(keygateEnv());
    // The kubelet's own sleep: the image has no shell and no sleep binary (the exec fallback is run by test/container/image.test.ts).
    const preStop = keygate.lifecycle!.preStop!;
    expect(preStop.exec).toBeUndefined();
    expect(preStop.sleep!.seconds).toBeGreaterThan(0);
    expect(pod.spec.terminationGracePeriodSeconds! * 1000).toBeGreaterThan(
      preStop.sleep!.seconds * 1000 + config.limits.shutdownTimeoutMs,
    );
  });

  it('carries the standard app.kubernetes.io labels on every object and Pod, without touching selectors', () => {
    const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
    const standard = {
      'app.kubernetes.io/part-of': 'keygate',
      'app.kubernetes.io/managed-by': 'kustomize',
      'app.kubernetes.io/instance': 'keygate-example',
    };
    // Keygate's objects are named keygate; the example's Redis is named redis.
    const isRedis = (o: Manifest) =>
      o.metadata.name === 'redis' ||
      o.metadata.name === 'redis-headless' ||
      o.metadata.name.startsWith('redis-secrets-');
    for (const o of objects)
      expect(o.metadata.labels, `${o.kind}/${o.metadata.name}`).toMatchObject({
        ...standard,
        'app.kubernetes.io/name': isRedis(o) ? 'redis' : 'keygate',
      });
    expect(
      objects
        .filter(isRedis)
        .map((o) => o.kind)
        .sort(),
    ).toEqual(['NetworkPolicy', 'Secret', 'Service', 'Service', 'StatefulSet']);
    // The base's objects also say which Keygate release they belong to (the overlay's are the operator's).
    const fromBase = new Set(render(base).map((m) => `${m.kind}/${m.metadata.name}`));
    for (const o of objects.filter((m) => fromBase.has(`${m.kind}/${m.metadata.name}`)))
      expect(o.metadata.labels!['app.kubernetes.io/version'], `${o.kind}/${o.metadata.name}`).toBe(version);
    expect(pod.metadata.labels).toMatchObject({
      ...standard,
      'app.kubernetes.io/name': 'keygate',
      'app.kubernetes.io/version': version,
      'app.kubernetes.io/component': 'auth-proxy',
    });
    // The version label is the image that runs.
    for (const c of podContainers(deployment)) expect(String(c.image).split(':').at(-1)).toBe(version);
    // A Deployment's selector is immutable: it stays the one label it always had.
    expect((deployment.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'keygate',
    });
  });

  it('admits the proxy port from anywhere, the admin port from monitoring, the management port from the settings backend', () => {
    const config = loadConfig(keygateEnv());
    const policy = find('NetworkPolicy', 'keygate') as Policy;
    expect(matches(policy.spec.podSelector.matchLabels, pod.metadata.labels)).toBe(true);
    expect(policy.spec.policyTypes).toContain('Ingress');
    const admitted = policy.spec.ingress.map((r) => ({
      ports: r.ports.map((p) => portNumber(keygate, p.port)),
      from: r.from,
    }));
    expect(admitted).toEqual([
      { ports: [config.port], from: undefined },
      {
        ports: [config.adminPort],
        from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
      },
      {
        ports: [config.management!.port],
        from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'settings-backend' } } }],
      },
    ]);
    for (const r of policy.spec.ingress) for (const p of r.ports) expect(p.protocol).toBe('TCP');
    // What the client Service sends to is admitted; the upstream's port is not.
    const svc = find('Service', 'keygate') as Manifest & { spec: { ports: Array<{ targetPort: string }> } };
    for (const p of svc.spec.ports) expect(admitted[0]!.ports).toContain(portNumber(keygate, p.targetPort));
    expect(admitted.flatMap((a) => a.ports)).not.toContain(Number(config.upstream!.port));
  });

  it('scales on CPU with an HPA that owns the replica count, above what the PodDisruptionBudget keeps', () => {
    const hpa = find('HorizontalPodAutoscaler', 'keygate') as Manifest & {
      spec: {
        scaleTargetRef: { apiVersion: string; kind: string; name: string };
        minReplicas: number;
        maxReplicas: number;
        metrics: Array<{
          type: string;
          resource?: { name: string; target: { type: string; averageUtilization: number } };
        }>;
      };
    };
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'keygate' });
    expect(hpa.spec.metrics).toEqual([
      { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } } },
    ]);
    expect(hpa.spec.minReplicas).toBe(3);
    expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
    // A count in the Deployment would reset the HPA's on every `kubectl apply`.
    expect((deployment.spec as { replicas?: number }).replicas).toBeUndefined();
    // CPU utilization is relative to requests: every container must have one.
    for (const c of pod.spec.containers) expect(c.resources!.requests!.cpu, c.name).toBeDefined();
    const pdb = find('PodDisruptionBudget', 'keygate') as Manifest & {
      spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } };
    };
    expect(matches(pdb.spec.selector.matchLabels, pod.metadata.labels)).toBe(true);
    expect(pdb.spec.minAvailable).toBeLessThan(hpa.spec.minReplicas);
    expect((readManifests(join(base, 'hpa.yaml'))[0]!.spec as { minReplicas: number }).minReplicas).toBeGreaterThan(
      pdb.spec.minAvailable,
    );
  });

  it('applies the overlay: its own namespace, image, and the patched container', () => {
    const ns = find('Namespace', 'keygate-example');
    expect(ns.metadata.namespace).toBeUndefined();
    for (const o of objects.filter((m) => m.kind !== 'Namespace'))
      expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe('keygate-example');
    // The image docs/deploying.md builds (docker build -t keygate:0.2.0 .).
    for (const c of podContainers(deployment)) expect(c.image).toBe('keygate:0.2.0');
    expect(keygate.env!.map((e) => e.name)).toContain('KEYGATE_LOG_LEVEL');
    expect(keygate.env!.map((e) => e.name)).toContain('KEYGATE_UPSTREAM');
    expect(keygate.resources!.limits!.memory).toBe('384Mi');
    expect(upstream.resources!.limits!.memory).toBe('128Mi');
    // The base alone leaves the Secret and Redis to the overlay.
    expect(render(base).filter((o) => o.kind === 'Secret' || o.kind === 'StatefulSet')).toEqual([]);
  });

  it("admits only Keygate's Pods to the example's Redis", () => {
    const policy = find('NetworkPolicy', 'redis') as Policy;
    expect(matches(policy.spec.podSelector.matchLabels, redisPod.metadata.labels)).toBe(true);
    expect(matches(policy.spec.podSelector.matchLabels, pod.metadata.labels)).toBe(false);
    expect(policy.spec.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'keygate' } } }],
        ports: [{ port: 'redis', protocol: 'TCP' }],
      },
    ]);
    const svc = find('Service', 'redis') as Manifest & {
      spec: { selector: Record<string, string>; ports: Array<{ port: number; targetPort: string }> };
    };
    expect(matches(svc.spec.selector, redisPod.metadata.labels)).toBe(true);
    // Keygate's redis-url names this Service and port.
    const url = new URL(loadConfig(keygateEnv()).redisUrl!);
    expect([url.hostname, Number(url.port)]).toEqual([svc.metadata.name, svc.spec.ports[0]!.port]);
    expect(portNumber(redis, svc.spec.ports[0]!.targetPort)).toBe(6379);
    // The StatefulSet's governing Service is headless and selects its Pods.
    const governing = find('Service', (redisSet.spec as { serviceName: string }).serviceName) as Manifest & {
      spec: { clusterIP?: string; selector: Record<string, string> };
    };
    expect(governing.spec.clusterIP).toBe('None');
    expect(matches(governing.spec.selector, redisPod.metadata.labels)).toBe(true);
  });

  it("publishes only the secret scanning path, on the scanning port alone, with GitHub's keys from a ConfigMap", () => {
    const config = loadConfig(keygateEnv());
    expect(config.scanning).toMatchObject({ host: '0.0.0.0' });
    expect(portNumber(keygate, 'scanning')).toBe(config.scanning!.port);
    expect(config.management!.githubScanningKeysFile).toBeUndefined();
    const ingresses = objects.filter((o) => o.kind === 'Ingress');
    expect(ingresses.map((i) => i.metadata.name)).toEqual(['keygate-scanning']);
    type Paths = Array<{
      path: string;
      pathType: string;
      backend: { service: { name: string; port: { name: string } } };
    }>;
    const rules = (ingresses[0]!.spec as { rules: Array<{ http: { paths: Paths } }> }).rules;
    const paths = rules.flatMap((r) => r.http.paths);
    expect(paths.map((p) => [p.path, p.pathType])).toEqual([['/v1/secret-scanning/github', 'Exact']]);
    const svc = find('Service', paths[0]!.backend.service.name) as Manifest & {
      spec: { selector: Record<string, string>; ports: Array<{ name: string; targetPort: string }> };
    };
    expect(matches(svc.spec.selector, pod.metadata.labels)).toBe(true);
    expect(svc.spec.ports.map((p) => portNumber(keygate, p.targetPort))).toEqual([config.scanning!.port]);
    // GitHub's keys: a generated ConfigMap, mounted where the setting points.
    const volume = pod.spec.volumes!.find((v) => v.configMap?.name.startsWith('github-scanning-keys'))!;
    expect(keygate.volumeMounts!.find((m) => m.name === volume.name)!.mountPath).toBe('/etc/keygate-github');
    // The scanning port is admitted from the ingress controller's namespace only.
    const policy = find('NetworkPolicy', 'keygate-scanning') as Policy;
    expect(policy.spec.ingress.map((r) => r.ports.map((p) => portNumber(keygate, p.port)))).toEqual([
      [config.scanning!.port],
    ]);
    expect(policy.spec.ingress[0]!.from).toEqual([
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
    ]);
  });

  it('turns on webhooks (the secret a file of the generated Secret) and tracing, and lets Keygate reach them, Redis and DNS', () => {
    const config = loadConfig(keygateEnv());
    expect(config.webhook?.url.protocol).toBe('https:');
    expect(config.tracing).toBeDefined();
    expect(keygate.env!.find((e) => e.name === 'KEYGATE_WEBHOOK_SECRET_FILE')!.value).toBe(
      '/run/secrets/keygate/webhook-secret',
    );
    const egress = find('NetworkPolicy', 'keygate-egress') as Manifest & {
      spec: { policyTypes: string[]; egress: Array<{ ports: Array<{ port: number; protocol: string }> }> };
    };
    expect(egress.spec.policyTypes).toEqual(['Egress']);
    const ports = egress.spec.egress.flatMap((r) => r.ports.map((p) => `${p.port}/${p.protocol}`));
    const otlp = new URL(keygate.env!.find((e) => e.name === 'OTEL_EXPORTER_OTLP_ENDPOINT')!.value!);
    for (const needed of ['53/UDP', '53/TCP', '6379/TCP', `${otlp.port}/TCP`, '443/TCP'])
      expect(ports, needed).toContain(needed);
  });

  describe("the example's Redis and Keygate, run here with the rendered configuration", () => {
    let redisProc: ChildProcess | undefined;
    let redisUrl: string;
    let probe: (command: string[]) => { status: number | null; output: string };
    let served: ServedKeygate | undefined;
    let upstreamServer: RecordingUpstream | undefined;
    let managementPort: number;

    beforeAll(async () => {
      if (!redisServerAvailable()) throw new Error('redis-server is not on PATH: apt-get install -y redis-server');
      // Redis as the StatefulSet starts it (its command and args, mounts laid out here), on a free
      // loopback port: the cluster's Service name and port 6379 are what DNS would give in the Pod.
      const fs = podFilesystem(redisPod.spec, redis);
      const port = await freePort();
      const argv = [
        ...redis.command!.slice(1),
        ...redis.args!.map(fs.at),
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
      ];
      expect(redis.command![0]).toBe('redis-server');
      redisProc = spawn('redis-server', argv, { stdio: 'ignore' });
      const password = readFileSync(fs.at('/run/secrets/redis/password'), 'utf8').trim();
      redisUrl = `redis://:${password}@127.0.0.1:${port}`;
      await waitForRedis(redisUrl, guard(10_000));
      // The probe's command with the Pod's secret path mapped to the files laid out here.
      probe = (command) => {
        const r = spawnSync(
          command[0]!,
          command.slice(1).map((a) => a.replaceAll('/run/secrets/redis', fs.at('/run/secrets/redis'))),
          {
            encoding: 'utf8',
          },
        );
        return { status: r.status, output: `${r.stdout}${r.stderr}` };
      };
      upstreamServer = await startRecordingUpstream();
      managementPort = await freePort();
      const env = keygateEnv();
      // Keygate's redis-url names the Service "redis"; here it is this loopback port.
      writeFileSync(
        env.KEYGATE_REDIS_URL_FILE!,
        readFileSync(env.KEYGATE_REDIS_URL_FILE!, 'utf8').replace('@redis:6379', `@127.0.0.1:${port}`),
      );
      // The cluster's names (the webhook receiver, the OTLP collector) resolve nowhere here: those are left out.
      for (const name of Object.keys(env))
        if (name.startsWith('OTEL_') || name.startsWith('KEYGATE_WEBHOOK_')) delete env[name];
      served = await serveKeygate({
        ...env,
        KEYGATE_SCANNING_PORT: String(await freePort()),
        KEYGATE_SCANNING_HOST: '127.0.0.1',
        KEYGATE_UPSTREAM: upstreamServer.url,
        KEYGATE_MANAGEMENT_PORT: String(managementPort),
        KEYGATE_MANAGEMENT_HOST: '127.0.0.1',
        KEYGATE_ADMIN_HOST: '127.0.0.1',
      });
    }, guard(60_000));
    afterAll(async () => {
      await served?.stop();
      await upstreamServer?.close();
      redisProc?.kill('SIGKILL');
    });

    it('Redis keeps its data (appendonly), refuses to evict (noeviction, with a memory bound) and wants the password', async () => {
      const c = new Redis(redisUrl);
      try {
        expect(await c.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
        expect(await c.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
        const [, maxmemory] = (await c.config('GET', 'maxmemory')) as [string, string];
        expect(Number(maxmemory)).toBeGreaterThan(0);
        // Below the container's memory limit: Redis refuses writes before the kubelet kills it.
        expect(Number(maxmemory)).toBeLessThan(256 * 1024 * 1024);
        expect(redis.resources!.limits!.memory).toBe('256Mi');
      } finally {
        c.disconnect();
      }
      const anonymous = spawnSync('redis-cli', ['-p', new URL(redisUrl).port, 'get', 'x'], { encoding: 'utf8' });
      expect(anonymous.stdout).toMatch(/^NOAUTH/);
    });

    it("Redis's readiness probe passes with the password file, and fails without it", () => {
      const command = redis.readinessProbe!.exec!.command;
      const port = new URL(redisUrl).port;
      // The probe's own text, with redis-cli pointed at this port and the mounts laid out here.
      const here = (cmd: string[]) => cmd.map((a) => a.replace('redis-cli ping', `redis-cli -p ${port} ping`));
      expect(probe(here(command)).status).toBe(0);
      const withoutPassword = command.map((a) => a.replace('/run/secrets/redis/password', '/nonexistent'));
      expect(probe(here(withoutPassword)).status).not.toBe(0);
    });

    it('Keygate starts on it with the files the Secret holds: the printed token creates a key, which signs a request that passes', async () => {
      const m = `http://127.0.0.1:${managementPort}`;
      const created = await fetch(`${m}/v1/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${example.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ scopes: ['accounts:read'] }),
      });
      expect(created.status).toBe(201);
      const key = (await created.json()) as { apiKey: string; apiSecret: string };
      await expect
        .poll(async () => (await send(served!.adminUrl, '/readyz')).status, { timeout: guard(10_000) })
        .toBe(200);
      const ok = await send(served!.url, ACCOUNTS_PATH, { headers: bearer(token(key.apiKey, key.apiSecret)) });
      expect(ok.status).toBe(200);
      expect(upstreamServer!.received.at(-1)?.headers['x-api-key-id']).toBeDefined();
      // The secret is sealed with the generated encryption key: Redis never holds it in plain form.
      const raw = new Redis(redisUrl);
      const record = await raw.hget(`keygate:{keystore}:key:${key.apiKey}`, 'json');
      raw.disconnect();
      expect(record).toContain(key.apiKey);
      expect(record).not.toContain(key.apiSecret);
    });
  });
});
