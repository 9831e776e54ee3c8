// Tested in test/e2e/admit-script.test.ts.
/**
 * The Redis side of Store.admit for a key with a rate limit: limit check and replay guard
 * in one atomic script, so a forwarded request still costs one round trip (EVALSHA).
 * A key without a limit needs no script: its admission is the nonce's SET NX PX alone
 * (redis-store.ts). Usage is not written here: it is counted in process and flushed in
 * batches (usage-flush-script.ts), which took HSET + HINCRBY off every request (issue 29).
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
 * ARGV: nonce TTL ms, GCRA interval µs (> 0), burst
 * Returns {0, remaining, resetUs} admitted · {1} replay · {2, 0, resetUs, retryAfterUs} limited.
 */
export const ADMIT_SCRIPT = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
if tat < now then tat = now end
local nextTat = tat + interval
local capacity = burst * interval
if nextTat - now > capacity then
  return {2, 0, tat - now, nextTat - now - capacity}
end
if not redis.call('SET', KEYS[1], '1', 'PX', ARGV[1], 'NX') then
  return {1}
end
redis.call('SET', KEYS[2], string.format('%.0f', nextTat), 'PX', math.ceil((nextTat - now) / 1000))
return {0, math.floor((capacity - (nextTat - now)) / interval), nextTat - now}
`;
