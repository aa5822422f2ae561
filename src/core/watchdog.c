/* Holds and the watchdog.
 *
 * Every grant this client makes is recorded as a hold keyed by (owner field,
 * name), so a release can tell "the lease ran out" (DLOCK_ELOST: we held it)
 * from "never held" (DLOCK_ENOTOWNER). Holds taken without a lease are also
 * renewed: every watchdog_timeout/3 one tick renews ALL of them, up to BATCH
 * holds per script call (one batch per renewal script). A reply of 0 means
 * the hold is gone: it is marked lost (its release returns DLOCK_ELOST) and
 * the lost-lock callback runs once. A transport or server error keeps the
 * hold and the next tick retries; but once the validity of the last
 * successful renewal is about to pass without a new one, the hold is
 * reported lost too (it may be gone): a timer armed for the earliest
 * hold's validity end, less a margin, tells it before the server can hand
 * the lock to another client (the server's lease started when it ran the
 * renewal, after the client sent it). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "net/topology.h"
#include "base/scripts.h"

#define BATCH 100
/* Renewal calls in flight at most. A tick's calls (10,000 of them for a
 * million holds, each about a third of a millisecond of server time) go
 * out as earlier ones are answered, so a caller's command on the same
 * connection waits behind at most these, not behind all of them (a million
 * holds' tick made acquires wait past the command timeout). */
#define RENEW_INFLIGHT 16
#define MAX_SCRIPTS 8 /* distinct renewal scripts in one tick */

typedef struct hold {
  dlock__map_node node; /* key: field length (1 byte), field, name */
  uint64_t owner_id;
  int64_t count;
  int64_t lease_ms;
  int64_t acquired_ms;  /* the grant's request went out (monotonic) */
  int64_t acquired_us;  /* the hold was recorded (monotonic, microseconds:
                           its duration in the statistics and events) */
  int64_t valid_until_ms;
  int64_t releasing_ms; /* when a release of it was last sent */
  uint64_t epoch;
  dlock__listener *ln;
  char *extra;
  /* sizes and flags packed: 10,000s of holds each keep them (M1) */
  uint32_t extra_len, name_len, label_len; /* names: DLOCK_NAME_MAX */
  int16_t script, node_script; /* its renewal (dlock__renewal) */
  uint8_t field_len;           /* <= 255: the key's first byte says it */
  unsigned watchdog : 1, lost : 1, renewing : 1;
  unsigned in_batch : 1; /* a renewal call points at it: ended meanwhile,
                            it is freed by that call's completion */
  unsigned verify : 1; /* a cluster node's batch found it gone: ask again in
                          a call of its own slot before calling it lost */
  char key[]; /* then the label, when there is one */
} hold;

static const char *hold_field(const hold *h) { return h->key + 1; }
static const char *hold_name(const hold *h) { return h->key + 1 + h->field_len; }
/* The name the application knows the hold by (callbacks, events). */
static const char *hold_label(const hold *h, size_t *len) {
  *len = h->label_len ? h->label_len : h->name_len;
  return h->label_len ? h->key + h->node.klen : hold_name(h);
}

/* The table key for id, in stack or heap memory (free if != stack). Fields
 * may be binary (permit ids), so the field's length comes first. */
static char *make_key(const dlock__hold_id *id, char *stack, size_t n,
                      size_t *klen) {
  *klen = 1 + id->field_len + id->name_len;
  char *k = *klen <= n ? stack : malloc(*klen);
  if (k) {
    k[0] = (char)id->field_len;
    memcpy(k + 1, id->field, id->field_len);
    memcpy(k + 1 + id->field_len, id->name, id->name_len);
  }
  return k;
}

static hold *find(dlock_client *c, const dlock__hold_id *id) {
  char stack[256];
  size_t klen;
  char *key = make_key(id, stack, sizeof stack, &klen);
  if (key == NULL)
    return NULL;
  dlock__map_node *n = dlock__map_get(&c->holds, key, klen);
  if (key != stack)
    free(key);
  return n ? DLOCK__CONTAINER(n, hold, node) : NULL;
}

