/* `dlock run`: COMMAND while a lock is held (a distributed flock(1)),
 * with the signals passed on, a lost lease told to COMMAND's process
 * group, and nothing left behind on the way out. `dlock elect`: the same
 * while leading an election (dlock/election.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlock/dlock.h>

#include "cli.h"
#include "command.h"

static int lost_signal = SIGTERM;
static int orphan_signal = SIGKILL;

/* The signals `run` passes on to COMMAND's process group; while it waits
 * for the lock, they make it give up the wait (a fair lock's queue place
 * included) and then end it as they would have. */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

/* What `run` is doing, for the signal thread and the lost callbacks. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int acquiring; /* the main thread is in the acquire */
  pid_t group;   /* COMMAND's process group while it runs */
  int signal;    /* the first signal that came while there was no group */
  int lost;      /* the lease was lost */
  uint64_t owner; /* the acquiring thread */
} run_state = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0};

static void tell_child_lost(void) {
  pthread_mutex_lock(&run_state.mu);
  if (!run_state.lost && run_state.group > 0)
    kill(-run_state.group, lost_signal);
  run_state.lost = 1;
  pthread_mutex_unlock(&run_state.mu);
}

static void on_client_lost(void *data, const char *name, size_t len,
                           uint64_t owner, dlock_lost_reason reason) {
  tell_child_lost();
}

static void on_redlock_lost(void *data, dlock_lock *rl, uint64_t owner) {
  tell_child_lost();
}

/* COMMAND's group exists: a loss or a signal that came first reaches it at
 * its exec. */
static void on_group(pid_t group, void *data) {
  pthread_mutex_lock(&run_state.mu);
  run_state.group = group;
  if (run_state.lost)
    kill(-group, lost_signal);
  pthread_mutex_unlock(&run_state.mu);
}

/* The forwarded signals, blocked in every thread, arrive here: to COMMAND's
 * group while it runs; before, the first one interrupts the acquire (again
 * until it ends: an acquire between two waits is not interruptible yet). */
static void *signal_thread(void *arg) {
  const sigset_t *set = arg;
  for (;;) {
    int sig = 0;
    if (sigwait(set, &sig) != 0)
      continue;
    if (sig == SIGRTMIN) /* run's end (pthread_kill from cmd_run) */
      return NULL;
    pthread_mutex_lock(&run_state.mu);
    if (run_state.group > 0)
      kill(-run_state.group, sig);
    else if (run_state.signal == 0)
      run_state.signal = sig;
    while (run_state.acquiring && run_state.signal) {
      int n = 0;
      dlock_interrupt_owner(run_state.owner, &n);
      if (n > 0)
        break;
      struct timespec ts = cli_deadline(10);
      pthread_cond_timedwait(&run_state.cv, &run_state.mu, &ts);
    }
    pthread_mutex_unlock(&run_state.mu);
  }
  return NULL;
}

/* With a fixed lease, nobody renews it: when it runs out while the command
 * still runs, the lock is no longer ours. */
typedef struct lease_timer {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  int64_t validity_ms;
} lease_timer;

static void *lease_watch(void *arg) {
  lease_timer *t = arg;
  struct timespec ts = cli_deadline(t->validity_ms);
  pthread_mutex_lock(&t->mu);
  int rc = 0;
  while (!t->done && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&t->cv, &t->mu, &ts);
  int expired = !t->done;
  pthread_mutex_unlock(&t->mu);
  if (expired)
    tell_child_lost();
  return NULL;
}

