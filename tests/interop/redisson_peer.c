/* A Redisson-behaving test client (redisson_peer.h). The scripts below were
 * written for this test from Redisson's documented behaviour; they are kept
 * apart from dlock's own lua/ on purpose: they are the other side. */
#include "redisson_peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <uuid/uuid.h>

#define THREAD_WAIT_DEFAULT 300000 /* Redisson's threadWaitTime */

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static redisContext *connect_to(int port) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == NULL || c->err) {
    if (c)
      redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv);
  return c;
}

int rp_open(rp_client *p, int port) {
  memset(p, 0, sizeof *p);
  p->port = port;
  uuid_t u;
  uuid_generate_random(u);
  uuid_unparse_lower(u, p->id);
  p->c = connect_to(port);
  return p->c ? 0 : -1;
}

void rp_close(rp_client *p) {
  if (p->c)
    redisFree(p->c);
  p->c = NULL;
}

void rp_owner(const rp_client *p, long tid, char out[64]) {
  snprintf(out, 64, "%s:%ld", p->id, tid);
}

/* Redisson's RedissonObject.prefixName / suffixName. */
static void prefix_name(char *out, size_t n, const char *prefix, const char *name) {
  if (strchr(name, '{'))
    snprintf(out, n, "%s:%s", prefix, name);
  else
    snprintf(out, n, "%s:{%s}", prefix, name);
}

static void suffix_name(char *out, size_t n, const char *name, const char *suffix) {
  if (strchr(name, '{'))
    snprintf(out, n, "%s:%s", name, suffix);
  else
    snprintf(out, n, "{%s}:%s", name, suffix);
}

/* EVAL script with nkeys keys then args (all C strings). NULL on error. */
static redisReply *eval_bin(rp_client *p, const char *script, int nkeys,
                            int nargs, const char **kv, const size_t *lens) {
  const char *argv[24];
  size_t argl[24];
  int argc = 0;
  char nk[8];
  snprintf(nk, sizeof nk, "%d", nkeys);
  argv[argc++] = "EVAL";
  argv[argc++] = script;
  argv[argc++] = nk;
  for (int i = 0; i < nkeys + nargs; i++)
    argv[argc++] = kv[i];
  for (int i = 0; i < argc; i++)
    argl[i] = i >= 3 && lens ? lens[i - 3] : strlen(argv[i]);
  redisReply *r = redisCommandArgv(p->c, argc, argv, argl);
  if (r && r->type == REDIS_REPLY_ERROR) {
    fprintf(stderr, "redisson peer: %s\n", r->str);
    freeReplyObject(r);
    return NULL;
  }
  return r;
}

static redisReply *eval(rp_client *p, const char *script, int nkeys, int nargs,
                        const char **kv) {
  return eval_bin(p, script, nkeys, nargs, kv, NULL);
}

/* An integer answer (nil and status: 0), or -1 on error. */
static int eval_int(rp_client *p, const char *script, int nkeys, int nargs,
                    const char **kv) {
  redisReply *r = eval(p, script, nkeys, nargs, kv);
  if (r == NULL)
    return -1;
  int rc = r->type == REDIS_REPLY_INTEGER ? (int)r->integer : 0;
  freeReplyObject(r);
  return rc;
}

/* nil -> 1 (acquired); integer -> 0 with *ttl. */
static int nil_or_ttl(redisReply *r, int64_t *ttl) {
  if (r == NULL)
    return -1;
  int rc = -1;
  if (r->type == REDIS_REPLY_NIL) {
    rc = 1;
  } else if (r->type == REDIS_REPLY_INTEGER) {
    if (ttl)
      *ttl = r->integer;
    rc = 0;
  }
  freeReplyObject(r);
  return rc;
}

/* 1 / 0 / nil -> 1 / 0 / -2 (unlock answers). */
static int unlock_answer(redisReply *r) {
  if (r == NULL)
    return -1;
  int rc = r->type == REDIS_REPLY_NIL ? -2
           : r->type == REDIS_REPLY_INTEGER ? (int)r->integer
                                            : -1;
  freeReplyObject(r);
  return rc;
}

static void num(char *out, int64_t v) { snprintf(out, 24, "%lld", (long long)v); }

/* ---- waiting: subscribe, try, sleep until a message or the TTL ---------- */

typedef int (*try_fn)(rp_client *p, void *ctx, int64_t *ttl);

static redisContext *subscribe(int port, const char *channel) {
  redisContext *s = connect_to(port);
  if (s == NULL)
    return NULL;
  redisReply *r = redisCommand(s, "SUBSCRIBE %s", channel);
  if (r == NULL) {
    redisFree(s);
    return NULL;
  }
  freeReplyObject(r);
  return s;
}

/* Wait up to ms for a message whose payload is in wake (NULL: any).
 * 1 woken, 0 timed out, -1 error. *s is replaced after a timeout (a timed
 * out hiredis context cannot be used again). */
