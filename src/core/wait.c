/* The waiting recipe's blocking driver (docs/threading.md, "Waiting"):
 * the recipe (recipe.c) says what comes next, and this thread does it:
 * tries with dlock__call, subscribes, parks until a wake-up or the time the
 * recipe names, asks whether a lost try ran, and at the end unsubscribes.
 * Wake-ups are counted, so none is lost between a try and the wait, and
 * every wait is bounded, so a lost message costs at most the hint. */
#include <inttypes.h>
#include <string.h>

#include "core/engine.h"

/* A FIFO waiter tries when it is the oldest (head) or a message gave it a
 * turn (one try: taken here). */
int dlock__waiter_my_turn(dlock__waiter *w) {
  pthread_mutex_lock(&w->parker->mu);
  int mine = w->head || w->turn;
  w->turn = 0;
  pthread_mutex_unlock(&w->parker->mu);
  return mine;
}

static void set_armed(dlock__waiter *w, int on) {
  pthread_mutex_lock(&w->parker->mu);
  w->armed = on;
  pthread_mutex_unlock(&w->parker->mu);
  dlock__early_hook_fn *hook = atomic_load(&dlock__early_hook);
  if (on && hook)
    hook(DLOCK__HOOK_ARMED);
}

/* One try: the kind's request, sent (or its early answer taken), its
 * answer read (an error reply is failed by dlock__call). */
static int try_once(dlock__wait *w, dlock__try *t, int64_t *hint) {
  dlock__req req;
  redisReply *r = NULL;
  int64_t now = dlock__now_ms();
  int rc = w->k->try_req(w, &req);
  if (rc == DLOCK_OK)
    rc = dlock__try_call(w->h->client, t, &req, &r);
  w->sent_ms = t->sent_ms > 0 ? t->sent_ms : now; /* a lost one's too */
  if (rc != DLOCK_OK)
    return rc;
  rc = w->k->try_reply(w, r, hint);
  freeReplyObject(r);
  return rc;
}

typedef struct back_ctx {
  dlock__wait *w;
} back_ctx;

static int build_back(void *ctx, const char *rid, dlock__req *req) {
  dlock__wait *w = ((back_ctx *)ctx)->w;
  return w->k->give_back(w, rid, req);
}

/* Hand back a grant nobody keeps (retried with one request id when its
 * answer is lost); the wait's error stays the caller's. */
static void give_back(dlock__wait *w) {
  if (w->k->give_back == NULL)
    return;
  dlock__kept_error saved;
  dlock__error_keep(&saved);
  back_ctx x = {w};
  redisReply *r = NULL;
  dlock__release_retry(w->h->client, build_back, &x, &r);
  if (r)
    freeReplyObject(r);
  dlock__error_restore(&saved);
}

/* Leave what the tries left behind (a queue entry; sent again when the
 * answer is lost, DLOCK__GIVE_UP_SENDS in all); the wait's error stays the
 * caller's. When both fail,
 * the kind's scripts skip the entry once its liveness has passed. */
static void give_up(dlock__wait *w) {
  dlock__kept_error saved;
  dlock__error_keep(&saved);
  redisReply *r = NULL;
  int rc = DLOCK_EIO;
  for (int i = 0; i < DLOCK__GIVE_UP_SENDS && dlock__answer_lost(rc); i++) {
    dlock__req req;
    rc = w->k->give_up(w, &req);
    if (rc == DLOCK_OK)
      rc = dlock__call(w->h->client, &req, &r);
  }
  if (r)
    freeReplyObject(r);
  dlock__error_restore(&saved);
}

/* The loop only leaves after a try of its own (which takes an early try's
 * answer) or when it fails (an interrupt, the deadline, a close). Then an
 * early try may still be in flight, and its answer may be a grant: the
 * caller's acquire fails, so that grant must not stay behind. Take the
 * answer through the kind's own try (it reads it; nothing is sent), ask
 * when it was lost, and give a grant back (k->give_back). Without a
 * give_back, or when the client closes (the answer failed by the close),
 * the answer is dropped; the waiter outlives its request either way. */
