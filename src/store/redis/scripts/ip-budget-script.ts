// Tested in test/e2e/store-contract.test.ts (spendFailedAuth, both stores), test/e2e/redis-cluster.test.ts, test/e2e/metering.test.ts.
/**
 * The Redis side of Store.spendFailedAuth: budgets.ts `spendFailure` line for line, on
 * Redis's clock, so every instance judges an IP's budget by one time. The caller announces a block
 * on the ip-blocks channel (redis-store.ts), so instances that never saw this IP fail refuse it too.
 *
 * KEYS: 1  {prefix}{ipfail:<ip or IPv6 /64>}   the IP's GCRA state (µs), PX until it passes; its own slot
 * ARGV: interval µs (> 0), burst
 * Returns { spent (1: the budget had room for this failure, 0: it was empty), µs until the IP may fail once
 * more (0: its budget is not empty) }.
 */
export const IP_BUDGET_SCRIPT = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2]) * interval
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
if tat - now > capacity then
  tat = now + capacity
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil(capacity / 1000))
end
local spent = 0
if tat + interval - now <= capacity then
  spent = 1
  tat = tat + interval
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000))
end
local blocked = tat + interval - now - capacity
if blocked < 0 then blocked = 0 end
return { spent, blocked }
`;
