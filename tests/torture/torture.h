/* dlock-torture: P worker processes x T threads hammer one primitive while
 * every critical section is logged to shared memory; the checker then
 * verifies exclusion, counters, FIFO order and timings (docs/reliability.md).
 *
 * The arena is one memfd mapped by the harness and by every worker (the
 * workers are this program re-executed with --worker and the fd). All times
 * are CLOCK_MONOTONIC nanoseconds, which every process on the machine
 * shares, so logs of different processes merge without translation. */
#ifndef DLOCK_TORTURE_H
#define DLOCK_TORTURE_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define TT_MAX_SERVERS 8
#define TT_MAX_SLOTS 8192     /* worker threads over the run (kills respawn) */
#define TT_MAX_RECS (1 << 22) /* acquire attempts over the run */

typedef enum tt_kind {
  TT_LOCK, TT_FENCED, TT_FAIR, TT_RW, TT_MULTI, TT_REDLOCK, TT_SEMAPHORE,
  TT_ONCE, TT_ONCE_FAIR, /* the non-reentrant lock and fair lock */
  TT_SPIN,
  TT_GROUP, /* a grouped multi-lock: every worker asks for the same values */
  TT_ELECTION, /* every thread campaigns, leads (its section), resigns; each
                  worker process observes (tt_obs) */
  TT_NKINDS
} tt_kind;
/* The kinds whose waiters queue in FIFO order (their order is checked). */
#define TT_FIFO(k) ((k) == TT_FAIR || (k) == TT_ONCE_FAIR)

/* what the run does; the same for the harness and the workers */
typedef struct tt_opts {
  tt_kind kind;
  int procs, threads;
  int64_t duration_ms; /* stop after this long ... */
  int64_t sections;    /* ... or after this many granted sections (0: no) */
  int servers;         /* redis-servers the harness starts */
  int paused;          /* servers SIGSTOPped for the whole run */
  int blackholed;      /* members pointed at a port that never answers */
  int one_engine;      /* redlock: a worker's member clients share one
                          engine thread (dlock_client_opts.share_engine) */
  int64_t lease_ms;    /* 0: watchdog */
  int64_t watchdog_ms; /* client watchdog timeout */
  int64_t wait_ms;     /* acquire budget */
  int64_t hold_us;     /* random time inside the section, hold_min_us
                          (--hold-min-us, default 0) .. hold_us */
  int64_t hold_min_us;
  int permits;         /* semaphore */
  int read_pct;        /* rw */
  int64_t slot_ms;     /* fair */
  int java;            /* lock, fair, rw: this many threads of each worker
                          are Redisson-behaving clients (tests/interop) */
  const char *jvm;     /* --jvm VERSION (lock, fair, rw, spin,
                          non-reentrant[-fair]): the odd workers are real
                          Redisson VERSION clients, one JVM each
                          (tests/interop/java), all their threads Java */
  unsigned nemesis;    /* TT_F_* bits */
  int64_t every_ms;    /* one fault this often (randomised +-50 %) */
  int64_t command_timeout_ms;
  unsigned seed;
  int json;
  const char *timeline; /* --timeline FILE: the run drawn (timeline.c) */
  int broken;          /* checker self-test: each thread locks a name of its
                          own, so nothing excludes (--broken) */
  int cluster;         /* the server is a Redis Cluster of 3 masters with a
                          replica each (--cluster) */
  int sentinel;        /* a master, 2 replicas and 3 sentinels; the
                          clients use the sentinel URI (--sentinel) */
  int writes;          /* --writes plain|guarded (fenced kind): each section
                          reads a counter in Redis and writes it + 1 with a
                          log entry "token:value": TT_W_PLAIN plain
                          commands, TT_W_GUARDED guarded writes
                          (dlock/fence.h); the checker reads both back */
  int loss_pct;        /* --loss PCT (one server): the workers connect from
                          127.0.0.3 to the server's 127.0.0.2, and nftables
                          drops PCT % of the packets between the two, at
                          random, for the whole run (tests/support/
                          partition.h); the harness keeps 127.0.0.1 */
  int delay_ms, jitter_ms; /* --delay MS[:JITTER] (one server): the workers
                          connect from 127.0.0.3 to a relay on 127.0.0.2
                          that holds every chunk, both ways, MS plus a
                          random 0..JITTER ms (tests/support/delay.h);
                          with --loss the loss is on that leg */
  int split;           /* --split: every node on a loopback address of its
                          own (one server: 127.0.0.2; --sentinel,
                          --cluster: 127.0.0.10 ...),
                          worker P connects from 127.0.1.<P + 1>; a
                          partition puts the holder's worker and those of
                          its parity beside the name's master (side A),
                          the others beside the rest (side B) */
  int64_t replica_sync_ms; /* --replica-sync MS: the workers' replica guard */
  int replica_sync_all; /* --replica-sync-all: its WAIT must reach every
                          replica (dlock_client_opts.replica_sync_all) */
  int min_replicas;    /* --min-replicas N: the data nodes refuse writes
                          with fewer than N replicas within 1 s of lag
                          (min-replicas-to-write, min-replicas-max-lag 1) */
  int trace;           /* --trace: every attempt's times (ms, monotonic)
                          and each partition's cut and heal, on stderr */
  int64_t clock_jump_ms; /* --clock-jump MS: clock-forward's and
                          clock-back's size (0: 2 leases) */
  int64_t client_offset_s; /* --client-offset S: client-clock's jumps
                          (0: 3600) */
  double drift_pct;    /* --drift PCT: the first --drift-members servers'
                          clocks run PCT % fast (modelled: a jump of PCT %
                          of the time passed, every 10 ms) */
  int drift_members;
  int async;           /* > 0: each worker runs one thread that drives this
                          many owners at once with the non-blocking API
                          (--async N; lock, fenced, fair, rw) instead of
                          --threads blocking threads */
} tt_opts;

