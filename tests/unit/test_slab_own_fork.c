/*
 * test_slab_own_fork.c: thread-owned slabs in a fork child (src/magazine.c section 11,
 * mag_adopt_orphans; src/slab.c section 10).
 *
 * The defect it guards: a thread that forks while another thread is inside tier 4, between
 * the slab layer's answer and the store of that thread's current slab (magazine.c
 * cc_own_set), left in the child a slab owned by a thread that is gone and that no flush of
 * its record can find: the slab's free buffers were stranded for the child's life.  The
 * child's take-over of the dead threads' caches gives back every slab an orphan record owns.
 * Here a live thread's record owns a slab its CPU cache does not name (tier 4 cut short at
 * the fork); after the child's take-over it must be unowned, and its own current slab too.
 */
#include <pthread.h>

#include "internal.h"
#include "magazine.h"
#define PRD_TEST_FORKS_WITH_MANY_LOCKS   /* see prd_test.h: TSan holds at most 64 */
#include "prd_test.h"

static uint64_t owned_slabs(prd_cache_t *cp)
{
  pthread_mutex_lock(cp->cache_lock);
  uint64_t n = cp->cache_nowned;
  pthread_mutex_unlock(cp->cache_lock);
  return n;
}

static prd_cache_t *fk_cache;
static void *fk_slab, *fk_buf, *fk_own;
static pthread_barrier_t fk_ready, fk_forked;

/* The other thread: its record and current slab through an allocation, then a second slab
 * made current as tier 4 would, not stored in its CPU cache; alive at the fork. */
static void *fk_thread(void *arg)
{
  (void)arg;
  fk_own = prd_cache_alloc(fk_cache, PRD_SLEEP);
  prd_tcache_t *tc = prd__mag_tc_get(fk_cache->cache_magid);
  void *slab0 = NULL;
  void *b0 = NULL;
  if (tc == NULL || prd__slab_alloc_own(fk_cache, &b0, 1, 0, tc, &slab0) != 1)
    fk_buf = NULL;
  else
    fk_buf = b0;
  fk_slab = slab0;
  pthread_barrier_wait(&fk_ready);
  pthread_barrier_wait(&fk_forked);
  prd__slab_disown(fk_cache, tc, fk_slab);   /* as its next tier 4 would have */
  prd__slab_free(fk_cache, fk_buf);
  prd_cache_free(fk_cache, fk_own);
  return NULL;
}

static void test_fork_gives_back(void)
{
  prd_cache_t *cp = prd_cache_create("own_fork", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);   /* with magazines: tier 4's */
  CHECK(cp != NULL);
  fk_cache = cp;
  pthread_barrier_init(&fk_ready, NULL, 2);
  pthread_barrier_init(&fk_forked, NULL, 2);
  pthread_t t;
  pthread_create(&t, NULL, fk_thread, NULL);
  pthread_barrier_wait(&fk_ready);
  CHECK(fk_buf != NULL && fk_own != NULL);
  uint64_t owned = owned_slabs(cp);
  CHECK(owned >= 1);
  pid_t pid = fork();
  if (pid == 0) {
    bool before = owned_slabs(cp) == owned;   /* the handler writes no slab */
    prd__mag_adopt();
    _exit(before && owned_slabs(cp) == 0 && prd__cache_check(cp) == 0 ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ(owned_slabs(cp), owned);   /* the parent has no take-over */
  pthread_barrier_wait(&fk_forked);
  pthread_join(t, NULL);
  prd_reap();
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
}

int main(void)
{
  RUN(test_fork_gives_back);
  return prd_test_done();
}
