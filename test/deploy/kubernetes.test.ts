import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { loadPolicy } from '../../src/policy/load-policy.js';
import { envNamesInCode, flag, repoRoot } from '../helpers/deploy.js';
import { parseDockerfile } from '../helpers/dockerfile.js';
import { send } from '../helpers/http.js';
import { makeKey, startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import {
  KUBECTL_MISSING,
  kustomization,
  patchFiles,
  podContainers,
  readManifests,
  render,
  type Manifest,
} from '../helpers/kustomize.js';

const k8s = join(repoRoot, 'deploy/kubernetes');
const base = join(k8s, 'base');
const overlay = join(k8s, 'overlays/example');

/** kubernetes-models classes by apiVersion/kind: validate() checks the object against the Kubernetes (or CRD) OpenAPI schema. */
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'networking.k8s.io/v1/Ingress': Ingress,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
};

function validateManifest(m: Manifest): void {
  const Model = MODELS[`${m.apiVersion}/${m.kind}`];
  if (!Model) throw new Error(`no schema for ${m.apiVersion}/${m.kind}`);
  new Model(m as never).validate();
}

/**
 * The example Secret ships placeholders ("change-me") that must not load:
 * an operator who forgets to replace the encryption key gets a config error,
 * not a guessable key. Tests that load the config substitute a real key.
 */
const withRealEncryptionKey = (env: Record<string, string>) => ({
  ...env,
  KEYGATE_SECRET_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
});

type Container = {
  name: string;
  image: string;
  args?: string[];
  ports?: Array<{ name: string; containerPort: number }>;
  env?: Array<{
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string }; configMapKeyRef?: unknown };
  }>;
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
  readinessProbe?: { httpGet: { path: string; port: string | number } };
  livenessProbe?: { httpGet: { path: string; port: string | number } };
  startupProbe?: { httpGet: { path: string; port: string | number } };
  lifecycle?: { preStop?: { sleep?: { seconds: number }; exec?: { command: string[] } } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { drop?: string[] };
  };
};
type PodSpec = {
  containers: Container[];
  volumes?: Array<{ name: string; configMap?: { name: string } }>;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; runAsGroup?: number };
  terminationGracePeriodSeconds?: number;
  automountServiceAccountToken?: boolean;
  serviceAccountName?: string;
};

