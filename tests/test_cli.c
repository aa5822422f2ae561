/* The dlock command-line tool, run as a real program against a real
 * redis-server: exact counts under `dlock run`, exit statuses, the
 * semaphore bound, latches in background shells, bad input. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "redis_server.h"

static th_server srv;
static const char *dlock_bin;
static char tmpdir[64];

static int suite_init(void) {
  dlock_bin = getenv("DLOCK_BIN");
  snprintf(tmpdir, sizeof tmpdir, "/tmp/dlock-cli-XXXXXX");
  if (dlock_bin == NULL || mkdtemp(tmpdir) == NULL)
    return 1;
  if (th_main_server_start(&srv) != 0)
    return 1;
  setenv("DLOCK_REDIS_URL", srv.url, 1);
  return 0;
}

static int suite_clean(void) {
  th_server_stop(&srv);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : 1;
}

/* Start dlock with args (NULL-terminated), stderr to *err_fd when given. */
static pid_t start(char *const args[], int *err_fd) {
  char *argv[32] = {(char *)dlock_bin};
  int n = 1;
  for (int i = 0; args[i] && n < 31; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  int fds[2] = {-1, -1};
  if (err_fd && pipe(fds) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    if (err_fd) {
      dup2(fds[1], 2);
      close(fds[0]);
    }
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execv(dlock_bin, argv);
    _exit(127);
  }
  if (err_fd) {
    close(fds[1]);
    *err_fd = fds[0];
  }
  return pid;
}

/* Run dlock to the end (bounded); its stderr into err (may be NULL). */
static int run_dlock(char *const args[], char *err, size_t errsize) {
  int fd = -1;
  pid_t pid = start(args, err ? &fd : NULL);
  int rc = th_wait_worker(pid, 30000);
  if (err) {
    ssize_t n = read(fd, err, errsize - 1);
    err[n > 0 ? n : 0] = '\0';
    close(fd);
  }
  return rc;
}

static void test_run_exact_count(void) {
  char counter[128], script[512];
  snprintf(counter, sizeof counter, "%s/counter", tmpdir);
  FILE *f = fopen(counter, "w");
  fputs("0\n", f);
  fclose(f);
  /* read, pause, write: without the lock, updates would be lost */
  snprintf(script, sizeof script,
           "n=$(cat %s); sleep 0.01; echo $((n + 1)) > %s", counter, counter);
  const char *name = th_name("count");
  pid_t pids[8];
  for (int i = 0; i < 8; i++) {
    pids[i] = fork();
    if (pids[i] == 0) {
      int bad = 0;
      for (int k = 0; k < 5; k++) {
        char *args[] = {"run", (char *)name, "--", "sh", "-c", script, NULL};
        bad |= run_dlock(args, NULL, 0) != 0;
      }
      _exit(bad);
    }
  }
  for (int i = 0; i < 8; i++)
    CU_ASSERT_EQUAL(th_wait_worker(pids[i], 60000), 0);
  f = fopen(counter, "r");
  int n = 0;
  CU_ASSERT(fscanf(f, "%d", &n) == 1);
  fclose(f);
  CU_ASSERT_EQUAL(n, 40);
}

static void test_run_exit_statuses(void) {
  char err[1024];
  const char *name = th_name("status");
  char *own[] = {"run", (char *)name, "--", "sh", "-c", "exit 7", NULL};
  CU_ASSERT_EQUAL(run_dlock(own, NULL, 0), 7);
  char *sig[] = {"run", (char *)name, "--", "sh", "-c", "kill -USR1 $$", NULL};
  CU_ASSERT_EQUAL(run_dlock(sig, NULL, 0), 128 + SIGUSR1);
  char *missing[] = {"run", (char *)name, "--", "/no/such/program", NULL};
  CU_ASSERT_EQUAL(run_dlock(missing, NULL, 0), 127);
  /* the replica guard (a WAIT per lock write where there are replicas) */
  char *synced[] = {"run", "--replica-sync", "500ms", (char *)name, "--", "sh",
                    "-c", "exit 3", NULL};
  CU_ASSERT_EQUAL(run_dlock(synced, NULL, 0), 3);
  /* a kind by name (--kind), the same as its flag, hyphen for space */
  char *by_kind[] = {"run", "--kind", "non-reentrant-fair", (char *)name, "--",
                     "sh", "-c", "exit 4", NULL};
  CU_ASSERT_EQUAL(run_dlock(by_kind, NULL, 0), 4);
  char *both[] = {"run", "--kind", "fair", "--fair", (char *)name, "--", "sh",
                  "-c", "exit 5", NULL};
  CU_ASSERT_EQUAL(run_dlock(both, NULL, 0), 5);

  /* timeout: someone else holds it */
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  char *wait[] = {"run", "--wait", "300ms", (char *)name, "--", "true", NULL};
  int64_t t0 = th_now_ms();
  CU_ASSERT_EQUAL(run_dlock(wait, err, sizeof err), 75);
  CU_ASSERT(th_now_ms() - t0 >= 300);
  CU_ASSERT(strstr(err, "still not available after 300 ms") != NULL);
  /* a single try says what its number is: the holder's remaining lease */
  char *try[] = {"run", "--wait", "0", (char *)name, "--", "true", NULL};
  CU_ASSERT_EQUAL(run_dlock(try, err, sizeof err), 75);
  CU_ASSERT(strstr(err, "whose lease has ") != NULL && strstr(err, " ms left") != NULL);
  CU_ASSERT(strstr(err, "retry in") == NULL);
  char *try0[] = {"run", "--wait", "0", (char *)name, "--", "true", NULL};
  CU_ASSERT_EQUAL(run_dlock(try0, NULL, 0), 75);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  dlock_lock_free(l);
  dlock_client_close(c);

  /* lost: the key is deleted behind the command's back */
  const char *lost = th_name("lost");
  char *args[] = {"run", "--watchdog", "300ms", (char *)lost, "--", "sleep", "20",
                  NULL};
  int fd;
  pid_t pid = start(args, &fd);
  for (int64_t end = th_now_ms() + 5000;
       th_int(&srv, "EXISTS %s", lost) != 1 && th_now_ms() < end;)
    usleep(2000); /* the event: it holds the lock */
  CU_ASSERT_EQUAL(th_int(&srv, "DEL %s", lost), 1);
  t0 = th_now_ms();
  CU_ASSERT_EQUAL(th_wait_worker(pid, 10000), 76);
  CU_ASSERT(th_now_ms() - t0 < 1000); /* the command was signalled */
  ssize_t n = read(fd, err, sizeof err - 1);
  err[n > 0 ? n : 0] = '\0';
  close(fd);
  CU_ASSERT(strstr(err, "lost") != NULL);
  /* and with a fixed lease that runs out under a long command */
  char *lease[] = {"run", "--lease", "300ms", (char *)lost, "--", "sleep", "20",
                   NULL};
  CU_ASSERT_EQUAL(run_dlock(lease, NULL, 0), 76);
}

static void test_semaphore_bound(void) {
  char log[128], script[512];
  snprintf(log, sizeof log, "%s/sem.log", tmpdir);
  snprintf(script, sizeof script,
           "echo s >> %s; sleep 0.2; echo e >> %s", log, log);
  const char *name = th_name("sem");
  pid_t pids[6];
  for (int i = 0; i < 6; i++) {
    char *args[] = {"run", "--semaphore", "--permits", "2", (char *)name, "--",
                    "sh", "-c", script, NULL};
    pids[i] = start(args, NULL);
  }
  for (int i = 0; i < 6; i++)
    CU_ASSERT_EQUAL(th_wait_worker(pids[i], 30000), 0);
  FILE *f = fopen(log, "r");
  char line[8];
  int inside = 0, max = 0, starts = 0;
  while (f && fgets(line, sizeof line, f)) {
    inside += line[0] == 's' ? 1 : -1;
    starts += line[0] == 's';
    if (inside > max)
      max = inside;
  }
  if (f)
    fclose(f);
  CU_ASSERT_EQUAL(starts, 6);
  CU_ASSERT(max <= 2);
  CU_ASSERT(max == 2); /* and the permits were actually shared */
}

static void test_latch_in_background_shells(void) {
  const char *name = th_name("latch");
  char *set[] = {"latch", "set", (char *)name, "2", NULL};
  CU_ASSERT_EQUAL(run_dlock(set, NULL, 0), 0);
  CU_ASSERT_EQUAL(run_dlock(set, NULL, 0), 1); /* already set */
  pid_t pids[3];
  for (int i = 0; i < 3; i++) {
    char script[512];
    snprintf(script, sizeof script, "'%s' latch wait --wait 20s '%s'", dlock_bin,
             name);
    pids[i] = fork();
    if (pids[i] == 0) {
      execl("/bin/sh", "sh", "-c", script, (char *)NULL);
      _exit(127);
    }
  }
  char channel[300];
  snprintf(channel, sizeof channel, "redisson_countdownlatch__channel__{%s}", name);
  long long subs = 0;
  for (int64_t end = th_now_ms() + 5000; subs < 3 && th_now_ms() < end;) {
    subs = th_numsub(&srv, channel);
    usleep(2000);
  }
  CU_ASSERT_EQUAL(subs, 3); /* the event: all three shells are waiting */
  char *down[] = {"latch", "count-down", (char *)name, NULL};
  CU_ASSERT_EQUAL(run_dlock(down, NULL, 0), 0);
  int st;
  CU_ASSERT_EQUAL(waitpid(pids[0], &st, WNOHANG), 0); /* still 1 to go */
  CU_ASSERT_EQUAL(run_dlock(down, NULL, 0), 0);
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(th_wait_worker(pids[i], 5000), 0);
  /* a latch with no count: Redisson's await returns at once, and so does
   * `latch wait`, but it says so (a mistyped name must not pass silently) */
  char *wait_gone[] = {"latch", "wait", "--wait", "100ms", (char *)name, NULL};
  char err[1024];
  CU_ASSERT_EQUAL(run_dlock(wait_gone, err, sizeof err), 0);
  CU_ASSERT(strstr(err, "has no count") != NULL);
  CU_ASSERT(strstr(err, name) != NULL);
}

static void test_status_and_force_unlock(void) {
  const char *name = th_name("status");
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  int fds[2];
  CU_ASSERT_FATAL(pipe(fds) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    execl(dlock_bin, dlock_bin, "status", "--json", name, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char out[2048] = {0};
  ssize_t n = read(fds[0], out, sizeof out - 1);
  close(fds[0]);
  CU_ASSERT_EQUAL(th_wait_worker(pid, 5000), 0);
  CU_ASSERT(n > 0 && strstr(out, "\"kind\": \"lock\"") != NULL);
  CU_ASSERT(strstr(out, dlock_client_id(c)) != NULL); /* the holder */
  char *unlock[] = {"unlock", "--force", (char *)name, NULL};
  CU_ASSERT_EQUAL(run_dlock(unlock, NULL, 0), 0);
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 0);
  TH_ASSERT_RC(dlock_release(l), DLOCK_ELOST);
  dlock_lock_free(l);
  dlock_client_close(c);
}

static int count_of(const char *text, const char *what) {
  int k = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
    k++;
  return k;
}

/* dlock list: the three objects under a pattern (a lock held, a latch, a
 * semaphore; another key beside them left out) among 100,000 other keys,
 * found in a bounded number of SCAN calls (COUNT 1000: about 100, bound
 * 250); --json is an array of dlock status's objects; --limit stops and
 * says so. */
static void test_list(void) {
  char prefix[96], lock[128], latch[128], sem[128], other[128];
  snprintf(prefix, sizeof prefix, "%s", th_name("list"));
  snprintf(lock, sizeof lock, "%s:lock", prefix);
  snprintf(latch, sizeof latch, "%s:latch", prefix);
  snprintf(sem, sizeof sem, "%s:sem", prefix);
  snprintf(other, sizeof other, "%s:other", prefix);
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, lock, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  dlock_latch *lt = NULL;
  TH_ASSERT_RC(dlock_latch_new(c, latch, NULL, &lt), DLOCK_OK);
  TH_ASSERT_RC(dlock_latch_try_set_count(lt, 2, NULL), DLOCK_OK);
  dlock_semaphore *sm = NULL;
  TH_ASSERT_RC(dlock_semaphore_new(c, sem, NULL, &sm), DLOCK_OK);
  TH_ASSERT_RC(dlock_semaphore_add_permits(sm, 3, NULL), DLOCK_OK);
  redisReply *r = th_cmd(th_node_of(&srv, other), "SET %s x", other);
  if (r)
    freeReplyObject(r);
  int big = srv.nnodes == 0; /* one server: 100,000 keys more */
  if (big) {
    r = th_cmd(&srv, "DEBUG POPULATE 100000 %s-junk", prefix); /* no match */
    CU_ASSERT(r && r->type == REDIS_REPLY_STATUS);
    if (r)
      freeReplyObject(r);
  }
  long long scans = th_cmd_calls(&srv, "scan");
  char args[512], out[8192];
  snprintf(args, sizeof args, "list --json '%s:*' 2>/dev/null", prefix);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  scans = th_cmd_calls(&srv, "scan") - scans;
  if (big) {
    printf("\n    %lld SCAN calls for 100,003 keys [bound 250] ", scans);
    CU_ASSERT(scans >= 50 && scans <= 250);
  }
  CU_ASSERT(out[0] == '[' && strstr(out, "]\n") != NULL);
  CU_ASSERT_EQUAL(count_of(out, "\"name\": "), 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, lock));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"kind\": \"lock\""));
  CU_ASSERT_EQUAL(count_of(out, "\"kind\": \"count\""), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, dlock_client_id(c))); /* the holder */
  CU_ASSERT_PTR_NULL(strstr(out, other));
  snprintf(args, sizeof args, "list '%s:*' 2>/dev/null", prefix);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT_EQUAL(count_of(out, "\n"), 3);
  snprintf(args, sizeof args, "list --limit 1 '%s:*' 2>&1", prefix);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "stopped at --limit"));
  CU_ASSERT_EQUAL(th_dlock_output("list --limit 0 2>/dev/null", out, sizeof out), 64);
  /* a fenced lock with a guarded write and an election with a leader: a
   * pattern that also matches their helper keys (the token counter, the
   * fence, the record) lists the two objects, the election as such */
  char fenced[160], elected[160], fdata[200];
  snprintf(fenced, sizeof fenced, "%s-f", prefix);
  snprintf(elected, sizeof elected, "%s-e", prefix);
  snprintf(fdata, sizeof fdata, "{%s}:data", fenced);
  dlock_lock *fl = NULL;
  dlock_grant g;
  TH_ASSERT_RC(dlock_fenced_lock_new(c, fenced, NULL, &fl), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire_grant(fl, 0, 30000, &g), DLOCK_OK);
  const char *set[] = {"SET", fdata, "v"};
  size_t setl[] = {3, strlen(fdata), 1};
  TH_ASSERT_RC(dlock_guarded_call(fl, 3, set, setl, NULL), DLOCK_OK);
  dlock_election *el = NULL;
  TH_ASSERT_RC(dlock_election_new(c, elected, NULL, &el), DLOCK_OK);
  TH_ASSERT_RC(dlock_election_campaign(el, "v", 1, 0, 30000, NULL), DLOCK_OK);
  snprintf(args, sizeof args, "list --json '*%s-[ef]*' 2>/dev/null", prefix);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT_EQUAL(count_of(out, "\"name\": "), 2);
  CU_ASSERT_PTR_NULL(strstr(out, "dlock_fence:"));
  CU_ASSERT_PTR_NULL(strstr(out, "dlock_election:"));
  CU_ASSERT_PTR_NULL(strstr(out, "redisson_lock_token:"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"kind\": \"election\""));
  if (count_of(out, "\"name\": ") != 2 || !strstr(out, "\"kind\": \"election\""))
    fprintf(stderr, "\n%s\n", out);
  /* dlock status says so too */
  snprintf(args, sizeof args, "status '%s' 2>&1", elected);
  CU_ASSERT_EQUAL(th_dlock_output(args, out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "kind:    election\n"));
  if (!strstr(out, "kind:    election\n"))
    fprintf(stderr, "\n%s\n", out);
  TH_ASSERT_RC(dlock_election_resign(el), DLOCK_OK);
  dlock_election_free(el);
  TH_ASSERT_RC(dlock_release(fl), DLOCK_OK);
  dlock_lock_free(fl);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  if (big) { /* the junk goes (this suite's server: its own tests' names) */
    r = th_cmd(&srv, "FLUSHDB");
    if (r)
      freeReplyObject(r);
  }
  dlock_latch_free(lt);
  dlock_semaphore_free(sm);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* dlock watch ARGS... NAME with its stdout readable from *fd. */
