/*
 * test_ownership.c: prd_cache_free and prd_cache_free_deferred check in every build, with
 * magazines on, that the buffer is one of the cache's (src/cache.c section 2, src/pagemap.c):
 * another cache's buffer, a malloc'd block, a static, a stack or a foreign mapping's address,
 * an interior pointer of the small and of the large layout are reported, naming the cache,
 * and nothing else changes (the allocations after the bad free never hand it out, the cache's
 * invariants hold, nothing is counted).  The defect this guards: the hit path pushed any
 * pointer into the thread's magazine and the next allocation handed it out; a deferral of a
 * foreign buffer read the small layout's slab record past it (ASan: heap-buffer-overflow; this
 * test runs in the ASan flavour too).  Also: cache ids run out with a clear error and are
 * reused after a destroy (src/pagemap.c section 3).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "prd_test.h"

#define PROBE 600   /* allocations after a bad free: more than a slab and the magazines hold */

static char static_buf[4096] __attribute__((aligned(64)));

/* Allocates PROBE buffers from cp and says whether bad is among them (then frees them). */
static bool handed_out(prd_cache_t *cp, const void *bad)
{
  static void *got[PROBE];
  bool seen = false;
  for (int i = 0; i < PROBE; i++) {
    got[i] = prd_cache_alloc(cp, PRD_SLEEP);
    if (got[i] == bad)
      seen = true;
  }
  for (int i = 0; i < PROBE; i++)
    prd_cache_free(cp, got[i]);
  return seen;
}

/* One bad free (or deferral) of `bad` to cp: reported once, nothing handed out, invariants
 * and the buffer count unchanged.  Prints what it saw for the parent's checks. */
static void bad_free(prd_cache_t *cp, void *bad, bool deferred, const char *label)
{
  prd_cache_stats_t before = PRD_CACHE_STATS_INIT, after = PRD_CACHE_STATS_INIT;
  prd_cache_stats(cp, &before);
  uint64_t e0 = prd__error_count();
  if (deferred)
    prd_cache_free_deferred(cp, bad);
  else
    prd_cache_free(cp, bad);
  uint64_t reports = prd__error_count() - e0;
  prd_cache_stats(cp, &after);
  prd_synchronize_rcu();
  prd_rcu_barrier();
  bool seen = handed_out(cp, bad);
  printf("%s: reports %llu handed_out %d inuse %lld checks %d\n", label,
         (unsigned long long)reports, seen,
         (long long)after.bufs_inuse - (long long)before.bufs_inuse, prd__cache_check(cp));
  fflush(stdout);
}

static void expect_clean(const char *out, const char *label)
{
  char line[256];
  snprintf(line, sizeof(line), "%s: reports 1 handed_out 0 inuse 0 checks 0", label);
  CHECK_STR_CONTAINS(out, line);
}

