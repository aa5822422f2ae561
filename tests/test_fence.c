/* Guarded writes (include/dlock/fence.h, docs/fencing.md): a write runs
 * only while its caller holds the lock and, for a fenced lock, only with
 * the newest token; a refused write changes nothing and says
 * DLOCK_EFENCED. Runs standalone and (fence-cluster) on a cluster, where
 * keys outside the lock's slot are refused before anything is sent. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

/* A data key in the slot of lock name: "{NAME}:what". */
static const char *data_key(const char *name, const char *what) {
  static _Thread_local char buf[4][300];
  static _Thread_local int i;
  char *b = buf[i++ % 4];
  snprintf(b, 300, "{%s}:%s", name, what);
  return b;
}

/* dlock_guarded_call with NUL-terminated words. */
static int gcall(dlock_lock *l, dlock_reply **reply, int argc, ...) {
  const char *argv[8];
  size_t lens[8];
  va_list ap;
  va_start(ap, argc);
  for (int i = 0; i < argc; i++) {
    argv[i] = va_arg(ap, const char *);
    lens[i] = strlen(argv[i]);
  }
  va_end(ap);
  return dlock_guarded_call(l, (size_t)argc, argv, lens, reply);
}

static char *get_str(const char *key) {
  redisReply *r = th_cmd(&srv, "GET %s", key);
  char *s = r && r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
  if (r)
    freeReplyObject(r);
  return s;
}

static int key_exists(const char *key) { return th_int(&srv, "EXISTS %s", key) == 1; }

/* While held the write runs (its reply handed over); before the acquire,
 * after the release and after a force release it is refused and nothing
 * is written. */
static void test_runs_only_while_held(void) {
  const char *name = th_name("held");
  const char *k = data_key(name, "v");
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &l), DLOCK_OK);
  dlock_reply *r = NULL;
  TH_ASSERT_RC(gcall(l, &r, 3, "SET", k, "before"), DLOCK_EFENCED);
  CU_ASSERT_PTR_NULL(r);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "no longer holds"));
  CU_ASSERT(!key_exists(k));
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(gcall(l, &r, 3, "SET", k, "held"), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_EQUAL(r->type, DLOCK_REPLY_STATUS);
  CU_ASSERT_STRING_EQUAL(r->str, "OK");
  dlock_reply_free(r);
  TH_ASSERT_RC(gcall(l, &r, 3, "INCRBY", data_key(name, "n"), "5"), DLOCK_OK);
  CU_ASSERT_EQUAL(r->type, DLOCK_REPLY_INTEGER);
  CU_ASSERT_EQUAL(r->integer, 5);
  dlock_reply_free(r);
  TH_ASSERT_RC(gcall(l, NULL, 4, "HSET", data_key(name, "h"), "f", "1"), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(gcall(l, &r, 3, "SET", k, "after"), DLOCK_EFENCED);
  char *v = get_str(k);
  CU_ASSERT_STRING_EQUAL(v ? v : "", "held");
  free(v);
  /* another owner's hold does not let this one write */
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_lock *l2 = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c2, name, NULL, &l2), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l2, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(gcall(l, NULL, 3, "SET", k, "intruder"), DLOCK_EFENCED);
  TH_ASSERT_RC(gcall(l2, NULL, 3, "SET", k, "second"), DLOCK_OK);
  int released = 0;
  TH_ASSERT_RC(dlock_force_release(l2, &released), DLOCK_OK);
  TH_ASSERT_RC(gcall(l2, NULL, 3, "SET", k, "forced"), DLOCK_EFENCED);
  v = get_str(k);
  CU_ASSERT_STRING_EQUAL(v ? v : "", "second");
  free(v);
  dlock_lock_free(l2);
  dlock_client_close(c2);
  dlock_lock_free(l);
}

/* The paused holder: its lease passes, another client is granted the
 * lock and writes; the first one's write is then refused (by hold and, for
 * the fenced lock, by token). */
