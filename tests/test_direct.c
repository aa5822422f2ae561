/* The direct path (src/direct/direct.c): a call that needs no waiting is made
 * by the calling thread on a pooled connection of its own. These tests check
 * that calls really take it, that the pool stays within its bound, and that
 * every fault keeps the engine's meaning (closed idle connections, NOSCRIPT,
 * the command timeout, a close during a call, a dead server, the
 * handshake's AUTH and SELECT), and that the watchdog knows of grants made
 * there. The rest of the suites run with the direct path on (the default). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine.h"
#include "delay.h"
#include "direct/direct.h"
#include "harness.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

static uint64_t direct_calls(dlock_client *c) {
  return atomic_load(&c->direct.calls);
}

static uint64_t fallbacks(dlock_client *c) {
  return atomic_load(&c->direct.fallbacks);
}

/* Whether c's busy calls ride (off over TLS: a session is not written and
 * read by two threads; those calls go through the engine). */
static int rides_on(dlock_client *c) { return c->net.tls == NULL; }

static int lock_unlock(dlock_client *c, const char *name) {
  dlock_lock *l = NULL;
  int rc = dlock_reentrant_lock_new(c, name, NULL, &l);
  if (rc == DLOCK_OK)
    rc = dlock_acquire(l, 1000, 10000);
  if (rc == DLOCK_OK)
    rc = dlock_release(l);
  dlock_lock_free(l);
  return rc;
}

static void test_calls_go_direct(void) {
  dlock_client *c = th_client(&srv, NULL);
  for (int i = 0; i < 50; i++)
    TH_ASSERT_RC(lock_unlock(c, th_name("direct")), DLOCK_OK);
  /* one thread: every acquire and release went direct, none to the engine */
  CU_ASSERT(direct_calls(c) >= 100);
  CU_ASSERT_EQUAL(fallbacks(c), 0);
  /* the engine's two connections and one direct connection */
  CU_ASSERT_EQUAL(th_connections_of(&srv, c), 3);
  dlock_client_close(c);
}

static void test_direct_off(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.direct_conns = 0;
  dlock_client *c = th_client(&srv, &o);
  for (int i = 0; i < 20; i++)
    TH_ASSERT_RC(lock_unlock(c, th_name("off")), DLOCK_OK);
  CU_ASSERT_EQUAL(direct_calls(c), 0);
  /* the engine's two: the pub/sub connection's handshake (its name) may
   * still be under way on a loaded machine (TLS): the event, bounded */
  int n = th_connections_of(&srv, c);
  for (int64_t end = th_now_ms() + 2000; n < 2 && th_now_ms() < end;
       n = th_connections_of(&srv, c))
    usleep(5000);
  CU_ASSERT_EQUAL(n, 2);
  dlock_client_close(c);
}

static void test_options(void) {
  dlock_client *c = NULL;
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.direct_conns = -1;
  TH_ASSERT_RC(dlock_client_open(srv.url, &o, &c), DLOCK_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "direct_conns"));
  o.direct_conns = DLOCK__DIRECT_MAX + 1;
  TH_ASSERT_RC(dlock_client_open(srv.url, &o, &c), DLOCK_EINVAL);
  o.direct_conns = 4;
  o.spin_us = -2;
  TH_ASSERT_RC(dlock_client_open(srv.url, &o, &c), DLOCK_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "spin_us"));
  o.spin_us = 10001;
  TH_ASSERT_RC(dlock_client_open(srv.url, &o, &c), DLOCK_EINVAL);
  /* an older options version gets the defaults */
  o.version = 3;
  o.direct_conns = 0;
  TH_ASSERT_RC(dlock_client_open(srv.url, &o, &c), DLOCK_OK);
  CU_ASSERT_EQUAL(c->opts.direct_conns, 64);
  CU_ASSERT_EQUAL(c->opts.spin_us, -1);
  dlock_client_close(c);
  /* never polling for the reply works as well */
  o = (dlock_client_opts)DLOCK_CLIENT_OPTS_INIT;
  o.spin_us = 0;
  c = th_client(&srv, &o);
  for (int i = 0; i < 20; i++)
    TH_ASSERT_RC(lock_unlock(c, th_name("nospin")), DLOCK_OK);
  CU_ASSERT(direct_calls(c) >= 40);
  dlock_client_close(c);
}

typedef struct worker {
  dlock_client *c;
  int id, errors;
  pthread_t t;
  char first[256]; /* the first error's message */
} worker;

static void *work(void *p) {
  worker *w = p;
  char name[64];
  for (int i = 0; i < 100; i++) {
    snprintf(name, sizeof name, "%s:%d", th_name("pool"), w->id);
    int rc = lock_unlock(w->c, name);
    if (rc != DLOCK_OK && w->errors++ == 0)
      snprintf(w->first, sizeof w->first, "%s", dlock_errmsg());
  }
  return NULL;
}

/* n workers (ids 0..n-1) on c, to the end: their errors, added up. */
static int run_workers(dlock_client *c, int n) {
  worker w[16];
  int errors = 0;
  for (int i = 0; i < n && i < 16; i++) {
    w[i] = (worker){.c = c, .id = i};
    pthread_create(&w[i].t, NULL, work, &w[i]);
  }
  for (int i = 0; i < n && i < 16; i++) {
    pthread_join(w[i].t, NULL);
    errors += w[i].errors;
    if (w[i].errors)
      printf("[worker %d: %d errors, the first: %s] ", i, w[i].errors,
             w[i].first);
  }
  return errors;
}

