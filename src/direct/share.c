/* Whether calls beyond a few under way share connections (docs/
 * threading.md, "Riding or a connection each"). With DLOCK__SHARE_FROM
 * or more calls of a client under way at once, a call may take a
 * direct connection of its own (up to direct_conns) or ride a lane (a
 * shared connection, ride.c). Its own connection costs it its
 * own write and read, and the server one read and one write per call;
 * riding costs a wake-up by the lane's driver, but the server serves a
 * lane's calls in one read and one write. Measured with 16 threads:
 * lanes did 1.1-1.2x the pairs of 16 connections at no more CPU on a
 * quiet machine, 1.4-1.9x beside two CPU hogs; riding all on one
 * connection did 0.7x (the driver's chain of wake-ups), and before
 * lanes, where the server's system calls were dear, riders did 1.5x.
 *
 * So the client rides, and measures: the calls that begin while
 * DLOCK__SHARE_FROM or more are under way ("crowded" calls) are timed, in
 * rounds of SHARE_ROUND of them; a round's first SHARE_WINDOW calls go
 * the current way and the next SHARE_WINDOW the other way, and riding
 * wins unless its mean call was more than SHARE_MARGIN_PCT % slower; two
 * rounds in a row must agree to change. Over TLS nobody rides (not
 * measured yet): a connection each, up to direct_conns. */
#include "direct/direct.h"

#define SHARE_ROUND 65536   /* crowded calls per round */
#define SHARE_WINDOW 1024   /* calls per way measured in a round */
#define SHARE_MARGIN_PCT 10 /* own connections must be this much faster */

void dlock__share_init(dlock__share *s) {
  atomic_init(&s->calls, 0);
  atomic_init(&s->ride, 1); /* until measured otherwise */
  for (int i = 0; i < 2; i++) {
    atomic_init(&s->sum_us[i], 0);
    atomic_init(&s->n[i], 0);
    atomic_init(&s->tried[i], 0);
  }
  atomic_init(&s->against, 0);
}

int dlock__share_rides(int64_t own_us, int64_t ride_us) {
  if (own_us <= 0 || ride_us <= 0)
    return 1;
  return ride_us * 100 <= own_us * (100 + SHARE_MARGIN_PCT);
}

int dlock__share_begin(dlock_client *c, dlock__share_probe *pr) {
  dlock__share *s = &c->direct.share;
  dlock__direct *d = &c->direct;
  int most = c->opts.direct_conns;
  pr->way = -1;
  if (most <= DLOCK__SHARE_FROM || c->net.tls) /* TLS: nobody rides */
    return most;
  if (atomic_load(&d->piped) + atomic_load(&d->active) < DLOCK__SHARE_FROM)
    return atomic_load(&s->ride) ? DLOCK__SHARE_FROM : most;
  uint64_t k = atomic_fetch_add_explicit(&s->calls, 1, memory_order_relaxed);
  pr->phase = (unsigned)(k % SHARE_ROUND);
  int ride = atomic_load(&s->ride);
  if (pr->phase >= SHARE_WINDOW && pr->phase < 2 * SHARE_WINDOW)
    ride = !ride; /* the round's try of the other way */
  if (pr->phase < 2 * SHARE_WINDOW) {
    pr->way = ride;
    pr->t0_us = dlock__now_us();
  }
  return ride ? DLOCK__SHARE_FROM : most;
}

/* The round's two windows are in: compare their mean calls (the
 * accumulators restart for the next round). */
static void share_decide(dlock__share *s) {
  int64_t mean[2];
  for (int i = 0; i < 2; i++) {
    int64_t n = atomic_exchange(&s->n[i], 0);
    int64_t sum = atomic_exchange(&s->sum_us[i], 0);
    mean[i] = n > 0 ? sum / n : 0;
  }
  if (mean[0] == 0 || mean[1] == 0)
    return;
  int ride = dlock__share_rides(mean[0], mean[1]);
  if (ride == atomic_load(&s->ride))
    atomic_store(&s->against, 0);
  else if (atomic_fetch_add(&s->against, 1) >= 1) {
    atomic_store(&s->ride, ride);
    atomic_store(&s->against, 0);
  }
}

void dlock__share_end(dlock_client *c, const dlock__share_probe *pr) {
  if (pr->way < 0)
    return;
  dlock__share *s = &c->direct.share;
  atomic_fetch_add(&s->sum_us[pr->way], dlock__now_us() - pr->t0_us);
  atomic_fetch_add(&s->n[pr->way], 1);
  atomic_fetch_add(&s->tried[pr->way], 1);
  if (pr->phase == 2 * SHARE_WINDOW - 1)
    share_decide(s);
}
