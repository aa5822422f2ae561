/* Multi-lock and RedLock over several redis-server processes started by the
 * harness: all-or-nothing, quorum, stopped and killed masters, validity. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define NSRV 5
static th_server srv[NSRV];
static dlock_client *cl[NSRV];
static dlock_client *one[NSRV]; /* the same servers, one engine thread */

/* The port the clients use: a TLS server's TLS port (DLOCK_TEST_TLS). */
static int url_port(const th_server *s) {
  return s->tls_port ? s->tls_port : s->port;
}

static int suite_init(void) {
  for (int i = 0; i < NSRV; i++) {
    dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
    o.share_engine = i > 0 ? one[0] : NULL;
    if (th_main_server_start(&srv[i]) != 0 ||
        dlock_client_open(srv[i].url, NULL, &cl[i]) != DLOCK_OK ||
        dlock_client_open(srv[i].url, &o, &one[i]) != DLOCK_OK)
      return 1;
  }
  return 0;
}

static int suite_clean(void) {
  for (int i = 0; i < NSRV; i++) {
    dlock_client_close(cl[i]);
    dlock_client_close(one[i]);
    th_server_stop(&srv[i]);
  }
  return 0;
}

/* One reentrant lock named name on each of the first n servers (clients c). */
static void members(dlock_client **c, int n, const char *name, dlock_lock **out) {
  for (int i = 0; i < n; i++)
    TH_ASSERT_RC(dlock_reentrant_lock_new(c[i], name, NULL, &out[i]), DLOCK_OK);
}

static void free_all(dlock_lock **l, int n) {
  for (int i = 0; i < n; i++)
    dlock_lock_free(l[i]);
}

static long long exists(int s, const char *name) {
  return th_int(&srv[s], "EXISTS %s", name);
}

static int try_in_thread(dlock_lock *l) {
  return th_acquire_elsewhere(l, 0, 10000);
}

/* ---- multi-lock ----------------------------------------------------------- */

static void test_multi_all_members(void) {
  const char *name = th_name("multi");
  dlock_lock *m[3], *multi = NULL;
  members(cl, 3, name, m);
  TH_ASSERT_RC(dlock_multi_new(m, 3, &multi), DLOCK_OK);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(multi), "multi");
  CU_ASSERT(dlock_lock_caps(multi) & DLOCK_CAP_MULTI_NODE);
  TH_ASSERT_RC(dlock_acquire(multi, 0, 10000), DLOCK_OK);
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(multi, &st), DLOCK_OK);
  CU_ASSERT(st.locked && st.held_by_me && st.hold_count == 1);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(exists(i, name), 1);
  TH_ASSERT_RC(try_in_thread(multi), DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_release(multi), DLOCK_OK);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(exists(i, name), 0);
  TH_ASSERT_RC(try_in_thread(multi), DLOCK_OK);
  dlock_lock_free(multi);
  free_all(m, 3);
}

static void test_multi_exactly_one_of_ten(void) {
  dlock_lock *m[3], *multi = NULL;
  members(cl, 3, th_name("ten"), m);
  TH_ASSERT_RC(dlock_multi_new(m, 3, &multi), DLOCK_OK);
  pthread_barrier_t go, tried;
  pthread_barrier_init(&go, NULL, 10);
  pthread_barrier_init(&tried, NULL, 10);
  th_acquirer t[10]; /* all try at once, and hold until all have tried */
  for (int i = 0; i < 10; i++) {
    t[i] = (th_acquirer){.lock = multi, .lease_ms = 10000, .start = &go,
                         .held = &tried};
    th_acquirer_start(&t[i]);
  }
  int ok = 0, busy = 0;
  for (int i = 0; i < 10; i++) {
    th_acquirer_join(&t[i]);
    ok += t[i].rc == DLOCK_OK;
    busy += t[i].rc == DLOCK_EBUSY;
  }
  CU_ASSERT_EQUAL(ok, 1);
  CU_ASSERT_EQUAL(busy, 9);
  pthread_barrier_destroy(&go);
  pthread_barrier_destroy(&tried);
  dlock_lock_free(multi);
  free_all(m, 3);
}

