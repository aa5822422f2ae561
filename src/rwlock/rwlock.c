/* The read-write lock (docs/wire.md, "Read-write lock"): one hash N with a mode
 * field, reader fields U:T and a writer field U:T:write, one timeout key per
 * read hold, and the channel redisson_rwlock:{N} ("0" from a read release
 * wakes one waiter, "1" from a write release wakes all). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "dlock/rwlock.h"
#include "lock/lock_impl.h"

typedef struct rw_half {
  dlock_lock base;
  int is_write;
  dlock__buf channel;      /* redisson_rwlock:{N} */
  dlock__buf unlock_prefix; /* redisson_unlock_latch:{N}: */
  dlock__buf tag;          /* {N}, or N when N contains a "{" */
} rw_half;

struct dlock_rwlock {
  dlock_lock *read, *write;
};

static uint32_t rw_wake(const char *msg, size_t len) {
  return len == 1 && msg[0] == '1' ? UINT32_MAX : 1;
}

/* The caller's fields: reader "U:T", writer "U:T:write", and the reader's
 * timeout-key prefix "{N}:U:T:rwlock_timeout". */
typedef struct who {
  uint64_t owner_id;
  char reader[64];
  size_t reader_len;
  char writer[72];
  size_t writer_len;
  dlock__buf timeout_prefix;
} who;

/* The fields alone (no allocation: a release's answer is recorded with
 * them, which must not fail once the server has released). */
static void who_fields(rw_half *h, uint64_t owner_id, who *w) {
  w->owner_id = owner_id;
  w->reader_len = dlock__owner(h->base.h.client, w->owner_id, w->reader);
  w->writer_len = (size_t)snprintf(w->writer, sizeof w->writer, "%s:write",
                                   w->reader);
  w->timeout_prefix = (dlock__buf){0};
}

static int who_init(rw_half *h, uint64_t owner_id, who *w) {
  who_fields(h, owner_id, w);
  if (dlock__buf_add(&w->timeout_prefix, h->tag.p, h->tag.len) != DLOCK_OK ||
      dlock__buf_printf(&w->timeout_prefix, ":%s:rwlock_timeout", w->reader) !=
          DLOCK_OK) {
    dlock__buf_free(&w->timeout_prefix);
    return dlock__oom();
  }
  return DLOCK_OK;
}

static dlock__hold_id hold_id(rw_half *h, who *w) {
  dlock__hold_id id = {h->base.h.name, h->base.h.name_len,
                       h->is_write ? w->writer : w->reader,
                       h->is_write ? w->writer_len : w->reader_len, NULL, 0};
  return id;
}

/* The caller's fields without the timeout prefix, and its hold's id. */
static int who_id(rw_half *h, uint64_t owner_id, who *w, dlock__hold_id *id) {
  who_fields(h, owner_id, w);
  *id = hold_id(h, w);
  return DLOCK_OK;
}

/* The owner's hold count of this half (the client's registry), -1 lost. */
static int64_t hold_count(dlock_lock *l, uint64_t owner_id) {
  who w;
  dlock__hold_id id;
  if (who_id((rw_half *)l, owner_id, &w, &id) != DLOCK_OK)
    return -1;
  return dlock__hold_count(l->h.client, &id);
}

/* ---- tries and releases as requests (dlock__lock_reqs) --------------- */

static int try_req(dlock_lock *l, uint64_t owner_id, int64_t lease_ms,
                   dlock__req *req) {
  rw_half *h = (rw_half *)l;
  who w;
  int rc = who_init(h, owner_id, &w);
  if (rc != DLOCK_OK)
    return rc;
  char lease[24];
  size_t lease_len = (size_t)snprintf(lease, sizeof lease, "%" PRId64, lease_ms);
  if (h->is_write) {
    const char *keys[] = {l->h.name};
    size_t klens[] = {l->h.name_len};
    const char *args[] = {lease, w.writer, w.reader};
    size_t alens[] = {lease_len, w.writer_len, w.reader_len};
    rc = dlock__req_script(req, DLOCK__SCRIPT_RWLOCK_WRITE_ACQUIRE, 1, keys,
                           klens, 3, args, alens);
  } else {
    const char *keys[] = {l->h.name, w.timeout_prefix.p};
    size_t klens[] = {l->h.name_len, w.timeout_prefix.len};
    const char *args[] = {lease, w.reader, w.writer};
    size_t alens[] = {lease_len, w.reader_len, w.writer_len};
    rc = dlock__req_script(req, DLOCK__SCRIPT_RWLOCK_READ_ACQUIRE, 2, keys,
                           klens, 3, args, alens);
  }
  dlock__buf_free(&w.timeout_prefix);
  return rc;
}

