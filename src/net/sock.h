/* A connection the calling thread drives itself: a non-blocking socket,
 * waited on with poll() up to a deadline, TLS through net/tls.h when the
 * client has a TLS context, and a RESP reply reader.
 *
 * Two users: the direct path's pooled connections (direct/direct.c) and the
 * sentinel search's one-off connections (net/sentinel.c). The messages put
 * into why say what failed, never where: the caller prefixes the address. */
#ifndef DLOCK_NET_SOCK_H
#define DLOCK_NET_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "net/tls.h"

typedef struct dlock__sock {
  int fd;            /* -1 when closed */
  dlock__tls *tls;   /* the TLS session, NULL on a plain connection */
  redisReader *reader;
  int64_t sleep_ms;  /* dlock__sock_sleepy made it blocking, with this
                        receive timeout; 0: non-blocking */
} dlock__sock;

/* A source address (an IP literal) as a sockaddr with port 0: 0, or -1
 * when addr is not one. */
int dlock__sock_source(const char *addr, struct sockaddr_storage *ss,
                       socklen_t *len);

/* host:port's address (IPv4 first, as the engine connects). 0 or -1. */
int dlock__sock_resolve(const char *host, int port, struct sockaddr_storage *ss,
                        socklen_t *len);

/* Connect to ss within deadline_us (dlock__now_us's clock), with TCP_NODELAY,
 * then, when tls is not NULL, the TLS handshake (host: the name the
 * certificate must show). DLOCK_OK, DLOCK_ENOMEM or DLOCK_EIO with why; s
 * is closed on failure. */
int dlock__sock_open(dlock__sock *s, const struct sockaddr_storage *ss,
                     socklen_t len, const char *source, dlock__tls_ctx *tls,
                     const char *host, int64_t deadline_us, char *why,
                     size_t n);
/* The same in two steps: the socket (and reader) first, bound to source
 * when it is not NULL (dlock_client_opts.source_addr), DLOCK_OK or
 * DLOCK_EIO / DLOCK_ENOMEM with why; then the connect and handshake, which
 * a shutdown(2) of s->fd from another thread cuts short. */
int dlock__sock_init(dlock__sock *s, int family, const char *source, char *why,
                     size_t n);
int dlock__sock_connect(dlock__sock *s, const struct sockaddr_storage *ss,
                        socklen_t len, dlock__tls_ctx *tls, const char *host,
                        int64_t deadline_us, char *why, size_t n);
void dlock__sock_close(dlock__sock *s);

/* Wait until fd is ready for events or deadline_us passes: DLOCK_OK
 * ready, DLOCK_ETIMEDOUT, DLOCK_EIO (poll failed: errno says why). */
int dlock__sock_wait(int fd, short events, int64_t deadline_us);

/* Write all of p (encrypted first on TLS). DLOCK_OK or DLOCK_EIO with why. */
int dlock__sock_send(dlock__sock *s, const char *p, size_t len,
                     int64_t deadline_us, char *why, size_t n);

/* Bytes from the socket, without blocking, into the reply reader (through
 * the TLS session on TLS): > 0 some were taken, 0 none yet, -1 the end of
 * the stream, -2 an error (why set), -3 a reply the reader refused. */
ssize_t dlock__sock_take(dlock__sock *s, char *why, size_t n);

/* Let a plain (not TLS) socket's reads sleep in recv(2) for up to ms when
 * nothing is in, as a blocking client's do: the descriptor becomes
 * blocking with a receive timeout (every other call here passes
 * MSG_DONTWAIT and stays non-blocking). 0, or -1 (errno). */
int dlock__sock_sleepy(dlock__sock *s, int64_t ms);
/* For a socket made sleepy: sleep in recv(2) until bytes come (into the
 * reply reader), the receive timeout passes or deadline_us has: as
 * dlock__sock_take, 0 meaning the time passed. One system call where a
 * poll and a read would be two. */
ssize_t dlock__sock_take_sleeping(dlock__sock *s, int64_t deadline_us,
                                  char *why, size_t n);

/* Send one command (printf-like, as redisCommand) and read its reply within
 * deadline_us: the reply (free with freeReplyObject), or NULL with why. */
redisReply *dlock__sock_command(dlock__sock *s, int64_t deadline_us, char *why,
                                size_t n, const char *fmt, ...);

#endif /* DLOCK_NET_SOCK_H */
