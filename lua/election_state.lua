-- Leader election: who leads.
-- KEYS[1]  the lock hash N
-- KEYS[2]  the term counter redisson_lock_token:{N}
-- KEYS[3]  the leader's record dlock_election:{N}
-- reply    {1, term, version, since, owner, value, pttl} while a leader
--          holds N; {0, term, 0, 0, '', '', pttl} when nobody leads (term:
--          the last granted, 0 none ever; pttl: N's, -2 when N is free, or
--          the time left of a lock on N that is not a leader's)
-- errors   WRONGKIND when N (or the record) holds another kind (kind.lua)
-- #include kind.lua
local found = name_kind(KEYS[1])
if found ~= 'none' and found ~= 'lock' then
  return wrong_kind(found, 'an election')
end
if redis.call('type', KEYS[3]).ok ~= 'none' and redis.call('type', KEYS[3]).ok ~= 'hash' then
  return wrong_kind(redis.call('type', KEYS[3]).ok, 'an election record (' .. KEYS[3] .. ')')
end
local r = redis.call('hmget', KEYS[3], 'owner', 'term', 'version', 'since', 'value')
local pttl = redis.call('pttl', KEYS[1])
if r[1] and redis.call('hexists', KEYS[1], r[1]) == 1 then
  return {1, tonumber(r[2]), tonumber(r[3]), tonumber(r[4]), r[1], r[5], pttl}
end
return {0, tonumber(redis.call('get', KEYS[2]) or '0'), 0, 0, '', '', pttl}
