/* Allocation failure (docs/reliability.md "Out of memory"): for a path,
 * the N-th allocation of the whole process after the path starts fails
 * (tests/support/failalloc.h: the library's, hiredis's, libuv's,
 * OpenSSL's, the C library's, on every thread), for N = 1, 2, ... until a
 * run makes no allocation fail. Each run: no crash; DLOCK_OK or
 * DLOCK_ENOMEM with a message; after an error nothing of the call is left
 * on the server; and once allocations succeed again the client (and the
 * handle) works. The library's paths run under ASan, the tool's in the
 * plain build (api_sweeps). The ASan build adds that nothing the suite's own
 * process did leaked (LSan at its exit; a child leaves by _exit). Bounded: SWEEP_MAX runs and SWEEP_MS
 * a path. DLOCK_ALLOC_FROM=N starts the sweeps at N (to debug one);
 * DLOCK_ALLOC_SAY=1 prints every run's failure. */
#include <pthread.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "failalloc.h"
#include "harness.h"

#define SWEEP_MAX 3000
#define SWEEP_MS 60000

static th_server srv;
static dlock_client *cl; /* open throughout: the engine's global set-up done */

static int suite_init(void) {
  if (th_suite_open(&srv, &cl) != 0)
    return 1;
  return 0;
}
static dlock_client *cw;
static int suite_clean(void) {
  if (cw)
    dlock_client_close(cw);
  return th_suite_close(&srv, cl);
}

static long sweep_from(void) {
  const char *from = getenv("DLOCK_ALLOC_FROM");
  return from ? atol(from) : 1;
}

/* An async outcome's words (a run that ends with one sets them), else
 * the blocking call's: dlock_errmsg(). */
static char said[512];

static int says(int rc, const char *msg) {
  snprintf(said, sizeof said, "%s", msg);
  return rc;
}

static const char *words(void) { return said[0] ? said : dlock_errmsg(); }

/* The library's paths are swept under ASan (it checks every block, and
 * LSan finds what a failed call leaked); the tool's in the plain build
 * (preloading the allocator needs a program without ASan's runtime): each
 * sweep runs once in the suite's two builds. DLOCK_ALLOC_ALL=1 sweeps
 * the library's paths in the plain build too. */
static int api_sweeps(const char *what) {
#ifndef __SANITIZE_ADDRESS__
  if (!getenv("DLOCK_ALLOC_ALL")) {
    printf("[%s: swept under ASan] ", what);
    return 0;
  }
#endif
  (void)what;
  return 1;
}

/* rc is a code a failed allocation may give: DLOCK_OK (the call got by)
 * or DLOCK_ENOMEM, with words. */
static int acceptable(int rc) {
  if (rc == DLOCK_OK)
    return 1;
  return rc == DLOCK_ENOMEM && words()[0] != '\0';
}

/* ---- client open and close ------------------------------------------- */

/* libuv aborts by design when an allocation of its own fails while a
 * loop is set up (uv_loop_init) or its descriptor table grows; dlock grows
 * that table at open (src/core/engine.c), so this can happen only in
 * dlock_client_open. Each open therefore runs in a child of its own: an
 * abort whose stack has a frame in libuv exits FAILALLOC_LIBUV_ABORT, any
 * other abort or crash is a failure. */
/* a crash in a child: its stack on stderr, then the signal's status */
static void on_crash(int sig) {
  fa_disarm();
  void *frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  _exit(128 + sig);
}

static void test_client_open(void) {
  if (!api_sweeps("client open"))
    return;
  int64_t end = th_now_ms() + SWEEP_MS;
  long n, aborts = 0, bad = 0;
  for (n = sweep_from(); n <= SWEEP_MAX && th_now_ms() < end; n++) {
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
      fa_tell_libuv_aborts();
      signal(SIGSEGV, on_crash);
      dlock_client *c = NULL;
      fa_arm(n, 0);
      int rc = dlock_client_open(srv.url, NULL, &c);
      long failed = fa_disarm();
      if (!acceptable(rc)) {
        fprintf(stderr, "\n  client open: allocation %ld failed: %s (%s): %s", n,
                dlock_strerror(rc), dlock_errname(rc), dlock_errmsg());
        _exit(1);
      }
      if (rc == DLOCK_OK) { /* a client that opened works */
        dlock_lock *l;
        rc = dlock_reentrant_lock_new(c, th_name("open"), NULL, &l);
        if (rc == DLOCK_OK && (rc = dlock_acquire(l, 0, 30000)) == DLOCK_OK)
          rc = dlock_release(l);
        if (rc == DLOCK_OK)
          dlock_lock_free(l);
        dlock_client_close(c);
        if (rc != DLOCK_OK) {
          fprintf(stderr, "\n  client open, allocation %ld failed: then %s: %s", n,
                  dlock_errname(rc), dlock_errmsg());
          _exit(2);
        }
      }
      _exit(failed == 0 ? 3 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code == FAILALLOC_LIBUV_ABORT)
      aborts++;
    else if (code != 0 && code != 3 && bad++ < 5)
      fprintf(stderr, "\n  client open, allocation %ld failed: exit %d", n, code);
    if (code == 3)
      break; /* opened with no allocation failing */
  }
  printf("[client open: %ld runs, %ld aborts in libuv, %ld bad] ", n, aborts, bad);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(n <= SWEEP_MAX && th_now_ms() < end + 1000);
  /* and it opens again once allocations succeed */
  dlock_client *c = NULL;
  TH_ASSERT_RC(dlock_client_open(srv.url, NULL, &c), DLOCK_OK);
  dlock_client_close(c);
}

