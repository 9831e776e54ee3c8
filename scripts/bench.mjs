#!/usr/bin/env node
// Keygate benchmark harness. See README "Performance".
//
//   npm run bench                      full run (3 rounds x 10 s per target)
//   npm run bench -- --short           a few seconds per target (CI)
//   npm run bench -- --million         add a 1,000,000-request RSS run
//
// Everything runs on loopback. Targets are measured alternately, round by
// round, so that drift on a shared machine affects all of them alike. Load
// comes from wrk (a separate process) with pre-minted tokens: every request
// carries a fresh nonce.
import { spawn, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: {
    short: { type: 'boolean' },
    duration: { type: 'string' },
    rounds: { type: 'string' },
    connections: { type: 'string', default: '50' },
    million: { type: 'boolean' },
    out: { type: 'string', default: join(root, 'bench-results', 'latest.json') },
  },
});
const DURATION = Number(args.duration ?? (args.short ? 2 : 10));
const ROUNDS = Number(args.rounds ?? (args.short ? 1 : 3));
const CONNECTIONS = Number(args.connections);
const THREADS = 2;
const API_KEY = 'bench-key';
const SECRET = 'bench-secret-0123456789abcdef';
const PATH = '/api/v3/viewer/accounts';

if (spawnSync('wrk', ['--version']).error) {
  console.error('bench: wrk is not on PATH (apt-get install -y wrk); .ci/run installs it');
  process.exit(1);
}

const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-'));
const children = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts a child and waits until `ready(outputSoFar)` is true. Output goes to
 * a file, never to a pipe: this process blocks in spawnSync(wrk) during a run,
 * and an undrained pipe would make Keygate's async logger buffer every line
 * in memory (which a production log shipper does not do).
 */
async function start(name, cmd, argv, env, ready) {
  const logFile = join(dir, `${name}.log`);
  const fd = openSync(logFile, 'w');
  const child = spawn(cmd, argv, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  children.push(child);
  const output = () => readFileSync(logFile, 'utf8');
  const deadline = Date.now() + 15_000;
  while (!ready(output())) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${name} did not start: ${output().slice(0, 2000)}`);
    await sleep(20);
  }
  child.output = output;
  return child;
}

function peakRssMb(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
  } catch {
    return undefined;
  }
}

function currentRssMb(pid) {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
  } catch {
    return undefined;
  }
}

/** CPU time (user + system) a process has used so far, in µs (/proc/<pid>/stat, clock ticks). */
function cpuUs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // fields[11] = utime, fields[12] = stime (fields 14 and 15 of stat(5), counted after the comm field)
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** Sum over a process and its direct children (KEYGATE_WORKERS > 1 runs workers). */
function treeSum(pid, fn) {
  let total = fn(pid) ?? 0;
  try {
    for (const c of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) total += fn(Number(c)) ?? 0;
  } catch {
    // no children file: single process
  }
  return total;
}

const HEADER = Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url');
function mint(nonce, secret = SECRET) {
  const payload = Buffer.from(JSON.stringify({ type: 'OpenAPIV2', sub: API_KEY, nonce: nonce.toString() })).toString('base64url');
  const sig = createHmac('sha256', secret).update(`${HEADER}.${payload}`).digest('base64url');
  return `${HEADER}.${payload}.${sig}`;
}

/** Writes `count` tokens, each with a fresh nonce; `mix` sets the share of replays and bad signatures. */
function mintTokens(count, mix = { replay: 0, bad: 0 }) {
  const file = join(dir, `tokens-${Date.now()}.txt`);
  const lines = new Array(count);
  let nonce = BigInt(Date.now()) * 1_000_000n;
  let last = mint(nonce);
  for (let i = 0; i < count; i++) {
    const r = (i * 7919) % 100; // deterministic spread
    if (r < mix.replay * 100 && i > 0) lines[i] = last;
    else if (r < (mix.replay + mix.bad) * 100) lines[i] = mint(++nonce, 'wrong-secret-0123456789abcdef');
    else lines[i] = last = mint(++nonce);
  }
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

function runWrk(url, tokensFile, seconds) {
  const r = spawnSync('wrk', [`-t${THREADS}`, `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', join(root, 'scripts/bench/load.lua'), url], {
    env: { ...process.env, TOKENS_FILE: tokensFile ?? '', WRK_THREADS: String(THREADS), BENCH_PATH: PATH },
    encoding: 'utf8',
    maxBuffer: 10_000_000,
  });
  const line = r.stdout.split('\n').filter((l) => l.startsWith('{')).pop();
  if (!line) throw new Error(`wrk failed: ${r.stderr || r.stdout}`);
  const res = JSON.parse(line);
  return { ...res, rps: res.requests / (res.durationUs / 1e6) };
}

