import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { IMPORT_BATCH } from '../../src/operations/key-import.js';
import { createKeyOperations } from '../../src/operations/key-operations.js';
import { CURSOR, LIST_SCAN_BUDGET, type KeyFilter, type KeyPage } from '../../src/operations/key-listing.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import type { KeyCommit } from '../../src/store/key-write.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import {
  DurabilityError,
  StoreUnavailableError,
  type AuditEntry,
  type KeyPageQuery,
  type Store,
} from '../../src/store/store.js';
import { makeKey } from '../helpers/make-key.js';

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

/**
 * A memory store that records every commit's size and the most key reads in flight at once, and
 * runs `before(n, commit)` ahead of the n-th commit (1-based): a concurrent change, or a failure.
 */
function importWorld(existing: KeyRecord[], importBatch?: number) {
  const clock = manualClock();
  const memory = createMemoryStore({ keys: existing }, { clock });
  const commits: number[] = [];
  let inFlight = 0;
  let mostInFlight = 0;
  let before: (n: number, commit: KeyCommit) => Promise<void> = async () => {};
  const store: Store = {
    ...memory,
    async readKey(apiKey) {
      mostInFlight = Math.max(mostInFlight, ++inFlight);
      await Promise.resolve();
      inFlight--;
      return memory.readKey(apiKey);
    },
    async commitKeyChanges(commit) {
      await before(commits.length + 1, commit);
      const r = await memory.commitKeyChanges(commit);
      if (r.ok) commits.push(commit.writes.length);
      return r;
    },
  };
  const audited: AuditEntry[] = [];
  const ops = createKeyOperations({
    store,
    now: () => clock.nowMs(),
    audit: (e) => void audited.push(e),
    ...(importBatch !== undefined && { importBatch }),
  });
  return {
    ops,
    memory,
    commits,
    audited,
    mostInFlight: () => mostInFlight,
    before: (fn: typeof before) => void (before = fn),
    names: async () => (await memory.listKeys({ limit: 1_000_000 })).records.map((r) => r.apiKey),
  };
}

const file = (n: number, secret = 'file') =>
  Array.from({ length: n }, (_, i) => makeKey({ apiKey: name('k', i), secret: `${secret}-secret-${i}-0123456789` }));