/* One path: setup and after run unarmed; run is armed and returns the
 * call's code; after checks what an error left and that all works again. */
typedef struct path {
  const char *what;
  void *(*setup)(void);
  int (*run)(void *x);
  void (*after)(void *x, int rc);
  int also_ok; /* a code the call may give besides these (0: none) */
} path;


static void sweep(const path *p) {
  if (!api_sweeps(p->what))
    return;
  int64_t end = th_now_ms() + SWEEP_MS;
  long n, bad = 0, allocs = 0, also = 0;
  for (n = sweep_from(); n <= SWEEP_MAX && th_now_ms() < end; n++) {
    void *x = p->setup ? p->setup() : NULL;
    said[0] = '\0';
    fa_arm(n, 0);
    int rc = p->run(x);
    long failed = fa_disarm();
    allocs = fa_counted();
    also += p->also_ok && rc == p->also_ok;
    if (getenv("DLOCK_ALLOC_SAY") && rc != DLOCK_OK)
      fprintf(stderr, "\n  %s %ld: %s: %s", p->what, n, dlock_errname(rc), words());
    if (!acceptable(rc) && !(p->also_ok && rc == p->also_ok)) {
      if (bad++ < 5)
        fprintf(stderr, "\n  %s: allocation %ld failed: %s (%s): %s", p->what,
                n, dlock_strerror(rc), dlock_errname(rc), words());
      CU_FAIL("a failed allocation gave a code other than DLOCK_ENOMEM");
    }
    p->after(x, rc);
    if (failed == 0)
      break; /* the whole path ran with no allocation failing */
  }
  printf("[%s: %ld runs, %ld allocations, %ld bad", p->what, n, allocs, bad);
  if (p->also_ok)
    printf(", %ld %s", also, dlock_errname(p->also_ok));
  printf("] ");
  CU_ASSERT(n <= SWEEP_MAX && th_now_ms() < end + 1000);
}

/* ---- acquire and release, every kind of lock ------------------------- */

typedef int (*lock_new_fn)(dlock_client *, const char *, const dlock_lock_opts *,
                           dlock_lock **);

typedef struct lock_case {
  const char *name;
  dlock_lock *l;
  int acquired;
} lock_case;

static lock_new_fn current_new;
static const char *current_name;

static void *lock_setup(void) {
  static lock_case x;
  x.name = current_name;
  x.acquired = 0;
  x.l = NULL;
  TH_ASSERT_RC(current_new(cl, x.name, NULL, &x.l), DLOCK_OK);
  return &x;
}

/* acquire (a watchdog lease: the renewal is registered too), release */
static int lock_run(void *arg) {
  lock_case *x = arg;
  int rc = dlock_acquire(x->l, 0, -1);
  if (rc != DLOCK_OK)
    return rc;
  x->acquired = 1;
  rc = dlock_release(x->l);
  if (rc == DLOCK_OK)
    x->acquired = 0;
  return rc;
}

/* the members of a multi-lock, RedLock (named N:a, N:b, N:c): freed after
 * it */
static dlock_lock *members[3];
static size_t nmembers;

static void lock_after(void *arg, int rc) {
  lock_case *x = arg;
  (void)rc;
  if (x->acquired) /* the release failed: it is still ours, and goes */
    TH_ASSERT_RC(dlock_release(x->l), DLOCK_OK);
  /* nothing of the call is left: no key (its members' neither), no queue */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s %s:a %s:b %s:c", x->name, x->name,
                         x->name, x->name), 0);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS redisson_lock_queue:{%s}", x->name), 0);
  /* and the same handle works */
  TH_ASSERT_RC(dlock_acquire(x->l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(x->l), DLOCK_OK);
  dlock_lock_free(x->l);
  for (size_t i = 0; i < nmembers; i++)
    dlock_lock_free(members[i]);
  nmembers = 0;
}

