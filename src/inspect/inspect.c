/* dlock_inspect: what is stored under a name (kind, holders, TTL, queue),
 * read by lua/inspect.lua in one snapshot, with the key names of
 * src/base/keys.c. One allocation holds the result and every string it
 * points at. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "base/scripts.h"
#include "dlock/inspect.h"
#include "lock/lock_impl.h"

static const char *kind_of(const redisReply *type, int64_t queued,
                           const redisReply *timeouts, const redisReply *c,
                           const char **mode) {
  const char *t = type->str;
  if (strcmp(t, "hash") == 0) {
    for (size_t k = 0; k + 1 < c->elements; k += 2)
      if (strcmp(c->element[k]->str, "mode") == 0) {
        *mode = strcmp(c->element[k + 1]->str, "write") == 0 ? "write" : "read";
        return "rwlock";
      }
    return queued > 0 ? "fair lock" : "lock";
  }
  if (strcmp(t, "string") == 0)
    return strcmp(timeouts->str, "zset") == 0 ? "permit semaphore" : "count";
  return strcmp(t, "none") == 0 ? "none"
         : strcmp(t, "list") == 0 ? "list"
         : strcmp(t, "set") == 0  ? "set"
         : strcmp(t, "zset") == 0 ? "zset"
         : strcmp(t, "stream") == 0 ? "stream"
                                  : "other";
}

static int well_formed(const redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 6)
    return 0;
  redisReply *const *e = r->element;
  if (e[0]->type != REDIS_REPLY_STATUS && e[0]->type != REDIS_REPLY_STRING)
    return 0;
  if (e[1]->type != REDIS_REPLY_INTEGER || e[2]->type != REDIS_REPLY_INTEGER ||
      (e[3]->type != REDIS_REPLY_STATUS && e[3]->type != REDIS_REPLY_STRING) ||
      e[4]->type != REDIS_REPLY_ARRAY)
    return 0;
  for (size_t k = 0; k < e[4]->elements; k++)
    if (e[4]->element[k]->type != REDIS_REPLY_STRING)
      return 0;
  return e[5]->type == REDIS_REPLY_ARRAY && e[5]->elements == 2 &&
         e[5]->element[0]->type == REDIS_REPLY_INTEGER &&
         e[5]->element[1]->type == REDIS_REPLY_INTEGER;
}

static int parse_count(const redisReply *v, int64_t *out) {
  char *end;
  long long n = strtoll(v->str, &end, 10);
  if (v->len == 0 || end != v->str + v->len)
    return 0;
  *out = n;
  return 1;
}

/* The connection name (CLIENT LIST's name=) of the client whose id starts
 * owner ("ID:T"), from the text of CLIENT LIST (may be NULL): its length
 * and *at, or 0. dlock names its connections PREFIX:HOST:PID:ID. */
static size_t client_of(const char *list, const char *owner, size_t owner_len,
                        const char **at) {
  const char *colon = memchr(owner, ':', owner_len);
  size_t idlen = colon ? (size_t)(colon - owner) : 0;
  if (list == NULL || idlen < 8)
    return 0;
  for (const char *line = list; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char *name = NULL;
    for (const char *p = line; p + 5 <= line + len; p++)
      if ((p == line || p[-1] == ' ') && memcmp(p, "name=", 5) == 0) {
        name = p + 5;
        break;
      }
    if (name) {
      size_t nlen = strcspn(name, " \r\n");
      if (nlen > idlen && name[nlen - idlen - 1] == ':' &&
          memcmp(name + nlen - idlen, owner, idlen) == 0) {
        *at = name;
        return nlen;
      }
    }
    line += len + (end ? 1 : 0);
  }
  return 0;
}

