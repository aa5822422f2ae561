/* A throwaway redis-server on a free loopback port. */
#include "redis_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int dlock_tool_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0)
    close(fd);
  return port;
}

static int accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0)
    close(fd);
  return ok;
}

int dlock_tool_server_start(dlock_tool_server *s) {
  s->pid = -1;
  s->port = dlock_tool_free_port();
  if (s->port < 0) {
    fprintf(stderr, "no free loopback port: %s\n", strerror(errno));
    return -1;
  }
  snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
  char port[16];
  snprintf(port, sizeof port, "%d", s->port);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the tool */
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
           "--save", "", "--appendonly", "no", (char *)NULL);
    fprintf(stderr, "cannot run redis-server: %s (install redis-server, or "
            "set DLOCK_REDIS_URL)\n", strerror(errno));
    _exit(127);
  }
  s->pid = pid;
  for (int i = 0; i < 500; i++) {
    if (accepts(s->port))
      return 0;
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      s->pid = -1;
      return -1;
    }
    usleep(10000);
  }
  fprintf(stderr, "redis-server on port %d did not start\n", s->port);
  dlock_tool_server_stop(s);
  return -1;
}

void dlock_tool_server_stop(dlock_tool_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
  }
  s->pid = -1;
}
