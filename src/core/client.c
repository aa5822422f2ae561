/* The client: opening (options, URI, identity, the first PING) and
 * closing, its reference count, and the owner ids every hold is named by.
 * Its engine thread is in engine.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>
#include <uuid/uuid.h>

#include "core/engine.h"
#include "direct/direct.h"
#include "net/sock.h"
#include "net/tls.h"
#include "net/topology.h"

/* ---- owner ids -------------------------------------------------------------- */

static _Thread_local uint64_t tl_thread_id;
static atomic_uint_fast64_t next_owner_id = 1;

uint64_t dlock_thread_id(void) {
  if (tl_thread_id == 0)
    tl_thread_id = atomic_fetch_add(&next_owner_id, 1);
  return tl_thread_id;
}

uint64_t dlock_owner_id_new(void) { return atomic_fetch_add(&next_owner_id, 1); }

/* ---- the client ------------------------------------------------------------- */

static void client_free(dlock_client *c) {
  const dlock__attachment *a = dlock__engine_attached();
  if (a && a->free)
    a->free(c);
  dlock__tls_ctx_free(c->net.tls);
  if (c->net.topo)
    c->net.topo->free(&c->net);
  dlock__direct_free(c);
  dlock__holds_free(c);
  dlock__map_free(&c->channels);
  dlock__uri_free(&c->uri);
  free(c->client_name);
  free((char *)c->opts.source_addr);
  pthread_mutex_destroy(&c->qmu);
  pthread_mutex_destroy(&c->hmu);
  pthread_mutex_destroy(&c->cmu);
  free(c);
}

/* What a client's net tells the engine and the direct path (net/conn.h). */
static const dlock__net_hooks hooks = {
    .live_done = dlock__engine_on_live_done,
    .sub_push = dlock__pubsub_on_reply,
    .sub_error = dlock__pubsub_on_error,
    .sub_ready = dlock__pubsub_on_ready,
    .sub_down = dlock__pubsub_on_down,
    .reconnected = dlock__engine_on_reconnected,
    .link = dlock__direct_on_link,
    .node = dlock__direct_on_node,
    .retarget = dlock__direct_on_retarget,
    .rehome = dlock__engine_on_rehome,
};

int dlock__client_slotted(const dlock_client *c) {
  return c->net.topo->slotted;
}

const char *dlock__publish_cmd(const dlock_client *c) {
  int sharded = atomic_load(&((dlock_client *)c)->net.sharded);
  return sharded ? "SPUBLISH" : "PUBLISH";
}

const char *dlock__client_where(const dlock_client *c, char *buf, size_t n) {
  return dlock__net_where(&c->net, buf, n);
}

/* CLIENT SETNAME's value: PREFIX:HOST:PID:CLIENT-ID, so an operator maps a
 * holder (CLIENT-ID:T) to a machine and a process. Malloc'd, or NULL. */
static char *connection_name(const char *prefix, const char *id) {
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
    snprintf(host, sizeof host, "unknown-host");
  for (char *p = host; *p; p++) /* a connection name has no spaces */
    if (*p <= ' ' || *p > '~')
      *p = '_';
  size_t n = strlen(prefix) + strlen(host) + strlen(id) + 32;
  char *name = malloc(n);
  if (name)
    snprintf(name, n, "%s:%s:%ld:%s", prefix, host, (long)getpid(), id);
  return name;
}

void dlock__client_ref(dlock_client *c) { atomic_fetch_add(&c->refs, 1); }

void dlock__client_unref(dlock_client *c) {
  if (atomic_fetch_sub(&c->refs, 1) == 1)
    client_free(c);
}

int dlock__client_closed(dlock_client *c) { return atomic_load(&c->closed); }

const dlock_client_opts *dlock__client_opts(const dlock_client *c) {
  return &c->opts;
}

const char *dlock_client_id(const dlock_client *c) { return c ? c->id : ""; }

size_t dlock__owner(const dlock_client *c, uint64_t owner_id, char *out) {
  size_t n = strlen(c->id); /* a UUID: 36 characters */
  memcpy(out, c->id, n);
  out[n++] = ':';
  return n + dlock__fmt_u64(out + n, owner_id);
}

