/* The grouped multi-lock's field names (group.c), for its tests and
 * dlock's inspection. */
#ifndef DLOCK_MULTI_GROUP_H
#define DLOCK_MULTI_GROUP_H

#include <stddef.h>

/* A value's field in its group's hash: Redisson's Hash.hash128toBase64 of
 * the value's bytes (HighwayHash-128 under Redisson's fixed key, the two
 * lanes big-endian, base64 without its "==": 22 characters) into out;
 * returns 22. */
#define DLOCK__GROUP_FIELD_LEN 22
size_t dlock__group_field(const void *value, size_t len,
                          char out[DLOCK__GROUP_FIELD_LEN + 1]);

#endif /* DLOCK_MULTI_GROUP_H */
