/* The direct path (docs/threading.md, "The direct path"): a call that needs
 * no waiting is written and read by the calling thread itself, on a
 * connection it takes from the client's pool for that one round trip.
 *
 * A blocking call through the engine costs two thread hops (caller ->
 * engine -> caller), each a context switch on a small machine. Here the
 * caller sends its own EVALSHA and reads its own reply: what a plain hiredis
 * program does, plus a short poll for the reply before sleeping while the
 * call is the client's only one (the reply of a loopback round trip often
 * arrives before a sleeping thread would be woken).
 *
 * The engine is still the only place for pub/sub, the watchdog and the
 * early tries of a wait, and it takes every call while a thread of the
 * client waits for a lock (contention: see begin()). While the client
 * already has direct_conns calls under way, a call rides the pool's shared
 * connection instead ("Riders" below: many concurrent callers are served
 * better by a pipeline, one write and one read for many calls on both
 * sides, than by as many connections), or goes to the engine where it
 * cannot (TLS, a replica guard's WAIT after the reply). Grants made here
 * are recorded by the backend exactly as before (dlock__hold_add after
 * the reply), so the watchdog and lost reports do not know the
 * difference.
 *
 * Failures keep the engine's meaning: a connection that breaks or stays
 * silent past the command timeout fails the call with DLOCK_EIO (a release
 * is retried with the same request id by release.c) and sends calls to the
 * engine for a backoff period, as does a connection that cannot be opened
 * (so a dead server gives the engine's errors and reconnect waits), and a
 * closed client fails calls with DLOCK_ECLOSED. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/engine.h"
#include "net/sock.h"
#include "net/topology.h"

void dlock__direct_init(dlock_client *c) {
  dlock__direct *d = &c->direct;
  memset(d, 0, sizeof *d);
  pthread_mutex_init(&d->mu, NULL);
  atomic_init(&d->active, 0);
  atomic_init(&d->piped, 0);
  atomic_init(&d->waiting, 0);
  dlock__poll_init(&d->poll);
  dlock__share_init(&d->share);
  atomic_init(&d->calls, 0);
  atomic_init(&d->fallbacks, 0);
  atomic_init(&d->rides, 0);
}

int dlock__direct_pools(dlock_client *c) {
  dlock__direct *d = &c->direct;
  int n = c->net.topo->nodes;
  d->pools = calloc((size_t)n, sizeof *d->pools);
  d->slots = c->net.topo->slot_map(&c->net);
  if (d->pools == NULL)
    return dlock__fail(DLOCK_ENOMEM, "out of memory");
  d->npools = n;
  for (int i = 0; i < n; i++) {
    atomic_init(&d->pools[i].link.ready, 0);
    atomic_init(&d->pools[i].link.replicas, 0);
    for (int k = 0; k < DLOCK__LANES; k++)
      pthread_mutex_init(&d->pools[i].lanes[k].mu, NULL);
  }
  return DLOCK_OK;
}

dlock__dpool *dlock__direct_node(dlock_client *c, int i, const char *host,
                                 int port) {
  dlock__direct *d = &c->direct;
  pthread_mutex_lock(&d->mu);
  d->pools[i].host = host;
  d->pools[i].port = port;
  pthread_mutex_unlock(&d->mu);
  return &d->pools[i];
}

_Static_assert(DLOCK__MAX_MASTERS == DLOCK__MAX_NODES, "one bound");

int dlock__client_masters(dlock_client *c, int *first, int max) {
  dlock__direct *d = &c->direct;
  int n = 0;
  char seen[DLOCK__MAX_NODES] = {0};
  for (int s = 0; d->slots && s < DLOCK__SLOTS && n < max; s++) {
    int i = atomic_load_explicit(&d->slots[s], memory_order_relaxed);
    if (i >= 0 && i < DLOCK__MAX_NODES && !seen[i]) {
      seen[i] = 1;
      first[n++] = s;
    }
  }
  return n;
}

/* ---- one connection ------------------------------------------------------- */

/* A failed round trip on dc: "HOST:PORT (direct connection): what" into
 * why. */
static void say(dlock_client *c, const dlock__dconn *dc, char *why, size_t n,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void say(dlock_client *c, const dlock__dconn *dc, char *why, size_t n,
                const char *fmt, ...) {
  char addr[300];
  pthread_mutex_lock(&c->direct.mu); /* a sentinel's master may move */
  if (dc->pool->host)
    snprintf(addr, sizeof addr, "%s:%d", dc->pool->host, dc->pool->port);
  else
    dlock__client_where(c, addr, sizeof addr);
  pthread_mutex_unlock(&c->direct.mu);
  int k = snprintf(why, n, "%s (direct connection): ", addr);
  if (k < 0 || (size_t)k >= n)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why + k, n - (size_t)k, fmt, ap);
  va_end(ap);
}

static void hello_wipe(dlock__dconn *dc);
static void sweep_due(dlock_client *c);
static int lanes_sweep(dlock_client *c);
static void busy_add(dlock__dpool *p, dlock__dconn *dc);
static void busy_del(dlock__dpool *p, dlock__dconn *dc);

static void dconn_close(dlock__dconn *dc) {
  if (dc == NULL)
    return;
  hello_wipe(dc);
  dlock__buf_free(&dc->later);
  dlock__sock_close(&dc->s);
  free(dc);
}

/* Write all of p. DLOCK_OK, or DLOCK_EIO with why. */
static int send_all(dlock_client *c, dlock__dconn *dc, const char *p,
                    size_t len, int64_t deadline_us, char *why, size_t n) {
  char msg[256];
  if (dlock__sock_send(&dc->s, p, len, deadline_us, msg, sizeof msg) ==
      DLOCK_OK)
    return DLOCK_OK;
  say(c, dc, why, n, "%s", msg);
  return DLOCK_EIO;
}

/* A socket read that failed (dlock__sock_take's k < 0; what: its words):
 * why says so, DLOCK_EIO. */
static int take_failed(dlock_client *c, dlock__dconn *dc, ssize_t k,
                       const char *what, char *why, size_t n) {
  if (k == -1)
    say(c, dc, why, n, "connection closed by the server");
  else if (k == -3)
    say(c, dc, why, n, "reply parse error: %s", dc->s.reader->errstr);
  else
    say(c, dc, why, n, "%s", what);
  return DLOCK_EIO;
}

