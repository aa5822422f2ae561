/* `dlock unlock --force` and `dlock write`: releasing a lock whoever
 * holds it, and a write guarded by a fenced lock's token. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock/dlock.h>

#include "cli.h"

static void unlock_help(void) {
  printf("usage: dlock unlock --force NAME\n"
         "Release the lock NAME whoever holds it and wake its waiters (a lock,\n"
         "fair lock or read-write lock). Prints \"released\" or \"not locked\".\n");
}

int cmd_unlock(int argc, char **argv) {
  int force = 0, i, status;
  const cli_opt opts[] = {{"--force", CLI_FLAG, &force, 0}, {NULL, 0, NULL, 0}};
  if ((status = cli_options("unlock", argc, argv, opts, unlock_help, 1, &i)) != 0)
    return status < 0 ? 0 : status;
  if (!force)
    return cli_usage_error("unlock: only --force is supported (a lock belongs to "
                       "its holder; `dlock run` releases its own)");
  if (argc - i != 1)
    return cli_usage_error("unlock: expected NAME");
  const char *name = argv[i];
  dlock_client *c = NULL;
  dlock_inspection *in = NULL;
  dlock_lock *l = NULL;
  status = cli_open_first(&c);
  if (status)
    return status;
  int rc = dlock_inspect(c, name, NULL, &in);
  if (rc == DLOCK_OK && in->mode) /* a read-write lock: release its mode */
    rc = !strcmp(in->mode, "write") ? dlock_write_lock_new(c, name, NULL, &l)
                                    : dlock_read_lock_new(c, name, NULL, &l);
  else if (rc == DLOCK_OK) /* the fair lock's release also wakes its queue */
    rc = dlock_fair_lock_new(c, name, NULL, &l);
  int released = 0;
  if (rc == DLOCK_OK)
    rc = dlock_force_release(l, &released);
  if (rc == DLOCK_OK)
    printf("%s\n", released ? "released" : "not locked");
  else
    status = cli_fail(rc, name);
  dlock_lock_free(l);
  dlock_inspection_free(in);
  dlock_client_close(c);
  return status;
}

static void write_help(void) {
  printf("usage: dlock write [--token T] NAME COMMAND [ARG]...\n"
         "Run the Redis write COMMAND (SET, HSET, INCRBY, LPUSH, ...) only if\n"
         "the fenced lock NAME is held and T is its newest grant's token, and\n"
         "no newer token wrote guarded data since: for a command started by\n"
         "`dlock run --fenced NAME`, which gets T in DLOCK_FENCE_TOKEN (the\n"
         "default here). Keep the data in NAME's slot on a cluster\n"
         "({NAME}:key). Everything after NAME is the command's, byte for byte.\n"
         "Prints the reply (a string or number per line; nothing for nil).\n"
         "Exit: 0 written; 76 refused (the lease passed or a newer holder\n"
         "came: nothing was written); 64 not a write command or a bad token.\n");
}

static void print_reply(const dlock_reply *r) {
  if (r == NULL || r->type == DLOCK_REPLY_NIL)
    return;
  if (r->type == DLOCK_REPLY_INTEGER)
    printf("%lld\n", r->integer);
  else if (r->type == DLOCK_REPLY_ARRAY)
    for (size_t i = 0; i < r->elements; i++)
      print_reply(r->element[i]);
  else {
    fwrite(r->str, 1, r->len, stdout);
    putchar('\n');
  }
}

int cmd_write(int argc, char **argv) {
  const char *token_text = getenv("DLOCK_FENCE_TOKEN");
  int i, status;
  const cli_opt opts[] = {{"--token", CLI_TEXT, &token_text, 0},
                          {NULL, 0, NULL, 0}};
  /* everything after NAME is the command's, byte for byte */
  if ((status = cli_options("write", argc, argv, opts, write_help, 0, &i)) != 0)
    return status < 0 ? 0 : status;
  int64_t token = 0;
  if (token_text == NULL)
    return cli_usage_error("write: no token (--token T, or DLOCK_FENCE_TOKEN as "
                       "`dlock run --fenced` sets it)");
  if (cli_parse_count(token_text, 1, &token) != 0)
    return cli_usage_error("write: bad token \"%s\" (a fenced lock's token, > 0)",
                       token_text);
  if (argc - i < 2)
    return cli_usage_error("write: expected NAME COMMAND [ARG]...");
  const char *name = argv[i++];
  size_t n = (size_t)(argc - i);
  size_t *lens = calloc(n, sizeof *lens);
  if (lens == NULL)
    return cli_fail(DLOCK_ENOMEM, name);
  for (size_t k = 0; k < n; k++)
    lens[k] = strlen(argv[i + (int)k]);
  dlock_client *c = NULL;
  status = cli_open_first(&c);
  if (status == 0) {
    dlock_reply *reply = NULL;
    int rc = dlock_fenced_call(c, name, token, n, (const char *const *)argv + i,
                               lens, &reply);
    if (rc == DLOCK_OK)
      print_reply(reply);
    else
      status = cli_fail(rc, name);
    dlock_reply_free(reply);
    dlock_client_close(c);
  }
  free(lens);
  return status;
}
