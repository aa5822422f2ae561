/* dlock-torture: the harness. Starts the servers, forks the workers (this
 * program again, with --worker), injects faults, reads the fair queue, stops
 * everything and runs the checker. Exit 0 when no violation was found, 1 on
 * a violation, 2 on a usage or setup error. See docs/reliability.md. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "../harness.h"
#include "dlock/dlock.h"
#include "clock.h"
#include "delay.h"
#include "partition.h"
#include "torture.h"

#define MAX_PROCS 64

static tt_opts O = {
    .kind = TT_LOCK, .procs = 4, .threads = 4, .duration_ms = 5000,
    .servers = 0, .watchdog_ms = 1000, .wait_ms = 10000, .hold_us = 200,
    .permits = 3, .read_pct = 80, .slot_ms = 1000, .every_ms = 500,
    .command_timeout_ms = 3000};
static tt_arena *A;
static int arena_fd = -1;
static th_server servers[TT_MAX_SERVERS];
static pid_t procs[MAX_PROCS];
static pthread_mutex_t procs_mu = PTHREAD_MUTEX_INITIALIZER;
static void sleep_ms(int64_t ms);
/* The workers' lease: --lease, or their watchdog's. */
static int64_t lease_ms(void) {
  return O.lease_ms > 0 ? O.lease_ms : O.watchdog_ms;
}
static tt_result R;
static int64_t counter_slack;
static _Atomic int nemesis_idle, nemesis_exit;
static char **worker_argv;
static int worker_argc;

static const char *kinds[TT_NKINDS] = {
    "lock", "fenced", "fair", "rw", "multi", "redlock", "semaphore",
    "non-reentrant", "non-reentrant-fair", "spin", "group", "election"};
static const char *faults[TT_F_COUNT] = {
    "kill", "kill-waiter", "client-kill", "pubsub-kill",
    "stop", "restart", "sleep", "flush", "migrate", "failover", "pause",
    "partition", "clock-forward", "clock-back", "client-clock", "slow"};

/* The help: on stdout with status 0 when asked for (--help), else on
 * stderr with status 2. */
static void usage_to(FILE *to, int status) {
  fprintf(to,
          "usage: dlock-torture [--kind lock|fenced|fair|rw|multi|redlock|semaphore|\n"
          "                      non-reentrant|non-reentrant-fair|spin|group|election]\n"
          "  [--procs P] [--threads T | --async N] [--duration MS] [--sections N]\n"
          "  [--servers N] [--paused K] [--blackholed K] [--one-engine 0|1]\n"
          "  [--lease MS]\n"
          "  [--watchdog MS] [--wait MS] [--hold-us US] [--hold-min-us US]\n"
          "  [--permits N]\n"
          "  [--read-pct N] [--slot MS] [--command-timeout MS]\n"
          "  [--java N] (the first N threads of each worker Redisson-behaving)\n"
          "  [--jvm VERSION] (the odd workers real Redisson VERSION clients)\n"
          "  [--nemesis kill,kill-waiter,client-kill,pubsub-kill,stop,restart,"
          "sleep,flush,pause]\n"
          "  [--writes plain|guarded] (--kind fenced, election; plain: one server)\n"
          "  [--loss PCT] (one server: PCT %% of the workers' packets dropped)\n"
          "  [--delay MS[:JITTER]] (one server: the workers' link delayed)\n"
          "  [--every MS] [--seed N] [--json] [--broken] [--trace] [--timeline PNG]\n"
          "  [--cluster [--nemesis kill,kill-waiter,client-kill,pubsub-kill,"
          "migrate,failover,pause,restart,stop]]\n"
          "  [--sentinel [--nemesis kill,kill-waiter,client-kill,pubsub-kill,"
          "failover,restart,pause]]\n"
          "  [--split [--nemesis partition,slow]] (one server: the holder cut\n"
          "   from it; --sentinel, --cluster: the name's master cut; slow:\n"
          "   the workers' links to the (name's) master lossy for 1-3 s)\n"
          "  [--replica-sync MS [--replica-sync-all]] [--min-replicas N]\n"
          "  [--nemesis clock-forward,clock-back [--clock-jump MS]] (a server's\n"
          "   clock jump, modelled: one server, RedLock's, a cluster's name master)\n"
          "  [--nemesis client-clock [--client-offset S]] (the workers' wall\n"
          "   clock S seconds (3600) ahead or behind: libfaketime)\n"
          "  [--drift PCT --drift-members K] (RedLock: K servers' clocks PCT %% fast)\n"
          "  [--help]\n");
  exit(status);
}

static void usage(void) { usage_to(stderr, 2); }

static int64_t num(const char *s) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < 0)
    usage();
  return v;
}

