/* dlock: distributed locks, latches and semaphores from the shell.
 *
 *   dlock [--redis URL]... run [options] NAME -- COMMAND [ARG]...
 *   dlock latch set|count-down|wait|get|delete NAME [COUNT]
 *   dlock sem init|set|acquire|release|available NAME [N]
 *   dlock status [--json] NAME
 *   dlock list [--json] [PATTERN]
 *   dlock watch [--json] NAME
 *   dlock unlock --force NAME
 *   dlock check
 *   dlock write [--token T] NAME CMD...
 *
 * See docs/dlock.1 (man dlock). Exit statuses are in usage_main() below. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlock/dlock.h>

#include "check.h"
#include "command.h"

enum {
  EXIT_USAGE = 64,    /* bad command line (sysexits EX_USAGE) */
  EXIT_KIND = 65,     /* the name holds another kind of object (EX_DATAERR) */
  EXIT_NOREDIS = 69,  /* cannot reach Redis (EX_UNAVAILABLE) */
  EXIT_SOFTWARE = 70, /* unexpected error (EX_SOFTWARE) */
  EXIT_TIMEOUT = 75,  /* not acquired / not reached in time (EX_TEMPFAIL) */
  EXIT_LOST = 76,     /* the lease was lost while the command ran */
  EXIT_NOPERM = 77,   /* the server's ACL refused a command or channel
                         (EX_NOPERM) */
  EXIT_CONFIG = 78    /* the server refused the credentials or database,
                         TLS verification failed, the URL does not fit the
                         server (EX_CONFIG): fix it, no retry helps */
};

#define MAX_REDIS 16

static const char *prog = "dlock";
static const char *redis_urls[MAX_REDIS];
static int nredis;
static char password[4096]; /* --password-file or DLOCK_REDIS_PASSWORD */
static int have_password;
/* a sentinel URL's sentinels: --sentinel-password-file or
 * DLOCK_SENTINEL_PASSWORD, --sentinel-user */
static char sentinel_password[4096];
static int have_sentinel_password;
static const char *sentinel_user;
/* rediss...: --tls-ca, --tls-ca-dir, --tls-cert, --tls-key,
 * --tls-server-name, --tls-insecure */
static const char *tls_ca, *tls_ca_dir, *tls_cert, *tls_key, *tls_server_name;
static const char *source_addr; /* --source-addr */
static int tls_insecure;
/* the first --tls-* and --sentinel-* flag given: a URL they do not apply to
 * is refused with its name, never run without them */
static const char *tls_flag, *sentinel_flag;

/* ---- messages and parsing ------------------------------------------------- */

static void usage_main(FILE *f) {
  fprintf(f,
          "usage: dlock COMMAND ... [--redis URL]... [--password-file FILE]\n"
          "\n"
          "  run [--fair|--fenced|--read|--write|--semaphore --permits P]\n"
          "      [--wait D]\n"
          "      [--lease D] [--watchdog D] [--replica-sync D]\n"
          "      [--durable D [--durable-replicas N]]\n"
          "      [--lost-signal SIG] [--orphan-signal SIG]\n"
          "      NAME [--] CMD...\n"
          "                      run CMD while holding the lock NAME\n"
          "  latch set NAME COUNT | count-down NAME | wait [--wait D] NAME |\n"
          "        get NAME | delete NAME\n"
          "  sem init|set NAME PERMITS | acquire [--wait D] NAME [N] |\n"
          "      release NAME [N] | available NAME\n"
          "  status [--json] NAME  what is stored under NAME\n"
          "  list [--json] [--limit N] [PATTERN]\n"
          "                      the locks, latches and semaphores under PATTERN\n"
          "  watch [--json] [--every D] [--changes N] [--for D] NAME\n"
          "                      NAME's holders and waiters, a line per change\n"
          "  unlock --force NAME   release NAME whoever holds it\n"
          "  check                 test that the credentials can do all of it\n"
          "  write [--token T] NAME CMD...\n"
          "                      a guarded write: CMD only while the fenced\n"
          "                      lock NAME's newest grant is token T\n"
          "\n"
          "--redis URL (or DLOCK_REDIS_URL; default redis://127.0.0.1:6379):\n"
          "  redis://[user:password@]host[:port][/db], unix:///path.sock, or\n"
          "  redis+cluster://[user:password@]h1:p1,h2:p2 (Redis Cluster), or\n"
          "  redis+sentinel://[user:password@]s1:p1,s2:p2/NAME[/db] (the master\n"
          "  NAME of Redis Sentinel; user and password are the master's;\n"
          "  sentinels that want a password: --sentinel-password-file FILE\n"
          "  or DLOCK_SENTINEL_PASSWORD, and --sentinel-user USER for an ACL\n"
          "  user);\n"
          "  rediss://, rediss+cluster://, rediss+sentinel://: the same over TLS,\n"
          "  with --tls-ca FILE | --tls-ca-dir DIR (default: the system's CAs),\n"
          "  --tls-cert FILE --tls-key FILE (a client certificate),\n"
          "  --tls-server-name NAME, --tls-insecure (no verification: INSECURE);\n"
          "  valkey://, valkeys://, valkey+cluster://, valkey+sentinel://, ...:\n"
          "  the same as the redis forms (Redisson's spellings).\n"
          "  several --redis make `run` take a RedLock over all of them.\n"
          "--source-addr ADDR: connect from this local IP address.\n"
          "Options, these and a command's own, go before NAME; what follows NAME\n"
          "  is never dlock's (`run`: COMMAND's, byte for byte). A --tls-* flag\n"
          "  for a URL without TLS, or --sentinel-* for one without Sentinel, is\n"
          "  refused.\n"
          "Passwords: keep them out of URLs (every user sees them in ps):\n"
          "  --password-file FILE (mode 600 or stricter; its first line) or\n"
          "  DLOCK_REDIS_PASSWORD, used for every server in place of a URL's\n"
          "  password; an ACL user stays in the URL as redis://user:@host.\n"
          "  Messages never show a password.\n"
          "Durations: 500ms, 30s, 5m, 1h (a bare number is seconds).\n"
          "Exit status: the command's own for `run`; 64 usage, 65 the name\n"
          "holds another kind of object, 69 Redis unreachable or refusing\n"
          "calls for now (loading, a busy script, too few replicas), 70\n"
          "unexpected error, 75 not acquired (or not reached) in time, 76 the\n"
          "lease was lost while the command ran (`write`: refused), 77 refused\n"
          "by the server's ACL, 78 a configuration to fix: the server refused\n"
          "the password, ACL user or database, TLS verification failed, or\n"
          "the URL does not fit the server.\n"
          "`dlock COMMAND --help` describes one command.\n");
}

/* url as it may be printed: without its password. */
static const char *shown(const char *url) {
  static char buf[512];
  dlock_uri_redact(url, buf, sizeof buf);
  return buf;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(`dlock --help` for usage)\n");
  return EXIT_USAGE;
}

/* The library's message in the CLI's words: its option names become the
 * flags that set them (tls_ca_file is --tls-ca here). */
static void print_in_cli_words(FILE *f, const char *msg) {
  static const char *const words[][2] = {
      {"tls_ca_file", "--tls-ca"},        {"tls_ca_dir", "--tls-ca-dir"},
      {"tls_cert_file", "--tls-cert"},    {"tls_key_file", "--tls-key"},
      {"tls_server_name", "--tls-server-name"},
      {"tls_insecure", "--tls-insecure"},
      {"sentinel_password", "--sentinel-password-file"},
      {"sentinel_username", "--sentinel-user"},
      {"replica_sync_ms", "--replica-sync"},
      {"durable_replicas", "--durable-replicas"},
      {"durable_ms", "--durable"},
      {"source_addr", "--source-addr"}};
  const size_t nwords = sizeof words / sizeof words[0];
  while (*msg) {
    size_t k = 0;
    while (k < nwords && strncmp(msg, words[k][0], strlen(words[k][0])) != 0)
      k++;
    if (k < nwords) {
      fputs(words[k][1], f);
      msg += strlen(words[k][0]);
    } else {
      fputc(*msg++, f);
    }
  }
}

