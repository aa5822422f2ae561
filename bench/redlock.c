/* W5: RedLock over 5 servers, beside the raw majority round. */
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

#include "base/scripts.h"
#include "bench.h"

/* ---- W5: RedLock over 5 servers ------------------------------------------- */

typedef struct rl_arg {
  int id;
  dlock_lock *rl[32];
  dlock_lock *members[32][5];
} rl_arg;

static void *rl_thread(void *p) {
  rl_arg *a = p;
  for (long k = 0; !atomic_load(&bench_sh->stop); k++) {
    int64_t t0 = bench_now_us();
    if (dlock_acquire(a->rl[k % 32], 0, 30000) != DLOCK_OK)
      continue;
    if (a->id == 0)
      bench_sample(bench_now_us() - t0);
    dlock_release(a->rl[k % 32]);
    atomic_fetch_add(&bench_sh->pairs, 1);
  }
  return NULL;
}

/* W5's raw bound: one thread asks 5 servers at once over plain hiredis
 * (same acquire script) and stops at the third answer, like a RedLock round
 * with no engine at all: the floor of "a majority of 5" on this machine. */
static double raw_majority_p50(void) {
  redisContext *c[5];
  for (int i = 0; i < 5; i++)
    c[i] = bench_raw_connect(bench_opt.urls[i]);
  bench_reset();
  int64_t end = bench_now_us() + (int64_t)(bench_opt.duration * 1e6);
  for (long k = 0; bench_now_us() < end; k++) {
    char name[64], latch[160];
    snprintf(name, sizeof name, "bench:w5raw:%ld", k % 32);
    snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%ld", name, k);
    const char *acq[] = {"EVALSHA", dlock__scripts[DLOCK__SCRIPT_LOCK_ACQUIRE].sha1,
                         "1", name, "30000", "raw-w5:1"};
    size_t al[6];
    for (int a = 0; a < 6; a++)
      al[a] = strlen(acq[a]);
    int64_t t0 = bench_now_us();
    for (int i = 0; i < 5; i++) {
      int done = 0;
      redisAppendCommandArgv(c[i], 6, acq, al);
      while (!done && redisBufferWrite(c[i], &done) == REDIS_OK) {
      }
    }
    int got = 0, have[5] = {0};
    while (got < 3) {
      struct pollfd pf[5];
      for (int i = 0; i < 5; i++)
        pf[i] = (struct pollfd){.fd = c[i]->fd, .events = POLLIN};
      if (poll(pf, 5, 1000) <= 0)
        bench_die("raw majority: no answer", -1);
      for (int i = 0; i < 5; i++) {
        void *r = NULL;
        if (have[i] || !(pf[i].revents & POLLIN) ||
            redisBufferRead(c[i]) != REDIS_OK ||
            redisGetReplyFromReader(c[i], &r) != REDIS_OK || r == NULL)
          continue;
        freeReplyObject(r);
        have[i] = 1;
        got++;
      }
    }
    bench_sample(bench_now_us() - t0);
    for (int i = 0; i < 5; i++) { /* not timed: the rest, and the release */
      void *r = NULL;
      if (!have[i] && redisGetReply(c[i], &r) == REDIS_OK)
        freeReplyObject(r);
      const char *rel[] = {name, latch, "30000", "raw-w5:1", "60000", "PUBLISH",
                           "bench:w5raw", "0"};
      freeReplyObject(bench_raw_eval(c[i], DLOCK__SCRIPT_LOCK_RELEASE, 2, rel, 8));
    }
  }
  double p50 = bench_pct(bench_sh->samples, bench_nsamples(), 50);
  for (int i = 0; i < 5; i++)
    redisFree(c[i]);
  return p50;
}

/* n threads on a RedLock over clients c[0..4]: pairs/s and lock p50 */
static void w5_run(dlock_client **c, int n, double *rate, double *p50) {
  rl_arg *args = calloc((size_t)n, sizeof *args);
  if (args == NULL)
    bench_die("out of memory", -1);
  for (int i = 0; i < n; i++) {
    args[i].id = i;
    for (int k = 0; k < 32; k++) {
      dlock_lock **m = args[i].members[k];
      char name[64];
      snprintf(name, sizeof name, "bench:w5:%d:%d", i, k);
      for (int s = 0; s < 5; s++)
        dlock_reentrant_lock_new(c[s], name, NULL, &m[s]);
      int rc = dlock_redlock_new(m, 5, NULL, &args[i].rl[k]);
      if (rc != DLOCK_OK)
        bench_die("redlock", rc);
    }
  }
  bench_reset();
  double secs = bench_run_threads(n, rl_thread, args, sizeof *args, bench_opt.duration);
  *rate = (double)atomic_load(&bench_sh->pairs) / secs;
  *p50 = bench_pct(bench_sh->samples, bench_nsamples(), 50);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 32; k++) {
      dlock_lock_free(args[i].rl[k]);
      for (int s = 0; s < 5; s++)
        dlock_lock_free(args[i].members[k][s]);
    }
  free(args);
}

/* Five clients, one per server: on one engine thread (share_engine, what
 * docs/redlock.md recommends) or each on its own. */
static void w5_clients(dlock_client **c, int one_engine) {
  for (int i = 0; i < 5; i++) {
    dlock_client_opts o = bench_client_opts();
    o.share_engine = one_engine && i > 0 ? c[0] : NULL;
    c[i] = NULL;
    int rc = dlock_client_open(bench_opt.urls[i], &o, &c[i]);
    if (rc != DLOCK_OK)
      bench_die(bench_opt.urls[i], rc);
  }
}

void bench_w5(bench_bounds *b) {
  if (bench_opt.nurls < 5) {
    bench_na("W5", "needs 5 servers: run without --url");
    return;
  }
  dlock_client *c[5], *own[5];
  w5_clients(c, 1);
  w5_clients(own, 0);
  double rate, p50, own_rate, own_p50;
  w5_run(c, 1, &rate, &p50);
  bench_emit("W5", "1-thread pairs/s", rate, "1/s", NAN);
  bench_emit("W5", "1-thread lock p50", p50, "us", b->w1_p50);
  /* the same against the floor: how far the raw majority-of-5 already is
   * from one server's raw round trip, and dlock from that */
  double raw5 = raw_majority_p50();
  bench_emit("W5", "raw majority-of-5 p50", raw5, "us", b->raw_rtt);
  bench_emit("W5", "1-thread lock p50 vs raw", p50, "us", raw5);
  w5_run(own, 1, &own_rate, &own_p50);
  bench_emit("W5", "1-thread lock p50, engine per member", own_p50, "us", b->w1_p50);
  w5_run(c, 16, &rate, &p50);
  bench_emit("W5", "16-thread pairs/s", rate, "1/s", NAN);
  w5_run(own, 16, &own_rate, &own_p50);
  bench_emit("W5", "16-thread pairs/s, engine per member", own_rate, "1/s", NAN);
  for (int i = 4; i >= 0; i--) {
    dlock_client_close(c[i]);
    dlock_client_close(own[i]);
  }
}


