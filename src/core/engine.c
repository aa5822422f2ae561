/* A client's engine thread: request queue, loop, blocking calls.
 *
 * Application threads never touch a connection. They build a request (RESP
 * bytes plus a completion), push it on the client's queue and wake the loop
 * with uv_async_send. The loop drains the whole queue into the connection's
 * output buffer, and a prepare handle writes that buffer once per loop turn:
 * commands from many threads share one write and one read (automatic
 * pipelining). A blocking call waits on its own thread's condition variable,
 * never on a lock shared with other callers. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "net/topology.h"
#include "base/scripts.h"

static _Thread_local dlock__parker tl_parker;
static const dlock__attachment *attachment; /* set at load, read after */

void dlock__engine_attach(const dlock__attachment *a) { attachment = a; }

const dlock__attachment *dlock__engine_attached(void) { return attachment; }
static _Thread_local int tl_on_engine;
int dlock__ack_missed(dlock_client *c, const dlock__req *req, char *why,
                        size_t n) {
  const dlock__ack *a = &req->ack;
  if (a->wait_asked > 0 && a->waited < 0) {
    /* an ACL without +wait is for the operator; any other refusal (the
     * master turned replica while it waited: "UNBLOCKED ... master ->
     * replica") is the moment's, as a WAIT that counted none */
    int perm = strncmp(req->errmsg, "NOPERM", 6) == 0;
    snprintf(why, n, "replica guard: the server refused WAIT (%s)%s",
             req->errmsg, perm ? ": the ACL user needs +wait "
                                 "(docs/security.md)" : "");
    return perm ? DLOCK_EPERM : DLOCK_EIO;
  }
  if (a->wait_asked > 0 && a->waited == 0) {
    snprintf(why, n, "replica guard: the write reached none of the %d "
             "replicas of its master (slot %d) within replica_sync_ms "
             "(%lld ms)", a->wait_asked, req->slot,
             (long long)c->opts.replica_sync_ms);
    return DLOCK_EIO;
  }
  if (a->bare) {
    snprintf(why, n, "replica guard: the master (slot %d) counts no replica "
             "to confirm the write, and replica_sync_all asks for every one "
             "and at least one", req->slot);
    return DLOCK_EIO;
  }
  if (a->wait_asked > 0 && a->waited < a->wait_asked &&
      c->opts.replica_sync_all) {
    snprintf(why, n, "replica guard: the write reached %d of the %d "
             "replicas of its master (slot %d) within replica_sync_ms "
             "(%lld ms), and replica_sync_all asks every one", a->waited,
             a->wait_asked, req->slot, (long long)c->opts.replica_sync_ms);
    return DLOCK_EIO;
  }
  if (a->aof_asked && a->aof_local < 0) {
    int perm = strncmp(req->errmsg, "NOPERM", 6) == 0;
    snprintf(why, n, "durable: the server refused WAITAOF (%s)%s",
             req->errmsg, perm ? ": the ACL user needs +waitaof "
                                 "(docs/security.md)" : "");
    return perm ? DLOCK_EPERM : DLOCK_ECONFIG;
  }
  if (a->aof_asked && (a->aof_local < 1 ||
                       a->aof_replicas < c->opts.durable_replicas)) {
    snprintf(why, n, "durable: the write was not fsynced within durable_ms "
             "(%lld ms): by the server: %s; by replicas: %d of the %d asked",
             (long long)c->opts.durable_ms, a->aof_local < 1 ? "no" : "yes",
             a->aof_replicas, c->opts.durable_replicas);
    return DLOCK_EIO;
  }
  return 0;
}

int dlock__on_engine_thread(void) { return tl_on_engine; }

dlock__parker *dlock__parker_self(void) {
  dlock__parker *s = &tl_parker;
  if (!s->init) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, &attr);
    pthread_condattr_destroy(&attr);
    s->init = 1;
  }
  return s;
}

