/* Expirable-permit semaphore (docs/wire.md, "Expirable-permit semaphore"): key N
 * = available permits, {N}:timeout = ZSET of held permit ids (16 random
 * bytes) -> expiry (server ms; 922337203685477 = never). Every script first
 * returns expired permits to the pool. Permits taken without a lease are
 * renewed by the client's watchdog, so a crashed holder's permits come back
 * within the watchdog timeout while a live holder never loses them.
 *
 * Also the semaphore as a dlock_lock (one permit per hold). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/scripts.h"
#include "lock/lock_impl.h"
#include "sync/object.h"

#define MAX_PERMITS 64

struct dlock_permits {
  dlock__object o;
  dlock__buf timeouts; /* {N}:timeout */
  dlock__buf latch_prefix; /* dlock_permits_release_latch:{N}: */
};

int dlock_permits_new(dlock_client *client, const char *name,
                      const dlock_lock_opts *opts, dlock_permits **out) {
  int rc = dlock__object_new(sizeof(dlock_permits), client, name, opts,
                             (void **)out);
  if (rc != DLOCK_OK)
    return rc;
  dlock_permits *p = *out;
  if (dlock__key_prefix(&p->o.channel, "redisson_sc", p->o.name, p->o.len) ||
      dlock__key_suffix(&p->timeouts, p->o.name, p->o.len, "timeout") ||
      dlock__key_prefix(&p->latch_prefix, "dlock_permits_release_latch",
                        p->o.name, p->o.len) ||
      dlock__buf_add(&p->latch_prefix, ":", 1)) {
    dlock_permits_free(p);
    *out = NULL;
    return dlock__fail(DLOCK_ENOMEM, "out of memory");
  }
  return DLOCK_OK;
}

void dlock_permits_free(dlock_permits *p) {
  if (p == NULL)
    return;
  dlock__buf_free(&p->timeouts);
  dlock__buf_free(&p->latch_prefix);
  dlock__object_free(&p->o);
  free(p);
}

int dlock_permits_try_set_permits(dlock_permits *p, int64_t permits, int *set) {
  int rc = dlock__object_check(p);
  return rc != DLOCK_OK ? rc : dlock__sem_try_set(&p->o, permits, 0, set);
}

int dlock_permits_add_permits(dlock_permits *p, int64_t delta,
                              int64_t *available) {
  int rc = dlock__object_check(p);
  return rc != DLOCK_OK ? rc : dlock__sem_add(&p->o, delta, available);
}

static int unhex(const dlock_permit_id *id, char raw[16]) {
  for (int i = 0; i < 16; i++) {
    int v = 0;
    for (int j = 0; j < 2; j++) {
      char ch = id->hex[2 * i + j];
      int d = ch >= '0' && ch <= '9'   ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                       : -1;
      if (d < 0)
        return dlock__fail(DLOCK_EINVAL, "permit id \"%.32s\" is not 32 hex "
                           "characters", id->hex);
      v = v * 16 + d;
    }
    raw[i] = (char)v;
  }
  if (id->hex[32] != '\0')
    return dlock__fail(DLOCK_EINVAL, "permit id is longer than 32 characters");
  return DLOCK_OK;
}

static dlock__hold_id permit_hold(dlock_permits *p, const char *raw) {
  dlock__hold_id id = {p->timeouts.p, p->timeouts.len, raw, 16};
  return id;
}

typedef struct attempt {
  dlock_permits *p;
  size_t n;
  int64_t lease_ms;
  char raw[MAX_PERMITS][16];
  int64_t sent_ms;
} attempt;

