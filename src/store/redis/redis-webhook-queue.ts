// Tested in test/e2e/webhook-deliveries.test.ts.
import { ID_LESS_LUA, parseAttempts, WEBHOOK_GROUP, webhookKeys, type WebhookQueue } from '../webhook-queue.js';
import type { RedisClient } from './connection/redis-connection.js';

/**
 * The delivery list's page, read in one script so it is one moment's state. KEYS (webhook-queue.ts): 1 audit
 * stream · 2 retry schedule · 3 attempts · 4 holder · 5 retry order. ARGV: 1 group · 2 after ('' = from the
 * oldest) · 3 limit · 4 now (ms).
 * The page merges the group's pending list (first attempts) and the retry order (both by id), sorted by id and
 * cut at `limit`. The retry order's members of one millisecond are ordered as text, so a cut inside a
 * millisecond takes that millisecond whole (at most one script's audit entries). Returns {more, rows}, a row
 * {id, fields, attempts state, next attempt ms or '', holder or ''}.
 */
const LIST = `${ID_LESS_LUA}
local after, limit, now = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local ok, pending = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], after == '' and '-' or '(' .. after, '+', limit)
if not ok then return {0, {}} end
local more = #pending == limit
local rows, seen = {}, {}
for _, p in ipairs(pending) do rows[#rows + 1] = {p[1], p[2]} end
local function waiting(id)
  if not seen[id] and (after == '' or idLess(after, id)) then
    seen[id] = true
    rows[#rows + 1] = {id, false}
  end
end
local fromMs = '-inf'
if after ~= '' then
  local ms = string.match(after, '^(%d+)')
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], ms, ms)) do waiting(id) end
  fromMs = '(' .. ms
end
local later = redis.call('ZRANGEBYSCORE', KEYS[5], fromMs, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
for i = 1, #later, 2 do waiting(later[i]) end
if #later == 2 * limit then
  more = true
  local last = later[#later]
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], last, last)) do waiting(id) end
end
table.sort(rows, function(a, b) return idLess(a[1], b[1]) end)
if #rows > limit then more = true end
local out = {}
for i = 1, math.min(#rows, limit) do
  local id, consumer = rows[i][1], rows[i][2]
  local e = redis.call('XRANGE', KEYS[1], id, id)
  local fields = {}
  if e[1] then fields = e[1][2] end
  if consumer then
    out[#out + 1] = {id, fields, '', '', consumer}
  else
    local score = redis.call('ZSCORE', KEYS[2], id)
    if score then
      local holder = redis.call('HGET', KEYS[4], id)
      local state = redis.call('HGET', KEYS[3], id) or ''
      if holder and tonumber(score) > now then
        out[#out + 1] = {id, fields, state, '', holder}
      else
        out[#out + 1] = {id, fields, state, score, ''}
      end
    end
  end
end
return {more and 1 or 0, out}`;

/**
 * Retry-now: a waiting event made due now, in one script, so it cannot race an attempt into a duplicate (an
 * instance takes a due retry with a script too, webhook-delivery.ts TAKE_DUE). An event an instance holds (a
 * retry claimed until a time still to come, or a first attempt in the group's pending list) is left as it is.
 * KEYS as LIST. ARGV: 1 group · 2 id · 3 now (ms). Returns {'scheduled' | 'attempting' | 'not_found', holder}.
 */
const RETRY_NOW = `
local score = redis.call('ZSCORE', KEYS[2], ARGV[2])
if score then
  if tonumber(score) > tonumber(ARGV[3]) then
    local holder = redis.call('HGET', KEYS[4], ARGV[2])
    if holder then return {'attempting', holder} end
    redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
  end
  return {'scheduled', ''}
end
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if ok and p[1] then return {'attempting', p[1][2]} end
return {'not_found', ''}`;

/** The delivery list and retry-now on the key operations' connection (`run`: its command deadline). */
export function createRedisWebhookQueue(
  options: { prefix: string },
  deps: { client: RedisClient; run: <T>(command: () => Promise<T>) => Promise<T> },
): WebhookQueue {
  const names = webhookKeys(options.prefix);
  const keys = [names.stream, names.retry, names.attempts, names.holder, names.retryOrder];
  const script = (body: string, ...args: (string | number)[]) =>
    deps.run(() => deps.client.eval(body, keys.length, ...keys, ...args));
  return {
    async list({ after, limit, nowMs }) {
      const [more, rows] = (await script(LIST, WEBHOOK_GROUP, after ?? '', limit, nowMs)) as [
        number,
        Array<[string, string[], string, string, string]>,
      ];
      const events = rows.map(([id, fields, state, next, holder]) => {
        const { attempts, lastError } = parseAttempts(state);
        return {
          id,
          fields,
          attempts,
          lastError,
          nextAttemptMs: next === '' ? undefined : Number(next),
          holder: holder === '' ? undefined : holder,
        };
      });
      return { events, more: more === 1 };
    },
    async retryNow(id, nowMs) {
      const [outcome, holder] = (await script(RETRY_NOW, WEBHOOK_GROUP, id, nowMs)) as [string, string];
      if (outcome === 'attempting') return { outcome, holder };
      return { outcome: outcome === 'scheduled' ? 'scheduled' : 'not_found' };
    },
  };
}