static pid_t watch_start(const char *every, const char *name, int *fd) {
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execl(dlock_bin, dlock_bin, "watch", "--every", every, "--for", "3s", name,
          (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  *fd = fds[0];
  return pid;
}

/* Read from fd until it has a whole line or 5 s pass; appends to buf. */
static void read_line(int fd, char *buf, size_t n) {
  size_t len = strlen(buf);
  for (int64_t end = th_now_ms() + 5000; !strchr(buf, '\n') && th_now_ms() < end;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 100) <= 0)
      continue;
    ssize_t k = read(fd, buf + len, n - 1 - len);
    if (k <= 0)
      break;
    len += (size_t)k;
    buf[len] = '\0';
  }
}

/* dlock watch: A holds; B waits; A releases and B takes it; B releases.
 * Refreshed every 100 ms, the watch shows A, then B, then nothing held.
 * Refreshed every 10 s (the timer never fires in its 3 s), it shows the
 * end at once all the same: announcements drive it. */
static void test_watch(void) {
  char name[96];
  snprintf(name, sizeof name, "%s", th_name("watch"));
  dlock_client *ca = th_client(&srv, NULL), *cb = th_client(&srv, NULL);
  dlock_lock *la = NULL, *lb = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(ca, name, NULL, &la), DLOCK_OK);
  TH_ASSERT_RC(dlock_reentrant_lock_new(cb, name, NULL, &lb), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(la, 0, 30000), DLOCK_OK);
  int fast_fd, slow_fd;
  static char fast[8192], slow[8192];
  fast[0] = slow[0] = '\0';
  pid_t fast_pid = watch_start("100ms", name, &fast_fd);
  pid_t slow_pid = watch_start("10s", name, &slow_fd);
  read_line(fast_fd, fast, sizeof fast); /* both show A: they are watching */
  read_line(slow_fd, slow, sizeof slow);
  CU_ASSERT_PTR_NOT_NULL(strstr(fast, dlock_client_id(ca)));
  CU_ASSERT_PTR_NOT_NULL(strstr(slow, dlock_client_id(ca)));
  /* B: waits up to 10 s, holds 500 ms, releases */
  th_acquirer h = {.lock = lb, .wait_ms = 10000, .lease_ms = 30000,
                   .hold_ms = 500};
  th_acquirer_start(&h);
  char channel[160];
  snprintf(channel, sizeof channel, "redisson_lock__channel:{%s}", name);
  CU_ASSERT(th_wait_numsub(&srv, channel, 3, 5000)); /* B and the watches */
  TH_ASSERT_RC(dlock_release(la), DLOCK_OK);
  th_acquirer_join(&h);
  TH_ASSERT_RC(h.rc, DLOCK_OK);
  TH_ASSERT_RC(h.release_rc, DLOCK_OK);
  CU_ASSERT_EQUAL(th_wait_worker(fast_pid, 10000), 0);
  CU_ASSERT_EQUAL(th_wait_worker(slow_pid, 10000), 0);
  for (int i = 0; i < 2; i++) { /* the rest of their output */
    char *buf = i ? slow : fast;
    int fd = i ? slow_fd : fast_fd;
    size_t len = strlen(buf);
    ssize_t k;
    while (len < sizeof fast - 1 && (k = read(fd, buf + len, sizeof fast - 1 - len)) > 0)
      len += (size_t)k;
    buf[len] = '\0';
    close(fd);
  }
  const char *a = strstr(fast, dlock_client_id(ca)), *b = strstr(fast, dlock_client_id(cb));
  CU_ASSERT(a != NULL && b != NULL && a < b);
  CU_ASSERT(b != NULL && strstr(b, " none ") != NULL); /* then nothing held */
  /* the 10 s watch: no timer fired in its 3 s, yet it saw the end */
  CU_ASSERT(strstr(slow, " none ") != NULL);
  if (strstr(slow, " none ") == NULL || b == NULL)
    printf("\n    fast: %s\n    slow: %s ", fast, slow);
  dlock_lock_free(la);
  dlock_lock_free(lb);
  dlock_client_close(ca);
  dlock_client_close(cb);
}

/* Inspect (what `dlock status` prints): kind, holders, counts, mode, queue. */
static dlock_inspection *inspect(dlock_client *c, const char *name) {
  dlock_inspection *in = NULL;
  TH_ASSERT_RC(dlock_inspect(c, name, NULL, &in), DLOCK_OK);
  CU_ASSERT_FATAL(in != NULL);
  return in;
}

static int run_output(char *const args[], char *out, size_t size);