static int try_once(void *ctx, dlock__try *t, int64_t *hint) {
  attempt *a = ctx;
  dlock_permits *p = a->p;
  const char *keys[] = {p->o.name, p->timeouts.p};
  size_t klens[] = {p->o.len, p->timeouts.len};
  const char *args[4 + MAX_PERMITS];
  size_t alens[4 + MAX_PERMITS];
  char n[24], lease[24];
  args[0] = n;
  alens[0] = (size_t)snprintf(n, sizeof n, "%zu", a->n);
  args[1] = lease;
  alens[1] = (size_t)snprintf(lease, sizeof lease, "%" PRId64, a->lease_ms);
  args[2] = "PUBLISH";
  alens[2] = 7;
  args[3] = p->o.channel.p;
  alens[3] = p->o.channel.len;
  for (size_t i = 0; i < a->n; i++) {
    args[4 + i] = a->raw[i];
    alens[4 + i] = 16;
  }
  redisReply *r;
  a->sent_ms = dlock__now_ms();
  int rc = dlock__script_call(p->o.client, DLOCK__SCRIPT_PERMITS_ACQUIRE, 2, keys,
                              klens, 4 + a->n, args, alens, &r);
  if (rc != DLOCK_OK)
    return rc;
  if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
      r->element[0]->type == REDIS_REPLY_INTEGER) {
    rc = r->element[0]->integer == 1;
    *hint = !rc && r->elements == 2 ? r->element[1]->integer : -1;
    if (*hint == 0)
      *hint = 1;
  } else {
    rc = dlock__fail_reply(r, "acquire permits");
  }
  freeReplyObject(r);
  return rc;
}

int dlock_permits_acquire(dlock_permits *p, size_t n, int64_t wait_ms,
                          int64_t lease_ms, dlock_permit_id *ids) {
  int rc = dlock__object_check(p);
  if (rc != DLOCK_OK)
    return rc;
  if (n < 1 || n > MAX_PERMITS || ids == NULL)
    return dlock__fail(DLOCK_EINVAL, "n must be 1..%d and ids not NULL",
                       MAX_PERMITS);
  if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
    return dlock__fail(DLOCK_EINVAL, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
  if (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG)
    return dlock__fail(DLOCK_EINVAL, "lease_ms must be > 0 or DLOCK_LEASE_WATCHDOG");
  dlock_client *c = p->o.client;
  int watchdog = lease_ms == DLOCK_LEASE_WATCHDOG;
  attempt *a = calloc(1, sizeof *a);
  if (a == NULL)
    return dlock__fail(DLOCK_ENOMEM, "out of memory");
  a->p = p;
  a->n = n;
  a->lease_ms = watchdog ? dlock__client_opts(c)->watchdog_timeout_ms : lease_ms;
  for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
    rc = dlock__random_hex(ids[i].hex, 16);
    if (rc == DLOCK_OK)
      rc = unhex(&ids[i], a->raw[i]);
  }
  if (rc != DLOCK_OK) {
    free(a);
    return rc;
  }
  char what[140];
  snprintf(what, sizeof what, "permits of \"%.100s\"", p->o.name);
  dlock__wait_spec spec = {.what = what, .channel = p->o.channel.p,
                           .channel_len = p->o.channel.len,
                           .wake = dlock__wake_by_count, .fifo = 1,
                           .attempt = try_once};
  rc = dlock__wait_loop(c, &spec, wait_ms, a);
  if (rc == 1) {
    static const dlock__renewal renew = {DLOCK__SCRIPT_PERMITS_RENEW, NULL, 0};
    rc = DLOCK_OK;
    for (size_t i = 0; i < n && rc == DLOCK_OK; i++) {
      dlock__hold_id id = permit_hold(p, a->raw[i]);
      rc = dlock__hold_add(c, &id, dlock_thread_id(), &renew,
                           watchdog, a->lease_ms, a->sent_ms, NULL);
    }
    if (rc != DLOCK_OK)
      dlock_permits_release(p, ids, n); /* cannot track them: give back */
  }
  free(a);
  return rc;
}

