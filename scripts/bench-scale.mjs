// @ts-check
/**
 * How Keygate's cost grows with the number of keys (embedded mode, keys file): for each size and
 * format, the time until /readyz answers 200, RSS once ready and its peak (VmHWM), and the longest
 * answer to GET /api/v3/time (served by Keygate itself) while the file is replaced, against the same
 * run's longest answer without a reload. `--baseline-bin` runs another build's bin/keygate.js side by
 * side (a worktree of the commit to compare). Short by design: the machine is shared.
 * `--working-set` measures CPU per request by working-set size instead (scripts/bench/working-set.mjs);
 * the unknown-key flood and KEYGATE_WORKERS are `npm run bench` modes.
 */
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveKeygate } from './harness/spawn-keygate.mjs';
import { token } from './harness/mint.mjs';
import { parseOptions, runMain, sleep } from './bench/lib.mjs';
import { measureWorkingSets } from './bench/working-set.mjs';

const USAGE = `
npm run bench:scale -- [--sizes 100000] [--formats json,yaml,flow] [--reload-size 100000] [--reload-format json] [--reload-rounds 1] [--baseline-bin PATH] [--node-args ARGS] [--working-set redis:100,100000] [--json]
  --sizes        key counts to load (comma-separated; 1000000 is slow: run it once)
  --formats      json, yaml (block: what keygate keys export writes) and/or flow (YAML, one flow mapping a key)
  --reload-size  keys in the file replaced under traffic (0 = skip)
  --reload-format the reloaded file's format: json, yaml or flow
  --reload-rounds reloads per build, the builds alternating round by round
  --baseline-bin another build's bin/keygate.js, measured the same way in the same run
  --working-set  MODE:SIZES, CPU per request by working set instead (scripts/bench/working-set.mjs):
                 redis:100,100000 or embedded:1000,1000000; with --ws-rate 1700 --ws-seconds 5 --ws-rounds 3
  --node-args    node's own options for the served Keygate, space-separated (--node-args="--cpu-prof --trace-gc")
`;
const opts = parseOptions(
  {
    sizes: { type: 'string', default: '100000' },
    formats: { type: 'string', default: 'json,yaml,flow' },
    'reload-size': { type: 'string', default: '100000' },
    'reload-format': { type: 'string', default: 'json' },
    'reload-rounds': { type: 'string', default: '1' },
    'baseline-bin': { type: 'string' },
    'node-args': { type: 'string' },
    'working-set': { type: 'string' },
    'ws-rate': { type: 'string', default: '1700' },
    'ws-seconds': { type: 'string', default: '5' },
    'ws-rounds': { type: 'string', default: '3' },
    json: { type: 'boolean', default: false },
  },
  USAGE,
);
const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-scale-'));
// Logs and token files beside the keys files would wake the keys file's folder watch with every write.
const logDir = join(dir, 'logs');
mkdirSync(logDir);
const SECRET = 'scale-secret-0123456789abcdef';

/** @typedef {'json' | 'yaml' | 'flow'} Format */
/** @param {number} n @param {Format} format @param {string[]} extra */
function writeKeys(n, format, extra = []) {
  const file = join(dir, `keys-${n}-${format}.${format === 'json' ? 'json' : 'yaml'}`);
  const names = [...Array.from({ length: n }, (_, i) => `key-${i}`), ...extra];
  const text =
    format === 'json'
      ? `{"keys":[\n${names.map((k) => JSON.stringify({ apiKey: k, apiSecret: `${SECRET}-${k}`, scopes: ['accounts:read'] })).join(',\n')}\n]}\n`
      : format === 'flow'
        ? `keys:\n${names.map((k) => `  - { apiKey: ${k}, apiSecret: ${SECRET}-${k}, scopes: [accounts:read] }\n`).join('')}`
        : `keys:\n${names.map((k) => `  - apiKey: ${k}\n    apiSecret: ${SECRET}-${k}\n    scopes: [accounts:read]\n`).join('')}`;
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
  return file;
}

