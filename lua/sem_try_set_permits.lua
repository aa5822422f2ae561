-- Semaphore (both kinds): set the number of permits, only when not set.
-- KEYS[1]  the semaphore N
-- ARGV[1]  permits (>= 0)
-- ARGV[2]  time to live of the semaphore in ms, 0 for none
-- ARGV[3]  publish command (PUBLISH or SPUBLISH)
-- ARGV[4]  channel redisson_sc:{N}
-- reply    1 when set (waiters told the count), 0 when already set
if redis.call('exists', KEYS[1]) == 0 then
  if tonumber(ARGV[2]) > 0 then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
  else
    redis.call('set', KEYS[1], ARGV[1])
  end
  redis.call(ARGV[3], ARGV[4], ARGV[1])
  return 1
end
return 0
