/* The engine's connection to one server on a libuv stream (conn.c), and
 * the net layer's view of its client (dlock__net): the loop, the URI and
 * options, the TLS settings, the command and pub/sub connections, the
 * topology, and the hooks through which net reports to the engine above
 * it. Engine thread, unless a field says otherwise. */
#ifndef DLOCK_NET_CONN_H
#define DLOCK_NET_CONN_H

#include <stdatomic.h>

#include <hiredis/read.h>
#include <uv.h>

#include "base/base.h"
#include "base/counters.h"
#include "base/uri.h"
#include "base/req.h"

typedef struct dlock__net dlock__net;
typedef struct dlock__conn dlock__conn;
typedef struct dlock__topology dlock__topology; /* net/topology.h */

enum dlock__conn_state {
  CONN_DOWN,       /* no socket; reconnect timer may be due */
  CONN_CONNECTING, /* resolving or connecting */
  CONN_TLS,        /* the TLS handshake (rediss...: net/tls.h) */
  CONN_HANDSHAKE,  /* AUTH / SELECT / CLIENT SETNAME in flight */
  CONN_READY,
  CONN_CLOSING     /* uv_close in progress */
};

/* What the engine's command connection to a server tells the direct path
 * of that server (any thread reads it). */
typedef struct dlock__link {
  atomic_int ready;    /* the connection is up: while it is not, calls
                          wait for it in the engine's pipeline (the server
                          is in trouble, or not connected yet) */
  atomic_int replicas; /* its replicas not failed, as the topology knows
                          them (the replica guard's WAIT asks for them
                          all); 0 on a standalone server */
} dlock__link;

struct dlock__conn {
  dlock__net *net;
  int is_sub; /* the pub/sub connection */
  unsigned depth; /* requests in flight (stats: pipeline depth) */
  int was_ready;  /* it was ready before: the next ready is a reconnect */
  const char *role;
  const char *host; /* where it connects; NULL: the client's URI */
  int port;
  /* A connection of a topology's own (a sentinel's +switch-master
   * subscription): no AUTH or SELECT, and its pushes, its readiness and
   * its failures go to these instead of the engine (NULL: the hooks' sub_*). */
  int bare;
  void (*on_push)(struct dlock__conn *conn, redisReply *reply);
  void (*on_ready)(struct dlock__conn *conn);
  void (*on_down)(struct dlock__conn *conn);
  dlock__link *link; /* a command connection: what it tells the direct
                         path of its server (ready while it is; the
                         replica count for the replica guard); NULL: none */
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
  struct dlock__tls *tls; /* its TLS session (rediss...), NULL else */
  redisReader *reader;
  dlock__req *inflight, *inflight_tail; /* sent, waiting for replies */
  dlock__req *waiting, *waiting_tail;   /* not sent yet (not ready) */
  dlock__req *parked, *parked_tail;     /* refused for now: resent at their
                                           retry_at (conn.c) */
  dlock__buf out;                       /* bytes for the next write */
  int64_t connect_started_ms;
  int64_t reconnect_at_ms;              /* when DOWN: next attempt */
  int64_t backoff_ms;
  int handshake_left;
  int writes_pending;
  int started;                          /* a cluster's connections start on
                                           first use (dlock__conn_use) */
  int start_wanted;
  int held; /* DOWN and not to reconnect until its topology says where
               (dlock__conn_unhold): a sentinel's master after a fall */
  dlock__buf sub_fifo; /* a pub/sub connection: the channels of its
                          unanswered (UN)SUBSCRIBEs, in order (core/pubsub.c) */
  size_t sub_fifo_head;
  char last_error[1024];
  int oom;                 /* the failure is the reply reader's: out of memory */
  char readbuf[65536];
};

/* What net tells the engine above it: the engine hands these to its
 * client's net (core/engine.c); each runs on the engine thread. */
typedef struct dlock__net_hooks {
  /* One of the client's handles closed, or a request (a resolve) ended:
   * the client's memory may go when none is left. Call it last. */
  void (*live_done)(dlock__net *n);
  /* The pub/sub connection (conn->is_sub, no on_push of its own): a push,
   * an error answer (1: it answered a (UN)SUBSCRIBE), ready, lost. */
  void (*sub_push)(dlock__conn *conn, redisReply *reply);
  int (*sub_error)(dlock__conn *conn, const redisReply *reply);
  void (*sub_ready)(dlock__conn *conn);
  void (*sub_down)(dlock__conn *conn);
  /* A connection lost before is ready again, to where. */
  void (*reconnected)(dlock__net *n, const char *where);
  /* The direct path's server i: what the topology's connection to it tells
   * (link), at host:port (cluster nodes: host lives as long as the
   * client), or moved to host:port (a sentinel's new master). */
  dlock__link *(*link)(dlock__net *n, int i);
  dlock__link *(*node)(dlock__net *n, int i, const char *host, int port);
  void (*retarget)(dlock__net *n, int i, const char *host, int port);
  /* A new slot map: pub/sub channels whose node lost their slot move. */
  void (*rehome)(dlock__net *n);
} dlock__net_hooks;

