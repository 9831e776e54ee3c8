#!/usr/bin/env node
// @ts-check
// Instructions and bytes per request, the two figures that do not depend on the machine's load.
//
//   npm run build && node scripts/bench-instructions.mjs [--targets bare-undici,public,embedded,redis,redis-credits]
//        [--requests 2000] [--gc-requests 20000] [--connections 8] [--log-level info] [--json FILE]
//
// Per target, twice:
// - under `valgrind --tool=callgrind` with instrumentation off while it starts and warms up, then on for
//   exactly `--requests` requests (`callgrind_control -i on/off`): the instructions the serving process
//   (all its threads) ran per request. Valgrind runs the process on one thread at a time, so the count
//   is the same on a quiet and on a loaded machine, to within about 1% between runs;
// - without valgrind, started with a 1 MB young generation (`--max-semi-space-size=1`, so a window's
//   edges are off by at most 1 MB) and `--trace-gc-nvp`: the V8 heap bytes allocated per request and
//   the scavenges per 10,000 requests over `--gc-requests` requests.
// The load is a closed loop of `--connections` keep-alive connections from this process, a fresh token
// per request (the public route and the bare hop get none). Use it to compare two builds or two commits:
// wall-clock figures (`npm run bench`) need a quiet machine, these do not.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  PATH,
  ROOT,
  createChildren,
  mint,
  parseOptions,
  round3,
  runMain,
  sleep,
  startRedisWithKey,
  startUpstream,
  writeKeysFile,
  writeResult,
} from './bench/lib.mjs';
import { freePort } from './harness/free-port.mjs';

const USAGE = `
Usage: node scripts/bench-instructions.mjs [options]   (after npm run build)

  --targets LIST        bare-undici,public,embedded,redis,redis-credits (default the first four; redis-credits:
                        the Redis path with a key holding credits, each request spending one)
  --requests N          requests counted under callgrind (default 2000)
  --gc-requests N       requests counted for bytes allocated (default 20000)
  --warmup N            requests before callgrind counts (default 4000: until the JIT has settled)
  --connections N       keep-alive connections of the closed-loop load (default 8)
  --log-level L         Keygate's KEYGATE_LOG_LEVEL (default info)
  --no-callgrind        bytes only
  --cpu-prof DIR        also write a CPU profile of each target's bytes run (node --cpu-prof) into DIR/<target>
  --json FILE           also write the figures as JSON
`;

const args = parseOptions(
  {
    targets: { type: 'string', default: 'bare-undici,public,embedded,redis' },
    requests: { type: 'string', default: '2000' },
    'gc-requests': { type: 'string', default: '20000' },
    connections: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '4000' },
    'log-level': { type: 'string', default: 'info' },
    'no-callgrind': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    json: { type: 'string' },
  },
  USAGE,
);

const PUBLIC_PATH = '/public/bench';
const dir = mkdtempSync(join(tmpdir(), 'keygate-instructions-'));
const children = createChildren(dir, ROOT);

/**
 * Sends `count` GET requests over `connections` keep-alive connections, one after another on each.
 * @param {string} url @param {string} path @param {number} count @param {number} connections @param {boolean} tokens
 * @returns {Promise<{ non2xx: number, errors: number }>}
 */
function drive(url, path, count, connections, tokens) {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const target = new URL(path, url);
  let sent = 0;
  let done = 0;
  let non2xx = 0;
  let errors = 0;
  return new Promise((resolve) => {
    const next = () => {
      if (sent >= count) return;
      sent++;
      const req = request(
        {
          agent,
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          headers: tokens ? { authorization: `Bearer ${mint(nonce())}` } : {},
        },
        (res) => {
          if ((res.statusCode ?? 0) < 200 || (res.statusCode ?? 0) > 299) non2xx++;
          res.resume();
          res.on('end', finished);
        },
      );
      req.on('error', () => {
        errors++;
        finished();
      });
      req.end();
    };
    const finished = () => {
      done++;
      if (done === count) {
        agent.destroy();
        resolve({ non2xx, errors });
      } else next();
    };
    for (let i = 0; i < Math.min(connections, count); i++) next();
  });
}

let lastNonce = BigInt(Date.now()) * 1_000_000n;
const nonce = () => {
  const now = BigInt(Date.now()) * 1_000_000n;
  lastNonce = lastNonce >= now ? lastNonce + 1n : now;
  return lastNonce;
};

