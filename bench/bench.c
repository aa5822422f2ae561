/* dlock-bench: the workloads of docs/performance.md, each figure next to
 * a bound measured in the same run on the same server(s).
 *
 *   dlock-bench [--duration S] [--workload ID] [--url URL] [--json FILE]
 *               [--threads N] [--w4-seconds S] [--peers]
 *               [--direct N] [--spin US]
 *
 * --peers adds W1 and W2 beside node-redlock, redis-semaphore and
 * node-redisson (bench/peers/peers.js, Node.js) on the same server: value
 * dlock's figure, bound the peer's. --direct and --spin set the clients'
 * direct_conns and spin_us (docs/client.md) to compare them.
 *
 * Without --url it starts its own loopback redis-server(s) (one, plus four
 * more for W5). Prints one line per figure:
 *   workload  metric  value  unit  bound  ratio
 * and writes the same as JSON (default build/bench/dlock-bench.json). */
#include <dirent.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlock/dlock.h>
#include <hiredis/hiredis.h>

#include "base/scripts.h"
#include "redis_server.h"

#define MAX_SAMPLES 200000
#define MAX_THREADS 64

/* ---- options, output ------------------------------------------------------ */

static double duration = 2.0;
static const char *only;
static const char *json_path = DLOCK_BENCH_JSON; /* in the build tree */
static int threads_opt = 16;
static int direct_opt = -1; /* --direct N: client option direct_conns */
static int spin_opt = -2;   /* --spin US: client option spin_us */
static double w4_secs = 10.0; /* W4 holds for 10 s */
static char urls[5][128];
static int nurls;
static FILE *json;
static int first_json = 1;

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void emit(const char *w, const char *metric, double value, const char *unit,
                 double bound) {
  double ratio = bound > 0 ? value / bound : NAN;
  printf("%-4s %-26s %12.1f %-8s %12.1f %7.2f\n", w, metric, value, unit, bound,
         ratio);
  fflush(stdout);
  if (json) {
    char b[32] = "null", r[32] = "null";
    if (!isnan(bound))
      snprintf(b, sizeof b, "%.3f", bound);
    if (!isnan(ratio))
      snprintf(r, sizeof r, "%.4f", ratio);
    fprintf(json, "%s\n  {\"workload\": \"%s\", \"metric\": \"%s\", "
            "\"value\": %.3f, \"unit\": \"%s\", \"bound\": %s, \"ratio\": %s}",
            first_json ? "" : ",", w, metric, value, unit, b, r);
    first_json = 0;
  }
}

static void na(const char *w, const char *why) {
  printf("%-4s %-26s %12s %-8s %12s %7s   (%s)\n", w, "-", "n/a", "-", "-", "-", why);
}

static int selected(const char *w) { return only == NULL || strcmp(only, w) == 0; }

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static double pct(int64_t *v, long n, double p) {
  if (n <= 0)
    return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp64);
  long i = (long)(p / 100.0 * (double)(n - 1) + 0.5);
  return (double)v[i];
}

static void die(const char *what, int rc) {
  fprintf(stderr, "dlock-bench: %s: %s: %s\n", what, dlock_strerror(rc), dlock_errmsg());
  exit(1);
}

/* url as it may be printed: without its password. */
static const char *shown(const char *url) {
  static _Thread_local char buf[160];
  dlock_uri_redact(url, buf, sizeof buf);
  return buf;
}

/* The client options every workload's clients start from. */
static dlock_client_opts client_opts(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  if (direct_opt >= 0)
    o.direct_conns = direct_opt;
  if (spin_opt >= -1)
    o.spin_us = spin_opt;
  return o;
}

static char tls_ca[96]; /* T1: the test CA, for rediss:// URLs */

static dlock_client *open_client(const char *url, int64_t watchdog_ms) {
  dlock_client_opts o = client_opts();
  if (strncmp(url, "rediss", 6) == 0 && tls_ca[0]) /* else the system's */
    o.tls_ca_file = tls_ca;
  if (watchdog_ms)
    o.watchdog_timeout_ms = watchdog_ms;
  dlock_client *c = NULL;
  int rc = dlock_client_open(url, &o, &c);
  if (rc != DLOCK_OK)
    die(shown(url), rc);
  return c;
}

static int port_of(const char *url) { return atoi(strrchr(url, ':') + 1); }

/* ---- shared state (also across fork) -------------------------------------- */

typedef struct shared {
  atomic_int stop;
  atomic_llong released_us;
  atomic_int inside, max_inside;
  atomic_long nsamples;
  atomic_long pairs;
  atomic_long counts[MAX_THREADS];
  atomic_long nrec;
  int64_t samples[MAX_SAMPLES];
  int64_t rec_call[MAX_SAMPLES], rec_got[MAX_SAMPLES];
} shared;

static shared *sh;

static void reset(void) {
  memset(sh, 0, sizeof *sh);
}

static void sample(int64_t v) {
  long i = atomic_fetch_add(&sh->nsamples, 1);
  if (i < MAX_SAMPLES)
    sh->samples[i] = v;
}

static long nsamples(void) {
  long n = atomic_load(&sh->nsamples);
  return n < MAX_SAMPLES ? n : MAX_SAMPLES;
}

typedef void *(*thread_fn)(void *);

/* This process's CPU time (user + system, every thread: the callers', the
 * engine's), microseconds. */
static int64_t cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t last_cpu_us; /* the CPU time of the last run_threads */

/* CPU time per pair of the last run (microseconds; sh->pairs pairs). */
static double cpu_per_pair(void) {
  long n = atomic_load(&sh->pairs);
  return n > 0 ? (double)last_cpu_us / (double)n : 0;
}

/* Run n threads of fn(arg i) for duration seconds (they watch sh->stop). */
static double run_threads(int n, thread_fn fn, void *args, size_t arg_size,
                          double secs) {
  pthread_t t[MAX_THREADS];
  int64_t t0 = now_us(), c0 = cpu_us();
  for (int i = 0; i < n; i++)
    pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * arg_size);
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  nanosleep(&ts, NULL);
  atomic_store(&sh->stop, 1);
  for (int i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  last_cpu_us = cpu_us() - c0;
  return (double)(now_us() - t0) / 1e6;
}

/* ---- raw bound: plain hiredis, the same scripts ---------------------------- */

static redisContext *raw_connect(const char *url) {
  redisContext *c = redisConnect("127.0.0.1", port_of(url));
  if (c == NULL || c->err) {
    fprintf(stderr, "dlock-bench: cannot connect to %s\n", shown(url));
    exit(1);
  }
  for (int i = 0; i < DLOCK__SCRIPT_COUNT; i++)
    freeReplyObject(redisCommand(c, "SCRIPT LOAD %b", dlock__scripts[i].body,
                                 dlock__scripts[i].len));
  return c;
}

static redisReply *raw_eval(redisContext *c, int script, int nkeys,
                            const char **argv, int argc) {
  const char *a[16];
  size_t l[16];
  char nk[8];
  snprintf(nk, sizeof nk, "%d", nkeys);
  a[0] = "EVALSHA";
  a[1] = dlock__scripts[script].sha1;
  a[2] = nk;
  for (int i = 0; i < argc; i++)
    a[3 + i] = argv[i];
  for (int i = 0; i < 3 + argc; i++)
    l[i] = strlen(a[i]);
  return redisCommandArgv(c, 3 + argc, a, l);
}

/* One lock+unlock with the reentrant scripts: two round trips. publish:
 * PUBLISH, or SPUBLISH on a cluster node (as dlock does there). */
static void raw_pair(redisContext *c, const char *name, const char *owner,
                     long seq, const char *publish, int64_t *lock_us) {
  char latch[256];
  static _Thread_local int64_t run; /* latch ids must never repeat */
  if (seq == 0 || run == 0)
    run = now_us();
  snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%lld-%ld", name,
           (long long)run, seq);
  char channel[256];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  const char *acq[] = {name, "30000", owner};
  int64_t t0 = now_us();
  freeReplyObject(raw_eval(c, DLOCK__SCRIPT_LOCK_ACQUIRE, 1, acq, 3));
  if (lock_us)
    *lock_us = now_us() - t0;
  const char *rel[] = {name, latch, "30000", owner, "60000", publish, channel, "0"};
  freeReplyObject(raw_eval(c, DLOCK__SCRIPT_LOCK_RELEASE, 2, rel, 8));
}

