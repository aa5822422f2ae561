/* The failing allocator (failalloc.h). Linked into a test program, its
 * malloc family comes first in symbol lookup, ahead of the C library's and
 * a sanitizer's, for the program and every library it loads (hiredis,
 * libuv, OpenSSL, libdlock); each call goes on to the next definition
 * (dlsym RTLD_NEXT), so ASan still sees and checks every block. Built as
 * a preloadable module for the tool (FAILALLOC_AT, FAILALLOC_PERSIST).
 * dlsym may allocate before the next definitions are known: those few
 * blocks come from a static arena that free ignores. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "failalloc.h"

/* the build hides symbols by default; these must be seen by every library */
#define PUBLIC __attribute__((visibility("default")))

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static void (*next_free)(void *);
static int (*next_memalign)(void **, size_t, size_t);
static void *(*next_aligned)(size_t, size_t);

static _Atomic int armed, persist, pending; /* pending: a spared one's due */
static _Atomic long counted, fail_at, failures;
static _Thread_local int exempt, resolving;

/* blocks handed out while the next definitions are being looked up */
static _Alignas(16) char arena[16384];
static _Atomic size_t arena_used;

static int in_arena(const void *p) {
  return (const char *)p >= arena && (const char *)p < arena + sizeof arena;
}

static void *arena_alloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  size_t at = atomic_fetch_add(&arena_used, n);
  return at + n <= sizeof arena ? arena + at : NULL; /* zeroed: static */
}

static void resolve(void) {
  if (next_free)
    return;
  resolving = 1; /* a function pointer written through void **: POSIX's way */
  *(void **)&next_malloc = dlsym(RTLD_NEXT, "malloc");
  *(void **)&next_calloc = dlsym(RTLD_NEXT, "calloc");
  *(void **)&next_realloc = dlsym(RTLD_NEXT, "realloc");
  *(void **)&next_memalign = dlsym(RTLD_NEXT, "posix_memalign");
  *(void **)&next_aligned = dlsym(RTLD_NEXT, "aligned_alloc");
  *(void **)&next_free = dlsym(RTLD_NEXT, "free");
  resolving = 0;
}

/* 1: the allocation asked for at caller is one the C library's thread
 * functions make (pthread_getattr_np, which ASan's thread set-up calls and
 * cannot survive failing: a CHECK aborts, and what it calls, which has no
 * exported name): never failed, the next allocation fails in its place. */
static int spared(const void *caller) {
  Dl_info d;
  if (!dladdr(caller, &d) || d.dli_fname == NULL || !strstr(d.dli_fname, "libc.so"))
    return 0;
  return d.dli_sname == NULL || strstr(d.dli_sname, "pthread") != NULL;
}

/* 1: this allocation (asked for at caller) fails. */
static int fails(const void *caller) {
  if (!atomic_load_explicit(&armed, memory_order_acquire) || exempt)
    return 0;
  long n = atomic_fetch_add(&counted, 1) + 1, at = atomic_load(&fail_at);
  int due = n == at || (n > at && atomic_load(&persist));
  if (!due && !atomic_exchange(&pending, 0))
    return 0;
  if (spared(caller)) {
    atomic_store(&pending, 1); /* the next one, whichever thread asks */
    return 0;
  }
  atomic_fetch_add(&failures, 1);
  errno = ENOMEM;
  return 1;
}
#define FAILS() fails(__builtin_return_address(0))

PUBLIC void *malloc(size_t n) {
  if (resolving)
    return arena_alloc(n);
  resolve();
  return FAILS() ? NULL : next_malloc(n);
}

PUBLIC void *calloc(size_t n, size_t size) {
  if (resolving)
    return arena_alloc(n * size);
  resolve();
  return FAILS() ? NULL : next_calloc(n, size);
}

PUBLIC void *realloc(void *p, size_t n) {
  resolve();
  if (in_arena(p)) { /* moved out of the arena (never shrunk in place) */
    void *q = FAILS() ? NULL : next_malloc(n);
    size_t room = (size_t)(arena + sizeof arena - (const char *)p);
    if (q)
      memcpy(q, p, n < room ? n : room);
    return q;
  }
  if (p == NULL || n > 0) /* realloc(p, 0) frees: never refused */
    if (FAILS())
      return NULL;
  return next_realloc(p, n);
}

PUBLIC void free(void *p) {
  if (p == NULL || in_arena(p))
    return;
  resolve();
  next_free(p);
}

PUBLIC int posix_memalign(void **out, size_t align, size_t n) {
  resolve();
  return FAILS() ? ENOMEM : next_memalign(out, align, n);
}

PUBLIC void *aligned_alloc(size_t align, size_t n) {
  resolve();
  return FAILS() ? NULL : next_aligned(align, n);
}

void fa_arm(long n, int persistent) {
  atomic_store(&counted, 0);
  atomic_store(&failures, 0);
  atomic_store(&fail_at, n);
  atomic_store(&persist, persistent);
  atomic_store(&pending, 0);
  atomic_store_explicit(&armed, 1, memory_order_release);
}

long fa_disarm(void) {
  atomic_store_explicit(&armed, 0, memory_order_release);
  atomic_store(&pending, 0);
  return atomic_load(&failures);
}

long fa_counted(void) { return atomic_load(&counted); }

void fa_exempt(int e) { exempt = e; }

/* An abort: exit FAILALLOC_LIBUV_ABORT when a frame of its stack is
 * libuv's (it aborts by design when an allocation of its own fails), else
 * the abort goes on. */
static void on_abort(int sig) {
  (void)sig;
  fa_disarm();
  void *frames[64];
  int n = backtrace(frames, 64);
  for (int i = 0; i < n; i++) {
    Dl_info d;
    if (dladdr(frames[i], &d) && d.dli_fname && strstr(d.dli_fname, "libuv.so"))
      _exit(FAILALLOC_LIBUV_ABORT);
  }
  signal(SIGABRT, SIG_DFL);
  abort();
}

/* the preloaded copy's last word on stderr: whether an allocation failed */
static void say_failed(void) {
  if (atomic_load(&failures) > 0) {
    static const char said[] = "failalloc: a failed allocation\n";
    ssize_t w = write(2, said, sizeof said - 1);
    (void)w;
  }
}

void fa_tell_libuv_aborts(void) {
  void *warm[1];
  backtrace(warm, 1); /* loads what it needs, before any failure */
  signal(SIGABRT, on_abort);
}

/* the preloaded copy: armed from the environment before main */
__attribute__((constructor)) static void from_env(void) {
  const char *at = getenv("FAILALLOC_AT");
  if (at && atol(at) > 0) {
    fa_tell_libuv_aborts();
    const char *p = getenv("FAILALLOC_PERSIST");
    fa_arm(atol(at), p && p[0] == '1');
    atexit(say_failed);
  }
}
