/* The waiting recipe (docs/threading.md, "Waiting"), shared by every primitive that
 * blocks: try; subscribe BEFORE the second try; then try, and wait for a
 * wake-up or the reply's hint or the budget, whichever comes first; finally
 * unsubscribe. Wake-ups are counted, so none is lost between a try and the
 * wait, and every wait is bounded, so a lost message costs at most the hint. */
#include <inttypes.h>
#include <string.h>

#include "core/engine.h"

/* How long to wait between tries when the reply gives no bound (the holder's
 * key has no TTL): a wake-up is only a hint, so every wait is bounded. */
#define NO_HINT_RECHECK_MS 1000

int dlock__busy(const char *what, int64_t hint) {
  if (hint > 0)
    return dlock__fail(DLOCK_EBUSY, "%s: not available: held by another "
                       "owner, whose lease has %" PRId64 " ms left (sooner if "
                       "it is released; later if the holder renews it)", what,
                       hint);
  return dlock__fail(DLOCK_EBUSY, "%s: not available (no lease time known: "
                     "until what holds it is released)", what);
}

int64_t dlock__wait_until(int64_t hint, int64_t now, int64_t deadline) {
  int64_t until;
  if (hint >= 0)
    until = now + hint;
  else if (hint == -2) /* freed between the check and the PTTL: retry */
    until = now;
  else
    until = now + NO_HINT_RECHECK_MS;
  return deadline >= 0 && deadline < until ? deadline : until;
}

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
}

/* The loop only leaves after a try of its own (which takes an early try's
 * answer) or when the client closes: then an early try still in flight is
 * failed by the close. Wait for it, so w outlives its request. */
static void settle_early(dlock__waiter *w) {
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
static _Thread_local const void *tls_top;

void dlock__wait_top(const void *top) { tls_top = top; }

static void reg_add(wait_reg *r, const void *handle, uint64_t owner,
                    dlock__waiter *w) {
  *r = (wait_reg){NULL, tls_top, handle, owner, w};
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

/* A wait survives this many lost answers (connections dropped, masters
 * moved) before DLOCK_EIO ends it. */
#define MAX_RECHECKS 16

/* spec's try; when its answer was lost (DLOCK_EIO) and the budget lasts,
 * the recheck says whether it ran, and the try is made again when it did
 * not (on the server the client reaches now: after a failover, the new
 * master). */
static int attempt(const dlock__wait_spec *spec, void *ctx, dlock__try *t,
                   int64_t *hint, int64_t deadline, int *rechecks) {
  int rc = spec->attempt(ctx, t, hint);
  while (rc == DLOCK_EIO && spec->recheck && !dlock__last_call_unsent() &&
         *rechecks < MAX_RECHECKS &&
         (deadline < 0 || dlock__now_ms() < deadline)) {
    (*rechecks)++;
    int ran = spec->recheck(ctx);
    if (ran == 1 || (ran < 0 && ran != DLOCK_EIO))
      return ran;
    if (ran == 0) {
      t->early = NULL; /* a fresh try, sent now */
      rc = spec->attempt(ctx, t, hint);
    } else if (dlock__last_call_unsent()) {
      return ran; /* no server to ask within the connect timeout */
    }
  }
  return rc;
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
    if (spec->make_channel(ctx, &made, &wake) != DLOCK_OK) {
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

int dlock__wait_loop(dlock_client *c, const dlock__wait_spec *spec,
                     int64_t wait_ms, void *ctx) {
  int64_t start = dlock__now_ms();
  int64_t deadline = wait_ms < 0 ? -1 : start + wait_ms;
  int64_t hint = 0;
  int rc = 0;
  /* A FIFO waiter does not overtake this client's waiting ones: with any
   * in line, it joins the line without a first try (a try-once still
   * tries: it cannot wait its turn). */
  dlock__try t = {NULL, 0};
  int rechecks = 0;
  if (!spec->fifo || wait_ms == 0 || dlock__fifo_waiters(c) == 0)
    rc = attempt(spec, ctx, &t, &hint, deadline, &rechecks);
  if (rc != 0)
    return rc;
  if (wait_ms == 0)
    return dlock__busy(spec->what, hint);
  /* the object is contended: the client's calls keep to the engine's
   * pipeline until this wait ends (direct.c) */
  int contended = !spec->event;
  if (contended)
    atomic_fetch_add(&c->direct.waiting, 1);
  /* from here on the wait can be interrupted: registered before it
   * subscribes, so a waiter seen subscribed is an interruptible one */
  dlock__stats_wait_mark(); /* the acquire waits (client statistics) */
  dlock__waiter w;
  memset(&w, 0, sizeof w);
  dlock__early early_try;
  memset(&early_try, 0, sizeof early_try);
  w.early = &early_try;
  w.parker = dlock__parker_self();
  w.demand = spec->demand > 0 ? spec->demand : 1;
  wait_reg reg;
  reg_add(&reg, spec->handle, spec->owner, &w);
  rc = subscribe(c, spec, ctx, &w, deadline);
  if (rc != DLOCK_OK) {
    reg_del(&reg);
    if (contended)
      atomic_fetch_sub(&c->direct.waiting, 1);
    return rc;
  }
  int early = spec->early && !spec->fifo;
  for (;;) {
    if (!spec->fifo || dlock__waiter_my_turn(&w)) {
      t.early = early ? &w : NULL;
      rc = attempt(spec, ctx, &t, &hint, deadline, &rechecks);
      if (rc != 0)
        break;
    } else {
      hint = -1; /* the head's departure wakes us */
    }
    int64_t now = dlock__now_ms();
    if (deadline >= 0 && now >= deadline) {
      rc = dlock__fail(DLOCK_ETIMEDOUT, "%s: still not available after %" PRId64
                       " ms", spec->what, wait_ms);
      break;
    }
    set_armed(&w, early && w.early->cmd.len > 0);
    int woke = dlock__waiter_wait(&w, dlock__wait_until(hint, now, deadline));
    set_armed(&w, 0); /* the engine may have sent the try meanwhile */
    if (woke == DLOCK_ECLOSED) {
      rc = dlock__fail(DLOCK_ECLOSED, "client closed while waiting");
      break;
    }
    if (woke == DLOCK_EINTR) {
      rc = dlock__fail(DLOCK_EINTR, "%s: wait interrupted", spec->what);
      break;
    }
  }
  reg_del(&reg);
  settle_early(&w);
  if (rc < 0 && spec->give_up)
    spec->give_up(ctx);
  dlock__unsubscribe(c, &w);
  dlock__buf_free(&w.early->cmd);
  if (contended)
    atomic_fetch_sub(&c->direct.waiting, 1);
  return rc;
}
