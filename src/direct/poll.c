/* When a direct call polls for its reply (docs/threading.md, "The reply
 * poll"). Polling (reading the socket without sleeping until the reply is
 * in) saves the caller a sleep and a wake-up, which on some machines cost
 * more CPU than the poll and on others less; both change with the load.
 * So the client measures: a sixteenth of its calls (those made while no
 * other call of the client is under way, the only ones that may poll)
 * read their thread's CPU time around the round trip, and 16 calls in
 * every 4,096 go the other way, to keep that way's figure fresh. Polling
 * stays on while a polled call costs at most POLL_MARGIN_PCT % more CPU
 * than a sleeping one, by the means of each way's last 16 measures (the
 * latency it buys then comes at a cost the program hardly sees); two
 * rounds in a row must agree to change it. And it does not poll at all
 * while other tasks want every core (/proc/loadavg's runnable count, read
 * every 1,024 calls and at a new client's calls 0, 64 and 128, three reads
 * in a row): a poll then takes the core the server needs.
 * dlock_client_opts.spin_us: -1 this, 0 never, N always (up to N us). */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "direct/direct.h"

#define SPIN_MAX_US 200     /* the longest adaptive poll for a reply */
#define SPIN_FIRST_US 50    /* before any round trip was measured */
#define POLL_ROUND 4096     /* calls per round: the other way tried once */
#define POLL_TRIES 16       /* calls of a round made the other way */
#define POLL_TRY_AT 32      /* where in the round they are */
#define POLL_SAMPLE 16      /* one call in this many measured */
#define POLL_LOOK 1024      /* calls between looks at the cores' load */
#define POLL_FIRST_LOOK 64  /* a new client looks every 64 calls through
                               its first 1,024: beside busy cores it stops
                               at call 128 (three looks in a row), or a
                               look or two later when one read missed, not
                               at 2,049 */
#define POLL_MARGIN_PCT 5   /* polling's CPU may pass sleeping's by this
                               (a call's CPU is to stay within 1.1x raw
                               hiredis's: docs/performance.md, "The poll's
                               margin") */

static int online_cpus(void) {
  static atomic_int n; /* 0 until asked once */
  int v = atomic_load_explicit(&n, memory_order_relaxed);
  if (v == 0) {
    long k = sysconf(_SC_NPROCESSORS_ONLN);
    v = k > 0 ? (int)k : 1;
    atomic_store_explicit(&n, v, memory_order_relaxed);
  }
  return v;
}

/* Tasks other than the caller that want a CPU now, as /proc/loadavg's
 * runnable count says (the fewest of three reads: the server may be
 * running an instant), or -1 when it cannot be read. */
static int others_running(void) {
  int least = -1;
  for (int i = 0; i < 3; i++) {
    char buf[128];
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
      return -1;
    buf[n] = '\0';
    int running;
    if (sscanf(buf, "%*s %*s %*s %d/", &running) != 1)
      return -1;
    if (least < 0 || running - 1 < least)
      least = running - 1 < 0 ? 0 : running - 1;
  }
  return least;
}

static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void dlock__poll_init(dlock__poll *p) {
  memset(p, 0, sizeof *p);
  atomic_init(&p->rtt_us, 0);
  atomic_init(&p->calls, 0);
  atomic_init(&p->busy, 0);
  atomic_init(&p->taken_seen, 0);
  atomic_init(&p->on, 1); /* until measured: a loopback reply often comes
                             sooner than a sleeping thread is woken */
  pthread_mutex_init(&p->mu, NULL);
}

void dlock__poll_free(dlock__poll *p) { pthread_mutex_destroy(&p->mu); }

/* The mean of way's last measures (p->mu held), 0 when it has none. A
 * polled call's CPU is its poll: a long one is a real cost, not noise. */
static int64_t mean(const dlock__poll *p, int way) {
  unsigned n = p->kept[way] < DLOCK__POLL_KEEP ? p->kept[way] : DLOCK__POLL_KEEP;
  int64_t sum = 0;
  for (unsigned i = 0; i < n; i++)
    sum += p->ns[way][i];
  return n ? sum / n : 0;
}

int dlock__poll_pays(int64_t sleeping_ns, int64_t polling_ns) {
  if (sleeping_ns <= 0 || polling_ns <= 0)
    return 1; /* not measured yet */
  return polling_ns * 100 <= sleeping_ns * (100 + POLL_MARGIN_PCT);
}

int64_t dlock__poll_begin(dlock_client *c, int alone, dlock__poll_probe *pr) {
  dlock__poll *p = &c->direct.poll;
  int opt = c->opts.spin_us;
  pr->way = -1;
  if (opt == 0 || online_cpus() < 2) /* one core: the server needs it */
    return 0;
  if (opt > 0)
    return opt;
  int64_t rtt = atomic_load(&p->rtt_us), budget;
  if (rtt == 0)
    budget = SPIN_FIRST_US;
  else if (rtt > SPIN_MAX_US) /* a slow server: the reply won't come in time */
    return 0;
  else
    budget = rtt * 2 < SPIN_MAX_US ? rtt * 2 : SPIN_MAX_US;
  if (!alone) /* it would not poll anyway */
    return budget;
  uint64_t n = atomic_fetch_add_explicit(&p->calls, 1, memory_order_relaxed);
  pr->phase = (unsigned)(n % POLL_ROUND);
  int look = n < POLL_LOOK ? n % POLL_FIRST_LOOK == 0
                           : pr->phase % POLL_LOOK == 0;
  if (look) { /* are the cores all taken? Three looks in a row say so to
                 stop */
    int taken = others_running() >= online_cpus();
    int seen = taken ? atomic_fetch_add(&p->taken_seen, 1) + 1 : 0;
    if (!taken)
      atomic_store(&p->taken_seen, 0);
    atomic_store(&p->busy, seen >= 3);
  }
  if (atomic_load_explicit(&p->busy, memory_order_relaxed))
    return 0; /* a poll would take the core the server needs */
  int trying = pr->phase >= POLL_TRY_AT && pr->phase < POLL_TRY_AT + POLL_TRIES;
  int way = atomic_load_explicit(&p->on, memory_order_relaxed) ^ trying;
  if (trying || pr->phase % POLL_SAMPLE == 0) {
    pr->way = way;
    pr->cpu0_ns = thread_cpu_ns();
  }
  return way ? budget : 0;
}

void dlock__poll_end(dlock_client *c, const dlock__poll_probe *pr) {
  if (pr->way < 0)
    return;
  dlock__poll *p = &c->direct.poll;
  int64_t ns = thread_cpu_ns() - pr->cpu0_ns;
  pthread_mutex_lock(&p->mu);
  p->ns[pr->way][p->kept[pr->way]++ % DLOCK__POLL_KEEP] = ns;
  if (pr->phase == POLL_TRY_AT + POLL_TRIES - 1) {
    /* the round's try is done: the means of each way's last 16 measures,
     * and a change needs two rounds in a row */
    int pays = dlock__poll_pays(mean(p, 0), mean(p, 1));
    if (pays == atomic_load(&p->on))
      p->against = 0;
    else if (++p->against >= 2) {
      atomic_store(&p->on, pays);
      p->against = 0;
    }
  }
  pthread_mutex_unlock(&p->mu);
}

void dlock__poll_rtt(dlock_client *c, int64_t us) {
  dlock__poll *p = &c->direct.poll;
  int64_t old = atomic_load(&p->rtt_us);
  atomic_store(&p->rtt_us, old == 0 ? us : old + (us - old) / 8);
}
