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

#include "base/scripts.h"
#include "sync/synchronizer.h"

#define MAX_PERMITS 64

struct dlock_permits {
  dlock__synchronizer o;
  dlock__buf timeouts; /* {N}:timeout */
  dlock__buf unlock_prefix; /* dlock_permits_release_latch:{N}: */
};

int dlock_permits_new(dlock_client *client, const char *name,
                      const dlock_lock_opts *opts, dlock_permits **out) {
  int rc = dlock__synchronizer_new(sizeof(dlock_permits), client, name, opts,
                             (void **)out);
  if (rc != DLOCK_OK)
    return rc;
  dlock_permits *p = *out;
  const char *n = p->o.h.name;
  size_t len = p->o.h.name_len;
  if (dlock__key(&p->o.channel, DLOCK__KEY_SEM_CHANNEL, n, len) ||
      dlock__key(&p->timeouts, DLOCK__KEY_PERMITS_TIMEOUT, n, len) ||
      dlock__key(&p->unlock_prefix, DLOCK__KEY_PERMITS_LATCH, n, len)) {
    dlock_permits_free(p);
    *out = NULL;
    return dlock__oom();
  }
  return DLOCK_OK;
}

int dlock_permits_interrupt(dlock_permits *p, int *count) {
  dlock__clear_error();
  if (p == NULL)
    return dlock__fail(DLOCK_EINVAL, "permits is NULL");
  int n = dlock__interrupt(p, 0, 0);
  if (count)
    *count = n;
  return DLOCK_OK;
}

void dlock_permits_free(dlock_permits *p) {
  if (p == NULL)
    return;
  dlock__buf_free(&p->timeouts);
  dlock__buf_free(&p->unlock_prefix);
  dlock__synchronizer_free(&p->o);
  free(p);
}

int dlock_permits_try_set_permits(dlock_permits *p, int64_t permits,
                                  int64_t ttl_ms, int *set) {
  int rc = dlock__synchronizer_check(p);
  return rc != DLOCK_OK ? rc : dlock__sem_try_set(&p->o, permits, ttl_ms, set);
}

int dlock_permits_set_permits(dlock_permits *p, int64_t permits,
                              int64_t *available) {
  int rc = dlock__synchronizer_check(p);
  return rc != DLOCK_OK ? rc
                        : dlock__sem_set(&p->o, &p->timeouts, permits, available);
}

int dlock_permits_add_permits(dlock_permits *p, int64_t delta,
                              int64_t *available) {
  int rc = dlock__synchronizer_check(p);
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
  dlock__hold_id id = {p->timeouts.p, p->timeouts.len, raw, 16, p->o.h.name,
                       p->o.h.name_len};
  return id;
}

typedef struct attempt {
  dlock_permits *p;
  size_t n;
  int64_t lease_ms;
  int watchdog;
  char raw[MAX_PERMITS][16];
  int64_t sent_ms;
  dlock_permit_id ids[MAX_PERMITS]; /* an async acquire's, for its result */
} attempt;

/* New ids for a's n permits (hex into ids, raw into a). */
static int new_ids(attempt *a, dlock_permit_id *ids) {
  int rc = DLOCK_OK;
  for (size_t i = 0; i < a->n && rc == DLOCK_OK; i++) {
    rc = dlock__random_hex(ids[i].hex, 16);
    if (rc == DLOCK_OK)
      rc = unhex(&ids[i], a->raw[i]);
  }
  return rc;
}

