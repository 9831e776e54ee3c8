import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { compileRateLimit, type CompiledLimit } from '../../src/policy/rate-limit-spec.js';
import type { Admission, Charge, CreditTarget, KeyPageQuery, Store } from '../../src/store/store.js';
import { compileCredits, KEY_CREDITS_NAME, OWNER_CREDITS_NAME, type CreditsSpec } from '../../src/keys/credits.js';
import { waitStoreReady } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';

/**
 * One contract, two stores. Whatever Keygate relies on from a store is
 * asserted here, against the embedded memory store and a real Redis.
 */
interface Harness {
  /** A fresh, empty store plus a second handle on the same data (a second instance). */
  open(): Promise<{ store: Store; peer: Store; advance(ms: number): Promise<void> }>;
  close(): Promise<void>;
}

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis({ shared: true });
});
afterAll(async () => {
  await redis.stop();
});

const harnesses: Record<string, () => Harness> = {
  memory: () => {
    const opened: Store[] = [];
    return {
      async open() {
        const clock = manualClock();
        const store = createMemoryStore({}, { clock });
        opened.push(store);
        // In memory mode the "other instance" is the same process.
        return { store, peer: store, advance: async (ms) => clock.advance(ms) };
      },
      async close() {
        await Promise.all(opened.map((s) => s.close()));
      },
    };
  },
  redis: () => {
    const opened: Store[] = [];
    return {
      async open() {
        await redis.flush();
        const logger = pino({ level: 'silent' });
        const store = createRedisStore({ url: redis.url }, { logger });
        const peer = createRedisStore({ url: redis.url }, { logger });
        opened.push(store, peer);
        await waitStoreReady(store);
        await waitStoreReady(peer);
        // Redis expires keys on its own clock: advancing means waiting.
        return { store, peer, advance: (ms) => new Promise((r) => setTimeout(r, ms)) };
      },
      async close() {
        await Promise.all(opened.map((s) => s.close()));
      },
    };
  },
};