/* Take what the socket has, without blocking, and parse it: DLOCK_OK with
 * *out the next reply (the dc->discard ones skipped), or NULL when none is
 * complete yet; DLOCK_EIO with why. */
static int pump(dlock_client *c, dlock__dconn *dc, int read_socket,
                redisReply **out, char *why, size_t n) {
  *out = NULL;
  for (;;) {
    void *r = NULL;
    if (redisReaderGetReply(dc->s.reader, &r) != REDIS_OK) {
      say(c, dc, why, n, "reply parse error: %s", dc->s.reader->errstr);
      return DLOCK_EIO;
    }
    if (r != NULL) {
      if (dc->hello_replies > 0) { /* the handshake's, before any call's */
        dc->hello_replies--;
        if (((redisReply *)r)->type == REDIS_REPLY_ERROR &&
            dlock__handshake_refusal(((redisReply *)r)->str) != 0)
          dc->refused = 1;
        freeReplyObject(r);
        continue;
      }
      if (dc->discard > 0) { /* a DEL sent behind an earlier release */
        dc->discard--;
        freeReplyObject(r);
        continue;
      }
      *out = r;
      return DLOCK_OK;
    }
    if (!read_socket)
      return DLOCK_OK;
    char what[300];
    ssize_t k = dlock__sock_take(&dc->s, what, sizeof what);
    if (k > 0)
      continue;
    if (k == 0)
      return DLOCK_OK;
    return take_failed(c, dc, k, what, why, n);
  }
}

/* While a call may poll for its reply instead of sleeping: it is the
 * client's only call under way (direct or through the engine); with more,
 * the core is needed by them or the server. */
static int alone(dlock_client *c) {
  return atomic_load(&c->direct.active) == 1 &&
         atomic_load(&c->direct.piped) == 0;
}

/* Read the next reply. spin_us > 0: poll without sleeping for up to that
 * long while the call is alone. DLOCK_OK with *out, or DLOCK_EIO with
 * why. */
static int read_reply(dlock_client *c, dlock__dconn *dc, int64_t deadline_us,
                      int64_t spin_us, redisReply **out, char *why, size_t n) {
  int64_t spin_until = spin_us > 0 && alone(c) ? dlock__now_us() + spin_us : 0;
  /* Not polling (other calls under way, or no spin): a reply just asked
   * for is not in yet, so the socket is not read before it is waited for
   * (a read first would be one more system call, EAGAIN). A plain
   * connection sleeps in recv(2) itself (dlock__sock_sleepy: one system
   * call per reply, as a blocking client's), a TLS one in poll(2) and
   * reads after (a record read before may hold the reply already). */
  int wait_first = spin_until == 0 && dc->s.tls == NULL;
  for (;;) {
    int rc = pump(c, dc, !wait_first, out, why, n);
    if (rc != DLOCK_OK || *out != NULL)
      return rc;
    if (spin_until != 0) {
      if (dlock__now_us() < spin_until && alone(c))
        continue;
      spin_until = 0;
    }
    if (dc->s.sleep_ms > 0) {
      char what[300];
      ssize_t k = dlock__sock_take_sleeping(&dc->s, deadline_us, what,
                                            sizeof what);
      wait_first = 1; /* the pump parses what came; no read of its own */
      if (k > 0)
        continue;
      if (k != 0)
        return take_failed(c, dc, k, what, why, n);
      say(c, dc, why, n, "no reply within the command timeout (%lld ms)",
          (long long)c->opts.command_timeout_ms);
      return DLOCK_EIO;
    }
    wait_first = 0;
    int w = dlock__sock_wait(dc->s.fd, POLLIN, deadline_us);
    if (w == 0) {
      say(c, dc, why, n, "no reply within the command timeout (%lld ms)",
          (long long)c->opts.command_timeout_ms);
      return DLOCK_EIO;
    }
    if (w < 0) {
      say(c, dc, why, n, "read failed: %s", strerror(errno));
      return DLOCK_EIO;
    }
  }
}

/* Where p's server is: the address of the last successful open, else
 * resolved now (IPv4 first, as the engine connects). */
static int resolve(dlock_client *c, dlock__dpool *p, struct sockaddr_storage *ss,
                   socklen_t *len, unsigned *gen, char host[256]) {
  dlock__direct *d = &c->direct;
  int has_host, port_no;
  pthread_mutex_lock(&d->mu); /* a sentinel's master may move meanwhile */
  *ss = p->addr;
  *len = p->addr_len;
  has_host = p->host != NULL;
  snprintf(host, 256, "%s", has_host ? p->host : c->uri.host ? c->uri.host : "");
  port_no = has_host ? p->port : c->uri.port;
  *gen = p->gen;
  pthread_mutex_unlock(&d->mu);
  if (*len > 0)
    return 0;
  if (!has_host && c->uri.path) {
    struct sockaddr_un *un = (struct sockaddr_un *)ss;
    if (strlen(c->uri.path) >= sizeof un->sun_path)
      return -1;
    memset(un, 0, sizeof *un);
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, c->uri.path, strlen(c->uri.path) + 1);
    *len = sizeof *un;
    return 0;
  }
  return dlock__sock_resolve(host, port_no, ss, len);
}

/* One handshake command, kept in dc->hello (dlock__handshake). */
static int hello_add(void *ctx, size_t argc, const char *const *argv,
                     const size_t *lens) {
  dlock__dconn *dc = ctx;
  dc->hello_replies++;
  return dlock__resp_command(&dc->hello, argc, argv, lens);
}

/* AUTH, SELECT and CLIENT SETNAME as the engine's connections send them,
 * kept in dc->hello to go out in one write with the first call: a new
 * connection costs its first call no extra round trip. */
static int hello(dlock_client *c, dlock__dconn *dc) {
  return dlock__handshake(&c->net, hello_add, dc);
}

/* Forget the handshake's bytes (the password among them). */
static void hello_wipe(dlock__dconn *dc) {
  if (dc->hello.p)
    memset(dc->hello.p, 0, dc->hello.cap);
  dlock__buf_free(&dc->hello);
}

/* A new connection (its handshake not sent yet) on p's busy list, or NULL:
 * the engine then serves the call and reports whatever is wrong with the
 * server; *moved says the server moved meanwhile (a sentinel's failover:
 * no reason to back off). The connection is on the busy list while it
 * connects, so a move shuts it down there: a TLS handshake with a stalled
 * old master does not hold the call for the connect timeout. */