int dlock__park(dlock__parker *s, int64_t deadline_ms) {
  if (deadline_ms < 0)
    return pthread_cond_wait(&s->cv, &s->mu);
  struct timespec ts = {.tv_sec = deadline_ms / 1000,
                        .tv_nsec = (deadline_ms % 1000) * 1000000};
  return pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

/* ---- submitting ----------------------------------------------------------- */

int dlock__submit(dlock_client *c, dlock__req *req) {
  req->queued_ms = dlock__now_ms();
  req->next = NULL;
  pthread_mutex_lock(&c->qmu);
  if (c->closing) {
    pthread_mutex_unlock(&c->qmu);
    dlock__buf_free(&req->cmd);
    dlock__buf_free(&req->drop);
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  }
  int was_empty = c->qhead == NULL;
  if (c->qtail)
    c->qtail->next = req;
  else
    c->qhead = req;
  c->qtail = req;
  pthread_mutex_unlock(&c->qmu);
  if (was_empty) /* the engine drains everything on one wake-up */
    uv_async_send(&c->wake);
  return DLOCK_OK;
}

typedef struct call_state {
  dlock__parker *parker;
  int done;
  int status;
  redisReply *reply;
} call_state;

static void call_done(dlock__req *req, redisReply *reply, int status) {
  call_state *cs = req->data;
  pthread_mutex_lock(&cs->parker->mu);
  cs->reply = reply;
  cs->status = status;
  cs->done = 1;
  pthread_cond_signal(&cs->parker->cv);
  pthread_mutex_unlock(&cs->parker->mu);
}

/* This try was sent early (pubsub.c): take its answer. */
static int take_early(dlock__waiter *w, dlock__req *req, call_state *cs,
                      int64_t *sent_ms) {
  pthread_mutex_lock(&w->parker->mu);
  if (w->early_state == 0) {
    pthread_mutex_unlock(&w->parker->mu);
    return 0;
  }
  while (w->early_state == 1)
    dlock__park(w->parker, -1); /* bounded by the command timeout */
  cs->reply = w->early->reply;
  cs->status = w->early->status;
  req->ack = w->early->ack;
  snprintf(req->errmsg, sizeof req->errmsg, "%s", w->early->err);
  w->early->reply = NULL;
  w->early_state = 0;
  pthread_mutex_unlock(&w->parker->mu);
  req->written = 1; /* the engine sent it */
  *sent_ms = w->early->sent_ms;
  /* the same bytes (dlock__wait_rules.early): nothing else to send */
  dlock__buf_free(&req->cmd);
  return 1;
}

/* Keep a copy of the try w may have sent early next time. */
static void keep_try(dlock__waiter *w, const dlock__req *req) {
  w->early->cmd.len = 0;
  if (dlock__buf_add(&w->early->cmd, req->cmd.p, req->cmd.len) != DLOCK_OK)
    w->early->cmd.len = 0; /* never armed: the thread tries itself */
  w->early->script = req->script;
  w->early->tail = req->script_tail;
  w->early->argc = req->argc;
  w->early->slot = req->slot;
  w->early->ack_wanted = req->ack_wanted;
}

int dlock__engine_early(dlock__waiter *w, dlock__req *req, int *status,
                        redisReply **reply, int64_t *sent_ms) {
  call_state cs = {.parker = dlock__parker_self()};
  if (!take_early(w, req, &cs, sent_ms))
    return 0;
  *status = cs.status;
  *reply = cs.reply;
  return 1;
}

int dlock__engine_call(dlock_client *c, dlock__waiter *w, dlock__req *req,
                       int *status, redisReply **reply, int64_t *sent_ms) {
  call_state cs = {.parker = dlock__parker_self()};
  if (w)
    keep_try(w, req);
  req->done = call_done;
  req->data = &cs;
  atomic_fetch_add(&c->direct.piped, 1);
  int rc = dlock__submit(c, req);
  if (rc != DLOCK_OK) {
    atomic_fetch_sub(&c->direct.piped, 1);
    return rc;
  }
  *sent_ms = req->queued_ms; /* set by dlock__submit */
  pthread_mutex_lock(&cs.parker->mu);
  while (!cs.done)
    dlock__park(cs.parker, -1);
  pthread_mutex_unlock(&cs.parker->mu);
  atomic_fetch_sub(&c->direct.piped, 1);
  *status = cs.status;
  *reply = cs.reply;
  return DLOCK_OK;
}

int dlock__engine_task(dlock_client *c, dlock__req *req) {
  if (tl_on_engine) {
    dlock__buf_free(&req->cmd);
    dlock__buf_free(&req->drop);
    return dlock__fail(DLOCK_EINVAL, "blocking dlock call on an engine thread "
                       "(from a lost-lock callback?)");
  }
  int status;
  redisReply *reply = NULL;
  int64_t sent_ms;
  int rc = dlock__engine_call(c, NULL, req, &status, &reply, &sent_ms);
  if (reply)
    freeReplyObject(reply);
  if (rc == DLOCK_OK && status != DLOCK_OK)
    rc = dlock__fail(status, "%s", req->errmsg[0] ? req->errmsg
                                                  : dlock_strerror(status));
  return rc;
}

/* ---- the engine thread ---------------------------------------------------- */

void dlock__client_live_done(dlock_client *c) {
  if (--c->net.live > 0 || !c->net.stopping || c->closer == NULL)
    return;
  dlock__parker *s = c->closer; /* c may be freed once the closer wakes */
  int *done = c->closer_done;
  pthread_mutex_lock(&s->mu);
  *done = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* ---- what a client's net tells the engine (net/conn.h; the client's
 * table of them: client.c) ---------------------------------------------- */

void dlock__engine_on_live_done(dlock__net *n) {
  dlock__client_live_done(dlock__net_client(n));
}

void dlock__engine_on_reconnected(dlock__net *n, const char *where) {
  dlock_event ev = {DLOCK_EVENT_RECONNECTED, where, strlen(where), 0, 0,
                    DLOCK_OK, 0};
  dlock__event(dlock__net_client(n), &ev);
  dlock__watchdog_soon(dlock__net_client(n));
}

void dlock__engine_on_rehome(dlock__net *n) {
  dlock__pubsub_rehome(dlock__net_client(n));
}

static void on_handle_closed(uv_handle_t *h) {
  dlock__client_live_done(h->data);
}

static void engine_shutdown(dlock_client *c) {
  if (c->net.stopping)
    return;
  c->net.stopping = 1;
  dlock__pubsub_shutdown(c);
  dlock__conn_shutdown(&c->net.cmd, DLOCK_ECLOSED);
  dlock__conn_shutdown(&c->net.sub, DLOCK_ECLOSED);
  c->net.topo->shutdown(&c->net, DLOCK_ECLOSED);
  dlock__watchdog_shutdown(c);
  if (attachment && attachment->stopping) /* after the requests in flight */
    attachment->stopping(c);
  uv_close((uv_handle_t *)&c->watchdog_timer, on_handle_closed);
  uv_close((uv_handle_t *)&c->deadline_timer, on_handle_closed);
  uv_close((uv_handle_t *)&c->sweep_timer, on_handle_closed);
  uv_close((uv_handle_t *)&c->flush, on_handle_closed);
  uv_close((uv_handle_t *)&c->wake, on_handle_closed);
}

static void on_wake(uv_async_t *a) {
  dlock_client *c = a->data;
  pthread_mutex_lock(&c->qmu);
  dlock__req *req = c->qhead;
  int closing = c->closing;
  c->qhead = c->qtail = NULL;
  pthread_mutex_unlock(&c->qmu);
  while (req) {
    dlock__req *next = req->next;
    if (closing && (req->task || !req->linger))
      dlock__req_finish(req, NULL, DLOCK_ECLOSED, "client closed");
    else if (closing)
      c->net.topo->send_last(&c->net, req);
    else if (req->task)
      req->task(c, req);
    else
      dlock__send(c, req);
    req = next;
  }
  if (closing) {
    /* Best effort, without waiting: requests already made (a RedLock's
     * releases that did not wait for every member, say) reach the server
     * even when the client is closed right after. */
    dlock__conn_flush(&c->net.cmd);
    c->net.topo->flush(&c->net);
    engine_shutdown(c);
  }
}

static void on_prepare(uv_prepare_t *p) {
  dlock_client *c = p->data;
  if (attachment && attachment->turn) /* async ops woken this turn: tries */
    attachment->turn(c);
  dlock__conn_flush(&c->net.cmd);
  dlock__conn_flush(&c->net.sub);
  c->net.topo->flush(&c->net);
}

/* c's handles on its engine's loop: on the engine thread, or before it
 * runs. */
static void client_attach(dlock_client *c) {
  uv_async_init(c->net.loop, &c->wake, on_wake);
  c->wake.data = c;
  uv_prepare_init(c->net.loop, &c->flush);
  c->flush.data = c;
  uv_prepare_start(&c->flush, on_prepare);
  uv_timer_init(c->net.loop, &c->watchdog_timer);
  c->watchdog_timer.data = c;
  uv_timer_init(c->net.loop, &c->deadline_timer);
  c->deadline_timer.data = c;
  uv_timer_init(c->net.loop, &c->sweep_timer);
  c->sweep_timer.data = c;
  c->net.live = 5;
  dlock__conn_init(&c->net, &c->net.cmd, 0);
  dlock__conn_init(&c->net, &c->net.sub, 1);
  c->net.topo->attach(&c->net);
}

/* c's connections and watchdog start (engine thread). */
static void client_start(dlock_client *c) {
  c->net.topo->start(&c->net);
  dlock__watchdog_start(c);
}

void dlock__send(dlock_client *c, dlock__req *req) { c->net.topo->send(&c->net, req); }

static void engine_main(void *arg) {
  dlock_client *c = arg;
  uv_loop_t *loop = c->net.loop; /* c may be closed and freed before the end */
  tl_on_engine = 1;
  client_start(c);
  uv_run(loop, UV_RUN_DEFAULT);
}

/* dlock_client_opts.share_engine: attach and start c on the engine thread */
static void attach_task(dlock_client *owner, dlock__req *req) {
  (void)owner;
  dlock_client *c = req->arg;
  client_attach(c);
  client_start(c);
  dlock__req_finish(req, NULL, DLOCK_OK, NULL);
}

/* A client is done with its engine; the last one stops the thread (whose
 * loop has nothing left to run) and frees it. */
static void engine_release(dlock__engine *e) {
  if (e == NULL || atomic_fetch_sub(&e->users, 1) != 1)
    return;
  uv_thread_join(&e->thread);
  uv_loop_close(&e->loop);
  free(e);
}

/* libuv aborts when its table of descriptors must grow and cannot (a
 * watcher started on a descriptor past its end: uv__io_start). Grow it
 * here, at open, to cover descriptors below PRESIZE_FDS (or the process's
 * limit), so that a connection made later (a reconnect mid-hold, a
 * subscription) allocates nothing there: 16 KiB a loop. A watcher on a
 * descriptor numbered there, started and stopped before the loop runs. */
#define PRESIZE_FDS 1024
static void presize(dlock__engine *e) {
  struct rlimit rl;
  int last = PRESIZE_FDS - 1;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < PRESIZE_FDS)
    last = (int)rl.rlim_cur - 1;
  int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  int high = fd >= 0 && fd < last ? fcntl(fd, F_DUPFD_CLOEXEC, last) : -1;
  if (high >= 0 && uv_poll_init(&e->loop, &e->presize, high) == 0) {
    if (uv_poll_start(&e->presize, UV_READABLE, NULL) == 0)
      uv_poll_stop(&e->presize);
    uv_close((uv_handle_t *)&e->presize, NULL);
  }
  if (high >= 0)
    close(high);
  if (fd >= 0)
    close(fd);
}

