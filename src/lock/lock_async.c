/* The async lock calls (dlock/async.h), the lock recipe's non-blocking
 * half: argument checks as lock.c's, then an operation that runs on the
 * engine thread (src/async).
 *
 * A kind with request methods and a wait channel
 * acquires and releases by request, and waits without a thread: one try
 * per request, the waiting recipe of docs/threading.md with an async
 * waiter and a timer in place of the thread (src/async/await.c). A kind built
 * on other async calls (the semaphore lock) or a combinator starts its
 * own (acquire_async, release_async); every kind in the tree has one of
 * the two. Other calls run their blocking form as a thread-pool job,
 * which never waits for a lock. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async/async.h"
#include "lock/lock_impl.h"

/* A lock operation's lock: its handle. */
static dlock_lock *lock_of(const dlock__aop *op) {
  return (dlock_lock *)(void *)op->h;
}

int dlock__lock_can_wait(const dlock_lock *l) {
  return dlock__lock_has_requests(l);
}

/* The common checks, and the owner: *owner, or the handle's bound one
 * (0 allowed when need_owner is 0). */
static int check(dlock_lock *l, dlock_done_fn *done, uint64_t *owner,
                 int need_owner) {
  int rc = dlock__aop_check(l ? &l->h : NULL, "lock", done);
  if (rc != DLOCK_OK)
    return rc;
  if (*owner == 0)
    *owner = l->bound_owner;
  if (*owner == 0 && need_owner)
    return dlock__fail(DLOCK_EINVAL, "no owner: pass an owner id "
                       "(dlock_owner_id_new) or bind one to the handle "
                       "(dlock_lock_bind_owner)");
  return DLOCK_OK;
}

/* A pool-job op on l's client, or a combinator's members' engine. */
static int job_op(dlock_lock *l, int (*fn)(dlock__aop *), uint64_t owner,
                  dlock_done_fn *done, void *data, dlock_op *out) {
  dlock_client *c = l->h.client;
  if (c == NULL && l->m->async_client)
    c = l->m->async_client(l);
  else if (c == NULL)
    dlock__fail(DLOCK_ENOTSUP, "%s locks have no async calls", l->m->kind);
  if (c == NULL)
    return DLOCK_ENOTSUP;
  return dlock__aop_job(c, &l->h, "lock", DLOCK__AOP_OTHER, fn, 0, NULL, owner,
                        done, data, out);
}

static int release_blocking(dlock__aop *op) {
  return dlock__lock_run_release(lock_of(op), op->owner);
}

/* ---- acquire: the kind's wait (its table's, read by src/async/await.c) --- */

int dlock_acquire_async(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                        int64_t lease_ms, dlock_done_fn *done, void *data,
                        dlock_op *out) {
  return dlock__acquire_op(l, owner, wait_ms, lease_ms, done, data, 0, out);
}

