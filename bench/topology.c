/* The workloads of the other setups: C1 (a cluster), C2 (the replica
 * guard), V1 (Valkey), D1 (durable grants), G1 (a guarded write), F1
 * (failover time), T1 (TLS). */
#include <inttypes.h>
#include <signal.h>
#include <sys/wait.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlock/dlock.h>
#include <hiredis/hiredis.h>

#include "bench.h"

/* ---- C1: W1 and W3 on a Redis Cluster, beside one server ----------------------
 * A throwaway cluster of 3 masters on this machine; each figure's bound is
 * the same workload on the single server, in the same run. */

void bench_c1(bench_bounds *b) {
  rs_cluster k;
  if (rs_cluster_start(&k, 3, 0) != 0) {
    bench_na("C1", "no cluster (redis-server and redis-cli are needed)");
    return;
  }
  dlock_client *one = bench_open_client(bench_opt.urls[0], 0), *cl = bench_open_client(k.url, 0);
  double r1, p1, q1, rc, pc, qc, rr1, rp1, rq1, rrc, rpc, rqc;
  bench_pairs(1, 0, one, &r1, &p1, &q1);
  bench_pairs(1, 0, cl, &rc, &pc, &qc);
  /* the raw bound on both: what the servers themselves cost (on a small
   * machine, names spread over three server processes cost more than on
   * one), against which dlock's routing is measured */
  bench_pairs_at(1, 1, NULL, NULL, &rr1, &rp1, &rq1);
  bench_pairs_at(1, 1, &k, NULL, &rrc, &rpc, &rqc);
  bench_emit("C1", "W1 pairs/s on a cluster", rc, "1/s", r1);
  bench_emit("C1", "W1 lock p50 on a cluster", pc, "us", p1);
  bench_emit("C1", "raw W1 pairs/s, cluster vs one", rrc, "1/s", rr1);
  bench_emit("C1", "W1 pairs/s on a cluster vs raw", rc, "1/s", rrc);
  dlock_client_close(one);
  dlock_client_close(cl);
  double h1 = bench_handoff_run(b, bench_opt.urls[0], "bench:c1", NULL);
  double hc = bench_handoff_run(b, k.url, "bench:c1", NULL);
  bench_emit("C1", "W3 hand-off p50 on a cluster", hc, "us", h1);
  rs_cluster_stop(&k);
}

/* W1 (one thread) by client c beside base in the same run: id's pairs/s,
 * lock p50 and p99 rows, named "W1 ...SUFFIX", base's figures the bounds. */
static void w1_beside(const char *id, const char *suffix, dlock_client *base,
                      dlock_client *c) {
  double r0, p0, q0, r1, p1, q1;
  char m[3][64];
  bench_pairs(1, 0, base, &r0, &p0, &q0);
  bench_pairs(1, 0, c, &r1, &p1, &q1);
  snprintf(m[0], sizeof m[0], "W1 pairs/s%s", suffix);
  snprintf(m[1], sizeof m[1], "W1 lock p50%s", suffix);
  snprintf(m[2], sizeof m[2], "W1 lock p99%s", suffix);
  bench_emit(id, m[0], r1, "1/s", r0);
  bench_emit(id, m[1], p1, "us", p0);
  bench_emit(id, m[2], q1, "us", q0);
}

/* W1 on url by a client opened with o beside one with the defaults, in the
 * same run (w1_beside). */
static void w1_with(const char *id, const char *suffix, const char *url,
                    const dlock_client_opts *o) {
  dlock_client *plain = bench_open_client(url, 0), *c = NULL;
  int rc = dlock_client_open(url, o, &c);
  if (rc != DLOCK_OK)
    bench_die(bench_shown(url), rc);
  w1_beside(id, suffix, plain, c);
  dlock_client_close(plain);
  dlock_client_close(c);
}

/* ---- C2: the replica guard's cost --------------------------------------------
 * A throwaway cluster of 3 masters with a replica each: W1 (one thread) by
 * a client with replica_sync_ms set (each acquire and release waits for the
 * master's replica) against one without, in the same run. */

void bench_c2(bench_bounds *b) {
  rs_cluster k;
  if (rs_cluster_start(&k, 3, 1) != 0) {
    bench_na("C2", "no cluster (redis-server and redis-cli are needed)");
    return;
  }
  dlock_client_opts o = bench_client_opts();
  o.replica_sync_ms = 1000;
  w1_with("C2", ", replica guard on", k.url, &o);
  rs_cluster_stop(&k);
}

/* ---- V1: Valkey beside Redis ------------------------------------------------
 * W1 (one thread), by dlock and raw, on a throwaway valkey-server beside the
 * run's first server (redis-server unless DLOCK_REDIS_SERVER names another),
 * in the same run: each Valkey figure's bound is the same figure there. */