static void settle_early(dlock__wait *w, dlock__waiter *wr, int rc) {
  pthread_mutex_lock(&wr->parker->mu);
  int pending = wr->early_state != 0;
  pthread_mutex_unlock(&wr->parker->mu);
  if (pending && rc < 0 && w->k->give_back) {
    dlock__kept_error saved; /* the wait's */
    dlock__error_keep(&saved);
    dlock__try t = {wr, 0};
    int64_t hint = 0;
    int got = try_once(w, &t, &hint); /* takes the early answer */
    int ran = got == DLOCK_OK;
    if (dlock__answer_lost(got) && w->k->ask && !w->no_ask &&
        dlock__last_call_fate() == DLOCK__SENT &&
        w->k->ask(w, &ran) != DLOCK_OK)
      ran = 0; /* unknown: the lease ends it */
    if (ran)
      give_back(w);
    dlock__error_restore(&saved);
  }
  pthread_mutex_lock(&wr->parker->mu);
  while (wr->early_state == 1)
    dlock__park(wr->parker, -1);
  if (wr->early->reply)
    freeReplyObject(wr->early->reply);
  wr->early->reply = NULL;
  wr->early_state = 0;
  pthread_mutex_unlock(&wr->parker->mu);
}

/* ---- interrupts ---------------------------------------------------------------
 * Every wait under way in the process is registered (only once it waits:
 * an uncontended call never is), so another thread can interrupt it by its
 * handle, its top-level handle or its owner. */

typedef struct wait_reg {
  struct wait_reg *next;
  const void *top, *handle;
  uint64_t owner;
  dlock__waiter *w;
} wait_reg;

static pthread_mutex_t regs_mu = PTHREAD_MUTEX_INITIALIZER;
static wait_reg *regs;
static _Thread_local const void *tl_top;

void dlock__wait_top(const void *top) { tl_top = top; }

static void reg_add(wait_reg *r, const void *handle, uint64_t owner,
                    dlock__waiter *w) {
  *r = (wait_reg){NULL, tl_top, handle, owner, w};
  pthread_mutex_lock(&regs_mu);
  r->next = regs;
  regs = r;
  pthread_mutex_unlock(&regs_mu);
}

