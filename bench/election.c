/* E1: leader election (docs/election.md). The hand-over: two candidates on
 * clients of their own take turns, each resigning after a 1 ms term while
 * the other waits in its campaign; the time from the resignation to the
 * standby's term. The observers: 10,000 observations of one election on
 * one client (its one engine thread), a candidate elected and resigning
 * over and over on another; per term, the time from the campaign's return
 * to the first and to the last observer told. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

typedef struct candidate {
  int id;
  dlock_election *e;
} candidate;

static void *candidate_thread(void *p) {
  candidate *c = p;
  while (!atomic_load(&bench_sh->stop)) {
    int64_t call = bench_now_us();
    if (dlock_election_campaign(c->e, "bench", 5, 1000, 30000, NULL) != DLOCK_OK)
      continue;
    int64_t got = bench_now_us();
    long long rel = atomic_load(&bench_sh->released_us);
    if (rel > call) /* it was waiting when the other resigned */
      bench_sample(got > rel ? got - rel : 0);
    atomic_fetch_add(&bench_sh->counts[c->id], 1);
    bench_spin_us(1000); /* a 1 ms term */
    atomic_store(&bench_sh->released_us, bench_now_us());
    dlock_election_resign(c->e);
    usleep(200);
  }
  return NULL;
}

static void handover(bench_bounds *b) {
  dlock_client *cl[2];
  candidate args[2];
  for (int i = 0; i < 2; i++) {
    cl[i] = bench_open_client(bench_opt.urls[0], 0);
    args[i].id = i;
    int rc = dlock_election_new(cl[i], "bench:e1", NULL, &args[i].e);
    if (rc != DLOCK_OK)
      bench_die("E1 election", rc);
  }
  bench_reset();
  double secs = bench_run_threads(2, candidate_thread, args, sizeof args[0],
                            bench_opt.duration);
  long terms = atomic_load(&bench_sh->counts[0]) + atomic_load(&bench_sh->counts[1]);
  long n = bench_nsamples();
  bench_emit("E1", "terms/s", terms / secs, "1/s", 0);
  /* docs/election.md's goals: a hand-over, and every observer told, in
   * under 1 ms */
  bench_emit("E1", "hand-over p50", bench_pct(bench_sh->samples, n, 50), "us", 1000);
  bench_emit("E1", "hand-over p99", bench_pct(bench_sh->samples, n, 99), "us", 0);
  for (int i = 0; i < 2; i++) {
    dlock_election_free(args[i].e);
    dlock_client_close(cl[i]);
  }
}

/* ---- the observers -------------------------------------------------------- */

#define E1_OBSERVERS 10000

static struct {
  atomic_llong term;   /* the term the candidate is being elected to */
  atomic_int told;     /* observers told of it */
  atomic_llong first_us, last_us;
  atomic_int ended;    /* observers whose last call came */
} obs;

static void observed(void *data, const dlock_result *r) {
  (void)data;
  if (r->election == NULL)
    atomic_fetch_add(&obs.ended, 1);
  if (r->election == NULL || r->election->change != DLOCK_ELECTED ||
      r->election->leader.term != atomic_load(&obs.term))
    return;
  int n = atomic_fetch_add(&obs.told, 1) + 1;
  if (n == 1)
    atomic_store(&obs.first_us, bench_now_us());
  if (n == E1_OBSERVERS)
    atomic_store(&obs.last_us, bench_now_us());
}

/* Wait (bounded) until every observer was told. */
static int all_told(int64_t ms) {
  for (int64_t end = bench_now_us() + ms * 1000; bench_now_us() < end; usleep(50))
    if (atomic_load(&obs.told) >= E1_OBSERVERS)
      return 1;
  return 0;
}

static void observers(bench_bounds *b) {
  dlock_client *watch = bench_open_client(bench_opt.urls[0], 0);
  dlock_client *cand = bench_open_client(bench_opt.urls[0], 0);
  dlock_election *w, *e;
  int rc = dlock_election_new(watch, "bench:e1o", NULL, &w);
  if (rc == DLOCK_OK)
    rc = dlock_election_new(cand, "bench:e1o", NULL, &e);
  if (rc != DLOCK_OK)
    bench_die("E1 observers", rc);
  size_t heap0 = bench_heap_used();
  dlock_op *ops = calloc(E1_OBSERVERS, sizeof *ops);
  for (int i = 0; i < E1_OBSERVERS && rc == DLOCK_OK; i++)
    rc = dlock_election_observe(w, observed, NULL, &ops[i]);
  if (rc != DLOCK_OK)
    bench_die("E1 observe", rc);
  usleep(300000); /* their first state read */
  size_t heap1 = bench_heap_used();
  dlock_leader l;
  rc = dlock_election_leader(e, &l);
  if (rc != DLOCK_OK)
    bench_die("E1 leader", rc);
  int64_t term = l.term;
  dlock_leader_clear(&l);
  int64_t *first = calloc(MAX_SAMPLES, sizeof *first);
  bench_reset();
  long rounds = 0, missed = 0;
  for (int64_t end = bench_now_us() + (int64_t)(bench_opt.duration * 1e6);
       bench_now_us() < end && rounds < MAX_SAMPLES; rounds++) {
    atomic_store(&obs.told, 0);
    atomic_store(&obs.term, term + 1);
    rc = dlock_election_campaign(e, "bench", 5, 0, 30000, &term);
    int64_t got = bench_now_us();
    if (rc != DLOCK_OK)
      bench_die("E1 campaign", rc);
    if (all_told(2000)) {
      int64_t f = atomic_load(&obs.first_us), z = atomic_load(&obs.last_us);
      first[rounds - missed] = f > got ? f - got : 0;
      bench_sample(z > got ? z - got : 0);
    } else {
      missed++;
    }
    dlock_election_resign(e);
  }
  long n = rounds - missed;
  bench_emit("E1", "observers", E1_OBSERVERS, "count", 0);
  bench_emit("E1", "first observer told p50", bench_pct(first, n, 50), "us", 1000);
  bench_emit("E1", "all observers told p50", bench_pct(bench_sh->samples, bench_nsamples(), 50), "us",
       1000);
  bench_emit("E1", "all observers told p99", bench_pct(bench_sh->samples, bench_nsamples(), 99), "us",
       NAN);
  bench_emit("E1", "terms not told to all in 2 s", (double)missed, "count", 0);
  double grown = heap1 > heap0 ? (double)(heap1 - heap0) : 0;
  bench_emit("E1", "memory per observer", grown / E1_OBSERVERS, "bytes", 1024);
  for (int i = 0; i < E1_OBSERVERS; i++)
    dlock_cancel(ops[i]);
  for (int64_t end = bench_now_us() + 5000000;
       atomic_load(&obs.ended) < E1_OBSERVERS && bench_now_us() < end;)
    usleep(1000); /* their ends, before the handle goes */
  free(ops);
  free(first);
  dlock_election_free(e);
  dlock_election_free(w);
  dlock_client_close(cand);
  dlock_client_close(watch);
}

void bench_e1(bench_bounds *b) {
  handover(b);
  observers(b);
}