static void test_inspect_every_kind(void) {
  dlock_client *c = th_client(&srv, NULL);
  char name[256], owner[80];
  dlock_inspection *in;
  snprintf(name, sizeof name, "%s", th_name("inspect"));
  in = inspect(c, name); /* nothing there */
  CU_ASSERT_STRING_EQUAL(in->kind, "none");
  CU_ASSERT(in->ttl_ms == -2 && in->nholders == 0 && !in->has_count);
  dlock_inspection_free(in);

  dlock_lock *l = NULL, *f = NULL, *r = NULL, *w = NULL;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  snprintf(owner, sizeof owner, "%s:%llu", dlock_client_id(c),
           (unsigned long long)dlock_thread_id());
  in = inspect(c, name);
  CU_ASSERT_STRING_EQUAL(in->kind, "lock");
  CU_ASSERT(in->ttl_ms > 29000 && in->ttl_ms <= 30000);
  CU_ASSERT_FATAL(in->nholders == 1);
  CU_ASSERT_STRING_EQUAL(in->holders[0].owner, owner);
  CU_ASSERT_EQUAL(in->holders[0].count, 2);
  /* who: the connection's name has the host and process of the holder */
  char who[160], host[128] = "";
  gethostname(host, sizeof host - 1);
  snprintf(who, sizeof who, "dlock:%s:%ld:%s", host, (long)getpid(),
           dlock_client_id(c));
  CU_ASSERT_FATAL(in->holder_clients != NULL);
  CU_ASSERT_STRING_EQUAL(in->holder_clients[0], who);
  CU_ASSERT(in->mode == NULL && in->queue_length == 0);
  dlock_inspection_free(in);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);

  /* a fair lock with one waiter queued behind its holder */
  TH_ASSERT_RC(dlock_fair_lock_new(c, name, NULL, &f), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(f, 0, 30000), DLOCK_OK);
  th_acquirer fw = {.wait_ms = 20000, .lease_ms = 10000};
  TH_ASSERT_RC(dlock_fair_lock_new(c, name, NULL, &fw.lock), DLOCK_OK);
  th_acquirer_start(&fw);
  char queue[300];
  snprintf(queue, sizeof queue, "redisson_lock_queue:{%s}", name);
  for (int i = 0; i < 1000 && th_int(&srv, "LLEN %s", queue) != 1; i++)
    usleep(2000); /* bounded: the waiter queues on its second try */
  in = inspect(c, name);
  CU_ASSERT_STRING_EQUAL(in->kind, "fair lock");
  CU_ASSERT_EQUAL(in->queue_length, 1);
  CU_ASSERT_EQUAL(in->nholders, 1);
  dlock_inspection_free(in);
  TH_ASSERT_RC(dlock_release(f), DLOCK_OK);
  th_acquirer_join(&fw);
  CU_ASSERT_EQUAL(fw.rc, DLOCK_OK);

  /* a read-write lock: mode, readers and the writer's field */
  TH_ASSERT_RC(dlock_write_lock_new(c, name, NULL, &w), DLOCK_OK);
  TH_ASSERT_RC(dlock_read_lock_new(c, name, NULL, &r), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(w, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(r, 0, 30000), DLOCK_OK);
  in = inspect(c, name);
  CU_ASSERT_STRING_EQUAL(in->kind, "rwlock");
  CU_ASSERT(in->mode != NULL && strcmp(in->mode, "write") == 0);
  CU_ASSERT_EQUAL(in->nholders, 2); /* "U:T:write" and "U:T" */
  dlock_inspection_free(in);
  char out[2048];
  char *status[] = {"status", (char *)name, NULL};
  CU_ASSERT_EQUAL(run_output(status, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "mode:    write\n") != NULL); /* was "mode:    mode" */
  CU_ASSERT(strstr(out, " (connection dlock:") != NULL); /* holders named */
  TH_ASSERT_RC(dlock_release(w), DLOCK_OK);
  in = inspect(c, name); /* downgraded */
  CU_ASSERT(in->mode != NULL && strcmp(in->mode, "read") == 0);
  dlock_inspection_free(in);
  TH_ASSERT_RC(dlock_release(r), DLOCK_OK);

  /* counts: a latch (or semaphore), then an expirable-permit semaphore */
  dlock_latch *latch = NULL;
  TH_ASSERT_RC(dlock_latch_new(c, name, NULL, &latch), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_latch_try_set_count(latch, 3, &th_flag), 1);
  in = inspect(c, name);
  CU_ASSERT_STRING_EQUAL(in->kind, "count");
  CU_ASSERT(in->has_count && in->count == 3 && in->ttl_ms == -1);
  dlock_inspection_free(in);
  TH_ASSERT_FLAG(dlock_latch_delete(latch, &th_flag), 1);
  dlock_permits *p = NULL;
  dlock_permit_id id;
  TH_ASSERT_RC(dlock_permits_new(c, name, NULL, &p), DLOCK_OK);
  TH_ASSERT_FLAG(dlock_permits_try_set_permits(p, 3, 0, &th_flag), 1);
  dlock_permit_id ids[2];
  TH_ASSERT_RC(dlock_permits_acquire(p, 2, 0, 30000, ids), DLOCK_OK);
  in = inspect(c, name);
  CU_ASSERT_STRING_EQUAL(in->kind, "permit semaphore");
  CU_ASSERT(in->has_count && in->count == 1);
  CU_ASSERT_EQUAL(in->permits_held, 2); /* was shown as no holders at all */
  CU_ASSERT(in->permit_expires_ms > 29000 && in->permit_expires_ms <= 30000);
  dlock_inspection_free(in);
  CU_ASSERT_EQUAL(run_output(status, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "held:    2 permits, the first expires in") != NULL);
  char *status_json[] = {"status", "--json", (char *)name, NULL};
  CU_ASSERT_EQUAL(run_output(status_json, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "\"permits_held\": 2") != NULL);
  TH_ASSERT_RC(dlock_permits_release(p, ids, 2), DLOCK_OK);
  TH_ASSERT_RC(dlock_permits_acquire(p, 1, 0, DLOCK_LEASE_WATCHDOG, &id), DLOCK_OK);
  in = inspect(c, name);
  CU_ASSERT_EQUAL(in->permits_held, 1);
  dlock_inspection_free(in);
  TH_ASSERT_RC(dlock_permits_release(p, &id, 1), DLOCK_OK);
  in = inspect(c, name); /* idle: the same string as a semaphore's */
  CU_ASSERT_STRING_EQUAL(in->kind, "count");
  CU_ASSERT(in->permits_held == 0 && in->permit_expires_ms == -1);
  dlock_inspection_free(in);
  CU_ASSERT_EQUAL(run_output(status, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "count (a latch's count or a semaphore's available permits)") != NULL);

  /* a key dlock did not write, and bad input */
  th_int(&srv, "DEL %s", name);
  th_int(&srv, "RPUSH %s x", name);
  in = inspect(c, name);
  CU_ASSERT_STRING_EQUAL(in->kind, "list");
  dlock_inspection_free(in);
  th_int(&srv, "DEL %s", name);
  th_int(&srv, "SET %s not-a-number", name);
  in = inspect(c, name);
  CU_ASSERT_STRING_EQUAL(in->kind, "string");
  CU_ASSERT(!in->has_count);
  dlock_inspection_free(in);
  th_int(&srv, "DEL %s", name);
  in = (dlock_inspection *)1;
  TH_ASSERT_RC(dlock_inspect(c, "", NULL, &in), DLOCK_EINVAL);
  CU_ASSERT(in == NULL);
  TH_ASSERT_RC(dlock_inspect(c, NULL, NULL, &in), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_inspect(NULL, name, NULL, &in), DLOCK_EINVAL);
  TH_ASSERT_RC(dlock_inspect(c, name, NULL, NULL), DLOCK_EINVAL);
  dlock_inspection_free(NULL);

  dlock_permits_free(p);
  dlock_latch_free(latch);
  dlock_lock_free(r);
  dlock_lock_free(w);
  dlock_lock_free(fw.lock);
  dlock_lock_free(f);
  dlock_lock_free(l);
  dlock_client_close(c);
}

static void test_bad_input(void) {
  char err[1024];
  struct {
    char *args[8];
    const char *says;
  } cases[] = {
      {{"run", "--bogus", "x", "--", "true"}, "unknown option"},
      {{"run", "--wait", "5parsecs", "x", "--", "true"}, "bad duration"},
      {{"run", "--lease", "-1s", "x", "--", "true"}, "bad duration"},
      /* strtod's other spellings are no durations */
      {{"run", "--wait", "1e3", "x", "--", "true"}, "bad duration"},
      {{"run", "--wait", "0x10", "x", "--", "true"}, "bad duration"},
      {{"run", "--wait", "inf", "x", "--", "true"}, "bad duration"},
      {{"run", "--wait", "nan", "x", "--", "true"}, "bad duration"},
      {{"run", "--wait", "1.", "x", "--", "true"}, "bad duration"},
      {{"run", "--wait", ".5s", "x", "--", "true"}, "bad duration"},
      {{"run", "--replica-sync", "3s", "x", "--", "true"}, "below the command"},
      {{"run", "--replica-sync-all", "x", "--", "true"}, "goes with --replica-sync"},
      /* a standalone server: no replicas to count */
      {{"run", "--replica-sync", "300ms", "--replica-sync-all", "x", "--",
        "true"}, "--replica-sync-all is for cluster and sentinel"},
      {{"--redis", "http://nowhere", "run", "x", "--", "true"}, "bad --redis URL"},
      {{"--redis", "redis://h:99999", "run", "x", "--", "true"}, "port"},
      {{"run", "x", "--"}, "missing the command"},
      {{"run", "x"}, "missing the command"},
      {{"run"}, "missing NAME"},
      {{"frobnicate"}, "unknown command"},
      {{NULL}, "missing command"},
      {{"latch", "set", "x", "zero"}, "bad COUNT"},
      {{"sem", "acquire", "x", "-3"}, "bad number"},
      {{"run", "--semaphore", "x", "--", "true"}, "--permits"},
      {{"run", "--fair", "--read", "x", "--", "true"}, "exclude"},
      {{"run", "--kind", "fenced", "--fair", "x", "--", "true"}, "exclude"},
      {{"run", "--kind", "mutex", "x", "--", "true"}, "no lock kind \"mutex\""},
      {{"run", "--kind"}, "--kind needs a value"},
      {{"elect", "--kind", "fair", "x", "--", "true"}, "kind of its own"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = run_dlock(cases[i].args, err, sizeof err);
    if (rc != 64 || strstr(err, cases[i].says) == NULL)
      fprintf(stderr, "\n  case %zu: exit %d, stderr: %s", i, rc, err);
    CU_ASSERT_EQUAL(rc, 64);
    CU_ASSERT(strstr(err, cases[i].says) != NULL);
  }
  /* a server that is not there: a clear message and its own status */
  char url[256];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port + 1 > 65535 ? 1 : srv.port + 1);
  char *dead[] = {"--redis", url, "run", "x", "--", "true", NULL};
  int64_t t0 = th_now_ms();
  CU_ASSERT_EQUAL(run_dlock(dead, err, sizeof err), 69);
  int64_t took = th_now_ms() - t0;
  CU_ASSERT(strstr(err, "cannot connect") != NULL);
  /* refused: said at once, not after the 2 s connect timeout (measured
   * 5-20 ms, quiet and beside two CPU hogs; bound 1,000 ms) */
  CU_ASSERT(strstr(err, "connection refused") != NULL);
  CU_ASSERT(took < 1000);
  if (took >= 1000)
    fprintf(stderr, "\n  a refused connection took %lld ms\n", (long long)took);
  char *help[] = {"run", "--help", NULL};
  CU_ASSERT_EQUAL(run_dlock(help, NULL, 0), 0);
}

/* Refusals say the fact once, in words: a busy or late acquire names the
 * kind and the name once (not "job was not acquired ...: lock "job": not
 * available"), a key of another type says so once, a dead server's
 * message does not add "connection failed or was lost" to "cannot
 * connect". */
static void test_messages_say_it_once(void) {
  char err[2048], want[512];
  const char *name = th_name("once");
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  char *busy[] = {"run", "--wait", "0", (char *)name, "--", "true", NULL};
  CU_ASSERT_EQUAL(run_dlock(busy, err, sizeof err), 75);
  snprintf(want, sizeof want, "dlock: lock \"%s\": not available: held by "
           "another owner", name);
  CU_ASSERT(strncmp(err, want, strlen(want)) == 0);
  CU_ASSERT(strchr(err, '\n') == strrchr(err, '\n')); /* one line */
  char *late[] = {"run", "--wait", "200ms", (char *)name, "--", "true", NULL};
  CU_ASSERT_EQUAL(run_dlock(late, err, sizeof err), 75);
  snprintf(want, sizeof want, "dlock: lock \"%s\": still not available "
           "after 200 ms", name);
  CU_ASSERT(strncmp(err, want, strlen(want)) == 0);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  redisReply *r = th_cmd(&srv, "SET %s x", name);
  if (r)
    freeReplyObject(r);
  CU_ASSERT_EQUAL(run_dlock(busy, err, sizeof err), 65);
  const char *said = strstr(err, "its key holds data of another type");
  CU_ASSERT(said != NULL && strstr(err, "another kind of object") == NULL);
  r = th_cmd(&srv, "DEL %s", name);
  if (r)
    freeReplyObject(r);
  char url[256];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", srv.port + 1 > 65535 ? 1 : srv.port + 1);
  char *dead[] = {"--redis", url, "run", "x", "--", "true", NULL};
  CU_ASSERT_EQUAL(run_dlock(dead, err, sizeof err), 69);
  /* nothing listens there: the kernel's refusal, said once, at once */
  snprintf(want, sizeof want, "dlock: cannot connect to %s: 127.0.0.1:%s "
           "(command connection): connect failed: connection refused", url,
           strrchr(url, ':') + 1);
  CU_ASSERT(strncmp(err, want, strlen(want)) == 0);
  CU_ASSERT_PTR_NULL(strstr(err, "failed or was lost"));
  if (strncmp(err, want, strlen(want)) != 0)
    fprintf(stderr, "\n  dead server: %s", err);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* Run argv (a program's path first) to the end (bounded): its stdout (and
 * stderr when err_too) in out, NUL-terminated, *len bytes (may be NULL:
 * binary-safe); the exit status. */
static int capture(char *const argv[], int err_too, char *out, size_t size,
                   size_t *len) {
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    if (err_too)
      dup2(fds[1], 2);
    close(fds[0]);
    execv(argv[0], argv);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r = 1;
  int64_t end = th_now_ms() + 30000; /* a hung program fails, not hangs */
  while (n + 1 < size && r > 0 && th_now_ms() < end) {
    struct pollfd p = {fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) > 0)
      r = read(fds[0], out + n, size - 1 - n);
    if (r > 0 && p.revents)
      n += (size_t)r;
  }
  out[n] = '\0';
  if (len)
    *len = n;
  close(fds[0]);
  return th_wait_worker(pid, (int)(end > th_now_ms() ? end - th_now_ms() : 1));
}

