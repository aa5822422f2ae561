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
-- {0, 'newer write'} (the data saw a newer token: the counter was reset).
local function guard_check()
  local field, token = ARGV[1], ARGV[2]
  if field ~= '' then
    if redis.call('hexists', KEYS[1], field) == 0 then
      return false, {0, 'not held'}
    end
  elseif redis.call('exists', KEYS[1]) == 0 then
    return false, {0, 'not held'}
  end
  if token == '' then
    return true, nil
  end
  local current = tonumber(redis.call('get', KEYS[2]) or '0')
  local mine = current
  if token ~= '*' then
    mine = tonumber(token)
  end
  if mine == nil or mine < current then
    return false, {0, 'newer grant'}
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
