/* Client counters (base/counters.h): maxima and histograms. */
#include "base/counters.h"

void dlock__stat_max(dlock__stats *s, dlock__stat k, uint64_t n) {
  uint64_t cur = atomic_load_explicit(&s->v[k], memory_order_relaxed);
  while (n > cur && !atomic_compare_exchange_weak_explicit(
                        &s->v[k], &cur, n, memory_order_relaxed,
                        memory_order_relaxed)) {
  }
}

void dlock__hist_add(dlock__hist *h, int64_t us) {
  if (us < 0)
    us = 0;
  int i = 0;
  while (i < DLOCK__HIST_BUCKETS - 1 && (uint64_t)us > (1ull << i))
    i++;
  atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_us, (uint64_t)us, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}
