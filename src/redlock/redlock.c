/* RedLock (redis.io's Redlock algorithm) over independent masters, asking
 * every member in parallel: each member's try is a request submitted to its
 * own client's engine at once, and one round waits at most the member
 * timeout for all answers. A majority granted inside a positive validity
 * (lease - elapsed - drift) wins; anything else releases every member and
 * retries after a random delay.
 *
 * Late answers: a member that answers after the round gave up may have
 * granted the lock. Every failed round therefore releases all members,
 * including those that never answered; a member's try and release travel on
 * the same connection in order, so a server that comes back later runs the
 * try and then the release and keeps nothing. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlock/multi.h"
#include "lock/lock_impl.h"

/* ---- one round of parallel calls ------------------------------------------ */

typedef struct round round;

typedef struct call {
  round *round;
  /* how to read an answer: the member itself may be gone by then, its kind's
   * (static) method table is not */
  const dlock__lock_methods *m;
  dlock__req req;
  int done;   /* under round->mu */
  int status; /* DLOCK_OK with reply, or the failure */
  redisReply *reply;
  char errmsg[1536];
  char rid[33]; /* a release's request id: sent again with it */
} call;

struct round {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  int refs;          /* the caller + every call still in an engine */
  int is_try;
  size_t pending;
  size_t granted;    /* tries answered with a grant, releases that released */
  size_t want_granted, want_pending; /* what the caller waits for: wake it
                                        only then (one wake-up, not n) */
  /* An async caller (on the members' one engine thread, as the calls'
   * answers) is told instead, once, after the answer that met its want;
   * it clears this before it lets go of the round. */
  void (*notify)(void *arg);
  void *notify_arg;
  size_t n;
  call calls[];
};

static void round_unref_locked(round *r) {
  if (--r->refs > 0) {
    pthread_mutex_unlock(&r->mu);
    return;
  }
  pthread_mutex_unlock(&r->mu);
  for (size_t i = 0; i < r->n; i++)
    if (r->calls[i].reply)
      freeReplyObject(r->calls[i].reply);
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
}

static void round_unref(round *r) {
  pthread_mutex_lock(&r->mu);
  round_unref_locked(r);
}

/* Runs on a member client's engine thread, possibly after the caller has
 * stopped waiting and even after the members were freed: it touches only
 * the round, which lives until the last reference goes. */
static void call_done(dlock__req *req, redisReply *reply, int status) {
  call *c = req->data;
  round *r = c->round;
  pthread_mutex_lock(&r->mu);
  c->done = 1;
  c->status = status;
  c->reply = reply;
  if (status != DLOCK_OK)
    snprintf(c->errmsg, sizeof c->errmsg, "%s", req->errmsg);
  int64_t hint, token;
  if (status == DLOCK_OK &&
      c->m->reqs->read_reply(reply, !r->is_try, &hint, &token) == DLOCK_OK)
    r->granted++;
  r->pending--;
  void (*notify)(void *) = NULL;
  void *arg = NULL;
  if (r->pending <= r->want_pending || r->granted >= r->want_granted) {
    pthread_cond_signal(&r->cv);
    notify = r->notify;
    arg = r->notify_arg;
    r->notify = NULL; /* once */
  }
  round_unref_locked(r);
  if (notify)
    notify(arg);
}

typedef struct redlock {
  dlock_lock base;
  size_t n, quorum;
  int64_t member_timeout_ms, retry_min_ms, retry_max_ms;
  dlock_redlock_lost_fn *on_lost;
  void *on_lost_data;
  pthread_mutex_t mu; /* guards acqs, last_release */
  struct acq *acqs;
  struct round *last_release; /* the latest release round (a reference) */
  dlock_lock *members[DLOCK__MAX_MEMBERS];
} redlock;

enum { TRY, RELEASE };

/* A call that no engine will answer (not sent, or not to be sent) is done
 * at once with status and why. */
static void call_done_here(round *r, call *c, int status, const char *why) {
  pthread_mutex_lock(&r->mu);
  c->done = 1;
  c->status = status;
  snprintf(c->errmsg, sizeof c->errmsg, "%s", why);
  r->pending--;
  r->refs--;
  pthread_mutex_unlock(&r->mu);
}

/* Submit one try or release per member, all at once; not to the members
 * skip[i] (may be NULL) names. */
