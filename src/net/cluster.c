/* The cluster topology (docs/cluster.md; its table: net/topology.h).
 *
 * A client opened on a redis+cluster:// URI learns the slot map from its
 * seed nodes (CLUSTER SHARDS, or CLUSTER SLOTS on servers without it), keeps
 * one command connection per master it talks to, routes every request by
 * the hash slot of its keys, follows MOVED and ASK, parks a request that
 * met TRYAGAIN or CLUSTERDOWN and sends it again within its budget, and
 * refreshes the map on MOVED, on a connection that fails, and periodically.
 * Engine thread only, except where said. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/topology.h"

#define REFRESH_PERIOD_MS 10000 /* a map older than this is read again */
#define REFRESH_MIN_GAP_MS 100  /* MOVED storms: at most one read per gap */
#define REFRESH_BARE_MS 1000    /* a master without replicas: k->bare_master */
#define MAX_REDIRECTS 16        /* MOVED/ASK/TRYAGAIN followed per request */
#define RETRY_FIRST_MS 10       /* TRYAGAIN/CLUSTERDOWN: first pause */
#define RETRY_MAX_MS 200

typedef struct dlock__node {
  char host[256];
  int port;
  dlock__conn cmd; /* both start on first use */
  dlock__conn sub; /* sharded pub/sub: the channels of its slots */
} dlock__node;

typedef struct dlock__cluster {
  dlock__node *nodes[DLOCK__MAX_NODES]; /* never moved or freed before the
                                          client: connections live inside */
  int nnodes;
  _Atomic int16_t slots[DLOCK__SLOTS]; /* the slot map: node index, -1
                                          unknown; written on the engine
                                          thread, read by the direct path
                                          on any (slot_map) */
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
} dlock__cluster;

#define CLUSTER(net) ((dlock__cluster *)(net)->topo_state)

static void refresh(dlock__net *net);
static void refresh_soon(dlock__net *net);
static void tick(uv_timer_t *t);
static void route(dlock__net *net, dlock__req *req);

static int cluster_open(dlock__net *net) {
  dlock__cluster *k = calloc(1, sizeof *k);
  if (k == NULL)
    return dlock__oom();
  for (int i = 0; i < DLOCK__SLOTS; i++)
    k->slots[i] = -1;
  net->topo_state = k;
  /* its pub/sub: sharded unless the URI says ?pubsub=classic
   * (docs/cluster.md) or the cluster is older than Redis 7 (contact_rc) */
  atomic_store(&net->sharded, net->uri->pubsub != DLOCK__PUBSUB_CLASSIC);
  return DLOCK_OK;
}

static void cluster_free(dlock__net *net) {
  dlock__cluster *k = CLUSTER(net);
  if (k == NULL)
    return;
  for (int i = 0; i < k->nnodes; i++)
    free(k->nodes[i]);
  free(k);
  net->topo_state = NULL;
}

/* The node at host:port, added when new (-1: the table is full). */
static int node_at(dlock__net *net, const char *host, size_t hlen, int port) {
  dlock__cluster *k = CLUSTER(net);
  if (hlen >= sizeof k->nodes[0]->host)
    return -1;
  for (int i = 0; i < k->nnodes; i++)
    if (k->nodes[i]->port == port && strlen(k->nodes[i]->host) == hlen &&
        memcmp(k->nodes[i]->host, host, hlen) == 0)
      return i;
  if (k->nnodes == DLOCK__MAX_NODES)
    return -1;
  dlock__node *n = calloc(1, sizeof *n);
  if (n == NULL)
    return -1;
  memcpy(n->host, host, hlen);
  n->port = port;
  dlock__conn_init(net, &n->cmd, 0);
  n->cmd.host = n->host;
  n->cmd.port = n->port;
  n->cmd.link = net->hooks->node(net, k->nnodes, n->host, n->port);
  dlock__conn_init(net, &n->sub, 1);
  n->sub.host = n->host;
  n->sub.port = n->port;
  k->nodes[k->nnodes] = n;
  return k->nnodes++;
}

/* A MOVED answer: slot is served by node to now (for the direct path
 * too: it reads this map). */
