/**
 * The shipped docker-compose.yml, unchanged, driven by docker-compose over
 * Podman's Docker-compatible socket (scripts/container-tests.sh sets it up and
 * builds the keygate image and the Redis and Prometheus stand-ins first).
 * Every step prints a COMPOSE line: together they are the session's transcript.
 */
import { readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { bearer, send } from '../helpers/http.js';
import { background, driveHealthchecks, exec, podman, podmanOk, tier } from '../helpers/podman.js';
import { guard } from '../helpers/slowdown.js';

const t = tier();
const root = new URL('../..', import.meta.url).pathname;
const composeFile = join(root, 'docker-compose.yml');
const services = (parse(readFileSync(composeFile, 'utf8')) as { services: Record<string, { ports?: string[] }> })
  .services;
const compose = (args: string[], timeoutMs?: number) =>
  exec('docker-compose', ['--no-ansi', '-p', t.composeProject, '-f', composeFile, ...args], timeoutMs);
const composeOk = async (args: string[], timeoutMs?: number) => {
  const r = await compose(args, timeoutMs);
  if (r.code !== 0) throw new Error(`docker-compose ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
};
const projectFilter = `label=com.docker.compose.project=${t.composeProject}`;
const projectContainers = async (all = true) =>
  (await podmanOk(['ps', ...(all ? ['-a'] : []), '--filter', projectFilter, '--format', '{{.Names}}']))
    .split('\n')
    .filter(Boolean);
const transcript = (step: string, answer: unknown) =>
  console.log(`COMPOSE ${step}: ${typeof answer === 'string' ? answer : JSON.stringify(answer)}`);

/** Host ports the compose file publishes ("127.0.0.1:9091:9090" → 9091). */
const published = Object.values(services).flatMap((s) => (s.ports ?? []).map((p) => Number(p.split(':').at(-2))));
const portInUse = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port }, () => (s.destroy(), resolve(true)));
    s.on('error', () => resolve(false));
  });

const API = 'http://127.0.0.1:8000';
const PROMETHEUS = 'http://127.0.0.1:9091';
const errorCode = (r: { json(): unknown }) => (r.json() as { code: number }).code;

describe('docker-compose.yml, run unchanged', () => {
  let key: { apiKey: string; apiSecret: string; id: string };
  const signed = async () =>
    (
      await composeOk(['exec', '-T', 'keygate', 'keygate', 'token', '--key', key.apiKey, '--secret', key.apiSecret])
    ).trim();

  beforeAll(async () => {
    // Leftovers of an interrupted run (containers, network, volumes) would make this run lie.
    await compose(['down', '--volumes', '--remove-orphans', '--timeout', '1']);
    for (const port of published)
      expect(await portInUse(port), `host port ${port}, which docker-compose.yml publishes, is free`).toBe(false);

    const up = background('docker-compose', [
      '--no-ansi',
      '-p',
      t.composeProject,
      '-f',
      composeFile,
      'up',
      '-d',
      '--no-build',
    ]);
    // `up` waits for Redis to be healthy before it creates Keygate: run the checks it waits for.
    const checks = driveHealthchecks(() => projectContainers(false), 500);
    const code = await up.exited;
    await checks.stop();
    transcript('up -d', `exit ${code}`);
    expect(code, up.output()).toBe(0);
  }, guard(240_000));

  afterAll(async () => {
    // Also on failure: never leave the stack (and its fixed host ports) behind.
    if ((await projectContainers()).length > 0)
      await compose(['down', '--volumes', '--remove-orphans', '--timeout', '20']);
  }, guard(120_000));

  it('starts Redis, the demo upstream, Keygate and Prometheus', async () => {
    const running = await projectContainers(false);
    expect(running.map((n) => n.replace(`${t.composeProject}_`, '').replace(/_\d+$/, '')).sort()).toEqual([
      'keygate',
      'prometheus',
      'redis',
      'upstream',
    ]);
    // Keygate's image HEALTHCHECK passes inside the stack.
    const keygate = running.find((n) => n.includes('_keygate_'))!;
    await expect
      .poll(async () => (await podman(['healthcheck', 'run', keygate])).code, { timeout: 30_000, interval: 500 })
      .toBe(0);
  });

  it('creates a key with `docker-compose exec keygate keygate keys create`', async () => {
    const out = await composeOk([
      'exec',
      '-T',
      'keygate',
      'keygate',
      'keys',
      'create',
      '--scopes',
      'accounts:read',
      '--label',
      'container-tests',
      '--json',
    ]);
    key = JSON.parse(out) as typeof key;
    transcript('exec keygate keygate keys create --json', { apiKey: key.apiKey, id: key.id, apiSecret: '(redacted)' });
    expect(key.apiKey).toMatch(/\S/);
    expect(key.apiSecret.length).toBeGreaterThanOrEqual(32);
  });

  it('passes a signed request through the published port to the demo upstream, with X-Api-Key-Id', async () => {
    const tk = await signed();
    // Keygate may still be connecting to Redis right after start: 503 until then, never 200 without a check.
    await expect
      .poll(async () => (await send(API, '/healthz').catch(() => ({ status: 0 }))).status, { timeout: 20_000 })
      .not.toBe(0);
    const r = await send(API, '/api/v3/viewer/accounts', { headers: bearer(tk) });
    transcript('GET /api/v3/viewer/accounts (signed)', `${r.status} ${r.body}`);
    expect(r.status).toBe(200);
    expect(r.json()).toMatchObject({ upstream: 'demo', path: '/api/v3/viewer/accounts', apiKeyId: key.id });

    const replay = await send(API, '/api/v3/viewer/accounts', { headers: bearer(tk) });
    transcript('same token again', `${replay.status} ${replay.body}`);
    expect([replay.status, errorCode(replay)]).toEqual([401, 40106]);

    const none = await send(API, '/api/v3/viewer/accounts');
    transcript('no token', `${none.status} ${none.body}`);
    expect([none.status, errorCode(none)]).toEqual([401, 40004]);
  });

  it("shows the Keygate target up in Prometheus's HTTP API", async () => {
    type Targets = {
      data: { activeTargets: Array<{ labels: { job: string }; health: string; lastError: string; scrapeUrl: string }> };
    };
    const keygateTarget = async () =>
      ((await (await fetch(`${PROMETHEUS}/api/v1/targets`)).json()) as Targets).data.activeTargets.find(
        (x) => x.labels.job === 'keygate',
      );
    // First scrape within one scrape_interval (15 s) of start.
    await expect
      .poll(async () => (await keygateTarget().catch(() => undefined))?.health, { timeout: 45_000, interval: 1_000 })
      .toBe('up');
    const target = (await keygateTarget())!;
    const query = (await (
      await fetch(`${PROMETHEUS}/api/v1/query?query=${encodeURIComponent('up{job="keygate"}')}`)
    ).json()) as { data: { result: Array<{ value: [number, string] }> } };
    transcript('prometheus /api/v1/targets keygate', {
      scrapeUrl: target.scrapeUrl,
      health: target.health,
      lastError: target.lastError,
    });
    transcript(
      'prometheus up{job="keygate"}',
      query.data.result.map((r) => r.value[1]),
    );
    expect(query.data.result.map((r) => r.value[1])).toEqual(['1']);
  });

  it('keeps the keys across `docker-compose restart redis` (append-only file in the redis-data volume)', async () => {
    const restart = await compose(['restart', 'redis'], 60_000);
    transcript('restart redis', `exit ${restart.code}`);
    expect(restart.code, restart.stderr).toBe(0);
    // Keygate reconnects on its own; until then requests that need Redis get 503, never a pass.
    let last = { status: 0, body: '' };
    await expect
      .poll(
        async () => {
          last = await send(API, '/api/v3/viewer/accounts', { headers: bearer(await signed()) });
          expect([200, 503], last.body).toContain(last.status);
          return last.status;
        },
        { timeout: 30_000, interval: 500 },
      )
      .toBe(200);
    transcript('signed request after restart', `${last.status} ${last.body}`);
    expect(JSON.parse(last.body)).toMatchObject({ apiKeyId: key.id });
    const shown = JSON.parse(await composeOk(['exec', '-T', 'keygate', 'keygate', 'keys', 'show', key.apiKey])) as {
      state: string;
    };
    expect(shown.state).toBe('active');
    expect(
      (await composeOk(['exec', '-T', 'redis', 'redis-cli', 'config', 'get', 'appendonly']))
        .split(/\s+/)
        .filter(Boolean),
    ).toEqual(['appendonly', 'yes']);
  });

  it('keeps the keys when the Redis container is recreated: only the redis-data volume carries them', async () => {
    const before = await podmanOk([
      'ps',
      '--filter',
      projectFilter,
      '--filter',
      'label=com.docker.compose.service=redis',
      '--format',
      '{{.ID}}',
    ]);
    await composeOk(['rm', '--stop', '--force', 'redis'], 60_000);
    await composeOk(['up', '-d', '--no-build', '--no-deps', 'redis'], 60_000);
    const after = await podmanOk([
      'ps',
      '--filter',
      projectFilter,
      '--filter',
      'label=com.docker.compose.service=redis',
      '--format',
      '{{.ID}}',
    ]);
    expect(after.trim()).not.toBe('');
    expect(after.trim(), 'a new container').not.toBe(before.trim());
    let last = { status: 0, body: '' };
    await expect
      .poll(
        async () => (last = await send(API, '/api/v3/viewer/accounts', { headers: bearer(await signed()) })).status,
        { timeout: 30_000, interval: 500 },
      )
      .toBe(200);
    transcript('signed request after recreating the redis container', `${last.status} ${last.body}`);
    expect(JSON.parse(last.body)).toMatchObject({ apiKeyId: key.id });
  });

  it('down leaves nothing running', async () => {
    const down = await compose(['down', '--volumes', '--timeout', '20'], 120_000);
    transcript('down --volumes', `exit ${down.code}`);
    expect(down.code, down.stderr).toBe(0);
    expect(await projectContainers()).toEqual([]);
    const networks = (await podmanOk(['network', 'ls', '--format', '{{.Name}}']))
      .split('\n')
      .filter((n) => n.startsWith(`${t.composeProject}_`));
    const volumes = (await podmanOk(['volume', 'ls', '--format', '{{.Name}}']))
      .split('\n')
      .filter((n) => n.startsWith(`${t.composeProject}_`));
    expect({ networks, volumes }).toEqual({ networks: [], volumes: [] });
    for (const port of published) expect(await portInUse(port), `host port ${port} released`).toBe(false);
  });
});
