#!/usr/bin/env node
// Keygate benchmark harness. See docs/performance.md.
//
//   npm run bench                      full run (3 rounds x 10 s per target)
//   npm run bench -- --short           a few seconds per target (CI)
//   npm run bench -- --million         add a 1,000,000-request RSS run
//   --connections 10,50                 the connection counts swept (default both)
//   --targets a,b --forward-only        only these targets (and the bare hop), forwarded traffic only
//                                       (keygate-redis-limited / keygate-embedded-limited: the same with a
//                                       rate limit on every key, never reached: what checking it costs)
//   --limit-cost [--rate 1500]          only that cost: the four Keygate targets at a fixed offered rate
//                                       (open loop, below saturation), alternating, CPU per request paired by round
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
import { mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  PATH,
  createChildren,
  cpuUs,
  currentRssMb,
  freePort,
  jsonPort,
  keygateEnv,
  median,
  mintTokens as mintTokensIn,
  peakRssMb,
  round3,
  runMain,
  sleep,
  startRedisWithKey,
  treeSum,
  writeResult,
} from './bench/lib.mjs';
import { forwardAuthNginxArgs, nginxArgs, nginxAvailable } from './bench/nginx.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    short: { type: 'boolean' },
    duration: { type: 'string' },
    rounds: { type: 'string' },
    connections: { type: 'string', default: '10,50' },
    million: { type: 'boolean' },
    'limit-cost': { type: 'boolean' },
    rate: { type: 'string', default: '1500' },
    targets: { type: 'string' },
    'forward-only': { type: 'boolean' },
    out: { type: 'string', default: join(root, 'bench-results', 'latest.json') },
  },
});
const DURATION = Number(args.duration ?? (args.short ? 2 : 10));
const ROUNDS = Number(args.rounds ?? (args.short ? 1 : 3));
const CONNECTION_SWEEP = args.connections.split(',').map(Number);
const PUBLIC_PATH = '/public/bench';
const THREADS = 2;

if (spawnSync('wrk', ['--version']).error) {
  console.error('bench: wrk is not on PATH (apt-get install -y wrk); .ci/run installs it');
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-'));
const children = createChildren(dir, root);
const start = children.start;
const mintTokens = (count, mix) => mintTokensIn(dir, count, mix);

function runWrk(url, tokensFile, seconds, { connections = CONNECTION_SWEEP.at(-1), path = PATH } = {}) {
  const r = spawnSync('wrk', [`-t${THREADS}`, `-c${connections}`, `-d${seconds}s`, '--latency', '-s', join(root, 'scripts/bench/load.lua'), url], {
    env: { ...process.env, TOKENS_FILE: tokensFile ?? '', WRK_THREADS: String(THREADS), BENCH_PATH: path },
    encoding: 'utf8',
    maxBuffer: 10_000_000,
  });
  const line = r.stdout.split('\n').filter((l) => l.startsWith('{')).pop();
  if (!line) throw new Error(`wrk failed: ${r.stderr || r.stdout}`);
  const res = JSON.parse(line);
  return { ...res, rps: res.requests / (res.durationUs / 1e6) };
}

/**
 * CPU per request with a rate limit on every key against without, at the same fixed offered
 * rate (saturated req/s on this shared machine swings far more than the cost being measured).
 * Targets alternate round by round; each limited/unlimited pair is compared within its round.
 */
function limitCost(targets) {
  const rate = Number(args.rate);
  const results = Object.fromEntries(targets.map((t) => [t.name, []]));
  for (const t of targets) fixedRate(t, rate, 2); // warm-up: JIT, key caches, pools
  for (let round = 0; round < ROUNDS; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]);
    for (const t of order) {
      const r = fixedRate(t, rate, DURATION);
      results[t.name].push(r);
      process.stdout.write(`round ${round + 1}/${ROUNDS} ${t.name.padEnd(25)} ${r.cpuUsPerRequest.toFixed(1)} us CPU/request at ${rate} req/s${r.redisCallsPerRequest ? ` redis/req ${JSON.stringify(r.redisCallsPerRequest)}` : ''}\n`);
    }
  }
  const out = {};
  for (const [withLimit, without] of [['keygate-redis-limited', 'keygate-redis'], ['keygate-embedded-limited', 'keygate-embedded']]) {
    const a = results[withLimit];
    const b = results[without];
    const ratios = a.map((r, i) => r.cpuUsPerRequest / b[i].cpuUsPerRequest);
    out[withLimit] = {
      cpuUsPerRequest: round3(median(a.map((r) => r.cpuUsPerRequest))),
      unlimitedCpuUsPerRequest: round3(median(b.map((r) => r.cpuUsPerRequest))),
      ratioMedianOfRounds: round3(median(ratios)),
      ratios: ratios.map(round3),
      ...(a[0].redisCallsPerRequest && { redisCallsPerRequest: a.at(-1).redisCallsPerRequest, unlimitedRedisCallsPerRequest: b.at(-1).redisCallsPerRequest, redisCpuUsPerRequest: round3(median(a.map((r) => r.redisCpuUsPerRequest))), unlimitedRedisCpuUsPerRequest: round3(median(b.map((r) => r.redisCpuUsPerRequest))) }),
    };
    console.log(`limit on every key, ${rate} req/s: ${withLimit} ${out[withLimit].cpuUsPerRequest} µs/req vs ${without} ${out[withLimit].unlimitedCpuUsPerRequest} µs/req; per-round ratios ${JSON.stringify(out[withLimit].ratios)}, median ${out[withLimit].ratioMedianOfRounds}×`);
  }
  writeResult(args.out, { limitCost: { ratePerSecond: rate, durationSeconds: DURATION, rounds: ROUNDS, ...out } });
}

