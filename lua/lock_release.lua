-- Reentrant lock: release one hold, idempotently.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the unlock latch redisson_unlock_latch:{N}:R (R = one id per release
--          call, reused by its retries)
-- ARGV[1]  lease in ms, re-armed when holds remain
-- ARGV[2]  owner "U:T"
-- ARGV[3]  latch lifetime in ms (covers the caller's whole retry window)
-- ARGV[4]  publish command (PUBLISH, or SPUBLISH for sharded pub/sub); empty:
--          publish nothing (the spin lock has no waiters to tell)
-- ARGV[5]  unlock channel redisson_lock__channel:{N}
-- ARGV[6]  unlock message ("0")
-- reply    nil: owner has no hold (never held, or the lease ran out);
--          0: a hold remains (lease re-armed); 1: fully released (N deleted,
--          waiters told). A retry with the same R replays the first 0 or 1.
-- errors   WRONGKIND when N is a read-write lock, WRONGTYPE when N is not a
--          hash: N is left as it is
-- #include release.lua
local first = release_replay(KEYS[2], KEYS[1], 'a lock')
if first ~= false then
  return first
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if not holds then
  return nil
end
if holds > 1 then
  -- the expiry first: a full server (maxmemory, noeviction) refuses a
  -- script's first write that may need memory (HINCRBY, SET), not one that
  -- cannot (PEXPIRE, DEL), and after a write none: so a release lands on a
  -- full server
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('hincrby', KEYS[1], ARGV[2], -1)
  redis.call('set', KEYS[2], '0', 'px', ARGV[3])
  return 0
end
-- publish first: when an ACL refuses the channel, nothing has changed yet
if ARGV[4] ~= '' then
  redis.call(ARGV[4], ARGV[5], ARGV[6])
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[2], '1', 'px', ARGV[3])
return 1
