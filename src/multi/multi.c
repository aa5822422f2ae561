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
      dlock__lock_run_release(m->members[i - 1], owner);
}

/* Every member taken, but the first one's lease ran out before the last
 * was (the process stopped in between): none is held. */
static int spent(void) {
  return dlock__fail(DLOCK_ELOST, "multi-lock: a member's lease had run out "
                     "when the last member was taken (the process was "
                     "stopped meanwhile): all given back, none held");
}

static int acquire(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                   int64_t lease_ms, dlock_grant *grant) {
  multi *m = (multi *)l;
  int taken[DLOCK__MAX_MEMBERS] = {0};
  int64_t deadline = wait_ms < 0 ? -1 : dlock__now_ms() + wait_ms;
  /* the grants' validity ends (monotonic ms): the earliest is the whole's
   * (a member taken first has aged by the time the last is) */
  int64_t until = INT64_MAX;
  size_t i = 0;
  while (i < m->n) {
    if (taken[i]) {
      i++;
      continue;
    }
    dlock_lock *member = m->members[i];
    dlock_grant g = {0, 0};
    int rc = dlock__lock_run_acquire(member, owner, 0, lease_ms, &g);
    if (rc == DLOCK_OK) {
      taken[i++] = 1;
      if (dlock__now_ms() + g.validity_ms < until)
        until = dlock__now_ms() + g.validity_ms;
      continue;
    }
    dlock__kept_error why;
    dlock__error_keep(&why);
    release_taken(m, owner, taken);
    memset(taken, 0, sizeof taken);
    until = INT64_MAX;
    if (rc != DLOCK_EBUSY || wait_ms == 0) {
      rc = dlock__fail(rc, rc != DLOCK_EBUSY ? "member %zu: %s"
                                             : "member %zu is held: %s",
                       i, dlock__kept_text(&why));
      dlock__error_drop(&why);
      return rc;
    }
    dlock__error_drop(&why);
    int64_t left = deadline < 0 ? DLOCK_WAIT_FOREVER : deadline - dlock__now_ms();
    if (deadline >= 0 && left <= 0)
      return dlock__fail(DLOCK_ETIMEDOUT, "multi-lock: member %zu still held", i);
    /* wait for the busy member alone, then start over holding it */
    rc = dlock__lock_run_acquire(member, owner, left, lease_ms, &g);
    if (rc != DLOCK_OK)
      return rc == DLOCK_ETIMEDOUT
                 ? dlock__fail(rc, "multi-lock: member %zu still held", i)
                 : rc;
    taken[i] = 1;
    until = dlock__now_ms() + g.validity_ms;
    i = 0;
  }
  grant->validity_ms = until - dlock__now_ms();
  if (grant->validity_ms <= 0) { /* a member's lease ran out meanwhile */
    release_taken(m, owner, taken);
    return spent();
  }
  return DLOCK_OK;
}

static int release(dlock_lock *l, uint64_t owner) {
  multi *m = (multi *)l;
  int first = DLOCK_OK;
  dlock__kept_error why; /* the first failure's, kept whole */
  for (size_t i = m->n; i > 0; i--) {
    int rc = dlock__lock_run_release(m->members[i - 1], owner);
    if (rc != DLOCK_OK && first == DLOCK_OK) {
      char head[48];
      snprintf(head, sizeof head, "member %zu: ", i - 1);
      first = dlock__fail_before(rc, head);
      dlock__error_keep(&why);
    }
  }
  if (first != DLOCK_OK)
    dlock__error_restore(&why);
  return first;
}

