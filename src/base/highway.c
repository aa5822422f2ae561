/* HighwayHash (Alakuijala, Cox, Wassenberg, 2016; frozen since 2017): the
 * portable algorithm, 64- and 128-bit results. Written from the
 * algorithm's description; the authors' golden values (test_multi
 * highway_vectors) prove it. dlock needs it for the grouped multi-lock's
 * field names, which Redisson computes with it (src/multi/group.c). */
#include <stdint.h>
#include <string.h>

#include "base/base.h"

typedef struct hh_state {
  uint64_t v0[4], v1[4], mul0[4], mul1[4];
} hh_state;

static void reset(const uint64_t key[4], hh_state *s) {
  static const uint64_t init0[4] = {0xdbe6d5d5fe4cce2full, 0xa4093822299f31d0ull,
                                    0x13198a2e03707344ull, 0x243f6a8885a308d3ull};
  static const uint64_t init1[4] = {0x3bd39e10cb0ef593ull, 0xc0acf169b5f18a8cull,
                                    0xbe5466cf34e90c6cull, 0x452821e638d01377ull};
  for (int i = 0; i < 4; i++) {
    s->mul0[i] = init0[i];
    s->mul1[i] = init1[i];
    s->v0[i] = init0[i] ^ key[i];
    s->v1[i] = init1[i] ^ ((key[i] >> 32) | (key[i] << 32));
  }
}

/* Spread the bytes of v1:v0 over the two lanes added to. */
static void zipper_add(uint64_t v1, uint64_t v0, uint64_t *add1,
                       uint64_t *add0) {
  *add0 += (((v0 & 0xff000000ull) | (v1 & 0xff00000000ull)) >> 24) |
           (((v0 & 0xff0000000000ull) | (v1 & 0xff000000000000ull)) >> 16) |
           (v0 & 0xff0000ull) | ((v0 & 0xff00ull) << 32) |
           ((v1 & 0xff00000000000000ull) >> 8) | (v0 << 56);
  *add1 += (((v1 & 0xff000000ull) | (v0 & 0xff00000000ull)) >> 24) |
           (v1 & 0xff0000ull) | ((v1 & 0xff0000000000ull) >> 16) |
           ((v1 & 0xff00ull) << 24) | ((v0 & 0xff000000000000ull) >> 8) |
           ((v1 & 0xffull) << 48) | (v0 & 0xff00000000000000ull);
}

static void update(const uint64_t lanes[4], hh_state *s) {
  for (int i = 0; i < 4; i++) {
    s->v1[i] += s->mul0[i] + lanes[i];
    s->mul0[i] ^= (s->v1[i] & 0xffffffffull) * (s->v0[i] >> 32);
    s->v0[i] += s->mul1[i];
    s->mul1[i] ^= (s->v0[i] & 0xffffffffull) * (s->v1[i] >> 32);
  }
  zipper_add(s->v1[1], s->v1[0], &s->v0[1], &s->v0[0]);
  zipper_add(s->v1[3], s->v1[2], &s->v0[3], &s->v0[2]);
  zipper_add(s->v0[1], s->v0[0], &s->v1[1], &s->v1[0]);
  zipper_add(s->v0[3], s->v0[2], &s->v1[3], &s->v1[2]);
}

/* 32 bytes as four little-endian lanes. */
static void update_packet(const uint8_t *p, hh_state *s) {
  uint64_t lanes[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; i++)
    for (int b = 7; b >= 0; b--)
      lanes[i] = (lanes[i] << 8) | p[8 * i + b];
  update(lanes, s);
}

static uint32_t rotl32(uint32_t x, unsigned n) {
  return n ? (x << n) | (x >> (32 - n)) : x;
}

/* The last size_mod32 (1..31) bytes. */
static void update_remainder(const uint8_t *bytes, size_t size_mod32,
                             hh_state *s) {
  size_t size_mod4 = size_mod32 & 3;
  size_t whole = size_mod32 & ~(size_t)3;
  const uint8_t *rest = bytes + whole;
  uint8_t packet[32] = {0};
  for (int i = 0; i < 4; i++) {
    s->v0[i] += ((uint64_t)size_mod32 << 32) + size_mod32;
    s->v1[i] = (uint64_t)rotl32((uint32_t)s->v1[i], (unsigned)size_mod32) |
               (uint64_t)rotl32((uint32_t)(s->v1[i] >> 32), (unsigned)size_mod32)
                   << 32;
  }
  memcpy(packet, bytes, whole);
  if (size_mod32 & 16) { /* the last 4 bytes, overlapping the whole ones */
    for (size_t i = 0; i < 4; i++)
      packet[28 + i] = bytes[whole + size_mod4 - 4 + i];
  } else if (size_mod4) {
    packet[16] = rest[0];
    packet[17] = rest[size_mod4 >> 1];
    packet[18] = rest[size_mod4 - 1];
  }
  update_packet(packet, s);
}

static uint64_t swap_halves(uint64_t x) { return (x >> 32) | (x << 32); }

static void permute_and_update(hh_state *s) {
  uint64_t p[4] = {swap_halves(s->v0[2]), swap_halves(s->v0[3]),
                   swap_halves(s->v0[0]), swap_halves(s->v0[1])};
  update(p, s);
}

static void absorb(const uint64_t key[4], const void *data, size_t len,
                   hh_state *s) {
  const uint8_t *p = data;
  reset(key, s);
  size_t i = 0;
  for (; i + 32 <= len; i += 32)
    update_packet(p + i, s);
  if (len & 31)
    update_remainder(p + i, len & 31, s);
}

uint64_t dlock__highway64(const uint64_t key[4], const void *data, size_t len) {
  hh_state s;
  absorb(key, data, len, &s);
  for (int i = 0; i < 4; i++)
    permute_and_update(&s);
  return s.v0[0] + s.v1[0] + s.mul0[0] + s.mul1[0];
}

void dlock__highway128(const uint64_t key[4], const void *data, size_t len,
                       uint64_t out[2]) {
  hh_state s;
  absorb(key, data, len, &s);
  for (int i = 0; i < 6; i++)
    permute_and_update(&s);
  out[0] = s.v0[0] + s.mul0[0] + s.v1[2] + s.mul1[2];
  out[1] = s.v0[1] + s.mul0[1] + s.v1[3] + s.mul1[3];
}