static int fail(int rc, const char *what) {
  /* the fact once: a message that names its subject goes alone, one that
   * states what failed goes after the subject (so does every failure to
   * connect: "cannot connect to URL" says the code's words already), else
   * the code's words first */
  const char *m = dlock_errmsg();
  static const char *const says_it[] = {
      "the name holds ", "its key holds data of another type",
      "the server refused the call", "the ACL user may not do this"};
  int said = strncmp(what, "cannot connect to ", 18) == 0;
  for (size_t i = 0; i < sizeof says_it / sizeof says_it[0]; i++)
    said |= strncmp(m, says_it[i], strlen(says_it[i])) == 0;
  if (strncmp(m, "guarded write on ", 17) == 0)
    fprintf(stderr, "%s: ", prog);
  else if (said && m[0])
    fprintf(stderr, "%s: %s: ", prog, what);
  else
    fprintf(stderr, "%s: %s: %s%s", prog, what, dlock_strerror(rc),
            dlock_errmsg()[0] ? ": " : "");
  print_in_cli_words(stderr, dlock_errmsg());
  fputc('\n', stderr);
  switch (rc) {
  case DLOCK_EIO:
  case DLOCK_ECLOSED:
    return EXIT_NOREDIS;
  case DLOCK_ETIMEDOUT:
  case DLOCK_EBUSY:
  case DLOCK_EQUORUM:
    return EXIT_TIMEOUT;
  case DLOCK_ELOST:
  case DLOCK_EFENCED:
    return EXIT_LOST;
  case DLOCK_EAUTH:
  case DLOCK_ETLS:
  case DLOCK_ECONFIG:
    return EXIT_CONFIG;
  case DLOCK_EKIND:
    return EXIT_KIND;
  case DLOCK_EPERM:
    return EXIT_NOPERM;
  case DLOCK_EINVAL:
    return EXIT_USAGE;
  default:
    return EXIT_SOFTWARE;
  }
}

/* "500ms", "30s", "5m", "1h", "2" (seconds), "forever". -2 on error. */
static int64_t parse_duration(const char *s) {
  if (strcmp(s, "forever") == 0)
    return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || v < 0 || v > 1e9)
    return -2;
  double scale;
  if (*end == '\0' || strcmp(end, "s") == 0)
    scale = 1000;
  else if (strcmp(end, "ms") == 0)
    scale = 1;
  else if (strcmp(end, "m") == 0)
    scale = 60000;
  else if (strcmp(end, "h") == 0)
    scale = 3600000;
  else
    return -2;
  return (int64_t)(v * scale + 0.5);
}

static int parse_count(const char *s, int64_t min, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || errno || v < min)
    return -1;
  *out = v;
  return 0;
}

static int parse_signal(const char *s) {
  static const struct {
    const char *name;
    int sig;
  } sigs[] = {{"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},
              {"KILL", SIGKILL}, {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
              {"USR2", SIGUSR2}};
  if (strncmp(s, "SIG", 3) == 0)
    s += 3;
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    if (strcmp(s, sigs[i].name) == 0)
      return sigs[i].sig;
  int64_t n;
  return parse_count(s, 1, &n) == 0 && n < 65 ? (int)n : -1;
}

/* ---- connecting ------------------------------------------------------------ */

static const char *default_url(void) {
  const char *env = getenv("DLOCK_REDIS_URL");
  return env && *env ? env : "redis://127.0.0.1:6379";
}

static int64_t replica_sync_ms; /* run --replica-sync */
static int64_t durable_ms, durable_replicas; /* run --durable */

/* ---- global options ---------------------------------------------------- */

/* --password-file (opt): the first line of a file no one else may read,
 * into buf (4096 bytes). */
static int read_password_file(const char *opt, const char *path, char *buf,
                              int *have) {
  const size_t size = 4096;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    int err = errno;
    if (fd >= 0)
      close(fd);
    return usage_error("%s %s: %s", opt, path, strerror(err));
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    close(fd);
    return usage_error("%s %s is readable or writable by group or "
                       "others (mode %03o): chmod 600 it", opt, path,
                       (unsigned)(st.st_mode & 0777));
  }
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n < 0)
    return usage_error("%s %s: %s", opt, path, strerror(errno));
  buf[n] = '\0';
  size_t len = strcspn(buf, "\r\n");
  if (len == (size_t)n && len == size - 1)
    return usage_error("%s %s: its first line is longer than %zu "
                       "bytes", opt, path, size - 2);
  buf[len] = '\0';
  if (len == 0)
    return usage_error("%s %s: no password on its first line", opt, path);
  *have = 1;
  return 0;
}

/* A password from the environment variable name, unless a file gave one. */
static int env_password(const char *name, char *buf, int *have) {
  const char *env = getenv(name);
  if (*have || env == NULL || *env == '\0')
    return 0;
  if (strlen(env) >= 4096)
    return usage_error("%s is too long", name);
  snprintf(buf, 4096, "%s", env);
  *have = 1;
  return 0;
}

/* A global option at argv[*i]: taken, with its value, and *i moved onto the
 * value. Returns 0 when taken, -1 when argv[*i] is not a global option, or
 * an exit status. */
static int take_global(int argc, char **argv, int *i) {
  const char *o = argv[*i];
  if (!strcmp(o, "--tls-insecure")) {
    tls_insecure = 1;
    tls_flag = tls_flag ? tls_flag : o;
    return 0;
  }
  static const char *const with_value[] = {
      "--redis", "--password-file", "--sentinel-password-file", "--sentinel-user",
      "--tls-ca", "--tls-ca-dir", "--tls-cert", "--tls-key", "--tls-server-name",
      "--source-addr"};
  size_t k = 0;
  while (k < sizeof with_value / sizeof with_value[0] && strcmp(o, with_value[k]))
    k++;
  if (k == sizeof with_value / sizeof with_value[0])
    return -1;
  if (*i + 1 >= argc)
    return usage_error("%s needs a value", o);
  const char *val = argv[++*i];
  if (!strncmp(o, "--tls-", 6))
    tls_flag = tls_flag ? tls_flag : o;
  if (!strncmp(o, "--sentinel-", 11))
    sentinel_flag = sentinel_flag ? sentinel_flag : o;
  if (!strcmp(o, "--password-file"))
    return read_password_file(o, val, password, &have_password);
  if (!strcmp(o, "--sentinel-password-file"))
    return read_password_file(o, val, sentinel_password, &have_sentinel_password);
  const char **dest = !strcmp(o, "--sentinel-user")    ? &sentinel_user
                      : !strcmp(o, "--tls-ca")           ? &tls_ca
                      : !strcmp(o, "--tls-ca-dir")       ? &tls_ca_dir
                      : !strcmp(o, "--tls-cert")         ? &tls_cert
                      : !strcmp(o, "--tls-key")          ? &tls_key
                      : !strcmp(o, "--tls-server-name")  ? &tls_server_name
                      : !strcmp(o, "--source-addr")      ? &source_addr
                                                         : NULL;
  if (dest) {
    *dest = val;
    return 0;
  }
  if (nredis == MAX_REDIS)
    return usage_error("at most %d --redis", MAX_REDIS);
  if (dlock_uri_check(val) != DLOCK_OK)
    return usage_error("bad --redis URL \"%s\": %s", shown(val), dlock_errmsg());
  redis_urls[nredis++] = val;
  return 0;
}

/* One option of a subcommand's that is not its own: a global one, or a
 * usage error naming cmd. Same returns as take_global, never -1. */
static int other_option(const char *cmd, int argc, char **argv, int *i) {
  int status = take_global(argc, argv, i);
  if (status >= 0)
    return status;
  return usage_error("%s: unknown option %s", cmd, argv[*i]);
}

/* Does a subcommand's option list go on at word a? Options end at the
 * first word that is not one ("-" alone is a word); `--` ends them too and
 * is the caller's to skip. */
static int is_option(const char *a) { return a[0] == '-' && a[1] != '\0'; }

/* The operands argv[i..argc) of a subcommand that ended its options
 * without `--` (dashdash 0): one that looks like an option is refused, not
 * taken as a name or a count. */