static round *round_start(redlock *rl, int kind, uint64_t owner, int64_t lease_ms,
                          const int *skip) {
  round *r = calloc(1, sizeof *r + rl->n * sizeof(call));
  if (r == NULL)
    return NULL;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, &attr);
  pthread_condattr_destroy(&attr);
  r->n = rl->n;
  r->want_granted = SIZE_MAX; /* until the caller says: when all answered */
  r->is_try = kind == TRY;
  r->refs = 1 + (int)rl->n;
  r->pending = rl->n;
  for (size_t i = 0; i < rl->n; i++) {
    call *c = &r->calls[i];
    dlock_lock *m = rl->members[i];
    c->round = r;
    c->m = m->m;
    if (skip && skip[i]) {
      call_done_here(r, c, DLOCK_ENOTOWNER, "not asked");
      continue;
    }
    int rc = kind == TRY ? dlock__lock_try_req(m, owner, lease_ms, &c->req)
                         : dlock__request_id(c->rid);
    if (rc == DLOCK_OK && kind == RELEASE)
      rc = dlock__lock_release_req(m, owner, c->rid, &c->req);
    if (rc == DLOCK_OK) {
      c->req.done = call_done;
      c->req.data = c;
      rc = dlock__submit(m->h.client, &c->req);
    }
    if (rc != DLOCK_OK) /* never reached an engine */
      call_done_here(r, c, rc, dlock_errmsg());
  }
  return r;
}

/* Wait (r->mu held by the caller, and still held on return) until at most
 * `pending` calls are unanswered, or `granted` answers granted, or
 * deadline_us. A try round stops at a majority: the slower members'
 * answers cannot change the outcome, and a late grant is covered like any
 * late answer (released by the RedLock's release). */
static void round_wait_us(round *r, size_t granted, size_t pending,
                          int64_t deadline_us) {
  struct timespec ts = {.tv_sec = deadline_us / 1000000,
                        .tv_nsec = (deadline_us % 1000000) * 1000};
  r->want_granted = granted;
  r->want_pending = pending;
  while (r->pending > pending && r->granted < granted)
    if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) != 0)
      break;
}

/* round_wait_us for `granted` grants or every answer (r->mu held). */
static void round_wait(round *r, size_t granted, int64_t deadline_ms) {
  round_wait_us(r, granted, 0, deadline_ms * 1000);
}

/* The members that have not answered a release sent before (by any owner
 * of this RedLock) are stuck: stopped, blackholed or down. Their requests
 * queue behind that release; waiting for them buys nothing. Counts them
 * (and marks them in is_stuck, which may be NULL), and makes r the latest
 * release round. */
static size_t stuck_members(redlock *rl, round *r, int *is_stuck) {
  pthread_mutex_lock(&rl->mu);
  round *prev = rl->last_release;
  pthread_mutex_lock(&r->mu);
  r->refs++;
  pthread_mutex_unlock(&r->mu);
  rl->last_release = r;
  pthread_mutex_unlock(&rl->mu);
  size_t stuck = 0;
  if (prev) {
    pthread_mutex_lock(&prev->mu);
    for (size_t i = 0; i < prev->n; i++) {
      stuck += !prev->calls[i].done;
      if (is_stuck)
        is_stuck[i] = !prev->calls[i].done;
    }
    round_unref_locked(prev);
  }
  return stuck;
}

/* ---- loss of the majority -------------------------------------------------- */

/* One owner's hold of the RedLock: member holds report their loss here. */
typedef struct acq {
  dlock__listener ln; /* first */
  atomic_int refs;
  struct acq *next;   /* rl->acqs, under rl->mu */
  uint64_t owner;
  int64_t count;      /* re-entries, under rl->mu */
  atomic_int held;    /* members granted by the latest acquire */
  atomic_int lost;
  atomic_int fired;
  size_t quorum;
  dlock_redlock_lost_fn *fn;
  void *data;
  dlock_lock *redlock;
} acq;

static void acq_lost(dlock__listener *self, dlock_lost_reason reason) {
  acq *a = (acq *)self;
  int lost = atomic_fetch_add(&a->lost, 1) + 1;
  if (atomic_load(&a->held) - lost < (int)a->quorum &&
      !atomic_exchange(&a->fired, 1) && a->fn)
    a->fn(a->data, a->redlock, a->owner);
}

static void acq_ref(dlock__listener *self) {
  atomic_fetch_add(&((acq *)self)->refs, 1);
}

static void acq_unref(dlock__listener *self) {
  if (atomic_fetch_sub(&((acq *)self)->refs, 1) == 1)
    free(self);
}

