/* dlock-bench's sweeps (docs/performance.md, "How cost grows"): one
 * figure measured over a growing amount of work, each point beside the
 * raw bound measured at the same point, drawn as a curve (--plot).
 *
 *   SWT  threads: W1's pairs on 1, 2, 4 ... 64 threads, dlock and raw in
 *        turns (bench_pairs_in_turns): pairs/s and CPU per pair;
 *   SWN  names: one thread's pairs over 1, 10 ... 10^6 distinct names
 *        (each pair the next name), dlock beside raw: pairs/s, and the
 *        client's memory per lock handle;
 *   SWH  holds: 10^2 ... 10^6 locks held under the default watchdog (30 s
 *        lease, a tick every 10 s) for 25 s: the client's memory per
 *        hold, renewal calls per 100 holds per tick, the client's CPU;
 *   SWW  waiters: 1 ... 10^4 async waiters on one lock, a reentrant and
 *        a fair one (bench_waiters, W10's): the hand-off p50, the
 *        server's commands per grant, the client's bytes per waiter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlock/dlock.h>

#include "bench.h"

void bench_sweep_threads(bench_bounds *b) {
  (void)b;
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  for (int n = 1; n <= MAX_THREADS; n *= 2) {
    pair_figures raw, mine;
    char m[48];
    bench_pairs_in_turns(n, c, &raw, &mine);
    snprintf(m, sizeof m, "pairs/s, %d threads", n);
    bench_emit("SWT", m, mine.rate, "1/s", raw.rate);
    snprintf(m, sizeof m, "CPU per pair, %d thr.", n);
    bench_emit("SWT", m, mine.cpu, "us", raw.cpu);
    bench_plot_xy("sweep-threads", "dlock", n, mine.rate);
    bench_plot_xy("sweep-threads", "raw hiredis, the same scripts", n, raw.rate);
    bench_plot_xy("sweep-threads-cpu", "dlock", n, mine.cpu);
    bench_plot_xy("sweep-threads-cpu", "raw hiredis, the same scripts", n, raw.cpu);
  }
  dlock_client_close(c);
}

#define MAX_NAMES 1000000

void bench_sweep_names(bench_bounds *b) {
  (void)b;
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  redisContext *rc = bench_raw_connect(bench_opt.urls[0]);
  dlock_lock **locks = calloc(MAX_NAMES, sizeof *locks);
  if (locks == NULL || rc == NULL)
    bench_die("sweep names: setup", DLOCK_ENOMEM);
  char owner[64];
  snprintf(owner, sizeof owner, "bench-%d:1", (int)getpid());
  long made = 0, before = bench_resident();
  for (long n = 1; n <= MAX_NAMES; n *= 10) {
    char name[64], kept[RAW_LATCH_MAX] = "";
    for (; made < n; made++) {
      snprintf(name, sizeof name, "bench:names:%ld", made);
      int rc2 = dlock_reentrant_lock_new(c, name, NULL, &locks[made]);
      if (rc2 != DLOCK_OK)
        bench_die("sweep names: lock", rc2);
    }
    long per_handle = (bench_resident() - before) / made;
    /* raw, then dlock, each bench_opt.duration seconds, one thread */
    double rate[2];
    for (int side = 0; side < 2; side++) {
      long pairs = 0;
      int64_t t0 = bench_now_us(), end = t0 + (int64_t)(bench_opt.duration * 1e6);
      for (long seq = 0; bench_now_us() < end; seq++, pairs++) {
        long i = seq % n;
        if (side == 0) {
          snprintf(name, sizeof name, "bench:names:%ld", i);
          bench_raw_pair(rc, name, owner, seq, "PUBLISH", NULL, kept);
        } else {
          int rc2 = dlock_acquire(locks[i], 0, 30000);
          if (rc2 != DLOCK_OK)
            bench_die("sweep names: acquire", rc2);
          dlock_release(locks[i]);
        }
      }
      rate[side] = (double)pairs * 1e6 / (double)(bench_now_us() - t0);
    }
    char m[48];
    snprintf(m, sizeof m, "pairs/s, %ld names", n);
    bench_emit("SWN", m, rate[1], "1/s", rate[0]);
    snprintf(m, sizeof m, "bytes per handle, %ld", n);
    bench_emit("SWN", m, (double)per_handle, "B", 0);
    bench_plot_xy("sweep-names", "dlock", (double)n, rate[1]);
    bench_plot_xy("sweep-names", "raw hiredis, the same scripts", (double)n, rate[0]);
    if (kept[0])
      freeReplyObject(redisCommand(rc, "DEL %s", kept));
  }
  for (long i = 0; i < made; i++)
    dlock_lock_free(locks[i]);
  free(locks);
  redisFree(rc);
  dlock_client_close(c);
}

void bench_sweep_holds(bench_bounds *b) {
  (void)b;
  for (long n = 100; n <= 1000000; n *= 10) {
    holds_figures f;
    char m[48];
    bench_holds(n, 30000, 25.0, &f);
    snprintf(m, sizeof m, "bytes per hold, %ld", n);
    bench_emit("SWH", m, f.bytes_per_hold, "B", 512);
    snprintf(m, sizeof m, "calls/100 holds/tick, %ld", n);
    bench_emit("SWH", m, f.calls_per_tick_100, "calls", 1.0);
    snprintf(m, sizeof m, "client CPU, %ld holds", n);
    bench_emit("SWH", m, f.cpu_pct, "%", 5.0);
    snprintf(m, sizeof m, "still held, %ld", n);
    bench_emit("SWH", m, (double)f.held, "locks", (double)n);
    bench_plot_xy("sweep-holds-memory", "client bytes per hold", (double)n,
                  f.bytes_per_hold);
    bench_plot_xy("sweep-holds-work", "renewal calls per 100 holds per tick",
                  (double)n, f.calls_per_tick_100);
    bench_plot_xy("sweep-holds-work", "client CPU, % of one core", (double)n,
                  f.cpu_pct);
  }
}

void bench_sweep_waiters(bench_bounds *b) {
  (void)b;
  for (int fair = 0; fair < 2; fair++)
    for (int n = 1; n <= 10000; n *= 10) {
      waiters_figures f;
      char m[48];
      const char *kind = fair ? "fair" : "lock";
      bench_waiters(n, fair, &f);
      snprintf(m, sizeof m, "%s hand-off p50, %d", kind, n);
      bench_emit("SWW", m, f.p50, "us", NAN);
      snprintf(m, sizeof m, "%s commands/grant, %d", kind, n);
      bench_emit("SWW", m, f.commands_per_grant, "", NAN);
      snprintf(m, sizeof m, "%s bytes/waiter, %d", kind, n);
      bench_emit("SWW", m, f.bytes_per_waiter, "B", 1024);
      bench_plot_xy("sweep-waiters", fair ? "fair lock: hand-off p50 (us)"
                                          : "lock: hand-off p50 (us)",
                    n, f.p50);
      bench_plot_xy("sweep-waiters", fair ? "fair lock: server commands per grant"
                                          : "lock: server commands per grant",
                    n, f.commands_per_grant);
    }
}
