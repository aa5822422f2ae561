/* Guarded writes (include/dlock/fence.h, docs/fencing.md): a write that runs
 * on the lock's server only after a script has checked, in the same run,
 * that the caller still holds the lock and, for a fenced lock, that its
 * token is the newest (lua/guarded_call.lua, lua/guarded_eval.lua, their
 * shared checks in lua/include/guard.lua). */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/scripts.h"
#include "dlock/fence.h"
#include "lock/lock_impl.h"

#define MAX_ARGS 4096 /* arguments of one guarded command or body */
/* A key or name (binary, not NUL-terminated) in a message: "%.*s%s" */
#define SHOW(p, len) (int)((len) > 100 ? 100 : (len)), (p), ((len) > 100 ? "..." : "")

/* ---- what a command is: COMMAND INFO, asked once per name -------------------- */

typedef struct cmd_info {
  char name[40];       /* lower case */
  int first, last, step; /* key positions (last < 0: from the end) */
  int write, noscript, movable;
} cmd_info;

static struct {
  pthread_mutex_t mu;
  cmd_info *v;
  size_t n, cap;
} known = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static int known_find(const char *name, cmd_info *out) {
  pthread_mutex_lock(&known.mu);
  int found = 0;
  for (size_t i = 0; i < known.n && !found; i++)
    if (strcmp(known.v[i].name, name) == 0) {
      *out = known.v[i];
      found = 1;
    }
  pthread_mutex_unlock(&known.mu);
  return found;
}

static void known_add(const cmd_info *ci) {
  pthread_mutex_lock(&known.mu);
  if (known.n == known.cap) {
    size_t cap = known.cap ? 2 * known.cap : 16;
    cmd_info *v = realloc(known.v, cap * sizeof *v);
    if (v) {
      known.v = v;
      known.cap = cap;
    }
  }
  if (known.n < known.cap)
    known.v[known.n++] = *ci;
  pthread_mutex_unlock(&known.mu);
}

static int has_flag(const redisReply *flags, const char *flag) {
  for (size_t i = 0; flags && i < flags->elements; i++)
    if (flags->element[i]->str && strcmp(flags->element[i]->str, flag) == 0)
      return 1;
  return 0;
}

/* What the server says of command name (lower case, < 40 bytes). */
static int command_info(dlock_client *c, const char *name, cmd_info *ci) {
  if (known_find(name, ci))
    return DLOCK_OK;
  const char *argv[] = {"COMMAND", "INFO", name};
  size_t lens[] = {7, 4, strlen(name)};
  dlock__req req;
  redisReply *r = NULL;
  int rc = dlock__req_command(&req, 3, argv, lens);
  if (rc == DLOCK_OK)
    rc = dlock__call(c, &req, &r);
  if (rc != DLOCK_OK)
    return rc;
  const redisReply *e = r->type == REDIS_REPLY_ARRAY && r->elements == 1
                            ? r->element[0]
                            : NULL;
  if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements < 6) {
    freeReplyObject(r);
    return dlock__fail(DLOCK_EINVAL, "guarded write: the server does not know "
                       "the command \"%s\"", name);
  }
  *ci = (cmd_info){.first = (int)e->element[3]->integer,
                   .last = (int)e->element[4]->integer,
                   .step = (int)e->element[5]->integer};
  snprintf(ci->name, sizeof ci->name, "%s", name);
  ci->write = has_flag(e->element[2], "write");
  ci->noscript = has_flag(e->element[2], "noscript");
  ci->movable = has_flag(e->element[2], "movablekeys");
  freeReplyObject(r);
  known_add(ci);
  return DLOCK_OK;
}

/* The positions of argv's keys by ci, checked: DLOCK_OK with *nkeys of
 * them in pos (argc entries), or DLOCK_EINVAL saying why the command
 * cannot be guarded. */