describe('key operations: import in batches', () => {
  it.each([
    { name: 'an empty file', n: 0, existing: 0, replace: false, commits: [], counts: [0, 0, 0] },
    { name: 'a file of exactly one batch', n: 3, existing: 0, replace: false, commits: [3], counts: [3, 0, 0] },
    { name: 'batches and a remainder', n: 7, existing: 0, replace: false, commits: [3, 3, 1], counts: [7, 0, 0] },
    // keys 0-3 exist: the first batch is all skipped and commits nothing; the second writes 2 of 3
    { name: 'existing keys skipped', n: 7, existing: 4, replace: false, commits: [2, 1], counts: [3, 0, 4] },
    { name: 'existing keys replaced', n: 7, existing: 4, replace: true, commits: [3, 3, 1], counts: [3, 4, 0] },
  ])('$name: commits of at most the batch size, each with its audit', async (c) => {
    const w = importWorld(file(c.existing, 'old'), 3);
    const r = await w.ops.importKeys(file(c.n), c.replace, 'importer');
    const [created, replaced, skipped] = c.counts;
    expect(r).toEqual({ ok: true, value: { total: c.n, created, replaced, skipped } });
    expect(w.commits).toEqual(c.commits);
    expect(w.mostInFlight()).toBeLessThanOrEqual(3);
    expect(w.audited.map((e) => e.action).sort()).toEqual(
      [...Array(created).fill('import'), ...Array(replaced).fill('import-replace')].sort(),
    );
    expect(await w.names()).toEqual(file(Math.max(c.n, c.existing)).map((k) => k.apiKey));
    const kept = c.replace ? 'file' : 'old';
    if (c.existing > 0) expect((await w.memory.getKey(name('k', 0)))?.secret).toContain(kept);
  });

  it(`by default, at most ${IMPORT_BATCH} keys per commit and per page of reads`, async () => {
    const w = importWorld([]);
    const n = Math.round(IMPORT_BATCH * 2.5);
    expect(await w.ops.importKeys(file(n), false, 'importer')).toMatchObject({ ok: true, value: { created: n } });
    expect(w.commits).toEqual([IMPORT_BATCH, IMPORT_BATCH, n - 2 * IMPORT_BATCH]);
    expect(w.mostInFlight()).toBeLessThanOrEqual(IMPORT_BATCH);
  });

  // The second commit (keys 3-5) is refused or fails; keys 0-2 are applied, and a re-run completes it.
  it.each([
    {
      name: 'a key of the batch created meanwhile (compare-and-set refused)',
      fault: (w: ReturnType<typeof importWorld>) =>
        w.memory
          .commitKeyChanges({
            writes: [
              {
                apiKey: name('k', 4),
                expect: 0,
                next: makeKey({ apiKey: name('k', 4), secret: 'other-0123456789abcdef' }),
              },
            ],
            audit: [],
          })
          .then(() => {}),
      stopped: /key k0004 changed while this change was made .*nothing of that batch of 3 was written/,
      written: ['k0000', 'k0001', 'k0002', 'k0004'],
    },
    {
      name: 'the store unavailable',
      fault: async () => {
        throw new StoreUnavailableError('redis: Command timed out after 500 ms (deadline)');
      },
      stopped: /^redis: Command timed out.*may or may not have been written/,
      written: ['k0000', 'k0001', 'k0002'],
    },
  ])('$name in a later batch: stops with what was applied; a re-run completes it', async (c) => {
    const w = importWorld([], 3);
    w.before(async (n) => {
      if (n === 2) await c.fault(w);
    });
    const r = await w.ops.importKeys(file(7), false, 'importer');
    expect(r).toMatchObject({ ok: true, value: { total: 7, created: 3, replaced: 0, skipped: 0 } });
    expect(r.ok && r.value.stopped).toMatch(c.stopped);
    expect(w.commits).toEqual([3]);
    expect(w.audited).toHaveLength(3);
    expect(await w.names()).toEqual(c.written);

    w.before(async () => {});
    const again = await w.ops.importKeys(file(7), false, 'importer');
    expect(again).toEqual({
      ok: true,
      value: { total: 7, created: 7 - c.written.length, replaced: 0, skipped: c.written.length },
    });
    expect(await w.names()).toEqual(file(7).map((k) => k.apiKey));
  });

  it('a commit written but not durable in a later batch: stopped, and a re-run with replace writes every key again', async () => {
    const w = importWorld([], 3);
    const durable = w.memory.commitKeyChanges;
    let calls = 0;
    w.memory.commitKeyChanges = async (commit) => {
      const r = await durable(commit);
      if (++calls === 2) throw new DurabilityError(1, 0);
      return r;
    };
    const r = await w.ops.importKeys(file(7), true, 'importer');
    expect(r.ok && r.value).toMatchObject({
      created: 3,
      stopped: expect.stringMatching(/^durability: .*may or may not/),
    });
    w.memory.commitKeyChanges = durable;
    expect(await w.ops.importKeys(file(7), true, 'importer')).toEqual({
      ok: true,
      value: { total: 7, created: 1, replaced: 6, skipped: 0 },
    });
  });

  it.each([
    {
      name: 'a refusal',
      fault: (w: ReturnType<typeof importWorld>) =>
        w.memory
          .commitKeyChanges({
            writes: [
              {
                apiKey: name('k', 1),
                expect: 0,
                next: makeKey({ apiKey: name('k', 1), secret: 'other-0123456789abcdef' }),
              },
            ],
            audit: [],
          })
          .then(() => {}),
    },
    {
      name: 'a store failure',
      fault: async () => {
        throw new StoreUnavailableError('redis: down');
      },
    },
  ])('$name before any key was written answers as any change does: nothing written', async (c) => {
    const w = importWorld([], 3);
    w.before(async (n) => {
      if (n === 1) await c.fault(w);
    });
    const run = w.ops.importKeys(file(7), false, 'importer');
    if (c.name === 'a refusal') expect(await run).toMatchObject({ ok: false, refused: 'conflict' });
    else await expect(run).rejects.toThrow(StoreUnavailableError);
    expect(w.commits).toEqual([]);
    expect(w.audited).toEqual([]);
  });
});
