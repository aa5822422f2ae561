/* Read-write lock against a real redis-server: shared readers, exclusive
 * writer, downgrade, refused upgrade, per-hold leases, zombie readers. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static th_server srv;
static dlock_client *cl;

static int suite_init(void) { return th_suite_open(&srv, &cl); }
static int suite_clean(void) { return th_suite_close(&srv, cl); }

static dlock_rwlock *new_rw(dlock_client *c, const char *name) {
  dlock_rwlock *rw = NULL;
  TH_ASSERT_RC(dlock_rwlock_new(c, name, NULL, &rw), DLOCK_OK);
  CU_ASSERT_PTR_NOT_NULL_FATAL(rw);
  return rw;
}

/* Another thread's acquire, released at once: its rc. */
static int other_thread(dlock_lock *l, int64_t wait_ms) {
  return th_acquire_elsewhere(l, wait_ms, 5000);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_readers_share_writer_excluded(void) {
  char name[256];
  snprintf(name, sizeof name, "%s", th_name("share"));
  dlock_rwlock *rw = new_rw(cl, name);
  pthread_barrier_t in, out;
  pthread_barrier_init(&in, NULL, 4);
  pthread_barrier_init(&out, NULL, 4);
  th_acquirer r[3];
  for (int i = 0; i < 3; i++) { /* all three hold at in; release after out */
    r[i] = (th_acquirer){.lock = dlock_rwlock_read(rw), .wait_ms = 2000,
                         .lease_ms = 10000, .held = &in, .go = &out};
    th_acquirer_start(&r[i]);
  }
  pthread_barrier_wait(&in);
  for (int i = 0; i < 3; i++)
    TH_ASSERT_RC(r[i].rc, DLOCK_OK);
  TH_ASSERT_RC(other_thread(dlock_rwlock_write(rw), 0), DLOCK_EBUSY);
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(dlock_rwlock_read(rw), &st), DLOCK_OK);
  CU_ASSERT(st.locked && !st.held_by_me);
  pthread_barrier_wait(&out);
  for (int i = 0; i < 3; i++) {
    th_acquirer_join(&r[i]);
    TH_ASSERT_RC(r[i].release_rc, DLOCK_OK);
  }
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0); /* last reader left */
  TH_ASSERT_RC(other_thread(dlock_rwlock_write(rw), 0), DLOCK_OK);
  pthread_barrier_destroy(&in);
  pthread_barrier_destroy(&out);
  dlock_rwlock_free(rw);
}

static void test_writer_excludes_readers(void) {
  dlock_rwlock *rw = new_rw(cl, th_name("writer"));
  dlock_lock *w = dlock_rwlock_write(rw), *r = dlock_rwlock_read(rw);
  TH_ASSERT_RC(dlock_acquire(w, 0, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(w, 0, 10000), DLOCK_OK); /* reentrant */
  TH_ASSERT_RC(other_thread(r, 0), DLOCK_EBUSY);
  TH_ASSERT_RC(other_thread(w, 0), DLOCK_EBUSY);
  th_acquirer waiting[2];
  for (int i = 0; i < 2; i++) {
    waiting[i] = (th_acquirer){.lock = r, .wait_ms = 5000, .lease_ms = 5000};
    th_acquirer_start(&waiting[i]);
  }
  TH_ASSERT_RC(dlock_release(w), DLOCK_OK);
  TH_ASSERT_RC(other_thread(r, 0), DLOCK_EBUSY); /* still one write hold */
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_release(w), DLOCK_OK);
  for (int i = 0; i < 2; i++) {
    th_acquirer_join(&waiting[i]);
    TH_ASSERT_RC(waiting[i].rc, DLOCK_OK);
    CU_ASSERT(waiting[i].got_ms - t0 < 1000); /* woken, not by lease */
  }
  TH_ASSERT_RC(dlock_release(w), DLOCK_ENOTOWNER);
  dlock_rwlock_free(rw);
}