static void run_help(void) {
  printf("usage: dlock [--redis URL]... run [options] NAME [--] COMMAND [ARG]...\n"
         "Options go before NAME; everything after NAME is COMMAND's, byte for\n"
         "byte (an optional `--` right after NAME is dropped).\n"
         "Run COMMAND while holding the lock NAME; release it when COMMAND ends.\n"
         "  --kind K          the lock's kind: reentrant (the default), fenced,\n"
         "                    non-reentrant, fair, non-reentrant-fair, spin,\n"
         "                    read, write, semaphore; the flags below name one\n"
         "  --fair            a fair lock (FIFO among waiters)\n"
         "  --spin            a spin lock: no pub/sub (waiters pause and try\n"
         "                    again), for servers and users without it\n"
         "  --fenced          a fenced lock: COMMAND gets its token and name in\n"
         "                    DLOCK_FENCE_TOKEN and DLOCK_LOCK_NAME, for\n"
         "                    `dlock write` or its own check (docs/fencing.md)\n"
         "  --read, --write   the read or write half of a read-write lock\n"
         "  --semaphore --permits P\n"
         "                    at most P commands at once (a crash-safe\n"
         "                    expirable-permit semaphore; P sets it if unset,\n"
         "                    and a different existing total is reported)\n"
         "  --wait D          give up after D (default: wait forever); 0 = try\n"
         "  --lease D         fixed lease; default: the watchdog renews it\n"
         "  --watchdog D      watchdog lease, renewed every third (default 10s)\n"
         "  --replica-sync D  on a cluster or with Sentinel, wait up to D (below\n"
         "                    3s) for the master's replicas to have each lock\n"
         "                    write; a grant none of them got is given back\n"
         "                    (exit 69)\n"
         "  --replica-sync-all\n"
         "                    with --replica-sync: every replica must have it,\n"
         "                    and a master with none gives no grant (Sentinel\n"
         "                    can promote a replica that lacked it)\n"
         "  --durable D       wait up to D for the server to fsync each lock\n"
         "                    write to its append-only file (WAITAOF: Redis\n"
         "                    7.2+ or Valkey, appendonly yes), so a restart\n"
         "                    keeps the grant; one not fsynced in time is\n"
         "                    given back (exit 69); a server that cannot is\n"
         "                    refused at once (exit 78)\n"
         "  --durable-replicas N\n"
         "                    with --durable: N replicas fsynced it too\n"
         "  --lost-signal S   signal sent to COMMAND's process group when the\n"
         "                    lease is lost (default TERM)\n"
         "  --orphan-signal S signal COMMAND's process group gets if dlock\n"
         "                    itself dies (even by kill -9), so nothing it\n"
         "                    started runs on without the lock (default KILL)\n"
         "COMMAND runs in a process group of its own: INT, TERM, HUP, QUIT, USR1\n"
         "and USR2 sent to dlock go to that group; before the lock is acquired\n"
         "they end the wait (a fair queue place is given up) and dlock with it.\n"
         "Several --redis: a RedLock over all of them (plain locks only).\n"
         "Exit: COMMAND's status (128+N when killed by signal N); 64 usage,\n"
         "65 NAME holds another kind of object, 69 Redis unreachable or\n"
         "refusing calls for now, 70 unexpected error, 71 out of memory,\n"
         "75 not acquired in time, 76 the lease was lost while COMMAND ran,\n"
         "77 refused by the server's ACL, 78 the server refused the\n"
         "password, ACL user or database, or TLS verification failed.\n");
}

typedef struct run_opts {
  const char *cmd; /* "run" or "elect" */
  const char *kind;  /* --kind K or its alias flag; NULL: a plain lock */
  const char *kind_flag; /* the flag that named it, for messages */
  int elect;         /* `dlock elect`: campaign, lead, resign */
  const char *value; /* elect --value */
  int64_t permits, wait_ms, lease_ms, watchdog_ms;
  const char *name;
  char **command;
} run_opts;

static void elect_help(void) {
  printf("usage: dlock [--redis URL] elect [--value V] [options] NAME [--] "
         "COMMAND [ARG]...\n"
         "Campaign in the election NAME and run COMMAND while leading it;\n"
         "standbys wait, and one takes over at once when the leader resigns\n"
         "(COMMAND ends) or within its lease when it dies (docs/election.md).\n"
         "COMMAND gets the term in DLOCK_LEADER_TERM (and DLOCK_FENCE_TOKEN)\n"
         "and the name in DLOCK_LOCK_NAME: `dlock write NAME ...` is refused\n"
         "once a newer leader was elected.\n"
         "  --value V         what `dlock leader NAME` shows of this leader\n"
         "                    (default: empty)\n"
         "  --wait, --lease, --watchdog, --replica-sync, --replica-sync-all,\n"
         "  --durable, --durable-replicas, --lost-signal, --orphan-signal:\n"
         "  as `run`'s\n"
         "The signals go to COMMAND as with `run`; before it leads they end\n"
         "the campaign. Exit: COMMAND's status; 75 not elected in time, 76\n"
         "the leadership was lost while COMMAND ran; the others as `run`'s.\n");
}

