/*
 * threads.c: what a preloaded allocator's own threads must never do to a program (run by
 * tests/preload/run.sh under LD_PRELOAD=libprudence-malloc.so; each mode exits 0 when the
 * program saw what glibc's malloc gives it).
 *
 *   one-thread    a single-threaded program that allocates has exactly one thread: an
 *                 allocator thread started at malloc start-up makes every process
 *                 multi-threaded in glibc's eyes (glibc then takes its locks in stdio and
 *                 fork, and a fork() from a signal handler deadlocks in glibc's fork lock).
 *   exit          main -> malloc -> pthread_exit(NULL): the process exits 0.  A library thread
 *                 that outlives the application's keeps it alive forever.
 *   exit-threads  the same after two threads allocated (the maintenance thread runs then):
 *                 it must notice that no application thread is left and end.
 *   exit-grandchildren  the same when the threads that allocated each started a detached
 *                 thread that never allocates: glibc frees such a thread's resources with
 *                 free() after its key destructors ran, so it is counted as it ends and
 *                 never leaves the count; the library threads must still see, in /proc,
 *                 that no application thread is left (they stayed for ever).
 *   fork-exit     a multi-threaded parent forks; the child allocates and ends with
 *                 pthread_exit: it must exit 0 (it stayed a two-thread zombie); the parent
 *                 waits for it at most CHILD_WAIT_MS and prints how long it took to end.
 *   fork-exit-threads  the same with a thread in the child that allocated first (the
 *                 maintenance thread runs in the child then).
 *   signalfd      SIGTERM blocked in every application thread and read from a signalfd: the
 *                 program gets every one it sends itself.  A library thread created without
 *                 blocking signals takes the signal and the default action kills the process.
 *   join          (run with GLIBC_TUNABLES=glibc.pthread.stack_cache_size=0, so that glibc
 *                 frees a joined thread's TLS inside pthread_join, with its stack-cache lock
 *                 held) a thread that allocated joins another while two application threads
 *                 are counted and no library thread runs yet, and the join's free is a
 *                 magazine miss that finds the maintenance thread needed.  The allocator
 *                 started it there, and pthread_create waited for the lock its own thread
 *                 held: the program hung (a fork child's first join did so).
 * The run.sh cases bound each run with timeout(1): a hang fails, it does not block ctest.
 */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHILD_WAIT_MS 5000
#define SIGNALS 50

static int tasks_of(const char *dir)
{
  DIR *d = opendir(dir);
  if (d == NULL)
    return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int tasks(void)
{
  return tasks_of("/proc/self/task");
}

/* Allocates and frees blocks of many sizes, enough to leave every thread cache's first
 * magazines and reach the slow paths. */
static void churn(unsigned seed)
{
  static __thread void *keep[512];
  for (int r = 0; r < 20; r++) {
    for (int i = 0; i < 512; i++) {
      seed = seed * 1103515245u + 12345u;
      size_t n = 8 + (seed >> 8) % (i % 64 == 0 ? 200000 : 2000);
      keep[i] = malloc(n);
      if (keep[i] == NULL)
        abort();
      memset(keep[i], (int)i, n < 64 ? n : 64);
    }
    for (int i = 0; i < 512; i++)
      free(keep[i]);
  }
}

static void *churn_main(void *arg)
{
  churn((unsigned)(uintptr_t)arg);
  return NULL;
}

static void two_threads(void)
{
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    if (pthread_create(&t[i], NULL, churn_main, (void *)(uintptr_t)(i + 7)) != 0)
      abort();
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
}

static void *quiet_main(void *arg)
{
  (void)arg;
  usleep(300000);   /* never allocates */
  return NULL;
}

static void *parent_main(void *arg)
{
  churn((unsigned)(uintptr_t)arg);
  pthread_t t;
  if (pthread_create(&t, NULL, quiet_main, NULL) != 0)
    abort();
  pthread_detach(t);
  return NULL;
}

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The child calls pthread_exit after it allocated (and, with `thread`, after a second thread
 * did, so the allocator's threads run); the parent reports how long the child took to end
 * after its pthread_exit (the time is sent through a pipe just before it). */
static int mode_fork_exit(bool thread)
{
  two_threads();
  int fds[2];
  if (pipe(fds) != 0)
    return 1;
  pid_t pid = fork();
  if (pid < 0)
    return 1;
  if (pid == 0) {
    close(fds[0]);
    churn(3);
    if (thread) {
      pthread_t t;
      if (pthread_create(&t, NULL, churn_main, (void *)5) != 0)
        _exit(3);
      pthread_join(t, NULL);
    }
    double t0 = now_ms();
    if (write(fds[1], &t0, sizeof(t0)) != (ssize_t)sizeof(t0))
      _exit(4);
    pthread_exit(NULL);
  }
  close(fds[1]);
  double t0 = 0;
  if (read(fds[0], &t0, sizeof(t0)) != (ssize_t)sizeof(t0))
    t0 = now_ms();
  close(fds[0]);
  int st = 0;
  for (int ms = 0; ms < CHILD_WAIT_MS; ms++) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      printf("child exited (status %d) %.2f ms after its pthread_exit\n",
             WIFEXITED(st) ? WEXITSTATUS(st) : -1, now_ms() - t0);
      return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
    }
    struct timespec ts = { 0, 100000 };
    nanosleep(&ts, NULL);
  }
  char dir[64];
  snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
  printf("child still alive after %d ms with %d threads\n", CHILD_WAIT_MS, tasks_of(dir));
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return 1;
}

