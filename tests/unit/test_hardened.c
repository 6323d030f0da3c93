/*
 * test_hardened.c: option hardened (src/slab.c section 4b, src/malloc.c section 1c).  A
 * small-layout cache stores its freelist words encoded and validates each one it follows: a
 * word overwritten after its buffer was freed is reported at the allocation that reaches it,
 * naming the cache, the slab and the buffer, and no allocation returns the pointer written
 * there; the lists otherwise work as before (allocation order, double-free detection, the
 * malloc classes).  Big malloc blocks get the guard page and checked tail of
 * PRUDENCE_DEBUG=redzone.  The program re-executes itself with PRUDENCE_OPTIONS=hardened=1
 * (malloc reads it at start-up).
 */
#include <errno.h>
#include <signal.h>

#include "internal.h"
#include "prd_test.h"

#define WILD ((uintptr_t)0x4141414141414140ull)

static prd_cache_t *small_cache(const char *name, size_t size)
{
  prd_cache_t *cp = prd_cache_create(name, size, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NOMAGAZINE);
  CHECK(cp != NULL);
  CHECK(cp != NULL && !(cp->cache_flags & PRD_CF_HASH) && (cp->cache_flags & PRD_CF_HARDENED));
  return cp;
}

/* ---- a freelist word written after free ------------------------------------------------ */
static void corrupt_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = small_cache("hard-64", 64);
  char *a = prd_cache_alloc(cp, 0), *b = prd_cache_alloc(cp, 0), *c = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, b);
  prd_cache_free(cp, a);   /* the freelist: a, then b */
  uintptr_t wild = WILD;
  memcpy(a + 64 - sizeof(wild), &wild, sizeof(wild));   /* a's last word: its freelist word */
  printf("buffer %p\n", (void *)a);
  fflush(stdout);
  uint64_t before = prd__error_count();
  char *x = prd_cache_alloc(cp, 0);   /* a itself: sound, and the word is found bad */
  if (x != a || prd__error_count() != before + 1)
    _exit(3);
  /* what follows is never the pointer written there: 200 more, all distinct buffers of the
   * cache, each written and freed again without a fault */
  char *got[200];
  for (int i = 0; i < 200; i++) {
    got[i] = prd_cache_alloc(cp, 0);
    if (got[i] == NULL || got[i] == (char *)(WILD - 56) || got[i] == a || got[i] == c)
      _exit(4);
    memset(got[i], 0x5a, 64);
  }
  for (int i = 0; i < 200; i++)
    prd_cache_free(cp, got[i]);
  prd_cache_free(cp, x);
  prd_cache_free(cp, c);
  _exit(prd__error_count() == before + 1 ? 0 : 5);
}

static void test_corrupt_word(void)
{
  static char out[8192];
  int st = prd_test_child(corrupt_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  void *a = NULL;
  const char *p = strstr(out, "buffer 0x");
  CHECK(p != NULL && sscanf(p, "buffer %p", &a) == 1);
  char want[128];
  snprintf(want, sizeof(want), "cache hard-64: corrupt freelist word in free buffer %p of slab", a);
  CHECK_STR_CONTAINS(out, want);
}

/* The same through malloc: a class block's last word written after free (magazines off for
 * the class, so the free reaches its slab at once). */
static void malloc_corrupt_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = prd__malloc_class_cache(96);
  if (cp == NULL || !(cp->cache_flags & PRD_CF_HARDENED))
    _exit(2);
  char *a = prd_malloc(96), *b = prd_malloc(96);
  prd_thread_flush();   /* gives back the thread's slab (slab.c section 10): the plain
                         * allocations below take from it */
  void *bufs[2] = { b, a };
  prd__slab_free_bulk(cp, bufs, 2);   /* straight to the slab: a, then b, on its freelist */
  uintptr_t wild = WILD;
  memcpy(a + 96 - sizeof(wild), &wild, sizeof(wild));
  uint64_t before = prd__error_count();
  void *x = prd__slab_alloc(cp, 0), *y = prd__slab_alloc(cp, 0);
  _exit(x == a && y != NULL && y != (void *)(WILD - 88) && prd__error_count() == before + 1
            ? 0 : 3);
}

