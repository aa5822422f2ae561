/* Smoke test of dlock-bench: every workload (C1 on a throwaway cluster
 * included) runs for a fraction of a second
 * and produces sane figures. No timing is asserted: speed is the benchmark's
 * business, not the test suite's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* What the last bench_json run printed (its table). */
static char bench_stdout[65536];

/* Run dlock-bench (DLOCK_BENCH) with args, its figures written as JSON into
 * text (NUL-terminated) and its table into bench_stdout; 0 when it exited 0
 * within timeout_ms and wrote them. */
static int bench_json(char *const args[], int timeout_ms, char *text, size_t size) {
  const char *bench = getenv("DLOCK_BENCH");
  if (bench == NULL)
    return -1;
  char json[64];
  snprintf(json, sizeof json, "/tmp/dlock-bench-test-%d.json", (int)getpid());
  char *argv[16] = {(char *)bench};
  int n = 1;
  for (int i = 0; args[i] && n < 13; i++)
    argv[n++] = args[i];
  argv[n++] = "--json";
  argv[n++] = json;
  argv[n] = NULL;
  char table[64];
  snprintf(table, sizeof table, "/tmp/dlock-bench-test-%d.out", (int)getpid());
  pid_t pid = fork();
  if (pid == 0) {
    if (freopen(table, "w", stdout) == NULL)
      _exit(126);
    execv(bench, argv);
    _exit(127);
  }
  int status = th_wait_worker(pid, timeout_ms);
  bench_stdout[0] = '\0';
  FILE *t = fopen(table, "r");
  if (t) {
    size_t tl = fread(bench_stdout, 1, sizeof bench_stdout - 1, t);
    bench_stdout[tl] = '\0';
    fclose(t);
    unlink(table);
  }
  FILE *f = fopen(json, "r");
  if (f == NULL)
    return -1;
  size_t len = fread(text, 1, size - 1, f);
  text[len] = '\0';
  fclose(f);
  unlink(json);
  return status;
}

/* dlock-bench's own servers are DLOCK_REDIS_SERVER's, as the suites' are:
 * a wrapper that marks a file and runs redis-server is the one started. */
static void test_server_binary(void) {
  char dir[64], wrapper[128], mark[128];
  snprintf(dir, sizeof dir, "/tmp/dlock-bench-bin-XXXXXX");
  CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
  snprintf(wrapper, sizeof wrapper, "%s/my-server", dir);
  snprintf(mark, sizeof mark, "%s/started", dir);
  FILE *f = fopen(wrapper, "w");
  CU_ASSERT_FATAL(f != NULL);
  fprintf(f, "#!/bin/sh\ntouch '%s'\nexec redis-server \"$@\"\n", mark);
  fclose(f);
  chmod(wrapper, 0755);
  setenv("DLOCK_REDIS_SERVER", wrapper, 1);
  static char text[16384];
  char *args[] = {"--duration", "0.1", "--workload", "W1", NULL};
  CU_ASSERT_EQUAL(bench_json(args, 60000, text, sizeof text), 0);
  unsetenv("DLOCK_REDIS_SERVER");
  CU_ASSERT_EQUAL(access(mark, F_OK), 0);
  unlink(mark);
  unlink(wrapper);
  rmdir(dir);
}

/* F1 runs only when named: kill -9 of the master on a sentinel setup and on
 * a cluster (1 s detection here), each followed by an acquire on the new
 * master within the bench's bound. */
static void test_failover_workload(void) {
  static char text[16384];
  char *args[] = {"--duration", "0.2", "--workload", "F1", "--down-after",
                  "1000", NULL};
  CU_ASSERT_EQUAL_FATAL(bench_json(args, 120000, text, sizeof text), 0);
  int found = 0;
  for (const char *p = strstr(text, "\"workload\": \"F1\""); p;
       p = strstr(p + 1, "\"workload\": \"F1\"")) {
    const char *v = strstr(p, "\"value\": ");
    double ms = v ? atof(v + 9) : NAN;
    CU_ASSERT(isfinite(ms) && ms > 0 && ms < 60000);
    found++;
  }
  CU_ASSERT_EQUAL(found, 2); /* sentinel and cluster */
}

/* Every row docs/performance.md quotes from dlock-bench (a table row whose
 * first cell is a code span `ID metric`, e.g. `W2 CPU per pair`) is one the
 * tool prints: the row in text (its JSON) names that workload and metric.
 * Returns how many rows were quoted. */
