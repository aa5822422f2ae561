/* Redis Sentinel (docs/sentinel.md): which server is the master.
 *
 * A client opened on a redis+sentinel:// URI asks its sentinels for the
 * master of NAME (SENTINEL GET-MASTER-ADDR-BY-NAME) and checks with ROLE
 * that the server it names is a master, when the client opens (on the
 * opening thread) and again, in libuv's thread pool, whenever a connection
 * to the master fails or the master answers READONLY (it was demoted by a
 * failover). The command and pub/sub connections follow the answer at
 * their next connect. A subscription to +switch-master on one sentinel
 * (the next one after a failure) moves them at once when the sentinels
 * announce a new master. */
#ifndef DLOCK_NET_SENTINEL_H
#define DLOCK_NET_SENTINEL_H

#include "core/engine.h"

typedef struct dlock__sentinel dlock__sentinel;

/* client.c, after the URI is parsed: find the master (blocking, at most
 * the connect and command timeouts per sentinel). DLOCK_OK, DLOCK_EIO with
 * what each sentinel said, or DLOCK_ENOMEM. */
int dlock__sentinel_new(dlock_client *c);
void dlock__sentinel_free(dlock_client *c);
/* engine.c: the connections go to the master found (engine thread). */
void dlock__sentinel_attach(dlock_client *c);
/* engine.c: the +switch-master subscription starts (start); its writes
 * (flush, once per loop turn). */
void dlock__sentinel_start(dlock_client *c);
void dlock__sentinel_flush(dlock_client *c);
/* engine.c: a pending search is cancelled (or awaited) at close. */
void dlock__sentinel_shutdown(dlock_client *c);
/* conn.c: a connection to the master failed: ask the sentinels again. */
void dlock__sentinel_conn_down(dlock__conn *conn);
/* conn.c: reply is an error reply to req. 1 when it was READONLY (the
 * master was demoted) and req was kept to be sent to the new master. */
int dlock__sentinel_on_error(dlock__conn *conn, dlock__req *req,
                             redisReply *reply);

#endif /* DLOCK_NET_SENTINEL_H */