static void test_malloc_class(void)
{
  static char out[8192];
  int st = prd_test_child(malloc_corrupt_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache malloc-96: corrupt freelist word in free buffer");
}

/* ---- the encoded lists still work ------------------------------------------------------ */
static void test_lists(void)
{
  prd_cache_t *cp = small_cache("hard-24", 24);
  enum { N = 1000 };
  static char *v[N];
  for (int i = 0; i < N; i++) {
    v[i] = prd_cache_alloc(cp, 0);
    CHECK(v[i] != NULL);
  }
  /* the stored word is not the plain next pointer */
  prd_cache_free(cp, v[1]);
  prd_cache_free(cp, v[0]);
  uintptr_t w;
  memcpy(&w, v[0] + cp->cache_link_off, sizeof(w));
  CHECK(w != (uintptr_t)(v[1] + cp->cache_link_off));
  CHECK(prd_cache_alloc(cp, 0) == v[0]);   /* LIFO, decoded */
  CHECK(prd_cache_alloc(cp, 0) == v[1]);
  for (int i = 0; i < N; i += 2)
    prd_cache_free(cp, v[i]);
  for (int i = 0; i < N; i += 2) {
    v[i] = prd_cache_alloc(cp, 0);
    CHECK(v[i] != NULL);
  }
  for (int i = 0; i < N; i++)
    prd_cache_free(cp, v[i]);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
}

static void double_free_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = small_cache("hard-40", 40);
  char *a = prd_cache_alloc(cp, 0), *b = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, a);
  prd_cache_free(cp, b);
  uint64_t before = prd__error_count();
  prd_cache_free(cp, a);   /* on the freelist, below the head: found by the decoded walk */
  _exit(prd__error_count() == before + 1 ? 0 : 3);
}

static void test_double_free(void)
{
  static char out[8192];
  int st = prd_test_child(double_free_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache hard-40: double free of buffer");
}

static void test_malloc_roundtrip(void)
{
  enum { N = 4000 };
  static void *v[N];
  for (int r = 0; r < 3; r++) {
    for (int i = 0; i < N; i++) {
      v[i] = prd_malloc((size_t)(i % 700) + 1);
      CHECK(v[i] != NULL);
      memset(v[i], 0x33, (size_t)(i % 700) + 1);
    }
    for (int i = 0; i < N; i++)
      prd_free(v[i]);
  }
  prd_reap();
}

/* ---- big blocks: the guard page --------------------------------------------------------- */
static void big_child(void *arg)
{
  size_t size = *(size_t *)arg;
  char *p = prd_malloc(size);
  if (p == NULL || prd_malloc_usable_size(p) != size)
    _exit(2);
  for (size_t k = size; k < size + 2 * prd__os_page_size() + 16; k++)
    ((volatile char *)p)[k] = 1;
  _exit(4);
}

static void test_big_guard(void)
{
  size_t sizes[] = { 20000, 5u << 20 };
  for (int i = 0; i < 2; i++) {
    static char out[4096];
    int st = prd_test_child(big_child, &sizes[i], out, sizeof(out));
    CHECK(prd_test_segv(st, out));
  }
}

/* ---- big blocks at the kernel's limit on mappings ------------------------------------------ */
/* A guard page is a mapping of its own; at the limit (vm.max_map_count) mprotect fails.  The
 * allocation then fails with a report and ENOMEM, as docs/options.md says, and the process
 * goes on (it is not a corruption: abort_on_error does not apply); it ended the process. */
static void guard_limit_child(void *arg)
{
  (void)arg;
  if (!prd_test_use_up_mappings())
    _exit(3);
  int failed = 0, other = 0;
  for (int k = 0; k < 16; k++) {
    errno = 0;
    char *b = prd_malloc(20000);
    if (b == NULL && errno == ENOMEM)
      failed++;
    else if (b == NULL)
      other++;
    else
      b[0] = 1;   /* a block handed out is usable */
  }
  printf("failed %d other %d\n", failed, other);
  fflush(stdout);
  _exit(failed > 0 && other == 0 ? 0 : 5);
}

static void test_big_guard_map_limit(void)
{
#if defined(PRD_ASAN) || defined(PRD_TSAN)
  return;   /* the sanitizers' runtimes map memory of their own at any time */
#endif
  static char out[8192];
  int st = prd_test_child(guard_limit_child, NULL, out, sizeof(out));
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
    fprintf(stderr, "%s", out);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "no guard page for a block of 20000 bytes");
}

int main(int argc, char **argv)
{
  (void)argc;
  if (getenv("PRUDENCE_OPTIONS") == NULL) {
    setenv("PRUDENCE_OPTIONS", "hardened=1", 1);
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  RUN(test_corrupt_word);
  RUN(test_malloc_class);
  RUN(test_lists);
  RUN(test_double_free);
  RUN(test_malloc_roundtrip);
  RUN(test_big_guard);
  RUN(test_big_guard_map_limit);
  return prd_test_done();
}
