/* One server (net/topology.h): a command connection and a pub/sub one,
 * both to the URI's address. Sentinel's master is reached the same way. */
#include "net/topology.h"

void dlock__standalone_attach(dlock__net *net) {
  net->cmd.link = net->hooks->link(net, 0);
}

void dlock__standalone_start(dlock__net *net) {
  dlock__conn_start(&net->cmd);
  dlock__conn_start(&net->sub);
}

void dlock__standalone_send(dlock__net *net, dlock__req *req) {
  dlock__conn_send(&net->cmd, req);
}

void dlock__standalone_send_last(dlock__net *net, dlock__req *req) {
  if (net->cmd.state == CONN_READY)
    dlock__conn_send(&net->cmd, req); /* written below, failed by the close */
  else
    dlock__req_finish(req, NULL, DLOCK_ECLOSED, "client closed");
}

dlock__conn *dlock__standalone_sub_conn(dlock__net *net, const char *channel,
                                        size_t len) {
  (void)channel;
  (void)len;
  dlock__conn_use(&net->sub);
  return &net->sub;
}

int dlock__standalone_contact(dlock__net *net, dlock__req *req) {
  (void)net;
  const char *argv[] = {"PING"};
  size_t lens[] = {4};
  return dlock__req_command(req, 1, argv, lens);
}

static int open_nothing(dlock__net *net) {
  (void)net;
  return DLOCK_OK;
}

static void free_nothing(dlock__net *net) { (void)net; }

static void no_flush(dlock__net *net) { (void)net; }

void dlock__standalone_refresh_soon(dlock__net *net) { (void)net; }

static void no_shutdown(dlock__net *net, int status) {
  (void)net;
  (void)status;
}

static int no_follows(dlock__class k) {
  (void)k;
  return 0;
}

static int no_on_error(dlock__conn *conn, dlock__req *req, redisReply *r) {
  (void)conn;
  (void)req;
  (void)r;
  return 0;
}

static void no_conn_down(dlock__conn *conn) { (void)conn; }

void dlock__standalone_pick(dlock__conn *conn) { (void)conn; }

dlock__conn *dlock__standalone_moved_sub(dlock__net *net, const char *err) {
  (void)net;
  (void)err;
  return NULL;
}

int dlock__standalone_batch_node(dlock__net *net, int slot) {
  (void)net;
  (void)slot;
  return -1;
}

const _Atomic int16_t *dlock__standalone_slot_map(const dlock__net *net) {
  (void)net;
  return NULL;
}

int dlock__standalone_contact_rc(dlock__net *net, int rc) {
  (void)net;
  return rc;
}

const dlock__topology dlock__standalone_topology = {
    .name = "standalone",
    .open = open_nothing,
    .free = free_nothing,
    .attach = dlock__standalone_attach,
    .start = dlock__standalone_start,
    .flush = no_flush,
    .shutdown = no_shutdown,
    .follows = no_follows,
    .on_error = no_on_error,
    .conn_down = no_conn_down,
    DLOCK__ONE_MASTER,
};

const dlock__topology *dlock__topology_of(const dlock__uri *u) {
  switch (u->topology) {
  case DLOCK__URI_CLUSTER:
    return &dlock__cluster_topology;
  case DLOCK__URI_SENTINEL:
    return &dlock__sentinel_topology;
  default:
    return &dlock__standalone_topology;
  }
}
