/* The torture checker: merge every worker's log and verify it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torture.h"

static const char *kind_names[TT_NKINDS] = {
    "lock", "fenced", "fair", "rw", "multi", "redlock", "semaphore",
    "non-reentrant", "non-reentrant-fair", "spin", "group", "election"};
static const char *fault_names[TT_F_COUNT] = {
    "kill", "kill_waiter", "client_kill", "pubsub_kill",
    "stop", "restart", "sleep", "flush", "migrate", "failover", "pause",
    "partition", "clock_forward", "clock_back", "client_clock", "slow"};

static const tt_arena *A; /* for the qsort comparators */

static int by_enter(const void *x, const void *y) {
  int64_t a = A->recs[*(const int64_t *)x].enter;
  int64_t b = A->recs[*(const int64_t *)y].enter;
  return (a > b) - (a < b);
}

static int by_value(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

static int64_t pct(int64_t *v, size_t n, int p) {
  if (n == 0)
    return 0;
  qsort(v, n, sizeof *v, by_value);
  size_t i = (n * (size_t)p) / 100;
  return v[i < n ? i : n - 1];
}

static int told(const tt_rec *r) {
  return (atomic_load(&r->flags) & (TT_R_LOST | TT_R_ELOST)) != 0;
}

/* When f's process was first stopped by the pause fault in its section,
 * no later than `until` (ns), or 0 when it was not. A pause's times are
 * read before its SIGSTOP and before its SIGCONT: a section entered
 * between the two was entered before the stop landed (a stopped process
 * enters nothing) and stopped in it, at its entry at the latest. */
static int64_t paused_at(const tt_arena *a, const tt_rec *f, int64_t until) {
  pid_t pid = a->slots[f->slot].pid;
  int n = atomic_load(&a->npauses);
  int64_t at = 0;
  for (int i = 0; i < n && i < 1024; i++) {
    int64_t from = a->pauses[i].from;
    if (a->pauses[i].pid != pid || a->pauses[i].to <= f->enter || from > until)
      continue;
    if (from < f->enter)
      from = f->enter; /* the stop caught it just after it entered */
    if (at == 0 || from < at)
      at = from;
  }
  return at;
}

/* 1 when slot's process was stopped by the pause fault at some moment
 * between from and to (ns) */
static int stopped_between(const tt_arena *a, int slot, int64_t from,
                           int64_t to) {
  pid_t pid = a->slots[slot].pid;
  int n = atomic_load(&a->npauses);
  for (int i = 0; i < n && i < 1024; i++)
    if (a->pauses[i].pid == pid && a->pauses[i].from < to &&
        a->pauses[i].to > from)
      return 1;
  return 0;
}

/* 1 when a fault that can lose a master's latest writes (a failover, a
 * restart, a stop, a partition) was made between from and to (ns): a fair
 * queue's joins are not waited for by the replica guard, so the order a
 * promoted replica has may be older than what a queue read showed. */
static int lossy_between(const tt_arena *a, int64_t from, int64_t to) {
  int n = atomic_load(&a->nlosses);
  for (int i = 0; i < n && i < 1024; i++)
    if (a->losses[i].to > from && a->losses[i].from < to)
      return 1;
  return 0;
}

/* exclusive sections (and, for rw, writers against everyone): sections in
 * enter order; a section that enters before the furthest-reaching earlier
 * one has left overlaps it. Every overlapping pair is found this way at
 * least once (the later of the two meets a "furthest" section that overlaps
 * it too), so the count is zero exactly when there is no overlap. */
static void check_exclusion(const tt_arena *a, int64_t *idx, size_t n,
                            tt_result *res) {
  int64_t far = -1, far_reader = -1;
  for (size_t i = 0; i < n; i++) {
    const tt_rec *r = &a->recs[idx[i]];
    int reader = (atomic_load(&r->flags) & TT_R_READ) != 0;
    if (far >= 0 && a->recs[far].exit > r->enter) {
      const tt_rec *f = &a->recs[far];
      if (!(reader && (atomic_load(&f->flags) & TT_R_READ))) {
        int64_t lost_at = atomic_load(&f->lost_at);
        if (paused_at(a, f, r->enter))
          res->paused_overlaps++;
        else if ((lost_at == 0 || lost_at > r->enter) &&
                 res->untold_overlaps++ < 3)
          fprintf(stderr, "torture: untold overlap: slot %d (flags %#x) in "
                  "%.3f-%.3f s, told %.3f s; slot %d (flags %#x) in "
                  "%.3f-%.3f s\n", f->slot, (unsigned)atomic_load(&f->flags),
                  f->enter / 1e9, f->exit / 1e9, lost_at / 1e9, r->slot,
                  (unsigned)atomic_load(&r->flags), r->enter / 1e9,
                  r->exit / 1e9);
        if (told(f))
          res->reported_overlaps++;
        else if (res->overlaps++ < 3)
          fprintf(stderr, "torture: overlap: slot %d (flags %#x) in "
                  "%.3f-%.3f s, released %.3f; slot %d (flags %#x) in "
                  "%.3f-%.3f s%s\n", f->slot, (unsigned)atomic_load(&f->flags),
                  f->enter / 1e9, f->exit / 1e9, f->done / 1e9, r->slot,
                  (unsigned)atomic_load(&r->flags), r->enter / 1e9,
                  r->exit / 1e9,
                  stopped_between(a, r->slot, r->invoke, r->enter)
                      ? " (its worker stopped in its acquire)" : "");
      }
    }
    if (reader && far_reader >= 0 && a->recs[far_reader].exit > r->enter)
      res->shared_sections++; /* readers did share: the check is not vacuous */
    if (far < 0 || r->exit > a->recs[far].exit)
      far = idx[i];
    if (reader && (far_reader < 0 || r->exit > a->recs[far_reader].exit))
      far_reader = idx[i];
  }
}

/* most sections open at once (sweep over enter/exit events) */
/* With paused != 0, a section whose process was stopped in it counts as
 * left when it was stopped: nothing tells a stopped process that its
 * permit's lease ran out (the moments over the limit that this removes are
 * the caller's to count apart). */
static int64_t max_concurrent(const tt_arena *a, int64_t *idx, size_t n,
                              int readers_only, int64_t limit, int64_t *over,
                              int paused) {
  int64_t *ev = malloc(2 * n * sizeof *ev);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const tt_rec *r = &a->recs[idx[i]];
    if (readers_only && !(atomic_load(&r->flags) & TT_R_READ))
      continue;
    int64_t stopped = paused ? paused_at(a, r, r->exit) : 0;
    /* enter as odd (+1), exit as even (-1): at equal times exits first */
    ev[m++] = r->enter * 2 + 1;
    ev[m++] = (stopped ? stopped : r->exit) * 2;
  }
  qsort(ev, m, sizeof *ev, by_value);
  int64_t cur = 0, best = 0;
  for (size_t i = 0; i < m; i++) {
    cur += (ev[i] & 1) ? 1 : -1;
    if (cur > best)
      best = cur;
    if (limit > 0 && cur > limit && (ev[i] & 1))
      (*over)++;
  }
  free(ev);
  return best;
}

