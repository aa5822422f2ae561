-- Shared by the scripts that keep a count (the latch, both semaphores): a
-- line "-- #include counts.lua" embeds it (tools/embed_lua.py).
--
-- What kind holds key: its Redis type ('none' or 'string'), or nil and the
-- refusal to return when it holds something else (a lock's hash, ...);
-- what names the caller's kind ('count-down latch', 'semaphore').
local function count_type(key, what)
  local t = redis.call('type', key)['ok']
  if t ~= 'none' and t ~= 'string' then
    return nil, redis.error_reply('WRONGKIND the name holds a ' ..
                                  (t == 'hash' and 'lock' or t) .. ', not a ' .. what)
  end
  return t
end

-- The count under key (0 when there is none), or nil and the refusal to
-- return when key holds a string that is not a number. A lock's hash makes
-- GET fail with WRONGTYPE, as before.
local function count_of(key, what)
  local v = redis.call('get', key)
  if v and not tonumber(v) then
    return nil, redis.error_reply('WRONGKIND the name holds a string that is ' ..
                                  'not a count, not a ' .. what)
  end
  return tonumber(v) or 0
end
