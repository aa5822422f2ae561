/* Fencing for data in Redis (docs/fencing.md): a counter kept beside a
 * fenced lock, written only by guarded writes. A holder that stalls past
 * its lease (here: it sleeps through a short lease while a second client
 * takes the lock and writes) has its late write refused, so the counter
 * never goes back.
 *
 *   dlock-fenced-counter [URL]        (default redis://127.0.0.1:6379)
 *
 * Prints each step; exits 0 when the stale write was refused. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <dlock/dlock.h>

static int check(int rc, const char *what) {
  if (rc != DLOCK_OK)
    fprintf(stderr, "%s: %s: %s\n", what, dlock_strerror(rc), dlock_errmsg());
  return rc;
}

/* SET the counter to value under lock's guard. */
static int write_counter(dlock_lock *lock, const char *key, long long value) {
  char text[32];
  snprintf(text, sizeof text, "%lld", value);
  const char *argv[] = {"SET", key, text};
  size_t lens[] = {3, strlen(key), strlen(text)};
  return dlock_guarded_call(lock, 3, argv, lens, NULL);
}

int main(int argc, char **argv) {
  const char *url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
  const char *name = "dlock-example:fenced-counter";
  /* the data's key carries the lock's name as hash tag: same server, same
   * cluster slot */
  const char *key = "{dlock-example:fenced-counter}:value";
  dlock_client *a = NULL, *b = NULL;
  dlock_lock *la = NULL, *lb = NULL;
  if (check(dlock_client_open(url, NULL, &a), "open") ||
      check(dlock_client_open(url, NULL, &b), "open") ||
      check(dlock_fenced_lock_new(a, name, NULL, &la), "lock") ||
      check(dlock_fenced_lock_new(b, name, NULL, &lb), "lock"))
    return 1;
  dlock_grant ga, gb;
  /* A takes the lock with a 200 ms lease, writes 1, then stalls */
  if (check(dlock_acquire_grant(la, 5000, 200, &ga), "A acquire") ||
      check(write_counter(la, key, 1), "A write"))
    return 1;
  printf("A holds token %lld and wrote 1, then stalls past its lease\n",
         (long long)ga.token);
  /* B waits for the lock: granted once A's lease has passed */
  if (check(dlock_acquire_grant(lb, 5000, 30000, &gb), "B acquire") ||
      check(write_counter(lb, key, 2), "B write"))
    return 1;
  printf("B holds token %lld and wrote 2\n", (long long)gb.token);
  /* A wakes up and writes what it computed before its stall */
  int rc = write_counter(la, key, 1);
  printf("A's late write: %s (%s)\n", dlock_strerror(rc), dlock_errmsg());
  dlock_release(lb);
  dlock_lock_free(la);
  dlock_lock_free(lb);
  dlock_client_close(a);
  dlock_client_close(b);
  return rc == DLOCK_EFENCED ? 0 : 1;
}