typedef struct pair_arg {
  int id;
  int raw;
  dlock_client *client;
  const dlock_tool_cluster *cluster; /* raw: routed by hand over its
                                        masters; NULL: the single server */
  const char *url;                   /* raw on that single server: this
                                        one (NULL: urls[0]) */
} pair_arg;

/* A raw client routed by hand: a connection to every master of k, and for
 * each name the one that serves it (the one that does not answer MOVED). */
static void route_by_hand(const dlock_tool_cluster *k, char names[32][96],
                          redisContext *conns[], redisContext *by_name[32]) {
  for (int i = 0; i < k->n; i++)
    conns[i] = raw_connect(k->node[i].url);
  for (int j = 0; j < 32; j++) {
    by_name[j] = NULL;
    for (int i = 0; i < k->n && by_name[j] == NULL; i++) {
      redisReply *r = redisCommand(conns[i], "EXISTS %s", names[j]);
      if (r && r->type == REDIS_REPLY_INTEGER)
        by_name[j] = conns[i];
      freeReplyObject(r);
    }
    if (by_name[j] == NULL)
      die("a cluster master that serves a name", -1);
  }
}

static void *pair_thread(void *p) {
  pair_arg *a = p;
  char names[32][96];
  dlock_lock *locks[32] = {0};
  redisContext *conns[DLOCK_TOOL_CLUSTER_MAX] = {0}, *by_name[32];
  int nconns = a->cluster ? a->cluster->n : 1;
  for (int i = 0; i < 32; i++)
    snprintf(names[i], sizeof names[i], "bench:pair:%d:%d", a->id, i);
  if (a->raw && a->cluster) {
    route_by_hand(a->cluster, names, conns, by_name);
  } else if (a->raw) {
    conns[0] = raw_connect(a->url ? a->url : urls[0]);
    for (int i = 0; i < 32; i++)
      by_name[i] = conns[0];
  } else
    for (int i = 0; i < 32; i++)
      dlock_reentrant_lock_new(a->client, names[i], NULL, &locks[i]);
  char owner[64];
  snprintf(owner, sizeof owner, "raw-%d:1", a->id);
  for (long k = 0; !atomic_load(&sh->stop); k++) {
    int64_t lat;
    if (a->raw) {
      raw_pair(by_name[k % 32], names[k % 32], owner, k,
               a->cluster ? "SPUBLISH" : "PUBLISH", &lat);
    } else {
      int64_t t0 = now_us();
      int rc = dlock_acquire(locks[k % 32], 0, 30000);
      if (rc != DLOCK_OK) /* held: a bench killed before left it (30 s) */
        die("acquire", rc);
      lat = now_us() - t0;
      dlock_release(locks[k % 32]);
    }
    if (a->id == 0)
      sample(lat);
    atomic_fetch_add(&sh->pairs, 1);
  }
  for (int i = 0; i < nconns; i++)
    if (conns[i])
      redisFree(conns[i]);
  for (int i = 0; i < 32; i++)
    dlock_lock_free(locks[i]);
  return NULL;
}

/* pairs/s and lock p50/p99 for n threads, raw (on cluster's masters,
 * NULL: the single server) or dlock */
static void pairs_on(int n, int raw, const dlock_tool_cluster *cluster,
                     const char *url, dlock_client *c, double *rate,
                     double *p50, double *p99) {
  reset();
  pair_arg args[MAX_THREADS];
  for (int i = 0; i < n; i++)
    args[i] = (pair_arg){i, raw, c, cluster, url};
  double secs = run_threads(n, pair_thread, args, sizeof args[0], duration);
  *rate = (double)atomic_load(&sh->pairs) / secs;
  long ns = nsamples();
  *p50 = pct(sh->samples, ns, 50);
  *p99 = pct(sh->samples, ns, 99);
}

static void pairs_at(int n, int raw, const dlock_tool_cluster *cluster,
                     dlock_client *c, double *rate, double *p50, double *p99) {
  pairs_on(n, raw, cluster, NULL, c, rate, p50, p99);
}

static void pairs(int n, int raw, dlock_client *c, double *rate, double *p50,
                  double *p99) {
  pairs_at(n, raw, NULL, c, rate, p50, p99);
}

/* pairs() and the run's CPU time per pair (*cpu, microseconds) */
static void pairs_cpu(int n, int raw, dlock_client *c, double *rate,
                      double *p50, double *p99, double *cpu) {
  pairs(n, raw, c, rate, p50, p99);
  *cpu = cpu_per_pair();
}

static double w1_p50; /* dlock's single-server lock p50, W5's bound */
static double raw_rtt; /* raw p50 of one script round trip */
static double w1_rate, w2_rate; /* dlock's W1 and W2 pairs/s, for the peers */
static int peers_opt;           /* --peers */

/* ---- the Node.js peers (bench/peers/peers.js) -------------------------------- */

/* Run one peer on one workload; 1 with its figures, 0 with *why set. */
static int run_peer(const char *peer, const char *w, double *rate, double *p50,
                    char *why, size_t whylen) {
  const char *dir = getenv("DLOCK_PEERS_DIR");
  if (dir == NULL)
    dir = DLOCK_PEERS_DIR;
  const char *port = strrchr(urls[0], ':');
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "node '%s/peers.js' %s %s %s %.3f 2>&1", dir,
           port ? port + 1 : "6379", peer, w, duration);
  FILE *f = popen(cmd, "r");
  char line[1024] = "";
  if (f == NULL || fgets(line, sizeof line, f) == NULL)
    line[0] = '\0';
  int status = f ? pclose(f) : -1;
  const char *r = strstr(line, "\"pairs_per_s\":");
  const char *l = strstr(line, "\"lock_p50_us\":");
  if (status != 0 || r == NULL || l == NULL) {
    line[strcspn(line, "\n")] = '\0';
    snprintf(why, whylen, "%s", line[0] ? line : "node did not answer");
    return 0;
  }
  *rate = atof(r + strlen("\"pairs_per_s\":"));
  *p50 = atof(l + strlen("\"lock_p50_us\":"));
  return 1;
}

/* dlock's W1/W2 figures beside node-redlock's, redis-semaphore's and
 * node-redisson's on the same server: value = dlock's, bound = the peer's,
 * ratio = dlock / peer (for p50, lower is better). */
static void peers(void) {
  if (system("node --version >/dev/null 2>&1") != 0) {
    printf("(peers: Node.js not found; install nodejs and run `npm ci` in "
           "bench/peers to compare)\n");
    return;
  }
  static const char *const names[] = {"node-redlock", "redis-semaphore",
                                      "node-redisson"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char metric[64], why[256];
    double rate, p50;
    if (selected("W1")) {
      if (run_peer(names[i], "W1", &rate, &p50, why, sizeof why)) {
        snprintf(metric, sizeof metric, "pairs/s vs %s", names[i]);
        emit("W1", metric, w1_rate, "1/s", rate);
        snprintf(metric, sizeof metric, "lock p50 vs %s", names[i]);
        emit("W1", metric, w1_p50, "us", p50);
      } else {
        na("W1", why);
      }
    }
    if (selected("W2")) {
      if (run_peer(names[i], "W2", &rate, &p50, why, sizeof why)) {
        snprintf(metric, sizeof metric, "pairs/s vs %s", names[i]);
        emit("W2", metric, w2_rate, "1/s", rate);
      } else {
        na("W2", why);
      }
    }
  }
}

static void w1_w2(void) {
  dlock_client *c = open_client(urls[0], 0);
  double rr, rp50, rp99, dr, dp50, dp99, rcpu, dcpu;
  pairs_cpu(1, 1, NULL, &rr, &rp50, &rp99, &rcpu);
  pairs_cpu(1, 0, c, &dr, &dp50, &dp99, &dcpu);
  raw_rtt = rp50;
  w1_p50 = dp50;
  w1_rate = dr;
  if (selected("W1")) {
    emit("W1", "pairs/s", dr, "1/s", rr);
    emit("W1", "lock p50", dp50, "us", rp50);
    emit("W1", "lock p99", dp99, "us", rp99);
    emit("W1", "CPU per pair", dcpu, "us", rcpu);
  }
  if (selected("W2")) {
    int n = threads_opt;
    pairs_cpu(n, 1, NULL, &rr, &rp50, &rp99, &rcpu);
    pairs_cpu(n, 0, c, &dr, &dp50, &dp99, &dcpu);
    emit("W2", "pairs/s", dr, "1/s", rr);
    emit("W2", "CPU per pair", dcpu, "us", rcpu);
    w2_rate = dr;
  }
  dlock_client_close(c);
  if (peers_opt)
    peers();
}

