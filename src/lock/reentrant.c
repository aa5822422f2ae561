/* The reentrant lock, the fenced lock and the non-reentrant lock
 * (docs/wire.md, "Reentrant lock", "Fenced lock", "Non-reentrant locks"): a
 * hash N of owner -> hold count with a lease, an unlock channel for waiters,
 * an unlock latch that makes release idempotent; for the fenced kind a token
 * counter INCRed by every grant; the non-reentrant kind refuses its
 * holder's second acquire (DLOCK_EREENTRY). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "lock/lock_impl.h"

typedef struct reentrant {
  dlock_lock base;
  int fenced;
  int once; /* non-reentrant */
  dlock__buf channel;      /* redisson_lock__channel:{N} */
  dlock__buf token_key;    /* redisson_lock_token:{N} */
  dlock__buf unlock_prefix; /* redisson_unlock_latch:{N}: */
} reentrant;

/* ---- single tries and releases as requests -------------------------------- */

static int try_req(dlock_lock *l, uint64_t owner_id, int64_t lease_ms,
                   dlock__req *req) {
  reentrant *rl = (reentrant *)l;
  char owner[64], lease[24];
  const char *keys[] = {l->h.name, rl->token_key.p};
  size_t klens[] = {l->h.name_len, rl->token_key.len};
  const char *args[] = {lease, owner, "1"};
  size_t alens[] = {dlock__fmt_i64(lease, lease_ms),
                    dlock__owner(l->h.client, owner_id, owner), 1};
  return dlock__req_script(
      req, rl->fenced ? DLOCK__SCRIPT_FENCED_ACQUIRE : DLOCK__SCRIPT_LOCK_ACQUIRE,
      rl->fenced ? 2 : 1, keys, klens, rl->once ? 3 : 2, args, alens);
}

/* lua/fenced_acquire.lua: {1, token} granted, {0, pttl} not. */
static int fenced_read_reply(const redisReply *r, int release, int64_t *hint,
                             int64_t *token) {
  if (release)
    return dlock__hashlock_release_answer(r);
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
      r->element[0]->type == REDIS_REPLY_INTEGER &&
      r->element[1]->type == REDIS_REPLY_INTEGER) {
    if (r->element[0]->integer == 1) {
      *token = r->element[1]->integer;
      return DLOCK_OK;
    }
    *hint = r->element[1]->integer;
    return DLOCK_EBUSY;
  }
  return dlock__fail_reply(r, "acquire");
}

static int release_req(dlock_lock *l, uint64_t owner_id, const char *rid,
                       dlock__req *req) {
  reentrant *rl = (reentrant *)l;
  return dlock__hashlock_release_req(l, owner_id, rid, &rl->channel,
                                     &rl->unlock_prefix, req);
}

static int wait_channel(dlock_lock *l, uint64_t owner_id, dlock__buf *channel,
                        dlock__wake_fn **wake) {
  reentrant *rl = (reentrant *)l;
  *wake = dlock__wake_one; /* a release lets one waiter in */
  return dlock__buf_add(channel, rl->channel.p, rl->channel.len);
}

static int force_release(dlock_lock *l, int *deleted) {
  return dlock__hashlock_force_release(l, &((reentrant *)l)->channel, deleted);
}

static void destroy(dlock_lock *l) {
  reentrant *rl = (reentrant *)l;
  dlock__buf_free(&rl->channel);
  dlock__buf_free(&rl->token_key);
  dlock__buf_free(&rl->unlock_prefix);
}

static const dlock__lock_reqs reentrant_reqs = {
    .try_req = try_req,
    .release_req = release_req,
    .read_reply = dlock__hashlock_read_reply,
    DLOCK__HASHLOCK_REQS,
    .wait_channel = wait_channel,
    .hold_count = dlock__hashlock_count,
};

/* The same requests, each grant with its token: a lost answer that ran
 * is given back and tried afresh (its token is gone with it). */
static const dlock__lock_reqs fenced_reqs = {
    .try_req = try_req,
    .release_req = release_req,
    .read_reply = fenced_read_reply,
    DLOCK__HASHLOCK_REQS,
    .wait_channel = wait_channel,
    .hold_count = dlock__hashlock_count,
    .token_in_answer = 1,
};


/* Defined below; src/catalog/catalog.c lists every kind. */
extern const dlock__lock_methods dlock__non_reentrant_kind, dlock__fenced_kind;

/* A handle's keys: its channel, unlock latches and (fenced) token counter. */
static int open_lock(dlock_lock *l, const dlock_lock_opts *opts) {
  (void)opts;
  reentrant *rl = (reentrant *)l;
  rl->fenced = l->m == &dlock__fenced_kind;
  rl->once = l->m == &dlock__non_reentrant_kind;
  const char *n = l->h.name;
  size_t len = l->h.name_len;
  if (dlock__key(&rl->channel, DLOCK__KEY_LOCK_CHANNEL, n, len) ||
      (rl->fenced && dlock__key(&rl->token_key, DLOCK__KEY_LOCK_TOKEN, n, len)) ||
      dlock__key(&rl->unlock_prefix, DLOCK__KEY_UNLOCK_LATCH, n, len))
    return dlock__oom();
  return DLOCK_OK;
}

const dlock__lock_methods dlock__reentrant_kind = {
    .kind = "reentrant",
    .noun = "lock",
    .caps = DLOCK_CAP_REENTRANT,
    .size = sizeof(reentrant),
    .layout = DLOCK__LAYOUT_LOCK_HASH,
    .announces = 1,
    .channel = DLOCK__KEY_LOCK_CHANNEL,
    .reqs = &reentrant_reqs,
    .open = open_lock,
    .force_release = force_release,
    .state = dlock__hashlock_state,
    .destroy = destroy,
};

const dlock__lock_methods dlock__non_reentrant_kind = {
    .kind = "non-reentrant",
    .noun = "non-reentrant lock",
    .caps = 0,
    .size = sizeof(reentrant),
    .layout = DLOCK__LAYOUT_LOCK_HASH,
    .announces = 1,
    .channel = DLOCK__KEY_LOCK_CHANNEL,
    .reqs = &reentrant_reqs,
    .open = open_lock,
    .force_release = force_release,
    .state = dlock__hashlock_state,
    .destroy = destroy,
};

const dlock__lock_methods dlock__fenced_kind = {
    .kind = "fenced",
    .noun = "lock",
    .caps = DLOCK_CAP_REENTRANT | DLOCK_CAP_FENCED,
    .size = sizeof(reentrant),
    .layout = DLOCK__LAYOUT_LOCK_HASH,
    .announces = 1,
    .channel = DLOCK__KEY_LOCK_CHANNEL,
    .reqs = &fenced_reqs,
    .open = open_lock,
    .force_release = force_release,
    .state = dlock__hashlock_state,
    .destroy = destroy,
};

int dlock_reentrant_lock_new(dlock_client *client, const char *name,
                             const dlock_lock_opts *opts, dlock_lock **out) {
  return dlock__lock_make(&dlock__reentrant_kind, client, name, opts, out);
}

int dlock_non_reentrant_lock_new(dlock_client *client, const char *name,
                                 const dlock_lock_opts *opts,
                                 dlock_lock **out) {
  return dlock__lock_make(&dlock__non_reentrant_kind, client, name, opts, out);
}

int dlock_fenced_lock_new(dlock_client *client, const char *name,
                          const dlock_lock_opts *opts, dlock_lock **out) {
  return dlock__lock_make(&dlock__fenced_kind, client, name, opts, out);
}
