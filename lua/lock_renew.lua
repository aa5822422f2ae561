-- Reentrant lock: renew many holds in one call (the watchdog's batch).
-- KEYS[i]    lock hash of hold i
-- ARGV[1]    lease in ms
-- ARGV[1+i]  owner of hold i
-- reply      array, element i = 1 when hold i still exists (its lease is now
--            ARGV[1]), 0 when it is gone. A key that is no longer a hash
--            counts as gone instead of failing the whole batch.
local out = {}
for i = 1, #KEYS do
  local held = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
  if held == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
