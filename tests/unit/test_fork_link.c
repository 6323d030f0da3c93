/* test_fork_link: a program linked with the static library that uses only the object-cache
 * API (no prd_malloc, which names fork.c's section marks) still gets the library's fork
 * handlers.  Guards against fork.c being left out of a static link: no file calls into it
 * (pthread_atfork calls its handlers), so without the anchor each file with fork functions
 * names, the linker dropped it, and a child forked from a multi-threaded program kept every
 * lock as the fork found it and the dead threads' CPU caches as still registered.
 *
 * Observable without races: a thread fills its CPU cache of a cache and stays alive; the
 * parent sees those objects in thread_cache_objs, and the child, whose fork handler takes
 * over the caches of the threads that did not survive, sees none (the forking thread never
 * used the cache). */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prudence.h"
#include "prd_test.h"

// prd-test-labels: unit

#define NOBJ 16

static prd_cache_t *cp;
static pthread_mutex_t hold = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;
static int filled, released;

static void *filler(void *arg)
{
  (void)arg;
  void *objs[NOBJ];
  for (int i = 0; i < NOBJ; i++)
    objs[i] = prd_cache_alloc(cp, PRD_SLEEP);
  for (int i = 0; i < NOBJ; i++)
    if (objs[i] != NULL)
      prd_cache_free(cp, objs[i]);
  pthread_mutex_lock(&hold);
  filled = 1;
  pthread_cond_broadcast(&hold_cv);
  while (!released)   /* alive, its CPU cache full, until the fork is done */
    pthread_cond_wait(&hold_cv, &hold);
  pthread_mutex_unlock(&hold);
  return NULL;
}

static void test_child_takes_over_dead_threads_caches(void)
{
  cp = prd_cache_create("fork_link", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL);
  if (cp == NULL)
    return;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, filler, NULL), 0);
  pthread_mutex_lock(&hold);
  while (!filled)
    pthread_cond_wait(&hold_cv, &hold);
  pthread_mutex_unlock(&hold);

  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(cp, &st), 0);
  CHECK(st.thread_cache_objs > 0);   /* the test can see a thread's cache */

  pid_t pid = fork();
  if (pid == 0) {
    prd_cache_stats_t cst = PRD_CACHE_STATS_INIT;
    if (prd_cache_stats(cp, &cst) != 0)
      _exit(2);
    _exit(cst.thread_cache_objs == 0 ? 0 : 1);
  }
  CHECK(pid > 0);
  int status = -1;
  if (pid > 0)
    while (waitpid(pid, &status, 0) < 0)
      ;
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);   /* 1: the dead thread's CPU cache stayed registered */

  pthread_mutex_lock(&hold);
  released = 1;
  pthread_cond_broadcast(&hold_cv);
  pthread_mutex_unlock(&hold);
  pthread_join(t, NULL);
  prd_cache_destroy(cp);
}

int main(void)
{
  RUN(test_child_takes_over_dead_threads_caches);
  return prd_test_done();
}
