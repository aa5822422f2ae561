-- Expirable-permit semaphore: renew many held permits (the watchdog's batch).
-- KEYS[i]      {N}:timeout of permit i
-- ARGV[1]      lease in ms
-- ARGV[2i]     permit id i
-- ARGV[2i+1]   unused ("")
-- reply        a string, one character per hold: character i is 1 when permit
--              i was still held (its lease is now ARGV[1]), 0 when it is
--              unknown or expired. One bulk string: the client parses one
--              reply, not one per hold.
-- #include now.lua
local now = server_now()
local out = {}
for i = 1, #KEYS do
  local expiry = redis.pcall('zscore', KEYS[i], ARGV[2 * i])
  if type(expiry) == 'string' and tonumber(expiry) > now then
    redis.call('zadd', KEYS[i], 'xx', now + tonumber(ARGV[1]), ARGV[2 * i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return table.concat(out)
