/* dlock example: locks from a bare epoll loop, with no thread per waiter.
 *
 * TASKS requests on one thread each take one of four resource locks (most
 * of them wait), count a use of the resource, and release it. The client's
 * completion queue descriptor sits in the epoll set beside whatever else
 * the program watches (here a timerfd that ends the run if it stalls);
 * when it is readable, dlock_client_run_completions() runs the callbacks
 * on this thread.
 *
 * usage: dlock-async-epoll [TASKS]     (default 200)
 * Redis: $DLOCK_REDIS_URL, or redis://127.0.0.1:6379.
 * Build it against an installed dlock:
 *   cc async_epoll.c -o dlock-async-epoll $(pkg-config --cflags --libs dlock) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <dlock/dlock.h>

#define RESOURCES 4

typedef struct task {
  int id;
  dlock_lock *lock;
  int *holders;
  uint64_t owner;
} task;

static int done_tasks, failures, overlaps, uses[RESOURCES];

static void released(void *data, const dlock_result *r) {
  task *t = data;
  (*t->holders)--; /* a grant of the next holder completes after this */
  if (r->rc != DLOCK_OK) {
    fprintf(stderr, "task %d: release: %s\n", t->id, r->errmsg);
    failures++;
  }
  done_tasks++;
}

static void acquired(void *data, const dlock_result *r) {
  task *t = data;
  if (r->rc != DLOCK_OK) {
    fprintf(stderr, "task %d: acquire: %s\n", t->id, r->errmsg);
    failures++;
    done_tasks++;
    return;
  }
  if (++(*t->holders) > 1)
    overlaps++;
  uses[t->id % RESOURCES]++; /* the work done under the lock */
  if (dlock_release_async(t->lock, t->owner, released, t, NULL) != DLOCK_OK) {
    fprintf(stderr, "task %d: %s\n", t->id, dlock_errmsg());
    (*t->holders)--;
    failures++;
    done_tasks++;
  }
}

int main(int argc, char **argv) {
  int total = argc > 1 ? atoi(argv[1]) : 200;
  if (total < 1)
    total = 200;
  const char *url = getenv("DLOCK_REDIS_URL");
  dlock_client_opts o = DLOCK_CLIENT_OPTS_INIT;
  o.completions = DLOCK_COMPLETE_QUEUE;
  dlock_client *c;
  if (dlock_client_open(url ? url : "redis://127.0.0.1:6379", &o, &c)) {
    fprintf(stderr, "dlock-async-epoll: %s\n", dlock_errmsg());
    return 1;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int queue = dlock_client_completion_fd(c);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = queue};
  epoll_ctl(ep, EPOLL_CTL_ADD, queue, &ev);
  int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC); /* a 60 s limit */
  struct itimerspec limit = {{0, 0}, {60, 0}};
  timerfd_settime(timer, 0, &limit, NULL);
  ev.data.fd = timer;
  epoll_ctl(ep, EPOLL_CTL_ADD, timer, &ev);

  dlock_lock *locks[RESOURCES];
  int holders[RESOURCES] = {0};
  for (int i = 0; i < RESOURCES; i++) {
    char name[64];
    snprintf(name, sizeof name, "dlock-example:resource:%d", i);
    if (dlock_reentrant_lock_new(c, name, NULL, &locks[i])) {
      fprintf(stderr, "dlock-async-epoll: %s\n", dlock_errmsg());
      return 1;
    }
  }
  task *tasks = calloc((size_t)total, sizeof *tasks);
  for (int i = 0; i < total; i++) {
    tasks[i] = (task){i, locks[i % RESOURCES], &holders[i % RESOURCES],
                      dlock_owner_id_new()};
    if (dlock_acquire_async(tasks[i].lock, tasks[i].owner, 30000, 10000,
                            acquired, &tasks[i], NULL) != DLOCK_OK) {
      fprintf(stderr, "task %d: %s\n", i, dlock_errmsg());
      failures++;
      done_tasks++;
    }
  }
  int stalled = 0;
  while (done_tasks < total && !stalled) {
    struct epoll_event got[4];
    int n = epoll_wait(ep, got, 4, -1);
    for (int i = 0; i < n; i++) {
      if (got[i].data.fd == queue)
        dlock_client_run_completions(c, 0);
      else
        stalled = 1;
    }
  }
  int used = 0;
  for (int i = 0; i < RESOURCES; i++)
    used += uses[i];
  printf("dlock-async-epoll: %d tasks done, %d uses, %d failed, %d overlaps%s\n",
         done_tasks, used, failures, overlaps, stalled ? " (stalled)" : "");
  for (int i = 0; i < RESOURCES; i++)
    dlock_lock_free(locks[i]);
  dlock_client_close(c);
  close(timer);
  close(ep);
  free(tasks);
  return failures || overlaps || stalled ? 1 : 0;
}
