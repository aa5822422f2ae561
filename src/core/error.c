/* Error codes, their text, and the per-thread detail message. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

static _Thread_local char errmsg[512];

const char *dlock_strerror(int code) {
  switch (code) {
  case DLOCK_OK:
    return "success";
#define DLOCK_ERR_TEXT(name, num, text) \
  case DLOCK_##name:                    \
    return text;
    DLOCK_ERRNO_MAP(DLOCK_ERR_TEXT)
#undef DLOCK_ERR_TEXT
  default:
    return "unknown error";
  }
}

const char *dlock_errname(int code) {
  switch (code) {
  case DLOCK_OK:
    return "DLOCK_OK";
#define DLOCK_ERR_NAME(name, num, text) \
  case DLOCK_##name:                    \
    return "DLOCK_" #name;
    DLOCK_ERRNO_MAP(DLOCK_ERR_NAME)
#undef DLOCK_ERR_NAME
  default:
    return "DLOCK_UNKNOWN";
  }
}

const char *dlock_errmsg(void) { return errmsg; }

void dlock__clear_error(void) { errmsg[0] = '\0'; }

int dlock__fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(errmsg, sizeof errmsg, fmt, ap);
  va_end(ap);
  return code;
}

int dlock__fail_reply(const redisReply *reply, const char *what) {
  if (reply == NULL)
    return dlock__fail(DLOCK_EPROTO, "%s: no reply", what);
  if (reply->type == REDIS_REPLY_ERROR) {
    /* one name, two kinds: the scripts refuse (WRONGKIND) or Redis does
     * (WRONGTYPE); either way nothing was changed */
    /* a redis:// client on a cluster node (a cluster client follows
     * these itself) */
    if (strncmp(reply->str, "MOVED ", 6) == 0 || strncmp(reply->str, "ASK ", 4) == 0)
      return dlock__fail(DLOCK_EIO, "%s: %.*s: the server is a Redis Cluster "
                         "node; open the client with redis+cluster://host:port "
                         "(docs/cluster.md)", what, (int)reply->len, reply->str);
    if (strncmp(reply->str, "WRONGKIND ", 10) == 0)
      return dlock__fail(DLOCK_EKIND, "%.*s", (int)reply->len - 10,
                         reply->str + 10);
    if (strncmp(reply->str, "WRONGTYPE", 9) == 0)
      return dlock__fail(DLOCK_EKIND,
                         "%s: the name holds another kind of object (a lock's "
                         "hash where a count is kept, a latch's or semaphore's "
                         "count where a lock is, or data that is not dlock's): "
                         "%.*s", what, (int)reply->len, reply->str);
    /* an ACL refusal: NOPERM for the command itself (its keys, channels,
     * or the command), "can't" for a command inside a script */
    if (strncmp(reply->str, "NOPERM", 6) == 0 ||
        strstr(reply->str, "The user executing the script can't") != NULL)
      return dlock__fail(DLOCK_EPERM,
                         "the ACL user may not do this: %.*s (the commands, "
                         "keys and channels dlock needs are in dlock's "
                         "docs/security.md; `dlock check` tests a URL)",
                         (int)reply->len, reply->str);
    return dlock__fail(DLOCK_EREDIS, "%s: %.*s", what, (int)reply->len,
                       reply->str);
  }
  return dlock__fail(DLOCK_EPROTO, "%s: unexpected reply of type %d", what,
                     reply->type);
}