static int check_opts(const dlock_client_opts *o) {
  if (o->connect_timeout_ms <= 0 || o->command_timeout_ms <= 0)
    return dlock__fail(DLOCK_EINVAL, "timeouts must be > 0 ms");
  if (o->watchdog_timeout_ms < 30)
    return dlock__fail(DLOCK_EINVAL, "watchdog_timeout_ms must be >= 30");
  if (o->direct_conns < 0 || o->direct_conns > DLOCK__DIRECT_MAX)
    return dlock__fail(DLOCK_EINVAL, "direct_conns must be 0 to %d",
                       DLOCK__DIRECT_MAX);
  if (o->spin_us < -1 || o->spin_us > 10000)
    return dlock__fail(DLOCK_EINVAL, "spin_us must be -1 (adaptive), 0 (never) "
                       "or up to 10000");
  if (o->replica_sync_ms < 0 || o->replica_sync_ms >= o->command_timeout_ms)
    return dlock__fail(DLOCK_EINVAL, "replica_sync_ms must be 0 (off) or "
                       "between 1 and command_timeout_ms - 1");
  if (o->replica_sync_all != 0 &&
      (o->replica_sync_all != 1 || o->replica_sync_ms == 0))
    return dlock__fail(DLOCK_EINVAL, "replica_sync_all must be 0 or 1, and 1 "
                       "only with replica_sync_ms");
  if (o->durable_ms < 0 || o->durable_ms >= o->command_timeout_ms ||
      o->durable_replicas < 0 ||
      o->durable_replicas > 1000 ||
      (o->durable_replicas > 0 && o->durable_ms == 0))
    return dlock__fail(DLOCK_EINVAL, "durable_ms must be 0 (off) or between 1 "
                       "and command_timeout_ms - 1, and durable_replicas 0 "
                       "to 1000 (with durable_ms)");
  if (o->replica_sync_ms + o->durable_ms >= o->command_timeout_ms)
    return dlock__fail(DLOCK_EINVAL, "replica_sync_ms + durable_ms must be "
                       "below command_timeout_ms (both wait on the server "
                       "within one call)");
  struct sockaddr_storage src;
  socklen_t srclen;
  if (o->source_addr && dlock__sock_source(o->source_addr, &src, &srclen) != 0)
    return dlock__fail(DLOCK_EINVAL, "source_addr must be an IPv4 or IPv6 "
                       "address, not \"%.100s\"", o->source_addr);
  if (o->max_hold_ms < 0)
    return dlock__fail(DLOCK_EINVAL, "max_hold_ms must be >= 0");
  if (o->completions != DLOCK_COMPLETE_ENGINE &&
      o->completions != DLOCK_COMPLETE_QUEUE)
    return dlock__fail(DLOCK_EINVAL, "completions must be DLOCK_COMPLETE_ENGINE "
                       "or DLOCK_COMPLETE_QUEUE");
  if (o->client_name && (strlen(o->client_name) == 0 ||
                         strcspn(o->client_name, " \r\n\t") !=
                             strlen(o->client_name)))
    return dlock__fail(DLOCK_EINVAL,
                       "client_name must be non-empty and without spaces");
  return DLOCK_OK;
}

/* The caller's options, of any accepted version, as the current version's
 * in *o (the fields an older version lacks get the defaults), checked. */
static int opts_current(const dlock_client_opts *opts, dlock_client_opts *o) {
  static const dlock_client_opts defaults = DLOCK_CLIENT_OPTS_INIT;
  /* what each accepted version holds: the fields before the next one's */
  static const size_t version_size[] = {
      0, offsetof(dlock_client_opts, share_engine),
      offsetof(dlock_client_opts, username),
      offsetof(dlock_client_opts, direct_conns),
      offsetof(dlock_client_opts, replica_sync_ms),
      offsetof(dlock_client_opts, sentinel_username),
      offsetof(dlock_client_opts, tls_ca_file),
      offsetof(dlock_client_opts, on_event),
      offsetof(dlock_client_opts, completions),
      offsetof(dlock_client_opts, durable_ms),
      offsetof(dlock_client_opts, replica_sync_all), sizeof(dlock_client_opts)};
  *o = defaults;
  if (opts == NULL)
    return DLOCK_OK;
  if (opts->version < 1 || opts->version > DLOCK_CLIENT_OPTS_VERSION)
    return dlock__fail(DLOCK_EINVAL, "dlock_client_opts.version is %u, want "
                       "%u", opts->version, DLOCK_CLIENT_OPTS_VERSION);
  memcpy(o, opts, version_size[opts->version]);
  o->version = DLOCK_CLIENT_OPTS_VERSION;
  return check_opts(o);
}

/* Options the URI's topology or transport has no use for. */
static int opts_fit_uri(const dlock__uri *u, const dlock_client_opts *o) {
  if (!u->tls && (o->tls_ca_file || o->tls_ca_dir || o->tls_cert_file ||
                  o->tls_key_file || o->tls_server_name || o->tls_insecure))
    return dlock__fail(DLOCK_EINVAL, "the tls_* options are for TLS URIs: "
                       "rediss://, rediss+cluster:// and rediss+sentinel://");
  if (o->replica_sync_all && u->topology == DLOCK__URI_STANDALONE)
    return dlock__fail(DLOCK_EINVAL, "replica_sync_all is for cluster and "
                       "sentinel URIs (dlock counts a master's replicas "
                       "there)");
  if (u->path && o->source_addr)
    return dlock__fail(DLOCK_EINVAL, "source_addr is for TCP: a unix:// URI "
                       "has no source address");
  return DLOCK_OK;
}

/* Everything of c but its engine, from the URI and the options; on failure
 * the caller frees c. */
