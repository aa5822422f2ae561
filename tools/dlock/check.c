/* `dlock check`: can these credentials do everything dlock needs? Real use
 * of each primitive on throw-away names, uncontended and contended (a second
 * owner waits, so it subscribes, and is handed the object, so the release
 * publishes to it), the SCAN of `dlock list`, and WAIT when the replica
 * guard is on: one line each, and for a refusal the permission that is
 * missing. Every key it makes is deleted, or expires within ten seconds
 * (a semaphore's count has no delete: its TTL must outlast the checks,
 * or a release after it expired would make the count again without one).
 * Public API only. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dlock/dlock.h>

#include "cli.h"

/* A semaphore's count lives this long: it has no delete, and a release
 * after it expired would make it again without a TTL. */
#define KEYS_TTL_MS 10000

/* The first failure's code is kept; every check still runs. */
typedef struct run {
  FILE *out;
  int failed, first_rc, passed;
  int pubsub_refused; /* a refusal named a pub/sub command or a channel */
} run;

/* The permission a refusal's text names: the server says "... the 'CMD'
 * command" for a command (Redis and Valkey), and "channel" for a channel
 * (a script's PUBLISH, or SUBSCRIBE); the key patterns say "key". */
static void missing(const char *msg, char *out, size_t n) {
  const char *q = strstr(msg, "the '");
  const char *e = q ? strstr(q + 5, "' command") : NULL;
  if (e && e - (q + 5) < 64) {
    int len = (int)(e - (q + 5));
    snprintf(out, n, "+%.*s", len, q + 5);
    for (char *p = out; *p; p++) /* Redis shows it as "publish|sub" or "spublish" */
      if (*p >= 'A' && *p <= 'Z')
        *p = (char)(*p - 'A' + 'a');
  } else if (strstr(msg, "channel")) {
    snprintf(out, n, "a channel pattern (&redisson_* &dlock_*)");
  } else if (strstr(msg, "key")) {
    snprintf(out, n, "a key pattern (~* or the object's names)");
  } else {
    snprintf(out, n, "unknown: see the server's words");
  }
}

static void report(run *r, const char *what, int rc, const char *msg) {
  if (rc == DLOCK_OK) {
    fprintf(r->out, "ok    %s\n", what);
    r->passed++;
    return;
  }
  fprintf(r->out, "FAIL  %s: %s (%s): %s\n", what, dlock_strerror(rc),
          dlock_errname(rc), msg);
  if (rc == DLOCK_EPERM) {
    char perm[128];
    missing(msg, perm, sizeof perm);
    fprintf(r->out, "      missing permission: %s\n", perm);
    r->pubsub_refused |= strstr(perm, "subscribe") != NULL ||
                         strstr(perm, "publish") != NULL ||
                         strstr(perm, "channel") != NULL;
  }
  if (r->failed++ == 0)
    r->first_rc = rc;
}

/* Run call only while rc is DLOCK_OK: a sequence stops at its first
 * failure, and rc is that failure; msg keeps its message. */
#define STEP(rc, msg, call)                                                   \
  do {                                                                        \
    if ((rc) == DLOCK_OK) {                                                   \
      (rc) = (call);                                                          \
      if ((rc) != DLOCK_OK)                                                   \
        snprintf((msg), sizeof(msg), "%s", dlock_errmsg());                   \
    }                                                                         \
  } while (0)

/* ---- a second owner, waiting without a thread --------------------------- */

enum { OTHER = 0xC4EC }; /* the contender's owner id */

typedef struct pending {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, rc;
  char msg[512];
  dlock_permit_id id;
} pending;

static void pending_init(pending *p) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->mu, NULL);
  cli_cond_init(&p->cv);
}

