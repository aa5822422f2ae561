/* One name, one kind (docs/errors.md): every ordered pair of two
 * different kinds on one name: every kind in the catalog (dlock_kinds(),
 * read from the library: a kind added there, or registered by a test as
 * counted_kind below, joins the matrix with no change here) and the
 * objects that are not lock kinds (the election, whose leadership is a
 * lock's hash; the latch, the counting semaphore, the permits; the
 * grouped multi-lock, owner fields beside value fields, a layout of its
 * own). The multi-lock and RedLock are made of these kinds.
 * A kind whose layout (its descriptor's) differs from what the name holds
 * is refused with DLOCK_EKIND and the key is left byte for byte as it
 * was; kinds that share a layout behave as that layout allows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "harness.h"

static th_server srv;
static dlock_client *cl, *other; /* the second object is another owner's */

static int register_counted(void); /* below: a kind this file defines */
static void list_kinds(void);

static int suite_init(void) {
  if (register_counted() != DLOCK_OK)
    return 1;
  list_kinds();
  if (th_main_server_start(&srv) != 0)
    return 1;
  if (srv.nnodes)
    printf("\n(on a cluster: %s)\n", srv.url);
  return dlock_client_open(srv.url, NULL, &cl) == DLOCK_OK &&
                 dlock_client_open(srv.url, NULL, &other) == DLOCK_OK
             ? 0
             : 1;
}

static int suite_clean(void) {
  dlock_client_close(other);
  dlock_client_close(cl);
  th_server_stop(&srv);
  return 0;
}

/* What the matrix crosses: every kind in the catalog (dlock_kinds(), a
 * kind registered by a test too: counted_kind below), made by
 * dlock_lock_new, and the objects that are not lock kinds. */
typedef enum obj_type { LOCK_KIND, ELECTION, LATCH, SEMAPHORE, PERMITS, GROUP } obj_type;
typedef struct kind_entry {
  const char *name;
  obj_type type;
  int family; /* one layout: 0 a lock's hash, 1 a read-write lock's hash, 2 a
                 count, 3 a grouped multi-lock's hash */
} kind_entry;
#define MAX_KINDS 32
static kind_entry kinds[MAX_KINDS];
static int nkinds;

/* The kinds every build's catalog lists, and how many of them announce
 * their releases: a floor. The counts below are read from the catalog,
 * so a kind added to it joins every check here with no line changed. */
static const char *const builtin_kinds[] = {
    "reentrant", "fenced", "non-reentrant", "fair", "non-reentrant fair",
    "spin", "read", "write", "semaphore"};
#define NBUILTIN (int)(sizeof builtin_kinds / sizeof builtin_kinds[0])
#define BUILTIN_ANNOUNCING 6 /* all but the spin lock and the fair ones,
                                which tell the next waiter only */

/* How many kinds the catalog lists (a registered one too). */
static int catalog_size(void) {
  int n = 0;
  while (dlock__kind_at((size_t)n) != NULL)
    n++;
  return n;
}

static int family_of(dlock__layout layout) {
  switch (layout) {
  case DLOCK__LAYOUT_LOCK_HASH: return 0;
  case DLOCK__LAYOUT_RWLOCK_HASH: return 1;
  case DLOCK__LAYOUT_COUNT: return 2;
  case DLOCK__LAYOUT_GROUP_HASH: return 3;
  default: return -1;
  }
}

static void list_kinds(void) {
  nkinds = 0;
  const dlock__lock_methods *m;
  for (size_t i = 0; (m = dlock__kind_at(i)) != NULL && nkinds < MAX_KINDS - 5; i++)
    kinds[nkinds++] = (kind_entry){m->kind, LOCK_KIND, family_of(m->layout)};
  kinds[nkinds++] = (kind_entry){"election", ELECTION, 0};
  kinds[nkinds++] = (kind_entry){"latch", LATCH, 2};
  kinds[nkinds++] = (kind_entry){"counting semaphore", SEMAPHORE, 2};
  kinds[nkinds++] = (kind_entry){"permits", PERMITS, 2};
  kinds[nkinds++] = (kind_entry){"group", GROUP, 3};
}

