#!/usr/bin/env node
// @ts-check
// Keygate benchmark harness. See docs/performance.md.
//
// Headline: CPU time per request of each target (all its threads and child
// processes, from /proc), with req/s and p50/p99 beside it and every ratio
// taken against the bare http-proxy hop measured in the same run.
//
// Everything runs on loopback. Targets are measured alternately, round by
// round, so that drift on a shared machine affects all of them alike. Load
// comes from wrk (a separate process) with pre-minted tokens: every request
// carries a fresh nonce.
import { spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  API_KEY,
  PATH,
  ROOT as root,
  SECRET,
  createChildren,
  cpuUs,
  countSyscalls,
  gcReader,
  loopTurns,
  pinToCpu,
  pinTree,
  straceAvailable,
  TRACE_GC,
  currentRssMb,
  get,
  median,
  mint,
  mintSignedTokens,
  mintTokens as mintTokensIn,
  parseOptions,
  peakRssMb,
  redisCli,
  requireWrk,
  round3,
  runFixedRate,
  runMain,
  runWrkSync,
  startBareProxy,
  startBareUndici,
  startKeygate,
  startRedisWithKey,
  startUpstream,
  treeSum,
  writeResult,
} from './bench/lib.mjs';
import { runLedger } from './bench/ledger.mjs';
import { freePort } from './harness/free-port.mjs';
import { claims, signWithKey, token } from './harness/mint.mjs';
import { runKeygate } from './harness/spawn-keygate.mjs';
import { forwardAuthNginxArgs, nginxArgs, nginxAvailable, nginxLuaArgs, nginxLuaMissing } from './bench/nginx.mjs';

/** @typedef {import('./bench/lib.mjs').WrkResult} WrkResult */
/** @typedef {import('./bench/lib.mjs').TokenMix} TokenMix */
/**
 * One process (tree) under load. `pids`: several trees measured together (nginx + Keygate);
 * `noTokens`: sent without tokens; `redis`: its Redis commands and CPU are counted too.
 * `gc`: its collections, for a Node process started with TRACE_GC (bytes allocated per request, scavenges).
 * `loopPid`: the process whose main thread runs its event loop (nginx: its worker), for --syscalls.
 * @typedef {{ name: string, url: string, pid: number, pids?: number[], noTokens?: boolean, path?: string, redis?: { port: number, pid: number }, gc?: ReturnType<typeof gcReader>, loopPid?: number }} Target
 */
/**
 * One wrk run with what the harness measured around it.
 * @typedef {WrkResult & { cpuUsPerRequest: number, redisCpuUsPerRequest?: number, redisCallsPerRequest?: Record<string, number>, redisReadsPerRequest?: number, bytesPerRequest?: number, scavengesPer10k?: number }} Measured
 */

const USAGE = `
Usage: npm run bench -- [options]   (node scripts/bench.mjs after npm run build)

  (no option)                 full run (3 rounds x 10 s per target)
  --short                     a few seconds per target (CI)
  --duration S --rounds N     seconds per measurement, rounds per target
  --million                   add a 1,000,000-request RSS run
  --connections 10,50         the connection counts swept (default both), side by side in the tables
  --log-level info|warn       every Keygate's KEYGATE_LOG_LEVEL (default info, as in production)
  --no-pin                    do not pin (default with 2+ CPUs and taskset: every measured target on CPU 0,
                              this harness, wrk, the upstream and Redis on CPU 1)
  --syscalls                  after the rounds, per connection count, each target once more under
                              strace -c (its event-loop thread only): syscalls and event-loop turns
                              (epoll_wait calls) per request, which do not depend on the machine's load
  --targets a,b --forward-only
                              only these targets (and the bare hop), forwarded traffic only
                              (keygate-redis-limited / keygate-embedded-limited: the same with a
                              rate limit on every key, never reached: what checking it costs)
  --limit-cost [--rate 1500]  only that cost: the four Keygate targets at a fixed offered rate
                              (open loop, below saturation), alternating, CPU per request paired by round
  --alg-cost [--rate 1500]    only that cost (issue 34): one Keygate (Redis) at a fixed offered rate, a fresh
                              token per request from an HS256, an EdDSA and an ES256 key, and a forged token
                              of each (signed with another secret / key pair), alternating, paired by round
  --history-cost [--rate 1500]
                              only that cost (issue 27): one Keygate (Redis) at a fixed offered rate, forged
                              HS256 tokens for a key rotated 1,000 times (300 s grace each) and for a key
                              with no history, alternating, CPU per request paired by round
  --workers-cost [--rate 1500]
                              only that comparison (issue 30): Keygate (Redis) with KEYGATE_WORKERS=2 against 1,
                              alternating round by round: wrk req/s at 50 connections, CPU per request at a
                              fixed offered rate, RSS of all processes
  --unknown-flood [--rate 1500] [--baseline-dir DIR]
                              only that cost (issue 30): tokens of a valid shape naming random keys (each
                              sub new, so no negative cache entry helps) at a fixed rate against Keygate
                              (Redis): after a first second, Redis commands per request (commandstats) and
                              CPU per request; --baseline-dir adds another built tree's Keygate, measured alike
  --assertion-cost [--rate 1500]
                              only that cost (issue 32): Keygate (Redis, fresh token per request) without the
                              signed assertion, with it in identity mode (EdDSA), and in request mode with an
                              EdDSA and with an ES256 signing key; alternating, CPU per request paired by round
  --ledger [--rate 1500]      only the ledger of the request path (scripts/bench/ledger.mjs): per step of
                              REQUEST_STEPS, then the response head and the outcome record, CPU and V8 bytes
                              per call driven in one process on prepared requests, for the public route, the
                              embedded store and Redis; beside each path's whole request from a real run at a
                              fixed offered rate (CPU from /proc, bytes from --trace-gc-nvp) and the bare undici
                              hop's; the rest (Node's HTTP server, undici, the sockets) is the difference
  --out FILE                  result file (default bench-results/latest.json)
`;
const args = parseOptions(
  {
    short: { type: 'boolean' },
    duration: { type: 'string' },
    rounds: { type: 'string' },
    connections: { type: 'string', default: '10,50' },
    'log-level': { type: 'string', default: 'info' },
    'no-pin': { type: 'boolean' },
    syscalls: { type: 'boolean' },
    million: { type: 'boolean' },
    'limit-cost': { type: 'boolean' },
    'alg-cost': { type: 'boolean' },
    'history-cost': { type: 'boolean' },
    'workers-cost': { type: 'boolean' },
    'unknown-flood': { type: 'boolean' },
    'baseline-dir': { type: 'string' },
    'assertion-cost': { type: 'boolean' },
    ledger: { type: 'boolean' },
    rate: { type: 'string', default: '1500' },
    targets: { type: 'string' },
    'forward-only': { type: 'boolean' },
    out: { type: 'string', default: join(root, 'bench-results', 'latest.json') },
  },
  USAGE,
);
const DURATION = Number(args.duration ?? (args.short ? 2 : 10));
const ROUNDS = Number(args.rounds ?? (args.short ? 1 : 3));
const CONNECTION_SWEEP = args.connections.split(',').map(Number);
const MAX_CONNECTIONS = CONNECTION_SWEEP.at(-1) ?? 50;
const PUBLIC_PATH = '/public/bench';
const THREADS = 2;
/** @type {Array<[withLimit: string, without: string]>} */
const LIMITED_PAIRS = [
  ['keygate-redis-limited', 'keygate-redis'],
  ['keygate-embedded-limited', 'keygate-embedded'],
];

