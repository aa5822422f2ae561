-- Guarded write: one command, run only while the caller holds the lock and,
-- for a fenced lock, only with a token no older than any the data saw.
-- KEYS[1..3], ARGV[1..2]  the guard's (lua/include/guard.lua)
-- KEYS[4..] the command's keys (declared: a cluster routes and checks them)
-- ARGV[3..] the command and its arguments
-- reply    {1, the command's reply} when it ran; {0, why} when refused
--          (guard.lua); {2, error text} when the command itself failed:
--          nothing was written then
-- #include guard.lua
local ok, mine = guard_check()
if not ok then
  return mine
end
local reply = redis.pcall(unpack(ARGV, 3))
if type(reply) == 'table' and reply.err then
  return {2, reply.err}
end
guard_record(mine)
return {1, reply}
