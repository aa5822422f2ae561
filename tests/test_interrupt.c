/* Interruptible waits: dlock_interrupt() and friends stop a wait under way
 * from another thread. The wait returns DLOCK_EINTR promptly and leaves
 * nothing behind: no hold, no fair-queue entry, no subscription. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine.h"
#include "harness.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

/* A blocking call in a thread; it publishes its thread id first. */
typedef struct waiter {
  int (*call)(struct waiter *);
  dlock_lock *lock;
  dlock_latch *latch;
  dlock_semaphore *sem;
  dlock_permits *permits;
  _Atomic uint64_t tid;
  int rc;
  int64_t done_ms;
  pthread_t thread;
} waiter;

static void *waiter_run(void *arg) {
  waiter *w = arg;
  atomic_store(&w->tid, dlock_thread_id());
  w->rc = w->call(w);
  w->done_ms = th_now_ms();
  return NULL;
}

static int call_acquire(waiter *w) {
  return dlock_acquire(w->lock, DLOCK_WAIT_FOREVER, 30000);
}
static int call_await(waiter *w) { return dlock_latch_await(w->latch, DLOCK_WAIT_FOREVER); }
static int call_sem(waiter *w) {
  return dlock_semaphore_acquire(w->sem, 1, DLOCK_WAIT_FOREVER);
}
static int call_permits(waiter *w) {
  dlock_permit_id id;
  return dlock_permits_acquire(w->permits, 1, DLOCK_WAIT_FOREVER, 30000, &id);
}

static void start(waiter *w) {
  w->rc = 1;
  CU_ASSERT_FATAL(pthread_create(&w->thread, NULL, waiter_run, w) == 0);
}

/* The event that says the waiter waits: it subscribed to channel. */
static void wait_subscribed(const char *channel) {
  CU_ASSERT_FATAL(th_wait_numsub(&srv, channel, 1, 10000));
}

/* Join the interrupted waiter: DLOCK_EINTR within 2 s of the interrupt
 * (it waited on a 30 s lease; measured on this 2-core machine: 0 ms idle,
 * at most 3 ms with two `yes > /dev/null` hogs running: over 600x headroom)
 * and no subscription left. */
static void interrupted(waiter *w, int64_t at_ms, const char *channel) {
  pthread_join(w->thread, NULL);
  TH_ASSERT_RC(w->rc, DLOCK_EINTR);
  CU_ASSERT(w->done_ms - at_ms < 2000);
  CU_ASSERT(strstr(dlock_strerror(DLOCK_EINTR), "interrupted") != NULL);
  CU_ASSERT(th_wait_numsub(&srv, channel, 0, 5000));
}

static void test_lock_by_handle(void) {
  const char *name = th_name("lock");
  char channel[160];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  dlock_lock *holder, *l;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &holder), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &l), DLOCK_OK);
  int n = -1;
  TH_ASSERT_RC(dlock_interrupt(l, &n), DLOCK_OK); /* nobody waits: nothing */
  CU_ASSERT_EQUAL(n, 0);
  TH_ASSERT_RC(dlock_acquire(holder, 0, 30000), DLOCK_OK);
  waiter w = {.call = call_acquire, .lock = l};
  start(&w);
  wait_subscribed(channel);
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_interrupt(l, &n), DLOCK_OK);
  CU_ASSERT_EQUAL(n, 1);
  interrupted(&w, t, channel);
  CU_ASSERT_EQUAL(th_int(&srv, "HLEN %s", name), 1); /* the holder's only */
  /* the handle works as before */
  TH_ASSERT_RC(dlock_release(holder), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 1000, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_interrupt(NULL, &n), DLOCK_EINVAL);
  dlock_lock_free(l);
  dlock_lock_free(holder);
}

/* A fair waiter interrupted by its owner leaves the queue: the next waiter
 * is not held up by it. */
static void test_fair_by_owner(void) {
  const char *name = th_name("fair");
  dlock_lock *holder, *l;
  TH_ASSERT_RC(dlock_fair_lock_new(cl, name, NULL, &holder), DLOCK_OK);
  TH_ASSERT_RC(dlock_fair_lock_new(cl, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(holder, 0, 30000), DLOCK_OK);
  waiter w = {.call = call_acquire, .lock = l};
  start(&w);
  for (int64_t end = th_now_ms() + 10000;
       th_now_ms() < end && th_int(&srv, "LLEN redisson_lock_queue:{%s}", name) < 1;)
    usleep(1000);
  CU_ASSERT_FATAL(th_int(&srv, "LLEN redisson_lock_queue:{%s}", name) == 1);
  int n = -1;
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_interrupt_owner(atomic_load(&w.tid), &n), DLOCK_OK);
  CU_ASSERT_EQUAL(n, 1);
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}:%s:%llu", name,
           dlock_client_id(cl), (unsigned long long)atomic_load(&w.tid));
  interrupted(&w, t, channel);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS redisson_lock_queue:{%s}", name), 0);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS redisson_lock_timeout:{%s}", name), 0);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS dlock_fair_alive:{%s}", name), 0);
  TH_ASSERT_RC(dlock_release(holder), DLOCK_OK);
  dlock_lock_free(l);
  dlock_lock_free(holder);
}

