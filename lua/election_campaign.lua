-- Leader election: one try to become leader (docs/election.md, docs/wire.md
-- "Leader election"). The leadership is a fenced lock on N, so a Redisson
-- RFencedLock on the same name excludes too; the term is its token.
-- KEYS[1]  the lock hash N (field owner -> 1)
-- KEYS[2]  the term counter redisson_lock_token:{N}
-- KEYS[3]  the leader's record dlock_election:{N}
-- ARGV[1]  lease in ms
-- ARGV[2]  owner "U:T"
-- ARGV[3]  the candidate's value (any bytes)
-- ARGV[4]  publish command (PUBLISH, or SPUBLISH for sharded pub/sub)
-- ARGV[5]  the election's channel dlock_election_channel:{N}
-- reply    {1, term, since}: elected (since: the server's clock, Unix ms);
--          {0, pttl}: another leads (or holds N as a lock);
--          {2, term}: this owner leads already
-- errors   WRONGKIND when N is a read-write lock or a grouped multi-lock,
--          WRONGTYPE when a key has another type: nothing is changed
-- #include now.lua
-- #include kind.lua
if redis.call('exists', KEYS[1]) == 1 then
  local refused = not_lock_hash(KEYS[1], ARGV[2], 'an election')
  if refused then
    return refused
  end
  if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return {2, tonumber(redis.call('get', KEYS[2]) or '0')}
  end
  return {0, redis.call('pttl', KEYS[1])}
end
local term = tonumber(redis.call('get', KEYS[2]) or '0') + 1
local since = server_now()
-- publish first: when an ACL refuses the channel, nothing has changed yet
redis.call(ARGV[4], ARGV[5], 'E ' .. term .. ' 0 ' .. since .. ' ' .. ARGV[2] .. ' ' .. ARGV[1] .. '\n' .. ARGV[3])
redis.call('hset', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
redis.call('incr', KEYS[2])
redis.call('del', KEYS[3])
redis.call('hset', KEYS[3], 'owner', ARGV[2], 'term', term, 'version', 0,
           'since', since, 'value', ARGV[3])
return {1, term, since}