/* An acquire's reply: nil granted, the PTTL of who holds it, or "upgrade"
 * (the caller holds the read lock); a release's: nil none, 0 or 1 one hold
 * released. */
static int read_reply(const redisReply *r, int release, int64_t *hint,
                      int64_t *token) {
  if (release)
    return dlock__hashlock_release_answer(r); /* the same answers */
  *token = 0;
  if (r->type == REDIS_REPLY_NIL)
    return DLOCK_OK;
  if (r->type == REDIS_REPLY_INTEGER) {
    *hint = r->integer;
    return DLOCK_EBUSY;
  }
  if (r->type == REDIS_REPLY_STRING && strcmp(r->str, "upgrade") == 0)
    return dlock__fail(DLOCK_EDEADLK, "the caller holds the read lock; "
                       "upgrading to write would wait for itself (release the "
                       "read lock first)");
  return dlock__fail_reply(r, "acquire");
}

static int release_req(dlock_lock *l, uint64_t owner_id, const char *rid,
                       dlock__req *req) {
  rw_half *h = (rw_half *)l;
  dlock_client *c = l->h.client;
  who w;
  int rc = who_init(h, owner_id, &w);
  if (rc != DLOCK_OK)
    return rc;
  dlock__hold_id id = hold_id(h, &w);
  const char *pub = dlock__publish_cmd(c);
  char px[24], lease[24];
  size_t px_len =
      (size_t)snprintf(px, sizeof px, "%" PRId64, dlock__unlock_latch_ms(c));
  if (h->is_write) {
    const char *keys[] = {l->h.name, NULL};
    size_t klens[] = {l->h.name_len, 0};
    const char *args[] = {lease, w.writer, px, pub, h->channel.p};
    size_t alens[] = {
        (size_t)snprintf(lease, sizeof lease, "%" PRId64, dlock__hold_releasing(c, &id)),
        w.writer_len, px_len, strlen(pub), h->channel.len};
    rc = dlock__release_req(req, DLOCK__SCRIPT_RWLOCK_WRITE_RELEASE,
                            &h->unlock_prefix, rid, 2, keys, klens, 5, args,
                            alens);
  } else {
    dlock__hold_releasing(c, &id);
    const char *keys[] = {l->h.name, NULL, w.timeout_prefix.p, h->tag.p};
    size_t klens[] = {l->h.name_len, 0, w.timeout_prefix.len, h->tag.len};
    const char *args[] = {w.reader, px, pub, h->channel.p};
    size_t alens[] = {w.reader_len, px_len, strlen(pub), h->channel.len};
    rc = dlock__release_req(req, DLOCK__SCRIPT_RWLOCK_READ_RELEASE,
                            &h->unlock_prefix, rid, 4, keys, klens, 4, args,
                            alens);
  }
  dlock__buf_free(&w.timeout_prefix);
  return rc;
}

/* Record the owner's hold of this half: a reader's renewal also pushes its
 * timeout key (lua/rwlock_read_renew.lua). */
