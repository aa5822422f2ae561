/* The pub/sub waiter: shared, refcounted subscriptions and counted wake-ups.
 *
 * All local waiters on one channel share one SUBSCRIBE on the client's pub/sub
 * connection; the last one out UNSUBSCRIBEs. Every (UN)SUBSCRIBE sent is
 * counted, so a channel is "confirmed" only when the server has answered the
 * last one, and a subscribe racing an unsubscribe is never confirmed early.
 * A message wakes as many waiters as the channel's wake function says; a
 * wake-up is a counter per waiter, so one that arrives between a failed try
 * and the wait is never lost. After a reconnect every live channel is
 * subscribed again and, once confirmed, all its waiters re-check. */
#include <stdlib.h>
#include <string.h>

#include "base/list.h"
#include "core/engine.h"
#include "net/topology.h"

typedef struct chan {
  dlock__map_node node;
  dlock__waiter *head, *tail;
  uint32_t refs;
  uint32_t ops;    /* (UN)SUBSCRIBEs sent and not answered yet */
  /* flags (a byte each: a fair lock's waiter has a channel of its own) */
  uint8_t last_sub;    /* the last one sent was a SUBSCRIBE */
  uint8_t confirmed;
  uint8_t recheck;     /* wake everyone once confirmed (after a reconnect) */
  uint8_t fifo;        /* only the head waiter tries (dlock__waiter.head) */
  uint8_t lease_hints; /* "-MS" messages say a new lease began */
  uint8_t denied;      /* the server's ACL refused its last SUBSCRIBE */
  uint8_t homeless;    /* a cluster moved its slot away: subscribe again on
                          the new owner once the new map is read */
  dlock__conn *conn; /* the pub/sub connection it is subscribed on */
  dlock__wake_fn *wake;
  size_t len;
  char name[];
} chan;

uint32_t dlock__wake_one(const char *msg, size_t len) { return 1; }
uint32_t dlock__wake_all(const char *msg, size_t len) { return UINT32_MAX; }

/* An (UN)SUBSCRIBE sent and not answered yet, in a connection's sub_fifo. */
typedef struct fifo_op {
  chan *ch;
  int subscribe;
} fifo_op;

