/* A torture worker process: one dlock client per server, T threads, each
 * looping acquire -> section -> release and logging every attempt. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlock/dlock.h"
#include "java_peer.h"
#include "redisson_peer.h"
#include "torture.h"

typedef struct proc_ctx {
  const tt_opts *o;
  tt_arena *a;
  int proc;
  dlock_client *clients[TT_MAX_SERVERS];
  int first_slot, nthreads;
  jpeer jvm; /* --jvm, an odd worker: its Redisson client (pid > 0) */
} proc_ctx;

static proc_ctx P;

int64_t tt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_us(int64_t us) {
  if (us <= 0)
    return;
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* A section's time inside (us): hold_min_us .. hold_us, at random. */
static int64_t draw_hold(const tt_opts *o, unsigned *seed) {
  if (o->hold_us <= o->hold_min_us)
    return o->hold_us;
  return o->hold_min_us +
         (int64_t)(rand_r(seed) % (unsigned)(o->hold_us - o->hold_min_us + 1));
}

/* The holder of owner_id in this process is told: flag its section. */
static void mark_lost(uint64_t owner_id) {
  for (int i = 0; i < P.nthreads; i++) {
    tt_slot *s = &P.a->slots[P.first_slot + i];
    if (s->owner_id != owner_id)
      continue;
    int64_t cur = atomic_load(&s->cur);
    if (cur < 0)
      continue;
    int64_t none = 0;
    atomic_compare_exchange_strong(&P.a->recs[cur].lost_at, &none, tt_now_ns());
    atomic_fetch_or(&P.a->recs[cur].flags, TT_R_LOST);
  }
}

static void on_lost(void *data, const char *name, size_t len, uint64_t owner_id,
                    dlock_lost_reason reason) {
  mark_lost(owner_id);
}

static void on_redlock_lost(void *data, dlock_lock *rl, uint64_t owner_id) {
  mark_lost(owner_id);
}

typedef struct thread_ctx {
  int slot;
  unsigned seed;
  dlock_lock *locks[2 * TT_MAX_SERVERS + 2]; /* members, then what is used */
  size_t nlocks;
  dlock_lock *excl, *read; /* the lock taken (rw: write and read halves) */
  dlock_rwlock *rw;
  dlock_election *el; /* --kind election: excl is its lock */
  int java;       /* a Redisson-behaving client instead of dlock */
  int jvm;        /* ... a thread of the real one (P.jvm) */
  char jslot[16]; /* its slot there */
  redisContext *raw; /* --writes plain: its own connection to the server */
  rp_client peer; /* its connection and UUID */
  long tid;       /* its thread id in the owner name */
} thread_ctx;

/* --jvm: Redisson's threadWaitTime (fairLockWaitTimeout), the fair
 * queue's deadline step, which every client of the lock must share */
static int64_t jvm_thread_wait(const tt_opts *o) { return 2 * o->slot_ms; }

/* Redisson's name of the lock a real Java thread takes (Peer.java). */
static const char *jvm_kind(int reading) {
  switch (P.o->kind) {
  case TT_FAIR: return "fair";
  case TT_ONCE: return "nonreentrant";
  case TT_ONCE_FAIR: return "nonreentrantfair";
  case TT_SPIN: return "spin";
  case TT_RW: return reading ? "read" : "write";
  default: return "reentrant";
  }
}

/* A real Java thread's tryLock or unlock; *at: the JVM's System.nanoTime()
 * at the grant, or just before the unlock (CLOCK_MONOTONIC, as tt_now_ns). */
static int jvm_call(thread_ctx *t, const char *req, int64_t wait_ms,
                    int64_t *at, char *err, size_t esize) {
  char ans[512];
  int id = jp_send(&P.jvm, t->jslot, "%s", req);
  if (id < 0 || jp_wait(&P.jvm, id, (int)wait_ms + 15000, ans, sizeof ans) != 0) {
    snprintf(err, esize, "java client: no answer to %.100s", req);
    return DLOCK_EIO;
  }
  char word[16] = "";
  long long ns = 0;
  if (sscanf(ans, "%15s %lld", word, &ns) == 2 &&
      (strcmp(word, "true") == 0 || strcmp(word, "ok") == 0)) {
    *at = ns;
    return DLOCK_OK;
  }
  if (strcmp(word, "false") == 0)
    return DLOCK_ETIMEDOUT;
  snprintf(err, esize, "java client: %.40s: %.100s", req, ans);
  /* unlock of a lock this thread no longer holds: its lease ended */
  return strstr(ans, "IllegalMonitorState") ? DLOCK_ELOST : DLOCK_EIO;
}

/* A Java client's acquire and release, in dlock's return codes. */
static int java_acquire(thread_ctx *t, int reading, int64_t lease,
                        int64_t *enter, tt_slot *s) {
  const tt_opts *o = P.o;
  const char *name = P.a->name;
  if (t->jvm) {
    char req[400];
    snprintf(req, sizeof req, "enter %s %s %lld %lld", jvm_kind(reading), name,
             (long long)o->wait_ms, (long long)(lease > 0 ? lease : -1));
    return jvm_call(t, req, o->wait_ms, enter, s->last_error,
                    sizeof s->last_error);
  }
  *enter = 0;
  if (lease <= 0)
    lease = 30000; /* no watchdog in the peer: sections are short */
  int rc = TT_FIFO(o->kind) ? rp_fair_lock(&t->peer, name, t->tid, lease, 0,
                                             o->wait_ms, NULL)
           : o->kind != TT_RW ? rp_lock_lock(&t->peer, name, t->tid, lease,
                                             o->wait_ms, NULL)
           : reading ? rp_read_lock(&t->peer, name, t->tid, lease, o->wait_ms, NULL)
                     : rp_write_lock(&t->peer, name, t->tid, lease, o->wait_ms, NULL);
  return rc == 1 ? DLOCK_OK : rc == 0 ? DLOCK_ETIMEDOUT : DLOCK_EIO;
}

static int java_release(thread_ctx *t, int reading, int64_t *exit, tt_slot *s) {
  const char *name = P.a->name;
  if (t->jvm) {
    char req[400];
    snprintf(req, sizeof req, "leave %s %s", jvm_kind(reading), name);
    return jvm_call(t, req, 0, exit, s->last_error, sizeof s->last_error);
  }
  int rc = TT_FIFO(P.o->kind) ? rp_fair_unlock(&t->peer, name, t->tid)
           : P.o->kind != TT_RW ? rp_lock_unlock(&t->peer, name, t->tid)
           : reading ? rp_read_unlock(&t->peer, name, t->tid)
                     : rp_write_unlock(&t->peer, name, t->tid);
  return rc >= 0 ? DLOCK_OK : rc == -2 ? DLOCK_ELOST : DLOCK_EIO;
}

static int make_locks(thread_ctx *t, int index) {
  const tt_opts *o = P.o;
  char own[96], b[112];
  const char *name = P.a->name;
  if (o->broken) { /* the checker's self-test: a lock nobody else takes */
    snprintf(own, sizeof own, "%s:broken:%d", P.a->name, index);
    name = own;
  }
  int rc = DLOCK_OK;
  switch (o->kind) {
  case TT_LOCK:
    return dlock_reentrant_lock_new(P.clients[0], name, NULL, &t->excl);
  case TT_FENCED:
    return dlock_fenced_lock_new(P.clients[0], name, NULL, &t->excl);
  case TT_ONCE:
    return dlock_non_reentrant_lock_new(P.clients[0], name, NULL, &t->excl);
  case TT_SPIN:
    return dlock_spin_lock_new(P.clients[0], name, NULL, &t->excl);
  case TT_GROUP: { /* 32 values, the same for every worker */
    char vb[32][8];
    const char *values[32];
    for (int i = 0; i < 32; i++) {
      snprintf(vb[i], sizeof vb[i], "v%d", i);
      values[i] = vb[i];
    }
    return dlock_group_lock_new(P.clients[0], name, values, NULL, 32, NULL,
                                &t->excl);
  }
  case TT_FAIR:
  case TT_ONCE_FAIR: {
    dlock_lock_opts lo = DLOCK_LOCK_OPTS_INIT;
    lo.wait_slot_ms = o->slot_ms;
    if (o->jvm) /* the JVMs' fairLockWaitTimeout: one value for all */
      lo.thread_wait_ms = jvm_thread_wait(o);
    return o->kind == TT_FAIR
               ? dlock_fair_lock_new(P.clients[0], name, &lo, &t->excl)
               : dlock_non_reentrant_fair_lock_new(P.clients[0], name, &lo,
                                                   &t->excl);
  }
  case TT_RW:
    rc = dlock_rwlock_new(P.clients[0], name, NULL, &t->rw);
    if (rc == DLOCK_OK) {
      t->excl = dlock_rwlock_write(t->rw);
      t->read = dlock_rwlock_read(t->rw);
    }
    return rc;
  case TT_SEMAPHORE:
    return dlock_semaphore_lock_new(P.clients[0], name, NULL, &t->excl);
  case TT_ELECTION: /* its lock bound to the thread, as the records say */
    rc = dlock_election_new(P.clients[0], name, NULL, &t->el);
    if (rc == DLOCK_OK) {
      t->excl = dlock_election_lock(t->el);
      rc = dlock_lock_bind_owner(t->excl, dlock_thread_id());
    }
    return rc;
  case TT_MULTI: /* even threads take {A,B}, odd ones {B,A} */
    for (int i = 0; i < 2 && rc == DLOCK_OK; i++) {
      snprintf(b, sizeof b, "%s:%c", name, (index + i) % 2 ? 'B' : 'A');
      rc = dlock_reentrant_lock_new(P.clients[0], b, NULL, &t->locks[t->nlocks]);
      if (rc == DLOCK_OK)
        t->nlocks++;
    }
    return rc == DLOCK_OK ? dlock_multi_new(t->locks, 2, &t->excl) : rc;
  case TT_REDLOCK: {
    for (int i = 0; i < o->servers && rc == DLOCK_OK; i++) {
      rc = dlock_reentrant_lock_new(P.clients[i], name, NULL, &t->locks[t->nlocks]);
      if (rc == DLOCK_OK)
        t->nlocks++;
    }
    dlock_redlock_opts ro = DLOCK_REDLOCK_OPTS_INIT;
    ro.on_lost = on_redlock_lost;
    return rc == DLOCK_OK ? dlock_redlock_new(t->locks, t->nlocks, &ro, &t->excl)
                          : rc;
  }
  case TT_NKINDS:
    break;
  }
  return DLOCK_EINVAL;
}

static void free_locks(thread_ctx *t) {
  if (t->el)
    dlock_election_free(t->el);
  else if (t->rw)
    dlock_rwlock_free(t->rw);
  else if (t->excl)
    dlock_lock_free(t->excl);
  for (size_t i = 0; i < t->nlocks; i++)
    dlock_lock_free(t->locks[i]);
}

static void note_error(tt_slot *s, const char *what, int rc) {
  snprintf(s->last_error, sizeof s->last_error, "%s: %s: %s", what,
           dlock_errname(rc), dlock_errmsg());
}

/* ---- --writes: a counter and a log in Redis, beside the lock --------------- */

#define READ_BODY "return redis.call('get', KEYS[1])"
#define WRITE_BODY "redis.call('set', KEYS[1], ARGV[1])\n" \
                   "return redis.call('rpush', KEYS[2], ARGV[2])"

/* The counter (-1 when it could not be read: the section writes nothing;
 * -2 refused: the guard says the hold is gone). */
static int64_t data_read(thread_ctx *t, dlock_lock *l, const char *const keys[2],
                         const size_t klens[2], tt_slot *s) {
  if (P.o->writes == TT_W_PLAIN) {
    redisReply *r = t->raw ? redisCommand(t->raw, "GET %s", keys[0]) : NULL;
    int64_t v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str)
                : r && r->type == REDIS_REPLY_NIL  ? 0
                                                   : -1;
    if (r)
      freeReplyObject(r);
    return v;
  }
  dlock_reply *r = NULL;
  int rc = dlock_guarded_eval(l, READ_BODY, 1, keys, klens, 0, NULL, NULL, &r);
  int64_t v = rc == DLOCK_EFENCED ? -2 : rc != DLOCK_OK ? -1
              : r && r->type == DLOCK_REPLY_STRING ? atoll(r->str)
                                                   : 0;
  if (rc != DLOCK_OK && rc != DLOCK_EFENCED)
    note_error(s, "guarded read", rc);
  dlock_reply_free(r);
  return v;
}

