/* The waiting recipe's decisions (docs/design.md, "The waiting recipe"):
 * one for every wait, blocking (wait.c drives it with a parked thread) or
 * not (async/await.c, with a timer and the engine's ready list). The
 * recipe says what comes next; its driver does it and tells it what
 * happened. */
#include <inttypes.h>
#include <stdio.h>

#include "base/policy.h"
#include "core/core.h"
#include "core/recipe.h"

/* How long to wait between tries when the reply gives no bound (the holder's
 * key has no TTL): a wake-up is only a hint, so every wait is bounded. */
#define NO_HINT_RECHECK_MS 1000

/* A wait survives this many lost answers (connections dropped, masters
 * moved) before DLOCK_EIO ends it. */
#define MAX_ASKS 16

int dlock__busy(const char *what, int64_t hint) {
  if (hint > 0)
    return dlock__fail(DLOCK_EBUSY, "%s: not available: held by another "
                       "owner, whose lease has %" PRId64 " ms left (sooner if "
                       "it is released; later if the holder renews it)", what,
                       hint);
  return dlock__fail(DLOCK_EBUSY, "%s: not available (no lease time known: "
                     "until what holds it is released)", what);
}

/* When a waiter whose last try answered hint (ms to wait at most; -1
 * unknown; -2 freed between the check and the PTTL: now) tries next. */
static int64_t next_try(int64_t hint, int64_t now, int64_t deadline) {
  int64_t until;
  if (hint >= 0)
    until = now + hint;
  else if (hint == -2)
    until = now;
  else
    until = now + NO_HINT_RECHECK_MS;
  return deadline >= 0 && deadline < until ? deadline : until;
}

/* The messages' subject, made only when a message needs it (the
 * uncontended call formats nothing), into the caller's buf: a pending
 * wait keeps no room for it. */
#define WHAT_MAX 160
static const char *what(const dlock__recipe *r, char buf[WHAT_MAX]) {
  int n = snprintf(buf, WHAT_MAX, "%s \"%.100s%s\"", r->noun,
                   DLOCK__NAME(r->name));
  if (r->permits > 0 && n > 0 && n < WHAT_MAX)
    snprintf(buf + n, WHAT_MAX - (size_t)n, " (%" PRId64 " permits)",
             r->permits);
  return buf;
}

static dlock__step failed(dlock__recipe *r, int rc) {
  r->rc = rc;
  return DLOCK__STEP_FAILED;
}

/* Wait (the first wait subscribes) until the next try's time. */
static dlock__step wait_until(dlock__recipe *r, int64_t until) {
  r->until = until;
  if (r->subscribed || r->pause_only)
    return DLOCK__STEP_WAIT;
  r->subscribed = 1;
  return DLOCK__STEP_SUBSCRIBE;
}

/* Busy (hint), or for a FIFO waiter not its turn yet (hint -1): a single
 * try ends, a spent budget ends, else wait. */
static dlock__step not_yet(dlock__recipe *r, int64_t hint) {
  char w[WHAT_MAX];
  if (r->wait_ms == 0)
    return failed(r, dlock__busy(what(r, w), hint));
  int64_t now = dlock__now_ms();
  if (r->deadline >= 0 && now >= r->deadline)
    return failed(r, dlock__fail(DLOCK_ETIMEDOUT, "%s: still not available "
                                 "after %" PRId64 " ms", what(r, w), r->wait_ms));
  return wait_until(r, next_try(hint, now, r->deadline));
}

/* rc, an error of a try or of an ask: a lost answer (DLOCK_EIO after the
 * request was written) may have run, so ask while the budget lasts, and
 * for ask_ms past it (a refused ask did not run: it is asked again). */
static dlock__step lost(dlock__recipe *r, int rc, int sent) {
  if (dlock__answer_lost(rc) && sent != DLOCK__UNSENT && r->askable &&
      r->asks < MAX_ASKS &&
      (r->deadline < 0 || dlock__now_ms() < r->deadline + r->ask_ms)) {
    r->asks++;
    return DLOCK__STEP_ASK;
  }
  return failed(r, rc);
}

/* A try the server refused for now (DLOCK__REFUSED: loading, a busy
 * script, too few replicas, a replica without its master), after the
 * engine sent it again for a command timeout: it did not run. A waiting
 * call tries again after the reply policy's pause (a release may wake it
 * sooner) while its budget lasts; then, or for a single try, the refusal
 * (DLOCK_EIO, the server's words and what to check) is the outcome. */
static dlock__step refused(dlock__recipe *r, int rc) {
  int64_t now = dlock__now_ms();
  if (r->wait_ms == 0 || (r->deadline >= 0 && now >= r->deadline))
    return failed(r, rc);
  r->pause_ms = dlock__backoff_next(r->pause_ms);
  return wait_until(r, next_try(r->pause_ms, now, r->deadline));
}

dlock__step dlock__recipe_start(dlock__recipe *r, int64_t wait_ms,
                                int64_t deadline, int queued) {
  r->wait_ms = wait_ms;
  r->deadline = deadline;
  r->until = -1;
  r->rc = 0;
  r->subscribed = 0;
  r->asks = 0;
  r->pause_ms = 0;
  /* A FIFO waiter does not overtake this client's waiting ones: with any
   * in line, it joins the line without a first try (a single try still
   * tries: it cannot wait its turn). */
  if (r->fifo && wait_ms != 0 && queued > 0)
    return not_yet(r, -1);
  return DLOCK__STEP_TRY;
}

dlock__step dlock__recipe_tried(dlock__recipe *r, int rc, int64_t hint,
                                int sent) {
  if (rc == DLOCK_OK)
    return DLOCK__STEP_GRANTED;
  if (rc == DLOCK_EDEADLK || rc == DLOCK_EREENTRY) { /* the caller's own hold
                                                       refuses it: name it */
    char head[180], w[WHAT_MAX];
    snprintf(head, sizeof head, "%s: ", what(r, w));
    return failed(r, dlock__fail_before(rc, head));
  }
  if (rc == DLOCK_EIO && sent == DLOCK__REFUSED)
    return refused(r, rc);
  return rc == DLOCK_EBUSY ? not_yet(r, hint) : lost(r, rc, sent);
}

dlock__step dlock__recipe_asked(dlock__recipe *r, int rc, int ran, int sent) {
  if (rc != DLOCK_OK)
    return lost(r, rc, sent);
  /* it ran: granted when it was sent; it did not: a fresh try, on the
   * server reached now */
  return ran ? DLOCK__STEP_GRANTED : DLOCK__STEP_TRY;
}

dlock__step dlock__recipe_woken(dlock__recipe *r, int status, int my_turn) {
  if (status == DLOCK_ECLOSED)
    return failed(r, dlock__fail(DLOCK_ECLOSED, "client closed while waiting"));
  char w[WHAT_MAX];
  if (status == DLOCK_EINTR)
    return failed(r, dlock__fail(DLOCK_EINTR, "%s: wait interrupted", what(r, w)));
  if (status < 0) /* its message set (a refused subscription, a cancel) */
    return failed(r, status);
  /* a wake-up, the confirmation or the timer: the deadline's is the last
   * try; a FIFO waiter tries on its turn, and else the head's leaving or a
   * release wakes it */
  if (!r->fifo || my_turn)
    return DLOCK__STEP_TRY;
  return not_yet(r, -1);
}