void bench_v1(bench_bounds *b) {
  rs_server v;
  if (rs_server_start_bin(&v, "valkey-server", NULL) != 0) {
    bench_na("V1", "no valkey-server (scripts/setup installs it)");
    return;
  }
  dlock_client *first = bench_open_client(bench_opt.urls[0], 0), *valkey = bench_open_client(v.url, 0);
  w1_beside("V1", " on Valkey", first, valkey);
  double r0, p0, q0, r1, p1, q1;
  bench_pairs_on(1, 1, NULL, bench_opt.urls[0], NULL, &r0, &p0, &q0);
  bench_pairs_on(1, 1, NULL, v.url, NULL, &r1, &p1, &q1);
  bench_emit("V1", "raw W1 pairs/s on Valkey", r1, "1/s", r0);
  dlock_client_close(first);
  dlock_client_close(valkey);
  rs_server_stop(&v);
}

/* ---- D1: the cost of durable grants --------------------------------------------
 * A throwaway valkey-server with appendonly yes and appendfsync always (its
 * files in a directory of its own): W1 (one thread) by a client with
 * durable_ms set (each acquire and release waits for WAITAOF) against one
 * without, in the same run. */

void bench_d1(bench_bounds *b) {
  char dir[64] = "/tmp/dlock-bench-aof-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    bench_na("D1", "no temporary directory");
    return;
  }
  const char *extra[] = {"--appendonly", "yes", "--appendfsync", "always",
                         "--dir", dir, NULL};
  rs_server v;
  if (rs_server_start_bin(&v, "valkey-server", extra) != 0) {
    bench_na("D1", "no valkey-server (scripts/setup installs it)");
  } else {
    dlock_client_opts o = bench_client_opts();
    o.durable_ms = 1000;
    w1_with("D1", ", durable", v.url, &o);
    rs_server_stop(&v);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- G1: the cost of a guarded write ------------------------------------------
 * One thread holds a fenced lock and writes SET {bench:g1}:v i for the
 * run's duration through dlock_guarded_call (the hold and the token checked
 * in the same script); the bound is the same SET from plain hiredis on the
 * same server, in the same run. */

