import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { waitStoreReady } from '../helpers/keygate.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';

/**
 * The request path's nonce SET is written onto ioredis's command connection without ioredis's
 * Command objects (turn-batch.ts): replies are matched to requests by their order alone. These
 * faults, between a real Redis and the store, must never hand a request another request's
 * answer, and must fail every request they leave unanswered (closed: StoreUnavailableError → 503).
 */
type Mode = 'pass' | 'split' | 'hold';

/** A TCP relay to Redis whose Redis → client direction can be split into 2-byte writes or held back. */
async function startRelay(redisPort: number) {
  let mode: Mode = 'pass';
  let splitWrites = 0;
  const clients = new Set<Socket>();
  const server: Server = createServer((client) => {
    client.setNoDelay(true);
    clients.add(client);
    const upstream = connect(redisPort, '127.0.0.1');
    let chain = Promise.resolve();
    client.on('data', (d) => upstream.write(d));
    upstream.on('data', (d: Buffer) => {
      if (mode === 'hold') return;
      if (mode === 'pass') return void client.write(d);
      // Each 2-byte piece leaves on its own, a moment apart: a reply reaches the client in several reads.
      chain = chain.then(async () => {
        for (let i = 0; i < d.length; i += 2) {
          if (client.destroyed) return;
          client.write(d.subarray(i, i + 2));
          splitWrites++;
          await new Promise((r) => setTimeout(r, 1));
        }
      });
    });
    const end = () => {
      clients.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    setMode: (m: Mode) => void (mode = m),
    splitWrites: () => splitWrites,
    /** Cuts every connection through the relay (the store's connections see a lost connection). */
    cut: () => {
      for (const c of clients) c.destroy();
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

let redis: TestRedis;
let raw: Redis;
let relay: Awaited<ReturnType<typeof startRelay>>;
let opened: Array<{ close(): Promise<void> }> = [];
beforeAll(async () => {
  redis = await startRedis();
  raw = new Redis(redis.url);
  relay = await startRelay(redis.port);
});
afterAll(async () => {
  raw.disconnect();
  await relay.close();
  await redis.stop();
});
afterEach(async () => {
  relay.setMode('pass');
  await Promise.all(opened.map((s) => s.close()));
  opened = [];
});

async function open(url: string, commandTimeoutMs = 5_000) {
  const prefix = `t${randomBytes(4).toString('hex')}:`;
  const store = createRedisStore({ url, prefix, commandTimeoutMs }, { logger: pino({ level: 'silent' }) });
  opened.push(store);
  await waitStoreReady(store);
  return store;
}

const nonces = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}-${i}-${Date.now()}`);

describe('the nonce SET on its lean path, under faults', () => {
  it('replies split across reads: each request gets its own answer (new, then replay), in any interleaving', async () => {
    const store = await open(relay.url);
    relay.setMode('split');
    const before = relay.splitWrites();
    const fresh = nonces(40, 'split');
    // New nonces and replays of the first half in one turn: the replies alternate OK and nil.
    const calls = [...fresh, ...fresh.slice(0, 20)].map((n) => store.admit('kg_split', n, 60_000, undefined));
    const outcomes = (await Promise.all(calls)).map((a) => a.outcome);
    expect(outcomes.slice(0, 40)).toEqual(Array(40).fill('admitted'));
    expect(outcomes.slice(40)).toEqual(Array(20).fill('replay'));
    // The 60 replies (+OK and $-1, 5 bytes each) left the relay 2 bytes at a time.
    expect(relay.splitWrites() - before).toBeGreaterThanOrEqual((60 * 5) / 2);
    const again = await Promise.all(fresh.map((n) => store.admit('kg_split', n, 60_000, undefined)));
    expect(again.map((a) => a.outcome)).toEqual(Array(40).fill('replay'));
  });

  it('a connection lost with commands in flight: every one of them fails closed, none is admitted', async () => {
    const store = await open(relay.url);
    relay.setMode('hold');
    const lost = nonces(30, 'lost');
    const settled = lost.map((n) =>
      store.admit('kg_lost', n, 60_000, undefined).then(
        (a) => ({ ok: true as const, outcome: a.outcome }),
        (err: unknown) => ({ ok: false as const, err }),
      ),
    );
    // The batch is written in the turn's check phase; Redis answers, the relay holds the answers back. The cut
    // comes once Redis holds every nonce (a busy machine may take longer than any fixed pause to pass them on).
    await expect
      .poll(async () => (await raw.keys('*{kg_lost}:nonce:lost-*')).length, { timeout: guard(10_000) })
      .toBe(30);
    relay.cut();
    const results = await Promise.all(settled);
    for (const r of results) {
      expect(r.ok, JSON.stringify(r)).toBe(false);
      if (!r.ok) {
        expect(r.err).toBeInstanceOf(StoreUnavailableError);
        // Failed by the lost connection, not left to the (5 s) deadline.
        expect(String((r.err as Error).message)).not.toMatch(/timed out/);
      }
    }
    // Redis did write the nonces: a retry after reconnecting is a replay, never a second pass.
    relay.setMode('pass');
    await waitStoreReady(store);
    await expect
      .poll(
        async () =>
          (await store.admit('kg_lost', lost[0] as string, 60_000, undefined).catch(() => undefined))?.outcome,
        {
          timeout: 10_000,
        },
      )
      .toBe('replay');
    const retried = await Promise.all(lost.map((n) => store.admit('kg_lost', n, 60_000, undefined)));
    expect(retried.map((a) => a.outcome)).toEqual(Array(30).fill('replay'));
  });

  it('a server that answers an error: the request fails closed, the replies after it still meet their own requests', async () => {
    const store = await open(redis.url);
    const ok = nonces(5, 'before');
    await raw.config('SET', 'maxmemory', '1');
    await raw.config('SET', 'maxmemory-policy', 'noeviction');
    try {
      const refused = await Promise.allSettled(ok.map((n) => store.admit('kg_err', n, 60_000, undefined)));
      for (const r of refused) {
        expect(r.status).toBe('rejected');
        if (r.status === 'rejected') {
          expect(r.reason).toBeInstanceOf(StoreUnavailableError);
          expect(String((r.reason as Error).message)).toMatch(/OOM/);
        }
      }
    } finally {
      await raw.config('SET', 'maxmemory', '0');
    }
    // The same connection, in step: each nonce admitted once, then a replay.
    const after = nonces(10, 'after');
    const first = await Promise.all(after.map((n) => store.admit('kg_err', n, 60_000, undefined)));
    expect(first.map((a) => a.outcome)).toEqual(Array(10).fill('admitted'));
    const second = await Promise.all(after.map((n) => store.admit('kg_err', n, 60_000, undefined)));
    expect(second.map((a) => a.outcome)).toEqual(Array(10).fill('replay'));
    // The refused nonces were never written: they pass now.
    const retried = await Promise.all(ok.map((n) => store.admit('kg_err', n, 60_000, undefined)));
    expect(retried.map((a) => a.outcome)).toEqual(Array(5).fill('admitted'));
  });
});