/* ---- W3, W3p, W6: hand-off on one lock ------------------------------------ */

typedef struct handoff_arg {
  int id;
  dlock_lock *lock;
  int record; /* keep (call, got) for the FIFO check */
} handoff_arg;

static void spin_us(int64_t us) {
  int64_t end = now_us() + us;
  while (now_us() < end)
    ;
}

static void *handoff_thread(void *p) {
  handoff_arg *a = p;
  while (!atomic_load(&sh->stop)) {
    int64_t call = now_us();
    if (dlock_acquire(a->lock, 10000, 30000) != DLOCK_OK)
      continue;
    int64_t got = now_us();
    long long rel = atomic_load(&sh->released_us);
    if (rel > call) /* we were waiting when it was released */
      sample(got > rel ? got - rel : 0);
    if (a->record) {
      long i = atomic_fetch_add(&sh->nrec, 1);
      if (i < MAX_SAMPLES) {
        sh->rec_call[i] = call;
        sh->rec_got[i] = got;
      }
    }
    atomic_fetch_add(&sh->counts[a->id], 1);
    spin_us(1000); /* hold 1 ms */
    dlock_release(a->lock);
    atomic_store(&sh->released_us, now_us());
    usleep(1000); /* 1 ms outside */
  }
  return NULL;
}

static void handoff_report(const char *w, double secs, int nthreads) {
  long total = 0;
  double sum2 = 0;
  for (int i = 0; i < nthreads; i++) {
    long x = atomic_load(&sh->counts[i]);
    total += x;
    sum2 += (double)x * (double)x;
  }
  long ns = nsamples();
  double p50 = pct(sh->samples, ns, 50), p99 = pct(sh->samples, ns, 99);
  double max = ns ? (double)sh->samples[ns - 1] : NAN;
  double ceiling = 1e6 / (1000.0 + raw_rtt * 2); /* hold + release + acquire */
  emit(w, "acquisitions/s", (double)total / secs, "1/s", ceiling);
  emit(w, "hand-off p50", p50, "us", raw_rtt);
  emit(w, "hand-off p99", p99, "us", raw_rtt);
  emit(w, "hand-off max", max, "us", raw_rtt);
  emit(w, "Jain fairness", sum2 > 0 ? (double)total * total / (nthreads * sum2) : 0,
       "index", 1.0);
}

/* 8 threads taking turns on lock name on url (1 ms holds): the hand-off
 * p50, and W3's whole report when report_as is given. */
static double handoff_run(const char *url, const char *name,
                          const char *report_as) {
  dlock_client *c = open_client(url, 0);
  dlock_lock *l;
  dlock_reentrant_lock_new(c, name, NULL, &l);
  reset();
  handoff_arg args[8];
  for (int i = 0; i < 8; i++)
    args[i] = (handoff_arg){i, l, 0};
  double secs = run_threads(8, handoff_thread, args, sizeof args[0], duration);
  if (report_as)
    handoff_report(report_as, secs, 8);
  double p50 = pct(sh->samples, nsamples(), 50);
  dlock_lock_free(l);
  dlock_client_close(c);
  return p50;
}

static double w3_p50; /* W10's bound */

static void w3(void) { w3_p50 = handoff_run(urls[0], "bench:w3", "W3"); }

/* W3p forks its workers, so it runs before this process starts any thread
 * (forking a threaded process is fragile, and ThreadSanitizer refuses it);
 * its figures are kept and printed in order, once the raw bound is known. */
static shared *w3p_result;
static double w3p_secs;

static void w3p(void) {
  reset();
  pid_t pids[4];
  int64_t t0 = now_us();
  for (int p = 0; p < 4; p++) {
    pids[p] = fork();
    if (pids[p] == 0) {
      dlock_client *c = open_client(urls[0], 0);
      dlock_lock *l;
      dlock_reentrant_lock_new(c, "bench:w3p", NULL, &l);
      handoff_arg args[2] = {{2 * p, l, 0}, {2 * p + 1, l, 0}};
      pthread_t t[2];
      for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, handoff_thread, &args[i]);
      for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
      dlock_lock_free(l);
      dlock_client_close(c);
      _exit(0);
    }
  }
  usleep((useconds_t)(duration * 1e6));
  atomic_store(&sh->stop, 1);
  for (int p = 0; p < 4; p++)
    waitpid(pids[p], NULL, 0);
  w3p_secs = (double)(now_us() - t0) / 1e6;
  w3p_result = malloc(sizeof *sh);
  if (w3p_result)
    memcpy(w3p_result, sh, sizeof *sh);
}

static void w3p_report(void) {
  if (w3p_result == NULL)
    return;
  memcpy(sh, w3p_result, sizeof *sh);
  free(w3p_result);
  handoff_report("W3p", w3p_secs, 8);
}