static int operands_only(const char *cmd, int argc, char **argv, int i,
                         int dashdash) {
  for (; !dashdash && i < argc; i++) {
    char *end;
    if (is_option(argv[i]) && (strtod(argv[i], &end), *end != '\0'))
      return usage_error("%s: options go before NAME, as for every command "
                         "(%s came after it; `--` before a NAME that starts "
                         "with -)", cmd, argv[i]);
  }
  return 0;
}

/* Does url use TLS, or Sentinel? */
static int url_tls(const char *url) {
  return strncmp(url, "rediss", 6) == 0 || strncmp(url, "valkeys", 7) == 0;
}
static int url_sentinel(const char *url) {
  const char *p = strstr(url, "://");
  return p && p - url >= 9 && !strncmp(p - 9, "+sentinel", 9);
}

/* The options and environment every subcommand's connection uses, checked
 * once before the first connection: a flag that would be dropped for a URL
 * is refused, and the passwords leave the environment (a `run` command
 * never sees them). Returns 0 or an exit status. */
static int globals_ready(void) {
  static int done;
  if (done++)
    return 0;
  if (nredis == 0 && dlock_uri_check(default_url()) != DLOCK_OK)
    return usage_error("bad DLOCK_REDIS_URL \"%s\": %s", shown(default_url()),
                       dlock_errmsg());
  int status = env_password("DLOCK_REDIS_PASSWORD", password, &have_password);
  if (status == 0)
    status = env_password("DLOCK_SENTINEL_PASSWORD", sentinel_password,
                          &have_sentinel_password);
  unsetenv("DLOCK_REDIS_PASSWORD");
  unsetenv("DLOCK_SENTINEL_PASSWORD");
  if (status != 0)
    return status;
  int n = nredis ? nredis : 1;
  for (int k = 0; k < n; k++) {
    const char *url = nredis ? redis_urls[k] : default_url();
    const char *from = nredis ? "--redis" : "DLOCK_REDIS_URL";
    if (tls_flag && !url_tls(url))
      return usage_error("%s is for TLS URLs (rediss://...), and %s %s is "
                         "not one: refused rather than run in plaintext",
                         tls_flag, from, shown(url));
    if (sentinel_flag && !url_sentinel(url))
      return usage_error("%s is for Sentinel URLs (redis+sentinel://, "
                         "rediss+sentinel://), and %s %s is not one",
                         sentinel_flag, from, shown(url));
  }
  return 0;
}


/* engine: NULL, or a client whose engine thread this one shares */
static int connect_to(const char *url, int64_t watchdog_ms, dlock_lost_fn *lost,
                      dlock_client *engine, dlock_client **out) {
  int status = globals_ready();
  if (status)
    return status;
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.client_name = "dlock-cli"; /* named dlock-cli:HOST:PID:CLIENT-ID */
  o.share_engine = engine; /* RedLock: every member on one thread */
  o.lazy_connect = nredis > 1; /* RedLock: a member that is down is outvoted */
  if (watchdog_ms > 0)
    o.watchdog_timeout_ms = watchdog_ms;
  o.on_lost = lost;
  o.replica_sync_ms = replica_sync_ms;
  o.source_addr = source_addr;
  o.durable_ms = durable_ms;
  o.durable_replicas = (int)durable_replicas;
  o.password = have_password ? password : NULL;
  if (url_sentinel(url)) {
    o.sentinel_username = sentinel_user;
    o.sentinel_password = have_sentinel_password ? sentinel_password : NULL;
  }
  if (url_tls(url)) {
    o.tls_ca_file = tls_ca;
    o.tls_ca_dir = tls_ca_dir;
    o.tls_cert_file = tls_cert;
    o.tls_key_file = tls_key;
    o.tls_server_name = tls_server_name;
    o.tls_insecure = tls_insecure;
  }
  int rc = dlock_client_open(url, &o, out);
  if (rc != DLOCK_OK) {
    char what[600];
    snprintf(what, sizeof what, "cannot connect to %s", shown(url));
    status = fail(rc, what);
    if (rc == DLOCK_EAUTH && url_sentinel(url) && strstr(dlock_errmsg(), "sentinel credentials"))
      fprintf(stderr, "%s: hint: the sentinels' password comes from "
              "--sentinel-password-file FILE or DLOCK_SENTINEL_PASSWORD, "
              "their ACL user from --sentinel-user\n", prog);
    return status;
  }
  return 0;
}

/* ---- run ------------------------------------------------------------------- */

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
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 10 * 1000000;
      if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
      }
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
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += t->validity_ms / 1000;
  ts.tv_nsec += (t->validity_ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
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
         "  --fair            a fair lock (FIFO among waiters)\n"
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
         "refusing calls for now, 70 unexpected error, 75 not acquired in\n"
         "time, 76 the lease was lost while COMMAND ran, 77 refused by the\n"
         "server's ACL, 78 the server refused the password, ACL user or\n"
         "database, or TLS verification failed.\n");
}

typedef struct run_opts {
  int fair, read, write, sem, fenced;
  int64_t permits, wait_ms, lease_ms, watchdog_ms;
  const char *name;
  char **command;
} run_opts;

/* One option of `run` that takes a value (argv[*i + 1]). */
static int run_option_value(const char *o, const char *val, run_opts *ro) {
  if (val == NULL)
    return usage_error("%s needs a value", o);
  if (!strcmp(o, "--permits")) {
    if (parse_count(val, 1, &ro->permits) != 0)
      return usage_error("bad --permits \"%s\" (a number >= 1)", val);
    return 0;
  }
  if (!strcmp(o, "--durable-replicas")) {
    if (parse_count(val, 0, &durable_replicas) != 0 || durable_replicas > 1000)
      return usage_error("bad --durable-replicas \"%s\" (0 to 1000)", val);
    return 0;
  }
  if (!strcmp(o, "--lost-signal") || !strcmp(o, "--orphan-signal")) {
    int sig = parse_signal(val);
    if (sig < 0)
      return usage_error("bad %s \"%s\" (TERM, INT, KILL, ...)", o, val);
    *(!strcmp(o, "--lost-signal") ? &lost_signal : &orphan_signal) = sig;
    return 0;
  }
  int64_t d = parse_duration(val);
  int is_wait = !strcmp(o, "--wait");
  if (d == -2 || (d == -1 && !is_wait) || (d == 0 && !is_wait))
    return usage_error("bad duration \"%s\" for %s (like 500ms, 30s, 5m)", val, o);
  if (is_wait)
    ro->wait_ms = d;
  else if ((!strcmp(o, "--replica-sync") || !strcmp(o, "--durable")) &&
           d >= 3000)
    return usage_error("%s must be below the command timeout (3s)", o);
  else if (!strcmp(o, "--replica-sync"))
    replica_sync_ms = d;
  else if (!strcmp(o, "--durable"))
    durable_ms = d;
  else if (!strcmp(o, "--lease"))
    ro->lease_ms = d;
  else if (d < 30)
    return usage_error("--watchdog must be at least 30ms");
  else
    ro->watchdog_ms = d;
  return 0;
}

/* --replica-sync and --durable together: both wait within one call. */
static int ack_opts_check(void) {
  if (durable_replicas > 0 && durable_ms == 0)
    return usage_error("--durable-replicas goes with --durable D");
  if (replica_sync_ms + durable_ms >= 3000)
    return usage_error("--replica-sync and --durable together must stay "
                       "below the command timeout (3s)");
  return 0;
}

/* Parse `run [options] NAME [--] COMMAND...`: options (run's and the
 * global ones) before NAME, everything after it COMMAND's, byte for byte;
 * an optional `--` right after NAME is dropped, as flock(1) has none.
 * Returns 0, -1 after --help, or an exit status. */
