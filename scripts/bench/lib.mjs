// @ts-check
// Pieces shared by the benchmark and soak scripts (bench.mjs, bench-ab.mjs,
// bench-overload.mjs, bench-verify.mjs, soak.mjs): argument parsing, child
// processes with output in files, the processes every harness starts (upstream,
// bare proxy, Redis with the bench key, Keygate), load generators (wrk,
// fixed-rate.mjs), /proc readings, token files. Ports, redis-server, Keygate
// child processes and token signing are scripts/harness/, which the tests use too.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { token } from '../harness/mint.mjs';
import { startRedisServer } from '../harness/redis-server.mjs';
import { runKeygate, serveKeygate } from '../harness/spawn-keygate.mjs';

/** @typedef {import('node:child_process').ChildProcess} ChildProcess */
/** @typedef {ChildProcess & { output: () => string }} Child A started child; `output()` reads its log so far. */
/** @typedef {ReturnType<typeof createChildren>} Children */
/** @typedef {Record<string, string>} Env */
/** @typedef {{ replay: number, bad: number }} TokenMix Shares of replayed and badly signed tokens. */
/**
 * What scripts/bench/load.lua prints at the end of a wrk run, plus `rps`.
 * @typedef {{ requests: number, durationUs: number, non2xx: number, errors: number, p50Us: number, p99Us: number, tokensWrapped?: number, rps: number }} WrkResult
 */
/** What scripts/bench/fixed-rate.mjs prints. @typedef {{ requests: number, non2xx: number, errors: number, late: number, seconds: number, statuses?: Record<string, number> }} FixedRateResult */

/** The repository root. */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const API_KEY = 'bench-key';
export const SECRET = 'bench-secret-0123456789abcdef';
export const PATH = '/api/v3/viewer/accounts';

