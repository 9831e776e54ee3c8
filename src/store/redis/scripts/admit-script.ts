// Tested in test/e2e/admit-script.test.ts.
/**
 * The Redis side of Store.admit for a request that some budget applies to: every budget's check
 * with the route's cost (budgets.ts), then the replay guard, in one atomic script, so a forwarded
 * request still costs one round trip (EVALSHA). A request no budget applies to needs no script:
 * its admission is the nonce's SET NX PX alone (redis-store.ts). Usage is not written here: it is
 * counted in process and flushed in batches (usage-flush-script.ts), which took HSET + HINCRBY off
 * every request.
 *
 * All or nothing: the cost is spent from every budget only when every budget has room
 * and the nonce is new; a refusal by any budget writes nothing, so the token is not burnt and no
 * other budget pays for it.
 *
 * The clock is Redis's own (TIME), so every replica judges a budget by the same time however far
 * their clocks drift. The arithmetic is budgets.ts `chargeBudgets` line for line, on integer
 * microseconds (exact in Lua's doubles), so the embedded store and Redis decide alike (the store
 * contract suite checks both against the same cases).
 *
 * KEYS (one hash slot: every name carries the key's state tag, {<apiKey>}, or {owner:<owner>} for
 * a key with an owner, whose own bucket then shares the slot; redis-store.ts `stateOf`):
 *   1      the nonce                  replay guard, SET NX PX
 *   2..n+1 each budget's state        "<TAT µs>:<interval µs it was written under>", PX until it passes; the key's
 *                                     first, then its owner's (a plain number: written under the interval in force)
 * ARGV: nonce TTL ms, cost, then per budget: interval µs (> 0), burst
 * Returns {0, 0, per budget: remaining, resetUs, 0} admitted · {1} replay ·
 *         {2, index of the first budget without room, per budget: remaining, resetUs, retryAfterUs} limited.
 */
export const ADMIT_SCRIPT = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[2])
local n = #KEYS - 1
local tats, nexts, intervals, caps = {}, {}, {}, {}
local refused = -1
for i = 1, n do
  local interval = tonumber(ARGV[1 + 2 * i])
  local raw = redis.call('GET', KEYS[i + 1])
  local tat, was = 0, interval
  if raw then
    local t, w = string.match(raw, '^(%d+):(%d+)$')
    if t then tat, was = tonumber(t), tonumber(w) else tat = tonumber(raw) or 0 end
  end
  intervals[i] = interval
  caps[i] = tonumber(ARGV[2 + 2 * i]) * interval
  if tat < now then
    tat = now
  elseif was ~= interval or tat - now > caps[i] then
    -- Written under another limit: the units spent are kept (never more than this burst) and written back
    -- with this interval, so they drain at this rate (budgets.ts tatNow, the same arithmetic in the same order).
    if was ~= interval and was > 0 then tat = now + math.ceil((tat - now) / was * interval) end
    if tat - now > caps[i] then tat = now + caps[i] end
    redis.call('SET', KEYS[i + 1], string.format('%.0f:%.0f', tat, interval), 'PX', math.ceil((tat - now) / 1000))
  end
  tats[i] = tat
  nexts[i] = tat + cost * interval
  if refused < 0 and nexts[i] - now > caps[i] then refused = i - 1 end
end
local out = {2, refused}
if refused < 0 then
  if not redis.call('SET', KEYS[1], '1', 'PX', ARGV[1], 'NX') then
    return {1}
  end
  out[1] = 0
  out[2] = 0
end
for i = 1, n do
  if refused < 0 then
    redis.call('SET', KEYS[i + 1], string.format('%.0f:%.0f', nexts[i], intervals[i]), 'PX', math.ceil((nexts[i] - now) / 1000))
    out[#out + 1] = math.floor((caps[i] - (nexts[i] - now)) / intervals[i])
    out[#out + 1] = nexts[i] - now
    out[#out + 1] = 0
  else
    local left = math.floor((caps[i] - (tats[i] - now)) / intervals[i])
    local wait = nexts[i] - now - caps[i]
    out[#out + 1] = left < 0 and 0 or left
    out[#out + 1] = tats[i] - now
    out[#out + 1] = wait < 0 and 0 or wait
  end
end
return out
`;