static void test_pool_bounded(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.direct_conns = 2;
  dlock_client *c = th_client(&srv, &o);
  CU_ASSERT_EQUAL(run_workers(c, 8), 0);
  /* never more than two direct connections and a lane per
   * DLOCK__LANE_RIDERS of the 6 riders beside the engine's two; the calls
   * that found both busy rode (or, while a lane was being opened, went
   * through the engine's pipeline) */
  CU_ASSERT(th_connections_of(&srv, c) <= 4 + (6 + DLOCK__LANE_RIDERS - 1) /
                                                  DLOCK__LANE_RIDERS);
  CU_ASSERT(c->direct.pools[0].open <= 2);
  CU_ASSERT_EQUAL(direct_calls(c) + fallbacks(c), 8 * 100 * 2);
  CU_ASSERT(rides_on(c) ? atomic_load(&c->direct.rides) > 0
                        : atomic_load(&c->direct.rides) == 0);
  dlock_client_close(c);
}

/* The id of c's direct connection on s: the one of c's connections whose
 * last command was a script call or a latch's DEL (the engine's made the
 * first PING and the subscriptions). -1 when there is none. */
static long long direct_conn_id(th_server *s, dlock_client *c) {
  redisReply *r = th_cmd(s, "CLIENT LIST");
  long long id = -1;
  for (char *line = r ? strtok(r->str, "\n") : NULL; line && id < 0;
       line = strtok(NULL, "\n"))
    if (strstr(line, dlock_client_id(c)) &&
        (strstr(line, " cmd=evalsha ") || strstr(line, " cmd=del ")))
      id = atoll(strstr(line, "id=") + 3);
  if (r)
    freeReplyObject(r);
  return id;
}

/* The server closed the idle direct connection (CLIENT KILL, its idle
 * timeout): the next call notices before it writes, and succeeds on a new
 * direct connection. */
static void test_idle_connection_killed(void) {
  dlock_client *c = th_client(&srv, NULL);
  TH_ASSERT_RC(lock_unlock(c, th_name("killed")), DLOCK_OK);
  uint64_t before = direct_calls(c);
  long long id = direct_conn_id(&srv, c);
  CU_ASSERT_FATAL(id > 0);
  CU_ASSERT_EQUAL(th_int(&srv, "CLIENT KILL ID %lld", id), 1);
  TH_ASSERT_RC(lock_unlock(c, th_name("killed")), DLOCK_OK);
  CU_ASSERT_EQUAL(direct_calls(c), before + 2);
  long long id2 = direct_conn_id(&srv, c);
  CU_ASSERT(id2 > 0 && id2 != id);
  CU_ASSERT_EQUAL(th_connections_of(&srv, c), 3);
  dlock_client_close(c);
}

/* How many unlock latches of name the server holds. */
static long latches(const char *name) {
  redisReply *r = th_cmd(&srv, "KEYS redisson_unlock_latch:{%s}:*", name);
  long n = r && r->type == REDIS_REPLY_ARRAY ? (long)r->elements : -1;
  if (r)
    freeReplyObject(r);
  return n;
}

/* How long (ms) until name has no latch left, polling every 2 ms for up
 * to 2 s; -1 if one is still there. */
static int64_t latch_gone_after(const char *name) {
  int64_t t0 = th_now_ms();
  for (int i = 0; i < 1000 && th_now_ms() - t0 < 2000; i++, usleep(2000))
    if (latches(name) == 0)
      return th_now_ms() - t0;
  return -1;
}

/* A release's unlock latch is deleted in front of the connection's next
 * call, in its write; a connection left idle has the engine send it
 * (within 50 ms); a closing client sends it before the connection
 * closes. Every call still goes direct. */
static void test_latch_deleted(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("latch");
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  uint64_t before = direct_calls(c);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(latches(name), 0); /* its DEL went with this acquire */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  int64_t ms = latch_gone_after(name); /* idle: the sweep */
  CU_ASSERT(ms >= 0 && ms < 1000);
  CU_ASSERT_EQUAL(direct_calls(c), before + 4);
  CU_ASSERT_EQUAL(fallbacks(c), 0);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c); /* at once: before the sweep */
  ms = latch_gone_after(name);
  CU_ASSERT(ms >= 0 && ms < 1000);
}

static int64_t thread_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One measured call of the given way (1 polled, 0 slept) that cost ns of
 * CPU, at its place in the poll's round. */
static void poll_fed(dlock_client *c, int way, unsigned phase, int64_t ns) {
  dlock__poll_probe pr = {way, phase, thread_ns() - ns};
  dlock__poll_end(c, &pr);
}

/* Two rounds of calls where polling costs poll_ns and sleeping sleep_ns
 * (the current way measured at phase 0, the other in the round's try). */
