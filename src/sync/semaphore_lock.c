/* The semaphore as a lock (docs/semaphore.md): a dlock_lock whose acquire
 * takes one expirable permit, so up to `permits` owners hold it at once and
 * a crashed holder's permit comes back when its lease ends. Built on the
 * public expirable-permit semaphore API; the handle remembers which permit
 * each owner took, so the generic release gives back the right one. */
#include <pthread.h>
#include <stdlib.h>

#include "dlock/sync.h"
#include "lock/lock_impl.h"
#include "sync/synchronizer.h"

typedef struct held {
  uint64_t owner;
  dlock_permit_id id;
} held;

typedef struct sem_lock {
  dlock_lock base;
  dlock_permits *p;
  pthread_mutex_t mu; /* guards the permits this handle's owners hold */
  held *v;
  size_t n, cap;
} sem_lock;

/* The latest permit of owner (mu held); -1 when none. */
static long find_latest(sem_lock *s, uint64_t owner) {
  for (size_t i = s->n; i > 0; i--)
    if (s->v[i - 1].owner == owner)
      return (long)(i - 1);
  return -1;
}

static int remember(sem_lock *s, held h);

static int sl_acquire(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                      int64_t lease_ms, dlock_grant *grant) {
  sem_lock *s = (sem_lock *)l;
  held h = {owner, {{0}}};
  int64_t t0 = dlock__now_ms();
  /* counted once, as a lock, by dlock_acquire */
  int rc = dlock__permits_acquire(s->p, 1, wait_ms, lease_ms, &h.id, 0);
  if (rc != DLOCK_OK)
    return rc;
  if ((rc = remember(s, h)) != DLOCK_OK) {
    dlock__permits_release(s->p, &h.id, 1);
    return rc;
  }
  int64_t lease = lease_ms == DLOCK_LEASE_WATCHDOG
                      ? dlock__client_opts(l->h.client)->watchdog_timeout_ms
                      : lease_ms;
  grant->validity_ms = lease - (dlock__now_ms() - t0);
  return DLOCK_OK;
}

/* Keep h as one of owner's holds through this handle. */
static int remember(sem_lock *s, held h) {
  pthread_mutex_lock(&s->mu);
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 4;
    held *v = realloc(s->v, cap * sizeof *v);
    if (v == NULL) {
      pthread_mutex_unlock(&s->mu);
      return dlock__oom();
    }
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = h;
  pthread_mutex_unlock(&s->mu);
  return DLOCK_OK;
}

/* ---- async: the permits' async acquire, then the same bookkeeping ------- */

typedef struct sl_async {
  sem_lock *s;
  uint64_t owner;
  int64_t lease_ms, t0_ms;
  dlock_done_fn *done;
  void *data;
} sl_async;

static void sl_released(void *data, const dlock_result *r) {}

static void sl_granted(void *data, const dlock_result *r) {
  sl_async *x = data;
  dlock_result res = *r;
  res.ids = NULL;
  res.n = 0;
  if (r->rc == DLOCK_OK) {
    held h = {x->owner, r->ids[0]};
    if (remember(x->s, h) != DLOCK_OK) {
      dlock_permits_release_async(x->s->p, &h.id, 1, sl_released, NULL, NULL);
      res.rc = DLOCK_ENOMEM;
      res.errmsg = "out of memory recording the permit";
    } else {
      res.grant.validity_ms = x->lease_ms - (dlock__now_ms() - x->t0_ms);
    }
  }
  x->done(x->data, &res);
  free(x);
}

static int sl_acquire_async(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                            int64_t lease_ms, dlock_done_fn *done, void *data,
                            dlock_op *op) {
  sem_lock *s = (sem_lock *)l;
  sl_async *x = calloc(1, sizeof *x);
  if (x == NULL)
    return dlock__oom();
  *x = (sl_async){s, owner,
                  lease_ms == DLOCK_LEASE_WATCHDOG
                      ? dlock__client_opts(l->h.client)->watchdog_timeout_ms
                      : lease_ms,
                  dlock__now_ms(), done, data};
  int rc = dlock_permits_acquire_async(s->p, 1, wait_ms, lease_ms, sl_granted, x,
                                       op);
  if (rc != DLOCK_OK)
    free(x);
  return rc;
}

static int sl_release(dlock_lock *l, uint64_t owner) {
  sem_lock *s = (sem_lock *)l;
  pthread_mutex_lock(&s->mu);
  long i = find_latest(s, owner);
  held h = i >= 0 ? s->v[i] : (held){0, {{0}}};
  if (i >= 0)
    s->v[i] = s->v[--s->n];
  pthread_mutex_unlock(&s->mu);
  if (i < 0)
    return dlock__fail(DLOCK_ENOTOWNER, "no permit of \"%.100s%s\" is held by "
                       "this owner through this handle", DLOCK__NAME(l->h.name));
  return dlock__permits_release(s->p, &h.id, 1); /* dlock_release counts it */
}

static int sl_state(dlock_lock *l, uint64_t owner, dlock_lock_state *st) {
  sem_lock *s = (sem_lock *)l;
  pthread_mutex_lock(&s->mu);
  long i = find_latest(s, owner);
  held h = i >= 0 ? s->v[i] : (held){0, {{0}}};
  int64_t mine = 0;
  for (size_t k = 0; k < s->n; k++)
    mine += s->v[k].owner == owner;
  pthread_mutex_unlock(&s->mu);
  int64_t available = 0;
  int rc = dlock_permits_counts(s->p, &available, NULL);
  if (rc == DLOCK_OK && i >= 0)
    rc = dlock_permits_lease_remaining(s->p, &h.id, &st->ttl_ms);
  if (rc != DLOCK_OK)
    return rc;
  if (i < 0)
    st->ttl_ms = -2;
  st->locked = available <= 0;
  st->hold_count = mine;
  st->held_by_me = mine > 0;
  return DLOCK_OK;
}

static void sl_destroy(dlock_lock *l) {
  sem_lock *s = (sem_lock *)l;
  dlock_permits_free(s->p);
  pthread_mutex_destroy(&s->mu);
  free(s->v);
}

/* A handle's permits (the expirable-permit semaphore of its name). */
static int sl_open(dlock_lock *l, const dlock_lock_opts *opts) {
  sem_lock *s = (sem_lock *)l;
  pthread_mutex_init(&s->mu, NULL);
  return dlock_permits_new(l->h.client, l->h.name, opts, &s->p);
}

const dlock__lock_methods dlock__semaphore_lock_kind = {
    .kind = "semaphore",
    .caps = DLOCK_CAP_SHARED,
    .size = sizeof(sem_lock),
    .layout = DLOCK__LAYOUT_COUNT,
    .announces = 1,
    .channel = DLOCK__KEY_SEM_CHANNEL,
    .open = sl_open,
    .acquire = sl_acquire,
    .release = sl_release,
    .force_release = NULL,
    .state = sl_state,
    .destroy = sl_destroy,
    .acquire_async = sl_acquire_async,
};

int dlock_semaphore_lock_new(dlock_client *client, const char *name,
                             const dlock_lock_opts *opts, dlock_lock **out) {
  return dlock__lock_make(&dlock__semaphore_lock_kind, client, name, opts, out);
}
