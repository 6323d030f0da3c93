/* test_defer_nowait: no allocation waits for readers (src/rcu.c section 9, src/defer.c
 * section 9).  The defect this guards: a PRD_SLEEP allocation from a cache that has seen
 * deferrals, and plain prd_malloc, ran a grace period on the calling thread (the depot's
 * latent wait and its 4/5 rule, the latent-cap wait, the own-generation wait, the OOM wait).
 * A writer that allocates and defers while it holds a mutex that a reader takes inside its
 * read-side section then deadlocks: the grace period waits for the reader, the reader for the
 * mutex, the writer for the grace period.  Each case runs in a child under alarm(), so the
 * old hang fails the test (killed by SIGALRM) instead of blocking ctest; the child also checks
 * that nothing deferred under the mutex was handed out again before the mutex was dropped
 * (the reader held its section throughout: none of those grace periods could have ended).
 * The OOM case: with the arena exhausted and the grace period blocked the same way, a
 * PRD_SLEEP allocation fails with ENOMEM after its bounded poll instead of hanging.
 * prd-test-timeout: 400
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "internal.h"
#include "prd_test.h"

#define HOLD_ALLOCS 20000 /* allocations per hold of the mutex: the old code hung after ~2,800 */
#define HOLDS 4
#define CHILD_ALARM_S 100 /* the fixed code needs a few seconds at most under sanitizers */

static pthread_mutex_t app_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int rd_in_section, rd_stop;

/* The application's reader: a read-side section that takes the writer's mutex, as readers in
 * user space may (the kernel's could not). */
static void *reader(void *arg)
{
  (void)arg;
  while (!atomic_load(&rd_stop)) {
    prd_rcu_read_lock();
    atomic_store(&rd_in_section, 1);
    pthread_mutex_lock(&app_lock);
    atomic_store(&rd_in_section, 0);   /* under the mutex: see hold_lock */
    pthread_mutex_unlock(&app_lock);
    prd_rcu_read_unlock();
    sched_yield();
  }
  return NULL;
}

/* Takes the mutex, then waits, holding it, until the reader is inside its section and waiting
 * for the mutex (it clears rd_in_section only while it holds the mutex, so a 1 seen under the
 * mutex is a reader that has not got it yet): no grace period can end during the hold.  The
 * mutex stays held while it waits: a reader that goes round its loop meets it in the next
 * section.  (Taking and dropping it until the reader was seen could miss the reader's window
 * round after round, a livelock seen under TSan on a loaded machine.) */
static void hold_lock(void)
{
  pthread_mutex_lock(&app_lock);
  while (!atomic_load(&rd_in_section))
    sched_yield();
}

