/* Leader election (docs/election.md): campaign, proclaim, resign, leader,
 * observe; lost leadership; the term against guarded writes; bad input.
 * Runs on one server, on a cluster (election-cluster), over TLS
 * (election-tls), on a sentinel's master (election-sentinel) and on Valkey
 * (election-valkey). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

static dlock_election *new_election(dlock_client *c, const char *name) {
  dlock_election *e = NULL;
  TH_ASSERT_RC(dlock_election_new(c, name, NULL, &e), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  return e;
}

/* ---- an observer's log ------------------------------------------------------- */

#define LOG_MAX 64
typedef struct seen {
  int change, resync, mine;
  int64_t term, version;
  char value[64];
} seen;

typedef struct obs_log {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n, end_rc, ended;
  seen ev[LOG_MAX];
} obs_log;

static void obs_init(obs_log *o) {
  memset(o, 0, sizeof *o);
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->cv, NULL);
}

static void obs_done(void *data, const dlock_result *r) {
  obs_log *o = data;
  pthread_mutex_lock(&o->mu);
  if (r->election == NULL) {
    o->ended = 1;
    o->end_rc = r->rc;
  } else if (o->n < LOG_MAX) {
    const dlock_election_event *ev = r->election;
    seen *s = &o->ev[o->n++];
    s->change = ev->change;
    s->resync = ev->resync;
    s->mine = ev->leader.mine;
    s->term = ev->leader.term;
    s->version = ev->leader.version;
    snprintf(s->value, sizeof s->value, "%.*s", (int)ev->leader.value_len,
             ev->leader.value);
  }
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
}

/* Wait until the log has n events (or ended): the count then. */
static int obs_wait(obs_log *o, int n, int64_t ms) {
  int64_t end = th_now_ms() + ms;
  pthread_mutex_lock(&o->mu);
  while (o->n < n && !o->ended && th_now_ms() < end) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10 * 1000000L;
    if (ts.tv_nsec >= 1000000000L)
      ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&o->cv, &o->mu, &ts);
  }
  int got = o->n;
  pthread_mutex_unlock(&o->mu);
  return got;
}

static void obs_end(obs_log *o, dlock_op op) {
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  pthread_mutex_lock(&o->mu);
  for (int64_t end = th_now_ms() + 5000; !o->ended && th_now_ms() < end;) {
    pthread_mutex_unlock(&o->mu);
    usleep(1000);
    pthread_mutex_lock(&o->mu);
  }
  CU_ASSERT(o->ended);
  CU_ASSERT_EQUAL(o->end_rc, DLOCK_ECANCELED);
  pthread_mutex_unlock(&o->mu);
}

static void expect(const obs_log *o, int i, int change, int64_t term,
                   const char *value) {
  CU_ASSERT_FATAL(i < o->n);
  if (o->ev[i].change != change || o->ev[i].term != term ||
      (value && strcmp(o->ev[i].value, value) != 0))
    fprintf(stderr, "\n  event %d: change %d term %lld value \"%s\", want "
            "%d %lld \"%s\"\n", i, o->ev[i].change, (long long)o->ev[i].term,
            o->ev[i].value, change, (long long)term, value ? value : "*");
  CU_ASSERT_EQUAL(o->ev[i].change, change);
  CU_ASSERT_EQUAL(o->ev[i].term, term);
  if (value)
    CU_ASSERT_STRING_EQUAL(o->ev[i].value, value);
}

/* ---- the tests -------------------------------------------------------------------- */

/* The leadership is a fenced lock on N; the record says who; the term is
 * the token; a Redisson-layout fenced lock on the name is excluded. */
