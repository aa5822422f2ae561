/* dlock_list (dlock/inspect.h): SCAN for the objects' names, one call per
 * page; on a cluster the masters in turn, the master's place in the
 * cursor's top 16 bits and its own SCAN cursor in the other 48. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock/lock_impl.h"
#include "dlock/inspect.h"

#define COUNT_DEFAULT 1000
#define NODE_SHIFT 48
#define NODE_CURSOR ((UINT64_C(1) << NODE_SHIFT) - 1)

static int starts(const char *s, size_t len, const char *prefix) {
  size_t n = strlen(prefix);
  return len >= n && memcmp(s, prefix, n) == 0;
}

static int contains(const char *s, size_t len, const char *what) {
  size_t n = strlen(what);
  for (size_t i = 0; i + n <= len; i++)
    if (memcmp(s + i, what, n) == 0)
      return 1;
  return 0;
}

/* A helper key of some object (docs/wire.md), not an object's own. */
static int helper_key(const char *k, size_t len) {
  static const char *const prefixes[] = {
      "redisson_lock_token:",  "redisson_unlock_latch:", "redisson_lock_queue:",
      "redisson_lock_timeout:", "dlock_fair_alive:",     "dlock_permits_release_latch:",
      "dlock_fence:", "dlock_election:", "dlock_semaphore_take:",
      "dlock_semaphore_release:"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (starts(k, len, prefixes[i]))
      return 1;
  /* {N}:timeout (expirable permits), {N}:U:T:rwlock_timeout:K (readers) */
  if (len > 0 && k[0] == '{' &&
      ((len > 9 && memcmp(k + len - 9, "}:timeout", 9) == 0) ||
       contains(k, len, ":rwlock_timeout:")))
    return 1;
  return 0;
}

/* The page's names from SCAN's key array. */
static int page(const redisReply *keys, dlock_listing **out) {
  size_t n = 0, bytes = 0;
  for (size_t i = 0; i < keys->elements; i++) {
    const redisReply *k = keys->element[i];
    if (k->type == REDIS_REPLY_STRING && !helper_key(k->str, k->len)) {
      n++;
      bytes += k->len + 1;
    }
  }
  dlock_listing *l = calloc(1, sizeof *l + n * (sizeof(char *) + sizeof(size_t)) +
                                   bytes);
  if (l == NULL)
    return dlock__oom();
  const char **names = (const char **)(l + 1);
  size_t *lens = (size_t *)(names + n);
  char *text = (char *)(lens + n);
  for (size_t i = 0; i < keys->elements; i++) {
    const redisReply *k = keys->element[i];
    if (k->type != REDIS_REPLY_STRING || helper_key(k->str, k->len))
      continue;
    memcpy(text, k->str, k->len);
    text[k->len] = '\0';
    names[l->n] = text;
    lens[l->n++] = k->len;
    text += k->len + 1;
  }
  l->names = n ? names : NULL;
  l->lens = n ? lens : NULL;
  *out = l;
  return DLOCK_OK;
}

int dlock_list(dlock_client *client, const char *pattern, uint64_t *cursor,
               size_t count, dlock_listing **out) {
  dlock__clear_error();
  if (out)
    *out = NULL;
  if (client == NULL || cursor == NULL || out == NULL)
    return dlock__fail(DLOCK_EINVAL, "%s is NULL",
                       client == NULL ? "client" : cursor == NULL ? "cursor" : "out");
  if (dlock__client_closed(client))
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  if (dlock__on_engine_thread())
    return dlock__fail(DLOCK_EINVAL, "blocking dlock call on an engine thread");
  if (pattern == NULL)
    pattern = "*";
  if (count == 0)
    count = COUNT_DEFAULT;
  uint64_t at = *cursor, node = 0;
  int slot = DLOCK__SLOT_ANY, nmasters = 1;
  int first[DLOCK__MAX_MASTERS];
  int slotted = dlock__client_slotted(client); /* a SCAN per master */
  if (slotted) { /* which master, by its first slot */
    nmasters = dlock__client_masters(client, first, DLOCK__MAX_MASTERS);
    if (nmasters == 0)
      return dlock__fail(DLOCK_EIO, "the cluster's slot map is not known yet");
    node = at >> NODE_SHIFT;
    at &= NODE_CURSOR;
    if (node >= (uint64_t)nmasters) { /* the map shrank meanwhile: done */
      *cursor = 0;
      return page(&(redisReply){.type = REDIS_REPLY_ARRAY}, out);
    }
    slot = first[node];
  }
  char at_s[24], count_s[24];
  snprintf(at_s, sizeof at_s, "%llu", (unsigned long long)at);
  snprintf(count_s, sizeof count_s, "%zu", count);
  const char *argv[] = {"SCAN", at_s, "MATCH", pattern, "COUNT", count_s};
  size_t lens[] = {4, strlen(at_s), 5, strlen(pattern), 5, strlen(count_s)};
  dlock__req req;
  redisReply *r = NULL;
  int rc = dlock__req_command(&req, 6, argv, lens);
  if (rc != DLOCK_OK)
    return rc;
  req.slot = slot; /* a cluster: that slot's master */
  rc = dlock__call(client, &req, &r);
  if (rc != DLOCK_OK)
    return rc;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[0]->type != REDIS_REPLY_STRING ||
      r->element[1]->type != REDIS_REPLY_ARRAY) {
    freeReplyObject(r);
    return dlock__fail(DLOCK_EPROTO, "SCAN: unexpected reply");
  }
  uint64_t next = strtoull(r->element[0]->str, NULL, 10);
  rc = page(r->element[1], out);
  freeReplyObject(r);
  if (rc != DLOCK_OK)
    return rc;
  if (slotted && next > NODE_CURSOR) {
    dlock_listing_free(*out);
    *out = NULL;
    return dlock__fail(DLOCK_EPROTO, "SCAN: a cursor past 2^48");
  }
  if (!slotted)
    *cursor = next;
  else if (next != 0)
    *cursor = (node << NODE_SHIFT) | next;
  else /* this master is done: the next one's first page */
    *cursor = node + 1 < (uint64_t)nmasters ? (node + 1) << NODE_SHIFT : 0;
  return DLOCK_OK;
}

void dlock_listing_free(dlock_listing *listing) { free(listing); }
