/* Redis Sentinel (src/net/sentinel.c): a client opened on a sentinel URI
 * finds the master, says clearly when it cannot, and follows a failover
 * (a demoted master's READONLY, a killed master). Against a real master,
 * two replicas and three sentinels (tests/harness.c). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "core/core.h"
#include "core/engine.h"
#include "harness.h"
#include "redis_server.h"

static th_server srv;

static int suite_init(void) { return th_sentinel_start(&srv, 2, 3); }

static int suite_clean(void) {
  th_server_stop(&srv);
  return 0;
}

static dlock_lock *new_lock(dlock_client *c, const char *name) {
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  return l;
}

/* Wait (bounded) until the sentinels name a master other than old. */
static th_server *new_master(th_server *old, int64_t ms) {
  for (int64_t end = th_now_ms() + ms; th_now_ms() < end; usleep(20000)) {
    th_server *m = th_sentinel_master(&srv);
    if (m && m != old && th_is_master(m))
      return m;
  }
  return NULL;
}

/* The client finds the master through the sentinels: a lock taken there
 * is on the master, and its release removes it. */
static void test_finds_master(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("found");
  dlock_lock *l = new_lock(c, name);
  th_server *m = th_sentinel_master(&srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(m, "EXISTS %s", name), 1);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(m, "EXISTS %s", name), 0);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* What cannot work says why: a name the sentinels do not know, no
 * sentinel answering, URIs without a name or with a bad database. */
static void test_clear_errors(void) {
  dlock_client *c = NULL;
  char url[300];
  snprintf(url, sizeof url, "%s", srv.url);
  char *slash = strrchr(url, '/');
  snprintf(slash, sizeof url - (size_t)(slash - url), "/no-such-master");
  TH_ASSERT_RC(dlock_client_open(url, NULL, &c), DLOCK_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "knows no master named"));
  int dead = rs_free_port();
  snprintf(url, sizeof url, "redis+sentinel://127.0.0.1:%d/dlock-test", dead);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.connect_timeout_ms = 500;
  TH_ASSERT_RC(dlock_client_open(url, &o, &c), DLOCK_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "no sentinel reachable"));
  const char *bad[] = {"redis+sentinel://h:1", "redis+sentinel://h:1/",
                       "redis+sentinel://h:1/n/x", "redis+sentinel://h:1,/n",
                       "redis+sentinel://h:1/n?db=2"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    TH_ASSERT_RC(dlock_uri_check(bad[i]), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_uri_check("redis+sentinel://u:p@h1,h2:26380/my%20master/3"),
               DLOCK_OK);
}

/* Sentinels that want a password (ACL on each): without the sentinel
 * credentials, or with wrong ones, the open fails with DLOCK_EAUTH saying so (a configuration error, not an outage); with them
 * (dlock_client_opts v6) the client finds the master, and its +switch-master
 * watch is subscribed (the AUTH goes ahead of SUBSCRIBE on that connection
 * too). The master's credentials are not the sentinels': a redis:// URI
 * with sentinel credentials is refused. */
static void test_sentinel_credentials(void) {
  int first = srv.nnodes - srv.sentinels;
  redisContext *sc[8] = {0};
  struct timeval tv = {2, 0};
  for (int i = first; i < srv.nnodes; i++) { /* stays authenticated */
    sc[i - first] = redisConnectWithTimeout("127.0.0.1", srv.node[i].port, tv);
    CU_ASSERT_FATAL(sc[i - first] && !sc[i - first]->err);
    redisReply *r = redisCommand(sc[i - first], "ACL SETUSER default on resetpass >s3cret");
    CU_ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
  }
  dlock_client *c = NULL;
  TH_ASSERT_RC(dlock_client_open(srv.url, NULL, &c), DLOCK_EAUTH);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "NOAUTH"));
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.sentinel_password = "wrong";
  TH_ASSERT_RC(dlock_client_open(srv.url, &o, &c), DLOCK_EAUTH);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "refused the sentinel credentials"));
  CU_ASSERT_PTR_NULL(strstr(dlock_errmsg(), "wrong"));
  o.sentinel_username = "default";
  o.sentinel_password = "s3cret";
  c = th_client(&srv, &o);
  const char *name = th_name("sentinel-auth");
  dlock_lock *l = new_lock(c, name);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(th_sentinel_master(&srv) ? th_sentinel_master(&srv)
                                                  : &srv.node[0],
                         "EXISTS %s", name), 1);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  /* the watch: a client of one sentinel subscribed to its six events */
  int watching = 0;
  for (int64_t end = th_now_ms() + 5000; !watching && th_now_ms() < end;
       usleep(20000))
    for (int i = 0; i < srv.sentinels && !watching; i++) {
      redisReply *r = redisCommand(sc[i], "CLIENT LIST");
      watching = r && r->type == REDIS_REPLY_STRING && strstr(r->str, " sub=6 ");
      freeReplyObject(r);
    }
  CU_ASSERT(watching);
  dlock_lock_free(l);
  dlock_client_close(c);
  TH_ASSERT_RC(dlock_client_open("redis://127.0.0.1:1", &o, &c), DLOCK_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "redis+sentinel://"));
  for (int i = 0; i < srv.sentinels; i++) {
    redisReply *r = redisCommand(sc[i], "ACL SETUSER default nopass");
    CU_ASSERT(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(sc[i]);
  }
}

