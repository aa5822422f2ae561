/* dlock beside Redisson clients on one redis-server: a Redisson-behaving
 * client of our own (redisson_peer.c) for every primitive, and node-redisson
 * (npm, node_peer.js) for the plain lock. Each test mixes both kinds of
 * client on one name and checks exclusion, order, wake-ups in both
 * directions and that nothing is left behind. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "multi/group.h"
#include "redisson_peer.h"

#define WAIT 300000 /* Redisson's default threadWaitTime */

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

static rp_client peer(void) {
  rp_client p;
  CU_ASSERT_EQUAL_FATAL(rp_open(&p, srv.port), 0);
  return p;
}

/* Poll a server-side count until it equals want (bounded: 10 s). */
static int wait_int(long long want, const char *fmt, const char *arg) {
  for (int64_t end = th_now_ms() + 10000; th_now_ms() < end; usleep(1000))
    if (th_int(&srv, fmt, arg) == want)
      return 1;
  return 0;
}

static long long zscore(const char *name, const char *owner) {
  redisReply *r = th_cmd(&srv, "ZSCORE redisson_lock_timeout:{%s} %s", name, owner);
  long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
  if (r)
    freeReplyObject(r);
  return v;
}

static int64_t server_ms(void) {
  redisReply *r = th_cmd(&srv, "TIME");
  int64_t ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
  freeReplyObject(r);
  return ms;
}

/* Keys whose names contain name, other than the unlock latches (counted
 * apart: they are cleaned by their own test). */
static long long keys_left(const char *name) {
  redisReply *r = th_cmd(&srv, "KEYS *%s*", name);
  long long n = 0;
  for (size_t i = 0; r && i < r->elements; i++) {
    if (strstr(r->element[i]->str, "unlock_latch") == NULL &&
        strstr(r->element[i]->str, "release_latch") == NULL) {
      fprintf(stderr, "\n  left behind: %s\n", r->element[i]->str);
      n++;
    }
  }
  if (r)
    freeReplyObject(r);
  return n;
}

static dlock_lock *fair(const char *name, int64_t slot_ms) {
  dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
  o.wait_slot_ms = slot_ms;
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fair_lock_new(cl, name, &o, &l), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  return l;
}

/* ---- fair lock ------------------------------------------------------------ */

/* A C waiter's queue entry follows Redisson's arithmetic: its deadline is the
 * tail's (or the lock's expiry) plus threadWaitTime, every grant moves every
 * deadline one wait earlier, and the queue keys never expire. */
static void test_fair_redisson_arithmetic(void) {
  const char *name = th_name("fair_arith");
  dlock_lock *l = fair(name, 30000);
  TH_ASSERT_RC(dlock_acquire(l, 0, 60000), DLOCK_OK);
  int64_t t0 = server_ms();

  th_acquirer w1 = {.lock = fair(name, 30000), .wait_ms = 20000, .lease_ms = 10000, .rc = -1};
  th_acquirer_start(&w1);
  CU_ASSERT_FATAL(wait_int(1, "LLEN redisson_lock_queue:{%s}", name));
  /* Redisson never expires the queue or the deadlines */
  CU_ASSERT_EQUAL(th_int(&srv, "PTTL redisson_lock_queue:{%s}", name), -1);
  CU_ASSERT_EQUAL(th_int(&srv, "PTTL redisson_lock_timeout:{%s}", name), -1);
  redisReply *first = th_cmd(&srv, "LINDEX redisson_lock_queue:{%s} 0", name);
  char w1_owner[64];
  snprintf(w1_owner, sizeof w1_owner, "%s", first->str);
  freeReplyObject(first);
  long long d1 = zscore(name, w1_owner);
  /* the lock's expiry (t0 + 60 s, less the time since) plus one wait */
  CU_ASSERT(d1 >= t0 + 60000 + WAIT - 3000 && d1 <= t0 + 60000 + WAIT + 3000);

  rp_client j = peer();
  char j_owner[64];
  rp_owner(&j, 1, j_owner);
  CU_ASSERT_EQUAL(rp_fair_try(&j, name, 1, 10000, 0, 1, NULL), 0);
  long long dj = zscore(name, j_owner);
  CU_ASSERT_EQUAL(dj, d1 + WAIT);

  th_acquirer w2 = {.lock = fair(name, 30000), .wait_ms = 20000, .lease_ms = 10000, .rc = -1};
  th_acquirer_start(&w2);
  CU_ASSERT_FATAL(wait_int(3, "LLEN redisson_lock_queue:{%s}", name));
  redisReply *last = th_cmd(&srv, "LINDEX redisson_lock_queue:{%s} -1", name);
  char w2_owner[64];
  snprintf(w2_owner, sizeof w2_owner, "%s", last->str);
  freeReplyObject(last);
  long long d2 = zscore(name, w2_owner);
  CU_ASSERT_EQUAL(d2, dj + WAIT);

  /* C releases: w1 takes it (and gives it back); the grant moved both
   * remaining deadlines one wait earlier */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  th_acquirer_join(&w1);
  TH_ASSERT_RC(w1.rc, DLOCK_OK);
  CU_ASSERT_EQUAL(zscore(name, j_owner), dj - WAIT);
  CU_ASSERT_EQUAL(zscore(name, w2_owner), d2 - WAIT);

  /* the Java client is the head now: its grant moves w2 once more, and w2
   * keeps its place */
  CU_ASSERT_EQUAL(rp_fair_try(&j, name, 1, 10000, 0, 1, NULL), 1);
  CU_ASSERT_EQUAL(zscore(name, w2_owner), d2 - 2 * WAIT);
  CU_ASSERT_EQUAL(th_int(&srv, "LLEN redisson_lock_queue:{%s}", name), 1);

  /* its unlock wakes w2 by message (w2 re-tries only every 10 s otherwise) */
  int64_t t_unlock = th_now_ms();
  CU_ASSERT_EQUAL(rp_fair_unlock(&j, name, 1), 1);
  th_acquirer_join(&w2);
  TH_ASSERT_RC(w2.rc, DLOCK_OK);
  CU_ASSERT(w2.got_ms - t_unlock < 5000); /* a message: ~1 ms; no message: 10 s */
  CU_ASSERT_EQUAL(keys_left(name), 0);
  rp_close(&j);
  dlock_lock_free(w1.lock);
  dlock_lock_free(w2.lock);
  dlock_lock_free(l);
}

