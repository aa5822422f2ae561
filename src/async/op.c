/* Async operations: the registry, waiting without a thread, and the two
 * ways a completion is delivered (docs/async.md). */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/list.h"
#include "async/async.h"
#include "net/tls.h"

/* ---- the registry: pending operations by id (dlock_cancel) --------------- */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static dlock__map reg;
static uint64_t last_id;

static dlock__aop *reg_get(uint64_t id) {
  dlock__map_node *n = dlock__map_get(&reg, &id, sizeof id);
  return n ? DLOCK__CONTAINER(n, dlock__aop, node) : NULL;
}

/* ---- per client ------------------------------------------------------------ */

static int async_new(dlock_client *c) {
  dlock__async *a = calloc(1, sizeof *a);
  if (a == NULL)
    return dlock__oom();
  a->efd = -1;
  if (dlock__client_opts(c)->completions == DLOCK_COMPLETE_QUEUE) {
    a->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (a->efd < 0) {
      free(a);
      return dlock__fail(DLOCK_ENOMEM, "cannot make the completion queue's "
                         "eventfd");
    }
  }
  pthread_mutex_init(&a->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&a->parker.mu, NULL);
  pthread_cond_init(&a->parker.cv, &attr);
  pthread_condattr_destroy(&attr);
  a->parker.init = 1;
  dlock__client_set_async(c, a);
  return DLOCK_OK;
}

static void async_free(dlock_client *c) {
  dlock__async *a = dlock__client_async(c);
  if (a == NULL)
    return;
  if (a->efd >= 0)
    close(a->efd);
  pthread_mutex_destroy(&a->mu);
  pthread_mutex_destroy(&a->parker.mu);
  pthread_cond_destroy(&a->parker.cv);
  free(a->timers);
  free(a);
  dlock__client_set_async(c, NULL);
}

/* ---- the ready list: ops to look at again on the engine thread ------------ */

static void ready_unlink(dlock__async *a, dlock__aop *op) {
  DLOCK__LIST_REMOVE(a->ready_head, a->ready_tail, op, rprev, rnext);
  op->ready = 0;
}

/* Put op on its client's ready list; its engine looks at it before it
 * next polls (woken when this is another thread). */
void dlock__aop_ready(dlock__aop *op, int wake_loop) {
  dlock_client *c = op->c;
  dlock__async *a = dlock__client_async(c);
  pthread_mutex_lock(&a->mu);
  if (!op->ready) {
    op->ready = 1;
    DLOCK__LIST_APPEND(a->ready_head, a->ready_tail, op, rprev, rnext);
  }
  pthread_mutex_unlock(&a->mu);
  if (wake_loop) {
    /* none once the client closes: its shutdown ends op anyway */
    dlock__client_wake(c);
  }
}


static void async_prepare(dlock_client *c) {
  dlock__async *a = dlock__client_async(c);
  for (;;) {
    pthread_mutex_lock(&a->mu);
    dlock__aop *op = a->ready_head;
    if (op)
      ready_unlink(a, op);
    pthread_mutex_unlock(&a->mu);
    if (op == NULL)
      return;
    if (op->stage == DLOCK__AOP_COMPOSITE) {
      if (dlock__aop_cancelled(op) && op->outer->cancel)
        op->outer->cancel(op);
      continue;
    }
    if (op->stage != DLOCK__AOP_SUBSCRIBING && op->stage != DLOCK__AOP_WAITING)
      continue; /* a request is in flight: its answer looks again */
    if (dlock__aop_cancelled(op)) {
      dlock__aop_finish(op, DLOCK_ECANCELED);
      continue;
    }
    op->on_ready(op);
  }
}

/* ---- starting -------------------------------------------------------------- */

int dlock__aop_check(const dlock__handle *h, const char *what,
                     dlock_done_fn *done) {
  dlock__clear_error();
  if (h == NULL)
    return dlock__fail(DLOCK_EINVAL, "%s is NULL", what);
  if (done == NULL)
    return dlock__fail(DLOCK_EINVAL, "done is NULL");
  if (h->client && dlock__client_closed(h->client))
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  return DLOCK_OK;
}

dlock__aop *dlock__aop_new(dlock__handle *h, int type, dlock_done_fn *done,
                           void *data) {
  dlock__aop *op = NULL;
  dlock__aop_new_on(h->client, h, type, done, data, &op);
  return op;
}