/* parse the options; returns the index of the first unparsed argument */
static void parse(int argc, char **argv, int *worker, int *proc) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    static const struct {
      const char *name;
      int *on;
    } flags[] = {{"--json", &O.json},       {"--broken", &O.broken},
                 {"--cluster", &O.cluster}, {"--sentinel", &O.sentinel},
                 {"--split", &O.split},     {"--trace", &O.trace},
                 {"--replica-sync-all", &O.replica_sync_all}};
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
      usage_to(stdout, 0);
    int flag = 0;
    for (size_t f = 0; f < sizeof flags / sizeof flags[0] && !flag; f++)
      if (strcmp(a, flags[f].name) == 0)
        flag = *flags[f].on = 1;
    if (flag)
      continue;
    if (v == NULL)
      usage();
    i++;
    if (strcmp(a, "--kind") == 0) {
      int k = -1;
      for (int j = 0; j < TT_NKINDS; j++)
        if (strcmp(v, kinds[j]) == 0)
          k = j;
      if (k < 0)
        usage();
      O.kind = (tt_kind)k;
    } else if (strcmp(a, "--procs") == 0) O.procs = (int)num(v);
    else if (strcmp(a, "--threads") == 0) O.threads = (int)num(v);
    else if (strcmp(a, "--async") == 0) O.async = (int)num(v);
    else if (strcmp(a, "--duration") == 0) O.duration_ms = num(v);
    else if (strcmp(a, "--sections") == 0) O.sections = num(v);
    else if (strcmp(a, "--servers") == 0) O.servers = (int)num(v);
    else if (strcmp(a, "--paused") == 0) O.paused = (int)num(v);
    else if (strcmp(a, "--blackholed") == 0) O.blackholed = (int)num(v);
    else if (strcmp(a, "--one-engine") == 0) O.one_engine = num(v) != 0;
    else if (strcmp(a, "--lease") == 0) O.lease_ms = num(v);
    else if (strcmp(a, "--watchdog") == 0) O.watchdog_ms = num(v);
    else if (strcmp(a, "--wait") == 0) O.wait_ms = num(v);
    else if (strcmp(a, "--hold-us") == 0) O.hold_us = num(v);
    else if (strcmp(a, "--hold-min-us") == 0) O.hold_min_us = num(v);
    else if (strcmp(a, "--permits") == 0) O.permits = (int)num(v);
    else if (strcmp(a, "--read-pct") == 0) O.read_pct = (int)num(v);
    else if (strcmp(a, "--slot") == 0) O.slot_ms = num(v);
    else if (strcmp(a, "--java") == 0) O.java = (int)num(v);
    else if (strcmp(a, "--jvm") == 0) O.jvm = v;
    else if (strcmp(a, "--command-timeout") == 0) O.command_timeout_ms = num(v);
    else if (strcmp(a, "--every") == 0) O.every_ms = num(v);
    else if (strcmp(a, "--timeline") == 0) O.timeline = v;
    else if (strcmp(a, "--seed") == 0) O.seed = (unsigned)num(v);
    else if (strcmp(a, "--worker") == 0) *worker = (int)num(v);
    else if (strcmp(a, "--arena-fd") == 0) arena_fd = (int)num(v);
    else if (strcmp(a, "--loss") == 0) O.loss_pct = (int)num(v);
    else if (strcmp(a, "--replica-sync") == 0) O.replica_sync_ms = num(v);
    else if (strcmp(a, "--clock-jump") == 0) O.clock_jump_ms = num(v);
    else if (strcmp(a, "--client-offset") == 0) O.client_offset_s = num(v);
    else if (strcmp(a, "--drift") == 0) O.drift_pct = atof(v);
    else if (strcmp(a, "--drift-members") == 0) O.drift_members = (int)num(v);
    else if (strcmp(a, "--delay") == 0) {
      char *colon = strchr(v, ':');
      if (colon) {
        *colon = '\0';
        O.jitter_ms = (int)num(colon + 1);
      }
      O.delay_ms = (int)num(v);
    }
    else if (strcmp(a, "--min-replicas") == 0) O.min_replicas = (int)num(v);
    else if (strcmp(a, "--writes") == 0) {
      if (strcmp(v, "plain") == 0)
        O.writes = TT_W_PLAIN;
      else if (strcmp(v, "guarded") == 0)
        O.writes = TT_W_GUARDED;
      else
        usage();
    }
    else if (strcmp(a, "--proc") == 0) *proc = (int)num(v);
    else if (strcmp(a, "--nemesis") == 0) {
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int f = -1;
        for (int j = 0; j < TT_F_COUNT; j++)
          if (strcmp(t, faults[j]) == 0)
            f = j;
        if (f < 0)
          usage();
        O.nemesis |= 1u << f;
      }
    } else {
      usage();
    }
  }
  if (O.servers == 0)
    O.servers = O.kind == TT_REDLOCK ? 3 : 1;
  /* a cluster's faults act on the name's master and its replica; the
   * one-server faults stay the standalone runs' */
  unsigned cluster_faults = TT_F_KILL | TT_F_KILL_WAITER | TT_F_CLIENT_KILL |
                            TT_F_PUBSUB_KILL | TT_F_MIGRATE | TT_F_FAILOVER |
                            TT_F_PAUSE | TT_F_PARTITION | TT_F_CLOCK_FORWARD |
                            TT_F_CLOCK_BACK | TT_F_CLIENT_CLOCK | TT_F_RESTART |
                            TT_F_STOP | TT_F_SLOW;
  /* a sentinel setup's act on its master */
  unsigned sentinel_faults = TT_F_KILL | TT_F_KILL_WAITER | TT_F_CLIENT_KILL |
                             TT_F_PUBSUB_KILL | TT_F_FAILOVER | TT_F_RESTART |
                             TT_F_PAUSE | TT_F_PARTITION | TT_F_SLOW;
  if (O.procs < 1 || O.procs > MAX_PROCS || O.threads < 1 || O.threads > 256 ||
      O.servers > TT_MAX_SERVERS || O.paused + O.blackholed > O.servers ||
      O.watchdog_ms < 30 || O.command_timeout_ms < 1 || O.every_ms < 1 ||
      (O.kind != TT_REDLOCK && O.servers != 1) ||
      ((O.nemesis & (TT_F_CLOCK_FORWARD | TT_F_CLOCK_BACK)) && O.sentinel) ||
      ((O.drift_pct > 0) != (O.drift_members > 0)) ||
      O.drift_members > O.servers || O.drift_pct < 0 ||
      (O.cluster && (O.kind == TT_REDLOCK || O.java ||
                     (O.nemesis & ~cluster_faults))) ||
      (O.sentinel && (O.cluster || O.kind == TT_REDLOCK || O.java ||
                      (O.nemesis & ~sentinel_faults))) ||
      (!O.cluster && (O.nemesis & TT_F_MIGRATE)) ||
      (O.writes && ((O.kind != TT_FENCED && O.kind != TT_ELECTION) ||
                    O.async || O.java)) ||
      (O.writes == TT_W_PLAIN && (O.cluster || O.sentinel)) ||
      (O.loss_pct && (O.cluster || O.sentinel || O.servers != 1 ||
                      O.loss_pct > 50 || O.java)) ||
      ((O.delay_ms || O.jitter_ms) &&
       (O.cluster || O.sentinel || O.servers != 1 || O.java ||
        O.delay_ms + O.jitter_ms > 2000)) ||
      (!O.cluster && !O.sentinel && (O.nemesis & TT_F_FAILOVER)) ||
      (O.split && (O.java || O.servers != 1 || O.loss_pct || O.delay_ms ||
                   O.jitter_ms)) ||
      (!O.split && (O.nemesis & (TT_F_PARTITION | TT_F_SLOW))) ||
      ((O.replica_sync_ms || O.min_replicas) && !O.cluster && !O.sentinel) ||
      O.replica_sync_ms >= O.command_timeout_ms ||
      (O.replica_sync_all && !O.replica_sync_ms) ||
      (O.jvm && (O.cluster || O.sentinel || O.split || O.async || O.writes ||
                 O.loss_pct || O.delay_ms ||
                 (O.kind != TT_LOCK && O.kind != TT_FAIR && O.kind != TT_RW &&
                  O.kind != TT_SPIN && O.kind != TT_ONCE &&
                  O.kind != TT_ONCE_FAIR))))
    usage();
}

/* ---- workers ------------------------------------------------------------- */

/* client-clock: the workers' wall clock, moved at run time through a file
 * libfaketime reads (again each second); their monotonic clock stays. */
#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
static char clock_file[64];

static void clock_file_write(const char *offset) {
  FILE *f = fopen(clock_file, "w");
  if (f) {
    fprintf(f, "%s\n", offset);
    fclose(f);
  }
}

/* The workers' environment: this process's, and with client-clock the
 * libfaketime settings (the harness and its servers run without them). */
extern char **environ;
static char **worker_env(void) {
  static char fake[5][128];
  size_t n = 0;
  while (environ[n])
    n++;
  char **envp = calloc(n + 6, sizeof *envp);
  memcpy(envp, environ, n * sizeof *envp);
  if (O.nemesis & TT_F_CLIENT_CLOCK) {
    snprintf(fake[0], sizeof fake[0], "LD_PRELOAD=%s", FAKETIME_LIB);
    snprintf(fake[1], sizeof fake[1], "FAKETIME_TIMESTAMP_FILE=%s", clock_file);
    snprintf(fake[2], sizeof fake[2], "FAKETIME_CACHE_DURATION=1");
    snprintf(fake[3], sizeof fake[3], "DONT_FAKE_MONOTONIC=1");
    /* without it libfaketime 0.9.10 ends every timed wait on a monotonic
     * condition variable at once */
    snprintf(fake[4], sizeof fake[4], "FAKETIME_FORCE_MONOTONIC_FIX=0");
    for (int i = 0; i < 5; i++)
      envp[n++] = fake[i];
  }
  return envp;
}