/* The C waiter leaves (budget spent); the Java waiter behind it keeps its
 * place (no expiry took the queue with it) and the C holder's release wakes
 * it by message, not by its timer. */
typedef struct java_waiter {
  const char *name;
  int64_t budget_ms;
  long tid;
  int rc, woken;
  atomic_int waits; /* the peer waits for a message (rp_client.waits) */
  int64_t got_ms;
  int order; /* grant order, filled from a shared counter */
  atomic_int *counter;
  int release; /* unlock once granted */
  pthread_t thread;
} java_waiter;

/* The event a message-wake assertion needs: the peer has subscribed, made
 * its try after that, and waits for a message (rp_client.waits). A release
 * any earlier may be found by that try instead (Redisson's own waiters do
 * the same: released, but not by the message). CU fails after 15 s. */
static void peer_waits(atomic_int *waits) {
  for (int64_t end = th_now_ms() + 15000;
       atomic_load(waits) < 1 && th_now_ms() < end;)
    usleep(1000);
  CU_ASSERT_FATAL(atomic_load(waits) >= 1);
}

static void *java_fair_run(void *arg) {
  java_waiter *w = arg;
  rp_client p;
  if (rp_open(&p, srv.port) != 0) {
    w->rc = -1;
    return NULL;
  }
  p.waits = &w->waits;
  w->rc = rp_fair_lock(&p, w->name, w->tid, 30000, 0, w->budget_ms, &w->woken);
  w->got_ms = th_now_ms();
  if (w->rc == 1) {
    if (w->counter)
      w->order = atomic_fetch_add(w->counter, 1);
    if (w->release && rp_fair_unlock(&p, w->name, w->tid) != 1)
      w->rc = -3;
  }
  rp_close(&p);
  return NULL;
}

static void test_fair_java_keeps_place_when_c_leaves(void) {
  const char *name = th_name("fair_leave");
  dlock_lock *l = fair(name, 30000);
  TH_ASSERT_RC(dlock_acquire(l, 0, 60000), DLOCK_OK);
  th_acquirer c = {.lock = fair(name, 30000), .wait_ms = 1500, .lease_ms = 10000, .rc = -1};
  th_acquirer_start(&c);
  CU_ASSERT_FATAL(wait_int(1, "LLEN redisson_lock_queue:{%s}", name));
  java_waiter j = {.name = name, .budget_ms = 30000, .tid = 7, .release = 1};
  pthread_create(&j.thread, NULL, java_fair_run, &j);
  CU_ASSERT_FATAL(wait_int(2, "LLEN redisson_lock_queue:{%s}", name));
  th_acquirer_join(&c); /* its budget ran out: it left */
  TH_ASSERT_RC(c.rc, DLOCK_ETIMEDOUT);
  CU_ASSERT_EQUAL(th_int(&srv, "LLEN redisson_lock_queue:{%s}", name), 1);
  CU_ASSERT_EQUAL(th_int(&srv, "PTTL redisson_lock_queue:{%s}", name), -1);
  /* the Java waiter is subscribed to its own channel by now */
  char channel[200], owner[64];
  redisReply *head = th_cmd(&srv, "LINDEX redisson_lock_queue:{%s} 0", name);
  snprintf(owner, sizeof owner, "%s", head->str);
  freeReplyObject(head);
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}:%s", name, owner);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 10000));
  peer_waits(&j.waits);
  int64_t t_release = th_now_ms();
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  pthread_join(j.thread, NULL);
  CU_ASSERT_EQUAL(j.rc, 1);
  CU_ASSERT(j.woken >= 1);
  /* its timer would have fired after ~60 s (the lock's lease) */
  CU_ASSERT(j.got_ms - t_release < 5000);
  CU_ASSERT_EQUAL(keys_left(name), 0);
  dlock_lock_free(c.lock);
  dlock_lock_free(l);
}

/* C and Java waiters alternate in one queue; the grants follow the queue
 * exactly, both kinds waking each other. */
typedef struct c_waiter {
  dlock_lock *lock;
  atomic_int *counter;
  int order, rc;
  pthread_t thread;
} c_waiter;

static void *c_fair_run(void *arg) {
  c_waiter *w = arg;
  w->rc = dlock_acquire(w->lock, 30000, 30000);
  if (w->rc == DLOCK_OK) {
    w->order = atomic_fetch_add(w->counter, 1);
    w->rc = dlock_release(w->lock);
  }
  return NULL;
}

static void test_fair_mixed_fifo(void) {
  enum { N = 8 };
  const char *name = th_name("fair_fifo");
  dlock_lock *l = fair(name, 30000);
  TH_ASSERT_RC(dlock_acquire(l, 0, 60000), DLOCK_OK);
  atomic_int counter = 0;
  c_waiter cw[N];
  java_waiter jw[N];
  for (int i = 0; i < N; i++) {
    if (i % 2 == 0) {
      cw[i] = (c_waiter){fair(name, 30000), &counter, -1, -1, 0};
      pthread_create(&cw[i].thread, NULL, c_fair_run, &cw[i]);
    } else {
      jw[i] = (java_waiter){.name = name, .budget_ms = 30000, .tid = 100 + i,
                            .order = -1, .counter = &counter, .release = 1};
      pthread_create(&jw[i].thread, NULL, java_fair_run, &jw[i]);
    }
    CU_ASSERT_FATAL(wait_int(i + 1, "LLEN redisson_lock_queue:{%s}", name));
  }
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  for (int i = 0; i < N; i++) {
    if (i % 2 == 0) {
      pthread_join(cw[i].thread, NULL);
      TH_ASSERT_RC(cw[i].rc, DLOCK_OK);
      CU_ASSERT_EQUAL(cw[i].order, i);
      dlock_lock_free(cw[i].lock);
    } else {
      pthread_join(jw[i].thread, NULL);
      CU_ASSERT_EQUAL(jw[i].rc, 1);
      CU_ASSERT_EQUAL(jw[i].order, i);
    }
  }
  CU_ASSERT_EQUAL(keys_left(name), 0);
  dlock_lock_free(l);
}

/* ---- read-write lock -------------------------------------------------------- */

/* A name with a '{' but no valid hash tag: both sides must agree on the
 * read holds' timeout keys, or a Java reader's unlock deletes the C
 * reader's hold and lets a writer in. */
