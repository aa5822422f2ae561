/* Durable grants (dlock_client_opts.durable_ms, docs/durability.md): every
 * write of an acquire or release is followed by WAITAOF on the same
 * connection, on the direct path, the engine and async calls alike; a grant
 * not fsynced in time is given back; a server that cannot make writes
 * durable (no WAITAOF, no append-only file, an ACL without +waitaof) is
 * refused at open, a replica is not. Runs on a server with WAITAOF: the
 * configured one (DLOCK_REDIS_SERVER) when it has it, else valkey-server
 * (Redis 7.0 has none). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define AOF "--appendonly yes --appendfsync always"

static th_server srv; /* with an append-only file */

static int suite_init(void) {
  return th_waitaof_server_start(&srv, "--appendfsync always");
}

static int suite_clean(void) {
  th_server_stop(&srv);
  return 0;
}

static dlock_client_opts durable_opts(int direct) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.durable_ms = 1000;
  o.direct_conns = direct ? 4 : 0;
  return o;
}

/* Each acquire and release of each kind sends WAITAOF after its write, on
 * both paths; the grants work as without it. */
static void test_writes_fsynced(void) {
  for (int direct = 0; direct < 2; direct++) {
    dlock_client_opts o = durable_opts(direct);
    dlock_client *c = th_client(&srv, &o);
    long long before = th_cmd_calls(&srv, "waitaof");
    dlock_lock *l[3] = {NULL, NULL, NULL};
    TH_ASSERT_RC(dlock_reentrant_lock_new(c, th_name("re"), NULL, &l[0]), DLOCK_OK);
    TH_ASSERT_RC(dlock_fair_lock_new(c, th_name("fair"), NULL, &l[1]), DLOCK_OK);
    dlock_rwlock *rw = NULL;
    TH_ASSERT_RC(dlock_rwlock_new(c, th_name("rw"), NULL, &rw), DLOCK_OK);
    l[2] = dlock_rwlock_write(rw);
    for (int k = 0; k < 3; k++) {
      TH_ASSERT_RC(dlock_acquire(l[k], 0, 10000), DLOCK_OK);
      TH_ASSERT_RC(dlock_release(l[k]), DLOCK_OK);
    }
    long long sent = th_cmd_calls(&srv, "waitaof") - before;
    /* six writes, plus the probe of each connection's handshake (the
     * engine's command and pub/sub connections, a direct one) */
    printf("[%s: %lld WAITAOF] ", direct ? "direct" : "engine", sent);
    CU_ASSERT(sent >= 6 && sent <= 9);
    dlock_lock_free(l[0]);
    dlock_lock_free(l[1]);
    dlock_rwlock_free(rw);
    dlock_client_close(c);
  }
}

/* A grant the server fsynced survives kill -9 and a restart: the key is
 * there, and the holder's release finds its hold. */
static void test_grant_survives_restart(void) {
  dlock_client_opts o = durable_opts(1);
  dlock_client *c = th_client(&srv, &o);
  const char *name = th_name("kept");
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 60000), DLOCK_OK);
  th_server_kill(&srv);
  CU_ASSERT_EQUAL_FATAL(th_server_restart(&srv), 0);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 1);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK); /* reconnects; the hold is there */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* durable_replicas 1 on a server without replicas: no grant is durable in
 * time, so each acquire (direct, engine, async) waits durable_ms, gives
 * the grant back and fails with DLOCK_EIO saying so; the lock is free. */
static void test_not_durable_in_time(void) {
  for (int how = 0; how < 3; how++) {
    dlock_client_opts o = durable_opts(how == 0);
    o.durable_ms = 150;
    o.durable_replicas = 1;
    dlock_client *c = th_client(&srv, &o);
    const char *name = th_name("short");
    dlock_lock *l = NULL;
    TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
    int64_t t0 = th_now_ms();
    int rc;
    char msg[512];
    if (how < 2) {
      rc = dlock_acquire(l, 0, 10000);
      snprintf(msg, sizeof msg, "%s", dlock_errmsg());
    } else {
      th_outcome b = TH_OUTCOME_INIT;
      TH_ASSERT_RC(dlock_acquire_async(l, dlock_thread_id(), 0, 10000,
                                       th_outcome_done, &b, NULL), DLOCK_OK);
      rc = th_outcome_wait(&b, 10000); /* the command timeout answers it */
      snprintf(msg, sizeof msg, "%s", b.msg);
    }
    int64_t took = th_now_ms() - t0;
    CU_ASSERT_EQUAL(rc, DLOCK_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "durable"));
    CU_ASSERT(took >= 150);
    long long left = th_int(&srv, "EXISTS %s", name);
    CU_ASSERT_EQUAL(left, 0); /* given back */
    if (left != 0)
      fprintf(stderr, "how %d: %s\n", how, msg);
    dlock_lock_free(l);
    dlock_client_close(c);
  }
}

/* Open against a server that cannot make writes durable: DLOCK_ECONFIG
 * (no append-only file; no WAITAOF, as Redis before 7.2: here renamed
 * away) or DLOCK_EPERM (an ACL user without +waitaof), with the reason;
 * a lazy client's first lock call gets the same. */