/* Run dlock (or another program: args[0] a path) with stdout and stderr in
 * out; the exit status. */
static int run_output(char *const args[], char *out, size_t size) {
  char *argv[32] = {(char *)dlock_bin};
  int n = args[0][0] == '/' ? 0 : 1;
  for (int i = 0; args[i] && n < 31; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  return capture(argv, 1, out, size, NULL);
}

/* A file only its owner may read, holding text. */
static void secret_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs(text, f);
  fclose(f);
  chmod(path, 0600);
}

/* The length of NAME's fair queue (wait until it is want, up to 10 s). */
static long long queue_len(const char *name, long long want) {
  long long n = -1;
  for (int64_t end = th_now_ms() + 10000; th_now_ms() < end; usleep(5000)) {
    n = th_int(&srv, "LLEN redisson_lock_queue:{%s}", name);
    if (n == want)
      break;
  }
  return n;
}

/* `dlock run --read` (--write, --semaphore, latch) beside a plain lock's
 * holder: refused (exit 65) with both kinds named, and the holder's lock
 * untouched. `run --fair` there waits instead: the two share Redisson's
 * hash and cannot be told apart (a fair lock without waiters is a plain
 * one). A plain release wakes only plain waiters, as in Redisson, so the
 * fair waiter finds the lock free at its next try: within a third of its
 * 5 s wait slot. */
static void test_kind_mixup(void) {
  const char *name = th_name("mixed");
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l;
  TH_ASSERT_RC(dlock_reentrant_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  char out[4096];
  char *read[] = {"run", "--wait", "0", "--read", (char *)name, "--", "true", NULL};
  CU_ASSERT_EQUAL(run_output(read, out, sizeof out), 65);
  CU_ASSERT(strstr(out, "holds a lock (a hash), not a read-write lock") != NULL);
  char *write[] = {"run", "--wait", "1s", "--write", (char *)name, "true", NULL};
  CU_ASSERT_EQUAL(run_output(write, out, sizeof out), 65);
  char *latch[] = {"latch", "set", (char *)name, "2", NULL};
  CU_ASSERT_EQUAL(run_output(latch, out, sizeof out), 65);
  CU_ASSERT(strstr(out, "not a count-down latch") != NULL);
  CU_ASSERT_EQUAL(count_of(out, "holds"), 1); /* the fact once */
  char *sem[] = {"run", "--wait", "0", "--semaphore", "--permits", "2",
                 (char *)name, "--", "true", NULL};
  CU_ASSERT_EQUAL(run_output(sem, out, sizeof out), 65);
  /* data that is not dlock's (Redis says WRONGTYPE): said once, in words,
   * without Redis's raw text or a script's SHA */
  char odd[256];
  snprintf(odd, sizeof odd, "%s:string", name);
  th_int(&srv, "SET %s x", odd);
  char *on_string[] = {"run", "--wait", "0", odd, "--", "true", NULL};
  CU_ASSERT_EQUAL(run_output(on_string, out, sizeof out), 65);
  CU_ASSERT_EQUAL(count_of(out, "another type"), 1); /* the fact once */
  CU_ASSERT_EQUAL(count_of(out, "another kind"), 0);
  CU_ASSERT(strstr(out, "WRONGTYPE") == NULL && strstr(out, "script") == NULL);
  th_int(&srv, "DEL %s", odd);
  char *try[] = {"run", "--fair", "--wait", "0", (char *)name, "--", "true", NULL};
  CU_ASSERT_EQUAL(run_output(try, out, sizeof out), 75);
  char *fair[] = {"run", "--fair", "--wait", "20s", (char *)name, "--", "true", NULL};
  pid_t waiter = start(fair, NULL);
  CU_ASSERT_EQUAL(queue_len(name, 1), 1);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK); /* still ours */
  CU_ASSERT_EQUAL(th_wait_worker(waiter, 20000), 0);
  /* 1.67 s at most by design; 3 s leaves room for two CPU hogs */
  CU_ASSERT(th_now_ms() - t0 < 3000);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* Run an ACL line on every node of s (a cluster's too: a user is per node). */
static void acl_everywhere(th_server *s, const char *line) {
  int n = s->nnodes ? s->nnodes : 1;
  for (int i = 0; i < n; i++) {
    th_server *node = s->nnodes ? &s->node[i] : s;
    redisReply *r = th_cmd(node, line); /* hiredis splits the words */
    CU_ASSERT(r && r->type == REDIS_REPLY_STATUS);
    if (r && r->type != REDIS_REPLY_STATUS)
      fprintf(stderr, "\n  %s: %s\n", line, r->type == REDIS_REPLY_ERROR ? r->str : "?");
    if (r)
      freeReplyObject(r);
  }
}

/* s's URL with user:password@ in it. */
static void url_as(const th_server *s, const char *user, char *out, size_t n) {
  const char *rest = strstr(s->url, "://");
  snprintf(out, n, "%.*s://%s:pw@%s", (int)(rest - s->url), s->url, user, rest + 3);
}

/* The ready ACL line of docs/security.md, read from the file itself, with
 * the password pw. */
static void security_md_line(char *out, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/security.md", getenv("DLOCK_DOCS"));
  FILE *f = fopen(path, "r");
  CU_ASSERT_FATAL(f != NULL);
  char line[2048];
  out[0] = '\0';
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "ACL SETUSER dlock on >CHANGE-ME ", 32) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(out, n, "ACL SETUSER dlock on >pw %s", line + 32);
    }
  fclose(f);
  CU_ASSERT_FATAL(out[0] != '\0');
}

/* Run dlock as user on s with args after the URL (NULL-terminated): the
 * exit status, out its output. */
static int as_user(const th_server *s, const char *user, char *const args[],
                   char *out, size_t n) {
  char url[1024];
  url_as(s, user, url, sizeof url);
  char *argv[32] = {"--redis", url};
  int k = 2;
  for (int i = 0; args[i] && k < 31; i++)
    argv[k++] = args[i];
  argv[k] = NULL;
  return run_output(argv, out, n);
}

/* `dlock check` with the user of docs/security.md (the line read from the
 * file) passes, and so does every subcommand, on the suite's topology;
 * check leaves nothing that outlives ten seconds (a semaphore's count:
 * its TTL; a 1 s one can run out during a slow sanitizer run's checks,
 * and a release after that makes the count again without a TTL). Each missing permission
 * fails check (77), and check names it: +subscribe (only a contended
 * call subscribes), channels (a fair release publishes only to a queued
 * waiter), +scan (dlock list), +wait (the replica guard). */