enum { TT_W_NONE, TT_W_PLAIN, TT_W_GUARDED }; /* tt_opts.writes */

enum { /* faults */
  TT_F_KILL = 1 << 0,       /* SIGKILL a random worker process (respawned) */
  TT_F_KILL_WAITER = 1 << 1, /* ... one whose threads are all waiting */
  TT_F_CLIENT_KILL = 1 << 2, /* CLIENT KILL TYPE normal */
  TT_F_PUBSUB_KILL = 1 << 3, /* CLIENT KILL TYPE pubsub */
  TT_F_STOP = 1 << 4,       /* SIGSTOP a server 50 ms .. 2 leases, SIGCONT;
                               --cluster: the name's master, 50 ms .. 3 s
                               (its replica may take over meanwhile) */
  TT_F_RESTART = 1 << 5,    /* kill -9 a server and start it again;
                               --sentinel, --cluster: the (name's) master,
                               started again once a replica took over (it
                               comes back as a replica) */
  TT_F_SLEEP = 1 << 6,      /* DEBUG SLEEP 0.05 .. 0.3 s */
  TT_F_FLUSH = 1 << 7,      /* SCRIPT FLUSH */
  TT_F_MIGRATE = 1 << 8,    /* --cluster: the name's slot (and its keys)
                               moves to another master */
  TT_F_FAILOVER = 1 << 9,   /* --cluster: CLUSTER FAILOVER on a replica of
                               the name's master (no write is lost); at
                               most one per 2.5 s (the cluster's votes);
                               --sentinel: SENTINEL FAILOVER, at most one
                               per 4 s (the failover timeout is 3 s) */
  TT_F_PAUSE = 1 << 10,     /* SIGSTOP a worker with a thread between its
                               read and its write (else one in a section)
                               for 1-2 s, at least 0.2 s past its lease,
                               then SIGCONT */
  TT_F_PARTITION = 1 << 11, /* --split, one server: once a worker holds
                               (just before its next renewal), cut it from
                               the server for a lease and 0.5-1.5 s more.
                               --sentinel, --cluster: once a worker holds, cut the name's
                               master and side A (that worker and those of
                               its parity) from every other node and side B
                               (the other workers) until a replica is
                               promoted
                               and 0.2-1.5 s more, at least a lease and
                               0.5-1.5 s after the cut, then heal; and wait
                               until the old master is a replica again */
  TT_F_CLOCK_FORWARD = 1 << 12, /* a server's clock jumps forward by
                               --clock-jump (default: 2 leases), modelled
                               (tests/support/clock.h): keys expire early */
  TT_F_CLOCK_BACK = 1 << 13, /* ... jumps back: leases last longer */
  TT_F_CLIENT_CLOCK = 1 << 14, /* the workers' wall clock (libfaketime,
                               CLOCK_REALTIME only, as an NTP step) jumps
                               an hour forward or back */
  TT_F_SLOW = 1 << 15,      /* --split: the link between every worker and
                               the name's master loses 20-40 % of its
                               packets for 1-3 s (a slow link: TCP sends
                               again after 200 ms and more) */
  TT_F_COUNT = 16
};

