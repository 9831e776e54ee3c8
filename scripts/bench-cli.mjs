#!/usr/bin/env node
// @ts-check
/**
 * How fast the `keygate` command starts: medians of alternating runs of `node -e 0` (Node's own start) and
 * of each command, in one run, so drift on a busy machine affects all alike. Prints each command's median,
 * its difference from Node's own start, how many modules it loaded (scripts/harness/record-modules.mjs: a
 * count that does not depend on load) and the load average before and after. `keys list` runs against
 * its own redis-server; `serve` is timed from spawn to /readyz answering 200 on the demo keys file.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT, median, parseOptions, runMain } from './bench/lib.mjs';
import { startRedisServer } from './harness/redis-server.mjs';
import { KEYGATE_BIN, childEnv, serveKeygate } from './harness/spawn-keygate.mjs';

const USAGE = `
npm run bench:cli [-- --runs 11 --serve-runs 5]

  --runs N        runs of each command, alternating with node -e 0 (default 11)
  --serve-runs N  starts of keygate serve on the demo keys file, timed to /readyz 200 (default 5)
`;

const RECORDER = fileURLToPath(new URL('./harness/record-modules.mjs', import.meta.url));
const DEMO_KEYS = join(ROOT, 'examples', 'demo-keys.yaml');
const opts = parseOptions({ runs: { type: 'string' }, 'serve-runs': { type: 'string' } }, USAGE);
const runs = Number(opts.runs ?? 11);
const serveRuns = Number(opts['serve-runs'] ?? 5);
const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-cli-'));
/** @type {Array<() => Promise<unknown>>} */
const cleanups = [];

/**
 * @typedef {{ name: string, argv: string[], env?: Record<string, string> }} Case
 */

/** Milliseconds from spawn to exit; the command must succeed. @param {Case} c */
function timeOnce(c) {
  const start = process.hrtime.bigint();
  const r = spawnSync(process.execPath, c.argv, { env: childEnv('inherit', c.env ?? {}), stdio: 'ignore' });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (r.status !== 0) throw new Error(`${c.name} exited ${r.status}`);
  return ms;
}

/** How many modules the command loaded (not a timing: the same on a busy machine). @param {Case} c */
function modulesLoaded(c) {
  const file = join(dir, `modules-${c.name.replace(/\W+/g, '-')}.txt`);
  const r = spawnSync(process.execPath, ['--import', RECORDER, ...c.argv], {
    env: childEnv('inherit', { ...c.env, RECORD_MODULES_FILE: file }),
    stdio: 'ignore',
  });
  if (r.status !== 0) throw new Error(`${c.name} exited ${r.status}`);
  // node -e 0 loads no module of its own: the recorder then writes nothing.
  return existsSync(file) ? new Set(readFileSync(file, 'utf8').split('\n').filter(Boolean)).size : 0;
}

const fmt = (/** @type {number[]} */ l) => l.map((x) => x.toFixed(2)).join(' ');

async function main() {
  const redis = await startRedisServer({ persistence: 'none' });
  cleanups.push(() => redis.stop());
  /** @type {Case[]} */
  const cases = [
    { name: 'node -e 0', argv: ['-e', '0'] },
    { name: 'keygate token', argv: [KEYGATE_BIN, 'token', '--key', 'k', '--secret', 'bench-secret-0123456789abcdef'] },
    { name: 'keygate --version', argv: [KEYGATE_BIN, '--version'] },
    { name: 'keygate help', argv: [KEYGATE_BIN, 'help'] },
    { name: 'keygate keys list', argv: [KEYGATE_BIN, 'keys', 'list'], env: { KEYGATE_REDIS_URL: redis.url } },
  ];
  const loadBefore = loadavg();
  /** @type {Map<string, number[]>} */
  const times = new Map(cases.map((c) => [c.name, []]));
  for (const c of cases) timeOnce(c); // warm the file cache
  for (let i = 0; i < runs; i++) for (const c of cases) times.get(c.name)?.push(timeOnce(c));
  /** @type {number[]} */
  const serveMs = [];
  for (let i = 0; i < serveRuns; i++) {
    const start = process.hrtime.bigint();
    const served = await serveKeygate(
      { KEYGATE_KEYS_FILE: DEMO_KEYS, KEYGATE_UPSTREAM: 'http://127.0.0.1:9' },
      { readyPath: '/readyz', log: join(dir, `serve-${i}.log`) },
    );
    serveMs.push(Number(process.hrtime.bigint() - start) / 1e6);
    await served.stop();
  }
  const loadAfter = loadavg();
  const base = median(times.get('node -e 0') ?? []);
  const lines = [`keygate CLI start, medians of ${runs} alternating runs (serve: ${serveRuns} starts)`];
  lines.push(`load average before: ${fmt(loadBefore)}; after: ${fmt(loadAfter)}; ${cpusNote()}`);
  for (const c of cases) {
    const m = median(times.get(c.name) ?? []);
    const above = c.name === 'node -e 0' ? '' : `  (+${Math.round(m - base)} ms)`;
    lines.push(
      `${c.name.padEnd(20)} ${Math.round(m).toString().padStart(5)} ms${above.padEnd(14)}  ${modulesLoaded(c)} modules`,
    );
  }
  lines.push(
    `${'keygate serve'.padEnd(20)} ${Math.round(median(serveMs)).toString().padStart(5)} ms  to /readyz 200 (demo keys file)`,
  );
  process.stdout.write(`${lines.join('\n')}\n`);
}

function cpusNote() {
  const r = spawnSync('nproc', [], { encoding: 'utf8' });
  return `${(r.stdout ?? '').trim() || '?'} cores`;
}

runMain(main, () => {
  Promise.all(cleanups.map((f) => f())).finally(() => rmSync(dir, { recursive: true, force: true }));
});
