-- What a name holds, for the readers' wrong-kind answers (lock_state.lua,
-- rwlock_state.lua, group_state.lua, election_state.lua, permits_state.lua):
-- a line "-- #include kind.lua" embeds it.
-- name_kind(key): 'none'; 'read-write lock' (a hash with a mode field);
-- 'lock' (another hash); 'count' (a string holding an integer); or the
-- Redis type ('string', 'list', 'set', 'zset', 'stream').
local function name_kind(key)
  local t = redis.call('type', key).ok
  if t == 'hash' then
    if redis.call('hexists', key, 'mode') == 1 then
      return 'read-write lock'
    end
    return 'lock'
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
