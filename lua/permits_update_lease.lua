-- Expirable-permit semaphore: set a held permit's lease again.
-- KEYS[1]  {N}:timeout
-- ARGV[1]  permit id
-- ARGV[2]  new lease in ms, or -1 for never
-- reply    1 when updated, 0 when the permit is unknown or expired
-- #include now.lua
local now = server_now()
local expiry = redis.call('zscore', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= now then
  return 0
end
local lease = tonumber(ARGV[2])
redis.call('zadd', KEYS[1], 'xx', lease < 0 and 922337203685477 or now + lease, ARGV[1])
return 1
