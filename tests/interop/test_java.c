/* dlock beside a running Java Redisson client (issue 57): the newest 3.x
 * and 4.x that Maven Central serves, each one long-lived JVM
 * (tests/interop/java, built by scripts/setup; the suite runs offline).
 * Every case runs against both versions, on one server: the lock both
 * ways, wake-ups both ways (p50 within 50 ms), both watchdogs, forced
 * unlocks told, one fair queue of C and Java waiters, the fenced lock's
 * one token sequence, the spin lock, the non-reentrant lock (4.x), the
 * read-write lock, the latch, the semaphore and the expirable-permit
 * semaphore. Plain build only (docs/testing.md). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "java_peer.h"

static th_server srv;
static dlock_client *cl;
static jpeer peers[2];

static int suite_init(void) {
  if (th_suite_open(&srv, &cl) != 0)
    return 1;
  for (int v = 0; v < 2; v++)
    if (jp_start(&peers[v], jp_versions[v], srv.url, 0) != 0)
      return 1;
  printf("\n(Redisson %s and %s)\n", peers[0].version, peers[1].version);
  return 0;
}

static int suite_clean(void) {
  for (int v = 0; v < 2; v++)
    jp_stop(&peers[v]);
  return th_suite_close(&srv, cl);
}

/* A name for version v's case (a th_name, copied). */
static const char *vname(char *buf, size_t n, const char *base, int v) {
  snprintf(buf, n, "%s:r%d", th_name(base), v == 0 ? 3 : 4);
  return buf;
}

#define EXPECT_ANSWER(got, want)                                              \
  do {                                                                        \
    const char *got_ = (got);                                                 \
    if (strcmp(got_, want) != 0)                                              \
      fprintf(stderr, "\n  %s:%d: Java answered \"%s\", want \"%s\"\n",       \
              __FILE__, __LINE__, got_, want);                                \
    CU_ASSERT_STRING_EQUAL(got_, want);                                       \
  } while (0)

/* ---- the reentrant lock --------------------------------------------------- */

/* Exclusion both ways: a Java holder refuses dlock, a dlock holder refuses
 * Java, each release lets the other in. */
static void test_lock_both_ways(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "lock", v);
    dlock_lock *l;
    TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &l), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "trylock reentrant %s 0 -1", name), "true");
    TH_ASSERT_RC(dlock_try_acquire(l, 30000), DLOCK_EBUSY);
    EXPECT_ANSWER(jp_call(p, "a", "trylock reentrant %s 0 -1", name), "true"); /* re-entry */
    EXPECT_ANSWER(jp_call(p, "a", "unlock reentrant %s", name), "ok");
    TH_ASSERT_RC(dlock_try_acquire(l, 30000), DLOCK_EBUSY); /* held once more */
    EXPECT_ANSWER(jp_call(p, "a", "unlock reentrant %s", name), "ok");
    TH_ASSERT_RC(dlock_try_acquire(l, 30000), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "b", "trylock reentrant %s 0 -1", name), "false");
    /* Java cannot release dlock's hold */
    const char *un = jp_call(p, "b", "unlock reentrant %s", name);
    CU_ASSERT(strncmp(un, "error IllegalMonitorStateException", 34) == 0);
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "b", "trylock reentrant %s 0 -1", name), "true");
    EXPECT_ANSWER(jp_call(p, "b", "unlock reentrant %s", name), "ok");
    CU_ASSERT_EQUAL(th_int(th_node_of(&srv, name), "EXISTS %s", name), 0);
    dlock_lock_free(l);
  }
}

static int cmp_ll(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

enum { ROUNDS = 15 };

/* A dlock waiter woken by Java's unlock and a Java waiter woken by dlock's
 * release: from the release's start to the grant, p50 within 50 ms each
 * way (measured 1-3 ms both ways, quiet and beside two CPU hogs). */
static void test_wakeups(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256], channel[300];
    vname(name, sizeof name, "wake", v);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    dlock_lock *l;
    TH_ASSERT_RC(dlock_reentrant_lock_new(cl, name, NULL, &l), DLOCK_OK);
    long long c_woken[ROUNDS], j_woken[ROUNDS];
    int nc = 0, nj = 0;
    for (int i = 0; i < ROUNDS; i++) {
      /* Java holds, dlock waits */
      EXPECT_ANSWER(jp_call(p, "a", "trylock reentrant %s 0 -1", name), "true");
      th_acquirer a = {.lock = l, .wait_ms = 10000, .lease_ms = 30000};
      th_acquirer_start(&a);
      CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
      int64_t t0 = th_now_ms();
      EXPECT_ANSWER(jp_call(p, "a", "unlock reentrant %s", name), "ok");
      th_acquirer_join(&a);
      CU_ASSERT_EQUAL(a.rc, DLOCK_OK);
      if (a.rc == DLOCK_OK)
        c_woken[nc++] = a.got_ms - t0;
      CU_ASSERT(th_wait_numsub(&srv, channel, 0, 5000));
      /* dlock holds, Java waits */
      TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
      int id = jp_send(p, "b", "trylock reentrant %s 10000 -1", name);
      CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
      t0 = th_now_ms();
      TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
      char got[64];
      CU_ASSERT_EQUAL(jp_wait(p, id, 15000, got, sizeof got), 0);
      int64_t t1 = th_now_ms();
      CU_ASSERT_STRING_EQUAL(got, "true");
      if (strcmp(got, "true") == 0)
        j_woken[nj++] = t1 - t0;
      EXPECT_ANSWER(jp_call(p, "b", "unlock reentrant %s", name), "ok");
      CU_ASSERT(th_wait_numsub(&srv, channel, 0, 5000));
    }
    CU_ASSERT_FATAL(nc > 0 && nj > 0);
    qsort(c_woken, (size_t)nc, sizeof c_woken[0], cmp_ll);
    qsort(j_woken, (size_t)nj, sizeof j_woken[0], cmp_ll);
    printf("\n    Redisson %s: dlock woken by Java p50 %lld ms (max %lld), "
           "Java woken by dlock p50 %lld ms (max %lld) [bound 50] ",
           p->version, c_woken[nc / 2], c_woken[nc - 1], j_woken[nj / 2],
           j_woken[nj - 1]);
    CU_ASSERT(c_woken[nc / 2] <= 50);
    CU_ASSERT(j_woken[nj / 2] <= 50);
    dlock_lock_free(l);
  }
}