static int parse_run(int argc, char **argv, run_opts *ro) {
  *ro = (run_opts){.wait_ms = -1, .lease_ms = DLOCK_LEASE_WATCHDOG,
                   .watchdog_ms = 10000};
  int i = 1;
  for (; i < argc && is_option(argv[i]); i++) {
    const char *o = argv[i];
    int status = 0;
    if (!strcmp(o, "--")) {
      i++;
      break;
    } else if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      run_help();
      return -1;
    } else if (!strcmp(o, "--fair")) {
      ro->fair = 1;
    } else if (!strcmp(o, "--fenced")) {
      ro->fenced = 1;
    } else if (!strcmp(o, "--read")) {
      ro->read = 1;
    } else if (!strcmp(o, "--write")) {
      ro->write = 1;
    } else if (!strcmp(o, "--semaphore")) {
      ro->sem = 1;
    } else if (!strcmp(o, "--permits") || !strcmp(o, "--wait") ||
               !strcmp(o, "--lease") || !strcmp(o, "--watchdog") ||
               !strcmp(o, "--replica-sync") || !strcmp(o, "--durable") ||
               !strcmp(o, "--durable-replicas") || !strcmp(o, "--lost-signal") ||
               !strcmp(o, "--orphan-signal")) {
      status = run_option_value(o, i + 1 < argc ? argv[++i] : NULL, ro);
    } else {
      status = other_option("run", argc, argv, &i);
    }
    if (status)
      return status;
  }
  int ack = ack_opts_check();
  if (ack)
    return ack;
  if (ro->fair + ro->read + ro->write + ro->sem + ro->fenced > 1)
    return usage_error("run: --fair, --fenced, --read, --write and --semaphore "
                       "exclude each other");
  if (ro->sem != (ro->permits > 0))
    return usage_error("run: --semaphore and --permits go together");
  if (i >= argc)
    return usage_error("run: missing NAME");
  ro->name = argv[i++];
  if (i < argc && !strcmp(argv[i], "--"))
    i++; /* optional: NAME COMMAND... is unambiguous */
  else if (i < argc && is_option(argv[i]))
    return usage_error("run: options go before NAME: dlock run [OPTIONS] NAME "
                       "[--] COMMAND... (%s came after %s; everything after "
                       "NAME is COMMAND's)", argv[i], ro->name);
  if (i >= argc)
    return usage_error("run: missing the command (NAME -- COMMAND...)");
  ro->command = argv + i;
  if (nredis > 1 && (ro->fair || ro->read || ro->write || ro->sem || ro->fenced))
    return usage_error("run: several --redis (RedLock) work with plain locks only");
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
  if (ro->fair)
    return dlock_fair_lock_new(clients[0], name, NULL, lock);
  if (ro->fenced)
    return dlock_fenced_lock_new(clients[0], name, NULL, lock);
  if (ro->read)
    return dlock_read_lock_new(clients[0], name, NULL, lock);
  if (ro->write)
    return dlock_write_lock_new(clients[0], name, NULL, lock);
  if (ro->sem) {
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
              "`dlock sem set %s %" PRId64 "` changes it\n", prog, name,
              available + taken, available, taken, ro->permits, name,
              ro->permits);
    dlock_permits_free(p);
    return rc == DLOCK_OK ? dlock_semaphore_lock_new(clients[0], name, NULL, lock)
                          : rc;
  }
  return dlock_reentrant_lock_new(clients[0], name, NULL, lock);
}

/* Run the command while the lock is held: in a process group of its own
 * that gets the forwarded signals, the lost signal (with a fixed lease, a
 * watcher sends it when the lease runs out) and, if dlock dies, the orphan
 * signal. Returns its exit status (128+N for signal N). */
static int run_command(char **command, int64_t lease_ms, int64_t validity_ms,
                       const sigset_t *mask) {
  lease_timer lt = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
                    validity_ms};
  pthread_t watcher;
  int watching = lease_ms != DLOCK_LEASE_WATCHDOG &&
                 pthread_create(&watcher, NULL, lease_watch, &lt) == 0;
  command_job job;
  int status;
  if (command_start(&job, command, orphan_signal, mask, on_group, NULL) != 0) {
    fprintf(stderr, "%s: cannot start the command: %s\n", prog, strerror(errno));
    status = EXIT_SOFTWARE;
  } else {
    status = command_wait(&job);
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
  int n = nredis ? nredis : 1, status = 0;
  dlock_client *clients[MAX_REDIS] = {0};
  dlock_lock *members[MAX_REDIS] = {0}, *lock = NULL;
  for (int k = 0; k < n && status == 0; k++)
    status = connect_to(nredis ? redis_urls[k] : default_url(), ro->watchdog_ms,
                        nredis > 1 ? NULL : on_client_lost,
                        k > 0 ? clients[0] : NULL, &clients[k]);
  int rc = DLOCK_OK;
  if (status == 0 && (rc = make_run_lock(ro, n, clients, members, &lock)) != DLOCK_OK)
    status = fail(rc, ro->name);
  dlock_grant grant = {0, 0};
  if (status == 0) {
    rc = dlock_acquire_grant(lock, ro->wait_ms, ro->lease_ms, &grant);
    pthread_mutex_lock(&run_state.mu);
    run_state.acquiring = 0;
    int sig = run_state.signal;
    pthread_cond_broadcast(&run_state.cv);
    pthread_mutex_unlock(&run_state.mu);
    if (sig) { /* asked to stop while waiting: leave nothing behind */
      if (rc == DLOCK_OK)
        dlock_release(lock);
      fprintf(stderr, "%s: %s: gave up %s on signal %d (%s)\n", prog, ro->name,
              rc == DLOCK_OK ? "the lock just acquired" : "waiting",
              sig, strsignal(sig));
      status = 128 + sig;
    } else if (rc == DLOCK_ETIMEDOUT || rc == DLOCK_EBUSY ||
               (rc == DLOCK_EQUORUM && ro->wait_ms >= 0)) {
      /* the fact once: a busy or late acquire's message names the kind
       * and the name ('lock "job": not available: ...'); a RedLock's
       * says what the quorum was */
      if (rc == DLOCK_EQUORUM)
        fprintf(stderr, "%s: %s: %s\n", prog, ro->name, dlock_errmsg());
      else
        fprintf(stderr, "%s: %s\n", prog, dlock_errmsg());
      status = EXIT_TIMEOUT;
    } else if (rc != DLOCK_OK) {
      status = fail(rc, ro->name);
    }
  }
  if (status == 0 && ro->fenced) {
    /* the token and name for COMMAND's guarded writes (`dlock write`, or
     * the resource's own check: docs/fencing.md). Set here, before the
     * fork: no other thread of dlock reads the environment now. */
    char token[32];
    snprintf(token, sizeof token, "%lld", (long long)grant.token);
    if (setenv("DLOCK_FENCE_TOKEN", token, 1) != 0 ||
        setenv("DLOCK_LOCK_NAME", ro->name, 1) != 0) {
      dlock_release(lock);
      status = fail(DLOCK_ENOMEM, ro->name);
    }
  }
  if (status == 0) {
    status = run_command(ro->command, ro->lease_ms, grant.validity_ms, mask);
    rc = dlock_release(lock);
    pthread_mutex_lock(&run_state.mu);
    int lost = run_state.lost;
    pthread_mutex_unlock(&run_state.mu);
    if (lost || rc == DLOCK_ELOST) {
      fprintf(stderr, "%s: the lease of %s was lost while the command ran%s\n",
              prog, ro->name, lost ? " (the command was signalled)" : "");
      status = EXIT_LOST;
    } else if (rc != DLOCK_OK && rc != DLOCK_EQUORUM) {
      fail(rc, "release");
    }
  }
  dlock_lock_free(lock);
  for (int k = 0; k < n; k++) {
    dlock_lock_free(members[k]);
    dlock_client_close(clients[k]);
  }
  return status;
}

