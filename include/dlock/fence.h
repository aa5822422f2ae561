/* Guarded writes: fencing that protects (docs/fencing.md).
 *
 * A lease cannot stop a holder that pauses past it (a stall, SIGSTOP, a
 * swapped-out VM) and then writes: by then another client holds the lock.
 * A guarded write runs on the lock's server in one script that first checks
 * that the caller still holds the lock and, for a fenced lock, that no later
 * holder was granted it and the guarded data saw no newer token; only then
 * does it run the write. A refused write changes nothing and fails with
 * DLOCK_EFENCED.
 *
 * The data must live on the lock's server, in the lock's hash slot on a
 * cluster: give its keys the lock name as hash tag ("{orders}:total" beside
 * the lock "orders"). Keys in another slot are refused before anything is
 * sent (DLOCK_EINVAL, naming the key and both slots).
 *
 * Kinds: the reentrant, fenced and fair locks and both halves of a
 * read-write lock (a reader guards with its read hold). Others:
 * DLOCK_ENOTSUP.
 */
#ifndef DLOCK_FENCE_H
#define DLOCK_FENCE_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/async.h"
#include "dlock/client.h"
#include "dlock/error.h"
#include "dlock/lock.h"
#include "dlock/reply.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dlock_reply, dlock_reply_free: dlock/reply.h */

/* Run one write command (argv[0] its name, e.g. "SET", then its arguments;
 * lens[i] their lengths, binary-safe) on lock's server, only while the
 * caller (the handle's bound owner, else the calling thread) holds lock,
 * and for a fenced lock only with a token no older than the newest a
 * guarded write of this lock used. OUT *reply (may be NULL): the command's
 * reply; free with dlock_reply_free().
 *
 * The command must be a write with its keys at fixed places (SET, HSET,
 * INCRBY, LPUSH, DEL, ...; the server's COMMAND INFO says, asked once per
 * command name and kept): a read, a command with no key or with keys at
 * places only its arguments tell (EVAL, ZUNIONSTORE, ...), and one scripts
 * may not run are DLOCK_EINVAL. Write several commands, or a read and a
 * write, with dlock_guarded_eval().
 *
 * Returns DLOCK_OK once the command ran; DLOCK_EFENCED when refused: the
 * hold is gone (its lease passed, it was released, the server lost it), a
 * later holder was granted the lock, or the data saw a newer token; the
 * data is untouched and dlock_errmsg() says which. DLOCK_EREDIS: the
 * command itself failed (WRONGTYPE, ...), nothing was written.
 * DLOCK_EUNACKED: written (*reply is set, as on DLOCK_OK), but with the
 * replica guard (replica_sync_ms) its master's replicas did not confirm it
 * in time, or with durable_ms it was not fsynced in time: a failover or
 * restart may lose it (write it again if it is idempotent, or read back
 * later). DLOCK_EINVAL (bad arguments, a key outside the lock's slot), DLOCK_ENOTSUP
 * (a kind that cannot guard), and the errors of any call (DLOCK_EIO, ...). */
DLOCK_API int dlock_guarded_call(dlock_lock *lock, size_t argc,
                                 const char *const *argv, const size_t *lens,
                                 dlock_reply **reply);

/* The same for a Lua body of your own that sees KEYS (keys) and ARGV
 * (args) as a script does and returns its reply: it runs after the same
 * checks, in the same script, so nothing can come between them. The body
 * must keep to keys (in the lock's slot). An error it raises after writing
 * leaves those writes (a script's writes are not undone). */
DLOCK_API int dlock_guarded_eval(dlock_lock *lock, const char *body,
                                 size_t nkeys, const char *const *keys,
                                 const size_t *klens, size_t nargs,
                                 const char *const *args, const size_t *alens,
                                 dlock_reply **reply);

/* A guarded write by token alone, for a process that does not hold the
 * lock itself but was handed its token (a command run by `dlock run
 * --fenced`, with DLOCK_FENCE_TOKEN; an election's term): the fenced lock
 * name must be held (by anyone), token must be its newest grant, and the
 * data must have seen no newer one. A token above the newest grant was
 * never granted: DLOCK_EINVAL, nothing written (the fence untouched). A
 * token below it: DLOCK_EFENCED, even before the newer holder writes. A
 * name holding no fenced lock or election (another type, a read-write lock,
 * a lock without a token counter): DLOCK_EKIND, naming what it holds. As
 * dlock_guarded_call() otherwise. */
DLOCK_API int dlock_fenced_call(dlock_client *client, const char *name,
                                int64_t token, size_t argc,
                                const char *const *argv, const size_t *lens,
                                dlock_reply **reply);

/* dlock_guarded_call() without blocking (dlock/async.h): owner as there
 * (0: the bound owner). Result: rc and reply (valid during the callback;
 * set on DLOCK_OK and DLOCK_EUNACKED, NULL on other failures). */
DLOCK_API int dlock_guarded_call_async(dlock_lock *lock, uint64_t owner,
                                       size_t argc, const char *const *argv,
                                       const size_t *lens, dlock_done_fn *done,
                                       void *data, dlock_op *op);

/* dlock_guarded_eval() without blocking, as dlock_guarded_call_async(). */
DLOCK_API int dlock_guarded_eval_async(dlock_lock *lock, uint64_t owner,
                                       const char *body, size_t nkeys,
                                       const char *const *keys,
                                       const size_t *klens, size_t nargs,
                                       const char *const *args,
                                       const size_t *alens,
                                       dlock_done_fn *done, void *data,
                                       dlock_op *op);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_FENCE_H */