static void reg_del(wait_reg *r) {
  pthread_mutex_lock(&regs_mu);
  for (wait_reg **p = &regs; *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  pthread_mutex_unlock(&regs_mu);
}

int dlock__interrupt(const void *handle, int by_owner, uint64_t owner) {
  int n = 0;
  pthread_mutex_lock(&regs_mu);
  for (wait_reg *r = regs; r; r = r->next) {
    if (by_owner ? r->owner != owner : r->top != handle && r->handle != handle)
      continue;
    pthread_mutex_lock(&r->w->parker->mu);
    n += !r->w->interrupted;
    r->w->interrupted = 1;
    pthread_cond_broadcast(&r->w->parker->cv);
    pthread_mutex_unlock(&r->w->parker->mu);
  }
  pthread_mutex_unlock(&regs_mu);
  return n;
}

int dlock__wait_pause(const void *handle, uint64_t owner, int64_t ms,
                      const char *what) {
  dlock__waiter w;
  memset(&w, 0, sizeof w);
  w.parker = dlock__parker_self();
  wait_reg reg;
  reg_add(&reg, handle, owner, &w);
  int64_t until = dlock__now_ms() + ms;
  pthread_mutex_lock(&w.parker->mu);
  while (!w.interrupted && dlock__park(w.parker, until) == 0) {
  }
  int interrupted = w.interrupted;
  pthread_mutex_unlock(&w.parker->mu);
  reg_del(&reg);
  return interrupted ? dlock__fail(DLOCK_EINTR, "%s: wait interrupted", what)
                     : DLOCK_OK;
}

/* The waiter on the kind's channel, made now (a wait is rarer than a
 * call: the uncontended one allocates nothing for it). */
static int subscribe(dlock__wait *w, dlock__waiter *wr, int64_t deadline) {
  dlock__buf ch = {0};
  dlock__wake_fn *wake = dlock__wake_one;
  if (w->k->wait_channel(w, &ch, &wake) != DLOCK_OK) {
    dlock__buf_free(&ch);
    return dlock__oom();
  }
  int rc = dlock__subscribe(w->h->client, ch.p, ch.len, wake, w->k->fifo,
                            w->k->lease_hints, wr, deadline);
  dlock__buf_free(&ch); /* the channel keeps its own copy of the name */
  return rc;
}

/* The wait's waiter, from its subscription on: registered for interrupts
 * (before it subscribes, so a waiter seen subscribed is an interruptible
 * one), and counted as contended (the client's calls keep to the engine's
 * pipeline until it ends: direct.c) unless it waits for an event. */
typedef struct waiting {
  dlock__waiter w;
  dlock__early early_try;
  wait_reg reg;
  int joined, contended;
} waiting;

static int join(dlock__wait *w, waiting *j, int64_t deadline) {
  dlock_client *c = w->h->client;
  /* A FIFO wait (a semaphore's) counts not: no try of its is sent early,
   * and a new call of the client joins its line instead of overtaking it
   * (dlock__recipe_start), so the client's calls, its releases and its
   * waiters' turns among them, keep the direct path and its riders. */
  j->contended = w->k->wait_channel && !w->k->event && !w->k->fifo;
  if (j->contended)
    atomic_fetch_add(&c->direct.waiting, 1);
  dlock__stats_wait_mark(); /* the acquire waits (client statistics) */
  j->w.early = &j->early_try;
  j->w.parker = dlock__parker_self();
  j->w.demand = w->demand > 0 ? w->demand : 1;
  reg_add(&j->reg, w->h, w->owner, &j->w);
  j->joined = 1;
  if (w->k->wait_channel == NULL)
    return DLOCK_OK; /* a kind without pub/sub pauses: nothing to join */
  int rc = subscribe(w, &j->w, deadline);
  w->subscribed = rc == DLOCK_OK;
  return rc;
}

static void leave(dlock__wait *w, waiting *j, int rc) {
  dlock_client *c = w->h->client;
  reg_del(&j->reg);
  if (w->subscribed) {
    settle_early(w, &j->w, rc);
    if (rc < 0 && w->k->give_up)
      give_up(w);
    dlock__unsubscribe(c, &j->w);
    dlock__buf_free(&j->early_try.cmd);
  }
  if (j->contended)
    atomic_fetch_sub(&c->direct.waiting, 1);
}

/* A grant the kind records (k->granted), or gives back when it cannot. */
static int keep(dlock__wait *w) {
  if (w->k->granted == NULL)
    return DLOCK_OK;
  int rc = w->k->granted(w);
  if (rc != DLOCK_OK)
    give_back(w);
  return rc;
}

int dlock__wait_run(dlock__wait *w) {
  const dlock__wait_rules *k = w->k;
  dlock_client *c = w->h->client;
  dlock__request_id(w->rid);
  dlock__recipe r = {.noun = w->noun ? w->noun : k->noun,
                     .name = w->h->name, .fifo = k->fifo,
                     .permits = k->says_demand ? (w->demand > 0 ? w->demand : 1)
                                               : 0,
                     .askable = k->ask != NULL && !w->no_ask,
                     .ask_ms = dlock__client_opts(c)->command_timeout_ms,
                     .pause_only = k->wait_channel == NULL};
  int64_t deadline = w->wait_ms < 0 ? -1 : dlock__now_ms() + w->wait_ms;
  dlock__step step = dlock__recipe_start(&r, w->wait_ms, deadline,
                                         k->fifo ? dlock__fifo_waiters(c) : 0);
  dlock__try t = {NULL, 0};
  int64_t hint = 0;
  int early = k->early && !k->fifo, fresh = 0, ran = 0, rc;
  waiting j;
  memset(&j, 0, sizeof j);
  w->subscribed = 0;
  for (;;) {
    switch (step) {
    case DLOCK__STEP_TRY:
      /* a try after an ask is sent now; one after a wake-up may have been
       * sent early by the engine */
      t.early = early && j.joined && !fresh ? &j.w : NULL;
      t.sent_ms = 0;
      fresh = 0;
      rc = try_once(w, &t, &hint);
      step = dlock__recipe_tried(&r, rc, hint, dlock__last_call_fate());
      break;
    case DLOCK__STEP_ASK:
      rc = k->ask(w, &ran);
      fresh = 1;
      step = dlock__recipe_asked(&r, rc, ran, dlock__last_call_fate());
      break;
    case DLOCK__STEP_SUBSCRIBE:
      rc = join(w, &j, deadline);
      if (rc != DLOCK_OK) {
        r.rc = rc;
        step = DLOCK__STEP_FAILED;
        break;
      }
      step = dlock__recipe_woken(&r, 0, !k->fifo || dlock__waiter_my_turn(&j.w));
      break;
    case DLOCK__STEP_WAIT:
      if (!j.joined && (rc = join(w, &j, deadline)) != DLOCK_OK) {
        r.rc = rc; /* a pause's first wait joins (interrupts) */
        step = DLOCK__STEP_FAILED;
        break;
      }
      set_armed(&j.w, early && j.w.early->cmd.len > 0);
      rc = dlock__waiter_wait(&j.w, r.until);
      set_armed(&j.w, 0); /* the engine may have sent the try meanwhile */
      step = dlock__recipe_woken(&r, rc,
                                 !k->fifo || dlock__waiter_my_turn(&j.w));
      break;
    case DLOCK__STEP_GRANTED:
    case DLOCK__STEP_FAILED:
      rc = step == DLOCK__STEP_GRANTED ? DLOCK_OK : r.rc;
      if (j.joined)
        leave(w, &j, rc);
      return rc == DLOCK_OK ? keep(w) : rc;
    }
  }
}
