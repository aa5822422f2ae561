-- Semaphore: give back n permits (creates the semaphore when missing).
-- KEYS[1]  the semaphore N
-- ARGV[1]  n (>= 1)
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  channel redisson_sc:{N}
-- reply    the available count after; waiters are told that count
-- publish first: when an ACL refuses the channel, nothing has changed yet
-- #include counts.lua
local count, refused = count_of(KEYS[1], 'semaphore')
if refused then
  return refused
end
local available = count + tonumber(ARGV[1])
redis.call(ARGV[2], ARGV[3], available)
redis.call('incrby', KEYS[1], ARGV[1])
return available
