import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { toExternal } from '../../src/keys/key-record.js';
import { compileRateLimit } from '../../src/policy/rate-limit-spec.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { waitStoreReady } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { PUBLISHED_WITHIN } from '../helpers/constants.js';

/**
 * createRedisStore against a real redis-server: what is written under which
 * name (the layout in redis-store.ts's header, which operators and rolling
 * upgrades rely on), the change published to other instances, the audit
 * stream. What any store must do is in store-contract.test.ts.
 */
type RedisStore = ReturnType<typeof createRedisStore>;

let redis: TestRedis;
let raw: Redis;
let opened: Array<{ close(): Promise<void> }> = [];
beforeAll(async () => {
  redis = await startRedis({ shared: true });
  raw = new Redis(redis.url);
});
afterAll(async () => {
  raw.disconnect();
  await redis.stop();
});
afterEach(async () => {
  await Promise.all(opened.map((s) => s.close()));
  opened = [];
});

/** Each test has its own prefix, so it needs no flush and shares the server safely. */
async function open(prefix = `t${randomBytes(4).toString('hex')}:`): Promise<{ store: RedisStore; prefix: string }> {
  const store = createRedisStore({ url: redis.url, prefix }, { logger: pino({ level: 'silent' }) });
  opened.push(store);
  await waitStoreReady(store);
  return { store, prefix };
}