static int client_setup(dlock_client *c, const char *uri,
                        const dlock_client_opts *opts) {
  atomic_init(&c->refs, 1);
  atomic_init(&c->closed, 0);
  atomic_init(&c->fifo_waiters, 0);
  atomic_init(&c->net.sharded, 0);
  pthread_mutex_init(&c->qmu, NULL);
  pthread_mutex_init(&c->hmu, NULL);
  pthread_mutex_init(&c->cmu, NULL);
  dlock__direct_init(c);
  c->net.hooks = &hooks;
  c->net.uri = &c->uri;
  c->net.opts = &c->opts;
  c->net.stats = &c->stats;
  int rc;
  if ((rc = dlock__uri_parse(uri, &c->uri)) != DLOCK_OK ||
      (rc = dlock__uri_set_auth(&c->uri, opts->username, opts->password)) !=
          DLOCK_OK ||
      (rc = dlock__uri_set_sentinel_auth(&c->uri, opts->sentinel_username,
                                         opts->sentinel_password)) != DLOCK_OK ||
      (rc = opts_fit_uri(&c->uri, opts)) != DLOCK_OK ||
      (c->uri.tls && (rc = dlock__tls_ctx_new(opts, &c->net.tls)) != DLOCK_OK))
    return rc;
  c->opts = *opts;
  c->opts.source_addr = NULL;
  if (opts->source_addr &&
      (c->opts.source_addr = strdup(opts->source_addr)) == NULL)
    return dlock__oom();
  c->opts.username = c->opts.password = NULL; /* kept in c->uri */
  c->opts.sentinel_username = c->opts.sentinel_password = NULL;
  c->net.topo = dlock__topology_of(&c->uri);
  if ((rc = c->net.topo->open(&c->net)) != DLOCK_OK ||
      (rc = dlock__direct_pools(c)) != DLOCK_OK)
    return rc;
  uuid_t u;
  uuid_generate_random(u);
  uuid_unparse_lower(u, c->id);
  c->client_name = connection_name(opts->client_name ? opts->client_name : "dlock",
                                   c->id);
  c->opts.client_name = c->net.client_name = c->client_name;
  if (c->client_name == NULL)
    return dlock__oom();
  const dlock__attachment *a = dlock__engine_attached();
  return a && a->open ? a->open(c) : DLOCK_OK;
}

/* Free c, keeping the message of the failure rc. */
static int fail_free(dlock_client *c, int rc) {
  dlock__kept_error msg;
  dlock__error_keep(&msg);
  client_free(c);
  dlock__error_restore(&msg);
  return rc;
}

/* The topology's first request (PING; a cluster's CLUSTER SHARDS) waits
 * for the connection (up to connect_timeout_ms), so a wrong address or
 * password, or a server of another topology, fails here, not at the first
 * lock. A connection dropped under it (a CLIENT KILL, a restart) is
 * re-opened by the engine: asked again while connect_timeout_ms lasts. On
 * failure c is closed. */
static int first_contact(dlock_client *c) {
  int64_t until = dlock__now_ms() + c->opts.connect_timeout_ms;
  int rc;
  do {
    dlock__req ping;
    redisReply *reply = NULL;
    rc = c->net.topo->contact(&c->net, &ping);
    if (rc == DLOCK_OK)
      rc = dlock__call(c, &ping, &reply);
    if (reply)
      freeReplyObject(reply);
    rc = c->net.topo->contact_rc(&c->net, rc);
  } while (rc == DLOCK_EIO && dlock__now_ms() < until &&
           !__atomic_load_n(&c->net.refused, __ATOMIC_ACQUIRE));
  if (rc == DLOCK_OK)
    return DLOCK_OK;
  char *msg = strdup(dlock_errmsg());
  dlock_client_close(c);
  rc = dlock__fail(rc == DLOCK_EREDIS ? DLOCK_EIO : rc, "%s", msg ? msg : "");
  free(msg);
  return rc;
}

int dlock_client_open(const char *uri, const dlock_client_opts *opts,
                      dlock_client **out) {
  dlock__clear_error();
  if (out == NULL)
    return dlock__fail(DLOCK_EINVAL, "out is NULL");
  *out = NULL;
  dlock_client_opts o;
  int rc = opts_current(opts, &o);
  if (rc != DLOCK_OK)
    return rc;
  dlock_client *c = calloc(1, sizeof *c);
  if (c == NULL)
    return dlock__oom();
  if ((rc = client_setup(c, uri, &o)) != DLOCK_OK ||
      (rc = dlock__engine_start(c, o.share_engine)) != DLOCK_OK)
    return fail_free(c, rc);
  if (!o.lazy_connect && (rc = first_contact(c)) != DLOCK_OK)
    return rc;
  *out = c;
  return DLOCK_OK;
}

void dlock_client_close(dlock_client *c) {
  if (c == NULL || dlock__on_engine_thread() || atomic_exchange(&c->closed, 1))
    return;
  dlock__direct_close(c);
  dlock__engine_stop(c);
  const dlock__attachment *a = dlock__engine_attached();
  if (a && a->closed) /* queued completions run here */
    a->closed(c);
  dlock__client_unref(c);
}

int dlock_uri_check(const char *uri) {
  dlock__uri u;
  dlock__clear_error();
  int rc = dlock__uri_parse(uri, &u);
  if (rc == DLOCK_OK)
    dlock__uri_free(&u);
  return rc;
}
