-- Reentrant lock: release whoever holds it.
-- KEYS[1]  the lock hash N
-- ARGV[1]  publish command (PUBLISH or SPUBLISH); empty: publish nothing
--          (the spin lock)
-- ARGV[2]  unlock channel redisson_lock__channel:{N}
-- ARGV[3]  unlock message ("0")
-- reply    1 when a lock was deleted (waiters told), 0 when it was free
-- errors   WRONGKIND when N is a read-write lock or a grouped multi-lock,
--          WRONGTYPE when N is not a hash: N is left as it is
-- #include kind.lua
local refused = not_lock_hash(KEYS[1], '', 'a lock')
if refused then
  return refused
end
if redis.call('exists', KEYS[1]) == 1 then
  if ARGV[1] ~= '' then -- first: an ACL refusal changes nothing
    redis.call(ARGV[1], ARGV[2], ARGV[3])
  end
  redis.call('del', KEYS[1])
  return 1
end
return 0
