/* One name, one kind (docs/errors.md): every ordered pair of the kinds
 * listed below on one name (the election's leadership is a lock's hash;
 * the multi-lock and RedLock are made of these kinds; the grouped
 * multi-lock's hash, owner fields beside value fields, is a layout of its
 * own).
 * A kind whose layout differs from what the name holds is refused with
 * DLOCK_EKIND and the key is left byte for byte as it was; kinds that share
 * a layout behave as that layout allows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "harness.h"

static th_server srv;
static dlock_client *cl, *other; /* the second object is another owner's */

static int suite_init(void) {
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

enum kind {
  REENTRANT, FENCED, FAIR, ONCE, ONCE_FAIR, SPIN, ELECTION, READ, WRITE,
  LATCH, SEMAPHORE, PERMITS, GROUP, NKINDS
};
static const char *const kind_names[NKINDS] = {
    "reentrant", "fenced", "fair", "non-reentrant", "non-reentrant-fair",
    "spin", "election", "read", "write", "latch", "semaphore", "permits",
    "group"};
/* kinds with one layout: 0 a lock's hash, 1 a read-write lock's hash, 2 a
 * count, 3 a grouped multi-lock's hash */
static const int family[NKINDS] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 3};

/* One object of a kind on a name, through its own handle. */
typedef struct object {
  enum kind k;
  dlock_lock *lock;
  dlock_election *election; /* lock is its lock */
  dlock_latch *latch;
  dlock_semaphore *sem;
  dlock_permits *permits;
  dlock_permit_id id;
} object;

static object make(dlock_client *c, enum kind k, const char *name) {
  object o = {.k = k};
  int rc = DLOCK_EINVAL;
  switch (k) {
  case REENTRANT: rc = dlock_reentrant_lock_new(c, name, NULL, &o.lock); break;
  case FENCED: rc = dlock_fenced_lock_new(c, name, NULL, &o.lock); break;
  case FAIR: rc = dlock_fair_lock_new(c, name, NULL, &o.lock); break;
  case SPIN: rc = dlock_spin_lock_new(c, name, NULL, &o.lock); break;
  case ONCE: rc = dlock_non_reentrant_lock_new(c, name, NULL, &o.lock); break;
  case ONCE_FAIR:
    rc = dlock_non_reentrant_fair_lock_new(c, name, NULL, &o.lock);
    break;
  case ELECTION:
    rc = dlock_election_new(c, name, NULL, &o.election);
    o.lock = dlock_election_lock(o.election);
    break;
  case READ: rc = dlock_read_lock_new(c, name, NULL, &o.lock); break;
  case WRITE: rc = dlock_write_lock_new(c, name, NULL, &o.lock); break;
  case LATCH: rc = dlock_latch_new(c, name, NULL, &o.latch); break;
  case SEMAPHORE: rc = dlock_semaphore_new(c, name, NULL, &o.sem); break;
  case PERMITS: rc = dlock_permits_new(c, name, NULL, &o.permits); break;
  case GROUP: {
    const char *values[] = {"row-1", "row-2"};
    rc = dlock_group_lock_new(c, name, values, NULL, 2, NULL, &o.lock);
    break;
  }
  default: break;
  }
  TH_ASSERT_RC(rc, DLOCK_OK);
  return o;
}