/* The owner's record, made on first use (rl->mu held). */
static acq *acq_get(redlock *rl, uint64_t owner, int create) {
  for (acq *a = rl->acqs; a; a = a->next)
    if (a->owner == owner)
      return a;
  if (!create)
    return NULL;
  acq *a = calloc(1, sizeof *a);
  if (a == NULL)
    return NULL;
  a->ln = (dlock__listener){acq_lost, acq_ref, acq_unref};
  atomic_init(&a->refs, 1); /* rl->acqs' reference */
  a->owner = owner;
  a->quorum = rl->quorum;
  a->fn = rl->on_lost;
  a->data = rl->on_lost_data;
  a->redlock = &rl->base;
  a->next = rl->acqs;
  rl->acqs = a;
  return a;
}

static void acq_drop(redlock *rl, acq *a) {
  for (acq **p = &rl->acqs; *p; p = &(*p)->next)
    if (*p == a) {
      *p = a->next;
      break;
    }
  acq_unref(&a->ln);
}

/* ---- the lock methods ------------------------------------------------------- */

/* What one try round got from the members. */
typedef struct tally {
  int granted[DLOCK__MAX_MEMBERS], busy[DLOCK__MAX_MEMBERS];
  int unanswered[DLOCK__MAX_MEMBERS];
  size_t ngranted, nbusy, silent;
  int64_t elapsed; /* ms from the round's start to the end of its wait */
  char why[1024];  /* "; member i (name): what" for each member not granted */
} tally;

/* The lease of an acquire: lease_ms, or for the watchdog the shortest of the
 * members' clients' watchdog timeouts (a safe validity). */
static int64_t round_lease(redlock *rl, int64_t lease_ms) {
  if (lease_ms != DLOCK_LEASE_WATCHDOG)
    return lease_ms;
  int64_t lease = INT64_MAX;
  for (size_t i = 0; i < rl->n; i++) {
    int64_t t = dlock__client_opts(rl->members[i]->h.client)->watchdog_timeout_ms;
    if (t < lease)
      lease = t;
  }
  return lease;
}

/* One try round, started at t0 and waited for until round_end (or a
 * majority): what each member answered, into *t. */
/* A member for messages: "\"name\" at host:port". */
static const char *member_where(const dlock_lock *m, char *buf, size_t n) {
  char server[200];
  snprintf(buf, n, "\"%.100s%s\" at %s", DLOCK__NAME(m->h.name),
           dlock__client_where(m->h.client, server, sizeof server));
  return buf;
}

/* What each member answered a try round started at t0 (r->mu held). */
static void tally_round(redlock *rl, round *r, int64_t t0, int64_t round_end,
                        tally *t) {
  char at[300];
  t->elapsed = dlock__now_ms() - t0;
  t->why[0] = '\0';
  for (size_t i = 0; i < rl->n; i++) {
    call *c = &r->calls[i];
    dlock_lock *m = rl->members[i];
    int64_t hint = 0, token = 0;
    if (!c->done) {
      t->silent++;
      t->unanswered[i] = 1;
      int64_t waited = round_end - t0;
      dlock__append(t->why, sizeof t->why, "; member %zu (%s): no answer within %" PRId64
             " ms%s", i, member_where(m, at, sizeof at), waited,
             waited < rl->member_timeout_ms ? " (the wait budget ended the round; "
                                              "it may just be slower)"
                                            : "");
    } else if (c->status != DLOCK_OK) {
      dlock__append(t->why, sizeof t->why, "; member %zu (%s): %s", i,
             member_where(m, at, sizeof at),
             c->errmsg);
    } else if (c->reply->type == REDIS_REPLY_ERROR) {
      dlock__append(t->why, sizeof t->why, "; member %zu (%s): %s", i,
             member_where(m, at, sizeof at),
             c->reply->str);
    } else {
      int got = m->m->reqs->read_reply(c->reply, 0, &hint, &token);
      if (got == DLOCK_OK) {
        t->granted[i] = 1;
        t->ngranted++;
      } else {
        int busy = got == DLOCK_EBUSY;
        t->busy[i] = busy;
        t->nbusy += busy;
        dlock__append(t->why, sizeof t->why, "; member %zu (%s): %s", i,
             member_where(m, at, sizeof at),
               busy ? "held by another owner" : dlock_errmsg());
      }
    }
  }
}

