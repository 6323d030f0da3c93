/*
 * prd_child.h: run a function in a child process and collect what it writes (header only).
 * The test harness (prd_test.h: a report's text and its abort) and the benchmarks
 * (bench/deferred.c: one JSON line per measured run) both fork this way; it is not part of
 * the library.
 *
 *   prd_child_fork()  fork() after flushing stdio (nothing buffered is written twice)
 *   prd_child_run(fn, arg, buf, len)  forks; the child runs fn(arg, fd), where fd is the write
 *                  end of a pipe, flushes stdio and exits 0 (fn may exit itself); the parent
 *                  reads the pipe to its end into buf (at most len - 1 bytes kept, the rest
 *                  read and dropped so that the child never blocks on a full pipe),
 *                  NUL-terminates it, and returns the child's raw wait status (WIFSIGNALED
 *                  tells an abort from an exit), or -1 when no pipe or process could be made.
 */
#ifndef PRD_CHILD_H
#define PRD_CHILD_H

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* fork() after flushing stdio, so that nothing buffered before the fork is written twice,
 * once by each process. */
static inline pid_t prd_child_fork(void)
{
  fflush(stdout);
  fflush(stderr);
  return fork();
}

static inline int prd_child_run(void (*fn)(void *arg, int fd), void *arg, char *buf, size_t len)
{
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = prd_child_fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    close(fds[0]);
    fn(arg, fds[1]);
    fflush(stdout);
    fflush(stderr);
    _exit(0);
  }
  close(fds[1]);
  size_t got = 0;
  for (;;) {
    char tmp[4096];
    ssize_t n = read(fds[0], tmp, sizeof(tmp));
    if (n <= 0)
      break;
    for (ssize_t i = 0; i < n && got + 1 < len; i++)
      buf[got++] = tmp[i];
  }
  if (len > 0)
    buf[got] = '\0';
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  return status;
}

#endif /* PRD_CHILD_H */
