// Tested in test/e2e/webhooks.test.ts, test/e2e/webhooks-trim.test.ts.
import { auditStreamKey } from './audit-entry.js';

/**
 * The webhook deliveries' state in Redis, shared by the delivery (observe/webhook-delivery.ts), the
 * delivery list and retry-now (operations/webhook-operations.ts) and the audit stream's writers, whose
 * trim must never remove what the consumer group has not finished. Every name is on the `{keystore}`
 * hash tag with the audit stream, so on a Cluster each script runs on one slot.
 *
 * - the consumer group `webhooks` on the audit stream: an event read but not settled is in its pending
 *   list (first attempt, held by the consumer that read it);
 * - `webhook:retry`: sorted set id → next attempt (ms); while an instance attempts it, the score is the
 *   claim's end and `webhook:holder` names the instance;
 * - `webhook:attempts`: hash id → "attempts firstMs lastError" (lastError: a status or a cause, no spaces);
 * - `webhook:retry-order`: sorted set id → the id's own time (ms): the oldest event waiting for a retry,
 *   below which the stream may be trimmed;
 * - `webhook:lost`: events trimmed before they were delivered (only past the hard cap), counted by the
 *   writer and reported (metric and log) by the delivery.
 */
export interface WebhookKeys {
  readonly stream: string;
  readonly retry: string;
  readonly attempts: string;
  readonly holder: string;
  readonly retryOrder: string;
  readonly lost: string;
}

/** The consumer group on the audit stream; one for every Keygate of the keystore. */
export const WEBHOOK_GROUP = 'webhooks';

export function webhookKeys(prefix: string): WebhookKeys {
  const base = `${prefix}{keystore}:`;
  return {
    stream: auditStreamKey(prefix),
    retry: `${base}webhook:retry`,
    attempts: `${base}webhook:attempts`,
    holder: `${base}webhook:holder`,
    retryOrder: `${base}webhook:retry-order`,
    lost: `${base}webhook:lost`,
  };
}

/** A Lua function: whether stream id `a` comes before `b` (by time, then sequence; never as text). */
export const ID_LESS_LUA = `
local function idLess(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end
`;

/** The attempts hash's value: "attempts firstMs lastError" (older values have no lastError). */
export function parseAttempts(state: string): { attempts: number; firstMs: number | undefined; lastError: string } {
  const [n, first, lastError] = state.split(' ');
  return { attempts: Number(n) || 0, firstMs: first ? Number(first) : undefined, lastError: lastError ?? '' };
}

/** One event not yet delivered, as Redis holds it: a row of the delivery list (operations/webhook-operations.ts). */
export interface QueuedWebhook {
  /** The audit stream entry's id (`<ms>-<seq>`); the event's webhook-id is `msg_<id>`. */
  readonly id: string;
  /** The stream entry's fields ([] when it was trimmed). */
  readonly fields: readonly string[];
  /** Failed attempts so far. */
  readonly attempts: number;
  /** The last failed attempt's status or cause ('' for none). */
  readonly lastError: string;
  /** When the next attempt is due (ms); undefined while one is being made. */
  readonly nextAttemptMs: number | undefined;
  /** The consumer (instance) making an attempt now; undefined while the event waits. */
  readonly holder: string | undefined;
}

/** Retry-now's outcome: made due now, being attempted right now (by `holder`), or no such event waiting. */
export type RetryNow =
  | { readonly outcome: 'scheduled' }
  | { readonly outcome: 'attempting'; readonly holder: string }
  | { readonly outcome: 'not_found' };

/** The delivery list and retry-now over the state above (Redis only: webhooks need Redis). */
export interface WebhookQueue {
  /**
   * Events attempted and not settled, oldest first: first attempts in flight (the group's pending list)
   * and events waiting for a retry (or being retried). At most `limit`, after the id `after` (exclusive);
   * `more` when others may follow. `nowMs` tells a live claim from one whose holder stopped.
   */
  list(page: {
    readonly after?: string | undefined;
    readonly limit: number;
    readonly nowMs: number;
  }): Promise<{ readonly events: readonly QueuedWebhook[]; readonly more: boolean }>;
  /** Makes a waiting event due at `nowMs`, in one script: never while an instance attempts it. */
  retryNow(id: string, nowMs: number): Promise<RetryNow>;
}