/* A hold ends: out of the table at once; its memory stays while a renewal
 * call points at it (marked by node.klen = 0), and that call frees it. */
static void drop(dlock_client *c, hold *h) {
  dlock__map_del(&c->holds, &h->node);
  if (h->ln)
    h->ln->unref(h->ln);
  h->ln = NULL;
  free(h->extra);
  h->extra = NULL;
  h->watchdog = 0;
  if (h->in_batch)
    h->node.klen = 0;
  else
    free(h);
}

int dlock__hold_add(dlock_client *c, const dlock__hold_id *id,
                    uint64_t owner_id, const dlock__renewal *r, int watchdog,
                    int64_t lease_ms, int64_t t0_ms, dlock__listener *ln) {
  pthread_mutex_lock(&c->hmu);
  hold *h = find(c, id);
  if (h && h->lost) { /* a fresh grant after a loss starts over */
    drop(c, h);
    h = NULL;
  }
  if (id->field_len > 255)
    goto nomem; /* cannot happen: fields are owners or 16-byte ids */
  if (h == NULL) {
    size_t klen = 1 + id->field_len + id->name_len;
    size_t label_len = id->label ? id->label_len : 0;
    h = calloc(1, sizeof *h + klen + label_len);
    if (h && r->extra_len && (h->extra = malloc(r->extra_len)) == NULL) {
      free(h);
      h = NULL;
    }
    if (h == NULL)
      goto nomem;
    make_key(id, h->key, klen, &klen);
    h->node.key = h->key;
    h->node.klen = klen;
    h->field_len = id->field_len;
    h->name_len = id->name_len;
    if (label_len)
      memcpy(h->key + klen, id->label, label_len);
    h->label_len = label_len;
    h->owner_id = owner_id;
    h->script = r->script;
    h->node_script = r->node_script;
    if (r->extra_len)
      memcpy(h->extra, r->extra, r->extra_len);
    h->extra_len = r->extra_len;
    h->acquired_ms = t0_ms;
    h->acquired_us = dlock__now_us();
    h->epoch = ++c->hold_epoch;
    if (dlock__map_put(&c->holds, &h->node) != DLOCK_OK) {
      free(h->extra);
      free(h);
      goto nomem;
    }
  }
  h->count++;
  h->lease_ms = lease_ms;
  if (ln) {
    ln->ref(ln);
    if (h->ln)
      h->ln->unref(h->ln);
    h->ln = ln;
  }
  if (watchdog)
    h->watchdog = 1;
  if (t0_ms + lease_ms > h->valid_until_ms)
    h->valid_until_ms = t0_ms + lease_ms;
  pthread_mutex_unlock(&c->hmu);
  return DLOCK_OK;
nomem:
  pthread_mutex_unlock(&c->hmu);
  return dlock__fail(DLOCK_ENOMEM, "out of memory recording a hold");
}

int64_t dlock__hold_releasing(dlock_client *c, const dlock__hold_id *id) {
  pthread_mutex_lock(&c->hmu);
  hold *h = find(c, id);
  int64_t lease = h ? h->lease_ms : c->opts.watchdog_timeout_ms;
  if (h)
    h->releasing_ms = dlock__now_ms();
  pthread_mutex_unlock(&c->hmu);
  return lease;
}

int dlock__hold_released(dlock_client *c, const dlock__hold_id *id,
                         int outcome) {
  pthread_mutex_lock(&c->hmu);
  hold *h = find(c, id);
  int had = h == NULL ? 0 : h->lost ? 2 : 1;
  dlock_event ev = {DLOCK_EVENT_RELEASED, NULL, 0, 0, -1, DLOCK_OK, 0};
  char *name = NULL; /* a copy for the event hook */
  if (h && (outcome != 0 || --h->count <= 0)) {
    if (outcome >= 0 && !h->lost) { /* a hold that ends here: how long */
      ev.duration_us = dlock__now_us() - h->acquired_us;
      dlock__hist_add(&c->stats.hold, ev.duration_us);
      size_t len;
      const char *label = hold_label(h, &len);
      if (c->opts.on_event && (name = malloc(len + 1)) != NULL) {
        memcpy(name, label, len);
        ev.name = name;
        ev.name_len = len;
        ev.owner_id = h->owner_id;
      }
    }
    drop(c, h);
  }
  pthread_mutex_unlock(&c->hmu);
  if (name)
    dlock__event(c, &ev); /* outside hmu */
  free(name);
  return had;
}