static void poll_rounds(dlock_client *c, int64_t sleep_ns, int64_t poll_ns) {
  for (int round = 0; round < 2; round++) {
    int on = atomic_load(&c->direct.poll.on);
    for (int i = 0; i < 16; i++)
      poll_fed(c, on, 0, on ? poll_ns : sleep_ns);
    for (unsigned ph = 32; ph < 48; ph++)
      poll_fed(c, !on, ph, on ? sleep_ns : poll_ns);
  }
}

/* The reply poll (spin_us -1) stays on while a polled call costs at most
 * 5 % more CPU than a sleeping one (means of the last 16 measures of
 * each way), both measured as calls go: a real client measures both ways;
 * fed costs turn it off after two rounds that agree (not one), and on
 * again; no poll while other tasks want every core; forced on and off it
 * measures nothing. */
static void test_reply_poll_adapts(void) {
  CU_ASSERT(dlock__poll_pays(1000, 1050));
  CU_ASSERT(!dlock__poll_pays(1000, 1060));
  CU_ASSERT(dlock__poll_pays(0, 5000)); /* not measured yet: polls */
  dlock_client *c = th_client(&srv, NULL);
  dlock__poll *p = &c->direct.poll;
  for (int i = 0; i < 100; i++) {
    atomic_store(&p->rtt_us, 20); /* a quick server (a loaded machine's
                                     slow one would turn the poll off) */
    TH_ASSERT_RC(lock_unlock(c, th_name("poll")), DLOCK_OK);
  }
  /* the acquires at least (a release's poll goes by the acquire's round
   * trip, which a loaded machine makes slow): phases 0-99, the round's
   * tries (32-47) among them */
  CU_ASSERT(atomic_load(&p->calls) >= 100);
  CU_ASSERT(p->kept[0] > 0 && p->kept[1] > 0); /* both ways measured */
  atomic_store(&p->busy, 0); /* a loaded machine's looks said busy: the
                                rest feeds the measures by hand */
  atomic_store(&p->taken_seen, 0);
  atomic_store(&p->on, 1);
  p->against = 0;
  /* polling costs 3x sleeping: one round is not enough, two are */
  for (int i = 0; i < 16; i++)
    poll_fed(c, 1, 0, 30000);
  for (unsigned ph = 32; ph < 48; ph++)
    poll_fed(c, 0, ph, 10000);
  CU_ASSERT_EQUAL(atomic_load(&p->on), 1);
  poll_rounds(c, 10000, 30000);
  CU_ASSERT_EQUAL(atomic_load(&p->on), 0);
  dlock__poll_probe pr;
  atomic_store(&p->rtt_us, 20); /* a quick server */
  atomic_store(&p->calls, 1); /* a call outside the round's try: sleeps */
  CU_ASSERT_EQUAL(dlock__poll_begin(c, 1, &pr), 0);
  atomic_store(&p->calls, 32); /* the try: polls */
  CU_ASSERT(dlock__poll_begin(c, 1, &pr) > 0);
  poll_rounds(c, 30000, 10000); /* polling is the cheaper way again */
  CU_ASSERT_EQUAL(atomic_load(&p->on), 1);
  atomic_store(&p->rtt_us, 20);
  atomic_store(&p->calls, 5);
  CU_ASSERT(dlock__poll_begin(c, 1, &pr) > 0);
  atomic_store(&p->busy, 1); /* other tasks want every core: no poll */
  atomic_store(&p->calls, 5);
  CU_ASSERT_EQUAL(dlock__poll_begin(c, 1, &pr), 0);
  atomic_store(&p->calls, 33); /* not even the round's try */
  CU_ASSERT_EQUAL(dlock__poll_begin(c, 1, &pr), 0);
  dlock_client_close(c);
  for (int forced = 0; forced < 2; forced++) {
    dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
    o.spin_us = forced ? 300 : 0;
    c = th_client(&srv, &o);
    for (int i = 0; i < 50; i++)
      TH_ASSERT_RC(lock_unlock(c, th_name("poll")), DLOCK_OK);
    CU_ASSERT_EQUAL(atomic_load(&c->direct.poll.calls), 0);
    CU_ASSERT_EQUAL(dlock__poll_begin(c, 1, &pr), forced ? 300 : 0);
    dlock_client_close(c);
  }
}

static atomic_int spinning, spinners_up;

static void *spin_thread(void *arg) {
  (void)arg;
  atomic_fetch_add(&spinners_up, 1);
  int64_t end = th_now_ms() + 10000;
  while (atomic_load(&spinning) && th_now_ms() < end) {
  }
  return NULL;
}

/* Beside tasks that want every core, a new client stops polling within
 * its first few hundred calls (it looks every 64 calls and stops after
 * three looks in a row: call 128, or a look or two later when a read of
 * the load missed a spinner), not its first 2,049. */
