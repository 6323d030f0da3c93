/*
 * test_malloc_startup.c: malloc's start-up (src/malloc.c section 5) is retried, never
 * remembered as failed.  The defect this guards: one failed OS mapping during start-up used
 * to disable the malloc family for the life of the process, so every later call failed with
 * ENOMEM even after memory came back (a program under LD_PRELOAD exited "memory exhausted").
 * The page map's leaves, the heap arena and the magazine layer's own start-up (its id table,
 * its magazine caches) are on the same path and must be retried too; so must a class slab
 * whose page-map leaf could not be mapped (its buffers used to be refused for good).
 *
 * Each case runs in a child forked before anything in this process has used the allocator,
 * so each starts cold: the child makes every Nth mapping fail (the fault option, src/os.c
 * section 4) and calls prd_malloc until one succeeds.  A failed call must return NULL with
 * errno ENOMEM, and the next calls must go on trying: with N >= 2 every attempt keeps what the
 * earlier ones made, so one soon succeeds.  Then faults stop and the whole family works.  N
 * runs from 1 (every mapping fails: start-up cannot succeed until faults stop) to past the
 * number of mappings a start-up makes, so every start-up mapping is the failing one once.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "prd_test.h"

#define ATTEMPTS 64 /* calls made while faults are on: far more than a start-up's mappings */
#define NMAX 24     /* the largest N tried: a start-up makes fewer mappings than this */

static void child_startup(void *arg)
{
  long n = (long)(intptr_t)arg;
  prd__os_fault_every(n);
  int failed = 0, bad_errno = 0;
  void *p = NULL;
  for (int i = 0; i < ATTEMPTS && p == NULL; i++) {
    errno = 0;
    p = prd_malloc(100);
    if (p == NULL) {
      failed++;
      if (errno != ENOMEM)
        bad_errno++;
    }
  }
  bool under_faults = p != NULL;
  if (p != NULL)
    memset(p, 0x5a, 100);
  prd_free(p);
  prd__os_fault_every(0); /* memory comes back */
  /* the whole family now works: every class, a big block, calloc, realloc, aligned; and a
   * class cache made by an attempt that failed later still has magazines (a cache made
   * while the magazine layer's id table could not grow must not run without them for good) */
  bool ok = true;
  for (size_t size = 1; size <= ((size_t)1 << 20) && ok; size = size * 3 + 1) {
    unsigned char *q = prd_malloc(size);
    ok = q != NULL;
    if (ok) {
      prd_cache_t *cp = prd__malloc_pm_cache(q);
      if (cp != NULL && cp->cache_magid == 0) {
        printf("size %zu: class cache %s without magazines\n", size, cp->cache_name);
        ok = false;
      }
      memset(q, 0xa5, size);
      prd_free(q);
    }
  }
  unsigned char *c = prd_calloc(10, 100);
  ok = ok && c != NULL && c[999] == 0;
  unsigned char *r = prd_realloc(c, 100000);
  ok = ok && r != NULL;
  prd_free(r != NULL ? r : c);
  void *a = NULL;
  ok = ok && prd_posix_memalign(&a, 4096, 5000) == 0 && a != NULL;
  prd_free(a);
  printf("n=%ld failed=%d bad_errno=%d under_faults=%d after=%d\n", n, failed, bad_errno,
         under_faults, ok);
}

static void test_startup_retried(void)
{
  int first_failed = 0;
  for (long n = 1; n <= NMAX; n++) {
    char buf[4096];
    int st = prd_test_child(child_startup, (void *)(intptr_t)n, buf, sizeof(buf));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    long cn = 0;
    int failed = -1, bad_errno = -1, under = -1, after = -1;
    const char *line = strstr(buf, "n=");
    if (line == NULL ||
        sscanf(line, "n=%ld failed=%d bad_errno=%d under_faults=%d after=%d", &cn, &failed,
               &bad_errno, &under, &after) != 5) {
      fprintf(stderr, "  child for n=%ld said: %s\n", n, buf);
      CHECK(!"child output");
      continue;
    }
    printf("# every %ld-th mapping fails: %d calls failed before one succeeded%s\n", n, failed,
           under ? "" : " (none succeeded while faults were on)");
    CHECK_EQ(cn, n);
    CHECK_EQ(bad_errno, 0); /* a failed call says ENOMEM */
    CHECK_EQ(after, 1);     /* memory back: everything works */
    if (n >= 2)
      CHECK_EQ(under, 1);   /* retried until it succeeded, despite the faults */
    else
      CHECK_EQ(under, 0);   /* every mapping failing: nothing could succeed */
    if (failed > 0)
      first_failed++;
  }
  /* the cases proved something: start-up did fail at first beyond N = 1 (every mapping
   * refused), so a later call retried it.  Not for every N: a class's first malloc that
   * cannot make its cache reclaims and tries once more within the call (malloc.c
   * class_alloc), which a single refused mapping does not outlast */
  CHECK(first_failed >= 2);
}

int main(void)
{
  RUN(test_startup_retried);
  return prd_test_done();
}
