/* What dlock-bench's workloads share (bench.h): the options, the output
 * (a line per figure, and JSON), the shared counters and samples, the
 * clients, and the raw bound: the same scripts over plain hiredis. */
#include <inttypes.h>
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

#include "base/scripts.h"
#include "bench.h"

bench_opts bench_opt = {.duration = 2.0, .json_path = DLOCK_BENCH_JSON, .threads = 16,
                  .direct = -1, .spin = -2, .w4_secs = 10.0};
shared *bench_sh;
static FILE *json;
static int first_json = 1;

int bench_json_open(const char *path) {
  json = fopen(path, "w");
  if (json)
    fprintf(json, "[");
  return json != NULL;
}

void bench_json_close(void) {
  if (json == NULL)
    return;
  fprintf(json, "\n]\n");
  fclose(json);
  json = NULL;
}

int64_t bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* x with that many decimals into buf, or none when it is not a figure
 * (NAN, or a bound of 0: no bound). */
static const char *figure_or(char *buf, size_t n, double x, int is,
                             int decimals, const char *none) {
  if (!is)
    return none;
  snprintf(buf, n, "%.*f", decimals, x);
  return buf;
}

void bench_emit(const char *w, const char *metric, double value, const char *unit,
          double bound) {
  double ratio = bound > 0 && !isnan(value) ? value / bound : NAN;
  bench_plot_ratio(w, metric, unit, ratio);
  /* a figure not measured here says so; a row without a bound prints
   * none (never "nan") */
  char v[32], b[32], r[32];
  int has_v = !isnan(value), has_b = bound > 0, has_r = !isnan(ratio);
  printf("%-4s %-26s %12s %-8s %12s %7s\n", w, metric,
         figure_or(v, sizeof v, value, has_v, 1, "not measured"), unit,
         figure_or(b, sizeof b, bound, has_b, 1, "-"),
         figure_or(r, sizeof r, ratio, has_r, 2, "-"));
  fflush(stdout);
  if (json) {
    fprintf(json, "%s\n  {\"workload\": \"%s\", \"metric\": \"%s\", "
            "\"value\": %s, \"unit\": \"%s\", ",
            first_json ? "" : ",", w, metric,
            figure_or(v, sizeof v, value, has_v, 3, "null"), unit);
    fprintf(json, "\"bound\": %s, \"ratio\": %s}",
            figure_or(b, sizeof b, bound, has_b, 3, "null"),
            figure_or(r, sizeof r, ratio, has_r, 4, "null"));
    first_json = 0;
  }
}

void bench_na(const char *w, const char *why) {
  printf("%-4s %-26s %12s %-8s %12s %7s   (%s)\n", w, "-", "n/a", "-", "-", "-", why);
}

int bench_selected(const char *w) {
  if (bench_opt.only == NULL)
    return 1;
  size_t n = strlen(w);
  for (const char *p = bench_opt.only; *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0))
    if (strncmp(p, w, n) == 0 && (p[n] == ',' || p[n] == '\0'))
      return 1;
  return 0;
}

int bench_cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

double bench_pct(int64_t *v, long n, double p) {
  if (n <= 0)
    return NAN;
  qsort(v, (size_t)n, sizeof *v, bench_cmp64);
  long i = (long)(p / 100.0 * (double)(n - 1) + 0.5);
  return (double)v[i];
}

void bench_die(const char *what, int rc) {
  fprintf(stderr, "dlock-bench: %s: %s: %s\n", what, dlock_strerror(rc), dlock_errmsg());
  exit(1);
}

/* url as it may be printed: without its password. */
const char *bench_shown(const char *url) {
  static _Thread_local char buf[160];
  dlock_uri_redact(url, buf, sizeof buf);
  return buf;
}

/* The client options every workload's clients start from. */
dlock_client_opts bench_client_opts(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  if (bench_opt.direct >= 0)
    o.direct_conns = bench_opt.direct;
  if (bench_opt.spin >= -1)
    o.spin_us = bench_opt.spin;
  return o;
}

dlock_client *bench_open_client(const char *url, int64_t watchdog_ms) {
  dlock_client_opts o = bench_client_opts();
  if (strncmp(url, "rediss", 6) == 0 && bench_opt.tls_ca[0]) /* else the system's */
    o.tls_ca_file = bench_opt.tls_ca;
  if (watchdog_ms)
    o.watchdog_timeout_ms = watchdog_ms;
  dlock_client *c = NULL;
  int rc = dlock_client_open(url, &o, &c);
  if (rc != DLOCK_OK)
    bench_die(bench_shown(url), rc);
  return c;
}

