/* TLS (src/net/tls.c): rediss:// clients against redis-servers with a TLS
 * port, certificates made at test time with the openssl CLI
 * (tests/support/tls_certs.sh). The servers keep a plain port too, for
 * the tests' own inspection (th_cmd). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "core/engine.h"
#include "harness.h"

static char certs[64];
static th_server srv;    /* server certificate, no client certificates */
static th_server mutual; /* asks for a client certificate */
static th_server stale;  /* presents an expired certificate */

static int suite_init(void) {
  return th_tls_certs(certs) != 0 ||
         th_tls_server_start(&srv, certs, "server", 0) != 0 ||
         th_tls_server_start(&mutual, certs, "server", 1) != 0 ||
         th_tls_server_start(&stale, certs, "expired", 0) != 0;
}

static int suite_clean(void) {
  th_server_stop(&srv);
  th_server_stop(&mutual);
  th_server_stop(&stale);
  th_tls_certs_remove(certs);
  return 0;
}

/* Options trusting the test CA (paths into bufs that live as long). */
typedef struct tls_files {
  char ca[96], other_ca[96], cert[96], key[96];
} tls_files;

static dlock_client_opts tls_opts(tls_files *f) {
  snprintf(f->ca, sizeof f->ca, "%s/ca.crt", certs);
  snprintf(f->other_ca, sizeof f->other_ca, "%s/other-ca.crt", certs);
  snprintf(f->cert, sizeof f->cert, "%s/client.crt", certs);
  snprintf(f->key, sizeof f->key, "%s/client.key", certs);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.tls_ca_file = f->ca;
  o.connect_timeout_ms = 1000;
  return o;
}

/* Opening url with o fails with rc and a message holding want (and never
 * the key's contents). */
static void open_fails(const char *url, const dlock_client_opts *o, int rc,
                       const char *want) {
  dlock_client *c = NULL;
  int64_t t0 = th_now_ms();
  int got = dlock_client_open(url, o, &c);
  int64_t took = th_now_ms() - t0;
  /* a TLS setting to fix fails at the handshake, not after the connect
   * timeout: half of it is the bound. Measured with a 1 s timeout: 5-20 ms
   * (TSan 30-50 ms), with two CPU hogs up to 60 ms; loading the system's
   * trust store costs more (TSan 400-440 ms: that case's timeout is 10 s) */
  if (rc == DLOCK_ETLS)
    CU_ASSERT(took < o->connect_timeout_ms / 2);
  if (got != rc || strstr(dlock_errmsg(), want) == NULL)
    printf("\n    %s: %s: %s ", url, dlock_errname(got), dlock_errmsg());
  CU_ASSERT_EQUAL(got, rc);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), want));
  CU_ASSERT_PTR_NULL(strstr(dlock_errmsg(), "PRIVATE KEY"));
  if (got == DLOCK_OK)
    dlock_client_close(c);
}

typedef struct waiter {
  dlock_lock *l;
  int rc;
} waiter;

static void *wait_for(void *p) {
  waiter *w = p;
  w->rc = dlock_acquire(w->l, 10000, 30000);
  if (w->rc == DLOCK_OK)
    dlock_release(w->l);
  return NULL;
}

/* A lock over TLS: taken (the key is on the server), waited for (the
 * waiter is woken by the release's message on the TLS pub/sub
 * connection), released. */
static void test_lock_over_tls(void) {
  tls_files f;
  dlock_client_opts o = tls_opts(&f);
  dlock_client *c = th_client(&srv, &o);
  const char *name = th_name("tls-lock");
  dlock_lock *l = NULL, *other = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &other), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 1);
  waiter w = {other, -1};
  pthread_t t;
  pthread_create(&t, NULL, wait_for, &w);
  char channel[160];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  pthread_join(t, NULL);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  CU_ASSERT(th_now_ms() - t0 < 1000); /* woken, not timed out */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  dlock_lock_free(l);
  dlock_lock_free(other);
  dlock_client_close(c);
}

/* 20 acquire/release pairs on l go direct: 40 direct calls. */
static void all_direct(dlock_client *c, dlock_lock *l) {
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK); /* connected */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  uint64_t calls = atomic_load(&c->direct.calls);
  for (int i = 0; i < 20; i++) {
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  }
  CU_ASSERT_EQUAL(atomic_load(&c->direct.calls) - calls, 40);
}

/* The direct path over TLS: a calling thread's own connection has its
 * own TLS session (40 calls, none through the engine); a release's unlock
 * latch goes with the next call. */