static void test_layout(void) {
  const char *name = th_name("el-layout");
  th_server *node = th_node_of(&srv, name);
  dlock_election *a = new_election(cl, name), *b = new_election(cl, name);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(dlock_election_lock(a)), "election");
  int64_t term = 0;
  TH_ASSERT_RC(dlock_election_campaign(a, "host-a:80", 9, 0, 10000, &term),
               DLOCK_OK);
  CU_ASSERT(term >= 1);
  CU_ASSERT_EQUAL(dlock_election_term(a), term);
  redisReply *r = th_cmd(node, "GET redisson_lock_token:{%s}", name);
  CU_ASSERT(r && r->type == REDIS_REPLY_STRING && atoll(r->str) == term);
  if (r)
    freeReplyObject(r);
  CU_ASSERT_EQUAL(th_int(node, "HLEN %s", name), 1);
  long long ttl = th_int(node, "PTTL %s", name);
  CU_ASSERT(ttl > 9000 && ttl <= 10000);
  r = th_cmd(node, "HGET dlock_election:{%s} value", name);
  CU_ASSERT(r && r->type == REDIS_REPLY_STRING &&
            strcmp(r->str, "host-a:80") == 0);
  if (r)
    freeReplyObject(r);
  dlock_leader l;
  TH_ASSERT_RC(dlock_election_leader(b, &l), DLOCK_OK);
  CU_ASSERT(l.leading && !l.mine && l.term == term && l.version == 0);
  CU_ASSERT_STRING_EQUAL(l.value, "host-a:80");
  CU_ASSERT(l.since_ms > 1700000000000LL && l.lease_ms > 0);
  dlock_leader_clear(&l);
  TH_ASSERT_RC(dlock_election_leader(a, &l), DLOCK_OK);
  CU_ASSERT(l.mine);
  dlock_leader_clear(&l);
  TH_ASSERT_RC(dlock_election_campaign(b, "b", 1, 0, 10000, NULL), DLOCK_EBUSY);
  dlock_lock *fenced = NULL;
  TH_ASSERT_RC(dlock_fenced_lock_new(cl, name, NULL, &fenced), DLOCK_OK);
  TH_ASSERT_RC(th_acquire_elsewhere(fenced, 0, 1000), DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_election_resign(a), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(node, "EXISTS %s dlock_election:{%s}", name, name), 0);
  CU_ASSERT_EQUAL(dlock_election_term(a), 0);
  TH_ASSERT_RC(dlock_election_leader(b, &l), DLOCK_OK);
  CU_ASSERT(!l.leading && l.term == term && l.value_len == 0);
  dlock_leader_clear(&l);
  TH_ASSERT_RC(dlock_election_resign(a), DLOCK_ENOTOWNER);
  /* a fenced lock's grant takes a term: the next leader's is newer */
  dlock_grant g;
  TH_ASSERT_RC(dlock_acquire_grant(fenced, 0, 10000, &g), DLOCK_OK);
  CU_ASSERT_EQUAL(g.token, term + 1);
  TH_ASSERT_RC(dlock_election_campaign(b, "b", 1, 0, 10000, NULL), DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_release(fenced), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_campaign(b, "b", 1, 0, 10000, &term), DLOCK_OK);
  CU_ASSERT_EQUAL(term, g.token + 1);
  dlock_lock_free(fenced);
  dlock_election_free(b); /* resigns */
  CU_ASSERT_EQUAL(th_int(node, "EXISTS %s", name), 0);
  dlock_election_free(a);
}

static int campaign_b(void *arg) {
  return dlock_election_campaign(arg, "b", 1, 10000, DLOCK_LEASE_WATCHDOG,
                                 NULL);
}

/* A standby waits (pub/sub) and leads once the leader resigns; a
 * campaign while leading or while campaigning is refused. */
