-- Grouped multi-lock: renew many holds in one call (the watchdog's batch).
-- KEYS[i]      group hash of hold i
-- ARGV[1]      lease in ms
-- ARGV[2i]     hold i's field in the client's registry: "U:T|TAG" (the
--              owner, and a tag of its set of values)
-- ARGV[2i+1]   its values' fields, separated by spaces
-- reply        a string, one character per hold: character i is 1 when every
--              value of hold i is still the owner's live hold (each expiry
--              moved to now + lease), 0 when one is not (lost). A key that is
--              no longer a hash counts as gone. One bulk string: the client
--              parses one reply, not one per hold.
-- #include now.lua
local now = server_now()
local lease = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local me = string.match(ARGV[2 * i], '^(.-)|') or ARGV[2 * i]
  local ok = 1
  for f in string.gmatch(ARGV[2 * i + 1], '%S+') do
    local holder = redis.pcall('hget', KEYS[i], f)
    local ef = f .. ':' .. me .. ':expire_time'
    local exp = holder == me and tonumber(redis.call('hget', KEYS[i], ef))
    if not exp or exp < now then
      ok = 0
      break
    end
    if exp < now + lease then
      redis.call('hset', KEYS[i], ef, now + lease)
    end
  end
  if ok == 1 and redis.call('pttl', KEYS[i]) < lease then
    redis.call('pexpire', KEYS[i], lease)
  end
  out[i] = ok
end
return table.concat(out)
