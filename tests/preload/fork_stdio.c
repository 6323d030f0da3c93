/*
 * fork_stdio.c: for the preload tests (run.sh fork-stdio): one thread forks in a loop (the
 * child exits at once), one calls fflush(NULL), one reads lines of 3 MiB with getline, so
 * that getdelim grows its buffer with realloc through the big-block sizes while it holds the
 * stream's lock.  Under LD_PRELOAD=libprudence-malloc.so this guards the fork handlers'
 * order against the C library's stream locks (tests/stress/stress_fork_stdio.c has the whole
 * story); run.sh bounds it with timeout(1), so a deadlock fails the test.  Exits 0 after
 * ARGV[1] forks (default 2000) or 8 s, whichever comes first.
 *
 * The reader pauses 200 us between lines.  glibc's stream locks are not fair: a reader that
 * takes the stream's lock again a microsecond after releasing it starves fflush(NULL), which
 * waits for that lock while holding the stream-list lock that fork takes next.  Without the
 * pause a fork waited seconds, with glibc's malloc too (22 forks in 8 s), and sometimes more
 * than run.sh's 20 s: a starvation inside the C library, not the lock cycle this test guards.
 * The reader still holds the stream's lock nearly all the time (a line takes milliseconds).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE (3u << 20)

static atomic_int stop;
static FILE *in;

static void *flusher(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop))
    fflush(NULL);
  return NULL;
}

static void *reader(void *arg)
{
  long *lines = arg;
  while (!atomic_load(&stop)) {
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n = getline(&buf, &cap, in);
    if (n < 0)
      rewind(in);
    else if ((size_t)n != LINE + 1 || buf[LINE - 1] != 'x')
      *lines = -1000000;   /* a wrong line: fail */
    else
      ++*lines;
    free(buf);
    nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);   /* see the head comment */
  }
  return NULL;
}

int main(int argc, char **argv)
{
  long forks = argc > 1 ? atol(argv[1]) : 2000, lines = 0;
  in = tmpfile();
  char *line = malloc(LINE + 1);
  if (in == NULL || line == NULL)
    return 2;
  memset(line, 'x', LINE);
  line[LINE] = '\n';
  for (int i = 0; i < 4; i++)
    fwrite(line, 1, LINE + 1, in);
  free(line);
  rewind(in);
  pthread_t t[2];
  if (pthread_create(&t[0], NULL, flusher, NULL) != 0 ||
      pthread_create(&t[1], NULL, reader, &lines) != 0)
    return 3;
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long i = 0;
  int bad = 0;
  for (; i < forks; i++) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec >= 8)
      break;
    pid_t pid = fork();
    if (pid == 0)
      _exit(0);
    if (pid < 0) {
      bad = 1;
      break;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
      ;
    bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  atomic_store(&stop, 1);
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  printf("%ld forks, %ld lines read\n", i, lines);
  return bad == 0 && lines >= 0 ? 0 : 1;
}
