-- CountDownLatch: delete it (waiters re-check and see 0).
-- KEYS[1]  the latch N
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  channel redisson_countdownlatch__channel__{N}
-- reply    1 when a latch was deleted, 0 when there was none
-- errors   WRONGKIND when N holds a lock (a hash) or another type: kept
local t = redis.call('type', KEYS[1])['ok']
if t ~= 'none' and t ~= 'string' then
  return redis.error_reply('WRONGKIND the name holds a ' ..
                           (t == 'hash' and 'lock' or t) .. ', not a count-down latch')
end
if t == 'string' then
  redis.call(ARGV[1], ARGV[2], '1') -- first: an ACL refusal changes nothing
  redis.call('del', KEYS[1])
  return 1
end
return 0
