/* Allocation failure (docs/reliability.md "Out of memory"): for a path,
 * the N-th allocation of the whole process after the path starts fails
 * (tests/support/failalloc.h: the library's, hiredis's, libuv's,
 * OpenSSL's, the C library's, on every thread), for N = 1, 2, ... until a
 * run makes no allocation fail. Each run: no crash; DLOCK_OK or
 * DLOCK_ENOMEM with a message; after an error nothing of the call is left
 * on the server; and once allocations succeed again the client (and the
 * handle) works. The ASan build adds that nothing the suite's own
 * process did leaked (LSan at its exit; a child leaves by _exit). Bounded: SWEEP_MAX runs and SWEEP_MS
 * a path. DLOCK_ALLOC_FROM=N starts the sweeps at N (to debug one). */
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
static int suite_clean(void) { return th_suite_close(&srv, cl); }

static long sweep_from(void) {
  const char *from = getenv("DLOCK_ALLOC_FROM");
  return from ? atol(from) : 1;
}

/* rc is a code a failed allocation may give: DLOCK_OK (the call got by)
 * or DLOCK_ENOMEM, with words. */
static int acceptable(int rc) {
  if (rc == DLOCK_OK)
    return 1;
  return rc == DLOCK_ENOMEM && dlock_errmsg()[0] != '\0';
}

/* ---- client open and close ------------------------------------------- */

/* libuv aborts by its design when an allocation of its own fails while a
 * loop is set up (uv_loop_init) or its descriptor table grows; dlock grows
 * that table at open (src/core/engine.c), so this can happen only in
 * dlock_client_open. Each open therefore runs in a child of its own: an
 * abort whose stack has a frame in libuv exits LIBUV_ABORT, any other
 * abort or crash is a failure. */
enum { LIBUV_ABORT = 42 };

static void on_abort(int sig) {
  (void)sig;
  fa_disarm();
  void *frames[64];
  int n = backtrace(frames, 64);
  for (int i = 0; i < n; i++) {
    Dl_info d;
    if (dladdr(frames[i], &d) && d.dli_fname && strstr(d.dli_fname, "libuv.so"))
      _exit(LIBUV_ABORT);
  }
  signal(SIGABRT, SIG_DFL);
  abort();
}

/* a crash in a child: its stack on stderr, then the signal's status */
static void on_crash(int sig) {
  fa_disarm();
  void *frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  _exit(128 + sig);
}

static void test_client_open(void) {
  int64_t end = th_now_ms() + SWEEP_MS;
  long n, aborts = 0, bad = 0;
  void *warm[1];
  backtrace(warm, 1); /* loads what backtrace needs, before any failure */
  for (n = sweep_from(); n <= SWEEP_MAX && th_now_ms() < end; n++) {
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
      signal(SIGABRT, on_abort);
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
    if (code == LIBUV_ABORT)
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
  int64_t end = th_now_ms() + SWEEP_MS;
  long n, bad = 0, allocs = 0;
  for (n = sweep_from(); n <= SWEEP_MAX && th_now_ms() < end; n++) {
    void *x = p->setup ? p->setup() : NULL;
    fa_arm(n, 0);
    int rc = p->run(x);
    long failed = fa_disarm();
    allocs = fa_counted();
    if (!acceptable(rc) && !(p->also_ok && rc == p->also_ok)) {
      if (bad++ < 5)
        fprintf(stderr, "\n  %s: allocation %ld failed: %s (%s): %s", p->what,
                n, dlock_strerror(rc), dlock_errname(rc), dlock_errmsg());
      CU_FAIL("a failed allocation gave a code other than DLOCK_ENOMEM");
    }
    p->after(x, rc);
    if (failed == 0)
      break; /* the whole path ran with no allocation failing */
  }
  printf("[%s: %ld runs, %ld allocations, %ld bad] ", p->what, n, allocs, bad);
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
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
