/* Semaphore (docs/wire.md, "Semaphore"): key N = available permits (may go below
 * 0 through a negative add); channel redisson_sc:{N}, message = the new
 * available count. Waiters of one client are served in arrival order (a
 * FIFO channel: the oldest tries, and a release lets the oldest ones whose
 * demands fit the announced count try at once), so a waiter for many
 * permits is not overtaken by later ones for fewer. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "sync/synchronizer.h"

struct dlock_semaphore {
  dlock__synchronizer o;
};

int dlock_semaphore_new(dlock_client *client, const char *name,
                        const dlock_lock_opts *opts, dlock_semaphore **out) {
  int rc = dlock__synchronizer_new(sizeof(dlock_semaphore), client, name, opts,
                             (void **)out);
  if (rc != DLOCK_OK)
    return rc;
  dlock_semaphore *s = *out;
  if (dlock__key(&s->o.channel, DLOCK__KEY_SEM_CHANNEL, s->o.h.name,
                 s->o.h.name_len)) {
    dlock_semaphore_free(s);
    *out = NULL;
    return dlock__oom();
  }
  return DLOCK_OK;
}

int dlock_semaphore_interrupt(dlock_semaphore *s, int *count) {
  dlock__clear_error();
  if (s == NULL)
    return dlock__fail(DLOCK_EINVAL, "semaphore is NULL");
  int n = dlock__interrupt(s, 0, 0);
  if (count)
    *count = n;
  return DLOCK_OK;
}

void dlock_semaphore_free(dlock_semaphore *s) {
  if (s == NULL)
    return;
  dlock__synchronizer_free(&s->o);
  free(s);
}

int dlock__sem_try_set(dlock__synchronizer *o, int64_t permits, int64_t ttl_ms,
                       int *set) {
  if (permits < 0 || ttl_ms < 0)
    return dlock__fail(DLOCK_EINVAL, "permits and ttl_ms must be >= 0");
  int64_t nums[] = {permits, ttl_ms};
  return dlock__synchronizer_run_flag(o, DLOCK__SCRIPT_SEM_TRY_SET_PERMITS, 2, nums, 1,
                                set);
}

int dlock__sem_add(dlock__synchronizer *o, int64_t delta, int64_t *available) {
  return dlock__synchronizer_run(o, DLOCK__SCRIPT_SEM_ADD_PERMITS, 1, &delta, 1, available);
}

int dlock__sem_set(dlock__synchronizer *o, const dlock__buf *timeouts,
                   int64_t permits, int64_t *available) {
  if (permits < 0)
    return dlock__fail(DLOCK_EINVAL, "permits must be >= 0");
  return dlock__synchronizer_run_key2(o, timeouts, DLOCK__SCRIPT_SEM_SET_PERMITS,
                                      1, &permits, 1, available);
}

int dlock_semaphore_set_permits(dlock_semaphore *s, int64_t permits,
                                int64_t *available) {
  int rc = dlock__synchronizer_check(s);
  return rc != DLOCK_OK ? rc : dlock__sem_set(&s->o, NULL, permits, available);
}

int dlock_semaphore_try_set_permits(dlock_semaphore *s, int64_t permits,
                                    int64_t ttl_ms, int *set) {
  int rc = dlock__synchronizer_check(s);
  return rc != DLOCK_OK ? rc : dlock__sem_try_set(&s->o, permits, ttl_ms, set);
}

int dlock_semaphore_add_permits(dlock_semaphore *s, int64_t delta,
                                int64_t *available) {
  int rc = dlock__synchronizer_check(s);
  return rc != DLOCK_OK ? rc : dlock__sem_add(&s->o, delta, available);
}

/* ---- the wait for permits (both drivers read permit_wait): w->demand ------- */

/* The mark a try of this wait leaves when it takes permits:
 * dlock_semaphore_take:{N}:R, R the wait's request id; it lives as long as
 * an answer may be asked after (an unlock latch's time). */
