/* W9 and W10: the non-blocking API (pairs from completion callbacks,
 * and 10,000 pending waiters on one thread). */
#include <dirent.h>
#include <inttypes.h>
#include <poll.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlock/dlock.h>
#include <hiredis/hiredis.h>

#include "bench.h"

/* ---- W9, W10: the non-blocking API ------------------------------------------ */

/* W9: 1,000 acquire/release loops on distinct locks, all run by one
 * application thread: each completion starts the loop's next call. With
 * queue completions the callbacks run on this thread, in a poll loop on
 * the client's completion descriptor (what an event-loop program does);
 * with engine completions, on the engine thread. With --peers, 16 loops
 * too, beside the Node.js peers' 16 tasks on one thread (their W2). */
enum { W9_LOOPS = 1000, W9_PEER_LOOPS = 16 };

typedef struct w9_loop {
  dlock_lock *lock;
  uint64_t owner;
} w9_loop;

static atomic_int w9_stop, w9_running, w9_errors;
static atomic_long w9_pairs;

static void w9_acquired(void *data, const dlock_result *r);

static void w9_next(w9_loop *lp) {
  if (atomic_load(&w9_stop) ||
      dlock_acquire_async(lp->lock, lp->owner, 10000, 30000, w9_acquired, lp,
                          NULL) != DLOCK_OK)
    atomic_fetch_sub(&w9_running, 1);
}

static void w9_released(void *data, const dlock_result *r) {
  if (r->rc != DLOCK_OK)
    atomic_fetch_add(&w9_errors, 1);
  else
    atomic_fetch_add(&w9_pairs, 1);
  w9_next(data);
}

static void w9_acquired(void *data, const dlock_result *r) {
  w9_loop *lp = data;
  if (r->rc != DLOCK_OK) {
    atomic_fetch_add(&w9_errors, 1);
    w9_next(lp);
    return;
  }
  if (dlock_release_async(lp->lock, lp->owner, w9_released, lp, NULL) != DLOCK_OK) {
    atomic_fetch_add(&w9_errors, 1);
    atomic_fetch_sub(&w9_running, 1);
  }
}

static double w9_run(int completions, int nloops) {
  dlock_client_opts o = bench_client_opts();
  o.completions = completions;
  dlock_client *c = NULL;
  int rc = dlock_client_open(bench_opt.urls[0], &o, &c);
  if (rc != DLOCK_OK)
    bench_die(bench_shown(bench_opt.urls[0]), rc);
  w9_loop *loops = calloc((size_t)nloops, sizeof *loops);
  if (loops == NULL)
    bench_die("W9: memory", DLOCK_ENOMEM);
  for (int i = 0; i < nloops; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:w9:%d", i);
    dlock_reentrant_lock_new(c, name, NULL, &loops[i].lock);
    loops[i].owner = dlock_owner_id_new();
  }
  atomic_store(&w9_stop, 0);
  atomic_store(&w9_pairs, 0);
  atomic_store(&w9_errors, 0);
  atomic_store(&w9_running, nloops);
  int64_t t0 = bench_now_us(), end = t0 + (int64_t)(bench_opt.duration * 1e6);
  for (int i = 0; i < nloops; i++)
    w9_next(&loops[i]);
  int fd = completions == DLOCK_COMPLETE_QUEUE ? dlock_client_completion_fd(c) : -1;
  while (atomic_load(&w9_running) > 0) {
    if (bench_now_us() >= end)
      atomic_store(&w9_stop, 1);
    if (fd >= 0) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 50) == 1)
        dlock_client_run_completions(c, 0);
    } else {
      usleep(10000);
    }
    if (bench_now_us() > end + 10000000)
      break; /* loops that never came back: reported as errors */
  }
  long bench_pairs = atomic_load(&w9_pairs);
  double secs = (double)(bench_now_us() - t0) / 1e6;
  if (atomic_load(&w9_errors) || atomic_load(&w9_running))
    fprintf(stderr, "W9: %d errors, %d loops unfinished\n",
            atomic_load(&w9_errors), atomic_load(&w9_running));
  dlock_client_close(c); /* the rest complete (ECLOSED) here */
  for (int i = 0; i < nloops; i++)
    dlock_lock_free(loops[i].lock);
  free(loops);
  return (double)bench_pairs / secs;
}