static void test_multi_member_held_elsewhere(void) {
  const char *name = th_name("partial");
  dlock_lock *m[3], *multi = NULL, *other = NULL;
  members(cl, 3, name, m);
  TH_ASSERT_RC(dlock_multi_new(m, 3, &multi), DLOCK_OK);
  dlock_client *c2 = th_client(&srv[2], NULL);
  TH_ASSERT_RC(dlock_reentrant_lock_new(c2, name, NULL, &other), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(other, 0, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(multi, 0, 10000), DLOCK_EBUSY);
  CU_ASSERT_EQUAL(exists(0, name), 0); /* the others were left free */
  CU_ASSERT_EQUAL(exists(1, name), 0);
  /* with a budget: it gets in when the member frees */
  TH_ASSERT_RC(dlock_release(other), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(multi, 1000, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(multi), DLOCK_OK);
  dlock_lock_free(other);
  dlock_client_close(c2);
  dlock_lock_free(multi);
  free_all(m, 3);
}

typedef struct crossing {
  dlock_lock *group;
  atomic_int *inside;
  atomic_int *violations;
  int rounds, errors;
} crossing;

static void *crossing_run(void *arg) {
  crossing *x = arg;
  for (int i = 0; i < x->rounds; i++) {
    if (dlock_acquire(x->group, 10000, 10000) != DLOCK_OK) {
      x->errors++;
      continue;
    }
    if (atomic_fetch_add(x->inside, 1) != 0)
      atomic_fetch_add(x->violations, 1);
    atomic_fetch_sub(x->inside, 1);
    if (dlock_release(x->group) != DLOCK_OK)
      x->errors++;
  }
  return NULL;
}

static void test_multi_opposite_orders_no_deadlock(void) {
  const char *a = th_name("A"), *b = th_name("B");
  dlock_lock *ab[2], *ba[2], *g1 = NULL, *g2 = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl[0], a, NULL, &ab[0]), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl[1], b, NULL, &ab[1]), DLOCK_OK);
  ba[0] = ab[1];
  ba[1] = ab[0];
  TH_ASSERT_RC(dlock_multi_new(ab, 2, &g1), DLOCK_OK);
  TH_ASSERT_RC(dlock_multi_new(ba, 2, &g2), DLOCK_OK);
  atomic_int inside = 0, violations = 0;
  crossing x[2] = {{g1, &inside, &violations, 100, 0},
                   {g2, &inside, &violations, 100, 0}};
  pthread_t th[2];
  int64_t t0 = th_now_ms();
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, crossing_run, &x[i]);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  CU_ASSERT_EQUAL(x[0].errors + x[1].errors, 0);
  CU_ASSERT_EQUAL(atomic_load(&violations), 0);
  CU_ASSERT(th_now_ms() - t0 < 20000);
  dlock_lock_free(g1);
  dlock_lock_free(g2);
  free_all(ab, 2);
}

/* ---- RedLock -------------------------------------------------------------- */

static dlock_lock *new_redlock(dlock_lock **m, int n, const dlock_redlock_opts *o) {
  dlock_lock *rl = NULL;
  TH_ASSERT_RC(dlock_redlock_new(m, (size_t)n, o, &rl), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rl);
  return rl;
}

/* A RedLock whose members get 20 s to answer, a timeout no loaded machine
 * reaches. With the default 50 ms a member answering late is silent, and a
 * silent member is released (rightly), its release maybe still on its way
 * when the call returns; tests that count script calls or look for keys
 * left right after a failed acquire use this one (test_redlock_stopped_
 * masters covers silent members). */
static dlock_lock *patient_redlock(dlock_lock **m, int n) {
  dlock_redlock_opts o = DLOCK_REDLOCK_OPTS_INIT;
  o.member_timeout_ms = 20000;
  return new_redlock(m, n, &o);
}

