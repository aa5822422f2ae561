/* The direct path's state (src/direct): the pooled connections, the lanes
 * riders drive, and the measures that choose between polling and sleeping,
 * riding and a connection each. The client holds one dlock__direct (core's
 * struct dlock_client); its calls are direct/direct.h's.
 *
 * A call that needs nothing the engine alone can give (a script call outside
 * a wait's early tries) is written and read by the calling thread itself, on
 * a connection it takes from the client's small pool for that one round trip:
 * no hop to the engine thread and back. The engine keeps pub/sub, the
 * watchdog, waits, and the pipeline for calls that find the pool busy. */
#ifndef DLOCK_DIRECT_POOL_H
#define DLOCK_DIRECT_POOL_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/base.h"
#include "net/conn.h"
#include "base/req.h"
#include "net/sock.h"

#define DLOCK__DIRECT_MAX 64

typedef struct dlock__dpool dlock__dpool;

typedef struct dlock__dconn {
  struct dlock__dconn *next; /* idle stack or busy list, under the pool's mu */
  struct dlock__dconn *prev; /* busy list only */
  dlock__dpool *pool;        /* the server's pool it belongs to */
  dlock__sock s;              /* its socket, TLS session and reply reader */
  unsigned discard; /* replies still to skip: DELs sent behind a release */
  dlock__buf later; /* DELs of unlock latches, sent in front of the next
                       call (in its write) */
  unsigned later_n; /* how many */
  dlock__buf hello; /* a new connection's AUTH, SELECT, CLIENT SETNAME: sent
                       in one write with its first call */
  unsigned hello_replies; /* their answers, read before that call's */
  int refused;      /* one of them was an error: the server's configuration
                       changed since the engine connected */
  unsigned gen;     /* the pool's gen when it was opened */
  struct dlock__dconn *swept; /* on the sweep's list (direct.c, sweep) */
} dlock__dconn;

/* A call riding one of a pool's shared connections (ride.c). */
enum { RIDE_WAIT, RIDE_DONE, RIDE_DRIVE };

typedef struct dlock__rider {
  struct dlock__rider *next;
  sem_t wake;         /* posted when its state changes from RIDE_WAIT (its
                         thread then reads it without the lane's mu) */
  int state;          /* RIDE_*, under the lane's mu */
  int status;         /* RIDE_DONE: DLOCK_OK with reply, or the failure */
  redisReply *reply;
  char *why;          /* the call's errmsg */
  size_t n;
  const char *cmd;    /* its command (the call's buffer) */
  size_t len;
  int64_t deadline_us;
  unsigned skip;      /* answers to skip before its own: latch DELs written
                         in front of it while earlier riders' replies were
                         still to come (ride.c, lane_gather) */
} dlock__rider;

/* A shared connection and the riders on it (ride.c): one rider
 * at a time drives it (writes what the others queued, in one write, and
 * reads the replies in order, handing each to its rider). */
#define DLOCK__LANES 8       /* shared connections per server, at most */
#define DLOCK__LANE_RIDERS 4 /* riders under way per lane opened */
typedef struct dlock__lane {
  pthread_mutex_t mu;      /* guards all of it */
  dlock__dconn *conn;      /* NULL: none open */
  int opening;             /* a rider opens it: the others use the engine */
  int driving;             /* a rider drives it now */
  dlock__rider *queued, *queued_last; /* to write */
  dlock__rider *sent, *sent_last;     /* written, replies not read yet */
  dlock__buf out;          /* the driver's write */
} dlock__lane;

/* The connections to one server: a standalone client's one, or one cluster
 * master (the same index as its node in net/cluster.c). */
