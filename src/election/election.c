/* Leader election (dlock/election.h, docs/election.md, docs/wire.md
 * "Leader election"): a kind on the lock table whose grant is a fenced lock
 * on N in Redisson's layout (the term is its token) plus the leader's
 * record dlock_election:{N} (owner, term, version, since, value); every
 * change is announced on dlock_election_channel:{N} (observe.c reads it),
 * and a resignation on the lock's channel too, so a standby takes over at
 * once. The record holds no lease of its own: it is the leader's while N
 * holds its owner's field. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "election/election_impl.h"

/* ---- the kind's requests ------------------------------------------------------ */

static int try_req(dlock_lock *l, uint64_t owner_id, int64_t lease_ms,
                   dlock__req *req) {
  dlock_election *e = (dlock_election *)l;
  char owner[64], lease[24];
  const char *pub = dlock__publish_cmd(l->h.client);
  const char *keys[] = {l->h.name, e->token_key.p, e->record.p};
  size_t klens[] = {l->h.name_len, e->token_key.len, e->record.len};
  pthread_mutex_lock(&e->mu);
  const char *args[] = {lease, owner, e->value ? e->value : "", pub,
                        e->channel.p};
  size_t alens[] = {dlock__fmt_i64(lease, lease_ms),
                    dlock__owner(l->h.client, owner_id, owner), e->value_len,
                    strlen(pub), e->channel.len};
  int rc = dlock__req_script(req, DLOCK__SCRIPT_ELECTION_CAMPAIGN, 3, keys,
                             klens, 5, args, alens);
  pthread_mutex_unlock(&e->mu);
  return rc;
}

/* lua/election_campaign.lua: {1, term, since} elected, {0, pttl} another
 * leads, {2, term} this candidate leads already; a resignation's answer as
 * a lock release's. */
static int read_reply(const redisReply *r, int release, int64_t *hint,
                      int64_t *token) {
  if (release)
    return dlock__hashlock_release_answer(r);
  if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
      r->element[0]->type == REDIS_REPLY_INTEGER &&
      r->element[1]->type == REDIS_REPLY_INTEGER) {
    int64_t what = r->element[0]->integer, n = r->element[1]->integer;
    if (what == 1) {
      *token = n;
      return DLOCK_OK;
    }
    if (what == 2)
      return dlock__fail(DLOCK_EREENTRY, "campaign: the candidate leads "
                         "already (term %" PRId64 ")", n);
    *hint = n;
    return DLOCK_EBUSY;
  }
  return dlock__fail_reply(r, "campaign");
}

/* lua/election_resign.lua for owner_id (0: whoever leads). */
static int resign_req(dlock_lock *l, uint64_t owner_id, const char *rid,
                      dlock__req *req) {
  dlock_election *e = (dlock_election *)l;
  dlock_client *c = l->h.client;
  char owner[64] = "", px[24];
  size_t olen = 0;
  if (owner_id) {
    olen = dlock__owner(c, owner_id, owner);
    dlock__hold_id id = {.name = l->h.name, .name_len = l->h.name_len,
                         .field = owner, .field_len = olen};
    dlock__hold_releasing(c, &id); /* a release in flight */
  }
  const char *pub = dlock__publish_cmd(c);
  const char *keys[] = {l->h.name, NULL, e->record.p};
  size_t klens[] = {l->h.name_len, 0, e->record.len};
  const char *args[] = {owner, px, pub, e->lock_channel.p, e->channel.p};
  size_t alens[] = {olen, dlock__fmt_i64(px, dlock__unlock_latch_ms(c)),
                    strlen(pub), e->lock_channel.len, e->channel.len};
  return dlock__release_req(req, DLOCK__SCRIPT_ELECTION_RESIGN,
                            &e->unlock_prefix, rid, 3, keys, klens, 5, args,
                            alens);
}

static int wait_channel(dlock_lock *l, uint64_t owner_id, dlock__buf *channel,
                        dlock__wake_fn **wake) {
  dlock_election *e = (dlock_election *)l;
  *wake = dlock__wake_one; /* a resignation lets one standby in */
  return dlock__buf_add(channel, e->lock_channel.p, e->lock_channel.len);
}

typedef struct force_ctx {
  dlock_lock *l;
} force_ctx;

static int force_build(void *ctx, const char *rid, dlock__req *req) {
  return resign_req(((force_ctx *)ctx)->l, 0, rid, req);
}

/* Remove whoever leads: *deleted 1 removed, 0 nobody led. */
static int force_release(dlock_lock *l, int *deleted) {
  force_ctx ctx = {l};
  redisReply *r;
  int rc = dlock__release_retry(l->h.client, force_build, &ctx, &r);
  if (rc != DLOCK_OK)
    return rc;
  rc = dlock__hashlock_release_answer(r);
  freeReplyObject(r);
  *deleted = rc == DLOCK_OK;
  return rc == DLOCK_ENOTOWNER ? DLOCK_OK : rc;
}

