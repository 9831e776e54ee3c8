// @ts-check
/**
 * CPU per request by working-set size (issue 30), for bench-scale.mjs --working-set: one Keygate per
 * size, all measured in one run, round by round in alternating order, at one fixed offered rate
 * (fixed-rate.mjs), a fresh token per request. CPU from /proc of each Keygate process.
 *   redis     all keys in one Redis (imported by the CLI, the store's own layout); the Keygate of size
 *             n is sent tokens of keys 0..n-1 in turn, so at `rate` each key comes back every n/rate s
 *             (100,000 at 1,700 req/s: every 59 s). One pass over its set warms it first.
 *   embedded  the Keygate of size n loads a keys file of n keys; every Keygate is sent the same
 *             working set (the smallest size's keys): what a large key set costs by itself (heap, GC).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runKeygate, serveKeygate } from '../harness/spawn-keygate.mjs';
import { startRedisServer } from '../harness/redis-server.mjs';
import { token } from '../harness/mint.mjs';
import {
  ROOT,
  createChildren,
  cpuUs,
  currentRssMb,
  median,
  mintSignedTokens,
  round3,
  runFixedRate,
  startUpstream,
} from './lib.mjs';

const SECRET = 'working-set-secret-0123456789abcdef';

const IMPORT_CHUNK = 5_000;

/** Keys from..from+n-1. @param {string} dir @param {number} n @param {number} [from] */
function keysFile(dir, n, from = 0) {
  const file = join(dir, `ws-keys-${from}-${n}.json`);
  const lines = Array.from({ length: n }, (_, j) => from + j).map((i) =>
    JSON.stringify({ apiKey: `key-${i}`, apiSecret: `${SECRET}-${i}`, scopes: ['accounts:read'] }),
  );
  writeFileSync(file, `{"keys":[\n${lines.join(',\n')}\n]}\n`);
  return file;
}

/**
 * `keygate serve` with `env`, ready once /readyz answers (a 1,000,000-key file takes minutes on a busy machine).
 * @param {ReturnType<typeof createChildren>} children @param {string} name @param {Record<string, string>} env
 */
async function start(children, name, env) {
  const kg = await serveKeygate(
    { KEYGATE_LOG_LEVEL: 'warn', ...env },
    { readyPath: '/readyz', timeoutMs: 900_000, log: join(children.dir, `${name}.log`) },
  );
  children.track(() => kg.child.kill('SIGTERM'));
  return kg;
}

/**
 * @param {{ dir: string, logDir: string, mode: 'redis' | 'embedded', sizes: number[], rate: number, seconds: number, rounds: number }} o
 */
export async function measureWorkingSets({ dir, logDir, mode, sizes, rate, seconds, rounds }) {
  const children = createChildren(logDir, ROOT);
  try {
    const upstream = await startUpstream(children);
    const smallest = Math.min(...sizes);
    /** @type {Array<{ n: number, url: string, pid: number, working: number, next: number }>} */
    const targets = [];
    if (mode === 'redis') {
      const redis = await startRedisServer({ dir, log: join(logDir, 'redis.log') });
      children.track(redis.stop);
      const t0 = performance.now();
      // In files of 5,000: one import of 100,000 keys fails (its single Redis script call spreads
      // every key into one argument list: "Maximum call stack size exceeded"), and 10,000 failed in ioredis.
      for (let from = 0; from < Math.max(...sizes); from += IMPORT_CHUNK)
        await runKeygate(['keys', 'import', keysFile(dir, Math.min(IMPORT_CHUNK, Math.max(...sizes) - from), from)], {
          KEYGATE_REDIS_URL: redis.url,
          KEYGATE_LOG_LEVEL: 'warn',
        });
      console.error(`imported ${Math.max(...sizes)} keys in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      for (const n of sizes) {
        const kg = await start(children, `keygate-ws-${n}`, {
          KEYGATE_UPSTREAM: upstream.url,
          KEYGATE_REDIS_URL: redis.url,
        });
        targets.push({ n, url: kg.url, pid: kg.pid, working: n, next: 0 });
      }
    } else
      for (const n of sizes) {
        const t0 = performance.now();
        const kg = await start(children, `keygate-ws-${n}`, {
          KEYGATE_UPSTREAM: upstream.url,
          KEYGATE_KEYS_FILE: keysFile(dir, n),
        });
        console.error(`${n} keys loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        targets.push({ n, url: kg.url, pid: kg.pid, working: smallest, next: 0 });
      }
    /** Tokens for the target's next `count` requests, its keys in turn. @param {(typeof targets)[number]} t @param {number} count */
    const tokensFor = (t, count) =>
      mintSignedTokens(logDir, count, (nonce) => {
        const k = t.next++ % t.working;
        return token(`key-${k}`, `${SECRET}-${k}`, { nonce: String(nonce) });
      });
    for (const t of targets) {
      // One pass over the working set (at least one second): every key read and cached once. Minted
      // 5 s at a time: a token's nonce is its time, and one minted a minute ahead is refused as stale.
      let left = Math.max(t.working, rate);
      /** @type {Record<string, number>} */
      const refused = {};
      while (left > 0) {
        const count = Math.min(left, rate * 5);
        const r = runFixedRate(t.url, rate, count / rate, tokensFor(t, count));
        for (const [status, n] of Object.entries(r.statuses ?? {})) refused[status] = (refused[status] ?? 0) + n;
        left -= count;
      }
      console.error(`warmed ${mode} ${t.n}: ${t.next} requests, not 2xx: ${JSON.stringify(refused)}`);
    }
    /** @type {Map<number, number[]>} */
    const cpu = new Map(targets.map((t) => [t.n, []]));
    for (let round = 0; round < rounds; round++) {
      const order = targets.map(
        (_, i) => /** @type {(typeof targets)[number]} */ (targets[(i + round) % targets.length]),
      );
      for (const t of order) {
        const tokens = tokensFor(t, Math.round(rate * seconds));
        const c0 = cpuUs(t.pid) ?? NaN;
        const r = runFixedRate(t.url, rate, seconds, tokens);
        const us = ((cpuUs(t.pid) ?? NaN) - c0) / r.requests;
        cpu.get(t.n)?.push(us);
        console.error(
          `round ${round + 1} ${mode} ${t.n}: ${us.toFixed(1)} µs CPU/request, ${r.non2xx} not 2xx, ${r.late} late`,
        );
      }
    }
    const base = /** @type {number[]} */ (cpu.get(smallest));
    return targets.map((t) => {
      const us = /** @type {number[]} */ (cpu.get(t.n));
      const ratios = us.map((u, i) => u / (base[i] ?? NaN));
      return {
        mode,
        keys: mode === 'redis' ? Math.max(...sizes) : t.n,
        workingSet: t.working,
        ratePerSecond: rate,
        cpuUsPerRequest: round3(median(us)),
        perRound: us.map(round3),
        ratioToSmallest: round3(median(ratios)),
        rssMb: Math.round(currentRssMb(t.pid) ?? NaN),
      };
    });
  } finally {
    children.killAll();
  }
}
