/* A test client that behaves on the wire as a Redisson 3.x (Java) client
 * does: the same keys, fields, channels, messages and arithmetic, and the
 * same waiting (subscribe, try, sleep until a message or the returned TTL).
 * It was written from Redisson's published behaviour (3.27 to 3.49) as the
 * reference, for the primitives no runnable Redisson-layout client offers:
 * the fair lock, the read-write lock, the fenced lock, the count-down latch
 * and both semaphores (and the plain lock, for symmetry).
 *
 * One rp_client is one Redisson instance: a random UUID and one synchronous
 * connection, used by one thread at a time. Waiting calls open their own
 * subscriber connection. "Now" is this process's clock, as in Redisson. */
#ifndef DLOCK_REDISSON_PEER_H
#define DLOCK_REDISSON_PEER_H

#include <stdatomic.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

typedef struct rp_client {
  redisContext *c;
  int port;
  char id[37]; /* the instance's UUID */
  /* A test's event, when set (after rp_open): counted each time a waiting
   * call begins to wait for a message, after its try that followed the
   * subscription; a release made after it must wake the call by message. */
  atomic_int *waits;
  /* The Java machine's clock ahead (> 0) or behind (< 0) of the server's,
   * in ms: added to every "now" the fair lock's calls send, as Redisson
   * sends System.currentTimeMillis() (what a libfaketime offset does to a
   * whole process; here one peer of the test process). */
  int64_t skew_ms;
} rp_client;

/* 0 on success. */
int rp_open(rp_client *p, int port);
void rp_close(rp_client *p);

/* The owner name Redisson writes for thread tid: "<uuid>:<tid>". */
void rp_owner(const rp_client *p, long tid, char out[64]);

/* Lock calls return 1 acquired, 0 not (then *ttl, if given, is what the
 * script answered), -1 on a connection or script error. */

/* RLock. */
int rp_lock_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                int64_t *ttl);
/* 1 released, 0 a hold remains, -2 not held (Redisson throws), -1 error. */
int rp_lock_unlock(rp_client *p, const char *name, long tid);
/* RSpinLock: RLock's try (rp_lock_try); its lock pauses by the default
 * exponential back-off (1 ms doubling to 128 ms, plus a jitter) until
 * acquired (1) or budget_ms is spent (0); its unlock publishes nothing
 * (answers as rp_lock_unlock). */
int rp_spin_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t budget_ms);
int rp_spin_unlock(rp_client *p, const char *name, long tid);
/* RedissonFasterMultiLock (getMultiLock(group, values)) with the values'
 * fields (22 characters each, as Redisson hashes them), on the Java
 * machine's clock: try 1 all taken, 0 one held (*ttl: the wait), -1
 * error; unlock 1 all freed, 0 holds remain, -2 not held, -1 error (it
 * publishes 0 on redisson_lock__channel:{group}). */
int rp_group_try(rp_client *p, const char *group, long tid, int64_t lease_ms,
                 const char *const *fields, int n, int64_t *ttl);
int rp_group_unlock(rp_client *p, const char *group, long tid,
                    const char *const *fields, int n);
/* RNonReentrantLock (Redisson 4.4+): RLock's keys; its holder's second try
 * is answered NON_REENTRANT_REACQUIRE (-3 here; Java throws
 * IllegalMonitorStateException). Unlocked as an RLock. */
int rp_once_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                int64_t *ttl);

/* RFairLock with Redisson's default threadWaitTime unless wait_ms > 0. */
int rp_fair_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                int64_t thread_wait_ms, int queue, int64_t *ttl);
int rp_fair_unlock(rp_client *p, const char *name, long tid);
/* acquireFailed: leave the queue (Redisson's give-up). */
int rp_fair_give_up(rp_client *p, const char *name, long tid,
                    int64_t thread_wait_ms);
/* tryLock(budget): subscribe to the thread's own channel, queue, and wait
 * for a message or the TTL; gives up when the budget is spent. *woken_by_msg
 * (may be NULL) counts the waits a message ended. */
int rp_fair_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t thread_wait_ms, int64_t budget_ms, int *woken_by_msg);

/* RReadWriteLock. */
int rp_read_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                int64_t *ttl);
int rp_read_unlock(rp_client *p, const char *name, long tid);
int rp_write_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t *ttl);
int rp_write_unlock(rp_client *p, const char *name, long tid);
/* Waiting versions (channel redisson_rwlock:{N}). */
int rp_read_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t budget_ms, int *woken_by_msg);
int rp_write_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                  int64_t budget_ms, int *woken_by_msg);

/* RFencedLock: *token is the grant's token. */
int rp_fenced_try(rp_client *p, const char *name, long tid, int64_t lease_ms,
                  int64_t *token, int64_t *ttl);

/* RLock waiting (channel redisson_lock__channel:{N}). */
int rp_lock_lock(rp_client *p, const char *name, long tid, int64_t lease_ms,
                 int64_t budget_ms, int *woken_by_msg);

/* RCountDownLatch: 1 set / 0 existed; count_down returns 0 or -1; await
 * returns 1 when the count reached zero within the budget, 0 if not. */
int rp_latch_try_set_count(rp_client *p, const char *name, int64_t count);
int rp_latch_count_down(rp_client *p, const char *name);
int rp_latch_await(rp_client *p, const char *name, int64_t budget_ms,
                   int *woken_by_msg);

/* RSemaphore. */
int rp_sem_try_set_permits(rp_client *p, const char *name, int64_t permits);
int rp_sem_try_acquire(rp_client *p, const char *name, int64_t permits);
int rp_sem_release(rp_client *p, const char *name, int64_t permits);
int rp_sem_acquire(rp_client *p, const char *name, int64_t permits,
                   int64_t budget_ms, int *woken_by_msg);

/* RPermitExpirableSemaphore: id (33 bytes) is the permit id on success. */
int rp_permits_try_acquire(rp_client *p, const char *name, int64_t lease_ms,
                           char id[33]);
/* 1 released, 0 unknown or expired, -1 error. */
int rp_permits_release(rp_client *p, const char *name, const char *id);

#endif