static void test_check_acl(void) {
  char line[2048], out[16384];
  security_md_line(line, sizeof line);
  acl_everywhere(&srv, line);
  char *check[] = {"check", NULL};
  CU_ASSERT_EQUAL(as_user(&srv, "dlock", check, out, sizeof out), 0);
  /* every kind of dlock_kinds() (2 lines each, 1 for the shared ones),
   * the read-write lock (2), latch, semaphore, permits, list, memory: 23
   * with the built-in kinds, more with any kind the catalog adds */
  const char *all = strstr(out, "dlock check: all ");
  int lines = 0;
  CU_ASSERT(all && sscanf(all, "dlock check: all %d passed", &lines) == 1 &&
            lines >= 23);
  if (lines < 23)
    fprintf(stderr, "\n%s", out);
  CU_ASSERT(strstr(out, "pw@") == NULL);
  /* every subcommand, with that user */
  const char *name = th_name("acl-cli");
  char n1[256], n2[256], n3[256], n5[256], n6[256], pattern[256];
  snprintf(n1, sizeof n1, "%s:lock", name);
  snprintf(n6, sizeof n6, "%s:election", name);
  snprintf(n2, sizeof n2, "%s:latch", name);
  snprintf(n3, sizeof n3, "%s:permits", name);
  snprintf(n5, sizeof n5, "%s:sem", name);
  snprintf(pattern, sizeof pattern, "%s:*", name);
  char *const cmds[][12] = {
      {"run", n1, "--", "true", NULL},
      {"run", "--fair", n1, "--", "true", NULL},
      {"run", "--semaphore", "--permits", "2", n3, "--", "true", NULL},
      {"latch", "set", n2, "1", NULL},
      {"latch", "get", n2, NULL},
      {"latch", "count-down", n2, NULL},
      {"latch", "wait", n2, NULL},
      {"latch", "delete", n2, NULL},
      {"sem", "init", n5, "2", NULL},
      {"sem", "set", n5, "3", NULL},
      {"sem", "acquire", n5, NULL},
      {"sem", "release", n5, NULL},
      {"sem", "available", n5, NULL},
      {"status", n1, NULL},
      {"list", pattern, NULL},
      {"watch", "--for", "300ms", n1, NULL},
      {"unlock", "--force", n1, NULL},
      {"elect", n6, "--", "true", NULL}, /* hmget, dlock_election_channel */
      {"leader", n6, NULL},
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    int rc = as_user(&srv, "dlock", cmds[i], out, sizeof out);
    if (rc != 0)
      fprintf(stderr, "\n  dlock %s %s: exit %d: %s", cmds[i][0], cmds[i][1], rc, out);
    CU_ASSERT_EQUAL(rc, 0);
  }
  char n4[256]; /* a read-write lock needs a name of its own */
  snprintf(n4, sizeof n4, "%s:rw", name);
  char *rw[] = {"run", "--read", n4, "--", "true", NULL};
  CU_ASSERT_EQUAL(as_user(&srv, "dlock", rw, out, sizeof out), 0);
  /* the grouped multi-lock (hmget), through the library as that user */
  char url[1024];
  url_as(&srv, "dlock", url, sizeof url);
  dlock_client *as = NULL;
  TH_ASSERT_RC(dlock_client_open(url, NULL, &as), DLOCK_OK);
  const char *values[] = {"row-1", "row-2"};
  char n7[256];
  snprintf(n7, sizeof n7, "%s:group", name);
  dlock_lock *g = NULL;
  TH_ASSERT_RC(dlock_group_lock_new(as, n7, values, NULL, 2, NULL, &g), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(g, 0, 30000), DLOCK_OK);
  TH_ASSERT_RC(dlock_release(g), DLOCK_OK);
  dlock_lock_free(g);
  dlock_client_close(as);
  /* contended: a waiting run subscribes; `watch` subscribes to the channels */
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l;
  TH_ASSERT_RC(dlock_fair_lock_new(c, n1, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  char *fair[] = {"--redis", url, "run", "--fair", n1, "--", "true", NULL};
  pid_t waiter = start(fair, NULL);
  CU_ASSERT_EQUAL(queue_len(n1, 1), 1);
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(th_wait_worker(waiter, 10000), 0);
  dlock_lock_free(l);
  dlock_client_close(c);
  /* check leaves nothing behind past ten seconds */
  dlock_client *lc = th_client(&srv, NULL);
  uint64_t cursor = 0;
  int scans = 0;
  do {
    dlock_listing *page = NULL;
    TH_ASSERT_RC(dlock_list(lc, "dlock-check:*", &cursor, 1000, &page), DLOCK_OK);
    for (size_t i = 0; page && i < page->n; i++) {
      long long pttl = th_int(&srv, "PTTL %b", page->names[i], page->lens[i]);
      CU_ASSERT(pttl == -2 || (pttl > 0 && pttl <= 10000));
      if (!(pttl == -2 || (pttl > 0 && pttl <= 10000)))
        fprintf(stderr, "\n  left behind: %.*s (PTTL %lld)\n",
                (int)page->lens[i], page->names[i], pttl);
    }
    dlock_listing_free(page);
  } while (cursor != 0 && ++scans < 1000);
  dlock_client_close(lc);

  /* one missing permission at a time: check fails and names it */
  static const struct {
    const char *user, *acl, *names;
  } missing[] = {
      {"nosub", "-subscribe -ssubscribe", "missing permission: +"},
      {"nochan", "resetchannels", "missing permission: a channel pattern"},
      {"noscan", "-scan", "missing permission: +scan"},
  };
  for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
    char acl[2200]; /* the line for another user ("ACL SETUSER dlock " is 18) */
    snprintf(acl, sizeof acl, "ACL SETUSER %s %s %s", missing[i].user, line + 18,
             missing[i].acl);
    acl_everywhere(&srv, acl);
    CU_ASSERT_EQUAL(as_user(&srv, missing[i].user, check, out, sizeof out), 77);
    CU_ASSERT(strstr(out, missing[i].names) != NULL);
    if (!strstr(out, missing[i].names))
      fprintf(stderr, "\n  %s:\n%s", missing[i].user, out);
  }
  /* noscan: `dlock list` fails with the refusal as its last word */
  char *list[] = {"list", NULL};
  CU_ASSERT_EQUAL(as_user(&srv, "noscan", list, out, sizeof out), 77);
  CU_ASSERT(strstr(out, "SCAN call") == NULL);
  CU_ASSERT(strstr(out, "'scan'") != NULL);
  /* nosub: only the contended lines fail (uncontended calls subscribe to
   * nothing), and a contended `dlock run` exits 77 */
  as_user(&srv, "nosub", check, out, sizeof out);
  CU_ASSERT(strstr(out, "ok    reentrant lock: acquire") != NULL);
  CU_ASSERT(strstr(out, "FAIL  reentrant lock, contended") != NULL);
  /* the spin lock needs no pub/sub: it passes, and check says so */
  CU_ASSERT(strstr(out, "ok    spin lock") != NULL);
  CU_ASSERT(strstr(out, "only the spin lock works") != NULL);
}

/* `dlock check` for a user refused every pub/sub command: the spin lock's
 * line passes and the tool names it as the way; `dlock run --spin` works
 * for that user, waits included. */
static void test_check_acl_spin(void) {
  char line[2048], out[16384];
  security_md_line(line, sizeof line);
  char acl[2200];
  snprintf(acl, sizeof acl, "ACL SETUSER nopubsub %s -@pubsub", line + 18);
  acl_everywhere(&srv, acl);
  char *check[] = {"check", NULL};
  CU_ASSERT_EQUAL(as_user(&srv, "nopubsub", check, out, sizeof out), 77);
  CU_ASSERT(strstr(out, "ok    spin lock") != NULL);
  CU_ASSERT(strstr(out, "only the spin lock works") != NULL);
  if (!strstr(out, "ok    spin lock"))
    fprintf(stderr, "\n%s", out);
  const char *name = th_name("spin-cli");
  char *run[] = {"run", "--spin", (char *)name, "--", "true", NULL};
  CU_ASSERT_EQUAL(as_user(&srv, "nopubsub", run, out, sizeof out), 0);
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l = NULL;
  TH_ASSERT_RC(dlock_spin_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 800), DLOCK_OK); /* held 0.8 s */
  char *waiting[] = {"run", "--spin", "--wait", "5s", (char *)name, "--",
                     "true", NULL};
  CU_ASSERT_EQUAL(as_user(&srv, "nopubsub", waiting, out, sizeof out), 0);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* WAIT for the replica guard (Sentinel: the client knows the master's
 * replicas): `check --replica-sync` passes with +wait, and without it the
 * refusal is named (not taken for a replica that did not answer). */
static void test_check_acl_wait(void) {
  if (th_cluster_mode() || th_tls_mode())
    return; /* one topology is enough: the plain variant runs it */
  th_server k;
  CU_ASSERT_FATAL(th_sentinel_start(&k, 1, 1) == 0);
  char line[2048], acl[2200], out[16384];
  security_md_line(line, sizeof line);
  snprintf(acl, sizeof acl, "ACL SETUSER nowait %s -wait", line + 18);
  for (int i = 0; i < k.nnodes - k.sentinels; i++) { /* master and replica */
    th_server one = k.node[i];
    one.nnodes = 0;
    acl_everywhere(&one, line);
    acl_everywhere(&one, acl);
  }
  char *check[] = {"check", "--replica-sync", "1s", NULL};
  CU_ASSERT_EQUAL(as_user(&k, "dlock", check, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "replica guard is on") != NULL);
  CU_ASSERT_EQUAL(as_user(&k, "nowait", check, out, sizeof out), 77);
  CU_ASSERT(strstr(out, "missing permission: +wait") != NULL);
  if (!strstr(out, "missing permission: +wait"))
    fprintf(stderr, "\n%s", out);
  th_server_stop(&k);
}

/* A failing path's output must not show the password. */
#define ASSERT_NO_SECRET(out, secret)                                         \
  do {                                                                        \
    if (strstr(out, secret) != NULL)                                          \
      fprintf(stderr, "\n  %s:%d: the password is in: %s", __FILE__, __LINE__, \
              out);                                                           \
    CU_ASSERT(strstr(out, secret) == NULL);                                   \
  } while (0)

static void test_credentials(void) {
  th_server a;
  CU_ASSERT_FATAL(th_server_start(&a, "--requirepass cli-s3cret") == 0);
  char out[4096], wrong[128], down[128], pwfile[128];
  snprintf(wrong, sizeof wrong, "redis://app:wr0ng-pw@127.0.0.1:%d", a.port);
  snprintf(down, sizeof down, "redis://:wr0ng-pw@127.0.0.1:%d",
           rs_free_port());
  /* wrong password, server down, a RedLock over both, a bad URL */
  char *bad_pw[] = {"--redis", wrong, "latch", "get", "x", NULL};
  CU_ASSERT_EQUAL(run_output(bad_pw, out, sizeof out), 78); /* config */
  ASSERT_NO_SECRET(out, "wr0ng-pw");
  CU_ASSERT(strstr(out, "redis://app:***@127.0.0.1") != NULL);
  char *dead[] = {"--redis", down, "sem", "available", "x", NULL};
  CU_ASSERT_EQUAL(run_output(dead, out, sizeof out), 69);
  ASSERT_NO_SECRET(out, "wr0ng-pw");
  char *redlock[] = {"--redis", wrong, "--redis", down, "--redis", wrong,
                     "run", "--wait", "0", "x", "--", "true", NULL};
  CU_ASSERT(run_output(redlock, out, sizeof out) != 0);
  ASSERT_NO_SECRET(out, "wr0ng-pw");
  char *bad_url[] = {"--redis", "http://app:wr0ng-pw@h", "latch", "get", "x", NULL};
  CU_ASSERT_EQUAL(run_output(bad_url, out, sizeof out), 64);
  ASSERT_NO_SECRET(out, "wr0ng-pw");
  setenv("DLOCK_REDIS_URL", wrong, 1);
  char *env_url[] = {"latch", "get", "x", NULL};
  CU_ASSERT_EQUAL(run_output(env_url, out, sizeof out), 78);
  ASSERT_NO_SECRET(out, "wr0ng-pw");
  setenv("DLOCK_REDIS_URL", "ftp://app:wr0ng-pw@h", 1);
  CU_ASSERT_EQUAL(run_output(env_url, out, sizeof out), 64);
  ASSERT_NO_SECRET(out, "wr0ng-pw");
  setenv("DLOCK_REDIS_URL", srv.url, 1);
  const char *bench = getenv("DLOCK_BENCH");
  if (bench) {
    char *bench_args[] = {(char *)bench, "--url", down, "--workload", "W1",
                          "--duration", "0.1", "--json", "/dev/null", NULL};
    CU_ASSERT(run_output(bench_args, out, sizeof out) != 0);
    ASSERT_NO_SECRET(out, "wr0ng-pw");
  }

  /* the password from the environment, for a URL without one */
  char url[128];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", a.port);
  char *set[] = {"--redis", url, "latch", "set", "creds", "2", NULL};
  setenv("DLOCK_REDIS_PASSWORD", "cli-s3cret", 1);
  CU_ASSERT_EQUAL(run_output(set, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "set") != NULL);
  setenv("DLOCK_REDIS_PASSWORD", "wr0ng-pw", 1);
  CU_ASSERT_EQUAL(run_output(set, out, sizeof out), 78);
  ASSERT_NO_SECRET(out, "wr0ng-pw");
  unsetenv("DLOCK_REDIS_PASSWORD");
  /* or from a file no one else may read */
  snprintf(pwfile, sizeof pwfile, "%s/pw", tmpdir);
  secret_file(pwfile, "cli-s3cret\n");
  chmod(pwfile, 0644);
  char *get[] = {"--redis", url, "--password-file", pwfile, "latch", "get",
                 "creds", NULL};
  CU_ASSERT_EQUAL(run_output(get, out, sizeof out), 64);
  CU_ASSERT(strstr(out, "chmod 600") != NULL);
  ASSERT_NO_SECRET(out, "cli-s3cret");
  chmod(pwfile, 0600);
  CU_ASSERT_EQUAL(run_output(get, out, sizeof out), 0);
  CU_ASSERT(strncmp(out, "2", 1) == 0);
  FILE *f = fopen(pwfile, "w");
  fclose(f);
  CU_ASSERT_EQUAL(run_output(get, out, sizeof out), 64); /* empty */
  char *help[] = {"--help", NULL};
  CU_ASSERT_EQUAL(run_output(help, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "--password-file") && strstr(out, "DLOCK_REDIS_PASSWORD"));
  th_server_stop(&a);
}

/* The one rule: dlock's options (global ones included) go before NAME, in
 * any of the places before it; after NAME they are refused (latch, sem,
 * status, ...) or COMMAND's (run). */
static void test_options_before_name(void) {
  char out[1024], name[200], dead[64];
  snprintf(name, sizeof name, "%s", th_name("before-name"));
  snprintf(dead, sizeof dead, "redis://127.0.0.1:%d", rs_free_port());
  setenv("DLOCK_REDIS_URL", dead, 1); /* only --redis reaches the server */
  char *set[] = {"--redis", srv.url, "latch", "set", name, "2", NULL};
  CU_ASSERT_EQUAL(run_output(set, out, sizeof out), 0);
  char *get1[] = {"latch", "--redis", srv.url, "get", name, NULL};
  CU_ASSERT_EQUAL(run_output(get1, out, sizeof out), 0);
  CU_ASSERT(strncmp(out, "2", 1) == 0);
  char *get2[] = {"latch", "get", "--redis", srv.url, name, NULL};
  CU_ASSERT_EQUAL(run_output(get2, out, sizeof out), 0);
  CU_ASSERT(strncmp(out, "2", 1) == 0);
  char *after[] = {"latch", "get", name, "--redis", srv.url, NULL};
  CU_ASSERT_EQUAL(run_output(after, out, sizeof out), 64);
  CU_ASSERT(strstr(out, "options go before NAME") != NULL);
  char *status_after[] = {"status", name, "--json", NULL};
  CU_ASSERT_EQUAL(run_output(status_after, out, sizeof out), 64);
  /* a NAME that starts with a dash, after `--` */
  char *dash[] = {"--redis", srv.url, "status", "--", "-dash", NULL};
  CU_ASSERT_EQUAL(run_output(dash, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "name:    -dash") != NULL);
  /* run: everything after NAME is COMMAND's, dlock's options included */
  char lock[220];
  snprintf(lock, sizeof lock, "%s:lock", name);
  char *run[] = {"run", "--redis", srv.url, lock, "echo", "--redis", "x",
                 "--wait", "0", "--", "y", NULL};
  CU_ASSERT_EQUAL(run_output(run, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "--redis x --wait 0 -- y\n");
  /* an option right after NAME is a mistake, not a program to exec */
  char *late[] = {"run", "--redis", srv.url, lock, "--wait", "0", "--", "echo",
                  "hi", NULL};
  CU_ASSERT_EQUAL(run_output(late, out, sizeof out), 64);
  CU_ASSERT(strstr(out, "options go before NAME") != NULL);
  char *help[] = {"run", "--help", NULL};
  CU_ASSERT_EQUAL(run_output(help, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "Options go before NAME") != NULL);
  char *missing[] = {"latch", "get", "--redis", NULL};
  CU_ASSERT_EQUAL(run_output(missing, out, sizeof out), 64);
  CU_ASSERT(strstr(out, "--redis needs a value") != NULL);
  setenv("DLOCK_REDIS_URL", srv.url, 1);
  th_int(&srv, "DEL %s", name);
}

/* Property: whatever words follow `run NAME [--] printf FORMAT`, dlock's
 * options, empty strings, spaces and bytes that are not UTF-8 among them,
 * the command gets them exactly (printf writes each NUL-terminated). */
static void test_run_argv_exact(void) {
  static const char *const pool[] = {
      "--redis", "redis://127.0.0.1:1", "--tls-ca", "--password-file",
      "/etc/passwd", "--wait", "0", "--", "-h", "--help", "--fair",
      "--version", "", " ", "a b", "\xff\xfe\x80", "\xc3\xa9", "-", "--x=1",
      "run", "latch", "%s", "\\0", "*", "$HOME", "'\"", "\t\n"};
  const size_t npool = sizeof pool / sizeof pool[0];
  unsigned seed = (unsigned)th_now_us();
  srand(seed);
  char name[200];
  snprintf(name, sizeof name, "%s", th_name("argv"));
  int bad = 0;
  for (int round = 0; round < 40 && !bad; round++) {
    char *argv[64] = {(char *)dlock_bin, "run", name};
    int n = 3;
    if (rand() % 2)
      argv[n++] = "--";
    argv[n++] = "printf";
    argv[n++] = "%s\\0";
    char words[24][12];
    char want[1024];
    size_t wlen = 0;
    int k = 1 + rand() % 20;
    for (int j = 0; j < k; j++) {
      const char *w;
      if (rand() % 4 == 0) { /* random bytes, none NUL */
        int len = rand() % 8;
        for (int b = 0; b < len; b++)
          words[j][b] = (char)(1 + rand() % 255);
        words[j][len] = '\0';
        w = words[j];
      } else {
        w = pool[rand() % npool];
      }
      argv[n++] = (char *)w;
      memcpy(want + wlen, w, strlen(w) + 1); /* the word and its NUL */
      wlen += strlen(w) + 1;
    }
    argv[n] = NULL;
    char got[2048];
    size_t glen = 0;
    int rc = capture(argv, 0, got, sizeof got, &glen);
    if (rc != 0 || glen != wlen || memcmp(got, want, wlen) != 0) {
      fprintf(stderr, "\n  seed %u round %d: exit %d, %zu bytes, want %zu\n",
              seed, round, rc, glen, wlen);
      bad = 1;
    }
  }
  CU_ASSERT(!bad);
}

/* A --tls-* or --sentinel-* flag for a URL it does not apply to: refused
 * (64) with the flag and the URL named, never run without it. */
static void test_flags_need_their_url(void) {
  char out[2048], plain[64], tls[64];
  int port = rs_free_port();
  snprintf(plain, sizeof plain, "redis://127.0.0.1:%d", port);
  snprintf(tls, sizeof tls, "rediss://127.0.0.1:%d", port);
  char *ca[] = {"--redis", plain, "--tls-ca", "/nonexistent/ca.crt", "run", "x",
                "--", "true", NULL};
  CU_ASSERT_EQUAL(run_output(ca, out, sizeof out), 64);
  CU_ASSERT(strstr(out, "--tls-ca") && strstr(out, plain));
  char *insecure[] = {"run", "--tls-insecure", "x", "--", "true", NULL};
  setenv("DLOCK_REDIS_URL", plain, 1);
  CU_ASSERT_EQUAL(run_output(insecure, out, sizeof out), 64);
  CU_ASSERT(strstr(out, "--tls-insecure") && strstr(out, "DLOCK_REDIS_URL"));
  setenv("DLOCK_REDIS_URL", srv.url, 1);
  char *mixed[] = {"--redis", tls, "--redis", plain, "--redis", tls,
                   "--tls-server-name", "h", "run", "x", "--", "true", NULL};
  CU_ASSERT_EQUAL(run_output(mixed, out, sizeof out), 64);
  CU_ASSERT(strstr(out, "--tls-server-name") && strstr(out, plain));
  char *sentinel[] = {"--redis", plain, "--sentinel-user", "u", "latch", "get",
                      "x", NULL};
  CU_ASSERT_EQUAL(run_output(sentinel, out, sizeof out), 64);
  CU_ASSERT(strstr(out, "--sentinel-user") && strstr(out, plain));
}

/* Redisson's Valkey spellings of the suite's URL (valkey://,
 * valkey+cluster://, valkeys:// in the TLS variant) reach the same server;
 * a --tls-* flag goes with valkeys:// as with rediss://. */
static void test_valkey_urls(void) {
  char url[1024], out[1024];
  CU_ASSERT_FATAL(strncmp(srv.url, "redis", 5) == 0);
  snprintf(url, sizeof url, "valkey%s", srv.url + 5);
  char *get[] = {"--redis", url, "latch", "get", (char *)th_name("valkey"), NULL};
  CU_ASSERT_EQUAL(run_output(get, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "0\n");
  char *flag[] = {"--redis", url, "--tls-server-name", "localhost", "latch",
                  "get", (char *)th_name("valkey"), NULL};
  CU_ASSERT_EQUAL(run_output(flag, out, sizeof out), th_tls_mode() ? 0 : 64);
}

/* The sentinels' password reaches them from --sentinel-password-file and
 * DLOCK_SENTINEL_PASSWORD, over TLS (rediss+sentinel://, in the TLS
 * variant) as in plaintext. */
static void test_sentinel_password(void) {
  th_server k;
  CU_ASSERT_FATAL(th_sentinel_start(&k, 0, 1) == 0);
  th_server *sentinel = &k.node[k.nnodes - 1];
  redisReply *r = th_cmd(sentinel, "ACL SETUSER default on >sent-pw");
  CU_ASSERT(r && r->type == REDIS_REPLY_STATUS);
  if (r)
    freeReplyObject(r);
  char out[4096], pwfile[128];
  char *get[] = {"--redis", k.url, "latch", "get", "sentinel-pw", NULL};
  CU_ASSERT_EQUAL(run_output(get, out, sizeof out), 78); /* no password */
  setenv("DLOCK_SENTINEL_PASSWORD", "sent-pw", 1);
  CU_ASSERT_EQUAL(run_output(get, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "0\n");
  unsetenv("DLOCK_SENTINEL_PASSWORD");
  snprintf(pwfile, sizeof pwfile, "%s/sentinel-pw", tmpdir);
  secret_file(pwfile, "sent-pw\n");
  char *file[] = {"--redis", k.url, "--sentinel-password-file", pwfile, "latch",
                  "get", "sentinel-pw", NULL};
  CU_ASSERT_EQUAL(run_output(file, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "0\n");
  th_server_stop(&k);
}

/* COMMAND's environment never holds the passwords dlock was given. */
static void test_passwords_not_passed_on(void) {
  th_server a;
  CU_ASSERT_FATAL(th_server_start(&a, "--requirepass env-s3cret") == 0);
  char out[16384], url[64];
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", a.port);
  setenv("DLOCK_REDIS_PASSWORD", "env-s3cret", 1);
  setenv("DLOCK_SENTINEL_PASSWORD", "sentinel-s3cret", 1);
  char *env[] = {"--redis", url, "run", (char *)th_name("env"), "--", "env", NULL};
  CU_ASSERT_EQUAL(run_output(env, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "DLOCK_SENTINEL_PASSWORD") == NULL);
  CU_ASSERT(strstr(out, "DLOCK_REDIS_PASSWORD") == NULL);
  ASSERT_NO_SECRET(out, "env-s3cret");
  ASSERT_NO_SECRET(out, "sentinel-s3cret");
  CU_ASSERT(strstr(out, "DLOCK_REDIS_URL") != NULL); /* the rest stays */
  unsetenv("DLOCK_REDIS_PASSWORD");
  unsetenv("DLOCK_SENTINEL_PASSWORD");
  th_server_stop(&a);
}

/* sem set: a plain semaphore's count, or the total of `run --semaphore`'s. */
static void test_sem_set(void) {
  char out[256], name[200], held[200];
  snprintf(name, sizeof name, "%s", th_name("sem-set"));
  char *set[] = {"sem", "set", name, "3", NULL};
  CU_ASSERT_EQUAL(run_output(set, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "3\n");
  char *avail[] = {"sem", "available", name, NULL};
  CU_ASSERT_EQUAL(run_output(avail, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "3\n");
  /* run --semaphore: one permit taken while the total goes from 2 to 1 */
  snprintf(held, sizeof held, "%s", th_name("sem-set-run"));
  char *set1[] = {"sem", "set", held, "1", NULL};
  char script[512];
  snprintf(script, sizeof script, "%s sem set %s 1", dlock_bin, held);
  char *run[] = {"run", "--semaphore", "--permits", "2", held, "--", "sh", "-c",
                 script, NULL};
  CU_ASSERT_EQUAL(run_output(run, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "0\n"); /* total 1, the run's permit taken */
  CU_ASSERT_EQUAL(run_output(set1, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "1\n"); /* the run gave its permit back */
  char *bad[] = {"sem", "set", name, NULL};
  CU_ASSERT_EQUAL(run_output(bad, out, sizeof out), 64);
}

/* pid is running (a zombie nobody reaped yet counts as gone). */
static int alive(pid_t pid) {
  char path[64], stat[256] = "";
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(stat, 1, sizeof stat - 1, f);
  fclose(f);
  stat[n] = '\0';
  const char *end = strrchr(stat, ')'); /* "pid (comm) S ..." */
  return end && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
}

/* The pid a command wrote to path (the event: it runs), 0 after 10 s. */
static long pid_from(const char *path) {
  long pid = 0;
  for (int64_t end = th_now_ms() + 10000; pid == 0 && th_now_ms() < end;) {
    FILE *f = fopen(path, "r");
    if (f && fscanf(f, "%ld", &pid) != 1)
      pid = 0;
    if (f)
      fclose(f);
    if (pid == 0)
      usleep(5000);
  }
  return pid;
}

/* Is pid gone within ms? */
static int gone_within(long pid, int ms) {
  int64_t t0 = th_now_ms();
  while (alive((pid_t)pid) && th_now_ms() - t0 < ms)
    usleep(2000);
  return !alive((pid_t)pid);
}

/* kill -9 of `dlock run`, or its lost lease: nothing its command started
 * runs on without the lock, the shell's background step (a grandchild) as
 * well as the shell, and the kill's before the lease could pass on. */
static void test_run_killed_takes_command_along(void) {
  char name[200], pidfile[128], script[512];
  snprintf(name, sizeof name, "%s", th_name("orphan"));
  snprintf(pidfile, sizeof pidfile, "%s/orphan.pid", tmpdir);
  unlink(pidfile);
  /* step1 runs in the background of the command's shell */
  snprintf(script, sizeof script,
           "sleep 30 & echo $! > %s.tmp && mv %s.tmp %s; wait; sleep 30",
           pidfile, pidfile, pidfile);
  char *args[] = {"run", name, "--", "sh", "-c", script, NULL};
  pid_t dlock_pid = start(args, NULL);
  long step = pid_from(pidfile);
  CU_ASSERT_FATAL(step > 0);
  CU_ASSERT(alive((pid_t)step));
  kill(dlock_pid, SIGKILL);
  waitpid(dlock_pid, NULL, 0);
  CU_ASSERT(gone_within(step, 2000));
  /* ... while the lock (10 s watchdog lease) was still held: no one else
   * could have entered yet */
  CU_ASSERT_EQUAL(th_int(&srv, "EXISTS %s", name), 1);
  if (alive((pid_t)step))
    kill((pid_t)step, SIGKILL);
  th_int(&srv, "DEL %s", name);

  /* a lost lease (a fixed 300 ms one) signals the whole group too */
  unlink(pidfile);
  char *lease[] = {"run", "--lease", "300ms", name, "--", "sh", "-c", script,
                   NULL};
  pid_t lease_pid = start(lease, NULL);
  step = pid_from(pidfile);
  CU_ASSERT_FATAL(step > 0);
  CU_ASSERT_EQUAL(th_wait_worker(lease_pid, 10000), 76);
  CU_ASSERT(gone_within(step, 2000));
  if (alive((pid_t)step))
    kill((pid_t)step, SIGKILL);
}

/* A waiting `run --fair` stopped by TERM or INT gives up its place in the
 * queue at once (as a --wait timeout does) and ends as the signal would
 * have ended it; the next waiter is not held up behind a dead entry. */
static void test_fair_waiter_leaves_on_signal(void) {
  const char *name = th_name("fair-signal");
  dlock_client *c = th_client(&srv, NULL);
  dlock_lock *l;
  TH_ASSERT_RC(dlock_fair_lock_new(c, name, NULL, &l), DLOCK_OK);
  TH_ASSERT_RC(dlock_acquire(l, 0, 30000), DLOCK_OK);
  const int sigs[] = {SIGTERM, SIGINT};
  for (int k = 0; k < 2; k++) {
    char *args[] = {"run", "--fair", (char *)name, "--", "true", NULL};
    pid_t waiter = start(args, NULL);
    CU_ASSERT_EQUAL(queue_len(name, 1), 1); /* the event: it is queued */
    kill(waiter, sigs[k]);
    CU_ASSERT_EQUAL(th_wait_worker(waiter, 10000), 128 + sigs[k]);
    CU_ASSERT_EQUAL(th_int(&srv, "LLEN redisson_lock_queue:{%s}", name), 0);
    CU_ASSERT_EQUAL(th_int(&srv, "ZCARD redisson_lock_timeout:{%s}", name), 0);
  }
  /* the next waiter gets the lock at the release, not seconds after */
  char *next[] = {"run", "--fair", (char *)name, "--", "true", NULL};
  pid_t waiter = start(next, NULL);
  CU_ASSERT_EQUAL(queue_len(name, 1), 1);
  int64_t t0 = th_now_ms();
  TH_ASSERT_RC(dlock_release(l), DLOCK_OK);
  CU_ASSERT_EQUAL(th_wait_worker(waiter, 10000), 0);
  int64_t took = th_now_ms() - t0;
  /* 1 s: measured 20-40 ms, with two CPU hogs up to 90 ms (headroom 10x) */
  CU_ASSERT(took < 1000);
  dlock_lock_free(l);
  dlock_client_close(c);
}

/* run NAME COMMAND without `--` (flock's form); a --permits that differs
 * from the semaphore's total is reported, not silently ignored. */
static void test_run_forms(void) {
  char out[1024], name[200];
  snprintf(name, sizeof name, "%s", th_name("forms"));
  char *bare[] = {"run", name, "echo", "--wait", "x", NULL};
  CU_ASSERT_EQUAL(run_output(bare, out, sizeof out), 0);
  CU_ASSERT_STRING_EQUAL(out, "--wait x\n");
  char *three[] = {"run", "--semaphore", "--permits", "3", name, "--", "true", NULL};
  char *two[] = {"run", "--semaphore", "--permits", "2", name, "--", "true", NULL};
  snprintf(name, sizeof name, "%s", th_name("forms-sem"));
  CU_ASSERT_EQUAL(run_output(three, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "permits") == NULL); /* set now: nothing to say */
  CU_ASSERT_EQUAL(run_output(three, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "permits") == NULL);
  CU_ASSERT_EQUAL(run_output(two, out, sizeof out), 0);
  /* which number is which: the total, the available and held ones */
  CU_ASSERT(strstr(out, "has a total of 3 permits (3 available now, 0 held), "
                        "not the 2 of --permits") != NULL);
}

/* A file of the source tree (docs/../path) into a malloc'd string. */
static char *source_file(const char *path) {
  char full[512];
  snprintf(full, sizeof full, "%s/../%s", getenv("DLOCK_DOCS"), path);
  FILE *f = fopen(full, "r");
  if (f == NULL)
    return NULL;
  static char chunk[1 << 16];
  size_t n = fread(chunk, 1, sizeof chunk - 1, f);
  fclose(f);
  chunk[n] = '\0';
  return strdup(chunk);
}

/* The docs say what the code does: the options version the header
 * defines, the code WRONGTYPE gives, run's exit statuses, the man page's
 * environment, --replica-sync beyond a cluster; and a program builds
 * against the tree as the README says, and runs. */
static void test_docs_agree_with_code(void) {
  char *client_h = source_file("include/dlock/client.h");
  char *client_md = source_file("docs/client.md");
  char *lock_h = source_file("include/dlock/lock.h");
  char *man = source_file("docs/dlock.1");
  char *readme = source_file("README.md");
  CU_ASSERT_FATAL(client_h && client_md && lock_h && man && readme);
  const char *def = strstr(client_h, "#define DLOCK_CLIENT_OPTS_VERSION ");
  CU_ASSERT_FATAL(def != NULL);
  char said[64];
  snprintf(said, sizeof said, "`DLOCK_CLIENT_OPTS_VERSION` (%d)", atoi(def + 34));
  CU_ASSERT(strstr(client_md, said) != NULL);
  CU_ASSERT(strstr(lock_h, "DLOCK_EKIND (the name") != NULL);
  /* every Markdown table whole (a blank line between two rows splits it,
   * as errors.md's was before DLOCK_EREENTRY), and errors.md has a row for
   * every code of error.h */
  char tables[1024], split[2048];
  snprintf(tables, sizeof tables, "awk 'FNR == 1 { p2 = \"\"; p1 = \"\" } "
           "/^\\|/ && p1 == \"\" && p2 ~ /^\\|/ { print FILENAME \": \" FNR } "
           "{ p2 = p1; p1 = $0 }' '%s'/*.md", getenv("DLOCK_DOCS"));
  CU_ASSERT_EQUAL(th_shell(tables, split, sizeof split), 0);
  CU_ASSERT_STRING_EQUAL(split, "");
  char *error_h = source_file("include/dlock/error.h");
  char *errors_md = source_file("docs/errors.md");
  CU_ASSERT_FATAL(error_h && errors_md);
  for (const char *x = strstr(error_h, "  X("); x; x = strstr(x + 1, "  X(")) {
    char row[64];
    snprintf(row, sizeof row, "\n| `DLOCK_%.*s` |", (int)strcspn(x + 4, ","), x + 4);
    CU_ASSERT_PTR_NOT_NULL(strstr(errors_md, row));
    if (strstr(errors_md, row) == NULL)
      fprintf(stderr, "\n  errors.md has no row %s", row + 1);
  }
  free(error_h);
  free(errors_md);
  CU_ASSERT(strstr(lock_h, "DLOCK_EREDIS (server\n * error, e.g. WRONGTYPE") == NULL);
  const char *env = strstr(man, ".SH ENVIRONMENT");
  CU_ASSERT(env && strstr(env, "DLOCK_SENTINEL_PASSWORD") != NULL);
  char out[8192];
  char *help[] = {"run", "--help", NULL};
  CU_ASSERT_EQUAL(run_output(help, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "65 NAME holds") && strstr(out, "77 refused") &&
            strstr(out, "78 the server"));
  CU_ASSERT(strstr(out, "on a cluster or with Sentinel") != NULL);
  /* the main help's exit paragraph: whole lines, no word left alone at a
   * line's end ("78 a" then a break) */
  char *main_help[] = {"--help", NULL};
  CU_ASSERT_EQUAL(run_output(main_help, out, sizeof out), 0);
  CU_ASSERT(strstr(out, "78 a configuration to fix") != NULL);
  CU_ASSERT(strstr(out, "69 Redis unreachable or refusing") != NULL);
  for (char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    CU_ASSERT(len < 2 || line[len - 2] != ' ' || line[len - 1] != 'a');
  }
  /* the README's build against the tree (the plain build: a sanitizer's
   * library wants its runtime linked too) */
  CU_ASSERT(strstr(readme, "PKG_CONFIG_PATH=build/meson-uninstalled") != NULL);
  char build[512];
  snprintf(build, sizeof build, "%s", dlock_bin);
  *strrchr(build, '/') = '\0'; /* .../build/tools */
  *strrchr(build, '/') = '\0'; /* .../build */
  if (!th_cluster_mode() && !th_tls_mode() && !strcmp(strrchr(build, '/'), "/build")) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s/..' && cc examples/counter.c -o '%s/counter' "
             "$(PKG_CONFIG_PATH=build/meson-uninstalled pkg-config --cflags "
             "--libs dlock) && LD_LIBRARY_PATH=build/src '%s/counter' 2 20 "
             ">/dev/null", getenv("DLOCK_DOCS"), tmpdir, tmpdir);
    CU_ASSERT_EQUAL(system(cmd), 0);
  }
  free(client_h);
  free(client_md);
  free(lock_h);
  free(man);
  free(readme);
}

/* Where line `what` first shows in out (-1: nowhere). */
static long pos_of(const char *out, const char *what) {
  const char *p = strstr(out, what);
  return p ? p - out : -1;
}

/* The demo (the README's first command) prints things in the order they
 * happened: the latch's waiters are released after the count-down to 0 is
 * announced, never before. (One server is enough: the plain variant.) */
static void test_demo_tells_the_order(void) {
  const char *demo = getenv("DLOCK_DEMO");
  CU_ASSERT_FATAL(demo != NULL);
  if (th_cluster_mode() || th_tls_mode())
    return; /* the same script: the plain variant runs it */
  static char out[65536];
  char *argv[] = {(char *)demo, NULL};
  CU_ASSERT_EQUAL(capture(argv, 1, out, sizeof out, NULL), 0);
  long one_left = pos_of(out, "1 left: the waiters still wait");
  long to_zero = pos_of(out, "count-down (1 -> 0)");
  CU_ASSERT(one_left >= 0 && to_zero > one_left);
  for (int i = 1; i <= 3; i++) {
    char line[64];
    snprintf(line, sizeof line, "waiter %d released", i);
    CU_ASSERT(pos_of(out, line) > to_zero);
  }
}

/* `dlock elect`: the leader runs its command with its term, a standby
 * waits and takes over when it ends, writes guarded by the term, `dlock
 * leader` (and --watch) tells it; a lost leadership exits 76. */
static void test_elect_and_leader(void) {
  const char *name = th_name("elect");
  char line[4096], out[4096];
  /* the shell's waits are on files (events), each bounded to 10 s */
#define UNTIL(f) "i=0; while [ ! -e $T/" f " ] && [ $i -lt 1000 ]; do " \
                 "sleep 0.01; i=$((i+1)); done; "
  snprintf(line, sizeof line,
           "D='%s'; N='%s'; T='%s'; "
           "$D leader --watch --changes 3 --for 10s $N > $T/watch & "
           "i=0; while [ ! -s $T/watch ] && [ $i -lt 1000 ]; do sleep 0.01; "
           "i=$((i+1)); done; "
           "$D elect --value A $N -- sh -c 'echo $DLOCK_LEADER_TERM > "
           "$0/a; i=0; while [ ! -e $0/go ] && [ $i -lt 1000 ]; do sleep "
           "0.01; i=$((i+1)); done' $T & "
           UNTIL("a")
           "$D leader $N; "
           "$D elect --value B --wait 10s $N -- sh -c 'echo B=$DLOCK_LEADER_TERM; "
           "\"$0\" write --token 99 $1 SET \"{$1}:k\" forged 2>/dev/null; "
           "echo forged=$?; "
           "\"$0\" write $1 SET \"{$1}:k\" v && echo wrote' $D $N & "
           "touch $T/go; wait; cat $T/watch; $D leader --json $N",
           dlock_bin, name, tmpdir);
#undef UNTIL
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 0);
  char want[512];
  snprintf(want, sizeof want, "leader 1 A (owner ");
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  /* a term above the current one was never granted (64); the leader's
   * own writes go on */
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "B=2\nforged=64\nOK\nwrote\n"));
  const char *w = strstr(out, "none (last term 0)\nelected leader 1 A");
  CU_ASSERT_PTR_NOT_NULL(w);
  if (w) {
    CU_ASSERT_PTR_NOT_NULL(strstr(w, "\nvacant (term 1 ended)\nelected "
                                     "leader 2 B"));
  }
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"leading\":false,\"term\":2"));
  if (!strstr(out, "B=2\nforged=64\nOK\nwrote\n") || !w)
    fprintf(stderr, "\n%s\n", out);
  /* the leadership lost while the command runs: 76 */
  snprintf(line, sizeof line, "'%s' elect --lease 300ms '%s-lost' -- sleep 5 "
           "2>&1", dlock_bin, name);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 76);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "leadership of"));
  CU_ASSERT_EQUAL(th_dlock_output("elect --spin x true 2>/dev/null", out,
                                  sizeof out), 64);
  CU_ASSERT_EQUAL(th_dlock_output("leader --for 1s x 2>/dev/null", out,
                                  sizeof out), 64);
}