static int wait_message(redisContext **s, int port, const char *channel,
                        const char *const *wake, int64_t ms) {
  int64_t end = mono_ms() + ms;
  for (;;) {
    int64_t left = end - mono_ms();
    if (left <= 0)
      return 0;
    struct timeval tv = {left / 1000, (left % 1000) * 1000};
    redisSetTimeout(*s, tv);
    redisReply *r = NULL;
    if (redisGetReply(*s, (void **)&r) != REDIS_OK) {
      redisFree(*s);
      *s = subscribe(port, channel);
      return *s ? 0 : -1;
    }
    int hit = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[2]->type == REDIS_REPLY_STRING) {
      hit = wake == NULL;
      for (int i = 0; wake && wake[i]; i++)
        hit |= strcmp(r->element[2]->str, wake[i]) == 0;
    }
    freeReplyObject(r);
    if (hit)
      return 1;
  }
}

/* Redisson's tryLock(waitTime) loop: try; subscribe; then try and sleep for
 * min(ttl, budget left) until acquired or the budget is spent. 1 acquired,
 * 0 budget spent, -1 error. */
static int wait_loop(rp_client *p, const char *channel, const char *const *wake,
                     try_fn attempt, void *ctx, int64_t budget_ms, int *woken) {
  int64_t end = mono_ms() + budget_ms, ttl = -1;
  int rc = attempt(p, ctx, &ttl);
  if (rc != 0)
    return rc;
  redisContext *s = subscribe(p->port, channel);
  if (s == NULL)
    return -1;
  for (;;) {
    rc = attempt(p, ctx, &ttl);
    int64_t left = end - mono_ms();
    if (rc != 0 || left <= 0)
      break;
    int64_t ms = ttl >= 0 && ttl < left ? ttl : left;
    if (p->waits)
      atomic_fetch_add(p->waits, 1);
    int got = wait_message(&s, p->port, channel, wake, ms > 0 ? ms : 1);
    if (got < 0) {
      rc = -1;
      break;
    }
    if (got == 1 && woken)
      (*woken)++;
  }
  if (s)
    redisFree(s);
  return rc;
}

static const char *const lock_wake[] = {"0", "1", NULL}; /* LockPubSub */

/* ---- RLock ---------------------------------------------------------------- */

static const char lock_try[] =
    "if redis.call('exists', KEYS[1]) == 0 or "
    "   redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return nil "
    "end "
    "return redis.call('pttl', KEYS[1])";

int rp_lock_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                int64_t *ttl) {
  char owner[64], lease[24];
  rp_owner(p, tid, owner);
  num(lease, lease_ms);
  const char *kv[] = {name, lease, owner};
  return nil_or_ttl(eval(p, lock_try, 1, 2, kv), ttl);
}

/* RedissonFasterMultiLock's try (Redisson 4.7), written from its
 * behaviour: when a value is held by another owner whose expiry (the
 * Java clock's) is ahead, the longest such wait; else every value is the
 * caller's, its expiry now + lease when later, its count + 1. */
static const char group_try[] =
    "local lease, now, me = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] "
    "local existed = redis.call('exists', KEYS[1]) > 0 "
    "local wait = -1 "
    "for i = 4, existed and #ARGV or 3 do "
    "  local h = redis.call('hget', KEYS[1], ARGV[i]) "
    "  if h and h ~= me then "
    "    local e = redis.call('hget', KEYS[1], ARGV[i]..':'..h..':expire_time') "
    "    if e and tonumber(e) > now and tonumber(e) > wait then wait = tonumber(e) end "
    "  end "
    "end "
    "if wait ~= -1 then return wait - now end "
    "for i = 4, #ARGV do "
    "  redis.call('hset', KEYS[1], ARGV[i], me) "
    "  local ef = ARGV[i]..':'..me..':expire_time' "
    "  local e = redis.call('hget', KEYS[1], ef) "
    "  if not e or tonumber(e) < lease + now then redis.call('hset', KEYS[1], ef, lease + now) end "
    "  redis.call('hincrby', KEYS[1], ARGV[i]..':'..me..':lock_count', 1) "
    "end "
    "local t = redis.call('pttl', KEYS[1]) "
    "if not existed or (t > 0 and lease > t) then redis.call('pexpire', KEYS[1], lease) end "
    "return nil";

/* Its unlock: each live value's count - 1, at 0 its entries go; a freed
 * value publishes 0; nil when a value was not live. */
static const char group_unlock[] =
    "local me, now = ARGV[1], tonumber(ARGV[2]) "
    "local failed, all, freed = false, 1, false "
    "for i = 3, #ARGV do "
    "  local ef, cf = ARGV[i]..':'..me..':expire_time', ARGV[i]..':'..me..':lock_count' "
    "  local e = redis.call('hget', KEYS[1], ef) "
    "  if e and tonumber(e) >= now then "
    "    if redis.call('hincrby', KEYS[1], cf, -1) <= 0 then "
    "      redis.call('hdel', KEYS[1], ef, cf, ARGV[i]) freed = true "
    "    else all = 0 end "
    "  else failed, all = true, 0 end "
    "end "
    "if failed then return nil end "
    "if freed then redis.call('publish', KEYS[2], '0') end "
    "return all";

