/* The reliability targets of docs/reliability.md, one test each (docs/
 * reliability.md). Most run dlock-torture (tests/torture) and assert on its
 * JSON summary; the rest drive a client directly. Sanitizer builds run the
 * same checks with less work (their job is memory errors and races). */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "partition.h"
#include "torture/torture.h"

static th_server srv[5];

#if defined(__SANITIZE_THREAD__)
#define WORK_DIVISOR 10
#elif defined(__SANITIZE_ADDRESS__)
#define WORK_DIVISOR 3
#else
#define WORK_DIVISOR 1
#endif

/* count (sections, reconnects ...) for this build: the target's in plain */
static int64_t work(int64_t n) {
  int64_t d = WORK_DIVISOR;
  const char *slow = getenv("DLOCK_TEST_SLOWDOWN");
  if (slow && atoi(slow) > 1)
    d *= atoi(slow);
  return n / d > 1 ? n / d : 1;
}

typedef struct run {
  char out[8192];
  int status;
} run;

/* Run dlock-torture with args (space separated) and keep its JSON line;
 * env (may be empty) is put in front of the command, for the shell. */
static void torture_env(run *r, const char *env, const char *args) {
  const char *bin = getenv("DLOCK_TORTURE");
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s %s --json", env,
           bin ? bin : "dlock-torture", args);
  printf("\n    $ dlock-torture %s\n", args);
  fflush(stdout);
  r->out[0] = '\0';
  FILE *p = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  char line[8192];
  while (fgets(line, sizeof line, p)) {
    if (line[0] == '{')
      snprintf(r->out, sizeof r->out, "%s", line);
    else
      printf("    %s", line);
  }
  int st = pclose(p);
  r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  CU_ASSERT_NOT_EQUAL(r->out[0], '\0');
}

static void torture(run *r, const char *args) { torture_env(r, "", args); }

static int64_t field(const run *r, const char *name) {
  char key[64];
  snprintf(key, sizeof key, "\"%s\":", name);
  const char *p = strstr(r->out, key);
  if (p == NULL) {
    printf("    no field %s\n", name);
    return -999999;
  }
  return strtoll(p + strlen(key), NULL, 10);
}

#define EXPECT(r, name, op, want)                                             \
  do {                                                                        \
    int64_t v_ = field((r), name);                                            \
    int64_t w_ = (want);                                                      \
    if (!(v_ op w_))                                                          \
      printf("\n    %s = %" PRId64 ", want " #op " %" PRId64 "\n", name, v_, w_); \
    CU_ASSERT(v_ op w_);                                                      \
  } while (0)

/* what every torture run must show */
static void clean(const run *r) {
  CU_ASSERT_EQUAL(r->status, 0);
  EXPECT(r, "violations", ==, 0);
  EXPECT(r, "overlaps", ==, 0);
  EXPECT(r, "counter_violation", ==, 0);
  EXPECT(r, "sections", >, 0);
  EXPECT(r, "worker_deaths", ==, 0);
}

/* ---- 0. the checker itself: planted violations are caught ----------------
 * Every target below trusts tt_check to see an overlap, a wrong counter, a
 * semaphore over its permits or a FIFO inversion. These logs are written by
 * hand, each with one such fault planted (and its harmless twin), so a
 * checker that stopped seeing them fails here, not silently in t01..t15. */

#define MS(x) ((int64_t)(x) * 1000000) /* the arena's times are ns */

static tt_arena *fake_arena(void) { /* zero pages, touched only as used */
  void *p = mmap(NULL, sizeof(tt_arena), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CU_ASSERT_FATAL(p != MAP_FAILED);
  return p;
}

static void fake_free(tt_arena *a) { munmap(a, sizeof *a); }

/* one attempt by slot (enter 0: not granted); a granted one commits */
static void fake_rec(tt_arena *a, int slot, int64_t invoke, int64_t enter,
                     int64_t exit, unsigned flags) {
  tt_rec *r = &a->recs[atomic_fetch_add(&a->nrecs, 1)];
  r->slot = slot;
  r->invoke = invoke;
  r->enter = enter;
  r->exit = exit;
  r->done = (enter ? exit : invoke) + MS(1) / 10;
  r->rc = enter ? 0 : -1;
  atomic_store(&r->flags, flags);
  if (slot >= atomic_load(&a->nslots))
    atomic_store(&a->nslots, slot + 1);
  atomic_store(&a->slots[slot].phase, TT_P_GONE);
  if (enter) {
    atomic_fetch_add(&a->slots[slot].grants, 1);
    atomic_fetch_add(&a->commits, 1);
    a->counter++;
  }
}

static tt_result fake_check(tt_kind kind, int permits, tt_arena *a,
                            const tt_snapshot *snaps, size_t n) {
  tt_opts o = {.kind = kind, .permits = permits};
  tt_result r;
  memset(&r, 0, sizeof r);
  tt_check(&o, a, snaps, n, &r);
  return r;
}

static void test_t00_checker_sees_overlaps(void) {
  tt_arena *a = fake_arena();
  fake_rec(a, 0, MS(1), MS(2), MS(5), 0);
  fake_rec(a, 1, MS(1), MS(6), MS(8), 0); /* after the first: fine */
  fake_rec(a, 2, MS(1), 0, 0, 0);         /* gave up: not a section */
  tt_result r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.sections, 2);
  CU_ASSERT_EQUAL(r.overlaps + r.violations, 0);
  fake_rec(a, 2, MS(9), MS(10), MS(12), 0);
  fake_rec(a, 3, MS(9), MS(11), MS(13), 0); /* inside slot 2's section */
  r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.overlaps, 1);
  CU_ASSERT(r.violations >= 1);
  fake_free(a);
  /* the first holder had been told it lost: counted apart, no violation */
  a = fake_arena();
  fake_rec(a, 0, MS(1), MS(2), MS(5), TT_R_LOST);
  fake_rec(a, 1, MS(1), MS(3), MS(6), 0);
  r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.reported_overlaps, 1);
  CU_ASSERT_EQUAL(r.overlaps + r.violations, 0);
  CU_ASSERT_EQUAL(r.untold_overlaps, 1); /* no callback time: told late */
  atomic_store(&a->recs[0].lost_at, MS(2) + 1); /* told before the second */
  r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.untold_overlaps, 0);
  atomic_store(&a->recs[0].lost_at, MS(4)); /* after the second entered */
  r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.untold_overlaps, 1);
  /* its process was stopped (pause) in its section before the second
   * entered: counted apart; stopped after the second entered: not */
  a->slots[0].pid = 4242;
  a->pauses[0].pid = 4242;
  a->pauses[0].from = MS(3) + 1;
  a->pauses[0].to = MS(9);
  atomic_store(&a->npauses, 1);
  r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.untold_overlaps, 1);
  CU_ASSERT_EQUAL(r.paused_overlaps, 0);
  a->pauses[0].from = MS(2) + 1;
  r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.untold_overlaps, 0);
  CU_ASSERT_EQUAL(r.paused_overlaps, 1);
  /* the stop sent just before it entered (a stop lands after kill()
   * returns: the entry fell between the pause's two times): stopped in
   * its section; a pause over before it entered: not */
  a->pauses[0].from = MS(2) - 1;
  r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.paused_overlaps, 1);
  a->pauses[0].from = MS(1);
  a->pauses[0].to = MS(2) - 1;
  r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.untold_overlaps, 1);
  CU_ASSERT_EQUAL(r.paused_overlaps, 0);
  atomic_store(&a->npauses, 0);
  /* one increment lost: the counter no longer matches the commits */
  a->counter--;
  r = fake_check(TT_LOCK, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.counter_violation, 1);
  CU_ASSERT(r.violations >= 1);
  fake_free(a);
}

static void test_t00_checker_sees_readers_writers_permits(void) {
  tt_arena *a = fake_arena();
  fake_rec(a, 0, MS(1), MS(2), MS(5), TT_R_READ);
  fake_rec(a, 1, MS(1), MS(3), MS(6), TT_R_READ); /* readers share */
  tt_result r = fake_check(TT_RW, 0, a, NULL, 0);
  CU_ASSERT_EQUAL(r.shared_sections, 1);
  CU_ASSERT_EQUAL(r.max_holders, 2);
  CU_ASSERT_EQUAL(r.overlaps + r.violations, 0);
  fake_rec(a, 2, MS(1), MS(4), MS(7), 0); /* a writer among them */
  r = fake_check(TT_RW, 0, a, NULL, 0);
  CU_ASSERT(r.overlaps >= 1 && r.violations >= 1);
  fake_free(a);
  /* three holders at once: fine with 3 permits, a violation with 2 */
  a = fake_arena();
  for (int i = 0; i < 3; i++)
    fake_rec(a, i, MS(1), MS(2 + i), MS(10), 0);
  r = fake_check(TT_SEMAPHORE, 3, a, NULL, 0);
  CU_ASSERT_EQUAL(r.max_holders, 3);
  CU_ASSERT_EQUAL(r.overlaps + r.violations, 0);
  r = fake_check(TT_SEMAPHORE, 2, a, NULL, 0);
  CU_ASSERT_EQUAL(r.overlaps, 1);
  CU_ASSERT(r.violations >= 1);
  /* the first holder's process stopped (pause) before the third entered:
   * its lapsed permit is counted apart */
  a->slots[0].pid = 4343;
  a->pauses[0].pid = 4343;
  a->pauses[0].from = MS(3);
  a->pauses[0].to = MS(12);
  atomic_store(&a->npauses, 1);
  r = fake_check(TT_SEMAPHORE, 2, a, NULL, 0);
  CU_ASSERT_EQUAL(r.overlaps, 0);
  CU_ASSERT_EQUAL(r.paused_overlaps, 1);
  fake_free(a);
}