/* One option of `run` that takes a value (val: argv[*i + 1]). */
static int run_option_value(const char *o, const char *val, run_opts *ro) {
  if (val == NULL)
    return cli_usage_error("%s needs a value", o);
  if (!strcmp(o, "--permits")) {
    if (cli_parse_count(val, 1, &ro->permits) != 0)
      return cli_usage_error("bad --permits \"%s\" (a number >= 1)", val);
    return 0;
  }
  if (!strcmp(o, "--replica-sync") || !strcmp(o, "--durable") ||
      !strcmp(o, "--durable-replicas"))
    return cli_ack_option(o, val);
  if (!strcmp(o, "--lost-signal") || !strcmp(o, "--orphan-signal")) {
    int sig = cli_parse_signal(val);
    if (sig < 0)
      return cli_usage_error("bad %s \"%s\" (TERM, INT, KILL, ...)", o, val);
    *(!strcmp(o, "--lost-signal") ? &lost_signal : &orphan_signal) = sig;
    return 0;
  }
  int64_t d = cli_parse_duration(val);
  int is_wait = !strcmp(o, "--wait");
  if (d == -2 || (d == -1 && !is_wait) || (d == 0 && !is_wait))
    return cli_usage_error("bad duration \"%s\" for %s (like 500ms, 30s, 5m)", val, o);
  if (is_wait)
    ro->wait_ms = d;
  else if (!strcmp(o, "--lease"))
    ro->lease_ms = d;
  else if (d < 30)
    return cli_usage_error("--watchdog must be at least 30ms");
  else
    ro->watchdog_ms = d;
  return 0;
}

/* The kind a flag names (--fair: "fair", ...), or NULL. */
static const char *kind_alias(const char *flag) {
  static const char *const alias[][2] = {
      {"--fair", "fair"}, {"--fenced", "fenced"}, {"--spin", "spin"},
      {"--read", "read"}, {"--write", "write"}, {"--semaphore", "semaphore"}};
  for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
    if (!strcmp(flag, alias[i][0]))
      return alias[i][1];
  return NULL;
}

/* ro's kind is name (a hyphen standing for a space, as dlock_lock_new
 * takes it). */
static int is_kind(const run_opts *ro, const char *name) {
  return ro->kind && !strcmp(ro->kind, name);
}

/* --kind K (or flag, an alias of one): one of dlock_kinds(), once. */
static int set_kind(run_opts *ro, const char *flag, const char *kind) {
  const char *found = dlock_kind_name(kind);
  if (found == NULL) {
    char known[256] = "";
    for (const char *const *k = dlock_kinds(); *k; k++)
      snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
               known[0] ? ", " : "", *k);
    return cli_usage_error("%s: no lock kind \"%s\" (the kinds: %s; a hyphen "
                           "for a space)", ro->cmd, kind, known);
  }
  if (ro->kind && strcmp(ro->kind, found) != 0)
    return cli_usage_error("%s: %s and %s exclude each other (one kind of "
                           "lock)", ro->cmd, ro->kind_flag, flag);
  ro->kind = found;
  ro->kind_flag = flag;
  return 0;
}

/* Parse `run [options] NAME [--] COMMAND...`: options (run's and the
 * global ones) before NAME, everything after it COMMAND's, byte for byte;
 * an optional `--` right after NAME is dropped, as flock(1) has none.
 * Returns 0, -1 after --help, or an exit status. */