/* the attempt of slot s in progress while a queue read ran [sent, replied] */
static int64_t attempt_at(const tt_arena *a, int64_t **by_slot, int *nby_slot,
                          int s, int64_t sent, int64_t replied) {
  int64_t found = -1;
  /* a slot's attempts come one after another (one thread's): those begun
   * by the reply are a prefix, found by bisection, and of them only the
   * last few can reach the read (a long run has thousands per slot and
   * hundreds of thousands of reads) */
  int lo = 0, hi = nby_slot[s];
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (a->recs[by_slot[s][mid]].invoke <= replied)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (int i = lo - 1; i >= 0; i--) {
    const tt_rec *r = &a->recs[by_slot[s][i]];
    int64_t end = r->enter ? r->enter : r->done ? r->done : INT64_MAX;
    if (r->enter != 0 && end < sent)
      break; /* granted and through before the read: so are the earlier */
    if (r->invoke <= replied && (r->enter == 0 || end >= sent)) {
      if (r->enter == 0 && r->rc != 0 && end < sent)
        continue;
      if (found >= 0)
        return -2; /* ambiguous: two attempts touch the window */
      found = by_slot[s][i];
    }
  }
  return found;
}

/* x (slot sx, attempt ax) was ahead of y (slot sy) in queue read k, yet y
 * got in first. That is no FIFO fault when x left the queue without being
 * granted: its slot passed before it refreshed it (a stalled machine), it
 * was purged as dead, and it queued again at the tail. A later read that
 * shows x's same attempt out of the queue or behind y proves it, if it was
 * made before y left its section: x cannot have been granted by then. */