static void test_read_write_multi(void) {
  const char *name = th_name("rw");
  char channel[160];
  snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
  dlock_lock *writer, *reader;
  TH_ASSERT_RC(dlock_write_lock_new(cl, name, NULL, &writer), DLOCK_OK);
  TH_ASSERT_RC(dlock_read_lock_new(cl, name, NULL, &reader), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(writer, 0, 30000), DLOCK_OK);
  waiter w = {.call = call_acquire, .lock = reader};
  start(&w);
  wait_subscribed(channel);
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_interrupt(reader, NULL), DLOCK_OK);
  interrupted(&w, t, channel);
  TH_ASSERT_RC(dlock_release(writer), DLOCK_OK);

  /* a multi-lock waiting on its second member: interrupting the multi-lock
   * stops its member's wait and it keeps none of its members */
  char a[120], b[120];
  snprintf(a, sizeof a, "%s:a", name);
  snprintf(b, sizeof b, "%s:b", name);
  dlock_lock *ma, *mb, *other_b, *multi;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, a, NULL, &ma), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, b, NULL, &mb), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, b, NULL, &other_b), DLOCK_OK);
  dlock_lock *members[] = {ma, mb};
  TH_ASSERT_RC(dlock_multi_new(members, 2, &multi), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(other_b, 0, 30000), DLOCK_OK);
  waiter m = {.call = call_acquire, .lock = multi};
  start(&m);
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", b);
  wait_subscribed(channel);
  t = th_now_ms();
  int n = -1;
  TH_ASSERT_RC(dlock_interrupt(multi, &n), DLOCK_OK);
  CU_ASSERT_EQUAL(n, 1);
  interrupted(&m, t, channel);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", a), 0);
  TH_ASSERT_RC(dlock_release(other_b), DLOCK_OK);
  dlock_lock_free(multi);
  dlock_lock_free(ma);
  dlock_lock_free(mb);
  dlock_lock_free(other_b);
  dlock_lock_free(reader);
  dlock_lock_free(writer);
}

static void test_redlock(void) {
  const char *name = th_name("redlock");
  dlock_lock *members[3], *rl;
  for (int i = 0; i < 3; i++)
    TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &members[i]), DLOCK_OK);
  /* one server standing in for three masters is enough here: the first
   * member's lock is held by someone else, so no round can reach quorum */
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_lock *blocker;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c2, name, NULL, &blocker), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(blocker, 0, 30000), DLOCK_OK);
  dlock_redlock_opts o = DLOCK_REDLOCK_OPTS_INIT;
  TH_ASSERT_RC(dlock_redlock_new(members, 3, &o, &rl), DLOCK_OK);
  waiter w = {.call = call_acquire, .lock = rl};
  start(&w);
  /* the event: it is between rounds (interruptible), found by polling */
  int n = 0;
  int64_t t = th_now_ms();
  for (int64_t end = t + 10000; th_now_ms() < end && n == 0;) {
    TH_ASSERT_RC(dlock_interrupt(rl, &n), DLOCK_OK);
    if (n == 0)
      usleep(1000);
  }
  CU_ASSERT_EQUAL(n, 1);
  pthread_join(w.thread, NULL);
  TH_ASSERT_RC(w.rc, DLOCK_EINTR);
  CU_ASSERT(w.done_ms - t < 2000);
  CU_ASSERT_EQUAL(th_int(&srv, "HLEN %s", name), 1); /* the blocker's only */
  TH_ASSERT_RC(dlock_release(blocker), DLOCK_OK);
  dlock_lock_free(rl);
  for (int i = 0; i < 3; i++)
    dlock_lock_free(members[i]);
  dlock_lock_free(blocker);
  dlock_client_close(c2);
}

static void test_synchronizers(void) {
  const char *name = th_name("sync");
  char latch_name[120], sem_name[120], permits_name[120], channel[200];
  snprintf(latch_name, sizeof latch_name, "%s:latch", name);
  snprintf(sem_name, sizeof sem_name, "%s:sem", name);
  snprintf(permits_name, sizeof permits_name, "%s:permits", name);
  waiter w = {0};
  int n = -1;

  TH_ASSERT_RC(dlock_latch_new(cl, latch_name, NULL, &w.latch), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_latch_try_set_count(w.latch, 1, &th_flag), 1);
  w.call = call_await;
  start(&w);
  snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", latch_name);
  wait_subscribed(channel);
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_latch_interrupt(w.latch, &n), DLOCK_OK);
  CU_ASSERT_EQUAL(n, 1);
  interrupted(&w, t, channel);

  TH_ASSERT_RC(dlock_semaphore_new(cl, sem_name, NULL, &w.sem), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(w.sem, 0, 0, &th_flag), 1);
  w.call = call_sem;
  start(&w);
  snprintf(channel, sizeof channel, "redisson_sc:{%s}", sem_name);
  wait_subscribed(channel);
  t = th_now_ms();
  TH_ASSERT_RC(dlock_semaphore_interrupt(w.sem, &n), DLOCK_OK);
  CU_ASSERT_EQUAL(n, 1);
  interrupted(&w, t, channel);

  TH_ASSERT_RC(dlock_permits_new(cl, permits_name, NULL, &w.permits), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(w.permits, 0, 0, &th_flag), 1);
  w.call = call_permits;
  start(&w);
  snprintf(channel, sizeof channel, "redisson_sc:{%s}", permits_name);
  wait_subscribed(channel);
  t = th_now_ms();
  TH_ASSERT_RC(dlock_permits_interrupt(w.permits, &n), DLOCK_OK);
  CU_ASSERT_EQUAL(n, 1);
  interrupted(&w, t, channel);
  CU_ASSERT_EQUAL(th_int(&srv, "ZCARD {%s}:timeout", permits_name), 0);

  dlock_latch_free(w.latch);
  dlock_semaphore_free(w.sem);
  dlock_permits_free(w.permits);
  TH_ASSERT_RC(dlock_latch_interrupt(NULL, &n), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_semaphore_interrupt(NULL, &n), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_permits_interrupt(NULL, &n), DLOCK_EINVAL);
}

