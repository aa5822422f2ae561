/* dlock read-write lock (Redisson RReadWriteLock layout).
 *
 * One name, two locks: any number of readers hold the read lock together;
 * the write lock excludes everyone. Both are dlock_lock handles, usable
 * anywhere a lock is (dlock_acquire, dlock_release, ...).
 *
 * - Reads and writes are reentrant per owner (thread or bound owner).
 * - Downgrade: a writer may take the read lock too; when it then releases
 *   the write lock it keeps reading (and other readers may enter).
 * - Upgrade is refused: acquiring the write lock while holding only the read
 *   lock returns DLOCK_EDEADLK at once (it would wait for itself forever).
 * - Each read hold has its own lease: a reader's long lease never keeps
 *   another reader's expired hold alive, and the lock lives exactly as long
 *   as its longest live hold.
 *
 * The two halves are ordinary lock handles on one name. Make them one by
 * one (dlock_read_lock_new, dlock_write_lock_new: each yours, freed with
 * dlock_lock_free) or as a pair (dlock_rwlock_new: both belong to the
 * dlock_rwlock and are freed with dlock_rwlock_free; do not pass them to
 * dlock_lock_free). Handles made either way on one name share the lock.
 *
 * Thread-safety: as for every lock (lock.h).
 */
#ifndef DLOCK_RWLOCK_H
#define DLOCK_RWLOCK_H

#include "dlock/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_rwlock dlock_rwlock;

/* Make the read lock of the read-write lock named name (kind "read",
 * DLOCK_CAP_SHARED | DLOCK_CAP_REENTRANT), a handle of its own.
 * opts  NULL for the defaults (name_len for names with NUL bytes).
 * out   OUT: the lock, NULL on failure; free it with dlock_lock_free().
 * Errors: DLOCK_EINVAL (NULL, empty or over-long name), DLOCK_ENOMEM,
 * DLOCK_ECLOSED. No Redis traffic. */
DLOCK_API int dlock_read_lock_new(dlock_client *client, const char *name,
                                  const dlock_lock_opts *opts, dlock_lock **out);

/* Make the write lock of the read-write lock named name (kind "write",
 * DLOCK_CAP_REENTRANT), a handle of its own; as dlock_read_lock_new. */
DLOCK_API int dlock_write_lock_new(dlock_client *client, const char *name,
                                   const dlock_lock_opts *opts,
                                   dlock_lock **out);

/* Make a read-write lock named name.
 * opts  NULL for the defaults (name_len for names with NUL bytes).
 * out   OUT: the read-write lock, NULL on failure.
 * Errors: DLOCK_EINVAL (NULL, empty or over-long name), DLOCK_ENOMEM,
 * DLOCK_ECLOSED. No Redis traffic. */
DLOCK_API int dlock_rwlock_new(dlock_client *client, const char *name,
                               const dlock_lock_opts *opts, dlock_rwlock **out);

/* The pair's read lock (kind "read"). Owned by rw: valid until
 * dlock_rwlock_free(). NULL for NULL. */
DLOCK_API dlock_lock *dlock_rwlock_read(dlock_rwlock *rw);

/* The pair's write lock (kind "write"), owned by rw like the read lock.
 * dlock_acquire on it returns DLOCK_EDEADLK when the caller holds only a
 * read hold. */
DLOCK_API dlock_lock *dlock_rwlock_write(dlock_rwlock *rw);

/* Free both handles (holds are not released). NULL is a no-op. */
DLOCK_API void dlock_rwlock_free(dlock_rwlock *rw);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_RWLOCK_H */
