/* Memory bounds, as facts (docs/performance.md, docs/async.md,
 * docs/election.md): the client heap a held lock, a blocking waiter, an
 * async waiter and an election observer each add, counted the way
 * dlock-bench counts it (malloc's own figures, mallinfo2) over 1,000 or
 * 10,000 of each, against the bound the docs state, with names as short as the
 * bench's (a name is kept in several keys: a name 20 bytes longer adds
 * about 100 bytes to a held lock). No timing: each count is taken once the
 * client says every one of them is in place. The plain build runs it (the
 * sanitizers' and valgrind's allocators count otherwise); the suite has a
 * server of its own, so the short names meet nobody's. */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

/* a thousand blocking waiters (a thread each); ten thousand of the
 * others, as the bench counts them */
enum { N = 1000, MANY = 10000 };

/* The heap in use, as malloc counts it (dlock-bench's heap_used). */
static size_t heap_used(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

static dlock_stats stats_of(dlock_client *c) {
  dlock_stats st = {.version = DLOCK_STATS_VERSION};
  dlock_client_stats(c, &st);
  return st;
}

/* Until c has sent at least want commands since from and has none in
 * flight (bounded: 30 s): 1 when it did. */
static int settled(dlock_client *c, uint64_t from, uint64_t want) {
  for (int64_t end = th_now_ms() + 30000; th_now_ms() < end; usleep(10000)) {
    dlock_stats st = stats_of(c);
    if (st.commands - from >= want && st.in_flight == 0)
      return 1;
  }
  return 0;
}

/* Until *n reaches want (bounded: 30 s): its last value. */
static int until_count(atomic_int *n, int want) {
  for (int64_t end = th_now_ms() + 30000;
       atomic_load(n) < want && th_now_ms() < end;)
    usleep(5000);
  return atomic_load(n);
}

static void report(const char *what, double bytes, double bound) {
  printf("\n    %s: %.1f bytes (bound %.0f) ", what, bytes, bound);
  CU_ASSERT(bytes > 0 && bytes <= bound);
}

/* A lock held under the watchdog: its handle and its hold (M1: 512 B). */
static void test_held_lock(void) {
  dlock_lock **locks = calloc(MANY, sizeof *locks);
  CU_ASSERT_PTR_NOT_NULL_FATAL(locks);
  size_t before = heap_used();
  for (int i = 0; i < MANY; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:m1:%d", i);
    TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &locks[i]), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(locks[i], 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  }
  size_t after = heap_used();
  report("a held lock", (double)(after - before) / MANY, 512);
  for (int i = 0; i < MANY; i++) {
    TH_ASSERT_RC(dlock_release(locks[i]), DLOCK_OK);
    dlock_lock_free(locks[i]);
  }
  free(locks);
}

/* ---- a blocking waiter (M1: 2 KiB, its thread's stack aside) --------------- */

static void *wait_on(void *p) {
  if (dlock_acquire(p, 60000, 30000) == DLOCK_OK)
    dlock_release(p);
  return NULL;
}

static void test_blocking_waiter(void) {
  const char *name = "bench:m1:waited";
  dlock_client *hc = th_client(&srv, NULL);
  dlock_lock *held, *waited;
  TH_ASSERT_RC(dlock_reentrant_lock_new(hc, name, NULL, &held), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &waited), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(held, 0, 60000), DLOCK_OK);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  pthread_t *t = calloc(N, sizeof *t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  uint64_t c0 = stats_of(cl).commands;
  size_t before = heap_used();
  int started = 0;
  for (int i = 0; i < N; i++)
    started += pthread_create(&t[i], &attr, wait_on, waited) == 0;
  CU_ASSERT_EQUAL_FATAL(started, N);
  /* each waiter tried, subscribed and tried again: it waits now */
  CU_ASSERT(settled(cl, c0, 2 * N));
  size_t after = heap_used();
  report("a blocking waiter", (double)(after - before) / N, 2048);
  TH_ASSERT_RC(dlock_release(held), DLOCK_OK);
  for (int i = 0; i < N; i++)
    pthread_join(t[i], NULL);
  pthread_attr_destroy(&attr);
  free(t);
  dlock_lock_free(held);
  dlock_lock_free(waited);
  dlock_client_close(hc);
}

/* ---- an async waiter (W10, the README: under 1 KiB) -------------------------- */

static atomic_int async_done;

static void async_granted(void *data, const dlock_result *r) {
  atomic_fetch_add(&async_done, 1);
}

static void test_async_waiter(void) {
  const char *name = "bench:w10";
  dlock_client *hc = th_client(&srv, NULL);
  dlock_lock *held, *waited;
  TH_ASSERT_RC(dlock_reentrant_lock_new(hc, name, NULL, &held), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &waited), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(held, 0, 60000), DLOCK_OK);
  dlock_op *ops = calloc(MANY, sizeof *ops);
  uint64_t *owners = calloc(MANY, sizeof *owners);
  CU_ASSERT_FATAL(ops && owners);
  for (int i = 0; i < MANY; i++)
    owners[i] = dlock_owner_id_new();
  atomic_store(&async_done, 0);
  uint64_t c0 = stats_of(cl).commands;
  size_t before = heap_used();
  for (int i = 0; i < MANY; i++)
    TH_ASSERT_RC(dlock_acquire_async(waited, owners[i], DLOCK_WAIT_FOREVER,
                                     30000, async_granted, NULL, &ops[i]),
                 DLOCK_OK);
  /* every waiter's first try answered: all of them wait */
  CU_ASSERT(settled(cl, c0, MANY));
  size_t after = heap_used();
  report("an async waiter", (double)(after - before) / MANY, 1024);
  for (int i = 0; i < MANY; i++)
    dlock_cancel(ops[i]);
  CU_ASSERT_EQUAL(until_count(&async_done, MANY), MANY);
  TH_ASSERT_RC(dlock_release(held), DLOCK_OK);
  free(ops);
  free(owners);
  dlock_lock_free(held);
  dlock_lock_free(waited);
  dlock_client_close(hc);
}