/**
 * One target process: `prefix` runs before node (valgrind), `nodeArgs` are node's own options.
 * @param {string} name @param {string[]} prefix @param {string[]} nodeArgs @param {string[]} script
 * @param {Record<string, string>} env @param {number} port
 */
async function startTarget(name, prefix, nodeArgs, script, env, port) {
  const logFile = join(dir, `${name}.log`);
  const fd = openSync(logFile, 'w');
  const argv = [...prefix, process.execPath, ...nodeArgs, ...script];
  const child = spawn(/** @type {string} */ (argv[0]), argv.slice(1), {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  children.track(() => child.kill('SIGKILL'));
  const deadline = Date.now() + 180_000;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const r = request({ host: '127.0.0.1', port, path: '/healthz' }, (res) => {
        res.resume();
        resolve(true);
      });
      r.on('error', () => resolve(false));
      r.end();
    });
    if (ok) break;
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`${name} did not start: ${readFileSync(logFile, 'utf8').slice(0, 2000)}`);
    await sleep(200);
  }
  return { child, logFile };
}

/** @param {import('node:child_process').ChildProcess} child */
async function stop(child) {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(30_000)]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

/**
 * Instructions (Ir) in callgrind's output files, one per thread (`--separate-threads`): the main thread's
 * (the event loop: what one core carries) and all threads' (with the compiler and GC helpers).
 * @param {string} prefix
 */
function callgrindIr(prefix) {
  let all = 0;
  let main = 0;
  for (const f of readdirSync(dir).filter((n) => n.startsWith(prefix))) {
    const m = /^totals:\s+(\d+)/m.exec(readFileSync(join(dir, f), 'utf8'));
    if (!m) continue;
    all += Number(m[1]);
    if (f.endsWith('-01')) main += Number(m[1]);
  }
  return { all, main };
}

/** Sum of `allocated=` and scavenge count of the collections in a --trace-gc-nvp log after `from` bytes. @param {string} file @param {number} from */
function gcSince(file, from) {
  const text = readFileSync(file).subarray(from).toString('latin1');
  let allocated = 0;
  let scavenges = 0;
  for (const m of text.matchAll(/gc=(\w+) .*?allocated=(\d+)/g)) {
    allocated += Number(m[2]);
    if (m[1] === 's') scavenges++;
  }
  return { allocated, scavenges };
}