static int hold(dlock_lock *l, uint64_t owner_id, int watchdog,
                int64_t lease_ms, int64_t t0_ms, dlock__listener *ln) {
  rw_half *h = (rw_half *)l;
  who w;
  int rc = who_init(h, owner_id, &w);
  if (rc != DLOCK_OK)
    return rc;
  dlock__hold_id id = hold_id(h, &w);
  dlock__renewal renew = {DLOCK__SCRIPT_LOCK_RENEW,
                          DLOCK__SCRIPT_LOCK_RENEW_NODE, NULL, 0};
  if (!h->is_write) {
    renew.script = DLOCK__SCRIPT_RWLOCK_READ_RENEW;
    renew.node_script = DLOCK__SCRIPT_RWLOCK_READ_RENEW_NODE;
    renew.extra = w.timeout_prefix.p;
    renew.extra_len = w.timeout_prefix.len;
  }
  rc = dlock__hold_add(l->h.client, &id, owner_id, &renew, watchdog, lease_ms,
                       t0_ms, ln);
  dlock__buf_free(&w.timeout_prefix);
  return rc;
}

/* A release's reply applied to the owner's hold. */
static int released(dlock_lock *l, uint64_t owner_id, const redisReply *r) {
  rw_half *h = (rw_half *)l;
  dlock_client *c = l->h.client;
  who w;
  dlock__hold_id id;
  int rc = who_id(h, owner_id, &w, &id);
  if (rc != DLOCK_OK)
    return rc;
  const char *what = h->is_write ? "lease of the write lock"
                                 : "lease of the read lock";
  if (r->type == REDIS_REPLY_NIL) {
    int64_t valid = dlock__hold_valid_ms(c, &id);
    int had = dlock__hold_released(c, &id, -1);
    return had ? dlock__fail_gone(what, l->h.name, valid)
               : dlock__fail(DLOCK_ENOTOWNER, "%s lock \"%.100s%s\" is not held by %s",
                             h->is_write ? "write" : "read", DLOCK__NAME(l->h.name),
                             w.reader);
  }
  if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
    /* one hold of ours is gone; the reply says what happened to the lock */
    if (dlock__hold_released(c, &id, 0) == 2)
      return dlock__fail_reported_lost(what, l->h.name);
    return DLOCK_OK;
  }
  return dlock__fail_reply(r, "release");
}

static void forget(dlock_lock *l, uint64_t owner_id) {
  rw_half *h = (rw_half *)l;
  who w;
  dlock__hold_id id;
  if (who_id(h, owner_id, &w, &id) != DLOCK_OK)
    return;
  dlock__hold_released(l->h.client, &id, 0);
}

static int wait_channel(dlock_lock *l, uint64_t owner_id, dlock__buf *channel,
                        dlock__wake_fn **wake) {
  rw_half *h = (rw_half *)l;
  *wake = rw_wake;
  return dlock__buf_add(channel, h->channel.p, h->channel.len);
}

static int force_release(dlock_lock *l, int *deleted) {
  rw_half *h = (rw_half *)l;
  const char *mode = h->is_write ? "write" : "read";
  const char *keys[] = {l->h.name};
  size_t klens[] = {l->h.name_len};
  const char *args[] = {mode, dlock__publish_cmd(l->h.client), h->channel.p};
  size_t alens[] = {strlen(mode), strlen(dlock__publish_cmd(l->h.client)), h->channel.len};
  return dlock__force_release_call(l, DLOCK__SCRIPT_RWLOCK_FORCE_RELEASE, 1, keys,
                                   klens, 3, args, alens, deleted);
}

static int state(dlock_lock *l, uint64_t owner_id, dlock_lock_state *st) {
  rw_half *h = (rw_half *)l;
  who w;
  dlock__hold_id id;
  int rc = who_id(h, owner_id, &w, &id);
  if (rc != DLOCK_OK)
    return rc;
  return dlock__lock_state_query(l, DLOCK__SCRIPT_RWLOCK_STATE, &id,
                                 h->is_write ? "write" : "read", st);
}

/* A guarded write's field: the reader's "U:T" or the writer's "U:T:write". */
static size_t guard_field(dlock_lock *l, uint64_t owner_id, char out[96]) {
  rw_half *h = (rw_half *)l;
  size_t n = dlock__owner(l->h.client, owner_id, out);
  if (h->is_write)
    n += (size_t)snprintf(out + n, 96 - n, ":write");
  return n;
}