/* Calls go the direct way here too (the calling thread's own connection to
 * the master the sentinels named): 40 calls, none through the engine. */
static void test_direct_path(void) {
  dlock_client *c = th_client(&srv, NULL);
  const char *name = th_name("direct");
  dlock_lock *l = new_lock(c, name);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK); /* connected */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  uint64_t calls = atomic_load(&c->direct.calls);
  uint64_t fallbacks = atomic_load(&c->direct.fallbacks);
  for (int i = 0; i < 20; i++) {
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  }
  CU_ASSERT_EQUAL(atomic_load(&c->direct.calls) - calls, 40);
  CU_ASSERT_EQUAL(atomic_load(&c->direct.fallbacks), fallbacks);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* The inspecting commands on a sentinel URI: status, list and watch find
 * a lock held on the master the sentinels name. */
static void test_inspecting_commands(void) {
  dlock_client *c = th_client(&srv, NULL);
  char name[96];
  snprintf(name, sizeof name, "%s", th_name("inspect"));
  dlock_lock *l = new_lock(c, name);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  char args[600];
  static char out[8192];
  snprintf(args, sizeof args, "--redis '%s' status --json '%s'", srv.url, name);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"kind\": \"lock\""));
  snprintf(args, sizeof args, "--redis '%s' list --json '%s' 2>/dev/null",
           srv.url, name);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, dlock_client_id(c)));
  snprintf(args, sizeof args, "--redis '%s' watch --changes 1 '%s'", srv.url,
           name);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, dlock_client_id(c)));
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* The data nodes other than the master m (at most 2): its replicas. */
static int replicas_of(th_server *m, th_server *out[2]) {
  int n = 0;
  for (int i = 0; i < srv.nnodes - srv.sentinels && n < 2; i++)
    if (&srv.node[i] != m)
      out[n++] = &srv.node[i];
  return n;
}

/* The newer kinds through the sentinels' master (the spin lock, the
 * non-reentrant lock, a grouped multi-lock): a waiter of another client
 * gets each after the release. */
static void test_family(void) {
  dlock_client *c = th_client(&srv, NULL), *c2 = th_client(&srv, NULL);
  const char *values[] = {"a", "b"};
  for (int k = 0; k < 3; k++) {
    const char *name = th_name(k == 0 ? "spin" : k == 1 ? "once" : "group");
    dlock_lock *ls[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
      dlock_client *ci = i ? c2 : c;
      TH_ASSERT_RC(k == 0   ? dlock_spin_lock_new(ci, name, NULL, &ls[i])
                   : k == 1 ? dlock_non_reentrant_lock_new(ci, name, NULL, &ls[i])
                            : dlock_group_lock_new(ci, name, values, NULL, 2,
                                                   NULL, &ls[i]),
                   DLOCK_OK);
    }
    TH_ASSERT_RC(dlock_acquire(ls[0], 0, 30000), DLOCK_OK);
    th_acquirer w = {.lock = ls[1], .wait_ms = 10000, .lease_ms = 30000};
    th_acquirer_start(&w);
    TH_ASSERT_RC(th_acquire_elsewhere(ls[0], 0, 1000), DLOCK_EBUSY);
    TH_ASSERT_RC(dlock_release(ls[0]), DLOCK_OK);
    th_acquirer_join(&w);
    TH_ASSERT_RC(w.rc, DLOCK_OK);
    TH_ASSERT_RC(w.release_rc, DLOCK_OK);
    dlock_lock_free(ls[1]);
    dlock_lock_free(ls[0]);
  }
  dlock_client_close(c2);
  dlock_client_close(c);
}