static dlock__dconn *dconn_open(dlock_client *c, dlock__dpool *p, int *moved) {
  int64_t deadline = dlock__now_us() + c->opts.connect_timeout_ms * 1000;
  struct sockaddr_storage ss;
  socklen_t len = 0;
  unsigned gen;
  char host[256], why[1024];
  *moved = 0;
  if (resolve(c, p, &ss, &len, &gen, host) != 0)
    return NULL;
  dlock__dconn *dc = calloc(1, sizeof *dc);
  if (dc == NULL)
    return NULL;
  dc->pool = p;
  dc->gen = gen;
  dc->s.fd = -1;
  if (hello(c, dc) != DLOCK_OK ||
      dlock__sock_init(&dc->s, ss.ss_family, c->opts.source_addr, why,
                       sizeof why) != DLOCK_OK) {
    dconn_close(dc);
    return NULL;
  }
  dlock__direct *d = &c->direct;
  pthread_mutex_lock(&d->mu);
  *moved = gen != p->gen || d->closed;
  if (!*moved)
    busy_add(p, dc);
  pthread_mutex_unlock(&d->mu);
  if (*moved) {
    dconn_close(dc);
    return NULL;
  }
  int rc = dlock__sock_connect(&dc->s, &ss, len, c->net.tls, host, deadline, why,
                               sizeof why);
  if (rc == DLOCK_OK && dc->s.tls == NULL) /* else it keeps to poll(2) */
    dlock__sock_sleepy(&dc->s, c->opts.command_timeout_ms);
  pthread_mutex_lock(&d->mu);
  *moved = gen != p->gen;
  if (rc != DLOCK_OK)
    busy_del(p, dc);
  else if (!*moved) { /* else take drops dc */
    p->addr = ss;
    p->addr_len = len;
  }
  pthread_mutex_unlock(&d->mu);
  if (rc != DLOCK_OK) {
    dconn_close(dc); /* the engine's connection says what is wrong */
    return NULL;
  }
  return dc;
}

/* An idle connection the server may have closed meanwhile (a restart, a
 * CLIENT KILL, its idle timeout): 1 when it is still open. What arrived
 * while it was idle (the answer to a latch's DEL) is read first: the end
 * of the stream may be behind it. */
static int still_open(dlock__dconn *dc) {
  char why[1024];
  ssize_t k;
  while ((k = dlock__sock_take(&dc->s, why, sizeof why)) > 0) {
  }
  return k == 0;
}

/* ---- the pool ------------------------------------------------------------- */

static void busy_add(dlock__dpool *p, dlock__dconn *dc) {
  dc->prev = NULL;
  dc->next = p->busy;
  if (p->busy)
    p->busy->prev = dc;
  p->busy = dc;
}

static void busy_del(dlock__dpool *p, dlock__dconn *dc) {
  if (dc->prev)
    dc->prev->next = dc->next;
  else
    p->busy = dc->next;
  if (dc->next)
    dc->next->prev = dc->prev;
  dc->next = dc->prev = NULL;
}

/* Hand dc back: to the idle stack (the most recently used is taken first:
 * its buffers are warm), or closed when broken or the client is closing. */
static void give_back(dlock_client *c, dlock__dconn *dc, int broken) {
  dlock__direct *d = &c->direct;
  dlock__dpool *p = dc->pool;
  pthread_mutex_lock(&d->mu);
  busy_del(p, dc);
  if (broken || d->closed || dc->gen != p->gen) {
    p->open--;
    pthread_mutex_unlock(&d->mu);
    dconn_close(dc);
    return;
  }
  dc->next = p->idle;
  p->idle = dc;
  p->backoff_ms = 0; /* a round trip went well */
  int kept = dc->later.len > 0;
  pthread_mutex_unlock(&d->mu);
  if (kept)
    sweep_due(c);
}

/* Calls to p's server go to the engine for a while: it could not be
 * reached or refused the handshake (d->mu held). */
static void back_off_locked(dlock__dpool *p) {
  p->backoff_ms = dlock__backoff_next(p->backoff_ms);
  p->down_until_ms = dlock__now_ms() + p->backoff_ms;
}

static void back_off(dlock_client *c, dlock__dpool *p) {
  pthread_mutex_lock(&c->direct.mu);
  back_off_locked(p);
  pthread_mutex_unlock(&c->direct.mu);
}

/* The pool of the server that serves slot (d->mu held), or NULL: on a
 * cluster, a slot whose master is not known yet. */
static dlock__dpool *pool_for(dlock_client *c, int slot) {
  dlock__direct *d = &c->direct;
  if (d->slots == NULL)
    return &d->pools[0];
  int i = slot >= 0 && slot < DLOCK__SLOTS
              ? atomic_load_explicit(&d->slots[slot], memory_order_relaxed)
              : -1;
  return i >= 0 && i < d->npools ? &d->pools[i] : NULL;
}

/* A connection for one call on slot's server, or NULL: all busy and the
 * pool full (*full set), the engine's connection there not up, a
 * connection failed lately (the backoff), or the client closed. */
static dlock__dconn *take(dlock_client *c, int slot, int limit, int *full) {
  dlock__direct *d = &c->direct;
  for (int i = 0; i <= DLOCK__DIRECT_MAX; i++) {
    pthread_mutex_lock(&d->mu);
    dlock__dpool *p = pool_for(c, slot);
    dlock__dconn *dc = p ? p->idle : NULL;
    if (p == NULL || d->closed || !atomic_load(&p->link.ready) ||
        dlock__now_ms() < p->down_until_ms ||
        (dc == NULL && p->open >= limit)) {
      *full = p && dc == NULL && p->open >= limit;
      pthread_mutex_unlock(&d->mu);
      return NULL;
    }
    if (dc) {
      p->idle = dc->next;
      busy_add(p, dc);
      pthread_mutex_unlock(&d->mu);
      if (still_open(dc))
        return dc;
      give_back(c, dc, 1);
      continue;
    }
    p->open++;
    pthread_mutex_unlock(&d->mu);
    int moved;
    dc = dconn_open(c, p, &moved); /* on the busy list */
    pthread_mutex_lock(&d->mu);
    if (dc == NULL || d->closed || dc->gen != p->gen) {
      p->open--;
      if (dc == NULL && !moved)
        back_off_locked(p);
      if (dc)
        busy_del(p, dc);
      pthread_mutex_unlock(&d->mu);
      dconn_close(dc);
      return NULL;
    }
    pthread_mutex_unlock(&d->mu);
    return dc;
  }
  return NULL;
}

