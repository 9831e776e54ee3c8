#!/usr/bin/env node
// @ts-check
/**
 * Does listing keys through the management API hold up the proxy? (issue 27 item 4.) With `--keys`
 * keys in one Redis, each build's Keygate takes wrk load on the proxy twice per round: alone
 * ("quiet") and beside list calls in a loop ("listing": two loops of GET /v1/keys?limit=<page>, one
 * over the owner holding a tenth of the keys, one over every key, each following its cursors).
 * Reported per phase: proxy req/s, p99, non-2xx and socket errors, Keygate's CPU per proxied request
 * (list work included), and the list calls made. Builds and phases alternate, round by round, so
 * drift on the shared machine affects all alike; compare ratios from one run, never absolute figures
 * from separate runs. `--baseline-dir` measures another checkout (built: bin/ and dist/) side by side.
 */
import { createHash, randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ROOT,
  createChildren,
  cpuUs,
  median,
  mintTokens,
  parseOptions,
  parseWrkOutput,
  requireWrk,
  round3,
  runMain,
  startKeygate,
  startUpstream,
  treeSum,
  wrkCommand,
  writeKeysFile,
  writeResult,
} from './bench/lib.mjs';
import { freePort } from './harness/free-port.mjs';
import { startRedisServer } from './harness/redis-server.mjs';
import { runKeygate } from './harness/spawn-keygate.mjs';

const USAGE = `
npm run bench:listing -- [--keys 50000] [--seconds 5] [--rounds 2] [--connections 20] [--page 50]
                         [--baseline-dir PATH] [--out FILE] [--json]
  --keys          keys in Redis (a tenth of them under one owner)
  --seconds       wrk duration of each phase
  --rounds        rounds; each runs every build quiet, then listing
  --connections   wrk connections
  --page          the list calls' limit (1 to 500)
  --baseline-dir  another checkout, built (e.g. a git worktree of main^1 after npm run build), measured alike
`;
const opts = parseOptions(
  {
    keys: { type: 'string', default: '50000' },
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '2' },
    connections: { type: 'string', default: '20' },
    page: { type: 'string', default: '50' },
    'baseline-dir': { type: 'string' },
    out: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
  USAGE,
);
const KEYS = Number(opts.keys);
const SECONDS = Number(opts.seconds);
const PAGE = Number(opts.page);
const BIG = 'acct_big';
requireWrk('bench:listing');

const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-listing-'));
const children = createChildren(dir, ROOT);

/** Imports KEYS keys with this checkout's CLI, 5,000 per import (one atomic write each). @param {string} redisUrl */
async function seed(redisUrl) {
  const env = { KEYGATE_REDIS_URL: redisUrl, KEYGATE_REDIS_TIMEOUT_MS: '30000', KEYGATE_LOG_LEVEL: 'warn' };
  await runKeygate(['keys', 'import', writeKeysFile(dir)], env);
  for (let from = 0; from < KEYS; from += 5_000) {
    const keys = [];
    for (let i = from; i < Math.min(KEYS, from + 5_000); i++) {
      const apiKey = `kg_bench_${String(i).padStart(7, '0')}`;
      const owner = i % 10 === 0 ? BIG : `acct_${i % 1_000}`;
      keys.push({
        apiKey,
        id: `id_${apiKey}`,
        owner,
        apiSecret: `listing-secret-${apiKey}`,
        scopes: ['accounts:read'],
      });
    }
    const file = join(dir, `keys-${from}.json`);
    writeFileSync(file, JSON.stringify({ keys }));
    await runKeygate(['keys', 'import', file], env);
    rmSync(file);
  }
}

/**
 * Two list loops (the big owner's keys, every key), each following its cursors from the start again
 * at the end, until stopped; what they did.
 * @param {string} base
 * @param {string} bearer
 */
