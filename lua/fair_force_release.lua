-- Fair lock: release whoever holds it and wake the next waiter.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the wait queue redisson_lock_queue:{N}
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  channel prefix redisson_lock__channel:{N}
-- reply    1 when a lock was deleted, 0 when it was free
if redis.call('del', KEYS[1]) == 1 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(ARGV[1], ARGV[2] .. ':' .. head, '0')
  end
  return 1
end
return 0