static int try_round(redlock *rl, uint64_t owner, int64_t lease, int64_t t0,
                     int64_t round_end, tally *t) {
  round *r = round_start(rl, TRY, owner, lease, NULL);
  if (r == NULL)
    return dlock__oom();
  pthread_mutex_lock(&r->mu);
  round_wait(r, rl->quorum, round_end);
  tally_round(rl, r, t0, round_end, t);
  round_unref_locked(r);
  return DLOCK_OK;
}

/* A round won: the owner's record, and the granted members' holds. */
static void keep_grant(redlock *rl, uint64_t owner, int watchdog, int64_t lease,
                       int64_t t0, const tally *t) {
  pthread_mutex_lock(&rl->mu);
  acq *a = acq_get(rl, owner, 1);
  if (a) {
    a->count++;
    atomic_store(&a->held, (int)t->ngranted);
  }
  pthread_mutex_unlock(&rl->mu);
  for (size_t i = 0; i < rl->n; i++)
    if (t->granted[i])
      dlock__lock_hold(rl->members[i], owner, watchdog, lease, t0,
                       watchdog && a ? &a->ln : NULL);
}

/* Undo a failed round started at t0: release every member, also those that
 * did not answer, but for the ones that answered "held by another owner"
 * (nothing of ours there). Wait (up to the member timeout) only for the
 * members that answered the try: they answer at once, and then nothing of
 * this round is left on them. A silent member's release travels on its
 * connection ahead of any later try there; no local hold was recorded. */
static void undo_round(redlock *rl, uint64_t owner, int64_t t0, const tally *t) {
  if (t->nbusy >= rl->n)
    return;
  round *rel = round_start(rl, RELEASE, owner, 0, t->busy);
  if (rel == NULL)
    return;
  int stuck[DLOCK__MAX_MEMBERS] = {0};
  stuck_members(rl, rel, stuck);
  pthread_mutex_lock(&rel->mu);
  round_wait_us(rel, SIZE_MAX, t->silent,
                dlock__now_us() + rl->member_timeout_ms * 1000);
  /* A round the budget cut short left members silent that may just be
   * slow: give those that are not stuck the rest of the round's member
   * timeout, so a try granted late is released before the call ends. */
  size_t silent_stuck = 0;
  for (size_t i = 0; i < rl->n; i++)
    silent_stuck += stuck[i] && t->unanswered[i];
  if (rel->pending > silent_stuck)
    round_wait_us(rel, SIZE_MAX, silent_stuck, (t0 + rl->member_timeout_ms) * 1000);
  round_unref_locked(rel);
}

static int acquire(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                   int64_t lease_ms, dlock_grant *grant) {
  redlock *rl = (redlock *)l;
  int watchdog = lease_ms == DLOCK_LEASE_WATCHDOG;
  int64_t lease = round_lease(rl, lease_ms);
  int64_t start = dlock__now_ms();
  int64_t deadline = wait_ms < 0 ? -1 : start + wait_ms;
  for (int first = 1;; first = 0) {
    int64_t t0 = dlock__now_ms();
    /* the first round gets the whole member timeout (even when the clock
     * ticked since start: a wait of 0 must still ask every member); later
     * ones end with the wait budget, so a failing acquire returns within
     * budget + 50 ms */
    int64_t round_end = t0 + rl->member_timeout_ms;
    if (!first && deadline >= 0 && deadline < round_end)
      round_end = deadline;
    tally t = {.ngranted = 0};
    int rc = try_round(rl, owner, lease, t0, round_end, &t);
    if (rc != DLOCK_OK)
      return rc;
    int64_t validity = lease - t.elapsed - (lease / 100 + 2);
    if (t.ngranted >= rl->quorum && validity > 0) {
      keep_grant(rl, owner, watchdog, lease, t0, &t);
      grant->validity_ms = validity;
      return DLOCK_OK;
    }
    if (t.ngranted >= rl->quorum)
      dlock__append(t.why, sizeof t.why, "; validity spent (%" PRId64 " ms elapsed of "
             "a %" PRId64 " ms lease)", t.elapsed, lease);
    undo_round(rl, owner, t0, &t);
    int64_t now = dlock__now_ms();
    if (wait_ms == 0)
      return dlock__fail(DLOCK_EQUORUM, "redlock: %zu of %zu members granted "
                         "(%zu held elsewhere), %zu needed%s", t.ngranted, rl->n,
                         t.nbusy, rl->quorum, t.why);
    if (deadline >= 0 && now >= deadline)
      return dlock__fail(DLOCK_EQUORUM, "redlock: no quorum within %" PRId64
                         " ms; last round %zu of %zu granted, %zu needed%s",
                         wait_ms, t.ngranted, rl->n, rl->quorum, t.why);
    int64_t delay = dlock__random_between(rl->retry_min_ms, rl->retry_max_ms);
    if (deadline >= 0 && now + delay > deadline)
      delay = deadline - now;
    rc = dlock__wait_pause(l, owner, delay, "redlock");
    if (rc != DLOCK_OK) /* interrupted between rounds: nothing is held */
      return rc;
  }
}