static int quoted_rows_printed(const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/performance.md", getenv("DLOCK_DOCS"));
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[1024];
  int quoted = 0;
  for (int n = 0; n < 5000 && fgets(line, sizeof line, f); n++) {
    if (strncmp(line, "| `", 3) != 0)
      continue;
    const char *id = line + 3, *end = strchr(id, '`');
    const char *sp = memchr(id, ' ', end ? (size_t)(end - id) : 0);
    if (end == NULL || sp == NULL)
      continue;
    char key[256];
    snprintf(key, sizeof key, "\"workload\": \"%.*s\", \"metric\": \"%.*s\"",
             (int)(sp - id), id, (int)(end - sp - 1), sp + 1);
    if (strstr(text, key) == NULL)
      fprintf(stderr, "\n  performance.md quotes a row not printed: %.*s",
              (int)(end - id), id);
    CU_ASSERT(strstr(text, key) != NULL);
    quoted++;
  }
  fclose(f);
  return quoted;
}

static double figure(const char *text, const char *w, const char *metric,
                     int bound);

static void test_every_workload_runs(void) {
  static char text[65536];
  char *args[] = {"--duration", "0.2", "--w4-seconds", "1", NULL};
  CU_ASSERT_EQUAL_FATAL(bench_json(args, 240000, text, sizeof text), 0);
  static const char *ids[] = {"W1", "W2", "W3", "W3p", "W4", "W5",
                              "W6", "S1 spin", "S1 pub/sub", "M2", "E1", "W7",
                              "W8", "M1", "W9", "W10", "C1", "C2", "T1",
                              "V1", "D1", "G1"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    char key[64];
    snprintf(key, sizeof key, "\"workload\": \"%s\"", ids[i]);
    if (strstr(text, key) == NULL)
      fprintf(stderr, "\n  no figures for %s", ids[i]);
    CU_ASSERT(strstr(text, key) != NULL);
  }
  /* every value a finite number; rates and counts positive where they must be */
  int values = 0, bad = 0;
  for (const char *p = strstr(text, "\"value\": "); p; p = strstr(p + 1, "\"value\": ")) {
    double v = strtod(p + 9, NULL);
    values++;
    bad += !isfinite(v) || v < 0;
  }
  CU_ASSERT(values >= 25);
  CU_ASSERT_EQUAL(bad, 0);
  const char *held = strstr(text, "\"metric\": \"locks still held\", \"value\": ");
  CU_ASSERT(held && atof(held + strlen("\"metric\": \"locks still held\", \"value\": ")) == 10000);
  const char *added = strstr(text, "\"metric\": \"threads added\", \"value\": ");
  CU_ASSERT(added && atof(added + strlen("\"metric\": \"threads added\", \"value\": ")) == 0);
  const char *max = strstr(text, "\"metric\": \"max concurrent holders\", \"value\": ");
  CU_ASSERT(max && atof(max + strlen("\"metric\": \"max concurrent holders\", \"value\": ")) <= 4);
  CU_ASSERT(quoted_rows_printed(text) >= 10);
  /* S1's fairness rows (docs/spin.md), for both kinds */
  static const char *const fair_rows[] = {"Jain fairness", "longest wait",
                                          "most grants in a row"};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < 3; i++) {
      double v = figure(text, k ? "S1 spin" : "S1 pub/sub", fair_rows[i], 0);
      CU_ASSERT(isfinite(v) && v > 0);
    }
  /* the table never says nan: a figure not measured says so, a row
   * without a bound prints none */
  CU_ASSERT(strlen(bench_stdout) > 1000);
  CU_ASSERT_PTR_NULL(strstr(bench_stdout, " nan"));
  CU_ASSERT_PTR_NULL(strstr(bench_stdout, "-nan"));
  if (strstr(bench_stdout, "nan "))
    fprintf(stderr, "\n%s", bench_stdout);
}

/* A help request succeeds (exit 0, on stdout) and names every option; a
 * bad option is exit 2. The same for dlock-torture. */
static void test_help(void) {
  char line[1024], out[8192];
  snprintf(line, sizeof line, "'%s' --help 2>/dev/null", getenv("DLOCK_BENCH"));
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 0);
  static const char *const opts[] = {"--duration", "--workload", "--url",
                                     "--json", "--threads", "--w4-seconds",
                                     "--peers", "--direct", "--spin",
                                     "--down-after", "--plot", "--help"};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
    char described[64]; /* "  --plot DIR   ..." in the options list */
    snprintf(described, sizeof described, "\n  %s ", opts[i]);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, described));
  }
  snprintf(line, sizeof line, "'%s' --bogus 2>&1", getenv("DLOCK_BENCH"));
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 2);
  snprintf(line, sizeof line, "'%s' --help 2>/dev/null", getenv("DLOCK_TORTURE"));
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 0);
  CU_ASSERT(strncmp(out, "usage: dlock-torture", 20) == 0);
  snprintf(line, sizeof line, "'%s' --bogus x 2>&1", getenv("DLOCK_TORTURE"));
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 2);
}

