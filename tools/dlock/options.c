/* The tool's shared parts (cli.h): the global options and the option
 * parser every command uses, the messages, and connecting. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlock/dlock.h>

#include "cli.h"

cli_globals cli;
const char *const cli_prog = "dlock";

/* ---- messages and parsing ------------------------------------------------- */
/* url as it may be printed: without its password. */
const char *cli_shown(const char *url) {
  static char buf[512];
  dlock_uri_redact(url, buf, sizeof buf);
  return buf;
}

int cli_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", cli_prog);
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
      {"replica_sync_all", "--replica-sync-all"},
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

int cli_fail(int rc, const char *what) {
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
    fprintf(stderr, "%s: ", cli_prog);
  else if (said && m[0])
    fprintf(stderr, "%s: %s: ", cli_prog, what);
  else
    fprintf(stderr, "%s: %s: %s%s", cli_prog, what, dlock_strerror(rc),
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
  case DLOCK_ENOMEM:
    return EXIT_OSERR;
  default:
    return EXIT_SOFTWARE;
  }
}

/* "500ms", "30s", "5m", "1h", "2" (seconds), "forever". -2 on error. */
int64_t cli_parse_duration(const char *s) {
  if (strcmp(s, "forever") == 0)
    return -1;
  /* digits, then at most one '.' and digits (strtod alone would take
   * 1e3, 0x10, inf and nan) */
  size_t digits = strspn(s, "0123456789");
  if (digits == 0)
    return -2;
  if (s[digits] == '.' && strspn(s + digits + 1, "0123456789") == 0)
    return -2;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || v < 0 || v > 1e9 ||
      strspn(s, "0123456789.") != (size_t)(end - s))
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

int cli_parse_count(const char *s, int64_t min, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || errno || v < min)
    return -1;
  *out = v;
  return 0;
}

int cli_parse_signal(const char *s) {
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
  return cli_parse_count(s, 1, &n) == 0 && n < 65 ? (int)n : -1;
}

/* ---- global options ---------------------------------------------------- */

const char *cli_default_url(void) {
  const char *env = getenv("DLOCK_REDIS_URL");
  return env && *env ? env : "redis://127.0.0.1:6379";
}

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
    return cli_usage_error("%s %s: %s", opt, path, strerror(err));
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    close(fd);
    return cli_usage_error("%s %s is readable or writable by group or "
                       "others (mode %03o): chmod 600 it", opt, path,
                       (unsigned)(st.st_mode & 0777));
  }
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n < 0)
    return cli_usage_error("%s %s: %s", opt, path, strerror(errno));
  buf[n] = '\0';
  size_t len = strcspn(buf, "\r\n");
  if (len == (size_t)n && len == size - 1)
    return cli_usage_error("%s %s: its first line is longer than %zu "
                       "bytes", opt, path, size - 2);
  buf[len] = '\0';
  if (len == 0)
    return cli_usage_error("%s %s: no password on its first line", opt, path);
  *have = 1;
  return 0;
}

/* A password from the environment variable name, unless a file gave one. */
static int env_password(const char *name, char *buf, int *have) {
  const char *env = getenv(name);
  if (*have || env == NULL || *env == '\0')
    return 0;
  if (strlen(env) >= 4096)
    return cli_usage_error("%s is too long", name);
  snprintf(buf, 4096, "%s", env);
  *have = 1;
  return 0;
}

/* A global option at argv[*i]: taken, with its value, and *i moved onto the
 * value. Returns 0 when taken, -1 when argv[*i] is not a global option, or
 * an exit status. */
