/* A chained hash table with binary keys whose nodes live inside the
 * entries they index (the engine's channels and holds). Not thread-safe:
 * its owner guards it. */
#ifndef DLOCK_CORE_MAP_H
#define DLOCK_CORE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/error.h"

typedef struct dlock__map_node {
  struct dlock__map_node *next;
  uint64_t hash;
  const void *key; /* points into the entry that embeds the node */
  size_t klen;
} dlock__map_node;

typedef struct dlock__map {
  dlock__map_node **slots;
  size_t nslots, count;
} dlock__map;

uint64_t dlock__hash(const void *key, size_t len);
dlock__map_node *dlock__map_get(const dlock__map *m, const void *key,
                                size_t klen);
/* Insert a node whose key/klen are set; the key must not be present yet. */
int dlock__map_put(dlock__map *m, dlock__map_node *node);
void dlock__map_del(dlock__map *m, dlock__map_node *node);
void dlock__map_free(dlock__map *m); /* frees the slots, not the nodes */
/* Iterate: for (n = dlock__map_next(m, NULL, &i); n; n = dlock__map_next(m, n, &i)) */
dlock__map_node *dlock__map_next(const dlock__map *m, dlock__map_node *node,
                                 size_t *slot);

#define DLOCK__CONTAINER(ptr, type, member) \
  ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif /* DLOCK_CORE_MAP_H */