void bench_g1(bench_bounds *b) {
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  dlock_lock *l = NULL;
  int rc = dlock_fenced_lock_new(c, "bench:g1", NULL, &l);
  if (rc == DLOCK_OK)
    rc = dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG);
  if (rc != DLOCK_OK)
    bench_die("G1 lock", rc);
  const char *key = "{bench:g1}:v";
  int64_t lat[2][4096];
  long nlat[2] = {0, 0};
  double rate[2];
  redisContext *raw = bench_raw_connect(bench_opt.urls[0]);
  for (int guarded = 0; guarded < 2; guarded++) {
    int64_t t0 = bench_now_us(), end = t0 + (int64_t)(bench_opt.duration * 1e6);
    long n = 0;
    for (; bench_now_us() < end; n++) {
      char v[24];
      snprintf(v, sizeof v, "%ld", n);
      int64_t s = bench_now_us();
      if (guarded) {
        const char *argv[] = {"SET", key, v};
        size_t lens[] = {3, strlen(key), strlen(v)};
        if ((rc = dlock_guarded_call(l, 3, argv, lens, NULL)) != DLOCK_OK)
          bench_die("G1 guarded write", rc);
      } else {
        redisReply *r = redisCommand(raw, "SET %s %s", key, v);
        if (r == NULL)
          bench_die("G1 raw SET", -1);
        freeReplyObject(r);
      }
      lat[guarded][n % 4096] = bench_now_us() - s;
    }
    nlat[guarded] = n < 4096 ? n : 4096;
    rate[guarded] = (double)n / ((double)(bench_now_us() - t0) / 1e6);
  }
  bench_emit("G1", "guarded SET ops/s", rate[1], "1/s", rate[0]);
  bench_emit("G1", "guarded SET p50", bench_pct(lat[1], nlat[1], 50), "us",
       bench_pct(lat[0], nlat[0], 50));
  redisFree(raw);
  dlock_release(l);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* ---- F1: failover time --------------------------------------------------------
 * kill -9 of the master to the first successful acquire on the new one, on a
 * sentinel setup (a master, 2 replicas, 3 sentinels) and on a cluster (3
 * masters with a replica each), with the servers' own detection times
 * (Sentinel's down-after-milliseconds 30 s, cluster-node-timeout 15 s)
 * unless --down-after MS sets both. Runs only when asked (--workload F1):
 * with the defaults it takes about a minute. */

/* kill -9 of s, then acquires of l until one succeeds (each waits up to
 * the client's connect timeout for a master): ms from the kill, or NAN
 * after 300 s */
static double failover_ms(dlock_lock *l, rs_server *s) {
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  s->pid = -1;
  int64_t t0 = bench_now_us();
  while (bench_now_us() - t0 < 300 * 1000000LL) {
    if (dlock_acquire(l, 1000, 30000) == DLOCK_OK) {
      double ms = (double)(bench_now_us() - t0) / 1000.0;
      dlock_release(l);
      return ms;
    }
    usleep(5000); /* refused at once: the next try a little later */
  }
  return NAN;
}

/* A client that waits for a master up to 60 s, and its lock on name,
 * acquired and released once (connected). */
static dlock_client *failover_client(const char *url, const char *name,
                                     dlock_lock **l) {
  dlock_client_opts o = bench_client_opts();
  o.connect_timeout_ms = 60000;
  dlock_client *c = NULL;
  int rc = dlock_client_open(url, &o, &c);
  if (rc == DLOCK_OK)
    rc = dlock_reentrant_lock_new(c, name, NULL, l);
  if (rc == DLOCK_OK && (rc = dlock_acquire(*l, 0, 30000)) == DLOCK_OK)
    rc = dlock_release(*l);
  if (rc != DLOCK_OK)
    bench_die(bench_shown(url), rc);
  return c;
}

/* The node of k that serves name's slot now (NULL: none says). */
static rs_server *slot_owner(rs_cluster *k, const char *name) {
  redisContext *c = bench_raw_connect(k->node[0].url);
  redisReply *slot = redisCommand(c, "CLUSTER KEYSLOT %s", name);
  redisReply *map = redisCommand(c, "CLUSTER SLOTS");
  rs_server *owner = NULL;
  for (size_t i = 0; slot && map && map->type == REDIS_REPLY_ARRAY &&
                     i < map->elements; i++) {
    redisReply *e = map->element[i];
    if (slot->integer >= e->element[0]->integer &&
        slot->integer <= e->element[1]->integer)
      for (int n = 0; n < k->n; n++)
        if (k->node[n].port == e->element[2]->element[1]->integer)
          owner = &k->node[n];
  }
  freeReplyObject(slot);
  freeReplyObject(map);
  redisFree(c);
  return owner;
}

void bench_f1(bench_bounds *b) {
  char set[64];
  if (bench_opt.down_after_ms > 0)
    snprintf(set, sizeof set, "%ld", bench_opt.down_after_ms);
  rs_sentinel st;
  if (rs_sentinel_start(&st, 2, 3, bench_opt.down_after_ms) != 0) {
    bench_na("F1", "no sentinel setup (redis-server and redis-cli are needed)");
  } else {
    dlock_lock *l;
    dlock_client *c = failover_client(st.url, "bench:f1", &l);
    double ms = failover_ms(l, &st.node[0]);
    printf("     (sentinel down-after-milliseconds %s, failover-timeout "
           "default)\n", bench_opt.down_after_ms > 0 ? set : "30000 (default)");
    bench_emit("F1", "sentinel: kill -9 to acquire", ms, "ms",
         bench_opt.down_after_ms > 0 ? (double)bench_opt.down_after_ms : 30000.0);
    dlock_lock_free(l);
    dlock_client_close(c);
    rs_sentinel_stop(&st);
  }
  rs_cluster k;
  if (rs_cluster_start_timeout(&k, 3, 1, bench_opt.down_after_ms) != 0) {
    bench_na("F1", "no cluster (redis-server and redis-cli are needed)");
    return;
  }
  dlock_lock *l;
  dlock_client *c = failover_client(k.url, "bench:f1", &l);
  rs_server *owner = slot_owner(&k, "bench:f1");
  double ms = owner ? failover_ms(l, owner) : NAN;
  printf("     (cluster-node-timeout %s)\n",
         bench_opt.down_after_ms > 0 ? set : "15000 (default)");
  bench_emit("F1", "cluster: kill -9 to acquire", ms, "ms",
       bench_opt.down_after_ms > 0 ? (double)bench_opt.down_after_ms : 15000.0);
  dlock_lock_free(l);
  dlock_client_close(c);
  rs_cluster_stop(&k);
}

/* ---- T1: TLS ------------------------------------------------------------------
 * W1 (one thread) and W3 (hand-off) over TLS beside plain TCP, on one
 * server with both ports, certificates made for the run (the openssl
 * CLI). */

void bench_t1(bench_bounds *b) {
  char certs[64] = "/tmp/dlock-bench-certs-XXXXXX", cmd[256], tls_url[64];
  rs_server s = {0};
  int made = mkdtemp(certs) != NULL;
  snprintf(cmd, sizeof cmd, "sh '%s' '%s'", DLOCK_TLS_CERTS, certs);
  if (!made || system(cmd) != 0 ||
      rs_tls_server_start(&s, certs, tls_url) != 0) {
    bench_na("T1", "no TLS server (openssl and redis-server with TLS are needed)");
  } else {
    snprintf(bench_opt.tls_ca, sizeof bench_opt.tls_ca, "%s/ca.crt", certs);
    dlock_client *plain = bench_open_client(s.url, 0), *tls = bench_open_client(tls_url, 0);
    w1_beside("T1", " over TLS", plain, tls);
    dlock_client_close(plain);
    dlock_client_close(tls);
    double h0 = bench_handoff_run(b, s.url, "bench:t1", NULL);
    double h1 = bench_handoff_run(b, tls_url, "bench:t1", NULL);
    bench_emit("T1", "W3 hand-off p50 over TLS", h1, "us", h0);
  }
  rs_server_stop(&s);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", certs);
}