int cli_take_global(int argc, char **argv, int *i) {
  const char *o = argv[*i];
  if (!strcmp(o, "--tls-insecure")) {
    cli.tls_insecure = 1;
    cli.tls_flag = cli.tls_flag ? cli.tls_flag : o;
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
    return cli_usage_error("%s needs a value", o);
  const char *val = argv[++*i];
  if (!strncmp(o, "--tls-", 6))
    cli.tls_flag = cli.tls_flag ? cli.tls_flag : o;
  if (!strncmp(o, "--sentinel-", 11))
    cli.sentinel_flag = cli.sentinel_flag ? cli.sentinel_flag : o;
  if (!strcmp(o, "--password-file"))
    return read_password_file(o, val, cli.password, &cli.have_password);
  if (!strcmp(o, "--sentinel-password-file"))
    return read_password_file(o, val, cli.sentinel_password, &cli.have_sentinel_password);
  const char **dest = !strcmp(o, "--sentinel-user")    ? &cli.sentinel_user
                      : !strcmp(o, "--tls-ca")           ? &cli.tls_ca
                      : !strcmp(o, "--tls-ca-dir")       ? &cli.tls_ca_dir
                      : !strcmp(o, "--tls-cert")         ? &cli.tls_cert
                      : !strcmp(o, "--tls-key")          ? &cli.tls_key
                      : !strcmp(o, "--tls-server-name")  ? &cli.tls_server_name
                      : !strcmp(o, "--source-addr")      ? &cli.source_addr
                                                         : NULL;
  if (dest) {
    *dest = val;
    return 0;
  }
  if (cli.nurls == CLI_MAX_REDIS)
    return cli_usage_error("at most %d --redis", CLI_MAX_REDIS);
  int rc = dlock_uri_check(val);
  if (rc == DLOCK_ENOMEM) {
    fprintf(stderr, "%s: --redis: out of memory\n", cli_prog);
    return EXIT_OSERR;
  }
  if (rc != DLOCK_OK)
    return cli_usage_error("bad --redis URL \"%s\": %s", cli_shown(val), dlock_errmsg());
  cli.urls[cli.nurls++] = val;
  return 0;
}

/* One option of a subcommand's that is not its own: a global one, or a
 * usage error naming cmd. Same returns as cli_take_global, never -1. */
int cli_other_option(const char *cmd, int argc, char **argv, int *i) {
  int status = cli_take_global(argc, argv, i);
  if (status >= 0)
    return status;
  return cli_usage_error("%s: unknown option %s", cmd, argv[*i]);
}

/* Does a subcommand's option list go on at word a? Options end at the
 * first word that is not one ("-" alone is a word); `--` ends them too and
 * is the caller's to skip. */
int cli_is_option(const char *a) { return a[0] == '-' && a[1] != '\0'; }

/* The operands argv[i..argc) of a subcommand that ended its options
 * without `--` (dashdash 0): one that looks like an option is refused, not
 * taken as a name or a count. */
int cli_operands_only(const char *cmd, int argc, char **argv, int i,
                  int dashdash) {
  for (; !dashdash && i < argc; i++) {
    char *end;
    if (cli_is_option(argv[i]) && (strtod(argv[i], &end), *end != '\0'))
      return cli_usage_error("%s: options go before NAME, as for every command "
                         "(%s came after it; `--` before a NAME that starts "
                         "with -)", cmd, argv[i]);
  }
  return 0;
}

/* Does url use TLS, or Sentinel? */
int cli_url_tls(const char *url) {
  return strncmp(url, "rediss", 6) == 0 || strncmp(url, "valkeys", 7) == 0;
}
int cli_url_sentinel(const char *url) {
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
  if (cli.nurls == 0 && dlock_uri_check(cli_default_url()) != DLOCK_OK)
    return cli_usage_error("bad DLOCK_REDIS_URL \"%s\": %s", cli_shown(cli_default_url()),
                       dlock_errmsg());
  int status = env_password("DLOCK_REDIS_PASSWORD", cli.password, &cli.have_password);
  if (status == 0)
    status = env_password("DLOCK_SENTINEL_PASSWORD", cli.sentinel_password,
                          &cli.have_sentinel_password);
  unsetenv("DLOCK_REDIS_PASSWORD");
  unsetenv("DLOCK_SENTINEL_PASSWORD");
  if (status != 0)
    return status;
  int n = cli.nurls ? cli.nurls : 1;
  for (int k = 0; k < n; k++) {
    const char *url = cli.nurls ? cli.urls[k] : cli_default_url();
    const char *from = cli.nurls ? "--redis" : "DLOCK_REDIS_URL";
    if (cli.tls_flag && !cli_url_tls(url))
      return cli_usage_error("%s is for TLS URLs (rediss://...), and %s %s is "
                         "not one: refused rather than run in plaintext",
                         cli.tls_flag, from, cli_shown(url));
    if (cli.sentinel_flag && !cli_url_sentinel(url))
      return cli_usage_error("%s is for Sentinel URLs (redis+sentinel://, "
                         "rediss+sentinel://), and %s %s is not one",
                         cli.sentinel_flag, from, cli_shown(url));
  }
  return 0;
}


/* engine: NULL, or a client whose engine thread this one shares */
int cli_connect_to(const char *url, int64_t watchdog_ms, dlock_lost_fn *lost,
               dlock_client *engine, dlock_client **out) {
  int status = globals_ready();
  if (status)
    return status;
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.client_name = "dlock-cli"; /* named dlock-cli:HOST:PID:CLIENT-ID */
  o.share_engine = engine; /* RedLock: every member on one thread */
  o.lazy_connect = cli.nurls > 1; /* RedLock: a member that is down is outvoted */
  if (watchdog_ms > 0)
    o.watchdog_timeout_ms = watchdog_ms;
  o.on_lost = lost;
  o.replica_sync_ms = cli.replica_sync_ms;
  o.replica_sync_all = cli.replica_sync_all;
  o.source_addr = cli.source_addr;
  o.durable_ms = cli.durable_ms;
  o.durable_replicas = (int)cli.durable_replicas;
  o.password = cli.have_password ? cli.password : NULL;
  if (cli_url_sentinel(url)) {
    o.sentinel_username = cli.sentinel_user;
    o.sentinel_password = cli.have_sentinel_password ? cli.sentinel_password : NULL;
  }
  if (cli_url_tls(url)) {
    o.tls_ca_file = cli.tls_ca;
    o.tls_ca_dir = cli.tls_ca_dir;
    o.tls_cert_file = cli.tls_cert;
    o.tls_key_file = cli.tls_key;
    o.tls_server_name = cli.tls_server_name;
    o.tls_insecure = cli.tls_insecure;
  }
  int rc = dlock_client_open(url, &o, out);
  if (rc != DLOCK_OK) {
    char what[600];
    snprintf(what, sizeof what, "cannot connect to %s", cli_shown(url));
    status = cli_fail(rc, what);
    if (rc == DLOCK_EAUTH && cli_url_sentinel(url) && strstr(dlock_errmsg(), "sentinel credentials"))
      fprintf(stderr, "%s: hint: the sentinels' password comes from "
              "--sentinel-password-file FILE or DLOCK_SENTINEL_PASSWORD, "
              "their ACL user from --sentinel-user\n", cli_prog);
    return status;
  }
  return 0;
}

/* A client of the first --redis server (status, unlock). */
int cli_open_first(dlock_client **out) {
  return cli_connect_to(cli.nurls ? cli.urls[0] : cli_default_url(), 0, NULL, NULL, out);
}


/* ---- the acknowledgement options of run and check ------------------------ */

int cli_ack_option(const char *o, const char *val) {
  if (val == NULL)
    return cli_usage_error("%s needs a value", o);
  if (!strcmp(o, "--durable-replicas")) {
    if (cli_parse_count(val, 0, &cli.durable_replicas) != 0 || cli.durable_replicas > 1000)
      return cli_usage_error("bad --durable-replicas \"%s\" (0 to 1000)", val);
    return 0;
  }
  int64_t d = cli_parse_duration(val);
  if (d <= 0)
    return cli_usage_error("bad duration \"%s\" for %s (like 500ms, 30s, 5m)", val, o);
  if (d >= 3000)
    return cli_usage_error("%s must be below the command timeout (3s)", o);
  *(!strcmp(o, "--replica-sync") ? &cli.replica_sync_ms : &cli.durable_ms) = d;
  return 0;
}

/* --replica-sync and --durable together: both wait within one call. */
int cli_ack_opts_check(void) {
  if (cli.durable_replicas > 0 && cli.durable_ms == 0)
    return cli_usage_error("--durable-replicas goes with --durable D");
  if (cli.replica_sync_all && cli.replica_sync_ms == 0)
    return cli_usage_error("--replica-sync-all goes with --replica-sync D");
  if (cli.replica_sync_ms + cli.durable_ms >= 3000)
    return cli_usage_error("--replica-sync and --durable together must stay "
                       "below the command timeout (3s)");
  return 0;
}

/* ---- a command's options --------------------------------------------------- */

/* One of table's options at argv[*i] (its value, if any, after it): 0, -1
 * when it is none of them, or an exit status. */
static int own_option(const char *cmd, int argc, char **argv, int *i,
                      const cli_opt *table) {
  const cli_opt *t = table;
  while (t && t->name && strcmp(t->name, argv[*i]) != 0)
    t++;
  if (t == NULL || t->name == NULL)
    return -1;
  if (t->kind == CLI_FLAG) {
    *(int *)t->dest = 1;
    return 0;
  }
  if (*i + 1 >= argc)
    return cli_usage_error("%s: %s needs a value", cmd, t->name);
  const char *val = argv[++*i];
  if (t->kind == CLI_TEXT) {
    *(const char **)t->dest = val;
    return 0;
  }
  if (t->kind == CLI_COUNT) {
    if (cli_parse_count(val, t->min, (int64_t *)t->dest) != 0)
      return cli_usage_error("%s: bad %s \"%s\" (a number >= %lld)", cmd, t->name,
                         val, (long long)t->min);
    return 0;
  }
  int64_t d = cli_parse_duration(val);
  if (d <= 0)
    return cli_usage_error("%s: bad duration \"%s\" for %s (like 500ms, 30s)", cmd,
                       val, t->name);
  *(int64_t *)t->dest = d;
  return 0;
}

int cli_options(const char *cmd, int argc, char **argv, const cli_opt *table,
                void (*help)(void), int operands_checked, int *first) {
  int i = 1, dashdash = 0, status;
  for (; i < argc && cli_is_option(argv[i]); i++) {
    if (!strcmp(argv[i], "--")) {
      dashdash = 1;
      i++;
      break;
    }
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      help();
      return -1;
    }
    status = own_option(cmd, argc, argv, &i, table);
    if (status < 0)
      status = cli_other_option(cmd, argc, argv, &i);
    if (status)
      return status;
  }
  *first = i;
  return operands_checked ? cli_operands_only(cmd, argc, argv, i, dashdash) : 0;
}

/* ---- JSON ------------------------------------------------------------------ */

void cli_json_bytes(FILE *f, const char *s, size_t len) {
  fputc('"', f);
  for (size_t k = 0; k < len; k++) {
    unsigned char ch = (unsigned char)s[k];
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 32 || ch == 127)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

void cli_json_str(FILE *f, const char *s) { cli_json_bytes(f, s, strlen(s)); }

/* ---- timed waits ------------------------------------------------------------ */

void cli_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
}

struct timespec cli_deadline(int64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  return ts;
}
