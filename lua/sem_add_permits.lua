-- Semaphore (both kinds): add (or with a negative delta, remove) permits.
-- KEYS[1]  the semaphore N
-- ARGV[1]  delta (may be negative; the count may go below 0)
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  channel redisson_sc:{N}
-- reply    the available count after; waiters are told when it is > 0
-- #include counts.lua
local count, refused = count_of(KEYS[1], 'semaphore')
if refused then
  return refused
end
local available = count + tonumber(ARGV[1])
if available > 0 then -- first: when an ACL refuses the channel, nothing changed
  redis.call(ARGV[2], ARGV[3], available)
end
redis.call('incrby', KEYS[1], ARGV[1])
return available
