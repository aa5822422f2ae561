/* The direct path's connections, shared by its two halves: direct.c (a
 * connection per call, the pool, the latch sweep) and ride.c (lanes:
 * shared connections that riders drive). Nothing outside src/core
 * includes it. */
#ifndef DLOCK_CORE_DIRECT_H
#define DLOCK_CORE_DIRECT_H

#include "core/engine.h"

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