/** @param {number} pid */
function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (/** @type {string} */ name) => Number(new RegExp(`${name}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMb: Math.round(kb('VmRSS') / 1024), peakMb: Math.round(kb('VmHWM') / 1024) };
}

/** @param {string | undefined} bin @param {string} file */
async function start(bin, file) {
  const t0 = performance.now();
  const kg = await serveKeygate(
    {
      KEYGATE_KEYS_FILE: file,
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_LOG_LEVEL: 'warn',
    },
    {
      ...(bin && { bin }),
      ...(opts['node-args'] && { nodeArgs: opts['node-args'].split(' ').filter(Boolean) }),
      readyPath: '/readyz',
      timeoutMs: 600_000,
      log: join(logDir, 'keygate.log'),
    },
  );
  return { kg, readyS: (performance.now() - t0) / 1000 };
}

/** @param {string} url @param {() => Promise<boolean>} until longest answer of 4 lanes of back-to-back requests */
async function longest(url, until) {
  let over = false;
  /** @type {number[]} */
  const times = [];
  let errors = 0;
  const lane = async () => {
    while (!over) {
      const t0 = performance.now();
      // A keep-alive socket the server closed at the same moment fails the fetch: counted, not fatal.
      await fetch(`${url}/api/v3/time`).then(
        (r) => r.arrayBuffer(),
        () => errors++,
      );
      times.push(performance.now() - t0);
    }
  };
  const lanes = Array.from({ length: 4 }, lane);
  while (!(await until())) await sleep(20);
  over = true;
  await Promise.all(lanes);
  times.sort((a, b) => a - b);
  const ms = (/** @type {number | undefined} */ x) => Math.round((x ?? NaN) * 10) / 10;
  // The 99th percentile beside the longest: on a shared machine one descheduling can set the longest.
  return { maxMs: ms(times.at(-1)), p99Ms: ms(times[Math.floor(times.length * 0.99)]), count: times.length, errors };
}

/** @param {string | undefined} bin @param {number} n */
async function reload(bin, n) {
  const format = /** @type {Format} */ (opts['reload-format']);
  const file = writeKeys(n, format);
  const { kg } = await start(bin, file);
  try {
    const quietUntil = Date.now() + 3_000;
    const quiet = await longest(kg.url, async () => Date.now() > quietUntil);
    const t0 = performance.now();
    writeKeys(n, format, ['newcomer']);
    const seen = () =>
      fetch(`${kg.url}/api/v3/viewer/accounts`, {
        headers: { authorization: `Bearer ${token('newcomer', `${SECRET}-newcomer`)}` },
      }).then(
        (r) => r.status !== 404,
        () => false,
      );
    const during = await longest(kg.url, seen);
    return {
      keys: n,
      format,
      visibleS: Math.round((performance.now() - t0) / 100) / 10,
      duringMaxMs: during.maxMs,
      quietMaxMs: quiet.maxMs,
      duringP99Ms: during.p99Ms,
      quietP99Ms: quiet.p99Ms,
      requestsDuring: during.count,
      failedDuring: during.errors,
    };
  } finally {
    await kg.stop();
  }
}

async function main() {
  if (opts['working-set']) {
    const [mode, sizes = ''] = opts['working-set'].split(':');
    if (mode !== 'redis' && mode !== 'embedded') throw new Error(`--working-set: redis or embedded, not ${mode}`);
    const rows = await measureWorkingSets({
      dir,
      logDir,
      mode,
      sizes: sizes.split(',').map(Number),
      rate: Number(opts['ws-rate']),
      seconds: Number(opts['ws-seconds']),
      rounds: Number(opts['ws-rounds']),
    });
    if (opts.json) console.log(JSON.stringify({ workingSets: rows }, null, 2));
    else console.table(rows);
    return;
  }
  const builds = /** @type {Array<[string, string | undefined]>} */ ([
    ...(opts['baseline-bin'] ? [['baseline', opts['baseline-bin']]] : []),
    ['this', undefined],
  ]);
  const rows = [];
  for (const n of opts.sizes
    .split(',')
    .map(Number)
    .filter((k) => k > 0)) {
    for (const format of /** @type {Format[]} */ (opts.formats.split(','))) {
      const file = writeKeys(n, format);
      for (const [build, bin] of builds) {
        try {
          const { kg, readyS } = await start(bin, file);
          const atReady = memory(kg.pid);
          await sleep(5_000);
          const later = memory(kg.pid);
          await kg.stop();
          rows.push({
            build,
            keys: n,
            format,
            readyS: Math.round(readyS * 10) / 10,
            rssReadyMb: atReady.rssMb,
            rss5sMb: later.rssMb,
            peakMb: later.peakMb,
          });
        } catch (err) {
          rows.push({ build, keys: n, format, failed: String(err).split('\n')[0] });
        }
        console.error(JSON.stringify(rows.at(-1)));
      }
      rmSync(file);
    }
  }
  const reloads = [];
  const rn = Number(opts['reload-size']);
  if (rn > 0)
    for (let round = 1; round <= Number(opts['reload-rounds']); round++)
      for (const [build, bin] of builds) {
        reloads.push({ build, round, ...(await reload(bin, rn)) });
        console.error(JSON.stringify(reloads.at(-1)));
      }
  const result = { loads: rows, reloads };
  if (opts.json) console.log(JSON.stringify(result, null, 2));
  else {
    console.table(rows);
    console.table(reloads);
  }
}

runMain(main, () => rmSync(dir, { recursive: true, force: true }));
