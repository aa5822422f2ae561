/* Test harness: real redis-server processes on free loopback ports, started
 * and stopped by pid, plus helpers shared by the CUnit suites. */
#ifndef DLOCK_TEST_HARNESS_H
#define DLOCK_TEST_HARNESS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <CUnit/CUnit.h>
#include <hiredis/hiredis.h>

#include "dlock/dlock.h"

typedef struct th_server {
  pid_t pid;
  int port;
  char dir[64];
  char url[256];
  char extra[512]; /* extra redis-server arguments, space separated */
  int nnodes;               /* a cluster's servers (0: standalone) */
  struct th_server *node;   /* masters first; port/pid above are node[0]'s */
  int sentinels;            /* a sentinel setup: its last nodes are sentinels
                               (node[0] the first master) */
  char conf[96];            /* a sentinel: its config file */
  int tls_port;             /* a TLS server's TLS port (url); port stays
                               plain, for th_cmd and the like */
  char bin[64];             /* the server program; "": DLOCK_REDIS_SERVER,
                               else redis-server */
  char addr[16];            /* a topology node's own address (""):
                               th_topology_addrs */
} th_server;

/* A loopback port that listens (connections complete) but never accepts
 * or answers, until the process exits; -1 on failure. */
int th_blackhole_port(void);

/* Test certificates (tests/support/tls_certs.sh: ca, server, client,
 * expired, wronghost, other-ca) made into a new directory, named in dir.
 * 0 on success. */
int th_tls_certs(char dir[64]);
/* Remove them. */
void th_tls_certs_remove(const char *dir);
/* A server with a plain port (s->port) and a TLS port (s->tls_port, in
 * s->url as rediss://) presenting certs/LEAF.crt, trusting certs/ca.crt
 * for client certificates, which it asks for when auth_clients. */
int th_tls_server_start(th_server *s, const char *certs, const char *leaf,
                        int auth_clients);

/* The topology the suites run on: DLOCK_TEST_CLUSTER=1 in the environment
 * makes th_suite_open (and th_main_server_start) start a Redis Cluster of 3
 * masters and 3 replicas instead of one server, so every primitive suite
 * runs on both with one switch (tests/meson.build's "-cluster" tests). */
int th_cluster_mode(void);
/* DLOCK_TEST_TLS=1: th_suite_open (and th_main_server_start) start a TLS
 * server (th_tls_server_start) and the suite's clients talk TLS on
 * s->url (rediss://), trusting the test CA through SSL_CERT_FILE (the
 * meson "-tls" tests). */
int th_tls_mode(void);
/* Start a cluster of masters masters with replicas replicas each, on free
 * loopback ports; s->url is its redis+cluster:// URL. 0 on success. */
int th_cluster_start(th_server *s, int masters, int replicas);
/* A master with replicas replicas and sentinels sentinels watching it
 * under the name "dlock-test" (down-after-milliseconds 1000,
 * failover-timeout 3000), on free loopback ports; s->url is its
 * redis+sentinel:// URL, s->port/pid the first master's. 0 when every
 * replica has its data and every sentinel knows the others (bounded). */
int th_sentinel_start(th_server *s, int replicas, int sentinels);
/* The same over TLS: every node has a TLS port beside its plain one
 * (tls_port; port stays plain, for th_cmd and the like) presenting
 * certs/server.crt, replicates, talks to its cluster bus and (a sentinel)
 * to the servers over TLS; s->url is a rediss+cluster:// or
 * rediss+sentinel:// URL on the TLS ports. */
int th_tls_cluster_start(th_server *s, const char *certs, int masters,
                         int replicas);
int th_tls_sentinel_start(th_server *s, const char *certs, int replicas,
                          int sentinels);
/* Addresses of their own for the nodes of the next cluster or sentinel
 * setups (0: off, the default): node i (masters, then replicas, then
 * sentinels) listens on 127.0.0.(first + i) as well as 127.0.0.1 (where
 * the harness's own commands go), connects to the other nodes from it and
 * announces it, and the setup's URL names those addresses, so nftables
 * rules between addresses (tests/support/partition.h) cut the network
 * between chosen nodes and clients. Protected mode is off on them. */
void th_topology_addrs(int first);
/* n's address: n->addr, or 127.0.0.1. */
const char *th_addr(const th_server *n);
/* The node that the sentinels name master now (NULL: none answers). */
th_server *th_sentinel_master(th_server *s);
/* th_cluster_start(s, 3, 1) in cluster mode, else th_server_start(s, NULL). */
int th_main_server_start(th_server *s);
/* A plain hiredis connection for a worker process given a test's URL: to
 * its server (a TLS server's plain port, which th_tls_server_start put in
 * the environment), or on a cluster to the master that owns key's slot
 * (keep a worker's keys in one slot with a {hash tag}). */