/* Take the object: a hold, a count set, a permit. */
static int take(object *o) {
  int set = 0;
  switch (o->k) {
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
  switch (o->k) {
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
  case READ:
  case WRITE:
    break; /* releases and force release refuse a lock's hash by mode */
  default:
    TH_ASSERT_RC(dlock_force_release(o->lock, &flag), DLOCK_EKIND);
    break;
  }
}

static void drop(object *o) {
  switch (o->k) {
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
  for (int a = 0; a < NKINDS; a++) {
    for (int b = 0; b < NKINDS; b++) {
      if (a == b)
        continue;
      char name[96];
      snprintf(name, sizeof name, "%s:%s:%s", th_name("pair"), kind_names[a],
               kind_names[b]);
      object first = make(cl, (enum kind)a, name),
             second = make(other, (enum kind)b, name);
      TH_ASSERT_RC(take(&first), DLOCK_OK);
      redisReply *before = dump(name);
      int rc = take(&second);
      if (family[a] != family[b]) {
        if (rc != DLOCK_EKIND)
          fprintf(stderr, "\n  %s then %s: %s\n", kind_names[a], kind_names[b],
                  dlock_errname(rc));
        CU_ASSERT_EQUAL(rc, DLOCK_EKIND);
        CU_ASSERT(strstr(dlock_errmsg(), "not a") != NULL ||
                  strstr(dlock_errmsg(), "another type") != NULL);
        other_writes_refused(&second);
        redisReply *after = dump(name);
        if (!same_dump(before, after))
          fprintf(stderr, "\n  %s then %s changed it\n", kind_names[a],
                  kind_names[b]);
        CU_ASSERT(same_dump(before, after)); /* nothing changed */
        freeReplyObject(after);
        refused++;
      } else if (family[a] != 2) {
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
  /* ordered pairs */
  CU_ASSERT_EQUAL(refused, 2 * (7 * 2 + 7 * 3 + 2 * 3 + 1 * (7 + 2 + 3)));
  CU_ASSERT(shared > 0);
}

/* What `dlock run --read` beside `dlock run` did: the reader got in and its
 * release deleted the holder's hash. Now the reader is refused and the
 * holder's release succeeds. */
static void test_reader_beside_lock_holder(void) {
  const char *name = th_name("mixed");
  object holder = make(cl, REENTRANT, name), reader = make(other, READ, name);
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
  switch (o->k) {
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
  const enum kind readers[] = {REENTRANT, FENCED, FAIR, ELECTION, READ,
                               LATCH, SEMAPHORE, PERMITS};
  int checked = 0;
  for (size_t r = 0; r < sizeof readers / sizeof readers[0]; r++) {
    for (size_t f = 0; f < sizeof found / sizeof found[0]; f++) {
      int hash_of_its_own = (family[readers[r]] == 0 && f == 5) ||
                            (family[readers[r]] == 1 && f == 4);
      if (hash_of_its_own)
        continue;
      char name[160];
      snprintf(name, sizeof name, "%s:%s:%zu", th_name("reader"),
               kind_names[readers[r]], f);
      freeReplyObject(th_cmd(&srv, found[f].setup, name));
      redisReply *before = dump(name);
      object o = make(cl, readers[r], name);
      int64_t n = 0;
      int rc = read_kind(&o, &n);
      CU_ASSERT_EQUAL(rc, DLOCK_EKIND);
      CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), found[f].says));
      if (rc != DLOCK_EKIND || strstr(dlock_errmsg(), found[f].says) == NULL)
        fprintf(stderr, "\n  %s over \"%s\": %s (%s)\n", kind_names[readers[r]],
                found[f].setup, dlock_errname(rc), dlock_errmsg());
      redisReply *after = dump(name);
      CU_ASSERT(same_dump(before, after));
      freeReplyObject(before);
      freeReplyObject(after);
      switch (o.k) {
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
  const char *const *kinds = dlock_kinds();
  CU_ASSERT_PTR_NOT_NULL_FATAL(kinds);
  int n = 0;
  for (const char *const *k = kinds; *k; k++, n++) {
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
  CU_ASSERT_EQUAL(n, 9);
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

static int counted_force(dlock_lock *l) {
  dlock_lock *in = ((counted *)l)->inner;
  return in->m->force_release(in);
}

static void counted_destroy(dlock_lock *l) { dlock_lock_free(((counted *)l)->inner); }

static const dlock__lock_methods counted_kind = {
    .kind = "counted",
    .noun = "counted lock",
    .caps = DLOCK_CAP_REENTRANT,
    .size = sizeof(counted),
    .open = counted_open,
    .acquire = counted_acquire,
    .release = counted_release,
    .force_release = counted_force,
    .state = counted_state,
    .destroy = counted_destroy,
};

static void test_kind_registered_here(void) {
  TH_ASSERT_RC(dlock__kind_register(&counted_kind), DLOCK_OK);
  TH_ASSERT_RC(dlock__kind_register(&counted_kind), DLOCK_EINVAL);
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
  TH_ASSERT_RC(dlock_release(a), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(b, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(b), DLOCK_OK);
  CU_ASSERT_EQUAL(((counted *)a)->acquires, 1);
  dlock_lock_free(a);
  dlock_lock_free(b);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("kinds", suite_init, suite_clean);
  CU_add_test(s, "every_pair", test_every_pair);
  CU_add_test(s, "reader_beside_lock_holder", test_reader_beside_lock_holder);
  CU_add_test(s, "readers_name_the_type", test_readers_name_the_type);
  CU_add_test(s, "lock_new_by_kind", test_lock_new_by_kind);
  CU_add_test(s, "kind_registered_here", test_kind_registered_here);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
