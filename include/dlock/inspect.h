/* dlock inspection: what is stored under a name, for tools and operators
 * (`dlock status` is built on it).
 *
 * Thread-safety: any thread; the result belongs to the caller.
 */
#ifndef DLOCK_INSPECT_H
#define DLOCK_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/client.h"
#include "dlock/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One holder of a lock: a field of the lock's hash. */
typedef struct dlock_holder {
  const char *owner; /* "U:T", or "U:T:write" for a writer; NUL-terminated
                        (owner_len for owners with NUL bytes) */
  size_t owner_len;
  int64_t count;     /* its hold count (a grouped multi-lock: how many of
                        the group's values it holds) */
} dlock_holder;

typedef struct dlock_inspection {
  /* "none" (nothing stored), "lock" (a reentrant or fenced lock's hash, or
   * a fair lock's with no one queued), "fair lock" (someone queued),
   * "election" (a leader's lock beside its record),
   * "rwlock", "group" (a grouped multi-lock), "count" (a latch's count or a semaphore's permits: on the
   * wire they are the same string, and so is an expirable-permit semaphore
   * with no permit out), "permit semaphore" (an expirable-permit semaphore
   * with permits out), or the Redis type of a key dlock did not write
   * ("string" for a non-numeric string) */
  const char *kind;
  int64_t ttl_ms;       /* remaining TTL of the key: -2 none, -1 no expiry */
  int64_t queue_length; /* fair-lock waiters queued */
  int has_count;        /* 1: count holds a latch's count or a semaphore's
                           available permits */
  int64_t count;
  const char *mode;     /* "read" or "write" for a read-write lock, else NULL */
  size_t nholders;
  const dlock_holder *holders; /* the lock's holders (not "mode") */
  /* an expirable-permit semaphore: permits out (not expired) and ms until
   * the first of them expires (-1: none will); 0 and -1 otherwise */
  int64_t permits_held;
  int64_t permit_expires_ms;
  /* who holds: holder_clients[k] is the connection name of holders[k]'s
   * client (PREFIX:HOST:PID:CLIENT-ID, see dlock_client_opts.client_name)
   * or NULL when not connected or not dlock's; the whole array is NULL
   * when none was found or the ACL does not allow CLIENT LIST */
  const char *const *holder_clients;
} dlock_inspection;

/* Read, in one consistent snapshot, what is stored under name and its
 * fair queue. opts: NULL, or name_len for names with NUL bytes.
 * OUT *out: the inspection (NULL on failure), freed with
 * dlock_inspection_free(). Errors: DLOCK_EINVAL (NULL or bad name),
 * DLOCK_ENOMEM, DLOCK_EIO, DLOCK_EREDIS, DLOCK_ECLOSED. */
DLOCK_API int dlock_inspect(dlock_client *client, const char *name,
                            const dlock_lock_opts *opts,
                            dlock_inspection **out);

/* NULL is a no-op. */
DLOCK_API void dlock_inspection_free(dlock_inspection *in);

/* One page of names found by dlock_list. */
typedef struct dlock_listing {
  size_t n;
  const char *const *names; /* NUL-terminated (lens[k] for names with NUL
                               bytes) */
  const size_t *lens;
} dlock_listing;

/* The names of locks, latches and semaphores whose keys match pattern (a
 * Redis glob; NULL: "*"), one SCAN call per page: *cursor 0 to start, the
 * next page's on return, 0 again when every key was seen. count: SCAN's
 * COUNT hint (0: 1000). On a cluster the masters are scanned in turn.
 * dlock's own helper keys (unlock latches, fair queues and their timeouts,
 * expirable permits' timeouts, read-write lock timeouts, fencing tokens,
 * guarded writes' fences dlock_fence:{N}, elections' records) are left out; other keys stay (dlock_inspect tells their kind). A page
 * may be empty while *cursor is not 0. OUT *out: the page, freed with
 * dlock_listing_free(). Errors: DLOCK_EINVAL (NULL client, cursor or out),
 * DLOCK_ENOMEM, DLOCK_EIO, DLOCK_EREDIS, DLOCK_ECLOSED. */
DLOCK_API int dlock_list(dlock_client *client, const char *pattern,
                         uint64_t *cursor, size_t count, dlock_listing **out);

/* NULL is a no-op. */
DLOCK_API void dlock_listing_free(dlock_listing *listing);

/* A server's memory settings as they bear on locks (INFO memory): a lock's
 * key carries a TTL, so every maxmemory-policy but noeviction may evict it
 * (volatile-* picks among keys with a TTL, allkeys-* among all) once
 * used memory reaches maxmemory; the holder then learns it only at its
 * next renewal (docs/operations.md). On a cluster every master is asked;
 * the first that can evict is the one reported, else the first. */
typedef struct dlock_server_memory {
  char policy[32];              /* maxmemory-policy, e.g. "noeviction" */
  unsigned long long maxmemory; /* bytes; 0: no limit */
  unsigned long long used;      /* used_memory, bytes */
  int evicts;                   /* 1: maxmemory is set and the policy is not
                                   noeviction: a lock's key may be evicted */
  int masters;                  /* how many servers were asked */
} dlock_server_memory;

/* Fill *out (blocking; `dlock check` reports it). Errors: DLOCK_EINVAL
 * (NULL client or out), DLOCK_EIO, DLOCK_EPERM (the ACL refuses INFO),
 * DLOCK_EPROTO, DLOCK_ECLOSED, DLOCK_ENOMEM. */
DLOCK_API int dlock_memory_check(dlock_client *client,
                                 dlock_server_memory *out);

/* A watch on a name: subscribed to the channels its object announces on
 * (the releases of every kind dlock_kinds() lists, a latch's count, an
 * election's changes), whatever kind it holds, so a tool can refresh what it shows when the
 * object changes (`dlock watch`). A fair lock's hand-offs are announced to
 * its next waiter's own channel, and acquires are not announced at all:
 * refresh on a timer too. One thread makes it, waits on it and frees it.
 * opts: NULL, or name_len. Errors: DLOCK_EINVAL, DLOCK_ENOMEM, DLOCK_EIO,
 * DLOCK_ECLOSED, DLOCK_EPERM (the ACL refuses a channel). */
typedef struct dlock_watcher dlock_watcher;
DLOCK_API int dlock_watcher_new(dlock_client *client, const char *name,
                                const dlock_lock_opts *opts,
                                dlock_watcher **out);
/* Wait for the next announcement: 1 one came (or several: all are taken),
 * 0 none within timeout_ms (-1: no limit), DLOCK_ECLOSED. */
DLOCK_API int dlock_watcher_wait(dlock_watcher *w, int64_t timeout_ms);
/* Unsubscribe and free; NULL is a no-op. */
DLOCK_API void dlock_watcher_free(dlock_watcher *w);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_INSPECT_H */
