/* The lock workloads: W1 and W2 (pairs, and beside the Node.js peers),
 * W3, W3p and W6 (hand-off), W4 (10,000 holds under the watchdog), W7
 * (read-write, 90 % reads). */
#include <inttypes.h>
#include <sys/resource.h>
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

/* ---- the peers ----------------------------------------------------------------
 * bench/peers/peers.js (the Node.js ones), bench/peers/redis_py.py, Redisson
 * (the interop suite's Java peer: tests/interop/java) and redsync
 * (bench/peers/redsync). */

/* Which Redisson the bench runs: the newest of the interop suite's two
 * (java_peer.c's jp_versions). */
#define REDISSON_PEER "4.7.0"

/* Whether Node.js runs here (asked once): the Node.js peers need it. */
int bench_node_found(void) {
  static int found = -1;
  if (found < 0)
    found = system("node --version >/dev/null 2>&1") == 0;
  return found;
}

/* Run one peer on one workload; 1 with its figures, 0 with *why set. */
/* The interpreter for the Python peer: Debian's, whose python3-redis it
 * needs (a python3 earlier on PATH may lack it), else python3. */
static const char *python(void) {
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* The peer's latency by percentile ("cdf_us" in its line; W6:
 * "handoff_cdf_us") as a curve of W1's or W6's chart. */
static void peer_curve(const char *line, const char *peer, const char *w) {
  int bench_w6 = strcmp(w, "W6") == 0;
  if (!bench_w6 && strcmp(w, "W1") != 0)
    return;
  const char *key = bench_w6 ? "\"handoff_cdf_us\":" : "\"cdf_us\":";
  const char *p = strstr(line, key);
  double us[PLOT_POINTS];
  if (p == NULL)
    return;
  p += strlen(key);
  p += strspn(p, " [");
  for (int i = 0; i < PLOT_POINTS; i++) {
    char *end;
    us[i] = strtod(p, &end);
    if (end == p)
      return;
    p = end + strspn(end, ", ");
  }
  bench_plot_points(bench_w6 ? "w6-handoff" : "w1-latency", peer, us);
}

int bench_run_peer(const char *peer, const char *w, peer_figures *out,
                   char *why, size_t whylen) {
  const char *dir = getenv("DLOCK_PEERS_DIR");
  if (dir == NULL)
    dir = DLOCK_PEERS_DIR;
  const char *port = strrchr(bench_opt.urls[0], ':');
  char cmd[2048];
  if (strcmp(peer, "redis-py") == 0)
    snprintf(cmd, sizeof cmd, "%s '%s/redis_py.py' %s %s %.3f 2>&1", python(),
             dir, port ? port + 1 : "6379", w, bench_opt.duration);
  else if (strcmp(peer, "redisson") == 0) /* the interop suite's build */
    snprintf(cmd, sizeof cmd, "java -XX:+UseSerialGC -cp "
             "'%s/../../tests/interop/java/target/%s/classes:"
             "%s/../../tests/interop/java/target/%s/lib/" "*' dlock.peer.Bench "
             "%s %s %.3f 2>&1", dir, REDISSON_PEER, dir, REDISSON_PEER,
             port ? port + 1 : "6379", w, bench_opt.duration);
  else if (strcmp(peer, "redsync") == 0)
    snprintf(cmd, sizeof cmd, "'%s/redsync/redsync-peer' %s %s %.3f 2>&1", dir,
             port ? port + 1 : "6379", w, bench_opt.duration);
  else
    snprintf(cmd, sizeof cmd, "node --no-warnings '%s/peers.js' %s %s %s %.3f 2>&1", dir,
             port ? port + 1 : "6379", peer, w, bench_opt.duration);
  /* the server's share: its CPU over the peer's whole run (start-up and
   * warm-up included; an idle server's own ticks cost a few us a second)
   * by every pair the peer made */
  redisContext *srv = bench_opt.server_private
                          ? redisConnect("127.0.0.1", bench_port_of(bench_opt.urls[0]))
                          : NULL;
  server_counters s0, s1;
  int s_ok = srv && !srv->err && bench_server_read(srv, &s0) == 0;
  FILE *f = popen(cmd, "r");
  char line[4096] = "";
  if (f == NULL || fgets(line, sizeof line, f) == NULL)
    line[0] = '\0';
  int status = f ? pclose(f) : -1;
  s_ok = s_ok && bench_server_read(srv, &s1) == 0;
  if (srv)
    redisFree(srv);
  const char *r = strstr(line, "\"pairs_per_s\":");
  const char *l = strstr(line, "\"lock_p50_us\":");
  const char *h = strstr(line, "\"handoff_p50_us\":");
  if (status != 0 || r == NULL || l == NULL) {
    line[strcspn(line, "\n")] = '\0';
    snprintf(why, whylen, "%s: %s", peer,
             line[0] ? line : "the peer did not answer");
    return 0;
  }
  const char *v = strstr(line, "\"version\":\"");
  if (v) { /* said once per peer and workload: which release ran */
    v += strlen("\"version\":\"");
    printf("(%s %s: %.*s)\n", w, peer, (int)strcspn(v, "\""), v);
  }
  const char *t = strstr(line, "\"pairs_total\":");
  double total = t ? atof(t + strlen("\"pairs_total\":")) : 0;
  out->rate = atof(r + strlen("\"pairs_per_s\":"));
  out->p50 = atof(l + strlen("\"lock_p50_us\":"));
  out->handoff = h ? atof(h + strlen("\"handoff_p50_us\":")) : NAN;
  out->server_cpu = s_ok && total > 0 ? (s1.cpu_s - s0.cpu_s) * 1e6 / total : NAN;
  peer_curve(line, peer, w);
  return 1;
}

