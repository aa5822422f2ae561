/* What the locks kept in a hash of owner -> hold count share (the
 * reentrant, fenced, non-reentrant, spin and fair locks; docs/wire.md): the
 * state query, the hold record and its renewal, what a release's reply
 * means, and the lock's release and force release requests. */
#include <string.h>

#include "base/scripts.h"
#include "lock/lock_impl.h"

static dlock__hold_id hold_id(dlock_lock *l, uint64_t owner, char buf[64]) {
  dlock__hold_id id = {l->h.name, l->h.name_len, buf,
                       dlock__owner(l->h.client, owner, buf), NULL, 0};
  return id;
}

int dlock__lock_state_query(dlock_lock *l, int script,
                            const dlock__hold_id *id, const char *mode,
                            dlock_lock_state *st) {
  const char *keys[] = {l->h.name};
  size_t klens[] = {l->h.name_len};
  const char *args[] = {id->field};
  size_t alens[] = {id->field_len};
  redisReply *r;
  int rc = dlock__script_call(l->h.client, script, 1, keys, klens, 1, args,
                              alens, &r);
  if (rc != DLOCK_OK)
    return rc;
  rc = dlock__lock_state_read(r, mode, st);
  freeReplyObject(r);
  return rc;
}

int dlock__lock_state_read(const redisReply *r, const char *mode,
                           dlock_lock_state *st) {
  int want = mode ? REDIS_REPLY_STRING : REDIS_REPLY_INTEGER;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
      r->element[0]->type != want)
    return dlock__fail_reply(r, "state");
  st->locked = mode ? strcmp(r->element[0]->str, mode) == 0
                    : r->element[0]->integer == 1;
  st->hold_count = r->element[1]->integer;
  st->held_by_me = st->hold_count > 0;
  st->ttl_ms = r->element[2]->integer;
  return DLOCK_OK;
}

int dlock__hashlock_state(dlock_lock *l, uint64_t owner, dlock_lock_state *st) {
  char buf[64];
  dlock__hold_id id = hold_id(l, owner, buf);
  return dlock__lock_state_query(l, DLOCK__SCRIPT_LOCK_STATE, &id, NULL, st);
}

size_t dlock__hashlock_guard_field(dlock_lock *l, uint64_t owner,
                                  char out[96]) {
  return dlock__owner(l->h.client, owner, out);
}

int dlock__hashlock_hold(dlock_lock *l, uint64_t owner, int watchdog,
                         int64_t lease_ms, int64_t t0_ms, dlock__listener *ln) {
  char buf[64];
  dlock__hold_id id = hold_id(l, owner, buf);
  static const dlock__renewal renew = {DLOCK__SCRIPT_LOCK_RENEW,
                                        DLOCK__SCRIPT_LOCK_RENEW_NODE, NULL, 0};
  return dlock__hold_add(l->h.client, &id, owner, &renew, watchdog, lease_ms,
                         t0_ms, ln);
}

int dlock__hashlock_read_reply(const redisReply *r, int release, int64_t *hint,
                               int64_t *token) {
  if (release)
    return dlock__hashlock_release_answer(r);
  *token = 0;
  if (r->type == REDIS_REPLY_NIL)
    return DLOCK_OK;
  if (r->type == REDIS_REPLY_INTEGER) {
    *hint = r->integer;
    return DLOCK_EBUSY;
  }
  return dlock__fail_reply(r, "acquire");
}

int dlock__hashlock_release_answer(const redisReply *r) {
  if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1))
    return DLOCK_OK;
  return r->type == REDIS_REPLY_NIL ? DLOCK_ENOTOWNER
                                    : dlock__fail_reply(r, "release");
}

int dlock__lock_released_as(dlock_lock *l, const dlock__hold_id *id,
                            const char *who, const redisReply *r) {
  if (r->type == REDIS_REPLY_NIL) {
    int64_t valid = dlock__hold_valid_ms(l->h.client, id);
    if (dlock__hold_released(l->h.client, id, -1))
      return dlock__fail_gone("lease of", l->h.name, valid);
    return dlock__fail(DLOCK_ENOTOWNER, "\"%.100s%s\" is not held by %s",
                       DLOCK__NAME(l->h.name), who);
  }
  if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
    if (dlock__hold_released(l->h.client, id, (int)r->integer) == 2)
      return dlock__fail_reported_lost("lease of", l->h.name);
    return DLOCK_OK;
  }
  return dlock__fail_reply(r, "release");
}

int dlock__hashlock_released(dlock_lock *l, uint64_t owner, const redisReply *r) {
  char buf[64];
  dlock__hold_id id = hold_id(l, owner, buf);
  return dlock__lock_released_as(l, &id, buf, r);
}

int64_t dlock__hashlock_count(dlock_lock *l, uint64_t owner) {
  char buf[64];
  dlock__hold_id id = hold_id(l, owner, buf);
  return dlock__hold_count(l->h.client, &id);
}

void dlock__hashlock_forget(dlock_lock *l, uint64_t owner) {
  char buf[64];
  dlock__hold_id id = hold_id(l, owner, buf);
  dlock__hold_released(l->h.client, &id, 1);
}

int dlock__hashlock_release_req(dlock_lock *l, uint64_t owner_id,
                                const char *rid, const dlock__buf *channel,
                                const dlock__buf *unlock_prefix,
                                dlock__req *req) {
  dlock_client *c = l->h.client;
  char owner[64], lease[24], px[24];
  dlock__hold_id id = hold_id(l, owner_id, owner);
  const char *pub = channel ? dlock__publish_cmd(c) : "";
  const char *keys[] = {l->h.name, NULL};
  size_t klens[] = {l->h.name_len, 0};
  const char *args[] = {lease, owner, px, pub, channel ? channel->p : "", "0"};
  size_t alens[] = {dlock__fmt_i64(lease, dlock__hold_releasing(c, &id)),
                    id.field_len,
                    dlock__fmt_i64(px, dlock__unlock_latch_ms(c)),
                    strlen(pub), channel ? channel->len : 0, 1};
  return dlock__release_req(req, DLOCK__SCRIPT_LOCK_RELEASE, unlock_prefix,
                            rid, 2, keys, klens, 6, args, alens);
}

int dlock__hashlock_force_release(dlock_lock *l, const dlock__buf *channel,
                                  int *deleted) {
  const char *pub = channel ? dlock__publish_cmd(l->h.client) : "";
  const char *keys[] = {l->h.name};
  size_t klens[] = {l->h.name_len};
  const char *args[] = {pub, channel ? channel->p : "", "0"};
  size_t alens[] = {strlen(pub), channel ? channel->len : 0, 1};
  return dlock__force_release_call(l, DLOCK__SCRIPT_LOCK_FORCE_RELEASE, 1, keys,
                                   klens, 3, args, alens, deleted);
}
