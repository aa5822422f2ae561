/* dlock multi-lock and RedLock: locks made of other locks.
 *
 * Both are dlock_lock handles built over member handles, which may belong to
 * different clients (different Redis servers), and both can be used anywhere
 * a lock can. The members stay owned by the caller: free the combinator
 * first, then the members. A member must not be freed while a combinator
 * over it is in use.
 *
 * Thread-safety: as for every lock (lock.h). The owner of a combinator's
 * holds (the calling thread, or the id bound to the combinator) is the owner
 * of its members' holds.
 */
#ifndef DLOCK_MULTI_H
#define DLOCK_MULTI_H

#include "dlock/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A multi-lock: held only when every member is held (Redisson
 * RedissonMultiLock). Acquire never holds a member while it waits for
 * another, so groups over the same members in different orders cannot
 * deadlock; on failure or timeout every member taken is released. Release
 * releases all and returns the first error.
 * locks  1..128 member handles (borrowed; any kinds).
 * out    OUT: the multi-lock (kind "multi"), NULL on failure.
 * Errors: DLOCK_EINVAL (NULL, n out of range, a NULL member), DLOCK_ENOMEM. */
DLOCK_API int dlock_multi_new(dlock_lock *const *locks, size_t n,
                              dlock_lock **out);

/* A grouped multi-lock (Redisson RedissonFasterMultiLock,
 * getMultiLock(group, values)): the n values of one group, all or none,
 * taken in one script on one hash (the group's name), however many they
 * are: "lock these 1,000 rows of one table". Each value is its bytes
 * (lens[i], or strlen when lens is NULL); a Java client shares a value
 * when its codec encodes it to the same bytes (StringCodec: UTF-8).
 * Repeated values count once. Reentrant per owner; lease, watchdog,
 * waiting, release, force release (of these values) and state as for the
 * other locks; a release wakes every waiter of the group.
 * client  the client, referenced until dlock_lock_free().
 * group   the group's name (the hash's key), NUL-terminated unless
 *         opts->name_len is set.
 * values  1 .. 100,000 values, none NULL.
 * out     OUT: the lock (kind "group"), NULL on failure.
 * Errors: DLOCK_EINVAL (NULL, empty or over-long name, no values, a NULL
 * value), DLOCK_ENOMEM, DLOCK_ECLOSED. See docs/group.md. */
DLOCK_API int dlock_group_lock_new(dlock_client *client, const char *group,
                                   const char *const *values,
                                   const size_t *lens, size_t n,
                                   const dlock_lock_opts *opts,
                                   dlock_lock **out);

/* Called once when a RedLock held under the watchdog can no longer be
 * renewed on a majority of its members (so it may be held by someone else).
 * Runs on the engine thread of the member whose loss tipped the balance;
 * must not block. redlock is the handle (valid unless freed). */
typedef void dlock_redlock_lost_fn(void *data, dlock_lock *redlock,
                                   uint64_t owner_id);

typedef struct dlock_redlock_opts {
  unsigned version;          /* DLOCK_REDLOCK_OPTS_VERSION */
  int64_t member_timeout_ms; /* how long one round waits for a member's
                                answer, far below the lease (default 50) */
  int64_t retry_min_ms;      /* random delay between failed rounds, */
  int64_t retry_max_ms;      /* within the wait budget (default 5..50) */
  dlock_redlock_lost_fn *on_lost;
  void *on_lost_data;
} dlock_redlock_opts;

#define DLOCK_REDLOCK_OPTS_VERSION 1u
#define DLOCK_REDLOCK_OPTS_INIT                                               \
  { .version = DLOCK_REDLOCK_OPTS_VERSION, .member_timeout_ms = 50,           \
    .retry_min_ms = 5, .retry_max_ms = 50 }

/* A RedLock over n independent masters (the Redlock algorithm of redis.io),
 * asking every member in parallel.
 * locks  1..128 reentrant or fenced lock handles, normally one per server
 *        (borrowed).
 * opts   NULL for the defaults.
 * out    OUT: the RedLock (kind "redlock", DLOCK_CAP_MULTI_NODE), NULL on
 *        failure.
 * Acquire succeeds with a majority (n/2+1) of members granted within
 * member_timeout_ms AND a positive validity = lease - elapsed - drift (drift
 * = lease/100 + 2 ms), reported in dlock_grant.validity_ms. A failed round
 * releases every member (also those that did not answer) and retries after a
 * random delay within the wait budget; when the budget is spent (or after
 * the one round of a wait of 0) it returns DLOCK_EQUORUM with dlock_errmsg()
 * naming each member that failed and why.
 * With DLOCK_LEASE_WATCHDOG every member's client renews its member; when a
 * majority can no longer be renewed, opts->on_lost runs once.
 * Release releases every member in parallel: DLOCK_OK when a majority
 * confirmed, DLOCK_ELOST when the leases ran out, DLOCK_EQUORUM otherwise.
 * Errors: DLOCK_EINVAL (NULL, n out of range, a member that is not a
 * reentrant or fenced lock, bad options), DLOCK_ENOMEM. */
DLOCK_API int dlock_redlock_new(dlock_lock *const *locks, size_t n,
                                const dlock_redlock_opts *opts,
                                dlock_lock **out);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_MULTI_H */