static void w6(void) {
  dlock_client *c = open_client(urls[0], 0);
  dlock_lock *l;
  dlock_fair_lock_new(c, "bench:w6", NULL, &l);
  reset();
  handoff_arg args[16];
  for (int i = 0; i < 16; i++)
    args[i] = (handoff_arg){i, l, 1};
  run_threads(16, handoff_thread, args, sizeof args[0], duration);
  /* A FIFO violation: X got the lock before Y although Y had asked more than
   * 5 ms earlier (time enough to join the queue) and was still waiting. The
   * margin covers the call's way to the server: on two busy cores its tail
   * passes 2 ms (a 2 ms margin counted 0-24 "violations" per run, 5 ms and
   * 10 ms none; the torture checker, which reads the queue itself, finds
   * none either). */
  long n = atomic_load(&sh->nrec), violations = 0;
  if (n > MAX_SAMPLES)
    n = MAX_SAMPLES;
  for (long x = 0; x < n; x++)
    for (long y = 0; y < n; y++)
      if (sh->rec_call[y] + 5000 < sh->rec_call[x] && sh->rec_got[y] > sh->rec_got[x])
        violations++;
  long ns = nsamples();
  emit("W6", "FIFO violations", (double)violations, "count", 0);
  emit("W6", "hand-off p50", pct(sh->samples, ns, 50), "us", raw_rtt);
  emit("W6", "hand-off p99", pct(sh->samples, ns, 99), "us", raw_rtt);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* ---- W4: 10,000 holds under the watchdog ---------------------------------- */

static long long evalsha_calls(redisContext *c) {
  redisReply *r = redisCommand(c, "INFO commandstats");
  const char *p = r && r->type == REDIS_REPLY_STRING
                      ? strstr(r->str, "cmdstat_evalsha:calls=")
                      : NULL;
  long long v = p ? atoll(p + strlen("cmdstat_evalsha:calls=")) : -1;
  freeReplyObject(r);
  return v;
}

#define W4_LOCKS 10000

typedef struct w4_arg {
  dlock_lock **locks;
  int from, to;
} w4_arg;

static void *w4_acquire(void *p) {
  w4_arg *a = p;
  for (int i = a->from; i < a->to; i++)
    if (dlock_acquire(a->locks[i], 0, DLOCK_LEASE_WATCHDOG) != DLOCK_OK)
      die("W4 acquire", -1);
  return NULL;
}

static void *w4_release(void *p) {
  w4_arg *a = p;
  for (int i = a->from; i < a->to; i++)
    dlock_release(a->locks[i]);
  return NULL;
}

static void w4(void) {
  double secs = w4_secs;
  dlock_client *c = open_client(urls[0], 3000);
  dlock_lock **locks = calloc(W4_LOCKS, sizeof *locks);
  uint64_t owner = dlock_owner_id_new();
  for (int i = 0; i < W4_LOCKS; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:w4:%d", i);
    dlock_reentrant_lock_new(c, name, NULL, &locks[i]);
    dlock_lock_bind_owner(locks[i], owner); /* taken by 16 threads, one owner */
  }
  pthread_t t[16];
  w4_arg args[16];
  for (int i = 0; i < 16; i++) {
    args[i] = (w4_arg){locks, i * W4_LOCKS / 16, (i + 1) * W4_LOCKS / 16};
    pthread_create(&t[i], NULL, w4_acquire, &args[i]);
  }
  for (int i = 0; i < 16; i++)
    pthread_join(t[i], NULL);
  redisContext *rc = raw_connect(urls[0]);
  long long calls0 = evalsha_calls(rc);
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  int64_t t0 = now_us();
  usleep((useconds_t)(secs * 1e6));
  double el = (double)(now_us() - t0) / 1e6;
  long long calls = evalsha_calls(rc) - calls0; /* only renewals ran */
  getrusage(RUSAGE_SELF, &ru1);
  double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec +
                        ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
               (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec +
                        ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
  long held = 0;
  for (int i = 0; i < W4_LOCKS; i++)
    redisAppendCommand(rc, "EXISTS bench:w4:%d", i);
  for (int i = 0; i < W4_LOCKS; i++) {
    redisReply *r = NULL;
    if (redisGetReply(rc, (void **)&r) == REDIS_OK && r)
      held += r->integer == 1;
    freeReplyObject(r);
  }
  double ticks = el / 1.0; /* watchdog 3 s: a tick every second */
  emit("W4", "renewal calls/s", (double)calls / el, "1/s", W4_LOCKS / 100.0);
  emit("W4", "calls/100 locks/tick", (double)calls / ticks / (W4_LOCKS / 100.0),
       "calls", 1.0);
  emit("W4", "client CPU", 100.0 * cpu / el, "%", NAN);
  emit("W4", "locks still held", (double)held, "locks", W4_LOCKS);
  for (int i = 0; i < 16; i++)
    pthread_create(&t[i], NULL, w4_release, &args[i]);
  for (int i = 0; i < 16; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < W4_LOCKS; i++)
    dlock_lock_free(locks[i]);
  free(locks);
  redisFree(rc);
  dlock_client_close(c);
}

/* ---- W5: RedLock over 5 servers ------------------------------------------- */

typedef struct rl_arg {
  int id;
  dlock_lock *rl[32];
  dlock_lock *members[32][5];
} rl_arg;

static void *rl_thread(void *p) {
  rl_arg *a = p;
  for (long k = 0; !atomic_load(&sh->stop); k++) {
    int64_t t0 = now_us();
    if (dlock_acquire(a->rl[k % 32], 0, 30000) != DLOCK_OK)
      continue;
    if (a->id == 0)
      sample(now_us() - t0);
    dlock_release(a->rl[k % 32]);
    atomic_fetch_add(&sh->pairs, 1);
  }
  return NULL;
}

/* W5's raw bound: one thread asks 5 servers at once over plain hiredis
 * (same acquire script) and stops at the third answer, like a RedLock round
 * with no engine at all: the floor of "a majority of 5" on this machine. */
static double raw_majority_p50(void) {
  redisContext *c[5];
  for (int i = 0; i < 5; i++)
    c[i] = raw_connect(urls[i]);
  reset();
  int64_t end = now_us() + (int64_t)(duration * 1e6);
  for (long k = 0; now_us() < end; k++) {
    char name[64], latch[160];
    snprintf(name, sizeof name, "bench:w5raw:%ld", k % 32);
    snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%ld", name, k);
    const char *acq[] = {"EVALSHA", dlock__scripts[DLOCK__SCRIPT_LOCK_ACQUIRE].sha1,
                         "1", name, "30000", "raw-w5:1"};
    size_t al[6];
    for (int a = 0; a < 6; a++)
      al[a] = strlen(acq[a]);
    int64_t t0 = now_us();
    for (int i = 0; i < 5; i++) {
      int done = 0;
      redisAppendCommandArgv(c[i], 6, acq, al);
      while (!done && redisBufferWrite(c[i], &done) == REDIS_OK) {
      }
    }
    int got = 0, have[5] = {0};
    while (got < 3) {
      struct pollfd pf[5];
      for (int i = 0; i < 5; i++)
        pf[i] = (struct pollfd){.fd = c[i]->fd, .events = POLLIN};
      if (poll(pf, 5, 1000) <= 0)
        die("raw majority: no answer", -1);
      for (int i = 0; i < 5; i++) {
        void *r = NULL;
        if (have[i] || !(pf[i].revents & POLLIN) ||
            redisBufferRead(c[i]) != REDIS_OK ||
            redisGetReplyFromReader(c[i], &r) != REDIS_OK || r == NULL)
          continue;
        freeReplyObject(r);
        have[i] = 1;
        got++;
      }
    }
    sample(now_us() - t0);
    for (int i = 0; i < 5; i++) { /* not timed: the rest, and the release */
      void *r = NULL;
      if (!have[i] && redisGetReply(c[i], &r) == REDIS_OK)
        freeReplyObject(r);
      const char *rel[] = {name, latch, "30000", "raw-w5:1", "60000", "PUBLISH",
                           "bench:w5raw", "0"};
      freeReplyObject(raw_eval(c[i], DLOCK__SCRIPT_LOCK_RELEASE, 2, rel, 8));
    }
  }
  double p50 = pct(sh->samples, nsamples(), 50);
  for (int i = 0; i < 5; i++)
    redisFree(c[i]);
  return p50;
}

/* n threads on a RedLock over clients c[0..4]: pairs/s and lock p50 */
static void w5_run(dlock_client **c, int n, double *rate, double *p50) {
  rl_arg *args = calloc((size_t)n, sizeof *args);
  if (args == NULL)
    die("out of memory", -1);
  for (int i = 0; i < n; i++) {
    args[i].id = i;
    for (int k = 0; k < 32; k++) {
      dlock_lock **m = args[i].members[k];
      char name[64];
      snprintf(name, sizeof name, "bench:w5:%d:%d", i, k);
      for (int s = 0; s < 5; s++)
        dlock_reentrant_lock_new(c[s], name, NULL, &m[s]);
      int rc = dlock_redlock_new(m, 5, NULL, &args[i].rl[k]);
      if (rc != DLOCK_OK)
        die("redlock", rc);
    }
  }
  reset();
  double secs = run_threads(n, rl_thread, args, sizeof *args, duration);
  *rate = (double)atomic_load(&sh->pairs) / secs;
  *p50 = pct(sh->samples, nsamples(), 50);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 32; k++) {
      dlock_lock_free(args[i].rl[k]);
      for (int s = 0; s < 5; s++)
        dlock_lock_free(args[i].members[k][s]);
    }
  free(args);
}

/* Five clients, one per server: on one engine thread (share_engine, what
 * docs/redlock.md recommends) or each on its own. */
static void w5_clients(dlock_client **c, int one_engine) {
  for (int i = 0; i < 5; i++) {
    dlock_client_opts o = client_opts();
    o.share_engine = one_engine && i > 0 ? c[0] : NULL;
    c[i] = NULL;
    int rc = dlock_client_open(urls[i], &o, &c[i]);
    if (rc != DLOCK_OK)
      die(urls[i], rc);
  }
}

static void w5(void) {
  if (nurls < 5) {
    na("W5", "needs 5 servers: run without --url");
    return;
  }
  dlock_client *c[5], *own[5];
  w5_clients(c, 1);
  w5_clients(own, 0);
  double rate, p50, own_rate, own_p50;
  w5_run(c, 1, &rate, &p50);
  emit("W5", "1-thread pairs/s", rate, "1/s", NAN);
  emit("W5", "1-thread lock p50", p50, "us", w1_p50);
  /* the same against the floor: how far the raw majority-of-5 already is
   * from one server's raw round trip, and dlock from that */
  double raw5 = raw_majority_p50();
  emit("W5", "raw majority-of-5 p50", raw5, "us", raw_rtt);
  emit("W5", "1-thread lock p50 vs raw", p50, "us", raw5);
  w5_run(own, 1, &own_rate, &own_p50);
  emit("W5", "1-thread lock p50, engine per member", own_p50, "us", w1_p50);
  w5_run(c, 16, &rate, &p50);
  emit("W5", "16-thread pairs/s", rate, "1/s", NAN);
  w5_run(own, 16, &own_rate, &own_p50);
  emit("W5", "16-thread pairs/s, engine per member", own_rate, "1/s", NAN);
  for (int i = 4; i >= 0; i--) {
    dlock_client_close(c[i]);
    dlock_client_close(own[i]);
  }
}

/* ---- W7: read-write lock, 90 % reads -------------------------------------- */

typedef struct mix_arg {
  int id;
  dlock_rwlock *rw;  /* NULL: use lock for both */
  dlock_lock *lock;
} mix_arg;

static void *mix_thread(void *p) {
  mix_arg *a = p;
  unsigned seed = (unsigned)a->id * 2654435761u;
  while (!atomic_load(&sh->stop)) {
    int write = rand_r(&seed) % 10 == 0;
    dlock_lock *l = a->rw ? (write ? dlock_rwlock_write(a->rw) : dlock_rwlock_read(a->rw))
                          : a->lock;
    if (dlock_acquire(l, 10000, 30000) != DLOCK_OK)
      continue;
    usleep(1000); /* 1 ms inside: a sleep, so 16 threads do not need 16 cores */
    dlock_release(l);
    atomic_fetch_add(&sh->pairs, 1);
  }
  return NULL;
}

static void w7(void) {
  dlock_client *c = open_client(urls[0], 0);
  dlock_rwlock *rw;
  dlock_lock *plain;
  dlock_rwlock_new(c, "bench:w7:rw", NULL, &rw);
  dlock_reentrant_lock_new(c, "bench:w7:plain", NULL, &plain);
  mix_arg args[16];
  double rate[2];
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 16; i++)
      args[i] = (mix_arg){i, k == 0 ? rw : NULL, plain};
    reset();
    double secs = run_threads(16, mix_thread, args, sizeof args[0], duration);
    rate[k] = (double)atomic_load(&sh->pairs) / secs;
  }
  emit("W7", "ops/s (rwlock)", rate[0], "1/s", rate[1]);
  dlock_rwlock_free(rw);
  dlock_lock_free(plain);
  dlock_client_close(c);
}

