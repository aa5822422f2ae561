/* dlock_watcher (dlock/inspect.h): one waiter on each channel an object of
 * any kind announces on (every kind in the catalog, a registered one too,
 * and the objects that are not lock kinds: the latch, the election), all
 * on the making thread's parker, waited on together. */
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "dlock/inspect.h"

#define NCHANNELS 8 /* more than the channel roles (base.h) */

struct dlock_watcher {
  dlock__handle h; /* first: the client reference and the name */
  int n;           /* waiters subscribed */
  dlock__waiter w[NCHANNELS];
  dlock__buf channel[NCHANNELS];
};

static int has_role(const dlock__key_role *roles, int n, dlock__key_role r) {
  for (int i = 0; i < n; i++)
    if (roles[i] == r)
      return 1;
  return 0;
}

void dlock_watcher_free(dlock_watcher *w) {
  if (w == NULL)
    return;
  for (int i = 0; i < w->n; i++)
    dlock__unsubscribe(w->h.client, &w->w[i]);
  for (int i = 0; i < NCHANNELS; i++)
    dlock__buf_free(&w->channel[i]);
  dlock__handle_free(&w->h);
  free(w);
}

int dlock_watcher_new(dlock_client *client, const char *name,
                      const dlock_lock_opts *opts, dlock_watcher **out) {
  dlock__clear_error();
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  if (dlock__on_engine_thread())
    return dlock__fail(DLOCK_EINVAL, "blocking dlock call on an engine thread");
  dlock_watcher *w;
  int rc = dlock__handle_open(sizeof *w, client, name, opts, (void **)&w);
  if (rc != DLOCK_OK)
    return rc;
  /* the channels, each once: the catalog's kinds', then the latch's and
   * the election's (a leader's record; its lock announces as a lock) */
  dlock__key_role roles[NCHANNELS];
  int n = 0;
  const dlock__lock_methods *m;
  for (size_t k = 0; (m = dlock__kind_at(k)) != NULL; k++)
    if (m->announces && !has_role(roles, n, m->channel) && n < NCHANNELS - 2)
      roles[n++] = m->channel;
  roles[n++] = DLOCK__KEY_LATCH_CHANNEL;
  roles[n++] = DLOCK__KEY_ELECTION_CHANNEL;
  for (int i = 0; i < n && rc == DLOCK_OK; i++) {
    rc = dlock__key(&w->channel[i], roles[i], w->h.name, w->h.name_len);
    if (rc != DLOCK_OK)
      break;
    memset(&w->w[i], 0, sizeof w->w[i]);
    w->w[i].parker = dlock__parker_self();
    rc = dlock__subscribe(client, w->channel[i].p, w->channel[i].len,
                          dlock__wake_all, 0, 0, &w->w[i], -1);
    if (rc == DLOCK_OK)
      w->n++;
  }
  for (int i = 0; i < w->n && rc == DLOCK_OK; i++) /* a refusal shows */
    rc = dlock__waiter_refused(&w->w[i]);
  if (rc != DLOCK_OK) {
    dlock_watcher_free(w);
    return rc;
  }
  *out = w;
  return DLOCK_OK;
}

int dlock_watcher_wait(dlock_watcher *w, int64_t timeout_ms) {
  dlock__clear_error();
  if (w == NULL)
    return dlock__fail(DLOCK_EINVAL, "watcher is NULL");
  dlock__waiter *ws[NCHANNELS];
  for (int i = 0; i < w->n; i++)
    ws[i] = &w->w[i];
  int64_t deadline = timeout_ms < 0 ? -1 : dlock__now_ms() + timeout_ms;
  int rc = dlock__waiter_wait_any(ws, w->n, deadline);
  if (rc == DLOCK_ECLOSED)
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  return rc == DLOCK_OK; /* the public answer: 1 announced, 0 none in time */
}