static void test_downgrade(void) {
  const char *name = th_name("downgrade");
  dlock_rwlock *rw = new_rw(cl, name);
  dlock_lock *w = dlock_rwlock_write(rw), *r = dlock_rwlock_read(rw);
  TH_ASSERT_RC(dlock_acquire(w, 0, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(r, 0, 10000), DLOCK_OK);
  TH_ASSERT_RC(other_thread(r, 0), DLOCK_EBUSY); /* a writer is inside */
  TH_ASSERT_RC(dlock_release(w), DLOCK_OK);
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(r, &st), DLOCK_OK);
  CU_ASSERT(st.locked && st.held_by_me && st.hold_count == 1);
  redisReply *rep = th_cmd(&srv, "HGET %s mode", name);
  CU_ASSERT(rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, "read"));
  freeReplyObject(rep);
  TH_ASSERT_RC(other_thread(r, 0), DLOCK_OK);  /* readers may enter */
  TH_ASSERT_RC(other_thread(w, 0), DLOCK_EBUSY); /* writers may not */
  TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
  TH_ASSERT_RC(other_thread(w, 0), DLOCK_OK);
  dlock_rwlock_free(rw);
}

static void test_upgrade_refused(void) {
  char name[256];
  snprintf(name, sizeof name, "%s", th_name("upgrade"));
  dlock_rwlock *rw = new_rw(cl, name);
  dlock_lock *w = dlock_rwlock_write(rw), *r = dlock_rwlock_read(rw);
  TH_ASSERT_RC(dlock_acquire(r, 0, 10000), DLOCK_OK);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_acquire(w, 5000, 10000), DLOCK_EDEADLK);
  CU_ASSERT(th_now_ms() - t0 < 200); /* at once, not after the budget */
  CU_ASSERT(strstr(dlock_errmsg(), "upgrad") != NULL);
  TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(w, 0, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(w), DLOCK_OK);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(r), "read");
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(w), "write");
  CU_ASSERT(dlock_lock_caps(r) & DLOCK_CAP_SHARED);
  CU_ASSERT(!(dlock_lock_caps(w) & DLOCK_CAP_SHARED));
  /* halves of their own on the same name share the lock with the pair's */
  dlock_lock *r2 = NULL, *w2 = NULL;
  TH_ASSERT_RC(dlock_read_lock_new(cl, name, NULL, &r2), DLOCK_OK);
  TH_ASSERT_RC(dlock_write_lock_new(cl, name, NULL, &w2), DLOCK_OK);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(r2), "read");
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(w2), "write");
  TH_ASSERT_RC(dlock_acquire(r, 0, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(w2, 5000, 10000), DLOCK_EDEADLK);
  TH_ASSERT_RC(dlock_acquire(r2, 0, 10000), DLOCK_OK); /* readers share */
  TH_ASSERT_RC(dlock_release(r2), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(w2, 0, 10000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(w, 0, 10000), DLOCK_OK); /* the same writer */
  TH_ASSERT_RC(dlock_release(w), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(w2), DLOCK_OK);
  dlock_lock_free(r2);
  dlock_lock_free(w2);
  dlock_rwlock_free(rw);
}

static void test_per_hold_leases(void) {
  const char *name = th_name("perhold");
  dlock_rwlock *rw = new_rw(cl, name);
  pthread_barrier_t held;
  pthread_barrier_init(&held, NULL, 2);
  th_acquirer a = {.lock = dlock_rwlock_read(rw), .lease_ms = 10000,
                   .held = &held, .keep = 1};
  int64_t t_a = th_now_ms();
  th_acquirer_start(&a); /* reader A: 10 s, never released */
  pthread_barrier_wait(&held);
  th_acquirer_join(&a);
  TH_ASSERT_RC(a.rc, DLOCK_OK);
  usleep(5000 * 1000); /* the scenario itself: B comes 5 s later */
  /* reader B takes and releases a 10 s hold */
  TH_ASSERT_RC(other_thread(dlock_rwlock_read(rw), 0), DLOCK_OK);
  long long ttl = th_int(&srv, "PTTL %s", name);
  CU_ASSERT(ttl > 4000 && ttl <= 5100); /* follows A's hold, not B's */
  th_acquirer w = {.lock = dlock_rwlock_write(rw), .wait_ms = 10000,
                   .lease_ms = 5000};
  th_acquirer_start(&w);
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  int64_t at = w.got_ms - t_a;
  CU_ASSERT(at >= 9900 && at <= 10000 + 500);
  pthread_barrier_destroy(&held);
  dlock_rwlock_free(rw);
}

static void test_ttl_follows_longest_hold(void) {
  const char *name = th_name("ttl");
  dlock_rwlock *rw = new_rw(cl, name);
  dlock_lock *r = dlock_rwlock_read(rw);
  TH_ASSERT_RC(dlock_acquire(r, 0, 4000), DLOCK_OK);
  usleep(3000 * 1000);
  TH_ASSERT_RC(dlock_acquire(r, 0, 4000), DLOCK_OK);
  CU_ASSERT(th_int(&srv, "PTTL %s", name) > 3800);
  TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
  long long ttl = th_int(&srv, "PTTL %s", name);
  CU_ASSERT(ttl > 700 && ttl <= 1050);
  TH_ASSERT_RC(dlock_release(r), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  dlock_rwlock_free(rw);
}

static void test_write_lease_expiry_lets_readers_in(void) {
  dlock_rwlock *rw = new_rw(cl, th_name("wexpire"));
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_write(rw), 0, 1000), DLOCK_OK);
  th_acquirer rd[2];
  for (int i = 0; i < 2; i++) {
    rd[i] = (th_acquirer){.lock = dlock_rwlock_read(rw), .wait_ms = 3000,
                          .lease_ms = 5000};
    th_acquirer_start(&rd[i]);
  }
  for (int i = 0; i < 2; i++) {
    th_acquirer_join(&rd[i]);
    TH_ASSERT_RC(rd[i].rc, DLOCK_OK);
    CU_ASSERT(rd[i].got_ms - t0 >= 950 && rd[i].got_ms - t0 <= 1200);
  }
  TH_ASSERT_RC(dlock_release(dlock_rwlock_write(rw)), DLOCK_ELOST);
  dlock_rwlock_free(rw);
}

