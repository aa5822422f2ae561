-- Expirable-permit semaphore: release permits, all or nothing.
-- KEYS[1]  the semaphore N
-- KEYS[2]  {N}:timeout
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  channel redisson_sc:{N}
-- ARGV[3..] permit ids
-- reply    the number released, or -i when id i (1-based) is unknown or
--          expired (then nothing changed)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 3, #ARGV do
  local expiry = redis.call('zscore', KEYS[2], ARGV[i])
  if not expiry or tonumber(expiry) <= now then
    return 2 - i
  end
end
local released = 0
for i = 3, #ARGV do
  released = released + redis.call('zrem', KEYS[2], ARGV[i])
end
local available = redis.call('incrby', KEYS[1], released)
redis.call(ARGV[1], ARGV[2], available)
return released