/* EVAL of script with KEYS[1] (and KEYS[2] when key2), the head
 * arguments, then the fields. */
static redisReply *group_eval(rp_client *p, const char *script,
                              const char *key1, const char *key2,
                              const char *const *head, int nhead,
                              const char *const *fields, int n) {
  const char *argv[2100];
  int argc = 0;
  if (n + nhead + 5 > 2100)
    return NULL;
  argv[argc++] = "EVAL";
  argv[argc++] = script;
  argv[argc++] = key2 ? "2" : "1";
  argv[argc++] = key1;
  if (key2)
    argv[argc++] = key2;
  for (int i = 0; i < nhead; i++)
    argv[argc++] = head[i];
  for (int i = 0; i < n; i++)
    argv[argc++] = fields[i];
  return redisCommandArgv(p->c, argc, argv, NULL);
}

int rp_group_try(rp_client *p, const char *group, long tid, int64_t lease_ms,
                 const char *const *fields, int n, int64_t *ttl) {
  char owner[64], lease[24], now[24];
  rp_owner(p, tid, owner);
  num(lease, lease_ms);
  num(now, wall_ms());
  const char *head[] = {lease, now, owner};
  return nil_or_ttl(group_eval(p, group_try, group, NULL, head, 3, fields, n),
                    ttl);
}

int rp_group_unlock(rp_client *p, const char *group, long tid,
                    const char *const *fields, int n) {
  char owner[64], now[24], channel[512];
  rp_owner(p, tid, owner);
  num(now, wall_ms());
  prefix_name(channel, sizeof channel, "redisson_lock__channel", group);
  const char *head[] = {owner, now};
  return unlock_answer(
      group_eval(p, group_unlock, group, channel, head, 2, fields, n));
}

/* Redisson 4.4's RNonReentrantLock acquire, written from its behaviour: a
 * free lock is taken; its holder asking again gets the error reply the
 * script is given (ARGV[3]); anyone else the PTTL. */
static const char once_try[] =
    "if redis.call('exists', KEYS[1]) == 0 then "
    "  redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return nil "
    "end "
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  return redis.error_reply(ARGV[3]) "
    "end "
    "return redis.call('pttl', KEYS[1])";

int rp_once_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                int64_t *ttl) {
  char owner[64], lease[24];
  rp_owner(p, tid, owner);
  num(lease, lease_ms);
  const char *argv[] = {"EVAL", once_try, "1", name, lease, owner,
                        "NON_REENTRANT_REACQUIRE"};
  redisReply *r = redisCommandArgv(p->c, 7, argv, NULL); /* its error too */
  if (r && r->type == REDIS_REPLY_ERROR) {
    int once = strstr(r->str, "NON_REENTRANT_REACQUIRE") != NULL;
    freeReplyObject(r);
    return once ? -3 : -1;
  }
  return nil_or_ttl(r, ttl);
}

static const char lock_unlock[] =
    "local done = redis.call('get', KEYS[3]) "
    "if done then return tonumber(done) end "
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end "
    "local left = redis.call('hincrby', KEYS[1], ARGV[3], -1) "
    "if left > 0 then "
    "  redis.call('pexpire', KEYS[1], ARGV[2]) "
    "  redis.call('set', KEYS[3], 0, 'px', ARGV[4]) "
    "  return 0 "
    "end "
    "redis.call('del', KEYS[1]) "
    "redis.call('publish', KEYS[2], ARGV[1]) "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[4]) "
    "return 1";

static void request_id(char out[33]) {
  uuid_t u;
  uuid_generate_random(u);
  for (int i = 0; i < 16; i++)
    snprintf(out + 2 * i, 3, "%02x", u[i]);
}

int rp_lock_unlock(rp_client *p, const char *name, long tid) {
  char owner[64], channel[512], latch[600], rid[33];
  rp_owner(p, tid, owner);
  prefix_name(channel, sizeof channel, "redisson_lock__channel", name);
  request_id(rid);
  char base[512];
  prefix_name(base, sizeof base, "redisson_unlock_latch", name);
  snprintf(latch, sizeof latch, "%s:%s", base, rid);
  const char *kv[] = {name, channel, latch, "0", "30000", owner, "10000"};
  int rc = unlock_answer(eval(p, lock_unlock, 3, 4, kv));
  /* Redisson deletes the latch once the answer is in */
  freeReplyObject(redisCommand(p->c, "DEL %s", latch));
  return rc;
}

/* RSpinLock's unlock, written from its behaviour: RLock's counting, no
 * unlock latch, and nothing published. */