/**
 * How far past its size the stream may grow while the consumer group is behind: past it, the oldest
 * entries go even unread, and each one lost is counted in `webhook:lost` (the delivery logs and counts
 * it as given up). A group that nobody reads any more (webhooks turned off) so never holds the stream
 * forever.
 */
export const AUDIT_HARD_CAP_FACTOR = 10;

/**
 * A Lua function for the audit stream's writers (key changes, owner settings, appended entries):
 * `trimAudit(stream, max)` trims the stream to `max` entries, never removing an entry the `webhooks`
 * group has not finished (unread, pending, or waiting for a retry), unless the stream is past
 * max × AUDIT_HARD_CAP_FACTOR; then the unfinished entries removed are counted in `webhook:lost`.
 * At most 1,000 entries go per call (a write), so a group that catches up is trimmed over the next
 * writes, never in one long script. The helper names derive from the stream's (`…{keystore}:audit`).
 */
export const AUDIT_TRIM_LUA = `${ID_LESS_LUA}
local function idNext(a)
  local m, s = string.match(a, '^(%d+)-(%d+)$')
  return m .. '-' .. (tonumber(s) + 1)
end
local function webhookFloor(stream)
  local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', stream)
  if not ok then return nil end
  local floor, read, entriesRead = nil, nil, nil
  for _, g in ipairs(groups) do
    local info = {}
    for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
    if info['name'] == '${WEBHOOK_GROUP}' then
      read = info['last-delivered-id']
      entriesRead = tonumber(info['entries-read'])
      floor = idNext(read)
      local p = redis.call('XPENDING', stream, '${WEBHOOK_GROUP}')
      if tonumber(p[1]) > 0 and idLess(p[2], floor) then floor = p[2] end
      local base = string.sub(stream, 1, -6)
      local r = redis.call('ZRANGE', base .. 'webhook:retry-order', 0, 0, 'WITHSCORES')
      if r[2] then
        local oldest = string.format('%d', tonumber(r[2])) .. '-0'
        if idLess(oldest, floor) then floor = oldest end
      end
    end
  end
  return floor, read, entriesRead
end
local function trimAudit(stream, max)
  local excess = redis.call('XLEN', stream) - max
  if excess <= 0 then return end
  local step = math.min(excess, 1000)
  local floor, read, entriesRead = webhookFloor(stream)
  local cut
  if floor == nil then
    cut = redis.call('XRANGE', stream, '-', '+', 'COUNT', step)
  else
    cut = redis.call('XRANGE', stream, '-', '(' .. floor, 'COUNT', step)
    if #cut == 0 and excess > max * (${AUDIT_HARD_CAP_FACTOR} - 1) then
      -- Past the hard cap. Entries the group never read are counted here; one pending or waiting for
      -- a retry is counted by the delivery when it finds its entry gone.
      cut = redis.call('XRANGE', stream, '-', '+', 'COUNT', step)
      local lost = 0
      for _, e in ipairs(cut) do if idLess(read, e[1]) then lost = lost + 1 end end
      if lost > 0 then
        redis.call('INCRBY', string.sub(stream, 1, -6) .. 'webhook:lost', lost)
        -- The group moves past what it can no longer read, so its lag (keygate_webhook_pending) stays exact.
        local last = cut[#cut][1]
        if entriesRead then
          redis.call('XGROUP', 'SETID', stream, '${WEBHOOK_GROUP}', last, 'ENTRIESREAD', entriesRead + lost)
        else
          redis.call('XGROUP', 'SETID', stream, '${WEBHOOK_GROUP}', last)
        end
      end
    end
  end
  if #cut > 0 then redis.call('XTRIM', stream, 'MINID', idNext(cut[#cut][1])) end
end
`;

/** The audit stream's append outside a key change: the entry and the same trim, atomically. KEYS: 1 stream. ARGV: 1 entry JSON · 2 max. */
export const AUDIT_APPEND_SCRIPT = `${AUDIT_TRIM_LUA}
redis.call('XADD', KEYS[1], '*', 'entry', ARGV[1])
trimAudit(KEYS[1], tonumber(ARGV[2]))
return 1`;
