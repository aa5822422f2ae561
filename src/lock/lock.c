/* The generic lock calls: argument checks, then dispatch through the
 * backend's method table. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"
#include "lock/lock_impl.h"

uint64_t dlock__lock_owner_id(const dlock_lock *lock) {
  return lock->bound_owner ? lock->bound_owner : dlock_thread_id();
}

int dlock__handle_open(size_t size, dlock_client *client, const char *name,
                       const dlock_lock_opts *opts, void **out) {
  if (out && opts &&
      (opts->version < 1 || opts->version > DLOCK_LOCK_OPTS_VERSION)) {
    *out = NULL;
    return dlock__fail(DLOCK_EINVAL,
                       "dlock_lock_opts.version is %u, want 1..%u",
                       opts->version, DLOCK_LOCK_OPTS_VERSION);
  }
  return dlock__handle_new(size, client, name, opts ? opts->name_len : 0, out);
}

int dlock__lock_alloc(const dlock__lock_methods *m, dlock_client *client,
                      const char *name, const dlock_lock_opts *opts,
                      dlock_lock **out) {
  void *block = NULL;
  int rc = dlock__handle_open(m->size, client, name, opts, &block);
  *out = block;
  if (rc != DLOCK_OK)
    return rc;
  (*out)->m = m;
  (*out)->caps = m->caps;
  return DLOCK_OK;
}

int dlock__lock_make(const dlock__lock_methods *m, dlock_client *client,
                     const char *name, const dlock_lock_opts *opts,
                     dlock_lock **out) {
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  dlock_lock *l;
  int rc = dlock__lock_alloc(m, client, name, opts, &l);
  if (rc != DLOCK_OK)
    return rc;
  if (m->open && (rc = m->open(l, opts)) != DLOCK_OK) {
    dlock__kept_error why; /* the kind's words, past the free */
    dlock__error_keep(&why);
    dlock_lock_free(l);
    dlock__error_restore(&why);
    return rc;
  }
  *out = l;
  return DLOCK_OK;
}

int dlock__lock_alloc_combo(const dlock__lock_methods *m,
                            dlock_lock *const *members, size_t n,
                            dlock_lock **out) {
  dlock__clear_error();
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  if (members == NULL || n < 1 || n > DLOCK__MAX_MEMBERS)
    return dlock__fail(DLOCK_EINVAL, "need 1..%d member locks", DLOCK__MAX_MEMBERS);
  dlock__buf name = {0};
  for (size_t i = 0; i < n; i++) {
    if (members[i] == NULL) {
      dlock__buf_free(&name);
      return dlock__fail(DLOCK_EINVAL, "member %zu is NULL", i);
    }
    /* a readable name for messages: the members' names joined by '+' */
    if (name.len < 200 && (dlock__buf_add(&name, "+", i ? 1 : 0) ||
                           dlock__buf_add(&name, members[i]->h.name,
                                          strnlen(members[i]->h.name, 64)))) {
      dlock__buf_free(&name);
      return dlock__oom();
    }
  }
  dlock_lock *lock = calloc(1, m->size);
  if (lock == NULL) {
    dlock__buf_free(&name);
    return dlock__oom();
  }
  lock->m = m;
  lock->caps = m->caps;
  lock->h.name = name.p; /* no client: h.client stays NULL */
  lock->h.name_len = name.len;
  *out = lock;
  return DLOCK_OK;
}

int dlock__lock_check(dlock_lock *lock) {
  dlock__clear_error();
  if (lock == NULL)
    return dlock__fail(DLOCK_EINVAL, "lock is NULL");
  if (lock->h.client && dlock__client_closed(lock->h.client))
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  return DLOCK_OK;
}

/* DLOCK_ELOST for a grant whose lease (lease_ms) had run out when its
 * answer was read, took_ms after its try was sent. */
static int grant_spent(const char *noun, const char *name, int64_t lease_ms,
                       int64_t took_ms) {
  return dlock__fail(DLOCK_ELOST, "%s \"%.100s%s\" was granted, but its "
                     "lease (%" PRId64 " ms) had run out when the answer was "
                     "read, %" PRId64 " ms after the try was sent (the process "
                     "was stopped, or the link is slower than the lease): "
                     "given back, not held", noun, DLOCK__NAME(name), lease_ms,
                     took_ms);
}