describe('Kubernetes manifests', () => {
  const files = readdirSync(k8s, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile() && d.name.endsWith('.yaml') && d.name !== 'kustomization.yaml')
    .map((d) => join(d.parentPath, d.name));
  const patches = new Set([...patchFiles(base), ...patchFiles(overlay)]);

  it.each(files.filter((f) => !patches.has(f)).map((f) => [relative(k8s, f), f]))(
    '%s is valid against the Kubernetes schemas',
    (_name, file) => {
      const docs = readManifests(file);
      expect(docs.length).toBeGreaterThan(0);
      for (const m of docs) validateManifest(m);
    },
  );

  it.each([
    ['base', base],
    ['overlays/example', overlay],
  ])('%s renders to valid objects', (_name, dir) => {
    const objects = render(dir);
    expect(objects.length).toBeGreaterThan(0);
    for (const m of objects) validateManifest(m);
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
  ])('the validator refuses %s', (_name, breakIt) => {
    const d = structuredClone(readManifests(join(base, 'deployment.yaml'))[0]!);
    breakIt(d);
    expect(() => validateManifest(d)).toThrow();
  });

  it('renders with the real kubectl kustomize, and the overlay builds on the base', () => {
    expect(kustomization(overlay).resources).toContain('../../base');
    // Every object of the base comes out of the overlay too (kubectl kustomize resolved ../../base).
    const key = (m: Manifest) => `${m.kind}/${m.metadata.name}`;
    const fromOverlay = new Set(render(overlay).map(key));
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

describe('the example overlay matches what the code reads', () => {
  const objects = render(overlay);
  const find = (kind: string, name: string) => {
    const m = objects.find((o) => o.kind === kind && o.metadata.name === name);
    if (!m) throw new Error(`no ${kind}/${name}`);
    return m;
  };
  const deployment = find('Deployment', 'keygate');
  const pod = (
    deployment.spec as {
      template: { metadata: { labels: Record<string, string>; annotations: Record<string, string> }; spec: PodSpec };
    }
  ).template;
  const container = (name: string) => pod.spec.containers.find((c) => c.name === name)!;
  const keygate = container('keygate');
  const upstream = container('upstream');
  const secret = find('Secret', 'keygate-secrets') as Manifest & { stringData: Record<string, string> };
  const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
    Object.entries(selector).every(([k, v]) => labels[k] === v);
  const portNumber = (c: Container, port: string | number) =>
    typeof port === 'number' ? port : c.ports!.find((p) => p.name === port)!.containerPort;

  /** Keygate's environment as the kubelet would build it, with the ConfigMap mounted into a temp dir. */
  function keygateEnv(): Record<string, string> {
    const fsRoot = mkdtempSync(join(tmpdir(), 'keygate-pod-'));
    for (const mount of keygate.volumeMounts ?? []) {
      const volume = pod.spec.volumes!.find((v) => v.name === mount.name)!;
      const cm = find('ConfigMap', volume.configMap!.name) as Manifest & { data: Record<string, string> };
      for (const [file, content] of Object.entries(cm.data)) {
        mkdirSync(join(fsRoot, mount.mountPath), { recursive: true });
        writeFileSync(join(fsRoot, mount.mountPath, file), content);
      }
    }
    const env: Record<string, string> = {};
    for (const e of keygate.env!) {
      if (e.value !== undefined) env[e.name] = e.name === 'KEYGATE_CONFIG' ? join(fsRoot, e.value) : e.value;
      else if (e.valueFrom?.secretKeyRef) env[e.name] = secret.stringData[e.valueFrom.secretKeyRef.key]!;
      else throw new Error(`${e.name}: unsupported env source`);
    }
    return env;
  }

  it('sets only variables the code reads, all documented', () => {
    const known = envNamesInCode();
    const configDoc = readFileSync(join(repoRoot, 'docs/reference/configuration.md'), 'utf8');
    for (const e of keygate.env!) {
      expect(known.has(e.name), `${e.name} is read by the code`).toBe(true);
      expect(configDoc, `${e.name} is documented`).toContain(`\`${e.name}\``);
    }
    expect(keygate.env!.some((e) => e.name === 'KEYGATE_SECRET_ENCRYPTION_KEY')).toBe(true);
  });

  it('refuses to start with the example placeholder encryption key', () => {
    expect(() => loadConfig(keygateEnv())).toThrow(/KEYGATE_SECRET_ENCRYPTION_KEY/);
  });

  it('every secret and config reference resolves, and the config loads', () => {
    for (const e of keygate.env!.filter((x) => x.valueFrom?.secretKeyRef)) {
      expect(e.valueFrom!.secretKeyRef!.name).toBe('keygate-secrets');
      expect(secret.stringData, e.name).toHaveProperty(e.valueFrom!.secretKeyRef!.key);
    }
    const config = loadConfig(withRealEncryptionKey(keygateEnv()));
    expect(config.redis?.mode).toBe('standalone');
    expect(config.configFile).toMatch(/\/etc\/keygate\/routes\.yaml$/);
    const problems: string[] = [];
    loadPolicy(config.configFile, problems);
    expect(problems).toEqual([]);
  });

  it('runs the upstream on 127.0.0.1 at the port Keygate forwards to, with no port exposed', () => {
    const config = loadConfig(withRealEncryptionKey(keygateEnv()));
    expect(['127.0.0.1', 'localhost']).toContain(config.upstream!.hostname);
    expect(upstream.args![0]).toBe('demo-upstream');
    expect(flag(upstream.args!, '--host')).toBe('127.0.0.1');
    expect(flag(upstream.args!, '--port')).toBe(config.upstream!.port);
    expect(upstream.ports).toBeUndefined();
    expect(keygate.args).toEqual(['serve']);
  });

  it('names the proxy and admin ports as the config has them, and the Services target them', () => {
    const config = loadConfig(withRealEncryptionKey(keygateEnv()));
    expect(portNumber(keygate, 'http')).toBe(config.port);
    expect(portNumber(keygate, 'admin')).toBe(config.adminPort);
    // Keygate's default is loopback; probes and Prometheus come in on the Pod IP.
    expect(loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:1' }).adminHost).toBe('127.0.0.1');
    expect(config.adminHost).toBe('0.0.0.0');
    const svc = find('Service', 'keygate') as Manifest & {
      spec: { selector: Record<string, string>; ports: Array<{ name: string; targetPort: string }> };
    };
    expect(matches(svc.spec.selector, pod.metadata.labels)).toBe(true);
    expect(svc.spec.ports.map((p) => portNumber(keygate, p.targetPort))).toEqual([config.port]);
    const metrics = find('Service', 'keygate-metrics') as Manifest & {
      spec: { selector: Record<string, string>; ports: Array<{ name: string; targetPort: string }> };
    };
    expect(matches(metrics.spec.selector, pod.metadata.labels)).toBe(true);
    expect(metrics.spec.ports.map((p) => portNumber(keygate, p.targetPort))).toEqual([config.adminPort]);
  });

  describe('probes and scraping, against a running Keygate', () => {
    let gate: RunningKeygate;
    beforeAll(async () => {
      // /readyz also wants at least one key loaded (no_keys otherwise).
      gate = await startKeygate({ upstream: 'http://127.0.0.1:9', keys: [makeKey({ apiKey: 'probe' })] });
    });
    afterAll(() => gate?.close());

    it('probe the admin port, on paths the admin server answers 200', async () => {
      const config = loadConfig(withRealEncryptionKey(keygateEnv()));
      const probes = {
        readiness: keygate.readinessProbe!,
        liveness: keygate.livenessProbe!,
        startup: keygate.startupProbe!,
      };
      expect(probes.readiness.httpGet.path).toBe('/readyz');
      expect(probes.liveness.httpGet.path).toBe('/healthz');
      for (const [kind, probe] of Object.entries(probes)) {
        expect(portNumber(keygate, probe.httpGet.port), kind).toBe(config.adminPort);
        expect((await send(gate.adminUrl, probe.httpGet.path)).status, kind).toBe(200);
      }
      // The proxy port does not answer them: admin endpoints never share it.
      expect((await send(gate.url, '/healthz')).status).toBe(404);
    });

    it('annotate the Pod for Prometheus, and the ServiceMonitor example selects the metrics Service', async () => {
      const config = loadConfig(withRealEncryptionKey(keygateEnv()));
      const a = pod.metadata.annotations;
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
    for (const c of pod.spec.containers) {
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
    const config = loadConfig(withRealEncryptionKey(keygateEnv()));
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
      'app.kubernetes.io/name': 'keygate',
      'app.kubernetes.io/part-of': 'keygate',
      'app.kubernetes.io/managed-by': 'kustomize',
      'app.kubernetes.io/instance': 'keygate-example',
    };
    for (const o of objects) expect(o.metadata.labels, `${o.kind}/${o.metadata.name}`).toMatchObject(standard);
    // The base's objects also say which Keygate release they belong to (the overlay's Secret is the operator's).
    const fromBase = new Set(render(base).map((m) => `${m.kind}/${m.metadata.name}`));
    for (const o of objects.filter((m) => fromBase.has(`${m.kind}/${m.metadata.name}`)))
      expect(o.metadata.labels!['app.kubernetes.io/version'], `${o.kind}/${o.metadata.name}`).toBe(version);
    expect(pod.metadata.labels).toMatchObject({
      ...standard,
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

  it('admits only the proxy port from anywhere and the admin port from the monitoring namespace (NetworkPolicy)', () => {
    const config = loadConfig(withRealEncryptionKey(keygateEnv()));
    type Peer = {
      namespaceSelector?: { matchLabels: Record<string, string> };
      podSelector?: unknown;
      ipBlock?: unknown;
    };
    type Rule = { from?: Peer[]; ports: Array<{ port: string | number; protocol: string }> };
    const policy = find('NetworkPolicy', 'keygate') as Manifest & {
      spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: Rule[] };
    };
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
    ]);
    for (const r of policy.spec.ingress) for (const p of r.ports) expect(p.protocol).toBe('TCP');
    // What the client Service sends to is admitted; the upstream's port is not.
    const svc = find('Service', 'keygate') as Manifest & { spec: { ports: Array<{ targetPort: string }> } };
    for (const p of svc.spec.ports) expect(admitted[0]!.ports).toContain(portNumber(keygate, p.targetPort));
    expect(admitted.flatMap((a) => a.ports)).not.toContain(Number(config.upstream!.port));
  });

  it('keeps a replica up through voluntary disruptions', () => {
    const pdb = find('PodDisruptionBudget', 'keygate') as Manifest & {
      spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } };
    };
    expect(matches(pdb.spec.selector.matchLabels, pod.metadata.labels)).toBe(true);
    expect(pdb.spec.minAvailable).toBeLessThan((deployment.spec as { replicas: number }).replicas);
  });

  it('applies the overlay: namespace, image, replicas and the patched container', () => {
    for (const o of objects) expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe('keygate-example');
    for (const c of podContainers(deployment)) expect(c.image).toBe('registry.example.com/keygate:0.1.0');
    expect((deployment.spec as { replicas: number }).replicas).toBe(3);
    expect(keygate.env!.map((e) => e.name)).toContain('KEYGATE_LOG_LEVEL');
    expect(keygate.env!.map((e) => e.name)).toContain('KEYGATE_UPSTREAM');
    expect(keygate.resources!.limits!.memory).toBe('384Mi');
    expect(upstream.resources!.limits!.memory).toBe('128Mi');
    // The base alone leaves the Secret to the overlay.
    expect(render(base).some((o) => o.kind === 'Secret')).toBe(false);
    expect(dirname(relative(repoRoot, join(overlay, 'secret.yaml')))).toBe('deploy/kubernetes/overlays/example');
  });
});
