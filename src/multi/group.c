/* The grouped multi-lock (docs/group.md, docs/wire.md "Grouped
 * multi-lock"): Redisson's RedissonFasterMultiLock. One hash per group; a
 * field per value (its bytes hashed, group.h); all the values or none in
 * one script; a release announces on the group's channel, so every waiter
 * of the group tries again (their sets of values differ). The client's
 * registry keys a hold by the owner and a tag of its set of values
 * ("U:T|TAG"): one owner may hold several sets of one group. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "lock/lock_impl.h"
#include "dlock/multi.h"
#include "multi/group.h"

#define MAX_VALUES 100000

typedef struct group {
  dlock_lock base;
  size_t n;                 /* distinct fields */
  char (*fields)[DLOCK__GROUP_FIELD_LEN + 1];
  dlock__buf joined;        /* the fields, space-separated (renewal) */
  char tag[17];             /* the set's tag in the hold registry */
  dlock__buf channel;       /* redisson_lock__channel:{G} */
  dlock__buf unlock_prefix; /* redisson_unlock_latch:{G}: */
} group;

/* Redisson's fixed key (org.redisson.misc.Hash). */
static const uint64_t REDISSON_KEY[4] = {0x9e3779b97f4a7c15ull,
                                          0xf39cc0605cedc834ull,
                                          0x1082276bf3a27251ull,
                                          0xf86c6a11d0c18e95ull};