/* The figure (value, or bound when bound is set) of workload w's metric in
 * the JSON text; NAN when absent or null. */
static double figure(const char *text, const char *w, const char *metric,
                     int bound) {
  char key[160];
  snprintf(key, sizeof key, "\"workload\": \"%s\", \"metric\": \"%s\"", w,
           metric);
  const char *p = strstr(text, key);
  if (p == NULL)
    return NAN;
  p = strstr(p, bound ? "\"bound\": " : "\"value\": ");
  if (p == NULL)
    return NAN;
  p = strchr(p, ':') + 2;
  return strncmp(p, "null", 4) == 0 ? NAN : strtod(p, NULL);
}

/* What a pair costs the client: user and system CPU per pair add up to
 * CPU per pair, dlock's and raw's; system calls per pair are counted where
 * the kernel lets the bench (tracefs, root): raw's loop makes 4 (a send and
 * a receive per call), dlock's direct calls about as many. */
static void test_cost_rows(void) {
  static char text[16384];
  /* 1 s a side (five 200 ms turns each): at 0.3 s each side had one
   * turn, and a CI run failed these checks on it */
  char *args[] = {"--duration", "1", "--workload", "W1", "--spin", "0", NULL};
  CU_ASSERT_EQUAL_FATAL(bench_json(args, 60000, text, sizeof text), 0);
  for (int bound = 0; bound < 2; bound++) {
    double cpu = figure(text, "W1", "CPU per pair", bound);
    double user = figure(text, "W1", "user CPU per pair", bound);
    double sys = figure(text, "W1", "system CPU per pair", bound);
    CU_ASSERT(cpu > 0 && user >= 0 && sys > 0);
    CU_ASSERT(fabs(user + sys - cpu) <= 0.25 * cpu);
  }
  double calls = figure(text, "W1", "system calls per pair", 0);
  double raw = figure(text, "W1", "system calls per pair", 1);
  CU_ASSERT(strstr(text, "\"metric\": \"system calls per pair\"") != NULL);
  if (access("/sys/kernel/tracing/events/raw_syscalls/sys_enter/id", R_OK) == 0 &&
      geteuid() == 0) {
    CU_ASSERT(raw >= 3.9 && raw <= 4.5);
    CU_ASSERT(calls >= 3.9 && calls <= 7);
  } else {
    fprintf(stderr, "\n  system calls not counted here (no tracefs or not root)");
    CU_ASSERT(isnan(calls) && isnan(raw));
  }
}

/* Whether path is a PNG image of some size (its signature, and more than a
 * header's bytes). */
static int is_png(const char *path) {
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  unsigned char head[8];
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return 0;
  size_t n = fread(head, 1, sizeof head, f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  return n == sizeof head && memcmp(head, sig, sizeof sig) == 0 && size > 2000;
}

/* --plot DIR: gnuplot draws W1's latency by percentile (dlock and raw
 * hiredis) and the throughput ratios from a short run. */
static void test_plot(void) {
  char dir[64], path[128];
  snprintf(dir, sizeof dir, "/tmp/dlock-bench-plot-XXXXXX");
  CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
  static char text[16384];
  char *args[] = {"--duration", "0.2", "--workload", "W1", "--plot", dir, NULL};
  CU_ASSERT_EQUAL_FATAL(bench_json(args, 60000, text, sizeof text), 0);
  static const char *const pictures[] = {"w1-latency", "ratios"};
  for (size_t i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s.png", dir, pictures[i]);
    if (!is_png(path))
      fprintf(stderr, "\n  no picture %s", path);
    CU_ASSERT(is_png(path));
  }
  /* the ratios' x axis is labelled and reaches past 1.0 (the dashed
   * line stays inside the frame); the bars' axis has no empty lanes */
  static char gp[4096];
  snprintf(path, sizeof path, "%s/ratios.gp", dir);
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  gp[fread(gp, 1, sizeof gp - 1, f)] = '\0';
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(gp, "set xlabel '"));
  const char *xr = strstr(gp, "set xrange [0:");
  CU_ASSERT(xr && atof(xr + 14) >= 1.2);
  CU_ASSERT_PTR_NOT_NULL(strstr(gp, "set yrange [-0.6:"));
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
}

