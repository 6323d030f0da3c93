/*
 * test_slab_own_fork.c: thread-owned slabs in a fork child (src/magazine.c prd__mag_fork_child,
 * src/slab.c section 10).
 *
 * The defect it guards: a thread that forks while another thread is inside tier 4, between
 * the slab layer's answer and the store of that thread's current slab (magazine.c
 * cc_own_set), left in the child a slab owned by a thread that is gone and that no flush of
 * its record can find: the slab's free buffers were stranded for the child's life.  The child
 * now gives back every owned slab that is not the forking thread's.  Here a slab owned by a
 * token no thread holds stands for that thread's; the child must find it unowned.
 */
#include <pthread.h>

#include "internal.h"
#define PRD_TEST_FORKS_WITH_MANY_LOCKS   /* see prd_test.h: TSan holds at most 64 */
#include "prd_test.h"

static uint64_t owned_slabs(prd_cache_t *cp)
{
  pthread_mutex_lock(&cp->cache_lock);
  uint64_t n = cp->cache_nowned;
  pthread_mutex_unlock(&cp->cache_lock);
  return n;
}

static prd_cache_t *fk_cache;
static int fk_gone;   /* the token of a thread inside tier 4 at the fork */
static void *fk_slab, *fk_buf;

/* The other thread: its slab made current, and gone (the process is multi-threaded now, so
 * the fork takes the locks and runs the child's take-over). */
static void *fk_thread(void *arg)
{
  (void)arg;
  if (prd__slab_alloc_own(fk_cache, &fk_buf, 1, 0, &fk_gone, &fk_slab) != 1)
    fk_buf = NULL;
  return NULL;
}

static void test_fork_gives_back(void)
{
  prd_cache_t *cp = prd_cache_create("own_fork", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);   /* with magazines: tier 4's */
  CHECK(cp != NULL);
  fk_cache = cp;
  pthread_t t;
  pthread_create(&t, NULL, fk_thread, NULL);
  pthread_join(t, NULL);
  void *slab = fk_slab, *b = fk_buf;
  CHECK(b != NULL);
  CHECK_EQ(owned_slabs(cp), 1);
  pid_t pid = fork();
  if (pid == 0)
    _exit(owned_slabs(cp) == 0 && prd__cache_check(cp) == 0 ? 0 : 1);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ(owned_slabs(cp), 1);   /* the parent has no take-over */
  prd__slab_disown(cp, &fk_gone, slab);
  prd__slab_free(cp, b);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
}

int main(void)
{
  RUN(test_fork_gives_back);
  return prd_test_done();
}