/** @param {number} ms */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** @param {number[]} xs @returns {number} NaN for no values */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length / 2;
  return s.length % 2 ? (s[(s.length - 1) / 2] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

/**
 * `record[name]`, which the harness has filled in (noUncheckedIndexedAccess: a missing one is a bug).
 * @template T
 * @param {Record<string, T>} record
 * @param {string} name
 * @returns {T}
 */
export function get(record, name) {
  const value = record[name];
  if (value === undefined) throw new Error(`no results for ${name}`);
  return value;
}

/** @param {number} x */
export const round3 = (x) => Math.round(x * 1000) / 1000;

/**
 * Command-line options with node:util's parseArgs, plus --help (prints `usage`, exits 0);
 * a usage error prints the problem and `usage` on stderr and exits 2.
 * @template {NonNullable<import('node:util').ParseArgsConfig['options']>} const T
 * @param {T} options
 * @param {string} usage
 */
export function parseOptions(options, usage) {
  try {
    const { values } = parseArgs({ options: { ...options, help: { type: 'boolean', short: 'h' } } });
    if ('help' in values && values.help) {
      process.stdout.write(`${usage.trim()}\n`);
      process.exit(0);
    }
    // parseArgs types the values of the options given, not of `help` added here.
    return /** @type {ReturnType<typeof parseArgs<{ options: T }>>['values']} */ (values);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n\n${usage.trim()}\n`);
    process.exit(2);
  }
}

/**
 * Runs a harness's main(); any error exits 1; `cleanup` runs either way.
 * @param {() => Promise<unknown>} main
 * @param {() => void} cleanup
 */
export function runMain(main, cleanup) {
  main()
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    })
    .finally(cleanup);
}

/** @param {string} file @param {unknown} result */
export function writeResult(file, result) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`wrote ${file}`);
}

/**
 * The port a child printed as {"port":N} on its first line.
 * @param {string} out
 */
function jsonPort(out) {
  const m = /\{"port":(\d+)\}/.exec(out);
  return m ? Number(m[1]) : undefined;
}

/**
 * Children whose output goes to files in `dir`, never to a pipe: the harness
 * blocks in spawnSync while load runs, and an undrained pipe would make
 * Keygate's async logger buffer lines in memory (a real log shipper drains).
 * @param {string} dir
 * @param {string} root
 */
export function createChildren(dir, root) {
  /** @type {ChildProcess[]} */
  const children = [];
  /**
   * @param {string} name
   * @param {string} cmd
   * @param {string[]} argv
   * @param {Env} env
   * @param {(output: string) => boolean} ready
   * @returns {Promise<Child>}
   */
  async function start(name, cmd, argv, env, ready, cwd = root) {
    const logFile = join(dir, `${name}.log`);
    const fd = openSync(logFile, 'w');
    const child = spawn(cmd, argv, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    children.push(child);
    const output = () => readFileSync(logFile, 'utf8');
    const deadline = Date.now() + 15_000;
    while (!ready(output())) {
      if (child.exitCode !== null || Date.now() > deadline) {
        throw new Error(`${name} did not start: ${output().slice(0, 2000)}`);
      }
      await sleep(20);
    }
    return Object.assign(child, { output });
  }
  /** @type {Array<() => unknown>} */
  const stops = [];
  const killAll = () => {
    for (const c of children) c.kill('SIGTERM');
    for (const stop of stops) void stop();
  };
  /** How killAll() stops a process started elsewhere (scripts/harness/). @param {() => unknown} stop */
  const track = (stop) => void stops.push(stop);
  return { dir, start, track, killAll };
}

/**
 * A small node script of scripts/bench/ that prints {"port":N} once it listens.
 * @param {Children} children
 * @param {string} name the log's name
 * @param {string} script file name in scripts/bench/
 * @param {Env} [env]
 * @param {string[]} [nodeArgs] options for node itself (--trace-gc-nvp: see gcReader)
 */
async function startListener(children, name, script, env = {}, nodeArgs = []) {
  const argv = [...nodeArgs, `scripts/bench/${script}`];
  const child = await children.start(name, 'node', argv, env, (o) => jsonPort(o) !== undefined);
  return { child, pid: /** @type {number} */ (child.pid), url: `http://127.0.0.1:${jsonPort(child.output())}` };
}

/** The benchmark upstream (scripts/bench/upstream.mjs). @param {Children} children */
export const startUpstream = (children) => startListener(children, 'upstream', 'upstream.mjs');

/**
 * The bare http-proxy hop every figure is compared with.
 * @param {Children} children @param {string} upstreamUrl @param {string[]} [nodeArgs]
 */
export const startBareProxy = (children, upstreamUrl, nodeArgs = []) =>
  startListener(children, 'bare-proxy', 'bare-proxy.mjs', { UPSTREAM: upstreamUrl }, nodeArgs);

/** The bare undici hop. @param {Children} children @param {string} upstreamUrl @param {string[]} [nodeArgs] */
export const startBareUndici = (children, upstreamUrl, nodeArgs = []) =>
  startListener(children, 'bare-undici', 'bare-undici.mjs', { UPSTREAM: upstreamUrl }, nodeArgs);

/**
 * `keygate serve` from `cwd`'s bin/keygate.js (scripts/harness/spawn-keygate.mjs) on free loopback
 * ports, at log level info, with no Redis and no keys file unless `env` names them; output in
 * `<name>.log` of the children's directory.
 * @param {Children} children
 * @param {string} name
 * @param {string} upstreamUrl
 * @param {Env} env
 * @param {string} [cwd] the checkout to run (default: this one)
 * @param {string[]} [nodeArgs] options for node itself (--trace-gc-nvp: see gcReader)
 */
export async function startKeygate(children, name, upstreamUrl, env, cwd = ROOT, nodeArgs = []) {
  const kg = await serveKeygate(
    { KEYGATE_UPSTREAM: upstreamUrl, KEYGATE_LOG_LEVEL: 'info', ...env },
    // 60 s: at a load average of 15 and more on 2 cores a start took longer than serveKeygate's default 15 s.
    { bin: join(cwd, 'bin', 'keygate.js'), cwd, log: join(children.dir, `${name}.log`), nodeArgs, timeoutMs: 60_000 },
  );
  children.track(() => kg.child.kill('SIGTERM'));
  /** @type {Child} */
  const child = Object.assign(kg.child, { output: kg.output });
  return { child, pid: kg.pid, url: kg.url, adminUrl: kg.adminUrl };
}

/**
 * A throwaway redis-server on a free port (scripts/harness/redis-server.mjs), with the bench key
 * imported by `keygateDir`'s CLI.
 * @param {Children} children
 * @param {string} dir
 * @param {string} keygateDir
 * @param {string} [owner] the bench key's owner (none by default)
 * @param {number} [credits] the bench key's credits (none by default)
 */
export async function startRedisWithKey(children, dir, keygateDir, owner = undefined, credits = undefined) {
  const redis = await startRedisServer({ dir, log: join(dir, 'redis.log') });
  children.track(redis.stop);
  const keysFile = writeKeysFile(dir, owner, credits);
  await runKeygate(['keys', 'import', keysFile], { KEYGATE_REDIS_URL: redis.url }, undefined, {
    bin: join(keygateDir, 'bin', 'keygate.js'),
    cwd: keygateDir,
  }).catch((/** @type {{ stderr?: string }} */ err) => {
    throw new Error(`key import failed: ${err.stderr ?? String(err)}`);
  });
  return { port: redis.port, url: redis.url, keysFile };
}

/**
 * redis-cli against a loopback port; its stdout ('' when it could not run).
 * @param {number} port
 * @param {...string} args
 */
export function redisCli(port, ...args) {
  return spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).stdout ?? '';
}

/**
 * @param {string} dir @param {string} [owner] the bench key's owner (none by default)
 * @param {number} [credits] the bench key's credits (none by default: unlimited, nothing to spend)
 */
export function writeKeysFile(dir, owner = undefined, credits = undefined) {
  const file = join(dir, 'keys.yaml');
  const ownerField = owner === undefined ? '' : `, owner: ${owner}`;
  const creditsField = credits === undefined ? '' : `, credits: { remaining: ${credits} }`;
  writeFileSync(
    file,
    `keys:\n  - { apiKey: ${API_KEY}, apiSecret: ${SECRET}, id: bench${ownerField}${creditsField}, scopes: [accounts:read] }\n`,
  );
  return file;
}

// ---- load generators ----------------------------------------------------------

/**
 * Exits 1 with an install hint when wrk is not on PATH.
 * @param {string} what who needs it, for the message
 */
export function requireWrk(what) {
  if (spawnSync('wrk', ['--version']).error) {
    console.error(`${what} needs wrk on PATH (apt-get install -y wrk); .ci/run installs it`);
    process.exit(1);
  }
}

/**
 * wrk's argv and environment for scripts/bench/load.lua: each request carries the next token
 * of `tokensFile` (none when undefined) on `path`.
 * @param {{ url: string, tokensFile: string | undefined, seconds: number, connections: number, threads: number, path?: string, timeout?: string }} o
 */
export function wrkCommand({ url, tokensFile, seconds, connections, threads, path = PATH, timeout }) {
  const argv = [`-t${threads}`, `-c${connections}`, `-d${seconds}s`, ...(timeout ? ['--timeout', timeout] : [])];
  argv.push('--latency', '-s', join(ROOT, 'scripts/bench/load.lua'), url);
  const env = { ...process.env, TOKENS_FILE: tokensFile ?? '', WRK_THREADS: String(threads), BENCH_PATH: path };
  return { argv, env };
}

/**
 * The JSON line load.lua printed, with req/s.
 * @param {string} stdout
 * @param {string} stderr
 * @returns {WrkResult}
 */
export function parseWrkOutput(stdout, stderr) {
  const line = stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .pop();
  if (!line) throw new Error(`wrk failed: ${stderr || stdout}`);
  const res = /** @type {Omit<WrkResult, 'rps'>} */ (JSON.parse(line));
  return { ...res, rps: res.requests / (res.durationUs / 1e6) };
}

/**
 * wrk to the end (the harness blocks meanwhile; children log to files, see createChildren).
 * @param {Parameters<typeof wrkCommand>[0]} o
 */
export function runWrkSync(o) {
  const { argv, env } = wrkCommand(o);
  const r = spawnSync('wrk', argv, { env, encoding: 'utf8', maxBuffer: 10_000_000 });
  return parseWrkOutput(r.stdout ?? '', r.stderr ?? '');
}

/**
 * Open-loop load at a fixed rate (scripts/bench/fixed-rate.mjs), one token per request.
 * @param {string} url
 * @param {number} rate requests per second
 * @param {number} seconds
 * @param {string} tokensFile
 * @param {string} [path]
 * @param {{ method: string, bodyFile?: string }} [request] another method, and a body sent with every request
 * @returns {FixedRateResult}
 */
export function runFixedRate(url, rate, seconds, tokensFile, path = PATH, request = undefined) {
  const script = join(ROOT, 'scripts/bench/fixed-rate.mjs');
  const extra = request ? [request.method, ...(request.bodyFile ? [request.bodyFile] : [])] : [];
  const r = spawnSync(process.execPath, [script, url, String(rate), String(seconds), tokensFile, path, ...extra], {
    encoding: 'utf8',
  });
  const line = r.stdout.trim().split('\n').pop();
  if (r.status !== 0 || !line?.startsWith('{')) throw new Error(`fixed-rate load failed: ${r.stderr || r.stdout}`);
  return /** @type {FixedRateResult} */ (JSON.parse(line));
}

// ---- GC readings ---------------------------------------------------------------

/** The node option a target runs with so that gcReader can read its collections from its log file. */
export const TRACE_GC = '--trace-gc-nvp';

/**
 * @typedef {object} GcWindow
 * @property {number} bytesPerRequest bytes the V8 heap allocated per request (NaN with fewer than 2 collections)
 * @property {number} scavengesPer10k young-generation collections per 10,000 requests
 * @property {number} scavengeMsPer10k their pauses summed, ms per 10,000 requests
 * @property {number} markCompacts full collections in the window
 */

/**
 * Reads the collections a process started with TRACE_GC wrote to its log file (V8's one line per
 * GC: `<ms since start> ms: pause=… gc=s … allocated=<bytes since the previous GC> …`), window by
 * window: `start()` before a measurement, `stop(requests, seconds)` after it. Allocation per request
 * does not depend on the load (unlike CPU time), so it resolves a few hundred bytes where CPU time
 * cannot resolve 5 µs. Bytes are counted between the window's first and last collection and divided
 * by the requests the fixed offered rate sent in that span (requests / seconds × span): a window
 * boundary falls between collections, so counting whole windows would be off by up to one young
 * generation (about 1 MB at 1,500 req/s, 15% of a 5 s window).
 * @param {string} logFile
 */
export function gcReader(logFile) {
  let offset = 0;
  const read = () => {
    const buf = readFileSync(logFile);
    const text = buf.subarray(offset).toString('latin1');
    offset = buf.length;
    return text;
  };
  return {
    start() {
      read();
    },
    /** @param {number} requests @param {number} seconds @returns {GcWindow} */
    stop(requests, seconds) {
      /** @type {Array<{ atMs: number, kind: string, pauseMs: number, allocated: number }>} */
      const events = [];
      const line = /\s(\d+) ms: pause=([\d.]+) .*?gc=(\w+) .*?allocated=(\d+)/g;
      for (const m of read().matchAll(line)) {
        events.push({ atMs: Number(m[1]), pauseMs: Number(m[2]), kind: String(m[3]), allocated: Number(m[4]) });
      }
      const scavenges = events.filter((e) => e.kind === 's');
      const first = events[0];
      const last = events.at(-1);
      const spanS = first && last ? (last.atMs - first.atMs) / 1000 : 0;
      const allocated = events.slice(1).reduce((sum, e) => sum + e.allocated, 0);
      return {
        bytesPerRequest: spanS > 0 ? allocated / ((requests / seconds) * spanS) : NaN,
        scavengesPer10k: (scavenges.length / requests) * 10_000,
        scavengeMsPer10k: (scavenges.reduce((sum, e) => sum + e.pauseMs, 0) / requests) * 10_000,
        markCompacts: events.length - scavenges.length,
      };
    },
  };
}

// ---- CPU pinning -------------------------------------------------------------------

/**
 * Pins a process and all its threads to one CPU (`taskset -a -p -c`); children it starts later
 * inherit the mask. Throws when taskset is missing or refuses.
 * @param {number} pid
 * @param {number} cpu
 */
export function pinToCpu(pid, cpu) {
  const r = spawnSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { encoding: 'utf8' });
  if (r.error || r.status !== 0)
    throw new Error(`taskset could not pin ${pid} to CPU ${cpu}: ${r.error?.message ?? r.stderr}`);
}