static void test_t00_checker_sees_fifo_inversions(void) {
  /* the queue read at 3 ms shows slot 0 ahead of slot 1, both waiting */
  tt_snapshot q = {.sent = MS(3), .replied = MS(3) + 50000, .n = 2,
                   .slots = {0, 1}};
  tt_arena *a = fake_arena();
  fake_rec(a, 0, MS(1), MS(5), MS(7), 0);
  fake_rec(a, 1, MS(2), MS(8), MS(9), 0); /* in queue order */
  tt_result r = fake_check(TT_FAIR, 0, a, &q, 1);
  CU_ASSERT_EQUAL(r.fifo_checked, 1);
  CU_ASSERT_EQUAL(r.fifo_violations + r.violations, 0);
  fake_free(a);
  a = fake_arena();
  fake_rec(a, 0, MS(1), MS(8), MS(9), 0);
  fake_rec(a, 1, MS(2), MS(5), MS(7), 0); /* the one behind went first */
  r = fake_check(TT_FAIR, 0, a, &q, 1);
  CU_ASSERT_EQUAL(r.fifo_checked, 1);
  CU_ASSERT_EQUAL(r.fifo_violations, 1);
  CU_ASSERT(r.violations >= 1);
  /* a later read before slot 1 left its section (7 ms) shows slot 0 out of
   * the queue, or behind slot 1: slot 0 was purged (its slot passed) and
   * queued again, so slot 1 rightly went first */
  tt_snapshot later[2] = {q, {.sent = MS(4), .replied = MS(4) + 50000, .n = 1,
                              .slots = {1}}};
  r = fake_check(TT_FAIR, 0, a, later, 2);
  CU_ASSERT_EQUAL(r.fifo_requeued, 1);
  CU_ASSERT_EQUAL(r.fifo_violations + r.violations, 0);
  later[1].n = 2;
  later[1].slots[1] = 0;
  r = fake_check(TT_FAIR, 0, a, later, 2);
  CU_ASSERT_EQUAL(r.fifo_requeued, 1);
  CU_ASSERT_EQUAL(r.fifo_violations + r.violations, 0);
  /* still ahead later: no excuse (and the second read counts again) */
  later[1].slots[0] = 0;
  later[1].slots[1] = 1;
  r = fake_check(TT_FAIR, 0, a, later, 2);
  CU_ASSERT_EQUAL(r.fifo_requeued, 0);
  CU_ASSERT_EQUAL(r.fifo_violations, 2);
  /* out of the queue only after slot 1 left its section: x may have been
   * granted by then, which proves nothing */
  later[1] = (tt_snapshot){.sent = MS(7) + 10000, .replied = MS(7) + 60000,
                           .n = 1, .slots = {1}};
  r = fake_check(TT_FAIR, 0, a, later, 2);
  CU_ASSERT_EQUAL(r.fifo_requeued, 0);
  CU_ASSERT_EQUAL(r.fifo_violations, 1);
  /* a failover (a fault that can lose the master's latest writes) between
   * slot 0's call and slot 1's entry: the order may have gone with the
   * queue's joins; counted apart, not a violation. One before slot 0's
   * call, or after slot 1 entered: no excuse. */
  a->losses[0].from = MS(3);
  a->losses[0].to = MS(3) + 1000;
  atomic_store(&a->nlosses, 1);
  r = fake_check(TT_FAIR, 0, a, &q, 1);
  CU_ASSERT_EQUAL(r.fifo_lost, 1);
  CU_ASSERT_EQUAL(r.fifo_violations + r.violations, 0);
  a->losses[0].from = MS(6);
  a->losses[0].to = MS(6) + 1000;
  r = fake_check(TT_FAIR, 0, a, &q, 1);
  CU_ASSERT_EQUAL(r.fifo_lost, 0);
  CU_ASSERT_EQUAL(r.fifo_violations, 1);
  fake_free(a);
}

/* The same, end to end: workers that each lock a name of their own (the
 * torture program's --broken) run the real code paths with no exclusion at
 * all; the checker must fail the run. */
static void test_t00_checker_fails_a_broken_lock(void) {
  run r;
  /* the unguarded counter is a real data race now: ThreadSanitizer is right
   * to see it, and must not stop the workers for it */
  torture_env(&r, "TSAN_OPTIONS=report_bugs=0",
              "--kind lock --procs 2 --threads 4 --duration 1000 "
              "--hold-us 2000 --broken");
  CU_ASSERT_EQUAL(r.status, 1);
  EXPECT(&r, "overlaps", >, 0);
  EXPECT(&r, "counter_violation", ==, 1);
  EXPECT(&r, "violations", >, 0);
}

/* The text of file path into buf (NUL-terminated, truncated); its size or
 * -1. */
static long slurp(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return -1;
  size_t k = fread(buf, 1, n - 1, f);
  buf[k] = '\0';
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  return size;
}

/* --timeline PNG draws a run (gnuplot): a broken lock's overlapping holds
 * in red, a run's faults shaded. */
static void test_t00_timeline_draws_a_run(void) {
  static char buf[1 << 16];
  char png[96], path[128], args[512];
  snprintf(png, sizeof png, "/tmp/dlock-timeline-%d.png", (int)getpid());
  for (int faulty = 0; faulty < 2; faulty++) {
    run r;
    snprintf(args, sizeof args, "%s --timeline %s",
             faulty ? "--kind lock --procs 2 --threads 2 --duration 1500 "
                      "--nemesis client-kill --every 300"
                    : "--kind lock --procs 2 --threads 2 --duration 800 "
                      "--hold-us 2000 --broken",
             png);
    torture_env(&r, "TSAN_OPTIONS=report_bugs=0", args);
    CU_ASSERT(slurp(png, buf, 9) > 2000 && memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0);
    snprintf(path, sizeof path, "%s.dat", png);
    CU_ASSERT(slurp(path, buf, sizeof buf) > 0);
    if (!faulty) /* the broken lock's overlaps: red bars */
      CU_ASSERT(strstr(buf, " 13631488\n") != NULL);
    snprintf(path, sizeof path, "%s.gp", png);
    CU_ASSERT(slurp(path, buf, sizeof buf) > 0);
    /* the lanes' axis: lanes 0-3 (2 processes x 2 threads), no empty
     * lanes beyond them */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "set yrange [-0.6:3.4]"));
    if (faulty) /* a client-kill, shaded */
      CU_ASSERT(strstr(buf, "set object 1 rect") != NULL &&
                strstr(buf, "client-kill") != NULL);
    static const char *const ext[] = {"", ".dat", ".gp", ".lost"};
    for (int i = 0; i < 4; i++) {
      snprintf(path, sizeof path, "%s%s", png, ext[i]);
      unlink(path);
    }
  }
}

/* 1. 8 processes x 8 threads, one lock */
static void test_t01_lock_8x8(void) {
  run r;
  torture(&r, "--kind lock --procs 8 --threads 8 --duration 6000");
  clean(&r);
  EXPECT(&r, "errors", ==, 0);
  EXPECT(&r, "timeouts", ==, 0);
  EXPECT(&r, "starved", ==, 0); /* every worker acquired */
  EXPECT(&r, "lost_reports", ==, 0);
  /* 64 contenders on an unfair lock: the longest wait measured on this
   * 2-core machine 0.88-0.95 s idle (2 runs, bound 2 s: 2x headroom) and
   * 0.46-0.65 s with two `yes > /dev/null` hogs (3 runs; the bound scales
   * with the round trip to 3.4 s there: 5x) */
  EXPECT(&r, "max_wait_us", <=, th_scaled_us(&srv[0], 2000000));
  EXPECT(&r, "keys_left", ==, 0);
}

/* 2. the same with a random worker SIGKILLed every 500 ms */
static void test_t02_lock_kills(void) {
  run r;
  torture(&r, "--kind lock --procs 8 --threads 8 --duration 8000 "
              "--watchdog 1000 --nemesis kill --every 500");
  clean(&r);
  EXPECT(&r, "f_kill", >=, 8);
  /* take-over after a holder died: lease + 300 ms */
  EXPECT(&r, "max_takeover_us", <=, 1000000 + th_scaled_us(&srv[0], 300000));
  EXPECT(&r, "keys_left", ==, 0);
}

/* 3. RedLock over N = 3 and 5: with every subset of members held
 * elsewhere, an acquire succeeds iff the free members are a majority */
static void subsets(int n) {
  dlock_client *mine[5], *other[5];
  dlock_lock *m[5], *o[5], *rl;
  const char *name = th_name("subset");
  for (int i = 0; i < n; i++) {
    mine[i] = th_client(&srv[i], NULL);
    other[i] = th_client(&srv[i], NULL);
    CU_ASSERT_EQUAL_FATAL(dlock_reentrant_lock_new(mine[i], name, NULL, &m[i]), 0);
    CU_ASSERT_EQUAL_FATAL(dlock_reentrant_lock_new(other[i], name, NULL, &o[i]), 0);
  }
  CU_ASSERT_EQUAL_FATAL(dlock_redlock_new(m, (size_t)n, NULL, &rl), 0);
  int mismatches = 0;
  for (int mask = 0; mask < (1 << n); mask++) {
    int held = 0;
    for (int i = 0; i < n; i++)
      if (mask & (1 << i)) {
        TH_ASSERT_RC(dlock_try_acquire(o[i], 10000), DLOCK_OK);
        held++;
      }
    int want = n - held >= n / 2 + 1 ? DLOCK_OK : DLOCK_EQUORUM;
    int rc = dlock_try_acquire(rl, 10000);
    if (rc != want) {
      printf("\n    N=%d held elsewhere %#x: %s, want %s (%s)\n", n, mask,
             dlock_errname(rc), dlock_errname(want),
             rc == DLOCK_OK ? "" : dlock_errmsg());
      mismatches++;
    }
    if (rc == DLOCK_OK)
      TH_ASSERT_RC(dlock_release(rl), DLOCK_OK);
    for (int i = 0; i < n; i++)
      if (mask & (1 << i))
        TH_ASSERT_RC(dlock_release(o[i]), DLOCK_OK);
  }
  CU_ASSERT_EQUAL(mismatches, 0);
  for (int i = 0; i < n; i++) /* nothing of ours left behind */
    CU_ASSERT_EQUAL(th_int(&srv[i], "EXISTS %s", name), 0);
  dlock_lock_free(rl);
  for (int i = 0; i < n; i++) {
    dlock_lock_free(m[i]);
    dlock_lock_free(o[i]);
    dlock_client_close(mine[i]);
    dlock_client_close(other[i]);
  }
}

static void test_t03_redlock_subsets(void) {
  subsets(3);
  subsets(5);
}

/* 4. RedLock N = 5 with 2 masters SIGSTOPped, and with 2 blackholed */
static void redlock_two_gone(const char *how, int one_engine) {
  char args[256];
  snprintf(args, sizeof args,
           "--kind redlock --servers 5 --%s 2 --procs 2 --threads 1 "
           "--sections %" PRId64 " --duration 120000 --hold-us 0 "
           "--one-engine %d", how, work(10000), one_engine);
  run r;
  torture(&r, args);
  clean(&r);
  EXPECT(&r, "sections", >=, work(10000));
  EXPECT(&r, "errors", ==, 0);
  /* the gone masters cost an acquire nothing: a round ends with the
   * quorum's answers, not the member timeout (50 ms). The median says so:
   * 0.2 ms here (0.13-0.17 ms beside two CPU hogs), 49.5 ms when a round
   * waits for every member. Not the p99: a worker that has just released
   * takes the lock again before the other's retry (5-50 ms later), so
   * about 1 % of the acquires wait out that race (up to 1.3 s beside two
   * hogs; a p99 of 163 ms), which says nothing about the gone masters. */
  EXPECT(&r, "acquire_p50_us", <=, th_scaled_us(&srv[0], 20000));
}

