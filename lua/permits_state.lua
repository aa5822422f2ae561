-- Expirable-permit semaphore: counts, and one permit's remaining lease.
-- KEYS[1]  the semaphore N
-- KEYS[2]  {N}:timeout
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  channel redisson_sc:{N}
-- ARGV[3]  a permit id, or "" for none
-- reply    {available, acquired, lease of ARGV[3] in ms (-1 never, -2
--          unknown or expired)}; expired permits go back to the pool first
-- errors   WRONGKIND when N holds another kind (kind.lua names it)
-- #include kind.lua
local found = name_kind(KEYS[1])
if found ~= 'none' and found ~= 'count' then
  return wrong_kind(found, 'an expirable-permit semaphore')
end
-- #include now.lua
local now = server_now()
local expired = redis.call('zrangebyscore', KEYS[2], 0, now)
if #expired > 0 then
  for _, id in ipairs(expired) do
    redis.call('zrem', KEYS[2], id)
  end
  local available = redis.call('incrby', KEYS[1], #expired)
  if available > 0 then
    redis.call(ARGV[1], ARGV[2], available)
  end
end
local lease = -2
if ARGV[3] ~= '' then
  local expiry = redis.call('zscore', KEYS[2], ARGV[3])
  if expiry then
    expiry = tonumber(expiry)
    lease = expiry >= 922337203685477 and -1 or expiry - now
  end
end
return {tonumber(redis.call('get', KEYS[1]) or '0'), redis.call('zcard', KEYS[2]), lease}
