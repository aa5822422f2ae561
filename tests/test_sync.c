/* CountDownLatch, Semaphore, expirable-permit Semaphore and the semaphore
 * lock, against a real redis-server. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine.h"
#include "base/scripts.h"
#include "harness.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

static dlock_latch *new_latch(const char *name) {
  dlock_latch *l = NULL;
  TH_ASSERT_RC(dlock_latch_new(cl, name, NULL, &l), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  return l;
}

static dlock_semaphore *new_sem(dlock_client *c, const char *name) {
  dlock_semaphore *s = NULL;
  TH_ASSERT_RC(dlock_semaphore_new(c, name, NULL, &s), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  return s;
}

static dlock_permits *new_permits(dlock_client *c, const char *name) {
  dlock_permits *p = NULL;
  TH_ASSERT_RC(dlock_permits_new(c, name, NULL, &p), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  return p;
}

static int64_t count_of(dlock_latch *l) {
  int64_t n = -1;
  TH_ASSERT_RC(dlock_latch_get_count(l, &n), DLOCK_OK);
  return n;
}

static int64_t available(dlock_semaphore *s) {
  int64_t n = -999;
  TH_ASSERT_RC(dlock_semaphore_available(s, &n), DLOCK_OK);
  return n;
}

/* ---- latch ---------------------------------------------------------------- */

static void test_latch_counts(void) {
  dlock_latch *l = new_latch(th_name("latch"));
  CU_ASSERT_EQUAL(count_of(l), 0);
  TH_ASSERT_RC(dlock_latch_await(l, 0), DLOCK_OK); /* missing: open */
  TH_ASSERT_FLAG(dlock_latch_try_set_count(l, 3, &th_flag), 1);
  TH_ASSERT_FLAG(dlock_latch_try_set_count(l, 5, &th_flag), 0); /* only once */
  CU_ASSERT_EQUAL(count_of(l), 3);
  TH_ASSERT_RC(dlock_latch_await(l, 0), DLOCK_EBUSY);
  int64_t left = -1;
  TH_ASSERT_RC(dlock_latch_count_down(l, &left), DLOCK_OK);
  CU_ASSERT_EQUAL(left, 2);
  TH_ASSERT_RC(dlock_latch_count_down(l, NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_latch_count_down(l, &left), DLOCK_OK);
  CU_ASSERT_EQUAL(left, 0);
  TH_ASSERT_RC(dlock_latch_count_down(l, &left), DLOCK_OK); /* below: stays 0 */
  CU_ASSERT_EQUAL(left, 0);
  CU_ASSERT_EQUAL(count_of(l), 0);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_latch_await(l, 5000), DLOCK_OK); /* at once at 0 */
  CU_ASSERT(th_now_ms() - t0 < 100);
  TH_ASSERT_FLAG(dlock_latch_try_set_count(l, 2, &th_flag), 1); /* a new round */
  TH_ASSERT_FLAG(dlock_latch_delete(l, &th_flag), 1);
  TH_ASSERT_FLAG(dlock_latch_delete(l, &th_flag), 0);
  CU_ASSERT_EQUAL(count_of(l), 0);
  dlock_latch_free(l);
}

typedef struct later {
  dlock_latch *latch;
  int64_t after_ms;
} later;

static void *count_down_later(void *arg) {
  later *w = arg;
  usleep((useconds_t)w->after_ms * 1000); /* the scenario's timing */
  dlock_latch_count_down(w->latch, NULL);
  return NULL;
}

static void test_latch_await_budget(void) {
  dlock_latch *l = new_latch(th_name("budget"));
  TH_ASSERT_FLAG(dlock_latch_try_set_count(l, 1, &th_flag), 1);
  later w = {l, 500};
  pthread_t t;
  pthread_create(&t, NULL, count_down_later, &w);
  TH_ASSERT_RC(dlock_latch_await(l, 550), DLOCK_OK);
  pthread_join(t, NULL);
  TH_ASSERT_FLAG(dlock_latch_try_set_count(l, 1, &th_flag), 1);
  w.after_ms = 1000;
  pthread_create(&t, NULL, count_down_later, &w);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_latch_await(l, 500), DLOCK_ETIMEDOUT);
  CU_ASSERT(th_now_ms() - t0 >= 490 && th_now_ms() - t0 < 700);
  pthread_join(t, NULL);
  dlock_latch_free(l);
}

typedef struct awaiter {
  dlock_latch *latch;
  int rc;
  int64_t woke_ms;
} awaiter;

static void *await_run(void *arg) {
  awaiter *a = arg;
  a->rc = dlock_latch_await(a->latch, 20000);
  a->woke_ms = th_now_ms();
  return NULL;
}

static void test_latch_wakes_all_processes(void) {
  const char *name = th_name("wakeall");
  char channel[300];
  snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", name);
  dlock_latch *l = new_latch(name);
  TH_ASSERT_FLAG(dlock_latch_try_set_count(l, 2, &th_flag), 1);
  int fds[2];
  pid_t pids[2];
  for (int i = 0; i < 2; i++) {
    char *args[] = {"latch", srv.url, (char *)name, "16", NULL};
    pids[i] = th_spawn_worker_pipe(args, &fds[i]);
  }
  /* the event: both processes subscribed */
  long long subs = 0;
  for (int64_t end = th_now_ms() + 5000; subs < 2 && th_now_ms() < end;) {
    subs = th_numsub(&srv, channel);
    usleep(2000);
  }
  CU_ASSERT_EQUAL(subs, 2);
  TH_ASSERT_RC(dlock_latch_count_down(l, NULL), DLOCK_OK);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_latch_count_down(l, NULL), DLOCK_OK);
  int64_t latest = 0;
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(th_wait_worker(pids[i], 30000), 0);
    char buf[64] = {0};
    ssize_t n = read(fds[i], buf, sizeof buf - 1);
    close(fds[i]);
    long long woke = 0, ok = 0;
    CU_ASSERT(n > 0 && sscanf(buf, "%lld %lld", &ok, &woke) == 2);
    CU_ASSERT_EQUAL(ok, 16);
    if (woke - t0 > latest)
      latest = woke - t0;
  }
  printf("\n    32 waiters in 2 processes woke within %lld ms ", (long long)latest);
  CU_ASSERT(latest * 1000 <= th_scaled_us(&srv, 50000));
  dlock_latch_free(l);
}