static void on_done(void *data, const dlock_result *res) {
  pending *p = data;
  pthread_mutex_lock(&p->mu);
  p->rc = res->rc;
  snprintf(p->msg, sizeof p->msg, "%s", res->errmsg ? res->errmsg : "");
  if (res->n > 0 && res->ids)
    p->id = res->ids[0];
  p->done = 1;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* The operation's end (its rc, its message in msg): it always ends, by
 * its own wait_ms; 10 s is a bound for a server that stopped answering. */
static int pending_end(pending *p, int started, char *msg, size_t n) {
  if (started != DLOCK_OK) {
    snprintf(msg, n, "%s", dlock_errmsg());
    return started;
  }
  struct timespec ts = cli_deadline(10000);
  pthread_mutex_lock(&p->mu);
  while (!p->done && pthread_cond_timedwait(&p->cv, &p->mu, &ts) == 0)
    ;
  int rc = p->done ? p->rc : DLOCK_ETIMEDOUT;
  snprintf(msg, n, "%s", p->done ? p->msg : "no answer within 10 s");
  pthread_mutex_unlock(&p->mu);
  return rc;
}

/* A contended try that must wait (subscribed) and time out: ok, or the
 * refusal. */
static int times_out(int rc) { return rc == DLOCK_ETIMEDOUT ? DLOCK_OK : rc; }

/* Wait (bounded) until the fair queue of l has a waiter: the event that
 * the contender joined it. */
static void wait_queued(dlock_client *c, const char *name) {
  for (int i = 0; i < 500; i++) {
    dlock_inspection *in = NULL;
    int queued = dlock_inspect(c, name, NULL, &in) == DLOCK_OK &&
                 in->queue_length > 0;
    dlock_inspection_free(in);
    if (queued)
      return;
    usleep(2000);
  }
}

/* ---- the checks ---------------------------------------------------------- */

/* Contended: another owner waits (subscribes; a fair one queues) and times
 * out; then it waits again and the release hands it the lock (a fair
 * release publishes only to a queued waiter). */
static int contend(dlock_client *c, dlock_lock *l, const char *name, int fair,
                   char *msg, size_t n) {
  int rc = dlock_acquire(l, 0, 2000);
  if (rc != DLOCK_OK) {
    snprintf(msg, n, "%s", dlock_errmsg());
    return rc;
  }
  pending p;
  pending_init(&p);
  rc = times_out(pending_end(
      &p, dlock_acquire_async(l, OTHER, 200, 1000, on_done, &p, NULL), msg, n));
  if (rc != DLOCK_OK) {
    dlock_release(l);
    return rc;
  }
  pending_init(&p);
  int started = dlock_acquire_async(l, OTHER, 3000, 1000, on_done, &p, NULL);
  if (started == DLOCK_OK && fair)
    wait_queued(c, name);
  rc = dlock_release(l);
  if (rc != DLOCK_OK)
    snprintf(msg, n, "%s", dlock_errmsg());
  char other[512];
  int got = pending_end(&p, started, other, sizeof other);
  if (rc == DLOCK_OK && got != DLOCK_OK) {
    rc = got;
    snprintf(msg, n, "%s", other);
  }
  if (got == DLOCK_OK) {
    pending_init(&p);
    pending_end(&p, dlock_release_async(l, OTHER, on_done, &p, NULL), other,
                sizeof other);
  }
  return rc;
}

/* A kind of lock from the catalog (dlock_kinds(): a kind added to the
 * library is checked with no change here): acquire, re-enter when it is
 * reentrant, release (publish); then contended, unless several owners
 * may hold it at once (a read lock: the read-write lock's check contends
 * it), through contend(). A semaphore lock's permits are set first (one,
 * with a TTL). The spin lock passes without pub/sub: it neither
 * subscribes nor publishes. */
static void check_kind(run *r, dlock_client *c, const char *name,
                       const char *kind) {
  dlock_lock *l = NULL;
  char msg[512] = "", what[200];
  int rc = DLOCK_OK;
  if (strcmp(kind, "semaphore") == 0) {
    dlock_permits *p = NULL;
    STEP(rc, msg, dlock_permits_new(c, name, NULL, &p));
    STEP(rc, msg, dlock_permits_try_set_permits(p, 1, KEYS_TTL_MS, NULL));
    dlock_permits_free(p);
  }
  STEP(rc, msg, dlock_lock_new(c, kind, name, NULL, &l));
  unsigned caps = dlock_lock_caps(l);
  int reentrant = (caps & DLOCK_CAP_REENTRANT) != 0;
  STEP(rc, msg, dlock_acquire(l, 0, 1000));
  if (reentrant)
    STEP(rc, msg, dlock_acquire(l, 0, 1000));
  if (reentrant)
    STEP(rc, msg, dlock_release(l));
  STEP(rc, msg, dlock_release(l)); /* publishes: needs the channel */
  snprintf(what, sizeof what, "%s lock: acquire, %srelease", kind,
           reentrant ? "re-enter, " : "");
  report(r, what, rc, msg);
  if (!(caps & DLOCK_CAP_SHARED)) { /* reported either way: one count */
    int fair = (caps & DLOCK_CAP_FAIR) != 0;
    if (rc == DLOCK_OK)
      rc = contend(c, l, name, fair, msg, sizeof msg);
    snprintf(what, sizeof what, "%s lock, contended: another owner waits%s, "
             "the release hands it the lock", kind,
             fair ? " in the queue" : "");
    report(r, what, rc, msg);
  }
  if (rc != DLOCK_OK && l)
    dlock_force_release(l, NULL);
  dlock_lock_free(l);
}

static void check_rwlock(run *r, dlock_client *c, const char *name) {
  dlock_rwlock *rw = NULL;
  char msg[512] = "";
  int rc = dlock_rwlock_new(c, name, NULL, &rw);
  if (rc != DLOCK_OK)
    snprintf(msg, sizeof msg, "%s", dlock_errmsg());
  STEP(rc, msg, dlock_acquire(dlock_rwlock_write(rw), 0, 1000));
  STEP(rc, msg, dlock_acquire(dlock_rwlock_read(rw), 0, 1000)); /* writer reads */
  STEP(rc, msg, dlock_release(dlock_rwlock_write(rw)));          /* downgrade */
  STEP(rc, msg, dlock_release(dlock_rwlock_read(rw)));
  report(r, "read-write lock: write, read, downgrade, release", rc, msg);
  /* contended: a reader of another owner waits for the writer */
  int crc = rc;
  STEP(crc, msg, dlock_acquire(dlock_rwlock_write(rw), 0, 2000));
  pending p;
  pending_init(&p);
  if (crc == DLOCK_OK)
    crc = times_out(pending_end(&p,
                                dlock_acquire_async(dlock_rwlock_read(rw), OTHER,
                                                    200, 1000, on_done, &p, NULL),
                                msg, sizeof msg));
  STEP(crc, msg, dlock_release(dlock_rwlock_write(rw)));
  report(r, "read-write lock, contended: a reader waits for the writer "
            "(subscribe)", crc, msg);
  if (rw && (rc != DLOCK_OK || crc != DLOCK_OK)) {
    dlock_force_release(dlock_rwlock_write(rw), NULL);
    dlock_force_release(dlock_rwlock_read(rw), NULL);
  }
  dlock_rwlock_free(rw);
}

static void check_latch(run *r, dlock_client *c, const char *name) {
  dlock_latch *l = NULL;
  char msg[512] = "";
  int rc = dlock_latch_new(c, name, NULL, &l);
  if (rc != DLOCK_OK)
    snprintf(msg, sizeof msg, "%s", dlock_errmsg());
  STEP(rc, msg, dlock_latch_try_set_count(l, 1, NULL));
  /* a wait subscribes to the latch's channel: it must time out, not fail */
  STEP(rc, msg, times_out(dlock_latch_await(l, 200)));
  STEP(rc, msg, dlock_latch_count_down(l, NULL)); /* publishes */
  STEP(rc, msg, dlock_latch_await(l, 0));
  report(r, "count-down latch: set, wait (subscribe), count down (publish)",
         rc, msg);
  if (l)
    dlock_latch_delete(l, NULL);
  dlock_latch_free(l);
}

static void check_semaphore(run *r, dlock_client *c, const char *name) {
  dlock_semaphore *s = NULL;
  char msg[512] = "";
  int rc = dlock_semaphore_new(c, name, NULL, &s);
  if (rc != DLOCK_OK)
    snprintf(msg, sizeof msg, "%s", dlock_errmsg());
  STEP(rc, msg, dlock_semaphore_try_set_permits(s, 1, KEYS_TTL_MS, NULL));
  STEP(rc, msg, dlock_semaphore_acquire(s, 1, 0));
  /* contended: no permit left, a second acquire waits (subscribes) */
  STEP(rc, msg, times_out(dlock_semaphore_acquire(s, 1, 200)));
  STEP(rc, msg, dlock_semaphore_release(s, 1)); /* publishes */
  report(r, "semaphore: set permits, acquire, wait for a permit (subscribe), "
            "release (publish)", rc, msg);
  dlock_semaphore_free(s);
}

static void check_permits(run *r, dlock_client *c, const char *name) {
  dlock_permits *p = NULL;
  dlock_permit_id id, id2;
  char msg[512] = "";
  int rc = dlock_permits_new(c, name, NULL, &p);
  if (rc != DLOCK_OK)
    snprintf(msg, sizeof msg, "%s", dlock_errmsg());
  STEP(rc, msg, dlock_permits_try_set_permits(p, 1, KEYS_TTL_MS, NULL));
  STEP(rc, msg, dlock_permits_acquire(p, 1, 0, 1000, &id));
  STEP(rc, msg, times_out(dlock_permits_acquire(p, 1, 200, 1000, &id2)));
  STEP(rc, msg, dlock_permits_release(p, &id, 1)); /* publishes */
  report(r, "expirable-permit semaphore: set, acquire, wait for a permit "
            "(subscribe), release (publish)", rc, msg);
  dlock_permits_free(p);
}

static void check_list(run *r, dlock_client *c, const char *base) {
  char pattern[160], msg[512] = "";
  snprintf(pattern, sizeof pattern, "%s:*", base);
  uint64_t cursor = 0;
  dlock_listing *page = NULL;
  int rc = dlock_list(c, pattern, &cursor, 100, &page);
  if (rc != DLOCK_OK)
    snprintf(msg, sizeof msg, "%s", dlock_errmsg());
  dlock_listing_free(page);
  report(r, "dlock list: SCAN", rc, msg);
}

/* A server whose maxmemory-policy may evict keys can drop a held lock's
 * key (it has a TTL, so volatile-* as well as allkeys-*): a failure
 * (DLOCK_ECONFIG, exit 78) naming the policy and what to set. */
static void check_memory(run *r, dlock_client *c) {
  dlock_server_memory m;
  char msg[512] = "", what[200];
  int rc = dlock_memory_check(c, &m);
  if (rc != DLOCK_OK) {
    snprintf(msg, sizeof msg, "%s", dlock_errmsg());
    report(r, "server memory: INFO memory", rc, msg);
    return;
  }
  if (m.evicts) {
    snprintf(msg, sizeof msg,
             "maxmemory-policy %s with maxmemory %llu bytes (%llu used) can "
             "evict a held lock's key: its holder learns it at its next "
             "renewal, and another owner may take the lock meanwhile; set "
             "maxmemory-policy noeviction (docs/operations.md)",
             m.policy, m.maxmemory, m.used);
    report(r, "server memory: no lock key can be evicted", DLOCK_ECONFIG, msg);
    return;
  }
  if (m.maxmemory == 0 && strcmp(m.policy, "noeviction") != 0)
    snprintf(what, sizeof what, "server memory: no maxmemory, nothing is "
             "evicted (but maxmemory-policy %s would evict lock keys once "
             "one is set)", m.policy);
  else if (m.maxmemory == 0)
    snprintf(what, sizeof what, "server memory: no maxmemory, nothing is "
             "evicted");
  else
    snprintf(what, sizeof what, "server memory: maxmemory-policy %s (a full "
             "server refuses writes, dlock retries them; no key is evicted)",
             m.policy);
  report(r, what, DLOCK_OK, "");
}

/* Use every primitive through c on throw-away names, uncontended and
 * contended, and SCAN as `dlock list` does; one line each on out, and for
 * an ACL refusal the permission missing. replica_guard: c was opened with
 * replica_sync_ms (its lock writes send WAIT); durable: with durable_ms
 * (they send WAITAOF). DLOCK_OK when all passed, else the first failure's
 * code. */
static int check_all(dlock_client *c, FILE *out, int replica_guard,
                     int durable) {
  char base[96], name[128];
  snprintf(base, sizeof base, "dlock-check:%ld:%ld", (long)getpid(),
           (long)time(NULL));
  run r = {out, 0, DLOCK_OK, 0, 0};
  if (replica_guard)
    fprintf(out, "(the replica guard is on: every lock write below also "
                 "sends WAIT)\n");
  if (durable)
    fprintf(out, "(durable grants are on: every lock write below also sends "
                 "WAITAOF)\n");
  for (const char *const *k = dlock_kinds(); *k; k++) {
    snprintf(name, sizeof name, "%s:%s", base, *k);
    check_kind(&r, c, name, *k);
  }
  snprintf(name, sizeof name, "%s:rw", base);
  check_rwlock(&r, c, name);
  snprintf(name, sizeof name, "%s:latch", base);
  check_latch(&r, c, name);
  snprintf(name, sizeof name, "%s:sem", base);
  check_semaphore(&r, c, name);
  snprintf(name, sizeof name, "%s:permits", base);
  check_permits(&r, c, name);
  check_list(&r, c, base);
  check_memory(&r, c);
  if (r.pubsub_refused)
    fprintf(out, "(without pub/sub only the spin lock works: `dlock run "
                 "--spin`; the lock, fair lock, read-write lock, latch and "
                 "semaphores wait and release through pub/sub)\n");
  if (r.failed)
    fprintf(out, "dlock check: %d of %d failed (the permissions dlock needs: "
                 "docs/security.md)\n", r.failed, r.failed + r.passed);
  else
    fprintf(out, "dlock check: all %d passed\n", r.passed);
  return r.first_rc;
}

static void check_help(void) {
  printf("usage: dlock check [--replica-sync D] [--durable D "
         "[--durable-replicas N]]\n"
         "Use every kind of lock, latch and semaphore on throw-away names with\n"
         "the configured URL and credentials, uncontended and contended (a\n"
         "second owner waits, so it subscribes, and is handed the object, so\n"
         "the release publishes to it), and SCAN as `dlock list` does; print\n"
         "what worked. A missing ACL permission shows as a failure naming it\n"
         "(exit 77). --replica-sync D: with the replica guard on, as `run\n"
         "--replica-sync D` uses it (every lock write also sends WAIT).\n"
         "--durable D: with durable grants, as `run --durable D` (every lock\n"
         "write also sends WAITAOF; a server that cannot is refused, exit\n"
         "78). A maxmemory-policy that can evict a lock's key fails too\n"
         "(exit 78). Keys it makes are deleted or expire within ten seconds.\n");
}

int cmd_check(int argc, char **argv) {
  const char *sync = NULL, *durable = NULL, *replicas = NULL;
  int i, status;
  const cli_opt opts[] = {{"--replica-sync", CLI_TEXT, &sync, 0},
                          {"--durable", CLI_TEXT, &durable, 0},
                          {"--durable-replicas", CLI_TEXT, &replicas, 0},
                          {NULL, 0, NULL, 0}};
  if ((status = cli_options("check", argc, argv, opts, check_help, 1, &i)) != 0)
    return status < 0 ? 0 : status;
  if (i < argc)
    return cli_usage_error("check: takes no arguments");
  if ((sync && (status = cli_ack_option("--replica-sync", sync)) != 0) ||
      (durable && (status = cli_ack_option("--durable", durable)) != 0) ||
      (replicas && (status = cli_ack_option("--durable-replicas", replicas)) != 0) ||
      (status = cli_ack_opts_check()) != 0)
    return status;
  dlock_client *c = NULL;
  if ((status = cli_open_first(&c)) != 0)
    return status;
  int rc = check_all(c, stdout, cli.replica_sync_ms > 0, cli.durable_ms > 0);
  dlock_client_close(c);
  if (rc == DLOCK_OK)
    return 0;
  return rc == DLOCK_EPERM ? EXIT_NOPERM
         : rc == DLOCK_EAUTH || rc == DLOCK_ETLS || rc == DLOCK_ECONFIG
             ? EXIT_CONFIG
             : EXIT_SOFTWARE;
}
