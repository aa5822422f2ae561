/* `dlock check` (check.c). */
#ifndef DLOCK_CLI_CHECK_H
#define DLOCK_CLI_CHECK_H

#include <stdio.h>

#include <dlock/dlock.h>

/* Use every primitive once through c on throw-away names, one line each on
 * out. Returns DLOCK_OK when all passed, else the first failure's code. */
int dlock_cli_check(dlock_client *c, FILE *out);

#endif
