/* Test harness: real redis-server processes, never a mock. */
#include "harness.h"
#include "redis_server.h"

#include <dirent.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

_Thread_local int th_flag;

#define MAX_SERVERS 32
static th_server *live[MAX_SERVERS];
static char self_exe[4096];

int64_t th_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t th_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void track(th_server *s, int on) {
  for (int i = 0; i < MAX_SERVERS; i++) {
    if (on && live[i] == NULL) {
      live[i] = s;
      return;
    }
    if (!on && live[i] == s) {
      live[i] = NULL;
      return;
    }
  }
}

static void kill_all(void) {
  for (int i = 0; i < MAX_SERVERS; i++)
    if (live[i] && live[i]->pid > 0) {
      kill(live[i]->pid, SIGKILL);
      waitpid(live[i]->pid, NULL, 0);
    }
}

/* th_server_restart_loading: a LOADING answer counts as answering */
static int loading_answers;

static int wait_ping(th_server *s, int timeout_ms) {
  int64_t end = th_now_ms() + timeout_ms;
  while (th_now_ms() < end) {
    redisReply *r = th_cmd(s, "PING");
    if (r) {
      int ok = r->type == REDIS_REPLY_STATUS ||
               (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0) ||
               (r->type == REDIS_REPLY_ERROR && loading_answers &&
                strncmp(r->str, "LOADING", 7) == 0);
      freeReplyObject(r);
      if (ok)
        return 0;
    }
    int st;
    if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
      s->pid = 0;
      return -1;
    }
    usleep(10000);
  }
  return -1;
}

static int spawn(th_server *s) {
  const char *bin = s->bin[0] ? s->bin : getenv("DLOCK_REDIS_SERVER");
  if (bin == NULL)
    bin = "redis-server";
  char port[16], log[128];
  snprintf(port, sizeof port, "%d", s->port);
  snprintf(log, sizeof log, "%s/redis.log", s->dir);
  char extra[512];
  snprintf(extra, sizeof extra, "%s", s->extra);
  char *argv[64] = {(char *)bin, "--port", port, "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--dir", s->dir,
                    "--logfile", log, "--daemonize", "no",
                    "--enable-debug-command", "local"};
  int argc = 17;
  if (s->conf[0]) { /* a sentinel: its config file first */
    memmove(argv + 3, argv + 1, (size_t)(argc - 1) * sizeof *argv);
    argv[1] = s->conf;
    argv[2] = "--sentinel";
    argc += 2;
  }
  for (char *tok = strtok(extra, " "); tok && argc < 62; tok = strtok(NULL, " "))
    argv[argc++] = tok;
  argv[argc] = NULL;
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0);
    dup2(null, 1);
    execvp(bin, argv);
    fprintf(stderr, "cannot run %s: %s\n", bin, strerror(errno));
    _exit(127);
  }
  s->pid = pid;
  if (wait_ping(s, 5000) != 0) {
    fprintf(stderr, "redis-server on port %d did not answer PING (is "
            "redis-server installed? set DLOCK_REDIS_SERVER)\n", s->port);
    th_server_kill(s);
    return -1;
  }
  return 0;
}

/* Spawn s (its dir made) on a free port, another one when taken. */
static int spawn_on_free_port(th_server *s) {
  for (int attempt = 0; attempt < 5; attempt++) {
    s->port = rs_free_port();
    snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
    track(s, 1);
    if (s->port > 0 && spawn(s) == 0)
      return 0;
    track(s, 0);
  }
  return -1;
}

int th_server_start_bin(th_server *s, const char *bin, const char *extra) {
  memset(s, 0, sizeof *s);
  snprintf(s->bin, sizeof s->bin, "%s", bin ? bin : "");
  snprintf(s->extra, sizeof s->extra, "%s", extra ? extra : "");
  snprintf(s->dir, sizeof s->dir, "/tmp/dlock-test-XXXXXX");
  if (mkdtemp(s->dir) == NULL)
    return -1;
  return spawn_on_free_port(s);
}

int th_server_start(th_server *s, const char *extra) {
  return th_server_start_bin(s, NULL, extra);
}

int th_blackhole_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(fd, 128) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return ntohs(a.sin_port); /* fd stays open until exit */
}

int th_tls_certs(char dir[64]) {
  const char *script = getenv("DLOCK_TLS_CERTS");
  snprintf(dir, 64, "/tmp/dlock-certs-XXXXXX");
  if (script == NULL || mkdtemp(dir) == NULL)
    return -1;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "sh '%s' '%s'", script, dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "the test certificates could not be made (openssl)\n");
    return -1;
  }
  return 0;
}

