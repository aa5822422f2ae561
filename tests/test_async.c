/* The non-blocking API (dlock/async.h) against a real server: grants,
 * waits woken by pub/sub, timeouts, cancellation (racing grants too),
 * closing with operations pending, a lost lease, owners shared with the
 * blocking calls, and both completion modes. */
#include <dirent.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "async/async.h"
#include "harness.h"

static th_server srv;

static int suite_init(void) { return th_main_server_start(&srv) != 0; }

static int suite_clean(void) {
  th_server_stop(&srv);
  return 0;
}

/* ---- collecting completions ---------------------------------------------- */

#define MAX_OPS 2048

typedef struct box {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n;                  /* completions so far */
  int calls[MAX_OPS];     /* per tag: how many times its callback ran */
  int rc[MAX_OPS];
  dlock_result last;
  char errmsg[256];
  int off_engine;         /* callbacks not on an engine thread */
  pthread_t thread;       /* of the latest callback */
} box;

typedef struct tag {
  box *b;
  int i;
} tag;

static void box_init(box *b) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
}

static void on_done(void *data, const dlock_result *r) {
  tag *t = data;
  box *b = t->b;
  pthread_mutex_lock(&b->mu);
  b->calls[t->i]++;
  b->rc[t->i] = r->rc;
  b->last = *r;
  snprintf(b->errmsg, sizeof b->errmsg, "%s", r->errmsg);
  b->off_engine += !dlock__on_engine_thread();
  b->thread = pthread_self();
  b->n++;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

/* Wait until n completions came, at most ms: the count. */
static int box_wait(box *b, int n, int ms) {
  int64_t until = th_now_ms() + ms;
  pthread_mutex_lock(&b->mu);
  while (b->n < n && th_now_ms() < until) {
    pthread_mutex_unlock(&b->mu);
    usleep(1000);
    pthread_mutex_lock(&b->mu);
  }
  int got = b->n;
  pthread_mutex_unlock(&b->mu);
  return got;
}

static tag tags[MAX_OPS];

static tag *tag_of(box *b, int i) {
  tags[i].b = b;
  tags[i].i = i;
  return &tags[i];
}

static dlock_lock *new_lock(dlock_client *c, const char *name) {
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  return l;
}

static char *channel_of(const char *name) {
  static char ch[200];
  snprintf(ch, sizeof ch, "redisson_lock__channel:{%s}", name);
  return ch;
}

/* How many of the keys exist (one EXISTS each: on a cluster they may live
 * on different masters). */
static long long exist(const char *a, const char *b, const char *c) {
  const char *keys[] = {a, b, c};
  long long n = 0;
  for (int i = 0; i < 3; i++)
    if (keys[i])
      n += th_int(&srv, "EXISTS %s", keys[i]);
  return n;
}

/* How many threads this process runs. */
static int thread_count(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (d == NULL)
    return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* ---- tests ------------------------------------------------------------------ */

/* A free lock is granted on the engine thread; the hold is the owner's,
 * which the state and the async release see. */
static void test_acquire_release(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("async-basic");
  dlock_lock *l = new_lock(c, name);
  uint64_t me = dlock_owner_id_new();
  box b;
  box_init(&b);
  dlock_op op = 0;
  TH_ASSERT_RC(dlock_acquire_async(l, me, 0, 30000, on_done, tag_of(&b, 0), &op),
               DLOCK_OK);
  CU_ASSERT(op != 0);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  CU_ASSERT_EQUAL(b.last.op, op);
  CU_ASSERT(b.last.grant.validity_ms > 29000 && b.last.grant.validity_ms <= 30000);
  CU_ASSERT_EQUAL(b.off_engine, 0);
  /* held by that owner: a re-entry by it, and the blocking state of a
   * handle bound to it */
  TH_ASSERT_RC(dlock_acquire_async(l, me, 0, 30000, on_done, tag_of(&b, 1), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[1], DLOCK_OK);
  TH_ASSERT_RC(dlock_lock_state_async(l, me, on_done, tag_of(&b, 2), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[2], DLOCK_OK);
  CU_ASSERT_EQUAL(b.last.state.locked, 1);
  CU_ASSERT_EQUAL(b.last.state.held_by_me, 1);
  CU_ASSERT_EQUAL(b.last.state.hold_count, 2);
  TH_ASSERT_RC(dlock_release_async(l, me, on_done, tag_of(&b, 3), NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_release_async(l, me, on_done, tag_of(&b, 4), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 5, 5000), 5);
  TH_ASSERT_RC(b.rc[3], DLOCK_OK);
  TH_ASSERT_RC(b.rc[4], DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  /* nothing left to release */
  TH_ASSERT_RC(dlock_release_async(l, me, on_done, tag_of(&b, 5), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 6, 5000), 6);
  TH_ASSERT_RC(b.rc[5], DLOCK_ENOTOWNER);
  CU_ASSERT_PTR_NOT_NULL(strstr(b.errmsg, name));
  for (int i = 0; i < 6; i++)
    CU_ASSERT_EQUAL(b.calls[i], 1);
  /* force release: one deleted, then nothing to delete */
  TH_ASSERT_RC(dlock_acquire_async(l, me, 0, 30000, on_done, tag_of(&b, 6), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 7, 5000), 7);
  TH_ASSERT_RC(dlock_force_release_async(l, on_done, tag_of(&b, 7), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 8, 5000), 8);
  TH_ASSERT_RC(b.rc[7], DLOCK_OK);
  CU_ASSERT_EQUAL(b.last.released, 1);
  TH_ASSERT_RC(dlock_force_release_async(l, on_done, tag_of(&b, 8), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 9, 5000), 9);
  CU_ASSERT_EQUAL(b.last.released, 0);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* A fenced lock's async grant carries its token, strictly increasing. */
static void test_fenced_tokens(void) {
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fenced_lock_new(c, th_name("async-fenced"), NULL, &l),
               DLOCK_OK);
  dlock_lock_bind_owner(l, dlock_owner_id_new());
  box b;
  box_init(&b);
  int64_t last = 0;
  for (int i = 0; i < 3; i++) {
    TH_ASSERT_RC(dlock_acquire_async(l, 0, 0, 30000, on_done, tag_of(&b, 2 * i),
                                     NULL), DLOCK_OK);
    CU_ASSERT_EQUAL(box_wait(&b, 2 * i + 1, 5000), 2 * i + 1);
    TH_ASSERT_RC(b.rc[2 * i], DLOCK_OK);
    CU_ASSERT(b.last.grant.token > last);
    last = b.last.grant.token;
    TH_ASSERT_RC(dlock_release_async(l, 0, on_done, tag_of(&b, 2 * i + 1), NULL),
                 DLOCK_OK);
    CU_ASSERT_EQUAL(box_wait(&b, 2 * i + 2, 5000), 2 * i + 2);
    TH_ASSERT_RC(b.rc[2 * i + 1], DLOCK_OK);
  }
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* A wait is woken by the release's message, not by its hint (the holder's
 * lease is 30 s), and takes no thread; try-once and a budget that runs
 * out say EBUSY and ETIMEDOUT. */
static void test_wait_woken(void) {
  dlock_client *c = th_client(&srv, NULL), *holder = th_client(&srv, NULL);
  const char *name = th_name("async-wait");
  dlock_lock *l = new_lock(c, name), *h = new_lock(holder, name);
  TH_ASSERT_RC(dlock_acquire(h, 0, 30000), DLOCK_OK);
  box b;
  box_init(&b);
  uint64_t me = dlock_owner_id_new();
  TH_ASSERT_RC(dlock_acquire_async(l, me, 0, 30000, on_done, tag_of(&b, 0), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_EBUSY);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_acquire_async(l, me, 150, 30000, on_done, tag_of(&b, 1), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[1], DLOCK_ETIMEDOUT);
  CU_ASSERT(th_now_ms() - t0 >= 150);
  int threads = thread_count();
  TH_ASSERT_RC(dlock_acquire_async(l, me, 20000, 30000, on_done, tag_of(&b, 2),
                                   NULL), DLOCK_OK);
  CU_ASSERT(th_wait_numsub(&srv, channel_of(name), 1, 5000));
  CU_ASSERT_EQUAL(thread_count(), threads); /* no thread for the wait */
  CU_ASSERT_EQUAL(b.n, 2);
  int64_t released = th_now_ms();
  TH_ASSERT_RC(dlock_release(h), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[2], DLOCK_OK);
  /* the message, not the 30 s hint: 1-6 ms with two CPU hogs running */
  CU_ASSERT(th_now_ms() - released < 2000);
  CU_ASSERT(th_wait_numsub(&srv, channel_of(name), 0, 5000)); /* unsubscribed */
  TH_ASSERT_RC(dlock_release_async(l, me, on_done, tag_of(&b, 3), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 4, 5000), 4);
  TH_ASSERT_RC(b.rc[3], DLOCK_OK);
  dlock_lock_free(l);
  dlock_lock_free(h);
  dlock_client_close(c);
  dlock_client_close(holder);
}

/* Many waiters on one lock, one thread: each grant's callback releases, and
 * the next waiter is let in by the release's message. */
#define CHAIN 200
typedef struct chain {
  dlock_lock *l;
  uint64_t owner[CHAIN];
  atomic_int granted, released, holders, max_holders, errors;
} chain;
static chain ch;

static void chain_released(void *data, const dlock_result *r) {
  if (r->rc != DLOCK_OK)
    atomic_fetch_add(&ch.errors, 1);
  atomic_fetch_add(&ch.released, 1);
}

static void chain_granted(void *data, const dlock_result *r) {
  int i = (int)(intptr_t)data;
  if (r->rc != DLOCK_OK) {
    atomic_fetch_add(&ch.errors, 1);
    return;
  }
  int now = atomic_fetch_add(&ch.holders, 1) + 1;
  if (now > atomic_load(&ch.max_holders))
    atomic_store(&ch.max_holders, now);
  atomic_fetch_add(&ch.granted, 1);
  atomic_fetch_sub(&ch.holders, 1);
  if (dlock_release_async(ch.l, ch.owner[i], chain_released, NULL, NULL) != DLOCK_OK)
    atomic_fetch_add(&ch.errors, 1);
}

static void test_many_waiters(void) {
  dlock_client *c = th_client(&srv, NULL), *holder = th_client(&srv, NULL);
  const char *name = th_name("async-chain");
  memset(&ch, 0, sizeof ch);
  ch.l = new_lock(c, name);
  dlock_lock *h = new_lock(holder, name);
  TH_ASSERT_RC(dlock_acquire(h, 0, 30000), DLOCK_OK);
  int threads = thread_count();
  for (int i = 0; i < CHAIN; i++) {
    ch.owner[i] = dlock_owner_id_new();
    TH_ASSERT_RC(dlock_acquire_async(ch.l, ch.owner[i], 30000, 30000,
                                     chain_granted, (void *)(intptr_t)i, NULL),
                 DLOCK_OK);
  }
  CU_ASSERT(th_wait_numsub(&srv, channel_of(name), 1, 5000));
  CU_ASSERT_EQUAL(thread_count(), threads);
  TH_ASSERT_RC(dlock_release(h), DLOCK_OK);
  int64_t until = th_now_ms() + 20000;
  while (atomic_load(&ch.released) < CHAIN && th_now_ms() < until)
    usleep(2000);
  CU_ASSERT_EQUAL(atomic_load(&ch.granted), CHAIN);
  CU_ASSERT_EQUAL(atomic_load(&ch.released), CHAIN);
  CU_ASSERT_EQUAL(atomic_load(&ch.errors), 0);
  CU_ASSERT_EQUAL(atomic_load(&ch.max_holders), 1);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  CU_ASSERT(th_wait_numsub(&srv, channel_of(name), 0, 5000));
  dlock_lock_free(ch.l);
  dlock_lock_free(h);
  dlock_client_close(c);
  dlock_client_close(holder);
}

/* A cancelled wait ends at once with DLOCK_ECANCELED and leaves nothing:
 * no hold, no subscription; a second cancel is too late. */
static void test_cancel_wait(void) {
  dlock_client *c = th_client(&srv, NULL), *holder = th_client(&srv, NULL);
  const char *name = th_name("async-cancel");
  dlock_lock *l = new_lock(c, name), *h = new_lock(holder, name);
  TH_ASSERT_RC(dlock_acquire(h, 0, 30000), DLOCK_OK);
  box b;
  box_init(&b);
  dlock_op op = 0;
  TH_ASSERT_RC(dlock_acquire_async(l, dlock_owner_id_new(), DLOCK_WAIT_FOREVER,
                                   30000, on_done, tag_of(&b, 0), &op), DLOCK_OK);
  CU_ASSERT(th_wait_numsub(&srv, channel_of(name), 1, 5000));
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  CU_ASSERT(th_now_ms() - t0 < 1000); /* 1-2 ms with two CPU hogs running */
  TH_ASSERT_RC(b.rc[0], DLOCK_ECANCELED);
  CU_ASSERT_EQUAL(b.calls[0], 1);
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_cancel(0), DLOCK_EINVAL);
  CU_ASSERT(th_wait_numsub(&srv, channel_of(name), 0, 5000));
  TH_ASSERT_RC(dlock_release(h), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  /* a release does not wait: it cannot be cancelled */
  uint64_t me = dlock_owner_id_new();
  TH_ASSERT_RC(dlock_acquire_async(l, me, 0, 30000, on_done, tag_of(&b, 1), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(dlock_release_async(l, me, on_done, tag_of(&b, 2), &op), DLOCK_OK);
  int rc = dlock_cancel(op);
  CU_ASSERT(rc == DLOCK_ENOTSUP || rc == DLOCK_EINVAL);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[2], DLOCK_OK);
  dlock_lock_free(l);
  dlock_lock_free(h);
  dlock_client_close(c);
  dlock_client_close(holder);
}

/* Cancels racing grants, many times: the holder releases and the waiter's
 * cancel follows at once. Whichever wins, nobody is left holding the lock
 * without knowing: a cancelled acquire's grant is given back, and a grant
 * that came first (the cancel too late) is the owner's to release. */
static void test_cancel_races_grant(void) {
  dlock_client *c = th_client(&srv, NULL), *holder = th_client(&srv, NULL);
  const char *name = th_name("async-race");
  dlock_lock *l = new_lock(c, name), *h = new_lock(holder, name);
  box b;
  box_init(&b);
  int cancelled = 0, granted = 0, bad = 0;
  long before = dlock__aop_given_back();
  for (int i = 0; i < 300; i++) {
    TH_ASSERT_RC(dlock_acquire(h, 0, 30000), DLOCK_OK);
    uint64_t me = dlock_owner_id_new();
    dlock_op op = 0;
    TH_ASSERT_RC(dlock_acquire_async(l, me, 10000, 30000, on_done,
                                     tag_of(&b, i), &op), DLOCK_OK);
    if (i % 3 != 0) /* most of them race the try the release wakes */
      CU_ASSERT(th_wait_numsub(&srv, channel_of(name), 1, 5000));
    uint64_t sent = th_commands(c);
    TH_ASSERT_RC(dlock_release(h), DLOCK_OK);
    if (i % 3 == 1) { /* cancel the moment the try is on its way */
      int64_t until = th_now_us() + 2000000;
      while (th_commands(c) == sent && th_now_us() < until) {
      }
    } else if (i % 3 == 2) {
      usleep((useconds_t)(i % 7) * 20); /* or a little later */
    }
    int crc = dlock_cancel(op);
    CU_ASSERT_EQUAL_FATAL(box_wait(&b, i + 1, 10000), i + 1);
    if (crc == DLOCK_OK) {
      bad += b.rc[i] != DLOCK_ECANCELED;
      cancelled++;
    } else {
      bad += crc != DLOCK_EINVAL || b.rc[i] != DLOCK_OK;
      granted++;
      dlock_lock_bind_owner(l, me);
      TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
      dlock_lock_bind_owner(l, 0);
    }
    /* a given-back grant is released by a request of its own: the lock
     * is free once it is in */
    int64_t until = th_now_ms() + 5000;
    while (th_int(&srv, "EXISTS %s", name) != 0 && th_now_ms() < until)
      usleep(200);
    CU_ASSERT_EQUAL_FATAL(th_int(&srv, "EXISTS %s", name), 0);
  }
  long given_back = dlock__aop_given_back() - before;
  printf("\n    cancels %d (grants given back %ld), grants first %d ", cancelled,
         given_back, granted);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(cancelled > 0);
  CU_ASSERT(given_back > 0); /* the race happened: a grant came after the cancel */
  for (int i = 0; i < 300; i++)
    CU_ASSERT_EQUAL(b.calls[i], 1);
  dlock_lock_free(l);
  dlock_lock_free(h);
  dlock_client_close(c);
  dlock_client_close(holder);
}

/* Closing a client completes every pending operation with DLOCK_ECLOSED,
 * once, before the close returns: waits, and tries in flight. */
static void test_close_pending(void) {
  for (int mode = 0; mode < 2; mode++) {
    dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
    o.completions = mode ? DLOCK_COMPLETE_QUEUE : DLOCK_COMPLETE_ENGINE;
    dlock_client *c = th_client(&srv, &o), *holder = th_client(&srv, NULL);
    const char *name = th_name("async-close");
    dlock_lock *l = new_lock(c, name), *h = new_lock(holder, name);
    TH_ASSERT_RC(dlock_acquire(h, 0, 30000), DLOCK_OK);
    box b;
    box_init(&b);
    for (int i = 0; i < 50; i++)
      TH_ASSERT_RC(dlock_acquire_async(l, dlock_owner_id_new(), DLOCK_WAIT_FOREVER,
                                       30000, on_done, tag_of(&b, i), NULL),
                   DLOCK_OK);
    CU_ASSERT(th_wait_numsub(&srv, channel_of(name), 1, 5000));
    for (int i = 50; i < 60; i++) /* and some just started */
      TH_ASSERT_RC(dlock_acquire_async(l, dlock_owner_id_new(), DLOCK_WAIT_FOREVER,
                                       30000, on_done, tag_of(&b, i), NULL),
                   DLOCK_OK);
    dlock_client_close(c);
    CU_ASSERT_EQUAL(b.n, 60); /* all of them, before the close returned */
    int eclosed = 0;
    for (int i = 0; i < 60; i++) {
      CU_ASSERT_EQUAL(b.calls[i], 1);
      eclosed += b.rc[i] == DLOCK_ECLOSED;
    }
    CU_ASSERT_EQUAL(eclosed, 60);
    if (mode) /* a queue client's ran on the closing thread */
      CU_ASSERT(pthread_equal(b.thread, pthread_self()));
    TH_ASSERT_RC(dlock_acquire_async(l, 7, 0, 30000, on_done, tag_of(&b, 60), NULL),
                 DLOCK_ECLOSED);
    usleep(100000); /* nothing comes late */
    CU_ASSERT_EQUAL(b.n, 60);
    TH_ASSERT_RC(dlock_release(h), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(h);
    dlock_client_close(holder);
  }
}

/* The completion queue: callbacks run only in dlock_client_run_completions
 * on the caller's thread; its descriptor is readable exactly while
 * completions wait. */
static box qbox;
static dlock_client *qclient;
static int nested_rc;

static void on_done_nested(void *data, const dlock_result *r) {
  nested_rc = dlock_client_run_completions(qclient, 0);
  on_done(data, r);
}

static int readable(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static void test_queue_mode(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.completions = DLOCK_COMPLETE_QUEUE;
  dlock_client *c = th_client(&srv, &o);
  qclient = c;
  const char *name = th_name("async-queue");
  dlock_lock *l = new_lock(c, name);
  int fd = dlock_client_completion_fd(c);
  CU_ASSERT(fd >= 0);
  CU_ASSERT(!readable(fd, 0));
  box_init(&qbox);
  uint64_t me = dlock_owner_id_new();
  TH_ASSERT_RC(dlock_acquire_async(l, me, 0, 30000, on_done_nested,
                                   tag_of(&qbox, 0), NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_lock_state_async(l, me, on_done, tag_of(&qbox, 1), NULL),
               DLOCK_OK);
  CU_ASSERT(readable(fd, 5000));
  int64_t until = th_now_ms() + 5000; /* both in the queue */
  while (th_int(&srv, "EXISTS %s", name) == 0 && th_now_ms() < until)
    usleep(500);
  usleep(50000);
  CU_ASSERT_EQUAL(qbox.n, 0); /* nothing ran by itself */
  int ran = 0;
  until = th_now_ms() + 5000;
  while (ran < 2 && th_now_ms() < until) {
    if (readable(fd, 100))
      ran += dlock_client_run_completions(c, 1);
  }
  CU_ASSERT_EQUAL(ran, 2);
  CU_ASSERT_EQUAL(qbox.n, 2);
  TH_ASSERT_RC(qbox.rc[0], DLOCK_OK);
  TH_ASSERT_RC(qbox.rc[1], DLOCK_OK);
  CU_ASSERT_EQUAL(qbox.off_engine, 2);
  CU_ASSERT(pthread_equal(qbox.thread, pthread_self()));
  TH_ASSERT_RC(nested_rc, DLOCK_EINVAL); /* not from inside a completion */
  CU_ASSERT(!readable(fd, 0));
  CU_ASSERT_EQUAL(dlock_client_run_completions(c, 0), 0);
  TH_ASSERT_RC(dlock_release_async(l, me, on_done, tag_of(&qbox, 2), NULL), DLOCK_OK);
  CU_ASSERT(readable(fd, 5000));
  CU_ASSERT_EQUAL(dlock_client_run_completions(c, 0), 1);
  TH_ASSERT_RC(qbox.rc[2], DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* A hold taken async under the watchdog that the server loses is reported
 * to the lost callback, and its async release says DLOCK_ELOST. */
static void test_lost_lease(void) {
  th_lost_log log;
  th_lost_init(&log);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 600;
  o.on_lost = th_on_lost;
  o.on_lost_data = &log;
  dlock_client *c = th_client(&srv, &o);
  const char *name = th_name("async-lost");
  dlock_lock *l = new_lock(c, name);
  box b;
  box_init(&b);
  uint64_t me = dlock_owner_id_new();
  TH_ASSERT_RC(dlock_acquire_async(l, me, 0, DLOCK_LEASE_WATCHDOG, on_done,
                                   tag_of(&b, 0), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  usleep(900000); /* renewed past its first lease */
  CU_ASSERT(th_int(&srv, "PTTL %s", name) > 0);
  CU_ASSERT_EQUAL(th_int(&srv, "DEL %s", name), 1);
  CU_ASSERT_EQUAL(th_lost_wait(&log, 1, 5000), 1);
  CU_ASSERT_EQUAL(log.owner, me);
  TH_ASSERT_RC(dlock_release_async(l, me, on_done, tag_of(&b, 1), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[1], DLOCK_ELOST);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* Owners: async and blocking calls release each other's holds when the
 * owner matches, and only then. */
static void test_owners(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("async-owner");
  dlock_lock *l = new_lock(c, name);
  box b;
  box_init(&b);
  uint64_t x = dlock_owner_id_new();
  TH_ASSERT_RC(dlock_acquire_async(l, x, 0, 30000, on_done, tag_of(&b, 0), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ENOTOWNER); /* this thread is not x */
  dlock_lock_bind_owner(l, x);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK); /* bound to x: it is */
  dlock_lock_bind_owner(l, 0);
  /* the thread's own id works as an async owner */
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release_async(l, dlock_owner_id_new(), on_done,
                                   tag_of(&b, 1), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[1], DLOCK_ENOTOWNER);
  TH_ASSERT_RC(dlock_release_async(l, dlock_thread_id(), on_done, tag_of(&b, 2),
                                   NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[2], DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* Bad input: refused at the call, with no callback. */
static void test_bad_input(void) {
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l = new_lock(c, th_name("async-bad"));
  box b;
  box_init(&b);
  tag *t = tag_of(&b, 0);
  TH_ASSERT_RC(dlock_acquire_async(NULL, 1, 0, 1000, on_done, t, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_acquire_async(l, 1, 0, 1000, NULL, t, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_acquire_async(l, 0, 0, 1000, on_done, t, NULL), DLOCK_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "owner"));
  TH_ASSERT_RC(dlock_acquire_async(l, 1, -5, 1000, on_done, t, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_acquire_async(l, 1, 0, 0, on_done, t, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_release_async(NULL, 1, on_done, t, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_release_async(l, 0, on_done, t, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_force_release_async(l, NULL, t, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_lock_state_async(NULL, 1, on_done, t, NULL), DLOCK_EINVAL);
  CU_ASSERT_EQUAL(dlock_client_completion_fd(c), -1); /* an engine client */
  TH_ASSERT_RC(dlock_client_run_completions(c, 0), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_client_run_completions(NULL, 0), DLOCK_EINVAL);
  CU_ASSERT_EQUAL(dlock_client_completion_fd(NULL), -1);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.completions = 7;
  dlock_client *bad = NULL;
  TH_ASSERT_RC(dlock_client_open(srv.url, &o, &bad), DLOCK_EINVAL);
  /* a WRONGTYPE key: the server's error, and the key untouched */
  const char *str = th_name("async-string");
  dlock_lock *s = new_lock(c, str);
  redisReply *r = th_cmd(&srv, "SET %s x", str);
  freeReplyObject(r);
  TH_ASSERT_RC(dlock_acquire_async(s, 1, 1000, 1000, on_done, tag_of(&b, 1), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[1], DLOCK_EKIND); /* as the blocking call says */
  CU_ASSERT_PTR_NOT_NULL(strstr(b.errmsg, "another type"));
  r = th_cmd(&srv, "GET %s", str);
  CU_ASSERT(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "x") == 0);
  freeReplyObject(r);
  /* a binary name with NUL bytes */
  dlock_lock_opts lo = DLOCK_LOCK_OPTS_INIT;
  lo.name_len = 5;
  dlock_lock *bin = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, "a\0b\0c", &lo, &bin), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire_async(bin, 3, 0, 1000, on_done, tag_of(&b, 2), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[2], DLOCK_OK);
  TH_ASSERT_RC(dlock_release_async(bin, 3, on_done, tag_of(&b, 3), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[3], DLOCK_OK);
  dlock_lock_free(bin);
  dlock_lock_free(s);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* A dead server: the acquire completes with DLOCK_EIO within the connect
 * timeout, never hangs. */
static void test_dead_server(void) {
  th_server dead;
  CU_ASSERT_FATAL(th_server_start(&dead, "") == 0);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.connect_timeout_ms = 300;
  o.command_timeout_ms = 500;
  dlock_client *c = th_client(&dead, &o);
  dlock_lock *l = new_lock(c, th_name("async-dead"));
  th_server_kill(&dead);
  box b;
  box_init(&b);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_acquire_async(l, 1, 1000, 1000, on_done, tag_of(&b, 0), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 10000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_EIO);
  CU_ASSERT(th_now_ms() - t0 < 5000);
  dlock_lock_free(l);
  dlock_client_close(c);
  th_server_stop(&dead);
}

/* A fair lock's async waiters are served in the order they queued; one
 * that times out or is cancelled leaves the queue (nothing left behind). */
#define FAIR_N 5
static int fair_order[FAIR_N], fair_got;
static dlock_lock *fair_lock;
static uint64_t fair_owner[FAIR_N];
static box fair_box;

static void fair_released(void *data, const dlock_result *r) {
  on_done(data, r);
}

static void fair_granted(void *data, const dlock_result *r) {
  tag *t = data;
  if (r->rc == DLOCK_OK) {
    fair_order[fair_got++] = t->i;
    dlock_release_async(fair_lock, fair_owner[t->i], fair_released,
                        tag_of(&fair_box, 100 + t->i), NULL);
  }
  on_done(data, r);
}

static long long queue_len(const char *name) {
  return th_int(&srv, "LLEN redisson_lock_queue:{%s}", name);
}

static int queue_becomes(const char *name, long long n) {
  int64_t until = th_now_ms() + 5000;
  while (queue_len(name) != n && th_now_ms() < until)
    usleep(1000);
  return queue_len(name) == n;
}

/* ---- one recipe, two drivers ----------------------------------------------
 * Each scenario of a wait run through the blocking driver (dlock_acquire on
 * a thread) and the async one (dlock_acquire_async): the same outcome, the
 * same message (digits aside: times differ), the same tries on the server
 * where the count is fixed, and the same state left behind. */

typedef struct drive {
  int rc;
  char msg[512];
  long long tries; /* the server's script calls during the acquire */
} drive;

/* the message with every run of digits as one '#' */
static void digits_out(char *s) {
  char *w = s;
  for (const char *r = s; *r; r++)
    if (*r >= '0' && *r <= '9') {
      if (w == s || w[-1] != '#')
        *w++ = '#';
    } else {
      *w++ = *r;
    }
  *w = '\0';
}

static void drive_blocking(dlock_lock *l, int64_t wait_ms, drive *d) {
  long long t0 = th_cmd_calls(&srv, "evalsha");
  d->rc = dlock_acquire(l, wait_ms, 30000);
  d->tries = th_cmd_calls(&srv, "evalsha") - t0;
  snprintf(d->msg, sizeof d->msg, "%s", d->rc == DLOCK_OK ? "" : dlock_errmsg());
  digits_out(d->msg);
  if (d->rc == DLOCK_OK)
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
}

static void drive_async(dlock_lock *l, int64_t wait_ms, drive *d) {
  box b;
  box_init(&b);
  uint64_t owner = dlock_owner_id_new();
  long long t0 = th_cmd_calls(&srv, "evalsha");
  TH_ASSERT_RC(dlock_acquire_async(l, owner, wait_ms, 30000, on_done,
                                   tag_of(&b, 0), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  d->tries = th_cmd_calls(&srv, "evalsha") - t0;
  d->rc = b.rc[0];
  snprintf(d->msg, sizeof d->msg, "%s", b.errmsg);
  digits_out(d->msg);
  if (d->rc == DLOCK_OK) {
    TH_ASSERT_RC(dlock_release_async(l, owner, on_done, tag_of(&b, 1), NULL),
                 DLOCK_OK);
    CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  }
}

static void agree(const char *scenario, const char *kind, const drive *x,
                  const drive *y, int same_tries) {
  if (x->rc != y->rc || strcmp(x->msg, y->msg) != 0 ||
      (same_tries && x->tries != y->tries))
    printf("\n    %s, %s: blocking %s '%s' (%lld tries), async %s '%s' "
           "(%lld tries) ", scenario, kind, dlock_errname(x->rc), x->msg,
           x->tries, dlock_errname(y->rc), y->msg, y->tries);
  CU_ASSERT_EQUAL(x->rc, y->rc);
  CU_ASSERT_STRING_EQUAL(x->msg, y->msg);
  if (same_tries)
    CU_ASSERT_EQUAL(x->tries, y->tries);
}

/* Within 5 s, a wait in place (1: the fair waiter queued, a lock's waiter
 * subscribed) or none left (0). */
static int waiting_becomes(const char *name, int fair, int in_place) {
  int64_t until = th_now_ms() + 5000;
  for (;;) {
    long long n = fair ? queue_len(name) : th_numsub(&srv, channel_of(name));
    if ((n > 0) == in_place)
      return 1;
    if (th_now_ms() >= until)
      return 0;
    usleep(1000);
  }
}

typedef struct blocked {
  dlock_lock *l;
  int rc;
} blocked;

static void *blocked_acquire(void *arg) {
  blocked *b = arg;
  b->rc = dlock_acquire(b->l, 5000, 30000);
  return NULL;
}

/* A wait ended by its caller: the blocking one interrupted (DLOCK_EINTR),
 * the async one cancelled (DLOCK_ECANCELED); each ends at once and leaves
 * nothing: no hold, no queue entry, no subscription. */
static void ended_by_caller(dlock_lock *l, const char *name, int fair) {
  blocked b = {l, -1};
  pthread_t t;
  pthread_create(&t, NULL, blocked_acquire, &b);
  CU_ASSERT(waiting_becomes(name, fair, 1));
  int64_t t0 = th_now_ms();
  int n = 0;
  for (int i = 0; i < 500 && n == 0; i++) {
    TH_ASSERT_RC(dlock_interrupt(l, &n), DLOCK_OK);
    if (n == 0)
      usleep(1000);
  }
  pthread_join(t, NULL);
  TH_ASSERT_RC(b.rc, DLOCK_EINTR);
  int64_t blocking_ms = th_now_ms() - t0;
  CU_ASSERT(waiting_becomes(name, fair, 0));
  box x;
  box_init(&x);
  dlock_op op;
  TH_ASSERT_RC(dlock_acquire_async(l, dlock_owner_id_new(), 5000, 30000,
                                   on_done, tag_of(&x, 0), &op), DLOCK_OK);
  CU_ASSERT(waiting_becomes(name, fair, 1));
  t0 = th_now_ms();
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&x, 1, 5000), 1);
  TH_ASSERT_RC(x.rc[0], DLOCK_ECANCELED);
  int64_t async_ms = th_now_ms() - t0;
  /* both at once, not at the 5 s budget: measured 0-2 ms; 1 s of room */
  CU_ASSERT(blocking_ms < 1000 && async_ms < 1000);
  CU_ASSERT(waiting_becomes(name, fair, 0));
}

/* ---- lost answers and grants given back, through both drivers ---------- */

typedef struct stopped_run {
  th_server *s;
  dlock_lock *l;
  dlock_client *c;
  int ran;      /* 1: the server stopped (SIGSTOP): the try runs once it
                   goes on; 0: CLIENT PAUSE: the try never runs */
  int end;      /* 1: the caller ends the wait while the try is in flight */
  int async;
  drive d;
} stopped_run;

static void *stopped_blocking(void *arg) {
  stopped_run *r = arg;
  r->d.rc = dlock_acquire(r->l, 10000, 30000);
  snprintf(r->d.msg, sizeof r->d.msg, "%s", r->d.rc == DLOCK_OK ? "" : dlock_errmsg());
  return NULL;
}

/* One acquire whose try meets a stopped or paused server: its answer is
 * lost past the command timeout (the driver asks the server whether it
 * ran), or the caller ends the wait while it is in flight (interrupt,
 * cancel) and a try that ran is given back. The outcome into r->d; the
 * name is left free. */
static void stopped_acquire(stopped_run *r) {
  uint64_t me = dlock_owner_id_new(), sent = th_commands(r->c);
  if (r->ran) {
    th_server_pause(r->s, 1);
  } else {
    redisReply *p = th_cmd(r->s, "CLIENT PAUSE 1500 ALL");
    CU_ASSERT(p && p->type == REDIS_REPLY_STATUS);
    if (p)
      freeReplyObject(p);
  }
  int64_t t0 = th_now_ms();
  box b;
  box_init(&b);
  dlock_op op = 0;
  pthread_t t;
  if (r->async) {
    TH_ASSERT_RC(dlock_acquire_async(r->l, me, 10000, 30000, on_done,
                                     tag_of(&b, 0), &op), DLOCK_OK);
  } else {
    dlock_lock_bind_owner(r->l, me);
    pthread_create(&t, NULL, stopped_blocking, r);
  }
  /* the try sent (and, when its answer is to be lost, the command
   * timeout past: the question goes out after it). The count alone is not
   * the event: the last release's unlock-latch DEL, sent after its reply,
   * may be counted after `sent` was read. */
  uint64_t want = sent + (r->end ? 1 : 2);
  while ((th_commands(r->c) < want || (!r->end && th_now_ms() - t0 < 300)) &&
         th_now_ms() - t0 < 3000)
    usleep(1000);
  if (r->end && r->async) {
    TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  } else if (r->end) {
    /* a try in flight is not a wait: the interrupt finds none to end, and
     * the try's grant (the server goes on at once) is the acquire's */
    int n = -1;
    TH_ASSERT_RC(dlock_interrupt(r->l, &n), DLOCK_OK);
    CU_ASSERT_EQUAL(n, 0);
  }
  if (r->ran)
    th_server_pause(r->s, 0);
  if (r->async) {
    CU_ASSERT_EQUAL_FATAL(box_wait(&b, 1, 10000), 1);
    r->d.rc = b.rc[0];
    snprintf(r->d.msg, sizeof r->d.msg, "%s", b.errmsg);
  } else {
    pthread_join(t, NULL);
  }
  digits_out(r->d.msg);
  if (r->d.rc == DLOCK_OK) {
    dlock_lock_bind_owner(r->l, me);
    TH_ASSERT_RC(dlock_release(r->l), DLOCK_OK);
  }
  dlock_lock_bind_owner(r->l, 0);
  /* one hold released or one given back: nothing left (within 5 s: a
   * give-back is sent once the try's answer comes) */
  int64_t until = th_now_ms() + 5000;
  while (th_int(r->s, "EXISTS %s", dlock_lock_name(r->l, NULL)) != 0 &&
         th_now_ms() < until)
    usleep(2000);
  CU_ASSERT_EQUAL(th_int(r->s, "EXISTS %s", dlock_lock_name(r->l, NULL)), 0);
}

/* A try whose answer is lost (the command timeout ends it after it was
 * written) is asked about, by both drivers alike: the server's hold count
 * says whether it ran. It ran (the server stopped with the try in its
 * socket, then resumed: it runs the try before it answers the question
 * on a newer connection): the grant is kept, not tried again (a second
 * try would re-enter: one release would leave the lock held). It did not
 * run (CLIENT PAUSE held it, the closed connection dropped it): a fresh
 * try gets it. Either way the same outcome and words from both drivers,
 * and one release frees the lock. And a try in flight when the caller
 * ends the acquire: the async one is cancelled and its grant given back;
 * a blocking one is not waiting yet (dlock_interrupt ends waits: lock.h),
 * so it takes the grant. The reentrant and fair locks each way; the read
 * and write locks, ran. */
static void test_lost_answer(void) {
  if (th_cluster_mode())
    return; /* a standalone server of its own: the other variants run it */
  th_server s;
  CU_ASSERT_FATAL(th_server_start(&s, "") == 0);
  dlock_client *c = th_lost_answer_client(&s);
  static const char *const kinds[] = {"reentrant", "fair", "read", "write"};
  for (size_t kk = 0; kk < sizeof kinds / sizeof kinds[0]; kk++) {
    const char *kind = kinds[kk];
    char name[96];
    snprintf(name, sizeof name, "%s:%s", th_name("lost-answer"), kind);
    dlock_lock *l = NULL;
    TH_ASSERT_RC(dlock_lock_new(c, kind, name, NULL, &l), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK); /* connected, loaded */
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    static const struct {
      const char *scenario;
      int ran, end;
    } cases[] = {{"lost answer, the try ran", 1, 0},
                 {"lost answer, the try did not run", 0, 0},
                 {"ended in flight, the try ran: given back", 1, 1}};
    /* the read-write lock's halves: the try ran (the kind's own question) */
    size_t ncases = kk < 2 ? sizeof cases / sizeof cases[0] : 1;
    for (size_t k = 0; k < ncases; k++) {
      stopped_run x = {&s, l, c, cases[k].ran, cases[k].end, 0, {0}},
                  y = {&s, l, c, cases[k].ran, cases[k].end, 1, {0}};
      stopped_acquire(&x);
      stopped_acquire(&y);
      if (cases[k].end) { /* the blocking driver's own: named in lock.h */
        TH_ASSERT_RC(x.d.rc, DLOCK_OK);
        TH_ASSERT_RC(y.d.rc, DLOCK_ECANCELED);
      } else {
        agree(cases[k].scenario, kind, &x.d, &y.d, 0);
        TH_ASSERT_RC(x.d.rc, DLOCK_OK);
      }
    }
    dlock_lock_free(l);
  }
  dlock_client_close(c);
  th_server_stop(&s);
}

/* The replica guard (on a cluster's masters): the master's replica
 * stopped, no grant is acknowledged; both drivers give it back and say so
 * in the same words. */
static void unacked(void) {
  if (!th_cluster_mode())
    return; /* the guard counts a cluster's (or a sentinel's) replicas */
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.replica_sync_ms = 200;
  dlock_client *c = th_client(&srv, &o);
  for (int fair = 0; fair < 2; fair++) {
    const char *kind = fair ? "fair" : "reentrant";
    char name[96];
    snprintf(name, sizeof name, "%s", th_name(fair ? "unacked-fair" : "unacked"));
    th_server *master = th_node_of(&srv, name),
              *replica = th_replica_of(&srv, master);
    CU_ASSERT_FATAL(replica != NULL);
    dlock_lock *l = NULL;
    TH_ASSERT_RC(dlock_lock_new(c, kind, name, NULL, &l), DLOCK_OK);
    drive x, y;
    drive_blocking(l, 0, &x); /* connected, scripts loaded */
    th_server_pause(replica, 1);
    drive_blocking(l, 0, &x);
    drive_async(l, 0, &y);
    th_server_pause(replica, 0);
    agree("no replica acknowledged", kind, &x, &y, 0);
    TH_ASSERT_RC(x.rc, DLOCK_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(x.msg, "the grant was given back"));
    CU_ASSERT_EQUAL(th_int(master, "EXISTS %s", name), 0);
    dlock_lock_free(l);
  }
  dlock_client_close(c);
}

static void test_both_drivers_agree(void) {
  dlock_client *c = th_client(&srv, NULL), *holder = th_client(&srv, NULL);
  for (int fair = 0; fair < 2; fair++) {
    const char *kind = fair ? "fair" : "reentrant";
    char name[96];
    snprintf(name, sizeof name, "%s", th_name(fair ? "agree-fair" : "agree"));
    dlock_lock *l = NULL, *h = NULL;
    TH_ASSERT_RC(dlock_lock_new(c, kind, name, NULL, &l), DLOCK_OK);
    TH_ASSERT_RC(dlock_lock_new(holder, kind, name, NULL, &h), DLOCK_OK);
    drive x, y;
    /* the kind's scripts loaded first (a first EVALSHA is refused with
     * NOSCRIPT and sent again as EVAL: a try more, in whichever driver
     * came first) */
    drive_blocking(l, 0, &x);
    /* granted: one try each */
    drive_blocking(l, 0, &x);
    drive_async(l, 0, &y);
    agree("granted", kind, &x, &y, 1);
    TH_ASSERT_RC(x.rc, DLOCK_OK);
    /* refused (held, no wait): one try each, the same words */
    TH_ASSERT_RC(dlock_acquire(h, 0, 30000), DLOCK_OK);
    drive_blocking(l, 0, &x);
    drive_async(l, 0, &y);
    agree("refused", kind, &x, &y, 1);
    TH_ASSERT_RC(x.rc, DLOCK_EBUSY);
    /* timed out (held past the wait): the same outcome and words, and
     * nothing left of the waiter (a fair one leaves the queue) */
    drive_blocking(l, 150, &x);
    drive_async(l, 150, &y);
    agree("timed out", kind, &x, &y, 0);
    TH_ASSERT_RC(x.rc, DLOCK_ETIMEDOUT);
    if (fair)
      CU_ASSERT(queue_becomes(name, 0));
    /* ended by the caller: interrupted, cancelled */
    ended_by_caller(l, name, fair);
    TH_ASSERT_RC(dlock_release(h), DLOCK_OK);
    CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
    /* another kind's name (a string): refused alike, the name untouched */
    freeReplyObject(th_cmd(&srv, "SET %s v", name));
    drive_blocking(l, 0, &x);
    drive_async(l, 0, &y);
    agree("another kind's name", kind, &x, &y, 1);
    CU_ASSERT_NOT_EQUAL(x.rc, DLOCK_OK);
    redisReply *v = th_cmd(&srv, "GET %s", name);
    CU_ASSERT(v && v->type == REDIS_REPLY_STRING && strcmp(v->str, "v") == 0);
    freeReplyObject(v);
    th_int(&srv, "DEL %s", name);
    dlock_lock_free(h);
    dlock_lock_free(l);
  }
  dlock_client_close(holder);
  dlock_client_close(c);
  unacked();
}

static void test_fair(void) {
  dlock_client *c = th_client(&srv, NULL), *holder = th_client(&srv, NULL);
  char name[96];
  snprintf(name, sizeof name, "%s", th_name("async-fair"));
  dlock_lock *h = NULL;
  TH_ASSERT_RC(dlock_fair_lock_new(c, name, NULL, &fair_lock), DLOCK_OK);
  TH_ASSERT_RC(dlock_fair_lock_new(holder, name, NULL, &h), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(h, 0, 30000), DLOCK_OK);
  box_init(&fair_box);
  fair_got = 0;
  for (int i = 0; i < FAIR_N; i++) {
    fair_owner[i] = dlock_owner_id_new();
    TH_ASSERT_RC(dlock_acquire_async(fair_lock, fair_owner[i], 20000, 30000,
                                     fair_granted, tag_of(&fair_box, i), NULL),
                 DLOCK_OK);
    CU_ASSERT(queue_becomes(name, i + 1)); /* queued in this order */
  }
  TH_ASSERT_RC(dlock_release(h), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&fair_box, 2 * FAIR_N, 10000), 2 * FAIR_N);
  for (int i = 0; i < FAIR_N; i++) {
    CU_ASSERT_EQUAL(fair_order[i], i);
    TH_ASSERT_RC(fair_box.rc[i], DLOCK_OK);
    TH_ASSERT_RC(fair_box.rc[100 + i], DLOCK_OK);
  }
  CU_ASSERT_EQUAL(queue_len(name), 0);
  /* a timeout and a cancel each leave the queue */
  TH_ASSERT_RC(dlock_acquire(h, 0, 30000), DLOCK_OK);
  box b;
  box_init(&b);
  TH_ASSERT_RC(dlock_acquire_async(fair_lock, dlock_owner_id_new(), 400, 30000,
                                   on_done, tag_of(&b, 0), NULL), DLOCK_OK);
  CU_ASSERT(queue_becomes(name, 1));
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_ETIMEDOUT);
  /* named as the blocking wait names it: the fair lock, not "lock" */
  CU_ASSERT_PTR_NOT_NULL(strstr(b.errmsg, "fair lock \""));
  CU_ASSERT(queue_becomes(name, 0));
  dlock_op op = 0;
  TH_ASSERT_RC(dlock_acquire_async(fair_lock, dlock_owner_id_new(), 20000, 30000,
                                   on_done, tag_of(&b, 1), &op), DLOCK_OK);
  CU_ASSERT(queue_becomes(name, 1));
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[1], DLOCK_ECANCELED);
  CU_ASSERT(queue_becomes(name, 0));
  CU_ASSERT_EQUAL(th_int(&srv, "ZCARD redisson_lock_timeout:{%s}", name), 0);
  TH_ASSERT_RC(dlock_release(h), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  dlock_lock_free(fair_lock);
  dlock_lock_free(h);
  dlock_client_close(c);
  dlock_client_close(holder);
}

/* Read and write locks: readers share, a writer waits for them (woken by
 * the last read release) and readers wait for the writer; an async reader
 * holding it cannot upgrade (DLOCK_EDEADLK). */
static void test_rwlock(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("async-rw");
  dlock_rwlock *rw = NULL;
  TH_ASSERT_RC(dlock_rwlock_new(c, name, NULL, &rw), DLOCK_OK);
  dlock_lock *rd = dlock_rwlock_read(rw), *wr = dlock_rwlock_write(rw);
  uint64_t r1 = dlock_owner_id_new(), r2 = dlock_owner_id_new(),
           w1 = dlock_owner_id_new();
  box b;
  box_init(&b);
  TH_ASSERT_RC(dlock_acquire_async(rd, r1, 0, 30000, on_done, tag_of(&b, 0), NULL),
               DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire_async(rd, r2, 0, 30000, on_done, tag_of(&b, 1), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  TH_ASSERT_RC(b.rc[1], DLOCK_OK); /* shared */
  TH_ASSERT_RC(dlock_acquire_async(wr, r1, 0, 30000, on_done, tag_of(&b, 2), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[2], DLOCK_EDEADLK);
  TH_ASSERT_RC(dlock_acquire_async(wr, w1, 10000, 30000, on_done, tag_of(&b, 3),
                                   NULL), DLOCK_OK);
  usleep(50000);
  CU_ASSERT_EQUAL(b.n, 3); /* the writer waits for both readers */
  TH_ASSERT_RC(dlock_release_async(rd, r1, on_done, tag_of(&b, 4), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 4, 5000), 4);
  usleep(50000);
  CU_ASSERT_EQUAL(b.calls[3], 0);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_release_async(rd, r2, on_done, tag_of(&b, 5), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 6, 5000), 6);
  TH_ASSERT_RC(b.rc[3], DLOCK_OK); /* woken by the last read release */
  CU_ASSERT(th_now_ms() - t0 < 2000); /* 1 ms with two CPU hogs running */
  /* a reader now waits for the writer */
  TH_ASSERT_RC(dlock_acquire_async(rd, r1, 10000, 30000, on_done, tag_of(&b, 6),
                                   NULL), DLOCK_OK);
  usleep(50000);
  CU_ASSERT_EQUAL(b.calls[6], 0);
  TH_ASSERT_RC(dlock_release_async(wr, w1, on_done, tag_of(&b, 7), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 8, 5000), 8);
  TH_ASSERT_RC(b.rc[6], DLOCK_OK);
  TH_ASSERT_RC(b.rc[7], DLOCK_OK);
  TH_ASSERT_RC(dlock_release_async(rd, r1, on_done, tag_of(&b, 8), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 9, 5000), 9);
  TH_ASSERT_RC(b.rc[8], DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  dlock_rwlock_free(rw);
  dlock_client_close(c);
}

/* Latch: set, count down and read by async calls; an await woken by the
 * count reaching zero, one that times out, and one cancelled. */
static void test_latch(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("async-latch");
  dlock_latch *l = NULL;
  TH_ASSERT_RC(dlock_latch_new(c, name, NULL, &l), DLOCK_OK);
  box b;
  box_init(&b);
  TH_ASSERT_RC(dlock_latch_try_set_count_async(l, 2, on_done, tag_of(&b, 0), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  CU_ASSERT_EQUAL(b.last.set, 1);
  TH_ASSERT_RC(dlock_latch_await_async(l, 0, on_done, tag_of(&b, 1), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[1], DLOCK_EBUSY); /* not zero yet */
  TH_ASSERT_RC(dlock_latch_await_async(l, 150, on_done, tag_of(&b, 2), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[2], DLOCK_ETIMEDOUT);
  dlock_op cancelled = 0;
  TH_ASSERT_RC(dlock_latch_await_async(l, DLOCK_WAIT_FOREVER, on_done,
                                       tag_of(&b, 3), &cancelled), DLOCK_OK);
  TH_ASSERT_RC(dlock_latch_await_async(l, 20000, on_done, tag_of(&b, 4), NULL),
               DLOCK_OK);
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
  TH_ASSERT_RC(dlock_cancel(cancelled), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 4, 5000), 4);
  TH_ASSERT_RC(b.rc[3], DLOCK_ECANCELED);
  TH_ASSERT_RC(dlock_latch_count_down_async(l, on_done, tag_of(&b, 5), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 5, 5000), 5);
  CU_ASSERT_EQUAL(b.last.count, 1);
  CU_ASSERT_EQUAL(b.calls[4], 0); /* still waiting */
  TH_ASSERT_RC(dlock_latch_count_down_async(l, on_done, tag_of(&b, 6), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 7, 5000), 7); /* the count down, the await */
  TH_ASSERT_RC(b.rc[4], DLOCK_OK);
  TH_ASSERT_RC(b.rc[6], DLOCK_OK);
  TH_ASSERT_RC(dlock_latch_get_count_async(l, on_done, tag_of(&b, 7), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 8, 5000), 8);
  CU_ASSERT_EQUAL(b.last.count, 0);
  TH_ASSERT_RC(dlock_latch_try_set_count_async(l, 0, on_done, tag_of(&b, 8), NULL),
               DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_latch_await_async(NULL, 0, on_done, tag_of(&b, 8), NULL),
               DLOCK_EINVAL);
  dlock_latch_free(l);
  dlock_client_close(c);
}

/* GET name as a number (-1 when not one). */
static long long count_of(const char *name) {
  redisReply *r = th_cmd(&srv, "GET %s", name);
  long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
  if (r)
    freeReplyObject(r);
  return v;
}

/* Semaphore: async waiters for permits are served in arrival order and
 * woken by releases; a cancelled one leaves the permits it got. */
static void test_semaphore(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("async-sem");
  dlock_semaphore *s = NULL;
  TH_ASSERT_RC(dlock_semaphore_new(c, name, NULL, &s), DLOCK_OK);
  TH_ASSERT_RC(dlock_semaphore_set_permits(s, 2, NULL), DLOCK_OK);
  box b;
  box_init(&b);
  TH_ASSERT_RC(dlock_semaphore_acquire_async(s, 2, 0, on_done, tag_of(&b, 0), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  /* a big demand first, then a small one: the small one must not overtake */
  TH_ASSERT_RC(dlock_semaphore_acquire_async(s, 2, 20000, on_done, tag_of(&b, 1),
                                             NULL), DLOCK_OK);
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
  TH_ASSERT_RC(dlock_semaphore_acquire_async(s, 1, 20000, on_done, tag_of(&b, 2),
                                             NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_semaphore_release_async(s, 1, on_done, tag_of(&b, 3), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  usleep(100000);
  CU_ASSERT_EQUAL(b.calls[2], 0); /* behind the demand of 2 */
  CU_ASSERT_EQUAL(b.calls[1], 0);
  TH_ASSERT_RC(dlock_semaphore_release_async(s, 1, on_done, tag_of(&b, 4), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 4, 5000), 4);
  TH_ASSERT_RC(b.rc[1], DLOCK_OK); /* the first waiter got both */
  CU_ASSERT_EQUAL(b.calls[2], 0);
  TH_ASSERT_RC(dlock_semaphore_release_async(s, 2, on_done, tag_of(&b, 5), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 6, 5000), 6);
  TH_ASSERT_RC(b.rc[2], DLOCK_OK);
  CU_ASSERT_EQUAL(count_of(name), 1);
  /* a cancelled wait: nothing taken */
  dlock_op op = 0;
  TH_ASSERT_RC(dlock_semaphore_acquire_async(s, 2, 20000, on_done, tag_of(&b, 6),
                                             &op), DLOCK_OK);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 7, 5000), 7);
  TH_ASSERT_RC(b.rc[6], DLOCK_ECANCELED);
  CU_ASSERT_EQUAL(count_of(name), 1);
  TH_ASSERT_RC(dlock_semaphore_acquire_async(s, -1, 0, on_done, tag_of(&b, 7), NULL),
               DLOCK_EINVAL);
  dlock_semaphore_free(s);
  dlock_client_close(c);
}

/* Expirable permits: ids in the result, renewed under the watchdog,
 * released by id; a waiter woken by a release. */
static dlock_permit_id got_ids[4];

static void on_permits(void *data, const dlock_result *r) {
  if (r->rc == DLOCK_OK && r->n <= 4)
    memcpy(got_ids, r->ids, r->n * sizeof *r->ids);
  on_done(data, r);
}

static void test_permits(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("async-permits");
  dlock_permits *p = NULL;
  TH_ASSERT_RC(dlock_permits_new(c, name, NULL, &p), DLOCK_OK);
  TH_ASSERT_RC(dlock_permits_set_permits(p, 2, NULL), DLOCK_OK);
  box b;
  box_init(&b);
  TH_ASSERT_RC(dlock_permits_acquire_async(p, 2, 0, DLOCK_LEASE_WATCHDOG,
                                           on_permits, tag_of(&b, 0), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  CU_ASSERT_EQUAL(b.last.n, 2);
  dlock_permit_id mine[2];
  memcpy(mine, got_ids, sizeof mine);
  CU_ASSERT_EQUAL(th_int(&srv, "ZCARD {%s}:timeout", name), 2);
  TH_ASSERT_RC(dlock_permits_acquire_async(p, 1, 20000, 5000, on_permits,
                                           tag_of(&b, 1), NULL), DLOCK_OK);
  usleep(50000);
  CU_ASSERT_EQUAL(b.calls[1], 0);
  TH_ASSERT_RC(dlock_permits_release_async(p, mine, 1, on_done, tag_of(&b, 2),
                                           NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[1], DLOCK_OK);
  TH_ASSERT_RC(b.rc[2], DLOCK_OK);
  dlock_permit_id theirs = got_ids[0];
  TH_ASSERT_RC(dlock_permits_release_async(p, &mine[1], 1, on_done, tag_of(&b, 3),
                                           NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_permits_release_async(p, &theirs, 1, on_done, tag_of(&b, 4),
                                           NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 5, 5000), 5);
  TH_ASSERT_RC(b.rc[3], DLOCK_OK);
  TH_ASSERT_RC(b.rc[4], DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "ZCARD {%s}:timeout", name), 0);
  TH_ASSERT_RC(dlock_permits_release_async(p, &theirs, 1, on_done, tag_of(&b, 5),
                                           NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 6, 5000), 6);
  TH_ASSERT_RC(b.rc[5], DLOCK_ENOTOWNER);
  TH_ASSERT_RC(dlock_permits_acquire_async(p, 0, 0, 1000, on_done, tag_of(&b, 6),
                                           NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_permits_release_async(p, NULL, 1, on_done, tag_of(&b, 6),
                                           NULL), DLOCK_EINVAL);
  dlock_permits_free(p);
  dlock_client_close(c);
}

/* The semaphore as a lock, through the lock interface: two owners hold it
 * at once, a third waits and is let in by a release. */
static void test_semaphore_lock(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("async-semlock");
  dlock_permits *p = NULL;
  TH_ASSERT_RC(dlock_permits_new(c, name, NULL, &p), DLOCK_OK);
  TH_ASSERT_RC(dlock_permits_set_permits(p, 2, NULL), DLOCK_OK);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_semaphore_lock_new(c, name, NULL, &l), DLOCK_OK);
  uint64_t o[3] = {dlock_owner_id_new(), dlock_owner_id_new(),
                   dlock_owner_id_new()};
  box b;
  box_init(&b);
  for (int i = 0; i < 3; i++)
    TH_ASSERT_RC(dlock_acquire_async(l, o[i], i < 2 ? 0 : 20000, 30000, on_done,
                                     tag_of(&b, i), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  usleep(50000);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  TH_ASSERT_RC(b.rc[1], DLOCK_OK);
  CU_ASSERT_EQUAL(b.calls[2], 0); /* both permits are held */
  TH_ASSERT_RC(dlock_release_async(l, o[0], on_done, tag_of(&b, 3), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 4, 5000), 4);
  TH_ASSERT_RC(b.rc[2], DLOCK_OK);
  TH_ASSERT_RC(b.rc[3], DLOCK_OK);
  TH_ASSERT_RC(dlock_release_async(l, o[0], on_done, tag_of(&b, 4), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 5, 5000), 5);
  TH_ASSERT_RC(b.rc[4], DLOCK_ENOTOWNER); /* o[0] has none left */
  for (int i = 1; i < 3; i++)
    TH_ASSERT_RC(dlock_release_async(l, o[i], on_done, tag_of(&b, 4 + i), NULL),
                 DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 7, 5000), 7);
  TH_ASSERT_RC(b.rc[5], DLOCK_OK);
  TH_ASSERT_RC(b.rc[6], DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "ZCARD {%s}:timeout", name), 0);
  dlock_lock_free(l);
  dlock_permits_free(p);
  dlock_client_close(c);
}

/* A multi-lock: all members or none. Waiting for a busy member it holds
 * nothing else; a cancel leaves nothing; members on two engines are
 * refused. */
static void test_multi(void) {
  dlock_client *c = th_client(&srv, NULL), *holder = th_client(&srv, NULL);
  char a[96], bname[96];
  snprintf(a, sizeof a, "%s", th_name("async-multi-a"));
  snprintf(bname, sizeof bname, "%s", th_name("async-multi-b"));
  dlock_lock *m[2] = {new_lock(c, a), new_lock(c, bname)}, *multi = NULL;
  dlock_lock *hb = new_lock(holder, bname);
  TH_ASSERT_RC(dlock_multi_new(m, 2, &multi), DLOCK_OK);
  uint64_t x = dlock_owner_id_new();
  box b;
  box_init(&b);
  TH_ASSERT_RC(dlock_acquire_async(multi, x, 0, 30000, on_done, tag_of(&b, 0), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  CU_ASSERT(b.last.grant.validity_ms > 29000);
  CU_ASSERT_EQUAL(exist(a, bname, NULL), 2);
  TH_ASSERT_RC(dlock_release_async(multi, x, on_done, tag_of(&b, 1), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[1], DLOCK_OK);
  CU_ASSERT_EQUAL(exist(a, bname, NULL), 0);
  /* B held elsewhere: the walk waits for B alone */
  TH_ASSERT_RC(dlock_acquire(hb, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire_async(multi, x, 0, 30000, on_done, tag_of(&b, 2), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[2], DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_acquire_async(multi, x, 20000, 30000, on_done, tag_of(&b, 3),
                                   NULL), DLOCK_OK);
  char bch[200];
  snprintf(bch, sizeof bch, "redisson_lock__channel:{%s}", bname);
  CU_ASSERT(th_wait_numsub(&srv, bch, 1, 5000));
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", a), 0); /* A given back meanwhile */
  TH_ASSERT_RC(dlock_release(hb), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 4, 5000), 4);
  TH_ASSERT_RC(b.rc[3], DLOCK_OK);
  CU_ASSERT_EQUAL(exist(a, bname, NULL), 2);
  TH_ASSERT_RC(dlock_release_async(multi, x, on_done, tag_of(&b, 4), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 5, 5000), 5);
  TH_ASSERT_RC(b.rc[4], DLOCK_OK);
  /* a cancel while waiting for B: nothing left */
  TH_ASSERT_RC(dlock_acquire(hb, 0, 30000), DLOCK_OK);
  dlock_op op = 0;
  TH_ASSERT_RC(dlock_acquire_async(multi, x, DLOCK_WAIT_FOREVER, 30000, on_done,
                                   tag_of(&b, 5), &op), DLOCK_OK);
  CU_ASSERT(th_wait_numsub(&srv, bch, 1, 5000));
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 6, 5000), 6);
  TH_ASSERT_RC(b.rc[5], DLOCK_ECANCELED);
  CU_ASSERT(th_wait_numsub(&srv, bch, 0, 5000));
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", a), 0);
  TH_ASSERT_RC(dlock_release(hb), DLOCK_OK);
  /* members on two engines */
  dlock_lock *two[2] = {m[0], hb}, *mixed = NULL;
  TH_ASSERT_RC(dlock_multi_new(two, 2, &mixed), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire_async(mixed, x, 0, 30000, on_done, tag_of(&b, 6), NULL),
               DLOCK_ENOTSUP);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "engine"));
  dlock_lock_free(mixed);
  for (int i = 0; i < 10; i++)
    CU_ASSERT(b.calls[i] <= 1);
  dlock_lock_free(multi);
  dlock_lock_free(m[0]);
  dlock_lock_free(m[1]);
  dlock_lock_free(hb);
  dlock_client_close(c);
  dlock_client_close(holder);
}

/* RedLock over three members whose clients share one engine: a quorum
 * granted, EQUORUM when two are held elsewhere, a wait that later rounds
 * win, and a cancel between rounds that leaves nothing. */
static void test_redlock(void) {
  dlock_client *cl[3];
  cl[0] = th_client(&srv, NULL);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.share_engine = cl[0];
  cl[1] = th_client(&srv, &o);
  cl[2] = th_client(&srv, &o);
  dlock_client *holder = th_client(&srv, NULL);
  char names[3][96];
  dlock_lock *m[3], *h[3], *rl = NULL;
  for (int i = 0; i < 3; i++) {
    snprintf(names[i], sizeof names[i], "%s", th_name("async-redlock"));
    m[i] = new_lock(cl[i], names[i]);
    h[i] = new_lock(holder, names[i]);
  }
  dlock_redlock_opts ro = DLOCK_REDLOCK_OPTS_INIT;
  TH_ASSERT_RC(dlock_redlock_new(m, 3, &ro, &rl), DLOCK_OK);
  uint64_t x = dlock_owner_id_new();
  box b;
  box_init(&b);
  TH_ASSERT_RC(dlock_acquire_async(rl, x, 0, 30000, on_done, tag_of(&b, 0), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 1, 5000), 1);
  TH_ASSERT_RC(b.rc[0], DLOCK_OK);
  CU_ASSERT(b.last.grant.validity_ms > 29000);
  int64_t until = th_now_ms() + 5000; /* a round stops at its majority */
  while (exist(names[0], names[1], names[2]) != 3 &&
         th_now_ms() < until)
    usleep(1000);
  CU_ASSERT_EQUAL(exist(names[0], names[1], names[2]), 3);
  TH_ASSERT_RC(dlock_release_async(rl, x, on_done, tag_of(&b, 1), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 2, 5000), 2);
  TH_ASSERT_RC(b.rc[1], DLOCK_OK);
  CU_ASSERT_EQUAL(exist(names[0], names[1], names[2]), 0);
  /* two members held elsewhere: no quorum */
  TH_ASSERT_RC(dlock_acquire(h[1], 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(h[2], 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire_async(rl, x, 0, 30000, on_done, tag_of(&b, 2), NULL),
               DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 3, 5000), 3);
  TH_ASSERT_RC(b.rc[2], DLOCK_EQUORUM);
  /* a wait: later rounds win once one of them is released */
  TH_ASSERT_RC(dlock_acquire_async(rl, x, 5000, 30000, on_done, tag_of(&b, 3), NULL),
               DLOCK_OK);
  usleep(200000);
  CU_ASSERT_EQUAL(b.calls[3], 0);
  TH_ASSERT_RC(dlock_release(h[2]), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 4, 5000), 4);
  TH_ASSERT_RC(b.rc[3], DLOCK_OK);
  TH_ASSERT_RC(dlock_release_async(rl, x, on_done, tag_of(&b, 4), NULL), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 5, 5000), 5);
  TH_ASSERT_RC(b.rc[4], DLOCK_OK);
  /* a cancel between rounds */
  TH_ASSERT_RC(dlock_acquire(h[2], 0, 30000), DLOCK_OK);
  dlock_op op = 0;
  TH_ASSERT_RC(dlock_acquire_async(rl, x, DLOCK_WAIT_FOREVER, 30000, on_done,
                                   tag_of(&b, 5), &op), DLOCK_OK);
  usleep(100000);
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  CU_ASSERT_EQUAL(box_wait(&b, 6, 5000), 6);
  TH_ASSERT_RC(b.rc[5], DLOCK_ECANCELED);
  usleep(100000); /* a round's give-back may still be on its way */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", names[0]), 0);
  TH_ASSERT_RC(dlock_release(h[1]), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(h[2]), DLOCK_OK);
  /* members on two engines */
  dlock_lock *two[3] = {m[0], m[1], h[0]}, *mixed = NULL;
  TH_ASSERT_RC(dlock_redlock_new(two, 3, &ro, &mixed), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire_async(mixed, x, 0, 30000, on_done, tag_of(&b, 6), NULL),
               DLOCK_ENOTSUP);
  dlock_lock_free(mixed);
  for (int i = 0; i < 7; i++)
    CU_ASSERT(b.calls[i] <= 1);
  dlock_lock_free(rl);
  for (int i = 0; i < 3; i++) {
    dlock_lock_free(m[i]);
    dlock_lock_free(h[i]);
  }
  for (int i = 2; i >= 0; i--)
    dlock_client_close(cl[i]);
  dlock_client_close(holder);
}

/* Closing a client ends its combinators' operations too, once each,
 * before the close returns: a multi-lock waiting for a member, a RedLock
 * between failed rounds. */
static void test_close_combinators(void) {
  dlock_client *c = th_client(&srv, NULL), *holder = th_client(&srv, NULL);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.share_engine = c;
  dlock_client *c2 = th_client(&srv, &o), *c3 = th_client(&srv, &o);
  char names[3][96];
  dlock_lock *m[3], *h[3], *multi = NULL, *rl = NULL;
  dlock_client *owners[3] = {c, c2, c3};
  for (int i = 0; i < 3; i++) {
    snprintf(names[i], sizeof names[i], "%s", th_name("async-close-combo"));
    m[i] = new_lock(owners[i], names[i]);
    h[i] = new_lock(holder, names[i]);
  }
  TH_ASSERT_RC(dlock_multi_new(m, 2, &multi), DLOCK_OK);
  TH_ASSERT_RC(dlock_redlock_new(m, 3, NULL, &rl), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(h[1], 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(h[2], 0, 30000), DLOCK_OK);
  box b;
  box_init(&b);
  TH_ASSERT_RC(dlock_acquire_async(multi, 11, DLOCK_WAIT_FOREVER, 30000, on_done,
                                   tag_of(&b, 0), NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire_async(rl, 12, DLOCK_WAIT_FOREVER, 30000, on_done,
                                   tag_of(&b, 1), NULL), DLOCK_OK);
  usleep(200000);
  CU_ASSERT_EQUAL(b.n, 0);
  dlock_client_close(c);
  CU_ASSERT_EQUAL(b.n, 2);
  TH_ASSERT_RC(b.rc[0], DLOCK_ECLOSED);
  TH_ASSERT_RC(b.rc[1], DLOCK_ECLOSED);
  usleep(100000);
  CU_ASSERT_EQUAL(b.calls[0], 1);
  CU_ASSERT_EQUAL(b.calls[1], 1);
  dlock_lock_free(multi);
  dlock_lock_free(rl);
  for (int i = 0; i < 3; i++) {
    dlock_release(h[i]);
    dlock_lock_free(m[i]);
    dlock_lock_free(h[i]);
  }
  dlock_client_close(c3);
  dlock_client_close(c2);
  dlock_client_close(holder);
}

/* The two examples (examples/async_libuv.c, async_epoll.c) run against the
 * server: 200 tasks over 4 locks on one thread, none failed, no two
 * holders at once. */
static void run_example(const char *env, const char *want) {
  const char *exe = getenv(env);
  CU_ASSERT_PTR_NOT_NULL_FATAL(exe);
  char cmd[1024], line[256] = "";
  snprintf(cmd, sizeof cmd, "DLOCK_REDIS_URL='%s' timeout 60 '%s' 200", srv.url,
           exe);
  FILE *f = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  if (fgets(line, sizeof line, f) == NULL)
    line[0] = '\0';
  int status = pclose(f);
  if (strstr(line, want) == NULL || status != 0)
    fprintf(stderr, "\n  %s: status %d: %s", exe, status, line);
  CU_ASSERT_EQUAL(status, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(line, want));
}

static void test_examples(void) {
  run_example("DLOCK_ASYNC_LIBUV_EXAMPLE", "200 tasks done, 0 failed, 0 overlaps");
  run_example("DLOCK_ASYNC_EPOLL_EXAMPLE",
              "200 tasks done, 200 uses, 0 failed, 0 overlaps");
}

static void add(void) {
  CU_pSuite s = CU_add_suite("async", suite_init, suite_clean);
  CU_add_test(s, "acquire_release", test_acquire_release);
  CU_add_test(s, "fenced_tokens", test_fenced_tokens);
  CU_add_test(s, "wait_woken", test_wait_woken);
  CU_add_test(s, "many_waiters", test_many_waiters);
  CU_add_test(s, "cancel_wait", test_cancel_wait);
  CU_add_test(s, "cancel_races_grant", test_cancel_races_grant);
  CU_add_test(s, "close_pending", test_close_pending);
  CU_add_test(s, "queue_mode", test_queue_mode);
  CU_add_test(s, "lost_lease", test_lost_lease);
  CU_add_test(s, "owners", test_owners);
  CU_add_test(s, "bad_input", test_bad_input);
  CU_add_test(s, "dead_server", test_dead_server);
  CU_add_test(s, "lost_answer", test_lost_answer);
  CU_add_test(s, "fair", test_fair);
  CU_add_test(s, "rwlock", test_rwlock);
  CU_add_test(s, "latch", test_latch);
  CU_add_test(s, "semaphore", test_semaphore);
  CU_add_test(s, "permits", test_permits);
  CU_add_test(s, "semaphore_lock", test_semaphore_lock);
  CU_add_test(s, "multi", test_multi);
  CU_add_test(s, "redlock", test_redlock);
  CU_add_test(s, "close_combinators", test_close_combinators);
  CU_add_test(s, "examples", test_examples);
  CU_add_test(s, "both_drivers_agree", test_both_drivers_agree);
}

int main(int argc, char **argv) { return th_main(argc, argv, add, NULL); }
