/* Redis Cluster's key -> hash slot: CRC16 (XMODEM: polynomial 0x1021, no
 * reflection, initial 0) of the key, or of its hash tag (the bytes between
 * the first '{' and the next '}', when not empty), modulo 16384. */
#include "base/base.h"

static uint16_t crc16(const unsigned char *p, size_t n) {
  uint16_t crc = 0;
  for (size_t i = 0; i < n; i++) {
    crc ^= (uint16_t)(p[i] << 8);
    for (int b = 0; b < 8; b++)
      crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
  }
  return crc;
}

int dlock__key_slot(const char *key, size_t len) {
  const unsigned char *k = (const unsigned char *)key;
  size_t open = 0;
  while (open < len && k[open] != '{')
    open++;
  if (open < len) {
    size_t close = open + 1;
    while (close < len && k[close] != '}')
      close++;
    if (close < len && close > open + 1) {
      k += open + 1;
      len = close - open - 1;
    }
  }
  return crc16(k, len) & 16383;
}
