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

/* The loop only leaves after a try of its own (which takes an early try's
 * answer) or when it fails (an interrupt, the deadline, a close). Then an
 * early try may still be in flight, and its answer may be a grant: the
 * caller's acquire fails, so that grant must not stay behind. Take the
 * answer through the kind's own try (it reads it; nothing is sent), ask
 * when it was lost, and give a grant back (spec->give_back). Without a
 * give_back, or when the client closes (the answer failed by the close),
 * the answer is dropped; w outlives its request either way. */
static void settle_early(const dlock__wait_spec *spec, void *ctx,
                         dlock__waiter *w, int rc) {
  pthread_mutex_lock(&w->parker->mu);
  int pending = w->early_state != 0;
  pthread_mutex_unlock(&w->parker->mu);
  if (pending && rc < 0 && spec->give_back) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", dlock_errmsg()); /* the wait's */
    dlock__try t = {w, 0};
    int64_t hint = 0;
    int got = spec->attempt(ctx, &t, &hint); /* takes the early answer */
    if (got == DLOCK_EIO && spec->ask &&
        dlock__last_call_fate() == DLOCK__SENT)
      got = spec->ask(ctx);
    if (got == 1)
      spec->give_back(ctx);
    dlock__fail(0, "%s", saved);
  }
  pthread_mutex_lock(&w->parker->mu);
  while (w->early_state == 1)
    dlock__park(w->parker, -1);
  if (w->early->reply)
    freeReplyObject(w->early->reply);
  w->early->reply = NULL;
  w->early_state = 0;
  pthread_mutex_unlock(&w->parker->mu);
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

/* w on spec's channel, made now when the spec makes it (a wait is rarer
 * than a call: the uncontended one allocates nothing for it). */
static int subscribe(dlock_client *c, const dlock__wait_spec *spec, void *ctx,
                     dlock__waiter *w, int64_t deadline) {
  dlock__buf made = {0};
  const char *channel = spec->channel;
  size_t channel_len = spec->channel_len;
  dlock__wake_fn *wake = spec->wake;
  if (channel == NULL) {
    if (spec->wait_channel(ctx, &made, &wake) != DLOCK_OK) {
      dlock__buf_free(&made);
      return dlock__fail(DLOCK_ENOMEM, "out of memory");
    }
    channel = made.p;
    channel_len = made.len;
  }
  int rc = dlock__subscribe(c, channel, channel_len, wake, spec->fifo,
                            spec->lease_hints, w, deadline);
  dlock__buf_free(&made); /* the channel keeps its own copy of the name */
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
  int joined, subscribed, contended;
} waiting;

static int join(dlock_client *c, const dlock__wait_spec *spec, void *ctx,
                waiting *j, int64_t deadline) {
  /* A FIFO wait (a semaphore's) counts not: no try of its is sent early,
   * and a new call of the client joins its line instead of overtaking it
   * (dlock__recipe_start), so the client's calls, its releases and its
   * waiters' turns among them, keep the direct path and its riders. */
  j->contended = !spec->event && !spec->fifo;
  if (j->contended)
    atomic_fetch_add(&c->direct.waiting, 1);
  dlock__stats_wait_mark(); /* the acquire waits (client statistics) */
  j->w.early = &j->early_try;
  j->w.parker = dlock__parker_self();
  j->w.demand = spec->demand > 0 ? spec->demand : 1;
  reg_add(&j->reg, spec->handle, spec->owner, &j->w);
  j->joined = 1;
  int rc = subscribe(c, spec, ctx, &j->w, deadline);
  j->subscribed = rc == DLOCK_OK;
  return rc;
}

static void leave(dlock_client *c, const dlock__wait_spec *spec, void *ctx,
                  waiting *j, int rc) {
  reg_del(&j->reg);
  if (j->subscribed) {
    settle_early(spec, ctx, &j->w, rc);
    if (rc < 0 && spec->give_up)
      spec->give_up(ctx);
    dlock__unsubscribe(c, &j->w);
    dlock__buf_free(&j->early_try.cmd);
  }
  if (j->contended)
    atomic_fetch_sub(&c->direct.waiting, 1);
}

int dlock__wait_loop(dlock_client *c, const dlock__wait_spec *spec,
                     int64_t wait_ms, void *ctx) {
  dlock__recipe r = {.what = spec->what, .noun = spec->noun,
                     .name = spec->name, .fifo = spec->fifo,
                     .askable = spec->ask != NULL};
  int64_t deadline = wait_ms < 0 ? -1 : dlock__now_ms() + wait_ms;
  dlock__step step = dlock__recipe_start(&r, wait_ms, deadline,
                                         spec->fifo ? dlock__fifo_waiters(c) : 0);
  dlock__try t = {NULL, 0};
  int64_t hint = 0;
  int early = spec->early && !spec->fifo, fresh = 0, rc;
  waiting j;
  memset(&j, 0, sizeof j);
  for (;;) {
    switch (step) {
    case DLOCK__STEP_TRY:
      /* a try after an ask is sent now; one after a wake-up may have been
       * sent early by the engine */
      t.early = early && j.joined && !fresh ? &j.w : NULL;
      fresh = 0;
      rc = spec->attempt(ctx, &t, &hint);
      step = dlock__recipe_tried(&r, rc, hint, dlock__last_call_fate());
      break;
    case DLOCK__STEP_ASK:
      rc = spec->ask(ctx);
      fresh = 1;
      step = dlock__recipe_asked(&r, rc, dlock__last_call_fate());
      break;
    case DLOCK__STEP_SUBSCRIBE:
      rc = join(c, spec, ctx, &j, deadline);
      if (rc != DLOCK_OK) {
        r.rc = rc;
        step = DLOCK__STEP_FAILED;
        break;
      }
      step = dlock__recipe_woken(&r, 0, !spec->fifo || dlock__waiter_my_turn(&j.w));
      break;
    case DLOCK__STEP_WAIT:
      set_armed(&j.w, early && j.w.early->cmd.len > 0);
      rc = dlock__waiter_wait(&j.w, r.until);
      set_armed(&j.w, 0); /* the engine may have sent the try meanwhile */
      step = dlock__recipe_woken(&r, rc < 0 ? rc : 0,
                                 !spec->fifo || dlock__waiter_my_turn(&j.w));
      break;
    case DLOCK__STEP_GRANTED:
    case DLOCK__STEP_FAILED:
      rc = step == DLOCK__STEP_GRANTED ? 1 : r.rc;
      if (j.joined)
        leave(c, spec, ctx, &j, rc);
      return rc;
    }
  }
}