/* A new engine thread for c, which it starts. */
static int engine_new(dlock_client *c) {
  dlock__engine *e = calloc(1, sizeof *e);
  if (e == NULL)
    return dlock__fail(DLOCK_ENOMEM, "out of memory setting up the client");
  int rc = uv_loop_init(&e->loop);
  if (rc != 0) {
    free(e);
    if (rc == UV_EMFILE || rc == UV_ENFILE) /* its epoll and event fds */
      return dlock__fail(DLOCK_EIO, "cannot set up the client: %s%s",
                         uv_strerror(rc), dlock__fd_hint(rc));
    return dlock__fail(DLOCK_ENOMEM, "out of memory setting up the client");
  }
  presize(e);
  atomic_init(&e->users, 1);
  c->engine = e;
  c->net.loop = &e->loop;
  client_attach(c);
  /* The engine thread runs with every signal blocked: the application's
   * signals go to its own threads, and the SIGPIPE a write to a connection
   * the server closed would raise stays pending instead of killing the
   * process (the write fails with EPIPE and the connection is re-opened). */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int started = uv_thread_create(&e->thread, engine_main, c);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (started != 0) {
    engine_shutdown(c);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_loop_close(&e->loop);
    free(e);
    c->engine = NULL;
    return dlock__fail(DLOCK_ENOMEM, "cannot start the engine thread (out of "
                                     "memory or of threads)");
  }
  return DLOCK_OK;
}

