/* Client counters: one relaxed atomic per counter in the client, bumped
 * where the event happens, from any thread (the engine's connections, the
 * topologies, the direct path, the lock calls). What they mean to a user
 * is core/stats.c's (dlock/stats.h). */
#ifndef DLOCK_BASE_COUNTERS_H
#define DLOCK_BASE_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

/* Durations in power-of-two buckets of microseconds, as dlock/stats.h
 * hands them over (its DLOCK_STATS_BUCKETS: core/stats.c checks they
 * agree); the last bucket takes the longer ones. */
#define DLOCK__HIST_BUCKETS 25

typedef enum dlock__stat {
  DLOCK__ST_ACQ_ONCE,
  DLOCK__ST_ACQ_WAITED,
  DLOCK__ST_ACQ_BUSY,
  DLOCK__ST_ACQ_TIMEOUT,
  DLOCK__ST_ACQ_ERR,
  DLOCK__ST_REL_OK,
  DLOCK__ST_REL_LOST,
  DLOCK__ST_REL_NOTOWNER,
  DLOCK__ST_REL_ERR,
  DLOCK__ST_RENEW_CALLS,
  DLOCK__ST_RENEWED,
  DLOCK__ST_RENEW_FAIL,
  DLOCK__ST_RENEW_BATCH_MAX, /* a maximum */
  DLOCK__ST_LOST_EXPIRED,
  DLOCK__ST_LOST_UNRENEWED,
  DLOCK__ST_LOST_MAX_HOLD,
  DLOCK__ST_MESSAGES,
  DLOCK__ST_SUBSCRIBES,
  DLOCK__ST_SUBSCRIBED, /* a gauge, read from the channels (stats.c) */
  DLOCK__ST_RECONNECTS,
  DLOCK__ST_REDIRECTS,
  DLOCK__ST_COMMANDS,
  DLOCK__ST_DIRECT,
  DLOCK__ST_IN_FLIGHT,    /* a gauge */
  DLOCK__ST_PIPELINE_MAX, /* a maximum */
  DLOCK__ST_COUNT
} dlock__stat;

typedef struct dlock__hist {
  atomic_uint_fast64_t count, sum_us, bucket[DLOCK__HIST_BUCKETS];
} dlock__hist;

typedef struct dlock__stats {
  atomic_uint_fast64_t v[DLOCK__ST_COUNT];
  dlock__hist acquire_wait, hold;
} dlock__stats;

static inline void dlock__stat_add(dlock__stats *s, dlock__stat k, uint64_t n) {
  atomic_fetch_add_explicit(&s->v[k], n, memory_order_relaxed);
}

static inline void dlock__stat_sub(dlock__stats *s, dlock__stat k, uint64_t n) {
  atomic_fetch_sub_explicit(&s->v[k], n, memory_order_relaxed);
}

/* Raise a maximum to n. */
void dlock__stat_max(dlock__stats *s, dlock__stat k, uint64_t n);
/* One duration into a histogram. */
void dlock__hist_add(dlock__hist *h, int64_t us);

#endif /* DLOCK_BASE_COUNTERS_H */