if (!args.ledger) requireWrk('bench'); // the ledger's load is fixed-rate.mjs
if (!['info', 'warn'].includes(args['log-level'])) {
  console.error(`--log-level: info or warn, not ${args['log-level']}`);
  process.exit(2);
}
if (args.syscalls && !straceAvailable()) {
  console.error('--syscalls needs strace on PATH (apt-get install -y strace)');
  process.exit(2);
}
/** The CPU every measured target is pinned to; this harness and all it starts otherwise run on LOAD_CPU. */
const TARGET_CPU = 0;
const LOAD_CPU = 1;
const PIN = !args['no-pin'] && cpus().length >= 2 && !spawnSync('taskset', ['-V']).error;
// Children inherit the mask: Redis, the upstream and every wrk run start from here on LOAD_CPU,
// and each measured target is moved to TARGET_CPU once it listens (pin()).
if (PIN) pinToCpu(process.pid, LOAD_CPU);
/** @param {{ pid: number }} t */
const pin = (t) => {
  if (PIN) pinTree(t.pid, TARGET_CPU);
};

const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-'));
const children = createChildren(dir, root);
/** @param {number} count @param {TokenMix} [mix] */
const mintTokens = (count, mix) => mintTokensIn(dir, count, mix);

/**
 * @param {string} url
 * @param {string | undefined} tokensFile
 * @param {number} seconds
 * @param {{ connections?: number, path?: string }} [options]
 */
function runWrk(url, tokensFile, seconds, { connections = MAX_CONNECTIONS, path = PATH } = {}) {
  return runWrkSync({ url, tokensFile, seconds, connections, threads: THREADS, path });
}

/**
 * CPU per request with a rate limit on every key against without, at the same fixed offered
 * rate (saturated req/s on this shared machine swings far more than the cost being measured).
 * Targets alternate round by round; each limited/unlimited pair is compared within its round.
 * @param {Target[]} targets
 */
function limitCost(targets) {
  const rate = Number(args.rate);
  /** @type {Record<string, ReturnType<typeof fixedRate>[]>} */
  const results = Object.fromEntries(targets.map((t) => [t.name, []]));
  for (const t of targets) fixedRate(t, rate, 2); // warm-up: JIT, key caches, pools
  for (let round = 0; round < ROUNDS; round++) {
    const order = targets.map((_, i) => /** @type {Target} */ (targets[(i + round) % targets.length]));
    for (const t of order) {
      const r = fixedRate(t, rate, DURATION);
      get(results, t.name).push(r);
      const redis = r.redisCallsPerRequest ? ` redis/req ${JSON.stringify(r.redisCallsPerRequest)}` : '';
      process.stdout.write(
        `round ${round + 1}/${ROUNDS} ${t.name.padEnd(25)} ${r.cpuUsPerRequest.toFixed(1)} us CPU/request at ${rate} req/s${redis}\n`,
      );
    }
  }
  /** @type {Record<string, Record<string, unknown> & { cpuUsPerRequest: number, unlimitedCpuUsPerRequest: number, ratioMedianOfRounds: number, ratios: number[] }>} */
  const out = {};
  for (const [withLimit, without] of LIMITED_PAIRS) {
    const a = get(results, withLimit);
    const b = get(results, without);
    const ratios = a.map((r, i) => r.cpuUsPerRequest / (b[i]?.cpuUsPerRequest ?? NaN));
    const redisA = a.at(-1);
    const redisB = b.at(-1);
    const o = {
      cpuUsPerRequest: round3(median(a.map((r) => r.cpuUsPerRequest))),
      unlimitedCpuUsPerRequest: round3(median(b.map((r) => r.cpuUsPerRequest))),
      ratioMedianOfRounds: round3(median(ratios)),
      ratios: ratios.map(round3),
      ...(a[0]?.redisCallsPerRequest && {
        redisCallsPerRequest: redisA?.redisCallsPerRequest,
        unlimitedRedisCallsPerRequest: redisB?.redisCallsPerRequest,
        redisCpuUsPerRequest: round3(median(a.map((r) => r.redisCpuUsPerRequest ?? NaN))),
        unlimitedRedisCpuUsPerRequest: round3(median(b.map((r) => r.redisCpuUsPerRequest ?? NaN))),
      }),
    };
    out[withLimit] = o;
    console.log(
      `limit on every key, ${rate} req/s: ${withLimit} ${o.cpuUsPerRequest} µs/req vs ${without} ${o.unlimitedCpuUsPerRequest} µs/req; per-round ratios ${JSON.stringify(o.ratios)}, median ${o.ratioMedianOfRounds}×`,
    );
  }
  writeResult(args.out, {
    limitCost: { ratePerSecond: rate, durationSeconds: DURATION, rounds: ROUNDS, ...out },
  });
}

/**
 * A flood of tokens naming keys that do not exist (issue 30): valid shape, a random `sub` each (so
 * no negative cache entry is ever hit twice), at a fixed offered rate, every answer 404 10013. A
 * first second warms up, then Redis commands per request over the rest (commandstats) and CPU per
 * request. Targets measured one after another, rounds alternating.
 * @param {Target[]} targets Keygates on one Redis (`redis` set)
 */