static void send_op(dlock_client *c, chan *ch, int subscribe) {
  dlock__conn *conn = ch->conn;
  if (conn->state != CONN_READY) {
    dlock__conn_use(conn);
    return; /* pubsub_on_ready subscribes every live channel */
  }
  dlock__buf *b = &conn->out;
  int sharded = atomic_load(&c->net.sharded);
  const char *cmd = subscribe ? (sharded ? "SSUBSCRIBE" : "SUBSCRIBE")
                              : (sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE");
  const char *argv[] = {cmd, ch->name};
  size_t lens[] = {strlen(cmd), ch->len};
  if (dlock__resp_command(b, 2, argv, lens) != DLOCK_OK)
    return; /* out of memory: waiters fall back on their hints */
  ch->ops++;
  ch->last_sub = subscribe;
  if (subscribe)
    dlock__stat_add(&c->stats, DLOCK__ST_SUBSCRIBES, 1);
  /* replies come in order: remember whose this one will be */
  fifo_op op = {ch, subscribe};
  dlock__buf_add(&conn->sub_fifo, &op, sizeof op);
}

/* The oldest unanswered (UN)SUBSCRIBE on conn ({NULL} when none), left
 * there. */
static fifo_op fifo_head(dlock__conn *conn) {
  fifo_op op = {NULL, 0};
  if (conn->sub_fifo_head + sizeof op <= conn->sub_fifo.len)
    memcpy(&op, conn->sub_fifo.p + conn->sub_fifo_head, sizeof op);
  return op;
}

/* The channel the oldest unanswered (UN)SUBSCRIBE was for, or NULL. */
static chan *fifo_pop(dlock__conn *conn) {
  fifo_op op = fifo_head(conn);
  if (op.ch == NULL)
    return NULL;
  conn->sub_fifo_head += sizeof op;
  if (conn->sub_fifo_head == conn->sub_fifo.len)
    conn->sub_fifo.len = conn->sub_fifo_head = 0;
  return op.ch;
}

static void chan_free(dlock_client *c, chan *ch) {
  dlock__map_del(&c->channels, &ch->node);
  free(ch);
}

/* Tell w's thread (or, for an async waiter, its notify) to look again;
 * w->parker->mu held. */
dlock__early_hook_fn *_Atomic dlock__early_hook;

static void signal_waiter(dlock__waiter *w) {
  pthread_cond_signal(&w->parker->cv);
  if (w->notify)
    w->notify(w);
}

static void early_done(dlock__req *req, redisReply *reply, int status) {
  dlock__waiter *w = req->data;
  pthread_mutex_lock(&w->parker->mu);
  w->early->reply = reply;
  w->early->status = status;
  w->early->ack = req->ack;
  snprintf(w->early->err, sizeof w->early->err, "%s", req->errmsg);
  w->early_state = 2;
  pthread_cond_signal(&w->parker->cv);
  pthread_mutex_unlock(&w->parker->mu);
  free(req);
}

/* The armed waiter's last try, as a request of its own (parker->mu held). */
static dlock__req *early_req(dlock__waiter *w) {
  dlock__req *req = calloc(1, sizeof *req);
  if (req == NULL ||
      dlock__buf_add(&req->cmd, w->early->cmd.p, w->early->cmd.len) != DLOCK_OK) {
    free(req);
    return NULL; /* the thread tries by itself */
  }
  req->script = w->early->script;
  req->script_tail = w->early->tail;
  req->argc = w->early->argc;
  req->slot = w->early->slot;
  req->ack_wanted = w->early->ack_wanted;
  req->queued_ms = w->early->sent_ms = dlock__now_ms();
  req->done = early_done;
  req->data = w;
  w->armed = 0;
  w->early_state = 1;
  return req;
}

/* Wake w once (under its thread's mutex); an armed waiter's next try is
 * sent at once, on its behalf. */
static void wake(dlock_client *c, dlock__waiter *w, int confirm) {
  dlock__req *early = NULL;
  pthread_mutex_lock(&w->parker->mu);
  w->wakes++;
  if (confirm)
    w->confirmed = 1;
  else if (w->armed && w->early_state == 0 && !c->net.stopping) {
    early = early_req(w);
    dlock__early_hook_fn *hook = atomic_load(&dlock__early_hook);
    if (early && hook && hook(DLOCK__HOOK_EARLY_SENT))
      w->interrupted = 1; /* a test's interrupt, racing this try */
  }
  signal_waiter(w);
  pthread_mutex_unlock(&w->parker->mu);
  if (early)
    dlock__send(c, early);
}

static int has_pending_wake(dlock__waiter *w) {
  pthread_mutex_lock(&w->parker->mu);
  int pending = w->wakes != w->seen;
  pthread_mutex_unlock(&w->parker->mu);
  return pending;
}

/* Wake up to n waiters, oldest first, skipping those that already have a
 * wake-up they have not consumed: one release then goes to one thread that
 * will actually re-check. */
static void wake_some(dlock_client *c, chan *ch, uint32_t n) {
  if (ch->fifo) {
    /* The head, and behind it everyone the announced count serves along
     * with all ahead of it: a try each. Nobody behind a waiter the count
     * does not serve tries, so a big demand is not overtaken. */
    uint64_t sum = 0;
    for (dlock__waiter *w = ch->head; w && n > 0; w = w->next) {
      sum += (uint64_t)w->demand;
      if (w != ch->head && sum > n)
        break;
      pthread_mutex_lock(&w->parker->mu);
      w->turn = 1;
      w->wakes++;
      signal_waiter(w);
      pthread_mutex_unlock(&w->parker->mu);
    }
    return;
  }
  if (n == UINT32_MAX) {
    for (dlock__waiter *w = ch->head; w; w = w->next)
      wake(c, w, 0);
    return;
  }
  uint32_t woken = 0;
  for (dlock__waiter *w = ch->head; w && woken < n; w = w->next)
    if (!has_pending_wake(w)) {
      wake(c, w, 0);
      woken++;
    }
  if (woken == 0 && n > 0 && ch->head)
    wake(c, ch->head, 0);
}

void dlock__fifo_released(dlock_client *c, const char *channel, size_t len,
                          int64_t n) {
  if (n <= 0 || atomic_load(&c->fifo_waiters) == 0)
    return;
  pthread_mutex_lock(&c->cmu);
  dlock__map_node *node = dlock__map_get(&c->channels, channel, len);
  chan *ch = node ? DLOCK__CONTAINER(node, chan, node) : NULL;
  if (ch && ch->fifo && ch->confirmed) /* a FIFO wake only signals */
    wake_some(c, ch, n < UINT32_MAX ? (uint32_t)n : UINT32_MAX - 1);
  pthread_mutex_unlock(&c->cmu);
}

/* On a channel with lease hints, "-MS" (a negative number: Redisson's
 * waiters read it as neither of their messages 0 and 1 and ignore it) says
 * the object was just taken with a lease of MS ms. No message announces the
 * end of a lease, so every waiter of the channel re-tries by then, whatever
 * it heard before (it may be sleeping on an older, longer hint). */
static int lease_hint(const char *msg, size_t len, int64_t *ms) {
  if (len < 2 || len > 19 || msg[0] != '-')
    return 0;
  int64_t v = 0;
  for (size_t i = 1; i < len; i++) {
    if (msg[i] < '0' || msg[i] > '9')
      return 0;
    v = v * 10 + (msg[i] - '0');
  }
  *ms = v;
  return 1;
}

static void retry_by(chan *ch, int64_t at_ms) {
  for (dlock__waiter *w = ch->head; w; w = w->next) {
    pthread_mutex_lock(&w->parker->mu);
    if (w->retry_by == 0 || at_ms < w->retry_by)
      w->retry_by = at_ms;
    signal_waiter(w);
    pthread_mutex_unlock(&w->parker->mu);
  }
}

static void on_confirmed(chan *ch) {
  ch->confirmed = 1;
  for (dlock__waiter *w = ch->head; w; w = w->next) {
    pthread_mutex_lock(&w->parker->mu);
    w->confirmed = 1;
    if (ch->recheck)
      w->wakes++;
    signal_waiter(w);
    pthread_mutex_unlock(&w->parker->mu);
  }
  ch->recheck = 0;
}

/* Subscribe a homeless channel again, on the node the map says owns its
 * slot now (a stale map earns a MOVED, followed in on_error). */
static void rehome(dlock_client *c, chan *ch) {
  ch->homeless = 0;
  ch->conn = c->net.topo->sub_conn(&c->net, ch->name, ch->len);
  send_op(c, ch, 1);
}

/* A cluster moved ch's slot to another node, which ended the shard
 * subscription (an "sunsubscribe" nobody asked for): its waiters keep to
 * their hints until it is subscribed again on the new owner. */
static void moved_away(dlock_client *c, chan *ch) {
  ch->confirmed = 0;
  if (ch->refs == 0) {
    if (ch->ops == 0)
      chan_free(c, ch);
    return;
  }
  ch->homeless = 1;
  ch->recheck = 1; /* once subscribed again, everyone re-tries */
  c->net.topo->refresh_soon(&c->net);
  rehome(c, ch);
}

static void on_reply(dlock__conn *conn, redisReply *r) {
  dlock_client *c = dlock__net_client(conn->net);
  const char *kind = dlock__push_kind(r->element[0]->str);
  redisReply *name = r->element[1];
  if (name->type != REDIS_REPLY_STRING)
    return;
  dlock__map_node *n = dlock__map_get(&c->channels, name->str, name->len);
  if (n == NULL)
    return;
  chan *ch = DLOCK__CONTAINER(n, chan, node);
  if (kind[0] == 'm') { /* message */
    dlock__stat_add(&c->stats, DLOCK__ST_MESSAGES, 1);
    redisReply *msg = r->element[2];
    const char *text = msg->type == REDIS_REPLY_STRING ? msg->str : "";
    size_t len = msg->type == REDIS_REPLY_STRING ? msg->len : 0;
    for (dlock__waiter *w = ch->head; w; w = w->next)
      if (w->on_message)
        w->on_message(w, text, len);
    int64_t ms;
    if (ch->lease_hints && lease_hint(text, len, &ms))
      retry_by(ch, dlock__now_ms() + ms);
    else
      wake_some(c, ch, ch->wake(text, len));
    return;
  }
  fifo_op head = fifo_head(conn);
  if (kind[0] == 'u' && (head.ch != ch || head.subscribe)) {
    moved_away(c, ch); /* not the answer to an unsubscribe of ours */
    return;
  }
  fifo_pop(conn);
  if (ch->ops > 0)
    ch->ops--;
  if (ch->ops != 0)
    return;
  if (ch->last_sub) {
    if (!ch->confirmed)
      on_confirmed(ch);
  } else if (ch->refs == 0) {
    chan_free(c, ch);
  }
}

void dlock__pubsub_on_reply(dlock__conn *conn, redisReply *r) {
  dlock_client *c = dlock__net_client(conn->net);
  pthread_mutex_lock(&c->cmu);
  on_reply(conn, r);
  pthread_mutex_unlock(&c->cmu);
}

static int on_error(dlock__conn *conn, const redisReply *r) {
  dlock_client *c = dlock__net_client(conn->net);
  chan *ch = fifo_pop(conn);
  if (ch == NULL)
    return 0; /* not an answer to a (UN)SUBSCRIBE */
  if (ch->ops > 0)
    ch->ops--;
  dlock__conn *to;
  if (dlock__classify(r) == DLOCK__C_MOVED &&
      (to = c->net.topo->moved_sub(&c->net, r->str)) != NULL) {
    /* a shard channel asked of a node that does not own its slot (the
     * map was stale): ask its owner */
    ch->conn = to;
    if (ch->refs > 0 && ch->last_sub)
      send_op(c, ch, 1);
    else if (ch->ops == 0 && ch->refs == 0)
      chan_free(c, ch);
    return 1;
  }
  snprintf(c->sub_error, sizeof c->sub_error, "%.*s", (int)r->len, r->str);
  if (ch->last_sub && !ch->confirmed &&
      dlock__classify(r) == DLOCK__C_PASSING) {
    /* refused for now (a busy script, a replica without its master): its
     * waiters go on without messages, on hints, as when a confirmation is
     * late, and the next waiter to join asks again */
    ch->denied = 1;
  } else if (ch->last_sub && !ch->confirmed) {
    ch->denied = 1;
    for (dlock__waiter *w = ch->head; w; w = w->next) {
      pthread_mutex_lock(&w->parker->mu);
      w->denied = 1;
      if (w->denied_why == NULL) /* kept only by a refused waiter */
        w->denied_why = strdup(c->sub_error);
      signal_waiter(w);
      pthread_mutex_unlock(&w->parker->mu);
    }
  } else if (ch->ops == 0 && ch->refs == 0) {
    chan_free(c, ch);
  }
  return 1;
}

int dlock__pubsub_on_error(dlock__conn *conn, const redisReply *r) {
  dlock_client *c = dlock__net_client(conn->net);
  pthread_mutex_lock(&c->cmu);
  int mine = on_error(conn, r);
  pthread_mutex_unlock(&c->cmu);
  return mine;
}

void dlock__pubsub_on_ready(dlock__conn *conn) {
  dlock_client *c = dlock__net_client(conn->net);
  pthread_mutex_lock(&c->cmu);
  size_t slot;
  dlock__map_node *n = dlock__map_next(&c->channels, NULL, &slot);
  while (n) {
    dlock__map_node *next = dlock__map_next(&c->channels, n, &slot);
    chan *ch = DLOCK__CONTAINER(n, chan, node);
    if (ch->conn != conn) {
      /* another connection's */
    } else if (ch->refs == 0) {
      chan_free(c, ch);
    } else {
      ch->recheck = 1;
      send_op(c, ch, 1);
    }
    n = next;
  }
  pthread_mutex_unlock(&c->cmu);
}

void dlock__pubsub_on_down(dlock__conn *conn) {
  dlock_client *c = dlock__net_client(conn->net);
  pthread_mutex_lock(&c->cmu);
  size_t slot;
  for (dlock__map_node *n = dlock__map_next(&c->channels, NULL, &slot); n;
       n = dlock__map_next(&c->channels, n, &slot)) {
    chan *ch = DLOCK__CONTAINER(n, chan, node);
    if (ch->conn != conn)
      continue;
    ch->confirmed = 0;
    ch->denied = 0; /* the ACL may have changed: asked again on reconnect */
  }
  /* the answers this connection owed will never come (a channel that moved
   * may still wait for answers on another connection: count exactly) */
  chan *ch;
  while ((ch = fifo_pop(conn)) != NULL)
    if (ch->ops > 0)
      ch->ops--;
  pthread_mutex_unlock(&c->cmu);
  /* a cluster node that went down may have handed its slots over */
  c->net.topo->refresh_soon(&c->net);
}

/* A new slot map: homeless channels are subscribed again, and so is a
 * channel whose slot the map gives another node than the one it is
 * subscribed on. A coordinated failover does not always end the shard
 * subscriptions on the demoted master (no "sunsubscribe"), and until the
 * promoted master counts it as its replica, what it publishes never
 * reaches it: such a channel is left (SUNSUBSCRIBE there), subscribed on
 * the owner, and its waiters try again once that is confirmed, so a
 * release published in between is not missed. */
void dlock__pubsub_rehome(dlock_client *c) {
  pthread_mutex_lock(&c->cmu);
  size_t slot;
  for (dlock__map_node *n = dlock__map_next(&c->channels, NULL, &slot); n;
       n = dlock__map_next(&c->channels, n, &slot)) {
    chan *ch = DLOCK__CONTAINER(n, chan, node);
    if (ch->homeless) {
      rehome(c, ch);
      continue;
    }
    if (ch->refs == 0 || !ch->last_sub)
      continue;
    if (c->net.topo->sub_conn(&c->net, ch->name, ch->len) == ch->conn)
      continue;
    send_op(c, ch, 0); /* on the old node */
    ch->confirmed = 0;
    ch->recheck = 1;
    rehome(c, ch);
  }
  pthread_mutex_unlock(&c->cmu);
}

void dlock__pubsub_shutdown(dlock_client *c) {
  pthread_mutex_lock(&c->cmu);
  size_t slot;
  dlock__map_node *n = dlock__map_next(&c->channels, NULL, &slot);
  while (n) {
    dlock__map_node *next = dlock__map_next(&c->channels, n, &slot);
    chan *ch = DLOCK__CONTAINER(n, chan, node);
    for (dlock__waiter *w = ch->head, *wn; w; w = wn) {
      wn = w->next; /* w may be gone as soon as its mutex is released */
      pthread_mutex_lock(&w->parker->mu);
      w->closed = 1;
      signal_waiter(w);
      pthread_mutex_unlock(&w->parker->mu);
    }
    free(ch);
    n = next;
  }
  dlock__map_free(&c->channels);
  pthread_mutex_unlock(&c->cmu);
}

typedef struct sub_args {
  const char *name;
  size_t len;
  dlock__wake_fn *wake;
  dlock__waiter *w;
} sub_args;

/* Put w at the end of ch's line (cmu held). */
static void link_waiter(dlock_client *c, chan *ch, dlock__waiter *w) {
  if (w->fifo) {
    atomic_fetch_add(&c->fifo_waiters, 1);
    if (ch->head == NULL) {
      pthread_mutex_lock(&w->parker->mu);
      w->head = 1;
      pthread_mutex_unlock(&w->parker->mu);
    }
  }
  w->chan = ch;
  DLOCK__LIST_APPEND(ch->head, ch->tail, w, prev, next);
  ch->refs++;
}

/* Join a's waiter to its channel, subscribing when it is the first
 * (engine thread). DLOCK_OK or DLOCK_ENOMEM. */
static int subscribe_engine(dlock_client *c, const sub_args *a) {
  pthread_mutex_lock(&c->cmu);
  dlock__map_node *n = dlock__map_get(&c->channels, a->name, a->len);
  chan *ch;
  if (n) {
    ch = DLOCK__CONTAINER(n, chan, node);
  } else {
    ch = calloc(1, sizeof *ch + a->len);
    if (ch == NULL) {
      pthread_mutex_unlock(&c->cmu);
      return dlock__oom();
    }
    memcpy(ch->name, a->name, a->len);
    ch->len = a->len;
    ch->node.key = ch->name;
    ch->node.klen = a->len;
    ch->wake = a->wake;
    ch->fifo = a->w->fifo;
    ch->lease_hints = a->w->lease_hints;
    ch->conn = c->net.topo->sub_conn(&c->net, a->name, a->len);
    if (dlock__map_put(&c->channels, &ch->node) != DLOCK_OK) {
      free(ch);
      pthread_mutex_unlock(&c->cmu);
      return dlock__oom();
    }
  }
  dlock__waiter *w = a->w;
  link_waiter(c, ch, w);
  if (ch->denied) { /* refused before: ask again, the ACL may be fixed */
    ch->denied = 0;
    send_op(c, ch, 1);
  }
  if (ch->refs == 1 && !(ch->last_sub && (ch->ops > 0 || ch->confirmed)))
    send_op(c, ch, 1);
  if (ch->confirmed) {
    pthread_mutex_lock(&w->parker->mu);
    w->confirmed = 1;
    pthread_mutex_unlock(&w->parker->mu);
  }
  pthread_mutex_unlock(&c->cmu);
  return DLOCK_OK;
}

static void subscribe_task(dlock_client *c, dlock__req *req) {
  int rc = subscribe_engine(c, req->arg);
  dlock__req_finish(req, NULL, rc, rc == DLOCK_OK ? NULL : "out of memory");
}

int dlock__subscribe_async(dlock_client *c, const char *channel, size_t len,
                           dlock__wake_fn *wake_fn, dlock__waiter *w) {
  sub_args a = {channel, len, wake_fn, w};
  int rc = subscribe_engine(c, &a);
  if (rc != DLOCK_OK)
    return dlock__fail(rc, "out of memory subscribing");
  pthread_mutex_lock(&w->parker->mu);
  w->seen = w->wakes; /* the first confirmation is not news */
  pthread_mutex_unlock(&w->parker->mu);
  return DLOCK_OK;
}

/* A waiter joining a channel its client is subscribed to already needs
 * nothing from the engine: it joins the line itself (no round trip to the
 * engine thread and back). 1 when it did. */
static int subscribe_here(dlock_client *c, const sub_args *a) {
  dlock__waiter *w = a->w;
  int done = 0;
  pthread_mutex_lock(&c->cmu);
  dlock__map_node *n = dlock__map_get(&c->channels, a->name, a->len);
  chan *ch = n ? DLOCK__CONTAINER(n, chan, node) : NULL;
  if (ch && ch->refs > 0 && ch->confirmed && ch->last_sub && ch->ops == 0 &&
      !ch->denied && ch->fifo == w->fifo) {
    link_waiter(c, ch, w);
    pthread_mutex_lock(&w->parker->mu);
    w->confirmed = 1;
    pthread_mutex_unlock(&w->parker->mu);
    done = 1;
  }
  pthread_mutex_unlock(&c->cmu);
  return done;
}

/* Take w out of ch's line (cmu held); the next in a FIFO line takes over. */
static void unlink_waiter(dlock_client *c, chan *ch, dlock__waiter *w) {
  if (w->fifo) {
    atomic_fetch_sub(&c->fifo_waiters, 1);
    if (w->prev == NULL && w->next) { /* the next in line's turn */
      dlock__waiter *next = w->next;
      pthread_mutex_lock(&next->parker->mu);
      next->head = 1;
      next->wakes++;
      signal_waiter(next);
      pthread_mutex_unlock(&next->parker->mu);
    }
  }
  DLOCK__LIST_REMOVE(ch->head, ch->tail, w, prev, next);
  ch->refs--;
}

/* Take w off its channel (engine thread); the last one out UNSUBSCRIBEs. */
static void unsubscribe_engine(dlock_client *c, dlock__waiter *w) {
  pthread_mutex_lock(&c->cmu);
  chan *ch = w->chan;
  unlink_waiter(c, ch, w);
  /* A wake-up this waiter never used (it gave up, or took the lock on its
   * own) may be the one another waiter needs: pass it on. */
  if (w->unconsumed > 0 && ch->head && !ch->fifo)
    wake_some(c, ch, 1);
  if (ch->refs == 0) {
    if (ch->conn->state == CONN_READY && ch->last_sub &&
        (ch->ops > 0 || ch->confirmed)) {
      ch->confirmed = 0;
      send_op(c, ch, 0);
    } else if (ch->ops == 0) {
      chan_free(c, ch);
    }
  }
  pthread_mutex_unlock(&c->cmu);
}

static void unsubscribe_task(dlock_client *c, dlock__req *req) {
  unsubscribe_engine(c, req->arg);
  dlock__req_finish(req, NULL, DLOCK_OK, NULL);
}

/* A waiter out of its channel lets go of what it owned. */
static void waiter_done(dlock__waiter *w) {
  pthread_mutex_lock(&w->parker->mu);
  free(w->denied_why);
  w->denied_why = NULL;
  pthread_mutex_unlock(&w->parker->mu);
}

void dlock__unsubscribe_async(dlock_client *c, dlock__waiter *w) {
  pthread_mutex_lock(&w->parker->mu);
  w->unconsumed = w->wakes - w->seen;
  int closed = w->closed; /* the shutdown has let go of it already */
  pthread_mutex_unlock(&w->parker->mu);
  if (!closed)
    unsubscribe_engine(c, w);
  waiter_done(w);
}

/* A waiter leaving a channel others of its client still wait on needs
 * nothing from the engine either, unless it must pass on a wake-up (which
 * may send an early try: the engine's to send). 1 when it left here. */
static int unsubscribe_here(dlock_client *c, dlock__waiter *w) {
  int done = 0;
  pthread_mutex_lock(&c->cmu);
  chan *ch = w->chan;
  pthread_mutex_lock(&w->parker->mu);
  int closed = w->closed; /* set under cmu too: stable here */
  pthread_mutex_unlock(&w->parker->mu);
  if (closed)
    done = 1; /* the engine has already let go of it */
  else if (ch->refs > 1 && (ch->fifo || w->unconsumed == 0)) {
    unlink_waiter(c, ch, w);
    done = 1;
  }
  pthread_mutex_unlock(&c->cmu);
  return done;
}

int dlock__subscribe(dlock_client *c, const char *channel, size_t len,
                     dlock__wake_fn *wake_fn, int fifo, int lease_hints,
                     dlock__waiter *w, int64_t deadline_ms) {
  /* w is zeroed by the caller, who may have registered it for interrupts:
   * then w->parker is set already, and another thread's interrupt may read it
   * now (written again, even with the same value, it would race) */
  if (w->parker == NULL)
    w->parker = dlock__parker_self();
  w->fifo = fifo;
  w->lease_hints = lease_hints;
  sub_args a = {channel, len, wake_fn, w};
  if (subscribe_here(c, &a)) {
    pthread_mutex_lock(&w->parker->mu);
    w->seen = w->wakes;
    pthread_mutex_unlock(&w->parker->mu);
    return DLOCK_OK;
  }
  dlock__req req;
  dlock__req_task(&req, subscribe_task, &a);
  int rc = dlock__engine_task(c, &req);
  if (rc != DLOCK_OK)
    return rc;
  int64_t limit = dlock__now_ms() + c->opts.command_timeout_ms;
  if (deadline_ms >= 0 && deadline_ms < limit)
    limit = deadline_ms;
  pthread_mutex_lock(&w->parker->mu);
  while (!w->confirmed && !w->closed && !w->interrupted && !w->denied)
    if (dlock__park(w->parker, limit) != 0)
      break;
  /* the first confirmation is not news to this waiter */
  w->seen = w->wakes;
  int denied = w->denied;
  char why[sizeof c->sub_error] = "";
  if (denied && w->denied_why)
    snprintf(why, sizeof why, "%s", w->denied_why);
  pthread_mutex_unlock(&w->parker->mu);
  if (denied) {
    dlock__unsubscribe(c, w);
    return dlock__subscribe_denied(channel, len, why);
  }
  return DLOCK_OK;
}

int dlock__waiter_wait(dlock__waiter *w, int64_t deadline_ms) {
  int rc = DLOCK_OK;
  pthread_mutex_lock(&w->parker->mu);
  while (w->wakes == w->seen && !w->closed && !w->interrupted) {
    int64_t until = deadline_ms;
    if (w->retry_by && (until < 0 || w->retry_by < until))
      until = w->retry_by;
    if (dlock__park(w->parker, until) != 0)
      break;
  }
  w->retry_by = 0;
  if (w->closed)
    rc = DLOCK_ECLOSED;
  else if (w->interrupted)
    rc = DLOCK_EINTR;
  else
    w->seen = w->wakes;
  pthread_mutex_unlock(&w->parker->mu);
  return rc;
}

int dlock__waiter_wait_any(dlock__waiter *const *ws, int n,
                           int64_t deadline_ms) {
  dlock__parker *s = ws[0]->parker;
  int rc = DLOCK_ETIMEDOUT;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    for (int i = 0; i < n; i++) {
      if (ws[i]->closed)
        rc = DLOCK_ECLOSED;
      else if (ws[i]->wakes != ws[i]->seen && rc == DLOCK_ETIMEDOUT)
        rc = DLOCK_OK;
    }
    if (rc != DLOCK_ETIMEDOUT || dlock__park(s, deadline_ms) != 0)
      break;
  }
  for (int i = 0; rc == DLOCK_OK && i < n; i++)
    ws[i]->seen = ws[i]->wakes;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int dlock__fifo_waiters(dlock_client *c) { return atomic_load(&c->fifo_waiters); }

int dlock__waiter_refused(dlock__waiter *w) {
  char why[512] = "";
  pthread_mutex_lock(&w->parker->mu);
  if (w->denied)
    snprintf(why, sizeof why, "%s", w->denied_why ? w->denied_why : "refused");
  pthread_mutex_unlock(&w->parker->mu);
  return why[0] ? dlock__fail(DLOCK_EPERM, "%s", why) : DLOCK_OK;
}

void dlock__waiter_look_now(dlock__waiter *w, dlock__waiter_look *out) {
  pthread_mutex_lock(&w->parker->mu);
  out->closed = w->closed;
  out->denied = w->denied;
  out->confirmed = w->confirmed;
  out->woken = w->wakes != w->seen;
  w->seen = w->wakes;
  snprintf(out->why, sizeof out->why, "%s",
           w->denied_why ? w->denied_why : "");
  pthread_mutex_unlock(&w->parker->mu);
}

int dlock__subscribe_denied(const char *channel, size_t len, const char *why) {
  int cmd = strstr(why, "'subscribe' command") || strstr(why, "'ssubscribe' command");
  if (cmd)
    return dlock__fail(DLOCK_EPERM, "the ACL user may not run %s (+%s), which "
                       "every wait needs (%s); the commands, keys and channels "
                       "dlock needs are in docs/security.md (`dlock check` "
                       "tests a URL)", strstr(why, "'ssubscribe'") ? "SSUBSCRIBE"
                                                                  : "SUBSCRIBE",
                       strstr(why, "'ssubscribe'") ? "ssubscribe" : "subscribe",
                       why);
  return dlock__fail(DLOCK_EPERM, "the ACL user may not subscribe to the channel"
                     "%s%.*s (%s): it needs channel patterns such as "
                     "&redisson_* &dlock_*; see docs/security.md (`dlock "
                     "check` tests a URL)", len ? " " : "", (int)(len < 200 ? len : 200),
                     channel, why);
}

void dlock__unsubscribe(dlock_client *c, dlock__waiter *w) {
  pthread_mutex_lock(&w->parker->mu);
  w->unconsumed = w->wakes - w->seen;
  int closed = w->closed;
  pthread_mutex_unlock(&w->parker->mu);
  if (closed || unsubscribe_here(c, w)) {
    waiter_done(w); /* the engine has let go of it, or did not need to */
    return;
  }
  dlock__req req;
  dlock__req_task(&req, unsubscribe_task, w);
  if (dlock__engine_task(c, &req) == DLOCK_OK) {
    waiter_done(w);
    return;
  }
  /* The client is closing: the engine still holds w in a channel list until
   * its shutdown marks it closed; w must outlive that. */
  pthread_mutex_lock(&w->parker->mu);
  while (!w->closed)
    dlock__park(w->parker, -1);
  pthread_mutex_unlock(&w->parker->mu);
  waiter_done(w);
}