/* Leader election through the sentinels' master, with the replica guard:
 * a standby takes over on a resignation, an observer is told both terms. */
static _Atomic int elected_seen, observer_ended;
static _Atomic long long last_term_seen;
static void election_seen(void *data, const dlock_result *r) {
  (void)data;
  if (r->election == NULL)
    atomic_store(&observer_ended, 1);
  else if (r->election->change == DLOCK_ELECTED) {
    atomic_store(&last_term_seen, r->election->leader.term);
    atomic_fetch_add(&elected_seen, 1);
  }
}

static int standby_campaign(void *arg) {
  return dlock_election_campaign(arg, "b", 1, 10000, DLOCK_LEASE_WATCHDOG,
                                 NULL);
}

static void test_election(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.replica_sync_ms = 1500;
  dlock_client *c = th_client(&srv, &o), *c2 = th_client(&srv, &o);
  const char *name = th_name("election");
  dlock_election *a = NULL, *b = NULL, *w = NULL;
  TH_ASSERT_RC(dlock_election_new(c, name, NULL, &a), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_new(c2, name, NULL, &b), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_new(c2, name, NULL, &w), DLOCK_OK);
  dlock_op op;
  TH_ASSERT_RC(dlock_election_observe(w, election_seen, NULL, &op), DLOCK_OK);
  int64_t ta = 0;
  TH_ASSERT_RC(dlock_election_campaign(a, "a", 1, 0, DLOCK_LEASE_WATCHDOG,
                                       &ta),
               DLOCK_OK);
  th_elsewhere_call call;
  th_elsewhere_start(&call, standby_campaign, b);
  char channel[256];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  th_server *m = th_sentinel_master(&srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT(th_wait_numsub(m, channel, 1, 5000));
  TH_ASSERT_RC(dlock_election_resign(a), DLOCK_OK);
  TH_ASSERT_RC(th_elsewhere_join(&call), DLOCK_OK);
  CU_ASSERT_EQUAL(dlock_election_term(b), ta + 1);
  for (int64_t end = th_now_ms() + 5000;
       atomic_load(&last_term_seen) != ta + 1 && th_now_ms() < end;)
    usleep(1000);
  CU_ASSERT_EQUAL(atomic_load(&last_term_seen), ta + 1);
  CU_ASSERT(atomic_load(&elected_seen) >= 2);
  TH_ASSERT_RC(dlock_cancel(op), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_resign(b), DLOCK_OK);
  for (int64_t end = th_now_ms() + 5000;
       !atomic_load(&observer_ended) && th_now_ms() < end;)
    usleep(1000);
  CU_ASSERT(atomic_load(&observer_ended));
  dlock_election_free(a);
  dlock_election_free(b);
  dlock_election_free(w);
  dlock_client_close(c2);
  dlock_client_close(c);
}

/* Guarded writes of l (held, the replica guard on) are followed by the
 * guard's WAIT: with the replicas running, DLOCK_OK; with both stopped,
 * the write lands on the master but is not confirmed: DLOCK_EUNACKED with
 * the command's reply, for a command (a script) and a body (an EVAL). */
static void guarded_writes_confirmed(dlock_lock *l, th_server *m,
                                     th_server *replicas[2], const char *name) {
  char key[256];
  snprintf(key, sizeof key, "{%s}:data", name);
  const char *set1[] = {"SET", key, "one"}, *set2[] = {"SET", key, "two"};
  size_t lens[] = {3, strlen(key), 3};
  const char *body = "return redis.call('INCR', KEYS[1])";
  const char *keys[] = {key};
  size_t klens[] = {strlen(key)};
  long long w0 = th_cmd_calls(m, "wait");
  dlock_reply *r = NULL;
  TH_ASSERT_RC(dlock_guarded_call(l, 3, set1, lens, &r), DLOCK_OK);
  CU_ASSERT(r && r->type == DLOCK_REPLY_STATUS);
  dlock_reply_free(r);
  CU_ASSERT_EQUAL(th_cmd_calls(m, "wait") - w0, 1);
  for (int i = 0; i < 2; i++)
    th_server_pause(replicas[i], 1);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_guarded_call(l, 3, set2, lens, &r), DLOCK_EUNACKED);
  CU_ASSERT(th_now_ms() - t0 >= 1500);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "written, but not confirmed"));
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "none of the 2 replicas"));
  CU_ASSERT(r && r->type == DLOCK_REPLY_STATUS && strcmp(r->str, "OK") == 0);
  dlock_reply_free(r);
  redisReply *got = th_cmd(m, "GET %s", key);
  CU_ASSERT(got && got->type == REDIS_REPLY_STRING && !strcmp(got->str, "two"));
  if (got)
    freeReplyObject(got);
  th_int(m, "SET %s 41", key);
  TH_ASSERT_RC(dlock_guarded_eval(l, body, 1, keys, klens, 0, NULL, NULL, &r),
               DLOCK_EUNACKED);
  CU_ASSERT(r && r->type == DLOCK_REPLY_INTEGER && r->integer == 42);
  dlock_reply_free(r);
  for (int i = 0; i < 2; i++)
    th_server_pause(replicas[i], 0);
  TH_ASSERT_RC(dlock_guarded_eval(l, body, 1, keys, klens, 0, NULL, NULL, &r),
               DLOCK_OK);
  CU_ASSERT(r && r->type == DLOCK_REPLY_INTEGER && r->integer == 43);
  dlock_reply_free(r);
  th_int(m, "DEL %s", key);
}

