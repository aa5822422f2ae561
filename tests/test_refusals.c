/* Passing refusals: a server that is loading its data (LOADING), running a
 * script past its limit (BUSY), short of the replicas min-replicas-to-write
 * asks (NOREPLICAS), a replica that lost its master (MASTERDOWN), or at its
 * maxmemory with a policy that refuses writes (OOM) did
 * not run the call, and will run it once that state passes. dlock sends it
 * again within the call's budget (the command timeout for one try, the
 * wait for a waiting acquire) and, when the budget runs out, fails with
 * DLOCK_EIO, the server's words and what to check; the lock stays free. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* The command timeout of the suite's clients: a single try gives up on a
 * refusing server after this long. */
#define CMD_TIMEOUT_MS 300

typedef int lock_new_fn(dlock_client *, const char *, const dlock_lock_opts *,
                        dlock_lock **);

static dlock_client *client_of(th_server *s) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.command_timeout_ms = CMD_TIMEOUT_MS;
  return th_client(s, &o);
}

/* INFO errorstats: how many times s answered the error code (-1: INFO not
 * answered). */
static long long errorstat(th_server *s, const char *code) {
  char field[64];
  snprintf(field, sizeof field, "errorstat_%s:count=", code);
  return th_info(s, "errorstats", field);
}

/* The event "the server refused a call at least n more times than
 * before", asked every 5 ms for 5 s at most. */
static int refused_again(th_server *s, const char *code, long long before,
                         long long n) {
  for (int64_t end = th_now_ms() + 5000; th_now_ms() < end; usleep(5000))
    if (errorstat(s, code) >= before + n)
      return 1;
  return 0;
}

/* A single try on the refusing server: DLOCK_EIO once the command timeout
 * is spent (several sends: the server saw them), naming the server's code
 * and what to check; nothing held. */
static void single_try_refused(th_server *s, dlock_client *c, const char *name,
                               const char *code, const char *advice,
                               int count_errors) {
  dlock_lock *l;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  long long before = count_errors ? errorstat(s, code) : 0;
  int64_t t = th_now_ms();
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EIO);
  int64_t took = th_now_ms() - t;
  const char *msg = dlock_errmsg();
  CU_ASSERT(strstr(msg, code) != NULL);
  CU_ASSERT(strstr(msg, advice) != NULL);
  if (strstr(msg, code) == NULL || strstr(msg, advice) == NULL)
    fprintf(stderr, "\n  refusal message: %s\n", msg);
  /* sent again within the command timeout, not given up at once */
  CU_ASSERT(took >= CMD_TIMEOUT_MS / 2);
  CU_ASSERT(took < 5 * CMD_TIMEOUT_MS + 2000);
  if (count_errors)
    CU_ASSERT(errorstat(s, code) >= before + 2);
  dlock_lock_free(l);
}

/* A waiting acquire on the refusing server, started now: th_acquirer_join
 * tells how it ended (it releases a grant at once). */
static void start_waiter(th_acquirer *a, dlock_client *c, const char *name) {
  memset(a, 0, sizeof *a);
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &a->lock), DLOCK_OK);
  a->wait_ms = 20000;
  a->lease_ms = 30000;
  th_acquirer_start(a);
}

/* The waiter succeeds once the state passed (at passed_ms): within the
 * longest pause (1 s) and a command timeout. Measured on this 2-core
 * machine, 5 runs, idle and beside two `yes > /dev/null` hogs alike: 0-104
 * ms; bound 4 s (38x headroom). */
static void waiter_gets_it(th_acquirer *a, int64_t passed_ms) {
  th_acquirer_join(a);
  TH_ASSERT_RC(a->rc, DLOCK_OK);
  CU_ASSERT(a->got_ms - passed_ms < 4000);
  fprintf(stderr, "\n  acquired %lld ms after the state passed",
          (long long)(a->got_ms - passed_ms));
  dlock_lock_free(a->lock);
}

static void outcome_start(th_outcome *o, dlock_lock *l, int64_t wait_ms) {
  *o = (th_outcome)TH_OUTCOME_INIT;
  TH_ASSERT_RC(dlock_acquire_async(l, 7, wait_ms, 30000, th_outcome_done, o,
                                   NULL), DLOCK_OK);
}