int dlock__aop_job(dlock_client *c, dlock__handle *h, const char *what,
                   int type, int (*fn)(dlock__aop *op), int64_t num, void *ctx,
                   uint64_t owner, dlock_done_fn *done, void *data,
                   dlock_op *out) {
  int rc = dlock__aop_check(h, what, done);
  dlock__aop *op = NULL;
  if (rc == DLOCK_OK)
    rc = dlock__aop_new_on(c ? c : h->client, h, type, done, data, &op);
  if (rc != DLOCK_OK) {
    free(ctx);
    return rc;
  }
  op->num = num;
  op->ctx = ctx;
  op->owner = owner;
  op->blocking = fn;
  return dlock__aop_start(op, dlock__aop_blocking, out);
}

int dlock__aop_await_new(dlock__handle *h, int type, const dlock__wait_rules *k,
                         int64_t wait_ms, dlock_done_fn *done, void *data,
                         dlock__aop **out) {
  *out = NULL;
  if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
    return dlock__fail(DLOCK_EINVAL, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
  dlock__aop *op = dlock__aop_new(h, type, done, data);
  if (op == NULL)
    return dlock__oom();
  op->owner = dlock_thread_id();
  op->wait_ms = wait_ms;
  op->wt = (dlock__wait){.k = k, .h = h, .owner = op->owner,
                         .wait_ms = wait_ms, .res = &op->res};
  op->deadline_ms = wait_ms < 0 ? -1 : dlock__now_ms() + wait_ms;
  *out = op;
  return DLOCK_OK;
}

int dlock__aop_new_on(dlock_client *c, dlock__handle *h, int type,
                      dlock_done_fn *done, void *data, dlock__aop **out) {
  dlock__aop *op = calloc(1, sizeof *op);
  if (op == NULL)
    return dlock__oom();
  op->type = type;
  op->h = h;
  op->c = c;
  dlock__client_ref(c);
  op->done = done;
  op->data = data;
  op->deadline_ms = -1;
  op->t0_us = dlock__now_us();
  *out = op;
  return DLOCK_OK;
}


/* ---- timers: one heap per client under one loop timer ----------------------- */

/* An operation's one timer (a wait's hint or budget, a combinator's round)
 * is a place in its client's heap of timers, ordered by due time: 10,000
 * waiting ops share one uv_timer_t instead of one each (issue 61: a
 * handle each weighed 192 bytes of the waiter's). */

static int earlier(const dlock__aop *x, const dlock__aop *y) {
  return x->due_ms < y->due_ms;
}

static void heap_set(dlock__async *a, uint32_t i, dlock__aop *op) {
  a->timers[i] = op;
  op->timer_at = i + 1;
}

static void heap_up(dlock__async *a, uint32_t i) {
  dlock__aop *op = a->timers[i];
  while (i > 0 && earlier(op, a->timers[(i - 1) / 2])) {
    heap_set(a, i, a->timers[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  heap_set(a, i, op);
}

static void heap_down(dlock__async *a, uint32_t i) {
  dlock__aop *op = a->timers[i];
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    const dlock__aop *least = op;
    if (l < a->ntimers && earlier(a->timers[l], least))
      m = l, least = a->timers[l];
    if (r < a->ntimers && earlier(a->timers[r], least))
      m = r;
    if (m == i)
      break;
    heap_set(a, i, a->timers[m]);
    i = m;
  }
  heap_set(a, i, op);
}

static void heap_remove(dlock__async *a, dlock__aop *op) {
  uint32_t i = op->timer_at - 1;
  op->timer_at = 0;
  dlock__aop *last = a->timers[--a->ntimers];
  if (last == op)
    return;
  heap_set(a, i, last);
  if (i > 0 && earlier(last, a->timers[(i - 1) / 2]))
    heap_up(a, i);
  else
    heap_down(a, i);
}

typedef struct client_timer {
  uv_timer_t t;
  dlock_client *c;
} client_timer;

static void client_timer_closed(uv_handle_t *h) {
  dlock_client *c = ((client_timer *)h)->c;
  free(h);
  dlock__client_live_done(c); /* last: c may go */
}

/* The heap emptied on a stopping client: its loop timer goes. */
static void timer_close_if_done(dlock_client *c, dlock__async *a) {
  if (a->timer && a->ntimers == 0 && dlock__client_stopping(c)) {
    uv_close((uv_handle_t *)a->timer, client_timer_closed);
    a->timer = NULL;
  }
}

static void timers_fired(uv_timer_t *t);

/* The loop timer set to the heap's first due time (stopped when empty). */
static void timer_arm(dlock_client *c, dlock__async *a) {
  if (a->timer == NULL)
    return;
  if (a->ntimers == 0) {
    uv_timer_stop(a->timer);
    return;
  }
  uint64_t now = uv_now(dlock__client_loop(c)), due = a->timers[0]->due_ms;
  uv_timer_start(a->timer, timers_fired, due > now ? due - now : 0, 0);
}

static void timers_fired(uv_timer_t *t) {
  dlock_client *c = ((client_timer *)t)->c;
  dlock__async *a = dlock__client_async(c);
  uint64_t now = uv_now(dlock__client_loop(c));
  /* one at a time: a callback may set, drop or end other ops' timers; at
   * most as many as were set when it fired, so a timer set again for now
   * fires on the loop's next turn, as a loop timer of its own did */
  uint32_t budget = a->ntimers;
  while (budget-- > 0 && a->ntimers > 0 && a->timers[0]->due_ms <= now) {
    dlock__aop *op = a->timers[0];
    heap_remove(a, op);
    if (op->timer_fn)
      op->timer_fn(op);
  }
  timer_arm(c, a);
  timer_close_if_done(c, a);
}

int dlock__aop_timer(dlock__aop *op, int64_t ms, void (*fn)(dlock__aop *op)) {
  dlock__async *a = dlock__client_async(op->c);
  op->timer_fn = fn;
  if (ms < 0) {
    dlock__aop_timer_drop(op);
    return DLOCK_OK;
  }
  if (a->timer == NULL) {
    client_timer *ct = calloc(1, sizeof *ct);
    if (ct == NULL)
      return dlock__oom();
    uv_timer_init(dlock__client_loop(op->c), &ct->t);
    ct->c = op->c;
    dlock__client_live(op->c, 1); /* until the timer is closed */
    a->timer = &ct->t;
  }
  if (op->timer_at == 0 && a->ntimers == a->timers_cap) {
    uint32_t cap = a->timers_cap ? 2 * a->timers_cap : 64;
    dlock__aop **v = realloc(a->timers, cap * sizeof *v);
    if (v == NULL)
      return dlock__oom();
    a->timers = v;
    a->timers_cap = cap;
  }
  op->due_ms = uv_now(dlock__client_loop(op->c)) + (uint64_t)ms;
  if (op->timer_at == 0) {
    a->timers[a->ntimers++] = op;
    heap_up(a, a->ntimers - 1);
  } else {
    uint32_t i = op->timer_at - 1;
    heap_up(a, i);
    heap_down(a, op->timer_at - 1);
  }
  timer_arm(op->c, a);
  return DLOCK_OK;
}

void dlock__aop_timer_drop(dlock__aop *op) {
  if (op->timer_at == 0)
    return;
  dlock__async *a = dlock__client_async(op->c);
  int first = op->timer_at == 1;
  heap_remove(a, op);
  if (first)
    timer_arm(op->c, a);
  timer_close_if_done(op->c, a);
}

void dlock__aop_discard(dlock__aop *op) {
  dlock__client_unref(op->c);
  free(op->errmsg);
  if (op->ctx_free)
    op->ctx_free(op->ctx);
  else
    free(op->ctx);
  free(op);
}

static void live_link(dlock__aop *op) {
  dlock__async *a = dlock__client_async(op->c);
  DLOCK__LIST_PUSH(a->live, op, prev, next);
}

static void live_unlink(dlock__aop *op) {
  dlock__async *a = dlock__client_async(op->c);
  DLOCK__LIST_UNLINK(a->live, op, prev, next);
}

/* The start task's request ends: it ran (DLOCK_OK, the task started op), or
 * the client closed before it could (op ends with DLOCK_ECLOSED). */
static void start_done(dlock__req *req, redisReply *reply, int status) {
  dlock__aop *op = req->data;
  free(req);
  if (status != DLOCK_OK) {
    live_link(op);
    op->stage = DLOCK__AOP_BUSY;
    dlock__fail(DLOCK_ECLOSED, "client closed");
    dlock__aop_finish(op, DLOCK_ECLOSED);
  }
}

static void start_task(dlock_client *c, dlock__req *req) {
  dlock__aop *op = req->data;
  dlock__req_finish(req, NULL, DLOCK_OK, NULL); /* frees req */
  live_link(op);
  if (op->outer) { /* a combinator's: the close waits for it */
    op->stage = DLOCK__AOP_COMPOSITE;
    op->combinator = 1;
    dlock__client_live(c, 1);
  } else {
    op->stage = DLOCK__AOP_BUSY;
  }
  op->start(op);
}

/* Give op its id in the registry of pending ops (dlock_cancel's). */
static int enroll(dlock__aop *op) {
  pthread_mutex_lock(&reg_mu);
  op->id = ++last_id;
  op->node.key = &op->id;
  op->node.klen = sizeof op->id;
  int rc = dlock__map_put(&reg, &op->node);
  pthread_mutex_unlock(&reg_mu);
  return rc == DLOCK_OK ? DLOCK_OK : dlock__fail(DLOCK_ENOMEM, "out of memory");
}

int dlock__aop_start(dlock__aop *op, void (*start)(dlock__aop *op),
                     dlock_op *out) {
  dlock__req *req = calloc(1, sizeof *req);
  if (req == NULL) {
    dlock__aop_discard(op);
    return dlock__oom();
  }
  op->start = start;
  dlock__req_task(req, start_task, NULL);
  req->done = start_done;
  req->data = op;
  int rc = enroll(op);
  uint64_t id = op->id;
  if (rc != DLOCK_OK) {
    free(req);
    dlock__aop_discard(op);
    return rc;
  }
  /* from here op may finish on the engine at any time: id is a copy */
  rc = dlock__submit(op->c, req);
  if (rc != DLOCK_OK) {
    pthread_mutex_lock(&reg_mu);
    dlock__map_del(&reg, &op->node);
    pthread_mutex_unlock(&reg_mu);
    free(req);
    dlock__aop_discard(op);
    return rc;
  }
  if (out)
    *out = id;
  return DLOCK_OK;
}

int dlock__aop_start_here(dlock__aop *op, void (*start)(dlock__aop *op)) {
  op->start = start;
  int rc = enroll(op);
  if (rc != DLOCK_OK) {
    dlock__aop_discard(op);
    return rc;
  }
  live_link(op);
  op->stage = DLOCK__AOP_BUSY;
  start(op);
  return DLOCK_OK;
}

/* ---- requests and pool jobs ------------------------------------------------ */

void dlock__aop_send(dlock__aop *op, dlock__req *req, dlock__req_done *done) {
  dlock_client *c = op->c;
  op->stage = DLOCK__AOP_BUSY;
  req->done = done;
  req->data = op;
  req->queued_ms = dlock__now_ms();
  if (req->script >= 0 && (dlock__client_opts(c)->replica_sync_ms > 0 ||
                           dlock__client_opts(c)->durable_ms > 0))
    req->ack_wanted = 1; /* the replica guard, durable grants (core.h) */
  if (dlock__client_stopping(c)) {
    dlock__req_finish(req, NULL, DLOCK_ECLOSED, "client closed");
    return;
  }
  dlock__send(c, req);
}

static void fired(dlock__req *req, redisReply *reply, int status) {
  if (reply)
    freeReplyObject(reply);
  free(req);
}

void dlock__aop_fire(dlock_client *c, dlock__req *req, dlock__req_done *done,
                     void *data) {
  req->done = done ? done : fired;
  req->data = data;
  req->queued_ms = dlock__now_ms();
  if (dlock__client_stopping(c)) {
    dlock__req_finish(req, NULL, DLOCK_ECLOSED, "client closed");
    return;
  }
  dlock__send(c, req);
}

typedef struct job {
  uv_work_t work;
  dlock__aop *op;
  int (*fn)(dlock__aop *op);
  void (*then)(dlock__aop *op, int rc); /* NULL: finish op */
  int rc;
  char *err;
} job;

static void job_run(uv_work_t *w) {
  job *j = w->data;
  dlock__clear_error();
  j->rc = j->fn(j->op);
  if (j->rc < 0)
    j->err = strdup(dlock_errmsg());
  /* OpenSSL's state of this pool thread (random ids, TLS): libuv's threads
   * outlive the library's use of them */
  dlock__tls_thread_done();
}

static void job_done(uv_work_t *w, int status) {
  job *j = w->data;
  dlock__aop *op = j->op;
  dlock_client *c = op->c;
  if (j->err) {
    free(op->errmsg);
    op->errmsg = j->err;
  }
  int rc = status == 0 ? j->rc : DLOCK_ECLOSED;
  void (*then)(dlock__aop *, int) = j->then;
  free(j);
  if (then)
    then(op, rc);
  else
    dlock__aop_finish(op, rc);
  dlock__client_live_done(c); /* last: c may go */
}

void dlock__aop_blocking(dlock__aop *op) {
  dlock__aop_blocking_then(op, op->blocking, NULL);
}

void dlock__aop_blocking_then(dlock__aop *op, int (*fn)(dlock__aop *op),
                              void (*then)(dlock__aop *op, int rc)) {
  dlock_client *c = op->c;
  job *j = calloc(1, sizeof *j);
  if (j == NULL) {
    dlock__fail(DLOCK_ENOMEM, "out of memory");
    dlock__aop_finish(op, DLOCK_ENOMEM);
    return;
  }
  j->op = op;
  j->fn = fn;
  j->then = then;
  j->work.data = j;
  op->stage = DLOCK__AOP_BUSY;
  dlock__client_live(c, 1); /* the client's close waits for the job */
  if (uv_queue_work(dlock__client_loop(c), &j->work, job_run, job_done) != 0) {
    dlock__client_live(c, -1);
    free(j);
    dlock__fail(DLOCK_ENOMEM, "cannot queue a thread-pool job");
    dlock__aop_finish(op, DLOCK_ENOMEM);
  }
}

/* ---- cancelling --------------------------------------------------------------- */

int dlock_cancel(dlock_op id) {
  dlock__clear_error();
  pthread_mutex_lock(&reg_mu);
  dlock__aop *op = id ? reg_get(id) : NULL;
  int rc = DLOCK_OK;
  if (op == NULL)
    rc = dlock__fail(DLOCK_EINVAL, "operation %" PRIu64 " is not pending "
                     "(completed, or never started)", id);
  else if (op->type != DLOCK__AOP_ACQUIRE && op->type != DLOCK__AOP_AWAIT)
    rc = dlock__fail(DLOCK_ENOTSUP, "operation %" PRIu64 " does not wait: it "
                     "completes as usual", id);
  else {
    op->cancel = 1;
    dlock__aop_ready(op, 1); /* registered: not finished, so still alive */
  }
  pthread_mutex_unlock(&reg_mu);
  return rc;
}

int dlock__aop_cancelled(dlock__aop *op) {
  pthread_mutex_lock(&reg_mu);
  int cancel = op->cancel;
  pthread_mutex_unlock(&reg_mu);
  return cancel;
}

/* Take op out of the registry: from here dlock_cancel cannot see it.
 * Returns whether it was cancelled before. */
static int unregister(dlock__aop *op) {
  pthread_mutex_lock(&reg_mu);
  int cancel = op->cancel;
  if (op->node.key) {
    dlock__map_del(&reg, &op->node);
    op->node.key = NULL;
  }
  pthread_mutex_unlock(&reg_mu);
  return cancel;
}

int dlock__aop_grant_cancelled(dlock__aop *op) {
  pthread_mutex_lock(&reg_mu);
  int cancel = op->cancel;
  if (!cancel && op->node.key) {
    dlock__map_del(&reg, &op->node);
    op->node.key = NULL;
  }
  pthread_mutex_unlock(&reg_mu);
  return cancel;
}

/* ---- finishing and delivering ------------------------------------------------- */

static void op_free(dlock__aop *op) {
  dlock__reply_free(op->res.reply);
  dlock__aop_discard(op); /* the rest, as for one never started */
}

static void deliver(dlock__aop *op) {
  op->res.op = op->id;
  op->res.errmsg = op->errmsg ? op->errmsg : "";
  op->done(op->data, &op->res);
}

/* A give-up's request and its second try, built while the op lives: the
 * second is sent when the first's answer is lost (as the blocking
 * driver's: DLOCK__GIVE_UP_SENDS), else dropped. */
_Static_assert(DLOCK__GIVE_UP_SENDS == 2, "a give-up pair is two sends");
typedef struct give_up_pair {
  dlock__req first, second;
  dlock_client *c;
  int again; /* second was built */
} give_up_pair;

static void gave_up_again(dlock__req *req, redisReply *reply, int status) {
  (void)status; /* failed too: the entry's liveness runs out */
  if (reply)
    freeReplyObject(reply);
  free((char *)req - offsetof(give_up_pair, second));
}

static void gave_up(dlock__req *req, redisReply *reply, int status) {
  give_up_pair *p = (give_up_pair *)(void *)req;
  if (reply)
    freeReplyObject(reply);
  if (dlock__answer_lost(status) && p->again) {
    dlock__aop_fire(p->c, &p->second, gave_up_again, NULL);
    return;
  }
  if (p->again) {
    dlock__buf_free(&p->second.cmd);
    dlock__buf_free(&p->second.drop);
  }
  free(p);
}

/* Leave what a wait's tries left behind (a queue entry): sent, its answer
 * unread but for a lost one (sent once more); when both fail, the entry's
 * liveness runs out. */
static void give_up(dlock__aop *op) {
  give_up_pair *p = calloc(1, sizeof *p);
  if (p == NULL || op->wt.k->give_up(&op->wt, &p->first) != DLOCK_OK) {
    free(p);
    return;
  }
  p->again = op->wt.k->give_up(&op->wt, &p->second) == DLOCK_OK;
  p->c = op->c;
  dlock__aop_fire(op->c, &p->first, gave_up, NULL);
}

/* Put a finished op on the completion queue (queue mode). */
static void enqueue(dlock__async *a, dlock__aop *op) {
  pthread_mutex_lock(&a->mu);
  DLOCK__LIST_APPEND(a->done_head, a->done_tail, op, rprev, rnext);
  if (!a->efd_set) {
    uint64_t one = 1;
    if (write(a->efd, &one, sizeof one) == sizeof one)
      a->efd_set = 1;
  }
  pthread_mutex_unlock(&a->mu);
}

void dlock__aop_finish(dlock__aop *op, int rc) {
  dlock_client *c = op->c;
  dlock__async *a = dlock__client_async(c);
  if (op->stage == DLOCK__AOP_DONE)
    return;
  if (rc < 0 && op->errmsg == NULL)
    op->errmsg = strdup(dlock_errmsg());
  if (unregister(op) && rc != DLOCK_OK && rc != DLOCK_ECLOSED) {
    rc = DLOCK_ECANCELED;
    free(op->errmsg);
    op->errmsg = strdup("cancelled");
  }
  op->stage = DLOCK__AOP_DONE;
  if (rc != DLOCK_OK && !op->granted && op->w && op->wt.k && op->wt.k->give_up)
    give_up(op); /* a queue entry its tries made */
  if (op->w) { /* no more wake-ups for it */
    dlock__unsubscribe_async(c, op->w);
    free(op->w);
    op->w = NULL;
  }
  dlock__aop_timer_drop(op);
  live_unlink(op);
  pthread_mutex_lock(&a->mu);
  if (op->ready)
    ready_unlink(a, op);
  pthread_mutex_unlock(&a->mu);
  /* counted as the blocking calls are: a combinator's own operation and
   * its members' inner ones are not */
  int counted = !op->internal && op->h->client != NULL;
  if (counted && op->type == DLOCK__AOP_ACQUIRE) {
    dlock__stats_wait_reset();
    if (op->tries > 1)
      dlock__stats_wait_mark();
    dlock__acquire_done(c, op->h->name, op->h->name_len, op->owner, rc,
                        op->t0_us);
    dlock__stats_wait_reset();
  } else if (counted && op->type == DLOCK__AOP_RELEASE) {
    dlock__stats_release(dlock__client_stats(c), rc);
  }
  op->res.rc = rc;
  if (op->outer && op->outer->end)
    op->outer->end(op);
  int composite = op->combinator;
  if (op->internal ||
      dlock__client_opts(c)->completions != DLOCK_COMPLETE_QUEUE) {
    deliver(op);
    op_free(op);
    if (composite)
      dlock__client_live_done(c); /* last: c may go */
    return;
  }
  enqueue(a, op);
  if (composite)
    dlock__client_live_done(c); /* last: c may go */
}

int dlock__aop_emit(dlock__aop *op, void *ctx, const void *election) {
  if (dlock__client_opts(op->c)->completions != DLOCK_COMPLETE_QUEUE) {
    dlock_result res = {.op = op->id, .errmsg = "", .election = election};
    op->done(op->data, &res);
    free(ctx);
    return DLOCK_OK;
  }
  dlock__aop *e = calloc(1, sizeof *e);
  if (e == NULL) {
    free(ctx);
    return dlock__oom();
  }
  e->id = op->id;
  e->type = DLOCK__AOP_OTHER;
  e->stage = DLOCK__AOP_DONE;
  e->c = op->c;
  dlock__client_ref(e->c);
  e->h = op->h;
  e->done = op->done;
  e->data = op->data;
  e->ctx = ctx;
  e->res.election = election;
  enqueue(dlock__client_async(op->c), e);
  return DLOCK_OK;
}

static void async_shutdown(dlock_client *c) {
  dlock__async *a = dlock__client_async(c);
  /* combinators first stop their inner operations (on this engine: they
   * end soon, and their answers end the combinators) */
  for (dlock__aop *op = a->live; op; op = op->next)
    if (op->stage == DLOCK__AOP_COMPOSITE && op->outer->stop)
      op->outer->stop(op);
  /* then everything waiting here ends; a busy one's request or job ends
   * it. Ending one may end others (a combinator's): start over each time */
  for (dlock__aop *op = a->live; op;) {
    if (op->stage == DLOCK__AOP_BUSY ||
        (op->stage == DLOCK__AOP_COMPOSITE && op->outer->busy(op))) {
      op = op->next;
      continue;
    }
    dlock__fail(DLOCK_ECLOSED, "client closed");
    dlock__aop_finish(op, DLOCK_ECLOSED);
    op = a->live;
  }
  timer_close_if_done(c, a); /* else when the last busy op's timer goes */
}

/* ---- the completion queue --------------------------------------------------- */

static _Thread_local dlock_client *tl_running; /* running its completions */

int dlock_client_completion_fd(dlock_client *c) {
  dlock__clear_error();
  if (c == NULL || dlock__client_async(c)->efd < 0) {
    dlock__fail(DLOCK_EINVAL, c ? "the client completes on its engine thread "
                "(opts.completions)" : "client is NULL");
    return -1;
  }
  return dlock__client_async(c)->efd;
}

int dlock_client_run_completions(dlock_client *c, int max) {
  dlock__clear_error();
  if (c == NULL)
    return dlock__fail(DLOCK_EINVAL, "client is NULL");
  dlock__async *a = dlock__client_async(c);
  if (a->efd < 0)
    return dlock__fail(DLOCK_EINVAL, "the client completes on its engine "
                       "thread (opts.completions)");
  if (tl_running == c)
    return dlock__fail(DLOCK_EINVAL, "called from one of its completions");
  int ran = 0;
  while (max <= 0 || ran < max) {
    pthread_mutex_lock(&a->mu);
    dlock__aop *op = a->done_head;
    if (op)
      DLOCK__LIST_REMOVE(a->done_head, a->done_tail, op, rprev, rnext);
    if (a->done_head == NULL && a->efd_set) {
      uint64_t n;
      if (read(a->efd, &n, sizeof n) == sizeof n)
        a->efd_set = 0;
    }
    pthread_mutex_unlock(&a->mu);
    if (op == NULL)
      break;
    dlock_client *prev = tl_running;
    tl_running = c;
    deliver(op);
    tl_running = prev;
    op_free(op);
    ran++;
  }
  return ran;
}

static void async_closed(dlock_client *c) {
  /* the engine is gone: completions still queued run here */
  if (dlock__client_async(c) && dlock__client_async(c)->efd >= 0)
    dlock_client_run_completions(c, 0);
}

/* ---- attached to every client's engine (core/engine.h) ---------------------- */

static const dlock__attachment async_attachment = {
    .open = async_new,
    .turn = async_prepare,
    .stopping = async_shutdown,
    .closed = async_closed,
    .free = async_free,
};

__attribute__((constructor)) static void async_attach(void) {
  dlock__engine_attach(&async_attachment);
}