static int cmd_run(int argc, char **argv) {
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
  pthread_t signals;
  if (pthread_create(&signals, NULL, signal_thread, &set) != 0) {
    fprintf(stderr, "%s: cannot start a thread\n", prog);
    return EXIT_SOFTWARE;
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

/* ---- latch, sem ------------------------------------------------------------ */

/* `latch` and `sem`: [OPTIONS] OP [OPTIONS] NAME...: the options (--wait D
 * when wait_ms is given, --help, the global ones) taken, *op set; returns
 * the index of the first operand, or -1 after printing an error (-2 after
 * help). */
static int small_options(int argc, char **argv, int64_t *wait_ms,
                         void (*help)(void), const char **op) {
  *op = NULL;
  int i = 1, dashdash = 0;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!is_option(a) && *op)
      break;
    if (!is_option(a)) {
      *op = a;
    } else if (!strcmp(a, "--") && *op) {
      dashdash = 1;
      i++;
      break;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      help();
      return -2;
    } else if (wait_ms && !strcmp(a, "--wait") && i + 1 < argc) {
      *wait_ms = parse_duration(argv[++i]);
      if (*wait_ms == -2) {
        usage_error("bad duration \"%s\" for --wait", argv[i]);
        return -1;
      }
    } else if (other_option(argv[0], argc, argv, &i) != 0) {
      return -1;
    }
  }
  if (*op == NULL) {
    usage_error("%s: missing the operation", argv[0]);
    return -1;
  }
  return operands_only(argv[0], argc, argv, i, dashdash) ? -1 : i;
}

static void latch_help(void) {
  printf("usage: dlock latch set NAME COUNT     set the count (only if unset)\n"
         "       dlock latch count-down NAME    count down by one\n"
         "       dlock latch wait [--wait D] NAME  wait until the count is 0\n"
         "       dlock latch get NAME           print the count\n"
         "       dlock latch delete NAME        delete it\n"
         "`wait` on a latch with no count (never set, or counted down to 0:\n"
         "Redisson deletes it then) returns at once, as Redisson's await does,\n"
         "and says so on stderr.\n"
         "Exit: 0; 1 when `set` found it already set; 75 when `wait` timed out.\n");
}

static int cmd_latch(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    latch_help();
    return argc < 2 ? EXIT_USAGE : 0;
  }
  int64_t wait_ms = -1;
  const char *op;
  int i = small_options(argc, argv, &wait_ms, latch_help, &op);
  if (i < 0)
    return i == -2 ? 0 : EXIT_USAGE;
  int want = !strcmp(op, "set") ? 2 : 1;
  if (strcmp(op, "set") && strcmp(op, "count-down") && strcmp(op, "wait") &&
      strcmp(op, "get") && strcmp(op, "delete"))
    return usage_error("latch: unknown operation \"%s\"", op);
  if (argc - i != want)
    return usage_error("latch %s: expected %s", op, want == 2 ? "NAME COUNT" : "NAME");
  int64_t count = 0;
  if (want == 2 && parse_count(argv[i + 1], 1, &count) != 0)
    return usage_error("latch set: bad COUNT \"%s\" (a number >= 1)", argv[i + 1]);
  dlock_client *c = NULL;
  int status = connect_to(nredis ? redis_urls[0] : default_url(), 0, NULL,
                          NULL, &c);
  if (status)
    return status;
  dlock_latch *l = NULL;
  int rc = dlock_latch_new(c, argv[i], NULL, &l);
  if (rc == DLOCK_OK) {
    if (!strcmp(op, "set")) {
      int set = 0;
      rc = dlock_latch_try_set_count(l, count, &set);
      if (rc == DLOCK_OK) {
        printf("%s\n", set ? "set" : "already set");
        status = set ? 0 : 1;
      }
    } else if (!strcmp(op, "count-down")) {
      int64_t left = 0;
      rc = dlock_latch_count_down(l, &left);
      if (rc == DLOCK_OK)
        printf("%" PRId64 "\n", left);
    } else if (!strcmp(op, "get")) {
      rc = dlock_latch_get_count(l, &count);
      if (rc == DLOCK_OK)
        printf("%" PRId64 "\n", count);
    } else if (!strcmp(op, "delete")) {
      int deleted = 0;
      rc = dlock_latch_delete(l, &deleted);
      if (rc == DLOCK_OK)
        printf("%s\n", deleted ? "deleted" : "no latch");
    } else {
      /* Redisson's await returns at once on a latch with no count: say so,
       * so a mistyped name does not pass silently */
      rc = dlock_latch_get_count(l, &count);
      if (rc == DLOCK_OK && count == 0)
        fprintf(stderr, "%s: latch %s has no count (never set, or already "
                "counted down to 0): nothing to wait for\n", prog, argv[i]);
      if (rc == DLOCK_OK && count > 0)
        rc = dlock_latch_await(l, wait_ms);
      if (rc == DLOCK_ETIMEDOUT || rc == DLOCK_EBUSY) {
        fprintf(stderr, "%s: latch %s did not reach 0 in time\n", prog, argv[i]);
        status = EXIT_TIMEOUT;
        rc = DLOCK_OK;
      }
    }
  }
  if (rc != DLOCK_OK)
    status = fail(rc, argv[i]);
  dlock_latch_free(l);
  dlock_client_close(c);
  return status;
}

static void sem_help(void) {
  printf("usage: dlock sem init NAME PERMITS        set the permits (only if unset)\n"
         "       dlock sem set NAME PERMITS         set the permits whatever they\n"
         "                                          were; prints the available count\n"
         "       dlock sem acquire [--wait D] NAME [N]  take N permits (default 1)\n"
         "       dlock sem release NAME [N]         give back N permits\n"
         "       dlock sem available NAME           print the available permits\n"
         "A plain semaphore (Redisson RSemaphore): permits taken here are not\n"
         "given back if the shell dies; `dlock run --semaphore` is crash-safe.\n"
         "`set` on the semaphore of `dlock run --semaphore` sets its total: the\n"
         "available count may go below 0 while more permits are taken.\n"
         "Exit: 0; 1 when `init` found it already set; 75 when `acquire` timed out.\n");
}

/* sem set: the total of an expirable-permit semaphore (`run --semaphore`),
 * or the count of a plain one; prints the available count after. */
static int sem_set(dlock_client *c, const char *name, int64_t permits) {
  dlock_inspection *in = NULL;
  int rc = dlock_inspect(c, name, NULL, &in);
  int expirable = rc == DLOCK_OK && !strcmp(in->kind, "permit semaphore");
  dlock_inspection_free(in);
  int64_t available = 0;
  if (rc == DLOCK_OK && expirable) {
    dlock_permits *p = NULL;
    rc = dlock_permits_new(c, name, NULL, &p);
    if (rc == DLOCK_OK)
      rc = dlock_permits_set_permits(p, permits, &available);
    dlock_permits_free(p);
  } else if (rc == DLOCK_OK) {
    dlock_semaphore *s = NULL;
    rc = dlock_semaphore_new(c, name, NULL, &s);
    if (rc == DLOCK_OK)
      rc = dlock_semaphore_set_permits(s, permits, &available);
    dlock_semaphore_free(s);
  }
  if (rc == DLOCK_OK)
    printf("%" PRId64 "\n", available);
  return rc;
}

static int cmd_sem(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    sem_help();
    return argc < 2 ? EXIT_USAGE : 0;
  }
  int64_t wait_ms = -1;
  const char *op;
  int i = small_options(argc, argv, &wait_ms, sem_help, &op);
  if (i < 0)
    return i == -2 ? 0 : EXIT_USAGE;
  int init = !strcmp(op, "init"), set = !strcmp(op, "set"),
      acq = !strcmp(op, "acquire"), rel = !strcmp(op, "release"),
      avail = !strcmp(op, "available");
  if (!init && !set && !acq && !rel && !avail)
    return usage_error("sem: unknown operation \"%s\"", op);
  int left = argc - i;
  if (left < 1 || left > (avail ? 1 : 2) || ((init || set) && left != 2))
    return usage_error("sem %s: expected %s", op,
                       init || set ? "NAME PERMITS" : avail ? "NAME" : "NAME [N]");
  int64_t n = 1;
  if (left == 2 && parse_count(argv[i + 1], init || set ? 0 : 1, &n) != 0)
    return usage_error("sem %s: bad number \"%s\"", op, argv[i + 1]);
  dlock_client *c = NULL;
  int status = connect_to(nredis ? redis_urls[0] : default_url(), 0, NULL,
                          NULL, &c);
  if (status)
    return status;
  dlock_semaphore *s = NULL;
  int rc = set ? sem_set(c, argv[i], n) : dlock_semaphore_new(c, argv[i], NULL, &s);
  if (rc == DLOCK_OK && !set) {
    if (init) {
      int was_set = 0;
      rc = dlock_semaphore_try_set_permits(s, n, 0, &was_set);
      if (rc == DLOCK_OK) {
        printf("%s\n", was_set ? "set" : "already set");
        status = was_set ? 0 : 1;
      }
    } else if (acq) {
      rc = dlock_semaphore_acquire(s, n, wait_ms);
      if (rc == DLOCK_ETIMEDOUT || rc == DLOCK_EBUSY) {
        fprintf(stderr, "%s: %" PRId64 " permit(s) of %s not available in time\n",
                prog, n, argv[i]);
        status = EXIT_TIMEOUT;
        rc = DLOCK_OK;
      }
    } else if (rel) {
      rc = dlock_semaphore_release(s, n);
    } else {
      rc = dlock_semaphore_available(s, &n);
      if (rc == DLOCK_OK)
        printf("%" PRId64 "\n", n);
    }
  }
  if (rc != DLOCK_OK)
    status = fail(rc, argv[i]);
  dlock_semaphore_free(s);
  dlock_client_close(c);
  return status;
}