static pid_t spawn(int proc) {
  char pbuf[16], fbuf[16];
  snprintf(pbuf, sizeof pbuf, "%d", proc);
  snprintf(fbuf, sizeof fbuf, "%d", arena_fd);
  char **argv = calloc((size_t)worker_argc + 8, sizeof *argv);
  int n = 0;
  argv[n++] = "/proc/self/exe";
  for (int i = 1; i < worker_argc; i++)
    argv[n++] = worker_argv[i];
  argv[n++] = "--worker";
  argv[n++] = "1";
  argv[n++] = "--proc";
  argv[n++] = pbuf;
  argv[n++] = "--arena-fd";
  argv[n++] = fbuf;
  argv[n] = NULL;
  char **envp = worker_env();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_DFL); /* a SIGPIPE must not be able to kill dlock */
    execve("/proc/self/exe", argv, envp);
    _exit(127);
  }
  free(argv);
  free(envp);
  return pid;
}

/* A worker process died by our hand: close its open sections at its death
 * time (an interval cannot outlive its process), mark its waits ended. */
static void bury(pid_t pid) {
  int64_t t = tt_now_ns();
  int n = atomic_load(&A->nslots);
  for (int i = 0; i < n; i++) {
    tt_slot *s = &A->slots[i];
    if (s->pid != pid)
      continue;
    int phase = atomic_load(&s->phase);
    int64_t cur = atomic_load(&s->cur);
    if (cur >= 0) {
      tt_rec *r = &A->recs[cur];
      if (phase == TT_P_IN || phase == TT_P_COMMIT) {
        r->exit = t;
        atomic_fetch_or(&r->flags, TT_R_KILLED);
      } else if (phase == TT_P_RELEASING) {
        atomic_fetch_or(&r->flags, TT_R_KILLED);
      } else if (r->enter == 0) {
        r->rc = -100;
        r->done = t;
      }
      if (phase == TT_P_COMMIT)
        counter_slack++; /* it may have written the counter, not the commit */
    }
    atomic_store(&s->phase, TT_P_KILLED);
  }
}

static int all_waiting(pid_t pid) {
  int n = atomic_load(&A->nslots), any = 0;
  for (int i = 0; i < n; i++) {
    tt_slot *s = &A->slots[i];
    if (s->pid != pid)
      continue;
    any = 1;
    if (atomic_load(&s->phase) != TT_P_WAITING)
      return 0;
  }
  return any;
}

static void kill_worker(int waiter_only) {
  pthread_mutex_lock(&procs_mu);
  int start = rand() % O.procs, victim = -1;
  /* --jvm: the side killed less so far, Java (odd) or C (either when that
   * side has none to kill) */
  int side = R.java_kills < R.faults[0] + R.faults[1] - R.java_kills;
  for (int pass = O.jvm ? 0 : 1; pass < 2 && victim < 0; pass++)
    for (int k = 0; k < O.procs && victim < 0; k++) {
      int i = (start + k) % O.procs;
      if (procs[i] > 0 && (!waiter_only || all_waiting(procs[i])) &&
          (pass == 1 || i % 2 == side))
        victim = i;
    }
  if (victim >= 0 && !atomic_load(&A->stop)) {
    pid_t pid = procs[victim];
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    bury(pid);
    R.faults[waiter_only ? 1 : 0]++;
    R.java_kills += O.jvm && victim % 2 == 1; /* its JVM dies with it */
    procs[victim] = -1; /* the main thread starts a new one: a child's
                           PDEATHSIG follows the thread that forked it */
  }
  pthread_mutex_unlock(&procs_mu);
}

/* pause: a worker with a thread between its read and its write (else one
 * in a section), SIGSTOPped for 1-2 s, past a lease of up to a second (a
 * longer lease: 0.2-1.2 s past it), and continued: the holder then writes
 * what it read before. 1 when made. */
static pid_t pause_victim(void) { /* under procs_mu; 0 when none */
  int n = atomic_load(&A->nslots), start = n ? rand() % n : 0;
  pid_t victim = 0;
  for (int pass = 0; pass < 2 && victim == 0; pass++)
    for (int k = 0; k < n && victim == 0; k++) {
      tt_slot *s = &A->slots[(start + k) % n];
      int phase = atomic_load(&s->phase);
      if (phase == (pass == 0 ? TT_P_READ : TT_P_IN) && s->pid > 0)
        victim = s->pid;
    }
  int alive = 0;
  for (int i = 0; i < O.procs && victim; i++)
    alive |= procs[i] == victim;
  return alive ? victim : 0;
}

static int pause_worker(void) {
  /* no one may hold the lock at the moment the fault comes (every worker
   * waiting out a failover, say): look again every 5 ms for up to 1.5 s,
   * so a run that names the pause sees one */
  pid_t victim = 0;
  for (int64_t end = th_now_ms() + 1500; !atomic_load(&A->stop);) {
    pthread_mutex_lock(&procs_mu);
    if ((victim = pause_victim()) != 0)
      break;
    pthread_mutex_unlock(&procs_mu);
    if (th_now_ms() >= end)
      return 0;
    sleep_ms(5);
  }
  if (victim == 0) /* stopped while looking: procs_mu is not held */
    return 0;
  /* the pause's times are read before each signal: a stop lands a little
   * after kill() returns, and a thread of the victim's may enter its
   * section meanwhile (after a time read after the kill) and be stopped
   * in it. Read first, a section whose entry lies between the two times
   * was one the stop caught (the checker's paused_at). */
  int64_t from = tt_now_ns();
  if (kill(victim, SIGSTOP) != 0) {
    pthread_mutex_unlock(&procs_mu);
    return 0;
  }
  pthread_mutex_unlock(&procs_mu); /* a stopped worker is no one's to reap */
  int k = atomic_load(&A->npauses);
  int64_t ms = 1000 + rand() % 1001;
  if (ms < lease_ms() + 200) /* past the lease (a watchdog's too) */
    ms = lease_ms() + 200 + rand() % 1001;
  sleep_ms(ms);
  int64_t to = tt_now_ns();
  kill(victim, SIGCONT);
  if (k < 1024) { /* the checker's: whose overlaps nothing could tell */
    A->pauses[k].pid = victim;
    A->pauses[k].from = from;
    A->pauses[k].to = to;
    atomic_store(&A->npauses, k + 1);
  }
  return 1;
}

/* ---- faults -------------------------------------------------------------- */

static int live_server(void) { /* a server that is up and not paused */
  int first = O.paused + O.blackholed;
  if (first >= O.servers)
    return -1;
  return first + rand() % (O.servers - first);
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The key whose slot the cluster faults act on: the name's (a multi-lock's
 * first member). */
static const char *fault_key(char *buf, size_t n) {
  if (O.kind != TT_MULTI)
    return A->name;
  snprintf(buf, n, "%s:A", A->name);
  return buf;
}

static int64_t last_failover_ms; /* the nemesis thread's */

/* client-kill, pubsub-kill: the connections of that type on n */
static redisReply *kill_conns(th_server *n, int fault) {
  return th_cmd(n, "CLIENT KILL TYPE %s SKIPME yes",
                fault == TT_F_CLIENT_KILL ? "normal" : "pubsub");
}

/* The replica of master a failover may promote now, or NULL: a master
 * votes for a replica of the same master once per two node timeouts
 * (th_cluster_start: 1 s), so a failover back sooner would get no votes,
 * and its master would hold writes paused (the manual failover's 5 s) for
 * nothing. */
