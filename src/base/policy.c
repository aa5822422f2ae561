/* Server answers by what they say about the call (policy.h). */
#include "base/policy.h"

#include <stdio.h>
#include <string.h>

dlock__class dlock__classify(const redisReply *r) {
  static const struct {
    const char *prefix;
    dlock__class k;
  } codes[] = {{"NOSCRIPT", DLOCK__C_NOSCRIPT},
               {"MOVED ", DLOCK__C_MOVED},
               {"ASK ", DLOCK__C_ASK},
               {"TRYAGAIN", DLOCK__C_TRYAGAIN},
               {"CLUSTERDOWN", DLOCK__C_CLUSTERDOWN},
               {"READONLY", DLOCK__C_READONLY},
               {"LOADING ", DLOCK__C_PASSING},
               {"BUSY ", DLOCK__C_PASSING},
               {"NOREPLICAS ", DLOCK__C_PASSING},
               {"MASTERDOWN ", DLOCK__C_PASSING},
               {"OOM ", DLOCK__C_PASSING}};
  if (r == NULL || r->type != REDIS_REPLY_ERROR)
    return DLOCK__C_VALUE;
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (strncmp(r->str, codes[i].prefix, strlen(codes[i].prefix)) == 0)
      return codes[i].k;
  return DLOCK__C_ERROR;
}

int dlock__class_cluster(dlock__class k) {
  return k == DLOCK__C_MOVED || k == DLOCK__C_ASK || k == DLOCK__C_TRYAGAIN ||
         k == DLOCK__C_CLUSTERDOWN;
}

/* What each passing state means and what to check. */
static const struct {
  const char *code, *advice;
} passing[] = {
    {"LOADING", "the server is loading its data after a restart; calls "
                "succeed once it has loaded"},
    {"BUSY", "a script has run past the server's busy-reply-threshold "
             "(lua-time-limit); SCRIPT KILL ends it if it wrote nothing"},
    {"NOREPLICAS", "fewer replicas are connected than the server's "
                   "min-replicas-to-write asks (check min-replicas-to-write, "
                   "min-replicas-max-lag and its replicas' links: INFO "
                   "replication)"},
    {"MASTERDOWN", "this server is a replica that lost its master "
                   "(replica-serve-stale-data no): point dlock at the master "
                   "(or at Sentinel: redis+sentinel://)"},
    {"OOM", "the server's memory is at its maxmemory and its "
            "maxmemory-policy refuses writes: free memory or raise maxmemory "
            "(INFO memory)"}};

void dlock__passing_why(const redisReply *r, int refusals, int64_t ms,
                        char *buf, size_t n) {
  const char *advice = "a passing state of the server";
  for (size_t i = 0; i < sizeof passing / sizeof passing[0]; i++)
    if (strncmp(r->str, passing[i].code, strlen(passing[i].code)) == 0)
      advice = passing[i].advice;
  /* the server's first sentence: the script's name and line add nothing */
  size_t len = r->len;
  const char *dot = memchr(r->str, '.', len);
  if (dot)
    len = (size_t)(dot - r->str);
  snprintf(buf, n, "the server refused the call for %lld ms (%d times): "
           "%.*s; %s", (long long)ms, refusals, (int)len, r->str, advice);
}

#define BACKOFF_FIRST_MS 25
#define BACKOFF_MAX_MS 1000

int64_t dlock__backoff_next(int64_t last_ms) {
  int64_t next = last_ms > 0 ? last_ms * 2 : BACKOFF_FIRST_MS;
  return next < BACKOFF_MAX_MS ? next : BACKOFF_MAX_MS;
}

const char *dlock__push_kind(const char *k) {
  if (strcmp(k, "smessage") == 0 || strcmp(k, "ssubscribe") == 0 ||
      strcmp(k, "sunsubscribe") == 0)
    return k + 1;
  return k;
}
