/* Pub/sub waiters (pubsub.c) and the parker a blocking call's thread
 * sleeps on (engine.c). */
#ifndef DLOCK_CORE_PUBSUB_H
#define DLOCK_CORE_PUBSUB_H

#include "core/core.h"

/* ---- per-thread parker (engine.c): where a blocking call's thread waits --- */

typedef struct dlock__parker {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  int init;
} dlock__parker;

dlock__parker *dlock__parker_self(void);
/* Wait on s->cv (mu held) until deadline_ms (monotonic); -1 = forever.
 * Returns 0, or ETIMEDOUT once the deadline passed. */
int dlock__park(dlock__parker *s, int64_t deadline_ms);

/* ---- pub/sub waiters (pubsub.c) -------------------------------------------- */

typedef struct dlock__waiter {
  struct dlock__waiter *prev, *next; /* channel's list: client's cmu */
  void *chan;                        /* client's cmu */
  dlock__parker *parker;             /* the waiting thread's (an async
                                        waiter: its client's, shared) */
  /* An async waiter (src/async) has no thread to wake: notify is called
   * (parker->mu held, maybe cmu too: it must only queue) each time the
   * condition is signalled. NULL for a thread's waiter. */
  void (*notify)(struct dlock__waiter *w);
  void *data;                        /* notify's */
  /* An async waiter that reads what is said (an election's observer):
   * called with each message on its channel, on the engine thread, the
   * client's cmu held (it must only queue). NULL: messages only wake. */
  void (*on_message)(struct dlock__waiter *w, const char *msg, size_t len);
  uint64_t wakes;                    /* under parker->mu */
  uint64_t seen;                     /* waiting thread only */
  uint64_t unconsumed;               /* passed to unsubscribe */
  int64_t demand;                    /* fifo: how much it waits for (permits);
                                        set before subscribing */
  int64_t retry_by;                  /* a lease hint: re-try by then
                                        (monotonic ms, 0 none); parker->mu */
  char *denied_why;                  /* the server's words (owned, NULL:
                                        none or out of memory); under
                                        parker->mu; freed when it leaves
                                        its channel (dlock__unsubscribe*) */
  struct dlock__early *early;        /* a thread's wait loop: its early
                                        tries; NULL else (never armed) */
  /* flags, a byte each (a pending async waiter keeps them all) */
  uint8_t confirmed;                 /* under parker->mu */
  uint8_t closed;                    /* under parker->mu */
  uint8_t fifo;                      /* set before subscribing: see below */
  uint8_t lease_hints;               /* likewise: "-MS" messages (wait.c) */
  uint8_t head;                      /* fifo: oldest waiter; under parker->mu */
  uint8_t turn;                      /* fifo: one try granted behind the head
                                        by a message that announced enough
                                        for it and all ahead; parker->mu */
  uint8_t interrupted;               /* dlock__interrupt; under parker->mu */
  uint8_t denied;                    /* SUBSCRIBE refused; under parker->mu */
  uint8_t armed;                     /* under parker->mu */
  uint8_t early_state;               /* 0 none, 1 sent, 2 answered; parker->mu */
} dlock__waiter;

/* Early tries (wait.c): the last try's request is kept; while the thread
 * waits (armed), the engine re-sends it the moment a message wakes the
 * waiter, so the try is on its way while the thread wakes up, and the
 * thread's next try takes that reply instead of sending. */
typedef struct dlock__early {
  dlock__buf cmd;              /* waiting thread; engine while armed */
  int script;
  size_t tail, argc;
  int64_t sent_ms;
  int slot;                    /* its route on a cluster */
  int ack_wanted;              /* followed by its acknowledgement */
  dlock__ack ack;              /* its outcome; under parker->mu */
  redisReply *reply;           /* under parker->mu */
  int status;
  char err[1536];
} dlock__early;

/* Tests only (NULL in every program): told when a waiting thread is armed
 * (DLOCK__HOOK_ARMED, on that thread: from now on a wake-up sends its try
 * early) and when the engine sends a waiter's early try
 * (DLOCK__HOOK_EARLY_SENT, on the engine thread, the waiter's parker->mu
 * held: answering 1 interrupts the waiter at that moment), so an interrupt
 * racing a granting early try is made at will. */
