/* The async lock calls (dlock/async.h): argument checks as lock.c's, then
 * an operation that runs on the engine thread.
 *
 * A kind with request methods (version 2) and a wait channel (version 3)
 * acquires and releases by request, and waits without a thread: one try
 * per request, the waiting recipe of docs/threading.md with an async
 * waiter and a timer in place of the thread. Other calls, and kinds
 * without them, run their blocking form as a thread-pool job, which never
 * waits (wait_ms 0). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async/async.h"
#include "net/cluster.h"
#include "lock/lock_impl.h"

static int can_wait(const dlock_lock *l) {
  return dlock__lock_has_requests(l) && l->m->version >= 3 &&
         l->m->wait_channel != NULL;
}

/* The common checks; *owner: the id the op acts for (0 allowed when
 * need_owner is 0). */
static int check(dlock_lock *l, dlock_done_fn *done, uint64_t *owner,
                 int need_owner) {
  dlock__clear_error();
  if (l == NULL)
    return dlock__fail(DLOCK_EINVAL, "lock is NULL");
  if (done == NULL)
    return dlock__fail(DLOCK_EINVAL, "done is NULL");
  if (l->h.client == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks have no async calls yet",
                       l->m->kind);
  if (dlock__client_closed(l->h.client))
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  if (*owner == 0)
    *owner = l->bound_owner;
  if (*owner == 0 && need_owner)
    return dlock__fail(DLOCK_EINVAL, "no owner: pass an owner id "
                       "(dlock_owner_id_new) or bind one to the handle "
                       "(dlock_lock_bind_owner)");
  return DLOCK_OK;
}

/* Send a release of a grant nobody will hold (cancelled, or not recorded),
 * without waiting for it: the op is not its owner. */
static void give_back_done(dlock__req *req, redisReply *reply, int status) {
  if (reply)
    freeReplyObject(reply);
  free(req);
}

static atomic_long given_back;

long dlock__aop_given_back(void) { return atomic_load(&given_back); }

static void give_back(dlock__aop *op) {
  char rid[33];
  atomic_fetch_add(&given_back, 1);
  dlock__req *req = calloc(1, sizeof *req);
  if (req == NULL || dlock__random_hex(rid, 16) != DLOCK_OK ||
      op->lock->m->release_req(op->lock, op->owner, rid, req) != DLOCK_OK) {
    free(req); /* the lease ends it */
    return;
  }
  req->done = give_back_done;
  req->data = NULL;
  req->queued_ms = dlock__now_ms();
  if (op->c->stopping) {
    dlock__req_finish(req, NULL, DLOCK_ECLOSED, "client closed");
    return;
  }
  dlock__send(op->c, req);
}

/* ---- acquire ------------------------------------------------------------------ */

static void try_send(dlock__aop *op);

static void try_ready(dlock__aop *op) {
  int woke = dlock__aop_woken(op);
  if (woke < 0) {
    if (woke == DLOCK_ECLOSED)
      dlock__fail(DLOCK_ECLOSED, "client closed while waiting");
    dlock__aop_finish(op, woke);
    return;
  }
  try_send(op); /* woken, or its timer: the deadline's is the last try */
}

