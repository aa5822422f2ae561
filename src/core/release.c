/* Releases that are safe to retry: each release call carries a random
 * request id in an unlock latch key (KEYS[2]) that its script writes with the
 * outcome, so a retry after a lost reply replays the first outcome instead
 * of releasing twice (docs/wire.md, "idempotent release"). */
#include <string.h>

#include "core/core.h"

int64_t dlock__unlock_latch_ms(dlock_client *c) {
  const dlock_client_opts *o = dlock__client_opts(c);
  return 2 * o->command_timeout_ms + o->connect_timeout_ms;
}

int dlock__release_retry(dlock_client *c,
                         int (*build)(void *ctx, const char *rid, dlock__req *req),
                         void *ctx, redisReply **reply) {
  char rid[33];
  int rc = dlock__request_id(rid);
  return rc == DLOCK_OK ? dlock__release_retry_id(c, rid, build, ctx, reply) : rc;
}

int dlock__release_retry_id(dlock_client *c, const char *rid,
                            int (*build)(void *ctx, const char *rid, dlock__req *req),
                            void *ctx, redisReply **reply) {
  int rc = DLOCK_OK;
  int64_t start = dlock__now_ms();
  for (int attempt = 0; rc == DLOCK_OK || dlock__answer_lost(rc); attempt++) {
    if (!dlock__release_again(c, start, attempt))
      break;
    dlock__req req;
    rc = build(ctx, rid, &req);
    if (rc == DLOCK_OK)
      rc = dlock__call(c, &req, reply);
    if (!dlock__answer_lost(rc))
      break;
  }
  return rc;
}

typedef struct script_release {
  int script;
  const dlock__buf *unlock_prefix;
  size_t nkeys;
  const char **keys;
  size_t *klens;
  size_t nargs;
  const char *const *args;
  const size_t *alens;
} script_release;

static int build_script(void *ctx, const char *rid, dlock__req *req) {
  script_release *s = ctx;
  return dlock__release_req(req, s->script, s->unlock_prefix, rid, s->nkeys,
                            s->keys, s->klens, s->nargs, s->args, s->alens);
}

int dlock__release_call(dlock_client *c, int script,
                        const dlock__buf *unlock_prefix, size_t nkeys,
                        const char **keys, size_t *klens, size_t nargs,
                        const char *const *args, const size_t *alens,
                        redisReply **reply) {
  script_release s = {script, unlock_prefix, nkeys, keys, klens, nargs, args,
                      alens};
  return dlock__release_retry(c, build_script, &s, reply);
}

int dlock__release_req(dlock__req *req, int script,
                       const dlock__buf *unlock_prefix, const char *rid,
                       size_t nkeys, const char **keys, size_t *klens,
                       size_t nargs, const char *const *args,
                       const size_t *alens) {
  dlock__buf unlock_latch = {0};
  if (dlock__buf_add(&unlock_latch, unlock_prefix->p, unlock_prefix->len) ||
      dlock__buf_add(&unlock_latch, rid, strlen(rid))) {
    dlock__buf_free(&unlock_latch);
    return dlock__oom();
  }
  keys[1] = unlock_latch.p;
  klens[1] = unlock_latch.len;
  int rc = dlock__req_script(req, script, nkeys, keys, klens, nargs, args, alens);
  if (rc == DLOCK_OK)
    rc = dlock__req_drop_after(req, unlock_latch.p, unlock_latch.len);
  req->linger = 1; /* harmless when the client closes, and it frees the lock */
  dlock__buf_free(&unlock_latch);
  return rc;
}

int dlock__release_again(dlock_client *c, int64_t start_ms, int attempt) {
  /* Every attempt carries the same request id, so the unlock latch replays
   * an attempt that did run. The latch lives 2 command timeouts + a connect
   * timeout: attempts start within one command timeout of the first, so
   * each of them is still covered. A dropped connection fails an attempt
   * at once; a storm of drops gets 4 attempts. */
  return attempt == 0 ||
         (attempt < 4 &&
          dlock__now_ms() - start_ms < dlock__client_opts(c)->command_timeout_ms);
}
