/* What dlock-bench's workloads share (common.c): the options, the output,
 * the counters and samples (shared across fork), the clients, the raw
 * bound over plain hiredis, and the figures one workload hands another
 * (bench_bounds). One file per workload family: locks.c (W1, W2, W3, W3p,
 * W4, W6, W7, S1, M2), election.c (E1), redlock.c (W5), sync.c (W8, M1), async.c (W9, W10),
 * topology.c (C1, C2, V1, D1, G1, F1, T1); main.c runs them in order. */
#ifndef DLOCK_BENCH_H
#define DLOCK_BENCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <dlock/dlock.h>
#include <hiredis/hiredis.h>

#include "redis_server.h"

#define MAX_SAMPLES 200000
#define MAX_THREADS 64

/* The command line (main.c). */
typedef struct bench_opts {
  double duration;       /* seconds per workload */
  const char *only;      /* --workload ID[,ID...], or NULL: all */
  const char *json_path; /* --json FILE (default: in the build tree) */
  int threads;           /* --threads N (W2 and the like) */
  int direct;            /* --direct N: client option direct_conns (-1: its default) */
  int spin;              /* --spin US: client option spin_us (-2: its default) */
  double w4_secs;        /* W4 holds this long */
  char urls[5][128];     /* --url, or the servers it started */
  int nurls;
  int peers;             /* --peers: W1, W2 beside the Node.js peers */
  long down_after_ms;    /* --down-after (F1); 0: the servers' defaults */
  char tls_ca[96];       /* T1: the test CA, for rediss:// URLs */
  const char *plot_dir;  /* --plot DIR: pictures of the run (plot.c) */
  int pin;               /* --pin: the servers on core 0, the bench and its
                            peers on core 1 (a server on another host) */
  int server_private;    /* the first server is the bench's alone (its own,
                            or --private-server): its CPU counters measure
                            each side's share (W1, W2) */
} bench_opts;

extern bench_opts bench_opt;

/* The figures one workload measures and later ones compare with, all from
 * the same run: 0 until measured (a later workload that needs one measures
 * it itself when its maker was not selected). */
typedef struct bench_bounds {
  double raw_rtt;          /* raw p50 of one script round trip (W1) */
  double w1_p50;           /* dlock's single-server lock p50 (W1): W5's bound */
  double w1_rate, w2_rate; /* dlock's W1 and W2 pairs/s: the peers', W9's */
  double w1_server_cpu, w2_server_cpu; /* dlock's server CPU per pair (us;
                                        * NaN unless the server is private) */
  double w3_p50;           /* W3's hand-off p50: W10's bound */
} bench_bounds;

/* ---- output -------------------------------------------------------------- */

int64_t bench_now_us(void);
/* One figure: a line, and a JSON record when a file is open (json). */
void bench_emit(const char *w, const char *metric, double value, const char *unit,
          double bound);
void bench_na(const char *w, const char *why);
/* Is workload w selected (--workload ID or a list ID,ID,...)? */
int bench_selected(const char *w);
/* The JSON file of the figures: opened by main.c (1, or 0 when it cannot
 * be: figures on stdout only), closed at the end. */
int bench_json_open(const char *path);
void bench_json_close(void);
int bench_cmp64(const void *a, const void *b);
/* The p-th percentile of v[0..n) (sorted here). */
double bench_pct(int64_t *v, long n, double p);
void bench_die(const char *what, int rc) __attribute__((noreturn));
/* url without its password. */
const char *bench_shown(const char *url);

/* ---- clients ------------------------------------------------------------- */

/* The client options every workload's clients start from. */
dlock_client_opts bench_client_opts(void);
dlock_client *bench_open_client(const char *url, int64_t watchdog_ms);
int bench_port_of(const char *url);

/* ---- shared state (also across fork) ------------------------------------- */

typedef struct shared {
  atomic_int stop;
  atomic_llong released_us;
  atomic_int inside, max_inside;
  atomic_long nsamples;
  atomic_long pairs;
  atomic_long counts[MAX_THREADS];
  /* fairness: the longest wait (call to grant), the last holder and the
   * longest run of grants to one thread back to back */
  atomic_llong max_wait_us;
  atomic_int last_holder, run, max_run;
  atomic_long nrec;
  int64_t samples[MAX_SAMPLES];
  int64_t rec_call[MAX_SAMPLES], rec_got[MAX_SAMPLES];
} shared;

