/* One Redis connection owned by the engine thread: connect (TCP or unix
 * socket), handshake (AUTH, SELECT, CLIENT SETNAME), pipelined writes,
 * replies parsed with hiredis's reader, deadlines, reconnect with backoff.
 *
 * Why not hiredis's async context: it has no timeouts in 0.14, and its
 * pub/sub bookkeeping differs between 0.14 and 1.x. Owning the socket lets
 * the engine pipeline exactly once per loop turn, enforce connect and
 * command deadlines, and parse subscribe/unsubscribe confirmations itself
 * (docs/design-changes.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "net/conn.h"
#include "net/sock.h"
#include "net/tls.h"
#include "net/topology.h"

static void on_timer(uv_timer_t *t);

const char *dlock__net_where(const dlock__net *n, char *buf, size_t len) {
  if (n->uri->path)
    snprintf(buf, len, "%s", n->uri->path);
  else
    snprintf(buf, len, "%s:%d", n->uri->host, n->uri->port);
  return buf;
}
static void conn_fail(dlock__conn *conn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void dropped(dlock__req *req, redisReply *reply, int status) {
  (void)status;
  if (reply)
    freeReplyObject(reply);
  free(req);
}

/* DEL key behind the reply just handed over (dlock__req_drop_after). Lost
 * when out of memory or when the connection drops: the key expires. */
static void drop_key(dlock__conn *conn, const dlock__buf *key) {
  dlock__req *req = calloc(1, sizeof *req);
  const char *argv[] = {"DEL", key->p};
  size_t lens[] = {3, key->len};
  if (req == NULL || dlock__req_command(req, 2, argv, lens) != DLOCK_OK) {
    free(req);
    return;
  }
  req->done = dropped;
  req->linger = 1;
  dlock__conn_send(conn, req);
}

int dlock__ack_plan(const dlock_client_opts *o, int replicas, dlock__req *req) {
  req->ack = (dlock__ack){0};
  if (o->replica_sync_ms > 0 && replicas > 0)
    req->ack.wait_asked = replicas;
  req->ack.bare = o->replica_sync_ms > 0 && replicas == 0 &&
                  o->replica_sync_all;
  req->ack.aof_asked = o->durable_ms > 0;
  return (req->ack.wait_asked > 0) + req->ack.aof_asked;
}

static int ack_is_aof(const dlock__req *req, int i) {
  return i == 1 || req->ack.wait_asked == 0;
}

void dlock__ack_cmd_init(const dlock_client_opts *o, const dlock__req *req,
                         int i, dlock__ack_cmd *cmd) {
  cmd->argc = 0;
  if (ack_is_aof(req, i)) { /* WAITAOF numlocal numreplicas timeout */
    cmd->argv[cmd->argc++] = "WAITAOF";
    cmd->argv[cmd->argc++] = "1";
    snprintf(cmd->n, sizeof cmd->n, "%d", o->durable_replicas);
    cmd->argv[cmd->argc++] = cmd->n;
    snprintf(cmd->ms, sizeof cmd->ms, "%lld", (long long)o->durable_ms);
  } else { /* WAIT numreplicas timeout */
    cmd->argv[cmd->argc++] = "WAIT";
    snprintf(cmd->n, sizeof cmd->n, "%d", req->ack.wait_asked);
    cmd->argv[cmd->argc++] = cmd->n;
    snprintf(cmd->ms, sizeof cmd->ms, "%lld",
             (long long)o->replica_sync_ms);
  }
  cmd->argv[cmd->argc++] = cmd->ms;
  for (size_t k = 0; k < cmd->argc; k++)
    cmd->lens[k] = strlen(cmd->argv[k]);
}

void dlock__ack_answer(dlock__req *req, int i, const redisReply *r) {
  int aof = ack_is_aof(req, i);
  if (r && r->type == REDIS_REPLY_ERROR) {
    *(aof ? &req->ack.aof_local : &req->ack.waited) = -1;
    if (req->errmsg[0] == '\0')
      snprintf(req->errmsg, sizeof req->errmsg, "%s", r->str);
  } else if (!aof && r && r->type == REDIS_REPLY_INTEGER) {
    req->ack.waited = (int)r->integer;
  } else if (aof && r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
             r->element[0]->type == REDIS_REPLY_INTEGER &&
             r->element[1]->type == REDIS_REPLY_INTEGER) {
    req->ack.aof_local = (int)r->element[0]->integer;
    req->ack.aof_replicas = (int)r->element[1]->integer;
  }
}

/* The i-th command of req's acknowledgement answered (or failed); the
 * last one finishes req, whose script ran, with the script's reply
 * (ack->arg). */
static void acked(dlock__req *ack, int i, redisReply *reply, int status) {
  dlock__req *req = ack->data;
  redisReply *script_reply = ack->arg;
  if (status == DLOCK_OK)
    dlock__ack_answer(req, i, reply);
  if (reply)
    freeReplyObject(reply);
  free(ack);
  if (script_reply)
    dlock__req_finish(req, script_reply, DLOCK_OK, NULL);
}

static void acked_first(dlock__req *ack, redisReply *reply, int status) {
  acked(ack, 0, reply, status);
}

