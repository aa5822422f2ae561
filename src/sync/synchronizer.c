/* What synchronizers share: their handle, the checks every call starts
 * with, running a count script, reading a count. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "lock/lock_impl.h"
#include "sync/synchronizer.h"

int dlock__synchronizer_new(size_t size, dlock_client *client, const char *name,
                            const dlock_lock_opts *opts, void **out) {
  return dlock__handle_open(size, client, name, opts, out);
}

void dlock__synchronizer_free(dlock__synchronizer *o) {
  dlock__handle_free(&o->h);
  dlock__buf_free(&o->channel);
}

int dlock__synchronizer_check(const void *obj) {
  const dlock__synchronizer *o = obj;
  dlock__clear_error();
  if (o == NULL)
    return dlock__fail(DLOCK_EINVAL, "handle is NULL");
  if (dlock__client_closed(o->h.client))
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  if (dlock__on_engine_thread())
    return dlock__fail(DLOCK_EINVAL, "blocking dlock call on an engine thread");
  return DLOCK_OK;
}

int dlock__reply_int(const redisReply *r, int64_t *out, const char *what) {
  if (r->type == REDIS_REPLY_INTEGER) {
    *out = r->integer;
    return DLOCK_OK;
  }
  if (r->type == REDIS_REPLY_NIL) {
    *out = 0;
    return DLOCK_OK;
  }
  if (r->type == REDIS_REPLY_STRING) {
    char *end;
    long long v = strtoll(r->str, &end, 10);
    if (end != r->str && *end == '\0') {
      *out = v;
      return DLOCK_OK;
    }
    return dlock__fail(DLOCK_EKIND, "the name holds a string that is not a "
                       "count (\"%.40s\"), not a %s: nothing was changed",
                       r->str, what);
  }
  return dlock__fail_reply(r, what);
}

int dlock__synchronizer_kind(dlock__synchronizer *o, const char *what) {
  const char *keys[] = {o->h.name};
  size_t klens[] = {o->h.name_len};
  redisReply *t = NULL;
  if (dlock__script_call(o->h.client, DLOCK__SCRIPT_NAME_KIND, 1, keys, klens,
                         0, NULL, NULL, &t) != DLOCK_OK)
    return DLOCK_EKIND; /* its error says why the question failed */
  char found[64] = "data of another type";
  if (t->type == REDIS_REPLY_STRING || t->type == REDIS_REPLY_STATUS) {
    const char *k = t->str;
    if (strcmp(k, "lock") == 0)
      k = "lock (a hash)";
    else if (strcmp(k, "zset") == 0)
      k = "sorted set";
    snprintf(found, sizeof found, "%s %.40s", strchr("aeiou", k[0]) ? "an" : "a", k);
  }
  freeReplyObject(t);
  return dlock__fail(DLOCK_EKIND, "the name holds %s, not a %s: nothing was "
                     "changed", found, what);
}

uint32_t dlock__wake_by_count(const char *msg, size_t len) {
  long long v = 0;
  for (size_t i = 0; i < len && i < 19 && msg[i] >= '0' && msg[i] <= '9'; i++)
    v = v * 10 + (msg[i] - '0');
  if (len > 0 && msg[0] == '-')
    return 0;
  return v > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)v;
}

int dlock__synchronizer_run(dlock__synchronizer *o, int script, size_t nnums,
                            const int64_t *nums, int publish, int64_t *out) {
  return dlock__synchronizer_run_key2(o, NULL, script, nnums, nums, publish, out);
}

int dlock__synchronizer_req(dlock__synchronizer *o, const dlock__buf *key2,
                            int script, size_t nnums, const int64_t *nums,
                            int publish, dlock__req *req) {
  char buf[2][24];
  const char *args[4];
  size_t alens[4], n = 0;
  for (size_t i = 0; i < nnums; i++) {
    alens[n] = (size_t)snprintf(buf[i], sizeof buf[i], "%" PRId64, nums[i]);
    args[n++] = buf[i];
  }
  if (publish) {
    args[n] = dlock__publish_cmd(o->h.client);
    alens[n] = strlen(args[n]);
    n++;
    args[n] = o->channel.p;
    alens[n++] = o->channel.len;
  }
  const char *keys[] = {o->h.name, key2 ? key2->p : NULL};
  size_t klens[] = {o->h.name_len, key2 ? key2->len : 0};
  return dlock__req_script(req, script, key2 ? 2 : 1, keys, klens, n, args,
                           alens);
}

int dlock__synchronizer_run_key2(dlock__synchronizer *o, const dlock__buf *key2,
                                 int script, size_t nnums, const int64_t *nums,
                                 int publish, int64_t *out) {
  dlock__req req;
  redisReply *r;
  int rc = dlock__synchronizer_req(o, key2, script, nnums, nums, publish, &req);
  if (rc == DLOCK_OK)
    rc = dlock__call(o->h.client, &req, &r);
  if (rc != DLOCK_OK)
    return rc;
  int64_t v = 0;
  rc = dlock__reply_int(r, &v, dlock__scripts[script].name);
  freeReplyObject(r);
  if (out)
    *out = v;
  return rc;
}

int dlock__synchronizer_run_flag(dlock__synchronizer *o, int script, size_t nnums,
                           const int64_t *nums, int publish, int *done) {
  int64_t v = 0;
  int rc = dlock__synchronizer_run(o, script, nnums, nums, publish, &v);
  if (rc == DLOCK_OK && done)
    *done = v == 1;
  return rc;
}

int dlock__synchronizer_get_req(dlock__synchronizer *o, dlock__req *req) {
  const char *argv[] = {"GET", o->h.name};
  size_t lens[] = {3, o->h.name_len};
  int rc = dlock__req_command(req, 2, argv, lens);
  if (rc == DLOCK_OK)
    dlock__req_route(req, o->h.name, o->h.name_len);
  return rc;
}

int dlock__synchronizer_get(dlock__synchronizer *o, const char *what, int64_t *out) {
  dlock__req req;
  redisReply *r;
  int rc = dlock__synchronizer_get_req(o, &req);
  if (rc == DLOCK_OK)
    rc = dlock__call(o->h.client, &req, &r);
  if (rc == DLOCK_EKIND) /* WRONGTYPE: say which type */
    return dlock__synchronizer_kind(o, what);
  if (rc != DLOCK_OK)
    return rc;
  rc = dlock__reply_int(r, out, what); /* an error reply came as rc above */
  freeReplyObject(r);
  return rc;
}

int dlock__synchronizer_ran(dlock__synchronizer *o, size_t argc,
                            const char *const *argv, const size_t *lens,
                            int *ran) {
  dlock__req req;
  redisReply *r = NULL;
  int rc = dlock__req_command(&req, argc, argv, lens);
  if (rc != DLOCK_OK)
    return rc;
  dlock__req_route(&req, argv[1], lens[1]);
  if ((rc = dlock__call(o->h.client, &req, &r)) != DLOCK_OK)
    return rc;
  *ran = r->type == REDIS_REPLY_STRING ||
         (r->type == REDIS_REPLY_INTEGER && r->integer == 1);
  freeReplyObject(r);
  return DLOCK_OK;
}

int dlock__synchronizer_channel(dlock__wait *w, dlock__buf *ch,
                                dlock__wake_fn **wake) {
  const dlock__synchronizer *o = (const dlock__synchronizer *)(void *)w->h;
  *wake = w->k->fifo ? dlock__wake_by_count : dlock__wake_all;
  return dlock__buf_add(ch, o->channel.p, o->channel.len);
}