function listLoops(base, bearer) {
  let on = true;
  /** @type {number[]} */
  const ms = [];
  const statuses = /** @type {Record<string, number>} */ ({});
  /** @param {string | undefined} owner */
  const loop = async (owner) => {
    /** @type {string | null} */
    let cursor = null;
    while (on) {
      /** @type {Record<string, string>} */
      const params = { limit: String(PAGE) };
      if (owner) params.owner = owner;
      if (cursor) params.cursor = cursor;
      const q = new URLSearchParams(params);
      const t0 = performance.now();
      let status = 'error';
      try {
        /** @type {Response} */
        const r = await fetch(`${base}/v1/keys?${q}`, { headers: { authorization: `Bearer ${bearer}` } });
        status = String(r.status);
        const body = /** @type {{ nextCursor?: string | null }} */ (await r.json().catch(() => ({})));
        cursor = r.ok ? (body.nextCursor ?? null) : null;
      } catch {
        cursor = null;
      }
      ms.push(performance.now() - t0);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  const running = Promise.all([loop(BIG), loop(undefined)]);
  return async () => {
    on = false;
    await running;
    ms.sort((a, b) => a - b);
    return {
      listCalls: ms.length,
      listStatuses: statuses,
      listP50Ms: Math.round(median(ms)),
      listMaxMs: Math.round(ms.at(-1) ?? 0),
    };
  };
}

/**
 * Waits until every Keygate is idle (under 5% of a core over 500 ms; at most 60 s): a list call the
 * old code answered 503 went on reading every key, and would be charged to the next phase.
 * @param {number[]} pids
 */
async function settle(pids) {
  const until = Date.now() + 60_000;
  while (Date.now() < until) {
    const before = pids.map((p) => treeSum(p, cpuUs));
    await new Promise((r) => setTimeout(r, 500));
    if (pids.every((p, i) => treeSum(p, cpuUs) - (before[i] ?? 0) < 25_000)) return;
  }
}

/** wrk without blocking this process (the list loops run in it). @param {Parameters<typeof wrkCommand>[0]} o */
function runWrk(o) {
  const { argv, env } = wrkCommand(o);
  const child = spawn('wrk', argv, { env });
  let out = '';
  let err = '';
  child.stdout.on('data', (c) => (out += String(c)));
  child.stderr.on('data', (c) => (err += String(c)));
  return new Promise((resolve) => child.on('exit', () => resolve(parseWrkOutput(out, err))));
}

async function main() {
  const upstream = await startUpstream(children);
  const redis = await startRedisServer({ dir, log: join(dir, 'redis.log') });
  children.track(redis.stop);
  const t0 = performance.now();
  await seed(redis.url);
  console.error(`seeded ${KEYS} keys in ${Math.round((performance.now() - t0) / 1000)} s`);

  const bearer = `kgm_${randomBytes(32).toString('base64url')}`;
  const tokensFile = join(dir, 'management-tokens.yaml');
  const sha = createHash('sha256').update(bearer).digest('hex');
  writeFileSync(tokensFile, `tokens:\n  - { name: bench, sha256: ${sha}, access: read }\n`);

  const builds = /** @type {Array<[string, string]>} */ ([
    ...(opts['baseline-dir'] ? [['baseline', opts['baseline-dir']]] : []),
    ['this', ROOT],
  ]);
  const gates = [];
  for (const [build, cwd] of builds) {
    const managementPort = await freePort();
    const env = {
      KEYGATE_REDIS_URL: redis.url,
      KEYGATE_MANAGEMENT_PORT: String(managementPort),
      KEYGATE_MANAGEMENT_TOKENS_FILE: tokensFile,
      KEYGATE_LOG_LEVEL: 'warn',
    };
    const kg = await startKeygate(children, `keygate-${build}`, upstream.url, env, cwd);
    gates.push({ build, kg, management: `http://127.0.0.1:${managementPort}` });
  }

  /** @type {Array<{ round: number, build: string, phase: string, rps: number, non2xx: number, errors: number } & Record<string, unknown>>} */
  const rows = [];
  for (let round = 1; round <= Number(opts.rounds); round++)
    for (const { build, kg, management } of gates)
      for (const phase of ['quiet', 'listing']) {
        const tokens = mintTokens(dir, Math.max(20_000, 12_000 * SECONDS));
        await settle(gates.map((g) => g.kg.pid));
        const stop = phase === 'listing' ? listLoops(management, bearer) : undefined;
        const cpu0 = treeSum(kg.pid, cpuUs);
        const w = /** @type {import('./bench/lib.mjs').WrkResult} */ (
          await runWrk({
            url: kg.url,
            tokensFile: tokens,
            seconds: SECONDS,
            connections: Number(opts.connections),
            threads: 2,
          })
        );
        const cpu = treeSum(kg.pid, cpuUs) - cpu0;
        const listed = stop ? await stop() : {};
        rmSync(tokens);
        rows.push({
          round,
          build,
          phase,
          rps: Math.round(w.rps),
          p99Ms: round3(w.p99Us / 1000),
          non2xx: w.non2xx,
          errors: w.errors,
          cpuUsPerRequest: Math.round(cpu / Math.max(1, w.requests)),
          ...listed,
        });
        console.error(JSON.stringify(rows.at(-1)));
      }

  /** Per build: the median listing/quiet ratio of req/s over the rounds, and every error counted. */
  const summary = gates.map(({ build }) => {
    const mine = rows.filter((r) => r.build === build);
    const ratios = mine
      .filter((r) => r.phase === 'listing')
      .map((l) => l.rps / (mine.find((q) => q.round === l.round && q.phase === 'quiet')?.rps ?? NaN));
    return {
      build,
      keys: KEYS,
      page: PAGE,
      rpsListingVsQuiet: round3(median(ratios)),
      proxyNon2xxListing: mine.filter((r) => r.phase === 'listing').reduce((a, r) => a + r.non2xx + r.errors, 0),
      proxyNon2xxQuiet: mine.filter((r) => r.phase === 'quiet').reduce((a, r) => a + r.non2xx + r.errors, 0),
    };
  });
  const result = { rows, summary };
  if (opts.out) writeResult(opts.out, result);
  if (opts.json) console.log(JSON.stringify(result, null, 2));
  else {
    console.table(rows);
    console.table(summary);
  }
  children.killAll();
}

runMain(main, () => {
  children.killAll();
  setTimeout(() => rmSync(dir, { recursive: true, force: true }), 500).unref();
});