int dlock__acquire_op(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                      int64_t lease_ms, dlock_done_fn *done, void *data,
                      int internal, dlock_op *out) {
  int rc = check(l, done, &owner, 1);
  if (rc != DLOCK_OK)
    return rc;
  if ((rc = dlock__check_wait_lease(wait_ms, lease_ms)) != DLOCK_OK)
    return rc;
  if (l->m->reqs == NULL && l->m->acquire == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot be acquired", l->m->kind);
  if (l->m->acquire_async)
    return l->m->acquire_async(l, owner, wait_ms, lease_ms, done, data, out);
  if (l->h.client == NULL || !dlock__lock_can_wait(l))
    return dlock__fail(DLOCK_ENOTSUP, "%s locks have no async acquire",
                       l->m->kind);
  const dlock__lock_reqs *m = l->m->reqs;
  dlock__aop *op;
  rc = dlock__aop_await_new(&l->h, DLOCK__AOP_ACQUIRE,
                            dlock__lock_wait_rules(m), wait_ms, done, data,
                            &op);
  if (rc != DLOCK_OK)
    return rc;
  op->internal = internal;
  op->owner = op->wt.owner = owner;
  op->wt.noun = l->m->noun; /* as the blocking wait names it */
  op->wt.watchdog = lease_ms == DLOCK_LEASE_WATCHDOG;
  op->wt.lease_ms = op->wt.watchdog
                        ? dlock__client_opts(l->h.client)->watchdog_timeout_ms
                        : lease_ms;
  op->wt.no_ask = m->hold_count == NULL;
  return dlock__aop_start(op, dlock__await_start, out);
}

/* ---- release ------------------------------------------------------------------ */

static void release_send(dlock__aop *op);

static void release_reply(dlock__req *req, redisReply *reply, int status) {
  dlock__aop *op = req->data;
  dlock_lock *l = lock_of(op);
  int rc = status, sent = dlock__req_fate(req) == DLOCK__SENT;
  if (status != DLOCK_OK)
    rc = dlock__fail(status, "%s", req->errmsg[0] ? req->errmsg
                                                  : dlock_strerror(status));
  free(req);
  if (dlock__answer_lost(rc) && dlock__release_again(op->c, op->sent_ms, op->tries)) {
    release_send(op); /* the same request id: the latch replays it */
    return;
  }
  if (rc != DLOCK_OK) {
    if (rc == DLOCK_EIO || (rc == DLOCK_ENOMEM && sent))
      l->m->reqs->forget(l, op->owner); /* unknown outcome: the lease ends it */
    dlock__aop_finish(op, rc);
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR)
    rc = dlock__fail_reply(reply, "Redis");
  else
    rc = l->m->reqs->released(l, op->owner, reply);
  freeReplyObject(reply);
  dlock__aop_finish(op, rc);
}

static void release_send(dlock__aop *op) {
  dlock__req *req = calloc(1, sizeof *req);
  if (req == NULL) {
    dlock__fail(DLOCK_ENOMEM, "out of memory");
    dlock__aop_finish(op, DLOCK_ENOMEM);
    return;
  }
  if (op->tries == 0) {
    op->sent_ms = dlock__now_ms(); /* the retry window starts */
    op->ctx = malloc(33); /* the request id, the same for the retries */
    if (op->ctx == NULL || dlock__request_id(op->ctx) != DLOCK_OK) {
      free(req);
      dlock__aop_finish(op, dlock__fail(DLOCK_ENOMEM, "out of memory"));
      return;
    }
  }
  int rc = lock_of(op)->m->reqs->release_req(lock_of(op), op->owner, op->ctx, req);
  if (rc != DLOCK_OK) {
    free(req);
    dlock__aop_finish(op, rc);
    return;
  }
  op->tries++;
  dlock__aop_send(op, req, release_reply);
}


int dlock_release_async(dlock_lock *l, uint64_t owner, dlock_done_fn *done,
                        void *data, dlock_op *out) {
  return dlock__release_op(l, owner, done, data, 0, out);
}

int dlock__release_op(dlock_lock *l, uint64_t owner, dlock_done_fn *done,
                      void *data, int internal, dlock_op *out) {
  int rc = check(l, done, &owner, 1);
  if (rc != DLOCK_OK)
    return rc;
  if (l->m->reqs == NULL && l->m->release == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot be released", l->m->kind);
  if (l->m->release_async)
    return l->m->release_async(l, owner, done, data, out);
  if (l->h.client == NULL) /* a combinator's blocking release, bounded */
    return job_op(l, release_blocking, owner, done, data, out);
  dlock__aop *op = dlock__aop_new(&l->h, DLOCK__AOP_RELEASE, done, data);
  if (op == NULL)
    return dlock__oom();
  op->internal = internal;
  op->owner = owner;
  if (dlock__lock_has_requests(l))
    return dlock__aop_start(op, release_send, out);
  op->blocking = release_blocking;
  return dlock__aop_start(op, dlock__aop_blocking, out);
}

/* ---- force release and state: thread-pool jobs ------------------------------ */

static int force_blocking(dlock__aop *op) {
  int deleted = 0;
  int rc = lock_of(op)->m->force_release(lock_of(op), &deleted);
  op->res.released = deleted;
  return rc;
}

int dlock_force_release_async(dlock_lock *l, dlock_done_fn *done, void *data,
                              dlock_op *out) {
  uint64_t owner = 0;
  int rc = check(l, done, &owner, 0);
  if (rc != DLOCK_OK)
    return rc;
  if (l->m->force_release == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks have no force release",
                       l->m->kind);
  return job_op(l, force_blocking, 0, done, data, out);
}

static int state_blocking(dlock__aop *op) {
  return lock_of(op)->m->state(lock_of(op), op->owner, &op->res.state);
}

int dlock_lock_state_async(dlock_lock *l, uint64_t owner, dlock_done_fn *done,
                           void *data, dlock_op *out) {
  int rc = check(l, done, &owner, 0);
  if (rc != DLOCK_OK)
    return rc;
  if (l->m->state == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks have no state query",
                       l->m->kind);
  return job_op(l, state_blocking, owner, done, data, out);
}

dlock_client *dlock__lock_members_engine(dlock_lock *const *members, size_t n) {
  dlock_client *c = members[0]->h.client;
  for (size_t i = 0; i < n; i++) {
    dlock_client *mc = members[i]->h.client;
    if (mc == NULL || c == NULL || !dlock__client_same_engine(mc, c)) {
      dlock__fail(DLOCK_ENOTSUP, "async calls of a multi-lock or RedLock need "
                  "members whose clients run on one engine thread (one client, "
                  "or share_engine); member %zu's does not", i);
      return NULL;
    }
  }
  return c;
}