static void test_noreplicas(void) {
  th_server s;
  CU_ASSERT_FATAL(th_server_start(&s, "--min-replicas-to-write 1") == 0);
  dlock_client *c = client_of(&s);
  const char *name = th_name("noreplicas");
  single_try_refused(&s, c, name, "NOREPLICAS", "min-replicas-to-write", 1);
  CU_ASSERT_EQUAL(th_int(&s, "EXISTS %s", name), 0);
  /* a waiting acquire rides the refusals out and gets the lock once the
   * server takes writes again */
  long long before = errorstat(&s, "NOREPLICAS");
  th_acquirer a;
  start_waiter(&a, c, name);
  CU_ASSERT(refused_again(&s, "NOREPLICAS", before, 3));
  redisReply *r = th_cmd(&s, "CONFIG SET min-replicas-to-write 0");
  if (r)
    freeReplyObject(r);
  waiter_gets_it(&a, th_now_ms());

  /* the same through the async API: a single try fails with the words, a
   * waiting one gets the lock once the writes are taken again */
  r = th_cmd(&s, "CONFIG SET min-replicas-to-write 1");
  if (r)
    freeReplyObject(r);
  dlock_lock *l;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  th_outcome o;
  outcome_start(&o, l, 0);
  TH_ASSERT_RC(th_outcome_wait(&o, 10000), DLOCK_EIO);
  CU_ASSERT(strstr(o.msg, "min-replicas-to-write") != NULL);
  before = errorstat(&s, "NOREPLICAS");
  outcome_start(&o, l, 20000);
  CU_ASSERT(refused_again(&s, "NOREPLICAS", before, 3));
  r = th_cmd(&s, "CONFIG SET min-replicas-to-write 0");
  if (r)
    freeReplyObject(r);
  TH_ASSERT_RC(th_outcome_wait(&o, 10000), DLOCK_OK);
  dlock_lock_bind_owner(l, 7);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);

  /* the tool: a server that cannot be used for now exits 69, not 70 */
  r = th_cmd(&s, "CONFIG SET min-replicas-to-write 1");
  if (r)
    freeReplyObject(r);
  char args[400], out[2048];
  snprintf(args, sizeof args, "--redis %s run --wait 0 %s -- true 2>&1", s.url, name);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 69);
  CU_ASSERT(strstr(out, "min-replicas-to-write") != NULL);
  dlock_client_close(c);
  th_server_stop(&s);
}

/* A restarted server answers LOADING while it reads its data: made slow
 * (1 ms a key, 2,000 keys) so the state lasts about 2 s. */
static void test_loading(void) {
  th_server s;
  CU_ASSERT_FATAL(th_server_start(&s, NULL) == 0);
  redisReply *r = th_cmd(&s, "DEBUG POPULATE 2000");
  if (r)
    freeReplyObject(r);
  r = th_cmd(&s, "SAVE");
  CU_ASSERT_FATAL(r != NULL && r->type == REDIS_REPLY_STATUS);
  freeReplyObject(r);
  dlock_client *c = client_of(&s);
  const char *name = th_name("loading");
  th_server_kill(&s);
  snprintf(s.extra, sizeof s.extra, "--key-load-delay "
           "1000 --loading-process-events-interval-bytes 1024");
  CU_ASSERT_FATAL(th_server_restart_loading(&s) == 0);
  single_try_refused(&s, c, name, "LOADING", "loading its data", 1);
  long long before = errorstat(&s, "LOADING");
  th_acquirer a;
  start_waiter(&a, c, name);
  CU_ASSERT(refused_again(&s, "LOADING", before, 2));
  /* the event: the server has loaded (PING answers) */
  int64_t loaded = 0;
  for (int64_t end = th_now_ms() + 20000; th_now_ms() < end && !loaded;
       usleep(5000)) {
    r = th_cmd(&s, "PING");
    if (r && r->type == REDIS_REPLY_STATUS)
      loaded = th_now_ms();
    if (r)
      freeReplyObject(r);
  }
  CU_ASSERT_FATAL(loaded > 0);
  waiter_gets_it(&a, loaded);
  /* released: the keys only, once the unlock latch's DEL is in (it goes
   * with the connection's next call, or within 50 ms when it is idle) */
  long long keys = -1;
  for (int i = 0; i < 500 && (keys = th_int(&s, "DBSIZE")) != 2000; i++)
    usleep(2000);
  CU_ASSERT_EQUAL(keys, 2000);
  dlock_client_close(c);
  th_server_stop(&s);
}

