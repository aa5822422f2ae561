/* libFuzzer target: the connection URI parser (redis://, rediss://, the
 * +cluster and +sentinel forms, unix://, options in the query) on
 * arbitrary bytes. Every parse either fails cleanly with DLOCK_EINVAL and
 * a message or yields a URI whose parts are sane. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/uri.h"
#include "dlock/dlock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0'; /* a C string: an embedded NUL ends it */
  dlock__uri u;
  memset(&u, 0, sizeof u);
  int rc = dlock__uri_parse(text, &u);
  if (rc == DLOCK_OK) {
    if ((u.host == NULL) == (u.path == NULL)) /* exactly one of them */
      abort();
    if (u.host && (u.port < 1 || u.port > 65535))
      abort();
    if (u.db < 0)
      abort();
    if (u.tls && u.path) /* TLS is for TCP URIs only */
      abort();
    dlock__uri_free(&u);
  } else if (rc != DLOCK_EINVAL || dlock_errmsg()[0] == '\0') {
    abort();
  }
  free(text);
  return 0;
}
