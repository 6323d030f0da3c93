/*
 * test_fork_orphans.c: a fork child's take-over of the CPU caches of the threads that did not
 * survive the fork (src/magazine.c section 11).
 *
 * The child's fork handler only marks those threads' records; they are flushed at the child's
 * first maintenance pass, reap or statistics snapshot.  Until then every visitor treats them
 * as idle threads' caches, so:
 * - a thread cut short inside an operation on a CPU cache left its busy mark set, which no
 *   one will clear: the handler clears it, or the child's destroy of that cache (whose visit
 *   waits for the owner's operation to end) would wait for ever;
 * - the dead threads' objects are the child's: its statistics balance, and it allocates them.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prudence.h"
#define PRD_TEST_FORKS_WITH_MANY_LOCKS   /* see prd_test.h: TSan holds at most 64 */
#include "prd_test.h"

// prd-test-labels: unit

#define NFORKS 24

static prd_cache_t *spin_cache;
static atomic_int spin_stop, spin_started;

/* Allocates and frees back to back: at a fork it is inside an operation on its CPU cache
 * about as often as not. */
static void *spinner(void *arg)
{
  (void)arg;
  atomic_store(&spin_started, 1);
  while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) {
    void *p = prd_cache_alloc(spin_cache, PRD_SLEEP);
    if (p != NULL)
      prd_cache_free(spin_cache, p);
  }
  return NULL;
}

/* A child that destroys the cache the dead thread was using: its visit waits for owners inside
 * an operation.  The dead thread may have held one buffer at the fork (the destroy reports
 * it: the child's stderr goes to /dev/null, and it goes on).  SIGALRM ends a child that waits
 * for ever. */
static void test_cut_operation_does_not_hang(void)
{
  spin_cache = prd_cache_create("orphan_spin", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                PRD_CACHE_NODEBUG);
  CHECK(spin_cache != NULL);
  if (spin_cache == NULL)
    return;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, spinner, NULL), 0);
  while (!atomic_load(&spin_started))
    sched_yield();
  int hung = 0, failed = 0;
  for (int i = 0; i < NFORKS; i++) {
    usleep(1000);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(20);
      int null = open("/dev/null", O_WRONLY);
      if (null >= 0 && getenv("FO_STDERR") == NULL)
        dup2(null, 2);
      if (prd_option_set("abort_on_error", "0") != 0)
        _exit(3);
      prd_cache_destroy(spin_cache);
      /* and the child goes on allocating */
      prd_cache_t *cp = prd_cache_create("orphan_after", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                         PRD_CACHE_NODEBUG);
      void *p = cp != NULL ? prd_cache_alloc(cp, PRD_SLEEP) : NULL;
      if (p == NULL)
        _exit(2);
      prd_cache_free(cp, p);
      prd_cache_destroy(cp);
      _exit(0);
    }
    CHECK(pid > 0);
    if (pid < 0)
      break;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
      ;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
      hung++;
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failed++;
  }
  CHECK_EQ(hung, 0);
  CHECK_EQ(failed, 0);
  atomic_store(&spin_stop, 1);
  pthread_join(t, NULL);
  prd_cache_destroy(spin_cache);
}

#define NTHREADS 3
#define NOBJ 40

static prd_cache_t *fill_cache;
static pthread_mutex_t hold = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int filled, released;

/* Fills its CPU cache of fill_cache and stays alive until the forks are done. */
static void *filler(void *arg)
{
  (void)arg;
  void *objs[NOBJ];
  for (int i = 0; i < NOBJ; i++)
    objs[i] = prd_cache_alloc(fill_cache, PRD_SLEEP);
  for (int i = 0; i < NOBJ; i++)
    if (objs[i] != NULL)
      prd_cache_free(fill_cache, objs[i]);
  pthread_mutex_lock(&hold);
  filled++;
  pthread_cond_broadcast(&hold_cv);
  while (!released)
    pthread_cond_wait(&hold_cv, &hold);
  pthread_mutex_unlock(&hold);
  return NULL;
}

static int balanced(prd_cache_t *cp, uint64_t live)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  if (prd_cache_stats(cp, &st) != 0)
    return 0;
  return st.thread_cache_objs == 0 && st.bufs_inuse == live + st.depot_rounds;
}

/* The child sees none of the dead threads' objects in thread caches, every buffer is where the
 * statistics say, and it allocates more than any one thread's magazines held. */
static void test_child_takes_the_objects(void)
{
  fill_cache = prd_cache_create("orphan_fill", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                PRD_CACHE_NODEBUG);
  CHECK(fill_cache != NULL);
  if (fill_cache == NULL)
    return;
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++)
    CHECK_EQ(pthread_create(&t[i], NULL, filler, NULL), 0);
  pthread_mutex_lock(&hold);
  while (filled < NTHREADS)
    pthread_cond_wait(&hold_cv, &hold);
  pthread_mutex_unlock(&hold);
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(fill_cache, &st), 0);
  CHECK(st.thread_cache_objs > 0);   /* the threads' caches hold objects */

  pid_t pid = fork();
  if (pid == 0) {
    alarm(20);
    if (!balanced(fill_cache, 0))
      _exit(1);
    void *objs[NTHREADS * NOBJ];
    for (int i = 0; i < NTHREADS * NOBJ; i++)
      if ((objs[i] = prd_cache_alloc(fill_cache, PRD_SLEEP)) == NULL)
        _exit(2);
    for (int i = 0; i < NTHREADS * NOBJ; i++)
      prd_cache_free(fill_cache, objs[i]);
    prd_reap();
    if (!balanced(fill_cache, 0))
      _exit(3);
    _exit(0);
  }
  CHECK(pid > 0);
  int status = -1;
  if (pid > 0)
    while (waitpid(pid, &status, 0) < 0)
      ;
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);   /* 1, 3: unbalanced; 2: no buffer */

  pthread_mutex_lock(&hold);
  released = 1;
  pthread_cond_broadcast(&hold_cv);
  pthread_mutex_unlock(&hold);
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(t[i], NULL);
  prd_cache_destroy(fill_cache);
}

int main(void)
{
  RUN(test_cut_operation_does_not_hang);
  RUN(test_child_takes_the_objects);
  return prd_test_done();
}