enum { /* record flags */
  TT_R_READ = 1 << 0,    /* a read (shared) section */
  TT_R_LOST = 1 << 1,    /* the lost callback fired during the section */
  TT_R_ELOST = 1 << 2,   /* release returned DLOCK_ELOST */
  TT_R_KILLED = 1 << 3,  /* the process died in the section */
  TT_R_RELERR = 1 << 4   /* release failed otherwise */
};

/* one acquire attempt and, when granted, its section */
typedef struct tt_rec {
  int32_t slot;
  _Atomic uint32_t flags;
  int32_t rc;          /* acquire result */
  int32_t pad;
  int64_t invoke;      /* acquire called */
  int64_t enter;       /* acquire returned OK (0: not granted) */
  int64_t exit;        /* section left, release about to be called */
  int64_t done;        /* release returned */
  _Atomic int64_t lost_at; /* the lost callback fired (0: it did not) */
  int64_t token;       /* the grant's token (fenced) or term (election) */
} tt_rec;

/* --kind election: what one worker process's observer was told */
#define TT_MAX_OBS 64
#define TT_MAX_UNACKED 4096
#define TT_OBS_EVENTS 16384
typedef struct tt_obs_ev {
  int64_t at; /* ns */
  int64_t term, version;
  int32_t change, resync; /* dlock_election_change, the event's resync */
} tt_obs_ev;
typedef struct tt_obs {
  _Atomic int64_t n;
  int proc;
  tt_obs_ev ev[TT_OBS_EVENTS];
} tt_obs;

enum { /* slot phases */
  TT_P_START, TT_P_WAITING, TT_P_IN, TT_P_COMMIT, TT_P_RELEASING, TT_P_GONE,
  TT_P_KILLED, TT_P_READ /* --writes: read the counter, not written yet */
};

typedef struct tt_slot {
  pid_t pid;
  int proc; /* worker process number (respawns keep theirs) */
  _Atomic int phase;
  _Atomic int64_t cur; /* record index of the attempt in progress, -1 */
  uint64_t owner_id;
  char owner[80];      /* client id ":" owner id, as in the fair queue */
  _Atomic int64_t grants, timeouts, errors, release_errors;
  /* acquires that answered DLOCK_ELOST: granted, but read after the lease
   * ran out (the worker stopped while its try was out), given back */
  _Atomic int64_t spent;
  char last_error[160];
} tt_slot;

typedef struct tt_arena {
  _Atomic int stop;
  _Atomic int nslots;
  _Atomic int64_t nrecs;
  _Atomic int64_t granted;
  int64_t counter; /* deliberately not atomic: read, sleep, write + 1 */
  _Atomic int64_t commits;
  _Atomic int64_t java_sections; /* granted to Redisson-behaving clients */
  _Atomic int64_t writes_accepted, writes_refused; /* --writes */
  /* guarded writes answered DLOCK_EUNACKED (written, not confirmed by a
   * replica: counted) or an error (the outcome unknown): the first
   * TT_MAX_UNACKED kept by their log entry ("token:value"), so the checker
   * tells them from confirmed ones */
  _Atomic int64_t writes_unacked;
  _Atomic int nunacked;
  struct { int64_t token, value; } unacked[TT_MAX_UNACKED];
  char urls[TT_MAX_SERVERS][256];
  char name[64];
  tt_slot slots[TT_MAX_SLOTS];
  _Atomic int nobs;
  tt_obs obs[TT_MAX_OBS];
  /* clock-forward: when each jump was made (ns), for the checker */
  _Atomic int njumps;
  int64_t jumps[256];
  /* the faults that can lose a master's latest writes with it (failover,
   * restart, stop, partition): when each was made (ns), for the checker */
  _Atomic int nlosses;
  struct { int64_t from, to; } losses[1024];
  /* pause: each worker stopped (pid) and when (ns), for the checker */
  _Atomic int npauses;
  struct { pid_t pid; int64_t from, to; } pauses[1024];
  tt_rec recs[TT_MAX_RECS];
} tt_arena;

int64_t tt_now_ns(void);

/* timeline.c: a fault of kind made from..to (ns), and the run drawn into
 * png by gnuplot (0, or -1) */
void tt_timeline_fault(int kind, int64_t from_ns, int64_t to_ns);
int tt_timeline_draw(const char *png, const tt_opts *o, const tt_arena *a,
                     const char *const *fault_names);

/* worker.c: run one worker process (its threads loop until stop) */
int tt_worker_main(const tt_opts *o, tt_arena *a, int proc);

/* check.c: verify the logs; fills the result and prints it */
typedef struct tt_snapshot { /* a fair queue read by the harness */
  int64_t sent, replied;
  int n;
  int slots[32];
} tt_snapshot;

