/* Client statistics (dlock/stats.h): each counter group moves as the
 * operations say, against a real server, and the Prometheus text parses. */
#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "dlock/stats.h"
#include "harness.h"
#include "redis_server.h"

static th_server srv;

static int suite_init(void) { return th_main_server_start(&srv) != 0; }

static int suite_clean(void) {
  th_server_stop(&srv);
  return 0;
}

static dlock_stats stats_of(dlock_client *c) {
  dlock_stats s;
  memset(&s, 0, sizeof s);
  s.version = DLOCK_STATS_VERSION;
  TH_ASSERT_RC(dlock_client_stats(c, &s), DLOCK_OK);
  return s;
}

static dlock_lock *new_lock(dlock_client *c, const char *name) {
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  return l;
}

/* Acquires and releases by outcome, and the wait and hold histograms. */
static void test_acquires_and_releases(void) {
  dlock_client *c = th_client(&srv, NULL), *c2 = th_client(&srv, NULL);
  const char *name = th_name("stats-acq");
  dlock_lock *l = new_lock(c, name), *l2 = new_lock(c2, name);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK); /* at once */
  usleep(20000);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l2, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EBUSY);      /* busy */
  TH_ASSERT_RC(dlock_acquire(l, 100, 30000), DLOCK_ETIMEDOUT); /* timed out */
  TH_ASSERT_RC(dlock_release(l), DLOCK_ENOTOWNER);           /* not owner */
  th_acquirer a = {.lock = l, .wait_ms = 10000, .lease_ms = 30000};
  th_acquirer_start(&a); /* after a wait (it releases at once) */
  char channel[160];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
  dlock_stats mid = stats_of(c);
  CU_ASSERT_EQUAL(mid.subscribed, 1); /* the waiter's channel */
  TH_ASSERT_RC(dlock_release(l2), DLOCK_OK);
  th_acquirer_join(&a);
  TH_ASSERT_RC(a.rc, DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 200), DLOCK_OK); /* lost: 200 ms lease */
  usleep(300000);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST);
  dlock_stats s = stats_of(c);
  CU_ASSERT_EQUAL(s.acquired_at_once, 2);
  CU_ASSERT_EQUAL(s.acquired_after_wait, 1);
  CU_ASSERT_EQUAL(s.acquire_busy, 1);
  CU_ASSERT_EQUAL(s.acquire_timed_out, 1);
  CU_ASSERT_EQUAL(s.acquire_errors, 0);
  CU_ASSERT_EQUAL(s.released, 2);
  CU_ASSERT_EQUAL(s.release_not_owner, 1);
  CU_ASSERT_EQUAL(s.release_lost, 1);
  CU_ASSERT_EQUAL(s.acquire_wait.count, 1);
  CU_ASSERT_EQUAL(s.hold.count, 2); /* the lost one is not a hold's end */
  uint64_t held = 0; /* the first hold lasted 20 ms: a bucket above 16 ms */
  for (int i = 15; i < DLOCK_STATS_BUCKETS; i++)
    held += s.hold.bucket[i];
  CU_ASSERT(held >= 1);
  CU_ASSERT(s.hold.sum_us >= 20000);
  CU_ASSERT(s.messages >= 1); /* the release woke the waiter */
  CU_ASSERT(s.subscribes >= 1);
  CU_ASSERT(s.commands >= 8);
  CU_ASSERT(s.direct_calls >= 1);
  CU_ASSERT_EQUAL(s.in_flight, 0);
  CU_ASSERT_EQUAL(stats_of(c2).released, 1); /* per client */
  dlock_lock_free(l);
  dlock_lock_free(l2);
  dlock_client_close(c);
  dlock_client_close(c2);
}