static void open_fails(th_server *s, const char *uri, int want, const char *says) {
  dlock_client_opts o = durable_opts(1);
  o.connect_timeout_ms = 1500;
  dlock_client *c = NULL;
  TH_ASSERT_RC(dlock_client_open(uri ? uri : s->url, &o, &c), want);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), says));
  CU_ASSERT_PTR_NULL(c);
  o.lazy_connect = 1;
  TH_ASSERT_RC(dlock_client_open(uri ? uri : s->url, &o, &c), DLOCK_OK);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, th_name("lazy"), NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 10000), want);
  dlock_lock_free(l);
  dlock_client_close(c);
}

static void test_server_cannot(void) {
  th_server s = {0};
  CU_ASSERT_EQUAL_FATAL(th_server_start_bin(&s, srv.bin, NULL), 0); /* no AOF */
  open_fails(&s, NULL, DLOCK_ECONFIG, "appendonly is disabled");
  th_server_stop(&s);
  CU_ASSERT_EQUAL_FATAL(
      th_server_start_bin(&s, srv.bin, AOF " --rename-command WAITAOF \"\""), 0);
  open_fails(&s, NULL, DLOCK_ECONFIG, "unknown command");
  th_server_stop(&s);
  CU_ASSERT_EQUAL_FATAL(th_server_start_bin(&s, srv.bin, AOF), 0);
  freeReplyObject(th_cmd(&s, "ACL SETUSER nowait on >pw ~* &* +@all -waitaof"));
  char uri[300];
  snprintf(uri, sizeof uri, "redis://nowait:pw@127.0.0.1:%d", s.port);
  open_fails(&s, uri, DLOCK_EPERM, "permissions");
  th_server_stop(&s);
}

/* A replica refuses WAITAOF ("cannot be used with replica instances"): that
 * is no reason to refuse the connection (a demoted master's connection
 * answers MOVED or READONLY as without durability). */
static void test_replica_accepted(void) {
  th_server r = {0};
  char extra[128];
  snprintf(extra, sizeof extra, AOF " --replicaof 127.0.0.1 %d", srv.port);
  CU_ASSERT_EQUAL_FATAL(th_server_start_bin(&r, srv.bin, extra), 0);
  dlock_client_opts o = durable_opts(1);
  dlock_client *c = NULL;
  TH_ASSERT_RC(dlock_client_open(r.url, &o, &c), DLOCK_OK);
  dlock_client_close(c);
  th_server_stop(&r);
}

static void test_options(void) {
  struct {
    int64_t durable_ms, replica_sync_ms;
    int replicas;
  } bad[] = {{-1, 0, 0},    {0, 0, 1},       {100, 0, -1},
            {3000, 0, 0}, {1500, 1500, 0}, {INT64_MAX, 1, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
    o.durable_ms = bad[i].durable_ms;
    o.durable_replicas = bad[i].replicas;
    o.replica_sync_ms = bad[i].replica_sync_ms;
    dlock_client *c = NULL;
    TH_ASSERT_RC(dlock_client_open(srv.url, &o, &c), DLOCK_EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "durable"));
  }
  /* version 9 callers (no durable fields) still open */
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.version = 9;
  dlock_client *c = NULL;
  TH_ASSERT_RC(dlock_client_open(srv.url, &o, &c), DLOCK_OK);
  dlock_client_close(c);
}

/* `dlock run --durable D`: runs on this server, exits 78 on one without an
 * append-only file, and refuses bad values (64). */
static void test_cli(void) {
  char cmd[600], out[2048];
  snprintf(cmd, sizeof cmd, "--redis %s run --durable 500ms %s -- echo ran",
           srv.url, th_name("cli"));
  CU_ASSERT_EQUAL(th_dlock_output(cmd, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "ran\n");
  snprintf(cmd, sizeof cmd, "--redis %s check --durable 1s", srv.url);
  CU_ASSERT_EQUAL(th_dlock_output(cmd, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "WAITAOF"));
  th_server s = {0};
  CU_ASSERT_EQUAL_FATAL(th_server_start_bin(&s, srv.bin, NULL), 0);
  snprintf(cmd, sizeof cmd, "--redis %s run --durable 500ms %s -- echo ran 2>&1",
           s.url, th_name("cli"));
  CU_ASSERT_EQUAL(th_dlock_output(cmd, out, sizeof out), 78);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--durable"));
  CU_ASSERT_PTR_NULL(strstr(out, "ran\n"));
  th_server_stop(&s);
  const char *bad[] = {"run --durable 3s x true", "run --durable-replicas 1 x true",
                       "run --durable 2s --replica-sync 1s x true",
                       "run --durable 1s --durable-replicas -1 x true"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(cmd, sizeof cmd, "--redis %s %s 2>&1", srv.url, bad[i]);
    CU_ASSERT_EQUAL(th_dlock_output(cmd, out, sizeof out), 64);
  }
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("durable", suite_init, suite_clean);
  CU_add_test(s, "writes_fsynced", test_writes_fsynced);
  CU_add_test(s, "grant_survives_restart", test_grant_survives_restart);
  CU_add_test(s, "not_durable_in_time", test_not_durable_in_time);
  CU_add_test(s, "server_cannot", test_server_cannot);
  CU_add_test(s, "replica_accepted", test_replica_accepted);
  CU_add_test(s, "options", test_options);
  CU_add_test(s, "cli", test_cli);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
