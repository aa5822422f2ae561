/* Parsing of connection URIs (redis://, unix://, redis+cluster:// and
 * redis+sentinel://). */
#ifndef DLOCK_URI_H
#define DLOCK_URI_H

typedef struct dlock__uri {
  char *host;     /* redis:// host (brackets removed), NULL for unix:// */
  int port;
  char *path;     /* unix:// socket path */
  char *user;     /* ACL user or NULL */
  char *password; /* or NULL */
  long db;
  /* The scheme's topology: DLOCK__URI_STANDALONE; DLOCK__URI_CLUSTER
   * (redis+cluster://h1:p1,h2:p2: the seed nodes, host/port above the
   * first); DLOCK__URI_SENTINEL (redis+sentinel://s1:p1,s2:p2/NAME[/db]:
   * the sentinels are the seeds, NAME the master's name they know,
   * host/port above the first sentinel's until the master is found) */
  int topology;
  int pubsub; /* ?pubsub=: DLOCK__PUBSUB_AUTO, _SHARDED or _CLASSIC */
  char *master_name;
  int tls;        /* rediss://, rediss+cluster://, rediss+sentinel:// */
  char *sentinel_user;     /* AUTH to the sentinels (client options only) */
  char *sentinel_password;
  int nseeds;
  char **seed_hosts;
  int *seed_ports;
} dlock__uri;

enum { DLOCK__URI_STANDALONE, DLOCK__URI_CLUSTER, DLOCK__URI_SENTINEL };

#define DLOCK__MAX_SEEDS 64
#define DLOCK__PUBSUB_AUTO 0
#define DLOCK__PUBSUB_SHARDED 1
#define DLOCK__PUBSUB_CLASSIC 2

/* Parse text into u (all strings owned by u). DLOCK_EINVAL with a message
 * naming the bad part. */
int dlock__uri_parse(const char *text, dlock__uri *u);
/* Replace u's user and/or password with copies of user and password (each
 * NULL: keep the URI's). */
int dlock__uri_set_auth(dlock__uri *u, const char *user, const char *password);
/* The same for the sentinels' own credentials (DLOCK_EINVAL on a URI that
 * is not redis+sentinel://). */
int dlock__uri_set_sentinel_auth(dlock__uri *u, const char *user,
                                 const char *password);
/* Overwrite the passwords' bytes with zeros (in place). */
void dlock__uri_wipe(dlock__uri *u);
/* Free u's strings, the password wiped first. */
void dlock__uri_free(dlock__uri *u);

#endif /* DLOCK_URI_H */