int bench_port_of(const char *url) { return atoi(strrchr(url, ':') + 1); }

void bench_reset(void) {
  memset(bench_sh, 0, sizeof *bench_sh);
}

void bench_sample(int64_t v) {
  long i = atomic_fetch_add(&bench_sh->nsamples, 1);
  if (i < MAX_SAMPLES)
    bench_sh->samples[i] = v;
}

long bench_nsamples(void) {
  long n = atomic_load(&bench_sh->nsamples);
  return n < MAX_SAMPLES ? n : MAX_SAMPLES;
}

/* This process's CPU time (user + system, every thread: the callers', the
 * engine's), microseconds. */
static int64_t cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t last_cpu_us; /* the CPU time of the last run_threads */

/* CPU time per pair of the last run (microseconds; sh->pairs pairs). */
double bench_cpu_per_pair(void) {
  long n = atomic_load(&bench_sh->pairs);
  return n > 0 ? (double)last_cpu_us / (double)n : 0;
}

/* Run n threads of fn(arg i) for duration seconds (they watch sh->stop). */
double bench_run_threads(int n, thread_fn fn, void *args, size_t arg_size,
                   double secs) {
  pthread_t t[MAX_THREADS];
  run_cost cost;
  bench_cost_begin(&cost);
  int64_t t0 = bench_now_us(), c0 = cpu_us();
  for (int i = 0; i < n; i++)
    pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * arg_size);
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  nanosleep(&ts, NULL);
  atomic_store(&bench_sh->stop, 1);
  for (int i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  last_cpu_us = cpu_us() - c0;
  bench_cost_end(&cost);
  return (double)(bench_now_us() - t0) / 1e6;
}


/* ---- raw bound: plain hiredis, the same scripts ---------------------------- */

redisContext *bench_raw_connect(const char *url) {
  redisContext *c = redisConnect("127.0.0.1", bench_port_of(url));
  if (c == NULL || c->err) {
    fprintf(stderr, "dlock-bench: cannot connect to %s\n", bench_shown(url));
    exit(1);
  }
  for (int i = 0; i < DLOCK__SCRIPT_COUNT; i++)
    freeReplyObject(redisCommand(c, "SCRIPT LOAD %b", dlock__scripts[i].body,
                                 dlock__scripts[i].len));
  return c;
}

/* script's EVALSHA appended to c's output (sent by the next
 * redisGetReply, with whatever was appended before it). */
static void raw_append(redisContext *c, int script, int nkeys,
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
  redisAppendCommandArgv(c, 3 + argc, a, l);
}

static redisReply *raw_reply(redisContext *c) {
  void *r = NULL;
  return redisGetReply(c, &r) == REDIS_OK ? r : NULL;
}

redisReply *bench_raw_eval(redisContext *c, int script, int nkeys, const char **argv,
                     int argc) {
  raw_append(c, script, nkeys, argv, argc);
  return raw_reply(c);
}

/* One lock+unlock with the reentrant scripts: two round trips. publish:
 * PUBLISH, or SPUBLISH on a cluster node (as dlock does there). kept: the
 * unlock latch the name's last release left ("" none), deleted in front of
 * the lock call, in its write, as Redisson and dlock delete theirs (a
 * latch kept for 60 s a pair was 1.2 million live keys a minute at 20,000
 * pairs/s, and a command a pair less than dlock runs); then this
 * release's. */
void bench_raw_pair(redisContext *c, const char *name, const char *owner, long seq,
              const char *publish, int64_t *lock_us, char kept[RAW_LATCH_MAX]) {
  char latch[RAW_LATCH_MAX];
  static _Thread_local int64_t run; /* latch ids must never repeat */
  if (seq == 0 || run == 0)
    run = bench_now_us();
  snprintf(latch, sizeof latch, "redisson_unlock_latch:{%s}:%lld-%ld", name,
           (long long)run, seq);
  char channel[256];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  const char *acq[] = {name, "30000", owner};
  int64_t t0 = bench_now_us();
  if (kept[0])
    redisAppendCommand(c, "DEL %s", kept);
  raw_append(c, DLOCK__SCRIPT_LOCK_ACQUIRE, 1, acq, 3);
  if (kept[0])
    freeReplyObject(raw_reply(c));
  freeReplyObject(raw_reply(c));
  if (lock_us)
    *lock_us = bench_now_us() - t0;
  const char *rel[] = {name, latch, "30000", owner, "60000", publish, channel, "0"};
  freeReplyObject(bench_raw_eval(c, DLOCK__SCRIPT_LOCK_RELEASE, 2, rel, 8));
  snprintf(kept, RAW_LATCH_MAX, "%s", latch);
}

