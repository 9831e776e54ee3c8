import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { createKeyOperations } from '../../src/operations/key-operations.js';
import { createOwnerOperations } from '../../src/operations/owner-operations.js';
import type { HomeRules } from '../../src/operations/homes.js';
import { StoreUnavailableError, type AuditEntry, type CreditHolder } from '../../src/store/store.js';

/** Homes as the key operations write them (src/operations/homes.ts): stamped, checked, moves timed. */
const RULES: HomeRules = { self: 'tyo', names: ['fra', 'tyo', 'iad'], defaultHome: 'fra' };

function setup(regions: HomeRules | undefined) {
  const store = createMemoryStore({ keys: [] }, { clock: systemClock() });
  let t = 1_800_000_000_000;
  const now = () => t;
  const deps = { store, now, audit: () => {}, regions };
  return {
    keys: createKeyOperations(deps),
    owners: createOwnerOperations(deps),
    advance: (ms: number) => (t += ms),
    now,
  };
}
const problems = (r: { ok: boolean }) => ('problems' in r ? (r as { problems: string[] }).problems : []);

describe('key and owner homes', () => {
  it("a new key without --home gets this instance's region; with an owner, the owner's home", async () => {
    const { keys, owners } = setup(RULES);
    const plain = await keys.create({ scopes: [] }, 'test');
    expect(plain.ok && plain.value.record.home).toBe('tyo');
    expect((await owners.setHome('acme', 'iad', 'test')).ok).toBe(true);
    const owned = await keys.create({ owner: 'acme', scopes: [] }, 'test');
    expect(owned.ok && owned.value.record.home).toBe('iad');
    // An owner without a home: the default home.
    const other = await keys.create({ owner: 'beta', scopes: [] }, 'test');
    expect(other.ok && other.value.record.home).toBe('fra');
  });

  const refusals: Array<{ name: string; regions?: HomeRules; input: { owner?: string; home: string }; want: RegExp }> =
    [
      {
        name: 'an unlisted home',
        input: { home: 'sfo' },
        want: /key\.home: "sfo" is not a region listed under regions: \(fra, tyo, iad\)/,
      },
      {
        name: "a home other than the owner's",
        input: { owner: 'acme', home: 'fra' },
        want: /key\.home: "fra" differs from the home of its owner acme \(iad\)/,
      },
      {
        name: 'a home with regions off',
        regions: undefined,
        input: { home: 'fra' },
        want: /key\.home: regions are off/,
      },
    ];
  for (const c of refusals)
    it(`refused, naming the field: ${c.name}`, async () => {
      const { keys, owners } = setup('regions' in c ? c.regions : RULES);
      if ('regions' in c === false) await owners.setHome('acme', 'iad', 'test');
      const r = await keys.create({ scopes: [], ...c.input }, 'test');
      expect(r.ok).toBe(false);
      expect(problems(r).join(' ')).toMatch(c.want);
    });

  it('a move is stamped with its time; the same home again is no move; a limit set keeps the owner home', async () => {
    const { keys, owners, advance, now } = setup(RULES);
    const k = await keys.create({ scopes: [], home: 'fra' }, 'test');
    if (!k.ok) throw new Error('create');
    expect(k.value.record.homeMovedAtMs).toBeUndefined();
    advance(5_000);
    const moved = await keys.update(k.value.record.apiKey, { home: 'iad' }, 'test');
    expect(moved.ok && moved.value.home).toBe('iad');
    expect(moved.ok && moved.value.homeMovedAtMs).toBe(now());
    const t = now();
    advance(5_000);
    const same = await keys.update(k.value.record.apiKey, { home: 'iad' }, 'test');
    expect(same.ok && same.value.homeMovedAtMs).toBe(t);

    expect((await owners.setHome('acme', 'iad', 'test')).ok).toBe(true);
    const at = now();
    await owners.setRateLimit('acme', { rate: '10/s' }, 'test');
    const o = await owners.get('acme');
    expect(o.ok && o.value.home).toBe('iad');
    advance(1_000);
    await owners.setHome('acme', 'tyo', 'test');
    const after = await owners.get('acme');
    expect(after.ok && after.value.home).toBe('tyo');
    expect(at).toBeLessThan(now());
  });

  describe("a move carries the credits balances (the store's moveCredits), before the move is written", () => {
    const CREDITS = { remaining: 1000 };
    function withMoves(fail?: string) {
      const calls: Array<{ holders: readonly CreditHolder[]; from: string; to: string; before: string | undefined }> =
        [];
      const audit: AuditEntry[] = [];
      const store = createMemoryStore({ keys: [] }, { clock: systemClock() });
      const deps = {
        store,
        now: () => 1_800_000_000_000,
        audit: (e: AuditEntry) => void audit.push(e),
        regions: RULES,
      };
      const keys = createKeyOperations(deps);
      const owners = createOwnerOperations(deps);
      const moving = Object.assign(store, {
        moveCredits: async (holders: readonly CreditHolder[], from: string, to: string) => {
          // What the record said while the balances were carried: the move is written after them.
          const first = holders[0];
          const before =
            first?.kind === 'key' && first.owner === undefined
              ? (await store.readKey(first.apiKey))?.record.home
              : (await store.readOwner(first?.owner ?? ''))?.home;
          calls.push({ holders, from, to, before });
          if (fail !== undefined) throw new StoreUnavailableError(fail);
        },
      });
      return { keys, owners, calls, audit, store: moving };
    }

    it('a key without an owner: its balance from the old home to the new one; none for a key without credits', async () => {
      const { keys, calls } = withMoves();
      const k = await keys.create({ scopes: [], home: 'fra', credits: CREDITS }, 'test');
      const plain = await keys.create({ scopes: [], home: 'fra' }, 'test');
      if (!k.ok || !plain.ok) throw new Error('create');
      const apiKey = k.value.record.apiKey;
      const moved = await keys.update(apiKey, { home: 'iad' }, 'test');
      expect(moved.ok && moved.value.home).toBe('iad');
      expect(moved.ok && moved.warnings).toBeUndefined();
      expect(calls).toEqual([
        { holders: [{ kind: 'key', apiKey, owner: undefined }], from: 'fra', to: 'iad', before: 'fra' },
      ]);
      // A change that is refused carries nothing; nor do the same home again and a key without credits.
      const refused = await keys.update(apiKey, { home: 'tyo', label: 'a\u0000b' }, 'test');
      expect(refused.ok).toBe(false);
      await keys.update(apiKey, { home: 'iad' }, 'test');
      await keys.update(plain.value.record.apiKey, { home: 'iad' }, 'test');
      expect(calls).toHaveLength(1);
    });

    it("an owner: its own balance and its keys' with credits, from its home (else the default) to the new one", async () => {
      const { keys, owners, calls } = withMoves();
      await owners.set('acme', { credits: CREDITS }, 'test');
      const k1 = await keys.create({ owner: 'acme', scopes: [], credits: CREDITS }, 'test');
      await keys.create({ owner: 'acme', scopes: [] }, 'test');
      await keys.create({ owner: 'beta', scopes: [], credits: CREDITS }, 'test');
      if (!k1.ok) throw new Error('create');
      const moved = await owners.setHome('acme', 'tyo', 'test');
      expect(moved.ok && moved.value).toMatchObject({ home: 'tyo', warnings: [] });
      expect(calls).toEqual([
        {
          holders: [
            { kind: 'owner', owner: 'acme' },
            { kind: 'key', apiKey: k1.value.record.apiKey, owner: 'acme' },
          ],
          from: 'fra',
          to: 'tyo',
          before: undefined,
        },
      ]);
      await owners.setHome('acme', 'tyo', 'test');
      expect(calls).toHaveLength(1);
    });

    it('a home that does not answer: the move is made, with a warning and an audit entry that say so', async () => {
      const { keys, owners, audit, calls } = withMoves('fra did not answer');
      await owners.set('acme', { credits: CREDITS }, 'test');
      const moved = await owners.setHome('acme', 'tyo', 'test');
      expect(moved.ok && moved.value.home).toBe('tyo');
      expect(moved.ok && moved.value.warnings).toEqual([
        expect.stringMatching(
          /^owner acme: credits balance not carried from fra to tyo \(fra did not answer\): spends at tyo start from the credits as last set/,
        ),
      ]);
      expect(audit.at(-1)?.detail).toBe('home=tyo; credits not carried');
      const k = await keys.create({ scopes: [], home: 'fra', credits: CREDITS }, 'test');
      if (!k.ok) throw new Error('create');
      const key = await keys.update(k.value.record.apiKey, { home: 'iad' }, 'test');
      expect(key.ok && key.value.home).toBe('iad');
      expect(key.ok && key.warnings?.[0]).toMatch(/^key .*: credits balance not carried from fra to iad/);
      expect(audit.at(-1)).toMatchObject({ action: 'update', changes: ['home'], detail: 'credits not carried' });
      expect(calls).toHaveLength(2);
    });

    it('a store with no request-state groups (the memory store, `keygate keys`): the move warns that nothing was carried', async () => {
      const { keys } = setup(RULES);
      const k = await keys.create({ scopes: [], home: 'fra', credits: CREDITS }, 'test');
      if (!k.ok) throw new Error('create');
      const moved = await keys.update(k.value.record.apiKey, { home: 'iad' }, 'test');
      expect(moved.ok && moved.value.home).toBe('iad');
      expect(moved.ok && moved.warnings?.[0]).toMatch(/holds no connection to the regions' request-state Redis/);
    });
  });
});