static int take_mark(dlock__wait *w, dlock__buf *mark) {
  dlock_semaphore *s = (void *)w->h;
  *mark = (dlock__buf){0};
  if (dlock__key(mark, DLOCK__KEY_SEM_TAKE, s->o.h.name, s->o.h.name_len) ||
      dlock__buf_add(mark, w->rid, strlen(w->rid)) != DLOCK_OK) {
    dlock__buf_free(mark);
    return dlock__oom();
  }
  return DLOCK_OK;
}

static int acquire_req(dlock__wait *w, dlock__req *req) {
  dlock_semaphore *s = (void *)w->h;
  dlock__buf mark;
  int rc = take_mark(w, &mark);
  if (rc != DLOCK_OK)
    return rc;
  int64_t nums[] = {w->demand, dlock__unlock_latch_ms(s->o.h.client)};
  rc = dlock__synchronizer_req(&s->o, &mark, DLOCK__SCRIPT_SEM_TRY_ACQUIRE, 2,
                               nums, 0, req);
  dlock__buf_free(&mark);
  return rc;
}

/* A try whose answer was lost: did it take the permits? Its mark says. */
static int acquire_ask(dlock__wait *w, int *ran) {
  dlock_semaphore *s = (void *)w->h;
  dlock__buf mark;
  int rc = take_mark(w, &mark);
  if (rc != DLOCK_OK)
    return rc;
  const char *argv[] = {"EXISTS", mark.p};
  size_t lens[] = {6, mark.len};
  rc = dlock__synchronizer_ran(&s->o, 2, argv, lens, ran);
  dlock__buf_free(&mark);
  return rc;
}

static int acquire_reply(dlock__wait *w, const redisReply *r, int64_t *hint) {
  int64_t taken = 0;
  int rc = dlock__reply_int(r, &taken, "acquire permits");
  (void)w;
  *hint = -1; /* permits come back by release only: wait for the message */
  if (rc != DLOCK_OK)
    return rc;
  return taken == 1 ? DLOCK_OK : DLOCK_EBUSY;
}

/* Permits taken for an acquire nobody keeps go back, announced. */
static int acquire_give_back(dlock__wait *w, const char *rid,
                             dlock__req *req) {
  dlock_semaphore *s = (void *)w->h;
  (void)rid;
  return dlock__synchronizer_req(&s->o, NULL, DLOCK__SCRIPT_SEM_RELEASE, 1,
                                 &w->demand, 1, req);
}

static const dlock__wait_rules permit_wait = {
    .noun = "semaphore",
    .try_req = acquire_req,
    .try_reply = acquire_reply,
    .give_back = acquire_give_back,
    .ask = acquire_ask,
    .wait_channel = dlock__synchronizer_channel,
    .fifo = 1,
    .says_demand = 1,
};