static void test_poll_stops_beside_busy_cores(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  pthread_t t[256]; /* a spinner per core, as the poll counts cores */
  int n = cpus < 1 ? 1 : cpus > 256 ? 256 : (int)cpus;
  atomic_store(&spinning, 1);
  atomic_store(&spinners_up, 0);
  for (int i = 0; i < n; i++)
    pthread_create(&t[i], NULL, spin_thread, NULL);
  /* every spinner running before the client's first look (call 0): one
   * look that finds a core free restarts the count of three */
  for (int i = 0; i < 5000 && atomic_load(&spinners_up) < n; i++)
    usleep(1000);
  dlock_client *c = th_client(&srv, NULL);
  dlock__poll *p = &c->direct.poll;
  /* a call is counted while the round trip looks quick (a release's goes
   * by its acquire's, slow beside the spinners): until it stops */
  for (int i = 0; i < 400 && !atomic_load(&p->busy); i++) {
    atomic_store(&p->rtt_us, 20);
    TH_ASSERT_RC(lock_unlock(c, th_name("busy")), DLOCK_OK);
  }
  uint64_t calls = atomic_load(&p->calls);
  CU_ASSERT(calls >= 129 && calls <= 400);
  CU_ASSERT_EQUAL(atomic_load(&p->busy), 1);
  dlock__poll_probe pr;
  CU_ASSERT_EQUAL(dlock__poll_begin(c, 1, &pr), 0);
  atomic_store(&spinning, 0);
  for (int i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  dlock_client_close(c);
}

/* One crowded call of the given way (1 rode, 0 its own connection) that
 * took us, at its place in the round. */
static void share_fed(dlock_client *c, int way, unsigned phase, int64_t us) {
  dlock__share_probe pr = {way, phase, dlock__now_us() - us};
  dlock__share_end(c, &pr);
}

/* A round of crowded calls: 1,024 the current way taking cur_us each, and
 * 1,024 the other way taking other_us. */
static void share_round(dlock_client *c, int64_t cur_us, int64_t other_us) {
  int ride = atomic_load(&c->direct.share.ride);
  for (unsigned ph = 0; ph < 1024; ph++)
    share_fed(c, ride, ph, cur_us);
  for (unsigned ph = 1024; ph < 2048; ph++)
    share_fed(c, !ride, ph, other_us);
}

static void *pairs_thread(void *arg) {
  dlock_client *c = arg;
  for (int i = 0; i < 200; i++)
    if (lock_unlock(c, th_name("crowd")) != DLOCK_OK)
      return arg;
  return NULL;
}

/* With 4 or more calls of a client under way, a call takes a direct
 * connection of its own or rides a lane, whichever made calls faster
 * (riding unless its calls were more than 10 % slower: it costs no more
 * CPU): a crowded client measures both ways; fed times turn riding on
 * after two rounds that agree (not one) and off again. Over TLS nobody
 * rides: nothing is measured. */
static void test_crowded_calls_choose(void) {
  CU_ASSERT(dlock__share_rides(1000, 1100));
  CU_ASSERT(!dlock__share_rides(1000, 1110));
  CU_ASSERT(dlock__share_rides(0, 500)); /* not measured: riding */
  dlock_client *c = th_client(&srv, NULL);
  dlock__share *s = &c->direct.share;
  int failed = 0;
  /* 16 threads of 200 pairs, again (up to 4 times) until a round's two
   * windows (2,048 crowded calls) are in: a loaded machine crowds less */
  for (int batch = 0; batch < 4 && failed == 0 &&
                      atomic_load(&s->tried[0]) + atomic_load(&s->tried[1]) < 2048;
       batch++) {
    pthread_t t[16];
    for (int i = 0; i < 16; i++)
      pthread_create(&t[i], NULL, pairs_thread, c);
    for (int i = 0; i < 16; i++) {
      void *r;
      pthread_join(t[i], &r);
      failed += r != NULL;
    }
    if (!rides_on(c))
      break; /* TLS: nothing is measured */
  }
  CU_ASSERT_EQUAL(failed, 0);
  if (rides_on(c)) { /* both ways measured */
    CU_ASSERT(atomic_load(&s->tried[0]) > 0 && atomic_load(&s->tried[1]) > 0);
  } else { /* TLS: a connection each, nothing to measure */
    CU_ASSERT(atomic_load(&s->tried[0]) + atomic_load(&s->tried[1]) == 0);
  }
  atomic_store(&s->ride, 0);
  atomic_store(&s->against, 0);
  for (int i = 0; i < 2; i++) {
    atomic_store(&s->sum_us[i], 0);
    atomic_store(&s->n[i], 0);
  }
  share_round(c, 300, 200); /* riding faster: not after one round */
  CU_ASSERT_EQUAL(atomic_load(&s->ride), 0);
  share_round(c, 300, 200);
  CU_ASSERT_EQUAL(atomic_load(&s->ride), 1);
  /* (the current way's time first: riding's now) */
  share_round(c, 300, 285); /* riding 5 % slower: still riding */
  share_round(c, 300, 285);
  CU_ASSERT_EQUAL(atomic_load(&s->ride), 1);
  share_round(c, 300, 250); /* riding 20 % slower: not after one round */
  CU_ASSERT_EQUAL(atomic_load(&s->ride), 1);
  share_round(c, 300, 250);
  CU_ASSERT_EQUAL(atomic_load(&s->ride), 0);
  dlock_client_close(c);
}

static void test_noscript(void) {
  dlock_client *c = th_client(&srv, NULL);
  TH_ASSERT_RC(lock_unlock(c, th_name("noscript")), DLOCK_OK);
  uint64_t before = direct_calls(c);
  freeReplyObject(th_cmd(&srv, "SCRIPT FLUSH"));
  TH_ASSERT_RC(lock_unlock(c, th_name("noscript")), DLOCK_OK);
  CU_ASSERT_EQUAL(direct_calls(c), before + 2);
  dlock_client_close(c);
}

static void test_command_timeout(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.command_timeout_ms = 300;
  dlock_client *c = th_client(&srv, &o);
  TH_ASSERT_RC(lock_unlock(c, th_name("timeout")), DLOCK_OK);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, th_name("timeout"), NULL, &l),
               DLOCK_OK);
  uint64_t before = direct_calls(c);
  th_server_pause(&srv, 1);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_try_acquire(l, 10000), DLOCK_EIO);
  int64_t took = th_now_ms() - t0;
  th_server_pause(&srv, 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "command timeout"));
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "direct connection"));
  CU_ASSERT_EQUAL(direct_calls(c), before + 1);
  /* measured 300-302 ms idle and with two CPU hogs */
  CU_ASSERT(took >= 300 && took < 300 + th_scaled_us(&srv, 700000) / 1000);
  /* the broken connection was dropped; the next call opens another */
  TH_ASSERT_RC(dlock_try_acquire(l, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
}

typedef struct closing {
  dlock_lock *lock;
  int rc;
  int64_t done_ms;
} closing;

static void *acquire_once(void *p) {
  closing *a = p;
  a->rc = dlock_try_acquire(a->lock, 10000);
  a->done_ms = th_now_ms();
  return NULL;
}

/* dlock_client_close fails a direct call under way with DLOCK_ECLOSED at
 * once, instead of letting it wait out the command timeout. */
static void test_close_during_call(void) {
  dlock_client *c = th_client(&srv, NULL); /* command timeout 3 s */
  TH_ASSERT_RC(lock_unlock(c, th_name("close")), DLOCK_OK);
  closing a = {0};
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, th_name("close"), NULL, &a.lock),
               DLOCK_OK);
  th_server_pause(&srv, 1);
  pthread_t t;
  pthread_create(&t, NULL, acquire_once, &a);
  int in_call = 0;
  for (int i = 0; i < 2000 && !in_call; i++) { /* the call is under way */
    in_call = atomic_load(&c->direct.active) == 1;
    if (!in_call)
      usleep(1000);
  }
  CU_ASSERT(in_call);
  int64_t t0 = th_now_ms();
  dlock_client_close(c);
  pthread_join(t, NULL);
  th_server_pause(&srv, 0);
  TH_ASSERT_RC(a.rc, DLOCK_ECLOSED);
  CU_ASSERT(a.done_ms - t0 < 1000); /* measured 0-1 ms; the timeout is 3 s */
  dlock_lock_free(a.lock);
}