static void test_rwlock_odd_name_exclusion(void) {
  char name[64];
  snprintf(name, sizeof name, "%s{b", th_name("rw_odd"));
  dlock_rwlock *rw;
  TH_ASSERT_RC(dlock_rwlock_new(cl, name, NULL, &rw), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, 30000), DLOCK_OK);
  rp_client j = peer();
  CU_ASSERT_EQUAL(rp_read_try(&j, name, 1, 30000, NULL), 1);
  CU_ASSERT_EQUAL(rp_read_unlock(&j, name, 1), 0); /* the C read hold stays */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 1);
  int64_t ttl = 0;
  CU_ASSERT_EQUAL(rp_write_try(&j, name, 2, 30000, &ttl), 0);
  CU_ASSERT(ttl > 0);
  TH_ASSERT_RC(dlock_release(dlock_rwlock_read(rw)), DLOCK_OK);
  CU_ASSERT_EQUAL(rp_write_try(&j, name, 2, 30000, NULL), 1);
  CU_ASSERT_EQUAL(rp_write_unlock(&j, name, 2), 1);
  rp_close(&j);
  dlock_rwlock_free(rw);
}

/* What `dlock status` shows for names with a '{' and no valid tag: it finds
 * a Java client's queue and permits under Redisson's names. */
static void test_inspect_odd_names(void) {
  char name[80], sem[80];
  snprintf(name, sizeof name, "%s{y", th_name("inspect"));
  snprintf(sem, sizeof sem, "%s}{", th_name("inspect_sem"));
  rp_client p = peer();
  CU_ASSERT_EQUAL(rp_fair_try(&p, name, 1, 30000, 0, 1, NULL), 1);
  CU_ASSERT_EQUAL(rp_fair_try(&p, name, 2, 30000, 0, 1, NULL), 0); /* queued */
  dlock_inspection *in = NULL;
  TH_ASSERT_RC(dlock_inspect(cl, name, NULL, &in), DLOCK_OK);
  CU_ASSERT_FATAL(in != NULL);
  CU_ASSERT_STRING_EQUAL(in->kind, "fair lock");
  CU_ASSERT_EQUAL(in->queue_length, 1);
  dlock_inspection_free(in);
  CU_ASSERT_EQUAL(rp_sem_try_set_permits(&p, sem, 2), 1);
  char id[33];
  CU_ASSERT_EQUAL(rp_permits_try_acquire(&p, sem, 30000, id), 1);
  TH_ASSERT_RC(dlock_inspect(cl, sem, NULL, &in), DLOCK_OK);
  CU_ASSERT_FATAL(in != NULL);
  CU_ASSERT_STRING_EQUAL(in->kind, "permit semaphore");
  dlock_inspection_free(in);
  /* dlock's calls use the same keys: busy while Java holds it, and free
   * once the Java holder leaves and its queued thread gives up */
  dlock_lock *f = fair(name, 30000);
  TH_ASSERT_RC(dlock_acquire(f, 0, 30000), DLOCK_EBUSY);
  CU_ASSERT(rp_fair_give_up(&p, name, 2, 0) >= 0);
  CU_ASSERT_EQUAL(rp_fair_unlock(&p, name, 1), 1);
  TH_ASSERT_RC(dlock_acquire(f, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(f), DLOCK_OK);
  CU_ASSERT_EQUAL(rp_permits_release(&p, sem, id), 1);
  freeReplyObject(th_cmd(&srv, "DEL %s", sem));
  dlock_lock_free(f);
  rp_close(&p);
}

/* ---- the other primitives, both ways --------------------------------------------- */

/* A Java client's call running in a thread: a wait of the peer. */
typedef struct java_call {
  int kind; /* 0 read lock, 1 write lock, 2 latch await, 3 semaphore acquire */
  const char *name;
  int rc, woken;
  atomic_int waits; /* the peer waits for a message (rp_client.waits) */
  int64_t got_ms;
  pthread_t thread;
} java_call;

static void *java_call_run(void *arg) {
  java_call *j = arg;
  rp_client p;
  if (rp_open(&p, srv.port) != 0) {
    j->rc = -1;
    return NULL;
  }
  p.waits = &j->waits;
  switch (j->kind) {
  case 0:
    j->rc = rp_read_lock(&p, j->name, 5, 30000, 20000, &j->woken);
    if (j->rc == 1 && rp_read_unlock(&p, j->name, 5) != 1)
      j->rc = -3;
    break;
  case 1:
    j->rc = rp_write_lock(&p, j->name, 6, 30000, 20000, &j->woken);
    if (j->rc == 1 && rp_write_unlock(&p, j->name, 6) != 1)
      j->rc = -3;
    break;
  case 2:
    j->rc = rp_latch_await(&p, j->name, 20000, &j->woken);
    break;
  default:
    j->rc = rp_sem_acquire(&p, j->name, 1, 20000, &j->woken);
    break;
  }
  j->got_ms = th_now_ms();
  rp_close(&p);
  return NULL;
}

/* Wait until the waiter is subscribed to channel (CU fails after 15 s);
 * threads call th_wait_numsub() itself. */
static void wait_subscribed(const char *channel, long long n);

/* A Java release made once a C waiter is subscribed to channel: what 0 a
 * semaphore permit, 1 the expirable permit id. at_ms: when it was made. */
typedef struct java_later {
  const char *name, *channel, *id;
  int what, rc;
  int64_t at_ms;
  pthread_t thread;
} java_later;

static void *java_release_later(void *arg) {
  java_later *j = arg;
  rp_client p;
  j->rc = -1;
  if (rp_open(&p, srv.port) != 0)
    return NULL;
  if (!th_wait_numsub(&srv, j->channel, 1, 15000)) {
    rp_close(&p);
    return NULL;
  }
  j->at_ms = th_now_ms();
  j->rc = j->what == 0 ? rp_sem_release(&p, j->name, 1)
                       : rp_permits_release(&p, j->name, j->id);
  rp_close(&p);
  return NULL;
}

static void test_rwlock_wakeups_both_ways(void) {
  const char *name = th_name("rw_wake");
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
  dlock_rwlock *rw;
  TH_ASSERT_RC(dlock_rwlock_new(cl, name, NULL, &rw), DLOCK_OK);
  /* a C writer blocks a Java reader; its release wakes it */
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_write(rw), 0, 30000), DLOCK_OK);
  java_call j = {.kind = 0, .name = name};
  pthread_create(&j.thread, NULL, java_call_run, &j);
  peer_waits(&j.waits);
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_release(dlock_rwlock_write(rw)), DLOCK_OK);
  pthread_join(j.thread, NULL);
  CU_ASSERT_EQUAL(j.rc, 1);
  CU_ASSERT(j.woken >= 1 && j.got_ms - t < 5000);
  /* a C reader blocks a Java writer; its release wakes it */
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, 30000), DLOCK_OK);
  j = (java_call){.kind = 1, .name = name};
  pthread_create(&j.thread, NULL, java_call_run, &j);
  peer_waits(&j.waits);
  t = th_now_ms();
  TH_ASSERT_RC(dlock_release(dlock_rwlock_read(rw)), DLOCK_OK);
  pthread_join(j.thread, NULL);
  CU_ASSERT_EQUAL(j.rc, 1);
  CU_ASSERT(j.woken >= 1 && j.got_ms - t < 5000);
  /* a Java writer blocks a C reader; its unlock ("1": all readers) wakes it */
  rp_client p = peer();
  CU_ASSERT_EQUAL(rp_write_try(&p, name, 9, 30000, NULL), 1);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, 30000), DLOCK_EBUSY);
  dlock_lock *reader;
  TH_ASSERT_RC(dlock_read_lock_new(cl, name, NULL, &reader), DLOCK_OK);
  th_acquirer a = {.lock = reader, .wait_ms = 20000, .lease_ms = 10000, .rc = -1};
  th_acquirer_start(&a);
  wait_subscribed(channel, 1);
  t = th_now_ms();
  CU_ASSERT_EQUAL(rp_write_unlock(&p, name, 9), 1);
  th_acquirer_join(&a);
  TH_ASSERT_RC(a.rc, DLOCK_OK);
  CU_ASSERT(a.got_ms - t < 5000);
  /* a Java reader and a C reader share it; a Java writer waits for both */
  CU_ASSERT_EQUAL(rp_read_try(&p, name, 9, 30000, NULL), 1);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(rp_write_try(&p, name, 10, 30000, NULL), 0);
  CU_ASSERT_EQUAL(rp_read_unlock(&p, name, 9), 0);
  CU_ASSERT_EQUAL(rp_write_try(&p, name, 10, 30000, NULL), 0);
  TH_ASSERT_RC(dlock_release(dlock_rwlock_read(rw)), DLOCK_OK);
  CU_ASSERT_EQUAL(rp_write_try(&p, name, 10, 30000, NULL), 1);
  CU_ASSERT_EQUAL(rp_write_unlock(&p, name, 10), 1);
  CU_ASSERT_EQUAL(keys_left(name), 0);
  rp_close(&p);
  dlock_lock_free(reader);
  dlock_rwlock_free(rw);
}

