-- Semaphore: give back n permits (creates the semaphore when missing).
-- KEYS[1]  the semaphore N
-- KEYS[2]  the release latch dlock_semaphore_release:{N}:R (R = one id per
--          release call, reused by its retries; absent: none): a retry
--          after a lost answer replays the first, never gives back twice
-- ARGV[1]  n (>= 1)
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- ARGV[3]  channel redisson_sc:{N}
-- ARGV[4]  the latch's lifetime in ms (the caller's whole retry window)
-- reply    the available count after; waiters are told that count
-- publish first: when an ACL refuses the channel, nothing has changed yet
-- #include counts.lua
if KEYS[2] then
  local done = redis.call('get', KEYS[2])
  if done then
    return tonumber(done)
  end
end
local count, refused = count_of(KEYS[1], 'semaphore')
if refused then
  return refused
end
local available = count + tonumber(ARGV[1])
redis.call(ARGV[2], ARGV[3], available)
redis.call('incrby', KEYS[1], ARGV[1])
if KEYS[2] then
  redis.call('set', KEYS[2], available, 'px', ARGV[4])
end
return available