/* The engine sends a waiting thread's try early when a release wakes it
 * (fair and read-write locks); an interrupt can land while that try is in
 * flight, and its answer can be a grant. The hook interrupts the waiter at
 * the moment the early try is made, so the race happens every time: the
 * acquire returns DLOCK_EINTR and the grant is given back before it does
 * (the lock is free at once, nobody queued). */
static atomic_int early_hooked, armed;
static int interrupt_at_early_try(int event) {
  if (event == DLOCK__HOOK_ARMED) {
    atomic_store(&armed, 1);
    return 0;
  }
  atomic_fetch_add(&early_hooked, 1);
  return 1;
}

/* holder (bound to owner 1: not the waiter's thread) holds name; l's waiter
 * is woken by its release while the hook interrupts it. A fair waiter
 * listens on a channel of its own (named by its thread), a writer on the
 * lock's. */
static void early_race(dlock_lock *holder, dlock_lock *l, const char *name,
                       int fair) {
  dlock_lock_bind_owner(holder, 1);
  TH_ASSERT_RC(dlock_acquire(holder, 0, 30000), DLOCK_OK);
  atomic_store(&early_hooked, 0);
  atomic_store(&armed, 0);
  atomic_store(&dlock__early_hook, interrupt_at_early_try);
  waiter w = {.call = call_acquire, .lock = l};
  start(&w);
  char channel[200];
  if (fair) {
    for (int64_t end = th_now_ms() + 10000;
         th_now_ms() < end && th_int(&srv, "LLEN redisson_lock_queue:{%s}", name) < 1;)
      usleep(1000);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}:%s:%llu", name,
             dlock_client_id(cl), (unsigned long long)atomic_load(&w.tid));
  } else {
    snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
  }
  wait_subscribed(channel);
  /* the event: the waiter made its try after subscribing and is armed (a
   * release before that is found by that try, with nothing sent early) */
  for (int64_t end = th_now_ms() + 10000;
       !atomic_load(&armed) && th_now_ms() < end;)
    usleep(1000);
  CU_ASSERT_FATAL(atomic_load(&armed));
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_release(holder), DLOCK_OK); /* wakes the waiter */
  pthread_join(w.thread, NULL);
  atomic_store(&dlock__early_hook, NULL);
  CU_ASSERT_EQUAL(atomic_load(&early_hooked), 1);
  TH_ASSERT_RC(w.rc, DLOCK_EINTR);
  CU_ASSERT(w.done_ms - t < 2000); /* as interrupted() */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0); /* no hold left */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS redisson_lock_queue:{%s}", name), 0);
  CU_ASSERT(th_wait_numsub(&srv, channel, 0, 5000));
  dlock_lock_free(l);
  dlock_lock_free(holder);
}

static void test_early_grant_given_back(void) {
  const char *name = th_name("early-fair");
  dlock_lock *holder, *l;
  TH_ASSERT_RC(dlock_fair_lock_new(cl, name, NULL, &holder), DLOCK_OK);
  TH_ASSERT_RC(dlock_fair_lock_new(cl, name, NULL, &l), DLOCK_OK);
  early_race(holder, l, name, 1);
  name = th_name("early-rw");
  TH_ASSERT_RC(dlock_write_lock_new(cl, name, NULL, &holder), DLOCK_OK);
  TH_ASSERT_RC(dlock_write_lock_new(cl, name, NULL, &l), DLOCK_OK);
  early_race(holder, l, name, 0);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("interrupt", suite_init, suite_clean);
  CU_add_test(s, "lock_by_handle", test_lock_by_handle);
  CU_add_test(s, "fair_by_owner", test_fair_by_owner);
  CU_add_test(s, "read_write_multi", test_read_write_multi);
  CU_add_test(s, "redlock", test_redlock);
  CU_add_test(s, "synchronizers", test_synchronizers);
  CU_add_test(s, "early_grant_given_back", test_early_grant_given_back);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
