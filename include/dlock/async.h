/* Non-blocking calls: locks for event-loop programs (docs/async.md).
 *
 * Each call here starts an operation and returns at once; its outcome comes
 * to a completion callback, called exactly once per operation that started
 * (a call that returns an error started nothing and calls nothing back;
 * an election's observer, dlock/election.h, is called once per change,
 * then once at its end).
 * The callback never runs inside the call that started the operation.
 *
 * Where callbacks run is chosen per client (dlock_client_opts.completions):
 *   DLOCK_COMPLETE_ENGINE  on the client's engine thread, as soon as the
 *                          outcome is known. Same rules as the lost-lock
 *                          callback: return quickly, no blocking dlock call
 *                          (they fail with DLOCK_EINVAL there); async calls
 *                          are fine.
 *   DLOCK_COMPLETE_QUEUE   on the application's thread: outcomes wait in the
 *                          client's completion queue, whose file descriptor
 *                          (dlock_client_completion_fd) is readable while
 *                          any wait; dlock_client_run_completions() runs
 *                          them. Add the descriptor to the program's loop
 *                          (uv_poll, epoll, poll).
 *
 * Owners: an event loop serves many requests on one thread, so async holds
 * belong to an explicit owner id (dlock_owner_id_new()), passed to each
 * call, or bound to the handle (dlock_lock_bind_owner) and passed as 0. A
 * blocking call on a handle bound to the same id, or made on the thread
 * whose dlock_thread_id() is that id, shares the holds: either kind of call
 * releases what the other acquired.
 *
 * Handles: a lock handle must outlive the operations started on it.
 */
#ifndef DLOCK_ASYNC_H
#define DLOCK_ASYNC_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"
#include "dlock/lock.h"
#include "dlock/sync.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pending operation: a number unique within the process, never reused;
 * 0 is none. Only good for dlock_cancel(): the operation is gone once its
 * callback has run. */
typedef uint64_t dlock_op;

/* An operation's outcome, valid during the callback only. */
typedef struct dlock_result {
  dlock_op op;            /* which operation */
  int rc;                 /* DLOCK_OK or an error code, as the blocking call
                             returns them; DLOCK_ECANCELED after
                             dlock_cancel(), DLOCK_ECLOSED when the client
                             closed first */
  const char *errmsg;     /* the detail dlock_errmsg() would give ("" on
                             success) */
  dlock_grant grant;      /* lock acquire: the grant (token, validity) */
  int released;           /* force release: 1 deleted, 0 it was free */
  dlock_lock_state state; /* lock state: the snapshot */
  int64_t count;          /* latch: the count (get), the count left (count
                             down) */
  int set;                /* latch try_set_count: 1 set, 0 it was set */
  const dlock_permit_id *ids; /* permits acquire: the n permits' ids */
  size_t n;
  struct dlock_reply *reply;  /* guarded write (dlock/reply.h): the
                                 command's reply, NULL on failure; freed
                                 after the callback */
  const struct dlock_election_event *election; /* an election's observer
                                 (dlock/election.h): the change; NULL in
                                 its last call */
} dlock_result;

/* data: the caller's pointer given with the call. */
typedef void dlock_done_fn(void *data, const dlock_result *result);

/* dlock_client_opts.completions: DLOCK_COMPLETE_ENGINE, DLOCK_COMPLETE_QUEUE
 * (dlock/client.h) */

/* The completion queue's file descriptor (DLOCK_COMPLETE_QUEUE clients): it
 * polls readable while completions wait. Owned by the client: do not read
 * or close it. -1 with DLOCK_EINVAL in dlock_errmsg() for a NULL client or
 * one that completes on its engine thread. */
DLOCK_API int dlock_client_completion_fd(dlock_client *client);

/* Run up to max (<= 0: all) waiting completions' callbacks on the calling
 * thread, oldest first. Returns how many ran (0 when none waited), or
 * DLOCK_EINVAL (NULL client, not a queue client, called from a completion
 * callback of the same client). Callbacks may start new operations and
 * cancel others; those complete in a later run. */
DLOCK_API int dlock_client_run_completions(dlock_client *client, int max);

/* Start an acquire of lock by owner (0: the handle's bound owner; one is
 * needed), waiting up to wait_ms (0 = try once, DLOCK_WAIT_FOREVER) and
 * holding it for lease_ms or under the watchdog (DLOCK_LEASE_WATCHDOG), as
 * dlock_acquire_grant(). The wait takes no thread: pub/sub wake-ups and
 * timers on the engine. OUT *op (may be NULL): the operation. Result: rc
 * and grant. Errors at the call: DLOCK_EINVAL (NULL lock or done, bad
 * values, no owner), DLOCK_ENOTSUP (a multi-lock or RedLock whose
 * members' clients run on several engine threads, or a multi-lock over
 * semaphore locks), DLOCK_ECLOSED, DLOCK_ENOMEM. */