static void test_redlock_quorum(void) {
  const char *name = th_name("quorum");
  dlock_lock *m[NSRV], *others[NSRV];
  members(cl, NSRV, name, m);
  dlock_client *oc[NSRV];
  for (int i = 0; i < NSRV; i++) {
    oc[i] = th_client(&srv[i], NULL);
    TH_ASSERT_RC(dlock_reentrant_lock_new(oc[i], name, NULL, &others[i]), DLOCK_OK);
  }
  dlock_lock *rl = patient_redlock(m, NSRV);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(rl), "redlock");
  /* 2 members held elsewhere: 3 of 5 is a majority */
  TH_ASSERT_RC(dlock_acquire(others[0], 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(others[1], 0, 30000), DLOCK_OK);
  dlock_grant g = {0, 0};
  TH_ASSERT_RC(dlock_acquire_grant(rl, 0, 10000, &g), DLOCK_OK);
  CU_ASSERT(g.validity_ms > 9000 && g.validity_ms < 10000);
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(rl, &st), DLOCK_OK);
  CU_ASSERT(st.locked && st.held_by_me);
  TH_ASSERT_RC(dlock_release(rl), DLOCK_OK);
  /* 3 held elsewhere: no quorum, and nothing of ours stays behind */
  TH_ASSERT_RC(dlock_acquire(others[2], 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(rl, 0, 10000), DLOCK_EQUORUM);
  CU_ASSERT(strstr(dlock_errmsg(), "member 2") != NULL);
  CU_ASSERT(strstr(dlock_errmsg(), "held by another owner") != NULL);
  char at[64]; /* members are named by their server */
  snprintf(at, sizeof at, "at 127.0.0.1:%d): held by another owner",
           url_port(&srv[2]));
  CU_ASSERT(strstr(dlock_errmsg(), at) != NULL);
  CU_ASSERT_EQUAL(exists(3, name), 0);
  CU_ASSERT_EQUAL(exists(4, name), 0);
  TH_ASSERT_RC(dlock_acquire(rl, 300, 10000), DLOCK_EQUORUM); /* with retries */
  CU_ASSERT_EQUAL(exists(3, name), 0);
  CU_ASSERT_EQUAL(exists(4, name), 0);
  for (int i = 0; i < 3; i++)
    TH_ASSERT_RC(dlock_release(others[i]), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(rl), DLOCK_ENOTOWNER);
  dlock_lock_free(rl);
  free_all(m, NSRV);
  free_all(others, NSRV);
  for (int i = 0; i < NSRV; i++)
    dlock_client_close(oc[i]);
}