static void test_t04_redlock_two_stopped(void) { redlock_two_gone("paused", 0); }
static void test_t04_redlock_two_blackholed(void) {
  redlock_two_gone("blackholed", 0);
}
/* the same with each worker's five member clients on one engine thread */
static void test_t04_redlock_two_stopped_one_engine(void) {
  redlock_two_gone("paused", 1);
}

/* 5. RedLock with 3 of 5 down: every acquire fails within budget + 50 ms */
static void test_t05_redlock_three_down(void) {
  run r;
  /* a 2 s lease: the paused servers, resumed at the end, still run the
   * tries buffered in their sockets, and the run waits out those keys'
   * leases before it checks that nothing is left (the watchdog's 30 s
   * made this target 33 s long) */
  torture(&r, "--kind redlock --servers 5 --paused 3 --procs 2 --threads 2 "
              "--wait 200 --lease 2000 --duration 3000");
  CU_ASSERT_EQUAL(r.status, 0);
  EXPECT(&r, "sections", ==, 0); /* 0 grants */
  EXPECT(&r, "timeouts", >, 0);
  EXPECT(&r, "errors", ==, 0);
  /* budget + the member timeout (50 ms: a failed round's undo waits that
   * long for a slow member's late grant to be released, so none outlives
   * the call; test_multi's redlock_quorum checks it) + 50 ms of scheduling
   * (scaled). Measured with two `yes > /dev/null` hogs: 205.1-206.8 ms
   * (3 runs), 93 ms of headroom; once 261 ms in CI, when the bound was
   * budget + 50 ms. */
  EXPECT(&r, "max_fail_us", <=, 250000 + th_scaled_us(&srv[0], 50000));
}

/* 6. the watchdog under CPU starvation: lease 2 s, held 30 s */
static atomic_int lost_calls;
static void count_lost(void *d, const char *n, size_t l, uint64_t o,
                       dlock_lost_reason r) {
  atomic_fetch_add(&lost_calls, 1);
}

static void test_t06_watchdog_cpu_starved(void) {
  pid_t spin[2];
  for (int i = 0; i < 2; i++) { /* stress-ng --cpu 2, in two processes */
    spin[i] = fork();
    if (spin[i] == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (volatile unsigned long x = 0;; x++) {
      }
    }
  }
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 2000;
  o.on_lost = count_lost;
  atomic_store(&lost_calls, 0);
  dlock_client *c = th_client(&srv[0], &o);
  dlock_lock *l;
  const char *name = th_name("starved");
  CU_ASSERT_EQUAL_FATAL(dlock_reentrant_lock_new(c, name, NULL, &l), 0);
  TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  int expired = 0;
  /* 30 s in the plain build (45 renewals); the sanitizer builds check
   * the same code paths in 10 s */
  int64_t end = th_now_ms() + (WORK_DIVISOR > 1 ? 10000 : 30000);
  while (th_now_ms() < end) { /* 0 expirations: the key never goes away */
    if (th_int(&srv[0], "EXISTS %s", name) != 1)
      expired++;
    usleep(250000);
  }
  for (int i = 0; i < 2; i++) {
    kill(spin[i], SIGKILL);
    waitpid(spin[i], NULL, 0);
  }
  CU_ASSERT_EQUAL(expired, 0);
  CU_ASSERT_EQUAL(atomic_load(&lost_calls), 0); /* 0 false lost reports */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* 7. a restart without persistence: the loss is reported within the
 * renewal interval plus the command timeout; release says DLOCK_ELOST; a
 * new lock works right after */
static atomic_llong lost_at_ms;
static void note_lost(void *d, const char *n, size_t l, uint64_t o,
                      dlock_lost_reason r) {
  atomic_store(&lost_at_ms, th_now_ms());
}

static void test_t07_restart_reports_loss(void) {
  th_server s;
  CU_ASSERT_EQUAL_FATAL(th_server_start(&s, NULL), 0);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 900; /* renewal every 300 ms */
  o.command_timeout_ms = 500;
  o.on_lost = note_lost;
  atomic_store(&lost_at_ms, 0);
  dlock_client *c = th_client(&s, &o);
  dlock_lock *l;
  CU_ASSERT_EQUAL_FATAL(dlock_reentrant_lock_new(c, "restart", NULL, &l), 0);
  TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  th_server_kill(&s);
  CU_ASSERT_EQUAL_FATAL(th_server_restart(&s), 0);
  int64_t t0 = th_now_ms();
  int64_t bound = 300 + 500 + th_scaled_us(&s, 100000) / 1000;
  while (atomic_load(&lost_at_ms) == 0 && th_now_ms() - t0 < 5000)
    usleep(5000);
  int64_t took = atomic_load(&lost_at_ms) - t0;
  printf("\n    lost reported %" PRId64 " ms after the restart (bound %" PRId64
         " ms)\n", took, bound);
  CU_ASSERT(atomic_load(&lost_at_ms) != 0 && took <= bound);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST);
  TH_ASSERT_RC(dlock_acquire(l, 2000, 5000), DLOCK_OK); /* works right after */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
  th_server_stop(&s);
}

/* 23. durable grants (docs/durability.md). With durable_ms on a server with
 * appendonly yes and appendfsync always, a holder's grant survives kill -9
 * and a restart, every one of rounds times: the key is there, the holder's
 * hold is renewed and released (no loss reported), a newcomer waits. The
 * same rounds without the option, with appendfsync everysec and with no
 * append-only file, count the grants lost (printed: the figures in
 * docs/reliability.md; asserted only for no AOF, where all are lost).
 * The watchdog's lease runs across each kill and restart, so it is chosen
 * from the restart time measured first on the same server: 4 times the
 * slowest of three kill-and-restarts, at least 3 s (measured here 12 ms
 * quiet, 35 ms beside two CPU hogs and the plain suite running: the lease
 * stays 3 s, about 85x the restart; a 900 ms lease lost 7 of 20 grants in
 * a CI run while another build ran, the reconnect and first renewal then
 * slower than the lease). The durability promise is asserted apart: the
 * grant is on disk after each restart (EXISTS), the holder releases its
 * own hold, no loss is told. */
static atomic_int t23_lost;
static void t23_note_lost(void *d, const char *n, size_t l, uint64_t o,
                          dlock_lost_reason r) {
  atomic_fetch_add(&t23_lost, 1);
}

static int t23_rounds(const char *extra, int durable, int rounds) {
  th_server s;
  /* extra NULL: no append-only file (the harness's default) */
  int started = extra ? th_waitaof_server_start(&s, extra)
                      : th_server_start(&s, NULL);
  CU_ASSERT_EQUAL_FATAL(started, 0);
  int64_t slowest = 0;
  for (int i = 0; i < 3; i++) {
    int64_t t0 = th_now_ms();
    th_server_kill(&s);
    CU_ASSERT_EQUAL_FATAL(th_server_restart(&s), 0);
    if (th_now_ms() - t0 > slowest)
      slowest = th_now_ms() - t0;
  }
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 4 * slowest > 3000 ? 4 * slowest : 3000;
  printf("\n    a kill and restart took up to %" PRId64 " ms: lease %" PRId64
         " ms", slowest, o.watchdog_timeout_ms);
  o.on_lost = t23_note_lost;
  o.durable_ms = durable ? 1000 : 0;
  atomic_store(&t23_lost, 0);
  dlock_client *c = th_client(&s, &o), *c2 = th_client(&s, NULL);
  int kept = 0;
  for (int i = 0; i < rounds; i++) {
    char name[64];
    snprintf(name, sizeof name, "t23:%d", i);
    dlock_lock *l = NULL, *l2 = NULL;
    CU_ASSERT_EQUAL_FATAL(dlock_reentrant_lock_new(c, name, NULL, &l), 0);
    CU_ASSERT_EQUAL_FATAL(dlock_reentrant_lock_new(c2, name, NULL, &l2), 0);
    TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
    th_server_kill(&s); /* at once: the grant's reply is all the holder saw */
    CU_ASSERT_EQUAL_FATAL(th_server_restart(&s), 0);
    int there = th_int(&s, "EXISTS %s", name) == 1;
    kept += there;
    if (durable) {
      CU_ASSERT(there);
      /* a newcomer waits; the holder releases its own hold (renewed at the
       * reconnect, no loss told) */
      TH_ASSERT_RC(dlock_acquire(l2, 700, 5000), DLOCK_ETIMEDOUT);
      TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    } else {
      dlock_release(l); /* DLOCK_ELOST where the grant was lost */
    }
    dlock_lock_free(l);
    dlock_lock_free(l2);
  }
  dlock_client_close(c);
  dlock_client_close(c2);
  th_server_stop(&s);
  return rounds - kept;
}

static void test_t23_durable_restarts(void) {
  int rounds = (int)work(20);
  int lost = t23_rounds("--appendfsync always", 1, rounds);
  printf("\n    durable, appendfsync always: %d of %d grants lost, %d lost "
         "reports", lost, rounds, atomic_load(&t23_lost));
  CU_ASSERT_EQUAL(lost, 0);
  CU_ASSERT_EQUAL(atomic_load(&t23_lost), 0);
  lost = t23_rounds("--appendfsync everysec", 0, rounds);
  printf("\n    not durable, appendfsync everysec: %d of %d lost", lost, rounds);
  lost = t23_rounds(NULL, 0, rounds);
  printf("\n    not durable, no append-only file: %d of %d lost\n", lost, rounds);
  CU_ASSERT_EQUAL(lost, rounds);
}

/* 8. a SIGSTOPped server: no call blocks past its timeout + 20 ms; the
 * client recovers within 1 s of SIGCONT */
static void test_t08_server_stopped(void) {
  th_server s;
  CU_ASSERT_EQUAL_FATAL(th_server_start(&s, NULL), 0);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.command_timeout_ms = 300;
  o.connect_timeout_ms = 300;
  dlock_client *c = th_client(&s, &o);
  dlock_lock *l;
  CU_ASSERT_EQUAL_FATAL(dlock_reentrant_lock_new(c, "stopped", NULL, &l), 0);
  int64_t slack = th_scaled_us(&s, 20000) / 1000;
  th_server_pause(&s, 1);
  int64_t worst = 0;
  for (int i = 0; i < 3; i++) {
    int64_t t0 = th_now_ms();
    int rc = dlock_try_acquire(l, 5000);
    int64_t took = th_now_ms() - t0;
    CU_ASSERT_NOT_EQUAL(rc, DLOCK_OK);
    if (took > worst)
      worst = took;
  }
  th_server_pause(&s, 0);
  int64_t t0 = th_now_ms(), back = -1;
  while (th_now_ms() - t0 < 3000) {
    if (dlock_try_acquire(l, 5000) == DLOCK_OK) {
      back = th_now_ms() - t0;
      break;
    }
    usleep(10000);
  }
  printf("\n    stopped: worst call %" PRId64 " ms (bound %" PRId64
         "); recovered %" PRId64 " ms after SIGCONT\n", worst, 300 + slack, back);
  /* measured 301-302 ms beside two CPU hogs (307-335 before the socket's
   * receive timeout was set early: net/sock.c, dlock__sock_sleepy) */
  CU_ASSERT(worst <= 300 + slack);
  CU_ASSERT(back >= 0 && back <= 1000);
  if (back >= 0)
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
  th_server_stop(&s);
}