static void test_direct_path_over_tls(void) {
  tls_files f;
  dlock_client_opts o = tls_opts(&f);
  dlock_client *c = th_client(&srv, &o);
  dlock_lock *l = NULL;
  const char *name = th_name("tls-direct");
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  all_direct(c, l);
  /* the release's unlock latch is deleted in front of the connection's
   * next call, in its write (or by the engine's sweep if that came first) */
  char pattern[160];
  snprintf(pattern, sizeof pattern, "redisson_unlock_latch:{%s}:*", name);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  redisReply *r = th_cmd(&srv, "KEYS %s", pattern);
  CU_ASSERT(r && r->type == REDIS_REPLY_ARRAY && r->elements == 0);
  if (r)
    freeReplyObject(r);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* Mutual TLS: a server that asks for a client certificate refuses a
 * client without one, and takes one with the CA's. */
static void test_mutual_tls(void) {
  tls_files f;
  dlock_client_opts o = tls_opts(&f);
  open_fails(mutual.url, &o, DLOCK_ETLS, "certificate");
  o.tls_cert_file = f.cert;
  o.tls_key_file = f.key;
  dlock_client *c = th_client(&mutual, &o);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, th_name("mtls"), NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* Each failure says what failed. */
static void test_failures_say_what(void) {
  tls_files f;
  dlock_client_opts o = tls_opts(&f);
  o.tls_ca_file = f.other_ca; /* a CA that signed nothing here */
  open_fails(srv.url, &o, DLOCK_ETLS, "not trusted");
  o.tls_ca_file = f.ca;
  o.tls_server_name = "other.example";
  open_fails(srv.url, &o, DLOCK_ETLS, "hostname mismatch");
  o.tls_server_name = NULL;
  open_fails(stale.url, &o, DLOCK_ETLS, "expired");
  char plain[64];
  snprintf(plain, sizeof plain, "rediss://127.0.0.1:%d", srv.port);
  /* a plain Redis port: it answers the TLS greeting with an error (a TLS
   * setting to fix: DLOCK_ETLS at once), or waits for the end of a line
   * that may not come (the handshake times out: DLOCK_EIO) */
  dlock_client *pc = NULL;
  int prc = dlock_client_open(plain, &o, &pc);
  CU_ASSERT(prc == DLOCK_ETLS || prc == DLOCK_EIO);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "plain port"));
  /* a server that accepts and never answers: the handshake times out */
  int hole = th_blackhole_port();
  CU_ASSERT_FATAL(hole > 0);
  char silent[64];
  snprintf(silent, sizeof silent, "rediss://127.0.0.1:%d", hole);
  open_fails(silent, &o, DLOCK_EIO, "TLS handshake timed out");
  /* verification off (insecure): the untrusted server is taken */
  o.tls_ca_file = f.other_ca;
  o.tls_insecure = 1;
  dlock_client *c = th_client(&srv, &o);
  dlock_client_close(c);
}

/* A waiter on l2 is woken by the release of l1 (the same name, held):
 * the message comes on the TLS pub/sub connection, within 1 s. where:
 * the server(s) where its subscription shows. */
static void woken_over_tls(th_server *where, dlock_lock *l1, dlock_lock *l2,
                           const char *name) {
  TH_ASSERT_RC(dlock_acquire(l1, 0, 30000), DLOCK_OK);
  waiter w = {l2, -1};
  pthread_t t;
  pthread_create(&t, NULL, wait_for, &w);
  char channel[160];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  CU_ASSERT(th_wait_numsub(where, channel, 1, 5000));
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_release(l1), DLOCK_OK);
  pthread_join(t, NULL);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  CU_ASSERT(th_now_ms() - t0 < 1000); /* woken, not timed out */
}

/* A Redis Cluster over TLS (tls-cluster yes: the nodes announce their TLS
 * ports, replicate and gossip over TLS): a rediss+cluster:// client finds
 * the map, takes a lock on each of the three masters, goes direct to
 * them, and a waiter is woken by the release. */
static void test_cluster_over_tls(void) {
  th_server k;
  CU_ASSERT_FATAL(th_tls_cluster_start(&k, certs, 3, 0) == 0);
  tls_files f;
  dlock_client_opts o = tls_opts(&f);
  dlock_client *c = th_client(&k, &o);
  th_server *seen[3] = {NULL, NULL, NULL};
  int found = 0;
  for (int i = 0; i < 300 && found < 3; i++) {
    const char *name = th_name("tls-cluster");
    th_server *owner = th_node_of(&k, name);
    int dup = owner == &k; /* not found */
    for (int j = 0; j < found; j++)
      dup |= seen[j] == owner;
    if (dup)
      continue;
    seen[found++] = owner;
    dlock_lock *l1 = NULL, *l2 = NULL;
    TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l1), DLOCK_OK);
    TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l2), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(l1, 0, 30000), DLOCK_OK);
    CU_ASSERT_EQUAL(th_int(owner, "EXISTS %s", name), 1);
    TH_ASSERT_RC(dlock_release(l1), DLOCK_OK);
    CU_ASSERT_EQUAL(th_int(owner, "EXISTS %s", name), 0);
    all_direct(c, l1);
    woken_over_tls(&k, l1, l2, name);
    dlock_lock_free(l1);
    dlock_lock_free(l2);
  }
  CU_ASSERT_EQUAL(found, 3);
  dlock_client_close(c);
  th_server_stop(&k);
}