async function main() {
  const names = String(args.targets).split(',');
  const requests = Number(args.requests);
  const gcRequests = Number(args['gc-requests']);
  const connections = Number(args.connections);
  const warmup = Number(args.warmup);
  const loadBefore = loadavg().map((x) => x.toFixed(2));
  console.log(`load average before: ${loadBefore.join(' ')}`);
  const upstream = await startUpstream(children);
  const needsRedis = names.includes('redis');
  const redis = needsRedis ? await startRedisWithKey(children, dir, ROOT) : undefined;
  // Enough credits for every request the run sends, so each one spends and none is refused.
  const creditsDir = join(dir, 'credits');
  mkdirSync(creditsDir);
  const redisCredits = names.includes('redis-credits')
    ? await startRedisWithKey(children, creditsDir, ROOT, undefined, 1_000_000_000)
    : undefined;
  const keysFile = writeKeysFile(dir);
  const policy = join(dir, 'public-policy.yaml');
  writeFileSync(
    policy,
    `routes:\n  - { method: GET, path: ${PATH}, scopes: [accounts:read] }\npublic:\n  - { method: GET, path: /public/* }\n`,
  );
  /** @type {Record<string, { script: string[], env: Record<string, string>, path: string, tokens: boolean }>} */
  const kinds = {
    'bare-undici': { script: ['scripts/bench/bare-undici.mjs'], env: {}, path: PATH, tokens: false },
    public: {
      script: ['bin/keygate.js', 'serve'],
      env: { KEYGATE_KEYS_FILE: keysFile, KEYGATE_CONFIG: policy },
      path: PUBLIC_PATH,
      tokens: false,
    },
    embedded: { script: ['bin/keygate.js', 'serve'], env: { KEYGATE_KEYS_FILE: keysFile }, path: PATH, tokens: true },
    redis: {
      script: ['bin/keygate.js', 'serve'],
      env: { KEYGATE_REDIS_URL: redis?.url ?? '' },
      path: PATH,
      tokens: true,
    },
    'redis-credits': {
      script: ['bin/keygate.js', 'serve'],
      env: { KEYGATE_REDIS_URL: redisCredits?.url ?? '' },
      path: PATH,
      tokens: true,
    },
  };
  /** @type {Record<string, Record<string, number>>} */
  const out = {};
  for (const name of names) {
    const kind = kinds[name];
    if (kind === undefined) throw new Error(`unknown target ${name}`);
    /** @param {number} port */
    const envFor = (port) => ({
      ...kind.env,
      PORT: String(port),
      UPSTREAM: upstream.url,
      KEYGATE_UPSTREAM: upstream.url,
      KEYGATE_PORT: String(port),
      KEYGATE_ADMIN_PORT: String(0),
      KEYGATE_LOG_LEVEL: String(args['log-level']),
    });
    /** @type {Record<string, number>} */
    const row = {};
    // Bytes allocated: no valgrind, a 1 MB young generation, collections logged.
    {
      const port = await freePort();
      const adminPort = await freePort();
      const env = { ...envFor(port), KEYGATE_ADMIN_PORT: String(adminPort) };
      const t = await startTarget(
        `${name}-gc`,
        [],
        [
          '--max-semi-space-size=1',
          '--trace-gc-nvp',
          ...(args['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${join(String(args['cpu-prof']), name)}`] : []),
        ],
        kind.script,
        env,
        port,
      );
      await drive(`http://127.0.0.1:${port}`, kind.path, 2000, connections, kind.tokens);
      const from = readFileSync(t.logFile).length;
      const r = await drive(`http://127.0.0.1:${port}`, kind.path, gcRequests, connections, kind.tokens);
      const gc = gcSince(t.logFile, from);
      row.bytesPerRequest = Math.round(gc.allocated / gcRequests);
      row.scavengesPer10k = round3((gc.scavenges / gcRequests) * 10_000);
      row.non2xx = r.non2xx + r.errors;
      await stop(t.child);
    }
    if (!args['no-callgrind']) {
      const port = await freePort();
      const adminPort = await freePort();
      const env = { ...envFor(port), KEYGATE_ADMIN_PORT: String(adminPort) };
      const prefix = `${name}.cg`;
      const t = await startTarget(
        `${name}-callgrind`,
        [
          'valgrind',
          '--tool=callgrind',
          '--instr-atstart=no',
          '--separate-threads=yes',
          `--callgrind-out-file=${join(dir, prefix)}.%p`,
        ],
        [],
        kind.script,
        env,
        port,
      );
      // Warm up (JIT, pools, caches), then count exactly `requests` requests.
      await drive(`http://127.0.0.1:${port}`, kind.path, warmup, connections, kind.tokens);
      const pid = String(t.child.pid);
      spawnSync('callgrind_control', ['-i', 'on', pid]);
      const r = await drive(`http://127.0.0.1:${port}`, kind.path, requests, connections, kind.tokens);
      spawnSync('callgrind_control', ['-i', 'off', pid]);
      await stop(t.child);
      const ir = callgrindIr(prefix);
      row.mainThreadInstructionsPerRequest = Math.round(ir.main / requests);
      row.instructionsPerRequest = Math.round(ir.all / requests);
      row.non2xx += r.non2xx + r.errors;
    }
    out[name] = row;
    console.log(`${name}: ${JSON.stringify(row)}`);
  }
  const loadAfter = loadavg().map((x) => x.toFixed(2));
  console.log(`load average after: ${loadAfter.join(' ')}`);
  console.log(
    '\n| target | instructions per request, main thread | all threads | bytes per request | scavenges per 10k |\n|---|---|---|---|---|',
  );
  for (const [name, row] of Object.entries(out))
    console.log(
      `| ${name} | ${row.mainThreadInstructionsPerRequest ?? '–'} | ${row.instructionsPerRequest ?? '–'} | ${row.bytesPerRequest} | ${row.scavengesPer10k} |`,
    );
  if (args.json)
    writeResult(String(args.json), { loadAverage: { before: loadBefore, after: loadAfter }, targets: out });
}

runMain(main, () => children.killAll());
