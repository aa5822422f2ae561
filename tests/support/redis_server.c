/* A throwaway redis-server on a free loopback port. */
#include "redis_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

void rs_url_add(char *url, size_t n, int port) {
  size_t len = strlen(url);
  int first = len >= 2 && url[len - 1] == '/' && url[len - 2] == '/';
  snprintf(url + len, n - len, "%s127.0.0.1:%d", first ? "" : ",", port);
}

int rs_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

static int accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0)
    close(fd);
  return ok;
}

/* Start s (bin: the program, NULL: the configured one) with more arguments
 * (NULL-terminated, at most 12); a sentinel
 * when conf names its configuration file. */
static int start_conf(rs_server *s, const char *bin, const char *conf,
                      const char *const *extra) {
  s->pid = -1;
  s->port = rs_free_port();
  if (s->port < 0) {
    fprintf(stderr, "no free loopback port: %s\n", strerror(errno));
    return -1;
  }
  snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
  char port[16];
  snprintf(port, sizeof port, "%d", s->port);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the tool */
    /* a session of its own, as a service runs: where the kernel groups
     * each session's tasks for scheduling (autogroup), a server in the
     * tool's session got one share among the tool's threads (beside 16
     * benching threads, 1/17 of their cores while all ran) */
    setsid();
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    /* the server binary: DLOCK_REDIS_SERVER (valkey-server, say), as the
     * test harness takes it */
    if (bin == NULL)
      bin = getenv("DLOCK_REDIS_SERVER");
    if (bin == NULL || *bin == '\0')
      bin = "redis-server";
    const char *argv[24] = {bin, "--port", port, "--bind",
                            "127.0.0.1", "--save", "", "--appendonly", "no"};
    int argc = 9;
    if (conf) { /* its file first; a sentinel keeps no data */
      const char *head[] = {bin, conf, "--sentinel", "--port",
                            port, "--bind", "127.0.0.1"};
      memcpy(argv, head, sizeof head);
      argc = 7;
    }
    for (int i = 0; extra && extra[i] && argc < 22; i++)
      argv[argc++] = extra[i];
    argv[argc] = NULL;
    execvp(bin, (char *const *)argv);
    fprintf(stderr, "cannot run %s: %s (install it, set DLOCK_REDIS_SERVER to "
            "another server binary, or set DLOCK_REDIS_URL)\n", bin,
            strerror(errno));
    _exit(127);
  }
  s->pid = pid;
  for (int i = 0; i < 500; i++) {
    if (accepts(s->port))
      return 0;
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      s->pid = -1;
      return -1;
    }
    usleep(10000);
  }
  fprintf(stderr, "redis-server on port %d did not start\n", s->port);
  rs_server_stop(s);
  return -1;
}

static int start_with(rs_server *s, const char *const *extra) {
  return start_conf(s, NULL, NULL, extra);
}

int rs_server_start_bin(rs_server *s, const char *bin,
                                const char *const *extra) {
  return start_conf(s, bin, NULL, extra);
}

int rs_server_start(rs_server *s) { return start_with(s, NULL); }

int rs_tls_server_start(rs_server *s, const char *certs,
                                char tls_url[64]) {
  char port[16], crt[128], key[128], ca[128];
  int p = rs_free_port();
  snprintf(port, sizeof port, "%d", p);
  snprintf(crt, sizeof crt, "%s/server.crt", certs);
  snprintf(key, sizeof key, "%s/server.key", certs);
  snprintf(ca, sizeof ca, "%s/ca.crt", certs);
  const char *extra[] = {"--tls-port", port, "--tls-cert-file", crt,
                         "--tls-key-file", key, "--tls-ca-cert-file", ca,
                         "--tls-auth-clients", "no", NULL};
  if (start_with(s, extra) != 0)
    return -1;
  snprintf(tls_url, 64, "rediss://127.0.0.1:%d", p);
  return 0;
}

void rs_cluster_stop(rs_cluster *k) {
  for (int i = 0; i < k->n; i++) {
    rs_server_stop(&k->node[i]);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", k->dir[i]);
    if (system(cmd) != 0)
      fprintf(stderr, "could not remove %s\n", k->dir[i]);
  }
  k->n = 0;
}

int rs_cluster_start(rs_cluster *k, int masters, int replicas) {
  return rs_cluster_start_timeout(k, masters, replicas, 0);
}