/* Sentinel over TLS (rediss+sentinel://): the search and the
 * +switch-master watch talk TLS to the sentinels, the calls to the master
 * it names (the direct path among them); after SENTINEL FAILOVER the
 * client follows the new master. */
static void test_sentinel_over_tls(void) {
  th_server k;
  CU_ASSERT_FATAL(th_tls_sentinel_start(&k, certs, 1, 3) == 0);
  tls_files f;
  dlock_client_opts o = tls_opts(&f);
  dlock_client *c = th_client(&k, &o);
  const char *name = th_name("tls-sentinel");
  dlock_lock *l1 = NULL, *l2 = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l1), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l2), DLOCK_OK);
  th_server *old = th_sentinel_master(&k);
  CU_ASSERT_PTR_NOT_NULL_FATAL(old);
  TH_ASSERT_RC(dlock_acquire(l1, 0, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(old, "EXISTS %s", name), 1);
  TH_ASSERT_RC(dlock_release(l1), DLOCK_OK);
  all_direct(c, l1);
  woken_over_tls(old, l1, l2, name);
  /* the watch: a TLS client of one sentinel, subscribed to its events */
  int watching = 0;
  for (int64_t end = th_now_ms() + 5000; !watching && th_now_ms() < end;
       usleep(20000))
    for (int i = k.nnodes - k.sentinels; i < k.nnodes && !watching; i++) {
      redisReply *r = th_cmd(&k.node[i], "CLIENT LIST");
      watching = r && r->type == REDIS_REPLY_STRING && strstr(r->str, " sub=6 ");
      if (r)
        freeReplyObject(r);
    }
  CU_ASSERT(watching);
  redisReply *r = th_cmd(&k.node[k.nnodes - 1], "SENTINEL FAILOVER dlock-test");
  CU_ASSERT(r && r->type == REDIS_REPLY_STATUS);
  if (r)
    freeReplyObject(r);
  th_server *now = NULL;
  for (int64_t end = th_now_ms() + 15000; now == NULL && th_now_ms() < end;
       usleep(20000)) {
    th_server *m = th_sentinel_master(&k);
    if (m && m != old && th_is_master(m))
      now = m;
  }
  CU_ASSERT_PTR_NOT_NULL_FATAL(now);
  TH_ASSERT_RC(dlock_acquire(l1, 10000, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(now, "EXISTS %s", name), 1);
  TH_ASSERT_RC(dlock_release(l1), DLOCK_OK);
  dlock_lock_free(l1);
  dlock_lock_free(l2);
  dlock_client_close(c);
  th_server_stop(&k);
}

/* A server whose one port is TLS (port 0, as managed services run):
 * locks work over TLS alone. */
static void test_tls_port_only(void) {
  th_server s;
  CU_ASSERT_FATAL(th_tls_server_start(&s, certs, "server", 0) == 0);
  redisReply *r = th_cmd(&s, "CONFIG SET port 0");
  CU_ASSERT(r && r->type == REDIS_REPLY_STATUS);
  if (r)
    freeReplyObject(r);
  redisContext *plain = redisConnect("127.0.0.1", s.port);
  CU_ASSERT(plain == NULL || plain->err); /* closed */
  if (plain)
    redisFree(plain);
  tls_files f;
  dlock_client_opts o = tls_opts(&f);
  dlock_client *c1 = th_client(&s, &o), *c2 = th_client(&s, &o);
  const char *name = th_name("tls-only");
  dlock_lock *l1 = NULL, *l2 = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c1, name, NULL, &l1), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(c2, name, NULL, &l2), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l1, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l2, 0, 30000), DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_release(l1), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l2, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l2), DLOCK_OK);
  dlock_lock_free(l1);
  dlock_lock_free(l2);
  dlock_client_close(c1);
  dlock_client_close(c2);
  th_server_stop(&s);
}

