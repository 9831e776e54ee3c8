// Tested in test/unit/key-operations.test.ts (paging, the state filter's budget), test/e2e/key-listing-scale.test.ts.
import { keyStatus, type KeyRecord, type KeyStatus } from '../keys/key-record.js';
import type { KeyRecordStore } from '../store/store.js';

export interface KeyFilter {
  owner?: string;
  /** The effective status: active, revoked or expired. */
  state?: KeyStatus;
}

/** The most keys one page holds (the API's `limit`, the CLI's `--limit`). */
export const MAX_PAGE = 500;

/** Which page: at most `limit` keys, from the start or from a previous page's `nextCursor`. */
export interface PageRequest {
  readonly limit: number;
  readonly cursor?: string;
}

/**
 * A page of keys in apiKey order. `nextCursor` is where the following page starts, null when no key
 * follows. With a state filter a page may hold fewer than `limit` keys, even none, while
 * `nextCursor` is not null: at most LIST_SCAN_BUDGET keys are read per page.
 */
export interface KeyPage {
  readonly records: readonly KeyRecord[];
  readonly nextCursor: string | null;
}

/**
 * A cursor is opaque to its reader: the last apiKey a page looked at, base64url. Keys added or
 * removed meanwhile never shift a page, and a cursor whose key was deleted still works.
 */
export const CURSOR = /^[A-Za-z0-9_-]{1,200}$/;
const cursorOf = (apiKey: string) => Buffer.from(apiKey).toString('base64url');
const afterCursor = (cursor: string) => Buffer.from(cursor, 'base64url').toString();

/**
 * Keys a page with a state filter reads at most (state is not indexed: `expired` depends on the
 * clock). Bounds one call's reads however few keys match; the caller follows `next`.
 */
export const LIST_SCAN_BUDGET = 2_000;
/** Keys read per store call while filtering by state. */
const STATE_CHUNK = 200;

/**
 * Reading keys a page at a time, for the management API and `keygate keys list` (through createKeyOperations):
 * pages in apiKey order, optionally one owner's (indexed) or one state's (filtered as read, within a budget).
 */
export function createKeyListing(deps: { store: Pick<KeyRecordStore, 'listKeys'>; now: () => number }): {
  list(filter: KeyFilter, page: PageRequest): Promise<KeyPage>;
  listAll(filter: KeyFilter): AsyncGenerator<readonly KeyRecord[]>;
} {
  const { store, now } = deps;
  async function list(filter: KeyFilter, page: PageRequest): Promise<KeyPage> {
    const { owner, state } = filter;
    const q = { ...(owner !== undefined && { owner }) };
    let after = page.cursor === undefined ? undefined : afterCursor(page.cursor);
    if (state === undefined) {
      const p = await store.listKeys({ ...q, limit: page.limit, ...(after !== undefined && { after }) });
      const last = p.records[p.records.length - 1];
      return { records: p.records, nextCursor: p.more && last ? cursorOf(last.apiKey) : null };
    }
    // Filtered by state: read chunks until the page is full or the budget is spent. The cursor is the
    // last key looked at, so a key left unread (past a full page) is where the next page starts.
    const t = now();
    const records: KeyRecord[] = [];
    for (let read = 0; read < LIST_SCAN_BUDGET;) {
      const limit = Math.min(STATE_CHUNK, LIST_SCAN_BUDGET - read);
      const p = await store.listKeys({ ...q, limit, ...(after !== undefined && { after }) });
      for (const [i, r] of p.records.entries()) {
        after = r.apiKey;
        if (keyStatus(r, t) !== state) continue;
        records.push(r);
        if (records.length === page.limit)
          return { records, nextCursor: p.more || i < p.records.length - 1 ? cursorOf(r.apiKey) : null };
      }
      read += limit;
      if (!p.more) return { records, nextCursor: null };
    }
    return { records, nextCursor: after === undefined ? null : cursorOf(after) };
  }

  async function* listAll(filter: KeyFilter): AsyncGenerator<readonly KeyRecord[]> {
    for (let cursor: string | undefined; ;) {
      const p = await list(filter, { limit: MAX_PAGE, ...(cursor !== undefined && { cursor }) });
      if (p.records.length > 0) yield p.records;
      if (p.nextCursor === null) return;
      cursor = p.nextCursor;
    }
  }
  return { list, listAll };
}
