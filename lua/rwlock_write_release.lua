-- Read-write lock: release one write hold, idempotently.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock latch redisson_unlock_latch:{N}:R
-- ARGV[1]  lease in ms, re-armed when write holds remain
-- ARGV[2]  writer field "U:T:write"
-- ARGV[3]  latch lifetime in ms
-- ARGV[4]  publish command (PUBLISH or SPUBLISH)
-- ARGV[5]  channel redisson_rwlock:{N}
-- reply    nil: the caller has no write hold; 0: a write hold remains;
--          1: released: the lock is gone, or downgraded to the caller's own
--          read holds (mode=read); every waiter is told either way.
local done = redis.call('get', KEYS[2])
if done then
  return tonumber(done)
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or
   redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if tonumber(redis.call('hget', KEYS[1], ARGV[2])) > 1 then
  -- the expiry first (never shortened): a release lands on a full server
  -- (lock_release.lua)
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  redis.call('hincrby', KEYS[1], ARGV[2], -1)
  redis.call('set', KEYS[2], '0', 'px', ARGV[3])
  return 0
end
redis.call(ARGV[4], ARGV[5], '1') -- first: an ACL refusal changes nothing
redis.call('hdel', KEYS[1], ARGV[2])
if redis.call('hlen', KEYS[1]) == 1 then
  redis.call('del', KEYS[1])
else
  redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('set', KEYS[2], '1', 'px', ARGV[3])
return 1