static int key_positions(const cmd_info *ci, size_t argc, size_t *pos,
                         size_t *nkeys) {
  const char *name = ci->name;
  if (!ci->write)
    return dlock__fail(DLOCK_EINVAL, "guarded write: \"%s\" does not write "
                       "(a read needs no guard; read and write together with "
                       "dlock_guarded_eval)", name);
  if (ci->noscript)
    return dlock__fail(DLOCK_EINVAL, "guarded write: \"%s\" cannot run in a "
                       "script", name);
  if (ci->movable || ci->first <= 0 || ci->step <= 0)
    return dlock__fail(DLOCK_EINVAL, "guarded write: \"%s\" has no keys at "
                       "fixed places: write it with dlock_guarded_eval", name);
  long last = ci->last < 0 ? (long)argc + ci->last : ci->last;
  *nkeys = 0;
  for (long i = ci->first; i <= last && i < (long)argc; i += ci->step)
    pos[(*nkeys)++] = (size_t)i;
  if (*nkeys == 0)
    return dlock__fail(DLOCK_EINVAL, "guarded write: \"%s\" needs its keys",
                       name);
  return DLOCK_OK;
}

/* ---- the call ------------------------------------------------------------------ */

/* What a guarded write of lock (or of the fenced name alone) sends besides
 * the command: the guard's three keys and two arguments. */
typedef struct guard {
  dlock_client *c;
  const char *name;
  size_t name_len;
  dlock__buf counter, fence;
  char field[96];
  size_t field_len;
  char token[32];
  size_t token_len;
} guard;

static void guard_free(guard *g) {
  dlock__buf_free(&g->counter);
  dlock__buf_free(&g->fence);
}

static int guard_keys(guard *g, int fenced) {
  if ((fenced && dlock__key(&g->counter, DLOCK__KEY_LOCK_TOKEN, g->name,
                            g->name_len) != DLOCK_OK) ||
      (!fenced && dlock__buf_add(&g->counter, g->name, g->name_len) != DLOCK_OK) ||
      dlock__key(&g->fence, DLOCK__KEY_FENCE, g->name, g->name_len) != DLOCK_OK) {
    guard_free(g);
    return dlock__oom();
  }
  return DLOCK_OK;
}

/* The guard of lock's owner. */
static int guard_of_lock(dlock_lock *lock, uint64_t owner, guard *g) {
  *g = (guard){.c = lock->h.client, .name = lock->h.name,
               .name_len = lock->h.name_len};
  if (lock->m->reqs == NULL || lock->m->reqs->guard_field == NULL ||
      g->c == NULL)
    return dlock__fail(DLOCK_ENOTSUP, "%s locks cannot guard a write (the "
                       "reentrant, fenced and fair locks and the read-write "
                       "lock's halves can)", lock->m->kind);
  g->field_len = lock->m->reqs->guard_field(lock, owner, g->field);
  int fenced = (lock->m->caps & DLOCK_CAP_FENCED) != 0;
  g->token_len = (size_t)snprintf(g->token, sizeof g->token, "%s",
                                  fenced ? "*" : "");
  return guard_keys(g, fenced);
}

/* Keys must share the lock's slot on a cluster: said here, with the key,
 * rather than as the server's CROSSSLOT. */
static int same_slot(const guard *g, size_t n, const char *const *keys,
                     const size_t *lens) {
  if (!dlock__client_slotted(g->c))
    return DLOCK_OK;
  int want = dlock__key_slot(g->name, g->name_len);
  for (size_t i = 0; i < n; i++) {
    int slot = dlock__key_slot(keys[i], lens[i]);
    if (slot != want)
      return dlock__fail(DLOCK_EINVAL, "guarded write: the key \"%.*s%s\" is "
                         "in cluster slot %d, the lock \"%.*s%s\" in slot "
                         "%d: keep the data in the lock's slot (a {hash tag} "
                         "of the lock's name)", SHOW(keys[i], lens[i]), slot,
                         SHOW(g->name, g->name_len), want);
  }
  return DLOCK_OK;
}

