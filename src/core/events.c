/* The event hook (dlock_client_opts.on_event, docs/observability.md): an
 * event made on the engine thread is told at once; one made on another
 * thread travels to the engine thread as a task with a copy of its name. */
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"

typedef struct event_task {
  dlock__req req; /* first: the task's completion frees the block */
  dlock_event ev;
  char name[];
} event_task;

static void event_done(dlock__req *req, redisReply *reply, int status) {
  (void)status;
  if (reply)
    freeReplyObject(reply);
  free(req);
}

static void event_run(dlock_client *c, dlock__req *req) {
  event_task *t = (event_task *)req;
  t->ev.name = t->name;
  c->opts.on_event(c->opts.on_event_data, &t->ev);
  dlock__req_finish(req, NULL, DLOCK_OK, NULL);
}

void dlock__event(dlock_client *c, const dlock_event *ev) {
  if (c == NULL || c->opts.on_event == NULL)
    return;
  if (dlock__on_engine_thread()) {
    c->opts.on_event(c->opts.on_event_data, ev);
    return;
  }
  event_task *t = malloc(sizeof *t + ev->name_len + 1);
  if (t == NULL)
    return; /* out of memory: the event is not told */
  t->ev = *ev;
  if (ev->name_len)
    memcpy(t->name, ev->name, ev->name_len);
  t->name[ev->name_len] = '\0';
  dlock__req_task(&t->req, event_run, NULL);
  t->req.done = event_done;
  if (dlock__submit(c, &t->req) != DLOCK_OK)
    free(t); /* the client is closing */
}

void dlock__acquire_done(dlock_client *c, const char *name, size_t len,
                         uint64_t owner, int rc, int64_t t0_us) {
  int waited = dlock__stats_waited();
  dlock__stats_acquire(&c->stats, rc, waited, t0_us);
  if (c->opts.on_event == NULL)
    return;
  int64_t took = dlock__now_us() - t0_us;
  if (waited) {
    dlock_event ev = {DLOCK_EVENT_WAITED, name, len, owner, took, rc, 0};
    dlock__event(c, &ev);
  }
  if (rc == DLOCK_OK) {
    dlock_event ev = {DLOCK_EVENT_ACQUIRED, name, len, owner, took, rc, 0};
    dlock__event(c, &ev);
  }
}
