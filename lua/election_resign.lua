-- Leader election: the leader steps down, idempotently; or (owner empty)
-- whoever leads is removed (a force release).
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock latch redisson_unlock_latch:{N}:R (R: one id per call,
--          reused by its retries)
-- KEYS[3]  the leader's record dlock_election:{N}
-- ARGV[1]  owner "U:T"; empty: whoever leads
-- ARGV[2]  latch lifetime in ms
-- ARGV[3]  publish command
-- ARGV[4]  the lock's channel redisson_lock__channel:{N} (a standby, or a
--          Redisson waiter, takes over at once)
-- ARGV[5]  the election's channel dlock_election_channel:{N}
-- reply    nil: the owner does not lead (never did, or its lease ran out),
--          or nobody leads (force); 1: resigned (N and the record deleted,
--          standbys and observers told). A retry with the same R replays 1.
-- errors   WRONGKIND when N is a read-write lock or (force) a grouped
--          multi-lock: N is left as it is
-- #include release.lua
-- #include kind.lua
local first = release_replay(KEYS[2], KEYS[1], 'an election')
if first ~= false then
  return first
end
if ARGV[1] == '' then
  if redis.call('exists', KEYS[1]) == 0 then
    return nil
  end
  local refused = not_lock_hash(KEYS[1], '', 'an election')
  if refused then
    return refused
  end
elseif redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return nil
end
local r = redis.call('hmget', KEYS[3], 'owner', 'term', 'version', 'since')
redis.call(ARGV[3], ARGV[4], '0')
if r[1] and redis.call('hexists', KEYS[1], r[1]) == 1 then
  redis.call(ARGV[3], ARGV[5], 'V ' .. r[2] .. ' ' .. r[3] .. ' ' .. r[4] .. ' ' .. r[1] .. ' -1\n')
end
redis.call('del', KEYS[1], KEYS[3])
redis.call('set', KEYS[2], '1', 'px', ARGV[2])
return 1
