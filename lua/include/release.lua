-- The first steps of a release of a lock's hash (lock_release.lua,
-- fair_release.lua, election_resign.lua): a line "-- #include release.lua"
-- embeds it.
-- release_replay(latch, lock, what): the first outcome of this release
-- when its unlock latch holds one (a retry after a lost answer replays
-- it); the error WRONGKIND when lock is a read-write lock's hash (it is
-- left as it is); false when the release goes on.
local function release_replay(latch, lock, what)
  local done = redis.call('get', latch)
  if done then
    return tonumber(done)
  end
  if redis.call('hexists', lock, 'mode') == 1 then
    return redis.error_reply('WRONGKIND the name holds a read-write lock, not ' .. what)
  end
  return false
end