static void destroy(dlock_lock *l) {
  dlock_election *e = (dlock_election *)l;
  dlock__buf_free(&e->token_key);
  dlock__buf_free(&e->record);
  dlock__buf_free(&e->channel);
  dlock__buf_free(&e->lock_channel);
  dlock__buf_free(&e->unlock_prefix);
  free(e->value);
  pthread_mutex_destroy(&e->mu);
}

/* A campaign whose answer was lost (its connection dropped after it was
 * written): did it run? The record says: this candidate leads, in its
 * term (a fenced lock's token cannot be asked after; a term can).
 * DLOCK_OK with *ran 1 (w->token: the term) or 0, or an error. */
static int ask(dlock_lock *lock, dlock__wait *w, int *ran) {
  dlock_election *e = (dlock_election *)lock;
  dlock__kept_error lost; /* the try's */
  dlock__error_keep(&lost);
  dlock_leader l;
  int rc = dlock_election_leader(e, &l);
  if (rc != DLOCK_OK) {
    rc = dlock__fail(rc, "%s; asking whether the campaign ran: %s",
                     dlock__kept_text(&lost), dlock_errmsg());
    dlock__error_drop(&lost);
    return rc;
  }
  dlock__error_drop(&lost);
  *ran = l.mine;
  if (l.mine)
    w->token = l.term; /* its lease started no earlier than w->sent_ms */
  dlock_leader_clear(&l);
  return DLOCK_OK;
}

/* Standbys race for each resignation across processes: no early tries. */
static const dlock__lock_reqs election_reqs = {
    .try_req = try_req,
    .release_req = resign_req,
    .read_reply = read_reply,
    DLOCK__HASHLOCK_REQS,
    .wait_channel = wait_channel,
    .hold_count = dlock__hashlock_count, /* a lost answer is asked */
    .ask = ask, /* by its term */
};

static const dlock__lock_methods election_methods = {
    .kind = "election",
    .noun = "election",
    .caps = DLOCK_CAP_FENCED,
    .size = sizeof(dlock_election),
    .layout = DLOCK__LAYOUT_LOCK_HASH,
    .announces = 1,
    .channel = DLOCK__KEY_ELECTION_CHANNEL,
    .reqs = &election_reqs,
    .force_release = force_release,
    .state = dlock__hashlock_state,
    .destroy = destroy,
};

/* ---- the handle ------------------------------------------------------------------ */

int dlock_election_new(dlock_client *client, const char *name,
                       const dlock_lock_opts *opts, dlock_election **out) {
  dlock__clear_error();
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  dlock_lock *l;
  int rc = dlock__lock_alloc(&election_methods, client, name, opts, &l);
  if (rc != DLOCK_OK)
    return rc;
  dlock_election *e = (dlock_election *)l;
  pthread_mutex_init(&e->mu, NULL);
  l->bound_owner = dlock_owner_id_new();
  const char *n = l->h.name;
  size_t len = l->h.name_len;
  if (dlock__key(&e->token_key, DLOCK__KEY_LOCK_TOKEN, n, len) ||
      dlock__key(&e->record, DLOCK__KEY_ELECTION, n, len) ||
      dlock__key(&e->channel, DLOCK__KEY_ELECTION_CHANNEL, n, len) ||
      dlock__key(&e->lock_channel, DLOCK__KEY_LOCK_CHANNEL, n, len) ||
      dlock__key(&e->unlock_prefix, DLOCK__KEY_UNLOCK_LATCH, n, len)) {
    dlock_lock_free(l);
    return dlock__oom();
  }
  *out = e;
  return DLOCK_OK;
}

dlock_lock *dlock_election_lock(dlock_election *e) {
  return e ? &e->base : NULL;
}

int64_t dlock_election_term(const dlock_election *e) {
  if (e == NULL)
    return 0;
  dlock_lock *l = (dlock_lock *)&e->base;
  if (dlock__hashlock_count(l, l->bound_owner) <= 0)
    return 0;
  return atomic_load(&((dlock_election *)e)->term);
}

void dlock_election_free(dlock_election *e) {
  if (e == NULL)
    return;
  if (dlock_election_term(e) > 0 && !dlock__on_engine_thread())
    dlock_election_resign(e);
  else if (dlock_election_term(e) > 0) /* its lease ends it: not renewed */
    dlock__hashlock_forget(&e->base, e->base.bound_owner);
  dlock_lock_free(&e->base);
}