void th_tls_certs_remove(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (dir[0] && system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
}

/* The certificates of the TLS topology being started (th_tls_cluster_start,
 * th_tls_sentinel_start), NULL for a plain one. */
static const char *topology_certs;

static int topology_addr_first; /* th_topology_addrs */

void th_topology_addrs(int first) { topology_addr_first = first; }

const char *th_addr(const th_server *n) {
  return n->addr[0] ? n->addr : "127.0.0.1";
}

/* Node i's own address under th_topology_addrs (into addr, "" when off),
 * and the server arguments that put it there (appended to args), with
 * announce (NULL: none) the option that tells the others. */
static void own_addr(int i, char addr[16], char *args, size_t n,
                     const char *announce) {
  addr[0] = '\0';
  if (topology_addr_first == 0)
    return;
  snprintf(addr, 16, "127.0.0.%d", topology_addr_first + i);
  size_t len = strlen(args);
  /* first in bind: older servers connect out from their first address */
  snprintf(args + len, n - len, "%s--bind %s 127.0.0.1 --bind-source-addr %s "
           "--protected-mode no", len ? " " : "", addr, addr);
  len = strlen(args);
  if (announce)
    snprintf(args + len, n - len, " %s %s", announce, addr);
}

static void url_add(char *url, size_t n, const char *addr, int port) {
  size_t len = strlen(url);
  int first = len >= 2 && url[len - 1] == '/' && url[len - 2] == '/';
  snprintf(url + len, n - len, "%s%s:%d", first ? "" : ",",
           addr[0] ? addr : "127.0.0.1", port);
}

/* The TLS arguments of a topology's node on tls_port: it replicates, talks
 * to its cluster bus and (a sentinel) to the servers over TLS. */
static void topology_tls_args(char *out, size_t n, int tls_port) {
  size_t len = strlen(out);
  snprintf(out + len, n - len,
           "%s--tls-port %d --tls-cert-file %s/server.crt --tls-key-file "
           "%s/server.key --tls-ca-cert-file %s/ca.crt --tls-auth-clients no "
           "--tls-replication yes",
           len ? " " : "", tls_port, topology_certs, topology_certs,
           topology_certs);
}

/* A node's TLS port is known: its rediss:// URL, and the plain port for
 * th_connect_key in worker processes. */
static void tls_port_is(th_server *s, int port) {
  s->tls_port = port;
  snprintf(s->url, sizeof s->url, "rediss://127.0.0.1:%d", port);
  char var[48], plain[16];
  snprintf(var, sizeof var, "DLOCK_TEST_TLS_%d", port);
  snprintf(plain, sizeof plain, "%d", s->port);
  setenv(var, plain, 1);
}

/* A topology's server node: th_server_start, with TLS beside the plain
 * port when the topology is a TLS one. */
static int node_start(th_server *s, const char *extra) {
  if (topology_certs == NULL)
    return th_server_start(s, extra);
  int port = rs_free_port();
  char all[512];
  snprintf(all, sizeof all, "%s", extra ? extra : "");
  topology_tls_args(all, sizeof all, port);
  size_t len = strlen(all);
  if (strstr(all, "--cluster-enabled"))
    snprintf(all + len, sizeof all - len, " --tls-cluster yes");
  if (th_server_start(s, all) != 0)
    return -1;
  tls_port_is(s, port);
  return 0;
}

/* Does n listen on port (its plain or its TLS one)? */
static int has_port(const th_server *n, int port) {
  return port > 0 && (n->port == port || n->tls_port == port);
}

int th_tls_server_start(th_server *s, const char *certs, const char *leaf,
                        int auth_clients) {
  for (int attempt = 0; attempt < 5; attempt++) {
    int port = rs_free_port();
    char extra[512];
    snprintf(extra, sizeof extra,
             "--tls-port %d --tls-cert-file %s/%s.crt --tls-key-file %s/%s.key "
             "--tls-ca-cert-file %s/ca.crt --tls-auth-clients %s",
             port, certs, leaf, certs, leaf, certs, auth_clients ? "yes" : "no");
    if (th_server_start(s, extra) == 0) {
      tls_port_is(s, port);
      return 0;
    }
  }
  return -1;
}

static int has_waitaof(th_server *s) {
  redisReply *r = th_cmd(s, "COMMAND INFO WAITAOF");
  int yes = r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
            r->element[0]->type == REDIS_REPLY_ARRAY;
  if (r)
    freeReplyObject(r);
  return yes;
}

int th_waitaof_server_start(th_server *s, const char *extra) {
  char args[512];
  snprintf(args, sizeof args, "--appendonly yes %s", extra ? extra : "");
  if (th_server_start(s, args) != 0)
    return -1;
  if (has_waitaof(s))
    return 0;
  th_server_stop(s);
  if (th_server_start_bin(s, "valkey-server", args) == 0 && has_waitaof(s))
    return 0;
  fprintf(stderr, "no server with WAITAOF: the configured one lacks it and "
          "valkey-server did not start (scripts/setup installs it)\n");
  th_server_stop(s);
  return -1;
}

int th_server_restart(th_server *s) {
  track(s, 1);
  return spawn(s);
}

void th_outcome_done(void *data, const dlock_result *r) {
  th_outcome *o = data;
  pthread_mutex_lock(&o->mu);
  o->rc = r->rc;
  snprintf(o->msg, sizeof o->msg, "%s", r->errmsg ? r->errmsg : "");
  o->integer = r->reply ? r->reply->integer : -1;
  o->done = 1;
  pthread_cond_signal(&o->cv);
  pthread_mutex_unlock(&o->mu);
}

int th_outcome_wait(th_outcome *o, int64_t ms) {
  struct timespec until; /* the condition's clock: CLOCK_REALTIME */
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += ms / 1000;
  until.tv_nsec += (ms % 1000) * 1000000;
  if (until.tv_nsec >= 1000000000) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&o->mu);
  while (!o->done && pthread_cond_timedwait(&o->cv, &o->mu, &until) == 0) {
  }
  int rc = o->done ? o->rc : -1000;
  pthread_mutex_unlock(&o->mu);
  return rc;
}

uint64_t th_commands(dlock_client *c) {
  dlock_stats st;
  memset(&st, 0, sizeof st);
  st.version = DLOCK_STATS_VERSION;
  dlock_client_stats(c, &st);
  return st.commands;
}

int th_server_restart_loading(th_server *s) {
  loading_answers = 1;
  int rc = th_server_restart(s);
  loading_answers = 0;
  return rc;
}

void th_server_kill(th_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGCONT);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
  }
  s->pid = 0;
  track(s, 0);
}

void th_server_stop(th_server *s) {
  if (s->nnodes) {
    for (int i = 0; i < s->nnodes; i++)
      th_server_stop(&s->node[i]);
    free(s->node);
    s->node = NULL;
    s->nnodes = 0;
    s->pid = 0;
    return;
  }
  th_server_kill(s);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (s->dir[0] && system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", s->dir);
}

void th_server_pause(th_server *s, int paused) {
  if (s->pid > 0)
    kill(s->pid, paused ? SIGSTOP : SIGCONT);
}

static redisReply *vcmd_port(int port, const char *fmt, va_list ap) {
  struct timeval tv = {2, 0};
  redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (ctx == NULL || ctx->err) {
    if (ctx)
      redisFree(ctx);
    return NULL;
  }
  redisSetTimeout(ctx, tv);
  redisReply *r = redisvCommand(ctx, fmt, ap);
  redisFree(ctx);
  return r;
}

/* A command on one server, whatever it answers (no MOVED followed). */
static redisReply *cmd_at(int port, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = vcmd_port(port, fmt, ap);
  va_end(ap);
  return r;
}

/* "MOVED 1234 127.0.0.1:PORT" -> PORT, else 0 */
static int moved_port(const redisReply *r) {
  if (r == NULL || r->type != REDIS_REPLY_ERROR || strncmp(r->str, "MOVED ", 6))
    return 0;
  const char *colon = strrchr(r->str, ':');
  return colon ? atoi(colon + 1) : 0;
}

static redisReply *vcmd(th_server *s, const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  redisReply *r = vcmd_port(s->port, fmt, ap);
  int port = moved_port(r);
  if (port > 0) {
    freeReplyObject(r);
    r = vcmd_port(port, fmt, again);
  }
  va_end(again);
  return r;
}

redisReply *th_cmd(th_server *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = vcmd(s, fmt, ap);
  va_end(ap);
  return r;
}

void th_guard_refuses(dlock_lock *const *locks, int n, th_server *master,
                      const char *name, int64_t guard_ms) {
  for (int i = 0; i < n; i++) {
    int64_t t0 = th_now_ms();
    TH_ASSERT_RC(dlock_acquire(locks[i], 0, 30000), DLOCK_EIO);
    CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "replica guard"));
    CU_ASSERT(th_now_ms() - t0 >= guard_ms); /* the guard's time, not less */
    CU_ASSERT_EQUAL(th_int(master, "EXISTS %s", name), 0);
  }
}