static void stopped_masters(dlock_client **c) {
  const char *name = th_name("stopped");
  dlock_lock *m[NSRV];
  members(c, NSRV, name, m);
  dlock_lock *rl = new_redlock(m, NSRV, NULL);
  th_server_pause(&srv[3], 1);
  th_server_pause(&srv[4], 1);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_acquire(rl, 2000, 1000), DLOCK_OK);
  int64_t took = th_now_ms() - t0;
  printf("\n    2 of 5 stopped: acquired in %lld ms ", (long long)took);
  CU_ASSERT(took <= 50 + 50);
  TH_ASSERT_RC(dlock_release(rl), DLOCK_OK);
  /* the stopped masters have not answered that release: later releases do
   * not wait for them (not even the 5 ms grace for late grants) */
  int64_t rel_us[21];
  for (int i = 0; i < 21; i++) {
    TH_ASSERT_RC(dlock_acquire(rl, 2000, 1000), DLOCK_OK);
    int64_t t = th_now_us();
    TH_ASSERT_RC(dlock_release(rl), DLOCK_OK);
    rel_us[i] = th_now_us() - t;
  }
  qsort(rel_us, 21, sizeof rel_us[0], th_cmp_i64);
  printf("release p50 %lld us ", (long long)rel_us[10]);
  CU_ASSERT(rel_us[10] < 4000); /* a release that waits the grace takes 5 ms */
  th_server_pause(&srv[2], 1);
  t0 = th_now_ms();
  TH_ASSERT_RC(dlock_acquire(rl, 500, 1000), DLOCK_EQUORUM);
  took = th_now_ms() - t0;
  CU_ASSERT(took >= 500 && took <= 500 + 50 + 60);
  CU_ASSERT(strstr(dlock_errmsg(), "no answer") != NULL);
  char at[64]; /* members are named by their server */
  snprintf(at, sizeof at, "at 127.0.0.1:%d): no answer", url_port(&srv[2]));
  CU_ASSERT(strstr(dlock_errmsg(), at) != NULL);
  /* a round the wait budget cut short says so, rather than blaming the
   * members for a wait shorter than their member timeout: with a 300 ms
   * member timeout and 350 ms to wait, the first round takes 300 ms and the
   * second ends with the budget, after 50 ms at most */
  dlock_redlock_opts slow = DLOCK_REDLOCK_OPTS_INIT;
  slow.member_timeout_ms = 300;
  dlock_lock *cut = new_redlock(m, NSRV, &slow);
  TH_ASSERT_RC(dlock_acquire(cut, 350, 1000), DLOCK_EQUORUM);
  const char *msg = strstr(dlock_errmsg(), "no answer within ");
  CU_ASSERT_FATAL(msg != NULL);
  long waited = strtol(msg + strlen("no answer within "), NULL, 10);
  CU_ASSERT(waited < 300);
  CU_ASSERT(strstr(msg, "the wait budget ended the round") != NULL);
  dlock_lock_free(cut);
  for (int i = 2; i < NSRV; i++)
    th_server_pause(&srv[i], 0);
  /* once the 1 s leases pass, no server keeps a key of ours */
  usleep(1200 * 1000);
  for (int i = 0; i < NSRV; i++)
    CU_ASSERT_EQUAL(exists(i, name), 0);
  dlock_lock_free(rl);
  free_all(m, NSRV);
}

typedef struct lost_count {
  atomic_int n;
} lost_count;

static void on_redlock_lost(void *data, dlock_lock *rl, uint64_t owner) {
  atomic_fetch_add(&((lost_count *)data)->n, 1);
}

static void test_redlock_stopped_masters(void) { stopped_masters(cl); }

/* the same with the members' clients on one engine thread: a stopped
 * master's connection holds up nothing on the shared loop */
static void test_redlock_stopped_masters_one_engine(void) {
  stopped_masters(one);
}

