-- CountDownLatch: delete it (waiters re-check and see 0).
-- KEYS[1]  the latch N
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  channel redisson_countdownlatch__channel__{N}
-- reply    1 when a latch was deleted, 0 when there was none
if redis.call('del', KEYS[1]) == 1 then
  redis.call(ARGV[1], ARGV[2], '1')
  return 1
end
return 0