/* A semaphore's permits count as acquires and releases. */
static void test_semaphore(void) {
  dlock_client *c = th_client(&srv, NULL);
  dlock_semaphore *s = NULL;
  TH_ASSERT_RC(dlock_semaphore_new(c, th_name("stats-sem"), NULL, &s), DLOCK_OK);
  TH_ASSERT_RC(dlock_semaphore_add_permits(s, 1, NULL), DLOCK_OK);
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 1, 0), DLOCK_OK);
  TH_ASSERT_RC(dlock_semaphore_acquire(s, 1, 0), DLOCK_EBUSY);
  TH_ASSERT_RC(dlock_semaphore_release(s, 1), DLOCK_OK);
  dlock_stats st = stats_of(c);
  CU_ASSERT_EQUAL(st.acquired_at_once, 1);
  CU_ASSERT_EQUAL(st.acquire_busy, 1);
  CU_ASSERT_EQUAL(st.released, 1);
  dlock_semaphore_free(s);
  dlock_client_close(c);
}

/* The watchdog's renewals (a 600 ms watchdog renews every 200 ms), and a
 * hold found gone counted as lost (expired). */
static void test_watchdog_and_losses(void) {
  th_lost_log log;
  th_lost_init(&log);
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.watchdog_timeout_ms = 600;
  o.on_lost = th_on_lost;
  o.on_lost_data = &log;
  dlock_client *c = th_client(&srv, &o);
  char a[96], b[96]; /* th_name's buffer is reused */
  snprintf(a, sizeof a, "%s", th_name("stats-wd"));
  snprintf(b, sizeof b, "%s", th_name("stats-wd"));
  dlock_lock *la = new_lock(c, a), *lb = new_lock(c, b);
  TH_ASSERT_RC(dlock_acquire(la, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(lb, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  dlock_stats s = stats_of(c);
  for (int64_t end = th_now_ms() + 5000; s.renewed < 4 && th_now_ms() < end;
       usleep(20000))
    s = stats_of(c);
  CU_ASSERT(s.renewed >= 4);
  CU_ASSERT(s.renew_calls >= 2);
  CU_ASSERT_EQUAL(s.renew_batch_max, 2); /* both in one call */
  CU_ASSERT_EQUAL(s.renew_failures, 0);
  CU_ASSERT_EQUAL(th_int(&srv, "DEL %s", b), 1); /* taken from under it */
  CU_ASSERT_EQUAL(th_lost_wait(&log, 1, 5000), 1);
  s = stats_of(c);
  CU_ASSERT_EQUAL(s.lost_expired, 1);
  CU_ASSERT_EQUAL(s.lost_unrenewed + s.lost_max_hold, 0);
  TH_ASSERT_RC(dlock_release(la), DLOCK_OK);
  dlock_lock_free(la);
  dlock_lock_free(lb);
  dlock_client_close(c);
}

/* A killed connection comes back: a reconnect. */
static void test_reconnects(void) {
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.direct_conns = 0; /* every call on the engine's connection */
  dlock_client *c = th_client(&srv, &o);
  dlock_lock *l = new_lock(c, th_name("stats-rc"));
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(stats_of(c).reconnects, 0);
  CU_ASSERT(stats_of(c).pipeline_max >= 1);
  redisReply *r = th_cmd(&srv, "CLIENT KILL TYPE normal SKIPME yes");
  if (r)
    freeReplyObject(r);
  int rc = DLOCK_EIO; /* a call in flight on the killed socket may fail */
  for (int i = 0; i < 5 && rc != DLOCK_OK; i++)
    rc = dlock_acquire(l, 0, 30000);
  TH_ASSERT_RC(rc, DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT(stats_of(c).reconnects >= 1);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* ---- the Prometheus text ----------------------------------------------------- */

/* A metric name: [a-zA-Z_:][a-zA-Z0-9_:]* */
static size_t name_len(const char *p) {
  size_t n = 0;
  while (isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == ':')
    n++;
  return isdigit((unsigned char)p[0]) ? 0 : n;
}

/* Check text as the exposition format has it: every sample's family
 * declared by a TYPE line first, labels well formed, values numbers, a
 * histogram's buckets cumulative up to +Inf = its count. Returns the number
 * of samples, or -1 with the bad line printed. */
static int parse(const char *text, const char *want_label) {
  char types[64][64];
  int is_histogram[64];
  int ntypes = 0, samples = 0;
  double last_bucket = -1;
  const char *line = text;
  while (*line) {
    const char *end = strchr(line, '\n');
    if (end == NULL)
      return printf("\n    no newline at the end "), -1;
    char l[512];
    snprintf(l, sizeof l, "%.*s", (int)(end - line), line);
    line = end + 1;
    if (strncmp(l, "# TYPE ", 7) == 0) {
      char name[64], type[32];
      if (sscanf(l + 7, "%63s %31s", name, type) != 2 || ntypes == 64)
        return printf("\n    bad: %s ", l), -1;
      is_histogram[ntypes] = strcmp(type, "histogram") == 0;
      snprintf(types[ntypes++], sizeof types[0], "%s", name);
      last_bucket = -1;
      continue;
    }
    if (strncmp(l, "# HELP ", 7) == 0)
      continue;
    size_t n = name_len(l);
    if (n == 0)
      return printf("\n    bad name: %s ", l), -1;
    int declared = 0; /* the family: the name; a histogram's _bucket, _sum
                         and _count (never the bare name) */
    for (int i = 0; i < ntypes; i++) {
      size_t tn = strlen(types[i]);
      int histogram = is_histogram[i];
      if (strncmp(l, types[i], tn) == 0 &&
          ((tn == n && !histogram) ||
           (histogram && ((tn + 7 == n && !strncmp(l + tn, "_bucket", 7)) ||
                          (tn + 4 == n && !strncmp(l + tn, "_sum", 4)) ||
                          (tn + 6 == n && !strncmp(l + tn, "_count", 6))))))
        declared = 1;
    }
    if (!declared)
      return printf("\n    undeclared: %s ", l), -1;
    const char *p = l + n;
    if (*p == '{') { /* name="value" pairs, values escaped */
      p++;
      while (*p && *p != '}') {
        size_t k = name_len(p);
        if (k == 0 || p[k] != '=' || p[k + 1] != '"')
          return printf("\n    bad label: %s ", l), -1;
        p += k + 2;
        while (*p && *p != '"')
          p += *p == '\\' && p[1] ? 2 : 1;
        if (*p++ != '"')
          return printf("\n    unterminated: %s ", l), -1;
        if (*p == ',')
          p++;
      }
      if (*p++ != '}')
        return printf("\n    unclosed: %s ", l), -1;
      if (want_label && strstr(l, want_label) == NULL)
        return printf("\n    no client label: %s ", l), -1;
    }
    if (*p++ != ' ')
      return printf("\n    no value: %s ", l), -1;
    char *stop;
    double v = strtod(p, &stop);
    if (stop == p || *stop)
      return printf("\n    bad value: %s ", l), -1;
    if (strstr(l, "_bucket{")) {
      if (v < last_bucket)
        return printf("\n    not cumulative: %s ", l), -1;
      last_bucket = v;
    }
    samples++;
  }
  return samples;
}

/* `promtool check metrics` (Prometheus's own parser and linter) on text:
 * its exit status, what it said printed. */
static int promtool_check(const char *text) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/dlock-promtool-XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0)
    return -1;
  size_t len = strlen(text);
  int ok = write(fd, text, len) == (ssize_t)len;
  close(fd);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
  FILE *p = ok ? popen(cmd, "r") : NULL;
  char said[512];
  while (p && fgets(said, sizeof said, p))
    printf("\n    promtool: %s", said);
  int rc = p ? pclose(p) : -1;
  unlink(path);
  return rc;
}

/* The text parses (ours, and promtool's), carries the client label
 * (escaped), and holds the counters' values; a histogram's buckets are
 * NAME_bucket. */
static void test_prometheus_text(void) {
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l = new_lock(c, th_name("stats-prom"));
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_stats s = stats_of(c);
  char buf[16384];
  size_t len = 0;
  TH_ASSERT_RC(dlock_client_stats_format(&s, "web \"1\"\\a", buf, sizeof buf, &len),
               DLOCK_OK);
  CU_ASSERT(len > 0 && len < sizeof buf);
  CU_ASSERT(parse(buf, "client=\"web \\\"1\\\"\\\\a\"") > 40);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "dlock_acquires_total{outcome=\"at_once\","
                                     "client=\"web \\\"1\\\"\\\\a\"} 1\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "dlock_hold_seconds_count{client="));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "le=\"+Inf\""));
  CU_ASSERT_EQUAL(promtool_check(buf), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "dlock_hold_seconds_bucket{le=\"0.000001\","));
  CU_ASSERT_PTR_NULL(strstr(buf, "dlock_hold_seconds{"));
  TH_ASSERT_RC(dlock_client_stats_format(&s, NULL, buf, sizeof buf, &len), DLOCK_OK);
  CU_ASSERT(parse(buf, NULL) > 40);
  CU_ASSERT_EQUAL(promtool_check(buf), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "dlock_releases_total{outcome=\"released\"} 1\n"));
  /* too small a buffer: cut, NUL-terminated, the whole length said */
  char small[100];
  size_t need = 0;
  TH_ASSERT_RC(dlock_client_stats_format(&s, NULL, small, sizeof small, &need),
               DLOCK_OK);
  CU_ASSERT_EQUAL(need, len);
  CU_ASSERT_EQUAL(strlen(small), sizeof small - 1);
  TH_ASSERT_RC(dlock_client_stats_format(&s, NULL, NULL, 0, &need), DLOCK_OK);
  CU_ASSERT_EQUAL(need, len);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* ---- the event hook ---------------------------------------------------------- */

typedef struct event_log {
  pthread_mutex_t mu;
  int n, off_engine; /* events; of them told off the engine thread */
  dlock_event_type type[64];
  int64_t duration_us[64];
  int rc[64];
  dlock_lost_reason reason[64];
  char name[64][96];
} event_log;

static void on_event(void *data, const dlock_event *ev) {
  event_log *log = data;
  pthread_mutex_lock(&log->mu);
  if (!dlock__on_engine_thread())
    log->off_engine++;
  if (log->n < 64) {
    int i = log->n++;
    log->type[i] = ev->type;
    log->duration_us[i] = ev->duration_us;
    log->rc[i] = ev->rc;
    log->reason[i] = ev->reason;
    snprintf(log->name[i], sizeof log->name[i], "%.*s", (int)ev->name_len,
             ev->name ? ev->name : "");
  }
  pthread_mutex_unlock(&log->mu);
}

/* Wait (bounded, 5 s) until the log has n events. */
static int events_wait(event_log *log, int n) {
  for (int64_t end = th_now_ms() + 5000; th_now_ms() < end; usleep(2000)) {
    pthread_mutex_lock(&log->mu);
    int have = log->n;
    pthread_mutex_unlock(&log->mu);
    if (have >= n)
      return have;
  }
  return log->n;
}

/* Acquired, waited, released, lost and reconnected, each told once on the
 * engine thread with its name and duration. */
static void test_events(void) {
  static event_log log = {PTHREAD_MUTEX_INITIALIZER, 0, 0, {0}, {0}, {0}, {0}, {{0}}};
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.on_event = on_event;
  o.on_event_data = &log;
  o.watchdog_timeout_ms = 600;
  dlock_client *c = th_client(&srv, &o), *c2 = th_client(&srv, NULL);
  char name[96];
  snprintf(name, sizeof name, "%s", th_name("stats-ev"));
  dlock_lock *l = new_lock(c, name), *l2 = new_lock(c2, name);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  usleep(20000);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(events_wait(&log, 2), 2);
  CU_ASSERT_EQUAL(log.type[0], DLOCK_EVENT_ACQUIRED);
  CU_ASSERT_STRING_EQUAL(log.name[0], name);
  CU_ASSERT_EQUAL(log.type[1], DLOCK_EVENT_RELEASED);
  CU_ASSERT_STRING_EQUAL(log.name[1], name);
  CU_ASSERT(log.duration_us[1] >= 20000);
  /* a wait: WAITED (its outcome) then ACQUIRED */
  TH_ASSERT_RC(dlock_acquire(l2, 0, 300), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 5000, 30000), DLOCK_OK);
  CU_ASSERT_EQUAL(events_wait(&log, 4), 4);
  CU_ASSERT_EQUAL(log.type[2], DLOCK_EVENT_WAITED);
  CU_ASSERT_EQUAL(log.rc[2], DLOCK_OK);
  CU_ASSERT(log.duration_us[2] >= 100000); /* l2's lease had 300 ms */
  CU_ASSERT_EQUAL(log.type[3], DLOCK_EVENT_ACQUIRED);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(events_wait(&log, 5), 5);
  /* lost: a watchdog hold deleted from under it */
  TH_ASSERT_RC(dlock_acquire(l, 0, DLOCK_LEASE_WATCHDOG), DLOCK_OK);
  CU_ASSERT_EQUAL(th_int(&srv, "DEL %s", name), 1);
  CU_ASSERT_EQUAL(events_wait(&log, 7), 7);
  CU_ASSERT_EQUAL(log.type[6], DLOCK_EVENT_LOST);
  CU_ASSERT_EQUAL(log.reason[6], DLOCK_LOST_EXPIRED);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST); /* not a RELEASED */
  /* reconnected: the engine's connections killed (the waiter's tries go
   * through the engine's command connection) */
  redisReply *r = th_cmd(&srv, "CLIENT KILL TYPE normal SKIPME yes");
  if (r)
    freeReplyObject(r);
  th_acquirer a = {.lock = l, .wait_ms = 5000, .lease_ms = 30000};
  int rc = DLOCK_EIO; /* c2's connection was killed too */
  for (int i = 0; i < 5 && rc != DLOCK_OK; i++)
    rc = dlock_acquire(l2, 0, 30000);
  TH_ASSERT_RC(rc, DLOCK_OK);
  th_acquirer_start(&a); /* subscribes again: the pub/sub connection */
  char channel[160];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 1, 5000));
  TH_ASSERT_RC(dlock_release(l2), DLOCK_OK);
  th_acquirer_join(&a);
  TH_ASSERT_RC(a.rc, DLOCK_OK);
  int n = events_wait(&log, 12);
  int reconnected = 0;
  for (int i = 7; i < n; i++)
    reconnected += log.type[i] == DLOCK_EVENT_RECONNECTED;
  if (reconnected < 1)
    for (int i = 0; i < n; i++)
      printf("\n    event %d: type %d rc %d %s ", i, log.type[i], log.rc[i],
             log.name[i]);
  CU_ASSERT(reconnected >= 1);
  CU_ASSERT_EQUAL(log.off_engine, 0);
  dlock_lock_free(l);
  dlock_lock_free(l2);
  dlock_client_close(c);
  dlock_client_close(c2);
}

