/* The waiting recipe's driver without a thread (docs/async.md, "How it
 * works"): the recipe (core/recipe.c) decides, as for a blocking wait
 * (core/wait.c); here its tries are requests sent from the engine thread,
 * its subscription an async waiter, and its waits a libuv timer (the
 * reply's hint or the budget) and the ready list (wake-ups, the
 * confirmation). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async/async.h"

/* The pub/sub waiter's notify (parker->mu held, maybe cmu: only queue). */
static void notify(dlock__waiter *w) {
  dlock__aop_ready(w->data, !dlock__on_engine_thread());
}

/* A waiting op's timer fired: the reply's hint, the budget, a lease
 * hint. */
static void timer_fired(dlock__aop *op) {
  if (op->stage != DLOCK__AOP_SUBSCRIBING && op->stage != DLOCK__AOP_WAITING)
    return;
  if (dlock__aop_cancelled(op)) {
    dlock__aop_finish(op, DLOCK_ECANCELED);
    return;
  }
  op->on_ready(op);
}

int dlock__aop_wait(dlock__aop *op, int64_t until_ms) {
  dlock_client *c = op->c;
  int64_t now = dlock__now_ms();
  if (op->wt.k->wait_channel == NULL) { /* a pause: the timer alone */
    op->stage = DLOCK__AOP_WAITING;
    return dlock__aop_timer(op, until_ms > now ? until_ms - now : 0,
                            timer_fired);
  }
  if (op->w == NULL) {
    dlock__waiter *w = calloc(1, sizeof *w);
    dlock__buf channel = {0};
    dlock__wake_fn *wake = dlock__wake_one;
    int rc = w ? op->wt.k->wait_channel(&op->wt, &channel, &wake)
               : DLOCK_ENOMEM;
    if (rc == DLOCK_OK) /* armed below */
      rc = dlock__aop_timer(op, -1, timer_fired);
    if (rc != DLOCK_OK) {
      free(w);
      dlock__buf_free(&channel);
      return dlock__oom();
    }
    w->parker = &dlock__client_async(c)->parker;
    w->notify = notify;
    w->data = op;
    w->fifo = op->wt.k->fifo;
    w->lease_hints = op->wt.k->lease_hints;
    w->demand = op->wt.demand > 0 ? op->wt.demand : 1;
    rc = dlock__subscribe_async(c, channel.p, channel.len, wake, w);
    dlock__buf_free(&channel);
    if (rc != DLOCK_OK) {
      free(w);
      return rc;
    }
    op->w = w;
    op->wt.subscribed = 1;
    pthread_mutex_lock(&w->parker->mu);
    if (w->confirmed) /* subscribed already: the next try is due now */
      w->wakes++;
    pthread_mutex_unlock(&w->parker->mu);
    op->stage = w->confirmed ? DLOCK__AOP_WAITING : DLOCK__AOP_SUBSCRIBING;
    /* a confirmation that is late: go on without it, on hints */
    int64_t limit = now + dlock__client_opts(c)->command_timeout_ms;
    if (!w->confirmed && (until_ms < 0 || until_ms > limit))
      until_ms = limit;
  } else {
    op->stage = op->stage == DLOCK__AOP_BUSY && !op->w->confirmed
                    ? DLOCK__AOP_SUBSCRIBING
                    : DLOCK__AOP_WAITING;
  }
  dlock__waiter *w = op->w;
  pthread_mutex_lock(&w->parker->mu);
  int pending = w->wakes != w->seen || w->closed || w->denied ||
                (op->stage == DLOCK__AOP_SUBSCRIBING && w->confirmed);
  if (w->retry_by && (until_ms < 0 || w->retry_by < until_ms))
    until_ms = w->retry_by;
  w->retry_by = 0;
  pthread_mutex_unlock(&w->parker->mu);
  dlock__aop_timer(op, until_ms < 0 ? -1 : until_ms > now ? until_ms - now : 0,
                   timer_fired); /* made above: cannot fail */
  if (pending)
    dlock__aop_ready(op, 0);
  return DLOCK_OK;
}

int dlock__aop_woken(dlock__aop *op) {
  dlock__waiter *w = op->w;
  int rc = 0;
  pthread_mutex_lock(&w->parker->mu);
  if (w->closed) {
    rc = DLOCK_ECLOSED;
  } else if (w->denied) {
    rc = dlock__subscribe_denied("", 0, w->denied_why ? w->denied_why : "");
  } else if (w->wakes != w->seen) {
    w->seen = w->wakes;
    rc = 1;
  } else if (op->stage == DLOCK__AOP_SUBSCRIBING && w->confirmed) {
    rc = 1;
  }
  if (w->confirmed)
    op->stage = DLOCK__AOP_WAITING;
  pthread_mutex_unlock(&w->parker->mu);
  return rc;
}

