/* Riders: calls made while every direct connection of a pool is busy
 * share a few connections, lanes (docs/threading.md, "The direct path").
 *
 * While every direct connection of a pool is busy, a call does not go to
 * the engine (two thread switches: caller to engine, engine to caller) but
 * rides one of the pool's shared connections, a lane: DLOCK__LANE_RIDERS
 * riders under way open a lane, up to DLOCK__LANES, and a thread keeps to
 * its seat's lane. A rider queues its command; one rider at a time drives
 * the lane: it writes every command queued (in one write, the kept latch
 * DELs in front), reads replies in order and hands each to its rider (one
 * wake-up each), writing what was queued meanwhile before it reads again;
 * once its own reply is in, it writes what was queued meanwhile (the
 * server has it while the next driver wakes) and the driving passes to
 * the oldest rider left. Many riders' calls reach the server in few
 * reads and come back in few, as on the engine's pipeline, without the
 * engine's thread in between; a lane of a few riders keeps the chain of
 * wake-ups behind one read short (measured in docs/performance.md: 16
 * threads did 1.2-1.6x the pairs of 16 connections as four lanes, 0.8x
 * as one). Plain connections only (a TLS session would be driven the
 * same way, but is not measured yet), and no call that waits for replicas
 * or the disk after its reply (the engine does those). */

#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "base/policy.h"
#include "direct/direct.h"

static void rider_push(dlock__rider **first, dlock__rider **last,
                       dlock__rider *r) {
  r->next = NULL;
  if (*last)
    (*last)->next = r;
  else
    *first = r;
  *last = r;
}

static dlock__rider *rider_pop(dlock__rider **first, dlock__rider **last) {
  dlock__rider *r = *first;
  if (r) {
    *first = r->next;
    if (*first == NULL)
      *last = NULL;
  }
  return r;
}

/* Hand r its outcome (the lane's mu held); the driver me needs no
 * wake-up. */
static void rider_done(dlock__rider *r, const dlock__rider *me, int status,
                       redisReply *reply, const char *why) {
  r->status = status;
  r->reply = reply;
  if (status != DLOCK_OK && why)
    snprintf(r->why, r->n, "%s", why);
  r->state = RIDE_DONE;
  if (r != me)
    sem_post(&r->wake);
}

/* The lane's connection broke (its mu held): every rider fails (those
 * whose command was not written yet go to the engine), the connection is
 * let go; it is closed by the caller (*gone). */
static void lane_fail(dlock__lane *l, const dlock__rider *me, const char *why,
                      dlock__dconn **gone) {
  dlock__rider *r;
  while ((r = rider_pop(&l->sent, &l->sent_last)) != NULL)
    rider_done(r, me, DLOCK_EIO, NULL, why);
  while ((r = rider_pop(&l->queued, &l->queued_last)) != NULL)
    rider_done(r, me, DLOCK__UNSENT, NULL, NULL);
  *gone = l->conn;
  l->conn = NULL;
}

/* The lane's next write (its mu held): the handshake of a new connection,
 * the latch DELs kept, then the queued commands, which are sent from
 * now on. The DELs' answers are skipped where they come: next
 * (dc->discard) when no reply is awaited, else just before the first
 * queued rider's (its skip), behind the replies still to come for the
 * riders sent before; with none queued then, the DELs wait for the next
 * write. DLOCK_OK, or DLOCK_ENOMEM (nothing taken). */
static int lane_gather(dlock__lane *l) {
  dlock__dconn *dc = l->conn;
  dlock__buf *b = &l->out;
  b->len = 0;
  int rc = DLOCK_OK;
  int dels = dc->later.len > 0 && (l->sent == NULL || l->queued != NULL);
  if (dc->hello.len > 0)
    rc = dlock__buf_add(b, dc->hello.p, dc->hello.len);
  if (rc == DLOCK_OK && dels)
    rc = dlock__buf_add(b, dc->later.p, dc->later.len);
  for (dlock__rider *r = l->queued; r && rc == DLOCK_OK; r = r->next)
    rc = dlock__buf_add(b, r->cmd, r->len);
  if (rc != DLOCK_OK)
    return rc;
  dlock__dconn_hello_wipe(dc);
  if (dels) {
    if (l->sent == NULL)
      dc->discard += dc->later_n;
    else
      l->queued->skip += dc->later_n;
    dc->later_n = 0;
    dc->later.len = 0;
  }
  dlock__rider *r;
  while ((r = rider_pop(&l->queued, &l->queued_last)) != NULL)
    rider_push(&l->sent, &l->sent_last, r);
  return DLOCK_OK;
}

