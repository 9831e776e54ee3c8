// Tested in test/e2e/usage-batching.test.ts.
import type { KeyUsage } from '../../../keys/key-usage.js';

/**
 * Writes one key's usage batch (usage-counter.ts) into its usage hash, atomically and at most
 * once: a batch retried after its reply was lost (deadline, dropped connection) carries the
 * same seq, and the script skips a seq this process already wrote.
 *
 * KEYS[1]  {prefix}{<apiKey>}:usage   hash: "last" = epoch ms, "YYYY-MM-DD" = admitted that UTC day,
 *                                     "x:YYYY-MM-DD" = cost spent that day beyond one per request,
 *                                     "b:<process id>" = "<last seq written> <epoch ms>" (batch marks)
 * ARGV: mark field, seq, last used (ms), oldest day kept, now (ms), then day, count pairs
 * Returns 1 when written, 0 when that batch had already been written.
 *
 * "last" only moves forward, so a replica flushing an older batch late cannot pull it back.
 * When a day field is new, days that fell out of the kept range go (string order is date
 * order), and so do the marks of processes not heard from for a day (restarted replicas).
 */
export const USAGE_FLUSH_SCRIPT = `
local seen = redis.call('HGET', KEYS[1], ARGV[1])
if seen and tonumber(string.match(seen, '^%d+')) >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[5])
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0') or 0
if tonumber(ARGV[3]) > last then redis.call('HSET', KEYS[1], 'last', ARGV[3]) end
local fresh = false
for i = 6, #ARGV, 2 do
  if redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) == tonumber(ARGV[i + 1]) then fresh = true end
end
if fresh then
  local stale = tonumber(ARGV[5]) - 86400000
  for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
    if string.match(field, '^%d%d%d%d%-%d%d%-%d%d$') then
      if field < ARGV[4] then redis.call('HDEL', KEYS[1], field) end
    elseif string.sub(field, 1, 2) == 'x:' then
      if string.sub(field, 3) < ARGV[4] then redis.call('HDEL', KEYS[1], field) end
    elseif string.sub(field, 1, 2) == 'b:' then
      local at = tonumber(string.match(redis.call('HGET', KEYS[1], field) or '', ' (%d+)$') or '0') or 0
      if at < stale then redis.call('HDEL', KEYS[1], field) end
    end
  end
end
return 1
`;

/** A usage hash as KeyUsage: "last" and the day fields; batch marks and anything else are ignored. */
export function parseUsageHash(hash: Record<string, string>): KeyUsage {
  const { last, ...days } = hash;
  const perDay: Record<string, number> = {};
  const extraCostPerDay: Record<string, number> = {};
  for (const [day, n] of Object.entries(days)) {
    if (/^\d{4}-\d{2}-\d{2}$/.test(day)) perDay[day] = Number(n);
    else if (/^x:\d{4}-\d{2}-\d{2}$/.test(day)) extraCostPerDay[day.slice(2)] = Number(n);
  }
  return {
    lastUsedAtMs: last === undefined ? undefined : Number(last),
    perDay,
    ...(Object.keys(extraCostPerDay).length > 0 && { extraCostPerDay }),
  };
}