/* The entry named name. */
static int kind_by(const char *name) {
  for (int k = 0; k < nkinds; k++)
    if (strcmp(kinds[k].name, name) == 0)
      return k;
  CU_FAIL_FATAL("a kind the matrix lacks");
  return 0;
}

/* One object of a kind on a name, through its own handle. */
typedef struct object {
  int k;         /* kinds[k] */
  obj_type type;
  dlock_client *client;
  const char *name;
  dlock_lock *lock;
  dlock_election *election; /* lock is its lock */
  dlock_latch *latch;
  dlock_semaphore *sem;
  dlock_permits *permits;
  dlock_permit_id id;
} object;

static object make(dlock_client *c, int k, const char *name) {
  object o = {.k = k, .type = kinds[k].type, .client = c, .name = name};
  int rc = DLOCK_EINVAL;
  switch (o.type) {
  case LOCK_KIND: rc = dlock_lock_new(c, kinds[k].name, name, NULL, &o.lock); break;
  case ELECTION:
    rc = dlock_election_new(c, name, NULL, &o.election);
    o.lock = dlock_election_lock(o.election);
    break;
  case LATCH: rc = dlock_latch_new(c, name, NULL, &o.latch); break;
  case SEMAPHORE: rc = dlock_semaphore_new(c, name, NULL, &o.sem); break;
  case PERMITS: rc = dlock_permits_new(c, name, NULL, &o.permits); break;
  case GROUP: {
    const char *values[] = {"row-1", "row-2"};
    rc = dlock_group_lock_new(c, name, values, NULL, 2, NULL, &o.lock);
    break;
  }
  }
  TH_ASSERT_RC(rc, DLOCK_OK);
  return o;
}

/* Take the object: a hold, a count set, a permit. */
static int take(object *o) {
  int set = 0;
  if (o->type == LOCK_KIND && kinds[o->k].family == 2) { /* a semaphore lock */
    dlock_permits *p = NULL;
    int rc = dlock_permits_new(o->client, o->name, NULL, &p);
    if (rc == DLOCK_OK)
      rc = dlock_permits_try_set_permits(p, 2, 0, &set);
    dlock_permits_free(p);
    return rc != DLOCK_OK ? rc : dlock_acquire(o->lock, 0, 30000);
  }
  switch (o->type) {
  case LATCH:
    return dlock_latch_try_set_count(o->latch, 3, &set);
  case SEMAPHORE: {
    int rc = dlock_semaphore_try_set_permits(o->sem, 2, 0, &set);
    return rc != DLOCK_OK ? rc : dlock_semaphore_acquire(o->sem, 1, 0);
  }
  case PERMITS: {
    int rc = dlock_permits_try_set_permits(o->permits, 2, 0, &set);
    return rc != DLOCK_OK ? rc : dlock_permits_acquire(o->permits, 1, 0, 30000, &o->id);
  }
  default:
    return dlock_acquire(o->lock, 0, 30000);
  }
}

/* The other calls that write: each must be refused as well. */
static void other_writes_refused(object *o) {
  int64_t n;
  int flag;
  if (o->type == LOCK_KIND && kinds[o->k].family == 1)
    return; /* releases and force release refuse a lock's hash by mode */
  if (o->type == LOCK_KIND && kinds[o->k].family == 2) { /* a semaphore lock */
    TH_ASSERT_RC(dlock_force_release(o->lock, &flag), DLOCK_ENOTSUP); /* none */
    return;
  }
  switch (o->type) {
  case LATCH:
    TH_ASSERT_RC(dlock_latch_count_down(o->latch, &n), DLOCK_EKIND);
    TH_ASSERT_RC(dlock_latch_delete(o->latch, &flag), DLOCK_EKIND);
    break;
  case SEMAPHORE:
    TH_ASSERT_RC(dlock_semaphore_release(o->sem, 1), DLOCK_EKIND);
    TH_ASSERT_RC(dlock_semaphore_add_permits(o->sem, 1, &n), DLOCK_EKIND);
    TH_ASSERT_RC(dlock_semaphore_set_permits(o->sem, 5, &n), DLOCK_EKIND);
    TH_ASSERT_RC(dlock_semaphore_drain(o->sem, &n), DLOCK_EKIND);
    break;
  case PERMITS:
    TH_ASSERT_RC(dlock_permits_add_permits(o->permits, 1, &n), DLOCK_EKIND);
    TH_ASSERT_RC(dlock_permits_set_permits(o->permits, 5, &n), DLOCK_EKIND);
    break;
  default:
    TH_ASSERT_RC(dlock_force_release(o->lock, &flag), DLOCK_EKIND);
    break;
  }
}

