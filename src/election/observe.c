/* An election's observers (dlock_election_observe). Every observer is an
 * async operation that lives until cancelled; the observers of one handle
 * share one hub, an internal operation on the engine thread that
 * subscribes to the election's channel, whose messages (docs/wire.md,
 * "Leader election") carry each change whole. The hub reads the record
 * only when it begins, when its subscription is made again after a drop
 * (changes may have passed unseen: its next events say resync), and at the
 * end of the leader's lease as last seen (a term that ends with no
 * message: a crashed leader). It tells every change once, in order (the
 * state it knows is ordered by term, version, vacant), to each observer in
 * one pass: 10,000 observers cost one message and one loop. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election/election_impl.h"

typedef struct obs_msg {
  struct obs_msg *next;
  size_t len;
  char text[];
} obs_msg;

typedef struct election_hub hub;

/* One observer: its operation's ctx. */
typedef struct observer {
  dlock__aop *op;
  hub *h;                 /* NULL once unlinked */
  struct observer *prev, *next;
  int started;            /* told its first state */
} observer;

struct election_hub {
  dlock_election *e;      /* NULL once the hub closes (e may go then) */
  dlock__aop *op;
  pthread_mutex_t mu;     /* the messages (queued under the client's cmu) */
  obs_msg *head, *tail;
  int dropped;            /* a message could not be kept: read the state */
  /* engine thread */
  int begun;              /* the first read was sent */
  int due;                /* a read is due (the lease's end, a drop) */
  int resync;             /* tell the next events as a resync */
  int told;               /* the state below was told */
  int vacant;
  int untold;             /* a change could not be told (out of memory):
                             the state is read again soon, told as resync */
  int closing;            /* no observer left: end at the next chance */
  dlock_leader last;      /* what was told last; value: value below */
  char *value;            /* the last leader's value, for joiners */
  char mine[64];          /* the handle's owner string */
  observer *first;
};

