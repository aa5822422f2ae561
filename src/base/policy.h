/* The reply policy, in one place for every path (the engine's
 * connections, the direct path, the topologies): what a server's answer
 * says about the call (ran, an error of its own, or one of the answers
 * that say the call did not run where it was sent and must go elsewhere or
 * again), and how long to stay away from a server that could not be
 * reached. */
#ifndef DLOCK_NET_POLICY_H
#define DLOCK_NET_POLICY_H

#include <stdint.h>

#include <hiredis/hiredis.h>

typedef enum dlock__class {
  DLOCK__C_VALUE,       /* not an error */
  DLOCK__C_ERROR,       /* an error the caller reads (WRONGTYPE, ...) */
  DLOCK__C_NOSCRIPT,    /* EVALSHA of a script the server does not have */
  DLOCK__C_MOVED,       /* cluster: the slot is served elsewhere now */
  DLOCK__C_ASK,         /* cluster: this key is being moved: ask there once */
  DLOCK__C_TRYAGAIN,    /* cluster: keys of a slot in migration: soon */
  DLOCK__C_CLUSTERDOWN, /* cluster: the slot has no master right now */
  DLOCK__C_READONLY,    /* a replica: the master this was sent to is one now */
  DLOCK__C_PASSING      /* a passing state of the server (LOADING, BUSY,
                           NOREPLICAS, MASTERDOWN, OOM: a script is refused
                           at its first write): the call did not run;
                           the same call succeeds once it has passed */
} dlock__class;

dlock__class dlock__classify(const redisReply *r);
/* MOVED, ASK, TRYAGAIN, CLUSTERDOWN: the cluster did not run the call on
 * that node. */
int dlock__class_cluster(dlock__class k);

/* A passing refusal (DLOCK__C_PASSING) as a caller reads it, once its
 * call's budget ran out: the server's words, how long and how often it was
 * refused, and what to check, into buf. */
void dlock__passing_why(const redisReply *r, int refusals, int64_t ms,
                        char *buf, size_t n);

/* The pause before the next attempt to reach a server after a failed one,
 * given the last pause (0 after a success): 25 ms, doubling, at most 1 s. */
int64_t dlock__backoff_next(int64_t last_ms);

/* A push's kind with sharded pub/sub's "s" taken off ("smessage" ->
 * "message", "ssubscribe", "sunsubscribe"): both modes read alike. */
const char *dlock__push_kind(const char *kind);

#endif