/* Send what dc->later holds (latch DELs, maybe a call behind them); their
 * answers come first and are skipped. */
static int send_later(dlock_client *c, dlock__dconn *dc, int64_t deadline_us,
                      char *why, size_t n) {
  int rc = send_all(c, dc, dc->later.p, dc->later.len, deadline_us, why, n);
  dc->discard += dc->later_n;
  dc->later_n = 0;
  dc->later.len = 0;
  return rc;
}

/* ---- the sweep: latch DELs of idle connections ---------------------------- */

/* A connection given back with latch DELs kept (drop_key) arms the sweep
 * unless it is armed already: SWEEP_MS later the engine sends the DELs of
 * every idle connection, so a latch outlives its release by that much at
 * most while the connection is not used. A busy client arms it once per
 * SWEEP_MS (one wake-up of the engine), not once per release. */
#define SWEEP_MS 50

static void sweep_done(dlock__req *req, redisReply *reply, int status) {
  (void)req;
  (void)status;
  if (reply)
    freeReplyObject(reply);
}

/* Engine thread, SWEEP_MS after the arming. */
static void on_sweep(uv_timer_t *t) {
  dlock_client *c = t->data;
  dlock__direct *d = &c->direct;
  dlock__dconn *list = NULL;
  atomic_store(&d->sweep_armed, 0);
  int again = lanes_sweep(c);
  pthread_mutex_lock(&d->mu);
  for (int i = 0; i < d->npools; i++) {
    dlock__dpool *p = &d->pools[i];
    for (dlock__dconn **at = &p->idle; *at != NULL;) {
      dlock__dconn *dc = *at;
      if (dc->later.len == 0) {
        at = &dc->next;
        continue;
      }
      *at = dc->next; /* busy while the engine writes on it */
      busy_add(p, dc);
      dc->swept = list;
      list = dc;
    }
  }
  pthread_mutex_unlock(&d->mu);
  while (list != NULL) {
    dlock__dconn *dc = list;
    list = dc->swept;
    char why[1024];
    int64_t deadline = dlock__now_us() + c->opts.command_timeout_ms * 1000;
    give_back(c, dc, send_later(c, dc, deadline, why, sizeof why) != DLOCK_OK);
  }
  if (again)
    sweep_due(c);
}

static void sweep_start(dlock_client *c, dlock__req *req) {
  if (!c->net.stopping)
    uv_timer_start(&c->sweep_timer, on_sweep, SWEEP_MS, 0);
  dlock__req_finish(req, NULL, DLOCK_OK, NULL);
}

/* Latch DELs were kept: the sweep is armed unless it is already. */
static void sweep_due(dlock_client *c) {
  dlock__direct *d = &c->direct;
  if (atomic_load_explicit(&d->sweep_armed, memory_order_relaxed) ||
      atomic_exchange(&d->sweep_armed, 1))
    return;
  dlock__req *req = &d->sweep_req;
  dlock__req_task(req, sweep_start, NULL);
  req->done = sweep_done;
  dlock__submit(c, req); /* fails only when closing: the latches expire */
}

/* The DEL of a release's unlock latch (dlock__req_drop_after), its answer
 * skipped: kept to go out in front of the connection's next call, in the
 * same write. Sent on its own it cost a system call and a wake-up of the
 * server, and its answer a read of its own, on every release (W1: 8
 * system calls per pair against a plain hiredis loop's 4). A connection
 * left idle has the engine's sweep send it (SWEEP_MS later, on_sweep());
 * one closed meanwhile leaves the latch to its own expiry (PX), as a
 * failed DEL would, and so does a DEL there was no memory to keep. */
static void drop_key(dlock__dconn *dc, const dlock__buf *key) {
  const char *argv[] = {"DEL", key->p};
  size_t lens[] = {3, key->len};
  if (dlock__resp_command(&dc->later, 2, argv, lens) == DLOCK_OK)
    dc->later_n++;
}

/* The write's acknowledgement (engine.h, dlock__ack_plan): after req's
 * write, WAIT on the same connection until its master's online replicas
 * have it and/or WAITAOF until it is fsynced, in one write; req->ack says
 * what came of it. DLOCK_OK, or DLOCK_EIO (the connection is broken; the
 * script's reply is in hand all the same). */
static int send_ack(dlock_client *c, dlock__dconn *dc, dlock__req *req) {
  int n = dlock__ack_plan(&c->opts, atomic_load(&dc->pool->link.replicas), req);
  if (n == 0)
    return DLOCK_OK;
  char why[1024];
  int64_t deadline = dlock__now_us() + c->opts.command_timeout_ms * 1000;
  dlock__buf b = {0};
  int rc = DLOCK_OK;
  for (int i = 0; i < n && rc == DLOCK_OK; i++) {
    dlock__ack_cmd a;
    dlock__ack_cmd_init(&c->opts, req, i, &a);
    rc = dlock__resp_command(&b, a.argc, a.argv, a.lens);
  }
  if (rc == DLOCK_OK)
    rc = send_all(c, dc, b.p, b.len, deadline, why, sizeof why);
  dlock__buf_free(&b);
  for (int i = 0; i < n && rc == DLOCK_OK; i++) {
    redisReply *r = NULL;
    rc = read_reply(c, dc, deadline, 0, &r, why, sizeof why);
    if (rc == DLOCK_OK)
      dlock__ack_answer(req, i, r);
    if (r)
      freeReplyObject(r);
  }
  return rc == DLOCK_ENOMEM ? DLOCK_OK : rc;
}

/* A new connection's first write: its handshake and the call together.
 * The handshake's answers are read (and checked: dc->refused) before the
 * call's, by pump(). */
/* The call's command behind the latch DELs kept (drop_key), in one write;
 * their answers come first and are skipped. */
static int send_behind_later(dlock_client *c, dlock__dconn *dc,
                             const dlock__req *req, int64_t deadline,
                             char *why, size_t n) {
  int rc = dlock__buf_add(&dc->later, req->cmd.p, req->cmd.len);
  if (rc != DLOCK_OK) {
    snprintf(why, n, "out of memory");
    return rc;
  }
  return send_later(c, dc, deadline, why, n);
}

/* An answer saying the call did not run there, which the engine follows:
 * a redirect of the topology's (counted), or a passing refusal that it
 * sends again after a pause (net/conn.c). */
