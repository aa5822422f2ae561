/* dlock-bench: the workloads of docs/performance.md, each figure next to
 * a bound measured in the same run on the same server(s).
 *
 *   dlock-bench [--duration S] [--workload ID] [--url URL] [--json FILE]
 *               [--threads N] [--w4-seconds S] [--peers]
 *               [--direct N] [--spin US]
 *
 * --peers adds W1, W2 and W6 beside node-redlock, redis-semaphore,
 * node-redisson (bench/peers/peers.js, Node.js), redis-py, redsync and
 * Redisson, and W9 beside the Node.js peers, on the same server: value
 * dlock's figure, bound the peer's. --direct and --spin set the clients'
 * direct_conns and spin_us (docs/client.md) to compare them.
 *
 * Without --url it starts its own loopback redis-server(s) (one, plus four
 * more for W5). Prints one line per figure:
 *   workload  metric  value  unit  bound  ratio
 * and writes the same as JSON (default build/bench/dlock-bench.json). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlock/dlock.h>

#include "bench.h"

/* ---- main ------------------------------------------------------------------ */

/* The workloads in the order they run. */
static const struct {
  const char *id;  /* what --workload selects */
  void (*run)(bench_bounds *b);
  int always;      /* runs whatever is selected; -1: only when named */
} workloads[] = {
    {"W3p", bench_w3p, 0},        /* first: it forks */
    {"W1", bench_w1_w2, 1},       /* W1 and W2; measures the raw round trip the
                               others compare with */
    {"W3", bench_w3, 0},
    {"W3p", bench_w3p_report, 0},
    {"W4", bench_w4, 0},
    {"W5", bench_w5, 0},
    {"W6", bench_w6, 0},
    {"S1", bench_s1, 0},
    {"M2", bench_m2, 0},
    {"E1", bench_e1, 0},
    {"W7", bench_w7, 0},
    {"W8", bench_w8, 0},
    {"M1", bench_m1, 0},
    {"W9", bench_w9, 0},
    {"W10", bench_w10, 0},
    {"C1", bench_c1, 0},
    {"C2", bench_c2, 0},
    {"T1", bench_t1, 0},
    {"V1", bench_v1, 0},
    {"D1", bench_d1, 0},
    {"G1", bench_g1, 0},
    {"F1", bench_f1, -1},
    {"SWT", bench_sweep_threads, -1},
    {"SWN", bench_sweep_names, -1},
    {"SWH", bench_sweep_holds, -1},
    {"SWW", bench_sweep_waiters, -1},
};

/* The help: on stdout with status 0 when asked for (--help), else on
 * stderr with status 2. */
