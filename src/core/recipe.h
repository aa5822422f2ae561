/* The waiting recipe's decisions (recipe.c), which both drivers carry
 * out. */
#ifndef DLOCK_CORE_RECIPE_H
#define DLOCK_CORE_RECIPE_H

#include "core/core.h"

/* ---- the waiting recipe's decisions (recipe.c) -----------------------------
 * Every wait, blocking (wait.c: a parked thread) or not (async/await.c: a
 * timer and the engine's ready list), follows one recipe: try; when busy,
 * subscribe and try again (a release between the first try and the
 * subscription would be missed otherwise); then wait for a wake-up, the
 * reply's hint or the budget, and try again, until granted, an error or
 * the budget's end. A try whose answer was lost is asked about (did it
 * run?) while the budget lasts. The recipe decides; its driver does each
 * step and tells the recipe what came of it. */
typedef enum dlock__step {
  DLOCK__STEP_TRY,       /* send a try; then dlock__recipe_tried */
  DLOCK__STEP_ASK,       /* ask whether the try whose answer was lost ran;
                            then dlock__recipe_asked */
  DLOCK__STEP_SUBSCRIBE, /* join the channel; once confirmed (or by
                            r->until) dlock__recipe_woken */
  DLOCK__STEP_WAIT,      /* wait for a wake-up or r->until (-1: none);
                            then dlock__recipe_woken */
  DLOCK__STEP_GRANTED,   /* done: a try was granted */
  DLOCK__STEP_FAILED     /* done: r->rc, its message set */
} dlock__step;

/* The recipe's retry counts, both drivers' (wait.c, async/await.c and
 * async/op.c): a give-up (leaving what the tries left: a queue entry) is
 * sent this many times while its answer is lost; a give-back (a grant
 * nobody keeps) is sent again while dlock__release_again allows, a
 * release's own rule. */
#define DLOCK__GIVE_UP_SENDS 2

typedef struct dlock__recipe {
  /* the caller's, before dlock__recipe_start */
  const char *noun;       /* the messages' subject ('lock "N"'), made of */
  const char *name;       /* these when a message needs it */
  int64_t permits;        /* > 0: it ends " (N permits)" */
  int fifo;               /* a FIFO waiter (semaphores): tries on its turn */
  int askable;            /* a lost try can be asked about */
  int64_t ask_ms;         /* and for this long past the deadline (the
                             command timeout): a single try's lost answer
                             is asked about too, so that a grant it may
                             have made is neither left behind nor lost */
  int pause_only;         /* no channel: every wait is a pause (no
                             SUBSCRIBE step) */
  /* the recipe's answer to the driver */
  int rc;                 /* FAILED (beside pause_only: no padding) */
  int64_t until;          /* SUBSCRIBE, WAIT: the next try's time (ms) */
  /* the recipe's own */
  int64_t wait_ms, deadline; /* the budget; -1: none */
  int subscribed, asks;
  int64_t pause_ms;       /* the last pause after a passing refusal */
} dlock__recipe;

/* The first step of a wait of wait_ms (0 try once, -1 forever) ending at
 * deadline (ms, -1 none); queued: the client's FIFO waiters in line. */
dlock__step dlock__recipe_start(dlock__recipe *r, int64_t wait_ms,
                                int64_t deadline, int queued);
/* A try's outcome: rc DLOCK_OK granted, DLOCK_EBUSY busy (hint: ms to
 * wait at most, -1 unknown, -2 retry now), or an error; sent: what became
 * of its request when it failed (DLOCK__UNSENT, _SENT, _REFUSED). */
dlock__step dlock__recipe_tried(dlock__recipe *r, int rc, int64_t hint,
                                int sent);
/* An ask's outcome: rc DLOCK_OK and ran (1 the lost try ran, 0 it did
 * not), or an error (sent as for a try: a refused ask is asked again). */
dlock__step dlock__recipe_asked(dlock__recipe *r, int rc, int ran, int sent);
/* A wait's end: status 0 (woken, confirmed or timed), DLOCK_ECLOSED,
 * DLOCK_EINTR or another error with its message set; my_turn: a FIFO
 * waiter's turn has come. */
dlock__step dlock__recipe_woken(dlock__recipe *r, int status, int my_turn);
/* DLOCK_EBUSY for a single try of what (a "lock \"N\"") that found it
 * held, the message saying what hint is (the holder's remaining lease in
 * ms, < 0 unknown). */
int dlock__busy(const char *what, int64_t hint);
/* This thread just released n of what a FIFO channel announces (a
 * semaphore's permits): the client's waiters there get their turns now, as
 * the release's message will give them (pubsub.c). They hear of it when
 * the other subscribers hear the message, not after the engine has read
 * it; the message then finds them trying. */
void dlock__fifo_released(dlock_client *c, const char *channel, size_t len,
                          int64_t n);

#endif /* DLOCK_CORE_RECIPE_H */
