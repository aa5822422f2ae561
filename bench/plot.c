/* dlock-bench --plot DIR (bench.h): pictures of a run, drawn by gnuplot.
 *
 *   w1-latency.png  W1's lock call latency by percentile: dlock, raw
 *                   hiredis and each peer on one chart;
 *   w6-handoff.png  W6's hand-off by percentile: dlock's fair lock and
 *                   redis-py's Lock (with --peers);
 *   ratios.png      every throughput figure's ratio to its bound;
 *   sweep-*.png     a sweep's curves (sweep.c): a figure against the
 *                   amount of work, log-log.
 *
 * Each chart's data goes to DIR/NAME.dat and its script to DIR/NAME.gp (so
 * a picture can be redrawn or restyled), then gnuplot draws DIR/NAME.png. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { MAX_CURVES = 8, MAX_BARS = 64, MAX_XY = 256 };

static const double at[PLOT_POINTS] = {1,  5,  10, 15, 20, 25, 30, 35,
                                       40, 45, 50, 55, 60, 65, 70, 75,
                                       80, 85, 90, 95, 99};

typedef struct curve {
  char chart[16];
  char label[48];
  double us[PLOT_POINTS];
} curve;

static curve curves[MAX_CURVES * 2];
static int ncurves;
static struct {
  char label[80];
  double ratio;
} bars[MAX_BARS];
static int nbars;
static struct {
  char chart[24];
  char label[48];
  double x, y;
} xy[MAX_XY];
static int nxy;

const double *bench_plot_percentiles(void) { return at; }

void bench_plot_points(const char *chart, const char *label, const double *us) {
  if (bench_opt.plot_dir == NULL || ncurves >= MAX_CURVES * 2)
    return;
  curve *c = &curves[ncurves++];
  snprintf(c->chart, sizeof c->chart, "%s", chart);
  snprintf(c->label, sizeof c->label, "%s", label);
  memcpy(c->us, us, sizeof c->us);
}

void bench_plot_samples(const char *chart, const char *label, int64_t *v, long n) {
  double us[PLOT_POINTS];
  if (n <= 0)
    return;
  for (int i = 0; i < PLOT_POINTS; i++)
    us[i] = bench_pct(v, n, at[i]);
  bench_plot_points(chart, label, us);
}

void bench_plot_ratio(const char *w, const char *metric, const char *unit,
                double ratio) {
  if (bench_opt.plot_dir == NULL || nbars >= MAX_BARS || !isfinite(ratio) ||
      strcmp(unit, "1/s") != 0)
    return;
  snprintf(bars[nbars].label, sizeof bars[nbars].label, "%s %s", w, metric);
  bars[nbars++].ratio = ratio;
}

void bench_plot_xy(const char *chart, const char *label, double x, double y) {
  if (bench_opt.plot_dir == NULL || nxy >= MAX_XY || !isfinite(y) || y <= 0)
    return;
  snprintf(xy[nxy].chart, sizeof xy[nxy].chart, "%s", chart);
  snprintf(xy[nxy].label, sizeof xy[nxy].label, "%s", label);
  xy[nxy].x = x;
  xy[nxy].y = y;
  nxy++;
}

/* DIR/NAME.EXT open for writing (path filled), or NULL. */
static FILE *plot_file(const char *name, const char *ext, char *path,
                       size_t n) {
  snprintf(path, n, "%s/%s.%s", bench_opt.plot_dir, name, ext);
  return fopen(path, "w");
}

/* A chart's gnuplot script, open (path filled) up to its plot command's
 * curves, or NULL: the picture's size, title, axes (logscale: the log
 * axes) and key. */
static FILE *chart_script(const char *chart, const char *title,
                          const char *xlabel, const char *ylabel,
                          const char *logscale, const char *key, char *path,
                          size_t n) {
  FILE *g = plot_file(chart, "gp", path, n);
  if (g)
    fprintf(g, "set terminal pngcairo size 900,540 noenhanced\n"
               "set output '%s/%s.png'\nset title '%s'\n"
               "set xlabel '%s'\nset ylabel '%s'\nset logscale %s\n"
               "set grid\nset key %s\nplot ",
            bench_opt.plot_dir, chart, title, xlabel, ylabel, logscale, key);
  return g;
}

/* gnuplot runs the script at path: 0, or -1. */
static int gnuplot(const char *path) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "gnuplot '%s'", path);
  return system(cmd) == 0 ? 0 : -1;
}

/* One chart of curves by percentile: 0, or -1 when it has none or gnuplot
 * failed. */
static int draw_curves(const char *chart, const char *title, const char *ylabel) {
  char path[512];
  int idx[MAX_CURVES], n = 0;
  for (int i = 0; i < ncurves && n < MAX_CURVES; i++)
    if (strcmp(curves[i].chart, chart) == 0)
      idx[n++] = i;
  if (n == 0)
    return -1;
  FILE *d = plot_file(chart, "dat", path, sizeof path);
  if (d == NULL)
    return -1;
  for (int p = 0; p < PLOT_POINTS; p++) {
    fprintf(d, "%g", at[p]);
    for (int k = 0; k < n; k++)
      fprintf(d, " %g", curves[idx[k]].us[p]);
    fprintf(d, "\n");
  }
  fclose(d);
  FILE *g = chart_script(chart, title, "percentile", ylabel, "y", "left top",
                         path, sizeof path);
  if (g == NULL)
    return -1;
  for (int k = 0; k < n; k++)
    fprintf(g, "%s'%s/%s.dat' using 1:%d with linespoints title '%s'",
            k ? ", " : "", bench_opt.plot_dir, chart, k + 2, curves[idx[k]].label);
  fprintf(g, "\n");
  fclose(g);
  return gnuplot(path);
}

