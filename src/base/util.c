/* Small shared helpers: clock, growable buffer, RESP encoding, name and
 * argument checks, random ids. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/random.h>

#include "base/base.h"
#include "dlock/client.h"

int64_t dlock__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t dlock__now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int dlock__buf_reserve(dlock__buf *b, size_t extra) {
  if (b->cap - b->len > extra)
    return DLOCK_OK;
  size_t cap = b->cap ? b->cap : 128;
  while (cap - b->len <= extra) {
    if (cap > SIZE_MAX / 2)
      return dlock__oom();
    cap *= 2;
  }
  char *p = realloc(b->p, cap);
  if (p == NULL)
    return dlock__oom();
  b->p = p;
  b->cap = cap;
  return DLOCK_OK;
}

int dlock__buf_add(dlock__buf *b, const void *data, size_t len) {
  if (dlock__buf_reserve(b, len) != DLOCK_OK)
    return dlock__oom();
  if (len)
    memcpy(b->p + b->len, data, len);
  b->len += len;
  b->p[b->len] = '\0';
  return DLOCK_OK;
}

int dlock__buf_printf(dlock__buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || dlock__buf_reserve(b, (size_t)n) != DLOCK_OK)
    return dlock__oom();
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return DLOCK_OK;
}

void dlock__buf_shrink(dlock__buf *b) {
  if (b->p == NULL || b->cap == b->len + 1)
    return;
  char *p = realloc(b->p, b->len + 1);
  if (p) {
    b->p = p;
    b->cap = b->len + 1;
  }
}

void dlock__buf_free(dlock__buf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

size_t dlock__fmt_u64(char *out, uint64_t v) {
  char digits[24];
  size_t k = sizeof digits;
  do {
    digits[--k] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  memcpy(out, digits + k, sizeof digits - k);
  out[sizeof digits - k] = '\0';
  return sizeof digits - k;
}

size_t dlock__fmt_i64(char *out, int64_t v) {
  if (v >= 0)
    return dlock__fmt_u64(out, (uint64_t)v);
  out[0] = '-';
  return 1 + dlock__fmt_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

/* "<lead><n>\r\n" at p: the header of a RESP array or bulk string,
 * written by hand (every call's request has a dozen of them; printf's
 * formatting was a measured share of a call's CPU). */
