/* A failing allocator for the allocation-failure sweeps (test_alloc, and
 * the tool through LD_PRELOAD): malloc, calloc, realloc and the aligned
 * allocators are the C library's (or the sanitizer's), except that once
 * armed the N-th allocation counted fails with ENOMEM (and, persistent,
 * every one after it). Every thread counts but the ones that said
 * fa_exempt(1) (a test's helpers). The tool's copy is armed from the
 * environment: FAILALLOC_AT=N, FAILALLOC_PERSIST=1. */
#ifndef DLOCK_TEST_FAILALLOC_H
#define DLOCK_TEST_FAILALLOC_H

/* Count allocations from now; fail the n-th (n >= 1), and with persistent
 * every one after it too. */
void fa_arm(long n, int persistent);
/* Stop failing and counting; the count of failures made since fa_arm. */
long fa_disarm(void);
/* Allocations counted since fa_arm. */
long fa_counted(void);
/* This thread's allocations are never counted nor failed (exempt 1). */
void fa_exempt(int exempt);

/* From now on an abort inside libuv exits the process with this status
 * (the preloaded copy does it from the start); any other abort aborts. */
#define FAILALLOC_LIBUV_ABORT 42
void fa_tell_libuv_aborts(void);

#endif