size_t dlock__group_field(const void *value, size_t len,
                          char out[DLOCK__GROUP_FIELD_LEN + 1]) {
  static const char b64[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  uint64_t h[2];
  dlock__highway128(REDISSON_KEY, value, len, h);
  unsigned char raw[18] = {0}; /* big-endian h[0], h[1]; 2 bytes of pad */
  for (int i = 0; i < 8; i++) {
    raw[i] = (unsigned char)(h[0] >> (56 - 8 * i));
    raw[8 + i] = (unsigned char)(h[1] >> (56 - 8 * i));
  }
  /* base64 of the 16 bytes is 24 characters ending in "=="; Redisson
   * drops those: 22 */
  size_t o = 0;
  for (int i = 0; i < 18 && o < DLOCK__GROUP_FIELD_LEN; i += 3) {
    uint32_t v = (uint32_t)raw[i] << 16 | (uint32_t)raw[i + 1] << 8 | raw[i + 2];
    for (int k = 3; k >= 0 && o < DLOCK__GROUP_FIELD_LEN; k--)
      out[o++] = b64[(v >> (6 * k)) & 63];
  }
  out[o] = '\0';
  return o;
}

static int by_field(const void *a, const void *b) { return strcmp(a, b); }

/* ---- the owner's hold ------------------------------------------------------- */

/* "U:T|TAG" into buf (at least 96 bytes); the id of owner's hold. */
static dlock__hold_id hold_id(group *g, uint64_t owner, char buf[96]) {
  size_t n = dlock__owner(g->base.h.client, owner, buf);
  n += (size_t)snprintf(buf + n, 96 - n, "|%s", g->tag);
  dlock__hold_id id = {g->base.h.name, g->base.h.name_len, buf, n, NULL, 0};
  return id;
}

static int hold(dlock_lock *l, uint64_t owner, int watchdog, int64_t lease_ms,
                int64_t t0_ms, dlock__listener *ln) {
  group *g = (group *)l;
  char buf[96];
  dlock__hold_id id = hold_id(g, owner, buf);
  dlock__renewal renew = {DLOCK__SCRIPT_GROUP_RENEW,
                          DLOCK__SCRIPT_GROUP_RENEW_NODE, g->joined.p,
                          g->joined.len};
  return dlock__hold_add(l->h.client, &id, owner, &renew, watchdog, lease_ms,
                         t0_ms, ln);
}

static int released(dlock_lock *l, uint64_t owner, const redisReply *r) {
  char buf[96];
  dlock__hold_id id = hold_id((group *)l, owner, buf);
  char who[64];
  dlock__owner(l->h.client, owner, who);
  return dlock__lock_released_as(l, &id, who, r);
}

static void forget(dlock_lock *l, uint64_t owner) {
  char buf[96];
  dlock__hold_id id = hold_id((group *)l, owner, buf);
  dlock__hold_released(l->h.client, &id, 1);
}

static int64_t hold_count(dlock_lock *l, uint64_t owner) {
  char buf[96];
  dlock__hold_id id = hold_id((group *)l, owner, buf);
  return dlock__hold_count(l->h.client, &id);
}

/* ---- requests: the group's name, then head, then every field ---------------- */

/* A script call on G with nhead arguments before the fields. */
static int fields_req(group *g, int script, size_t nkeys, const char **keys,
                      size_t *klens, const char *const *head,
                      const size_t *hlens, size_t nhead, const char *rid,
                      dlock__req *req) {
  size_t nargs = nhead + g->n;
  const char **args = malloc(nargs * sizeof *args);
  size_t *alens = malloc(nargs * sizeof *alens);
  int rc = DLOCK_ENOMEM;
  if (args && alens) {
    for (size_t i = 0; i < nhead; i++)
      args[i] = head[i], alens[i] = hlens[i];
    for (size_t i = 0; i < g->n; i++)
      args[nhead + i] = g->fields[i], alens[nhead + i] = DLOCK__GROUP_FIELD_LEN;
    rc = rid ? dlock__release_req(req, script, &g->unlock_prefix, rid, nkeys,
                                  keys, klens, nargs, args, alens)
             : dlock__req_script(req, script, nkeys, keys, klens, nargs, args,
                                 alens);
  } else {
    dlock__fail(DLOCK_ENOMEM, "out of memory");
  }
  free(args);
  free(alens);
  return rc;
}

static int try_req(dlock_lock *l, uint64_t owner_id, int64_t lease_ms,
                   dlock__req *req) {
  char owner[64], lease[24];
  const char *keys[] = {l->h.name};
  size_t klens[] = {l->h.name_len};
  const char *head[] = {lease, owner};
  size_t hlens[] = {dlock__fmt_i64(lease, lease_ms),
                    dlock__owner(l->h.client, owner_id, owner)};
  return fields_req((group *)l, DLOCK__SCRIPT_GROUP_ACQUIRE, 1, keys, klens,
                    head, hlens, 2, NULL, req);
}

static int release_req(dlock_lock *l, uint64_t owner_id, const char *rid,
                       dlock__req *req) {
  group *g = (group *)l;
  dlock_client *c = l->h.client;
  char owner[64], lease[24], px[24], buf[96];
  dlock__hold_id id = hold_id(g, owner_id, buf);
  const char *pub = dlock__publish_cmd(c);
  const char *keys[] = {l->h.name, NULL};
  size_t klens[] = {l->h.name_len, 0};
  const char *head[] = {lease, owner, px, pub, g->channel.p};
  size_t hlens[] = {dlock__fmt_i64(lease, dlock__hold_releasing(c, &id)),
                    dlock__owner(c, owner_id, owner),
                    dlock__fmt_i64(px, dlock__unlock_latch_ms(c)), strlen(pub),
                    g->channel.len};
  return fields_req(g, DLOCK__SCRIPT_GROUP_RELEASE, 2, keys, klens, head,
                    hlens, 5, rid, req);
}

/* One call of a script that answers on its own (force release, state). */
static int fields_call(group *g, int script, const char *const *head,
                       const size_t *hlens, size_t nhead, redisReply **r) {
  const char *keys[] = {g->base.h.name};
  size_t klens[] = {g->base.h.name_len};
  dlock__req req;
  int rc = fields_req(g, script, 1, keys, klens, head, hlens, nhead, NULL,
                      &req);
  return rc == DLOCK_OK ? dlock__call(g->base.h.client, &req, r) : rc;
}

static int force_release(dlock_lock *l, int *deleted) {
  group *g = (group *)l;
  const char *pub = dlock__publish_cmd(l->h.client);
  const char *head[] = {pub, g->channel.p};
  size_t hlens[] = {strlen(pub), g->channel.len};
  redisReply *r;
  int rc = fields_call(g, DLOCK__SCRIPT_GROUP_FORCE_RELEASE, head, hlens, 2, &r);
  if (rc != DLOCK_OK)
    return rc;
  rc = dlock__force_release_answer(r, deleted);
  freeReplyObject(r);
  return rc;
}

/* lua/group_state.lua: [held, my count, ms]. */
static int state(dlock_lock *l, uint64_t owner_id, dlock_lock_state *st) {
  char owner[64];
  const char *head[] = {owner};
  size_t hlens[] = {dlock__owner(l->h.client, owner_id, owner)};
  redisReply *r;
  int rc = fields_call((group *)l, DLOCK__SCRIPT_GROUP_STATE, head, hlens, 1, &r);
  if (rc != DLOCK_OK)
    return rc;
  rc = dlock__lock_state_read(r, NULL, st);
  freeReplyObject(r);
  return rc;
}

/* Every waiter of the group tries again on a release: their values differ. */
static int wait_channel(dlock_lock *l, uint64_t owner_id, dlock__buf *channel,
                        dlock__wake_fn **wake) {
  group *g = (group *)l;
  (void)owner_id;
  *wake = dlock__wake_all;
  return dlock__buf_add(channel, g->channel.p, g->channel.len);
}

static void destroy(dlock_lock *l) {
  group *g = (group *)l;
  free(g->fields);
  dlock__buf_free(&g->joined);
  dlock__buf_free(&g->channel);
  dlock__buf_free(&g->unlock_prefix);
}

static const dlock__lock_reqs group_reqs = {
    .try_req = try_req,
    .release_req = release_req,
    .read_reply = dlock__hashlock_read_reply,
    .hold = hold,
    .released = released,
    .forget = forget,
    .wait_channel = wait_channel,
    .hold_count = hold_count,
};

static const dlock__lock_methods group_methods = {
    .kind = "group",
    .noun = "grouped multi-lock",
    .caps = DLOCK_CAP_REENTRANT,
    .size = sizeof(group),
    .layout = DLOCK__LAYOUT_GROUP_HASH,
    .announces = 1,
    .channel = DLOCK__KEY_LOCK_CHANNEL,
    .reqs = &group_reqs,
    .force_release = force_release,
    .state = state,
    .destroy = destroy,
};

/* The fields of the values, sorted, without repeats; joined; tagged. */
static int set_fields(group *g, const char *const *values, const size_t *lens,
                      size_t n) {
  g->fields = calloc(n, sizeof *g->fields);
  if (g->fields == NULL)
    return dlock__oom();
  for (size_t i = 0; i < n; i++)
    dlock__group_field(values[i], lens ? lens[i] : strlen(values[i]),
                       g->fields[i]);
  qsort(g->fields, n, sizeof *g->fields, by_field);
  g->n = 0;
  for (size_t i = 0; i < n; i++)
    if (g->n == 0 || strcmp(g->fields[g->n - 1], g->fields[i]) != 0)
      memmove(g->fields[g->n++], g->fields[i], sizeof *g->fields);
  for (size_t i = 0; i < g->n; i++)
    if ((i && dlock__buf_add(&g->joined, " ", 1) != DLOCK_OK) ||
        dlock__buf_add(&g->joined, g->fields[i], DLOCK__GROUP_FIELD_LEN) !=
            DLOCK_OK)
      return dlock__oom();
  snprintf(g->tag, sizeof g->tag, "%016" PRIx64,
           dlock__highway64(REDISSON_KEY, g->joined.p, g->joined.len));
  return DLOCK_OK;
}

int dlock_group_lock_new(dlock_client *client, const char *group_name,
                         const char *const *values, const size_t *lens,
                         size_t n, const dlock_lock_opts *opts,
                         dlock_lock **out) {
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  if (values == NULL || n == 0 || n > MAX_VALUES)
    return dlock__fail(DLOCK_EINVAL, "values: 1 to %d of them, not NULL",
                       MAX_VALUES);
  for (size_t i = 0; i < n; i++)
    if (values[i] == NULL)
      return dlock__fail(DLOCK_EINVAL, "value %zu is NULL", i);
  dlock_lock *l;
  int rc = dlock__lock_alloc(&group_methods, client, group_name, opts, &l);
  if (rc != DLOCK_OK)
    return rc;
  group *g = (group *)l;
  rc = set_fields(g, values, lens, n);
  if (rc == DLOCK_OK &&
      (dlock__key(&g->channel, DLOCK__KEY_LOCK_CHANNEL, l->h.name,
                  l->h.name_len) ||
       dlock__key(&g->unlock_prefix, DLOCK__KEY_UNLOCK_LATCH, l->h.name,
                  l->h.name_len)))
    rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
  if (rc != DLOCK_OK) {
    dlock_lock_free(l);
    return rc;
  }
  *out = l;
  return DLOCK_OK;
}