static th_server *promotable_replica(th_server *master) {
  if (last_failover_ms && th_now_ms() - last_failover_ms < 2500)
    return NULL;
  return th_replica_of(&servers[0], master);
}

/* restart: the master killed, its replica's promotion awaited (forced
 * after 10 s), the master started again (it comes back as a replica). A
 * replica whose link was down too long (a fault before) does not stand
 * (cluster-replica-validity-factor): the master would come back empty,
 * still master, and take every acknowledged write with it, which no setup
 * without persistence survives. An operator would force it; so does
 * this. */
static void restart_master(th_server *master, th_server *replica) {
  th_server_kill(master);
  if (!th_becomes_master(replica, 10000)) {
    redisReply *info = th_cmd(replica, "INFO replication");
    const char *down = info && info->type == REDIS_REPLY_STRING
                           ? strstr(info->str, "master_link_down_since")
                           : NULL;
    fprintf(stderr, "torture: no replica took over from port %d in 10 s "
            "(%.*s): CLUSTER FAILOVER TAKEOVER\n", master->port,
            down ? (int)strcspn(down, "\r\n") : 0, down ? down : "");
    if (info)
      freeReplyObject(info);
    freeReplyObject(th_cmd(replica, "CLUSTER FAILOVER TAKEOVER"));
    R.takeovers++;
    if (!th_becomes_master(replica, 10000))
      fprintf(stderr, "torture: no takeover either\n");
  }
  if (th_server_restart(master) != 0)
    fprintf(stderr, "torture: port %d did not restart\n", master->port);
}

/* A cluster fault; 1 when it was made. */
/* clock-forward, clock-back on the server at port (modelled). */
static void clock_fault(int f, int port) {
  int64_t d = O.clock_jump_ms > 0 ? O.clock_jump_ms : 2 * lease_ms();
  int j = atomic_load(&A->njumps);
  if ((1 << f) == TT_F_CLOCK_FORWARD && j < 256) {
    A->jumps[j] = tt_now_ns();
    atomic_store(&A->njumps, j + 1);
  }
  if (sim_clock_jump(port, (1 << f) == TT_F_CLOCK_FORWARD ? d : -d, NULL) != 0)
    fprintf(stderr, "torture: port %d: the clock jump failed\n", port);
}

static int cluster_fault(int f) {
  char buf[160];
  const char *key = fault_key(buf, sizeof buf);
  th_server *master = th_node_of(&servers[0], key), *replica;
  redisReply *r = NULL;
  switch (1 << f) {
  case TT_F_CLIENT_KILL:
  case TT_F_PUBSUB_KILL:
    r = kill_conns(master, 1 << f);
    break;
  case TT_F_MIGRATE:
    if (th_migrate_slot(&servers[0], key) != 0)
      fprintf(stderr, "torture: a key of %s's slot did not migrate\n", key);
    break;
  case TT_F_FAILOVER:
    if ((replica = promotable_replica(master)) == NULL)
      return 0;
    last_failover_ms = th_now_ms();
    r = th_cmd(replica, "CLUSTER FAILOVER");
    if (!th_becomes_master(replica, 10000))
      fprintf(stderr, "torture: the failover to port %d did not happen\n",
              replica->port);
    break;
  case TT_F_CLOCK_FORWARD:
  case TT_F_CLOCK_BACK: /* the name's master's clock */
    clock_fault(f, master->port);
    break;
  case TT_F_RESTART:
  case TT_F_STOP:
    /* the master restarted, or stopped 50 ms .. 3 s (past the node
     * timeout its replica takes over); then, when it was replaced,
     * awaited as a replica again, so that the next fault starts from a
     * whole setup */
    if ((replica = promotable_replica(master)) == NULL)
      return 0;
    if ((1 << f) == TT_F_RESTART) {
      restart_master(master, replica);
    } else {
      th_server_pause(master, 1);
      sleep_ms(50 + rand() % 2951);
      th_server_pause(master, 0);
    }
    last_failover_ms = th_now_ms();
    if (!th_is_master(master) && !th_replica_synced(master, 20000))
      fprintf(stderr, "torture: port %d did not become a replica\n",
              master->port);
    break;
  }
  if (r)
    freeReplyObject(r);
  return 1;
}

/* The sentinels name a master other than old, and it says it is one
 * (bounded): it, or NULL. */
static th_server *sentinels_moved(th_server *old, int64_t ms) {
  for (int64_t end = th_now_ms() + ms; th_now_ms() < end; sleep_ms(20)) {
    th_server *m = th_sentinel_master(&servers[0]);
    if (m && m != old && th_is_master(m))
      return m;
  }
  fprintf(stderr, "torture: the sentinels named no new master\n");
  return NULL;
}

/* A sentinel setup's fault, on its master; 1 when it was made. */
static int sentinel_fault(int f) {
  th_server *master = th_sentinel_master(&servers[0]);
  redisReply *r = NULL;
  if (master == NULL)
    return 0;
  switch (1 << f) {
  case TT_F_CLIENT_KILL:
  case TT_F_PUBSUB_KILL:
    r = kill_conns(master, 1 << f);
    break;
  case TT_F_FAILOVER:
  case TT_F_RESTART:
    /* one failover at a time: the sentinels refuse another (INPROG)
     * within the failover timeout (th_sentinel_start: 3 s) */
    if (last_failover_ms && th_now_ms() - last_failover_ms < 4000)
      return 0;
    last_failover_ms = th_now_ms();
    if ((1 << f) == TT_F_FAILOVER) {
      r = th_cmd(&servers[0].node[servers[0].nnodes - 1],
                 "SENTINEL FAILOVER dlock-test");
      sentinels_moved(master, 15000);
    } else {
      th_server_kill(master);
      sentinels_moved(master, 15000);
      if (th_server_restart(master) != 0)
        fprintf(stderr, "torture: the old master did not restart\n");
    }
    break;
  }
  if (r)
    freeReplyObject(r);
  return 1;
}

/* ---- --split: the partition ---------------------------------------------- */

#define FIRST_NODE_ADDR 10 /* node i on 127.0.0.(10 + i) */

/* Wait (at most ms) until a worker thread has been in its section for a
 * third of the watchdog's lease less 300 ms (10 ms more at most; a fixed
 * lease, a watchdog under 900 ms, or sections too short for that: just
 * entered): the cut then finds a holder with its section ahead, just
 * before its watchdog's next renewal, which only the cut side sees. Its
 * worker's number, or -1. */
static int await_holder(int64_t ms) {
  int64_t age_ms = O.lease_ms > 0 || O.watchdog_ms < 900
                       ? 0
                       : O.watchdog_ms / 3 - 300;
  if (O.hold_us / 1000 <= age_ms + 10) /* sections shorter: just entered */
    age_ms = 0;
  for (int64_t end = th_now_ms() + ms;
       th_now_ms() < end && !atomic_load(&A->stop); usleep(1000)) {
    int n = atomic_load(&A->nslots);
    for (int i = 0; i < n; i++) {
      tt_slot *s = &A->slots[i];
      int64_t cur = atomic_load(&s->cur);
      int64_t age = cur >= 0 ? tt_now_ns() - A->recs[cur].enter : -1;
      if (atomic_load(&s->phase) == TT_P_IN && age >= age_ms * 1000000 &&
          age < (age_ms + 10) * 1000000)
        return s->proc;
    }
  }
  return -1;
}

