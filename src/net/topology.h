/* A topology: how a client's requests reach its servers.
 *
 * Standalone, cluster and sentinel are peers behind this one table. The
 * engine calls it and never asks which topology it has: it routes a
 * request, hands it the error answers the reply policy classified, tells
 * it of a connection lost, and reads its slot map. Every operation
 * runs on the engine thread unless it says otherwise. */
#ifndef DLOCK_NET_TOPOLOGY_H
#define DLOCK_NET_TOPOLOGY_H

#include "net/conn.h"
#include "base/policy.h"

#define DLOCK__SLOTS 16384   /* a cluster's hash slots */
#define DLOCK__MAX_NODES 128 /* the most nodes a cluster client talks to */

struct dlock__topology {
  const char *name;
  /* most nodes the client may talk to (the direct path's pools) */
  int nodes;
  /* the keys route by hash slot over several masters: a name's hash tag
   * decides its master, a keyless call picks a node, renewals batch per
   * node, SCAN walks each master */
  int slotted;

  /* Caller's thread, after the URI and the options are read: the
   * topology's state (a sentinel's first master search blocks here).
   * DLOCK_OK or an error with its message; free is called either way. */
  int (*open)(dlock__net *net);
  void (*free)(dlock__net *net);
  /* Its timers and connections on the engine's loop, before start. */
  void (*attach)(dlock__net *net);
  void (*start)(dlock__net *net);
  /* Each loop turn: what its connections have queued is written. */
  void (*flush)(dlock__net *net);
  /* The client closes: its requests end with status, its handles close. */
  void (*shutdown)(dlock__net *net, int status);

  /* Route req to a connection (or finish it with an error). */
  void (*send)(dlock__net *net, dlock__req *req);
  /* A request made while the client closes: written if it can be now,
   * else finished with DLOCK_ECLOSED. */
  void (*send_last)(dlock__net *net, dlock__req *req);
  /* An error answer of this class is the topology's to follow (a redirect,
   * a demoted master): the direct path hands such a call to the engine. */
  int (*follows)(dlock__class k);
  /* An error answer to req on conn: 1 when the topology took it (and the
   * reply: redirected, parked or finished), 0 when it is req's answer. */
  int (*on_error)(dlock__conn *conn, dlock__req *req, redisReply *reply);
  /* conn, a command or pub/sub connection of the client (not one with an
   * on_down of its own), was lost. */
  void (*conn_down)(dlock__conn *conn);
  /* conn is about to connect: its address may change here. */
  void (*pick)(dlock__conn *conn);
  /* The pub/sub connection of a channel; after a MOVED answer to a
   * subscription, the node it names (NULL: none known). */
  dlock__conn *(*sub_conn)(dlock__net *net, const char *channel, size_t len);
  dlock__conn *(*moved_sub)(dlock__net *net, const char *err);
  /* The map of who serves what may be stale: read it again soon. */
  void (*refresh_soon)(dlock__net *net);
  /* The node a renewal batch of slot goes to; -1: one batch per slot. */
  int (*batch_node)(dlock__net *net, int slot);
  /* Any thread: the slot map the direct path reads (NULL: none). */
  const _Atomic int16_t *(*slot_map)(const dlock__net *net);

  /* The first request a new client makes (to see the servers answer), and
   * what its outcome rc means here: the rc to keep (a message set). */
  int (*contact)(dlock__net *net, dlock__req *req);
  int (*contact_rc)(dlock__net *net, int rc);
};

/* The topology a parsed URI names. */
const dlock__topology *dlock__topology_of(const dlock__uri *u);

/* Standalone's operations (each the table's slot of that name), which
 * Sentinel's table reuses for the master it found. */
void dlock__standalone_attach(dlock__net *net);
void dlock__standalone_start(dlock__net *net);
void dlock__standalone_send(dlock__net *net, dlock__req *req);
void dlock__standalone_send_last(dlock__net *net, dlock__req *req);
void dlock__standalone_pick(dlock__conn *conn);
dlock__conn *dlock__standalone_sub_conn(dlock__net *net, const char *channel,
                                        size_t len);
dlock__conn *dlock__standalone_moved_sub(dlock__net *net, const char *err);
void dlock__standalone_refresh_soon(dlock__net *net);
int dlock__standalone_batch_node(dlock__net *net, int slot);
const _Atomic int16_t *dlock__standalone_slot_map(const dlock__net *net);
int dlock__standalone_contact(dlock__net *net, dlock__req *req);
int dlock__standalone_contact_rc(dlock__net *net, int rc);

/* The slots of a table whose one master is reached as one server is
 * (standalone's and Sentinel's): its routing, pub/sub and first contact. */
#define DLOCK__ONE_MASTER                                                     \
    .nodes = 1,                                                              \
    .slotted = 0,                                                            \
    .send = dlock__standalone_send,                                          \
    .send_last = dlock__standalone_send_last,                                \
    .pick = dlock__standalone_pick,                                          \
    .sub_conn = dlock__standalone_sub_conn,                                  \
    .moved_sub = dlock__standalone_moved_sub,                                \
    .refresh_soon = dlock__standalone_refresh_soon,                          \
    .batch_node = dlock__standalone_batch_node,                              \
    .slot_map = dlock__standalone_slot_map,                                  \
    .contact = dlock__standalone_contact,                                    \
    .contact_rc = dlock__standalone_contact_rc

extern const dlock__topology dlock__standalone_topology;
extern const dlock__topology dlock__cluster_topology;
extern const dlock__topology dlock__sentinel_topology;

#endif /* DLOCK_NET_TOPOLOGY_H */