describe.each(Object.keys(harnesses))('store contract: %s', (kind) => {
  const h = harnesses[kind]!();
  afterAll(() => h.close());

  it('stores, reads, lists and deletes keys', async () => {
    const { store, peer } = await h.open();
    expect(await store.getKey('a')).toBeNull();
    const a = makeKey({ apiKey: 'a', scopes: ['x', 'y'], allowIps: ['10.0.0.0/8'], label: 'lab' });
    const b = makeKey({ apiKey: 'b' });
    await store.putKey(a);
    await store.putKey(b);
    expect(await peer.getKey('a')).toEqual(a);
    expect((await peer.listKeys({ limit: 10 })).records).toEqual([a, b]);
    expect(await store.deleteKey('a')).toBe(true);
    expect(await store.deleteKey('a')).toBe(false);
    expect(await peer.getKey('a')).toBeNull();
  });

  it('keeps revoked keys readable with their state', async () => {
    const { store, peer } = await h.open();
    await store.putKey(
      makeKey({ apiKey: 'r', state: 'revoked', revokedAt: new Date().toISOString(), revokeReason: 'leaked' }),
    );
    expect(await peer.getKey('r')).toMatchObject({ state: 'revoked', revokeReason: 'leaked' });
  });

  const admitted = (a: Admission) => a.outcome === 'admitted';
  const nonceOnly = async (store: Store, apiKey: string, nonce: string, ttlMs = 10_000) =>
    store.admit(apiKey, nonce, ttlMs, undefined);

  it('records a nonce once per key and lets the same nonce under another key through', async () => {
    const { store, peer } = await h.open();
    expect(await nonceOnly(store, 'k1', '123')).toEqual({ outcome: 'admitted', rate: undefined });
    expect(await nonceOnly(store, 'k1', '123')).toEqual({ outcome: 'replay' });
    expect(await nonceOnly(peer, 'k1', '123')).toEqual({ outcome: 'replay' });
    expect((await nonceOnly(store, 'k2', '123')).outcome).toBe('admitted');
    expect((await nonceOnly(store, 'k1', '124')).outcome).toBe('admitted');
  });

  it('is atomic under 50 concurrent attempts', async () => {
    const { store, peer } = await h.open();
    const results = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => nonceOnly(i % 2 ? store : peer, 'k', '999')),
    );
    expect(results.filter(admitted)).toHaveLength(1);
  });

  it('forgets a nonce after its TTL', async () => {
    const { store, advance } = await h.open();
    expect((await nonceOnly(store, 'k', '1', 150)).outcome).toBe('admitted');
    await advance(400);
    expect((await nonceOnly(store, 'k', '1', 150)).outcome).toBe('admitted');
  });

  it('a commit with a claim: of 20 concurrent creates under one claim from two instances exactly one lands and sets it (with its version), the rest are refused with its value; a refused commit leaves no claim; free again after the TTL', async () => {
    const { store, peer, advance } = await h.open();
    const create = (s: Store, apiKey: string, name = 'idempotency:x') =>
      s.commitKeyChanges({
        writes: [{ apiKey, expect: 0, next: makeKey({ apiKey, id: apiKey }) }],
        audit: [],
        claim: { name, value: apiKey, ttlMs: 150 },
      });
    const got = await Promise.all(Array.from({ length: 20 }, async (_, i) => create(i % 2 ? store : peer, `k${i}`)));
    const landed = got.flatMap((g, i) => (g.ok ? [{ apiKey: `k${i}`, version: g.versions[0] }] : []));
    expect(landed).toHaveLength(1);
    const winner = landed[0]!;
    expect((await store.listKeys({ limit: 100 })).records.map((r) => r.apiKey)).toEqual([winner.apiKey]);
    for (const g of got.filter((x) => !x.ok))
      expect(g).toEqual({
        ok: false,
        conflict: 'claimed',
        name: 'idempotency:x',
        value: `${winner.version} ${winner.apiKey}`,
      });
    // A commit refused for another reason (the key exists) sets no claim.
    expect(await create(store, winner.apiKey, 'idempotency:y')).toMatchObject({ ok: false, conflict: 'version' });
    expect((await create(peer, 'other', 'idempotency:y')).ok).toBe(true);
    await advance(400);
    expect((await create(peer, 'later')).ok).toBe(true);
  });

  it('a secret names one key: a second key with a secret another key holds (current or in its grace) is refused, in a batch too; deleting the holder frees it', async () => {
    const { store, peer } = await h.open();
    const S = 'shared-secret-0123456789abcdef';
    const put = (s: Store, apiKey: string, secret: string, expect = 0) =>
      s.commitKeyChanges({ writes: [{ apiKey, expect, next: makeKey({ apiKey, secret }) }], audit: [] });
    expect((await put(store, 'a', S)).ok).toBe(true);
    expect(await put(peer, 'b', S)).toEqual({ ok: false, conflict: 'secret_taken', apiKey: 'b', holder: 'a' });
    // Two new keys with one secret in one batch (an import): all or nothing.
    const batch = await peer.commitKeyChanges({
      writes: [
        { apiKey: 'c', expect: 0, next: makeKey({ apiKey: 'c', secret: 'batch-secret-0123456789abcdef' }) },
        { apiKey: 'd', expect: 0, next: makeKey({ apiKey: 'd', secret: 'batch-secret-0123456789abcdef' }) },
      ],
      audit: [],
    });
    expect(batch).toMatchObject({ ok: false, conflict: 'secret_taken', apiKey: 'd', holder: 'c' });
    expect(await store.getKey('c')).toBeNull();
    // A secret kept for a rotation's grace is held too.
    const rotated = makeKey({
      apiKey: 'a',
      secret: 'new-secret-0123456789abcdef',
      previousSecrets: [{ secret: S, validUntil: new Date(Date.now() + 3_600_000).toISOString() }],
    });
    const head = await store.readKey('a');
    expect(
      (await store.commitKeyChanges({ writes: [{ apiKey: 'a', expect: head?.version, next: rotated }], audit: [] })).ok,
    ).toBe(true);
    expect(await put(peer, 'b', S)).toMatchObject({ ok: false, conflict: 'secret_taken', holder: 'a' });
    // The same key rewritten with its own secrets is no conflict; deleting it frees them.
    const again = await store.readKey('a');
    expect(
      (await store.commitKeyChanges({ writes: [{ apiKey: 'a', expect: again?.version, next: rotated }], audit: [] }))
        .ok,
    ).toBe(true);
    const last = await store.readKey('a');
    expect(
      (await store.commitKeyChanges({ writes: [{ apiKey: 'a', expect: last?.version, next: null }], audit: [] })).ok,
    ).toBe(true);
    expect((await put(peer, 'b', S)).ok).toBe(true);
    // Keys that came to share a secret before the check (seeded unconditionally here) can still be
    // changed and revoked: only a secret new to the key is checked.
    const legacy = makeKey({ apiKey: 'legacy', secret: S });
    expect((await store.commitKeyChanges({ writes: [{ apiKey: 'legacy', next: legacy }], audit: [] })).ok).toBe(true);
    for (const apiKey of ['b', 'legacy']) {
      const now = await store.readKey(apiKey);
      const revoked = { ...(now?.record as KeyRecord), state: 'revoked' as const };
      const r = await store.commitKeyChanges({ writes: [{ apiKey, expect: now?.version, next: revoked }], audit: [] });
      expect(r.ok, apiKey).toBe(true);
    }
  });

  /** The charge of a key with its own limit and no owner, on a route of cost 1 (as before issue 42). */
  const byKey = (limit: CompiledLimit): Charge => ({ cost: 1, owner: undefined, budgets: [{ kind: 'key', limit }] });

  // 5/s burst 10: T = 200 ms, a whole burst back in 2 s. Generous margins: the Redis harness runs on real time.
  const TEN = compileRateLimit({ rate: '5/s', burst: 10 });

  it('rate limit: of 25 concurrent requests from two instances exactly the burst passes, then one per interval', async () => {
    const { store, peer, advance } = await h.open();
    const results = await Promise.all(
      Array.from({ length: 25 }, async (_, i) => (i % 2 ? store : peer).admit('rl', `n${i}`, 10_000, byKey(TEN))),
    );
    const passed = results.filter(admitted);
    expect(passed).toHaveLength(10);
    // Each admitted request saw a different "remaining": 9, 8, … 0.
    expect(
      passed.map((a) => (a.outcome === 'admitted' ? a.rate?.[0]?.remaining : -1)).sort((a, b) => (a ?? 0) - (b ?? 0)),
    ).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for (const r of results.filter((a) => a.outcome === 'limited')) {
      if (r.outcome !== 'limited') continue;
      expect(r.rate[0]?.remaining).toBe(0);
      expect(r.rate[0]?.retryAfterUs).toBeGreaterThan(0);
      expect(r.rate[0]?.retryAfterUs).toBeLessThanOrEqual(200_000);
      expect(r.rate[0]?.resetUs).toBeGreaterThan(1_600_000);
      expect(r.rate[0]?.resetUs).toBeLessThanOrEqual(2_000_000);
    }
    await advance(250);
    const next = await Promise.all([
      store.admit('rl', 'later-1', 10_000, byKey(TEN)),
      peer.admit('rl', 'later-2', 10_000, byKey(TEN)),
    ]);
    expect(next.filter(admitted)).toHaveLength(1);
    // After a whole burst interval the full allowance is back.
    await advance(2_100);
    const refill = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => store.admit('rl', `again${i}`, 10_000, byKey(TEN))),
    );
    expect(refill.filter(admitted)).toHaveLength(10);
  });

  it('a limited request records no nonce, and a replay spends no allowance', async () => {
    const { store, peer, advance } = await h.open();
    const two = compileRateLimit({ rate: '2/s' }); // burst defaults to the count: 2
    expect((await store.admit('k', 'a', 10_000, byKey(two))).outcome).toBe('admitted');
    expect((await peer.admit('k', 'a', 10_000, byKey(two))).outcome).toBe('replay'); // spends nothing…
    expect((await store.admit('k', 'b', 10_000, byKey(two))).outcome).toBe('admitted'); // …so the second request still passes
    expect((await store.admit('k', 'c', 10_000, byKey(two))).outcome).toBe('limited');
    await advance(1_100);
    // "c" was not burned by its 429: the same token passes once allowed.
    expect((await peer.admit('k', 'c', 10_000, byKey(two))).outcome).toBe('admitted');
    expect((await store.admit('k', 'c', 10_000, byKey(two))).outcome).toBe('replay');
  });

  it('limits each key on its own; no limit means no rate state', async () => {
    const { store } = await h.open();
    const one = compileRateLimit({ rate: '1/h' });
    expect((await store.admit('x', '1', 10_000, byKey(one))).outcome).toBe('admitted');
    expect((await store.admit('x', '2', 10_000, byKey(one))).outcome).toBe('limited');
    expect((await store.admit('y', '1', 10_000, byKey(one))).outcome).toBe('admitted');
    const open = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => store.admit('x', `free${i}`, 10_000, undefined)),
    );
    expect(open.every(admitted)).toBe(true);
  });

  it('counts usage per admitted request only, with lastUsedAt, on every instance', async () => {
    const { store, peer } = await h.open();
    expect(await store.getUsage('u')).toEqual({ lastUsedAtMs: undefined, perDay: {} });
    const lim = compileRateLimit({ rate: '5/m' });
    const before = Date.now();
    const results = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => (i % 2 ? store : peer).admit('u', `n${i}`, 10_000, byKey(lim))),
    );
    await peer.admit('u', 'n0', 10_000, undefined); // replay: not counted
    await store.admit('u', 'free', 10_000, undefined); // no limit: counted
    const count = results.filter(admitted).length + 1;
    expect(count).toBe(6);
    // Redis counts usage in each process and writes it in batches: what `store` counted reaches
    // `peer` after store's flush (once a second, or now); peer's own counts it flushes itself.
    await store.flushUsage();
    const usage = await peer.getUsage('u');
    expect(Object.values(usage.perDay).reduce((a, b) => a + b, 0)).toBe(count);
    expect(Object.keys(usage.perDay)[0]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(usage.lastUsedAtMs).toBeGreaterThanOrEqual(before - 5_000);
    expect(usage.lastUsedAtMs).toBeLessThanOrEqual(Date.now() + 5_000);
    expect(await store.getUsage('other')).toEqual({ lastUsedAtMs: undefined, perDay: {} });
  });

  it('counts the cost spent beside the requests (issue 42): a request of cost 5 adds 4 to the day beyond its 1, on every instance', async () => {
    const { store, peer } = await h.open();
    const cost = (n: number): Charge => ({ cost: n, owner: undefined, budgets: [] });
    await store.admit('spender', 'a', 10_000, cost(5));
    await peer.admit('spender', 'b', 10_000, cost(5));
    await store.admit('spender', 'c', 10_000, undefined); // cost 1
    await peer.admit('spender', 'a', 10_000, cost(5)); // replay: nothing counted
    await store.flushUsage();
    await peer.flushUsage();
    const usage = await store.getUsage('spender');
    const day = Object.keys(usage.perDay)[0] as string;
    expect(usage.perDay).toEqual({ [day]: 3 });
    expect(usage.extraCostPerDay).toEqual({ [day]: 8 });
  });

  it('deleting a key drops its usage and rate state', async () => {
    const { store, peer } = await h.open();
    await store.putKey(makeKey({ apiKey: 'gone' }));
    const one = compileRateLimit({ rate: '1/h' });
    expect((await store.admit('gone', '1', 10_000, byKey(one))).outcome).toBe('admitted');
    expect((await store.admit('gone', '2', 10_000, byKey(one))).outcome).toBe('limited');
    await store.deleteKey('gone');
    expect(await peer.getUsage('gone')).toEqual({ lastUsedAtMs: undefined, perDay: {} });
    expect((await peer.admit('gone', '3', 10_000, byKey(one))).outcome).toBe('admitted');
  });

  // Issue 42: route cost, owner budgets, all or nothing; the failed-authentication budget per IP.
  const charge = (
    cost: number,
    owner: string | undefined,
    key?: CompiledLimit,
    ownerLimit?: CompiledLimit,
  ): Charge => ({
    cost,
    owner,
    budgets: [
      ...(key ? [{ kind: 'key' as const, limit: key }] : []),
      ...(ownerLimit ? [{ kind: 'owner' as const, limit: ownerLimit }] : []),
    ],
  });

  it('route cost: a key of 50/h burst 50 on a route of cost 5 admits exactly 10 across two instances, counted in cost units', async () => {
    const { store, peer } = await h.open();
    const fifty = compileRateLimit({ rate: '50/h', burst: 50 });
    const results = await Promise.all(
      Array.from({ length: 14 }, async (_, i) =>
        (i % 2 ? store : peer).admit('cost', `n${i}`, 10_000, charge(5, undefined, fifty)),
      ),
    );
    expect(results.filter(admitted)).toHaveLength(10);
    const left = results.map((a) => (a.outcome === 'admitted' ? a.rate?.[0]?.remaining : -1)).filter((r) => r !== -1);
    expect(left.sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual([0, 5, 10, 15, 20, 25, 30, 35, 40, 45]);
    // A cheaper route still fits nothing: the budget is spent in units, whatever the route.
    expect((await store.admit('cost', 'one', 10_000, charge(1, undefined, fifty))).outcome).toBe('limited');
  });

  /**
   * A budget whose limit changed keeps the units it had spent, never more than the new burst: a raise never
   * leaves less room than before, a cut keeps what was spent (at most the whole new burst). `room` is what may be
   * spent right after the change; checked with the next request (cost 1), for a key's budget and an owner's alike.
   */
  describe.each(['key', 'owner'] as const)('a changed limit keeps the units spent (%s budget)', (kind) => {
    it.each([
      // [what changed, old limit, units spent under it, new limit, room under the new limit]
      ['rate raised', { rate: '10/m' }, 1, { rate: '600/m', burst: 10 }, 9],
      ['rate and burst raised', { rate: '10/m' }, 1, { rate: '600/m', burst: 60 }, 59],
      ['rate and burst raised, per hour', { rate: '6/h' }, 5, { rate: '60/h' }, 55],
      ['burst raised', { rate: '10/m' }, 4, { rate: '10/m', burst: 20 }, 16],
      ['burst cut, spent below it', { rate: '10/m' }, 4, { rate: '10/m', burst: 5 }, 1],
      ['burst cut, spent above it', { rate: '10/m' }, 8, { rate: '10/m', burst: 5 }, 0],
      ['rate cut', { rate: '600/m', burst: 10 }, 4, { rate: '10/m' }, 6],
      ['rate and burst cut, spent above the new burst', { rate: '600/m', burst: 60 }, 30, { rate: '10/m' }, 0],
      ['unchanged', { rate: '10/m' }, 3, { rate: '10/m' }, 7],
    ])('%s: %j, %i spent, then %j: %i left', async (_what, before, spent, after, room) => {
      const { store, peer } = await h.open();
      const name = kind === 'key' ? 'keygate' : 'keygate-owner';
      const budget = (spec: { rate: string; burst?: number }, cost: number): Charge => ({
        cost,
        owner: kind === 'owner' ? 'acct_L' : undefined,
        budgets: [{ kind, limit: compileRateLimit(spec, name) }],
      });
      expect((await store.admit('changed', 'spend', 10_000, budget(before, spent))).outcome).toBe('admitted');
      // The next request, on the other instance, under the new limit.
      const next = await peer.admit('changed', 'next', 10_000, budget(after, 1));
      if (room === 0) {
        expect(next.outcome).toBe('limited');
        expect(next.outcome === 'limited' && next.rate[0]?.remaining).toBe(0);
      } else {
        expect(next.outcome).toBe('admitted');
        expect(next.outcome === 'admitted' && next.rate?.[0]?.remaining).toBe(room - 1);
      }
      if (kind === 'owner') {
        // The console's read agrees, and a refusal wrote the converted state back: it reads the same again.
        const left = await store.ownerBudget('acct_L', compileRateLimit(after, name));
        expect(left.remaining).toBe(room === 0 ? 0 : room - 1);
      }
    });
  });

  it('owner budget: two keys of one owner limited to 12/h admit exactly 12 between them on two instances; another owner is untouched', async () => {
    const { store, peer } = await h.open();
    const twelve = compileRateLimit({ rate: '12/h' });
    const own = compileRateLimit({ rate: '100/h' });
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) =>
        (i % 2 ? store : peer).admit(i % 4 < 2 ? 'acme-1' : 'acme-2', `n${i}`, 10_000, charge(1, 'acme', own, twelve)),
      ),
    );
    expect(results.filter(admitted)).toHaveLength(12);
    for (const r of results)
      if (r.outcome === 'limited') {
        expect(r.refusedBy).toBe(1); // the owner's budget, not the key's
        expect(r.rate[1]?.remaining).toBe(0);
        expect(r.rate[1]?.retryAfterUs).toBeGreaterThan(0);
      }
    expect((await store.admit('other-1', 'n0', 10_000, charge(1, 'other', own, twelve))).outcome).toBe('admitted');
    expect((await peer.admit('acme-3', 'n0', 10_000, charge(1, 'acme', undefined, twelve))).outcome).toBe('limited');
  });

  it('all or nothing: a refusal by one budget spends none of the others and burns no nonce; the replay guard of an owned key holds', async () => {
    const { store, peer, advance } = await h.open();
    const ownerTwo = compileRateLimit({ rate: '2/s' }); // T = 500 ms
    const keyTen = compileRateLimit({ rate: '10/s' });
    const c = charge(1, 'o', keyTen, ownerTwo);
    expect((await store.admit('k1', 'a', 10_000, c)).outcome).toBe('admitted');
    expect((await peer.admit('k1', 'a', 10_000, c)).outcome).toBe('replay'); // the owned key's nonce, on another instance
    expect((await store.admit('k2', 'a', 10_000, c)).outcome).toBe('admitted'); // another key of the owner: its own nonces
    const refused = await peer.admit('k1', 'b', 10_000, c);
    expect(refused).toMatchObject({ outcome: 'limited', refusedBy: 1 });
    // The key's budget was not spent by the refusal: 8 of 10 left after its one admitted request (+ one refill at most).
    expect(refused.outcome === 'limited' && refused.rate[0]?.remaining).toBeGreaterThanOrEqual(9);
    await advance(600);
    // "b" was not burnt: the same nonce passes once the owner has room, and only once.
    expect((await store.admit('k1', 'b', 10_000, c)).outcome).toBe('admitted');
    // (A budget is checked before the nonce, so the replay shows with the budgets left out: the same names.)
    expect((await peer.admit('k1', 'b', 10_000, charge(1, 'o'))).outcome).toBe('replay');
    // An owned key with no budget at all: the replay guard alone, in the owner's slot.
    expect((await store.admit('k3', 'z', 10_000, charge(1, 'o'))).outcome).toBe('admitted');
    expect((await peer.admit('k3', 'z', 10_000, charge(1, 'o'))).outcome).toBe('replay');
  });

  it('failed-authentication budget: spends 1 per failure across instances and says how long the IP is blocked', async () => {
    const { store, peer } = await h.open();
    const three = compileRateLimit({ rate: '3/m' }); // T = 20 s
    const heard: Array<[string, number]> = [];
    const off = peer.onIpBlocked?.((ip, us) => heard.push([ip, us])) ?? (() => {});
    expect(await store.spendFailedAuth('192.0.2.1', three)).toEqual({ spent: true, blockedUs: 0 });
    expect(await peer.spendFailedAuth('192.0.2.1', three)).toEqual({ spent: true, blockedUs: 0 });
    const blocked = await store.spendFailedAuth('192.0.2.1', three); // the third empties it
    expect(blocked.spent).toBe(true);
    expect(blocked.blockedUs).toBeGreaterThan(19_000_000);
    expect(blocked.blockedUs).toBeLessThanOrEqual(20_000_000);
    // Empty: a further failure spends nothing (it says so: its refusal is answered 429) and the block does not grow.
    const again = await peer.spendFailedAuth('192.0.2.1', three);
    expect(again.spent).toBe(false);
    expect(again.blockedUs).toBeGreaterThan(0);
    expect(again.blockedUs).toBeLessThanOrEqual(blocked.blockedUs);
    expect(await peer.spendFailedAuth('2001:db8:1:2::/64', three)).toEqual({ spent: true, blockedUs: 0 }); // another IP: its own budget
    if (peer.onIpBlocked) await expect.poll(() => heard.map(([ip]) => ip)).toContain('192.0.2.1');
    off();
  });

  it("owners' own limits (issue 42): set with an audit entry, read and listed, known to every instance's table at once or within its change message; a set without a limit removes it", async () => {
    const { store, peer } = await h.open();
    expect(await store.readOwner('acme')).toBeNull();
    expect(store.ownerLimit('acme')).toBeUndefined();
    const entry = {
      at: new Date().toISOString(),
      actor: 't',
      action: 'owner-set',
      apiKey: '',
      id: '',
      detail: 'owner=acme',
    };
    await store.putOwner({ owner: 'acme', rateLimit: { rate: '12/h', burst: 12 }, updatedAt: entry.at }, entry);
    await store.putOwner({ owner: 'beta', rateLimit: { rate: '5/s' } }, entry);
    expect(await peer.readOwner('acme')).toEqual({
      owner: 'acme',
      rateLimit: { rate: '12/h', burst: 12 },
      updatedAt: entry.at,
    });
    expect((await store.listOwners()).map((o) => o.owner)).toEqual(['acme', 'beta']);
    // The request path's table: the compiled limit, named as the owner's policy.
    const twelve = compileRateLimit({ rate: '12/h', burst: 12 }, 'keygate-owner');
    await expect.poll(() => peer.ownerLimit('acme'), { timeout: 2_000 }).toEqual(twelve);
    await expect.poll(() => store.ownerLimit('acme'), { timeout: 2_000 }).toEqual(twelve);
    // A change of the limit reaches the other instance's table too.
    await store.putOwner({ owner: 'acme', rateLimit: { rate: '3/h' } }, entry);
    await expect.poll(() => peer.ownerLimit('acme')?.burst, { timeout: 2_000 }).toBe(3);
    await store.putOwner({ owner: 'acme' }, entry);
    expect(await peer.readOwner('acme')).toBeNull();
    expect((await peer.listOwners()).map((o) => o.owner)).toEqual(['beta']);
    await expect.poll(() => peer.ownerLimit('acme'), { timeout: 2_000 }).toBeUndefined();
    expect(peer.ownerLimit('beta')?.burst).toBe(5);
    // What is left of an owner's budget, spending nothing (the console's read), on either instance.
    const two = compileRateLimit({ rate: '2/h' }, 'keygate-owner');
    expect(await store.ownerBudget('zed', two)).toEqual({ remaining: 2, resetUs: 0, retryAfterUs: 0 });
    const spend: Charge = { cost: 1, owner: 'zed', budgets: [{ kind: 'owner', limit: two }] };
    expect((await store.admit('z1', 'n', 10_000, spend)).outcome).toBe('admitted');
    const left = await peer.ownerBudget('zed', two);
    expect(left.remaining).toBe(1);
    expect(left.resetUs).toBeGreaterThan(1_700_000_000);
    expect((await peer.ownerBudget('zed', two)).remaining).toBe(1); // a read spends nothing
  });

  it('announces key changes to listeners, including on another instance', async () => {
    const { store, peer } = await h.open();
    const seen: Array<string | null> = [];
    const off = peer.onKeyChange((k) => seen.push(k));
    await store.putKey(makeKey({ apiKey: 'c' }));
    await store.deleteKey('c');
    await expect.poll(() => seen.filter((k) => k === 'c').length, { timeout: 2_000 }).toBe(2);
    off();
  });

  it('counts its keys, of any state (for /readyz)', async () => {
    const { store } = await h.open();
    const start = await store.countKeys();
    await store.putKey(makeKey({ apiKey: 'count-a' }));
    await store.putKey(makeKey({ apiKey: 'count-b', state: 'revoked' }));
    await store.putKey(makeKey({ apiKey: 'count-a' }));
    expect(await store.countKeys()).toBe(start + 2);
    await store.deleteKey('count-a');
    expect(await store.countKeys()).toBe(start + 1);
  });

  /** Every page from the start (`owner`'s keys when given), `between` run before each page after the first. */
  async function readAll(store: Store, query: Omit<KeyPageQuery, 'after'>, between?: () => Promise<unknown>) {
    const pages: string[][] = [];
    let after: string | undefined;
    for (;;) {
      const page = await store.listKeys({ ...query, ...(after !== undefined && { after }) });
      pages.push(page.records.map((r) => r.apiKey));
      const last = page.records[page.records.length - 1];
      if (!page.more || !last) return pages;
      after = last.apiKey;
      await between?.();
    }
  }
  const names = (prefix: string, n: number) =>
    Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(3, '0')}`);

  it('lists a page at a time in apiKey order, all keys or one owner’s, with the records as stored', async () => {
    const { store, peer } = await h.open();
    const keys = names('k', 10).map((apiKey, i) =>
      makeKey({ apiKey, ...(i < 9 && { owner: i % 2 === 0 ? 'acme' : 'initech' }) }),
    );
    // Written out of order: the order is the apiKey's, not the writes'.
    for (const r of [...keys].reverse()) await store.putKey(r);
    expect(await readAll(peer, { limit: 4 })).toEqual([names('k', 4), names('k', 8).slice(4), ['k008', 'k009']]);
    expect(await peer.listKeys({ limit: 4 })).toEqual({ records: keys.slice(0, 4), more: true });
    // A page that ends exactly at the last key says so.
    expect(await peer.listKeys({ after: 'k005', limit: 4 })).toEqual({ records: keys.slice(6), more: false });
    expect((await readAll(peer, { owner: 'acme', limit: 2 })).flat()).toEqual(['k000', 'k002', 'k004', 'k006', 'k008']);
    expect(await readAll(peer, { owner: 'initech', limit: 4 })).toEqual([['k001', 'k003', 'k005', 'k007']]);
    expect(await peer.listKeys({ owner: 'nobody', limit: 4 })).toEqual({ records: [], more: false });
  });

  it('the owner index follows every write: a key moved to another owner, a deleted key', async () => {
    const { store, peer } = await h.open();
    for (const apiKey of names('o', 4)) await store.putKey(makeKey({ apiKey, owner: 'acme' }));
    await store.putKey(makeKey({ apiKey: 'o001', owner: 'initech' })); // an import --replace may do this
    await store.deleteKey('o002');
    const page = async (owner: string) => (await peer.listKeys({ owner, limit: 10 })).records.map((r) => r.apiKey);
    expect(await page('acme')).toEqual(['o000', 'o003']);
    expect(await page('initech')).toEqual(['o001']);
    await store.deleteKey('o001');
    expect(await page('initech')).toEqual([]);
    expect((await readAll(peer, { limit: 10 })).flat()).toEqual(['o000', 'o003']);
  });

  it('a cursor holds after its key is deleted; a key added before it is not read, one after it is', async () => {
    const { store, peer } = await h.open();
    for (const apiKey of ['a', 'b', 'c', 'd', 'e']) await store.putKey(makeKey({ apiKey }));
    const first = await peer.listKeys({ limit: 2 });
    expect(first.records.map((r) => r.apiKey)).toEqual(['a', 'b']);
    await store.deleteKey('b'); // the cursor's own key
    await store.putKey(makeKey({ apiKey: 'aa' }));
    await store.putKey(makeKey({ apiKey: 'bb' }));
    const next = await peer.listKeys({ after: 'b', limit: 2 });
    expect(next).toMatchObject({ more: true });
    expect(next.records.map((r) => r.apiKey)).toEqual(['bb', 'c']);
  });

  it('paging while keys are created and deleted meanwhile: each key present throughout is read once, in order', async () => {
    const { store, peer } = await h.open();
    const stay = names('s', 120);
    // Keys that sort right beside the ones that stay: an offset instead of a cursor would skip or repeat keys.
    const doomed = stay.filter((_, i) => i % 2 === 0).map((k) => `${k}d`);
    const created = stay.filter((_, i) => i % 2 === 1).map((k) => `${k}c`);
    for (const apiKey of stay) await store.putKey(makeKey({ apiKey, owner: 'acme' }));
    for (const owner of [undefined, 'acme']) {
      for (const apiKey of created) await store.deleteKey(apiKey);
      for (const apiKey of doomed) await store.putKey(makeKey({ apiKey, owner: 'acme' }));
      // Between pages, and while the next page is read, the other instance creates and deletes keys
      // around the cursor.
      const writes: Array<Promise<void>> = [];
      const churn = async () => {
        const i = writes.length * 3;
        writes.push(
          (async () => {
            for (const apiKey of created.slice(i, i + 3)) await peer.putKey(makeKey({ apiKey, owner: 'acme' }));
            for (const apiKey of doomed.slice(i, i + 3)) await peer.deleteKey(apiKey);
          })(),
        );
      };
      const read = (await readAll(store, { limit: 7, ...(owner && { owner }) }, churn)).flat();
      await Promise.all(writes);
      expect(writes.length).toBeGreaterThan(10);
      expect(new Set(read).size, String(owner)).toBe(read.length); // none twice
      expect(read, String(owner)).toEqual([...read].sort()); // in apiKey order
      expect(
        read.filter((k) => !/[cd]$/.test(k)),
        String(owner),
      ).toEqual(stay); // every one that stayed
    }
  });

  // Credits: spent with the budgets in the admit step, all or nothing, exact across instances.
  const credits = (spec: CreditsSpec, kind: 'key' | 'owner' = 'key') => ({
    kind,
    spec: compileCredits(spec, kind === 'key' ? KEY_CREDITS_NAME : OWNER_CREDITS_NAME),
  });
  const withCredits = (
    cost: number,
    owner: string | undefined,
    list: ReturnType<typeof credits>[],
    limit?: CompiledLimit,
  ): Charge => ({
    cost,
    owner,
    budgets: limit ? [{ kind: 'key', limit }] : [],
    credits: list,
  });

  it('credits: of 60 concurrent requests from two instances on 25 credits exactly 25 pass; the rest are exhausted, burn no nonce, and pass after a top-up', async () => {
    const { store, peer } = await h.open();
    const key = credits({ remaining: 25, setAt: 1_000 });
    const outcomes = await Promise.all(
      Array.from({ length: 60 }, async (_, i) =>
        (i % 2 ? store : peer).admit('cr', `n${i}`, 60_000, withCredits(1, undefined, [key])),
      ),
    );
    const passed = outcomes.filter((a) => a.outcome === 'admitted');
    expect(passed).toHaveLength(25);
    expect(outcomes.filter((a) => a.outcome === 'exhausted')).toHaveLength(35);
    // Exactly one spend reported the transition to zero.
    expect(passed.filter((a) => a.outcome === 'admitted' && a.drained === 1)).toHaveLength(1);
    const refused = outcomes.findIndex((a) => a.outcome === 'exhausted');
    const r = outcomes[refused] as Extract<Admission, { outcome: 'exhausted' }>;
    expect(r.refusedBy).toBe(0);
    expect(r.credits).toEqual([{ remaining: 0, refillInS: -1 }]);
    const target: CreditTarget = { kind: 'key', apiKey: 'cr', owner: undefined, spec: key.spec };
    expect(await peer.readCredits(target)).toEqual({ remaining: 0, refillInS: -1 });
    expect(await peer.addCredits(target, 2)).toEqual({ remaining: 2, refillInS: -1 });
    // The refused nonce was not burnt: the same token passes now.
    const again = await store.admit('cr', `n${refused}`, 60_000, withCredits(1, undefined, [key]));
    expect(again).toMatchObject({ outcome: 'admitted', credits: [{ remaining: 1, refillInS: -1 }] });
    // A cost above what is left spends nothing.
    expect((await store.admit('cr', 'big', 60_000, withCredits(2, undefined, [key]))).outcome).toBe('exhausted');
    expect(await store.readCredits(target)).toEqual({ remaining: 1, refillInS: -1 });
    // Past the largest a balance may hold: refused, nothing changed.
    expect(await store.addCredits(target, Number.MAX_SAFE_INTEGER)).toBeUndefined();
    expect(await store.readCredits(target)).toEqual({ remaining: 1, refillInS: -1 });
  });

  it("credits: a key's and its owner's are spent together, all or nothing; a rate refusal spends no credits", async () => {
    const { store, peer } = await h.open();
    const pool = credits({ remaining: 10, setAt: 5 }, 'owner');
    const mine = credits({ remaining: 4, setAt: 5 });
    const charge = (apiKey: string) =>
      withCredits(1, 'acme', apiKey === 'k1' ? [mine, pool] : [credits({ remaining: 100, setAt: 5 }), pool]);
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, async (_, i) =>
        (i % 2 ? store : peer).admit(i % 3 === 0 ? 'k1' : 'k2', `n${i}`, 60_000, charge(i % 3 === 0 ? 'k1' : 'k2')),
      ),
    );
    expect(outcomes.filter((a) => a.outcome === 'admitted')).toHaveLength(10);
    const ownerTarget: CreditTarget = { kind: 'owner', owner: 'acme', spec: pool.spec };
    expect((await store.readCredits(ownerTarget)).remaining).toBe(0);
    // k1 spent at most its own 4, and never more than it was admitted for.
    const k1Admitted = outcomes.filter((a, i) => i % 3 === 0 && a.outcome === 'admitted').length;
    const k1 = await store.readCredits({ kind: 'key', apiKey: 'k1', owner: 'acme', spec: mine.spec });
    expect(k1.remaining).toBe(4 - k1Admitted);
    // The owner topped up: a rate-limited request spends none of it.
    await peer.addCredits(ownerTarget, 5);
    const one = compileRateLimit({ rate: '1/h' });
    expect((await store.admit('k2', 'r1', 60_000, withCredits(1, 'acme', [pool], one))).outcome).toBe('admitted');
    expect((await store.admit('k2', 'r2', 60_000, withCredits(1, 'acme', [pool], one))).outcome).toBe('limited');
    expect((await store.readCredits(ownerTarget)).remaining).toBe(4);
  });

  it('credits: a newer set replaces the balance, an older (stale) one does not; a refill sets, it does not add', async () => {
    const { store } = await h.open();
    const v1 = credits({ remaining: 3, setAt: 1_000 });
    const v2 = credits({ remaining: 7, setAt: 2_000 });
    expect(await store.admit('s', 'a', 60_000, withCredits(1, undefined, [v1]))).toMatchObject({
      credits: [{ remaining: 2 }],
    });
    expect(await store.admit('s', 'b', 60_000, withCredits(1, undefined, [v2]))).toMatchObject({
      credits: [{ remaining: 6 }],
    });
    // Another instance's cached older record spends from the newer balance.
    expect(await store.admit('s', 'c', 60_000, withCredits(1, undefined, [v1]))).toMatchObject({
      credits: [{ remaining: 5 }],
    });
    // A daily refill set long ago: the balance counts as the refill's amount today, and says when the next comes.
    const daily = credits({ remaining: 1, refill: { amount: 50, interval: 'day' }, setAt: 86_400_000 });
    const a = await store.admit('d', 'a', 60_000, withCredits(1, undefined, [daily]));
    expect(a).toMatchObject({ outcome: 'admitted', credits: [{ remaining: 49 }] });
    const refill = (a as { credits: readonly { refillInS: number }[] }).credits[0]!.refillInS;
    expect(refill).toBeGreaterThan(0);
    expect(refill).toBeLessThanOrEqual(86_400);
  });

  it('answers ping', async () => {
    const { store } = await h.open();
    await expect(store.ping()).resolves.toBeUndefined();
  });
});
