-- Fair lock: a waiter gives up (budget spent, client closing, error).
-- KEYS[1]  the lock hash N
-- KEYS[2]  the wait queue redisson_lock_queue:{N}
-- KEYS[3]  Redisson's deadlines redisson_lock_timeout:{N}
-- KEYS[4]  dlock waiters' liveness dlock_fair_alive:{N}
-- ARGV[1]  owner "U:T" of the waiter
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  channel prefix redisson_lock__channel:{N}
-- ARGV[4]  thread wait time in ms: as Redisson's give-up does, every waiter
--          queued behind this one moves one wait earlier (when a Redisson
--          waiter is queued: fair_acquire.lua says why only then)
-- reply    1 when the waiter was queued (now removed), 0 when it was not.
--          When the lock is free, the (new) head is woken: a wake-up sent to
--          a waiter that left is never lost.
-- #include now.lua
-- #include fair_queue.lua
local behind = false
local redisson_queued = redis.call('zcard', KEYS[4]) < redis.call('llen', KEYS[2])
for _, waiter in ipairs(redisson_queued and redis.call('lrange', KEYS[2], 0, -1) or {}) do
  if behind then
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), waiter)
  elseif waiter == ARGV[1] then
    behind = true
  end
end
local removed = redis.call('lrem', KEYS[2], 0, ARGV[1])
redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
-- (a refused wake-up leaves this waiter gone: what a give-up must do)
if removed > 0 and redis.call('exists', KEYS[1]) == 0 then
  local head = fair_purge(KEYS[2], KEYS[3], KEYS[4], server_now())
  if head then
    redis.call(ARGV[2], ARGV[3] .. ':' .. head, '0')
  end
end
return removed > 0 and 1 or 0