static void test_handover(void) {
  const char *name = th_name("el-handover");
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_election *a = new_election(cl, name), *b = new_election(c2, name);
  int64_t ta = 0;
  TH_ASSERT_RC(dlock_election_campaign(a, "a", 1, 0, DLOCK_LEASE_WATCHDOG,
                                       &ta),
               DLOCK_OK);
  TH_ASSERT_RC(dlock_election_campaign(a, "a", 1, 0, DLOCK_LEASE_WATCHDOG,
                                       NULL),
               DLOCK_EREENTRY);
  th_elsewhere_call w;
  th_elsewhere_start(&w, campaign_b, b);
  /* the event: b is subscribed to the lock's channel, waiting */
  char channel[256];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
  TH_ASSERT_RC(dlock_election_campaign(b, "b", 1, 0, DLOCK_LEASE_WATCHDOG,
                                       NULL),
               DLOCK_EBUSY); /* its campaign is under way */
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_election_resign(a), DLOCK_OK);
  TH_ASSERT_RC(th_elsewhere_join(&w), DLOCK_OK);
  int64_t took = th_now_ms() - t0;
  CU_ASSERT(took < 2000); /* a wake-up, not a lease: typically < 1 ms */
  CU_ASSERT_EQUAL(dlock_election_term(b), ta + 1);
  dlock_leader l;
  TH_ASSERT_RC(dlock_election_leader(a, &l), DLOCK_OK);
  CU_ASSERT(l.leading && !l.mine && l.term == ta + 1);
  CU_ASSERT_STRING_EQUAL(l.value, "b");
  dlock_leader_clear(&l);
  TH_ASSERT_RC(dlock_election_resign(b), DLOCK_OK);
  dlock_election_free(a);
  dlock_election_free(b);
  dlock_client_close(c2);
}

/* An observer sees the state, then every change in order: elected,
 * proclaimed, resigned, a lease that ran out (no message), its end. */
static void test_observe(void) {
  const char *name = th_name("el-observe");
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_election *a = new_election(cl, name), *o = new_election(c2, name);
  obs_log log;
  obs_init(&log);
  dlock_op op = 0;
  TH_ASSERT_RC(dlock_election_observe(o, obs_done, &log, &op), DLOCK_OK);
  CU_ASSERT(op != 0);
  CU_ASSERT_EQUAL(obs_wait(&log, 1, 5000), 1);
  expect(&log, 0, DLOCK_VACANT, 0, "");
  int64_t t1, t2;
  TH_ASSERT_RC(dlock_election_campaign(a, "v1", 2, 0, DLOCK_LEASE_WATCHDOG,
                                       &t1),
               DLOCK_OK);
  TH_ASSERT_RC(dlock_election_proclaim(a, "v2", 2), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_proclaim(a, "v3", 2), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_resign(a), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_campaign(a, "v4", 2, 0, 400, &t2), DLOCK_OK);
  CU_ASSERT_EQUAL(t2, t1 + 1);
  /* the 400 ms lease runs out: nobody says so, the observer sees it */
  CU_ASSERT_EQUAL(obs_wait(&log, 7, 5000), 7);
  expect(&log, 1, DLOCK_ELECTED, t1, "v1");
  expect(&log, 2, DLOCK_PROCLAIMED, t1, "v2");
  CU_ASSERT_EQUAL(log.ev[2].version, 1);
  expect(&log, 3, DLOCK_PROCLAIMED, t1, "v3");
  CU_ASSERT_EQUAL(log.ev[3].version, 2);
  expect(&log, 4, DLOCK_VACANT, t1, "");
  expect(&log, 5, DLOCK_ELECTED, t2, "v4");
  expect(&log, 6, DLOCK_VACANT, t2, "");
  for (int i = 0; i < 7; i++)
    CU_ASSERT(!log.ev[i].resync && !log.ev[i].mine);
  obs_end(&log, op);
  CU_ASSERT_EQUAL(log.n, 7);
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_EINVAL); /* gone */
  dlock_election_free(a);
  dlock_election_free(o);
  dlock_client_close(c2);
}

/* Observing through the completion queue; an observer that begins while
 * someone leads is told so first, its own handle's leadership as mine. */
