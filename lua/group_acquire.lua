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
-- errors   WRONGTYPE when G is not a hash: nothing is changed
-- #include now.lua
local now = server_now()
local lease = tonumber(ARGV[1])
local me = ARGV[2]
local existed = redis.call('exists', KEYS[1]) == 1
local wait = -1
for i = 3, existed and #ARGV or 2 do
  local holder = redis.call('hget', KEYS[1], ARGV[i])
  if holder and holder ~= me then
    local exp = tonumber(redis.call('hget', KEYS[1],
                                    ARGV[i] .. ':' .. holder .. ':expire_time'))
    if exp and exp > now and exp - now > wait then
      wait = exp - now
    end
  end
end
if wait >= 0 then
  return wait
end
for i = 3, #ARGV do
  local f = ARGV[i]
  local holder = redis.call('hget', KEYS[1], f)
  if holder and holder ~= me then -- an expired holder's entries go
    redis.call('hdel', KEYS[1], f .. ':' .. holder .. ':expire_time',
               f .. ':' .. holder .. ':lock_count')
  end
  redis.call('hset', KEYS[1], f, me)
  local ef = f .. ':' .. me .. ':expire_time'
  local exp = tonumber(redis.call('hget', KEYS[1], ef))
  if not exp or exp < now + lease then
    redis.call('hset', KEYS[1], ef, now + lease)
  end
  redis.call('hincrby', KEYS[1], f .. ':' .. me .. ':lock_count', 1)
end
if not existed or redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], lease)
end
return nil
