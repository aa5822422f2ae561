-- Inspect: what is stored under N, for dlock_inspect() and `dlock status`.
-- Reads only.
-- KEYS[1]  N
-- KEYS[2]  the fair lock's queue redisson_lock_queue:{N}
-- KEYS[3]  the expirable-permit semaphore's {N}:timeout
-- KEYS[4]  the election's record dlock_election:{N}
-- reply    {type of N, PTTL of N, length of the queue (0 when it is not a
--          list), type of KEYS[3], contents, permits, type of KEYS[4]}:
--          contents = the
--          hash's fields and values (flat) when N is a hash, {value} when a
--          string, {} otherwise; permits = {live permits held, ms until the
--          first of them expires (-1: none expires)} when KEYS[3] is a zset,
--          else {0, -1}
-- #include now.lua
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
local permits = {0, -1}
local ptype = redis.call('type', KEYS[3])['ok']
if ptype == 'zset' then
  local now = server_now()
  local held = redis.call('zcount', KEYS[3], '(' .. now, '+inf')
  local first = redis.call('zrangebyscore', KEYS[3], '(' .. now, '+inf',
                           'withscores', 'limit', 0, 1)
  local next = -1
  -- 922337203685477: a permit that never expires
  if first[2] and tonumber(first[2]) < 922337203685477 then
    next = tonumber(first[2]) - now
  end
  permits = {held, next}
end
return {kind, redis.call('pttl', KEYS[1]), queued, ptype, contents, permits,
        redis.call('type', KEYS[4])['ok']}