static void drop(object *o) {
  switch (o->type) {
  case LATCH: {
    int deleted;
    dlock_latch_delete(o->latch, &deleted);
    dlock_latch_free(o->latch);
    break;
  }
  case SEMAPHORE:
    dlock_semaphore_free(o->sem);
    break;
  case PERMITS:
    dlock_permits_free(o->permits);
    break;
  case ELECTION:
    dlock_election_free(o->election); /* resigns */
    break;
  default:
    dlock_release(o->lock);
    dlock_lock_free(o->lock);
    break;
  }
}

/* What name holds: a hash as its sorted fields and values (a large one's
 * table may rehash on any read, which reorders DUMP's bytes, not its
 * content), anything else as DUMP's bytes. */
static redisReply *dump(const char *name) {
  static const char script[] =
      "if redis.call('type', KEYS[1]).ok ~= 'hash' then\n"
      "  return redis.call('dump', KEYS[1])\n"
      "end\n"
      "local all, pairs = redis.call('hgetall', KEYS[1]), {}\n"
      "for i = 1, #all, 2 do pairs[#pairs + 1] = all[i] .. '=' .. all[i + 1] end\n"
      "table.sort(pairs)\n"
      "return 'hash\\n' .. table.concat(pairs, '\\n')\n";
  return th_cmd(&srv, "EVAL %s 1 %s", script, name);
}

static int same_dump(redisReply *a, redisReply *b) {
  return a && b && a->type == REDIS_REPLY_STRING && b->type == REDIS_REPLY_STRING &&
         a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

static void test_every_pair(void) {
  int refused = 0, shared = 0;
  int want_refused = 0;
  for (int a = 0; a < nkinds; a++) {
    for (int b = 0; b < nkinds; b++) {
      if (a == b)
        continue;
      char name[96];
      snprintf(name, sizeof name, "%s:%s:%s", th_name("pair"), kinds[a].name,
               kinds[b].name);
      object first = make(cl, a, name), second = make(other, b, name);
      want_refused += kinds[a].family != kinds[b].family;
      TH_ASSERT_RC(take(&first), DLOCK_OK);
      redisReply *before = dump(name);
      int rc = take(&second);
      if (kinds[a].family != kinds[b].family) {
        if (rc != DLOCK_EKIND)
          fprintf(stderr, "\n  %s then %s: %s\n", kinds[a].name, kinds[b].name,
                  dlock_errname(rc));
        CU_ASSERT_EQUAL(rc, DLOCK_EKIND);
        CU_ASSERT(strstr(dlock_errmsg(), "not a") != NULL ||
                  strstr(dlock_errmsg(), "another type") != NULL);
        other_writes_refused(&second);
        redisReply *after = dump(name);
        if (!same_dump(before, after))
          fprintf(stderr, "\n  %s then %s changed it\n", kinds[a].name,
                  kinds[b].name);
        CU_ASSERT(same_dump(before, after)); /* nothing changed */
        freeReplyObject(after);
        refused++;
      } else if (kinds[a].family != 2) {
        /* one hash layout: they exclude each other (a reader and a writer
         * as a read-write lock's halves) */
        CU_ASSERT(rc == DLOCK_EBUSY);
        shared++;
      }
      freeReplyObject(before);
      drop(&second);
      drop(&first);
      freeReplyObject(th_cmd(&srv, "DEL %s", name));
    }
  }
  /* every catalog kind (built in: 6 of a lock's hash, 2 of a read-write
   * lock's, 1 count; the registered one) and the five other objects (the
   * election, the latch, the counting semaphore, the permits, the group):
   * every ordered pair of two layouts refused. With the built-in ones and
   * counted_kind alone that is 2 * (8 * 2 + 8 * 4 + 8 * 1 + 2 * 4 + 2 * 1 +
   * 4 * 1) = 140, a floor. */
  CU_ASSERT_EQUAL(nkinds, catalog_size() + 5);
  CU_ASSERT(nkinds >= NBUILTIN + 1 + 5);
  CU_ASSERT_EQUAL(refused, want_refused);
  CU_ASSERT(refused >= 140);
  CU_ASSERT(shared > 0);
}

/* What `dlock run --read` beside `dlock run` did: the reader got in and its
 * release deleted the holder's hash. Now the reader is refused and the
 * holder's release succeeds. */
static void test_reader_beside_lock_holder(void) {
  const char *name = th_name("mixed");
  object holder = make(cl, kind_by("reentrant"), name),
         reader = make(other, kind_by("read"), name);
  TH_ASSERT_RC(take(&holder), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(reader.lock, 2000, 30000), DLOCK_EKIND);
  CU_ASSERT(strstr(dlock_errmsg(), "holds a lock (a hash), not a read-write lock") != NULL);
  TH_ASSERT_RC(dlock_release(reader.lock), DLOCK_ENOTOWNER);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 1);
  TH_ASSERT_RC(dlock_release(holder.lock), DLOCK_OK);
  dlock_lock_free(reader.lock);
  dlock_lock_free(holder.lock);
}