redisContext *th_connect_key(const char *url, const char *key);
/* The node of cluster s that owns key's slot now (s itself standalone). */
th_server *th_node_of(th_server *s, const char *key);
/* Cluster faults. n says it is a master now (ROLE); th_becomes_master
 * polls (every 5 ms, at most ms) until it does: 1 when it did. */
int th_is_master(th_server *n);
int th_becomes_master(th_server *n, int64_t ms);
/* n is a replica with its master's data (INFO replication: link up, no
 * sync in progress), asked every 20 ms for at most ms: 1, or 0. */
int th_replica_synced(th_server *n, int64_t ms);
/* A replica of master in cluster s (by port), or NULL. */
th_server *th_replica_of(th_server *s, th_server *master);
/* Moving the slot of a key from its master to another master of cluster s,
 * in the steps of a resharding: begin (CLUSTER SETSLOT IMPORTING on the
 * target, MIGRATING on the source), th_move_key (MIGRATE of one key: 1 when
 * it said OK), end (SETSLOT NODE on both ends, then the other masters). */
typedef struct th_slot_move {
  long long slot;
  th_server *from, *to;
  char from_id[64], to_id[64];
} th_slot_move;
void th_move_begin(th_server *s, th_slot_move *m, const char *key);
int th_move_key(th_slot_move *m, const char *key);
void th_move_end(th_server *s, th_slot_move *m);
/* All three steps, moving every key of the slot: 0, or -1 when a MIGRATE
 * failed (the slot is handed over all the same). */
int th_migrate_slot(th_server *s, const char *key);
/* Connections on s (one server, or one node) whose name carries c's id:
 * the engine's and the direct path's. */
int th_connections_of(th_server *s, dlock_client *c);

/* Start a redis-server on a free 127.0.0.1 port (extra: more arguments, may
 * be NULL) and wait until it answers PING. 0 on success. */
int th_server_start(th_server *s, const char *extra);
/* th_server_start with the program bin (NULL or "": the configured one;
 * another's s->bin: the same program as it). */
int th_server_start_bin(th_server *s, const char *bin, const char *extra);
/* A server with WAITAOF (durable grants) and an append-only file (extra:
 * the appendfsync policy and more): the configured program when it has
 * the command, else valkey-server (Redis 7.0 has none). 0 on success;
 * -1, with a message on stderr, when neither does. */
int th_waitaof_server_start(th_server *s, const char *extra);
/* Start again on the same port (after th_server_kill). */
int th_server_restart(th_server *s);
/* The same, returning once it answers at all: LOADING (its data file still
 * being read) counts. */
int th_server_restart_loading(th_server *s);
/* SIGKILL and reap; the directory is kept for a restart. */
void th_server_kill(th_server *s);
/* Kill and remove the directory. */
void th_server_stop(th_server *s);
/* How many times s has run the command cmd (lower case), from INFO
 * commandstats ("cmdstat_CMD:calls="); -1 when it does not answer. */
long long th_cmd_calls(th_server *s, const char *cmd);
/* The number after field (its ':' or '=' included) in INFO section's text:
 * 0 when the field is absent, -1 when INFO was not answered. */
long long th_info(th_server *s, const char *section, const char *field);
/* The replica guard with the replicas stopped: each of the n locks (all
 * on name, whose master is master) fails to acquire with DLOCK_EIO naming
 * the guard, not before guard_ms, and leaves name unheld. */
void th_guard_refuses(dlock_lock *const *locks, int n, th_server *master,
                      const char *name, int64_t guard_ms);
/* SIGSTOP / SIGCONT. */
void th_server_pause(th_server *s, int paused);

/* Run a command on s through a fresh synchronous hiredis connection; returns
 * the reply (free with freeReplyObject) or NULL. On a cluster the command
 * goes to node[0] and follows a MOVED answer once. */
redisReply *th_cmd(th_server *s, const char *fmt, ...);
long long th_int(th_server *s, const char *fmt, ...);
/* How many replicas of master m (one server: a cluster's node, a
 * sentinel setup's master) have every write m took so far, waiting up to
 * timeout_ms for want of them; -1 on error. WAIT counts the replicas'
 * acknowledgements of its own connection's writes (one on a fresh
 * connection returns at once, however far they lag), so a write of its
 * own on key (a key m serves; set, then deleted) goes first: the
 * replication stream is in order. */