static void try_reply(dlock__req *req, redisReply *reply, int status) {
  dlock__aop *op = req->data;
  dlock_lock *l = op->lock;
  int missed = req->sync_asked > 0 && req->synced == 0;
  int rc = status;
  if (status != DLOCK_OK)
    rc = dlock__fail(status, "%s", req->errmsg[0] ? req->errmsg
                                                  : dlock_strerror(status));
  free(req);
  int64_t hint = -1, token = 0;
  if (rc == DLOCK_OK) {
    rc = l->m->read_reply(reply, 0, &hint, &token);
    freeReplyObject(reply);
  }
  if (rc == 1) {
    if (missed) {
      give_back(op);
      dlock__fail(DLOCK_EIO, "replica guard: the grant reached none of its "
                  "master's replicas within replica_sync_ms; the lock was "
                  "released again");
      dlock__aop_finish(op, DLOCK_EIO);
      return;
    }
    if (dlock__aop_grant_cancelled(op)) {
      give_back(op);
      dlock__aop_finish(op, DLOCK_ECANCELED);
      return;
    }
    if (l->m->hold(l, op->owner, op->watchdog, op->lease_ms, op->sent_ms,
                   NULL) != DLOCK_OK) {
      give_back(op);
      dlock__fail(DLOCK_ENOMEM, "out of memory recording the hold");
      dlock__aop_finish(op, DLOCK_ENOMEM);
      return;
    }
    op->res.grant.token = token;
    op->res.grant.validity_ms = op->lease_ms - (dlock__now_ms() - op->sent_ms);
    dlock__aop_finish(op, DLOCK_OK);
    return;
  }
  if (rc < 0) {
    dlock__aop_finish(op, rc);
    return;
  }
  int64_t now = dlock__now_ms();
  if (op->wait_ms == 0) {
    dlock__fail(DLOCK_EBUSY, "lock \"%.100s\": not available (retry in %" PRId64
                " ms)", l->h.name, hint);
    dlock__aop_finish(op, DLOCK_EBUSY);
    return;
  }
  if (op->deadline_ms >= 0 && now >= op->deadline_ms) {
    dlock__fail(DLOCK_ETIMEDOUT, "lock \"%.100s\": still not available after %"
                PRId64 " ms", l->h.name, op->wait_ms);
    dlock__aop_finish(op, DLOCK_ETIMEDOUT);
    return;
  }
  if (dlock__aop_cancelled(op)) {
    dlock__aop_finish(op, DLOCK_ECANCELED);
    return;
  }
  dlock__buf channel = {0};
  dlock__wake_fn *wake = dlock__wake_one;
  int64_t until = dlock__wait_until(hint, now, op->deadline_ms);
  if (op->w == NULL) {
    rc = l->m->wait_channel(l, op->owner, &channel, &wake);
    if (rc != DLOCK_OK)
      rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
  }
  if (rc == DLOCK_OK)
    rc = dlock__aop_wait(op, channel.p, channel.len, wake, 0, until);
  dlock__buf_free(&channel);
  if (rc != DLOCK_OK)
    dlock__aop_finish(op, rc);
}

static void try_send(dlock__aop *op) {
  dlock__req *req = calloc(1, sizeof *req);
  if (req == NULL) {
    dlock__fail(DLOCK_ENOMEM, "out of memory");
    dlock__aop_finish(op, DLOCK_ENOMEM);
    return;
  }
  int rc = op->lock->m->try_req(op->lock, op->owner, op->lease_ms, req);
  if (rc != DLOCK_OK) {
    free(req);
    dlock__aop_finish(op, rc);
    return;
  }
  op->tries++;
  op->sent_ms = dlock__now_ms(); /* the lease starts no earlier */
  dlock__aop_send(op, req, try_reply);
}

static int acquire_blocking(dlock__aop *op) {
  dlock_grant g = {0, 0};
  op->tries = 1;
  int rc = op->lock->m->acquire(op->lock, op->owner, 0,
                                op->watchdog ? DLOCK_LEASE_WATCHDOG : op->lease_ms,
                                &g);
  if (rc == DLOCK_OK)
    op->res.grant = g;
  return rc;
}

int dlock_acquire_async(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                        int64_t lease_ms, dlock_done_fn *done, void *data,
                        dlock_op *out) {
  int rc = check(l, done, &owner, 1);
  if (rc != DLOCK_OK)
    return rc;
  if ((rc = dlock__check_wait_lease(wait_ms, lease_ms)) != DLOCK_OK)
    return rc;
  if (l->m->acquire == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot be acquired", l->m->kind);
  if (!can_wait(l) && wait_ms != 0)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot wait asynchronously "
                       "yet: try once (wait_ms 0)", l->m->kind);
  dlock__aop *op = dlock__aop_new(l, DLOCK__AOP_ACQUIRE, done, data);
  if (op == NULL)
    return DLOCK_ENOMEM;
  op->owner = owner;
  op->wait_ms = wait_ms;
  op->watchdog = lease_ms == DLOCK_LEASE_WATCHDOG;
  op->lease_ms = op->watchdog
                     ? dlock__client_opts(l->h.client)->watchdog_timeout_ms
                     : lease_ms;
  op->deadline_ms = wait_ms < 0 ? -1 : dlock__now_ms() + wait_ms;
  op->on_ready = try_ready;
  if (can_wait(l))
    return dlock__aop_start(op, try_send, out);
  op->blocking = acquire_blocking;
  return dlock__aop_start(op, dlock__aop_blocking, out);
}

