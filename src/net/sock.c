/* A connection the calling thread drives itself (net/sock.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/base.h"
#include "net/sock.h"

int dlock__sock_resolve(const char *host, int port, struct sockaddr_storage *ss,
                        socklen_t *len) {
  char port_s[16];
  snprintf(port_s, sizeof port_s, "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port_s, &hints, &res) != 0 || res == NULL)
    return -1;
  const struct addrinfo *ai = res;
  for (const struct addrinfo *a = res; a; a = a->ai_next)
    if (a->ai_family == AF_INET) {
      ai = a;
      break;
    }
  if (ai->ai_addrlen > sizeof *ss) {
    freeaddrinfo(res);
    return -1;
  }
  memcpy(ss, ai->ai_addr, ai->ai_addrlen);
  *len = (socklen_t)ai->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

int dlock__sock_wait(int fd, short events, int64_t deadline_us) {
  for (;;) {
    int64_t left = deadline_us - dlock__now_us();
    if (left <= 0)
      return DLOCK_ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int ms = (int)((left + 999) / 1000);
    int k = poll(&p, 1, ms);
    if (k > 0)
      return DLOCK_OK;
    if (k < 0 && errno != EINTR)
      return DLOCK_EIO;
  }
}

void dlock__sock_close(dlock__sock *s) {
  dlock__tls_free(s->tls);
  s->tls = NULL;
  if (s->fd >= 0)
    close(s->fd);
  s->fd = -1;
  if (s->reader)
    redisReaderFree(s->reader);
  s->reader = NULL;
}

/* Write all of p to the socket itself. */
static int send_raw(dlock__sock *s, const char *p, size_t len,
                    int64_t deadline_us, char *why, size_t n) {
  while (len > 0) {
    ssize_t k = send(s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      len -= (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = dlock__sock_wait(s->fd, POLLOUT, deadline_us);
      if (r == DLOCK_OK)
        continue;
      if (r == DLOCK_ETIMEDOUT) {
        snprintf(why, n, "write did not complete within the command timeout");
        return DLOCK_EIO;
      }
    }
    snprintf(why, n, "write failed: %s", strerror(errno));
    return DLOCK_EIO;
  }
  return DLOCK_OK;
}

/* What the TLS session has for the socket, sent. */
static int send_tls_out(dlock__sock *s, int64_t deadline_us, char *why,
                        size_t n) {
  char buf[16384];
  size_t k;
  while ((k = dlock__tls_take(s->tls, buf, sizeof buf)) > 0)
    if (send_raw(s, buf, k, deadline_us, why, n) != DLOCK_OK)
      return DLOCK_EIO;
  return DLOCK_OK;
}

int dlock__sock_send(dlock__sock *s, const char *p, size_t len,
                     int64_t deadline_us, char *why, size_t n) {
  if (s->tls == NULL)
    return send_raw(s, p, len, deadline_us, why, n);
  if (dlock__tls_write(s->tls, p, len, why, n) != DLOCK_OK)
    return DLOCK_EIO;
  return send_tls_out(s, deadline_us, why, n);
}

ssize_t dlock__sock_take(dlock__sock *s, char *why, size_t n) {
  char buf[16384];
  for (;;) {
    if (s->tls && dlock__tls_has_input(s->tls)) { /* records in: theirs first */
      ssize_t k = dlock__tls_read(s->tls, buf, sizeof buf, why, n);
      if (k < 0)
        return -2;
      if (k > 0)
        return redisReaderFeed(s->reader, buf, (size_t)k) == REDIS_OK ? k : -3;
    }
    ssize_t k = recv(s->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (k > 0 && s->tls) {
      if (dlock__tls_feed(s->tls, buf, (size_t)k) != DLOCK_OK) {
        snprintf(why, n, "out of memory for TLS");
        return -2;
      }
      continue; /* decrypt it */
    }
    if (k > 0)
      return redisReaderFeed(s->reader, buf, (size_t)k) == REDIS_OK ? k : -3;
    if (k == 0)
      return -1;
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return 0;
    snprintf(why, n, "read failed: %s", strerror(errno));
    return -2;
  }
}

/* A receive timeout runs on the kernel's timer wheel, which fires a long
 * timeout late by up to an eighth of it (300 ms: up to 32 ms at HZ 250;
 * the test t08 saw calls end 319-335 ms into a 300 ms timeout). So the
 * socket's timeout is seven eighths of ms less 10 ms: it ends before the
 * call's deadline, and a poll(2) (a precise timer) waits out the rest. */
int dlock__sock_sleepy(dlock__sock *s, int64_t ms) {
  int64_t early = ms - ms / 8 - 10;
  if (early < 1)
    early = 1;
  struct timeval tv = {.tv_sec = (time_t)(early / 1000),
                       .tv_usec = (suseconds_t)(early % 1000) * 1000};
  int flags = fcntl(s->fd, F_GETFL);
  if (s->tls != NULL || flags < 0 ||
      setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      fcntl(s->fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return -1;
  s->sleep_ms = ms;
  return 0;
}

ssize_t dlock__sock_take_sleeping(dlock__sock *s, int64_t deadline_us,
                                  char *why, size_t n) {
  char buf[16384];
  for (;;) {
    int64_t left = deadline_us - dlock__now_us();
    if (left <= 0)
      return 0;
    int flags = 0;
    if (left < s->sleep_ms * 1000 - 1000) { /* less than the timeout left */
      int w = dlock__sock_wait(s->fd, POLLIN, deadline_us);
      if (w != DLOCK_OK) {
        snprintf(why, n, "read failed: %s", strerror(errno));
        return w == DLOCK_ETIMEDOUT ? 0 : -2;
      }
      flags = MSG_DONTWAIT;
    }
    ssize_t k = recv(s->fd, buf, sizeof buf, flags);
    if (k > 0)
      return redisReaderFeed(s->reader, buf, (size_t)k) == REDIS_OK ? k : -3;
    if (k == 0)
      return -1;
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      continue; /* the receive timeout (early): poll for the rest */
    snprintf(why, n, "read failed: %s", strerror(errno));
    return -2;
  }
}

/* A new TLS session's handshake, within deadline_us. */
static int tls_handshake(dlock__sock *s, int64_t deadline_us, char *why,
                         size_t n) {
  char buf[16384];
  for (;;) {
    int done;
    int rc = dlock__tls_handshake(s->tls, &done, why, n);
    if (rc != DLOCK_OK) {
      char ignored[64]; /* our alert, if any: best effort */
      send_tls_out(s, deadline_us, ignored, sizeof ignored);
      return rc; /* DLOCK_ETLS or DLOCK_EIO, why says which */
    }
    if (send_tls_out(s, deadline_us, why, n) != DLOCK_OK)
      return DLOCK_EIO;
    if (done)
      return DLOCK_OK;
    int w = dlock__sock_wait(s->fd, POLLIN, deadline_us);
    if (w != DLOCK_OK) {
      snprintf(why, n, "TLS handshake %s",
               w == DLOCK_ETIMEDOUT ? "timed out" : "failed: poll error");
      return DLOCK_EIO;
    }
    ssize_t k = recv(s->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (k == 0) {
      snprintf(why, n, "connection closed during the TLS handshake");
      return DLOCK_EIO;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      snprintf(why, n, "TLS handshake: read failed: %s", strerror(errno));
      return DLOCK_EIO;
    }
    if (k > 0 && dlock__tls_feed(s->tls, buf, (size_t)k) != DLOCK_OK) {
      snprintf(why, n, "out of memory for TLS");
      return DLOCK_EIO;
    }
  }
}

int dlock__sock_source(const char *addr, struct sockaddr_storage *ss,
                       socklen_t *len) {
  memset(ss, 0, sizeof *ss);
  struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
  if (inet_pton(AF_INET, addr, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    *len = sizeof *v4;
    return 0;
  }
  if (inet_pton(AF_INET6, addr, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    *len = sizeof *v6;
    return 0;
  }
  return -1;
}

int dlock__sock_init(dlock__sock *s, int family, const char *source, char *why,
                     size_t n) {
  s->tls = NULL;
  s->sleep_ms = 0;
  s->fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  s->reader = redisReaderCreate();
  struct sockaddr_storage src;
  socklen_t len = 0;
  if (s->fd >= 0 && s->reader != NULL && source &&
      (dlock__sock_source(source, &src, &len) != 0 || src.ss_family != family ||
       bind(s->fd, (const struct sockaddr *)&src, len) != 0)) {
    snprintf(why, n, "cannot connect from source_addr %s: %s", source,
             src.ss_family != family ? "not the server address's family"
                                     : strerror(errno));
    dlock__sock_close(s);
    return DLOCK_EIO;
  }
  if (s->fd >= 0 && s->reader != NULL)
    return DLOCK_OK;
  int rc = s->reader == NULL ? DLOCK_ENOMEM : DLOCK_EIO;
  int err = errno;
  if (s->fd < 0)
    snprintf(why, n, "%s%s", strerror(err), dlock__fd_hint(-err));
  else
    snprintf(why, n, "out of memory");
  dlock__sock_close(s);
  return rc;
}

int dlock__sock_open(dlock__sock *s, const struct sockaddr_storage *ss,
                     socklen_t len, const char *source, dlock__tls_ctx *tls,
                     const char *host, int64_t deadline_us, char *why,
                     size_t n) {
  int rc = dlock__sock_init(s, ss->ss_family, source, why, n);
  return rc == DLOCK_OK
             ? dlock__sock_connect(s, ss, len, tls, host, deadline_us, why, n)
             : rc;
}

int dlock__sock_connect(dlock__sock *s, const struct sockaddr_storage *ss,
                        socklen_t len, dlock__tls_ctx *tls, const char *host,
                        int64_t deadline_us, char *why, size_t n) {
  int ok = connect(s->fd, (const struct sockaddr *)ss, len) == 0;
  int err = ok ? 0 : errno;
  if (!ok && err == EINPROGRESS) {
    int w = dlock__sock_wait(s->fd, POLLOUT, deadline_us);
    socklen_t elen = sizeof err;
    if (w == DLOCK_ETIMEDOUT)
      err = ETIMEDOUT;
    else if (w != DLOCK_OK || getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
      err = errno;
    ok = err == 0;
  }
  if (!ok) {
    snprintf(why, n, "connect failed: %s", strerror(err));
    dlock__sock_close(s);
    return DLOCK_EIO;
  }
  if (ss->ss_family != AF_UNIX) {
    int one = 1;
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (tls == NULL)
    return DLOCK_OK;
  if ((s->tls = dlock__tls_new(tls, host)) == NULL) {
    snprintf(why, n, "out of memory for TLS");
    dlock__sock_close(s);
    return dlock__oom();
  }
  int rc = tls_handshake(s, deadline_us, why, n);
  if (rc != DLOCK_OK) {
    dlock__sock_close(s);
    return rc;
  }
  return DLOCK_OK;
}

redisReply *dlock__sock_command(dlock__sock *s, int64_t deadline_us, char *why,
                                size_t n, const char *fmt, ...) {
  char *cmd = NULL;
  va_list ap;
  va_start(ap, fmt);
  int len = redisvFormatCommand(&cmd, fmt, ap);
  va_end(ap);
  if (len < 0) {
    snprintf(why, n, "out of memory");
    return NULL;
  }
  int rc = dlock__sock_send(s, cmd, (size_t)len, deadline_us, why, n);
  memset(cmd, 0, (size_t)len); /* it may hold a password */
  redisFreeCommand(cmd);
  if (rc != DLOCK_OK)
    return NULL;
  for (;;) {
    void *r = NULL;
    if (redisReaderGetReply(s->reader, &r) != REDIS_OK) {
      snprintf(why, n, "reply parse error: %s", s->reader->errstr);
      return NULL;
    }
    if (r != NULL)
      return r;
    ssize_t k = dlock__sock_take(s, why, n);
    if (k > 0)
      continue;
    if (k == -1) {
      snprintf(why, n, "connection closed by the server");
      return NULL;
    }
    if (k == -3) {
      snprintf(why, n, "reply parse error: %s", s->reader->errstr);
      return NULL;
    }
    if (k < 0)
      return NULL;
    int w = dlock__sock_wait(s->fd, POLLIN, deadline_us);
    if (w == DLOCK_ETIMEDOUT) {
      snprintf(why, n, "no reply within the command timeout");
      return NULL;
    }
    if (w != DLOCK_OK) {
      snprintf(why, n, "read failed: %s", strerror(errno));
      return NULL;
    }
  }
}
