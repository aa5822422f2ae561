-- Reentrant lock: release whoever holds it.
-- KEYS[1]  the lock hash N
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  unlock channel redisson_lock__channel:{N}
-- ARGV[3]  unlock message ("0")
-- reply    1 when a lock was deleted (waiters told), 0 when it was free
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[1], ARGV[2], ARGV[3])
  return 1
end
return 0