extern shared *bench_sh;

void bench_reset(void);
void bench_sample(int64_t v);
long bench_nsamples(void);
typedef void *(*thread_fn)(void *);
/* CPU time per pair of the last run_threads (microseconds; sh->pairs). */
double bench_cpu_per_pair(void);
/* Run n threads of fn(arg i) for secs seconds (they watch sh->stop). */
double bench_run_threads(int n, thread_fn fn, void *args, size_t arg_size,
                   double secs);

/* ---- what a run costs the client (cost.c) --------------------------------- */

typedef struct run_cost {
  int64_t user_us, sys_us; /* the process's CPU time, every thread */
  double syscalls;         /* system calls, every thread (NaN: not counted) */
} run_cost;

/* Around a run (run_threads does it): *c is then the run's cost. */
void bench_cost_begin(run_cost *c);
void bench_cost_end(run_cost *c);
/* Piecewise: counters on every thread alive now (0, or -1 when system
 * calls cannot be counted: NaN then), the cost so far at any moment, the
 * cost from one moment to another added to *sum, and counters_close. */
int bench_cost_open(void);
void bench_cost_now(run_cost *c);
void bench_cost_add(run_cost *sum, const run_cost *from, const run_cost *to);
void bench_counters_close(void);
/* The cost of the last run_threads. */
run_cost bench_last_cost(void);
/* w's rows "user CPU per pair", "system CPU per pair" and "system calls
 * per pair": dlock's beside raw's. */
void bench_emit_costs(const char *w, long dlock_pairs, const run_cost *dlock,
                long raw_pairs, const run_cost *raw);

/* ---- the raw bound: plain hiredis, the same scripts ----------------------- */

redisContext *bench_raw_connect(const char *url);
redisReply *bench_raw_eval(redisContext *c, int script, int nkeys, const char **argv,
                     int argc);
/* One raw lock+unlock (common.c): kept holds the name's last unlock latch,
 * deleted in front of the lock call. */
#define RAW_LATCH_MAX 256
void bench_raw_pair(redisContext *c, const char *name, const char *owner, long seq,
              const char *publish, int64_t *lock_us, char kept[RAW_LATCH_MAX]);
/* n threads of lock/unlock pairs, dlock's (client c) or raw: pairs/s and
 * the lock call's p50 and p99 (us). On a cluster (raw): routed by hand
 * over its masters; on one server: url (NULL: the first). */
void bench_pairs_on(int n, int raw, const rs_cluster *cluster,
              const char *url, dlock_client *c, double *rate, double *p50,
              double *p99);
void bench_pairs_at(int n, int raw, const rs_cluster *cluster,
              dlock_client *c, double *rate, double *p50, double *p99);
void bench_pairs(int n, int raw, dlock_client *c, double *rate, double *p50,
           double *p99);
/* One side's figures of pairs_in_turns. */
typedef struct pair_figures {
  long pairs;
  double rate, p50, p99; /* pairs/s; the lock call's p50 and p99 (us) */
  double cpu;            /* CPU time per pair (us) */
  run_cost cost;
  int64_t *lat;          /* the lock call times sampled (thread 0's) */
  long nlat;
  /* the server's share (bench_opt.server_private; else NaN): its CPU time
   * per pair (INFO cpu) and the time its commands took per pair (INFO
   * commandstats' usec, INFO's own left out), us */
  double server_cpu, server_cmd;
} pair_figures;
/* n threads of pairs on the single server, raw and dlock's (client c) in
 * turns: slices of 200 ms in alternation, opt.duration in all for each. */
void bench_pairs_in_turns(int n, dlock_client *c, pair_figures *raw,
                    pair_figures *mine);
/* The server's counters: CPU seconds (user + system, INFO cpu), the usec
 * its commands took and their number (INFO commandstats: a script's own
 * commands counted too, INFO's left out); 0, or -1 when they cannot be
 * read. */
typedef struct server_counters {
  double cpu_s, cmd_us;
  long long calls;
} server_counters;
int bench_server_read(redisContext *rc, server_counters *out);

/* ---- the workloads (main.c's table) --------------------------------------- */