/* ---- semaphore ------------------------------------------------------------ */

static void test_semaphore_arithmetic(void) {
  dlock_semaphore *s = new_sem(cl, th_name("arith"));
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(s, 10, 0, &th_flag), 1);
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(s, 3, 0, &th_flag), 0);
  CU_ASSERT_EQUAL(available(s), 10);
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 1, 0), DLOCK_OK);
  CU_ASSERT_EQUAL(available(s), 9);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  CU_ASSERT_EQUAL(available(s), 10);
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 5, 0), DLOCK_OK);
  CU_ASSERT_EQUAL(available(s), 5);
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 6, 0), DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_semaphore_release(s, 5), DLOCK_OK);
  CU_ASSERT_EQUAL(available(s), 10);
  int64_t drained = -1, now = -1;
  TH_ASSERT_RC(dlock_semaphore_drain(s, &drained), DLOCK_OK);
  CU_ASSERT_EQUAL(drained, 10);
  CU_ASSERT_EQUAL(available(s), 0);
  TH_ASSERT_RC(dlock_semaphore_add_permits(s, 3, &now), DLOCK_OK); /* drained */
  CU_ASSERT_EQUAL(now, 3);
  TH_ASSERT_RC(dlock_semaphore_add_permits(s, -5, &now), DLOCK_OK); /* negative */
  CU_ASSERT_EQUAL(now, -2);
  TH_ASSERT_RC(dlock_semaphore_drain(s, &drained), DLOCK_OK);
  CU_ASSERT_EQUAL(drained, 0);
  CU_ASSERT_EQUAL(available(s), -2);
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 0, 0), DLOCK_OK); /* no-ops */
  TH_ASSERT_RC(dlock_semaphore_release(s, 0), DLOCK_OK);
  CU_ASSERT_EQUAL(available(s), -2);
  dlock_semaphore_free(s);
  s = new_sem(cl, th_name("noinit"));
  TH_ASSERT_RC(dlock_semaphore_release(s, 2), DLOCK_OK); /* creates permits */
  CU_ASSERT_EQUAL(available(s), 2);
  dlock_semaphore_free(s);
}

typedef struct sem_op {
  dlock_semaphore *sem;
  int64_t n, wait_ms;
  int rc;
  atomic_int done;
  pthread_t t;
} sem_op;

static void *sem_acquire_run(void *arg) {
  sem_op *o = arg;
  o->rc = dlock_semaphore_acquire(o->sem, o->n, o->wait_ms);
  atomic_store(&o->done, 1);
  return NULL;
}

static void start(sem_op *o) { pthread_create(&o->t, NULL, sem_acquire_run, o); }

/* Wait up to ms for o to finish; returns whether it did. A window of
 * absence: the claim "it does not proceed" needs one. */
static int finished_within(sem_op *o, int ms) {
  for (int64_t end = th_now_ms() + ms; th_now_ms() < end; usleep(2000))
    if (atomic_load(&o->done))
      return 1;
  return atomic_load(&o->done);
}

static long long subscribers(const char *channel) {
  return th_numsub(&srv, channel);
}

static void wait_subscribed(const char *name) {
  char channel[300];
  snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
  for (int64_t end = th_now_ms() + 3000; th_now_ms() < end; usleep(1000))
    if (subscribers(channel) >= 1)
      return;
  CU_FAIL("waiter never subscribed");
}

static void test_semaphore_waits_for_enough(void) {
  const char *name = th_name("enough");
  dlock_semaphore *s = new_sem(cl, name);
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_semaphore *s2 = new_sem(c2, name);
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(s, 2, 0, &th_flag), 1);
  sem_op a = {.sem = s2, .n = 4, .wait_ms = 10000};
  start(&a);
  wait_subscribed(name);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  CU_ASSERT_FALSE(finished_within(&a, 200)); /* 3 < 4 */
  CU_ASSERT_EQUAL(available(s), 3);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  pthread_join(a.t, NULL);
  TH_ASSERT_RC(a.rc, DLOCK_OK);
  CU_ASSERT_EQUAL(available(s), 0);

  /* a waiter for 2 does not proceed on a release of 1 */
  sem_op b = {.sem = s2, .n = 2, .wait_ms = 10000};
  start(&b);
  wait_subscribed(name);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  CU_ASSERT_FALSE(finished_within(&b, 200));
  CU_ASSERT_EQUAL(available(s), 1);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  pthread_join(b.t, NULL);
  TH_ASSERT_RC(b.rc, DLOCK_OK);
  dlock_semaphore_free(s2);
  dlock_client_close(c2);
  dlock_semaphore_free(s);
}

/* setPermits on both semaphores: the count (plain) or the total (expirable)
 * whatever it was, the TTL kept, waiters told. */
