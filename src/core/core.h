/* What a backend may use of the core (with the base, base/base.h: errors,
 * clock, buffers and key names): requests and calls to the engine, the
 * client's options and owner strings, the waiting recipe, and the hold
 * registry (watchdog). The engine's own machinery (connections, the
 * pub/sub waiter's internals) is in core/engine.h, hash tables in
 * base/map.h; backends never include either. Nothing here is public
 * API. */
#ifndef DLOCK_CORE_H
#define DLOCK_CORE_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "dlock/client.h"
#include "dlock/error.h"
#include "base/base.h"
#include "net/req.h"

/* 1 on an engine thread: blocking calls are refused there. */
int dlock__on_engine_thread(void);

/* ---- handles (handle.c) ---------------------------------------------------- */

/* What every lock and synchronizer handle starts with. */
typedef struct dlock__handle {
  dlock_client *client; /* referenced; NULL for a combinator's handle */
  char *name;           /* a copy, NUL-terminated (names may hold NULs) */
  size_t name_len;
} dlock__handle;

/* Allocate size bytes (zeroed) whose first member is a dlock__handle: check
 * out (set to NULL first), client and the name (name_len bytes, for names
 * with NUL bytes; 0: up to its NUL), copy the name and take a reference on
 * client. The handle options are the kinds' (dlock__handle_open, src/lock). */
int dlock__handle_new(size_t size, dlock_client *client, const char *name,
                      size_t name_len, void **out);
/* Drop the handle's client reference and name (not the block itself). */
void dlock__handle_free(dlock__handle *h);

/* ---- requests to the engine (engine.c; the request: net/req.h) ----------- */

/* EVAL of a script text that is not in the registry (a guarded write's
 * body: src/fence), routed by its first key: as dlock__script_call. */
int dlock__eval_call(dlock_client *c, const char *text, size_t text_len,
                     size_t nkeys, const char *const *keys, const size_t *klens,
                     size_t nargs, const char *const *args,
                     const size_t *alens, redisReply **reply);

/* Hand req to the engine (any thread but the engine's). On DLOCK_ECLOSED the
 * request was not taken and done will not be called. */
int dlock__submit(dlock_client *c, dlock__req *req);

/* Submit and block until done. *reply (caller frees with freeReplyObject) is
 * set on DLOCK_OK; error replies are returned as DLOCK_EREDIS with the text in
 * dlock_errmsg() and *reply NULL. */
int dlock__call(dlock_client *c, dlock__req *req, redisReply **reply);
#ifdef DLOCK_FUZZ
/* Fuzz builds only (meson -Dfuzz=true): when set, dlock__call takes its
 * reply (or a failure status) from here instead of a server. */
extern int (*dlock__fuzz_reply)(dlock__req *req, redisReply **reply);
#endif

/* The write's acknowledgement: the replica guard (opts.replica_sync_ms,
 * docs/cluster.md) and durable grants (opts.durable_ms, docs/durability.md).
 * The script calls this thread makes between begin and end are each
 * followed by a WAIT until the master's replicas have the write (a
 * cluster's or sentinel's master; none on a standalone server) and by a
 * WAITAOF until the server fsynced it. end returns the code of the first
 * one that fell short (dlock__ack_missed), with why; 0 when none did. */
void dlock__ack_begin(void);
int dlock__ack_end(char *why, size_t n);
/* req's acknowledgement fell short (its WAIT reached no replica, its
 * WAITAOF did not fsync in time): why, and the code to report (0 when it
 * did not fall short): DLOCK_EPERM when the server refused the command,
 * DLOCK_ECONFIG when the server cannot (no AOF, a replica), else
 * DLOCK_EIO. */
int dlock__ack_missed(dlock_client *c, const dlock__req *req, char *why,
                        size_t n);

/* dlock__req_command (routed by route on a cluster, NULL: any node) +
 * dlock__call. */
int dlock__command_call(dlock_client *c, const char *route, size_t route_len,
                        size_t argc, const char *const *argv,
                        const size_t *lens, redisReply **reply);