/* Write value (and "token:value" to the log): 1 accepted, 0 refused, -1
 * failed, 2 written but not confirmed by a replica (DLOCK_EUNACKED). */
static int data_write(thread_ctx *t, dlock_lock *l, const char *const keys[2],
                      const size_t klens[2], int64_t token, int64_t value,
                      tt_slot *s) {
  char v[32], entry[64];
  snprintf(v, sizeof v, "%lld", (long long)value);
  snprintf(entry, sizeof entry, "%lld:%lld", (long long)token, (long long)value);
  if (P.o->writes == TT_W_PLAIN) {
    if (t->raw == NULL)
      return -1;
    redisAppendCommand(t->raw, "SET %s %s", keys[0], v);
    redisAppendCommand(t->raw, "RPUSH %s %s", keys[1], entry);
    int ok = 1;
    for (int i = 0; i < 2; i++) {
      void *r = NULL;
      ok = redisGetReply(t->raw, &r) == REDIS_OK && ok;
      if (r)
        freeReplyObject(r);
    }
    return ok ? 1 : -1;
  }
  const char *args[] = {v, entry};
  size_t alens[] = {strlen(v), strlen(entry)};
  int rc = dlock_guarded_eval(l, WRITE_BODY, 2, keys, klens, 2, args, alens, NULL);
  if (rc != DLOCK_OK && rc != DLOCK_EFENCED && rc != DLOCK_EUNACKED)
    note_error(s, "guarded write", rc);
  if (rc == DLOCK_EUNACKED || (rc != DLOCK_OK && rc != DLOCK_EFENCED)) {
    /* written but not confirmed, or its outcome unknown (an answer lost
     * with its connection): kept apart by its log entry, so a log entry
     * of it is not taken for a confirmed write's */
    tt_arena *a = P.a;
    int i = atomic_fetch_add(&a->nunacked, 1);
    if (i < TT_MAX_UNACKED) {
      a->unacked[i].token = token;
      a->unacked[i].value = value;
    }
    if (rc == DLOCK_EUNACKED)
      return 2;
  }
  return rc == DLOCK_OK ? 1 : rc == DLOCK_EFENCED ? 0 : -1;
}

