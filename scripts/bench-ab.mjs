#!/usr/bin/env node
// A/B benchmark: this working tree's build against a baseline git revision,
// side by side in one run. This is how a lever's worth is measured
// (docs/performance.md).
//
//   npm run bench:ab -- --baseline HEAD~1                 CPU per request at 1,500 req/s
//   npm run bench:ab -- --baseline v0.1.0 --saturate      also wrk req/s at saturation
//   npm run bench:ab -- --public                          also the current build on a public route (no auth)
//   options: --rate N  --duration S  --rounds N  --stores embedded,redis  --out FILE
//
// Both builds (and a bare http-proxy, for reference) run at once against one
// upstream and one Redis; each round measures every target in turn, starting
// from a different one. The main figure is Keygate's CPU time per request
// (from /proc) at a fixed offered rate below saturation: at saturation req/s on
// this 2-core machine swings with whatever else the cores are doing, while CPU
// per request at a fixed rate moves far less.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  PATH,
  createChildren,
  cpuUs,
  freePort,
  jsonPort,
  keygateEnv,
  median,
  mintTokens,
  round3,
  runMain,
  startRedisWithKey,
  writeKeysFile,
  writeResult,
} from './bench/lib.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    baseline: { type: 'string', default: 'HEAD' },
    rate: { type: 'string', default: '1500' },
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '5' },
    stores: { type: 'string', default: 'embedded,redis' },
    saturate: { type: 'boolean' },
    public: { type: 'boolean' },
    out: { type: 'string', default: join(root, 'bench-results', 'ab-latest.json') },
  },
});
const RATE = Number(args.rate);
const DURATION = Number(args.duration);
const ROUNDS = Number(args.rounds);
const STORES = args.stores.split(',').map((s) => s.trim());
if (STORES.some((s) => s !== 'embedded' && s !== 'redis')) throw new Error(`--stores takes embedded and/or redis, not ${args.stores}`);
if (args.saturate && spawnSync('wrk', ['--version']).error) {
  console.error('bench:ab: --saturate needs wrk on PATH (apt-get install -y wrk)');
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-ab-'));
const children = createChildren(dir, root);
const git = (...a) => spawnSync('git', a, { cwd: root, encoding: 'utf8' });

/** A detached worktree of `ref`, built with this checkout's node_modules. */
function buildBaseline(ref) {
  git('worktree', 'prune'); // entries left by a run that was killed
  const rev = git('rev-parse', '--short', `${ref}^{commit}`);
  if (rev.status !== 0) throw new Error(`bench:ab: no such revision ${ref}: ${rev.stderr}`);
  const tree = join(dir, 'baseline');
  const add = git('worktree', 'add', '--detach', tree, ref);
  if (add.status !== 0) throw new Error(`git worktree add failed: ${add.stderr}`);
  symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
  const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: tree, encoding: 'utf8' });
  if (tsc.status !== 0) throw new Error(`baseline ${ref} does not build: ${tsc.stdout}${tsc.stderr}`);
  return { tree, rev: rev.stdout.trim() };
}

const PUBLIC_PATH = '/public/bench';

function fixedRate(url, seconds, path = PATH) {
  const tokens = mintTokens(dir, Math.round(RATE * seconds));
  const r = spawnSync(process.execPath, [join(root, 'scripts/bench/fixed-rate.mjs'), url, String(RATE), String(seconds), tokens, path], { encoding: 'utf8' });
  const line = r.stdout.trim().split('\n').pop();
  if (r.status !== 0 || !line?.startsWith('{')) throw new Error(`fixed-rate load failed: ${r.stderr || r.stdout}`);
  return JSON.parse(line);
}

function saturate(url, path = PATH) {
  const tokens = mintTokens(dir, Math.max(RATE * 4, 30_000) * DURATION);
  const r = spawnSync('wrk', ['-t2', '-c50', `-d${DURATION}s`, '--latency', '-s', join(root, 'scripts/bench/load.lua'), url], {
    env: { ...process.env, TOKENS_FILE: tokens, WRK_THREADS: '2', BENCH_PATH: path },
    encoding: 'utf8',
  });
  const line = r.stdout.split('\n').filter((l) => l.startsWith('{')).pop();
  if (!line) throw new Error(`wrk failed: ${r.stderr || r.stdout}`);
  const res = JSON.parse(line);
  return { rps: res.requests / (res.durationUs / 1e6), non2xx: res.non2xx, errors: res.errors };
}

