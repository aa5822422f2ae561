/* Client statistics (core/stats.h, dlock/stats.h): the counters, their copy
 * for the caller, and the Prometheus text. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/engine.h"
#include "core/stats.h"
#include "dlock/stats.h"

_Static_assert(DLOCK__HIST_BUCKETS == DLOCK_STATS_BUCKETS,
               "the client's histograms and dlock_histogram disagree");

static _Thread_local int tl_waited;

void dlock__stats_wait_mark(void) { tl_waited = 1; }
void dlock__stats_wait_reset(void) { tl_waited = 0; }
int dlock__stats_waited(void) { return tl_waited; }

struct dlock__stats *dlock__client_stats(dlock_client *c) { return &c->stats; }

void dlock__stats_acquire(dlock__stats *s, int rc, int waited, int64_t t0_us) {
  if (rc == DLOCK_OK && waited) {
    dlock__stat_add(s, DLOCK__ST_ACQ_WAITED, 1);
    dlock__hist_add(&s->acquire_wait, dlock__now_us() - t0_us);
  } else if (rc == DLOCK_OK) {
    dlock__stat_add(s, DLOCK__ST_ACQ_ONCE, 1);
  } else if (rc == DLOCK_EBUSY) {
    dlock__stat_add(s, DLOCK__ST_ACQ_BUSY, 1);
  } else if (rc == DLOCK_ETIMEDOUT) {
    dlock__stat_add(s, DLOCK__ST_ACQ_TIMEOUT, 1);
  } else {
    dlock__stat_add(s, DLOCK__ST_ACQ_ERR, 1);
  }
}

void dlock__stats_release(dlock__stats *s, int rc) {
  dlock__stat_add(s, rc == DLOCK_OK          ? DLOCK__ST_REL_OK
                     : rc == DLOCK_ELOST     ? DLOCK__ST_REL_LOST
                     : rc == DLOCK_ENOTOWNER ? DLOCK__ST_REL_NOTOWNER
                                             : DLOCK__ST_REL_ERR,
                  1);
}

/* ---- the caller's copy ------------------------------------------------------ */

/* Where each counter goes in dlock_client_stats. */
static const size_t field_of[DLOCK__ST_COUNT] = {
    [DLOCK__ST_ACQ_ONCE] = offsetof(dlock_stats, acquired_at_once),
    [DLOCK__ST_ACQ_WAITED] = offsetof(dlock_stats, acquired_after_wait),
    [DLOCK__ST_ACQ_BUSY] = offsetof(dlock_stats, acquire_busy),
    [DLOCK__ST_ACQ_TIMEOUT] = offsetof(dlock_stats, acquire_timed_out),
    [DLOCK__ST_ACQ_ERR] = offsetof(dlock_stats, acquire_errors),
    [DLOCK__ST_REL_OK] = offsetof(dlock_stats, released),
    [DLOCK__ST_REL_LOST] = offsetof(dlock_stats, release_lost),
    [DLOCK__ST_REL_NOTOWNER] = offsetof(dlock_stats, release_not_owner),
    [DLOCK__ST_REL_ERR] = offsetof(dlock_stats, release_errors),
    [DLOCK__ST_RENEW_CALLS] = offsetof(dlock_stats, renew_calls),
    [DLOCK__ST_RENEWED] = offsetof(dlock_stats, renewed),
    [DLOCK__ST_RENEW_FAIL] = offsetof(dlock_stats, renew_failures),
    [DLOCK__ST_RENEW_BATCH_MAX] = offsetof(dlock_stats, renew_batch_max),
    [DLOCK__ST_LOST_EXPIRED] = offsetof(dlock_stats, lost_expired),
    [DLOCK__ST_LOST_UNRENEWED] = offsetof(dlock_stats, lost_unrenewed),
    [DLOCK__ST_LOST_MAX_HOLD] = offsetof(dlock_stats, lost_max_hold),
    [DLOCK__ST_MESSAGES] = offsetof(dlock_stats, messages),
    [DLOCK__ST_SUBSCRIBES] = offsetof(dlock_stats, subscribes),
    [DLOCK__ST_SUBSCRIBED] = offsetof(dlock_stats, subscribed),
    [DLOCK__ST_RECONNECTS] = offsetof(dlock_stats, reconnects),
    [DLOCK__ST_REDIRECTS] = offsetof(dlock_stats, redirects),
    [DLOCK__ST_COMMANDS] = offsetof(dlock_stats, commands),
    [DLOCK__ST_DIRECT] = offsetof(dlock_stats, direct_calls),
    [DLOCK__ST_IN_FLIGHT] = offsetof(dlock_stats, in_flight),
    [DLOCK__ST_PIPELINE_MAX] = offsetof(dlock_stats, pipeline_max),
};