static const char spin_unlock[] =
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end "
    "local left = redis.call('hincrby', KEYS[1], ARGV[2], -1) "
    "if left > 0 then "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return 0 "
    "end "
    "redis.call('del', KEYS[1]) "
    "return 1";

int rp_spin_unlock(rp_client *p, const char *name, long tid) {
  char owner[64];
  rp_owner(p, tid, owner);
  const char *kv[] = {name, "30000", owner};
  return unlock_answer(eval(p, spin_unlock, 1, 2, kv));
}

int rp_spin_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t budget_ms) {
  int64_t end = mono_ms() + budget_ms, next = 1;
  int fails = 0;
  for (;;) { /* try, then pause by the default exponential back-off */
    int rc = rp_lock_try(p, name, tid, lease_ms, NULL);
    int64_t left = end - mono_ms();
    if (rc != 0 || left <= 0)
      return rc;
    int64_t pause = next < left ? next : left;
    if (next < 128) {
      next = next * 2 + rand() % (++fails);
      next = next < 128 ? next : 128;
    }
    struct timespec ts = {pause / 1000, (long)(pause % 1000) * 1000000};
    nanosleep(&ts, NULL);
  }
}

typedef struct lock_ctx {
  const char *name;
  long tid;
  int64_t lease_ms, wait_ms;
  int which; /* 0 lock, 1 read, 2 write, 3 fair */
} lock_ctx;

static int lock_attempt(rp_client *p, void *ctx, int64_t *ttl) {
  lock_ctx *l = ctx;
  switch (l->which) {
  case 1:
    return rp_read_try(p, l->name, l->tid, l->lease_ms, ttl);
  case 2:
    return rp_write_try(p, l->name, l->tid, l->lease_ms, ttl);
  case 3:
    return rp_fair_try(p, l->name, l->tid, l->lease_ms, l->wait_ms, 1, ttl);
  default:
    return rp_lock_try(p, l->name, l->tid, l->lease_ms, ttl);
  }
}

int rp_lock_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t budget_ms, int *woken) {
  char channel[512];
  prefix_name(channel, sizeof channel, "redisson_lock__channel", name);
  lock_ctx l = {name, tid, lease_ms, 0, 0};
  return wait_loop(p, channel, lock_wake, lock_attempt, &l, budget_ms, woken);
}

/* ---- RFencedLock ------------------------------------------------------------ */

static const char fenced_try[] =
    "if redis.call('exists', KEYS[1]) == 0 or "
    "   redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  local token = redis.call('incr', KEYS[2]) "
    "  redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return {-1, token} "
    "end "
    "return {redis.call('pttl', KEYS[1]), -1}";

int rp_fenced_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                  int64_t *token, int64_t *ttl) {
  char owner[64], lease[24], token_key[512];
  rp_owner(p, tid, owner);
  num(lease, lease_ms);
  prefix_name(token_key, sizeof token_key, "redisson_lock_token", name);
  const char *kv[] = {name, token_key, lease, owner};
  redisReply *r = eval(p, fenced_try, 2, 2, kv);
  if (r == NULL)
    return -1;
  int rc = -1;
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
    if (r->element[0]->integer == -1) {
      *token = r->element[1]->integer;
      rc = 1;
    } else {
      if (ttl)
        *ttl = r->element[0]->integer;
      rc = 0;
    }
  }
  freeReplyObject(r);
  return rc;
}

/* ---- RFairLock -------------------------------------------------------------- */

/* Purge expired heads (Redisson's rule), shared by the fair scripts. */
#define FAIR_PURGE(NOW)                                                       \
  "while true do "                                                            \
  "  local first = redis.call('lindex', KEYS[2], 0) "                         \
  "  if first == false then break end "                                       \
  "  local t = redis.call('zscore', KEYS[3], first) "                         \
  "  if t ~= false and tonumber(t) <= tonumber(" NOW ") then "                \
  "    redis.call('zrem', KEYS[3], first) "                                   \
  "    redis.call('lpop', KEYS[2]) "                                          \
  "  else break end "                                                         \
  "end "

/* ARGV: lease, owner, wait, now, queue ('1' queue, '0' try only) */
static const char fair_try[] =
    FAIR_PURGE("ARGV[4]")
    "if redis.call('exists', KEYS[1]) == 0 and "
    "   (redis.call('exists', KEYS[2]) == 0 or "
    "    redis.call('lindex', KEYS[2], 0) == ARGV[2]) then "
    "  redis.call('lpop', KEYS[2]) "
    "  redis.call('zrem', KEYS[3], ARGV[2]) "
    "  for _, k in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do "
    "    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), k) "
    "  end "
    "  redis.call('hset', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return nil "
    "end "
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return nil "
    "end "
    "if ARGV[5] == '0' then return 1 end "
    "local mine = redis.call('zscore', KEYS[3], ARGV[2]) "
    "if mine ~= false then "
    "  return tonumber(mine) - tonumber(ARGV[3]) - tonumber(ARGV[4]) "
    "end "
    "local last = redis.call('lindex', KEYS[2], -1) "
    "local ttl "
    "if last ~= false and last ~= ARGV[2] then "
    "  ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4]) "
    "else "
    "  ttl = redis.call('pttl', KEYS[1]) "
    "end "
    "local deadline = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]) "
    "if redis.call('zadd', KEYS[3], deadline, ARGV[2]) == 1 then "
    "  redis.call('rpush', KEYS[2], ARGV[2]) "
    "end "
    "return ttl";

