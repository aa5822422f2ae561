-- Fair lock: release one hold, idempotently; wake only the next waiter.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock latch redisson_unlock_latch:{N}:R
-- KEYS[3]  the wait queue redisson_lock_queue:{N}
-- KEYS[4]  Redisson's deadlines redisson_lock_timeout:{N}
-- KEYS[5]  dlock waiters' liveness dlock_fair_alive:{N}
-- ARGV[1]  lease in ms, re-armed when holds remain
-- ARGV[2]  owner "U:T"
-- ARGV[3]  latch lifetime in ms
-- ARGV[4]  publish command (PUBLISH or SPUBLISH)
-- ARGV[5]  channel prefix redisson_lock__channel:{N}; a waiter listens on
--          prefix:owner
-- reply    nil: the owner has no hold (never held, or its lease ran out:
--          the next live waiter is woken anyway); 0: a hold remains;
--          1: released, the next live waiter woken. A retry with the same
--          latch replays the first 0 or 1.
-- errors   WRONGKIND when N is a read-write lock, WRONGTYPE when N is not a
--          hash: N is left as it is
-- #include now.lua
-- #include fair_queue.lua
-- #include release.lua
local first = release_replay(KEYS[2], KEYS[1], 'a fair lock')
if first ~= false then
  return first
end
local function wake_next()
  local head = fair_purge(KEYS[3], KEYS[4], KEYS[5], server_now())
  if head then
    redis.call(ARGV[4], ARGV[5] .. ':' .. head, '0')
  end
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  if redis.call('exists', KEYS[1]) == 0 then
    wake_next()
  end
  return nil
end
if tonumber(redis.call('hget', KEYS[1], ARGV[2])) > 1 then
  -- the expiry first: a release lands on a full server (lock_release.lua)
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('hincrby', KEYS[1], ARGV[2], -1)
  redis.call('set', KEYS[2], '0', 'px', ARGV[3])
  return 0
end
wake_next() -- first: when an ACL refuses the channel, N is still held
redis.call('del', KEYS[1])
redis.call('set', KEYS[2], '1', 'px', ARGV[3])
return 1
