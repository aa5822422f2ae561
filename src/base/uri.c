/* redis://[[user]:password@]host[:port][/db]
 * unix://[[user]:password@]/path/to/socket[?db=N]
 * redis+cluster://[[user]:password@]host[:port][,host[:port]...][/0]
 *   [?pubsub=auto|sharded|classic]
 * redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/NAME[/db]
 *   (the credentials are the master's; sentinels listen on 26379)
 * rediss://, rediss+cluster://, rediss+sentinel://: the same over TLS
 * valkey..., valkeys...: the same as redis..., rediss... (Redisson's
 * spellings) */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "dlock/client.h"
#include "base/uri.h"

static int hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c = tolower(c);
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

/* Copy [s, s+n) percent-decoded into a new string. */
static int decode(const char *s, size_t n, char **out, const char *what) {
  char *d = malloc(n + 1);
  if (d == NULL)
    return dlock__oom();
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%') {
      int hi = i + 1 < n ? hexval((unsigned char)s[i + 1]) : -1;
      int lo = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        free(d);
        return dlock__fail(DLOCK_EINVAL, "bad percent escape in URI %s", what);
      }
      d[j++] = (char)(hi * 16 + lo);
      i += 2;
      continue;
    }
    d[j++] = s[i];
  }
  d[j] = '\0';
  if (strlen(d) != j) {
    free(d);
    return dlock__fail(DLOCK_EINVAL, "NUL byte in URI %s", what);
  }
  *out = d;
  return DLOCK_OK;
}

static int parse_long(const char *s, size_t n, long min, long max, long *out) {
  if (n == 0 || n > 10)
    return -1;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i]))
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

/* Overwrite a secret before its memory goes back (a volatile pointer: the
 * stores are not optimised away as dead). */
static void wipe(char *s) {
  volatile char *v = s;
  while (s && *v)
    *v++ = '\0';
}

void dlock__uri_wipe(dlock__uri *u) {
  wipe(u->password);
  wipe(u->sentinel_password);
}

void dlock__uri_free(dlock__uri *u) {
  dlock__uri_wipe(u);
  free(u->host);
  free(u->path);
  free(u->user);
  free(u->password);
  for (int i = 0; i < u->nseeds; i++)
    free(u->seed_hosts[i]);
  free(u->seed_hosts);
  free(u->seed_ports);
  free(u->master_name);
  free(u->sentinel_user);
  free(u->sentinel_password);
  memset(u, 0, sizeof *u);
}

/* Replace *field with a copy of value (the old one wiped). */
static int replace(char **field, const char *value) {
  char *copy = strdup(value);
  if (copy == NULL)
    return dlock__oom();
  wipe(*field);
  free(*field);
  *field = copy;
  return DLOCK_OK;
}

int dlock__uri_set_auth(dlock__uri *u, const char *user, const char *password) {
  int rc = DLOCK_OK;
  if (user)
    rc = replace(&u->user, user);
  if (rc == DLOCK_OK && password)
    rc = replace(&u->password, password);
  return rc;
}

int dlock__uri_set_sentinel_auth(dlock__uri *u, const char *user,
                                 const char *password) {
  int rc = DLOCK_OK;
  if ((user || password) && u->topology != DLOCK__URI_SENTINEL)
    return dlock__fail(DLOCK_EINVAL, "sentinel_username and "
                       "sentinel_password are for redis+sentinel:// URIs");
  if (user)
    rc = replace(&u->sentinel_user, user);
  if (rc == DLOCK_OK && password)
    rc = replace(&u->sentinel_password, password);
  return rc;
}

size_t dlock_uri_redact(const char *uri, char *out, size_t size) {
  if (uri == NULL)
    uri = "";
  /* the userinfo ends at the last '@' (a '@' in a password is the usual
   * reason to percent-encode it, but over-redacting is harmless) */
  const char *scheme = strstr(uri, "://");
  const char *start = scheme ? scheme + 3 : uri;
  const char *at = strrchr(start, '@');
  if (at == NULL)
    return (size_t)snprintf(out, size, "%s", uri);
  const char *colon = memchr(start, ':', (size_t)(at - start));
  size_t keep = (size_t)((colon ? colon + 1 : start) - uri);
  return (size_t)snprintf(out, size, "%.*s***%s", (int)keep, uri, at);
}

/* The userinfo before the last '@' ahead of the path, if any: user and
 * password into u; *p moves past the '@'. */
static int parse_userinfo(const char **p, int is_unix, dlock__uri *u) {
  const char *s = *p, *end = s + strlen(s), *auth_end = NULL;
  for (const char *q = s; q < end && (is_unix || *q != '/'); q++)
    if (*q == '@')
      auth_end = q;
  if (auth_end == NULL)
    return DLOCK_OK;
  *p = auth_end + 1;
  const char *colon = memchr(s, ':', (size_t)(auth_end - s));
  if (colon == NULL) /* redis://password@host, the common short form */
    return decode(s, (size_t)(auth_end - s), &u->password, "password");
  int rc = DLOCK_OK;
  if (colon > s)
    rc = decode(s, (size_t)(colon - s), &u->user, "user");
  if (rc == DLOCK_OK)
    rc = decode(colon + 1, (size_t)(auth_end - colon - 1), &u->password,
                "password");
  return rc;
}

