/* `dlock latch` and `dlock sem`: CountDownLatch and Semaphore from the
 * shell. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlock/dlock.h>

#include "cli.h"

/* `latch` and `sem`: [OPTIONS] OP [OPTIONS] NAME...: the options (--wait D
 * when wait_ms is given, --help, the global ones) taken, *op set; returns
 * the index of the first operand, or -1 after printing an error (-2 after
 * help). */
static int small_options(int argc, char **argv, int64_t *wait_ms,
                         void (*help)(void), const char **op) {
  *op = NULL;
  int i = 1, dashdash = 0;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!cli_is_option(a) && *op)
      break;
    if (!cli_is_option(a)) {
      *op = a;
    } else if (!strcmp(a, "--") && *op) {
      dashdash = 1;
      i++;
      break;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      help();
      return -2;
    } else if (wait_ms && !strcmp(a, "--wait") && i + 1 < argc) {
      *wait_ms = cli_parse_duration(argv[++i]);
      if (*wait_ms == -2) {
        cli_usage_error("bad duration \"%s\" for --wait", argv[i]);
        return -1;
      }
    } else if (cli_other_option(argv[0], argc, argv, &i) != 0) {
      return -1;
    }
  }
  if (*op == NULL) {
    cli_usage_error("%s: missing the operation", argv[0]);
    return -1;
  }
  return cli_operands_only(argv[0], argc, argv, i, dashdash) ? -1 : i;
}

static void latch_help(void) {
  printf("usage: dlock latch set NAME COUNT     set the count (only if unset)\n"
         "       dlock latch count-down NAME    count down by one\n"
         "       dlock latch wait [--wait D] NAME  wait until the count is 0\n"
         "       dlock latch get NAME           print the count\n"
         "       dlock latch delete NAME        delete it\n"
         "`wait` on a latch with no count (never set, or counted down to 0:\n"
         "Redisson deletes it then) returns at once, as Redisson's await does,\n"
         "and says so on stderr.\n"
         "Exit: 0; 1 when `set` found it already set; 75 when `wait` timed out.\n");
}

int cmd_latch(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    latch_help();
    return argc < 2 ? EXIT_USAGE : 0;
  }
  int64_t wait_ms = -1;
  const char *op;
  int i = small_options(argc, argv, &wait_ms, latch_help, &op);
  if (i < 0)
    return i == -2 ? 0 : EXIT_USAGE;
  int want = !strcmp(op, "set") ? 2 : 1;
  if (strcmp(op, "set") && strcmp(op, "count-down") && strcmp(op, "wait") &&
      strcmp(op, "get") && strcmp(op, "delete"))
    return cli_usage_error("latch: unknown operation \"%s\"", op);
  if (argc - i != want)
    return cli_usage_error("latch %s: expected %s", op, want == 2 ? "NAME COUNT" : "NAME");
  int64_t count = 0;
  if (want == 2 && cli_parse_count(argv[i + 1], 1, &count) != 0)
    return cli_usage_error("latch set: bad COUNT \"%s\" (a number >= 1)", argv[i + 1]);
  dlock_client *c = NULL;
  int status = cli_connect_to(cli.nurls ? cli.urls[0] : cli_default_url(), 0, NULL,
                          NULL, &c);
  if (status)
    return status;
  dlock_latch *l = NULL;
  int rc = dlock_latch_new(c, argv[i], NULL, &l);
  if (rc == DLOCK_OK) {
    if (!strcmp(op, "set")) {
      int set = 0;
      rc = dlock_latch_try_set_count(l, count, &set);
      if (rc == DLOCK_OK) {
        printf("%s\n", set ? "set" : "already set");
        status = set ? 0 : 1;
      }
    } else if (!strcmp(op, "count-down")) {
      int64_t left = 0;
      rc = dlock_latch_count_down(l, &left);
      if (rc == DLOCK_OK)
        printf("%" PRId64 "\n", left);
    } else if (!strcmp(op, "get")) {
      rc = dlock_latch_get_count(l, &count);
      if (rc == DLOCK_OK)
        printf("%" PRId64 "\n", count);
    } else if (!strcmp(op, "delete")) {
      int deleted = 0;
      rc = dlock_latch_delete(l, &deleted);
      if (rc == DLOCK_OK)
        printf("%s\n", deleted ? "deleted" : "no latch");
    } else {
      /* Redisson's await returns at once on a latch with no count: say so,
       * so a mistyped name does not pass silently */
      rc = dlock_latch_get_count(l, &count);
      if (rc == DLOCK_OK && count == 0)
        fprintf(stderr, "%s: latch %s has no count (never set, or already "
                "counted down to 0): nothing to wait for\n", cli_prog, argv[i]);
      if (rc == DLOCK_OK && count > 0)
        rc = dlock_latch_await(l, wait_ms);
      if (rc == DLOCK_ETIMEDOUT || rc == DLOCK_EBUSY) {
        fprintf(stderr, "%s: latch %s did not reach 0 in time\n", cli_prog, argv[i]);
        status = EXIT_TIMEOUT;
        rc = DLOCK_OK;
      }
    }
  }
  if (rc != DLOCK_OK)
    status = cli_fail(rc, argv[i]);
  dlock_latch_free(l);
  dlock_client_close(c);
  return status;
}