/* dlock__req_script + dlock__call. */
int dlock__script_call(dlock_client *c, int script, size_t nkeys,
                       const char *const *keys, const size_t *klens,
                       size_t nargs, const char *const *args,
                       const size_t *alens, redisReply **reply);

/* ---- client accessors (engine.c) ------------------------------------------ */

/* The client's statistics (core/stats.h; stats.c). */
struct dlock__stats *dlock__client_stats(dlock_client *c);
/* The event hook (events.c): tell ev to the client's on_event, on its
 * engine thread (queued from any other); nothing without a hook. */
void dlock__event(dlock_client *c, const dlock_event *ev);
/* An acquire's end (rc; t0_us: when the call began), counted in the client
 * statistics and told to the event hook: WAITED when it waited
 * (dlock__stats_waited), ACQUIRED when granted. */
void dlock__acquire_done(dlock_client *c, const char *name, size_t len,
                         uint64_t owner, int rc, int64_t t0_us);

void dlock__client_ref(dlock_client *c);
void dlock__client_unref(dlock_client *c);
int dlock__client_closed(dlock_client *c);
const dlock_client_opts *dlock__client_opts(const dlock_client *c);
/* Replies handed to the application (reply.c, dlock/fence.h): a copy of r,
 * or NULL (out of memory); freeing one (NULL: nothing). */
struct dlock_reply;
struct dlock_reply *dlock__reply_copy(const redisReply *r);
void dlock__reply_free(struct dlock_reply *r);
/* The client's keys route by hash slot over several masters (a cluster:
 * net/topology.h's "slotted"). */
int dlock__client_slotted(const dlock_client *c);
/* A slotted client's masters as its slot map has them now, in the order
 * of their first slot: that slot of each into first[] (at most max).
 * Returns how many (0: no map yet). Any thread. */
#define DLOCK__MAX_MASTERS 128
int dlock__client_masters(dlock_client *c, int *first, int max);
/* The command the scripts announce with: "SPUBLISH" on a cluster that uses
 * sharded pub/sub (docs/cluster.md), else "PUBLISH". */
const char *dlock__publish_cmd(const dlock_client *c);
/* The server c talks to, for messages: "host:port" or the socket's path
 * (never a password). Returns buf. */
const char *dlock__client_where(const dlock_client *c, char *buf, size_t n);
/* Owner string "U:T" for owner id into out (at least 64 bytes). */
size_t dlock__owner(const dlock_client *c, uint64_t owner_id, char *out);

/* ---- pub/sub wake-up rules (pubsub.c) -------------------------------------- */

/* How many local waiters one message on a channel wakes; UINT32_MAX = all. */
typedef uint32_t dlock__wake_fn(const char *msg, size_t len);
uint32_t dlock__wake_one(const char *msg, size_t len);
uint32_t dlock__wake_all(const char *msg, size_t len);

/* ---- releases safe to retry (release.c) ------------------------------------ */

/* Call a release script whose second key (KEYS[2]) is the unlock latch:
 * unlock_prefix plus one random request id per call. A call whose reply is lost
 * (DLOCK_EIO) is retried with the same id (dlock__release_again), so the
 * script replays its first outcome instead of releasing twice. keys[1] is
 * filled in. */
int dlock__release_call(dlock_client *c, int script,
                        const dlock__buf *unlock_prefix, size_t nkeys,
                        const char **keys, size_t *klens, size_t nargs,
                        const char *const *args, const size_t *alens,
                        redisReply **reply);

/* Build one try of a release into req: script with KEYS[2] (keys[1],
 * filled in) the unlock latch unlock_prefix + rid, the latch DELed once the
 * reply is in (dlock__req_drop_after), sent even when the client closes.
 * A call and its retries after a lost reply share rid. */
int dlock__release_req(dlock__req *req, int script,
                       const dlock__buf *unlock_prefix, const char *rid,
                       size_t nkeys, const char **keys, size_t *klens,
                       size_t nargs, const char *const *args,
                       const size_t *alens);
