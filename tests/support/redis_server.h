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

/* A free TCP port on 127.0.0.1 (bound once and released), or -1. */
int dlock_tool_free_port(void);
/* Start one (no persistence, stdout to /dev/null) and wait up to 5 s for
 * it to accept connections. Returns 0, or -1 with a message on stderr. */
int dlock_tool_server_start(dlock_tool_server *s);
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

#endif