/* Every call that reads a name answers a name of another type with
 * DLOCK_EKIND naming what it found (a string, a list, a set, a sorted set,
 * a hash of another kind), and changes nothing. */
static int read_kind(object *o, int64_t *n) {
  dlock_lock_state st;
  dlock_leader leader;
  int64_t a, b;
  switch (o->type) {
  case LATCH: {
    int rc = dlock_latch_get_count(o->latch, n);
    if (rc == DLOCK_EKIND) /* the wait reads it too */
      TH_ASSERT_RC(dlock_latch_await(o->latch, 0), DLOCK_EKIND);
    return rc;
  }
  case SEMAPHORE:
    return dlock_semaphore_available(o->sem, n);
  case PERMITS:
    return dlock_permits_counts(o->permits, &a, &b);
  case ELECTION: {
    int rc = dlock_election_leader(o->election, &leader);
    if (rc == DLOCK_OK)
      dlock_leader_clear(&leader);
    return rc;
  }
  default:
    return dlock_lock_state_get(o->lock, &st);
  }
}

static void test_readers_name_the_type(void) {
  static const struct {
    const char *setup, *says;
  } found[] = {{"SET %s hello", "a string"},
               {"RPUSH %s a", "a list"},
               {"SADD %s a", "a set"},
               {"ZADD %s 1 a", "a sorted set"},
               {"HSET %s mode read", "a read-write lock"},
               {"HSET %s someone:1 1", "a lock (a hash)"},
               {"HSET %s Zm9v someone:1 Zm9v:someone:1:expire_time 1",
                "a grouped multi-lock"}};
  /* the hash a kind reads as its own is not a wrong type for it */
  const char *const readers[] = {"reentrant", "fenced", "fair", "election",
                                 "read", "latch", "counting semaphore",
                                 "permits"};
  int checked = 0;
  for (size_t r = 0; r < sizeof readers / sizeof readers[0]; r++) {
    for (size_t f = 0; f < sizeof found / sizeof found[0]; f++) {
      int k = kind_by(readers[r]);
      int hash_of_its_own = (kinds[k].family == 0 && f == 5) ||
                            (kinds[k].family == 1 && f == 4);
      if (hash_of_its_own)
        continue;
      char name[160];
      snprintf(name, sizeof name, "%s:%s:%zu", th_name("reader"),
               readers[r], f);
      freeReplyObject(th_cmd(&srv, found[f].setup, name));
      redisReply *before = dump(name);
      object o = make(cl, k, name);
      int64_t n = 0;
      int rc = read_kind(&o, &n);
      CU_ASSERT_EQUAL(rc, DLOCK_EKIND);
      CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), found[f].says));
      if (rc != DLOCK_EKIND || strstr(dlock_errmsg(), found[f].says) == NULL)
        fprintf(stderr, "\n  %s over \"%s\": %s (%s)\n", readers[r],
                found[f].setup, dlock_errname(rc), dlock_errmsg());
      redisReply *after = dump(name);
      CU_ASSERT(same_dump(before, after));
      freeReplyObject(before);
      freeReplyObject(after);
      switch (o.type) {
      case LATCH: dlock_latch_free(o.latch); break;
      case SEMAPHORE: dlock_semaphore_free(o.sem); break;
      case PERMITS: dlock_permits_free(o.permits); break;
      case ELECTION: dlock_election_free(o.election); break;
      default: dlock_lock_free(o.lock); break;
      }
      freeReplyObject(th_cmd(&srv, "DEL %s", name));
      checked++;
    }
  }
  CU_ASSERT_EQUAL(checked, 8 * 7 - 5);
}

