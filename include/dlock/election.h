/* Leader election (docs/election.md): one leader per term on a name,
 * everyone can see who it is, a deposed leader cannot write.
 *
 * An election handle campaigns for one candidate: dlock_election_campaign()
 * waits (pub/sub, no polling) until the candidate leads and returns its
 * term, a fencing token that grows with every new leader. While it leads,
 * the leadership is a lock: renewed by the watchdog (or a fixed lease),
 * reported lost as a lock is (the client's lost-lock callback, DLOCK_ELOST
 * from the next call), guarded by the replica guard and durable grants when
 * the client asks for them. dlock_election_resign() steps down; one standby
 * takes over at once. dlock_election_leader() says who leads;
 * dlock_election_observe() tells every change.
 *
 * The handle owns its candidate: its calls may come from any thread (it is
 * bound to an owner id of its own), but not two campaigns at once.
 *
 * On the wire (docs/wire.md, "Leader election") the leadership is a fenced
 * lock on the name, in Redisson's layout: a Redisson RFencedLock on the
 * same name excludes too, and the term is the lock's token, so a guarded
 * write (dlock/fence.h) on dlock_election_lock(), or dlock_fenced_call()
 * with the term, is refused once a newer leader was elected.
 */
#ifndef DLOCK_ELECTION_H
#define DLOCK_ELECTION_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/async.h"
#include "dlock/client.h"
#include "dlock/error.h"
#include "dlock/lock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest value a candidate may give, in bytes. */
#define DLOCK_ELECTION_VALUE_MAX 65536

typedef struct dlock_election dlock_election;

/* Who leads. */
typedef struct dlock_leader {
  int leading;         /* 1: someone leads now; 0: nobody */
  int mine;            /* the handle that asked leads */
  int64_t term;        /* the leader's term; nobody leading: the last term
                          granted (0: none ever) */
  int64_t version;     /* 0 when the term began, + 1 per proclamation */
  int64_t since_ms;    /* when the term began: the server's clock, Unix ms */
  int64_t lease_ms;    /* the leader's lease left when read, -1 unknown */
  char owner[64];      /* the leader's owner id ("U:T") */
  const char *value;   /* the leader's value (value_len bytes and a NUL);
                          "" when nobody leads */
  size_t value_len;
} dlock_leader;

/* What changed (dlock_election_observe). */
typedef enum dlock_election_change {
  DLOCK_ELECTED = 1, /* a new term began: leader says whose */
  DLOCK_PROCLAIMED,  /* the leader changed its value (leader.version) */
  DLOCK_VACANT       /* the term leader.term ended: resigned, lease ran out,
                        removed; nobody leads until the next DLOCK_ELECTED */
} dlock_election_change;

typedef struct dlock_election_event {
  dlock_election_change change;
  dlock_leader leader;
  int resync;          /* the observer's subscription was made again (the
                          connection dropped) before this event: changes
                          between the last event and this one may be
                          missing; this one is the state now */
} dlock_election_event;

/* A candidate in the election on name (opts: NULL, or name_len for names
 * with NUL bytes). Errors: DLOCK_EINVAL (NULL client or out, a bad name),
 * DLOCK_ECLOSED, DLOCK_ENOMEM. */
DLOCK_API int dlock_election_new(dlock_client *client, const char *name,
                                 const dlock_lock_opts *opts,
                                 dlock_election **out);

/* Free the handle; a leader resigns first (a blocking call: from an engine
 * thread the leadership is left to its lease instead). Its operations must
 * have completed. NULL is a no-op. */
DLOCK_API void dlock_election_free(dlock_election *e);

/* Campaign with value (value_len bytes, any; NULL with 0: empty): wait up
 * to wait_ms (0: one try, DLOCK_EBUSY when someone leads;
 * DLOCK_WAIT_FOREVER) to lead, for lease_ms or under the watchdog
 * (DLOCK_LEASE_WATCHDOG). OUT *term (may be NULL): the term. Errors:
 * DLOCK_EINVAL (NULL, a value over DLOCK_ELECTION_VALUE_MAX, bad times),
 * DLOCK_EREENTRY (the handle leads already), DLOCK_EBUSY (a campaign of the
 * handle is under way, or one try found a leader), DLOCK_ETIMEDOUT,
 * DLOCK_EINTR (dlock_interrupt on dlock_election_lock()), and the errors
 * of any call. */
DLOCK_API int dlock_election_campaign(dlock_election *e, const void *value,
                                      size_t value_len, int64_t wait_ms,
                                      int64_t lease_ms, int64_t *term);

/* The same without blocking (dlock/async.h): result.grant.token is the
 * term. dlock_cancel() ends the wait. */
DLOCK_API int dlock_election_campaign_async(dlock_election *e,
                                            const void *value,
                                            size_t value_len, int64_t wait_ms,
                                            int64_t lease_ms,
                                            dlock_done_fn *done, void *data,
                                            dlock_op *op);

/* The leader changes its value, in its term (observers see
 * DLOCK_PROCLAIMED). Errors: DLOCK_ENOTOWNER (the handle does not lead),
 * DLOCK_ELOST (its leadership was lost), DLOCK_EINVAL, and those of any
 * call. */
DLOCK_API int dlock_election_proclaim(dlock_election *e, const void *value,
                                      size_t value_len);

/* Step down; one standby leads next at once. DLOCK_OK, DLOCK_ENOTOWNER
 * (the handle does not lead), DLOCK_ELOST (the leadership was lost before:
 * someone else may lead already), DLOCK_EINVAL (NULL handle, engine
 * thread), or the errors of any call. */
DLOCK_API int dlock_election_resign(dlock_election *e);

/* Who leads now, into *out; free its value with dlock_leader_clear().
 * Errors: DLOCK_EINVAL, DLOCK_EKIND (the name holds another kind: a
 * string, a list, a read-write lock, ...; the message names it), those of
 * any call. */
DLOCK_API int dlock_election_leader(dlock_election *e, dlock_leader *out);
/* Free what dlock_election_leader() filled in; zeroes *l. NULL: nothing. */
DLOCK_API void dlock_leader_clear(dlock_leader *l);

/* The term the handle leads in, 0 when it does not lead (as this client
 * knows: a leadership found lost is 0). */
DLOCK_API int64_t dlock_election_term(const dlock_election *e);

/* Observe the election without taking part: done(data, result) runs once
 * per change, result->election saying what (valid during the call), first
 * with the state when the observation begins (DLOCK_ELECTED, or
 * DLOCK_VACANT when nobody leads), then for every change in order, on the
 * engine thread or through the completion queue as the client's
 * completions say. A term that ended with no message (its lease ran out)
 * is seen at its lease's end; a new term seen first implies the end of
 * the last (DLOCK_VACANT is told before it). dlock_cancel(*op) ends it:
 * done runs a last time with DLOCK_ECANCELED (DLOCK_ECLOSED when the
 * client closes; DLOCK_EPERM when the ACL refuses the channel), and
 * result->election NULL. Unlike other operations, it calls back more than
 * once. Any number of observers may share one client. Returns DLOCK_OK
 * when the observation began, DLOCK_EINVAL (NULL arguments), DLOCK_ENOMEM,
 * DLOCK_ECLOSED. */
DLOCK_API int dlock_election_observe(dlock_election *e, dlock_done_fn *done,
                                     void *data, dlock_op *op);

/* The lock under the election (kind "election"): for guarded writes
 * (dlock/fence.h) while leading, dlock_interrupt, dlock_inspect. Owned by
 * the election: do not free it. */
DLOCK_API dlock_lock *dlock_election_lock(dlock_election *e);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_ELECTION_H */