static void acked_second(dlock__req *ack, redisReply *reply, int status) {
  acked(ack, 1, reply, status);
}

/* req's script wrote (reply in hand) and its acknowledgement is wanted:
 * WAIT until conn's server's replicas have it and/or WAITAOF until it is
 * fsynced, on the same connection (both count the connection's own
 * writes), and finish req when the last answer is in. 0 when there is
 * nothing to wait for (no replicas known, no durability asked): finish req
 * now. */
static int send_ack(dlock__conn *conn, dlock__req *req, redisReply *reply) {
  const dlock_client_opts *o = conn->net->opts;
  int replicas = conn->link ? atomic_load(&conn->link->replicas) : 0;
  int n = dlock__ack_plan(o, replicas, req);
  dlock__req *cmds[2] = {NULL, NULL};
  for (int i = 0; i < n; i++) {
    dlock__ack_cmd a;
    dlock__ack_cmd_init(o, req, i, &a);
    cmds[i] = calloc(1, sizeof *cmds[i]);
    if (cmds[i] == NULL ||
        dlock__req_command(cmds[i], a.argc, a.argv, a.lens) != DLOCK_OK) {
      free(cmds[i]); /* out of memory: counted as not acknowledged */
      for (int k = 0; k < i; k++) {
        dlock__buf_free(&cmds[k]->cmd);
        free(cmds[k]);
      }
      return 0;
    }
    cmds[i]->done = i == 0 ? acked_first : acked_second;
    cmds[i]->data = req;
    cmds[i]->arg = i == n - 1 ? reply : NULL;
    cmds[i]->linger = 1;
  }
  for (int i = 0; i < n; i++)
    dlock__conn_send(conn, cmds[i]);
  return n > 0;
}

static dlock__req *pop(dlock__req **head, dlock__req **tail) {
  dlock__req *req = *head;
  if (req) {
    *head = req->next;
    if (*head == NULL)
      *tail = NULL;
    req->next = NULL;
  }
  return req;
}

/* The oldest request in flight, taken off the pipeline (its reply came, or
 * it fails). */
static dlock__req *inflight_pop(dlock__conn *conn) {
  dlock__req *req = pop(&conn->inflight, &conn->inflight_tail);
  if (req) {
    conn->depth--;
    dlock__stat_sub(conn->net->stats, DLOCK__ST_IN_FLIGHT, 1);
  }
  return req;
}

/* Fail every request in flight. */
static void fail_inflight(dlock__conn *conn, int status, const char *why) {
  dlock__req *req;
  while ((req = inflight_pop(conn)) != NULL)
    dlock__req_finish(req, NULL, status, why);
}

static const char *where(dlock__conn *conn, char *buf, size_t n) {
  if (conn->host) {
    snprintf(buf, n, "%s:%d", conn->host, conn->port);
    return buf;
  }
  return dlock__net_where(conn->net, buf, n);
}

static void conn_arm(dlock__conn *conn) {
  const dlock_client_opts *o = conn->net->opts;
  int64_t next = INT64_MAX;
  switch (conn->state) {
  case CONN_CONNECTING:
  case CONN_TLS:
  case CONN_HANDSHAKE:
    next = conn->connect_started_ms + o->connect_timeout_ms;
    break;
  case CONN_READY:
    if (conn->inflight)
      next = conn->inflight->sent_ms + o->command_timeout_ms;
    break;
  case CONN_DOWN:
    if (!conn->held)
      next = conn->reconnect_at_ms;
    break;
  case CONN_CLOSING:
    break;
  }
  if (conn->waiting && conn->waiting->queued_ms + o->connect_timeout_ms < next)
    next = conn->waiting->queued_ms + o->connect_timeout_ms;
  for (dlock__req *r = conn->parked; r; r = r->next)
    if (r->retry_at < next)
      next = r->retry_at;
  if (next == INT64_MAX || conn->net->stopping)
    return;
  int64_t now = dlock__now_ms();
  if (conn->timer_due != 0 && conn->timer_due <= next && conn->timer_due > now)
    return; /* an earlier wake-up is armed; it re-arms for this one */
  conn->timer_due = next;
  uv_timer_start(&conn->timer, on_timer, next > now ? (uint64_t)(next - now) : 0,
                 0);
}

/* Append req's bytes to the pipeline and expect its reply. */
static void conn_put(dlock__conn *conn, dlock__req *req) {
  int was_empty = conn->inflight == NULL;
  req->sent_ms = dlock__now_ms();
  req->written = 1;
  dlock__req_push(&conn->inflight, &conn->inflight_tail, req);
  dlock__stats *st = conn->net->stats;
  dlock__stat_add(st, DLOCK__ST_COMMANDS, 1);
  dlock__stat_add(st, DLOCK__ST_IN_FLIGHT, 1);
  dlock__stat_max(st, DLOCK__ST_PIPELINE_MAX, ++conn->depth);
  if (dlock__buf_add(&conn->out, req->cmd.p, req->cmd.len) != DLOCK_OK) {
    conn_fail(conn, "out of memory for the write buffer");
    return;
  }
  if (was_empty)
    conn_arm(conn);
}