static void wait_subscribed(const char *channel, long long n) {
  if (!th_wait_numsub(&srv, channel, n, 15000))
    CU_FAIL("the waiter did not subscribe in 15 s");
}

/* Fencing tokens come from one counter whoever grants. */
static void test_fenced_tokens_shared(void) {
  const char *name = th_name("fenced");
  dlock_lock *l;
  TH_ASSERT_RC(dlock_fenced_lock_new(cl, name, NULL, &l), DLOCK_OK);
  rp_client p = peer();
  int64_t last = 0;
  for (int i = 0; i < 3; i++) {
    dlock_grant g;
    TH_ASSERT_RC(dlock_acquire_grant(l, 0, 30000, &g), DLOCK_OK);
    CU_ASSERT(g.token > last);
    last = g.token;
    int64_t token = 0, ttl = 0;
    CU_ASSERT_EQUAL(rp_fenced_try(&p, name, 1, 30000, &token, &ttl), 0);
    CU_ASSERT(ttl > 0);
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    CU_ASSERT_EQUAL(rp_fenced_try(&p, name, 1, 30000, &token, NULL), 1);
    CU_ASSERT(token > last);
    last = token;
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EBUSY);
    CU_ASSERT_EQUAL(rp_lock_unlock(&p, name, 1), 1);
  }
  rp_close(&p);
  dlock_lock_free(l);
  freeReplyObject(th_cmd(&srv, "DEL redisson_lock_token:{%s}", name));
}

/* A fair queue whose last waiter has no deadline (Redisson 3.40's script
 * could leave one; 3.45+ takes the lock's remaining lease for the next
 * newcomer's deadline): a dlock waiter joining behind it gets its deadline
 * from the lock's PTTL (and a wait per queued waiter); once the head leaves and the holder releases, the
 * entry without a deadline, now the head, is purged as dead (Redisson 4.7
 * keeps it there, blocking every Java waiter) and dlock's waiter is
 * granted. */
static void test_fair_tail_without_deadline(void) {
  const char *name = th_name("fair_tail");
  rp_client p = peer();
  char o3[64];
  rp_owner(&p, 3, o3);
  CU_ASSERT_EQUAL(rp_fair_try(&p, name, 1, 30000, 0, 1, NULL), 1); /* holds */
  CU_ASSERT_EQUAL(rp_fair_try(&p, name, 2, 30000, 0, 1, NULL), 0); /* queued */
  CU_ASSERT_EQUAL(rp_fair_try(&p, name, 3, 30000, 0, 1, NULL), 0);
  CU_ASSERT_EQUAL(th_int(&srv, "ZREM redisson_lock_timeout:{%s} %s", name, o3), 1);
  dlock_lock *l = fair(name, 1000);
  th_acquirer w = {.lock = l, .wait_ms = 10000, .lease_ms = 10000};
  th_acquirer_start(&w);
  CU_ASSERT_FATAL(wait_int(3, "LLEN redisson_lock_queue:{%s}", name));
  long long pttl = th_int(&srv, "PTTL %s", name);
  redisReply *q = th_cmd(&srv, "LINDEX redisson_lock_queue:{%s} 2", name);
  long long deadline = q && q->type == REDIS_REPLY_STRING ? zscore(name, q->str) : -1;
  if (q)
    freeReplyObject(q);
  redisReply *t = th_cmd(&srv, "TIME");
  long long now = atoll(t->element[0]->str) * 1000 + atoll(t->element[1]->str) / 1000;
  freeReplyObject(t);
  /* the lock's remaining lease plus one thread wait (300 s) from now
   * (Redisson's arithmetic), raised to a wait per queued waiter (3): the
   * floor dlock keeps so that grants ahead never put it in the past */
  CU_ASSERT(deadline > now + 3 * 300000 && deadline <= now + pttl + 3 * 300000 + 1000);
  CU_ASSERT(rp_fair_give_up(&p, name, 2, 0) >= 0);
  CU_ASSERT_EQUAL(rp_fair_unlock(&p, name, 1), 1);
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  TH_ASSERT_RC(w.release_rc, DLOCK_OK);
  CU_ASSERT_EQUAL(keys_left(name), 0);
  rp_close(&p);
  dlock_lock_free(l);
}