function unknownFlood(targets) {
  const rate = Number(args.rate);
  /** @param {number} n */
  const floodTokens = (n) =>
    mintSignedTokens(dir, n, (nonce) =>
      token(`kg_${randomBytes(12).toString('hex')}`, 'flood-secret-0123456789abcdef', { nonce: String(nonce) }),
    );
  /** @type {Record<string, Array<{ cpuUsPerRequest: number, redisCallsPerRequest?: Record<string, number> }>>} */
  const results = Object.fromEntries(targets.map((t) => [t.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = targets.map((_, i) => /** @type {Target} */ (targets[(i + round) % targets.length]));
    for (const t of order) {
      fixedRate(t, rate, 1, floodTokens(rate), 404); // the first second
      const r = fixedRate(t, rate, DURATION, floodTokens(rate * DURATION), 404);
      get(results, t.name).push(r);
      const commands = Object.values(r.redisCallsPerRequest ?? {}).reduce((a, b) => a + b, 0);
      process.stdout.write(
        `round ${round + 1}/${ROUNDS} ${t.name.padEnd(24)} ${r.cpuUsPerRequest.toFixed(1)} us CPU/request, ${round3(commands)} Redis commands/request ${JSON.stringify(r.redisCallsPerRequest)}\n`,
      );
    }
  }
  /** @type {Record<string, object>} */
  const out = {};
  for (const t of targets) {
    const rs = get(results, t.name);
    const commands = rs.map((r) => Object.values(r.redisCallsPerRequest ?? {}).reduce((a, b) => a + b, 0));
    out[t.name] = {
      cpuUsPerRequest: round3(median(rs.map((r) => r.cpuUsPerRequest))),
      redisCommandsPerRequest: round3(median(commands)),
      byCommand: rs.at(-1)?.redisCallsPerRequest,
    };
    console.log(`${t.name}: ${JSON.stringify(out[t.name])}`);
  }
  writeResult(args.out, { unknownFlood: { ratePerSecond: rate, durationSeconds: DURATION, rounds: ROUNDS, ...out } });
}

/**
 * KEYGATE_WORKERS=2 against one process (issue 30), both on one Redis, measured alternately round
 * by round: saturated req/s (wrk, MAX_CONNECTIONS), CPU per request at a fixed offered rate (all
 * processes of each tree) and RSS (summed over the tree). Ratios are paired within a round. wrk,
 * the upstream and Redis run on the same cores as the workers: on a host with spare cores the
 * answer may differ, and this says nothing about one.
 * @param {Target} one Keygate (Redis), one process
 * @param {string} redisUrl
 * @param {string} upstreamUrl
 * @param {number} budget tokens for one saturated run
 */
async function workersCost(one, redisUrl, upstreamUrl, budget) {
  const kg2 = await startKeygate(children, 'keygate-redis-2-workers', upstreamUrl, {
    KEYGATE_REDIS_URL: redisUrl,
    KEYGATE_WORKERS: '2',
  });
  const two = { name: 'keygate-redis-2-workers', url: kg2.url, pid: kg2.pid };
  try {
    const rate = Number(args.rate);
    for (const t of [one, two]) {
      runWrk(t.url, mintTokens(20_000), 1); // warm-up: both workers, JIT, key cache
      fixedRate(t, rate, 2);
    }
    /** @type {Record<string, { rps: number[], cpu: number[], rssMb: number[] }>} */
    const m = { 1: { rps: [], cpu: [], rssMb: [] }, 2: { rps: [], cpu: [], rssMb: [] } };
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? /** @type {const} */ ([1, 2]) : /** @type {const} */ ([2, 1]);
      for (const n of order) {
        const t = n === 1 ? one : two;
        const w = runWrk(t.url, mintTokens(budget), DURATION);
        if (w.non2xx || w.errors) throw new Error(`${t.name}: ${w.non2xx} non-2xx, ${w.errors} errors under wrk`);
        const cpu = fixedRate(t, rate, DURATION).cpuUsPerRequest;
        const rss = treeSum(t.pid, currentRssMb);
        const r = get(m, String(n));
        r.rps.push(w.rps);
        r.cpu.push(cpu);
        r.rssMb.push(rss);
        process.stdout.write(
          `round ${round + 1}/${ROUNDS} workers=${n}: ${Math.round(w.rps)} req/s (wrk, ${MAX_CONNECTIONS} conn.), ${cpu.toFixed(1)} us CPU/request at ${rate} req/s, RSS ${Math.round(rss)} MB\n`,
        );
      }
    }
    const [a, b] = [get(m, '1'), get(m, '2')];
    /** @param {number[]} xs @param {number[]} ys */
    const paired = (xs, ys) => ys.map((y, i) => round3(y / (xs[i] ?? NaN)));
    const out = {
      rounds: ROUNDS,
      rps1: Math.round(median(a.rps)),
      rps2: Math.round(median(b.rps)),
      rpsFactors: paired(a.rps, b.rps),
      rpsFactor: round3(median(paired(a.rps, b.rps))),
      cpuUsPerRequest1: round3(median(a.cpu)),
      cpuUsPerRequest2: round3(median(b.cpu)),
      cpuFactor: round3(median(paired(a.cpu, b.cpu))),
      rssMb1: Math.round(median(a.rssMb)),
      rssMb2: Math.round(median(b.rssMb)),
      cores: cpus().length,
      note: 'wrk, the upstream and Redis share the same cores as the workers',
    };
    console.log(`KEYGATE_WORKERS=2 vs 1: ${JSON.stringify(out)}`);
    return out;
  } finally {
    kg2.child.kill('SIGTERM');
  }
}

/**
 * CPU per request of one Keygate (Redis) by the alg of the key that signed the token (issue 34), at
 * one fixed offered rate: HS256, EdDSA and ES256 keys, each with good tokens (forwarded) and forged
 * ones (signed with another secret or key pair: 401 40106, refused after the signature check, before
 * the nonce). The six token kinds alternate round by round; ratios are paired within a round.
 * @param {Target} t a Keygate on `redisUrl`
 * @param {string} redisUrl
 */
async function algCost(t, redisUrl) {
  const rate = Number(args.rate);
  /** @type {Record<string, (count: number) => string>} */
  const kinds = {
    HS256: (n) => mintTokens(n),
    'HS256 forged': (n) => mintTokens(n, { replay: 0, bad: 1 }),
  };
  /** @type {Array<Record<string, unknown>>} */
  const keys = [];
  for (const alg of /** @type {const} */ (['EdDSA', 'ES256'])) {
    const pair = () =>
      alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const own = pair();
    const other = pair();
    const apiKey = `bench-${alg.toLowerCase()}`;
    keys.push({
      apiKey,
      id: apiKey,
      alg,
      publicKey: own.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
      scopes: ['accounts:read'],
    });
    /** @param {import('node:crypto').KeyObject} privateKey */
    const signed = (privateKey) => (/** @type {number} */ n) =>
      mintSignedTokens(dir, n, (nonce) =>
        signWithKey({ alg, typ: 'JWT' }, claims(apiKey, { nonce: String(nonce) }), privateKey),
      );
    kinds[alg] = signed(own.privateKey);
    kinds[`${alg} forged`] = signed(other.privateKey);
  }
  const keysFile = join(dir, 'alg-keys.json');
  writeFileSync(keysFile, JSON.stringify({ keys }));
  await runKeygate(['keys', 'import', keysFile], { KEYGATE_REDIS_URL: redisUrl }, undefined, { cwd: root });
  /** @type {Record<string, number[]>} */
  const cpu = Object.fromEntries(Object.keys(kinds).map((k) => [k, []]));
  const names = Object.keys(kinds);
  for (const k of names) fixedRate(t, rate, 2, get(kinds, k)(rate * 2), k.endsWith('forged') ? 401 : 200); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    const order = names.map((_, i) => /** @type {string} */ (names[(i + round) % names.length]));
    for (const k of order) {
      const r = fixedRate(t, rate, DURATION, get(kinds, k)(rate * DURATION), k.endsWith('forged') ? 401 : 200);
      get(cpu, k).push(r.cpuUsPerRequest);
      process.stdout.write(
        `round ${round + 1}/${ROUNDS} ${k.padEnd(14)} ${r.cpuUsPerRequest.toFixed(1)} us CPU/request\n`,
      );
    }
  }
  /** @type {Record<string, { cpuUsPerRequest: number, vsHs256: number, ratios: number[] }>} */
  const out = {};
  for (const k of names) {
    const base = get(cpu, k.endsWith('forged') ? 'HS256 forged' : 'HS256');
    const ratios = get(cpu, k).map((x, i) => round3(x / (base[i] ?? NaN)));
    out[k] = { cpuUsPerRequest: round3(median(get(cpu, k))), vsHs256: round3(median(ratios)), ratios };
    console.log(
      `${k.padEnd(14)} ${out[k].cpuUsPerRequest} µs CPU/request at ${rate} req/s, ${out[k].vsHs256}× ${k.endsWith('forged') ? 'a forged HS256' : 'HS256'} (per round ${JSON.stringify(ratios)})`,
    );
  }
  writeResult(args.out, { algCost: { ratePerSecond: rate, durationSeconds: DURATION, rounds: ROUNDS, ...out } });
}

/**
 * CPU per forged request for a key rotated ROTATES times (issue 27: rotation history is bounded, so a
 * forged token costs at most that many HMACs) against a key with no history, on one Keygate (Redis)
 * at one fixed offered rate. The rotated key is what keys/key-changes.ts rotateKey leaves after
 * ROTATES rotations with the default 300 s grace, imported like any key. Both kinds are forged HS256
 * tokens (another secret: 401 40106, refused at the signature check, before the nonce); they
 * alternate round by round and the ratio is paired within a round.
 * @param {Target} t a Keygate on `redisUrl`
 * @param {string} redisUrl
 */
