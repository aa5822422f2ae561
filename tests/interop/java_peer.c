/* The Java peer's driver (java_peer.h). */
#include "java_peer.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

const char *const jp_versions[2] = {"3.52.0", "4.7.0"};

/* The next line it printed (without the newline) into out within ms: 0, or
 * -1 (none came, or it ended). */
static int read_line(jpeer *p, int ms, char *out, size_t size) {
  int64_t end = th_now_ms() + ms;
  for (;;) {
    char *nl = memchr(p->buf, '\n', p->len);
    if (nl) {
      size_t k = (size_t)(nl - p->buf);
      snprintf(out, size, "%.*s", (int)k, p->buf);
      memmove(p->buf, nl + 1, p->len - k - 1);
      p->len -= k + 1;
      return 0;
    }
    int64_t left = end - th_now_ms();
    if (left <= 0 || p->len == sizeof p->buf)
      return -1;
    struct pollfd pf = {p->out, POLLIN, 0};
    if (poll(&pf, 1, (int)left) <= 0)
      continue;
    ssize_t n = read(p->out, p->buf + p->len, sizeof p->buf - p->len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      p->eof = 1;
      return -1;
    }
    p->len += (size_t)n;
  }
}

int jp_start(jpeer *p, const char *version, const char *url, int64_t watchdog_ms) {
  return jp_start_codec(p, version, url, watchdog_ms, "default");
}

static int start(jpeer *p, const char *version, const char *url,
                 int64_t watchdog_ms, const char *codec, const char *url2,
                 const char *url3);

int jp_start_codec(jpeer *p, const char *version, const char *url,
                   int64_t watchdog_ms, const char *codec) {
  return start(p, version, url, watchdog_ms, codec, NULL, NULL);
}

int jp_start_fair(jpeer *p, const char *version, const char *url,
                  int64_t fair_ms) {
  char times[48];
  snprintf(times, sizeof times, "0,%lld", (long long)fair_ms);
  return jp_start_times(p, version, url, times);
}

int jp_start_times(jpeer *p, const char *version, const char *url,
                   const char *times) {
  return start(p, version, url, -1, times, NULL, NULL);
}

int jp_start_redlock(jpeer *p, const char *version, const char *url,
                     const char *url2, const char *url3) {
  return start(p, version, url, 0, "default", url2, url3);
}