/* ---- W8: semaphore, 4 permits ---------------------------------------------- */

#define W8_HOLD_US 200 /* each pair holds its permit this long */

typedef struct sem_arg {
  int id, raw;
  dlock_semaphore *sem;
} sem_arg;

static void *sem_thread(void *p) {
  sem_arg *a = p;
  redisContext *c = a->raw ? raw_connect(urls[0]) : NULL;
  const char *name = a->raw ? "bench:w8:raw" : "bench:w8";
  while (!atomic_load(&sh->stop)) {
    if (a->raw) {
      const char *acq[] = {name, "1"};
      redisReply *r = raw_eval(c, DLOCK__SCRIPT_SEM_TRY_ACQUIRE, 1, acq, 2);
      int ok = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
      freeReplyObject(r);
      if (!ok)
        continue;
    } else if (dlock_semaphore_acquire(a->sem, 1, 10000) != DLOCK_OK) {
      continue;
    }
    int in = atomic_fetch_add(&sh->inside, 1) + 1;
    int max = atomic_load(&sh->max_inside);
    while (in > max && !atomic_compare_exchange_weak(&sh->max_inside, &max, in))
      ;
    /* the permit is used: held W8_HOLD_US (asleep, so the CPU figure is
     * the calls'), which puts 4 holders inside at once */
    struct timespec hold = {0, W8_HOLD_US * 1000};
    nanosleep(&hold, NULL);
    atomic_fetch_sub(&sh->inside, 1);
    if (a->raw) {
      const char *rel[] = {name, "1", "PUBLISH", "redisson_sc:{bench:w8:raw}"};
      freeReplyObject(raw_eval(c, DLOCK__SCRIPT_SEM_RELEASE, 1, rel, 4));
    } else {
      dlock_semaphore_release(a->sem, 1);
    }
    atomic_fetch_add(&sh->pairs, 1);
  }
  if (c)
    redisFree(c);
  return NULL;
}

static void w8(void) {
  dlock_client *c = open_client(urls[0], 0);
  dlock_semaphore *sem;
  dlock_semaphore_new(c, "bench:w8", NULL, &sem);
  redisContext *rc = raw_connect(urls[0]);
  freeReplyObject(redisCommand(rc, "SET bench:w8 4"));
  freeReplyObject(redisCommand(rc, "SET bench:w8:raw 4"));
  redisFree(rc);
  sem_arg args[16];
  double rate[2], cpu[2];
  int max_inside[2] = {0, 0};
  for (int raw = 1; raw >= 0; raw--) {
    for (int i = 0; i < 16; i++)
      args[i] = (sem_arg){i, raw, sem};
    reset();
    double secs = run_threads(16, sem_thread, args, sizeof args[0], duration);
    rate[raw] = (double)atomic_load(&sh->pairs) / secs;
    cpu[raw] = cpu_per_pair();
    max_inside[raw] = atomic_load(&sh->max_inside);
  }
  emit("W8", "pairs/s", rate[0], "1/s", rate[1]);
  emit("W8", "max concurrent holders", max_inside[0], "holders", 4);
  emit("W8", "raw max concurrent holders", max_inside[1], "holders", 4);
  emit("W8", "CPU per pair", cpu[0], "us", cpu[1]);
  dlock_semaphore_free(sem);
  dlock_client_close(c);
}

/* ---- M1: memory ------------------------------------------------------------ */

static size_t heap_used(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

typedef struct m1_waiter {
  dlock_lock *lock;
  atomic_int *started;
} m1_waiter;

static void *m1_wait(void *p) {
  m1_waiter *w = p;
  atomic_fetch_add(w->started, 1);
  if (dlock_acquire(w->lock, 60000, 30000) == DLOCK_OK)
    dlock_release(w->lock);
  return NULL;
}

static void m1(void) {
  dlock_client *c = open_client(urls[0], 0);
  enum { HELD = 10000, WAITERS = 1000 };
  dlock_lock **locks = calloc(HELD, sizeof *locks);
  size_t before = heap_used();
  for (int i = 0; i < HELD; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:m1:%d", i);
    dlock_reentrant_lock_new(c, name, NULL, &locks[i]);
    dlock_acquire(locks[i], 0, DLOCK_LEASE_WATCHDOG);
  }
  size_t after = heap_used();
  emit("M1", "bytes per held lock", (double)(after - before) / HELD, "B", 512);
  for (int i = 0; i < HELD; i++) {
    dlock_release(locks[i]);
    dlock_lock_free(locks[i]);
  }
  free(locks);

  /* waiters: threads blocked on one held lock, each with a small stack */
  dlock_lock *held, *shared_lock;
  dlock_reentrant_lock_new(c, "bench:m1:waited", NULL, &held);
  dlock_reentrant_lock_new(c, "bench:m1:waited", NULL, &shared_lock);
  dlock_acquire(held, 0, 60000);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 128 * 1024);
  pthread_t *t = calloc(WAITERS, sizeof *t);
  atomic_int started = 0;
  m1_waiter w = {shared_lock, &started};
  before = heap_used();
  for (int i = 0; i < WAITERS; i++)
    pthread_create(&t[i], &attr, m1_wait, &w);
  while (atomic_load(&started) < WAITERS)
    usleep(1000);
  usleep(500 * 1000); /* let every waiter reach its wait */
  after = heap_used();
  emit("M1", "bytes per waiter", (double)(after - before) / WAITERS, "B", 2048);
  dlock_release(held);
  for (int i = 0; i < WAITERS; i++)
    pthread_join(t[i], NULL);
  free(t);
  dlock_lock_free(held);
  dlock_lock_free(shared_lock);
  dlock_client_close(c);
}

/* ---- W9, W10: the non-blocking API ------------------------------------------ */

/* W9: 1,000 acquire/release loops on distinct locks, all run by one
 * application thread: each completion starts the loop's next call. With
 * queue completions the callbacks run on this thread, in a poll loop on
 * the client's completion descriptor (what an event-loop program does);
 * with engine completions, on the engine thread. */
enum { W9_LOOPS = 1000 };

typedef struct w9_loop {
  dlock_lock *lock;
  uint64_t owner;
} w9_loop;

static atomic_int w9_stop, w9_running, w9_errors;
static atomic_long w9_pairs;

static void w9_acquired(void *data, const dlock_result *r);

static void w9_next(w9_loop *lp) {
  if (atomic_load(&w9_stop) ||
      dlock_acquire_async(lp->lock, lp->owner, 10000, 30000, w9_acquired, lp,
                          NULL) != DLOCK_OK)
    atomic_fetch_sub(&w9_running, 1);
}

static void w9_released(void *data, const dlock_result *r) {
  if (r->rc != DLOCK_OK)
    atomic_fetch_add(&w9_errors, 1);
  else
    atomic_fetch_add(&w9_pairs, 1);
  w9_next(data);
}

static void w9_acquired(void *data, const dlock_result *r) {
  w9_loop *lp = data;
  if (r->rc != DLOCK_OK) {
    atomic_fetch_add(&w9_errors, 1);
    w9_next(lp);
    return;
  }
  if (dlock_release_async(lp->lock, lp->owner, w9_released, lp, NULL) != DLOCK_OK) {
    atomic_fetch_add(&w9_errors, 1);
    atomic_fetch_sub(&w9_running, 1);
  }
}

