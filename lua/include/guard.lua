-- Shared by the guarded writes (guarded_call.lua, guarded_eval.lua): a line
-- "-- #include guard.lua" embeds it (tools/embed_lua.py).
-- KEYS[1]  the lock hash N
-- KEYS[2]  the token counter redisson_lock_token:{N} (a fenced lock), else N
-- KEYS[3]  the fence dlock_fence:{N}: the newest token a guarded write used
-- ARGV[1]  the holder's field "U:T" (or "U:T:write"); "" when the caller
--          proves its hold by its token alone (ARGV[2])
-- ARGV[2]  "" (not fenced), "*" (fenced: the caller holds, its token is the
--          counter's value), or the caller's token (fenced, token alone)
--
-- guard_check(): true and the token to record (nil when not fenced), or
-- false and the refusal to return: {0, 'not held'} (the hold is gone: lease
-- passed, released, lost), {0, 'newer grant'} (a later holder was granted),
-- {0, 'newer write'} (the data saw a newer token: the counter was reset),
-- {0, 'never granted', counter} (a token alone above the counter: the lock
-- never handed it out). A token alone on a name that holds no fenced lock
-- (another type, a read-write lock, a lock without a counter) is the error
-- WRONGKIND, naming what the name holds.
local function guard_check()
  local field, token = ARGV[1], ARGV[2]
  if field ~= '' then
    if redis.call('hexists', KEYS[1], field) == 0 then
      return false, {0, 'not held'}
    end
  else
    local t = redis.call('type', KEYS[1]).ok
    if t == 'none' then
      return false, {0, 'not held'}
    end
    if t ~= 'hash' then
      return false, redis.error_reply('WRONGKIND the name holds a ' .. t ..
        ', not a fenced lock or an election: nothing was written')
    end
    if redis.call('hexists', KEYS[1], 'mode') == 1 then
      return false, redis.error_reply('WRONGKIND the name holds a read-write ' ..
        'lock, not a fenced lock or an election: nothing was written')
    end
  end
  if token == '' then
    return true, nil
  end
  local counter = redis.call('get', KEYS[2])
  if token ~= '*' and counter == false then
    return false, redis.error_reply('WRONGKIND the name holds a lock without ' ..
      'fencing tokens (no ' .. KEYS[2] .. '), not a fenced lock or an ' ..
      'election: nothing was written')
  end
  local current = tonumber(counter or '0')
  local mine = current
  if token ~= '*' then
    mine = tonumber(token)
  end
  if mine == nil or current == nil or mine < current then
    return false, {0, 'newer grant'}
  end
  if mine > current then
    return false, {0, 'never granted', current}
  end
  if mine < tonumber(redis.call('get', KEYS[3]) or '0') then
    return false, {0, 'newer write'}
  end
  return true, mine
end

-- After the write: the data has now seen token mine (nil: not fenced).
local function guard_record(mine)
  if mine then
    redis.call('set', KEYS[3], mine)
  end
end