static int engine_follows(dlock_client *c, const redisReply *r) {
  dlock__class k = dlock__classify(r);
  if (k == DLOCK__C_PASSING)
    return 1;
  if (!c->net.topo->follows(k))
    return 0;
  dlock__stat_add(&c->stats, DLOCK__ST_REDIRECTS, 1);
  return 1;
}

static int send_first(dlock_client *c, dlock__dconn *dc, const dlock__req *req,
                      int64_t deadline, char *why, size_t n) {
  int rc = dlock__buf_add(&dc->hello, req->cmd.p, req->cmd.len);
  if (rc != DLOCK_OK) {
    snprintf(why, n, "out of memory");
    return rc;
  }
  rc = send_all(c, dc, dc->hello.p, dc->hello.len, deadline, why, n);
  hello_wipe(dc);
  return rc;
}

/* The outcomes of a round trip beside DLOCK_OK and the errors. */
#define ROUND_TRIP_UNSENT 1 /* not done: the engine is to make the call */

/* req's round trip on dc (NOSCRIPT answered by resending as EVAL, as the
 * engine does). DLOCK_OK with *reply (an error reply included), an error
 * with req->errmsg, or ROUND_TRIP_UNSENT. */
static int round_trip(dlock_client *c, dlock__dconn *dc, dlock__req *req,
                      redisReply **reply, int *broken) {
  int64_t start = dlock__now_us();
  int64_t deadline = start + c->opts.command_timeout_ms * 1000;
  dlock__poll_probe probe;
  int64_t spin = dlock__poll_begin(c, alone(c), &probe);
  char *why = req->errmsg;
  size_t n = sizeof req->errmsg;
  int rc;
  req->written = 1; /* from here on it may have run */
  if (dc->hello.len > 0)
    rc = send_first(c, dc, req, deadline, why, n);
  else if (dc->later.len > 0)
    rc = send_behind_later(c, dc, req, deadline, why, n);
  else
    rc = send_all(c, dc, req->cmd.p, req->cmd.len, deadline, why, n);
  if (rc == DLOCK_OK)
    rc = read_reply(c, dc, deadline, spin, reply, why, n);
  if (rc == DLOCK_OK && dc->refused) {
    *broken = 1; /* and the pool backs off (give_back) */
    if ((*reply)->type != REDIS_REPLY_ERROR)
      return DLOCK_OK; /* it ran all the same: that is the call's outcome */
    freeReplyObject(*reply); /* refused too: the engine says why */
    *reply = NULL;
    why[0] = '\0';
    return ROUND_TRIP_UNSENT;
  }
  if (rc == DLOCK_OK && dlock__classify(*reply) == DLOCK__C_NOSCRIPT) {
    freeReplyObject(*reply);
    *reply = NULL;
    if (dlock__req_to_eval(req) != DLOCK_OK) {
      snprintf(why, n, "out of memory");
      return DLOCK_ENOMEM;
    }
    rc = send_all(c, dc, req->cmd.p, req->cmd.len, deadline, why, n);
    if (rc == DLOCK_OK)
      rc = read_reply(c, dc, deadline, spin, reply, why, n);
  }
  /* an answer (to the EVALSHA or its EVAL) that the call did not run there,
   * which the engine follows (a slot that moved, a demoted master, a passing
   * refusal): it makes the call */
  if (rc == DLOCK_OK && engine_follows(c, *reply)) {
    freeReplyObject(*reply); /* not run there: the engine follows it */
    *reply = NULL;
    why[0] = '\0';
    return ROUND_TRIP_UNSENT;
  }
  if (rc != DLOCK_OK) {
    *broken = 1;
    return rc;
  }
  dlock__poll_rtt(c, dlock__now_us() - start);
  dlock__poll_end(c, &probe);
  if (req->ack_wanted && (*reply)->type != REDIS_REPLY_ERROR &&
      send_ack(c, dc, req) != DLOCK_OK)
    *broken = 1; /* the reply is in hand: the call itself succeeded */
  if (req->drop.len > 0 && (*reply)->type != REDIS_REPLY_ERROR)
    drop_key(dc, &req->drop);
  return DLOCK_OK;
}

/* ---- riders: calls that share a connection -------------------------------- */

/* While every direct connection of a pool is busy, a call does not go to
 * the engine (two thread switches: caller to engine, engine to caller) but
 * rides one of the pool's shared connections, a lane: DLOCK__LANE_RIDERS
 * riders under way open a lane, up to DLOCK__LANES, and a thread keeps to
 * its seat's lane. A rider queues its command; one rider at a time drives
 * the lane: it writes every command queued (in one write, the kept latch
 * DELs in front), reads replies in order and hands each to its rider (one
 * wake-up each), writing what was queued meanwhile before it reads again;
 * once its own reply is in, the driving passes to the oldest rider
 * left. Many riders' calls reach the server in few reads and come back
 * in few, as on the engine's pipeline, without the engine's thread in
 * between; a lane of a few riders keeps the chain of wake-ups behind one
 * read short (measured in docs/performance.md: 16 threads did 1.2-1.6x
 * the pairs of 16 connections as four lanes, 0.8x as one). Plain
 * connections only (a TLS session would be driven the same way, but is
 * not measured yet), and no call that waits for replicas or the disk
 * after its reply (the engine does those). */

static void rider_push(dlock__rider **first, dlock__rider **last,
                       dlock__rider *r) {
  r->next = NULL;
  if (*last)
    (*last)->next = r;
  else
    *first = r;
  *last = r;
}

static dlock__rider *rider_pop(dlock__rider **first, dlock__rider **last) {
  dlock__rider *r = *first;
  if (r) {
    *first = r->next;
    if (*first == NULL)
      *last = NULL;
  }
  return r;
}

/* Hand r its outcome (the lane's mu held); the driver me needs no
 * wake-up. */
static void rider_done(dlock__rider *r, const dlock__rider *me, int status,
                       redisReply *reply, const char *why) {
  r->status = status;
  r->reply = reply;
  if (status != DLOCK_OK && why)
    snprintf(r->why, r->n, "%s", why);
  r->state = RIDE_DONE;
  if (r != me)
    sem_post(&r->wake);
}

/* The lane's connection broke (its mu held): every rider fails (those
 * whose command was not written yet go to the engine), the connection is
 * let go; it is closed by the caller (*gone). */
