/* Redis Sentinel (docs/sentinel.md; its table: net/topology.h): which
 * server is the master.
 *
 * A client opened on a redis+sentinel:// URI asks its sentinels for the
 * master of NAME (SENTINEL GET-MASTER-ADDR-BY-NAME) and checks with ROLE
 * that the server it names is a master, when the client opens (on the
 * opening thread) and again, in libuv's thread pool, whenever a connection
 * to the master fails or the master answers READONLY (it was demoted by a
 * failover). The command and pub/sub connections wait for that search's
 * answer before they reconnect (conn_down), and go where it points: the
 * master is reached as a standalone server is. A
 * subscription to +switch-master on one sentinel (the next one after a
 * failure) moves them at once when the sentinels announce a new master. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/sock.h"
#include "net/topology.h"

#define SEARCH_MIN_GAP_MS 100 /* a storm of failures: one search per gap */
#define SEARCH_RETRY_MAX_MS 1000 /* held connections: the longest wait
                                    between searches that found no master */

typedef struct dlock__sentinel {
  char host[256]; /* the master (engine thread once the client runs) */
  int port;
  int replicas;   /* its replicas: its ROLE's or, when more, the healthy
                     ones the sentinel listed (healthy_replicas) */
  int searching;  /* a search runs in the thread pool */
  int again;      /* another was asked for meanwhile */
  int demoted;    /* the master answered READONLY: reconnect after the
                     search, wherever it points */
  int moving;     /* master_is drops the connections: they follow it */
  int64_t retry_ms; /* the wait before the next search while none finds
                       the master (0 after one did) */
  unsigned falls;        /* the master's connections fell (held) */
  unsigned search_falls; /* falls when the running search began */
  int64_t last_search_ms;
  uv_work_t work;
  uv_timer_t timer; /* a search asked for inside the gap */
  dlock__conn watch; /* SUBSCRIBE +switch-master on one sentinel */
  int watch_i;       /* which one (the next after a failure) */
  int watch_was_up;  /* it has been up before: a reconnect may have missed
                        an announcement, so a search follows it */
  /* the search's results (thread pool, read after it by the engine) */
  char found_host[256];
  int found_port;
  int found_replicas;
  int found_rc;
  char found_why[900];
} dlock__sentinel;

#define SENTINEL(net) ((dlock__sentinel *)(net)->topo_state)

/* Append "; what" to why (just "what" to an empty one). */
#define note(why, n, ...)                                                     \
  do {                                                                        \
    if ((why)[0])                                                             \
      dlock__append((why), (n), "; ");                                        \
    dlock__append((why), (n), __VA_ARGS__);                                   \
  } while (0)

/* A connection to host:port (over TLS with tls), its deadline the connect
 * timeout from now; each command's, the command timeout from its start.
 * DLOCK_OK, or DLOCK_EIO / DLOCK_ENOMEM with why. */
static int connect_to(dlock__sock *s, const char *host, int port,
                      dlock__tls_ctx *tls, const dlock_client_opts *o,
                      char *why, size_t n) {
  struct sockaddr_storage ss;
  socklen_t len = 0;
  s->fd = -1;
  s->tls = NULL;
  s->reader = NULL;
  if (dlock__sock_resolve(host, port, &ss, &len) != 0) {
    snprintf(why, n, "cannot resolve the name");
    return DLOCK_EIO;
  }
  return dlock__sock_open(s, &ss, len, o->source_addr, tls, host,
                          dlock__now_us() + o->connect_timeout_ms * 1000, why,
                          n);
}

/* One command on s within the command timeout (NULL with why). */
#define ask(s, o, why, n, ...)                                                \
  dlock__sock_command((s), dlock__now_us() + (o)->command_timeout_ms * 1000,  \
                      (why), (n), __VA_ARGS__)

/* AUTH with user (NULL: the default user) and password, when a password
 * is set: DLOCK_OK accepted (or none to send), DLOCK_EAUTH refused with why
 * (the server's answer), DLOCK_EIO the server could not be asked (why). */
