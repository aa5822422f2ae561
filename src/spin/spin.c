/* The spin lock (docs/spin.md, docs/wire.md "Spin lock"): Redisson's
 * RSpinLock. The reentrant lock's hash N, lease, watchdog renewal, unlock
 * latch and state, and no pub/sub at all: its wait rules have no channel,
 * so a waiter pauses between tries (the drivers' pause step), each pause
 * its back-off's next, cut at the holder's lease end; a release and a
 * force release publish nothing (lock_release.lua and
 * lock_force_release.lua with an empty publish command). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "lock/lock_impl.h"

/* Redisson's defaults (LockOptions.ExponentialBackOff, ConstantBackOff) */
#define INITIAL_MS 1
#define MAX_MS 128
#define MULTIPLIER 2

typedef struct spin {
  dlock_lock base;
  int64_t initial_ms, max_ms; /* exponential back-off */
  int multiplier;
  int64_t delay_ms;           /* > 0: a constant pause instead */
  dlock__buf unlock_prefix;   /* redisson_unlock_latch:{N}: */
} spin;

/* ---- tries and releases as requests ---------------------------------------- */

static int try_req(dlock_lock *l, uint64_t owner_id, int64_t lease_ms,
                   dlock__req *req) {
  char owner[64], lease[24];
  const char *keys[] = {l->h.name};
  size_t klens[] = {l->h.name_len};
  const char *args[] = {lease, owner};
  size_t alens[] = {dlock__fmt_i64(lease, lease_ms),
                    dlock__owner(l->h.client, owner_id, owner)};
  return dlock__req_script(req, DLOCK__SCRIPT_LOCK_ACQUIRE, 1, keys, klens, 2,
                           args, alens);
}

/* lock_release.lua and lock_force_release.lua, announcing nothing. */
static int release_req(dlock_lock *l, uint64_t owner_id, const char *rid,
                       dlock__req *req) {
  return dlock__hashlock_release_req(l, owner_id, rid, NULL,
                                     &((spin *)l)->unlock_prefix, req);
}

static int force_release(dlock_lock *l, int *deleted) {
  return dlock__hashlock_force_release(l, NULL, deleted);
}

/* ---- the wait: pauses by the back-off ---------------------------------------- */

/* The next pause of w's back-off. Exponential (Redisson's): the first is
 * the initial delay; each next one is the last times the multiplier plus a
 * random 0 .. fails-1 ms, at most the maximum, where it stays. Constant:
 * the delay plus a random 0 .. delay/8 ms (Redisson's constant back-off
 * documents a jitter its code does not add). */
static int64_t next_pause(const spin *s, dlock__wait *w) {
  if (s->delay_ms > 0)
    return s->delay_ms + dlock__random_between(0, s->delay_ms / 8);
  if (w->backoff_ms == 0)
    w->backoff_ms = s->initial_ms;
  int64_t pause = w->backoff_ms;
  if (pause < s->max_ms) {
    int64_t next = pause * s->multiplier +
                   dlock__random_between(0, w->backoff_fails++);
    w->backoff_ms = next < s->max_ms ? next : s->max_ms;
  }
  return pause;
}

/* A try found it held: the hint becomes the next pause, cut at the
 * holder's lease end (its PTTL) when that comes sooner. */
static void busy(dlock_lock *l, dlock__wait *w, int64_t *hint) {
  int64_t pause = next_pause((const spin *)l, w);
  if (*hint < 0 || *hint > pause)
    *hint = pause;
}

static const dlock__lock_reqs spin_reqs = {
    .try_req = try_req,
    .release_req = release_req,
    .read_reply = dlock__hashlock_read_reply,
    DLOCK__HASHLOCK_REQS,
    .hold_count = dlock__hashlock_count,
    /* no wait_channel: the drivers pause between tries, as busy says */
    .busy = busy,
};

static void destroy(dlock_lock *l) { dlock__buf_free(&((spin *)l)->unlock_prefix); }

/* A handle's back-off (its options) and keys. */
static int open_spin(dlock_lock *l, const dlock_lock_opts *opts) {
  int v3 = opts && opts->version >= 3;
  if (v3 && (opts->spin_initial_ms < 0 || opts->spin_max_ms < 0 ||
             opts->spin_delay_ms < 0 || opts->spin_multiplier < 0))
    return dlock__fail(DLOCK_EINVAL, "the spin options must be >= 0");
  spin *s = (spin *)l;
  s->initial_ms = v3 && opts->spin_initial_ms ? opts->spin_initial_ms : INITIAL_MS;
  s->max_ms = v3 && opts->spin_max_ms ? opts->spin_max_ms : MAX_MS;
  s->multiplier = v3 && opts->spin_multiplier ? opts->spin_multiplier : MULTIPLIER;
  s->delay_ms = v3 ? opts->spin_delay_ms : 0;
  if (s->max_ms < s->initial_ms)
    s->max_ms = s->initial_ms;
  if (dlock__key(&s->unlock_prefix, DLOCK__KEY_UNLOCK_LATCH, l->h.name,
                 l->h.name_len))
    return dlock__oom();
  return DLOCK_OK;
}

const dlock__lock_methods dlock__spin_kind = {
    .kind = "spin",
    .noun = "spin lock",
    .caps = DLOCK_CAP_REENTRANT,
    .size = sizeof(spin),
    .layout = DLOCK__LAYOUT_LOCK_HASH,
    .reqs = &spin_reqs,
    .open = open_spin,
    .force_release = force_release,
    .state = dlock__hashlock_state,
    .destroy = destroy,
};

int dlock_spin_lock_new(dlock_client *client, const char *name,
                        const dlock_lock_opts *opts, dlock_lock **out) {
  return dlock__lock_make(&dlock__spin_kind, client, name, opts, out);
}
