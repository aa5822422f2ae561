/* The kinds' one header from below (tests/layering.py holds every kind's
 * folder to it): the lock method table, what a backend fills in to be a
 * dlock_lock, and through it the core's calls, requests and handles, a
 * kind's wait and the recipe, holds and the watchdog, pub/sub waiters,
 * the client's counters, and the async operations' hooks.
 *
 * Backends embed struct dlock_lock first and are allocated by
 * methods->size. Public calls in lock.c hold every argument check, so a
 * method may assume a valid handle, a client that was open when the call
 * began, and checked wait/lease values. */
#ifndef DLOCK_LOCK_IMPL_H
#define DLOCK_LOCK_IMPL_H

#include "async/async.h"
#include "core/core.h"
#include "core/pubsub.h"
#include "core/stats.h"
#include "core/wait.h"
#include "core/watchdog.h"
#include "dlock/async.h"
#include "dlock/lock.h"

/* What a script-based kind is: the requests it sends and how it reads
 * their answers. The lock recipe (lock.c: dlock__lock_acquire_by_req,
 * dlock__lock_release_by_req; lock_async.c) drives any kind from these
 * alone, blocking or not, and RedLock asks its members by them. */
typedef struct dlock__lock_reqs {
  /* Build one try (no waiting) into req, for the caller to submit. */
  int (*try_req)(dlock_lock *lock, uint64_t owner, int64_t lease_ms,
                 dlock__req *req);
  /* Build one release into req; rid: the release's request id (32 hex
   * characters), the same for its retries (the unlock latch). */
  int (*release_req)(dlock_lock *lock, uint64_t owner, const char *rid,
                     dlock__req *req);
  /* Read a reply to try_req (release 0) or release_req (release 1) without
   * the handle: it runs on an engine thread when the handle may be gone.
   * DLOCK_OK granted (*token: the fencing token, 0 without) / released;
   * DLOCK_EBUSY held by another (*hint: its PTTL), DLOCK_ENOTOWNER nothing
   * to release (these two with no message: the caller words them); or an
   * error with its message. */
  int (*read_reply)(const redisReply *r, int release, int64_t *hint,
                    int64_t *token);
  /* Record a grant of try_req (t0_ms: when it was sent) as the owner's hold,
   * renewed by the watchdog when asked; ln as in dlock__hold_add. */
  int (*hold)(dlock_lock *lock, uint64_t owner, int watchdog, int64_t lease_ms,
              int64_t t0_ms, dlock__listener *ln);
  /* Apply a reply to release_req to the owner's hold: DLOCK_OK, DLOCK_ELOST,
   * DLOCK_ENOTOWNER, or an error. */
  int (*released)(dlock_lock *lock, uint64_t owner, const redisReply *r);
  /* Stop tracking the owner's hold (outcome unknown; its lease ends it). */
  void (*forget)(dlock_lock *lock, uint64_t owner);
  /* The channel a waiter of owner listens on, appended to *channel, and
   * how many waiters one message wakes. DLOCK_OK or DLOCK_ENOMEM. */
  int (*wait_channel)(dlock_lock *lock, uint64_t owner, dlock__buf *channel,
                      dlock__wake_fn **wake);
  /* Optional, for a kind whose waiters queue (the fair lock): a try that
   * joins the queue when join is 1 (the waiter is subscribed); its reply
   * read with the handle; and the request that leaves the queue when the
   * wait ends without a grant. NULL: try_req, read_reply, nothing to
   * leave. */
  int (*wait_req)(dlock_lock *lock, uint64_t owner, int64_t lease_ms, int join,
                  dlock__req *req);
  int (*wait_reply)(dlock_lock *lock, const redisReply *r, int64_t *hint,
                    int64_t *token);
  int (*give_up_req)(dlock_lock *lock, uint64_t owner, dlock__req *req);
  /* Optional: the owner's hold count as the client's hold registry has it
   * (-1: reported lost). When a try's answer is lost, the server's count
   * (state) against it says whether the try ran (dlock__lock_ask).
   * NULL: not asked, the acquire fails with DLOCK_EIO. */
  int64_t (*hold_count)(dlock_lock *lock, uint64_t owner);
  /* 1: a grant's token comes only in its answer (the fenced lock): a lost
   * try that ran is given back (one hold released) and tried afresh, so
   * the caller's grant always has its token. */
  int token_in_answer;
  /* Optional: the owner's field in the lock's hash ("U:T", "U:T:write")
   * into out, its length: a guarded write checks it (src/fence). NULL: the
   * kind cannot guard a write. */
  size_t (*guard_field)(dlock_lock *lock, uint64_t owner, char out[96]);
  /* How it waits: the lock layer makes its wait rules from these and the
   * requests above (a channel when wait_channel is set, a queue to leave
   * when give_up_req is): no kind writes a wait table of its own. */
  /* Optional: a try found it held; the kind may shorten *hint, the pause
   * before the next try (the spin lock's back-off, whose state is w's). */
  void (*busy)(dlock_lock *lock, dlock__wait *w, int64_t *hint);
  /* Optional: a lost try asked by the kind itself, when its hold count
   * cannot tell (the election asks for its term): DLOCK_OK and *ran, or an
   * error, as dlock__wait_rules' ask. NULL: hold_count asks. */
  int (*ask)(dlock_lock *lock, dlock__wait *w, int *ran);
  /* every try after the first sends the same bytes (dlock__wait_rules) */
  unsigned early : 1;
  /* its releases announce a new holder's lease as "-MS" (the fair lock) */
  unsigned lease_hints : 1;
} dlock__lock_reqs;