/* The members whose release answered with a lost answer (or never left,
 * for want of memory): sent again with the same id, blocking, so one that
 * ran is replayed, not repeated. r->mu is held on entry and on return; it
 * is let go meanwhile (the engine answers the round's other calls under
 * it), and an answered call changes no more. */
static void release_lost_again(redlock *rl, round *r, uint64_t owner) {
  int again[DLOCK__MAX_MEMBERS];
  size_t n = 0;
  for (size_t i = 0; i < rl->n; i++)
    if (r->calls[i].done && dlock__answer_lost(r->calls[i].status) &&
        r->calls[i].rid[0])
      again[n++] = (int)i;
  if (n == 0)
    return;
  pthread_mutex_unlock(&r->mu);
  for (size_t k = 0; k < n; k++) {
    call *c = &r->calls[again[k]];
    redisReply *reply = NULL;
    if (dlock__lock_release_again(rl->members[again[k]], owner, c->rid,
                                  &reply) == DLOCK_OK) {
      c->status = DLOCK_OK;
      c->reply = reply;
    } else {
      snprintf(c->errmsg, sizeof c->errmsg, "%s", dlock_errmsg());
    }
  }
  pthread_mutex_lock(&r->mu);
}

static int release(dlock_lock *l, uint64_t owner) {
  redlock *rl = (redlock *)l;
  round *r = round_start(rl, RELEASE, owner, 0, NULL);
  if (r == NULL)
    return dlock__oom();
  int64_t t0 = dlock__now_ms();
  /* Wait (up to the member timeout) until as many members answered as the
   * acquire got: in a healthy cluster every member, so nothing of ours runs
   * on after the call; with masters down only the live ones, so a stopped
   * master does not cost every release the member timeout. A member that
   * has not answered gets its release all the same (it is on its way, ahead
   * of any later try on its connection); its lease ends it at the latest. */
  size_t stuck = stuck_members(rl, r, NULL);
  pthread_mutex_lock(&rl->mu);
  acq *held_by = acq_get(rl, owner, 0);
  size_t held = held_by ? (size_t)atomic_load(&held_by->held) : rl->n;
  pthread_mutex_unlock(&rl->mu);
  int64_t t0_us = dlock__now_us();
  pthread_mutex_lock(&r->mu);
  round_wait_us(r, SIZE_MAX, held < rl->n ? rl->n - held : 0,
                (t0 + rl->member_timeout_ms) * 1000);
  if (r->pending > stuck) {
    /* A member whose try was granted after the acquire had its majority
     * is held too, but not counted: give the others twice as long again
     * (5 ms at least, the member timeout at most). Members stuck since an
     * earlier release are not waited for: a stopped master costs that
     * grace once, not every release. */
    int64_t now = dlock__now_us(), grace = 2 * (now - t0_us);
    if (grace < 5000)
      grace = 5000;
    if (grace > rl->member_timeout_ms * 1000)
      grace = rl->member_timeout_ms * 1000;
    round_wait_us(r, SIZE_MAX, stuck, now + grace);
  }
  if (r->granted < rl->quorum && r->pending > 0) {
    /* A release is not racing a lease: give slow members up to the command
     * timeout to confirm a majority. */
    round_wait(r, rl->quorum,
               t0 + dlock__client_opts(rl->members[0]->h.client)->command_timeout_ms);
  }
  release_lost_again(rl, r, owner);
  size_t released = 0, lost = 0;
  char why[1024] = "", at[300];
  for (size_t i = 0; i < rl->n; i++) {
    call *c = &r->calls[i];
    dlock_lock *m = rl->members[i];
    if (!c->done || c->status != DLOCK_OK) {
      dlock__lock_forget(m, owner); /* its lease ends it */
      dlock__append(why, sizeof why, "; member %zu (%s): %s", i,
             member_where(m, at, sizeof at),
             c->done ? c->errmsg : "no answer");
      continue;
    }
    int rc = dlock__lock_released(m, owner, c->reply);
    released += rc == DLOCK_OK;
    lost += rc == DLOCK_ELOST;
    if (rc != DLOCK_OK && rc != DLOCK_ENOTOWNER)
      dlock__append(why, sizeof why, "; member %zu (%s): %s", i,
             member_where(m, at, sizeof at),
             dlock_errmsg());
  }
  round_unref_locked(r);
  pthread_mutex_lock(&rl->mu);
  acq *a = acq_get(rl, owner, 0);
  if (a && --a->count <= 0)
    acq_drop(rl, a);
  pthread_mutex_unlock(&rl->mu);
  if (released >= rl->quorum)
    return DLOCK_OK;
  if (released == 0 && lost == 0 && why[0] == '\0')
    return dlock__fail(DLOCK_ENOTOWNER, "redlock is not held by this owner");
  if (lost > 0)
    return dlock__fail(DLOCK_ELOST, "redlock: the lease ran out on %zu of %zu "
                       "members%s", lost, rl->n, why);
  return dlock__fail(DLOCK_EQUORUM, "redlock: only %zu of %zu members confirmed "
                     "the release (their leases end the rest)%s", released,
                     rl->n, why);
}