/* A section with --writes: read, hold (the pause nemesis strikes here),
 * write + 1. */
static void data_section(thread_ctx *t, dlock_lock *l, int64_t token,
                         int64_t hold, tt_slot *s) {
  tt_arena *a = P.a;
  char ck[128], lk[128];
  snprintf(ck, sizeof ck, "{%s}:counter", a->name);
  snprintf(lk, sizeof lk, "{%s}:log", a->name);
  const char *keys[] = {ck, lk};
  size_t klens[] = {strlen(ck), strlen(lk)};
  int64_t v = data_read(t, l, keys, klens, s);
  if (v == -2)
    atomic_fetch_add(&a->writes_refused, 1);
  if (v < 0)
    return;
  atomic_store(&s->phase, TT_P_READ);
  sleep_us(hold);
  int w = data_write(t, l, keys, klens, token, v + 1, s);
  atomic_store(&s->phase, TT_P_IN);
  if (w == 2)
    atomic_fetch_add(&a->writes_unacked, 1);
  else if (w > 0)
    atomic_fetch_add(&a->writes_accepted, 1);
  else if (w == 0)
    atomic_fetch_add(&a->writes_refused, 1);
  else
    atomic_fetch_add(&s->errors, 1);
}

static void *thread_main(void *arg) {
  thread_ctx *t = arg;
  const tt_opts *o = P.o;
  tt_arena *a = P.a;
  tt_slot *s = &a->slots[t->slot];
  s->owner_id = dlock_thread_id();
  if (t->jvm) { /* Redisson's owner of its slot's thread, for the fair
                   queue's reader */
    snprintf(t->jslot, sizeof t->jslot, "s%d", t->slot);
    const char *own = jp_call(&P.jvm, t->jslot, "owner");
    snprintf(s->owner, sizeof s->owner, "%s", own);
    if (strchr(own, ':') == NULL || strncmp(own, "error", 5) == 0) {
      snprintf(s->last_error, sizeof s->last_error, "java client: owner: %s", own);
      atomic_fetch_add(&s->errors, 1);
      atomic_store(&s->phase, TT_P_GONE);
      return NULL;
    }
  } else {
    snprintf(s->owner, sizeof s->owner, "%s:%llu", dlock_client_id(P.clients[0]),
             (unsigned long long)s->owner_id);
  }
  if (t->java && !t->jvm) {
    t->tid = t->slot;
    const char *colon = strrchr(P.a->urls[0], ':');
    if (colon == NULL || rp_open(&t->peer, atoi(colon + 1)) != 0) {
      snprintf(s->last_error, sizeof s->last_error, "java client: no connection");
      atomic_fetch_add(&s->errors, 1);
      atomic_store(&s->phase, TT_P_GONE);
      return NULL;
    }
    rp_owner(&t->peer, t->tid, s->owner);
  }
  if (o->writes == TT_W_PLAIN) { /* one server: redis://127.0.0.1:PORT */
    const char *colon = strrchr(P.a->urls[0], ':');
    struct timeval tv = {2, 0};
    t->raw = colon ? redisConnectWithTimeout("127.0.0.1", atoi(colon + 1), tv)
                   : NULL;
    if (t->raw && t->raw->err) {
      redisFree(t->raw);
      t->raw = NULL;
    }
  }
  int rc = t->jvm ? DLOCK_OK : make_locks(t, t->slot);
  if (rc != DLOCK_OK) {
    note_error(s, "make lock", rc);
    atomic_fetch_add(&s->errors, 1);
    atomic_store(&s->phase, TT_P_GONE);
    return NULL;
  }
  int64_t lease = o->lease_ms > 0 ? o->lease_ms : DLOCK_LEASE_WATCHDOG;
  while (!atomic_load(&a->stop)) {
    int reading = o->kind == TT_RW && (int)(rand_r(&t->seed) % 100) < o->read_pct;
    dlock_lock *l = reading ? t->read : t->excl;
    int64_t idx = atomic_fetch_add(&a->nrecs, 1);
    if (idx >= TT_MAX_RECS) {
      atomic_store(&a->stop, 1);
      break;
    }
    tt_rec *r = &a->recs[idx];
    r->slot = t->slot;
    atomic_store(&r->flags, reading ? TT_R_READ : 0);
    atomic_store(&s->phase, TT_P_WAITING);
    r->invoke = tt_now_ns();
    atomic_store(&s->cur, idx);
    dlock_grant g = {0, 0};
    char value[32];
    snprintf(value, sizeof value, "slot %d", t->slot);
    int64_t at = 0; /* the JVM's time of the grant (0: take ours) */
    rc = t->java ? java_acquire(t, reading, o->lease_ms, &at, s)
         : t->el ? dlock_election_campaign(t->el, value, strlen(value),
                                           o->wait_ms, lease, &g.token)
                 : dlock_acquire_grant(l, o->wait_ms, lease, &g);
    r->rc = rc;
    r->token = g.token;
    if (rc != DLOCK_OK) {
      r->done = tt_now_ns();
      atomic_store(&s->phase, TT_P_START);
      atomic_store(&s->cur, -1);
      if (rc == DLOCK_ETIMEDOUT || rc == DLOCK_EQUORUM)
        atomic_fetch_add(&s->timeouts, 1);
      else if (rc == DLOCK_ELOST) /* a grant read after its lease */
        atomic_fetch_add(&s->spent, 1);
      else
        atomic_fetch_add(&s->errors, 1);
      if (rc != DLOCK_ETIMEDOUT && !t->jvm)
        note_error(s, "acquire", rc);
      if (rc != DLOCK_ETIMEDOUT && rc != DLOCK_EQUORUM)
        sleep_us(10000); /* an error is not a reason to spin */
      continue;
    }
    r->enter = at ? at : tt_now_ns();
    if (at && (at < r->invoke || at > tt_now_ns())) { /* not our clock */
      snprintf(s->last_error, sizeof s->last_error,
               "java client: grant time %lld outside the call", (long long)at);
      atomic_fetch_add(&s->errors, 1);
    }
    atomic_store(&s->phase, TT_P_IN);
    atomic_fetch_add(&s->grants, 1);
    if (t->java)
      atomic_fetch_add(&a->java_sections, 1);
    int64_t hold = draw_hold(o, &t->seed);
    if (o->writes) {
      data_section(t, l, g.token, hold, s);
    } else if (!reading && o->kind != TT_SEMAPHORE) {
      int64_t v = a->counter;
      sleep_us(hold);
      atomic_store(&s->phase, TT_P_COMMIT);
      a->counter = v + 1;
      atomic_fetch_add(&a->commits, 1);
      atomic_store(&s->phase, TT_P_IN);
    } else {
      sleep_us(hold);
    }
    r->exit = tt_now_ns();
    atomic_store(&s->phase, TT_P_RELEASING);
    at = 0;
    rc = t->java ? java_release(t, reading, &at, s)
         : t->el ? dlock_election_resign(t->el)
                 : dlock_release(l);
    r->done = tt_now_ns();
    if (at)
      r->exit = at; /* the JVM's: after ours, before its unlock */
    if (rc == DLOCK_ELOST) {
      atomic_fetch_or(&r->flags, TT_R_ELOST);
    } else if (rc != DLOCK_OK) {
      atomic_fetch_or(&r->flags, TT_R_RELERR);
      atomic_fetch_add(&s->release_errors, 1);
      if (!t->jvm)
        note_error(s, "release", rc);
    }
    atomic_store(&s->cur, -1);
    atomic_store(&s->phase, TT_P_START);
    int64_t n = atomic_fetch_add(&a->granted, 1) + 1;
    if (o->sections > 0 && n >= o->sections)
      atomic_store(&a->stop, 1);
  }
  atomic_store(&s->phase, TT_P_GONE);
  free_locks(t);
  if (t->java && !t->jvm)
    rp_close(&t->peer);
  if (t->raw)
    redisFree(t->raw);
  return NULL;
}