function fixedRate(t, rate, seconds) {
  const tokens = mintTokens(Math.round(rate * seconds));
  if (t.redis) redisCli(t.redisPort, 'config', 'resetstat');
  const cpuBefore = treeSum(t.pid, cpuUs);
  const redisCpuBefore = t.redis ? cpuUs(t.redisPid) : 0;
  const r = spawnSync(process.execPath, [join(root, 'scripts/bench/fixed-rate.mjs'), t.url, String(rate), String(seconds), tokens], { encoding: 'utf8' });
  const line = r.stdout.trim().split('\n').pop();
  if (r.status !== 0 || !line?.startsWith('{')) throw new Error(`fixed-rate load failed: ${r.stderr || r.stdout}`);
  const res = JSON.parse(line);
  if (res.non2xx || res.errors) throw new Error(`${t.name}: ${res.non2xx} non-2xx and ${res.errors} errors at ${rate} req/s`);
  const requests = res.requests;
  return {
    cpuUsPerRequest: (treeSum(t.pid, cpuUs) - cpuBefore) / requests,
    ...(t.redis && { redisCpuUsPerRequest: (cpuUs(t.redisPid) - redisCpuBefore) / requests, redisCallsPerRequest: commandStats(t.redisPort, requests) }),
  };
}

function redisCli(port, ...args) {
  return spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout;
}

/** INFO commandstats since the last RESETSTAT, per request: { evalsha: 1, time: 1, … }. */
function commandStats(port, requests) {
  const out = {};
  for (const m of redisCli(port, 'info', 'commandstats').matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== 'info' && m[1] !== 'config|resetstat') out[m[1]] = round3(Number(m[2]) / requests);
  }
  return out;
}

async function redisInfoMemory(port) {
  const r = spawnSync('redis-cli', ['-p', String(port), 'info', 'memory'], { encoding: 'utf8' });
  return Number(/used_memory:(\d+)/.exec(r.stdout)?.[1] ?? NaN);
}

