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

#include "base/list.h"
#include "direct/direct.h"
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
    return dlock__oom();
  d->npools = n;
  for (int i = 0; i < n; i++) {
    atomic_init(&d->pools[i].link.ready, 0);
    atomic_init(&d->pools[i].link.replicas, 0);
    dlock__lanes_init(&d->pools[i]);
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
void dlock__dconn_say(dlock_client *c, const dlock__dconn *dc, char *why,
                      size_t n, const char *fmt, ...) {
  char addr[300];
  pthread_mutex_lock(&c->direct.mu); /* a sentinel's master may move */
  if (dc->pool->host)
    snprintf(addr, sizeof addr, "%s:%d", dc->pool->host, dc->pool->port);
  else
    dlock__net_where(&c->net, addr, sizeof addr);
  pthread_mutex_unlock(&c->direct.mu);
  int k = snprintf(why, n, "%s (direct connection): ", addr);
  if (k < 0 || (size_t)k >= n)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why + k, n - (size_t)k, fmt, ap);
  va_end(ap);
}

static void busy_add(dlock__dpool *p, dlock__dconn *dc);
static void busy_del(dlock__dpool *p, dlock__dconn *dc);

void dlock__dconn_close(dlock__dconn *dc) {
  if (dc == NULL)
    return;
  dlock__dconn_hello_wipe(dc);
  dlock__buf_free(&dc->later);
  dlock__sock_close(&dc->s);
  free(dc);
}

/* Write all of p. DLOCK_OK, or DLOCK_EIO with why. */
int dlock__dconn_send(dlock_client *c, dlock__dconn *dc, const char *p,
                      size_t len, int64_t deadline_us, char *why, size_t n) {
  char msg[256];
  if (dlock__sock_send(&dc->s, p, len, deadline_us, msg, sizeof msg) ==
      DLOCK_OK)
    return DLOCK_OK;
  dlock__dconn_say(c, dc, why, n, "%s", msg);
  return DLOCK_EIO;
}

/* A socket read that failed (dlock__sock_take's k < 0; what: its words):
 * why says so, DLOCK_EIO. */
static int take_failed(dlock_client *c, dlock__dconn *dc, ssize_t k,
                       const char *what, char *why, size_t n) {
  if (k == -1)
    dlock__dconn_say(c, dc, why, n, "connection closed by the server");
  else if (k == -3)
    dlock__dconn_say(c, dc, why, n, "reply parse error: %s",
                     dc->s.reader->errstr);
  else
    dlock__dconn_say(c, dc, why, n, "%s", what);
  return k == -3 && dc->s.reader->err == REDIS_ERR_OOM ? DLOCK_ENOMEM : DLOCK_EIO;
}

/* Take what the socket has, without blocking, and parse it: DLOCK_OK with
 * *out the next reply (the dc->discard ones skipped), or NULL when none is
 * complete yet; DLOCK_EIO with why. */
