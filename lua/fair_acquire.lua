-- Fair lock: acquire in FIFO order, or queue up and keep the slot alive.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the wait queue redisson_lock_queue:{N} (LIST of owners)
-- KEYS[3]  the deadlines redisson_lock_timeout:{N} (ZSET owner -> ms)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner "U:T"
-- ARGV[3]  wait slot in ms: a queued waiter is purged when it has not
--          tried again for this long (it is dead)
-- ARGV[4]  '1' to join the queue when not acquired, '0' to only try
-- ARGV[5]  publish command (PUBLISH or SPUBLISH)
-- ARGV[6]  the waiters' channel prefix redisson_lock__channel:{N}: a grant
--          from the line tells the next waiter (prefix:U:T) the new lease,
--          message '-' .. lease (negative: Redisson's waiters ignore it): no
--          release announces a lease's end, so it re-tries by then instead
--          of sleeping on an older, longer hint
-- reply    nil when acquired (head of the queue or empty queue, or
--          re-entry); otherwise how long at most to wait in ms: the lock's
--          PTTL, or when it is free but another waiter is first, that
--          waiter's remaining slot (-1: unknown)
-- errors   WRONGTYPE when a key has the wrong type
-- Time is the server's (TIME), one clock for every client.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- purge dead waiters at the head
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then
    break
  end
  local deadline = tonumber(redis.call('zscore', KEYS[3], head))
  if deadline and deadline > now then
    break
  end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], head)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[2]) then
  if head then
    redis.call('lpop', KEYS[2])
    local next = redis.call('lindex', KEYS[2], 0)
    if next then
      redis.call(ARGV[5], ARGV[6] .. ':' .. next, '-' .. ARGV[1])
    end
  end
  redis.call('zrem', KEYS[3], ARGV[2])
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
local slot = tonumber(ARGV[3])
local queued = redis.call('zscore', KEYS[3], ARGV[2])
if queued or ARGV[4] == '1' then
  if not queued then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
  redis.call('zadd', KEYS[3], now + slot, ARGV[2]) -- alive: keep my place
  -- the queue keys outlive their last live waiter by one slot at most
  if redis.call('pttl', KEYS[2]) < slot then
    redis.call('pexpire', KEYS[2], slot)
    redis.call('pexpire', KEYS[3], slot)
  end
end
local ttl = redis.call('pttl', KEYS[1])
if ttl == -2 then
  -- free, but another (live) waiter is first: at most its slot
  local deadline = head and tonumber(redis.call('zscore', KEYS[3], head))
  ttl = deadline and math.max(deadline - now, 1) or -1
end
return ttl