static void fair_keys(const char *name, char queue[512], char timeouts[512]) {
  prefix_name(queue, 512, "redisson_lock_queue", name);
  prefix_name(timeouts, 512, "redisson_lock_timeout", name);
}

int rp_fair_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                int64_t thread_wait_ms, int queue, int64_t *ttl) {
  char owner[64], lease[24], wait[24], now[24], q[512], t[512];
  rp_owner(p, tid, owner);
  num(lease, lease_ms);
  num(wait, thread_wait_ms > 0 ? thread_wait_ms : THREAD_WAIT_DEFAULT);
  num(now, wall_ms() + p->skew_ms);
  fair_keys(name, q, t);
  const char *kv[] = {name, q, t, lease, owner, wait, now, queue ? "1" : "0"};
  return nil_or_ttl(eval(p, fair_try, 3, 5, kv), ttl);
}

/* KEYS: name, queue, timeouts, channel, latch; ARGV: msg, lease, owner, now,
 * latch px */
static const char fair_unlock[] =
    "local done = redis.call('get', KEYS[5]) "
    "if done ~= false then return tonumber(done) end "
    FAIR_PURGE("ARGV[4]")
    "if redis.call('exists', KEYS[1]) == 0 then "
    "  local nxt = redis.call('lindex', KEYS[2], 0) "
    "  if nxt ~= false then "
    "    redis.call('publish', KEYS[4] .. ':' .. nxt, ARGV[1]) "
    "  end "
    "  redis.call('set', KEYS[5], 1, 'px', ARGV[5]) "
    "  return 1 "
    "end "
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end "
    "local left = redis.call('hincrby', KEYS[1], ARGV[3], -1) "
    "if left > 0 then "
    "  redis.call('pexpire', KEYS[1], ARGV[2]) "
    "  redis.call('set', KEYS[5], 0, 'px', ARGV[5]) "
    "  return 0 "
    "end "
    "redis.call('del', KEYS[1]) "
    "redis.call('set', KEYS[5], 1, 'px', ARGV[5]) "
    "local nxt = redis.call('lindex', KEYS[2], 0) "
    "if nxt ~= false then "
    "  redis.call('publish', KEYS[4] .. ':' .. nxt, ARGV[1]) "
    "end "
    "return 1";

int rp_fair_unlock(rp_client *p, const char *name, long tid) {
  char owner[64], now[24], q[512], t[512], channel[512], base[512], latch[600],
      rid[33];
  rp_owner(p, tid, owner);
  num(now, wall_ms() + p->skew_ms);
  fair_keys(name, q, t);
  prefix_name(channel, sizeof channel, "redisson_lock__channel", name);
  prefix_name(base, sizeof base, "redisson_unlock_latch", name);
  request_id(rid);
  snprintf(latch, sizeof latch, "%s:%s", base, rid);
  const char *kv[] = {name, q, t, channel, latch, "0", "30000", owner, now, "10000"};
  int rc = unlock_answer(eval(p, fair_unlock, 5, 5, kv));
  freeReplyObject(redisCommand(p->c, "DEL %s", latch));
  return rc;
}

static const char fair_give_up[] =
    "local queue = redis.call('lrange', KEYS[1], 0, -1) "
    "local i = 1 "
    "while i <= #queue and queue[i] ~= ARGV[1] do i = i + 1 end "
    "i = i + 1 "
    "while i <= #queue do "
    "  redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]) "
    "  i = i + 1 "
    "end "
    "redis.call('zrem', KEYS[2], ARGV[1]) "
    "redis.call('lrem', KEYS[1], 0, ARGV[1]) "
    "return 0";

int rp_fair_give_up(rp_client *p, const char *name, long tid,
                    int64_t thread_wait_ms) {
  char owner[64], wait[24], q[512], t[512];
  rp_owner(p, tid, owner);
  num(wait, thread_wait_ms > 0 ? thread_wait_ms : THREAD_WAIT_DEFAULT);
  fair_keys(name, q, t);
  const char *kv[] = {q, t, owner, wait};
  return eval_int(p, fair_give_up, 2, 2, kv);
}

int rp_fair_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t thread_wait_ms, int64_t budget_ms, int *woken) {
  char owner[64], base[512], channel[600];
  rp_owner(p, tid, owner);
  prefix_name(base, sizeof base, "redisson_lock__channel", name);
  snprintf(channel, sizeof channel, "%s:%s", base, owner);
  lock_ctx l = {name, tid, lease_ms, thread_wait_ms, 3};
  int rc = wait_loop(p, channel, lock_wake, lock_attempt, &l, budget_ms, woken);
  if (rc != 1)
    rp_fair_give_up(p, name, tid, thread_wait_ms);
  return rc;
}