/* Riders: with one direct connection, twelve threads' calls share a few
 * more connections (lanes: one rider at a time writes what the others
 * queued and reads the replies in order), not the engine's pipeline;
 * every call succeeds and every lock is released. */
static void test_riders_share_a_connection(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.direct_conns = 1;
  dlock_client *c = th_client(&srv, &o);
  CU_ASSERT_EQUAL(run_workers(c, 12), 0);
  uint64_t rides = atomic_load(&c->direct.rides);
  printf("[%llu of %llu calls rode] ", (unsigned long long)rides,
         (unsigned long long)(direct_calls(c) + fallbacks(c)));
  CU_ASSERT(rides_on(c) ? rides > 0 : rides == 0); /* TLS: the engine's */
  /* engine 2, direct 1, a lane per DLOCK__LANE_RIDERS of the 11 riders */
  CU_ASSERT(th_connections_of(&srv, c) <= 3 + (11 + DLOCK__LANE_RIDERS - 1) /
                                                  DLOCK__LANE_RIDERS);
  CU_ASSERT_EQUAL(direct_calls(c) + fallbacks(c), 12 * 100 * 2);
  char name[64];
  for (int i = 0; i < 12; i++) {
    snprintf(name, sizeof name, "%s:%d", th_name("pool"), i);
    CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  }
  dlock_client_close(c);
}

/* Riders whose batch reaches the server in pieces (a write cut into
 * segments on its way): the server answers the front of a batch before
 * the rest comes, so a driver reads some riders' replies while others are
 * still to come, and writes more behind them (the next calls, and the
 * latch DELs kept in front of them, whose answers are skipped). Every
 * reply goes to its own rider: every call succeeds, every lock is
 * released. Plain TCP through the relay in every mode (the riders'
 * path). */
static void test_riders_batch_in_pieces(void) {
  delay_pieces(200, 300);
  int port = delay_start("127.0.0.1", "127.0.0.1", srv.port, 0, 0);
  CU_ASSERT_FATAL(port > 0);
  char url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.direct_conns = 1;
  dlock_client *c = NULL;
  TH_ASSERT_RC(dlock_client_open(url, &o, &c), DLOCK_OK);
  CU_ASSERT_EQUAL(run_workers(c, 12), 0);
  uint64_t rides = atomic_load(&c->direct.rides);
  printf("[%llu of %llu calls rode] ", (unsigned long long)rides,
         (unsigned long long)(direct_calls(c) + fallbacks(c)));
  CU_ASSERT(rides > 0);
  char name[64];
  for (int i = 0; i < 12; i++) {
    snprintf(name, sizeof name, "%s:%d", th_name("pool"), i);
    CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  }
  dlock_client_close(c);
  delay_stop();
}

