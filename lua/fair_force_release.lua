-- Fair lock: release whoever holds it and wake the next live waiter.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the wait queue redisson_lock_queue:{N}
-- KEYS[3]  Redisson's deadlines redisson_lock_timeout:{N}
-- KEYS[4]  dlock waiters' liveness dlock_fair_alive:{N}
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  channel prefix redisson_lock__channel:{N}
-- reply    1 when a lock was deleted, 0 when it was free
-- errors   WRONGKIND when N is a read-write lock or a grouped multi-lock,
--          WRONGTYPE when N is not a hash: N is left as it is
-- #include now.lua
-- #include fair_queue.lua
-- #include kind.lua
local refused = not_lock_hash(KEYS[1], '', 'a fair lock')
if refused then
  return refused
end
if redis.call('exists', KEYS[1]) == 1 then
  local head = fair_purge(KEYS[2], KEYS[3], KEYS[4], server_now())
  if head then -- first: when an ACL refuses the channel, N is still held
    redis.call(ARGV[1], ARGV[2] .. ':' .. head, '0')
  end
  redis.call('del', KEYS[1])
  return 1
end
return 0
