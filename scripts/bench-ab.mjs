#!/usr/bin/env node
// @ts-check
// A/B benchmark: this working tree's build against a baseline git revision,
// side by side in one run. This is how a lever's worth is measured
// (docs/performance.md).
//
// Both builds (and a bare http-proxy, for reference) run at once against one
// upstream and one Redis; each round measures every target in turn, starting
// from a different one. The main figure is Keygate's CPU time per request
// (from /proc) at a fixed offered rate below saturation: at saturation req/s on
// this 2-core machine swings with whatever else the cores are doing, while CPU
// per request at a fixed rate moves far less. Beside it, every target runs with
// --trace-gc-nvp and reports the bytes its heap allocated per request and its
// scavenges per 10,000 requests (gcReader in bench/lib.mjs): those do not depend
// on the load, so they resolve a change CPU time cannot on a shared machine.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  PATH,
  ROOT as root,
  createChildren,
  TRACE_GC,
  cpuUs,
  gcReader,
  get,
  median,
  API_KEY,
  mintSignedTokens,
  mintTokens,
  parseOptions,
  SECRET,
  pinToCpu,
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
  writeKeysFile,
  writeResult,
} from './bench/lib.mjs';
import { token } from './harness/mint.mjs';

const USAGE = `
Usage: npm run bench:ab -- [options]

  --baseline REV       the revision to compare with (default HEAD)
  --saturate           also wrk req/s at saturation
  --public             also both builds on a public route (no auth)
  --rate N             offered rate, requests per second (default 1500)
  --duration S         seconds per measurement (default 5)
  --rounds N           rounds (default 5)
  --stores LIST        embedded and/or redis (default embedded,redis)
  --log-level LEVEL    every Keygate's KEYGATE_LOG_LEVEL (default info, as in production)
  --pin                pin each measured process to CPU 1 and this harness, the load generator,
                       the upstream and Redis to CPU 0 (taskset; steadier CPU figures)
  --bind get|post      issue 43: the current build's targets send tokens bound to their request (method, path,
                       and with post the body_sha256 of a 1 KiB JSON body every target sends with POST), the
                       baseline's plain tokens; with --baseline HEAD (same code), binding's own cost
  --credits N          the current build's Redis target uses a Redis of its own where the bench key holds N credits
                       (each request spends one); with --baseline HEAD, the credits' own cost
  --key-owner NAME     give the bench key an owner (its budget: defaultOwnerRateLimit in a policy set with --env)
  --commandstats       after the rounds, each Redis target alone for --duration s: its Redis commands per
                       request from INFO commandstats (CONFIG RESETSTAT first; background work included)
  --env NAME=VALUE     a setting for the current build's Redis target (repeatable)
  --baseline-env NAME=VALUE  the same for the baseline's Redis target (repeatable)
  --out FILE           result file (default bench-results/ab-latest.json)

  npm run bench:ab -- --baseline HEAD~1                 CPU per request at 1,500 req/s
  npm run bench:ab -- --baseline v0.1.0 --saturate      also wrk req/s at saturation
  npm run bench:ab -- --baseline HEAD --bind post --pin  a bound 1 KiB POST against an unbound one
  npm run bench:ab -- --stores redis --env KEYGATE_REPLAY_FENCE=on --baseline-env KEYGATE_REPLAY_FENCE=off
                                                        one build, a setting on against off
`;
const args = parseOptions(
  {
    baseline: { type: 'string', default: 'HEAD' },
    rate: { type: 'string', default: '1500' },
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '5' },
    stores: { type: 'string', default: 'embedded,redis' },
    'key-owner': { type: 'string' },
    credits: { type: 'string' },
    bind: { type: 'string' },
    saturate: { type: 'boolean' },
    public: { type: 'boolean' },
    commandstats: { type: 'boolean' },
    'log-level': { type: 'string', default: 'info' },
    pin: { type: 'boolean' },
    env: { type: 'string', multiple: true, default: [] },
    'baseline-env': { type: 'string', multiple: true, default: [] },
    out: { type: 'string', default: join(root, 'bench-results', 'ab-latest.json') },
  },
  USAGE,
);
const RATE = Number(args.rate);
const DURATION = Number(args.duration);
const ROUNDS = Number(args.rounds);
const STORES = args.stores.split(',').map((s) => s.trim());
if (STORES.some((s) => s !== 'embedded' && s !== 'redis')) {
  throw new Error(`--stores takes embedded and/or redis, not ${args.stores}`);
}
if (args.saturate) requireWrk('bench:ab --saturate');
if (args.bind !== undefined && args.bind !== 'get' && args.bind !== 'post')
  throw new Error(`--bind takes get or post, not ${args.bind}`);