static int acquire_req(attempt *a, dlock__req *req) {
  dlock_permits *p = a->p;
  const char *keys[] = {p->o.h.name, p->timeouts.p};
  size_t klens[] = {p->o.h.name_len, p->timeouts.len};
  const char *args[4 + MAX_PERMITS];
  size_t alens[4 + MAX_PERMITS];
  char n[24], lease[24];
  args[0] = n;
  alens[0] = (size_t)snprintf(n, sizeof n, "%zu", a->n);
  args[1] = lease;
  alens[1] = (size_t)snprintf(lease, sizeof lease, "%" PRId64, a->lease_ms);
  args[2] = dlock__publish_cmd(p->o.h.client);
  alens[2] = strlen(dlock__publish_cmd(p->o.h.client));
  args[3] = p->o.channel.p;
  alens[3] = p->o.channel.len;
  for (size_t i = 0; i < a->n; i++) {
    args[4 + i] = a->raw[i];
    alens[4 + i] = 16;
  }
  return dlock__req_script(req, DLOCK__SCRIPT_PERMITS_ACQUIRE, 2, keys, klens,
                           4 + a->n, args, alens);
}

/* lua/permits_acquire.lua: {1} taken, {0, ms} not (the next expiry). */
static int acquire_reply(const redisReply *r, int64_t *hint) {
  if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
      r->element[0]->type == REDIS_REPLY_INTEGER) {
    int taken = r->element[0]->integer == 1;
    *hint = !taken && r->elements == 2 ? r->element[1]->integer : -1;
    if (*hint == 0)
      *hint = 1;
    return taken ? DLOCK_OK : DLOCK_EBUSY;
  }
  return dlock__fail_reply(r, "acquire permits");
}

/* The permits taken are held by owner: the watchdog renews them when
 * asked, and tells of their loss. */
static int record(attempt *a, uint64_t owner) {
  static const dlock__renewal renew = {
      DLOCK__SCRIPT_PERMITS_RENEW, DLOCK__SCRIPT_PERMITS_RENEW_NODE, NULL, 0};
  int rc = DLOCK_OK;
  for (size_t i = 0; i < a->n && rc == DLOCK_OK; i++) {
    dlock__hold_id id = permit_hold(a->p, a->raw[i]);
    rc = dlock__hold_add(a->p->o.h.client, &id, owner, &renew, a->watchdog,
                         a->lease_ms, a->sent_ms, NULL);
  }
  return rc;
}

static int release_req(dlock_permits *p, char (*raw)[16], size_t n,
                       const char *rid, dlock__req *req);

/* ---- the wait for permits (both drivers read permits_wait): w->ctx is the
 * attempt, w->demand its n ---------------------------------------------- */

static int wait_try(dlock__wait *w, dlock__req *req) {
  return acquire_req(w->ctx, req);
}

static int wait_reply(dlock__wait *w, const redisReply *r, int64_t *hint) {
  (void)w;
  return acquire_reply(r, hint);
}

/* The permits as the owner's holds; an async acquire's result names them. */
static int wait_granted(dlock__wait *w) {
  attempt *a = w->ctx;
  a->sent_ms = w->sent_ms;
  int rc = record(a, w->owner);
  if (rc != DLOCK_OK) {
    for (size_t i = 0; i < a->n; i++) { /* given back: not tracked */
      dlock__hold_id id = permit_hold(a->p, a->raw[i]);
      dlock__hold_released(a->p->o.h.client, &id, 1);
    }
    return dlock__fail(DLOCK_ENOMEM, "out of memory recording the permits");
  }
  if (w->res) {
    dlock_result *res = w->res;
    res->ids = a->ids;
    res->n = a->n;
  }
  return DLOCK_OK;
}

static int wait_give_back(dlock__wait *w, const char *rid, dlock__req *req) {
  attempt *a = w->ctx;
  return release_req(a->p, a->raw, a->n, rid, req);
}

/* A try whose answer was lost: did it run? Every try of one acquire
 * carries the same ids, and a try that ran put them in {N}:timeout: the
 * first is there (1), or not (0: the next try takes them). */
static int wait_ask(dlock__wait *w, int *ran) {
  attempt *a = w->ctx;
  dlock_permits *p = a->p;
  const char *argv[] = {"ZSCORE", p->timeouts.p, a->raw[0]};
  size_t lens[] = {6, p->timeouts.len, 16};
  return dlock__synchronizer_ran(&p->o, 3, argv, lens, ran);
}