int64_t dlock__hold_count(dlock_client *c, const dlock__hold_id *id) {
  pthread_mutex_lock(&c->hmu);
  hold *h = find(c, id);
  int64_t n = h == NULL ? 0 : h->lost ? -1 : h->count;
  pthread_mutex_unlock(&c->hmu);
  return n;
}

int64_t dlock__hold_valid_ms(dlock_client *c, const dlock__hold_id *id) {
  pthread_mutex_lock(&c->hmu);
  hold *h = find(c, id);
  int64_t v = h ? h->valid_until_ms - dlock__now_ms() : INT64_MIN;
  pthread_mutex_unlock(&c->hmu);
  return v;
}

int dlock__fail_gone(const char *what, const char *name, int64_t valid_ms) {
  if (valid_ms > 0)
    return dlock__fail(DLOCK_ELOST,
                       "%s \"%.100s%s\" was gone although its lease had %" PRId64
                       " ms to run: deleted by a force release "
                       "(dlock_force_release, `dlock unlock --force`) or by "
                       "another client, or lost by the server (a restart or "
                       "failover without persistence)", what, DLOCK__NAME(name), valid_ms);
  return dlock__fail(DLOCK_ELOST, "%s \"%.100s%s\" expired before the release",
                     what, DLOCK__NAME(name));
}

int dlock__fail_reported_lost(const char *what, const char *name) {
  return dlock__fail(DLOCK_ELOST, "%s \"%.100s%s\" was reported lost before the "
                     "release (it outlived the lease the client knew of; "
                     "released now)", what, DLOCK__NAME(name));
}

void dlock__holds_free(dlock_client *c) {
  size_t slot;
  dlock__map_node *n = dlock__map_next(&c->holds, NULL, &slot);
  while (n) {
    dlock__map_node *next = dlock__map_next(&c->holds, n, &slot);
    hold *h = DLOCK__CONTAINER(n, hold, node);
    if (h->ln)
      h->ln->unref(h->ln);
    free(h->extra);
    free(h);
    n = next;
  }
  dlock__map_free(&c->holds);
}

/* ---- renewal -------------------------------------------------------------- */

typedef struct dlock__renew_call {
  dlock__req req;
  dlock_client *client;
  struct dlock__renew_call *next; /* in the client's queue of unsent calls */
  int64_t t0_ms;               /* sent (its validity counts from it) */
  size_t n;
  int sent;
  int node; /* a cluster node's batch (keys of several slots): a 0 it
               reports is checked again before it counts as a loss */
  hold *hs[BATCH];   /* in_batch: kept in memory until this call ends */
  uint64_t epochs[BATCH];
} batch;

static void send_queued(dlock_client *c);

typedef struct lost_note {
  uint64_t owner_id;
  dlock_lost_reason reason;
  dlock__listener *ln; /* referenced */
  size_t len;
  char name[];
} lost_note;

typedef struct lost_list {
  lost_note **v;
  size_t n, cap;
} lost_list;

/* Mark h lost (hmu held) and remember to tell the user after unlocking. */
static void mark_lost(hold *h, dlock_lost_reason reason, lost_list *out) {
  h->lost = 1;
  h->watchdog = 0;
  h->renewing = 0;
  if (out->n == out->cap) {
    size_t cap = out->cap ? out->cap * 2 : 8;
    lost_note **v = realloc(out->v, cap * sizeof *v);
    if (v == NULL)
      return;
    out->v = v;
    out->cap = cap;
  }
  size_t len;
  const char *label = hold_label(h, &len);
  lost_note *note = malloc(sizeof *note + len);
  if (note == NULL)
    return;
  note->owner_id = h->owner_id;
  note->reason = reason;
  note->ln = h->ln;
  if (note->ln)
    note->ln->ref(note->ln);
  note->len = len;
  memcpy(note->name, label, len);
  out->v[out->n++] = note;
}

