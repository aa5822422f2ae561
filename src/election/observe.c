/* An election's observers (dlock_election_observe): an async operation
 * that lives until cancelled, on the engine thread. It subscribes to the
 * election's channel, whose messages (docs/wire.md, "Leader election")
 * carry each change whole, so an observer reads the record only when it
 * begins, when its subscription is made again after a drop (changes may
 * have passed unseen: the event says resync), and at the end of the
 * leader's lease as last seen (a term that ends with no message: a crashed
 * leader). Every change it learns of, it tells once, in order: the state
 * it knew is ordered by (term, version, vacant). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async/async.h"
#include "election/election_impl.h"

typedef struct obs_msg {
  struct obs_msg *next;
  size_t len;
  char text[];
} obs_msg;

typedef struct observer {
  dlock_election *e;
  pthread_mutex_t mu;     /* the messages (queued under the client's cmu) */
  obs_msg *head, *tail;
  int dropped;            /* a message could not be kept: read the state */
  /* engine thread */
  int begun;              /* the first read was sent */
  int due;                /* a read is due (the lease's end, a drop) */
  int resync;             /* tell the next event as a resync */
  int told;               /* the state below was told */
  dlock_leader last;      /* what was told last (value: not kept) */
  int vacant;
} observer;

static void observer_free(void *ctx) {
  observer *o = ctx;
  for (obs_msg *m = o->head, *next; m; m = next) {
    next = m->next;
    free(m);
  }
  pthread_mutex_destroy(&o->mu);
  free(o);
}

static uint32_t wake_none(const char *msg, size_t len) {
  (void)msg, (void)len;
  return 0; /* messages are read (on_message), not woken on */
}

/* The waiter's: a message (cmu held: only queue). */
static void on_message(dlock__waiter *w, const char *text, size_t len) {
  dlock__aop *op = w->data;
  observer *o = op->ctx;
  obs_msg *m = malloc(sizeof *m + len + 1);
  pthread_mutex_lock(&o->mu);
  if (m == NULL) {
    o->dropped = 1;
  } else {
    m->next = NULL;
    m->len = len;
    memcpy(m->text, text, len);
    m->text[len] = '\0';
    if (o->tail)
      o->tail->next = m;
    else
      o->head = m;
    o->tail = m;
  }
  pthread_mutex_unlock(&o->mu);
  dlock__aop_ready(op, 0);
}

/* The confirmation, a subscription made again, the close. */
static void notify(dlock__waiter *w) {
  dlock__aop_ready(w->data, !dlock__on_engine_thread());
}

/* ---- telling ------------------------------------------------------------------- */

/* Tell one change: the event and its value in one block (the op's
 * completion keeps it until its callback ran). */
static void tell(dlock__aop *op, int resync, dlock_election_change change,
                 const dlock_leader *l) {
  size_t vlen = change == DLOCK_VACANT ? 0 : l->value_len;
  dlock_election_event *ev = malloc(sizeof *ev + vlen + 1);
  if (ev == NULL)
    return; /* out of memory: the change is not told */
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
  dlock__aop_emit(op, ev, ev);
}

/* What the observer learnt (a message, or a read: l); tells what is newer
 * than what it told last, a vacancy first when a new term comes unseen. */
static void learn(dlock__aop *op, observer *o, const dlock_leader *l) {
  dlock_leader *last = &o->last;
  dlock_leader ended = *last; /* the term that ends, as it was told */
  ended.value = "";
  ended.value_len = 0;
  ended.lease_ms = -1;
  int rs = o->resync; /* every event of this change says it */
  int differs = l->leading != !o->vacant || l->term != last->term ||
                (l->leading && l->version != last->version);
  if (!o->told || (o->resync && differs)) {
    /* the first state; or, after a drop, the state now whatever it is (a
     * server that restarted without its data counts terms from 0 again) */
    if (o->told && !o->vacant && l->leading)
      tell(op, rs, DLOCK_VACANT, &ended);
    tell(op, rs, l->leading ? DLOCK_ELECTED : DLOCK_VACANT, l);
  } else if (l->leading && l->term > last->term) {
    if (!o->vacant)
      tell(op, rs, DLOCK_VACANT, &ended);
    tell(op, rs, DLOCK_ELECTED, l);
  } else if (l->leading && l->term == last->term && !o->vacant &&
             l->version > last->version) {
    tell(op, rs, DLOCK_PROCLAIMED, l);
  } else if (!l->leading && !o->vacant && l->term >= last->term) {
    tell(op, rs, DLOCK_VACANT, &ended);
  } else {
    return; /* old news */
  }
  o->resync = 0;
  o->told = 1;
  if (l->leading || differs)
    *last = *l;
  last->value = NULL;
  last->value_len = 0;
  o->vacant = !l->leading;
}

/* A message "K term version since owner lease\nvalue" (K: E elected, P
 * proclaimed, V vacant) into *l; 0 when it is not one. */
static int parse(observer *o, const obs_msg *m, dlock_leader *l) {
  memset(l, 0, sizeof *l);
  const char *nl = memchr(m->text, '\n', m->len);
  char kind;
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
  char mine[64];
  dlock__owner(o->e->base.h.client, o->e->base.bound_owner, mine);
  l->mine = l->leading && strcmp(mine, l->owner) == 0;
  return 1;
}