static const dlock__wait_rules permits_wait = {
    .noun = "permits of",
    .try_req = wait_try,
    .try_reply = wait_reply,
    .granted = wait_granted,
    .give_back = wait_give_back,
    .ask = wait_ask,
    .wait_channel = dlock__synchronizer_channel,
    .fifo = 1,
};

static int release_ids(dlock_permits *p, const dlock_permit_id *ids,
                       size_t n);

int dlock_permits_acquire(dlock_permits *p, size_t n, int64_t wait_ms,
                          int64_t lease_ms, dlock_permit_id *ids) {
  return dlock__permits_acquire(p, n, wait_ms, lease_ms, ids, 1);
}

int dlock__permits_acquire(dlock_permits *p, size_t n, int64_t wait_ms,
                           int64_t lease_ms, dlock_permit_id *ids, int counted) {
  int rc = dlock__synchronizer_check(p);
  if (rc != DLOCK_OK)
    return rc;
  if (n < 1 || n > MAX_PERMITS || ids == NULL)
    return dlock__fail(DLOCK_EINVAL, "n must be 1..%d and ids not NULL",
                       MAX_PERMITS);
  if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
    return dlock__fail(DLOCK_EINVAL, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
  if (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG)
    return dlock__fail(DLOCK_EINVAL, "lease_ms must be > 0 or DLOCK_LEASE_WATCHDOG");
  dlock_client *c = p->o.h.client;
  int watchdog = lease_ms == DLOCK_LEASE_WATCHDOG;
  attempt *a = calloc(1, sizeof *a);
  if (a == NULL)
    return dlock__oom();
  a->p = p;
  a->n = n;
  a->watchdog = watchdog;
  a->lease_ms = watchdog ? dlock__client_opts(c)->watchdog_timeout_ms : lease_ms;
  if ((rc = new_ids(a, ids)) != DLOCK_OK) {
    free(a);
    return rc;
  }
  dlock__wait w = {.k = &permits_wait, .h = &p->o.h, .ctx = a,
                   .owner = dlock_thread_id(), .wait_ms = wait_ms,
                   .lease_ms = a->lease_ms, .watchdog = watchdog,
                   .demand = (int64_t)n};
  int64_t t0_us = dlock__now_us();
  dlock__stats_wait_reset();
  rc = dlock__wait_run(&w);
  free(a);
  if (counted)
    dlock__acquire_done(c, p->o.h.name, p->o.h.name_len, dlock_thread_id(), rc,
                        t0_us);
  return rc;
}

int dlock_permits_release(dlock_permits *p, const dlock_permit_id *ids,
                          size_t n) {
  int rc = release_ids(p, ids, n);
  if (p && p->o.h.client && rc != DLOCK_EINVAL && rc != DLOCK_ECLOSED)
    dlock__stats_release(dlock__client_stats(p->o.h.client), rc);
  return rc;
}

/* A release of n permits (raw ids) as a request; rid: its latch's id. */
static int release_req(dlock_permits *p, char (*raw)[16], size_t n,
                       const char *rid, dlock__req *req) {
  dlock_client *c = p->o.h.client;
  const char *keys[] = {p->o.h.name, NULL, p->timeouts.p};
  size_t klens[] = {p->o.h.name_len, 0, p->timeouts.len};
  char latch_ms[24];
  const char *args[3 + MAX_PERMITS] = {dlock__publish_cmd(c), p->o.channel.p,
                                       latch_ms};
  size_t alens[3 + MAX_PERMITS] = {
      strlen(dlock__publish_cmd(c)), p->o.channel.len,
      (size_t)snprintf(latch_ms, sizeof latch_ms, "%" PRId64,
                       dlock__unlock_latch_ms(c))};
  for (size_t i = 0; i < n; i++) {
    args[3 + i] = raw[i];
    alens[3 + i] = 16;
  }
  return dlock__release_req(req, DLOCK__SCRIPT_PERMITS_RELEASE,
                            &p->unlock_prefix, rid, 3, keys, klens, 3 + n, args,
                            alens);
}

typedef struct release_of {
  dlock_permits *p;
  char (*raw)[16];
  size_t n;
} release_of;

static int build_release(void *ctx, const char *rid, dlock__req *req) {
  release_of *x = ctx;
  return release_req(x->p, x->raw, x->n, rid, req);
}

int dlock__permits_release(dlock_permits *p, const dlock_permit_id *ids,
                           size_t n) {
  return release_ids(p, ids, n);
}

static int release_ids(dlock_permits *p, const dlock_permit_id *ids,
                       size_t n) {
  int rc = dlock__synchronizer_check(p);
  if (rc != DLOCK_OK)
    return rc;
  if (n < 1 || n > MAX_PERMITS || ids == NULL)
    return dlock__fail(DLOCK_EINVAL, "n must be 1..%d and ids not NULL",
                       MAX_PERMITS);
  char raw[MAX_PERMITS][16];
  for (size_t i = 0; i < n; i++)
    if ((rc = unhex(&ids[i], raw[i])) != DLOCK_OK)
      return rc;
  dlock_client *c = p->o.h.client;
  for (size_t i = 0; i < n; i++) {
    dlock__hold_id id = permit_hold(p, raw[i]);
    dlock__hold_releasing(c, &id);
  }
  /* retried on a lost reply; the latch replays one that ran */
  release_of x = {p, raw, n};
  redisReply *r;
  rc = dlock__release_retry(c, build_release, &x, &r);
  if (rc != DLOCK_OK)
    return rc;
  int64_t released = 0;
  rc = dlock__reply_int(r, &released, "release permits");
  freeReplyObject(r);
  if (rc != DLOCK_OK)
    return rc;
  if (released > 0) {
    dlock__fifo_released(c, p->o.channel.p, p->o.channel.len, released);
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
    return dlock__fail_reported_lost(what, p->o.h.name);
  }
  /* Nothing was released: the script names the first bad permit. Ours but
   * gone means it expired; otherwise it is unknown. */
  size_t bad = released < 0 && (size_t)-released <= n ? (size_t)-released - 1 : 0;
  dlock__hold_id id = permit_hold(p, raw[bad]);
  int64_t valid = dlock__hold_valid_ms(c, &id);
  if (dlock__hold_released(c, &id, -1)) { /* forget it: it is gone */
    char what[64];
    snprintf(what, sizeof what, "permit %s of", ids[bad].hex);
    dlock__fail_gone(what, p->o.h.name, valid);
    return dlock__fail_more(DLOCK_ELOST, "; nothing was released");
  }
  return dlock__fail(DLOCK_ENOTOWNER, "permit %s of \"%.100s%s\" is unknown "
                     "(never acquired, released, or expired); nothing was "
                     "released", ids[bad].hex, DLOCK__NAME(p->o.h.name));
}

int dlock_permits_update_lease(dlock_permits *p, const dlock_permit_id *pid,
                               int64_t lease_ms, int *updated_out) {
  int rc = dlock__synchronizer_check(p);
  if (rc != DLOCK_OK)
    return rc;
  if (pid == NULL || (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG))
    return dlock__fail(DLOCK_EINVAL, "need an id and lease_ms > 0 or "
                       "DLOCK_LEASE_WATCHDOG");
  char raw[16], lease[24];
  if ((rc = unhex(pid, raw)) != DLOCK_OK)
    return rc;
  dlock_client *c = p->o.h.client;
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
    static const dlock__renewal renew = {
        DLOCK__SCRIPT_PERMITS_RENEW, DLOCK__SCRIPT_PERMITS_RENEW_NODE, NULL, 0};
    dlock__hold_released(c, &id, 1);
    dlock__hold_add(c, &id, dlock_thread_id(), &renew, watchdog,
                    ms, t0, NULL);
  }
  if (updated_out)
    *updated_out = updated == 1;
  return DLOCK_OK;
}