static void hist_copy(dlock__hist *h, dlock_histogram *out) {
  out->count = atomic_load_explicit(&h->count, memory_order_relaxed);
  out->sum_us = atomic_load_explicit(&h->sum_us, memory_order_relaxed);
  for (int i = 0; i < DLOCK_STATS_BUCKETS; i++)
    out->bucket[i] = atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
}

int dlock_client_stats(dlock_client *c, dlock_stats *out) {
  dlock__clear_error();
  if (c == NULL || out == NULL)
    return dlock__fail(DLOCK_EINVAL, "%s is NULL", c ? "out" : "client");
  if (out->version != DLOCK_STATS_VERSION)
    return dlock__fail(DLOCK_EINVAL, "dlock_stats.version is %u, want %u",
                       out->version, DLOCK_STATS_VERSION);
  dlock__stats *s = &c->stats;
  for (int k = 0; k < DLOCK__ST_COUNT; k++) {
    uint64_t v = atomic_load_explicit(&s->v[k], memory_order_relaxed);
    memcpy((char *)out + field_of[k], &v, sizeof v);
  }
  /* a gauge read between its two halves (an increment on one thread, the
   * decrement on another) may dip below 0 for a moment */
  if ((int64_t)out->in_flight < 0)
    out->in_flight = 0;
  pthread_mutex_lock(&c->cmu); /* the channels with waiters now */
  out->subscribed = c->channels.count;
  pthread_mutex_unlock(&c->cmu);
  hist_copy(&s->acquire_wait, &out->acquire_wait);
  hist_copy(&s->hold, &out->hold);
  return DLOCK_OK;
}

/* ---- Prometheus text ----------------------------------------------------------- */

typedef struct out {
  char *buf;
  size_t size, len;
  char label[300]; /* ",client=\"...\"" or "" */
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = o->len < o->size ? o->size - o->len : 0;
  int k = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
  va_end(ap);
  if (k > 0)
    o->len += (size_t)k;
}

