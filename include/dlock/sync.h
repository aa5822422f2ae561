/* dlock synchronizers: CountDownLatch, Semaphore, and the expirable-permit
 * Semaphore (Redisson RCountDownLatch, RSemaphore, RPermitExpirableSemaphore
 * layouts), sharing the client's engine and pub/sub waiter.
 *
 * Conventions, as for locks: constructors copy the name (opts->name_len for
 * names with NUL bytes) and make no Redis traffic; every object has one
 * _free (NULL is a no-op); waits are wait_ms = 0 (try once), > 0 (budget) or
 * DLOCK_WAIT_FOREVER; errors are DLOCK_* codes with dlock_errmsg() detail.
 * Waiting is by pub/sub wake-ups, never polling.
 *
 * Thread-safety: every call may be made from any thread, concurrently on one
 * object, except _free. Blocking calls must not be made from a lost-lock
 * callback (DLOCK_EINVAL there).
 */
#ifndef DLOCK_SYNC_H
#define DLOCK_SYNC_H

#include "dlock/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CountDownLatch ------------------------------------------------------- */

typedef struct dlock_latch dlock_latch;

/* Make a latch handle. Errors: DLOCK_EINVAL, DLOCK_ENOMEM, DLOCK_ECLOSED. */
DLOCK_API int dlock_latch_new(dlock_client *client, const char *name,
                              const dlock_lock_opts *opts, dlock_latch **out);

/* Set the count (>= 1), only when the latch is not set (count 0 / missing).
 * OUT *set (may be NULL): 1 when set, 0 when it was already set. Returns
 * DLOCK_OK or an error. Waiters re-check (a new count closes the latch
 * again). */
DLOCK_API int dlock_latch_try_set_count(dlock_latch *latch, int64_t count,
                                        int *set);

/* Count down by one (never below 0); at 0 every waiter everywhere is woken.
 * OUT *left (may be NULL): the count after. */
DLOCK_API int dlock_latch_count_down(dlock_latch *latch, int64_t *left);

/* The current count (0 for a missing latch). DLOCK_EKIND when the name
 * holds something else (a lock, a list, a string that is not a count: the
 * message names it). */
DLOCK_API int dlock_latch_get_count(dlock_latch *latch, int64_t *count);

/* Wait until the count is 0. Returns DLOCK_OK (at once for 0 or a missing
 * latch), DLOCK_ETIMEDOUT when the budget ran out (DLOCK_EBUSY for a
 * wait_ms of 0 and a count above 0), DLOCK_EINTR (dlock_latch_interrupt()),
 * DLOCK_EKIND (the name holds something else: the message names it), or
 * an error. */
DLOCK_API int dlock_latch_await(dlock_latch *latch, int64_t wait_ms);

/* Delete the latch (waiters re-check and see 0). OUT *deleted (may be
 * NULL): 1 when deleted, 0 when there was none. Returns DLOCK_OK or an
 * error. */
DLOCK_API int dlock_latch_delete(dlock_latch *latch, int *deleted);

/* Interrupt the dlock_latch_await calls on this handle that are
 * waiting now: they return DLOCK_EINTR (as dlock_interrupt() for locks).
 * OUT *count may be NULL. */
DLOCK_API int dlock_latch_interrupt(dlock_latch *latch, int *count);
DLOCK_API void dlock_latch_free(dlock_latch *latch);

/* ---- Semaphore ------------------------------------------------------------ */

typedef struct dlock_semaphore dlock_semaphore;

/* Make a semaphore handle (key N = count of available permits). Errors:
 * DLOCK_EINVAL (NULL, empty or over-long name), DLOCK_ENOMEM,
 * DLOCK_ECLOSED. */
DLOCK_API int dlock_semaphore_new(dlock_client *client, const char *name,
                                  const dlock_lock_opts *opts,
                                  dlock_semaphore **out);

/* Set the number of permits (>= 0), only when not set yet; ttl_ms > 0 makes
 * the whole semaphore expire (0 = never). OUT *set (may be NULL): 1 set, 0
 * already set. Returns DLOCK_OK or an error. */
DLOCK_API int dlock_semaphore_try_set_permits(dlock_semaphore *sem,
                                              int64_t permits, int64_t ttl_ms,
                                              int *set);

/* Set the number of permits (>= 0) whatever it was (Redisson's setPermits).
 * This semaphore keeps no record of permits taken, so it sets the available
 * count; a TTL is kept. Waiters are told when it changed. OUT *available
 * (may be NULL): the count after. */
DLOCK_API int dlock_semaphore_set_permits(dlock_semaphore *sem, int64_t permits,
                                          int64_t *available);

/* Take n permits (n >= 0; 0 is a no-op), waiting up to wait_ms.
 * Returns DLOCK_OK, DLOCK_EBUSY (wait_ms 0, too few), DLOCK_ETIMEDOUT.
 * Waiters of this client are served in arrival order: a waiter for many
 * permits is not overtaken by later waiters for fewer (docs/semaphore.md). */
DLOCK_API int dlock_semaphore_acquire(dlock_semaphore *sem, int64_t n,
                                      int64_t wait_ms);

/* Give back n permits (n >= 0; 0 is a no-op). Creates the semaphore when it
 * is missing. Wakes as many waiters as the permits can serve. */
DLOCK_API int dlock_semaphore_release(dlock_semaphore *sem, int64_t n);

/* Available permits now (may be negative after a negative add).
 * DLOCK_EKIND when the name holds something else (the message names it). */