/* ---- status, unlock --------------------------------------------------------- */

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if ((unsigned char)*s < 32)
      fprintf(f, "\\u%04x", *s);
    else
      fputc(*s, f);
  }
  fputc('"', f);
}

static void status_help(void) {
  printf("usage: dlock status [--json] NAME\n"
         "Print what is stored under NAME: its kind (lock, fair lock, read-write\n"
         "lock, latch or semaphore count, expirable-permit semaphore), holders\n"
         "and their hold counts, remaining TTL and fair-queue length.\n");
}

static void print_status_json(const char *name, const dlock_inspection *in) {
  printf("{\"name\": ");
  json_str(stdout, name);
  printf(", \"kind\": ");
  json_str(stdout, in->kind);
  printf(", \"ttl_ms\": %" PRId64 ", \"queue_length\": %" PRId64, in->ttl_ms,
         in->queue_length);
  if (in->has_count)
    printf(", \"count\": %" PRId64, in->count);
  if (!strcmp(in->kind, "permit semaphore"))
    printf(", \"permits_held\": %" PRId64 ", \"permit_expires_ms\": %" PRId64,
           in->permits_held, in->permit_expires_ms);
  printf(", \"holders\": {");
  for (size_t k = 0; k < in->nholders; k++) {
    printf("%s", k ? ", " : "");
    json_str(stdout, in->holders[k].owner);
    printf(": %" PRId64, in->holders[k].count);
  }
  printf("}");
  if (in->holder_clients) { /* who: the holders' connection names */
    printf(", \"holder_clients\": {");
    int first = 1;
    for (size_t k = 0; k < in->nholders; k++) {
      if (!in->holder_clients[k])
        continue;
      printf("%s", first ? "" : ", ");
      first = 0;
      json_str(stdout, in->holders[k].owner);
      printf(": ");
      json_str(stdout, in->holder_clients[k]);
    }
    printf("}");
  }
  if (in->mode) {
    printf(", \"mode\": ");
    json_str(stdout, in->mode);
  }
  printf("}");
}

static void print_status_text(const char *name, const dlock_inspection *in) {
  printf("name:    %s\nkind:    %s%s\n", name, in->kind,
         !strcmp(in->kind, "count")
             ? " (a latch's count or a semaphore's available permits)"
             : "");
  if (in->has_count)
    printf("count:   %" PRId64 "%s\n", in->count,
           !strcmp(in->kind, "permit semaphore") ? " available" : "");
  if (!strcmp(in->kind, "permit semaphore")) {
    printf("held:    %" PRId64 " permits", in->permits_held);
    if (in->permit_expires_ms >= 0)
      printf(", the first expires in %" PRId64 " ms", in->permit_expires_ms);
    printf("\n");
  }
  if (in->mode)
    printf("mode:    %s\n", in->mode);
  for (size_t k = 0; k < in->nholders; k++) {
    printf("holder:  %s %" PRId64, in->holders[k].owner, in->holders[k].count);
    if (in->holder_clients && in->holder_clients[k])
      printf(" (connection %s)", in->holder_clients[k]);
    printf("\n");
  }
  printf("ttl:     %" PRId64 " ms\n", in->ttl_ms);
  if (in->queue_length)
    printf("queue:   %" PRId64 " waiting\n", in->queue_length);
}

/* A client of the first --redis server (status, unlock). */
static int open_first(dlock_client **out) {
  return connect_to(nredis ? redis_urls[0] : default_url(), 0, NULL, NULL, out);
}

static int cmd_status(int argc, char **argv) {
  int as_json = 0, i = 1, dashdash = 0, status;
  for (; i < argc && is_option(argv[i]); i++) {
    if (!strcmp(argv[i], "--")) {
      dashdash = i++;
      break;
    } else if (!strcmp(argv[i], "--json"))
      as_json = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      status_help();
      return 0;
    } else if ((status = other_option("status", argc, argv, &i)) != 0)
      return status;
  }
  if ((status = operands_only("status", argc, argv, i, dashdash)) != 0)
    return status;
  if (argc - i != 1)
    return usage_error("status: expected NAME");
  dlock_client *c = NULL;
  dlock_inspection *in = NULL;
  status = open_first(&c);
  if (status)
    return status;
  int rc = dlock_inspect(c, argv[i], NULL, &in);
  if (rc == DLOCK_OK && as_json) {
    print_status_json(argv[i], in);
    printf("\n");
  } else if (rc == DLOCK_OK)
    print_status_text(argv[i], in);
  else
    status = fail(rc, argv[i]);
  dlock_inspection_free(in);
  dlock_client_close(c);
  return status;
}

static void list_help(void) {
  printf("usage: dlock list [--json] [--limit N] [--scans N] [--count N] "
         "[PATTERN]\n"
         "List the locks, latches and semaphores whose names match PATTERN (a\n"
         "Redis glob, default *) with what dlock status shows of each: kind,\n"
         "holders and hold counts, remaining TTL, queue length, count. Keys are\n"
         "found with SCAN (COUNT --count, default 1000; never KEYS), on a\n"
         "cluster master by master; it stops after --limit objects (default\n"
         "1000) or --scans SCAN calls (default 1000) and says so. Each key that\n"
         "matches is inspected: other keys are left out. --json: a JSON array.\n");
}

/* Is kind one of dlock's objects (dlock_inspection.kind)? */
static int dlock_kind(const char *kind) {
  return !strcmp(kind, "lock") || !strcmp(kind, "fair lock") ||
         !strcmp(kind, "rwlock") || !strcmp(kind, "count") ||
         !strcmp(kind, "permit semaphore");
}

/* The text of what dlock status shows, on one line (without the name and
 * the TTL, which changes all the time). */
static void status_line(const dlock_inspection *in, char *out, size_t n) {
  size_t k = (size_t)snprintf(out, n, "%s", in->kind);
#define ADD(...)                                                               \
  do {                                                                         \
    if (k < n)                                                                 \
      k += (size_t)snprintf(out + k, n - k, __VA_ARGS__);                      \
  } while (0)
  if (in->mode)
    ADD(" mode=%s", in->mode);
  if (in->has_count)
    ADD(" count=%" PRId64, in->count);
  if (in->queue_length)
    ADD(" queue=%" PRId64, in->queue_length);
  if (!strcmp(in->kind, "permit semaphore"))
    ADD(" held=%" PRId64, in->permits_held);
  for (size_t h = 0; h < in->nholders; h++)
    ADD(" %s%s:%" PRId64, h ? "" : "holders=", in->holders[h].owner,
        in->holders[h].count);
#undef ADD
}

/* One object's line: its name, what dlock watch shows of it, its TTL. */
static void print_list_text(const char *name, const dlock_inspection *in) {
  char line[4096];
  status_line(in, line, sizeof line);
  printf("%-40s %s ttl=%" PRId64 "\n", name, line, in->ttl_ms);
}

