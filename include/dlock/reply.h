/* A server's reply as dlock hands it over: a copy, no hiredis type (the
 * guarded writes of dlock/fence.h return one; the async API's results
 * carry one). */
#ifndef DLOCK_REPLY_H
#define DLOCK_REPLY_H

#include <stddef.h>

#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A server's reply, as dlock hands it over (a copy: no hiredis type). */
typedef enum dlock_reply_type {
  DLOCK_REPLY_NIL = 0,
  DLOCK_REPLY_INTEGER = 1,
  DLOCK_REPLY_STRING = 2, /* a bulk string: str, len (binary-safe) */
  DLOCK_REPLY_STATUS = 3, /* a status ("OK"): str, len */
  DLOCK_REPLY_ARRAY = 4,  /* elements, element[] */
  DLOCK_REPLY_DOUBLE = 5, /* RESP3 only; str holds its text */
  DLOCK_REPLY_ERROR = 6   /* never handed over: an error reply is a
                             DLOCK_EREDIS return with its text */
} dlock_reply_type;

typedef struct dlock_reply {
  dlock_reply_type type;
  long long integer;           /* INTEGER */
  char *str;                   /* STRING, STATUS, DOUBLE: NUL-terminated */
  size_t len;
  size_t elements;             /* ARRAY */
  struct dlock_reply **element;
} dlock_reply;

/* Free a reply and everything in it. NULL is a no-op. */
DLOCK_API void dlock_reply_free(dlock_reply *reply);

#ifdef __cplusplus
}
#endif

#endif /* DLOCK_REPLY_H */