int dlock_semaphore_acquire(dlock_semaphore *s, int64_t n, int64_t wait_ms) {
  int rc = dlock__synchronizer_check(s);
  if (rc != DLOCK_OK)
    return rc;
  if (n < 0)
    return dlock__fail(DLOCK_EINVAL, "n must be >= 0");
  if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
    return dlock__fail(DLOCK_EINVAL, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
  if (n == 0)
    return DLOCK_OK;
  dlock__wait w = {.k = &permit_wait, .h = &s->o.h,
                   .owner = dlock_thread_id(), .wait_ms = wait_ms,
                   .demand = n};
  int64_t t0_us = dlock__now_us();
  dlock__stats_wait_reset();
  rc = dlock__wait_run(&w);
  dlock__acquire_done(s->o.h.client, s->o.h.name, s->o.h.name_len,
                      dlock_thread_id(), rc, t0_us);
  return rc;
}

typedef struct sem_release {
  dlock_semaphore *s;
  int64_t n;
} sem_release;

/* One attempt of a release: its latch dlock_semaphore_release:{N}:R makes
 * a retry after a lost answer replay the first, not give back twice. */
static int build_release(void *ctx, const char *rid, dlock__req *req) {
  sem_release *x = ctx;
  dlock__synchronizer *o = &x->s->o;
  dlock__buf latch = {0};
  if (dlock__key(&latch, DLOCK__KEY_SEM_RELEASE, o->h.name, o->h.name_len) ||
      dlock__buf_add(&latch, rid, strlen(rid)) != DLOCK_OK) {
    dlock__buf_free(&latch);
    return dlock__oom();
  }
  char n[24], ttl[24];
  const char *pub = dlock__publish_cmd(o->h.client);
  const char *keys[] = {o->h.name, latch.p};
  size_t klens[] = {o->h.name_len, latch.len};
  const char *args[] = {n, pub, o->channel.p, ttl};
  size_t alens[] = {(size_t)snprintf(n, sizeof n, "%" PRId64, x->n), strlen(pub),
                    o->channel.len,
                    (size_t)snprintf(ttl, sizeof ttl, "%" PRId64,
                                     dlock__unlock_latch_ms(o->h.client))};
  int rc = dlock__req_script(req, DLOCK__SCRIPT_SEM_RELEASE, 2, keys, klens, 4,
                             args, alens);
  dlock__buf_free(&latch);
  return rc;
}

int dlock_semaphore_release(dlock_semaphore *s, int64_t n) {
  int rc = dlock__synchronizer_check(s);
  if (rc != DLOCK_OK)
    return rc;
  if (n < 0)
    return dlock__fail(DLOCK_EINVAL, "n must be >= 0");
  if (n == 0)
    return DLOCK_OK;
  sem_release x = {s, n};
  redisReply *r = NULL;
  rc = dlock__release_retry(s->o.h.client, build_release, &x, &r);
  if (rc == DLOCK_OK) {
    int64_t available;
    rc = dlock__reply_int(r, &available,
                          dlock__scripts[DLOCK__SCRIPT_SEM_RELEASE].name);
    freeReplyObject(r);
  }
  if (rc == DLOCK_OK)
    dlock__fifo_released(s->o.h.client, s->o.channel.p, s->o.channel.len, n);
  dlock__stats_release(dlock__client_stats(s->o.h.client), rc);
  return rc;
}

int dlock_semaphore_available(dlock_semaphore *s, int64_t *n) {
  int rc = dlock__synchronizer_check(s);
  if (rc != DLOCK_OK)
    return rc;
  if (n == NULL)
    return dlock__fail(DLOCK_EINVAL, "n is NULL");
  return dlock__synchronizer_get(&s->o, "semaphore", n);
}

int dlock_semaphore_drain(dlock_semaphore *s, int64_t *drained) {
  int rc = dlock__synchronizer_check(s);
  return rc != DLOCK_OK ? rc : dlock__synchronizer_run(&s->o, DLOCK__SCRIPT_SEM_DRAIN, 0, NULL, 0, drained);
}

/* ---- async (dlock/async.h) ------------------------------------------------- */

static int release_job(dlock__aop *op) {
  return dlock_semaphore_release((void *)op->h, op->num);
}

int dlock_semaphore_release_async(dlock_semaphore *s, int64_t n,
                                  dlock_done_fn *done, void *data,
                                  dlock_op *out) {
  if (n < 0)
    return dlock__fail(DLOCK_EINVAL, "n must be >= 0");
  return dlock__aop_job(NULL, s ? &s->o.h : NULL, "semaphore", DLOCK__AOP_OTHER,
                        release_job, n, NULL, dlock_thread_id(), done,
                        data, out);
}

static void nothing_done(dlock__aop *op) { dlock__aop_finish(op, DLOCK_OK); }

int dlock_semaphore_acquire_async(dlock_semaphore *s, int64_t n,
                                  int64_t wait_ms, dlock_done_fn *done,
                                  void *data, dlock_op *out) {
  int rc = dlock__aop_check(s ? &s->o.h : NULL, "semaphore", done);
  if (rc != DLOCK_OK)
    return rc;
  if (n < 0)
    return dlock__fail(DLOCK_EINVAL, "n must be >= 0");
  dlock__aop *op;
  rc = dlock__aop_await_new(&s->o.h, DLOCK__AOP_ACQUIRE, &permit_wait, wait_ms,
                            done, data, &op);
  if (rc != DLOCK_OK)
    return rc;
  op->num = op->wt.demand = n;
  /* 0 permits: granted, but through the callback as always */
  return dlock__aop_start(op, n == 0 ? nothing_done : dlock__await_start, out);
}
