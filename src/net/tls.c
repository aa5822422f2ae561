/* TLS through memory BIOs (net/tls.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/base.h"
#include "net/tls.h"

struct dlock__tls_ctx {
  SSL_CTX *ssl;
  char *server_name; /* tls_server_name, or NULL */
  int insecure;
};

struct dlock__tls {
  SSL *ssl;
  BIO *in, *out; /* owned by ssl */
  char name[256]; /* what the certificate must show */
  int cert_asked; /* the server asked for a client certificate and this
                     client has none (client_cert_cb) */
};

/* OpenSSL calls this when the server asks for a client certificate and
 * none is set: note it (a TLS 1.3 server that then closes the connection
 * may reset it before its alert is read) and go on without one. */
static int no_cert(SSL *ssl, X509 **x509, EVP_PKEY **pkey) {
  dlock__tls *t = SSL_get_app_data(ssl);
  if (t)
    t->cert_asked = 1;
  (void)x509;
  (void)pkey;
  return 0;
}

int dlock__tls_cert_refused(const dlock__tls *t, char *why, size_t n) {
  if (t == NULL || !t->cert_asked)
    return 0;
  snprintf(why, n, "TLS: the server asked for a client certificate and "
           "closed the connection: give one with tls_cert_file and "
           "tls_key_file");
  return DLOCK_ETLS;
}

/* The reason OpenSSL gives for its last error on this thread (never a
 * secret: a reason string, not data). */
static const char *reason(void) {
  const char *r = ERR_reason_error_string(ERR_peek_last_error());
  return r ? r : "unknown reason";
}

static int bad_file(dlock__tls_ctx *c, const char *opt, const char *path,
                    const char *what) {
  int rc = dlock__fail(DLOCK_EINVAL, "TLS: %s \"%s\": %s (%s)", opt, path,
                       what, reason());
  dlock__tls_ctx_free(c);
  return rc;
}

int dlock__tls_ctx_new(const dlock_client_opts *o, dlock__tls_ctx **out) {
  *out = NULL;
  if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL))
    return dlock__fail(DLOCK_EINVAL, "TLS: tls_cert_file and tls_key_file go "
                       "together (a client certificate needs its key)");
  dlock__tls_ctx *c = calloc(1, sizeof *c);
  if (c == NULL)
    return dlock__oom();
  ERR_clear_error();
  c->ssl = SSL_CTX_new(TLS_client_method());
  if (c->ssl == NULL || (o->tls_server_name &&
                         (c->server_name = strdup(o->tls_server_name)) == NULL)) {
    dlock__tls_ctx_free(c);
    return dlock__fail(DLOCK_ENOMEM, "TLS: out of memory");
  }
  SSL_CTX_set_min_proto_version(c->ssl, TLS1_2_VERSION);
  c->insecure = o->tls_insecure != 0;
  SSL_CTX_set_verify(c->ssl, c->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
  SSL_CTX_set_client_cert_cb(c->ssl, no_cert);
  if (o->tls_ca_file || o->tls_ca_dir) {
    if (SSL_CTX_load_verify_locations(c->ssl, o->tls_ca_file, o->tls_ca_dir) != 1)
      return bad_file(c, o->tls_ca_file ? "tls_ca_file" : "tls_ca_dir",
                      o->tls_ca_file ? o->tls_ca_file : o->tls_ca_dir,
                      "cannot be read as PEM CA certificates");
  } else if (SSL_CTX_set_default_verify_paths(c->ssl) != 1) {
    dlock__tls_ctx_free(c);
    return dlock__fail(DLOCK_EINVAL, "TLS: the system trust store cannot be "
                       "read (%s): give tls_ca_file", reason());
  }
  if (o->tls_cert_file) {
    if (SSL_CTX_use_certificate_chain_file(c->ssl, o->tls_cert_file) != 1)
      return bad_file(c, "tls_cert_file", o->tls_cert_file,
                      "cannot be read as a PEM certificate");
    if (SSL_CTX_use_PrivateKey_file(c->ssl, o->tls_key_file, SSL_FILETYPE_PEM) != 1)
      return bad_file(c, "tls_key_file", o->tls_key_file,
                      strstr(reason(), "key values mismatch")
                          ? "does not match tls_cert_file: it is the key of "
                            "another certificate"
                          : "cannot be read as a PEM private key");
    if (SSL_CTX_check_private_key(c->ssl) != 1)
      return bad_file(c, "tls_key_file", o->tls_key_file,
                      "does not match tls_cert_file");
  }
  *out = c;
  return DLOCK_OK;
}

void dlock__tls_ctx_free(dlock__tls_ctx *c) {
  if (c == NULL)
    return;
  SSL_CTX_free(c->ssl);
  free(c->server_name);
  free(c);
}

static int is_ip(const char *name) {
  unsigned char buf[16];
  return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

dlock__tls *dlock__tls_new(dlock__tls_ctx *c, const char *host) {
  dlock__tls *t = calloc(1, sizeof *t);
  if (t == NULL)
    return NULL;
  snprintf(t->name, sizeof t->name, "%s", c->server_name ? c->server_name : host);
  t->ssl = SSL_new(c->ssl);
  t->in = BIO_new(BIO_s_mem());
  t->out = BIO_new(BIO_s_mem());
  if (t->ssl == NULL || t->in == NULL || t->out == NULL) {
    BIO_free(t->in);
    BIO_free(t->out);
    SSL_free(t->ssl);
    free(t);
    return NULL;
  }
  BIO_set_mem_eof_return(t->in, -1); /* empty: wait for more, not EOF */
  SSL_set_app_data(t->ssl, t);
  SSL_set_bio(t->ssl, t->in, t->out);
  SSL_set_connect_state(t->ssl);
  int ip = is_ip(t->name);
  if (!ip)
    SSL_set_tlsext_host_name(t->ssl, t->name);
  if (!c->insecure) {
    if (ip)
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), t->name);
    else
      SSL_set1_host(t->ssl, t->name);
  }
  return t;
}