static int auth(dlock__sock *s, const dlock_client_opts *o, const char *user,
                const char *password, char *why, size_t n) {
  if (password == NULL)
    return DLOCK_OK;
  redisReply *r = user ? ask(s, o, why, n, "AUTH %s %s", user, password)
                       : ask(s, o, why, n, "AUTH %s", password);
  if (r == NULL)
    return DLOCK_EIO;
  int rc = r->type == REDIS_REPLY_ERROR ? DLOCK_EAUTH : DLOCK_OK;
  if (rc != DLOCK_OK)
    snprintf(why, n, "%s", r->str);
  freeReplyObject(r);
  return rc;
}

/* The replicas of u's master that sentinel s takes for healthy: SENTINEL
 * REPLICAS lists them with their flags, and one flagged s_down, o_down or
 * disconnected is not counted. A replica still in its first
 * synchronisation is counted (the master's ROLE leaves it out until it is
 * online, yet a write must wait for it: it will serve as a master after a
 * failover). -1 when the sentinel did not answer (an ACL refusal, say). */
static int healthy_replicas(dlock__sock *s, const dlock__uri *u,
                            const dlock_client_opts *o) {
  char err[256];
  redisReply *r = ask(s, o, err, sizeof err, "SENTINEL REPLICAS %s",
                      u->master_name);
  int n = r && r->type == REDIS_REPLY_ARRAY ? 0 : -1;
  for (size_t i = 0; n >= 0 && i < r->elements; i++) {
    redisReply *e = r->element[i];
    const char *flags = NULL;
    for (size_t j = 0; e->type == REDIS_REPLY_ARRAY && j + 1 < e->elements;
         j += 2)
      if (e->element[j]->type == REDIS_REPLY_STRING &&
          e->element[j + 1]->type == REDIS_REPLY_STRING &&
          strcmp(e->element[j]->str, "flags") == 0)
        flags = e->element[j + 1]->str;
    n += flags && !strstr(flags, "s_down") && !strstr(flags, "o_down") &&
         !strstr(flags, "disconnected");
  }
  freeReplyObject(r);
  return n;
}

/* Is host:port the master? 1 yes, with *replicas the replicas its ROLE
 * lists (online) or healthy, the sentinel's count, when more; 0 no (why
 * says what it is). */
static int is_master(const dlock__uri *u, const dlock_client_opts *o,
                     dlock__tls_ctx *tls, const char *host, int port,
                     int healthy, int *replicas, char *why, size_t n) {
  dlock__sock s;
  char err[1024];
  if (connect_to(&s, host, port, tls, o, err, sizeof err) != DLOCK_OK) {
    note(why, n, "the master it names, %s:%d, cannot be reached (%s)", host,
         port, err);
    return 0;
  }
  if (auth(&s, o, u->user, u->password, err, sizeof err) != DLOCK_OK) {
    note(why, n, "%s:%d refused the credentials (%s)", host, port, err);
    dlock__sock_close(&s);
    return 0;
  }
  redisReply *r = ask(&s, o, err, sizeof err, "ROLE");
  int yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, "master") == 0;
  *replicas = yes && r->elements >= 3 && r->element[2]->type == REDIS_REPLY_ARRAY
                  ? (int)r->element[2]->elements
                  : 0;
  if (healthy > *replicas)
    *replicas = healthy;
  if (!yes)
    note(why, n, "%s:%d, which it names, is not a master (%s): a failover "
         "is under way", host, port,
         r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                 r->element[0]->type == REDIS_REPLY_STRING
             ? r->element[0]->str
         : r && r->type == REDIS_REPLY_ERROR ? r->str
         : r                                 ? "unexpected answer"
                                             : err);
  freeReplyObject(r);
  dlock__sock_close(&s);
  return yes;
}