enum { DLOCK__HOOK_ARMED, DLOCK__HOOK_EARLY_SENT };
typedef int dlock__early_hook_fn(int event);
extern dlock__early_hook_fn *_Atomic dlock__early_hook;

/* FIFO channels (w->fifo set by dlock__subscribe's caller through the wait
 * spec): the oldest local waiter of the channel is "head" and may always
 * try; a message announcing a count (a semaphore's available permits) wakes
 * the head and gives one try ("turn") to each next waiter while the demands
 * of all up to it fit in that count, so nobody is overtaken by a later
 * waiter and the permits a release returns are taken at once, in parallel.
 * When the head leaves, the next waiter becomes head and is woken. Number of
 * FIFO waiters on the client: */
int dlock__fifo_waiters(dlock_client *c);

/* Register w (zeroed by the caller) on channel (shared, refcounted
 * SUBSCRIBE) and wait until the subscription is confirmed (or w is
 * interrupted), at most until deadline_ms (-1: at most the command
 * timeout). Without confirmation the waiter still works, on hints. */
int dlock__subscribe(dlock_client *c, const char *channel, size_t len,
                     dlock__wake_fn *wake, int fifo, int lease_hints,
                     dlock__waiter *w,
                     int64_t deadline_ms);
/* Wait for a wake-up (counted: one that came since the last call returns at
 * once) until deadline_ms (-1 forever), or until the end of a lease a
 * lease hint announced (a "-MS" message on a channel with lease hints,
 * since no release will announce that lease's end). Returns DLOCK_OK
 * (woken, or the time came: the caller's recipe tells which matters),
 * DLOCK_ECLOSED or DLOCK_EINTR. */
int dlock__waiter_wait(dlock__waiter *w, int64_t deadline_ms);
/* Wait on n waiters of one thread (one parker) at once: DLOCK_OK when any
 * was woken (all their wake-ups taken), DLOCK_ETIMEDOUT at deadline_ms (-1
 * never), DLOCK_ECLOSED. */
int dlock__waiter_wait_any(dlock__waiter *const *ws, int n,
                           int64_t deadline_ms);
/* A FIFO waiter's turn (wait.c): it is the oldest, or a message gave it
 * one try (taken here). */
int dlock__waiter_my_turn(dlock__waiter *w);
/* DLOCK_EPERM with the server's words when w's SUBSCRIBE was refused (w
 * subscribed by dlock__subscribe), else DLOCK_OK. */
int dlock__waiter_refused(dlock__waiter *w);
/* What a waiter of an internal async operation says now (an election's
 * observers: src/election/observe.c), read under its parker's lock, its
 * wake-ups since the last look taken. */
typedef struct dlock__waiter_look {
  int woken;       /* a wake-up came (a message, or subscribed again) */
  int closed;      /* the client closed */
  int denied;      /* its SUBSCRIBE was refused: why has the server's words */
  int confirmed;   /* its subscription is confirmed */
  char why[512];
} dlock__waiter_look;
void dlock__waiter_look_now(dlock__waiter *w, dlock__waiter_look *out);
/* Deregister w (synchronous); the last waiter of a channel UNSUBSCRIBEs. */
void dlock__unsubscribe(dlock_client *c, dlock__waiter *w);
/* DLOCK_EPERM for a refused SUBSCRIBE of channel (len 0: not named), the
 * message saying whether the command or the channel was refused (why: the
 * server's words). */
int dlock__subscribe_denied(const char *channel, size_t len, const char *why);
/* The same for an async waiter (w->notify set, w->parker its client's), on
 * the engine thread: subscribe returns at once (w->confirmed says whether
 * the channel is confirmed already; notify tells when it is, or denied). */
int dlock__subscribe_async(dlock_client *c, const char *channel, size_t len,
                           dlock__wake_fn *wake, dlock__waiter *w);
void dlock__unsubscribe_async(dlock_client *c, dlock__waiter *w);

#endif /* DLOCK_CORE_PUBSUB_H */