static int state(dlock_permits *p, const char *raw, int64_t out[3]) {
  const char *keys[] = {p->o.h.name, p->timeouts.p};
  size_t klens[] = {p->o.h.name_len, p->timeouts.len};
  const char *args[] = {dlock__publish_cmd(p->o.h.client), p->o.channel.p, raw ? raw : ""};
  size_t alens[] = {strlen(dlock__publish_cmd(p->o.h.client)), p->o.channel.len, raw ? 16 : 0};
  redisReply *r;
  int rc = dlock__script_call(p->o.h.client, DLOCK__SCRIPT_PERMITS_STATE, 2, keys,
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
  int rc = dlock__synchronizer_check(p);
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
  int rc = dlock__synchronizer_check(p);
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

/* ---- async (dlock/async.h) ------------------------------------------------- */

int dlock_permits_acquire_async(dlock_permits *p, size_t n, int64_t wait_ms,
                                int64_t lease_ms, dlock_done_fn *done,
                                void *data, dlock_op *out) {
  int rc = dlock__aop_check(p ? &p->o.h : NULL, "permits", done);
  if (rc != DLOCK_OK)
    return rc;
  if (n < 1 || n > MAX_PERMITS)
    return dlock__fail(DLOCK_EINVAL, "n must be 1..%d", MAX_PERMITS);
  if ((rc = dlock__check_wait_lease(wait_ms, lease_ms)) != DLOCK_OK)
    return rc;
  attempt *a = calloc(1, sizeof *a);
  if (a == NULL)
    return dlock__oom();
  a->p = p;
  a->n = n;
  a->watchdog = lease_ms == DLOCK_LEASE_WATCHDOG;
  a->lease_ms = a->watchdog
                    ? dlock__client_opts(p->o.h.client)->watchdog_timeout_ms
                    : lease_ms;
  dlock__aop *op = NULL;
  if ((rc = new_ids(a, a->ids)) != DLOCK_OK ||
      (rc = dlock__aop_await_new(&p->o.h, DLOCK__AOP_ACQUIRE, &permits_wait,
                                 wait_ms, done, data, &op)) != DLOCK_OK) {
    free(a);
    return rc;
  }
  op->ctx = a; /* freed with op */
  op->wt.ctx = a;
  op->wt.demand = (int64_t)n;
  op->wt.lease_ms = a->lease_ms;
  op->wt.watchdog = a->watchdog;
  return dlock__aop_start(op, dlock__await_start, out);
}

typedef struct release_args {
  size_t n;
  dlock_permit_id ids[MAX_PERMITS];
} release_args;

static int release_job(dlock__aop *op) {
  release_args *x = op->ctx;
  return dlock_permits_release((void *)op->h, x->ids, x->n);
}

int dlock_permits_release_async(dlock_permits *p, const dlock_permit_id *ids,
                                size_t n, dlock_done_fn *done, void *data,
                                dlock_op *out) {
  if (n < 1 || n > MAX_PERMITS || ids == NULL)
    return dlock__fail(DLOCK_EINVAL, "n must be 1..%d and ids not NULL",
                       MAX_PERMITS);
  release_args *x = calloc(1, sizeof *x);
  if (x == NULL)
    return dlock__oom();
  x->n = n;
  memcpy(x->ids, ids, n * sizeof *ids); /* the caller's may go */
  return dlock__aop_job(NULL, p ? &p->o.h : NULL, "permits", DLOCK__AOP_OTHER,
                        release_job, 0, x, dlock_thread_id(), done,
                        data, out);
}
