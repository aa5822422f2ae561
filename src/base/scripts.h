/* The script registry: every script in lua/ is embedded with its SHA1 at
 * build time (tools/embed_lua.py). Calls go out as EVALSHA; the engine resends a call
 * as EVAL (which also caches the script) when Redis answers NOSCRIPT. */
#ifndef DLOCK_BASE_SCRIPTS_H
#define DLOCK_BASE_SCRIPTS_H

#include <stddef.h>

#include "scripts_gen.h" /* generated into the build dir (lua/) */

typedef struct dlock__script {
  const char *name; /* file name without .lua */
  const char *sha1; /* 40 lower-case hex characters */
  size_t len;
  const char *body;
} dlock__script;

extern const dlock__script dlock__scripts[DLOCK__SCRIPT_COUNT];

#endif /* DLOCK_BASE_SCRIPTS_H */