static int requeued(const tt_arena *a, int64_t **by_slot, int *nby_slot,
                    const tt_snapshot *snaps, size_t ns, size_t k, int sx,
                    int64_t ax, int sy, const tt_rec *y) {
  for (size_t k2 = k + 1; k2 < ns && snaps[k2].replied <= y->exit; k2++) {
    const tt_snapshot *q = &snaps[k2];
    if (attempt_at(a, by_slot, nby_slot, sx, q->sent, q->replied) != ax)
      continue;
    int px = -1, py = -1;
    for (int i = 0; i < q->n; i++) {
      if (q->slots[i] == sx && px < 0)
        px = i;
      if (q->slots[i] == sy && py < 0)
        py = i;
    }
    if (px < 0 || (py >= 0 && px > py))
      return 1;
  }
  return 0;
}

/* The out-of-order pairs of attempts seen so far: each pair is one
 * inversion however many queue reads show it (fifo_inversions). */
typedef struct pair_set {
  int64_t (*v)[2];
  size_t n, cap;
} pair_set;

/* 1 when (x, y) was seen before, else 0 (and it is now). */
static int seen_pair(pair_set *s, int64_t x, int64_t y) {
  for (size_t i = 0; i < s->n; i++)
    if (s->v[i][0] == x && s->v[i][1] == y)
      return 1;
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    int64_t(*v)[2] = realloc(s->v, cap * sizeof *v);
    if (v == NULL)
      return 1; /* out of memory: counted as seen */
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n][0] = x;
  s->v[s->n][1] = y;
  s->n++;
  return 0;
}

static void check_fifo(const tt_opts *o, const tt_arena *a,
                       const tt_snapshot *snaps, size_t ns, int64_t nrecs,
                       tt_result *res) {
  pair_set seen = {NULL, 0, 0};
  int nslots = atomic_load(&a->nslots);
  int *nby = calloc((size_t)nslots, sizeof *nby);
  int64_t **by = calloc((size_t)nslots, sizeof *by);
  for (int64_t i = 0; i < nrecs; i++)
    nby[a->recs[i].slot]++;
  for (int s = 0; s < nslots; s++)
    by[s] = malloc(((size_t)nby[s] + 1) * sizeof **by), nby[s] = 0;
  for (int64_t i = 0; i < nrecs; i++) {
    int s = a->recs[i].slot;
    by[s][nby[s]++] = i;
  }
  for (size_t k = 0; k < ns; k++) {
    const tt_snapshot *q = &snaps[k];
    int64_t at[32];
    for (int i = 0; i < q->n; i++)
      at[i] = q->slots[i] < 0 ? -1
                              : attempt_at(a, by, nby, q->slots[i], q->sent, q->replied);
    for (int i = 0; i < q->n; i++)
      for (int j = i + 1; j < q->n; j++) {
        if (at[i] < 0 || at[j] < 0)
          continue;
        const tt_rec *x = &a->recs[at[i]], *y = &a->recs[at[j]];
        /* both granted and alive: the earlier in the queue goes first */
        if (x->enter == 0 || y->enter == 0 ||
            (atomic_load(&x->flags) & TT_R_KILLED))
          continue;
        res->fifo_checked++;
        if (y->enter >= x->enter)
          continue;
        if (requeued(a, by, nby, snaps, ns, k, q->slots[i], at[i], q->slots[j], y))
          res->fifo_requeued++;
        else if (lossy_between(a, x->invoke, y->enter))
          res->fifo_lost++; /* the queue's order went with a master's writes */
        else if (o->jvm && a->slots[q->slots[i]].proc % 2 == 1)
          res->fifo_java_passed++;
        else if (res->fifo_violations++, !seen_pair(&seen, at[i], at[j]) &&
                 res->fifo_inversions++ < 5)
          fprintf(stderr, "torture: out of order: slot %d (worker %d, invoke %"
                  PRId64 " enter %" PRId64 "%s) ahead of slot %d (worker %d, "
                  "invoke %" PRId64 " enter %" PRId64 ") in the queue read at %"
                  PRId64 "..%" PRId64 " ms\n", q->slots[i],
                  a->slots[q->slots[i]].proc, x->invoke / 1000000,
                  x->enter / 1000000,
                  stopped_between(a, x->slot, x->invoke, x->enter)
                      ? ", its worker stopped in its wait" : "",
                  q->slots[j], a->slots[q->slots[j]].proc,
                  y->invoke / 1000000, y->enter / 1000000, q->sent / 1000000,
                  q->replied / 1000000);
      }
  }
  for (int s = 0; s < nslots; s++)
    free(by[s]);
  free(by);
  free(nby);
  free(seen.v);
}