int rs_cluster_start_timeout(rs_cluster *k, int masters,
                                     int replicas, long node_timeout_ms) {
  memset(k, 0, sizeof *k);
  int n = masters * (1 + replicas);
  if (masters < 3 || replicas < 0 || n > DLOCK_TOOL_CLUSTER_MAX)
    return -1;
  char create[1024] = "redis-cli --cluster create";
  for (int i = 0; i < n; i++) {
    snprintf(k->dir[i], sizeof k->dir[i], "/tmp/dlock-cluster-XXXXXX");
    if (mkdtemp(k->dir[i]) == NULL) {
      rs_cluster_stop(k);
      return -1;
    }
    char bus[16];
    snprintf(bus, sizeof bus, "%d", rs_free_port());
    char timeout[24];
    snprintf(timeout, sizeof timeout, "%ld", node_timeout_ms);
    const char *extra[] = {"--cluster-enabled", "yes", "--cluster-config-file",
                           "nodes.conf", "--cluster-port", bus, "--dir",
                           k->dir[i], node_timeout_ms > 0 ? "--cluster-node-timeout" : NULL,
                           timeout, NULL};
    k->n = i + 1;
    if (start_with(&k->node[i], extra) != 0) {
      rs_cluster_stop(k);
      return -1;
    }
    size_t len = strlen(create);
    snprintf(create + len, sizeof create - len, " 127.0.0.1:%d", k->node[i].port);
  }
  size_t len = strlen(create);
  snprintf(create + len, sizeof create - len,
           " --cluster-replicas %d --cluster-yes >/dev/null 2>&1", replicas);
  int ok = system(create) == 0;
  for (int tries = 0; ok && tries < 1000; tries++) { /* 20 s at most */
    int all = 1;
    for (int i = 0; i < k->n && all; i++) {
      char cmd[128];
      snprintf(cmd, sizeof cmd, "redis-cli -p %d cluster info 2>/dev/null | "
               "grep -q cluster_state:ok", k->node[i].port);
      all = system(cmd) == 0;
      /* a replica: has its master's data (WAIT can count on it) */
      snprintf(cmd, sizeof cmd, "redis-cli -p %d info replication 2>/dev/null"
               " | grep -q role:slave", k->node[i].port);
      if (all && system(cmd) == 0) {
        snprintf(cmd, sizeof cmd, "redis-cli -p %d info replication "
                 "2>/dev/null | grep -q master_link_status:up",
                 k->node[i].port);
        all = system(cmd) == 0;
      }
    }
    if (all)
      break;
    if (tries == 999)
      ok = 0;
    usleep(20000);
  }
  if (!ok) {
    fprintf(stderr, "the cluster did not come up (%s)\n", create);
    rs_cluster_stop(k);
    return -1;
  }
  snprintf(k->url, sizeof k->url, "redis+cluster://");
  for (int i = 0; i < k->n; i++)
    rs_url_add(k->url, sizeof k->url, k->node[i].port);
  return 0;
}

void rs_server_stop(rs_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
  }
  s->pid = -1;
}

/* Run cmd (a shell line): 1 when it exits 0. */
static int sh_ok(const char *cmd) { return system(cmd) == 0; }

int rs_sentinel_start(rs_sentinel *k, int replicas,
                              int sentinels, long down_after_ms) {
  memset(k, 0, sizeof *k);
  int n = 1 + replicas + sentinels;
  if (replicas < 0 || sentinels < 1 || n > DLOCK_TOOL_CLUSTER_MAX)
    return -1;
  int ok = 1;
  for (int i = 0; ok && i < n; i++) {
    snprintf(k->dir[i], sizeof k->dir[i], "/tmp/dlock-sentinel-XXXXXX");
    ok = mkdtemp(k->dir[i]) != NULL;
    k->n = i + 1;
    char master[16], conf[96];
    snprintf(master, sizeof master, "%d", k->node[0].port);
    if (ok && i == 0) {
      ok = start_with(&k->node[i], NULL) == 0;
    } else if (ok && i <= replicas) {
      const char *extra[] = {"--replicaof", "127.0.0.1", master, NULL};
      ok = start_with(&k->node[i], extra) == 0;
    } else if (ok) {
      snprintf(conf, sizeof conf, "%s/sentinel.conf", k->dir[i]);
      FILE *f = fopen(conf, "w");
      ok = f != NULL;
      if (f) {
        fprintf(f, "sentinel monitor dlock-bench 127.0.0.1 %s 2\n", master);
        if (down_after_ms > 0)
          fprintf(f, "sentinel down-after-milliseconds dlock-bench %ld\n",
                  down_after_ms);
        ok = fclose(f) == 0;
      }
      ok = ok && start_conf(&k->node[i], NULL, conf, NULL) == 0;
    }
  }
  for (int tries = 0; ok && tries < 400; tries++) { /* 20 s at most */
    int all = 1;
    char cmd[256];
    for (int i = 1; all && i <= replicas; i++) {
      snprintf(cmd, sizeof cmd, "redis-cli -p %d info replication 2>/dev/null"
               " | grep -q master_link_status:up", k->node[i].port);
      all = sh_ok(cmd);
    }
    for (int i = 1 + replicas; all && i < n; i++) {
      snprintf(cmd, sizeof cmd,
               "m=$(redis-cli -p %d sentinel master dlock-bench 2>/dev/null); "
               "[ \"$(echo \"$m\" | grep -A1 -x num-slaves | tail -1)\" = %d ] && "
               "[ \"$(echo \"$m\" | grep -A1 -x num-other-sentinels | tail -1)\" = %d ]",
               k->node[i].port, replicas, sentinels - 1);
      all = sh_ok(cmd);
    }
    if (all)
      break;
    if (tries == 399)
      ok = 0;
    usleep(50000);
  }
  if (!ok) {
    fprintf(stderr, "the sentinel setup did not come up\n");
    rs_sentinel_stop(k);
    return -1;
  }
  snprintf(k->url, sizeof k->url, "redis+sentinel://");
  for (int i = 1 + replicas; i < n; i++)
    rs_url_add(k->url, sizeof k->url, k->node[i].port);
  strncat(k->url, "/dlock-bench", sizeof k->url - strlen(k->url) - 1);
  return 0;
}

void rs_sentinel_stop(rs_sentinel *k) { rs_cluster_stop(k); }
