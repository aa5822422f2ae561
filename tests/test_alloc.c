/* Allocation failure (docs/reliability.md "Out of memory"): for a path,
 * the N-th allocation of the whole process after the path starts fails
 * (tests/support/failalloc.h: the library's, hiredis's, libuv's,
 * OpenSSL's, the C library's, on every thread), for N = 1, 2, ... until a
 * run makes no allocation fail. Each run: no crash; DLOCK_OK or
 * DLOCK_ENOMEM with a message; and once allocations succeed again the
 * client works. The ASan build adds that nothing the suite's own
 * process did leaked (LSan at its exit; a child leaves by _exit). Bounded: SWEEP_MAX runs and SWEEP_MS
 * a path. The client's open is swept here; the other paths (every kind's
 * acquire and release, waits, the async calls, renewals, reconnects, the
 * election, the tool) join as issue 59 goes on. */
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
  const char *from = getenv("DLOCK_ALLOC_FROM"); /* debugging: start there */
  for (n = from ? atol(from) : 1; n <= SWEEP_MAX && th_now_ms() < end; n++) {
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

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("alloc", suite_init, suite_clean);
  CU_add_test(s, "client_open", test_client_open);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