/* The wait rules the lock layer made for a kind's requests (both drivers
 * read them; the wait's noun is the kind's, set in each wait). */
const dlock__wait_rules *dlock__lock_wait_rules(const dlock__lock_reqs *reqs);

/* What a kind stores under its name (docs/wire.md): kinds of one layout
 * share a name as the layout allows (they exclude each other, or count
 * permits together); kinds of two layouts refuse each other with
 * DLOCK_EKIND and leave the name as it was. */
typedef enum dlock__layout {
  DLOCK__LAYOUT_NONE,        /* a combinator: its members' layouts */
  DLOCK__LAYOUT_LOCK_HASH,   /* a lock's hash: field U:T, its hold count */
  DLOCK__LAYOUT_RWLOCK_HASH, /* a read-write lock's hash: mode, holders */
  DLOCK__LAYOUT_COUNT,       /* a string: a semaphore's permits */
  DLOCK__LAYOUT_GROUP_HASH,  /* a grouped multi-lock's hash */
} dlock__layout;

/* A lock kind: its name, what it can do, and either its requests (a
 * script-based kind) or the handle operations of a composite (the
 * multi-lock, RedLock, the semaphore lock), which drive other locks or
 * calls. Public calls in lock.c hold every argument check. */
typedef struct dlock__lock_methods {
  const char *kind;
  const char *noun; /* for messages: "lock", "fair lock", "read lock" */
  unsigned caps;    /* DLOCK_CAP_* */
  size_t size;      /* bytes to allocate for the backend's struct */
  dlock__layout layout;
  /* 1: its releases are announced on channel (dlock_watcher listens on
   * every kind's); 0: it announces nothing (the spin lock). */
  int announces;
  dlock__key_role channel;
  const dlock__lock_reqs *reqs; /* NULL: a composite */
  /* A kind made on one name (dlock_lock_new): its own set-up of a handle
   * just allocated (its keys, its options): DLOCK_OK, or an error with
   * its message, and the handle is freed (destroy runs on what was set
   * up). NULL: nothing to set up. */
  int (*open)(dlock_lock *lock, const dlock_lock_opts *opts);
  /* Every kind: */
  int (*force_release)(dlock_lock *lock, int *deleted); /* DLOCK_OK (*deleted
                                                       1, or 0: it was free)
                                                       or an error */
  int (*state)(dlock_lock *lock, uint64_t owner, dlock_lock_state *out);
  void (*destroy)(dlock_lock *lock); /* backend's own fields; may be NULL */
  /* A composite's (a kind with reqs: NULL, the recipe's). owner: the id
   * holds belong to (the caller's thread or bound owner; a combinator
   * passes its own to its members). */
  int (*acquire)(dlock_lock *lock, uint64_t owner, int64_t wait_ms,
                 int64_t lease_ms, dlock_grant *grant);
  int (*release)(dlock_lock *lock, uint64_t owner);
  /* Optional: a kind built on another async call (the semaphore lock, on
   * the permits') starts its async acquire itself; arguments checked. */
  int (*acquire_async)(dlock_lock *lock, uint64_t owner, int64_t wait_ms,
                       int64_t lease_ms, dlock_done_fn *done, void *data,
                       dlock_op *op);
  /* Optional: a combinator's client for its async calls (its members'
   * one engine), or NULL with the error set. */
  dlock_client *(*async_client)(dlock_lock *lock);
  /* Optional: a combinator's async release (owner checked). */
  int (*release_async)(dlock_lock *lock, uint64_t owner, dlock_done_fn *done,
                       void *data, dlock_op *op);
} dlock__lock_methods;

/* The kind's acquire and release (arguments checked): the recipe's for a
 * kind with requests, a composite's own. For a combinator's members too. */
int dlock__lock_run_acquire(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                            int64_t lease_ms, dlock_grant *grant);
int dlock__lock_run_release(dlock_lock *l, uint64_t owner);

