/* Fair lock against a real redis-server: FIFO grants across threads and
 * processes, only the head woken, dead and timed-out waiters skipped within
 * one slot, no queue entries left behind. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

static dlock_lock *new_fair(dlock_client *c, const char *name, int64_t slot_ms) {
  dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
  o.wait_slot_ms = slot_ms;
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fair_lock_new(c, name, &o, &l), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  return l;
}

static long long qlen(const char *name) {
  return th_int(&srv, "LLEN redisson_lock_queue:{%s}", name);
}

/* Wait (bounded) for the queue to reach n entries: the event that says the
 * waiters are in line. */
static int wait_qlen(const char *name, long long n) {
  for (int64_t end = th_now_ms() + 10000; th_now_ms() < end; usleep(1000))
    if (qlen(name) == n)
      return 1;
  return 0;
}

static int queue_keys_gone(const char *name) {
  return th_int(&srv, "EXISTS redisson_lock_queue:{%s}", name) == 0 &&
         th_int(&srv, "EXISTS redisson_lock_timeout:{%s}", name) == 0;
}

/* ---- FIFO among threads --------------------------------------------------- */

#define ORDER_MAX 256

typedef struct line {
  dlock_lock *lock;
  int64_t start_ms; /* thread i starts at start_ms + i * gap_ms */
  int gap_ms, hold_ms;
  int order[ORDER_MAX];
  char owners[ORDER_MAX][64];
  int n; /* written under the lock itself */
  atomic_int errors;
  atomic_llong released_us;
  int64_t handoff_us[ORDER_MAX];
  int nhandoff;
} line;

typedef struct seat {
  line *ln;
  int id;
} seat;

static void *line_thread(void *arg) {
  seat *s = arg;
  line *ln = s->ln;
  int64_t at = ln->start_ms + (int64_t)s->id * ln->gap_ms;
  while (th_now_ms() < at) /* the scenario: staggered arrivals */
    usleep(500);
  if (dlock_acquire(ln->lock, 60000, 30000) != DLOCK_OK) {
    atomic_fetch_add(&ln->errors, 1);
    return NULL;
  }
  int64_t now = th_now_us();
  long long rel = atomic_load(&ln->released_us);
  if (rel > 0)
    ln->handoff_us[ln->nhandoff++] = now - rel;
  ln->order[ln->n] = s->id;
  snprintf(ln->owners[ln->n], 64, "%s:%llu", dlock_client_id(cl),
           (unsigned long long)dlock_thread_id());
  ln->n++;
  if (ln->hold_ms)
    usleep((useconds_t)ln->hold_ms * 1000);
  atomic_store(&ln->released_us, th_now_us());
  if (dlock_release(ln->lock) != DLOCK_OK)
    atomic_fetch_add(&ln->errors, 1);
  return NULL;
}

/* Hold the lock, start n threads (gap ms apart), wait until all n are
 * queued, then release and let them run through. */
