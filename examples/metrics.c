/* dlock example: a program that uses locks and serves its client's
 * statistics in Prometheus's text format over HTTP, from a tiny loop on
 * its main thread (docs/observability.md).
 *
 * usage: dlock-metrics PORT [REQUESTS]
 *   serves http://127.0.0.1:PORT/metrics (any path answers the same) while
 *   a worker thread takes and releases a lock; stops after REQUESTS
 *   requests (default: never).
 * Redis: $DLOCK_REDIS_URL, or redis://127.0.0.1:6379.
 * Build it against an installed dlock:
 *   cc metrics.c -o dlock-metrics $(pkg-config --cflags --libs dlock) -lpthread */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <dlock/dlock.h>

static atomic_int stop;

/* The program's own work: a lock taken and released, again and again. */
static void *work(void *arg) {
  dlock_lock *lock = arg;
  while (!atomic_load(&stop)) {
    if (dlock_acquire(lock, 1000, 30000) == DLOCK_OK)
      dlock_release(lock);
    nanosleep(&(struct timespec){0, 1000000}, NULL); /* 1 ms */
  }
  return NULL;
}

/* One request: read it (up to the blank line), answer with the text. */
static void serve(int fd, dlock_client *client) {
  char req[2048];
  size_t got = 0;
  while (got < sizeof req - 1) {
    ssize_t k = read(fd, req + got, sizeof req - 1 - got);
    if (k <= 0)
      break;
    got += (size_t)k;
    req[got] = '\0';
    if (strstr(req, "\r\n\r\n"))
      break;
  }
  dlock_stats s = {.version = DLOCK_STATS_VERSION};
  static char body[16384];
  size_t len = 0;
  if (dlock_client_stats(client, &s) != DLOCK_OK ||
      dlock_client_stats_format(&s, "dlock-metrics", body, sizeof body, &len) !=
          DLOCK_OK ||
      len >= sizeof body)
    len = (size_t)snprintf(body, sizeof body, "# no statistics: %s\n",
                           dlock_errmsg());
  char head[160];
  int h = snprintf(head, sizeof head,
                   "HTTP/1.0 200 OK\r\nContent-Type: text/plain; "
                   "version=0.0.4\r\nContent-Length: %zu\r\n\r\n", len);
  if (write(fd, head, (size_t)h) != h || write(fd, body, len) != (ssize_t)len)
    fprintf(stderr, "dlock-metrics: a client went away\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: dlock-metrics PORT [REQUESTS]\n");
    return 2;
  }
  long requests = argc > 2 ? atol(argv[2]) : -1;
  const char *url = getenv("DLOCK_REDIS_URL");
  dlock_client *client = NULL;
  dlock_lock *lock = NULL;
  if (dlock_client_open(url ? url : "redis://127.0.0.1:6379", NULL, &client) !=
          DLOCK_OK ||
      dlock_reentrant_lock_new(client, "dlock-example:metrics", NULL, &lock) !=
          DLOCK_OK) {
    fprintf(stderr, "dlock-metrics: %s\n", dlock_errmsg());
    return 1;
  }
  int srv = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)atoi(argv[1]))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (srv < 0 || bind(srv, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(srv, 16) != 0) {
    perror("dlock-metrics: listen");
    return 1;
  }
  printf("serving http://127.0.0.1:%s/metrics\n", argv[1]);
  fflush(stdout);
  pthread_t t;
  pthread_create(&t, NULL, work, lock);
  for (long n = 0; requests < 0 || n < requests; n++) {
    int fd = accept(srv, NULL, NULL);
    if (fd < 0)
      break;
    serve(fd, client);
    close(fd);
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  close(srv);
  dlock_lock_free(lock);
  dlock_client_close(client);
  return 0;
}