/* ---- the operation --------------------------------------------------------------- */

static void on_ready(dlock__aop *op);

static void timer_fired(dlock__aop *op) {
  ((observer *)op->ctx)->due = 1;
  on_ready(op);
}

/* After what it learnt: re-read at the end of the leader's lease (plus a
 * millisecond), when no message will say it ended. */
static void arm(dlock__aop *op, observer *o, int64_t lease_ms) {
  dlock__aop_timer(op, o->vacant || lease_ms < 0 ? -1 : lease_ms + 1,
                   timer_fired);
}

static void read_done(dlock__req *req, redisReply *reply, int status) {
  dlock__aop *op = req->data;
  observer *o = op->ctx;
  free(req);
  op->stage = DLOCK__AOP_WAITING;
  if (status == DLOCK_ECLOSED) {
    dlock__fail(DLOCK_ECLOSED, "client closed");
    dlock__aop_finish(op, DLOCK_ECLOSED);
    return;
  }
  dlock_leader l;
  int rc = status;
  if (status == DLOCK_OK) {
    rc = dlock__election_state_read(o->e, reply, &l);
    freeReplyObject(reply);
  }
  if (rc != DLOCK_OK) { /* the server is away: read again in a while */
    o->resync = 1;
    dlock__aop_timer(op, 1000, timer_fired);
  } else {
    learn(op, o, &l);
    arm(op, o, l.lease_ms);
    dlock_leader_clear(&l);
  }
  on_ready(op); /* what came meanwhile, a cancel */
}

static void read_state(dlock__aop *op, observer *o) {
  dlock__req *req = calloc(1, sizeof *req);
  int rc = req ? dlock__election_state_req(o->e, req)
               : dlock__fail(DLOCK_ENOMEM, "out of memory");
  if (rc != DLOCK_OK) {
    free(req);
    dlock__aop_finish(op, rc);
    return;
  }
  o->due = 0;
  o->begun = 1;
  dlock__aop_send(op, req, read_done);
}

/* The messages queued since last time, in order. */
static void drain(dlock__aop *op, observer *o) {
  pthread_mutex_lock(&o->mu);
  obs_msg *m = o->head;
  o->head = o->tail = NULL;
  if (o->dropped)
    o->due = o->resync = 1;
  o->dropped = 0;
  pthread_mutex_unlock(&o->mu);
  while (m) {
    obs_msg *next = m->next;
    dlock_leader l;
    if (o->begun && parse(o, m, &l)) {
      learn(op, o, &l);
      if (l.leading && l.lease_ms > 0)
        arm(op, o, l.lease_ms);
    }
    free(m);
    m = next;
  }
}

static void on_ready(dlock__aop *op) {
  observer *o = op->ctx;
  if (op->stage != DLOCK__AOP_WAITING)
    return; /* a read is in flight: its answer looks again */
  if (dlock__aop_cancelled(op)) {
    dlock__aop_finish(op, DLOCK_ECANCELED);
    return;
  }
  dlock__waiter *w = op->w;
  pthread_mutex_lock(&w->parker->mu);
  int closed = w->closed, denied = w->denied, confirmed = w->confirmed;
  int again = w->wakes != w->seen; /* subscribed again after a drop */
  w->seen = w->wakes;
  char why[160];
  memcpy(why, w->denied_why, sizeof why);
  pthread_mutex_unlock(&w->parker->mu);
  if (closed || denied) {
    int rc = closed ? dlock__fail(DLOCK_ECLOSED, "client closed")
                    : dlock__subscribe_denied("", 0, why);
    dlock__aop_finish(op, rc);
    return;
  }
  if (again && o->begun) /* what comes from now on follows a gap */
    o->due = o->resync = 1;
  drain(op, o);
  if (confirmed && (!o->begun || o->due))
    read_state(op, o);
}

static void start(dlock__aop *op) {
  observer *o = op->ctx;
  dlock__waiter *w = calloc(1, sizeof *w);
  if (w == NULL) {
    dlock__fail(DLOCK_ENOMEM, "out of memory");
    dlock__aop_finish(op, DLOCK_ENOMEM);
    return;
  }
  w->parker = &dlock__client_async(op->c)->parker;
  w->notify = notify;
  w->on_message = on_message;
  w->data = op;
  w->demand = 1;
  op->stage = DLOCK__AOP_WAITING;
  op->on_ready = on_ready;
  int rc = dlock__subscribe_async(op->c, o->e->channel.p, o->e->channel.len,
                                  wake_none, w);
  if (rc != DLOCK_OK) {
    free(w);
    dlock__aop_finish(op, rc);
    return;
  }
  op->w = w; /* the op's end unsubscribes it */
  on_ready(op);
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
    return dlock__fail(DLOCK_ENOMEM, "out of memory");
  }
  pthread_mutex_init(&o->mu, NULL);
  o->e = e;
  op->ctx = o;
  op->ctx_free = observer_free;
  return dlock__aop_start(op, start, out);
}