static void lock_sweep_also(const char *what, lock_new_fn fn, int also_ok) {
  current_new = fn;
  current_name = th_name(what);
  path p = {what, lock_setup, lock_run, lock_after, also_ok};
  sweep(&p);
}

static void lock_sweep(const char *what, lock_new_fn fn) {
  lock_sweep_also(what, fn, 0);
}

/* A command appended to a buffer of several (a direct connection keeps
 * the latch DELs of its releases to go out in front of its next call) is
 * there whole or not at all: a DEL cut short by a failed allocation (its
 * header in, its key not) ran into the next call's bytes, and the server
 * answered "Protocol error: expected '$', got '*'" (seen once in the
 * reconnect sweep: every call after it on that connection failed). */
static void test_resp_command_whole(void) {
  if (!api_sweeps("resp command"))
    return;
  dlock__buf b = {0};
  const char *k[] = {"DEL", "k"}, *m[] = {"DEL", "m"};
  size_t kl[] = {3, 1}, ml[] = {3, 1};
  TH_ASSERT_RC(dlock__resp_command(&b, 2, k, kl), DLOCK_OK);
  size_t before = b.len;
  char big[300];
  memset(big, 'x', sizeof big);
  const char *g[] = {"DEL", big};
  size_t gl[] = {3, sizeof big};
  /* the header and "DEL" fit the first 128 bytes; the key needs more */
  fa_arm(1, 0);
  int rc = dlock__resp_command(&b, 2, g, gl);
  fa_disarm();
  TH_ASSERT_RC(rc, DLOCK_ENOMEM);
  CU_ASSERT_EQUAL(b.len, before);
  TH_ASSERT_RC(dlock__resp_command(&b, 2, m, ml), DLOCK_OK);
  CU_ASSERT_STRING_EQUAL(b.p, "*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"
                              "*2\r\n$3\r\nDEL\r\n$1\r\nm\r\n");
  dlock__buf_free(&b);
}

/* members N:a, N:b (N:c) on c */
static int make_members(dlock_client *c, const char *name, size_t n) {
  char m[200];
  for (nmembers = 0; nmembers < n; nmembers++) {
    snprintf(m, sizeof m, "%s:%c", name, (int)('a' + nmembers));
    int rc = dlock_reentrant_lock_new(c, m, NULL, &members[nmembers]);
    if (rc != DLOCK_OK)
      return rc;
  }
  return DLOCK_OK;
}

static int multi_new(dlock_client *c, const char *name,
                     const dlock_lock_opts *opts, dlock_lock **out) {
  (void)opts;
  int rc = make_members(c, name, 2);
  return rc == DLOCK_OK ? dlock_multi_new(members, 2, out) : rc;
}

static int redlock_new(dlock_client *c, const char *name,
                       const dlock_lock_opts *opts, dlock_lock **out) {
  (void)opts;
  int rc = make_members(c, name, 3);
  return rc == DLOCK_OK ? dlock_redlock_new(members, 3, NULL, out) : rc;
}

static int group_new(dlock_client *c, const char *name,
                     const dlock_lock_opts *opts, dlock_lock **out) {
  static const char *const values[] = {"a", "b"};
  static const size_t lens[] = {1, 1};
  return dlock_group_lock_new(c, name, values, lens, 2, opts, out);
}

static void test_reentrant(void) { lock_sweep("reentrant", dlock_reentrant_lock_new); }
static void test_fenced(void) { lock_sweep("fenced", dlock_fenced_lock_new); }
static void test_non_reentrant(void) {
  lock_sweep("non-reentrant", dlock_non_reentrant_lock_new);
}
static void test_spin(void) { lock_sweep("spin", dlock_spin_lock_new); }
static void test_fair(void) { lock_sweep("fair", dlock_fair_lock_new); }
static void test_read(void) { lock_sweep("read", dlock_read_lock_new); }
static void test_write(void) { lock_sweep("write", dlock_write_lock_new); }
static void test_multi(void) { lock_sweep("multi", multi_new); }
/* a member that ran out of memory is a member that failed: with one of
 * three, the majority still holds; more, and the round fails with
 * DLOCK_EQUORUM naming each member and why */
static void test_redlock(void) { lock_sweep_also("redlock", redlock_new, DLOCK_EQUORUM); }
static void test_group(void) { lock_sweep("group", group_new); }