/* Cut m and side A (m's side: the workers of holder's parity) from every
 * other node and side B (the other workers). */
static int cut_master_side(th_server *m, int holder) {
  th_server *s = &servers[0];
  int rc = 0;
  char wa[24], wb[24];
  for (int a = 0; a < O.procs; a++) {
    if (a % 2 != holder % 2)
      continue;
    snprintf(wa, sizeof wa, "127.0.1.%d", a + 1);
    for (int b = 0; b < O.procs; b++) {
      snprintf(wb, sizeof wb, "127.0.1.%d", b + 1);
      if (b % 2 != holder % 2)
        rc |= part_cut(th_addr(m), wb);
    }
    for (int i = 0; i < s->nnodes; i++)
      if (&s->node[i] != m)
        rc |= part_cut(wa, th_addr(&s->node[i]));
  }
  for (int i = 0; i < s->nnodes; i++)
    if (&s->node[i] != m)
      rc |= part_cut(th_addr(m), th_addr(&s->node[i]));
  return rc;
}

/* One server (--split): the holder's worker cut from the server just
 * before its watchdog's next renewal, for a lease and 0.5-1.5 s more (the
 * newcomers get in meanwhile), then healed: 1 when it was made. The cut
 * is drawn among both ways, the worker's packets only (its renewals never
 * arrive) and the server's only (they arrive and renew, their answers
 * never come back). */
static int client_cut(void) {
  int64_t lease = lease_ms();
  int holder = await_holder(20000);
  char w[24];
  const char *srv = th_addr(&servers[0]);
  snprintf(w, sizeof w, "127.0.1.%d", holder + 1);
  int shape = rand() % 3;
  if (holder < 0 || (shape == 0   ? part_cut(w, srv)
                     : shape == 1 ? part_cut_one_way(w, srv)
                                  : part_cut_one_way(srv, w)) != 0) {
    part_heal();
    return 0;
  }
  R.cuts[shape]++;
  if (O.trace)
    fprintf(stderr, "torture: worker %d cut (%s) at %" PRId64 "\n", holder,
            shape == 0 ? "both ways" : shape == 1 ? "to the server"
                                                  : "from the server",
            tt_now_ns() / 1000000);
  sleep_ms(lease + 500 + rand() % 1000);
  part_heal();
  return 1;
}

/* The partition fault: 1 when it was made. The promotion is awaited
 * (20 s at most), and after the heal the old master's return as a
 * replica, so that the next partition starts from a whole setup. */
static int partition(void) {
  if (!O.cluster && !O.sentinel)
    return client_cut();
  char buf[160];
  th_server *m = O.sentinel ? th_sentinel_master(&servers[0])
                            : th_node_of(&servers[0], fault_key(buf, sizeof buf));
  th_server *r = O.cluster ? th_replica_of(&servers[0], m) : NULL;
  if (m == NULL || (O.cluster && r == NULL))
    return 0;
  int64_t lease = lease_ms();
  int holder = await_holder(20000);
  if (holder < 0)
    return 0;
  int64_t t0 = th_now_ms();
  if (O.trace)
    fprintf(stderr, "torture: cut at %" PRId64 " (worker %d holds)\n",
            tt_now_ns() / 1000000, holder);
  if (cut_master_side(m, holder) != 0) {
    fprintf(stderr, "torture: an nft rule of the partition failed\n");
    part_heal();
    return 0;
  }
  th_server *promoted = O.sentinel ? sentinels_moved(m, 20000)
                        : th_becomes_master(r, 20000) ? r : NULL;
  if (promoted && th_now_ms() - t0 > R.max_promote_ms)
    R.max_promote_ms = th_now_ms() - t0;
  /* both sides granting: past the promotion, and past the lease of what
   * the promoted replica had from before the cut (its copy expires then) */
  int64_t heal = th_now_ms() + 200 + rand() % 1300;
  if (heal < t0 + lease + 500 + rand() % 1000)
    heal = t0 + lease + 500 + rand() % 1000;
  sleep_ms(heal - th_now_ms());
  part_heal();
  if (O.trace)
    fprintf(stderr, "torture: healed at %" PRId64 " (promoted: %s)\n",
            tt_now_ns() / 1000000, promoted ? "yes" : "no");
  last_failover_ms = th_now_ms();
  if (promoted && !th_replica_synced(m, 20000))
    fprintf(stderr, "torture: the old master did not become a replica\n");
  return promoted != NULL;
}

/* slow: the links between every worker and the name's master (one
 * server: the server) lose 20-40 % of their packets, both ways, for 1-3 s.
 * This kernel has no netem, and the delaying relay (--delay) cannot follow
 * a cluster's redirects: loss makes the link slow instead, as TCP sends a
 * lost segment again after 200 ms (doubling each time). 1 when made. */
static int slow_link(void) {
  char buf[160];
  th_server *m = O.sentinel  ? th_sentinel_master(&servers[0])
                 : O.cluster ? th_node_of(&servers[0], fault_key(buf, sizeof buf))
                             : &servers[0];
  if (m == NULL)
    return 0;
  int pct = 20 + rand() % 21, rc = 0;
  for (int p = 0; p < O.procs; p++) {
    char w[24];
    snprintf(w, sizeof w, "127.0.1.%d", p + 1);
    rc |= part_loss(w, th_addr(m), pct);
  }
  if (rc == 0)
    sleep_ms(1000 + rand() % 2001);
  part_heal();
  return rc == 0;
}

static void fault_now(int f);

/* Fault f, and when it was made for the timeline. */
static void fault(int f) {
  int64_t from = tt_now_ns(), before = R.faults[f];
  fault_now(f);
  if (R.faults[f] > before)
    tt_timeline_fault(f, from, tt_now_ns());
  int k = atomic_load(&A->nlosses);
  if (R.faults[f] > before && k < 1024 &&
      ((1 << f) & (TT_F_FAILOVER | TT_F_RESTART | TT_F_STOP | TT_F_PARTITION))) {
    A->losses[k].from = from;
    A->losses[k].to = tt_now_ns();
    atomic_store(&A->nlosses, k + 1);
  }
}

