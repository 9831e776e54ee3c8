// Pieces shared by the benchmark scripts (bench.mjs, bench-ab.mjs): child
// processes with output in files, /proc readings, token minting.
import { spawn, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';

export const API_KEY = 'bench-key';
export const SECRET = 'bench-secret-0123456789abcdef';
export const PATH = '/api/v3/viewer/accounts';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

export const round3 = (x) => Math.round(x * 1000) / 1000;

/** Runs a harness's main(); any error exits 1; `cleanup` runs either way. */
export function runMain(main, cleanup) {
  main()
    .catch((err) => {
      console.error(err);
      process.exitCode = 1;
    })
    .finally(cleanup);
}

export function writeResult(file, result) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`wrote ${file}`);
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** The port a child printed as {"port":N} on its first line. */
export function jsonPort(out) {
  const m = /\{"port":(\d+)\}/.exec(out);
  return m ? Number(m[1]) : undefined;
}

/**
 * Children whose output goes to files in `dir`, never to a pipe: the harness
 * blocks in spawnSync while load runs, and an undrained pipe would make
 * Keygate's async logger buffer lines in memory (a real log shipper drains).
 */
export function createChildren(dir, root) {
  const children = [];
  async function start(name, cmd, argv, env, ready, cwd = root) {
    const logFile = join(dir, `${name}.log`);
    const fd = openSync(logFile, 'w');
    const child = spawn(cmd, argv, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
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
  const killAll = () => {
    for (const c of children) c.kill('SIGTERM');
  };
  return { start, killAll };
}

/** A throwaway redis-server on a free port, with the bench key imported by `keygateDir`'s CLI. */
export async function startRedisWithKey(children, dir, keygateDir) {
  const port = await freePort();
  await children.start('redis', 'redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {}, () =>
    spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8' }).stdout?.trim() === 'PONG',
  );
  const url = `redis://127.0.0.1:${port}`;
  const keysFile = writeKeysFile(dir);
  const imp = spawnSync('node', ['bin/keygate.js', 'keys', 'import', keysFile], { cwd: keygateDir, env: { ...process.env, KEYGATE_REDIS_URL: url }, encoding: 'utf8' });
  if (imp.status !== 0) throw new Error(`key import failed: ${imp.stderr}`);
  return { port, url, keysFile };
}

export function writeKeysFile(dir) {
  const file = join(dir, 'keys.yaml');
  writeFileSync(file, `keys:\n  - { apiKey: ${API_KEY}, apiSecret: ${SECRET}, id: bench, scopes: [accounts:read] }\n`);
  return file;
}

/** Environment for `keygate serve` on loopback, with everything else off unless `env` sets it. */
export function keygateEnv(upstreamUrl, port, adminPort, env) {
  return {
    KEYGATE_UPSTREAM: upstreamUrl,
    KEYGATE_PORT: String(port),
    KEYGATE_ADMIN_PORT: String(adminPort),
    KEYGATE_HOST: '127.0.0.1',
    KEYGATE_LOG_LEVEL: 'info',
    KEYGATE_REDIS_URL: '',
    KEYGATE_KEYS_FILE: '',
    ...env,
  };
}

export const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU time (user + system) a process has used so far, in µs (/proc/<pid>/stat, clock ticks). */
export function cpuUs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // fields[11] = utime, fields[12] = stime (fields 14 and 15 of stat(5), counted after the comm field)
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

export function peakRssMb(pid) {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
  } catch {
    return undefined;
  }
}

export function currentRssMb(pid) {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
  } catch {
    return undefined;
  }
}

/** Sum over a process and its direct children (KEYGATE_WORKERS > 1 runs workers). */
export function treeSum(pid, fn) {
  let total = fn(pid) ?? 0;
  try {
    for (const c of readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean)) total += fn(Number(c)) ?? 0;
  } catch {
    // no children file: single process
  }
  return total;
}

const HEADER = Buffer.from('{"alg":"HS256","typ":"JWT"}').toString('base64url');
export function mint(nonce, secret = SECRET) {
  const payload = Buffer.from(JSON.stringify({ type: 'OpenAPIV2', sub: API_KEY, nonce: nonce.toString() })).toString('base64url');
  const sig = createHmac('sha256', secret).update(`${HEADER}.${payload}`).digest('base64url');
  return `${HEADER}.${payload}.${sig}`;
}

let lastNonce = BigInt(Date.now()) * 1_000_000n;
/**
 * Writes `count` tokens to a new file in `dir`, each with a fresh nonce (never
 * reused across calls); `mix` sets the share of replays and bad signatures.
 */
export function mintTokens(dir, count, mix = { replay: 0, bad: 0 }) {
  const file = join(dir, `tokens-${Date.now()}-${count}.txt`);
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
