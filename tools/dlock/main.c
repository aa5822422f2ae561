/* dlock: distributed locks, latches and semaphores from the shell.
 *
 *   dlock [--redis URL]... run [options] NAME -- COMMAND [ARG]...
 *   dlock elect [--value V] [options] NAME -- COMMAND [ARG]...
 *   dlock leader [--json] [--watch] NAME
 *   dlock latch set|count-down|wait|get|delete NAME [COUNT]
 *   dlock sem init|set|acquire|release|available NAME [N]
 *   dlock status [--json] NAME
 *   dlock list [--json] [PATTERN]
 *   dlock watch [--json] NAME
 *   dlock unlock --force NAME
 *   dlock check
 *   dlock write [--token T] NAME CMD...
 *
 * This file: the usage and the command table. Each command family is a
 * file of its own (run.c, sync.c, inspect.c, leader.c, admin.c, check.c); what they
 * share is in cli.h (options.c). See docs/dlock.1 (man dlock). Exit
 * statuses are in usage_main() below. */
#include <stdio.h>
#include <string.h>

#include <dlock/dlock.h>

#include "cli.h"

static void usage_main(FILE *f) {
  fprintf(f,
          "usage: dlock COMMAND ... [--redis URL]... [--password-file FILE]\n"
          "\n"
          "  run [--fair|--fenced|--spin|--read|--write|--semaphore --permits P]\n"
          "      [--wait D]\n"
          "      [--lease D] [--watchdog D] [--replica-sync D]\n"
          "      [--durable D [--durable-replicas N]]\n"
          "      [--lost-signal SIG] [--orphan-signal SIG]\n"
          "      NAME [--] CMD...\n"
          "                      run CMD while holding the lock NAME\n"
          "  elect [--value V] [run's options but the kinds] NAME [--] CMD...\n"
          "                      run CMD while leading the election NAME\n"
          "  leader [--json] [--watch [--changes N] [--for D]] NAME\n"
          "                      who leads the election NAME (--watch: a line\n"
          "                      per change)\n"
          "  latch set NAME COUNT | count-down NAME | wait [--wait D] NAME |\n"
          "        get NAME | delete NAME\n"
          "  sem init|set NAME PERMITS | acquire [--wait D] NAME [N] |\n"
          "      release NAME [N] | available NAME\n"
          "  status [--json] NAME  what is stored under NAME\n"
          "  list [--json] [--limit N] [PATTERN]\n"
          "                      the locks, latches and semaphores under PATTERN\n"
          "  watch [--json] [--every D] [--changes N] [--for D] NAME\n"
          "                      NAME's holders and waiters, a line per change\n"
          "  unlock --force NAME   release NAME whoever holds it\n"
          "  check                 test that the credentials can do all of it\n"
          "  write [--token T] NAME CMD...\n"
          "                      a guarded write: CMD only while the fenced\n"
          "                      lock NAME's newest grant is token T\n"
          "\n"
          "--redis URL (or DLOCK_REDIS_URL; default redis://127.0.0.1:6379):\n"
          "  redis://[user:password@]host[:port][/db], unix:///path.sock, or\n"
          "  redis+cluster://[user:password@]h1:p1,h2:p2 (Redis Cluster), or\n"
          "  redis+sentinel://[user:password@]s1:p1,s2:p2/NAME[/db] (the master\n"
          "  NAME of Redis Sentinel; user and password are the master's;\n"
          "  sentinels that want a password: --sentinel-password-file FILE\n"
          "  or DLOCK_SENTINEL_PASSWORD, and --sentinel-user USER for an ACL\n"
          "  user);\n"
          "  rediss://, rediss+cluster://, rediss+sentinel://: the same over TLS,\n"
          "  with --tls-ca FILE | --tls-ca-dir DIR (default: the system's CAs),\n"
          "  --tls-cert FILE --tls-key FILE (a client certificate),\n"
          "  --tls-server-name NAME, --tls-insecure (no verification: INSECURE);\n"
          "  valkey://, valkeys://, valkey+cluster://, valkey+sentinel://, ...:\n"
          "  the same as the redis forms (Redisson's spellings).\n"
          "  several --redis make `run` take a RedLock over all of them.\n"
          "--source-addr ADDR: connect from this local IP address.\n"
          "Options, these and a command's own, go before NAME; what follows NAME\n"
          "  is never dlock's (`run`: COMMAND's, byte for byte). A --tls-* flag\n"
          "  for a URL without TLS, or --sentinel-* for one without Sentinel, is\n"
          "  refused.\n"
          "Passwords: keep them out of URLs (every user sees them in ps):\n"
          "  --password-file FILE (mode 600 or stricter; its first line) or\n"
          "  DLOCK_REDIS_PASSWORD, used for every server in place of a URL's\n"
          "  password; an ACL user stays in the URL as redis://user:@host.\n"
          "  Messages never show a password.\n"
          "Durations: 500ms, 30s, 5m, 1h (a bare number is seconds).\n"
          "Exit status: the command's own for `run`; 64 usage, 65 the name\n"
          "holds another kind of object, 69 Redis unreachable or refusing\n"
          "calls for now (loading, a busy script, too few replicas), 70\n"
          "unexpected error, 71 out of memory, 75 not acquired (or not\n"
          "reached) in time, 76 the lease was lost while the command ran\n"
          "(`write`: refused), 77 refused by the server's ACL,\n"
          "78 a configuration to fix: the server refused the password, ACL\n"
          "user or database, TLS verification failed, or the URL does not\n"
          "fit the server.\n"
          "`dlock COMMAND --help` describes one command.\n");
}

/* ---- main ------------------------------------------------------------------ */

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
} commands[] = {{"run", cmd_run},       {"latch", cmd_latch},
                {"sem", cmd_sem},       {"status", cmd_status},
                {"list", cmd_list},     {"watch", cmd_watch},
                {"unlock", cmd_unlock}, {"check", cmd_check},
                {"write", cmd_write},   {"elect", cmd_run},
                {"leader", cmd_leader}};

int main(int argc, char **argv) {
  /* dlock [GLOBAL OPTIONS] COMMAND [OPTIONS] NAME ...: global options go
   * before COMMAND or among its options, before NAME; what follows NAME is
   * never dlock's (run's COMMAND gets it byte for byte). */
  int i = 1;
  for (; i < argc && cli_is_option(argv[i]); i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage_main(stdout);
      return 0;
    }
    if (!strcmp(argv[i], "--version")) {
      printf("dlock %s\n", DLOCK_VERSION_STRING);
      return 0;
    }
    int status = cli_take_global(argc, argv, &i);
    if (status > 0)
      return status;
    if (status < 0)
      return cli_usage_error("unknown option %s", argv[i]);
  }
  if (i >= argc)
    return cli_usage_error("missing command (run, elect, leader, latch, sem, status, "
                       "list, watch, unlock, check, write)");
  for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
    if (!strcmp(argv[i], commands[k].name))
      return commands[k].run(argc - i, argv + i);
  return cli_usage_error("unknown command \"%s\"", argv[i]);
}