/* Both watchdogs keep a hold past its lease (1.2 s each side): after
 * 2.5 s the hold is there, renewed, and the other side is refused. */
static void test_watchdogs(void) {
  for (int v = 0; v < 2; v++) {
    jpeer w;
    CU_ASSERT_FATAL(jp_start(&w, jp_versions[v], srv.url, 1200) == 0);
    char name[256];
    vname(name, sizeof name, "watchdog", v);
    th_lost_log lost;
    dlock_client *c = th_watchdog_client(&srv, &lost, 1200);
    dlock_lock *l;
    TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
    /* Java's */
    EXPECT_ANSWER(jp_call(&w, "a", "trylock reentrant %s 0 -1", name), "true");
    int64_t t0 = th_now_ms();
    while (th_now_ms() - t0 < 2500 && th_int(th_node_of(&srv, name), "EXISTS %s", name) == 1)
      usleep(50000);
    CU_ASSERT(th_pttl_rises(th_node_of(&srv, name), name, 2000));
    CU_ASSERT_EQUAL(th_int(th_node_of(&srv, name), "EXISTS %s", name), 1);
    TH_ASSERT_RC(dlock_try_acquire(l, DLOCK_LEASE_WATCHDOG), DLOCK_EBUSY);
    EXPECT_ANSWER(jp_call(&w, "a", "unlock reentrant %s", name), "ok");
    /* dlock's */
    TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
    t0 = th_now_ms();
    while (th_now_ms() - t0 < 2500 && th_int(th_node_of(&srv, name), "EXISTS %s", name) == 1)
      usleep(50000);
    CU_ASSERT(th_pttl_rises(th_node_of(&srv, name), name, 2000));
    EXPECT_ANSWER(jp_call(&w, "b", "trylock reentrant %s 0 -1", name), "false");
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    CU_ASSERT_EQUAL(th_lost_count(&lost), 0);
    dlock_lock_free(l);
    dlock_client_close(c);
    jp_stop(&w);
  }
}

/* A forced unlock from either side tells the other: dlock's holder gets
 * its lost callback (and DLOCK_ELOST), Java's no longer holds. */
static void test_force_unlock_told(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "force", v);
    th_lost_log lost;
    dlock_client *c = th_watchdog_client(&srv, &lost, 900);
    dlock_lock *l;
    TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "forceunlock reentrant %s", name), "true");
    CU_ASSERT_EQUAL(th_lost_wait(&lost, 1, 5000), 1); /* its next renewal */
    TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST);
    EXPECT_ANSWER(jp_call(p, "a", "trylock reentrant %s 0 -1", name), "true");
    int released = 0;
    TH_ASSERT_RC(dlock_force_release(l, &released), DLOCK_OK);
    CU_ASSERT_EQUAL(released, 1);
    EXPECT_ANSWER(jp_call(p, "a", "held reentrant %s", name), "false");
    const char *un = jp_call(p, "a", "unlock reentrant %s", name);
    CU_ASSERT(strncmp(un, "error IllegalMonitorStateException", 34) == 0);
    dlock_lock_free(l);
    dlock_client_close(c);
  }
}

/* ---- the fair lock ------------------------------------------------------------ */

static long long queue_len(const char *name) {
  return th_int(th_node_of(&srv, name), "LLEN redisson_lock_queue:{%s}", name);
}

static int queued(const char *name, long long want) {
  for (int64_t end = th_now_ms() + 10000; th_now_ms() < end; usleep(2000))
    if (queue_len(name) == want)
      return 1;
  return 0;
}

/* One queue of Java and dlock waiters, granted in arrival order: behind a
 * dlock holder, Java's J1, dlock's C1, Java's J2 queue in turn; each
 * release grants the next in line. */
static void test_fair_queue(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "fair", v);
    dlock_lock *holder, *c1;
    TH_ASSERT_RC(dlock_fair_lock_new(cl, name, NULL, &holder), DLOCK_OK);
    TH_ASSERT_RC(dlock_fair_lock_new(cl, name, NULL, &c1), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(holder, 0, 30000), DLOCK_OK);
    int j1 = jp_send(p, "b", "trylock fair %s 20000 -1", name);
    CU_ASSERT(queued(name, 1));
    th_acquirer a = {.lock = c1, .wait_ms = 20000, .lease_ms = 30000};
    th_acquirer_start(&a);
    CU_ASSERT(queued(name, 2));
    int j2 = jp_send(p, "c", "trylock fair %s 20000 -1", name);
    CU_ASSERT(queued(name, 3));
    TH_ASSERT_RC(dlock_release(holder), DLOCK_OK);
    char got[64];
    CU_ASSERT_EQUAL(jp_wait(p, j1, 15000, got, sizeof got), 0);
    CU_ASSERT_STRING_EQUAL(got, "true"); /* J1 first */
    int64_t j1_unlock = th_now_ms();
    EXPECT_ANSWER(jp_call(p, "b", "unlock fair %s", name), "ok");
    th_acquirer_join(&a); /* then C1 (its release at once lets J2 in) */
    CU_ASSERT_EQUAL(a.rc, DLOCK_OK);
    CU_ASSERT(a.got_ms >= j1_unlock);
    CU_ASSERT_EQUAL(jp_wait(p, j2, 15000, got, sizeof got), 0);
    CU_ASSERT_STRING_EQUAL(got, "true"); /* J2 last */
    EXPECT_ANSWER(jp_call(p, "c", "unlock fair %s", name), "ok");
    CU_ASSERT_EQUAL(queue_len(name), 0);
    dlock_lock_free(holder);
    dlock_lock_free(c1);
  }
}