int dlock__dconn_pump(dlock_client *c, dlock__dconn *dc, int read_socket,
                      redisReply **out, char *why, size_t n) {
  *out = NULL;
  for (;;) {
    void *r = NULL;
    if (redisReaderGetReply(dc->s.reader, &r) != REDIS_OK) {
      dlock__dconn_say(c, dc, why, n, "reply parse error: %s",
                       dc->s.reader->errstr);
      return dc->s.reader->err == REDIS_ERR_OOM ? DLOCK_ENOMEM : DLOCK_EIO;
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
int dlock__dconn_read(dlock_client *c, dlock__dconn *dc, int64_t deadline_us,
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
    int rc = dlock__dconn_pump(c, dc, !wait_first, out, why, n);
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
      dlock__dconn_say(c, dc, why, n,
                       "no reply within the command timeout (%lld ms)",
                       (long long)c->opts.command_timeout_ms);
      return DLOCK_EIO;
    }
    wait_first = 0;
    int w = dlock__sock_wait(dc->s.fd, POLLIN, deadline_us);
    if (w == DLOCK_ETIMEDOUT) {
      dlock__dconn_say(c, dc, why, n,
                       "no reply within the command timeout (%lld ms)",
                       (long long)c->opts.command_timeout_ms);
      return DLOCK_EIO;
    }
    if (w != DLOCK_OK) {
      dlock__dconn_say(c, dc, why, n, "read failed: %s", strerror(errno));
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
void dlock__dconn_hello_wipe(dlock__dconn *dc) {
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
dlock__dconn *dlock__dconn_open(dlock_client *c, dlock__dpool *p, int *moved) {
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
    dlock__dconn_close(dc);
    return NULL;
  }
  dlock__direct *d = &c->direct;
  pthread_mutex_lock(&d->mu);
  *moved = gen != p->gen || d->closed;
  if (!*moved)
    busy_add(p, dc);
  pthread_mutex_unlock(&d->mu);
  if (*moved) {
    dlock__dconn_close(dc);
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
    dlock__dconn_close(dc); /* the engine's connection says what is wrong */
    return NULL;
  }
  return dc;
}

/* An idle connection the server may have closed meanwhile (a restart, a
 * CLIENT KILL, its idle timeout): 1 when it is still open. What arrived
 * while it was idle (the answer to a latch's DEL) is read first: the end
 * of the stream may be behind it. */
int dlock__dconn_alive(dlock__dconn *dc) {
  char why[1024];
  ssize_t k;
  while ((k = dlock__sock_take(&dc->s, why, sizeof why)) > 0) {
  }
  return k == 0;
}

/* ---- the pool ------------------------------------------------------------- */

static void busy_add(dlock__dpool *p, dlock__dconn *dc) {
  DLOCK__LIST_PUSH(p->busy, dc, prev, next);
}

static void busy_del(dlock__dpool *p, dlock__dconn *dc) {
  DLOCK__LIST_UNLINK(p->busy, dc, prev, next);
}

/* Hand dc back: to the idle stack (the most recently used is taken first:
 * its buffers are warm), or closed when broken or the client is closing. */
static void put_back(dlock_client *c, dlock__dconn *dc, int broken) {
  dlock__direct *d = &c->direct;
  dlock__dpool *p = dc->pool;
  pthread_mutex_lock(&d->mu);
  busy_del(p, dc);
  if (broken || d->closed || dc->gen != p->gen) {
    p->open--;
    pthread_mutex_unlock(&d->mu);
    dlock__dconn_close(dc);
    return;
  }
  dc->next = p->idle;
  p->idle = dc;
  p->backoff_ms = 0; /* a round trip went well */
  int kept = dc->later.len > 0;
  pthread_mutex_unlock(&d->mu);
  if (kept)
    dlock__direct_sweep_due(c);
}

/* Calls to p's server go to the engine for a while: it could not be
 * reached or refused the handshake (d->mu held). */
static void back_off_locked(dlock__dpool *p) {
  p->backoff_ms = dlock__backoff_next(p->backoff_ms);
  p->down_until_ms = dlock__now_ms() + p->backoff_ms;
}

void dlock__dpool_back_off(dlock_client *c, dlock__dpool *p) {
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

/* Whether calls may go to p's server directly (d->mu held): the client
 * open, the engine's connection there up, and no backoff after a failed
 * open (the clock is read only while one is set). */
static int usable(const dlock__direct *d, const dlock__dpool *p) {
  return !d->closed && atomic_load(&p->link.ready) &&
         (p->down_until_ms == 0 || dlock__now_ms() >= p->down_until_ms);
}

dlock__dpool *dlock__dpool_ready(dlock_client *c, int slot) {
  dlock__direct *d = &c->direct;
  pthread_mutex_lock(&d->mu);
  dlock__dpool *p = pool_for(c, slot);
  if (p && !usable(d, p))
    p = NULL;
  pthread_mutex_unlock(&d->mu);
  return p;
}

void dlock__dconn_discard(dlock_client *c, dlock__dconn *dc) {
  if (dc == NULL)
    return;
  pthread_mutex_lock(&c->direct.mu);
  busy_del(dc->pool, dc);
  pthread_mutex_unlock(&c->direct.mu);
  dlock__dconn_close(dc);
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
    if (p == NULL || !usable(d, p) || (dc == NULL && p->open >= limit)) {
      *full = p && dc == NULL && p->open >= limit;
      pthread_mutex_unlock(&d->mu);
      return NULL;
    }
    if (dc) {
      p->idle = dc->next;
      busy_add(p, dc);
      pthread_mutex_unlock(&d->mu);
      if (dlock__dconn_alive(dc))
        return dc;
      put_back(c, dc, 1);
      continue;
    }
    p->open++;
    pthread_mutex_unlock(&d->mu);
    int moved;
    dc = dlock__dconn_open(c, p, &moved); /* on the busy list */
    pthread_mutex_lock(&d->mu);
    if (dc == NULL || d->closed || dc->gen != p->gen) {
      p->open--;
      if (dc == NULL && !moved)
        back_off_locked(p);
      if (dc)
        busy_del(p, dc);
      pthread_mutex_unlock(&d->mu);
      dlock__dconn_close(dc);
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
  int rc =
      dlock__dconn_send(c, dc, dc->later.p, dc->later.len, deadline_us, why, n);
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
  int again = dlock__lanes_sweep(c);
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
    put_back(c, dc, send_later(c, dc, deadline, why, sizeof why) != DLOCK_OK);
  }
  if (again)
    dlock__direct_sweep_due(c);
}

static void sweep_start(dlock_client *c, dlock__req *req) {
  if (!c->net.stopping)
    uv_timer_start(&c->sweep_timer, on_sweep, SWEEP_MS, 0);
  dlock__req_finish(req, NULL, DLOCK_OK, NULL);
}

/* Latch DELs were kept: the sweep is armed unless it is already. */
void dlock__direct_sweep_due(dlock_client *c) {
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
void dlock__dconn_keep_del(dlock__dconn *dc, const dlock__buf *key) {
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
    rc = dlock__dconn_send(c, dc, b.p, b.len, deadline, why, sizeof why);
  dlock__buf_free(&b);
  for (int i = 0; i < n && rc == DLOCK_OK; i++) {
    redisReply *r = NULL;
    rc = dlock__dconn_read(c, dc, deadline, 0, &r, why, sizeof why);
    if (rc == DLOCK_OK)
      dlock__ack_answer(req, i, r);
    if (r)
      freeReplyObject(r);
  }
  return rc == DLOCK_ENOMEM ? DLOCK_OK : rc;
}

/* A new connection's first write: its handshake and the call together.
 * The handshake's answers are read (and checked: dc->refused) before the
 * call's, by dlock__dconn_pump(). */
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
int dlock__direct_followed(dlock_client *c, const redisReply *r) {
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
  rc = dlock__dconn_send(c, dc, dc->hello.p, dc->hello.len, deadline, why, n);
  dlock__dconn_hello_wipe(dc);
  return rc;
}

/* req's round trip on dc (NOSCRIPT answered by resending as EVAL, as the
 * engine does). DLOCK_OK with *reply (an error reply included), an error
 * with req->errmsg, or DLOCK__UNSENT. */
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
    rc = dlock__dconn_send(c, dc, req->cmd.p, req->cmd.len, deadline, why, n);
  if (rc == DLOCK_OK)
    rc = dlock__dconn_read(c, dc, deadline, spin, reply, why, n);
  if (rc == DLOCK_OK && dc->refused) {
    *broken = 1; /* and the pool backs off (put_back) */
    if ((*reply)->type != REDIS_REPLY_ERROR)
      return DLOCK_OK; /* it ran all the same: that is the call's outcome */
    freeReplyObject(*reply); /* refused too: the engine says why */
    *reply = NULL;
    why[0] = '\0';
    return DLOCK__UNSENT;
  }
  if (rc == DLOCK_OK && dlock__classify(*reply) == DLOCK__C_NOSCRIPT) {
    freeReplyObject(*reply);
    *reply = NULL;
    if (dlock__req_to_eval(req) != DLOCK_OK) {
      snprintf(why, n, "out of memory");
      return dlock__oom();
    }
    rc = dlock__dconn_send(c, dc, req->cmd.p, req->cmd.len, deadline, why, n);
    if (rc == DLOCK_OK)
      rc = dlock__dconn_read(c, dc, deadline, spin, reply, why, n);
  }
  /* an answer (to the EVALSHA or its EVAL) that the call did not run there,
   * which the engine follows (a slot that moved, a demoted master, a passing
   * refusal): it makes the call */
  if (rc == DLOCK_OK && dlock__direct_followed(c, *reply)) {
    freeReplyObject(*reply); /* not run there: the engine follows it */
    *reply = NULL;
    why[0] = '\0';
    return DLOCK__UNSENT;
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
    dlock__dconn_keep_del(dc, &req->drop);
  return DLOCK_OK;
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
  put_back(c, dc, broken);
  if (broken) /* the server is in trouble: the engine knows how to wait */
    dlock__dpool_back_off(c, p);
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
      rc = dlock__ride(c, req, reply);
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
  if (rc == DLOCK__UNSENT) {
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
    dlock__dconn_close(list);
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

void dlock__dconn_flush_kept(dlock__dconn *dc) {
  char why[256]; /* no dlock__dconn_say(): callers may hold d->mu */
  if (dc->later.len > 0)
    dlock__sock_send(&dc->s, dc->later.p, dc->later.len, dlock__now_us(), why,
                     sizeof why);
}

/* The kept latch DELs of list's connections, sent without waiting (a
 * closing client), then the connections closed. */
static void send_and_close(dlock__dconn *list) {
  for (dlock__dconn *dc = list; dc; dc = dc->next)
    dlock__dconn_flush_kept(dc);
  close_all(list);
}

void dlock__direct_close(dlock_client *c) {
  dlock__direct *d = &c->direct;
  dlock__lanes_flush(c);
  pthread_mutex_lock(&d->mu);
  d->closed = 1;
  for (int i = 0; i < d->npools; i++)
    send_and_close(drain_locked(&d->pools[i]));
  pthread_mutex_unlock(&d->mu);
}

void dlock__direct_free(dlock_client *c) {
  dlock__direct_close(c); /* a client that never got as far as closing */
  for (int i = 0; i < c->direct.npools; i++) /* no rider is left */
    dlock__lanes_free(c, &c->direct.pools[i]);
  pthread_mutex_destroy(&c->direct.mu);
  dlock__poll_free(&c->direct.poll);
  free(c->direct.pools);
}

/* ---- the net's hooks (net/conn.h) ---------------------------------------- */

dlock__link *dlock__direct_on_link(dlock__net *n, int i) {
  return &dlock__net_client(n)->direct.pools[i].link;
}

dlock__link *dlock__direct_on_node(dlock__net *n, int i, const char *host,
                                   int port) {
  return &dlock__direct_node(dlock__net_client(n), i, host, port)->link;
}

void dlock__direct_on_retarget(dlock__net *n, int i, const char *host,
                               int port) {
  dlock__direct_retarget(dlock__net_client(n), i, host, port);
}
