/* The dlock lock interface: one set of calls for every kind of lock.
 *
 * A dlock_lock is a handle on one named lock. Its kind (reentrant, fenced,
 * non-reentrant, spin, fair, read, write, multi, grouped multi, RedLock,
 * the semaphore lock) is chosen when the handle is made; everything else
 * works on any kind through the calls below, which dispatch through the
 * kind's method table. A method a kind lacks returns DLOCK_ENOTSUP.
 *
 * Owner: by default the owner of a hold is the calling thread ("U:T" on the
 * wire), so one handle may be shared by many threads and each thread holds
 * and re-enters on its own, like a Redisson RLock. dlock_lock_bind_owner()
 * binds a handle to an explicit owner id instead, for work that moves between
 * threads.
 *
 * Thread-safety: any thread, concurrently on one handle, except
 * dlock_lock_free() and dlock_lock_bind_owner(), which must not race with
 * other calls on the same handle. None of the blocking calls may be made from
 * a lost-lock callback (the engine thread): they return DLOCK_EINVAL there.
 */
#ifndef DLOCK_LOCK_H
#define DLOCK_LOCK_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_lock dlock_lock;

/* DLOCK_WAIT_FOREVER, DLOCK_LEASE_WATCHDOG and DLOCK_NAME_MAX are in
 * dlock/client.h (included above). */

/* Capability bits (dlock_lock_caps). */
#define DLOCK_CAP_REENTRANT 0x01u  /* the same owner may acquire again */
#define DLOCK_CAP_SHARED 0x02u     /* several owners may hold at once */
#define DLOCK_CAP_FAIR 0x04u       /* FIFO grants */
#define DLOCK_CAP_FENCED 0x08u     /* grants carry a fencing token */
#define DLOCK_CAP_MULTI_NODE 0x10u /* spans several Redis servers */

typedef struct dlock_lock_opts {
  unsigned version;     /* DLOCK_LOCK_OPTS_VERSION (1 to 3 are accepted) */
  size_t name_len;      /* 0 = strlen(name); set it for names with NUL bytes */
  int64_t wait_slot_ms; /* fair lock: a queued dlock waiter that has not
                           re-tried for this long is dead and loses its place;
                           live waiters re-try every third of it. 0 = 5000 */
  /* version 2 */
  int64_t thread_wait_ms; /* fair lock: Redisson's threadWaitTime, the step of
                             the queue's deadlines; every client of one fair
                             lock, C or Java, must use the same value.
                             0 = 300000, Redisson's default */
  /* version 3: the spin lock's pause between tries (it uses no pub/sub).
   * Exponential by default, Redisson's ExponentialBackOff: spin_initial_ms
   * (0 = 1), then each pause spin_multiplier (0 = 2) times the last plus a
   * random jitter that grows with the failed tries, at most spin_max_ms
   * (0 = 128). spin_delay_ms > 0: a constant pause instead (Redisson's
   * ConstantBackOff, 64 there), plus up to an eighth of it as jitter. Every
   * pause ends at the holder's lease end and the wait's budget. */
  int64_t spin_initial_ms;
  int64_t spin_max_ms;
  int64_t spin_delay_ms;
  int spin_multiplier;
} dlock_lock_opts;

#define DLOCK_LOCK_OPTS_VERSION 3u
#define DLOCK_LOCK_OPTS_INIT { .version = DLOCK_LOCK_OPTS_VERSION }

/* What a successful acquire grants (dlock_acquire_grant). */
typedef struct dlock_grant {
  int64_t token;       /* fencing token (fenced kinds), else 0 */
  int64_t validity_ms; /* how long the hold is certainly valid from when
                          acquire returned (the lease less the time the call
                          took) */
} dlock_grant;

typedef struct dlock_lock_state {
  int locked;          /* held by anyone */
  int held_by_me;      /* held by the calling (or bound) owner */
  int64_t hold_count;  /* the caller's re-entry count, 0 when not held */
  int64_t ttl_ms;      /* remaining lease; -2 when free, -1 when no TTL */
} dlock_lock_state;

/* Make a reentrant lock handle named name (Redisson RLock layout).
 * client  the client it talks through; the handle keeps its memory alive.
 * name    any bytes, 1..DLOCK_NAME_MAX long (copied).
 * opts    NULL for the defaults.
 * out     OUT: the handle, NULL on failure.
 * Errors: DLOCK_EINVAL (NULL, empty or over-long name), DLOCK_ENOMEM,
 * DLOCK_ECLOSED (client closed). No Redis traffic. */
DLOCK_API int dlock_reentrant_lock_new(dlock_client *client, const char *name,
                                       const dlock_lock_opts *opts,
                                       dlock_lock **out);

/* Make a fenced lock handle: a reentrant lock whose every grant (re-entry
 * included) returns a fencing token from redisson_lock_token:{name} that
 * strictly increases across all holders. Arguments and errors as for
 * dlock_reentrant_lock_new(). */