/* Ask the sentinels in turn for the master of u's name, and check it:
 * DLOCK_OK with host/port; DLOCK_EAUTH when every sentinel that answered
 * refused the sentinel credentials (a configuration error: no retry helps);
 * else DLOCK_EIO; why says what each one said. Blocking:
 * at most the connect and command timeouts per sentinel and master. */
static int search(const dlock__uri *u, const dlock_client_opts *o,
                  dlock__tls_ctx *tls_ctx, char *host, size_t hn, int *port,
                  int *replicas, char *why, size_t n) {
  why[0] = '\0';
  int reached = 0, refused = 0, answered = 0, tls = 0;
  for (int i = 0; i < u->nseeds; i++) {
    const char *sh = u->seed_hosts[i];
    int sp = u->seed_ports[i];
    dlock__sock s;
    char err[1024];
    int crc = connect_to(&s, sh, sp, tls_ctx, o, err, sizeof err);
    if (crc != DLOCK_OK) {
      note(why, n, "sentinel %s:%d: %s", sh, sp, err);
      tls += crc == DLOCK_ETLS;
      continue;
    }
    int a = auth(&s, o, u->sentinel_user, u->sentinel_password, err, sizeof err);
    if (a != DLOCK_OK) {
      if (a == DLOCK_EAUTH)
        note(why, n, "sentinel %s:%d refused the sentinel credentials (%s)",
             sh, sp, err);
      else
        note(why, n, "sentinel %s:%d: %s", sh, sp, err);
      reached |= a == DLOCK_EAUTH;
      refused += a == DLOCK_EAUTH;
      dlock__sock_close(&s);
      continue;
    }
    redisReply *r = ask(&s, o, err, sizeof err,
                        "SENTINEL GET-MASTER-ADDR-BY-NAME %s", u->master_name);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->type == REDIS_REPLY_STRING &&
             r->element[1]->type == REDIS_REPLY_STRING &&
             r->element[0]->len < hn;
    int noauth = r && r->type == REDIS_REPLY_ERROR &&
                 (!strncmp(r->str, "NOAUTH", 6) || !strncmp(r->str, "WRONGPASS", 9));
    if (r)
      reached = 1;
    refused += noauth;
    answered += r && r->type != REDIS_REPLY_ERROR;
    if (ok) {
      snprintf(host, hn, "%s", r->element[0]->str);
      *port = atoi(r->element[1]->str);
    } else if (r && r->type == REDIS_REPLY_NIL) {
      note(why, n, "sentinel %s:%d knows no master named \"%s\"", sh, sp,
           u->master_name);
    } else if (noauth) {
      note(why, n, "sentinel %s:%d wants a password: %s", sh, sp, r->str);
    } else {
      note(why, n, "sentinel %s:%d: %s", sh, sp,
           r && r->type == REDIS_REPLY_ERROR ? r->str
           : r                               ? "unexpected answer"
                                             : err);
    }
    freeReplyObject(r);
    int healthy = ok ? healthy_replicas(&s, u, o) : -1;
    dlock__sock_close(&s);
    if (ok) {
      char said[200] = "";
      if (is_master(u, o, tls_ctx, host, *port, healthy, replicas, said,
                    sizeof said))
        return DLOCK_OK;
      note(why, n, "sentinel %s:%d: %s", sh, sp, said);
    }
  }
  if (!reached) { /* "no sentinel reachable (" what each said ")" */
    static const char pre[] = "no sentinel reachable (";
    size_t pl = sizeof pre - 1, l = strlen(why);
    if (pl + l + 2 > n)
      l = n - pl - 2;
    memmove(why + pl, why, l);
    memcpy(why, pre, pl);
    why[pl + l] = ')';
    why[pl + l + 1] = '\0';
  }
  if (!answered && tls == u->nseeds)
    return DLOCK_ETLS; /* every sentinel failed TLS verification */
  return refused && !answered ? DLOCK_EAUTH : DLOCK_EIO;
}