/* Write what the lane holds to write (its mu held on entry and exit). A
 * failed write shuts the connection down: the read that follows finds it
 * broken and fails every rider. -1 when there was no memory to gather it
 * (nothing written, the connection shut down). */
static int lane_write(dlock_client *c, dlock__lane *l, int64_t deadline_us) {
  char why[1024];
  if (lane_gather(l) != DLOCK_OK) {
    shutdown(l->conn->s.fd, SHUT_RDWR);
    return -1;
  }
  if (l->out.len == 0)
    return 0;
  pthread_mutex_unlock(&l->mu);
  if (dlock__dconn_send(c, l->conn, l->out.p, l->out.len, deadline_us, why,
                        sizeof why) != DLOCK_OK)
    shutdown(l->conn->s.fd, SHUT_RDWR);
  pthread_mutex_lock(&l->mu);
  return 0;
}

/* Read one reply, then those parsed with it, to their riders (the lane's
 * mu held on entry and exit; a rider's reply is awaited). 0, or -1 when
 * the connection failed (*gone: to close). */
static int lane_read(dlock_client *c, dlock__lane *l, const dlock__rider *me,
                     dlock__dconn **gone) {
  dlock__dconn *dc = l->conn;
  char why[1024];
  redisReply *x = NULL;
  int64_t deadline = l->sent->deadline_us;
  pthread_mutex_unlock(&l->mu);
  /* parsed already, or (nothing is) sleep in recv until it comes */
  int rc = dlock__dconn_read(c, dc, deadline, 0, &x, why, sizeof why);
  pthread_mutex_lock(&l->mu);
  if (rc == DLOCK_OK && dc->refused) { /* its AUTH, SELECT or SETNAME: the
                                          server changed since the engine
                                          connected (the engine says how) */
    freeReplyObject(x);
    rc = DLOCK_EIO;
    dlock__dconn_say(c, dc, why, sizeof why,
                     "the server refused the handshake");
  }
  while (rc == DLOCK_OK && x != NULL && l->sent != NULL) {
    if (l->sent->skip > 0) { /* a latch DEL's, written in front of it */
      l->sent->skip--;
      freeReplyObject(x);
    } else {
      rider_done(rider_pop(&l->sent, &l->sent_last), me, DLOCK_OK, x, NULL);
    }
    /* parsed already, not read */
    rc = dlock__dconn_pump(c, dc, 0, &x, why, sizeof why);
  }
  if (rc == DLOCK_OK && x != NULL) { /* a reply nobody asked for */
    freeReplyObject(x);
    rc = DLOCK_EIO;
    dlock__dconn_say(c, dc, why, sizeof why, "a reply to no command");
  }
  if (rc == DLOCK_OK)
    return 0;
  lane_fail(l, me, why, gone);
  return -1;
}

/* The driving passes to the oldest rider left, whose reply comes first
 * (the lane's mu held); with none, the lane is free. */
static void lane_pass(dlock__lane *l) {
  dlock__rider *next = l->sent ? l->sent : l->queued;
  if (next) {
    next->state = RIDE_DRIVE;
    sem_post(&next->wake);
  } else {
    l->driving = 0;
  }
}

/* Drive the lane until me's reply is in (its mu held on entry and exit),
 * write what was queued meanwhile, then pass the driving on: the queued
 * calls reach the server while the next driver wakes, not after it
 * (docs/performance.md, "The departing driver's write"). */