/* unix://...: /path/to/socket[?db=N] */
static int parse_socket(const char *p, dlock__uri *u) {
  const char *query = strchr(p, '?');
  size_t plen = query ? (size_t)(query - p) : strlen(p);
  if (plen == 0 || p[0] != '/')
    return dlock__fail(DLOCK_EINVAL, "unix:// URI needs an absolute socket path");
  int rc = decode(p, plen, &u->path, "path");
  if (rc != DLOCK_OK || query == NULL)
    return rc;
  if (strncmp(query, "?db=", 4) != 0 ||
      parse_long(query + 4, strlen(query + 4), 0, 1000000, &u->db) != 0)
    return dlock__fail(DLOCK_EINVAL, "bad unix:// query \"%s\" (only ?db=N)",
                       query);
  return DLOCK_OK;
}

static int parse_seeds(const char *p, dlock__uri *u);

/* "host[:port]" in [s, end), host possibly [bracketed]: a decoded copy of
 * the host into *host, the port (when given) into *port. what names the
 * URI in messages; empty is the message for a missing host. */
static int host_port(const char *s, const char *end, char **host, int *port,
                     const char *what, const char *empty) {
  const char *h = s, *h_end;
  if (*s == '[') {
    h = s + 1;
    h_end = memchr(h, ']', (size_t)(end - h));
    if (h_end == NULL)
      return dlock__fail(DLOCK_EINVAL, "unclosed [ in %s host", what);
    s = h_end + 1;
  } else {
    h_end = memchr(s, ':', (size_t)(end - s));
    if (h_end == NULL)
      h_end = end;
    s = h_end;
  }
  if (h_end == h)
    return dlock__fail(DLOCK_EINVAL, "%s", empty);
  long p = *port;
  if (s < end && (*s != ':' ||
                  parse_long(s + 1, (size_t)(end - s - 1), 1, 65535, &p) != 0))
    return dlock__fail(DLOCK_EINVAL, "bad port in %s (1..65535)", what);
  *port = (int)p;
  return decode(h, (size_t)(h_end - h), host, "host");
}

/* redis://...: host[:port][/db], host possibly [bracketed] */
static int parse_server(const char *p, dlock__uri *u) {
  if (u->topology != DLOCK__URI_STANDALONE)
    return parse_seeds(p, u);
  const char *end = p + strcspn(p, "/");
  int rc = host_port(p, end, &u->host, &u->port, "URI", "URI has no host");
  if (rc != DLOCK_OK)
    return rc;
  p = end;
  if (*p == '/') {
    p++;
    if (*p && parse_long(p, strlen(p), 0, 1000000, &u->db) != 0)
      return dlock__fail(DLOCK_EINVAL, "bad database number \"%s\" in URI", p);
  }
  return DLOCK_OK;
}

/* The kind of a URI with several hosts, for messages. */
static const char *seeds_kind(const dlock__uri *u) {
  return u->topology == DLOCK__URI_SENTINEL ? "sentinel URI" : "cluster URI";
}

/* One seed "host[:port]" of [s, end) into u's lists. */
static int add_seed(const char *s, const char *end, dlock__uri *u) {
  if (u->nseeds == DLOCK__MAX_SEEDS)
    return dlock__fail(DLOCK_EINVAL, "more than %d hosts in %s",
                       DLOCK__MAX_SEEDS, seeds_kind(u));
  char *h = NULL;
  int port = u->topology == DLOCK__URI_SENTINEL ? 26379 : 6379;
  char empty[128];
  snprintf(empty, sizeof empty, "%s has an empty host (hosts are separated "
           "by commas: h1:p1,h2:p2)", seeds_kind(u));
  int rc = host_port(s, end, &h, &port, seeds_kind(u), empty);
  if (rc != DLOCK_OK)
    return rc;
  if (strlen(h) > 255) {
    free(h);
    return dlock__fail(DLOCK_EINVAL, "a host in the %s is longer than 255 "
                       "bytes", seeds_kind(u));
  }
  u->seed_hosts[u->nseeds] = h;
  u->seed_ports[u->nseeds++] = port;
  return DLOCK_OK;
}

/* redis+sentinel://...'s path: /NAME[/db] (NAME percent-decoded). */
static int parse_master(const char *p, dlock__uri *u) {
  if (*p != '/' || p[1] == '\0' || p[1] == '/')
    return dlock__fail(DLOCK_EINVAL, "sentinel URI needs the master's name: "
                       "redis+sentinel://s1:p1,s2:p2/NAME[/db]");
  p++;
  size_t n = strcspn(p, "/");
  if (n > 255)
    return dlock__fail(DLOCK_EINVAL, "master name in sentinel URI is longer "
                       "than 255 bytes");
  int rc = decode(p, n, &u->master_name, "master name");
  if (rc != DLOCK_OK)
    return rc;
  p += n;
  if (*p == '/' && (p[1] == '\0' ||
                    parse_long(p + 1, strlen(p + 1), 0, 1000000, &u->db) != 0))
    return dlock__fail(DLOCK_EINVAL, "bad database number \"%.40s\" in "
                       "sentinel URI", p + 1);
  return DLOCK_OK;
}