static char *put_header(char *p, char lead, size_t n) {
  *p++ = lead;
  if (n < 10) { /* most headers: a count or a short argument */
    *p++ = (char)('0' + n);
  } else if (n < 100) {
    *p++ = (char)('0' + n / 10);
    *p++ = (char)('0' + n % 10);
  } else {
    p += dlock__fmt_u64(p, n);
  }
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

char *dlock__resp_put_array(char *p, size_t n) { return put_header(p, '*', n); }

char *dlock__resp_put_bulk(char *p, const void *data, size_t len) {
  p = put_header(p, '$', len);
  if (len)
    memcpy(p, data, len);
  p += len;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

int dlock__resp_array(dlock__buf *b, size_t n) {
  if (dlock__buf_reserve(b, DLOCK__RESP_HEADER_MAX) != DLOCK_OK)
    return dlock__oom();
  b->len = (size_t)(dlock__resp_put_array(b->p + b->len, n) - b->p);
  b->p[b->len] = '\0';
  return DLOCK_OK;
}

int dlock__resp_bulk(dlock__buf *b, const void *data, size_t len) {
  if (len > SIZE_MAX - DLOCK__RESP_BULK_MORE ||
      dlock__buf_reserve(b, len + DLOCK__RESP_BULK_MORE) != DLOCK_OK)
    return dlock__oom();
  b->len = (size_t)(dlock__resp_put_bulk(b->p + b->len, data, len) - b->p);
  b->p[b->len] = '\0';
  return DLOCK_OK;
}

int dlock__resp_command(dlock__buf *b, size_t argc, const char *const *argv,
                        const size_t *lens) {
  size_t start = b->len;
  int rc = dlock__resp_array(b, argc);
  for (size_t i = 0; rc == DLOCK_OK && i < argc; i++)
    rc = dlock__resp_bulk(b, argv[i], lens[i]);
  if (rc != DLOCK_OK && b->p) { /* all of it or none: a command cut short
                                   in a buffer of several (a direct
                                   connection's kept latch DELs) would run
                                   into the next one's bytes */
    b->len = start;
    b->p[start] = '\0';
  }
  return rc;
}

int dlock__check_name(const char *name, size_t len) {
  if (name == NULL)
    return dlock__fail(DLOCK_EINVAL, "name is NULL");
  if (len == 0)
    return dlock__fail(DLOCK_EINVAL, "name is empty");
  if (len > DLOCK_NAME_MAX)
    return dlock__fail(DLOCK_EINVAL, "name is %zu bytes, longer than %d",
                       len, DLOCK_NAME_MAX);
  return DLOCK_OK;
}

int64_t dlock__random_between(int64_t lo, int64_t hi) {
  static _Thread_local uint64_t seed; /* xorshift: jitter, not secrets */
  if (seed == 0)
    seed = ((uint64_t)dlock__now_us() ^ (uint64_t)(uintptr_t)&seed) *
           0x9e3779b97f4a7c15ull | 1; /* the address: one per thread */
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return hi > lo ? lo + (int64_t)(seed % (uint64_t)(hi - lo + 1)) : lo;
}

/* n bytes from the kernel's generator (getrandom(2)): no allocation, no
 * library state, so it cannot fail halfway through a release the way a
 * generator whose lazy set-up needs memory can; 0, or -1 only on a kernel
 * without getrandom (before 3.17) */
static int kernel_random(void *p, size_t n) {
  unsigned char *b = p;
  while (n > 0) {
    ssize_t got = getrandom(b, n, 0);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return -1;
    b += got;
    n -= (size_t)got;
  }
  return 0;
}

int dlock__random_hex(char *out, size_t nbytes) {
  unsigned char raw[64];
  if (nbytes > sizeof raw || kernel_random(raw, nbytes) != 0)
    return dlock__fail(DLOCK_EIO, "random bytes unavailable");
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < nbytes; i++) {
    out[2 * i] = hex[raw[i] >> 4];
    out[2 * i + 1] = hex[raw[i] & 15];
  }
  out[2 * nbytes] = '\0';
  return DLOCK_OK;
}

/* Request ids: 8 random bytes per process (drawn again in a forked child)
 * and a counter. Unique is all a request id must be; OpenSSL's generator
 * per release cost a getpid(2) and a DRBG draw on every call, and its lazy
 * set-up allocates: with an allocation refused there, the release path
 * crashed inside RAND_bytes (the kernel's generator allocates nothing). */
static _Atomic uint64_t request_base, request_seq;
static atomic_int request_stale = 1;
static pthread_mutex_t request_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t request_once = PTHREAD_ONCE_INIT;

static void request_forked(void) { atomic_store(&request_stale, 1); }

static void request_hook(void) { pthread_atfork(NULL, NULL, request_forked); }

static void hex64(char *out, uint64_t v) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; i--, v >>= 4)
    out[i] = hex[v & 15];
}

int dlock__request_id(char out[33]) {
  pthread_once(&request_once, request_hook);
  if (atomic_load(&request_stale)) {
    pthread_mutex_lock(&request_mu);
    uint64_t base;
    int rc = DLOCK_OK;
    if (atomic_load(&request_stale)) {
      if (kernel_random(&base, sizeof base) == 0) {
        atomic_store(&request_base, base);
        atomic_store(&request_stale, 0);
      } else
        rc = dlock__fail(DLOCK_EIO, "random bytes unavailable");
    }
    pthread_mutex_unlock(&request_mu);
    if (rc != DLOCK_OK)
      return rc;
  }
  hex64(out, atomic_load(&request_base));
  hex64(out + 16, atomic_fetch_add(&request_seq, 1));
  out[32] = '\0';
  return DLOCK_OK;
}

void dlock__append(char *buf, size_t size, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 1 >= size)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, size - len, fmt, ap);
  va_end(ap);
}

int dlock__check_wait_lease(int64_t wait_ms, int64_t lease_ms) {
  if (wait_ms < 0 && wait_ms != DLOCK_WAIT_FOREVER)
    return dlock__fail(DLOCK_EINVAL, "wait_ms must be >= 0 or DLOCK_WAIT_FOREVER");
  if (lease_ms <= 0 && lease_ms != DLOCK_LEASE_WATCHDOG)
    return dlock__fail(DLOCK_EINVAL, "lease_ms must be > 0 or DLOCK_LEASE_WATCHDOG");
  return DLOCK_OK;
}