static void test_observe_queue(void) {
  const char *name = th_name("el-queue");
  dlock_client_opts opts = DLOCK_CLIENT_OPTS_INIT;
  opts.completions = DLOCK_COMPLETE_QUEUE;
  dlock_client *q = th_client(&srv, &opts);
  dlock_election *a = new_election(q, name);
  TH_ASSERT_RC(dlock_election_campaign(a, "me", 2, 0, DLOCK_LEASE_WATCHDOG,
                                       NULL),
               DLOCK_OK);
  obs_log log;
  obs_init(&log);
  dlock_op op;
  TH_ASSERT_RC(dlock_election_observe(a, obs_done, &log, &op), DLOCK_OK);
  int fd = dlock_client_completion_fd(q);
  CU_ASSERT_FATAL(fd >= 0);
  for (int64_t end = th_now_ms() + 5000; log.n < 1 && th_now_ms() < end;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) > 0)
      dlock_client_run_completions(q, 0);
  }
  CU_ASSERT_EQUAL_FATAL(log.n, 1);
  expect(&log, 0, DLOCK_ELECTED, dlock_election_term(a), "me");
  CU_ASSERT(log.ev[0].mine);
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  for (int64_t end = th_now_ms() + 5000; !log.ended && th_now_ms() < end;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) > 0)
      dlock_client_run_completions(q, 0);
  }
  CU_ASSERT(log.ended && log.end_rc == DLOCK_ECANCELED);
  dlock_election_free(a);
  dlock_client_close(q);
}

/* A lost leadership is reported as a lost lock; proclaim and resign say
 * DLOCK_ELOST; the deposed leader's writes with its term are refused once
 * a newer leader was elected. */
static void test_lost_and_fenced(void) {
  const char *name = th_name("el-lost");
  th_server *node = th_node_of(&srv, name);
  th_lost_log lost;
  dlock_client *w = th_watchdog_client(&srv, &lost, 600);
  dlock_election *a = new_election(w, name), *b = new_election(cl, name);
  int64_t ta, tb;
  TH_ASSERT_RC(dlock_election_campaign(a, "a", 1, 0, DLOCK_LEASE_WATCHDOG,
                                       &ta),
               DLOCK_OK);
  char key[256];
  snprintf(key, sizeof key, "{%s}:data", name);
  const char *set[] = {"SET", key, "by-a"};
  size_t lens[] = {3, strlen(key), 4};
  TH_ASSERT_RC(dlock_guarded_call(dlock_election_lock(a), 3, set, lens, NULL),
               DLOCK_OK);
  TH_ASSERT_RC(dlock_fenced_call(cl, name, ta, 3, set, lens, NULL), DLOCK_OK);
  /* a term above the current one was never granted: refused, and the
   * leader's own writes go on */
  const char *forged[] = {"SET", key, "forg"};
  TH_ASSERT_RC(dlock_fenced_call(cl, name, ta + 1, 3, forged, lens, NULL),
               DLOCK_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "was never granted"));
  TH_ASSERT_RC(dlock_fenced_call(cl, name, ta, 3, set, lens, NULL), DLOCK_OK);
  redisReply *data = th_cmd(node, "GET %s", key);
  CU_ASSERT(data && data->type == REDIS_REPLY_STRING &&
            strcmp(data->str, "by-a") == 0);
  if (data)
    freeReplyObject(data);
  /* the leadership disappears (as on a failover that lost it) */
  CU_ASSERT_EQUAL(th_int(node, "DEL %s", name), 1);
  CU_ASSERT_EQUAL(th_lost_wait(&lost, 1, 5000), 1);
  CU_ASSERT_STRING_EQUAL(lost.name, name);
  CU_ASSERT_EQUAL(dlock_election_term(a), 0);
  TH_ASSERT_RC(dlock_election_campaign(b, "b", 1, 0, DLOCK_LEASE_WATCHDOG,
                                       &tb),
               DLOCK_OK);
  CU_ASSERT(tb > ta);
  TH_ASSERT_RC(dlock_election_proclaim(a, "a2", 2), DLOCK_ELOST);
  const char *stale[] = {"SET", key, "stal"};
  TH_ASSERT_RC(dlock_guarded_call(dlock_election_lock(a), 3, stale, lens, NULL),
               DLOCK_EFENCED);
  TH_ASSERT_RC(dlock_fenced_call(cl, name, ta, 3, stale, lens, NULL),
               DLOCK_EFENCED);
  TH_ASSERT_RC(dlock_fenced_call(cl, name, tb, 3, set, lens, NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_resign(a), DLOCK_ELOST);
  TH_ASSERT_RC(dlock_election_resign(b), DLOCK_OK);
  dlock_election_free(a);
  dlock_election_free(b);
  dlock_client_close(w);
}