/* A script that never ends, run on a connection of its own. */
typedef struct spinner {
  th_server *s;
  pthread_t thread;
} spinner;

static void *spin(void *arg) {
  spinner *sp = arg;
  redisReply *r = th_cmd(sp->s, "EVAL %s 0", "while true do end");
  if (r) /* the error SCRIPT KILL made */
    freeReplyObject(r);
  return NULL;
}

/* The server answers BUSY (to anything but SCRIPT KILL and the like). */
static int server_busy(th_server *s) {
  for (int64_t end = th_now_ms() + 5000; th_now_ms() < end; usleep(5000)) {
    redisReply *r = th_cmd(s, "PING");
    int busy = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSY", 4) == 0;
    if (r)
      freeReplyObject(r);
    if (busy)
      return 1;
  }
  return 0;
}

static void test_busy_script(void) {
  th_server s;
  CU_ASSERT_FATAL(th_server_start(&s, "--busy-reply-threshold 100") == 0);
  dlock_client *c = client_of(&s);
  const char *name = th_name("busy");
  dlock_lock *warm; /* the scripts loaded and the connections made */
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &warm), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(warm, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(warm), DLOCK_OK);
  dlock_lock_free(warm);
  spinner sp = {.s = &s};
  CU_ASSERT_FATAL(pthread_create(&sp.thread, NULL, spin, &sp) == 0);
  CU_ASSERT_FATAL(server_busy(&s));
  /* INFO is refused while the script runs: the client's own count of
   * commands sent shows the resends */
  single_try_refused(&s, c, name, "BUSY", "SCRIPT KILL", 0);
  th_acquirer a;
  start_waiter(&a, c, name);
  uint64_t sent = th_commands(c);
  for (int64_t end = th_now_ms() + 5000;
       th_now_ms() < end && th_commands(c) < sent + 3;)
    usleep(5000);
  CU_ASSERT(th_commands(c) >= sent + 3);
  redisReply *r = th_cmd(&s, "SCRIPT KILL");
  CU_ASSERT(r != NULL && r->type == REDIS_REPLY_STATUS);
  if (r)
    freeReplyObject(r);
  waiter_gets_it(&a, th_now_ms());
  pthread_join(sp.thread, NULL);
  CU_ASSERT_EQUAL(th_int(&s, "EXISTS %s", name), 0);
  dlock_client_close(c);
  th_server_stop(&s);
}

/* A replica whose master is gone, with replica-serve-stale-data no,
 * refuses everything but a few commands until its master is back. */
static void test_masterdown(void) {
  th_server m, r;
  CU_ASSERT_FATAL(th_server_start(&m, NULL) == 0);
  char extra[128];
  snprintf(extra, sizeof extra, "--replicaof 127.0.0.1 %d", m.port);
  CU_ASSERT_FATAL(th_server_start(&r, extra) == 0);
  CU_ASSERT_FATAL(th_replica_synced(&r, 10000));
  dlock_client *c = client_of(&r); /* a new client's PING would be refused */
  redisReply *reply = th_cmd(&r, "CONFIG SET replica-serve-stale-data no");
  if (reply) /* set now: PING is refused too while it syncs */
    freeReplyObject(reply);
  th_server_kill(&m);
  const char *name = th_name("masterdown");
  single_try_refused(&r, c, name, "MASTERDOWN", "replica that lost its master", 1);
  dlock_client_close(c);
  th_server_stop(&r);
  th_server_stop(&m);
}

