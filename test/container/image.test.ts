/**
 * The image built from the shipped Dockerfile (by scripts/container-tests.sh,
 * with Podman, on local stand-ins for its base images), inspected and run.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send } from '../helpers/http.js';
import { podman, podmanOk, tier } from '../helpers/podman.js';
import { freePort } from '../helpers/free-port.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { guard } from '../helpers/slowdown.js';

const t = tier();
const root = new URL('../..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  version: string;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
/**
 * Budget for the image's own layers (what it adds to the runtime base), in MB. Measured 33.2 MB at 0.2.0, of
 * which the OpenTelemetry SDK and OTLP exporters (loaded only when tracing is on) are about 23 MB: each of
 * their packages ships three builds (CommonJS, ESM, ES-next).
 */
const OWN_LAYERS_BUDGET_MB = 40;
const MB = 1_000_000;

type ImageConfig = { User: string; Env: string[]; Entrypoint: string[]; Cmd: string[] };
const inspect = async (image: string) =>
  JSON.parse(await podmanOk(['image', 'inspect', image]))[0] as {
    Size: number;
    RootFS: { Layers: string[] };
    Config: ImageConfig;
    Healthcheck?: { Test: string[] };
  };

/** Every file and link under dir, relative to it. */
function walk(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((d) => !d.isDirectory())
    .map((d) => relative(dir, join(d.parentPath, d.name)));
}

/** PEM bodies of the certificates in a bundle. */
const pemBodies = (text: string) =>
  [...text.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)].map((m) =>
    m[1]!.replace(/\s+/g, ''),
  );

