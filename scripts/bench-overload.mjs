#!/usr/bin/env node
// @ts-check
// Overload sweep: Keygate (one process, Redis, a fresh token per request) and
// the bare http-proxy hop, side by side at 10, 100, 1,000 and 4,000
// connections, wrk with a 5 s timeout. See docs/performance.md
// "Overload sweep" and docs/running.md "Overload".
//
// Per step: completed requests, socket errors (connect/read/write/timeout),
// non-2xx by Keygate reason (from its own metrics), p99, and the peak RSS
// sampled during the step; after the last round, RSS once the load stopped.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ROOT as root,
  createChildren,
  currentRssMb,
  mintTokens,
  parseOptions,
  parseWrkOutput,
  runMain,
  sleep,
  startBareProxy,
  startKeygate,
  startRedisWithKey,
  startUpstream,
  treeSum,
  wrkCommand,
  writeResult,
} from './bench/lib.mjs';

const USAGE = `
Usage: npm run bench:overload -- [options]

  --duration S          seconds per step (default 10)
  --connections LIST    the connection counts swept (default 10,100,1000,4000)
  --rounds N            repeat the last step N times (RSS across rounds; default 3)
  --max-in-flight N     Keygate's KEYGATE_MAX_IN_FLIGHT for this run
  --out FILE            result file (default bench-results/overload-latest.json)

  npm run bench:overload -- --duration 3 --connections 10,100
`;
const args = parseOptions(
  {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '10,100,1000,4000' },
    rounds: { type: 'string', default: '3' },
    'max-in-flight': { type: 'string' },
    out: { type: 'string', default: join(root, 'bench-results', 'overload-latest.json') },
  },
  USAGE,
);
const DURATION = Number(args.duration);
const SWEEP = args.connections.split(',').map(Number);
const ROUNDS = Number(args.rounds);

/** @typedef {{ connect: number, read: number, write: number, timeout: number }} SocketErrors */

/**
 * wrk in the background while RSS is sampled every 100 ms.
 * @param {string} url
 * @param {string} tokensFile
 * @param {number} connections
 * @param {number} pid
 * @returns {Promise<import('./bench/lib.mjs').WrkResult & { peakRssMb: number, socketErrors: SocketErrors }>}
 */
function runWrk(url, tokensFile, connections, pid) {
  return new Promise((resolve, reject) => {
    const { argv, env } = wrkCommand({ url, tokensFile, seconds: DURATION, connections, threads: 2, timeout: '5s' });
    const child = spawn('wrk', argv, { env });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (err += c));
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, treeSum(pid, currentRssMb))), 100);
    child.on('close', () => {
      clearInterval(sampler);
      let res;
      try {
        res = parseWrkOutput(out, err);
      } catch (e) {
        return reject(e instanceof Error ? e : new Error(String(e)));
      }
      const m = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
      const socketErrors = m
        ? { connect: Number(m[1]), read: Number(m[2]), write: Number(m[3]), timeout: Number(m[4]) }
        : { connect: 0, read: 0, write: 0, timeout: 0 };
      resolve({ ...res, peakRssMb: Math.round(peak), socketErrors });
    });
  });
}

/**
 * keygate_auth_rejections_total by reason, from the admin port.
 * @param {string} adminUrl
 */
async function rejections(adminUrl) {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  /** @type {Record<string, number>} */
  const out = {};
  for (const m of text.matchAll(/^keygate_auth_rejections_total\{code="(\d+)",reason="([a-z_]+)"\} (\d+)/gm)) {
    out[m[2] ?? ''] = Number(m[3]);
  }
  return out;
}

/** @param {number} pid */
const rssMb = (pid) => Math.round(currentRssMb(pid) ?? NaN);

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-overload-'));
  const children = createChildren(dir, root);
  try {
    const { url: redisUrl } = await startRedisWithKey(children, dir, root);
    const upstream = await startUpstream(children);
    const bare = await startBareProxy(children, upstream.url);
    const maxInFlight = args['max-in-flight'];
    const env = { KEYGATE_REDIS_URL: redisUrl, ...(maxInFlight && { KEYGATE_MAX_IN_FLIGHT: maxInFlight }) };
    const kg = await startKeygate(children, 'keygate', upstream.url, env);
    /** @type {Array<{ name: string, url: string, pid: number, admin?: string }>} */
    const targets = [
      { name: 'bare-http-proxy', url: bare.url, pid: bare.pid },
      { name: 'keygate-redis', url: kg.url, pid: kg.pid, admin: kg.adminUrl },
    ];
    const baseline = Object.fromEntries(targets.map((t) => [t.name, rssMb(t.pid)]));
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
          const byReason = Object.fromEntries(
            Object.entries(after)
              .map(([k, v]) => [k, v - (before[k] ?? 0)])
              .filter(([, v]) => Number(v) > 0),
          );
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
            rssAfterMb: rssMb(t.pid),
          };
          steps.push(step);
          process.stdout.write(`${JSON.stringify(step)}\n`);
        }
      }
    }
    await sleep(2_000);
    const settled = Object.fromEntries(targets.map((t) => [t.name, rssMb(t.pid)]));
    console.log('\n| connections | target | completed | socket errors | non-2xx (by reason) | p99 | peak RSS |');
    console.log('|---|---|---|---|---|---|---|');
    for (const s of steps) {
      const errs = Object.values(s.socketErrors).reduce((a, b) => a + b, 0);
      const reasons = Object.entries(s.non2xxByReason)
        .map(([k, v]) => `${v} ${k}`)
        .join(', ');
      const connections = `${s.connections}${s.round > 1 ? ` (round ${s.round})` : ''}`;
      const non2xx = `${s.non2xx}${reasons ? ` (${reasons})` : ''}`;
      console.log(
        `| ${connections} | ${s.target} | ${s.completed} | ${errs} | ${non2xx} | ${s.p99Ms} ms | ${s.peakRssMb} MB |`,
      );
    }
    console.log(`RSS baseline ${JSON.stringify(baseline)}; 2 s after the last step ${JSON.stringify(settled)}`);
    writeResult(args.out, {
      startedAt: new Date().toISOString(),
      settings: { durationSeconds: DURATION, sweep: SWEEP, rounds: ROUNDS, wrkTimeoutSeconds: 5 },
      baselineRssMb: baseline,
      settledRssMb: settled,
      steps,
    });
  } finally {
    children.killAll();
  }
}

runMain(main, () => {});