/* The retry loop of a release: build makes one attempt's request (rid:
 * the request id every attempt shares); an attempt whose reply is lost
 * (dlock__answer_lost) is made again while dlock__release_again allows.
 * _id: with the id of an attempt made already (a RedLock member's). */
int dlock__release_retry(dlock_client *c,
                         int (*build)(void *ctx, const char *rid, dlock__req *req),
                         void *ctx, redisReply **reply);
int dlock__release_retry_id(dlock_client *c, const char *rid,
                            int (*build)(void *ctx, const char *rid, dlock__req *req),
                            void *ctx, redisReply **reply);
/* How long an unlock latch must live: the whole retry window. */
int64_t dlock__unlock_latch_ms(dlock_client *c);
/* Whether a release that failed with DLOCK_EIO makes attempt number
 * `attempt` (0 = the first) after starting at start_ms. */
int dlock__release_again(dlock_client *c, int64_t start_ms, int attempt);

/* ---- a kind's wait (wait.c, async/await.c) --------------------------------
 * A kind that waits (a lock kind, the latch, the semaphores) describes its
 * wait once, in a dlock__wait_rules; both drivers of the waiting recipe read
 * it: the blocking one (dlock__wait_run: a parked thread) and the async one
 * (async/await.c: a timer and the engine's ready list). A try is a request
 * the driver sends; the kind builds it and reads its answer. */
typedef struct dlock__wait dlock__wait;

typedef struct dlock__wait_rules {
  const char *noun; /* for messages ("lock", "semaphore"), unless w->noun */
  /* Build one try into req (the caller's thread, or the engine thread for
   * an async wait). */
  int (*try_req)(dlock__wait *w, dlock__req *req);
  /* Its answer (never an error reply: the driver reads those): 1 granted
   * (w->token, w->count as the kind tells them), 0 not yet (*hint: the
   * longest useful wait in ms, -1 unknown, -2 retry now), or an error. */
  int (*try_reply)(dlock__wait *w, const redisReply *r, int64_t *hint);
  /* The channel to wait on, appended to *ch, and its wake rule; made when
   * the wait begins (an uncontended call never waits). DLOCK_OK or
   * DLOCK_ENOMEM. NULL: a kind without pub/sub (the spin lock), whose
   * waits are pauses: each try's hint says how long. */
  int (*wait_channel)(dlock__wait *w, dlock__buf *ch, dlock__wake_fn **wake);
  /* Record a grant that stands (a hold for the watchdog; w->validity_ms):
   * DLOCK_OK, or an error, and the driver gives the grant back. NULL:
   * nothing to record. */
  int (*granted)(dlock__wait *w);
  /* The request that hands back a grant nobody keeps (cancelled, not
   * recorded, raced by an interrupt), into req; rid: its request id,
   * shared by its retries. NULL: nothing to undo. */
  int (*give_back)(dlock__wait *w, const char *rid, dlock__req *req);
  /* The request that leaves what the tries left behind when the wait ends
   * without a grant (a fair queue's entry). NULL: nothing. */
  int (*give_up)(dlock__wait *w, dlock__req *req);
  /* A try whose answer was lost (its connection dropped after it was
   * written): did it run? A blocking call (the async driver runs it on the
   * thread pool): 1 it did (w->sent_ms: its lease started no earlier), 0
   * it did not, or an error. NULL (or w->no_ask): DLOCK_EIO ends the
   * wait. */
  int (*ask)(dlock__wait *w);
  /* the client's waiters are served in arrival order, each needing
   * w->demand (a message "N" lets the oldest whose demands add up to at
   * most N try at once: semaphores) */
  unsigned fifo : 1;
  /* every try after the first sends the same bytes, which the engine may
   * send early on a wake-up (see dlock__waiter). Not for locks whose
   * waiters in many processes race for each release: the first
   * subscriber, told first, would win every race. */
  unsigned early : 1;
  /* a message "-MS" on the channel says the object was just taken with a
   * lease of MS ms; waiters re-try by that lease's end (fair lock) */
  unsigned lease_hints : 1;
  /* the wait is for an event, not for a contended object (a latch to reach
   * zero): the client's other calls keep the direct path meanwhile */
  unsigned event : 1;
  /* the messages' subject says the demand: 'semaphore "N" (2 permits)' */
  unsigned says_demand : 1;
} dlock__wait_rules;

