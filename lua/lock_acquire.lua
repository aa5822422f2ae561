-- Reentrant lock: acquire or re-enter (the non-reentrant lock: acquire).
-- KEYS[1]  the lock hash N (field owner -> hold count)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner "U:T"
-- ARGV[3]  '1' for the non-reentrant lock (absent or '0': reentrant)
-- reply    nil when acquired (first hold or re-entry: HINCRBY and PEXPIRE);
--          otherwise the lock's PTTL in ms, the longest the caller must wait
--          for it to free by itself (-1 when the hash has no TTL)
-- errors   WRONGKIND when N is a read-write lock or a grouped multi-lock,
--          WRONGTYPE when it is not a hash (a latch's or semaphore's
--          count): N is left as it is; NON_REENTRANT_REACQUIRE (Redisson
--          4.4's word) when the non-reentrant lock's holder asks again: its
--          hold stays at 1
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
-- kind.lua's functions are made only past a free lock's grant: making its
-- five closures cost the server 0.24 us of a free lock's 2.8 us call
-- #include kind.lua
local refused = not_lock_hash(KEYS[1], ARGV[2], 'a lock')
if refused then
  return refused
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  if ARGV[3] == '1' then
    return redis.error_reply('NON_REENTRANT_REACQUIRE')
  end
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