/* ---- the async worker (--async N) -------------------------------------------
 * One thread drives N owners at once with the non-blocking API, the way an
 * event-loop server would: completions come through the client's queue,
 * whose descriptor the thread polls, and each owner's section lasts its
 * hold on a timer of the loop (the due times below), not on a sleep. */

typedef struct aowner {
  thread_ctx t;
  uint64_t owner;
  int64_t idx;      /* its attempt's record, -1 none */
  int reading;
  dlock_lock *l;
  int64_t due_ns;   /* in its section: leave it then; 0 not in one */
  int64_t counter;  /* the counter it read on entering */
  int idle;         /* stopped: no call of its own under way */
} aowner;

static aowner *owners;
static int nowners, idle_owners;

static tt_slot *slot_of(aowner *x) { return &P.a->slots[x->t.slot]; }

static void a_next(aowner *x);

static void a_released(void *data, const dlock_result *res) {
  aowner *x = data;
  tt_slot *s = slot_of(x);
  tt_rec *r = &P.a->recs[x->idx];
  r->done = tt_now_ns();
  if (res->rc == DLOCK_ELOST) {
    atomic_fetch_or(&r->flags, TT_R_ELOST);
  } else if (res->rc != DLOCK_OK) {
    atomic_fetch_or(&r->flags, TT_R_RELERR);
    atomic_fetch_add(&s->release_errors, 1);
    snprintf(s->last_error, sizeof s->last_error, "release: %s: %s",
             dlock_errname(res->rc), res->errmsg);
  }
  atomic_store(&s->cur, -1);
  atomic_store(&s->phase, TT_P_START);
  int64_t n = atomic_fetch_add(&P.a->granted, 1) + 1;
  if (P.o->sections > 0 && n >= P.o->sections)
    atomic_store(&P.a->stop, 1);
  a_next(x);
}