static void hub_free(void *ctx) {
  hub *h = ctx;
  for (obs_msg *m = h->head, *next; m; m = next) {
    next = m->next;
    free(m);
  }
  free(h->value);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

/* ---- telling ------------------------------------------------------------------- */

/* An event of change about l, its value copied in the same block. */
static dlock_election_event *event(dlock_election_change change,
                                   const dlock_leader *l, int resync) {
  size_t vlen = change == DLOCK_VACANT ? 0 : l->value_len;
  dlock_election_event *ev = malloc(sizeof *ev + vlen + 1);
  if (ev == NULL)
    return NULL;
  char *value = (char *)(ev + 1);
  if (vlen)
    memcpy(value, l->value, vlen);
  value[vlen] = '\0';
  *ev = (dlock_election_event){.change = change, .leader = *l,
                               .resync = resync};
  ev->leader.value = value;
  ev->leader.value_len = vlen;
  ev->leader.leading = change != DLOCK_VACANT;
  if (change == DLOCK_VACANT)
    ev->leader.mine = 0;
  return ev;
}

/* ev to one observer: shared while its callback runs on the engine
 * thread, a copy for the completion queue. 0 when out of memory: this
 * observer was not told. */
static int deliver(observer *o, const dlock_election_event *ev) {
  if (dlock__client_opts(o->op->c)->completions != DLOCK_COMPLETE_QUEUE) {
    dlock__aop_emit(o->op, NULL, ev);
    return 1;
  }
  size_t size = sizeof *ev + ev->leader.value_len + 1;
  dlock_election_event *copy = malloc(size);
  if (copy == NULL)
    return 0;
  memcpy(copy, ev, size);
  copy->leader.value = (char *)(copy + 1);
  dlock__aop_emit(o->op, copy, copy);
  return 1;
}

/* Tell one change to every observer that began (all: the hub's first).
 * 0 when out of memory left one untold (h->untold: the state is read and
 * told again, as a resync, so none misses it for good). */
static int tell(hub *h, int resync, dlock_election_change change,
                const dlock_leader *l) {
  dlock_election_event *ev = event(change, l, resync);
  int all = ev != NULL;
  for (observer *o = h->first; ev && o; o = o->next)
    if (o->started || !h->told) {
      if (deliver(o, ev))
        o->started = 1;
      else
        all = 0;
    }
  free(ev);
  h->untold |= !all;
  return all;
}

/* Keep l as the last told, its value for those who join later. */
static void keep(hub *h, const dlock_leader *l) {
  char *v = malloc(l->value_len + 1);
  if (v) {
    memcpy(v, l->value, l->value_len);
    v[l->value_len] = '\0';
  }
  free(h->value);
  h->value = v;
  h->last = *l;
  h->last.value = v ? v : "";
  h->last.value_len = v ? l->value_len : 0;
}

/* What the hub learnt (a message, or a read: l); tells what is newer than
 * what it told last, a vacancy first when a new term comes unseen. */
static void learn(hub *h, const dlock_leader *l) {
  dlock_leader *last = &h->last;
  dlock_leader ended = *last; /* the term that ends, as it was told */
  ended.value = "";
  ended.value_len = 0;
  ended.lease_ms = -1;
  /* every event of this change says resync after a drop, and so when terms
   * were skipped: each grant takes the next term, so a gap is grants this
   * hub did not hear of (a failover's promoted master published them
   * before the old one, where the subscription stayed, replicated them) */
  int rs = h->resync || (h->told && l->term > last->term + 1);
  int differs = l->leading != !h->vacant || l->term != last->term ||
                (l->leading && l->version != last->version);
  h->untold = 0;
  if (!h->told || (h->resync && differs)) {
    /* the first state; or, after a drop, the state now whatever it is (a
     * server that restarted without its data counts terms from 0 again) */
    if (h->told && !h->vacant && l->leading)
      tell(h, rs, DLOCK_VACANT, &ended);
    tell(h, rs, l->leading ? DLOCK_ELECTED : DLOCK_VACANT, l);
  } else if (l->leading && l->term > last->term) {
    if (!h->vacant)
      tell(h, rs, DLOCK_VACANT, &ended);
    tell(h, rs, DLOCK_ELECTED, l);
  } else if (l->leading && l->term == last->term && !h->vacant &&
             l->version > last->version) {
    tell(h, rs, DLOCK_PROCLAIMED, l);
  } else if (!l->leading && !h->vacant && l->term >= last->term) {
    tell(h, rs, DLOCK_VACANT, &ended);
  } else {
    return; /* old news */
  }
  if (h->untold) { /* told again, whole, once it is read again */
    h->resync = h->due = 1;
    return;
  }
  h->resync = 0;
  h->told = 1;
  h->vacant = !l->leading;
  if (l->leading || differs)
    keep(h, l);
}

/* A message "K term version since owner lease\nvalue" (K: E elected, P
 * proclaimed, V vacant) into *l (its value in m); 0 when it is not one. */
static int parse(const hub *h, const obs_msg *m, dlock_leader *l) {
  memset(l, 0, sizeof *l);
  const char *nl = memchr(m->text, '\n', m->len);
  char kind = 0;
  int used = 0;
  if (nl == NULL ||
      sscanf(m->text, "%c %" SCNd64 " %" SCNd64 " %" SCNd64 " %63s %" SCNd64 "%n",
             &kind, &l->term, &l->version, &l->since_ms, l->owner,
             &l->lease_ms, &used) != 6 ||
      m->text + used != nl || (kind != 'E' && kind != 'P' && kind != 'V'))
    return 0;
  l->leading = kind != 'V';
  l->value = nl + 1;
  l->value_len = m->len - (size_t)(nl + 1 - m->text);
  l->mine = l->leading && strcmp(h->mine, l->owner) == 0;
  return 1;
}

/* ---- the hub's operation ----------------------------------------------------- */

static void hub_ready(dlock__aop *op);

static void timer_fired(dlock__aop *op) {
  ((hub *)op->ctx)->due = 1;
  hub_ready(op);
}

/* After what it learnt: read again at the end of the leader's lease (plus
 * a millisecond), when no message will say it ended. */
static void arm(dlock__aop *op, hub *h, int64_t lease_ms) {
  dlock__aop_timer(op, h->vacant || lease_ms < 0 ? -1 : lease_ms + 1,
                   timer_fired);
}

static void read_done(dlock__req *req, redisReply *reply, int status) {
  dlock__aop *op = req->data;
  hub *h = op->ctx;
  free(req);
  op->stage = DLOCK__AOP_WAITING;
  dlock_leader l;
  int rc = status;
  if (status == DLOCK_OK && !h->closing) {
    rc = dlock__election_state_read(h->e, reply, &l);
    if (rc != DLOCK_OK)
      rc = DLOCK_EPROTO;
  }
  if (reply)
    freeReplyObject(reply);
  if (h->closing || status == DLOCK_ECLOSED) {
    dlock__aop_finish(op, h->closing ? DLOCK_ECANCELED : DLOCK_ECLOSED);
    return;
  }
  if (rc != DLOCK_OK) { /* the server is away: read again in a while */
    h->resync = 1;
    dlock__aop_timer(op, 1000, timer_fired);
  } else {
    learn(h, &l);
    if (h->untold)
      dlock__aop_timer(op, 100, timer_fired); /* read and tell again */
    else
      arm(op, h, l.lease_ms);
    dlock_leader_clear(&l);
  }
  hub_ready(op); /* what came meanwhile */
}

static void read_state(dlock__aop *op, hub *h) {
  dlock__req *req = calloc(1, sizeof *req);
  int rc = req ? dlock__election_state_req(h->e, req)
               : dlock__fail(DLOCK_ENOMEM, "out of memory");
  if (rc != DLOCK_OK) {
    free(req);
    dlock__aop_finish(op, rc);
    return;
  }
  h->due = 0;
  h->begun = 1;
  dlock__aop_send(op, req, read_done);
}

/* The messages queued since last time, in order. */
static void drain(dlock__aop *op, hub *h) {
  pthread_mutex_lock(&h->mu);
  obs_msg *m = h->head;
  h->head = h->tail = NULL;
  if (h->dropped)
    h->due = h->resync = 1;
  h->dropped = 0;
  pthread_mutex_unlock(&h->mu);
  while (m) {
    obs_msg *next = m->next;
    dlock_leader l;
    if (h->begun && parse(h, m, &l)) {
      learn(h, &l);
      if (h->untold)
        dlock__aop_timer(op, 100, timer_fired); /* read and tell again */
      else if (l.leading && l.lease_ms > 0)
        arm(op, h, l.lease_ms);
    }
    free(m);
    m = next;
  }
}

/* Woken: messages, the confirmation, a subscription made again, the
 * close; or its timer. */
static void hub_ready(dlock__aop *op) {
  hub *h = op->ctx;
  if (op->stage != DLOCK__AOP_WAITING)
    return; /* a read is in flight: its answer looks again */
  if (h->closing) {
    dlock__aop_finish(op, DLOCK_ECANCELED);
    return;
  }
  dlock__waiter_look w;
  dlock__waiter_look_now(op->w, &w);
  if (w.closed || w.denied) {
    int rc = w.closed ? dlock__fail(DLOCK_ECLOSED, "client closed")
                      : dlock__subscribe_denied("", 0, w.why);
    dlock__aop_finish(op, rc);
    return;
  }
  if (w.woken && h->begun) /* subscribed again after a drop: what comes
                              from now on follows a gap */
    h->due = h->resync = 1;
  drain(op, h);
  if (w.confirmed && (!h->begun || h->due))
    read_state(op, h);
}

/* The waiter's: a message (engine thread, cmu held: only queue). */
static void on_message(dlock__waiter *w, const char *text, size_t len) {
  dlock__aop *op = w->data;
  hub *h = op->ctx;
  obs_msg *m = malloc(sizeof *m + len + 1);
  pthread_mutex_lock(&h->mu);
  if (m == NULL) {
    h->dropped = 1;
  } else {
    m->next = NULL;
    m->len = len;
    memcpy(m->text, text, len);
    m->text[len] = '\0';
    if (h->tail)
      h->tail->next = m;
    else
      h->head = m;
    h->tail = m;
  }
  pthread_mutex_unlock(&h->mu);
  dlock__aop_ready(op, 0);
}

/* The confirmation, a subscription made again, the close. */
static void notify(dlock__waiter *w) {
  dlock__aop_ready(w->data, !dlock__on_engine_thread());
}

static uint32_t wake_none(const char *msg, size_t len) {
  (void)msg, (void)len;
  return 0; /* messages are read (on_message), not woken on */
}

/* Why the hub just made could not start (engine thread). */
static _Thread_local int tl_hub_rc;

static void hub_start(dlock__aop *op) {
  hub *h = op->ctx;
  op->on_ready = hub_ready;
  op->stage = DLOCK__AOP_WAITING;
  if (h->closing) {
    dlock__aop_finish(op, DLOCK_ECANCELED);
    return;
  }
  dlock__waiter *w = calloc(1, sizeof *w);
  int rc = w ? DLOCK_OK : dlock__fail(DLOCK_ENOMEM, "out of memory");
  if (rc == DLOCK_OK) {
    w->parker = &dlock__client_async(op->c)->parker;
    w->notify = notify;
    w->on_message = on_message;
    w->data = op;
    w->demand = 1;
    rc = dlock__subscribe_async(op->c, h->e->channel.p, h->e->channel.len,
                                wake_none, w);
  }
  if (rc != DLOCK_OK) {
    free(w);
    tl_hub_rc = rc;
    dlock__aop_finish(op, rc);
    return;
  }
  op->w = w; /* the op's end unsubscribes it */
  hub_ready(op);
}

/* The hub ends (the client closes, the ACL refuses the channel, the last
 * observer left): the observers still there end with it. */
static void hub_end(dlock__aop *op) {
  hub *h = op->ctx;
  if (h->e && h->e->hub == h)
    h->e->hub = NULL;
  h->e = NULL;
  h->closing = 1;
  int rc = op->res.rc;
  const char *why = op->errmsg ? op->errmsg : "client closed";
  while (h->first) {
    observer *o = h->first;
    h->first = o->next;
    o->h = NULL;
    free(o->op->errmsg);
    o->op->errmsg = strdup(why);
    dlock__aop_finish(o->op, rc);
  }
}

static const dlock__outer hub_outer = {.end = hub_end};

static void hub_done(void *data, const dlock_result *r) {
  (void)data, (void)r; /* its observers were told (hub_end) */
}

/* e's hub, made on first use (engine thread), or NULL with *rc why. */
static hub *hub_of(dlock_election *e, dlock_client *c, int *rc) {
  if (e->hub)
    return e->hub;
  *rc = DLOCK_ENOMEM;
  hub *h = calloc(1, sizeof *h);
  dlock__aop *op = NULL;
  if (h == NULL || dlock__aop_new_on(c, &e->base.h, DLOCK__AOP_OTHER, hub_done,
                                     NULL, &op) != DLOCK_OK) {
    free(h);
    dlock__fail(DLOCK_ENOMEM, "out of memory");
    return NULL;
  }
  pthread_mutex_init(&h->mu, NULL);
  h->e = e;
  h->op = op;
  dlock__owner(c, e->base.bound_owner, h->mine);
  op->internal = 1; /* its end reads nothing of the handle */
  op->ctx = h;
  op->ctx_free = hub_free;
  op->outer = &hub_outer; /* its end */
  e->hub = h;
  tl_hub_rc = DLOCK_ENOMEM;
  if (dlock__aop_start_here(op, hub_start) != DLOCK_OK) {
    e->hub = NULL; /* freed: ctx_free */
    return NULL;
  }
  *rc = tl_hub_rc;
  return e->hub; /* NULL when it ended at once (refused: *rc) */
}

/* ---- an observer's operation ----------------------------------------------- */

/* An observer ends (cancelled, the client closed): it leaves its hub, the
 * hub's last one closes it. */
static void observer_end(dlock__aop *op) {
  observer *o = op->ctx;
  hub *h = o->h;
  if (h == NULL)
    return;
  if (o->prev)
    o->prev->next = o->next;
  else
    h->first = o->next;
  if (o->next)
    o->next->prev = o->prev;
  o->h = NULL;
  if (h->first == NULL) {
    if (h->e && h->e->hub == h)
      h->e->hub = NULL;
    h->e = NULL;
    h->closing = 1;
    dlock__aop_ready(h->op, 0);
  }
}

static const dlock__outer observer_outer = {.end = observer_end};

static void observer_ready(dlock__aop *op) {
  (void)op; /* a cancel: async ends it before this runs */
}

static void observer_start(dlock__aop *op) {
  observer *o = op->ctx;
  dlock_election *e = (dlock_election *)op->h;
  op->on_ready = observer_ready;
  op->stage = DLOCK__AOP_WAITING;
  int rc;
  hub *h = hub_of(e, op->c, &rc);
  if (h == NULL) { /* the message is set */
    dlock__aop_finish(op, rc);
    return;
  }
  op->outer = &observer_outer; /* set once started: not a combinator */
  o->h = h;
  o->next = h->first;
  if (h->first)
    h->first->prev = o;
  h->first = o;
  if (h->told) { /* the state now, from what the hub knows */
    o->started = 1;
    dlock_election_event *ev =
        event(h->vacant ? DLOCK_VACANT : DLOCK_ELECTED, &h->last, 0);
    if (ev)
      deliver(o, ev);
    free(ev);
  }
}

int dlock_election_observe(dlock_election *e, dlock_done_fn *done, void *data,
                           dlock_op *out) {
  dlock__clear_error();
  if (out)
    *out = 0;
  int rc = dlock__aop_check(e ? &e->base.h : NULL, "election", done);
  if (rc != DLOCK_OK)
    return rc;
  observer *o = calloc(1, sizeof *o);
  dlock__aop *op = o ? dlock__aop_new(&e->base.h, DLOCK__AOP_AWAIT, done, data)
                     : NULL;
  if (op == NULL) {
    free(o);
    return dlock__oom();
  }
  o->op = op;
  op->ctx = o;
  return dlock__aop_start(op, observer_start, out);
}
