-- Guarded write: a caller's Lua body, run only after the guard's checks
-- (lua/include/guard.lua), in the same script. The library puts the body
-- in place of the line "-- #body" and sends the result with EVAL; as it
-- stands (an empty body) it is never run.
-- KEYS[1..3], ARGV[1..2]  the guard's
-- KEYS[4..], ARGV[3..]    the body's KEYS and ARGV
-- reply    {1, the body's reply} when it ran; {0, why} when refused
-- #include guard.lua
local ok, mine = guard_check()
if not ok then
  return mine
end
local function body(KEYS, ARGV)
-- #body
end
local reply = body({unpack(KEYS, 4)}, {unpack(ARGV, 3)})
guard_record(mine)
return {1, reply}
