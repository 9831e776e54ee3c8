#!/usr/bin/env node
// @ts-check
// A flood of forged tokens from one IP (issue 42), side by side in one run: this build without
// failedAuthLimit (every forged token is parsed, its key read from the cache and its signature
// checked: 401 40106) against this build with failedAuthLimit, whose budget the warm-up has spent
// (every forged token is answered 429 ip_blocked before any of that). CPU per request from /proc at
// a fixed offered rate, rounds alternating, as bench:ab measures. Run after `npm run build`:
//   node scripts/bench-forged.mjs [--rate 1500] [--duration 5] [--rounds 4] [--pin] [--baseline DIR]
// --baseline DIR adds a third target in the same rounds: DIR's build (another checkout, built) with
// the spent budget, to compare a change to the blocked path before and after, side by side.
// Each round's statuses are checked: the first target must answer 401 to every forged token, the
// second 429 (ip_blocked) to every one, or the figures would compare something else.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ROOT as root,
  createChildren,
  cpuUs,
  get,
  median,
  mintSignedTokens,
  mint,
  parseOptions,
  pinToCpu,
  round3,
  runFixedRate,
  runMain,
  startKeygate,
  startRedisWithKey,
  startUpstream,
  writeResult,
} from './bench/lib.mjs';

const USAGE = `Usage: node scripts/bench-forged.mjs [--rate N] [--duration S] [--rounds N] [--pin] [--log-level L] [--baseline DIR] [--out FILE]`;
const args = parseOptions(
  {
    rate: { type: 'string', default: '1500' },
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '4' },
    pin: { type: 'boolean' },
    'log-level': { type: 'string', default: 'info' },
    baseline: { type: 'string' },
    out: { type: 'string', default: join(root, 'bench-results', 'forged-latest.json') },
  },
  USAGE,
);
const RATE = Number(args.rate);
const DURATION = Number(args.duration);
const ROUNDS = Number(args.rounds);
const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-forged-'));
const children = createChildren(dir, root);
// As bench:ab --pin: the measured processes on CPU 1, this harness, the load generator and Redis on CPU 0.
if (args.pin) pinToCpu(process.pid, 0);

/** Forged tokens of the bench key: right shape and key, wrong secret. */
const forged = (/** @type {number} */ count) =>
  mintSignedTokens(dir, count, (nonce) => mint(nonce, 'not-the-bench-secret-0123456789'));

async function main() {
  const loadBefore = loadavg().map(round3);
  const redis = await startRedisWithKey(children, dir, root);
  const upstream = await startUpstream(children);
  const policy = (/** @type {string} */ name, /** @type {string} */ extra) => {
    const file = join(dir, `${name}.yaml`);
    writeFileSync(
      file,
      `routes:\n  - { method: GET, path: /api/v3/viewer/accounts, scopes: [accounts:read] }\n${extra}`,
    );
    return file;
  };
  const spentEnv = { KEYGATE_CONFIG: policy('spent', 'failedAuthLimit: { rate: 1/h, burst: 1 }\n') };
  /** @type {Array<{ name: string, status: string, env: Record<string, string>, cwd?: string }>} */
  const targets = [
    { name: 'forged, no failedAuthLimit', status: '401', env: { KEYGATE_CONFIG: policy('today', '') } },
    { name: 'forged, IP budget spent', status: '429', env: spentEnv },
  ];
  if (args.baseline) targets.push({ name: 'spent, baseline build', status: '429', env: spentEnv, cwd: args.baseline });
  /** @type {Array<{ name: string, url: string, pid: number, status: string }>} */
  const running = [];
  for (const [i, t] of targets.entries()) {
    const kg = await startKeygate(
      children,
      `forged-${i}`,
      upstream.url,
      {
        KEYGATE_REDIS_URL: redis.url,
        KEYGATE_LOG_LEVEL: args['log-level'],
        ...t.env,
      },
      t.cwd,
    );
    if (args.pin) pinToCpu(kg.pid, 1);
    running.push({ name: t.name, url: kg.url, pid: kg.pid, status: t.status });
  }
  for (const t of running) runFixedRate(t.url, RATE, 2, forged(RATE * 2)); // warm-up; spends the second one's budget
  /** @type {Record<string, { cpuUsPerRequest: number[], statuses: Record<string, number> }>} */
  const samples = Object.fromEntries(running.map((t) => [t.name, { cpuUsPerRequest: [], statuses: {} }]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < running.length; i++) {
      const t = /** @type {{ name: string, url: string, pid: number, status: string }} */ (
        running[(i + round) % running.length]
      );
      const before = cpuUs(t.pid) ?? NaN;
      const r = runFixedRate(t.url, RATE, DURATION, forged(RATE * DURATION));
      const perRequest = ((cpuUs(t.pid) ?? NaN) - before) / r.requests;
      get(samples, t.name).cpuUsPerRequest.push(perRequest);
      if (r.errors) throw new Error(`${t.name}: ${r.errors} errors`);
      const statuses = get(samples, t.name).statuses;
      for (const [s, n] of Object.entries(r.statuses ?? {})) statuses[s] = (statuses[s] ?? 0) + n;
      if ((r.statuses?.[t.status] ?? 0) !== r.requests)
        throw new Error(`${t.name}: expected ${t.status} to every request, got ${JSON.stringify(r.statuses)}`);
      console.log(
        `round ${round + 1}/${ROUNDS} ${t.name.padEnd(28)} ${perRequest.toFixed(1).padStart(6)} us CPU/request (${r.non2xx} of ${r.requests} refused)`,
      );
    }
  }
  const med = Object.fromEntries(running.map((t) => [t.name, median(get(samples, t.name).cpuUsPerRequest)]));
  const [today, spent] = running.map((t) => med[t.name] ?? NaN);
  console.log(
    `\nmedian CPU per forged request: no budget ${today?.toFixed(1)} us, budget spent ${spent?.toFixed(1)} us, ratio ${((spent ?? NaN) / (today ?? NaN)).toFixed(2)}`,
  );
  console.log(`load average before ${loadBefore.join(' ')}, after ${loadavg().map(round3).join(' ')}`);
  const perRound = get(samples, running[1]?.name ?? '').cpuUsPerRequest.map(
    (s, i) => s / (get(samples, running[0]?.name ?? '').cpuUsPerRequest[i] ?? NaN),
  );
  console.log(`per-round ratio spent/none: ${perRound.map((x) => x.toFixed(2)).join(' ')}`);
  const baseline = running[2];
  const perRoundBaseline = baseline
    ? get(samples, baseline.name).cpuUsPerRequest.map(
        (s, i) => s / (get(samples, running[0]?.name ?? '').cpuUsPerRequest[i] ?? NaN),
      )
    : [];
  if (baseline)
    console.log(
      `baseline build, budget spent: ${med[baseline.name]?.toFixed(1)} us, ratio ${((med[baseline.name] ?? NaN) / (today ?? NaN)).toFixed(2)}; per round ${perRoundBaseline.map((x) => x.toFixed(2)).join(' ')}`,
    );
  writeResult(args.out, {
    rate: RATE,
    duration: DURATION,
    rounds: ROUNDS,
    pinned: Boolean(args.pin),
    logLevel: args['log-level'],
    median: med,
    perRoundRatio: perRound.map(round3),
    ...(baseline && { baseline: args.baseline, perRoundRatioBaseline: perRoundBaseline.map(round3) }),
    samples,
    loadBefore,
    loadAfter: loadavg().map(round3),
  });
}

runMain(main, () => {
  children.killAll();
  rmSync(dir, { recursive: true, force: true });
});
