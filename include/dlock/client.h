/* dlock client: one connection set to one Redis server and the engine
 * thread that owns it.
 *
 * A client runs on one engine thread with a libuv loop: its own, or one it
 * shares with other clients (opts.share_engine). That thread owns the
 * command and pub/sub connections: calls from any number of application
 * threads are queued, and everything queued in one loop turn is written as
 * one pipeline. The client also runs the watchdog (lease renewal for locks
 * held without a lease) and the pub/sub waiter (wake-ups instead of polling).
 * While the client is not busy, a call that needs no waiting skips the
 * engine: the calling thread makes the round trip itself on a pooled
 * connection (the direct path, opts.direct_conns).
 *
 * Thread-safety: every function here may be called from any thread, except
 * dlock_client_close(), which must not race with a second close of the same
 * client. Lock handles keep their client's memory alive, so a lock used after
 * its client was closed fails with DLOCK_ECLOSED instead of crashing.
 */
#ifndef DLOCK_CLIENT_H
#define DLOCK_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_client dlock_client;

/* The values every call's arguments share (dlock/lock.h, dlock/sync.h,
 * dlock/async.h take them). wait_ms: 0 = try once, > 0 = budget in ms,
 * DLOCK_WAIT_FOREVER. */
#define DLOCK_WAIT_FOREVER ((int64_t)-1)
/* lease_ms: > 0 = fixed lease, no renewal; DLOCK_LEASE_WATCHDOG = lease of the
 * client's watchdog timeout, renewed until released. */
#define DLOCK_LEASE_WATCHDOG ((int64_t)-1)
/* Longest lock name accepted, in bytes. */
#define DLOCK_NAME_MAX 65536

/* dlock_client_opts.completions: where async callbacks run (dlock/async.h) */
#define DLOCK_COMPLETE_ENGINE 0
#define DLOCK_COMPLETE_QUEUE 1

/* Why a hold was lost (argument of the lost-lock callback). */
typedef enum dlock_lost_reason {
  DLOCK_LOST_EXPIRED = 1,  /* the server no longer has the hold (lease ran
                              out, key deleted, server restarted) */
  DLOCK_LOST_UNRENEWED = 2, /* renewals failed until the lease's validity
                               was about to pass (a twentieth of the lease
                               plus 5 ms before): it may soon be another's,
                               treat it as gone */
  DLOCK_LOST_MAX_HOLD = 3  /* held longer than max_hold_ms: renewal stopped */
} dlock_lost_reason;

/* Called once for every hold the watchdog finds lost, on the client's engine
 * thread. It must return quickly and must not call blocking dlock functions
 * (they fail with DLOCK_EINVAL there). name/name_len and owner are valid only
 * during the call. owner_id is the thread or explicit owner id that held it. */
typedef void dlock_lost_fn(void *data, const char *name, size_t name_len,
                           uint64_t owner_id, dlock_lost_reason reason);

/* What happened, for dlock_event_fn (docs/observability.md). */
typedef enum dlock_event_type {
  DLOCK_EVENT_ACQUIRED = 1,    /* a lock or permits were granted;
                                  duration_us: the call's time to the grant */
  DLOCK_EVENT_WAITED = 2,      /* an acquire waited (its first try failed),
                                  whatever came of it (rc); duration_us:
                                  the call's time. Before its ACQUIRED */
  DLOCK_EVENT_RELEASED = 3,    /* a lock's hold ended by a release;
                                  duration_us: how long it was held */
  DLOCK_EVENT_LOST = 4,        /* the watchdog found a hold lost (as the
                                  lost-lock callback); reason set */
  DLOCK_EVENT_RECONNECTED = 5  /* a connection came back after a loss;
                                  name: the server ("host:port") */
} dlock_event_type;

typedef struct dlock_event {
  dlock_event_type type;
  const char *name;    /* the object's name (valid during the call only) */
  size_t name_len;
  uint64_t owner_id;   /* the thread or explicit owner (0 for RECONNECTED) */
  int64_t duration_us; /* as the type says; 0 when it has none */
  int rc;              /* WAITED: the acquire's outcome (DLOCK_OK, ...) */
  dlock_lost_reason reason; /* LOST */
} dlock_event;

/* Called for each event on the client's engine thread, in the order they
 * were made on each thread; the same rules as the lost-lock callback: return
 * quickly, no blocking dlock calls. Events of calls made on other threads
 * are handed to the engine thread (a queued task each): a client without
 * an event callback pays nothing. */
typedef void dlock_event_fn(void *data, const dlock_event *event);