/* A rider answered NOSCRIPT (the server's scripts flushed) sends its
 * script again as EVAL on the shared connection: every call succeeds. */
static void test_riders_noscript(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.direct_conns = 1;
  dlock_client *c = th_client(&srv, &o);
  CU_ASSERT_EQUAL(run_workers(c, 8), 0); /* the shared connection is up */
  for (int i = 0; i < 3; i++) {
    freeReplyObject(th_cmd(&srv, "SCRIPT FLUSH"));
    uint64_t rides = atomic_load(&c->direct.rides);
    CU_ASSERT_EQUAL(run_workers(c, 8), 0);
    CU_ASSERT(!rides_on(c) || atomic_load(&c->direct.rides) > rides);
  }
  dlock_client_close(c);
}

/* Riders under way on pool 0's lanes now (their drivers among them). */
static int riders_waiting(dlock_client *c) {
  int n = 0;
  for (int k = 0; k < DLOCK__LANES; k++) {
    dlock__lane *l = &c->direct.pools[0].lanes[k];
    pthread_mutex_lock(&l->mu);
    for (dlock__rider *r = l->queued; r; r = r->next)
      n++;
    for (dlock__rider *r = l->sent; r; r = r->next)
      n++;
    pthread_mutex_unlock(&l->mu);
  }
  return n;
}

/* Pool 0's lanes' connections shut down (as a server's crash would). */
static void lanes_break(dlock_client *c) {
  for (int k = 0; k < DLOCK__LANES; k++) {
    dlock__lane *l = &c->direct.pools[0].lanes[k];
    pthread_mutex_lock(&l->mu);
    if (l->conn)
      shutdown(l->conn->s.fd, SHUT_RDWR);
    pthread_mutex_unlock(&l->mu);
  }
}

/* Calls riding a lane whose connection breaks: those written lost their
 * answers at once (not each after the command timeout) and ask the server
 * whether they ran (they did: each is granted), those still queued (not
 * written: they did not run) go to the engine's pipeline and succeed, and
 * the next calls ride a new connection; dlock_client_close fails riders
 * under way with DLOCK_ECLOSED at once. */
static void test_riders_fail_together(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.direct_conns = 1;
  for (int closing_client = 0; closing_client < 2; closing_client++) {
    dlock_client *c = th_client(&srv, &o);
    if (!rides_on(c)) { /* over TLS no call rides: riders_share_a_connection */
      dlock_client_close(c);
      return;
    }
    /* the direct connection and a lane open (the engine's are up) */
    CU_ASSERT_EQUAL(run_workers(c, 4), 0);
    th_server_pause(&srv, 1);
    closing a[5] = {{0}};
    pthread_t t[5];
    for (int i = 0; i < 5; i++) {
      TH_ASSERT_RC(dlock_reentrant_lock_new(c, th_name("riders"), NULL,
                                            &a[i].lock), DLOCK_OK);
      pthread_create(&t[i], NULL, acquire_once, &a[i]);
    }
    int n = 0;
    for (int i = 0; i < 2000 && n < 3; i++) { /* riders under way */
      n = riders_waiting(c);
      if (n < 3)
        usleep(1000);
    }
    CU_ASSERT(n >= 3);
    int64_t t0 = th_now_ms();
    if (closing_client) {
      dlock_client_close(c);
    } else {
      lanes_break(c);
      th_server_pause(&srv, 0); /* the calls not written get their answers */
    }
    int failed_at_once = 0, succeeded_at_once = 0;
    for (int i = 0; i < 5; i++) {
      pthread_join(t[i], NULL);
      if (a[i].done_ms - t0 < 1000) { /* measured 0-1 ms; the timeout is 3 s */
        failed_at_once += a[i].rc == DLOCK_ECLOSED;
        succeeded_at_once += a[i].rc == DLOCK_OK;
      }
    }
    th_server_pause(&srv, 0);
    if (closing_client) {
      CU_ASSERT(failed_at_once >= n); /* riders and the direct call */
    } else {
      /* every call ends at once, granted: the written ones asked, the
       * direct call and the queued riders went through the engine */
      CU_ASSERT_EQUAL(succeeded_at_once, 5);
      /* the next calls go through the engine for the pool's back-off
       * (100 ms), then ride a new connection */
      uint64_t rides = atomic_load(&c->direct.rides);
      int64_t end = th_now_ms() + 3000;
      int errors = 0;
      while (atomic_load(&c->direct.rides) == rides && th_now_ms() < end)
        errors += run_workers(c, 6);
      CU_ASSERT_EQUAL(errors, 0);
      CU_ASSERT(atomic_load(&c->direct.rides) > rides);
      dlock_client_close(c);
    }
    for (int i = 0; i < 5; i++)
      dlock_lock_free(a[i].lock);
  }
}

/* A dead server: calls get the engine's errors (the direct path backs off),
 * and once it is back calls go direct again. */
