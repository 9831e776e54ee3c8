// Tested in test/e2e/usage-batching.test.ts.
import type { KeyUsage } from '../../../keys/key-usage.js';
import { OUTCOMES, RINGS } from '../../../keys/outcome-usage.js';

/**
 * Writes one key's (or owner's) usage batch (usage-counter.ts) into its usage and outcomes hashes, atomically
 * and at most once: a batch retried after its reply was lost (deadline, dropped connection) carries the
 * same seq, and the script skips a seq this process already wrote.
 *
 * KEYS[1]  {prefix}{<apiKey>}:usage   hash: "last" = epoch ms, "YYYY-MM-DD" = admitted that UTC day,
 *                                     "x:YYYY-MM-DD" = cost spent that day beyond one per request,
 *                                     "b:<process id>" = "<last seq written> <epoch ms>" (batch marks)
 *          (an owner's: {prefix}{owner:<owner>}:usage, the batch marks alone)
 * KEYS[2]  {prefix}{<apiKey>}:outcomes  (or {prefix}{owner:<owner>}:outcomes) the rings of counts by outcome
 *                                     (keys/outcome-usage.ts): "<tag><bucket % size>" = "<bucket> <count> …",
 *                                     at most RING_SLOTS fields whatever the traffic
 * ARGV: mark field, seq, last used (ms; 0: none in this batch), oldest day kept, now (ms), then field, count
 *       pairs: a day, "x:<day>", or a pending outcome count "o<tag><bucket>:<outcome>" (tag m, h or d)
 * Returns 1 when written, 0 when that batch had already been written.
 *
 * "last" only moves forward, so a replica flushing an older batch late cannot pull it back; a ring slot
 * likewise: a count for an older bucket than the slot holds is dropped (that bucket left the window),
 * one for a newer bucket replaces the slot. When a day field (or a day slot) is new, days that fell out
 * of the kept range go (string order is date order), and so do the marks of processes not heard from for
 * a day (restarted replicas).
 */
export const USAGE_FLUSH_SCRIPT = `
local seen = redis.call('HGET', KEYS[1], ARGV[1])
if seen and tonumber(string.match(seen, '^%d+')) >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ' ' .. ARGV[5])
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0') or 0
if tonumber(ARGV[3]) > last then redis.call('HSET', KEYS[1], 'last', ARGV[3]) end
local fresh = false
local sizes = { m = ${RINGS.minute.size}, h = ${RINGS.hour.size}, d = ${RINGS.day.size} }
for i = 6, #ARGV, 2 do
  local tag, bucket, outcome = string.match(ARGV[i], '^o(%a)(%d+):(%d)$')
  if tag then
    bucket = tonumber(bucket)
    local field = tag .. string.format('%d', bucket % sizes[tag])
    local counts = {${OUTCOMES.map(() => '0').join(', ')}}
    local held = -1
    local value = redis.call('HGET', KEYS[2], field)
    if value then
      local parts = {}
      for p in string.gmatch(value, '%d+') do parts[#parts + 1] = tonumber(p) end
      held = parts[1] or -1
      if held == bucket then for j = 1, #counts do counts[j] = parts[j + 1] or 0 end end
    end
    if held <= bucket then
      if held < bucket and tag == 'd' then fresh = true end
      local o = tonumber(outcome) + 1
      counts[o] = counts[o] + tonumber(ARGV[i + 1])
      for j = 1, #counts do counts[j] = string.format('%d', counts[j]) end
      redis.call('HSET', KEYS[2], field, string.format('%d', bucket) .. ' ' .. table.concat(counts, ' '))
    end
  elseif redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) == tonumber(ARGV[i + 1]) then
    fresh = true
  end
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