static void tell_lost(dlock_client *c, lost_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    lost_note *note = l->v[i];
    dlock__stat_add(&c->stats,
                    note->reason == DLOCK_LOST_EXPIRED     ? DLOCK__ST_LOST_EXPIRED
                    : note->reason == DLOCK_LOST_UNRENEWED ? DLOCK__ST_LOST_UNRENEWED
                                                           : DLOCK__ST_LOST_MAX_HOLD,
                    1);
    if (c->opts.on_lost)
      c->opts.on_lost(c->opts.on_lost_data, note->name, note->len,
                      note->owner_id, note->reason);
    dlock_event ev = {DLOCK_EVENT_LOST, note->name, note->len, note->owner_id,
                      0, DLOCK_OK, note->reason};
    dlock__event(c, &ev);
    if (note->ln) {
      note->ln->lost(note->ln, note->reason);
      note->ln->unref(note->ln);
    }
    free(note);
  }
  free(l->v);
}

static void batch_done(dlock__req *req, redisReply *reply, int status) {
  batch *b = req->data;
  dlock_client *c = b->client;
  lost_list lost = {0};
  /* the answer: one character per hold, '1' renewed, '0' gone */
  int ok = status == DLOCK_OK && reply->type == REDIS_REPLY_STRING &&
           (size_t)reply->len == b->n;
  /* with the replica guard (or durable grants) a renewal extends a hold
   * only when acknowledged like a grant: one the replicas never saw would
   * outlive the copy a promoted replica expires (a partitioned master) */
  char why[512];
  int unacked =
      ok && req->ack_wanted && dlock__ack_missed(c, req, why, sizeof why);
  dlock__stat_add(&c->stats, DLOCK__ST_RENEW_CALLS, 1);
  if (ok && !unacked)
    dlock__stat_max(&c->stats, DLOCK__ST_RENEW_BATCH_MAX, b->n);
  else
    dlock__stat_add(&c->stats, DLOCK__ST_RENEW_FAIL, 1);
  pthread_mutex_lock(&c->hmu);
  for (size_t i = 0; i < b->n; i++) {
    hold *h = b->hs[i];
    h->in_batch = 0;
    if (h->node.klen == 0) { /* released meanwhile */
      free(h);
      continue;
    }
    if (h->epoch != b->epochs[i] || !h->renewing)
      continue; /* released and taken again meanwhile, or told lost */
    h->renewing = 0;
    if (!ok)
      continue; /* transient: the next tick retries */
    int renewed = reply->str[i] == '1';
    if (renewed && unacked)
      continue; /* renewed where no replica saw it: the validity stands */
    if (renewed) {
      dlock__stat_add(&c->stats, DLOCK__ST_RENEWED, 1);
      h->valid_until_ms = b->t0_ms + c->opts.watchdog_timeout_ms;
      h->verify = 0;
    } else if (b->node) {
      /* absent from the node that served its slot when the batch was cut:
       * maybe moved (a slot migration), maybe lost; a call of its own slot
       * follows MOVED and ASK and tells (next tick) */
      h->verify = 1;
    } else if (h->releasing_ms + c->opts.command_timeout_ms <= b->t0_ms)
      mark_lost(h, DLOCK_LOST_EXPIRED, &lost);
    /* else a release of it may have run first on the server (its reply
     * and ours race to the caller): the release's own reply tells a lost
     * lease (DLOCK_ELOST), and a hold that stays is renewed next tick */
  }
  pthread_mutex_unlock(&c->hmu);
  if (reply)
    freeReplyObject(reply);
  int sent = b->sent;
  free(b);
  tell_lost(c, &lost);
  if (sent) {
    c->renew_inflight--;
    send_queued(c);
  }
}

/* Send queued renewal calls while fewer than RENEW_INFLIGHT are out
 * (engine thread). A send that fails completes its call at once, and that
 * completion comes back here: the flag keeps it from recursing (a
 * connection that is down fails the whole queue in one loop). */
