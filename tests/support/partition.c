/* Network partitions between loopback addresses with nftables
 * (partition.h). */
#include "partition.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static char table[64]; /* "dlock_part_PID" once made */
static int hooked;

/* Run "nft VERB inet TABLE REST" quietly: 0 when it succeeded. */
static int nft(const char *verb, const char *rest) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "nft %s inet %s %s >/dev/null 2>&1", verb, table,
           rest);
  return system(cmd) == 0 ? 0 : -1;
}

/* A loopback IPv4 literal (nothing else reaches the rules). */
static int loopback(const char *addr) {
  int a, b, c, d;
  char tail;
  return addr && sscanf(addr, "%d.%d.%d.%d%c", &a, &b, &c, &d, &tail) == 4 &&
         a == 127 && b >= 0 && b < 256 && c >= 0 && c < 256 && d >= 0 &&
         d < 256;
}

void part_fini(void) {
  if (table[0]) {
    nft("delete table", "");
    table[0] = '\0';
  }
}

static void on_signal(int sig) {
  part_fini();
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Delete the tables of processes that are gone. */
static void sweep(void) {
  FILE *p = popen("nft list tables 2>/dev/null", "r");
  char line[256];
  while (p && fgets(line, sizeof line, p)) {
    long pid = 0;
    if (sscanf(line, "table inet dlock_part_%ld", &pid) == 1 && pid > 0 &&
        kill((pid_t)pid, 0) != 0) {
      char cmd[128];
      snprintf(cmd, sizeof cmd,
               "nft delete table inet dlock_part_%ld >/dev/null 2>&1", pid);
      if (system(cmd) != 0)
        fprintf(stderr, "partition: could not delete dlock_part_%ld\n", pid);
    }
  }
  if (p)
    pclose(p);
}

int part_init(char *why, size_t n) {
  if (table[0]) { /* made already: still sweep what others left since */
    sweep();
    return 0;
  }
  if (geteuid() != 0) {
    snprintf(why, n, "partitions need root (nftables rules): run the suite "
             "as root, as CI does");
    return -1;
  }
  if (system("nft --version >/dev/null 2>&1") != 0) {
    snprintf(why, n, "no nft command: install Debian's nftables (scripts/setup "
             "does)");
    return -1;
  }
  sweep();
  snprintf(table, sizeof table, "dlock_part_%ld", (long)getpid());
  if (nft("add table", "") != 0 ||
      nft("add chain", "cut '{ type filter hook output priority 0 ; }'") != 0) {
    snprintf(why, n, "nft could not make table %s (a kernel without "
             "nf_tables?)", table);
    part_fini();
    return -1;
  }
  if (!hooked) {
    hooked = 1;
    atexit(part_fini);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
  }
  return 0;
}

int part_cut_one_way(const char *from, const char *to) {
  if (!table[0] || !loopback(from) || !loopback(to))
    return -1;
  char rule[128];
  snprintf(rule, sizeof rule, "cut ip saddr %s ip daddr %s drop", from, to);
  return nft("add rule", rule);
}

int part_cut(const char *a, const char *b) {
  return part_cut_one_way(a, b) == 0 && part_cut_one_way(b, a) == 0
             ? 0
             : -1;
}

int part_loss(const char *a, const char *b, int pct) {
  if (!table[0] || !loopback(a) || !loopback(b) || pct < 0 || pct > 100)
    return -1;
  char rule[160];
  for (int way = 0; way < 2; way++) {
    snprintf(rule, sizeof rule,
             "cut ip saddr %s ip daddr %s numgen random mod 100 '<' %d drop",
             way ? b : a, way ? a : b, pct);
    if (nft("add rule", rule) != 0)
      return -1;
  }
  return 0;
}

int part_heal(void) {
  return table[0] ? nft("flush chain", "cut") : -1;
}