static double w9_run(int completions) {
  dlock_client_opts o = client_opts();
  o.completions = completions;
  dlock_client *c = NULL;
  int rc = dlock_client_open(urls[0], &o, &c);
  if (rc != DLOCK_OK)
    die(shown(urls[0]), rc);
  w9_loop *loops = calloc(W9_LOOPS, sizeof *loops);
  for (int i = 0; i < W9_LOOPS; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:w9:%d", i);
    dlock_reentrant_lock_new(c, name, NULL, &loops[i].lock);
    loops[i].owner = dlock_owner_id_new();
  }
  atomic_store(&w9_stop, 0);
  atomic_store(&w9_pairs, 0);
  atomic_store(&w9_errors, 0);
  atomic_store(&w9_running, W9_LOOPS);
  int64_t t0 = now_us(), end = t0 + (int64_t)(duration * 1e6);
  for (int i = 0; i < W9_LOOPS; i++)
    w9_next(&loops[i]);
  int fd = completions == DLOCK_COMPLETE_QUEUE ? dlock_client_completion_fd(c) : -1;
  while (atomic_load(&w9_running) > 0) {
    if (now_us() >= end)
      atomic_store(&w9_stop, 1);
    if (fd >= 0) {
      struct pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, 50) == 1)
        dlock_client_run_completions(c, 0);
    } else {
      usleep(10000);
    }
    if (now_us() > end + 10000000)
      break; /* loops that never came back: reported as errors */
  }
  long pairs = atomic_load(&w9_pairs);
  double secs = (double)(now_us() - t0) / 1e6;
  if (atomic_load(&w9_errors) || atomic_load(&w9_running))
    fprintf(stderr, "W9: %d errors, %d loops unfinished\n",
            atomic_load(&w9_errors), atomic_load(&w9_running));
  dlock_client_close(c); /* the rest complete (ECLOSED) here */
  for (int i = 0; i < W9_LOOPS; i++)
    dlock_lock_free(loops[i].lock);
  free(loops);
  return (double)pairs / secs;
}

static void w9(void) {
  if (w2_rate <= 0) { /* the bound, in the same run */
    dlock_client *c = open_client(urls[0], 0);
    double p50, p99;
    pairs(threads_opt, 0, c, &w2_rate, &p50, &p99);
    dlock_client_close(c);
  }
  double bound = w2_rate * 1.5, rate = w9_run(DLOCK_COMPLETE_QUEUE);
  emit("W9", "pairs/s (1.5x W2)", rate, "1/s", bound);
  emit("W9", "pairs/s, engine callbacks", w9_run(DLOCK_COMPLETE_ENGINE), "1/s",
       bound);
  if (!peers_opt || system("node --version >/dev/null 2>&1") != 0)
    return;
  /* and 1.5x the best Node peer at 16 tasks (its W2), in the same run */
  static const char *const names[] = {"node-redlock", "redis-semaphore",
                                      "node-redisson"};
  double best = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char why[256];
    double r, p50;
    if (run_peer(names[i], "W2", &r, &p50, why, sizeof why) && r > best)
      best = r;
  }
  if (best > 0)
    emit("W9", "pairs/s (1.5x best peer)", rate, "1/s", best * 1.5);
  else
    na("W9", "no Node peer answered");
}

/* W10: 10,000 async waiters on one lock, all started and served by one
 * application thread (queue completions, a poll loop): the client heap
 * each adds, no thread each, and W3's hand-off: each holder holds 1 ms,
 * and the hand-off runs from its release's completion to the next
 * waiter's grant's completion. */
enum { W10_WAITERS = 10000 };

static dlock_lock *w10_lock;
static uint64_t *w10_owner;
static atomic_int w10_done, w10_errors;

static void w10_released(void *data, const dlock_result *r) {
  if (r->rc != DLOCK_OK)
    atomic_fetch_add(&w10_errors, 1);
  atomic_store(&sh->released_us, now_us());
}

static void w10_granted(void *data, const dlock_result *r) {
  atomic_fetch_add(&w10_done, 1);
  if (r->rc != DLOCK_OK) {
    if (r->rc != DLOCK_ECANCELED)
      atomic_fetch_add(&w10_errors, 1);
    return;
  }
  long long rel = atomic_load(&sh->released_us);
  if (rel > 0) {
    int64_t got = now_us();
    sample(got > rel ? got - rel : 0);
  }
  spin_us(1000); /* hold 1 ms, as W3 */
  if (dlock_release_async(w10_lock, w10_owner[(intptr_t)data], w10_released,
                          NULL, NULL) != DLOCK_OK)
    atomic_fetch_add(&w10_errors, 1);
}

/* Run c's completions as they come, until until_us. */
static void w10_serve(dlock_client *c, int64_t until_us) {
  int fd = dlock_client_completion_fd(c);
  while (now_us() < until_us) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10) == 1)
      dlock_client_run_completions(c, 0);
  }
}

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

static void w10(void) {
  if (w3_p50 <= 0) /* the bound, in the same run */
    w3_p50 = handoff_run(urls[0], "bench:w3", NULL);
  dlock_client_opts o = client_opts();
  o.completions = DLOCK_COMPLETE_QUEUE;
  dlock_client *c = NULL, *hc = open_client(urls[0], 0);
  int rc = dlock_client_open(urls[0], &o, &c);
  if (rc != DLOCK_OK)
    die(shown(urls[0]), rc);
  dlock_lock *holder;
  dlock_reentrant_lock_new(c, "bench:w10", NULL, &w10_lock);
  dlock_reentrant_lock_new(hc, "bench:w10", NULL, &holder);
  if (dlock_acquire(holder, 0, 60000) != DLOCK_OK)
    die("W10 holder", DLOCK_EBUSY);
  w10_owner = calloc(W10_WAITERS, sizeof *w10_owner);
  dlock_op *ops = calloc(W10_WAITERS, sizeof *ops);
  for (int i = 0; i < W10_WAITERS; i++)
    w10_owner[i] = dlock_owner_id_new();
  reset();
  atomic_store(&w10_done, 0);
  atomic_store(&w10_errors, 0);
  int threads = thread_count();
  dlock_stats st = {.version = DLOCK_STATS_VERSION};
  dlock_client_stats(c, &st);
  uint64_t commands0 = st.commands;
  size_t before = heap_used();
  for (int i = 0; i < W10_WAITERS; i++)
    if (dlock_acquire_async(w10_lock, w10_owner[i], DLOCK_WAIT_FOREVER, 30000,
                            w10_granted, (void *)(intptr_t)i, &ops[i]) != DLOCK_OK)
      die("W10 acquire", DLOCK_EIO);
  /* every waiter's first try answered: all of them wait */
  int64_t until = now_us() + 30000000;
  do {
    usleep(20000);
    dlock_client_stats(c, &st);
  } while ((st.commands - commands0 < W10_WAITERS || st.in_flight > 0) &&
           now_us() < until);
  size_t after = heap_used();
  int added = thread_count() - threads;
  emit("W10", "bytes per waiter", (double)(after - before) / W10_WAITERS, "B",
       1024);
  emit("W10", "threads added", added, "", NAN);
  dlock_release(holder);
  atomic_store(&sh->released_us, now_us());
  w10_serve(c, now_us() + (int64_t)(duration * 1e6));
  int granted = atomic_load(&w10_done);
  for (int i = 0; i < W10_WAITERS; i++)
    dlock_cancel(ops[i]); /* the rest: too late for some, fine */
  until = now_us() + 30000000;
  while (atomic_load(&w10_done) < W10_WAITERS && now_us() < until)
    w10_serve(c, now_us() + 10000);
  double p50 = pct(sh->samples, nsamples(), 50);
  emit("W10", "hand-offs", granted, "", NAN);
  emit("W10", "hand-off p50 (1.2x W3)", p50, "us",
       w3_p50 > 0 ? w3_p50 * 1.2 : NAN);
  if (atomic_load(&w10_errors) || atomic_load(&w10_done) < W10_WAITERS)
    fprintf(stderr, "W10: %d errors, %d of %d completed\n",
            atomic_load(&w10_errors), atomic_load(&w10_done), W10_WAITERS);
  dlock_client_close(c);
  dlock_lock_free(w10_lock);
  dlock_lock_free(holder);
  dlock_client_close(hc);
  free(w10_owner);
  free(ops);
}

/* ---- C1: W1 and W3 on a Redis Cluster, beside one server ----------------------
 * A throwaway cluster of 3 masters on this machine; each figure's bound is
 * the same workload on the single server, in the same run. */