/* The replica guard (replica_sync_ms) on a sentinel's master: the count
 * of replicas comes from the master's ROLE; each write of an acquire or a
 * release is followed by a WAIT (direct path and engine alike). With both
 * replicas stopped, an acquire fails with DLOCK_EIO naming the guard and
 * leaves nothing held; with them back, it succeeds. Guarded writes wait
 * too (guarded_writes_confirmed); with replica_sync_all one replica of two
 * is not enough. */
static void test_replica_guard(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  /* 1.5 s: replicas back from a pause may acknowledge only with their
   * once-a-second REPLCONF ACK */
  o.replica_sync_ms = 1500;
  dlock_client *direct = th_client(&srv, &o);
  o.direct_conns = 0;
  dlock_client *engine = th_client(&srv, &o);
  const char *name = th_name("guard");
  dlock_lock *ld = new_lock(direct, name), *le = new_lock(engine, name);
  th_server *m = th_sentinel_master(&srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  TH_ASSERT_RC(dlock_acquire(ld, 0, 30000), DLOCK_OK); /* connected */
  TH_ASSERT_RC(dlock_release(ld), DLOCK_OK);
  long long w0 = th_cmd_calls(m, "wait");
  uint64_t direct0 = atomic_load(&direct->direct.calls);
  TH_ASSERT_RC(dlock_acquire(ld, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(ld), DLOCK_OK);
  CU_ASSERT_EQUAL(atomic_load(&direct->direct.calls), direct0 + 2);
  TH_ASSERT_RC(dlock_acquire(le, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(le), DLOCK_OK);
  CU_ASSERT_EQUAL(th_cmd_calls(m, "wait") - w0, 4);
  th_server *replicas[2];
  int nr = replicas_of(m, replicas);
  CU_ASSERT_EQUAL_FATAL(nr, 2);
  for (int i = 0; i < nr; i++)
    th_server_pause(replicas[i], 1);
  dlock_lock *both[] = {ld, le};
  th_guard_refuses(both, 2, m, name, 1500);
  for (int i = 0; i < nr; i++)
    th_server_pause(replicas[i], 0);
  TH_ASSERT_RC(dlock_acquire(ld, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(m, "EXISTS %s", name), 1);
  guarded_writes_confirmed(ld, m, replicas, name);
  TH_ASSERT_RC(dlock_release(ld), DLOCK_OK);
  /* replica_sync_all: one replica of two stopped refuses the grant, and
   * one of two is enough without it */
  o.direct_conns = 64;
  o.replica_sync_all = 1;
  dlock_client *all = th_client(&srv, &o);
  dlock_lock *la = new_lock(all, name);
  th_server_pause(replicas[0], 1);
  th_guard_refuses(&la, 1, m, name, 1500);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "reached 1 of the 2 replicas"));
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "replica_sync_all"));
  TH_ASSERT_RC(dlock_acquire(ld, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(ld), DLOCK_OK);
  th_server_pause(replicas[0], 0);
  TH_ASSERT_RC(dlock_acquire(la, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(la), DLOCK_OK);
  /* a master that counts no replica (as after a failover, until one has
   * synchronised): nothing can confirm a write, so with replica_sync_all
   * the guard refuses, without it there is no WAIT to send */
  dlock__req bare = {.slot = 0};
  char why[512];
  dlock__ack_plan(&all->opts, 0, &bare);
  CU_ASSERT_EQUAL(dlock__ack_missed(all, &bare, why, sizeof why), DLOCK_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(why, "counts no replica"));
  dlock__ack_plan(&direct->opts, 0, &bare);
  CU_ASSERT_EQUAL(dlock__ack_missed(direct, &bare, why, sizeof why), 0);
  dlock_lock_free(la);
  dlock_client_close(all);
  /* replica_sync_all: with the guard, and where dlock counts replicas */
  dlock_client *none = NULL;
  o.replica_sync_ms = 0;
  TH_ASSERT_RC(dlock_client_open(srv.url, &o, &none), DLOCK_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "replica_sync_all"));
  o.replica_sync_ms = 300;
  char plain_url[64];
  snprintf(plain_url, sizeof plain_url, "redis://127.0.0.1:%d", m->port);
  TH_ASSERT_RC(dlock_client_open(plain_url, &o, &none), DLOCK_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "cluster and sentinel URIs"));
  dlock_lock_free(ld);
  dlock_lock_free(le);
  dlock_client_close(direct);
  dlock_client_close(engine);
}

