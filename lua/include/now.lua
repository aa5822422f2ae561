-- The server's clock in ms (TIME): one clock for every client's expiries.
local function server_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
