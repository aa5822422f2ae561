/* dlock demo: several processes increment one shared counter under one dlock
 * lock, with a deliberately non-atomic read-then-write. Without the lock some
 * updates would be lost; with it the final count is exact.
 *
 * usage: dlock-counter [PROCESSES [INCREMENTS]]
 * Uses DLOCK_REDIS_URL when set; otherwise starts its own redis-server on a
 * free loopback port and stops it at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlock/dlock.h>
#include <hiredis/hiredis.h>

#include "redis_server.h"

static const char *LOCK = "dlock-demo:counter-lock";
static const char *COUNTER = "dlock-demo:counter";

static int parse_url(const char *url, char *host, size_t n, int *port) {
  /* Only for the demo's own counter connection: redis://host[:port] */
  if (sscanf(url, "redis://%63[^:/]:%d", host, port) == 2)
    return 0;
  *port = 6379;
  return sscanf(url, "redis://%63[^:/]", host) == 1 ? 0 : -1;
}

static int worker(const char *url, int id, int steps) {
  dlock_client *client = NULL;
  dlock_lock *lock = NULL;
  int rc = dlock_client_open(url, NULL, &client);
  if (rc == DLOCK_OK)
    rc = dlock_reentrant_lock_new(client, LOCK, NULL, &lock);
  if (rc != DLOCK_OK) {
    fprintf(stderr, "worker %d: %s: %s\n", id, dlock_strerror(rc), dlock_errmsg());
    return 1;
  }
  char host[64];
  int port;
  parse_url(url, host, sizeof host, &port);
  redisContext *redis = redisConnect(host, port);
  if (redis == NULL || redis->err) {
    fprintf(stderr, "worker %d: cannot connect to %s:%d\n", id, host, port);
    return 1;
  }
  int failures = 0;
  for (int i = 0; i < steps; i++) {
    rc = dlock_acquire(lock, 30000, DLOCK_LEASE_WATCHDOG);
    if (rc != DLOCK_OK) {
      fprintf(stderr, "worker %d: acquire: %s: %s\n", id, dlock_strerror(rc),
              dlock_errmsg());
      failures++;
      continue;
    }
    redisReply *r = redisCommand(redis, "GET %s", COUNTER); /* read ...  */
    long value = r && r->type == REDIS_REPLY_STRING ? atol(r->str) : 0;
    freeReplyObject(r);
    r = redisCommand(redis, "SET %s %ld", COUNTER, value + 1); /* ... write */
    freeReplyObject(r);
    if ((rc = dlock_release(lock)) != DLOCK_OK) {
      fprintf(stderr, "worker %d: release: %s\n", id, dlock_strerror(rc));
      failures++;
    }
  }
  redisFree(redis);
  dlock_lock_free(lock);
  dlock_client_close(client);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  int procs = argc > 1 ? atoi(argv[1]) : 4;
  int steps = argc > 2 ? atoi(argv[2]) : 250;
  if (procs < 1 || procs > 64 || steps < 1 || steps > 1000000) {
    fprintf(stderr, "usage: %s [PROCESSES (1-64) [INCREMENTS]]\n", argv[0]);
    return 2;
  }
  char url[128];
  dlock_tool_server server = {.pid = -1};
  const char *env = getenv("DLOCK_REDIS_URL");
  if (env && *env) {
    snprintf(url, sizeof url, "%s", env);
  } else {
    if (dlock_tool_server_start(&server) != 0)
      return 1;
    snprintf(url, sizeof url, "%s", server.url);
    printf("started redis-server at %s\n", url);
  }
  char host[64];
  int port;
  if (parse_url(url, host, sizeof host, &port) != 0) {
    fprintf(stderr, "the demo needs a redis://host:port URL\n");
    return 2;
  }
  redisContext *redis = redisConnect(host, port);
  if (redis == NULL || redis->err) {
    fprintf(stderr, "cannot connect to %s\n", url);
    return 1;
  }
  freeReplyObject(redisCommand(redis, "DEL %s", COUNTER));
  printf("dlock %s: %d processes x %d increments of one counter, each a "
         "read-then-write under the lock \"%s\"\n",
         DLOCK_VERSION_STRING, procs, steps, LOCK);
  fflush(stdout);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pids[64];
  for (int i = 0; i < procs; i++) {
    pids[i] = fork();
    if (pids[i] == 0)
      _exit(worker(url, i, steps));
  }
  int failed = 0;
  for (int i = 0; i < procs; i++) {
    int st;
    waitpid(pids[i], &st, 0);
    failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  redisReply *r = redisCommand(redis, "GET %s", COUNTER);
  long got = r && r->type == REDIS_REPLY_STRING ? atol(r->str) : 0;
  freeReplyObject(r);
  freeReplyObject(redisCommand(redis, "DEL %s", COUNTER));
  redisFree(redis);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  long want = (long)procs * steps;
  printf("counter = %ld, expected %ld: %s (%.0f lock+unlock pairs/s)\n", got,
         want, got == want && !failed ? "no update was lost" : "UPDATES LOST",
         (double)want / secs);
  dlock_tool_server_stop(&server);
  return got == want && !failed ? 0 : 1;
}
