-- Semaphore: take n permits if that many are available.
-- KEYS[1]  the semaphore N (STRING count of available permits)
-- KEYS[2]  the take mark dlock_semaphore_take:{N}:R (R = one id per acquire
--          call, shared by its tries): set when permits are taken, so a
--          try whose answer was lost can be asked after (absent: no mark)
-- ARGV[1]  n (>= 1)
-- ARGV[2]  the mark's lifetime in ms (the caller's whole asking window)
-- reply    1 when taken, 0 when fewer than n are available (nothing changed)
-- errors   when N holds something other than a count
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if available >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  if KEYS[2] then
    redis.call('set', KEYS[2], '1', 'px', ARGV[2])
  end
  return 1
end
return 0