static void run_line(line *ln, const char *name, int n) {
  TH_ASSERT_RC(dlock_acquire(ln->lock, 0, 60000), DLOCK_OK);
  seat *seats = calloc((size_t)n, sizeof *seats);
  pthread_t *t = calloc((size_t)n, sizeof *t);
  ln->start_ms = th_now_ms() + 20;
  for (int i = 0; i < n; i++) {
    seats[i] = (seat){ln, i};
    pthread_create(&t[i], NULL, line_thread, &seats[i]);
  }
  CU_ASSERT(wait_qlen(name, n));
  atomic_store(&ln->released_us, th_now_us());
  TH_ASSERT_RC(dlock_release(ln->lock), DLOCK_OK);
  for (int i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  free(seats);
  free(t);
  CU_ASSERT_EQUAL(atomic_load(&ln->errors), 0);
  CU_ASSERT_EQUAL(ln->n, n);
}

static void test_fifo_threads(void) {
  const char *name = th_name("fifo");
  line *ln = calloc(1, sizeof *ln);
  ln->lock = new_fair(cl, name, 0);
  ln->gap_ms = 50;
  ln->hold_ms = 2;
  run_line(ln, name, 8);
  for (int i = 0; i < ln->n; i++)
    CU_ASSERT_EQUAL(ln->order[i], i);
  CU_ASSERT(queue_keys_gone(name));
  dlock_lock_free(ln->lock);
  free(ln);
}

static long long evalsha_calls(void) {
  redisReply *r = th_cmd(&srv, "INFO commandstats");
  long long calls = -1;
  const char *p = r && r->type == REDIS_REPLY_STRING
                      ? strstr(r->str, "cmdstat_evalsha:calls=")
                      : NULL;
  if (p)
    calls = atoll(p + strlen("cmdstat_evalsha:calls="));
  freeReplyObject(r);
  return calls;
}

static void test_only_head_woken(void) {
  const char *name = th_name("head");
  line *ln = calloc(1, sizeof *ln);
  ln->lock = new_fair(cl, name, 0);
  ln->hold_ms = 1;
  TH_ASSERT_RC(dlock_acquire(ln->lock, 0, 60000), DLOCK_OK);
  seat seats[64];
  pthread_t t[64];
  ln->start_ms = th_now_ms();
  for (int i = 0; i < 64; i++) {
    seats[i] = (seat){ln, i};
    pthread_create(&t[i], NULL, line_thread, &seats[i]);
  }
  CU_ASSERT(wait_qlen(name, 64));
  long long before = evalsha_calls();
  atomic_store(&ln->released_us, th_now_us());
  TH_ASSERT_RC(dlock_release(ln->lock), DLOCK_OK);
  for (int i = 0; i < 64; i++)
    pthread_join(t[i], NULL);
  long long calls = evalsha_calls() - before;
  /* per hand-off: one release and one successful try; a herd would add a
   * failed try for every waiter still queued (about 32 per hand-off) */
  double per = (double)(calls - 64) / 64.0;
  qsort(ln->handoff_us, (size_t)ln->nhandoff, sizeof(int64_t), th_cmp_i64);
  int64_t p50 = ln->handoff_us[ln->nhandoff / 2];
  int64_t p95 = ln->handoff_us[(ln->nhandoff * 95) / 100];
  int64_t max = ln->nhandoff > 0 ? ln->handoff_us[ln->nhandoff - 1] : 0;
  printf("\n    64 waiters: %.2f tries per hand-off, hand-off p50 %lld us, "
         "p95 %lld us, slowest %lld us ", per, (long long)p50, (long long)p95,
         (long long)max);
  CU_ASSERT_EQUAL(ln->nhandoff, 64);
  CU_ASSERT(per <= 1.5);
  /* p95 of 64 hand-offs is their slowest but three (it was the slowest
   * itself, "p99" at index 63, which one scheduling stall of 42 ms failed
   * on CI's TLS variant with p50 2.5 ms). With two `yes > /dev/null` hogs
   * the slowest measured 4.3-8.4 ms on one server, 4.2-8.9 ms over TLS and
   * 11-21 ms on the test cluster (6 servers on the 2 cores; 5-27 ms idle),
   * 3 runs each: bounds of 15 and 40 ms on p95, 1.7x the worst slowest.
   * Every hand-off is told by a message: a waiter that missed it would
   * wake at its next try, the holder's lease away (30 s here), so the
   * slowest must stay under a second. */
  CU_ASSERT(p95 <= th_scaled_us(&srv, th_cluster_mode() ? 40000 : 15000));
  CU_ASSERT(max < 1000000);
  CU_ASSERT(queue_keys_gone(name));
  dlock_lock_free(ln->lock);
  free(ln);
}

static void test_200_threads_in_order(void) {
  const char *name = th_name("two-hundred");
  line *ln = calloc(1, sizeof *ln);
  ln->lock = new_fair(cl, name, 0);
  ln->hold_ms = 5;
  TH_ASSERT_RC(dlock_acquire(ln->lock, 0, 60000), DLOCK_OK);
  seat *seats = calloc(200, sizeof *seats);
  pthread_t *t = calloc(200, sizeof *t);
  ln->start_ms = th_now_ms();
  for (int i = 0; i < 200; i++) {
    seats[i] = (seat){ln, i};
    pthread_create(&t[i], NULL, line_thread, &seats[i]);
  }
  CU_ASSERT(wait_qlen(name, 200));
  redisReply *q = th_cmd(&srv, "LRANGE redisson_lock_queue:{%s} 0 -1", name);
  TH_ASSERT_RC(dlock_release(ln->lock), DLOCK_OK);
  for (int i = 0; i < 200; i++)
    pthread_join(t[i], NULL);
  CU_ASSERT_EQUAL(atomic_load(&ln->errors), 0);
  CU_ASSERT_EQUAL_FATAL(ln->n, 200);
  int in_order = q && q->elements == 200;
  for (int i = 0; in_order && i < 200; i++)
    in_order = strcmp(q->element[i]->str, ln->owners[i]) == 0;
  CU_ASSERT(in_order); /* granted exactly in queue order */
  freeReplyObject(q);
  CU_ASSERT(queue_keys_gone(name));
  free(seats);
  free(t);
  dlock_lock_free(ln->lock);
  free(ln);
}

/* ---- FIFO among processes ------------------------------------------------- */

typedef struct pseat {
  const char *url, *name, *result;
  int id;
  int64_t at_ms;
  int rc;
} pseat;

static void *proc_thread(void *arg) {
  pseat *s = arg;
  dlock_client *c = NULL;
  dlock_lock *l = NULL;
  redisContext *ctx = NULL;
  s->rc = 1;
  if (dlock_client_open(s->url, NULL, &c) != DLOCK_OK ||
      dlock_fair_lock_new(c, s->name, NULL, &l) != DLOCK_OK)
    goto out;
  ctx = th_connect_key(s->url, s->result);
  while (th_now_ms() < s->at_ms) /* the scenario: staggered arrivals */
    usleep(500);
  if (dlock_acquire(l, 30000, 10000) != DLOCK_OK)
    goto out;
  freeReplyObject(redisCommand(ctx, "RPUSH %s %d", s->result, s->id));
  s->rc = dlock_release(l) == DLOCK_OK ? 0 : 1;
out:
  if (ctx)
    redisFree(ctx);
  dlock_lock_free(l);
  dlock_client_close(c);
  return NULL;
}

static int worker(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[0], "line") == 0) {
    /* line URL NAME RESULT BASE_MS FIRST_ID: two threads, ids FIRST_ID and
     * FIRST_ID + 4, arriving at BASE_MS + id * 50 (CLOCK_MONOTONIC) */
    pseat s[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
      s[i] = (pseat){argv[1], argv[2], argv[3], atoi(argv[5]) + 4 * i, 0, 1};
      s[i].at_ms = atoll(argv[4]) + 50LL * s[i].id;
      pthread_create(&t[i], NULL, proc_thread, &s[i]);
    }
    for (int i = 0; i < 2; i++)
      pthread_join(t[i], NULL);
    return s[0].rc || s[1].rc;
  }
  if (argc == 4 && strcmp(argv[0], "hold") == 0) {
    /* hold URL NAME LEASE: wait in line (slot 30 s), hold with that lease,
     * say "held", wait to be killed */
    dlock_client *c = NULL;
    dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
    o.wait_slot_ms = 30000;
    dlock_lock *l = NULL;
    if (dlock_client_open(argv[1], NULL, &c) != DLOCK_OK ||
        dlock_fair_lock_new(c, argv[2], &o, &l) != DLOCK_OK ||
        dlock_acquire(l, 60000, atoll(argv[3])) != DLOCK_OK)
      return 1;
    printf("held\n");
    fflush(stdout);
    for (;;)
      pause();
  }
  if (argc == 3 && strcmp(argv[0], "queue") == 0) {
    /* queue URL NAME: wait in line (slot 1 s) until killed */
    dlock_client *c = NULL;
    dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
    o.wait_slot_ms = 1000;
    dlock_lock *l = NULL;
    if (dlock_client_open(argv[1], NULL, &c) != DLOCK_OK ||
        dlock_fair_lock_new(c, argv[2], &o, &l) != DLOCK_OK)
      return 1;
    dlock_acquire(l, 60000, 10000);
    return 0;
  }
  return 2;
}