/* A dead waiter of either side is skipped by the other within the fair
 * lock's thread wait time (2 s on both sides here: every client of one
 * fair lock uses the same value, docs/fair.md). A Java waiter is killed
 * (SIGKILL of its JVM) and a dlock waiter behind it gets the lock; a dlock
 * waiter (a worker process) is killed and a Java waiter behind it does. */
enum { FAIR_WAIT_MS = 2000 };

static dlock_lock *fair_lock(dlock_client *c, const char *name) {
  dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
  o.thread_wait_ms = FAIR_WAIT_MS;
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_fair_lock_new(c, name, &o, &l), DLOCK_OK);
  return l;
}

/* The worker: "fairwait URL NAME" waits on the fair lock NAME until killed. */
static int worker(int argc, char **argv) {
  if (argc != 3 || strcmp(argv[0], "fairwait") != 0)
    return 2;
  dlock_client *c = NULL;
  if (dlock_client_open(argv[1], NULL, &c) != DLOCK_OK)
    return 3;
  dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
  o.thread_wait_ms = FAIR_WAIT_MS;
  dlock_lock *l = NULL;
  if (dlock_fair_lock_new(c, argv[2], &o, &l) != DLOCK_OK)
    return 4;
  dlock_acquire(l, 60000, 30000);
  return 0;
}

static void test_fair_dead_waiters(void) {
  for (int v = 0; v < 2; v++) {
    jpeer j;
    CU_ASSERT_FATAL(jp_start_fair(&j, jp_versions[v], srv.url, FAIR_WAIT_MS) == 0);
    char name[256];
    vname(name, sizeof name, "fair-dead", v);
    dlock_lock *holder = fair_lock(cl, name), *w = fair_lock(cl, name);
    /* a dead Java waiter, skipped by dlock */
    jpeer dead;
    CU_ASSERT_FATAL(jp_start_fair(&dead, jp_versions[v], srv.url, FAIR_WAIT_MS) == 0);
    /* Redisson's rule: a waiter's deadline is the lock's remaining lease
     * and its wait after its arrival (tryLock's wait time, both versions:
     * a dead tryLock(60 s) keeps its place a minute), so a 1 s holder and
     * a 2 s wait keep the dead one's place 3 s at most */
    TH_ASSERT_RC(dlock_acquire(holder, 0, 1000), DLOCK_OK);
    jp_send(&dead, "a", "trylock fair %s %d -1", name, FAIR_WAIT_MS);
    CU_ASSERT(queued(name, 1));
    th_acquirer a = {.lock = w, .wait_ms = 20000, .lease_ms = 30000};
    th_acquirer_start(&a);
    CU_ASSERT(queued(name, 2));
    jp_kill(&dead);
    int64_t t0 = th_now_ms();
    TH_ASSERT_RC(dlock_release(holder), DLOCK_OK);
    th_acquirer_join(&a);
    CU_ASSERT_EQUAL(a.rc, DLOCK_OK);
    int64_t java_skipped = a.got_ms - t0;
    /* a dead dlock waiter, skipped by Java */
    TH_ASSERT_RC(dlock_acquire(holder, 0, 1000), DLOCK_OK);
    char *args[] = {"fairwait", srv.url, name, NULL};
    pid_t pid = th_spawn_worker(args);
    CU_ASSERT(queued(name, 1));
    int id = jp_send(&j, "a", "trylock fair %s 20000 -1", name);
    CU_ASSERT(queued(name, 2));
    kill(pid, SIGKILL);
    th_wait_worker(pid, 5000);
    t0 = th_now_ms();
    TH_ASSERT_RC(dlock_release(holder), DLOCK_OK);
    char got[64];
    CU_ASSERT_EQUAL(jp_wait(&j, id, 20000, got, sizeof got), 0);
    int64_t c_skipped = th_now_ms() - t0;
    CU_ASSERT_STRING_EQUAL(got, "true");
    EXPECT_ANSWER(jp_call(&j, "a", "unlock fair %s", name), "ok");
    printf("\n    Redisson %s: a dead Java waiter skipped after %lld ms, a dead "
           "dlock waiter after %lld ms (thread wait %d ms) ", j.version,
           (long long)java_skipped, (long long)c_skipped, FAIR_WAIT_MS);
    /* within the holder's lease and the thread wait time after the dead
     * waiter queued, and a retry period of the one behind it (dlock's: a
     * third of its 5 s wait slot; Redisson's: its deadline's), with 1 s to
     * spare (measured 2.9 s and 3.0 s, quiet and beside two CPU hogs) */
    CU_ASSERT(java_skipped <= 1000 + FAIR_WAIT_MS + 1700 + 1000);
    CU_ASSERT(c_skipped <= 1000 + FAIR_WAIT_MS + 2000 + 1000);
    CU_ASSERT_EQUAL(queue_len(name), 0);
    dlock_lock_free(holder);
    dlock_lock_free(w);
    jp_stop(&j);
  }
}

/* A live dlock waiter at the head keeps its place while Java threads come
 * and go: every grant moves each queued deadline one thread wait earlier
 * (Redisson's arithmetic), so a dlock waiter that tries seldom (a 6 s wait
 * slot: every 2 s) must keep a deadline a Redisson client cannot find
 * passed. Queue J1 (Java), D (dlock), J2 (Java) behind a 1 s holder, a
 * 300 ms thread wait on both sides; J1 holds 2.5 s. Found by the mixed
 * torture (t37): D kept its deadline at now plus one wait, J2's try at its
 * own deadline purged D, alive, and J2 went first. */
