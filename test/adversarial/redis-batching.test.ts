import { Agent } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send, type Reply } from '../helpers/http.js';
import { type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startInstancePair, type InstancePair } from '../helpers/instance-pair.js';
import type { TestRedis } from '../helpers/redis-server.js';
import type { RecordingUpstream } from '../helpers/recording-upstream.js';
import { token } from '../helpers/tokens.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { compileRateLimit } from '../../src/policy/rate-limit-spec.js';
import type { Charge } from '../../src/store/budgets.js';

const SECRET = 'batching-secret-0123456789abcdef';
// Long enough that 800 concurrent requests on a loaded 2-core machine never meet it while Redis answers.
const DEADLINE_MS = 2_000;
const busy = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

/**
 * The Redis path batches: commands issued in one loop turn go out together (auto-pipelining),
 * usage is written once a second, and one timer guards every call in flight. None of that may
 * weaken a guarantee: a token passes once however its copies are spread over instances and
 * batches, and a Redis that stops answering mid-batch lets nothing through.
 */
describe('batching on the Redis path keeps every guarantee', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  const forwardedFor = (apiKey: string) =>
    upstream.received.filter((r) => r.headers['x-api-key-id'] === `id-${apiKey}`).length;

  let pair: InstancePair | undefined;
  beforeAll(async () => {
    pair = await startInstancePair({
      keys: [makeKey({ apiKey: 'copies', secret: SECRET }), makeKey({ apiKey: 'frozen', secret: SECRET })],
      env: { KEYGATE_REDIS_TIMEOUT_MS: String(DEADLINE_MS), KEYGATE_KEY_CACHE_TTL_MS: '600000' },
    });
    ({ redis, upstream, a, b } = pair);
  });
  afterAll(() => pair?.close());

  it('800 copies of one token, sent concurrently over both instances in many batches, pass exactly once', async () => {
    // 50 keep-alive connections per instance: the copies reach Redis over many loop turns, so many pipelines.
    const agents = [new Agent({ keepAlive: true, maxSockets: 50 }), new Agent({ keepAlive: true, maxSockets: 50 })];
    const t = token('copies', SECRET);
    try {
      const replies = await Promise.all(
        Array.from({ length: 800 }, (_, i) =>
          send((i % 2 ? a : b).url, ACCOUNTS_PATH, { headers: bearer(t), agent: agents[i % 2] }),
        ),
      );
      const ok = replies.filter((r) => r.status === 200);
      expect(ok).toHaveLength(1);
      for (const r of replies.filter((r) => r.status !== 200))
        expect([r.status, r.json()]).toEqual([401, { code: 40106, message: 'Invalid Token' }]);
      expect(forwardedFor('copies')).toBe(1);
    } finally {
      for (const agent of agents) agent.destroy();
    }
  });

  it('the nonce writes one loop turn issues reach Redis together: 300 admits, a few socket reads, each answered', async () => {
    const admin = new Redis(redis.url);
    const reads = async () => Number(/total_reads_processed:(\d+)/.exec(await admin.info('stats'))?.[1]);
    try {
      const store = a.keygate.store;
      expect((await store.admit('copies', `turn-warm-${Date.now()}`, 60_000, undefined)).outcome).toBe('admitted');
      const before = await reads();
      const nonces = Array.from({ length: 300 }, (_, i) => `turn-${i}-${Date.now()}`);
      const outcomes = await Promise.all(nonces.map(async (n) => store.admit('copies', n, 60_000, undefined)));
      // One read for the batch and one for the INFO below; the rest of the margin is for other
      // connections (a usage flush, the subscriber), never one read per command.
      const batchReads = (await reads()) - before;
      console.log(`[redis-batching] 300 nonce writes of one loop turn: ${batchReads} Redis socket reads`);
      expect(batchReads).toBeLessThanOrEqual(6);
      expect(new Set(outcomes.map((x) => x.outcome))).toEqual(new Set(['admitted']));
      const again = await Promise.all(nonces.map(async (n) => store.admit('copies', n, 60_000, undefined)));
      expect(new Set(again.map((x) => x.outcome))).toEqual(new Set(['replay']));
    } finally {
      admin.disconnect();
    }
  });

  it('admits with a budget, written with the nonce writes as EVALSHA: after SCRIPT FLUSH each is answered through EVAL (NOSCRIPT), in order, none lost', async () => {
    const admin = new Redis(redis.url);
    const limit = compileRateLimit({ rate: '1000/s', burst: 1000 });
    const charge: Charge = { cost: 1, owner: undefined, budgets: [{ kind: 'key', limit }] };
    try {
      const store = a.keygate.store;
      const tag = `noscript-${Date.now()}`;
      expect((await store.admit('copies', `${tag}-warm`, 60_000, charge)).outcome).toBe('admitted');
      await admin.script('FLUSH');
      await admin.config('RESETSTAT');
      // One loop turn: scripted admits and plain nonce writes interleaved in one write, so a NOSCRIPT
      // reply must not shift any later reply onto the wrong request.
      const nonces = Array.from({ length: 40 }, (_, i) => `${tag}-${i}`);
      const outcomes = await Promise.all(
        nonces.map(async (n, i) => (await store.admit('copies', n, 60_000, i % 2 ? charge : undefined)).outcome),
      );
      expect(new Set(outcomes)).toEqual(new Set(['admitted']));
      const stats = await admin.info('commandstats');
      // Each scripted admit met NOSCRIPT and went again through ioredis (EVAL, which loads the script).
      expect(Number(/cmdstat_eval:calls=(\d+)/.exec(stats)?.[1] ?? 0)).toBeGreaterThanOrEqual(1);
      const again = await Promise.all(
        nonces.map(async (n, i) => (await store.admit('copies', n, 60_000, i % 2 ? charge : undefined)).outcome),
      );
      expect(new Set(again)).toEqual(new Set(['replay']));
    } finally {
      admin.disconnect();
    }
  });

  it('replies that arrived in time are used even when the loop was busy past the deadline; without replies the same wait fails', async () => {
    // One batch of admits in one loop turn: one pipeline. Once it is written (the turn after, when
    // auto-pipelining sends it), the loop is blocked past the deadline while Redis answers: the
    // replies wait in the socket. The one deadline timer fires first when the loop frees, and must
    // not blame a store that answered in time.
    const store = a.keygate.store;
    const blockedBatch = async (tag: string) => {
      const nonces = Array.from({ length: 200 }, (_, i) => `${tag}-${i}-${Date.now()}`);
      const calls = nonces.map((n) => Promise.resolve(store.admit('copies', n, 60_000, undefined)).then(ok, fail));
      await new Promise((r) => setImmediate(r)); // queued after the pipeline's own setImmediate: it is written
      busy(DEADLINE_MS + 500);
      return { nonces, outcomes: await Promise.all(calls) };
    };
    const ok = (x: { outcome: string }) => x.outcome;
    const fail = (err: unknown) => (err as Error).name;

    const answered = await blockedBatch('busy');
    expect(new Set(answered.outcomes)).toEqual(new Set(['admitted']));
    // The replies were Redis's: the nonces are recorded (a second use is a replay).
    const again = await Promise.all(
      answered.nonces.slice(0, 5).map(async (n) => store.admit('copies', n, 60_000, undefined)),
    );
    expect(again.map((x) => x.outcome)).toEqual(Array(5).fill('replay'));

    // The control: the same blocked wait with no replies coming expires every call.
    redis.pause();
    let silent: Awaited<ReturnType<typeof blockedBatch>>;
    try {
      silent = await blockedBatch('silent');
    } finally {
      redis.resume();
    }
    expect(new Set(silent.outcomes)).toEqual(new Set(['StoreUnavailableError']));
  });

  it('a Redis that stops answering mid-batch: every request waiting on it gets 503 within the deadline plus loop turns, none passes', async () => {
    // Warm the key caches: a request then needs Redis only for its nonce.
    for (const g of [a, b])
      expect((await send(g.url, ACCOUNTS_PATH, { headers: bearer(token('frozen', SECRET)) })).status).toBe(200);
    const before = forwardedFor('frozen');
    const lag = monitorEventLoopDelay({ resolution: 5 });
    lag.enable();
    let pausedAt = 0;
    const timed: Array<{ reply: Reply }> = [];
    try {
      await Promise.all(
        Array.from({ length: 200 }, async (_, i) => {
          const reply = await send((i % 2 ? a : b).url, ACCOUNTS_PATH, {
            headers: bearer(token('frozen', SECRET)),
            timeoutMs: 30_000,
          });
          // The first answer freezes Redis: the rest of the burst is in flight or still to come.
          if (pausedAt === 0) {
            redis.pause();
            pausedAt = performance.now();
          }
          timed.push({ reply });
        }),
      );
    } finally {
      redis.resume();
      lag.disable();
    }
    const statuses = timed.map((t) => t.reply.status);
    expect(new Set(statuses).size).toBeLessThanOrEqual(2);
    for (const s of statuses) expect([200, 503]).toContain(s);
    const ok = statuses.filter((s) => s === 200).length;
    expect(statuses.filter((s) => s === 503).length).toBeGreaterThan(0);
    // Nothing passed unchecked: the upstream got exactly the requests Redis admitted before the freeze.
    await expect.poll(() => forwardedFor('frozen') - before, { timeout: 5_000 }).toBe(ok);
    // Each 503 came within the deadline of its Redis call plus what this run's loop took to get to
    // it: Keygate's own time for the request (durationMs in its log line, from arrival to answer)
    // is bounded by the deadline plus a few turns of the max event-loop delay measured here.
    const loopMs = lag.max / 1e6;
    const refused = timed.filter((t) => t.reply.status === 503);
    for (const t of refused) expect(t.reply.json()).toEqual({ code: 50300, message: expect.any(String) as string });
    const lines = () =>
      [...a.logs, ...b.logs]
        .flatMap((l) => l.split('\n'))
        .filter((l) => l.includes('"status":503')) // only this case meets a 503 in this file
        .map((l) => JSON.parse(l) as { durationMs: number });
    await expect.poll(() => lines().length, { timeout: 5_000 }).toBe(refused.length);
    const durations = lines().map((l) => l.durationMs);
    const slowest = Math.max(...durations);
    console.log(
      `[redis-batching] frozen mid-batch: ${ok} passed before the freeze, ${refused.length} got 503; Keygate's slowest 503 took ${slowest} ms (deadline ${DEADLINE_MS} ms, max loop delay ${Math.round(loopMs)} ms)`,
    );
    expect(slowest).toBeLessThanOrEqual(DEADLINE_MS + 3 * loopMs);
  });
});
