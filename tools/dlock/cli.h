/* What the dlock tool's commands share (options.c): the exit statuses, the
 * global options in one struct, the messages, the option parser every
 * command uses, and the connection to the configured servers. Each command
 * family is a file of its own (run.c, leader.c, sync.c, inspect.c,
 * admin.c, check.c; command.c runs a child command); main.c holds the
 * command table. */
#ifndef DLOCK_CLI_H
#define DLOCK_CLI_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <dlock/dlock.h>

enum {
  EXIT_USAGE = 64,    /* bad command line (sysexits EX_USAGE) */
  EXIT_KIND = 65,     /* the name holds another kind of object (EX_DATAERR) */
  EXIT_NOREDIS = 69,  /* cannot reach Redis, or it refuses calls for now
                         (EX_UNAVAILABLE) */
  EXIT_SOFTWARE = 70, /* unexpected error (EX_SOFTWARE) */
  EXIT_OSERR = 71,    /* out of memory (DLOCK_ENOMEM: EX_OSERR) */
  EXIT_TIMEOUT = 75,  /* not acquired / not reached in time (EX_TEMPFAIL) */
  EXIT_LOST = 76,     /* the lease was lost while the command ran */
  EXIT_NOPERM = 77,   /* the server's ACL refused a command or channel
                         (EX_NOPERM) */
  EXIT_CONFIG = 78    /* the server refused the credentials or database,
                         TLS verification failed, the URL does not fit the
                         server (EX_CONFIG): fix it, no retry helps */
};

#define CLI_MAX_REDIS 16

/* The options every command's connection uses, and the acknowledgement
 * options `run` and `check` share: set by the parsers in options.c. */
typedef struct cli_globals {
  const char *urls[CLI_MAX_REDIS]; /* --redis, in order */
  int nurls;
  char password[4096]; /* --password-file or DLOCK_REDIS_PASSWORD */
  int have_password;
  /* a sentinel URL's sentinels: --sentinel-password-file or
   * DLOCK_SENTINEL_PASSWORD, --sentinel-user */
  char sentinel_password[4096];
  int have_sentinel_password;
  const char *sentinel_user;
  /* rediss...: --tls-ca, --tls-ca-dir, --tls-cert, --tls-key,
   * --tls-server-name, --tls-insecure */
  const char *tls_ca, *tls_ca_dir, *tls_cert, *tls_key, *tls_server_name;
  int tls_insecure;
  const char *source_addr; /* --source-addr */
  /* the first --tls-* and --sentinel-* flag given: a URL they do not apply
   * to is refused with its name, never run without them */
  const char *tls_flag, *sentinel_flag;
  /* --replica-sync, --durable, --durable-replicas (run, check) */
  int64_t replica_sync_ms, durable_ms, durable_replicas;
  int replica_sync_all; /* --replica-sync-all (run, elect) */
} cli_globals;

extern cli_globals cli;
extern const char *const cli_prog; /* "dlock", the messages' first word */

/* ---- messages ------------------------------------------------------------ */

/* A URL as messages show it: its password hidden. */
const char *cli_shown(const char *url);
/* "dlock: ..." on stderr; EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A library failure rc about what, said once, on stderr; its exit status. */
int cli_fail(int rc, const char *what);

/* Timed waits on the monotonic clock (a wall clock that jumps moves no
 * deadline): a condition variable whose timed waits use it, and the
 * deadline ms from now on it. */
void cli_cond_init(pthread_cond_t *cv);
struct timespec cli_deadline(int64_t ms);

/* A JSON string of s (len bytes: control bytes escaped; other bytes as
 * they are). */
void cli_json_bytes(FILE *f, const char *s, size_t len);
void cli_json_str(FILE *f, const char *s);

/* ---- parsing ------------------------------------------------------------- */

/* "500ms", "30s", "5m", "1h", "2" (seconds), "forever" (-1); -2 on error. */
int64_t cli_parse_duration(const char *s);
/* A whole number >= min into *out: 0, or -1. */
int cli_parse_count(const char *s, int64_t min, int64_t *out);
/* "TERM", "SIGTERM", "15": the signal, or -1. */
int cli_parse_signal(const char *s);
/* Does a command's option list go on at word a? ("-" alone is a word) */
int cli_is_option(const char *a);
/* A global option at argv[*i] (taken, *i moved onto its value): 0, -1 when
 * argv[*i] is not one, or an exit status. */
int cli_take_global(int argc, char **argv, int *i);
/* One option of cmd's that is not its own: a global one, or a usage error
 * naming cmd. 0 or an exit status. */
int cli_other_option(const char *cmd, int argc, char **argv, int *i);
/* The operands argv[i..argc) of a command that ended its options without
 * `--` (dashdash 0): one that looks like an option is refused. */
int cli_operands_only(const char *cmd, int argc, char **argv, int i, int dashdash);
/* --replica-sync, --durable or --durable-replicas (o) with its value into
 * cli; 0 or an exit status. */
int cli_ack_option(const char *o, const char *val);
/* --replica-sync and --durable together stay below the command timeout. */
int cli_ack_opts_check(void);

/* A command's own options, for cli_options: a flag (int, set to 1), a
 * whole number >= min (int64_t), a duration > 0 (int64_t, ms) or a word
 * (const char *). */
typedef enum { CLI_FLAG, CLI_COUNT, CLI_DURATION, CLI_TEXT } cli_opt_kind;
typedef struct cli_opt {
  const char *name; /* "--json"; NULL ends a table */
  cli_opt_kind kind;
  void *dest;
  int64_t min; /* CLI_COUNT's least value */
} cli_opt;

/* The options of cmd (argv[1..]): its own (table), --help (help printed),
 * the global ones, up to the first operand or a `--` (skipped); with
 * operands_checked, an operand that looks like an option is refused (a
 * command whose operands after NAME are data passes 0). *first: the first
 * operand's index. Returns 0, -1 after --help, or an exit status. */
int cli_options(const char *cmd, int argc, char **argv, const cli_opt *table,
                void (*help)(void), int operands_checked, int *first);

/* ---- connecting ---------------------------------------------------------- */

/* The URL when no --redis was given: DLOCK_REDIS_URL, else localhost. */
const char *cli_default_url(void);
/* Does url use TLS, or Sentinel? */
int cli_url_tls(const char *url);
int cli_url_sentinel(const char *url);
/* A client of url with the global options (engine: NULL, or a client whose
 * engine thread it shares); watchdog_ms > 0 sets the watchdog's lease, lost
 * the lost-lock callback. 0 or an exit status (the failure said). */
int cli_connect_to(const char *url, int64_t watchdog_ms, dlock_lost_fn *lost,
               dlock_client *engine, dlock_client **out);
/* A client of the first --redis server (or the default URL). */
int cli_open_first(dlock_client **out);

/* ---- the commands (argv[0] is the command's name) ------------------------ */

int cmd_run(int argc, char **argv);    /* run.c: run and elect */
int cmd_latch(int argc, char **argv);  /* sync.c */
int cmd_sem(int argc, char **argv);    /* sync.c */
int cmd_status(int argc, char **argv); /* inspect.c */
int cmd_list(int argc, char **argv);   /* inspect.c */
int cmd_watch(int argc, char **argv);  /* inspect.c */
int cmd_unlock(int argc, char **argv); /* admin.c */
int cmd_write(int argc, char **argv);  /* admin.c */
int cmd_check(int argc, char **argv);  /* check.c */
int cmd_leader(int argc, char **argv); /* leader.c */

#endif