/* c runs on the engine of the open client `with`. */
static int engine_share(dlock_client *c, dlock_client *with) {
  if (atomic_load(&with->closed))
    return dlock__fail(DLOCK_EINVAL, "share_engine: that client is closed");
  dlock__engine *e = with->engine;
  atomic_fetch_add(&e->users, 1);
  c->engine = e;
  c->net.loop = &e->loop;
  dlock__req req;
  dlock__req_task(&req, attach_task, c);
  int rc = dlock__engine_task(with, &req);
  if (rc != DLOCK_OK) { /* `with` is closing: c has nothing on the loop */
    c->engine = NULL;
    engine_release(e);
    return dlock__fail(rc == DLOCK_ECLOSED ? DLOCK_EINVAL : rc,
                       "share_engine: that client is closing");
  }
  return DLOCK_OK;
}

int dlock__engine_start(dlock_client *c, dlock_client *share_with) {
  return share_with ? engine_share(c, share_with) : engine_new(c);
}

struct dlock__async *dlock__client_async(const dlock_client *c) {
  return c->async;
}

void dlock__client_set_async(dlock_client *c, struct dlock__async *a) {
  c->async = a;
}

void dlock__client_wake(dlock_client *c) {
  /* under qmu: a closing client's wake handle may be going away */
  pthread_mutex_lock(&c->qmu);
  if (!c->closing)
    uv_async_send(&c->wake);
  pthread_mutex_unlock(&c->qmu);
}

uv_loop_t *dlock__client_loop(const dlock_client *c) { return c->net.loop; }

void dlock__client_live(dlock_client *c, int delta) { c->net.live += delta; }

int dlock__client_stopping(const dlock_client *c) { return c->net.stopping; }

int dlock__client_same_engine(const dlock_client *a, const dlock_client *b) {
  return a->engine == b->engine;
}

void dlock__engine_stop(dlock_client *c) {
  /* wait until the loop is done with c (every handle closed, every
   * request ended): set before closing, which the engine reads under qmu */
  int done = 0;
  dlock__parker *s = dlock__parker_self();
  c->closer = s;
  c->closer_done = &done;
  pthread_mutex_lock(&c->qmu);
  c->closing = 1;
  pthread_mutex_unlock(&c->qmu);
  uv_async_send(&c->wake);
  pthread_mutex_lock(&s->mu);
  while (!done)
    dlock__park(s, -1);
  pthread_mutex_unlock(&s->mu);
  engine_release(c->engine);
}