static void send_queued(dlock_client *c) {
  if (c->renew_sending || c->net.stopping)
    return;
  c->renew_sending = 1;
  while (c->renew_q && c->renew_inflight < RENEW_INFLIGHT) {
    batch *b = c->renew_q;
    c->renew_q = b->next;
    if (c->renew_q == NULL)
      c->renew_q_tail = NULL;
    b->sent = 1;
    b->t0_ms = b->req.queued_ms = dlock__now_ms();
    c->renew_inflight++;
    dlock__send(c, &b->req);
  }
  c->renew_sending = 0;
}

static void enqueue(dlock_client *c, batch *b) {
  b->next = NULL;
  if (c->renew_q_tail)
    c->renew_q_tail->next = b;
  else
    c->renew_q = b;
  c->renew_q_tail = b;
}

/* The client stops: its unsent renewals end as if refused (engine thread,
 * after the connections' own requests ended). */
void dlock__watchdog_shutdown(dlock_client *c) {
  while (c->renew_q) {
    batch *b = c->renew_q;
    c->renew_q = b->next;
    /* as a request ends: its command freed, then its completion */
    dlock__req_finish(&b->req, NULL, DLOCK_ECLOSED, "client closed");
  }
  c->renew_q_tail = NULL;
}

/* Build one renewal call for the n holds in hs (hmu held); node: as one
 * cluster node's batch, its keys passed as arguments (they may lie in
 * several slots of that node). It is sent after hmu is released: a send
 * that fails completes the batch at once, and its completion takes hmu. */
static batch *make_batch(dlock_client *c, int script, hold **hs, size_t n,
                         int node) {
  batch *b = calloc(1, sizeof *b);
  /* a node batch: ARGV = n, the n keys, then the script's own arguments */
  const char *keys[BATCH], *args[2 + 3 * BATCH];
  size_t klens[BATCH], alens[2 + 3 * BATCH];
  char lease[24], count[24];
  if (b == NULL)
    return NULL;
  b->client = c;
  b->n = n;
  b->node = node;
  size_t a0 = 0;
  if (node) {
    alens[0] = (size_t)snprintf(count, sizeof count, "%zu", n);
    args[0] = count;
    for (size_t i = 0; i < n; i++) {
      args[1 + i] = hold_name(hs[i]);
      alens[1 + i] = hs[i]->name_len;
    }
    a0 = 1 + n;
  }
  alens[a0] = (size_t)snprintf(lease, sizeof lease, "%lld",
                               (long long)c->opts.watchdog_timeout_ms);
  args[a0] = lease;
  for (size_t i = 0; i < n; i++) {
    hold *h = hs[i];
    keys[i] = hold_name(h);
    klens[i] = h->name_len;
    args[a0 + 1 + 2 * i] = hold_field(h);
    alens[a0 + 1 + 2 * i] = h->field_len;
    args[a0 + 2 + 2 * i] = h->extra ? h->extra : "";
    alens[a0 + 2 + 2 * i] = h->extra_len;
    b->hs[i] = h;
    b->epochs[i] = h->epoch;
  }
  /* a node batch: its holds share script, and so its node variant */
  int rc = node ? dlock__req_script(&b->req, hs[0]->node_script, 0, NULL,
                                    NULL, a0 + 1 + 2 * n, args, alens)
          : c->net.topo->slotted
              ? dlock__req_script(&b->req, script, n, keys, klens, 1 + 2 * n,
                                  args, alens)
              : dlock__req_script_unrouted(&b->req, script, n, keys, klens,
                                           1 + 2 * n, args, alens);
  if (rc != DLOCK_OK)
    goto fail;
  if (node) /* to the node of its first key's slot (all share that node) */
    dlock__req_route(&b->req, keys[0], klens[0]);
  b->req.done = batch_done;
  b->req.data = b; /* its t0_ms and queued_ms: when it is sent */
  b->req.refusal_final = 1; /* refused for now: the next tick renews afresh */
  b->req.ack_wanted = c->opts.replica_sync_ms > 0 || c->opts.durable_ms > 0;
  for (size_t i = 0; i < n; i++)
    hs[i]->renewing = hs[i]->in_batch = 1;
  return b;
fail:
  free(b);
  return NULL;
}

typedef struct batch_list {
  batch **v; /* sized for every batch one tick can make */
  size_t n;
} batch_list;