int dlock_acquire_grant(dlock_lock *lock, int64_t wait_ms, int64_t lease_ms,
                        dlock_grant *grant) {
  int rc = dlock__lock_check(lock);
  if (rc != DLOCK_OK)
    return rc;
  if ((rc = dlock__check_wait_lease(wait_ms, lease_ms)) != DLOCK_OK)
    return rc;
  if (dlock__on_engine_thread())
    return dlock__fail(DLOCK_EINVAL, "blocking dlock call on an engine thread");
  if (lock->m->reqs == NULL && lock->m->acquire == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot be acquired", lock->m->kind);
  dlock_grant g = {0, 0};
  uint64_t owner = dlock__lock_owner_id(lock);
  int64_t t0_us = dlock__now_us();
  dlock__stats_wait_reset();
  if (wait_ms != 0) /* the waits below answer to this handle's interrupts */
    dlock__wait_top(lock);
  dlock__ack_begin();
  rc = dlock__lock_run_acquire(lock, owner, wait_ms, lease_ms, &g);
  int64_t back_ms = dlock__now_ms();
  char why[1700];
  int missed = dlock__ack_end(why, sizeof why);
  if (wait_ms != 0)
    dlock__wait_top(NULL);
  if (rc == DLOCK_OK && missed) {
    /* a failover now would lose the grant: give it back, and say so */
    if (dlock__lock_run_release(lock, owner) != DLOCK_OK)
      rc = dlock__fail(missed, "%s; releasing it failed too (%s): the "
                       "lease ends it", why, dlock_errmsg());
    else
      rc = dlock__fail(missed, "%s; the grant was given back", why); /* as
                                                     the async driver says */
  } else if (rc == DLOCK_OK && lock->m->reqs &&
             g.validity_ms - (dlock__now_ms() - back_ms) <= 0) {
    /* the acknowledgement's wait outlasted the lease (a stop): no grant */
    int64_t lease = lease_ms == DLOCK_LEASE_WATCHDOG
                        ? dlock__client_opts(lock->h.client)->watchdog_timeout_ms
                        : lease_ms;
    int64_t took = lease - g.validity_ms + (dlock__now_ms() - back_ms);
    (void)dlock__lock_run_release(lock, owner);
    rc = grant_spent(lock->m->noun, lock->h.name, lease, took);
  }
  if (lock->h.client) { /* a combinator's members are not counted apart */
    dlock__acquire_done(lock->h.client, lock->h.name, lock->h.name_len, owner,
                        rc, t0_us);
  }
  if (rc == DLOCK_OK && grant)
    *grant = g;
  return rc;
}

int dlock_interrupt(dlock_lock *lock, int *count) {
  dlock__clear_error();
  if (lock == NULL)
    return dlock__fail(DLOCK_EINVAL, "lock is NULL");
  int n = dlock__interrupt(lock, 0, 0);
  if (count)
    *count = n;
  return DLOCK_OK;
}

int dlock_interrupt_owner(uint64_t owner, int *count) {
  dlock__clear_error();
  int n = dlock__interrupt(NULL, 1, owner);
  if (count)
    *count = n;
  return DLOCK_OK;
}

int dlock_acquire(dlock_lock *lock, int64_t wait_ms, int64_t lease_ms) {
  return dlock_acquire_grant(lock, wait_ms, lease_ms, NULL);
}

int dlock_try_acquire(dlock_lock *lock, int64_t lease_ms) {
  return dlock_acquire_grant(lock, 0, lease_ms, NULL);
}

int dlock_release(dlock_lock *lock) {
  int rc = dlock__lock_check(lock);
  if (rc != DLOCK_OK)
    return rc;
  if (lock->m->reqs == NULL && lock->m->release == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot be released", lock->m->kind);
  /* the release's write waits for the replicas too (a failover that lost
   * it would show the hold again until its lease ended); its outcome
   * stands whatever they acknowledged */
  char why[1700];
  dlock__ack_begin();
  rc = dlock__lock_run_release(lock, dlock__lock_owner_id(lock));
  dlock__ack_end(why, sizeof why);
  if (lock->h.client)
    dlock__stats_release(dlock__client_stats(lock->h.client), rc);
  return rc;
}

int dlock_force_release(dlock_lock *lock, int *released) {
  int rc = dlock__lock_check(lock);
  if (rc != DLOCK_OK)
    return rc;
  if (lock->m->force_release == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks have no force release",
                       lock->m->kind);
  int deleted = 0;
  rc = lock->m->force_release(lock, &deleted);
  if (rc == DLOCK_OK && released)
    *released = deleted;
  return rc;
}

int dlock_lock_state_get(dlock_lock *lock, dlock_lock_state *state) {
  int rc = dlock__lock_check(lock);
  if (rc != DLOCK_OK)
    return rc;
  if (state == NULL)
    return dlock__fail(DLOCK_EINVAL, "state is NULL");
  if (lock->m->state == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks have no state query",
                       lock->m->kind);
  memset(state, 0, sizeof *state);
  return lock->m->state(lock, dlock__lock_owner_id(lock), state);
}

int dlock_lock_bind_owner(dlock_lock *lock, uint64_t owner_id) {
  dlock__clear_error();
  if (lock == NULL)
    return dlock__fail(DLOCK_EINVAL, "lock is NULL");
  lock->bound_owner = owner_id;
  return DLOCK_OK;
}

const char *dlock_lock_kind(const dlock_lock *lock) {
  return lock ? lock->m->kind : "";
}

unsigned dlock_lock_caps(const dlock_lock *lock) {
  return lock ? lock->caps : 0;
}

const char *dlock_lock_name(const dlock_lock *lock, size_t *len) {
  if (lock == NULL)
    return NULL;
  if (len)
    *len = lock->h.name_len;
  return lock->h.name;
}

/* ---- single tries and releases as requests --------------------------------- */

int dlock__lock_has_requests(const dlock_lock *lock) {
  return lock->m->reqs != NULL;
}

static int no_requests(const dlock_lock *lock) {
  return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot be asked by request",
                     lock->m->kind);
}

int dlock__lock_try_req(dlock_lock *lock, uint64_t owner, int64_t lease_ms,
                        dlock__req *req) {
  if (!dlock__lock_has_requests(lock))
    return no_requests(lock);
  return lock->m->reqs->try_req(lock, owner, lease_ms, req);
}

int dlock__lock_release_req(dlock_lock *lock, uint64_t owner, const char *rid,
                            dlock__req *req) {
  if (!dlock__lock_has_requests(lock))
    return no_requests(lock);
  return lock->m->reqs->release_req(lock, owner, rid, req);
}

int dlock__lock_hold(dlock_lock *lock, uint64_t owner, int watchdog,
                     int64_t lease_ms, int64_t t0_ms, dlock__listener *ln) {
  if (!dlock__lock_has_requests(lock))
    return no_requests(lock);
  return lock->m->reqs->hold(lock, owner, watchdog, lease_ms, t0_ms, ln);
}

int dlock__lock_released(dlock_lock *lock, uint64_t owner, const redisReply *r) {
  if (!dlock__lock_has_requests(lock))
    return no_requests(lock);
  return lock->m->reqs->released(lock, owner, r);
}

typedef struct lock_release {
  dlock_lock *l;
  uint64_t owner;
} lock_release;

static int build_release(void *ctx, const char *rid, dlock__req *req) {
  lock_release *x = ctx;
  return x->l->m->reqs->release_req(x->l, x->owner, rid, req);
}

int dlock__lock_release_again(dlock_lock *lock, uint64_t owner, const char *rid,
                              redisReply **reply) {
  if (!dlock__lock_has_requests(lock))
    return no_requests(lock);
  lock_release x = {lock, owner};
  return dlock__release_retry_id(lock->h.client, rid, build_release, &x, reply);
}

void dlock__lock_forget(dlock_lock *lock, uint64_t owner) {
  if (dlock__lock_has_requests(lock))
    lock->m->reqs->forget(lock, owner);
}

int dlock__lock_ask(dlock_lock *l, uint64_t owner, int64_t prior,
                    int64_t try_ms, int64_t *sent_ms, int *ran) {
  dlock__kept_error lost; /* the try's */
  dlock__error_keep(&lost);
  dlock_lock_state st;
  memset(&st, 0, sizeof st);
  int rc = l->m->state(l, owner, &st);
  if (rc == DLOCK_OK && prior >= 0 && st.hold_count == prior + 1) {
    *sent_ms = try_ms; /* its lease started no earlier */
    *ran = 1;
  } else if (rc == DLOCK_OK && prior >= 0 && st.hold_count == prior) {
    *ran = 0;
  } else if (rc == DLOCK_OK) {
    rc = dlock__fail(DLOCK_EIO, "%s; after it the server counts %" PRId64
                     " holds of \"%.100s%s\" where %" PRId64 " or %" PRId64
                     " were expected", dlock__kept_text(&lost), st.hold_count,
                     DLOCK__NAME(l->h.name), prior, prior + 1);
  }
  dlock__error_drop(&lost);
  return rc;
}

/* ---- the acquire of a kind that is its requests: its wait ------------------ */

static dlock_lock *wait_lock(const dlock__wait *w) {
  return (dlock_lock *)(void *)w->h;
}

/* One try. A kind that queues waiters (wait_req) joins once its waiter is
 * subscribed, never on a single try. */
static int wait_try(dlock__wait *w, dlock__req *req) {
  dlock_lock *l = wait_lock(w);
  const dlock__lock_reqs *m = l->m->reqs;
  if (m->wait_req)
    return m->wait_req(l, w->owner, w->lease_ms,
                       w->wait_ms != 0 && w->subscribed, req);
  return m->try_req(l, w->owner, w->lease_ms, req);
}

/* Its answer: DLOCK_OK acquired (w->token), DLOCK_EBUSY held by another
 * (*hint: how long to wait at most, which the kind's busy may cut), or an
 * error (the recipe names the lock in one the caller's own hold causes).
 * A queueing kind's replies cut the hint so that a queued waiter keeps its
 * place (wait_reply). */
static int wait_reply(dlock__wait *w, const redisReply *r, int64_t *hint) {
  dlock_lock *l = wait_lock(w);
  const dlock__lock_reqs *m = l->m->reqs;
  int rc = m->wait_reply && w->wait_ms != 0
               ? m->wait_reply(l, r, hint, &w->token)
               : m->read_reply(r, 0, hint, &w->token);
  if (rc == DLOCK_EBUSY && m->busy && *hint != -2) /* -2: try again now */
    m->busy(l, w, hint);
  return rc;
}

/* The channel of the wait, made once the first try found the lock taken. */
static int wait_channel(dlock__wait *w, dlock__buf *ch,
                        dlock__wake_fn **wake) {
  dlock_lock *l = wait_lock(w);
  return l->m->reqs->wait_channel(l, w->owner, ch, wake);
}

/* The grant as the owner's hold (renewed when w->watchdog); none when its
 * lease ran out before its answer was read (a process stopped while its
 * try was out): DLOCK_ELOST, and the driver gives it back. */
static int wait_granted(dlock__wait *w) {
  dlock_lock *l = wait_lock(w);
  int64_t took = dlock__now_ms() - w->sent_ms;
  if (w->lease_ms - took <= 0)
    return grant_spent(w->noun ? w->noun : l->m->noun, l->h.name, w->lease_ms,
                       took);
  if (l->m->reqs->hold(l, w->owner, w->watchdog, w->lease_ms, w->sent_ms,
                       NULL) != DLOCK_OK)
    return dlock__fail(DLOCK_ENOMEM, "out of memory recording the hold");
  w->validity_ms = w->lease_ms - (dlock__now_ms() - w->sent_ms);
  return DLOCK_OK;
}

/* A grant nobody keeps is released without touching the owner's recorded
 * holds (it never was one of them). */
static int wait_give_back(dlock__wait *w, const char *rid, dlock__req *req) {
  dlock_lock *l = wait_lock(w);
  return l->m->reqs->release_req(l, w->owner, rid, req);
}

/* Leave the queue. When that fails, dlock's scripts skip the entry once
 * its liveness slot has passed (nobody refreshes it); Redisson's at its
 * deadline. */
static int wait_give_up(dlock__wait *w, dlock__req *req) {
  dlock_lock *l = wait_lock(w);
  return l->m->reqs->give_up_req(l, w->owner, req);
}

/* A try whose answer was lost: did it run? The kind's own ask, else the
 * server's count of the owner's holds against this client's, read now
 * (holds the same owner took or let go meanwhile are in both). A try that
 * only queued counts as not run: the next one keeps the place. */
static int wait_ask(dlock__wait *w, int *ran) {
  dlock_lock *l = wait_lock(w);
  if (l->m->reqs->ask)
    return l->m->reqs->ask(l, w, ran);
  int64_t known = l->m->reqs->hold_count(l, w->owner);
  int rc = dlock__lock_ask(l, w->owner, known, w->sent_ms, &w->sent_ms, ran);
  if (rc != DLOCK_OK || !*ran || !l->m->reqs->token_in_answer)
    return rc;
  /* it ran, and its token went with the answer: give that hold back (the
   * count is the one before the try again), and try afresh */
  lock_release x = {l, w->owner};
  redisReply *r = NULL;
  rc = dlock__release_retry(l->h.client, build_release, &x, &r);
  if (r)
    freeReplyObject(r);
  *ran = 0; /* given back: as if it had not run */
  return rc;
}

/* The wait rules of every lock kind that is its requests: one table per
 * combination of what the requests say (early tries, lease hints, a
 * channel, a queue to leave), so that no kind writes one. No noun: each
 * wait carries its kind's (the descriptor's noun). */
#define LOCK_RULES(b)                                                          \
  {.try_req = wait_try, .try_reply = wait_reply,                               \
   .wait_channel = (b) & 4 ? wait_channel : NULL, .granted = wait_granted,     \
   .give_back = wait_give_back, .give_up = (b) & 8 ? wait_give_up : NULL,      \
   .ask = wait_ask, .early = (b) & 1, .lease_hints = ((b) >> 1) & 1}
#define LOCK_RULES4(b)                                                         \
  LOCK_RULES(b), LOCK_RULES(b + 1), LOCK_RULES(b + 2), LOCK_RULES(b + 3)
static const dlock__wait_rules lock_rules[16] = {
    LOCK_RULES4(0), LOCK_RULES4(4), LOCK_RULES4(8), LOCK_RULES4(12)};

const dlock__wait_rules *dlock__lock_wait_rules(const dlock__lock_reqs *m) {
  return &lock_rules[m->early | m->lease_hints << 1 |
                     (m->wait_channel != NULL) << 2 |
                     (m->give_up_req != NULL) << 3];
}

int dlock__lock_acquire_by_req(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                               int64_t lease_ms, dlock_grant *grant) {
  const dlock__lock_reqs *m = l->m->reqs;
  int watchdog = lease_ms == DLOCK_LEASE_WATCHDOG;
  dlock__wait w = {
      .k = dlock__lock_wait_rules(m), .h = &l->h, .noun = l->m->noun,
      .owner = owner,
      .wait_ms = wait_ms, .watchdog = watchdog,
      .lease_ms = watchdog
                      ? dlock__client_opts(l->h.client)->watchdog_timeout_ms
                      : lease_ms,
      /* without the owner's count a lost answer ends the wait with
       * DLOCK_EIO (or DLOCK_ENOMEM: its reply could not be read) */
      .no_ask = m->hold_count == NULL};
  int rc = dlock__wait_run(&w);
  if (rc != DLOCK_OK)
    return rc;
  grant->token = w.token;
  grant->validity_ms = w.validity_ms;
  return DLOCK_OK;
}

int dlock__lock_run_acquire(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                            int64_t lease_ms, dlock_grant *grant) {
  if (l->m->reqs)
    return dlock__lock_acquire_by_req(l, owner, wait_ms, lease_ms, grant);
  if (l->m->acquire == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot be acquired", l->m->kind);
  return l->m->acquire(l, owner, wait_ms, lease_ms, grant);
}

int dlock__lock_run_release(dlock_lock *l, uint64_t owner) {
  if (l->m->reqs)
    return dlock__lock_release_by_req(l, owner);
  if (l->m->release == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot be released", l->m->kind);
  return l->m->release(l, owner);
}

int dlock__lock_release_by_req(dlock_lock *l, uint64_t owner) {
  lock_release x = {l, owner};
  redisReply *r = NULL;
  int rc = dlock__release_retry(l->h.client, build_release, &x, &r);
  if (rc != DLOCK_OK) {
    /* Unknown outcome: stop tracking; the lease ends it at the latest. */
    if (rc == DLOCK_EIO ||
        (rc == DLOCK_ENOMEM && dlock__last_call_fate() == DLOCK__SENT))
      l->m->reqs->forget(l, owner);
    return rc;
  }
  rc = l->m->reqs->released(l, owner, r);
  freeReplyObject(r);
  return rc;
}

int dlock__force_release_call(dlock_lock *l, int script, size_t nkeys,
                              const char *const *keys, const size_t *klens,
                              size_t nargs, const char *const *args,
                              const size_t *alens, int *deleted) {
  redisReply *r;
  int rc = dlock__script_call(l->h.client, script, nkeys, keys, klens, nargs, args,
                              alens, &r);
  if (rc != DLOCK_OK)
    return rc;
  rc = dlock__force_release_answer(r, deleted);
  freeReplyObject(r);
  return rc;
}

int dlock__force_release_answer(const redisReply *r, int *deleted) {
  if (r->type != REDIS_REPLY_INTEGER)
    return dlock__fail_reply(r, "force release");
  *deleted = r->integer == 1;
  return DLOCK_OK;
}

void dlock_lock_free(dlock_lock *lock) {
  if (lock == NULL)
    return;
  if (lock->m->destroy)
    lock->m->destroy(lock);
  dlock__handle_free(&lock->h);
  free(lock);
}
