/* `dlock run`'s COMMAND as a job: its own process group, a supervisor that
 * signals the whole group if dlock dies, and the terminal handed over the
 * way a shell hands it to a foreground job. */
#ifndef DLOCK_CLI_COMMAND_H
#define DLOCK_CLI_COMMAND_H

#include <signal.h>
#include <sys/types.h>

typedef struct command_job {
  pid_t pid;        /* COMMAND, leader of its process group (0: not started) */
  pid_t supervisor; /* the process that signals the group if dlock dies */
  int to_supervisor; /* the pipe whose closing tells it dlock is gone */
  int tty;          /* fd of the terminal handed to the job, or -1 */
} command_job;

/* Start command (execvp) in a new process group. Every process in that
 * group gets orphan_signal when this process dies, even by SIGKILL: a
 * supervisor child waits for the end of a pipe only this process holds.
 * COMMAND execs only once the supervisor is in place, with signal mask
 * mask. on_group(group, data) runs once the group exists, before COMMAND
 * runs (a signal sent to the group then is delivered at its exec).
 * Returns 0, or -1 with errno (nothing started). */
int cli_command_start(command_job *job, char **command, int orphan_signal,
                  const sigset_t *mask, void (*on_group)(pid_t, void *),
                  void *data);

/* Wait for COMMAND to end (a job stopped from the terminal stops dlock too,
 * as a shell's job would, and goes on with it), then let the supervisor go
 * without signalling anyone. Returns COMMAND's exit status (128+N when
 * signal N killed it). */
int cli_command_wait(command_job *job);

#endif