typedef struct tt_result {
  int64_t attempts, sections, timeouts, errors, release_errors, spent;
  int64_t fifo_lost; /* out of order across a fault that loses writes */
  int64_t overlaps;          /* overlap, first holder not told: violation */
  int64_t reported_overlaps; /* overlap after the first holder was told */
  int64_t untold_overlaps;   /* of all overlaps, those whose first holder
                                had not been told by its lost callback when
                                the second entered (told at its release
                                only, or never): it worked on, unaware;
                                but for paused_overlaps */
  int64_t paused_overlaps;   /* overlaps whose first holder's process was
                                stopped (pause) in its section before the
                                second entered: nothing can tell a stopped
                                process; guarded writes refuse its writes */
  int64_t lost_reports;      /* sections told they lost */
  int64_t counter, commits;
  int64_t counter_slack;     /* workers killed between write and commit */
  int64_t counter_violation; /* counter outside commits..commits+slack */
  int64_t max_holders;       /* most holders at once (semaphore, readers) */
  int64_t shared_sections;   /* reader sections that overlapped another */
  int64_t fifo_inversions; /* the distinct pairs of attempts behind
                              fifo_violations (each queue read that shows
                              one counts it again) */
  int64_t fifo_checked, fifo_violations;
  int64_t java_sections;     /* of them, granted to Redisson-behaving clients */
  int64_t java_kills;        /* kills of a real Redisson worker (--jvm) */
  int64_t fifo_requeued;      /* inversions excused: the one ahead was purged
                                 (its slot passed) and queued again */
  int64_t fifo_java_passed;   /* --jvm: inversions where the one ahead was a
                                 real Redisson waiter; not violations: its
                                 client takes its entry out itself when its
                                 subscription fails (docs/reliability.md) */
  int64_t worker_deaths;     /* workers that died not by our hand */
  int64_t starved;           /* live worker threads that never got in */
  int64_t max_wait_us, handoff_p50_us, handoff_p99_us, handoffs;
  int64_t acquire_p50_us, acquire_p99_us;
  int64_t max_fail_us;       /* longest failed acquire (budget spent) */
  int64_t killed_in_section, max_takeover_us, max_gap_us;
  int64_t faults[TT_F_COUNT];
  int64_t max_promote_ms;    /* --split: longest cut-to-promotion time */
  int64_t takeovers;         /* --cluster restart: no replica stood within
                                10 s, forced (CLUSTER FAILOVER TAKEOVER) */
  int64_t cuts[3];           /* --split, one server: client cuts both ways,
                                to the server only, from the server only */
  int64_t keys_left, latches_left, available_left;
  /* --writes: what the data in Redis says */
  int64_t writes_accepted, writes_refused; /* by the workers' count */
  int64_t writes_unacked;  /* written, not confirmed (DLOCK_EUNACKED) */
  int64_t unacked_kept;    /* of those and of the writes whose outcome is
                              unknown (an error), in the log at the end */
  int64_t lost_acked;      /* confirmed writes not in the log at the end:
                              lost with their master (a violation with
                              the replica guard on) */
  int64_t data_counter, data_log;  /* the counter, the log's length */
  int64_t stale_accepted;  /* log entries whose token is older than one
                              before them: a stale holder's write landed */
  int64_t lost_updates;    /* log values that do not follow the one before
                              (a write built on a read a newer holder had
                              already overwritten) */
  int64_t data_violation;  /* guarded: stale writes, lost updates, or a
                              counter that is not the accepted count */
  /* --kind election */
  int64_t terms_repeated;  /* two grants of one term */
  int64_t terms_backwards; /* a later leader with an older term */
  int64_t observers, observed; /* observers, events they were told */
  int64_t observed_disorder; /* an event not after the one before it */
  int64_t observed_missing;  /* a granted term an observer skipped (not
                                told a resync) */
  int64_t observed_resyncs;
  /* clock-forward: the longest time from a jump to the lost callback of a
   * hold it ended, and how many holds it ended (told) */
  int64_t max_told_after_jump_us, told_after_jump;
  int64_t violations;
} tt_result;

void tt_check(const tt_opts *o, tt_arena *a, const tt_snapshot *snaps,
              size_t nsnaps, tt_result *r);
/* --writes: judge the data read back from Redis (the log's entries, the
 * counter) against the workers' counts; adds to res->violations for
 * guarded writes. After tt_check. */
void tt_check_data(const tt_opts *o, tt_arena *a, const char *const *log,
                   const size_t *lens, size_t n, int64_t counter,
                   tt_result *res);
void tt_print(const tt_opts *o, const tt_result *r);

#endif