typedef struct pair_arg {
  int id;
  int raw;
  dlock_client *client;
  const rs_cluster *cluster; /* raw: routed by hand over its
                                        masters; NULL: the single server */
  const char *url;                   /* raw on that single server: this
                                        one (NULL: urls[0]) */
} pair_arg;

/* A raw client routed by hand: a connection to every master of k, and for
 * each name the one that serves it (the one that does not answer MOVED). */
static void route_by_hand(const rs_cluster *k, char names[32][96],
                          redisContext *conns[], redisContext *by_name[32]) {
  for (int i = 0; i < k->n; i++)
    conns[i] = bench_raw_connect(k->node[i].url);
  for (int j = 0; j < 32; j++) {
    by_name[j] = NULL;
    for (int i = 0; i < k->n && by_name[j] == NULL; i++) {
      redisReply *r = redisCommand(conns[i], "EXISTS %s", names[j]);
      if (r && r->type == REDIS_REPLY_INTEGER)
        by_name[j] = conns[i];
      freeReplyObject(r);
    }
    if (by_name[j] == NULL)
      bench_die("a cluster master that serves a name", -1);
  }
}

/* A thread's means for pairs: dlock's locks and/or raw connections, on
 * the same 32 names. */
typedef struct pair_kit {
  char names[32][96];
  dlock_lock *locks[32];
  redisContext *conns[DLOCK_TOOL_CLUSTER_MAX], *by_name[32];
  int nconns;
  char owner[64];
  char kept[32][RAW_LATCH_MAX]; /* each name's unlock latch (raw_pair) */
} pair_kit;

static void kit_open(pair_kit *k, const pair_arg *a, int raw, int mine) {
  memset(k, 0, sizeof *k);
  k->nconns = a->cluster ? a->cluster->n : 1;
  for (int i = 0; i < 32; i++)
    snprintf(k->names[i], sizeof k->names[i], "bench:pair:%d:%d", a->id, i);
  if (raw && a->cluster) {
    route_by_hand(a->cluster, k->names, k->conns, k->by_name);
  } else if (raw) {
    k->conns[0] = bench_raw_connect(a->url ? a->url : bench_opt.urls[0]);
    for (int i = 0; i < 32; i++)
      k->by_name[i] = k->conns[0];
  }
  for (int i = 0; mine && i < 32; i++)
    dlock_reentrant_lock_new(a->client, k->names[i], NULL, &k->locks[i]);
  snprintf(k->owner, sizeof k->owner, "raw-%d:1", a->id);
}

/* Pair number seq, raw or dlock's: the lock call's time (us). */
static int64_t kit_pair(pair_kit *k, const pair_arg *a, int raw, long seq) {
  int64_t lat;
  if (raw) {
    bench_raw_pair(k->by_name[seq % 32], k->names[seq % 32], k->owner, seq,
             a->cluster ? "SPUBLISH" : "PUBLISH", &lat, k->kept[seq % 32]);
    return lat;
  }
  int64_t t0 = bench_now_us();
  int rc = dlock_acquire(k->locks[seq % 32], 0, 30000);
  if (rc != DLOCK_OK) /* held: a bench killed before left it (30 s) */
    bench_die("acquire", rc);
  lat = bench_now_us() - t0;
  dlock_release(k->locks[seq % 32]);
  return lat;
}

static void kit_close(pair_kit *k) {
  for (int i = 0; i < 32; i++)
    if (k->kept[i][0])
      freeReplyObject(redisCommand(k->by_name[i], "DEL %s", k->kept[i]));
  for (int i = 0; i < k->nconns; i++)
    if (k->conns[i])
      redisFree(k->conns[i]);
  for (int i = 0; i < 32; i++)
    dlock_lock_free(k->locks[i]);
}

