/*
 * stress_malloc_fork.c: the process forks 1,000 times (or for 90 s once 100 are done) while
 * other threads allocate and free; each child allocates from every tier, checks what it got,
 * frees it and exits 0.  A child that found a lock held by a thread that does not exist in it
 * would hang (ctest's timeout) and one that found a structure half-changed would crash or
 * fail its checks.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "internal.h"
#define PRD_TEST_FORKS_WITH_MANY_LOCKS   /* see prd_test.h: TSan holds at most 64 */
#include "prd_test.h"

// prd-test-labels: stress
// prd-test-timeout: 300

#if defined(PRD_TSAN) || defined(PRD_ASAN)
#define FORKS 100
#else
#define FORKS 1000
#endif
#define THREADS 3
#define RUN_NS (90 * 1000000000ull)

static _Atomic int stop;

static void *churn(void *arg)
{
  prd_rng_t r = { 0x1234567ull + (uint64_t)(uintptr_t)arg };
  void *keep[32] = { 0 };
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    unsigned k = (unsigned)prd_rng_below(&r, 32);
    prd_free(keep[k]);
    uint64_t c = prd_rng_below(&r, 50);
    keep[k] = prd_malloc(c == 0 ? 100000 : 8 + prd_rng_below(&r, 4000));
  }
  for (int k = 0; k < 32; k++)
    prd_free(keep[k]);
  return NULL;
}

static int child(void)
{
  static const size_t sizes[] = { 1, 24, 200, 3000, 16384, 50000, 5 << 20 };
  for (size_t i = 0; i < PRD_ARRAY_SIZE(sizes); i++) {
    unsigned char *p = prd_malloc(sizes[i]);
    if (p == NULL)
      return 2;
    /* a big block: one byte in every 64 KiB and its last (a whole memset of 5 MiB was a
     * child's time: 1,280 page faults, 200-300 ms on a loaded 2-core machine) */
    size_t step = sizes[i] > (64u << 10) ? 64u << 10 : 1;
    for (size_t b = 0; b < sizes[i]; b += step)
      p[b] = (unsigned char)i;
    p[sizes[i] - 1] = (unsigned char)i;
    for (size_t b = 0; b < sizes[i]; b += step)
      if (p[b] != (unsigned char)i)
        return 3;
    prd_free(p);
  }
  return 0;
}

static void test_fork(void)
{
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++)
    CHECK_EQ(pthread_create(&t[i], NULL, churn, (void *)i), 0);
  int failed = 0;
  uint64_t t0 = prd__now_ns();
  /* FORKS, or 90 s once 100 are done: a loaded machine makes each fork slow (the
   * churning threads' pages copied on write), not wrong */
  for (int i = 0; i < FORKS && (i < 100 || prd__now_ns() - t0 < RUN_NS); i++) {
    pid_t pid = fork();
    if (pid == 0)
      _exit(child());
    CHECK(pid > 0);
    if (pid < 0)
      break;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
      ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      failed++;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  CHECK_EQ(failed, 0);
}

int main(void)
{
  RUN(test_fork);
  return prd_test_done();
}
