// @ts-check
// The ledger of the request path (`npm run bench -- --ledger`, docs/performance.md "The ledger"): where
// Keygate's own CPU and allocations per request go, step by step, beside the whole request and the bare
// undici hop's.
//
// Two halves, each honest about what it is:
// - per step (scripts/bench/ledger-steps.mjs, a child process): each step of REQUEST_STEPS, then the
//   response head and the outcome record, driven in a row on prepared requests: CPU per call from
//   process.cpuUsage and V8 heap bytes per call across batches that ran no collection;
// - whole request, from a real run: Keygate as `keygate serve` (and the bare undici hop) at a fixed offered
//   rate (scripts/bench/fixed-rate.mjs), CPU of the serving process from /proc, bytes from --trace-gc-nvp.
// The rest of the whole request (Node's HTTP server and parser, undici, the sockets, the loop) is the
// difference; the bare hop pays its own share of the same. Bytes per request do not depend on the load;
// CPU figures do, so every table says the load average it was measured at.
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { ROOT, median, round3, writeResult } from './lib.mjs';

/** @typedef {{ step: string, cpuNs: number, bytes: number }} StepRow */
/** @typedef {{ cpuUs: number, bytes: number }} Whole */

/**
 * @template T
 * @param {object} o
 * @param {Record<'bare-undici' | 'public' | 'embedded' | 'redis', T>} o.targets
 * @param {(t: T) => Whole} o.paced one measured run of a target at the fixed rate
 * @param {number} o.rounds
 * @param {string} o.keysFile
 * @param {string} o.policyFile a policy with the public route /public/* and the bench route
 * @param {string} o.redisUrl
 * @param {string} o.logLevel
 * @param {boolean} o.short
 * @param {string} o.out
 */
export function runLedger(o) {
  const loadBefore = loadavg().map((x) => x.toFixed(2));
  console.log(`ledger: load average before ${loadBefore.join(' ')}`);
  // The whole request, alternating round by round, after a warm-up run of each.
  const names = /** @type {const} */ (['bare-undici', 'public', 'embedded', 'redis']);
  /** @type {Record<string, Whole[]>} */
  const runs = Object.fromEntries(names.map((n) => [n, []]));
  for (const n of names) o.paced(o.targets[n]);
  for (let round = 0; round < o.rounds; round++)
    for (const n of names) /** @type {Whole[]} */ (runs[n]).push(o.paced(o.targets[n]));
  /** @type {Record<string, Whole>} */
  const whole = {};
  for (const n of names) {
    const r = /** @type {Whole[]} */ (runs[n]);
    whole[n] = { cpuUs: round3(median(r.map((x) => x.cpuUs))), bytes: Math.round(median(r.map((x) => x.bytes))) };
  }
  // The steps, in a process of their own.
  const child = spawnSync(
    process.execPath,
    [
      '--expose-gc',
      '--max-semi-space-size=64',
      '--min-semi-space-size=64',
      join(ROOT, 'scripts/bench/ledger-steps.mjs'),
      o.keysFile,
      o.policyFile,
      o.redisUrl,
      o.short ? '500' : '2000',
      o.short ? '2' : '5',
      o.logLevel,
    ],
    { encoding: 'utf8', maxBuffer: 10_000_000 },
  );
  const line = child.stdout.trim().split('\n').pop() ?? '';
  if (child.status !== 0 || !line.startsWith('{'))
    throw new Error(`ledger steps failed: ${child.stderr || child.stdout}`);
  /** @type {{ paths: Record<string, StepRow[]> }} */
  const steps = JSON.parse(line);
  const loadAfter = loadavg().map((x) => x.toFixed(2));
  const bare = /** @type {Whole} */ (whole['bare-undici']);
  console.log(
    `\nledger (log level ${o.logLevel}; load average ${loadBefore.join(' ')} before, ${loadAfter.join(' ')} after): ` +
      'per step, CPU and V8 bytes per call driven in one process; whole request from a real run at a fixed rate',
  );
  /** @type {Record<string, unknown>} */
  const result = {};
  for (const [path, rows] of Object.entries(steps.paths)) {
    const w = /** @type {Whole} */ (whole[path]);
    const sumNs = rows.reduce((a, r) => a + r.cpuNs, 0);
    const sumBytes = rows.reduce((a, r) => a + r.bytes, 0);
    console.log(`\n${path}\n| step | CPU per request | bytes per request |\n|---|---|---|`);
    for (const r of rows) console.log(`| ${r.step} | ${(r.cpuNs / 1000).toFixed(2)} µs | ${r.bytes} |`);
    console.log(`| **Keygate's steps, summed** | ${(sumNs / 1000).toFixed(2)} µs | ${sumBytes} |`);
    console.log(
      `| rest: Node's HTTP server, undici, sockets, loop (whole − steps) | ${(w.cpuUs - sumNs / 1000).toFixed(2)} µs | ${w.bytes - sumBytes} |`,
    );
    console.log(
      `| **whole request** (real run) | ${w.cpuUs.toFixed(2)} µs (${(w.cpuUs / bare.cpuUs).toFixed(2)}× bare) | ${w.bytes} (${(w.bytes / bare.bytes).toFixed(2)}× bare) |`,
    );
    console.log(`| bare undici hop, whole request | ${bare.cpuUs.toFixed(2)} µs | ${bare.bytes} |`);
    result[path] = { steps: rows, stepsCpuUs: round3(sumNs / 1000), stepsBytes: sumBytes, whole: w };
  }
  writeResult(o.out, {
    ledger: {
      loadAverage: { before: loadBefore, after: loadAfter },
      logLevel: o.logLevel,
      bareUndici: bare,
      ...result,
    },
  });
}