/* The section's end (its hold passed): commit, leave, release. */
static void a_leave(aowner *x) {
  tt_slot *s = slot_of(x);
  tt_rec *r = &P.a->recs[x->idx];
  x->due_ns = 0;
  if (!x->reading && P.o->kind != TT_SEMAPHORE) {
    atomic_store(&s->phase, TT_P_COMMIT);
    P.a->counter = x->counter + 1;
    atomic_fetch_add(&P.a->commits, 1);
    atomic_store(&s->phase, TT_P_IN);
  }
  r->exit = tt_now_ns();
  atomic_store(&s->phase, TT_P_RELEASING);
  int rc = dlock_release_async(x->l, x->owner, a_released, x, NULL);
  if (rc != DLOCK_OK) {
    dlock_result fake = {.rc = rc, .errmsg = dlock_errmsg()};
    a_released(x, &fake);
  }
}

static void a_granted(void *data, const dlock_result *res) {
  aowner *x = data;
  tt_slot *s = slot_of(x);
  tt_rec *r = &P.a->recs[x->idx];
  r->rc = res->rc;
  if (res->rc != DLOCK_OK) {
    r->done = tt_now_ns();
    atomic_store(&s->phase, TT_P_START);
    atomic_store(&s->cur, -1);
    if (res->rc == DLOCK_ETIMEDOUT)
      atomic_fetch_add(&s->timeouts, 1);
    else if (res->rc == DLOCK_ELOST) /* a grant read after its lease */
      atomic_fetch_add(&s->spent, 1);
    else
      atomic_fetch_add(&s->errors, 1);
    if (res->rc != DLOCK_ETIMEDOUT)
      snprintf(s->last_error, sizeof s->last_error, "acquire: %s: %s",
               dlock_errname(res->rc), res->errmsg);
    a_next(x);
    return;
  }
  r->enter = tt_now_ns();
  atomic_store(&s->phase, TT_P_IN);
  atomic_fetch_add(&s->grants, 1);
  int64_t hold = draw_hold(P.o, &x->t.seed);
  x->counter = P.a->counter; /* read now, written back when it leaves */
  x->due_ns = r->enter + hold * 1000;
  if (hold == 0)
    a_leave(x);
}

