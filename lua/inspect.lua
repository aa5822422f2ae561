-- Inspect: what is stored under N, for dlock_inspect() and `dlock status`.
-- Reads only.
-- KEYS[1]  N
-- KEYS[2]  the fair lock's queue redisson_lock_queue:{N}
-- KEYS[3]  the expirable-permit semaphore's {N}:timeout
-- reply    {type of N, PTTL of N, length of the queue (0 when it is not a
--          list), type of KEYS[3], contents}: contents = the hash's fields
--          and values (flat) when N is a hash, {value} when a string, {}
--          otherwise
local kind = redis.call('type', KEYS[1])['ok']
local queued = 0
if redis.call('type', KEYS[2])['ok'] == 'list' then
  queued = redis.call('llen', KEYS[2])
end
local contents = {}
if kind == 'hash' then
  contents = redis.call('hgetall', KEYS[1])
elseif kind == 'string' then
  contents = {redis.call('get', KEYS[1])}
end
return {kind, redis.call('pttl', KEYS[1]), queued,
        redis.call('type', KEYS[3])['ok'], contents}