static int mode_signalfd(void)
{
  churn(1);   /* the allocator is started before the program blocks its signal */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
    return 1;
  int fd = signalfd(-1, &set, SFD_CLOEXEC);
  if (fd < 0)
    return 1;
  two_threads();   /* threads that allocate: the allocator's threads run now */
  for (int i = 0; i < SIGNALS; i++) {
    churn((unsigned)i);
    if (kill(getpid(), SIGTERM) != 0)
      return 1;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof(si)) != (ssize_t)sizeof(si) || si.ssi_signo != SIGTERM)
      return 1;
  }
  /* preloaded: main and the maintenance thread at least, else this run proved nothing */
  int n = tasks();
  printf("read %d SIGTERMs from the signalfd, %d threads\n", SIGNALS, n);
  return n >= 2 || getenv("PRD_EXPECT_PRELOAD") == NULL ? 0 : 1;
}

/* join (see the top): U only frees (a thread that never allocated starts nothing) and stays
 * counted; J allocates one big block (no magazine yet) and joins T, which ended at once: the
 * free of T's TLS inside the join is J's first magazine use, a miss, which finds the
 * maintenance thread needed (two application threads counted, none started). */
#define JOIN_BLOCKS 512
static void *join_blocks[JOIN_BLOCKS];
static pthread_barrier_t join_go, join_end;
static pthread_t join_target;
static volatile int join_u_done;

static void *join_t(void *arg)
{
  return arg;   /* T: ends at once, joinable */
}

static void *join_u(void *arg)
{
  pthread_barrier_wait(&join_go);
  for (int i = 0; i < JOIN_BLOCKS; i++)
    free(join_blocks[i]);
  __atomic_store_n(&join_u_done, 1, __ATOMIC_RELEASE);
  pthread_barrier_wait(&join_end);   /* stays counted until the join is over */
  return arg;
}

static void *join_j(void *arg)
{
  pthread_barrier_wait(&join_go);
  while (!__atomic_load_n(&join_u_done, __ATOMIC_ACQUIRE))
    usleep(1000);
  static void *big;
  big = malloc(1 << 20);   /* allocated through the family: not a first use by a free */
  pthread_join(join_target, NULL);
  free(big);
  return arg;
}

static int mode_join(void)
{
  for (int i = 0; i < JOIN_BLOCKS; i++)
    join_blocks[i] = malloc(64 + (size_t)i % 512);
  pthread_barrier_init(&join_go, NULL, 3);
  pthread_barrier_init(&join_end, NULL, 2);
  pthread_t u, j;
  if (pthread_create(&join_target, NULL, join_t, NULL) != 0 ||
      pthread_create(&u, NULL, join_u, NULL) != 0 || pthread_create(&j, NULL, join_j, NULL) != 0)
    return 2;
  usleep(50000);   /* T has ended */
  pthread_barrier_wait(&join_go);
  pthread_join(j, NULL);
  pthread_barrier_wait(&join_end);
  pthread_join(u, NULL);
  printf("joined\n");
  return 0;
}

int main(int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "one-thread") == 0) {
    churn(1);
    void *p = malloc(100);
    free(p);
    int n = tasks();
    printf("%d thread(s)\n", n);
    return n == 1 ? 0 : 1;
  }
  if (strcmp(mode, "exit") == 0) {
    void *p = malloc(100);
    free(p);
    pthread_exit(NULL);
  }
  if (strcmp(mode, "exit-threads") == 0) {
    churn(1);
    two_threads();
    pthread_exit(NULL);
  }
  if (strcmp(mode, "exit-grandchildren") == 0) {
    churn(1);
    for (int i = 0; i < 3; i++) {
      pthread_t t;
      if (pthread_create(&t, NULL, parent_main, (void *)(uintptr_t)(i + 3)) != 0)
        abort();
      pthread_detach(t);
    }
    pthread_exit(NULL);
  }
  if (strcmp(mode, "fork-exit") == 0)
    return mode_fork_exit(false);
  if (strcmp(mode, "fork-exit-threads") == 0)
    return mode_fork_exit(true);
  if (strcmp(mode, "signalfd") == 0)
    return mode_signalfd();
  if (strcmp(mode, "join") == 0)
    return mode_join();
  fprintf(stderr, "usage: %s one-thread|exit|exit-threads|exit-grandchildren|fork-exit|"
                  "fork-exit-threads|signalfd|join\n",
          argv[0]);
  return 2;
}
