/* CountDownLatch (docs/wire.md, "CountDownLatch"): key N = the count; channel
 * redisson_countdownlatch__channel__{N}, message "0" = reached zero, "1" =
 * new count or deleted. Waiters wake on any message and re-check. */
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "sync/synchronizer.h"

struct dlock_latch {
  dlock__synchronizer o;
};

int dlock_latch_new(dlock_client *client, const char *name,
                    const dlock_lock_opts *opts, dlock_latch **out) {
  int rc = dlock__synchronizer_new(sizeof(dlock_latch), client, name, opts,
                             (void **)out);
  if (rc != DLOCK_OK)
    return rc;
  dlock_latch *l = *out;
  if (dlock__key(&l->o.channel, DLOCK__KEY_LATCH_CHANNEL, l->o.h.name,
                 l->o.h.name_len)) {
    dlock_latch_free(l);
    *out = NULL;
    return dlock__oom();
  }
  return DLOCK_OK;
}

int dlock_latch_interrupt(dlock_latch *l, int *count) {
  dlock__clear_error();
  if (l == NULL)
    return dlock__fail(DLOCK_EINVAL, "latch is NULL");
  int n = dlock__interrupt(l, 0, 0);
  if (count)
    *count = n;
  return DLOCK_OK;
}

void dlock_latch_free(dlock_latch *l) {
  if (l == NULL)
    return;
  dlock__synchronizer_free(&l->o);
  free(l);
}

int dlock_latch_try_set_count(dlock_latch *l, int64_t count, int *set) {
  int rc = dlock__synchronizer_check(l);
  if (rc != DLOCK_OK)
    return rc;
  if (count < 1)
    return dlock__fail(DLOCK_EINVAL, "count must be >= 1");
  return dlock__synchronizer_run_flag(&l->o, DLOCK__SCRIPT_LATCH_TRY_SET_COUNT, 1,
                                &count, 1, set);
}

int dlock_latch_count_down(dlock_latch *l, int64_t *left) {
  int rc = dlock__synchronizer_check(l);
  if (rc != DLOCK_OK)
    return rc;
  return dlock__synchronizer_run(&l->o, DLOCK__SCRIPT_LATCH_COUNT_DOWN, 0, NULL, 1,
                           left);
}

int dlock_latch_delete(dlock_latch *l, int *deleted) {
  int rc = dlock__synchronizer_check(l);
  if (rc != DLOCK_OK)
    return rc;
  return dlock__synchronizer_run_flag(&l->o, DLOCK__SCRIPT_LATCH_DELETE, 0, NULL, 1,
                                deleted);
}

static int get_count(dlock_latch *l, int64_t *count) {
  return dlock__synchronizer_get(&l->o, "latch", count);
}

int dlock_latch_get_count(dlock_latch *l, int64_t *count) {
  int rc = dlock__synchronizer_check(l);
  if (rc != DLOCK_OK)
    return rc;
  if (count == NULL)
    return dlock__fail(DLOCK_EINVAL, "count is NULL");
  return get_count(l, count);
}

/* ---- the wait for zero (both drivers read latch_wait) --------------------- */

static int await_req(dlock__wait *w, dlock__req *req) {
  return dlock__synchronizer_get_req(&((dlock_latch *)(void *)w->h)->o, req);
}

static int await_reply(dlock__wait *w, const redisReply *r, int64_t *hint) {
  int rc = dlock__reply_int(r, &w->count, "latch");
  *hint = -1; /* no bound: the zero message (or the periodic re-check) */
  if (rc != DLOCK_OK)
    return rc;
  return w->count <= 0 ? DLOCK_OK : DLOCK_EBUSY;
}

static const dlock__wait_rules latch_wait = {
    .noun = "latch",
    .try_req = await_req,
    .try_reply = await_reply,
    .wait_channel = dlock__synchronizer_channel,
    .event = 1, /* the client's other calls keep the direct path */
};

int dlock_latch_await(dlock_latch *l, int64_t wait_ms) {
  int rc = dlock__synchronizer_check(l);
  if (rc != DLOCK_OK)
    return rc;
  if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
    return dlock__fail(DLOCK_EINVAL, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
  dlock__wait w = {.k = &latch_wait, .h = &l->o.h,
                   .owner = dlock_thread_id(), .wait_ms = wait_ms};
  rc = dlock__wait_run(&w);
  if (rc == DLOCK_EKIND && strstr(dlock_errmsg(), "not a count") == NULL)
    rc = dlock__synchronizer_kind(&l->o, "latch"); /* say which type */
  return rc;
}

/* ---- async (dlock/async.h) ------------------------------------------------- */

static int count_down_job(dlock__aop *op) {
  return dlock_latch_count_down((void *)op->h, &op->res.count);
}

static int get_count_job(dlock__aop *op) {
  return dlock_latch_get_count((void *)op->h, &op->res.count);
}

static int try_set_count_job(dlock__aop *op) {
  return dlock_latch_try_set_count((void *)op->h, op->num, &op->res.set);
}

int dlock_latch_count_down_async(dlock_latch *l, dlock_done_fn *done,
                                 void *data, dlock_op *out) {
  return dlock__aop_job(NULL, l ? &l->o.h : NULL, "latch", DLOCK__AOP_OTHER,
                        count_down_job, 0, NULL, dlock_thread_id(), done,
                        data, out);
}

int dlock_latch_get_count_async(dlock_latch *l, dlock_done_fn *done, void *data,
                                dlock_op *out) {
  return dlock__aop_job(NULL, l ? &l->o.h : NULL, "latch", DLOCK__AOP_OTHER,
                        get_count_job, 0, NULL, dlock_thread_id(), done,
                        data, out);
}

int dlock_latch_try_set_count_async(dlock_latch *l, int64_t count,
                                    dlock_done_fn *done, void *data,
                                    dlock_op *out) {
  if (count < 1)
    return dlock__fail(DLOCK_EINVAL, "count must be >= 1");
  return dlock__aop_job(NULL, l ? &l->o.h : NULL, "latch", DLOCK__AOP_OTHER,
                        try_set_count_job, count, NULL, dlock_thread_id(), done,
                        data, out);
}

int dlock_latch_await_async(dlock_latch *l, int64_t wait_ms,
                            dlock_done_fn *done, void *data, dlock_op *out) {
  int rc = dlock__aop_check(l ? &l->o.h : NULL, "latch", done);
  if (rc != DLOCK_OK)
    return rc;
  dlock__aop *op;
  rc = dlock__aop_await_new(&l->o.h, DLOCK__AOP_AWAIT, &latch_wait, wait_ms,
                            done, data, &op);
  return rc != DLOCK_OK ? rc : dlock__aop_start(op, dlock__await_start, out);
}