static int cmd_list(int argc, char **argv) {
  int as_json = 0, i = 1, dashdash = 0, status;
  long limit = 1000, count = 1000, max_scans = 1000;
  for (; i < argc && is_option(argv[i]); i++) {
    if (!strcmp(argv[i], "--")) {
      dashdash = i++;
      break;
    } else if (!strcmp(argv[i], "--json"))
      as_json = 1;
    else if (!strcmp(argv[i], "--limit") || !strcmp(argv[i], "--count") ||
             !strcmp(argv[i], "--scans")) {
      char *end = NULL;
      long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
      if (end == NULL || *end || v <= 0)
        return usage_error("list: %s takes a number > 0", argv[i]);
      *(!strcmp(argv[i], "--limit")   ? &limit
        : !strcmp(argv[i], "--count") ? &count
                                      : &max_scans) = v;
      i++;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      list_help();
      return 0;
    } else if ((status = other_option("list", argc, argv, &i)) != 0)
      return status;
  }
  if ((status = operands_only("list", argc, argv, i, dashdash)) != 0)
    return status;
  if (argc - i > 1)
    return usage_error("list: expected at most one PATTERN");
  const char *pattern = i < argc ? argv[i] : "*";
  dlock_client *c = NULL;
  status = open_first(&c);
  if (status)
    return status;
  uint64_t cursor = 0;
  long shown = 0, scans = 0;
  int more = 1, cut = 0; /* cut: --limit left some out */
  if (as_json)
    printf("[\n");
  while (more && shown < limit && scans < max_scans) {
    dlock_listing *page = NULL;
    int rc = dlock_list(c, pattern, &cursor, (size_t)count, &page);
    if (rc != DLOCK_OK) {
      status = fail(rc, pattern);
      break;
    }
    scans++;
    more = cursor != 0;
    size_t k = 0;
    for (; k < page->n && shown < limit; k++) {
      dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
      o.name_len = page->lens[k];
      dlock_inspection *in = NULL;
      rc = dlock_inspect(c, page->names[k], &o, &in);
      if (rc == DLOCK_OK && dlock_kind(in->kind)) {
        if (as_json) {
          printf("%s", shown ? "," : "");
          print_status_json(page->names[k], in);
          printf("\n");
        } else {
          print_list_text(page->names[k], in);
        }
        shown++;
      } else if (rc != DLOCK_OK) {
        status = fail(rc, page->names[k]);
        more = 0;
      }
      dlock_inspection_free(in);
      if (rc != DLOCK_OK)
        break;
    }
    if (status == 0 && k < page->n)
      cut = 1; /* names of this page not looked at: maybe objects */
    more = more && status == 0;
    cut = cut || (more && (shown >= limit || scans >= max_scans));
    dlock_listing_free(page);
  }
  if (as_json)
    printf("]\n");
  if (status == 0) /* a failure's message is the last word, not a count */
    fprintf(stderr, "%ld object%s in %ld SCAN call%s%s\n", shown,
          shown == 1 ? "" : "s", scans, scans == 1 ? "" : "s",
          !cut               ? ""
          : shown >= limit ? " (stopped at --limit: more may match)"
                           : " (stopped at --scans: more may match)");
  dlock_client_close(c);
  return status;
}

static void watch_help(void) {
  printf("usage: dlock watch [--json] [--every D] [--changes N] [--for D] NAME\n"
         "Show what dlock status shows of NAME, a line each time it changes,\n"
         "time-stamped: holders and hold counts, TTL, queue, count. It looks\n"
         "again at once when the object announces a change (a release, a\n"
         "count-down, permits given back) and every D (--every, default 1s)\n"
         "for what is not announced (acquires, a fair lock's hand-offs, leases\n"
         "running out). One line per change, so it suits pipes; --json: one\n"
         "JSON object per line. It runs until interrupted, --changes N lines,\n"
         "or --for D.\n");
}

static int cmd_watch(int argc, char **argv) {
  int as_json = 0, i = 1, dashdash = 0, status;
  int64_t every = 1000, for_ms = -1, changes = -1;
  for (; i < argc && is_option(argv[i]); i++) {
    const char *o = argv[i];
    if (!strcmp(o, "--")) {
      dashdash = i++;
      break;
    } else if (!strcmp(o, "--json")) {
      as_json = 1;
    } else if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      watch_help();
      return 0;
    } else if (i + 1 < argc && !strcmp(o, "--changes")) {
      if (parse_count(argv[++i], 1, &changes) != 0)
        return usage_error("watch: bad --changes \"%s\" (a number >= 1)", argv[i]);
    } else if (i + 1 < argc && (!strcmp(o, "--every") || !strcmp(o, "--for"))) {
      int64_t d = parse_duration(argv[++i]);
      if (d <= 0)
        return usage_error("watch: bad duration \"%s\" for %s (like 500ms, 30s)",
                           argv[i], o);
      *(!strcmp(o, "--every") ? &every : &for_ms) = d;
    } else if ((status = other_option("watch", argc, argv, &i)) != 0) {
      return status;
    }
  }
  if ((status = operands_only("watch", argc, argv, i, dashdash)) != 0)
    return status;
  if (argc - i != 1)
    return usage_error("watch: expected NAME");
  const char *name = argv[i];
  dlock_client *c = NULL;
  status = open_first(&c);
  if (status)
    return status;
  dlock_watcher *w = NULL;
  int rc = dlock_watcher_new(c, name, NULL, &w);
  if (rc != DLOCK_OK) {
    status = fail(rc, name);
    dlock_client_close(c);
    return status;
  }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  char last[4096] = "";
  int64_t shown = 0;
  for (;;) {
    dlock_inspection *in = NULL;
    rc = dlock_inspect(c, name, NULL, &in);
    if (rc != DLOCK_OK) {
      status = fail(rc, name);
      break;
    }
    char line[4096];
    status_line(in, line, sizeof line);
    if (strcmp(line, last) != 0) { /* a change: a line */
      snprintf(last, sizeof last, "%s", line);
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      char when[32];
      strftime(when, sizeof when, "%H:%M:%S", localtime(&now.tv_sec));
      if (as_json) {
        printf("{\"time\": \"%s.%03ld\", \"status\": ", when,
               now.tv_nsec / 1000000);
        print_status_json(name, in);
        printf("}\n");
      } else {
        printf("%s.%03ld %s ttl=%" PRId64 "\n", when, now.tv_nsec / 1000000, line,
               in->ttl_ms);
      }
      fflush(stdout);
      shown++;
    }
    dlock_inspection_free(in);
    if (changes > 0 && shown >= changes)
      break;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ran = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
    if (for_ms >= 0 && ran >= for_ms)
      break;
    int64_t wait = for_ms >= 0 && for_ms - ran < every ? for_ms - ran : every;
    rc = dlock_watcher_wait(w, wait);
    if (rc < 0) {
      status = fail(rc, name);
      break;
    }
    if (rc == 0 && for_ms >= 0 && wait < every)
      break; /* --for is over: no look after it */
  }
  dlock_watcher_free(w);
  dlock_client_close(c);
  return status;
}

static void check_help(void) {
  printf("usage: dlock check [--replica-sync D] [--durable D "
         "[--durable-replicas N]]\n"
         "Use every kind of lock, latch and semaphore on throw-away names with\n"
         "the configured URL and credentials, uncontended and contended (a\n"
         "second owner waits, so it subscribes, and is handed the object, so\n"
         "the release publishes to it), and SCAN as `dlock list` does; print\n"
         "what worked. A missing ACL permission shows as a failure naming it\n"
         "(exit 77). --replica-sync D: with the replica guard on, as `run\n"
         "--replica-sync D` uses it (every lock write also sends WAIT).\n"
         "--durable D: with durable grants, as `run --durable D` (every lock\n"
         "write also sends WAITAOF; a server that cannot is refused, exit\n"
         "78). Keys it makes are deleted or expire within a second.\n");
}

