import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { createKeyOperations } from '../../src/operations/key-operations.js';
import { createOwnerOperations } from '../../src/operations/owner-operations.js';
import type { HomeRules } from '../../src/operations/homes.js';

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
});
