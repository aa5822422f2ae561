-- Reentrant lock (and writer holds): renew many holds in one call (the
-- watchdog's batch).
-- KEYS[i]      lock hash of hold i
-- ARGV[1]      lease in ms
-- ARGV[2i]     owner field of hold i ("U:T", or "U:T:write")
-- ARGV[2i+1]   unused here ("")
-- reply        a string, one character per hold: character i is 1 when hold i
--              still exists (its lease is now ARGV[1]), 0 when it is gone. A
--              key that is no longer a hash counts as gone instead of failing
--              the whole batch. One bulk string: the client parses one reply,
--              not one per hold.
local out = {}
for i = 1, #KEYS do
  local held = redis.pcall('hexists', KEYS[i], ARGV[2 * i])
  if held == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return table.concat(out)