static void set_owner(dlock__net *net, int slot, int to) {
  atomic_store_explicit(&CLUSTER(net)->slots[slot], (int16_t)to,
                        memory_order_relaxed);
}

static const _Atomic int16_t *slot_map(const dlock__net *net) {
  return CLUSTER(net)->slots;
}

static dlock__conn *node_cmd(dlock__net *net, int i) {
  dlock__conn *conn = &CLUSTER(net)->nodes[i]->cmd;
  dlock__conn_use(conn);
  return conn;
}

/* A node for a request without a key (or a slot nobody owns yet): one whose
 * connection is up, else the next one to ask; -1 when none is known. */
static int any_node(dlock__net *net) {
  dlock__cluster *k = CLUSTER(net);
  if (k->nnodes == 0)
    return -1;
  for (int i = 0; i < k->nnodes; i++)
    if (k->nodes[i]->cmd.started && k->nodes[i]->cmd.state == CONN_READY)
      return i;
  return k->next_ask % k->nnodes;
}

static void attach(dlock__net *net) {
  dlock__cluster *k = CLUSTER(net);
  uv_timer_init(net->loop, &k->timer);
  k->timer.data = net;
  net->live++;
  for (int i = 0; i < net->uri->nseeds; i++)
    node_at(net, net->uri->seed_hosts[i], strlen(net->uri->seed_hosts[i]),
            net->uri->seed_ports[i]);
}

/* ---- sending --------------------------------------------------------------- */

static void route(dlock__net *net, dlock__req *req) {
  dlock__cluster *k = CLUSTER(net);
  if (req->slot == DLOCK__SLOT_CROSS) {
    dlock__req_finish(req, NULL, DLOCK_EINVAL,
                      "the keys of this call hash to different cluster slots: "
                      "a name with a {hash tag} that Redisson's key layout "
                      "leaves unwrapped (docs/cluster.md, \"Names\")");
    return;
  }
  int i = req->slot >= 0 ? k->slots[req->slot] : -1;
  if (i < 0)
    i = any_node(net);
  if (i < 0 || i >= k->nnodes) {
    dlock__req_finish(req, NULL, DLOCK_EIO, "cluster: no node known");
    return;
  }
  dlock__conn_send(node_cmd(net, i), req);
}

static void flush(dlock__net *net) {
  dlock__cluster *k = CLUSTER(net);
  dlock__conn_start_wanted(&net->sub);
  for (int i = 0; i < k->nnodes; i++) {
    dlock__conn_start_wanted(&k->nodes[i]->cmd);
    dlock__conn_start_wanted(&k->nodes[i]->sub);
    if (k->nodes[i]->cmd.started)
      dlock__conn_flush(&k->nodes[i]->cmd);
    if (k->nodes[i]->sub.started)
      dlock__conn_flush(&k->nodes[i]->sub);
  }
}

static void on_timer_closed(uv_handle_t *h) {
  dlock__net *net = h->data;
  net->hooks->live_done(net);
}

static void close_all(dlock__net *net, int status) {
  dlock__cluster *k = CLUSTER(net);
  dlock__req *req;
  while ((req = k->parked) != NULL) {
    k->parked = req->next;
    dlock__req_finish(req, NULL, status, "client closed");
  }
  k->parked_tail = NULL;
  for (int i = 0; i < k->nnodes; i++) {
    dlock__conn_shutdown(&k->nodes[i]->cmd, status);
    dlock__conn_shutdown(&k->nodes[i]->sub, status);
  }
  uv_close((uv_handle_t *)&k->timer, on_timer_closed);
}

/* ---- parked requests and the timer ------------------------------------------ */

/* How old a map may get before it is read again. */
static int64_t refresh_period(const dlock__cluster *k) {
  return k->bare_master ? REFRESH_BARE_MS : REFRESH_PERIOD_MS;
}

static void arm(dlock__net *net) {
  dlock__cluster *k = CLUSTER(net);
  if (net->stopping)
    return;
  int64_t now = dlock__now_ms();
  /* the next map read is armed when the one in flight ends (map_done) */
  int64_t due =
      k->refreshing ? INT64_MAX : k->last_refresh_ms + refresh_period(k);
  for (dlock__req *r = k->parked; r; r = r->next)
    if (r->retry_at < due)
      due = r->retry_at;
  if (due == INT64_MAX) {
    uv_timer_stop(&k->timer);
    return;
  }
  uv_timer_start(&k->timer, tick, due > now ? (uint64_t)(due - now) : 0, 0);
}

