-- Expirable-permit semaphore: take n permits, each with its own id and lease.
-- KEYS[1]  the semaphore N (STRING count of available permits)
-- KEYS[2]  {N}:timeout (ZSET permit id -> expiry in ms, server time;
--          922337203685477 = never)
-- ARGV[1]  n (>= 1)
-- ARGV[2]  lease in ms, or -1 for permits that never expire
-- ARGV[3]  publish command (PUBLISH or SPUBLISH)
-- ARGV[4]  channel redisson_sc:{N}
-- ARGV[5..4+n]  the new permit ids (16 random bytes each)
-- reply    {1} when taken; {0, wait}: fewer than n available, wait = ms
--          until the next permit expires (-1: none will)
-- Expired permits go back to the pool first (and waiters are told).
-- #include now.lua
local now = server_now()
local expired = redis.call('zrangebyscore', KEYS[2], 0, now)
if #expired > 0 then
  local available = (tonumber(redis.call('get', KEYS[1])) or 0) + #expired
  if available > 0 then -- first: an ACL refusal changes nothing
    redis.call(ARGV[3], ARGV[4], available)
  end
  for _, id in ipairs(expired) do
    redis.call('zrem', KEYS[2], id)
  end
  redis.call('incrby', KEYS[1], #expired)
end
local n = tonumber(ARGV[1])
if tonumber(redis.call('get', KEYS[1]) or '0') >= n then
  redis.call('decrby', KEYS[1], n)
  local lease = tonumber(ARGV[2])
  local expiry = lease < 0 and 922337203685477 or now + lease
  for i = 1, n do
    redis.call('zadd', KEYS[2], expiry, ARGV[4 + i])
  end
  return {1}
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] and tonumber(first[2]) < 922337203685477 then
  return {0, tonumber(first[2]) - now}
end
return {0, -1}
