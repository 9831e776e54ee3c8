import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import {
  createKeyOperations,
  CURSOR,
  LIST_SCAN_BUDGET,
  type KeyFilter,
  type KeyPage,
} from '../../src/management/key-operations.js';
import { createMemoryStore } from '../../src/store/memory-store.js';
import type { KeyPageQuery, Store } from '../../src/store/store.js';
import { makeKey } from '../helpers/keygate.js';

/**
 * The key operations' listing: pages read from the store's indexes, a state filter that reads a
 * bounded number of keys per page, and opaque cursors. (Every store's paging: store-contract.test.ts.)
 */
const name = (prefix: string, i: number) => `${prefix}${String(i).padStart(4, '0')}`;

/** A memory store holding `records`, counting the keys each listKeys call returns. */
function world(records: ReturnType<typeof makeKey>[]) {
  const clock = manualClock();
  const memory = createMemoryStore({ keys: records }, { clock });
  const reads: number[] = [];
  const store: Store = {
    ...memory,
    async listKeys(q: KeyPageQuery) {
      const page = await memory.listKeys(q);
      reads.push(page.records.length);
      return page;
    },
  };
  const ops = createKeyOperations({ store, now: () => clock.nowMs(), audit: () => {} });
  return { ops, reads };
}

async function readAll(ops: ReturnType<typeof world>['ops'], filter: KeyFilter, limit: number) {
  const pages: KeyPage[] = [];
  let cursor: string | undefined;
  do {
    const page = await ops.list(filter, { limit, ...(cursor !== undefined && { cursor }) });
    pages.push(page);
    if (page.nextCursor !== null) expect(page.nextCursor).toMatch(CURSOR);
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
  return pages;
}

const revoked = (apiKey: string, owner?: string) =>
  makeKey({ apiKey, state: 'revoked', revokedAt: new Date(0).toISOString(), ...(owner && { owner }) });

describe('key operations: list', () => {
  it('without a state filter, a page is one store read of exactly that page', async () => {
    const w = world(Array.from({ length: 25 }, (_, i) => makeKey({ apiKey: name('k', i) })));
    const pages = await readAll(w.ops, {}, 10);
    expect(pages.map((p) => p.records.length)).toEqual([10, 10, 5]);
    expect(pages.flatMap((p) => p.records.map((r) => r.apiKey))).toEqual(
      Array.from({ length: 25 }, (_, i) => name('k', i)),
    );
    expect(w.reads).toEqual([10, 10, 5]);
  });

  it('with a state filter, pages hold only that state, owner filter too, and end with a null cursor', async () => {
    const keys = Array.from({ length: 40 }, (_, i) =>
      i % 3 === 0
        ? revoked(name('k', i), i % 2 ? 'acme' : undefined)
        : makeKey({ apiKey: name('k', i), owner: 'acme' }),
    );
    const w = world(keys);
    const pages = await readAll(w.ops, { state: 'revoked' }, 4);
    const want = keys.filter((_, i) => i % 3 === 0).map((r) => r.apiKey);
    expect(pages.flatMap((p) => p.records.map((r) => r.apiKey))).toEqual(want);
    expect(pages.slice(0, -1).every((p) => p.records.length === 4)).toBe(true);
    expect(pages.at(-1)?.nextCursor).toBeNull();
    const acme = await readAll(w.ops, { owner: 'acme', state: 'revoked' }, 2);
    expect(acme.flatMap((p) => p.records.map((r) => r.apiKey))).toEqual(
      keys.filter((r, i) => i % 3 === 0 && r.owner === 'acme').map((r) => r.apiKey),
    );
  });

  it(`a state filter reads at most ${LIST_SCAN_BUDGET} keys per page: a short (even empty) page with a cursor, then the rest`, async () => {
    const keys = [
      ...Array.from({ length: LIST_SCAN_BUDGET + 300 }, (_, i) => makeKey({ apiKey: name('a', i) })),
      revoked('z-last'),
    ];
    const w = world(keys);
    const first = await w.ops.list({ state: 'revoked' }, { limit: 10 });
    expect(first.records).toEqual([]);
    expect(first.nextCursor).not.toBeNull();
    expect(w.reads.reduce((a, b) => a + b, 0)).toBe(LIST_SCAN_BUDGET);
    const second = await w.ops.list({ state: 'revoked' }, { limit: 10, cursor: first.nextCursor as string });
    expect(second.records.map((r) => r.apiKey)).toEqual(['z-last']);
    expect(second.nextCursor).toBeNull();
  });

  it('a state page that fills up mid-read goes on from its last key, not from the end of what it read', async () => {
    const keys = Array.from({ length: 30 }, (_, i) => revoked(name('r', i)));
    const w = world(keys);
    const pages = await readAll(w.ops, { state: 'revoked' }, 7);
    expect(pages.map((p) => p.records.length)).toEqual([7, 7, 7, 7, 2]);
    expect(pages.flatMap((p) => p.records.map((r) => r.apiKey))).toEqual(keys.map((r) => r.apiKey));
  });

  it('listAll yields every matching key once, in order', async () => {
    const keys = Array.from({ length: 1_203 }, (_, i) => makeKey({ apiKey: name('k', i) }));
    const w = world(keys);
    const seen: string[] = [];
    for await (const page of w.ops.listAll({})) seen.push(...page.map((r) => r.apiKey));
    expect(seen).toEqual(keys.map((r) => r.apiKey));
  });
});