/* The head of the line takes the lock with a 1 s lease and dies. The next
 * waiter last heard "held for a minute" (a slot of 30 s: it re-tries every
 * 10 s); it must still take over when the 1 s lease ends: a grant from the
 * line tells the next waiter to look again. */
static void test_next_waiter_follows_new_lease(void) {
  char name[256];
  snprintf(name, sizeof name, "%s", th_name("next-lease"));
  dlock_lock *first = new_fair(cl, name, 30000);
  TH_ASSERT_RC(dlock_acquire(first, 0, 60000), DLOCK_OK);
  int fd = -1;
  char *args[] = {"hold", srv.url, name, "1000", NULL};
  pid_t pid = th_spawn_worker_pipe(args, &fd);
  for (int i = 0; i < 500 && qlen(name) < 1; i++)
    usleep(5000); /* bounded: the worker queues on its second try */
  CU_ASSERT_EQUAL(qlen(name), 1);
  dlock_client *c2 = th_client(&srv, NULL);
  th_acquirer w = {.lock = new_fair(c2, name, 30000), .wait_ms = 20000,
                   .lease_ms = 10000};
  th_acquirer_start(&w);
  for (int i = 0; i < 500 && qlen(name) < 2; i++)
    usleep(5000);
  CU_ASSERT_EQUAL(qlen(name), 2);
  TH_ASSERT_RC(dlock_release(first), DLOCK_OK); /* the worker is next */
  char said[16] = "";
  ssize_t n = read(fd, said, sizeof said - 1);
  int64_t t0 = th_now_ms();
  close(fd);
  CU_ASSERT(n > 0 && strncmp(said, "held", 4) == 0);
  kill(pid, SIGKILL);
  th_wait_worker(pid, 5000);
  th_acquirer_join(&w);
  int64_t after = w.got_ms - t0, bound = 1000 + th_scaled_us(&srv, 50000) / 1000;
  if (w.rc != DLOCK_OK || after > bound)
    fprintf(stderr, "\n  next waiter: %s after %lld ms (bound %lld)",
            dlock_strerror(w.rc), (long long)after, (long long)bound);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  CU_ASSERT(after >= 1000 - 200 && after <= bound);
  dlock_lock_free(w.lock);
  dlock_lock_free(first);
  dlock_client_close(c2);
}