/* ---- the recipe's driver ------------------------------------------------- */

static void try_send(dlock__aop *op);
static void ask(dlock__aop *op);

/* Do what the recipe (core/recipe.c) says comes next. */
static void run(dlock__aop *op, dlock__step step);

static void try_ready(dlock__aop *op) {
  int woke = op->w ? dlock__aop_woken(op) : 0; /* a pause: its timer */
  if (woke < 0) {
    run(op, dlock__recipe_woken(&op->recipe, woke, 0));
    return;
  }
  int my_turn = !op->wt.k->fifo || dlock__waiter_my_turn(op->w);
  run(op, dlock__recipe_woken(&op->recipe, 0, my_turn));
}

static atomic_long gifts; /* grants given back */

long dlock__aop_given_back(void) { return atomic_load(&gifts); }

/* A give-back under way: its request, and what its retries need (kept
 * out of the operation, which carries none of it while it waits). */
typedef struct gift {
  dlock__req req; /* first: the request's own pointer is the gift's */
  dlock__aop *op;
  int end_rc;     /* op's outcome once the grant is given back */
  int attempt;
  int64_t start_ms;
  char rid[33];   /* the same for its retries (the unlock latch) */
} gift;

static void given_back(dlock__req *req, redisReply *reply, int status) {
  gift *g = req->data;
  dlock__aop *op = g->op;
  if (reply)
    freeReplyObject(reply);
  /* an answer lost: the same request id again (its latch replays one that
   * ran), as long as the blocking driver would; else the lease ends it */
  if (dlock__answer_lost(status) &&
      dlock__release_again(op->c, g->start_ms, ++g->attempt)) {
    memset(&g->req, 0, sizeof g->req);
    if (op->wt.k->give_back(&op->wt, g->rid, &g->req) == DLOCK_OK) {
      dlock__aop_fire(op->c, &g->req, given_back, g);
      return;
    }
  }
  int rc = g->end_rc;
  free(g);
  dlock__aop_finish(op, rc);
}

/* A grant nobody keeps: undone, and op ends with rc once the undoing's
 * answer is in. */
static void give_back(dlock__aop *op, int rc) {
  atomic_fetch_add(&gifts, 1);
  gift *g = op->wt.k->give_back ? calloc(1, sizeof *g) : NULL;
  if (g == NULL || dlock__request_id(g->rid) != DLOCK_OK ||
      op->wt.k->give_back(&op->wt, g->rid, &g->req) != DLOCK_OK) {
    free(g);
    dlock__aop_finish(op, rc);
    return;
  }
  g->op = op;
  g->start_ms = dlock__now_ms();
  g->end_rc = rc;
  if (rc < 0 && op->errmsg == NULL) /* the detail, as dlock__aop_finish keeps it */
    op->errmsg = strdup(dlock_errmsg());
  op->stage = DLOCK__AOP_BUSY; /* a cancel waits for the answer */
  dlock__aop_fire(op->c, &g->req, given_back, g);
}

/* A try granted: kept (op ends DLOCK_OK, the result says what the grant
 * told), or given back. */
static void grant(dlock__aop *op) {
  op->granted = 1;
  if (dlock__aop_grant_cancelled(op)) {
    give_back(op, DLOCK_ECANCELED);
    return;
  }
  dlock__wait *w = &op->wt;
  int rc = w->k->granted ? w->k->granted(w) : DLOCK_OK;
  if (rc != DLOCK_OK) {
    give_back(op, rc);
    return;
  }
  op->res.grant.token = w->token;
  op->res.grant.validity_ms = w->validity_ms;
  op->res.count = w->count;
  dlock__aop_finish(op, DLOCK_OK);
}

static int ask_job(dlock__aop *op) {
  dlock__fail(DLOCK_EIO, "%s", op->errmsg ? op->errmsg : "the answer was lost");
  int ran = 0;
  int rc = op->wt.k->ask(&op->wt, &ran);
  op->fate = (uint8_t)dlock__last_call_fate();
  op->wt.ran = (uint8_t)ran; /* read by asked(), after the job */
  return rc;
}