static void c1(void) {
  dlock_tool_cluster k;
  if (dlock_tool_cluster_start(&k, 3, 0) != 0) {
    na("C1", "no cluster (redis-server and redis-cli are needed)");
    return;
  }
  dlock_client *one = open_client(urls[0], 0), *cl = open_client(k.url, 0);
  double r1, p1, q1, rc, pc, qc, rr1, rp1, rq1, rrc, rpc, rqc;
  pairs(1, 0, one, &r1, &p1, &q1);
  pairs(1, 0, cl, &rc, &pc, &qc);
  /* the raw bound on both: what the servers themselves cost (on a small
   * machine, names spread over three server processes cost more than on
   * one), against which dlock's routing is measured */
  pairs_at(1, 1, NULL, NULL, &rr1, &rp1, &rq1);
  pairs_at(1, 1, &k, NULL, &rrc, &rpc, &rqc);
  emit("C1", "W1 pairs/s on a cluster", rc, "1/s", r1);
  emit("C1", "W1 lock p50 on a cluster", pc, "us", p1);
  emit("C1", "raw W1 pairs/s, cluster vs one", rrc, "1/s", rr1);
  emit("C1", "W1 pairs/s on a cluster vs raw", rc, "1/s", rrc);
  dlock_client_close(one);
  dlock_client_close(cl);
  double h1 = handoff_run(urls[0], "bench:c1", NULL);
  double hc = handoff_run(k.url, "bench:c1", NULL);
  emit("C1", "W3 hand-off p50 on a cluster", hc, "us", h1);
  dlock_tool_cluster_stop(&k);
}

/* W1 (one thread) by client c beside base in the same run: id's pairs/s,
 * lock p50 and p99 rows, named "W1 ...SUFFIX", base's figures the bounds. */
static void w1_beside(const char *id, const char *suffix, dlock_client *base,
                      dlock_client *c) {
  double r0, p0, q0, r1, p1, q1;
  char m[3][64];
  pairs(1, 0, base, &r0, &p0, &q0);
  pairs(1, 0, c, &r1, &p1, &q1);
  snprintf(m[0], sizeof m[0], "W1 pairs/s%s", suffix);
  snprintf(m[1], sizeof m[1], "W1 lock p50%s", suffix);
  snprintf(m[2], sizeof m[2], "W1 lock p99%s", suffix);
  emit(id, m[0], r1, "1/s", r0);
  emit(id, m[1], p1, "us", p0);
  emit(id, m[2], q1, "us", q0);
}

/* W1 on url by a client opened with o beside one with the defaults, in the
 * same run (w1_beside). */
static void w1_with(const char *id, const char *suffix, const char *url,
                    const dlock_client_opts *o) {
  dlock_client *plain = open_client(url, 0), *c = NULL;
  int rc = dlock_client_open(url, o, &c);
  if (rc != DLOCK_OK)
    die(shown(url), rc);
  w1_beside(id, suffix, plain, c);
  dlock_client_close(plain);
  dlock_client_close(c);
}

/* ---- C2: the replica guard's cost --------------------------------------------
 * A throwaway cluster of 3 masters with a replica each: W1 (one thread) by
 * a client with replica_sync_ms set (each acquire and release waits for the
 * master's replica) against one without, in the same run. */

static void c2(void) {
  dlock_tool_cluster k;
  if (dlock_tool_cluster_start(&k, 3, 1) != 0) {
    na("C2", "no cluster (redis-server and redis-cli are needed)");
    return;
  }
  dlock_client_opts o = client_opts();
  o.replica_sync_ms = 1000;
  w1_with("C2", ", replica guard on", k.url, &o);
  dlock_tool_cluster_stop(&k);
}

/* ---- V1: Valkey beside Redis ------------------------------------------------
 * W1 (one thread), by dlock and raw, on a throwaway valkey-server beside the
 * run's first server (redis-server unless DLOCK_REDIS_SERVER names another),
 * in the same run: each Valkey figure's bound is the same figure there. */

static void v1(void) {
  dlock_tool_server v;
  if (dlock_tool_server_start_bin(&v, "valkey-server", NULL) != 0) {
    na("V1", "no valkey-server (scripts/setup installs it)");
    return;
  }
  dlock_client *first = open_client(urls[0], 0), *valkey = open_client(v.url, 0);
  w1_beside("V1", " on Valkey", first, valkey);
  double r0, p0, q0, r1, p1, q1;
  pairs_on(1, 1, NULL, urls[0], NULL, &r0, &p0, &q0);
  pairs_on(1, 1, NULL, v.url, NULL, &r1, &p1, &q1);
  emit("V1", "raw W1 pairs/s on Valkey", r1, "1/s", r0);
  dlock_client_close(first);
  dlock_client_close(valkey);
  dlock_tool_server_stop(&v);
}

/* ---- D1: the cost of durable grants --------------------------------------------
 * A throwaway valkey-server with appendonly yes and appendfsync always (its
 * files in a directory of its own): W1 (one thread) by a client with
 * durable_ms set (each acquire and release waits for WAITAOF) against one
 * without, in the same run. */

