/* The engine: a client's loop thread, its connections and their state.
 * Everything in here belongs to the engine thread unless a field says it is
 * guarded by a mutex. */
#ifndef DLOCK_ENGINE_H
#define DLOCK_ENGINE_H

#include <stdatomic.h>

#include <uv.h>

#include "core/core.h"
#include "core/uri.h"

enum dlock__conn_state {
  CONN_DOWN,       /* no socket; reconnect timer may be due */
  CONN_CONNECTING, /* resolving or connecting */
  CONN_HANDSHAKE,  /* AUTH / SELECT / CLIENT SETNAME in flight */
  CONN_READY,
  CONN_CLOSING     /* uv_close in progress */
};

typedef struct dlock__conn {
  dlock_client *client;
  int is_sub; /* the pub/sub connection */
  const char *role;
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  } u;
  uv_connect_t connect_req;
  uv_getaddrinfo_t gai_req;
  int resolving;
  uv_timer_t timer;        /* connect/command deadlines and backoff */
  int64_t timer_due;       /* when the armed timer fires, 0 = not armed */
  enum dlock__conn_state state;
  redisReader *reader;
  dlock__req *inflight, *inflight_tail; /* sent, waiting for replies */
  dlock__req *waiting, *waiting_tail;   /* not sent yet (not ready) */
  dlock__buf out;                       /* bytes for the next write */
  int64_t connect_started_ms;
  int64_t reconnect_at_ms;              /* when DOWN: next attempt */
  int64_t backoff_ms;
  int handshake_left;
  int writes_pending;
  char last_error[200];
  char readbuf[65536];
} dlock__conn;

/* One loop thread. A client starts its own, or runs on another client's
 * (dlock_client_opts.share_engine): the engine lives until its last client
 * is closed. */
typedef struct dlock__engine {
  uv_loop_t loop;
  uv_thread_t thread;
  atomic_int users;    /* clients on this loop */
} dlock__engine;

struct dlock_client {
  atomic_int refs;     /* the open client + one per lock handle */
  atomic_int closed;   /* set by dlock_client_close */
  char id[40];
  dlock_client_opts opts;
  char *client_name;
  dlock__uri uri;

  dlock__engine *engine;
  uv_loop_t *loop;     /* &engine->loop */
  uv_async_t wake;
  uv_prepare_t flush;
  uv_timer_t watchdog_timer;

  pthread_mutex_t qmu; /* guards the queue and closing */
  dlock__req *qhead, *qtail;
  int closing;

  int stopping;        /* engine only: shutdown has begun */
  int live;            /* engine only: this client's handles not closed yet
                          and requests (getaddrinfo) not finished: its
                          memory is in the loop's hands until 0 */
  dlock__sync *closer; /* dlock_client_close's, told when live reaches 0 */
  int *closer_done;

  dlock__conn cmd, sub;

  dlock__map channels; /* engine only: pubsub.c */
  atomic_int fifo_waiters;

  pthread_mutex_t hmu; /* guards holds: watchdog.c */
  dlock__map holds;
  uint64_t hold_epoch;
};

/* engine.c: one of c's handles closed or requests ended (engine thread);
 * the last one after a close lets dlock_client_close return. Call it last:
 * c may be freed as soon as it returns. */
void dlock__client_live_done(dlock_client *c);

/* conn.c */
void dlock__conn_init(dlock_client *c, dlock__conn *conn, int is_sub);
void dlock__conn_start(dlock__conn *conn);
/* Send req on conn (or keep it until the connection is ready). */
void dlock__conn_send(dlock__conn *conn, dlock__req *req);
/* Write what is buffered: called once per loop turn. */
void dlock__conn_flush(dlock__conn *conn);
/* Fail everything with status and close the socket for good. */
void dlock__conn_shutdown(dlock__conn *conn, int status);
/* Complete req (engine thread): status DLOCK_OK with reply, or an error. */
void dlock__req_finish(dlock__req *req, redisReply *reply, int status,
                       const char *why);

/* pubsub.c (engine thread) */
void dlock__pubsub_on_reply(dlock_client *c, redisReply *reply);
void dlock__pubsub_on_ready(dlock_client *c);
void dlock__pubsub_on_down(dlock_client *c);
void dlock__pubsub_shutdown(dlock_client *c);

/* watchdog.c (engine thread) */
void dlock__watchdog_start(dlock_client *c);
void dlock__holds_free(dlock_client *c);

#endif /* DLOCK_ENGINE_H */
