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
-- #include group.lua
local done = redis.call('get', KEYS[2])
if done then
  return tonumber(done)
end
local now = server_now()
local lease = tonumber(ARGV[1])
local me = ARGV[2]
local fields = argv_from(6)
local names = {}
for i = 1, #fields do
  names[#names + 1] = fields[i] .. ':' .. me .. ':expire_time'
  names[#names + 1] = fields[i] .. ':' .. me .. ':lock_count'
end
local mine = hmget_all(KEYS[1], names)
local holders = hmget_all(KEYS[1], fields)
local gone, sets = {}, {}
local failed, all = false, true
for i = 1, #fields do
  local e, n = tonumber(mine[2 * i - 1]), tonumber(mine[2 * i]) or 1
  if not e or e < now then
    failed, all = true, false
  elseif n <= 1 then
    gone[#gone + 1] = names[2 * i - 1]
    gone[#gone + 1] = names[2 * i]
    if holders[i] == me then
      gone[#gone + 1] = fields[i]
    end
  else
    sets[#sets + 1] = names[2 * i]
    sets[#sets + 1] = n - 1
    sets[#sets + 1] = names[2 * i - 1]
    sets[#sets + 1] = e > now + lease and e or now + lease
    all = false
  end
end
-- publish first: when an ACL refuses the channel, nothing has changed yet
if #gone > 0 and ARGV[4] ~= '' then
  redis.call(ARGV[4], ARGV[5], '0')
end
hdel_all(KEYS[1], gone)
hset_all(KEYS[1], sets)
if failed then
  return nil
end
redis.call('set', KEYS[2], all and '1' or '0', 'px', ARGV[3])
if not all and redis.call('pttl', KEYS[1]) < lease then
  redis.call('pexpire', KEYS[1], lease)
end
return all and 1 or 0