static void killed_master(int one_engine) {
  th_server s[3];
  dlock_client *c[3];
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 600;
  o.connect_timeout_ms = 300;
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_FATAL(th_main_server_start(&s[i]) == 0);
    o.share_engine = one_engine && i > 0 ? c[0] : NULL; /* s[0] dies first */
    c[i] = th_client(&s[i], &o);
  }
  const char *name = th_name("killed");
  dlock_lock *m[3];
  members(c, 3, name, m);
  lost_count lost = {0};
  dlock_redlock_opts ro = DLOCK_REDLOCK_OPTS_INIT;
  ro.on_lost = on_redlock_lost;
  ro.on_lost_data = &lost;
  dlock_lock *rl = new_redlock(m, 3, &ro);
  th_server_kill(&s[0]);
  TH_ASSERT_RC(dlock_acquire(rl, 1000, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(rl), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(rl, 1000, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  usleep(700 * 1000); /* renewed past its first lease: not lost */
  CU_ASSERT_EQUAL(atomic_load(&lost.n), 0);
  th_server_kill(&s[1]); /* now only 1 of 3 can be renewed */
  int64_t t0 = th_now_ms();
  while (atomic_load(&lost.n) == 0 && th_now_ms() - t0 < 3000)
    usleep(5000);
  CU_ASSERT_EQUAL(atomic_load(&lost.n), 1);
  CU_ASSERT(th_now_ms() - t0 <= 600 + 250);
  usleep(500 * 1000);
  CU_ASSERT_EQUAL(atomic_load(&lost.n), 1); /* once */
  int rc = dlock_release(rl);
  CU_ASSERT(rc == DLOCK_EQUORUM || rc == DLOCK_ELOST);
  dlock_lock_free(rl);
  free_all(m, 3);
  for (int i = 0; i < 3; i++) {
    dlock_client_close(c[i]);
    th_server_stop(&s[i]);
  }
}

static void test_redlock_killed_master(void) { killed_master(0); }
static void test_redlock_killed_master_one_engine(void) { killed_master(1); }

static void test_redlock_validity_with_slow_member(void) {
  const char *name = th_name("slow");
  dlock_lock *m[3], *other = NULL;
  members(cl, 3, name, m);
  /* member 2 is held elsewhere, so the quorum needs the slow member 0 */
  dlock_client *oc = th_client(&srv[2], NULL);
  TH_ASSERT_RC(dlock_reentrant_lock_new(oc, name, NULL, &other), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(other, 0, 30000), DLOCK_OK);
  dlock_redlock_opts o = DLOCK_REDLOCK_OPTS_INIT;
  o.member_timeout_ms = 500; /* long enough to wait for the slow member */
  dlock_lock *rl = new_redlock(m, 3, &o);
  /* make member 0 sleep: write DEBUG SLEEP without waiting for it... */
  redisContext *slow = redisConnect("127.0.0.1", srv[0].port);
  redisAppendCommand(slow, "DEBUG SLEEP 0.4");
  int done = 0;
  while (!done && redisBufferWrite(slow, &done) == REDIS_OK)
    ;
  /* ...and wait for the event: the server stops answering (5 ms probes, so
   * at least 0.3 s of the sleep is left for the RedLock's try) */
  struct timeval tv = {0, 5000};
  int sleeping = 0;
  for (int i = 0; i < 100 && !sleeping; i++) {
    redisContext *probe = redisConnectWithTimeout("127.0.0.1", srv[0].port, tv);
    redisSetTimeout(probe, tv);
    redisReply *r = redisCommand(probe, "PING");
    sleeping = r == NULL;
    if (r)
      freeReplyObject(r);
    redisFree(probe);
  }
  CU_ASSERT(sleeping);
  dlock_grant g = {0, 0};
  int rc = dlock_acquire_grant(rl, 0, 1000, &g);
  if (rc == DLOCK_OK) {
    printf("\n    validity with a slow member: %lld ms ", (long long)g.validity_ms);
    CU_ASSERT(g.validity_ms < 700);
    TH_ASSERT_RC(dlock_release(rl), DLOCK_OK);
  } else {
    TH_ASSERT_RC(rc, DLOCK_EQUORUM);
  }
  redisReply *r = NULL;
  redisGetReply(slow, (void **)&r);
  if (r)
    freeReplyObject(r);
  redisFree(slow);
  TH_ASSERT_RC(dlock_release(other), DLOCK_OK);
  dlock_lock_free(other);
  dlock_client_close(oc);
  dlock_lock_free(rl);
  free_all(m, 3);
}

/* worker redlock: URL1..URL5 NAME THREADS COUNTER_URL */
typedef struct rlwork {
  char **urls;
  const char *name;
  int entered, errors, violations;
  pthread_mutex_t mu;
} rlwork;

static void *rlwork_thread(void *arg) {
  rlwork *w = arg;
  dlock_client *c[NSRV] = {0};
  dlock_lock *m[NSRV] = {0}, *rl = NULL;
  redisContext *ctx = th_connect_key(w->urls[0], w->name); /* plain port */
  int ok = ctx != NULL && ctx->err == 0;
  for (int i = 0; ok && i < NSRV; i++)
    ok = dlock_client_open(w->urls[i], NULL, &c[i]) == DLOCK_OK &&
         dlock_reentrant_lock_new(c[i], w->name, NULL, &m[i]) == DLOCK_OK;
  ok = ok && dlock_redlock_new(m, NSRV, NULL, &rl) == DLOCK_OK;
  int entered = 0, violation = 0, rc = DLOCK_OK;
  if (ok && (rc = dlock_acquire(rl, 120000, 10000)) == DLOCK_OK) {
    char key[300];
    snprintf(key, sizeof key, "%s:inside", w->name);
    redisReply *r = redisCommand(ctx, "INCR %s", key);
    violation = !r || r->integer != 1;
    freeReplyObject(r);
    freeReplyObject(redisCommand(ctx, "DECR %s", key));
    entered = 1;
    ok = (rc = dlock_release(rl)) == DLOCK_OK;
  } else {
    ok = 0;
  }
  if (!ok)
    fprintf(stderr, "redlock worker thread: %s: %s\n", dlock_errname(rc),
            dlock_errmsg());
  pthread_mutex_lock(&w->mu);
  w->entered += entered;
  w->errors += !ok;
  w->violations += violation;
  pthread_mutex_unlock(&w->mu);
  dlock_lock_free(rl);
  for (int i = 0; i < NSRV; i++) {
    dlock_lock_free(m[i]);
    dlock_client_close(c[i]);
  }
  if (ctx)
    redisFree(ctx);
  return NULL;
}

static int worker(int argc, char **argv) {
  if (argc != 8 || strcmp(argv[0], "redlock") != 0)
    return 2;
  rlwork w = {.urls = argv + 1, .name = argv[6]};
  pthread_mutex_init(&w.mu, NULL);
  int n = atoi(argv[7]);
  th_threads(n < 64 ? n : 64, rlwork_thread, &w);
  printf("%d %d %d\n", w.entered, w.errors, w.violations);
  if (w.errors || w.violations) /* say why in the test log */
    fprintf(stderr, "redlock worker: %d entered, %d errors, %d overlaps\n",
            w.entered, w.errors, w.violations);
  return w.errors || w.violations ? 1 : 0;
}

static void test_redlock_100_contenders(void) {
  const char *name = th_name("contend");
  int fds[2];
  pid_t pids[2];
  for (int p = 0; p < 2; p++) {
    char *args[] = {"redlock", srv[0].url, srv[1].url, srv[2].url, srv[3].url,
                    srv[4].url, (char *)name, "50", NULL};
    pids[p] = th_spawn_worker_pipe(args, &fds[p]);
  }
  int entered = 0;
  for (int p = 0; p < 2; p++) {
    CU_ASSERT_EQUAL(th_wait_worker(pids[p], 150000), 0);
    char buf[64] = {0};
    if (read(fds[p], buf, sizeof buf - 1) > 0)
      entered += atoi(buf);
    close(fds[p]);
  }
  CU_ASSERT_EQUAL(entered, 100);
  for (int i = 0; i < NSRV; i++)
    CU_ASSERT_EQUAL(exists(i, name), 0);
}

/* Script calls server s has run since its last CONFIG RESETSTAT. */
static long long script_calls(int s) {
  redisReply *r = th_cmd(&srv[s], "INFO commandstats");
  long long n = 0;
  const char *keys[] = {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="};
  for (int k = 0; r && r->type == REDIS_REPLY_STRING && k < 2; k++) {
    const char *p = strstr(r->str, keys[k]);
    if (p)
      n += atoll(p + strlen(keys[k]));
  }
  freeReplyObject(r);
  return n;
}

/* A failed round releases the members that granted or did not answer, not
 * those that said "held by another owner": nothing of ours is there. */
static void test_redlock_failed_round_skips_busy_members(void) {
  const char *name = th_name("skipbusy");
  dlock_lock *hm[NSRV], *wm[NSRV];
  members(cl, NSRV, name, hm);
  members(one, NSRV, name, wm); /* other clients: another owner */
  dlock_lock *other = patient_redlock(wm, NSRV);
  /* members 0..2 held elsewhere: the round gets 3 and 4, no majority */
  for (int i = 0; i < 3; i++)
    TH_ASSERT_RC(dlock_acquire(hm[i], 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(other, 0, 30000), DLOCK_EQUORUM); /* scripts loaded */
  for (int i = 0; i < NSRV; i++)
    freeReplyObject(th_cmd(&srv[i], "CONFIG RESETSTAT"));
  TH_ASSERT_RC(dlock_acquire(other, 0, 30000), DLOCK_EQUORUM);
  for (int i = 0; i < NSRV; i++) /* the try; a release only where granted */
    CU_ASSERT_EQUAL(script_calls(i), i < 3 ? 1 : 2);
  for (int i = 3; i < NSRV; i++)
    CU_ASSERT_EQUAL(exists(i, name), 0);
  for (int i = 0; i < 3; i++)
    TH_ASSERT_RC(dlock_release(hm[i]), DLOCK_OK);
  dlock_lock_free(other);
  free_all(hm, NSRV);
  free_all(wm, NSRV);
}

static void test_bad_input(void) {
  dlock_lock *l = NULL, *fair = NULL, *m[2];
  TH_ASSERT_RC(dlock_multi_new(NULL, 2, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_redlock_new(NULL, 2, NULL, &l), DLOCK_EINVAL);
  members(cl, 2, th_name("bad"), m);
  TH_ASSERT_RC(dlock_multi_new(m, 0, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_multi_new(m, 129, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_multi_new(m, 2, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_redlock_new(m, 2, NULL, NULL), DLOCK_EINVAL);
  dlock_lock *withnull[2] = {m[0], NULL};
  TH_ASSERT_RC(dlock_multi_new(withnull, 2, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_redlock_new(withnull, 2, NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_fair_lock_new(cl[0], "f", NULL, &fair), DLOCK_OK);
  dlock_lock *mixed[2] = {m[0], fair};
  TH_ASSERT_RC(dlock_redlock_new(mixed, 2, NULL, &l), DLOCK_EINVAL);
  CU_ASSERT(strstr(dlock_errmsg(), "fair") != NULL);
  TH_ASSERT_RC(dlock_multi_new(mixed, 2, &l), DLOCK_OK); /* any kinds */
  dlock_lock_free(l);
  dlock_redlock_opts o = DLOCK_REDLOCK_OPTS_INIT;
  o.member_timeout_ms = 0;
  TH_ASSERT_RC(dlock_redlock_new(m, 2, &o, &l), DLOCK_EINVAL);
  CU_ASSERT_PTR_NULL(l);
  dlock_lock_free(fair);
  free_all(m, 2);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("multi", suite_init, suite_clean);
  CU_add_test(s, "multi_all_members", test_multi_all_members);
  CU_add_test(s, "multi_exactly_one_of_ten", test_multi_exactly_one_of_ten);
  CU_add_test(s, "multi_member_held_elsewhere", test_multi_member_held_elsewhere);
  CU_add_test(s, "multi_opposite_orders_no_deadlock",
              test_multi_opposite_orders_no_deadlock);
  CU_add_test(s, "redlock_quorum", test_redlock_quorum);
  CU_add_test(s, "redlock_stopped_masters", test_redlock_stopped_masters);
  CU_add_test(s, "redlock_stopped_masters_one_engine",
              test_redlock_stopped_masters_one_engine);
  CU_add_test(s, "redlock_killed_master", test_redlock_killed_master);
  CU_add_test(s, "redlock_killed_master_one_engine",
              test_redlock_killed_master_one_engine);
  CU_add_test(s, "redlock_validity_with_slow_member",
              test_redlock_validity_with_slow_member);
  CU_add_test(s, "redlock_failed_round_skips_busy_members",
              test_redlock_failed_round_skips_busy_members);
  CU_add_test(s, "redlock_100_contenders", test_redlock_100_contenders);
  CU_add_test(s, "bad_input", test_bad_input);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, worker); }