long long th_info(th_server *s, const char *section, const char *field) {
  redisReply *r = th_cmd(s, "INFO %s", section);
  long long n = -1;
  if (r && r->type == REDIS_REPLY_STRING) {
    const char *p = strstr(r->str, field);
    n = p ? atoll(p + strlen(field)) : 0;
  }
  if (r)
    freeReplyObject(r);
  return n;
}

long long th_cmd_calls(th_server *s, const char *cmd) {
  char key[96];
  snprintf(key, sizeof key, "cmdstat_%s:calls=", cmd);
  return th_info(s, "commandstats", key);
}

long long th_int(th_server *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = vcmd(s, fmt, ap);
  va_end(ap);
  long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -999;
  if (r)
    freeReplyObject(r);
  return v;
}

dlock_client *th_client(th_server *s, const dlock_client_opts *opts) {
  dlock_client *c = NULL;
  int rc = dlock_client_open(s->url, opts, &c);
  if (rc != DLOCK_OK)
    fprintf(stderr, "\n  dlock_client_open(%s): %s: %s\n", s->url,
            dlock_errname(rc), dlock_errmsg());
  CU_ASSERT_FATAL(rc == DLOCK_OK);
  return c;
}

dlock_client *th_lost_answer_client(th_server *s) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.connect_timeout_ms = 5000;
  o.command_timeout_ms = 300;
  return th_client(s, &o);
}

int th_cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int th_count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  if (d)
    closedir(d);
  return n;
}

/* Sanitizer builds run the client code several times slower; their job is
 * to find memory errors and races, the plain build's to hold the bounds. */
#if defined(__SANITIZE_THREAD__)
#define SANITIZER_SLOWDOWN 10
#elif defined(__SANITIZE_ADDRESS__)
#define SANITIZER_SLOWDOWN 3
#else
#define SANITIZER_SLOWDOWN 1
#endif

int64_t th_scaled_us(th_server *s, int64_t us) {
  static int64_t rtt_us; /* measured once per process */
  if (rtt_us == 0) {
    redisContext *c = redisConnect("127.0.0.1", s->port);
    int64_t v[200];
    int n = 0;
    for (; c && !c->err && n < 200; n++) {
      int64_t t0 = th_now_us();
      redisReply *r = redisCommand(c, "PING");
      v[n] = th_now_us() - t0;
      if (r == NULL)
        break;
      freeReplyObject(r);
    }
    if (c)
      redisFree(c);
    qsort(v, (size_t)n, sizeof v[0], th_cmp_i64);
    rtt_us = n > 0 ? v[n / 2] : 30;
    if (rtt_us < 1)
      rtt_us = 1;
  }
  int64_t scaled = us * rtt_us / 30;
  if (scaled < us)
    scaled = us;
  scaled *= SANITIZER_SLOWDOWN;
  const char *slow = getenv("DLOCK_TEST_SLOWDOWN"); /* set by scripts/test
                                                        for valgrind */
  if (slow && atoi(slow) > 1)
    scaled *= atoi(slow);
  printf("[bound %lld us: round trip %lld us here%s] ", (long long)scaled,
         (long long)rtt_us, SANITIZER_SLOWDOWN > 1 ? ", sanitizer build" : "");
  return scaled;
}

const char *th_name(const char *base) {
  static _Thread_local char buf[256];
  static int counter;
  CU_pTest t = CU_get_current_test();
  snprintf(buf, sizeof buf, "dlock-test:%s:%s:%d", t ? t->pName : "x", base,
           __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST));
  return buf;
}

static pid_t spawn_worker(char *const args[], int out_fd) {
  char *argv[32] = {self_exe, "--worker"};
  int n = 2;
  for (int i = 0; args[i] && n < 31; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (out_fd >= 0)
      dup2(out_fd, 1);
    execv(self_exe, argv);
    _exit(127);
  }
  return pid;
}

pid_t th_spawn_worker(char *const args[]) { return spawn_worker(args, -1); }

pid_t th_spawn_worker_pipe(char *const args[], int *out_fd) {
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = spawn_worker(args, fds[1]);
  close(fds[1]);
  *out_fd = fds[0];
  return pid;
}

