/*
 * test_fork_pages.c: a fork of a process with many threads, or with many caches, writes few
 * pages of the library's (src/magazine.c section 10, src/os.c section 9).
 *
 * The fork handlers take and release every thread's tc_lock, and the child marks every dead
 * thread's record an orphan: writes to each thread's record, after the fork made the pages
 * copy-on-write.  Each record had a page of its own, so each fork cost one page-fault copy per
 * thread in the parent and one in the child (8 times glibc's fork() at 256 threads).  Records
 * are slots of shared pages now.  The faults are counted, not timed: NTHREADS threads that
 * used a cache wait while the main thread forks; the parent's faults across fork() (its own
 * thread's) and the child's from its start to its first line, less those of the same fork
 * when the threads never used the library, stay well under one per thread.
 *
 * The same handlers take and release every cache's lock and every depot's.  Inside the cache
 * structures, each release was a page copy per cache on each side; the locks live on lock
 * pages now.  With one thread waiting (so that the fork takes the locks), NCACHES more caches
 * in use add well under one fault per cache.
 *
 * Not under the sanitizers: their shadow memory's copies count among the faults.
 */
// prd-test-labels: unit no-asan no-tsan
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prudence.h"
#include "prd_test.h"

#define NTHREADS 48
#define NFORKS 8
#define NCACHES 64

static prd_cache_t *cache;
static pthread_barrier_t ready, done;

static void *user(void *arg)
{
  if (arg != NULL)   /* the thread's record, CPU caches and current slab */
    prd_cache_free(cache, prd_cache_alloc(cache, PRD_SLEEP));
  pthread_barrier_wait(&ready);
  pthread_barrier_wait(&done);
  return NULL;
}

static long faults(int who)
{
  struct rusage ru;
  getrusage(who, &ru);
  return ru.ru_minflt;
}

/* The fewest page faults of NFORKS forks with n threads waiting, which used the cache or not
 * (`use`): the forking thread's across fork(), and the child's from its start to its first
 * line. */
static void fork_faults(int n, bool use, long *parent_min, long *child_min)
{
  pthread_barrier_init(&ready, NULL, (unsigned)n + 1);
  pthread_barrier_init(&done, NULL, (unsigned)n + 1);
  pthread_t t[NTHREADS];
  for (int i = 0; i < n; i++)
    CHECK_EQ(pthread_create(&t[i], NULL, user, use ? cache : NULL), 0);
  pthread_barrier_wait(&ready);
  *parent_min = *child_min = 1L << 30;
  for (int f = 0; f < NFORKS; f++) {
    long before = faults(RUSAGE_THREAD);
    pid_t pid = fork();
    if (pid == 0) {
      long k = faults(RUSAGE_SELF);
      _exit(k < 255 ? (int)k : 255);
    }
    long parent = faults(RUSAGE_THREAD) - before;
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st));
    if (parent < *parent_min)
      *parent_min = parent;
    if (WEXITSTATUS(st) < *child_min)
      *child_min = WEXITSTATUS(st);
  }
  pthread_barrier_wait(&done);
  for (int i = 0; i < n; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&ready);
  pthread_barrier_destroy(&done);
}

static void test_fork_faults(void)
{
  cache = prd_cache_create("fork_pages", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cache != NULL);
  prd_cache_free(cache, prd_cache_alloc(cache, PRD_SLEEP));
  long p0, c0, p1, c1;
  /* glibc's own: the threads' descriptors, the child's reclaim of their stacks */
  fork_faults(NTHREADS, false, &p0, &c0);
  fork_faults(NTHREADS, true, &p1, &c1);
  printf("# page faults of a fork with %d threads, fewest of %d: parent %ld (%ld when the "
         "threads never used the library), child %ld (%ld)\n", NTHREADS, NFORKS, p1, p0, c1,
         c0);
  /* one more per thread was NTHREADS or more on each side; a few pages of records now */
  CHECK(p1 - p0 < NTHREADS / 3);
  CHECK(c1 - c0 < NTHREADS / 3);
  prd_cache_destroy(cache);
}

static void test_fork_cache_faults(void)
{
  cache = prd_cache_create("fork_pages", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cache != NULL);
  prd_cache_free(cache, prd_cache_alloc(cache, PRD_SLEEP));
  long p0, c0, p1, c1;
  fork_faults(1, true, &p0, &c0);
  prd_cache_t *more[NCACHES];
  for (int i = 0; i < NCACHES; i++) {
    char name[32];
    snprintf(name, sizeof(name), "fork_pages_%d", i);
    more[i] = prd_cache_create(name, 48 + 16 * (size_t)i, 0, NULL, NULL, NULL, NULL, NULL, 0);
    CHECK(more[i] != NULL);
    prd_cache_free(more[i], prd_cache_alloc(more[i], PRD_SLEEP));
  }
  fork_faults(1, true, &p1, &c1);
  printf("# page faults of a fork beside one thread, fewest of %d: parent %ld with %d more "
         "caches (%ld before), child %ld (%ld)\n", NFORKS, p1, NCACHES, p0, c1, c0);
  /* about two per cache on each side when the locks were inside the caches */
  CHECK(p1 - p0 < NCACHES / 4);
  CHECK(c1 - c0 < NCACHES / 4);
  for (int i = 0; i < NCACHES; i++)
    prd_cache_destroy(more[i]);
  prd_cache_destroy(cache);
}

int main(void)
{
  RUN(test_fork_faults);
  RUN(test_fork_cache_faults);
  return prd_test_done();
}
