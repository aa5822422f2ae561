/* TLS on dlock's own sockets (docs/tls.md): OpenSSL driven through memory
 * BIOs, so the bytes travel on whatever carries them (the engine's libuv
 * streams, a direct connection's socket) and no TLS call ever blocks.
 *
 * A client opened on a rediss:// URI (or rediss+cluster://,
 * rediss+sentinel://) has one context (dlock__tls_ctx: trust, client
 * certificate, verification), and each connection a session of its own
 * (dlock__tls). Secrets never reach a message: errors name files and what
 * failed, never their contents. */
#ifndef DLOCK_NET_TLS_H
#define DLOCK_NET_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include <dlock/client.h>

typedef struct dlock__tls_ctx dlock__tls_ctx;
typedef struct dlock__tls dlock__tls;

/* The context for opts' TLS settings: TLS 1.2 or later, the system trust
 * store unless tls_ca_file / tls_ca_dir, the client certificate and key
 * when given (both or neither), verification unless tls_insecure.
 * DLOCK_OK, or DLOCK_EINVAL / DLOCK_ENOMEM with a message naming the file
 * or setting that is wrong. */
int dlock__tls_ctx_new(const dlock_client_opts *opts, dlock__tls_ctx **out);
void dlock__tls_ctx_free(dlock__tls_ctx *ctx);

/* A session to host (its name is what the certificate must show, and the
 * SNI name unless host is an IP address; tls_server_name overrides both),
 * or NULL (out of memory). Ready to start its handshake. */
dlock__tls *dlock__tls_new(dlock__tls_ctx *ctx, const char *host);
void dlock__tls_free(dlock__tls *t);

/* Bytes read from the socket, handed in. DLOCK_OK or DLOCK_ENOMEM. */
int dlock__tls_feed(dlock__tls *t, const char *p, size_t n);

/* Drive the handshake with what was fed: DLOCK_OK with *done 1 (done) or
 * 0 (it needs more bytes from the server: send what dlock__tls_take gives
 * first), DLOCK_ETLS with
 * why for what the TLS settings must fix (certificate not trusted,
 * expired, hostname mismatch, server not speaking TLS, refused client
 * certificate), or DLOCK_EIO with why. dlock__tls_read and _write fail the
 * same two ways (TLS 1.3 tells a refused client certificate at the first
 * read). */
int dlock__tls_handshake(dlock__tls *t, int *done, char *why, size_t n);
/* The connection of t ended before its first answer: DLOCK_ETLS with why
 * when the server had asked for a client certificate this client does
 * not have (the server's alert can be lost to a reset), else 0. */
int dlock__tls_cert_refused(const dlock__tls *t, char *why, size_t n);

/* Encrypt p for the socket (collect with dlock__tls_take). DLOCK_OK or
 * DLOCK_EIO with why. */
int dlock__tls_write(dlock__tls *t, const char *p, size_t len, char *why,
                     size_t n);

/* Decrypted bytes into buf: > 0 how many, 0 none until more is fed, or
 * DLOCK_EIO with why (the server closed the session, a protocol error). */
ssize_t dlock__tls_read(dlock__tls *t, char *buf, size_t size, char *why,
                        size_t n);

/* 1 when bytes fed in may still yield plaintext (dlock__tls_read is worth
 * a call before reading the socket again). */
int dlock__tls_has_input(const dlock__tls *t);

/* Free OpenSSL's state of the calling thread (its error queue, its random
 * generator): for a thread that made TLS calls and will not exit soon (a
 * libuv pool thread). */
void dlock__tls_thread_done(void);

/* Encrypted bytes waiting for the socket, moved into buf: how many (0:
 * none). */
size_t dlock__tls_take(dlock__tls *t, char *buf, size_t size);

#endif /* DLOCK_NET_TLS_H */