typedef struct dlock_client_opts {
  unsigned version;            /* DLOCK_CLIENT_OPTS_VERSION */
  int64_t connect_timeout_ms;  /* TCP connect + handshake; also how long a
                                  call waits for a connection (default 2000) */
  int64_t command_timeout_ms;  /* one command's reply (default 3000); a late
                                  reply drops and re-opens the connection */
  int64_t watchdog_timeout_ms; /* lease of holds taken without a lease; renewed
                                  every third of it (default 30000) */
  int64_t max_hold_ms;         /* watchdog stops renewing a hold after this
                                  long; 0 = no limit (default) */
  const char *client_name;     /* prefix of the connections' CLIENT SETNAME
                                  name PREFIX:HOST:PID:CLIENT-ID (a holder
                                  CLIENT-ID:T maps to its machine and
                                  process); no spaces. NULL = "dlock" */
  dlock_lost_fn *on_lost;      /* lost-lock callback, may be NULL */
  void *on_lost_data;
  int lazy_connect;            /* 1: open returns at once and connects in
                                  the background (a RedLock member that is
                                  down must not stop the others) */
  /* version 2: */
  dlock_client *share_engine;  /* NULL: start an engine thread of its own
                                  (default). An open client: run on that
                                  client's engine thread instead. One thread
                                  then serves both clients' connections: a
                                  RedLock's members on one engine are asked
                                  with one wake-up and answer on one thread.
                                  The thread ends when the last client on it
                                  is closed; either may be closed first. */
  /* version 3: */
  const char *username;        /* ACL user for AUTH; NULL: the URI's, if any */
  const char *password;        /* password for AUTH; NULL: the URI's, if any.
                                  Lets a program keep secrets out of URIs
                                  (which end up in logs). Both are copied;
                                  the copies are wiped when the client is
                                  freed. */
  /* version 4: */
  int direct_conns;            /* the direct path (docs/threading.md): while
                                  fewer than this many calls of the client
                                  are under way and none of its threads
                                  waits for a lock or permits, a call that
                                  needs no waiting is written and read by the
                                  calling thread itself on a connection of
                                  its own (up to
                                  this many, opened on first use), with no
                                  hop through the engine thread; beyond that,
                                  calls ride a few shared connections, one
                                  per 4 riders (beyond 4 already, unless a
                                  connection each is measured faster).
                                  0: every call goes through the engine
                                  (default 64, the most; connections open
                                  only as calls under way at once need
                                  them) */
  int spin_us;                 /* how long a direct call may poll for its
                                  reply before it sleeps: -1 adapts (the
                                  default: about twice the recent round
                                  trip, at most 200 us, one polling thread
                                  per client at a time, and only while a
                                  polled call costs at most 15 % more CPU
                                  than a sleeping one, as measured), 0
                                  never, N always, at most N us (at most
                                  10000) */
  /* version 5: */
  int64_t replica_sync_ms;     /* the replica guard (docs/cluster.md): > 0:
                                  after each write of a lock's acquire or
                                  release and each watchdog renewal, wait up
                                  to this long (WAIT) until the master's
                                  online replicas have it, so a failover
                                  does not lose it; an acquire whose grant
                                  reached none of them is released again and
                                  fails with DLOCK_EIO, a renewal that
                                  reached none does not extend the hold
                                  (reported lost if none does). Costs a
                                  round trip plus the replicas' ack per call.
                                  Applies where dlock knows the replicas (a
                                  cluster's masters, a sentinel's master).
                                  0: off (default); must be below
                                  command_timeout_ms */
  /* version 6: */
  const char *sentinel_username; /* a redis+sentinel:// client's AUTH to the
                                  sentinels (the URI's user and password are
                                  the master's); NULL: none */
  const char *sentinel_password; /* NULL: the sentinels take no password.
                                  Copied, and wiped when the client is
                                  freed. */
  /* version 7: TLS, for rediss://, rediss+cluster:// and rediss+sentinel://
   * URIs (docs/tls.md); refused with the others. Files are read at open. */
  const char *tls_ca_file;     /* PEM CA certificates to trust; NULL (and no
                                  tls_ca_dir): the system trust store */
  const char *tls_ca_dir;      /* a directory of hashed CA certificates */
  const char *tls_cert_file;   /* a client certificate (mutual TLS), PEM,
                                  with tls_key_file */
  const char *tls_key_file;    /* its private key, PEM (not encrypted) */
  const char *tls_server_name; /* the name the server's certificate must
                                  show, and the SNI name; NULL: the host
                                  each connection goes to */
  int tls_insecure;            /* 1: do not verify the server's
                                  certificate. INSECURE: anyone on the
                                  path can pose as the server. For tests */
  /* version 8: */
  dlock_event_fn *on_event;    /* the event hook, may be NULL */
  void *on_event_data;
  /* version 9: */
  int completions;             /* where async callbacks run (dlock/async.h):
                                  DLOCK_COMPLETE_ENGINE (0, default) on the
                                  engine thread, DLOCK_COMPLETE_QUEUE through
                                  the client's completion queue */
  /* version 10: durable grants (docs/durability.md) */
  int64_t durable_ms;          /* > 0: after each write of a lock's acquire
                                  or release, wait up to this long
                                  (WAITAOF 1 durable_replicas durable_ms)
                                  until the server has written it to its
                                  append-only file and fsynced it, so a
                                  kill -9 and restart keep it; an acquire
                                  not made durable in time is released
                                  again and fails with DLOCK_EIO. Needs a
                                  server with WAITAOF (Redis 7.2+, Valkey
                                  7.2+) and appendonly yes: checked on every
                                  connection's handshake (DLOCK_ECONFIG at
                                  open otherwise). 0: off (default);
                                  durable_ms + replica_sync_ms must be below
                                  command_timeout_ms */
  int durable_replicas;        /* and this many replicas fsynced it too
                                  (WAITAOF's numreplicas; default 0) */
  const char *source_addr;     /* a local IP address (literal, IPv4 or
                                  IPv6) every connection of the client is
                                  made from (engine, direct path,
                                  sentinels), as redis-server's
                                  bind-source-addr: for a host with several
                                  addresses, or a test that cuts the
                                  network between addresses. NULL: the
                                  system picks (default). Copied; not with
                                  unix:// URIs */
  /* version 11: */
  int replica_sync_all;        /* 1: the replica guard's WAIT must reach
                                  every replica it counts, not one of
                                  them, and a master that counts none
                                  confirms nothing (an acquire fails with
                                  DLOCK_EIO, a renewal does not extend):
                                  a failover can promote a replica that
                                  lacked the write, and a master just
                                  promoted has no replica until one has
                                  synchronised. 0: one is enough, none
                                  needs none (default). Only with
                                  replica_sync_ms, on cluster and sentinel
                                  URIs */
} dlock_client_opts;