static void usage_to(FILE *to, int status) {
  fprintf(to,
          "usage: dlock-bench [--duration S] [--workload ID[,ID...]] [--url URL] "
          "[--json FILE] [--threads N] [--w4-seconds S] [--peers]\n"
          "                   [--direct N] [--spin US] [--down-after MS] [--plot DIR]\n"
          "                   [--pin] [--private-server] [--sweep WHAT]\n"
          "workloads: W1 W2 W3 W3p W4 W5 W6 S1 M2 E1 W7 W8 M1 W9 W10 C1 C2 T1 V1\n"
          "  D1 G1 (default: all;\n"
          "  S1: the spin lock's hand-off beside the pub/sub lock's, 8 waiters;\n"
          "  M2: a group of 100 values beside a multi-lock of 100 locks;\n"
          "  E1: an election's hand-over, and 10,000 observers of it;\n"
          "  C1: W1 and W3 on a throwaway 3-master cluster beside one server;\n"
          "  C2: W1 with the replica guard on a cluster with replicas;\n"
          "  T1: W1 and W3 over TLS beside plain TCP;\n"
          "  V1: W1 on valkey-server beside the first server;\n"
          "  D1: W1 with durable grants (WAITAOF) on valkey-server;\n"
          "  G1: a guarded write beside the same SET from plain hiredis),\n"
          "  and F1 when named: kill -9 of the master to the first acquire on\n"
          "  a sentinel setup and on a cluster, with the servers' default\n"
          "  detection times unless --down-after MS;\n"
          "  and the sweeps when named (--sweep): SWT threads 1..64, SWN\n"
          "  names 1..10^6, SWH watchdog holds 10^2..10^6, SWW waiters\n"
          "  1..10^4 on a lock and a fair lock)\n"
          "options:\n"
          "  --duration S     seconds each measured side runs (default 2)\n"
          "  --workload IDS   the workloads to run, comma-separated\n"
          "  --url URL        a redis:// server to measure on (up to 5; default:\n"
          "                   throwaway servers the bench starts itself)\n"
          "  --json FILE      every row as JSON too (default dlock-bench.json)\n"
          "  --threads N      W2's threads (default 16)\n"
          "  --w4-seconds S   how long W4 keeps its 10,000 holds (default 10)\n"
          "  --peers          W1, W2, W6 (and W9) beside the other lock libraries\n"
          "                   found\n"
          "  --direct N       the direct path's pooled connections\n"
          "  --spin US        the spin lock's first pause (S1)\n"
          "  --down-after MS  F1's failure detection time\n"
          "  --plot DIR       draw the pictures of the rows (gnuplot) into DIR\n"
          "  --pin            the servers it starts on core 0, the bench and its\n"
          "                   peers on core 1 (a server on another host)\n"
          "  --sweep WHAT     threads, names, holds or waiters: that sweep (SWT,\n"
          "                   SWN, SWH, SWW) and W1\n"
          "  --private-server the first --url serves this bench alone: W1 and\n"
          "                   W2 measure the server's CPU and command time per\n"
          "                   pair, W6 its CPU per grant, and each peer's too\n"
          "                   (always on the servers the bench starts)\n"
          "  --help           this text\n");
  exit(status);
}

static void usage(void) { usage_to(stderr, 2); }

/* Every thread of process pid on cpu alone: 0, or -1 (errno). */
static int pin_process(pid_t pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (d == NULL)
    return -1;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.' &&
        sched_setaffinity((pid_t)atoi(e->d_name), sizeof set, &set) != 0)
      rc = -1;
  closedir(d);
  return rc;
}