/* When a dead waiter's entry leaves the queue, from its Redisson deadline
 * (ms; negative: before it): polled every 2 ms by tries of a Java peer
 * whose clock is skew_ms off (judge != NULL), or of dlock (the server's
 * clock), the try that removed it began at *from and ended at *to (server
 * clock); -100000 when it never left within 3 s of the deadline. */
static void dead_waiter_left(const char *name, rp_client *judge,
                             int64_t skew_ms, int64_t *from, int64_t *to) {
  rp_client h = peer();
  char dead[64];
  rp_owner(&h, 2, dead);
  CU_ASSERT_EQUAL(rp_fair_try(&h, name, 1, 600, 300, 1, NULL), 1); /* holds */
  CU_ASSERT_EQUAL(rp_fair_try(&h, name, 2, 600, 300, 1, NULL), 0); /* dies */
  int64_t deadline = zscore(name, dead);
  *from = *to = -100000;
  dlock_lock *l = judge ? NULL : fair(name, 300);
  if (judge)
    judge->skew_ms = skew_ms;
  while (server_ms() < deadline + 3000) {
    int64_t before = server_ms();
    if (judge)
      rp_fair_try(judge, name, 3, 600, 300, 1, NULL);
    else if (dlock_try_acquire(l, 600) == DLOCK_OK)
      dlock_release(l);
    int64_t after = server_ms();
    if (zscore(name, dead) < 0) {
      *from = before - deadline;
      *to = after - deadline;
      break;
    }
    usleep(2000);
  }
  if (judge) {
    rp_fair_give_up(judge, name, 3, 300);
    judge->skew_ms = 0;
  }
  if (l)
    dlock_lock_free(l);
  freeReplyObject(th_cmd(&srv, "DEL %s redisson_lock_queue:{%s} "
                         "redisson_lock_timeout:{%s}", name, name, name));
  rp_close(&h);
}

/* A Java machine whose clock is off gives up a dead waiter by its skew
 * only: 500 ms ahead, 500 ms early; 500 ms behind, 500 ms late; dlock
 * (the server's clock) at its deadline. The try that removed it ended at
 * or after the judge's own now passed the deadline (1 ms for TIME's
 * rounding), and began at most the poll and a round trip later than that,
 * with 150 ms of room (two CPU hogs running: up to 75 ms late, three
 * runs; idle: 1-4 ms). */
static void test_fair_skewed_java_gives_up_dead(void) {
  rp_client j = peer();
  static const struct {
    const char *name;
    int java;
    int64_t skew, expect;
  } runs[] = {{"skew_ahead", 1, 500, -500},
              {"skew_behind", 1, -500, 500},
              {"skew_dlock", 0, 0, 0}};
  printf("given up");
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    int64_t from, to;
    dead_waiter_left(th_name(runs[i].name), runs[i].java ? &j : NULL,
                     runs[i].skew, &from, &to);
    printf(" %+lld..%+lld", (long long)from, (long long)to);
    CU_ASSERT(to >= runs[i].expect - 1);
    CU_ASSERT(from <= runs[i].expect + 150);
  }
  printf(" ms from the deadline (ahead, behind, dlock) ");
  rp_close(&j);
}

/* A Java RedissonFasterMultiLock (4.7's scripts, on the Java machine's
 * clock) and dlock's grouped multi-lock on one group: the field names are
 * the same, so overlapping sets exclude each other both ways, disjoint
 * ones do not, and Java's unlock (its message on the group's channel)
 * wakes dlock's waiter. */
static void test_group_beside_java(void) {
  const char *g = th_name("group");
  static char f[4][DLOCK__GROUP_FIELD_LEN + 1];
  const char *vals[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; i++)
    dlock__group_field(vals[i], 1, f[i]);
  const char *java_ab[] = {f[0], f[1]}, *java_a[] = {f[0]}, *java_b[] = {f[1]};
  const char *bc[] = {"b", "c"}, *c_only[] = {"c"};
  dlock_lock *lbc = NULL, *lc = NULL;
  TH_ASSERT_RC(dlock_group_lock_new(cl, g, bc, NULL, 2, NULL, &lbc), DLOCK_OK);
  TH_ASSERT_RC(dlock_group_lock_new(cl, g, c_only, NULL, 1, NULL, &lc), DLOCK_OK);
  rp_client p = peer();
  CU_ASSERT_EQUAL(rp_group_try(&p, g, 1, 30000, java_ab, 2, NULL), 1);
  TH_ASSERT_RC(dlock_acquire(lbc, 0, 30000), DLOCK_EBUSY); /* "b" is Java's */
  TH_ASSERT_RC(dlock_acquire(lc, 0, 30000), DLOCK_OK);     /* "c" is free */
  TH_ASSERT_RC(dlock_release(lc), DLOCK_OK);
  th_acquirer w = {.lock = lbc, .wait_ms = 10000, .lease_ms = 30000, .keep = 1};
  th_acquirer_start(&w);
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", g);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000)); /* it waits */
  int64_t t0 = th_now_ms();
  CU_ASSERT_EQUAL(rp_group_unlock(&p, g, 1, java_ab, 2), 1);
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  CU_ASSERT(w.got_ms - t0 < 1000); /* woken by Java's message */
  int64_t ttl = 0;
  CU_ASSERT_EQUAL(rp_group_try(&p, g, 1, 30000, java_b, 1, &ttl), 0);
  CU_ASSERT(ttl > 0);
  CU_ASSERT_EQUAL(rp_group_try(&p, g, 1, 30000, java_a, 1, NULL), 1);
  CU_ASSERT_EQUAL(rp_group_unlock(&p, g, 1, java_a, 1), 1);
  TH_ASSERT_RC(dlock_force_release(lbc, NULL), DLOCK_OK); /* kept by w */
  CU_ASSERT_EQUAL(rp_group_try(&p, g, 1, 30000, java_b, 1, NULL), 1);
  CU_ASSERT_EQUAL(rp_group_unlock(&p, g, 1, java_b, 1), 1);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", g), 0);
  rp_close(&p);
  dlock_lock_free(lc);
  dlock_lock_free(lbc);
}