static int force_release(dlock_lock *l, int *deleted) {
  redlock *rl = (redlock *)l;
  *deleted = 0;
  for (size_t i = 0; i < rl->n; i++) { /* a member down is skipped */
    int one = 0;
    if (rl->members[i]->m->force_release(rl->members[i], &one) == DLOCK_OK)
      *deleted |= one;
  }
  return DLOCK_OK;
}

static int state(dlock_lock *l, uint64_t owner, dlock_lock_state *st) {
  redlock *rl = (redlock *)l;
  size_t locked = 0, mine = 0, answered = 0;
  st->hold_count = INT64_MAX;
  st->ttl_ms = -2;
  for (size_t i = 0; i < rl->n; i++) {
    dlock_lock_state ms = {0, 0, 0, 0};
    if (rl->members[i]->m->state(rl->members[i], owner, &ms) != DLOCK_OK)
      continue; /* a member that is down does not count */
    answered++;
    locked += ms.locked != 0;
    if (ms.held_by_me) {
      mine++;
      if (ms.hold_count < st->hold_count)
        st->hold_count = ms.hold_count;
      if (st->ttl_ms == -2 || ms.ttl_ms < st->ttl_ms)
        st->ttl_ms = ms.ttl_ms;
    }
  }
  if (answered < rl->quorum)
    return dlock__fail(DLOCK_EQUORUM, "redlock: only %zu of %zu members answered",
                       answered, rl->n);
  st->locked = locked >= rl->quorum;
  st->held_by_me = mine >= rl->quorum;
  if (!st->held_by_me) {
    st->hold_count = 0;
    st->ttl_ms = st->locked ? st->ttl_ms : -2;
  }
  return DLOCK_OK;
}

static void destroy(dlock_lock *l) {
  redlock *rl = (redlock *)l;
  pthread_mutex_lock(&rl->mu);
  while (rl->acqs)
    acq_drop(rl, rl->acqs);
  if (rl->last_release)
    round_unref(rl->last_release);
  pthread_mutex_unlock(&rl->mu);
  pthread_mutex_destroy(&rl->mu);
}

/* ---- async: rounds on the members' engine thread ----------------------------
 * The same rounds as acquire(), with the engine's timers in place of the
 * waits: a round ends with its answers (a majority, or all) or its timer;
 * a failed one is given back without waiting (each member's release goes
 * ahead of its next try on its connection) and the next starts after the
 * retry delay. */

typedef struct rwalk {
  redlock *rl;
  int64_t lease;     /* the rounds' lease (round_lease) */
  int watchdog;
  int first;
  round *r;          /* the round under way, NULL between rounds */
  int64_t t0, round_end;
} rwalk;

static void r_round(dlock__aop *op);

/* Let go of the round under way (its calls keep it until they end). */
static void r_drop(rwalk *w) {
  if (w->r == NULL)
    return;
  pthread_mutex_lock(&w->r->mu);
  w->r->notify = NULL;
  round_unref_locked(w->r);
  w->r = NULL;
}