/* A write hold whose loss was reported (renewed until max_hold, then its
 * lease ran out) releases with DLOCK_ELOST even when the hold outlived the
 * lease the client knew of (made sure of here), and it is released. */
static void test_write_reported_lost_release(void) {
  th_lost_log log;
  dlock_client *c = th_max_hold_client(&srv, &log);
  const char *name = th_name("wlost");
  dlock_rwlock *rw = new_rw(c, name);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_write(rw), 0, DLOCK_LEASE_WATCHDOG),
               DLOCK_OK);
  CU_ASSERT_EQUAL(th_lost_wait(&log, 1, 3000), 1);
  CU_ASSERT_EQUAL(log.reason, DLOCK_LOST_MAX_HOLD);
  char field[128];
  snprintf(field, sizeof field, "%s:%llu:write", dlock_client_id(c),
           (unsigned long long)dlock_thread_id());
  /* in one script: the old key may still expire between two commands (seen
   * once under ASan: PEXPIRE found no key) */
  CU_ASSERT(th_int(&srv, "EVAL %s 1 %s %s",
                   "redis.call('hset', KEYS[1], 'mode', 'write', ARGV[1], 1) "
                   "return redis.call('pexpire', KEYS[1], 5000)",
                   name, field) == 1);
  TH_ASSERT_RC(dlock_release(dlock_rwlock_write(rw)), DLOCK_ELOST);
  CU_ASSERT(strstr(dlock_errmsg(), "reported lost") != NULL);
  CU_ASSERT(th_int(&srv, "EXISTS %s", name) == 0);
  dlock_rwlock_free(rw);
  dlock_client_close(c);
}