static void a_next(aowner *x) {
  tt_slot *s = slot_of(x);
  int64_t idx = atomic_load(&P.a->stop) ? TT_MAX_RECS
                                        : atomic_fetch_add(&P.a->nrecs, 1);
  if (idx >= TT_MAX_RECS) {
    atomic_store(&P.a->stop, 1);
    atomic_store(&s->phase, TT_P_GONE);
    x->idle = 1;
    idle_owners++;
    return;
  }
  x->idx = idx;
  x->reading = P.o->kind == TT_RW &&
               (int)(rand_r(&x->t.seed) % 100) < P.o->read_pct;
  x->l = x->reading ? x->t.read : x->t.excl;
  tt_rec *r = &P.a->recs[idx];
  r->slot = x->t.slot;
  atomic_store(&r->flags, x->reading ? TT_R_READ : 0);
  atomic_store(&s->phase, TT_P_WAITING);
  r->invoke = tt_now_ns();
  atomic_store(&s->cur, idx);
  int64_t lease = P.o->lease_ms > 0 ? P.o->lease_ms : DLOCK_LEASE_WATCHDOG;
  int rc = dlock_acquire_async(x->l, x->owner, P.o->wait_ms, lease, a_granted,
                               x, NULL);
  if (rc != DLOCK_OK) {
    dlock_result fake = {.rc = rc, .errmsg = dlock_errmsg()};
    a_granted(x, &fake);
  }
}

/* Where a worker connects from: --loss, --delay: the link's end; --split:
 * an address of its own (127.0.1.<proc + 1>); else anywhere. */
