-- CountDownLatch: set the count, only when the latch is not set.
-- KEYS[1]  the latch N (STRING count)
-- ARGV[1]  count (>= 1)
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  channel redisson_countdownlatch__channel__{N}
-- reply    1 when set (waiters told '1': a new count), 0 when already set
-- errors   WRONGKIND when N holds a lock (a hash) or another type
-- #include counts.lua
local t, refused = count_type(KEYS[1], 'count-down latch')
if refused then
  return refused
end
if t == 'none' then
  redis.call(ARGV[2], ARGV[3], '1') -- first: an ACL refusal changes nothing
  redis.call('set', KEYS[1], ARGV[1])
  return 1
end
return 0
