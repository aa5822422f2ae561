-- Read-write lock: take a read hold (or re-enter one).
-- KEYS[1]  the lock hash N (mode, readers U:T -> count, writer U:T:write -> count)
-- KEYS[2]  this reader's timeout-key prefix {N}:U:T:rwlock_timeout; hold K
--          lives in KEYS[2]:K (derived here: K is only known inside)
-- ARGV[1]  lease in ms (of this hold)
-- ARGV[2]  reader field "U:T"
-- ARGV[3]  the same owner's writer field "U:T:write" (a writer may also read)
-- reply    nil when acquired; otherwise the PTTL of the writer's lease
-- errors   WRONGKIND when N is a lock's or a grouped multi-lock's hash (no
--          mode field), WRONGTYPE
--          when it is not a hash: N is left as it is
-- #include kind.lua
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 1 then
  return wrong_kind(hash_kind(KEYS[1]), 'a read-write lock')
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' or redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
  local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
  -- the hash lives as long as its longest hold
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return nil
end
return redis.call('pttl', KEYS[1])
