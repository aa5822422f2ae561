/* What only a Redis Cluster has: locks spread over every master, renewed
 * there; names whose keys cannot share a slot; seeds that do not answer or
 * are not cluster nodes; a slot that moves under a held lock. Against a real
 * cluster of 3 masters and 3 replicas (tests/harness.c). The primitive
 * suites also run on a cluster (tests/meson.build, "-cluster"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "core/scripts.h"
#include "harness.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) {
  if (th_cluster_start(&srv, 3, 1) != 0)
    return 1;
  return dlock_client_open(srv.url, NULL, &cl) == DLOCK_OK ? 0 : 1;
}

static int suite_clean(void) { return th_suite_close(&srv, cl); }

static dlock_lock *new_lock(dlock_client *c, const char *name) {
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(l);
  return l;
}

#define SPREAD 24

/* 24 watchdog locks, some on every master, held over three lease lengths:
 * each renewal reached its own master (none lost, every key still there),
 * and each release too. */
static void test_locks_on_every_master(void) {
  th_lost_log log;
  th_lost_init(&log);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 600;
  o.on_lost = th_on_lost;
  o.on_lost_data = &log;
  dlock_client *c = th_client(&srv, &o);
  dlock_lock *l[SPREAD];
  char names[SPREAD][64];
  int per_master[3] = {0};
  for (int i = 0; i < SPREAD; i++) {
    snprintf(names[i], sizeof names[i], "%s", th_name("spread"));
    th_server *owner = th_node_of(&srv, names[i]);
    for (int m = 0; m < 3; m++)
      per_master[m] += owner == &srv.node[m];
    l[i] = new_lock(c, names[i]);
    TH_ASSERT_RC(dlock_acquire(l[i], 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  }
  for (int m = 0; m < 3; m++)
    CU_ASSERT(per_master[m] > 0); /* the names do reach every master */
  usleep(1800 * 1000);
  for (int i = 0; i < SPREAD; i++) {
    long long ttl = th_int(&srv, "PTTL %s", names[i]);
    CU_ASSERT(ttl > 0 && ttl <= 600);
    TH_ASSERT_RC(dlock_release(l[i]), DLOCK_OK);
    CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", names[i]), 0);
    dlock_lock_free(l[i]);
  }
  CU_ASSERT_EQUAL(log.count, 0);
  dlock_client_close(c);
}

/* A name with a '{' but no hash tag: Redisson's layout leaves such a name
 * unwrapped (redisson_lock__channel:odd{name, not ...:{odd{name}), so its
 * keys hash to different slots and a lock could be taken but never
 * released. Refused on a cluster when the handle is made, for every kind;
 * a name with a whole tag works (every key of a{b}c hashes by b). A call
 * whose keys still span slots fails at once with a clear error. */
static void test_cross_slot_name(void) {
  const char *odd[] = {"odd{name", "x{}y"};
  for (size_t i = 0; i < 2; i++) {
    dlock_lock *l = NULL;
    dlock_semaphore *s = NULL;
    TH_ASSERT_RC(dlock_fair_lock_new(cl, odd[i], NULL, &l), DLOCK_EINVAL);
    CU_ASSERT(strstr(dlock_errmsg(), "whole hash tag") != NULL);
    TH_ASSERT_RC(dlock_reentrant_lock_new(cl, odd[i], NULL, &l), DLOCK_EINVAL);
    TH_ASSERT_RC(dlock_semaphore_new(cl, odd[i], NULL, &s), DLOCK_EINVAL);
    CU_ASSERT_PTR_NULL(l);
  }
  char tagged[64];
  snprintf(tagged, sizeof tagged, "%s{tag}:fair", th_name("tagged"));
  dlock_lock *f = NULL;
  TH_ASSERT_RC(dlock_fair_lock_new(cl, tagged, NULL, &f), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(f, 0, 5000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(f), DLOCK_OK);
  dlock_lock_free(f);
  /* below the handles: keys of two slots in one call */
  const char *keys[] = {"a", "b"}; /* slots 15495 and 3300 */
  size_t klens[] = {1, 1};
  redisReply *r = NULL;
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock__script_call(cl, DLOCK__SCRIPT_LOCK_STATE, 2, keys, klens,
                                  0, NULL, NULL, &r),
               DLOCK_EINVAL);
  CU_ASSERT(th_now_ms() - t0 < 500);
  CU_ASSERT(strstr(dlock_errmsg(), "different cluster slots") != NULL);
  if (r)
    freeReplyObject(r);
}

/* Seeds: a dead first seed is skipped; none answering fails the open within
 * the connect timeout; a standalone server behind a cluster URI says so. */
static void test_seeds(void) {
  th_server dead;
  CU_ASSERT_FATAL(th_server_start(&dead, NULL) == 0);
  int dead_port = dead.port;
  th_server_stop(&dead); /* nobody listens there now */
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.connect_timeout_ms = 1000;
  char url[300];
  snprintf(url, sizeof url, "redis+cluster://127.0.0.1:%d,127.0.0.1:%d",
           dead_port, srv.node[1].port);
  dlock_client *c = NULL;
  TH_ASSERT_RC(dlock_client_open(url, &o, &c), DLOCK_OK);
  if (c) {
    dlock_lock *l = new_lock(c, th_name("seed"));
    TH_ASSERT_RC(dlock_acquire(l, 0, 5000), DLOCK_OK);
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_close(c);
  }
  snprintf(url, sizeof url, "redis+cluster://127.0.0.1:%d", dead_port);
  int64_t t0 = th_now_ms();
  c = NULL;
  TH_ASSERT_RC(dlock_client_open(url, &o, &c), DLOCK_EIO);
  CU_ASSERT(th_now_ms() - t0 < 3000);
  CU_ASSERT_PTR_NULL(c);
  th_server plain;
  CU_ASSERT_FATAL(th_server_start(&plain, NULL) == 0);
  snprintf(url, sizeof url, "redis+cluster://127.0.0.1:%d", plain.port);
  TH_ASSERT_RC(dlock_client_open(url, &o, &c), DLOCK_EIO);
  CU_ASSERT(strstr(dlock_errmsg(), "not a cluster node") != NULL);
  th_server_stop(&plain);
  const char *bad[] = {"redis+cluster://", "redis+cluster://h:1,",
                       "redis+cluster://h:1,,h:2", "redis+cluster://h:0",
                       "redis+cluster://h:1/3"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    TH_ASSERT_RC(dlock_uri_check(bad[i]), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_uri_check("redis+cluster://u:p@h1:1,[::1]:2,h3/0"),
               DLOCK_OK);
}

/* The master that owns a held lock's slot hands the slot (and the key) to
 * another master. The client's map is stale: its next calls meet MOVED
 * (and ASK while the key is moving) and follow; the release finds the hold
 * on the new owner, and the lock is usable at once. */
static void test_slot_moves_under_lock(void) {
  char name[64];
  snprintf(name, sizeof name, "%s", th_name("moving"));
  dlock_lock *l = new_lock(cl, name);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  th_server *from = th_node_of(&srv, name), *to = NULL;
  for (int m = 0; m < 3 && to == NULL; m++)
    if (&srv.node[m] != from)
      to = &srv.node[m];
  long long slot = th_int(&srv, "CLUSTER KEYSLOT %s", name);
  redisReply *r = th_cmd(from, "CLUSTER MYID");
  char from_id[64], to_id[64];
  snprintf(from_id, sizeof from_id, "%s", r ? r->str : "");
  freeReplyObject(r);
  r = th_cmd(to, "CLUSTER MYID");
  snprintf(to_id, sizeof to_id, "%s", r ? r->str : "");
  freeReplyObject(r);
  freeReplyObject(th_cmd(to, "CLUSTER SETSLOT %lld IMPORTING %s", slot, from_id));
  freeReplyObject(th_cmd(from, "CLUSTER SETSLOT %lld MIGRATING %s", slot, to_id));
  /* mid-migration, the key still on the old owner: state is read there */
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(l, &st), DLOCK_OK);
  CU_ASSERT(st.held_by_me);
  r = th_cmd(from, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS %s", to->port, "", name);
  CU_ASSERT(r && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  /* the key has moved, the slot not yet: ASK */
  TH_ASSERT_RC(dlock_lock_state_get(l, &st), DLOCK_OK);
  CU_ASSERT(st.held_by_me);
  for (int i = 0; i < 3; i++)
    freeReplyObject(th_cmd(&srv.node[i], "CLUSTER SETSLOT %lld NODE %s", slot,
                           to_id));
  /* done: MOVED, then the new map */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(to, "EXISTS %s", name), 0);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(to, "EXISTS %s", name), 1);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
}

static void add(void) {
  CU_pSuite s = CU_add_suite("cluster", suite_init, suite_clean);
  CU_add_test(s, "locks_on_every_master", test_locks_on_every_master);
  CU_add_test(s, "cross_slot_name", test_cross_slot_name);
  CU_add_test(s, "seeds", test_seeds);
  CU_add_test(s, "slot_moves_under_lock", test_slot_moves_under_lock);
}

int main(int argc, char **argv) { return th_main(argc, argv, add, NULL); }