/* The async campaign: it waits without a thread, gets its term, and a
 * cancelled one leaves the handle free to campaign again. */
static void test_async(void) {
  const char *name = th_name("el-async");
  dlock_election *a = new_election(cl, name), *b = new_election(cl, name);
  int64_t ta;
  TH_ASSERT_RC(dlock_election_campaign(a, "a", 1, 0, DLOCK_LEASE_WATCHDOG,
                                       &ta),
               DLOCK_OK);
  th_outcome o1 = TH_OUTCOME_INIT;
  dlock_op op;
  TH_ASSERT_RC(dlock_election_campaign_async(b, "b", 1, DLOCK_WAIT_FOREVER,
                                             DLOCK_LEASE_WATCHDOG,
                                             th_outcome_done, &o1, &op),
               DLOCK_OK);
  TH_ASSERT_RC(dlock_election_campaign(b, "b", 1, 0, DLOCK_LEASE_WATCHDOG,
                                       NULL),
               DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  TH_ASSERT_RC(th_outcome_wait(&o1, 5000), DLOCK_ECANCELED);
  th_outcome o2 = TH_OUTCOME_INIT;
  TH_ASSERT_RC(dlock_election_campaign_async(b, "b", 1, 10000,
                                             DLOCK_LEASE_WATCHDOG,
                                             th_outcome_done, &o2, NULL),
               DLOCK_OK);
  TH_ASSERT_RC(dlock_election_resign(a), DLOCK_OK);
  TH_ASSERT_RC(th_outcome_wait(&o2, 5000), DLOCK_OK);
  CU_ASSERT_EQUAL(dlock_election_term(b), ta + 1);
  TH_ASSERT_RC(dlock_election_resign(b), DLOCK_OK);
  dlock_election_free(a);
  dlock_election_free(b);
}

/* Bad input gets a clear code; a name of another kind is refused with
 * nothing changed. */
static void test_bad_input(void) {
  dlock_election *e = NULL;
  TH_ASSERT_RC(dlock_election_new(NULL, "x", NULL, &e), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_election_new(cl, NULL, NULL, &e), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_election_new(cl, "", NULL, &e), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_election_new(cl, "x", NULL, NULL), DLOCK_EINVAL);
  char *huge = malloc(DLOCK_NAME_MAX + 2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(huge);
  memset(huge, 'n', DLOCK_NAME_MAX + 1);
  huge[DLOCK_NAME_MAX + 1] = '\0';
  TH_ASSERT_RC(dlock_election_new(cl, huge, NULL, &e), DLOCK_EINVAL);
  free(huge);
  TH_ASSERT_RC(dlock_election_campaign(NULL, "v", 1, 0, 1000, NULL),
               DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_election_proclaim(NULL, "v", 1), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_election_resign(NULL), DLOCK_EINVAL);
  dlock_leader l;
  TH_ASSERT_RC(dlock_election_leader(NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_election_observe(NULL, obs_done, NULL, NULL),
               DLOCK_EINVAL);
  CU_ASSERT_EQUAL(dlock_election_term(NULL), 0);
  CU_ASSERT_PTR_NULL(dlock_election_lock(NULL));
  dlock_election_free(NULL);
  dlock_leader_clear(NULL);
  /* a binary name, a binary value */
  char bname[] = "el-bin\0ary";
  dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
  o.name_len = sizeof bname - 1;
  TH_ASSERT_RC(dlock_election_new(cl, bname, &o, &e), DLOCK_OK);
  const char bval[] = {'a', 0, 'b', '\n', 'c'};
  TH_ASSERT_RC(dlock_election_proclaim(e, "v", 1), DLOCK_ENOTOWNER);
  TH_ASSERT_RC(dlock_election_resign(e), DLOCK_ENOTOWNER);
  TH_ASSERT_RC(dlock_election_campaign(e, NULL, 3, 0, 1000, NULL),
               DLOCK_EINVAL);
  char *big = calloc(1, DLOCK_ELECTION_VALUE_MAX + 1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(big);
  TH_ASSERT_RC(dlock_election_campaign(e, big, DLOCK_ELECTION_VALUE_MAX + 1, 0,
                                       1000, NULL),
               DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_election_campaign(e, "v", 1, -5, 1000, NULL),
               DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_election_campaign(e, big, DLOCK_ELECTION_VALUE_MAX, 0,
                                       10000, NULL),
               DLOCK_OK);
  free(big);
  TH_ASSERT_RC(dlock_election_proclaim(e, bval, sizeof bval), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_leader(e, &l), DLOCK_OK);
  CU_ASSERT(l.mine && l.value_len == sizeof bval &&
            memcmp(l.value, bval, sizeof bval) == 0);
  dlock_leader_clear(&l);
  TH_ASSERT_RC(dlock_election_resign(e), DLOCK_OK);
  dlock_election_free(e);
  /* a name that holds a string */
  const char *name = th_name("el-wrongtype");
  th_server *node = th_node_of(&srv, name);
  redisReply *r = th_cmd(node, "SET %s text", name);
  if (r)
    freeReplyObject(r);
  e = new_election(cl, name);
  TH_ASSERT_RC(dlock_election_campaign(e, "v", 1, 0, 1000, NULL), DLOCK_EKIND);
  /* who leads there: nobody can, it is the wrong kind (issue 56) */
  TH_ASSERT_RC(dlock_election_leader(e, &l), DLOCK_EKIND);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "holds a string"));
  r = th_cmd(node, "GET %s", name);
  CU_ASSERT(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "text") == 0);
  if (r)
    freeReplyObject(r);
  dlock_election_free(e);
}

/* Many observers on one client (its one engine thread) all see a change. */
static void test_many_observers(void) {
  const char *name = th_name("el-many");
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_election *a = new_election(cl, name), *o = new_election(c2, name);
  enum { N = 200 };
  obs_log *logs = calloc(N, sizeof *logs);
  dlock_op ops[N];
  CU_ASSERT_PTR_NOT_NULL_FATAL(logs);
  for (int i = 0; i < N; i++) {
    obs_init(&logs[i]);
    TH_ASSERT_RC(dlock_election_observe(o, obs_done, &logs[i], &ops[i]),
                 DLOCK_OK);
  }
  for (int i = 0; i < N; i++)
    CU_ASSERT_EQUAL(obs_wait(&logs[i], 1, 5000), 1);
  int64_t term;
  TH_ASSERT_RC(dlock_election_campaign(a, "x", 1, 0, DLOCK_LEASE_WATCHDOG,
                                       &term),
               DLOCK_OK);
  int all = 1;
  for (int i = 0; i < N; i++)
    all &= obs_wait(&logs[i], 2, 5000) == 2 && logs[i].ev[1].term == term;
  CU_ASSERT(all);
  for (int i = 0; i < N; i++)
    obs_end(&logs[i], ops[i]);
  free(logs);
  TH_ASSERT_RC(dlock_election_resign(a), DLOCK_OK);
  dlock_election_free(a);
  dlock_election_free(o);
  dlock_client_close(c2);
}

/* Observers of one handle share its subscription: one that joins later is
 * told the state at once, and one that leaves does not end the others. */
static void test_observers_share(void) {
  const char *name = th_name("el-share");
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_election *a = new_election(cl, name), *o = new_election(c2, name);
  obs_log l1, l2;
  obs_init(&l1);
  obs_init(&l2);
  dlock_op op1, op2;
  TH_ASSERT_RC(dlock_election_observe(o, obs_done, &l1, &op1), DLOCK_OK);
  CU_ASSERT_EQUAL(obs_wait(&l1, 1, 5000), 1);
  int64_t t1;
  TH_ASSERT_RC(dlock_election_campaign(a, "one", 3, 0, DLOCK_LEASE_WATCHDOG,
                                       &t1),
               DLOCK_OK);
  CU_ASSERT_EQUAL(obs_wait(&l1, 2, 5000), 2);
  TH_ASSERT_RC(dlock_election_observe(o, obs_done, &l2, &op2), DLOCK_OK);
  CU_ASSERT_EQUAL(obs_wait(&l2, 1, 5000), 1);
  expect(&l2, 0, DLOCK_ELECTED, t1, "one"); /* the state when it joined */
  obs_end(&l1, op1);
  TH_ASSERT_RC(dlock_election_proclaim(a, "two", 3), DLOCK_OK);
  CU_ASSERT_EQUAL(obs_wait(&l2, 2, 5000), 2);
  expect(&l2, 1, DLOCK_PROCLAIMED, t1, "two");
  CU_ASSERT_EQUAL(l1.n, 2);
  obs_end(&l2, op2);
  /* all gone: the channel has no subscriber of this client left */
  char channel[256];
  snprintf(channel, sizeof channel, "dlock_election_channel:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 0, 5000));
  TH_ASSERT_RC(dlock_election_resign(a), DLOCK_OK);
  dlock_election_free(a);
  dlock_election_free(o);
  dlock_client_close(c2);
}

static int campaign_long(void *arg) {
  return dlock_election_campaign(arg, "v", 1, 10000, 30000, NULL);
}

/* A campaign whose answer is lost (the server stopped with it in its
 * socket; the command timeout ends the wait for it) is asked about, as a
 * reentrant lock's try is: the record says it ran, so the candidate leads
 * in that term, not elected twice (a fenced lock cannot ask: its token is
 * not kept; the term is). */
static void test_lost_answer(void) {
  th_server s;
  CU_ASSERT_FATAL(th_server_start(&s, "") == 0);
  dlock_client *c = th_lost_answer_client(&s);
  const char *name = th_name("el-lost-answer");
  dlock_election *e = new_election(c, name);
  dlock_leader l;
  TH_ASSERT_RC(dlock_election_leader(e, &l), DLOCK_OK); /* connected */
  dlock_leader_clear(&l);
  uint64_t sent = th_commands(c);
  th_server_pause(&s, 1);
  th_elsewhere_call w;
  th_elsewhere_start(&w, campaign_long, e);
  int64_t t0 = th_now_ms();
  /* the event: the try, then the question (sent once the try timed out) */
  while (th_commands(c) < sent + 2 && th_now_ms() - t0 < 3000)
    usleep(1000);
  CU_ASSERT(th_now_ms() - t0 >= 300); /* the answer lost */
  th_server_pause(&s, 0);
  TH_ASSERT_RC(th_elsewhere_join(&w), DLOCK_OK);
  CU_ASSERT_EQUAL(dlock_election_term(e), 1);
  TH_ASSERT_RC(dlock_election_leader(e, &l), DLOCK_OK);
  CU_ASSERT(l.leading && l.mine && l.term == 1); /* one grant, not two */
  dlock_leader_clear(&l);
  TH_ASSERT_RC(dlock_election_resign(e), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&s, "EXISTS %s", name), 0);
  dlock_election_free(e);
  dlock_client_close(c);
  th_server_stop(&s);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("election", suite_init, suite_clean);
  CU_add_test(s, "layout", test_layout);
  CU_add_test(s, "handover", test_handover);
  CU_add_test(s, "observe", test_observe);
  CU_add_test(s, "observe_queue", test_observe_queue);
  CU_add_test(s, "lost_and_fenced", test_lost_and_fenced);
  CU_add_test(s, "async", test_async);
  CU_add_test(s, "bad_input", test_bad_input);
  CU_add_test(s, "many_observers", test_many_observers);
  CU_add_test(s, "observers_share", test_observers_share);
  CU_add_test(s, "lost_answer", test_lost_answer);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
