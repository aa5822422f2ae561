/* A slow link: a relay that holds every chunk for a while (delay.h). */
#include "delay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 512
#define CHUNK 65536

typedef struct chunk {
  struct chunk *next;
  int64_t due; /* monotonic ns: not passed on before */
  size_t len, off;
  char data[];
} chunk;

typedef struct half { /* one direction of a relayed connection */
  int from, to;
  chunk *head, *tail;
  int eof;  /* from ended: shut to's write side once drained */
  int cut;  /* the client's side: cut into pieces (delay_pieces) */
  int done; /* shut */
} half;

typedef struct pair {
  half h[2]; /* client -> server, server -> client */
  int live;
} pair;

static struct {
  int lfd;
  struct sockaddr_in to;
  int64_t delay_ns, jitter_ns;
  size_t piece;      /* delay_pieces: 0, whole chunks */
  int64_t piece_gap_ns;
  unsigned seed;
  pair pairs[MAX_PAIRS];
  pthread_t thread;
  _Atomic int stop;
  int running;
} D = {.lfd = -1};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void nonblock(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void pair_close(pair *p) {
  for (int i = 0; i < 2; i++) {
    chunk *c = p->h[i].head;
    while (c) {
      chunk *next = c->next;
      free(c);
      c = next;
    }
    p->h[i].head = p->h[i].tail = NULL;
  }
  close(p->h[0].from);
  close(p->h[0].to);
  p->live = 0;
}

static void accept_one(void) {
  int c = accept(D.lfd, NULL, NULL);
  if (c < 0)
    return;
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0 || connect(s, (struct sockaddr *)&D.to, sizeof D.to) != 0) {
    close(c);
    if (s >= 0)
      close(s);
    return; /* the server is down: the client sees its connection end */
  }
  for (int i = 0; i < MAX_PAIRS; i++) {
    pair *p = &D.pairs[i];
    if (p->live)
      continue;
    nonblock(c);
    nonblock(s);
    memset(p, 0, sizeof *p);
    p->h[0].from = p->h[1].to = c;
    p->h[0].to = p->h[1].from = s;
    p->h[0].cut = 1;
    p->live = 1;
    return;
  }
  close(c);
  close(s);
}

/* Queue len bytes of data on h, due at due or after the chunk ahead of
 * it (order is kept). -1 without memory. */
static int queue(half *h, const char *data, size_t len, int64_t due) {
  chunk *c = malloc(sizeof *c + len);
  if (c == NULL)
    return -1;
  memcpy(c->data, data, len);
  c->due = h->tail && h->tail->due > due ? h->tail->due : due;
  c->len = len;
  c->off = 0;
  c->next = NULL;
  if (h->tail)
    h->tail->next = c;
  else
    h->head = c;
  h->tail = c;
  return 0;
}

/* Read what from has into chunks due after the delay (pieces of the
 * client's side, delay_pieces). -1 when the pair is broken. */
static int take(half *h) {
  static char buf[CHUNK];
  ssize_t n = read(h->from, buf, CHUNK);
  if (n <= 0) {
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      return 0;
    h->eof = 1; /* ended, or reset: pass on what came before */
    return 0;
  }
  int64_t jitter = D.jitter_ns > 0
                       ? (int64_t)(rand_r(&D.seed) % 1000) * D.jitter_ns / 1000
                       : 0;
  int64_t due = now_ns() + D.delay_ns + jitter;
  size_t piece = h->cut && D.piece > 0 ? D.piece : (size_t)n;
  for (size_t off = 0; off < (size_t)n; off += piece, due += D.piece_gap_ns)
    if (queue(h, buf + off, (size_t)n - off < piece ? (size_t)n - off : piece,
              due) != 0)
      return -1;
  return 0;
}

/* Pass on the chunks that are due; -1 when the pair is broken. *next
 * lowers to the next due time. */
static int pass(half *h, int64_t now, int64_t *next) {
  while (h->head && h->head->due <= now) {
    chunk *c = h->head;
    ssize_t n = write(h->to, c->data + c->off, c->len - c->off);
    if (n < 0)
      return errno == EAGAIN || errno == EINTR ? 0 : -1;
    c->off += (size_t)n;
    if (c->off < c->len)
      return 0;
    h->head = c->next;
    if (h->head == NULL)
      h->tail = NULL;
    free(c);
  }
  if (h->head && h->head->due < *next)
    *next = h->head->due;
  if (h->eof && h->head == NULL && !h->done) {
    shutdown(h->to, SHUT_WR);
    h->done = 1;
  }
  return 0;
}

