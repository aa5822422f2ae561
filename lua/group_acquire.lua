-- Grouped multi-lock (Redisson's RedissonFasterMultiLock): all the values
-- of one group, or none, in one script.
-- KEYS[1]  the group's hash G: per value field F (its encoded bytes'
--          HighwayHash-128, base64) F -> holder "U:T", and per holder
--          F:U:T:expire_time (ms, server clock) and F:U:T:lock_count
-- ARGV[1]  lease in ms
-- ARGV[2]  owner "U:T"
-- ARGV[3..] the fields
-- reply    nil when every value was taken (or re-entered: counts + 1);
--          otherwise how long at most to wait in ms: the latest expiry
--          among the values other owners hold
-- errors   WRONGKIND when G is a lock's or a read-write lock's hash,
--          WRONGTYPE when G is not a hash: nothing is changed
-- #include now.lua
-- #include group.lua
-- #include kind.lua
local refused = not_group_hash(KEYS[1])
if refused then
  return refused
end
local now = server_now()
local lease = tonumber(ARGV[1])
local me = ARGV[2]
local fields = argv_from(3)
local existed = redis.call('exists', KEYS[1]) == 1
local holders = existed and hmget_all(KEYS[1], fields) or {}
local others = {}
for i = 1, #fields do
  if holders[i] and holders[i] ~= me then
    others[#others + 1] = fields[i] .. ':' .. holders[i] .. ':expire_time'
  end
end
if #others > 0 then
  local wait = -1
  for _, e in ipairs(hmget_all(KEYS[1], others)) do
    e = tonumber(e)
    if e and e > now and e - now > wait then
      wait = e - now
    end
  end
  if wait >= 0 then
    return wait
  end
  local gone = {} -- expired holders' entries go
  for i = 1, #fields do
    if holders[i] and holders[i] ~= me then
      gone[#gone + 1] = fields[i] .. ':' .. holders[i] .. ':expire_time'
      gone[#gone + 1] = fields[i] .. ':' .. holders[i] .. ':lock_count'
    end
  end
  hdel_all(KEYS[1], gone)
end
local names = {}
for i = 1, #fields do
  names[#names + 1] = fields[i] .. ':' .. me .. ':expire_time'
  names[#names + 1] = fields[i] .. ':' .. me .. ':lock_count'
end
local mine = existed and hmget_all(KEYS[1], names) or {}
local sets = {}
for i = 1, #fields do
  local e, n = tonumber(mine[2 * i - 1]), tonumber(mine[2 * i])
  sets[#sets + 1] = fields[i]
  sets[#sets + 1] = me
  sets[#sets + 1] = names[2 * i - 1]
  sets[#sets + 1] = (e and e > now + lease) and e or now + lease
  sets[#sets + 1] = names[2 * i]
  sets[#sets + 1] = (n or 0) + 1
end
hset_all(KEYS[1], sets)
if not existed or redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], lease)
end
return nil