int dlock_permits_release(dlock_permits *p, const dlock_permit_id *ids,
                          size_t n) {
  int rc = dlock__object_check(p);
  if (rc != DLOCK_OK)
    return rc;
  if (n < 1 || n > MAX_PERMITS || ids == NULL)
    return dlock__fail(DLOCK_EINVAL, "n must be 1..%d and ids not NULL",
                       MAX_PERMITS);
  char raw[MAX_PERMITS][16];
  for (size_t i = 0; i < n; i++)
    if ((rc = unhex(&ids[i], raw[i])) != DLOCK_OK)
      return rc;
  dlock_client *c = p->o.client;
  const char *keys[] = {p->o.name, NULL, p->timeouts.p};
  size_t klens[] = {p->o.len, 0, p->timeouts.len};
  char latch_ms[24];
  const char *args[3 + MAX_PERMITS] = {"PUBLISH", p->o.channel.p, latch_ms};
  size_t alens[3 + MAX_PERMITS] = {
      7, p->o.channel.len,
      (size_t)snprintf(latch_ms, sizeof latch_ms, "%" PRId64, dlock__latch_ms(c))};
  for (size_t i = 0; i < n; i++) {
    args[3 + i] = raw[i];
    alens[3 + i] = 16;
    dlock__hold_id id = permit_hold(p, raw[i]);
    dlock__hold_releasing(c, &id);
  }
  /* retried on a lost reply; the latch (keys[1]) replays one that ran */
  redisReply *r;
  rc = dlock__release_call(c, DLOCK__SCRIPT_PERMITS_RELEASE, &p->latch_prefix,
                           3, keys, klens, 3 + n, args, alens, &r);
  if (rc != DLOCK_OK)
    return rc;
  int64_t released = 0;
  rc = dlock__reply_int(r, &released, "release permits");
  freeReplyObject(r);
  if (rc != DLOCK_OK)
    return rc;
  if (released > 0) {
    size_t lost = n; /* the first one reported lost */
    for (size_t i = 0; i < n; i++) {
      dlock__hold_id id = permit_hold(p, raw[i]);
      if (dlock__hold_released(c, &id, 1) == 2 && lost == n)
        lost = i;
    }
    if (lost == n)
      return DLOCK_OK;
    char what[64];
    snprintf(what, sizeof what, "permit %s of", ids[lost].hex);
    return dlock__fail_reported_lost(what, p->o.name);
  }
  /* Nothing was released: the script names the first bad permit. Ours but
   * gone means it expired; otherwise it is unknown. */
  size_t bad = released < 0 && (size_t)-released <= n ? (size_t)-released - 1 : 0;
  dlock__hold_id id = permit_hold(p, raw[bad]);
  if (dlock__hold_released(c, &id, -1)) /* forget it: it is gone */
    return dlock__fail(DLOCK_ELOST, "permit %s of \"%.100s\" expired before its "
                       "release; nothing was released", ids[bad].hex, p->o.name);
  return dlock__fail(DLOCK_ENOTOWNER, "permit %s of \"%.100s\" is unknown (never "
                     "acquired, released, or expired); nothing was released",
                     ids[bad].hex, p->o.name);
}

int dlock_permits_update_lease(dlock_permits *p, const dlock_permit_id *pid,
                               int64_t lease_ms, int *updated_out) {
  int rc = dlock__object_check(p);
  if (rc != DLOCK_OK)
    return rc;
  if (pid == NULL || (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG))
    return dlock__fail(DLOCK_EINVAL, "need an id and lease_ms > 0 or "
                       "DLOCK_LEASE_WATCHDOG");
  char raw[16], lease[24];
  if ((rc = unhex(pid, raw)) != DLOCK_OK)
    return rc;
  dlock_client *c = p->o.client;
  int watchdog = lease_ms == DLOCK_LEASE_WATCHDOG;
  int64_t ms = watchdog ? dlock__client_opts(c)->watchdog_timeout_ms : lease_ms;
  const char *keys[] = {p->timeouts.p};
  size_t klens[] = {p->timeouts.len};
  const char *args[] = {raw, lease};
  size_t alens[] = {16, (size_t)snprintf(lease, sizeof lease, "%" PRId64, ms)};
  redisReply *r;
  int64_t t0 = dlock__now_ms();
  rc = dlock__script_call(c, DLOCK__SCRIPT_PERMITS_UPDATE_LEASE, 1, keys, klens,
                          2, args, alens, &r);
  if (rc != DLOCK_OK)
    return rc;
  int64_t updated = 0;
  rc = dlock__reply_int(r, &updated, "update lease");
  freeReplyObject(r);
  if (rc != DLOCK_OK)
    return rc;
  if (updated == 1) { /* the watchdog renews it from now on, or no longer */
    dlock__hold_id id = permit_hold(p, raw);
    static const dlock__renewal renew = {DLOCK__SCRIPT_PERMITS_RENEW, NULL, 0};
    dlock__hold_released(c, &id, 1);
    dlock__hold_add(c, &id, dlock_thread_id(), &renew, watchdog,
                    ms, t0, NULL);
  }
  if (updated_out)
    *updated_out = updated == 1;
  return DLOCK_OK;
}