static void test_fifo_processes(void) {
  char name[256], result[300];
  snprintf(name, sizeof name, "%s", th_name("fifo-procs"));
  snprintf(result, sizeof result, "%s:result", name);
  dlock_lock *l = new_fair(cl, name, 0);
  TH_ASSERT_RC(dlock_acquire(l, 0, 60000), DLOCK_OK);
  char base[32];
  snprintf(base, sizeof base, "%lld", (long long)(th_now_ms() + 1000));
  pid_t pids[4];
  for (int p = 0; p < 4; p++) {
    char first[8];
    snprintf(first, sizeof first, "%d", p);
    char *args[] = {"line", srv.url, name, result, base, first, NULL};
    pids[p] = th_spawn_worker(args);
  }
  CU_ASSERT(wait_qlen(name, 8));
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  for (int p = 0; p < 4; p++)
    CU_ASSERT_EQUAL(th_wait_worker(pids[p], 60000), 0);
  redisReply *r = th_cmd(&srv, "LRANGE %s 0 -1", result);
  CU_ASSERT_FATAL(r && r->elements == 8);
  for (size_t i = 0; i < 8; i++)
    CU_ASSERT_EQUAL(atoi(r->element[i]->str), (int)i);
  freeReplyObject(r);
  CU_ASSERT(queue_keys_gone(name));
  dlock_lock_free(l);
}

/* ---- dead and departing waiters ------------------------------------------- */

static void test_killed_waiter_skipped(void) {
  const char *name = th_name("killed");
  dlock_lock *l = new_fair(cl, name, 1000);
  TH_ASSERT_RC(dlock_acquire(l, 0, 60000), DLOCK_OK);
  char *args[] = {"queue", srv.url, (char *)name, NULL};
  pid_t pid = th_spawn_worker(args);
  CU_ASSERT(wait_qlen(name, 1));
  th_acquirer b = {.lock = l, .wait_ms = 10000,
                   .lease_ms = 10000};
  th_acquirer_start(&b);
  CU_ASSERT(wait_qlen(name, 2));
  kill(pid, SIGKILL);
  th_wait_worker(pid, 5000);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  th_acquirer_join(&b);
  TH_ASSERT_RC(b.rc, DLOCK_OK);
  printf("\n    next waiter in %lld ms after the release (slot 1000 ms) ",
         (long long)(b.got_ms - t0));
  CU_ASSERT(b.got_ms - t0 <= 1200);
  CU_ASSERT(queue_keys_gone(name));
  dlock_lock_free(l);
}

