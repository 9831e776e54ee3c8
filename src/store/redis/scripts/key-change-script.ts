// Tested in test/e2e/store-contract.test.ts, test/e2e/key-races.test.ts.
import { AUDIT_TRIM_LUA } from '../../webhook-queue.js';
/**
 * The Redis side of Store.commitKeyChanges: a batch of compare-and-set key
 * writes, checked and applied in one atomic script together with the indexes,
 * the change messages and the audit entries, so no other write can land between
 * a version check and its write (no lost update), and a batch
 * (an import) is all or nothing. The checks are key-write.ts `checkKeyWrites`
 * rule for rule: the memory store runs that function, so both stores decide alike.
 *
 * Every name carries the one hash tag `{keystore}` (redis-key-layout.ts), so on a
 * Cluster the whole script runs in one slot. Owner indexes are named from
 * ARGV[1] + owner; they share the tag, so they are local to the slot's node.
 *
 * KEYS: 1 index (sorted set of apiKeys) · 2 ids (hash id → apiKey) · 3 version counter ·
 *       4 audit stream · 4+i the record hash of write i (v, json, id, owner, state, fps) ·
 *       4+n+1 the fingerprints hash (secret fingerprint → apiKey, keys/secret-fingerprint.ts) ·
 *       optionally 4+n+2 the commit's claim (an Idempotency-Key, key-write.ts KeyClaim)
 * ARGV: 1 owner-index prefix · 2 change channel · 3 n writes · 4 n audit entries ·
 *       then 8 per write: apiKey, expected version ('' = unconditional), 'put'|'del', json, id, owner, state,
 *       the record's secret fingerprints (space-separated; a write replaces the ones it had) ·
 *       then one JSON string per audit entry · then how long a deleted key's owner is kept (ms) ·
 *       then, with a claim, its value and TTL (ms) · last, how many entries the audit stream keeps
 * Returns {'ok', version of each write (0 for a delete)} · {'version'|'revoked', apiKey, current version} ·
 *         {'id_taken', apiKey, current version, id, holder} · {'secret_taken', apiKey, current version, '', holder} ·
 *         {'claimed', value already there}
 */
export const KEY_CHANGE_SCRIPT = `${AUDIT_TRIM_LUA}
local n = tonumber(ARGV[3])
local na = tonumber(ARGV[4])
local W = 8
local fpIndex = KEYS[4 + n + 1]
local claim = KEYS[4 + n + 2]
if claim then
  local there = redis.call('GET', claim)
  if there then return {'claimed', there} end
end
local heads = {}
local freed = {}
local freedFps = {}
for i = 1, n do
  local a = 5 + (i - 1) * W
  local h = redis.call('HMGET', KEYS[4 + i], 'v', 'id', 'owner', 'state', 'fps')
  heads[i] = h
  if h[1] and (ARGV[a + 2] == 'del' or ARGV[a + 4] ~= h[2]) then freed[h[2]] = true end
  if h[5] then for fp in string.gmatch(h[5], '%S+') do freedFps[fp] = true end end
end
local claimed = {}
local claimedFps = {}
for i = 1, n do
  local a = 5 + (i - 1) * W
  local apiKey, expect, op, id, state = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 4], ARGV[a + 6]
  local h = heads[i]
  local v = tonumber(h[1] or '0')
  if expect ~= '' then
    if tonumber(expect) ~= v then return {'version', apiKey, v} end
    if op == 'put' and h[4] == 'revoked' and state ~= 'revoked' then return {'revoked', apiKey, v} end
    if op == 'put' then
      local holder = claimed[id]
      if not holder and not freed[id] then holder = redis.call('HGET', KEYS[2], id) end
      if holder and holder ~= apiKey then return {'id_taken', apiKey, v, id, holder} end
      claimed[id] = apiKey
      -- A secret names one key: a leak report then finds every key its secret admits. Only a secret the
      -- key does not hold yet is checked, so keys that shared one before can still be changed and revoked.
      local own = {}
      if h[5] then for fp in string.gmatch(h[5], '%S+') do own[fp] = true end end
      for fp in string.gmatch(ARGV[a + 7], '%S+') do
        local has = claimedFps[fp]
        if not has and own[fp] then has = apiKey end
        if not has and not freedFps[fp] then has = redis.call('HGET', fpIndex, fp) end
        if has and has ~= apiKey then return {'secret_taken', apiKey, v, '', has} end
        claimedFps[fp] = apiKey
      end
    end
  end
end
local out = {'ok'}
for i = 1, n do
  local a = 5 + (i - 1) * W
  local apiKey, op, json, id, owner, state = ARGV[a], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
  local fps = ARGV[a + 7]
  local h = heads[i]
  if h[1] then
    if h[2] and redis.call('HGET', KEYS[2], h[2]) == apiKey then redis.call('HDEL', KEYS[2], h[2]) end
    if h[3] and h[3] ~= '' then redis.call('ZREM', ARGV[1] .. h[3], apiKey) end
    if h[5] then
      for fp in string.gmatch(h[5], '%S+') do
        if redis.call('HGET', fpIndex, fp) == apiKey then redis.call('HDEL', fpIndex, fp) end
      end
    end
  end
  if op == 'del' then
    redis.call('DEL', KEYS[4 + i])
    redis.call('ZREM', KEYS[1], apiKey)
    -- The deleted key's owner, kept as long as its nonces may live ({keystore}:deleted:<apiKey>, named
    -- from the index's name: same slot): a re-creation under another owner is refused meanwhile.
    if h[1] then
      redis.call('SET', string.sub(KEYS[1], 1, -6) .. 'deleted:' .. apiKey, h[3] or '', 'PX', ARGV[5 + n * W + na])
    end
    out[i + 1] = 0
  else
    local ver = redis.call('INCR', KEYS[3])
    redis.call('HSET', KEYS[4 + i], 'v', ver, 'json', json, 'id', id, 'owner', owner, 'state', state, 'fps', fps)
    for fp in string.gmatch(fps, '%S+') do redis.call('HSET', fpIndex, fp, apiKey) end
    redis.call('HSET', KEYS[2], id, apiKey)
    redis.call('ZADD', KEYS[1], 0, apiKey)
    if owner ~= '' then redis.call('ZADD', ARGV[1] .. owner, 0, apiKey) end
    out[i + 1] = ver
  end
  redis.call('PUBLISH', ARGV[2], apiKey)
end
for j = 1, na do
  redis.call('XADD', KEYS[4], '*', 'entry', ARGV[4 + n * W + j])
end
if na > 0 then trimAudit(KEYS[4], tonumber(ARGV[#ARGV])) end
if claim then
  local c = 5 + n * W + na
  redis.call('SET', claim, (out[2] or 0) .. ' ' .. ARGV[c + 1], 'PX', ARGV[c + 2])
end
return out
`;