static void test_dead_server(void) {
  th_server s2;
  CU_ASSERT_FATAL(th_server_start(&s2, NULL) == 0);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.connect_timeout_ms = 300;
  dlock_client *c = th_client(&s2, &o);
  TH_ASSERT_RC(lock_unlock(c, th_name("dead")), DLOCK_OK);
  th_server_kill(&s2);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(lock_unlock(c, th_name("dead")), DLOCK_EIO);
  CU_ASSERT(th_now_ms() - t0 < 300 + th_scaled_us(&srv, 1000000) / 1000);
  /* the engine's words ("not connected within ..."), not a broken
   * direct connection's */
  CU_ASSERT_PTR_NULL(strstr(dlock_errmsg(), "direct connection"));
  CU_ASSERT_FATAL(th_server_restart(&s2) == 0);
  uint64_t before = direct_calls(c);
  int rc = DLOCK_EIO;
  int64_t until = th_now_ms() + 5000; /* the engine reconnects, the direct
                                         path's backoff (<= 1 s) ends */
  while (th_now_ms() < until && (rc != DLOCK_OK || direct_calls(c) == before)) {
    rc = lock_unlock(c, th_name("dead"));
    if (rc != DLOCK_OK || direct_calls(c) == before)
      usleep(20000);
  }
  TH_ASSERT_RC(rc, DLOCK_OK);
  CU_ASSERT(direct_calls(c) > before);
  dlock_client_close(c);
  th_server_stop(&s2);
}

/* The handshake of a direct connection: AUTH and SELECT as the engine's, and
 * the same connection name. */
static void test_auth_and_db(void) {
  th_server s2;
  CU_ASSERT_FATAL(th_server_start(&s2, "--requirepass s3cret") == 0);
  char url[128];
  snprintf(url, sizeof url, "redis://:s3cret@127.0.0.1:%d/3", s2.port);
  dlock_client *c = NULL;
  TH_ASSERT_RC(dlock_client_open(url, NULL, &c), DLOCK_OK);
  dlock_lock *l = NULL;
  const char *name = th_name("db");
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 1000, 10000), DLOCK_OK);
  CU_ASSERT(direct_calls(c) >= 1);
  redisContext *r = redisConnect("127.0.0.1", s2.port);
  CU_ASSERT_FATAL(r != NULL && r->err == 0);
  freeReplyObject(redisCommand(r, "AUTH s3cret"));
  freeReplyObject(redisCommand(r, "SELECT 3"));
  redisReply *e = redisCommand(r, "EXISTS %s", name);
  CU_ASSERT(e && e->type == REDIS_REPLY_INTEGER && e->integer == 1);
  freeReplyObject(e);
  /* three connections, all named after the client (the engine's may still
   * be naming itself on a slow, sanitized run: 5 s at most) */
  int named = 0;
  int64_t until = th_now_ms() + 5000;
  for (;;) {
    redisReply *list = redisCommand(r, "CLIENT LIST");
    named = 0;
    for (const char *p = list ? list->str : ""; (p = strstr(p, c->client_name));
         p++)
      named++;
    freeReplyObject(list);
    if (named >= 3 || th_now_ms() >= until)
      break;
    usleep(5000);
  }
  CU_ASSERT_EQUAL(named, 3);
  redisFree(r);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
  th_server_stop(&s2);
}

/* The server started asking for a password after the engine connected: a
 * new direct connection's handshake is refused, and its call (refused too,
 * so not run) goes to the engine's connection, which is still logged in. */
static void test_refused_handshake(void) {
  th_server s2;
  CU_ASSERT_FATAL(th_server_start(&s2, NULL) == 0);
  dlock_client *c = th_client(&s2, NULL);
  redisContext *admin = redisConnect("127.0.0.1", s2.port);
  CU_ASSERT_FATAL(admin != NULL && admin->err == 0);
  freeReplyObject(redisCommand(admin, "CONFIG SET requirepass later"));
  TH_ASSERT_RC(lock_unlock(c, th_name("refused")), DLOCK_OK);
  CU_ASSERT_EQUAL(direct_calls(c), 0);
  CU_ASSERT(fallbacks(c) >= 2);
  freeReplyObject(redisCommand(admin, "CONFIG SET requirepass %s", ""));
  redisFree(admin);
  dlock_client_close(c);
  th_server_stop(&s2);
}

/* While a thread of the client waits on a contended object, the client's
 * calls keep to the engine's pipeline, where the waiters' early tries are:
 * new tries on faster connections would overtake them (a waiting writer
 * starved behind new readers). Once nobody waits, calls go direct again. */
static void test_waiters_keep_to_the_pipeline(void) {
  dlock_client *c = th_client(&srv, NULL);
  dlock_client *other = th_client(&srv, NULL);
  const char *name = th_name("contended");
  dlock_lock *held = NULL;
  th_acquirer a = {.wait_ms = 10000, .lease_ms = 10000};
  TH_ASSERT_RC(dlock_reentrant_lock_new(other, name, NULL, &held), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &a.lock), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(held, 0, 30000), DLOCK_OK);
  th_acquirer_start(&a);
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 3000));
  uint64_t direct = direct_calls(c), piped = fallbacks(c);
  TH_ASSERT_RC(lock_unlock(c, th_name("meanwhile")), DLOCK_OK);
  CU_ASSERT_EQUAL(direct_calls(c), direct); /* through the engine */
  CU_ASSERT(fallbacks(c) >= piped + 2); /* the waiter's own tries count too */
  TH_ASSERT_RC(dlock_release(held), DLOCK_OK);
  th_acquirer_join(&a);
  TH_ASSERT_RC(a.rc, DLOCK_OK);
  TH_ASSERT_RC(a.release_rc, DLOCK_OK);
  direct = direct_calls(c);
  TH_ASSERT_RC(lock_unlock(c, th_name("after")), DLOCK_OK);
  CU_ASSERT_EQUAL(direct_calls(c), direct + 2); /* nobody waits: direct */
  dlock_lock_free(a.lock);
  dlock_lock_free(held);
  dlock_client_close(other);
  dlock_client_close(c);
}

