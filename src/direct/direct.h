/* The direct path (src/direct): a blocking script call made on the calling
 * thread (direct.c: a connection per call, the pool, the latch sweep;
 * ride.c: lanes, shared connections that riders drive; poll.c: whether a
 * call polls for its reply; share.c: whether a crowded call rides). Its one
 * send is dlock__direct_call, which core's blocking call (core/call.c)
 * tries before the engine's pipeline; the client opens and closes it
 * (core/client.c), and its net tells it where its servers are (the link,
 * node and retarget hooks). Its state lives in the client: direct/pool.h. */
#ifndef DLOCK_DIRECT_DIRECT_H
#define DLOCK_DIRECT_DIRECT_H

#include "core/engine.h"

/* ---- the client's direct path (direct.c) ---- */

void dlock__direct_init(dlock_client *c);
/* After the URI is parsed: the pools (one per cluster node, or one).
 * DLOCK_OK or DLOCK_ENOMEM. */
int dlock__direct_pools(dlock_client *c);
/* Engine thread, a cluster's topology: node i is at host:port (host lives
 * as long as c); its pool (for its command connection) is returned. */
dlock__dpool *dlock__direct_node(dlock_client *c, int i, const char *host,
                                 int port);
/* A sentinel's master moved to host:port (engine thread): pool i's
 * connections to the old one close, and calls under way there fail. */
void dlock__direct_retarget(dlock_client *c, int i, const char *host, int port);
/* Make req's round trip on the calling thread. Returns 0 when the direct
 * path cannot take req (then req is untouched: use the engine), or 1 with
 * *rc the call's outcome (req's buffers freed, *reply set on DLOCK_OK, error
 * replies included, as the engine hands them over) and *sent_ms set. */
int dlock__direct_call(dlock_client *c, dlock__req *req, redisReply **reply,
                       int *rc, int64_t *sent_ms);
/* dlock_client_close: idle connections close, busy ones are shut down (their
 * calls fail with DLOCK_ECLOSED), and no call goes direct any more. */
void dlock__direct_close(dlock_client *c);
void dlock__direct_free(dlock_client *c);
/* The net's hooks (net/conn.h) for the direct path's pools: pool i's link;
 * a cluster's node i at host:port; a sentinel's master moved. */
dlock__link *dlock__direct_on_link(dlock__net *n, int i);
dlock__link *dlock__direct_on_node(dlock__net *n, int i, const char *host,
                                   int port);
void dlock__direct_on_retarget(dlock__net *n, int i, const char *host,
                               int port);

/* ---- when a call polls for its reply (poll.c) and when crowded calls
 * ride (share.c) ---- */

void dlock__poll_init(dlock__poll *p);
void dlock__poll_free(dlock__poll *p);
/* Before a round trip (alone: the client's only call under way): how long
 * it may poll for its reply (us, 0: sleep at once). */
int64_t dlock__poll_begin(dlock_client *c, int alone, dlock__poll_probe *pr);
/* After a round trip that went well: its measure, maybe the new choice. */
void dlock__poll_end(dlock_client *c, const dlock__poll_probe *pr);
/* A round trip's time (us), for the poll's length. */
void dlock__poll_rtt(dlock_client *c, int64_t us);
/* Whether polling pays, from the two ways' CPU per call (0: unknown). */
int dlock__poll_pays(int64_t sleeping_ns, int64_t polling_ns);
void dlock__share_init(dlock__share *s);
/* Before a direct call: how many direct calls may be under way for it to
 * take a connection of its own (beyond: it rides). */
int dlock__share_begin(dlock_client *c, dlock__share_probe *pr);
/* After a direct or riding call: its measure, maybe the new choice. */
void dlock__share_end(dlock_client *c, const dlock__share_probe *pr);
/* Whether riding wins, from the two ways' mean call (us; 0: unknown). */
int dlock__share_rides(int64_t own_us, int64_t ride_us);


/* A round trip's outcome beside DLOCK_OK and the errors: not done (not
 * written, or answered that it did not run there): the engine is to make
 * the call. */
#define DLOCK__UNSENT 1

/* ---- one connection (direct.c) ---- */

/* "HOST:PORT (direct connection): what" into why. */
void dlock__dconn_say(dlock_client *c, const dlock__dconn *dc, char *why,
                      size_t n, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Write all of p. DLOCK_OK, or DLOCK_EIO with why. */
int dlock__dconn_send(dlock_client *c, dlock__dconn *dc, const char *p,
                      size_t len, int64_t deadline_us, char *why, size_t n);
/* The next reply parsed already (*out NULL: none; read_socket: what the
 * socket holds is taken first, without blocking). DLOCK_OK or DLOCK_EIO. */
int dlock__dconn_pump(dlock_client *c, dlock__dconn *dc, int read_socket,
                      redisReply **out, char *why, size_t n);
/* The next reply, sleeping for it (polling up to spin_us first while the
 * call is the client's only one). DLOCK_OK with *out, or DLOCK_EIO. */
int dlock__dconn_read(dlock_client *c, dlock__dconn *dc, int64_t deadline_us,
                      int64_t spin_us, redisReply **out, char *why, size_t n);
/* A new connection on p's busy list (its handshake kept in dc->hello, to
 * go out with its first write), or NULL (*moved: the server moved). */
dlock__dconn *dlock__dconn_open(dlock_client *c, dlock__dpool *p, int *moved);
/* 1 while an idle connection is still open (what came meanwhile is read). */
int dlock__dconn_alive(dlock__dconn *dc);
void dlock__dconn_hello_wipe(dlock__dconn *dc);
/* Off p's busy list (d->mu taken) and closed. */
void dlock__dconn_discard(dlock_client *c, dlock__dconn *dc);
void dlock__dconn_close(dlock__dconn *dc);
/* Keep the DEL of a release's unlock latch for dc's next write. */
void dlock__dconn_keep_del(dlock__dconn *dc, const dlock__buf *key);
/* A closing client: the DELs dc kept, sent without waiting (a failure is
 * left to the latches' own expiry). */
void dlock__dconn_flush_kept(dlock__dconn *dc);

/* ---- the pool (direct.c) ---- */

/* slot's pool when calls may go direct there now (not closed, the
 * engine's connection up, no backoff), else NULL. */
dlock__dpool *dlock__dpool_ready(dlock_client *c, int slot);
/* Calls to p's server go to the engine for a while. */
void dlock__dpool_back_off(dlock_client *c, dlock__dpool *p);
/* r says the call did not run there, and the engine follows it. */
int dlock__direct_followed(dlock_client *c, const redisReply *r);
/* Latch DELs were kept: the engine's sweep is armed unless it is. */
void dlock__direct_sweep_due(dlock_client *c);

/* ---- lanes (ride.c) ---- */

void dlock__lanes_init(dlock__dpool *p);
void dlock__lanes_free(dlock_client *c, dlock__dpool *p);
/* req's round trip as a rider: DLOCK_OK with *reply, an error with
 * req->errmsg, DLOCK__UNSENT, or -1 when it cannot ride (the engine makes
 * the call). */
int dlock__ride(dlock_client *c, dlock__req *req, redisReply **reply);
/* Engine thread, the sweep: idle lanes write their kept DELs; 1 when a
 * driven one kept some (the sweep comes again). */
int dlock__lanes_sweep(dlock_client *c);
/* A closing client: idle lanes send their kept DELs without waiting. */
void dlock__lanes_flush(dlock_client *c);

#endif