/* 9. 10,000 hand-offs between 16 waiters, the pub/sub connections killed
 * every 100 ms: no lost wake-up, hand-off p99 <= 5 ms */
static void test_t09_handoffs_pubsub_killed(void) {
  char args[256];
  snprintf(args, sizeof args,
           "--kind lock --procs 2 --threads 8 --hold-us 0 --sections %" PRId64
           " --duration 120000 --nemesis pubsub-kill --every 100", work(10000));
  run r;
  torture(&r, args);
  clean(&r);
  EXPECT(&r, "sections", >=, work(10000));
  EXPECT(&r, "timeouts", ==, 0); /* every waiter acquired: no lost wake-up */
  EXPECT(&r, "errors", ==, 0);
  EXPECT(&r, "f_pubsub_kill", >, 0);
  EXPECT(&r, "handoff_p99_us", <=, th_scaled_us(&srv[0], 5000));
}

/* 10. SCRIPT FLUSH every 200 ms under load */
static void test_t10_script_flush(void) {
  run r;
  torture(&r, "--kind lock --procs 4 --threads 4 --duration 5000 "
              "--nemesis flush --every 200");
  clean(&r);
  EXPECT(&r, "f_flush", >=, 10);
  EXPECT(&r, "errors", ==, 0);
  EXPECT(&r, "timeouts", ==, 0);
}

/* 11. an expirable-permit semaphore of 3, 16 workers, SIGKILLs */
static void test_t11_semaphore_kills(void) {
  run r;
  torture(&r, "--kind semaphore --permits 3 --procs 4 --threads 4 "
              "--duration 6000 --watchdog 1000 --nemesis kill --every 500");
  clean(&r);
  EXPECT(&r, "max_holders", <=, 3);
  EXPECT(&r, "max_holders", ==, 3); /* the permits were used */
  EXPECT(&r, "f_kill", >, 0);
  EXPECT(&r, "available_left", ==, 3);
}

/* 12. read-write, 80 % reads */
static void test_t12_rwlock(void) {
  run r;
  torture(&r, "--kind rw --read-pct 80 --procs 4 --threads 4 --duration 5000");
  clean(&r);
  EXPECT(&r, "errors", ==, 0);
  /* readers did share: in at least 1 % of the sections */
  EXPECT(&r, "shared_sections", >=, field(&r, "sections") / 100);
  EXPECT(&r, "keys_left", ==, 0);
}

/* 13. fair lock, 16 waiters, waiters killed in the queue */
static void test_t13_fair(void) {
  run r;
  /* one dead waiter at a time (kills 1.25-3.75 s apart, slot 1 s): two
   * dead ones next to each other in the queue would cost up to two slots */
  torture(&r, "--kind fair --procs 16 --threads 1 --slot 1000 --duration 8000 "
              "--nemesis kill-waiter --every 2500");
  clean(&r);
  EXPECT(&r, "fifo_violations", ==, 0);
  EXPECT(&r, "fifo_checked", >, 0);
  /* live waiters re-try every third of the 1 s slot: none loses its place
   * here (one that did stalled for a whole slot, or its entry was dropped) */
  EXPECT(&r, "fifo_requeued", ==, 0);
  EXPECT(&r, "f_kill_waiter", >, 0);
  EXPECT(&r, "errors", ==, 0);
  /* a dead waiter delays the queue by its slot + 100 ms at most */
  EXPECT(&r, "max_gap_us", <=, 1000000 + th_scaled_us(&srv[0], 100000));
  EXPECT(&r, "keys_left", ==, 0);
}

/* 29. the non-reentrant lock and fair lock: holders killed (the lease
 * frees the lock) and connections cut (commands and subscriptions come
 * back); the fair one's waiters killed, its FIFO order checked; then the
 * non-reentrant lock on a cluster whose slot is migrated and failed over */
static void test_t29_non_reentrant_kills(void) {
  run r;
  torture(&r, "--kind non-reentrant --procs 4 --threads 4 --duration 5000 "
              "--watchdog 1000 --nemesis kill,client-kill,pubsub-kill "
              "--every 700");
  clean(&r);
  EXPECT(&r, "f_kill", >, 0);
  EXPECT(&r, "keys_left", ==, 0);
  torture(&r, "--kind non-reentrant-fair --procs 8 --threads 1 --slot 1000 "
              "--duration 5000 --nemesis kill-waiter --every 1500");
  clean(&r);
  EXPECT(&r, "fifo_violations", ==, 0);
  EXPECT(&r, "fifo_checked", >, 0);
  EXPECT(&r, "f_kill_waiter", >, 0);
  EXPECT(&r, "keys_left", ==, 0);
  if (WORK_DIVISOR > 1)
    return; /* the sanitizer builds: the fault paths above */
  torture(&r, "--cluster --kind non-reentrant --procs 4 --threads 2 "
              "--duration 3000 --nemesis migrate,failover --every 300");
  clean(&r);
  EXPECT(&r, "f_migrate", >, 0);
  EXPECT(&r, "f_failover", >, 0);
  EXPECT(&r, "errors", ==, 0);
  EXPECT(&r, "keys_left", ==, 0);
}

/* 30. the spin lock: its waiters pause and try again instead of listening,
 * so a server restart (no persistence: the holds are lost, and told)
 * costs them a failed try at most; holders killed beside it; then async
 * acquires pausing on their engine's timer */
static void test_t30_spin_restarts(void) {
  run r;
  torture(&r, "--kind spin --procs 4 --threads 4 --duration 6000 "
              "--watchdog 1000 --nemesis kill,restart --every 1500");
  clean(&r);
  EXPECT(&r, "f_restart", >, 0);
  EXPECT(&r, "keys_left", ==, 0);
  torture(&r, "--kind spin --procs 2 --async 8 --duration 4000 "
              "--watchdog 1000 --nemesis restart --every 1500");
  clean(&r);
  EXPECT(&r, "f_restart", >, 0);
  EXPECT(&r, "keys_left", ==, 0);
}

/* 31. the grouped multi-lock (32 values, every worker the same set): kills
 * and cut connections on one server; then its name's slot migrated and
 * failed over on a cluster */
static void test_t31_group(void) {
  run r;
  torture(&r, "--kind group --procs 4 --threads 4 --duration 5000 "
              "--watchdog 1000 --nemesis kill,client-kill,pubsub-kill "
              "--every 700");
  clean(&r);
  EXPECT(&r, "f_kill", >, 0);
  EXPECT(&r, "keys_left", ==, 0);
  if (WORK_DIVISOR > 1)
    return; /* the sanitizer builds: the fault paths above */
  torture(&r, "--cluster --kind group --procs 4 --threads 2 --duration 3000 "
              "--nemesis migrate,failover --every 300");
  clean(&r);
  EXPECT(&r, "f_migrate", >, 0);
  EXPECT(&r, "f_failover", >, 0);
  EXPECT(&r, "errors", ==, 0);
  EXPECT(&r, "keys_left", ==, 0);
}

/* 32. Leader election (dlock-torture --kind election): every thread
 * campaigns, leads for its section and resigns, or is killed leading;
 * each worker process observes. No two leaders of one term, terms grow
 * from one leader to the next, each observer is told the changes in
 * order and misses no granted term unless its event says resync; a
 * deposed (paused) leader's guarded writes are refused. */
static void observed_clean(const run *r) {
  EXPECT(r, "observed", >, 0);
  EXPECT(r, "observed_disorder", ==, 0);
  EXPECT(r, "observed_missing", ==, 0);
}

static void test_t32_election(void) {
  run r;
  torture(&r, "--kind election --procs 4 --threads 3 --duration 6000 "
              "--watchdog 1000 --nemesis kill,client-kill,pubsub-kill,stop "
              "--every 600");
  clean(&r);
  observed_clean(&r);
  EXPECT(&r, "terms_repeated", ==, 0);
  EXPECT(&r, "terms_backwards", ==, 0);
  EXPECT(&r, "f_kill", >, 0);
  EXPECT(&r, "keys_left", ==, 0);
  if (WORK_DIVISOR > 1)
    return; /* the sanitizer builds: the fault paths above */
  torture(&r, "--kind election --procs 4 --threads 2 --duration 5000 "
              "--watchdog 1000 --hold-us 20000 --writes guarded "
              "--nemesis pause,kill --every 600");
  clean(&r);
  observed_clean(&r);
  EXPECT(&r, "f_pause", >, 0);
  EXPECT(&r, "stale_accepted", ==, 0);
  EXPECT(&r, "lost_updates", ==, 0);
  /* a killed leader is replaced within its watchdog lease (3 s) plus a
   * wake-up: bound 3.5 s (measured 2.0-3.0 s, the same with two CPU hogs:
   * the lease's end is the server's, the wake-up a few ms). Two workers,
   * one leading most of the time: about half the kills hit a leader. */
  torture(&r, "--kind election --procs 2 --threads 1 --duration 12000 "
              "--watchdog 3000 --hold-us 300000 --nemesis kill --every 1200");
  clean(&r);
  EXPECT(&r, "killed_in_section", >, 0);
  EXPECT(&r, "max_takeover_us", <, 3500000);
  printf("    a killed leader replaced after %.3f s at most\n",
         field(&r, "max_takeover_us") / 1e6);
  torture(&r, "--cluster --kind election --procs 4 --threads 2 --duration 3000 "
              "--nemesis migrate,failover,pubsub-kill --every 400");
  clean(&r);
  observed_clean(&r);
  EXPECT(&r, "terms_repeated", ==, 0);
  EXPECT(&r, "observed_resyncs", >, 0); /* subscriptions made again */
  EXPECT(&r, "f_failover", >, 0);
  /* Sentinel: t26 (a leader cut with its master) and test_sentinel */
}

/* 33. A server's clock jumps (modelled: tests/support/clock.h). Forward,
 * two leases at once while holders work 200-400 ms: their hashes vanish,
 * waiters get in, and each holder is told at its next renewal (a third of
 * the 1.5 s watchdog: bound 600 ms, measured 255 ms) or by its release;
 * every overlap's first holder is told (0 unreported), the ones not told
 * before the second entered are counted (no Redis lock can prevent them:
 * docs/reliability.md, "Clocks"). Back, 2 s at once, with holders killed:
 * nothing unsafe, a dead holder's lease lasts longer (printed). */