static int await_latch(void *latch) { return dlock_latch_await(latch, 10000); }

static int acquire_permit(void *sem) {
  return dlock_semaphore_acquire(sem, 1, 10000);
}

/* A thread waiting for a latch waits for an event, not for a contended
 * object, and a semaphore's waiters keep a line no new call overtakes
 * (no try of theirs is sent early): the client's other calls keep the
 * direct path, the semaphore's release among them. */
static void test_latch_and_semaphore_waiters_keep_direct_path(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("event");
  dlock_latch *latch = NULL;
  TH_ASSERT_RC(dlock_latch_new(c, name, NULL, &latch), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_latch_try_set_count(latch, 1, &th_flag), 1);
  th_elsewhere_call t;
  th_elsewhere_start(&t, await_latch, latch);
  char channel[200];
  snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}",
           name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 3000));
  uint64_t direct = direct_calls(c);
  TH_ASSERT_RC(lock_unlock(c, th_name("meanwhile")), DLOCK_OK);
  CU_ASSERT_EQUAL(direct_calls(c), direct + 2);
  TH_ASSERT_RC(dlock_latch_count_down(latch, NULL), DLOCK_OK);
  TH_ASSERT_RC(th_elsewhere_join(&t), DLOCK_OK);
  dlock_latch_free(latch);

  dlock_semaphore *s;
  TH_ASSERT_RC(dlock_semaphore_new(c, name, NULL, &s), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_semaphore_try_set_permits(s, 0, 0, &th_flag), 1);
  th_elsewhere_start(&t, acquire_permit, s);
  snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 3000));
  direct = direct_calls(c);
  TH_ASSERT_RC(lock_unlock(c, th_name("meanwhile")), DLOCK_OK);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  CU_ASSERT(direct_calls(c) >= direct + 3); /* and the waiter's try */
  TH_ASSERT_RC(th_elsewhere_join(&t), DLOCK_OK);
  dlock_semaphore_free(s);
  dlock_client_close(c);
}

/* A grant made on the direct path is renewed by the watchdog like any. */
static void test_watchdog_renews_direct_grant(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 600; /* renewed every 200 ms */
  dlock_client *c = th_client(&srv, &o);
  dlock_lock *l = NULL;
  const char *name = th_name("watchdog");
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  uint64_t before = direct_calls(c);
  TH_ASSERT_RC(dlock_acquire(l, 1000, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  CU_ASSERT_EQUAL(direct_calls(c), before + 1);
  /* the event: the lease goes up again (a renewal) */
  CU_ASSERT(th_pttl_rises(&srv, name, 3000));
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  dlock_lock_free(l);
  dlock_client_close(c);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("direct", suite_init, suite_clean);
  CU_add_test(s, "calls_go_direct", test_calls_go_direct);
  CU_add_test(s, "direct_off", test_direct_off);
  CU_add_test(s, "options", test_options);
  CU_add_test(s, "pool_bounded", test_pool_bounded);
  CU_add_test(s, "idle_connection_killed", test_idle_connection_killed);
  CU_add_test(s, "latch_deleted", test_latch_deleted);
  CU_add_test(s, "reply_poll_adapts", test_reply_poll_adapts);
  CU_add_test(s, "poll_stops_beside_busy_cores",
              test_poll_stops_beside_busy_cores);
  CU_add_test(s, "crowded_calls_choose", test_crowded_calls_choose);
  CU_add_test(s, "noscript", test_noscript);
  CU_add_test(s, "command_timeout", test_command_timeout);
  CU_add_test(s, "close_during_call", test_close_during_call);
  CU_add_test(s, "riders_share_a_connection", test_riders_share_a_connection);
  CU_add_test(s, "riders_noscript", test_riders_noscript);
  CU_add_test(s, "riders_batch_in_pieces", test_riders_batch_in_pieces);
  CU_add_test(s, "riders_fail_together", test_riders_fail_together);
  CU_add_test(s, "dead_server", test_dead_server);
  CU_add_test(s, "auth_and_db", test_auth_and_db);
  CU_add_test(s, "refused_handshake", test_refused_handshake);
  CU_add_test(s, "waiters_keep_to_the_pipeline",
              test_waiters_keep_to_the_pipeline);
  CU_add_test(s, "latch_and_semaphore_waiters_keep_direct_path",
              test_latch_and_semaphore_waiters_keep_direct_path);
  CU_add_test(s, "watchdog_renews_direct_grant",
              test_watchdog_renews_direct_grant);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