static int draw_ratios(void) {
  if (nbars == 0)
    return -1;
  char path[512];
  FILE *d = plot_file("ratios", "dat", path, sizeof path);
  if (d == NULL)
    return -1;
  double top = 1.2; /* the 1.0 line inside the frame, with room */
  for (int i = 0; i < nbars; i++) {
    fprintf(d, "%d \"%s\" %g\n", i, bars[i].label, bars[i].ratio);
    if (bars[i].ratio * 1.1 > top)
      top = bars[i].ratio * 1.1;
  }
  fclose(d);
  FILE *g = plot_file("ratios", "gp", path, sizeof path);
  if (g == NULL)
    return -1;
  fprintf(g, "set terminal pngcairo size 900,%d noenhanced\n"
             "set output '%s/ratios.png'\n"
             "set title 'throughput: ratio to its bound (raw hiredis, or the peer)'\n"
             "set style fill solid 0.6\nset xrange [0:%.2f]\nset grid x\n"
             "set xlabel 'ratio to the bound (1.0, dashed: as fast as it)'\n"
             "set ytics nomirror\nset yrange [-0.6:%d.4]\nunset key\n"
             "set arrow from 1, graph 0 to 1, graph 1 nohead dt 2\n"
             "plot '%s/ratios.dat' using (0.5*$3):1:(0.5*$3):(0.35):ytic(2) "
             "with boxxyerror\n",
          160 + 22 * nbars, bench_opt.plot_dir, top, nbars - 1, bench_opt.plot_dir);
  fclose(g);
  return gnuplot(path);
}

/* One sweep's chart: a curve per label, its points in the order measured,
 * log-log (each data block a curve). 0, or -1. */
static int draw_xy(const char *chart, const char *title, const char *xlabel,
                   const char *ylabel) {
  char labels[MAX_CURVES][48], path[512];
  int nl = 0;
  for (int i = 0; i < nxy; i++) {
    int k = 0;
    if (strcmp(xy[i].chart, chart) != 0)
      continue;
    while (k < nl && strcmp(labels[k], xy[i].label) != 0)
      k++;
    if (k == nl && nl < MAX_CURVES)
      snprintf(labels[nl++], sizeof labels[0], "%s", xy[i].label);
  }
  if (nl == 0)
    return -1;
  FILE *d = plot_file(chart, "dat", path, sizeof path);
  if (d == NULL)
    return -1;
  for (int k = 0; k < nl; k++) {
    for (int i = 0; i < nxy; i++)
      if (strcmp(xy[i].chart, chart) == 0 && strcmp(xy[i].label, labels[k]) == 0)
        fprintf(d, "%g %g\n", xy[i].x, xy[i].y);
    fprintf(d, "\n\n");
  }
  fclose(d);
  FILE *g = chart_script(chart, title, xlabel, ylabel, "xy", "left bottom",
                         path, sizeof path);
  if (g == NULL)
    return -1;
  for (int k = 0; k < nl; k++)
    fprintf(g, "%s'%s/%s.dat' index %d using 1:2 with linespoints title '%s'",
            k ? ", " : "", bench_opt.plot_dir, chart, k, labels[k]);
  fprintf(g, "\n");
  fclose(g);
  return gnuplot(path);
}

int bench_plot_draw(void) {
  if (bench_opt.plot_dir == NULL)
    return 0;
  int drawn = 0;
  drawn += draw_curves("w1-latency", "W1: lock call latency, one thread",
                       "microseconds") == 0;
  drawn += draw_curves("w6-handoff", "W6: hand-off to a waiter, 16 threads",
                       "microseconds") == 0;
  drawn += draw_ratios() == 0;
  drawn += draw_xy("sweep-threads", "pairs/s by threads (one client)",
                   "threads", "lock+unlock pairs per second") == 0;
  drawn += draw_xy("sweep-threads-cpu", "client CPU per pair by threads",
                   "threads", "microseconds of CPU per pair") == 0;
  drawn += draw_xy("sweep-holds-memory", "client memory per watchdog hold",
                   "holds", "bytes") == 0;
  drawn += draw_xy("sweep-holds-work", "the watchdog: its work by holds",
                   "holds", "calls; % of a core") == 0;
  drawn += draw_xy("sweep-waiters", "waiters on one lock: what a hand-off costs",
                   "waiters", "microseconds; commands") == 0;
  drawn += draw_xy("sweep-names", "pairs/s by distinct names (one thread)",
                   "distinct names", "lock+unlock pairs per second") == 0;
  printf("pictures: %d drawn in %s\n", drawn, bench_opt.plot_dir);
  return drawn;
}