static void test_lease_passed(void) {
  for (int fenced = 0; fenced < 2; fenced++) {
    const char *name = th_name(fenced ? "fpaused" : "paused");
    const char *k = data_key(name, "v");
    dlock_lock *a = NULL, *b = NULL;
    dlock_client *c2 = th_client(&srv, NULL);
    int (*make)(dlock_client *, const char *, const dlock_lock_opts *,
                dlock_lock **) = fenced ? dlock_fenced_lock_new
                                        : dlock_reentrant_lock_new;
    TH_ASSERT_RC(make(cl, name, NULL, &a), DLOCK_OK);
    TH_ASSERT_RC(make(c2, name, NULL, &b), DLOCK_OK);
    dlock_grant ga, gb;
    TH_ASSERT_RC(dlock_acquire_grant(a, 0, 150, &ga), DLOCK_OK);
    TH_ASSERT_RC(gcall(a, NULL, 3, "SET", k, "a"), DLOCK_OK);
    /* b waits for a's lease to pass: the event "a's hold is gone" */
    TH_ASSERT_RC(dlock_acquire_grant(b, 5000, 30000, &gb), DLOCK_OK);
    if (fenced)
      CU_ASSERT(gb.token > ga.token);
    TH_ASSERT_RC(gcall(b, NULL, 3, "SET", k, "b"), DLOCK_OK);
    TH_ASSERT_RC(gcall(a, NULL, 3, "SET", k, "stale"), DLOCK_EFENCED);
    char *v = get_str(k);
    CU_ASSERT_STRING_EQUAL(v ? v : "", "b");
    free(v);
    if (fenced) { /* the data saw b's token */
      redisReply *r = th_cmd(&srv, "GET dlock_fence:{%s}", name);
      CU_ASSERT(r && r->type == REDIS_REPLY_STRING &&
                atoll(r->str) == gb.token);
      if (r)
        freeReplyObject(r);
    }
    TH_ASSERT_RC(dlock_release(b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_client_close(c2);
  }
}

/* By token alone (dlock_fenced_call, the tool's `dlock write`): the newest
 * grant's token while the lock is held writes; an older one, or any after
 * the release, is refused. A token counter that went back (a restart that
 * lost it) is caught by the fence: the data saw a newer token. */
static void test_token_alone(void) {
  const char *name = th_name("token");
  const char *k = data_key(name, "v");
  const char *argv[] = {"SET", k, "x"};
  size_t lens[] = {3, strlen(k), 1};
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fenced_lock_new(cl, name, NULL, &l), DLOCK_OK);
  dlock_grant g1, g2;
  TH_ASSERT_RC(dlock_acquire_grant(l, 0, 30000, &g1), DLOCK_OK);
  TH_ASSERT_RC(dlock_fenced_call(cl, name, g1.token, 3, argv, lens, NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_fenced_call(cl, name, g1.token, 3, argv, lens, NULL),
               DLOCK_EFENCED);
  TH_ASSERT_RC(dlock_acquire_grant(l, 0, 30000, &g2), DLOCK_OK);
  TH_ASSERT_RC(dlock_fenced_call(cl, name, g1.token, 3, argv, lens, NULL),
               DLOCK_EFENCED);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "later holder"));
  TH_ASSERT_RC(dlock_fenced_call(cl, name, g2.token, 3, argv, lens, NULL), DLOCK_OK);
  /* the counter goes back (lost in a restart); the data keeps its fence */
  freeReplyObject(th_cmd(&srv, "SET redisson_lock_token:{%s} 0", name));
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_grant g3;
  TH_ASSERT_RC(dlock_acquire_grant(l, 0, 30000, &g3), DLOCK_OK);
  CU_ASSERT(g3.token < g2.token);
  TH_ASSERT_RC(gcall(l, NULL, 3, "SET", k, "y"), DLOCK_EFENCED);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "newer token"));
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  /* bad tokens and names */
  TH_ASSERT_RC(dlock_fenced_call(cl, name, 0, 3, argv, lens, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_fenced_call(cl, NULL, 1, 3, argv, lens, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_fenced_call(NULL, name, 1, 3, argv, lens, NULL), DLOCK_EINVAL);
}

/* A token the lock never granted (above its counter) is refused as such
 * (DLOCK_EINVAL: forged or mistyped) and leaves the fence alone, so the
 * real holder's writes go on; a token below the newest grant is refused
 * before the newer holder writes anything; a name with no fenced lock on
 * it (another type, a read-write lock, a lock without a counter) is the
 * wrong kind and nothing is left behind. */
static void test_token_forged(void) {
  const char *name = th_name("forged");
  const char *k = data_key(name, "v");
  const char *argv[] = {"SET", k, "x"};
  size_t lens[] = {3, strlen(k), 1};
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fenced_lock_new(cl, name, NULL, &l), DLOCK_OK);
  dlock_grant g1;
  TH_ASSERT_RC(dlock_acquire_grant(l, 0, 30000, &g1), DLOCK_OK);
  TH_ASSERT_RC(dlock_fenced_call(cl, name, g1.token + 998, 3, argv, lens, NULL),
               DLOCK_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "was never granted"));
  CU_ASSERT_FALSE(key_exists(k));
  char fence[300];
  snprintf(fence, sizeof fence, "dlock_fence:{%s}", name);
  CU_ASSERT_FALSE(key_exists(fence));
  /* the holder's own token still writes */
  TH_ASSERT_RC(dlock_fenced_call(cl, name, g1.token, 3, argv, lens, NULL), DLOCK_OK);
  /* a newer grant fences the older token off before it writes anything */
  TH_ASSERT_RC(dlock_force_release(l, NULL), DLOCK_OK);
  dlock_lock *l2 = NULL;
  dlock_grant g2;
  TH_ASSERT_RC(dlock_fenced_lock_new(cl, name, NULL, &l2), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire_grant(l2, 0, 30000, &g2), DLOCK_OK);
  TH_ASSERT_RC(dlock_fenced_call(cl, name, g1.token, 3, argv, lens, NULL),
               DLOCK_EFENCED);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "later holder"));
  TH_ASSERT_RC(dlock_release(l2), DLOCK_OK);
  dlock_lock_free(l2);
  dlock_lock_free(l);
  /* names that hold no fenced lock: the type found is named */
  static const struct {
    const char *setup, *says;
  } other[] = {{"SET %s hello", "holds a string"},
               {"RPUSH %s a", "holds a list"},
               {"SADD %s a", "holds a set"},
               {"ZADD %s 1 a", "holds a zset"},
               {"HSET %s mode read", "holds a read-write lock"},
               {"HSET %s someone:1 1", "lock without fencing tokens"}};
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    char n[200];
    snprintf(n, sizeof n, "%s-%zu", th_name("other"), i);
    freeReplyObject(th_cmd(&srv, other[i].setup, n));
    const char *kk = data_key(n, "v");
    const char *av[] = {"SET", kk, "x"};
    size_t al[] = {3, strlen(kk), 1};
    TH_ASSERT_RC(dlock_fenced_call(cl, n, 1, 3, av, al, NULL), DLOCK_EKIND);
    CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), other[i].says));
    if (strstr(dlock_errmsg(), other[i].says) == NULL)
      fprintf(stderr, "\n  %s: %s", other[i].setup, dlock_errmsg());
    CU_ASSERT_FALSE(key_exists(kk));
    snprintf(fence, sizeof fence, "dlock_fence:{%s}", n);
    CU_ASSERT_FALSE(key_exists(fence));
  }
}