/* ---- RReadWriteLock ----------------------------------------------------------- */

/* KEYS: name, my timeout prefix; ARGV: lease, owner, owner:write */
static const char read_try[] =
    "local mode = redis.call('hget', KEYS[1], 'mode') "
    "if mode == false then "
    "  redis.call('hset', KEYS[1], 'mode', 'read') "
    "  redis.call('hset', KEYS[1], ARGV[2], 1) "
    "  redis.call('set', KEYS[2] .. ':1', 1) "
    "  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return nil "
    "end "
    "if mode == 'read' or (mode == 'write' and "
    "    redis.call('hexists', KEYS[1], ARGV[3]) == 1) then "
    "  local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  local key = KEYS[2] .. ':' .. ind "
    "  redis.call('set', key, 1) "
    "  redis.call('pexpire', key, ARGV[1]) "
    "  local remain = redis.call('pttl', KEYS[1]) "
    "  redis.call('pexpire', KEYS[1], math.max(remain, ARGV[1])) "
    "  return nil "
    "end "
    "return redis.call('pttl', KEYS[1])";

static void read_prefix(const rp_client *p, const char *name, long tid,
                        char out[600]) {
  char owner[64];
  rp_owner(p, tid, owner);
  suffix_name(out, 600, name, owner);
  strncat(out, ":rwlock_timeout", 600 - strlen(out) - 1);
}

int rp_read_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                int64_t *ttl) {
  char owner[64], writer[80], lease[24], prefix[600];
  rp_owner(p, tid, owner);
  snprintf(writer, sizeof writer, "%s:write", owner);
  num(lease, lease_ms);
  read_prefix(p, name, tid, prefix);
  const char *kv[] = {name, prefix, lease, owner, writer};
  return nil_or_ttl(eval(p, read_try, 2, 3, kv), ttl);
}

/* KEYS: name, channel, my timeout prefix, key prefix; ARGV: msg, owner */
static const char read_unlock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode') "
    "if mode == false then "
    "  redis.call('publish', KEYS[2], ARGV[1]) "
    "  return 1 "
    "end "
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1) "
    "if counter == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end "
    "redis.call('del', KEYS[3] .. ':' .. (counter + 1)) "
    "if redis.call('hlen', KEYS[1]) > 1 then "
    "  local maxRemain = -3 "
    "  for _, key in ipairs(redis.call('hkeys', KEYS[1])) do "
    "    local n = tonumber(redis.call('hget', KEYS[1], key)) "
    "    if type(n) == 'number' then "
    "      for i = n, 1, -1 do "
    "        local remain = redis.call('pttl', KEYS[4] .. ':' .. key .. "
    "                                  ':rwlock_timeout:' .. i) "
    "        maxRemain = math.max(remain, maxRemain) "
    "      end "
    "    end "
    "  end "
    "  if maxRemain > 0 then "
    "    redis.call('pexpire', KEYS[1], maxRemain) "
    "    return 0 "
    "  end "
    "  if mode == 'write' then return 0 end "
    "end "
    "redis.call('del', KEYS[1]) "
    "redis.call('publish', KEYS[2], ARGV[1]) "
    "return 1";

int rp_read_unlock(rp_client *p, const char *name, long tid) {
  char owner[64], channel[512], prefix[600], key_prefix[600];
  rp_owner(p, tid, owner);
  prefix_name(channel, sizeof channel, "redisson_rwlock", name);
  read_prefix(p, name, tid, prefix);
  /* Redisson: the timeout prefix split at ":" + owner */
  char needle[80];
  snprintf(needle, sizeof needle, ":%s", owner);
  snprintf(key_prefix, sizeof key_prefix, "%s", prefix);
  char *cut = strstr(key_prefix, needle);
  if (cut)
    *cut = '\0';
  const char *kv[] = {name, channel, prefix, key_prefix, "0", owner};
  return unlock_answer(eval(p, read_unlock, 4, 2, kv));
}

static const char write_try[] =
    "local mode = redis.call('hget', KEYS[1], 'mode') "
    "if mode == false then "
    "  redis.call('hset', KEYS[1], 'mode', 'write') "
    "  redis.call('hset', KEYS[1], ARGV[2], 1) "
    "  redis.call('pexpire', KEYS[1], ARGV[1]) "
    "  return nil "
    "end "
    "if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "  redis.call('hincrby', KEYS[1], ARGV[2], 1) "
    "  local current = redis.call('pttl', KEYS[1]) "
    "  redis.call('pexpire', KEYS[1], current + ARGV[1]) "
    "  return nil "
    "end "
    "return redis.call('pttl', KEYS[1])";

