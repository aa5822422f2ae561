-- Shared by the fair lock's scripts: a line "-- #include fair_queue.lua"
-- embeds it (tools/embed_lua.py).
-- Its scripts include now.lua first: server_now() is the server's clock,
-- so every dlock client's deadlines are on one clock.

-- Pop dead waiters off the head of the queue and return the head left (false
-- when the queue is empty). A dlock waiter (a member of the liveness zset) is
-- dead once its liveness deadline has passed: it stopped trying. Any other
-- entry (a Redisson client's) is dead once its Redisson deadline has passed,
-- as Redisson itself purges it, and never earlier. Like Redisson's purge,
-- this leaves the other deadlines as they are.
local function fair_purge(queue, timeouts, alive, now)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return false
    end
    local deadline = redis.call('zscore', alive, head) or
                     redis.call('zscore', timeouts, head)
    if deadline and tonumber(deadline) > now then
      return head
    end
    redis.call('lpop', queue)
    redis.call('zrem', timeouts, head)
    redis.call('zrem', alive, head)
  end
end
