/* What the layers above may use of the core (with the base, base/base.h:
 * errors, clock, buffers and key names): handles, requests and calls to
 * the engine, the client's options and owner strings, releases safe to
 * retry. Beside it, by subject: a kind's wait and the waiting recipe
 * (core/wait.h, core/recipe.h), holds and the watchdog (core/watchdog.h),
 * pub/sub waiters (core/pubsub.h); the engine's own machinery (the client,
 * its loop thread and connections) is core/engine.h. The kinds reach all
 * of it through their one header, lock/lock_impl.h. Nothing here is
 * public API. */
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
#include "base/req.h"

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

/* ---- requests to the engine (engine.c; the request: base/req.h) ----------- */

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

/* The fate (dlock__req_fate, base/req.h) of the calling thread's last
 * dlock__call / dlock__try_call that failed with DLOCK_EIO or DLOCK_ENOMEM; DLOCK__SENT
 * after any other outcome. */
int dlock__last_call_fate(void);
/* rc is a call's failure whose answer may be lost (its fate says whether
 * it was sent): the connection broke (DLOCK_EIO), or the reply could not
 * be read for want of memory (DLOCK_ENOMEM; unsent, it is only that). */
static inline int dlock__answer_lost(int rc) {
  return rc == DLOCK_EIO || rc == DLOCK_ENOMEM;
}

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

#endif /* DLOCK_CORE_H */