static void test_write_release_wakes_all_readers(void) {
  const char *name = th_name("wakeall");
  char channel[300];
  snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
  dlock_rwlock *rw = new_rw(cl, name);
  /* readers in another client, so their subscription is visible */
  dlock_client *c2 = th_client(&srv, NULL);
  dlock_rwlock *rw2 = new_rw(c2, name);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_write(rw), 0, 30000), DLOCK_OK);
  th_acquirer rd[20];
  for (int i = 0; i < 20; i++) {
    rd[i] = (th_acquirer){.lock = dlock_rwlock_read(rw2), .wait_ms = 10000,
                          .lease_ms = 5000, .keep = 1};
    th_acquirer_start(&rd[i]);
  }
  /* the event: their client subscribed; then give every thread its first
   * failed try (all 20 are blocked once the hash shows no reader) */
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 3000));
  /* Not a synchronisation: the scenario wants the readers asleep in their
   * wait rather than mid-try when the release comes (a reader mid-try would
   * get in anyway, which would only make this pass more easily). */
  usleep(200 * 1000);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_release(dlock_rwlock_write(rw)), DLOCK_OK);
  int64_t last = 0;
  for (int i = 0; i < 20; i++) {
    th_acquirer_join(&rd[i]);
    TH_ASSERT_RC(rd[i].rc, DLOCK_OK);
    if (rd[i].got_ms - t0 > last)
      last = rd[i].got_ms - t0;
  }
  printf("\n    20 readers in %lld ms after the write release ", (long long)last);
  CU_ASSERT(last * 1000 <= th_scaled_us(&srv, 50000));
  CU_ASSERT_EQUAL(th_int(&srv, "HLEN %s", name), 21); /* mode + 20 readers */
  dlock_rwlock_free(rw2);
  dlock_client_close(c2);
  dlock_rwlock_free(rw);
}

static void test_watchdog_renews_read_holds(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 600;
  dlock_client *c = th_client(&srv, &o);
  const char *name = th_name("wdread");
  dlock_rwlock *rw = new_rw(c, name);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, DLOCK_LEASE_WATCHDOG),
               DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, DLOCK_LEASE_WATCHDOG),
               DLOCK_OK);
  usleep(2000 * 1000); /* three leases */
  CU_ASSERT(th_int(&srv, "PTTL %s", name) > 0);
  /* both hold keys are alive, so the writer is still excluded */
  TH_ASSERT_RC(other_thread(dlock_rwlock_write(rw), 0), DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_release(dlock_rwlock_read(rw)), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(dlock_rwlock_read(rw)), DLOCK_OK);
  TH_ASSERT_RC(other_thread(dlock_rwlock_write(rw), 0), DLOCK_OK);
  dlock_rwlock_free(rw);
  dlock_client_close(c);
}

typedef struct fifty {
  dlock_lock *read;
  pthread_barrier_t *held, *go;
  int rc_acq, rc_rel;
  int64_t count;
} fifty;

static void *fifty_reader(void *arg) {
  fifty *f = arg;
  f->rc_acq = dlock_acquire(f->read, 5000, DLOCK_LEASE_WATCHDOG);
  if (f->rc_acq == DLOCK_OK) /* and a re-entry: hold count 2 */
    f->rc_acq = dlock_acquire(f->read, 0, DLOCK_LEASE_WATCHDOG);
  dlock_lock_state st;
  f->count = dlock_lock_state_get(f->read, &st) == DLOCK_OK ? st.hold_count : -1;
  pthread_barrier_wait(f->held);
  pthread_barrier_wait(f->go); /* held past the watchdog timeout */
  f->rc_rel = dlock_release(f->read);
  if (f->rc_rel == DLOCK_OK)
    f->rc_rel = dlock_release(f->read);
  return NULL;
}

static void test_fifty_readers_renewed(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 600;
  dlock_client *c = th_client(&srv, &o);
  const char *name = th_name("fifty");
  dlock_rwlock *rw = new_rw(c, name);
  pthread_barrier_t held, go;
  pthread_barrier_init(&held, NULL, 51);
  pthread_barrier_init(&go, NULL, 51);
  fifty f[50];
  pthread_t t[50];
  for (int i = 0; i < 50; i++) {
    f[i] = (fifty){dlock_rwlock_read(rw), &held, &go, -99, -99, 0};
    pthread_create(&t[i], NULL, fifty_reader, &f[i]);
  }
  pthread_barrier_wait(&held);
  CU_ASSERT_EQUAL(th_int(&srv, "HLEN %s", name), 51); /* mode + 50 readers */
  usleep(1500 * 1000); /* past two watchdog timeouts: the scenario */
  CU_ASSERT(th_int(&srv, "PTTL %s", name) > 0);
  CU_ASSERT_EQUAL(th_int(&srv, "HLEN %s", name), 51);
  TH_ASSERT_RC(other_thread(dlock_rwlock_write(rw), 0), DLOCK_EBUSY);
  pthread_barrier_wait(&go);
  int ok = 0;
  for (int i = 0; i < 50; i++) {
    pthread_join(t[i], NULL);
    ok += f[i].rc_acq == DLOCK_OK && f[i].rc_rel == DLOCK_OK && f[i].count == 2;
  }
  CU_ASSERT_EQUAL(ok, 50);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  pthread_barrier_destroy(&held);
  pthread_barrier_destroy(&go);
  dlock_rwlock_free(rw);
  dlock_client_close(c);
}