static int force_release(dlock_lock *l, int *deleted) {
  multi *m = (multi *)l;
  *deleted = 0;
  for (size_t i = 0; i < m->n; i++) {
    dlock_lock *member = m->members[i];
    if (member->m->force_release == NULL)
      return dlock__fail(DLOCK_ENOTSUP, "member %zu (%s) has no force release",
                         i, member->m->kind);
    int one = 0;
    int rc = member->m->force_release(member, &one);
    if (rc != DLOCK_OK)
      return rc;
    *deleted |= one;
  }
  return DLOCK_OK;
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

/* ---- async: the same walk, one member's inner operation at a time -------- */

typedef struct mwalk {
  multi *m;
  int taken[DLOCK__MAX_MEMBERS];
  size_t i;          /* the member being asked */
  int alone;         /* waiting for member i alone (holding nothing else) */
  int64_t until; /* the grants' earliest validity end (monotonic ms) */
  int64_t lease_ms;  /* as the caller gave it */
  size_t releases;   /* a release's members still to answer */
  dlock_op inner;    /* the acquire's inner operation under way, 0 */
  int inner_n;       /* inner operations under way (the close waits) */
  int first_rc;      /* a release's first failure */
  char first_err[1024];
} mwalk;

static void no_answer(void *data, const dlock_result *r) {}

/* Give back every member taken, without waiting (inner releases). */
static void m_release_taken(dlock__aop *op) {
  mwalk *w = op->ctx;
  for (size_t i = w->m->n; i > 0; i--)
    if (w->taken[i - 1] &&
        dlock__release_op(w->m->members[i - 1], op->owner, no_answer, NULL, 1,
                          NULL) != DLOCK_OK)
      dlock__lock_forget(w->m->members[i - 1], op->owner); /* its lease ends it */
  memset(w->taken, 0, sizeof w->taken);
}

static void m_fail(dlock__aop *op, int rc) {
  m_release_taken(op);
  dlock__aop_finish(op, rc);
}

static void m_answer(void *data, const dlock_result *r);

static void m_ask(dlock__aop *op, int64_t wait_ms) {
  mwalk *w = op->ctx;
  int rc = dlock__acquire_op(w->m->members[w->i], op->owner, wait_ms, w->lease_ms,
                             m_answer, op, 1, &w->inner);
  w->inner_n = rc == DLOCK_OK;
  if (rc != DLOCK_OK) {
    char head[48];
    snprintf(head, sizeof head, "member %zu: ", w->i);
    w->inner = 0;
    m_fail(op, dlock__fail_before(rc, head));
  }
}

/* Take the members not taken yet, in order, each tried once. */
static void m_step(dlock__aop *op) {
  mwalk *w = op->ctx;
  if (dlock__client_stopping(op->c)) { /* its close waits for this */
    m_fail(op, dlock__fail(DLOCK_ECLOSED, "client closed"));
    return;
  }
  while (w->i < w->m->n && w->taken[w->i])
    w->i++;
  if (w->i < w->m->n) {
    m_ask(op, 0);
    return;
  }
  if (dlock__aop_grant_cancelled(op)) {
    m_fail(op, DLOCK_ECANCELED);
    return;
  }
  op->res.grant.validity_ms = w->until - dlock__now_ms();
  if (op->res.grant.validity_ms <= 0) { /* a member's lease ran out */
    m_fail(op, spent());
    return;
  }
  dlock__aop_finish(op, DLOCK_OK);
}

static void m_answer(void *data, const dlock_result *r) {
  dlock__aop *op = data;
  mwalk *w = op->ctx;
  w->inner = 0;
  w->inner_n = 0;
  size_t i = w->i;
  if (r->rc == DLOCK_OK) {
    w->taken[i] = 1;
    if (w->alone) { /* start over, holding it */
      w->alone = 0;
      w->until = dlock__now_ms() + r->grant.validity_ms;
      w->i = 0;
    } else if (dlock__now_ms() + r->grant.validity_ms < w->until) {
      w->until = dlock__now_ms() + r->grant.validity_ms;
    }
    if (dlock__aop_cancelled(op))
      m_fail(op, DLOCK_ECANCELED);
    else
      m_step(op);
    return;
  }
  char why[1024];
  snprintf(why, sizeof why, "%s", r->errmsg);
  m_release_taken(op);
  w->until = INT64_MAX;
  if (dlock__client_stopping(op->c)) { /* the close cancelled it */
    m_fail(op, dlock__fail(DLOCK_ECLOSED, "client closed"));
  } else if (r->rc == DLOCK_ECANCELED || dlock__aop_cancelled(op)) {
    m_fail(op, DLOCK_ECANCELED);
  } else if (w->alone) {
    m_fail(op, r->rc == DLOCK_ETIMEDOUT
                   ? dlock__fail(r->rc, "multi-lock: member %zu still held", i)
                   : dlock__fail(r->rc, "%s", why));
  } else if (r->rc != DLOCK_EBUSY) {
    m_fail(op, dlock__fail(r->rc, "member %zu: %s", i, why));
  } else if (op->wait_ms == 0) {
    m_fail(op, dlock__fail(DLOCK_EBUSY, "member %zu is held: %s", i, why));
  } else {
    int64_t left = op->deadline_ms < 0 ? DLOCK_WAIT_FOREVER
                                       : op->deadline_ms - dlock__now_ms();
    if (op->deadline_ms >= 0 && left <= 0) {
      m_fail(op, dlock__fail(DLOCK_ETIMEDOUT, "multi-lock: member %zu still held",
                             i));
      return;
    }
    w->alone = 1; /* wait for the busy member alone, then start over */
    m_ask(op, left);
  }
}

/* dlock_cancel, or the client's close: the inner operation under way is
 * cancelled; its answer ends the walk. */
static void m_stop(dlock__aop *op) {
  mwalk *w = op->ctx;
  if (w->inner)
    dlock_cancel(w->inner);
}

static int m_busy(const dlock__aop *op) {
  return ((const mwalk *)op->ctx)->inner_n > 0;
}

static const dlock__outer m_acquire_outer = {
    .cancel = m_stop, .stop = m_stop, .busy = m_busy};
/* a release's inner releases are not cancelled: they all end it */
static const dlock__outer m_release_outer = {.busy = m_busy};

static dlock_client *m_client(dlock_lock *l) {
  multi *m = (multi *)l;
  return dlock__lock_members_engine(m->members, m->n);
}

static int m_start(dlock_lock *l, uint64_t owner, int type,
                   const dlock__outer *outer, dlock_done_fn *done, void *data,
                   dlock__aop **out) {
  multi *m = (multi *)l;
  dlock_client *c = m_client(l);
  if (c == NULL)
    return DLOCK_ENOTSUP;
  for (size_t i = 0; i < m->n; i++)
    if (!dlock__lock_can_wait(m->members[i]))
      return dlock__fail(DLOCK_ENOTSUP, "member %zu is a %s lock, which cannot "
                         "wait asynchronously", i, m->members[i]->m->kind);
  mwalk *w = calloc(1, sizeof *w);
  int rc = w ? dlock__aop_new_on(c, &l->h, type, done, data, out)
             : dlock__fail(DLOCK_ENOMEM, "out of memory");
  if (rc != DLOCK_OK) {
    free(w);
    return rc;
  }
  w->m = m;
  w->until = INT64_MAX;
  (*out)->ctx = w;
  (*out)->owner = owner;
  (*out)->outer = outer;
  return DLOCK_OK;
}

static int m_acquire_async(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                           int64_t lease_ms, dlock_done_fn *done, void *data,
                           dlock_op *out) {
  dlock__aop *op;
  int rc = m_start(l, owner, DLOCK__AOP_ACQUIRE, &m_acquire_outer, done, data,
                   &op);
  if (rc != DLOCK_OK)
    return rc;
  ((mwalk *)op->ctx)->lease_ms = lease_ms;
  op->wait_ms = wait_ms;
  op->deadline_ms = wait_ms < 0 ? -1 : dlock__now_ms() + wait_ms;
  return dlock__aop_start(op, m_step, out);
}

static void m_released(void *data, const dlock_result *r) {
  dlock__aop *op = data;
  mwalk *w = op->ctx;
  if (r->rc != DLOCK_OK && w->first_rc == DLOCK_OK) {
    w->first_rc = r->rc;
    snprintf(w->first_err, sizeof w->first_err, "%s", r->errmsg);
  }
  w->inner_n = (int)--w->releases;
  if (w->releases > 0)
    return;
  if (w->first_rc != DLOCK_OK)
    dlock__fail(w->first_rc, "%s", w->first_err);
  dlock__aop_finish(op, w->first_rc);
}

/* Every member's release at once, in reverse order; the first failure. */
static void m_release_all(dlock__aop *op) {
  mwalk *w = op->ctx;
  w->releases = w->m->n + 1; /* + this loop's own, so none ends it early */
  w->inner_n = (int)w->releases;
  for (size_t i = w->m->n; i > 0; i--) {
    if (dlock__release_op(w->m->members[i - 1], op->owner, m_released, op, 1,
                          NULL) != DLOCK_OK) {
      dlock_result r = {.rc = DLOCK_EIO, .errmsg = dlock_errmsg()};
      m_released(op, &r);
    }
  }
  dlock_result r = {.rc = DLOCK_OK, .errmsg = ""};
  m_released(op, &r);
}

static int m_release_async(dlock_lock *l, uint64_t owner, dlock_done_fn *done,
                           void *data, dlock_op *out) {
  dlock__aop *op;
  int rc = m_start(l, owner, DLOCK__AOP_RELEASE, &m_release_outer, done,
                   data, &op);
  if (rc != DLOCK_OK)
    return rc;
  return dlock__aop_start(op, m_release_all, out);
}

static const dlock__lock_methods multi_methods = {
    .kind = "multi",
    .caps = 0, /* set per instance below */
    .size = sizeof(multi),
    .acquire = acquire,
    .release = release,
    .force_release = force_release,
    .state = state,
    .destroy = NULL,
    .acquire_async = m_acquire_async,
    .async_client = m_client,
    .release_async = m_release_async,
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