static void test_set_permits(void) {
  const char *name = th_name("set");
  dlock_semaphore *s = new_sem(cl, name);
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_semaphore *s2 = new_sem(c2, name);
  int64_t now = -1;
  TH_ASSERT_RC(dlock_semaphore_set_permits(s, 2, &now), DLOCK_OK); /* unset */
  CU_ASSERT_EQUAL(now, 2);
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 2, 0), DLOCK_OK);
  sem_op a = {.sem = s2, .n = 3, .wait_ms = 10000};
  start(&a);
  wait_subscribed(name);
  TH_ASSERT_RC(dlock_semaphore_set_permits(s, 3, &now), DLOCK_OK); /* wakes it */
  CU_ASSERT_EQUAL(now, 3);
  pthread_join(a.t, NULL);
  TH_ASSERT_RC(a.rc, DLOCK_OK);
  CU_ASSERT_EQUAL(available(s), 0);
  th_int(&srv, "PEXPIRE %s 60000", name);
  TH_ASSERT_RC(dlock_semaphore_set_permits(s, 5, &now), DLOCK_OK);
  CU_ASSERT_EQUAL(now, 5);
  CU_ASSERT(th_int(&srv, "PTTL %s", name) > 50000); /* the TTL stays */
  TH_ASSERT_RC(dlock_semaphore_set_permits(s, -1, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_semaphore_set_permits(NULL, 1, NULL), DLOCK_EINVAL);

  /* the expirable semaphore: the total counts the permits taken */
  const char *pname = th_name("set-permits");
  dlock_permits *p = new_permits(cl, pname);
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(p, 3, 60000, &th_flag), 1);
  int64_t ttl = th_int(&srv, "PTTL %s", pname);
  CU_ASSERT(ttl > 50000 && ttl <= 60000);
  dlock_permit_id ids[2];
  TH_ASSERT_RC(dlock_permits_acquire(p, 2, 0, 60000, ids), DLOCK_OK);
  TH_ASSERT_RC(dlock_permits_set_permits(p, 1, &now), DLOCK_OK);
  CU_ASSERT_EQUAL(now, -1); /* 2 taken of a total of 1 */
  TH_ASSERT_RC(dlock_permits_set_permits(p, 1, &now), DLOCK_OK); /* unchanged */
  CU_ASSERT_EQUAL(now, -1);
  CU_ASSERT(th_int(&srv, "PTTL %s", pname) > 50000);
  TH_ASSERT_RC(dlock_permits_release(p, ids, 2), DLOCK_OK);
  int64_t avail = -9, taken = -9;
  TH_ASSERT_RC(dlock_permits_counts(p, &avail, &taken), DLOCK_OK);
  CU_ASSERT(avail == 1 && taken == 0);
  TH_ASSERT_RC(dlock_permits_set_permits(p, 4, &now), DLOCK_OK);
  CU_ASSERT_EQUAL(now, 4);
  dlock_permits_free(p);
  dlock_semaphore_free(s2);
  dlock_client_close(c2);
  dlock_semaphore_free(s);
}

static void test_semaphore_fifo_policy(void) {
  /* A waiter for 4 is not overtaken by a later waiter for 1 of the same
   * client, even when 1 permit is free. */
  const char *name = th_name("fifo");
  dlock_semaphore *s = new_sem(cl, name);
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_semaphore *s2 = new_sem(c2, name);
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(s, 0, 0, &th_flag), 1);
  sem_op big = {.sem = s2, .n = 4, .wait_ms = 10000};
  start(&big);
  wait_subscribed(name);
  sem_op small = {.sem = s2, .n = 1, .wait_ms = 10000};
  start(&small);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  CU_ASSERT_FALSE(finished_within(&small, 200)); /* behind the big one */
  CU_ASSERT_EQUAL(available(s), 1);
  TH_ASSERT_RC(dlock_semaphore_release(s, 3), DLOCK_OK);
  pthread_join(big.t, NULL);
  TH_ASSERT_RC(big.rc, DLOCK_OK);
  CU_ASSERT_FALSE(atomic_load(&small.done));
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  pthread_join(small.t, NULL);
  TH_ASSERT_RC(small.rc, DLOCK_OK);
  dlock_semaphore_free(s2);
  dlock_client_close(c2);
  dlock_semaphore_free(s);
}

/* Wait until c has want FIFO (semaphore) waiters in line: the event "the
 * last one started has joined the line". */
static int wait_in_line(dlock_client *c, int want) {
  for (int64_t end = th_now_ms() + 3000; th_now_ms() < end; usleep(1000))
    if (dlock__fifo_waiters(c) == want)
      return 1;
  return 0;
}

static void test_semaphore_release_serves_oldest(void) {
  /* One release of 4 permits lets the 4 oldest of 5 waiters of one client
   * in (they take turns at once: docs/semaphore.md), not the 5th; a waiter
   * for 2 at the head is not overtaken by the ones behind it for 1. */
  const char *name = th_name("turns");
  dlock_semaphore *s = new_sem(cl, name);
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_semaphore *s2 = new_sem(c2, name);
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(s, 0, 0, &th_flag), 1);
  sem_op w[5];
  for (int i = 0; i < 5; i++) {
    w[i] = (sem_op){.sem = s2, .n = i == 0 ? 2 : 1, .wait_ms = 10000};
    start(&w[i]);
    CU_ASSERT_FATAL(wait_in_line(c2, i + 1));
  }
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  CU_ASSERT_FALSE(finished_within(&w[1], 200)); /* the head needs 2 */
  TH_ASSERT_RC(dlock_semaphore_release(s, 4), DLOCK_OK); /* 5 available */
  for (int i = 0; i < 4; i++) {
    pthread_join(w[i].t, NULL);
    TH_ASSERT_RC(w[i].rc, DLOCK_OK);
  }
  CU_ASSERT_FALSE(finished_within(&w[4], 200));
  CU_ASSERT_EQUAL(available(s), 0);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  pthread_join(w[4].t, NULL);
  TH_ASSERT_RC(w[4].rc, DLOCK_OK);
  CU_ASSERT_EQUAL(dlock__fifo_waiters(c2), 0);
  dlock_semaphore_free(s2);
  dlock_client_close(c2);
  dlock_semaphore_free(s);
}

