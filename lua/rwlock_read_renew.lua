-- Read-write lock: renew many read holds in one call (the watchdog's batch).
-- KEYS[i]      lock hash of hold i
-- ARGV[1]      lease in ms
-- ARGV[2i]     reader field of hold i ("U:T")
-- ARGV[2i+1]   its timeout-key prefix {N}:U:T:rwlock_timeout (same slot as
--              KEYS[i]; the hold numbers are only known inside)
-- reply        a string, one character per hold: character i is 1 when the
--              reader still has a live hold (all its live holds now last
--              ARGV[1], and so does the hash at least), 0 when it has none.
--              Only the caller's own holds are renewed: a live reader never
--              keeps a dead one alive. One bulk string: the client parses one
--              reply, not one per hold.
local out = {}
local lease = tonumber(ARGV[1])
for i = 1, #KEYS do
  out[i] = 0
  local count = redis.pcall('hget', KEYS[i], ARGV[2 * i])
  if type(count) == 'string' then
    local renewed = 0
    for k = 1, tonumber(count) do
      renewed = renewed + redis.call('pexpire', ARGV[2 * i + 1] .. ':' .. k, lease)
    end
    if renewed > 0 then
      if redis.call('pttl', KEYS[i]) < lease then
        redis.call('pexpire', KEYS[i], lease)
      end
      out[i] = 1
    end
  end
end
return table.concat(out)