int rp_write_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t *ttl) {
  char owner[64], writer[80], lease[24];
  rp_owner(p, tid, owner);
  snprintf(writer, sizeof writer, "%s:write", owner);
  num(lease, lease_ms);
  const char *kv[] = {name, lease, writer};
  return nil_or_ttl(eval(p, write_try, 1, 2, kv), ttl);
}

/* KEYS: name, channel; ARGV: msg, lease, writer */
static const char write_unlock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode') "
    "if mode == false then "
    "  redis.call('publish', KEYS[2], ARGV[1]) "
    "  return 1 "
    "end "
    "if mode == 'write' then "
    "  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end "
    "  local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1) "
    "  if counter > 0 then "
    "    redis.call('pexpire', KEYS[1], ARGV[2]) "
    "    return 0 "
    "  end "
    "  redis.call('hdel', KEYS[1], ARGV[3]) "
    "  if redis.call('hlen', KEYS[1]) == 1 then "
    "    redis.call('del', KEYS[1]) "
    "    redis.call('publish', KEYS[2], ARGV[1]) "
    "  else "
    "    redis.call('hset', KEYS[1], 'mode', 'read') "
    "  end "
    "  return 1 "
    "end "
    "return nil";

int rp_write_unlock(rp_client *p, const char *name, long tid) {
  char owner[64], writer[80], channel[512];
  rp_owner(p, tid, owner);
  snprintf(writer, sizeof writer, "%s:write", owner);
  prefix_name(channel, sizeof channel, "redisson_rwlock", name);
  const char *kv[] = {name, channel, "1", "30000", writer};
  return unlock_answer(eval(p, write_unlock, 2, 3, kv));
}

int rp_read_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t budget_ms, int *woken) {
  char channel[512];
  prefix_name(channel, sizeof channel, "redisson_rwlock", name);
  lock_ctx l = {name, tid, lease_ms, 0, 1};
  return wait_loop(p, channel, lock_wake, lock_attempt, &l, budget_ms, woken);
}

int rp_write_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                  int64_t budget_ms, int *woken) {
  char channel[512];
  prefix_name(channel, sizeof channel, "redisson_rwlock", name);
  lock_ctx l = {name, tid, lease_ms, 0, 2};
  return wait_loop(p, channel, lock_wake, lock_attempt, &l, budget_ms, woken);
}

/* ---- RCountDownLatch ------------------------------------------------------------ */

static void latch_channel(const char *name, char out[512]) {
  snprintf(out, 512, "redisson_countdownlatch__channel__{%s}", name);
}

int rp_latch_try_set_count(rp_client *p, const char *name, int64_t count) {
  static const char script[] =
      "if redis.call('exists', KEYS[1]) == 0 then "
      "  redis.call('set', KEYS[1], ARGV[2]) "
      "  redis.call('publish', KEYS[2], ARGV[1]) "
      "  return 1 "
      "end "
      "return 0";
  char channel[512], n[24];
  latch_channel(name, channel);
  num(n, count);
  const char *kv[] = {name, channel, "1", n};
  return eval_int(p, script, 2, 2, kv);
}

int rp_latch_count_down(rp_client *p, const char *name) {
  static const char script[] =
      "local v = redis.call('decr', KEYS[1]) "
      "if v <= 0 then redis.call('del', KEYS[1]) end "
      "if v == 0 then redis.call('publish', KEYS[2], ARGV[1]) end";
  char channel[512];
  latch_channel(name, channel);
  const char *kv[] = {name, channel, "0"};
  return eval_int(p, script, 2, 1, kv);
}

static int latch_attempt(rp_client *p, void *ctx, int64_t *ttl) {
  redisReply *r = redisCommand(p->c, "GET %s", (const char *)ctx);
  if (r == NULL)
    return -1;
  int zero = r->type == REDIS_REPLY_NIL || atoll(r->str) <= 0;
  freeReplyObject(r);
  *ttl = -1;
  return zero;
}

int rp_latch_await(rp_client *p, const char *name, int64_t budget_ms, int *woken) {
  static const char *const zero[] = {"0", NULL};
  char channel[512];
  latch_channel(name, channel);
  return wait_loop(p, channel, zero, latch_attempt, (void *)name, budget_ms, woken);
}

/* ---- RSemaphore ------------------------------------------------------------------ */

int rp_sem_try_set_permits(rp_client *p, const char *name, int64_t permits) {
  static const char script[] =
      "local value = redis.call('get', KEYS[1]) "
      "if value == false then "
      "  redis.call('set', KEYS[1], ARGV[1]) "
      "  redis.call('publish', KEYS[2], ARGV[1]) "
      "  return 1 "
      "end "
      "return 0";
  char channel[512], n[24];
  prefix_name(channel, sizeof channel, "redisson_sc", name);
  num(n, permits);
  const char *kv[] = {name, channel, n};
  return eval_int(p, script, 2, 1, kv);
}