/* The checks of a call with a value: the handle, the value. */
static int check_value(dlock_election *e, const void *value, size_t len) {
  if (e == NULL)
    return dlock__fail(DLOCK_EINVAL, "election is NULL");
  int rc = dlock__lock_check(&e->base);
  if (rc != DLOCK_OK)
    return rc;
  if (value == NULL && len > 0)
    return dlock__fail(DLOCK_EINVAL, "value is NULL with a length of %zu", len);
  if (len > DLOCK_ELECTION_VALUE_MAX)
    return dlock__fail(DLOCK_EINVAL, "value of %zu bytes: at most %d",
                       len, DLOCK_ELECTION_VALUE_MAX);
  return DLOCK_OK;
}

/* A copy of len bytes and a NUL, or NULL (out of memory: said). */
static char *copy_bytes(const void *p, size_t len) {
  char *copy = malloc(len + 1);
  if (copy == NULL) {
    dlock__fail(DLOCK_ENOMEM, "out of memory");
    return NULL;
  }
  if (len)
    memcpy(copy, p, len);
  copy[len] = '\0';
  return copy;
}

/* Keep value as the candidate's, for the campaign's tries. */
static int set_value(dlock_election *e, const void *value, size_t len) {
  char *copy = copy_bytes(value, len);
  if (copy == NULL)
    return dlock__oom();
  pthread_mutex_lock(&e->mu);
  free(e->value);
  e->value = copy;
  e->value_len = len;
  pthread_mutex_unlock(&e->mu);
  return DLOCK_OK;
}

/* A campaign may start: the handle neither leads nor campaigns. On
 * DLOCK_OK the caller campaigns (e->campaigning set). */
static int campaign_begin(dlock_election *e, const void *value, size_t len) {
  int rc = check_value(e, value, len);
  if (rc != DLOCK_OK)
    return rc;
  if (dlock_election_term(e) > 0)
    return dlock__fail(DLOCK_EREENTRY, "election \"%s\": the candidate leads "
                       "already (term %" PRId64 ")", e->base.h.name,
                       atomic_load(&e->term));
  int idle = 0;
  if (!atomic_compare_exchange_strong(&e->campaigning, &idle, 1))
    return dlock__fail(DLOCK_EBUSY, "election \"%s\": a campaign of this "
                       "handle is under way", e->base.h.name);
  rc = set_value(e, value, len);
  if (rc != DLOCK_OK)
    atomic_store(&e->campaigning, 0);
  return rc;
}

int dlock_election_campaign(dlock_election *e, const void *value,
                            size_t value_len, int64_t wait_ms,
                            int64_t lease_ms, int64_t *term) {
  dlock__clear_error();
  if (term)
    *term = 0;
  int rc = campaign_begin(e, value, value_len);
  if (rc != DLOCK_OK)
    return rc;
  dlock_grant g = {0};
  rc = dlock_acquire_grant(&e->base, wait_ms, lease_ms, &g);
  if (rc == DLOCK_OK) {
    atomic_store(&e->term, g.token);
    if (term)
      *term = g.token;
  }
  atomic_store(&e->campaigning, 0);
  return rc;
}

typedef struct campaign_call {
  dlock_election *e;
  dlock_done_fn *done;
  void *data;
} campaign_call;

static void campaign_done(void *data, const dlock_result *res) {
  campaign_call *cc = data;
  if (res->rc == DLOCK_OK)
    atomic_store(&cc->e->term, res->grant.token);
  atomic_store(&cc->e->campaigning, 0);
  cc->done(cc->data, res);
  free(cc);
}

int dlock_election_campaign_async(dlock_election *e, const void *value,
                                  size_t value_len, int64_t wait_ms,
                                  int64_t lease_ms, dlock_done_fn *done,
                                  void *data, dlock_op *op) {
  dlock__clear_error();
  if (op)
    *op = 0;
  if (done == NULL)
    return dlock__fail(DLOCK_EINVAL, "done is NULL");
  int rc = campaign_begin(e, value, value_len);
  if (rc != DLOCK_OK)
    return rc;
  campaign_call *cc = malloc(sizeof *cc);
  if (cc == NULL) {
    atomic_store(&e->campaigning, 0);
    return dlock__oom();
  }
  *cc = (campaign_call){e, done, data};
  rc = dlock_acquire_async(&e->base, 0, wait_ms, lease_ms, campaign_done, cc,
                           op);
  if (rc != DLOCK_OK) {
    free(cc);
    atomic_store(&e->campaigning, 0);
  }
  return rc;
}

int dlock_election_resign(dlock_election *e) {
  dlock__clear_error();
  if (e == NULL)
    return dlock__fail(DLOCK_EINVAL, "election is NULL");
  int rc = dlock_release(&e->base);
  if (rc == DLOCK_OK || rc == DLOCK_ELOST)
    atomic_store(&e->term, 0);
  return rc;
}

/* Not the leader, as the server says: lost (the client thought it led) or
 * never. */