async function historyCost(t, redisUrl) {
  const ROTATES = 1000;
  const rate = Number(args.rate);
  const { rotateKey } = await import('../dist/keys/key-changes.js');
  const { parseKeyRecord, toExternal } = await import('../dist/keys/key-record.js');
  /** @param {string} apiKey */
  const fresh = (apiKey) => {
    const { record, errors } = parseKeyRecord(
      { apiKey, apiSecret: `${apiKey}-secret-0123456789abcdef`, scopes: ['accounts:read'] },
      apiKey,
    );
    if (!record) throw new Error(errors.join('; '));
    return record;
  };
  let rotated = fresh('bench-rotated');
  for (let i = 0; i < ROTATES; i++) rotated = rotateKey(rotated, 300_000, Date.now()).record;
  const keysFile = join(dir, 'history-keys.json');
  writeFileSync(keysFile, JSON.stringify({ keys: [toExternal(fresh('bench-fresh')), toExternal(rotated)] }));
  await runKeygate(['keys', 'import', keysFile], { KEYGATE_REDIS_URL: redisUrl }, undefined, { cwd: root });
  const forged = (/** @type {string} */ apiKey) => (/** @type {number} */ n) =>
    mintSignedTokens(dir, n, (nonce) => mint(nonce, 'forged-secret-0123456789abcdef', apiKey));
  /** @type {Record<string, (count: number) => string>} */
  const kinds = { 'no history': forged('bench-fresh'), [`${ROTATES} rotates`]: forged('bench-rotated') };
  const names = Object.keys(kinds);
  /** @type {Record<string, number[]>} */
  const cpu = Object.fromEntries(names.map((k) => [k, []]));
  for (const k of names) fixedRate(t, rate, 2, get(kinds, k)(rate * 2), 401); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    const order = names.map((_, i) => /** @type {string} */ (names[(i + round) % names.length]));
    for (const k of order) {
      const r = fixedRate(t, rate, DURATION, get(kinds, k)(rate * DURATION), 401);
      get(cpu, k).push(r.cpuUsPerRequest);
      process.stdout.write(
        `round ${round + 1}/${ROUNDS} forged, ${k.padEnd(12)} ${r.cpuUsPerRequest.toFixed(1)} us CPU/request\n`,
      );
    }
  }
  const base = get(cpu, 'no history');
  const ratios = get(cpu, `${ROTATES} rotates`).map((x, i) => round3(x / (base[i] ?? NaN)));
  const out = {
    previousSecretsStored: rotated.previousSecrets?.length ?? 0,
    noHistoryCpuUsPerRequest: round3(median(base)),
    rotatedCpuUsPerRequest: round3(median(get(cpu, `${ROTATES} rotates`))),
    vsNoHistory: round3(median(ratios)),
    ratios,
  };
  console.log(
    `forged token, key after ${ROTATES} rotates: ${out.rotatedCpuUsPerRequest} µs CPU/request at ${rate} req/s, no history ${out.noHistoryCpuUsPerRequest} µs: ${out.vsNoHistory}× (per round ${JSON.stringify(ratios)}; previous secrets kept: ${out.previousSecretsStored})`,
  );
  writeResult(args.out, {
    historyCost: { ratePerSecond: rate, durationSeconds: DURATION, rounds: ROUNDS, rotates: ROTATES, ...out },
  });
}

/**
 * What the signed identity assertion (X-Keygate-Assertion, issue 32) costs per request: Keygate on
 * Redis with a fresh token per request, without it, with it in identity mode (cached per key:
 * the bench key's assertion is signed about once per 45 s) and in request mode (signed per
 * request) with an Ed25519 and with a P-256 key. The four run side by side and alternate round
 * by round; ratios against "none" are paired within a round.
 * @param {Target} none Keygate (Redis) without the assertion
 * @param {string} redisUrl
 * @param {(name: string, env: Record<string, string>) => Promise<Target & { child: import('./bench/lib.mjs').Child }>} start
 */
async function assertionCost(none, redisUrl, start) {
  const rate = Number(args.rate);
  /** @param {'EdDSA' | 'ES256'} alg */
  const keysFile = (alg) => {
    const pair =
      alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const file = join(dir, `assertion-${alg}.json`);
    const jwk = { ...pair.privateKey.export({ format: 'jwk' }), kid: `bench-${alg}`, alg, use: 'sig' };
    writeFileSync(file, JSON.stringify({ keys: [jwk] }), { mode: 0o600 });
    return file;
  };
  /** @param {string} name @param {'EdDSA' | 'ES256'} alg @param {'identity' | 'request'} mode */
  const withAssertion = (name, alg, mode) =>
    start(name, {
      KEYGATE_REDIS_URL: redisUrl,
      KEYGATE_ASSERTION_KEYS_FILE: keysFile(alg),
      KEYGATE_ASSERTION_AUDIENCE: 'bench-upstream',
      KEYGATE_ASSERTION_MODE: mode,
    });
  const targets = [
    { ...none, name: 'none' },
    await withAssertion('identity EdDSA', 'EdDSA', 'identity'),
    await withAssertion('request EdDSA', 'EdDSA', 'request'),
    await withAssertion('request ES256', 'ES256', 'request'),
  ];
  /** @type {Record<string, number[]>} */
  const cpu = Object.fromEntries(targets.map((t) => [t.name, []]));
  for (const t of targets) fixedRate(t, rate, 2); // warm-up: JIT, key cache, the identity cache
  for (let round = 0; round < ROUNDS; round++) {
    const order = targets.map((_, i) => /** @type {Target} */ (targets[(i + round) % targets.length]));
    for (const t of order) {
      const r = fixedRate(t, rate, DURATION);
      get(cpu, t.name).push(r.cpuUsPerRequest);
      process.stdout.write(
        `round ${round + 1}/${ROUNDS} ${t.name.padEnd(15)} ${r.cpuUsPerRequest.toFixed(1)} us CPU/request at ${rate} req/s\n`,
      );
    }
  }
  /** @type {Record<string, { cpuUsPerRequest: number, vsNone: number, ratios: number[] }>} */
  const out = {};
  for (const t of targets) {
    const ratios = get(cpu, t.name).map((x, i) => round3(x / (get(cpu, 'none')[i] ?? NaN)));
    out[t.name] = { cpuUsPerRequest: round3(median(get(cpu, t.name))), vsNone: round3(median(ratios)), ratios };
    console.log(
      `${t.name.padEnd(15)} ${out[t.name]?.cpuUsPerRequest} µs CPU/request at ${rate} req/s, ${out[t.name]?.vsNone}× none (per round ${JSON.stringify(ratios)})`,
    );
  }
  for (const t of targets.slice(1)) /** @type {{ child: { kill(s: string): void } }} */ (t).child.kill('SIGTERM');
  writeResult(args.out, {
    assertionCost: { ratePerSecond: rate, durationSeconds: DURATION, rounds: ROUNDS, ...out },
  });
}

/**
 * @param {Target} t
 * @param {number} rate
 * @param {number} seconds
 * @param {string} [tokens] a token file (default: fresh good HS256 tokens for the bench key)
 * @param {number} [expect] every answer forwarded (200: any 2xx), or every one refused with this status
 * @returns {{ cpuUsPerRequest: number, redisCpuUsPerRequest?: number, redisCallsPerRequest?: Record<string, number> }}
 */