struct dlock__net {
  const dlock__net_hooks *hooks;
  uv_loop_t *loop;               /* the engine's */
  dlock__uri *uri;               /* the client's (a topology may settle
                                    what it left open: pub/sub mode) */
  const dlock_client_opts *opts; /* likewise */
  const char *client_name;       /* CLIENT SETNAME's */
  struct dlock__tls_ctx *tls;    /* a rediss... URI's TLS settings; NULL */
  dlock__stats *stats;           /* the client's counters (any thread) */
  const dlock__topology *topo;   /* the URI's: standalone, cluster, sentinel */
  void *topo_state;              /* the topology's own, NULL standalone */
  dlock__conn cmd, sub;
  int stopping;   /* shutdown has begun */
  int live;       /* the client's handles not closed yet and requests
                     (resolves) not finished: its memory is in the loop's
                     hands until 0 (hooks->live_done) */
  int refused; /* a standalone server refused the first connection: the
                 * waiting requests failed at once (engine thread; read by
                 * dlock_client_open after its first call returned) */
  int conns_lost; /* ready connections lost and not made again yet (to
                     the same server, or to the one that took its place:
                     a failover's new master) */
  atomic_int sharded; /* a cluster's waiters use sharded pub/sub
                         (SSUBSCRIBE on the channel's node; scripts
                         SPUBLISH): set once, when the client opens */
};

/* Where n's URI points ("host:port" or the socket's path), into buf. */
const char *dlock__net_where(const dlock__net *n, char *buf, size_t len);

/* The commands every new connection of n sends first (AUTH,
 * SELECT, CLIENT SETNAME, as n's URI and name ask; the durable option's
 * WAITAOF probe), each handed to fn; the
 * first error fn returns ends it. Engine and direct connections alike. */
typedef int dlock__handshake_fn(void *ctx, size_t argc, const char *const *argv,
                                const size_t *lens);
int dlock__handshake(const dlock__net *n, dlock__handshake_fn *fn, void *ctx);
/* "AUTH [user] password" into argv/lens (3 each): how many arguments. */
size_t dlock__auth_args(const char *user, const char *password,
                        const char *argv[3], size_t lens[3]);

/* conn.c, engine thread */
void dlock__conn_init(dlock__net *n, dlock__conn *conn, int is_sub);
void dlock__conn_start(dlock__conn *conn);
/* Ask for conn to be started unless it has been before (or the client
 * stops). It starts in the loop's prepare step (dlock__conn_start_wanted),
 * never inside the caller: a start that fails at once would report the
 * failure to the pub/sub waiter while it holds the channel mutex. */
void dlock__conn_use(dlock__conn *conn);
void dlock__conn_start_wanted(dlock__conn *conn);
/* A connection whose topology held its reconnect (conn->held, set in its
 * conn_down) reconnects now, to wherever conn->host points. */
void dlock__conn_unhold(dlock__conn *conn);
/* Send req on conn (or keep it until the connection is ready). */
void dlock__conn_send(dlock__conn *conn, dlock__req *req);
/* A write's acknowledgement (base/req.h: dlock__ack), which both paths send
 * after the script's reply on the same connection: WAIT for the replica
 * guard (when it is on and replicas are known), then WAITAOF for durable
 * grants (when on). dlock__ack_plan fills req->ack's asked fields and
 * returns how many commands (0 to 2); the i-th of them as arguments; its
 * answer r (NULL: none came) into req->ack, and the server's words into
 * req->errmsg when it refused. */
/* What a handshake's error answer err means (both paths): 0 nothing to
 * mind (the durable probe on a replica), DLOCK_EAUTH refused for good
 * (credentials, ACL), DLOCK_ECONFIG a protected-mode server refusing a
 * source address other than 127.0.0.1, DLOCK_ECONFIG / DLOCK_EPERM the
 * durable probe refused (no WAITAOF, no AOF / no +waitaof), DLOCK_EIO
 * passing (LOADING and the like: reconnects go on). */
int dlock__handshake_refusal(const char *err);
typedef struct dlock__ack_cmd {
  char n[16], ms[24];
  const char *argv[4];
  size_t lens[4];
  size_t argc;
} dlock__ack_cmd;
int dlock__ack_plan(const dlock_client_opts *o, int replicas, dlock__req *req);
void dlock__ack_cmd_init(const dlock_client_opts *o, const dlock__req *req,
                         int i, dlock__ack_cmd *cmd);
void dlock__ack_answer(dlock__req *req, int i, const redisReply *r);
/* Keep req until conn is ready again (its connect timeout applies), even
 * while it is ready now: a request its server refused as a replica. */
void dlock__conn_hold(dlock__conn *conn, dlock__req *req);
/* Drop conn (requests in flight fail with DLOCK_EIO, why) and reconnect. */
void dlock__conn_drop(dlock__conn *conn, const char *why);
/* Write what is buffered: called once per loop turn. */
void dlock__conn_flush(dlock__conn *conn);
/* Fail everything with status and close the socket for good. */
void dlock__conn_shutdown(dlock__conn *conn, int status);

#endif /* DLOCK_NET_CONN_H */
