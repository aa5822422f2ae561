-- Fenced lock: acquire or re-enter, and hand out a fencing token.
-- KEYS[1]  the lock hash N (field owner -> hold count)
-- KEYS[2]  the token counter redisson_lock_token:{N}
-- ARGV[1]  lease in ms
-- ARGV[2]  owner "U:T"
-- reply    {1, token} when acquired (every grant, re-entry included, INCRs the
--          counter, so tokens strictly increase across all holders);
--          {0, pttl} when held by another owner
-- errors   WRONGKIND when N is a read-write lock or a grouped multi-lock,
--          WRONGTYPE when N is not a hash or the token key is not a
--          counter: N is left as it is
-- #include kind.lua
local refused = not_lock_hash(KEYS[1], ARGV[2], 'a fenced lock')
if refused then
  return refused
end
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