/* A Java RSpinLock on its own connection: lock (pausing by its back-off,
 * 10 s at most), then unlock; the lock's answer. */
static int java_spin_lock(void *name) {
  rp_client p = peer();
  int rc = rp_spin_lock(&p, name, 2, 30000, 10000);
  if (rc == 1 && rp_spin_unlock(&p, name, 2) != 1)
    rc = -1;
  rp_close(&p);
  return rc;
}

/* Redisson's RSpinLock and dlock's spin lock on one name, both ways: each
 * waits for the other by pausing (nothing is published), and gets the
 * lock within a pause of the release. */
static void test_spin_both_ways(void) {
  const char *name = th_name("spin");
  dlock_lock *l;
  TH_ASSERT_RC(dlock_spin_lock_new(cl, name, NULL, &l), DLOCK_OK);
  rp_client p = peer();
  CU_ASSERT_EQUAL(rp_lock_try(&p, name, 1, 30000, NULL), 1); /* Java holds */
  th_acquirer w = {.lock = l, .wait_ms = 10000, .lease_ms = 30000};
  th_acquirer_start(&w);
  TH_ASSERT_RC(th_acquire_elsewhere(l, 0, 1000), DLOCK_EBUSY);
  int64_t t0 = th_now_ms();
  CU_ASSERT_EQUAL(rp_spin_unlock(&p, name, 1), 1);
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  /* within a pause (128 ms at most) and a try */
  CU_ASSERT(w.got_ms - t0 <= 128 + th_scaled_us(&srv, 100000) / 1000);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK); /* dlock holds */
  th_elsewhere_call java;
  th_elsewhere_start(&java, java_spin_lock, (void *)name);
  CU_ASSERT_EQUAL(rp_lock_try(&p, name, 1, 30000, NULL), 0);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(th_elsewhere_join(&java), 1);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  rp_close(&p);
  dlock_lock_free(l);
}

/* A Java RNonReentrantLock (4.4+) and dlock's non-reentrant lock on one
 * name: they exclude each other, each holder's second acquire is refused
 * (the error both scripts answer), and each one's release lets the other
 * in. */
static void test_non_reentrant_beside_java(void) {
  const char *name = th_name("once");
  dlock_lock *l;
  TH_ASSERT_RC(dlock_non_reentrant_lock_new(cl, name, NULL, &l), DLOCK_OK);
  rp_client p = peer();
  int64_t ttl = 0;
  CU_ASSERT_EQUAL(rp_once_try(&p, name, 1, 30000, NULL), 1);
  CU_ASSERT_EQUAL(rp_once_try(&p, name, 1, 30000, NULL), -3);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EBUSY);
  CU_ASSERT_EQUAL(th_int(&srv, "HLEN %s", name), 1); /* counted once */
  CU_ASSERT_EQUAL(rp_lock_unlock(&p, name, 1), 1);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(rp_once_try(&p, name, 1, 30000, &ttl), 0);
  CU_ASSERT(ttl > 0);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EREENTRY);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  CU_ASSERT_EQUAL(rp_once_try(&p, name, 1, 30000, NULL), 1);
  CU_ASSERT_EQUAL(rp_lock_unlock(&p, name, 1), 1);
  rp_close(&p);
  dlock_lock_free(l);
}

static void test_latch_both_ways(void) {
  const char *name = th_name("latch");
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", name);
  dlock_latch *l;
  TH_ASSERT_RC(dlock_latch_new(cl, name, NULL, &l), DLOCK_OK);
  /* Java sets and counts down; a C waiter is woken by the message */
  rp_client p = peer();
  CU_ASSERT_EQUAL(rp_latch_try_set_count(&p, name, 2), 1);
  TH_ASSERT_FLAG(dlock_latch_try_set_count(l, 5, &th_flag), 0);
  int64_t count = 0;
  TH_ASSERT_RC(dlock_latch_get_count(l, &count), DLOCK_OK);
  CU_ASSERT_EQUAL(count, 2);
  TH_ASSERT_RC(dlock_latch_await(l, 0), DLOCK_EBUSY);
  CU_ASSERT_EQUAL(rp_latch_count_down(&p, name), 0);
  TH_ASSERT_RC(dlock_latch_count_down(l, &count), DLOCK_OK);
  CU_ASSERT_EQUAL(count, 0);
  TH_ASSERT_RC(dlock_latch_await(l, 0), DLOCK_OK);
  /* C sets and counts down; a Java waiter is woken by the message */
  TH_ASSERT_FLAG(dlock_latch_try_set_count(l, 1, &th_flag), 1);
  CU_ASSERT_EQUAL(rp_latch_try_set_count(&p, name, 3), 0);
  java_call j = {.kind = 2, .name = name};
  pthread_create(&j.thread, NULL, java_call_run, &j);
  peer_waits(&j.waits);
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_latch_count_down(l, NULL), DLOCK_OK);
  pthread_join(j.thread, NULL);
  CU_ASSERT_EQUAL(j.rc, 1);
  CU_ASSERT(j.woken >= 1 && j.got_ms - t < 5000);
  CU_ASSERT_EQUAL(keys_left(name), 0);
  rp_close(&p);
  dlock_latch_free(l);
}