static int sentinel_open(dlock__net *net) {
  dlock__sentinel *s = calloc(1, sizeof *s);
  if (s == NULL)
    return dlock__oom();
  net->topo_state = s;
  char why[1536];
  int rc = search(net->uri, net->opts, net->tls, s->host, sizeof s->host, &s->port,
                  &s->replicas, why, sizeof why);
  if (rc == DLOCK_ETLS)
    return dlock__fail(rc, "sentinel: no sentinel passed TLS verification: %s",
                       why);
  if (rc == DLOCK_EAUTH)
    return dlock__fail(rc, "sentinel: the sentinels refused the sentinel "
                       "credentials (sentinel_password, sentinel_username): %s",
                       why);
  if (rc != DLOCK_OK)
    return dlock__fail(rc, "sentinel: no master \"%s\" found: %s",
                       net->uri->master_name, why);
  return DLOCK_OK;
}

static void sentinel_free(dlock__net *net) {
  free(net->topo_state);
  net->topo_state = NULL;
}

static void on_timer_closed(uv_handle_t *h) {
  dlock__net *net = h->data;
  net->hooks->live_done(net);
}

static void start_search(dlock__net *net);
static void on_gap_over(uv_timer_t *t);
static void master_is(dlock__net *net, const char *host, int port,
                      const char *why, int fresh);

/* The sentinels' events watched: the master switched, and the master's
 * replicas came, went or came back (the replica guard's count is read
 * again: a search). */
static const char *const events[] = {"+switch-master", "+slave", "+sdown",
                                     "-sdown", "+slave-reconf-done",
                                     "+convert-to-slave"};
#define NEVENTS (sizeof events / sizeof events[0])

/* Does a replica event's text ("slave IP:PORT IP PORT @ NAME IP PORT")
 * concern the master of name? */
static int about_replica_of(const char *text, const char *name) {
  const char *at = strstr(text, " @ ");
  size_t n = strlen(name);
  return strncmp(text, "slave ", 6) == 0 && at &&
         strncmp(at + 3, name, n) == 0 && at[3 + n] == ' ';
}

static void watch_push(dlock__conn *conn, redisReply *r) {
  dlock__net *net = conn->net;
  if (r->type == REDIS_REPLY_ERROR) { /* AUTH or SUBSCRIBE refused */
    char why[1024];
    snprintf(why, sizeof why, "sentinel refused the subscription: %s", r->str);
    dlock__conn_drop(conn, why); /* the next sentinel is tried */
    return;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
      r->element[0]->type != REDIS_REPLY_STRING ||
      strcmp(r->element[0]->str, "message") != 0 ||
      r->element[1]->type != REDIS_REPLY_STRING ||
      r->element[2]->type != REDIS_REPLY_STRING)
    return; /* the subscriptions' confirmations */
  const char *text = r->element[2]->str;
  if (strcmp(r->element[1]->str, "+switch-master") != 0) {
    if (about_replica_of(text, net->uri->master_name))
      start_search(net);
    return;
  }
  /* "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT" */
  char name[256], oh[256], nh[256];
  int op, np;
  if (sscanf(text, "%255s %255s %d %255s %d", name, oh, &op, nh, &np) != 5 ||
      strcmp(name, net->uri->master_name) != 0)
    return;
  master_is(net, nh, np, "the sentinels switched the master", 1);
}

static void watch_ready(dlock__conn *conn) {
  dlock__sentinel *s = SENTINEL(conn->net);
  const dlock__uri *u = conn->net->uri;
  if (u->sentinel_password) { /* a refusal shows up in watch_push */
    const char *auth[3];
    size_t alens[3];
    size_t n = dlock__auth_args(u->sentinel_user, u->sentinel_password, auth, alens);
    dlock__resp_command(&conn->out, n, auth, alens);
  }
  const char *argv[1 + NEVENTS] = {"SUBSCRIBE"};
  size_t lens[1 + NEVENTS] = {9};
  for (size_t i = 0; i < NEVENTS; i++) {
    argv[1 + i] = events[i];
    lens[1 + i] = strlen(events[i]);
  }
  dlock__resp_command(&conn->out, 1 + NEVENTS, argv, lens);
  if (s->watch_was_up) /* an announcement may have come meanwhile */
    start_search(conn->net);
  s->watch_was_up = 1;
}