static void tick(uv_timer_t *t) {
  dlock__net *net = t->data;
  dlock__cluster *k = CLUSTER(net);
  if (net->stopping)
    return;
  int64_t now = dlock__now_ms();
  dlock__req *due = NULL, *due_tail = NULL, *keep = NULL, *keep_tail = NULL;
  for (dlock__req *r = k->parked, *next; r; r = next) {
    next = r->next;
    if (r->retry_at <= now)
      dlock__req_push(&due, &due_tail, r);
    else
      dlock__req_push(&keep, &keep_tail, r);
  }
  k->parked = keep;
  k->parked_tail = keep_tail;
  for (dlock__req *r = due, *next; r; r = next) {
    next = r->next;
    r->next = NULL;
    route(net, r);
  }
  if (now >= k->last_refresh_ms + refresh_period(k))
    refresh(net);
  arm(net);
}

static void start(dlock__net *net) { refresh(net); }

/* ---- the slot map -------------------------------------------------------------- */

static const redisReply *field(const redisReply *map, const char *name) {
  if (map->type != REDIS_REPLY_ARRAY)
    return NULL;
  for (size_t i = 0; i + 1 < map->elements; i += 2)
    if (map->element[i]->type == REDIS_REPLY_STRING &&
        strcmp(map->element[i]->str, name) == 0)
      return map->element[i + 1];
  return NULL;
}

static int is_str(const redisReply *r, const char *s) {
  return r && r->type == REDIS_REPLY_STRING && strcmp(r->str, s) == 0;
}

/* A node's address from its reply fields; an empty or unknown ("?")
 * endpoint means "the address you asked" (asked). */
static int addr_node(dlock__net *net, const redisReply *host, long long port,
                     int asked) {
  const char *h = NULL;
  size_t hl = 0;
  if (host && host->type == REDIS_REPLY_STRING && host->len > 0 &&
      strcmp(host->str, "?") != 0) {
    h = host->str;
    hl = host->len;
  } else {
    h = CLUSTER(net)->nodes[asked]->host;
    hl = strlen(h);
  }
  if (port <= 0 || port > 65535)
    return -1;
  return node_at(net, h, hl, (int)port);
}

/* Node i's command connection failed and has not come back: its last
 * connect failed (it is backing off), after it was used. */
static int unreachable(dlock__net *net, int i) {
  const dlock__conn *cmd = &CLUSTER(net)->nodes[i]->cmd;
  return cmd->started && cmd->state != CONN_READY && cmd->backoff_ms > 0;
}

/* CLUSTER SHARDS: [ [ "slots", [s, e, ...], "nodes", [ {id, port, ip,
 * endpoint, role, health, ...}, ... ] ], ... ] (maps as flat arrays).
 * replicas[master]: its replicas not "failed" (a replica that has had no
 * write to copy yet says "loading", as CLUSTER SLOTS lists it). */