static void lane_fail(dlock__lane *l, const dlock__rider *me, const char *why,
                      dlock__dconn **gone) {
  dlock__rider *r;
  while ((r = rider_pop(&l->sent, &l->sent_last)) != NULL)
    rider_done(r, me, DLOCK_EIO, NULL, why);
  while ((r = rider_pop(&l->queued, &l->queued_last)) != NULL)
    rider_done(r, me, ROUND_TRIP_UNSENT, NULL, NULL);
  *gone = l->conn;
  l->conn = NULL;
}

static void shared_close(dlock_client *c, dlock__dconn *dc) {
  if (dc == NULL)
    return;
  pthread_mutex_lock(&c->direct.mu);
  busy_del(dc->pool, dc);
  pthread_mutex_unlock(&c->direct.mu);
  dconn_close(dc);
}

/* The lane's next write (its mu held): the handshake of a new connection,
 * the latch DELs kept, then the queued commands, which are sent from
 * now on. DLOCK_OK, or DLOCK_ENOMEM (nothing taken). */
static int lane_gather(dlock__lane *l) {
  dlock__dconn *dc = l->conn;
  dlock__buf *b = &l->out;
  b->len = 0;
  int rc = DLOCK_OK;
  if (dc->hello.len > 0)
    rc = dlock__buf_add(b, dc->hello.p, dc->hello.len);
  if (rc == DLOCK_OK && dc->later.len > 0)
    rc = dlock__buf_add(b, dc->later.p, dc->later.len);
  for (dlock__rider *r = l->queued; r && rc == DLOCK_OK; r = r->next)
    rc = dlock__buf_add(b, r->cmd, r->len);
  if (rc != DLOCK_OK)
    return rc;
  hello_wipe(dc);
  dc->discard += dc->later_n;
  dc->later_n = 0;
  dc->later.len = 0;
  dlock__rider *r;
  while ((r = rider_pop(&l->queued, &l->queued_last)) != NULL)
    rider_push(&l->sent, &l->sent_last, r);
  return DLOCK_OK;
}

/* Write what the lane holds to write (its mu held on entry and exit). A
 * failed write shuts the connection down: the read that follows finds it
 * broken and fails every rider. */
static void lane_write(dlock_client *c, dlock__lane *l, int64_t deadline_us) {
  char why[1024];
  if (lane_gather(l) != DLOCK_OK) {
    shutdown(l->conn->s.fd, SHUT_RDWR); /* out of memory: they all fail */
    return;
  }
  if (l->out.len == 0)
    return;
  pthread_mutex_unlock(&l->mu);
  if (send_all(c, l->conn, l->out.p, l->out.len, deadline_us, why,
               sizeof why) != DLOCK_OK)
    shutdown(l->conn->s.fd, SHUT_RDWR);
  pthread_mutex_lock(&l->mu);
}

/* Read one reply, then those parsed with it, to their riders (the lane's
 * mu held on entry and exit; a rider's reply is awaited). 0, or -1 when
 * the connection failed (*gone: to close). */
static int lane_read(dlock_client *c, dlock__lane *l, const dlock__rider *me,
                     dlock__dconn **gone) {
  dlock__dconn *dc = l->conn;
  char why[1024];
  redisReply *x = NULL;
  int64_t deadline = l->sent->deadline_us;
  pthread_mutex_unlock(&l->mu);
  /* parsed already, or (nothing is) sleep in recv until it comes */
  int rc = read_reply(c, dc, deadline, 0, &x, why, sizeof why);
  pthread_mutex_lock(&l->mu);
  if (rc == DLOCK_OK && dc->refused) { /* its AUTH, SELECT or SETNAME: the
                                          server changed since the engine
                                          connected (the engine says how) */
    freeReplyObject(x);
    rc = DLOCK_EIO;
    say(c, dc, why, sizeof why, "the server refused the handshake");
  }
  while (rc == DLOCK_OK && x != NULL && l->sent != NULL) {
    rider_done(rider_pop(&l->sent, &l->sent_last), me, DLOCK_OK, x, NULL);
    rc = pump(c, dc, 0, &x, why, sizeof why); /* parsed, not read */
  }
  if (rc == DLOCK_OK && x != NULL) { /* a reply nobody asked for */
    freeReplyObject(x);
    rc = DLOCK_EIO;
    say(c, dc, why, sizeof why, "a reply to no command");
  }
  if (rc == DLOCK_OK)
    return 0;
  lane_fail(l, me, why, gone);
  return -1;
}

/* Drive the lane until me's reply is in (its mu held on entry and exit),
 * then pass the driving on. */
static void lane_drive(dlock_client *c, dlock__lane *l, dlock__rider *me) {
  dlock__dconn *gone = NULL;
  while (me->state != RIDE_DONE) {
    if (l->queued)
      lane_write(c, l, me->deadline_us);
    if (lane_read(c, l, me, &gone) != 0)
      break;
  }
  dlock__rider *next = l->sent ? l->sent : l->queued;
  if (next) {
    next->state = RIDE_DRIVE;
    sem_post(&next->wake);
  } else {
    l->driving = 0;
  }
  if (gone) {
    pthread_mutex_unlock(&l->mu);
    shared_close(c, gone);
    pthread_mutex_lock(&l->mu);
  }
}

/* The lane's connection (its mu held), opened now when there is none:
 * NULL when it cannot be (the engine then makes the call). */
static dlock__dconn *lane_conn(dlock_client *c, dlock__dpool *p,
                               dlock__lane *l) {
  if (l->conn && !l->driving && !still_open(l->conn)) {
    dlock__dconn *gone = l->conn; /* idle, and closed meanwhile (a restart,
                                     CLIENT KILL, a move) */
    l->conn = NULL;
    pthread_mutex_unlock(&l->mu);
    shared_close(c, gone);
    pthread_mutex_lock(&l->mu);
  }
  if (l->conn || l->opening)
    return l->conn;
  l->opening = 1;
  pthread_mutex_unlock(&l->mu);
  int moved;
  dlock__dconn *dc = dconn_open(c, p, &moved); /* on the busy list */
  pthread_mutex_lock(&l->mu);
  l->opening = 0;
  if (dc != NULL)
    l->conn = dc;
  else if (!moved)
    back_off(c, p); /* the engine says what is wrong */
  return dc;
}

/* The lane of the calling thread: threads take seats in turn, and the
 * riders under way decide how many lanes are open. */