static void watch_down(dlock__conn *conn) {
  dlock__net *net = conn->net;
  dlock__sentinel *s = SENTINEL(net);
  s->watch_i = (s->watch_i + 1) % net->uri->nseeds; /* the next one */
  conn->host = net->uri->seed_hosts[s->watch_i];
  conn->port = net->uri->seed_ports[s->watch_i];
}

static void attach(dlock__net *net) {
  dlock__sentinel *s = SENTINEL(net);
  dlock__standalone_attach(net);
  net->cmd.host = net->sub.host = s->host;
  net->cmd.port = net->sub.port = s->port;
  net->hooks->retarget(net, 0, s->host, s->port);
  atomic_store(&net->cmd.link->replicas, s->replicas);
  uv_timer_init(net->loop, &s->timer);
  s->timer.data = net;
  net->live++;
  dlock__conn_init(net, &s->watch, 1);
  s->watch.role = "sentinel subscription";
  s->watch.bare = 1;
  s->watch.on_push = watch_push;
  s->watch.on_ready = watch_ready;
  s->watch.on_down = watch_down;
  s->watch.host = net->uri->seed_hosts[0];
  s->watch.port = net->uri->seed_ports[0];
}

static void start(dlock__net *net) {
  dlock__standalone_start(net);
  dlock__conn_start(&SENTINEL(net)->watch);
}

static void flush(dlock__net *net) { dlock__conn_flush(&SENTINEL(net)->watch); }

static void search_work(uv_work_t *w) {
  dlock__net *net = w->data;
  dlock__sentinel *s = SENTINEL(net);
  s->found_rc = search(net->uri, net->opts, net->tls, s->found_host, sizeof s->found_host,
                       &s->found_port, &s->found_replicas, s->found_why,
                       sizeof s->found_why);
  if (net->tls) /* libuv's pool threads live on: free OpenSSL's state of this
                 one now, not never (valgrind saw it lost at exit) */
    dlock__tls_thread_done();
}

/* The master is host:port now: the connections go there at once (their
 * requests in flight fail with DLOCK_EIO: whether the old master ran them
 * cannot be known), and after a demotion even when it did not change. */
static void master_is(dlock__net *net, const char *host, int port,
                      const char *why, int fresh) {
  dlock__sentinel *s = SENTINEL(net);
  int moved = strcmp(host, s->host) != 0 || port != s->port;
  if (moved) { /* the next connect goes there (conn->host points here) */
    snprintf(s->host, sizeof s->host, "%s", host);
    s->port = net->cmd.port = net->sub.port = port;
  }
  if (moved || s->demoted) {
    s->demoted = 0;
    net->hooks->retarget(net, 0, s->host, s->port);
    s->moving = 1;
    dlock__conn_drop(&net->cmd, why);
    dlock__conn_drop(&net->sub, why);
    s->moving = 0;
  }
  if (fresh) { /* the sentinels said where after the last fall */
    dlock__conn_unhold(&net->cmd);
    dlock__conn_unhold(&net->sub);
  }
}

