/* `dlock run`'s COMMAND as a job of its own (see command.h).
 *
 * Why a process group and a supervisor: COMMAND runs only while dlock
 * holds the lock, and dlock's lease lives only while dlock does. The kernel
 * can signal one child when its parent dies (PR_SET_PDEATHSIG), but not
 * that child's children: `sh -c 'step1; step2'` would leave step1 running
 * unlocked. So COMMAND leads a new process group (every descendant joins
 * it unless it leaves with setsid or setpgid), and a supervisor process
 * blocks reading a pipe whose only writer is dlock: when dlock dies, by
 * any signal, the kernel closes that end, the read returns 0, and the
 * supervisor signals the whole group. COMMAND waits, before its exec, until
 * the supervisor exists, so nothing of COMMAND's ever runs unsupervised.
 *
 * The children of this multithreaded process call only async-signal-safe
 * functions before exec or _exit. */
#include "command.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* Read one byte, retrying on EINTR: 1, 0 at end of file, -1 on error. */
static ssize_t read_byte(int fd, char *c) {
  ssize_t n;
  do
    n = read(fd, c, 1);
  while (n < 0 && errno == EINTR);
  return n;
}

/* The supervisor: every signal blocked, it waits for dlock's word ('q':
 * COMMAND ended, nothing to do) or for the pipe's end (dlock died: the
 * group is signalled, and a terminal dlock had handed over goes back to
 * dlock's own group, the shell's job, so it is not left to a dead one). */
static void supervise(int from_dlock, pid_t group, int orphan_signal, int tty) {
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL); /* SIGTTOU too: tcsetpgrp below */
  char c = 0;
  if (read_byte(from_dlock, &c) != 1 || c != 'q') {
    kill(-group, orphan_signal);
    if (tty >= 0 && tcgetpgrp(tty) == group)
      tcsetpgrp(tty, getpgrp());
  }
  _exit(0);
}

/* Make the terminal's foreground group pgrp (SIGTTOU held off: the caller
 * may be in a background group at that moment). */
static void give_terminal(int tty, pid_t pgrp) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  sigprocmask(SIG_BLOCK, &ttou, &old);
  tcsetpgrp(tty, pgrp);
  sigprocmask(SIG_SETMASK, &old, NULL);
}

/* The terminal dlock runs in the foreground of, or -1: COMMAND gets it as
 * a shell's foreground job would, so it can read it and Ctrl-C reaches it. */
static int foreground_tty(void) {
  return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp()
             ? STDIN_FILENO
             : -1;
}

int cli_command_start(command_job *job, char **command, int orphan_signal,
                  const sigset_t *mask, void (*on_group)(pid_t, void *),
                  void *data) {
  int go[2], sup[2]; /* go: dlock to COMMAND; sup: dlock to the supervisor */
  if (pipe2(go, O_CLOEXEC) != 0)
    return -1;
  if (pipe2(sup, O_CLOEXEC) != 0) {
    close(go[0]);
    close(go[1]);
    return -1;
  }
  *job = (command_job){0, 0, -1, foreground_tty()};
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(go[1]);
    close(sup[0]);
    close(sup[1]); /* only dlock may hold the supervisor's pipe open */
    setpgid(0, 0);
    /* COMMAND itself also gets orphan_signal from the kernel: the
     * supervisor may not exist yet when dlock dies */
    char c;
    if (prctl(PR_SET_PDEATHSIG, orphan_signal) != 0 || getppid() != parent ||
        read_byte(go[0], &c) != 1)
      _exit(70);
    close(go[0]);
    if (job->tty >= 0)
      give_terminal(job->tty, getpid());
    sigprocmask(SIG_SETMASK, mask, NULL);
    execvp(command[0], command);
    int err = errno;
    const char *parts[] = {"dlock: cannot run ", command[0], ": ",
                           strerror(err), "\n"};
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
      if (write(STDERR_FILENO, parts[k], strlen(parts[k])) < 0)
        break;
    _exit(err == ENOENT ? 127 : 126);
  }
  int err = errno;
  close(go[0]);
  if (pid < 0) {
    close(go[1]);
    close(sup[0]);
    close(sup[1]);
    errno = err;
    return -1;
  }
  setpgid(pid, pid); /* also here: whoever runs first, it is done */
  pid_t supervisor = fork();
  if (supervisor == 0) {
    close(go[1]);
    close(sup[1]);
    supervise(sup[0], pid, orphan_signal, job->tty);
  }
  err = errno;
  close(sup[0]);
  if (supervisor < 0) { /* COMMAND sees go's end and leaves unstarted */
    close(go[1]);
    close(sup[1]);
    waitpid(pid, NULL, 0);
    errno = err;
    return -1;
  }
  job->pid = pid;
  job->supervisor = supervisor;
  job->to_supervisor = sup[1];
  if (on_group)
    on_group(pid, data);
  if (job->tty >= 0)
    give_terminal(job->tty, pid);
  ssize_t n = write(go[1], "g", 1);
  (void)n; /* COMMAND finds out itself (end of file) */
  close(go[1]);
  return 0;
}

int cli_command_wait(command_job *job) {
  int st = 0;
  for (;;) {
    pid_t r = waitpid(job->pid, &st, job->tty >= 0 ? WUNTRACED : 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      st = 70 << 8;
      break;
    }
    if (!WIFSTOPPED(st))
      break;
    /* Ctrl-Z: stop as the job the shell knows (dlock), then, continued,
     * continue COMMAND, in the foreground again if the shell put us
     * there (fg) */
    give_terminal(job->tty, getpgrp());
    raise(SIGTSTP);
    if (tcgetpgrp(job->tty) == getpgrp())
      give_terminal(job->tty, job->pid);
    kill(-job->pid, SIGCONT);
  }
  if (job->tty >= 0)
    give_terminal(job->tty, getpgrp());
  ssize_t n = write(job->to_supervisor, "q", 1);
  (void)n;
  close(job->to_supervisor);
  while (waitpid(job->supervisor, NULL, 0) < 0 && errno == EINTR)
    ;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
