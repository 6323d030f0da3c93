/* Object annotations for memcheck and ASan (src/annotate.h): an object freed into a cache is
 * poisoned (ASan) except the slab layer's freelist word, and usable again when handed out; a
 * use after free inside a cache is reported by ASan (a child process); a deferred object is
 * poisoned only after its grace period; caches that must not be annotated (NOTOUCH, buffer debugging) are left alone.  In builds without ASan the same
 * sequences run and must keep the objects' contents (constructed state) intact. */
#include "internal.h"
#include "prd_test.h"

#ifdef PRD_ASAN
#include <sanitizer/asan_interface.h>
#define POISONED(p) (__asan_address_is_poisoned(p) != 0)
#endif

static int ctor_runs;

static int ctor_fill(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  memset(buf, 0x5a, 40);
  ctor_runs++;
  return 0;
}

/* Small layout, no constructor: the freelist word is the buffer's last word. */
static void test_small_layout(void)
{
  prd_cache_t *c = prd_cache_create("annot_small", 48, 0, NULL, NULL, NULL, NULL, NULL, 0);
  char *p = prd_cache_alloc(c, PRD_SLEEP);
  CHECK(p != NULL);
  memset(p, 1, 48);
#ifdef PRD_ASAN
  CHECK(!POISONED(p) && !POISONED(p + 47));
#endif
  prd_cache_free(c, p);
#ifdef PRD_ASAN
  CHECK(POISONED(p));
  CHECK(POISONED(p + 39));
  CHECK(!POISONED(p + 40));   /* the freelist word (chunk - 8) stays for the slab layer */
#endif
  char *q = prd_cache_alloc(c, PRD_SLEEP);
  CHECK(q == p);   /* LIFO: the same buffer comes back, usable */
#ifdef PRD_ASAN
  CHECK(!POISONED(q) && !POISONED(q + 47));
#endif
  memset(q, 2, 48);
  prd_cache_free(c, q);
  prd_cache_destroy(c);
}

/* Odd size: the padding after the object stays poisoned while it is allocated, so an
 * overrun into it is reported (large layout: no freelist word in the chunk; in the small
 * layout the word may overlap the padding and must stay addressable for the slab layer). */
static void test_padding(void)
{
  prd_cache_t *c = prd_cache_create("annot_odd", 3001, 0, NULL, NULL, NULL, NULL, NULL, 0);
  char *p = prd_cache_alloc(c, PRD_SLEEP);
  memset(p, 3, 3001);
  prd_cache_free(c, p);
  char *q = prd_cache_alloc(c, PRD_SLEEP);
  CHECK(q == p);
#ifdef PRD_ASAN
  CHECK(!POISONED(q + 3000));
  CHECK(POISONED(q + 3001));
#endif
  prd_cache_free(c, q);
  prd_cache_destroy(c);
}

/* Constructed state survives a free and a reallocation (nothing is cleared), and the
 * constructor runs once per object however often it is reused. */
static void test_ctor_state_kept(void)
{
  ctor_runs = 0;
  prd_cache_t *c = prd_cache_create("annot_ctor", 40, 0, ctor_fill, NULL, NULL, NULL, NULL, 0);
  unsigned char *p = prd_cache_alloc(c, PRD_SLEEP);
  CHECK(p != NULL && p[0] == 0x5a && p[39] == 0x5a);
  prd_cache_free(c, p);
#ifdef PRD_ASAN
  CHECK(POISONED(p));
#endif
  unsigned char *q = prd_cache_alloc(c, PRD_SLEEP);
  CHECK(q == p);
  CHECK(q[0] == 0x5a && q[39] == 0x5a);
  CHECK_EQ(ctor_runs, 1);
  prd_cache_free(c, q);
  prd_cache_destroy(c);
}

/* Large layout (external bufctls): no freelist word in the buffer, all of it poisoned. */
static void test_large_layout(void)
{
  prd_cache_t *c = prd_cache_create("annot_large", 3000, 0, NULL, NULL, NULL, NULL, NULL, 0);
  char *p = prd_cache_alloc(c, PRD_SLEEP);
  memset(p, 4, 3000);
  prd_cache_free(c, p);
#ifdef PRD_ASAN
  CHECK(POISONED(p) && POISONED(p + 2999));
#endif
  char *q = prd_cache_alloc(c, PRD_SLEEP);
  CHECK(q == p);
#ifdef PRD_ASAN
  CHECK(!POISONED(q) && !POISONED(q + 2999));
#endif
  memset(q, 5, 3000);
  prd_cache_free(c, q);
  prd_cache_destroy(c);
}

/* A destroyed cache's slabs go back to the heap arena as ordinary memory: the next cache
 * built on them works (ASan would report its slab layer's writes otherwise). */
