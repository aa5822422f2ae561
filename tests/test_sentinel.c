/* Redis Sentinel (src/net/sentinel.c): a client opened on a sentinel URI
 * finds the master, says clearly when it cannot, and follows a failover
 * (a demoted master's READONLY, a killed master). Against a real master,
 * two replicas and three sentinels (tests/harness.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
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
  int dead = dlock_tool_free_port();
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

/* SENTINEL FAILOVER: the sentinels announce the new master (+switch-master)
 * while the old one still says it is a master, and demote it later; the
 * client moves at the announcement and goes on there: a watchdog hold taken
 * before is still renewed (it was replicated; no loss reported), new locks
 * land on the new master, and the release works. */
static void test_graceful_failover(void) {
  th_lost_log log;
  th_lost_init(&log);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 3000;
  o.on_lost = th_on_lost;
  o.on_lost_data = &log;
  dlock_client *c = th_client(&srv, &o);
  char held[96], later[96];
  snprintf(held, sizeof held, "%s", th_name("held"));
  snprintf(later, sizeof later, "%s", th_name("later"));
  dlock_lock *lh = new_lock(c, held), *ll = new_lock(c, later);
  th_server *old = th_sentinel_master(&srv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(old);
  TH_ASSERT_RC(dlock_acquire(lh, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  CU_ASSERT(th_int(old, "WAIT 2 2000") == 2); /* on both replicas */
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
  usleep(3500 * 1000); /* past the 3 s lease: renewed on the new master */
  long long pttl = th_int(now, "PTTL %s", held);
  if (pttl <= 0)
    printf("\n    PTTL %lld on port %d (old %d) ", pttl, now->port, old->port);
  CU_ASSERT(pttl > 0);
  CU_ASSERT_EQUAL(log.count, 0);
  TH_ASSERT_RC(dlock_release(lh), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(ll), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(now, "EXISTS %s", held), 0);
  dlock_lock_free(lh);
  dlock_lock_free(ll);
  dlock_client_close(c);
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
  th_server *now = th_sentinel_master(&srv);
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
  CU_add_test(s, "graceful_failover", test_graceful_failover);
  CU_add_test(s, "master_killed", test_master_killed); /* last */
}

int main(int argc, char **argv) { return th_main(argc, argv, add, NULL); }
