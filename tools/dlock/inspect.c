/* `dlock status`, `dlock list` and `dlock watch`: what is stored under a
 * name, under a pattern, and as it changes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlock/dlock.h>

#include "cli.h"

static void status_help(void) {
  printf("usage: dlock status [--json] NAME\n"
         "Print what is stored under NAME: its kind (lock, fair lock, election,\n"
         "read-write lock, grouped multi-lock, latch or semaphore count,\n"
         "expirable-permit semaphore), holders and their hold counts (a group:\n"
         "the values each holds), remaining TTL and fair-queue length.\n");
}

static void print_status_json(const char *name, const dlock_inspection *in) {
  printf("{\"name\": ");
  cli_json_str(stdout, name);
  printf(", \"kind\": ");
  cli_json_str(stdout, in->kind);
  printf(", \"ttl_ms\": %" PRId64 ", \"queue_length\": %" PRId64, in->ttl_ms,
         in->queue_length);
  if (in->has_count)
    printf(", \"count\": %" PRId64, in->count);
  if (!strcmp(in->kind, "permit semaphore"))
    printf(", \"permits_held\": %" PRId64 ", \"permit_expires_ms\": %" PRId64,
           in->permits_held, in->permit_expires_ms);
  printf(", \"holders\": {");
  for (size_t k = 0; k < in->nholders; k++) {
    printf("%s", k ? ", " : "");
    cli_json_str(stdout, in->holders[k].owner);
    printf(": %" PRId64, in->holders[k].count);
  }
  printf("}");
  if (in->holder_clients) { /* who: the holders' connection names */
    printf(", \"holder_clients\": {");
    int first = 1;
    for (size_t k = 0; k < in->nholders; k++) {
      if (!in->holder_clients[k])
        continue;
      printf("%s", first ? "" : ", ");
      first = 0;
      cli_json_str(stdout, in->holders[k].owner);
      printf(": ");
      cli_json_str(stdout, in->holder_clients[k]);
    }
    printf("}");
  }
  if (in->mode) {
    printf(", \"mode\": ");
    cli_json_str(stdout, in->mode);
  }
  printf("}");
}

static void print_status_text(const char *name, const dlock_inspection *in) {
  printf("name:    %s\nkind:    %s%s\n", name, in->kind,
         !strcmp(in->kind, "count")
             ? " (a latch's count or a semaphore's available permits)"
             : "");
  if (in->has_count)
    printf("count:   %" PRId64 "%s\n", in->count,
           !strcmp(in->kind, "permit semaphore") ? " available" : "");
  if (!strcmp(in->kind, "permit semaphore")) {
    printf("held:    %" PRId64 " permits", in->permits_held);
    if (in->permit_expires_ms >= 0)
      printf(", the first expires in %" PRId64 " ms", in->permit_expires_ms);
    printf("\n");
  }
  if (in->mode)
    printf("mode:    %s\n", in->mode);
  for (size_t k = 0; k < in->nholders; k++) {
    printf("holder:  %s %" PRId64, in->holders[k].owner, in->holders[k].count);
    if (in->holder_clients && in->holder_clients[k])
      printf(" (connection %s)", in->holder_clients[k]);
    printf("\n");
  }
  printf("ttl:     %" PRId64 " ms\n", in->ttl_ms);
  if (in->queue_length)
    printf("queue:   %" PRId64 " waiting\n", in->queue_length);
}

int cmd_status(int argc, char **argv) {
  int as_json = 0, i, status;
  const cli_opt opts[] = {{"--json", CLI_FLAG, &as_json, 0}, {NULL, 0, NULL, 0}};
  if ((status = cli_options("status", argc, argv, opts, status_help, 1, &i)) != 0)
    return status < 0 ? 0 : status;
  if (argc - i != 1)
    return cli_usage_error("status: expected NAME");
  dlock_client *c = NULL;
  dlock_inspection *in = NULL;
  status = cli_open_first(&c);
  if (status)
    return status;
  int rc = dlock_inspect(c, argv[i], NULL, &in);
  if (rc == DLOCK_OK && as_json) {
    print_status_json(argv[i], in);
    printf("\n");
  } else if (rc == DLOCK_OK)
    print_status_text(argv[i], in);
  else
    status = cli_fail(rc, argv[i]);
  dlock_inspection_free(in);
  dlock_client_close(c);
  return status;
}

