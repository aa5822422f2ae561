/* Fencing for a file (docs/fencing.md): a command run by
 *
 *   dlock run --fenced NAME -- dlock-fenced-file FILE TEXT
 *
 * replaces FILE with TEXT only if its token (DLOCK_FENCE_TOKEN, set by
 * `dlock run --fenced`) is newer than the token FILE was last written
 * with: a holder that stalled past its lease while a newer holder wrote
 * cannot put older content back. The file's first line holds its token.
 * The new content goes to a temporary file first; the compare and the
 * rename happen under flock(2) of FILE.lock, so two writers on this
 * machine cannot interleave them (on a network file system flock may not
 * reach other machines: use the file server's own locking there).
 *
 * Exit: 0 written, 1 refused (a newer token wrote), 2 usage or I/O error. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* The token FILE was written with (its first line), 0 without one. */
static long long stored_token(const char *path) {
  FILE *f = fopen(path, "r");
  long long t = 0;
  if (f) {
    if (fscanf(f, "%lld", &t) != 1)
      t = 0;
    fclose(f);
  }
  return t;
}

int main(int argc, char **argv) {
  const char *env = getenv("DLOCK_FENCE_TOKEN");
  if (argc != 3 || env == NULL) {
    fprintf(stderr, "usage: dlock run --fenced NAME -- %s FILE TEXT\n", argv[0]);
    return 2;
  }
  long long token = atoll(env);
  const char *path = argv[1];
  char lock_path[4096], tmp[4096];
  snprintf(lock_path, sizeof lock_path, "%s.lock", path);
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *out = fopen(tmp, "w");
  if (out == NULL || fprintf(out, "%lld\n%s\n", token, argv[2]) < 0 ||
      fflush(out) != 0 || fsync(fileno(out)) != 0 || fclose(out) != 0) {
    fprintf(stderr, "%s: %s\n", tmp, strerror(errno));
    return 2;
  }
  int fd = open(lock_path, O_CREAT | O_RDWR, 0600);
  if (fd < 0 || flock(fd, LOCK_EX) != 0) {
    fprintf(stderr, "%s: %s\n", lock_path, strerror(errno));
    unlink(tmp);
    return 2;
  }
  long long seen = stored_token(path);
  int written = token > seen && rename(tmp, path) == 0;
  if (!written)
    unlink(tmp);
  close(fd); /* releases the flock */
  if (!written) {
    fprintf(stderr, "refused: %s was written with token %lld, ours is %lld\n",
            path, seen, token);
    return 1;
  }
  printf("wrote %s with token %lld\n", path, token);
  return 0;
}