static void lane_drive(dlock_client *c, dlock__lane *l, dlock__rider *me) {
  dlock__dconn *gone = NULL;
  while (me->state != RIDE_DONE) {
    if (l->queued && lane_write(c, l, me->deadline_us) != 0) {
      lane_fail(l, me, "out of memory", &gone);
      break;
    }
    if (lane_read(c, l, me, &gone) != 0)
      break;
  }
  if (gone == NULL && l->queued && lane_write(c, l, me->deadline_us) != 0)
    lane_fail(l, me, "out of memory", &gone);
  lane_pass(l);
  if (gone) {
    pthread_mutex_unlock(&l->mu);
    dlock__dconn_discard(c, gone);
    pthread_mutex_lock(&l->mu);
  }
}

/* The lane's connection (its mu held), opened now when there is none:
 * NULL when it cannot be (the engine then makes the call). */
static dlock__dconn *lane_conn(dlock_client *c, dlock__dpool *p,
                               dlock__lane *l) {
  if (l->conn && !l->driving && !dlock__dconn_alive(l->conn)) {
    dlock__dconn *gone = l->conn; /* idle, and closed meanwhile (a restart,
                                     CLIENT KILL, a move) */
    l->conn = NULL;
    pthread_mutex_unlock(&l->mu);
    dlock__dconn_discard(c, gone);
    pthread_mutex_lock(&l->mu);
  }
  if (l->conn || l->opening)
    return l->conn;
  l->opening = 1;
  pthread_mutex_unlock(&l->mu);
  int moved;
  dlock__dconn *dc = dlock__dconn_open(c, p, &moved); /* on the busy list */
  pthread_mutex_lock(&l->mu);
  l->opening = 0;
  if (dc != NULL)
    l->conn = dc;
  else if (!moved)
    dlock__dpool_back_off(c, p); /* the engine says what is wrong */
  return dc;
}

/* The lane of the calling thread: threads take seats in turn, and the
 * riders under way decide how many lanes are open. */
static dlock__lane *lane_for(dlock_client *c, dlock__dpool *p) {
  static atomic_uint seats;
  static _Thread_local unsigned seat;
  if (seat == 0)
    seat = atomic_fetch_add_explicit(&seats, 1, memory_order_relaxed) + 1;
  int riders = atomic_load_explicit(&c->direct.piped, memory_order_relaxed);
  int n = (riders + DLOCK__LANE_RIDERS - 1) / DLOCK__LANE_RIDERS;
  n = n < 1 ? 1 : n > DLOCK__LANES ? DLOCK__LANES : n;
  return &p->lanes[seat % (unsigned)n];
}

/* The DEL of a release's latch, kept to go in front of the lane's next
 * write (the sweep sends it when the lane stays idle). */
static void ride_drop(dlock_client *c, dlock__lane *l, const dlock__buf *key) {
  pthread_mutex_lock(&l->mu);
  if (l->conn != NULL)
    dlock__dconn_keep_del(l->conn, key);
  pthread_mutex_unlock(&l->mu);
  dlock__direct_sweep_due(c);
}

/* Engine thread, the sweep: the latch DELs of idle lanes are written
 * (and their answers left to the next driver). 1 when a lane that kept
 * some was being driven (the sweep comes again). */
int dlock__lanes_sweep(dlock_client *c) {
  int again = 0;
  for (int i = 0; i < c->direct.npools; i++) {
    for (int k = 0; k < DLOCK__LANES; k++) {
      dlock__lane *l = &c->direct.pools[i].lanes[k];
      pthread_mutex_lock(&l->mu);
      if (l->conn && l->conn->later.len > 0 && l->driving) {
        again = 1;
      } else if (l->conn && l->conn->later.len > 0) {
        l->driving = 1; /* riders that come meanwhile queue */
        (void)lane_write(c, l,
                         dlock__now_us() + c->opts.command_timeout_ms * 1000);
        lane_pass(l); /* riders that came meanwhile drive on */
      }
      pthread_mutex_unlock(&l->mu);
    }
  }
  return again;
}

/* One ride of req on lane l: DLOCK_OK with *reply, an error with
 * req->errmsg, DLOCK__UNSENT (not written: the engine makes it), or
 * -1 when there is no connection (the engine makes the call). */