static int parse_run(int argc, char **argv, run_opts *ro) {
  int elect = !strcmp(argv[0], "elect");
  *ro = (run_opts){.cmd = elect ? "elect" : "run", .elect = elect,
                   .value = "", .wait_ms = -1,
                   .lease_ms = DLOCK_LEASE_WATCHDOG, .watchdog_ms = 10000};
  int i = 1;
  for (; i < argc && cli_is_option(argv[i]); i++) {
    const char *o = argv[i];
    int status = 0;
    if (!strcmp(o, "--")) {
      i++;
      break;
    } else if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      (ro->elect ? elect_help : run_help)();
      return -1;
    } else if (ro->elect && !strcmp(o, "--value")) {
      if (i + 1 >= argc)
        return cli_usage_error("--value needs a value");
      ro->value = argv[++i];
    } else if (kind_alias(o) || !strcmp(o, "--kind")) {
      if (!strcmp(o, "--kind") && i + 1 >= argc)
        return cli_usage_error("--kind needs a value (`dlock run --help` "
                               "lists the kinds)");
      status = set_kind(ro, o, kind_alias(o) ? kind_alias(o) : argv[++i]);
    } else if (!strcmp(o, "--replica-sync-all")) {
      cli.replica_sync_all = 1;
    } else if (!strcmp(o, "--permits") || !strcmp(o, "--wait") ||
               !strcmp(o, "--lease") || !strcmp(o, "--watchdog") ||
               !strcmp(o, "--replica-sync") || !strcmp(o, "--durable") ||
               !strcmp(o, "--durable-replicas") || !strcmp(o, "--lost-signal") ||
               !strcmp(o, "--orphan-signal")) {
      status = run_option_value(o, i + 1 < argc ? argv[++i] : NULL, ro);
    } else {
      status = cli_other_option(ro->cmd, argc, argv, &i);
    }
    if (status)
      return status;
  }
  int ack = cli_ack_opts_check();
  if (ack)
    return ack;
  int kinds = ro->kind != NULL;
  if (ro->elect && kinds > 0)
    return cli_usage_error("elect: an election is a kind of its own (no %s)",
                           ro->kind_flag);
  if (is_kind(ro, "semaphore") != (ro->permits > 0))
    return cli_usage_error("run: --semaphore and --permits go together");
  if (i >= argc)
    return cli_usage_error("%s: missing NAME", ro->cmd);
  ro->name = argv[i++];
  if (i < argc && !strcmp(argv[i], "--"))
    i++; /* optional: NAME COMMAND... is unambiguous */
  else if (i < argc && cli_is_option(argv[i]))
    return cli_usage_error("%s: options go before NAME: dlock %s [OPTIONS] NAME "
                       "[--] COMMAND... (%s came after %s; everything after "
                       "NAME is COMMAND's)", ro->cmd, ro->cmd, argv[i],
                       ro->name);
  if (i >= argc)
    return cli_usage_error("%s: missing the command (NAME -- COMMAND...)",
                       ro->cmd);
  ro->command = argv + i;
  if (cli.nurls > 1 && (kinds > 0 || ro->elect))
    return cli_usage_error("%s: several --redis (RedLock) work with plain locks "
                       "only", ro->cmd);
  return 0;
}

/* The lock `run` takes: a RedLock over n clients' members, or one of the
 * kinds on clients[0]. */
static int make_run_lock(const run_opts *ro, int n, dlock_client **clients,
                         dlock_lock **members, dlock_lock **lock) {
  const char *name = ro->name;
  int rc = DLOCK_OK;
  if (n > 1) {
    for (int k = 0; k < n && rc == DLOCK_OK; k++)
      rc = dlock_reentrant_lock_new(clients[k], name, NULL, &members[k]);
    dlock_redlock_opts opts = DLOCK_REDLOCK_OPTS_INIT;
    opts.on_lost = on_redlock_lost;
    return rc == DLOCK_OK ? dlock_redlock_new(members, (size_t)n, &opts, lock) : rc;
  }
  if (is_kind(ro, "semaphore")) {
    dlock_permits *p = NULL;
    int set = 0;
    int64_t available = 0, taken = 0;
    rc = dlock_permits_new(clients[0], name, NULL, &p);
    if (rc == DLOCK_OK)
      rc = dlock_permits_try_set_permits(p, ro->permits, 0, &set);
    if (rc == DLOCK_OK && !set)
      rc = dlock_permits_counts(p, &available, &taken);
    if (rc == DLOCK_OK && !set && available + taken != ro->permits)
      fprintf(stderr, "%s: semaphore %s has a total of %" PRId64 " permits "
              "(%" PRId64 " available now, %" PRId64 " held), not the %" PRId64
              " of --permits: --permits sets the total only the first time; "
              "`dlock sem set %s %" PRId64 "` changes it\n", cli_prog, name,
              available + taken, available, taken, ro->permits, name,
              ro->permits);
    dlock_permits_free(p);
    if (rc != DLOCK_OK)
      return rc;
  }
  return dlock_lock_new(clients[0], ro->kind ? ro->kind : "reentrant", name,
                        NULL, lock);
}