/* ---- processes ------------------------------------------------------------ */

typedef struct mixed {
  const char *url, *name, *counter, *inside;
  int steps;
  atomic_int errors, violations, reads, writes;
} mixed;

static void *mixed_thread(void *arg) {
  mixed *m = arg;
  dlock_client *c = NULL;
  dlock_rwlock *rw = NULL;
  redisContext *ctx = NULL;
  if (dlock_client_open(m->url, NULL, &c) != DLOCK_OK ||
      dlock_rwlock_new(c, m->name, NULL, &rw) != DLOCK_OK) {
    atomic_fetch_add(&m->errors, 1);
    goto out;
  }
  ctx = th_connect_key(m->url, m->counter);
  unsigned seed = (unsigned)(uintptr_t)&seed ^ (unsigned)getpid();
  for (int i = 0; i < m->steps; i++) {
    int write = rand_r(&seed) % 4 == 0;
    dlock_lock *l = write ? dlock_rwlock_write(rw) : dlock_rwlock_read(rw);
    if (dlock_acquire(l, 30000, DLOCK_LEASE_WATCHDOG) != DLOCK_OK) {
      atomic_fetch_add(&m->errors, 1);
      continue;
    }
    redisReply *r;
    if (write) {
      r = redisCommand(ctx, "INCR %s", m->inside); /* writers inside */
      if (!r || r->integer != 1)
        atomic_fetch_add(&m->violations, 1);
      freeReplyObject(r);
      r = redisCommand(ctx, "GET %s", m->counter);
      long v = r && r->type == REDIS_REPLY_STRING ? atol(r->str) : 0;
      freeReplyObject(r);
      freeReplyObject(redisCommand(ctx, "SET %s %ld", m->counter, v + 1));
      freeReplyObject(redisCommand(ctx, "DECR %s", m->inside));
      atomic_fetch_add(&m->writes, 1);
    } else {
      r = redisCommand(ctx, "GET %s", m->inside);
      if (r && r->type == REDIS_REPLY_STRING && atol(r->str) != 0)
        atomic_fetch_add(&m->violations, 1);
      freeReplyObject(r);
      atomic_fetch_add(&m->reads, 1);
    }
    if (dlock_release(l) != DLOCK_OK)
      atomic_fetch_add(&m->errors, 1);
  }
out:
  if (ctx)
    redisFree(ctx);
  dlock_rwlock_free(rw);
  dlock_client_close(c);
  return NULL;
}

static int worker(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[0], "mixed") == 0) {
    /* mixed URL NAME COUNTER THREADS STEPS: prints "writes violations" */
    char inside[300];
    snprintf(inside, sizeof inside, "%s:inside", argv[3]);
    mixed m = {.url = argv[1], .name = argv[2], .counter = argv[3],
               .inside = inside, .steps = atoi(argv[5])};
    int n = atoi(argv[4]);
    th_threads(n < 16 ? n : 16, mixed_thread, &m);
    printf("%d %d %d\n", atomic_load(&m.writes), atomic_load(&m.violations),
           atomic_load(&m.errors));
    return atomic_load(&m.errors) || atomic_load(&m.violations) ? 1 : 0;
  }
  if (argc == 3 && strcmp(argv[0], "zombie") == 0) {
    /* zombie URL NAME: take a 1.5 s read hold, then wait to be killed */
    dlock_client *c = NULL;
    dlock_rwlock *rw = NULL;
    if (dlock_client_open(argv[1], NULL, &c) != DLOCK_OK ||
        dlock_rwlock_new(c, argv[2], NULL, &rw) != DLOCK_OK ||
        dlock_acquire(dlock_rwlock_read(rw), 0, 1500) != DLOCK_OK)
      return 1;
    for (int i = 0; i < 600; i++)
      usleep(100 * 1000);
    return 0;
  }
  return 2;
}

