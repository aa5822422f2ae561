-- CountDownLatch: set the count, only when the latch is not set.
-- KEYS[1]  the latch N (STRING count)
-- ARGV[1]  count (>= 1)
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  channel redisson_countdownlatch__channel__{N}
-- reply    1 when set (waiters told '1': a new count), 0 when already set
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[1])
  redis.call(ARGV[2], ARGV[3], '1')
  return 1
end
return 0
