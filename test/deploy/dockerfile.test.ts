import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix, relative } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { DEMO_KEY, DEMO_SECRET } from '../helpers/constants.js';
import { copyArgs, dockerignored, execForm, parseDockerfile, type Stage } from '../helpers/dockerfile.js';
import { bearer, send } from '../helpers/http.js';
import { freePort } from '../helpers/free-port.js';
import { spawnKeygate, type KeygateProcess } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';
import { program } from '../../src/cli/main.js';
import { guard } from '../helpers/slowdown.js';

const run = promisify(execFile);
const root = new URL('../..', import.meta.url).pathname;
const read = (p: string) => readFileSync(join(root, p), 'utf8');
const dockerfile = parseDockerfile(read('Dockerfile'));
const ignore = read('.dockerignore').split('\n');
const runtime = dockerfile.stages.at(-1)!;
const build = dockerfile.stages[0]!;
const all = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.keyword === keyword);
const last = (stage: Stage, keyword: string) => all(stage, keyword).at(-1);
const defaults = loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000' });

/** Every file in the repo under `p` (a file or a directory), relative to the repo root. */
function filesUnder(p: string): string[] {
  const abs = join(root, p);
  if (!statSync(abs).isDirectory()) return [p];
  return readdirSync(abs, { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => relative(root, join(d.parentPath, d.name)));
}

describe('Dockerfile', () => {
  const deps = dockerfile.stages.find((s) => s.name === 'deps')!;

  it('is multi-stage: a build stage with dev dependencies, a deps stage with production ones, then the runtime stage', () => {
    expect(dockerfile.stages.map((s) => s.name)).toEqual(['build', 'deps', 'runtime']);
    expect(all(build, 'RUN').some((r) => /\bnpm ci\b/.test(r.args) && !r.args.includes('--omit=dev'))).toBe(true);
    const install = all(deps, 'RUN').find((r) => /\bnpm ci\b/.test(r.args));
    expect(install?.args).toMatch(/npm ci --omit=dev --ignore-scripts/);
    // The runtime stage gets compiled output from the build stage, production modules from deps, never sources or tests.
    const copies = all(runtime, 'COPY').map((c) => copyArgs(c.args));
    expect(copies.filter((c) => c.flags.get('from') === 'build').flatMap((c) => c.sources)).toEqual([
      `${last(build, 'WORKDIR')!.args}/${JSON.parse(read('tsconfig.build.json')).compilerOptions.outDir}`,
    ]);
    expect(copies.filter((c) => c.flags.get('from') === 'deps').flatMap((c) => c.sources)).toEqual([
      `${last(deps, 'WORKDIR')!.args}/node_modules`,
      '/links/',
    ]);
    for (const c of copies.filter((c) => !c.flags.has('from'))) {
      for (const s of c.sources)
        expect(s, 'runtime stage copies no sources or tests').not.toMatch(/^(src|test|tsconfig)/);
    }
  });

  it('pins its bases by digest, with the tag in the same line; the Node major is the one the tests run on', () => {
    // ARG <NAME>=<image>:<tag>@sha256:<digest>; the build and deps stages use BUILD_IMAGE, the runtime stage RUNTIME_IMAGE.
    const image = (name: string) => {
      const m = /^([^@\s]+):([^@:/\s]+)@sha256:([0-9a-f]{64})$/.exec(dockerfile.args.get(name) ?? '');
      expect(m, `ARG ${name}=${dockerfile.args.get(name)}`).not.toBeNull();
      return { repo: m![1]!, tag: m![2]! };
    };
    const buildImage = image('BUILD_IMAGE');
    const runtimeImage = image('RUNTIME_IMAGE');
    expect(dockerfile.stages.map((s) => s.from)).toEqual([
      dockerfile.args.get('BUILD_IMAGE'),
      dockerfile.args.get('BUILD_IMAGE'),
      dockerfile.args.get('RUNTIME_IMAGE'),
    ]);
    // The header comment names both tags (what each digest is).
    for (const i of [buildImage, runtimeImage])
      expect(read('Dockerfile')).toMatch(new RegExp(`^#\\s+${`${i.repo}:${i.tag}`.replace(/[.]/g, '\\.')}\\s`, 'm'));
    expect(buildImage.repo).toBe('node');
    const buildMajor = Number(/^(\d+)-[a-z]+-slim$/.exec(buildImage.tag)![1]);
    // Shell-less runtime: distroless Node on the same Debian release as the build stage.
    const runtimeMajor = Number(/^gcr\.io\/distroless\/nodejs(\d+)-debian12$/.exec(runtimeImage.repo)![1]);
    expect(buildImage.tag).toContain('bookworm');
    expect(runtimeImage.tag).toBe('nonroot');
    const engines = JSON.parse(read('package.json')).engines.node as string;
    for (const major of [buildMajor, runtimeMajor]) {
      expect(major % 2, 'even majors are the LTS lines').toBe(0);
      expect(major).toBeGreaterThanOrEqual(Number(/(\d+)/.exec(engines)![1]));
      expect(major, 'the Node major the test suite runs on').toBe(Number(process.versions.node.split('.')[0]));
    }
  });

  it('runs as a non-root numeric user, with NODE_ENV=production', () => {
    const user = last(runtime, 'USER')!.args;
    expect(user).toMatch(/^\d+(:\d+)?$/);
    expect(Number(user.split(':')[0])).toBeGreaterThan(0);
    // Nothing runs as root after USER.
    const userAt = runtime.instructions.indexOf(last(runtime, 'USER')!);
    expect(runtime.instructions.slice(userAt).filter((i) => i.keyword === 'RUN' || i.keyword === 'USER')).toHaveLength(
      1,
    );
    expect(all(runtime, 'ENV').map((e) => e.args)).toContain('NODE_ENV=production');
  });

  it('exposes the default proxy and admin ports the config reads', () => {
    expect(
      all(runtime, 'EXPOSE')
        .flatMap((e) => e.args.split(/\s+/))
        .map(Number)
        .sort(),
    ).toEqual([defaults.port, defaults.adminPort].sort());
  });

  it('copies only files that exist and that .dockerignore lets into the build context', () => {
    for (const stage of dockerfile.stages) {
      for (const c of all(stage, 'COPY')
        .map((i) => copyArgs(i.args))
        .filter((c) => !c.flags.has('from'))) {
        for (const source of c.sources) {
          expect(existsSync(join(root, source)), source).toBe(true);
          for (const f of filesUnder(source))
            expect(dockerignored(ignore, f), `${f} is in the build context`).toBe(false);
        }
      }
    }
    // …and the context leaves out what the image must not hold.
    for (const p of [
      'node_modules/typescript/package.json',
      'test/repo/docs.test.ts',
      '.git/HEAD',
      'dist/index.js',
      'README.md',
      'deploy/prometheus/prometheus.yml',
    ]) {
      expect(dockerignored(ignore, p), p).toBe(true);
    }
  });

  it('ships every file the code loads relative to itself', () => {
    // e.g. new URL('../../config/routes.yaml', import.meta.url) from dist/<dir>/file.js
    const loaded = new Set<string>();
    for (const f of filesUnder('src').filter((f) => f.endsWith('.ts'))) {
      for (const m of read(f).matchAll(/new URL\('(\.\.\/[^']+)', import\.meta\.url\)/g)) {
        // Resolved from where the compiled file runs: dist/ mirrors src/, at any depth.
        const target = posix.normalize(posix.join(posix.dirname(f).replace(/^src/, 'dist'), m[1]!));
        // dist/ (the keys-file worker) is compiled from src/ in the build stage and copied whole from it.
        if (!target.startsWith('dist/')) loaded.add(target);
      }
    }
    expect([...loaded].sort()).toEqual([
      'config/management-openapi.json',
      'config/routes.yaml',
      'config/schema/keys.schema.json',
      'config/schema/management-tokens.schema.json',
      'config/schema/policy.schema.json',
      'console/index.html',
      'examples/demo-keys.yaml',
      'package.json',
    ]);
    const shipped = all(runtime, 'COPY')
      .map((i) => copyArgs(i.args))
      .filter((c) => !c.flags.has('from'))
      .flatMap((c) => c.sources.flatMap(filesUnder));
    for (const f of loaded) expect(shipped, f).toContain(f);
  });

  it('starts "keygate serve" through a keygate on PATH, in a runtime stage that runs nothing (no shell)', () => {
    expect(execForm(last(runtime, 'ENTRYPOINT')!.args)).toEqual(['keygate']);
    expect(execForm(last(runtime, 'CMD')!.args)).toEqual(['serve']);
    expect(all(runtime, 'RUN')).toEqual([]);
    // The link and /usr/bin/env (bin/keygate.js's #! line) are made in deps and copied to / with /links/.
    const links = all(deps, 'RUN').find((r) => r.args.includes('/links/'))!.args;
    expect(links).toContain(`ln -s ${last(runtime, 'WORKDIR')!.args}/bin/keygate.js /links/usr/local/bin/keygate`);
    expect(links).toContain('cp /usr/bin/env /links/usr/bin/env');
    expect(read('bin/keygate.js').split('\n')[0]).toBe('#!/usr/bin/env node');
    expect(
      all(runtime, 'ENV')
        .map((e) => e.args)
        .find((e) => e.startsWith('PATH=')),
    ).toMatch(/^PATH=\/nodejs\/bin:\/usr\/local\/bin:/);
    // The command the image/compose runs is one the CLI's command table declares.
    expect(program.subcommands!.map((c) => c.spec.name)).toContain('serve');
  });
});

/**
 * The runtime stage rebuilt on this machine without Docker: the files its
 * COPY lines name, its own `npm ci --omit=dev --ignore-scripts` (from the npm
 * cache when possible), then the HEALTHCHECK and a real request through it.
 */
describe('the runtime stage, assembled without Docker', () => {
  let app: string;
  const procs: KeygateProcess[] = [];

  beforeAll(async () => {
    app = mkdtempSync(join(tmpdir(), 'keygate-image-'));
    const workdir = last(runtime, 'WORKDIR')!.args;
    for (const c of all(runtime, 'COPY').map((i) => copyArgs(i.args))) {
      // node_modules: installed below with the deps stage's own command; /links/: checked above.
      if (c.flags.get('from') === 'deps') continue;
      for (const source of c.sources) {
        const from =
          c.flags.get('from') === 'build'
            ? join(root, source.replace(`${last(build, 'WORKDIR')!.args}/`, ''))
            : join(root, source);
        const dest = c.dest.endsWith('/')
          ? join(app, c.dest.replace(/^\.\//, ''), source.split('/').pop()!)
          : join(app, c.dest.replace(/^\.\//, '').replace(`${workdir}/`, ''));
        mkdirSync(dirname(dest), { recursive: true });
        cpSync(from, dest, { recursive: true });
      }
    }
    const deps = dockerfile.stages.find((s) => s.name === 'deps')!;
    const install = /npm ci[^&]*/
      .exec(all(deps, 'RUN').find((r) => /\bnpm ci\b/.test(r.args))!.args)![0]
      .trim()
      .split(/\s+/);
    await run('npm', [...install.slice(1), '--prefer-offline'], {
      cwd: app,
      env: { ...process.env, NODE_ENV: 'production' },
      timeout: 120_000,
    });
  }, guard(150_000));
  afterAll(() => {
    for (const p of procs) p.child.kill('SIGKILL');
    if (app) rmSync(app, { recursive: true, force: true });
  });

  const start = (args: string[], env: Record<string, string>) => {
    // As the image runs it: the assembled tree's bin/keygate.js, PATH and NODE_ENV only.
    const p = spawnKeygate(args, {
      bin: join(app, 'bin/keygate.js'),
      cwd: app,
      baseEnv: 'clean',
      env: { NODE_ENV: 'production', ...env },
    });
    procs.push(p);
    return p;
  };
  const healthcheck = async (adminPort: number) => {
    const hc = last(runtime, 'HEALTHCHECK')!.args;
    const argv = execForm(hc.replace(/^(--\S+\s+)*CMD\s+/, ''));
    expect(argv[0], 'HEALTHCHECK uses node (the runtime image has no shell and no curl)').toBe('node');
    return run(argv[0]!, argv.slice(1), {
      env: { PATH: process.env.PATH!, KEYGATE_ADMIN_PORT: String(adminPort) },
      timeout: 5_000,
    }).then(
      () => 0,
      (e: { code: number }) => e.code,
    );
  };

  it('holds production dependencies only', () => {
    const dev = Object.keys(JSON.parse(read('package.json')).devDependencies as Record<string, string>);
    for (const d of dev) expect(existsSync(join(app, 'node_modules', d)), d).toBe(false);
    for (const d of Object.keys(JSON.parse(read('package.json')).dependencies as Record<string, string>))
      expect(existsSync(join(app, 'node_modules', d)), d).toBe(true);
  });

  it('serves: the HEALTHCHECK passes, and a signed request reaches the demo upstream', async () => {
    const [upstreamPort, port, adminPort] = [await freePort(), await freePort(), await freePort()];
    start(['demo-upstream', '--host', '127.0.0.1', '--port', String(upstreamPort)], {});
    start(['serve'], {
      KEYGATE_UPSTREAM: `http://127.0.0.1:${upstreamPort}`,
      KEYGATE_KEYS_FILE: join(app, 'examples/demo-keys.yaml'),
      KEYGATE_PORT: String(port),
      KEYGATE_ADMIN_PORT: String(adminPort),
      KEYGATE_HOST: '127.0.0.1',
    });
    expect(await healthcheck(await freePort()), 'nothing listening: unhealthy').not.toBe(0);
    await expect.poll(() => healthcheck(adminPort), { timeout: 15_000, interval: 200 }).toBe(0);
    const r = await send(`http://127.0.0.1:${port}`, '/api/v3/viewer/accounts', {
      headers: bearer(token(DEMO_KEY, DEMO_SECRET)),
    });
    expect(r.status).toBe(200);
    expect(r.json()).toMatchObject({ upstream: 'demo', apiKeyId: 'demo' });
  });
});
