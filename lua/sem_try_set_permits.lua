-- Semaphore (both kinds): set the number of permits, only when not set.
-- KEYS[1]  the semaphore N
-- ARGV[1]  permits (>= 0)
-- ARGV[2]  time to live of the semaphore in ms, 0 for none
-- ARGV[3]  publish command (PUBLISH or SPUBLISH)
-- ARGV[4]  channel redisson_sc:{N}
-- reply    1 when set (waiters told the count), 0 when already set
-- errors   WRONGKIND when N holds a lock (a hash) or another type
-- #include counts.lua
local t, refused = count_type(KEYS[1], 'semaphore')
if refused then
  return refused
end
if t == 'none' then
  redis.call(ARGV[3], ARGV[4], ARGV[1]) -- first: an ACL refusal changes nothing
  if tonumber(ARGV[2]) > 0 then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[2])
  else
    redis.call('set', KEYS[1], ARGV[1])
  end
  return 1
end
return 0