/* The command line into opt: 0, or 2 (said why). */
static int parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
      usage_to(stdout, 0);
    if (!strcmp(argv[i], "--peers")) { /* beside the other libraries */
      bench_opt.peers = 1;
      continue;
    }
    if (!strcmp(argv[i], "--private-server")) { /* --url's: no one else's */
      bench_opt.server_private = 1;
      continue;
    }
    if (!strcmp(argv[i], "--sweep") && i + 1 < argc) { /* a sweep: its id */
      const char *w = argv[++i];
      bench_opt.only = !strcmp(w, "threads") ? "W1,SWT"
                       : !strcmp(w, "names") ? "W1,SWN"
                       : !strcmp(w, "holds") ? "W1,SWH"
                       : !strcmp(w, "waiters") ? "W1,SWW" : NULL;
      if (bench_opt.only == NULL)
        usage();
      continue;
    }
    if (!strcmp(argv[i], "--pin")) { /* server and clients a core each */
      bench_opt.pin = 1;
      continue;
    }
    if (i + 1 >= argc)
      usage();
    if (!strcmp(argv[i], "--duration"))
      bench_opt.duration = atof(argv[++i]);
    else if (!strcmp(argv[i], "--workload"))
      bench_opt.only = argv[++i];
    else if (!strcmp(argv[i], "--url") && !strncmp(argv[i + 1], "rediss", 6)) {
      /* the raw bounds are plain hiredis */
      fprintf(stderr, "dlock-bench: --url takes plain redis:// servers; T1 "
              "measures TLS on a server of its own\n");
      return 2;
    } else if (!strcmp(argv[i], "--url") && bench_opt.nurls == 5) {
      fprintf(stderr, "dlock-bench: at most 5 --url (W5's RedLock has 5 "
              "masters); a sixth would replace one\n");
      return 2;
    } else if (!strcmp(argv[i], "--url") && strlen(argv[i + 1]) >= sizeof bench_opt.urls[0]) {
      fprintf(stderr, "dlock-bench: --url longer than %zu bytes\n",
              sizeof bench_opt.urls[0] - 1);
      return 2;
    } else if (!strcmp(argv[i], "--url")) {
      snprintf(bench_opt.urls[bench_opt.nurls++], sizeof bench_opt.urls[0], "%s", argv[++i]);
    } else if (!strcmp(argv[i], "--json"))
      bench_opt.json_path = argv[++i];
    else if (!strcmp(argv[i], "--threads"))
      bench_opt.threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--direct"))
      bench_opt.direct = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--spin"))
      bench_opt.spin = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--w4-seconds"))
      bench_opt.w4_secs = atof(argv[++i]);
    else if (!strcmp(argv[i], "--down-after"))
      bench_opt.down_after_ms = atol(argv[++i]);
    else if (!strcmp(argv[i], "--plot"))
      bench_opt.plot_dir = argv[++i];
    else
      usage();
  }
  return 0;
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0)
    return 2;
  if (bench_opt.plot_dir && mkdir(bench_opt.plot_dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "dlock-bench: --plot %s: %s\n", bench_opt.plot_dir,
            strerror(errno));
    return 2;
  }
  if (bench_opt.duration <= 0 || bench_opt.w4_secs <= 0 || bench_opt.threads < 1 || bench_opt.down_after_ms < 0 ||
      bench_opt.threads > MAX_THREADS)
    usage();
  bench_sh = mmap(NULL, sizeof *bench_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
            -1, 0);
  rs_server servers[5];
  int own = bench_opt.nurls == 0;
  if (own) {
    bench_opt.server_private = 1;
    for (int i = 0; i < 5; i++) {
      if (rs_server_start(&servers[i]) != 0)
        return 1;
      snprintf(bench_opt.urls[i], sizeof bench_opt.urls[i], "%s", servers[i].url);
    }
    bench_opt.nurls = 5;
  }
  if (bench_opt.pin) {
    /* the servers (every thread) on core 0, this process (and what it
     * starts: its threads, the peers) on core 1 */
    int ok = own && sysconf(_SC_NPROCESSORS_ONLN) >= 2;
    for (int i = 0; ok && i < 5; i++)
      ok = pin_process(servers[i].pid, 0) == 0;
    if (ok)
      ok = pin_process(getpid(), 1) == 0;
    if (!ok) {
      fprintf(stderr, "dlock-bench: --pin needs two cores and the servers "
              "the bench starts (no --url): %s\n", strerror(errno));
      return 2;
    }
  }
  int json = bench_json_open(bench_opt.json_path);
  bench_bounds bounds = {.w1_server_cpu = NAN, .w2_server_cpu = NAN};
  printf("dlock-bench %s, %.1f s per workload, server %s%s\n", DLOCK_VERSION_STRING,
         bench_opt.duration, bench_shown(bench_opt.urls[0]),
         bench_opt.pin ? " (pinned: servers on core 0, clients on core 1)" : "");
  printf("%-4s %-26s %12s %-8s %12s %7s\n", "id", "metric", "value", "unit",
         "bound", "ratio");
  for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++)
    if (workloads[i].always > 0 ||
        (workloads[i].always == 0 && bench_selected(workloads[i].id)) ||
        (workloads[i].always < 0 && bench_opt.only && bench_selected(workloads[i].id)))
      workloads[i].run(&bounds);
  bench_json_close();
  if (json)
    printf("figures written to %s\n", bench_opt.json_path);
  int drawn = bench_plot_draw();
  if (own)
    for (int i = 0; i < 5; i++)
      rs_server_stop(&servers[i]);
  return bench_opt.plot_dir && drawn == 0 ? 1 : 0; /* --plot drew nothing */
}