static int read_shards(dlock__net *net, const redisReply *r, int asked,
                       int16_t *slots, int *replicas) {
  if (r->type != REDIS_REPLY_ARRAY)
    return 0;
  for (size_t s = 0; s < r->elements; s++) {
    const redisReply *range = field(r->element[s], "slots");
    const redisReply *nodes = field(r->element[s], "nodes");
    if (!range || !nodes || range->type != REDIS_REPLY_ARRAY ||
        nodes->type != REDIS_REPLY_ARRAY)
      return 0;
    int owner = -1, up = 0, owner_bad = 0;
    for (size_t n = 0; n < nodes->elements; n++) {
      const redisReply *node = nodes->element[n];
      /* a TLS client takes the node's TLS port: CLUSTER SHARDS lists
       * both ("port" only when a plain one is open) */
      const redisReply *port = net->uri->tls ? field(node, "tls-port") : NULL;
      if (port == NULL)
        port = field(node, "port");
      int failed = is_str(field(node, "health"), "failed");
      if (is_str(field(node, "role"), "replica") && !failed)
        up++;
      if ((owner >= 0 && !owner_bad) || !is_str(field(node, "role"), "master") ||
          !port || port->type != REDIS_REPLY_INTEGER)
        continue;
      const redisReply *ep = field(node, "endpoint");
      if (!ep || ep->type != REDIS_REPLY_STRING || ep->len == 0 ||
          strcmp(ep->str, "?") == 0)
        ep = field(node, "ip");
      /* A shard may list its old master beside the promoted one, both
       * "master" (Valkey 8 does after a takeover, still "online" until the
       * node times out): a master that is failed, or that this client
       * cannot reach, gives way to another. */
      int at = addr_node(net, ep, port->integer, asked);
      int bad = at < 0 || failed || unreachable(net, at);
      if (at >= 0 && (owner < 0 || !bad)) {
        owner = at;
        owner_bad = bad;
      }
    }
    if (owner < 0)
      continue; /* a shard without a master now (failover under way) */
    replicas[owner] = up;
    for (size_t i = 0; i + 1 < range->elements; i += 2) {
      long long a = range->element[i]->integer, b = range->element[i + 1]->integer;
      for (long long x = a; x <= b && x < DLOCK__SLOTS; x++)
        if (x >= 0)
          slots[x] = (int16_t)owner;
    }
  }
  return 1;
}

/* CLUSTER SLOTS: [ [start, end, [ip, port, id, ...], replicas...], ... ]
 * (the replicas it lists are the ones not failed) */
static int read_slots(dlock__net *net, const redisReply *r, int asked,
                      int16_t *slots, int *replicas) {
  if (r->type != REDIS_REPLY_ARRAY)
    return 0;
  for (size_t s = 0; s < r->elements; s++) {
    const redisReply *e = r->element[s];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2)
      return 0;
    const redisReply *m = e->element[2];
    int owner = addr_node(net, m->element[0], m->element[1]->integer, asked);
    if (owner < 0)
      continue;
    replicas[owner] = (int)e->elements - 3;
    for (long long x = e->element[0]->integer;
         x <= e->element[1]->integer && x < DLOCK__SLOTS; x++)
      if (x >= 0)
        slots[x] = (int16_t)owner;
  }
  return 1;
}

/* Requests waiting for node from's command connection (not up) that can be
 * served elsewhere now go there: one whose slot has another owner in the
 * map (a promoted replica) to it, one that could go anywhere (the map
 * request, a keyless call, a slot nobody is known to own) to another node;
 * the others wait for this node or for a new map. */
static void move_waiting(dlock__net *net, int from) {
  dlock__cluster *k = CLUSTER(net);
  dlock__conn *conn = &k->nodes[from]->cmd;
  dlock__req *req = conn->waiting, *keep = NULL, *keep_tail = NULL;
  conn->waiting = conn->waiting_tail = NULL;
  while (req) {
    dlock__req *next = req->next;
    int to = req->slot >= 0 ? k->slots[req->slot] : -1;
    if (to < 0) {
      to = any_node(net);
      if (to == from)
        to = (to + 1) % k->nnodes;
    }
    if (to != from && req->slot >= 0) /* its slot's new owner: redirected */
      dlock__stat_add(net->stats, DLOCK__ST_REDIRECTS, 1);
    if (to != from)
      dlock__conn_send(node_cmd(net, to), req);
    else
      dlock__req_push(&keep, &keep_tail, req);
    req = next;
  }
  conn->waiting = keep;
  conn->waiting_tail = keep_tail;
}

/* After a new map: what waits for a node that is down (a failed master)
 * goes where it can be served, within its budget. */
static void reroute_waiting(dlock__net *net) {
  dlock__cluster *k = CLUSTER(net);
  for (int i = 0; i < k->nnodes; i++)
    if (k->nodes[i]->cmd.state != CONN_READY && k->nodes[i]->cmd.waiting)
      move_waiting(net, i);
}

typedef struct map_req {
  dlock__req req;
  dlock__net *net;
  int asked;
  int shards;
} map_req;

