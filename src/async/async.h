/* Async operations (docs/async.md): what src/async shares with the engine.
 *
 * An operation lives on its client's engine thread: it starts there (a
 * task), sends its requests there, waits there (an async pub/sub waiter and
 * a timer, no thread), and ends there, in dlock__aop_finish(), which hands
 * its result to the callback (engine mode) or to the completion queue.
 * Calls that have no request form yet run their blocking form on libuv's
 * thread pool (dlock__aop_blocking) and end on the engine thread too.
 *
 * Invariant: an operation is finished only when none of its requests or
 * pool jobs is in flight; a reply or a job that comes back finds it alive.
 */
#ifndef DLOCK_ASYNC_INTERNAL_H
#define DLOCK_ASYNC_INTERNAL_H

#include "core/engine.h"
#include "dlock/async.h"

typedef struct dlock__aop dlock__aop;

/* A combinator's operation (the multi-lock's, RedLock's): one built from
 * its members' inner operations or rounds, whose state is its own
 * (op->ctx). What async asks of it (engine thread): */
typedef struct dlock__outer {
  /* dlock_cancel asked: stop what is under way (its answer ends the
   * operation), or end it now when nothing is. NULL: the next answer
   * sees the cancel. */
  void (*cancel)(dlock__aop *op);
  /* the client closes: cancel the inner operation under way (its answer
   * ends this one). NULL: nothing to cancel. */
  void (*stop)(dlock__aop *op);
  /* inner operations or a round still under way: the close waits for
   * their answers */
  int (*busy)(const dlock__aop *op);
  /* it finishes: let go of what it still refers to. NULL: nothing. */
  void (*end)(dlock__aop *op);
} dlock__outer;

enum dlock__aop_type {
  DLOCK__AOP_ACQUIRE = 1, /* waits (may be cancelled), counted as an acquire */
  DLOCK__AOP_AWAIT,       /* waits (may be cancelled): a latch's await */
  DLOCK__AOP_RELEASE,     /* counted as a release */
  DLOCK__AOP_OTHER,
};

enum dlock__aop_stage {
  DLOCK__AOP_NEW,         /* not started on the engine yet */
  DLOCK__AOP_BUSY,        /* a request or a pool job is in flight */
  DLOCK__AOP_SUBSCRIBING, /* waiting for its channel's confirmation */
  DLOCK__AOP_WAITING,     /* waiting for a wake-up or its timer */
  DLOCK__AOP_COMPOSITE,   /* a combinator's: runs inner operations of its
                             members (on this engine thread), op->outer
                             says what it does with a cancel or close */
  DLOCK__AOP_DONE
};

struct dlock__aop {
  dlock__map_node node;  /* the process's registry of pending ops */
  uint64_t id;
  uint8_t type;
  uint8_t cancel;        /* dlock_cancel asked (under the registry's mutex) */
  uint8_t stage;         /* engine thread */
  uint8_t ready;         /* on the ready list (the client's async mu) */
  uint8_t granted;       /* a try was granted (given back or kept) */
  uint8_t internal;      /* an inner operation of a combinator's: its
                            callback runs on the engine thread at once,
                            whatever the client's completion mode */
  uint8_t fate;          /* the last ask's request: DLOCK__UNSENT... */
  uint8_t combinator;    /* started as one: the client's close waited */
  dlock__aop *prev, *next;   /* the client's live ops (engine thread) */
  dlock__aop *rprev, *rnext; /* the ready list, or the completion queue
                                once done (the client's async mu) */
  dlock_client *c;           /* referenced */
  dlock__handle *h;          /* the lock's or synchronizer's handle */
  dlock__wait wt;            /* a wait's: its kind's table, the call's
                                arguments, what a grant tells (await.c) */
  uint64_t owner;
  void *ctx;                 /* the kind's, freed with op (free()) */
  void (*ctx_free)(void *ctx); /* frees ctx instead of free(), or NULL */
  /* what the kind's steps (src/lock/lock_async.c) keep */
  int64_t deadline_ms;   /* -1: none */
  int64_t wait_ms, sent_ms, t0_us;
  const dlock__outer *outer; /* a combinator's, NULL */
  int64_t num;           /* a call's number argument (latch count, permits) */
  dlock__recipe recipe;  /* a wait's (await.c) */
  dlock__waiter *w;      /* from its first wait on */
  /* its one timer (dlock__aop_timer): a place in its client's timer heap
   * (engine thread) */
  uint64_t due_ms;       /* the loop's clock (uv_now) */
  void (*timer_fn)(dlock__aop *op);
  uint32_t timer_at;     /* its index in the heap + 1; 0: not in it */
  int tries;             /* the kind's steps' (beside timer_at: no padding) */
  void (*start)(dlock__aop *op);    /* engine: its first step */
  void (*on_ready)(dlock__aop *op); /* engine: woken, or its timer fired */
  int (*blocking)(dlock__aop *op);  /* a pool job's body (any thread) */
  dlock_done_fn *done;
  void *data;
  dlock_result res;
  char *errmsg;          /* a failure's detail (owned) */
};