void dlock__conn_send(dlock__conn *conn, dlock__req *req) {
  if (conn->state == CONN_READY) {
    conn_put(conn, req);
    return;
  }
  int was_empty = conn->waiting == NULL;
  dlock__req_push(&conn->waiting, &conn->waiting_tail, req);
  if (was_empty)
    conn_arm(conn);
}

void dlock__conn_hold(dlock__conn *conn, dlock__req *req) {
  dlock__req_push(&conn->waiting, &conn->waiting_tail, req);
  conn_arm(conn);
}

static void fail_list(dlock__req **head, dlock__req **tail, int status,
                      const char *why) {
  dlock__req *req;
  while ((req = pop(head, tail)) != NULL)
    dlock__req_finish(req, NULL, status, why);
}

/* The socket is gone (or never opened): schedule the reconnect. */
static void conn_closed(dlock__conn *conn) {
  conn->u.handle.data = NULL;
  conn->state = CONN_DOWN;
  if (conn->net->stopping)
    return;
  conn->reconnect_at_ms = dlock__now_ms() + conn->backoff_ms;
  conn->backoff_ms = dlock__backoff_next(conn->backoff_ms);
  conn_arm(conn);
}

static void on_closed(uv_handle_t *h) {
  dlock__conn *conn = DLOCK__CONTAINER(h, dlock__conn, u);
  dlock__net *n = conn->net;
  conn_closed(conn);
  n->hooks->live_done(n);
}

/* A handle of the client's that lives as long as the client (timer) */
static void on_timer_closed(uv_handle_t *h) {
  dlock__net *n = ((dlock__conn *)h->data)->net;
  n->hooks->live_done(n);
}

/* Drop the connection: every request in flight fails with DLOCK_EIO (a reply
 * can never be matched to it again), the socket closes, and a reconnect is
 * scheduled. Requests not sent yet keep waiting for the next connection. */
static void conn_fail(dlock__conn *conn, const char *fmt, ...) {
  if (conn->state == CONN_DOWN || conn->state == CONN_CLOSING)
    return;
  char addr[300];
  int n = snprintf(conn->last_error, sizeof conn->last_error, "%s (%s): ",
                   where(conn, addr, sizeof addr), conn->role);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(conn->last_error + n, sizeof conn->last_error - (size_t)n, fmt, ap);
  va_end(ap);
  if (conn->tls && conn->state == CONN_HANDSHAKE) /* TLS 1.3 says it late */
    dlock__append(conn->last_error, sizeof conn->last_error,
                  " (right after the TLS handshake: did the server refuse "
                  "this client's certificate?)");
  if (conn->state == CONN_READY && !conn->net->stopping)
    conn->net->conns_lost++; /* the next ready connection replaces it */
  conn->state = CONN_CLOSING;
  if (conn->link)
    atomic_store(&conn->link->ready, 0);
  conn->out.len = 0;
  dlock__tls_free(conn->tls);
  conn->tls = NULL;
  redisReaderFree(conn->reader);
  conn->reader = redisReaderCreate();
  char why[1024];
  snprintf(why, sizeof why, "%s", conn->last_error);
  /* a reply the reader ran out of memory for: the calls' answers are lost
   * as with a dropped connection (asked after, or a release sent again),
   * and an outcome still unknown is out of memory, not the server's */
  fail_inflight(conn, conn->oom ? DLOCK_ENOMEM : DLOCK_EIO, why);
  conn->oom = 0;
  if (conn->on_down) {
    conn->on_down(conn);
  } else {
    if (conn->is_sub)
      conn->net->hooks->sub_down(conn);
    conn->net->topo->conn_down(conn);
  }
  if (conn->resolving)
    uv_cancel((uv_req_t *)&conn->gai_req);
  if (conn->u.handle.data != NULL && !uv_is_closing(&conn->u.handle))
    uv_close(&conn->u.handle, on_closed);
  else if (!conn->resolving && conn->u.handle.data == NULL)
    conn_closed(conn);
}

void dlock__conn_drop(dlock__conn *conn, const char *why) {
  conn_fail(conn, "%s", why);
}

/* A connection that fell right after a TLS handshake in which the server
 * asked for a client certificate this client has none of: the server
 * refused it (TLS 1.3 tells so after the handshake, and may reset the
 * connection before its alert is read, failing the next read or write).
 * Failed as such, its waiting requests with DLOCK_ETLS (a setting to fix,
 * not an outage): 1; else 0. */
static int cert_refused(dlock__conn *conn) {
  char refused[256];
  if (conn->state != CONN_HANDSHAKE ||
      !dlock__tls_cert_refused(conn->tls, refused, sizeof refused))
    return 0;
  conn_fail(conn, "%s", refused);
  fail_list(&conn->waiting, &conn->waiting_tail, DLOCK_ETLS, conn->last_error);
  return 1;
}

/* A write failed with status (a libuv error). */
static void write_failed(dlock__conn *conn, int status) {
  if (!cert_refused(conn))
    conn_fail(conn, "write failed: %s", uv_strerror(status));
}

static void on_write(uv_write_t *w, int status) {
  dlock__conn *conn = w->data;
  conn->writes_pending--;
  free(w);
  if (status < 0 && status != UV_ECANCELED)
    write_failed(conn, status);
}