#define DLOCK_CLIENT_OPTS_VERSION 11u /* 1 to 10 are still accepted */
/* The defaults, by name (every field not named is 0 or NULL); in C++, a
 * C++20 compiler takes designated initializers in this order. */
#define DLOCK_CLIENT_OPTS_INIT                                                \
  { .version = DLOCK_CLIENT_OPTS_VERSION, .connect_timeout_ms = 2000,        \
    .command_timeout_ms = 3000, .watchdog_timeout_ms = 30000,                  \
    .direct_conns = 64, .spin_us = -1 }

/* Open a client and connect to Redis.
 *
 * uri   "redis://[[user]:password@]host[:port][/db]" (port 6379, db 0 by
 *       default; user and password are percent-decoded) or
 *       "unix://[[user]:password@]/path/to/socket[?db=N]".
 * opts  NULL for the defaults.
 * out   OUT: the client, or NULL on failure.
 *
 * Returns DLOCK_OK once the first connection is up (AUTH, SELECT and CLIENT
 * SETNAME done; they are sent again after every reconnect), or at once with
 * opts->lazy_connect (calls then wait for the connection as after a
 * reconnect).
 * DLOCK_EINVAL: bad URI or options (dlock_errmsg() says which part).
 * DLOCK_EIO: the server could not be reached or refused the handshake within
 * connect_timeout_ms. DLOCK_ENOMEM.
 */
DLOCK_API int dlock_client_open(const char *uri, const dlock_client_opts *opts,
                                dlock_client **out);

/* Close the client: stop the watchdog, fail calls in progress and waiters with
 * DLOCK_ECLOSED, close the connections and join the engine thread. Locks still
 * held are NOT released: their leases expire on the server by themselves
 * (within the watchdog timeout for locks held without a lease). The memory is
 * freed once the last lock handle of the client is freed. NULL is a no-op.
 * Must not be called from the engine thread (a lost-lock callback). */
DLOCK_API void dlock_client_close(dlock_client *client);

/* Check uri as dlock_client_open() reads it, without connecting: DLOCK_OK,
 * or DLOCK_EINVAL with the reason in dlock_errmsg(). */
DLOCK_API int dlock_uri_check(const char *uri);

/* uri as it may be shown (in logs, messages, status output): the password
 * of its userinfo replaced by "***" ("redis://app:***@host:6379"; in the
 * password-only form "redis://PASSWORD@host" the whole userinfo); a uri
 * without userinfo is copied as is. Works on malformed text too. Writes at most size bytes into
 * out (NUL-terminated when size > 0) and returns the length of the whole
 * result, as snprintf does. NULL uri is "". */
DLOCK_API size_t dlock_uri_redact(const char *uri, char *out, size_t size);

/* The client's id U (36-character UUID), part of every owner string "U:T".
 * Valid as long as the client. */
DLOCK_API const char *dlock_client_id(const dlock_client *client);

/* The calling thread's owner id T: a number unique within the process, handed
 * out on a thread's first use and never reused. */
DLOCK_API uint64_t dlock_thread_id(void);

/* A fresh owner id from the same sequence as thread ids, never the id of a
 * thread. Bind it to a lock (dlock_lock_bind_owner) so one logical owner can
 * acquire in one thread and release in another. */
DLOCK_API uint64_t dlock_owner_id_new(void);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_CLIENT_H */