static void test_t33_server_clock(void) {
  run r;
  torture(&r, "--kind lock --procs 3 --threads 2 --duration 8000 "
              "--watchdog 1500 --hold-us 400000 --hold-min-us 200000 "
              "--nemesis clock-forward --every 1200");
  EXPECT(&r, "f_clock_forward", >, 0);
  EXPECT(&r, "told_after_jump", >, 0);
  EXPECT(&r, "max_told_after_jump_us", <, 600000);
  EXPECT(&r, "overlaps", ==, 0);
  EXPECT(&r, "worker_deaths", ==, 0);
  printf("    forward: %" PRId64 " holds told, within %.0f ms of the jump; "
         "%" PRId64 " overlaps, %" PRId64 " of them before the holder was "
         "told\n", field(&r, "told_after_jump"),
         field(&r, "max_told_after_jump_us") / 1e3,
         field(&r, "reported_overlaps"), field(&r, "untold_overlaps"));
  torture(&r, "--kind lock --procs 3 --threads 2 --duration 6000 "
              "--watchdog 1000 --nemesis kill,clock-back --clock-jump 2000 "
              "--every 700");
  clean(&r);
  EXPECT(&r, "f_clock_back", >, 0);
  printf("    back: a killed holder replaced after %.1f s at most (lease "
         "1 s)\n", field(&r, "max_takeover_us") / 1e6);
}

/* 34. The workers' wall clock jumps an hour forward or back (libfaketime,
 * their monotonic clock left alone, as an NTP step): no lease, wait,
 * watchdog tick or timeout of dlock moves (0 losses, 0 timeouts, 0
 * errors). A Redisson-behaving client's fair lock "now" is its wall clock:
 * 5 s of skew either way beside dlock waiters keeps the FIFO order (a
 * skew beyond the thread wait time breaks Redisson's order: measured in
 * docs/fair.md). */
static void test_t34_client_clock(void) {
  run r;
  torture(&r, "--kind lock --procs 3 --threads 3 --duration 5000 "
              "--watchdog 1000 --nemesis client-clock --every 400");
  clean(&r);
  EXPECT(&r, "f_client_clock", >, 0);
  EXPECT(&r, "lost_reports", ==, 0);
  EXPECT(&r, "timeouts", ==, 0);
  EXPECT(&r, "errors", ==, 0);
  torture(&r, "--kind fair --java 1 --procs 3 --threads 3 --duration 5000 "
              "--slot 1000 --nemesis client-clock --client-offset 5 "
              "--every 700");
  clean(&r);
  EXPECT(&r, "f_client_clock", >, 0);
  EXPECT(&r, "java_sections", >, 0);
  EXPECT(&r, "fifo_violations", ==, 0);
  EXPECT(&r, "fifo_checked", >, 0);
}

/* 35. RedLock over 5 masters, 3 of them with clocks that run fast
 * (modelled: small jumps every 10 ms), fixed 1 s leases held 900-980 ms.
 * dlock's validity is the lease less the drift (1 % + 2 ms) and the time
 * the acquire took: at 1 % the quorum's validity ends before any member's
 * key, 0 overlaps; at 10 % the fast members' keys end first and another
 * client takes the quorum while the holder still works (untold overlaps:
 * the checker sees what a too-small drift factor costs). */
static void test_t35_redlock_drift(void) {
  run r;
  torture(&r, "--kind redlock --servers 5 --procs 3 --threads 2 "
              "--duration 6000 --lease 1000 --hold-min-us 900000 "
              "--hold-us 980000 --drift 1 --drift-members 3");
  clean(&r);
  EXPECT(&r, "untold_overlaps", ==, 0);
  torture(&r, "--kind redlock --servers 5 --procs 3 --threads 2 "
              "--duration 6000 --lease 1000 --hold-min-us 900000 "
              "--hold-us 980000 --drift 10 --drift-members 3");
  EXPECT(&r, "untold_overlaps", >, 0);
  printf("    10 %% fast: %" PRId64 " untold overlaps in %" PRId64
         " sections\n", field(&r, "untold_overlaps"), field(&r, "sections"));
}

/* 22. the non-blocking API: each worker is one thread driving many owners
 * (dlock-torture --async N, completions through the client's queue), with
 * workers killed and connections cut; then a fair lock's async waiters in
 * FIFO order, and a read-write lock shared by async readers */
static void test_t22_async_owners(void) {
  run r;
  /* a killed holder's lease blocks the lock until it ends: 1 s, so that
   * two kills that hit holders (it happens) leave 3 of the 5 s */
  torture(&r, "--kind lock --procs 3 --async 40 --hold-us 500 --lease 1000 "
              "--duration 5000 --nemesis kill,client-kill,pubsub-kill "
              "--every 700");
  clean(&r);
  EXPECT(&r, "sections", >=, work(1000));
  EXPECT(&r, "f_kill", >, 0);
  EXPECT(&r, "keys_left", ==, 0);
  torture(&r, "--kind fair --procs 2 --async 16 --hold-us 300 --slot 1000 "
              "--duration 3000");
  clean(&r);
  EXPECT(&r, "fifo_violations", ==, 0);
  EXPECT(&r, "fifo_checked", >, 0);
  EXPECT(&r, "errors", ==, 0);
  EXPECT(&r, "keys_left", ==, 0);
  torture(&r, "--kind rw --read-pct 80 --procs 2 --async 30 --hold-us 500 "
              "--duration 3000");
  clean(&r);
  EXPECT(&r, "errors", ==, 0);
  EXPECT(&r, "shared_sections", >=, field(&r, "sections") / 100);
  EXPECT(&r, "keys_left", ==, 0);
}

/* 14. multi-locks {A,B} and {B,A} at once */
static void test_t14_multi_orders(void) {
  run r;
  torture(&r, "--kind multi --procs 4 --threads 4 --duration 5000");
  clean(&r);
  EXPECT(&r, "timeouts", ==, 0); /* no deadlock: every acquire got through */
  EXPECT(&r, "errors", ==, 0);
  EXPECT(&r, "starved", ==, 0);
  EXPECT(&r, "keys_left", ==, 0);
}

/* 15. hygiene: forced reconnects leave the fd count unchanged; CLIENT KILL
 * storms kill no worker by SIGPIPE (the workers keep SIGPIPE's default) */
static int count_fds(void) { return th_count_entries("/proc/self/fd"); }

static void test_t15_reconnects_keep_fds(void) {
  dlock_client *c = th_client(&srv[0], NULL);
  dlock_lock *l;
  CU_ASSERT_EQUAL_FATAL(dlock_reentrant_lock_new(c, "fds", NULL, &l), 0);
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(l, &st), DLOCK_OK);
  redisContext *admin = redisConnect("127.0.0.1", srv[0].port);
  CU_ASSERT_FATAL(admin && !admin->err);
  /* counted after the admin connection is open; a leak shows as growth
   * (the count may also drop: a sanitizer runtime or an earlier test may
   * hold an fd for a moment) */
  int before = count_fds();
  int64_t n = work(10000), killed = 0, failed = 0;
  for (int64_t i = 0; i < n; i++) {
    redisReply *r = redisCommand(admin, "CLIENT KILL TYPE normal SKIPME yes");
    if (r && r->type == REDIS_REPLY_INTEGER)
      killed += r->integer;
    if (r)
      freeReplyObject(r);
    int rc = DLOCK_EIO;
    for (int k = 0; k < 50 && rc != DLOCK_OK; k++) /* the call re-connects */
      if ((rc = dlock_lock_state_get(l, &st)) != DLOCK_OK)
        usleep(1000);
    failed += rc != DLOCK_OK;
  }
  int after = count_fds();
  redisFree(admin);
  printf("\n    %" PRId64 " reconnects (%" PRId64 " connections killed): fds %d "
         "before, %d after\n", n, killed, before, after);
  CU_ASSERT(killed >= n);
  CU_ASSERT_EQUAL(failed, 0);
  CU_ASSERT(after <= before);
  dlock_lock_free(l);
  dlock_client_close(c);
}

static void test_t15_no_sigpipe_under_kill_storms(void) {
  run r;
  torture(&r, "--kind lock --procs 4 --threads 4 --duration 4000 "
              "--nemesis client-kill,pubsub-kill --every 50");
  clean(&r);
  EXPECT(&r, "f_client_kill", >, 0);
  /* clean() asserts no worker died (by SIGPIPE or otherwise); a call whose
   * every attempt met a killed connection may fail with DLOCK_EIO */
}

/* 20. On a Redis Cluster (3 masters, a replica each): the name's slot
 * migrates to another master and its master fails over to its replica,
 * every 300 ms (randomised), under load: no overlap, no error, no timeout,
 * the fair lock's order kept; then the same beside the faults of the
 * standalone runs (worker kills, killed connections). */
static void test_t20_cluster_migrate_failover(void) {
  static const char *runs[] = {
      "--cluster --kind lock --procs 4 --threads 4 --duration 4000 "
      "--nemesis migrate,failover --every 300",
      "--cluster --kind fair --procs 6 --threads 2 --slot 1000 --duration 4000 "
      "--nemesis migrate,failover --every 300",
  };
  /* the sanitizer builds take the first run (the faults' code paths);
   * the plain build both (the read-write lock under every cluster fault:
   * t36) */
  size_t n = WORK_DIVISOR > 1 ? 1 : sizeof runs / sizeof runs[0];
  for (size_t i = 0; i < n; i++) {
    run r;
    torture(&r, runs[i]);
    clean(&r);
    EXPECT(&r, "keys_left", ==, 0);
    EXPECT(&r, "f_migrate", >, 0);
    EXPECT(&r, "f_failover", >, 0);
    EXPECT(&r, "errors", ==, 0);
    EXPECT(&r, "timeouts", ==, 0);
    if (i == 1) { /* no dlock waiter passed over; a Java one may leave
                     the queue by its client's doing (fifo_java_passed) */
      EXPECT(&r, "fifo_checked", >, 0);
      EXPECT(&r, "fifo_violations", ==, 0);
      printf("    %" PRId64 " queue pairs in order, %" PRId64 " with a Java "
             "waiter that left its place\n", field(&r, "fifo_checked"),
             field(&r, "fifo_java_passed"));
    }
  }
}

/* What a guarded-writes run under pauses must show: clean, pauses made,
 * no stale write landed, no update lost, the counter the writes accepted. */
static void guarded_clean(const run *r) {
  clean(r);
  EXPECT(r, "f_pause", >, 0);
  EXPECT(r, "stale_accepted", ==, 0);
  EXPECT(r, "lost_updates", ==, 0);
  EXPECT(r, "data_violation", ==, 0);
  CU_ASSERT_EQUAL(field(r, "data_counter"), field(r, "writes_accepted"));
  EXPECT(r, "keys_left", ==, 0);
}

