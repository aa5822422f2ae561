-- Read-write lock: release one read hold, idempotently.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock latch redisson_unlock_latch:{N}:R
-- KEYS[3]  this reader's timeout-key prefix {N}:U:T:rwlock_timeout
-- KEYS[4]  {N}: every reader's timeout keys are KEYS[4]:field:rwlock_timeout:K
-- ARGV[1]  reader field "U:T"
-- ARGV[2]  latch lifetime in ms
-- ARGV[3]  publish command (PUBLISH or SPUBLISH)
-- ARGV[4]  channel redisson_rwlock:{N}
-- reply    nil: the caller has no read hold (never held, or its lease ran
--          out); 0: released, other holds remain (the hash now lives as
--          long as the longest live hold); 1: released and the lock is gone
--          (readers whose holds all expired were zombies), one waiter told.
--          A retry with the same latch replays the first 0 or 1.
local done = redis.call('get', KEYS[2])
if done then
  return tonumber(done)
end
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return nil
end
-- Decide everything first and publish before the first write: when an ACL
-- refuses the channel, nothing has changed.
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1])) - 1 -- my holds after
local fields = redis.call('hlen', KEYS[1]) - (n == 0 and 1 or 0)
local result, expire = 1, nil
if fields > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    local count = tonumber(redis.call('hget', KEYS[1], field))
    if field == ARGV[1] then
      count = n -- my hold n + 1 is the one being released
    end
    if count then -- 'mode' is not a count
      for k = count, 1, -1 do
        local t = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. k)
        if t > longest then
          longest = t
        end
      end
    end
  end
  if mode == 'write' then
    -- the same owner's writer still holds it: never shorten its lease
    if longest > redis.call('pttl', KEYS[1]) then
      expire = longest
    end
    result = 0
  elseif longest > 0 then
    expire = longest
    result = 0
  end
end
if result == 1 then
  redis.call(ARGV[3], ARGV[4], '0')
end
-- the hold's timeout key first: a deletion, so the release lands on a
-- full server (lock_release.lua)
redis.call('del', KEYS[3] .. ':' .. (n + 1))
if n == 0 then
  redis.call('hdel', KEYS[1], ARGV[1])
else
  redis.call('hincrby', KEYS[1], ARGV[1], -1)
end
if result == 1 then
  redis.call('del', KEYS[1])
elseif expire then
  redis.call('pexpire', KEYS[1], expire)
end
redis.call('set', KEYS[2], result, 'px', ARGV[2])
return result