/* The server's CPU per pair (W6: per grant), dlock's beside a peer's;
 * no row unless both were measured (a private server). */
static void peer_server_row(const char *w, const char *per, const char *peer,
                            double mine, double theirs) {
  char metric[64];
  if (isnan(mine) || isnan(theirs))
    return;
  snprintf(metric, sizeof metric, "server CPU/%s vs %s", per, peer);
  bench_emit(w, metric, mine, "us", theirs);
}

/* dlock's W1/W2 figures beside node-redlock's, redis-semaphore's,
 * node-redisson's and redis-py's on the same server: value = dlock's, bound
 * = the peer's, ratio = dlock / peer (for p50, lower is better). */
static void peers(bench_bounds *b) {
  int node = bench_node_found();
  if (!node)
    printf("(peers: Node.js not found; install nodejs and run `npm ci` in "
           "bench/peers to compare)\n");
  static const char *const names[] = {"node-redlock", "redis-semaphore",
                                      "node-redisson", "redis-py", "redisson",
                                      "redsync"};
  for (size_t i = node ? 0 : 3; i < sizeof names / sizeof names[0]; i++) {
    char metric[64], why[256];
    peer_figures p;
    if (bench_selected("W1")) {
      if (bench_run_peer(names[i], "W1", &p, why, sizeof why)) {
        snprintf(metric, sizeof metric, "pairs/s vs %s", names[i]);
        bench_emit("W1", metric, b->w1_rate, "1/s", p.rate);
        snprintf(metric, sizeof metric, "lock p50 vs %s", names[i]);
        bench_emit("W1", metric, b->w1_p50, "us", p.p50);
        peer_server_row("W1", "pair", names[i], b->w1_server_cpu, p.server_cpu);
      } else {
        bench_na("W1", why);
      }
    }
    if (bench_selected("W2")) {
      if (bench_run_peer(names[i], "W2", &p, why, sizeof why)) {
        snprintf(metric, sizeof metric, "pairs/s vs %s", names[i]);
        bench_emit("W2", metric, b->w2_rate, "1/s", p.rate);
        peer_server_row("W2", "pair", names[i], b->w2_server_cpu, p.server_cpu);
      } else {
        bench_na("W2", why);
      }
    }
  }
}