static const char *source_addr(const tt_opts *o, int proc) {
  if (o->loss_pct || o->delay_ms || o->jitter_ms)
    return "127.0.0.3";
  static char addr[24];
  if (o->split) { /* its own: the harness puts it on one side at each cut */
    snprintf(addr, sizeof addr, "127.0.1.%d", proc + 1);
    return addr;
  }
  return NULL;
}

/* dlock_client_open, which on a lossy or slow link (--loss, --delay) may
 * meet a lost SYN or handshake answer (TCP resends after 1 s, then 2 s
 * more): there it has 7 s to connect (unless the run set its own time)
 * and tries 3 times, as a service starting on a bad link would, before the
 * worker gives up. */
static int open_client(const tt_opts *o, const char *url,
                       dlock_client_opts *co, dlock_client **out) {
  int lossy = o->loss_pct || o->delay_ms || o->jitter_ms;
  dlock_client_opts defaults = DLOCK_CLIENT_OPTS_INIT;
  if (lossy && co->connect_timeout_ms == defaults.connect_timeout_ms)
    co->connect_timeout_ms = 7000;
  int rc = DLOCK_EIO;
  for (int i = 0; i < (lossy ? 3 : 1) && rc == DLOCK_EIO; i++)
    rc = dlock_client_open(url, co, out);
  return rc;
}