/* One wait under way: what the caller asks, what the driver keeps, what a
 * grant tells. */
struct dlock__wait {
  const dlock__wait_rules *k;
  dlock__handle *h;     /* whose (interrupts name it; its client waits) */
  const char *noun;     /* messages: in place of k->noun, or NULL */
  void *ctx;            /* the kind's own */
  uint64_t owner;
  int64_t wait_ms;      /* 0 one try, DLOCK_WAIT_FOREVER */
  int64_t lease_ms;
  int64_t demand;       /* a FIFO wait's need (permits); 0 counts as 1 */
  int watchdog;         /* the grant is renewed until released */
  int no_ask;           /* lost answers are not asked about */
  char rid[33];         /* this wait's request id (the drivers set it at
                           the start): a kind marks what its tries did
                           with it (the semaphore) */
  void *res;            /* the async driver's dlock_result, NULL for a
                           blocking wait: what a grant fills in beyond
                           token, validity and count */
  /* the kind's own pacing between tries (the spin lock's back-off) */
  int64_t backoff_ms;
  int backoff_fails;
  /* the driver's */
  int subscribed;       /* the wait has its subscription (a queueing
                           kind's try may join the queue now) */
  int64_t sent_ms;      /* when the last try was sent: a lease starts there */
  /* what a grant tells (the kind's try_reply and granted) */
  int64_t token, count, validity_ms;
};

/* The blocking driver: try, subscribe, try and wait until granted (and
 * recorded: k->granted) or the budget (w->wait_ms: 0 one try, giving
 * DLOCK_EBUSY; DLOCK_WAIT_FOREVER) is spent. 1 granted, or an error
 * (DLOCK_ETIMEDOUT, DLOCK_EINTR, DLOCK_ECLOSED...). */
int dlock__wait_run(dlock__wait *w);

/* One try of a wait loop, as the blocking driver sends it. */
typedef struct dlock__try {
  struct dlock__waiter *early; /* set when the engine may send this try
                                  early on a wake-up (k->early), else
                                  NULL: wait.c's business */
  int64_t sent_ms; /* OUT of dlock__try_call: when the try's request was
                      sent (queued, or sent early): a lease starts there */
} dlock__try;

/* dlock__call for a wait loop's try: when the engine already sent this
 * try early (t->early), takes that answer instead of sending; otherwise
 * sends req and keeps its bytes for the next early send. Sets t->sent_ms. */
int dlock__try_call(dlock_client *c, dlock__try *t, dlock__req *req,
                    redisReply **reply);
/* The fate (dlock__req_fate, net/req.h) of the calling thread's last
 * dlock__call / dlock__try_call that failed with DLOCK_EIO or DLOCK_ENOMEM; DLOCK__SENT
 * after any other outcome. */
int dlock__last_call_fate(void);
/* rc is a call's failure whose answer may be lost (its fate says whether
 * it was sent): the connection broke (DLOCK_EIO), or the reply could not
 * be read for want of memory (DLOCK_ENOMEM; unsent, it is only that). */
static inline int dlock__answer_lost(int rc) {
  return rc == DLOCK_EIO || rc == DLOCK_ENOMEM;
}

/* Interrupts (wait.c). The top-level handle of the calling thread's
 * acquire (set by lock.c around a lock's acquire, so a multi-lock's or
 * RedLock's members' waits answer to the combinator's handle too; NULL
 * after). */
void dlock__wait_top(const void *top);
/* Interrupt the waits under way of handle (by_owner 0) or of owner
 * (by_owner 1): they return DLOCK_EINTR. Returns how many. */
int dlock__interrupt(const void *handle, int by_owner, uint64_t owner);
/* Sleep ms unless interrupted (a wait of handle and owner): DLOCK_OK, or
 * DLOCK_EINTR with a message naming what. */