/* A server at its maxmemory whose policy refuses writes (noeviction): a
 * script's first write that may need memory is refused with OOM, nothing
 * written. It passes once memory is freed or maxmemory raised: a single
 * try fails with DLOCK_EIO naming maxmemory, a waiting acquire gets the
 * lock once the server takes writes again, releases land on the full
 * server at once (their first write expires or deletes: a full server
 * must not keep a lock its holder let go), and the tool exits 69, not 70
 * with a script's hash. maxmemory 1 stands for a full server (every write
 * that may need memory refused at once). */
static void set_maxmemory(th_server *s, const char *v) {
  redisReply *r = th_cmd(s, "CONFIG SET maxmemory %s", v);
  if (r)
    freeReplyObject(r);
}

static void test_oom(void) {
  th_server s;
  CU_ASSERT_FATAL(th_server_start(&s, "--maxmemory-policy noeviction") == 0);
  dlock_client *c = client_of(&s);
  const char *name = th_name("oom");
  set_maxmemory(&s, "1");
  single_try_refused(&s, c, name, "OOM", "maxmemory", 1);
  CU_ASSERT(strstr(dlock_errmsg(), "script:") == NULL);
  CU_ASSERT_EQUAL(th_int(&s, "EXISTS %s", name), 0);
  long long before = errorstat(&s, "OOM");
  th_acquirer a;
  start_waiter(&a, c, name);
  CU_ASSERT(refused_again(&s, "OOM", before, 3));
  set_maxmemory(&s, "0");
  waiter_gets_it(&a, th_now_ms());

  /* releases on the full server land at once, none refused: a re-entered
   * hold's first (it expires the key before its count goes down), then
   * the last (it deletes), for a lock, a fair lock and both halves of a
   * read-write lock */
  dlock_client *c2 = client_of(&s);
  lock_new_fn *const kinds[] = {dlock_reentrant_lock_new, dlock_fair_lock_new,
                                dlock_write_lock_new, dlock_read_lock_new};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    char n[160];
    snprintf(n, sizeof n, "%s:%zu", name, k);
    dlock_lock *l;
    TH_ASSERT_RC(kinds[k](c2, n, NULL, &l), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
    set_maxmemory(&s, "1");
    long long refusals = errorstat(&s, "OOM");
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    CU_ASSERT_EQUAL(th_int(&s, "EXISTS %s", n), 1); /* one hold left */
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    CU_ASSERT_EQUAL(th_int(&s, "EXISTS %s", n), 0);
    CU_ASSERT_EQUAL(errorstat(&s, "OOM"), refusals);
    set_maxmemory(&s, "0");
    dlock_lock_free(l);
  }

  /* the tool: 69 and the words, not 70 and a script's hash */
  set_maxmemory(&s, "1");
  char args[400], out[2048];
  snprintf(args, sizeof args, "--redis %s run --wait 0 %s -- true 2>&1", s.url, name);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 69);
  CU_ASSERT(strstr(out, "maxmemory") != NULL);
  CU_ASSERT(strstr(out, "script:") == NULL);
  set_maxmemory(&s, "0");
  dlock_client_close(c2);
  dlock_client_close(c);
  th_server_stop(&s);
}

/* A server that evicts keys at its maxmemory: a lock's key carries a TTL,
 * so volatile-lru picks it (filler keys without a TTL are never picked).
 * `dlock check` fails on such a server (78), naming the policy and what to
 * set; a holder with the watchdog is told its loss at its next renewal:
 * the lost callback, DLOCK_ELOST from its release, and `dlock run` sends
 * COMMAND its signal and exits 76. Bound: one renewal interval (1 s: a
 * 3 s watchdog) after the eviction, plus EVICT_SLACK_MS; measured with two
 * CPU hogs (`yes > /dev/null` x2), Redis and Valkey, 4 runs: at most
 * 970 ms (the callback) and 987 ms (the tool) of the 1,400 allowed. */
#define EVICT_WATCHDOG_MS 3000
#define EVICT_SLACK_MS 400

typedef struct evict_run {
  th_server *s;
  const char *name;
  int status;
  int64_t ended_ms;
} evict_run;

static int run_until_lost(void *arg) {
  evict_run *r = arg;
  char args[512], out[2048];
  snprintf(args, sizeof args, "--redis %s run --watchdog 3s %s -- sleep 30 2>&1",
           r->s->url, r->name);
  r->status = th_dlock_output(args, out, sizeof out);
  r->ended_ms = th_now_ms();
  if (r->status != 76)
    fprintf(stderr, "\n  dlock run: exit %d: %s", r->status, out);
  return r->status;
}