static void test_fair_live_head_kept(void) {
  for (int v = 0; v < 2; v++) {
    jpeer j;
    CU_ASSERT_FATAL(jp_start_fair(&j, jp_versions[v], srv.url, 300) == 0);
    char name[256];
    vname(name, sizeof name, "fair-live", v);
    dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
    o.thread_wait_ms = 300;
    o.wait_slot_ms = 6000;
    dlock_lock *holder, *d;
    TH_ASSERT_RC(dlock_fair_lock_new(cl, name, &o, &holder), DLOCK_OK);
    TH_ASSERT_RC(dlock_fair_lock_new(cl, name, &o, &d), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(holder, 0, 1000), DLOCK_OK);
    int j1 = jp_send(&j, "a", "trylock fair %s 20000 -1", name);
    CU_ASSERT(queued(name, 1));
    th_acquirer a = {.lock = d, .wait_ms = 20000, .lease_ms = 30000};
    th_acquirer_start(&a);
    CU_ASSERT(queued(name, 2));
    int j2 = jp_send(&j, "b", "enter fair %s 20000 -1", name);
    CU_ASSERT(queued(name, 3));
    TH_ASSERT_RC(dlock_release(holder), DLOCK_OK);
    char got[64];
    CU_ASSERT_EQUAL(jp_wait(&j, j1, 15000, got, sizeof got), 0);
    CU_ASSERT_STRING_EQUAL(got, "true");
    EXPECT_ANSWER(jp_call(&j, "a", "sleep 2500"), "ok");
    EXPECT_ANSWER(jp_call(&j, "a", "unlock fair %s", name), "ok");
    th_acquirer_join(&a);
    CU_ASSERT_EQUAL(a.rc, DLOCK_OK);
    CU_ASSERT_EQUAL(jp_wait(&j, j2, 15000, got, sizeof got), 0);
    long long j2_ns = 0;
    CU_ASSERT(sscanf(got, "true %lld", &j2_ns) == 1);
    if (a.got_ms > j2_ns / 1000000)
      printf("\n    Redisson %s: J2 in at %lld ms, before D at %lld ms ",
             j.version, j2_ns / 1000000, (long long)a.got_ms);
    CU_ASSERT(a.got_ms <= j2_ns / 1000000); /* D before J2 */
    EXPECT_ANSWER(jp_call(&j, "b", "unlock fair %s", name), "ok");
    CU_ASSERT_EQUAL(queue_len(name), 0);
    dlock_lock_free(holder);
    dlock_lock_free(d);
    jp_stop(&j);
  }
}

/* ---- fenced, spin, non-reentrant, read-write ----------------------------------- */

/* One token sequence across both: each grant's token is one above the
 * last, whoever was granted. */
static void test_fenced_tokens(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "fenced", v);
    dlock_lock *l;
    TH_ASSERT_RC(dlock_fenced_lock_new(cl, name, NULL, &l), DLOCK_OK);
    dlock_grant g;
    TH_ASSERT_RC(dlock_acquire_grant(l, 0, 30000, &g), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "trylock fenced %s 0 30000", name), "false");
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    char want[64];
    snprintf(want, sizeof want, "token %lld", (long long)g.token + 1);
    EXPECT_ANSWER(jp_call(p, "a", "trylock fenced %s 0 30000", name), want);
    TH_ASSERT_RC(dlock_try_acquire(l, 30000), DLOCK_EBUSY);
    EXPECT_ANSWER(jp_call(p, "a", "unlock fenced %s", name), "ok");
    dlock_grant g2;
    TH_ASSERT_RC(dlock_acquire_grant(l, 0, 30000, &g2), DLOCK_OK);
    CU_ASSERT_EQUAL(g2.token, g.token + 2);
    /* the guard: Java's token is no longer the newest */
    const char *set[] = {"SET", "k", "v"};
    char key[300];
    snprintf(key, sizeof key, "{%s}:data", name);
    set[1] = key;
    size_t lens[] = {3, strlen(key), 1};
    TH_ASSERT_RC(dlock_fenced_call(cl, name, g.token + 1, 3, set, lens, NULL),
                 DLOCK_EFENCED);
    TH_ASSERT_RC(dlock_fenced_call(cl, name, g2.token, 3, set, lens, NULL),
                 DLOCK_OK);
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
  }
}

/* The spin lock both ways, and (4.x) the non-reentrant lock: a second
 * acquire by its holder refused on both sides. */
static void test_spin_and_non_reentrant(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "spin", v);
    dlock_lock *l;
    TH_ASSERT_RC(dlock_spin_lock_new(cl, name, NULL, &l), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "trylock spin %s 0 -1", name), "true");
    TH_ASSERT_RC(dlock_try_acquire(l, 30000), DLOCK_EBUSY);
    /* dlock waits and takes it after Java's unlock (no message: its try) */
    th_acquirer a = {.lock = l, .wait_ms = 10000, .lease_ms = 30000};
    th_acquirer_start(&a);
    EXPECT_ANSWER(jp_call(p, "a", "unlock spin %s", name), "ok");
    th_acquirer_join(&a);
    CU_ASSERT_EQUAL(a.rc, DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
    int id = jp_send(p, "b", "trylock spin %s 10000 -1", name);
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    char got[64];
    CU_ASSERT_EQUAL(jp_wait(p, id, 15000, got, sizeof got), 0);
    CU_ASSERT_STRING_EQUAL(got, "true");
    EXPECT_ANSWER(jp_call(p, "b", "unlock spin %s", name), "ok");
    dlock_lock_free(l);
    if (v == 0)
      continue; /* Redisson 4.x's */
    vname(name, sizeof name, "once", v);
    TH_ASSERT_RC(dlock_non_reentrant_lock_new(cl, name, NULL, &l), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "trylock nonreentrant %s 0 -1", name), "true");
    const char *again = jp_call(p, "a", "trylock nonreentrant %s 0 -1", name);
    CU_ASSERT(strncmp(again, "error IllegalMonitorStateException", 34) == 0);
    TH_ASSERT_RC(dlock_try_acquire(l, 30000), DLOCK_EBUSY);
    EXPECT_ANSWER(jp_call(p, "a", "unlock nonreentrant %s", name), "ok");
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EREENTRY);
    EXPECT_ANSWER(jp_call(p, "b", "trylock nonreentrant %s 0 -1", name), "false");
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
  }
}

