-- Expirable-permit semaphore: release permits, all or nothing, idempotently.
-- KEYS[1]  the semaphore N
-- KEYS[2]  the release latch dlock_permits_release_latch:{N}:R (R = one id
--          per release call, reused by its retries)
-- KEYS[3]  {N}:timeout
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  channel redisson_sc:{N}
-- ARGV[3]  latch lifetime in ms (covers the caller's whole retry window)
-- ARGV[4..] permit ids
-- reply    the number released, or -i when id i (1-based) is unknown or
--          expired (then nothing changed). A retry with the same R replays
--          the number the first attempt released.
local done = redis.call('get', KEYS[2])
if done then
  return tonumber(done)
end
-- #include now.lua
local now = server_now()
for i = 4, #ARGV do
  local expiry = redis.call('zscore', KEYS[3], ARGV[i])
  if not expiry or tonumber(expiry) <= now then
    return 3 - i
  end
end
-- publish first: when an ACL refuses the channel, nothing has changed yet
local distinct = {}
local released = 0
for i = 4, #ARGV do
  if not distinct[ARGV[i]] then
    distinct[ARGV[i]] = true
    released = released + 1
  end
end
local available = (tonumber(redis.call('get', KEYS[1])) or 0) + released
redis.call(ARGV[1], ARGV[2], available)
for i = 4, #ARGV do
  redis.call('zrem', KEYS[3], ARGV[i])
end
redis.call('incrby', KEYS[1], released)
redis.call('set', KEYS[2], released, 'px', ARGV[3])
return released
