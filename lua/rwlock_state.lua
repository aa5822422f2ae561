-- Read-write lock: one consistent snapshot.
-- KEYS[1]  the lock hash N
-- ARGV[1]  the caller's field ("U:T" for reads, "U:T:write" for writes)
-- reply    {mode ('' when free), the caller's hold count, PTTL in ms}
-- errors   WRONGKIND when N holds another kind (kind.lua names it)
-- #include kind.lua
local found = name_kind(KEYS[1])
if found ~= 'none' and found ~= 'read-write lock' then
  return wrong_kind(found, 'a read-write lock')
end
local mode = redis.call('hget', KEYS[1], 'mode') or ''
local count = tonumber(redis.call('hget', KEYS[1], ARGV[1])) or 0
return {mode, count, redis.call('pttl', KEYS[1])}