DLOCK_API int dlock_fenced_lock_new(dlock_client *client, const char *name,
                                    const dlock_lock_opts *opts,
                                    dlock_lock **out);

/* Make a non-reentrant lock handle (Redisson 4.4+ RNonReentrantLock): the
 * reentrant lock's keys and layout, but a second acquire by the owner that
 * holds it fails with DLOCK_EREENTRY (the hold stays, counted once), so a
 * Java client and dlock on one name exclude each other. Arguments and
 * errors as for dlock_reentrant_lock_new(). See docs/lock.md. */
DLOCK_API int dlock_non_reentrant_lock_new(dlock_client *client,
                                           const char *name,
                                           const dlock_lock_opts *opts,
                                           dlock_lock **out);

/* Make a spin lock handle (Redisson RSpinLock): the reentrant lock's hash,
 * lease, watchdog, release and state, and no pub/sub at all: a waiter
 * pauses between tries by a back-off (opts: spin_*), and a release
 * publishes nothing. For servers or proxies without pub/sub, ACL users
 * without +subscribe, and very many locks whose channels would load a
 * cluster; a hand-off takes up to a pause longer than the pub/sub lock's.
 * Arguments and errors as for dlock_reentrant_lock_new(); DLOCK_EINVAL for
 * a negative spin option. See docs/spin.md. */
DLOCK_API int dlock_spin_lock_new(dlock_client *client, const char *name,
                                  const dlock_lock_opts *opts,
                                  dlock_lock **out);

/* Make a fair lock handle (Redisson RFairLock layout and arithmetic, shared
 * with Java clients): waiters get the lock in the order they queued, and
 * only the next one is woken on release. A dlock waiter that dies is skipped
 * within opts->wait_slot_ms. Arguments and errors as for
 * dlock_reentrant_lock_new(); DLOCK_EINVAL for a negative wait slot or
 * thread wait time. See docs/fair.md. */
DLOCK_API int dlock_fair_lock_new(dlock_client *client, const char *name,
                                  const dlock_lock_opts *opts,
                                  dlock_lock **out);

/* Make a non-reentrant fair lock handle (Redisson 4.4+
 * RNonReentrantFairLock): the fair lock's keys, queue and arithmetic, but a
 * second acquire by the owner that holds it fails with DLOCK_EREENTRY (the
 * hold stays, counted once). Arguments and errors as for
 * dlock_fair_lock_new(). See docs/fair.md. */
DLOCK_API int dlock_non_reentrant_fair_lock_new(dlock_client *client,
                                                const char *name,
                                                const dlock_lock_opts *opts,
                                                dlock_lock **out);

/* Acquire: try, then wait for the lock up to wait_ms (woken by pub/sub; the
 * spin lock retries after a back-off instead), holding it for lease_ms or
 * under the watchdog.
 * Returns DLOCK_OK when held (again, for a re-entry), DLOCK_EBUSY when
 * wait_ms is 0 and another owner holds it, DLOCK_ETIMEDOUT when the budget
 * ran out, DLOCK_EINTR (dlock_interrupt() ended the wait: nothing held),
 * DLOCK_EREENTRY (a non-reentrant kind the owner holds already: the hold
 * stays, counted once), DLOCK_ELOST (granted, but the lease had run out
 * when the answer was read: the process was stopped while the try was
 * out, or the link is slower than the lease; given back, nothing held),
 * DLOCK_EDEADLK (a read-write lock's write half asked
 * by an owner that holds its read half: it would wait for itself), DLOCK_EQUORUM (a RedLock without a quorum of its
 * members), DLOCK_EINVAL (bad arguments, engine thread), DLOCK_EIO (no
 * connection within the connect or command timeout), DLOCK_EKIND (the name
 * holds another kind of object, or data that is not dlock's: nothing was
 * changed), DLOCK_ETLS and DLOCK_ECONFIG (the client's settings do not fit
 * the server: see docs/errors.md), DLOCK_EREDIS (another server error),
 * DLOCK_ECLOSED. */
DLOCK_API int dlock_acquire(dlock_lock *lock, int64_t wait_ms, int64_t lease_ms);

/* dlock_acquire() that also fills *grant (may be NULL) on success. */
DLOCK_API int dlock_acquire_grant(dlock_lock *lock, int64_t wait_ms,
                                  int64_t lease_ms, dlock_grant *grant);

/* Try once: dlock_acquire(lock, 0, lease_ms). */
DLOCK_API int dlock_try_acquire(dlock_lock *lock, int64_t lease_ms);

/* Release one hold of the caller. A partial release (re-entries remain)
 * re-arms the lease. The call is idempotent on the server and retried once
 * when its reply is lost to a timeout.
 * Returns DLOCK_OK, DLOCK_ENOTOWNER (the caller holds no hold on it),
 * DLOCK_ELOST (the caller held it but the lease ran out or the key was
 * removed; the hold is gone; also after its loss was reported to the lost
 * callback even if the key outlived it: it is released then all the same),
 * DLOCK_EIO, DLOCK_EREDIS, DLOCK_ECLOSED. */