/* Write p to the socket: at once as far as the kernel takes it, the rest
 * queued in order. 0, or -1 when conn failed. */
static int raw_write(dlock__conn *conn, const char *p, size_t len) {
  uv_buf_t buf = uv_buf_init((char *)p, (unsigned)len);
  size_t done = 0;
  if (conn->writes_pending == 0) {
    int n = uv_try_write(&conn->u.stream, &buf, 1);
    if (n < 0 && n != UV_EAGAIN) {
      write_failed(conn, n);
      return -1;
    }
    done = n > 0 ? (size_t)n : 0;
  }
  if (done < len) {
    /* The kernel buffer is full: hand the rest to libuv, which keeps the
     * order of queued writes. The copy lives with the write request. */
    size_t rest = len - done;
    uv_write_t *w = malloc(sizeof *w + rest);
    if (w == NULL) {
      conn_fail(conn, "out of memory for a write");
      return -1;
    }
    char *copy = (char *)(w + 1);
    memcpy(copy, p + done, rest);
    w->data = conn;
    uv_buf_t b = uv_buf_init(copy, (unsigned)rest);
    int rc = uv_write(w, &conn->u.stream, &b, 1, on_write);
    if (rc < 0) {
      free(w);
      conn_fail(conn, "write failed: %s", uv_strerror(rc));
      return -1;
    }
    conn->writes_pending++;
  }
  return 0;
}

/* The TLS session's encrypted bytes, to the socket. 0, or -1 when conn
 * failed. */
static int tls_out(dlock__conn *conn) {
  char buf[16384];
  size_t k;
  while (conn->tls && (k = dlock__tls_take(conn->tls, buf, sizeof buf)) > 0)
    if (raw_write(conn, buf, k) != 0)
      return -1;
  return 0;
}

/* The output buffer is written: empty it, and give its memory back after
 * a burst (thousands of async tries in one turn) grew it big. */
static void out_written(dlock__conn *conn) {
  conn->out.len = 0;
  if (conn->out.cap > 256 * 1024)
    dlock__buf_free(&conn->out);
}

void dlock__conn_flush(dlock__conn *conn) {
  if (conn->out.len == 0 ||
      (conn->state != CONN_READY && conn->state != CONN_HANDSHAKE))
    return;
  if (conn->tls) {
    char why[1024];
    if (dlock__tls_write(conn->tls, conn->out.p, conn->out.len, why,
                         sizeof why) != DLOCK_OK) {
      conn_fail(conn, "%s", why);
      return;
    }
    out_written(conn);
    tls_out(conn);
    return;
  }
  if (raw_write(conn, conn->out.p, conn->out.len) == 0)
    out_written(conn);
}

/* A passing refusal (base/policy.h: LOADING, BUSY, NOREPLICAS, OOM,
 * MASTERDOWN) of req, which did not run: sent again after the reply
 * policy's pause while the command timeout from when it was queued lasts;
 * then it fails with DLOCK_EIO, the server's words and what to check, as
 * not run (refused: a wait's recipe tries again within its own budget). */
static void refused_for_now(dlock__conn *conn, dlock__req *req,
                            redisReply *reply) {
  int64_t now = dlock__now_ms();
  req->refusals++;
  req->pause_ms = dlock__backoff_next(req->pause_ms);
  req->written = 0;
  if (!req->refusal_final &&
      now + req->pause_ms <
          req->queued_ms + conn->net->opts->command_timeout_ms) {
    freeReplyObject(reply);
    req->retry_at = now + req->pause_ms;
    dlock__req_push(&conn->parked, &conn->parked_tail, req);
    conn_arm(conn);
    return;
  }
  char why[1400];
  dlock__passing_why(reply, req->refusals, now - req->queued_ms, why,
                     sizeof why);
  freeReplyObject(reply);
  req->refused = 1;
  dlock__req_finish(req, NULL, DLOCK_EIO, why);
}

/* The parked requests whose pause is over go out again. */
static void resend_parked(dlock__conn *conn, int64_t now) {
  dlock__req *keep = NULL, *keep_tail = NULL, *req;
  while ((req = pop(&conn->parked, &conn->parked_tail)) != NULL) {
    if (req->retry_at <= now)
      dlock__conn_send(conn, req);
    else
      dlock__req_push(&keep, &keep_tail, req);
  }
  conn->parked = keep;
  conn->parked_tail = keep_tail;
}

static int is_push(const redisReply *r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
      r->element[0]->type != REDIS_REPLY_STRING)
    return 0;
  const char *k = dlock__push_kind(r->element[0]->str);
  return strcmp(k, "message") == 0 || strcmp(k, "subscribe") == 0 ||
         strcmp(k, "unsubscribe") == 0;
}