static void destroy(dlock_lock *l) {
  rw_half *h = (rw_half *)l;
  dlock__buf_free(&h->channel);
  dlock__buf_free(&h->unlock_prefix);
  dlock__buf_free(&h->tag);
}

/* Both halves: the half decides the script and the hold's field. */
static const dlock__lock_reqs half_reqs = {
    .try_req = try_req,
    .release_req = release_req,
    .read_reply = read_reply,
    .hold = hold,
    .released = released,
    .forget = forget,
    .wait_channel = wait_channel,
    .hold_count = hold_count,
    .guard_field = guard_field,
    .early = 1,
};

/* Defined below; src/catalog/catalog.c lists every kind. */
extern const dlock__lock_methods dlock__write_kind;

/* A half's keys: the pair's channel, unlock latches and tag. */
static int open_half(dlock_lock *l, const dlock_lock_opts *opts) {
  (void)opts;
  rw_half *h = (rw_half *)l;
  h->is_write = l->m == &dlock__write_kind;
  const char *n = l->h.name;
  size_t len = l->h.name_len;
  if (dlock__key(&h->channel, DLOCK__KEY_RWLOCK_CHANNEL, n, len) ||
      dlock__key(&h->unlock_prefix, DLOCK__KEY_UNLOCK_LATCH, n, len) ||
      dlock__key(&h->tag, DLOCK__KEY_TAG, n, len))
    return dlock__oom();
  return DLOCK_OK;
}

const dlock__lock_methods dlock__read_kind = {
    .kind = "read",
    .noun = "read lock",
    .caps = DLOCK_CAP_REENTRANT | DLOCK_CAP_SHARED,
    .size = sizeof(rw_half),
    .layout = DLOCK__LAYOUT_RWLOCK_HASH,
    .announces = 1,
    .channel = DLOCK__KEY_RWLOCK_CHANNEL,
    .reqs = &half_reqs,
    .open = open_half,
    .force_release = force_release,
    .state = state,
    .destroy = destroy,
};

const dlock__lock_methods dlock__write_kind = {
    .kind = "write",
    .noun = "write lock",
    .caps = DLOCK_CAP_REENTRANT,
    .size = sizeof(rw_half),
    .layout = DLOCK__LAYOUT_RWLOCK_HASH,
    .announces = 1,
    .channel = DLOCK__KEY_RWLOCK_CHANNEL,
    .reqs = &half_reqs,
    .open = open_half,
    .force_release = force_release,
    .state = state,
    .destroy = destroy,
};

int dlock_read_lock_new(dlock_client *client, const char *name,
                        const dlock_lock_opts *opts, dlock_lock **out) {
  return dlock__lock_make(&dlock__read_kind, client, name, opts, out);
}

int dlock_write_lock_new(dlock_client *client, const char *name,
                         const dlock_lock_opts *opts, dlock_lock **out) {
  return dlock__lock_make(&dlock__write_kind, client, name, opts, out);
}

int dlock_rwlock_new(dlock_client *client, const char *name,
                     const dlock_lock_opts *opts, dlock_rwlock **out) {
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  dlock_rwlock *rw = calloc(1, sizeof *rw);
  if (rw == NULL)
    return dlock__oom();
  int rc = dlock__lock_make(&dlock__read_kind, client, name, opts, &rw->read);
  if (rc == DLOCK_OK)
    rc = dlock__lock_make(&dlock__write_kind, client, name, opts, &rw->write);
  if (rc != DLOCK_OK) {
    dlock_rwlock_free(rw);
    return rc;
  }
  *out = rw;
  return DLOCK_OK;
}

dlock_lock *dlock_rwlock_read(dlock_rwlock *rw) { return rw ? rw->read : NULL; }

dlock_lock *dlock_rwlock_write(dlock_rwlock *rw) { return rw ? rw->write : NULL; }

void dlock_rwlock_free(dlock_rwlock *rw) {
  if (rw == NULL)
    return;
  dlock_lock_free(rw->read);
  dlock_lock_free(rw->write);
  free(rw);
}