void bench_w1_w2(bench_bounds *b);
void bench_w3(bench_bounds *b);
void bench_w3p(bench_bounds *b);
void bench_w3p_report(bench_bounds *b);
void bench_w4(bench_bounds *b);
void bench_w5(bench_bounds *b);
void bench_w6(bench_bounds *b);
void bench_s1(bench_bounds *b);
void bench_m2(bench_bounds *b);
void bench_e1(bench_bounds *b);
void bench_w7(bench_bounds *b);
void bench_w8(bench_bounds *b);
void bench_m1(bench_bounds *b);
void bench_w9(bench_bounds *b);
void bench_w10(bench_bounds *b);
void bench_c1(bench_bounds *b);
void bench_c2(bench_bounds *b);
void bench_v1(bench_bounds *b);
void bench_d1(bench_bounds *b);
void bench_g1(bench_bounds *b);
void bench_f1(bench_bounds *b);
void bench_t1(bench_bounds *b);
/* Whether Node.js runs here, asked once (the Node.js peers need it;
 * locks.c). */
int bench_node_found(void);
/* One peer's figures on a workload: pairs/s (W6: grants/s), the lock
 * call's p50 and (W6) the hand-off p50, us (NaN when it has none); the
 * server's CPU per pair (W6: per grant) over the peer's whole run, us (NaN
 * unless the server is private: bench_opt.server_private). */
typedef struct peer_figures {
  double rate, p50, handoff, server_cpu;
} peer_figures;
/* One peer (bench/peers: a Node.js library, redis-py, Redisson or redsync)
 * on workload w: 1 with its figures, 0 with *why set (locks.c). With
 * --plot, its latency (W6: hand-off) by percentile goes to W1's or W6's
 * chart. */
int bench_run_peer(const char *peer, const char *w, peer_figures *out,
                   char *why, size_t whylen);

/* ---- pictures (plot.c, --plot DIR) ---------------------------------------- */

#define PLOT_POINTS 21 /* percentiles 1, 5, 10, ..., 95, 99 */
const double *bench_plot_percentiles(void);
/* A curve on chart: us[i] at plot_percentiles()[i]. */
void bench_plot_points(const char *chart, const char *label, const double *us);
/* A curve on chart from n samples (sorted here). */
void bench_plot_samples(const char *chart, const char *label, int64_t *v, long n);
/* A throughput figure's ratio, for the ratios chart (emit() calls it). */
void bench_plot_ratio(const char *w, const char *metric, const char *unit,
                double ratio);
/* Draw the charts into opt.plot_dir: how many were drawn. */
int bench_plot_draw(void);
/* A sweep's point (x, y) on chart's curve label (sweep.c). */
void bench_plot_xy(const char *chart, const char *label, double x, double y);
/* What n locks held under the watchdog cost (locks.c: W4, SWH): renewal
 * calls per second and per 100 holds per tick, the client's CPU (% of a
 * core), the client's memory per hold, how many were still held. */
typedef struct holds_figures {
  double calls_per_s, calls_per_tick_100, cpu_pct, bytes_per_hold;
  long held;
} holds_figures;
void bench_holds(long n, int64_t watchdog_ms, double secs, holds_figures *f);
long bench_resident(void);
/* n async waiters on one lock (fair: a fair lock, else a reentrant one),
 * served by one thread, each holding 1 ms (async.c: W10, SWW): the client
 * heap and threads each adds, the hand-offs in bench_opt.duration and
 * their p50 (release's completion to the next grant's), the server's
 * commands per grant. */
typedef struct waiters_figures {
  double bytes_per_waiter, p50, commands_per_grant;
  int threads_added, handoffs;
} waiters_figures;
void bench_waiters(int n, int fair, waiters_figures *f);
/* The sweeps (sweep.c): threads, names, holds, waiters. */
void bench_sweep_threads(bench_bounds *b);
void bench_sweep_names(bench_bounds *b);
void bench_sweep_holds(bench_bounds *b);
void bench_sweep_waiters(bench_bounds *b);
/* Busy for us microseconds (locks.c). */
void bench_spin_us(int64_t us);
/* The heap in use, bytes (sync.c). */
size_t bench_heap_used(void);
/* W3's run (locks.c), for T1 and W10: hand-off p50 (us) on url; w: the
 * figures' workload, or NULL: measured only. */
double bench_handoff_run(bench_bounds *b, const char *url, const char *name,
                   const char *w);

#endif