/* ---- another cache's buffer, malloc'd, static, stack, foreign ------------------------------ */
static void wrong_owner_child(void *arg)
{
  bool deferred = arg != NULL;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *a = prd_cache_create("own-a", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *b = prd_cache_create("own-b", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *big = prd_cache_create("own-big", 1024, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *nomag = prd_cache_create("own-nomag", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                        PRD_CACHE_NOMAGAZINE);   /* straight to the slabs */
  void *pb = prd_cache_alloc(b, PRD_SLEEP);
  void *pbig = prd_cache_alloc(big, PRD_SLEEP);
  void *pa = prd_cache_alloc(a, PRD_SLEEP);
  void *m64 = prd_malloc(64);
  void *m64k = prd_malloc(65536);
  void *libc = malloc(64);
  _Alignas(64) char stack_buf[256];
  memset(stack_buf, 0, sizeof(stack_buf));
  char *map = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pb == NULL || pbig == NULL || pa == NULL || m64 == NULL || m64k == NULL || libc == NULL ||
      map == MAP_FAILED)
    exit(2);
  bad_free(a, pb, deferred, "other-small");
  bad_free(a, pbig, deferred, "other-large");
  bad_free(big, pa, deferred, "large-gets-small");
  bad_free(a, m64, deferred, "malloc-class");
  bad_free(a, m64k, deferred, "malloc-big");
  bad_free(a, libc, deferred, "libc-malloc");
  bad_free(a, static_buf + 64, deferred, "static");
  bad_free(big, static_buf, deferred, "static-large");
  bad_free(a, stack_buf + 64, deferred, "stack");
  bad_free(a, map + 4096, deferred, "foreign");
  bad_free(nomag, libc, deferred, "nomag-libc");
  /* malloc's free of a cache's buffer names that cache, and leaves the buffer alone */
  if (!deferred)
    prd_free(pa);
  /* the buffers themselves were not disturbed: each goes back to its own cache */
  prd_cache_free(b, pb);
  prd_cache_free(big, pbig);
  prd_cache_free(a, pa);
  prd_free(m64);
  prd_free(m64k);
  free(libc);
  printf("errors %llu\n", (unsigned long long)prd__error_count());
  prd_cache_destroy(a);
  prd_cache_destroy(b);
  prd_cache_destroy(big);
  prd_cache_destroy(nomag);
}

static void check_wrong_owner(bool deferred)
{
  static char out[1 << 16];
  int st = prd_test_child(wrong_owner_child, deferred ? (void *)1 : NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  const char *verb = deferred ? "deferred free" : "free";
  char want[128];
  snprintf(want, sizeof(want), "cache own-a: %s of buffer", verb);
  CHECK_STR_CONTAINS(out, want);
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (it belongs to cache own-b;");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (it belongs to cache own-big;");
  snprintf(want, sizeof(want), "cache own-big: %s of buffer", verb);
  CHECK_STR_CONTAINS(out, want);
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (it belongs to cache own-a;");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (it belongs to cache malloc-64;");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (it belongs to no cache;");
  snprintf(want, sizeof(want), "cache own-nomag: %s of buffer", verb);
  CHECK_STR_CONTAINS(out, want);
  const char *labels[] = { "other-small", "other-large", "large-gets-small", "malloc-class",
                           "malloc-big", "libc-malloc", "static", "static-large", "stack",
                           "foreign", "nomag-libc" };
  for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++)
    expect_clean(out, labels[i]);
  if (!deferred)
    CHECK_STR_CONTAINS(out, "): in a slab of cache own-a, not a malloc block (not touched)");
  CHECK_STR_CONTAINS(out, deferred ? "errors 11\n" : "errors 12\n");
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

static void test_wrong_owner(void)
{
  check_wrong_owner(false);
}

static void test_wrong_owner_deferred(void)
{
  check_wrong_owner(true);
}

/* ---- interior pointers, small and large layouts --------------------------------------------- */
static void interior_child(void *arg)
{
  bool deferred = arg != NULL;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *small = prd_cache_create("own-small", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *large = prd_cache_create("own-large", 1024, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *odd = prd_cache_create("own-odd", 200, 8, NULL, NULL, NULL, NULL, NULL, 0);
  char *ps = prd_cache_alloc(small, PRD_SLEEP);
  char *pl = prd_cache_alloc(large, PRD_SLEEP);
  char *po = prd_cache_alloc(odd, PRD_SLEEP);
  if (ps == NULL || pl == NULL || po == NULL)
    exit(2);
  bad_free(small, ps + 8, deferred, "small+8");
  bad_free(small, ps + 63, deferred, "small+63");
  bad_free(small, ps + 1, deferred, "small+1");
  bad_free(large, pl + 16, deferred, "large+16");
  bad_free(large, pl + 1023, deferred, "large+1023");
  bad_free(odd, po + 100, deferred, "odd+100");
  /* the buffers themselves are still theirs, and free as usual */
  uint64_t e0 = prd__error_count();
  prd_cache_free(small, ps);
  prd_cache_free(large, pl);
  prd_cache_free(odd, po);
  printf("good frees reported %llu\n", (unsigned long long)(prd__error_count() - e0));
  prd_cache_destroy(small);
  prd_cache_destroy(large);
  prd_cache_destroy(odd);
}

static void check_interior(bool deferred)
{
  static char out[1 << 16];
  int st = prd_test_child(interior_child, deferred ? (void *)1 : NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache own-small: ");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (interior, 8 bytes into a buffer;");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (interior, 63 bytes into a buffer;");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (interior, 1 byte into a buffer;");
  CHECK_STR_CONTAINS(out, "cache own-large: ");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (interior, 16 bytes into a buffer;");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (interior, 1023 bytes into a buffer;");
  CHECK_STR_CONTAINS(out, "cache own-odd: ");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (interior, 100 bytes into a buffer;");
  const char *labels[] = { "small+8", "small+63", "large+16", "large+1023", "odd+100" };
  for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++)
    expect_clean(out, labels[i]);
  CHECK_STR_CONTAINS(out, "good frees reported 0");
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

static void test_interior(void)
{
  check_interior(false);
}

static void test_interior_deferred(void)
{
  check_interior(true);
}

/* ---- abort_on_error=1 (the default) ends the process ------------------------------------------ */
static void aborts_child(void *arg)
{
  (void)arg;
  prd_cache_t *a = prd_cache_create("own-abort", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_free(a, static_buf);
  printf("went on\n");
}

static void test_aborts(void)
{
  char out[4096];
  int st = prd_test_child(aborts_child, NULL, out, sizeof(out));
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK_STR_CONTAINS(out, "cache own-abort: free of buffer");
  CHECK(strstr(out, "went on") == NULL);
}

/* ---- cache ids run out, and are reused ------------------------------------------------------ */
static void ids_child(void *arg)
{
  (void)arg;
  /* the first cache with magazines makes the magazine layer's own caches, with ids above
   * its own; the second takes the highest id in use */
  prd_cache_t *first = prd_cache_create("own-id", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *second = prd_cache_create("own-id", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  if (first == NULL || second == NULL)
    exit(2);
  uint32_t id = (second->cache_pm_tag >> 16) & 0xffffu;
  prd__pm_id_set_limit(id + 3);   /* three more ids, at most */
  prd_cache_t *made[8];
  int n = 0;
  errno = 0;
  while (n < 8 && (made[n] = prd_cache_create("own-id", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                              0)) != NULL)
    n++;
  printf("made %d errno %s\n", n, errno == ENOSPC ? "ENOSPC" : "other");
  /* integer caches take no id: they are not in the page map */
  prd_vmem_t *ids = prd_vmem_create("own-ints", (void *)4096, 1 << 20, 16, NULL, NULL, NULL,
                                    0, PRD_VM_SLEEP);
  prd_cache_t *ints = prd_cache_create("own-ints", 16, 0, NULL, NULL, NULL, NULL, ids,
                                       PRD_CACHE_NOTOUCH);
  void *i1 = ints != NULL ? prd_cache_alloc(ints, PRD_SLEEP) : NULL;
  printf("notouch %s\n", i1 != NULL ? "ok" : "failed");
  prd_cache_free(ints, i1);
  /* a destroyed cache's id is free for the next */
  if (n == 0)
    exit(3);
  prd_cache_destroy(made[n - 1]);
  prd_cache_t *again = prd_cache_create("own-id-again", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  void *p = again != NULL ? prd_cache_alloc(again, PRD_SLEEP) : NULL;
  printf("again %s\n", p != NULL ? "ok" : "failed");
  prd_cache_free(again, p);
  printf("errors %llu\n", (unsigned long long)prd__error_count());
}

static void test_ids(void)
{
  char out[8192];
  int st = prd_test_child(ids_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "made 3 errno ENOSPC");
  CHECK_STR_CONTAINS(out, "prd_cache_create(own-id, size 64, align 0): no cache id left (");
  CHECK_STR_CONTAINS(out, "notouch ok");
  CHECK_STR_CONTAINS(out, "again ok");
  CHECK_STR_CONTAINS(out, "errors 1\n");   /* the report of the creation that failed */
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

int main(void)
{
  RUN(test_wrong_owner);
  RUN(test_wrong_owner_deferred);
  RUN(test_interior);
  RUN(test_interior_deferred);
  RUN(test_aborts);
  RUN(test_ids);
  return prd_test_done();
}