static void keep(batch_list *l, batch *b) {
  if (b)
    l->v[l->n++] = b;
}

typedef struct pending {
  int script;
  size_t n;
  hold *hs[BATCH];
} pending;

/* On a cluster one call may declare keys of one slot only. Holds are
 * grouped by script and by the node that owns their slot, and each group
 * renewed in node batches (keys as arguments, Redis 7); a hold whose node
 * is unknown, or that a node batch found gone, is renewed in a call of its
 * own slot, which follows MOVED and ASK. */
typedef struct slotted {
  int script;
  int group; /* the node's index, or DLOCK__SLOTS + slot for a slot's call */
  hold *h;
} slotted;

static int by_script_group(const void *a, const void *b) {
  const slotted *x = a, *y = b;
  if (x->script != y->script)
    return x->script < y->script ? -1 : 1;
  return x->group < y->group ? -1 : x->group > y->group;
}

static slotted group_of(dlock_client *c, hold *h) {
  int slot = dlock__key_slot(hold_name(h), h->name_len);
  int node = h->verify || h->node_script < 0
                 ? -1
                 : c->net.topo->batch_node(&c->net, slot);
  return (slotted){h->script, node >= 0 ? node : DLOCK__SLOTS + slot, h};
}

static void batch_slotted(dlock_client *c, slotted *v, size_t n,
                          batch_list *ready) {
  qsort(v, n, sizeof *v, by_script_group);
  hold *hs[BATCH];
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    hs[k++] = v[i].h;
    int last = i + 1 == n || v[i + 1].script != v[i].script ||
               v[i + 1].group != v[i].group;
    if (last || k == BATCH) {
      keep(ready,
           make_batch(c, v[i].script, hs, k, v[i].group < DLOCK__SLOTS));
      k = 0;
    }
  }
}

/* How long before its validity end an unrenewed hold is told lost: a
 * twentieth of the lease plus 5 ms, for clock drift between client and
 * server and the timer's own lateness (a 30 s lease: 1.5 s; 1.5 s: 80 ms). */
static int64_t margin(const dlock_client *c) {
  return c->opts.watchdog_timeout_ms / 20 + 5;
}

/* A watchdog hold whose validity is about to pass unrenewed is told lost
 * (its reason: MAX_HOLD once held longer than max_hold_ms): 1, else 0 and
 * *first lowered to its validity end (c->hmu held). Tick and deadline
 * timer alike. */
static int expire_if_due(dlock_client *c, hold *h, int64_t now, int64_t *first,
                         lost_list *lost) {
  int64_t max_hold = c->opts.max_hold_ms;
  if (now >= h->valid_until_ms - margin(c)) {
    mark_lost(h, max_hold > 0 && now - h->acquired_ms >= max_hold
                     ? DLOCK_LOST_MAX_HOLD
                     : DLOCK_LOST_UNRENEWED,
              lost);
    return 1;
  }
  if (h->valid_until_ms < *first)
    *first = h->valid_until_ms;
  return 0;
}

static void deadline(uv_timer_t *t);

/* Arm the deadline timer for first, the earliest validity end among the
 * watchdog holds (INT64_MAX: none), less the margin (engine thread). */
static void arm_deadline(dlock_client *c, int64_t first) {
  if (first == INT64_MAX || c->net.stopping) {
    uv_timer_stop(&c->deadline_timer);
    return;
  }
  int64_t wait = first - margin(c) - dlock__now_ms();
  uv_timer_start(&c->deadline_timer, deadline, wait > 0 ? (uint64_t)wait : 0, 0);
}

/* The earliest hold's validity is about to pass: tell the unrenewed ones
 * lost, then arm for the next. Holds due within half a margin are told
 * with it (up to that much early), so the walks over every hold come at
 * least half a margin apart: a million holds whose validity ends a few
 * microseconds apart, unrenewed, would fire it every millisecond. */