/* Give back a failed round: every member but those held elsewhere. */
static void r_undo(redlock *rl, uint64_t owner, const tally *t) {
  if (t->nbusy >= rl->n)
    return;
  round *rel = round_start(rl, RELEASE, owner, 0, t->busy);
  if (rel == NULL)
    return;
  stuck_members(rl, rel, NULL); /* the latest release round */
  round_unref(rel);
}

/* The round under way is over (its answers, or its timer): decide. */
static void r_decide(dlock__aop *op) {
  rwalk *w = op->ctx;
  redlock *rl = w->rl;
  if (w->r == NULL)
    return; /* decided already */
  dlock__aop_timer(op, -1, NULL);
  tally t = {.ngranted = 0};
  pthread_mutex_lock(&w->r->mu);
  tally_round(rl, w->r, w->t0, w->round_end, &t);
  pthread_mutex_unlock(&w->r->mu);
  r_drop(w);
  int64_t validity = w->lease - t.elapsed - (w->lease / 100 + 2);
  if (t.ngranted >= rl->quorum && validity > 0) {
    if (dlock__aop_grant_cancelled(op) || dlock__client_stopping(op->c)) {
      r_undo(rl, op->owner, &t);
      dlock__aop_finish(op, dlock__aop_cancelled(op)
                                ? DLOCK_ECANCELED
                                : dlock__fail(DLOCK_ECLOSED, "client closed"));
      return;
    }
    keep_grant(rl, op->owner, w->watchdog, w->lease, w->t0, &t);
    op->res.grant.validity_ms = validity;
    dlock__aop_finish(op, DLOCK_OK);
    return;
  }
  if (t.ngranted >= rl->quorum)
    dlock__append(t.why, sizeof t.why, "; validity spent (%" PRId64 " ms elapsed of "
           "a %" PRId64 " ms lease)", t.elapsed, w->lease);
  r_undo(rl, op->owner, &t);
  int64_t now = dlock__now_ms();
  if (dlock__aop_cancelled(op)) {
    dlock__aop_finish(op, DLOCK_ECANCELED);
  } else if (dlock__client_stopping(op->c)) {
    dlock__aop_finish(op, dlock__fail(DLOCK_ECLOSED, "client closed"));
  } else if (op->wait_ms == 0) {
    dlock__aop_finish(op, dlock__fail(DLOCK_EQUORUM, "redlock: %zu of %zu members "
                      "granted (%zu held elsewhere), %zu needed%s", t.ngranted,
                      rl->n, t.nbusy, rl->quorum, t.why));
  } else if (op->deadline_ms >= 0 && now >= op->deadline_ms) {
    dlock__aop_finish(op, dlock__fail(DLOCK_EQUORUM, "redlock: no quorum within %"
                      PRId64 " ms; last round %zu of %zu granted, %zu needed%s",
                      op->wait_ms, t.ngranted, rl->n, rl->quorum, t.why));
  } else {
    int64_t delay = dlock__random_between(rl->retry_min_ms, rl->retry_max_ms);
    if (op->deadline_ms >= 0 && now + delay > op->deadline_ms)
      delay = op->deadline_ms - now;
    if (dlock__aop_timer(op, delay, r_round) != DLOCK_OK) /* the next round */
      dlock__aop_finish(op, DLOCK_ENOMEM);
  }
}

static void r_answered(void *arg) { r_decide(arg); }

static void r_round(dlock__aop *op) {
  rwalk *w = op->ctx;
  redlock *rl = w->rl;
  w->t0 = dlock__now_ms();
  w->round_end = w->t0 + rl->member_timeout_ms;
  if (!w->first && op->deadline_ms >= 0 && op->deadline_ms < w->round_end)
    w->round_end = op->deadline_ms;
  w->first = 0;
  w->r = round_start(rl, TRY, op->owner, w->lease, NULL);
  if (w->r == NULL) {
    dlock__aop_finish(op, dlock__fail(DLOCK_ENOMEM, "out of memory"));
    return;
  }
  pthread_mutex_lock(&w->r->mu);
  w->r->want_granted = rl->quorum;
  w->r->want_pending = 0;
  int over = w->r->pending == 0 || w->r->granted >= rl->quorum;
  if (!over) {
    w->r->notify = r_answered;
    w->r->notify_arg = op;
  }
  pthread_mutex_unlock(&w->r->mu);
  if (over) {
    r_decide(op);
    return;
  }
  /* without a timer (out of memory) the round ends with its answers */
  (void)dlock__aop_timer(op, w->round_end - w->t0, r_decide);
}

