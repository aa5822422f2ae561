/* dlock example: locks from a libuv event loop, with no thread per waiter.
 *
 * TASKS requests are served by one thread. Each takes the lock of one of
 * four resources (so most of them wait: pub/sub wake-ups, no polling),
 * does 1 ms of "work" on a loop timer while it holds it, and releases it.
 * The client completes into its completion queue; a uv_poll on the
 * queue's descriptor runs the callbacks on the loop's thread, where they
 * may use the loop freely. Each lock's holder count is checked on every
 * grant: it is never more than one.
 *
 * usage: dlock-async-libuv [TASKS]     (default 200)
 * Redis: $DLOCK_REDIS_URL, or redis://127.0.0.1:6379.
 * Build it against an installed dlock:
 *   cc async_libuv.c -o dlock-async-libuv \
 *      $(pkg-config --cflags --libs dlock libuv) */
#include <stdio.h>
#include <stdlib.h>

#include <dlock/dlock.h>
#include <uv.h>

#define RESOURCES 4

typedef struct task {
  int id;
  dlock_lock *lock;    /* its resource's lock */
  int *holders;        /* how many hold that resource now */
  uint64_t owner;      /* async holds belong to an explicit owner */
  uv_timer_t work;
} task;

static dlock_client *client;
static uv_poll_t queue_poll;
static int done_tasks, failures, overlaps, total;

static void finished(task *t) {
  if (++done_tasks == total)
    uv_close((uv_handle_t *)&queue_poll, NULL); /* the loop ends */
}

static void released(void *data, const dlock_result *r) {
  task *t = data;
  if (r->rc != DLOCK_OK) {
    fprintf(stderr, "task %d: release: %s\n", t->id, r->errmsg);
    failures++;
  }
  uv_close((uv_handle_t *)&t->work, NULL);
  finished(t);
}

static void work_done(uv_timer_t *timer) {
  task *t = timer->data;
  (*t->holders)--;
  if (dlock_release_async(t->lock, t->owner, released, t, NULL) != DLOCK_OK) {
    fprintf(stderr, "task %d: %s\n", t->id, dlock_errmsg());
    failures++;
    uv_close((uv_handle_t *)&t->work, NULL);
    finished(t);
  }
}

static void acquired(void *data, const dlock_result *r) {
  task *t = data;
  if (r->rc != DLOCK_OK) {
    fprintf(stderr, "task %d: acquire: %s\n", t->id, r->errmsg);
    failures++;
    uv_close((uv_handle_t *)&t->work, NULL);
    finished(t);
    return;
  }
  if (++(*t->holders) > 1)
    overlaps++; /* would mean two holders at once */
  uv_timer_start(&t->work, work_done, 1, 0); /* 1 ms of work, held */
}

/* The completion queue's descriptor is readable: run what is ready. */
static void on_queue(uv_poll_t *p, int status, int events) {
  dlock_client_run_completions(client, 0);
}

int main(int argc, char **argv) {
  total = argc > 1 ? atoi(argv[1]) : 200;
  if (total < 1)
    total = 200;
  const char *url = getenv("DLOCK_REDIS_URL");
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.completions = DLOCK_COMPLETE_QUEUE; /* callbacks on this thread */
  if (dlock_client_open(url ? url : "redis://127.0.0.1:6379", &o, &client)) {
    fprintf(stderr, "dlock-async-libuv: %s\n", dlock_errmsg());
    return 1;
  }
  uv_loop_t *loop = uv_default_loop();
  uv_poll_init(loop, &queue_poll, dlock_client_completion_fd(client));
  uv_poll_start(&queue_poll, UV_READABLE, on_queue);
  dlock_lock *locks[RESOURCES];
  int holders[RESOURCES] = {0};
  for (int i = 0; i < RESOURCES; i++) {
    char name[64];
    snprintf(name, sizeof name, "dlock-example:resource:%d", i);
    if (dlock_reentrant_lock_new(client, name, NULL, &locks[i])) {
      fprintf(stderr, "dlock-async-libuv: %s\n", dlock_errmsg());
      return 1;
    }
  }
  task *tasks = calloc((size_t)total, sizeof *tasks);
  for (int i = 0; i < total; i++) {
    task *t = &tasks[i];
    t->id = i;
    t->lock = locks[i % RESOURCES];
    t->holders = &holders[i % RESOURCES];
    t->owner = dlock_owner_id_new();
    uv_timer_init(loop, &t->work);
    t->work.data = t;
    if (dlock_acquire_async(t->lock, t->owner, 30000, 10000, acquired, t,
                            NULL) != DLOCK_OK) {
      fprintf(stderr, "task %d: %s\n", i, dlock_errmsg());
      failures++;
      uv_close((uv_handle_t *)&t->work, NULL);
      finished(t);
    }
  }
  uv_run(loop, UV_RUN_DEFAULT);
  printf("dlock-async-libuv: %d tasks done, %d failed, %d overlaps\n",
         done_tasks, failures, overlaps);
  for (int i = 0; i < RESOURCES; i++)
    dlock_lock_free(locks[i]);
  dlock_client_close(client);
  uv_loop_close(loop);
  free(tasks);
  return failures || overlaps ? 1 : 0;
}