int dlock__wait_pause(const void *handle, uint64_t owner, int64_t ms,
                      const char *what);

/* ---- the waiting recipe's decisions (recipe.c) -----------------------------
 * Every wait, blocking (wait.c: a parked thread) or not (async/await.c: a
 * timer and the engine's ready list), follows one recipe: try; when busy,
 * subscribe and try again (a release between the first try and the
 * subscription would be missed otherwise); then wait for a wake-up, the
 * reply's hint or the budget, and try again, until granted, an error or
 * the budget's end. A try whose answer was lost is asked about (did it
 * run?) while the budget lasts. The recipe decides; its driver does each
 * step and tells the recipe what came of it. */
typedef enum dlock__step {
  DLOCK__STEP_TRY,       /* send a try; then dlock__recipe_tried */
  DLOCK__STEP_ASK,       /* ask whether the try whose answer was lost ran;
                            then dlock__recipe_asked */
  DLOCK__STEP_SUBSCRIBE, /* join the channel; once confirmed (or by
                            r->until) dlock__recipe_woken */
  DLOCK__STEP_WAIT,      /* wait for a wake-up or r->until (-1: none);
                            then dlock__recipe_woken */
  DLOCK__STEP_GRANTED,   /* done: a try was granted */
  DLOCK__STEP_FAILED     /* done: r->rc, its message set */
} dlock__step;

typedef struct dlock__recipe {
  /* the caller's, before dlock__recipe_start */
  const char *noun;       /* the messages' subject ('lock "N"'), made of */
  const char *name;       /* these when a message needs it */
  int64_t permits;        /* > 0: it ends " (N permits)" */
  int fifo;               /* a FIFO waiter (semaphores): tries on its turn */
  int askable;            /* a lost try can be asked about */
  int64_t ask_ms;         /* and for this long past the deadline (the
                             command timeout): a single try's lost answer
                             is asked about too, so that a grant it may
                             have made is neither left behind nor lost */
  int pause_only;         /* no channel: every wait is a pause (no
                             SUBSCRIBE step) */
  /* the recipe's answer to the driver */
  int64_t until;          /* SUBSCRIBE, WAIT: the next try's time (ms) */
  int rc;                 /* FAILED */
  /* the recipe's own */
  int64_t wait_ms, deadline; /* the budget; -1: none */
  int subscribed, asks;
  int64_t pause_ms;       /* the last pause after a passing refusal */
} dlock__recipe;

/* The first step of a wait of wait_ms (0 try once, -1 forever) ending at
 * deadline (ms, -1 none); queued: the client's FIFO waiters in line. */
dlock__step dlock__recipe_start(dlock__recipe *r, int64_t wait_ms,
                                int64_t deadline, int queued);
/* A try's outcome: rc 1 granted, 0 busy (hint: ms to wait at most, -1
 * unknown, -2 retry now), or an error; sent: what became of its request
 * when it failed (DLOCK__UNSENT, _SENT, _REFUSED). */
dlock__step dlock__recipe_tried(dlock__recipe *r, int rc, int64_t hint,
                                int sent);
/* An ask's outcome: 1 the lost try ran, 0 it did not, or an error (sent
 * as for a try: a refused ask is asked again). */
dlock__step dlock__recipe_asked(dlock__recipe *r, int ran, int sent);
/* A wait's end: status 0 (woken, confirmed or timed), DLOCK_ECLOSED,
 * DLOCK_EINTR or another error with its message set; my_turn: a FIFO
 * waiter's turn has come. */
dlock__step dlock__recipe_woken(dlock__recipe *r, int status, int my_turn);
/* DLOCK_EBUSY for a single try of what (a "lock \"N\"") that found it
 * held, the message saying what hint is (the holder's remaining lease in
 * ms, < 0 unknown). */
int dlock__busy(const char *what, int64_t hint);
/* This thread just released n of what a FIFO channel announces (a
 * semaphore's permits): the client's waiters there get their turns now, as
 * the release's message will give them (pubsub.c). They hear of it when
 * the other subscribers hear the message, not after the engine has read
 * it; the message then finds them trying. */
