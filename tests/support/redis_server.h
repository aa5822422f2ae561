/* Start a throwaway redis-server on a free 127.0.0.1 port and stop it: for
 * dlock-bench and the test harness (which adds fault injection on top). */
#ifndef DLOCK_TESTS_REDIS_SERVER_H
#define DLOCK_TESTS_REDIS_SERVER_H

#include <sys/types.h>

typedef struct rs_server {
  pid_t pid;
  int port;
  char url[64];
} rs_server;

/* Append "127.0.0.1:PORT" to a URL of size n being built, after a comma
 * unless it ends with "//". */
void rs_url_add(char *url, size_t n, int port);

/* A free TCP port on 127.0.0.1 (bound once and released), or -1. */
int rs_free_port(void);
/* Start one (no persistence, stdout to /dev/null) and wait up to 5 s for
 * it to accept connections. Returns 0, or -1 with a message on stderr. */
int rs_server_start(rs_server *s);
/* The same with the program bin (NULL: DLOCK_REDIS_SERVER or redis-server)
 * and more arguments (NULL-terminated, at most 12; may be NULL). */
int rs_server_start_bin(rs_server *s, const char *bin,
                                const char *const *extra);
/* Stop it (SIGTERM, then wait). */
void rs_server_stop(rs_server *s);

/* A throwaway Redis Cluster of masters masters with replicas replicas each,
 * each node in a directory of its own under /tmp, created with redis-cli
 * --cluster create; url is its redis+cluster:// URL. 0 when every node says
 * cluster_state:ok and every replica has its master's data (bounded: 20 s),
 * else -1 with a message on stderr (and nothing left). */
#define DLOCK_TOOL_CLUSTER_MAX 8
typedef struct rs_cluster {
  int n;
  rs_server node[DLOCK_TOOL_CLUSTER_MAX];
  char dir[DLOCK_TOOL_CLUSTER_MAX][64];
  char url[256];
} rs_cluster;
int rs_cluster_start(rs_cluster *k, int masters, int replicas);
void rs_cluster_stop(rs_cluster *k);

/* A server with a TLS port beside its plain one (s->port): tls_url gets
 * rediss://127.0.0.1:TLSPORT. Its certificate is certs/server.crt (as
 * tests/support/tls_certs.sh makes them). 0 or -1. */
int rs_tls_server_start(rs_server *s, const char *certs,
                                char tls_url[64]);
/* The same with cluster-node-timeout node_timeout_ms (0: the server's
 * default). */
int rs_cluster_start_timeout(rs_cluster *k, int masters,
                                     int replicas, long node_timeout_ms);

/* A master (node[0]), replicas replicas of it and sentinels sentinels that
 * watch it as "dlock-bench" (quorum 2), in directories of their own under
 * /tmp; url is its redis+sentinel:// URL. down_after_ms: the sentinels'
 * down-after-milliseconds (0: Sentinel's default, 30 s; failover-timeout
 * stays the default too). 0 when every replica has the master's data and
 * every sentinel sees them and the others (bounded: 20 s), else -1 with a
 * message on stderr (and nothing left). */
typedef rs_cluster rs_sentinel;
int rs_sentinel_start(rs_sentinel *k, int replicas,
                              int sentinels, long down_after_ms);
void rs_sentinel_stop(rs_sentinel *k);

#endif
