/* dlock_memory_check (dlock/inspect.h): a server's maxmemory, its policy
 * and the memory in use, from INFO memory; on a cluster every master is
 * asked and the one that can evict a lock key is the one reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock/lock_impl.h"
#include "dlock/inspect.h"

/* The value of "field:" in INFO's text, up to the line's end, in out. */
static int info_field(const char *text, const char *field, char *out, size_t n) {
  size_t flen = strlen(field);
  for (const char *p = text; p && *p;) {
    if (strncmp(p, field, flen) == 0 && p[flen] == ':') {
      const char *v = p + flen + 1;
      size_t len = strcspn(v, "\r\n");
      if (len >= n)
        len = n - 1;
      memcpy(out, v, len);
      out[len] = '\0';
      return 1;
    }
    p = strchr(p, '\n');
    if (p)
      p++;
  }
  return 0;
}

/* One master's figures (slot: which master; DLOCK__SLOT_ANY otherwise). */
static int ask(dlock_client *c, int slot, dlock_server_memory *m) {
  const char *argv[] = {"INFO", "memory"};
  size_t lens[] = {4, 6};
  dlock__req req;
  redisReply *r = NULL;
  int rc = dlock__req_command(&req, 2, argv, lens);
  if (rc != DLOCK_OK)
    return rc;
  req.slot = slot;
  if ((rc = dlock__call(c, &req, &r)) != DLOCK_OK)
    return rc;
  char v[64];
  memset(m, 0, sizeof *m);
  int text = r->type == REDIS_REPLY_STRING;
#ifdef REDIS_REPLY_VERB /* hiredis 1.x on RESP3: a verbatim string */
  text |= r->type == REDIS_REPLY_VERB;
#endif
  if (!text ||
      !info_field(r->str, "maxmemory_policy", m->policy, sizeof m->policy)) {
    freeReplyObject(r);
    return dlock__fail(DLOCK_EPROTO, "INFO memory: no maxmemory_policy in the reply");
  }
  if (info_field(r->str, "maxmemory", v, sizeof v))
    m->maxmemory = strtoull(v, NULL, 10);
  if (info_field(r->str, "used_memory", v, sizeof v))
    m->used = strtoull(v, NULL, 10);
  freeReplyObject(r);
  /* every policy but noeviction picks among keys with a TTL (volatile-*),
   * which a lock's key has, or among all keys (allkeys-*) */
  m->evicts = m->maxmemory > 0 && strcmp(m->policy, "noeviction") != 0;
  m->masters = 1;
  return DLOCK_OK;
}

int dlock_memory_check(dlock_client *client, dlock_server_memory *out) {
  dlock__clear_error();
  if (client == NULL || out == NULL)
    return dlock__fail(DLOCK_EINVAL, "%s is NULL", client == NULL ? "client" : "out");
  memset(out, 0, sizeof *out);
  if (dlock__client_closed(client))
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  if (dlock__on_engine_thread())
    return dlock__fail(DLOCK_EINVAL, "blocking dlock call on an engine thread");
  if (!dlock__client_slotted(client))
    return ask(client, DLOCK__SLOT_ANY, out);
  int first[DLOCK__MAX_MASTERS];
  int n = dlock__client_masters(client, first, DLOCK__MAX_MASTERS);
  if (n == 0)
    return dlock__fail(DLOCK_EIO, "the cluster's slot map is not known yet");
  for (int i = 0; i < n; i++) {
    dlock_server_memory m;
    int rc = ask(client, first[i], &m);
    if (rc != DLOCK_OK)
      return rc;
    if (i == 0 || (m.evicts && !out->evicts))
      *out = m;
  }
  out->masters = n;
  return DLOCK_OK;
}