/* ---- waits: woken by a release, and timed out ------------------------ */

enum { HOLDER = 0xB0B }; /* the other owner, on the suite's client */

typedef struct wait_case {
  const char *name;
  dlock_lock *holder, *waiter;
  pthread_t helper;
  int acquired;
} wait_case;

/* The helper (its allocations neither counted nor failed): once the
 * waiter is subscribed (2 s at most), the holder's key goes and the
 * release's message is published, as another client's release would. */
static void *release_when_subscribed(void *arg) {
  wait_case *x = arg;
  fa_exempt(1);
  char channel[256];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", x->name);
  th_wait_numsub(&srv, channel, 1, 2000);
  freeReplyObject(th_cmd(&srv, "DEL %s", x->name));
  freeReplyObject(th_cmd(&srv, "PUBLISH %s 0", channel));
  return NULL;
}

static wait_case *wait_setup(int woken) {
  static wait_case x;
  x.name = current_name;
  x.acquired = 0;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, x.name, NULL, &x.holder), DLOCK_OK);
  TH_ASSERT_RC(dlock_lock_bind_owner(x.holder, HOLDER), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(x.holder, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, x.name, NULL, &x.waiter), DLOCK_OK);
  if (woken)
    pthread_create(&x.helper, NULL, release_when_subscribed, &x);
  return &x;
}

static void *woken_setup(void) { return wait_setup(1); }
static void *timeout_setup(void) { return wait_setup(0); }

static int woken_run(void *arg) {
  wait_case *x = arg;
  int rc = dlock_acquire(x->waiter, 5000, 30000);
  x->acquired = rc == DLOCK_OK;
  return rc;
}

static int timeout_run(void *arg) {
  wait_case *x = arg;
  int rc = dlock_acquire(x->waiter, 100, 30000);
  x->acquired = rc == DLOCK_OK;
  return rc;
}

