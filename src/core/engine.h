/* The engine's own machinery, private to src/core: the client and its loop
 * thread, connections, per-thread wait objects, pub/sub waiters, and the
 * hash tables behind them. Backends never include this (they have
 * core/core.h). Everything in here belongs to the engine thread unless a
 * field says it is guarded by a mutex. */
#ifndef DLOCK_ENGINE_H
#define DLOCK_ENGINE_H

#include <stdatomic.h>

#include <sys/socket.h>

#include <uv.h>

#include "core/core.h"
#include "base/map.h"
#include "core/stats.h"
#include "base/uri.h"
#include "net/conn.h"
#include "net/sock.h"
#include "direct/pool.h"

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
 * lease hint announced (a "-MS" message on a channel with lease hints: 0
 * then, since no release will announce that lease's end). Returns 1 woken, 0
 * timed out, DLOCK_ECLOSED. */
int dlock__waiter_wait(dlock__waiter *w, int64_t deadline_ms);
/* Wait on n waiters of one thread (one parker) at once: 1 when any was woken
 * (all their wake-ups taken), 0 timed out at deadline_ms (-1 never),
 * DLOCK_ECLOSED. */
int dlock__waiter_wait_any(dlock__waiter *const *ws, int n,
                           int64_t deadline_ms);
/* A FIFO waiter's turn (wait.c): it is the oldest, or a message gave it
 * one try (taken here). */
int dlock__waiter_my_turn(dlock__waiter *w);
/* DLOCK_EPERM with the server's words when w's SUBSCRIBE was refused (w
 * subscribed by dlock__subscribe), else DLOCK_OK. */
int dlock__waiter_refused(dlock__waiter *w);
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

/* ---- the direct path: its state in the client (direct/pool.h; its calls:
 * direct/direct.h) ---- */


/* One loop thread. A client starts its own, or runs on another client's
 * (dlock_client_opts.share_engine): the engine lives until its last client
 * is closed. */
typedef struct dlock__engine {
  uv_loop_t loop;
  uv_thread_t thread;
  atomic_int users;    /* clients on this loop */
  uv_poll_t presize;   /* grows libuv's descriptor table at the start */
} dlock__engine;

struct dlock_client {
  atomic_int refs;     /* the open client + one per lock handle */
  atomic_int closed;   /* set by dlock_client_close */
  char id[40];
  dlock_client_opts opts;
  char *client_name;
  dlock__uri uri;

  dlock__engine *engine;
  dlock__net net;      /* its connections, topology, loop (net/conn.h) */
  uv_async_t wake;
  uv_prepare_t flush;
  uv_timer_t watchdog_timer;
  uv_timer_t deadline_timer; /* the earliest watchdog hold's validity end
                                (watchdog.c: a loss is told before it) */
  uv_timer_t sweep_timer; /* idle direct connections' latch DELs (direct.c) */

  pthread_mutex_t qmu; /* guards the queue and closing */
  dlock__req *qhead, *qtail;
  int closing;

  dlock__parker *closer; /* dlock_client_close's, told when live reaches 0 */
  int *closer_done;

  dlock__direct direct;

  pthread_mutex_t cmu;  /* guards channels, their waiter lists and the
                          waiters' prev/next/chan (pubsub.c): the engine
                          and a waiter joining or leaving a live channel */
  dlock__map channels; /* pubsub.c, under cmu */
  char sub_error[160]; /* engine only: the last SUBSCRIBE refusal */
  atomic_int fifo_waiters;

  pthread_mutex_t hmu; /* guards holds: watchdog.c */
  dlock__map holds;
  uint64_t hold_epoch;

  dlock__stats stats; /* stats.c: any thread (relaxed atomics) */
  struct dlock__async *async; /* src/async: pending async operations, the
                                 completion queue */
};

/* engine.c: what a client's net tells the engine (net/conn.h; client.c
 * makes the table of the net's hooks, the direct path's among them): the
 * last of its handles and lookups done, a connection made again, the
 * subscriptions to move to another server. */
void dlock__engine_on_live_done(dlock__net *n);
void dlock__engine_on_reconnected(dlock__net *n, const char *where);
void dlock__engine_on_rehome(dlock__net *n);

/* engine.c: a blocking call's way through the engine (core/call.c decides
 * the way). dlock__engine_early: 1 when w's early try, sent by the engine
 * on a wake-up (pubsub.c), answers req (*status, *reply, *sent_ms set;
 * req's buffers freed), else 0. dlock__engine_call: req through the
 * pipeline (w, when set, keeps it as its next early try), sleeping until
 * the engine completes it: DLOCK_OK with *status and *reply as the engine
 * set them, or the submit's failure (a closed client). dlock__engine_task:
 * a task request (dlock__req_task) run on the engine thread, waited for:
 * DLOCK_OK or its failure with a message. */
int dlock__engine_early(dlock__waiter *w, dlock__req *req, int *status,
                        redisReply **reply, int64_t *sent_ms);
int dlock__engine_call(dlock_client *c, dlock__waiter *w, dlock__req *req,
                       int *status, redisReply **reply, int64_t *sent_ms);
int dlock__engine_task(dlock_client *c, dlock__req *req);
/* The client whose net n is (a connection's: conn->net). */
static inline dlock_client *dlock__net_client(dlock__net *n) {
  return DLOCK__CONTAINER(n, dlock_client, net);
}

/* engine.c: start c's connections and watchdog on a new engine thread, or
 * on share_with's (dlock_client_opts.share_engine). */
/* What a layer above attaches to every client's engine: the non-blocking
 * calls (src/async) do, once, when the library is loaded (a constructor of
 * theirs calls dlock__engine_attach), so the engine reports to them
 * through this table and never calls them by name. Each hook may be NULL.
 * open: the client is being made (an error fails the open); turn: on the
 * engine thread, once per loop turn; stopping: on the engine thread as it
 * stops, after the requests in flight failed; closed: on the closing
 * thread, the engine gone; free: the client's memory goes. */
typedef struct dlock__attachment {
  int (*open)(dlock_client *c);
  void (*turn)(dlock_client *c);
  void (*stopping)(dlock_client *c);
  void (*closed)(dlock_client *c);
  void (*free)(dlock_client *c);
} dlock__attachment;
void dlock__engine_attach(const dlock__attachment *a);
/* What the attached layer uses of a client, through calls (its fields are
 * core's): its own state (set once at open, cleared at free); a wake-up of
 * the engine's loop (any thread; none once the client closes); the loop
 * (engine thread); one more (+1) or one fewer (-1) handle or job the
 * client's close waits for (engine thread; dlock__client_live_done ends
 * one that finished); whether the engine began to stop (engine thread);
 * whether two clients share one engine thread. */
struct dlock__async *dlock__client_async(const dlock_client *c);
void dlock__client_set_async(dlock_client *c, struct dlock__async *a);
void dlock__client_wake(dlock_client *c);
uv_loop_t *dlock__client_loop(const dlock_client *c);
void dlock__client_live(dlock_client *c, int delta);
int dlock__client_stopping(const dlock_client *c);
int dlock__client_same_engine(const dlock_client *a, const dlock_client *b);
/* The attachment, or NULL. */
const dlock__attachment *dlock__engine_attached(void);

int dlock__engine_start(dlock_client *c, dlock_client *share_with);
/* engine.c: close c's handles and connections and wait until the loop is
 * done with c; the last client of an engine joins its thread. */
void dlock__engine_stop(dlock_client *c);
/* engine.c: one of c's handles closed or requests ended (engine thread);
 * the last one after a close lets dlock_client_close return. Call it last:
 * c may be freed as soon as it returns. */
void dlock__client_live_done(dlock_client *c);
/* engine.c, engine thread: req to the server that serves it, as c's
 * topology routes it (net/topology.h). */
void dlock__send(dlock_client *c, dlock__req *req);

/* pubsub.c (engine thread) */
void dlock__pubsub_on_reply(dlock__conn *conn, redisReply *reply);
/* An error reply on the pub/sub connection: 1 when it answered a
 * (UN)SUBSCRIBE (an ACL refusal: that channel's waiters are told), 0 when
 * it is not pub/sub's. */
int dlock__pubsub_on_error(dlock__conn *conn, const redisReply *reply);
void dlock__pubsub_on_ready(dlock__conn *conn);
void dlock__pubsub_on_down(dlock__conn *conn);
/* net/cluster.c, after a new slot map: channels whose node lost their slot
 * subscribe again on the new owner. */
void dlock__pubsub_rehome(dlock_client *c);
void dlock__pubsub_shutdown(dlock_client *c);

/* watchdog.c (engine thread) */
void dlock__watchdog_start(dlock_client *c);
void dlock__watchdog_soon(dlock_client *c); /* a connection came back */
void dlock__holds_free(dlock_client *c);

#endif /* DLOCK_ENGINE_H */