static int settled(void);

/* Every sentinel lists both of m's replicas, flagged as plain replicas
 * (not down, not disconnected; bounded, 20 s). */
static int replicas_listed_up(void) {
  for (int64_t end = th_now_ms() + 20000; th_now_ms() < end; usleep(50000)) {
    int up = 0;
    for (int i = srv.nnodes - srv.sentinels; i < srv.nnodes; i++) {
      redisReply *r = th_cmd(&srv.node[i], "SENTINEL REPLICAS dlock-test");
      for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements;
           k++)
        for (size_t j = 0; j + 1 < r->element[k]->elements; j += 2)
          up += strcmp(r->element[k]->element[j]->str, "flags") == 0 &&
                strcmp(r->element[k]->element[j + 1]->str, "slave") == 0;
      if (r)
        freeReplyObject(r);
    }
    if (up == 2 * srv.sentinels)
      return 1;
  }
  return 0;
}

/* A client opened while the replicas are in their first synchronisation
 * (restarted empty, the master's diskless sync held back a minute) counts
 * them all the same: the master's ROLE leaves them out until they are
 * online, the sentinels list them. Its grants wait for them, so with the
 * synchronisation held back the guard refuses (before, the client counted
 * 0 replicas, sent no WAIT, and a master cut from its replicas later kept
 * renewing holds unguarded: t26 caught it once). */
static void test_replica_guard_first_sync(void) {
  th_server *m = th_sentinel_master(&srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  th_server *replicas[2];
  CU_ASSERT_EQUAL_FATAL(replicas_of(m, replicas), 2);
  th_int(m, "CONFIG SET repl-diskless-sync yes");
  th_int(m, "CONFIG SET repl-diskless-sync-delay 60");
  for (int i = 0; i < 2; i++) { /* without the RDB its first sync left it
                                    (with the master's id and offset) */
    char rdb[600];
    snprintf(rdb, sizeof rdb, "%s/dump.rdb", replicas[i]->dir);
    th_server_kill(replicas[i]);
    unlink(rdb);
    CU_ASSERT_EQUAL_FATAL(th_server_restart(replicas[i]), 0);
  }
  CU_ASSERT_FATAL(replicas_listed_up());
  redisReply *role = th_cmd(m, "ROLE");
  CU_ASSERT(role && role->elements >= 3 && role->element[2]->elements == 0);
  if (role)
    freeReplyObject(role);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  /* replicas just synced may acknowledge only with their once-a-second
   * REPLCONF ACK: a WAIT of 300 ms can miss it (failed once over TLS) */
  o.replica_sync_ms = 1500;
  dlock_client *c = th_client(&srv, &o);
  const char *name = th_name("guard-first-sync");
  dlock_lock *l = new_lock(c, name);
  th_guard_refuses(&l, 1, m, name, 1500);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "none of the 2 replicas"));
  th_int(m, "CONFIG SET repl-diskless-sync-delay 0");
  CU_ASSERT(settled());
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* The replica guard covers renewals too: a watchdog renewal the replicas
 * do not acknowledge does not extend the hold (a master cut from its
 * replicas would otherwise keep a hold alive that the replica promoted in
 * its place lets expire), so with the replicas stopped the hold is
 * reported lost, unrenewed, within the watchdog's validity; with them
 * running it is renewed. */