static void *relay(void *arg) {
  (void)arg;
  static struct pollfd fds[1 + 2 * MAX_PAIRS];
  static pair *owner[1 + 2 * MAX_PAIRS];
  while (!atomic_load(&D.stop)) {
    int64_t now = now_ns(), next = now + 50 * 1000000LL;
    int n = 0;
    fds[n++] = (struct pollfd){.fd = D.lfd, .events = POLLIN};
    for (int i = 0; i < MAX_PAIRS; i++) {
      pair *p = &D.pairs[i];
      if (!p->live)
        continue;
      if (pass(&p->h[0], now, &next) != 0 || pass(&p->h[1], now, &next) != 0 ||
          (p->h[0].done && p->h[1].done)) {
        pair_close(p);
        continue;
      }
      for (int k = 0; k < 2; k++) { /* fd h[k].from reads h[k], writes h[1-k] */
        half *in = &p->h[k], *out = &p->h[1 - k];
        short ev = (short)((in->eof ? 0 : POLLIN) |
                           (out->head && out->head->due <= now ? POLLOUT : 0));
        owner[n] = p; /* nothing to wait for: -1, which poll skips */
        fds[n++] = (struct pollfd){.fd = ev ? in->from : -1, .events = ev};
      }
    }
    int64_t wait_ms = (next - now) / 1000000;
    if (poll(fds, (nfds_t)n, (int)(wait_ms < 1 ? 1 : wait_ms)) < 0)
      continue;
    if (fds[0].revents & POLLIN)
      accept_one();
    for (int i = 1; i < n; i += 2)
      for (int k = 0; k < 2; k++) {
        pair *p = owner[i + k];
        if (p->live && (fds[i + k].revents & (POLLIN | POLLHUP | POLLERR)) &&
            !p->h[k].eof && take(&p->h[k]) != 0)
          pair_close(p);
      }
  }
  return NULL;
}

void delay_pieces(int bytes, int gap_us) {
  D.piece = bytes > 0 ? (size_t)bytes : 0;
  D.piece_gap_ns = (int64_t)gap_us * 1000;
}

int delay_start(const char *listen_addr, const char *to_addr,
                      int to_port, int delay_ms, int jitter_ms) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  D.to = (struct sockaddr_in){.sin_family = AF_INET,
                              .sin_port = htons((uint16_t)to_port)};
  if (inet_pton(AF_INET, listen_addr, &a.sin_addr) != 1 ||
      inet_pton(AF_INET, to_addr, &D.to.sin_addr) != 1 ||
      (ntohl(a.sin_addr.s_addr) >> 24) != 127 ||
      (ntohl(D.to.sin_addr.s_addr) >> 24) != 127) {
    fprintf(stderr, "delay: %s and %s must be loopback addresses\n",
            listen_addr, to_addr);
    return -1;
  }
  D.lfd = socket(AF_INET, SOCK_STREAM, 0);
  socklen_t len = sizeof a;
  int one = 1;
  setsockopt(D.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (D.lfd < 0 || bind(D.lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(D.lfd, 128) != 0 ||
      getsockname(D.lfd, (struct sockaddr *)&a, &len) != 0) {
    perror("delay: listen");
    return -1;
  }
  D.delay_ns = (int64_t)delay_ms * 1000000;
  D.jitter_ns = (int64_t)jitter_ms * 1000000;
  D.seed = (unsigned)getpid();
  atomic_store(&D.stop, 0);
  if (pthread_create(&D.thread, NULL, relay, NULL) != 0) {
    close(D.lfd);
    return -1;
  }
  D.running = 1;
  return ntohs(a.sin_port);
}

void delay_stop(void) {
  if (!D.running)
    return;
  atomic_store(&D.stop, 1);
  pthread_join(D.thread, NULL);
  for (int i = 0; i < MAX_PAIRS; i++)
    if (D.pairs[i].live)
      pair_close(&D.pairs[i]);
  close(D.lfd);
  D.lfd = -1;
  D.running = 0;
  delay_pieces(0, 0);
}
