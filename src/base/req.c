/* Requests (base/req.h): built by any thread, finished on the engine's. */
#include <stdio.h>
#include <stdlib.h>

#include "base/req.h"
#include "base/scripts.h"

static void req_reset(dlock__req *req, size_t argc) {
  req->next = NULL;
  req->cmd = (dlock__buf){0};
  req->script = -1;
  req->script_tail = 0;
  req->argc = argc;
  req->task = NULL;
  req->arg = NULL;
  req->linger = 0;
  req->drop = (dlock__buf){0};
  req->errmsg[0] = '\0';
  req->slot = DLOCK__SLOT_ANY;
  req->redirects = 0;
  req->retry_at = 0;
  req->refusals = 0;
  req->pause_ms = 0;
  req->refused = 0;
  req->refusal_final = 0;
  req->ack_wanted = 0;
  req->ack = (dlock__ack){0};
  req->written = 0;
}

int dlock__req_fate(const dlock__req *req) {
  return req->refused ? DLOCK__REFUSED : req->written ? DLOCK__SENT
                                                     : DLOCK__UNSENT;
}

void dlock__req_route(dlock__req *req, const char *key, size_t len) {
  req->slot = dlock__key_slot(key, len);
}

void dlock__req_task(dlock__req *req,
                     void (*task)(dlock_client *c, dlock__req *req), void *arg) {
  req_reset(req, 0);
  req->task = task;
  req->arg = arg;
}

int dlock__req_drop_after(dlock__req *req, const char *key, size_t len) {
  if (dlock__buf_add(&req->drop, key, len) != DLOCK_OK) {
    dlock__buf_free(&req->cmd);
    return dlock__oom();
  }
  return DLOCK_OK;
}

int dlock__req_command(dlock__req *req, size_t argc, const char *const *argv,
                       const size_t *lens) {
  req_reset(req, argc);
  if (dlock__resp_command(&req->cmd, argc, argv, lens) != DLOCK_OK) {
    dlock__buf_free(&req->cmd);
    return dlock__fail(DLOCK_ENOMEM, "out of memory building a command");
  }
  return DLOCK_OK;
}

/* The most room a script call's command can take (its bulks and their
 * headers), or 0 when that would pass SIZE_MAX. */
static size_t script_room(size_t n, size_t nkeys, const size_t *klens,
                          size_t nargs, const size_t *alens) {
  size_t room = DLOCK__RESP_HEADER_MAX + 3 * DLOCK__RESP_BULK_MORE + 7 + 40 + n;
  for (size_t i = 0; i < nkeys + nargs; i++) {
    size_t len = i < nkeys ? klens[i] : alens[i - nkeys];
    if (len > SIZE_MAX - DLOCK__RESP_BULK_MORE - room)
      return 0;
    room += len + DLOCK__RESP_BULK_MORE;
  }
  return room;
}

/* route: find the keys' slot (a cluster routes by it); 0: leave it
 * DLOCK__SLOT_ANY, for a server without slots. */
static int build_script(dlock__req *req, int script, int route, size_t nkeys,
                        const char *const *keys, const size_t *klens,
                        size_t nargs, const char *const *args,
                        const size_t *alens) {
  req_reset(req, 3 + nkeys + nargs);
  const dlock__script *s = &dlock__scripts[script];
  char num[24];
  size_t n = dlock__fmt_u64(num, nkeys);
  /* the whole command's room at once (one allocation), then written
   * without a check a bulk */
  size_t room = script_room(n, nkeys, klens, nargs, alens);
  if (room == 0 || dlock__buf_reserve(&req->cmd, room) != DLOCK_OK) {
    dlock__buf_free(&req->cmd);
    return dlock__fail(DLOCK_ENOMEM, "out of memory building a script call");
  }
  char *p = dlock__resp_put_array(req->cmd.p + req->cmd.len, req->argc);
  p = dlock__resp_put_bulk(p, "EVALSHA", 7);
  p = dlock__resp_put_bulk(p, s->sha1, 40);
  req->script_tail = (size_t)(p - req->cmd.p);
  p = dlock__resp_put_bulk(p, num, n);
  for (size_t i = 0; i < nkeys; i++) {
    p = dlock__resp_put_bulk(p, keys[i], klens[i]);
    if (!route)
      continue;
    int slot = dlock__key_slot(keys[i], klens[i]);
    if (i == 0)
      req->slot = slot;
    else if (slot != req->slot)
      req->slot = DLOCK__SLOT_CROSS;
  }
  for (size_t i = 0; i < nargs; i++)
    p = dlock__resp_put_bulk(p, args[i], alens[i]);
  *p = '\0';
  req->cmd.len = (size_t)(p - req->cmd.p);
  req->script = script;
  return DLOCK_OK;
}

int dlock__req_script(dlock__req *req, int script, size_t nkeys,
                      const char *const *keys, const size_t *klens,
                      size_t nargs, const char *const *args,
                      const size_t *alens) {
  return build_script(req, script, 1, nkeys, keys, klens, nargs, args, alens);
}

int dlock__req_script_unrouted(dlock__req *req, int script, size_t nkeys,
                               const char *const *keys, const size_t *klens,
                               size_t nargs, const char *const *args,
                               const size_t *alens) {
  return build_script(req, script, 0, nkeys, keys, klens, nargs, args, alens);
}

void dlock__req_finish(dlock__req *req, redisReply *reply, int status,
                       const char *why) {
  if (why)
    snprintf(req->errmsg, sizeof req->errmsg, "%s", why);
  dlock__buf_free(&req->cmd);
  dlock__buf_free(&req->drop);
  req->done(req, reply, status);
}

void dlock__req_push(dlock__req **head, dlock__req **tail, dlock__req *req) {
  req->next = NULL;
  if (*tail)
    (*tail)->next = req;
  else
    *head = req;
  *tail = req;
}

int dlock__req_to_eval(dlock__req *req) {
  const dlock__script *s = &dlock__scripts[req->script];
  dlock__buf b = {0};
  size_t tail = req->cmd.len - req->script_tail;
  if (dlock__buf_reserve(&b, tail + s->len + 64) != DLOCK_OK ||
      dlock__resp_array(&b, req->argc) != DLOCK_OK ||
      dlock__resp_bulk(&b, "EVAL", 4) != DLOCK_OK ||
      dlock__resp_bulk(&b, s->body, s->len) != DLOCK_OK ||
      dlock__buf_add(&b, req->cmd.p + req->script_tail, tail) != DLOCK_OK) {
    dlock__buf_free(&b);
    return dlock__oom();
  }
  dlock__buf_free(&req->cmd);
  req->cmd = b;
  req->script = -1; /* EVAL caches the script; no second rewrite */
  return DLOCK_OK;
}