DLOCK_API int dlock_release(dlock_lock *lock);

/* Interrupt the acquires of lock that are waiting now, in any thread (for a
 * multi-lock or RedLock: its members' waits too). Each returns DLOCK_EINTR
 * promptly and leaves nothing behind: no hold, no fair-queue entry, no
 * subscription. An acquire that starts waiting after this call is not
 * affected; one whose last try already succeeded returns DLOCK_OK, and
 * so does one whose try is in flight (the first, before any wait, or a
 * question after a lost answer): it is not waiting, and the answer decides
 * within command_timeout_ms (dlock_cancel() ends an async acquire's try in
 * flight as well, and gives its grant back). OUT
 * *count (may be NULL): how many waits were interrupted. Errors:
 * DLOCK_EINVAL (NULL lock). */
DLOCK_API int dlock_interrupt(dlock_lock *lock, int *count);

/* The same for every wait under way in this process by owner (a
 * dlock_thread_id() or an id bound with dlock_lock_bind_owner), on any lock,
 * latch or semaphore of any client. Synchronizers wait as the calling
 * thread's id. */
DLOCK_API int dlock_interrupt_owner(uint64_t owner, int *count);

/* Delete the lock whoever holds it, and wake its waiters.
 * OUT *released (may be NULL): 1 when a lock was deleted, 0 when it was
 * free (nothing to release). Returns DLOCK_OK, or DLOCK_EIO, DLOCK_EREDIS,
 * DLOCK_ECLOSED, DLOCK_ENOTSUP. Holders are told by their next renewal
 * (lost callback) or release (DLOCK_ELOST). */
DLOCK_API int dlock_force_release(dlock_lock *lock, int *released);

/* One consistent snapshot of the lock's state on the server (OUT *state).
 * DLOCK_EKIND when the name holds another kind (a count, a list, a
 * read-write lock for a lock, a lock for a read-write lock: the message
 * names it), DLOCK_EINVAL (NULL arguments), or the errors of any call. */
DLOCK_API int dlock_lock_state_get(dlock_lock *lock, dlock_lock_state *state);

/* Bind the handle to an explicit owner id (from dlock_owner_id_new()), so
 * holds belong to that id whatever thread calls; 0 goes back to per-thread
 * owners. Returns DLOCK_OK or DLOCK_EINVAL. */
DLOCK_API int dlock_lock_bind_owner(dlock_lock *lock, uint64_t owner_id);

/* The kind's name ("reentrant", "fenced", ...); "" for NULL. */
DLOCK_API const char *dlock_lock_kind(const dlock_lock *lock);

/* Make a lock of a kind chosen by its name. The lock is what the kind's
 * own constructor makes (dlock_reentrant_lock_new, dlock_fair_lock_new,
 * ...), so a program picks the kind per resource from its configuration
 * rather than its code (docs/lock.md, "Choosing the kind at run time").
 * kind is a
 * name dlock_kinds() lists, as dlock_lock_kind() gives it ("reentrant",
 * "fenced", "non-reentrant", "fair", "non-reentrant fair", "spin",
 * "read", "write", "semaphore"); a hyphen may stand for a space
 * ("non-reentrant-fair"). OUT *out: free with dlock_lock_free().
 *
 * Returns DLOCK_OK; DLOCK_EINVAL for a NULL or unknown kind (the message
 * lists the kinds; the multi-lock, grouped multi-lock and RedLock are made
 * of other locks by their own calls), and as the kind's constructor: a bad
 * name or option (DLOCK_EINVAL), DLOCK_ECLOSED, DLOCK_ENOMEM. */
DLOCK_API int dlock_lock_new(dlock_client *client, const char *kind,
                             const char *name, const dlock_lock_opts *opts,
                             dlock_lock **out);

/* The names of the kinds dlock_lock_new() makes. A NULL-terminated array,
 * in a fixed order, built-in kinds first (static: do not free). */
DLOCK_API const char *const *dlock_kinds(void);

/* A kind's name as dlock_kinds() lists it. kind is read as
 * dlock_lock_new() reads it (a hyphen may stand for a space:
 * "non-reentrant-fair" gives "non-reentrant fair"). Returns the listed
 * name (static: do not free), or NULL when no kind has it or kind is
 * NULL. */
DLOCK_API const char *dlock_kind_name(const char *kind);

/* The kind's DLOCK_CAP_* bits; 0 for NULL. */
DLOCK_API unsigned dlock_lock_caps(const dlock_lock *lock);

/* The lock's name and its length (OUT *len, may be NULL). Valid as long as
 * the handle. NULL for a NULL lock. */
DLOCK_API const char *dlock_lock_name(const dlock_lock *lock, size_t *len);

/* Free the handle. Holds it still has are NOT released (their leases run out;
 * watchdog holds are renewed until released through another handle of the
 * same name and owner, or the client closes). NULL is a no-op. */
DLOCK_API void dlock_lock_free(dlock_lock *lock);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_LOCK_H */
