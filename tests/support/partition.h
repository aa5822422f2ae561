/* Network partitions between loopback addresses, for the reliability
 * targets (docs/reliability.md): every address in 127.0.0.0/8 is this
 * machine's own, so servers and clients each get one (127.0.0.2, .3, ...;
 * a server binds it, a client connects from it with source_addr) and
 * nftables rules in a table of this process's own drop the packets between
 * chosen pairs. Traffic never leaves 127.0.0.0/8.
 *
 * The table is named dlock_part_PID. It is removed at exit (atexit, and on
 * SIGINT/SIGTERM/SIGHUP), and part_init sweeps the tables of earlier
 * processes that are gone (killed with -9 before they could clean up).
 * Needs root and the nft command (Debian's nftables). */
#ifndef DLOCK_TESTS_PARTITION_H
#define DLOCK_TESTS_PARTITION_H

#include <stddef.h>

/* Sweep what dead processes left, then make this process's table and
 * chain (once; every later call sweeps again). 0, or -1 with the reason in why (no nft, not root, ...): the
 * caller says exactly why its test could not run. */
int part_init(char *why, size_t n);
/* Drop every packet between a and b (both directions; IPv4 literals in
 * 127.0.0.0/8). 0 or -1. */
int part_cut(const char *a, const char *b);
/* Drop packets from a to b only (one-way loss). 0 or -1. */
int part_cut_one_way(const char *from, const char *to);
/* Drop pct % of the packets between a and b, at random (both ways): a
 * lossy link. 0 or -1. */
int part_loss(const char *a, const char *b, int pct);
/* Remove every rule: the network is whole again. 0 or -1. */
int part_heal(void);
/* Remove the table (also done at exit). */
void part_fini(void);

#endif