static void test_replica_guard_renewals(void) {
  th_lost_log log;
  th_lost_init(&log);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.replica_sync_ms = 200;
  o.watchdog_timeout_ms = 900;
  o.on_lost = th_on_lost;
  o.on_lost_data = &log;
  dlock_client *c = th_client(&srv, &o);
  dlock_lock *l = new_lock(c, th_name("guard-renew"));
  th_server *m = th_sentinel_master(&srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  dlock_stats st0 = {.version = DLOCK_STATS_VERSION}, st1 = st0;
  dlock_client_stats(c, &st0);
  /* two validities: renewed all along (the lost log stays empty) */
  CU_ASSERT_EQUAL(th_lost_wait(&log, 1, 1800), 0);
  dlock_client_stats(c, &st1);
  CU_ASSERT(st1.renewed > st0.renewed);
  th_server *replicas[2];
  int nr = replicas_of(m, replicas);
  CU_ASSERT_EQUAL_FATAL(nr, 2);
  int64_t t0 = th_now_ms();
  for (int i = 0; i < nr; i++)
    th_server_pause(replicas[i], 1);
  /* told within the validity of the last acknowledged renewal (900 ms
   * after it, less the margin), bounded at 3 s */
  CU_ASSERT_EQUAL(th_lost_wait(&log, 1, 3000), 1);
  int64_t told = th_now_ms() - t0;
  CU_ASSERT(told <= 1200);
  CU_ASSERT_EQUAL(log.reason, DLOCK_LOST_UNRENEWED);
  for (int i = 0; i < nr; i++)
    th_server_pause(replicas[i], 0);
  dlock_client_stats(c, &st1);
  CU_ASSERT(st1.renew_failures > st0.renew_failures);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* The sentinels have finished with a failover: none in progress, and the
 * master has its two replicas again (bounded, 20 s). */
static int settled(void) {
  for (int64_t end = th_now_ms() + 20000; th_now_ms() < end; usleep(50000)) {
    th_server *m = th_sentinel_master(&srv);
    redisReply *r = th_cmd(&srv.node[srv.nnodes - 1], "SENTINEL MASTER dlock-test");
    int busy = 1;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2)
      if (strcmp(r->element[i]->str, "flags") == 0)
        busy = strstr(r->element[i + 1]->str, "failover") != NULL;
    if (r)
      freeReplyObject(r);
    if (!busy && m && th_int(m, "WAIT 2 100") == 2)
      return 1;
  }
  return 0;
}

/* Two locks of c on fresh names (a, b: into na, nb), the first held with
 * lease and on both replicas: the master it is held on. */
static th_server *two_locks(dlock_client *c, const char *a, char na[96],
                            dlock_lock **la, const char *b, char nb[96],
                            dlock_lock **lb, int64_t lease) {
  snprintf(na, 96, "%s", th_name(a));
  snprintf(nb, 96, "%s", th_name(b));
  *la = new_lock(c, na);
  *lb = new_lock(c, nb);
  th_server *m = th_sentinel_master(&srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  TH_ASSERT_RC(dlock_acquire(*la, 0, lease), DLOCK_OK);
  CU_ASSERT(th_replicated(m, "dlock-test:fence", 2, 5000) == 2); /* on both replicas */
  return m;
}

typedef struct in_flight {
  dlock_lock *l;
  int rc;
  int64_t took_ms;
} in_flight;

static void *acquire_in_flight(void *p) {
  in_flight *f = p;
  int64_t t0 = th_now_ms();
  f->rc = dlock_acquire(f->l, 15000, 30000);
  f->took_ms = th_now_ms() - t0;
  return NULL;
}

/* Calls in flight when the master stops answering (SIGSTOP: the sentinels
 * fail over to a replica) complete on the new master within their budget:
 * a release of a hold taken before (its retry carries the same request
 * id) and an acquire (its try's answer is lost: the client asks the new
 * master whether it ran, then tries there). Both direct calls. */
static void test_calls_in_flight(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.connect_timeout_ms = 10000;
  o.command_timeout_ms = 15000; /* no timeout: the switch ends the calls */
  dlock_client *c = th_client(&srv, &o);
  char held[96], wanted[96];
  dlock_lock *lh, *lw;
  th_server *old = two_locks(c, "in-flight-held", held, &lh, "in-flight-wanted",
                             wanted, &lw, 60000);
  th_server_pause(old, 1);
  in_flight f = {lw, -1, 0};
  pthread_t t;
  pthread_create(&t, NULL, acquire_in_flight, &f);
  int64_t t0 = th_now_ms();
  int rc = dlock_release(lh);
  int64_t took = th_now_ms() - t0;
  pthread_join(t, NULL);
  th_server_pause(old, 0);
  printf("\n    release %lld ms (%s), acquire %lld ms (%s) ", (long long)took,
         dlock_errname(rc), (long long)f.took_ms, dlock_errname(f.rc));
  CU_ASSERT_EQUAL(rc, DLOCK_OK);
  CU_ASSERT_EQUAL(f.rc, DLOCK_OK);
  CU_ASSERT(took < 15000 && f.took_ms < 15000);
  /* the switch ends the acquire too: not a direct connection's open (a
   * TLS handshake with the stalled master) held for the connect timeout */
  CU_ASSERT(f.took_ms < o.connect_timeout_ms);
  th_server *now = new_master(old, 1000);
  CU_ASSERT_PTR_NOT_NULL_FATAL(now);
  CU_ASSERT_EQUAL(th_int(now, "EXISTS %s", held), 0);
  CU_ASSERT_EQUAL(th_int(now, "EXISTS %s", wanted), 1);
  TH_ASSERT_RC(dlock_force_release(lw, NULL), DLOCK_OK); /* the thread's */
  dlock_lock_free(lh);
  dlock_lock_free(lw);
  dlock_client_close(c);
  CU_ASSERT(settled()); /* for the tests after this one */
}

/* SENTINEL FAILOVER: the sentinels announce the new master (+switch-master)
 * while the old one still says it is a master, and demote it later; the
 * client moves at the announcement and goes on there: a watchdog hold taken
 * before is still renewed (it was replicated; no loss reported), new locks
 * land on the new master, and the release works. */
static void test_graceful_failover(void) {
  th_lost_log log;
  th_lost_init(&log);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  /* 9 s: a renewal every 3 s. The new master's copy expires a lease after
   * the last renewal it saw (before the promotion); the sentinels announce
   * the promotion 1-3 s after it (they read roles once a second), and the
   * client renews there once its connection has moved. A 3 s lease was
   * lost under TSan when that renewal waited for the next tick. */
  o.watchdog_timeout_ms = 9000;
  o.on_lost = th_on_lost;
  o.on_lost_data = &log;
  dlock_client *c = th_client(&srv, &o);
  char held[96], later[96];
  dlock_lock *lh, *ll;
  th_server *old = two_locks(c, "held", held, &lh, "later", later, &ll,
                             DLOCK_LEASE_WATCHDOG);
  redisReply *r = th_cmd(&srv.node[srv.nnodes - 1], "SENTINEL FAILOVER dlock-test");
  CU_ASSERT(r && r->type == REDIS_REPLY_STATUS);
  if (r)
    freeReplyObject(r);
  th_server *now = new_master(old, 15000);
  CU_ASSERT_PTR_NOT_NULL_FATAL(now);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_acquire(ll, 10000, 30000), DLOCK_OK);
  printf("\n    first acquire after the failover: %lld ms ",
         (long long)(th_now_ms() - t0));
  CU_ASSERT_EQUAL(th_int(now, "EXISTS %s", later), 1);
  /* renewed on the new master: its PTTL there rises between two reads
   * (the watchdog ticks every 3 s; bounded at four ticks) */
  int renewed = th_pttl_rises(now, held, 12000);
  if (!renewed)
    printf("\n    no renewal: PTTL %lld on port %d (old %d), lost %d ",
           th_int(now, "PTTL %s", held), now->port, old->port,
           th_lost_count(&log));
  CU_ASSERT(renewed);
  CU_ASSERT_EQUAL(th_lost_count(&log), 0);
  TH_ASSERT_RC(dlock_release(lh), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(ll), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(now, "EXISTS %s", held), 0);
  /* the statistics say it: the connections moved to the new master */
  dlock_stats st = {.version = DLOCK_STATS_VERSION};
  TH_ASSERT_RC(dlock_client_stats(c, &st), DLOCK_OK);
  printf("reconnects %llu ", (unsigned long long)st.reconnects);
  CU_ASSERT(st.reconnects >= 1);
  dlock_lock_free(lh);
  dlock_lock_free(ll);
  dlock_client_close(c);
}

/* A master's connection that falls reconnects where the sentinels point
 * after the fall, not at once to the old address: a master that died and
 * came back empty is a master until the sentinels make it a replica, and a
 * lock taken there beside one taken on the promoted replica is held twice
 * (seen in t21 under load: a holder's renewal told it lost on the empty
 * master, its hold was back on the promoted one). Its own setup (no
 * replica, one sentinel): the sentinel is stopped while the master dies
 * and comes back, so no search can answer, and the old address is
 * listening again. */
static void test_fall_waits_for_sentinels(void) {
  th_server own;
  CU_ASSERT_FATAL(th_sentinel_start(&own, 0, 1) == 0);
  th_server *m = &own.node[0], *sen = &own.node[1];
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.connect_timeout_ms = 800;
  o.command_timeout_ms = 300;
  dlock_client *c = th_client(&own, &o);
  const char *name = th_name("fall");
  dlock_lock *l = new_lock(c, name);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK); /* connected */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  th_server_pause(sen, 1);
  th_server_kill(m);
  CU_ASSERT_FATAL(th_server_restart(m) == 0); /* the address answers */
  /* with the old reconnect this call was granted on the empty master */
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "sentinel"));
  CU_ASSERT_EQUAL(th_int(m, "EXISTS %s", name), 0);
  /* the sentinel answers again (stopped ~1 s: under its 2 s TILT trigger)
   * and names the same master: the client goes back to it */
  th_server_pause(sen, 0);
  TH_ASSERT_RC(dlock_acquire(l, 5000, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(m, "EXISTS %s", name), 1);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
  th_server_stop(&own);
}

