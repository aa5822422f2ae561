/* The base: what every layer may use and nothing below it (no I/O, no
 * engine): errors, the clock, byte buffers and RESP, Redisson's key names,
 * hash slots, random ids, and the wait and lease arguments' check. The
 * reply policy (base/policy.h), URIs (base/uri.h) and hash tables
 * (base/map.h) are its other headers. Nothing here is public API. */
#ifndef DLOCK_BASE_H
#define DLOCK_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "dlock/error.h"

/* ---- errors (error.c) ---------------------------------------------------- */

/* Set the calling thread's detail message and return code. The message is
 * never cut: its buffer grows as needed. */
int dlock__fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same, the message being the current one followed by fmt's text. */
int dlock__fail_more(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The same, the message being head followed by the current one. */
int dlock__fail_before(int code, const char *head);
void dlock__clear_error(void);
/* The thread's message set aside while other calls make theirs, whole and
 * without allocating: keep moves it into k (the thread's is then empty),
 * restore makes it the thread's again, drop forgets it; one of the two
 * ends every keep. dlock__kept_text reads it meanwhile. */
#define DLOCK__ERR_SMALL 512 /* a message this long needs no allocation */
typedef struct dlock__kept_error {
  char *big; /* a longer message's buffer, or NULL: small holds it */
  size_t cap;
  char small[DLOCK__ERR_SMALL];
} dlock__kept_error;
void dlock__error_keep(dlock__kept_error *k);
const char *dlock__kept_text(const dlock__kept_error *k);
void dlock__error_restore(dlock__kept_error *k);
void dlock__error_drop(dlock__kept_error *k);
/* dlock__fail(DLOCK_ENOMEM, "out of memory"): an allocation failed (the
 * words need none). */
int dlock__oom(void);
/* What to say after a system call's failure uv_rc (libuv's code, or
 * -errno): for a process out of file descriptors, what to raise; else "". */
const char *dlock__fd_hint(int uv_rc);
/* Map a Redis error reply to DLOCK_EREDIS with its text as detail. */
int dlock__fail_reply(const redisReply *reply, const char *what);
/* Append printf-style text to the string in buf (size bytes; cut short
 * when full). */
void dlock__append(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- clock (util.c) ------------------------------------------------------ */

int64_t dlock__now_ms(void); /* CLOCK_MONOTONIC */
/* A name in a message: "%.100s%s" with DLOCK__NAME(name) shows it whole,
 * or its first 100 bytes and "..." (a message stays readable however long
 * the name; the rest of the message is never cut). */
#define DLOCK__NAME(name) (name), (strlen(name) > 100 ? "..." : "")
int64_t dlock__now_us(void);

/* ---- byte buffer (util.c) ------------------------------------------------ */

typedef struct dlock__buf {
  char *p;
  size_t len, cap;
} dlock__buf;

int dlock__buf_reserve(dlock__buf *b, size_t extra);
int dlock__buf_add(dlock__buf *b, const void *data, size_t len);
int dlock__buf_printf(dlock__buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void dlock__buf_free(dlock__buf *b);
/* Give back unused capacity (for strings kept as long as a handle). */
void dlock__buf_shrink(dlock__buf *b);

/* Append one RESP bulk string / array header. */
int dlock__resp_array(dlock__buf *b, size_t n);
/* v in decimal into out (at least 24 bytes), NUL-terminated; returns its
 * length. For the numbers of every call's request (printf's formatting
 * was a measured share of a call's CPU). */
size_t dlock__fmt_i64(char *out, int64_t v);
size_t dlock__fmt_u64(char *out, uint64_t v);
int dlock__resp_bulk(dlock__buf *b, const void *data, size_t len);
/* The same written at p, unchecked, into room already reserved: at most
 * DLOCK__RESP_HEADER_MAX bytes for an array header, a bulk's length plus
 * DLOCK__RESP_BULK_MORE for a bulk string. They return the end (no NUL
 * written). */
#define DLOCK__RESP_HEADER_MAX 23 /* the lead, 20 digits, CRLF */
#define DLOCK__RESP_BULK_MORE 25  /* a header and the closing CRLF */
char *dlock__resp_put_array(char *p, size_t n);
char *dlock__resp_put_bulk(char *p, const void *data, size_t len);
/* Append a whole command: the array header and argc bulk strings; out of
 * memory (DLOCK_ENOMEM), b is left as it was. */
int dlock__resp_command(dlock__buf *b, size_t argc, const char *const *argv,
                        const size_t *lens);

/* ---- keys (keys.c, docs/wire.md "Hash tags") ------------------------------ */

/* P:{N}, or P:N when N contains a '{'. Appends to b. */
int dlock__key_prefix(dlock__buf *b, const char *prefix, const char *name,
                      size_t len);
/* {N}:S, or N:S when N contains a '{'. Appends to b. */
int dlock__key_suffix(dlock__buf *b, const char *name, size_t len,
                      const char *suffix);
/* The names dlock derives from an object's name N (docs/wire.md). */
typedef enum dlock__key_role {
  DLOCK__KEY_LOCK_CHANNEL,    /* redisson_lock__channel:{N} */
  DLOCK__KEY_LOCK_TOKEN,      /* redisson_lock_token:{N} */
  DLOCK__KEY_UNLOCK_LATCH,    /* redisson_unlock_latch:{N}: (+ request id) */
  DLOCK__KEY_FAIR_QUEUE,      /* redisson_lock_queue:{N} */
  DLOCK__KEY_FAIR_TIMEOUT,    /* redisson_lock_timeout:{N} */
  DLOCK__KEY_FAIR_ALIVE,      /* dlock_fair_alive:{N} */
  DLOCK__KEY_RWLOCK_CHANNEL,  /* redisson_rwlock:{N} */
  DLOCK__KEY_TAG,             /* {N}: start of a read hold's timeout key */
  DLOCK__KEY_LATCH_CHANNEL,   /* redisson_countdownlatch__channel__{N} */
  DLOCK__KEY_SEM_CHANNEL,     /* redisson_sc:{N} */
  DLOCK__KEY_SEM_TAKE,        /* dlock_semaphore_take:{N}: (+ request id) */
  DLOCK__KEY_SEM_RELEASE,     /* dlock_semaphore_release:{N}: (+ id) */
  DLOCK__KEY_PERMITS_TIMEOUT, /* {N}:timeout */
  DLOCK__KEY_PERMITS_LATCH,   /* dlock_permits_release_latch:{N}: (+ id) */
  DLOCK__KEY_FENCE,           /* dlock_fence:{N}: a guarded write's newest
                                 token (src/fence) */
  DLOCK__KEY_ELECTION,        /* dlock_election:{N}: the leader's record */
  DLOCK__KEY_ELECTION_CHANNEL, /* dlock_election_channel:{N} */
} dlock__key_role;
/* Append the name of kind for N to b (shrunk to fit: kept with a handle).
 * DLOCK_OK or DLOCK_ENOMEM (with a message). */
int dlock__key(dlock__buf *b, dlock__key_role kind, const char *name,
               size_t len);
/* Validate a user-supplied name (NULL, empty, too long). */
int dlock__check_name(const char *name, size_t len);

/* HighwayHash of len bytes under key (base/highway.c): 64 bits, or 128
 * bits as two lanes (out[0], out[1]), as the authors' reference computes
 * them. */
uint64_t dlock__highway64(const uint64_t key[4], const void *data, size_t len);
void dlock__highway128(const uint64_t key[4], const void *data, size_t len,
                       uint64_t out[2]);
/* A random number in [lo, hi] (lo when hi <= lo), from a per-thread
 * generator: for jitter (RedLock's retry delay, the spin lock's back-off),
 * never for ids or secrets. */
int64_t dlock__random_between(int64_t lo, int64_t hi);
/* n random bytes as 2n lower-case hex characters plus NUL (getrandom(2)). */
int dlock__random_hex(char *out, size_t nbytes);
/* A request id no other call of any process uses: 32 lower-case hex
 * characters plus NUL (a release's unlock latch). DLOCK_OK or DLOCK_EIO. */
int dlock__request_id(char out[33]);

/* Redis Cluster's hash slot of a key (CRC16 of its {hash tag} or of it). */
int dlock__key_slot(const char *key, size_t len);

/* The wait and lease arguments of an acquire: DLOCK_OK or DLOCK_EINVAL. */
int dlock__check_wait_lease(int64_t wait_ms, int64_t lease_ms);

#endif /* DLOCK_BASE_H */