typedef struct one_done {
  pthread_mutex_t mu;
  int calls, rc;
} one_done;

static void on_one_done(void *data, const dlock_result *r) {
  one_done *d = data;
  pthread_mutex_lock(&d->mu);
  d->calls++;
  d->rc = r->rc;
  pthread_mutex_unlock(&d->mu);
}

/* The operation's rc once its callback ran (bounded, 5 s); -1000 if not. */
static int one_done_wait(one_done *d) {
  for (int64_t end = th_now_ms() + 5000; th_now_ms() < end; usleep(1000)) {
    pthread_mutex_lock(&d->mu);
    int calls = d->calls, rc = d->rc;
    pthread_mutex_unlock(&d->mu);
    if (calls > 0)
      return rc;
  }
  return -1000;
}

/* Holds are timed in microseconds on a monotonic clock: 1.5 ms holds are
 * 1.5 ms (events and histogram), not whole milliseconds, and none lands in
 * the 1 us bucket. */
static void test_hold_precision(void) {
  static event_log log = {PTHREAD_MUTEX_INITIALIZER, 0, 0, {0}, {0}, {0}, {0}, {{0}}};
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.on_event = on_event;
  o.on_event_data = &log;
  dlock_client *c = th_client(&srv, &o);
  dlock_lock *l = new_lock(c, th_name("stats-hold-us"));
  int64_t under = 0;
  for (int i = 0; i < 20; i++) {
    TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
    int64_t t0 = th_now_us();
    while (th_now_us() - t0 < 1500)
      ; /* 1.5 ms held */
    TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  }
  dlock_stats s = stats_of(c);
  CU_ASSERT_EQUAL(s.hold.count, 20);
  CU_ASSERT_EQUAL(s.hold.bucket[0], 0); /* the 1 us bucket */
  for (int i = 0; i <= 10; i++) /* up to 1.024 ms: none of them */
    under += (int64_t)s.hold.bucket[i];
  CU_ASSERT_EQUAL(under, 0);
  CU_ASSERT(s.hold.sum_us >= 20 * 1500);
  /* each release's event says 1.5 ms and a little more; whole milliseconds
   * would say 1 ms for some of them */
  CU_ASSERT(events_wait(&log, 40) >= 40); /* acquired and released, 20 each */
  int released = 0;
  pthread_mutex_lock(&log.mu);
  for (int i = 0; i < log.n; i++)
    if (log.type[i] == DLOCK_EVENT_RELEASED) {
      released++;
      CU_ASSERT(log.duration_us[i] >= 1500 && log.duration_us[i] < 1000000);
    }
  pthread_mutex_unlock(&log.mu);
  CU_ASSERT_EQUAL(released, 20);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* The semaphore lock (a lock made of an expirable permit) is one acquire
 * and one release, in the statistics and in the events, blocking or async:
 * not a lock's and a permit's. Every event names the semaphore (a permit's
 * hold is kept under its deadlines key, {N}:timeout). */
static void test_semaphore_lock(void) {
  static event_log log = {PTHREAD_MUTEX_INITIALIZER, 0, 0, {0}, {0}, {0}, {0}, {{0}}};
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.on_event = on_event;
  o.on_event_data = &log;
  dlock_client *c = th_client(&srv, &o);
  char name[96];
  snprintf(name, sizeof name, "%s", th_name("stats-semlock"));
  dlock_permits *p = NULL;
  TH_ASSERT_RC(dlock_permits_new(c, name, NULL, &p), DLOCK_OK);
  TH_ASSERT_RC(dlock_permits_try_set_permits(p, 1, 0, NULL), DLOCK_OK);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_semaphore_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_EBUSY); /* 1 permit */
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  uint64_t owner = dlock_owner_id_new();
  one_done got = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
  one_done gave = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
  TH_ASSERT_RC(dlock_acquire_async(l, owner, 0, 30000, on_one_done, &got, NULL),
               DLOCK_OK);
  TH_ASSERT_RC(one_done_wait(&got), DLOCK_OK);
  TH_ASSERT_RC(dlock_release_async(l, owner, on_one_done, &gave, NULL), DLOCK_OK);
  TH_ASSERT_RC(one_done_wait(&gave), DLOCK_OK);
  dlock_stats st = stats_of(c);
  CU_ASSERT_EQUAL(st.acquired_at_once, 2);
  CU_ASSERT_EQUAL(st.acquire_busy, 1);
  CU_ASSERT_EQUAL(st.released, 2);
  CU_ASSERT_EQUAL(st.hold.count, 2);
  /* a plain lock's acquire after them: its event comes after theirs */
  char marker[96];
  snprintf(marker, sizeof marker, "%s", th_name("stats-semlock-marker"));
  dlock_lock *m = new_lock(c, marker);
  TH_ASSERT_RC(dlock_acquire(m, 0, 30000), DLOCK_OK);
  int n = events_wait(&log, 5);
  CU_ASSERT_EQUAL(n, 5);
  static const dlock_event_type want[] = {
      DLOCK_EVENT_ACQUIRED, DLOCK_EVENT_RELEASED, DLOCK_EVENT_ACQUIRED,
      DLOCK_EVENT_RELEASED, DLOCK_EVENT_ACQUIRED};
  for (int i = 0; i < n && i < 5; i++) {
    CU_ASSERT_EQUAL(log.type[i], want[i]);
    CU_ASSERT_STRING_EQUAL(log.name[i], i < 4 ? name : marker);
  }
  TH_ASSERT_RC(dlock_release(m), DLOCK_OK);
  dlock_lock_free(m);
  dlock_lock_free(l);
  dlock_permits_free(p);
  dlock_client_close(c);
}