static int not_leader(dlock_election *e, const char *what) {
  dlock_lock *l = &e->base;
  int64_t count = dlock__hashlock_count(l, l->bound_owner);
  if (count != 0)
    return dlock__fail(DLOCK_ELOST, "%s: the leadership of election \"%s\" "
                       "was lost", what, l->h.name);
  return dlock__fail(DLOCK_ENOTOWNER, "%s: the candidate does not lead "
                     "election \"%s\"", what, l->h.name);
}

int dlock_election_proclaim(dlock_election *e, const void *value,
                            size_t value_len) {
  dlock__clear_error();
  int rc = check_value(e, value, value_len);
  if (rc != DLOCK_OK)
    return rc;
  dlock_lock *l = &e->base;
  if (dlock__hashlock_count(l, l->bound_owner) <= 0)
    return not_leader(e, "proclaim");
  char owner[64];
  const char *pub = dlock__publish_cmd(l->h.client);
  const char *keys[] = {l->h.name, e->record.p};
  size_t klens[] = {l->h.name_len, e->record.len};
  const char *args[] = {owner, value ? value : "", pub, e->channel.p};
  size_t alens[] = {dlock__owner(l->h.client, l->bound_owner, owner),
                    value_len, strlen(pub), e->channel.len};
  redisReply *r;
  rc = dlock__script_call(l->h.client, DLOCK__SCRIPT_ELECTION_PROCLAIM, 2,
                          keys, klens, 4, args, alens, &r);
  if (rc != DLOCK_OK)
    return rc;
  if (r->type == REDIS_REPLY_NIL)
    rc = not_leader(e, "proclaim");
  else if (r->type != REDIS_REPLY_ARRAY)
    rc = dlock__fail_reply(r, "proclaim");
  freeReplyObject(r);
  return rc == DLOCK_OK ? set_value(e, value, value_len) : rc;
}

/* ---- who leads -------------------------------------------------------------------- */

int dlock__election_state_req(dlock_election *e, dlock__req *req) {
  dlock_lock *l = &e->base;
  const char *keys[] = {l->h.name, e->token_key.p, e->record.p};
  size_t klens[] = {l->h.name_len, e->token_key.len, e->record.len};
  return dlock__req_script(req, DLOCK__SCRIPT_ELECTION_STATE, 3, keys, klens,
                           0, NULL, NULL);
}

/* A copy of value as out's. */
static int leader_value(dlock_leader *out, const char *value, size_t len) {
  char *copy = copy_bytes(value, len);
  if (copy == NULL)
    return dlock__oom();
  out->value = copy;
  out->value_len = len;
  return DLOCK_OK;
}

void dlock_leader_clear(dlock_leader *l) {
  if (l == NULL)
    return;
  free((char *)l->value);
  memset(l, 0, sizeof *l);
}

int dlock__election_state_read(dlock_election *e, const redisReply *r,
                               dlock_leader *out) {
  memset(out, 0, sizeof *out);
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 7)
    return dlock__fail_reply(r, "election state");
  redisReply *const *el = r->element;
  for (int i = 0; i < 7; i++) {
    int want = i == 4 || i == 5 ? REDIS_REPLY_STRING : REDIS_REPLY_INTEGER;
    if (el[i]->type != want)
      return dlock__fail(DLOCK_EPROTO, "election state: unexpected reply");
  }
  out->leading = el[0]->integer == 1;
  out->term = el[1]->integer;
  out->version = el[2]->integer;
  out->since_ms = el[3]->integer;
  out->lease_ms = el[6]->integer >= 0 ? el[6]->integer : -1;
  size_t olen = el[4]->len < sizeof out->owner ? el[4]->len
                                                : sizeof out->owner - 1;
  memcpy(out->owner, el[4]->str, olen);
  out->owner[olen] = '\0';
  char mine[64];
  dlock__owner(e->base.h.client, e->base.bound_owner, mine);
  out->mine = out->leading && strcmp(mine, out->owner) == 0;
  return leader_value(out, el[5]->str, el[5]->len);
}

int dlock_election_leader(dlock_election *e, dlock_leader *out) {
  dlock__clear_error();
  if (out)
    memset(out, 0, sizeof *out);
  if (e == NULL || out == NULL)
    return dlock__fail(DLOCK_EINVAL, "%s is NULL", e ? "out" : "election");
  int rc = dlock__lock_check(&e->base);
  if (rc != DLOCK_OK)
    return rc;
  dlock__req req;
  memset(&req, 0, sizeof req);
  rc = dlock__election_state_req(e, &req);
  redisReply *r = NULL;
  if (rc == DLOCK_OK)
    rc = dlock__call(e->base.h.client, &req, &r);
  if (rc != DLOCK_OK)
    return rc;
  rc = dlock__election_state_read(e, r, out);
  freeReplyObject(r);
  return rc;
}