/* 24. Fencing under process pauses (docs/fencing.md): 8 workers on a
 * fenced lock with a 300 ms lease read a counter in Redis, hold, and write
 * it + 1 with a log entry "token:value"; the pause nemesis SIGSTOPs a
 * holder between its read and its write for 1-2 s, then continues it.
 * With plain writes the checker finds the stale holder's writes landed
 * (the classic failure: it proves the nemesis bites); with guarded writes
 * none did, every refused writer was told DLOCK_EFENCED, and the counter is
 * the number of writes accepted. Then guarded writes with the watchdog
 * (200 ms lease) instead of a fixed lease, beside DEBUG SLEEP of the server
 * (50-300 ms: past the lease when over 200 ms). */
static void test_t24_pause_fencing(void) {
  const char *base = "--kind fenced --procs 4 --threads 2 --hold-us 20000 "
                     "--every 1000";
  char args[512];
  int64_t ms = work(6000) < 3000 ? 3000 : work(6000);
  run r;
  snprintf(args, sizeof args, "%s --lease 300 --duration %" PRId64
           " --nemesis pause --writes plain", base, ms);
  /* a paused holder writes stale data only when its write comes before
   * it is told of the loss (a race: a short sanitizer run has one or two
   * pauses): up to three runs for one */
  for (int i = 0; i < 3 && (i == 0 || field(&r, "stale_accepted") == 0); i++)
    torture(&r, args);
  printf("    plain writes: %" PRId64 " stale accepted, %" PRId64
         " lost updates (counter %" PRId64 ", %" PRId64 " writes)\n",
         field(&r, "stale_accepted"), field(&r, "lost_updates"),
         field(&r, "data_counter"), field(&r, "writes_accepted"));
  EXPECT(&r, "f_pause", >, 0);
  EXPECT(&r, "stale_accepted", >, 0);
  const char *guarded[] = {"--lease 300 --nemesis pause",
                           "--lease 0 --watchdog 200 --nemesis pause,sleep"};
  size_t n = WORK_DIVISOR > 1 ? 1 : 2;
  for (size_t i = 0; i < n; i++) {
    snprintf(args, sizeof args, "%s %s --duration %" PRId64 " --writes guarded",
             base, guarded[i], ms);
    /* a refusal needs a paused holder that writes before it is told of
     * its loss, the same race: up to three runs for one, each clean */
    for (int k = 0; k < 3 && (k == 0 || field(&r, "writes_refused") == 0); k++) {
      torture(&r, args);
      guarded_clean(&r);
      EXPECT(&r, "errors", ==, 0); /* every refusal was DLOCK_EFENCED */
    }
    EXPECT(&r, "writes_refused", >, 0);
  }
}

/* 24, on a cluster: the same guarded writes, the name's slot migrated and
 * failed over beside the pauses. At least 5 s under the sanitizers too: a
 * failover with its replica's resync takes a second or two of the run, and
 * the three faults come in a random order (a 3 s TSan run once ended
 * before its pause). */
static void test_t24_pause_fencing_cluster(void) {
  char args[512];
  snprintf(args, sizeof args, "--cluster --kind fenced --procs 4 --threads 2 "
           "--hold-us 20000 --lease 300 --duration %" PRId64 " --writes "
           "guarded --nemesis pause,migrate,failover --every 700",
           work(6000) < 5000 ? 5000 : work(6000));
  run r;
  torture(&r, args);
  guarded_clean(&r);
}

/* 25. A client cut from its server (a partition between the holder's
 * address and the server's; docs/reliability.md): the server listens on
 * 127.0.0.2 (and 127.0.0.1, the test's own unpartitioned path), the holder
 * connects from 127.0.0.3, a newcomer from 127.0.0.4 waits for the lock.
 * nftables drops everything between 127.0.0.3 and 127.0.0.2. The holder's
 * watchdog (1.5 s lease) cannot renew: it must be told (lost callback)
 * before the newcomer is granted the lock, and within the lease of the
 * cut. Then the same for `dlock run`: its command must get the lost signal
 * before the newcomer's grant. */
static _Atomic int64_t t25_lost_us;
static void t25_on_lost(void *d, const char *n, size_t l, uint64_t o,
                        dlock_lost_reason r) {
  atomic_store(&t25_lost_us, th_now_us());
}

static int64_t realtime_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* nftables rules for this process (partition.h), its table made or the
 * tables of dead processes swept; else the test fails, saying why. */
static void need_partitions(void) {
  char why[256];
  if (part_init(why, sizeof why) != 0) {
    printf("\n    partitions cannot run here: %s\n", why);
    CU_FAIL_FATAL("partitions cannot run here (nftables)");
  }
}

/* One round: name's holder h cut from the server while newcomer n waits;
 * the newcomer's grant (its th_now_us) into *granted_us. */
static void t25_newcomer(th_server *s, dlock_lock *n, const char *name,
                         th_acquirer *a) {
  *a = (th_acquirer){.lock = n, .wait_ms = 10000, .lease_ms = 5000, .rc = -1};
  th_acquirer_start(a);
  char channel[128];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  CU_ASSERT(th_wait_numsub(s, channel, 1, 3000)); /* it waits */
}