/* W1's or W2's rows: dlock beside raw, measured in turns. */
static void turn_rows(const char *w, const pair_figures *raw,
                      const pair_figures *mine, int latency) {
  bench_emit(w, "pairs/s", mine->rate, "1/s", raw->rate);
  if (latency) {
    bench_emit(w, "lock p50", mine->p50, "us", raw->p50);
    bench_emit(w, "lock p99", mine->p99, "us", raw->p99);
  }
  bench_emit(w, "CPU per pair", mine->cpu, "us", raw->cpu);
  bench_emit_costs(w, mine->pairs, &mine->cost, raw->pairs, &raw->cost);
  if (bench_opt.server_private) {
    bench_emit(w, "server CPU per pair", mine->server_cpu, "us", raw->server_cpu);
    bench_emit(w, "server cmd time per pair", mine->server_cmd, "us",
               raw->server_cmd);
  }
}

void bench_w1_w2(bench_bounds *b) {
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  pair_figures raw, mine;
  bench_pairs_in_turns(1, c, &raw, &mine);
  bench_plot_samples("w1-latency", "raw hiredis", raw.lat, raw.nlat);
  bench_plot_samples("w1-latency", "dlock", mine.lat, mine.nlat);
  b->raw_rtt = raw.p50;
  b->w1_p50 = mine.p50;
  b->w1_rate = mine.rate;
  b->w1_server_cpu = mine.server_cpu;
  if (bench_selected("W1"))
    turn_rows("W1", &raw, &mine, 1);
  if (bench_selected("W2")) {
    bench_pairs_in_turns(bench_opt.threads, c, &raw, &mine);
    turn_rows("W2", &raw, &mine, 0);
    b->w2_rate = mine.rate;
    b->w2_server_cpu = mine.server_cpu;
  }
  dlock_client_close(c);
  if (bench_opt.peers)
    peers(b);
}


/* ---- W3, W3p, W6: hand-off on one lock ------------------------------------ */

typedef struct handoff_arg {
  int id;
  dlock_lock *lock;
  int record; /* keep (call, got) for the FIFO check */
} handoff_arg;

/* Busy for us microseconds (a hold that keeps its core). */
void bench_spin_us(int64_t us) {
  int64_t end = bench_now_us() + us;
  while (bench_now_us() < end)
    ;
}

static void *handoff_thread(void *p) {
  handoff_arg *a = p;
  while (!atomic_load(&bench_sh->stop)) {
    int64_t call = bench_now_us();
    if (dlock_acquire(a->lock, 10000, 30000) != DLOCK_OK)
      continue;
    int64_t got = bench_now_us();
    long long waited = got - call, max = atomic_load(&bench_sh->max_wait_us);
    while (waited > max &&
           !atomic_compare_exchange_weak(&bench_sh->max_wait_us, &max, waited))
      ;
    /* one holder at a time: the run of back-to-back grants is its own */
    int run = atomic_exchange(&bench_sh->last_holder, a->id + 1) == a->id + 1
                  ? atomic_load(&bench_sh->run) + 1
                  : 1;
    atomic_store(&bench_sh->run, run);
    if (run > atomic_load(&bench_sh->max_run))
      atomic_store(&bench_sh->max_run, run);
    long long rel = atomic_load(&bench_sh->released_us);
    if (rel > call) /* we were waiting when it was released */
      bench_sample(got > rel ? got - rel : 0);
    if (a->record) {
      long i = atomic_fetch_add(&bench_sh->nrec, 1);
      if (i < MAX_SAMPLES) {
        bench_sh->rec_call[i] = call;
        bench_sh->rec_got[i] = got;
      }
    }
    atomic_fetch_add(&bench_sh->counts[a->id], 1);
    bench_spin_us(1000); /* hold 1 ms */
    dlock_release(a->lock);
    atomic_store(&bench_sh->released_us, bench_now_us());
    usleep(1000); /* 1 ms outside */
  }
  return NULL;
}

