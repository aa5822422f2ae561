-- Grouped multi-lock: release one hold of every value, idempotently.
-- KEYS[1]  the group's hash G (group_acquire.lua)
-- KEYS[2]  the unlock latch redisson_unlock_latch:{G}:R
-- ARGV[1]  lease in ms, re-armed on the values whose holds remain
-- ARGV[2]  owner "U:T"
-- ARGV[3]  latch lifetime in ms
-- ARGV[4]  publish command (PUBLISH or SPUBLISH)
-- ARGV[5]  the waiters' channel redisson_lock__channel:{G}
-- ARGV[6..] the fields
-- reply    1: every value freed (waiters told); 0: holds remain on every
--          value; nil: one or more values were not the owner's live holds
--          any more (their lease ran out): those still held are released
--          all the same. A retry with the same R replays 0 or 1.
-- #include now.lua
local done = redis.call('get', KEYS[2])
if done then
  return tonumber(done)
end
local now = server_now()
local lease = tonumber(ARGV[1])
local me = ARGV[2]
local live, frees = {}, false
for i = 6, #ARGV do -- first read: which values this release frees
  local f = ARGV[i]
  local exp = tonumber(redis.call('hget', KEYS[1], f .. ':' .. me .. ':expire_time'))
  if exp and exp >= now then
    local n = tonumber(redis.call('hget', KEYS[1], f .. ':' .. me .. ':lock_count'))
    live[i] = n or 1
    frees = frees or live[i] <= 1
  end
end
-- publish first: when an ACL refuses the channel, nothing has changed yet
if frees and ARGV[4] ~= '' then
  redis.call(ARGV[4], ARGV[5], '0')
end
local failed, all = false, true
for i = 6, #ARGV do
  local f = ARGV[i]
  local ef, cf = f .. ':' .. me .. ':expire_time', f .. ':' .. me .. ':lock_count'
  if not live[i] then
    failed, all = true, false
  elseif live[i] <= 1 then
    redis.call('hdel', KEYS[1], ef, cf)
    if redis.call('hget', KEYS[1], f) == me then
      redis.call('hdel', KEYS[1], f)
    end
  else
    redis.call('hincrby', KEYS[1], cf, -1)
    if tonumber(redis.call('hget', KEYS[1], ef)) < now + lease then
      redis.call('hset', KEYS[1], ef, now + lease)
    end
    all = false
  end
end
if failed then
  return nil
end
redis.call('set', KEYS[2], all and '1' or '0', 'px', ARGV[3])
if not all and redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], lease)
end
return all and 1 or 0