static int cmd_check(int argc, char **argv) {
  int i = 1, status;
  for (; i < argc && is_option(argv[i]); i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      check_help();
      return 0;
    } else if (!strcmp(argv[i], "--replica-sync") ||
               !strcmp(argv[i], "--durable") ||
               !strcmp(argv[i], "--durable-replicas")) {
      run_opts ro = {0}; /* sets the global it names, as for run */
      status = run_option_value(argv[i], i + 1 < argc ? argv[i + 1] : NULL, &ro);
      if (status)
        return status;
      i++;
    } else if ((status = other_option("check", argc, argv, &i)) != 0)
      return status;
  }
  if (i < argc)
    return usage_error("check: takes no arguments");
  if ((status = ack_opts_check()) != 0)
    return status;
  dlock_client *c = NULL;
  status = open_first(&c);
  if (status)
    return status;
  int rc = dlock_cli_check(c, stdout, replica_sync_ms > 0, durable_ms > 0);
  dlock_client_close(c);
  if (rc == DLOCK_OK)
    return 0;
  return rc == DLOCK_EPERM ? EXIT_NOPERM
         : rc == DLOCK_EAUTH || rc == DLOCK_ETLS || rc == DLOCK_ECONFIG
             ? EXIT_CONFIG
             : EXIT_SOFTWARE;
}

static void unlock_help(void) {
  printf("usage: dlock unlock --force NAME\n"
         "Release the lock NAME whoever holds it and wake its waiters (a lock,\n"
         "fair lock or read-write lock). Prints \"released\" or \"not locked\".\n");
}

static int cmd_unlock(int argc, char **argv) {
  int force = 0, i = 1, dashdash = 0, status;
  for (; i < argc && is_option(argv[i]); i++) {
    if (!strcmp(argv[i], "--")) {
      dashdash = i++;
      break;
    } else if (!strcmp(argv[i], "--force"))
      force = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      unlock_help();
      return 0;
    } else if ((status = other_option("unlock", argc, argv, &i)) != 0)
      return status;
  }
  if ((status = operands_only("unlock", argc, argv, i, dashdash)) != 0)
    return status;
  if (!force)
    return usage_error("unlock: only --force is supported (a lock belongs to "
                       "its holder; `dlock run` releases its own)");
  if (argc - i != 1)
    return usage_error("unlock: expected NAME");
  const char *name = argv[i];
  dlock_client *c = NULL;
  dlock_inspection *in = NULL;
  dlock_lock *l = NULL;
  status = open_first(&c);
  if (status)
    return status;
  int rc = dlock_inspect(c, name, NULL, &in);
  if (rc == DLOCK_OK && in->mode) /* a read-write lock: release its mode */
    rc = !strcmp(in->mode, "write") ? dlock_write_lock_new(c, name, NULL, &l)
                                    : dlock_read_lock_new(c, name, NULL, &l);
  else if (rc == DLOCK_OK) /* the fair lock's release also wakes its queue */
    rc = dlock_fair_lock_new(c, name, NULL, &l);
  int released = 0;
  if (rc == DLOCK_OK)
    rc = dlock_force_release(l, &released);
  if (rc == DLOCK_OK)
    printf("%s\n", released ? "released" : "not locked");
  else
    status = fail(rc, name);
  dlock_lock_free(l);
  dlock_inspection_free(in);
  dlock_client_close(c);
  return status;
}

/* ---- write: a guarded write from the shell ------------------------------------ */

static void write_help(void) {
  printf("usage: dlock write [--token T] NAME COMMAND [ARG]...\n"
         "Run the Redis write COMMAND (SET, HSET, INCRBY, LPUSH, ...) only if\n"
         "the fenced lock NAME is held and T is its newest grant's token, and\n"
         "no newer token wrote guarded data since: for a command started by\n"
         "`dlock run --fenced NAME`, which gets T in DLOCK_FENCE_TOKEN (the\n"
         "default here). Keep the data in NAME's slot on a cluster\n"
         "({NAME}:key). Everything after NAME is the command's, byte for byte.\n"
         "Prints the reply (a string or number per line; nothing for nil).\n"
         "Exit: 0 written; 76 refused (the lease passed or a newer holder\n"
         "came: nothing was written); 64 not a write command or a bad token.\n");
}

static void print_reply(const dlock_reply *r) {
  if (r == NULL || r->type == DLOCK_REPLY_NIL)
    return;
  if (r->type == DLOCK_REPLY_INTEGER)
    printf("%lld\n", r->integer);
  else if (r->type == DLOCK_REPLY_ARRAY)
    for (size_t i = 0; i < r->elements; i++)
      print_reply(r->element[i]);
  else {
    fwrite(r->str, 1, r->len, stdout);
    putchar('\n');
  }
}

static int cmd_write(int argc, char **argv) {
  const char *token_text = getenv("DLOCK_FENCE_TOKEN");
  int i = 1, status;
  for (; i < argc && is_option(argv[i]); i++) {
    if (!strcmp(argv[i], "--")) {
      i++;
      break;
    } else if (!strcmp(argv[i], "--token") && i + 1 < argc) {
      token_text = argv[++i];
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      write_help();
      return 0;
    } else if ((status = other_option("write", argc, argv, &i)) != 0) {
      return status;
    }
  }
  int64_t token = 0;
  if (token_text == NULL)
    return usage_error("write: no token (--token T, or DLOCK_FENCE_TOKEN as "
                       "`dlock run --fenced` sets it)");
  if (parse_count(token_text, 1, &token) != 0)
    return usage_error("write: bad token \"%s\" (a fenced lock's token, > 0)",
                       token_text);
  if (argc - i < 2)
    return usage_error("write: expected NAME COMMAND [ARG]...");
  const char *name = argv[i++];
  size_t n = (size_t)(argc - i);
  size_t *lens = calloc(n, sizeof *lens);
  if (lens == NULL)
    return fail(DLOCK_ENOMEM, name);
  for (size_t k = 0; k < n; k++)
    lens[k] = strlen(argv[i + (int)k]);
  dlock_client *c = NULL;
  status = open_first(&c);
  if (status == 0) {
    dlock_reply *reply = NULL;
    int rc = dlock_fenced_call(c, name, token, n, (const char *const *)argv + i,
                               lens, &reply);
    if (rc == DLOCK_OK)
      print_reply(reply);
    else
      status = fail(rc, name);
    dlock_reply_free(reply);
    dlock_client_close(c);
  }
  free(lens);
  return status;
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
  /* dlock [GLOBAL OPTIONS] COMMAND [OPTIONS] NAME ...: global options go
   * before COMMAND or among its options, before NAME; what follows NAME is
   * never dlock's (run's COMMAND gets it byte for byte). */
  int i = 1;
  for (; i < argc && is_option(argv[i]); i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage_main(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--version")) {
      printf("dlock %s\n", DLOCK_VERSION_STRING);
      return 0;
    }
    int status = take_global(argc, argv, &i);
    if (status > 0)
      return status;
    if (status < 0)
      return usage_error("unknown option %s", argv[i]);
  }
  if (i >= argc)
    return usage_error("missing command (run, latch, sem, status, list, watch, "
                       "unlock, check, write)");
  const char *cmd = argv[i];
  int sub_argc = argc - i;
  char **sub_argv = argv + i;
  if (!strcmp(cmd, "run"))
    return cmd_run(sub_argc, sub_argv);
  if (!strcmp(cmd, "latch"))
    return cmd_latch(sub_argc, sub_argv);
  if (!strcmp(cmd, "sem"))
    return cmd_sem(sub_argc, sub_argv);
  if (!strcmp(cmd, "status"))
    return cmd_status(sub_argc, sub_argv);
  if (!strcmp(cmd, "list"))
    return cmd_list(sub_argc, sub_argv);
  if (!strcmp(cmd, "watch"))
    return cmd_watch(sub_argc, sub_argv);
  if (!strcmp(cmd, "unlock"))
    return cmd_unlock(sub_argc, sub_argv);
  if (!strcmp(cmd, "check"))
    return cmd_check(sub_argc, sub_argv);
  if (!strcmp(cmd, "write"))
    return cmd_write(sub_argc, sub_argv);
  return usage_error("unknown command \"%s\"", cmd);
}
