/* dlock-torture --timeline FILE (torture.h): a run drawn as Jepsen draws
 * one, by gnuplot: a lane per worker thread, each hold a bar from its
 * acquire's return to its release, the faults shaded across the lanes,
 * each lost report a cross, and a hold that overlaps another exclusively
 * (not readers, not a semaphore's permits) in red. FILE.dat, FILE.faults
 * and FILE.gp are kept beside FILE (a PNG) to redraw it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torture.h"

enum { MAX_FAULTS = 4096, MAX_DRAWN = 50000 };

typedef struct made_fault {
  int kind;
  int64_t from, to; /* ns */
} made_fault;

static made_fault faults[MAX_FAULTS];
static int nfaults;

void tt_timeline_fault(int kind, int64_t from_ns, int64_t to_ns) {
  if (nfaults < MAX_FAULTS)
    faults[nfaults++] = (made_fault){kind, from_ns, to_ns};
}

static const tt_arena *A;

static int by_enter(const void *x, const void *y) {
  int64_t a = A->recs[*(const int64_t *)x].enter;
  int64_t b = A->recs[*(const int64_t *)y].enter;
  return (a > b) - (a < b);
}

/* Whether two holds may not overlap (a reader beside a reader may; a
 * semaphore's permits may). */
static int exclusive(const tt_opts *o, const tt_rec *a, const tt_rec *b) {
  if (o->kind == TT_SEMAPHORE)
    return 0;
  return !((atomic_load(&a->flags) & TT_R_READ) &&
           (atomic_load(&b->flags) & TT_R_READ));
}

/* The granted holds (their indexes, by enter), at most MAX_DRAWN, with
 * red[i] set for those that overlap another exclusively. */
static int64_t holds(const tt_opts *o, const tt_arena *a, int64_t **out,
                     char **red) {
  int64_t n = 0, total = atomic_load(&a->nrecs);
  int64_t *idx = malloc((size_t)(total + 1) * sizeof *idx);
  char *r = calloc((size_t)total + 1, 1);
  for (int64_t i = 0; idx && i < total && n < MAX_DRAWN; i++)
    if (a->recs[i].enter > 0 && a->recs[i].exit > 0)
      idx[n++] = i;
  A = a;
  if (idx)
    qsort(idx, (size_t)n, sizeof *idx, by_enter);
  int64_t far = -1; /* the earlier hold that reaches furthest */
  for (int64_t i = 0; idx && r && i < n; i++) {
    const tt_rec *h = &a->recs[idx[i]];
    if (far >= 0 && a->recs[idx[far]].exit > h->enter &&
        exclusive(o, &a->recs[idx[far]], h))
      r[i] = r[far] = 1;
    if (far < 0 || h->exit > a->recs[idx[far]].exit)
      far = i;
  }
  *out = idx;
  *red = r;
  return idx && r ? n : -1;
}

static void write_script(FILE *g, const char *png, int lanes, int64_t t0,
                         const char *const *names) {
  fprintf(g, "set terminal pngcairo size 1200,%d noenhanced\n"
             "set output '%s'\nset title 'dlock-torture: holds by worker "
             "thread (red: overlapping; x: told it lost; grey: faults)'\n"
             "set xlabel 'seconds'\nset ylabel 'worker thread'\n"
             "set yrange [-0.6:%d.4]\nset ytics 0, 1, %d\nset xrange [0:*]\n"
             "set grid x\nunset key\n",
          200 + 14 * (lanes < 60 ? lanes : 60), png, lanes - 1, lanes - 1);
  for (int i = 0; i < nfaults; i++) {
    double f = (double)(faults[i].from - t0) / 1e9;
    double t = (double)(faults[i].to - t0) / 1e9;
    if (t - f < 0.01)
      t = f + 0.01;
    fprintf(g, "set object %d rect from %.3f, graph 0 to %.3f, graph 1 "
               "fc rgb '#bbbbbb' fs solid 0.35 noborder behind\n"
               "set label %d '%s' at %.3f, graph 0.98 font ',8'\n",
            i + 1, f, t, i + 1, names[faults[i].kind], f);
  }
  fprintf(g, "plot '%s.dat' using 1:3:($2-$1):(0):4 with vectors nohead "
             "lw 7 lc rgb variable, '%s.lost' using 1:2 with points pt 2 ps 1.2 "
             "lc rgb '#d00000'\n", png, png);
}

int tt_timeline_draw(const char *png, const tt_opts *o, const tt_arena *a,
                     const char *const *fault_names) {
  int64_t *idx;
  char *red;
  int64_t n = holds(o, a, &idx, &red);
  if (n <= 0) {
    free(idx);
    free(red);
    return -1;
  }
  int64_t t0 = a->recs[idx[0]].invoke;
  char path[1024];
  snprintf(path, sizeof path, "%s.dat", png);
  FILE *d = fopen(path, "w");
  snprintf(path, sizeof path, "%s.lost", png);
  FILE *l = fopen(path, "w");
  snprintf(path, sizeof path, "%s.gp", png);
  FILE *g = fopen(path, "w");
  int lanes = 1;
  for (int64_t i = 0; d && l && i < n; i++) {
    const tt_rec *h = &a->recs[idx[i]];
    fprintf(d, "%.6f %.6f %d %d\n", (double)(h->enter - t0) / 1e9,
            (double)(h->exit - t0) / 1e9, h->slot,
            red[i] ? 0xd00000 : 0x3060c0);
    int64_t lost = atomic_load(&h->lost_at);
    if (lost > 0)
      fprintf(l, "%.6f %d\n", (double)(lost - t0) / 1e9, h->slot);
    if (h->slot + 1 > lanes)
      lanes = h->slot + 1;
  }
  fprintf(l ? l : stderr, "-1 -10\n"); /* gnuplot wants one point at least */
  if (g)
    write_script(g, png, lanes, t0, fault_names);
  int ok = d && l && g;
  if (d)
    fclose(d);
  if (l)
    fclose(l);
  if (g)
    fclose(g);
  free(idx);
  free(red);
  if (!ok)
    return -1;
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "gnuplot '%s'", path);
  return system(cmd) == 0 ? 0 : -1;
}