static dlock__lane *lane_for(dlock_client *c, dlock__dpool *p) {
  static atomic_uint seats;
  static _Thread_local unsigned seat;
  if (seat == 0)
    seat = atomic_fetch_add_explicit(&seats, 1, memory_order_relaxed) + 1;
  int riders = atomic_load_explicit(&c->direct.piped, memory_order_relaxed);
  int n = (riders + DLOCK__LANE_RIDERS - 1) / DLOCK__LANE_RIDERS;
  n = n < 1 ? 1 : n > DLOCK__LANES ? DLOCK__LANES : n;
  return &p->lanes[seat % (unsigned)n];
}

/* The DEL of a release's latch, kept to go in front of the lane's next
 * write (the sweep sends it when the lane stays idle). */
static void ride_drop(dlock_client *c, dlock__lane *l, const dlock__buf *key) {
  pthread_mutex_lock(&l->mu);
  if (l->conn != NULL)
    drop_key(l->conn, key);
  pthread_mutex_unlock(&l->mu);
  sweep_due(c);
}

/* Engine thread, the sweep: the latch DELs of idle lanes are written
 * (and their answers left to the next driver). 1 when a lane that kept
 * some was being driven (the sweep comes again). */
static int lanes_sweep(dlock_client *c) {
  int again = 0;
  for (int i = 0; i < c->direct.npools; i++) {
    for (int k = 0; k < DLOCK__LANES; k++) {
      dlock__lane *l = &c->direct.pools[i].lanes[k];
      pthread_mutex_lock(&l->mu);
      if (l->conn && l->conn->later.len > 0 && l->driving) {
        again = 1;
      } else if (l->conn && l->conn->later.len > 0) {
        l->driving = 1; /* riders that come meanwhile queue */
        lane_write(c, l, dlock__now_us() + c->opts.command_timeout_ms * 1000);
        if (l->queued) { /* they drive on */
          l->queued->state = RIDE_DRIVE;
          sem_post(&l->queued->wake);
        } else {
          l->driving = 0;
        }
      }
      pthread_mutex_unlock(&l->mu);
    }
  }
  return again;
}

/* One ride of req on lane l: DLOCK_OK with *reply, an error with
 * req->errmsg, ROUND_TRIP_UNSENT (not written: the engine makes it), or
 * -1 when there is no connection (the engine makes the call). */
static int ride_once(dlock_client *c, dlock__dpool *p, dlock__lane *l,
                     dlock__req *req, dlock__rider *me, redisReply **reply) {
  pthread_mutex_lock(&l->mu);
  dlock__dconn *dc = l->driving ? l->conn : lane_conn(c, p, l);
  if (dc == NULL) {
    pthread_mutex_unlock(&l->mu);
    return -1;
  }
  me->state = RIDE_WAIT;
  me->cmd = req->cmd.p;
  me->len = req->cmd.len;
  me->deadline_us = dlock__now_us() + c->opts.command_timeout_ms * 1000;
  req->written = 1; /* from here on it may have run */
  rider_push(&l->queued, &l->queued_last, me);
  if (!l->driving) {
    l->driving = 1;
    lane_drive(c, l, me);
  } else { /* woken without the lane's mu unless it is to drive */
    pthread_mutex_unlock(&l->mu);
    while (sem_wait(&me->wake) != 0 || me->state == RIDE_WAIT)
      ; /* EINTR */
    if (me->state == RIDE_DONE) {
      *reply = me->reply;
      return me->status;
    }
    pthread_mutex_lock(&l->mu);
    lane_drive(c, l, me);
  }
  pthread_mutex_unlock(&l->mu);
  *reply = me->reply;
  return me->status;
}

/* req's round trip as a rider on slot's pool: as round_trip's outcomes
 * (DLOCK_OK with *reply, an error with req->errmsg, ROUND_TRIP_UNSENT),
 * or -1 when it cannot ride (the engine makes the call). */
static int ride(dlock_client *c, dlock__req *req, redisReply **reply) {
  dlock__direct *d = &c->direct;
  if (c->net.tls || req->ack_wanted || atomic_load(&d->waiting) != 0)
    return -1; /* (a lock's waiter may have come since begin() looked) */
  pthread_mutex_lock(&d->mu);
  dlock__dpool *p = pool_for(c, req->slot);
  int ok = p && !d->closed && atomic_load(&p->link.ready) &&
           dlock__now_ms() >= p->down_until_ms;
  pthread_mutex_unlock(&d->mu);
  if (!ok)
    return -1;
  dlock__lane *l = lane_for(c, p);
  dlock__rider me = {.why = req->errmsg, .n = sizeof req->errmsg};
  sem_init(&me.wake, 0, 0);
  int rc = ride_once(c, p, l, req, &me, reply);
  if (rc == DLOCK_OK && dlock__classify(*reply) == DLOCK__C_NOSCRIPT) {
    freeReplyObject(*reply); /* once more as EVAL */
    *reply = NULL;
    if (dlock__req_to_eval(req) != DLOCK_OK) {
      snprintf(req->errmsg, sizeof req->errmsg, "out of memory");
      rc = DLOCK_ENOMEM;
    } else {
      rc = ride_once(c, p, l, req, &me, reply);
    }
  }
  sem_destroy(&me.wake);
  if (rc == DLOCK_EIO)
    back_off(c, p); /* the server is in trouble: the engine knows how to wait */
  if (rc == DLOCK_OK && engine_follows(c, *reply)) {
    freeReplyObject(*reply); /* not run there: the engine follows it */
    *reply = NULL;
    req->errmsg[0] = '\0';
    return ROUND_TRIP_UNSENT;
  }
  if (rc == DLOCK_OK && req->drop.len > 0 && (*reply)->type != REDIS_REPLY_ERROR)
    ride_drop(c, l, &req->drop);
  return rc;
}

/* A connection for one call when the direct path takes calls now (counted
 * as under way until end()), or NULL: *full set when that is because
 * limit calls are under way (the call may ride). */
static dlock__dconn *begin(dlock_client *c, int slot, int limit, int *full) {
  dlock__direct *d = &c->direct;
  *full = 0;
  if (c->opts.direct_conns == 0)
    return NULL;
  /* Many calls under way at once: they ride a shared connection (ride()),
   * pipelined with fewer writes and reads on both sides than as many
   * connections would make (measured in docs/performance.md). A thread of
   * the client waiting for a lock: the object is contended, and its
   * waiters' tries (sent early by the engine on a wake-up) must not be
   * overtaken by new tries on faster connections (a waiting writer would
   * starve behind new readers; measured). The
   * engine's connection to the server down (take): the server is in
   * trouble, and the engine knows how to wait for it; or, on a cluster, not
   * connected yet: the first call to each master goes through the engine,
   * which connects. */
  dlock__dconn *dc = NULL;
  if (atomic_load(&d->waiting) != 0)
    return NULL;
  if (atomic_load(&d->piped) + atomic_load(&d->active) >= limit)
    *full = 1;
  else
    dc = take(c, slot, limit, full);
  if (dc == NULL)
    return NULL; /* a rider when full, else the engine's */
  atomic_fetch_add(&d->active, 1);
  return dc;
}

