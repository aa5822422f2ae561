/* Error codes, their text, and the per-thread detail message. The message
 * grows to whatever its text needs: it is never cut (out of memory, it is
 * what fits), and set aside whole (dlock__error_keep). */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/policy.h"

static _Thread_local char small[DLOCK__ERR_SMALL]; /* most messages */
static _Thread_local char *big;       /* a longer one's, NULL until then */
static _Thread_local size_t bigcap;
#define errmsg (big ? big : small)
#define errcap (big ? bigcap : sizeof small)

static pthread_key_t big_key; /* frees a thread's grown buffer at its exit */
static pthread_once_t big_once = PTHREAD_ONCE_INIT;
static void big_free(void *p) { free(p); }
static void big_init(void) { pthread_key_create(&big_key, big_free); }

/* Room for n bytes (the NUL included), or 0 when out of memory (the
 * message is then cut to what fits, the one case it is). */
static int room(size_t n) {
  if (n <= errcap)
    return 1;
  char *p = malloc(n);
  if (p == NULL)
    return 0;
  pthread_once(&big_once, big_init);
  free(big);
  pthread_setspecific(big_key, p);
  big = p;
  bigcap = n;
  return 1;
}

/* The message: prefix (may be NULL) and fmt's text, in a buffer that grows
 * as needed. The text is made first, so an argument may be the message
 * itself (dlock_errmsg()); prefix must not point into it. */
static void set(const char *prefix, const char *fmt, va_list ap) {
  char local[512];
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(local, sizeof local, fmt, ap);
  char *text = local;
  if (n < 0) {
    n = 0;
    local[0] = '\0';
  } else if ((size_t)n >= sizeof local) {
    text = malloc((size_t)n + 1);
    if (text)
      vsnprintf(text, (size_t)n + 1, fmt, again);
    else /* out of memory: what fits */
      text = local, n = (int)sizeof local - 1;
  }
  va_end(again);
  size_t p = prefix ? strlen(prefix) : 0, t = (size_t)n;
  if (!room(p + t + 1)) { /* out of memory: what fits */
    p = p < errcap - 1 ? p : errcap - 1;
    t = t < errcap - 1 - p ? t : errcap - 1 - p;
  }
  if (p)
    memcpy(errmsg, prefix, p);
  memcpy(errmsg + p, text, t);
  errmsg[p + t] = '\0';
  if (text != local)
    free(text);
}

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

/* The thread's grown buffer becomes p (NULL: none, small is the buffer). */
static void set_big(char *p, size_t cap) {
  pthread_once(&big_once, big_init);
  big = p;
  bigcap = cap;
  pthread_setspecific(big_key, p);
}

void dlock__error_keep(dlock__kept_error *k) {
  k->big = big;
  k->cap = bigcap;
  if (big == NULL)
    memcpy(k->small, small, strlen(small) + 1);
  set_big(NULL, 0);
  small[0] = '\0';
}

const char *dlock__kept_text(const dlock__kept_error *k) {
  return k->big ? k->big : k->small;
}

void dlock__error_restore(dlock__kept_error *k) {
  free(big); /* what the calls in between made */
  set_big(k->big, k->cap);
  if (k->big == NULL)
    memcpy(small, k->small, strlen(k->small) + 1);
  k->big = NULL;
  k->small[0] = '\0';
}

void dlock__error_drop(dlock__kept_error *k) {
  free(k->big);
  k->big = NULL;
  k->small[0] = '\0';
}

int dlock__fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  set(NULL, fmt, ap);
  va_end(ap);
  return code;
}

const char *dlock__fd_hint(int uv_rc) {
  return uv_rc == -EMFILE || uv_rc == -ENFILE
             ? " (the process is out of file descriptors: raise its "
               "RLIMIT_NOFILE, `ulimit -n`, or close some)"
             : "";
}

int dlock__oom(void) {
  snprintf(errmsg, errcap, "out of memory");
  return DLOCK_ENOMEM;
}

int dlock__fail_more(int code, const char *fmt, ...) {
  char *now = strdup(errmsg);
  va_list ap;
  va_start(ap, fmt);
  set(now ? now : "", fmt, ap);
  va_end(ap);
  free(now);
  return code;
}

int dlock__fail_before(int code, const char *head) {
  return dlock__fail(code, "%s%s", head, dlock_errmsg()); /* set() copes */
}

int dlock__fail_reply(const redisReply *reply, const char *what) {
  if (reply == NULL)
    return dlock__fail(DLOCK_EPROTO, "%s: no reply", what);
  if (reply->type == REDIS_REPLY_ERROR) {
    /* one name, two kinds: the scripts refuse (WRONGKIND) or Redis does
     * (WRONGTYPE); either way nothing was changed */
    /* a redis:// client on a cluster node (a cluster client follows
     * these itself) */
    dlock__class k = dlock__classify(reply);
    if (k == DLOCK__C_MOVED || k == DLOCK__C_ASK)
      return dlock__fail(DLOCK_ECONFIG, "%s: the server is a Redis Cluster "
                         "node (it answered %.*s); open the client with "
                         "redis+cluster://host:port (docs/cluster.md)", what,
                         (int)reply->len, reply->str);
    /* Redis puts "ERR " before a script's error without a code */
    if (strstr(reply->str, "NON_REENTRANT_REACQUIRE") != NULL)
      return dlock__fail(DLOCK_EREENTRY, "this owner already holds it and the "
                         "lock is not reentrant: a second acquire is refused "
                         "(the hold stays, counted once); release it first");
    if (strncmp(reply->str, "WRONGKIND ", 10) == 0)
      return dlock__fail(DLOCK_EKIND, "%.*s", (int)reply->len - 10,
                         reply->str + 10);
    if (strncmp(reply->str, "WRONGTYPE", 9) == 0) /* said once, in words */
      return dlock__fail(DLOCK_EKIND,
                         "its key holds data of another type (a lock's hash "
                         "where this call keeps a count, a count where it "
                         "keeps a lock, or data that is not dlock's); nothing "
                         "was changed");
    /* an ACL refusal: NOPERM for the command itself (its keys, channels,
     * or the command); for a command inside a script Redis 7.0 says "The
     * user executing the script can't ...", Valkey 8 (and later Redis) "ACL
     * failure in script: ..." */
    if (strncmp(reply->str, "NOPERM", 6) == 0 ||
        strstr(reply->str, "The user executing the script can't") != NULL ||
        strstr(reply->str, "ACL failure in script") != NULL)
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