/* A family's HELP and TYPE lines. */
static void family(out *o, const char *name, const char *type, const char *help) {
  put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample: name{what="value",client="..."} v (what NULL: no label of
 * its own). */
static void sample(out *o, const char *name, const char *what,
                   const char *value, uint64_t v) {
  const char *lbl = o->label[0] ? o->label + 1 : ""; /* without the comma */
  if (what)
    put(o, "%s{%s=\"%s\"%s} %llu\n", name, what, value, o->label,
        (unsigned long long)v);
  else if (lbl[0])
    put(o, "%s{%s} %llu\n", name, lbl, (unsigned long long)v);
  else
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

static void histogram(out *o, const char *name, const char *help,
                      const dlock_histogram *h) {
  family(o, name, "histogram", help);
  char bucket[96]; /* a histogram's buckets are NAME_bucket{le="..."} */
  snprintf(bucket, sizeof bucket, "%s_bucket", name);
  uint64_t cum = 0;
  for (int i = 0; i < DLOCK_STATS_BUCKETS; i++) {
    cum += h->bucket[i];
    char le[32];
    if (i == DLOCK_STATS_BUCKETS - 1)
      snprintf(le, sizeof le, "+Inf");
    else
      snprintf(le, sizeof le, "%.6f", (double)(1ull << i) / 1e6);
    sample(o, bucket, "le", le, cum);
  }
  const char *lbl = o->label[0] ? o->label + 1 : "";
  put(o, "%s_sum%s%s%s %.6f\n", name, lbl[0] ? "{" : "", lbl, lbl[0] ? "}" : "",
      (double)h->sum_us / 1e6);
  put(o, "%s_count%s%s%s %llu\n", name, lbl[0] ? "{" : "", lbl,
      lbl[0] ? "}" : "", (unsigned long long)h->count);
}

/* The families of one sample each, read from dlock_stats by offset. */
static const struct {
  const char *name, *type, *help;
  size_t field;
} one[] = {
    {"dlock_renew_calls_total", "counter",
     "Watchdog renewal calls sent (each renews a batch of holds).",
     offsetof(dlock_stats, renew_calls)},
    {"dlock_renewed_total", "counter", "Holds renewed by the watchdog.",
     offsetof(dlock_stats, renewed)},
    {"dlock_renew_failures_total", "counter",
     "Watchdog renewal calls that failed or were not acknowledged "
     "(retried next tick).",
     offsetof(dlock_stats, renew_failures)},
    {"dlock_renew_batch_max", "gauge",
     "The most holds one renewal call renewed.",
     offsetof(dlock_stats, renew_batch_max)},
    {"dlock_pubsub_messages_total", "counter",
     "Messages received on waiters' channels.", offsetof(dlock_stats, messages)},
    {"dlock_subscribes_total", "counter", "Channels subscribed.",
     offsetof(dlock_stats, subscribes)},
    {"dlock_subscribed", "gauge", "Channels subscribed now.",
     offsetof(dlock_stats, subscribed)},
    {"dlock_reconnects_total", "counter",
     "Connections made again after one was lost.",
     offsetof(dlock_stats, reconnects)},
    {"dlock_redirects_total", "counter",
     "MOVED and ASK answers followed (Redis Cluster).",
     offsetof(dlock_stats, redirects)},
    {"dlock_commands_total", "counter", "Commands sent to Redis.",
     offsetof(dlock_stats, commands)},
    {"dlock_direct_calls_total", "counter",
     "Calls made by the calling thread on a connection of its own.",
     offsetof(dlock_stats, direct_calls)},
    {"dlock_in_flight", "gauge", "Requests sent and not answered yet.",
     offsetof(dlock_stats, in_flight)},
    {"dlock_pipeline_max", "gauge",
     "The most requests in flight at once on one engine connection.",
     offsetof(dlock_stats, pipeline_max)},
};

int dlock_client_stats_format(const dlock_stats *s, const char *label,
                              char *buf, size_t size, size_t *len) {
  dlock__clear_error();
  if (s == NULL || (buf == NULL && size > 0))
    return dlock__fail(DLOCK_EINVAL, "%s is NULL", s ? "buf" : "stats");
  out o = {buf, size, 0, ""};
  if (label) { /* escaped as the format asks: \\, \" and \n */
    size_t k = (size_t)snprintf(o.label, sizeof o.label, ",client=\"");
    for (const char *p = label; *p && k + 4 < sizeof o.label; p++) {
      if (*p == '\\' || *p == '"' || *p == '\n')
        o.label[k++] = '\\';
      o.label[k++] = *p == '\n' ? 'n' : *p;
    }
    o.label[k++] = '"';
    o.label[k] = '\0';
  }
  if (size > 0)
    buf[0] = '\0';
  family(&o, "dlock_acquires_total", "counter",
         "Acquires (locks, semaphore permits) by outcome.");
  sample(&o, "dlock_acquires_total", "outcome", "at_once", s->acquired_at_once);
  sample(&o, "dlock_acquires_total", "outcome", "after_wait",
         s->acquired_after_wait);
  sample(&o, "dlock_acquires_total", "outcome", "busy", s->acquire_busy);
  sample(&o, "dlock_acquires_total", "outcome", "timed_out", s->acquire_timed_out);
  sample(&o, "dlock_acquires_total", "outcome", "error", s->acquire_errors);
  histogram(&o, "dlock_acquire_wait_seconds",
            "Acquires granted after waiting: time from the call to the grant.",
            &s->acquire_wait);
  histogram(&o, "dlock_hold_seconds",
            "Lock holds fully released: time from the grant to the release.",
            &s->hold);
  family(&o, "dlock_releases_total", "counter", "Releases by outcome.");
  sample(&o, "dlock_releases_total", "outcome", "released", s->released);
  sample(&o, "dlock_releases_total", "outcome", "lost", s->release_lost);
  sample(&o, "dlock_releases_total", "outcome", "not_owner", s->release_not_owner);
  sample(&o, "dlock_releases_total", "outcome", "error", s->release_errors);
  family(&o, "dlock_lost_total", "counter", "Holds lost, by reason.");
  sample(&o, "dlock_lost_total", "reason", "expired", s->lost_expired);
  sample(&o, "dlock_lost_total", "reason", "unrenewed", s->lost_unrenewed);
  sample(&o, "dlock_lost_total", "reason", "max_hold", s->lost_max_hold);
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
    uint64_t v;
    memcpy(&v, (const char *)s + one[i].field, sizeof v);
    family(&o, one[i].name, one[i].type, one[i].help);
    sample(&o, one[i].name, NULL, NULL, v);
  }
  if (len)
    *len = o.len;
  return DLOCK_OK;
}
