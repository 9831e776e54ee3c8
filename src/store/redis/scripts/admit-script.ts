// Tested in test/e2e/admit-script.test.ts.
import { CREDITS_LUA } from './credits-script.js';
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
 * a key with an owner, whose own bucket and credits then share the slot; request-state.ts `admitStateOf`):
 *   1            the nonce                  replay guard, SET NX PX
 *   2..n+1       each budget's state        "<TAT µs>:<interval µs it was written under>", PX until it passes; the
 *                                           key's first, then its owner's (a plain number: written under the interval in force)
 *   n+2..n+m+1   each credits' balance      hash r p g s i (credits-script.ts); the key's first, then its owner's
 * ARGV: nonce TTL ms, cost, n, then per budget: interval µs (> 0), burst; then per credits: set's gen,
 *       set's remaining, refill amount, interval code (0 none, 1 day, 2 month)
 * Returns {0, 0, n, per budget: remaining, resetUs, 0, per credits: left, refill in s (-1: none), reached zero 0/1} admitted ·
 *         {1} replay ·
 *         {2, index of the first budget without room, n, per budget: remaining, resetUs, retryAfterUs, per credits: left, refill in s, 0} limited ·
 *         {3, index of the first credits without the cost, n, the same} exhausted.
 * Credits are checked after the budgets and before the nonce: a request refused for either spends nothing
 * and burns no nonce. "Reached zero" is reported by the one spend that took a balance from the cost to 0,
 * so a `key.credits_exhausted` event is raised once per transition however many instances spend.
 */
export const ADMIT_SCRIPT = `${CREDITS_LUA}
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now_sec = tonumber(t[1])
local cost = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local m = #KEYS - 1 - n
local tats, nexts, intervals, caps = {}, {}, {}, {}
local refused = -1
for i = 1, n do
  local interval = tonumber(ARGV[2 + 2 * i])
  local raw = redis.call('GET', KEYS[i + 1])
  local tat, was = 0, interval
  if raw then
    local t, w = string.match(raw, '^(%d+):(%d+)$')
    if t then tat, was = tonumber(t), tonumber(w) else tat = tonumber(raw) or 0 end
  end
  intervals[i] = interval
  caps[i] = tonumber(ARGV[3 + 2 * i]) * interval
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
local bals, ivs = {}, {}
local exhausted = -1
for j = 1, m do
  local a = 3 + 2 * n + 4 * (j - 1)
  ivs[j] = tonumber(ARGV[a + 4])
  bals[j] = credit_balance(KEYS[1 + n + j], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), ivs[j], now_sec)
  if exhausted < 0 and bals[j][1] < cost then exhausted = j - 1 end
end
local spend = refused < 0 and exhausted < 0
local out = {2, refused, n}
if refused < 0 and exhausted >= 0 then out = {3, exhausted, n} end
if spend then
  if not redis.call('SET', KEYS[1], '1', 'PX', ARGV[1], 'NX') then
    return {1}
  end
  out[1] = 0
  out[2] = 0
end
for i = 1, n do
  if spend then
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
for j = 1, m do
  local b = bals[j]
  local left = b[1]
  local zero = 0
  if spend then
    left = b[1] - cost
    if b[1] > 0 and left == 0 then zero = 1 end
    credit_write(KEYS[1 + n + j], b, left)
  end
  out[#out + 1] = left
  out[#out + 1] = credit_refill_in(b, ivs[j], now_sec)
  out[#out + 1] = zero
end
return out
`;
