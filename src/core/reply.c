/* Server replies handed to the application (dlock_reply, dlock/reply.h):
 * copies of hiredis's, so the public API has no hiredis type. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "dlock/reply.h"

void dlock_reply_free(dlock_reply *r) {
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->elements; i++)
    dlock_reply_free(r->element[i]);
  free(r->element);
  free(r->str);
  free(r);
}

void dlock__reply_free(dlock_reply *r) { dlock_reply_free(r); }

/* A copy of r as a dlock_reply, or NULL (out of memory). */
dlock_reply *dlock__reply_copy(const redisReply *r) {
  dlock_reply *d = calloc(1, sizeof *d);
  if (d == NULL)
    return NULL;
  if (r->type == REDIS_REPLY_NIL) {
    d->type = DLOCK_REPLY_NIL;
  } else if (r->type == REDIS_REPLY_INTEGER) {
    d->type = DLOCK_REPLY_INTEGER;
    d->integer = r->integer;
  } else if (r->type == REDIS_REPLY_ARRAY) {
    d->type = DLOCK_REPLY_ARRAY;
    if (r->elements > 0 &&
        (d->element = calloc(r->elements, sizeof *d->element)) == NULL) {
      free(d);
      return NULL;
    }
    d->elements = r->elements;
    for (size_t i = 0; i < r->elements; i++)
      if ((d->element[i] = dlock__reply_copy(r->element[i])) == NULL) {
        dlock_reply_free(d);
        return NULL;
      }
  } else { /* strings, statuses, RESP3 scalars as their text */
    d->type = r->type == REDIS_REPLY_STRING   ? DLOCK_REPLY_STRING
              : r->type == REDIS_REPLY_STATUS ? DLOCK_REPLY_STATUS
                                              : DLOCK_REPLY_DOUBLE;
    d->len = r->str ? r->len : 0;
    if ((d->str = malloc(d->len + 1)) == NULL) {
      free(d);
      return NULL;
    }
    if (d->len)
      memcpy(d->str, r->str, d->len);
    d->str[d->len] = '\0';
  }
  return d;
}