describe('the image built from the shipped Dockerfile', () => {
  let fsRoot: string;
  let config: ImageConfig;
  let healthcheck: string[] | undefined;
  beforeAll(async () => {
    const image = await inspect(t.image);
    config = image.Config;
    healthcheck = image.Healthcheck?.Test;
    fsRoot = (await podmanOk(['image', 'mount', t.image])).trim();
  });
  afterAll(async () => {
    await podman(['image', 'unmount', t.image]);
  });

  it('keeps its HEALTHCHECK (built with --format docker), and runs as uid 1000 with NODE_ENV=production', () => {
    // Podman drops HEALTHCHECK from OCI-format images: the tier builds with --format docker.
    expect(healthcheck?.slice(0, 2)).toEqual(['CMD', 'node']);
    expect(config.User).toBe('1000:1000');
    expect(config.Env).toContain('NODE_ENV=production');
    expect(config.Entrypoint).toEqual(['keygate']);
    expect(config.Cmd).toEqual(['serve']);
  });

  it('holds production dependencies, dist/, bin/ and the shipped config only: no src/, no tests, no dev dependency', () => {
    expect(readdirSync(join(fsRoot, 'app')).sort()).toEqual([
      'bin',
      'config',
      'console',
      'dist',
      'examples',
      'node_modules',
      'package-lock.json',
      'package.json',
    ]);
    expect(readdirSync(join(fsRoot, 'app/examples'))).toEqual(['demo-keys.yaml']);
    expect(readdirSync(join(fsRoot, 'app/dist')).some((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toBe(false);
    for (const d of Object.keys(pkg.devDependencies))
      expect(statSync(join(fsRoot, 'app/node_modules', d), { throwIfNoEntry: false }), d).toBeUndefined();
    for (const d of Object.keys(pkg.dependencies))
      expect(statSync(join(fsRoot, 'app/node_modules', d, 'package.json')).isFile(), d).toBe(true);
    const tests = walk(join(fsRoot, 'app')).filter(
      (f) => !f.startsWith('node_modules/') && /(^|\/)(test|src)\/|\.test\.[jt]s$/.test(f),
    );
    expect(tests).toEqual([]);
  });

  it('is shell-less: the only programs are node, the keygate link and env (for its #! line)', async () => {
    const programs = ['bin', 'sbin', 'usr/bin', 'usr/sbin', 'usr/local/bin', 'usr/local/sbin', 'nodejs/bin']
      .filter((d) => statSync(join(fsRoot, d), { throwIfNoEntry: false })?.isDirectory())
      .flatMap((d) => readdirSync(join(fsRoot, d)).map((f) => `${d}/${f}`))
      .sort();
    expect(programs).toEqual(['nodejs/bin/node', 'usr/bin/env', 'usr/local/bin/keygate']);
    const sh = await podman(['run', '--rm', '--pull=never', '--entrypoint', '/bin/sh', t.image, '-c', 'true']);
    expect(sh.code, sh.stderr).not.toBe(0);
    expect(sh.stderr).toMatch(/no such file or directory/);
  });

  it("carries no certificate that only this machine trusts (the build's proxy CA is mounted, never copied)", () => {
    const hostBundle = readFileSync(process.env.NODE_EXTRA_CA_CERTS ?? '/etc/ssl/certs/ca-certificates.crt', 'utf8');
    const debian = new Set(
      readdirSync('/usr/share/ca-certificates/mozilla').flatMap((f) =>
        pemBodies(readFileSync(join('/usr/share/ca-certificates/mozilla', f), 'utf8')),
      ),
    );
    const hostOnly = pemBodies(hostBundle).filter((b) => !debian.has(b));
    // This machine's egress proxy CA is such a certificate: without one the check below would prove nothing.
    expect(hostOnly.length, 'host-only CA certificates found in the host bundle').toBeGreaterThan(0);
    const needles = hostOnly.map((b) => b.slice(100, 164));
    const found: string[] = [];
    for (const f of walk(fsRoot)) {
      const path = join(fsRoot, f);
      const st = statSync(path, { throwIfNoEntry: false });
      if (!st?.isFile() || st.size > 64 * MB) continue;
      const text = readFileSync(path, 'latin1').replace(/\s+/g, '');
      if (needles.some((n) => text.includes(n))) found.push(f);
    }
    expect(found).toEqual([]);
    expect(config.Env.filter((e) => /^(NODE_EXTRA_CA_CERTS|NPM_CONFIG_|npm_config_)/i.test(e))).toEqual([]);
  });

  it('answers keygate --version', async () => {
    const r = await podman(['run', '--rm', '--pull=never', '--read-only', '--cap-drop', 'ALL', t.image, '--version']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`keygate ${pkg.version}\n`);
  });

  it(`adds at most ${OWN_LAYERS_BUDGET_MB} MB of its own layers to the runtime base`, async () => {
    const image = await inspect(t.image);
    const base = await inspect(t.runtimeBase);
    expect(image.RootFS.Layers.slice(0, base.RootFS.Layers.length), 'built on the runtime base').toEqual(
      base.RootFS.Layers,
    );
    const own = (image.Size - base.Size) / MB;
    console.log(
      `IMAGE ${JSON.stringify({ image: t.image, totalMB: +(image.Size / MB).toFixed(1), baseMB: +(base.Size / MB).toFixed(1), ownLayersMB: +own.toFixed(1), budgetMB: OWN_LAYERS_BUDGET_MB })}`,
    );
    expect(own).toBeGreaterThan(0);
    expect(own).toBeLessThanOrEqual(OWN_LAYERS_BUDGET_MB);
  });
});

describe('a container from the image, with a read-only root filesystem and no capabilities', () => {
  const name = `keygate-ct-image-${process.pid}`;
  const idle = `${name}-idle`;
  const shutdownTimeoutMs = 5_000;
  let upstream: RecordingUpstream;
  let port: number;
  let adminPort: number;
  const url = () => `http://127.0.0.1:${port}`;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    [port, adminPort] = [await freePort(), await freePort()];
    // Host network: the container reaches the test's recording upstream on 127.0.0.1.
    // --health-interval disable: no systemd here to time the checks; the tests run them.
    await podmanOk([
      'run',
      '-d',
      '--pull=never',
      '--name',
      name,
      '--network',
      'host',
      '--health-interval',
      'disable',
      '--read-only',
      '--cap-drop',
      'ALL',
      '--security-opt',
      'no-new-privileges',
      '-e',
      `KEYGATE_UPSTREAM=${upstream.url}`,
      '-e',
      'KEYGATE_KEYS_FILE=/app/examples/demo-keys.yaml',
      '-e',
      'KEYGATE_HOST=127.0.0.1',
      '-e',
      `KEYGATE_PORT=${port}`,
      '-e',
      `KEYGATE_ADMIN_PORT=${adminPort}`,
      '-e',
      `KEYGATE_SHUTDOWN_TIMEOUT_MS=${shutdownTimeoutMs}`,
      t.image,
    ]);
  }, guard(60_000));
  afterAll(async () => {
    await podman(['rm', '--force', '--time', '0', name, idle]);
    await upstream?.close();
  });

  it('passes its HEALTHCHECK once serving', async () => {
    await expect
      .poll(async () => (await podman(['healthcheck', 'run', name])).code, { timeout: 20_000, interval: 250 })
      .toBe(0);
  });

  it('serves as uid 1000 with no effective capabilities', async () => {
    const status = await podmanOk([
      'exec',
      name,
      'node',
      '-e',
      "process.stdout.write(require('fs').readFileSync('/proc/1/status','utf8'))",
    ]);
    expect(/^Uid:\s+(.*)$/m.exec(status)![1]!.split(/\s+/)).toEqual(['1000', '1000', '1000', '1000']);
    expect(/^CapEff:\s+(\S+)$/m.exec(status)![1]).toBe('0000000000000000');
    expect(/^NoNewPrivs:\s+(\d)$/m.exec(status)![1]).toBe('1');
    const cmdline = await podmanOk([
      'exec',
      name,
      'node',
      '-e',
      "process.stdout.write(require('fs').readFileSync('/proc/1/cmdline','utf8'))",
    ]);
    expect(cmdline.split('\0').filter(Boolean)).toEqual(['node', '/usr/local/bin/keygate', 'serve']);
  });

  it('passes a signed request with X-Api-Key-Id, refuses its replay (40106) and a request without a token (40004)', async () => {
    const seen = upstream.received.length;
    const tk = token('demo-key', 'demo-secret-0123456789abcdef');
    const ok = await send(url(), '/api/v3/viewer/accounts', { headers: bearer(tk) });
    expect(ok.status).toBe(200);
    expect(upstream.received.length).toBe(seen + 1);
    expect(upstream.received.at(-1)!.headers['x-api-key-id']).toBe('demo');
    const replay = await send(url(), '/api/v3/viewer/accounts', { headers: bearer(tk) });
    expect([replay.status, (replay.json() as { code: number }).code]).toEqual([401, 40106]);
    const none = await send(url(), '/api/v3/viewer/accounts');
    expect([none.status, (none.json() as { code: number }).code]).toEqual([401, 40004]);
    expect(upstream.received.length, 'refused requests never reach the upstream').toBe(seen + 1);
  });

  it('fails its HEALTHCHECK when the admin port does not answer', async () => {
    // Same image and environment, but a process that never opens the admin port.
    await podmanOk([
      'run',
      '-d',
      '--pull=never',
      '--name',
      idle,
      '--network',
      'host',
      '--health-interval',
      'disable',
      '--read-only',
      '--cap-drop',
      'ALL',
      '-e',
      `KEYGATE_ADMIN_PORT=${await freePort()}`,
      '--entrypoint',
      'node',
      t.image,
      '-e',
      'setTimeout(() => {}, 60_000)',
    ]);
    const r = await podman(['healthcheck', 'run', idle]);
    expect(r.code).not.toBe(0);
    expect(r.stdout.trim()).toBe('unhealthy');
  });

  it("runs the Kubernetes manifest's documented preStop fallback for clusters without the kubelet sleep action", async () => {
    const manifest = readFileSync(join(root, 'deploy/kubernetes/base/deployment.yaml'), 'utf8');
    const fallback = JSON.parse(/^\s*#\s*exec: \{command: (\[.*\])\}\s*$/m.exec(manifest)![1]!) as string[];
    const seconds = (manifest.match(/^\s*sleep:\s*\n\s*seconds: (\d+)$/m) ?? [])[1];
    expect(fallback.join(' ')).toContain(`${Number(seconds) * 1000}`);
    const started = Date.now();
    const r = await podman(['exec', name, ...fallback], 30_000);
    expect(r.code, r.stderr).toBe(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(Number(seconds) * 1000 - 100);
  });

  it(`on SIGTERM finishes the in-flight request and exits 0 within KEYGATE_SHUTDOWN_TIMEOUT_MS (${shutdownTimeoutMs} ms)`, async () => {
    upstream.handler = (_req, res) => setTimeout(() => res.end('{"slow":"done"}'), 1_500);
    const seen = upstream.received.length;
    const inFlight = send(url(), '/api/v3/viewer/accounts', {
      headers: bearer(token('demo-key', 'demo-secret-0123456789abcdef')),
    });
    await expect.poll(() => upstream.received.length, { timeout: 5_000, interval: 10 }).toBe(seen + 1);
    const signalled = Date.now();
    await podmanOk(['kill', '--signal', 'TERM', name]);
    expect(await inFlight).toMatchObject({ status: 200, body: '{"slow":"done"}' });
    expect((await podmanOk(['wait', name], 30_000)).trim()).toBe('0');
    const elapsed = Date.now() - signalled;
    expect(elapsed).toBeGreaterThanOrEqual(1_000);
    expect(elapsed).toBeLessThan(shutdownTimeoutMs);
    const logs = await podman(['logs', name]);
    expect(logs.stdout + logs.stderr).not.toContain('demo-secret-0123456789abcdef');
  });
});