static void test_t25_client_cut(void) {
  need_partitions();
  th_server s;
  CU_ASSERT_EQUAL_FATAL(
      th_server_start(&s, "--bind 127.0.0.1 127.0.0.2 --protected-mode no"), 0);
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.2:%d", s.port);
  dlock_client_opts ho = DLOCK_CLIENT_OPTS_INIT, no = DLOCK_CLIENT_OPTS_INIT;
  ho.source_addr = "127.0.0.3";
  ho.watchdog_timeout_ms = 1500;
  ho.command_timeout_ms = 400;
  ho.connect_timeout_ms = 400;
  ho.on_lost = t25_on_lost;
  no.source_addr = "127.0.0.4";
  dlock_client *hc = NULL, *nc = NULL;
  TH_ASSERT_RC(dlock_client_open(url, &ho, &hc), DLOCK_OK);
  TH_ASSERT_RC(dlock_client_open(url, &no, &nc), DLOCK_OK);
  int rounds = WORK_DIVISOR > 1 ? 2 : 4, told_first = 0;
  int64_t worst_detect = 0, least_margin = INT64_MAX;
  for (int i = 0; i < rounds && hc && nc; i++) {
    char name[64];
    snprintf(name, sizeof name, "t25:%d", i);
    dlock_lock *h = NULL, *n = NULL;
    TH_ASSERT_RC(dlock_reentrant_lock_new(hc, name, NULL, &h), DLOCK_OK);
    TH_ASSERT_RC(dlock_reentrant_lock_new(nc, name, NULL, &n), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(h, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
    atomic_store(&t25_lost_us, 0);
    th_acquirer a;
    t25_newcomer(&s, n, name, &a);
    int64_t cut = th_now_us();
    CU_ASSERT_EQUAL(part_cut("127.0.0.3", "127.0.0.2"), 0);
    th_acquirer_join(&a);
    TH_ASSERT_RC(a.rc, DLOCK_OK);
    for (int64_t end = th_now_ms() + 3000;
         atomic_load(&t25_lost_us) == 0 && th_now_ms() < end;)
      usleep(2000);
    int64_t lost = atomic_load(&t25_lost_us), granted = a.got_ms * 1000;
    CU_ASSERT(lost != 0);
    told_first += lost != 0 && lost <= granted;
    if (lost - cut > worst_detect)
      worst_detect = lost - cut;
    if (granted - lost < least_margin)
      least_margin = granted - lost;
    CU_ASSERT(lost != 0 && lost - cut <= 1500 * 1000); /* within the lease */
    CU_ASSERT_EQUAL(part_heal(), 0);
    int rc = dlock_release(h); /* gone: ELOST (or EIO while reconnecting) */
    CU_ASSERT(rc == DLOCK_ELOST || rc == DLOCK_EIO);
    dlock_lock_free(h);
    dlock_lock_free(n);
  }
  printf("\n    %d rounds: told before the newcomer's grant in %d; the loss "
         "reported %" PRId64 " ms after the cut at most (lease 1500), %"
         PRId64 " ms before the grant at least\n", rounds, told_first,
         worst_detect / 1000, least_margin / 1000);
  CU_ASSERT_EQUAL(told_first, rounds);
  dlock_client_close(hc);

  /* dlock run: its command gets the lost signal before the newcomer is in */
  const char *bin = getenv("DLOCK_BIN");
  char dir[] = "/tmp/dlock-t25-XXXXXX", cmd[1024], out[256];
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  snprintf(cmd, sizeof cmd,
           "'%s' --source-addr 127.0.0.3 --redis %s run --watchdog 1500ms t25:run "
           "-- sh -c 'trap \"date +%%s%%N > %s/lost; exit 0\" TERM; "
           "touch %s/ready; while :; do sleep 0.02; done' >/dev/null 2>&1 &",
           bin, url, dir, dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
  char ready[128], lostf[128];
  snprintf(ready, sizeof ready, "%s/ready", dir);
  snprintf(lostf, sizeof lostf, "%s/lost", dir);
  for (int64_t end = th_now_ms() + 5000; access(ready, F_OK) != 0 && th_now_ms() < end;)
    usleep(5000);
  dlock_lock *n = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(nc, "t25:run", NULL, &n), DLOCK_OK);
  th_acquirer a;
  t25_newcomer(&s, n, "t25:run", &a);
  CU_ASSERT_EQUAL(part_cut("127.0.0.3", "127.0.0.2"), 0);
  th_acquirer_join(&a);
  int64_t granted = realtime_us();
  TH_ASSERT_RC(a.rc, DLOCK_OK);
  for (int64_t end = th_now_ms() + 3000; access(lostf, F_OK) != 0 && th_now_ms() < end;)
    usleep(5000);
  snprintf(cmd, sizeof cmd, "cat %s/lost", dir);
  CU_ASSERT_EQUAL(th_shell(cmd, out, sizeof out), 0);
  int64_t signalled = atoll(out) / 1000;
  printf("    dlock run's command signalled %" PRId64 " ms before the "
         "newcomer's grant was seen\n", (granted - signalled) / 1000);
  CU_ASSERT(signalled > 0 && signalled <= granted);
  CU_ASSERT_EQUAL(part_heal(), 0);
  dlock_release(n);
  dlock_lock_free(n);
  dlock_client_close(nc);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  th_shell(cmd, out, sizeof out);
  th_server_stop(&s);
}

/* 25, many cuts: dlock-torture --split on one server (its workers on
 * addresses of their own, the server on 127.0.0.2): every ~0.5 s after the
 * last, once a worker holds, it is cut from the server just before its
 * next renewal, both ways or one way (its packets only, or the server's
 * only: its renewals arrive and renew, their answers never come back), for
 * its lease (1.5 s) and 0.5-1.5 s more. Every cut holder must be told
 * before another worker enters: 0 untold overlaps. */
static void test_t25_client_cuts_torture(void) {
  run r;
  torture(&r, "--split --nemesis partition --kind lock --procs 4 --threads 2 "
              "--watchdog 1500 --command-timeout 500 --hold-us 2000000 "
              "--duration 12000 --every 500");
  EXPECT(&r, "f_partition", >=, 2);
  EXPECT(&r, "untold_overlaps", ==, 0);
  EXPECT(&r, "overlaps", ==, 0);
  EXPECT(&r, "worker_deaths", ==, 0);
  EXPECT(&r, "lost_reports", >=, 1);
  printf("    %" PRId64 " cuts (both ways %" PRId64 ", to the server %" PRId64
         ", from it %" PRId64 "), %" PRId64 " lost reports\n",
         field(&r, "f_partition"), field(&r, "cuts_both"),
         field(&r, "cuts_to_server"), field(&r, "cuts_from_server"),
         field(&r, "lost_reports"));
}

/* The nftables tables of partitioning processes (dlock_part_PID): how
 * many belong to processes that are gone (leftovers), and whether pid's
 * exists. */
static int part_tables(pid_t pid, int *has) {
  FILE *p = popen("nft list tables 2>/dev/null", "r");
  char line[256];
  int n = 0;
  *has = 0;
  while (p && fgets(line, sizeof line, p)) {
    long t = 0;
    if (sscanf(line, "table inet dlock_part_%ld", &t) == 1) {
      n += t != (long)pid && kill((pid_t)t, 0) != 0;
      *has |= t == (long)pid;
    }
  }
  if (p)
    pclose(p);
  return n;
}

/* Start dlock-torture cutting clients on one server and wait until its
 * table exists (bounded: 10 s): its pid. */
static pid_t partitioning_torture(void) {
  const char *bin = getenv("DLOCK_TORTURE");
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(bin, bin, "--split", "--nemesis", "partition", "--kind", "lock",
          "--procs", "2", "--threads", "1", "--duration", "30000", "--every",
          "200", "--watchdog", "1500", (char *)NULL);
    _exit(127);
  }
  int has = 0;
  for (int64_t end = th_now_ms() + 10000; pid > 0 && !has && th_now_ms() < end;
       usleep(20000))
    part_tables(pid, &has);
  CU_ASSERT(has);
  return pid;
}

/* No table of the tests is left after a run, killed or not: a run that
 * ends removes its own (t25_client_cuts_torture's above left none), a
 * SIGTERM removes it in the handler, and a SIGKILL's is swept by the next
 * partitioning process's start. */
static void test_t25_tables_removed(void) {
  CU_ASSERT_PTR_NOT_NULL_FATAL(getenv("DLOCK_TORTURE"));
  int has;
  CU_ASSERT_EQUAL(part_tables(0, &has), 0); /* the runs before left none */
  pid_t pid = partitioning_torture();
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
  part_tables(pid, &has);
  CU_ASSERT(!has); /* removed in the handler */
  pid = partitioning_torture();
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  part_tables(pid, &has);
  CU_ASSERT(has); /* killed: nothing could clean up ... */
  need_partitions();
  part_fini();
  part_tables(pid, &has);
  CU_ASSERT(!has); /* ... until the next start swept it */
  CU_ASSERT_EQUAL(part_tables(0, &has), 0);
}

/* 28. Slow and lossy links between the workers and the server: nftables
 * drops a share of the packets between 127.0.0.3 and 127.0.0.2 at random,
 * both ways, and/or a relay on 127.0.0.2 (tests/support/delay.h: no netem
 * here) holds every chunk, both ways, a delay plus a random jitter. Every
 * run: 0 overlaps, 0 errors, 0 timeouts, no key left, the fair lock's
 * order kept; the latencies printed against the link's delay (a hand-off
 * is at least four one-way delays: the release to the server, its message
 * to the waiter, the waiter's try, its answer). */
static void test_t28_slow_lossy_links(void) {
  static const struct {
    const char *args, *link;
    int fair;
  } runs[] = {
      {"--kind lock --procs 4 --threads 2 --loss 3", "3 % loss", 0},
      {"--kind fair --procs 4 --threads 2 --slot 1000 --loss 3", "3 % loss", 1},
      {"--kind lock --procs 4 --threads 2 --delay 20:10 --watchdog 3000",
       "20-30 ms delay", 0},
      {"--kind fair --procs 4 --threads 2 --slot 3000 --watchdog 3000 "
       "--wait 30000 --delay 100:100 --loss 2", "100-200 ms delay, 2 % loss", 1},
  };
  size_t n = sizeof runs / sizeof runs[0];
  for (size_t i = 0; i < n; i++) {
    char args[256];
    snprintf(args, sizeof args, "%s --duration %" PRId64, runs[i].args,
             work(6000) < 3000 ? 3000 : work(6000));
    run r;
    torture(&r, args);
    clean(&r);
    EXPECT(&r, "errors", ==, 0);
    EXPECT(&r, "timeouts", ==, 0);
    EXPECT(&r, "keys_left", ==, 0);
    if (runs[i].fair) {
      EXPECT(&r, "fifo_checked", >, 0);
      EXPECT(&r, "fifo_violations", ==, 0);
    }
    printf("    %s: acquire p50 %" PRId64 " us, p99 %" PRId64
           " us, hand-off p50 %" PRId64 " us\n", runs[i].link,
           field(&r, "acquire_p50_us"), field(&r, "acquire_p99_us"),
           field(&r, "handoff_p50_us"));
  }
}

/* 26 and 27. Split brain: the name's master and some workers cut from the
 * other nodes and the other workers (dlock-torture --split --nemesis
 * partition: every node and worker on a loopback address of its own,
 * nftables between them) until a replica is promoted, and a lease more;
 * the cut lands just before the holder's next renewal, which only the cut
 * master sees. Without the replica guard the partition bites: the holder
 * renews on the old master and works on untold while a worker on the
 * other side holds on the promoted replica (untold_overlaps > 0: the
 * checker proves the fault is real). With it (replica_sync_ms 300) no
 * renewal counts that no replica acknowledged, so the holder is told
 * before the promoted replica's copy expires: 0 untold overlaps.
 * Sections of 5-6 s, watchdog 3 s, command timeout 1 s. */
static void split_brain(const char *topology, const char *guarded_kind,
                        int prove) {
  need_partitions();
  part_fini();
  /* Without the guard one cut bites most of the time, not always (the
   * long runs: 8 of 9 cuts on a cluster, where the minority master stops
   * taking writes after cluster-node-timeout and the renewal after the cut
   * may miss that window): up to 3 runs, until one bites. */
  for (int guard = prove ? 0 : 1, tries = 1; guard < 2; guard++, tries = 1) {
    char args[512];
    snprintf(args, sizeof args,
             "--%s --split --nemesis partition --kind %s --procs 4 "
             "--threads 1 --watchdog 3000 --command-timeout 1000 "
             "--hold-us 6000000 --hold-min-us 5000000 --duration 14000 "
             "--every 1000%s", topology, guard ? guarded_kind : "lock",
             guard ? " --replica-sync 300" : "");
    run r;
    torture(&r, args);
    while (!guard && tries < 3 && field(&r, "untold_overlaps") == 0) {
      printf("    no untold overlap in run %d: again\n", tries++);
      torture(&r, args);
    }
    EXPECT(&r, "f_partition", >=, 1);
    EXPECT(&r, "max_promote_ms", >, 0); /* a replica was promoted */
    EXPECT(&r, "worker_deaths", ==, 0);
    EXPECT(&r, "sections", >, 0);
    if (guard) {
      EXPECT(&r, "untold_overlaps", ==, 0);
      EXPECT(&r, "overlaps", ==, 0);
      EXPECT(&r, "observed_disorder", ==, 0); /* an election's observers */
      EXPECT(&r, "observed_missing", ==, 0);
    } else {
      EXPECT(&r, "untold_overlaps", >, 0);
    }
    printf("    guard %s: %" PRId64 " untold overlaps, %" PRId64
           " told in time, promotion after %" PRId64 " ms\n",
           guard ? "on" : "off", field(&r, "untold_overlaps"),
           field(&r, "reported_overlaps") - field(&r, "untold_overlaps") +
               field(&r, "overlaps"),
           field(&r, "max_promote_ms"));
  }
}

/* With the guard, t26 runs an election (t32): its leader, cut with its
 * master, is told it lost the leadership before the promoted side elects
 * another (the election is a lock underneath: the lock's guarded run is
 * t27's). That the cut bites without the guard is shown once, on the
 * cluster (t27: the same partition, the same checker); on Sentinel the
 * guarded run shows a replica promoted behind the cut. */
static void test_t26_sentinel_split_brain(void) {
  split_brain("sentinel", "election", 0);
}
static void test_t27_cluster_master_cut(void) {
  split_brain("cluster", "lock", 1);
}

/* 21. Sentinel: SENTINEL FAILOVER and kill -9 of the master (started again:
 * it comes back as a replica) while holders and waiters run. A grant made
 * on the old master after the promotion is lost with that master's
 * writes: its holder is told (lost callback or DLOCK_ELOST), never
 * silently; no two holders not told overlap. The fair lock's order is not
 * checked across these failovers: the queue changes the old master took
 * after the promotion are lost with the rest of its writes. */
static void test_t21_sentinel_failover(void) {
  static const char *runs[] = {
      "--sentinel --kind lock --procs 4 --threads 4 --duration 9000 "
      "--nemesis failover,restart --every 1000",
      "--sentinel --kind fair --procs 6 --threads 2 --slot 1000 --duration 9000 "
      "--nemesis failover,restart,pubsub-kill,kill-waiter --every 700",
      "--sentinel --kind rw --read-pct 50 --procs 4 --threads 4 --duration 9000 "
      "--nemesis failover,restart,kill,client-kill --every 700",
  };
  size_t n = WORK_DIVISOR > 1 ? 1 : sizeof runs / sizeof runs[0];
  for (size_t i = 0; i < n; i++) {
    run r;
    torture(&r, runs[i]);
    clean(&r);
    /* at most one failover per 4 s, drawn among the other faults */
    CU_ASSERT(field(&r, "f_failover") + field(&r, "f_restart") >= 1);
    EXPECT(&r, "overlaps", ==, 0);
    EXPECT(&r, "counter_violation", ==, 0);
    EXPECT(&r, "keys_left", ==, 0);
    EXPECT(&r, "sections", >, 0);
  }
}

/* 36. Every cluster fault at once, briefly (scripts/longrun is the long
 * version, docs/reliability.md "The long run"): a read-write lock on a
 * cluster with replicas, every node and worker on an address of its own,
 * the replica guard; workers killed and paused past their lease,
 * connections killed, the name's slot migrated, its master failed over,
 * killed and restarted, stopped, cut off with the holder's side, its links
 * made lossy. Each fault comes once per round in a random order, and the
 * slow ones (restart, stop, partition, pause: seconds each) leave this run
 * two or more:
 * no overlap whose first holder was not told before the second entered,
 * but for a paused holder's (nothing tells a stopped process), and every
 * holder told at last. Plain build only (a long run's share). */
static int64_t t36_faults(const run *r) {
  static const char *f[] = {"f_kill", "f_client_kill", "f_pubsub_kill",
                            "f_migrate", "f_failover", "f_restart", "f_stop",
                            "f_pause", "f_partition", "f_slow"};
  int64_t faults = 0;
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    faults += field(r, f[i]);
  return faults;
}

/* A slow fault drawn first (a forced takeover: 20 s) can leave a run one
 * fault: up to 3 runs until one mixes two or more, each checked whole. */
static void test_t36_cluster_every_fault(void) {
  need_partitions();
  run r;
  for (int tries = 0; tries < 3; tries++) {
    torture(&r, "--cluster --split --replica-sync 300 --kind rw --read-pct 50 "
                "--procs 4 --threads 2 --watchdog 3000 --duration 9000 "
                "--every 300 --nemesis kill,client-kill,pubsub-kill,migrate,"
                "failover,restart,stop,pause,partition,slow");
    clean(&r);
    EXPECT(&r, "untold_overlaps", ==, 0);
    EXPECT(&r, "keys_left", ==, 0);
    if (t36_faults(&r) >= 2)
      break;
    printf("    %" PRId64 " fault in run %d: again\n", t36_faults(&r), tries + 1);
  }
  CU_ASSERT(t36_faults(&r) >= 2);
  printf("    %" PRId64 " faults, %" PRId64 " sections, %" PRId64
         " overlaps of paused holders\n", t36_faults(&r), field(&r, "sections"),
         field(&r, "paused_overlaps"));
}

static int suite_init(void) {
  for (int i = 0; i < 5; i++)
    if (th_server_start(&srv[i], NULL) != 0)
      return 1;
  return 0;
}

static int suite_clean(void) {
  for (int i = 0; i < 5; i++)
    th_server_stop(&srv[i]);
  return 0;
}

/* a run of dlock beside Java clients: clean, and both sides got in */
static void clean_both_sides(const run *r) {
  clean(r);
  EXPECT(r, "java_sections", >, 0);
  EXPECT(r, "java_sections", <, field(r, "sections"));
}

/* 19. dlock and Redisson-behaving clients (tests/interop) on one name */
static void test_t19_java_beside_dlock(void) {
  static const char *runs[] = {
      "--kind fair --procs 4 --threads 2 --java 1 --slot 1000 --duration 4000",
      "--kind rw --read-pct 50 --procs 3 --threads 2 --java 1 --duration 3000",
      "--kind lock --procs 3 --threads 2 --java 1 --duration 3000",
  };
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    run r;
    torture(&r, runs[i]);
    clean_both_sides(&r);
    EXPECT(&r, "errors", ==, 0);
    EXPECT(&r, "fifo_violations", ==, 0);
    EXPECT(&r, "keys_left", ==, 0);
    EXPECT(&r, "latches_left", ==, 0);
    if (i == 0)
      EXPECT(&r, "fifo_checked", >, 0);
  }
}

