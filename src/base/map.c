/* A chained hash table over nodes embedded in their entries (no allocation
 * per entry): channels of the pub/sub waiter and holds of the watchdog. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/map.h"

uint64_t dlock__hash(const void *key, size_t len) {
  /* FNV-1a's basis and prime, 8 bytes a step (a key is an owner id and a
   * name: 40 to 100 bytes, hashed at every acquire and release), each
   * product's high half folded into its low one: the slot is the low
   * bits, and a product's low bits see only its factors' low bits. */
  const unsigned char *p = key;
  uint64_t h = 1469598103934665603ull ^ (uint64_t)len;
  for (; len >= 8; p += 8, len -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 32;
  }
  for (; len > 0; p++, len--)
    h = (h ^ *p) * 1099511628211ull;
  return h ^ (h >> 29);
}

dlock__map_node *dlock__map_get(const dlock__map *m, const void *key,
                                size_t klen) {
  if (m->nslots == 0)
    return NULL;
  uint64_t h = dlock__hash(key, klen);
  for (dlock__map_node *n = m->slots[h & (m->nslots - 1)]; n; n = n->next)
    if (n->hash == h && n->klen == klen && memcmp(n->key, key, klen) == 0)
      return n;
  return NULL;
}

static int grow(dlock__map *m) {
  size_t ns = m->nslots ? m->nslots * 2 : 16;
  dlock__map_node **slots = calloc(ns, sizeof *slots);
  if (slots == NULL)
    return dlock__oom();
  for (size_t i = 0; i < m->nslots; i++) {
    dlock__map_node *n = m->slots[i];
    while (n) {
      dlock__map_node *next = n->next;
      n->next = slots[n->hash & (ns - 1)];
      slots[n->hash & (ns - 1)] = n;
      n = next;
    }
  }
  free(m->slots);
  m->slots = slots;
  m->nslots = ns;
  return DLOCK_OK;
}

int dlock__map_put(dlock__map *m, dlock__map_node *node) {
  if (m->count >= m->nslots && grow(m) != DLOCK_OK)
    return dlock__oom();
  node->hash = dlock__hash(node->key, node->klen);
  dlock__map_node **slot = &m->slots[node->hash & (m->nslots - 1)];
  node->next = *slot;
  *slot = node;
  m->count++;
  return DLOCK_OK;
}

void dlock__map_del(dlock__map *m, dlock__map_node *node) {
  dlock__map_node **p = &m->slots[node->hash & (m->nslots - 1)];
  while (*p && *p != node)
    p = &(*p)->next;
  if (*p) {
    *p = node->next;
    m->count--;
  }
}

void dlock__map_free(dlock__map *m) {
  free(m->slots);
  m->slots = NULL;
  m->nslots = m->count = 0;
}

dlock__map_node *dlock__map_next(const dlock__map *m, dlock__map_node *node,
                                 size_t *slot) {
  if (node && node->next)
    return node->next;
  size_t i = node ? *slot + 1 : 0;
  for (; i < m->nslots; i++)
    if (m->slots[i]) {
      *slot = i;
      return m->slots[i];
    }
  return NULL;
}
