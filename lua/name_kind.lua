-- What a name holds, for a wrong-kind answer worked out apart from the
-- call that found it (a latch's or semaphore's GET that met a hash).
-- KEYS[1]  the name
-- reply    'none', 'lock', 'read-write lock', 'grouped multi-lock',
--          'count', or the Redis type (kind.lua's name_kind)
-- #include kind.lua
return name_kind(KEYS[1])