/* redis+cluster://...: host[:port][,host[:port]...][/0][?pubsub=MODE];
 * redis+sentinel://...: host[:port][,host[:port]...]/NAME[/db] */
static int parse_seeds(const char *p, dlock__uri *u) {
  const char *query = strchr(p, '?');
  if (query && u->topology == DLOCK__URI_SENTINEL)
    return dlock__fail(DLOCK_EINVAL, "sentinel URI takes no query (\"%.40s\")",
                       query);
  if (query) {
    static const char *const modes[] = {"auto", "sharded", "classic"};
    int found = 0;
    for (int i = 0; i < 3 && !found; i++) {
      char want[32];
      snprintf(want, sizeof want, "?pubsub=%s", modes[i]);
      if (strcmp(query, want) == 0) {
        u->pubsub = i;
        found = 1;
      }
    }
    if (!found)
      return dlock__fail(DLOCK_EINVAL, "bad cluster URI query \"%.40s\" "
                         "(only ?pubsub=auto|sharded|classic)", query);
  }
  u->seed_hosts = calloc(DLOCK__MAX_SEEDS, sizeof *u->seed_hosts);
  u->seed_ports = calloc(DLOCK__MAX_SEEDS, sizeof *u->seed_ports);
  if (u->seed_hosts == NULL || u->seed_ports == NULL)
    return dlock__oom();
  const char *end = p + strcspn(p, "/?");
  if (end == p)
    return dlock__fail(DLOCK_EINVAL, "%s has no host", seeds_kind(u));
  while (p < end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *e = comma ? comma : end;
    int rc = add_seed(p, e, u);
    if (rc != DLOCK_OK)
      return rc;
    p = comma ? comma + 1 : end;
    if (comma && p == end)
      return dlock__fail(DLOCK_EINVAL, "%s ends with a comma", seeds_kind(u));
  }
  if (u->topology == DLOCK__URI_SENTINEL) {
    int rc = parse_master(end, u);
    if (rc != DLOCK_OK)
      return rc;
  } else if (*end == '/') {
    size_t db = strcspn(end + 1, "?");
    if (db > 1 || (db == 1 && end[1] != '0'))
      return dlock__fail(DLOCK_EINVAL, "a cluster has only database 0 (URI "
                         "ends in \"%.40s\")", end);
  }
  u->host = strdup(u->seed_hosts[0]);
  u->port = u->seed_ports[0];
  return u->host ? DLOCK_OK : dlock__fail(DLOCK_ENOMEM, "out of memory");
}

int dlock__uri_parse(const char *text, dlock__uri *u) {
  memset(u, 0, sizeof *u);
  u->port = 6379;
  if (text == NULL)
    return dlock__fail(DLOCK_EINVAL, "URI is NULL");
  int is_unix = 0;
  const char *p = text;
  /* valkey://, valkeys://, valkey+cluster://, ... mean what the redis forms
   * mean (Redisson accepts them since 3.42) */
  if (strncmp(p, "rediss", 6) == 0 || strncmp(p, "valkeys", 7) == 0) {
    u->tls = 1; /* the TLS forms */
    p += p[0] == 'r' ? 6 : 7;
  } else if (strncmp(p, "redis", 5) == 0 || strncmp(p, "valkey", 6) == 0) {
    p += p[0] == 'r' ? 5 : 6;
  }
  if (p != text && strncmp(p, "://", 3) == 0) {
    p += 3;
  } else if (p != text && strncmp(p, "+cluster://", 11) == 0) {
    u->topology = DLOCK__URI_CLUSTER;
    p += 11;
  } else if (p != text && strncmp(p, "+sentinel://", 12) == 0) {
    u->topology = DLOCK__URI_SENTINEL;
    p += 12;
  } else if (p == text && strncmp(p, "unix://", 7) == 0) {
    is_unix = 1;
    p += 7;
  } else {
    char shown[64];
    dlock_uri_redact(text, shown, sizeof shown);
    return dlock__fail(DLOCK_EINVAL,
                       "URI must start with redis://, redis+cluster://, "
                       "redis+sentinel:// or unix:// (rediss... for TLS; "
                       "valkey... and valkeys... alike) "
                       "(got \"%.40s\")",
                       shown);
  }
  int rc = parse_userinfo(&p, is_unix, u);
  if (rc == DLOCK_OK)
    rc = is_unix ? parse_socket(p, u) : parse_server(p, u);
  if (rc != DLOCK_OK)
    dlock__uri_free(u);
  return rc;
}
