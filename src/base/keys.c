/* Every key and channel name dlock builds from an object's name N, in one
 * place: the table below is docs/wire.md's layout. */
#include <string.h>

#include "base/base.h"

/* Redisson's rule (RedissonObject.prefixName/suffixName): a name that
 * contains a '{' anywhere is used as it is; any other is wrapped as {N}. It
 * is not the cluster's hash-tag rule: "a{b" and "a{}b" have no valid tag and
 * still stay unwrapped, so that C and Java clients compute the same names. */
static int unwrapped(const char *name, size_t len) {
  return memchr(name, '{', len) != NULL;
}

int dlock__key_prefix(dlock__buf *b, const char *prefix, const char *name,
                      size_t len) {
  int bare = unwrapped(name, len);
  if (dlock__buf_printf(b, "%s:%s", prefix, bare ? "" : "{") != DLOCK_OK ||
      dlock__buf_add(b, name, len) != DLOCK_OK ||
      dlock__buf_add(b, "}", bare ? 0 : 1) != DLOCK_OK)
    return dlock__oom();
  return DLOCK_OK;
}

int dlock__key_suffix(dlock__buf *b, const char *name, size_t len,
                      const char *suffix) {
  int bare = unwrapped(name, len);
  if (dlock__buf_add(b, "{", bare ? 0 : 1) != DLOCK_OK ||
      dlock__buf_add(b, name, len) != DLOCK_OK ||
      dlock__buf_printf(b, "%s:%s", bare ? "" : "}", suffix) != DLOCK_OK)
    return dlock__oom();
  return DLOCK_OK;
}

static const struct {
  enum { PREFIX, SUFFIX, WRAP } how;
  const char *text; /* PREFIX: P of P:{N}; SUFFIX: S of {N}:S; WRAP: T of T{N} */
  const char *tail; /* appended after the name ("" none) */
} layout[] = {
    [DLOCK__KEY_LOCK_CHANNEL] = {PREFIX, "redisson_lock__channel", ""},
    [DLOCK__KEY_LOCK_TOKEN] = {PREFIX, "redisson_lock_token", ""},
    [DLOCK__KEY_UNLOCK_LATCH] = {PREFIX, "redisson_unlock_latch", ":"},
    [DLOCK__KEY_FAIR_QUEUE] = {PREFIX, "redisson_lock_queue", ""},
    [DLOCK__KEY_FAIR_TIMEOUT] = {PREFIX, "redisson_lock_timeout", ""},
    [DLOCK__KEY_FAIR_ALIVE] = {PREFIX, "dlock_fair_alive", ""},
    [DLOCK__KEY_RWLOCK_CHANNEL] = {PREFIX, "redisson_rwlock", ""},
    [DLOCK__KEY_TAG] = {SUFFIX, NULL, ""},
    /* plain concatenation: the braces are there even when N has a tag */
    [DLOCK__KEY_LATCH_CHANNEL] = {WRAP, "redisson_countdownlatch__channel__", ""},
    [DLOCK__KEY_SEM_CHANNEL] = {PREFIX, "redisson_sc", ""},
    [DLOCK__KEY_SEM_TAKE] = {PREFIX, "dlock_semaphore_take", ":"},
    [DLOCK__KEY_SEM_RELEASE] = {PREFIX, "dlock_semaphore_release", ":"},
    [DLOCK__KEY_PERMITS_TIMEOUT] = {SUFFIX, "timeout", ""},
    [DLOCK__KEY_PERMITS_LATCH] = {PREFIX, "dlock_permits_release_latch", ":"},
    [DLOCK__KEY_FENCE] = {PREFIX, "dlock_fence", ""},
    [DLOCK__KEY_ELECTION] = {PREFIX, "dlock_election", ""},
    [DLOCK__KEY_ELECTION_CHANNEL] = {PREFIX, "dlock_election_channel", ""},
};

static int wrapped_name(dlock__buf *b, const char *name, size_t len) {
  int bare = unwrapped(name, len);
  if (dlock__buf_add(b, "{", bare ? 0 : 1) != DLOCK_OK ||
      dlock__buf_add(b, name, len) != DLOCK_OK ||
      dlock__buf_add(b, "}", bare ? 0 : 1) != DLOCK_OK)
    return dlock__oom();
  return DLOCK_OK;
}

int dlock__key(dlock__buf *b, dlock__key_role kind, const char *name,
               size_t len) {
  int rc;
  switch (layout[kind].how) {
  case PREFIX:
    rc = dlock__key_prefix(b, layout[kind].text, name, len);
    break;
  case SUFFIX:
    rc = layout[kind].text ? dlock__key_suffix(b, name, len, layout[kind].text)
                           : wrapped_name(b, name, len);
    break;
  default:
    rc = dlock__buf_printf(b, "%s{", layout[kind].text);
    if (rc == DLOCK_OK)
      rc = dlock__buf_add(b, name, len);
    if (rc == DLOCK_OK)
      rc = dlock__buf_add(b, "}", 1);
    break;
  }
  if (rc == DLOCK_OK)
    rc = dlock__buf_add(b, layout[kind].tail, strlen(layout[kind].tail));
  if (rc != DLOCK_OK)
    return dlock__fail(DLOCK_ENOMEM, "out of memory building a key name");
  dlock__buf_shrink(b);
  return DLOCK_OK;
}
