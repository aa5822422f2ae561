/* What a run costs the client (bench.h): its CPU time, split into user
 * and system time, and its system calls, counted by the kernel's
 * raw_syscalls:sys_enter tracepoint on every thread of the process (one
 * counter per thread alive when the run starts, inherited by the threads
 * they start). The count needs tracefs (/sys/kernel/tracing: mounted here
 * when it is not and the bench may) and the right to open a tracepoint
 * counter (root, or kernel.perf_event_paranoid <= 1); without them it is
 * NaN and the bench says why once. (/proc/self/io's syscr and syscw are no
 * stand-in: they count read(2) and write(2), not send(2) and recv(2).) */
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"

enum { MAX_COUNTERS = 256 };

static int counter_fd[MAX_COUNTERS];
static int ncounters;
static run_cost last;
static int said_why;

static int64_t tv_us(struct timeval tv) {
  return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* The tracepoint's id, or -1 (why filled). tracefs is mounted when it
 * is not and this process may (root in a namespace that allows it). */
static long tracepoint_id(char *why, size_t n) {
  static const char *const paths[] = {
      "/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
      "/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id"};
  static int mounted;
  if (!mounted++ && access(paths[0], R_OK) != 0 && access(paths[1], R_OK) != 0 &&
      mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0)
    fprintf(stderr, "dlock-bench: mounted tracefs on /sys/kernel/tracing to "
            "count system calls\n");
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    FILE *f = fopen(paths[i], "r");
    long id = -1;
    if (f == NULL)
      continue;
    if (fscanf(f, "%ld", &id) != 1)
      id = -1;
    fclose(f);
    if (id >= 0)
      return id;
  }
  snprintf(why, n, "no tracefs, and it could not be mounted: mount -t "
           "tracefs nodev /sys/kernel/tracing");
  return -1;
}

static int open_counter(long id, pid_t tid) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_TRACEPOINT;
  a.size = sizeof a;
  a.config = (unsigned long long)id;
  a.inherit = 1; /* the threads it starts during the run */
  a.exclude_hv = 1;
  return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1,
                      PERF_FLAG_FD_CLOEXEC);
}

/* A counter on every thread of this process; 0, or -1 (why filled). */
static int counters_open(char *why, size_t n) {
  long id = tracepoint_id(why, n);
  if (id < 0)
    return -1;
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) {
    snprintf(why, n, "no /proc/self/task");
    return -1;
  }
  struct dirent *e;
  ncounters = 0;
  while ((e = readdir(d)) != NULL && ncounters < MAX_COUNTERS) {
    if (e->d_name[0] == '.')
      continue;
    int fd = open_counter(id, (pid_t)atoi(e->d_name));
    if (fd < 0 && errno != ESRCH) { /* ESRCH: the thread ended meanwhile */
      snprintf(why, n, "perf_event_open: %s", strerror(errno));
      break;
    }
    if (fd >= 0)
      counter_fd[ncounters++] = fd;
  }
  closedir(d);
  if (e != NULL) {
    bench_counters_close();
    return -1;
  }
  return 0;
}

static double counters_read(void) {
  double total = 0;
  for (int i = 0; i < ncounters; i++) {
    unsigned long long v = 0;
    if (read(counter_fd[i], &v, sizeof v) != (ssize_t)sizeof v)
      return NAN;
    total += (double)v;
  }
  return total;
}

void bench_counters_close(void) {
  for (int i = 0; i < ncounters; i++)
    close(counter_fd[i]);
  ncounters = 0;
}

int bench_cost_open(void) {
  char why[160];
  if (counters_open(why, sizeof why) == 0)
    return 0;
  if (!said_why++)
    fprintf(stderr, "dlock-bench: system calls not counted (%s)\n", why);
  return -1;
}

void bench_cost_now(run_cost *c) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  c->user_us = tv_us(ru.ru_utime);
  c->sys_us = tv_us(ru.ru_stime);
  c->syscalls = ncounters > 0 ? counters_read() : NAN;
}

void bench_cost_add(run_cost *sum, const run_cost *from, const run_cost *to) {
  sum->user_us += to->user_us - from->user_us;
  sum->sys_us += to->sys_us - from->sys_us;
  sum->syscalls += to->syscalls - from->syscalls; /* NaN stays NaN */
}

void bench_cost_begin(run_cost *c) {
  (void)bench_cost_open();
  bench_cost_now(c);
}

void bench_cost_end(run_cost *c) {
  run_cost at, begun = *c;
  bench_cost_now(&at);
  *c = (run_cost){0, 0, 0};
  bench_cost_add(c, &begun, &at);
  bench_counters_close();
  last = *c;
}

run_cost bench_last_cost(void) { return last; }

void bench_emit_costs(const char *w, long dlock_pairs, const run_cost *dlock,
                long raw_pairs, const run_cost *raw) {
  double d = dlock_pairs > 0 ? (double)dlock_pairs : NAN;
  double r = raw_pairs > 0 ? (double)raw_pairs : NAN;
  bench_emit(w, "user CPU per pair", (double)dlock->user_us / d, "us",
       (double)raw->user_us / r);
  bench_emit(w, "system CPU per pair", (double)dlock->sys_us / d, "us",
       (double)raw->sys_us / r);
  bench_emit(w, "system calls per pair", dlock->syscalls / d, "",
       raw->syscalls / r);
}