/* ---- the catalog: a kind chosen by its name ---------------------------- */

/* dlock_lock_new makes every kind dlock_kinds() lists (a hyphen standing
 * for a space), the lock its own constructor makes: same kind, works;
 * an unknown or NULL kind says which there are; a kind's own refusal of
 * an option comes back whole. */
static void test_lock_new_by_kind(void) {
  const char *const *names = dlock_kinds();
  CU_ASSERT_PTR_NOT_NULL_FATAL(names);
  int n = 0;
  for (const char *const *k = names; *k; k++, n++) {
    char name[128];
    snprintf(name, sizeof name, "%s:%s", th_name("by-kind"), *k);
    dlock_lock *l = NULL;
    TH_ASSERT_RC(dlock_lock_new(cl, *k, name, NULL, &l), DLOCK_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(l);
    CU_ASSERT_PTR_EQUAL(dlock_kind_name(*k), *k); /* its own name */
    CU_ASSERT_STRING_EQUAL(dlock_lock_kind(l), *k);
    if (strcmp(*k, "semaphore") == 0) { /* its permits first */
      dlock_permits *p = NULL;
      int set = 0;
      TH_ASSERT_RC(dlock_permits_new(cl, name, NULL, &p), DLOCK_OK);
      TH_ASSERT_RC(dlock_permits_try_set_permits(p, 1, 0, &set), DLOCK_OK);
      dlock_permits_free(p);
    }
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
    dlock_lock_free(l);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
  }
  CU_ASSERT_EQUAL(n, catalog_size()); /* counted_kind (below) among them */
  CU_ASSERT(n >= NBUILTIN + 1);
  for (int i = 0; i < NBUILTIN; i++) /* the built-in ones, by their names */
    CU_ASSERT_PTR_NOT_NULL(dlock_kind_name(builtin_kinds[i]));
  /* a name as dlock_lock_new reads it: a hyphen for a space */
  CU_ASSERT_STRING_EQUAL(dlock_kind_name("non-reentrant-fair"),
                         "non-reentrant fair");
  CU_ASSERT_PTR_NULL(dlock_kind_name("non_reentrant"));
  CU_ASSERT_PTR_NULL(dlock_kind_name(""));
  CU_ASSERT_PTR_NULL(dlock_kind_name(NULL));
  dlock_lock *l = (dlock_lock *)1;
  TH_ASSERT_RC(dlock_lock_new(cl, "non-reentrant-fair", "by-kind:alias", NULL, &l),
               DLOCK_OK);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(l), "non-reentrant fair");
  dlock_lock_free(l);
  TH_ASSERT_RC(dlock_lock_new(cl, "mutex", "by-kind:x", NULL, &l), DLOCK_EINVAL);
  CU_ASSERT_PTR_NULL(l);
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "no lock kind \"mutex\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "\"reentrant\", \"fenced\""));
  TH_ASSERT_RC(dlock_lock_new(cl, NULL, "by-kind:x", NULL, &l), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_lock_new(cl, "fair", "by-kind:x", NULL, NULL), DLOCK_EINVAL);
  dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
  o.spin_max_ms = -1;
  TH_ASSERT_RC(dlock_lock_new(cl, "spin", "by-kind:x", &o, &l), DLOCK_EINVAL);
  CU_ASSERT_STRING_EQUAL(dlock_errmsg(), "the spin options must be >= 0");
  TH_ASSERT_RC(dlock_lock_new(cl, "fair", "", NULL, &l), DLOCK_EINVAL);
}