async function main() {
  const baseline = buildBaseline(args.baseline);
  const head = git('rev-parse', '--short', 'HEAD').stdout.trim();
  const dirty = git('status', '--porcelain', '--', 'src').stdout.trim() !== '';
  const builds = [
    { name: 'current', tree: root, label: `${head}${dirty ? ' + uncommitted src changes' : ''}` },
    { name: 'baseline', tree: baseline.tree, label: `${args.baseline} (${baseline.rev})` },
  ];

  const redis = STORES.includes('redis') ? await startRedisWithKey(children, dir, root) : undefined;
  const keysFile = redis?.keysFile ?? writeKeysFile(dir);
  const upstream = await children.start('upstream', 'node', ['scripts/bench/upstream.mjs'], {}, (o) => jsonPort(o) !== undefined);
  const upstreamUrl = `http://127.0.0.1:${jsonPort(upstream.output())}`;
  const bare = await children.start('bare-proxy', 'node', ['scripts/bench/bare-proxy.mjs'], { UPSTREAM: upstreamUrl }, (o) => jsonPort(o) !== undefined);
  const targets = [{ name: 'bare-http-proxy', url: `http://127.0.0.1:${jsonPort(bare.output())}`, pid: bare.pid }];
  for (const store of STORES) {
    for (const b of builds) {
      const port = await freePort();
      const env = store === 'redis' ? { KEYGATE_REDIS_URL: redis.url } : { KEYGATE_KEYS_FILE: keysFile };
      const child = await children.start(`${b.name}-${store}`, 'node', ['bin/keygate.js', 'serve'], keygateEnv(upstreamUrl, port, await freePort(), env), (o) => o.includes('keygate started'), b.tree);
      targets.push({ name: `${b.name}:${store}`, url: `http://127.0.0.1:${port}`, pid: child.pid });
    }
  }

  if (args.public) {
    // The current build with authentication out of the way: what the proxying around it costs.
    const policy = join(dir, 'public-policy.yaml');
    writeFileSync(policy, `routes:\n  - { method: GET, path: ${PATH}, scopes: [accounts:read] }\npublic:\n  - { method: GET, path: /public/* }\n`);
    const port = await freePort();
    const child = await children.start('current-public', 'node', ['bin/keygate.js', 'serve'], keygateEnv(upstreamUrl, port, await freePort(), { KEYGATE_KEYS_FILE: keysFile, KEYGATE_CONFIG: policy }), (o) => o.includes('keygate started'));
    targets.push({ name: 'current:public', url: `http://127.0.0.1:${port}`, pid: child.pid, path: PUBLIC_PATH });
  }

  for (const t of targets) fixedRate(t.url, 2, t.path); // warm-up: JIT, connection pools, key cache
  const samples = Object.fromEntries(targets.map((t) => [t.name, { cpuUsPerRequest: [], rps: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < targets.length; i++) {
      const t = targets[(i + round) % targets.length];
      const before = cpuUs(t.pid);
      const r = fixedRate(t.url, DURATION, t.path);
      const perRequest = (cpuUs(t.pid) - before) / r.requests;
      if (r.non2xx || r.errors) throw new Error(`${t.name}: ${r.non2xx} non-2xx and ${r.errors} errors at ${RATE} req/s`);
      samples[t.name].cpuUsPerRequest.push(perRequest);
      let line = `round ${round + 1}/${ROUNDS} ${t.name.padEnd(18)} ${perRequest.toFixed(1).padStart(6)} us CPU/request at ${RATE} req/s${r.late ? ` (behind schedule ${r.late}x)` : ''}`;
      if (args.saturate) {
        const s = saturate(t.url, t.path);
        if (s.non2xx || s.errors) throw new Error(`${t.name}: ${s.non2xx} non-2xx and ${s.errors} errors under wrk`);
        samples[t.name].rps.push(s.rps);
        line += `, ${Math.round(s.rps)} req/s saturated`;
      }
      process.stdout.write(`${line}\n`);
    }
  }

  const summary = Object.fromEntries(
    targets.map((t) => {
      const s = samples[t.name];
      return [t.name, { cpuUsPerRequest: round3(median(s.cpuUsPerRequest)), samples: s.cpuUsPerRequest.map(round3), ...(args.saturate && { rps: Math.round(median(s.rps)) }) }];
    }),
  );
  const bareCpu = summary['bare-http-proxy'].cpuUsPerRequest;
  const comparison = Object.fromEntries(
    STORES.map((store) => {
      const cur = summary[`current:${store}`];
      const base = summary[`baseline:${store}`];
      return [
        store,
        {
          cpuCurrentVsBaseline: round3(cur.cpuUsPerRequest / base.cpuUsPerRequest),
          cpuCurrentVsBare: round3(cur.cpuUsPerRequest / bareCpu),
          cpuBaselineVsBare: round3(base.cpuUsPerRequest / bareCpu),
          ...(args.saturate && { rpsCurrentVsBaseline: round3(cur.rps / base.rps), rpsCurrentVsBare: round3(cur.rps / summary['bare-http-proxy'].rps) }),
        },
      ];
    }),
  );
  const result = {
    startedAt: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version },
    builds: Object.fromEntries(builds.map((b) => [b.name, b.label])),
    baselineWorktree: join(dir, 'baseline'),
    settings: { ratePerSecond: RATE, durationSeconds: DURATION, rounds: ROUNDS, stores: STORES, saturate: Boolean(args.saturate), publicRoute: Boolean(args.public) },
    targets: summary,
    comparison,
  };
  console.log(`current = ${builds[0].label}, baseline = ${builds[1].label}`);
  for (const [name, s] of Object.entries(summary)) console.log(`${name.padEnd(18)} ${s.cpuUsPerRequest.toFixed(1).padStart(7)} us CPU/request (median of ${ROUNDS})${s.rps ? `, ${s.rps} req/s saturated` : ''}`);
  console.log(JSON.stringify(comparison, null, 2));
  writeResult(args.out, result);
}

runMain(main, () => {
  children.killAll();
  git('worktree', 'remove', '--force', join(dir, 'baseline'));
  rmSync(dir, { recursive: true, force: true });
});