static int async_main(const tt_opts *o, tt_arena *a, int proc) {
  if (o->kind != TT_LOCK && o->kind != TT_FENCED && o->kind != TT_FAIR &&
      o->kind != TT_RW && o->kind != TT_ONCE && o->kind != TT_ONCE_FAIR &&
      o->kind != TT_SPIN && o->kind != TT_GROUP) {
    fprintf(stderr, "worker %d: --async takes lock, fenced, fair, rw, "
            "non-reentrant, non-reentrant-fair, spin, group or election\n",
            proc);
    return 2;
  }
  dlock_client_opts co = DLOCK_CLIENT_OPTS_INIT;
  co.watchdog_timeout_ms = o->watchdog_ms;
  co.command_timeout_ms = o->command_timeout_ms;
  co.on_lost = on_lost;
  co.completions = DLOCK_COMPLETE_QUEUE;
  co.source_addr = source_addr(o, proc);
  co.replica_sync_ms = o->replica_sync_ms;
  co.replica_sync_all = o->replica_sync_all;
  if (open_client(o, a->urls[0], &co, &P.clients[0]) != DLOCK_OK) {
    fprintf(stderr, "worker %d: open %s: %s\n", proc, a->urls[0], dlock_errmsg());
    return 3;
  }
  nowners = o->async;
  P.nthreads = nowners;
  P.first_slot = atomic_fetch_add(&a->nslots, nowners);
  if (P.first_slot + nowners > TT_MAX_SLOTS)
    return 4;
  owners = calloc((size_t)nowners, sizeof *owners);
  for (int i = 0; i < nowners; i++) {
    aowner *x = &owners[i];
    tt_slot *s = &a->slots[P.first_slot + i];
    s->pid = getpid();
    s->proc = proc;
    atomic_store(&s->cur, -1);
    x->t.slot = P.first_slot + i;
    x->t.seed = o->seed ^ (unsigned)(getpid() * 7919 + i);
    x->owner = dlock_owner_id_new();
    s->owner_id = x->owner;
    snprintf(s->owner, sizeof s->owner, "%s:%llu", dlock_client_id(P.clients[0]),
             (unsigned long long)x->owner);
    int rc = make_locks(&x->t, x->t.slot);
    if (rc != DLOCK_OK) {
      fprintf(stderr, "worker %d: make lock: %s\n", proc, dlock_errmsg());
      return 3;
    }
  }
  for (int i = 0; i < nowners; i++)
    a_next(&owners[i]);
  int fd = dlock_client_completion_fd(P.clients[0]);
  /* after the stop, calls under way end within the wait budget */
  int64_t stop_ns = 0, grace_ns = (o->wait_ms + 5000) * 1000000;
  while (idle_owners < nowners) {
    int64_t now = tt_now_ns(), next = now + 100000000;
    for (int i = 0; i < nowners; i++) {
      aowner *x = &owners[i];
      if (x->due_ns && x->due_ns <= now)
        a_leave(x);
      else if (x->due_ns && x->due_ns < next)
        next = x->due_ns;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int ms = (int)((next - now + 999999) / 1000000);
    if (poll(&p, 1, ms < 0 ? 0 : ms) == 1)
      dlock_client_run_completions(P.clients[0], 0);
    if (atomic_load(&a->stop) && stop_ns == 0)
      stop_ns = tt_now_ns();
    if (stop_ns && tt_now_ns() - stop_ns > grace_ns)
      break;
  }
  dlock_client_close(P.clients[0]); /* what is left ends here (ECLOSED) */
  for (int i = 0; i < nowners; i++)
    free_locks(&owners[i].t);
  free(owners);
  return 0;
}

/* --kind election: the process's observer logs every change it is told
 * (engine thread; one writer per log). */
static void observed(void *data, const dlock_result *res) {
  tt_obs *ob = data;
  int64_t n = atomic_load(&ob->n);
  if (res->election == NULL || n >= TT_OBS_EVENTS)
    return;
  ob->ev[n] = (tt_obs_ev){.at = tt_now_ns(),
                          .term = res->election->leader.term,
                          .version = res->election->leader.version,
                          .change = (int32_t)res->election->change,
                          .resync = res->election->resync};
  atomic_store(&ob->n, n + 1);
}

static void observe(tt_arena *a, int proc, dlock_election **el) {
  int k = atomic_fetch_add(&a->nobs, 1);
  if (k >= TT_MAX_OBS ||
      dlock_election_new(P.clients[0], a->name, NULL, el) != DLOCK_OK)
    return;
  a->obs[k].proc = proc;
  if (dlock_election_observe(*el, observed, &a->obs[k], NULL) != DLOCK_OK)
    fprintf(stderr, "worker %d: observe: %s\n", proc, dlock_errmsg());
}

int tt_worker_main(const tt_opts *o, tt_arena *a, int proc) {
  P.o = o;
  P.a = a;
  P.proc = proc;
  if (o->async > 0)
    return async_main(o, a, proc);
  /* --jvm: the odd workers are real Redisson clients, a JVM each (it dies
   * with this process), their threads its threads */
  int jvm = o->jvm != NULL && proc % 2 == 1;
  if (jvm) {
    char times[48];
    snprintf(times, sizeof times, "%lld,%lld", (long long)o->watchdog_ms,
             (long long)jvm_thread_wait(o));
    if (jp_start_times(&P.jvm, o->jvm, a->urls[0], times) != 0) {
      fprintf(stderr, "worker %d: the Java peer (Redisson %s) did not start\n",
              proc, o->jvm);
      return 3;
    }
  }
  int nclients = jvm ? 0 : o->kind == TT_REDLOCK ? o->servers : 1;
  for (int i = 0; i < nclients; i++) {
    dlock_client_opts co = DLOCK_CLIENT_OPTS_INIT;
    co.watchdog_timeout_ms = o->watchdog_ms;
    co.command_timeout_ms = o->command_timeout_ms;
    co.on_lost = on_lost;
    co.lazy_connect = o->kind == TT_REDLOCK;
    co.share_engine = o->one_engine && i > 0 ? P.clients[0] : NULL;
    co.source_addr = source_addr(o, proc);
    co.replica_sync_ms = o->replica_sync_ms;
    co.replica_sync_all = o->replica_sync_all;
  co.replica_sync_all = o->replica_sync_all;
    if (o->kind == TT_REDLOCK)
      co.connect_timeout_ms = 500;
    int rc = open_client(o, a->urls[i], &co, &P.clients[i]);
    if (rc != DLOCK_OK) {
      fprintf(stderr, "worker %d: open %s: %s\n", proc, a->urls[i], dlock_errmsg());
      return 3;
    }
  }
  dlock_election *watching = NULL; /* ends with its client */
  if (o->kind == TT_ELECTION)
    observe(a, proc, &watching);
  P.nthreads = o->threads;
  P.first_slot = atomic_fetch_add(&a->nslots, o->threads);
  if (P.first_slot + o->threads > TT_MAX_SLOTS)
    return 4;
  pthread_t th[256];
  thread_ctx ctx[256];
  int n = o->threads < 256 ? o->threads : 256;
  for (int i = 0; i < n; i++) {
    tt_slot *s = &a->slots[P.first_slot + i];
    s->pid = getpid();
    s->proc = proc;
    atomic_store(&s->cur, -1);
    memset(&ctx[i], 0, sizeof ctx[i]);
    ctx[i].slot = P.first_slot + i;
    ctx[i].seed = o->seed ^ (unsigned)(getpid() * 7919 + i);
    ctx[i].java = i < o->java && (o->kind == TT_LOCK || o->kind == TT_FAIR ||
                                  o->kind == TT_RW || o->kind == TT_ONCE ||
                                  o->kind == TT_ONCE_FAIR);
    ctx[i].jvm = jvm;
    ctx[i].java |= jvm;
  }
  for (int i = 0; i < n; i++)
    pthread_create(&th[i], NULL, thread_main, &ctx[i]);
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < nclients; i++)
    dlock_client_close(P.clients[i]);
  dlock_election_free(watching);
  if (jvm)
    jp_stop(&P.jvm);
  return 0;
}
