/* Client statistics (docs/observability.md): what a client has done since
 * it opened. Always on: each event costs a relaxed atomic add, so W1 and W2
 * do not move (docs/performance.md). Read them with dlock_client_stats();
 * write them in Prometheus's text format with dlock_client_stats_format(). */
#ifndef DLOCK_STATS_H
#define DLOCK_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Durations in power-of-two buckets: bucket[i] counts those of at most
 * 2^i microseconds (and more than 2^(i-1)); the last bucket, the longer
 * ones (over 2^23 us, about 8.4 s). Percentiles: walk the buckets up to
 * the wanted share of count (the bound of the bucket reached). */
#define DLOCK_STATS_BUCKETS 25
typedef struct dlock_histogram {
  uint64_t count;
  uint64_t sum_us;
  uint64_t bucket[DLOCK_STATS_BUCKETS];
} dlock_histogram;

typedef struct dlock_stats {
  unsigned version; /* DLOCK_STATS_VERSION: set by the caller */
  /* Acquires of every lock kind and of semaphores' permits, by outcome
   * (a multi-lock's or RedLock's members are not counted apart). */
  uint64_t acquired_at_once;    /* granted by the first try */
  uint64_t acquired_after_wait; /* granted after waiting */
  uint64_t acquire_busy;        /* a try (wait 0) found it taken */
  uint64_t acquire_timed_out;   /* the wait ran out */
  uint64_t acquire_errors;      /* any other failure: interrupted, closed,
                                   the server unreachable or refusing */
  dlock_histogram acquire_wait; /* granted after waiting: call to grant */
  dlock_histogram hold;         /* lock holds fully released: grant to
                                   release, by this client's clock */
  /* Releases, by outcome. */
  uint64_t released;          /* DLOCK_OK */
  uint64_t release_lost;      /* DLOCK_ELOST: the hold was gone */
  uint64_t release_not_owner; /* DLOCK_ENOTOWNER: not held by the caller */
  uint64_t release_errors;    /* any other failure */
  /* The watchdog. */
  uint64_t renew_calls;     /* renewal calls sent (each renews a batch) */
  uint64_t renewed;         /* holds renewed */
  uint64_t renew_failures;  /* renewal calls that failed (the server
                               unreachable or refusing, or with the
                               replica guard or durable grants, the
                               write not acknowledged: retried) */
  uint64_t renew_batch_max; /* the most holds one call renewed */
  /* Holds lost, by the lost-lock callback's reason. */
  uint64_t lost_expired;
  uint64_t lost_unrenewed;
  uint64_t lost_max_hold;
  /* Pub/sub. */
  uint64_t messages;   /* messages that reached waiters' channels */
  uint64_t subscribes; /* channels subscribed */
  uint64_t subscribed; /* channels subscribed now */
  /* Connections and commands. */
  uint64_t reconnects;   /* connections made again after one was lost, to
                            its server or to the one that took its place
                            (a failover's new master) */
  uint64_t redirects;    /* calls sent again elsewhere because the topology
                            changed: MOVED, ASK, TRYAGAIN and CLUSTERDOWN
                            answers followed, calls moved to a failed
                            master's successor, READONLY from a demoted
                            Sentinel master */
  uint64_t commands;     /* commands sent, by the engine and directly */
  uint64_t direct_calls; /* calls made on the direct path */
  uint64_t in_flight;    /* requests sent and not answered yet, now */
  uint64_t pipeline_max; /* the most requests in flight at once on one of
                            the engine's connections */
} dlock_stats;

#define DLOCK_STATS_VERSION 1u

/* The client's statistics into out (out->version set by the caller).
 * DLOCK_OK, or DLOCK_EINVAL (NULL, an unknown version). Works on a closed
 * client too, until it is freed by dlock_client_close returning. */
DLOCK_API int dlock_client_stats(dlock_client *client, dlock_stats *out);

/* s in Prometheus's text exposition format (version 0.0.4): counters as
 * dlock_*_total, outcomes and reasons as labels, gauges, and the two
 * histograms in seconds with cumulative le buckets. label: a value for a
 * client="..." label on every sample (NULL: none; quotes, backslashes and
 * newlines are escaped). Writes at most size bytes into buf, NUL-terminated
 * as snprintf does, and the whole text's length into *len (may be NULL):
 * the text was cut when *len >= size (about 6 KiB is enough). DLOCK_OK, or
 * DLOCK_EINVAL (NULL s, NULL buf with size > 0). */
DLOCK_API int dlock_client_stats_format(const dlock_stats *s,
                                        const char *label, char *buf,
                                        size_t size, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_STATS_H */
