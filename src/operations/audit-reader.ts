// Tested in test/e2e/audit.test.ts.
import { AUDIT_ACTIONS, AUDIT_CURSOR, auditMatches, type AuditEntry, type AuditFilter } from '../store/audit-entry.js';
import type { Store } from '../store/store.js';

/** One page of the audit: `nextCursor` reads on from the last entry looked at; null once the stream's end was reached. */
export interface AuditPage {
  readonly entries: readonly AuditEntry[];
  readonly nextCursor: string | null;
}

export interface AuditQuery extends AuditFilter {
  /** A page's nextCursor: read on after it (exclusive). */
  readonly cursor?: string;
  readonly limit: number;
}

export const AUDIT_DEFAULT_LIMIT = 100;
export const AUDIT_MAX_LIMIT = 1000;
/** Stream entries one page reads at most, matching or not: a narrow filter over a long stream answers in bounded time, with a cursor to go on. */
export const AUDIT_SCAN_PER_PAGE = 10_000;
const BATCH = 500;

/**
 * The query as the management API's query string and `keygate audit`'s options give it, checked:
 * every problem at once (400 / exit 2), like every other input.
 */
export function parseAuditQuery(raw: {
  apiKey?: string | undefined;
  owner?: string | undefined;
  action?: string | undefined;
  since?: string | undefined;
  cursor?: string | undefined;
  limit?: string | undefined;
}): { query: AuditQuery; problems?: undefined } | { query?: undefined; problems: string[] } {
  const problems: string[] = [];
  let limit = AUDIT_DEFAULT_LIMIT;
  if (raw.limit !== undefined) {
    limit = /^\d{1,5}$/.test(raw.limit) ? Number(raw.limit) : NaN;
    if (!(limit >= 1 && limit <= AUDIT_MAX_LIMIT)) problems.push(`limit: an integer from 1 to ${AUDIT_MAX_LIMIT}`);
  }
  let since: number | undefined;
  if (raw.since !== undefined) {
    since = /^\d{4}-\d\d-\d\d(T[\d:.]+(Z|[+-]\d\d:\d\d)?)?$/.test(raw.since) ? Date.parse(raw.since) : NaN;
    if (Number.isNaN(since)) problems.push('since: an ISO 8601 time, e.g. 2026-03-01T00:00:00Z');
    // The stream's entry ids are milliseconds since 1970: an earlier time names no id (and Redis refuses it).
    else if (since < 0) problems.push('since: a time at or after 1970-01-01T00:00:00Z');
  }
  if (raw.cursor !== undefined && !AUDIT_CURSOR.test(raw.cursor))
    problems.push("cursor: a page's nextCursor, as it was given");
  if (raw.action !== undefined && !(AUDIT_ACTIONS as readonly string[]).includes(raw.action))
    problems.push(`action: one of ${AUDIT_ACTIONS.join(', ')}`);
  for (const name of ['apiKey', 'owner'] as const) {
    const v = raw[name];
    if (v !== undefined && (v.length === 0 || v.length > 255)) problems.push(`${name}: 1 to 255 characters`);
  }
  if (problems.length > 0) return { problems };
  return {
    query: {
      limit,
      ...(raw.apiKey !== undefined && { apiKey: raw.apiKey }),
      ...(raw.owner !== undefined && { owner: raw.owner }),
      ...(raw.action !== undefined && { action: raw.action }),
      ...(since !== undefined && { since }),
      ...(raw.cursor !== undefined && { cursor: raw.cursor }),
    },
  };
}

/**
 * The one reader of the audit log, shared by GET /v1/audit (and so the console's key history) and
 * `keygate audit`: pages over the store's stream oldest first (Redis XRANGE with an exclusive start),
 * keeping the entries that match. A page ends at `limit` entries, at the stream's end (nextCursor
 * null), or after AUDIT_SCAN_PER_PAGE entries looked at (nextCursor goes on from there).
 */
export function createAuditReader(deps: { store: Pick<Store, 'readAudit'> }) {
  async function page(query: AuditQuery): Promise<AuditPage> {
    const entries: AuditEntry[] = [];
    let after = query.cursor;
    let scanned = 0;
    for (;;) {
      const count = Math.min(BATCH, AUDIT_SCAN_PER_PAGE - scanned);
      const read = await deps.store.readAudit({
        after,
        ...(after === undefined && query.since !== undefined && { sinceMs: query.since }),
        count,
      });
      if (read.last === undefined) return { entries, nextCursor: null };
      for (const r of read.records) {
        if (!auditMatches(r.entry, query)) continue;
        entries.push(r.entry);
        if (entries.length === query.limit) return { entries, nextCursor: r.cursor };
      }
      after = read.last;
      scanned += count;
      if (scanned >= AUDIT_SCAN_PER_PAGE) return { entries, nextCursor: after };
    }
  }
  return {
    page,
    /** Every matching entry, page by page (the CLI's whole answer). */
    async *all(query: Omit<AuditQuery, 'cursor'>): AsyncGenerator<readonly AuditEntry[]> {
      let cursor: string | undefined;
      for (;;) {
        const p = await page({ ...query, ...(cursor !== undefined && { cursor }) });
        if (p.entries.length > 0) yield p.entries;
        if (p.nextCursor === null) return;
        cursor = p.nextCursor;
      }
    },
  };
}
export type AuditReader = ReturnType<typeof createAuditReader>;