void dlock__fifo_released(dlock_client *c, const char *channel, size_t len,
                          int64_t n);

/* ---- holds and the watchdog (watchdog.c) ---------------------------------- */

/* A hold is identified by the lock's key (renewal KEYS[i]) and the owner
 * field on the wire ("U:T", or "U:T:write" for a writer). label: the name
 * the application gave, when the key is another (a permit's hold is keyed
 * by {N}:timeout): the lost-lock callback and the events say it. NULL: the
 * key is the name. Only dlock__hold_add reads it. */
typedef struct dlock__hold_id {
  const char *name;
  size_t name_len;
  const char *field;
  size_t field_len;
  const char *label;
  size_t label_len;
} dlock__hold_id;

/* How the watchdog renews a hold, as its kind says: script gets KEYS = the
 * holds' names and ARGV = lease, then per hold its field and extra (""
 * when none); node_script, its variant for one cluster node's holds of
 * several slots (ARGV = n, the n names, then script's own arguments), or
 * -1: one batch per slot. */
typedef struct dlock__renewal {
  int script;
  int node_script;
  const char *extra;
  size_t extra_len;
} dlock__renewal;

/* Someone (a RedLock) that wants to hear when a hold is found lost. The
 * hold keeps a reference while it exists; lost() runs on the engine thread
 * (after the client's lost-lock callback). */
typedef struct dlock__listener dlock__listener;
struct dlock__listener {
  void (*lost)(dlock__listener *self, dlock_lost_reason reason);
  void (*ref)(dlock__listener *self);
  void (*unref)(dlock__listener *self);
};

/* Record one successful grant. watchdog: renew it (with r) until released.
 * t0_ms: monotonic time the acquire was sent (validity start). ln: may be
 * NULL; replaces the hold's listener when given. */
int dlock__hold_add(dlock_client *c, const dlock__hold_id *id,
                    uint64_t owner_id, const dlock__renewal *r, int watchdog,
                    int64_t lease_ms, int64_t t0_ms, dlock__listener *ln);
/* Call just before sending a release of id: notes that a release is in
 * flight (a renewal that finds the hold gone meanwhile is then not a loss:
 * the release's reply decides) and returns the lease to re-arm on a partial
 * release: the hold's last lease, or the watchdog timeout without a hold. */
int64_t dlock__hold_releasing(dlock_client *c, const dlock__hold_id *id);
/* Apply a release outcome: 1 fully released, 0 a hold remains, -1 the server
 * had no hold. Returns 1 when the client had a local hold (so -1 means the
 * hold was lost), 2 when it had one already reported lost (the release must
 * say DLOCK_ELOST even when the key outlived the lease it knew of), 0 when
 * it had none. */
int dlock__hold_released(dlock_client *c, const dlock__hold_id *id,
                         int outcome);
/* How long id's hold is still valid by this client's clock (ms; <= 0 when
 * its lease has run out), or INT64_MIN when there is no such hold. Ask
 * before dlock__hold_released() forgets it. */
int64_t dlock__hold_valid_ms(dlock_client *c, const dlock__hold_id *id);
/* How many times this client holds id (reentrant count; 0 none, -1 a hold
 * already reported lost). */
int64_t dlock__hold_count(dlock_client *c, const dlock__hold_id *id);
/* The DLOCK_ELOST of a release that found its hold gone: what ("lease of",
 * ...) and name say whose, valid_ms (dlock__hold_valid_ms) says why: its
 * lease had run out, or it was removed while still valid (a force release,
 * another client, a server that lost it). */
int dlock__fail_gone(const char *what, const char *name, int64_t valid_ms);
/* The DLOCK_ELOST of a release that released a hold already reported lost
 * (dlock__hold_released returned 2); what names it ("lease of", ...). */
int dlock__fail_reported_lost(const char *what, const char *name);

#endif /* DLOCK_CORE_H */
