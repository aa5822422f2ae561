/* libFuzzer target: every place dlock interprets a Redis reply.
 *
 * The input is one operation selector byte, then arbitrary RESP. Each
 * command the operation sends gets the next reply parsed from that RESP
 * (hiredis's reader, as on a real connection) instead of a server's,
 * through the fuzz-build hook in dlock__call; a malformed stream, or one
 * that runs out, is a dropped connection (DLOCK_EIO). So the real code of
 * every primitive (acquire, release, state, semaphores, latches, the
 * read-write lock, the fair lock) meets replies of every type and shape. It
 * must return a dlock error code, never crash or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/core.h"
#include "dlock/dlock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static redisReader *reader;

static int next_reply(dlock__req *req, redisReply **reply) {
  void *r = NULL;
  if (reader == NULL || redisReaderGetReply(reader, &r) != REDIS_OK || r == NULL) {
    snprintf(req->errmsg, sizeof req->errmsg, "fuzz: no reply left");
    return DLOCK_EIO;
  }
  *reply = r;
  return DLOCK_OK;
}

/* hiredis allocates an array's element table from its header alone, so
 * "*888888888" makes it ask for gigabytes before any element arrives (a
 * server's replies are trusted for size; hiredis 0.14 has no limit to set).
 * That is hiredis's allocation, not dlock's reply handling: inputs that
 * announce more elements than any dlock reply has are skipped. */
#define MAX_ELEMENTS 100000

static int huge_aggregate(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] != '*')
      continue;
    unsigned long long v = 0;
    for (size_t j = i + 1; j < n && p[j] >= '0' && p[j] <= '9' && v <= MAX_ELEMENTS; j++)
      v = v * 10 + (p[j] - '0');
    if (v > MAX_ELEMENTS)
      return 1;
  }
  return 0;
}

static dlock_client *client;
static dlock_lock *lock, *fenced, *fair, *sem_lock;
static dlock_rwlock *rw;
static dlock_semaphore *sem;
static dlock_permits *permits;
static dlock_latch *latch;

static void setup(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.lazy_connect = 1; /* nothing listens there: no reply ever comes from it */
  if (dlock_client_open("redis://127.0.0.1:1", &o, &client) != DLOCK_OK ||
      dlock_reentrant_lock_new(client, "f", NULL, &lock) != DLOCK_OK ||
      dlock_fenced_lock_new(client, "f", NULL, &fenced) != DLOCK_OK ||
      dlock_fair_lock_new(client, "f", NULL, &fair) != DLOCK_OK ||
      dlock_semaphore_lock_new(client, "f", NULL, &sem_lock) != DLOCK_OK ||
      dlock_rwlock_new(client, "f", NULL, &rw) != DLOCK_OK ||
      dlock_semaphore_new(client, "f", NULL, &sem) != DLOCK_OK ||
      dlock_permits_new(client, "f", NULL, &permits) != DLOCK_OK ||
      dlock_latch_new(client, "f", NULL, &latch) != DLOCK_OK)
    abort();
  dlock__fuzz_reply = next_reply;
}

static void check(int rc) { /* a dlock result: OK or an error code */
  if (rc > 0 || rc < DLOCK_ERRNO_MIN)
    abort();
}

static void on_lock(dlock_lock *l, int op) {
  dlock_lock_state st;
  dlock_grant g;
  switch (op) {
  case 0: check(dlock_try_acquire(l, 1000)); break;
  case 1: check(dlock_acquire_grant(l, 0, DLOCK_LEASE_WATCHDOG, &g)); break;
  case 2: check(dlock_release(l)); break;
  case 3: check(dlock_lock_state_get(l, &st)); break;
  default: check(dlock_force_release(l, NULL)); break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (client == NULL)
    setup();
  if (size < 1 || huge_aggregate(data + 1, size - 1))
    return 0;
  reader = redisReaderCreate();
  if (reader == NULL)
    return 0;
  redisReaderFeed(reader, (const char *)data + 1, size - 1);
  unsigned sel = data[0];
  int64_t n = 0;
  dlock_permit_id ids[2];
  memset(ids, 0, sizeof ids);
  for (int i = 0; i < 2; i++) /* a well-formed id */
    memcpy(ids[i].hex, "00112233445566778899aabbccddeeff", 33);
  switch (sel % 12) {
  case 0: on_lock(lock, (int)(sel / 12) % 5); break;
  case 1: on_lock(fenced, (int)(sel / 12) % 5); break;
  case 2: on_lock(fair, (int)(sel / 12) % 5); break;
  case 3: on_lock(dlock_rwlock_read(rw), (int)(sel / 12) % 5); break;
  case 4: on_lock(dlock_rwlock_write(rw), (int)(sel / 12) % 5); break;
  case 5: on_lock(sem_lock, (int)(sel / 12) % 4); break;
  case 6:
    check(dlock_semaphore_try_set_permits(sem, 3, 0, NULL));
    check(dlock_semaphore_acquire(sem, 2, 0));
    check(dlock_semaphore_available(sem, &n));
    check(dlock_semaphore_release(sem, 1));
    check(dlock_semaphore_drain(sem, &n));
    check(dlock_semaphore_add_permits(sem, -1, &n));
    check(dlock_semaphore_set_permits(sem, 4, &n));
    break;
  case 7:
    check(dlock_permits_acquire(permits, 2, 0, 1000, ids));
    check(dlock_permits_release(permits, ids, 2));
    break;
  case 8:
    check(dlock_permits_update_lease(permits, &ids[0], 500, NULL));
    check(dlock_permits_lease_remaining(permits, &ids[0], &n));
    check(dlock_permits_counts(permits, &n, NULL));
    check(dlock_permits_add_permits(permits, 2, &n));
    check(dlock_permits_set_permits(permits, 1, &n));
    check(dlock_permits_try_set_permits(permits, 1, 1000, NULL));
    break;
  case 9:
    check(dlock_latch_try_set_count(latch, 2, NULL));
    check(dlock_latch_count_down(latch, &n));
    check(dlock_latch_get_count(latch, &n));
    check(dlock_latch_await(latch, 0));
    check(dlock_latch_delete(latch, NULL));
    break;
  case 10: /* a re-entry, then releases: the hold table's bookkeeping */
    on_lock(lock, 0);
    on_lock(lock, 0);
    on_lock(lock, 2);
    on_lock(lock, 2);
    break;
  default:
    on_lock(dlock_rwlock_write(rw), 0);
    on_lock(dlock_rwlock_read(rw), 0); /* downgrade */
    on_lock(dlock_rwlock_write(rw), 2);
    on_lock(dlock_rwlock_read(rw), 2);
    break;
  }
  redisReaderFree(reader);
  reader = NULL;
  return 0;
}