static void handoff_report(bench_bounds *b, const char *w, double secs,
                           int nthreads) {
  long total = 0;
  double sum2 = 0;
  for (int i = 0; i < nthreads; i++) {
    long x = atomic_load(&bench_sh->counts[i]);
    total += x;
    sum2 += (double)x * (double)x;
  }
  long ns = bench_nsamples();
  double p50 = bench_pct(bench_sh->samples, ns, 50), p99 = bench_pct(bench_sh->samples, ns, 99);
  double max = ns ? (double)bench_sh->samples[ns - 1] : NAN;
  double ceiling = 1e6 / (1000.0 + b->raw_rtt * 2); /* hold + release + acquire */
  bench_emit(w, "acquisitions/s", (double)total / secs, "1/s", ceiling);
  bench_emit(w, "hand-off p50", p50, "us", b->raw_rtt);
  bench_emit(w, "hand-off p99", p99, "us", b->raw_rtt);
  bench_emit(w, "hand-off max", max, "us", b->raw_rtt);
  bench_emit(w, "Jain fairness", sum2 > 0 ? (double)total * total / (nthreads * sum2) : 0,
       "index", 1.0);
}

/* 8 threads taking turns on lock name on url (1 ms holds): the hand-off
 * p50, and W3's whole report when report_as is given. */
double bench_handoff_run(bench_bounds *b, const char *url, const char *name,
                   const char *report_as) {
  dlock_client *c = bench_open_client(url, 0);
  dlock_lock *l;
  dlock_reentrant_lock_new(c, name, NULL, &l);
  bench_reset();
  handoff_arg args[8];
  for (int i = 0; i < 8; i++)
    args[i] = (handoff_arg){i, l, 0};
  double secs = bench_run_threads(8, handoff_thread, args, sizeof args[0], bench_opt.duration);
  if (report_as)
    handoff_report(b, report_as, secs, 8);
  double p50 = bench_pct(bench_sh->samples, bench_nsamples(), 50);
  dlock_lock_free(l);
  dlock_client_close(c);
  return p50;
}

void bench_w3(bench_bounds *b) { b->w3_p50 = bench_handoff_run(b, bench_opt.urls[0], "bench:w3", "W3"); }

/* The server's commands so far (INFO stats). */
static long long server_commands(redisContext *c) {
  redisReply *r = redisCommand(c, "INFO stats");
  const char *p = r && r->type == REDIS_REPLY_STRING
                      ? strstr(r->str, "total_commands_processed:")
                      : NULL;
  long long v = p ? atoll(p + strlen("total_commands_processed:")) : -1;
  freeReplyObject(r);
  return v;
}

/* One S1 run: 8 threads taking turns (1 ms holds) on a lock of the kind
 * spin (1) or the pub/sub lock (0): hand-off latency, grants per second,
 * and per grant the server's commands and the client's requests. */