describe('redis store: layout', () => {
  it('putKey: a hash under {keystore}:key:<apiKey> (version, keys-file JSON, id, owner, state), indexed', async () => {
    const { store, prefix } = await open();
    await store.putKey(makeKey({ apiKey: 'kg_one', owner: 'acme', label: 'ci' }));
    const hash = await raw.hgetall(`${prefix}{keystore}:key:kg_one`);
    expect(hash).toMatchObject({ v: '1', id: 'id-kg_one', owner: 'acme', state: 'active' });
    const stored = JSON.parse(hash.json as string) as Record<string, unknown>;
    expect(stored).toMatchObject({
      apiKey: 'kg_one',
      apiSecret: 'secret-for-kg_one-0123456789',
      id: 'id-kg_one',
      owner: 'acme',
      label: 'ci',
    });
    expect(await raw.zrange(`${prefix}{keystore}:index`, 0, -1)).toEqual(['kg_one']);
    expect(await raw.zrange(`${prefix}{keystore}:owner:acme`, 0, -1)).toEqual(['kg_one']);
    expect(await raw.hgetall(`${prefix}{keystore}:ids`)).toEqual({ 'id-kg_one': 'kg_one' });
    expect(await store.countKeys()).toBe(1);
  });

  it('admit: nonce, usage under the {apiKey} hash tag; a limited key also its GCRA state', async () => {
    const { store, prefix } = await open();
    await store.admit('kg_one', 'n-1', 60_000, undefined);
    const nonceTtl = await raw.pttl(`${prefix}{kg_one}:nonce:n-1`);
    expect(nonceTtl).toBeGreaterThan(0);
    expect(nonceTtl).toBeLessThanOrEqual(60_000);
    // Usage is counted in process and written in batches (once a second, or on flushUsage/close).
    expect(await raw.exists(`${prefix}{kg_one}:usage`)).toBe(0);
    await store.flushUsage();
    const usage = await raw.hgetall(`${prefix}{kg_one}:usage`);
    expect(Object.values(usage)).toContain('1');
    expect(Object.keys(usage)).toContain('last');
    expect(Object.keys(usage).filter((f) => f.startsWith('b:'))).toHaveLength(1); // this process's batch mark
    expect(await raw.exists(`${prefix}{kg_one}:budget`)).toBe(0);
    await store.admit('kg_one', 'n-2', 60_000, {
      cost: 1,
      owner: undefined,
      budgets: [{ kind: 'key', limit: compileRateLimit({ rate: '1/s' }) }],
    });
    expect(await raw.exists(`${prefix}{kg_one}:budget`)).toBe(1);
  });

  it('admit without a rate limit is the nonce SET NX PX alone; usage goes in one script call per key and flush', async () => {
    const { store } = await open();
    await raw.config('RESETSTAT');
    const N = 25;
    const outcomes = await Promise.all(
      Array.from({ length: N }, (_, i) => store.admit('kg_free', `n-${i}`, 60_000, undefined)),
    );
    expect(outcomes.every((o) => o.outcome === 'admitted')).toBe(true);
    expect((await store.admit('kg_free', 'n-0', 60_000, undefined)).outcome).toBe('replay');
    await store.flushUsage();
    const stats: Record<string, number> = {};
    for (const m of (await raw.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
      stats[m[1] as string] = Number(m[2]);
    delete stats['config|resetstat'];
    // One flush (a timer flush may have split it in two): one script call (EVALSHA, or EVAL the first
    // time Redis sees it) running one HINCRBY for today and at most two HSETs (batch mark, last).
    const flushes = stats.hincrby ?? 0;
    expect(flushes === 1 || flushes === 2).toBe(true);
    expect(stats.set).toBe(N + 1); // the nonces, replay included: nothing else per request
    expect(stats.hset).toBeLessThanOrEqual(2 * flushes);
    expect(stats.time).toBeUndefined();
    expect(stats.get).toBeUndefined();
    expect(Object.values((await store.getUsage('kg_free')).perDay)).toEqual([N]);
  });

  it('deleteKey: the record, its index entries, rate-limit state and usage go; nonces expire on their own', async () => {
    const { store, prefix } = await open();
    await store.putKey(makeKey({ apiKey: 'kg_gone', owner: 'acme' }));
    await store.admit('kg_gone', 'n-1', 60_000, {
      cost: 1,
      owner: undefined,
      budgets: [{ kind: 'key', limit: compileRateLimit({ rate: '5/s' }) }],
    });
    expect(await store.deleteKey('kg_gone')).toBe(true);
    expect(
      await raw.exists(`${prefix}{keystore}:key:kg_gone`, `${prefix}{kg_gone}:budget`, `${prefix}{kg_gone}:usage`),
    ).toBe(0);
    expect(await raw.zrange(`${prefix}{keystore}:index`, 0, -1)).toEqual([]);
    expect(await raw.exists(`${prefix}{keystore}:owner:acme`, `${prefix}{keystore}:ids`)).toBe(0);
    expect(await store.deleteKey('kg_gone')).toBe(false);
  });

  it('a commit claim: the idempotency name under {keystore} (one slot with the key), "<version> <value>", with its TTL', async () => {
    const { store, prefix } = await open();
    const r = await store.commitKeyChanges({
      writes: [{ apiKey: 'kg_x', expect: 0, next: makeKey({ apiKey: 'kg_x' }) }],
      audit: [],
      claim: { name: 'idempotency:abc', value: 'kg_x hash', ttlMs: 30_000 },
    });
    expect(r.ok).toBe(true);
    const version = r.ok ? r.versions[0] : -1;
    expect(await raw.get(`${prefix}{keystore}:idempotency:abc`)).toBe(`${version} kg_x hash`);
    const ttl = await raw.pttl(`${prefix}{keystore}:idempotency:abc`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(30_000);
  });

  it('appendAudit: one stream entry per change, field "entry" holding the JSON', async () => {
    const { store, prefix } = await open();
    const entries = [
      { at: '2026-01-01T00:00:00.000Z', actor: 'ops', action: 'create', apiKey: 'kg_a', id: 'id-a' },
      { at: '2026-01-01T00:00:01.000Z', actor: 'ops', action: 'revoke', apiKey: 'kg_a', id: 'id-a', detail: 'leak' },
    ];
    for (const e of entries) await store.appendAudit(e);
    const stream = await raw.xrange(`${prefix}{keystore}:audit`, '-', '+');
    expect(stream.map(([, fields]) => fields)).toEqual(entries.map((e) => ['entry', JSON.stringify(e)]));
  });

  it('a record that is not JSON reads as unknown (fail closed), not as an error', async () => {
    const { store, prefix } = await open();
    await raw.hset(`${prefix}{keystore}:key:kg_bad`, 'v', '1', 'json', '{not json');
    await raw.zadd(`${prefix}{keystore}:index`, 0, 'kg_bad');
    expect(await store.getKey('kg_bad')).toBeNull();
    expect(await store.listKeys({ limit: 10 })).toEqual({ records: [], more: false });
  });

  it('records of the layout before issue 27 (key:<apiKey> JSON, keys set) are moved on connect, as stored', async () => {
    const prefix = `legacy${Math.random().toString(36).slice(2, 8)}:`;
    const old = toExternal(makeKey({ apiKey: 'kg_old', owner: 'acme', state: 'revoked' }));
    await raw.set(`${prefix}key:kg_old`, JSON.stringify(old));
    await raw.sadd(`${prefix}keys`, 'kg_old');
    const { store } = await open(prefix);
    await expect.poll(() => store.getKey('kg_old')).toMatchObject({ apiKey: 'kg_old', state: 'revoked' });
    expect(await raw.hget(`${prefix}{keystore}:key:kg_old`, 'state')).toBe('revoked');
    expect(await raw.hgetall(`${prefix}{keystore}:ids`)).toEqual({ 'id-kg_old': 'kg_old' });
    expect(await raw.exists(`${prefix}key:kg_old`, `${prefix}keys`)).toBe(0);
  });
});

describe('redis store: changes reach every instance', () => {
  it('putKey and deleteKey publish the apiKey on key-events; a second instance hears both', async () => {
    const { store, prefix } = await open();
    const { store: peer } = await open(prefix);
    const channel = new Redis(redis.url);
    const published: string[] = [];
    channel.on('message', (_c: string, m: string) => published.push(m));
    await channel.subscribe(`${prefix}key-events`);
    const heard: Array<string | null> = [];
    const off = peer.onKeyChange((k) => heard.push(k));
    await store.putKey(makeKey({ apiKey: 'kg_pub' }));
    await store.deleteKey('kg_pub');
    await expect.poll(() => published, { timeout: 5_000, interval: 20 }).toEqual(['kg_pub', 'kg_pub']);
    await expect.poll(() => heard, { timeout: 5_000, interval: 20 }).toEqual(['kg_pub', 'kg_pub']);
    off();
    channel.disconnect();
  });

  it('another prefix is another deployment: it hears nothing of this one', async () => {
    const { store: here } = await open();
    const { store: there, prefix } = await open();
    const { store: listener } = await open(prefix);
    // PING answers before the SUBSCRIBE reply may: wait for it, or its flush (null) would be heard below.
    await expect.poll(() => listener.subscribed(), PUBLISHED_WITHIN).toBe(true);
    const heard: Array<string | null> = [];
    listener.onKeyChange((k) => heard.push(k));
    await here.putKey(makeKey({ apiKey: 'kg_elsewhere' }));
    await there.putKey(makeKey({ apiKey: 'kg_there' }));
    // One server delivers in order: had the first change reached this prefix, it would come before the second.
    await expect.poll(() => heard, { timeout: 5_000, interval: 20 }).toEqual(['kg_there']);
  });
});

describe('redis store: mayHaveKey tells names no key has without a read (issue 30: random-sub flood)', () => {
  const randomName = () => `kg_${randomBytes(16).toString('hex')}`;
  /** The known-keys filter is built once the subscription is confirmed: until then every name is "maybe". */
  const filterInForce = (store: RedisStore) =>
    expect.poll(() => store.mayHaveKey?.(randomName()), PUBLISHED_WITHIN).toBe(false);

  it('random names: false, no read; keys made before, elsewhere (once heard) and here: true', async () => {
    const { store: a, prefix } = await open();
    const { store: b } = await open(prefix);
    await b.putKey(makeKey({ apiKey: 'kg_before' }));
    await filterInForce(a);
    const reads = vi.spyOn(a.client, 'hget');
    const said = Array.from({ length: 1_000 }, () => a.mayHaveKey?.(randomName()));
    // False positives only cost the read there always was: about 1% when the filter is full, far fewer here.
    expect(said.filter((m) => m !== false).length).toBeLessThan(20);
    expect(reads).not.toHaveBeenCalled();
    // In the index when the filter was built, or heard as a change message: known either way.
    await expect.poll(() => a.mayHaveKey?.('kg_before'), PUBLISHED_WITHIN).toBe(true);
    // Another instance's create is known once its change message arrives (polled: these stores share a loop).
    await b.putKey(makeKey({ apiKey: 'kg_elsewhere' }));
    await expect.poll(() => a.mayHaveKey?.('kg_elsewhere'), PUBLISHED_WITHIN).toBe(true);
    await a.putKey(makeKey({ apiKey: 'kg_here' })); // known at once, before its own message comes back
    expect(a.mayHaveKey?.('kg_here')).toBe(true);
    // getKey itself stays exact: it reads, whatever the filter says.
    reads.mockClear();
    expect(await a.getKey(randomName())).toBeNull();
    expect(reads).toHaveBeenCalledTimes(1);
  });

  it('a key created while the subscription was lost is not called unknown (the filter is rebuilt first)', async () => {
    const own = await startRedis(); // its own server: killing every subscriber touches no other test
    try {
      const prefix = `t${randomBytes(4).toString('hex')}:`;
      const a = createRedisStore({ url: own.url, prefix }, { logger: pino({ level: 'silent' }) });
      const b = createRedisStore({ url: own.url, prefix }, { logger: pino({ level: 'silent' }) });
      opened.push(a, b);
      await Promise.all([waitStoreReady(a), waitStoreReady(b)]);
      await filterInForce(a);
      const admin = new Redis(own.url);
      await admin.client('KILL', 'TYPE', 'pubsub');
      // Written while a's subscriber is down or resubscribing: its change message may never reach a.
      await b.putKey(makeKey({ apiKey: 'kg_in_the_gap' }));
      admin.disconnect();
      const seen: Array<boolean | undefined> = [];
      await expect
        .poll(() => {
          seen.push(a.mayHaveKey?.('kg_in_the_gap'));
          return a.subscribed() && a.mayHaveKey?.(randomName()) === false;
        }, PUBLISHED_WITHIN)
        .toBe(true);
      expect(seen).not.toContain(false);
      expect(a.mayHaveKey?.('kg_in_the_gap')).toBe(true);
    } finally {
      await Promise.all(opened.map((s) => s.close()));
      opened = [];
      await own.stop();
    }
  });
});