/* Every kind that can guard: fair, both read-write halves (a reader guards
 * with its read hold); a kind that cannot says so. */
static void test_kinds(void) {
  const char *name = th_name("fair");
  dlock_lock *f = NULL;
  TH_ASSERT_RC(dlock_fair_lock_new(cl, name, NULL, &f), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(f, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(gcall(f, NULL, 3, "SET", data_key(name, "v"), "1"), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(f), DLOCK_OK);
  TH_ASSERT_RC(gcall(f, NULL, 3, "SET", data_key(name, "v"), "2"), DLOCK_EFENCED);
  dlock_lock_free(f);
  name = th_name("rw");
  dlock_rwlock *rw = NULL;
  TH_ASSERT_RC(dlock_rwlock_new(cl, name, NULL, &rw), DLOCK_OK);
  dlock_lock *w = dlock_rwlock_write(rw), *r = dlock_rwlock_read(rw);
  TH_ASSERT_RC(gcall(w, NULL, 3, "SET", data_key(name, "v"), "1"), DLOCK_EFENCED);
  TH_ASSERT_RC(dlock_acquire(w, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(gcall(w, NULL, 3, "SET", data_key(name, "v"), "1"), DLOCK_OK);
  TH_ASSERT_RC(gcall(r, NULL, 3, "SET", data_key(name, "v"), "2"), DLOCK_EFENCED);
  TH_ASSERT_RC(dlock_acquire(r, 0, 30000), DLOCK_OK); /* downgrade */
  TH_ASSERT_RC(dlock_release(w), DLOCK_OK);
  TH_ASSERT_RC(gcall(w, NULL, 3, "SET", data_key(name, "v"), "3"), DLOCK_EFENCED);
  TH_ASSERT_RC(gcall(r, NULL, 3, "SET", data_key(name, "v"), "4"), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
  dlock_rwlock_free(rw);
  /* a multi-lock cannot */
  dlock_lock *m1 = NULL, *m = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, th_name("m1"), NULL, &m1), DLOCK_OK);
  TH_ASSERT_RC(dlock_multi_new(&m1, 1, &m), DLOCK_OK);
  TH_ASSERT_RC(gcall(m, NULL, 3, "SET", "k", "v"), DLOCK_ENOTSUP);
  dlock_lock_free(m);
  dlock_lock_free(m1);
}

/* A body of one's own: read and write together, after the same checks. */
static void test_eval(void) {
  const char *name = th_name("eval");
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fenced_lock_new(cl, name, NULL, &l), DLOCK_OK);
  const char *keys[] = {data_key(name, "n")};
  size_t klens[] = {strlen(keys[0])};
  const char *args[] = {"7"};
  size_t alens[] = {1};
  const char *body = "local v = redis.call('incrby', KEYS[1], ARGV[1])\n"
                     "return {v, 'done'}";
  dlock_reply *r = NULL;
  TH_ASSERT_RC(dlock_guarded_eval(l, body, 1, keys, klens, 1, args, alens, &r),
               DLOCK_EFENCED);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_guarded_eval(l, body, 1, keys, klens, 1, args, alens, &r),
               DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_EQUAL(r->type, DLOCK_REPLY_ARRAY);
  CU_ASSERT_EQUAL_FATAL(r->elements, 2);
  CU_ASSERT_EQUAL(r->element[0]->integer, 7);
  CU_ASSERT_STRING_EQUAL(r->element[1]->str, "done");
  dlock_reply_free(r);
  /* a body that fails is the server's error */
  TH_ASSERT_RC(dlock_guarded_eval(l, "return redis.call('nosuchcommand')", 1,
                                  keys, klens, 0, NULL, NULL, NULL),
               DLOCK_EREDIS);
  TH_ASSERT_RC(dlock_guarded_eval(l, "", 0, NULL, NULL, 0, NULL, NULL, NULL),
               DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_guarded_eval(l, NULL, 0, NULL, NULL, 0, NULL, NULL, NULL),
               DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
}

/* Bad input: clear errors, nothing written, no crash. */
static void test_bad_input(void) {
  const char *name = th_name("bad");
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fenced_lock_new(cl, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  const char *k = data_key(name, "v");
  TH_ASSERT_RC(gcall(NULL, NULL, 3, "SET", k, "v"), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_guarded_call(l, 0, NULL, NULL, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_guarded_call(l, 2, NULL, NULL, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(gcall(l, NULL, 1, ""), DLOCK_EINVAL);
  TH_ASSERT_RC(gcall(l, NULL, 2, "GET", k), DLOCK_EINVAL); /* a read */
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "does not write"));
  TH_ASSERT_RC(gcall(l, NULL, 1, "PING"), DLOCK_EINVAL);
  TH_ASSERT_RC(gcall(l, NULL, 3, "EVAL", "return 1", "0"), DLOCK_EINVAL);
  TH_ASSERT_RC(gcall(l, NULL, 3, "NOSUCHCOMMAND", k, "v"), DLOCK_EINVAL);
  TH_ASSERT_RC(gcall(l, NULL, 1, "SET"), DLOCK_EINVAL); /* no key */
  /* the command's own error: nothing written, the fence untouched */
  freeReplyObject(th_cmd(&srv, "HSET %s f v", data_key(name, "hash")));
  TH_ASSERT_RC(gcall(l, NULL, 2, "INCR", data_key(name, "hash")), DLOCK_EREDIS);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "WRONGTYPE"));
  redisReply *r = th_cmd(&srv, "EXISTS dlock_fence:{%s}", name);
  CU_ASSERT(r && r->integer == 0);
  if (r)
    freeReplyObject(r);
  /* binary keys and values, huge ones */
  char bin[] = {'{', 0, 0, 0, '}', 0, 'x'};
  size_t big_len = 1 << 20;
  char *big = malloc(big_len);
  memset(big, 0xfe, big_len);
  const char *argv[] = {"SET", bin, big};
  size_t lens[] = {3, sizeof bin, big_len};
  int rc = dlock_guarded_call(l, 3, argv, lens, NULL);
  /* on a cluster the key's slot is not the lock's */
  TH_ASSERT_RC(rc, th_cluster_mode() ? DLOCK_EINVAL : DLOCK_OK);
  free(big);
  /* a lock name holding another type */
  freeReplyObject(th_cmd(&srv, "SET %s plain", name));
  TH_ASSERT_RC(gcall(l, NULL, 3, "SET", k, "v"), DLOCK_EKIND);
  freeReplyObject(th_cmd(&srv, "DEL %s", name));
  dlock_lock_free(l);
}

/* A lock lost to a restart (no persistence): its writes are refused. */
static void test_lost_to_restart(void) {
  if (th_cluster_mode())
    return; /* one server to restart: the standalone run covers it */
  th_server s;
  CU_ASSERT_EQUAL_FATAL(th_server_start(&s, NULL), 0);
  dlock_client *c = th_client(&s, NULL);
  const char *name = th_name("restart");
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fenced_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  th_server_kill(&s);
  CU_ASSERT_EQUAL_FATAL(th_server_restart(&s), 0);
  TH_ASSERT_RC(gcall(l, NULL, 3, "SET", data_key(name, "v"), "v"), DLOCK_EFENCED);
  dlock_lock_free(l);
  dlock_client_close(c);
  th_server_stop(&s);
}

/* Keys outside the lock's slot on a cluster: refused before sending. */
static void test_other_slot(void) {
  const char *name = th_name("slot");
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  int rc = gcall(l, NULL, 3, "SET", "elsewhere:key", "v");
  if (th_cluster_mode()) {
    TH_ASSERT_RC(rc, DLOCK_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "slot"));
    CU_ASSERT(!key_exists("elsewhere:key"));
    /* two keys, one of them elsewhere */
    TH_ASSERT_RC(gcall(l, NULL, 5, "MSET", data_key(name, "a"), "1",
                       "elsewhere:key", "2"), DLOCK_EINVAL);
  } else {
    TH_ASSERT_RC(rc, DLOCK_OK); /* one server: any key */
  }
  TH_ASSERT_RC(gcall(l, NULL, 5, "MSET", data_key(name, "a"), "1",
                     data_key(name, "b"), "2"), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
}

static int async_incr(dlock_lock *l, uint64_t owner, const char *key,
                      long long *out) {
  th_outcome b = TH_OUTCOME_INIT;
  const char *argv[] = {"INCR", key};
  size_t lens[] = {4, strlen(key)};
  int rc = dlock_guarded_call_async(l, owner, 2, argv, lens, th_outcome_done,
                                    &b, NULL);
  if (rc != DLOCK_OK)
    return rc;
  rc = th_outcome_wait(&b, 30000); /* the command timeout answers sooner */
  *out = b.integer;
  return rc;
}

/* The non-blocking form: the caller's arrays may go at once; the reply
 * comes to the callback. */
static void test_async(void) {
  const char *name = th_name("async");
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &l), DLOCK_OK);
  uint64_t me = dlock_owner_id_new();
  long long v = 0;
  char key[160];
  snprintf(key, sizeof key, "%s", data_key(name, "n"));
  TH_ASSERT_RC(async_incr(l, me, key, &v), DLOCK_EFENCED);
  TH_ASSERT_RC(dlock_lock_bind_owner(l, me), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(async_incr(l, 0, key, &v), DLOCK_OK);
  CU_ASSERT_EQUAL(v, 1);
  /* a body: its keys and args copied at the call */
  {
    th_outcome b = TH_OUTCOME_INIT;
    char k[160], arg[8] = "41";
    snprintf(k, sizeof k, "%s", key);
    const char *keys[] = {k}, *args[] = {arg};
    size_t klens[] = {strlen(k)}, alens[] = {2};
    TH_ASSERT_RC(dlock_guarded_eval_async(
                     l, 0, "return redis.call('incrby', KEYS[1], ARGV[1])", 1,
                     keys, klens, 1, args, alens, th_outcome_done, &b, NULL),
                 DLOCK_OK);
    memset(k, 0, sizeof k); /* the call copied them */
    memset(arg, 0, sizeof arg);
    TH_ASSERT_RC(th_outcome_wait(&b, 30000), DLOCK_OK);
    CU_ASSERT_EQUAL(b.integer, 42);
    TH_ASSERT_RC(dlock_guarded_eval_async(l, 0, "", 0, NULL, NULL, 0, NULL,
                                          NULL, th_outcome_done, &b, NULL),
                 DLOCK_EINVAL);
  }
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_lock_bind_owner(l, 0), DLOCK_OK);
  TH_ASSERT_RC(async_incr(l, 0, key, &v), DLOCK_EINVAL); /* no owner */
  dlock_lock_free(l);
}

/* The tool: `run --fenced` hands COMMAND the token and the name; `dlock
 * write` writes with them while the lock is held, refuses a read (64),
 * and refuses the same token once the lock is gone (76). */
static void test_cli(void) {
  const char *bin = getenv("DLOCK_BIN");
  CU_ASSERT_PTR_NOT_NULL_FATAL(bin);
  char name[256];
  snprintf(name, sizeof name, "%s", th_name("cli"));
  char line[2048], out[4096];
  snprintf(line, sizeof line,
           "'%s' --redis '%s' run --fenced %s -- sh -c '"
           "echo \"$DLOCK_LOCK_NAME $DLOCK_FENCE_TOKEN\"; "
           "\"$0\" --redis \"$1\" write \"$DLOCK_LOCK_NAME\" SET \"{$DLOCK_LOCK_NAME}:v\" one; "
           "\"$0\" --redis \"$1\" write \"$DLOCK_LOCK_NAME\" GET \"{$DLOCK_LOCK_NAME}:v\" 2>/dev/null; "
           "echo \"read $?\"' '%s' '%s'",
           bin, srv.url, name, bin, srv.url);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 0);
  char want[512];
  snprintf(want, sizeof want, "%s 1\nOK\nread 64\n", name);
  CU_ASSERT_STRING_EQUAL(out, want);
  /* while held with token 1: a forged token is refused (64) and the
   * holder's own writes go on */
  char held[256], str[256];
  snprintf(held, sizeof held, "%s", th_name("cli-held"));
  snprintf(line, sizeof line,
           "'%s' --redis '%s' run --fenced %s -- sh -c '"
           "\"$0\" --redis \"$1\" write --token 999 %s SET \"{%s}:y\" forged 2>&1; "
           "echo \"forged $?\"; "
           "\"$0\" --redis \"$1\" write %s SET \"{%s}:y\" mine; "
           "echo \"own $?\"' '%s' '%s'",
           bin, srv.url, held, held, held, held, held, bin, srv.url);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 0);
  snprintf(want, sizeof want, "dlock: guarded write on \"%s\" refused, nothing "
           "written: token 999 was never granted (the lock's newest grant is 1)\n"
           "forged 64\nOK\nown 0\n", held);
  CU_ASSERT_STRING_EQUAL(out, want);
  char *y = get_str(data_key(held, "y"));
  CU_ASSERT_STRING_EQUAL(y ? y : "", "mine");
  free(y);
  /* a name that holds no fenced lock: the wrong kind (65), nothing left */
  snprintf(str, sizeof str, "%s", th_name("cli-str"));
  freeReplyObject(th_cmd(&srv, "SET %s hello", str));
  snprintf(line, sizeof line, "'%s' --redis '%s' write --token 1 %s SET '{%s}:x' y 2>&1",
           bin, srv.url, str, str);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 65);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "holds a string"));
  CU_ASSERT_FALSE(key_exists(data_key(str, "x")));
  char fk[300];
  snprintf(fk, sizeof fk, "dlock_fence:{%s}", str);
  CU_ASSERT_FALSE(key_exists(fk));
  snprintf(line, sizeof line, "'%s' --redis '%s' write --token 1 %s SET '{%s}:v' late 2>&1",
           bin, srv.url, name, name);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 76);
  /* the fact once, in words: one line, the refusal said once */
  snprintf(want, sizeof want, "dlock: guarded write on \"%s\" refused, nothing "
           "written: the caller no longer holds the lock", name);
  CU_ASSERT(strncmp(out, want, strlen(want)) == 0);
  const char *refused = strstr(out, "refused");
  CU_ASSERT(refused && strstr(refused + 1, "refused") == NULL);
  CU_ASSERT_PTR_NULL(strchr(out, '\n') ? strchr(strchr(out, '\n') + 1, '\n') : NULL);
  if (strncmp(out, want, strlen(want)) != 0)
    fprintf(stderr, "\n  write refused: %s", out);
  char *v = get_str(data_key(name, "v"));
  CU_ASSERT_STRING_EQUAL(v ? v : "", "one");
  free(v);
  snprintf(line, sizeof line, "'%s' --redis '%s' write --token x %s SET k v 2>&1",
           bin, srv.url, name);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 64);
  snprintf(line, sizeof line, "env -u DLOCK_FENCE_TOKEN '%s' --redis '%s' "
           "write %s SET k v 2>&1", bin, srv.url, name);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 64);
}

