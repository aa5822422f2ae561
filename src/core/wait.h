/* A kind's wait (wait.c: the blocking driver; async/await.c: the async
 * one): the wait rules a kind describes its wait in, and the tries. */
#ifndef DLOCK_CORE_WAIT_H
#define DLOCK_CORE_WAIT_H

#include "core/core.h"
#include "core/recipe.h"

/* ---- a kind's wait (wait.c, async/await.c) --------------------------------
 * A kind that waits (a lock kind, the latch, the semaphores) describes its
 * wait once, in a dlock__wait_rules; both drivers of the waiting recipe read
 * it: the blocking one (dlock__wait_run: a parked thread) and the async one
 * (async/await.c: a timer and the engine's ready list). A try is a request
 * the driver sends; the kind builds it and reads its answer. */
typedef struct dlock__wait dlock__wait;

typedef struct dlock__wait_rules {
  const char *noun; /* for messages ("lock", "semaphore"), unless w->noun */
  /* Build one try into req (the caller's thread, or the engine thread for
   * an async wait). */
  int (*try_req)(dlock__wait *w, dlock__req *req);
  /* Its answer (never an error reply: the driver reads those): DLOCK_OK
   * granted (w->token, w->count as the kind tells them), DLOCK_EBUSY not
   * yet, with no message (*hint: the longest useful wait in ms, -1
   * unknown, -2 retry now), or an error with its message. */
  int (*try_reply)(dlock__wait *w, const redisReply *r, int64_t *hint);
  /* The channel to wait on, appended to *ch, and its wake rule; made when
   * the wait begins (an uncontended call never waits). DLOCK_OK or
   * DLOCK_ENOMEM. NULL: a kind without pub/sub (the spin lock), whose
   * waits are pauses: each try's hint says how long. */
  int (*wait_channel)(dlock__wait *w, dlock__buf *ch, dlock__wake_fn **wake);
  /* Record a grant that stands (a hold for the watchdog; w->validity_ms):
   * DLOCK_OK, or an error, and the driver gives the grant back. NULL:
   * nothing to record. */
  int (*granted)(dlock__wait *w);
  /* The request that hands back a grant nobody keeps (cancelled, not
   * recorded, raced by an interrupt), into req; rid: its request id,
   * shared by its retries. NULL: nothing to undo. */
  int (*give_back)(dlock__wait *w, const char *rid, dlock__req *req);
  /* The request that leaves what the tries left behind when the wait ends
   * without a grant (a fair queue's entry). NULL: nothing. */
  int (*give_up)(dlock__wait *w, dlock__req *req);
  /* A try whose answer was lost (its connection dropped after it was
   * written): did it run? A blocking call (the async driver runs it on the
   * thread pool): DLOCK_OK and *ran 1 it did (w->sent_ms: its lease
   * started no earlier) or 0 it did not; or an error. NULL (or
   * w->no_ask): DLOCK_EIO ends the wait. */
  int (*ask)(dlock__wait *w, int *ran);
  /* the client's waiters are served in arrival order, each needing
   * w->demand (a message "N" lets the oldest whose demands add up to at
   * most N try at once: semaphores) */
  unsigned fifo : 1;
  /* every try after the first sends the same bytes, which the engine may
   * send early on a wake-up (see dlock__waiter). Not for locks whose
   * waiters in many processes race for each release: the first
   * subscriber, told first, would win every race. The blocking driver's
   * alone: the async driver runs on the engine thread, which sends its
   * next try as it reads the wake-up, as early as an early try. */
  unsigned early : 1;
  /* a message "-MS" on the channel says the object was just taken with a
   * lease of MS ms; waiters re-try by that lease's end (fair lock) */
  unsigned lease_hints : 1;
  /* the wait is for an event, not for a contended object (a latch to reach
   * zero): the client's other calls keep the direct path meanwhile. The
   * blocking driver's alone: an async wait never holds the direct path
   * back (its calls go through the engine). */
  unsigned event : 1;
  /* the messages' subject says the demand: 'semaphore "N" (2 permits)' */
  unsigned says_demand : 1;
} dlock__wait_rules;

/* One wait under way: what the caller asks, what the driver keeps, what a
 * grant tells. */
struct dlock__wait {
  const dlock__wait_rules *k;
  dlock__handle *h;     /* whose (interrupts name it; its client waits) */
  const char *noun;     /* messages: in place of k->noun, or NULL */
  void *ctx;            /* the kind's own */
  uint64_t owner;
  int64_t wait_ms;      /* 0 one try, DLOCK_WAIT_FOREVER */
  int64_t lease_ms;
  int64_t demand;       /* a FIFO wait's need (permits); 0 counts as 1 */
  int watchdog;         /* the grant is renewed until released */
  int no_ask;           /* lost answers are not asked about */
  char rid[33];         /* this wait's request id (the drivers set it at
                           the start): a kind marks what its tries did
                           with it (the semaphore) */
  uint8_t ran;          /* the async driver's: its last ask's answer */
  void *res;            /* the async driver's dlock_result, NULL for a
                           blocking wait: what a grant fills in beyond
                           token, validity and count */
  /* the kind's own pacing between tries (the spin lock's back-off) */
  int64_t backoff_ms;
  int backoff_fails;
  /* the driver's */
  int subscribed;       /* the wait has its subscription (a queueing
                           kind's try may join the queue now) */
  int64_t sent_ms;      /* when the last try was sent: a lease starts there */
  /* what a grant tells (the kind's try_reply and granted) */
  int64_t token, count, validity_ms;
};

/* The blocking driver: try, subscribe, try and wait until granted (and
 * recorded: k->granted) or the budget (w->wait_ms: 0 one try, giving
 * DLOCK_EBUSY; DLOCK_WAIT_FOREVER) is spent. DLOCK_OK granted, or an
 * error (DLOCK_ETIMEDOUT, DLOCK_EINTR, DLOCK_ECLOSED...). */
int dlock__wait_run(dlock__wait *w);

/* One try of a wait loop, as the blocking driver sends it. */
typedef struct dlock__try {
  struct dlock__waiter *early; /* set when the engine may send this try
                                  early on a wake-up (k->early), else
                                  NULL: wait.c's business */
  int64_t sent_ms; /* OUT of dlock__try_call: when the try's request was
                      sent (queued, or sent early): a lease starts there */
} dlock__try;

/* dlock__call for a wait loop's try: when the engine already sent this
 * try early (t->early), takes that answer instead of sending; otherwise
 * sends req and keeps its bytes for the next early send. Sets t->sent_ms. */
int dlock__try_call(dlock_client *c, dlock__try *t, dlock__req *req,
                    redisReply **reply);
/* Interrupts (wait.c). The top-level handle of the calling thread's
 * acquire (set by lock.c around a lock's acquire, so a multi-lock's or
 * RedLock's members' waits answer to the combinator's handle too; NULL
 * after). */
void dlock__wait_top(const void *top);
/* Interrupt the waits under way of handle (by_owner 0) or of owner
 * (by_owner 1): they return DLOCK_EINTR. Returns how many. */
int dlock__interrupt(const void *handle, int by_owner, uint64_t owner);
/* Sleep ms unless interrupted (a wait of handle and owner): DLOCK_OK, or
 * DLOCK_EINTR with a message naming what. */
int dlock__wait_pause(const void *handle, uint64_t owner, int64_t ms,
                      const char *what);

#endif /* DLOCK_CORE_WAIT_H */