static void dispatch(dlock__conn *conn, redisReply *reply) {
  if (conn->is_sub && is_push(reply)) {
    if (conn->on_push)
      conn->on_push(conn, reply);
    else
      conn->net->hooks->sub_push(conn, reply);
    freeReplyObject(reply);
    return;
  }
  if (conn->is_sub && !conn->on_push && conn->state == CONN_READY &&
      reply->type == REDIS_REPLY_ERROR &&
      conn->inflight == NULL && conn->net->hooks->sub_error(conn, reply)) {
    freeReplyObject(reply);
    return;
  }
  dlock__req *req = inflight_pop(conn);
  if (req == NULL) {
    freeReplyObject(reply);
    conn_fail(conn, "reply without a request (protocol out of step)");
    return;
  }
  if (!conn->is_sub && req->task == NULL &&
      dlock__classify(reply) == DLOCK__C_PASSING) {
    refused_for_now(conn, req, reply);
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR &&
      conn->net->topo->on_error(conn, req, reply))
    return; /* redirected, parked or failed by the topology */
  if (req->script >= 0 && dlock__classify(reply) == DLOCK__C_NOSCRIPT) {
    freeReplyObject(reply);
    if (dlock__req_to_eval(req) != DLOCK_OK) {
      dlock__req_finish(req, NULL, DLOCK_ENOMEM, "out of memory");
      return;
    }
    dlock__conn_send(conn, req);
    return;
  }
  dlock__buf drop = req->drop; /* req may be gone once finished */
  req->drop = (dlock__buf){0};
  int drop_it = drop.len > 0 && reply->type != REDIS_REPLY_ERROR;
  if (!(req->ack_wanted && reply->type != REDIS_REPLY_ERROR &&
        send_ack(conn, req, reply)))
    dlock__req_finish(req, reply, DLOCK_OK, NULL);
  if (drop_it)
    drop_key(conn, &drop);
  dlock__buf_free(&drop);
}

static int take_replies(dlock__conn *conn, const char *p, size_t len);
static void tls_step(dlock__conn *conn);
static void connected(dlock__conn *conn);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  dlock__conn *conn = h->data;
  *buf = uv_buf_init(conn->readbuf, sizeof conn->readbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  dlock__conn *conn = s->data;
  if (nread < 0 && cert_refused(conn))
    return;
  if (nread < 0) {
    conn_fail(conn, "%s", nread == UV_EOF && conn->state == CONN_TLS
                              ? "connection closed during the TLS handshake "
                                "(a plain port, or this client refused?)"
                          : nread == UV_EOF ? "connection closed by the server"
                                            : uv_strerror((int)nread));
    return;
  }
  if (nread == 0 || conn->state == CONN_CLOSING || conn->state == CONN_DOWN)
    return;
  if (conn->tls == NULL) {
    take_replies(conn, buf->base, (size_t)nread);
    return;
  }
  if (dlock__tls_feed(conn->tls, buf->base, (size_t)nread) != DLOCK_OK) {
    conn_fail(conn, "out of memory for TLS");
    return;
  }
  if (conn->state == CONN_TLS) {
    tls_step(conn);
    if (conn->state != CONN_HANDSHAKE && conn->state != CONN_READY)
      return;
  }
  char plain[16384];
  for (;;) { /* what the records carry, once the handshake is done */
    char why[1024];
    ssize_t k = dlock__tls_read(conn->tls, plain, sizeof plain, why, sizeof why);
    if (k < 0) {
      int handshake = conn->state == CONN_HANDSHAKE;
      conn_fail(conn, "%s", why);
      if (k == DLOCK_ETLS && handshake) /* our certificate refused (TLS 1.3) */
        fail_list(&conn->waiting, &conn->waiting_tail, DLOCK_ETLS,
                  conn->last_error);
      return;
    }
    if (k == 0)
      break;
    if (take_replies(conn, plain, (size_t)k) != 0)
      return;
  }
  tls_out(conn); /* anything the session has to answer */
}

/* The reply reader gave up (a malformed reply, or out of memory: the
 * calls' answers are then lost for want of memory): conn fails; -1. */
static int reader_failed(dlock__conn *conn) {
  conn->oom = conn->reader->err == REDIS_ERR_OOM;
  conn_fail(conn, "reply parse error: %s", conn->reader->errstr);
  return -1;
}

/* Bytes of replies: parsed and handed over. 0, or -1 when conn is no
 * longer up. */
static int take_replies(dlock__conn *conn, const char *p, size_t len) {
  if (redisReaderFeed(conn->reader, p, len) != REDIS_OK)
    return reader_failed(conn);
  for (;;) {
    void *reply = NULL;
    if (redisReaderGetReply(conn->reader, &reply) != REDIS_OK)
      return reader_failed(conn);
    if (reply == NULL)
      break;
    dispatch(conn, reply);
    if (conn->state != CONN_READY && conn->state != CONN_HANDSHAKE)
      return -1;
  }
  return 0;
}

static void conn_ready(dlock__conn *conn) {
  conn->state = CONN_READY;
  /* a reconnect: a connection lost before is made again, to its server or
   * (a failover, a sentinel's switch) to the one that took its place */
  if (conn->was_ready || conn->net->conns_lost > 0) {
    if (conn->net->conns_lost > 0)
      conn->net->conns_lost--;
    dlock__stat_add(conn->net->stats, DLOCK__ST_RECONNECTS, 1);
    char at[300];
    where(conn, at, sizeof at);
    conn->net->hooks->reconnected(conn->net, at);
  }
  conn->was_ready = 1;
  if (conn->link)
    atomic_store(&conn->link->ready, 1);
  conn->backoff_ms = 0;
  conn->last_error[0] = '\0';
  dlock__req *req;
  while ((req = pop(&conn->waiting, &conn->waiting_tail)) != NULL)
    conn_put(conn, req);
  if (conn->on_ready)
    conn->on_ready(conn);
  else if (conn->is_sub)
    conn->net->hooks->sub_ready(conn);
  conn_arm(conn);
}