/* ---- release ------------------------------------------------------------------ */

static void release_send(dlock__aop *op);

static void release_reply(dlock__req *req, redisReply *reply, int status) {
  dlock__aop *op = req->data;
  dlock_lock *l = op->lock;
  int rc = status;
  if (status != DLOCK_OK)
    rc = dlock__fail(status, "%s", req->errmsg[0] ? req->errmsg
                                                  : dlock_strerror(status));
  free(req);
  if (rc == DLOCK_EIO && dlock__release_again(op->c, op->sent_ms, op->tries)) {
    release_send(op); /* the same request id: the latch replays it */
    return;
  }
  if (rc != DLOCK_OK) {
    if (rc == DLOCK_EIO) /* unknown outcome: the lease ends it at the latest */
      l->m->forget(l, op->owner);
    dlock__aop_finish(op, rc);
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR)
    rc = dlock__fail_reply(reply, "Redis");
  else
    rc = l->m->released(l, op->owner, reply);
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
    if (dlock__random_hex(op->rid, 16) != DLOCK_OK) {
      free(req);
      dlock__aop_finish(op, DLOCK_ENOMEM);
      return;
    }
  }
  int rc = op->lock->m->release_req(op->lock, op->owner, op->rid, req);
  if (rc != DLOCK_OK) {
    free(req);
    dlock__aop_finish(op, rc);
    return;
  }
  op->tries++;
  dlock__aop_send(op, req, release_reply);
}

static int release_blocking(dlock__aop *op) {
  return op->lock->m->release(op->lock, op->owner);
}

int dlock_release_async(dlock_lock *l, uint64_t owner, dlock_done_fn *done,
                        void *data, dlock_op *out) {
  int rc = check(l, done, &owner, 1);
  if (rc != DLOCK_OK)
    return rc;
  if (l->m->release == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot be released", l->m->kind);
  dlock__aop *op = dlock__aop_new(l, DLOCK__AOP_RELEASE, done, data);
  if (op == NULL)
    return DLOCK_ENOMEM;
  op->owner = owner;
  if (dlock__lock_has_requests(l))
    return dlock__aop_start(op, release_send, out);
  op->blocking = release_blocking;
  return dlock__aop_start(op, dlock__aop_blocking, out);
}

/* ---- force release and state: thread-pool jobs ------------------------------ */

static int force_blocking(dlock__aop *op) {
  int rc = op->lock->m->force_release(op->lock);
  if (rc < 0)
    return rc;
  op->res.released = rc;
  return DLOCK_OK;
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
  dlock__aop *op = dlock__aop_new(l, DLOCK__AOP_FORCE, done, data);
  if (op == NULL)
    return DLOCK_ENOMEM;
  op->blocking = force_blocking;
  return dlock__aop_start(op, dlock__aop_blocking, out);
}

static int state_blocking(dlock__aop *op) {
  return op->lock->m->state(op->lock, op->owner, &op->res.state);
}

int dlock_lock_state_async(dlock_lock *l, uint64_t owner, dlock_done_fn *done,
                           void *data, dlock_op *out) {
  int rc = check(l, done, &owner, 0);
  if (rc != DLOCK_OK)
    return rc;
  if (l->m->state == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks have no state query",
                       l->m->kind);
  dlock__aop *op = dlock__aop_new(l, DLOCK__AOP_STATE, done, data);
  if (op == NULL)
    return DLOCK_ENOMEM;
  op->owner = owner;
  op->blocking = state_blocking;
  return dlock__aop_start(op, dlock__aop_blocking, out);
}
