/* A running Java Redisson client the interop tests drive
 * (tests/interop/java/src/main/java/dlock/peer/Peer.java says the line
 * protocol): one long-lived JVM per Redisson version and server, built by
 * scripts/setup into tests/interop/java/target/VERSION. */
#ifndef DLOCK_TEST_JAVA_PEER_H
#define DLOCK_TEST_JAVA_PEER_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#define JP_MAX_PENDING 64

typedef struct jpeer {
  pid_t pid;
  int in, out;             /* its stdin (we write), its stdout (we read) */
  char version[32];        /* Redisson's, as the peer printed it */
  char buf[16384];
  size_t len;
  int next_id;
  /* Threads may wait at once: one reads the pipe at a time (reading), and
   * what it reads for another id goes to early, with a broadcast. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int reading;
  int eof; /* its stdout ended: it is gone */
  /* answers read while waiting for another */
  struct {
    int id;
    char text[512];
  } early[JP_MAX_PENDING];
  int nearly;
} jpeer;

/* The Redisson versions the suite meets (newest 3.x and 4.x). */
extern const char *const jp_versions[2];

/* Start the peer of version on url (redis://h:p or redis+cluster://h:p,..)
 * with Redisson's lockWatchdogTimeout watchdog_ms (0: its default); 0 once
 * it said ready (within 60 s), -1 (said why on stderr). */
int jp_start(jpeer *p, const char *version, const char *url, int64_t watchdog_ms);
/* The same with the client's codec (Peer.java: default, string, bytes,
 * long). */
int jp_start_codec(jpeer *p, const char *version, const char *url,
                   int64_t watchdog_ms, const char *codec);
/* The same with Redisson's fairLockWaitTimeout (the fair lock's thread
 * wait time) fair_ms. */
int jp_start_fair(jpeer *p, const char *version, const char *url,
                  int64_t fair_ms);
/* The same with Peer.java's times argument as given ("WATCHDOG_MS" or
 * "WATCHDOG_MS,FAIR_MS"). */
int jp_start_times(jpeer *p, const char *version, const char *url,
                   const char *times);
/* The same with two more standalone servers (a RedLock's members). */
int jp_start_redlock(jpeer *p, const char *version, const char *url,
                     const char *url2, const char *url3);
/* Send "ID SLOT REQUEST" and return ID (-1 on a broken pipe). Any thread:
 * a request is one write of less than PIPE_BUF. */
int jp_send(jpeer *p, const char *slot, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The answer to id within ms, into out (its text after the id); 0, or -1
 * when none came. Threads may wait for their own ids at once. */
int jp_wait(jpeer *p, int id, int ms, char *out, size_t size);
/* jp_send then jp_wait (10 s): the answer, in a static buffer per call
 * site's thread ("" when none came). */
const char *jp_call(jpeer *p, const char *slot, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The JVM gets SIGKILL when the thread that started it ends (its parent's
 * death: PR_SET_PDEATHSIG), so a killed test or torture worker takes its
 * Java client with it. */
/* Kill the JVM with SIGKILL (a dead Java client: its locks stay until their
 * leases end) and reap it. */
void jp_kill(jpeer *p);
/* Ask it to exit, then reap it (killed after 10 s). */
void jp_stop(jpeer *p);

#endif