void bench_w9(bench_bounds *b) {
  if (b->w2_rate <= 0) { /* the bound, in the same run */
    dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
    double p50, p99;
    bench_pairs(bench_opt.threads, 0, c, &b->w2_rate, &p50, &p99);
    dlock_client_close(c);
  }
  double bound = b->w2_rate * 1.5;
  double rate = w9_run(DLOCK_COMPLETE_QUEUE, W9_LOOPS);
  bench_emit("W9", "pairs/s (1.5x W2)", rate, "1/s", bound);
  bench_emit("W9", "pairs/s, engine callbacks",
             w9_run(DLOCK_COMPLETE_ENGINE, W9_LOOPS), "1/s", bound);
  if (!bench_opt.peers || !bench_node_found())
    return;
  /* and 1.5x the best Node peer at 16 tasks (its W2), in the same run */
  static const char *const names[] = {"node-redlock", "redis-semaphore",
                                      "node-redisson"};
  double best = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char why[256];
    peer_figures p;
    if (bench_run_peer(names[i], "W2", &p, why, sizeof why) && p.rate > best)
      best = p.rate;
  }
  if (best <= 0) {
    bench_na("W9", "no Node peer answered");
    return;
  }
  bench_emit("W9", "pairs/s (1.5x best peer)", rate, "1/s", best * 1.5);
  /* and the peers' own shape: 16 loops on one thread, as their 16 tasks */
  bench_emit("W9", "pairs/s, 16 loops vs best peer",
             w9_run(DLOCK_COMPLETE_QUEUE, W9_PEER_LOOPS), "1/s", best);
  bench_emit("W9", "16 loops, engine callbacks vs best peer",
             w9_run(DLOCK_COMPLETE_ENGINE, W9_PEER_LOOPS), "1/s", best);
}

/* W10: 10,000 async waiters on one lock, all started and served by one
 * application thread (queue completions, a poll loop): the client heap
 * each adds, no thread each, and W3's hand-off: each holder holds 1 ms,
 * and the hand-off runs from its release's completion to the next
 * waiter's grant's completion. */
enum { W10_WAITERS = 10000 };

static dlock_lock *w10_lock;
static uint64_t *w10_owner;
static atomic_int w10_done, w10_errors;
static atomic_int w10_releasing; /* releases sent, not answered yet */

static void w10_released(void *data, const dlock_result *r) {
  atomic_fetch_sub(&w10_releasing, 1);
  if (r->rc != DLOCK_OK)
    atomic_fetch_add(&w10_errors, 1);
  atomic_store(&bench_sh->released_us, bench_now_us());
}

static void w10_granted(void *data, const dlock_result *r) {
  atomic_fetch_add(&w10_done, 1);
  if (r->rc != DLOCK_OK) {
    if (r->rc != DLOCK_ECANCELED)
      atomic_fetch_add(&w10_errors, 1);
    return;
  }
  long long rel = atomic_load(&bench_sh->released_us);
  if (rel > 0) {
    int64_t got = bench_now_us();
    bench_sample(got > rel ? got - rel : 0);
  }
  bench_spin_us(1000); /* hold 1 ms, as W3 */
  atomic_fetch_add(&w10_releasing, 1);
  if (dlock_release_async(w10_lock, w10_owner[(intptr_t)data], w10_released,
                          NULL, NULL) != DLOCK_OK) {
    atomic_fetch_sub(&w10_releasing, 1);
    atomic_fetch_add(&w10_errors, 1);
  }
}

/* The server's commands so far (bench_server_read's calls), or -1. */
static long long server_calls(redisContext *rc) {
  server_counters n;
  return rc && bench_server_read(rc, &n) == 0 ? n.calls : -1;
}

/* Run c's completions as they come, until until_us. */
static void w10_serve(dlock_client *c, int64_t until_us) {
  int fd = dlock_client_completion_fd(c);
  while (bench_now_us() < until_us) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10) == 1)
      dlock_client_run_completions(c, 0);
  }
}

static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (d == NULL)
    return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* A round's end, once its waiters are cancelled: every waiter answered,
 * and what the next round's holder would otherwise find in its way done. */
static void w10_round_end(dlock_client *c, redisContext *rc_srv, int n,
                          int fair) {
  /* every waiter answered, and the release of the last ones granted (a
   * grant the cancel came too late for) answered too: a release the
   * close cut off would leave the lock held for the next round */
  int64_t until = bench_now_us() + 30000000;
  while ((atomic_load(&w10_done) < n || atomic_load(&w10_releasing) > 0) &&
         bench_now_us() < until)
    w10_serve(c, bench_now_us() + 10000);
  /* a fair waiter's cancel leaves the queue by a request the op does not
   * wait for: the close would cut off those not read by the server yet
   * (10,000 cancels take the server a while: each walks the queue), and
   * their entries would stand before the next round's holder until their
   * liveness ran out */
  for (int k = 0; fair && k < 3000; k++) {
    redisReply *q = redisCommand(rc_srv, "LLEN redisson_lock_queue:{bench:w10:fair}");
    long long left = q && q->type == REDIS_REPLY_INTEGER ? q->integer : 0;
    freeReplyObject(q);
    if (left == 0)
      break;
    w10_serve(c, bench_now_us() + 10000);
  }
}

