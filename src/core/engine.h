/* The engine's own machinery: the client and its loop thread, its
 * connections and the hash tables behind them (the parker and the pub/sub
 * waiters: core/pubsub.h; the direct path's state: direct/pool.h). Core,
 * src/direct and src/async include it; a kind never does (it has
 * lock/lock_impl.h, whose async hooks bring it along: the client's fields
 * stay core's and direct's, tests/layering.py). Everything in here belongs
 * to the engine thread unless a field says it is guarded by a mutex. */
#ifndef DLOCK_ENGINE_H
#define DLOCK_ENGINE_H

#include <stdatomic.h>

#include <sys/socket.h>

#include <uv.h>

#include "core/core.h"
#include "core/pubsub.h"
#include "core/recipe.h"
#include "core/wait.h"
#include "core/watchdog.h"
#include "base/map.h"
#include "core/stats.h"
#include "base/uri.h"
#include "net/conn.h"
#include "net/sock.h"
#include "direct/pool.h"

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
  /* a tick's renewal calls not sent yet, and those in flight (watchdog.c,
   * engine thread): they go out a few at a time */
  struct dlock__renew_call *renew_q, *renew_q_tail;
  unsigned renew_inflight, renew_sending : 1;

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
void dlock__watchdog_shutdown(dlock_client *c); /* drop the unsent renewals */
void dlock__holds_free(dlock_client *c);

#endif /* DLOCK_ENGINE_H */