int th_wait_worker(pid_t pid, int timeout_ms) {
  int64_t end = th_now_ms() + timeout_ms;
  int st;
  while (th_now_ms() < end) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (r < 0)
      return -1;
    usleep(5000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

/* ---- the codes each public call returned ---------------------------------- */

#define RC_SEEN_MAX 2048
static struct {
  pthread_mutex_t mu;
  size_t n;
  struct {
    char call[64];
    int rc;
  } v[RC_SEEN_MAX];
} rc_seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

void th_rc_seen(const char *expr, int rc) {
  if (rc >= 0)
    return;
  /* the outermost call only: "dlock_x(...)", not a helper's call
   * around one ("other_thread(dlock_rwlock_write(rw), 0)") */
  const char *p = expr + strspn(expr, " \t\n(");
  if (strncmp(p, "dlock_", 6) != 0)
    return;
  size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz_0123456789");
  if (p[len] != '(' || len >= sizeof rc_seen.v[0].call)
    return; /* not a call (a variable, a macro) */
  pthread_mutex_lock(&rc_seen.mu);
  int found = 0;
  for (size_t i = 0; i < rc_seen.n && !found; i++)
    found = rc_seen.v[i].rc == rc && strncmp(rc_seen.v[i].call, p, len) == 0 &&
            rc_seen.v[i].call[len] == '\0';
  if (!found && rc_seen.n < RC_SEEN_MAX) {
    memcpy(rc_seen.v[rc_seen.n].call, p, len);
    rc_seen.v[rc_seen.n].call[len] = '\0';
    rc_seen.v[rc_seen.n++].rc = rc;
  }
  pthread_mutex_unlock(&rc_seen.mu);
}

/* Each call's man page names every code the run saw it return: 0, or 1
 * with what is missing on stderr. */
static int rc_seen_documented(void) {
  const char *docs = getenv("DLOCK_DOCS");
  if (docs == NULL || rc_seen.n == 0)
    return 0;
  char path[] = "/tmp/dlock-rc-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0)
    return 1;
  FILE *f = fdopen(fd, "w");
  for (size_t i = 0; f && i < rc_seen.n; i++)
    fprintf(f, "%s %s\n", rc_seen.v[i].call, dlock_errname(rc_seen.v[i].rc));
  if (f)
    fclose(f);
  char line[1400];
  snprintf(line, sizeof line, "python3 '%s/../tools/manpages.py' "
           "'%s/../include/dlock' --returns '%s' >&2", docs, docs, path);
  int st = system(line);
  unlink(path);
  return st == 0 ? 0 : 1;
}

/* The failures of CUnit's last run: asserts, tests and suites. */
/* The failures of the last run, also on stderr: a CI log that keeps only
 * the tail of a failed suite's output still names the failed assert. */
static unsigned run_failures(void) {
  for (CU_pFailureRecord f = CU_get_failure_list(); f; f = f->pNext)
    fprintf(stderr, "FAILED %s: %s:%u: %s\n",
            f->pTest && f->pTest->pName ? f->pTest->pName : "?",
            f->strFileName ? f->strFileName : "?", f->uiLineNumber,
            f->strCondition ? f->strCondition : "?");
  return CU_get_number_of_failures() + CU_get_number_of_tests_failed() +
         CU_get_number_of_suites_failed();
}

int th_main(int argc, char **argv, void (*add)(void), th_worker_fn worker) {
  signal(SIGPIPE, SIG_IGN);
  ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  self_exe[n > 0 ? n : 0] = '\0';
  if (argc > 1 && strcmp(argv[1], "--worker") == 0)
    return worker ? worker(argc - 2, argv + 2) : 2;
  atexit(kill_all);
  if (CU_initialize_registry() != CUE_SUCCESS)
    return 1;
  add();
  CU_basic_set_mode(CU_BRM_VERBOSE);
  /* run some tests by name: the last argument (SUITE TEST or just TEST),
   * or DLOCK_TEST_ONLY's space-separated names (tests/meson.build). The
   * others are made inactive and the suites run once, in their order: a
   * suite's setup (a cluster's six servers) is not repeated per name. */
  char only[4096] = "";
  const char *env = getenv("DLOCK_TEST_ONLY");
  if ((size_t)snprintf(only, sizeof only, "%s",
                       argc > 1 ? argv[argc - 1]
                       : env    ? env
                                : "") >= sizeof only) {
    fprintf(stderr, "the list of tests to run is over %zu bytes\n",
            sizeof only);
    return 2;
  }
  if (only[0]) {
    for (CU_pSuite suite = CU_get_registry()->pSuite; suite;
         suite = suite->pNext)
      for (CU_pTest t = suite->pTest; t; t = t->pNext)
        CU_set_test_active(t, CU_FALSE);
    char *save = NULL;
    for (char *name = strtok_r(only, " \t\n", &save); name;
         name = strtok_r(NULL, " \t\n", &save)) {
      CU_pTest test = NULL;
      for (CU_pSuite suite = CU_get_registry()->pSuite; suite && !test;
           suite = suite->pNext)
        test = CU_get_test_by_name(name, suite);
      if (test == NULL) {
        fprintf(stderr, "no test named %s\n", name);
        CU_cleanup_registry();
        return 2;
      }
      CU_set_test_active(test, CU_TRUE);
    }
    CU_set_fail_on_inactive(CU_FALSE);
  }
  /* and leave some out: DLOCK_TEST_SKIP's space-separated SUITE:TEST
   * names (scripts/test: what the sanitizer builds need not run twice); a
   * name of this program's suites must name one of its tests */
  const char *skip_env = getenv("DLOCK_TEST_SKIP");
  char skip[2048];
  snprintf(skip, sizeof skip, "%s", skip_env ? skip_env : "");
  char *save = NULL;
  for (char *name = strtok_r(skip, " \t\n", &save); name;
       name = strtok_r(NULL, " \t\n", &save)) {
    char *colon = strchr(name, ':');
    if (colon == NULL)
      continue;
    *colon = '\0';
    CU_pSuite suite = CU_get_suite(name);
    if (suite == NULL)
      continue;
    CU_pTest test = CU_get_test_by_name(colon + 1, suite);
    if (test == NULL) {
      fprintf(stderr, "DLOCK_TEST_SKIP: no test %s in suite %s\n", colon + 1, name);
      CU_cleanup_registry();
      return 2;
    }
    CU_set_test_active(test, CU_FALSE);
    CU_set_fail_on_inactive(CU_FALSE);
  }
  CU_basic_run_tests();
  unsigned failed = run_failures(), ran = CU_get_number_of_tests_run();
  CU_cleanup_registry();
  if (rc_seen_documented() != 0) {
    fprintf(stderr, "FAILED: a call returned a code its man page does not "
            "name (above)\n");
    failed++;
  }
  return failed || ran == 0 ? 1 : 0;
}

/* ---- lost-lock callbacks -------------------------------------------------- */

void th_lost_init(th_lost_log *log) {
  memset(log, 0, sizeof *log);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&log->mu, NULL);
  pthread_cond_init(&log->cv, &attr);
  pthread_condattr_destroy(&attr);
}

void th_on_lost(void *data, const char *name, size_t len, uint64_t owner,
                dlock_lost_reason reason) {
  th_lost_log *log = data;
  pthread_mutex_lock(&log->mu);
  log->count++;
  log->reason = reason;
  log->owner = owner;
  snprintf(log->name, sizeof log->name, "%.*s", (int)len, name);
  pthread_cond_broadcast(&log->cv);
  pthread_mutex_unlock(&log->mu);
}

int th_lost_wait(th_lost_log *log, int n, int timeout_ms) {
  int64_t end_us = th_now_us() + (int64_t)timeout_ms * 1000;
  struct timespec ts = {.tv_sec = end_us / 1000000,
                        .tv_nsec = (end_us % 1000000) * 1000};
  pthread_mutex_lock(&log->mu);
  while (log->count < n)
    if (pthread_cond_timedwait(&log->cv, &log->mu, &ts) != 0)
      break;
  int c = log->count;
  pthread_mutex_unlock(&log->mu);
  return c;
}

int th_lost_count(th_lost_log *log) { return th_lost_wait(log, 0, 0); }

int th_pttl_rises(th_server *s, const char *key, int timeout_ms) {
  int64_t end = th_now_ms() + timeout_ms;
  for (long long was = th_int(s, "PTTL %s", key); was > 0;) {
    if (th_now_ms() >= end)
      return 0;
    usleep(10000);
    long long now = th_int(s, "PTTL %s", key);
    if (now > was)
      return 1;
    was = now;
  }
  return 0;
}

dlock_client *th_watchdog_client(th_server *s, th_lost_log *log,
                                 int64_t watchdog_ms) {
  th_lost_init(log);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = watchdog_ms;
  o.on_lost = th_on_lost;
  o.on_lost_data = log;
  return th_client(s, &o);
}

dlock_client *th_max_hold_client(th_server *s, th_lost_log *log) {
  th_lost_init(log);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 600;
  o.max_hold_ms = 1000;
  o.on_lost = th_on_lost;
  o.on_lost_data = log;
  return th_client(s, &o);
}

static void *acquirer_run(void *arg) {
  th_acquirer *a = arg;
  if (a->start)
    pthread_barrier_wait(a->start);
  a->rc = dlock_acquire(a->lock, a->wait_ms, a->lease_ms);
  a->got_ms = th_now_ms();
  if (a->held)
    pthread_barrier_wait(a->held);
  if (a->go)
    pthread_barrier_wait(a->go);
  if (a->rc == DLOCK_OK && a->hold_ms > 0)
    usleep((useconds_t)a->hold_ms * 1000);
  a->release_rc = a->rc == DLOCK_OK && !a->keep ? dlock_release(a->lock)
                                                : DLOCK_OK;
  return NULL;
}

void th_acquirer_start(th_acquirer *a) {
  if (pthread_create(&a->thread, NULL, acquirer_run, a) != 0)
    a->rc = DLOCK_ENOMEM;
}

void th_acquirer_join(th_acquirer *a) { pthread_join(a->thread, NULL); }

int th_acquire_elsewhere(dlock_lock *lock, int64_t wait_ms, int64_t lease_ms) {
  th_acquirer a = {.lock = lock, .wait_ms = wait_ms, .lease_ms = lease_ms};
  th_acquirer_start(&a);
  th_acquirer_join(&a);
  return a.rc == DLOCK_OK ? a.release_rc : a.rc;
}

static void *elsewhere_run(void *arg) {
  th_elsewhere_call *e = arg;
  e->rc = e->fn(e->arg);
  return NULL;
}

void th_elsewhere_start(th_elsewhere_call *e, int (*fn)(void *arg), void *arg) {
  *e = (th_elsewhere_call){fn, arg, DLOCK_ENOMEM, 0};
  if (pthread_create(&e->thread, NULL, elsewhere_run, e) != 0)
    e->fn = NULL;
}

int th_elsewhere_join(th_elsewhere_call *e) {
  if (e->fn)
    pthread_join(e->thread, NULL);
  return e->rc;
}

int th_elsewhere(int (*fn)(void *arg), void *arg) {
  th_elsewhere_call e;
  th_elsewhere_start(&e, fn, arg);
  return th_elsewhere_join(&e);
}

static int release_it(void *lock) { return dlock_release(lock); }

int th_release_elsewhere(dlock_lock *lock) {
  return th_elsewhere(release_it, lock);
}

typedef struct state_call {
  dlock_lock *lock;
  dlock_lock_state *st;
} state_call;

static int state_of(void *arg) {
  state_call *s = arg;
  return dlock_lock_state_get(s->lock, s->st);
}

int th_state_elsewhere(dlock_lock *lock, dlock_lock_state *st) {
  state_call s = {lock, st};
  return th_elsewhere(state_of, &s);
}

int th_threads_each(int n, void *(*fn)(void *), void *args, size_t size) {
  pthread_t t[64];
  int started = 0;
  for (int i = 0; i < n && i < 64; i++)
    started += pthread_create(&t[started], NULL, fn,
                              size ? (char *)args + (size_t)i * size : args) ==
               0;
  if (started < n)
    fprintf(stderr, "th_threads: %d of %d threads started\n", started, n);
  for (int i = 0; i < started; i++)
    pthread_join(t[i], NULL);
  return started;
}

int th_threads(int n, void *(*fn)(void *), void *arg) {
  return th_threads_each(n, fn, arg, 0);
}

int th_suite_open(th_server *s, dlock_client **c) {
  if (th_main_server_start(s) != 0)
    return 1;
  if (s->nnodes)
    printf("\n(on a cluster: %s)\n", s->url);
  return dlock_client_open(s->url, NULL, c) == DLOCK_OK ? 0 : 1;
}

int th_suite_close(th_server *s, dlock_client *c) {
  dlock_client_close(c);
  th_server_stop(s);
  return 0;
}

static long long numsub_one(th_server *s, const char *channel) {
  redisReply *r = th_cmd(s, "PUBSUB NUMSUB %s", channel);
  long long n = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2
                    ? r->element[1]->integer
                    : -1;
  if (r)
    freeReplyObject(r);
  return n;
}

long long th_numsub(th_server *s, const char *channel) {
  if (s->nnodes == 0)
    return numsub_one(s, channel);
  /* classic subscribers anywhere, and shard subscribers at the owner of
   * the channel's slot (other nodes answer MOVED) */
  long long sum = 0;
  for (int i = 0; i < s->nnodes; i++) {
    long long n = numsub_one(&s->node[i], channel);
    if (n < 0)
      return -1;
    sum += n;
    redisReply *r = cmd_at(s->node[i].port, "PUBSUB SHARDNUMSUB %s", channel);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
      sum += r->element[1]->integer;
    if (r)
      freeReplyObject(r);
  }
  return sum;
}

/* A setup of several servers answers to its first node's port, pid and
 * directory. */
static void adopt_node0(th_server *s) {
  s->port = s->node[0].port;
  s->pid = s->node[0].pid;
  snprintf(s->dir, sizeof s->dir, "%s", s->node[0].dir);
}

int th_cluster_mode(void) {
  const char *v = getenv("DLOCK_TEST_CLUSTER");
  return v && strcmp(v, "1") == 0;
}

/* What n's INFO replication says: -1 no answer, 0 a master, 1 a replica
 * with its master's data (link up, no sync in progress), 2 a replica
 * without. */
static int replica_state(th_server *n) {
  redisReply *r = th_cmd(n, "INFO replication");
  int st = r == NULL || r->type != REDIS_REPLY_STRING ? -1
           : strstr(r->str, "role:slave") == NULL    ? 0
           : strstr(r->str, "master_link_status:up") &&
                   strstr(r->str, "master_sync_in_progress:0")
               ? 1
               : 2;
  if (r)
    freeReplyObject(r);
  return st;
}

int th_replica_synced(th_server *n, int64_t ms) {
  for (int64_t end = th_now_ms() + ms; th_now_ms() < end; usleep(20000))
    if (replica_state(n) == 1)
      return 1;
  return 0;
}

/* n says the cluster is up, and, a replica, that it has its master's data
 * (so the map lists it online: the replica guard counts on it). */
static int cluster_ok(th_server *n) {
  redisReply *r = th_cmd(n, "CLUSTER INFO");
  int ok = r && r->type == REDIS_REPLY_STRING &&
           strstr(r->str, "cluster_state:ok") != NULL;
  if (r)
    freeReplyObject(r);
  return ok && replica_state(n) != 2;
}

static int cluster_start(th_server *s, int masters, int replicas) {
  int n = masters * (1 + replicas);
  memset(s, 0, sizeof *s);
  s->node = calloc((size_t)n, sizeof *s->node);
  if (s->node == NULL)
    return -1;
  char create[2048] = "redis-cli --cluster create";
  if (topology_certs) /* over TLS, to the nodes' TLS ports */
    snprintf(create, sizeof create, "redis-cli --tls --cacert %s/ca.crt "
             "--cluster create", topology_certs);
  for (int i = 0; i < n; i++) {
    /* the cluster bus on a free port of its own (the default, port +
     * 10000, may be taken or past 65535) */
    char extra[320], addr[16];
    snprintf(extra, sizeof extra, "--cluster-enabled yes --cluster-config-file "
             "nodes.conf --cluster-node-timeout 1000 --cluster-port %d",
             rs_free_port());
    own_addr(i, addr, extra, sizeof extra, "--cluster-announce-ip");
    if (node_start(&s->node[i], extra) != 0) {
      s->nnodes = i;
      th_server_stop(s);
      return -1;
    }
    snprintf(s->node[i].addr, sizeof s->node[i].addr, "%s", addr);
    s->nnodes = i + 1;
    size_t len = strlen(create);
    snprintf(create + len, sizeof create - len, " %s:%d", th_addr(&s->node[i]),
             topology_certs ? s->node[i].tls_port : s->node[i].port);
  }
  size_t len = strlen(create);
  snprintf(create + len, sizeof create - len,
           " --cluster-replicas %d --cluster-yes >/dev/null 2>&1", replicas);
  int ok = system(create) == 0;
  /* every node agrees the cluster is up (bounded: 20 s) */
  for (int64_t end = th_now_ms() + 20000; ok;) {
    int all = 1;
    for (int i = 0; i < n && all; i++)
      all = cluster_ok(&s->node[i]);
    if (all)
      break;
    if (th_now_ms() >= end)
      ok = 0;
    usleep(20000);
  }
  if (!ok) {
    fprintf(stderr, "the test cluster did not come up (%s)\n", create);
    th_server_stop(s);
    return -1;
  }
  adopt_node0(s);
  snprintf(s->url, sizeof s->url, "%s+cluster://",
           topology_certs ? "rediss" : "redis");
  for (int i = 0; i < masters; i++)
    url_add(s->url, sizeof s->url, s->node[i].addr,
            topology_certs ? s->node[i].tls_port : s->node[i].port);
  return 0;
}

/* A sentinel watching the master at master_addr:master_port, as
 * "dlock-test"; node i of its setup (th_topology_addrs). */
static int sentinel_start(th_server *n, const char *master_addr,
                          int master_port, int i) {
  memset(n, 0, sizeof *n);
  char addr[16];
  own_addr(i, addr, n->extra, sizeof n->extra, NULL);
  snprintf(n->dir, sizeof n->dir, "/tmp/dlock-test-XXXXXX");
  if (mkdtemp(n->dir) == NULL)
    return -1;
  snprintf(n->conf, sizeof n->conf, "%s/sentinel.conf", n->dir);
  FILE *f = fopen(n->conf, "w");
  if (f == NULL)
    return -1;
  fprintf(f, "sentinel monitor dlock-test %s %d 2\n"
             "sentinel down-after-milliseconds dlock-test 1000\n"
             "sentinel failover-timeout dlock-test 3000\n",
          master_addr[0] ? master_addr : "127.0.0.1", master_port);
  if (addr[0]) /* the others learn it from its hello messages */
    fprintf(f, "sentinel announce-ip %s\n", addr);
  fclose(f);
  snprintf(n->addr, sizeof n->addr, "%s", addr);
  int tls_port = topology_certs ? rs_free_port() : 0;
  if (topology_certs)
    topology_tls_args(n->extra, sizeof n->extra, tls_port);
  if (spawn_on_free_port(n) != 0)
    return -1;
  if (topology_certs)
    tls_port_is(n, tls_port);
  return 0;
}

/* Every sentinel of s sees the master's replicas and the other sentinels,
 * and every replica has the master's data. */
static int sentinels_settled(th_server *s, int replicas) {
  int first = s->nnodes - s->sentinels;
  /* the master lists every replica as online (ROLE leaves out one still in
   * its first synchronisation) */
  redisReply *role = th_cmd(&s->node[0], "ROLE");
  int online = role && role->type == REDIS_REPLY_ARRAY && role->elements >= 3 &&
               role->element[2]->type == REDIS_REPLY_ARRAY &&
               (int)role->element[2]->elements == replicas;
  if (role)
    freeReplyObject(role);
  if (!online)
    return 0;
  for (int i = 1; i < first; i++) {
    redisReply *r = th_cmd(&s->node[i], "INFO replication");
    int ok = r && r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "master_link_status:up") != NULL;
    if (r)
      freeReplyObject(r);
    if (!ok)
      return 0;
  }
  for (int i = first; i < s->nnodes; i++) {
    redisReply *a = th_cmd(&s->node[i], "SENTINEL REPLICAS dlock-test");
    redisReply *b = th_cmd(&s->node[i], "SENTINEL SENTINELS dlock-test");
    int ok = a && a->type == REDIS_REPLY_ARRAY && (int)a->elements == replicas &&
             b && b->type == REDIS_REPLY_ARRAY &&
             (int)b->elements == s->sentinels - 1;
    if (a)
      freeReplyObject(a);
    if (b)
      freeReplyObject(b);
    if (!ok)
      return 0;
  }
  return 1;
}