static void test_semaphore_both_ways(void) {
  const char *name = th_name("sem");
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
  dlock_semaphore *s;
  TH_ASSERT_RC(dlock_semaphore_new(cl, name, NULL, &s), DLOCK_OK);
  rp_client p = peer();
  CU_ASSERT_EQUAL(rp_sem_try_set_permits(&p, name, 1), 1);
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(s, 9, 0, &th_flag), 0);
  /* C takes the one permit; a Java waiter is woken by C's release */
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 1, 0), DLOCK_OK);
  CU_ASSERT_EQUAL(rp_sem_try_acquire(&p, name, 1), 0);
  java_call j = {.kind = 3, .name = name};
  pthread_create(&j.thread, NULL, java_call_run, &j);
  peer_waits(&j.waits);
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  pthread_join(j.thread, NULL);
  CU_ASSERT_EQUAL(j.rc, 1);
  CU_ASSERT(j.woken >= 1 && j.got_ms - t < 5000);
  /* Java holds it now; a C waiter is woken by Java's release */
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 1, 0), DLOCK_EBUSY);
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_semaphore *s2;
  TH_ASSERT_RC(dlock_semaphore_new(c2, name, NULL, &s2), DLOCK_OK);
  java_later later = {.name = name, .channel = channel, .what = 0};
  pthread_create(&later.thread, NULL, java_release_later, &later);
  TH_ASSERT_RC(dlock_semaphore_acquire(s2, 1, 20000), DLOCK_OK);
  int64_t got = th_now_ms();
  pthread_join(later.thread, NULL);
  CU_ASSERT_EQUAL(later.rc, 0);
  CU_ASSERT(got - later.at_ms < 5000);
  TH_ASSERT_RC(dlock_semaphore_release(s2, 1), DLOCK_OK);
  int64_t n = 0;
  TH_ASSERT_RC(dlock_semaphore_available(s, &n), DLOCK_OK);
  CU_ASSERT_EQUAL(n, 1);
  rp_close(&p);
  dlock_semaphore_free(s2);
  dlock_client_close(c2);
  dlock_semaphore_free(s);
  freeReplyObject(th_cmd(&srv, "DEL %s", name));
}

static void test_permits_both_ways(void) {
  const char *name = th_name("permits");
  dlock_permits *pm;
  TH_ASSERT_RC(dlock_permits_new(cl, name, NULL, &pm), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(pm, 1, 0, &th_flag), 1);
  rp_client p = peer();
  char jid[33];
  CU_ASSERT_EQUAL(rp_permits_try_acquire(&p, name, 30000, jid), 1);
  dlock_permit_id id;
  TH_ASSERT_RC(dlock_permits_acquire(pm, 1, 0, 30000, &id), DLOCK_EBUSY);
  int64_t available = -1, acquired = -1;
  TH_ASSERT_RC(dlock_permits_counts(pm, &available, &acquired), DLOCK_OK);
  CU_ASSERT_EQUAL(available, 0);
  CU_ASSERT_EQUAL(acquired, 1);
  /* a C waiter is woken by the Java release (the permit's lease: 30 s) */
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
  java_later later = {.name = name, .channel = channel, .what = 1, .id = jid};
  pthread_create(&later.thread, NULL, java_release_later, &later);
  TH_ASSERT_RC(dlock_permits_acquire(pm, 1, 20000, 30000, &id), DLOCK_OK);
  int64_t got = th_now_ms();
  pthread_join(later.thread, NULL);
  CU_ASSERT_EQUAL(later.rc, 1);
  CU_ASSERT(got - later.at_ms < 5000);
  /* the Java client cannot take it, and cannot release C's permit twice */
  CU_ASSERT_EQUAL(rp_permits_try_acquire(&p, name, 30000, jid), 0);
  TH_ASSERT_RC(dlock_permits_release(pm, &id, 1), DLOCK_OK);
  CU_ASSERT_EQUAL(rp_permits_release(&p, name, id.hex), 0);
  CU_ASSERT_EQUAL(rp_permits_try_acquire(&p, name, 30000, jid), 1);
  CU_ASSERT_EQUAL(rp_permits_release(&p, name, jid), 1);
  rp_close(&p);
  dlock_permits_free(pm);
  freeReplyObject(th_cmd(&srv, "DEL %s", name));
}

/* ---- node-redisson ------------------------------------------------------------ */

typedef struct node_peer {
  pid_t pid;
  int in, out; /* its stdin (we write), its stdout (we read) */
  char buf[512];
  size_t len;
} node_peer;

/* Run node_peer.js (DLOCK_NODE_PEER) with args; a missing node or package
 * fails the test: CI installs both. */
static int node_start(node_peer *n, const char *cmd, const char *name,
                      const char *arg) {
  const char *script = getenv("DLOCK_NODE_PEER");
  if (script == NULL) {
    fprintf(stderr, "\n  DLOCK_NODE_PEER is not set\n");
    return -1;
  }
  int to[2], from[2];
  if (pipe(to) != 0 || pipe(from) != 0)
    return -1;
  char port[16];
  snprintf(port, sizeof port, "%d", srv.port);
  memset(n, 0, sizeof *n);
  n->pid = fork();
  if (n->pid == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    execlp("node", "node", script, port, cmd, name, arg, (char *)NULL);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  n->in = to[1];
  n->out = from[0];
  return n->pid > 0 ? 0 : -1;
}

/* The next line node printed (without the newline), or "" after ms. */
static const char *node_line(node_peer *n, int ms) {
  static char line[512];
  int64_t end = th_now_ms() + ms;
  for (;;) {
    char *nl = memchr(n->buf, '\n', n->len);
    if (nl) {
      size_t k = (size_t)(nl - n->buf);
      memcpy(line, n->buf, k);
      line[k] = '\0';
      memmove(n->buf, nl + 1, n->len - k - 1);
      n->len -= k + 1;
      return line;
    }
    int left = (int)(end - th_now_ms());
    struct pollfd p = {n->out, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, left) <= 0 || n->len == sizeof n->buf)
      return "";
    ssize_t got = read(n->out, n->buf + n->len, sizeof n->buf - n->len);
    if (got <= 0)
      return "";
    n->len += (size_t)got;
  }
}

static int node_finish(node_peer *n) {
  close(n->in);
  close(n->out);
  return th_wait_worker(n->pid, 15000);
}

/* node-redisson and dlock on one lock: each blocks the other, and each
 * one's unlock message wakes the other's waiter (both would otherwise sleep
 * for the 30 s lease). */