/* The master dies (kill -9): a call made then waits for the sentinels'
 * failover (down-after 1 s) and succeeds on the new master within its
 * budget. Last: the setup is left with a master killed. */
static void test_master_killed(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.connect_timeout_ms = 10000; /* a call waits this long for a master */
  dlock_client *c = th_client(&srv, &o);
  const char *name = th_name("after-kill");
  dlock_lock *l = new_lock(c, name);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK); /* connected */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  th_server *old = th_sentinel_master(&srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(old);
  th_server_kill(old);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_acquire(l, 10000, 30000), DLOCK_OK);
  int64_t took = th_now_ms() - t0;
  printf("\n    kill -9 of the master to the first acquire: %lld ms ",
         (long long)took);
  CU_ASSERT(took < 10000);
  /* the client may have found the promoted replica through the failover's
   * leader before the sentinel asked here names it */
  th_server *now = new_master(old, 10000);
  CU_ASSERT(now != NULL && now != old);
  if (now)
    CU_ASSERT_EQUAL(th_int(now, "EXISTS %s", name), 1);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
}

static void add(void) {
  CU_pSuite s = CU_add_suite("sentinel", suite_init, suite_clean);
  CU_add_test(s, "finds_master", test_finds_master);
  CU_add_test(s, "clear_errors", test_clear_errors);
  CU_add_test(s, "sentinel_credentials", test_sentinel_credentials);
  CU_add_test(s, "direct_path", test_direct_path);
  CU_add_test(s, "inspecting_commands", test_inspecting_commands);
  CU_add_test(s, "family", test_family);
  CU_add_test(s, "election", test_election);
  CU_add_test(s, "replica_guard", test_replica_guard);
  CU_add_test(s, "replica_guard_renewals", test_replica_guard_renewals);
  CU_add_test(s, "replica_guard_first_sync", test_replica_guard_first_sync);
  CU_add_test(s, "calls_in_flight", test_calls_in_flight);
  CU_add_test(s, "graceful_failover", test_graceful_failover);
  CU_add_test(s, "fall_waits_for_sentinels", test_fall_waits_for_sentinels);
  CU_add_test(s, "master_killed", test_master_killed); /* last */
}

int main(int argc, char **argv) { return th_main(argc, argv, add, NULL); }