static void test_timed_out_try_keeps_its_place(void) {
  /* W's try times out mid-script (the server sleeps longer than W's
   * command timeout): whether it ran is unknown, so W asks the server
   * (its hold count: not granted) and goes on waiting within its budget,
   * in its place: ahead of B, who came later. No entry is left. */
  const char *name = th_name("midscript");
  dlock_lock *holder = new_fair(cl, name, 0);
  TH_ASSERT_RC(dlock_acquire(holder, 0, 60000), DLOCK_OK);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.command_timeout_ms = 200;
  dlock_client *cw = th_client(&srv, &o);
  dlock_client *cb = th_client(&srv, NULL);
  /* W re-tries every 300 ms (a third of its slot): one try falls in the
   * 0.5 s sleep; the sleep is shorter than the slot, so W keeps it */
  th_acquirer w = {.lock = new_fair(cw, name, 900), .wait_ms = 30000,
                   .lease_ms = 10000};
  th_acquirer_start(&w);
  CU_ASSERT(wait_qlen(name, 1));
  th_acquirer b = {.lock = new_fair(cb, name, 5000), .wait_ms = 30000,
                   .lease_ms = 10000};
  th_acquirer_start(&b);
  CU_ASSERT(wait_qlen(name, 2));
  redisReply *r = th_cmd(th_node_of(&srv, name), "DEBUG SLEEP 0.5");
  freeReplyObject(r);
  TH_ASSERT_RC(dlock_release(holder), DLOCK_OK);
  th_acquirer_join(&w);
  th_acquirer_join(&b);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  TH_ASSERT_RC(b.rc, DLOCK_OK);
  CU_ASSERT(w.got_ms <= b.got_ms);
  CU_ASSERT(queue_keys_gone(name));
  dlock_lock_free(w.lock);
  dlock_lock_free(b.lock);
  dlock_lock_free(holder);
  dlock_client_close(cw);
  dlock_client_close(cb);
}

static void test_try_zero_never_queues(void) {
  const char *name = th_name("try0");
  dlock_lock *l = new_fair(cl, name, 0);
  th_acquirer w = {.lock = l, .wait_ms = 0,
                   .lease_ms = 10000};
  th_acquirer_start(&w); /* free: succeeds */
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  th_acquirer_start(&w); /* held: fails, no entry */
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_EBUSY);
  CU_ASSERT(queue_keys_gone(name));
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
}

static void test_budget_spent_leaves_queue(void) {
  const char *name = th_name("budget");
  dlock_lock *l = new_fair(cl, name, 0);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  th_acquirer w = {.lock = l, .wait_ms = 1000,
                   .lease_ms = 10000};
  int64_t t0 = th_now_ms();
  th_acquirer_start(&w);
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_ETIMEDOUT);
  CU_ASSERT(w.got_ms - t0 >= 950 && w.got_ms - t0 <= 1150);
  CU_ASSERT(queue_keys_gone(name));
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
}

/* ---- the reentrant-lock scenarios ----------------------------------------- */

static void test_reentrant_scenarios(void) {
  const char *name = th_name("reentrant");
  dlock_lock *l = new_fair(cl, name, 0);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(l), "fair");
  CU_ASSERT(dlock_lock_caps(l) & DLOCK_CAP_FAIR);
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_acquire(l, 0, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_lock_state_get(l, &st), DLOCK_OK);
  CU_ASSERT_EQUAL(st.hold_count, 2);
  TH_ASSERT_RC(th_acquire_elsewhere(l, 0, 5000), DLOCK_EBUSY);
  TH_ASSERT_RC(th_release_elsewhere(l), DLOCK_ENOTOWNER);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ENOTOWNER);

  /* lease expiry hands over to the waiter */
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_acquire(l, 0, 1000), DLOCK_OK);
  th_acquirer w = {.lock = l, .wait_ms = 5000,
                   .lease_ms = 10000};
  th_acquirer_start(&w);
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  CU_ASSERT(w.got_ms - t0 >= 950 && w.got_ms - t0 <= 1200);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST);
  dlock_lock_free(l);

  /* watchdog */
  dlock_client_opts opts = DLOCK_CLIENT_OPTS_INIT;
  opts.watchdog_timeout_ms = 600;
  dlock_client *c = th_client(&srv, &opts);
  l = new_fair(c, th_name("fairwd"), 0);
  TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  usleep(2000 * 1000);
  TH_ASSERT_RC(dlock_lock_state_get(l, &st), DLOCK_OK);
  CU_ASSERT(st.held_by_me && st.ttl_ms > 0);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
}