int rp_sem_try_acquire(rp_client *p, const char *name, int64_t permits) {
  static const char script[] =
      "local value = redis.call('get', KEYS[1]) "
      "if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then "
      "  redis.call('decrby', KEYS[1], ARGV[1]) "
      "  return 1 "
      "end "
      "return 0";
  char n[24];
  num(n, permits);
  const char *kv[] = {name, n};
  return eval_int(p, script, 1, 1, kv);
}

int rp_sem_release(rp_client *p, const char *name, int64_t permits) {
  static const char script[] =
      "local value = redis.call('incrby', KEYS[1], ARGV[1]) "
      "redis.call('publish', KEYS[2], value)";
  char channel[512], n[24];
  prefix_name(channel, sizeof channel, "redisson_sc", name);
  num(n, permits);
  const char *kv[] = {name, channel, n};
  return eval_int(p, script, 2, 1, kv);
}

typedef struct sem_ctx {
  const char *name;
  int64_t permits;
} sem_ctx;

static int sem_attempt(rp_client *p, void *ctx, int64_t *ttl) {
  sem_ctx *s = ctx;
  *ttl = -1;
  return rp_sem_try_acquire(p, s->name, s->permits);
}

int rp_sem_acquire(rp_client *p, const char *name, int64_t permits,
                   int64_t budget_ms, int *woken) {
  char channel[512];
  prefix_name(channel, sizeof channel, "redisson_sc", name);
  sem_ctx s = {name, permits};
  return wait_loop(p, channel, NULL, sem_attempt, &s, budget_ms, woken);
}

/* ---- RPermitExpirableSemaphore ---------------------------------------------------- */

/* KEYS: name, timeouts, channel; ARGV: permits, expiry, id, now */
static const char permits_try[] =
    "local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[4], "
    "                           'limit', 0, ARGV[1]) "
    "if #expired > 0 then "
    "  redis.call('zrem', KEYS[2], unpack(expired)) "
    "  local value = redis.call('incrby', KEYS[1], #expired) "
    "  if tonumber(value) > 0 then redis.call('publish', KEYS[3], value) end "
    "end "
    "local value = redis.call('get', KEYS[1]) "
    "if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then "
    "  redis.call('decrby', KEYS[1], ARGV[1]) "
    "  redis.call('zadd', KEYS[2], ARGV[2], ARGV[3]) "
    "  return ARGV[3] "
    "end "
    "return nil";

/* Redisson's permit id is 16 random bytes, shown as 32 hex characters and
 * stored raw as the ZSET member. */
static void unhex16(const char *hex, char raw[16]) {
  for (int i = 0; i < 16; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    raw[i] = (char)v;
  }
}

int rp_permits_try_acquire(rp_client *p, const char *name, int64_t lease_ms,
                           char id[33]) {
  char timeouts[512], channel[512], expiry[24], now[24], raw[16];
  suffix_name(timeouts, sizeof timeouts, name, "timeout");
  prefix_name(channel, sizeof channel, "redisson_sc", name);
  int64_t t = wall_ms();
  num(now, t);
  num(expiry, t + lease_ms);
  request_id(id);
  unhex16(id, raw);
  const char *kv[] = {name, timeouts, channel, "1", expiry, raw, now};
  size_t lens[] = {strlen(name), strlen(timeouts), strlen(channel), 1,
                   strlen(expiry), 16, strlen(now)};
  redisReply *r = eval_bin(p, permits_try, 3, 4, kv, lens);
  if (r == NULL)
    return -1;
  int rc = r->type == REDIS_REPLY_STRING ? 1 : r->type == REDIS_REPLY_NIL ? 0 : -1;
  freeReplyObject(r);
  return rc;
}

/* KEYS: name, channel, timeouts; ARGV: id, permits, now */
static const char permits_release[] =
    "local expire = redis.call('zscore', KEYS[3], ARGV[1]) "
    "local removed = redis.call('zrem', KEYS[3], ARGV[1]) "
    "if tonumber(removed) ~= 1 then return 0 end "
    "local value = redis.call('incrby', KEYS[1], ARGV[2]) "
    "redis.call('publish', KEYS[2], value) "
    "if tonumber(expire) <= tonumber(ARGV[3]) then return 0 end "
    "return 1";

int rp_permits_release(rp_client *p, const char *name, const char *id) {
  char timeouts[512], channel[512], now[24], raw[16];
  suffix_name(timeouts, sizeof timeouts, name, "timeout");
  prefix_name(channel, sizeof channel, "redisson_sc", name);
  num(now, wall_ms());
  unhex16(id, raw);
  const char *kv[] = {name, channel, timeouts, raw, "1", now};
  size_t lens[] = {strlen(name), strlen(channel), strlen(timeouts), 16, 1,
                   strlen(now)};
  redisReply *r = eval_bin(p, permits_release, 3, 3, kv, lens);
  if (r == NULL)
    return -1;
  int rc = r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
  freeReplyObject(r);
  return rc;
}
