-- Semaphore (both kinds): set the total number of permits, whatever it was
-- (Redisson's setPermits).
-- KEYS[1]  the semaphore N
-- KEYS[2]  the expirable-permit semaphore's {N}:timeout; absent for the
--          plain semaphore, which keeps no record of the permits taken: its
--          total is what is available
-- ARGV[1]  permits (>= 0)
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  channel redisson_sc:{N}
-- reply    the available count after (below 0 when more permits are taken
--          than the new total); when it changed, waiters are told the total
-- A count that exists keeps its TTL.
local available = redis.call('get', KEYS[1])
if available == false then
  redis.call(ARGV[2], ARGV[3], ARGV[1]) -- first: an ACL refusal changes nothing
  redis.call('set', KEYS[1], ARGV[1])
  return tonumber(ARGV[1])
end
local taken = 0
if #KEYS == 2 then
  taken = redis.call('zcount', KEYS[2], 0, '+inf')
end
local delta = tonumber(ARGV[1]) - (taken + tonumber(available))
if delta == 0 then
  return tonumber(available)
end
redis.call(ARGV[2], ARGV[3], ARGV[1]) -- first: an ACL refusal changes nothing
return redis.call('incrby', KEYS[1], delta)