static void map_done(dlock__req *req, redisReply *reply, int status) {
  map_req *m = (map_req *)req;
  dlock__net *net = m->net;
  dlock__cluster *k = CLUSTER(net);
  k->refreshing = 0;
  int ok = 0;
  if (status == DLOCK_OK && reply->type == REDIS_REPLY_ERROR) {
    if (m->shards && (strstr(reply->str, "unknown subcommand") ||
                      strstr(reply->str, "Unknown subcommand"))) {
      k->no_shards = 1; /* before Redis 7: ask again with CLUSTER SLOTS */
      k->refresh_again = 1;
    }
    snprintf(k->last_error, sizeof k->last_error, "%s", reply->str);
  } else if (status == DLOCK_OK) {
    int16_t *slots = malloc(DLOCK__SLOTS * sizeof *slots);
    int replicas[DLOCK__MAX_NODES];
    for (int i = 0; i < DLOCK__MAX_NODES; i++)
      replicas[i] = -1;
    if (slots) {
      for (int i = 0; i < DLOCK__SLOTS; i++)
        slots[i] = -1;
      ok = m->shards ? read_shards(net, reply, m->asked, slots, replicas)
                     : read_slots(net, reply, m->asked, slots, replicas);
      if (ok) {
        k->bare_master = 0;
        for (int i = 0; i < k->nnodes; i++) /* the replica guard's counts */
          if (replicas[i] >= 0) {
            atomic_store(&k->nodes[i]->cmd.link->replicas, replicas[i]);
            k->bare_master |=
                replicas[i] == 0 && net->opts->replica_sync_ms > 0;
          }
        /* a slot the reply left without a master keeps its old owner:
         * requests there get MOVED or fail over as the cluster decides */
        for (int i = 0; i < DLOCK__SLOTS; i++)
          if (slots[i] >= 0)
            atomic_store_explicit(&k->slots[i], slots[i], memory_order_relaxed);
        k->map_known = 1;
        k->last_error[0] = '\0';
        reroute_waiting(net);
        if (atomic_load(&net->sharded))
          net->hooks->rehome(net);
      }
      free(slots);
    }
  } else {
    snprintf(k->last_error, sizeof k->last_error, "%s", req->errmsg);
  }
  if (reply)
    freeReplyObject(reply);
  if (!ok)
    k->next_ask++; /* the next map request asks another node */
  free(m);
  if (!net->stopping && k->refresh_again) {
    k->refresh_again = 0;
    refresh_soon(net);
  }
  arm(net);
}

/* Ask a node for the slot map (one request at a time). */
static void refresh(dlock__net *net) {
  dlock__cluster *k = CLUSTER(net);
  if (net->stopping)
    return;
  if (k->refreshing) {
    k->refresh_again = 1;
    return;
  }
  map_req *m = calloc(1, sizeof *m);
  if (m == NULL)
    return; /* the next tick tries again */
  const char *argv[] = {"CLUSTER", k->no_shards ? "SLOTS" : "SHARDS"};
  size_t lens[] = {7, k->no_shards ? 5u : 6u};
  if (dlock__req_command(&m->req, 2, argv, lens) != DLOCK_OK) {
    free(m);
    return;
  }
  m->net = net;
  m->shards = !k->no_shards;
  m->asked = any_node(net);
  if (m->asked < 0) {
    dlock__buf_free(&m->req.cmd);
    free(m);
    return;
  }
  m->req.done = map_done;
  m->req.queued_ms = dlock__now_ms();
  k->refreshing = 1;
  k->last_refresh_ms = m->req.queued_ms;
  dlock__conn_send(node_cmd(net, m->asked), &m->req);
  arm(net);
}

/* A refresh soon, but not more than one per REFRESH_MIN_GAP_MS. */
static void refresh_soon(dlock__net *net) {
  dlock__cluster *k = CLUSTER(net);
  int64_t now = dlock__now_ms();
  if (now >= k->last_refresh_ms + REFRESH_MIN_GAP_MS)
    refresh(net);
  else if (k->last_refresh_ms + refresh_period(k) > now + REFRESH_MIN_GAP_MS) {
    k->last_refresh_ms = now + REFRESH_MIN_GAP_MS - refresh_period(k);
    arm(net);
  }
}

