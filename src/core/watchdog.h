/* Holds and the watchdog (watchdog.c): the client's record of the grants
 * it keeps, their renewal, and a loss told. */
#ifndef DLOCK_CORE_WATCHDOG_H
#define DLOCK_CORE_WATCHDOG_H

#include "core/core.h"

/* ---- holds and the watchdog (watchdog.c) ---------------------------------- */

/* A hold is identified by the lock's key (renewal KEYS[i]) and the owner
 * field on the wire ("U:T", or "U:T:write" for a writer). label: the name
 * the application gave, when the key is another (a permit's hold is keyed
 * by {N}:timeout): the lost-lock callback and the events say it. NULL: the
 * key is the name. Only dlock__hold_add reads it. */
typedef struct dlock__hold_id {
  const char *name;
  size_t name_len;
  const char *field;
  size_t field_len;
  const char *label;
  size_t label_len;
} dlock__hold_id;

/* How the watchdog renews a hold, as its kind says: script gets KEYS = the
 * holds' names and ARGV = lease, then per hold its field and extra (""
 * when none); node_script, its variant for one cluster node's holds of
 * several slots (ARGV = n, the n names, then script's own arguments), or
 * -1: one batch per slot. */
typedef struct dlock__renewal {
  int script;
  int node_script;
  const char *extra;
  size_t extra_len;
} dlock__renewal;

/* Someone (a RedLock) that wants to hear when a hold is found lost. The
 * hold keeps a reference while it exists; lost() runs on the engine thread
 * (after the client's lost-lock callback). */
typedef struct dlock__listener dlock__listener;
struct dlock__listener {
  void (*lost)(dlock__listener *self, dlock_lost_reason reason);
  void (*ref)(dlock__listener *self);
  void (*unref)(dlock__listener *self);
};

/* Record one successful grant. watchdog: renew it (with r) until released.
 * t0_ms: monotonic time the acquire was sent (validity start). ln: may be
 * NULL; replaces the hold's listener when given. */
int dlock__hold_add(dlock_client *c, const dlock__hold_id *id,
                    uint64_t owner_id, const dlock__renewal *r, int watchdog,
                    int64_t lease_ms, int64_t t0_ms, dlock__listener *ln);
/* Call just before sending a release of id: notes that a release is in
 * flight (a renewal that finds the hold gone meanwhile is then not a loss:
 * the release's reply decides) and returns the lease to re-arm on a partial
 * release: the hold's last lease, or the watchdog timeout without a hold. */
int64_t dlock__hold_releasing(dlock_client *c, const dlock__hold_id *id);
/* Apply a release outcome: 1 fully released, 0 a hold remains, -1 the server
 * had no hold. Returns 1 when the client had a local hold (so -1 means the
 * hold was lost), 2 when it had one already reported lost (the release must
 * say DLOCK_ELOST even when the key outlived the lease it knew of), 0 when
 * it had none. */
int dlock__hold_released(dlock_client *c, const dlock__hold_id *id,
                         int outcome);
/* How long id's hold is still valid by this client's clock (ms; <= 0 when
 * its lease has run out), or INT64_MIN when there is no such hold. Ask
 * before dlock__hold_released() forgets it. */
int64_t dlock__hold_valid_ms(dlock_client *c, const dlock__hold_id *id);
/* How many times this client holds id (reentrant count; 0 none, -1 a hold
 * already reported lost). */
int64_t dlock__hold_count(dlock_client *c, const dlock__hold_id *id);
/* The DLOCK_ELOST of a release that found its hold gone: what ("lease of",
 * ...) and name say whose, valid_ms (dlock__hold_valid_ms) says why: its
 * lease had run out, or it was removed while still valid (a force release,
 * another client, a server that lost it). */
int dlock__fail_gone(const char *what, const char *name, int64_t valid_ms);
/* The DLOCK_ELOST of a release that released a hold already reported lost
 * (dlock__hold_released returned 2); what names it ("lease of", ...). */
int dlock__fail_reported_lost(const char *what, const char *name);

#endif /* DLOCK_CORE_WATCHDOG_H */