static void fault_now(int f) {
  if ((1 << f) == TT_F_SLOW) {
    R.faults[f] += slow_link();
    return;
  }
  if ((1 << f) == TT_F_PAUSE) {
    R.faults[f] += pause_worker();
    return;
  }
  if ((1 << f) == TT_F_PARTITION) {
    R.faults[f] += partition();
    return;
  }
  if ((1 << f) == TT_F_CLIENT_CLOCK) { /* the workers', any topology */
    char offset[32];
    snprintf(offset, sizeof offset, "%c%" PRId64, rand() % 2 ? '+' : '-',
             O.client_offset_s > 0 ? O.client_offset_s : 3600);
    clock_file_write(offset);
    R.faults[f]++;
    return;
  }
  if ((O.cluster || O.sentinel) && (1 << f) != TT_F_KILL &&
      (1 << f) != TT_F_KILL_WAITER) {
    R.faults[f] += O.cluster ? cluster_fault(f) : sentinel_fault(f);
    return;
  }
  int s = live_server();
  if (s < 0 && f != 0 && f != 1)
    return;
  redisReply *r = NULL;
  int64_t lease = lease_ms();
  switch (1 << f) {
  case TT_F_KILL:
    kill_worker(0);
    return;
  case TT_F_KILL_WAITER:
    kill_worker(1);
    return;
  case TT_F_CLIENT_KILL:
  case TT_F_PUBSUB_KILL:
    r = kill_conns(&servers[s], 1 << f);
    break;
  case TT_F_STOP:
    th_server_pause(&servers[s], 1);
    sleep_ms(50 + rand() % (2 * lease));
    th_server_pause(&servers[s], 0);
    break;
  case TT_F_RESTART:
    th_server_kill(&servers[s]);
    if (th_server_restart(&servers[s]) != 0)
      fprintf(stderr, "torture: server %d did not restart\n", s);
    break;
  case TT_F_SLEEP: {
    char secs[16];
    snprintf(secs, sizeof secs, "0.%02d", 5 + rand() % 26);
    r = th_cmd(&servers[s], "DEBUG SLEEP %s", secs);
    break;
  }
  case TT_F_FLUSH:
    r = th_cmd(&servers[s], "SCRIPT FLUSH");
    break;
  case TT_F_CLOCK_FORWARD:
  case TT_F_CLOCK_BACK:
    clock_fault(f, servers[s].port);
    break;
  }
  if (r)
    freeReplyObject(r);
  R.faults[f]++;
}

/* --drift: the first drift_members servers' clocks run drift_pct % fast:
 * every 10 ms, a jump forward by that share of the time passed (the
 * fractions carried over). */
static void *drift_main(void *arg) {
  (void)arg;
  double carry = 0;
  int64_t last = th_now_ms();
  while (!atomic_load(&A->stop)) {
    sleep_ms(10);
    int64_t now = th_now_ms();
    carry += (double)(now - last) * O.drift_pct / 100.0;
    last = now;
    int64_t d = (int64_t)carry;
    if (d < 1)
      continue;
    carry -= (double)d;
    for (int i = 0; i < O.drift_members; i++)
      sim_clock_jump(servers[i].port, d, NULL);
  }
  return NULL;
}

static void *nemesis_main(void *arg) {
  int chosen[TT_F_COUNT], n = 0, next;
  int trace = getenv("TORTURE_TRACE") != NULL; /* the faults' times */
  for (int f = 0; f < TT_F_COUNT; f++)
    if (O.nemesis & (1u << f))
      chosen[n++] = f;
  next = n;
  while (!atomic_load(&A->stop) && n > 0) {
    int64_t wait = O.every_ms / 2 + rand() % (O.every_ms + 1);
    for (int64_t end = th_now_ms() + wait; th_now_ms() < end && !atomic_load(&A->stop);)
      sleep_ms(5);
    if (atomic_load(&A->stop))
      break;
    /* each fault once in every n, in a fresh random order per round: a
     * test that names several faults sees each of them (a plain random
     * pick left one out of 6 draws in 3 about once in 11 runs) */
    if (next == n) {
      for (int i = n - 1; i > 0; i--) {
        int j = rand() % (i + 1), t = chosen[i];
        chosen[i] = chosen[j];
        chosen[j] = t;
      }
      next = 0;
    }
    int f = chosen[next++];
    if (trace)
      fprintf(stderr, "torture: %.3f s: %s\n", tt_now_ns() / 1e9, faults[f]);
    fault(f);
    if (trace)
      fprintf(stderr, "torture: %.3f s: %s done\n", tt_now_ns() / 1e9, faults[f]);
  }
  /* Everything this thread wrote (fault counts, buried sections) is seen
   * by the main thread once it reads nemesis_idle. A restarted server's
   * PR_SET_PDEATHSIG follows this thread: it lives until the harness has
   * counted the keys left. */
  atomic_store(&nemesis_idle, 1);
  while (!atomic_load(&nemesis_exit))
    sleep_ms(5);
  return NULL;
}

/* ---- the fair queue, read from outside ----------------------------------- */

static tt_snapshot *snaps;
static size_t nsnaps, capsnaps;

static int slot_of(const char *owner, size_t len) {
  int n = atomic_load(&A->nslots);
  for (int i = 0; i < n; i++)
    if (strlen(A->slots[i].owner) == len &&
        memcmp(A->slots[i].owner, owner, len) == 0)
      return i;
  return -1;
}

static void *queue_main(void *arg) {
  char key[128];
  snprintf(key, sizeof key, "redisson_lock_queue:{%s}", A->name);
  struct timeval tv = {1, 0};
  redisContext *ctx = NULL;
  while (!atomic_load(&A->stop)) {
    if (ctx == NULL || ctx->err) {
      if (ctx)
        redisFree(ctx);
      /* on a cluster, the master that owns the queue's slot now */
      ctx = redisConnectWithTimeout(
          "127.0.0.1", th_node_of(&servers[0], key)->port, tv);
      if (ctx && !ctx->err)
        redisSetTimeout(ctx, tv);
    }
    tt_snapshot q = {.sent = tt_now_ns()};
    redisReply *r = ctx && !ctx->err ? redisCommand(ctx, "LRANGE %s 0 31", key) : NULL;
    q.replied = tt_now_ns();
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 1) {
      for (size_t i = 0; i < r->elements && q.n < 32; i++)
        q.slots[q.n++] = slot_of(r->element[i]->str, r->element[i]->len);
      if (nsnaps == capsnaps) {
        capsnaps = capsnaps ? 2 * capsnaps : 1024;
        snaps = realloc(snaps, capsnaps * sizeof *snaps);
      }
      snaps[nsnaps++] = q;
    }
    if (r && r->type == REDIS_REPLY_ERROR && ctx) /* MOVED: the slot moved */
      ctx->err = REDIS_ERR_OTHER;
    if (r)
      freeReplyObject(r);
    sleep_ms(2);
  }
  if (ctx)
    redisFree(ctx);
  return NULL;
}

/* ---- the run ------------------------------------------------------------- */

/* Keys left on the servers, not counting unlock latches: those are the
 * idempotent releases' memory and expire by themselves (2 command timeouts
 * plus a connect timeout after the release); *latches gets their number. */
static int64_t count_keys(int64_t *latches) {
  int64_t n = 0, nl = 0;
  struct timeval tv = {2, 0};
  /* the servers that are up; on a cluster its masters now */
  th_server *scan[TT_MAX_SERVERS + 16];
  int nscan = 0;
  if (O.sentinel) {
    /* the master the sentinels name: an old master that still says it is
     * one holds what it took after the promotion, and the sentinels will
     * wipe it when they make it a replica */
    th_server *m = th_sentinel_master(&servers[0]);
    if (m)
      scan[nscan++] = m;
  } else if (O.cluster) {
    for (int i = 0; i < servers[0].nnodes; i++)
      if (th_is_master(&servers[0].node[i]))
        scan[nscan++] = &servers[0].node[i];
  } else {
    for (int i = O.paused + O.blackholed; i < O.servers; i++)
      scan[nscan++] = &servers[i];
  }
  for (int i = 0; i < nscan; i++) {
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", scan[i]->port, tv);
    char cursor[32] = "0";
    do {
      redisReply *r = ctx && !ctx->err
                          ? redisCommand(ctx, "SCAN %s COUNT 1000", cursor)
                          : NULL;
      if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        if (r)
          freeReplyObject(r);
        fprintf(stderr, "torture: cannot scan server %d\n", i);
        n++; /* cannot tell: count it */
        break;
      }
      snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
      for (size_t k = 0; k < r->element[1]->elements; k++) {
        const char *key = r->element[1]->element[k]->str;
        if (strncmp(key, "redisson_unlock_latch:", 22) == 0) {
          nl++;
        } else if (n++ < 5 && latches) { /* the final count: say which */
          redisReply *t = redisCommand(ctx, "PTTL %s", key);
          fprintf(stderr, "torture: key left on server %d: %s (pttl %lld)\n",
                  i, key, t && t->type == REDIS_REPLY_INTEGER ? t->integer : -3);
          if (t)
            freeReplyObject(t);
        }
      }
      freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    if (ctx)
      redisFree(ctx);
  }
  if (latches)
    *latches = nl;
  return n;
}