/* Java readers beside dlock readers exclude a writer of either side;
 * dlock's downgrade (write, then read, then the write released) keeps
 * Java's writer out and lets Java's readers in. */
static void test_rwlock(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "rw", v);
    dlock_lock *r, *w;
    TH_ASSERT_RC(dlock_read_lock_new(cl, name, NULL, &r), DLOCK_OK);
    TH_ASSERT_RC(dlock_write_lock_new(cl, name, NULL, &w), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "trylock read %s 0 30000", name), "true");
    TH_ASSERT_RC(dlock_acquire(r, 0, 30000), DLOCK_OK); /* readers share */
    TH_ASSERT_RC(th_acquire_elsewhere(w, 0, 30000), DLOCK_EBUSY);
    EXPECT_ANSWER(jp_call(p, "b", "trylock write %s 0 30000", name), "false");
    EXPECT_ANSWER(jp_call(p, "a", "unlock read %s", name), "ok");
    TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
    /* a Java writer excludes dlock's readers and writers */
    EXPECT_ANSWER(jp_call(p, "b", "trylock write %s 0 30000", name), "true");
    TH_ASSERT_RC(dlock_try_acquire(r, 30000), DLOCK_EBUSY);
    TH_ASSERT_RC(dlock_try_acquire(w, 30000), DLOCK_EBUSY);
    EXPECT_ANSWER(jp_call(p, "b", "unlock write %s", name), "ok");
    /* dlock's downgrade */
    TH_ASSERT_RC(dlock_acquire(w, 0, 30000), DLOCK_OK);
    TH_ASSERT_RC(dlock_acquire(r, 0, 30000), DLOCK_OK);
    TH_ASSERT_RC(dlock_release(w), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "b", "trylock write %s 0 30000", name), "false");
    EXPECT_ANSWER(jp_call(p, "a", "trylock read %s 0 30000", name), "true");
    EXPECT_ANSWER(jp_call(p, "a", "unlock read %s", name), "ok");
    TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
    CU_ASSERT_EQUAL(th_int(th_node_of(&srv, name), "EXISTS %s", name), 0);
    dlock_lock_free(r);
    dlock_lock_free(w);
  }
}

/* Redisson's getMultiLock(group, values) and dlock's group lock exclude
 * each other value by value, for every codec docs/group.md names
 * (StringCodec, ByteArrayCodec, LongCodec): the fields, HighwayHash of the
 * codec's bytes, are equal byte for byte. */
static void test_group(void) {
  static const struct {
    const char *codec, *v[5]; /* Java's words; dlock gives the codec's bytes */
  } cases[] = {{"string", {"row:1", "row:2", "row:3", "row:4", "row:5"}},
               {"bytes", {"r\xc3\xa9-1", "r2", "r3", "r4", "r5"}},
               {"long", {"11", "22", "33", "44", "55"}}};
  for (int v = 0; v < 2; v++) {
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
      jpeer p;
      CU_ASSERT_FATAL(jp_start_codec(&p, jp_versions[v], srv.url, 0,
                                     cases[k].codec) == 0);
      char group[256];
      vname(group, sizeof group, cases[k].codec, v);
      const char *const *val = cases[k].v;
      /* Java holds values 0 and 1 */
      char ask[600];
      snprintf(ask, sizeof ask, "trylock group %s/%s,%s 0 -1", group, val[0], val[1]);
      EXPECT_ANSWER(jp_call(&p, "a", "%s", ask), "true");
      /* dlock's 1 and 2 overlap: refused; 2 and 3: granted */
      dlock_lock *g12, *g23;
      const char *v12[] = {val[1], val[2]}, *v23[] = {val[2], val[3]};
      size_t l12[] = {strlen(val[1]), strlen(val[2])},
             l23[] = {strlen(val[2]), strlen(val[3])};
      TH_ASSERT_RC(dlock_group_lock_new(cl, group, v12, l12, 2, NULL, &g12), DLOCK_OK);
      TH_ASSERT_RC(dlock_group_lock_new(cl, group, v23, l23, 2, NULL, &g23), DLOCK_OK);
      TH_ASSERT_RC(dlock_try_acquire(g12, 30000), DLOCK_EBUSY);
      TH_ASSERT_RC(dlock_try_acquire(g23, 30000), DLOCK_OK);
      /* Java's 3 and 4 overlap dlock's 3: refused */
      snprintf(ask, sizeof ask, "trylock group %s/%s,%s 0 -1", group, val[3], val[4]);
      EXPECT_ANSWER(jp_call(&p, "b", "%s", ask), "false");
      snprintf(ask, sizeof ask, "unlock group %s/%s,%s", group, val[0], val[1]);
      EXPECT_ANSWER(jp_call(&p, "a", "%s", ask), "ok");
      /* value 2 is dlock's (another owner is refused) */
      TH_ASSERT_RC(th_acquire_elsewhere(g12, 0, 30000), DLOCK_EBUSY);
      TH_ASSERT_RC(dlock_release(g23), DLOCK_OK);
      TH_ASSERT_RC(dlock_try_acquire(g12, 30000), DLOCK_OK);
      TH_ASSERT_RC(dlock_release(g12), DLOCK_OK);
      CU_ASSERT_EQUAL(th_int(th_node_of(&srv, group), "EXISTS %s", group), 0);
      dlock_lock_free(g12);
      dlock_lock_free(g23);
      jp_stop(&p);
    }
  }
}