static int ptr_cmp(const void *a, const void *b)
{
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* Every allocation of one hold was a different object: a deferred one handed out again before
 * its grace period (which the reader blocks) would repeat. */
static int count_repeats(void **p, size_t n)
{
  qsort(p, n, sizeof(void *), ptr_cmp);
  int rep = 0;
  for (size_t i = 1; i < n; i++)
    rep += p[i] == p[i - 1];
  return rep;
}

struct writer_ops {
  void *(*wo_alloc)(void *ctx);
  void (*wo_defer)(void *ctx, void *p);
  void *wo_ctx;
};

static void run_writer(const struct writer_ops *ops)
{
  alarm(CHILD_ALARM_S);
  pthread_t r;
  pthread_create(&r, NULL, reader, NULL);
  void **got = malloc(HOLD_ALLOCS * sizeof(void *));
  int repeats = 0, nulls = 0;
  long allocs = 0;
  for (int h = 0; h < HOLDS; h++) {
    hold_lock();
    for (int i = 0; i < HOLD_ALLOCS; i++) {
      void *p = ops->wo_alloc(ops->wo_ctx);
      got[i] = p;
      if (p == NULL) {
        nulls++;
        continue;
      }
      allocs++;
      *(volatile long *)p = i;
      ops->wo_defer(ops->wo_ctx, p);
    }
    pthread_mutex_unlock(&app_lock);
    repeats += count_repeats(got, HOLD_ALLOCS);
  }
  atomic_store(&rd_stop, 1);
  pthread_join(r, NULL);
  free(got);
  printf("allocs=%ld nulls=%d repeats=%d\n", allocs, nulls, repeats);
}

static void *cache_alloc(void *ctx) { return prd_cache_alloc(ctx, PRD_SLEEP); }
static void cache_defer(void *ctx, void *p) { prd_cache_free_deferred(ctx, p); }

static void child_cache(void *arg)
{
  (void)arg;
  prd_cache_t *cp = prd_cache_create("nowait256", 256, 0, NULL, NULL, NULL, NULL, NULL, 0);
  struct writer_ops ops = { cache_alloc, cache_defer, cp };
  run_writer(&ops);
}

static void *malloc_alloc(void *ctx)
{
  (void)ctx;
  return prd_malloc(256);
}

static void malloc_defer(void *ctx, void *p)
{
  (void)ctx;
  prd_free_deferred(p);
}

static void child_malloc(void *arg)
{
  (void)arg;
  struct writer_ops ops = { malloc_alloc, malloc_defer, NULL };
  run_writer(&ops);
}

static void expect_no_wait(void (*fn)(void *))
{
  char buf[4096];
  int st = prd_test_child(fn, NULL, buf, sizeof(buf));
  if (WIFSIGNALED(st))
    fprintf(stderr, "  child killed by signal %d (SIGALRM %d: it hung)\n", WTERMSIG(st), SIGALRM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char want[64];
  snprintf(want, sizeof(want), "allocs=%d nulls=0 repeats=0", HOLD_ALLOCS * HOLDS);
  CHECK_STR_CONTAINS(buf, want);
}

/* A cache with deferrals, allocated from under a lock its readers take. */
static void test_cache_alloc_under_reader_lock(void)
{
  expect_no_wait(child_cache);
}

/* The same through the malloc family: prd_malloc + prd_free_deferred. */
static void test_malloc_under_reader_lock(void)
{
  expect_no_wait(child_malloc);
}

/* Out of memory with the grace period blocked: a sleeping allocation polls for its bounded
 * time (defer_oom_wait_ms) and then fails with ENOMEM, rather than wait for the reader. */
static void child_oom(void *arg)
{
  (void)arg;
  alarm(CHILD_ALARM_S);
  prd_option_set("defer_oom_wait_ms", "20");
  /* an arena of 1 MiB: the cache cannot grow past it */
  static char space[1 << 20] __attribute__((aligned(4096)));
  prd_vmem_t *vm = prd_vmem_create("nowait_src", space, sizeof(space), 4096, NULL, NULL, NULL,
                                   0, 0);
  prd_cache_t *cp = prd_cache_create("nowait_oom", 256, 0, NULL, NULL, NULL, NULL, vm, 0);
  pthread_t r;
  pthread_create(&r, NULL, reader, NULL);
  hold_lock();
  int fails = 0, enomem = 0;
  long allocs = 0;
  for (int i = 0; i < 8192 && fails < 3; i++) {
    void *p = prd_cache_alloc(cp, PRD_SLEEP);
    if (p == NULL) {
      fails++;
      enomem += errno == ENOMEM;
      continue;
    }
    allocs++;
    prd_cache_free_deferred(cp, p);
  }
  pthread_mutex_unlock(&app_lock);
  atomic_store(&rd_stop, 1);
  pthread_join(r, NULL);
  /* after the hold the grace period ends: the deferred objects serve again */
  prd_rcu_wait_state(prd_rcu_get_state());
  void *p = prd_cache_alloc(cp, PRD_SLEEP);
  printf("oom fails=%d enomem=%d after=%d allocs_under_arena=%d\n", fails, enomem, p != NULL,
         allocs < 8192);
}

static void test_oom_fails_instead_of_waiting(void)
{
  char buf[4096];
  int st = prd_test_child(child_oom, NULL, buf, sizeof(buf));
  if (WIFSIGNALED(st))
    fprintf(stderr, "  child killed by signal %d (SIGALRM %d: it hung)\n", WTERMSIG(st), SIGALRM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(buf, "oom fails=3 enomem=3 after=1 allocs_under_arena=1");
}

int main(void)
{
  RUN(test_cache_alloc_under_reader_lock);
  RUN(test_malloc_under_reader_lock);
  RUN(test_oom_fails_instead_of_waiting);
  return prd_test_done();
}
