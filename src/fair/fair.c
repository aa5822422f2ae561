/* The fair lock and the non-reentrant fair lock (docs/fair.md, docs/wire.md
 * "Fair lock", "Non-reentrant locks"): the reentrant lock's hash plus Redisson's FIFO queue of waiters, a ZSET of their
 * deadlines and one wake-up channel per waiter, so a release wakes only the
 * next in line.
 *
 * The queue and its deadlines are Redisson's, arithmetic included, so Java
 * clients share it. dlock adds a liveness ZSET that Redisson never reads:
 * every try of a queued dlock waiter sets its entry to server-now + slot,
 * and a waiter re-tries at least every third of its slot, so dlock's scripts
 * skip a dead dlock waiter one slot after it stopped, not when its Redisson
 * deadline (minutes) passes. Times are the server's clock (TIME). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "lock/lock_impl.h"

#define DEFAULT_SLOT_MS 5000
#define DEFAULT_THREAD_WAIT_MS 300000 /* Redisson's */

typedef struct fair {
  dlock_lock base;
  int once; /* non-reentrant: the holder's second acquire is refused */
  int64_t slot_ms;
  int64_t thread_wait_ms;
  dlock__buf queue;        /* redisson_lock_queue:{N} */
  dlock__buf timeouts;     /* redisson_lock_timeout:{N} */
  dlock__buf alive;        /* dlock_fair_alive:{N} */
  dlock__buf channel;      /* redisson_lock__channel:{N}; waiters add :U:T */
  dlock__buf unlock_prefix; /* redisson_unlock_latch:{N}: */
} fair;

/* ---- tries, releases and leaving as requests (dlock__lock_reqs) ------- */

/* One try. The first try never queues: a waiter joins the queue only once
 * it is subscribed to its channel, so its wake-up cannot be missed
 * (join 0). A try with no wait never queues at all. */
static int wait_req(dlock_lock *l, uint64_t owner_id, int64_t lease_ms,
                    int join, dlock__req *req) {
  fair *f = (fair *)l;
  char owner[64], lease[24], tw[24], slot[24];
  size_t olen = dlock__owner(l->h.client, owner_id, owner);
  const char *pub = dlock__publish_cmd(l->h.client);
  const char *keys[] = {l->h.name, f->queue.p, f->timeouts.p, f->alive.p};
  size_t klens[] = {l->h.name_len, f->queue.len, f->timeouts.len, f->alive.len};
  const char *args[] = {lease, owner, tw, slot, join ? "1" : "0", pub,
                        f->channel.p, f->once ? "1" : "0"};
  size_t alens[] = {(size_t)snprintf(lease, sizeof lease, "%" PRId64, lease_ms),
                    olen,
                    (size_t)snprintf(tw, sizeof tw, "%" PRId64, f->thread_wait_ms),
                    (size_t)snprintf(slot, sizeof slot, "%" PRId64, f->slot_ms), 1,
                    strlen(pub), f->channel.len, 1};
  return dlock__req_script(req, DLOCK__SCRIPT_FAIR_ACQUIRE, 4, keys, klens, 8,
                           args, alens);
}

static int try_req(dlock_lock *l, uint64_t owner_id, int64_t lease_ms,
                   dlock__req *req) {
  return wait_req(l, owner_id, lease_ms, 0, req);
}

/* The same, with the hint cut to a third of the slot: re-trying that often
 * is what keeps a queued waiter's place. */
static int wait_reply(dlock_lock *l, const redisReply *r, int64_t *hint,
                      int64_t *token) {
  fair *f = (fair *)l;
  int rc = dlock__hashlock_read_reply(r, 0, hint, token);
  int64_t refresh = f->slot_ms / 3 > 0 ? f->slot_ms / 3 : 1;
  if (rc == DLOCK_EBUSY && (*hint < 0 || *hint > refresh))
    *hint = refresh;
  return rc;
}

/* Leave the queue (lua/fair_cancel.lua). */
static int give_up_req(dlock_lock *l, uint64_t owner_id, dlock__req *req) {
  fair *f = (fair *)l;
  char owner[64], tw[24];
  size_t olen = dlock__owner(l->h.client, owner_id, owner);
  const char *pub = dlock__publish_cmd(l->h.client);
  const char *keys[] = {l->h.name, f->queue.p, f->timeouts.p, f->alive.p};
  size_t klens[] = {l->h.name_len, f->queue.len, f->timeouts.len, f->alive.len};
  const char *args[] = {owner, pub, f->channel.p, tw};
  size_t alens[] = {olen, strlen(pub), f->channel.len,
                    (size_t)snprintf(tw, sizeof tw, "%" PRId64, f->thread_wait_ms)};
  return dlock__req_script(req, DLOCK__SCRIPT_FAIR_CANCEL, 4, keys, klens, 4,
                           args, alens);
}

static int release_req(dlock_lock *l, uint64_t owner_id, const char *rid,
                       dlock__req *req) {
  fair *f = (fair *)l;
  dlock_client *c = l->h.client;
  char owner[64], lease[24], px[24];
  size_t olen = dlock__owner(c, owner_id, owner);
  dlock__hold_id id = {l->h.name, l->h.name_len, owner, olen, NULL, 0};
  const char *pub = dlock__publish_cmd(c);
  const char *keys[] = {l->h.name, NULL, f->queue.p, f->timeouts.p, f->alive.p};
  size_t klens[] = {l->h.name_len, 0, f->queue.len, f->timeouts.len,
                    f->alive.len};
  const char *args[] = {lease, owner, px, pub, f->channel.p};
  size_t alens[] = {
      (size_t)snprintf(lease, sizeof lease, "%" PRId64,
                       dlock__hold_releasing(c, &id)),
      olen,
      (size_t)snprintf(px, sizeof px, "%" PRId64, dlock__unlock_latch_ms(c)),
      strlen(pub), f->channel.len};
  return dlock__release_req(req, DLOCK__SCRIPT_FAIR_RELEASE, &f->unlock_prefix,
                            rid, 5, keys, klens, 5, args, alens);
}