void bench_waiters(int n, int fair, waiters_figures *f) {
  dlock_client_opts o = bench_client_opts();
  o.completions = DLOCK_COMPLETE_QUEUE;
  dlock_client *c = NULL, *hc = bench_open_client(bench_opt.urls[0], 0);
  int rc = dlock_client_open(bench_opt.urls[0], &o, &c);
  if (rc != DLOCK_OK)
    bench_die(bench_shown(bench_opt.urls[0]), rc);
  dlock_lock *holder;
  if (fair) {
    dlock_fair_lock_new(c, "bench:w10:fair", NULL, &w10_lock);
    dlock_fair_lock_new(hc, "bench:w10:fair", NULL, &holder);
  } else {
    dlock_reentrant_lock_new(c, "bench:w10", NULL, &w10_lock);
    dlock_reentrant_lock_new(hc, "bench:w10", NULL, &holder);
  }
  if (dlock_acquire(holder, 0, 60000) != DLOCK_OK)
    bench_die("W10 holder", DLOCK_EBUSY);
  redisContext *rc_srv = bench_raw_connect(bench_opt.urls[0]);
  w10_owner = calloc((size_t)n, sizeof *w10_owner);
  dlock_op *ops = calloc((size_t)n, sizeof *ops);
  for (int i = 0; i < n; i++)
    w10_owner[i] = dlock_owner_id_new();
  bench_reset();
  atomic_store(&w10_done, 0);
  atomic_store(&w10_errors, 0);
  atomic_store(&w10_releasing, 0);
  int threads = thread_count();
  dlock_stats st = {.version = DLOCK_STATS_VERSION};
  dlock_client_stats(c, &st);
  uint64_t commands0 = st.commands;
  size_t before = bench_heap_used();
  for (int i = 0; i < n; i++)
    if (dlock_acquire_async(w10_lock, w10_owner[i], DLOCK_WAIT_FOREVER, 30000,
                            w10_granted, (void *)(intptr_t)i, &ops[i]) != DLOCK_OK)
      bench_die("W10 acquire", DLOCK_EIO);
  /* every waiter's first try answered: all of them wait */
  int64_t until = bench_now_us() + 30000000;
  do {
    usleep(20000);
    dlock_client_stats(c, &st);
  } while ((st.commands - commands0 < (uint64_t)n || st.in_flight > 0) &&
           bench_now_us() < until);
  size_t after = bench_heap_used();
  f->bytes_per_waiter = (double)(after - before) / n;
  f->threads_added = thread_count() - threads;
  long long calls0 = server_calls(rc_srv);
  dlock_release(holder);
  atomic_store(&bench_sh->released_us, bench_now_us());
  w10_serve(c, bench_now_us() + (int64_t)(bench_opt.duration * 1e6));
  int granted = atomic_load(&w10_done);
  long long calls = server_calls(rc_srv) - calls0;
  for (int i = 0; i < n; i++)
    dlock_cancel(ops[i]); /* the rest: too late for some, fine */
  w10_round_end(c, rc_srv, n, fair);
  f->handoffs = granted;
  f->p50 = bench_pct(bench_sh->samples, bench_nsamples(), 50);
  f->commands_per_grant = granted > 0 && calls0 >= 0 ? (double)calls / granted : NAN;
  if (atomic_load(&w10_errors) || atomic_load(&w10_done) < n)
    fprintf(stderr, "W10: %d errors, %d of %d completed\n",
            atomic_load(&w10_errors), atomic_load(&w10_done), n);
  dlock_client_close(c);
  dlock_lock_free(w10_lock);
  dlock_lock_free(holder);
  dlock_client_close(hc);
  redisFree(rc_srv);
  free(w10_owner);
  free(ops);
}

void bench_w10(bench_bounds *b) {
  if (b->w3_p50 <= 0) /* the bound, in the same run */
    b->w3_p50 = bench_handoff_run(b, bench_opt.urls[0], "bench:w3", NULL);
  waiters_figures f;
  bench_waiters(W10_WAITERS, 0, &f);
  bench_emit("W10", "bytes per waiter", f.bytes_per_waiter, "B", 1024);
  bench_emit("W10", "threads added", f.threads_added, "", NAN);
  bench_emit("W10", "hand-offs", f.handoffs, "", NAN);
  bench_emit("W10", "hand-off p50 (1.2x W3)", f.p50, "us",
             b->w3_p50 > 0 ? b->w3_p50 * 1.2 : NAN);
}