static int start(jpeer *p, const char *version, const char *url,
                 int64_t watchdog_ms, const char *codec, const char *url2,
                 const char *url3) {
  memset(p, 0, sizeof *p);
  p->pid = -1;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  const char *docs = getenv("DLOCK_DOCS");
  char dir[512], cp[1200], wd[48];
  snprintf(dir, sizeof dir, "%s/../tests/interop/java/target/%s", docs ? docs : ".",
           version);
  snprintf(cp, sizeof cp, "%s/classes:%s/lib/" "*", dir, dir); /* a glob
                                                  (split: not a comment) */
  snprintf(wd, sizeof wd, "%lld", (long long)watchdog_ms);
  if (watchdog_ms < 0) { /* jp_start_fair, _times: the times given, Redisson's
                            codec */
    snprintf(wd, sizeof wd, "%s", codec);
    codec = "default";
  }
  char probe[600];
  snprintf(probe, sizeof probe, "%s/classes/dlock/peer/Peer.class", dir);
  if (access(probe, R_OK) != 0) {
    fprintf(stderr, "\n  the Java peer for Redisson %s is not built (%s): "
            "run scripts/setup\n", version, probe);
    return -1;
  }
  int to[2], from[2];
  if (pipe(to) != 0 || pipe(from) != 0)
    return -1;
  pid_t parent = getpid();
  p->pid = fork();
  if (p->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* it died before the line above */
      _exit(127);
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    /* a small heap and one GC thread: the suite runs beside redis-servers
     * on two cores */
    execlp("java", "java", "-Xmx256m", "-XX:+UseSerialGC",
           "-XX:TieredStopAtLevel=1", "-cp", cp, "dlock.peer.Peer", url, wd,
           codec, url2, url3, (char *)NULL); /* url2 NULL: the list ends */
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  p->in = to[1];
  p->out = from[0];
  if (p->pid < 0)
    return -1;
  char line[256];
  if (read_line(p, 60000, line, sizeof line) != 0 || strncmp(line, "ready ", 6) != 0) {
    fprintf(stderr, "\n  the Java peer (Redisson %s) did not start\n", version);
    jp_kill(p);
    return -1;
  }
  snprintf(p->version, sizeof p->version, "%.31s", line + 6);
  return 0;
}

int jp_send(jpeer *p, const char *slot, const char *fmt, ...) {
  char req[1024];
  int id = __atomic_add_fetch(&p->next_id, 1, __ATOMIC_RELAXED);
  int n = snprintf(req, sizeof req, "%d %s ", id, slot);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(req + n, sizeof req - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof req - 1)
    return -1;
  req[n++] = '\n';
  return write(p->in, req, (size_t)n) == n ? id : -1;
}

/* its answer among those read for others: 0, else -1 (under mu) */
static int take_early(jpeer *p, int id, char *out, size_t size) {
  for (int i = 0; i < p->nearly; i++)
    if (p->early[i].id == id) {
      snprintf(out, size, "%s", p->early[i].text);
      p->early[i] = p->early[--p->nearly];
      return 0;
    }
  return -1;
}

int jp_wait(jpeer *p, int id, int ms, char *out, size_t size) {
  int64_t end = th_now_ms() + ms;
  char line[600];
  pthread_mutex_lock(&p->mu);
  for (;;) {
    if (take_early(p, id, out, size) == 0) {
      pthread_mutex_unlock(&p->mu);
      return 0;
    }
    int64_t left = end - th_now_ms();
    if (left <= 0 || p->eof)
      break;
    if (p->reading) { /* another thread reads: its broadcast wakes us */
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      int64_t step = left < 50 ? left : 50;
      ts.tv_nsec += step * 1000000;
      ts.tv_sec += ts.tv_nsec / 1000000000;
      ts.tv_nsec %= 1000000000;
      pthread_cond_timedwait(&p->cv, &p->mu, &ts);
      continue;
    }
    p->reading = 1;
    pthread_mutex_unlock(&p->mu);
    int got_line = read_line(p, (int)(left < 50 ? left : 50), line, sizeof line);
    pthread_mutex_lock(&p->mu);
    p->reading = 0;
    pthread_cond_broadcast(&p->cv);
    char *sp = got_line == 0 ? strchr(line, ' ') : NULL;
    if (sp == NULL)
      continue;
    int got = atoi(line);
    if (got == id) {
      snprintf(out, size, "%s", sp + 1);
      pthread_mutex_unlock(&p->mu);
      return 0;
    }
    if (p->nearly < JP_MAX_PENDING) {
      p->early[p->nearly].id = got;
      snprintf(p->early[p->nearly++].text, sizeof p->early[0].text, "%s", sp + 1);
    }
  }
  pthread_mutex_unlock(&p->mu);
  out[0] = '\0';
  return -1;
}

const char *jp_call(jpeer *p, const char *slot, const char *fmt, ...) {
  static _Thread_local char answer[512];
  char req[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(req, sizeof req, fmt, ap);
  va_end(ap);
  int id = jp_send(p, slot, "%s", req);
  if (id < 0 || jp_wait(p, id, 10000, answer, sizeof answer) != 0)
    answer[0] = '\0';
  return answer;
}

static void reap(jpeer *p, int ms) {
  if (p->pid <= 0)
    return;
  if (th_wait_worker(p->pid, ms) < 0) {
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
  }
  close(p->in);
  close(p->out);
  p->pid = -1;
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
}

void jp_kill(jpeer *p) {
  if (p->pid > 0)
    kill(p->pid, SIGKILL);
  reap(p, 10000);
}

void jp_stop(jpeer *p) {
  if (p->pid > 0 && write(p->in, "exit\n", 5) != 5)
    kill(p->pid, SIGKILL);
  reap(p, 10000);
}