/* The script's answer: {1, reply}, {0, why} or {2, the command's error}. */
static int answer(const guard *g, redisReply *r, dlock_reply **out) {
  int rc;
  if (r->type == REDIS_REPLY_ERROR) {
    rc = dlock__fail_reply(r, "guarded write");
  } else if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
             r->element[0]->type != REDIS_REPLY_INTEGER) {
    rc = dlock__fail(DLOCK_EPROTO, "guarded write: unexpected reply");
  } else if (r->element[0]->integer == 1) {
    rc = DLOCK_OK;
    if (out && (*out = dlock__reply_copy(r->element[1])) == NULL)
      rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
  } else if (r->element[0]->integer == 2) {
    rc = dlock__fail(DLOCK_EREDIS, "guarded write: the command failed, "
                     "nothing was written: %s", r->element[1]->str);
  } else if (r->elements == 3 && r->element[2]->type == REDIS_REPLY_INTEGER &&
             r->element[1]->str && !strcmp(r->element[1]->str, "never granted")) {
    /* a token above the counter: forged or mistyped, not stale */
    rc = dlock__fail(DLOCK_EINVAL, "guarded write on \"%.*s%s\" refused, "
                     "nothing written: token %s was never granted (the "
                     "lock's newest grant is %lld)", SHOW(g->name, g->name_len),
                     g->token, (long long)r->element[2]->integer);
  } else {
    const char *why = r->element[1]->str ? r->element[1]->str : "";
    rc = dlock__fail(DLOCK_EFENCED, "guarded write on \"%.*s%s\" refused, "
                     "nothing written: %s", SHOW(g->name, g->name_len),
                     !strcmp(why, "not held")
                         ? "the caller no longer holds the lock (its lease "
                           "passed, it was released, or the server lost it)"
                     : !strcmp(why, "newer grant")
                         ? "a later holder was granted the lock"
                         : "the data saw a newer token (the token counter "
                           "went back)");
  }
  freeReplyObject(r);
  return rc;
}

/* argv[i] lowered into name (40 bytes): DLOCK_OK or DLOCK_EINVAL. */
static int command_name(const char *arg, size_t len, char name[40]) {
  if (len == 0 || len >= 40)
    return dlock__fail(DLOCK_EINVAL, "guarded write: bad command name");
  for (size_t i = 0; i < len; i++)
    name[i] = (char)tolower((unsigned char)arg[i]);
  name[len] = '\0';
  return DLOCK_OK;
}

static int check_args(size_t n, const char *const *v, const size_t *lens,
                      const char *what) {
  if (n > MAX_ARGS)
    return dlock__fail(DLOCK_EINVAL, "guarded write: more than %d %s",
                       MAX_ARGS, what);
  if (n > 0 && (v == NULL || lens == NULL))
    return dlock__fail(DLOCK_EINVAL, "guarded write: %s or their lengths "
                       "are NULL", what);
  for (size_t i = 0; i < n; i++)
    if (v[i] == NULL)
      return dlock__fail(DLOCK_EINVAL, "guarded write: %s[%zu] is NULL", what, i);
  return DLOCK_OK;
}

/* Send script with the guard's keys and args, then keys and args. */
static int send_guarded(guard *g, int script, const char *body, size_t body_len,
                        size_t nkeys, const char *const *keys,
                        const size_t *klens, size_t nargs,
                        const char *const *args, const size_t *alens,
                        dlock_reply **reply) {
  size_t nk = 3 + nkeys, na = 2 + nargs;
  const char **k = calloc(nk + na, sizeof *k);
  size_t *kl = calloc(nk + na, sizeof *kl);
  int rc = k && kl ? DLOCK_OK : dlock__fail(DLOCK_ENOMEM, "out of memory");
  if (rc == DLOCK_OK) {
    const char **a = k + nk;
    size_t *al = kl + nk;
    k[0] = g->name, kl[0] = g->name_len;
    k[1] = g->counter.p, kl[1] = g->counter.len;
    k[2] = g->fence.p, kl[2] = g->fence.len;
    for (size_t i = 0; i < nkeys; i++) /* keys may be NULL when none */
      k[3 + i] = keys[i], kl[3 + i] = klens[i];
    a[0] = g->field, al[0] = g->field_len;
    a[1] = g->token, al[1] = g->token_len;
    for (size_t i = 0; i < nargs; i++)
      a[2 + i] = args[i], al[2 + i] = alens[i];
    redisReply *r = NULL;
    char why[1700];
    dlock__ack_begin(); /* the replica guard's WAIT follows the write */
    if (body) {
      rc = dlock__eval_call(g->c, body, body_len, nk, k, kl, na, a, al, &r);
    } else {
      rc = dlock__script_call(g->c, script, nk, k, kl, na, a, al, &r);
    }
    int missed = dlock__ack_end(why, sizeof why);
    if (rc == DLOCK_OK)
      rc = answer(g, r, reply);
    if (rc == DLOCK_OK && missed)
      rc = dlock__fail(DLOCK_EUNACKED, "guarded write on \"%.*s%s\": written, "
                       "but not confirmed: %s; a failover or restart may lose "
                       "it (the reply is the command's)", SHOW(g->name, g->name_len),
                       why);
  }
  free(k);
  free(kl);
  return rc;
}

