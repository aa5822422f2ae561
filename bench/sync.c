/* W8 (a 4-permit semaphore) and M1 (the memory of waiters). */
#include <inttypes.h>
#include <malloc.h>
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

/* ---- W8: semaphore, 4 permits ---------------------------------------------- */

#define W8_HOLD_US 200 /* each pair holds its permit this long */

typedef struct sem_arg {
  int id, raw;
  dlock_semaphore *sem;
} sem_arg;

static void *sem_thread(void *p) {
  sem_arg *a = p;
  redisContext *c = a->raw ? bench_raw_connect(bench_opt.urls[0]) : NULL;
  const char *name = a->raw ? "bench:w8:raw" : "bench:w8";
  while (!atomic_load(&bench_sh->stop)) {
    if (a->raw) {
      const char *acq[] = {name, "1"};
      redisReply *r = bench_raw_eval(c, DLOCK__SCRIPT_SEM_TRY_ACQUIRE, 1, acq, 2);
      int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
      freeReplyObject(r);
      if (!ok)
        continue;
    } else if (dlock_semaphore_acquire(a->sem, 1, 10000) != DLOCK_OK) {
      continue;
    }
    int in = atomic_fetch_add(&bench_sh->inside, 1) + 1;
    int max = atomic_load(&bench_sh->max_inside);
    while (in > max && !atomic_compare_exchange_weak(&bench_sh->max_inside, &max, in))
      ;
    /* the permit is used: held W8_HOLD_US (asleep, so the CPU figure is
     * the calls'), which puts 4 holders inside at once */
    struct timespec hold = {0, W8_HOLD_US * 1000};
    nanosleep(&hold, NULL);
    atomic_fetch_sub(&bench_sh->inside, 1);
    if (a->raw) {
      const char *rel[] = {name, "1", "PUBLISH", "redisson_sc:{bench:w8:raw}"};
      freeReplyObject(bench_raw_eval(c, DLOCK__SCRIPT_SEM_RELEASE, 1, rel, 4));
    } else {
      dlock_semaphore_release(a->sem, 1);
    }
    atomic_fetch_add(&bench_sh->pairs, 1);
  }
  if (c)
    redisFree(c);
  return NULL;
}

void bench_w8(bench_bounds *b) {
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  dlock_semaphore *sem;
  dlock_semaphore_new(c, "bench:w8", NULL, &sem);
  redisContext *rc = bench_raw_connect(bench_opt.urls[0]);
  freeReplyObject(redisCommand(rc, "SET bench:w8 4"));
  freeReplyObject(redisCommand(rc, "SET bench:w8:raw 4"));
  redisFree(rc);
  sem_arg args[16];
  double rate[2], cpu[2];
  long npairs[2];
  run_cost cost[2];
  int max_inside[2] = {0, 0};
  for (int raw = 1; raw >= 0; raw--) {
    for (int i = 0; i < 16; i++)
      args[i] = (sem_arg){i, raw, sem};
    bench_reset();
    double secs = bench_run_threads(16, sem_thread, args, sizeof args[0], bench_opt.duration);
    rate[raw] = (double)atomic_load(&bench_sh->pairs) / secs;
    cpu[raw] = bench_cpu_per_pair();
    cost[raw] = bench_last_cost();
    npairs[raw] = atomic_load(&bench_sh->pairs);
    max_inside[raw] = atomic_load(&bench_sh->max_inside);
  }
  bench_emit("W8", "pairs/s", rate[0], "1/s", rate[1]);
  bench_emit("W8", "max concurrent holders", max_inside[0], "holders", 4);
  bench_emit("W8", "raw max concurrent holders", max_inside[1], "holders", 4);
  bench_emit("W8", "CPU per pair", cpu[0], "us", cpu[1]);
  bench_emit_costs("W8", npairs[0], &cost[0], npairs[1], &cost[1]);
  dlock_semaphore_free(sem);
  dlock_client_close(c);
}

/* ---- M1: memory ------------------------------------------------------------ */

/* The heap in use (bytes), as malloc counts it. */
size_t bench_heap_used(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

typedef struct m1_waiter {
  dlock_lock *lock;
  atomic_int *started;
} m1_waiter;

static void *m1_wait(void *p) {
  m1_waiter *w = p;
  atomic_fetch_add(w->started, 1);
  if (dlock_acquire(w->lock, 60000, 30000) == DLOCK_OK)
    dlock_release(w->lock);
  return NULL;
}

void bench_m1(bench_bounds *b) {
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  enum { HELD = 10000, WAITERS = 1000 };
  dlock_lock **locks = calloc(HELD, sizeof *locks);
  size_t before = bench_heap_used();
  for (int i = 0; i < HELD; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:m1:%d", i);
    dlock_reentrant_lock_new(c, name, NULL, &locks[i]);
    dlock_acquire(locks[i], 0, DLOCK_LEASE_WATCHDOG);
  }
  size_t after = bench_heap_used();
  bench_emit("M1", "bytes per held lock", (double)(after - before) / HELD, "B", 512);
  for (int i = 0; i < HELD; i++) {
    dlock_release(locks[i]);
    dlock_lock_free(locks[i]);
  }
  free(locks);

  /* waiters: threads blocked on one held lock, each with a small stack */
  dlock_lock *held, *shared_lock;
  dlock_reentrant_lock_new(c, "bench:m1:waited", NULL, &held);
  dlock_reentrant_lock_new(c, "bench:m1:waited", NULL, &shared_lock);
  dlock_acquire(held, 0, 60000);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  pthread_t *t = calloc(WAITERS, sizeof *t);
  atomic_int started = 0;
  m1_waiter w = {shared_lock, &started};
  before = bench_heap_used();
  for (int i = 0; i < WAITERS; i++)
    pthread_create(&t[i], &attr, m1_wait, &w);
  while (atomic_load(&started) < WAITERS)
    usleep(1000);
  usleep(500 * 1000); /* let every waiter reach its wait */
  after = bench_heap_used();
  bench_emit("M1", "bytes per waiter", (double)(after - before) / WAITERS, "B", 2048);
  dlock_release(held);
  for (int i = 0; i < WAITERS; i++)
    pthread_join(t[i], NULL);
  free(t);
  dlock_lock_free(held);
  dlock_lock_free(shared_lock);
  dlock_client_close(c);
}