static void test_zombie_reader_cleanup(void) {
  const char *name = th_name("zombie");
  char *args[] = {"zombie", srv.url, (char *)name, NULL};
  pid_t pid = th_spawn_worker(args);
  /* the event: the worker's read hold is in the hash */
  for (int64_t end = th_now_ms() + 5000;
       th_int(&srv, "HLEN %s", name) != 2 && th_now_ms() < end;)
    usleep(2000);
  CU_ASSERT_EQUAL(th_int(&srv, "HLEN %s", name), 2);
  /* its 1.5 s lease began before the hold was seen (a worker of a sanitizer
   * build may take a few hundred ms to get there after its start) */
  int64_t t0 = th_now_ms();
  kill(pid, SIGKILL);
  th_wait_worker(pid, 5000);
  /* a live reader with a long lease comes and goes after the zombie's lease */
  dlock_rwlock *rw = new_rw(cl, name);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, 30000), DLOCK_OK);
  while (th_now_ms() - t0 < 1600)
    usleep(10000);
  TH_ASSERT_RC(dlock_release(dlock_rwlock_read(rw)), DLOCK_OK);
  /* the dead reader's field went with it: the lock is free for a writer */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  TH_ASSERT_RC(other_thread(dlock_rwlock_write(rw), 0), DLOCK_OK);
  dlock_rwlock_free(rw);

  /* and with nobody around, the zombie's hold simply runs out */
  const char *name2 = th_name("zombie2");
  char *args2[] = {"zombie", srv.url, (char *)name2, NULL};
  pid = th_spawn_worker(args2);
  for (int64_t end = th_now_ms() + 5000;
       th_int(&srv, "HLEN %s", name2) != 2 && th_now_ms() < end;)
    usleep(2000);
  kill(pid, SIGKILL);
  th_wait_worker(pid, 5000);
  rw = new_rw(cl, name2);
  int64_t t1 = th_now_ms();
  th_acquirer w = {.lock = dlock_rwlock_write(rw), .wait_ms = 5000,
                   .lease_ms = 5000};
  th_acquirer_start(&w);
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  CU_ASSERT(w.got_ms - t1 <= 1600);
  dlock_rwlock_free(rw);
}

static void test_mixed_processes(void) {
  char name[256], counter[300];
  snprintf(name, sizeof name, "%s", th_name("mixed"));
  /* the counter and its ":inside" beside it share a slot on a cluster */
  snprintf(counter, sizeof counter, "{%s}:counter", name);
  int fds[2][2];
  pid_t pids[2];
  for (int i = 0; i < 2; i++) {
    if (pipe(fds[i]) != 0)
      CU_FAIL_FATAL("pipe");
    pid_t pid = fork();
    if (pid == 0) { /* capture the worker's summary line */
      dup2(fds[i][1], 1);
      char *args[] = {"mixed", srv.url, name, counter, "16", "40", NULL};
      pid_t w = th_spawn_worker(args);
      _exit(th_wait_worker(w, 120000));
    }
    close(fds[i][1]);
    pids[i] = pid;
  }
  long writes = 0;
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(th_wait_worker(pids[i], 130000), 0);
    char buf[128] = {0};
    ssize_t n = read(fds[i][0], buf, sizeof buf - 1);
    close(fds[i][0]);
    writes += n > 0 ? atol(buf) : 0;
  }
  CU_ASSERT(writes > 0);
  CU_ASSERT_EQUAL(th_int(&srv, "INCRBY %s 0", counter), writes);
}

