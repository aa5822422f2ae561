-- Reentrant lock: one consistent snapshot of the lock's state.
-- KEYS[1]  the lock hash N
-- ARGV[1]  owner "U:T" of the caller
-- reply    {exists (0/1), the caller's hold count, PTTL in ms (-2 when free)}
-- errors   WRONGKIND when N holds another kind (kind.lua names it)
-- #include kind.lua
local found = name_kind(KEYS[1])
if found ~= 'none' and found ~= 'lock' then
  return wrong_kind(found, 'a lock')
end
local count = redis.call('hget', KEYS[1], ARGV[1])
return {redis.call('exists', KEYS[1]), tonumber(count) or 0, redis.call('pttl', KEYS[1])}