/* Per client (engine.h: dlock_client.async). */
typedef struct dlock__async {
  pthread_mutex_t mu;        /* the ready list and the completion queue */
  dlock__aop *ready_head, *ready_tail;
  dlock__aop *done_head, *done_tail;
  int efd;                   /* the queue's eventfd (queue mode), else -1 */
  int efd_set;               /* it was written and not read yet (mu) */
  dlock__parker parker;      /* the mutex its waiters share */
  dlock__aop *live;          /* engine thread: ops not finished */
  /* engine thread: the ops' timers, a binary heap by due_ms under one
   * loop timer (made when first needed, closed once the client stops and
   * the heap is empty): a pending op carries no timer handle of its own */
  dlock__aop **timers;
  uint32_t ntimers, timers_cap;
  uv_timer_t *timer;
  _Atomic(unsigned long) runner; /* the thread running completions, 0 */
} dlock__async;


/* A new operation of type on handle h's client (any thread); NULL with
 * DLOCK_ENOMEM set. */
dlock__aop *dlock__aop_new(dlock__handle *h, int type, dlock_done_fn *done,
                           void *data);
/* The checks every async call starts with: h (NULL: "what is NULL"),
 * done, a closed client. */
int dlock__aop_check(const dlock__handle *h, const char *what,
                     dlock_done_fn *done);
/* An operation on c (NULL: h's client) that runs fn (the blocking call,
 * reading its arguments from op->h, op->num, op->ctx, op->owner) as a
 * thread-pool job: checks h (what names it in messages) and done, then
 * starts it. ctx (may be NULL) is the op's to free, also on an error. */
int dlock__aop_job(dlock_client *c, dlock__handle *h, const char *what,
                   int type, int (*fn)(dlock__aop *op), int64_t num, void *ctx,
                   uint64_t owner, dlock_done_fn *done, void *data,
                   dlock_op *out);
/* A waiting operation of type on h, waiting as kind k says, with budget
 * wait_ms (checked here) into *op (op->wt filled with them and the
 * calling thread as owner), for the caller to fill in further and
 * dlock__aop_start with dlock__await_start. DLOCK_OK, DLOCK_EINVAL or
 * DLOCK_ENOMEM. */
int dlock__aop_await_new(dlock__handle *h, int type, const dlock__wait_rules *k,
                         int64_t wait_ms, dlock_done_fn *done, void *data,
                         dlock__aop **op);
/* An operation on client c for handle h (a combinator's, whose handle has
 * no client: c is its members' engine's). One with outer set before its
 * start is a combinator's: c's close waits for it until it finishes.
 * DLOCK_OK or DLOCK_ENOMEM. */
int dlock__aop_new_on(dlock_client *c, dlock__handle *h, int type,
                             dlock_done_fn *done, void *data, dlock__aop **op);
/* Arm op's one timer ms from now (a wait's hint or budget, a
 * combinator's round), or stop it (ms < 0): fn(op) runs on the engine
 * thread then, unless op finished. Made on first use: DLOCK_OK, or
 * DLOCK_ENOMEM (no timer). */