/* --writes: the counter and the log, read back (from the master that has
 * them now) and deleted with the lock's fence, so that no key is left. */
static void read_data(int64_t *counter, redisReply **log) {
  char ck[128], lk[128];
  snprintf(ck, sizeof ck, "{%s}:counter", A->name);
  snprintf(lk, sizeof lk, "{%s}:log", A->name);
  th_server *s = O.sentinel ? th_sentinel_master(&servers[0]) : &servers[0];
  *counter = -1;
  *log = NULL;
  if (s == NULL)
    return;
  redisReply *c = th_cmd(s, "GET %s", ck);
  *counter = c && c->type == REDIS_REPLY_STRING ? atoll(c->str)
             : c && c->type == REDIS_REPLY_NIL  ? 0
                                                : -1;
  if (c)
    freeReplyObject(c);
  *log = th_cmd(s, "LRANGE %s 0 -1", lk);
  redisReply *d = th_cmd(s, "DEL %s %s", ck, lk);
  if (d)
    freeReplyObject(d);
  d = th_cmd(s, "DEL dlock_fence:{%s} redisson_lock_token:{%s}", A->name,
             A->name);
  if (d)
    freeReplyObject(d);
}

/* --kind election: the term counter and a killed leader's record stay by
 * design (docs/election.md); once the last leadership's lease ran out,
 * they go, so that what is counted left is what should not be. */
static void election_cleanup(void) {
  th_server *s = O.sentinel ? th_sentinel_master(&servers[0]) : &servers[0];
  if (s == NULL)
    return;
  int64_t lease = O.lease_ms > O.watchdog_ms ? O.lease_ms : O.watchdog_ms;
  for (int64_t stop = th_now_ms() + lease + 2000; th_now_ms() < stop;
       sleep_ms(50)) {
    redisReply *e = th_cmd(s, "EXISTS %s", A->name);
    int held = e && e->type == REDIS_REPLY_INTEGER && e->integer > 0;
    if (e)
      freeReplyObject(e);
    if (!held)
      break;
  }
  redisReply *d = th_cmd(s, "DEL dlock_election:{%s} redisson_lock_token:{%s}",
                         A->name, A->name);
  if (d)
    freeReplyObject(d);
}

/* A fair lock's queue keeps a dead waiter's entry until the next caller
 * purges it (Redisson's design): a waiter killed late, or whose leaving
 * was lost with a failed-over master's writes, is still queued when the
 * workers stop. Be that next caller: once the dead waiters' liveness has
 * run out, one try (never queued) and its release. */
static void fair_purge_call(void) {
  sleep_ms(O.slot_ms + 100);
  dlock_client *c = NULL;
  dlock_lock *l = NULL;
  if (dlock_client_open(A->urls[0], NULL, &c) == DLOCK_OK &&
      dlock_fair_lock_new(c, A->name, NULL, &l) == DLOCK_OK &&
      dlock_acquire(l, 0, 1000) == DLOCK_OK)
    dlock_release(l);
  dlock_lock_free(l);
  dlock_client_close(c);
  for (int64_t stop = th_now_ms() + 1000; th_now_ms() < stop && count_keys(NULL) > 0;)
    sleep_ms(50); /* the alive record expires by itself */
}