async function redisInfoMemory(port) {
  const r = spawnSync('redis-cli', ['-p', String(port), 'info', 'memory'], { encoding: 'utf8' });
  return Number(/used_memory:(\d+)/.exec(r.stdout)?.[1] ?? NaN);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  const startedAt = new Date().toISOString();
  // --- infrastructure -------------------------------------------------------
  const redisPort = await freePort();
  await start('redis', 'redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {}, () =>
    spawnSync('redis-cli', ['-p', String(redisPort), 'ping'], { encoding: 'utf8' }).stdout?.trim() === 'PONG',
  );
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const keysFile = join(dir, 'keys.yaml');
  writeFileSync(keysFile, `keys:\n  - { apiKey: ${API_KEY}, apiSecret: ${SECRET}, id: bench, scopes: [accounts:read] }\n`);
  const imp = spawnSync('node', ['bin/keygate.js', 'keys', 'import', keysFile], { cwd: root, env: { ...process.env, KEYGATE_REDIS_URL: redisUrl }, encoding: 'utf8' });
  if (imp.status !== 0) throw new Error(`key import failed: ${imp.stderr}`);

  const jsonPort = (out) => {
    const m = /\{"port":(\d+)\}/.exec(out);
    return m ? Number(m[1]) : undefined;
  };
  const upstream = await start('upstream', 'node', ['scripts/bench/upstream.mjs'], {}, (o) => jsonPort(o) !== undefined);
  const upstreamUrl = `http://127.0.0.1:${jsonPort(upstream.output())}`;
  const bare = await start('bare-proxy', 'node', ['scripts/bench/bare-proxy.mjs'], { UPSTREAM: upstreamUrl }, (o) => jsonPort(o) !== undefined);
  const barePort = jsonPort(bare.output());

  async function keygate(name, env) {
    const port = await freePort();
    const adminPort = await freePort();
    const child = await start(name, 'node', ['bin/keygate.js', 'serve'], {
      KEYGATE_UPSTREAM: upstreamUrl,
      KEYGATE_PORT: String(port),
      KEYGATE_ADMIN_PORT: String(adminPort),
      KEYGATE_HOST: '127.0.0.1',
      KEYGATE_LOG_LEVEL: 'info',
      KEYGATE_REDIS_URL: '',
      KEYGATE_KEYS_FILE: '',
      ...env,
    }, (o) => o.includes('keygate started'));
    return { name, child, url: `http://127.0.0.1:${port}`, pid: child.pid };
  }
  const kgRedis = await keygate('keygate-redis', { KEYGATE_REDIS_URL: redisUrl });
  const kgMemory = await keygate('keygate-embedded', { KEYGATE_KEYS_FILE: keysFile });

  const targets = [
    { name: 'upstream-direct', url: upstreamUrl, pid: upstream.pid },
    { name: 'bare-http-proxy', url: `http://127.0.0.1:${barePort}`, pid: bare.pid },
    kgRedis,
    kgMemory,
  ];
  if (spawnSync('nginx', ['-v']).error) console.log('nginx not on PATH: the nginx baseline is not measured');

  // --- warm-up and token budget ---------------------------------------------
  const warm = runWrk(targets[1].url, mintTokens(20_000), 1);
  const budget = Math.ceil(Math.max(warm.rps, 2_000) * 2 * DURATION);
  for (const t of targets.slice(2)) runWrk(t.url, mintTokens(Math.ceil(warm.rps * 2)), 1);

  // --- scenario 1: forwarded traffic, alternating targets -------------------
  const results = Object.fromEntries(targets.map((t) => [t.name, []]));
  let nonceBytesPerRequest;
  for (let round = 0; round < ROUNDS; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]);
    for (const t of order) {
      const tokens = mintTokens(budget);
      const memBefore = t === kgRedis ? await redisInfoMemory(redisPort) : undefined;
      const cpuBefore = treeSum(t.pid, cpuUs);
      const r = runWrk(t.url, tokens, DURATION);
      r.cpuUsPerRequest = (treeSum(t.pid, cpuUs) - cpuBefore) / r.requests;
      if (t === kgRedis && round === 0) nonceBytesPerRequest = ((await redisInfoMemory(redisPort)) - memBefore) / (r.requests - r.non2xx);
      results[t.name].push(r);
      process.stdout.write(`round ${round + 1}/${ROUNDS} ${t.name.padEnd(17)} ${Math.round(r.rps)} req/s p50 ${r.p50Us} us p99 ${r.p99Us} us cpu ${r.cpuUsPerRequest.toFixed(1)} us/req non2xx ${r.non2xx}\n`);
    }
  }
  const summary = {};
  for (const t of targets) {
    const rs = results[t.name];
    summary[t.name] = {
      rps: Math.round(median(rs.map((r) => r.rps))),
      p50Us: median(rs.map((r) => r.p50Us)),
      p99Us: median(rs.map((r) => r.p99Us)),
      cpuUsPerRequest: Math.round(median(rs.map((r) => r.cpuUsPerRequest)) * 10) / 10,
      non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
      errors: rs.reduce((a, r) => a + r.errors, 0),
      tokensWrapped: rs.some((r) => r.tokensWrapped === 1),
      peakRssMb: Math.round(treeSum(t.pid, peakRssMb) * 10) / 10,
    };
  }
  const bareS = summary['bare-http-proxy'];
  const ratio = (name) => ({
    throughputVsBare: round3(summary[name].rps / bareS.rps),
    cpuPerRequestVsBare: round3(summary[name].cpuUsPerRequest / bareS.cpuUsPerRequest),
    addedP50Ms: round3((summary[name].p50Us - bareS.p50Us) / 1000),
    addedP99Ms: round3((summary[name].p99Us - bareS.p99Us) / 1000),
  });

  // --- scenario 2: mixed (10% replays, 10% bad signatures) and pure rejections
  const mixed = {};
  for (const t of [kgRedis, kgMemory]) {
    const r = runWrk(t.url, mintTokens(budget, { replay: 0.1, bad: 0.1 }), DURATION);
    mixed[t.name] = { rps: Math.round(r.rps), p50Us: r.p50Us, p99Us: r.p99Us, non2xxShare: round3(r.non2xx / r.requests) };
  }
  const rejection = {};
  for (const t of [kgRedis, kgMemory]) {
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
    settings: { durationSeconds: DURATION, rounds: ROUNDS, connections: CONNECTIONS, wrkThreads: THREADS, keygateLogLevel: 'info' },
    forward: summary,
    ratios: { 'keygate-redis': ratio('keygate-redis'), 'keygate-embedded': ratio('keygate-embedded') },
    mixed10pctReplay10pctBad: mixed,
    pureRejection: rejection,
    workers,
    redisNonceBytesPerRequest: Math.round(nonceBytesPerRequest),
    ...(million && { million }),
  };
  mkdirSync(dirname(args.out), { recursive: true });
  writeFileSync(args.out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(JSON.stringify({ ratios: result.ratios, pureRejection: rejection, workers, redisNonceBytesPerRequest: result.redisNonceBytesPerRequest }, null, 2));
  console.log(`wrote ${args.out}`);
}

function round3(x) {
  return Math.round(x * 1000) / 1000;
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => {
    for (const c of children) c.kill('SIGTERM');
  });
