-- What a name holds, for the wrong-kind answers of the readers
-- (lock_state.lua, rwlock_state.lua, group_state.lua, election_state.lua,
-- permits_state.lua) and of the writers on a hash (the acquires and force
-- releases): a line "-- #include kind.lua" embeds it.

-- hash_kind(key), of an existing hash: 'read-write lock' (a mode field);
-- 'lock' (one field: a lock has one holder, its owner -> its count); else
-- 'grouped multi-lock' (a held value is three fields: F -> its holder,
-- F:U:T:expire_time, F:U:T:lock_count). HLEN is O(1), and in the ACL dlock
-- documents already.
local function hash_kind(key)
  if redis.call('hexists', key, 'mode') == 1 then
    return 'read-write lock'
  end
  if redis.call('hlen', key) == 1 then
    return 'lock'
  end
  return 'grouped multi-lock'
end

-- name_kind(key): 'none'; for a hash, hash_kind's answer; 'count' (a
-- string holding an integer); or the Redis type ('string', 'list', 'set',
-- 'zset', 'stream').
local function name_kind(key)
  local t = redis.call('type', key).ok
  if t == 'hash' then
    return hash_kind(key)
  end
  if t == 'string' and tonumber(redis.call('get', key)) ~= nil then
    return 'count'
  end
  return t
end

-- wrong_kind(found, what): the error WRONGKIND saying the name holds found,
-- not what (a reader changes nothing).
local function wrong_kind(found, what)
  local words = {lock = 'a lock (a hash)', count = 'a count (a latch or a semaphore)',
                 string = 'a string', list = 'a list',
                 set = 'a set', zset = 'a sorted set', stream = 'a stream'}
  return redis.error_reply('WRONGKIND the name holds ' ..
    (words[found] or ('a ' .. found)) .. ', not ' .. what .. ': nothing was changed')
end

-- not_lock_hash(key, me, what): for a lock's writer about to use key as a
-- lock's hash (owner fields -> counts): the WRONGKIND error when it holds
-- a read-write lock or a grouped multi-lock, else nil (absent, or a
-- lock's). The owner's own field me in a hash without a mode field is a
-- lock's (a group has no bare owner field): no field is read for it.
local function not_lock_hash(key, me, what)
  if redis.call('exists', key) == 0 then
    return nil
  end
  if redis.call('hexists', key, 'mode') == 1 then
    return wrong_kind('read-write lock', what)
  end
  if me ~= '' and redis.call('hexists', key, me) == 1 then
    return nil
  end
  if redis.call('hlen', key) ~= 1 then -- hash_kind's rule, mode read above
    return wrong_kind('grouped multi-lock', what)
  end
  return nil
end

-- not_group_hash(key): for a grouped multi-lock's writer, the WRONGKIND
-- error when key holds a lock's or a read-write lock's hash, else nil.
local function not_group_hash(key)
  if redis.call('exists', key) == 0 then
    return nil
  end
  local found = hash_kind(key)
  if found ~= 'grouped multi-lock' then
    return wrong_kind(found, 'a grouped multi-lock')
  end
  return nil
end
