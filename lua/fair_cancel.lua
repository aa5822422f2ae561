-- Fair lock: a waiter gives up (budget spent, client closing, error).
-- KEYS[1]  the lock hash N
-- KEYS[2]  the wait queue redisson_lock_queue:{N}
-- KEYS[3]  the deadlines redisson_lock_timeout:{N}
-- ARGV[1]  owner "U:T" of the waiter
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  channel prefix redisson_lock__channel:{N}
-- reply    1 when the waiter was queued (now removed), 0 when it was not.
--          When it was the head of a free lock, the next waiter is woken:
--          a wake-up sent to a waiter that left is never lost.
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
if removed > 0 and redis.call('exists', KEYS[1]) == 0 then
  local head = redis.call('lindex', KEYS[2], 0)
  if head then
    redis.call(ARGV[2], ARGV[3] .. ':' .. head, '0')
  end
end
return removed > 0 and 1 or 0
