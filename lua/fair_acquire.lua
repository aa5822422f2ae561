-- Fair lock: acquire in FIFO order, or queue up and stay alive in the queue.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the wait queue redisson_lock_queue:{N} (LIST of owners)
-- KEYS[3]  Redisson's deadlines redisson_lock_timeout:{N} (ZSET owner -> ms)
-- KEYS[4]  dlock waiters' liveness dlock_fair_alive:{N} (ZSET owner -> ms)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner "U:T"
-- ARGV[3]  thread wait time in ms (Redisson's threadWaitTime): a newcomer's
--          deadline is the tail's (or the lock's expiry) plus this, and a
--          grant moves every remaining deadline this much earlier
-- ARGV[4]  liveness slot in ms: a queued dlock waiter that has not tried
--          again for this long is dead and is skipped by dlock's scripts
-- ARGV[5]  '1' to join the queue when not acquired, '0' to only try
-- ARGV[6]  publish command (PUBLISH or SPUBLISH)
-- ARGV[7]  the waiters' channel prefix redisson_lock__channel:{N}: a grant
--          from the line tells the next waiter (prefix:U:T) the new lease,
--          message '-' .. lease (negative: Redisson's waiters ignore it): no
--          release announces a lease's end, so it re-tries by then
-- ARGV[8]  '1' for the non-reentrant fair lock (absent or '0': reentrant)
-- reply    nil when acquired (head of the queue or empty queue, or
--          re-entry); otherwise how long at most to wait in ms: the lock's
--          PTTL, or when it is free but another waiter is first, until that
--          waiter must have taken it (-1: unknown)
-- errors   WRONGKIND when N is a read-write lock, WRONGTYPE when a key has
--          the wrong type: nothing is changed; NON_REENTRANT_REACQUIRE
--          (Redisson 4.4's word) when the non-reentrant fair lock's holder
--          asks again: its hold stays at 1
-- #include now.lua
-- #include fair_queue.lua
-- #include kind.lua
local refused = not_lock_hash(KEYS[1], ARGV[2], 'a fair lock')
if refused then
  return refused
end
local now = server_now()
local head = fair_purge(KEYS[2], KEYS[3], KEYS[4], now)
local wait = tonumber(ARGV[3])
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if ARGV[8] == '1' then
    return redis.error_reply('NON_REENTRANT_REACQUIRE')
  end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[2]) then
  -- tell the next waiter first: when an ACL refuses its channel, nothing
  -- has changed
  local next = head and redis.call('lindex', KEYS[2], 1)
  if next then
    redis.call(ARGV[6], ARGV[7] .. ':' .. next, '-' .. ARGV[1])
  end
  if head then
    redis.call('lpop', KEYS[2])
  end
  redis.call('zrem', KEYS[3], ARGV[2])
  redis.call('zrem', KEYS[4], ARGV[2])
  -- Redisson's arithmetic: a grant moves every remaining deadline one wait
  -- earlier. Only Redisson's waiters live by these deadlines (a dlock
  -- waiter raises its own on every try, and is judged by its liveness):
  -- with none of them queued (every entry has a liveness record) the
  -- deadlines stay, so a grant costs the same behind 10 waiters or 10,000.
  if redis.call('zcard', KEYS[4]) < redis.call('llen', KEYS[2]) then
    for _, waiter in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
      redis.call('zincrby', KEYS[3], -wait, waiter)
    end
  end
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local mine = redis.call('zscore', KEYS[3], ARGV[2])
if mine or ARGV[5] == '1' then
  if not mine then
    -- Redisson's arithmetic: the tail's deadline (or the lock's expiry)
    -- plus one wait
    local last = redis.call('lindex', KEYS[2], -1)
    local tail = last and redis.call('zscore', KEYS[3], last)
    local base = tail and tonumber(tail) - now or redis.call('pttl', KEYS[1])
    mine = base + wait + now
    redis.call('rpush', KEYS[2], ARGV[2])
  end
  -- Keep my place in a Redisson client's eyes too while I am alive. Each
  -- grant ahead of me moves my deadline one wait earlier (above), so the
  -- deadline I keep is at least the lock's expiry plus a wait per waiter in
  -- the queue (me included). Raised to less (now plus one wait on a try,
  -- or the tail's deadline plus one wait when I join behind a waiter about
  -- to give up), a busy queue's grants before my next try would put it in
  -- the past, and a Redisson client's next try would purge me, alive, from
  -- the head.
  -- Two ms under that floor: PTTL counts from the time the script began,
  -- TIME (now) from this moment, and on a slow server the two differ by a
  -- millisecond or so; Redisson's arithmetic, when it keeps the place
  -- already, must stand exact (a Java client computes the same deadlines).
  local held = math.max(redis.call('pttl', KEYS[1]), 0)
  mine = math.max(tonumber(mine),
                  now + held + wait * redis.call('llen', KEYS[2]) - 2)
  redis.call('zadd', KEYS[3], mine, ARGV[2])
  redis.call('zadd', KEYS[4], now + tonumber(ARGV[4]), ARGV[2])
  -- the liveness record outlives my Redisson deadline: until then a dead
  -- dlock waiter must stay recognisable as one
  local keep = mine - now + tonumber(ARGV[4])
  if redis.call('pttl', KEYS[4]) < keep then
    redis.call('pexpire', KEYS[4], keep)
  end
end
local ttl = redis.call('pttl', KEYS[1])
if ttl == -2 then
  local deadline = head and (redis.call('zscore', KEYS[4], head) or
                             redis.call('zscore', KEYS[3], head))
  ttl = deadline and math.max(tonumber(deadline) - now, 1) or -1
end
return ttl
