/* Client statistics, inside (dlock/stats.h outside): the counters
 * (base/counters.h) read as an acquire's or a release's outcome. */
#ifndef DLOCK_CORE_STATS_H
#define DLOCK_CORE_STATS_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/counters.h"

/* An acquire's outcome (rc; waited: it went past its first try, as
 * dlock__stats_waited said), t0_us: when the call began. */
void dlock__stats_acquire(dlock__stats *s, int rc, int waited, int64_t t0_us);
/* A release's outcome. */
void dlock__stats_release(dlock__stats *s, int rc);

/* The calling thread's current acquire went past its first try (wait.c):
 * dlock__stats_waited() says so until dlock__stats_wait_reset(). */
void dlock__stats_wait_mark(void);
void dlock__stats_wait_reset(void);
int dlock__stats_waited(void);

#endif /* DLOCK_CORE_STATS_H */
