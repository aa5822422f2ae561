/* `dlock leader`: who leads an election, and with --watch every change
 * (dlock_election_observe: pub/sub, no polling). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlock/dlock.h>

#include "cli.h"

static void leader_help(void) {
  printf("usage: dlock leader [--json] [--watch [--changes N] [--for D]] NAME\n"
         "Print who leads the election NAME (`dlock elect`, dlock/election.h):\n"
         "  leader TERM VALUE (owner O, since S, version V)\n"
         "or `none (last term TERM)`. --json: one object, {\"name\", \"leading\",\n"
         "\"term\", \"version\", \"since_ms\", \"owner\", \"value\", \"lease_ms\"}.\n"
         "--watch: the state, then a line per change (elected, proclaimed,\n"
         "vacant) as the election's messages tell it; it runs until\n"
         "interrupted, --changes N lines, or --for D. A line marked resync\n"
         "follows a dropped connection: changes before it may be missing.\n");
}

static const char *change_word(int change) {
  return change == DLOCK_ELECTED ? "elected"
         : change == DLOCK_PROCLAIMED ? "proclaimed"
                                      : "vacant";
}

/* One state or change on stdout (change 0: a state read). */
static void print_leader(const char *name, const dlock_leader *l, int change,
                         int resync, int as_json) {
  if (as_json) {
    printf("{\"name\":");
    cli_json_str(stdout, name);
    if (change)
      printf(",\"change\":\"%s\",\"resync\":%s", change_word(change),
             resync ? "true" : "false");
    printf(",\"leading\":%s,\"term\":%" PRId64 ",\"version\":%" PRId64
           ",\"since_ms\":%" PRId64 ",\"owner\":",
           l->leading ? "true" : "false", l->term, l->version, l->since_ms);
    cli_json_str(stdout, l->owner);
    printf(",\"value\":");
    cli_json_bytes(stdout, l->value ? l->value : "", l->value_len);
    printf(",\"lease_ms\":%" PRId64 "}\n", l->lease_ms);
  } else if (!l->leading) {
    printf(change ? "vacant (term %" PRId64 " ended)%s\n"
                  : "none (last term %" PRId64 ")%s\n",
           l->term, resync ? " resync" : "");
  } else {
    /* since: the server's clock as UTC to the millisecond (the number
     * stays in --json) */
    char since[40] = "?";
    time_t secs = (time_t)(l->since_ms / 1000);
    struct tm tm;
    if (l->since_ms >= 0 && gmtime_r(&secs, &tm) != NULL) {
      size_t n = strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%S", &tm);
      snprintf(since + n, sizeof since - n, ".%03dZ", (int)(l->since_ms % 1000));
    }
    printf("%sleader %" PRId64 "%s%.*s (owner %s, since %s, version %" PRId64
           ")%s\n",
           change ? change == DLOCK_ELECTED ? "elected " : "proclaimed " : "",
           l->term, l->value_len ? " " : "", (int)l->value_len,
           l->value ? l->value : "", l->owner, since, l->version,
           resync ? " resync" : "");
  }
  fflush(stdout);
}

/* What the observer told, for the main thread. */
typedef struct watch_state {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  const char *name;
  int as_json;
  int64_t lines;
  int ended, end_rc;
} watch_state;

static void observed(void *data, const dlock_result *r) {
  watch_state *ws = data;
  pthread_mutex_lock(&ws->mu);
  if (r->election) {
    const dlock_election_event *ev = r->election;
    print_leader(ws->name, &ev->leader, ws->lines ? (int)ev->change : 0,
                 ev->resync, ws->as_json);
    ws->lines++;
  } else {
    ws->ended = 1;
    ws->end_rc = r->rc;
  }
  pthread_cond_broadcast(&ws->cv);
  pthread_mutex_unlock(&ws->mu);
}

/* --watch: until changes lines (the state's first), for_ms, or the end. */
static int watch(dlock_election *e, const char *name, int as_json,
                 int64_t changes, int64_t for_ms) {
  watch_state ws = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, name,
                    as_json, 0, 0, 0};
  cli_cond_init(&ws.cv);
  dlock_op op = 0;
  int rc = dlock_election_observe(e, observed, &ws, &op);
  if (rc != DLOCK_OK)
    return rc;
  struct timespec end = cli_deadline(for_ms);
  pthread_mutex_lock(&ws.mu);
  while (!ws.ended && (changes <= 0 || ws.lines < changes + 1)) {
    if (for_ms < 0)
      pthread_cond_wait(&ws.cv, &ws.mu);
    else if (pthread_cond_timedwait(&ws.cv, &ws.mu, &end) != 0)
      break;
  }
  int ended = ws.ended;
  pthread_mutex_unlock(&ws.mu);
  if (!ended)
    dlock_cancel(op);
  pthread_mutex_lock(&ws.mu);
  while (!ws.ended)
    pthread_cond_wait(&ws.cv, &ws.mu);
  rc = ws.end_rc == DLOCK_ECANCELED ? DLOCK_OK : ws.end_rc;
  pthread_mutex_unlock(&ws.mu);
  return rc;
}

int cmd_leader(int argc, char **argv) {
  int as_json = 0, watching = 0, i, status;
  int64_t changes = -1, for_ms = -1;
  const cli_opt opts[] = {{"--json", CLI_FLAG, &as_json, 0},
                          {"--watch", CLI_FLAG, &watching, 0},
                          {"--changes", CLI_COUNT, &changes, 1},
                          {"--for", CLI_DURATION, &for_ms, 0},
                          {NULL, 0, NULL, 0}};
  if ((status = cli_options("leader", argc, argv, opts, leader_help, 1, &i)) != 0)
    return status < 0 ? 0 : status;
  if (argc - i != 1)
    return cli_usage_error("leader: expected NAME");
  if (!watching && (changes > 0 || for_ms >= 0))
    return cli_usage_error("leader: --changes and --for go with --watch");
  const char *name = argv[i];
  dlock_client *c = NULL;
  if ((status = cli_open_first(&c)) != 0)
    return status;
  dlock_election *e = NULL;
  int rc = dlock_election_new(c, name, NULL, &e);
  dlock_leader l;
  if (rc == DLOCK_OK && watching) {
    rc = watch(e, name, as_json, changes, for_ms);
  } else if (rc == DLOCK_OK && (rc = dlock_election_leader(e, &l)) == DLOCK_OK) {
    print_leader(name, &l, 0, 0, as_json);
    dlock_leader_clear(&l);
  }
  if (rc != DLOCK_OK)
    status = cli_fail(rc, name);
  dlock_election_free(e);
  dlock_client_close(c);
  return status;
}
