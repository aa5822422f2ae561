/* The catalog of lock kinds made on one name (catalog.c): what a kind
 * defined outside the library's folders (a test's) calls to join it. */
#ifndef DLOCK_CATALOG_H
#define DLOCK_CATALOG_H

#include "lock/lock_impl.h"

/* Add kind m (its kind name unique, m->open set or NULL) to the catalog
 * for dlock_lock_new() and dlock_kinds(). m must outlive its use.
 * DLOCK_OK; DLOCK_EINVAL for a name the catalog has, or when it is full
 * (64 kinds beyond the built-in ones). */
int dlock__kind_register(const dlock__lock_methods *m);

/* The catalog's i-th kind (built-in ones first, then the registered ones
 * in their order), or NULL past the last: what `dlock watch` listens to
 * and the kinds matrix (tests/test_kinds.c) crosses. */
const dlock__lock_methods *dlock__kind_at(size_t i);

#endif /* DLOCK_CATALOG_H */
