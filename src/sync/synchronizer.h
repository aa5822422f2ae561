/* Synchronizers (latch, semaphore, expirable-permit semaphore): the handle
 * they start with (client, name, channel) and the calls they share (run a
 * script that answers a count, read a count, the semaphores' set and add). */
#ifndef DLOCK_SYNC_SYNCHRONIZER_H
#define DLOCK_SYNC_SYNCHRONIZER_H

#include "lock/lock_impl.h"
#include "dlock/sync.h"

typedef struct dlock__synchronizer {
  dlock__handle h; /* first */
  dlock__buf channel;
} dlock__synchronizer;

/* Allocate size bytes whose first member is a dlock__synchronizer
 * (dlock__handle_open: checks, the name's copy, the client's reference). */
int dlock__synchronizer_new(size_t size, dlock_client *client, const char *name,
                            const dlock_lock_opts *opts, void **out);
void dlock__synchronizer_free(dlock__synchronizer *o);
/* The checks at the top of every call: NULL, closed client, engine thread
 * (for blocking calls). */
int dlock__synchronizer_check(const void *o);

/* Parse a count reply (integer, numeric string, or nil = 0). */
int dlock__reply_int(const redisReply *r, int64_t *out, const char *what);

/* A count's name that held something else (a WRONGTYPE answer): ask what
 * (TYPE; a hash's mode field) and fail with DLOCK_EKIND naming it, not
 * what ("latch", "semaphore"). */
int dlock__synchronizer_kind(dlock__synchronizer *o, const char *what);

/* Wake fn for semaphore channels: the message is the available count. */
uint32_t dlock__wake_by_count(const char *msg, size_t len);

/* The wait channel of a synchronizer's wait rules (w->h its handle): its
 * channel, waking all its waiters (the latch's zero) or, for a FIFO wait
 * (the semaphores'), by the count a message gives. */
int dlock__synchronizer_channel(dlock__wait *w, dlock__buf *ch,
                                dlock__wake_fn **wake);

/* Run script with KEYS = {N} and ARGV = nums (as decimals, at most 2), then
 * PUBLISH and the channel when publish is set; the reply is a count (OUT
 * *out, may be NULL). */
int dlock__synchronizer_run(dlock__synchronizer *o, int script, size_t nnums,
                            const int64_t *nums, int publish, int64_t *out);
/* The request dlock__synchronizer_run_key2 makes (key2 may be NULL). */
int dlock__synchronizer_req(dlock__synchronizer *o, const dlock__buf *key2,
                            int script, size_t nnums, const int64_t *nums,
                            int publish, dlock__req *req);
/* The same with KEYS = {N, key2}. */
int dlock__synchronizer_run_key2(dlock__synchronizer *o, const dlock__buf *key2,
                                 int script, size_t nnums, const int64_t *nums,
                                 int publish, int64_t *out);
/* dlock__synchronizer_run for a script that answers 1 (done) or 0 (nothing to
 * do): OUT *done (may be NULL) is set to that on DLOCK_OK. */
int dlock__synchronizer_run_flag(dlock__synchronizer *o, int script, size_t nnums,
                           const int64_t *nums, int publish, int *done);
/* GET N as a request (routed by N). */
int dlock__synchronizer_get_req(dlock__synchronizer *o, dlock__req *req);
/* GET N as a count (0 when missing). */
int dlock__synchronizer_get(dlock__synchronizer *o, const char *what, int64_t *out);
/* Whether a try whose answer was lost ran (a kind's ask), as a read of
 * what it leaves: the command argv (argc words; its key argv[1], routed
 * by it) answers an integer 1 or a string (ZSCORE) when it ran: DLOCK_OK
 * with *ran 1, or 0 when not; or an error. */
int dlock__synchronizer_ran(dlock__synchronizer *o, size_t argc,
                            const char *const *argv, const size_t *lens,
                            int *ran);

/* Shared by both semaphores (semaphore.c): try_set_permits and add. */
int dlock__sem_try_set(dlock__synchronizer *o, int64_t permits, int64_t ttl_ms,
                       int *set);
int dlock__sem_add(dlock__synchronizer *o, int64_t delta, int64_t *available);
/* set_permits: timeouts is the expirable semaphore's {N}:timeout, NULL for
 * the plain one. */
int dlock__sem_set(dlock__synchronizer *o, const dlock__buf *timeouts,
                   int64_t permits, int64_t *available);

/* The expirable-permit semaphore's acquire and release (permits.c) for the
 * semaphore lock (semaphore_lock.c), which dlock_acquire and dlock_release
 * already count: an acquire counted (statistics, events) when counted, a
 * release never. */
int dlock__permits_acquire(dlock_permits *p, size_t n, int64_t wait_ms,
                           int64_t lease_ms, dlock_permit_id *ids, int counted);
int dlock__permits_release(dlock_permits *p, const dlock_permit_id *ids,
                           size_t n);

#endif /* DLOCK_SYNC_SYNCHRONIZER_H */