/* How many scripts (EVALSHA and EVAL calls) the server has run. */
static long long scripts_run(void) {
  return th_cmd_calls(&srv, "evalsha") + th_cmd_calls(&srv, "eval");
}

/* A release made by a thread of the client gives the client's own waiters
 * their turn at once, not when the engine reads the release's message
 * (dlock__fifo_released, called by dlock_semaphore_release): here a permit
 * put in without a message stays untaken until the client is told of it
 * that way, well before the waiter's own re-check (1 s after its last try:
 * core/recipe.c). */
static void test_semaphore_release_wakes_own_waiters(void) {
  const char *name = th_name("own");
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_semaphore *s2 = new_sem(c2, name);
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(s2, 0, 0, &th_flag), 1);
  sem_op w = {.sem = s2, .n = 1, .wait_ms = 10000};
  long long before = scripts_run();
  start(&w);
  CU_ASSERT_FATAL(wait_in_line(c2, 1));
  /* in line, its try once subscribed may still be on its way: a permit put
   * in before the server runs it would be taken by it (a TSan run saw
   * that). The event: the server has run the waiter's three scripts
   * (measured: three before it rests); bounded, and no harm past it (a
   * re-check of the waiter's finds no permit yet) */
  for (int i = 0; i < 3000 && scripts_run() - before < 3; i++)
    usleep(1000);
  int64_t joined = th_now_ms(); /* it tried once in line */
  CU_ASSERT_EQUAL(th_int(&srv, "INCRBY %s 1", name), 1); /* no message */
  CU_ASSERT_FALSE(finished_within(&w, 200));
  char channel[300];
  int len = snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
  dlock__fifo_released(c2, channel, (size_t)len, 1);
  CU_ASSERT(finished_within(&w, 300)); /* measured 0-1 ms */
  CU_ASSERT(th_now_ms() - joined < 900); /* so not by its re-check */
  pthread_join(w.t, NULL);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  CU_ASSERT_EQUAL(available(s2), 0);
  /* a release by the client: its waiter goes in (told both ways) */
  start(&w);
  CU_ASSERT_FATAL(wait_in_line(c2, 1));
  TH_ASSERT_RC(dlock_semaphore_release(s2, 1), DLOCK_OK);
  pthread_join(w.t, NULL);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  CU_ASSERT_EQUAL(dlock__fifo_waiters(c2), 0);
  dlock_semaphore_free(s2);
  dlock_client_close(c2);
}

/* Threads of one client churning on 2 permits: waiters keep joining and
 * leaving the client's live subscription (each by itself, docs/threading.md
 * "Waiting"); the line's bookkeeping must come out even: never more than 2
 * inside, every permit back, nobody left in line, the channel unsubscribed. */
typedef struct churn {
  dlock_semaphore *sem;
  atomic_int inside, max_inside, errors, waited;
} churn;

static void *churn_thread(void *arg) {
  churn *ch = arg;
  for (int i = 0; i < 100; i++) {
    int64_t t0 = th_now_us();
    if (dlock_semaphore_acquire(ch->sem, 1, 10000) != DLOCK_OK) {
      atomic_fetch_add(&ch->errors, 1);
      continue;
    }
    if (th_now_us() - t0 > 2000)
      atomic_fetch_add(&ch->waited, 1);
    int in = atomic_fetch_add(&ch->inside, 1) + 1;
    int max = atomic_load(&ch->max_inside);
    while (in > max && !atomic_compare_exchange_weak(&ch->max_inside, &max, in))
      ;
    /* held 2.5 ms: with 8 threads on 2 permits a line forms, and those in
     * it wait longer than 2 ms (a 200 us hold made waits that short only
     * under scheduling noise: the check below failed once idle) */
    usleep(2500);
    atomic_fetch_sub(&ch->inside, 1);
    if (dlock_semaphore_release(ch->sem, 1) != DLOCK_OK)
      atomic_fetch_add(&ch->errors, 1);
  }
  return NULL;
}

static void test_semaphore_churn_one_client(void) {
  const char *name = th_name("churn");
  dlock_client *c2 = th_client(&srv, NULL);
  churn ch = {.sem = new_sem(c2, name)};
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(ch.sem, 2, 0, &th_flag), 1);
  th_threads(8, churn_thread, &ch);
  CU_ASSERT_EQUAL(atomic_load(&ch.errors), 0);
  CU_ASSERT(atomic_load(&ch.max_inside) <= 2);
  CU_ASSERT(atomic_load(&ch.waited) > 0); /* the line did form */
  CU_ASSERT_EQUAL(available(ch.sem), 2);
  CU_ASSERT_EQUAL(dlock__fifo_waiters(c2), 0);
  char channel[300];
  snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
  long long subs = -1;
  for (int64_t end = th_now_ms() + 3000; th_now_ms() < end; usleep(1000))
    if ((subs = subscribers(channel)) == 0)
      break;
  CU_ASSERT_EQUAL(subs, 0);
  dlock_semaphore_free(ch.sem);
  dlock_client_close(c2);
}

