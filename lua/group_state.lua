-- Grouped multi-lock: its state for one owner.
-- KEYS[1]  the group's hash G
-- ARGV[1]  owner "U:T"
-- ARGV[2..] the fields
-- reply    [held, count, ms]: held 1 when another owner or this one holds
--          one of the values live; count the owner's hold count (the
--          smallest lock_count over the values, 0 unless every value is
--          its live hold); ms how long the owner's holds last (its soonest
--          expiry), else the hash's PTTL
-- errors   WRONGKIND when G holds another kind (kind.lua names it)
-- #include now.lua
-- #include kind.lua
local found = name_kind(KEYS[1])
if found ~= 'none' and found ~= 'grouped multi-lock' then
  return wrong_kind(found, 'a grouped multi-lock')
end
local now = server_now()
local me = ARGV[1]
local held, count, soonest = 0, nil, nil
for i = 2, #ARGV do
  local f = ARGV[i]
  local holder = redis.call('hget', KEYS[1], f)
  local exp = holder and tonumber(redis.call('hget', KEYS[1],
                                             f .. ':' .. holder .. ':expire_time'))
  local live = exp and exp >= now
  if live then
    held = 1
  end
  if holder == me and live then
    local n = tonumber(redis.call('hget', KEYS[1], f .. ':' .. me .. ':lock_count')) or 0
    count = count and math.min(count, n) or n
    soonest = soonest and math.min(soonest, exp - now) or exp - now
  else
    count = 0
  end
end
return {held, count or 0, count and count > 0 and soonest or redis.call('pttl', KEYS[1])}