struct dlock__dpool {
  dlock__dconn *idle;      /* ready for a call */
  dlock__dconn *busy;      /* taken by a call (the close shuts them down) */
  int open;                /* connections open or being opened */
  int64_t down_until_ms;   /* after a failed open: calls use the engine */
  int64_t backoff_ms;
  const char *host;        /* a cluster node's address, or host_buf (a
                              sentinel's master); NULL: the URI's */
  int port;
  char host_buf[256];
  unsigned gen;            /* bumped when the server moves: connections
                              opened before go (dlock__direct_retarget) */
  struct sockaddr_storage addr; /* where the last open succeeded */
  socklen_t addr_len;      /* 0: not resolved yet */
  dlock__link link;        /* what the engine's command connection to this
                              server tells of it (net/conn.h) */
  /* The shared connections (ride.c): calls made while every
   * direct connection is busy ride them, a few calls to each. */
  dlock__lane lanes[DLOCK__LANES];
};

/* When a direct call polls for its reply instead of sleeping (poll.c). */
#define DLOCK__POLL_KEEP 16
typedef struct dlock__poll {
  atomic_int_fast64_t rtt_us;    /* moving average of direct round trips */
  atomic_uint_fast64_t calls;    /* calls that could poll (rounds) */
  atomic_int on;                 /* polling pays now (auto mode) */
  atomic_int busy;               /* other tasks want every core: no poll */
  atomic_int taken_seen;         /* looks in a row that found them taken */
  pthread_mutex_t mu;            /* guards the measures below */
  int64_t ns[2][DLOCK__POLL_KEEP]; /* the last measured calls' thread CPU
                                    time: [0] slept for the reply, [1]
                                    polled (a ring each) */
  unsigned kept[2];              /* measures made of each way */
  int against;                   /* rounds in a row that said otherwise */
} dlock__poll;

/* One call's part in the measure. */
typedef struct dlock__poll_probe {
  int way;         /* -1 not measured; 0 slept, 1 polled */
  unsigned phase;  /* its place in the round */
  int64_t cpu0_ns; /* its thread's CPU time at the start */
} dlock__poll_probe;

/* Whether crowded calls ride the shared connection or take their own
 * (share.c). */
#define DLOCK__SHARE_FROM 4 /* calls under way from which a call is crowded */
typedef struct dlock__share {
  atomic_uint_fast64_t calls;     /* crowded calls so far (rounds) */
  atomic_int ride;                /* 1: crowded calls ride; 0: their own */
  atomic_int_fast64_t sum_us[2];  /* this round's measured calls: [0] on
                                     their own connection, [1] riding */
  atomic_int_fast64_t n[2];
  atomic_uint_fast64_t tried[2];  /* measured calls of each way, ever */
  atomic_int against;             /* rounds in a row that said otherwise */
} dlock__share;

typedef struct dlock__share_probe {
  int way;         /* -1 not measured; 0 its own connection, 1 riding */
  unsigned phase;  /* its place in the round */
  int64_t t0_us;
} dlock__share_probe;

typedef struct dlock__direct {
  pthread_mutex_t mu;      /* guards everything below but the atomics */
  dlock__dpool *pools;     /* 1, or DLOCK__MAX_NODES on a cluster */
  int npools;
  const _Atomic int16_t *slots; /* a cluster's slot map (net/cluster.c's
                              own, read here): the pool of each slot's
                              master, -1 unknown; NULL standalone */
  int closed;              /* the client closed: no new call goes direct */
  atomic_int active;       /* direct calls under way (a poll for a reply
                              stops when a second one starts) */
  atomic_int piped;        /* blocking calls in the engine's pipeline now */
  atomic_int waiting;      /* threads of this client waiting for a lock
                              (not a latch, not a semaphore's line: wait.c,
                              join): while any waits, calls keep to the
                              engine's pipeline (see direct.c) */
  dlock__poll poll;        /* when a call polls for its reply (poll.c) */
  dlock__share share;      /* when crowded calls ride (share.c) */
  atomic_uint_fast64_t calls, fallbacks; /* direct calls (rides among
                                            them); calls left to the engine
                                            (contention, a server down) */
  atomic_uint_fast64_t rides; /* of the calls, those made as riders */
  atomic_int sweep_armed;  /* the engine's latch sweep is due (direct.c) */
  dlock__req sweep_req;    /* the task that arms it */
} dlock__direct;

#endif