static void deadline(uv_timer_t *t) {
  dlock_client *c = t->data;
  int64_t now = dlock__now_ms() + margin(c) / 2, first = INT64_MAX;
  lost_list lost = {0};
  pthread_mutex_lock(&c->hmu);
  size_t slot;
  for (dlock__map_node *node = dlock__map_next(&c->holds, NULL, &slot); node;
       node = dlock__map_next(&c->holds, node, &slot)) {
    hold *h = DLOCK__CONTAINER(node, hold, node);
    if (h->watchdog && !h->lost)
      expire_if_due(c, h, now, &first, &lost);
  }
  pthread_mutex_unlock(&c->hmu);
  arm_deadline(c, first);
  tell_lost(c, &lost);
}

static void tick(uv_timer_t *t) {
  dlock_client *c = t->data;
  int64_t now = dlock__now_ms(), first = INT64_MAX;
  int64_t max_hold = c->opts.max_hold_ms;
  pending *p = calloc(MAX_SCRIPTS, sizeof *p);
  size_t np = 0;
  lost_list lost = {0};
  batch_list ready = {0};
  if (p == NULL)
    return; /* out of memory: the next tick tries again */
  pthread_mutex_lock(&c->hmu);
  /* a cluster's batches: at worst one per hold */
  int by_slot = c->net.topo->slotted;
  size_t most = by_slot ? c->holds.count + 1
                        : c->holds.count / BATCH + MAX_SCRIPTS + 1;
  ready.v = calloc(most, sizeof *ready.v);
  slotted *sv = by_slot ? calloc(c->holds.count + 1, sizeof *sv) : NULL;
  size_t ns = 0;
  if (ready.v == NULL || (by_slot && sv == NULL)) {
    pthread_mutex_unlock(&c->hmu);
    free(ready.v);
    free(sv);
    free(p);
    return; /* out of memory: the next tick tries again */
  }
  size_t slot;
  for (dlock__map_node *node = dlock__map_next(&c->holds, NULL, &slot); node;
       node = dlock__map_next(&c->holds, node, &slot)) {
    hold *h = DLOCK__CONTAINER(node, hold, node);
    if (!h->watchdog || h->lost)
      continue;
    int too_long = max_hold > 0 && now - h->acquired_ms >= max_hold;
    if (expire_if_due(c, h, now, &first, &lost))
      continue;
    if (h->renewing || too_long)
      continue;
    if (sv) {
      sv[ns++] = group_of(c, h);
      continue;
    }
    size_t i = 0;
    while (i < np && p[i].script != h->script)
      i++;
    if (i == np) {
      if (np == MAX_SCRIPTS)
        continue; /* cannot happen with today's scripts */
      p[np++].script = h->script;
    }
    p[i].hs[p[i].n++] = h;
    if (p[i].n == BATCH) {
      keep(&ready, make_batch(c, p[i].script, p[i].hs, p[i].n, 0));
      p[i].n = 0;
    }
  }
  for (size_t i = 0; i < np; i++)
    if (p[i].n)
      keep(&ready, make_batch(c, p[i].script, p[i].hs, p[i].n, 0));
  if (sv)
    batch_slotted(c, sv, ns, &ready);
  pthread_mutex_unlock(&c->hmu);
  arm_deadline(c, first);
  free(sv);
  for (size_t i = 0; i < ready.n; i++)
    enqueue(c, ready.v[i]);
  send_queued(c);
  free(ready.v);
  free(p);
  tell_lost(c, &lost);
}

/* The ticks come a third of the lease apart. */
static uint64_t tick_period(const dlock_client *c) {
  return (uint64_t)c->opts.watchdog_timeout_ms / 3;
}

void dlock__watchdog_start(dlock_client *c) {
  uv_timer_start(&c->watchdog_timer, tick, tick_period(c), tick_period(c));
}

/* A connection came back: renew now, not at the next tick. The outage ate
 * into every lease, and a failover's new master has seen no renewal since
 * its promotion (a copy replicated then expires a lease after the last one
 * it saw). The tick runs on the next turn of the loop, after the
 * connection's waiting requests are written; the ticks go on from it. */
void dlock__watchdog_soon(dlock_client *c) {
  if (!c->net.stopping && uv_is_active((uv_handle_t *)&c->watchdog_timer))
    uv_timer_start(&c->watchdog_timer, tick, 0, tick_period(c));
}