static void s1_run(bench_bounds *b, int spin, const char *w) {
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  redisContext *raw = bench_raw_connect(bench_opt.urls[0]);
  dlock_lock *l;
  int rc = spin ? dlock_spin_lock_new(c, "bench:s1", NULL, &l)
                : dlock_reentrant_lock_new(c, "bench:s1", NULL, &l);
  if (rc != DLOCK_OK)
    bench_die("S1 lock", rc);
  bench_reset();
  handoff_arg args[8];
  for (int i = 0; i < 8; i++)
    args[i] = (handoff_arg){i, l, 0};
  dlock_stats st0 = {.version = DLOCK_STATS_VERSION}, st1 = st0;
  dlock_client_stats(c, &st0);
  long long cmd0 = server_commands(raw);
  double secs = bench_run_threads(8, handoff_thread, args, sizeof args[0], bench_opt.duration);
  long long cmds = server_commands(raw) - cmd0 - 1; /* less the INFO */
  dlock_client_stats(c, &st1);
  long grants = 0;
  for (int i = 0; i < 8; i++)
    grants += atomic_load(&bench_sh->counts[i]);
  long ns = bench_nsamples();
  double sum2 = 0;
  for (int i = 0; i < 8; i++)
    sum2 += (double)atomic_load(&bench_sh->counts[i]) * (double)atomic_load(&bench_sh->counts[i]);
  /* the bound: a grant per hold, release and acquire (W3's) */
  bench_emit(w, "acquisitions/s", (double)grants / secs, "1/s",
       1e6 / (1000.0 + b->raw_rtt * 2));
  bench_emit(w, "hand-off p50", bench_pct(bench_sh->samples, ns, 50), "us", b->raw_rtt);
  bench_emit(w, "hand-off p99", bench_pct(bench_sh->samples, ns, 99), "us", b->raw_rtt);
  /* fairness (docs/spin.md): Jain's index over the 8 threads' grants (1:
   * even), the longest wait, and the most grants one thread took back to
   * back (a FIFO hand-off: 1 while others wait) */
  bench_emit(w, "Jain fairness", sum2 > 0 ? (double)grants * grants / (8 * sum2) : 0,
       "index", 1.0);
  bench_emit(w, "longest wait", (double)atomic_load(&bench_sh->max_wait_us) / 1000.0, "ms", 0);
  bench_emit(w, "most grants in a row", atomic_load(&bench_sh->max_run), "count", 0);
  bench_emit(w, "server commands per grant", grants ? (double)cmds / grants : 0,
       "count", 2); /* the bound: one acquire and one release */
  bench_emit(w, "client requests per grant",
       grants ? (double)(st1.commands - st0.commands) / grants : 0, "count", 2);
  dlock_lock_free(l);
  dlock_client_close(c);
  redisFree(raw);
}

/* S1: the spin lock's hand-off beside the pub/sub lock's, 8 waiters. */
void bench_s1(bench_bounds *b) {
  s1_run(b, 1, "S1 spin");
  s1_run(b, 0, "S1 pub/sub");
}

/* W3p forks its workers, so it runs before this process starts any thread
 * (forking a threaded process is fragile, and ThreadSanitizer refuses it);
 * its figures are kept and printed in order, once the raw bound is known. */
static shared *w3p_result;
static double w3p_secs;