static void list_help(void) {
  printf("usage: dlock list [--json] [--limit N] [--scans N] [--count N] "
         "[PATTERN]\n"
         "List the locks, latches and semaphores whose names match PATTERN (a\n"
         "Redis glob, default *) with what dlock status shows of each: kind,\n"
         "holders and hold counts, remaining TTL, queue length, count. Keys are\n"
         "found with SCAN (COUNT --count, default 1000; never KEYS), on a\n"
         "cluster master by master; it stops after --limit objects (default\n"
         "1000) or --scans SCAN calls (default 1000) and says so. Each key that\n"
         "matches is inspected: other keys are left out. --json: a JSON array.\n");
}

/* Is kind (dlock_inspection.kind: what was found) one of dlock's layouts? */
static int is_dlock_object(const char *kind) {
  return !strcmp(kind, "lock") || !strcmp(kind, "fair lock") ||
         !strcmp(kind, "election") ||
         !strcmp(kind, "rwlock") || !strcmp(kind, "group") ||
         !strcmp(kind, "count") || !strcmp(kind, "permit semaphore");
}

/* The text of what dlock status shows, on one line (without the name and
 * the TTL, which changes all the time). */
static void status_line(const dlock_inspection *in, char *out, size_t n) {
  size_t k = (size_t)snprintf(out, n, "%s", in->kind);
#define ADD(...)                                                               \
  do {                                                                         \
    if (k < n)                                                                 \
      k += (size_t)snprintf(out + k, n - k, __VA_ARGS__);                      \
  } while (0)
  if (in->mode)
    ADD(" mode=%s", in->mode);
  if (in->has_count)
    ADD(" count=%" PRId64, in->count);
  if (in->queue_length)
    ADD(" queue=%" PRId64, in->queue_length);
  if (!strcmp(in->kind, "permit semaphore"))
    ADD(" held=%" PRId64, in->permits_held);
  for (size_t h = 0; h < in->nholders; h++)
    ADD(" %s%s:%" PRId64, h ? "" : "holders=", in->holders[h].owner,
        in->holders[h].count);
#undef ADD
}

/* One object's line: its name, what dlock watch shows of it, its TTL. */
static void print_list_text(const char *name, const dlock_inspection *in) {
  char line[4096];
  status_line(in, line, sizeof line);
  printf("%-40s %s ttl=%" PRId64 "\n", name, line, in->ttl_ms);
}

/* What a listing has printed so far, and where it stops. */
typedef struct listing {
  int as_json;
  int64_t limit, shown;
  int cut;    /* --limit left names of a page unlooked at */
  int status; /* an exit status once a call failed */
} listing;

/* Inspect and print the dlock objects among page's names (other keys are
 * left out), up to the limit. */
static void list_page(dlock_client *c, const dlock_listing *page, listing *ls) {
  size_t k = 0;
  for (; k < page->n && ls->shown < ls->limit && ls->status == 0; k++) {
    dlock_lock_opts o = DLOCK_LOCK_OPTS_INIT;
    o.name_len = page->lens[k];
    dlock_inspection *in = NULL;
    int rc = dlock_inspect(c, page->names[k], &o, &in);
    if (rc != DLOCK_OK) {
      ls->status = cli_fail(rc, page->names[k]);
    } else if (is_dlock_object(in->kind)) {
      if (ls->as_json) {
        printf("%s", ls->shown ? "," : "");
        print_status_json(page->names[k], in);
        printf("\n");
      } else {
        print_list_text(page->names[k], in);
      }
      ls->shown++;
    }
    dlock_inspection_free(in);
  }
  if (ls->status == 0 && k < page->n)
    ls->cut = 1; /* names of this page not looked at: maybe objects */
}

int cmd_list(int argc, char **argv) {
  listing ls = {.limit = 1000};
  int64_t count = 1000, max_scans = 1000;
  int i, status;
  const cli_opt opts[] = {{"--json", CLI_FLAG, &ls.as_json, 0},
                          {"--limit", CLI_COUNT, &ls.limit, 1},
                          {"--count", CLI_COUNT, &count, 1},
                          {"--scans", CLI_COUNT, &max_scans, 1},
                          {NULL, 0, NULL, 0}};
  if ((status = cli_options("list", argc, argv, opts, list_help, 1, &i)) != 0)
    return status < 0 ? 0 : status;
  if (argc - i > 1)
    return cli_usage_error("list: expected at most one PATTERN");
  const char *pattern = i < argc ? argv[i] : "*";
  dlock_client *c = NULL;
  if ((status = cli_open_first(&c)) != 0)
    return status;
  uint64_t cursor = 0;
  int64_t scans = 0;
  int more = 1;
  if (ls.as_json)
    printf("[\n");
  while (more && ls.shown < ls.limit && scans < max_scans && ls.status == 0) {
    dlock_listing *page = NULL;
    int rc = dlock_list(c, pattern, &cursor, (size_t)count, &page);
    if (rc != DLOCK_OK) {
      ls.status = cli_fail(rc, pattern);
      break;
    }
    scans++;
    more = cursor != 0;
    list_page(c, page, &ls);
    ls.cut = ls.cut || (more && ls.status == 0 &&
                        (ls.shown >= ls.limit || scans >= max_scans));
    dlock_listing_free(page);
  }
  if (ls.as_json)
    printf("]\n");
  if (ls.status == 0) /* a failure's message is the last word, not a count */
    fprintf(stderr, "%" PRId64 " object%s in %" PRId64 " SCAN call%s%s\n",
            ls.shown, ls.shown == 1 ? "" : "s", scans, scans == 1 ? "" : "s",
            !ls.cut                ? ""
            : ls.shown >= ls.limit ? " (stopped at --limit: more may match)"
                                   : " (stopped at --scans: more may match)");
  dlock_client_close(c);
  return ls.status;
}