if (args.bind && (args.saturate || args.public)) throw new Error('--bind goes with neither --saturate nor --public');

/**
 * NAME=VALUE settings as an environment. They apply to the Redis targets only: settings such as
 * KEYGATE_REPLAY_FENCE are refused without Redis.
 * @param {string[]} list
 * @param {string} option
 * @returns {Record<string, string>}
 */
function envOf(list, option) {
  return Object.fromEntries(
    list.map((pair) => {
      // Keygate's settings, and the OpenTelemetry ones tracing reads (tracing on against off).
      const m = /^((?:KEYGATE|OTEL)_[A-Z0-9_]+)=(.*)$/.exec(pair);
      if (!m) throw new Error(`--${option} takes KEYGATE_NAME=value or OTEL_NAME=value, not ${pair}`);
      return [m[1], m[2]];
    }),
  );
}
const ENV = { current: envOf(args.env, 'env'), baseline: envOf(args['baseline-env'], 'baseline-env') };
const envLabel = (/** @type {Record<string, string>} */ env) =>
  Object.entries(env)
    .map(([k, v]) => ` ${k}=${v}`)
    .join('');

/** The CPU the measured processes are pinned to with --pin; everything else runs on CPU 0. */
const TARGET_CPU = 1;
if (args.pin) {
  if (cpus().length < 2) throw new Error('--pin needs 2 CPUs');
  pinToCpu(process.pid, 0); // the load generator, upstream and Redis are started from here and inherit it
}

const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-ab-'));
const children = createChildren(dir, root);
/** @param {...string} a */
const git = (...a) => spawnSync('git', a, { cwd: root, encoding: 'utf8' });

/**
 * A detached worktree of `ref`, built with this checkout's node_modules.
 * @param {string} ref
 */