// ---- /proc readings ---------------------------------------------------------

/** @type {number | undefined} */
let clockTicks;
/** Clock ticks per second (getconf CLK_TCK, asked once, on first use). */
function clockTicksPerSecond() {
  clockTicks ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  return clockTicks;
}

/**
 * CPU time (user + system) a process has used so far, in µs (/proc/<pid>/stat, clock ticks).
 * @param {number} pid
 * @returns {number | undefined} undefined once the process is gone
 */
export function cpuUs(pid) {
  try {
    const fields = (readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1] ?? '').split(' ');
    // fields[11] = utime, fields[12] = stime (fields 14 and 15 of stat(5), counted after the comm field)
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicksPerSecond();
  } catch {
    return undefined;
  }
}

/**
 * A kB field of /proc/<pid>/status, in MB.
 * @param {number} pid
 * @param {string} field
 */
function statusMb(pid, field) {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** @param {number} pid */
export const peakRssMb = (pid) => statusMb(pid, 'VmHWM');

/** @param {number} pid */
export const currentRssMb = (pid) => statusMb(pid, 'VmRSS');

/**
 * Sum over a process and its direct children (KEYGATE_WORKERS > 1 runs workers).
 * @param {number} pid
 * @param {(pid: number) => number | undefined} fn
 */
export function treeSum(pid, fn) {
  let total = fn(pid) ?? 0;
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    for (const c of kids) total += fn(Number(c)) ?? 0;
  } catch {
    // no children file: single process
  }
  return total;
}

