/* The multi-lock: every member or none.
 *
 * Acquire tries the members in order without waiting. When one is held
 * elsewhere it releases everything it took, waits for that one member alone
 * (holding nothing else, so two groups over the same members in different
 * orders cannot deadlock), and starts over holding it. */
#include <stdlib.h>
#include <string.h>

#include "dlock/multi.h"
#include "lock/lock_impl.h"

typedef struct multi {
  dlock_lock base;
  size_t n;
  dlock_lock *members[DLOCK__MAX_MEMBERS];
} multi;

static void release_taken(multi *m, uint64_t owner, const int *taken) {
  for (size_t i = m->n; i > 0; i--)
    if (taken[i - 1])
      m->members[i - 1]->m->release(m->members[i - 1], owner);
}

static int acquire(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                   int64_t lease_ms, dlock_grant *grant) {
  multi *m = (multi *)l;
  int taken[DLOCK__MAX_MEMBERS] = {0};
  int64_t deadline = wait_ms < 0 ? -1 : dlock__now_ms() + wait_ms;
  int64_t validity = INT64_MAX;
  size_t i = 0;
  while (i < m->n) {
    if (taken[i]) {
      i++;
      continue;
    }
    dlock_lock *member = m->members[i];
    dlock_grant g = {0, 0};
    int rc = member->m->acquire(member, owner, 0, lease_ms, &g);
    if (rc == DLOCK_OK) {
      taken[i++] = 1;
      if (g.validity_ms < validity)
        validity = g.validity_ms;
      continue;
    }
    char why[256];
    snprintf(why, sizeof why, "%s", dlock_errmsg());
    release_taken(m, owner, taken);
    memset(taken, 0, sizeof taken);
    validity = INT64_MAX;
    if (rc != DLOCK_EBUSY)
      return dlock__fail(rc, "member %zu: %s", i, why);
    if (wait_ms == 0)
      return dlock__fail(DLOCK_EBUSY, "member %zu is held: %s", i, why);
    int64_t left = deadline < 0 ? DLOCK_WAIT_FOREVER : deadline - dlock__now_ms();
    if (deadline >= 0 && left <= 0)
      return dlock__fail(DLOCK_ETIMEDOUT, "multi-lock: member %zu still held", i);
    /* wait for the busy member alone, then start over holding it */
    rc = member->m->acquire(member, owner, left, lease_ms, &g);
    if (rc != DLOCK_OK)
      return rc == DLOCK_ETIMEDOUT
                 ? dlock__fail(rc, "multi-lock: member %zu still held", i)
                 : rc;
    taken[i] = 1;
    validity = g.validity_ms;
    i = 0;
  }
  grant->validity_ms = validity;
  return DLOCK_OK;
}

static int release(dlock_lock *l, uint64_t owner) {
  multi *m = (multi *)l;
  int first = DLOCK_OK;
  char why[512] = "";
  for (size_t i = m->n; i > 0; i--) {
    int rc = m->members[i - 1]->m->release(m->members[i - 1], owner);
    if (rc != DLOCK_OK && first == DLOCK_OK) {
      first = rc;
      snprintf(why, sizeof why, "member %zu: %s", i - 1, dlock_errmsg());
    }
  }
  return first == DLOCK_OK ? DLOCK_OK : dlock__fail(first, "%s", why);
}

static int force_release(dlock_lock *l) {
  multi *m = (multi *)l;
  int any = 0;
  for (size_t i = 0; i < m->n; i++) {
    dlock_lock *member = m->members[i];
    if (member->m->force_release == NULL)
      return dlock__fail(DLOCK_ENOTSUP, "member %zu (%s) has no force release",
                         i, member->m->kind);
    int rc = member->m->force_release(member);
    if (rc < 0)
      return rc;
    any |= rc;
  }
  return any;
}

static int state(dlock_lock *l, uint64_t owner, dlock_lock_state *st) {
  multi *m = (multi *)l;
  st->locked = 1;
  st->held_by_me = 1;
  st->hold_count = INT64_MAX;
  st->ttl_ms = INT64_MAX;
  for (size_t i = 0; i < m->n; i++) {
    dlock_lock_state ms = {0, 0, 0, 0};
    dlock_lock *member = m->members[i];
    if (member->m->state == NULL)
      return dlock__fail(DLOCK_ENOTSUP, "member %zu (%s) has no state",
                         i, member->m->kind);
    int rc = member->m->state(member, owner, &ms);
    if (rc != DLOCK_OK)
      return rc;
    st->locked &= ms.locked;
    st->held_by_me &= ms.held_by_me;
    if (ms.hold_count < st->hold_count)
      st->hold_count = ms.hold_count;
    if (ms.ttl_ms < st->ttl_ms)
      st->ttl_ms = ms.ttl_ms;
  }
  return DLOCK_OK;
}

static const dlock__lock_methods multi_methods = {
    .version = 1,
    .kind = "multi",
    .caps = 0, /* set per instance below */
    .size = sizeof(multi),
    .acquire = acquire,
    .release = release,
    .force_release = force_release,
    .state = state,
    .destroy = NULL,
};

int dlock_multi_new(dlock_lock *const *locks, size_t n, dlock_lock **out) {
  int rc = dlock__lock_alloc_combo(&multi_methods, locks, n, out);
  if (rc != DLOCK_OK)
    return rc;
  dlock_lock *l = *out;
  multi *m = (multi *)l;
  m->n = n;
  memcpy(m->members, locks, n * sizeof *locks);
  l->caps = DLOCK_CAP_REENTRANT;
  for (size_t i = 0; i < n; i++) {
    if (!(locks[i]->caps & DLOCK_CAP_REENTRANT))
      l->caps &= ~DLOCK_CAP_REENTRANT;
    if (locks[i]->h.client != locks[0]->h.client ||
        (locks[i]->caps & DLOCK_CAP_MULTI_NODE))
      l->caps |= DLOCK_CAP_MULTI_NODE;
  }
  return DLOCK_OK;
}
