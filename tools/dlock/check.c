/* `dlock check`: can these credentials do everything dlock needs? One real
 * use of each primitive on throw-away names, printed one line each. Every
 * key it makes is deleted, or expires within a second. Public API only. */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The first failure's code is kept; every check still runs. */
typedef struct run {
  FILE *out;
  int failed, first_rc, passed;
} run;

static void report(run *r, const char *what, int rc) {
  if (rc == DLOCK_OK) {
    fprintf(r->out, "ok    %s\n", what);
    r->passed++;
    return;
  }
  fprintf(r->out, "FAIL  %s: %s (%s): %s\n", what, dlock_strerror(rc),
          dlock_errname(rc), dlock_errmsg());
  if (r->failed++ == 0)
    r->first_rc = rc;
}

/* Run call only while rc is DLOCK_OK: a sequence stops at its first
 * failure, and rc is that failure. */
#define STEP(rc, call)                                                        \
  do {                                                                        \
    if ((rc) == DLOCK_OK)                                                     \
      (rc) = (call);                                                          \
  } while (0)

static void check_lock(run *r, dlock_client *c, const char *name, int fair) {
  dlock_lock *l = NULL;
  int rc = fair ? dlock_fair_lock_new(c, name, NULL, &l)
                : dlock_reentrant_lock_new(c, name, NULL, &l);
  STEP(rc, dlock_acquire(l, 0, 1000));
  STEP(rc, dlock_acquire(l, 0, 1000)); /* re-entry */
  STEP(rc, dlock_release(l));
  STEP(rc, dlock_release(l)); /* publishes: needs the channel */
  report(r, fair ? "fair lock: acquire, re-enter, release (queue, publish)"
                 : "lock: acquire, re-enter, release (publish)", rc);
  if (rc != DLOCK_OK && l)
    dlock_force_release(l, NULL);
  dlock_lock_free(l);
}

static void check_rwlock(run *r, dlock_client *c, const char *name) {
  dlock_rwlock *rw = NULL;
  int rc = dlock_rwlock_new(c, name, NULL, &rw);
  STEP(rc, dlock_acquire(dlock_rwlock_write(rw), 0, 1000));
  STEP(rc, dlock_acquire(dlock_rwlock_read(rw), 0, 1000)); /* writer reads */
  STEP(rc, dlock_release(dlock_rwlock_write(rw)));          /* downgrade */
  STEP(rc, dlock_release(dlock_rwlock_read(rw)));
  report(r, "read-write lock: write, read, downgrade, release", rc);
  if (rc != DLOCK_OK && rw) {
    dlock_force_release(dlock_rwlock_write(rw), NULL);
    dlock_force_release(dlock_rwlock_read(rw), NULL);
  }
  dlock_rwlock_free(rw);
}

static void check_latch(run *r, dlock_client *c, const char *name) {
  dlock_latch *l = NULL;
  int rc = dlock_latch_new(c, name, NULL, &l);
  STEP(rc, dlock_latch_try_set_count(l, 1, NULL));
  /* a wait subscribes to the latch's channel: it must time out, not fail */
  int waited = rc == DLOCK_OK ? dlock_latch_await(l, 200) : rc;
  if (waited != DLOCK_ETIMEDOUT)
    STEP(rc, waited == DLOCK_OK ? DLOCK_EPROTO : waited);
  STEP(rc, dlock_latch_count_down(l, NULL));
  STEP(rc, dlock_latch_await(l, 0));
  report(r, "count-down latch: set, wait (subscribe), count down", rc);
  if (l)
    dlock_latch_delete(l, NULL);
  dlock_latch_free(l);
}

static void check_semaphore(run *r, dlock_client *c, const char *name) {
  dlock_semaphore *s = NULL;
  int rc = dlock_semaphore_new(c, name, NULL, &s);
  STEP(rc, dlock_semaphore_try_set_permits(s, 1, 1000, NULL)); /* expires */
  STEP(rc, dlock_semaphore_acquire(s, 1, 0));
  STEP(rc, dlock_semaphore_release(s, 1));
  report(r, "semaphore: set permits, acquire, release", rc);
  dlock_semaphore_free(s);
}

static void check_permits(run *r, dlock_client *c, const char *name) {
  dlock_permits *p = NULL;
  dlock_permit_id id;
  int rc = dlock_permits_new(c, name, NULL, &p);
  STEP(rc, dlock_permits_try_set_permits(p, 1, 1000, NULL)); /* expires */
  STEP(rc, dlock_permits_acquire(p, 1, 0, 1000, &id));
  STEP(rc, dlock_permits_release(p, &id, 1));
  report(r, "expirable-permit semaphore: set, acquire, release", rc);
  dlock_permits_free(p);
}

int dlock_cli_check(dlock_client *c, FILE *out) {
  char base[96], name[128];
  snprintf(base, sizeof base, "dlock-check:%ld:%ld", (long)getpid(),
           (long)time(NULL));
  run r = {out, 0, DLOCK_OK, 0};
  const char *kinds[] = {"lock", "fair", "rw", "latch", "sem", "permits"};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    snprintf(name, sizeof name, "%s:%s", base, kinds[k]);
    switch (k) {
    case 0: check_lock(&r, c, name, 0); break;
    case 1: check_lock(&r, c, name, 1); break;
    case 2: check_rwlock(&r, c, name); break;
    case 3: check_latch(&r, c, name); break;
    case 4: check_semaphore(&r, c, name); break;
    default: check_permits(&r, c, name); break;
    }
  }
  if (r.failed)
    fprintf(out, "dlock check: %d of %d failed (the permissions dlock needs: "
                 "docs/security.md)\n", r.failed, r.failed + r.passed);
  else
    fprintf(out, "dlock check: all %d passed\n", r.passed);
  return r.first_rc;
}