/* A kind defined here, from the kinds' API alone (lock/lock_impl.h), and
 * registered: it joins the catalog (dlock_kinds, dlock_lock_new) with no
 * other file changed. It holds a reentrant lock of its name and counts
 * its acquires. */
typedef struct counted {
  dlock_lock base;
  dlock_lock *inner;
  int acquires;
} counted;

static int counted_open(dlock_lock *l, const dlock_lock_opts *opts) {
  return dlock_reentrant_lock_new(l->h.client, l->h.name, opts,
                                  &((counted *)l)->inner);
}

static int counted_acquire(dlock_lock *l, uint64_t owner, int64_t wait_ms,
                           int64_t lease_ms, dlock_grant *grant) {
  counted *c = (counted *)l;
  c->acquires++;
  return dlock__lock_run_acquire(c->inner, owner, wait_ms, lease_ms, grant);
}

static int counted_release(dlock_lock *l, uint64_t owner) {
  return dlock__lock_run_release(((counted *)l)->inner, owner);
}

static int counted_state(dlock_lock *l, uint64_t owner, dlock_lock_state *st) {
  dlock_lock *in = ((counted *)l)->inner;
  return in->m->state(in, owner, st);
}

static int counted_force(dlock_lock *l, int *deleted) {
  dlock_lock *in = ((counted *)l)->inner;
  return in->m->force_release(in, deleted);
}

static void counted_destroy(dlock_lock *l) { dlock_lock_free(((counted *)l)->inner); }

static const dlock__lock_methods counted_kind = {
    .kind = "counted",
    .noun = "counted lock",
    .caps = DLOCK_CAP_REENTRANT,
    .size = sizeof(counted),
    .layout = DLOCK__LAYOUT_LOCK_HASH, /* its inner lock's */
    .announces = 1,
    .channel = DLOCK__KEY_LOCK_CHANNEL,
    .open = counted_open,
    .acquire = counted_acquire,
    .release = counted_release,
    .force_release = counted_force,
    .state = counted_state,
    .destroy = counted_destroy,
};

static int register_counted(void) { return dlock__kind_register(&counted_kind); }