static void test_slab_reuse(void)
{
  for (int round = 0; round < 3; round++) {
    prd_cache_t *c = prd_cache_create("annot_reuse", 64 + 32 * (size_t)round, 0, NULL, NULL,
                                      NULL, NULL, NULL, 0);
    void *bufs[200];
    for (int i = 0; i < 200; i++)
      bufs[i] = prd_cache_alloc(c, PRD_SLEEP);
    for (int i = 0; i < 200; i++)
      prd_cache_free(c, bufs[i]);
    prd__cache_reap_all(c);
    CHECK_EQ(prd__cache_check(c), 0);
    prd_cache_destroy(c);
  }
}

/* Debugging caches and NOTOUCH caches are not annotated (annotate.h section 3). */
static void test_not_annotated(void)
{
  prd_cache_t *d = prd_cache_create("annot_dbg", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                    PRD_CACHE_PATTERNS);
  char *p = prd_cache_alloc(d, PRD_SLEEP);
  prd_cache_free(d, p);
#ifdef PRD_ASAN
  CHECK(!POISONED(p));   /* the pattern check watches it instead */
#endif
  prd_cache_destroy(d);
  prd_vmem_t *ids = prd_vmem_create("annot_ids", (void *)0x1000, 1 << 16, 1, NULL, NULL, NULL,
                                    0, PRD_VM_SLEEP);
  prd_cache_t *n = prd_cache_create("annot_notouch", 8, 1, NULL, NULL, NULL, NULL, ids,
                                    PRD_CACHE_NOTOUCH);
  void *id = prd_cache_alloc(n, PRD_SLEEP);
  CHECK(id != NULL);
  prd_cache_free(n, id);
  prd_cache_destroy(n);
  prd_vmem_destroy(ids);
}

/* A deferred object stays addressable while its grace period runs (readers may still read
 * it; the deferral writes nothing into it) and is poisoned once the grace period has ended
 * and it is merged back: here through the OOM path, prd__defer_oom, which moves every latent
 * object to its latent slab, waits for the grace period and merges (its try-lock can lose to
 * the maintenance thread, hence the retries). */
static void test_deferred_after_grace_period(void)
{
  prd_cache_t *c = prd_cache_create("annot_defer", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  char *p[8];
  for (int i = 0; i < 8; i++) {
    p[i] = prd_cache_alloc(c, PRD_SLEEP);
    memset(p[i], i + 1, 64);
  }
  prd_rcu_read_lock();   /* no grace period can end while this section runs */
  for (int i = 0; i < 8; i++)
    prd_cache_free_deferred(c, p[i]);
  for (int i = 0; i < 8; i++) {
#ifdef PRD_ASAN
    CHECK(!POISONED(p[i]) && !POISONED(p[i] + 63));
#endif
    CHECK(p[i][0] == i + 1 && p[i][63] == i + 1);   /* what a reader would still see */
  }
  prd_rcu_read_unlock();
  int merged = 0;
  for (int tries = 0; tries < 100 && merged < 8; tries++) {
    (void)prd__defer_oom(c, PRD_SLEEP);
    merged = 8;
#ifdef PRD_ASAN
    merged = 0;
    for (int i = 0; i < 8; i++)
      merged += POISONED(p[i]);
#endif
  }
  CHECK_EQ(merged, 8);
  prd_cache_destroy(c);
}

#ifdef PRD_ASAN
static void uaf_child(void *arg)
{
  (void)arg;
  prd_cache_t *c = prd_cache_create("annot_uaf", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  volatile char *p = prd_cache_alloc(c, PRD_SLEEP);
  p[0] = 1;
  prd_cache_free(c, (void *)p);
  p[8] = 2;   /* use after free: ASan reports it and the child dies */
  printf("not reported\n");
}

static void test_asan_reports_uaf(void)
{
  static char out[65536];
  int st = prd_test_child(uaf_child, NULL, out, sizeof(out));
  CHECK(!(WIFEXITED(st) && WEXITSTATUS(st) == 0));
  CHECK_STR_CONTAINS(out, "use-after-poison");
  CHECK_STR_CONTAINS(out, "uaf_child");
  CHECK(strstr(out, "not reported") == NULL);
}
#endif

int main(void)
{
  RUN(test_small_layout);
  RUN(test_padding);
  RUN(test_ctor_state_kept);
  RUN(test_large_layout);
  RUN(test_slab_reuse);
  RUN(test_not_annotated);
  RUN(test_deferred_after_grace_period);
#ifdef PRD_ASAN
  RUN(test_asan_reports_uaf);
#endif
  return prd_test_done();
}