async function main() {
  const startedAt = new Date().toISOString();
  // --- infrastructure -------------------------------------------------------
  const { port: redisPort, url: redisUrl, keysFile } = await startRedisWithKey(children, dir, root);
  const redisPid = Number(/process_id:(\d+)/.exec(redisCli(redisPort, 'info', 'server'))?.[1]);
  const upstream = await start('upstream', 'node', ['scripts/bench/upstream.mjs'], {}, (o) => jsonPort(o) !== undefined);
  const upstreamUrl = `http://127.0.0.1:${jsonPort(upstream.output())}`;
  const bare = await start('bare-proxy', 'node', ['scripts/bench/bare-proxy.mjs'], { UPSTREAM: upstreamUrl }, (o) => jsonPort(o) !== undefined);
  const barePort = jsonPort(bare.output());
  const bareUndici = await start('bare-undici', 'node', ['scripts/bench/bare-undici.mjs'], { UPSTREAM: upstreamUrl }, (o) => jsonPort(o) !== undefined);

  async function keygate(name, env) {
    const port = await freePort();
    const child = await start(name, 'node', ['bin/keygate.js', 'serve'], keygateEnv(upstreamUrl, port, await freePort(), env), (o) => o.includes('keygate started'));
    return { name, child, url: `http://127.0.0.1:${port}`, pid: child.pid };
  }
  const kgRedis = await keygate('keygate-redis', { KEYGATE_REDIS_URL: redisUrl });
  const kgMemory = await keygate('keygate-embedded', { KEYGATE_KEYS_FILE: keysFile });
  const policy = join(dir, 'public-policy.yaml');
  writeFileSync(policy, `routes:\n  - { method: GET, path: ${PATH}, scopes: [accounts:read] }\npublic:\n  - { method: GET, path: /public/* }\n`);
  const kgPublic = { ...(await keygate('keygate-public', { KEYGATE_KEYS_FILE: keysFile, KEYGATE_CONFIG: policy })), path: PUBLIC_PATH, noTokens: true };
  // A limit on every key (the policy default), far above what the load reaches: every request runs
  // the GCRA check and gets RateLimit headers, none is refused.
  const limitedPolicy = join(dir, 'limited-policy.yaml');
  writeFileSync(limitedPolicy, `routes:\n  - { method: GET, path: ${PATH}, scopes: [accounts:read] }\ndefaultRateLimit: { rate: 1000000/s }\n`);
  const kgRedisLimited = await keygate('keygate-redis-limited', { KEYGATE_REDIS_URL: redisUrl, KEYGATE_CONFIG: limitedPolicy });
  const kgMemoryLimited = await keygate('keygate-embedded-limited', { KEYGATE_KEYS_FILE: keysFile, KEYGATE_CONFIG: limitedPolicy });
  for (const t of [kgRedis, kgRedisLimited]) Object.assign(t, { redis: true, redisPort, redisPid });

  const targets = [
    { name: 'upstream-direct', url: upstreamUrl, pid: upstream.pid, noTokens: true },
    { name: 'bare-http-proxy', url: `http://127.0.0.1:${barePort}`, pid: bare.pid, noTokens: true },
    { name: 'bare-undici', url: `http://127.0.0.1:${jsonPort(bareUndici.output())}`, pid: bareUndici.pid, noTokens: true },
    kgPublic,
    kgRedis,
    kgRedisLimited,
    kgMemory,
    kgMemoryLimited,
  ];
  if (nginxAvailable()) {
    const port = await freePort();
    const nginx = await start('nginx', 'nginx', nginxArgs(dir, port, upstreamUrl), {}, () => spawnSync('curl', ['-s', '-o', '/dev/null', `http://127.0.0.1:${port}/`]).status === 0);
    targets.splice(1, 0, { name: 'nginx', url: `http://127.0.0.1:${port}`, pid: nginx.pid, noTokens: true });
    // Forward-auth: the shipped nginx config asking Keygate (Redis store, as keygate-redis); CPU is nginx's plus Keygate's.
    const faPolicy = join(dir, 'forward-auth-policy.yaml');
    writeFileSync(faPolicy, `routes:\n  - { method: GET, path: ${PATH}, scopes: [accounts:read] }\ntrustedProxies: [127.0.0.1/32]\n`);
    const kgFa = await keygate('keygate-forward-auth', { KEYGATE_REDIS_URL: redisUrl, KEYGATE_MODE: 'forward-auth', KEYGATE_CONFIG: faPolicy });
    const faPort = await freePort();
    const faNginx = await start('nginx-forward-auth', 'nginx', forwardAuthNginxArgs(dir, root, faPort, kgFa.url, upstreamUrl), {}, () => spawnSync('curl', ['-s', '-o', '/dev/null', `http://127.0.0.1:${faPort}/`]).status === 0);
    targets.push({ name: 'nginx+forward-auth', url: `http://127.0.0.1:${faPort}`, pid: faNginx.pid, pids: [faNginx.pid, kgFa.pid] });
  } else console.log('nginx not on PATH: the nginx reference is not measured (apt-get install -y nginx)');
  if (args.targets) {
    const keep = new Set(['bare-http-proxy', ...args.targets.split(',')]);
    for (let i = targets.length - 1; i >= 0; i--) if (!keep.has(targets[i].name)) targets.splice(i, 1);
  }
  if (args['limit-cost']) return limitCost([kgRedis, kgRedisLimited, kgMemory, kgMemoryLimited]);
  const bareIndex = targets.findIndex((t) => t.name === 'bare-http-proxy');

  // --- warm-up and token budget ---------------------------------------------
  const warm = runWrk(targets[bareIndex].url, mintTokens(20_000), 1);
  // Keygate can outrun the bare hop measured here: leave room so tokens never run out (a wrapped
  // token file would replay tokens and turn forwarded traffic into refusals).
  const budget = Math.ceil(Math.max(warm.rps, 5_000) * 4 * DURATION);
  for (const t of targets) runWrk(t.url, t.noTokens ? undefined : mintTokens(Math.ceil(warm.rps * 2)), 1, { path: t.path });

  // --- scenario 1: forwarded traffic at each connection count, alternating targets
  const sweep = {};
  let nonceBytesPerRequest;
  for (const connections of CONNECTION_SWEEP) {
    const results = Object.fromEntries(targets.map((t) => [t.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      const order = targets.map((_, i) => targets[(i + round) % targets.length]);
      for (const t of order) {
        const tokens = t.noTokens ? undefined : mintTokens(budget);
        const memBefore = t === kgRedis ? await redisInfoMemory(redisPort) : undefined;
        if (t.redis) redisCli(redisPort, 'config', 'resetstat');
        const cpuBefore = targetSum(t, cpuUs);
        const redisCpuBefore = cpuUs(redisPid);
        const r = runWrk(t.url, tokens, DURATION, { connections, path: t.path });
        r.cpuUsPerRequest = (targetSum(t, cpuUs) - cpuBefore) / r.requests;
        if (t.redis) r.redisCpuUsPerRequest = (cpuUs(redisPid) - redisCpuBefore) / r.requests;
        // Commands Redis ran per request, from INFO commandstats (those run inside the admit script included).
        if (t.redis) r.redisCallsPerRequest = commandStats(redisPort, r.requests);
        if (t === kgRedis && nonceBytesPerRequest === undefined) nonceBytesPerRequest = ((await redisInfoMemory(redisPort)) - memBefore) / (r.requests - r.non2xx);
        results[t.name].push(r);
        process.stdout.write(`c=${connections} round ${round + 1}/${ROUNDS} ${t.name.padEnd(17)} cpu ${r.cpuUsPerRequest.toFixed(1)} us/req ${Math.round(r.rps)} req/s p50 ${r.p50Us} us p99 ${r.p99Us} us non2xx ${r.non2xx}${r.redisCallsPerRequest ? ` redis/req ${JSON.stringify(r.redisCallsPerRequest)}` : ''}\n`);
      }
    }
    const summary = {};
    for (const t of targets) {
      const rs = results[t.name];
      summary[t.name] = {
        cpuUsPerRequest: Math.round(median(rs.map((r) => r.cpuUsPerRequest)) * 10) / 10,
        rps: Math.round(median(rs.map((r) => r.rps))),
        p50Us: median(rs.map((r) => r.p50Us)),
        p99Us: median(rs.map((r) => r.p99Us)),
        non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
        errors: rs.reduce((a, r) => a + r.errors, 0),
        tokensWrapped: rs.some((r) => r.tokensWrapped === 1),
        peakRssMb: Math.round(targetSum(t, peakRssMb) * 10) / 10,
        ...(rs[0]?.redisCallsPerRequest && { redisCallsPerRequest: rs.at(-1).redisCallsPerRequest, redisCpuUsPerRequest: Math.round(median(rs.map((r) => r.redisCpuUsPerRequest)) * 10) / 10 }),
      };
    }
    const bareS = summary['bare-http-proxy'];
    for (const t of targets) {
      const s = summary[t.name];
      s.vsBare = {
        cpuPerRequest: round3(s.cpuUsPerRequest / bareS.cpuUsPerRequest),
        throughput: round3(s.rps / bareS.rps),
        addedP50Ms: round3((s.p50Us - bareS.p50Us) / 1000),
        addedP99Ms: round3((s.p99Us - bareS.p99Us) / 1000),
      };
    }
    // Paired per round (the two targets ran back to back), so machine drift between rounds cancels out.
    for (const [withLimit, without] of [['keygate-redis-limited', 'keygate-redis'], ['keygate-embedded-limited', 'keygate-embedded']]) {
      if (!summary[withLimit] || !summary[without]) continue;
      const ratios = results[withLimit].map((r, i) => r.cpuUsPerRequest / results[without][i].cpuUsPerRequest);
      summary[withLimit].cpuPerRequestVsUnlimited = { medianOfRoundRatios: round3(median(ratios)), rounds: ratios.map(round3) };
    }
    sweep[connections] = summary;
  }
  const headline = sweep[CONNECTION_SWEEP.at(-1)];
  const summary = headline;
  const ratio = (name) => ({
    cpuPerRequestVsBare: headline[name].vsBare.cpuPerRequest,
    throughputVsBare: headline[name].vsBare.throughput,
    addedP99MsByConnections: Object.fromEntries(CONNECTION_SWEEP.map((c) => [c, sweep[c][name].vsBare.addedP99Ms])),
  });
  printTable(sweep);
  if (args['forward-only']) return writeResult(args.out, { forwardByConnections: sweep });

  // --- scenario 2: mixed (10% replays, 10% bad signatures) and pure rejections
  // The authenticated targets this run measured (--targets may have left one out).
  const authTargets = [kgRedis, kgMemory].filter((t) => summary[t.name] !== undefined);
  const mixed = {};
  for (const t of authTargets) {
    const r = runWrk(t.url, mintTokens(budget, { replay: 0.1, bad: 0.1 }), DURATION);
    mixed[t.name] = { rps: Math.round(r.rps), p50Us: r.p50Us, p99Us: r.p99Us, non2xxShare: round3(r.non2xx / r.requests) };
  }
  const rejection = {};
  for (const t of authTargets) {
    const cpuBefore = treeSum(t.pid, cpuUs);
    const r = runWrk(t.url, mintTokens(budget, { replay: 0, bad: 1 }), DURATION);
    const cpu = (treeSum(t.pid, cpuUs) - cpuBefore) / r.requests;
    rejection[t.name] = {
      rps: Math.round(r.rps),
      p50Us: r.p50Us,
      p99Us: r.p99Us,
      non2xxShare: round3(r.non2xx / r.requests),
      vsForward: round3(r.rps / summary[t.name].rps),
      cpuUsPerRequest: Math.round(cpu * 10) / 10,
      cpuVsForward: round3(cpu / summary[t.name].cpuUsPerRequest),
    };
  }

  // --- scenario 3: KEYGATE_WORKERS=2 -----------------------------------------
  let workers;
  try {
    const kg2 = await keygate('keygate-redis-2-workers', { KEYGATE_REDIS_URL: redisUrl, KEYGATE_WORKERS: '2' });
    await sleep(500);
    runWrk(kg2.url, mintTokens(Math.ceil(warm.rps * 2)), 1);
    const r = runWrk(kg2.url, mintTokens(budget), DURATION);
    const single = runWrk(kgRedis.url, mintTokens(budget), DURATION);
    workers = { rps2: Math.round(r.rps), rps1: Math.round(single.rps), factor: round3(r.rps / single.rps), p99Us: r.p99Us, note: 'wrk, the upstream and Redis share the same 2 cores' };
    kg2.child.kill('SIGTERM');
  } catch (err) {
    workers = { unsupported: String(err.message).slice(0, 200) };
  }

  // --- scenario 4 (optional): RSS over 1,000,000 requests ---------------------
  let million;
  if (args.million) {
    const rss = [];
    const before = currentRssMb(kgRedis.pid);
    let total = 0;
    const t0 = Date.now();
    while (total < 1_000_000) {
      const r = runWrk(kgRedis.url, mintTokens(budget), DURATION);
      total += r.requests;
      rss.push(Math.round(currentRssMb(kgRedis.pid)));
      process.stdout.write(`million: ${total} requests, RSS ${rss.at(-1)} MB\n`);
    }
    million = { requests: total, seconds: Math.round((Date.now() - t0) / 1000), rssStartMb: Math.round(before), rssSamplesMb: rss, rssEndMb: rss.at(-1) };
  }

  const result = {
    startedAt,
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, node: process.version },
    settings: { durationSeconds: DURATION, rounds: ROUNDS, connections: CONNECTION_SWEEP, wrkThreads: THREADS, keygateLogLevel: 'info' },
    forward: headline,
    forwardByConnections: sweep,
    ratios: Object.fromEntries(['keygate-redis', 'keygate-embedded', 'keygate-public'].filter((n) => headline[n] !== undefined).map((n) => [n, ratio(n)])),
    mixed10pctReplay10pctBad: mixed,
    pureRejection: rejection,
    workers,
    redisNonceBytesPerRequest: Math.round(nonceBytesPerRequest),
    ...(million && { million }),
  };
  console.log(JSON.stringify({ ratios: result.ratios, pureRejection: rejection, workers, redisNonceBytesPerRequest: result.redisNonceBytesPerRequest }, null, 2));
  writeResult(args.out, result);
}

/** A target's processes: one tree, or several (nginx + Keygate in forward-auth) summed. */
function targetSum(t, measure) {
  return (t.pids ?? [t.pid]).reduce((sum, pid) => sum + treeSum(pid, measure), 0);
}

/** The headline: CPU per request first, then req/s and latency, each against the bare http-proxy hop. */
function printTable(sweep) {
  for (const [connections, summary] of Object.entries(sweep)) {
    console.log(`\n${connections} connections (median of ${ROUNDS} round(s) x ${DURATION} s)`);
    console.log('| Target | CPU per request | vs bare | req/s | vs bare | p50 | p99 | added p99 |');
    console.log('|---|---|---|---|---|---|---|---|');
    for (const [name, s] of Object.entries(summary)) {
      console.log(`| ${name} | ${s.cpuUsPerRequest} µs | ${s.vsBare.cpuPerRequest}× | ${s.rps} | ${s.vsBare.throughput}× | ${(s.p50Us / 1000).toFixed(2)} ms | ${(s.p99Us / 1000).toFixed(2)} ms | ${s.vsBare.addedP99Ms} ms |`);
    }
    // What a rate limit on every key costs, measured side by side in this run.
    for (const [withLimit, without] of [['keygate-redis-limited', 'keygate-redis'], ['keygate-embedded-limited', 'keygate-embedded']]) {
      const a = summary[withLimit];
      const b = summary[without];
      if (!a || !b) continue;
      const redis = a.redisCpuUsPerRequest !== undefined ? `; Redis CPU ${a.redisCpuUsPerRequest} vs ${b.redisCpuUsPerRequest} µs/req; Redis commands per request with the limit ${JSON.stringify(a.redisCallsPerRequest)}, without ${JSON.stringify(b.redisCallsPerRequest)}` : '';
      console.log(`limit on every key: ${withLimit} ${a.cpuUsPerRequest} µs/req vs ${without} ${b.cpuUsPerRequest} µs/req (medians) = ${round3(a.cpuUsPerRequest / b.cpuUsPerRequest)}×; per-round ratios ${JSON.stringify(a.cpuPerRequestVsUnlimited.rounds)}, median ${a.cpuPerRequestVsUnlimited.medianOfRoundRatios}×${redis}`);
    }
  }
}

runMain(main, () => {
  children.killAll();
});