static void end(dlock_client *c, dlock__dconn *dc, int broken) {
  dlock__dpool *p = dc->pool;
  atomic_fetch_sub(&c->direct.active, 1);
  give_back(c, dc, broken);
  if (broken) /* the server is in trouble: the engine knows how to wait */
    back_off(c, p);
}

int dlock__direct_call(dlock_client *c, dlock__req *req, redisReply **reply,
                       int *status, int64_t *sent_ms) {
  if (req->script < 0 || req->task || (c->net.topo->slotted && req->slot < 0))
    return 0; /* a cluster's keyless calls: the engine picks a node */
  int full;
  dlock__share_probe probe;
  dlock__dconn *dc = begin(c, req->slot, dlock__share_begin(c, &probe), &full);
  *sent_ms = dlock__now_ms();
  *reply = NULL;
  int rc;
  if (dc != NULL) {
    int broken = 0;
    rc = round_trip(c, dc, req, reply, &broken);
    end(c, dc, broken);
  } else {
    rc = -1; /* not full: the engine makes it (it knows how to wait) */
    if (full) {
      atomic_fetch_add(&c->direct.piped, 1);
      rc = ride(c, req, reply);
      atomic_fetch_sub(&c->direct.piped, 1);
    }
    if (rc == -1) {
      atomic_fetch_add(&c->direct.fallbacks, 1);
      return 0;
    }
    atomic_fetch_add(&c->direct.rides, 1);
  }
  if (rc == DLOCK_OK)
    dlock__share_end(c, &probe);
  if (rc == ROUND_TRIP_UNSENT) {
    req->written = 0; /* it did not run: the engine makes it */
    atomic_fetch_add(&c->direct.fallbacks, 1);
    return 0;
  }
  atomic_fetch_add(&c->direct.calls, 1);
  dlock__stat_add(&c->stats, DLOCK__ST_COMMANDS, 1);
  dlock__stat_add(&c->stats, DLOCK__ST_DIRECT, 1);
  dlock__buf_free(&req->cmd);
  dlock__buf_free(&req->drop);
  if (rc != DLOCK_OK && atomic_load(&c->closed)) {
    rc = DLOCK_ECLOSED; /* dlock__direct_close shut the socket down */
    snprintf(req->errmsg, sizeof req->errmsg, "client closed");
  }
  *status = rc;
  return 1;
}

/* Empty p (d->mu held): the calls under way fail (their sockets shut
 * down: their threads close them), and its idle connections are handed
 * back as a list to close. */
static dlock__dconn *drain_locked(dlock__dpool *p) {
  for (dlock__dconn *dc = p->busy; dc; dc = dc->next)
    shutdown(dc->s.fd, SHUT_RDWR);
  dlock__dconn *idle = p->idle;
  p->idle = NULL;
  for (dlock__dconn *dc = idle; dc; dc = dc->next)
    p->open--;
  return idle;
}

static void close_all(dlock__dconn *list) {
  while (list) {
    dlock__dconn *next = list->next;
    dconn_close(list);
    list = next;
  }
}

void dlock__direct_retarget(dlock_client *c, int i, const char *host, int port) {
  dlock__direct *d = &c->direct;
  pthread_mutex_lock(&d->mu);
  dlock__dpool *p = &d->pools[i];
  snprintf(p->host_buf, sizeof p->host_buf, "%s", host);
  p->host = p->host_buf;
  p->port = port;
  p->addr_len = 0;
  p->gen++;
  /* Calls under way on the old server fail now, as the engine's in flight
   * there do: one that went on there could take a lock the new master
   * does not know of. */
  dlock__dconn *idle = drain_locked(p);
  pthread_mutex_unlock(&d->mu);
  close_all(idle);
}

/* The kept latch DELs of list's connections, sent without waiting (a
 * closing client), then the connections closed. */
static void send_and_close(dlock__dconn *list) {
  for (dlock__dconn *dc = list; dc; dc = dc->next) {
    char why[256]; /* d->mu held: not say(), which takes it */
    if (dc->later.len > 0)
      dlock__sock_send(&dc->s, dc->later.p, dc->later.len, dlock__now_us(),
                       why, sizeof why);
  }
  close_all(list);
}

/* A closing client's idle lanes send the latch DELs they kept, without
 * waiting (their connections are shut down next). */
static void lanes_flush(dlock_client *c) {
  for (int i = 0; i < c->direct.npools; i++) {
    for (int k = 0; k < DLOCK__LANES; k++) {
      dlock__lane *l = &c->direct.pools[i].lanes[k];
      char why[256];
      pthread_mutex_lock(&l->mu);
      if (l->conn && !l->driving && l->conn->later.len > 0)
        dlock__sock_send(&l->conn->s, l->conn->later.p, l->conn->later.len,
                         dlock__now_us(), why, sizeof why);
      pthread_mutex_unlock(&l->mu);
    }
  }
}

void dlock__direct_close(dlock_client *c) {
  dlock__direct *d = &c->direct;
  lanes_flush(c);
  pthread_mutex_lock(&d->mu);
  d->closed = 1;
  for (int i = 0; i < d->npools; i++)
    send_and_close(drain_locked(&d->pools[i]));
  pthread_mutex_unlock(&d->mu);
}

void dlock__direct_free(dlock_client *c) {
  dlock__direct_close(c); /* a client that never got as far as closing */
  for (int i = 0; i < c->direct.npools; i++) { /* no rider is left */
    for (int k = 0; k < DLOCK__LANES; k++) {
      dlock__lane *l = &c->direct.pools[i].lanes[k];
      shared_close(c, l->conn);
      l->conn = NULL;
      dlock__buf_free(&l->out);
      pthread_mutex_destroy(&l->mu);
    }
  }
  pthread_mutex_destroy(&c->direct.mu);
  dlock__poll_free(&c->direct.poll);
  free(c->direct.pools);
}
