/* dlock_inspect: what is stored under a name (kind, holders, TTL, queue),
 * read by lua/inspect.lua in one snapshot, with the key names of
 * src/base/keys.c. One allocation holds the result and every string it
 * points at. */
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "dlock/inspect.h"
#include "lock/lock_impl.h"

static const char *kind_of(const redisReply *type, int64_t queued,
                           const redisReply *timeouts, const redisReply *c,
                           const redisReply *record, const char **mode) {
  const char *t = type->str;
  if (strcmp(t, "hash") == 0) {
    for (size_t k = 0; k + 1 < c->elements; k += 2)
      if (strcmp(c->element[k]->str, "mode") == 0) {
        *mode = strcmp(c->element[k + 1]->str, "write") == 0 ? "write" : "read";
        return "rwlock";
      }
    for (size_t k = 0; k < c->elements; k += 2)
      if (c->element[k]->len > 12 &&
          strcmp(c->element[k]->str + c->element[k]->len - 12, ":expire_time") == 0)
        return "group"; /* a grouped multi-lock's per-holder entries */
    if (strcmp(record->str, "hash") == 0)
      return "election"; /* a leader's lock, beside its record */
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
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 7)
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
  if (e[6]->type != REDIS_REPLY_STATUS && e[6]->type != REDIS_REPLY_STRING)
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

/* The holder a hash field names, or NULL: a lock's field is its holder
 * "U:T" (its value the hold count), a read-write lock's "mode" none; a
 * grouped multi-lock's holders are in its "F:U:T:lock_count" fields (F:
 * 22 characters), one per value held. */
static const char *holder_of(const redisReply *f, int group, size_t *len) {
  static const char suffix[] = ":lock_count";
  size_t sl = sizeof suffix - 1;
  if (!group) {
    *len = f->len;
    return strcmp(f->str, "mode") == 0 ? NULL : f->str;
  }
  if (f->len <= 23 + sl || f->str[22] != ':' ||
      memcmp(f->str + f->len - sl, suffix, sl) != 0)
    return NULL;
  *len = f->len - 23 - sl;
  return f->str + 23;
}

/* A group's holder already listed (its count: the values it holds). */
static dlock_holder *listed(dlock_holder *h, size_t n, const char *o,
                            size_t len) {
  for (size_t i = 0; i < n; i++)
    if (h[i].owner_len == len && memcmp(h[i].owner, o, len) == 0)
      return &h[i];
  return NULL;
}

/* Copy the holders of hash contents c into in (holders, names, text). */
static void fill_holders(dlock_inspection *in, const redisReply *c, int group,
                         const char *clients, dlock_holder *holders,
                         const char **names, char *text) {
  const char *at, *o;
  size_t len;
  for (size_t k = 0; k + 1 < c->elements; k += 2) {
    if ((o = holder_of(c->element[k], group, &len)) == NULL)
      continue;
    dlock_holder *seen = group ? listed(holders, in->nholders, o, len) : NULL;
    if (seen) {
      seen->count++;
      continue;
    }
    dlock_holder *h = &holders[in->nholders++];
    memcpy(text, o, len);
    text[len] = '\0';
    h->owner = text;
    h->owner_len = len;
    text += len + 1;
    if (group)
      h->count = 1;
    else if (!parse_count(c->element[k + 1], &h->count))
      h->count = 0;
    size_t nlen = client_of(clients, o, len, &at);
    if (nlen) {
      memcpy(text, at, nlen);
      text[nlen] = '\0';
      names[in->nholders - 1] = text;
      text += nlen + 1;
      in->holder_clients = names;
    }
  }
  in->holders = in->nholders ? holders : NULL;
}

static int build(const redisReply *r, const char *clients,
                 dlock_inspection **out) {
  redisReply *const *e = r->element;
  const redisReply *c = e[4];
  int is_hash = strcmp(e[0]->str, "hash") == 0;
  const char *mode = NULL, *kind = kind_of(e[0], e[2]->integer, e[3], c, e[6], &mode);
  int group = strcmp(kind, "group") == 0;
  size_t nholders = 0, bytes = 0, len;
  const char *at, *o;
  for (size_t k = 0; is_hash && k + 1 < c->elements; k += 2)
    if ((o = holder_of(c->element[k], group, &len)) != NULL) {
      nholders++;
      bytes += len + 1 + client_of(clients, o, len, &at) + 1;
    }
  dlock_inspection *in =
      calloc(1, sizeof *in + nholders * (sizeof(dlock_holder) + sizeof(char *)) +
                    bytes);
  if (in == NULL)
    return dlock__oom();
  dlock_holder *holders = (dlock_holder *)(in + 1);
  in->ttl_ms = e[1]->integer;
  in->queue_length = e[2]->integer;
  in->kind = kind;
  in->mode = mode;
  in->permits_held = e[5]->element[0]->integer;
  in->permit_expires_ms = e[5]->element[1]->integer;
  if (strcmp(e[0]->str, "string") == 0 && c->elements == 1) {
    in->has_count = parse_count(c->element[0], &in->count);
    if (!in->has_count)
      in->kind = "string";
  }
  if (is_hash)
    fill_holders(in, c, group, clients, holders,
                 (const char **)(holders + nholders),
                 (char *)((const char **)(holders + nholders) + nholders));
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
  dlock__buf queue = {0}, timeouts = {0}, record = {0};
  rc = dlock__key(&queue, DLOCK__KEY_FAIR_QUEUE, h->name, h->name_len);
  if (rc == DLOCK_OK)
    rc = dlock__key(&timeouts, DLOCK__KEY_PERMITS_TIMEOUT, h->name, h->name_len);
  if (rc == DLOCK_OK)
    rc = dlock__key(&record, DLOCK__KEY_ELECTION, h->name, h->name_len);
  redisReply *r = NULL;
  if (rc == DLOCK_OK) {
    const char *keys[] = {h->name, queue.p, timeouts.p, record.p};
    size_t klens[] = {h->name_len, queue.len, timeouts.len, record.len};
    rc = dlock__script_call(client, DLOCK__SCRIPT_INSPECT, 4, keys, klens, 0,
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
  dlock__buf_free(&record);
  dlock__handle_free(h);
  free(h);
  return rc;
}

void dlock_inspection_free(dlock_inspection *in) { free(in); }