static void test_node_redisson_lock_both_ways(void) {
  const char *name = th_name("node");
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  dlock_lock *l;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  node_peer n;
  CU_ASSERT_FATAL(node_start(&n, "try", name, NULL) == 0);
  CU_ASSERT_STRING_EQUAL(node_line(&n, 15000), "busy");
  CU_ASSERT_EQUAL(node_finish(&n), 0);

  /* a dlock release wakes node-redisson's waiter */
  CU_ASSERT_FATAL(node_start(&n, "wait", name, "20000") == 0);
  CU_ASSERT_STRING_EQUAL(node_line(&n, 15000), "waiting");
  CU_ASSERT_STRING_EQUAL(node_line(&n, 15000), "subscribed"); /* listening */
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  const char *got = node_line(&n, 15000);
  CU_ASSERT(strncmp(got, "acquired ", 9) == 0);
  int64_t woke_ms = th_now_ms() - t;
  CU_ASSERT(woke_ms < 5000); /* a message: ms; its timer: 30 s */
  CU_ASSERT_EQUAL(node_finish(&n), 0);

  /* a node-redisson holder blocks dlock; its unlock wakes dlock's waiter */
  CU_ASSERT_FATAL(node_start(&n, "hold", name, "30000") == 0);
  CU_ASSERT_STRING_EQUAL(node_line(&n, 15000), "held");
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EBUSY);
  dlock_lock *l2;
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &l2), DLOCK_OK);
  th_acquirer w = {.lock = l2, .wait_ms = 20000, .lease_ms = 10000, .rc = -1};
  th_acquirer_start(&w);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 15000));
  t = th_now_ms();
  CU_ASSERT_EQUAL(write(n.in, "go\n", 3), 3);
  CU_ASSERT_STRING_EQUAL(node_line(&n, 15000), "released");
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  CU_ASSERT(w.got_ms - t < 5000);
  CU_ASSERT_EQUAL(node_finish(&n), 0);
  CU_ASSERT_EQUAL(keys_left(name), 0);
  dlock_lock_free(l2);
  dlock_lock_free(l);
}

/* ---- unlock latches ---------------------------------------------------------- */

static long long latch_keys(void) {
  long long n = 0;
  const char *pats[] = {"*unlock_latch*", "*release_latch*"};
  for (int i = 0; i < 2; i++) {
    redisReply *r = th_cmd(&srv, "KEYS %s", pats[i]);
    n += r ? (long long)r->elements : 1000000;
    for (size_t k = 0; r && k < r->elements && k < 3; k++)
      fprintf(stderr, "\n  latch left: %s\n", r->element[k]->str);
    if (r)
      freeReplyObject(r);
  }
  return n;
}

/* As Redisson deletes its unlock latch once the answer is in, so does dlock:
 * after a burst of releases of every kind, none is left once one more call
 * on the same client has had its answer (the deletes go first). */
static void test_latches_deleted_after_reply(void) {
  const char *name = th_name("burst");
  /* the tests before: an idle connection's DELs go within 50 ms */
  for (int i = 0; i < 500 && latch_keys() != 0; i++)
    usleep(2000);
  CU_ASSERT_EQUAL(latch_keys(), 0);
  dlock_lock *locks[3] = {0};
  TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &locks[0]), DLOCK_OK);
  char fenced[80], fairn[80], rwn[80], pn[80];
  snprintf(fenced, sizeof fenced, "%s.fenced", name);
  snprintf(fairn, sizeof fairn, "%s.fair", name);
  snprintf(rwn, sizeof rwn, "%s.rw", name);
  snprintf(pn, sizeof pn, "%s.permits", name);
  TH_ASSERT_RC(dlock_fenced_lock_new(cl, fenced, NULL, &locks[1]), DLOCK_OK);
  TH_ASSERT_RC(dlock_fair_lock_new(cl, fairn, NULL, &locks[2]), DLOCK_OK);
  dlock_rwlock *rw;
  TH_ASSERT_RC(dlock_rwlock_new(cl, rwn, NULL, &rw), DLOCK_OK);
  dlock_permits *pm;
  TH_ASSERT_RC(dlock_permits_new(cl, pn, NULL, &pm), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(pm, 2, 0, &th_flag), 1);
  for (int i = 0; i < 50; i++) {
    for (int k = 0; k < 3; k++) { /* a re-entry: latches "0" and "1" */
      TH_ASSERT_RC(dlock_acquire(locks[k], 0, 30000), DLOCK_OK);
      TH_ASSERT_RC(dlock_acquire(locks[k], 0, 30000), DLOCK_OK);
      TH_ASSERT_RC(dlock_release(locks[k]), DLOCK_OK);
      TH_ASSERT_RC(dlock_release(locks[k]), DLOCK_OK);
    }
    TH_ASSERT_RC(dlock_acquire(dlock_rwlock_write(rw), 0, 30000), DLOCK_OK);
    TH_ASSERT_RC(dlock_release(dlock_rwlock_write(rw)), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, 30000), DLOCK_OK);
    TH_ASSERT_RC(dlock_release(dlock_rwlock_read(rw)), DLOCK_OK);
    dlock_permit_id ids[2];
    TH_ASSERT_RC(dlock_permits_acquire(pm, 2, 0, 30000, ids), DLOCK_OK);
    TH_ASSERT_RC(dlock_permits_release(pm, ids, 2), DLOCK_OK);
  }
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(locks[0], &st), DLOCK_OK); /* one more answer */
  CU_ASSERT_EQUAL(latch_keys(), 0);
  for (int k = 0; k < 3; k++)
    dlock_lock_free(locks[k]);
  dlock_rwlock_free(rw);
  dlock_permits_free(pm);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("interop", suite_init, suite_clean);
  CU_add_test(s, "fair_redisson_arithmetic", test_fair_redisson_arithmetic);
  CU_add_test(s, "fair_java_keeps_place_when_c_leaves",
              test_fair_java_keeps_place_when_c_leaves);
  CU_add_test(s, "fair_mixed_fifo", test_fair_mixed_fifo);
  CU_add_test(s, "rwlock_odd_name_exclusion", test_rwlock_odd_name_exclusion);
  CU_add_test(s, "inspect_odd_names", test_inspect_odd_names);
  CU_add_test(s, "rwlock_wakeups_both_ways", test_rwlock_wakeups_both_ways);
  CU_add_test(s, "fenced_tokens_shared", test_fenced_tokens_shared);
  CU_add_test(s, "non_reentrant_beside_java", test_non_reentrant_beside_java);
  CU_add_test(s, "spin_both_ways", test_spin_both_ways);
  CU_add_test(s, "group_beside_java", test_group_beside_java);
  CU_add_test(s, "fair_tail_without_deadline", test_fair_tail_without_deadline);
  CU_add_test(s, "fair_skewed_java_gives_up_dead",
              test_fair_skewed_java_gives_up_dead);
  CU_add_test(s, "latch_both_ways", test_latch_both_ways);
  CU_add_test(s, "semaphore_both_ways", test_semaphore_both_ways);
  CU_add_test(s, "permits_both_ways", test_permits_both_ways);
  CU_add_test(s, "node_redisson_lock_both_ways", test_node_redisson_lock_both_ways);
  CU_add_test(s, "latches_deleted_after_reply", test_latches_deleted_after_reply);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