static void test_bad_input(void) {
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fair_lock_new(NULL, "x", NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_fair_lock_new(cl, "", NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_fair_lock_new(cl, "x", NULL, NULL), DLOCK_EINVAL);
  dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
  o.wait_slot_ms = -1;
  TH_ASSERT_RC(dlock_fair_lock_new(cl, "x", &o, &l), DLOCK_EINVAL);
  CU_ASSERT_PTR_NULL(l);
  o.wait_slot_ms = 0;
  o.thread_wait_ms = -1;
  TH_ASSERT_RC(dlock_fair_lock_new(cl, "x", &o, &l), DLOCK_EINVAL);
  CU_ASSERT(strstr(dlock_errmsg(), "thread_wait_ms") != NULL);
  o.version = 3;
  TH_ASSERT_RC(dlock_fair_lock_new(cl, "x", &o, &l), DLOCK_EINVAL);
  const char *name = th_name("wrongtype");
  freeReplyObject(th_cmd(&srv, "SET redisson_lock_queue:{%s} x", name));
  l = new_fair(cl, name, 0);
  TH_ASSERT_RC(dlock_acquire(l, 0, 1000), DLOCK_EKIND);
  CU_ASSERT(strstr(dlock_errmsg(), "another type") != NULL);
  dlock_lock_free(l);
}

/* thread_wait_ms is the step of the queue's deadlines; version 1 options
 * (no such field) get Redisson's 300,000 ms. */
static void test_thread_wait_option(void) {
  const char *name = th_name("thread_wait");
  dlock_lock *holder = new_fair(cl, name, 30000);
  TH_ASSERT_RC(dlock_acquire(holder, 0, 20000), DLOCK_OK);
  for (int version = 1; version <= 2; version++) {
    dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
    o.version = (unsigned)version;
    o.wait_slot_ms = 30000;
    o.thread_wait_ms = version == 2 ? 1000 : 77; /* ignored in version 1 */
    dlock_lock *l = NULL;
    TH_ASSERT_RC(dlock_fair_lock_new(cl, name, &o, &l), DLOCK_OK);
    th_acquirer w = {.lock = l, .wait_ms = 10000, .lease_ms = 1000, .rc = -1};
    th_acquirer_start(&w);
    CU_ASSERT_FATAL(wait_qlen(name, 1));
    redisReply *t = th_cmd(&srv, "TIME");
    long long now = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
    freeReplyObject(t);
    redisReply *r = th_cmd(&srv, "ZRANGE redisson_lock_timeout:{%s} 0 0 WITHSCORES", name);
    long long deadline = atoll(r->element[1]->str);
    freeReplyObject(r);
    long long pttl = th_int(&srv, "PTTL %s", name);
    long long step = deadline - (now + pttl);
    long long want = version == 2 ? 1000 : 300000;
    if (step < want - 500 || step > want + 500)
      fprintf(stderr, "\n  version %d: step %lld, want %lld\n", version, step, want);
    CU_ASSERT(step >= want - 500 && step <= want + 500);
    TH_ASSERT_RC(dlock_release(holder), DLOCK_OK);
    th_acquirer_join(&w);
    TH_ASSERT_RC(w.rc, DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(holder, 0, 20000), DLOCK_OK);
    dlock_lock_free(l);
  }
  TH_ASSERT_RC(dlock_release(holder), DLOCK_OK);
  CU_ASSERT(queue_keys_gone(name));
  dlock_lock_free(holder);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("fair", suite_init, suite_clean);
  CU_add_test(s, "fifo_threads", test_fifo_threads);
  CU_add_test(s, "thread_wait_option", test_thread_wait_option);
  CU_add_test(s, "fifo_processes", test_fifo_processes);
  CU_add_test(s, "next_waiter_follows_new_lease", test_next_waiter_follows_new_lease);
  CU_add_test(s, "only_head_woken", test_only_head_woken);
  CU_add_test(s, "killed_waiter_skipped", test_killed_waiter_skipped);
  CU_add_test(s, "timed_out_try_keeps_its_place",
              test_timed_out_try_keeps_its_place);
  CU_add_test(s, "try_zero_never_queues", test_try_zero_never_queues);
  CU_add_test(s, "budget_spent_leaves_queue", test_budget_spent_leaves_queue);
  CU_add_test(s, "200_threads_in_order", test_200_threads_in_order);
  CU_add_test(s, "reentrant_scenarios", test_reentrant_scenarios);
  CU_add_test(s, "bad_input", test_bad_input);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, worker); }
