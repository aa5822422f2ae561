-- CountDownLatch: count down by one.
-- KEYS[1]  the latch N
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  channel redisson_countdownlatch__channel__{N}
-- reply    the count after (never below 0: a latch at 0 is deleted, and a
--          missing latch counts as 0); waiters are told '0' when it reaches 0
-- errors   when N holds something other than a count
-- #include counts.lua
local count, refused = count_of(KEYS[1], 'count-down latch')
if refused then
  return refused
end
local left = count - 1
if left == 0 then
  redis.call(ARGV[1], ARGV[2], '0') -- first: an ACL refusal changes nothing
end
if left <= 0 then
  redis.call('del', KEYS[1])
else
  redis.call('decr', KEYS[1])
end
return math.max(left, 0)