/* worker semaphore: URL NAME COUNTER PERMITS THREADS STEPS */
typedef struct semwork {
  const char *url, *name, *counter;
  char inside[300], violations[300];
  long permits;
  int steps;
  atomic_int errors;
} semwork;

static void *semwork_thread(void *arg) {
  semwork *w = arg;
  dlock_client *c = NULL;
  dlock_semaphore *s = NULL;
  redisContext *ctx = NULL;
  if (dlock_client_open(w->url, NULL, &c) != DLOCK_OK ||
      dlock_semaphore_new(c, w->name, NULL, &s) != DLOCK_OK) {
    atomic_fetch_add(&w->errors, 1);
    goto out;
  }
  ctx = th_connect_key(w->url, w->counter);
  for (int i = 0; i < w->steps; i++) {
    if (dlock_semaphore_acquire(s, 1, 30000) != DLOCK_OK) {
      atomic_fetch_add(&w->errors, 1);
      continue;
    }
    redisReply *r = redisCommand(ctx, "INCR %s", w->inside);
    if (r && r->integer > w->permits)
      freeReplyObject(redisCommand(ctx, "INCR %s", w->violations));
    freeReplyObject(r);
    r = redisCommand(ctx, "GET %s", w->counter); /* not atomic on purpose */
    long v = r && r->type == REDIS_REPLY_STRING ? atol(r->str) : 0;
    freeReplyObject(r);
    freeReplyObject(redisCommand(ctx, "SET %s %ld", w->counter, v + 1));
    freeReplyObject(redisCommand(ctx, "DECR %s", w->inside));
    if (dlock_semaphore_release(s, 1) != DLOCK_OK)
      atomic_fetch_add(&w->errors, 1);
  }
out:
  if (ctx)
    redisFree(ctx);
  dlock_semaphore_free(s);
  dlock_client_close(c);
  return NULL;
}

static int worker(int argc, char **argv) {
  if (argc == 7 && strcmp(argv[0], "semaphore") == 0) {
    semwork w = {.url = argv[1], .name = argv[2], .counter = argv[3],
                 .permits = atol(argv[4]), .steps = atoi(argv[6])};
    snprintf(w.inside, sizeof w.inside, "%s:inside", argv[3]);
    snprintf(w.violations, sizeof w.violations, "%s:violations", argv[3]);
    int n = atoi(argv[5]);
    th_threads(n < 16 ? n : 16, semwork_thread, &w);
    return atomic_load(&w.errors) ? 1 : 0;
  }
  if (argc == 4 && strcmp(argv[0], "latch") == 0) {
    /* latch URL NAME THREADS: prints "ok latest-wake-ms" */
    dlock_client *c = NULL;
    dlock_latch *l = NULL;
    if (dlock_client_open(argv[1], NULL, &c) != DLOCK_OK ||
        dlock_latch_new(c, argv[2], NULL, &l) != DLOCK_OK)
      return 1;
    int n = atoi(argv[3]);
    awaiter a[16];
    pthread_t t[16];
    for (int i = 0; i < n && i < 16; i++) {
      a[i] = (awaiter){l, -99, 0};
      pthread_create(&t[i], NULL, await_run, &a[i]);
    }
    int ok = 0;
    int64_t latest = 0;
    for (int i = 0; i < n && i < 16; i++) {
      pthread_join(t[i], NULL);
      ok += a[i].rc == DLOCK_OK;
      if (a[i].woke_ms > latest)
        latest = a[i].woke_ms;
    }
    printf("%d %lld\n", ok, (long long)latest);
    dlock_latch_free(l);
    dlock_client_close(c);
    return 0;
  }
  if (argc == 3 && strcmp(argv[0], "permit") == 0) {
    /* permit URL NAME: hold one watchdog permit (timeout 1 s) until killed */
    dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
    o.watchdog_timeout_ms = 1000;
    dlock_client *c = NULL;
    dlock_permits *p = NULL;
    dlock_permit_id id;
    if (dlock_client_open(argv[1], &o, &c) != DLOCK_OK ||
        dlock_permits_new(c, argv[2], NULL, &p) != DLOCK_OK ||
        dlock_permits_acquire(p, 1, 5000, DLOCK_LEASE_WATCHDOG, &id) != DLOCK_OK)
      return 1;
    for (int i = 0; i < 600; i++)
      usleep(100 * 1000);
    return 0;
  }
  return 2;
}

static void run_semaphore_procs(long permits, const char *steps) {
  char name[256], counter[300], key[320];
  snprintf(name, sizeof name, "%s", th_name("semprocs"));
  /* the counter and its ":inside" and ":violations" keys share a slot */
  snprintf(counter, sizeof counter, "{%s}:counter", name);
  dlock_semaphore *s = new_sem(cl, name);
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(s, permits, 0, &th_flag), 1);
  char p[16];
  snprintf(p, sizeof p, "%ld", permits);
  pid_t pids[4];
  for (int i = 0; i < 4; i++) {
    char *args[] = {"semaphore", srv.url, name, counter, p, "4", (char *)steps,
                    NULL};
    pids[i] = th_spawn_worker(args);
  }
  for (int i = 0; i < 4; i++)
    CU_ASSERT_EQUAL(th_wait_worker(pids[i], 120000), 0);
  snprintf(key, sizeof key, "%s:violations", counter);
  CU_ASSERT_EQUAL(th_int(&srv, "INCRBY %s 0", key), 0); /* never > permits */
  if (permits == 1) /* exclusive: no update lost */
    CU_ASSERT_EQUAL(th_int(&srv, "INCRBY %s 0", counter), 16 * atol(steps));
  CU_ASSERT_EQUAL(available(s), permits);
  dlock_semaphore_free(s);
}

