-- Leader election: the leader changes its value, in its term.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the leader's record dlock_election:{N}
-- ARGV[1]  owner "U:T"
-- ARGV[2]  the new value (any bytes)
-- ARGV[3]  publish command
-- ARGV[4]  the election's channel dlock_election_channel:{N}
-- reply    {term, version}: proclaimed (version: 1 for the term's first
--          proclamation, and so on); nil: the owner does not lead
local r = redis.call('hmget', KEYS[2], 'owner', 'term', 'version', 'since')
if r[1] ~= ARGV[1] or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return nil
end
local version = tonumber(r[3]) + 1
redis.call(ARGV[3], ARGV[4], 'P ' .. r[2] .. ' ' .. version .. ' ' .. r[4] .. ' ' .. ARGV[1] .. ' -1\n' .. ARGV[2])
redis.call('hset', KEYS[2], 'version', version, 'value', ARGV[2])
return {tonumber(r[2]), version}