static int sentinel_setup_start(th_server *s, int replicas, int sentinels) {
  int n = 1 + replicas + sentinels;
  memset(s, 0, sizeof *s);
  s->node = calloc((size_t)n, sizeof *s->node);
  if (s->node == NULL)
    return -1;
  s->sentinels = sentinels;
  char extra[320], addr[16], maddr[16];
  extra[0] = '\0';
  own_addr(0, maddr, extra, sizeof extra, NULL);
  int ok = node_start(&s->node[0], extra) == 0;
  snprintf(s->node[0].addr, sizeof s->node[0].addr, "%s", maddr);
  s->nnodes = 1;
  /* over TLS, the replicas and sentinels use the master's TLS port */
  int master_port = topology_certs ? s->node[0].tls_port : s->node[0].port;
  for (int i = 1; ok && i <= replicas; i++, s->nnodes++) {
    snprintf(extra, sizeof extra, "--replicaof %s %d", th_addr(&s->node[0]),
             master_port);
    /* the address the master tells the sentinels */
    own_addr(i, addr, extra, sizeof extra, "--replica-announce-ip");
    ok = node_start(&s->node[i], extra) == 0;
    snprintf(s->node[i].addr, sizeof s->node[i].addr, "%s", addr);
  }
  for (int i = 1 + replicas; ok && i < n; i++, s->nnodes++)
    ok = sentinel_start(&s->node[i], maddr, master_port, i) == 0;
  for (int64_t end = th_now_ms() + 20000; ok && !sentinels_settled(s, replicas);
       usleep(50000))
    if (th_now_ms() >= end)
      ok = 0;
  if (!ok) {
    fprintf(stderr, "the test sentinel setup did not come up\n");
    th_server_stop(s);
    return -1;
  }
  adopt_node0(s);
  snprintf(s->url, sizeof s->url, "%s+sentinel://",
           topology_certs ? "rediss" : "redis");
  for (int i = 1 + replicas; i < n; i++)
    url_add(s->url, sizeof s->url, s->node[i].addr,
            topology_certs ? s->node[i].tls_port : s->node[i].port);
  strncat(s->url, "/dlock-test", sizeof s->url - strlen(s->url) - 1);
  return 0;
}