long long th_replicated(th_server *m, const char *key, int want, int timeout_ms);

/* Subscribers of channel on s (PUBSUB NUMSUB; on a cluster the sum over
 * its nodes), -1 on error. */
long long th_numsub(th_server *s, const char *channel);
/* Poll (every ms, at most ms_max) until channel has exactly want
 * subscribers on s: the event "the waiter is subscribed" (want 1) or "it
 * left" (want 0). 1 when reached. Safe from any thread (no CUnit). */
int th_wait_numsub(th_server *s, const char *channel, long long want,
                   int64_t ms_max);

/* A suite's usual fixture: start s (no extra arguments) and open *c to it.
 * 0 on success (a CUnit suite init's answer). */
int th_suite_open(th_server *s, dlock_client **c);
/* Close c and stop s; 0. */
int th_suite_close(th_server *s, dlock_client *c);

/* Open a client to s with opts (NULL = defaults); CU fails on error. */
dlock_client *th_client(th_server *s, const dlock_client_opts *opts);
/* A client of s for lost answers: a 300 ms command timeout (an answer
 * the server holds back past it is lost) and a 5 s connect timeout (the
 * question after it waits for the server to go on). */
dlock_client *th_lost_answer_client(th_server *s);

int64_t th_now_ms(void);
int64_t th_now_us(void);

/* A latency bound scaled to this machine: us times the ratio of the
 * loopback round trip measured here (p50 of 200 PINGs to s) to the 30 us
 * of the reference machine (docs/performance.md), never less than us. The
 * issues' latency bounds were set on the reference machine; a slower or
 * busier machine gets proportionally more (and a sanitizer build a fixed
 * factor more), and the figure printed says which applied. */
int64_t th_scaled_us(th_server *s, int64_t us);

/* qsort comparator for int64_t (latency samples). */
int th_cmp_i64(const void *a, const void *b);

/* Entries of a directory other than "." and "..", e.g. /proc/self/fd (the
 * open descriptors, the one reading it included) or /proc/self/task. */
int th_count_entries(const char *dir);

/* A key prefix unique to the running test (name of the test + counter). */
const char *th_name(const char *base);

/* Run the suites registered by add(); handles the --worker re-exec. Returns
 * the process exit code (non-zero on any failure). */
typedef int (*th_worker_fn)(int argc, char **argv);
int th_main(int argc, char **argv, void (*add)(void), th_worker_fn worker);

/* Run the dlock tool (DLOCK_BIN) with args, a shell line (its stderr
 * reaches out only when args says 2>&1): its exit status (-1 killed), its
 * output into out (at most n - 1 bytes, NUL-terminated). */
int th_dlock_output(const char *args, char *out, size_t n);

/* Run a shell line: its exit status (-1 killed), its stdout into out (at
 * most n - 1 bytes, NUL-terminated). */
int th_shell(const char *line, char *out, size_t n);

/* Spawn this test binary as a worker process: argv after "--worker". */
pid_t th_spawn_worker(char *const args[]);
/* The same, with the worker's stdout readable from *out_fd (close it). */
pid_t th_spawn_worker_pipe(char *const args[], int *out_fd);
/* Wait for a worker; returns its exit status or -1. */
int th_wait_worker(pid_t pid, int timeout_ms);

/* The lost-lock callbacks a client made (dlock_client_opts.on_lost =
 * th_on_lost, on_lost_data = a th_lost_log). */
typedef struct th_lost_log {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int count;
  dlock_lost_reason reason; /* of the latest */
  uint64_t owner;
  char name[256]; /* the latest's (cut at 255 bytes) */
} th_lost_log;
void th_lost_init(th_lost_log *log);
void th_on_lost(void *data, const char *name, size_t len, uint64_t owner,
                dlock_lost_reason reason);
/* Wait until log->count >= n or timeout_ms; returns the count. */
int th_lost_wait(th_lost_log *log, int n, int timeout_ms);
/* The count now (read under the log's mutex: the engine thread writes it). */
int th_lost_count(th_lost_log *log);
/* 1 once key's PTTL on s rises between two reads (10 ms apart: a renewal)
 * within timeout_ms; 0 when it does not, or the key is gone. */
int th_pttl_rises(th_server *s, const char *key, int timeout_ms);
/* A client on s whose holds are renewed (600 ms watchdog) for 1 s at most
 * (max_hold_ms), its losses logged in log (initialised here). */
dlock_client *th_max_hold_client(th_server *s, th_lost_log *log);
/* A client on s whose watchdog lease is watchdog_ms, its losses logged in
 * log (initialised here). */