/* 37. Real Redisson clients (tests/interop/java: one JVM per odd worker,
 * all its threads Java; dlock in the even ones) on one lock, fair lock and
 * read-write lock, a Java and a C worker killed by turns, connections and
 * pub/sub connections killed (the fair lock: pub/sub connections; a
 * command connection killed costs a Redisson thread its 3 s response
 * timeout, and with JVMs restarting and dead waiters keeping their
 * places a short run could end with no Java grant; 9 to 1,344 in 15 runs
 * of 10-12 s here): 0 overlaps, the counter whole, the fair
 * order kept across both kinds of waiters. The Java sections' times are
 * the JVM's own (System.nanoTime, CLOCK_MONOTONIC), taken at its grant
 * and before its unlock. A Java waiter passed over is counted apart
 * (fifo_java_passed): Redisson's tryLock takes its own entry out when its
 * subscription fails and queues again at the tail. Each kind on one
 * Redisson version here; the
 * longer run of docs/reliability.md takes both. Redisson's own errors
 * under connection kills (a response timeout of a command whose
 * connection died) are counted, not asserted. */
static void test_t37_java_mixed(void) {
  static const char *runs[] = {
      "--kind lock --jvm 4.7.0 --procs 4 --threads 3 --duration 8000 "
      "--nemesis kill,client-kill,pubsub-kill --every 800",
      "--kind fair --jvm 3.52.0 --procs 4 --threads 2 --slot 1000 "
      "--duration 12000 --nemesis kill,kill-waiter,pubsub-kill --every 2500",
      "--kind rw --jvm 4.7.0 --read-pct 60 --procs 4 --threads 3 "
      "--duration 8000 --nemesis kill,client-kill,pubsub-kill --every 800",
  };
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    run r;
    torture(&r, runs[i]);
    clean_both_sides(&r);
    EXPECT(&r, "untold_overlaps", ==, 0);
    EXPECT(&r, "java_kills", >, 0);
    EXPECT(&r, "java_kills", <, field(&r, "f_kill") + field(&r, "f_kill_waiter"));
    if (i == 1) { /* no dlock waiter passed over; a Java one may leave
                     the queue by its client's doing (fifo_java_passed) */
      EXPECT(&r, "fifo_checked", >, 0);
      EXPECT(&r, "fifo_violations", ==, 0);
      printf("    %" PRId64 " queue pairs in order, %" PRId64 " with a Java "
             "waiter that left its place\n", field(&r, "fifo_checked"),
             field(&r, "fifo_java_passed"));
    }
    printf("    %" PRId64 " sections, %" PRId64 " of them Java's; %" PRId64
           " kills, %" PRId64 " of a JVM; %" PRId64 " errors\n",
           field(&r, "sections"), field(&r, "java_sections"),
           field(&r, "f_kill") + field(&r, "f_kill_waiter"),
           field(&r, "java_kills"), field(&r, "errors"));
  }
}

static void add(void) {
  CU_pSuite s = CU_add_suite("reliability", suite_init, suite_clean);
  CU_add_test(s, "t00_checker_sees_overlaps", test_t00_checker_sees_overlaps);
  CU_add_test(s, "t00_checker_sees_readers_writers_permits",
              test_t00_checker_sees_readers_writers_permits);
  CU_add_test(s, "t00_checker_sees_fifo_inversions",
              test_t00_checker_sees_fifo_inversions);
  CU_add_test(s, "t00_checker_fails_a_broken_lock",
              test_t00_checker_fails_a_broken_lock);
  CU_add_test(s, "t00_timeline_draws_a_run", test_t00_timeline_draws_a_run);
  CU_add_test(s, "t01_lock_8x8", test_t01_lock_8x8);
  CU_add_test(s, "t02_lock_kills", test_t02_lock_kills);
  CU_add_test(s, "t03_redlock_subsets", test_t03_redlock_subsets);
  CU_add_test(s, "t04_redlock_two_stopped", test_t04_redlock_two_stopped);
  CU_add_test(s, "t04_redlock_two_blackholed", test_t04_redlock_two_blackholed);
  CU_add_test(s, "t04_redlock_two_stopped_one_engine",
              test_t04_redlock_two_stopped_one_engine);
  CU_add_test(s, "t05_redlock_three_down", test_t05_redlock_three_down);
  CU_add_test(s, "t06_watchdog_cpu_starved", test_t06_watchdog_cpu_starved);
  CU_add_test(s, "t07_restart_reports_loss", test_t07_restart_reports_loss);
  CU_add_test(s, "t08_server_stopped", test_t08_server_stopped);
  CU_add_test(s, "t09_handoffs_pubsub_killed", test_t09_handoffs_pubsub_killed);
  CU_add_test(s, "t10_script_flush", test_t10_script_flush);
  CU_add_test(s, "t11_semaphore_kills", test_t11_semaphore_kills);
  CU_add_test(s, "t12_rwlock", test_t12_rwlock);
  CU_add_test(s, "t13_fair", test_t13_fair);
  CU_add_test(s, "t29_non_reentrant_kills", test_t29_non_reentrant_kills);
  CU_add_test(s, "t30_spin_restarts", test_t30_spin_restarts);
  CU_add_test(s, "t31_group", test_t31_group);
  CU_add_test(s, "t32_election", test_t32_election);
  CU_add_test(s, "t33_server_clock", test_t33_server_clock);
  CU_add_test(s, "t34_client_clock", test_t34_client_clock);
  CU_add_test(s, "t35_redlock_drift", test_t35_redlock_drift);
  CU_add_test(s, "t36_cluster_every_fault", test_t36_cluster_every_fault);
  CU_add_test(s, "t19_java_beside_dlock", test_t19_java_beside_dlock);
  CU_add_test(s, "t37_java_mixed", test_t37_java_mixed);
  CU_add_test(s, "t20_cluster_migrate_failover",
              test_t20_cluster_migrate_failover);
  CU_add_test(s, "t21_sentinel_failover", test_t21_sentinel_failover);
  CU_add_test(s, "t14_multi_orders", test_t14_multi_orders);
  CU_add_test(s, "t22_async_owners", test_t22_async_owners);
  CU_add_test(s, "t23_durable_restarts", test_t23_durable_restarts);
  CU_add_test(s, "t24_pause_fencing", test_t24_pause_fencing);
  CU_add_test(s, "t24_pause_fencing_cluster", test_t24_pause_fencing_cluster);
  CU_add_test(s, "t25_client_cut", test_t25_client_cut);
  CU_add_test(s, "t25_client_cuts_torture", test_t25_client_cuts_torture);
  CU_add_test(s, "t25_tables_removed", test_t25_tables_removed);
  CU_add_test(s, "t26_sentinel_split_brain", test_t26_sentinel_split_brain);
  CU_add_test(s, "t27_cluster_master_cut", test_t27_cluster_master_cut);
  CU_add_test(s, "t28_slow_lossy_links", test_t28_slow_lossy_links);
  CU_add_test(s, "t15_reconnects_keep_fds", test_t15_reconnects_keep_fds);
  CU_add_test(s, "t15_no_sigpipe_under_kill_storms",
              test_t15_no_sigpipe_under_kill_storms);
}

int main(int argc, char **argv) { return th_main(argc, argv, add, NULL); }
