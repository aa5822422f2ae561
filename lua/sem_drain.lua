-- Semaphore: take every available permit.
-- KEYS[1]  the semaphore N
-- reply    the number taken (0 when none were available). A count below 0
--          is left alone: draining must not create permits.
local available = tonumber(redis.call('get', KEYS[1]) or '0')
if available > 0 then
  redis.call('set', KEYS[1], '0', 'keepttl')
  return available
end
return 0