static const char *tls_mode_certs(void);

int th_tls_cluster_start(th_server *s, const char *certs, int masters,
                         int replicas) {
  topology_certs = certs;
  int rc = cluster_start(s, masters, replicas);
  topology_certs = NULL;
  return rc;
}

int th_tls_sentinel_start(th_server *s, const char *certs, int replicas,
                          int sentinels) {
  topology_certs = certs;
  int rc = sentinel_setup_start(s, replicas, sentinels);
  topology_certs = NULL;
  return rc;
}

/* In TLS mode every topology is a TLS one, with the mode's certificates. */
int th_cluster_start(th_server *s, int masters, int replicas) {
  if (!th_tls_mode())
    return cluster_start(s, masters, replicas);
  const char *certs = tls_mode_certs();
  return certs ? th_tls_cluster_start(s, certs, masters, replicas) : -1;
}

int th_sentinel_start(th_server *s, int replicas, int sentinels) {
  if (!th_tls_mode())
    return sentinel_setup_start(s, replicas, sentinels);
  const char *certs = tls_mode_certs();
  return certs ? th_tls_sentinel_start(s, certs, replicas, sentinels) : -1;
}

th_server *th_sentinel_master(th_server *s) {
  for (int i = s->nnodes - s->sentinels; i < s->nnodes; i++) {
    redisReply *r =
        th_cmd(&s->node[i], "SENTINEL GET-MASTER-ADDR-BY-NAME dlock-test");
    int port = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2
                   ? atoi(r->element[1]->str)
                   : 0;
    if (r)
      freeReplyObject(r);
    for (int j = 0; port && j < s->nnodes - s->sentinels; j++)
      if (has_port(&s->node[j], port))
        return &s->node[j];
  }
  return NULL;
}

