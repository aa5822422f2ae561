/* `dlock check` (check.c). */
#ifndef DLOCK_CLI_CHECK_H
#define DLOCK_CLI_CHECK_H

#include <stdio.h>

#include <dlock/dlock.h>

/* Use every primitive through c on throw-away names, uncontended and
 * contended, and SCAN as `dlock list` does; one line each on out, and for
 * an ACL refusal the permission missing. replica_guard: c was opened with
 * replica_sync_ms (its lock writes send WAIT); durable: with durable_ms
 * (they send WAITAOF). Returns DLOCK_OK when all
 * passed, else the first failure's code. */
int dlock_cli_check(dlock_client *c, FILE *out, int replica_guard,
                    int durable);

#endif