static void d1(void) {
  char dir[64] = "/tmp/dlock-bench-aof-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    na("D1", "no temporary directory");
    return;
  }
  const char *extra[] = {"--appendonly", "yes", "--appendfsync", "always",
                         "--dir", dir, NULL};
  dlock_tool_server v;
  if (dlock_tool_server_start_bin(&v, "valkey-server", extra) != 0) {
    na("D1", "no valkey-server (scripts/setup installs it)");
  } else {
    dlock_client_opts o = client_opts();
    o.durable_ms = 1000;
    w1_with("D1", ", durable", v.url, &o);
    dlock_tool_server_stop(&v);
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

static void g1(void) {
  dlock_client *c = open_client(urls[0], 0);
  dlock_lock *l = NULL;
  int rc = dlock_fenced_lock_new(c, "bench:g1", NULL, &l);
  if (rc == DLOCK_OK)
    rc = dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG);
  if (rc != DLOCK_OK)
    die("G1 lock", rc);
  const char *key = "{bench:g1}:v";
  int64_t lat[2][4096];
  long nlat[2] = {0, 0};
  double rate[2];
  redisContext *raw = raw_connect(urls[0]);
  for (int guarded = 0; guarded < 2; guarded++) {
    int64_t t0 = now_us(), end = t0 + (int64_t)(duration * 1e6);
    long n = 0;
    for (; now_us() < end; n++) {
      char v[24];
      snprintf(v, sizeof v, "%ld", n);
      int64_t s = now_us();
      if (guarded) {
        const char *argv[] = {"SET", key, v};
        size_t lens[] = {3, strlen(key), strlen(v)};
        if ((rc = dlock_guarded_call(l, 3, argv, lens, NULL)) != DLOCK_OK)
          die("G1 guarded write", rc);
      } else {
        redisReply *r = redisCommand(raw, "SET %s %s", key, v);
        if (r == NULL)
          die("G1 raw SET", -1);
        freeReplyObject(r);
      }
      lat[guarded][n % 4096] = now_us() - s;
    }
    nlat[guarded] = n < 4096 ? n : 4096;
    rate[guarded] = (double)n / ((double)(now_us() - t0) / 1e6);
  }
  emit("G1", "guarded SET ops/s", rate[1], "1/s", rate[0]);
  emit("G1", "guarded SET p50", pct(lat[1], nlat[1], 50), "us",
       pct(lat[0], nlat[0], 50));
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

static long down_after_ms; /* --down-after; 0: the servers' defaults */

/* kill -9 of s, then acquires of l until one succeeds (each waits up to
 * the client's connect timeout for a master): ms from the kill, or NAN
 * after 300 s */
static double failover_ms(dlock_lock *l, dlock_tool_server *s) {
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  s->pid = -1;
  int64_t t0 = now_us();
  while (now_us() - t0 < 300 * 1000000LL) {
    if (dlock_acquire(l, 1000, 30000) == DLOCK_OK) {
      double ms = (double)(now_us() - t0) / 1000.0;
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
  dlock_client_opts o = client_opts();
  o.connect_timeout_ms = 60000;
  dlock_client *c = NULL;
  int rc = dlock_client_open(url, &o, &c);
  if (rc == DLOCK_OK)
    rc = dlock_reentrant_lock_new(c, name, NULL, l);
  if (rc == DLOCK_OK && (rc = dlock_acquire(*l, 0, 30000)) == DLOCK_OK)
    rc = dlock_release(*l);
  if (rc != DLOCK_OK)
    die(shown(url), rc);
  return c;
}

/* The node of k that serves name's slot now (NULL: none says). */
static dlock_tool_server *slot_owner(dlock_tool_cluster *k, const char *name) {
  redisContext *c = raw_connect(k->node[0].url);
  redisReply *slot = redisCommand(c, "CLUSTER KEYSLOT %s", name);
  redisReply *map = redisCommand(c, "CLUSTER SLOTS");
  dlock_tool_server *owner = NULL;
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

static void f1(void) {
  char set[64];
  if (down_after_ms > 0)
    snprintf(set, sizeof set, "%ld", down_after_ms);
  dlock_tool_sentinel st;
  if (dlock_tool_sentinel_start(&st, 2, 3, down_after_ms) != 0) {
    na("F1", "no sentinel setup (redis-server and redis-cli are needed)");
  } else {
    dlock_lock *l;
    dlock_client *c = failover_client(st.url, "bench:f1", &l);
    double ms = failover_ms(l, &st.node[0]);
    printf("     (sentinel down-after-milliseconds %s, failover-timeout "
           "default)\n", down_after_ms > 0 ? set : "30000 (default)");
    emit("F1", "sentinel: kill -9 to acquire", ms, "ms",
         down_after_ms > 0 ? (double)down_after_ms : 30000.0);
    dlock_lock_free(l);
    dlock_client_close(c);
    dlock_tool_sentinel_stop(&st);
  }
  dlock_tool_cluster k;
  if (dlock_tool_cluster_start_timeout(&k, 3, 1, down_after_ms) != 0) {
    na("F1", "no cluster (redis-server and redis-cli are needed)");
    return;
  }
  dlock_lock *l;
  dlock_client *c = failover_client(k.url, "bench:f1", &l);
  dlock_tool_server *owner = slot_owner(&k, "bench:f1");
  double ms = owner ? failover_ms(l, owner) : NAN;
  printf("     (cluster-node-timeout %s)\n",
         down_after_ms > 0 ? set : "15000 (default)");
  emit("F1", "cluster: kill -9 to acquire", ms, "ms",
       down_after_ms > 0 ? (double)down_after_ms : 15000.0);
  dlock_lock_free(l);
  dlock_client_close(c);
  dlock_tool_cluster_stop(&k);
}

/* ---- T1: TLS ------------------------------------------------------------------
 * W1 (one thread) and W3 (hand-off) over TLS beside plain TCP, on one
 * server with both ports, certificates made for the run (the openssl
 * CLI). */

static void t1(void) {
  char certs[64] = "/tmp/dlock-bench-certs-XXXXXX", cmd[256], tls_url[64];
  dlock_tool_server s = {0};
  int made = mkdtemp(certs) != NULL;
  snprintf(cmd, sizeof cmd, "sh '%s' '%s'", DLOCK_TLS_CERTS, certs);
  if (!made || system(cmd) != 0 ||
      dlock_tool_tls_server_start(&s, certs, tls_url) != 0) {
    na("T1", "no TLS server (openssl and redis-server with TLS are needed)");
  } else {
    snprintf(tls_ca, sizeof tls_ca, "%s/ca.crt", certs);
    dlock_client *plain = open_client(s.url, 0), *tls = open_client(tls_url, 0);
    w1_beside("T1", " over TLS", plain, tls);
    dlock_client_close(plain);
    dlock_client_close(tls);
    double h0 = handoff_run(s.url, "bench:t1", NULL);
    double h1 = handoff_run(tls_url, "bench:t1", NULL);
    emit("T1", "W3 hand-off p50 over TLS", h1, "us", h0);
  }
  dlock_tool_server_stop(&s);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", certs);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", certs);
}

/* ---- main ------------------------------------------------------------------ */

/* The workloads in the order they run. */
static const struct {
  const char *id;  /* what --workload selects */
  void (*run)(void);
  int always;      /* runs whatever is selected; -1: only when named */
} workloads[] = {
    {"W3p", w3p, 0},        /* first: it forks */
    {"W1", w1_w2, 1},       /* W1 and W2; measures the raw round trip the
                               others compare with */
    {"W3", w3, 0},
    {"W3p", w3p_report, 0},
    {"W4", w4, 0},
    {"W5", w5, 0},
    {"W6", w6, 0},
    {"W7", w7, 0},
    {"W8", w8, 0},
    {"M1", m1, 0},
    {"W9", w9, 0},
    {"W10", w10, 0},
    {"C1", c1, 0},
    {"C2", c2, 0},
    {"T1", t1, 0},
    {"V1", v1, 0},
    {"D1", d1, 0},
    {"G1", g1, 0},
    {"F1", f1, -1},
};

static void usage(void) {
  fprintf(stderr,
          "usage: dlock-bench [--duration S] [--workload ID] [--url URL] "
          "[--json FILE] [--threads N] [--w4-seconds S] [--peers]\n"
          "                   [--direct N] [--spin US] [--down-after MS]\n"
          "workloads: W1 W2 W3 W3p W4 W5 W6 W7 W8 M1 W9 W10 C1 C2 T1 V1 D1 G1\n"
          "  (default: all;\n"
          "  C1: W1 and W3 on a throwaway 3-master cluster beside one server;\n"
          "  C2: W1 with the replica guard on a cluster with replicas;\n"
          "  T1: W1 and W3 over TLS beside plain TCP;\n"
          "  V1: W1 on valkey-server beside the first server;\n"
          "  D1: W1 with durable grants (WAITAOF) on valkey-server;\n"
          "  G1: a guarded write beside the same SET from plain hiredis),\n"
          "  and F1 when named: kill -9 of the master to the first acquire on\n"
          "  a sentinel setup and on a cluster, with the servers' default\n"
          "  detection times unless --down-after MS)\n");
  exit(2);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--peers")) { /* W1, W2 beside the Node.js peers */
      peers_opt = 1;
      continue;
    }
    if (i + 1 >= argc)
      usage();
    if (!strcmp(argv[i], "--duration"))
      duration = atof(argv[++i]);
    else if (!strcmp(argv[i], "--workload"))
      only = argv[++i];
    else if (!strcmp(argv[i], "--url") && !strncmp(argv[i + 1], "rediss", 6)) {
      /* the raw bounds are plain hiredis */
      fprintf(stderr, "dlock-bench: --url takes plain redis:// servers; T1 "
              "measures TLS on a server of its own\n");
      return 2;
    } else if (!strcmp(argv[i], "--url") && nurls == 5) {
      fprintf(stderr, "dlock-bench: at most 5 --url (W5's RedLock has 5 "
              "masters); a sixth would replace one\n");
      return 2;
    } else if (!strcmp(argv[i], "--url") && strlen(argv[i + 1]) >= sizeof urls[0]) {
      fprintf(stderr, "dlock-bench: --url longer than %zu bytes\n",
              sizeof urls[0] - 1);
      return 2;
    } else if (!strcmp(argv[i], "--url")) {
      snprintf(urls[nurls++], sizeof urls[0], "%s", argv[++i]);
    } else if (!strcmp(argv[i], "--json"))
      json_path = argv[++i];
    else if (!strcmp(argv[i], "--threads"))
      threads_opt = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--direct"))
      direct_opt = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spin"))
      spin_opt = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--w4-seconds"))
      w4_secs = atof(argv[++i]);
    else if (!strcmp(argv[i], "--down-after"))
      down_after_ms = atol(argv[++i]);
    else
      usage();
  }
  if (duration <= 0 || w4_secs <= 0 || threads_opt < 1 || down_after_ms < 0 ||
      threads_opt > MAX_THREADS)
    usage();
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
            -1, 0);
  dlock_tool_server servers[5];
  int own = nurls == 0;
  if (own) {
    for (int i = 0; i < 5; i++) {
      if (dlock_tool_server_start(&servers[i]) != 0)
        return 1;
      snprintf(urls[i], sizeof urls[i], "%s", servers[i].url);
    }
    nurls = 5;
  }
  json = fopen(json_path, "w");
  if (json)
    fprintf(json, "[");
  printf("dlock-bench %s, %.1f s per workload, server %s\n", DLOCK_VERSION_STRING,
         duration, shown(urls[0]));
  printf("%-4s %-26s %12s %-8s %12s %7s\n", "id", "metric", "value", "unit",
         "bound", "ratio");
  for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++)
    if (workloads[i].always > 0 ||
        (workloads[i].always == 0 && selected(workloads[i].id)) ||
        (workloads[i].always < 0 && only && !strcmp(only, workloads[i].id)))
      workloads[i].run();
  if (json) {
    fprintf(json, "\n]\n");
    fclose(json);
    printf("figures written to %s\n", json_path);
  }
  if (own)
    for (int i = 0; i < 5; i++)
      dlock_tool_server_stop(&servers[i]);
  return 0;
}