function fixedRate(t, rate, seconds, tokens = mintTokens(Math.round(rate * seconds)), expect = 200) {
  if (t.redis) redisCli(t.redis.port, 'config', 'resetstat');
  const cpuBefore = treeSum(t.pid, cpuUs);
  const redisCpuBefore = t.redis ? (cpuUs(t.redis.pid) ?? NaN) : 0;
  const res = runFixedRate(t.url, rate, seconds, tokens, PATH);
  const unexpected = expect === 200 ? res.non2xx : res.requests - (res.statuses?.[expect] ?? 0);
  if (unexpected || res.errors) {
    throw new Error(
      `${t.name}: ${unexpected} answers not ${expect} (non-2xx by status: ${JSON.stringify(res.statuses)}) and ${res.errors} errors at ${rate} req/s`,
    );
  }
  const requests = res.requests;
  return {
    cpuUsPerRequest: (treeSum(t.pid, cpuUs) - cpuBefore) / requests,
    ...(t.redis && {
      redisCpuUsPerRequest: ((cpuUs(t.redis.pid) ?? NaN) - redisCpuBefore) / requests,
      redisCallsPerRequest: commandStats(t.redis.port, requests),
    }),
  };
}

/**
 * INFO commandstats since the last RESETSTAT, per request: { evalsha: 1, time: 1, … }.
 * @param {number} port
 * @param {number} requests
 */
function commandStats(port, requests) {
  /** @type {Record<string, number>} */
  const out = {};
  for (const m of redisCli(port, 'info', 'commandstats').matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const command = m[1] ?? '';
    if (command !== 'info' && command !== 'config|resetstat') out[command] = round3(Number(m[2]) / requests);
  }
  return out;
}

/** Socket reads redis-server has made since it started (INFO stats total_reads_processed). @param {number} port */
function redisReads(port) {
  return Number(/total_reads_processed:(\d+)/.exec(redisCli(port, 'info', 'stats'))?.[1] ?? NaN);
}

/** @param {number} port */
function redisInfoMemory(port) {
  return Number(/used_memory:(\d+)/.exec(redisCli(port, 'info', 'memory'))?.[1] ?? NaN);
}

