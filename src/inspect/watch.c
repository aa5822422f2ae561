/* dlock_watcher (dlock/inspect.h): one waiter on each channel an object of
 * any kind announces on, all on the making thread's parker, waited on
 * together. */
#include <stdlib.h>
#include <string.h>

#include "dlock/inspect.h"
#include "lock/lock_impl.h"

#define NCHANNELS 4

struct dlock_watcher {
  dlock__handle h; /* first: the client reference and the name */
  int n;           /* waiters subscribed */
  dlock__waiter w[NCHANNELS];
  dlock__buf channel[NCHANNELS];
};

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
  static const dlock__key_role kinds[NCHANNELS] = {
      DLOCK__KEY_LOCK_CHANNEL, DLOCK__KEY_RWLOCK_CHANNEL, DLOCK__KEY_SEM_CHANNEL,
      DLOCK__KEY_LATCH_CHANNEL};
  for (int i = 0; i < NCHANNELS && rc == DLOCK_OK; i++) {
    rc = dlock__key(&w->channel[i], kinds[i], w->h.name, w->h.name_len);
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
  return rc == DLOCK_ECLOSED ? dlock__fail(DLOCK_ECLOSED, "client is closed") : rc;
}