/* `dlock leader`'s line: no double space for an empty value, `since` as
 * UTC to the millisecond (the number stays in --json); a name that holds
 * no election is the wrong kind (65), a latch's and a semaphore's readers
 * likewise. */
static void test_leader_output(void) {
  char name[200], str[200], line[2048], out[4096];
  snprintf(name, sizeof name, "%s", th_name("leader-out"));
  snprintf(str, sizeof str, "%s", th_name("leader-str"));
  snprintf(line, sizeof line, "'%s' elect %s -- '%s' leader %s", dlock_bin,
           name, dlock_bin, name);
  CU_ASSERT_EQUAL(th_shell(line, out, sizeof out), 0);
  int y, mo, d, h, mi, s, ms, n = 0;
  char tail[64] = "";
  const char *at = strstr(out, "since ");
  CU_ASSERT(strncmp(out, "leader 1 (owner ", 16) == 0);
  CU_ASSERT(at && sscanf(at, "since %4d-%2d-%2dT%2d:%2d:%2d.%3dZ, version 0)%n",
                         &y, &mo, &d, &h, &mi, &s, &ms, &n) == 7 && n > 0);
  CU_ASSERT(y >= 2025 && mo >= 1 && mo <= 12);
  if (strncmp(out, "leader 1 (owner ", 16) != 0 || n == 0)
    fprintf(stderr, "\n  dlock leader: %s", out);
  (void)tail;
  freeReplyObject(th_cmd(&srv, "SET %s hello", str));
  struct {
    const char *cmd;
  } readers[] = {{"leader"}, {"latch get"}, {"sem available"}};
  for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++) {
    snprintf(line, sizeof line, "'%s' %s %s 2>&1", dlock_bin, readers[i].cmd, str);
    int rc = th_shell(line, out, sizeof out);
    CU_ASSERT_EQUAL(rc, 65);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "holds a string"));
    if (rc != 65 || !strstr(out, "holds a string"))
      fprintf(stderr, "\n  dlock %s over a string: %d %s", readers[i].cmd, rc, out);
  }
}