async function main() {
  const startedAt = new Date().toISOString();
  const loadBefore = loadavg().map(round3);
  console.log(
    `load average before: ${loadBefore.join(' ')}${PIN ? `; targets pinned to CPU ${TARGET_CPU}, wrk, upstream and Redis to CPU ${LOAD_CPU}` : '; not pinned'}`,
  );
  // --- infrastructure -------------------------------------------------------
  const { port: redisPort, url: redisUrl, keysFile } = await startRedisWithKey(children, dir, root);
  const redis = {
    port: redisPort,
    pid: Number(/process_id:(\d+)/.exec(redisCli(redisPort, 'info', 'server'))?.[1]),
  };
  const upstream = await startUpstream(children);
  const upstreamUrl = upstream.url;
  // Every Node target logs its collections (TRACE_GC): bytes allocated per request and scavenges beside CPU.
  const bare = await startBareProxy(children, upstreamUrl, [TRACE_GC]);
  const bareUndici = await startBareUndici(children, upstreamUrl, [TRACE_GC]);
  pin(bare);
  pin(bareUndici);
  /** @param {string} name the log's name */
  const gcOf = (name) => gcReader(join(dir, `${name}.log`));

  /** @param {string} name @param {Record<string, string>} env @returns {Promise<Target & { child: import('./bench/lib.mjs').Child }>} */
  async function keygate(name, env) {
    const { child, url, pid } = await startKeygate(
      children,
      name,
      upstreamUrl,
      { KEYGATE_LOG_LEVEL: args['log-level'], ...env },
      root,
      [TRACE_GC],
    );
    if (env.KEYGATE_WORKERS === undefined) pin({ pid });
    return { name, child, url, pid, gc: gcOf(name) };
  }
  const kgRedis = await keygate('keygate-redis', { KEYGATE_REDIS_URL: redisUrl });
  const kgMemory = await keygate('keygate-embedded', { KEYGATE_KEYS_FILE: keysFile });
  const policy = join(dir, 'public-policy.yaml');
  writeFileSync(
    policy,
    `routes:\n  - { method: GET, path: ${PATH}, scopes: [accounts:read] }\npublic:\n  - { method: GET, path: /public/* }\n`,
  );
  const kgPublic = {
    ...(await keygate('keygate-public', { KEYGATE_KEYS_FILE: keysFile, KEYGATE_CONFIG: policy })),
    path: PUBLIC_PATH,
    noTokens: true,
  };
  // A limit on every key (the policy default), far above what the load reaches: every request runs
  // the GCRA check and gets RateLimit headers, none is refused.
  const limitedPolicy = join(dir, 'limited-policy.yaml');
  writeFileSync(
    limitedPolicy,
    `routes:\n  - { method: GET, path: ${PATH}, scopes: [accounts:read] }\ndefaultRateLimit: { rate: 1000000/s }\n`,
  );
  const kgRedisLimited = await keygate('keygate-redis-limited', {
    KEYGATE_REDIS_URL: redisUrl,
    KEYGATE_CONFIG: limitedPolicy,
  });
  const kgMemoryLimited = await keygate('keygate-embedded-limited', {
    KEYGATE_KEYS_FILE: keysFile,
    KEYGATE_CONFIG: limitedPolicy,
  });
  for (const t of [kgRedis, kgRedisLimited]) t.redis = redis;

  /** @type {Target[]} */
  const targets = [
    { name: 'upstream-direct', url: upstreamUrl, pid: upstream.pid, noTokens: true },
    { name: 'bare-http-proxy', url: bare.url, pid: bare.pid, noTokens: true, gc: gcOf('bare-proxy') },
    { name: 'bare-undici', url: bareUndici.url, pid: bareUndici.pid, noTokens: true, gc: gcOf('bare-undici') },
    kgPublic,
    kgRedis,
    kgRedisLimited,
    kgMemory,
    kgMemoryLimited,
  ];
  if (nginxAvailable()) {
    /** @param {number} port */
    const answers = (port) => spawnSync('curl', ['-s', '-o', '/dev/null', `http://127.0.0.1:${port}/`]).status === 0;
    const port = await freePort();
    const nginx = await children.start('nginx', 'nginx', nginxArgs(dir, port, upstreamUrl), {}, () => answers(port));
    const nginxPid = /** @type {number} */ (nginx.pid);
    pin({ pid: nginxPid });
    targets.splice(1, 0, {
      name: 'nginx',
      url: `http://127.0.0.1:${port}`,
      pid: nginxPid,
      loopPid: firstChild(nginxPid),
      noTokens: true,
    });
    // Forward-auth: the shipped nginx config asking Keygate (Redis store, as keygate-redis); CPU is nginx's plus Keygate's.
    const faPolicy = join(dir, 'forward-auth-policy.yaml');
    writeFileSync(
      faPolicy,
      `routes:\n  - { method: GET, path: ${PATH}, scopes: [accounts:read] }\ntrustedProxies: [127.0.0.1/32]\n`,
    );
    const kgFa = await keygate('keygate-forward-auth', {
      KEYGATE_REDIS_URL: redisUrl,
      KEYGATE_MODE: 'forward-auth',
      KEYGATE_CONFIG: faPolicy,
    });
    const faPort = await freePort();
    const faArgs = forwardAuthNginxArgs(dir, root, faPort, kgFa.url, upstreamUrl);
    const faNginx = await children.start('nginx-forward-auth', 'nginx', faArgs, {}, () => answers(faPort));
    const faPid = /** @type {number} */ (faNginx.pid);
    pin({ pid: faPid });
    targets.push({
      name: 'nginx+forward-auth',
      url: `http://127.0.0.1:${faPort}`,
      pid: faPid,
      pids: [faPid, kgFa.pid],
    });
  } else console.log('nginx not on PATH: the nginx reference is not measured (apt-get install -y nginx)');
  // The peer a user would choose instead: nginx+lua doing Keygate's checks on the same Redis (nginx.mjs).
  const luaMissing = nginxLuaMissing();
  if (luaMissing === undefined) {
    const port = await freePort();
    const luaArgs = nginxLuaArgs(dir, port, upstreamUrl, { redisPort, keys: { [API_KEY]: SECRET } });
    // A request without a token is refused by the peer itself: it answers once it runs.
    const lua = await children.start('nginx-lua', 'nginx', luaArgs, {}, () => answers401(port));
    const luaPid = /** @type {number} */ (lua.pid);
    pin({ pid: luaPid });
    targets.push({
      name: 'nginx-lua',
      url: `http://127.0.0.1:${port}`,
      pid: luaPid,
      loopPid: firstChild(luaPid),
      redis,
    });
  } else console.log(`the nginx+lua peer is not measured: it needs ${luaMissing} (apt-get install -y them)`);
  if (args.targets) {
    const keep = new Set(['bare-http-proxy', ...args.targets.split(',')]);
    for (let i = targets.length - 1; i >= 0; i--) if (!keep.has(targets[i]?.name ?? '')) targets.splice(i, 1);
  }
  if (args.ledger) {
    const bareUndiciTarget = { name: 'bare-undici', url: bareUndici.url, pid: bareUndici.pid, gc: gcOf('bare-undici') };
    const targets = { 'bare-undici': bareUndiciTarget, public: kgPublic, embedded: kgMemory, redis: kgRedis };
    const paced = (/** @type {Target} */ t) => {
      const seconds = DURATION;
      const tokens = mintTokens(Math.round(Number(args.rate) * seconds));
      t.gc?.start();
      const cpuBefore = treeSum(t.pid, cpuUs);
      const res = runFixedRate(t.url, Number(args.rate), seconds, tokens, t.path ?? PATH);
      if (res.non2xx || res.errors) throw new Error(`${t.name}: ${res.non2xx} non-2xx, ${res.errors} errors`);
      const gc = t.gc?.stop(res.requests, res.seconds);
      return { cpuUs: (treeSum(t.pid, cpuUs) - cpuBefore) / res.requests, bytes: gc?.bytesPerRequest ?? NaN };
    };
    return runLedger({
      targets,
      paced,
      rounds: ROUNDS,
      keysFile,
      policyFile: policy,
      redisUrl,
      logLevel: args['log-level'],
      short: Boolean(args.short),
      out: args.out,
    });
  }
  if (args['limit-cost']) return limitCost([kgRedis, kgRedisLimited, kgMemory, kgMemoryLimited]);
  if (args['alg-cost']) return algCost(kgRedis, redisUrl);
  if (args['unknown-flood']) {
    /** @type {Target[]} */
    const flooded = [kgRedis];
    if (args['baseline-dir']) {
      const before = await startKeygate(
        children,
        'keygate-redis-baseline',
        upstreamUrl,
        { KEYGATE_REDIS_URL: redisUrl },
        args['baseline-dir'],
      );
      flooded.unshift({ name: 'keygate-redis-baseline', url: before.url, pid: before.pid, redis });
    }
    return unknownFlood(flooded);
  }
  if (args['history-cost']) return historyCost(kgRedis, redisUrl);
  if (args['assertion-cost']) return assertionCost(kgRedis, redisUrl, keygate);
  if (args['workers-cost']) {
    const workers = await workersCost(kgRedis, redisUrl, upstreamUrl, Math.ceil(15_000 * DURATION));
    return writeResult(args.out, { workers });
  }
  const bareTarget = targets.find((t) => t.name === 'bare-http-proxy');
  if (!bareTarget) throw new Error('bench: the bare http-proxy hop is not measured');

  // --- warm-up and token budget ---------------------------------------------
  const warm = runWrk(bareTarget.url, mintTokens(20_000), 1);
  // Keygate can outrun the bare hop measured here: leave room so tokens never run out (a wrapped
  // token file would replay tokens and turn forwarded traffic into refusals).
  const budget = Math.ceil(Math.max(warm.rps, 5_000) * 4 * DURATION);
  for (const t of targets) {
    runWrk(t.url, t.noTokens ? undefined : mintTokens(Math.ceil(warm.rps * 2)), 1, { path: t.path });
  }

  // --- scenario 1: forwarded traffic at each connection count, alternating targets
  /** @type {Record<string, Record<string, Summary>>} */
  const sweep = {};
  /** @type {number | undefined} */
  let nonceBytesPerRequest;
  for (const connections of CONNECTION_SWEEP) {
    /** @type {Record<string, Measured[]>} */
    const results = Object.fromEntries(targets.map((t) => [t.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = targets.map((_, i) => /** @type {Target} */ (targets[(i + round) % targets.length]));
      for (const t of order) {
        const tokens = t.noTokens ? undefined : mintTokens(budget);
        const memBefore = t === kgRedis ? redisInfoMemory(redisPort) : NaN;
        if (t.redis) redisCli(redisPort, 'config', 'resetstat');
        const cpuBefore = targetSum(t, cpuUs);
        const redisCpuBefore = cpuUs(redis.pid) ?? NaN;
        const readsBefore = redisReads(redisPort);
        t.gc?.start();
        const w = runWrk(t.url, tokens, DURATION, { connections, path: t.path });
        /** @type {Measured} */
        const r = { ...w, cpuUsPerRequest: (targetSum(t, cpuUs) - cpuBefore) / w.requests };
        if (t.gc) {
          const gc = t.gc.stop(w.requests, DURATION);
          r.bytesPerRequest = gc.bytesPerRequest;
          r.scavengesPer10k = gc.scavengesPer10k;
        }
        if (t.redis) r.redisCpuUsPerRequest = ((cpuUs(redis.pid) ?? NaN) - redisCpuBefore) / r.requests;
        // Commands Redis ran per request, from INFO commandstats (those run inside the admit script included).
        if (t.redis) r.redisCallsPerRequest = commandStats(redisPort, r.requests);
        // Socket reads Redis made per request (INFO stats): below 1 when commands of one loop turn share a write.
        if (t.redis) r.redisReadsPerRequest = (redisReads(redisPort) - readsBefore) / r.requests;
        if (t === kgRedis && nonceBytesPerRequest === undefined) {
          nonceBytesPerRequest = (redisInfoMemory(redisPort) - memBefore) / (r.requests - r.non2xx);
        }
        get(results, t.name).push(r);
        const redisCalls = r.redisCallsPerRequest ? ` redis/req ${JSON.stringify(r.redisCallsPerRequest)}` : '';
        process.stdout.write(
          `c=${connections} round ${round + 1}/${ROUNDS} ${t.name.padEnd(17)} cpu ${r.cpuUsPerRequest.toFixed(1)} us/req${gcText(r)} ${Math.round(r.rps)} req/s p50 ${r.p50Us} us p99 ${r.p99Us} us non2xx ${r.non2xx}${redisCalls}\n`,
        );
      }
    }
    // Syscalls and loop turns per request: one more run per target under strace (countSyscalls).
    /** @type {Record<string, { calls: Record<string, number>, turns: number }>} */
    const syscalls = {};
    if (args.syscalls)
      for (const t of targets) {
        const tokens = t.noTokens ? undefined : mintTokens(budget);
        const counter = countSyscalls(t.loopPid ?? t.pid, join(dir, `strace-${t.name}-${connections}.txt`));
        await counter.attached();
        const w = runWrk(t.url, tokens, DURATION, { connections, path: t.path });
        const calls = await counter.stop();
        /** @type {Record<string, number>} */
        const perRequest = {};
        for (const [name, n] of Object.entries(calls))
          if (n / w.requests >= 0.005) perRequest[name] = round3(n / w.requests);
        syscalls[t.name] = { calls: perRequest, turns: round3(loopTurns(calls) / w.requests) };
        process.stdout.write(
          `c=${connections} under strace ${t.name.padEnd(17)} ${syscalls[t.name]?.turns} loop turns/req, syscalls/req ${JSON.stringify(perRequest)} (non2xx ${w.non2xx})\n`,
        );
      }
    /** @type {Record<string, Summary>} */
    const summary = {};
    for (const t of targets) {
      const rs = get(results, t.name);
      const last = rs.at(-1);
      const sys = syscalls[t.name];
      summary[t.name] = {
        cpuUsPerRequest: Math.round(median(rs.map((r) => r.cpuUsPerRequest)) * 10) / 10,
        rps: Math.round(median(rs.map((r) => r.rps))),
        p50Us: median(rs.map((r) => r.p50Us)),
        p99Us: median(rs.map((r) => r.p99Us)),
        non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
        errors: rs.reduce((a, r) => a + r.errors, 0),
        tokensWrapped: rs.some((r) => r.tokensWrapped === 1),
        peakRssMb: Math.round(targetSum(t, peakRssMb) * 10) / 10,
        ...(rs[0]?.bytesPerRequest !== undefined && {
          bytesPerRequest: Math.round(median(rs.map((r) => r.bytesPerRequest ?? NaN))),
          scavengesPer10k: round3(median(rs.map((r) => r.scavengesPer10k ?? NaN))),
        }),
        ...(sys && { loopTurnsPerRequest: sys.turns, syscallsPerRequest: sys.calls }),
        ...(rs[0]?.redisCallsPerRequest && {
          redisCallsPerRequest: last?.redisCallsPerRequest,
          redisCpuUsPerRequest: Math.round(median(rs.map((r) => r.redisCpuUsPerRequest ?? NaN)) * 10) / 10,
          redisReadsPerRequest: round3(median(rs.map((r) => r.redisReadsPerRequest ?? NaN))),
        }),
      };
    }
    // The floor a Node hop can reach: every target against the bare undici hop of the same run (issue 29).
    const undiciS = summary['bare-undici'];
    if (undiciS)
      for (const s of Object.values(summary)) {
        s.cpuVsUndici = round3(s.cpuUsPerRequest / undiciS.cpuUsPerRequest);
        if (s.bytesPerRequest !== undefined && undiciS.bytesPerRequest !== undefined) {
          s.bytesVsUndici = round3(s.bytesPerRequest / undiciS.bytesPerRequest);
          s.scavengesVsUndici = round3((s.scavengesPer10k ?? NaN) / (undiciS.scavengesPer10k ?? NaN));
        }
      }
    const bareS = get(summary, 'bare-http-proxy');
    for (const s of Object.values(summary)) {
      s.vsBare = {
        cpuPerRequest: round3(s.cpuUsPerRequest / bareS.cpuUsPerRequest),
        throughput: round3(s.rps / bareS.rps),
        addedP50Ms: round3((s.p50Us - bareS.p50Us) / 1000),
        addedP99Ms: round3((s.p99Us - bareS.p99Us) / 1000),
      };
    }
    // Paired per round (the two targets ran back to back), so machine drift between rounds cancels out.
    for (const [withLimit, without] of LIMITED_PAIRS) {
      const a = summary[withLimit];
      if (!a || !summary[without]) continue;
      const unlimited = get(results, without);
      const ratios = get(results, withLimit).map((r, i) => r.cpuUsPerRequest / (unlimited[i]?.cpuUsPerRequest ?? NaN));
      a.cpuPerRequestVsUnlimited = { medianOfRoundRatios: round3(median(ratios)), rounds: ratios.map(round3) };
    }
    sweep[String(connections)] = summary;
  }
  const headline = get(sweep, String(MAX_CONNECTIONS));
  const summary = headline;
  /** @param {string} name */
  const vsBare = (name) => /** @type {VsBare} */ (get(headline, name).vsBare);
  /** @param {string} name */
  const ratio = (name) => ({
    cpuPerRequestVsBare: vsBare(name).cpuPerRequest,
    throughputVsBare: vsBare(name).throughput,
    addedP99MsByConnections: Object.fromEntries(
      CONNECTION_SWEEP.map((c) => [c, get(get(sweep, String(c)), name).vsBare?.addedP99Ms]),
    ),
  });
  printTable(sweep);
  printSideBySide(sweep);
  const loadAfterSweep = loadavg().map(round3);
  console.log(`load average before: ${loadBefore.join(' ')}, after the saturation runs: ${loadAfterSweep.join(' ')}`);
  const loadAverage = { before: loadBefore, afterSaturation: loadAfterSweep };
  const pinned = PIN ? { targetCpu: TARGET_CPU, loadCpu: LOAD_CPU } : false;
  if (args['forward-only'])
    return writeResult(args.out, { loadAverage, pinned, logLevel: args['log-level'], forwardByConnections: sweep });

  // --- scenario 2: mixed (10% replays, 10% bad signatures) and pure rejections
  // The authenticated targets this run measured (--targets may have left one out).
  const authTargets = [kgRedis, kgMemory].filter((t) => summary[t.name] !== undefined);
  /** @type {Record<string, object>} */
  const mixed = {};
  for (const t of authTargets) {
    const r = runWrk(t.url, mintTokens(budget, { replay: 0.1, bad: 0.1 }), DURATION);
    mixed[t.name] = {
      rps: Math.round(r.rps),
      p50Us: r.p50Us,
      p99Us: r.p99Us,
      non2xxShare: round3(r.non2xx / r.requests),
    };
  }
  /** @type {Record<string, object>} */
  const rejection = {};
  for (const t of authTargets) {
    const forwarded = get(summary, t.name);
    const cpuBefore = treeSum(t.pid, cpuUs);
    const r = runWrk(t.url, mintTokens(budget, { replay: 0, bad: 1 }), DURATION);
    const cpu = (treeSum(t.pid, cpuUs) - cpuBefore) / r.requests;
    rejection[t.name] = {
      rps: Math.round(r.rps),
      p50Us: r.p50Us,
      p99Us: r.p99Us,
      non2xxShare: round3(r.non2xx / r.requests),
      vsForward: round3(r.rps / forwarded.rps),
      cpuUsPerRequest: Math.round(cpu * 10) / 10,
      cpuVsForward: round3(cpu / forwarded.cpuUsPerRequest),
    };
  }

  // --- scenario 3: KEYGATE_WORKERS=2 -----------------------------------------
  let workers;
  try {
    workers = await workersCost(kgRedis, redisUrl, upstreamUrl, budget);
  } catch (err) {
    workers = { unsupported: String(err instanceof Error ? err.message : err).slice(0, 200) };
  }

  // --- scenario 4 (optional): RSS over 1,000,000 requests ---------------------
  let million;
  if (args.million) {
    /** @type {number[]} */
    const rss = [];
    const before = currentRssMb(kgRedis.pid) ?? NaN;
    let total = 0;
    const t0 = Date.now();
    while (total < 1_000_000) {
      const r = runWrk(kgRedis.url, mintTokens(budget), DURATION);
      total += r.requests;
      rss.push(Math.round(currentRssMb(kgRedis.pid) ?? NaN));
      process.stdout.write(`million: ${total} requests, RSS ${rss.at(-1)} MB\n`);
    }
    million = {
      requests: total,
      seconds: Math.round((Date.now() - t0) / 1000),
      rssStartMb: Math.round(before),
      rssSamplesMb: rss,
      rssEndMb: rss.at(-1),
    };
  }

  const measured = ['keygate-redis', 'keygate-embedded', 'keygate-public'].filter((n) => headline[n] !== undefined);
  const result = {
    startedAt,
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version },
    settings: {
      durationSeconds: DURATION,
      rounds: ROUNDS,
      connections: CONNECTION_SWEEP,
      wrkThreads: THREADS,
      keygateLogLevel: args['log-level'],
      pinned,
    },
    loadAverage: { ...loadAverage, after: loadavg().map(round3) },
    forward: headline,
    forwardByConnections: sweep,
    ratios: Object.fromEntries(measured.map((n) => [n, ratio(n)])),
    mixed10pctReplay10pctBad: mixed,
    pureRejection: rejection,
    workers,
    redisNonceBytesPerRequest: Math.round(nonceBytesPerRequest ?? NaN),
    ...(million && { million }),
  };
  const { ratios, redisNonceBytesPerRequest } = result;
  console.log(JSON.stringify({ ratios, pureRejection: rejection, workers, redisNonceBytesPerRequest }, null, 2));
  writeResult(args.out, result);
}

/**
 * @typedef {{ cpuPerRequest: number, throughput: number, addedP50Ms: number, addedP99Ms: number }} VsBare
 * @typedef {{
 *   cpuUsPerRequest: number, rps: number, p50Us: number, p99Us: number, non2xx: number, errors: number,
 *   tokensWrapped: boolean, peakRssMb: number, redisCallsPerRequest?: Record<string, number>,
 *   redisCpuUsPerRequest?: number, redisReadsPerRequest?: number, vsBare?: VsBare, cpuVsUndici?: number,
 *   bytesPerRequest?: number, scavengesPer10k?: number, bytesVsUndici?: number, scavengesVsUndici?: number,
 *   loopTurnsPerRequest?: number, syscallsPerRequest?: Record<string, number>,
 *   cpuPerRequestVsUnlimited?: { medianOfRoundRatios: number, rounds: number[] },
 * }} Summary A target's medians over the rounds at one connection count.
 */

/**
 * A measurement's allocation figures for its progress line ('' for a target without a GC log: nginx).
 * @param {Measured} r
 */
function gcText(r) {
  if (r.bytesPerRequest === undefined) return '';
  return ` ${Math.round(r.bytesPerRequest)} B/req ${(r.scavengesPer10k ?? NaN).toFixed(1)} scavenges/10k`;
}

/**
 * Every target at every connection count side by side: CPU per request and its ratio to the bare
 * undici hop, bytes allocated, scavenges and loop turns per request (the last three do not depend
 * on the machine's load).
 * @param {Record<string, Record<string, Summary>>} sweep
 */
function printSideBySide(sweep) {
  const counts = Object.keys(sweep);
  const names = Object.keys(sweep[counts[0] ?? ''] ?? {});
  console.log(
    `\nSide by side (median of ${ROUNDS} round(s) x ${DURATION} s; ratios against bare-undici in the same run)`,
  );
  const cols = ['CPU/req', 'vs undici', 'req/s', 'B/req', 'scav/10k', 'turns/req'];
  console.log(`| Target | ${counts.flatMap((c) => cols.map((k) => `c${c} ${k}`)).join(' | ')} |`);
  console.log(`|---|${counts.flatMap(() => cols.map(() => '---')).join('|')}|`);
  for (const name of names) {
    const cells = counts.flatMap((c) => {
      const s = sweep[c]?.[name];
      return [
        `${s?.cpuUsPerRequest ?? '–'} µs`,
        `${s?.cpuVsUndici ?? '–'}×`,
        s?.rps ?? '–',
        s?.bytesPerRequest ?? '–',
        s?.scavengesPer10k ?? '–',
        s?.loopTurnsPerRequest ?? '–',
      ];
    });
    console.log(`| ${name} | ${cells.join(' | ')} |`);
  }
}

/**
 * A process's first child (nginx's one worker), or the process itself when it has none.
 * @param {number} pid
 */
function firstChild(pid) {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/)[0]) || pid;
  } catch {
    return pid;
  }
}