/* One command under guard g (its keys found by COMMAND INFO). */
static int call_guarded(guard *g, size_t argc, const char *const *argv,
                        const size_t *lens, dlock_reply **reply) {
  char name[40];
  cmd_info ci;
  size_t *pos = NULL, nkeys = 0;
  int rc = argc == 0 ? dlock__fail(DLOCK_EINVAL, "guarded write: no command")
                     : check_args(argc, argv, lens, "argv");
  if (rc == DLOCK_OK)
    rc = command_name(argv[0], lens[0], name);
  if (rc == DLOCK_OK)
    rc = command_info(g->c, name, &ci);
  if (rc == DLOCK_OK && (pos = calloc(argc, sizeof *pos)) == NULL)
    rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
  if (rc == DLOCK_OK)
    rc = key_positions(&ci, argc, pos, &nkeys);
  const char **keys = NULL;
  size_t *klens = NULL;
  if (rc == DLOCK_OK && ((keys = calloc(nkeys, sizeof *keys)) == NULL ||
                         (klens = calloc(nkeys, sizeof *klens)) == NULL))
    rc = dlock__fail(DLOCK_ENOMEM, "out of memory");
  for (size_t i = 0; rc == DLOCK_OK && i < nkeys; i++) {
    keys[i] = argv[pos[i]];
    klens[i] = lens[pos[i]];
  }
  if (rc == DLOCK_OK)
    rc = same_slot(g, nkeys, keys, klens);
  if (rc == DLOCK_OK)
    rc = send_guarded(g, DLOCK__SCRIPT_GUARDED_CALL, NULL, 0, nkeys, keys,
                      klens, argc, argv, lens, reply);
  free(pos);
  free(keys);
  free(klens);
  return rc;
}

static int check_lock(dlock_lock *lock, dlock_reply **reply) {
  if (reply)
    *reply = NULL;
  return dlock__lock_check(lock);
}

static int guarded_call_owner(dlock_lock *lock, uint64_t owner, size_t argc,
                              const char *const *argv, const size_t *lens,
                              dlock_reply **reply) {
  guard g;
  int rc = guard_of_lock(lock, owner, &g);
  if (rc != DLOCK_OK)
    return rc;
  rc = call_guarded(&g, argc, argv, lens, reply);
  guard_free(&g);
  return rc;
}

int dlock_guarded_call(dlock_lock *lock, size_t argc, const char *const *argv,
                       const size_t *lens, dlock_reply **reply) {
  int rc = check_lock(lock, reply);
  if (rc != DLOCK_OK)
    return rc;
  return guarded_call_owner(lock, dlock__lock_owner_id(lock), argc, argv,
                                   lens, reply);
}

/* guarded_eval.lua with body in place of its "-- #body" line. */
static int eval_text(const char *body, dlock__buf *text) {
  const dlock__script *s = &dlock__scripts[DLOCK__SCRIPT_GUARDED_EVAL];
  const char *mark = strstr(s->body, "-- #body\n");
  if (mark == NULL)
    return dlock__fail(DLOCK_EPROTO, "guarded_eval.lua has no body line");
  size_t head = (size_t)(mark - s->body), skip = strlen("-- #body\n");
  if (dlock__buf_add(text, s->body, head) != DLOCK_OK ||
      dlock__buf_add(text, body, strlen(body)) != DLOCK_OK ||
      dlock__buf_add(text, "\n", 1) != DLOCK_OK ||
      dlock__buf_add(text, mark + skip, s->len - head - skip) != DLOCK_OK) {
    dlock__buf_free(text);
    return dlock__oom();
  }
  return DLOCK_OK;
}