function buildBaseline(ref) {
  git('worktree', 'prune'); // entries left by a run that was killed
  const rev = git('rev-parse', '--short', `${ref}^{commit}`);
  if (rev.status !== 0) throw new Error(`bench:ab: no such revision ${ref}: ${rev.stderr}`);
  const tree = join(dir, 'baseline');
  const add = git('worktree', 'add', '--detach', tree, ref);
  if (add.status !== 0) throw new Error(`git worktree add failed: ${add.stderr}`);
  symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
  const tsc = spawnSync(
    process.execPath,
    [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
    { cwd: tree, encoding: 'utf8' },
  );
  if (tsc.status !== 0) throw new Error(`baseline ${ref} does not build: ${tsc.stdout}${tsc.stderr}`);
  return { tree, rev: rev.stdout.trim() };
}

const PUBLIC_PATH = '/public/bench';

/**
 * --bind: every target sends the same requests (GET, or POST with one 1 KiB JSON body); `bound` targets
 * sign each token over it (method, path, body_sha256), the others send plain contract tokens.
 */
const BIND_BODY = Buffer.from(JSON.stringify({ order: 'x'.repeat(1024 - 13) }));
const bindRequest = args.bind === 'post' ? { method: 'POST', bodyFile: join(dir, 'body.json') } : { method: 'GET' };
if (args.bind === 'post') writeFileSync(bindRequest.bodyFile ?? '', BIND_BODY);
/** @param {number} count */
function boundTokens(count) {
  const body = args.bind === 'post' ? { body_sha256: createHash('sha256').update(BIND_BODY).digest('base64url') } : {};
  return mintSignedTokens(dir, count, (nonce) =>
    token(API_KEY, SECRET, { nonce: nonce.toString(), method: bindRequest.method, path: PATH, ...body }),
  );
}

/** @param {string} url @param {number} seconds @param {string} [path] @param {boolean} [bound] */
function fixedRate(url, seconds, path = PATH, bound = false) {
  const count = Math.round(RATE * seconds);
  if (!args.bind) return runFixedRate(url, RATE, seconds, mintTokens(dir, count), path);
  return runFixedRate(url, RATE, seconds, bound ? boundTokens(count) : mintTokens(dir, count), path, bindRequest);
}

/** @param {string} url @param {string} [path] */
function saturate(url, path = PATH) {
  const tokensFile = mintTokens(dir, Math.max(RATE * 4, 30_000) * DURATION);
  const res = runWrkSync({ url, tokensFile, seconds: DURATION, connections: 50, threads: 2, path });
  return { rps: res.rps, non2xx: res.non2xx, errors: res.errors };
}

/** @typedef {{ name: string, url: string, pid: number, path?: string, bound?: boolean, gc: ReturnType<typeof gcReader> }} Target */

/**
 * A started target, pinned with --pin, its collections read from its log file.
 * @param {string} name
 * @param {{ url: string, pid: number }} started
 * @param {string} logName the log file's name in the run's directory
 * @param {string} [path]
 * @returns {Target}
 */
function target(name, started, logName, path) {
  if (args.pin) pinToCpu(started.pid, TARGET_CPU);
  return { name, url: started.url, pid: started.pid, gc: gcReader(join(dir, `${logName}.log`)), ...(path && { path }) };
}

async function main() {
  const loadBefore = loadavg().map(round3);
  const baseline = buildBaseline(args.baseline);
  const head = git('rev-parse', '--short', 'HEAD').stdout.trim();
  const dirty = git('status', '--porcelain', '--', 'src').stdout.trim() !== '';
  const builds = [
    {
      name: 'current',
      tree: root,
      label: `${head}${dirty ? ' + uncommitted src changes' : ''}${envLabel(ENV.current)}${args.credits ? ` (Redis: the key holds ${args.credits} credits)` : ''}`,
      env: ENV.current,
    },
    {
      name: 'baseline',
      tree: baseline.tree,
      label: `${args.baseline} (${baseline.rev})${envLabel(ENV.baseline)}`,
      env: ENV.baseline,
    },
  ];

  const owner = args['key-owner'];
  const redis = STORES.includes('redis') ? await startRedisWithKey(children, dir, root, owner) : undefined;
  const keysFile = redis?.keysFile ?? writeKeysFile(dir, owner);
  const creditsDir = join(dir, 'credits');
  mkdirSync(creditsDir);
  const redisCredits =
    args.credits && redis
      ? await startRedisWithKey(children, creditsDir, root, owner, Number(args.credits))
      : undefined;
  const upstream = await startUpstream(children);
  const bare = await startBareProxy(children, upstream.url, [TRACE_GC]);
  const bareUndici = await startBareUndici(children, upstream.url, [TRACE_GC]);
  /** @type {Target[]} */
  const targets = [target('bare-http-proxy', bare, 'bare-proxy'), target('bare-undici', bareUndici, 'bare-undici')];
  const logLevel = { KEYGATE_LOG_LEVEL: args['log-level'] };
  // --bind post: the bench route takes POST too.
  const postPolicy = join(dir, 'post-policy.yaml');
  writeFileSync(postPolicy, `routes:\n  - { method: [GET, POST], path: ${PATH}, scopes: [accounts:read] }\n`);
  for (const store of STORES) {
    for (const b of builds) {
      /** @type {Record<string, string>} */
      const env =
        redis && store === 'redis'
          ? {
              ...logLevel,
              KEYGATE_REDIS_URL: (b.name === 'current' ? redisCredits?.url : undefined) ?? redis.url,
              ...b.env,
            }
          : { ...logLevel, KEYGATE_KEYS_FILE: keysFile };
      if (args.bind === 'post') env.KEYGATE_CONFIG = postPolicy;
      const kg = await startKeygate(children, `${b.name}-${store}`, upstream.url, env, b.tree, [TRACE_GC]);
      targets.push({
        ...target(`${b.name}:${store}`, kg, `${b.name}-${store}`),
        bound: Boolean(args.bind) && b.name === 'current',
      });
    }
  }

  if (args.public) {
    // The current build with authentication out of the way: what the proxying around it costs.
    const policy = join(dir, 'public-policy.yaml');
    writeFileSync(
      policy,
      `routes:\n  - { method: GET, path: ${PATH}, scopes: [accounts:read] }\npublic:\n  - { method: GET, path: /public/* }\n`,
    );
    const env = { ...logLevel, KEYGATE_KEYS_FILE: keysFile, KEYGATE_CONFIG: policy };
    // Both builds, so a change to the path around authentication has its own before and after.
    for (const b of builds) {
      const kg = await startKeygate(children, `${b.name}-public`, upstream.url, env, b.tree, [TRACE_GC]);
      targets.push(target(`${b.name}:public`, kg, `${b.name}-public`, PUBLIC_PATH));
    }
  }

  for (const t of targets) fixedRate(t.url, 2, t.path, t.bound); // warm-up: JIT, connection pools, key cache
  /** @type {Record<string, { cpuUsPerRequest: number[], rps: number[], bytesPerRequest: number[], scavengesPer10k: number[], scavengeMsPer10k: number[] }>} */
  const samples = Object.fromEntries(
    targets.map((t) => [
      t.name,
      { cpuUsPerRequest: [], rps: [], bytesPerRequest: [], scavengesPer10k: [], scavengeMsPer10k: [] },
    ]),
  );
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < targets.length; i++) {
      const t = /** @type {Target} */ (targets[(i + round) % targets.length]);
      t.gc.start();
      const before = cpuUs(t.pid) ?? NaN;
      const r = fixedRate(t.url, DURATION, t.path, t.bound);
      const perRequest = ((cpuUs(t.pid) ?? NaN) - before) / r.requests;
      const gc = t.gc.stop(r.requests, r.seconds);
      if (r.non2xx || r.errors)
        throw new Error(
          `${t.name}: ${r.non2xx} non-2xx (by status: ${JSON.stringify(r.statuses)}) and ${r.errors} errors at ${RATE} req/s`,
        );
      const s = get(samples, t.name);
      s.cpuUsPerRequest.push(perRequest);
      s.bytesPerRequest.push(gc.bytesPerRequest);
      s.scavengesPer10k.push(gc.scavengesPer10k);
      s.scavengeMsPer10k.push(gc.scavengeMsPer10k);
      const late = r.late ? ` (behind schedule ${r.late}x)` : '';
      let line =
        `round ${round + 1}/${ROUNDS} ${t.name.padEnd(18)} ${perRequest.toFixed(1).padStart(6)} us CPU/request at ${RATE} req/s` +
        `, ${Math.round(gc.bytesPerRequest)} B/request, ${gc.scavengesPer10k.toFixed(1)} scavenges/10k` +
        ` (${gc.scavengeMsPer10k.toFixed(1)} ms)${late}`;
      if (args.saturate) {
        const s = saturate(t.url, t.path);
        if (s.non2xx || s.errors) throw new Error(`${t.name}: ${s.non2xx} non-2xx and ${s.errors} errors under wrk`);
        get(samples, t.name).rps.push(s.rps);
        line += `, ${Math.round(s.rps)} req/s saturated`;
      }
      process.stdout.write(`${line}\n`);
    }
  }

  // Redis round trips per request (issue 42: one per admitted request): each Redis target alone, its
  // commands counted by the server. Heartbeats (one PUBLISH a second) and usage flushes (one EVALSHA a
  // second per key) are in the counts too: at the offered rate they are a small fraction per request.
  /** @type {Record<string, Record<string, number>>} */
  const commandstats = {};
  if (args.commandstats && redis)
    for (const t of targets.filter((x) => x.name.endsWith(':redis'))) {
      redisCli(redis.port, 'CONFIG', 'RESETSTAT');
      const r = fixedRate(t.url, DURATION, t.path);
      /** @type {Record<string, number>} */
      const perCommand = {};
      for (const m of redisCli(redis.port, 'INFO', 'commandstats').matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm))
        perCommand[String(m[1])] = round3(Number(m[2]) / r.requests);
      commandstats[t.name] = perCommand;
      console.log(
        `${t.name.padEnd(18)} Redis commands per request (${r.requests} requests): ${JSON.stringify(perCommand)}`,
      );
    }

  /** @type {Record<string, { cpuUsPerRequest: number, samples: number[], bytesPerRequest: number, bytesSamples: number[], scavengesPer10k: number, scavengeMsPer10k: number, rps?: number }>} */
  const summary = Object.fromEntries(
    targets.map((t) => {
      const s = get(samples, t.name);
      return [
        t.name,
        {
          cpuUsPerRequest: round3(median(s.cpuUsPerRequest)),
          samples: s.cpuUsPerRequest.map(round3),
          bytesPerRequest: Math.round(median(s.bytesPerRequest)),
          bytesSamples: s.bytesPerRequest.map(Math.round),
          scavengesPer10k: round3(median(s.scavengesPer10k)),
          scavengeMsPer10k: round3(median(s.scavengeMsPer10k)),
          ...(args.saturate && { rps: Math.round(median(s.rps)) }),
        },
      ];
    }),
  );
  const bareTarget = get(summary, 'bare-http-proxy');
  const undiciTarget = get(summary, 'bare-undici');
  /** Against the bare undici hop (Keygate's own engine, nothing else): CPU, bytes, scavenges. @param {string} name */
  const vsUndici = (name) => {
    const t = get(summary, name);
    return {
      cpu: round3(t.cpuUsPerRequest / undiciTarget.cpuUsPerRequest),
      bytes: round3(t.bytesPerRequest / undiciTarget.bytesPerRequest),
      scavenges: round3(t.scavengesPer10k / undiciTarget.scavengesPer10k),
    };
  };
  const comparison = Object.fromEntries(
    STORES.map((store) => {
      const cur = get(summary, `current:${store}`);
      const base = get(summary, `baseline:${store}`);
      // The same round's two figures divided: their spread says how far apart two runs of one build can land.
      const perRound = cur.samples.map((c, i) => c / (base.samples[i] ?? NaN)).sort((a, b) => a - b);
      return [
        store,
        {
          cpuCurrentVsBaseline: round3(cur.cpuUsPerRequest / base.cpuUsPerRequest),
          cpuCurrentVsBaselinePerRound: { min: round3(perRound[0] ?? NaN), max: round3(perRound.at(-1) ?? NaN) },
          cpuCurrentVsBare: round3(cur.cpuUsPerRequest / bareTarget.cpuUsPerRequest),
          cpuBaselineVsBare: round3(base.cpuUsPerRequest / bareTarget.cpuUsPerRequest),
          bytesCurrentVsBaseline: round3(cur.bytesPerRequest / base.bytesPerRequest),
          scavengesCurrentVsBaseline: round3(cur.scavengesPer10k / base.scavengesPer10k),
          currentVsBareUndici: vsUndici(`current:${store}`),
          baselineVsBareUndici: vsUndici(`baseline:${store}`),
          ...(args.saturate && {
            rpsCurrentVsBaseline: round3((cur.rps ?? NaN) / (base.rps ?? NaN)),
            rpsCurrentVsBare: round3((cur.rps ?? NaN) / (bareTarget.rps ?? NaN)),
          }),
        },
      ];
    }),
  );
  const publicRoute = args.public
    ? {
        publicVsBareUndici: vsUndici('current:public'),
        publicBaselineVsBareUndici: vsUndici('baseline:public'),
        publicCurrentVsBaseline: {
          cpu: round3(get(summary, 'current:public').cpuUsPerRequest / get(summary, 'baseline:public').cpuUsPerRequest),
          bytes: round3(
            get(summary, 'current:public').bytesPerRequest / get(summary, 'baseline:public').bytesPerRequest,
          ),
        },
      }
    : {};
  const result = {
    startedAt: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version },
    loadAverage: { before: loadBefore, after: loadavg().map(round3) },
    builds: Object.fromEntries(builds.map((b) => [b.name, b.label])),
    baselineWorktree: join(dir, 'baseline'),
    settings: {
      ratePerSecond: RATE,
      durationSeconds: DURATION,
      rounds: ROUNDS,
      stores: STORES,
      env: ENV,
      bind: args.bind ?? null,
      saturate: Boolean(args.saturate),
      publicRoute: Boolean(args.public),
      logLevel: args['log-level'],
      pinned: Boolean(args.pin),
    },
    targets: summary,
    comparison: { ...comparison, ...publicRoute },
    ...(args.commandstats && { commandstats }),
  };
  console.log(`current = ${builds[0]?.label}, baseline = ${builds[1]?.label}`);
  for (const [name, s] of Object.entries(summary)) {
    const saturated = s.rps ? `, ${s.rps} req/s saturated` : '';
    console.log(
      `${name.padEnd(18)} ${s.cpuUsPerRequest.toFixed(1).padStart(7)} us CPU/request (median of ${ROUNDS}), ` +
        `${s.bytesPerRequest} B/request, ${s.scavengesPer10k} scavenges/10k (${s.scavengeMsPer10k} ms)${saturated}`,
    );
  }
  console.log(JSON.stringify(result.comparison, null, 2));
  console.log(`load average before ${loadBefore.join(' ')}, after ${result.loadAverage.after.join(' ')}`);
  writeResult(args.out, result);
}

runMain(main, () => {
  children.killAll();
  git('worktree', 'remove', '--force', join(dir, 'baseline'));
  rmSync(dir, { recursive: true, force: true });
});