static void sem_help(void) {
  printf("usage: dlock sem init NAME PERMITS        set the permits (only if unset)\n"
         "       dlock sem set NAME PERMITS         set the permits whatever they\n"
         "                                          were; prints the available count\n"
         "       dlock sem acquire [--wait D] NAME [N]  take N permits (default 1)\n"
         "       dlock sem release NAME [N]         give back N permits\n"
         "       dlock sem available NAME           print the available permits\n"
         "A plain semaphore (Redisson RSemaphore): permits taken here are not\n"
         "given back if the shell dies; `dlock run --semaphore` is crash-safe.\n"
         "`set` on the semaphore of `dlock run --semaphore` sets its total: the\n"
         "available count may go below 0 while more permits are taken.\n"
         "Exit: 0; 1 when `init` found it already set; 75 when `acquire` timed out.\n");
}

/* sem set: the total of an expirable-permit semaphore (`run --semaphore`),
 * or the count of a plain one; prints the available count after. */
static int sem_set(dlock_client *c, const char *name, int64_t permits) {
  dlock_inspection *in = NULL;
  int rc = dlock_inspect(c, name, NULL, &in);
  int expirable = rc == DLOCK_OK && !strcmp(in->kind, "permit semaphore");
  dlock_inspection_free(in);
  int64_t available = 0;
  if (rc == DLOCK_OK && expirable) {
    dlock_permits *p = NULL;
    rc = dlock_permits_new(c, name, NULL, &p);
    if (rc == DLOCK_OK)
      rc = dlock_permits_set_permits(p, permits, &available);
    dlock_permits_free(p);
  } else if (rc == DLOCK_OK) {
    dlock_semaphore *s = NULL;
    rc = dlock_semaphore_new(c, name, NULL, &s);
    if (rc == DLOCK_OK)
      rc = dlock_semaphore_set_permits(s, permits, &available);
    dlock_semaphore_free(s);
  }
  if (rc == DLOCK_OK)
    printf("%" PRId64 "\n", available);
  return rc;
}

int cmd_sem(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    sem_help();
    return argc < 2 ? EXIT_USAGE : 0;
  }
  int64_t wait_ms = -1;
  const char *op;
  int i = small_options(argc, argv, &wait_ms, sem_help, &op);
  if (i < 0)
    return i == -2 ? 0 : EXIT_USAGE;
  int init = !strcmp(op, "init"), set = !strcmp(op, "set"),
      acq = !strcmp(op, "acquire"), rel = !strcmp(op, "release"),
      avail = !strcmp(op, "available");
  if (!init && !set && !acq && !rel && !avail)
    return cli_usage_error("sem: unknown operation \"%s\"", op);
  int left = argc - i;
  if (left < 1 || left > (avail ? 1 : 2) || ((init || set) && left != 2))
    return cli_usage_error("sem %s: expected %s", op,
                       init || set ? "NAME PERMITS" : avail ? "NAME" : "NAME [N]");
  int64_t n = 1;
  if (left == 2 && cli_parse_count(argv[i + 1], init || set ? 0 : 1, &n) != 0)
    return cli_usage_error("sem %s: bad number \"%s\"", op, argv[i + 1]);
  dlock_client *c = NULL;
  int status = cli_connect_to(cli.nurls ? cli.urls[0] : cli_default_url(), 0, NULL,
                          NULL, &c);
  if (status)
    return status;
  dlock_semaphore *s = NULL;
  int rc = set ? sem_set(c, argv[i], n) : dlock_semaphore_new(c, argv[i], NULL, &s);
  if (rc == DLOCK_OK && !set) {
    if (init) {
      int was_set = 0;
      rc = dlock_semaphore_try_set_permits(s, n, 0, &was_set);
      if (rc == DLOCK_OK) {
        printf("%s\n", was_set ? "set" : "already set");
        status = was_set ? 0 : 1;
      }
    } else if (acq) {
      rc = dlock_semaphore_acquire(s, n, wait_ms);
      if (rc == DLOCK_ETIMEDOUT || rc == DLOCK_EBUSY) {
        fprintf(stderr, "%s: %" PRId64 " permit(s) of %s not available in time\n",
                cli_prog, n, argv[i]);
        status = EXIT_TIMEOUT;
        rc = DLOCK_OK;
      }
    } else if (rel) {
      rc = dlock_semaphore_release(s, n);
    } else {
      rc = dlock_semaphore_available(s, &n);
      if (rc == DLOCK_OK)
        printf("%" PRId64 "\n", n);
    }
  }
  if (rc != DLOCK_OK)
    status = cli_fail(rc, argv[i]);
  dlock_semaphore_free(s);
  dlock_client_close(c);
  return status;
}