/* ---- an election observer (docs/election.md: 1 KiB) ---------------------------- */

static atomic_int observed_first, observed_end;

static void observed(void *data, const dlock_result *r) {
  if (r->election == NULL) /* its last call */
    atomic_fetch_add(&observed_end, 1);
  else /* its first: the state (nothing changes while it observes) */
    atomic_fetch_add(&observed_first, 1);
}

static void test_election_observer(void) {
  const char *name = "bench:e1o";
  dlock_election *e;
  TH_ASSERT_RC(dlock_election_new(cl, name, NULL, &e), DLOCK_OK);
  dlock_op *ops = calloc(MANY, sizeof *ops);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ops);
  atomic_store(&observed_first, 0);
  atomic_store(&observed_end, 0);
  size_t before = heap_used();
  for (int i = 0; i < MANY; i++)
    TH_ASSERT_RC(dlock_election_observe(e, observed, NULL, &ops[i]), DLOCK_OK);
  /* each told its first state: it observes now */
  CU_ASSERT_EQUAL(until_count(&observed_first, MANY), MANY);
  size_t after = heap_used();
  report("an election observer", (double)(after - before) / MANY, 1024);
  for (int i = 0; i < MANY; i++)
    dlock_cancel(ops[i]);
  CU_ASSERT_EQUAL(until_count(&observed_end, MANY), MANY);
  free(ops);
  dlock_election_free(e);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("memory", suite_init, suite_clean);
  CU_add_test(s, "held_lock", test_held_lock);
  CU_add_test(s, "blocking_waiter", test_blocking_waiter);
  CU_add_test(s, "async_waiter", test_async_waiter);
  CU_add_test(s, "election_observer", test_election_observer);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
