/* Internal machinery shared by every backend: errors, clock, buffers, maps,
 * keys, requests to the engine, the pub/sub waiter and the hold registry.
 * Nothing here is public API. */
#ifndef DLOCK_CORE_H
#define DLOCK_CORE_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "dlock/client.h"
#include "dlock/error.h"

/* ---- errors (error.c) ---------------------------------------------------- */

/* Set the calling thread's detail message and return code. */
int dlock__fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void dlock__clear_error(void);
/* Map a Redis error reply to DLOCK_EREDIS with its text as detail. */
int dlock__fail_reply(const redisReply *reply, const char *what);

/* ---- clock (util.c) ------------------------------------------------------ */

int64_t dlock__now_ms(void); /* CLOCK_MONOTONIC */
int64_t dlock__now_us(void);

/* ---- byte buffer (util.c) ------------------------------------------------ */

typedef struct dlock__buf {
  char *p;
  size_t len, cap;
} dlock__buf;

int dlock__buf_reserve(dlock__buf *b, size_t extra);
int dlock__buf_add(dlock__buf *b, const void *data, size_t len);
int dlock__buf_printf(dlock__buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void dlock__buf_free(dlock__buf *b);
/* Give back unused capacity (for strings kept as long as a handle). */
void dlock__buf_shrink(dlock__buf *b);

/* Append one RESP bulk string / array header. */
int dlock__resp_array(dlock__buf *b, size_t n);
int dlock__resp_bulk(dlock__buf *b, const void *data, size_t len);

/* ---- keys (util.c, docs/wire.md "Hash tags") ---------------------------------- */

/* 1 when name contains a valid hash tag ("{" then a later "}" with at least
 * one byte between them). */
int dlock__has_tag(const char *name, size_t len);
/* P:{N}, or P:N when N has its own tag. Appends to b. */
int dlock__key_prefix(dlock__buf *b, const char *prefix, const char *name,
                      size_t len);
/* {N}:S, or N:S when N has its own tag. Appends to b. */
int dlock__key_suffix(dlock__buf *b, const char *name, size_t len,
                      const char *suffix);
/* Validate a user-supplied name (NULL, empty, too long). */
int dlock__check_name(const char *name, size_t len);

/* n random bytes as 2n lower-case hex characters plus NUL (OpenSSL RAND). */
int dlock__random_hex(char *out, size_t nbytes);

/* ---- map: chained hash table with binary keys (map.c) -------------------- */

typedef struct dlock__map_node {
  struct dlock__map_node *next;
  uint64_t hash;
  const void *key; /* points into the entry that embeds the node */
  size_t klen;
} dlock__map_node;

typedef struct dlock__map {
  dlock__map_node **slots;
  size_t nslots, count;
} dlock__map;

uint64_t dlock__hash(const void *key, size_t len);
dlock__map_node *dlock__map_get(const dlock__map *m, const void *key,
                                size_t klen);
/* Insert a node whose key/klen are set; the key must not be present yet. */
int dlock__map_put(dlock__map *m, dlock__map_node *node);
void dlock__map_del(dlock__map *m, dlock__map_node *node);
void dlock__map_free(dlock__map *m); /* frees the slots, not the nodes */
/* Iterate: for (n = dlock__map_next(m, NULL, &i); n; n = dlock__map_next(m, n, &i)) */
dlock__map_node *dlock__map_next(const dlock__map *m, dlock__map_node *node,
                                 size_t *slot);

#define DLOCK__CONTAINER(ptr, type, member) \
  ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- per-thread wait object (engine.c) ------------------------------------ */

typedef struct dlock__sync {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC */
  int init;
} dlock__sync;

dlock__sync *dlock__sync_self(void);
/* Wait on s->cv (mu held) until deadline_ms (monotonic); -1 = forever.
 * Returns 0, or ETIMEDOUT once the deadline passed. */
int dlock__sync_wait(dlock__sync *s, int64_t deadline_ms);

/* 1 on an engine thread: blocking calls are refused there. */
int dlock__on_engine_thread(void);

/* ---- requests to the engine (engine.c) ------------------------------------ */

typedef struct dlock__req dlock__req;
/* Called on the engine thread exactly once: with the reply (callee owns it;
 * it may be an error reply) and DLOCK_OK, or with NULL and DLOCK_EIO /
 * DLOCK_ECLOSED. */
typedef void dlock__req_done(dlock__req *req, redisReply *reply, int status);

struct dlock__req {
  dlock__req *next;
  dlock__buf cmd;       /* RESP bytes; owned, freed by the engine when done */
  int script;           /* script id when cmd is an EVALSHA, else -1 */
  size_t script_tail;   /* offset of the numkeys argument in cmd */
  size_t argc;          /* number of RESP arguments in cmd */
  int64_t queued_ms, sent_ms;
  dlock__req_done *done;
  void (*task)(dlock_client *c, dlock__req *req); /* engine-thread task */
  void *arg;  /* the task's argument */
  void *data; /* the completion's */
  int linger; /* still written when the client closes (releases: harmless
                 and they spare the servers a lease's wait) */
  char errmsg[256]; /* failure detail, copied to the caller's thread */
};

/* Build an EVALSHA for script id into req->cmd (keys then args). */
int dlock__req_script(dlock__req *req, int script, size_t nkeys,
                      const char *const *keys, const size_t *klens,
                      size_t nargs, const char *const *args,
                      const size_t *alens);
/* Build a plain command. */
int dlock__req_command(dlock__req *req, size_t argc, const char *const *argv,
                       const size_t *lens);

/* Make req a task: run on the engine thread, which finishes it. */
void dlock__req_task(dlock__req *req,
                     void (*task)(dlock_client *c, dlock__req *req), void *arg);

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

/* dlock__req_command + dlock__call. */
int dlock__command_call(dlock_client *c, size_t argc, const char *const *argv,
                        const size_t *lens, redisReply **reply);

/* dlock__req_script + dlock__call. */
int dlock__script_call(dlock_client *c, int script, size_t nkeys,
                       const char *const *keys, const size_t *klens,
                       size_t nargs, const char *const *args,
                       const size_t *alens, redisReply **reply);

/* ---- client accessors (engine.c) ------------------------------------------ */

void dlock__client_ref(dlock_client *c);
void dlock__client_unref(dlock_client *c);
int dlock__client_closed(dlock_client *c);
const dlock_client_opts *dlock__client_opts(const dlock_client *c);
/* Owner string "U:T" for owner id into out (at least 64 bytes). */
size_t dlock__owner(const dlock_client *c, uint64_t owner_id, char *out);

/* ---- pub/sub waiter (pubsub.c) -------------------------------------------- */

/* How many local waiters one message on a channel wakes; UINT32_MAX = all. */
typedef uint32_t dlock__wake_fn(const char *msg, size_t len);
uint32_t dlock__wake_one(const char *msg, size_t len);
uint32_t dlock__wake_all(const char *msg, size_t len);

typedef struct dlock__waiter {
  struct dlock__waiter *prev, *next; /* channel's list: engine only */
  void *chan;                        /* engine only */
  dlock__sync *sync;                 /* the waiting thread's */
  uint64_t wakes;                    /* under sync->mu */
  uint64_t seen;                     /* waiting thread only */
  int confirmed;                     /* under sync->mu */
  int closed;                        /* under sync->mu */
  uint64_t unconsumed;               /* passed to unsubscribe */
  int fifo;                          /* set before subscribing: see below */
  int head;                          /* fifo: oldest waiter; under sync->mu */
  /* Early tries (wait.c): the last try's request is kept; while the thread
   * waits (armed), the engine re-sends it the moment a message wakes the
   * waiter, so the try is on its way while the thread wakes up, and the
   * thread's next try takes that reply instead of sending. */
  dlock__buf early_cmd;              /* waiting thread; engine while armed */
  int early_script;
  size_t early_tail, early_argc;
  int armed;                         /* under sync->mu */
  int early_state;                   /* 0 none, 1 sent, 2 answered; sync->mu */
  int64_t early_sent_ms;
  redisReply *early_reply;           /* under sync->mu */
  int early_status;
  char early_err[256];
} dlock__waiter;

/* FIFO channels (w->fifo set by dlock__subscribe's caller through the wait
 * spec): only the oldest local waiter of the channel is "head" and may try;
 * a message wakes the head only, and when the head leaves, the next waiter
 * becomes head and is woken. Number of FIFO waiters on the client: */
int dlock__fifo_waiters(dlock_client *c);

/* Register w on channel (shared, refcounted SUBSCRIBE) and wait until the
 * subscription is confirmed, at most until deadline_ms (-1: at most the
 * command timeout). Without confirmation the waiter still works, on hints. */
int dlock__subscribe(dlock_client *c, const char *channel, size_t len,
                     dlock__wake_fn *wake, int fifo, dlock__waiter *w,
                     int64_t deadline_ms);
/* Wait for a wake-up (counted: one that came since the last call returns at
 * once) until deadline_ms (-1 forever). Returns 1 woken, 0 timed out,
 * DLOCK_ECLOSED. */
int dlock__waiter_wait(dlock__waiter *w, int64_t deadline_ms);
/* Deregister w (synchronous); the last waiter of a channel UNSUBSCRIBEs. */
void dlock__unsubscribe(dlock_client *c, dlock__waiter *w);

/* ---- the waiting recipe (wait.c) ----------------------------------------- */

typedef struct dlock__wait_spec {
  const char *what;    /* for messages: 'lock "name"' */
  const char *channel; /* where releases are announced */
  size_t channel_len;
  dlock__wake_fn *wake;
  int fifo; /* serve this client's waiters in arrival order (semaphores) */
  /* One try: 1 acquired, 0 not yet (*hint = longest useful wait in ms, -1
   * unknown, -2 retry now), or a negative error code. */
  int (*attempt)(void *ctx, int64_t *hint);
  /* Called once when the loop ends in an error after subscribing (timeout,
   * close): undo what the tries left behind (queue entries). May be NULL. */
  void (*give_up)(void *ctx);
  /* 1: every try after the first sends the same bytes (one dlock__call),
   * so the engine may send it early on a wake-up (see dlock__waiter). Not
   * for locks whose waiters in many processes race for each release: the
   * first subscriber, told first, would win every race. */
  int early;
} dlock__wait_spec;

/* When the request of this thread's last dlock__call was sent (queued to
 * the engine, or sent early on its behalf): the start of a lease it got. */
int64_t dlock__call_sent_ms(void);
/* The waiter whose tries this thread is making (wait.c), or NULL. */
void dlock__set_trying(dlock__waiter *w);

/* Try, subscribe, try and wait until acquired or the budget is spent.
 * wait_ms 0 = try once (DLOCK_EBUSY), -1 = forever. Returns 1 when the
 * attempt succeeded, or an error (DLOCK_ETIMEDOUT, DLOCK_ECLOSED, ...). */
int dlock__wait_loop(dlock_client *c, const dlock__wait_spec *spec,
                     int64_t wait_ms, void *ctx);

/* ---- holds and the watchdog (watchdog.c) ---------------------------------- */

/* A hold is identified by the lock's key (renewal KEYS[i]) and the owner
 * field on the wire ("U:T", or "U:T:write" for a writer). */
typedef struct dlock__hold_id {
  const char *name;
  size_t name_len;
  const char *field;
  size_t field_len;
} dlock__hold_id;

/* How the watchdog renews a hold: script gets KEYS = the holds' names and
 * ARGV = lease, then per hold its field and extra ("" when none). */
typedef struct dlock__renewal {
  int script;
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
/* The DLOCK_ELOST of a release that released a hold already reported lost
 * (dlock__hold_released returned 2); what names it ("lease of", ...). */
int dlock__fail_reported_lost(const char *what, const char *name);

#endif /* DLOCK_CORE_H */
