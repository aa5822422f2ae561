/* Server answers by what they say about the call (classify.h). */
#include "base/policy.h"

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
               {"READONLY", DLOCK__C_READONLY}};
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
