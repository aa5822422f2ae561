-- CountDownLatch: delete it (waiters re-check and see 0).
-- KEYS[1]  the latch N
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  channel redisson_countdownlatch__channel__{N}
-- reply    1 when a latch was deleted, 0 when there was none
-- errors   WRONGKIND when N holds a lock (a hash) or another type: kept
-- #include counts.lua
local t, refused = count_type(KEYS[1], 'count-down latch')
if refused then
  return refused
end
if t == 'string' then
  redis.call(ARGV[1], ARGV[2], '1') -- first: an ACL refusal changes nothing
  redis.call('del', KEYS[1])
  return 1
end
return 0