/** @param {number} port */
function answers401(port) {
  const r = spawnSync('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${port}/`], {
    encoding: 'utf8',
  });
  return r.stdout === '401';
}

/**
 * A target's processes: one tree, or several (nginx + Keygate in forward-auth) summed.
 * @param {Target} t
 * @param {(pid: number) => number | undefined} measure
 */
function targetSum(t, measure) {
  return (t.pids ?? [t.pid]).reduce((sum, pid) => sum + treeSum(pid, measure), 0);
}

/**
 * The headline: CPU per request first, then req/s and latency, each against the bare http-proxy hop.
 * @param {Record<string, Record<string, Summary>>} sweep
 */
function printTable(sweep) {
  /** @param {number} us */
  const ms = (us) => `${(us / 1000).toFixed(2)} ms`;
  for (const [connections, summary] of Object.entries(sweep)) {
    console.log(`\n${connections} connections (median of ${ROUNDS} round(s) x ${DURATION} s)`);
    console.log(
      '| Target | CPU per request | vs bare | vs bare undici | bytes per request (vs undici) | scavenges per 10k (vs undici) | Redis CPU per request | Redis reads per request | req/s | vs bare | p50 | p99 | added p99 |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const [name, s] of Object.entries(summary)) {
      const v = s.vsBare;
      console.log(
        `| ${name} | ${s.cpuUsPerRequest} µs | ${v?.cpuPerRequest}× | ${s.cpuVsUndici ?? '–'}× | ${s.bytesPerRequest ?? '–'} (${s.bytesVsUndici ?? '–'}×) | ${s.scavengesPer10k ?? '–'} (${s.scavengesVsUndici ?? '–'}×) | ${s.redisCpuUsPerRequest ?? '–'} µs | ${s.redisReadsPerRequest ?? '–'} | ${s.rps} | ${v?.throughput}× | ${ms(s.p50Us)} | ${ms(s.p99Us)} | ${v?.addedP99Ms} ms |`,
      );
    }
    // What a rate limit on every key costs, measured side by side in this run.
    for (const [withLimit, without] of LIMITED_PAIRS) {
      const a = summary[withLimit];
      const b = summary[without];
      if (!a || !b) continue;
      const redis =
        a.redisCpuUsPerRequest !== undefined
          ? `; Redis CPU ${a.redisCpuUsPerRequest} vs ${b.redisCpuUsPerRequest} µs/req; Redis commands per request with the limit ${JSON.stringify(a.redisCallsPerRequest)}, without ${JSON.stringify(b.redisCallsPerRequest)}`
          : '';
      const paired = a.cpuPerRequestVsUnlimited;
      console.log(
        `limit on every key: ${withLimit} ${a.cpuUsPerRequest} µs/req vs ${without} ${b.cpuUsPerRequest} µs/req (medians) = ${round3(a.cpuUsPerRequest / b.cpuUsPerRequest)}×; per-round ratios ${JSON.stringify(paired?.rounds)}, median ${paired?.medianOfRoundRatios}×${redis}`,
      );
    }
  }
}

runMain(main, () => {
  children.killAll();
});