static void test_semaphore_mutex_processes(void) { run_semaphore_procs(1, "100"); }
static void test_semaphore_4_permits_processes(void) { run_semaphore_procs(4, "100"); }

/* ---- expirable permits ---------------------------------------------------- */

/* A permit id's 16 bytes, as the scripts and the {N}:timeout zset hold it. */
static void permit_raw(const dlock_permit_id *id, char raw[16]) {
  for (int i = 0; i < 16; i++)
    sscanf(id->hex + 2 * i, "%2hhx", (unsigned char *)&raw[i]);
}

static void counts(dlock_permits *p, int64_t *avail, int64_t *acq) {
  TH_ASSERT_RC(dlock_permits_counts(p, avail, acq), DLOCK_OK);
}

static void test_permits_expire_and_release(void) {
  dlock_permits *p = new_permits(cl, th_name("expire"));
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(p, 2, 0, &th_flag), 1);
  dlock_permit_id ids[2];
  TH_ASSERT_RC(dlock_permits_acquire(p, 2, 0, 1000, ids), DLOCK_OK);
  CU_ASSERT_EQUAL(strlen(ids[0].hex), 32);
  CU_ASSERT(strcmp(ids[0].hex, ids[1].hex) != 0);
  int64_t avail = -1, acq = -1, ms = 0;
  counts(p, &avail, &acq);
  CU_ASSERT(avail == 0 && acq == 2);
  TH_ASSERT_RC(dlock_permits_lease_remaining(p, &ids[0], &ms), DLOCK_OK);
  CU_ASSERT(ms > 800 && ms <= 1000);
  dlock_permit_id more;
  TH_ASSERT_RC(dlock_permits_acquire(p, 1, 0, 1000, &more), DLOCK_EBUSY);
  usleep(1100 * 1000); /* the scenario: the leases run out */
  counts(p, &avail, &acq);
  CU_ASSERT(avail == 2 && acq == 0);
  TH_ASSERT_RC(dlock_permits_release(p, &ids[0], 1), DLOCK_ELOST);
  CU_ASSERT(strstr(dlock_errmsg(), "expired") != NULL);
  TH_ASSERT_RC(dlock_permits_lease_remaining(p, &ids[1], &ms), DLOCK_OK);
  CU_ASSERT_EQUAL(ms, -2);

  /* all or nothing: a list with an unknown id changes nothing */
  TH_ASSERT_RC(dlock_permits_acquire(p, 2, 0, 30000, ids), DLOCK_OK);
  dlock_permit_id mixed[2] = {ids[0], {"00112233445566778899aabbccddeeff"}};
  TH_ASSERT_RC(dlock_permits_release(p, mixed, 2), DLOCK_ENOTOWNER);
  counts(p, &avail, &acq);
  CU_ASSERT(avail == 0 && acq == 2);
  TH_ASSERT_RC(dlock_permits_release(p, ids, 2), DLOCK_OK);
  counts(p, &avail, &acq);
  CU_ASSERT(avail == 2 && acq == 0);
  TH_ASSERT_RC(dlock_permits_release(p, ids, 1), DLOCK_ENOTOWNER); /* twice */

  /* lease updates */
  TH_ASSERT_RC(dlock_permits_acquire(p, 1, 0, 10000, ids), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_permits_update_lease(p, &ids[0], 2000, &th_flag), 1);
  TH_ASSERT_RC(dlock_permits_lease_remaining(p, &ids[0], &ms), DLOCK_OK);
  CU_ASSERT(ms > 1800 && ms <= 2000);
  TH_ASSERT_FLAG(dlock_permits_update_lease(p, &mixed[1], 2000, &th_flag), 0);
  TH_ASSERT_RC(dlock_permits_release(p, ids, 1), DLOCK_OK);
  dlock_permits_free(p);
}

/* A permit whose loss was reported (here: renewed until max_hold, then its
 * lease ran out) releases with DLOCK_ELOST even when it outlived the lease
 * the client knew of (made sure of here), and it is released all the same. */
static void test_permits_reported_lost_release(void) {
  th_lost_log log;
  dlock_client *c = th_max_hold_client(&srv, &log);
  const char *name = th_name("plost");
  dlock_permits *p = new_permits(c, name);
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(p, 1, 0, &th_flag), 1);
  dlock_permit_id id;
  TH_ASSERT_RC(dlock_permits_acquire(p, 1, 0, DLOCK_LEASE_WATCHDOG, &id), DLOCK_OK);
  CU_ASSERT_EQUAL(th_lost_wait(&log, 1, 3000), 1);
  CU_ASSERT_EQUAL(log.reason, DLOCK_LOST_MAX_HOLD);
  CU_ASSERT_STRING_EQUAL(log.name, name); /* the semaphore's, not a key's */
  char raw[16];
  permit_raw(&id, raw);
  /* the permit back in the deadlines, far in the future; not available */
  freeReplyObject(th_cmd(&srv, "ZADD {%s}:timeout 99999999999999 %b", name, raw,
                         (size_t)16));
  freeReplyObject(th_cmd(&srv, "SET %s 0", name));
  TH_ASSERT_RC(dlock_permits_release(p, &id, 1), DLOCK_ELOST);
  CU_ASSERT(strstr(dlock_errmsg(), "reported lost") != NULL);
  CU_ASSERT_EQUAL(th_int(&srv, "ZCARD {%s}:timeout", name), 0);
  CU_ASSERT_EQUAL(th_int(&srv, "INCRBY %s 0", name), 1); /* given back */
  dlock_permits_free(p);
  dlock_client_close(c);
}

