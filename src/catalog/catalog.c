/* The catalog of lock kinds made on one name: dlock_lock_new() picks a
 * kind by its name, so a program chooses the lock per resource from its
 * configuration (docs/lock.md). Each kind is its descriptor
 * (dlock__lock_methods, in the kind's own folder); the built-in ones are
 * listed here, and a kind defined elsewhere (a test's) joins them with
 * dlock__kind_register. */
#include <pthread.h>
#include <string.h>

#include "catalog/catalog.h"
#include "dlock/lock.h"

#define MAX_ADDED 64

/* The built-in kinds, one line each, in dlock_kinds() order: X(k) names
 * the descriptor dlock__k_kind defined in the kind's folder. */
#define BUILTIN(X)                                                             \
  X(reentrant)          /* src/lock */                                         \
  X(fenced)             /* src/lock */                                         \
  X(non_reentrant)      /* src/lock */                                         \
  X(fair)               /* src/fair */                                         \
  X(non_reentrant_fair) /* src/fair */                                         \
  X(spin)               /* src/spin */                                         \
  X(read)               /* src/rwlock */                                       \
  X(write)              /* src/rwlock */                                       \
  X(semaphore_lock)     /* src/sync */                                         \
  /* a new kind: one line above this one */

#define DECLARE(k) extern const dlock__lock_methods dlock__##k##_kind;
BUILTIN(DECLARE)
#define ENTRY(k) &dlock__##k##_kind,
static const dlock__lock_methods *const builtin[] = {BUILTIN(ENTRY)};
#define NBUILTIN (sizeof builtin / sizeof builtin[0])

/* The registered kinds after the built-in ones; names[] is what
 * dlock_kinds() returns (NULL-terminated). Written under mu, once per
 * kind; an entry, once written, never changes. */
static struct {
  pthread_mutex_t mu;
  const dlock__lock_methods *added[MAX_ADDED];
  size_t nadded;
  const char *names[NBUILTIN + MAX_ADDED + 1];
  int named;
} cat = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The names, built-in ones first (mu held). */
static void name_all(void) {
  if (cat.named)
    return;
  for (size_t i = 0; i < NBUILTIN; i++)
    cat.names[i] = builtin[i]->kind;
  cat.named = 1;
}

/* a and b name the same kind: equal, a hyphen standing for a space */
static int same_name(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (*a != *b && !((*a == '-' && *b == ' ') || (*a == ' ' && *b == '-')))
      return 0;
  return *a == *b;
}

/* The kind named kind, or NULL (mu held). */
static const dlock__lock_methods *find_locked(const char *kind) {
  for (size_t i = 0; i < NBUILTIN; i++)
    if (same_name(kind, builtin[i]->kind))
      return builtin[i];
  for (size_t i = 0; i < cat.nadded; i++)
    if (same_name(kind, cat.added[i]->kind))
      return cat.added[i];
  return NULL;
}

static const dlock__lock_methods *find(const char *kind) {
  pthread_mutex_lock(&cat.mu);
  const dlock__lock_methods *m = find_locked(kind);
  pthread_mutex_unlock(&cat.mu);
  return m;
}

int dlock__kind_register(const dlock__lock_methods *m) {
  if (m == NULL || m->kind == NULL || m->kind[0] == '\0' || m->size < sizeof(dlock_lock))
    return dlock__fail(DLOCK_EINVAL, "a kind needs a name and a handle size");
  pthread_mutex_lock(&cat.mu);
  int rc = DLOCK_OK;
  if (find_locked(m->kind)) {
    rc = dlock__fail(DLOCK_EINVAL, "the kind \"%.64s\" is in the catalog "
                     "already", m->kind);
  } else if (cat.nadded == MAX_ADDED) {
    rc = dlock__fail(DLOCK_EINVAL, "the catalog of kinds is full (%d "
                     "registered)", MAX_ADDED);
  } else {
    name_all();
    cat.names[NBUILTIN + cat.nadded] = m->kind;
    cat.added[cat.nadded++] = m;
  }
  pthread_mutex_unlock(&cat.mu);
  return rc;
}

const dlock__lock_methods *dlock__kind_at(size_t i) {
  if (i < NBUILTIN)
    return builtin[i];
  pthread_mutex_lock(&cat.mu);
  const dlock__lock_methods *m =
      i - NBUILTIN < cat.nadded ? cat.added[i - NBUILTIN] : NULL;
  pthread_mutex_unlock(&cat.mu);
  return m;
}

const char *const *dlock_kinds(void) {
  pthread_mutex_lock(&cat.mu);
  name_all();
  pthread_mutex_unlock(&cat.mu);
  return cat.names;
}

const char *dlock_kind_name(const char *kind) {
  const dlock__lock_methods *m = kind ? find(kind) : NULL;
  return m ? m->kind : NULL;
}

int dlock_lock_new(dlock_client *client, const char *kind, const char *name,
                   const dlock_lock_opts *opts, dlock_lock **out) {
  dlock__clear_error();
  if (out)
    *out = NULL;
  if (kind == NULL)
    return dlock__fail(DLOCK_EINVAL, "kind is NULL");
  const dlock__lock_methods *m = find(kind);
  if (m == NULL) {
    dlock__buf known = {0};
    const char *const *all = dlock_kinds();
    for (const char *const *k = all; *k; k++)
      if (dlock__buf_add(&known, k == all ? "\"" : ", \"", k == all ? 1 : 3) ||
          dlock__buf_add(&known, *k, strlen(*k)) ||
          dlock__buf_add(&known, "\"", 1)) {
        dlock__buf_free(&known);
        return dlock__oom();
      }
    int rc = dlock__fail(DLOCK_EINVAL, "no lock kind \"%.64s%s\": the kinds "
                         "are %.*s (the multi-lock, grouped multi-lock and "
                         "RedLock are made of other locks: dlock_multi_new, "
                         "dlock_group_lock_new, dlock_redlock_new)", kind,
                         strlen(kind) > 64 ? "..." : "", (int)known.len,
                         known.p);
    dlock__buf_free(&known);
    return rc;
  }
  return dlock__lock_make(m, client, name, opts, out);
}