static void test_kind_registered_here(void) {
  TH_ASSERT_RC(dlock__kind_register(&counted_kind), DLOCK_EINVAL); /* once */
  int listed = 0;
  for (const char *const *k = dlock_kinds(); *k; k++)
    listed += strcmp(*k, "counted") == 0;
  CU_ASSERT_EQUAL(listed, 1);
  const char *name = th_name("counted");
  dlock_lock *a = NULL, *b = NULL;
  TH_ASSERT_RC(dlock_lock_new(cl, "counted", name, NULL, &a), DLOCK_OK);
  TH_ASSERT_RC(dlock_lock_new(other, "reentrant", name, NULL, &b), DLOCK_OK);
  CU_ASSERT_STRING_EQUAL(dlock_lock_kind(a), "counted");
  TH_ASSERT_RC(dlock_acquire(a, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(b, 0, 30000), DLOCK_EBUSY); /* one lock */
  dlock_lock_state st;
  TH_ASSERT_RC(dlock_lock_state_get(a, &st), DLOCK_OK);
  CU_ASSERT(st.held_by_me && st.hold_count == 1);
  /* inspection reads what it stores (a lock's hash, one holder), and a
   * watch hears its release (its channel, from its descriptor) */
  dlock_inspection *in = NULL;
  TH_ASSERT_RC(dlock_inspect(other, name, NULL, &in), DLOCK_OK);
  CU_ASSERT_STRING_EQUAL(in->kind, "lock");
  CU_ASSERT_EQUAL(in->nholders, 1);
  dlock_inspection_free(in);
  dlock_watcher *w = NULL;
  TH_ASSERT_RC(dlock_watcher_new(other, name, NULL, &w), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(a), DLOCK_OK);
  CU_ASSERT_EQUAL(dlock_watcher_wait(w, 10000), 1);
  dlock_watcher_free(w);
  TH_ASSERT_RC(dlock_acquire(b, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(b), DLOCK_OK);
  CU_ASSERT_EQUAL(((counted *)a)->acquires, 1);
  dlock_lock_free(a);
  dlock_lock_free(b);
}

/* A watch on a name hears every kind whose descriptor says it announces
 * (the catalog's kinds, counted_kind too), a latch's count reaching zero
 * and an election's change, whatever the name holds. */
static void test_watch_hears_every_kind(void) {
  int heard = 0, announcing = 0;
  const dlock__lock_methods *m;
  for (size_t i = 0; (m = dlock__kind_at(i)) != NULL; i++) {
    if (!m->announces)
      continue;
    announcing++;
    char name[128];
    snprintf(name, sizeof name, "%s:%s", th_name("watch"), m->kind);
    object o = make(cl, kind_by(m->kind), name);
    TH_ASSERT_RC(take(&o), DLOCK_OK);
    dlock_watcher *w = NULL;
    TH_ASSERT_RC(dlock_watcher_new(other, name, NULL, &w), DLOCK_OK);
    TH_ASSERT_RC(dlock_release(o.lock), DLOCK_OK);
    int rc = dlock_watcher_wait(w, 10000);
    if (rc != 1)
      fprintf(stderr, "\n  %s: %s\n", m->kind, dlock_errname(rc));
    CU_ASSERT_EQUAL(rc, 1);
    heard += rc == 1;
    dlock_watcher_free(w);
    dlock_lock_free(o.lock);
    freeReplyObject(th_cmd(&srv, "DEL %s", name));
  }
  CU_ASSERT_EQUAL(heard, announcing);
  CU_ASSERT(heard >= BUILTIN_ANNOUNCING + 1); /* and counted_kind */
  const char *name = th_name("watch-latch");
  object latch = make(cl, kind_by("latch"), name);
  TH_ASSERT_RC(take(&latch), DLOCK_OK); /* a count of 3 */
  dlock_watcher *w = NULL;
  TH_ASSERT_RC(dlock_watcher_new(other, name, NULL, &w), DLOCK_OK);
  int64_t left = 0;
  for (int i = 0; i < 3; i++)
    TH_ASSERT_RC(dlock_latch_count_down(latch.latch, &left), DLOCK_OK);
  CU_ASSERT_EQUAL(dlock_watcher_wait(w, 10000), 1);
  dlock_watcher_free(w);
  drop(&latch);
  name = th_name("watch-election");
  dlock_election *e = NULL;
  TH_ASSERT_RC(dlock_election_new(cl, name, NULL, &e), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_campaign(e, "a", 1, 0, 30000, NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_watcher_new(other, name, NULL, &w), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_proclaim(e, "b", 1), DLOCK_OK); /* no release */
  CU_ASSERT_EQUAL(dlock_watcher_wait(w, 10000), 1);
  dlock_watcher_free(w);
  dlock_election_free(e);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("kinds", suite_init, suite_clean);
  CU_add_test(s, "every_pair", test_every_pair);
  CU_add_test(s, "reader_beside_lock_holder", test_reader_beside_lock_holder);
  CU_add_test(s, "readers_name_the_type", test_readers_name_the_type);
  CU_add_test(s, "lock_new_by_kind", test_lock_new_by_kind);
  CU_add_test(s, "kind_registered_here", test_kind_registered_here);
  CU_add_test(s, "watch_hears_every_kind", test_watch_hears_every_kind);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