void dlock__tls_free(dlock__tls *t) {
  if (t == NULL)
    return;
  SSL_free(t->ssl); /* and its BIOs */
  free(t);
}

int dlock__tls_feed(dlock__tls *t, const char *p, size_t n) {
  while (n > 0) {
    int k = BIO_write(t->in, p, n > 65536 ? 65536 : (int)n);
    if (k <= 0)
      return dlock__fail(DLOCK_ENOMEM, "TLS: out of memory");
    p += k;
    n -= (size_t)k;
  }
  return DLOCK_OK;
}

/* Does OpenSSL's reason say the other side is no TLS server? */
static int not_tls(const char *r) {
  static const char *const signs[] = {"wrong version number", "packet length too long",
                                      "unknown protocol", "record layer failure",
                                      "http request"};
  for (size_t i = 0; i < sizeof signs / sizeof signs[0]; i++)
    if (strstr(r, signs[i]))
      return 1;
  return 0;
}

/* What failed, into why: the certificate check's result first, then the
 * alerts and records OpenSSL saw. Returns DLOCK_ETLS for what the settings
 * must fix (the server's certificate failed verification, the server
 * refused ours, the port does not speak TLS), DLOCK_EIO else. */
static int describe(dlock__tls *t, int err, char *why, size_t n) {
  long v = SSL_get_verify_result(t->ssl);
  const char *r = reason();
  switch (v) {
  case X509_V_OK:
    break;
  case X509_V_ERR_CERT_HAS_EXPIRED:
    snprintf(why, n, "TLS: the server's certificate has expired");
    return DLOCK_ETLS;
  case X509_V_ERR_CERT_NOT_YET_VALID:
    snprintf(why, n, "TLS: the server's certificate is not valid yet");
    return DLOCK_ETLS;
  case X509_V_ERR_HOSTNAME_MISMATCH:
  case X509_V_ERR_IP_ADDRESS_MISMATCH:
    snprintf(why, n, "TLS: hostname mismatch: the server's certificate is not "
             "for %s", t->name);
    return DLOCK_ETLS;
  case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
  case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
  case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
  case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
  case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
  case X509_V_ERR_CERT_UNTRUSTED:
    snprintf(why, n, "TLS: the server's certificate is not trusted (%s): give "
             "its CA with tls_ca_file", X509_verify_cert_error_string(v));
    return DLOCK_ETLS;
  default:
    snprintf(why, n, "TLS: the server's certificate failed verification: %s",
             X509_verify_cert_error_string(v));
    return DLOCK_ETLS;
  }
  if (not_tls(r)) {
    snprintf(why, n, "TLS: the server does not speak TLS (%s): a plain port?", r);
    return DLOCK_ETLS;
  }
  if (strstr(r, "alert") && (strstr(r, "certificate") || strstr(r, "unknown ca"))) {
    snprintf(why, n, "TLS: the server refused the client certificate (%s)", r);
    return DLOCK_ETLS;
  }
  if (err == SSL_ERROR_ZERO_RETURN)
    snprintf(why, n, "TLS: the server closed the session");
  else
    snprintf(why, n, "TLS: %s", r);
  return DLOCK_EIO;
}

int dlock__tls_handshake(dlock__tls *t, int *done, char *why, size_t n) {
  ERR_clear_error();
  int r = SSL_do_handshake(t->ssl);
  *done = r == 1;
  if (r == 1)
    return DLOCK_OK;
  int e = SSL_get_error(t->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return DLOCK_OK;
  return describe(t, e, why, n);
}

int dlock__tls_write(dlock__tls *t, const char *p, size_t len, char *why,
                     size_t n) {
  while (len > 0) {
    ERR_clear_error();
    int k = SSL_write(t->ssl, p, len > 65536 ? 65536 : (int)len);
    if (k <= 0)
      return describe(t, SSL_get_error(t->ssl, k), why, n);
    p += k;
    len -= (size_t)k;
  }
  return DLOCK_OK;
}

ssize_t dlock__tls_read(dlock__tls *t, char *buf, size_t size, char *why,
                        size_t n) {
  ERR_clear_error();
  int k = SSL_read(t->ssl, buf, size > 65536 ? 65536 : (int)size);
  if (k > 0)
    return k;
  int e = SSL_get_error(t->ssl, k);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return 0;
  return describe(t, e, why, n);
}

int dlock__tls_has_input(const dlock__tls *t) {
  return BIO_ctrl_pending(t->in) > 0 || SSL_pending(t->ssl) > 0;
}

size_t dlock__tls_take(dlock__tls *t, char *buf, size_t size) {
  size_t pending = BIO_ctrl_pending(t->out);
  if (pending == 0)
    return 0;
  int k = BIO_read(t->out, buf, (int)(pending < size ? pending : size));
  return k > 0 ? (size_t)k : 0;
}

void dlock__tls_thread_done(void) { OPENSSL_thread_stop(); }
