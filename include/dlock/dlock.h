/* dlock: Redis-based distributed locks and synchronizers for C.
 * Umbrella header: include this one. */
#ifndef DLOCK_H
#define DLOCK_H

#include "dlock/version.h"
#include "dlock/error.h"
#include "dlock/client.h"
#include "dlock/lock.h"
#include "dlock/rwlock.h"
#include "dlock/sync.h"
#include "dlock/multi.h"
#include "dlock/inspect.h"
#include "dlock/stats.h"
#include "dlock/async.h"
#include "dlock/reply.h"
#include "dlock/fence.h"
#include "dlock/election.h"

#endif /* DLOCK_H */