/* The examples of docs/fencing.md run: the counter's stale write is
 * refused; the file keeps the newest token's content. */
static void test_examples(void) {
  if (th_cluster_mode() || th_tls_mode())
    return; /* the plain run covers them */
  char line[2048], out[4096];
  snprintf(line, sizeof line, "'%s' '%s' 2>&1",
           getenv("DLOCK_FENCED_COUNTER_EXAMPLE"), srv.url);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "refused"));
  char dir[] = "/tmp/dlock-fence-XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  const char *ex = getenv("DLOCK_FENCED_FILE_EXAMPLE"), *bin = getenv("DLOCK_BIN");
  const char *name = th_name("file");
  for (int i = 0; i < 2; i++) { /* tokens 1 and 2 */
    snprintf(line, sizeof line, "'%s' --redis '%s' run --fenced %s -- '%s' "
             "%s/report text%d 2>&1", bin, srv.url, name, ex, dir, i);
    CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 0);
  }
  /* a stalled first holder comes back with token 1 */
  snprintf(line, sizeof line, "DLOCK_FENCE_TOKEN=1 '%s' %s/report stale 2>&1",
           ex, dir);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 1);
  snprintf(line, sizeof line, "cat %s/report", dir);
  th_shell(line, out, sizeof out);
  CU_ASSERT_STRING_EQUAL(out, "2\ntext1\n");
  snprintf(line, sizeof line, "rm -rf %s", dir);
  th_shell(line, out, sizeof out);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("fence", suite_init, suite_clean);
  CU_add_test(s, "runs_only_while_held", test_runs_only_while_held);
  CU_add_test(s, "lease_passed", test_lease_passed);
  CU_add_test(s, "token_alone", test_token_alone);
  CU_add_test(s, "token_forged", test_token_forged);
  CU_add_test(s, "kinds", test_kinds);
  CU_add_test(s, "eval", test_eval);
  CU_add_test(s, "bad_input", test_bad_input);
  CU_add_test(s, "lost_to_restart", test_lost_to_restart);
  CU_add_test(s, "other_slot", test_other_slot);
  CU_add_test(s, "async", test_async);
  CU_add_test(s, "cli", test_cli);
  CU_add_test(s, "examples", test_examples);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