/* Each waiter has a channel of its own: redisson_lock__channel:{N}:U:T. */
static int wait_channel(dlock_lock *l, uint64_t owner_id, dlock__buf *channel,
                        dlock__wake_fn **wake) {
  fair *f = (fair *)l;
  char owner[64];
  dlock__owner(l->h.client, owner_id, owner);
  *wake = dlock__wake_all;
  if (dlock__buf_add(channel, f->channel.p, f->channel.len) != DLOCK_OK ||
      dlock__buf_printf(channel, ":%s", owner) != DLOCK_OK)
    return dlock__oom();
  return DLOCK_OK;
}

static int force_release(dlock_lock *l, int *deleted) {
  fair *f = (fair *)l;
  const char *keys[] = {l->h.name, f->queue.p, f->timeouts.p, f->alive.p};
  size_t klens[] = {l->h.name_len, f->queue.len, f->timeouts.len, f->alive.len};
  const char *args[] = {dlock__publish_cmd(l->h.client), f->channel.p};
  size_t alens[] = {strlen(dlock__publish_cmd(l->h.client)), f->channel.len};
  return dlock__force_release_call(l, DLOCK__SCRIPT_FAIR_FORCE_RELEASE, 4, keys,
                                   klens, 2, args, alens, deleted);
}

static void destroy(dlock_lock *l) {
  fair *f = (fair *)l;
  dlock__buf_free(&f->queue);
  dlock__buf_free(&f->timeouts);
  dlock__buf_free(&f->alive);
  dlock__buf_free(&f->channel);
  dlock__buf_free(&f->unlock_prefix);
}

static const dlock__lock_reqs fair_reqs = {
    .try_req = try_req,
    .release_req = release_req,
    .read_reply = dlock__hashlock_read_reply,
    DLOCK__HASHLOCK_REQS,
    .wait_channel = wait_channel,
    .wait_req = wait_req,
    .wait_reply = wait_reply,
    .give_up_req = give_up_req,
    .hold_count = dlock__hashlock_count,
    /* the same try every time (it joined the queue); "-MS" lease hints */
    .early = 1,
    .lease_hints = 1,
};

/* Defined below; src/catalog/catalog.c lists every kind. */
extern const dlock__lock_methods dlock__non_reentrant_fair_kind;

/* A handle's options (its wait slot, its thread wait) and keys. */
static int open_fair(dlock_lock *l, const dlock_lock_opts *opts) {
  if (opts && opts->wait_slot_ms < 0)
    return dlock__fail(DLOCK_EINVAL, "wait_slot_ms must be >= 0");
  int64_t thread_wait = opts && opts->version >= 2 ? opts->thread_wait_ms : 0;
  if (thread_wait < 0)
    return dlock__fail(DLOCK_EINVAL, "thread_wait_ms must be >= 0");
  fair *f = (fair *)l;
  f->once = l->m == &dlock__non_reentrant_fair_kind;
  f->slot_ms = opts && opts->wait_slot_ms ? opts->wait_slot_ms : DEFAULT_SLOT_MS;
  f->thread_wait_ms = thread_wait ? thread_wait : DEFAULT_THREAD_WAIT_MS;
  const char *n = l->h.name;
  size_t len = l->h.name_len;
  if (dlock__key(&f->queue, DLOCK__KEY_FAIR_QUEUE, n, len) ||
      dlock__key(&f->timeouts, DLOCK__KEY_FAIR_TIMEOUT, n, len) ||
      dlock__key(&f->alive, DLOCK__KEY_FAIR_ALIVE, n, len) ||
      dlock__key(&f->channel, DLOCK__KEY_LOCK_CHANNEL, n, len) ||
      dlock__key(&f->unlock_prefix, DLOCK__KEY_UNLOCK_LATCH, n, len))
    return dlock__oom();
  return DLOCK_OK;
}

const dlock__lock_methods dlock__fair_kind = {
    .kind = "fair",
    .noun = "fair lock",
    .caps = DLOCK_CAP_REENTRANT | DLOCK_CAP_FAIR,
    .size = sizeof(fair),
    .layout = DLOCK__LAYOUT_LOCK_HASH, /* announces only to its next
                                          waiter's own channel */
    .reqs = &fair_reqs,
    .open = open_fair,
    .force_release = force_release,
    .state = dlock__hashlock_state,
    .destroy = destroy,
};

const dlock__lock_methods dlock__non_reentrant_fair_kind = {
    .kind = "non-reentrant fair",
    .noun = "non-reentrant fair lock",
    .caps = DLOCK_CAP_FAIR,
    .size = sizeof(fair),
    .layout = DLOCK__LAYOUT_LOCK_HASH, /* announces only to its next
                                          waiter's own channel */
    .reqs = &fair_reqs,
    .open = open_fair,
    .force_release = force_release,
    .state = dlock__hashlock_state,
    .destroy = destroy,
};

int dlock_fair_lock_new(dlock_client *client, const char *name,
                        const dlock_lock_opts *opts, dlock_lock **out) {
  return dlock__lock_make(&dlock__fair_kind, client, name, opts, out);
}

int dlock_non_reentrant_fair_lock_new(dlock_client *client, const char *name,
                                      const dlock_lock_opts *opts,
                                      dlock_lock **out) {
  return dlock__lock_make(&dlock__non_reentrant_fair_kind, client, name, opts,
                          out);
}
