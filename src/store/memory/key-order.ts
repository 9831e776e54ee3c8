// Tested in test/e2e/store-contract.test.ts (listing order and paging, on both stores).
/**
 * The memory store's listing index, its equivalent of the Redis sorted sets
 * (redis-key-records.ts): every apiKey, and each owner's, in sorted arrays, so a
 * page is a binary search and a slice, never a sort of every key. Updated with
 * each committed write; rebuilt (one sort) only when a whole key set is swapped in.
 *
 * Order is by UTF-16 code unit (JavaScript `<`), which for the ASCII apiKeys the
 * record allows (key-record.ts) is Redis's byte order too: both stores page alike.
 */
export interface KeyOrder {
  add(apiKey: string, owner: string | undefined): void;
  remove(apiKey: string, owner: string | undefined): void;
  /** At most `limit` apiKeys after `after` (all of them, or `owner`'s); `more` when others follow. */
  page(owner: string | undefined, after: string | undefined, limit: number): { apiKeys: string[]; more: boolean };
}

/** The index of the first entry greater than `after` (or than nothing: 0). */
function firstAfter(sorted: readonly string[], after: string | undefined): number {
  if (after === undefined) return 0;
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as string) <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insert(sorted: string[], apiKey: string): void {
  const i = firstAfter(sorted, apiKey);
  if (sorted[i - 1] !== apiKey) sorted.splice(i, 0, apiKey);
}

function drop(sorted: string[], apiKey: string): void {
  const i = firstAfter(sorted, apiKey) - 1;
  if (i >= 0 && sorted[i] === apiKey) sorted.splice(i, 1);
}

const byCodeUnit = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

export function createKeyOrder(records: Iterable<{ apiKey: string; owner?: string | undefined }>): KeyOrder {
  const all: string[] = [];
  const owners = new Map<string, string[]>();
  for (const r of records) {
    all.push(r.apiKey);
    if (r.owner === undefined) continue;
    const list = owners.get(r.owner);
    if (list) list.push(r.apiKey);
    else owners.set(r.owner, [r.apiKey]);
  }
  all.sort(byCodeUnit);
  for (const list of owners.values()) list.sort(byCodeUnit);

  return {
    add(apiKey, owner) {
      insert(all, apiKey);
      if (owner === undefined) return;
      const list = owners.get(owner);
      if (list) insert(list, apiKey);
      else owners.set(owner, [apiKey]);
    },
    remove(apiKey, owner) {
      drop(all, apiKey);
      if (owner === undefined) return;
      const list = owners.get(owner);
      if (!list) return;
      drop(list, apiKey);
      if (list.length === 0) owners.delete(owner);
    },
    page(owner, after, limit) {
      const list = owner === undefined ? all : (owners.get(owner) ?? []);
      const from = firstAfter(list, after);
      return { apiKeys: list.slice(from, from + limit), more: from + limit < list.length };
    },
  };
}
