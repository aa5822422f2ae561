/* dlock example: several processes increment one counter, kept in a file,
 * under one dlock lock, with a deliberately slow read-then-write. Without
 * the lock some updates would be lost; with it the final count is exact.
 *
 * usage: dlock-counter [PROCESSES [INCREMENTS]]
 * Redis: $DLOCK_REDIS_URL, or redis://127.0.0.1:6379.
 * Build it against an installed dlock:
 *   cc counter.c -o dlock-counter $(pkg-config --cflags --libs dlock) */
#define _POSIX_C_SOURCE 200809L /* mkstemp, clock_gettime under -std=c11 */

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlock/dlock.h>

static const char *LOCK = "dlock-example:counter-lock";

static long read_counter(const char *path) {
  long value = 0;
  FILE *f = fopen(path, "r");
  if (f) {
    if (fscanf(f, "%ld", &value) != 1)
      value = 0;
    fclose(f);
  }
  return value;
}

static int write_counter(const char *path, long value) {
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return -1;
  fprintf(f, "%ld\n", value);
  return fclose(f);
}

static int worker(const char *url, const char *path, int id, int steps) {
  dlock_client *client = NULL;
  dlock_lock *lock = NULL;
  int rc = dlock_client_open(url, NULL, &client);
  if (rc == DLOCK_OK)
    rc = dlock_reentrant_lock_new(client, LOCK, NULL, &lock);
  if (rc != DLOCK_OK) {
    fprintf(stderr, "worker %d: %s: %s\n", id, dlock_strerror(rc), dlock_errmsg());
    dlock_client_close(client);
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
    long value = read_counter(path); /* read ... */
    if (write_counter(path, value + 1) != 0) /* ... then write */
      failures++;
    if ((rc = dlock_release(lock)) != DLOCK_OK) {
      fprintf(stderr, "worker %d: release: %s\n", id, dlock_strerror(rc));
      failures++;
    }
  }
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
  const char *env = getenv("DLOCK_REDIS_URL");
  const char *url = env && *env ? env : "redis://127.0.0.1:6379";
  char path[] = "/tmp/dlock-counter-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    perror("mkstemp");
    return 1;
  }
  close(fd);
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
      _exit(worker(url, path, i, steps));
  }
  int failed = 0;
  for (int i = 0; i < procs; i++) {
    int st;
    waitpid(pids[i], &st, 0);
    failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long got = read_counter(path);
  unlink(path);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
  long want = (long)procs * steps;
  printf("counter = %ld, expected %ld: %s (%.0f lock+unlock pairs/s)\n", got,
         want, got == want && !failed ? "no update was lost" : "UPDATES LOST",
         (double)want / secs);
  return got == want && !failed ? 0 : 1;
}
