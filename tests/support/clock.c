/* A server's clock jump, modelled (clock.h). */
#include <hiredis/hiredis.h>

#include "clock.h"

/* Every key of the server: its time to live less D (deleted when it ran
 * out), and the server times stored in the structures below moved by -D.
 * Reply {keys moved, keys expired}. */
static const char script[] =
    "local d = tonumber(ARGV[1])\n"
    "local moved, expired = 0, 0\n"
    "for _, k in ipairs(redis.call('keys', '*')) do\n"
    "  local t = redis.call('type', k)['ok']\n"
    "  if t == 'zset' and (string.find(k, '^redisson_lock_timeout:') or\n"
    "                      string.sub(k, -8) == ':timeout') then\n"
    "    local all = redis.call('zrange', k, 0, -1, 'withscores')\n"
    "    for i = 1, #all, 2 do\n"
    "      redis.call('zadd', k, tonumber(all[i + 1]) - d, all[i])\n"
    "    end\n"
    "  elseif t == 'hash' then\n"
    "    local all = redis.call('hgetall', k)\n"
    "    for i = 1, #all, 2 do\n"
    "      if string.sub(all[i], -12) == ':expire_time' then\n"
    "        redis.call('hincrby', k, all[i], -d)\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  local ttl = redis.call('pttl', k)\n"
    "  if ttl > 0 then\n"
    "    if ttl <= d then\n"
    "      redis.call('del', k)\n"
    "      expired = expired + 1\n"
    "    else\n"
    "      redis.call('pexpire', k, ttl - d)\n"
    "      moved = moved + 1\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return {moved, expired}\n";

int sim_clock_jump(int port, int64_t delta_ms, int64_t *expired) {
  struct timeval tv = {2, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == NULL || c->err) {
    if (c)
      redisFree(c);
    return -1;
  }
  redisReply *r = redisCommand(c, "EVAL %s 0 %lld", script, (long long)delta_ms);
  int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2;
  if (ok && expired)
    *expired = r->element[1]->integer;
  if (r)
    freeReplyObject(r);
  redisFree(c);
  return ok ? 0 : -1;
}