/* `elect`'s election on c, its lock in *lock: bound to the run's owner (the
 * main thread's id), which a signal interrupts. */
static int make_election(const run_opts *ro, dlock_client *c,
                         dlock_election **el, dlock_lock **lock) {
  int rc = dlock_election_new(c, ro->name, NULL, el);
  if (rc != DLOCK_OK)
    return rc;
  *lock = dlock_election_lock(*el);
  return dlock_lock_bind_owner(*lock, run_state.owner);
}

/* Take the lock, or campaign until leading. */
static int take(const run_opts *ro, dlock_election *el, dlock_lock *lock,
                dlock_grant *grant) {
  if (el == NULL)
    return dlock_acquire_grant(lock, ro->wait_ms, ro->lease_ms, grant);
  grant->validity_ms = ro->lease_ms; /* a fixed lease: its length */
  return dlock_election_campaign(el, ro->value, strlen(ro->value), ro->wait_ms,
                                 ro->lease_ms, &grant->token);
}

/* What COMMAND learns of its grant: the fenced lock's token, or the
 * election's term, and the name. Set before the fork: no other thread of
 * dlock reads the environment now. 0 or -1. */
static int grant_env(const run_opts *ro, const dlock_grant *grant) {
  char token[32];
  snprintf(token, sizeof token, "%lld", (long long)grant->token);
  if (ro->elect && setenv("DLOCK_LEADER_TERM", token, 1) != 0)
    return -1;
  if ((is_kind(ro, "fenced") || ro->elect) &&
      (setenv("DLOCK_FENCE_TOKEN", token, 1) != 0 ||
       setenv("DLOCK_LOCK_NAME", ro->name, 1) != 0))
    return -1;
  return 0;
}

/* Run the command while the lock is held: in a process group of its own
 * that gets the forwarded signals, the lost signal (with a fixed lease, a
 * watcher sends it when the lease runs out) and, if dlock dies, the orphan
 * signal. Returns its exit status (128+N for signal N). */
static int run_command(char **command, int64_t lease_ms, int64_t validity_ms,
                       const sigset_t *mask) {
  lease_timer lt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
                    validity_ms};
  cli_cond_init(&lt.cv); /* its deadline on the monotonic clock */
  pthread_t watcher;
  int watching = lease_ms != DLOCK_LEASE_WATCHDOG &&
                 pthread_create(&watcher, NULL, lease_watch, &lt) == 0;
  command_job job;
  int status;
  if (cli_command_start(&job, command, orphan_signal, mask, on_group, NULL) != 0) {
    fprintf(stderr, "%s: cannot start the command: %s\n", cli_prog, strerror(errno));
    status = EXIT_SOFTWARE;
  } else {
    status = cli_command_wait(&job);
    pthread_mutex_lock(&run_state.mu);
    run_state.group = 0;
    pthread_mutex_unlock(&run_state.mu);
  }
  if (watching) {
    pthread_mutex_lock(&lt.mu);
    lt.done = 1;
    pthread_cond_signal(&lt.cv);
    pthread_mutex_unlock(&lt.mu);
    pthread_join(watcher, NULL);
  }
  return status;
}