static void test_evicted(void) {
  th_server s;
  CU_ASSERT_FATAL(th_server_start(&s, "--maxmemory-policy volatile-lru") == 0);
  char out[16384], args[400];
  /* no maxmemory: nothing is evicted yet, check passes (and notes it) */
  snprintf(args, sizeof args, "--redis %s check 2>&1", s.url);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "ok    server memory: no maxmemory") != NULL);
  CU_ASSERT(strstr(out, "volatile-lru") != NULL);
  set_maxmemory(&s, "1gb");
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 78);
  CU_ASSERT(strstr(out, "FAIL  server memory") != NULL);
  CU_ASSERT(strstr(out, "volatile-lru") != NULL);
  CU_ASSERT(strstr(out, "maxmemory-policy noeviction") != NULL);
  set_maxmemory(&s, "0");

  th_lost_log log;
  dlock_client *c = th_watchdog_client(&s, &log, EVICT_WATCHDOG_MS);
  const char *name = th_name("evicted");
  char cli_name[256];
  snprintf(cli_name, sizeof cli_name, "%s:cli", name);
  dlock_lock *l;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, -1), DLOCK_OK);
  evict_run run = {&s, cli_name, -1, 0};
  th_elsewhere_call e;
  th_elsewhere_start(&e, run_until_lost, &run);
  int held = 0;
  for (int64_t end = th_now_ms() + 10000; !held && th_now_ms() < end; usleep(2000))
    held = th_int(&s, "EXISTS %s", cli_name) == 1;
  CU_ASSERT_FATAL(held);

  /* fill: 64 KiB values without a TTL, one at a time, until both lock
   * keys were evicted; the time of the SET that evicted each */
  char maxmem[32];
  snprintf(maxmem, sizeof maxmem, "%lld", th_info(&s, "memory", "used_memory:") + (2 << 20));
  set_maxmemory(&s, maxmem);
  static char junk[65536];
  memset(junk, 'x', sizeof junk);
  int64_t evicted_ms = 0, cli_evicted_ms = 0;
  for (int i = 0; i < 400 && (!evicted_ms || !cli_evicted_ms); i++) {
    redisReply *r = th_cmd(&s, "SET %s:junk:%d %b", name, i, junk, sizeof junk);
    if (r)
      freeReplyObject(r);
    if (!evicted_ms && th_int(&s, "EXISTS %s", name) == 0)
      evicted_ms = th_now_ms();
    if (!cli_evicted_ms && th_int(&s, "EXISTS %s", cli_name) == 0)
      cli_evicted_ms = th_now_ms();
  }
  CU_ASSERT_FATAL(evicted_ms > 0 && cli_evicted_ms > 0);
  int64_t bound = EVICT_WATCHDOG_MS / 3 + EVICT_SLACK_MS;
  CU_ASSERT_EQUAL(th_lost_wait(&log, 1, (int)bound + 2000), 1);
  int64_t told_ms = th_now_ms();
  CU_ASSERT_EQUAL(th_elsewhere_join(&e), 76);
  fprintf(stderr, "\n  evicted -> told: callback %lld ms, dlock run %lld ms "
                  "(bound %lld)\n", (long long)(told_ms - evicted_ms),
          (long long)(run.ended_ms - cli_evicted_ms), (long long)bound);
  CU_ASSERT(told_ms - evicted_ms <= bound);
  CU_ASSERT(run.ended_ms - cli_evicted_ms <= bound);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST);
  dlock_lock_free(l);
  dlock_client_close(c);
  th_server_stop(&s);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("refusals", NULL, NULL);
  CU_add_test(s, "noreplicas", test_noreplicas);
  CU_add_test(s, "loading", test_loading);
  CU_add_test(s, "busy_script", test_busy_script);
  CU_add_test(s, "masterdown", test_masterdown);
  CU_add_test(s, "oom", test_oom);
  CU_add_test(s, "evicted", test_evicted);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