/* ---- redirects ----------------------------------------------------------------- */

static void asking_done(dlock__req *req, redisReply *reply, int status) {
  (void)status;
  if (reply)
    freeReplyObject(reply);
  free(req);
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381": the slot and
 * the target node's index, or -1. */
static int target(dlock__net *net, const char *err, int *slot) {
  const char *p = strchr(err, ' ');
  if (p == NULL)
    return -1;
  char *end;
  long s = strtol(p + 1, &end, 10);
  if (end == p + 1 || *end != ' ' || s < 0 || s >= DLOCK__SLOTS)
    return -1;
  const char *addr = end + 1;
  const char *colon = strrchr(addr, ':');
  if (colon == NULL)
    return -1;
  long port = strtol(colon + 1, NULL, 10);
  *slot = (int)s;
  const char *h = addr;
  size_t hl = (size_t)(colon - addr);
  if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
    h++;
    hl -= 2;
  }
  if (hl == 0) { /* an unknown endpoint: the node that answered */
    return -1;
  }
  if (port <= 0 || port > 65535)
    return -1;
  return node_at(net, h, hl, (int)port);
}

static int on_error(dlock__conn *conn, dlock__req *req, redisReply *reply) {
  dlock__net *net = conn->net;
  dlock__cluster *k = CLUSTER(net);
  if (req->task)
    return 0;
  const char *e = reply->str;
  dlock__class answer = dlock__classify(reply);
  int moved = answer == DLOCK__C_MOVED;
  int again = answer == DLOCK__C_TRYAGAIN || answer == DLOCK__C_CLUSTERDOWN;
  if (!dlock__class_cluster(answer))
    return 0;
  if (++req->redirects > MAX_REDIRECTS ||
      (again && dlock__now_ms() - req->queued_ms >= net->opts->command_timeout_ms)) {
    char why[1024];
    snprintf(why, sizeof why, "cluster: %s%s (after %d tries)",
             again ? "still " : "", e, req->redirects);
    freeReplyObject(reply);
    dlock__req_finish(req, NULL, DLOCK_EIO, why);
    return 1;
  }
  if (again) {
    /* a multi-key call meets a slot being migrated, or the cluster has
     * lost a shard: pause (doubling) and send again, within the budget */
    int64_t pause = RETRY_FIRST_MS << (req->redirects < 6 ? req->redirects - 1 : 5);
    req->retry_at = dlock__now_ms() + (pause < RETRY_MAX_MS ? pause : RETRY_MAX_MS);
    freeReplyObject(reply);
    dlock__req_push(&k->parked, &k->parked_tail, req);
    refresh_soon(net);
    arm(net);
    return 1;
  }
  int slot = -1;
  int to = target(net, e, &slot);
  freeReplyObject(reply);
  dlock__stat_add(net->stats, DLOCK__ST_REDIRECTS, 1);
  if (to < 0) {
    dlock__req_finish(req, NULL, DLOCK_EIO, "cluster: a redirect to an "
                      "unknown address");
    return 1;
  }
  if (moved) {
    set_owner(net, slot, to);
    req->slot = slot; /* a request without a route has one now */
    refresh_soon(net);
    route(net, req);
    return 1;
  }
  /* ASK: this one request goes to the importing node, right after ASKING */
  dlock__req *asking = calloc(1, sizeof *asking);
  const char *argv[] = {"ASKING"};
  size_t lens[] = {6};
  if (asking == NULL || dlock__req_command(asking, 1, argv, lens) != DLOCK_OK) {
    free(asking);
    dlock__req_finish(req, NULL, DLOCK_ENOMEM, "out of memory");
    return 1;
  }
  asking->done = asking_done;
  asking->linger = 1;
  dlock__conn *to_conn = node_cmd(net, to);
  dlock__conn_send(to_conn, asking);
  dlock__conn_send(to_conn, req);
  return 1;
}