DLOCK_API int dlock_semaphore_available(dlock_semaphore *sem, int64_t *n);

/* Take every available permit; OUT *drained (may be NULL) how many. */
DLOCK_API int dlock_semaphore_drain(dlock_semaphore *sem, int64_t *drained);

/* Add delta permits (may be negative: the count may go below 0).
 * OUT *available (may be NULL): the count after. */
DLOCK_API int dlock_semaphore_add_permits(dlock_semaphore *sem, int64_t delta,
                                          int64_t *available);

/* Interrupt the dlock_semaphore_acquire calls on this handle that are
 * waiting now: they return DLOCK_EINTR (as dlock_interrupt() for locks).
 * OUT *count may be NULL. */
DLOCK_API int dlock_semaphore_interrupt(dlock_semaphore *sem, int *count);
DLOCK_API void dlock_semaphore_free(dlock_semaphore *sem);

/* ---- Expirable-permit semaphore ------------------------------------------ */

typedef struct dlock_permits dlock_permits;

/* A permit id: 32 lower-case hex characters and a NUL. */
typedef struct dlock_permit_id {
  char hex[33];
} dlock_permit_id;

/* Make an expirable-permit semaphore handle (keys N and {N}:timeout). */
DLOCK_API int dlock_permits_new(dlock_client *client, const char *name,
                                const dlock_lock_opts *opts,
                                dlock_permits **out);

/* As dlock_semaphore_try_set_permits: the total, only when not set yet;
 * ttl_ms > 0 makes it expire (0 = never). */
DLOCK_API int dlock_permits_try_set_permits(dlock_permits *p, int64_t permits,
                                            int64_t ttl_ms, int *set);

/* Set the total number of permits (>= 0) whatever it was (Redisson's
 * setPermits): the available count moves by the difference between the new
 * total and the old one (available + taken), so it goes below 0 when more
 * permits are taken than the new total (they come back as they are
 * released or expire). A TTL is kept. Waiters are told when it changed.
 * OUT *available (may be NULL): the count after. */
DLOCK_API int dlock_permits_set_permits(dlock_permits *p, int64_t permits,
                                        int64_t *available);

/* Add delta permits (may be negative). OUT *available may be NULL. */
DLOCK_API int dlock_permits_add_permits(dlock_permits *p, int64_t delta,
                                        int64_t *available);

/* Take n permits (1..64), waiting up to wait_ms. Each permit gets its own id
 * (OUT ids[0..n-1]) and lease: lease_ms > 0, or DLOCK_LEASE_WATCHDOG: a
 * lease of the watchdog timeout, renewed until released, so a crashed
 * holder's permits come back within the watchdog timeout. Expired permits
 * go back to the pool by themselves. Errors as dlock_semaphore_acquire. */
DLOCK_API int dlock_permits_acquire(dlock_permits *p, size_t n, int64_t wait_ms,
                                    int64_t lease_ms, dlock_permit_id *ids);

/* Release n permits, all or nothing. Returns DLOCK_OK; DLOCK_ELOST when one
 * of them was held through this client but expired; DLOCK_ENOTOWNER when
 * one is unknown (never acquired, already released, or expired elsewhere);
 * in both cases nothing was released. DLOCK_ELOST also when the permits
 * were released but the loss of one had been reported to the lost callback
 * (it outlived the lease the client knew of). DLOCK_EINVAL for a malformed
 * id. */
DLOCK_API int dlock_permits_release(dlock_permits *p, const dlock_permit_id *ids,
                                    size_t n);

/* Give a held permit a new lease (lease_ms > 0, or DLOCK_LEASE_WATCHDOG for
 * one that never expires). OUT *updated (may be NULL): 1 updated, 0 unknown
 * or expired. Returns DLOCK_OK or an error. */
DLOCK_API int dlock_permits_update_lease(dlock_permits *p,
                                         const dlock_permit_id *id,
                                         int64_t lease_ms, int *updated);

/* Remaining lease of a permit: ms, -1 never expires, -2 unknown/expired.
 * DLOCK_EKIND when the name holds something else (the message names it). */
DLOCK_API int dlock_permits_lease_remaining(dlock_permits *p,
                                            const dlock_permit_id *id,
                                            int64_t *ms);

/* Available and acquired (live) permits; either pointer may be NULL.
 * DLOCK_EKIND when the name holds something else (the message names it). */
DLOCK_API int dlock_permits_counts(dlock_permits *p, int64_t *available,
                                   int64_t *acquired);

/* Interrupt the dlock_permits_acquire calls on this handle that are
 * waiting now: they return DLOCK_EINTR (as dlock_interrupt() for locks).
 * OUT *count may be NULL. */
DLOCK_API int dlock_permits_interrupt(dlock_permits *p, int *count);
DLOCK_API void dlock_permits_free(dlock_permits *p);

/* ---- A semaphore as a lock ------------------------------------------------- */

/* A dlock_lock whose acquire takes one permit of the expirable-permit
 * semaphore name (set its permits first with dlock_permits_try_set_permits)
 * and whose release gives back the permit the same owner took last. With
 * 1 permit it is a mutex that survives its holder's crash (permit leases);
 * with P permits at most P owners hold it at once. Not reentrant: an owner
 * acquiring twice takes two permits. Kind "semaphore", caps
 * DLOCK_CAP_SHARED. Force release is DLOCK_ENOTSUP. */
DLOCK_API int dlock_semaphore_lock_new(dlock_client *client, const char *name,
                                       const dlock_lock_opts *opts,
                                       dlock_lock **out);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_SYNC_H */