/* Redisson's multi-lock (getMultiLock(RLock...)) and dlock's exclude each
 * other lock by lock, all or nothing on both sides. */
static void test_multi(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char base[200], n[4][256];
    vname(base, sizeof base, "multi", v);
    for (int i = 0; i < 4; i++)
      snprintf(n[i], sizeof n[i], "{%s}:%c", base, 'a' + i); /* one slot */
    dlock_lock *l[4], *cd, *abc;
    for (int i = 0; i < 4; i++)
      TH_ASSERT_RC(dlock_reentrant_lock_new(cl, n[i], NULL, &l[i]), DLOCK_OK);
    dlock_lock *pair[] = {l[2], l[3]};
    TH_ASSERT_RC(dlock_multi_new(pair, 2, &cd), DLOCK_OK);
    TH_ASSERT_RC(dlock_multi_new(l, 3, &abc), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "trylock multi %s,%s,%s 0 -1", n[0], n[1], n[2]),
                  "true");
    TH_ASSERT_RC(dlock_try_acquire(cd, 30000), DLOCK_EBUSY); /* c is Java's */
    CU_ASSERT_EQUAL(th_int(th_node_of(&srv, n[3]), "EXISTS %s", n[3]), 0); /* none of it */
    EXPECT_ANSWER(jp_call(p, "a", "unlock multi %s,%s,%s", n[0], n[1], n[2]), "ok");
    TH_ASSERT_RC(dlock_try_acquire(abc, 30000), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "b", "trylock multi %s,%s 0 -1", n[2], n[3]), "false");
    CU_ASSERT_EQUAL(th_int(th_node_of(&srv, n[3]), "EXISTS %s", n[3]), 0);
    TH_ASSERT_RC(dlock_release(abc), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "b", "trylock multi %s,%s 0 -1", n[2], n[3]), "true");
    EXPECT_ANSWER(jp_call(p, "b", "unlock multi %s,%s", n[2], n[3]), "ok");
    dlock_lock_free(cd);
    dlock_lock_free(abc);
    for (int i = 0; i < 4; i++)
      dlock_lock_free(l[i]);
  }
}

/* RedissonRedLock and dlock's RedLock over the same three servers exclude
 * each other. Standalone servers of its own (the cluster run adds nothing
 * here: the plain run covers it). */
static void test_redlock(void) {
  if (th_cluster_mode())
    return;
  th_server s[3];
  dlock_client *c[3];
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_FATAL(th_server_start(&s[i], NULL) == 0);
    c[i] = th_client(&s[i], NULL);
  }
  for (int v = 0; v < 2; v++) {
    jpeer p;
    CU_ASSERT_FATAL(jp_start_redlock(&p, jp_versions[v], s[0].url, s[1].url,
                                     s[2].url) == 0);
    char name[256];
    vname(name, sizeof name, "redlock", v);
    dlock_lock *m[3], *rl;
    for (int i = 0; i < 3; i++)
      TH_ASSERT_RC(dlock_reentrant_lock_new(c[i], name, NULL, &m[i]), DLOCK_OK);
    TH_ASSERT_RC(dlock_redlock_new(m, 3, NULL, &rl), DLOCK_OK);
    EXPECT_ANSWER(jp_call(&p, "a", "trylock redlock %s 0 -1", name), "true");
    for (int i = 0; i < 3; i++) /* Java holds it on all three */
      CU_ASSERT_EQUAL(th_int(&s[i], "EXISTS %s", name), 1);
    CU_ASSERT_NOT_EQUAL(dlock_try_acquire(rl, 30000), DLOCK_OK);
    EXPECT_ANSWER(jp_call(&p, "a", "unlock redlock %s", name), "ok");
    TH_ASSERT_RC(dlock_try_acquire(rl, 30000), DLOCK_OK);
    EXPECT_ANSWER(jp_call(&p, "b", "trylock redlock %s 0 -1", name), "false");
    TH_ASSERT_RC(dlock_release(rl), DLOCK_OK);
    EXPECT_ANSWER(jp_call(&p, "b", "trylock redlock %s 0 -1", name), "true");
    EXPECT_ANSWER(jp_call(&p, "b", "unlock redlock %s", name), "ok");
    for (int i = 0; i < 3; i++)
      CU_ASSERT_EQUAL(th_int(&s[i], "EXISTS %s", name), 0);
    dlock_lock_free(rl);
    for (int i = 0; i < 3; i++)
      dlock_lock_free(m[i]);
    jp_stop(&p);
  }
  for (int i = 0; i < 3; i++) {
    dlock_client_close(c[i]);
    th_server_stop(&s[i]);
  }
}

/* Per-hold read leases (Redisson's {N}:OWNER:rwlock_timeout:K keys): when a
 * reader leaves, the hash's TTL becomes the longest lease left among the
 * other holds, whoever wrote them: a Java reader's long lease leaving keeps
 * dlock's short one, and the reverse. (A hold whose own lease ran out
 * stays in the hash until the hash expires or a release recomputes it, on
 * both sides alike.) */
static long long pttl_of(const char *name) {
  return th_int(th_node_of(&srv, name), "PTTL %s", name);
}