/* Settings that cannot work are refused at open, naming the setting. */
static void test_bad_settings(void) {
  tls_files f;
  dlock_client_opts o = tls_opts(&f);
  o.tls_cert_file = f.cert; /* without its key */
  open_fails(srv.url, &o, DLOCK_EINVAL, "tls_key_file");
  o.tls_key_file = f.ca; /* not a key */
  open_fails(srv.url, &o, DLOCK_EINVAL, "tls_key_file");
  o.tls_cert_file = o.tls_key_file = NULL;
  o.tls_ca_file = "/nonexistent/ca.crt";
  open_fails(srv.url, &o, DLOCK_EINVAL, "/nonexistent/ca.crt");
  o = tls_opts(&f);
  char plain[64];
  snprintf(plain, sizeof plain, "redis://127.0.0.1:%d", srv.port);
  open_fails(plain, &o, DLOCK_EINVAL, "rediss://"); /* TLS options, no TLS */
  CU_ASSERT_EQUAL(dlock_uri_check("rediss+cluster://h1:1,h2:2"), DLOCK_OK);
  CU_ASSERT_EQUAL(dlock_uri_check("redisss://h"), DLOCK_EINVAL);
  o.version = 6; /* before TLS options: the defaults (system trust store) */
  o.connect_timeout_ms = 10000;
  open_fails(srv.url, &o, DLOCK_ETLS, "not trusted");
}

/* Run the dlock tool (DLOCK_BIN) with args (a shell line): its exit
 * status, its output (both streams) into out. */
static int run_tool(const char *args, char *out, size_t n) {
  char line[1024];
  snprintf(line, sizeof line, "%s 2>&1", args);
  return th_dlock_output(line, out, n);
}

/* The dlock tool over TLS: --tls-ca trusts the test CA (a run holds the
 * lock over TLS); without it the system's CAs do not, and it says so in
 * the tool's words (exit 78, a configuration error: --tls-ca named);
 * --tls-cert/--tls-key for mutual TLS, and their absence (78). */
static void test_tool_flags(void) {
  char args[900], out[2048];
  snprintf(args, sizeof args, "--redis %s --tls-ca %s/ca.crt run %s -- true",
           srv.url, certs, th_name("tool"));
  CU_ASSERT_EQUAL(run_tool(args, out, sizeof out), 0);
  snprintf(args, sizeof args, "--redis %s run %s -- true", srv.url, th_name("tool"));
  CU_ASSERT_EQUAL(run_tool(args, out, sizeof out), 78);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "not trusted"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--tls-ca"));
  CU_ASSERT_PTR_NULL(strstr(out, "tls_ca_file"));
  snprintf(args, sizeof args, "--redis %s --tls-ca %s/ca.crt run %s -- true",
           mutual.url, certs, th_name("tool"));
  CU_ASSERT_EQUAL(run_tool(args, out, sizeof out), 78); /* no client cert */
  snprintf(args, sizeof args, "--redis %s --tls-ca /nonexistent/ca.crt run %s "
           "-- true", srv.url, th_name("tool"));
  CU_ASSERT_EQUAL(run_tool(args, out, sizeof out), 64); /* the file named */
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--tls-ca \"/nonexistent/ca.crt\""));
  snprintf(args, sizeof args, "--redis %s --tls-ca %s/ca.crt --tls-cert "
           "%s/client.crt --tls-key %s/server.key run %s -- true",
           mutual.url, certs, certs, certs, th_name("tool"));
  CU_ASSERT_EQUAL(run_tool(args, out, sizeof out), 64); /* a key not its own */
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "does not match --tls-cert"));
  snprintf(args, sizeof args, "--redis %s --tls-ca %s/ca.crt --tls-cert "
           "%s/client.crt --tls-key %s/client.key run %s -- true",
           mutual.url, certs, certs, certs, th_name("tool"));
  CU_ASSERT_EQUAL(run_tool(args, out, sizeof out), 0);
  snprintf(args, sizeof args, "--redis %s --tls-insecure run %s -- true",
           srv.url, th_name("tool"));
  CU_ASSERT_EQUAL(run_tool(args, out, sizeof out), 0);
}

static void add(void) {
  CU_pSuite s = CU_add_suite("tls", suite_init, suite_clean);
  CU_add_test(s, "lock_over_tls", test_lock_over_tls);
  CU_add_test(s, "direct_path_over_tls", test_direct_path_over_tls);
  CU_add_test(s, "mutual_tls", test_mutual_tls);
  CU_add_test(s, "cluster_over_tls", test_cluster_over_tls);
  CU_add_test(s, "sentinel_over_tls", test_sentinel_over_tls);
  CU_add_test(s, "tls_port_only", test_tls_port_only);
  CU_add_test(s, "failures_say_what", test_failures_say_what);
  CU_add_test(s, "bad_settings", test_bad_settings);
  CU_add_test(s, "tool_flags", test_tool_flags);
}

int main(int argc, char **argv) { return th_main(argc, argv, add, NULL); }