// ---- tokens -------------------------------------------------------------------

/**
 * A token for the bench key (or `sub`) with this nonce, signed with `secret` (scripts/harness/mint.mjs).
 * @param {bigint | number | string} nonce
 * @param {string} [secret]
 * @param {string} [sub]
 */
export function mint(nonce, secret = SECRET, sub = API_KEY) {
  return token(sub, secret, { nonce: nonce.toString() });
}

let lastNonce = BigInt(Date.now()) * 1_000_000n;
/**
 * Writes `count` tokens made by `signOne` to a new file in `dir`, each given a fresh nonce (from the
 * same counter as mintTokens, never reused): tokens of another alg or another key.
 * @param {string} dir
 * @param {number} count
 * @param {(nonce: bigint) => string} signOne
 */
export function mintSignedTokens(dir, count, signOne) {
  const file = join(dir, `tokens-${Date.now()}-${count}-signed.txt`);
  const floor = BigInt(Date.now()) * 1_000_000n;
  let nonce = lastNonce > floor ? lastNonce : floor;
  const lines = Array.from({ length: count }, () => signOne(++nonce));
  lastNonce = nonce;
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/**
 * Writes `count` tokens to a new file in `dir`, each with a fresh nonce (never
 * reused across calls); `mix` sets the share of replays and bad signatures.
 * @param {string} dir
 * @param {number} count
 * @param {TokenMix} [mix]
 */
export function mintTokens(dir, count, mix = { replay: 0, bad: 0 }) {
  const file = join(dir, `tokens-${Date.now()}-${count}.txt`);
  /** @type {string[]} */
  const lines = new Array(count);
  const floor = BigInt(Date.now()) * 1_000_000n;
  let nonce = lastNonce > floor ? lastNonce : floor;
  let last = mint(++nonce);
  for (let i = 0; i < count; i++) {
    const r = (i * 7919) % 100; // deterministic spread
    if (r < mix.replay * 100 && i > 0) lines[i] = last;
    else if (r < (mix.replay + mix.bad) * 100) lines[i] = mint(++nonce, 'wrong-secret-0123456789abcdef');
    else lines[i] = last = mint(++nonce);
  }
  lastNonce = nonce;
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/**
 * Pins a process and its direct children (nginx's worker) to one CPU; see pinToCpu.
 * @param {number} pid
 * @param {number} cpu
 */
export function pinTree(pid, cpu) {
  pinToCpu(pid, cpu);
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    for (const c of kids) pinToCpu(Number(c), cpu);
  } catch {
    // no children file: single process
  }
}

// ---- syscalls and event-loop turns -------------------------------------------------

/** Whether strace can run here (the --syscalls pass needs it). */
export function straceAvailable() {
  return !spawnSync('strace', ['-V']).error;
}

/**
 * Counts the syscalls of one thread while load runs: `strace -c -p <tid>` attached to the thread
 * that runs the event loop (a Node process's main thread, whose id is its pid; nginx's worker
 * process). Only that thread: libuv's pool threads and V8's GC threads make no loop turns.
 * Loop turns are epoll_wait/epoll_pwait calls: libuv's poll phase makes one per loop iteration
 * (and nginx one per cycle of its event loop), more only when a poll fills its whole event array.
 * ptrace stops the thread at every syscall, so the process runs slower while it is counted: the
 * counts are per request of a saturated process, but not CPU figures (those come from runs without it).
 * `stop()` detaches (SIGINT) and resolves with calls per syscall name.
 * @param {number} tid
 * @param {string} file strace's summary
 */
export function countSyscalls(tid, file) {
  const child = spawn('strace', ['-c', '-o', file, '-p', String(tid)], { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    /** Gives strace time to attach (it stops the thread once to do so). */
    attached: () => sleep(300),
    /** @returns {Promise<Record<string, number>>} */
    async stop() {
      child.kill('SIGINT');
      await exited;
      /** @type {Record<string, number>} */
      const calls = {};
      let text;
      try {
        text = readFileSync(file, 'utf8');
      } catch {
        return calls;
      }
      // "% time  seconds  usecs/call  calls  [errors]  syscall"
      for (const m of text.matchAll(/^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?([a-z_0-9]+)\s*$/gm)) {
        if (m[2] !== 'total') calls[String(m[2])] = Number(m[1]);
      }
      return calls;
    },
  };
}

/** A loop's turns from its syscall counts (see countSyscalls). @param {Record<string, number>} calls */
export const loopTurns = (calls) => (calls.epoll_wait ?? 0) + (calls.epoll_pwait ?? 0) + (calls.epoll_pwait2 ?? 0);