static void test_read_leases(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "leases", v);
    dlock_lock *r;
    TH_ASSERT_RC(dlock_read_lock_new(cl, name, NULL, &r), DLOCK_OK);
    /* Java's 30 s read leaves; dlock's 1.5 s one sets the TTL */
    EXPECT_ANSWER(jp_call(p, "a", "trylock read %s 0 30000", name), "true");
    TH_ASSERT_RC(dlock_acquire(r, 0, 1500), DLOCK_OK);
    CU_ASSERT(pttl_of(name) > 20000);
    EXPECT_ANSWER(jp_call(p, "a", "unlock read %s", name), "ok");
    long long left = pttl_of(name);
    CU_ASSERT(left > 0 && left <= 1500);
    TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
    CU_ASSERT_EQUAL(th_int(th_node_of(&srv, name), "EXISTS %s", name), 0);
    /* dlock's 30 s read leaves; Java's 1.5 s one sets the TTL */
    TH_ASSERT_RC(dlock_acquire(r, 0, 30000), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "trylock read %s 0 1500", name), "true");
    CU_ASSERT(pttl_of(name) > 20000);
    TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
    left = pttl_of(name);
    CU_ASSERT(left > 0 && left <= 1500);
    if (!(left > 0 && left <= 1500))
      fprintf(stderr, "\n  Redisson %s: PTTL %lld after dlock's reader left\n",
              p->version, left);
    EXPECT_ANSWER(jp_call(p, "a", "unlock read %s", name), "ok");
    CU_ASSERT_EQUAL(th_int(th_node_of(&srv, name), "EXISTS %s", name), 0);
    dlock_lock_free(r);
  }
}

/* ---- synchronizers ------------------------------------------------------------ */

/* A count set by either side, counted down by both, awaited by both. */
static void test_latch(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "latch", v);
    dlock_latch *l;
    TH_ASSERT_RC(dlock_latch_new(cl, name, NULL, &l), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "latch.set %s 2", name), "true");
    int set = -1;
    TH_ASSERT_RC(dlock_latch_try_set_count(l, 5, &set), DLOCK_OK);
    CU_ASSERT_EQUAL(set, 0);
    int64_t n = 0;
    TH_ASSERT_RC(dlock_latch_get_count(l, &n), DLOCK_OK);
    CU_ASSERT_EQUAL(n, 2);
    int id = jp_send(p, "b", "latch.await %s 10000", name);
    TH_ASSERT_RC(dlock_latch_count_down(l, &n), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "latch.count %s", name), "1");
    EXPECT_ANSWER(jp_call(p, "a", "latch.down %s", name), "ok");
    char got[64];
    CU_ASSERT_EQUAL(jp_wait(p, id, 15000, got, sizeof got), 0);
    CU_ASSERT_STRING_EQUAL(got, "true"); /* Java's await ended */
    TH_ASSERT_RC(dlock_latch_await(l, 0), DLOCK_OK);
    /* dlock sets, Java counts down, dlock's await ends */
    TH_ASSERT_RC(dlock_latch_try_set_count(l, 1, &set), DLOCK_OK);
    CU_ASSERT_EQUAL(set, 1);
    EXPECT_ANSWER(jp_call(p, "a", "latch.set %s 1", name), "false");
    id = jp_send(p, "a", "latch.down %s", name);
    TH_ASSERT_RC(dlock_latch_await(l, 10000), DLOCK_OK);
    CU_ASSERT_EQUAL(jp_wait(p, id, 15000, got, sizeof got), 0);
    dlock_latch_free(l);
  }
}

static int acquire_3(void *s) { return dlock_semaphore_acquire(s, 3, 10000); }

/* Permits set, added, taken several at a time and given back by either
 * side; a waiter of either side woken by the other's release. */
static void test_semaphore(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "sem", v);
    dlock_semaphore *s;
    TH_ASSERT_RC(dlock_semaphore_new(cl, name, NULL, &s), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "sem.init %s 3", name), "true");
    int set = -1;
    TH_ASSERT_RC(dlock_semaphore_try_set_permits(s, 5, 0, &set), DLOCK_OK);
    CU_ASSERT_EQUAL(set, 0);
    EXPECT_ANSWER(jp_call(p, "a", "sem.acquire %s 2 0", name), "true");
    int64_t n = -1;
    TH_ASSERT_RC(dlock_semaphore_available(s, &n), DLOCK_OK);
    CU_ASSERT_EQUAL(n, 1);
    TH_ASSERT_RC(dlock_semaphore_acquire(s, 2, 0), DLOCK_EBUSY);
    TH_ASSERT_RC(dlock_semaphore_add_permits(s, 2, &n), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "sem.available %s", name), "3");
    TH_ASSERT_RC(dlock_semaphore_acquire(s, 3, 0), DLOCK_OK);
    /* a Java waiter for 2, woken by dlock's release */
    int id = jp_send(p, "b", "sem.acquire %s 2 10000", name);
    TH_ASSERT_RC(dlock_semaphore_release(s, 2), DLOCK_OK);
    char got[64];
    CU_ASSERT_EQUAL(jp_wait(p, id, 15000, got, sizeof got), 0);
    CU_ASSERT_STRING_EQUAL(got, "true");
    /* a dlock waiter for 3, woken by Java's releases: Java holds 2 and 2,
     * dlock 1 of the 5 */
    char channel[300];
    snprintf(channel, sizeof channel, "redisson_sc:{%s}", name);
    th_elsewhere_call e;
    th_elsewhere_start(&e, acquire_3, s);
    CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
    EXPECT_ANSWER(jp_call(p, "a", "sem.release %s 2", name), "ok");
    EXPECT_ANSWER(jp_call(p, "b", "sem.release %s 2", name), "ok");
    TH_ASSERT_RC(th_elsewhere_join(&e), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "sem.available %s", name), "1");
    TH_ASSERT_RC(dlock_semaphore_release(s, 4), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "sem.available %s", name), "5");
    dlock_semaphore_free(s);
  }
}

/* A permit acquired on one side is released by its id on the other, and
 * an expired one comes back for both. */
