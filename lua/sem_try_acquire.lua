-- Semaphore: take n permits if that many are available.
-- KEYS[1]  the semaphore N (STRING count of available permits)
-- ARGV[1]  n (>= 1)
-- reply    1 when taken, 0 when fewer than n are available (nothing changed)
-- errors   when N holds something other than a count
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if available >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  return 1
end
return 0