static void asked(dlock__aop *op, int rc);

/* The try's answer was lost (DLOCK_EIO, set): ask whether it ran, a
 * blocking call on the thread pool. */
static void ask(dlock__aop *op) {
  free(op->errmsg); /* the lost answer's, for the ask's failure */
  op->errmsg = strdup(dlock_errmsg());
  dlock__aop_blocking_then(op, ask_job, asked);
}

/* What the server said of the try whose answer was lost (engine thread). */
static void asked(dlock__aop *op, int rc) {
  if (rc < 0) {
    dlock__fail(rc, "%s", op->errmsg ? op->errmsg : dlock_strerror(rc));
  } else {
    free(op->errmsg); /* the lost answer's: no longer the outcome */
    op->errmsg = NULL;
  }
  dlock__step step =
      dlock__recipe_asked(&op->recipe, rc, op->wt.ran, op->fate);
  if (step == DLOCK__STEP_TRY && dlock__aop_cancelled(op))
    dlock__aop_finish(op, DLOCK_ECANCELED); /* it did not run: no new try */
  else
    run(op, step);
}

static void try_reply(dlock__req *req, redisReply *reply, int status) {
  dlock__aop *op = req->data;
  char why[1700];
  int missed = req->ack_wanted
                   ? dlock__ack_missed(op->h->client, req, why, sizeof why)
                   : 0;
  int fate = dlock__req_fate(req);
  int rc = status;
  if (status != DLOCK_OK)
    rc = dlock__fail(status, "%s", req->errmsg[0] ? req->errmsg
                                                  : dlock_strerror(status));
  free(req);
  int64_t hint = -1;
  if (rc == DLOCK_OK) {
    rc = reply->type == REDIS_REPLY_ERROR
             ? dlock__fail_reply(reply, "acquire")
             : op->wt.k->try_reply(&op->wt, reply, &hint);
    freeReplyObject(reply);
  }
  if (rc == DLOCK_OK && missed) {
    dlock__fail(missed, "%s; the grant was given back", why);
    op->granted = 1;
    give_back(op, missed);
    return;
  }
  run(op, dlock__recipe_tried(&op->recipe, rc, hint, fate));
}

static void try_send(dlock__aop *op) {
  dlock__req *req = calloc(1, sizeof *req);
  if (req == NULL) {
    dlock__fail(DLOCK_ENOMEM, "out of memory");
    dlock__aop_finish(op, DLOCK_ENOMEM);
    return;
  }
  int rc = op->wt.k->try_req(&op->wt, req);
  if (rc != DLOCK_OK) {
    free(req);
    dlock__aop_finish(op, rc);
    return;
  }
  op->tries++;
  op->wt.sent_ms = dlock__now_ms(); /* a lease starts no earlier */
  dlock__aop_send(op, req, try_reply);
}

static void run(dlock__aop *op, dlock__step step) {
  switch (step) {
  case DLOCK__STEP_TRY:
    try_send(op);
    return;
  case DLOCK__STEP_ASK:
    ask(op);
    return;
  case DLOCK__STEP_SUBSCRIBE:
  case DLOCK__STEP_WAIT:
    if (dlock__aop_cancelled(op)) {
      dlock__aop_finish(op, DLOCK_ECANCELED);
      return;
    }
    int rc = dlock__aop_wait(op, op->recipe.until);
    if (rc != DLOCK_OK)
      dlock__aop_finish(op, rc);
    return;
  case DLOCK__STEP_GRANTED:
    grant(op);
    return;
  case DLOCK__STEP_FAILED:
    dlock__aop_finish(op, op->recipe.rc);
    return;
  }
}

void dlock__await_start(dlock__aop *op) {
  const dlock__wait *w = &op->wt;
  dlock__request_id(op->wt.rid);
  op->on_ready = try_ready;
  op->recipe = (dlock__recipe){.noun = w->noun ? w->noun : w->k->noun,
                               .permits = w->k->says_demand
                                              ? (w->demand > 0 ? w->demand : 1)
                                              : 0,
                               .name = op->h->name, .fifo = w->k->fifo,
                               .askable = w->k->ask && !w->no_ask,
                               .ask_ms = dlock__client_opts(op->c)->command_timeout_ms,
                               .pause_only = w->k->wait_channel == NULL};
  run(op, dlock__recipe_start(&op->recipe, w->wait_ms, op->deadline_ms,
                              w->k->fifo ? dlock__fifo_waiters(op->c) : 0));
}
