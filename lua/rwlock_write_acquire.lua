-- Read-write lock: take the write hold (or re-enter it).
-- KEYS[1]  the lock hash N
-- ARGV[1]  lease in ms
-- ARGV[2]  writer field "U:T:write"
-- ARGV[3]  the same owner's reader field "U:T"
-- reply    nil when acquired; 'upgrade' when the caller holds only a read
--          hold (read-to-write upgrade: it would wait for itself forever);
--          otherwise the PTTL of the holders' lease
-- errors   WRONGKIND when N is a lock's or a grouped multi-lock's hash (no
--          mode field), WRONGTYPE
--          when it is not a hash: N is left as it is
-- #include kind.lua
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 1 then
  return wrong_kind(hash_kind(KEYS[1]), 'a read-write lock')
end
if mode == false then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return nil
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
  return 'upgrade'
end
return redis.call('pttl', KEYS[1])