/* The checks of a guarded body's arguments. */
static int check_eval(const char *body, size_t nkeys, const char *const *keys,
                      const size_t *klens, size_t nargs, const char *const *args,
                      const size_t *alens) {
  int rc = body == NULL || body[0] == '\0'
               ? dlock__fail(DLOCK_EINVAL, "guarded write: no body")
               : DLOCK_OK;
  if (rc == DLOCK_OK)
    rc = check_args(nkeys, keys, klens, "keys");
  if (rc == DLOCK_OK)
    rc = check_args(nargs, args, alens, "args");
  return rc;
}

/* A guarded body of owner's (arguments checked). */
static int guarded_eval_owner(dlock_lock *lock, uint64_t owner,
                              const char *body, size_t nkeys,
                              const char *const *keys, const size_t *klens,
                              size_t nargs, const char *const *args,
                              const size_t *alens, dlock_reply **reply) {
  guard g;
  int rc = guard_of_lock(lock, owner, &g);
  if (rc != DLOCK_OK)
    return rc;
  dlock__buf text = {0};
  rc = same_slot(&g, nkeys, keys, klens);
  if (rc == DLOCK_OK)
    rc = eval_text(body, &text);
  if (rc == DLOCK_OK)
    rc = send_guarded(&g, -1, text.p, text.len, nkeys, keys, klens, nargs,
                      args, alens, reply);
  dlock__buf_free(&text);
  guard_free(&g);
  return rc;
}

int dlock_guarded_eval(dlock_lock *lock, const char *body, size_t nkeys,
                       const char *const *keys, const size_t *klens,
                       size_t nargs, const char *const *args,
                       const size_t *alens, dlock_reply **reply) {
  int rc = check_lock(lock, reply);
  if (rc == DLOCK_OK)
    rc = check_eval(body, nkeys, keys, klens, nargs, args, alens);
  if (rc != DLOCK_OK)
    return rc;
  return guarded_eval_owner(lock, dlock__lock_owner_id(lock), body, nkeys,
                            keys, klens, nargs, args, alens, reply);
}

int dlock_fenced_call(dlock_client *client, const char *name, int64_t token,
                      size_t argc, const char *const *argv, const size_t *lens,
                      dlock_reply **reply) {
  dlock__clear_error();
  if (reply)
    *reply = NULL;
  if (client == NULL)
    return dlock__fail(DLOCK_EINVAL, "client is NULL");
  if (dlock__client_closed(client))
    return dlock__fail(DLOCK_ECLOSED, "client is closed");
  size_t name_len = name ? strlen(name) : 0;
  int rc = dlock__check_name(name, name_len);
  if (rc != DLOCK_OK)
    return rc;
  if (token <= 0)
    return dlock__fail(DLOCK_EINVAL, "guarded write: token must be > 0 (a "
                       "fenced lock's grant)");
  guard g = {.c = client, .name = name, .name_len = name_len};
  g.token_len = (size_t)snprintf(g.token, sizeof g.token, "%lld",
                                 (long long)token);
  if ((rc = guard_keys(&g, 1)) != DLOCK_OK)
    return dlock__fail(rc, "out of memory");
  rc = call_guarded(&g, argc, argv, lens, reply);
  guard_free(&g);
  return rc;
}

/* ---- without blocking ------------------------------------------------------- */

/* The command of an async guarded write, copied into one block (the op
 * frees it with free()). */
typedef struct packed {
  size_t argc;
  const char **argv;
  size_t *lens;
} packed;

static packed *pack(size_t argc, const char *const *argv, const size_t *lens) {
  size_t bytes = sizeof(packed) + argc * (sizeof(char *) + sizeof(size_t));
  for (size_t i = 0; i < argc; i++)
    bytes += lens[i] + 1;
  packed *p = malloc(bytes);
  if (p == NULL)
    return NULL;
  p->argc = argc;
  p->argv = (const char **)(p + 1);
  p->lens = (size_t *)(p->argv + argc);
  char *at = (char *)(p->lens + argc);
  for (size_t i = 0; i < argc; i++) {
    memcpy(at, argv[i], lens[i]);
    at[lens[i]] = '\0';
    p->argv[i] = at;
    p->lens[i] = lens[i];
    at += lens[i] + 1;
  }
  return p;
}