static void *pair_thread(void *p) {
  pair_arg *a = p;
  pair_kit k;
  kit_open(&k, a, a->raw, !a->raw);
  for (long seq = 0; !atomic_load(&bench_sh->stop); seq++) {
    int64_t lat = kit_pair(&k, a, a->raw, seq);
    if (a->id == 0)
      bench_sample(lat);
    atomic_fetch_add(&bench_sh->pairs, 1);
  }
  kit_close(&k);
  return NULL;
}

/* pairs/s and lock p50/p99 for n threads, raw (on cluster's masters,
 * NULL: the single server) or dlock */
void bench_pairs_on(int n, int raw, const rs_cluster *cluster,
              const char *url, dlock_client *c, double *rate,
              double *p50, double *p99) {
  bench_reset();
  pair_arg args[MAX_THREADS];
  for (int i = 0; i < n; i++)
    args[i] = (pair_arg){i, raw, c, cluster, url};
  double secs = bench_run_threads(n, pair_thread, args, sizeof args[0], bench_opt.duration);
  *rate = (double)atomic_load(&bench_sh->pairs) / secs;
  long ns = bench_nsamples();
  *p50 = bench_pct(bench_sh->samples, ns, 50);
  *p99 = bench_pct(bench_sh->samples, ns, 99);
}

void bench_pairs_at(int n, int raw, const rs_cluster *cluster,
              dlock_client *c, double *rate, double *p50, double *p99) {
  bench_pairs_on(n, raw, cluster, NULL, c, rate, p50, p99);
}

void bench_pairs(int n, int raw, dlock_client *c, double *rate, double *p50,
           double *p99) {
  bench_pairs_at(n, raw, NULL, c, rate, p50, p99);
}

/* ---- raw and dlock in turns (W1, W2) ----------------------------------- */

/* W1 and W2 compare dlock with raw in turns: the same threads run raw
 * pairs and dlock pairs by slices of TURN_US in alternation, and each
 * side's figures sum its slices. Two runs one after the other met two
 * machine states whenever the machine changed between them: beside two
 * CPU hogs, where the scheduler puts a one-thread loop beside the server
 * or away from it changed either's pairs/s by 4x from run to run. */
#define TURN_US 200000

static struct {
  atomic_int side;  /* 0 raw, 1 dlock, -1 not begun */
  atomic_int ready; /* threads with their connections and locks */
  atomic_long pairs[2];
  atomic_long nlat[2];
  int64_t lat[2][MAX_SAMPLES]; /* thread 0's lock call times */
} turns;

static void *turns_thread(void *p) {
  pair_arg *a = p;
  pair_kit k;
  kit_open(&k, a, 1, 1);
  atomic_fetch_add(&turns.ready, 1);
  for (long seq = 0; !atomic_load(&bench_sh->stop); seq++) {
    int side = atomic_load(&turns.side);
    if (side < 0) { /* the others are still getting ready */
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
      continue;
    }
    int64_t lat = kit_pair(&k, a, side == 0, seq);
    long i = a->id == 0 ? atomic_fetch_add(&turns.nlat[side], 1) : -1;
    if (i >= 0 && i < MAX_SAMPLES)
      turns.lat[side][i] = lat;
    atomic_fetch_add(&turns.pairs[side], 1);
  }
  kit_close(&k);
  return NULL;
}

int bench_server_read(redisContext *rc, server_counters *out) {
  redisReply *r = rc ? redisCommand(rc, "INFO cpu") : NULL;
  redisReply *s = rc ? redisCommand(rc, "INFO commandstats") : NULL;
  int ok = r && s && r->type == REDIS_REPLY_STRING && s->type == REDIS_REPLY_STRING;
  double user = 0, sys = 0, usec = 0;
  long long calls = 0;
  if (ok) {
    const char *u = strstr(r->str, "used_cpu_user:"), *y = strstr(r->str, "used_cpu_sys:");
    ok = u && y;
    if (ok) {
      user = atof(u + 14);
      sys = atof(y + 13);
    }
    for (const char *p = s->str; ok && (p = strstr(p, "cmdstat_")) != NULL; p++) {
      const char *us = strstr(p, "usec="), *n = strstr(p, "calls=");
      if (strncmp(p, "cmdstat_info:", 13) != 0 && us && n) {
        usec += atof(us + 5);
        calls += atoll(n + 6);
      }
    }
  }
  if (r)
    freeReplyObject(r);
  if (s)
    freeReplyObject(s);
  out->cpu_s = ok ? user + sys : -1;
  out->cmd_us = ok ? usec : -1;
  out->calls = ok ? calls : -1;
  return ok ? 0 : -1;
}

