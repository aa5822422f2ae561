-- Read-write lock: delete it when it is held in the given mode.
-- KEYS[1]  the lock hash N
-- ARGV[1]  'read' or 'write'
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  channel redisson_rwlock:{N}
-- reply    1 when deleted (every waiter told), 0 when not held in that mode
-- errors   WRONGTYPE when N is not a hash
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
  redis.call(ARGV[2], ARGV[3], '1') -- first: an ACL refusal changes nothing
  redis.call('del', KEYS[1])
  return 1
end
return 0