/* --peers: W1 and W6 beside the three Node.js peers, redis-py, Redisson
 * (Java) and redsync (Go), each a figure with its version said, and W9
 * beside the Node.js peers (CI installs Node, bench/peers' packages,
 * python3-redis, and builds the Java and Go peers; a missing one is a
 * failure). */
static void test_peers(void) {
  static char text[16384];
  char *args[] = {"--duration", "0.2", "--workload", "W1", "--peers", NULL};
  CU_ASSERT_EQUAL_FATAL(bench_json(args, 120000, text, sizeof text), 0);
  static const char *peers[] = {"node-redlock", "redis-semaphore",
                                "node-redisson", "redis-py", "redisson",
                                "redsync"};
  for (size_t i = 0; i < 6; i++) {
    char key[96];
    snprintf(key, sizeof key, "\"metric\": \"pairs/s vs %s\", \"value\": ", peers[i]);
    const char *row = strstr(text, key);
    if (row == NULL)
      fprintf(stderr, "\n  no W1 figure beside %s", peers[i]);
    CU_ASSERT(row != NULL);
    const char *bound = row ? strstr(row, "\"bound\": ") : NULL;
    CU_ASSERT(bound && atof(bound + 9) > 0); /* the peer's own pairs/s */
  }
  char *w6[] = {"--duration", "0.5", "--workload", "W6", "--peers", NULL};
  CU_ASSERT_EQUAL_FATAL(bench_json(w6, 120000, text, sizeof text), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(bench_stdout, "(W6 redisson: 4.7.0)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(bench_stdout, "(W6 redsync: v"));
  for (size_t i = 0; i < 6; i++) { /* each peer's hand-offs beside W6's */
    char metric[96];
    snprintf(metric, sizeof metric, "acquisitions/s vs %s", peers[i]);
    double rate = figure(text, "W6", metric, 1);
    if (!(rate > 0))
      fprintf(stderr, "\n  no W6 figure beside %s", peers[i]);
    CU_ASSERT(rate > 0);
  }
  CU_ASSERT(figure(text, "W6", "hand-off p50 vs redis-py", 0) > 0);
  /* W9's 16 loops on one thread beside the Node.js peers' 16 tasks */
  char *w9[] = {"--duration", "0.3", "--workload", "W9", "--peers", NULL};
  CU_ASSERT_EQUAL_FATAL(bench_json(w9, 120000, text, sizeof text), 0);
  CU_ASSERT(figure(text, "W9", "pairs/s, 16 loops vs best peer", 0) > 0);
  CU_ASSERT(figure(text, "W9", "pairs/s, 16 loops vs best peer", 1) > 0);
  CU_ASSERT(figure(text, "W9", "16 loops, engine callbacks vs best peer", 0) > 0);
}

/* Bad options end the tool with exit 2 and a message, never a run on
 * other servers than those named: a sixth --url (W5 uses five) and a URL
 * too long to keep. */
static void test_bad_urls(void) {
  const char *bench = getenv("DLOCK_BENCH");
  CU_ASSERT_PTR_NOT_NULL_FATAL(bench);
  char line[1024], out[2048], url[300];
  snprintf(line, sizeof line, "'%s' --duration 0.1 --url redis://127.0.0.1:1 "
           "--url redis://127.0.0.1:2 --url redis://127.0.0.1:3 --url "
           "redis://127.0.0.1:4 --url redis://127.0.0.1:5 --url "
           "redis://127.0.0.1:6 2>&1", bench);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 2);
  CU_ASSERT(strstr(out, "at most 5 --url") != NULL);
  memset(url, 'a', sizeof url - 1);
  url[sizeof url - 1] = '\0';
  memcpy(url, "redis://", 8);
  snprintf(line, sizeof line, "'%s' --duration 0.1 --url %s 2>&1", bench, url);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 2);
  CU_ASSERT(strstr(out, "--url longer than") != NULL);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("bench", NULL, NULL);
  CU_add_test(s, "every_workload_runs", test_every_workload_runs);
  CU_add_test(s, "server_binary", test_server_binary);
  CU_add_test(s, "failover_workload", test_failover_workload);
  CU_add_test(s, "peers", test_peers);
  CU_add_test(s, "cost_rows", test_cost_rows);
  CU_add_test(s, "plot", test_plot);
  CU_add_test(s, "bad_urls", test_bad_urls);
  CU_add_test(s, "help", test_help);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