static int ride_once(dlock_client *c, dlock__dpool *p, dlock__lane *l,
                     dlock__req *req, dlock__rider *me, redisReply **reply) {
  pthread_mutex_lock(&l->mu);
  dlock__dconn *dc = l->driving ? l->conn : lane_conn(c, p, l);
  if (dc == NULL) {
    pthread_mutex_unlock(&l->mu);
    return -1;
  }
  me->state = RIDE_WAIT;
  me->skip = 0;
  me->cmd = req->cmd.p;
  me->len = req->cmd.len;
  me->deadline_us = dlock__now_us() + c->opts.command_timeout_ms * 1000;
  req->written = 1; /* from here on it may have run */
  rider_push(&l->queued, &l->queued_last, me);
  if (!l->driving) {
    l->driving = 1;
    lane_drive(c, l, me);
  } else { /* woken without the lane's mu unless it is to drive */
    pthread_mutex_unlock(&l->mu);
    while (sem_wait(&me->wake) != 0 || me->state == RIDE_WAIT)
      ; /* EINTR */
    if (me->state == RIDE_DONE) {
      *reply = me->reply;
      return me->status;
    }
    pthread_mutex_lock(&l->mu);
    lane_drive(c, l, me);
  }
  pthread_mutex_unlock(&l->mu);
  *reply = me->reply;
  return me->status;
}

/* req's round trip as a rider on slot's pool: as round_trip's outcomes
 * (DLOCK_OK with *reply, an error with req->errmsg, DLOCK__UNSENT),
 * or -1 when it cannot ride (the engine makes the call). */
int dlock__ride(dlock_client *c, dlock__req *req, redisReply **reply) {
  dlock__direct *d = &c->direct;
  if (c->net.tls || req->ack_wanted || atomic_load(&d->waiting) != 0)
    return -1; /* (a lock's waiter may have come since begin() looked) */
  dlock__dpool *p = dlock__dpool_ready(c, req->slot);
  if (p == NULL)
    return -1;
  dlock__lane *l = lane_for(c, p);
  dlock__rider me = {.why = req->errmsg, .n = sizeof req->errmsg};
  sem_init(&me.wake, 0, 0);
  int rc = ride_once(c, p, l, req, &me, reply);
  if (rc == DLOCK_OK && dlock__classify(*reply) == DLOCK__C_NOSCRIPT) {
    freeReplyObject(*reply); /* once more as EVAL */
    *reply = NULL;
    if (dlock__req_to_eval(req) != DLOCK_OK) {
      snprintf(req->errmsg, sizeof req->errmsg, "out of memory");
      rc = DLOCK_ENOMEM;
    } else {
      rc = ride_once(c, p, l, req, &me, reply);
    }
  }
  sem_destroy(&me.wake);
  if (rc == DLOCK_EIO)
    /* the server is in trouble: the engine knows how to wait */
    dlock__dpool_back_off(c, p);
  if (rc == DLOCK_OK && dlock__direct_followed(c, *reply)) {
    freeReplyObject(*reply); /* not run there: the engine follows it */
    *reply = NULL;
    req->errmsg[0] = '\0';
    return DLOCK__UNSENT;
  }
  if (rc == DLOCK_OK && req->drop.len > 0 &&
      (*reply)->type != REDIS_REPLY_ERROR)
    ride_drop(c, l, &req->drop);
  return rc;
}


/* A closing client's idle lanes send the latch DELs they kept, without
 * waiting (their connections are shut down next). */
void dlock__lanes_flush(dlock_client *c) {
  for (int i = 0; i < c->direct.npools; i++) {
    for (int k = 0; k < DLOCK__LANES; k++) {
      dlock__lane *l = &c->direct.pools[i].lanes[k];
      pthread_mutex_lock(&l->mu);
      if (l->conn && !l->driving)
        dlock__dconn_flush_kept(l->conn);
      pthread_mutex_unlock(&l->mu);
    }
  }
}

void dlock__lanes_init(dlock__dpool *p) {
  for (int k = 0; k < DLOCK__LANES; k++)
    pthread_mutex_init(&p->lanes[k].mu, NULL);
}

void dlock__lanes_free(dlock_client *c, dlock__dpool *p) {
  for (int k = 0; k < DLOCK__LANES; k++) {
    dlock__lane *l = &p->lanes[k];
    dlock__dconn_discard(c, l->conn);
    l->conn = NULL;
    dlock__buf_free(&l->out);
    pthread_mutex_destroy(&l->mu);
  }
}
