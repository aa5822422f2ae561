/* dlock error codes.
 *
 * Every dlock call that can fail returns DLOCK_OK (0) or one negative code
 * below. The list is append only: a code never changes its number.
 * After a failure, dlock_errmsg() gives the detail (server text, key, node).
 *
 * Thread-safety: any thread; dlock_errmsg() is per thread.
 */
#ifndef DLOCK_ERROR_H
#define DLOCK_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(DLOCK_BUILDING) && defined(__GNUC__)
#define DLOCK_API __attribute__((visibility("default")))
#else
#define DLOCK_API
#endif

/* X(name, number, text). Append only. */
#define DLOCK_ERRNO_MAP(X)                                                   \
  X(EINVAL, -1, "invalid argument")                                          \
  X(ENOMEM, -2, "out of memory")                                             \
  X(EIO, -3, "connection to Redis failed or was lost")                       \
  X(EPROTO, -4, "unexpected reply from Redis")                               \
  X(EREDIS, -5, "Redis returned an error")                                   \
  X(ETIMEDOUT, -6, "wait budget spent")                                      \
  X(EBUSY, -7, "held by another owner")                                      \
  X(ENOTOWNER, -8, "caller does not hold it")                                \
  X(ELOST, -9, "lease expired while held")                                   \
  X(EQUORUM, -10, "no quorum of members")                                    \
  X(ENOTSUP, -11, "operation not supported by this kind")                    \
  X(ECLOSED, -12, "client is closed")                                        \
  X(EDEADLK, -13, "would deadlock")                                          \
  X(EAUTH, -14, "refused by the server: credentials or configuration")       \
  X(EKIND, -15, "the name holds another kind of object")                     \
  X(EINTR, -16, "wait interrupted")                                          \
  X(EPERM, -17, "not permitted by the server's ACL")                        \
  X(ECANCELED, -18, "operation cancelled")                                  \
  X(ETLS, -19, "TLS verification failed: fix the TLS settings")              \
  X(ECONFIG, -20, "the URL or options do not fit the server: fix them")     \
  X(EFENCED, -21, "write refused: the hold is gone or a newer holder came") \
  X(EREENTRY, -22, "already held by this owner, and the lock is not reentrant") \
  X(EUNACKED, -23, "written, but its replicas or disk did not confirm it in time")

/* The lowest code of this version (codes are appended below it). */
#define DLOCK_ERRNO_MIN DLOCK_EUNACKED

typedef enum dlock_status {
  DLOCK_OK = 0,
#define DLOCK_ERR_ENUM(name, num, text) DLOCK_##name = (num),
  DLOCK_ERRNO_MAP(DLOCK_ERR_ENUM)
#undef DLOCK_ERR_ENUM
} dlock_status;

/* Short constant text for a code ("wait budget spent"); "unknown error" for
 * a number that is not a dlock code. Never NULL. */
DLOCK_API const char *dlock_strerror(int code);

/* Symbolic name of a code ("DLOCK_ETIMEDOUT"), "DLOCK_OK" for 0, or
 * "DLOCK_UNKNOWN". Never NULL. */
DLOCK_API const char *dlock_errname(int code);

/* Detail of the calling thread's last failed dlock call: the server's error
 * text, which key or node, what was wrong with an argument. Valid until the
 * thread's next dlock call. Empty string when there is none. Never NULL. */
DLOCK_API const char *dlock_errmsg(void);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_ERROR_H */