struct dlock_lock {
  dlock__handle h;      /* first; h.client is NULL for combinators */
  const dlock__lock_methods *m;
  uint64_t bound_owner; /* 0: the calling thread owns */
  unsigned caps;        /* m->caps, or a combinator's own */
};

/* The async acquire and release (lock_async.c) with internal 1: an
 * inner operation of a combinator, whose callback runs on the engine
 * thread at once whatever the client's completion mode. */
int dlock__acquire_op(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                      int64_t lease_ms, dlock_done_fn *done, void *data,
                      int internal, dlock_op *op);
int dlock__release_op(dlock_lock *l, uint64_t owner, dlock_done_fn *done,
                      void *data, int internal, dlock_op *op);
/* lock_async.c: the one engine thread every member lock's client runs on: that client
 * of members[0], or NULL with DLOCK_ENOTSUP set (members on several
 * engines: use one client, or share_engine). */
dlock_client *dlock__lock_members_engine(dlock_lock *const *members, size_t n);
/* Whether the kind waits without a thread (lock_async.c). */
int dlock__lock_can_wait(const dlock_lock *l);

/* A handle of size bytes (a lock's, a synchronizer's, an inspection's):
 * opts checked (its version) and unpacked for core's dlock__handle_new. */
int dlock__handle_open(size_t size, dlock_client *client, const char *name,
                       const dlock_lock_opts *opts, void **out);

/* Allocate a backend's struct (m->size bytes) with dlock__handle_open (out
 * must not be NULL: constructors pass their own local). */
int dlock__lock_alloc(const dlock__lock_methods *m, dlock_client *client,
                      const char *name, const dlock_lock_opts *opts,
                      dlock_lock **out);

/* A handle of kind m on name: allocated, then set up by m->open. The
 * constructor of every kind made on one name. */
int dlock__lock_make(const dlock__lock_methods *m, dlock_client *client,
                     const char *name, const dlock_lock_opts *opts,
                     dlock_lock **out);

/* Allocate a combinator (multi-lock, RedLock): no client of its own; its
 * name joins the members' names. Checks members (1..DLOCK__MAX_MEMBERS, no
 * NULL). */
#define DLOCK__MAX_MEMBERS 128
int dlock__lock_alloc_combo(const dlock__lock_methods *m,
                            dlock_lock *const *members, size_t n,
                            dlock_lock **out);

/* What every call on a lock handle checks first (the error cleared): NULL
 * (DLOCK_EINVAL), a closed client (DLOCK_ECLOSED). */
int dlock__lock_check(dlock_lock *lock);

/* The owner id for a call on lock: the bound id or the calling thread's. */
uint64_t dlock__lock_owner_id(const dlock_lock *lock);

/* ---- request calls (lock.c): DLOCK_ENOTSUP for a kind without them ------- */

/* 1 when lock's kind has the request methods (can be a RedLock member). */
int dlock__lock_has_requests(const dlock_lock *lock);
int dlock__lock_try_req(dlock_lock *lock, uint64_t owner, int64_t lease_ms,
                        dlock__req *req);
int dlock__lock_release_req(dlock_lock *lock, uint64_t owner, const char *rid,
                            dlock__req *req);
int dlock__lock_hold(dlock_lock *lock, uint64_t owner, int watchdog,
                     int64_t lease_ms, int64_t t0_ms, dlock__listener *ln);
int dlock__lock_released(dlock_lock *lock, uint64_t owner, const redisReply *r);
/* A release request rid that failed sent again, blocking, while its answer
 * is lost (the unlock latch replays one that ran): *reply as
 * dlock__release_retry's. */
int dlock__lock_release_again(dlock_lock *lock, uint64_t owner, const char *rid,
                              redisReply **reply);
void dlock__lock_forget(dlock_lock *lock, uint64_t owner);

/* ---- locks kept in a hash of owner -> hold count (hashlock.c) ------------- */

/* The reentrant, fenced and fair locks share the hash N, its renewal, its
 * state query and the meaning of a release's reply. */

/* The state query of a lock kept in a hash (lua/lock_state.lua,
 * lua/rwlock_state.lua): KEYS = its name, ARGV = id's field; the reply
 * [held, id's hold count, PTTL], held 1 (mode NULL) or the lock's mode
 * equal to mode (a read-write lock's "read" or "write"). */
int dlock__lock_state_query(dlock_lock *l, int script,
                            const dlock__hold_id *id, const char *mode,
                            dlock_lock_state *st);
/* A state script's reply [held, count, PTTL] (held: 1, or the mode for
 * mode) into st: DLOCK_OK or an error. */
int dlock__lock_state_read(const redisReply *r, const char *mode,
                           dlock_lock_state *st);