/* GET path from 127.0.0.1:port (HTTP/1.0): the whole answer in resp (its
 * length, -1 when nothing answers). */
static ssize_t http_get(int port, const char *path, char *resp, size_t size) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  char get[1024];
  int n = snprintf(get, sizeof get, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
  size_t got = 0;
  if (write(fd, get, (size_t)n) == n) {
    ssize_t k;
    while (got < size - 1 && (k = read(fd, resp + got, size - 1 - got)) > 0)
      got += (size_t)k;
  }
  resp[got] = '\0';
  close(fd);
  return (ssize_t)got;
}

/* examples/metrics.c: a program serving its statistics over HTTP; two
 * requests, each answered with text that parses, the second showing the
 * program's own acquires. */
static void test_metrics_example(void) {
  const char *exe = getenv("DLOCK_METRICS_EXAMPLE");
  CU_ASSERT_PTR_NOT_NULL_FATAL(exe);
  int port = rs_free_port();
  char port_s[16];
  snprintf(port_s, sizeof port_s, "%d", port);
  setenv("DLOCK_REDIS_URL", srv.url, 1);
  int fds[2];
  CU_ASSERT_FATAL(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(exe, exe, port_s, "2", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char line[128] = {0}; /* "serving ...": it listens */
  CU_ASSERT(read(fds[0], line, sizeof line - 1) > 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(line, "serving"));
  static char resp[32768];
  for (int i = 0; i < 2; i++) {
    if (i == 1)
      usleep(100000); /* its worker takes the lock meanwhile */
    CU_ASSERT_FATAL(http_get(port, "/metrics", resp, sizeof resp) > 0);
    CU_ASSERT(strncmp(resp, "HTTP/1.0 200 OK\r\n", 17) == 0);
    const char *body = strstr(resp, "\r\n\r\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(body);
    CU_ASSERT(parse(body + 4, "client=\"dlock-metrics\"") > 40);
  }
  const char *at_once =
      strstr(resp, "dlock_acquires_total{outcome=\"at_once\",client=\"dlock-metrics\"} ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(at_once);
  CU_ASSERT(atol(strchr(at_once, '}') + 2) > 0);
  close(fds[0]);
  CU_ASSERT_EQUAL(th_wait_worker(pid, 10000), 0); /* done after two */
}

/* Start prog with args (NULL-terminated), its output to /dev/null. */
static pid_t spawn_quiet(char *const argv[]) {
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  return pid;
}

/* A real Prometheus server on loopback scrapes examples/metrics.c and
 * answers a quantile of dlock's histograms through its HTTP API: the text
 * is what Prometheus reads, buckets included (a histogram whose buckets
 * are not NAME_bucket gives histogram_quantile nothing). */
static void test_prometheus_scrape(void) {
  const char *exe = getenv("DLOCK_METRICS_EXAMPLE");
  CU_ASSERT_PTR_NOT_NULL_FATAL(exe);
  char dir[64], conf[128], tsdb[128], listen[64], port_s[16];
  snprintf(dir, sizeof dir, "/tmp/dlock-prom-XXXXXX");
  CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
  int port = rs_free_port(), prom_port = rs_free_port();
  snprintf(port_s, sizeof port_s, "%d", port);
  snprintf(conf, sizeof conf, "%s/prometheus.yml", dir);
  snprintf(tsdb, sizeof tsdb, "--storage.tsdb.path=%s/data", dir);
  snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", prom_port);
  FILE *f = fopen(conf, "w");
  CU_ASSERT_FATAL(f != NULL);
  fprintf(f, "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
             "scrape_configs:\n  - job_name: dlock\n    static_configs:\n"
             "      - targets: ['127.0.0.1:%d']\n", port);
  fclose(f);
  setenv("DLOCK_REDIS_URL", srv.url, 1);
  char conf_arg[160];
  snprintf(conf_arg, sizeof conf_arg, "--config.file=%s", conf);
  char *metrics[] = {(char *)exe, port_s, NULL};
  char *prom[] = {"prometheus", conf_arg, tsdb, listen, NULL};
  pid_t mp = spawn_quiet(metrics), pp = spawn_quiet(prom);
  static char resp[65536];
  const char *q = "/api/v1/query?query=histogram_quantile(0.5,"
                  "dlock_hold_seconds_bucket)";
  double quantile = -1;
  /* the event: Prometheus scraped once and answers (bounded: 60 s) */
  for (int64_t end = th_now_ms() + 60000; quantile < 0 && th_now_ms() < end;
       usleep(200000)) {
    if (http_get(prom_port, q, resp, sizeof resp) <= 0)
      continue;
    const char *v = strstr(resp, "\"value\":[");
    const char *num = v ? strchr(v + 9, '"') : NULL;
    if (num && strncmp(num + 1, "NaN", 3) != 0)
      quantile = strtod(num + 1, NULL);
  }
  CU_ASSERT(quantile > 0 && quantile < 10);
  /* and the hold histogram, through a rate over scrapes */
  const char *q2 = "/api/v1/query?query=histogram_quantile(0.9,"
                   "sum(rate(dlock_hold_seconds_bucket%5B10s%5D))by(le))";
  double hold = -1;
  for (int64_t end = th_now_ms() + 30000; hold < 0 && th_now_ms() < end;
       usleep(200000)) {
    if (http_get(prom_port, q2, resp, sizeof resp) <= 0)
      continue;
    const char *v = strstr(resp, "\"value\":[");
    const char *num = v ? strchr(v + 9, '"') : NULL;
    if (num && strncmp(num + 1, "NaN", 3) != 0)
      hold = strtod(num + 1, NULL);
  }
  CU_ASSERT(hold > 0 && hold < 10);
  kill(pp, SIGTERM);
  kill(mp, SIGTERM);
  th_wait_worker(pp, 10000);
  th_wait_worker(mp, 10000);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CU_ASSERT(system(cmd) == 0);
}

/* Bad input: NULLs and a wrong version. */
static void test_bad_input(void) {
  dlock_client *c = th_client(&srv, NULL);
  dlock_stats s;
  memset(&s, 0, sizeof s);
  TH_ASSERT_RC(dlock_client_stats(c, &s), DLOCK_EINVAL); /* version 0 */
  CU_ASSERT_PTR_NOT_NULL(strstr(dlock_errmsg(), "version"));
  s.version = DLOCK_STATS_VERSION;
  TH_ASSERT_RC(dlock_client_stats(NULL, &s), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_client_stats(c, NULL), DLOCK_EINVAL);
  char buf[8];
  TH_ASSERT_RC(dlock_client_stats_format(NULL, NULL, buf, sizeof buf, NULL),
               DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_client_stats_format(&s, NULL, NULL, 8, NULL), DLOCK_EINVAL);
  dlock_client_close(c);
}

static void add(void) {
  CU_pSuite s = CU_add_suite("stats", suite_init, suite_clean);
  CU_add_test(s, "acquires_and_releases", test_acquires_and_releases);
  CU_add_test(s, "semaphore", test_semaphore);
  CU_add_test(s, "semaphore_lock", test_semaphore_lock);
  CU_add_test(s, "watchdog_and_losses", test_watchdog_and_losses);
  CU_add_test(s, "reconnects", test_reconnects);
  CU_add_test(s, "hold_precision", test_hold_precision);
  CU_add_test(s, "prometheus_text", test_prometheus_text);
  CU_add_test(s, "events", test_events);
  CU_add_test(s, "metrics_example", test_metrics_example);
  CU_add_test(s, "prometheus_scrape", test_prometheus_scrape);
  CU_add_test(s, "bad_input", test_bad_input);
}

int main(int argc, char **argv) { return th_main(argc, argv, add, NULL); }