DLOCK_API int dlock_acquire_async(dlock_lock *lock, uint64_t owner,
                                  int64_t wait_ms, int64_t lease_ms,
                                  dlock_done_fn *done, void *data,
                                  dlock_op *op);

/* Start a release of one hold of owner (0: the bound owner), as
 * dlock_release(). Result: rc (DLOCK_OK, DLOCK_ENOTOWNER, DLOCK_ELOST, ...). */
DLOCK_API int dlock_release_async(dlock_lock *lock, uint64_t owner,
                                  dlock_done_fn *done, void *data,
                                  dlock_op *op);

/* Start a force release, as dlock_force_release(). Result: rc, released. */
DLOCK_API int dlock_force_release_async(dlock_lock *lock, dlock_done_fn *done,
                                        void *data, dlock_op *op);

/* Start a state query for owner (0: the bound owner, or none: held_by_me
 * and hold_count then say nothing), as dlock_lock_state_get(). Result: rc,
 * state. */
DLOCK_API int dlock_lock_state_async(dlock_lock *lock, uint64_t owner,
                                     dlock_done_fn *done, void *data,
                                     dlock_op *op);

/* ---- synchronizers (dlock/sync.h): the same calls, completed by callback --- */

/* Count down (result: count, the count left), read the count (count), set
 * the count if unset (set: 1 set, 0 it was set; count >= 1), as the
 * blocking calls. */
DLOCK_API int dlock_latch_count_down_async(dlock_latch *latch,
                                           dlock_done_fn *done, void *data,
                                           dlock_op *op);
DLOCK_API int dlock_latch_get_count_async(dlock_latch *latch,
                                          dlock_done_fn *done, void *data,
                                          dlock_op *op);
DLOCK_API int dlock_latch_try_set_count_async(dlock_latch *latch, int64_t count,
                                              dlock_done_fn *done, void *data,
                                              dlock_op *op);
/* Wait until the count is zero, up to wait_ms (0: check once, DLOCK_EBUSY
 * when not zero; DLOCK_WAIT_FOREVER), without a thread. Cancellable. */
DLOCK_API int dlock_latch_await_async(dlock_latch *latch, int64_t wait_ms,
                                      dlock_done_fn *done, void *data,
                                      dlock_op *op);

/* Take n permits, waiting up to wait_ms without a thread (this client's
 * waiters in arrival order, as dlock_semaphore_acquire). Cancellable: permits
 * taken for a cancelled acquire are given back. */
DLOCK_API int dlock_semaphore_acquire_async(dlock_semaphore *sem, int64_t n,
                                            int64_t wait_ms,
                                            dlock_done_fn *done, void *data,
                                            dlock_op *op);
DLOCK_API int dlock_semaphore_release_async(dlock_semaphore *sem, int64_t n,
                                            dlock_done_fn *done, void *data,
                                            dlock_op *op);

/* Take n (1..64) expirable permits for lease_ms (or under the watchdog),
 * waiting up to wait_ms without a thread. Result: ids and n (valid during
 * the callback: copy them). Cancellable: permits taken for a cancelled
 * acquire are given back. */
DLOCK_API int dlock_permits_acquire_async(dlock_permits *p, size_t n,
                                          int64_t wait_ms, int64_t lease_ms,
                                          dlock_done_fn *done, void *data,
                                          dlock_op *op);
/* Release n permits by id (the ids are copied). */
DLOCK_API int dlock_permits_release_async(dlock_permits *p,
                                          const dlock_permit_id *ids, size_t n,
                                          dlock_done_fn *done, void *data,
                                          dlock_op *op);

/* Cancel an acquire (of a lock, semaphore or permits) or a latch's await.
 * Its wait stops at once; a grant that raced the cancel
 * is released again: a cancelled acquire never leaves a hold. Its callback
 * then reports DLOCK_ECANCELED (DLOCK_ECLOSED when the client closed
 * first). Returns DLOCK_OK when op was a pending acquire (its callback has
 * not run yet and will say so), DLOCK_ENOTSUP for another pending operation
 * (a release, a state query: they do not wait and complete as usual), or
 * DLOCK_EINVAL when op is not pending (0, unknown, or already completed:
 * too late). */
DLOCK_API int dlock_cancel(dlock_op op);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_ASYNC_H */