static void conn_down(dlock__conn *conn) {
  dlock__net *net = conn->net;
  dlock__cluster *k = CLUSTER(net);
  if (conn->is_sub || net->stopping) /* the waiters' own: pubsub.c's */
    return;
  k->next_ask++;
  for (int i = 0; i < k->nnodes; i++)
    if (&k->nodes[i]->cmd == conn)
      move_waiting(net, i);
  refresh_soon(net);
}

static void pick(dlock__conn *conn) {
  dlock__net *net = conn->net;
  dlock__cluster *k = CLUSTER(net);
  if (conn != &net->sub || k->nnodes == 0)
    return;
  /* after a failure, the next node; a node that answers commands first */
  int i = conn->backoff_ms > 0 ? (k->sub_node + 1) % k->nnodes : k->sub_node;
  for (int j = 0; j < k->nnodes; j++) {
    int n = (i + j) % k->nnodes;
    if (k->nodes[n]->cmd.started && k->nodes[n]->cmd.state == CONN_READY) {
      i = n;
      break;
    }
  }
  k->sub_node = i;
  conn->host = k->nodes[i]->host;
  conn->port = k->nodes[i]->port;
}

static dlock__conn *sub_conn(dlock__net *net, const char *channel,
                             size_t len) {
  dlock__cluster *k = CLUSTER(net);
  if (!atomic_load(&net->sharded))
    return dlock__standalone_sub_conn(net, channel, len);
  int i = k->slots[dlock__key_slot(channel, len)];
  if (i < 0)
    i = any_node(net);
  if (i < 0)
    return dlock__standalone_sub_conn(net, channel, len);
  dlock__conn *conn = &k->nodes[i]->sub;
  dlock__conn_use(conn);
  return conn;
}

static dlock__conn *moved_sub(dlock__net *net, const char *err) {
  dlock__cluster *k = CLUSTER(net);
  int slot = -1;
  int to = target(net, err, &slot);
  if (to < 0)
    return NULL;
  set_owner(net, slot, to);
  refresh_soon(net);
  dlock__conn *conn = &k->nodes[to]->sub;
  dlock__conn_use(conn);
  return conn;
}

static void refresh_when_running(dlock__net *net) {
  if (!net->stopping)
    refresh_soon(net);
}

static int batch_node(dlock__net *net, int slot) {
  dlock__cluster *k = CLUSTER(net);
  if (k->no_shards || slot < 0 || slot >= DLOCK__SLOTS)
    return -1; /* before Redis 7 (no CLUSTER SHARDS): no cross-slot scripts */
  return k->slots[slot];
}

/* ---- the first contact ---------------------------------------------------- */

/* CLUSTER SHARDS, which a server that is not in cluster mode refuses, and
 * one before Redis 7 does not know. */
static int contact(dlock__net *net, dlock__req *req) {
  (void)net;
  const char *argv[] = {"CLUSTER", "SHARDS"};
  size_t lens[] = {7, 6};
  return dlock__req_command(req, 2, argv, lens);
}

static int contact_rc(dlock__net *net, int rc) {
  if (rc != DLOCK_EREDIS)
    return rc;
  if (strstr(dlock_errmsg(), "ubcommand")) {
    /* a cluster before Redis 7: no sharded pub/sub */
    net->uri->pubsub = DLOCK__PUBSUB_CLASSIC;
    atomic_store(&net->sharded, 0);
    return DLOCK_OK;
  }
  return dlock__fail_before(DLOCK_ECONFIG, "not a cluster node (a "
                            "redis+cluster:// URI needs servers with "
                            "cluster-enabled yes): ");
}

const dlock__topology dlock__cluster_topology = {
    .name = "cluster",
    .nodes = DLOCK__MAX_NODES,
    .slotted = 1,
    .open = cluster_open,
    .free = cluster_free,
    .attach = attach,
    .start = start,
    .flush = flush,
    .shutdown = close_all,
    .send = route,
    .send_last = route, /* its connections fail it when they close */
    .follows = dlock__class_cluster,
    .on_error = on_error,
    .conn_down = conn_down,
    .pick = pick,
    .sub_conn = sub_conn,
    .moved_sub = moved_sub,
    .refresh_soon = refresh_when_running,
    .batch_node = batch_node,
    .slot_map = slot_map,
    .contact = contact,
    .contact_rc = contact_rc,
};