int th_tls_mode(void) {
  const char *v = getenv("DLOCK_TEST_TLS");
  return v && strcmp(v, "1") == 0;
}

static char mode_certs[64]; /* TLS mode's certificates, made once */

static void remove_mode_certs(void) { th_tls_certs_remove(mode_certs); }

/* TLS mode's certificates, made at the first call (NULL: they could not
 * be). */
static const char *tls_mode_certs(void) {
  if (mode_certs[0] == '\0') {
    if (th_tls_certs(mode_certs) != 0) {
      mode_certs[0] = '\0';
      return NULL;
    }
    atexit(remove_mode_certs);
    /* every client's default trust store (OpenSSL reads it at open): the
     * suites' clients trust the test CA without a TLS option */
    char ca[96];
    snprintf(ca, sizeof ca, "%s/ca.crt", mode_certs);
    setenv("SSL_CERT_FILE", ca, 1);
  }
  return mode_certs;
}

int th_main_server_start(th_server *s) {
  if (th_cluster_mode())
    return th_cluster_start(s, 3, 1);
  if (!th_tls_mode())
    return th_server_start(s, NULL);
  const char *certs = tls_mode_certs();
  return certs ? th_tls_server_start(s, certs, "server", 0) : -1;
}

/* The port of the master that owns key's slot, asked of ctx (0 unknown). */
static int owner_port(redisContext *ctx, const char *key) {
  redisReply *r = redisCommand(ctx, "CLUSTER KEYSLOT %s", key);
  long long slot = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  if (r)
    freeReplyObject(r);
  redisReply *m = redisCommand(ctx, "CLUSTER SLOTS");
  int port = 0;
  for (size_t i = 0; m && m->type == REDIS_REPLY_ARRAY && i < m->elements; i++) {
    redisReply *e = m->element[i];
    if (slot >= e->element[0]->integer && slot <= e->element[1]->integer)
      port = (int)e->element[2]->element[1]->integer;
  }
  if (m)
    freeReplyObject(m);
  return port;
}

int th_is_master(th_server *n) {
  redisReply *r = th_cmd(n, "ROLE");
  int yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, "master") == 0;
  if (r)
    freeReplyObject(r);
  return yes;
}

int th_becomes_master(th_server *n, int64_t ms) {
  for (int64_t end = th_now_ms() + ms; th_now_ms() < end; usleep(5000))
    if (th_is_master(n))
      return 1;
  return 0;
}

static void node_id(th_server *n, char out[64]) {
  redisReply *r = th_cmd(n, "CLUSTER MYID");
  snprintf(out, 64, "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "");
  if (r)
    freeReplyObject(r);
}

th_server *th_replica_of(th_server *s, th_server *master) {
  char id[64];
  node_id(master, id);
  redisReply *r = th_cmd(master, "CLUSTER REPLICAS %s", id);
  th_server *found = NULL;
  for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
    const char *colon = strchr(r->element[i]->str, ':');
    int port = colon ? atoi(colon + 1) : 0;
    for (int n = 0; n < s->nnodes; n++)
      if (has_port(&s->node[n], port))
        found = &s->node[n];
  }
  if (r)
    freeReplyObject(r);
  return found;
}

