/* Start a throwaway redis-server on a free 127.0.0.1 port and stop it: for
 * dlock-bench and the test harness (which adds fault injection on top). */
#ifndef DLOCK_TESTS_REDIS_SERVER_H
#define DLOCK_TESTS_REDIS_SERVER_H

#include <sys/types.h>

typedef struct dlock_tool_server {
  pid_t pid;
  int port;
  char url[64];
} dlock_tool_server;

/* Append "127.0.0.1:PORT" to a URL of size n being built, after a comma
 * unless it ends with "//". */
void dlock_tool_url_add(char *url, size_t n, int port);

/* A free TCP port on 127.0.0.1 (bound once and released), or -1. */
int dlock_tool_free_port(void);
/* Start one (no persistence, stdout to /dev/null) and wait up to 5 s for
 * it to accept connections. Returns 0, or -1 with a message on stderr. */
int dlock_tool_server_start(dlock_tool_server *s);
/* The same with the program bin (NULL: DLOCK_REDIS_SERVER or redis-server)
 * and more arguments (NULL-terminated, at most 12; may be NULL). */
int dlock_tool_server_start_bin(dlock_tool_server *s, const char *bin,
                                const char *const *extra);
/* Stop it (SIGTERM, then wait). */
void dlock_tool_server_stop(dlock_tool_server *s);

/* A throwaway Redis Cluster of masters masters with replicas replicas each,
 * each node in a directory of its own under /tmp, created with redis-cli
 * --cluster create; url is its redis+cluster:// URL. 0 when every node says
 * cluster_state:ok and every replica has its master's data (bounded: 20 s),
 * else -1 with a message on stderr (and nothing left). */
#define DLOCK_TOOL_CLUSTER_MAX 8
typedef struct dlock_tool_cluster {
  int n;
  dlock_tool_server node[DLOCK_TOOL_CLUSTER_MAX];
  char dir[DLOCK_TOOL_CLUSTER_MAX][64];
  char url[256];
} dlock_tool_cluster;
int dlock_tool_cluster_start(dlock_tool_cluster *k, int masters, int replicas);
void dlock_tool_cluster_stop(dlock_tool_cluster *k);

/* A server with a TLS port beside its plain one (s->port): tls_url gets
 * rediss://127.0.0.1:TLSPORT. Its certificate is certs/server.crt (as
 * tests/support/tls_certs.sh makes them). 0 or -1. */
int dlock_tool_tls_server_start(dlock_tool_server *s, const char *certs,
                                char tls_url[64]);
/* The same with cluster-node-timeout node_timeout_ms (0: the server's
 * default). */
int dlock_tool_cluster_start_timeout(dlock_tool_cluster *k, int masters,
                                     int replicas, long node_timeout_ms);

/* A master (node[0]), replicas replicas of it and sentinels sentinels that
 * watch it as "dlock-bench" (quorum 2), in directories of their own under
 * /tmp; url is its redis+sentinel:// URL. down_after_ms: the sentinels'
 * down-after-milliseconds (0: Sentinel's default, 30 s; failover-timeout
 * stays the default too). 0 when every replica has the master's data and
 * every sentinel sees them and the others (bounded: 20 s), else -1 with a
 * message on stderr (and nothing left). */
typedef dlock_tool_cluster dlock_tool_sentinel;
int dlock_tool_sentinel_start(dlock_tool_sentinel *k, int replicas,
                              int sentinels, long down_after_ms);
void dlock_tool_sentinel_stop(dlock_tool_sentinel *k);

#endif