/* A wall clock that jumps (an NTP step: libfaketime on dlock's process
 * only, its monotonic clock left alone) moves nothing of dlock's: `run`'s
 * fixed lease is measured on the monotonic clock, so a jump an hour
 * forward does not end it early (exit 0), and a jump an hour back does not
 * keep the command running past it (exit 76 at the lease's end).
 * FAKETIME_FORCE_MONOTONIC_FIX=0: without it libfaketime 0.9.10 ends
 * every timed wait on a monotonic condition variable at once. */
static void test_wall_clock_jump(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* a sanitized dlock must load its sanitizer first: libfaketime cannot be
   * preloaded before it (the plain build runs this) */
  return;
#endif
  if (th_cluster_mode() || th_tls_mode())
    return; /* the tool's clock, not the topology's: the plain run's */
  const char *lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
  if (access(lib, R_OK) != 0)
    CU_FAIL_FATAL("libfaketime is not installed (scripts/setup installs it)");
  static const struct {
    const char *jump, *lease, *sleep;
    int want;
  } cases[] = {{"+3600", "5s", "2", 0}, {"-3600", "1s", "4", 76}};
  for (int i = 0; i < 2; i++) {
    char line[2048], out[2048];
    snprintf(line, sizeof line,
             "F='%s/clock%d'; echo +0 > $F; (sleep 0.3; echo '%s' > $F) & "
             "LD_PRELOAD='%s' FAKETIME_TIMESTAMP_FILE=$F FAKETIME_NO_CACHE=1 "
             "DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0 '%s' run --lease %s '%s' -- sleep %s "
             "2>&1; st=$?; wait; exit $st",
             tmpdir, i, cases[i].jump, lib, dlock_bin, cases[i].lease,
             th_name("wall-clock"), cases[i].sleep);
    int64_t t0 = th_now_ms();
    int st = th_shell(line, out, sizeof out);
    int64_t took = th_now_ms() - t0;
    if (st != cases[i].want)
      fprintf(stderr, "\n  jump %s: exit %d after %lld ms: %s\n",
              cases[i].jump, st, (long long)took, out);
    CU_ASSERT_EQUAL(st, cases[i].want);
  }
}