static void test_permits_watchdog_crash_safety(void) {
  const char *name = th_name("crash");
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 1000;
  dlock_client *c = th_client(&srv, &o);
  dlock_permits *p = new_permits(c, name);
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(p, 2, 0, &th_flag), 1);
  dlock_permit_id mine;
  TH_ASSERT_RC(dlock_permits_acquire(p, 1, 0, DLOCK_LEASE_WATCHDOG, &mine),
               DLOCK_OK);
  char *args[] = {"permit", srv.url, (char *)name, NULL};
  pid_t pid = th_spawn_worker(args);
  int64_t avail = -1, acq = -1;
  for (int64_t end = th_now_ms() + 5000; th_now_ms() < end; usleep(2000)) {
    counts(p, &avail, &acq);
    if (acq == 2)
      break;
  }
  CU_ASSERT_EQUAL_FATAL(acq, 2); /* the event: the worker holds its permit */
  kill(pid, SIGKILL);
  int64_t t0 = th_now_ms();
  th_wait_worker(pid, 5000);
  while (avail != 1 && th_now_ms() - t0 < 3000) {
    usleep(5000);
    counts(p, &avail, &acq);
  }
  CU_ASSERT_EQUAL(avail, 1);
  printf("\n    a killed holder's permit came back after %lld ms ",
         (long long)(th_now_ms() - t0));
  CU_ASSERT(th_now_ms() - t0 <= 1000 + 100);
  /* the live holder keeps its permit past the watchdog timeout */
  while (th_now_ms() - t0 < 2500)
    usleep(10000);
  int64_t ms = 0;
  TH_ASSERT_RC(dlock_permits_lease_remaining(p, &mine, &ms), DLOCK_OK);
  CU_ASSERT(ms > 0);
  counts(p, &avail, &acq);
  CU_ASSERT(avail == 1 && acq == 1);
  TH_ASSERT_RC(dlock_permits_release(p, &mine, 1), DLOCK_OK);
  dlock_permits_free(p);
  dlock_client_close(c);
}

/* ---- the semaphore as a lock ---------------------------------------------- */

static void test_semaphore_lock(void) {
  const char *name = th_name("semlock");
  dlock_permits *p = new_permits(cl, name);
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(p, 1, 0, &th_flag), 1);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_semaphore_lock_new(cl, name, NULL, &l), DLOCK_OK);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(l), "semaphore");
  TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(l, &st), DLOCK_OK);
  CU_ASSERT(st.locked && st.held_by_me && st.hold_count == 1 && st.ttl_ms > 0);
  TH_ASSERT_RC(th_acquire_elsewhere(l, 0, 5000), DLOCK_EBUSY);
  TH_ASSERT_RC(th_release_elsewhere(l), DLOCK_ENOTOWNER); /* it holds none */
  TH_ASSERT_RC(dlock_force_release(l, NULL), DLOCK_ENOTSUP);
  th_acquirer t = {.lock = l, .wait_ms = 5000, .lease_ms = 5000};
  th_acquirer_start(&t);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  th_acquirer_join(&t);
  TH_ASSERT_RC(t.rc, DLOCK_OK);
  TH_ASSERT_RC(t.release_rc, DLOCK_OK);
  int64_t avail = -1;
  counts(p, &avail, NULL);
  CU_ASSERT_EQUAL(avail, 1);
  dlock_lock_free(l);
  dlock_permits_free(p);
}

