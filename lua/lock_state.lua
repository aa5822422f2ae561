-- Reentrant lock: one consistent snapshot of the lock's state.
-- KEYS[1]  the lock hash N
-- ARGV[1]  owner "U:T" of the caller
-- reply    {exists (0/1), the caller's hold count, PTTL in ms (-2 when free)}
-- errors   WRONGTYPE when N is not a hash
local count = redis.call('hget', KEYS[1], ARGV[1])
return {redis.call('exists', KEYS[1]), tonumber(count) or 0, redis.call('pttl', KEYS[1])}