/* conn.h. Refused for good: credentials, ACL, a database that does not
 * exist; passing: LOADING, BUSY, MASTERDOWN, TRYAGAIN. */
int dlock__handshake_refusal(const char *err) {
  if (strcasestr(err, "waitaof")) { /* the durable option's probe */
    if (strstr(err, "replica"))
      return 0; /* a replica (a demoted master): it answers MOVED/READONLY */
    return strncmp(err, "NOPERM", 6) == 0 ? DLOCK_EPERM : DLOCK_ECONFIG;
  }
  if (strncmp(err, "DENIED", 6) == 0)
    return DLOCK_ECONFIG; /* protected mode: only loopback's 127.0.0.1 and
                             ::1 may connect without a password */
  static const char *const prefixes[] = {"WRONGPASS", "NOAUTH", "NOPERM", "ERR"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(err, prefixes[i], strlen(prefixes[i])) == 0)
      return DLOCK_EAUTH;
  return DLOCK_EIO;
}

static void handshake_done(dlock__req *req, redisReply *reply, int status) {
  dlock__conn *conn = req->data;
  int refusal = status == DLOCK_OK && reply->type == REDIS_REPLY_ERROR
                    ? dlock__handshake_refusal(reply->str)
                    : 0;
  if (refusal) {
    if (strncmp(reply->str, "DENIED", 6) == 0)
      conn_fail(conn, "the server refused a connection from this address "
                "(protected mode: it takes only 127.0.0.1 and ::1 without a "
                "password; set one, or protected-mode no): %.200s",
                reply->str);
    else if (refusal == DLOCK_ECONFIG || refusal == DLOCK_EPERM)
      conn_fail(conn, "durable_ms: the server cannot make writes durable: %s "
                "(it needs WAITAOF, Redis 7.2+ or Valkey, and appendonly "
                "yes: docs/durability.md)", reply->str);
    else
      conn_fail(conn, "handshake refused: %s", reply->str);
    /* calls waiting for this connection fail now, with what to fix, instead
     * of waiting out the connect timeout; reconnects go on */
    if (refusal != DLOCK_EIO)
      fail_list(&conn->waiting, &conn->waiting_tail, refusal, conn->last_error);
  } else if (status == DLOCK_OK && --conn->handshake_left == 0) {
    conn_ready(conn);
  }
  if (reply)
    freeReplyObject(reply);
  free(req);
}

size_t dlock__auth_args(const char *user, const char *password,
                        const char *argv[3], size_t lens[3]) {
  size_t n = 0;
  argv[n++] = "AUTH";
  if (user)
    argv[n++] = user;
  argv[n++] = password;
  for (size_t i = 0; i < n; i++)
    lens[i] = strlen(argv[i]);
  return n;
}

int dlock__handshake(const dlock__net *n, dlock__handshake_fn *fn,
                     void *ctx) {
  char db[24];
  const char *argv[3];
  size_t lens[3];
  int rc = DLOCK_OK;
  const dlock__uri *u = n->uri;
  if (u->password) {
    size_t k = dlock__auth_args(u->user, u->password, argv, lens);
    rc = fn(ctx, k, argv, lens);
  }
  if (rc == DLOCK_OK && u->db != 0) {
    argv[0] = "SELECT";
    argv[1] = db;
    lens[0] = 6;
    lens[1] = (size_t)snprintf(db, sizeof db, "%ld", u->db);
    rc = fn(ctx, 2, argv, lens);
  }
  if (rc == DLOCK_OK) {
    argv[0] = "CLIENT";
    argv[1] = "SETNAME";
    argv[2] = n->client_name;
    lens[0] = 6;
    lens[1] = 7;
    lens[2] = strlen(n->client_name);
    rc = fn(ctx, 3, argv, lens);
  }
  if (rc == DLOCK_OK && n->opts->durable_ms > 0) {
    /* the durable option's probe: a server without WAITAOF or without an
     * append-only file refuses it (dlock__handshake_refusal); answered at
     * once otherwise (this connection has written nothing yet) */
    const char *probe[] = {"WAITAOF", "1", "0", "1"};
    const size_t plens[] = {7, 1, 1, 1};
    rc = fn(ctx, 4, probe, plens);
  }
  return rc;
}

static int handshake_send(void *ctx, size_t argc, const char *const *argv,
                          const size_t *lens) {
  dlock__conn *conn = ctx;
  dlock__req *req = calloc(1, sizeof *req);
  if (req == NULL || dlock__req_command(req, argc, argv, lens) != DLOCK_OK) {
    free(req);
    return dlock__oom();
  }
  req->done = handshake_done;
  req->data = conn;
  conn->handshake_left++;
  conn_put(conn, req);
  return DLOCK_OK;
}

