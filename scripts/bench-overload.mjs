#!/usr/bin/env node
// Overload sweep: Keygate (one process, Redis, a fresh token per request) and
// the bare http-proxy hop, side by side at 10, 100, 1,000 and 4,000
// connections, wrk with a 5 s timeout. See docs/performance.md
// "Overload sweep" and docs/operations.md "Overload".
//
//   npm run bench:overload                       the sweep, 10 s per step
//   npm run bench:overload -- --duration 3 --connections 10,100
//   npm run bench:overload -- --rounds 3         repeat the 4,000-connection step (RSS across rounds)
//   options: --max-in-flight N (Keygate's KEYGATE_MAX_IN_FLIGHT for this run)
//
// Per step: completed requests, socket errors (connect/read/write/timeout),
// non-2xx by Keygate reason (from its own metrics), p99, and the peak RSS
// sampled during the step; after the last round, RSS once the load stopped.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PATH, createChildren, currentRssMb, freePort, jsonPort, keygateEnv, mintTokens, runMain, sleep, startRedisWithKey, treeSum, writeResult } from './bench/lib.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '10,100,1000,4000' },
    rounds: { type: 'string', default: '3' },
    'max-in-flight': { type: 'string' },
    out: { type: 'string', default: join(root, 'bench-results', 'overload-latest.json') },
  },
});
const DURATION = Number(args.duration);
const SWEEP = args.connections.split(',').map(Number);
const ROUNDS = Number(args.rounds);

/** wrk in the background while RSS is sampled every 100 ms. */
function runWrk(url, tokensFile, connections, pid) {
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', ['-t2', `-c${connections}`, `-d${DURATION}s`, '--timeout', '5s', '--latency', '-s', join(root, 'scripts/bench/load.lua'), url], {
      env: { ...process.env, TOKENS_FILE: tokensFile ?? '', WRK_THREADS: '2', BENCH_PATH: PATH },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (err += c));
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, treeSum(pid, currentRssMb))), 100);
    child.on('close', () => {
      clearInterval(sampler);
      const line = out.split('\n').filter((l) => l.startsWith('{')).pop();
      if (!line) return reject(new Error(`wrk failed: ${err || out}`));
      const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
      resolve({ ...JSON.parse(line), peakRssMb: Math.round(peak), socketErrors: socketErrors ? { connect: +socketErrors[1], read: +socketErrors[2], write: +socketErrors[3], timeout: +socketErrors[4] } : { connect: 0, read: 0, write: 0, timeout: 0 } });
    });
  });
}

/** keygate_auth_rejections_total by reason, from the admin port. */
async function rejections(adminUrl) {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const out = {};
  for (const m of text.matchAll(/^keygate_auth_rejections_total\{code="(\d+)",reason="([a-z_]+)"\} (\d+)/gm)) out[m[2]] = Number(m[3]);
  return out;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-overload-'));
  const children = createChildren(dir, root);
  try {
    const { url: redisUrl } = await startRedisWithKey(children, dir, root);
    const upstream = await children.start('upstream', 'node', ['scripts/bench/upstream.mjs'], {}, (o) => jsonPort(o) !== undefined);
    const upstreamUrl = `http://127.0.0.1:${jsonPort(upstream.output())}`;
    const bare = await children.start('bare-proxy', 'node', ['scripts/bench/bare-proxy.mjs'], { UPSTREAM: upstreamUrl }, (o) => jsonPort(o) !== undefined);
    const port = await freePort();
    const adminPort = await freePort();
    const env = { KEYGATE_REDIS_URL: redisUrl, ...(args['max-in-flight'] && { KEYGATE_MAX_IN_FLIGHT: args['max-in-flight'] }) };
    const kg = await children.start('keygate', 'node', ['bin/keygate.js', 'serve'], keygateEnv(upstreamUrl, port, adminPort, env), (o) => o.includes('keygate started'));
    const targets = [
      { name: 'bare-http-proxy', url: `http://127.0.0.1:${jsonPort(bare.output())}`, pid: bare.pid },
      { name: 'keygate-redis', url: `http://127.0.0.1:${port}`, pid: kg.pid, admin: `http://127.0.0.1:${adminPort}` },
    ];
    const baseline = Object.fromEntries(targets.map((t) => [t.name, Math.round(currentRssMb(t.pid))]));
    const steps = [];
    const last = SWEEP.at(-1);
    for (const connections of SWEEP) {
      for (let round = 0; round < (connections === last ? ROUNDS : 1); round++) {
        for (const t of targets) {
          // Generous token budget: up to 40,000 req/s for the whole step.
          const tokens = mintTokens(dir, 40_000 * DURATION);
          const before = t.admin ? await rejections(t.admin) : {};
          const r = await runWrk(t.url, tokens, connections, t.pid);
          await sleep(500);
          const after = t.admin ? await rejections(t.admin) : {};
          const byReason = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]).filter(([, v]) => v > 0));
          const step = {
            target: t.name,
            connections,
            round: round + 1,
            completed: r.requests,
            socketErrors: r.socketErrors,
            non2xx: r.non2xx,
            non2xxByReason: byReason,
            p99Ms: r.p99Us / 1000,
            peakRssMb: r.peakRssMb,
            rssAfterMb: Math.round(currentRssMb(t.pid)),
          };
          steps.push(step);
          process.stdout.write(`${JSON.stringify(step)}\n`);
        }
      }
    }
    await sleep(2_000);
    const settled = Object.fromEntries(targets.map((t) => [t.name, Math.round(currentRssMb(t.pid))]));
    console.log('\n| connections | target | completed | socket errors | non-2xx (by reason) | p99 | peak RSS |');
    console.log('|---|---|---|---|---|---|---|');
    for (const s of steps) {
      const errs = Object.values(s.socketErrors).reduce((a, b) => a + b, 0);
      const reasons = Object.entries(s.non2xxByReason).map(([k, v]) => `${v} ${k}`).join(', ');
      console.log(`| ${s.connections}${s.round > 1 ? ` (round ${s.round})` : ''} | ${s.target} | ${s.completed} | ${errs} | ${s.non2xx}${reasons ? ` (${reasons})` : ''} | ${s.p99Ms} ms | ${s.peakRssMb} MB |`);
    }
    console.log(`RSS baseline ${JSON.stringify(baseline)}; 2 s after the last step ${JSON.stringify(settled)}`);
    writeResult(args.out, { startedAt: new Date().toISOString(), settings: { durationSeconds: DURATION, sweep: SWEEP, rounds: ROUNDS, wrkTimeoutSeconds: 5 }, baselineRssMb: baseline, settledRssMb: settled, steps });
  } finally {
    children.killAll();
  }
}

runMain(main, () => {});

