// Tested in test/e2e/admit-script.test.ts (the Lua period arithmetic against keys/credits.ts), test/e2e/store-contract.test.ts.
/**
 * Credits in Redis: the Lua of store/credits.ts, line for line, shared by the admit script (the spend)
 * and the two scripts below (a top-up, a read). A balance is a hash beside the admit step's other names,
 * in the same Cluster slot (`{<apiKey>}`, or `{owner:<owner>}` for a key with an owner and for the owner's
 * own credits), with the fields `r` (left), `p` (the refill period of `r`), `g`/`s`/`i` (the set it started
 * from: the record's setAt, remaining and interval). It is written only by these scripts, so a spend, a
 * refill and a top-up are each atomic; a top-up adds in the script (never a read, then a write from Node).
 *
 * Periods: 0 without a refill; the day number since the epoch; or year * 12 + month - 1 (days/civil
 * conversion after Howard Hinnant's algorithms, exact on integers in Lua's doubles).
 */
export const CREDITS_LUA = `
local function credit_period(iv, sec)
  if iv == 0 then return 0 end
  local days = math.floor(sec / 86400)
  if iv == 1 then return days end
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  return year * 12 + month - 1
end
local function credit_period_end(iv, p)
  if iv == 1 then return (p + 1) * 86400 end
  local nx = p + 1
  local year = math.floor(nx / 12)
  local month = nx % 12 + 1
  local y = month <= 2 and year - 1 or year
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (month + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5)
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return (era * 146097 + doe - 719468) * 86400
end
local function credit_balance(h, gen, set, amount, iv, now_sec)
  local st = redis.call('HMGET', h, 'r', 'p', 'g', 's', 'i')
  local r, p, g, s, i = tonumber(st[1]), tonumber(st[2]), tonumber(st[3]), tonumber(st[4]), tonumber(st[5])
  if r == nil or p == nil or g == nil or g < gen or (g == gen and (s ~= set or i ~= iv)) then
    r, g, s, i = set, gen, set, iv
    p = credit_period(iv, gen > 0 and math.floor(gen / 1000) or now_sec)
  end
  if iv ~= 0 then
    local cur = credit_period(iv, now_sec)
    if p < cur then r, p = amount, cur end
  end
  return {r, p, g, s, i}
end
local function credit_write(h, b, r)
  redis.call('HSET', h, 'r', string.format('%.0f', r), 'p', string.format('%.0f', b[2]),
    'g', string.format('%.0f', b[3]), 's', string.format('%.0f', b[4]), 'i', b[5])
end
local function credit_refill_in(b, iv, now_sec)
  if iv == 0 then return -1 end
  return credit_period_end(iv, b[2]) - now_sec
end
`;

/**
 * A top-up. KEYS: 1 the balance. ARGV: gen, set, amount, interval code, add, the most a balance may hold.
 * Returns {left, seconds until the refill (-1: none)}, or {-1} when the sum would pass the most (nothing written).
 */
export const CREDITS_TOPUP_SCRIPT = `${CREDITS_LUA}
if redis.replicate_commands then redis.replicate_commands() end
local now_sec = tonumber(redis.call('TIME')[1])
local iv = tonumber(ARGV[4])
local b = credit_balance(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), iv, now_sec)
local r = b[1] + tonumber(ARGV[5])
if r > tonumber(ARGV[6]) then return {-1} end
credit_write(KEYS[1], b, r)
return {r, credit_refill_in(b, iv, now_sec)}
`;

/** What is left now, writing nothing. KEYS: 1 the balance. ARGV: gen, set, amount, interval code. Returns {left, refill in s}. */
export const CREDITS_READ_SCRIPT = `${CREDITS_LUA}
local now_sec = tonumber(redis.call('TIME')[1])
local iv = tonumber(ARGV[4])
local b = credit_balance(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), iv, now_sec)
return {b[1], credit_refill_in(b, iv, now_sec)}
`;

/**
 * A home move's copy of a balance (docs/regions.md "Moving a home"): replaces the balance with the five fields
 * read at the old home, or removes it when there were none, in one step. KEYS: 1 the balance. ARGV: r, p, g, s, i,
 * or nothing. Returns 1 when a balance was written, 0 when removed.
 */
export const CREDITS_COPY_SCRIPT = `
redis.call('DEL', KEYS[1])
if #ARGV < 5 then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[1], 'p', ARGV[2], 'g', ARGV[3], 's', ARGV[4], 'i', ARGV[5])
return 1
`;
