/* The one allocator of lock and synchronizer handles: argument checks, the
 * name's copy, the client's reference. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* The cluster's hash-tag rule finds a tag: a '}' after the first '{', with
 * something between. */
static int has_tag(const char *name, size_t len) {
  const char *open = memchr(name, '{', len);
  const char *close =
      open ? memchr(open + 1, '}', len - (size_t)(open + 1 - name)) : NULL;
  return close && close > open + 1;
}

int dlock__handle_new(size_t size, dlock_client *client, const char *name,
                      size_t name_len, void **out) {
  dlock__clear_error();
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  if (client == NULL)
    return dlock__fail(DLOCK_EINVAL, "client is NULL");
  size_t len = name_len ? name_len
                        : (name ? strnlen(name, DLOCK_NAME_MAX + 1) : 0);
  if (len > DLOCK_NAME_MAX && !name_len)
    len = strlen(name); /* too long: its real length, for the message */
  int rc = dlock__check_name(name, len);
  if (rc != DLOCK_OK)
    return rc;
  if (dlock__client_closed(client))
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  if (dlock__client_slotted(client) && memchr(name, '{', len) &&
      !has_tag(name, len))
    return dlock__fail(DLOCK_EINVAL,
                       "on a cluster a name with a '{' needs a whole hash tag "
                       "(\"{tag}\", not empty): Redisson's layout keeps such a "
                       "name as it is, and its keys would hash to different "
                       "slots (docs/cluster.md, \"Names\")");
  dlock__handle *h = calloc(1, size);
  char *copy = malloc(len + 1);
  if (h == NULL || copy == NULL) {
    free(h);
    free(copy);
    return dlock__oom();
  }
  memcpy(copy, name, len);
  copy[len] = '\0';
  h->client = client;
  h->name = copy;
  h->name_len = len;
  dlock__client_ref(client);
  *out = h;
  return DLOCK_OK;
}

void dlock__handle_free(dlock__handle *h) {
  if (h->client)
    dlock__client_unref(h->client);
  free(h->name);
  h->client = NULL;
  h->name = NULL;
}