static void watch_help(void) {
  printf("usage: dlock watch [--json] [--every D] [--changes N] [--for D] NAME\n"
         "Show what dlock status shows of NAME, a line each time it changes,\n"
         "time-stamped: holders and hold counts, TTL, queue, count. It looks\n"
         "again at once when the object announces a change (a release, a\n"
         "count-down, permits given back) and every D (--every, default 1s)\n"
         "for what is not announced (acquires, a fair lock's hand-offs, leases\n"
         "running out). One line per change, so it suits pipes; --json: one\n"
         "JSON object per line. It runs until interrupted, --changes N lines,\n"
         "or --for D.\n");
}

/* One look at name for watch: a time-stamped line when what it shows
 * changed from last (kept there). 1 a line, 0 none, or a library error. */
static int watch_look(dlock_client *c, const char *name, int as_json,
                      char last[4096]) {
  dlock_inspection *in = NULL;
  int rc = dlock_inspect(c, name, NULL, &in);
  if (rc != DLOCK_OK)
    return rc;
  char line[4096];
  status_line(in, line, sizeof line);
  int changed = strcmp(line, last) != 0;
  if (changed) {
    snprintf(last, 4096, "%s", line);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char when[32];
    strftime(when, sizeof when, "%H:%M:%S", localtime(&now.tv_sec));
    if (as_json) {
      printf("{\"time\": \"%s.%03ld\", \"status\": ", when,
             now.tv_nsec / 1000000);
      print_status_json(name, in);
      printf("}\n");
    } else {
      printf("%s.%03ld %s ttl=%" PRId64 "\n", when, now.tv_nsec / 1000000, line,
             in->ttl_ms);
    }
    fflush(stdout);
  }
  dlock_inspection_free(in);
  return changed;
}

static int64_t ms_since(const struct timespec *t0) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

int cmd_watch(int argc, char **argv) {
  int as_json = 0, i, status;
  int64_t every = 1000, for_ms = -1, changes = -1;
  const cli_opt opts[] = {{"--json", CLI_FLAG, &as_json, 0},
                          {"--changes", CLI_COUNT, &changes, 1},
                          {"--every", CLI_DURATION, &every, 0},
                          {"--for", CLI_DURATION, &for_ms, 0},
                          {NULL, 0, NULL, 0}};
  if ((status = cli_options("watch", argc, argv, opts, watch_help, 1, &i)) != 0)
    return status < 0 ? 0 : status;
  if (argc - i != 1)
    return cli_usage_error("watch: expected NAME");
  const char *name = argv[i];
  dlock_client *c = NULL;
  if ((status = cli_open_first(&c)) != 0)
    return status;
  dlock_watcher *w = NULL;
  int rc = dlock_watcher_new(c, name, NULL, &w);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  char last[4096] = "";
  int64_t shown = 0;
  while (rc == DLOCK_OK) {
    if ((rc = watch_look(c, name, as_json, last)) < 0)
      break;
    shown += rc;
    rc = DLOCK_OK;
    int64_t ran = ms_since(&t0);
    if ((changes > 0 && shown >= changes) || (for_ms >= 0 && ran >= for_ms))
      break;
    int64_t wait = for_ms >= 0 && for_ms - ran < every ? for_ms - ran : every;
    rc = dlock_watcher_wait(w, wait);
    if (rc == 0 && for_ms >= 0 && wait < every)
      break; /* --for is over: no look after it */
    rc = rc < 0 ? rc : DLOCK_OK;
  }
  if (rc < 0)
    status = cli_fail(rc, name);
  dlock_watcher_free(w);
  dlock_client_close(c);
  return status;
}