static int harness_main(void) {
  srand(O.seed ? O.seed : (unsigned)getpid());
  arena_fd = memfd_create("dlock-torture", 0);
  if (arena_fd < 0 || ftruncate(arena_fd, sizeof(tt_arena)) != 0) {
    perror("memfd");
    return 2;
  }
  A = mmap(NULL, sizeof(tt_arena), PROT_READ | PROT_WRITE, MAP_SHARED, arena_fd, 0);
  if (A == MAP_FAILED) {
    perror("mmap");
    return 2;
  }
  snprintf(A->name, sizeof A->name, "torture:%s", kinds[O.kind]);
  for (int i = 0; i < O.servers; i++) {
    if (i >= O.paused && i < O.paused + O.blackholed) {
      int port = th_blackhole_port();
      if (port < 0)
        return 2;
      snprintf(A->urls[i], sizeof A->urls[i], "redis://127.0.0.1:%d", port);
      continue;
    }
    const char *extra = O.loss_pct || O.split ? "--bind 127.0.0.1 127.0.0.2 "
                                                "--protected-mode no" : NULL;
    if (O.split) {
      char why[256] = "an nft rule failed";
      if (part_init(why, sizeof why) != 0) {
        fprintf(stderr, "torture: --split: %s\n", why);
        return 2;
      }
      th_topology_addrs(FIRST_NODE_ADDR);
    }
    if (O.cluster    ? th_cluster_start(&servers[i], 3, 1) != 0
        : O.sentinel ? th_sentinel_start(&servers[i], 2, 3) != 0
                     : th_server_start(&servers[i], extra) != 0) {
      fprintf(stderr, "torture: cannot start redis-server\n");
      return 2;
    }
    snprintf(A->urls[i], sizeof A->urls[i], "%s", servers[i].url);
    if (O.split && !O.cluster && !O.sentinel) { /* the workers' way in */
      snprintf(servers[i].addr, sizeof servers[i].addr, "127.0.0.2");
      snprintf(A->urls[i], sizeof A->urls[i], "redis://127.0.0.2:%d",
               servers[i].port);
    }
    for (int k = 0; O.min_replicas && k < servers[i].nnodes - servers[i].sentinels;
         k++) {
      redisReply *r = th_cmd(&servers[i].node[k], "CONFIG SET "
                             "min-replicas-to-write %d min-replicas-max-lag 1",
                             O.min_replicas);
      if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "torture: --min-replicas: %s\n", r ? r->str : "no answer");
        return 2;
      }
      freeReplyObject(r);
    }
    if (O.loss_pct) { /* the workers' path: 127.0.0.3 -> 127.0.0.2, lossy */
      char why[256] = "an nft rule failed";
      snprintf(A->urls[i], sizeof A->urls[i], "redis://127.0.0.2:%d",
               servers[i].port);
      if (part_init(why, sizeof why) != 0 ||
          part_loss("127.0.0.3", "127.0.0.2", O.loss_pct) != 0) {
        fprintf(stderr, "torture: --loss: %s\n", why);
        return 2;
      }
    }
    if (O.delay_ms || O.jitter_ms) { /* 127.0.0.3 -> relay on .2 -> server */
      int port = delay_start("127.0.0.2", "127.0.0.1", servers[i].port,
                                   O.delay_ms, O.jitter_ms);
      if (port < 0)
        return 2;
      snprintf(A->urls[i], sizeof A->urls[i], "redis://127.0.0.2:%d", port);
    }
  }
  if (O.kind == TT_SEMAPHORE) {
    dlock_client *c;
    dlock_permits *p;
    if (dlock_client_open(A->urls[0], NULL, &c) != DLOCK_OK ||
        dlock_permits_new(c, A->name, NULL, &p) != DLOCK_OK ||
        dlock_permits_try_set_permits(p, O.permits, 0, NULL) != DLOCK_OK) {
      fprintf(stderr, "torture: semaphore setup: %s\n", dlock_errmsg());
      return 2;
    }
    dlock_permits_free(p);
    dlock_client_close(c);
  }
  for (int i = 0; i < O.paused; i++)
    th_server_pause(&servers[i], 1);

  if (O.nemesis & TT_F_CLIENT_CLOCK) {
    if (access(FAKETIME_LIB, R_OK) != 0) {
      fprintf(stderr, "torture: client-clock needs libfaketime (%s): "
              "apt-get install libfaketime\n", FAKETIME_LIB);
      return 2;
    }
    snprintf(clock_file, sizeof clock_file, "/tmp/dlock-torture-clock-%d",
             (int)getpid());
    clock_file_write("+0");
  }
  for (int i = 0; i < O.procs; i++)
    procs[i] = spawn(i);
  pthread_t nem, queue, drift;
  pthread_create(&nem, NULL, nemesis_main, NULL);
  if (O.drift_pct > 0)
    pthread_create(&drift, NULL, drift_main, NULL);
  /* The fair order is checked unless a sentinel fails over: the queue
   * changes the old master took after the promotion are lost with the
   * rest of its writes, and the queue read there is not the one the new
   * master serves (docs/reliability.md). */
  int read_queue = TT_FIFO(O.kind) &&
                   !(O.sentinel && (O.nemesis & (TT_F_FAILOVER | TT_F_RESTART)));
  if (read_queue)
    pthread_create(&queue, NULL, queue_main, NULL);
  int64_t end = th_now_ms() + O.duration_ms;
  while (th_now_ms() < end && !atomic_load(&A->stop)) {
    sleep_ms(10);
    pthread_mutex_lock(&procs_mu);
    for (int i = 0; i < O.procs; i++) {
      int st;
      if (procs[i] < 0 && !atomic_load(&A->stop))
        procs[i] = spawn(i);
      if (procs[i] > 0 && waitpid(procs[i], &st, WNOHANG) == procs[i]) {
        if (!atomic_load(&A->stop) || st != 0) { /* ended early: it failed */
          fprintf(stderr, "torture: worker %d ended early (status %d)\n", i, st);
          R.worker_deaths++;
          bury(procs[i]);
        }
        procs[i] = 0;
      }
    }
    pthread_mutex_unlock(&procs_mu);
  }
  atomic_store(&A->stop, 1);
  while (!atomic_load(&nemesis_idle)) /* its last fault is done */
    sleep_ms(5);
  if (read_queue)
    pthread_join(queue, NULL);
  if (O.drift_pct > 0)
    pthread_join(drift, NULL);
  if (clock_file[0])
    unlink(clock_file);
  /* the workers finish their attempt in progress (its wait budget at most) */
  int64_t grace = O.wait_ms + O.command_timeout_ms + 10000;
  for (int i = 0; i < O.procs; i++) {
    if (procs[i] <= 0)
      continue;
    int st = th_wait_worker(procs[i], (int)grace);
    if (st != 0) {
      fprintf(stderr, "torture: worker %d exit status %d\n", i, st);
      R.worker_deaths++;
      if (st < 0)
        bury(procs[i]);
    }
  }
  for (int i = 0; i < O.paused; i++)
    th_server_pause(&servers[i], 0);
  int64_t data_counter = 0;
  redisReply *data_log = NULL;
  if (O.writes)
    read_data(&data_counter, &data_log);

  /* quiescence: after the longest lease nothing of ours may be left */
  int64_t lease = lease_ms();
  int64_t quiet = lease + (TT_FIFO(O.kind) ? O.slot_ms : 0) + 500;
  for (int64_t stop = th_now_ms() + quiet; th_now_ms() < stop;) {
    if (O.kind != TT_SEMAPHORE && count_keys(NULL) == 0)
      break;
    sleep_ms(50);
  }
  if (TT_FIFO(O.kind) && count_keys(NULL) > 0)
    fair_purge_call();
  R.counter_slack = counter_slack;
  tt_check(&O, A, snaps, nsnaps, &R);
  for (int64_t i = 0; O.trace && i < atomic_load(&A->nrecs); i++) {
    tt_rec *x = &A->recs[i];
    fprintf(stderr, "torture: attempt slot %d worker %d rc %d invoke %" PRId64
            " enter %" PRId64 " exit %" PRId64 " done %" PRId64 " lost %" PRId64
            " flags %#x\n", x->slot, A->slots[x->slot].proc, x->rc,
            x->invoke / 1000000, x->enter / 1000000, x->exit / 1000000,
            x->done / 1000000, atomic_load(&x->lost_at) / 1000000,
            atomic_load(&x->flags));
  }
  if (O.writes) {
    size_t n = data_log && data_log->type == REDIS_REPLY_ARRAY ? data_log->elements : 0;
    const char **entries = calloc(n + 1, sizeof *entries);
    size_t *lens = calloc(n + 1, sizeof *lens);
    for (size_t i = 0; entries && lens && i < n; i++) {
      entries[i] = data_log->element[i]->str;
      lens[i] = data_log->element[i]->len;
    }
    tt_check_data(&O, A, entries, lens, entries && lens ? n : 0, data_counter, &R);
    free(entries);
    free(lens);
    if (data_log)
      freeReplyObject(data_log);
  }
  if (O.kind == TT_SEMAPHORE) {
    dlock_client *c;
    dlock_permits *p;
    int64_t avail = -1;
    if (dlock_client_open(A->urls[0], NULL, &c) == DLOCK_OK) {
      if (dlock_permits_new(c, A->name, NULL, &p) == DLOCK_OK) {
        dlock_permits_counts(p, &avail, NULL);
        dlock_permits_free(p);
      }
      dlock_client_close(c);
    }
    R.available_left = avail;
    if (avail != O.permits)
      R.violations++;
  } else {
    if (O.kind == TT_ELECTION)
      election_cleanup();
    R.keys_left = count_keys(&R.latches_left);
  }
  tt_print(&O, &R);
  if (O.timeline && tt_timeline_draw(O.timeline, &O, A, faults) != 0)
    fprintf(stderr, "torture: no timeline drawn into %s\n", O.timeline);
  atomic_store(&nemesis_exit, 1);
  pthread_join(nem, NULL);
  delay_stop();
  for (int i = 0; i < O.servers; i++)
    if (servers[i].pid > 0)
      th_server_stop(&servers[i]);
  free(snaps);
  return R.violations ? 1 : 0;
}

int main(int argc, char **argv) {
  int worker = 0, proc = 0;
  parse(argc, argv, &worker, &proc);
  if (worker) {
    A = mmap(NULL, sizeof(tt_arena), PROT_READ | PROT_WRITE, MAP_SHARED,
             arena_fd, 0);
    if (A == MAP_FAILED)
      return 2;
    return tt_worker_main(&O, A, proc);
  }
  signal(SIGPIPE, SIG_IGN); /* the harness's own hiredis connections */
  worker_argc = argc;
  worker_argv = argv;
  return harness_main();
}
