/*
 * stress_fork_stdio.c: fork must not deadlock against the C library's stream locks.
 *
 * The defect it guards: the fork prepare handler took the allocator's locks (the heap arena's
 * last), and glibc's fork then waited for its stream-list lock, which it takes after the
 * prepare handlers.  A thread in fflush(NULL) held that list lock and waited for a stream's
 * lock; a thread reading a line held the stream's lock while getdelim reallocated its buffer,
 * and waited for the heap arena's lock that the forking thread held: three threads, one cycle.
 * glibc orders the stream-list lock before its malloc locks; ours must come after it too.
 *
 * Three threads do exactly that with the prd_ family: one forks in a loop (the child exits at
 * once), one calls fflush(NULL), one locks a stream (flockfile, as getdelim does) and grows a
 * buffer with prd_realloc through the heap arena's big-block sizes (16 KiB to 3 MiB) before
 * unlocking it.  Every 50th child checks that the list lock is free in the child (a thread
 * of its own runs fflush(NULL); not under the sanitizers, see child_check): glibc resets it
 * there, and the handlers must not leave a hold of their own.  The run is bounded: a deadlock fails the test when its deadline passes.
 * (tests/preload/run.sh fork-stdio runs the same with real getline under LD_PRELOAD.)
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "prudence.h"
#define PRD_TEST_FORKS_WITH_MANY_LOCKS   /* see prd_test.h: TSan holds at most 64 */
#include "prd_test.h"

// prd-test-labels: stress
// prd-test-timeout: 60

#if defined(PRD_TSAN) || defined(PRD_ASAN)
#define FORKS 300
#else
#define FORKS 3000
#endif
#define RUN_SECONDS 12.0   /* the whole run; deadline for the runner: 20 s */

static _Atomic int stop;
static _Atomic int running;   /* threads past their start: the forks begin when both are */
static FILE *stream;

static void *flusher(void *arg)
{
  (void)arg;
  atomic_fetch_add(&running, 1);
  while (!atomic_load_explicit(&stop, memory_order_relaxed))
    fflush(NULL);
  return NULL;
}

/* getdelim's pattern: the stream's lock held while the line buffer grows. */
static void *reader(void *arg)
{
  (void)arg;
  atomic_fetch_add(&running, 1);
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    flockfile(stream);
    char *buf = NULL;
    for (size_t n = 16 << 10; n <= (3u << 20); n *= 2) {
      char *nb = prd_realloc(buf, n);
      if (nb == NULL)
        break;
      buf = nb;
      buf[n - 1] = 1;
    }
    funlockfile(stream);
    prd_free(buf);
  }
  return NULL;
}

/* In the child: the stream-list lock must be free (glibc reset it, and the fork handlers
 * left it alone): a new thread's fflush(NULL) returns.  Not under TSan, which does not
 * support threads started after a multi-threaded fork, nor under ASan: its runtime does not
 * lock its own allocator around fork, so a child's new thread hangs in the sanitizer's
 * calloc when fork lands while another thread holds that lock (a thread starting up does). */
#if !defined(PRD_TSAN) && !defined(PRD_ASAN)
#define CHILD_THREAD_CHECK 1
#endif

#ifdef CHILD_THREAD_CHECK
static void *child_flush(void *arg)
{
  (void)arg;
  fflush(NULL);
  return NULL;
}
#endif

static int child_check(void)
{
#ifdef CHILD_THREAD_CHECK
  pthread_t t;
  if (pthread_create(&t, NULL, child_flush, NULL) != 0)
    return 5;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 5;
  if (pthread_timedjoin_np(t, NULL, &deadline) != 0)
    return 6;   /* the list lock is still held in the child */
#endif
  return 0;
}

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fork_stdio_run(void)
{
  stream = fopen("/dev/null", "w");
  if (stream == NULL)
    return 2;
  pthread_t t[2];
  if (pthread_create(&t[0], NULL, flusher, NULL) != 0 ||
      pthread_create(&t[1], NULL, reader, NULL) != 0)
    return 3;
  while (atomic_load(&running) < 2)
    sched_yield();
  int bad = 0, forks = 0;
  double end = now_s() + RUN_SECONDS;
  for (; forks < FORKS && now_s() < end; forks++) {
    pid_t pid = fork();
    if (pid == 0)
      _exit(forks % 50 == 0 ? child_check() : 0);
    if (pid < 0) {
      bad++;
      break;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
      ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      bad++;
      printf("# fork %d: child wait status %#x\n", forks, (unsigned)st);
    }
  }
  atomic_store(&stop, 1);
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  fclose(stream);
  printf("# %d forks\n", forks);
  fflush(stdout);
  return bad == 0 ? 0 : 4;
}

static void test_fork_stdio(void)
{
  CHECK_EQ(prd_test_bounded(fork_stdio_run, "fork with fflush(NULL) and a locked stream", 20), 0);
}

int main(void)
{
  RUN(test_fork_stdio);
  return prd_test_done();
}