static void test_bad_input(void) {
  dlock_rwlock *rw = NULL;
  TH_ASSERT_RC(dlock_rwlock_new(NULL, "x", NULL, &rw), DLOCK_EINVAL);
  CU_ASSERT_PTR_NULL(rw);
  TH_ASSERT_RC(dlock_rwlock_new(cl, "", NULL, &rw), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_rwlock_new(cl, NULL, NULL, &rw), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_rwlock_new(cl, "x", NULL, NULL), DLOCK_EINVAL);
  dlock_lock *half = (dlock_lock *)1;
  TH_ASSERT_RC(dlock_read_lock_new(cl, "x", NULL, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_write_lock_new(cl, "x", NULL, NULL), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_read_lock_new(NULL, "x", NULL, &half), DLOCK_EINVAL);
  CU_ASSERT(half == NULL);
  TH_ASSERT_RC(dlock_write_lock_new(cl, "", NULL, &half), DLOCK_EINVAL);
  CU_ASSERT_PTR_NULL(dlock_rwlock_read(NULL));
  CU_ASSERT_PTR_NULL(dlock_rwlock_write(NULL));
  dlock_rwlock_free(NULL);
  const char *name = th_name("wrongtype");
  freeReplyObject(th_cmd(&srv, "SET %s x", name));
  rw = new_rw(cl, name);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, 1000), DLOCK_EKIND);
  CU_ASSERT(strstr(dlock_errmsg(), "another type") != NULL);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_write(rw), 0, 1000), DLOCK_EKIND);
  TH_ASSERT_RC(dlock_release(dlock_rwlock_read(rw)), DLOCK_EKIND);
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(dlock_rwlock_write(rw), &st), DLOCK_EKIND);
  redisReply *r = th_cmd(&srv, "GET %s", name);
  CU_ASSERT(r && r->type == REDIS_REPLY_STRING && !strcmp(r->str, "x"));
  freeReplyObject(r);
  dlock_rwlock_free(rw);
  /* force release only in the matching mode */
  rw = new_rw(cl, th_name("force"));
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_read(rw), 0, 10000), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_force_release(dlock_rwlock_write(rw), &th_flag), 0);
  TH_ASSERT_FLAG(dlock_force_release(dlock_rwlock_read(rw), &th_flag), 1);
  TH_ASSERT_RC(dlock_release(dlock_rwlock_read(rw)), DLOCK_ELOST);
  dlock_rwlock_free(rw);
}

/* A writer's try times out mid-script (the server sleeps past its command
 * timeout, while the holder's lease runs out): the writer asks the server
 * whether the try ran (it did not) and goes on within its budget: it gets
 * the lock, not DLOCK_EIO. */
static void test_timed_out_try_keeps_waiting(void) {
  const char *name = th_name("rw-midscript");
  dlock_rwlock *held = new_rw(cl, name);
  TH_ASSERT_RC(dlock_acquire(dlock_rwlock_write(held), 0, 700), DLOCK_OK);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.command_timeout_ms = 200;
  dlock_client *cw = th_client(&srv, &o);
  dlock_rwlock *rw = new_rw(cw, name);
  /* its next try comes when the 700 ms lease ends: inside the sleep */
  th_acquirer w = {.lock = dlock_rwlock_write(rw), .wait_ms = 10000,
                   .lease_ms = 5000};
  th_acquirer_start(&w);
  char channel[160];
  snprintf(channel, sizeof channel, "redisson_rwlock:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
  redisReply *r = th_cmd(th_node_of(&srv, name), "DEBUG SLEEP 0.9");
  freeReplyObject(r);
  th_acquirer_join(&w);
  TH_ASSERT_RC(w.rc, DLOCK_OK);
  dlock_rwlock_free(rw);
  dlock_rwlock_free(held);
  dlock_client_close(cw);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("rwlock", suite_init, suite_clean);
  CU_add_test(s, "readers_share_writer_excluded", test_readers_share_writer_excluded);
  CU_add_test(s, "writer_excludes_readers", test_writer_excludes_readers);
  CU_add_test(s, "downgrade", test_downgrade);
  CU_add_test(s, "upgrade_refused", test_upgrade_refused);
  CU_add_test(s, "per_hold_leases", test_per_hold_leases);
  CU_add_test(s, "timed_out_try_keeps_waiting", test_timed_out_try_keeps_waiting);
  CU_add_test(s, "ttl_follows_longest_hold", test_ttl_follows_longest_hold);
  CU_add_test(s, "write_lease_expiry_lets_readers_in",
              test_write_lease_expiry_lets_readers_in);
  CU_add_test(s, "write_release_wakes_all_readers",
              test_write_release_wakes_all_readers);
  CU_add_test(s, "watchdog_renews_read_holds", test_watchdog_renews_read_holds);
  CU_add_test(s, "fifty_readers_renewed", test_fifty_readers_renewed);
  CU_add_test(s, "zombie_reader_cleanup", test_zombie_reader_cleanup);
  CU_add_test(s, "mixed_processes", test_mixed_processes);
  CU_add_test(s, "write_reported_lost_release", test_write_reported_lost_release);
  CU_add_test(s, "bad_input", test_bad_input);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, worker); }