static void test_bad_input(void) {
  dlock_latch *l = NULL;
  dlock_semaphore *s = NULL;
  dlock_permits *p = NULL;
  TH_ASSERT_RC(dlock_latch_new(NULL, "x", NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_semaphore_new(cl, "", NULL, &s), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_permits_new(cl, NULL, NULL, &p), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_latch_new(cl, "x", NULL, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_semaphore_new(cl, "x", NULL, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_permits_new(cl, "x", NULL, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_semaphore_lock_new(cl, "x", NULL, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_latch_try_set_count(NULL, 1, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_latch_await(NULL, 0), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_semaphore_acquire(NULL, 1, 0), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_permits_acquire(NULL, 1, 0, 1000, NULL), DLOCK_EINVAL);
  dlock_latch_free(NULL);
  dlock_semaphore_free(NULL);
  dlock_permits_free(NULL);
  l = new_latch(th_name("bad"));
  TH_ASSERT_RC(dlock_latch_try_set_count(l, 0, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_latch_get_count(l, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_latch_await(l, -5), DLOCK_EINVAL);
  dlock_latch_free(l);
  s = new_sem(cl, th_name("bad"));
  TH_ASSERT_RC(dlock_semaphore_acquire(s, -1, 0), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_semaphore_release(s, -1), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_semaphore_try_set_permits(s, -1, 0, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_semaphore_available(s, NULL), DLOCK_EINVAL);
  dlock_semaphore_free(s);
  p = new_permits(cl, th_name("bad"));
  dlock_permit_id ids[65];
  TH_ASSERT_RC(dlock_permits_acquire(p, 0, 0, 1000, ids), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_permits_acquire(p, 65, 0, 1000, ids), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_permits_acquire(p, 1, 0, 0, ids), DLOCK_EINVAL);
  dlock_permit_id bad = {"not-hex-at-all"};
  TH_ASSERT_RC(dlock_permits_release(p, &bad, 1), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_permits_update_lease(p, &bad, 1000, NULL), DLOCK_EINVAL);
  dlock_permits_free(p);
  /* WRONGTYPE */
  const char *name = th_name("wrongtype");
  freeReplyObject(th_cmd(&srv, "HSET %s a b", name));
  l = new_latch(name);
  TH_ASSERT_RC(dlock_latch_count_down(l, NULL), DLOCK_EKIND);
  CU_ASSERT(strstr(dlock_errmsg(), "another type") != NULL);
  TH_ASSERT_RC(dlock_latch_await(l, 100), DLOCK_EKIND);
  dlock_latch_free(l);
  s = new_sem(cl, name);
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 1, 100), DLOCK_EKIND);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_EKIND);
  dlock_semaphore_free(s);
  p = new_permits(cl, name);
  TH_ASSERT_RC(dlock_permits_acquire(p, 1, 100, 1000, ids), DLOCK_EKIND);
  dlock_permits_free(p);
  CU_ASSERT_EQUAL(th_int(&srv, "HLEN %s", name), 1); /* untouched */
}

/* A release whose reply was lost is retried with the same request id; the
 * release latch replays the first outcome instead of finding the permits
 * gone (which read as "expired"). The script is driven directly here, as
 * the retry would send it: twice with one latch. */
static void test_permits_release_replayed(void) {
  const char *name = th_name("replay");
  dlock_permits *p = new_permits(cl, name);
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(p, 3, 0, &th_flag), 1);
  dlock_permit_id ids[2];
  TH_ASSERT_RC(dlock_permits_acquire(p, 2, 0, 30000, ids), DLOCK_OK);
  char raw[2][16];
  for (int k = 0; k < 2; k++)
    permit_raw(&ids[k], raw[k]);
  char timeouts[300], channel[300], latch[300], other[300];
  snprintf(timeouts, sizeof timeouts, "{%s}:timeout", name);
  snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
  snprintf(latch, sizeof latch, "dlock_permits_release_latch:{%s}:r1", name);
  snprintf(other, sizeof other, "dlock_permits_release_latch:{%s}:r2", name);
  const dlock__script *sc = &dlock__scripts[DLOCK__SCRIPT_PERMITS_RELEASE];
  for (int attempt = 0; attempt < 2; attempt++) { /* the call, its retry */
    redisReply *r = th_cmd(&srv, "EVAL %b 3 %s %s %s PUBLISH %s 10000 %b %b",
                           sc->body, sc->len, name, latch, timeouts, channel,
                           raw[0], (size_t)16, raw[1], (size_t)16);
    CU_ASSERT_FATAL(r != NULL);
    CU_ASSERT_EQUAL(r->type, REDIS_REPLY_INTEGER);
    CU_ASSERT_EQUAL(r->integer, 2); /* released, then replayed */
    freeReplyObject(r);
  }
  int64_t avail = -1, acq = -1;
  counts(p, &avail, &acq);
  CU_ASSERT(avail == 3 && acq == 0); /* counted once */
  /* another call (another id) finds them gone: -1, nothing changes */
  redisReply *r = th_cmd(&srv, "EVAL %b 3 %s %s %s PUBLISH %s 10000 %b",
                         sc->body, sc->len, name, other, timeouts, channel,
                         raw[0], (size_t)16);
  CU_ASSERT(r && r->type == REDIS_REPLY_INTEGER && r->integer == -1);
  freeReplyObject(r);
  counts(p, &avail, &acq);
  CU_ASSERT(avail == 3 && acq == 0);
  CU_ASSERT(th_int(&srv, "PTTL %s", latch) > 0); /* the latch expires */
  dlock_permits_free(p);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("sync", suite_init, suite_clean);
  CU_add_test(s, "latch_counts", test_latch_counts);
  CU_add_test(s, "latch_await_budget", test_latch_await_budget);
  CU_add_test(s, "latch_wakes_all_processes", test_latch_wakes_all_processes);
  CU_add_test(s, "semaphore_arithmetic", test_semaphore_arithmetic);
  CU_add_test(s, "semaphore_waits_for_enough", test_semaphore_waits_for_enough);
  CU_add_test(s, "set_permits", test_set_permits);
  CU_add_test(s, "semaphore_fifo_policy", test_semaphore_fifo_policy);
  CU_add_test(s, "semaphore_release_wakes_own_waiters",
              test_semaphore_release_wakes_own_waiters);
  CU_add_test(s, "semaphore_release_serves_oldest",
              test_semaphore_release_serves_oldest);
  CU_add_test(s, "semaphore_churn_one_client", test_semaphore_churn_one_client);
  CU_add_test(s, "semaphore_mutex_processes", test_semaphore_mutex_processes);
  CU_add_test(s, "semaphore_4_permits_processes", test_semaphore_4_permits_processes);
  CU_add_test(s, "permits_expire_and_release", test_permits_expire_and_release);
  CU_add_test(s, "permits_release_replayed", test_permits_release_replayed);
  CU_add_test(s, "permits_watchdog_crash_safety", test_permits_watchdog_crash_safety);
  CU_add_test(s, "permits_reported_lost_release",
              test_permits_reported_lost_release);
  CU_add_test(s, "semaphore_lock", test_semaphore_lock);
  CU_add_test(s, "bad_input", test_bad_input);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, worker); }