void th_move_begin(th_server *s, th_slot_move *m, const char *key) {
  m->from = th_node_of(s, key);
  m->to = NULL;
  for (int i = 0; i < s->nnodes && m->to == NULL; i++)
    if (&s->node[i] != m->from && th_is_master(&s->node[i]))
      m->to = &s->node[i];
  m->slot = th_int(s, "CLUSTER KEYSLOT %s", key);
  if (m->to == NULL)
    m->to = m->from;
  node_id(m->from, m->from_id);
  node_id(m->to, m->to_id);
  freeReplyObject(th_cmd(m->to, "CLUSTER SETSLOT %lld IMPORTING %s", m->slot,
                         m->from_id));
  freeReplyObject(th_cmd(m->from, "CLUSTER SETSLOT %lld MIGRATING %s", m->slot,
                         m->to_id));
}

int th_move_key(th_slot_move *m, const char *key) {
  /* a TLS cluster migrates over TLS (tls-cluster), to the TLS port */
  redisReply *r = th_cmd(m->from, "MIGRATE 127.0.0.1 %d %s 0 5000 KEYS %s",
                         m->to->tls_port ? m->to->tls_port : m->to->port, "",
                         key);
  int ok = r && r->type == REDIS_REPLY_STATUS;
  if (r)
    freeReplyObject(r);
  return ok;
}

void th_move_end(th_server *s, th_slot_move *m) {
  freeReplyObject(th_cmd(m->to, "CLUSTER SETSLOT %lld NODE %s", m->slot,
                         m->to_id));
  freeReplyObject(th_cmd(m->from, "CLUSTER SETSLOT %lld NODE %s", m->slot,
                         m->to_id));
  for (int i = 0; i < s->nnodes; i++)
    if (&s->node[i] != m->to && &s->node[i] != m->from &&
        th_is_master(&s->node[i]))
      freeReplyObject(th_cmd(&s->node[i], "CLUSTER SETSLOT %lld NODE %s",
                             m->slot, m->to_id));
}

int th_migrate_slot(th_server *s, const char *key) {
  th_slot_move m;
  th_move_begin(s, &m, key);
  int rc = 0;
  for (int round = 0; round < 100; round++) { /* the slot's keys, 100 a time */
    redisReply *r = th_cmd(m.from, "CLUSTER GETKEYSINSLOT %lld 100", m.slot);
    size_t n = r && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
    for (size_t i = 0; i < n; i++)
      if (!th_move_key(&m, r->element[i]->str) &&
          th_int(m.from, "EXISTS %s", r->element[i]->str) == 1)
        rc = -1; /* not an expiry between the two: a failed MIGRATE */
    if (r)
      freeReplyObject(r);
    if (n == 0 || rc != 0)
      break;
  }
  th_move_end(s, &m);
  return rc;
}

int th_connections_of(th_server *s, dlock_client *c) {
  redisReply *r = th_cmd(s, "CLIENT LIST");
  int n = 0;
  if (r && r->type == REDIS_REPLY_STRING)
    for (const char *p = r->str; (p = strstr(p, dlock_client_id(c))); p++)
      n++;
  if (r)
    freeReplyObject(r);
  return n;
}

th_server *th_node_of(th_server *s, const char *key) {
  if (s->nnodes == 0)
    return s;
  if (s->sentinels > 0) { /* one master for every key */
    th_server *m = th_sentinel_master(s);
    return m ? m : &s->node[0];
  }
  struct timeval tv = {2, 0};
  redisContext *ctx = redisConnectWithTimeout("127.0.0.1", s->port, tv);
  int port = ctx && !ctx->err ? owner_port(ctx, key) : 0;
  if (ctx)
    redisFree(ctx);
  for (int j = 0; j < s->nnodes; j++)
    if (has_port(&s->node[j], port))
      return &s->node[j];
  return s;
}

long long th_replicated(th_server *m, const char *key, int want, int timeout_ms) {
  struct timeval tv = {2 + timeout_ms / 1000, 0};
  redisContext *ctx = redisConnectWithTimeout("127.0.0.1", m->port, tv);
  long long n = -1;
  redisReply *r = ctx && !ctx->err ? redisCommand(ctx, "SET %s 1", key) : NULL;
  if (r) {
    freeReplyObject(r);
    r = redisCommand(ctx, "DEL %s", key);
  }
  if (r) {
    freeReplyObject(r);
    r = redisCommand(ctx, "WAIT %d %d", want, timeout_ms);
    if (r && r->type == REDIS_REPLY_INTEGER)
      n = r->integer;
  }
  if (r)
    freeReplyObject(r);
  if (ctx)
    redisFree(ctx);
  return n;
}

/* A TLS port's plain twin (tls_port_is noted it in the environment), or
 * port itself. */
static int plain_port(int port) {
  char var[48];
  snprintf(var, sizeof var, "DLOCK_TEST_TLS_%d", port);
  const char *v = getenv(var);
  return v ? atoi(v) : port;
}

redisContext *th_connect_key(const char *url, const char *key) {
  int cluster = strstr(url, "+cluster://") != NULL;
  const char *p = strstr(url, "127.0.0.1:");
  int port = plain_port(p ? atoi(p + 10) : 0);
  redisContext *ctx = redisConnect("127.0.0.1", port);
  if (!cluster || ctx == NULL || ctx->err)
    return ctx;
  int owner = plain_port(owner_port(ctx, key));
  if (owner == 0 || owner == port)
    return ctx;
  redisFree(ctx);
  return redisConnect("127.0.0.1", owner);
}

int th_dlock_output(const char *args, char *out, size_t n) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' %s", getenv("DLOCK_BIN"), args);
  return th_shell(cmd, out, n);
}

int th_shell(const char *cmd, char *out, size_t n) {
  out[0] = '\0';
  FILE *p = popen(cmd, "r");
  if (p == NULL)
    return -1;
  size_t len = fread(out, 1, n - 1, p);
  out[len] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int th_wait_numsub(th_server *s, const char *channel, long long want,
                   int64_t ms_max) {
  for (int64_t end = th_now_ms() + ms_max; th_now_ms() < end; usleep(1000))
    if (th_numsub(s, channel) == want)
      return 1;
  return th_numsub(s, channel) == want;
}