/* The bash completion (tools/dlock/dlock.bash-completion) offers every
 * command `dlock --help` lists, every option each command's --help names,
 * and the kinds after `run`; after `--` it completes commands. */
static void test_bash_completion(void) {
  static const char script[] =
      "D=$1; . \"$2/../tools/dlock/dlock.bash-completion\"\n"
      "comp() { COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); COMPREPLY=()\n"
      "  _dlock; printf '%s\\n' \"${COMPREPLY[@]}\"; }\n"
      "bad=0\n"
      /* the commands: the help's lines "  word ..." */
      "for c in $($D --help 2>&1 | sed -n '/^usage/,/^--redis/s/^  \\([a-z][a-z]*\\) .*/\\1/p' | sort -u); do\n"
      "  comp dlock '' | grep -qx \"$c\" || { echo \"no command $c\"; bad=1; }\n"
      /* each command's options: every --flag of its usage lines (run's
       * and elect's "[options]": every --flag of their help) */
      "  sub=; case $c in latch) sub=wait;; sem) sub=acquire;; esac\n"
      "  help=$($D $c --help 2>&1)\n"
      "  case $c in run|elect) ;; *) help=$(echo \"$help\" | awk 'NR==1 || /^ /{print; next} {exit}');; esac\n"
      "  for o in $(echo \"$help\" | grep -o -- '--[a-z][a-z-]*' | sort -u); do\n"
      "    comp dlock $c $sub '-' | grep -qx -- \"$o\" ||\n"
      "      { echo \"$c: no option $o\"; bad=1; }\n"
      "  done\n"
      "done\n"
      "for k in --fair --fenced --spin --read --write --semaphore; do\n"
      "  comp dlock run '-' | grep -qx -- $k || { echo \"run: no kind $k\"; bad=1; }\n"
      "done\n"
      "comp dlock run x -- sh | grep -qx sh || { echo 'after --: no command'; bad=1; }\n"
      "exit $bad\n";
  char path[512], line[2048], out[8192];
  snprintf(path, sizeof path, "%s/completion.sh", tmpdir);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(script, f);
  fclose(f);
  snprintf(line, sizeof line, "bash '%s' '%s' '%s' 2>&1", path, dlock_bin,
           getenv("DLOCK_DOCS"));
  int rc = th_shell(line, out, sizeof out);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc != 0)
    fprintf(stderr, "\n%s", out);
}

static void add_tests(void) {
  CU_pSuite s = CU_add_suite("cli", suite_init, suite_clean);
  CU_add_test(s, "run_exact_count", test_run_exact_count);
  CU_add_test(s, "run_exit_statuses", test_run_exit_statuses);
  CU_add_test(s, "semaphore_bound", test_semaphore_bound);
  CU_add_test(s, "latch_in_background_shells", test_latch_in_background_shells);
  CU_add_test(s, "status_and_force_unlock", test_status_and_force_unlock);
  CU_add_test(s, "list", test_list);
  CU_add_test(s, "watch", test_watch);
  CU_add_test(s, "elect_and_leader", test_elect_and_leader);
  CU_add_test(s, "wall_clock_jump", test_wall_clock_jump);
  CU_add_test(s, "inspect_every_kind", test_inspect_every_kind);
  CU_add_test(s, "kind_mixup", test_kind_mixup);
  CU_add_test(s, "check_acl", test_check_acl);
  CU_add_test(s, "check_acl_wait", test_check_acl_wait);
  CU_add_test(s, "check_acl_spin", test_check_acl_spin);
  CU_add_test(s, "credentials", test_credentials);
  CU_add_test(s, "options_before_name", test_options_before_name);
  CU_add_test(s, "run_argv_exact", test_run_argv_exact);
  CU_add_test(s, "flags_need_their_url", test_flags_need_their_url);
  CU_add_test(s, "valkey_urls", test_valkey_urls);
  CU_add_test(s, "sentinel_password", test_sentinel_password);
  CU_add_test(s, "passwords_not_passed_on", test_passwords_not_passed_on);
  CU_add_test(s, "sem_set", test_sem_set);
  CU_add_test(s, "run_forms", test_run_forms);
  CU_add_test(s, "run_killed_takes_command_along", test_run_killed_takes_command_along);
  CU_add_test(s, "fair_waiter_leaves_on_signal", test_fair_waiter_leaves_on_signal);
  CU_add_test(s, "bad_input", test_bad_input);
  CU_add_test(s, "messages_say_it_once", test_messages_say_it_once);
  CU_add_test(s, "demo_tells_the_order", test_demo_tells_the_order);
  CU_add_test(s, "docs_agree_with_code", test_docs_agree_with_code);
  CU_add_test(s, "bash_completion", test_bash_completion);
  CU_add_test(s, "leader_output", test_leader_output);
}

int main(int argc, char **argv) { return th_main(argc, argv, add_tests, NULL); }