void bench_w3p(bench_bounds *b) {
  bench_reset();
  pid_t pids[4];
  int64_t t0 = bench_now_us();
  for (int p = 0; p < 4; p++) {
    pids[p] = fork();
    if (pids[p] == 0) {
      dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
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
  usleep((useconds_t)(bench_opt.duration * 1e6));
  atomic_store(&bench_sh->stop, 1);
  for (int p = 0; p < 4; p++)
    waitpid(pids[p], NULL, 0);
  w3p_secs = (double)(bench_now_us() - t0) / 1e6;
  w3p_result = malloc(sizeof *bench_sh);
  if (w3p_result)
    memcpy(w3p_result, bench_sh, sizeof *bench_sh);
}

void bench_w3p_report(bench_bounds *b) {
  if (w3p_result == NULL)
    return;
  memcpy(bench_sh, w3p_result, sizeof *bench_sh);
  free(w3p_result);
  handoff_report(b, "W3p", w3p_secs, 8);
}

/* The acquisitions of the last hand-off run's n threads. */
static long grants(int n) {
  long total = 0;
  for (int i = 0; i < n; i++)
    total += atomic_load(&bench_sh->counts[i]);
  return total;
}

/* W6 beside each peer's lock (16 tasks or threads on one lock, each
 * waiting as its library waits by default: none has a fair lock; redis-py
 * and node-redlock retry every 0.1-0.2 s, redis-semaphore every 10 ms,
 * node-redisson is woken by pub/sub), and raw hiredis's round trip as the
 * chart's floor. */
static void w6_peers(double p50, double rate, double server_cpu, double raw_rtt) {
  double floor_us[PLOT_POINTS];
  for (int i = 0; i < PLOT_POINTS; i++)
    floor_us[i] = raw_rtt;
  if (raw_rtt > 0) /* W1 measured it */
    bench_plot_points("w6-handoff", "raw hiredis round trip (p50)", floor_us);
  int node = bench_node_found();
  static const char *const names[] = {"redis-py", "redisson", "redsync",
                                      "node-redlock", "redis-semaphore",
                                      "node-redisson"};
  for (size_t i = 0; i < (node ? 6u : 3u); i++) {
    peer_figures p;
    char why[256], metric[64];
    if (!bench_run_peer(names[i], "W6", &p, why, sizeof why)) {
      bench_na("W6", why);
      continue;
    }
    snprintf(metric, sizeof metric, "acquisitions/s vs %s", names[i]);
    bench_emit("W6", metric, rate, "1/s", p.rate);
    snprintf(metric, sizeof metric, "hand-off p50 vs %s", names[i]);
    bench_emit("W6", metric, p50, "us", p.handoff);
    peer_server_row("W6", "grant", names[i], server_cpu, p.server_cpu);
  }
}

void bench_w6(bench_bounds *b) {
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  dlock_lock *l;
  dlock_fair_lock_new(c, "bench:w6", NULL, &l);
  bench_reset();
  handoff_arg args[16];
  for (int i = 0; i < 16; i++)
    args[i] = (handoff_arg){i, l, 1};
  /* the server's CPU per grant (a private server): the peers' bound */
  redisContext *srv = bench_opt.server_private
                          ? redisConnect("127.0.0.1", bench_port_of(bench_opt.urls[0]))
                          : NULL;
  server_counters s0, s1;
  int s_ok = srv && !srv->err && bench_server_read(srv, &s0) == 0;
  double secs = bench_run_threads(16, handoff_thread, args, sizeof args[0],
                            bench_opt.duration);
  s_ok = s_ok && bench_server_read(srv, &s1) == 0;
  if (srv)
    redisFree(srv);
  long got = grants(16);
  double server_cpu = s_ok && got > 0 ? (s1.cpu_s - s0.cpu_s) * 1e6 / (double)got : NAN;
  /* the server's commands per grant, a script's own included (less the
   * INFO calls' own reads: none are counted) */
  double server_calls = s_ok && got > 0 ? (double)(s1.calls - s0.calls) / (double)got : NAN;
  /* A FIFO violation: X got the lock before Y although Y had asked more than
   * 5 ms earlier (time enough to join the queue) and was still waiting. The
   * margin covers the call's way to the server: on two busy cores its tail
   * passes 2 ms (a 2 ms margin counted 0-24 "violations" per run, 5 ms and
   * 10 ms none; the torture checker, which reads the queue itself, finds
   * none either). */
  long n = atomic_load(&bench_sh->nrec), violations = 0;
  if (n > MAX_SAMPLES)
    n = MAX_SAMPLES;
  for (long x = 0; x < n; x++)
    for (long y = 0; y < n; y++)
      if (bench_sh->rec_call[y] + 5000 < bench_sh->rec_call[x] && bench_sh->rec_got[y] > bench_sh->rec_got[x])
        violations++;
  long ns = bench_nsamples();
  bench_emit("W6", "FIFO violations", (double)violations, "count", 0);
  double p50 = bench_pct(bench_sh->samples, ns, 50);
  bench_plot_samples("w6-handoff", "dlock (fair lock)", bench_sh->samples, ns);
  bench_emit("W6", "hand-off p50", p50, "us", b->raw_rtt);
  if (bench_opt.peers)
    w6_peers(p50, (double)got / secs, server_cpu, b->raw_rtt);
  if (!isnan(server_cpu)) {
    bench_emit("W6", "server CPU per grant", server_cpu, "us", 0);
    bench_emit("W6", "server commands per grant", server_calls, "count", 0);
  }
  bench_emit("W6", "hand-off p99", bench_pct(bench_sh->samples, ns, 99), "us", b->raw_rtt);
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
  for (int i = a->from; i < a->to; i++) {
    int rc = dlock_acquire(a->locks[i], 0, DLOCK_LEASE_WATCHDOG);
    if (rc != DLOCK_OK)
      bench_die("W4 acquire", rc);
  }
  return NULL;
}

static void *w4_release(void *p) {
  w4_arg *a = p;
  for (int i = a->from; i < a->to; i++)
    dlock_release(a->locks[i]);
  return NULL;
}

/* The process's resident memory in bytes (0 when unknown). */
long bench_resident(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, rss = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
      rss = 0;
    fclose(f);
  }
  return rss * sysconf(_SC_PAGESIZE);
}

/* n locks held under the watchdog (watchdog_ms: a tick every third of
 * it) by one owner, taken by 16 threads, for secs: what their renewals
 * cost. */
void bench_holds(long n, int64_t watchdog_ms, double secs, holds_figures *f) {
  dlock_client *c = bench_open_client(bench_opt.urls[0], watchdog_ms);
  dlock_lock **locks = calloc((size_t)n, sizeof *locks);
  uint64_t owner = dlock_owner_id_new();
  if (locks == NULL)
    bench_die("holds: memory", DLOCK_ENOMEM);
  for (long i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "bench:w4:%ld", i);
    dlock_reentrant_lock_new(c, name, NULL, &locks[i]);
    dlock_lock_bind_owner(locks[i], owner); /* taken by 16 threads, one owner */
  }
  pthread_t t[16];
  w4_arg args[16];
  long before = bench_resident();
  for (int i = 0; i < 16; i++) {
    args[i] = (w4_arg){locks, (int)(i * n / 16), (int)((i + 1) * n / 16)};
    pthread_create(&t[i], NULL, w4_acquire, &args[i]);
  }
  for (int i = 0; i < 16; i++)
    pthread_join(t[i], NULL);
  f->bytes_per_hold = (double)(bench_resident() - before) / (double)n;
  redisContext *rc = bench_raw_connect(bench_opt.urls[0]);
  long long calls0 = evalsha_calls(rc);
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  int64_t t0 = bench_now_us();
  usleep((useconds_t)(secs * 1e6));
  double el = (double)(bench_now_us() - t0) / 1e6;
  long long calls = evalsha_calls(rc) - calls0; /* only renewals ran */
  getrusage(RUSAGE_SELF, &ru1);
  double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec +
                        ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
               (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec +
                        ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
  long held = 0;
  for (long from = 0; from < n; from += 10000) { /* 10,000 in flight */
    long to = from + 10000 < n ? from + 10000 : n;
    for (long i = from; i < to; i++)
      redisAppendCommand(rc, "EXISTS bench:w4:%ld", i);
    for (long i = from; i < to; i++) {
      redisReply *r = NULL;
      if (redisGetReply(rc, (void **)&r) == REDIS_OK && r)
        held += r->integer == 1;
      freeReplyObject(r);
    }
  }
  double ticks = el / ((double)watchdog_ms / 3000.0); /* a tick a third */
  f->calls_per_s = (double)calls / el;
  f->calls_per_tick_100 = (double)calls / ticks / ((double)n / 100.0);
  f->cpu_pct = 100.0 * cpu / el;
  f->held = held;
  for (int i = 0; i < 16; i++)
    pthread_create(&t[i], NULL, w4_release, &args[i]);
  for (int i = 0; i < 16; i++)
    pthread_join(t[i], NULL);
  for (long i = 0; i < n; i++)
    dlock_lock_free(locks[i]);
  free(locks);
  redisFree(rc);
  dlock_client_close(c);
}

void bench_w4(bench_bounds *b) {
  (void)b;
  holds_figures f;
  bench_holds(W4_LOCKS, 3000, bench_opt.w4_secs, &f);
  bench_emit("W4", "renewal calls/s", f.calls_per_s, "1/s", W4_LOCKS / 100.0);
  bench_emit("W4", "calls/100 locks/tick", f.calls_per_tick_100, "calls", 1.0);
  bench_emit("W4", "client CPU", f.cpu_pct, "%", NAN);
  bench_emit("W4", "locks still held", (double)f.held, "locks", W4_LOCKS);
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
  while (!atomic_load(&bench_sh->stop)) {
    int write = rand_r(&seed) % 10 == 0;
    dlock_lock *l = a->rw ? (write ? dlock_rwlock_write(a->rw) : dlock_rwlock_read(a->rw))
                          : a->lock;
    if (dlock_acquire(l, 10000, 30000) != DLOCK_OK)
      continue;
    usleep(1000); /* 1 ms inside: a sleep, so 16 threads do not need 16 cores */
    dlock_release(l);
    atomic_fetch_add(&bench_sh->pairs, 1);
  }
  return NULL;
}

void bench_w7(bench_bounds *b) {
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  dlock_rwlock *rw;
  dlock_lock *plain;
  dlock_rwlock_new(c, "bench:w7:rw", NULL, &rw);
  dlock_reentrant_lock_new(c, "bench:w7:plain", NULL, &plain);
  mix_arg args[16];
  double rate[2];
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 16; i++)
      args[i] = (mix_arg){i, k == 0 ? rw : NULL, plain};
    bench_reset();
    double secs = bench_run_threads(16, mix_thread, args, sizeof args[0], bench_opt.duration);
    rate[k] = (double)atomic_load(&bench_sh->pairs) / secs;
  }
  bench_emit("W7", "ops/s (rwlock)", rate[0], "1/s", rate[1]);
  dlock_rwlock_free(rw);
  dlock_lock_free(plain);
  dlock_client_close(c);
}