static void search_done(uv_work_t *w, int status) {
  dlock__net *net = w->data;
  dlock__sentinel *s = SENTINEL(net);
  s->searching = 0;
  if (status == 0 && !net->stopping && s->found_rc == DLOCK_OK) {
    s->replicas = s->found_replicas; /* the replica guard's WAIT asks these */
    atomic_store(&net->cmd.link->replicas, s->replicas);
    master_is(net, s->found_host, s->found_port,
              "the sentinels name another master",
              s->search_falls == s->falls);
  } else if (status == 0 && !net->stopping) {
    snprintf(net->cmd.last_error, sizeof net->cmd.last_error,
             "sentinel: no master \"%s\" found: %s", net->uri->master_name,
             s->found_why);
  }
  int held = net->cmd.held || net->sub.held; /* none found, or a fall
                                                since this one began */
  if (status == 0 && s->found_rc == DLOCK_OK)
    s->retry_ms = 0;
  if (!net->stopping && (s->again || s->demoted)) {
    s->again = 0;
    start_search(net);
  } else if (!net->stopping && held) { /* again, backing off */
    s->retry_ms = s->retry_ms ? s->retry_ms * 2 : SEARCH_MIN_GAP_MS;
    if (s->retry_ms > SEARCH_RETRY_MAX_MS)
      s->retry_ms = SEARCH_RETRY_MAX_MS;
    uv_timer_start(&s->timer, on_gap_over, (uint64_t)s->retry_ms, 0);
  }
  net->hooks->live_done(net); /* the request has ended */
}

static void on_gap_over(uv_timer_t *t) { start_search(t->data); }

/* Ask the sentinels again (at most one search at a time, one per gap). */
static void start_search(dlock__net *net) {
  dlock__sentinel *s = SENTINEL(net);
  if (net->stopping)
    return;
  if (s->searching) {
    s->again = 1;
    return;
  }
  int64_t now = dlock__now_ms();
  if (now < s->last_search_ms + SEARCH_MIN_GAP_MS) {
    uv_timer_start(&s->timer, on_gap_over,
                   (uint64_t)(s->last_search_ms + SEARCH_MIN_GAP_MS - now), 0);
    return;
  }
  s->last_search_ms = now;
  s->searching = 1;
  s->search_falls = s->falls;
  s->work.data = net;
  net->live++;
  if (uv_queue_work(net->loop, &s->work, search_work, search_done) != 0) {
    s->searching = 0;
    net->live--;
  }
}

static void close_all(dlock__net *net, int status) {
  (void)status; /* its requests are the master's connections' */
  dlock__sentinel *s = SENTINEL(net);
  if (s->searching) /* not started yet: ends with UV_ECANCELED */
    uv_cancel((uv_req_t *)&s->work);
  uv_close((uv_handle_t *)&s->timer, on_timer_closed);
  dlock__conn_shutdown(&s->watch, DLOCK_ECLOSED);
}

/* The master's connection fell. It reconnects only where a search made
 * after the fall points, never at once to the same address: a master that
 * crashed and came back empty is a master until the sentinels make it a
 * replica, and a lock taken there while another client takes it on the
 * promoted replica would be held twice (docs/sentinel.md). Unless the fall
 * is a move (master_is): its address is the sentinels' already. */
static void conn_down(dlock__conn *conn) {
  dlock__net *net = conn->net;
  if (net->stopping)
    return;
  if (!SENTINEL(net)->moving) {
    conn->held = 1;
    SENTINEL(net)->falls++;
  }
  start_search(net);
}

static int follows(dlock__class k) { return k == DLOCK__C_READONLY; }

static int on_error(dlock__conn *conn, dlock__req *req, redisReply *reply) {
  dlock__net *net = conn->net;
  if (!follows(dlock__classify(reply)))
    return 0;
  /* the write did not run: it waits for the new master, within its
   * connect timeout, as a call made while the master is down does */
  freeReplyObject(reply);
  dlock__conn_hold(conn, req);
  SENTINEL(net)->demoted = 1;
  start_search(net);
  return 1;
}

const dlock__topology dlock__sentinel_topology = {
    .name = "sentinel",
    .open = sentinel_open,
    .free = sentinel_free,
    .attach = attach,
    .start = start,
    .flush = flush,
    .shutdown = close_all,
    .follows = follows,
    .on_error = on_error,
    .conn_down = conn_down,
    DLOCK__ONE_MASTER, /* the master it found */
};