static int state(dlock_permits *p, const char *raw, int64_t out[3]) {
  const char *keys[] = {p->o.name, p->timeouts.p};
  size_t klens[] = {p->o.len, p->timeouts.len};
  const char *args[] = {"PUBLISH", p->o.channel.p, raw ? raw : ""};
  size_t alens[] = {7, p->o.channel.len, raw ? 16 : 0};
  redisReply *r;
  int rc = dlock__script_call(p->o.client, DLOCK__SCRIPT_PERMITS_STATE, 2, keys,
                              klens, 3, args, alens, &r);
  if (rc != DLOCK_OK)
    return rc;
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
    for (int i = 0; i < 3; i++)
      out[i] = r->element[i]->integer;
  } else {
    rc = dlock__fail_reply(r, "permits state");
  }
  freeReplyObject(r);
  return rc;
}

int dlock_permits_lease_remaining(dlock_permits *p, const dlock_permit_id *pid,
                                  int64_t *ms) {
  int rc = dlock__object_check(p);
  if (rc != DLOCK_OK)
    return rc;
  if (pid == NULL || ms == NULL)
    return dlock__fail(DLOCK_EINVAL, "id and ms must not be NULL");
  char raw[16];
  int64_t st[3];
  if ((rc = unhex(pid, raw)) != DLOCK_OK || (rc = state(p, raw, st)) != DLOCK_OK)
    return rc;
  *ms = st[2];
  return DLOCK_OK;
}

int dlock_permits_counts(dlock_permits *p, int64_t *available, int64_t *acquired) {
  int rc = dlock__object_check(p);
  if (rc != DLOCK_OK)
    return rc;
  int64_t st[3];
  if ((rc = state(p, NULL, st)) != DLOCK_OK)
    return rc;
  if (available)
    *available = st[0];
  if (acquired)
    *acquired = st[1];
  return DLOCK_OK;
}

/* ---- the semaphore as a lock ----------------------------------------------- */

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

static int sl_acquire(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                      int64_t lease_ms, dlock_grant *grant) {
  sem_lock *s = (sem_lock *)l;
  held h = {owner, {{0}}};
  int64_t t0 = dlock__now_ms();
  int rc = dlock_permits_acquire(s->p, 1, wait_ms, lease_ms, &h.id);
  if (rc != DLOCK_OK)
    return rc;
  pthread_mutex_lock(&s->mu);
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 4;
    held *v = realloc(s->v, cap * sizeof *v);
    if (v == NULL) {
      pthread_mutex_unlock(&s->mu);
      dlock_permits_release(s->p, &h.id, 1);
      return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = h;
  pthread_mutex_unlock(&s->mu);
  int64_t lease = lease_ms == DLOCK_LEASE_WATCHDOG
                      ? dlock__client_opts(l->client)->watchdog_timeout_ms
                      : lease_ms;
  grant->validity_ms = lease - (dlock__now_ms() - t0);
  return DLOCK_OK;
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
    return dlock__fail(DLOCK_ENOTOWNER, "no permit of \"%.100s\" is held by "
                       "this owner through this handle", l->name);
  return dlock_permits_release(s->p, &h.id, 1);
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

static const dlock__lock_methods semaphore_lock_methods = {
    .version = 1,
    .kind = "semaphore",
    .caps = DLOCK_CAP_SHARED,
    .size = sizeof(sem_lock),
    .acquire = sl_acquire,
    .release = sl_release,
    .force_release = NULL,
    .state = sl_state,
    .destroy = sl_destroy,
};

int dlock_semaphore_lock_new(dlock_client *client, const char *name,
                             const dlock_lock_opts *opts, dlock_lock **out) {
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  dlock_lock *l;
  int rc = dlock__lock_alloc(&semaphore_lock_methods, client, name, opts, &l);
  if (rc != DLOCK_OK)
    return rc;
  sem_lock *s = (sem_lock *)l;
  pthread_mutex_init(&s->mu, NULL);
  if ((rc = dlock_permits_new(client, name, opts, &s->p)) != DLOCK_OK) {
    dlock_lock_free(l);
    return rc;
  }
  *out = l;
  return DLOCK_OK;
}
