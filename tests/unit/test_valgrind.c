/* memcheck catches a use after free inside a cache (src/annotate.h): this program runs itself
 * under valgrind, once doing a use after free (valgrind must report an invalid write, inside
 * prd's own program, and exit with the error code), once writing an object after its deferred
 * free's grace period (the same report; a read during the grace period is none), and once
 * doing only correct uses of constructed, small, large and reused objects (valgrind must
 * report nothing).  Valgrind cannot run sanitizer builds.
 * prd-test-labels: valgrind no-asan no-tsan
 * prd-test-timeout: 300 */
#include <sys/stat.h>

#include "internal.h"
#include "prd_test.h"

#define VG "/usr/bin/valgrind"

static int ctor(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  memset(buf, 7, 100);
  return 0;
}

static int correct_uses(void)
{
  prd_cache_t *a = prd_cache_create("vg_small", 48, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *b = prd_cache_create("vg_ctor", 100, 0, ctor, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *c = prd_cache_create("vg_large", 5000, 0, NULL, NULL, NULL, NULL, NULL, 0);
  int sum = 0;
  for (int round = 0; round < 3; round++) {
    char *pa[50], *pb[50], *pc[5];
    for (int i = 0; i < 50; i++) {
      pa[i] = prd_cache_alloc(a, PRD_SLEEP);
      memset(pa[i], i, 48);
      pb[i] = prd_cache_alloc(b, PRD_SLEEP);
      sum += pb[i][99];   /* constructed state is defined */
    }
    for (int i = 0; i < 5; i++) {
      pc[i] = prd_cache_alloc(c, PRD_SLEEP);
      memset(pc[i], i, 5000);
    }
    for (int i = 0; i < 50; i++) {
      sum += pa[i][47];
      prd_cache_free(a, pa[i]);
      prd_cache_free(b, pb[i]);
    }
    for (int i = 0; i < 5; i++)
      prd_cache_free(c, pc[i]);
  }
  prd__cache_reap_all(a);
  prd_cache_destroy(a);
  prd_cache_destroy(b);
  prd_cache_destroy(c);
  printf("sum %d\n", sum);
  return 0;
}

/* noinline, so that memcheck's stack names the function in optimized builds too */
__attribute__((noinline)) static int use_after_free(void)
{
  prd_cache_t *c = prd_cache_create("vg_uaf", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  volatile int *p = prd_cache_alloc(c, PRD_SLEEP);
  p[0] = 1;
  prd_cache_free(c, (void *)p);
  p[3] = 2;   /* into a freed object of the cache */
  return 0;
}

/* A deferred free: reading the object while its grace period may still run is what an RCU
 * reader does (no report); writing it after the grace period has ended and the object is
 * merged back (prd__defer_oom: latent objects to their slabs, wait, merge) is a use after
 * free.  No maintenance thread, which could hold this thread's latent objects meanwhile. */
__attribute__((noinline)) static int use_after_deferred_free(void)
{
  prd_option_set("maint_thread", "0");
  prd_cache_t *c = prd_cache_create("vg_defer", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  volatile int *p = prd_cache_alloc(c, PRD_SLEEP);
  p[0] = 1;
  prd_rcu_read_lock();
  prd_cache_free_deferred(c, (void *)p);
  int seen = p[0];
  prd_rcu_read_unlock();
  (void)prd__defer_oom(c, PRD_SLEEP);
  p[3] = 2;   /* after the grace period */
  return seen == 1 ? 0 : 1;
}

#ifdef PRD_VALGRIND   /* the tests under valgrind: only where the client requests are built */
static char out[1 << 16];

static int run_under_valgrind(const char *mode)
{
  return prd_test_shell(out, sizeof(out), VG " -q --error-exitcode=99 --leak-check=no "
                        "/proc/%ld/exe %s", (long)getpid(), mode);
}

static void test_memcheck_catches_uaf(void)
{
  CHECK_EQ(run_under_valgrind("--uaf"), 99);
  CHECK_STR_CONTAINS(out, "Invalid write of size 4");
  CHECK_STR_CONTAINS(out, "use_after_free");
}

static void test_memcheck_catches_use_after_grace_period(void)
{
  CHECK_EQ(run_under_valgrind("--uaf-deferred"), 99);
  CHECK_STR_CONTAINS(out, "Invalid write of size 4");
  CHECK_STR_CONTAINS(out, "use_after_deferred_free");
  CHECK(strstr(out, "Invalid read") == NULL);   /* the read inside the grace period is fine */
}

static void test_memcheck_quiet_on_correct_use(void)
{
  CHECK_EQ(run_under_valgrind("--correct"), 0);
  CHECK_STR_CONTAINS(out, "sum ");
  CHECK(strstr(out, "Invalid") == NULL);
  CHECK(strstr(out, "uninitialised") == NULL);
}
#endif

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--uaf") == 0)
    return use_after_free();
  if (argc > 1 && strcmp(argv[1], "--correct") == 0)
    return correct_uses();
  if (argc > 1 && strcmp(argv[1], "--uaf-deferred") == 0)
    return use_after_deferred_free();
#ifndef PRD_VALGRIND
  printf("# built without PRD_VALGRIND (no valgrind/memcheck.h): nothing to test\n");
  return 0;
#else
  struct stat stv;
  if (stat(VG, &stv) != 0) {
    /* the build found memcheck.h, so valgrind is installed (make deps): its absence is a
     * broken installation, not a reason to pass */
    fprintf(stderr, "%s not found although valgrind/memcheck.h was\n", VG);
    return 1;
  }
  RUN(test_memcheck_catches_uaf);
  RUN(test_memcheck_catches_use_after_grace_period);
  RUN(test_memcheck_quiet_on_correct_use);
  return prd_test_done();
#endif
}