static void wait_after(void *arg, int rc, int woken) {
  wait_case *x = arg;
  (void)rc;
  if (woken)
    pthread_join(x->helper, NULL);
  CU_ASSERT(!(x->acquired && !woken)); /* a timed-out wait holds nothing */
  if (x->acquired)
    TH_ASSERT_RC(dlock_release(x->waiter), DLOCK_OK);
  dlock_release(x->holder); /* gone already when woken: DLOCK_ELOST */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", x->name), 0);
  /* no subscription left behind */
  char channel[256];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", x->name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 0, 2000));
  TH_ASSERT_RC(dlock_acquire(x->waiter, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(x->waiter), DLOCK_OK);
  dlock_lock_free(x->waiter);
  dlock_lock_free(x->holder);
}

static void woken_after(void *arg, int rc) { wait_after(arg, rc, 1); }
static void timeout_after(void *arg, int rc) { wait_after(arg, rc, 0); }

static void test_wait_woken(void) {
  current_name = th_name("woken");
  path p = {"wait woken", woken_setup, woken_run, woken_after, 0};
  sweep(&p);
}

static void test_wait_timeout(void) {
  current_name = th_name("timeout");
  path p = {"wait timed out", timeout_setup, timeout_run, timeout_after,
            DLOCK_ETIMEDOUT};
  sweep(&p);
}

/* ---- the async calls: acquire and release, and a cancelled wait ------- */

enum { ASYNC_OWNER = 7 };

static int async_run(void *arg) {
  lock_case *x = arg;
  th_outcome o = TH_OUTCOME_INIT, r = TH_OUTCOME_INIT;
  int rc = dlock_acquire_async(x->l, ASYNC_OWNER, 0, 30000, th_outcome_done, &o,
                               NULL);
  if (rc != DLOCK_OK)
    return rc;
  if ((rc = th_outcome_wait(&o, 10000)) != DLOCK_OK)
    return says(rc, o.msg);
  x->acquired = 1;
  rc = dlock_release_async(x->l, ASYNC_OWNER, th_outcome_done, &r, NULL);
  if (rc != DLOCK_OK)
    return rc;
  if ((rc = th_outcome_wait(&r, 10000)) != DLOCK_OK)
    return says(rc, r.msg);
  x->acquired = 0;
  return rc;
}

static void async_after(void *arg, int rc) {
  lock_case *x = arg;
  (void)rc;
  TH_ASSERT_RC(dlock_lock_bind_owner(x->l, ASYNC_OWNER), DLOCK_OK);
  lock_after(arg, rc);
}

static void test_async(void) {
  current_new = dlock_reentrant_lock_new;
  current_name = th_name("async");
  path p = {"async acquire and release", lock_setup, async_run, async_after, 0};
  sweep(&p);
}

static int cancel_run(void *arg) {
  wait_case *x = arg;
  th_outcome o = TH_OUTCOME_INIT;
  dlock_op op = 0;
  int rc = dlock_acquire_async(x->waiter, ASYNC_OWNER, 5000, 30000,
                               th_outcome_done, &o, &op);
  if (rc != DLOCK_OK)
    return rc;
  rc = dlock_cancel(op); /* DLOCK_EINVAL when it ended already */
  rc = th_outcome_wait(&o, 10000);
  x->acquired = rc == DLOCK_OK;
  return rc == DLOCK_ECANCELED ? DLOCK_OK : says(rc, o.msg);
}

static void cancel_after(void *arg, int rc) {
  wait_case *x = arg;
  CU_ASSERT(!x->acquired); /* the holder holds it */
  TH_ASSERT_RC(dlock_lock_bind_owner(x->waiter, ASYNC_OWNER), DLOCK_OK);
  wait_after(arg, rc, 0);
}

static void test_async_cancel(void) {
  current_name = th_name("cancel");
  path p = {"async wait cancelled", timeout_setup, cancel_run, cancel_after, 0};
  sweep(&p);
}

/* ---- the watchdog's renewals, and a reconnect -------------------------- */

/* A client whose watchdog lease is 300 ms (renewed every 100 ms), its
 * losses logged (cw, declared above: the suite closes it). */
static th_lost_log cw_lost;

typedef struct hold_case {
  const char *name;
  dlock_lock *l;
  int lost_before;
} hold_case;

static void *hold_setup(void) {
  static hold_case x;
  if (cw == NULL)
    cw = th_watchdog_client(&srv, &cw_lost, 300);
  x.name = current_name;
  x.lost_before = th_lost_count(&cw_lost);
  TH_ASSERT_RC(dlock_reentrant_lock_new(cw, x.name, NULL, &x.l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(x.l, 0, -1), DLOCK_OK);
  return &x;
}

/* the renewals of 250 ms (two or three of them) */
static int renew_run(void *arg) {
  (void)arg;
  usleep(250000);
  return DLOCK_OK;
}

/* The hold is honest: renewed (the key lives on past the lease) or told
 * lost (the callback, and DLOCK_ELOST from the release); never gone
 * untold. */
static void hold_after(void *arg, int rc) {
  hold_case *x = arg;
  int told = th_lost_count(&cw_lost) > x->lost_before;
  if (!told) {
    usleep(400000); /* past the lease: renewed since, or gone (and told) */
    /* a key gone is told at the watchdog's next renewal: wait for that
     * event (a slow sanitizer run may renew late), 5 s at most */
    int64_t until = th_now_ms() + 5000;
    while (th_lost_count(&cw_lost) == x->lost_before &&
           th_int(&srv, "EXISTS %s", x->name) == 0 && th_now_ms() < until)
      usleep(5000);
    told = th_lost_count(&cw_lost) > x->lost_before;
  }
  if (told) {
    TH_ASSERT_RC(dlock_release(x->l), DLOCK_ELOST);
  } else if (rc != DLOCK_OK) {
    /* a run that failed (DLOCK_ENOMEM, or DLOCK_EIO when the killed
     * connection lost an answer and the question failed too) may leave an
     * outcome the client could not learn (a re-entry or a release that
     * may have run): it releases what it knows of, and the lease ends
     * what it lost track of (300 ms; 5 s at most) */
    for (int i = 0; i < 4 && dlock_release(x->l) == DLOCK_OK; i++) {
    }
    int64_t until = th_now_ms() + 5000;
    while (th_int(&srv, "EXISTS %s", x->name) != 0 && th_now_ms() < until)
      usleep(5000);
  } else {
    /* held; a lease that runs out right now is told by the release */
    int released = dlock_release(x->l);
    if (released != DLOCK_OK && released != DLOCK_ELOST)
      fprintf(stderr, "\n  %s after a run that gave %s: release %s: %s",
              x->name, dlock_errname(rc), dlock_errname(released),
              dlock_errmsg());
    CU_ASSERT(released == DLOCK_OK || released == DLOCK_ELOST);
  }
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", x->name), 0);
  TH_ASSERT_RC(dlock_acquire(x->l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(x->l), DLOCK_OK);
  dlock_lock_free(x->l);
}

static void test_renewal(void) {
  current_name = th_name("renewal");
  path p = {"watchdog renewals", hold_setup, renew_run, hold_after, 0};
  sweep(&p);
}

/* the client's connections killed by the server, then a re-entry and a
 * release on the new ones (the renewals go on meanwhile) */
static int reconnect_run(void *arg) {
  hold_case *x = arg;
  fa_exempt(1);
  freeReplyObject(th_cmd(&srv, "CLIENT KILL TYPE normal SKIPME yes"));
  freeReplyObject(th_cmd(&srv, "CLIENT KILL TYPE pubsub"));
  fa_exempt(0);
  int rc = dlock_acquire(x->l, 0, -1);
  if (rc == DLOCK_OK)
    rc = dlock_release(x->l);
  return rc;
}

static void test_reconnect(void) {
  current_name = th_name("reconnect");
  path p = {"reconnect", hold_setup, reconnect_run, hold_after, 0};
  sweep(&p);
}

/* ---- the election: a campaign, and an observer -------------------------- */

typedef struct election_case {
  const char *name;
  dlock_election *e;
  int leads;
} election_case;

static void *election_setup(void) {
  static election_case x;
  x.name = current_name;
  x.leads = 0;
  TH_ASSERT_RC(dlock_election_new(cl, x.name, NULL, &x.e), DLOCK_OK);
  return &x;
}

static int campaign_run(void *arg) {
  election_case *x = arg;
  int64_t term = 0;
  int rc = dlock_election_campaign(x->e, "v", 1, 0, 30000, &term);
  if (rc != DLOCK_OK)
    return rc;
  x->leads = 1;
  rc = dlock_election_resign(x->e);
  x->leads = rc != DLOCK_OK;
  return rc;
}

static void election_after(void *arg, int rc) {
  election_case *x = arg;
  (void)rc;
  if (x->leads)
    TH_ASSERT_RC(dlock_election_resign(x->e), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", x->name), 0); /* nobody leads */
  int64_t term = 0;
  TH_ASSERT_RC(dlock_election_campaign(x->e, "v", 1, 0, 30000, &term), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_resign(x->e), DLOCK_OK);
  dlock_election_free(x->e);
}

static void test_campaign(void) {
  current_name = th_name("campaign");
  path p = {"election campaign", election_setup, campaign_run, election_after, 0};
  sweep(&p);
}

/* an observer: its first event (the state now), then cancelled */
typedef struct observer {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int events, ended, rc;
  char msg[256];
} observer;

static void observed(void *data, const dlock_result *r) {
  observer *o = data;
  pthread_mutex_lock(&o->mu);
  if (r->election) {
    o->events++;
  } else {
    o->ended = 1;
    o->rc = r->rc;
    snprintf(o->msg, sizeof o->msg, "%s", r->errmsg ? r->errmsg : "");
  }
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
}

/* until o has an event or ended (10 s at most) */
static void observer_wait(observer *o, int for_end) {
  int64_t end_us = th_now_us() + 10000000;
  struct timespec ts = {.tv_sec = end_us / 1000000,
                        .tv_nsec = (end_us % 1000000) * 1000};
  pthread_mutex_lock(&o->mu);
  while (!o->ended && (for_end || o->events == 0))
    if (pthread_cond_timedwait(&o->cv, &o->mu, &ts) != 0)
      break;
  pthread_mutex_unlock(&o->mu);
}

static int observe_run(void *arg) {
  election_case *x = arg;
  static observer o;
  pthread_condattr_t attr; /* timed waits on the monotonic clock */
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&o.mu, NULL);
  pthread_cond_init(&o.cv, &attr);
  pthread_condattr_destroy(&attr);
  o.events = o.ended = o.rc = 0;
  o.msg[0] = '\0';
  dlock_op op = 0;
  int rc = dlock_election_observe(x->e, observed, &o, &op);
  if (rc != DLOCK_OK)
    return rc;
  observer_wait(&o, 0);
  dlock_cancel(op);
  observer_wait(&o, 1);
  CU_ASSERT(o.ended);
  pthread_mutex_destroy(&o.mu);
  pthread_cond_destroy(&o.cv);
  if (o.events > 0 && o.rc == DLOCK_ECANCELED)
    return DLOCK_OK;
  return says(o.rc, o.msg); /* it ended before its first event */
}

static void observe_after(void *arg, int rc) {
  election_case *x = arg;
  (void)rc;
  char channel[256];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", x->name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 0, 2000)); /* none left */
  election_after(arg, rc);
}

static void test_observe(void) {
  current_name = th_name("observe");
  path p = {"election observer", election_setup, observe_run, observe_after, 0};
  sweep(&p);
}

/* ---- a latch, a semaphore, expirable permits ----------------------------- */

static int latch_run(void *arg) {
  dlock_latch *l = arg;
  int set = 0;
  int rc = dlock_latch_try_set_count(l, 1, &set);
  if (rc == DLOCK_OK)
    rc = dlock_latch_count_down(l, NULL);
  if (rc == DLOCK_OK)
    rc = dlock_latch_await(l, 0);
  return rc;
}

static void *latch_setup(void) {
  dlock_latch *l = NULL;
  TH_ASSERT_RC(dlock_latch_new(cl, current_name, NULL, &l), DLOCK_OK);
  return l;
}

static void latch_after(void *arg, int rc) {
  dlock_latch *l = arg;
  (void)rc;
  int64_t left = -1;
  TH_ASSERT_RC(dlock_latch_get_count(l, &left), DLOCK_OK); /* set or not */
  CU_ASSERT(left == 0 || left == 1);
  TH_ASSERT_RC(dlock_latch_delete(l, NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", current_name), 0);
  TH_ASSERT_RC(latch_run(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_latch_delete(l, NULL), DLOCK_OK);
  dlock_latch_free(l);
}

static void test_latch(void) {
  current_name = th_name("latch");
  path p = {"latch", latch_setup, latch_run, latch_after, 0};
  sweep(&p);
}

typedef struct sem_case {
  dlock_semaphore *s;
  int taken;
} sem_case;

static void *sem_setup(void) {
  static sem_case x;
  x.taken = 0;
  TH_ASSERT_RC(dlock_semaphore_new(cl, current_name, NULL, &x.s), DLOCK_OK);
  return &x;
}

static int sem_run(void *arg) {
  sem_case *x = arg;
  int rc = dlock_semaphore_try_set_permits(x->s, 1, 0, NULL);
  if (rc == DLOCK_OK && (rc = dlock_semaphore_acquire(x->s, 1, 0)) == DLOCK_OK) {
    x->taken = 1;
    if ((rc = dlock_semaphore_release(x->s, 1)) == DLOCK_OK)
      x->taken = 0;
  }
  return rc;
}

/* the count is whole: 1 permit (or not set at all), none lost or made */
static void sem_after(void *arg, int rc) {
  sem_case *x = arg;
  (void)rc;
  if (x->taken)
    TH_ASSERT_RC(dlock_semaphore_release(x->s, 1), DLOCK_OK);
  int64_t n = -1;
  TH_ASSERT_RC(dlock_semaphore_available(x->s, &n), DLOCK_OK);
  CU_ASSERT(n == 1 || (n == 0 && th_int(&srv, "EXISTS %s", current_name) == 0));
  freeReplyObject(th_cmd(&srv, "DEL %s", current_name));
  TH_ASSERT_RC(sem_run(x), DLOCK_OK);
  freeReplyObject(th_cmd(&srv, "DEL %s", current_name));
  dlock_semaphore_free(x->s);
}

static void test_semaphore(void) {
  current_name = th_name("semaphore");
  path p = {"semaphore", sem_setup, sem_run, sem_after, 0};
  sweep(&p);
}

typedef struct permits_case {
  dlock_permits *p;
  dlock_permit_id id;
  int taken;
} permits_case;

static void *permits_setup(void) {
  static permits_case x;
  x.taken = 0;
  TH_ASSERT_RC(dlock_permits_new(cl, current_name, NULL, &x.p), DLOCK_OK);
  return &x;
}

static int permits_run(void *arg) {
  permits_case *x = arg;
  int rc = dlock_permits_try_set_permits(x->p, 1, 0, NULL);
  if (rc == DLOCK_OK &&
      (rc = dlock_permits_acquire(x->p, 1, 0, 30000, &x->id)) == DLOCK_OK) {
    x->taken = 1;
    if ((rc = dlock_permits_release(x->p, &x->id, 1)) == DLOCK_OK)
      x->taken = 0;
  }
  return rc;
}

static void permits_after(void *arg, int rc) {
  permits_case *x = arg;
  (void)rc;
  if (x->taken)
    TH_ASSERT_RC(dlock_permits_release(x->p, &x->id, 1), DLOCK_OK);
  int64_t available = -1, acquired = -1;
  TH_ASSERT_RC(dlock_permits_counts(x->p, &available, &acquired), DLOCK_OK);
  CU_ASSERT_EQUAL(acquired, 0); /* no permit taken and left behind */
  freeReplyObject(th_cmd(&srv, "DEL %s {%s}:timeout", current_name, current_name));
  TH_ASSERT_RC(permits_run(x), DLOCK_OK);
  freeReplyObject(th_cmd(&srv, "DEL %s {%s}:timeout", current_name, current_name));
  dlock_permits_free(x->p);
}

static void test_permits(void) {
  current_name = th_name("permits");
  path p = {"expirable permits", permits_setup, permits_run, permits_after, 0};
  sweep(&p);
}

/* ---- the tool: `dlock run` and `dlock elect` ---------------------------- */

/* The tool with the failing allocator preloaded (FAILALLOC_AT=N), for
 * N = 1 until a run fails none (FAILALLOC_COUNTED says how many it made:
 * a run that made fewer than N had none failed): exit 0, or 71 (out of
 * memory) with words, or its libuv's abort (only at open); never a crash
 * or another status; no key of the call left behind. */
static void tool_sweep(const char *what, const char *cmd, const char *name) {
#ifdef __SANITIZE_ADDRESS__
  /* preloaded ahead of ASan's runtime it would run before that is set up,
   * and behind it it is never called: the plain build sweeps the tool
   * (api_sweeps) */
  (void)cmd;
  (void)name;
  printf("[%s: swept in the plain build] ", what);
  return;
#endif
  CU_ASSERT_FATAL(getenv("DLOCK_FAILALLOC") && getenv("DLOCK_BIN"));
  int64_t end = th_now_ms() + SWEEP_MS;
  long n, bad = 0, aborts = 0, oom = 0;
  for (n = sweep_from(); n <= SWEEP_MAX && th_now_ms() < end; n++) {
    char line[1024], out[4096];
    snprintf(line, sizeof line,
             "FAILALLOC_AT=%ld LD_PRELOAD='%s' ASAN_OPTIONS=verify_asan_link_order=0:"
             "detect_leaks=0 '%s' --redis %s %s 2>&1; echo \"status $?\"",
             n, getenv("DLOCK_FAILALLOC"), getenv("DLOCK_BIN"), srv.url, cmd);
    th_shell(line, out, sizeof out);
    const char *st = strstr(out, "status ");
    int status = st ? atoi(st + 7) : -1;
    if (status == FAILALLOC_LIBUV_ABORT) {
      aborts++;
    } else if (status == 71) {
      oom++;
      if (!strstr(out, "memory") && bad++ < 5)
        fprintf(stderr, "\n  %s, allocation %ld: 71 without words: %s", what, n, out);
    } else if (status != 0 && bad++ < 5) {
      fprintf(stderr, "\n  %s, allocation %ld failed: %s", what, n, out);
    }
    CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
    if (status == 0 && !strstr(out, "failed allocation"))
      break; /* the preload says when one failed: none did */
  }
  printf("[%s: %ld runs, %ld out of memory, %ld aborts in libuv, %ld bad] ",
         what, n, oom, aborts, bad);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(n <= SWEEP_MAX && th_now_ms() < end + 1000);
}

static void test_tool_run(void) {
  const char *name = th_name("tool-run");
  char cmd[300];
  snprintf(cmd, sizeof cmd, "run %s -- true", name);
  tool_sweep("dlock run", cmd, name);
}

static void test_tool_elect(void) {
  const char *name = th_name("tool-elect");
  char cmd[300];
  snprintf(cmd, sizeof cmd, "elect %s -- true", name);
  tool_sweep("dlock elect", cmd, name);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("alloc", suite_init, suite_clean);
  CU_add_test(s, "client_open", test_client_open);
  CU_add_test(s, "reentrant", test_reentrant);
  CU_add_test(s, "fenced", test_fenced);
  CU_add_test(s, "non_reentrant", test_non_reentrant);
  CU_add_test(s, "spin", test_spin);
  CU_add_test(s, "fair", test_fair);
  CU_add_test(s, "read", test_read);
  CU_add_test(s, "write", test_write);
  CU_add_test(s, "multi", test_multi);
  CU_add_test(s, "redlock", test_redlock);
  CU_add_test(s, "group", test_group);
  CU_add_test(s, "wait_woken", test_wait_woken);
  CU_add_test(s, "wait_timeout", test_wait_timeout);
  CU_add_test(s, "async", test_async);
  CU_add_test(s, "async_cancel", test_async_cancel);
  CU_add_test(s, "renewal", test_renewal);
  CU_add_test(s, "reconnect", test_reconnect);
  CU_add_test(s, "resp_command_whole", test_resp_command_whole);
  CU_add_test(s, "campaign", test_campaign);
  CU_add_test(s, "observe", test_observe);
  CU_add_test(s, "latch", test_latch);
  CU_add_test(s, "semaphore", test_semaphore);
  CU_add_test(s, "permits", test_permits);
  CU_add_test(s, "tool_run", test_tool_run);
  CU_add_test(s, "tool_elect", test_tool_elect);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