static int call_job(dlock__aop *op) {
  packed *p = op->ctx;
  dlock_reply *reply = NULL;
  int rc = guarded_call_owner((dlock_lock *)op->h, op->owner, p->argc,
                              p->argv, p->lens, &reply);
  op->res.reply = reply;
  return rc;
}

/* A body's job: argv[0] the body, then op->num keys, then the args. */
static int eval_job(dlock__aop *op) {
  packed *p = op->ctx;
  size_t nkeys = (size_t)op->num;
  dlock_reply *reply = NULL;
  int rc = guarded_eval_owner((dlock_lock *)op->h, op->owner, p->argv[0],
                              nkeys, p->argv + 1, p->lens + 1,
                              p->argc - 1 - nkeys, p->argv + 1 + nkeys,
                              p->lens + 1 + nkeys, &reply);
  op->res.reply = reply;
  return rc;
}

/* What every async guarded write checks: the lock, its owner (0: the
 * bound one; one is needed), its kind. */
static int check_async(dlock_lock *lock, uint64_t *owner) {
  int rc = check_lock(lock, NULL);
  if (rc == DLOCK_OK && (*owner = *owner ? *owner : lock->bound_owner) == 0)
    rc = dlock__fail(DLOCK_EINVAL, "no owner: pass an owner id "
                     "(dlock_owner_id_new) or bind one to the handle "
                     "(dlock_lock_bind_owner)");
  if (rc == DLOCK_OK && (lock->h.client == NULL || lock->m->reqs == NULL ||
                        lock->m->reqs->guard_field == NULL))
    rc = dlock__fail(DLOCK_ENOTSUP, "%s locks cannot guard a write",
                     lock->m->kind);
  return rc;
}

/* Start job on lock with p (NULL: out of memory). */
static int start_job(dlock_lock *lock, uint64_t owner, packed *p,
                     int (*job)(dlock__aop *), int64_t num, dlock_done_fn *done,
                     void *data, dlock_op *op) {
  if (p == NULL)
    return dlock__oom();
  return dlock__aop_job(lock->h.client, &lock->h, "lock", DLOCK__AOP_OTHER,
                        job, num, p, owner, done, data, op);
}

int dlock_guarded_call_async(dlock_lock *lock, uint64_t owner, size_t argc,
                             const char *const *argv, const size_t *lens,
                             dlock_done_fn *done, void *data, dlock_op *op) {
  int rc = check_async(lock, &owner);
  if (rc == DLOCK_OK && argc == 0)
    rc = dlock__fail(DLOCK_EINVAL, "guarded write: no command");
  if (rc == DLOCK_OK)
    rc = check_args(argc, argv, lens, "argv");
  if (rc != DLOCK_OK)
    return rc;
  return start_job(lock, owner, pack(argc, argv, lens), call_job, 0, done,
                   data, op);
}

int dlock_guarded_eval_async(dlock_lock *lock, uint64_t owner, const char *body,
                             size_t nkeys, const char *const *keys,
                             const size_t *klens, size_t nargs,
                             const char *const *args, const size_t *alens,
                             dlock_done_fn *done, void *data, dlock_op *op) {
  int rc = check_async(lock, &owner);
  if (rc == DLOCK_OK)
    rc = check_eval(body, nkeys, keys, klens, nargs, args, alens);
  if (rc != DLOCK_OK)
    return rc;
  size_t argc = 1 + nkeys + nargs;
  const char **v = calloc(argc, sizeof *v);
  size_t *l = calloc(argc, sizeof *l);
  packed *p = NULL;
  if (v && l) {
    v[0] = body, l[0] = strlen(body);
    for (size_t i = 0; i < nkeys; i++)
      v[1 + i] = keys[i], l[1 + i] = klens[i];
    for (size_t i = 0; i < nargs; i++)
      v[1 + nkeys + i] = args[i], l[1 + nkeys + i] = alens[i];
    p = pack(argc, v, l);
  }
  free(v);
  free(l);
  return start_job(lock, owner, p, eval_job, (int64_t)nkeys, done, data, op);
}