static void on_connect(uv_connect_t *creq, int status) {
  dlock__conn *conn = creq->data;
  if (conn->state != CONN_CONNECTING)
    return;
  if (status < 0) {
    conn_fail(conn, "connect failed: %s", uv_strerror(status));
    /* A standalone server's first connection refused: nothing listens
     * there, and the kernel said so at once, so the requests waiting for
     * it fail now rather than at the connect timeout. A reconnect (a
     * restart refuses for a moment) and a cluster's or Sentinel's address
     * (another may answer) wait as before (docs/client.md). */
    if (status == UV_ECONNREFUSED && !conn->was_ready &&
        strcmp(conn->net->topo->name, "standalone") == 0) {
      __atomic_store_n(&conn->net->refused, 1, __ATOMIC_RELEASE);
      while (conn->waiting)
        dlock__req_finish(pop(&conn->waiting, &conn->waiting_tail), NULL,
                          DLOCK_EIO, conn->last_error);
    }
    return;
  }
  if (conn->host || !conn->net->uri->path)
    uv_tcp_nodelay(&conn->u.tcp, 1);
  int rc = uv_read_start(&conn->u.stream, on_alloc, on_read);
  if (rc < 0) {
    conn_fail(conn, "read failed: %s", uv_strerror(rc));
    return;
  }
  if (conn->net->tls) { /* TLS first: its handshake, then Redis's */
    conn->tls = dlock__tls_new(conn->net->tls,
                               conn->host ? conn->host : conn->net->uri->host);
    if (conn->tls == NULL) {
      conn_fail(conn, "out of memory for TLS");
      return;
    }
    conn->state = CONN_TLS;
    tls_step(conn);
    return;
  }
  connected(conn);
}

/* The TLS handshake goes on with what arrived; once it is done the Redis
 * handshake starts. A failure fails conn (a certificate or protocol
 * failure fails the calls waiting too: waiting will not cure it). Whether
 * records may be read now is conn's state: CONN_HANDSHAKE or CONN_READY. */
static void tls_step(dlock__conn *conn) {
  char why[1024];
  int done;
  int rc = dlock__tls_handshake(conn->tls, &done, why, sizeof why);
  if (tls_out(conn) != 0)
    return;
  if (rc != DLOCK_OK) {
    conn_fail(conn, "%s", why);
    fail_list(&conn->waiting, &conn->waiting_tail, rc, conn->last_error);
    return;
  }
  if (done)
    connected(conn);
}

/* Connected (and TLS done): the Redis handshake. */
static void connected(dlock__conn *conn) {
  conn->state = CONN_HANDSHAKE;
  conn->handshake_left = 0;
  if (conn->bare) {
    conn_ready(conn);
    return;
  }
  if (dlock__handshake(conn->net, handshake_send, conn) != DLOCK_OK)
    conn_fail(conn, "out of memory in the handshake");
}

static void resolved(dlock__conn *conn, int status, struct addrinfo *res) {
  conn->resolving = 0;
  if (conn->state != CONN_CONNECTING) {
    if (res)
      uv_freeaddrinfo(res);
    if (conn->state == CONN_CLOSING && !conn->net->stopping)
      conn_closed(conn);
    return;
  }
  if (status < 0) {
    conn_fail(conn, "cannot resolve host: %s", uv_strerror(status));
    return;
  }
  const struct addrinfo *ai = res;
  for (const struct addrinfo *a = res; a; a = a->ai_next)
    if (a->ai_family == AF_INET) { /* Redis binds 127.0.0.1 by default */
      ai = a;
      break;
    }
  uv_tcp_init(conn->net->loop, &conn->u.tcp);
  conn->net->live++;
  conn->u.handle.data = conn;
  const char *source = conn->net->opts->source_addr;
  struct sockaddr_storage src;
  socklen_t srclen;
  int rc = 0;
  if (source && (dlock__sock_source(source, &src, &srclen) != 0 ||
                 src.ss_family != ai->ai_family))
    rc = UV_EAFNOSUPPORT; /* checked at open: the family differs */
  else if (source)
    rc = uv_tcp_bind(&conn->u.tcp, (const struct sockaddr *)&src, 0);
  if (rc == 0)
    rc = uv_tcp_connect(&conn->connect_req, &conn->u.tcp, ai->ai_addr,
                        on_connect);
  uv_freeaddrinfo(res);
  if (rc < 0 && source)
    conn_fail(conn, "cannot connect from source_addr %s: %s", source,
              uv_strerror(rc));
  else if (rc < 0)
    conn_fail(conn, "connect failed: %s%s", uv_strerror(rc), dlock__fd_hint(rc));
}

static void on_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res) {
  dlock__conn *conn = g->data;
  dlock__net *n = conn->net;
  resolved(conn, status, res);
  n->hooks->live_done(n); /* the request has ended */
}

void dlock__conn_use(dlock__conn *conn) {
  if (!conn->started && !conn->net->stopping)
    conn->start_wanted = 1; /* started by dlock__conn_start_wanted */
}

void dlock__conn_start_wanted(dlock__conn *conn) {
  if (conn->start_wanted && !conn->started && !conn->net->stopping)
    dlock__conn_start(conn);
  conn->start_wanted = 0;
}