static void turn_figures(int side, int64_t us, const run_cost *cost,
                         pair_figures *f) {
  long n = atomic_load(&turns.pairs[side]);
  long ns = atomic_load(&turns.nlat[side]);
  ns = ns < MAX_SAMPLES ? ns : MAX_SAMPLES;
  f->pairs = n;
  f->rate = us > 0 ? (double)n * 1e6 / (double)us : 0;
  f->p50 = bench_pct(turns.lat[side], ns, 50);
  f->p99 = bench_pct(turns.lat[side], ns, 99);
  f->cpu = n > 0 ? (double)(cost->user_us + cost->sys_us) / (double)n : NAN;
  f->cost = *cost;
  f->lat = turns.lat[side];
  f->nlat = ns;
  f->server_cpu = f->server_cmd = NAN;
}

void bench_pairs_in_turns(int n, dlock_client *c, pair_figures *raw,
                    pair_figures *mine) {
  pthread_t t[MAX_THREADS];
  pair_arg args[MAX_THREADS];
  bench_reset();
  atomic_store(&turns.side, -1);
  atomic_store(&turns.ready, 0);
  for (int s = 0; s < 2; s++) {
    atomic_store(&turns.pairs[s], 0);
    atomic_store(&turns.nlat[s], 0);
  }
  for (int i = 0; i < n; i++) {
    args[i] = (pair_arg){i, 1, c, NULL, NULL};
    pthread_create(&t[i], NULL, turns_thread, &args[i]);
  }
  for (int i = 0; i < 30000 && atomic_load(&turns.ready) < n; i++)
    usleep(1000); /* up to 30 s for the connections */
  (void)bench_cost_open(); /* every thread has one counter of its own now */
  int slices = (int)(bench_opt.duration * 1e6 / TURN_US + 0.5);
  slices = slices < 1 ? 1 : slices;
  int64_t us[2] = {0, 0};
  run_cost cost[2] = {{0, 0, 0}, {0, 0, 0}}, at, was;
  /* the server's share: its counters read at each switch (by this thread,
   * on a connection of its own: a few calls per slice, on both sides) */
  redisContext *srv = bench_opt.server_private
                          ? redisConnect("127.0.0.1", bench_port_of(bench_opt.urls[0]))
                          : NULL;
  server_counters s_was, s_at;
  double s_cpu[2] = {0, 0}, s_cmd[2] = {0, 0};
  int s_ok = srv && !srv->err && bench_server_read(srv, &s_was) == 0;
  bench_cost_now(&was);
  int64_t t0 = bench_now_us();
  for (int k = 0; k < 2 * slices; k++) {
    int side = k % 2;
    atomic_store(&turns.side, side);
    struct timespec ts = {0, TURN_US * 1000L};
    nanosleep(&ts, NULL);
    int64_t bench_t1 = bench_now_us();
    bench_cost_now(&at);
    us[side] += bench_t1 - t0;
    bench_cost_add(&cost[side], &was, &at);
    t0 = bench_t1;
    was = at;
    if (s_ok && (s_ok = bench_server_read(srv, &s_at) == 0)) {
      s_cpu[side] += (s_at.cpu_s - s_was.cpu_s) * 1e6;
      s_cmd[side] += s_at.cmd_us - s_was.cmd_us;
      s_was = s_at;
    }
  }
  if (srv)
    redisFree(srv);
  atomic_store(&bench_sh->stop, 1);
  for (int i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  bench_counters_close();
  turn_figures(0, us[0], &cost[0], raw);
  turn_figures(1, us[1], &cost[1], mine);
  pair_figures *f[2] = {raw, mine};
  for (int side = 0; s_ok && side < 2; side++)
    if (f[side]->pairs > 0) {
      f[side]->server_cpu = s_cpu[side] / (double)f[side]->pairs;
      f[side]->server_cmd = s_cmd[side] / (double)f[side]->pairs;
    }
}
