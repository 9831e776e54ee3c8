/**
 * The Redis side of Store.admit: limit check, replay guard and usage in one
 * atomic script, so a forwarded request still costs one round trip (EVALSHA).
 *
 * The clock is Redis's own (TIME), so every replica judges a key's allowance
 * by the same time however far their clocks drift. The arithmetic is
 * rate-limit.ts `gcra` line for line, on integer microseconds (exact in Lua's
 * doubles), so the embedded store and Redis decide alike (the store contract
 * suite checks both against the same cases).
 *
 * KEYS (one hash slot: every name carries the {apiKey} hash tag):
 *   1  {prefix}{<apiKey>}:nonce:<nonce>   replay guard, SET NX PX
 *   2  {prefix}{<apiKey>}:tat             GCRA theoretical arrival time (µs), expires when it passes
 *   3  {prefix}{<apiKey>}:usage           hash: "last" = epoch ms, "YYYY-MM-DD" = admitted that UTC day
 * ARGV: nonce TTL ms, GCRA interval µs (0 = no limit), burst, days of usage kept
 * Returns {0, remaining, resetUs} admitted · {1} replay · {2, 0, resetUs, retryAfterUs} limited.
 */
export const ADMIT_SCRIPT = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now = sec * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[2])
local nextTat = 0
local remaining = 0
if interval > 0 then
  local burst = tonumber(ARGV[3])
  local tat = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
  if tat < now then tat = now end
  nextTat = tat + interval
  local capacity = burst * interval
  if nextTat - now > capacity then
    return {2, 0, tat - now, nextTat - now - capacity}
  end
  remaining = math.floor((capacity - (nextTat - now)) / interval)
end
if not redis.call('SET', KEYS[1], '1', 'PX', ARGV[1], 'NX') then
  return {1}
end
if interval > 0 then
  redis.call('SET', KEYS[2], string.format('%.0f', nextTat), 'PX', math.ceil((nextTat - now) / 1000))
end
-- UTC calendar day from days since 1970-01-01 (the proleptic Gregorian civil-from-days conversion).
local function civil(days)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02d', y, m, d)
end
local today = math.floor(sec / 86400)
redis.call('HSET', KEYS[3], 'last', string.format('%.0f', math.floor(now / 1000)))
if redis.call('HINCRBY', KEYS[3], civil(today), 1) == 1 then
  -- First request of the day: drop days that fell out of the kept range (string order is date order).
  local oldest = civil(today - tonumber(ARGV[4]) + 1)
  for _, field in ipairs(redis.call('HKEYS', KEYS[3])) do
    if field ~= 'last' and field < oldest then redis.call('HDEL', KEYS[3], field) end
  end
end
if interval > 0 then return {0, remaining, nextTat - now} end
return {0}
`;