void dlock__conn_start(dlock__conn *conn) {
  dlock__net *n = conn->net;
  conn->started = 1;
  conn->state = CONN_CONNECTING;
  conn->connect_started_ms = dlock__now_ms();
  conn->u.handle.data = NULL;
  conn->connect_req.data = conn;
  n->topo->pick(conn);
  /* a reader is made with the connection, and again after a failure: an
   * allocation that failed there fails this attempt (retried as any) */
  if (conn->reader == NULL && (conn->reader = redisReaderCreate()) == NULL) {
    conn_fail(conn, "out of memory for the reply reader");
    return;
  }
  if (n->uri->path && !conn->host) {
    uv_pipe_init(n->loop, &conn->u.pipe, 0);
    n->live++;
    conn->u.handle.data = conn;
    uv_pipe_connect(&conn->connect_req, &conn->u.pipe, n->uri->path,
                    on_connect);
  } else {
    char port[16];
    snprintf(port, sizeof port, "%d", conn->host ? conn->port : n->uri->port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    conn->gai_req.data = conn;
    int rc = uv_getaddrinfo(n->loop, &conn->gai_req, on_resolved,
                            conn->host ? conn->host : n->uri->host, port, &hints);
    if (rc < 0) {
      conn_fail(conn, "cannot resolve host: %s", uv_strerror(rc));
      return;
    }
    n->live++;
    conn->resolving = 1;
  }
  conn_arm(conn);
}

static void on_timer(uv_timer_t *t) {
  dlock__conn *conn = t->data;
  const dlock_client_opts *o = conn->net->opts;
  int64_t now = dlock__now_ms();
  conn->timer_due = 0;
  if (conn->net->stopping)
    return;
  if ((conn->state == CONN_CONNECTING || conn->state == CONN_TLS ||
       conn->state == CONN_HANDSHAKE) &&
      now >= conn->connect_started_ms + o->connect_timeout_ms)
    conn_fail(conn, "%s timed out after %lld ms%s",
              conn->state == CONN_TLS ? "TLS handshake" : "connect",
              (long long)o->connect_timeout_ms,
              conn->state == CONN_TLS ? " (no TLS answer: a plain port?)" : "");
  if (conn->state == CONN_READY && conn->inflight &&
      now >= conn->inflight->sent_ms + o->command_timeout_ms)
    conn_fail(conn, "no reply within the command timeout (%lld ms)",
              (long long)o->command_timeout_ms);
  while (conn->waiting &&
         now >= conn->waiting->queued_ms + o->connect_timeout_ms) {
    char why[1400], addr[300];
    if (conn->last_error[0]) /* it names the address */
      snprintf(why, sizeof why, "not connected within %lld ms: %s",
               (long long)o->connect_timeout_ms, conn->last_error);
    else /* the call was queued before the connect began: it times out
          * first, and says what the connection is doing */
      snprintf(why, sizeof why, "not connected to %s within %lld ms%s",
               where(conn, addr, sizeof addr),
               (long long)o->connect_timeout_ms,
               conn->state == CONN_TLS
                   ? ": TLS handshake timed out (no TLS answer yet: a plain "
                     "port?)"
                   : conn->state == CONN_CONNECTING ? ": connect timed out"
                                                    : "");
    dlock__req_finish(pop(&conn->waiting, &conn->waiting_tail), NULL,
                      DLOCK_EIO, why);
  }
  if (conn->state == CONN_DOWN && !conn->held && now >= conn->reconnect_at_ms)
    dlock__conn_start(conn);
  resend_parked(conn, now);
  conn_arm(conn);
}

void dlock__conn_unhold(dlock__conn *conn) {
  if (!conn->held)
    return;
  conn->held = 0;
  if (conn->state == CONN_DOWN && !conn->net->stopping) {
    conn->reconnect_at_ms = dlock__now_ms(); /* where to is known now */
    conn_arm(conn);
  }
}

void dlock__conn_init(dlock__net *n, dlock__conn *conn, int is_sub) {
  memset(conn, 0, sizeof *conn);
  conn->net = n;
  conn->is_sub = is_sub;
  conn->role = is_sub ? "pub/sub connection" : "command connection";
  conn->state = CONN_DOWN;
  conn->reader = redisReaderCreate();
  uv_timer_init(n->loop, &conn->timer);
  n->live++;
  conn->timer.data = conn;
}

void dlock__conn_shutdown(dlock__conn *conn, int status) {
  fail_inflight(conn, status, "client closed");
  fail_list(&conn->waiting, &conn->waiting_tail, status, "client closed");
  fail_list(&conn->parked, &conn->parked_tail, status, "client closed");
  if (conn->resolving)
    uv_cancel((uv_req_t *)&conn->gai_req);
  if (conn->u.handle.data != NULL && !uv_is_closing(&conn->u.handle))
    uv_close(&conn->u.handle, on_closed);
  conn->state = CONN_CLOSING;
  uv_close((uv_handle_t *)&conn->timer, on_timer_closed);
  redisReaderFree(conn->reader);
  conn->reader = NULL;
  dlock__buf_free(&conn->out);
  dlock__buf_free(&conn->sub_fifo);
  dlock__tls_free(conn->tls);
  conn->tls = NULL;
}
