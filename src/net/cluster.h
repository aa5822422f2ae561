/* The cluster topology (docs/cluster.md): which node serves a request.
 *
 * A client opened on a redis+cluster:// URI learns the slot map from its
 * seed nodes (CLUSTER SHARDS, or CLUSTER SLOTS on servers without it), keeps
 * one command connection per master it talks to, routes every request by
 * the hash slot of its keys, follows MOVED and ASK, parks a request that
 * met TRYAGAIN or CLUSTERDOWN and sends it again within its budget, and
 * refreshes the map on MOVED, on a connection that fails, and periodically.
 * A standalone client has no topology: every request goes to its one
 * command connection. Engine thread only, except where said. */
#ifndef DLOCK_NET_CLUSTER_H
#define DLOCK_NET_CLUSTER_H

#include "core/engine.h"

#define DLOCK__SLOTS 16384
#define DLOCK__MAX_NODES 128

typedef struct dlock__node {
  char host[256];
  int port;
  dlock__conn cmd; /* both start on first use */
  dlock__conn sub; /* sharded pub/sub: the channels of its slots */
} dlock__node;

struct dlock__cluster {
  dlock__node *nodes[DLOCK__MAX_NODES]; /* never moved or freed before the
                                          client: connections live inside */
  int nnodes;
  _Atomic int16_t slots[DLOCK__SLOTS]; /* the slot map: node index, -1
                                          unknown; written on the engine
                                          thread, read by the direct path
                                          on any (dlock__cluster_slots) */
  int map_known;               /* a map has been read */
  int refreshing;              /* a map request is in flight */
  int refresh_again;           /* another was asked for meanwhile */
  int bare_master;             /* with the replica guard on, the last map
                                  showed a master without a replica (after a
                                  failover, before the old master is back
                                  as its replica): the map is read every
                                  second, not every 10 s, so the guard's
                                  count follows the replica's return */
  int no_shards;               /* the servers lack CLUSTER SHARDS */
  int next_ask;                /* the node the next map request goes to */
  int sub_node;                /* the node the pub/sub connection uses */
  int64_t last_refresh_ms;
  uv_timer_t timer;            /* periodic refresh and parked requests */
  dlock__req *parked, *parked_tail;
  char last_error[1536];       /* why the last map request failed */
};

/* client.c: allocate c->cluster for a cluster URI. DLOCK_OK/ENOMEM. */
int dlock__cluster_new(dlock_client *c);
/* The slot map (node index per slot, -1 unknown; atomic: read it from any
 * thread), or NULL when c is not a cluster client. */
const _Atomic int16_t *dlock__cluster_slots(const dlock_client *c);
void dlock__cluster_free(dlock_client *c);
/* engine.c: handles on the loop (attach), first map request (start), the
 * write of every connection (flush), close (shutdown). */
void dlock__cluster_attach(dlock_client *c);
void dlock__cluster_start(dlock_client *c);
void dlock__cluster_flush(dlock_client *c);
void dlock__cluster_shutdown(dlock_client *c, int status);

/* Send req to the node that serves it (the command connection on a
 * standalone client). */
void dlock__send(dlock_client *c, dlock__req *req);

/* conn.c: reply is an error reply to req from conn. 1 when it was a
 * cluster redirect or a transient cluster state and req was taken (sent
 * elsewhere, parked, or finished with a clear error); 0 otherwise. */
int dlock__cluster_on_error(dlock__conn *conn, dlock__req *req,
                            redisReply *reply);
/* pubsub.c: the pub/sub connection for channel (started when new): on a
 * cluster with sharded pub/sub the one of the node that owns the channel's
 * slot, else the client's one. */
dlock__conn *dlock__sub_conn(dlock_client *c, const char *channel, size_t len);
/* pubsub.c: an SSUBSCRIBE was answered "MOVED slot host:port": that node's
 * pub/sub connection (the map learns the slot's owner), or NULL. */
dlock__conn *dlock__cluster_moved_sub(dlock_client *c, const char *err);
/* watchdog.c: the node whose renewals of slot's holds may share one call
 * with other slots of that node (a cluster on Redis 7 or later, the owner
 * known), or -1: renew them in calls of their own slot. */
int dlock__cluster_batch_node(dlock_client *c, int slot);
/* Read the slot map again soon (nothing on a standalone client). */
void dlock__cluster_refresh_soon(dlock_client *c);
/* conn.c: a command connection failed: the map may have changed. */
void dlock__cluster_conn_down(dlock__conn *conn);
/* conn.c: where a connection goes, before each connect (the pub/sub
 * connection follows the map: a node that answers). */
void dlock__cluster_pick(dlock__conn *conn);

#endif /* DLOCK_NET_CLUSTER_H */