int dlock__aop_timer(dlock__aop *op, int64_t ms, void (*fn)(dlock__aop *op));
/* Free an op that never started (its start failed). */
void dlock__aop_discard(dlock__aop *op);
/* Register op and hand it to its engine, which calls start(op) there
 * (any thread). On an error nothing starts and op is freed. */
int dlock__aop_start(dlock__aop *op, void (*start)(dlock__aop *op),
                     dlock_op *out);
/* The same on op's engine thread, started at once (an operation another
 * one needs: an election's hub). Not a combinator's. DLOCK_OK, or
 * DLOCK_ENOMEM with op freed. */
int dlock__aop_start_here(dlock__aop *op, void (*start)(dlock__aop *op));
/* Run op->blocking on the thread pool; op finishes with its result back
 * on the engine thread (engine thread). */
void dlock__aop_blocking(dlock__aop *op);
/* Run fn(op) on the thread pool, then(op, its result) back on the engine
 * thread (DLOCK_ECLOSED when the pool dropped it); a failure's message is
 * op->errmsg then (engine thread). */
void dlock__aop_blocking_then(dlock__aop *op, int (*fn)(dlock__aop *op),
                              void (*then)(dlock__aop *op, int rc));
/* Send req for op (engine thread); done gets it back there. */
void dlock__aop_send(dlock__aop *op, dlock__req *req, dlock__req_done *done);
/* End op with rc (engine thread): the detail is the thread's dlock_errmsg()
 * when rc < 0 and op->errmsg is not set. */
void dlock__aop_finish(dlock__aop *op, int rc);
/* One more result of an operation that calls back more than once (an
 * election's observer; engine thread): its done runs with rc DLOCK_OK and
 * res.election = election, now or from the completion queue as the
 * client's completions say, before op's own end. ctx (freed with free(),
 * also on an error) lives until then. DLOCK_OK or DLOCK_ENOMEM. */
int dlock__aop_emit(dlock__aop *op, void *ctx, const void *election);
/* For an acquire that was granted: 1 when op was cancelled meanwhile (the
 * caller gives the grant back and finishes it ECANCELED); 0 when not, and
 * from now on it cannot be: the grant is the caller's to report (engine
 * thread). */
int dlock__aop_grant_cancelled(dlock__aop *op);
/* 1 when dlock_cancel asked for op (engine thread). */
int dlock__aop_cancelled(dlock__aop *op);
/* Wait on op->wt's channel (engine thread): subscribes op's waiter on
 * first use; on_ready runs on a wake-up, the confirmation, or the timer at
 * until_ms (monotonic; -1 none). DLOCK_OK or an error. */
int dlock__aop_wait(dlock__aop *op, int64_t until_ms);
/* What woke op (engine thread, in on_ready): DLOCK_ECLOSED, DLOCK_EPERM
 * (denied), 1 a wake-up or the confirmation (taken), 0 the timer. */
int dlock__aop_woken(dlock__aop *op);
/* Put op on its client's ready list (op.c): its on_ready runs before the
 * engine next polls; wake_loop when called off the engine thread. */
void dlock__aop_ready(dlock__aop *op, int wake_loop);
/* Close op's timer, if it has one (finish does; engine thread). */
void dlock__aop_timer_drop(dlock__aop *op);

/* Send an undoing (engine thread): a grant given back, a queue left; no
 * acknowledgement is wanted. done(req, reply, status) gets its answer
 * there (at once with DLOCK_ECLOSED when the client is closing); NULL:
 * nobody looks at it. */
void dlock__aop_fire(dlock_client *c, dlock__req *req, dlock__req_done *done,
                     void *data);
/* How many grants were given back: after a cancel, a replica guard miss
 * or a failure to record them (tests). */
long dlock__aop_given_back(void);

/* The waiting recipe without a thread (await.c): op->wt and deadline_ms
 * set; the start function of an acquire-type op (dlock__aop_start). */
void dlock__await_start(dlock__aop *op);

#endif /* DLOCK_ASYNC_INTERNAL_H */