static void test_permits(void) {
  for (int v = 0; v < 2; v++) {
    jpeer *p = &peers[v];
    char name[256];
    vname(name, sizeof name, "permits", v);
    dlock_permits *s;
    TH_ASSERT_RC(dlock_permits_new(cl, name, NULL, &s), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "psem.init %s 2", name), "true");
    /* Java's permit, released by dlock */
    const char *got = jp_call(p, "a", "psem.acquire %s 0 30000", name);
    CU_ASSERT_FATAL(strncmp(got, "id ", 3) == 0);
    dlock_permit_id jid;
    snprintf(jid.hex, sizeof jid.hex, "%s", got + 3);
    int64_t avail = -1, held = -1;
    TH_ASSERT_RC(dlock_permits_counts(s, &avail, &held), DLOCK_OK);
    CU_ASSERT(avail == 1 && held == 1);
    TH_ASSERT_RC(dlock_permits_release(s, &jid, 1), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "psem.available %s", name), "2");
    /* dlock's permit, released by Java */
    dlock_permit_id cid;
    TH_ASSERT_RC(dlock_permits_acquire(s, 1, 0, 30000, &cid), DLOCK_OK);
    EXPECT_ANSWER(jp_call(p, "a", "psem.available %s", name), "1");
    EXPECT_ANSWER(jp_call(p, "a", "psem.release %s %s", name, cid.hex), "ok");
    TH_ASSERT_RC(dlock_permits_counts(s, &avail, &held), DLOCK_OK);
    CU_ASSERT(avail == 2 && held == 0);
    /* expiry seen by both: Java's 300 ms permit comes back */
    got = jp_call(p, "a", "psem.acquire %s 0 300", name);
    CU_ASSERT(strncmp(got, "id ", 3) == 0);
    TH_ASSERT_RC(dlock_permits_counts(s, &avail, &held), DLOCK_OK);
    CU_ASSERT_EQUAL(avail, 1);
    int back = 0;
    for (int64_t end = th_now_ms() + 5000; th_now_ms() < end && !back; usleep(20000))
      back = dlock_permits_counts(s, &avail, &held) == DLOCK_OK && avail == 2;
    CU_ASSERT(back);
    EXPECT_ANSWER(jp_call(p, "a", "psem.available %s", name), "2");
    dlock_permits_free(s);
  }
}

/* Through Sentinel (a master, two replicas, three sentinels): Redisson's
 * Sentinel mode and dlock's find the same master; the lock both ways, a
 * wake-up each way, and the fair queue. */
static void test_sentinel(void) {
  if (th_cluster_mode())
    return; /* the plain run's */
  th_server s;
  CU_ASSERT_FATAL(th_sentinel_start(&s, 2, 3) == 0);
  dlock_client *c = th_client(&s, NULL);
  for (int v = 0; v < 2; v++) {
    jpeer p;
    CU_ASSERT_FATAL(jp_start(&p, jp_versions[v], s.url, 0) == 0);
    char name[256], channel[300];
    vname(name, sizeof name, "sentinel", v);
    snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
    dlock_lock *l;
    TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
    EXPECT_ANSWER(jp_call(&p, "a", "trylock reentrant %s 0 -1", name), "true");
    TH_ASSERT_RC(dlock_try_acquire(l, 30000), DLOCK_EBUSY);
    th_acquirer a = {.lock = l, .wait_ms = 10000, .lease_ms = 30000};
    th_acquirer_start(&a);
    CU_ASSERT(th_wait_numsub(th_sentinel_master(&s), channel, 1, 5000));
    EXPECT_ANSWER(jp_call(&p, "a", "unlock reentrant %s", name), "ok");
    th_acquirer_join(&a);
    CU_ASSERT_EQUAL(a.rc, DLOCK_OK); /* woken by Java's unlock */
    CU_ASSERT(th_wait_numsub(th_sentinel_master(&s), channel, 0, 5000));
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
    int id = jp_send(&p, "b", "trylock reentrant %s 10000 -1", name);
    CU_ASSERT(th_wait_numsub(th_sentinel_master(&s), channel, 1, 5000));
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    char got[64];
    CU_ASSERT_EQUAL(jp_wait(&p, id, 15000, got, sizeof got), 0);
    CU_ASSERT_STRING_EQUAL(got, "true"); /* woken by dlock's release */
    EXPECT_ANSWER(jp_call(&p, "b", "unlock reentrant %s", name), "ok");
    dlock_lock_free(l);
    jp_stop(&p);
  }
  dlock_client_close(c);
  th_server_stop(&s);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("java", suite_init, suite_clean);
  CU_add_test(s, "lock_both_ways", test_lock_both_ways);
  CU_add_test(s, "wakeups", test_wakeups);
  CU_add_test(s, "watchdogs", test_watchdogs);
  CU_add_test(s, "force_unlock_told", test_force_unlock_told);
  CU_add_test(s, "fair_queue", test_fair_queue);
  CU_add_test(s, "fair_dead_waiters", test_fair_dead_waiters);
  CU_add_test(s, "fair_live_head_kept", test_fair_live_head_kept);
  CU_add_test(s, "fenced_tokens", test_fenced_tokens);
  CU_add_test(s, "spin_and_non_reentrant", test_spin_and_non_reentrant);
  CU_add_test(s, "rwlock", test_rwlock);
  CU_add_test(s, "read_leases", test_read_leases);
  CU_add_test(s, "group", test_group);
  CU_add_test(s, "multi", test_multi);
  CU_add_test(s, "redlock", test_redlock);
  CU_add_test(s, "latch", test_latch);
  CU_add_test(s, "semaphore", test_semaphore);
  CU_add_test(s, "permits", test_permits);
  CU_add_test(s, "sentinel", test_sentinel);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, worker); }
