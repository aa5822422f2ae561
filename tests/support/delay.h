/* A slow link between loopback addresses, for the reliability targets
 * (docs/reliability.md): this kernel has no netem (CONFIG_NET_SCH_NETEM
 * is not set), so the delay is made in user space. delay_start runs
 * a thread that listens on listen_addr (a free port, returned) and relays
 * every connection to the server at to_addr:to_port, holding each chunk
 * of bytes, both ways, for delay_ms plus a random 0..jitter_ms before it
 * passes it on. Order is kept (TCP delivers in order, so a chunk never
 * leaves before the one ahead of it); packet reordering, which TCP hides
 * from its users, is not modelled. Loss on the same path is nftables'
 * (partition.h), on the proxy's address. Traffic never leaves
 * 127.0.0.0/8. */
#ifndef DLOCK_TESTS_DELAY_H
#define DLOCK_TESTS_DELAY_H

/* Before delay_start: cut what each client sends into pieces of at most
 * bytes, each passed on gap_us after the one ahead of it (a segmented
 * write on a real network: the server reads the front of a pipelined
 * batch and answers it before the rest arrives). 0 bytes: whole chunks
 * (the default; delay_stop restores it). */
void delay_pieces(int bytes, int gap_us);
/* Start the relay; its port, or -1 (with a message on stderr). */
int delay_start(const char *listen_addr, const char *to_addr,
                      int to_port, int delay_ms, int jitter_ms);
/* Stop it and close every connection. */
void delay_stop(void);

#endif
