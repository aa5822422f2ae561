-- Grouped multi-lock: release the values whoever holds them.
-- KEYS[1]  the group's hash G
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  the waiters' channel redisson_lock__channel:{G}
-- ARGV[3..] the fields
-- reply    1 when a value was held (its entries deleted, waiters told), 0
--          when none was
-- errors   WRONGKIND when G is a lock's or a read-write lock's hash,
--          WRONGTYPE when G is not a hash: nothing is changed
-- #include kind.lua
local refused = not_group_hash(KEYS[1])
if refused then
  return refused
end
local held = false
for i = 3, #ARGV do
  held = held or redis.call('hexists', KEYS[1], ARGV[i]) == 1
end
if not held then
  return 0
end
redis.call(ARGV[1], ARGV[2], '0') -- first: an ACL refusal changes nothing
for i = 3, #ARGV do
  local f = ARGV[i]
  local holder = redis.call('hget', KEYS[1], f)
  if holder then
    redis.call('hdel', KEYS[1], f, f .. ':' .. holder .. ':expire_time',
               f .. ':' .. holder .. ':lock_count')
  end
end
return 1