static int build(const redisReply *r, const char *clients,
                 dlock_inspection **out) {
  redisReply *const *e = r->element;
  const redisReply *c = e[4];
  int is_hash = strcmp(e[0]->str, "hash") == 0;
  size_t nholders = 0, bytes = 0;
  const char *at;
  for (size_t k = 0; is_hash && k + 1 < c->elements; k += 2)
    if (strcmp(c->element[k]->str, "mode") != 0) {
      nholders++;
      bytes += c->element[k]->len + 1 +
               client_of(clients, c->element[k]->str, c->element[k]->len, &at) + 1;
    }
  dlock_inspection *in =
      calloc(1, sizeof *in + nholders * (sizeof(dlock_holder) + sizeof(char *)) +
                    bytes);
  if (in == NULL)
    return dlock__fail(DLOCK_ENOMEM, "out of memory");
  dlock_holder *holders = (dlock_holder *)(in + 1);
  const char **names = (const char **)(holders + nholders);
  char *text = (char *)(names + nholders);
  in->ttl_ms = e[1]->integer;
  in->queue_length = e[2]->integer;
  in->kind = kind_of(e[0], e[2]->integer, e[3], c, &in->mode);
  in->permits_held = e[5]->element[0]->integer;
  in->permit_expires_ms = e[5]->element[1]->integer;
  if (strcmp(e[0]->str, "string") == 0 && c->elements == 1) {
    in->has_count = parse_count(c->element[0], &in->count);
    if (!in->has_count)
      in->kind = "string";
  }
  for (size_t k = 0; is_hash && k + 1 < c->elements; k += 2) {
    const redisReply *f = c->element[k], *v = c->element[k + 1];
    if (strcmp(f->str, "mode") == 0)
      continue;
    dlock_holder *h = &holders[in->nholders++];
    memcpy(text, f->str, f->len);
    text[f->len] = '\0';
    h->owner = text;
    h->owner_len = f->len;
    text += f->len + 1;
    if (!parse_count(v, &h->count))
      h->count = 0;
    size_t nlen = client_of(clients, f->str, f->len, &at);
    if (nlen) {
      memcpy(text, at, nlen);
      text[nlen] = '\0';
      names[in->nholders - 1] = text;
      text += nlen + 1;
      in->holder_clients = names;
    }
  }
  in->holders = in->nholders ? holders : NULL;
  *out = in;
  return DLOCK_OK;
}

int dlock_inspect(dlock_client *client, const char *name,
                  const dlock_lock_opts *opts, dlock_inspection **out) {
  dlock__clear_error();
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  dlock__handle *h;
  int rc = dlock__handle_open(sizeof *h, client, name, opts, (void **)&h);
  if (rc != DLOCK_OK)
    return rc;
  if (dlock__on_engine_thread()) {
    dlock__handle_free(h);
    free(h);
    return dlock__fail(DLOCK_EINVAL, "blocking dlock call on an engine thread");
  }
  dlock__buf queue = {0}, timeouts = {0};
  rc = dlock__key(&queue, DLOCK__KEY_FAIR_QUEUE, h->name, h->name_len);
  if (rc == DLOCK_OK)
    rc = dlock__key(&timeouts, DLOCK__KEY_PERMITS_TIMEOUT, h->name, h->name_len);
  redisReply *r = NULL;
  if (rc == DLOCK_OK) {
    const char *keys[] = {h->name, queue.p, timeouts.p};
    size_t klens[] = {h->name_len, queue.len, timeouts.len};
    rc = dlock__script_call(client, DLOCK__SCRIPT_INSPECT, 3, keys, klens, 0,
                            NULL, NULL, &r);
  }
  /* who the holders are: the server's connection names, where the ACL
   * allows CLIENT LIST (otherwise the holders go unnamed) */
  redisReply *cl = NULL;
  if (rc == DLOCK_OK && well_formed(r) && r->element[4]->elements > 0 &&
      strcmp(r->element[0]->str, "hash") == 0) {
    const char *argv[] = {"CLIENT", "LIST"};
    size_t lens[] = {6, 4};
    if (dlock__command_call(client, h->name, h->name_len, 2, argv, lens, &cl) !=
        DLOCK_OK)
      cl = NULL;
    dlock__clear_error();
  }
  if (rc == DLOCK_OK)
    rc = well_formed(r)
             ? build(r, cl && cl->type == REDIS_REPLY_STRING ? cl->str : NULL, out)
             : dlock__fail(DLOCK_EPROTO, "inspect: unexpected reply");
  if (cl)
    freeReplyObject(cl);
  if (r)
    freeReplyObject(r);
  dlock__buf_free(&queue);
  dlock__buf_free(&timeouts);
  dlock__handle_free(h);
  free(h);
  return rc;
}

void dlock_inspection_free(dlock_inspection *in) { free(in); }