dlock_client *th_watchdog_client(th_server *s, th_lost_log *log,
                                 int64_t watchdog_ms);

/* The one way a test runs an acquire on a thread of its own:
 * dlock_acquire(lock, wait_ms, lease_ms), its rc, and got_ms (th_now_ms)
 * when it returned (after waiting on start, when set: threads that begin
 * together). A grant is released at once (release_rc; after
 * hold_ms when set: a scenario's hold, never a synchronisation), unless:
 * held is set: the thread waits on held (the test sees its holders hold),
 * then on go (when set: the test is done with them), then releases; keep
 * is 1: never released (its lease ends it). held and go are waited on
 * whether the acquire was granted or not. */
typedef struct th_acquirer {
  dlock_lock *lock;
  int64_t wait_ms, lease_ms;
  pthread_barrier_t *start, *held, *go;
  int64_t hold_ms;
  int keep;
  int rc, release_rc;
  int64_t got_ms;
  pthread_t thread;
} th_acquirer;
void th_acquirer_start(th_acquirer *a);
void th_acquirer_join(th_acquirer *a);
/* An acquire (released at once) by another thread, waited for: its rc, or
 * the release's when the acquire was granted and the release failed. */
int th_acquire_elsewhere(dlock_lock *lock, int64_t wait_ms, int64_t lease_ms);

/* fn(arg) on a thread of its own, started now and joined later
 * (th_elsewhere_join: its rc); th_elsewhere does both. */
typedef struct th_elsewhere_call {
  int (*fn)(void *arg);
  void *arg;
  int rc;
  pthread_t thread;
} th_elsewhere_call;
void th_elsewhere_start(th_elsewhere_call *e, int (*fn)(void *arg), void *arg);
int th_elsewhere_join(th_elsewhere_call *e);
int th_elsewhere(int (*fn)(void *arg), void *arg);
/* A release by another thread (another owner, unless the lock is bound):
 * its rc. */
int th_release_elsewhere(dlock_lock *lock);
/* The lock's state as another thread (another owner) sees it. */
int th_state_elsewhere(dlock_lock *lock, dlock_lock_state *st);

/* The one worker loop: fn on n threads at once (at most 64), all joined
 * before it returns; th_threads hands each the same arg, th_threads_each
 * the i-th element of args (size bytes each). Returns how many started
 * (fewer: said on stderr). */
int th_threads(int n, void *(*fn)(void *), void *arg);
int th_threads_each(int n, void *(*fn)(void *), void *args, size_t size);

/* One async call's outcome (dlock_done_fn th_outcome_done, data the
 * th_outcome), awaited by a test's thread. Initialise with
 * TH_OUTCOME_INIT. */
typedef struct th_outcome {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, rc;
  char msg[512];     /* the result's errmsg */
  long long integer; /* its reply's integer (a guarded write's), else -1 */
} th_outcome;
#define TH_OUTCOME_INIT                                                        \
  {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, "", -1}
void th_outcome_done(void *data, const dlock_result *r);
/* Its rc once done, waited for ms at most (-1000: not done by then). */
int th_outcome_wait(th_outcome *o, int64_t ms);

/* The commands c has sent (its statistics). */
uint64_t th_commands(dlock_client *c);

/* A call with an OUT flag: give it &th_flag; it must return DLOCK_OK and
 * set the flag to want (e.g. 1 "set", 0 "already set"). */
extern _Thread_local int th_flag;
#define TH_ASSERT_FLAG(expr, want)                                            \
  do {                                                                        \
    th_flag = -1;                                                             \
    TH_ASSERT_RC(expr, DLOCK_OK);                                             \
    CU_ASSERT_EQUAL(th_flag, (want));                                         \
  } while (0)

/* Every code a public call returned under TH_ASSERT_RC is recorded (the
 * call: the first dlock_ name in expr); after the run, th_main checks
 * that each call's man page names each code it returned
 * (tools/manpages.py --returns). */
void th_rc_seen(const char *expr, int rc);

#define TH_ASSERT_RC(expr, want)                                              \
  do {                                                                        \
    int th_rc_ = (expr);                                                      \
    th_rc_seen(#expr, th_rc_);                                                \
    if (th_rc_ != (want))                                                     \
      fprintf(stderr, "\n  %s:%d: %s = %s (%s), want %s\n", __FILE__, __LINE__, \
              #expr, dlock_errname(th_rc_), dlock_errmsg(), dlock_errname(want)); \
    CU_ASSERT_EQUAL(th_rc_, (want));                                          \
  } while (0)

#endif