/* Take the lock, run COMMAND, let go. Signals: see signal_thread. */
static int run_locked(const run_opts *ro, const sigset_t *mask) {
  int n = cli.nurls ? cli.nurls : 1, status = 0;
  dlock_client *clients[CLI_MAX_REDIS] = {0};
  dlock_lock *members[CLI_MAX_REDIS] = {0}, *lock = NULL;
  dlock_election *el = NULL;
  for (int k = 0; k < n && status == 0; k++)
    status = cli_connect_to(cli.nurls ? cli.urls[k] : cli_default_url(), ro->watchdog_ms,
                        cli.nurls > 1 ? NULL : on_client_lost,
                        k > 0 ? clients[0] : NULL, &clients[k]);
  int rc = DLOCK_OK;
  if (status == 0 &&
      (rc = ro->elect ? make_election(ro, clients[0], &el, &lock)
                      : make_run_lock(ro, n, clients, members, &lock)) != DLOCK_OK)
    status = cli_fail(rc, ro->name);
  dlock_grant grant = {0, 0};
  if (status == 0) {
    rc = take(ro, el, lock, &grant);
    pthread_mutex_lock(&run_state.mu);
    run_state.acquiring = 0;
    int sig = run_state.signal;
    pthread_cond_broadcast(&run_state.cv);
    pthread_mutex_unlock(&run_state.mu);
    if (sig) { /* asked to stop while waiting: leave nothing behind */
      if (rc == DLOCK_OK)
        dlock_release(lock);
      fprintf(stderr, "%s: %s: gave up %s on signal %d (%s)\n", cli_prog, ro->name,
              rc != DLOCK_OK ? "waiting"
              : el           ? "the leadership just won"
                             : "the lock just acquired",
              sig, strsignal(sig));
      status = 128 + sig;
    } else if (rc == DLOCK_ETIMEDOUT || rc == DLOCK_EBUSY ||
               (rc == DLOCK_EQUORUM && ro->wait_ms >= 0)) {
      /* the fact once: a busy or late acquire's message names the kind
       * and the name ('lock "job": not available: ...'); a RedLock's
       * says what the quorum was */
      if (rc == DLOCK_EQUORUM)
        fprintf(stderr, "%s: %s: %s\n", cli_prog, ro->name, dlock_errmsg());
      else
        fprintf(stderr, "%s: %s\n", cli_prog, dlock_errmsg());
      status = EXIT_TIMEOUT;
    } else if (rc != DLOCK_OK) {
      status = cli_fail(rc, ro->name);
    }
  }
  /* the token (term) and name for COMMAND's guarded writes (`dlock
   * write`, or the resource's own check: docs/fencing.md) */
  if (status == 0 && grant_env(ro, &grant) != 0) {
    dlock_release(lock);
    status = cli_fail(DLOCK_ENOMEM, ro->name);
  }
  if (status == 0) {
    status = run_command(ro->command, ro->lease_ms, grant.validity_ms, mask);
    rc = dlock_release(lock);
    pthread_mutex_lock(&run_state.mu);
    int lost = run_state.lost;
    pthread_mutex_unlock(&run_state.mu);
    if (lost || rc == DLOCK_ELOST) {
      fprintf(stderr, "%s: the %s of %s was lost while the command ran%s\n",
              cli_prog, el ? "leadership" : "lease", ro->name,
              lost ? " (the command was signalled)" : "");
      status = EXIT_LOST;
    } else if (rc != DLOCK_OK && rc != DLOCK_EQUORUM) {
      cli_fail(rc, "release");
    }
  }
  if (el)
    dlock_election_free(el); /* its lock with it */
  else
    dlock_lock_free(lock);
  for (int k = 0; k < n; k++) {
    dlock_lock_free(members[k]);
    dlock_client_close(clients[k]);
  }
  return status;
}

int cmd_run(int argc, char **argv) {
  run_opts ro;
  int status = parse_run(argc, argv, &ro);
  if (status)
    return status < 0 ? 0 : status;
  /* the forwarded signals go to signal_thread alone: blocked before any
   * other thread (the engine's) exists */
  sigset_t set, mask;
  sigemptyset(&set);
  for (size_t k = 0; k < NFORWARDED; k++)
    sigaddset(&set, forwarded[k]);
  sigaddset(&set, SIGRTMIN); /* ends the signal thread (no cancellation) */
  pthread_sigmask(SIG_BLOCK, &set, &mask);
  run_state.owner = dlock_thread_id();
  run_state.acquiring = 1;
  cli_cond_init(&run_state.cv); /* timed waits on the monotonic clock */
  pthread_t signals;
  int started = pthread_create(&signals, NULL, signal_thread, &set);
  if (started != 0) { /* EAGAIN: out of memory or of threads */
    fprintf(stderr, "%s: cannot start a thread: %s (out of memory?)\n", cli_prog,
            strerror(started));
    return EXIT_OSERR;
  }
  status = run_locked(&ro, &mask);
  pthread_kill(signals, SIGRTMIN);
  pthread_join(signals, NULL);
  if (status > 128 && status - 128 == run_state.signal) {
    /* end as the signal would have ended us, so a shell sees it */
    signal(status - 128, SIG_DFL);
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    raise(status - 128);
  }
  return status;
}