/* dlock_cancel: between rounds it ends at once (nothing is held); a round
 * under way decides first (a grant is given back). */
static void r_cancel(dlock__aop *op) {
  rwalk *w = op->ctx;
  if (w->r == NULL)
    dlock__aop_finish(op, DLOCK_ECANCELED);
}

static dlock_client *r_client(dlock_lock *l) {
  redlock *rl = (redlock *)l;
  return dlock__lock_members_engine(rl->members, rl->n);
}

static void r_free(dlock__aop *op);

/* a round under way: the client's close waits for its decision */
static int r_busy(const dlock__aop *op) {
  return ((const rwalk *)op->ctx)->r != NULL;
}

static const dlock__outer r_outer = {
    .cancel = r_cancel, .busy = r_busy, .end = r_free};

static int r_acquire_async(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                           int64_t lease_ms, dlock_done_fn *done, void *data,
                           dlock_op *out) {
  redlock *rl = (redlock *)l;
  dlock_client *c = r_client(l);
  if (c == NULL)
    return DLOCK_ENOTSUP;
  rwalk *w = calloc(1, sizeof *w);
  dlock__aop *op = NULL;
  int rc = w ? dlock__aop_new_on(c, &l->h, DLOCK__AOP_ACQUIRE, done, data, &op)
             : dlock__fail(DLOCK_ENOMEM, "out of memory");
  if (rc != DLOCK_OK) {
    free(w);
    return rc;
  }
  w->rl = rl;
  w->lease = round_lease(rl, lease_ms);
  w->watchdog = lease_ms == DLOCK_LEASE_WATCHDOG;
  w->first = 1;
  op->ctx = w;
  op->owner = owner;
  op->wait_ms = wait_ms;
  op->deadline_ms = wait_ms < 0 ? -1 : dlock__now_ms() + wait_ms;
  op->outer = &r_outer;
  return dlock__aop_start(op, r_round, out);
}

/* The op ends: a round still under way is let go (not an answer of it
 * reaches the op any more). */
static void r_free(dlock__aop *op) { r_drop(op->ctx); }

static const dlock__lock_methods redlock_methods = {
    .kind = "redlock",
    .caps = DLOCK_CAP_REENTRANT | DLOCK_CAP_MULTI_NODE,
    .size = sizeof(redlock),
    .acquire = acquire,
    .release = release,
    .force_release = force_release,
    .state = state,
    .destroy = destroy,
    .acquire_async = r_acquire_async,
    .async_client = r_client,
};

int dlock_redlock_new(dlock_lock *const *locks, size_t n,
                      const dlock_redlock_opts *opts, dlock_lock **out) {
  static const dlock_redlock_opts defaults = DLOCK_REDLOCK_OPTS_INIT;
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  if (opts == NULL)
    opts = &defaults;
  if (opts->version != DLOCK_REDLOCK_OPTS_VERSION || opts->member_timeout_ms <= 0 ||
      opts->retry_min_ms < 0 || opts->retry_max_ms < opts->retry_min_ms)
    return dlock__fail(DLOCK_EINVAL, "bad dlock_redlock_opts (version, "
                       "member_timeout_ms > 0, 0 <= retry_min_ms <= retry_max_ms)");
  for (size_t i = 0; locks && i < n && i < DLOCK__MAX_MEMBERS; i++)
    if (locks[i] && (!dlock__lock_has_requests(locks[i]) ||
                     (strcmp(locks[i]->m->kind, "reentrant") != 0 &&
                      strcmp(locks[i]->m->kind, "fenced") != 0)))
      return dlock__fail(DLOCK_EINVAL, "member %zu is a %s lock; RedLock members "
                         "must be reentrant or fenced locks (kinds that can be "
                         "asked by request)", i, locks[i]->m->kind);
  int rc = dlock__lock_alloc_combo(&redlock_methods, locks, n, out);
  if (rc != DLOCK_OK)
    return rc;
  redlock *rl = (redlock *)*out;
  rl->n = n;
  rl->quorum = n / 2 + 1;
  rl->member_timeout_ms = opts->member_timeout_ms;
  rl->retry_min_ms = opts->retry_min_ms;
  rl->retry_max_ms = opts->retry_max_ms;
  rl->on_lost = opts->on_lost;
  rl->on_lost_data = opts->on_lost_data;
  pthread_mutex_init(&rl->mu, NULL);
  memcpy(rl->members, locks, n * sizeof *locks);
  return DLOCK_OK;
}
