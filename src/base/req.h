/* A request: the RESP bytes of one command, its route on a cluster, its
 * acknowledgement, and the completion the engine calls with its reply.
 * Built by any thread (a kind builds its tries and releases; core sends
 * them); carried and finished by a connection (net/conn.c) on the engine
 * thread. The vocabulary of the layers above and below the engine, so it
 * lives below both: nothing in it does I/O. */
#ifndef DLOCK_BASE_REQ_H
#define DLOCK_BASE_REQ_H

#include "base/base.h"
#include "dlock/client.h"

typedef struct dlock__req dlock__req;
/* Called on the engine thread exactly once: with the reply (callee owns it;
 * it may be an error reply) and DLOCK_OK, or with NULL and DLOCK_EIO /
 * DLOCK_ECLOSED. */
typedef void dlock__req_done(dlock__req *req, redisReply *reply, int status);

/* A write's acknowledgement: what the replica guard's WAIT and the durable
 * option's WAITAOF asked for and what the server answered (net/conn.h:
 * dlock__ack_plan). */
typedef struct dlock__ack {
  int wait_asked;   /* replicas WAIT asked for (0: no WAIT sent) */
  int waited;       /* replicas that acknowledged within the time; -1: the
                       server refused WAIT (an ACL without +wait) */
  int aof_asked;    /* 1: WAITAOF sent */
  int aof_local;    /* its first count: 1 when the server fsynced the write
                       within the time; -1: refused (errmsg says why) */
  int aof_replicas; /* its second: replicas that fsynced it */
  int bare;         /* 1: replica_sync_all, and the master counted no
                       replica: none could confirm the write */
} dlock__ack;

struct dlock__req {
  dlock__req *next;
  dlock__buf cmd;       /* RESP bytes; owned, freed by the engine when done */
  int script;           /* script id when cmd is an EVALSHA, else -1 */
  size_t script_tail;   /* offset of the numkeys argument in cmd */
  size_t argc;          /* number of RESP arguments in cmd */
  int64_t queued_ms, sent_ms;
  dlock__req_done *done;
  void (*task)(dlock_client *c, dlock__req *req); /* engine-thread task */
  void *arg;  /* the task's argument */
  void *data; /* the completion's */
  int linger; /* still written when the client closes (releases: harmless
                 and they spare the servers a lease's wait) */
  dlock__buf drop; /* a key the engine DELs once a non-error reply is in,
                      after handing the reply over (a release's latch) */
  /* Routing on a cluster (src/net/cluster.c): the hash slot of the keys,
   * DLOCK__SLOT_ANY (no key) or DLOCK__SLOT_CROSS (keys in two slots). */
  int slot;
  int redirects;    /* MOVED/ASK/TRYAGAIN answers followed so far */
  int64_t retry_at; /* parked after TRYAGAIN/CLUSTERDOWN, or a passing
                       refusal: resent then */
  /* A passing refusal (LOADING, BUSY, NOREPLICAS, MASTERDOWN, OOM: policy.h)
   * is sent again after a pause (net/conn.c) within the command timeout
   * from queued_ms; then the request fails with DLOCK_EIO and refused set:
   * it did not run. refusal_final: not sent again (the watchdog's
   * renewals: a renewal's worth fades as it waits, and the next tick sends
   * a fresh one). */
  int refusals;
  int64_t pause_ms;
  int refused;
  int refusal_final;
  /* The write's acknowledgement (dlock__ack_begin): the replica guard's
   * WAIT and the durable option's WAITAOF follow the script's reply on the
   * same connection. */
  int ack_wanted;   /* wanted (set by dlock__call inside a guard) */
  dlock__ack ack;   /* what they asked and got */
  int written;      /* its bytes went out (or may have): a failure after it
                       leaves its outcome unknown */
  char errmsg[1536]; /* failure detail, copied to the caller's thread */
};

/* What became of a request that failed, as the waiting recipe reads it:
 * not sent (it did not run), sent (it may have run: its answer was lost),
 * or refused by a passing state of the server (LOADING, BUSY, NOREPLICAS, OOM,
 * MASTERDOWN: it did not run, and the same call may succeed soon). */
enum { DLOCK__UNSENT = 0, DLOCK__SENT = 1, DLOCK__REFUSED = 2 };
int dlock__req_fate(const dlock__req *req);

/* Build an EVALSHA for script id into req->cmd (keys then args). */
int dlock__req_script(dlock__req *req, int script, size_t nkeys,
                      const char *const *keys, const size_t *klens,
                      size_t nargs, const char *const *args,
                      const size_t *alens);
/* The same without the keys' slot (left DLOCK__SLOT_ANY): for a server
 * that has none, where the CRC16 of every key is work for nothing (the
 * watchdog's calls of 100 keys). */
int dlock__req_script_unrouted(dlock__req *req, int script, size_t nkeys,
                               const char *const *keys, const size_t *klens,
                               size_t nargs, const char *const *args,
                               const size_t *alens);
/* DEL key on the same connection once req's reply is in and not an error
 * (a release's unlock latch, as Redisson deletes it): the caller does not
 * wait for it; the key's own expiry covers a client that dies first.
 * Call after building req. DLOCK_OK or DLOCK_ENOMEM. */
int dlock__req_drop_after(dlock__req *req, const char *key, size_t len);
/* Build a plain command (routed to any node on a cluster: give it a key
 * with dlock__req_route). */
int dlock__req_command(dlock__req *req, size_t argc, const char *const *argv,
                       const size_t *lens);
/* Route req by key's slot on a cluster. */
void dlock__req_route(dlock__req *req, const char *key, size_t len);

#define DLOCK__SLOT_ANY (-1)
#define DLOCK__SLOT_CROSS (-2)

/* Make req a task: run on the engine thread, which finishes it. */
void dlock__req_task(dlock__req *req,
                     void (*task)(dlock_client *c, dlock__req *req), void *arg);

/* Append req to the list head..tail (a connection's queues, the cluster's
 * parked requests). */
void dlock__req_push(dlock__req **head, dlock__req **tail, dlock__req *req);
/* Complete req (engine thread): status DLOCK_OK with reply, or an error. */
void dlock__req_finish(dlock__req *req, redisReply *reply, int status,
                       const char *why);
/* Turn req's EVALSHA into an EVAL of the script's body (a NOSCRIPT
 * answer). DLOCK_OK or DLOCK_ENOMEM. */
int dlock__req_to_eval(dlock__req *req);

#endif /* DLOCK_BASE_REQ_H */