/* The state method: lua/lock_state.lua. */
int dlock__hashlock_state(dlock_lock *l, uint64_t owner, dlock_lock_state *st);
/* Record the owner's hold of N (renewed by lua/lock_renew.lua). */
int dlock__hashlock_hold(dlock_lock *l, uint64_t owner, int watchdog,
                         int64_t lease_ms, int64_t t0_ms, dlock__listener *ln);
/* The entries of dlock__lock_reqs that every lock kept in a hash of owner
 * -> hold count shares (its hold record, the meaning of a release's reply,
 * the guarded write's field): a kind's table starts with them. */
#define DLOCK__HASHLOCK_REQS                                                   \
  .hold = dlock__hashlock_hold, .released = dlock__hashlock_released,          \
  .forget = dlock__hashlock_forget,                                            \
  .guard_field = dlock__hashlock_guard_field

/* A release's reply (nil: no hold; 0: a hold remains; 1: released) applied
 * to the hold id (who: the owner, for messages): DLOCK_OK, DLOCK_ELOST,
 * DLOCK_ENOTOWNER or an error. For a kind that keys its holds otherwise
 * (the grouped multi-lock); the next one is it for the owner's field. */
int dlock__lock_released_as(dlock_lock *l, const dlock__hold_id *id,
                            const char *who, const redisReply *r);
/* A release's reply (nil: no hold; 0: a hold remains; 1: released) applied
 * to the owner's hold: DLOCK_OK, DLOCK_ELOST, DLOCK_ENOTOWNER or an error. */
int dlock__hashlock_released(dlock_lock *l, uint64_t owner, const redisReply *r);
/* Stop tracking the owner's hold (outcome unknown; its lease ends it). */
void dlock__hashlock_forget(dlock_lock *l, uint64_t owner);
/* A release's reply (lua/lock_release.lua, fair_release.lua) as read_reply
 * gives it: DLOCK_OK released one hold (0 or 1: a hold remains or not),
 * DLOCK_ENOTOWNER there was none (nil, no message), or an error. */
int dlock__hashlock_release_answer(const redisReply *r);
/* read_reply of the kinds whose acquire answers nil (granted) or how long
 * to wait (lua/lock_acquire.lua, fair_acquire.lua), and release as above. */
int dlock__hashlock_read_reply(const redisReply *r, int release, int64_t *hint,
                               int64_t *token);
/* One release of owner's hold of N (lua/lock_release.lua, request id rid,
 * the unlock latch unlock_prefix + rid), announced on channel (NULL: a kind
 * without pub/sub; nothing is published). */
int dlock__hashlock_release_req(dlock_lock *l, uint64_t owner_id,
                                const char *rid, const dlock__buf *channel,
                                const dlock__buf *unlock_prefix,
                                dlock__req *req);
/* Delete N whoever holds it (lua/lock_force_release.lua), announced on
 * channel (NULL: nothing published): DLOCK_OK (*deleted 1, or 0: it was
 * free) or an error. */
int dlock__hashlock_force_release(dlock_lock *l, const dlock__buf *channel,
                                  int *deleted);
/* How many times this client holds N for owner (0 none, -1 lost). */
int64_t dlock__hashlock_count(dlock_lock *l, uint64_t owner);
size_t dlock__hashlock_guard_field(dlock_lock *l, uint64_t owner, char out[96]);


/* A try whose answer was lost (the wait's ask): the owner's hold count
 * on the server (the state method) against prior, the count this client
 * has: one more, *ran 1 (the try ran: *sent_ms = try_ms, no later than
 * it was sent); the same, *ran 0 (it did not): DLOCK_OK; else an error
 * (DLOCK_EIO when the server cannot be asked or the count is neither). */
int dlock__lock_ask(dlock_lock *l, uint64_t owner, int64_t prior,
                    int64_t try_ms, int64_t *sent_ms, int *ran);

/* The blocking release of a kind with release_req and released: one
 * request id for the call and its retries on a lost reply (the unlock
 * latch replays it), then the reply applied to the owner's hold. */
int dlock__lock_release_by_req(dlock_lock *l, uint64_t owner);
/* The acquire of a kind that is its requests (dlock__lock_reqs). */
int dlock__lock_acquire_by_req(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                               int64_t lease_ms, dlock_grant *grant);

/* A force-release script's reply, 1 (deleted) or 0 (was free), into
 * *deleted: DLOCK_OK, or an error. */
int dlock__force_release_answer(const redisReply *r, int *deleted);
/* Run a force-release script that answers 1 (deleted) or 0 (was free)
 * into *deleted: DLOCK_OK, or an error. */
int dlock__force_release_call(dlock_lock *l, int script, size_t nkeys,
                              const char *const *keys, const size_t *klens,
                              size_t nargs, const char *const *args,
                              const size_t *alens, int *deleted);

#endif /* DLOCK_LOCK_IMPL_H */
