-- Shared by the grouped multi-lock's scripts: a line "-- #include group.lua"
-- embeds it. Calls over many fields go in chunks of 1000 arguments (Lua's
-- unpack has a limit); every list here is a Lua array.

-- The values of names in key's hash, aligned with names (false: absent).
local function hmget_all(key, names)
  local out = {}
  for i = 1, #names, 1000 do
    local got = redis.call('hmget', key, unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #got do
      out[i + j - 1] = got[j]
    end
  end
  return out
end

-- HSET of a flat list of fields and values.
local function hset_all(key, pairs)
  for i = 1, #pairs, 1000 do
    redis.call('hset', key, unpack(pairs, i, math.min(i + 999, #pairs)))
  end
end

-- HDEL of names.
local function hdel_all(key, names)
  for i = 1, #names, 1000 do
    redis.call('hdel', key, unpack(names, i, math.min(i + 999, #names)))
  end
end

-- ARGV[from..] as an array.
local function argv_from(from)
  local out = {}
  for i = from, #ARGV do
    out[#out + 1] = ARGV[i]
  end
  return out
end
