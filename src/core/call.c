/* A blocking call (core.h's dlock__call and its kin): made on the calling
 * thread by the direct path (src/direct) when it can take it, else through
 * the engine's pipeline (engine.c), or answered by a wait's early try; the
 * reply's error and a missed replica acknowledgement made the caller's
 * error; and the thread's record of its last call (its fate, the
 * acknowledgements asked). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "direct/direct.h"

static _Thread_local struct {
  int on, missed; /* missed: the code to report (DLOCK_EIO, DLOCK_EPERM) */
  char why[1700];
} tl_ack;

void dlock__ack_begin(void) {
  tl_ack.on = 1;
  tl_ack.missed = 0;
}

int dlock__ack_end(char *why, size_t n) {
  tl_ack.on = 0;
  if (tl_ack.missed)
    snprintf(why, n, "%s", tl_ack.why);
  return tl_ack.missed;
}

static _Thread_local int tl_fate; /* dlock__last_call_fate */

int dlock__last_call_fate(void) { return tl_fate; }

#ifdef DLOCK_FUZZ
int (*dlock__fuzz_reply)(dlock__req *req, redisReply **reply);
#endif

/* req's round trip: answered by w's early try, made by the direct path
 * (no wait), or through the engine's pipeline; the outcome made the
 * caller's (DLOCK_OK with *reply, or an error with its message); *sent_ms:
 * when the request was sent. */
static int call_sent(dlock_client *c, dlock__waiter *w, dlock__req *req,
                     redisReply **reply, int64_t *sent_ms) {
  *reply = NULL;
  if (dlock__on_engine_thread()) {
    dlock__buf_free(&req->cmd);
    dlock__buf_free(&req->drop);
    return dlock__fail(DLOCK_EINVAL,
                       "blocking dlock call on an engine thread (from a "
                       "lost-lock callback?)");
  }
  int status = DLOCK_OK;
  redisReply *got = NULL;
  if (tl_ack.on && req->script >= 0 &&
      (c->opts.replica_sync_ms > 0 || c->opts.durable_ms > 0))
    req->ack_wanted = 1;
  tl_fate = DLOCK__SENT;
  if (w && dlock__engine_early(w, req, &status, &got, sent_ms)) {
    /* answered already */
  } else
#ifdef DLOCK_FUZZ
  if (dlock__fuzz_reply) { /* the reply comes from the fuzzer */
    *sent_ms = dlock__now_ms();
    status = dlock__fuzz_reply(req, &got);
    dlock__buf_free(&req->cmd);
    dlock__buf_free(&req->drop);
  } else
#endif
  if (w == NULL && dlock__direct_call(c, req, &got, &status, sent_ms)) {
    /* made by this thread (src/direct) */
  } else {
    int rc = dlock__engine_call(c, w, req, &status, &got, sent_ms);
    if (rc != DLOCK_OK)
      return rc;
  }
  if (status != DLOCK_OK) {
    if (dlock__answer_lost(status))
      tl_fate = dlock__req_fate(req);
    return dlock__fail(status, "%s", req->errmsg[0] ? req->errmsg
                                                    : dlock_strerror(status));
  }
  if (got && got->type == REDIS_REPLY_ERROR) {
    int rc = dlock__fail_reply(got, "Redis");
    freeReplyObject(got);
    return rc;
  }
  if (req->ack_wanted && !tl_ack.missed)
    tl_ack.missed = dlock__ack_missed(c, req, tl_ack.why,
                                           sizeof tl_ack.why);
  *reply = got;
  return DLOCK_OK;
}

int dlock__call(dlock_client *c, dlock__req *req, redisReply **reply) {
  int64_t sent_ms;
  return call_sent(c, NULL, req, reply, &sent_ms);
}

int dlock__try_call(dlock_client *c, dlock__try *t, dlock__req *req,
                    redisReply **reply) {
  return call_sent(c, t->early, req, reply, &t->sent_ms);
}

int dlock__command_call(dlock_client *c, const char *route, size_t route_len,
                        size_t argc, const char *const *argv,
                        const size_t *lens, redisReply **reply) {
  dlock__req req;
  int rc = dlock__req_command(&req, argc, argv, lens);
  if (rc != DLOCK_OK)
    return rc;
  if (route)
    dlock__req_route(&req, route, route_len);
  return dlock__call(c, &req, reply);
}

int dlock__script_call(dlock_client *c, int script, size_t nkeys,
                       const char *const *keys, const size_t *klens,
                       size_t nargs, const char *const *args,
                       const size_t *alens, redisReply **reply) {
  dlock__req req;
  int rc = dlock__req_script(&req, script, nkeys, keys, klens, nargs, args,
                             alens);
  if (rc != DLOCK_OK)
    return rc;
  return dlock__call(c, &req, reply);
}

int dlock__eval_call(dlock_client *c, const char *text, size_t text_len,
                     size_t nkeys, const char *const *keys, const size_t *klens,
                     size_t nargs, const char *const *args,
                     const size_t *alens, redisReply **reply) {
  size_t argc = 3 + nkeys + nargs;
  const char **argv = calloc(argc, sizeof *argv);
  size_t *lens = calloc(argc, sizeof *lens);
  char num[24];
  int rc = argv && lens ? DLOCK_OK : dlock__fail(DLOCK_ENOMEM, "out of memory");
  if (rc == DLOCK_OK) {
    argv[0] = "EVAL", lens[0] = 4;
    argv[1] = text, lens[1] = text_len;
    argv[2] = num, lens[2] = (size_t)snprintf(num, sizeof num, "%zu", nkeys);
    for (size_t i = 0; i < nkeys; i++)
      argv[3 + i] = keys[i], lens[3 + i] = klens[i];
    for (size_t i = 0; i < nargs; i++)
      argv[3 + nkeys + i] = args[i], lens[3 + nkeys + i] = alens[i];
    dlock__req req;
    rc = dlock__req_command(&req, argc, argv, lens);
    if (rc == DLOCK_OK && nkeys > 0)
      dlock__req_route(&req, keys[0], klens[0]);
    /* a guarded body's write is acknowledged as a script's is */
    req.ack_wanted = tl_ack.on && (c->opts.replica_sync_ms > 0 ||
                                   c->opts.durable_ms > 0);
    if (rc == DLOCK_OK)
      rc = dlock__call(c, &req, reply);
  }
  free(argv);
  free(lens);
  return rc;
}