/* ---- M2: 100 values of one group beside a multi-lock of 100 locks --------- */

/* Acquire/release pairs of l on one thread for the run's duration: the
 * pairs per second. */
static double pairs_of(dlock_lock *l) {
  int64_t end = bench_now_us() + (int64_t)(bench_opt.duration * 1e6), t0 = bench_now_us();
  long n = 0;
  while (bench_now_us() < end) {
    int rc = dlock_acquire(l, 0, 30000);
    if (rc == DLOCK_OK)
      rc = dlock_release(l);
    if (rc != DLOCK_OK)
      bench_die("M2 pair", rc);
    n++;
  }
  return (double)n / ((double)(bench_now_us() - t0) / 1e6);
}

/* M2: one thread's acquire/release pairs over N = 100 values, as a grouped
 * multi-lock (one script each way) and as a multi-lock of N reentrant
 * locks (N round trips each way); then 1,000 values in a group. */
void bench_m2(bench_bounds *b) {
  enum { N = 100, BIG = 1000 };
  (void)b;
  dlock_client *c = bench_open_client(bench_opt.urls[0], 0);
  static char buf[BIG][24];
  static const char *values[BIG];
  dlock_lock *members[N], *multi = NULL, *group = NULL, *big = NULL;
  for (int i = 0; i < BIG; i++) {
    snprintf(buf[i], sizeof buf[i], "row:%d", i);
    values[i] = buf[i];
  }
  for (int i = 0; i < N; i++) {
    char name[48];
    snprintf(name, sizeof name, "bench:m2:%d", i);
    int rc = dlock_reentrant_lock_new(c, name, NULL, &members[i]);
    if (rc != DLOCK_OK)
      bench_die("M2 member", rc);
  }
  if (dlock_multi_new(members, N, &multi) != DLOCK_OK ||
      dlock_group_lock_new(c, "bench:m2:group", values, NULL, N, NULL,
                           &group) != DLOCK_OK ||
      dlock_group_lock_new(c, "bench:m2:big", values, NULL, BIG, NULL, &big) !=
          DLOCK_OK)
    bench_die("M2 locks", -1);
  double g = pairs_of(group), m = pairs_of(multi), k = pairs_of(big);
  bench_emit("M2", "group of 100: pairs/s", g, "1/s", m);
  bench_emit("M2", "multi-lock of 100: pairs/s", m, "1/s", 0);
  /* the figure that matters: the group against the multi-lock (goal:
   * 10x, docs/group.md) */
  bench_emit("M2", "group / multi-lock", m > 0 ? g / m : NAN, "x", 10);
  bench_emit("M2", "group of 1000: pairs/s", k, "1/s", 0);
  dlock_lock_free(big);
  dlock_lock_free(group);
  dlock_lock_free(multi);
  for (int i = 0; i < N; i++)
    dlock_lock_free(members[i]);
  dlock_client_close(c);
}