/* --kind election: terms and what the observers were told. Granted terms
 * are unique and grow from one leader to the next; each observer's events
 * come in order ((term, version), a vacancy after its term's
 * proclamations), and no granted term falls between two events of one
 * observer unless the later one says resync (its subscription was made
 * again: changes in between may be missing). Under faults that can lose
 * the counter (a restart without data; a partition without the replica
 * guard; a Sentinel failover, whose old master may take a grant that one
 * replica acknowledged and the promoted one never got) the terms may
 * repeat: counted, not violations. */
static int64_t obs_key(const tt_obs_ev *e, int64_t *sub) {
  *sub = e->change == 3 /* DLOCK_VACANT */ ? INT64_MAX : e->version;
  return e->term;
}

static int by_token(const void *x, const void *y) {
  int64_t a = A->recs[*(const int64_t *)x].token;
  int64_t b = A->recs[*(const int64_t *)y].token;
  return (a > b) - (a < b);
}

/* The first of the n sorted values above v (n when none is). */
static size_t first_above(const int64_t *v, size_t n, int64_t x) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (v[mid] <= x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static void check_election(const tt_opts *o, const tt_arena *a,
                           const int64_t *idx, size_t n, tt_result *res) {
  int64_t *terms = malloc((n + 1) * sizeof *terms);
  for (size_t i = 0; i < n; i++) {
    const tt_rec *p = i ? &a->recs[idx[i - 1]] : NULL, *r = &a->recs[idx[i]];
    /* r's term older than the one before it: a leader that enters after a
     * newer term came and went holds a spent grant (its campaign's answer
     * was asked for late), and must be told so */
    if (p && p->exit <= r->enter && p->token >= r->token && !told(r) &&
        res->terms_backwards++ < 3)
      fprintf(stderr, "torture: term %" PRId64 " (slot %d) after term %"
              PRId64 " (slot %d)\n", r->token, r->slot, p->token, p->slot);
  }
  /* the records in term order (their terms in terms[]) */
  int64_t *by_term = malloc((n + 1) * sizeof *by_term);
  memcpy(by_term, idx, n * sizeof *by_term);
  qsort(by_term, n, sizeof *by_term, by_token);
  for (size_t i = 0; i < n; i++)
    terms[i] = a->recs[by_term[i]].token;
  for (size_t i = 1; i < n; i++)
    res->terms_repeated += terms[i] == terms[i - 1];
  res->observers = atomic_load(&a->nobs);
  if (res->observers > TT_MAX_OBS)
    res->observers = TT_MAX_OBS;
  for (int k = 0; k < res->observers; k++) {
    const tt_obs *ob = &a->obs[k];
    int64_t m = atomic_load(&ob->n);
    res->observed += m;
    for (int64_t j = 1; j < m; j++) {
      const tt_obs_ev *e0 = &ob->ev[j - 1], *e1 = &ob->ev[j];
      if (e1->resync) {
        res->observed_resyncs++;
        continue;
      }
      int64_t s0, s1, t0 = obs_key(e0, &s0), t1 = obs_key(e1, &s1);
      if ((t1 < t0 || (t1 == t0 && s1 <= s0)) &&
          res->observed_disorder++ < 3)
        fprintf(stderr, "torture: observer %d: term %" PRId64 "/%" PRId64
                " after %" PRId64 "/%" PRId64 "\n", k, t1, s1, t0, s0);
      /* granted strictly between, by a campaign under way between the
       * two events (a server that lost its counter grants old terms
       * again: those of another time do not count) */
      size_t i = first_above(terms, n, t0);
      for (; i < n && terms[i] < t1; i++) {
        const tt_rec *r = &a->recs[by_term[i]];
        if (r->enter >= e0->at && r->invoke <= e1->at &&
            res->observed_missing++ < 3)
          fprintf(stderr, "torture: observer %d missed term %" PRId64
                  " (between %" PRId64 " and %" PRId64 ")\n", k, terms[i],
                  t0, t1);
      }
    }
  }
  free(terms);
  free(by_term);
  int lossy = (o->nemesis & TT_F_RESTART) ||
              ((o->nemesis & TT_F_PARTITION) && o->replica_sync_ms == 0) ||
              (o->sentinel && (o->nemesis & TT_F_FAILOVER));
  if (!lossy)
    res->violations += res->terms_repeated + res->terms_backwards;
  res->violations += res->observed_disorder + res->observed_missing;
}

/* clock-forward: for each hold told lost after a jump (its lost callback,
 * or DLOCK_ELOST from its release), the time from the latest jump before
 * it. */
static void told_after_jumps(const tt_arena *a, const int64_t *idx, size_t n,
                             tt_result *res) {
  int nj = atomic_load(&a->njumps);
  for (size_t i = 0; i < n; i++) {
    const tt_rec *r = &a->recs[idx[i]];
    /* told: the lost callback, else DLOCK_ELOST from the release */
    int64_t lost = atomic_load(&r->lost_at);
    if (lost == 0 && (atomic_load(&r->flags) & TT_R_ELOST))
      lost = r->done;
    int64_t jump = 0;
    for (int j = 0; j < nj && j < 256; j++)
      if (a->jumps[j] <= lost && a->jumps[j] > jump)
        jump = a->jumps[j];
    if (lost == 0 || jump == 0)
      continue;
    res->told_after_jump++;
    if ((lost - jump) / 1000 > res->max_told_after_jump_us)
      res->max_told_after_jump_us = (lost - jump) / 1000;
  }
}

void tt_check(const tt_opts *o, tt_arena *a, const tt_snapshot *snaps,
              size_t nsnaps, tt_result *res) {
  A = a;
  int64_t nrecs = atomic_load(&a->nrecs);
  if (nrecs > TT_MAX_RECS)
    nrecs = TT_MAX_RECS;
  int64_t *idx = malloc(((size_t)nrecs + 1) * sizeof *idx);
  int64_t *waits = malloc(((size_t)nrecs + 1) * sizeof *waits);
  int64_t *hand = malloc(((size_t)nrecs + 1) * sizeof *hand);
  size_t n = 0, nw = 0, nh = 0;
  res->attempts = nrecs;
  for (int64_t i = 0; i < nrecs; i++) {
    tt_rec *r = &a->recs[i];
    if (r->enter == 0) {
      if (r->rc != 0 && r->rc != -100 && r->done > r->invoke &&
          (r->done - r->invoke) / 1000 > res->max_fail_us)
        res->max_fail_us = (r->done - r->invoke) / 1000;
      continue;
    }
    if (r->exit == 0) /* still open: cannot happen after a clean stop */
      r->exit = r->enter;
    idx[n++] = i;
    waits[nw++] = (r->enter - r->invoke) / 1000;
    if (told(r) && res->lost_reports++ < 5)
      fprintf(stderr, "torture: told: slot %d flags %#x section %" PRId64
              " us, release %" PRId64 " us\n", r->slot,
              (unsigned)atomic_load(&r->flags), (r->exit - r->enter) / 1000,
              (r->done - r->exit) / 1000);
    if (atomic_load(&r->flags) & TT_R_KILLED)
      res->killed_in_section++;
  }
  res->sections = (int64_t)n;
  res->java_sections = atomic_load(&a->java_sections);
  qsort(idx, n, sizeof *idx, by_enter);

  int shared = o->kind == TT_SEMAPHORE;
  if (shared) {
    int64_t over = 0, over_all = 0;
    res->max_holders = max_concurrent(a, idx, n, 0, o->permits, &over_all, 0);
    (void)max_concurrent(a, idx, n, 0, o->permits, &over, 1);
    res->overlaps = over;
    res->paused_overlaps = over_all - over;
  } else {
    check_exclusion(a, idx, n, res);
    if (o->kind == TT_RW) {
      int64_t unused = 0;
      res->max_holders = max_concurrent(a, idx, n, 1, 0, &unused, 0);
    }
  }

  /* hand-offs: the next section entered while someone was already waiting;
   * gaps and take-overs: the time nobody held it */
  for (size_t i = 1; i < n && !shared && o->kind != TT_RW; i++) {
    const tt_rec *p = &a->recs[idx[i - 1]], *r = &a->recs[idx[i]];
    int64_t gap = r->enter - p->exit;
    if (gap > res->max_gap_us * 1000)
      res->max_gap_us = gap / 1000;
    if (atomic_load(&p->flags) & TT_R_KILLED) {
      if (gap / 1000 > res->max_takeover_us)
        res->max_takeover_us = gap / 1000;
    } else if (r->invoke < p->exit && gap >= 0) {
      hand[nh++] = gap / 1000;
    }
  }
  res->handoffs = (int64_t)nh;
  res->handoff_p50_us = pct(hand, nh, 50);
  res->handoff_p99_us = pct(hand, nh, 99);
  res->acquire_p50_us = pct(waits, nw, 50);
  res->acquire_p99_us = pct(waits, nw, 99);
  res->max_wait_us = nw ? waits[nw - 1] : 0;

  for (int s = 0; s < atomic_load(&a->nslots); s++) {
    tt_slot *sl = &a->slots[s];
    res->timeouts += atomic_load(&sl->timeouts);
    res->spent += atomic_load(&sl->spent);
    res->errors += atomic_load(&sl->errors);
    res->release_errors += atomic_load(&sl->release_errors);
    /* a thread that ran to the end (not killed) and never got in */
    if (atomic_load(&sl->phase) == TT_P_GONE && atomic_load(&sl->grants) == 0)
      res->starved++;
    if (sl->last_error[0] && res->errors + res->release_errors > 0)
      fprintf(stderr, "torture: slot %d (pid %d): %s\n", s, (int)sl->pid,
              sl->last_error);
  }
  res->commits = atomic_load(&a->commits);
  res->counter = a->counter;
  /* a worker killed between its counter write and its commit leaves the
   * counter one ahead: the harness counts those in counter_slack */
  /* a paused holder's write of what it read before loses the updates made
   * meanwhile (the counter is the workers' own memory, not guarded) */
  res->counter_violation =
      (o->kind != TT_SEMAPHORE && res->counter < res->commits &&
       res->paused_overlaps == 0) ||
      res->counter > res->commits + res->counter_slack;
  if (TT_FIFO(o->kind))
    check_fifo(o, a, snaps, nsnaps, nrecs, res);
  /* --writes: the data in Redis is the judge (read back by the harness
   * into res: tt_check_data). Under the pause nemesis sections overlap by
   * design: a holder stopped past its lease is not told before it wakes;
   * what matters is whether its write landed. */
  int64_t overlaps = (o->nemesis & TT_F_PAUSE) ? 0 : res->overlaps;
  res->violations = overlaps + res->counter_violation + res->fifo_violations;
  if (o->kind == TT_ELECTION)
    check_election(o, a, idx, n, res);
  if (o->nemesis & TT_F_CLOCK_FORWARD)
    told_after_jumps(a, idx, n, res);
  free(idx);
  free(waits);
  free(hand);
}

void tt_check_data(const tt_opts *o, tt_arena *a, const char *const *log,
                   const size_t *lens, size_t n, int64_t counter,
                   tt_result *res) {
  res->writes_accepted = atomic_load(&a->writes_accepted);
  res->writes_refused = atomic_load(&a->writes_refused);
  res->writes_unacked = atomic_load(&a->writes_unacked);
  int nun = atomic_load(&a->nunacked);
  if (nun > TT_MAX_UNACKED)
    nun = TT_MAX_UNACKED;
  res->data_counter = counter;
  res->data_log = (int64_t)n;
  int64_t max_token = 0, prev = 0;
  for (size_t i = 0; i < n; i++) {
    char entry[64];
    snprintf(entry, sizeof entry, "%.*s", (int)(lens[i] < 63 ? lens[i] : 63),
             log[i]);
    long long token = 0, value = 0;
    if (sscanf(entry, "%lld:%lld", &token, &value) != 2) {
      res->lost_updates++; /* cannot be read: count it against the run */
      continue;
    }
    for (int k = 0; k < nun; k++)
      if (a->unacked[k].token == token && a->unacked[k].value == value) {
        res->unacked_kept++;
        break;
      }
    if (token < max_token)
      res->stale_accepted++;
    if (token > max_token)
      max_token = token;
    if (value != prev + 1)
      res->lost_updates++;
    prev = value;
  }
  /* confirmed writes missing from the log (the unconfirmed ones kept in
   * it are not theirs): lost with their master */
  res->lost_acked = res->writes_accepted - ((int64_t)n - res->unacked_kept);
  if (o->writes == TT_W_GUARDED) {
    res->data_violation = res->stale_accepted + res->lost_updates +
                          (counter != (int64_t)n) + (res->lost_acked != 0);
    res->violations += res->data_violation;
  }
}

void tt_print(const tt_opts *o, const tt_result *r) {
  int64_t faults = 0;
  for (int i = 0; i < TT_F_COUNT; i++)
    faults += r->faults[i];
  printf("torture: kind=%s procs=%d %s=%d attempts=%" PRId64
         " sections=%" PRId64 " overlaps=%" PRId64 " reported_overlaps=%" PRId64
         " counter=%" PRId64 "/%" PRId64 " fifo=%" PRId64 "/%" PRId64
         " (inversions %" PRId64 ")"
         " faults=%" PRId64 " lost_reports=%" PRId64 " timeouts=%" PRId64
         " errors=%" PRId64 " violations=%" PRId64 "\n",
         kind_names[o->kind], o->procs, o->async ? "async" : "threads",
         o->async ? o->async : o->threads, r->attempts, r->sections,
         r->overlaps, r->reported_overlaps, r->counter, r->commits,
         r->fifo_violations, r->fifo_checked, r->fifo_inversions, faults,
         r->lost_reports,
         r->timeouts, r->errors + r->release_errors, r->violations);
  if (o->kind == TT_ELECTION)
    printf("torture: election: terms_repeated=%" PRId64 " terms_backwards=%"
           PRId64 " observers=%" PRId64 " observed=%" PRId64 " disorder=%"
           PRId64 " missing=%" PRId64 " resyncs=%" PRId64 "\n",
           r->terms_repeated, r->terms_backwards, r->observers, r->observed,
           r->observed_disorder, r->observed_missing, r->observed_resyncs);
  if (o->writes)
    printf("torture: %s writes: accepted=%" PRId64 " refused=%" PRId64
           " stale_accepted=%" PRId64 " lost_updates=%" PRId64
           " counter=%" PRId64 " log=%" PRId64 " unacked=%" PRId64
           " (kept %" PRId64 ") lost_acked=%" PRId64 "\n",
           o->writes == TT_W_PLAIN ? "plain" : "guarded", r->writes_accepted,
           r->writes_refused, r->stale_accepted, r->lost_updates,
           r->data_counter, r->data_log, r->writes_unacked, r->unacked_kept,
           r->lost_acked);
  if (!o->json)
    return;
  printf("{\"kind\":\"%s\",\"procs\":%d,\"threads\":%d", kind_names[o->kind],
         o->procs, o->threads);
#define F(x) printf(",\"" #x "\":%" PRId64, r->x)
  F(attempts); F(sections); F(timeouts); F(spent); F(errors); F(release_errors);
  F(overlaps); F(reported_overlaps); F(untold_overlaps); F(paused_overlaps); F(lost_reports); F(counter); F(commits);
  F(counter_violation); F(counter_slack); F(max_holders); F(shared_sections); F(fifo_checked);
  F(fifo_violations); F(fifo_inversions); F(fifo_requeued); F(fifo_lost); F(fifo_java_passed); F(java_sections); F(java_kills); F(starved); F(worker_deaths); F(max_wait_us); F(handoff_p50_us);
  F(handoff_p99_us); F(handoffs); F(acquire_p50_us); F(acquire_p99_us); F(max_fail_us);
  F(killed_in_section); F(max_takeover_us); F(max_gap_us); F(keys_left); F(latches_left);
  F(available_left); F(violations); F(writes_accepted); F(writes_refused);
  F(data_counter); F(data_log); F(stale_accepted); F(lost_updates);
  F(writes_unacked); F(unacked_kept); F(lost_acked);
  F(data_violation); F(max_promote_ms); F(takeovers); F(terms_repeated); F(terms_backwards);
  F(observers); F(observed); F(observed_disorder); F(observed_missing);
  F(observed_resyncs); F(told_after_jump); F(max_told_after_jump_us);
#undef F
  printf(",\"cuts_both\":%" PRId64 ",\"cuts_to_server\":%" PRId64
         ",\"cuts_from_server\":%" PRId64, r->cuts[0], r->cuts[1], r->cuts[2]);
  for (int i = 0; i < TT_F_COUNT; i++)
    printf(",\"f_%s\":%" PRId64, fault_names[i], r->faults[i]);
  printf("}\n");
}
