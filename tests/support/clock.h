/* A server's clock that jumps, modelled (docs/reliability.md, "Clocks").
 *
 * Debian's redis-server and valkey-server do not start under libfaketime
 * (jemalloc and libfaketime recurse in clock_gettime), so the server's
 * clock cannot be moved for real. What a jump of the server's clock does
 * to what dlock keeps is modelled instead, in one script (atomic, and
 * replicated as its effects): a jump forward by D makes every key's time
 * to live D shorter (a key whose time ran out is deleted: it expired) and
 * moves every time dlock or Redisson stores as a server time (a fair
 * queue's deadlines, expirable permits' expiries, a grouped multi-lock's
 * expire_time) D into the past; a jump back (D < 0) does the opposite.
 * Left out: the server's own timers (they run on its monotonic clock in
 * Redis 7 and Valkey 8), TIME's answer itself (shifting what is stored by
 * -D is the same to every script that compares TIME with it), and a clock
 * that runs at another rate (modelled as many small jumps: the RedLock
 * drift nemesis). */
#ifndef DLOCK_TESTS_CLOCK_H
#define DLOCK_TESTS_CLOCK_H

#include <stdint.h>

/* Jump the clock of the server at 127.0.0.1:port by delta_ms (forward >
 * 0). 0, or -1 (the server did not answer). *expired (may be NULL): the
 * keys whose time ran out. */
int sim_clock_jump(int port, int64_t delta_ms, int64_t *expired);

#endif
