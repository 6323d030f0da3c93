/*
 * test_malloc_model.c: a randomized model test of the malloc family.  A model keeps every
 * live block's size, alignment and fill; after every step the test checks the invariants:
 * the block touched holds what the model says, it overlaps no other live block, its usable
 * size covers the request, its alignment is what was asked, the page map names it, and one
 * other live block (chosen at random) is intact.  Every 500 steps the slab layer's own
 * invariants are checked for every class cache (prd__cache_check).
 */
#include "internal.h"
#include "prd_test.h"

// prd-test-timeout: 300

#define SLOTS 400
#if defined(PRD_TSAN) || defined(PRD_ASAN)
#define STEPS 8000
#else
#define STEPS 30000
#endif

typedef struct {
  unsigned char *m_p;
  size_t m_size;
  size_t m_align;
  unsigned m_seed;
} mblock_t;

static mblock_t model[SLOTS];

static void stamp(mblock_t *b)
{
  for (size_t i = 0; i < b->m_size; i++)
    b->m_p[i] = (unsigned char)(b->m_seed + i * 13);
}

static int intact(const mblock_t *b)
{
  for (size_t i = 0; i < b->m_size; i++)
    if (b->m_p[i] != (unsigned char)(b->m_seed + i * 13))
      return 0;
  return 1;
}

static size_t rand_size(prd_rng_t *r)
{
  switch (prd_rng_below(r, 10)) {
  case 0:
    return prd_rng_below(r, 17);                  /* tiny, with 0 */
  case 1:
  case 2:
    return 16384 + prd_rng_below(r, 200000);      /* big blocks from the arena */
  case 3:
    return prd_rng_below(r, 100) == 0 ? (4u << 20) + prd_rng_below(r, 1 << 20) : 5000;
  default:
    return 1 + prd_rng_below(r, 3000);            /* the classes */
  }
}

static void check_block(const mblock_t *b, int slot)
{
  CHECK(intact(b));
  CHECK(prd_malloc_usable_size(b->m_p) >= b->m_size);
  if (((uintptr_t)b->m_p & (b->m_align - 1)) != 0)
    fprintf(stderr, "  block %p size %zu align %zu misaligned\n", (void *)b->m_p, b->m_size, b->m_align);
  CHECK(((uintptr_t)b->m_p & (b->m_align - 1)) == 0);
  CHECK(prd__malloc_pm_entry(b->m_p) != 0);
  uintptr_t lo = (uintptr_t)b->m_p, hi = lo + (b->m_size ? b->m_size : 1);
  for (int k = 0; k < SLOTS; k++) {
    if (k == slot || model[k].m_p == NULL)
      continue;
    uintptr_t klo = (uintptr_t)model[k].m_p, khi = klo + (model[k].m_size ? model[k].m_size : 1);
    CHECK(hi <= klo || khi <= lo);
  }
}

static void test_model(void)
{
  prd_rng_t r = prd_rng_seeded("test_malloc_model");
  for (int step = 0; step < STEPS && prd_t_failures == 0; step++) {
    int s = (int)prd_rng_below(&r, SLOTS);
    mblock_t *b = &model[s];
    unsigned op = (unsigned)prd_rng_below(&r, 6);
    if (b->m_p == NULL) {
      size_t n = rand_size(&r);
      b->m_seed = (unsigned)prd_rng_next(&r);
      b->m_align = n >= 16 ? 16 : 8;
      if (n < 8)
        b->m_align = n >= 4 ? 4 : n >= 2 ? 2 : 1;
      if (op == 0) {
        b->m_p = prd_calloc(1, n);
        for (size_t i = 0; b->m_p != NULL && i < n; i++)
          CHECK(b->m_p[i] == 0);
      } else if (op == 1) {
        b->m_align = (size_t)8 << prd_rng_below(&r, 12);
        void *p = NULL;
        CHECK_EQ(prd_posix_memalign(&p, b->m_align, n), 0);
        b->m_p = p;
      } else {
        b->m_p = prd_malloc(n);
      }
      CHECK(b->m_p != NULL);
      if (b->m_p == NULL)
        break;
      b->m_size = n;
      stamp(b);
      check_block(b, s);
    } else if (op <= 2) {
      size_t n = op == 1 ? b->m_size + prd_rng_below(&r, 64) : rand_size(&r);
      unsigned char *q = prd_realloc(b->m_p, n == 0 ? 1 : n);
      CHECK(q != NULL);
      if (q == NULL)
        break;
      b->m_p = q;
      if (n == 0)
        n = 1;
      size_t keep = PRD_MIN(b->m_size, n);
      b->m_size = keep;
      CHECK(intact(b));
      b->m_size = n;
      b->m_align = 16;
      if (n < 16)
        b->m_align = 1;
      stamp(b);
      check_block(b, s);
    } else {
      CHECK(intact(b));
      prd_free(b->m_p);
      b->m_p = NULL;
    }
    int o = (int)prd_rng_below(&r, SLOTS);
    if (model[o].m_p != NULL)
      CHECK(intact(&model[o]));
    if (step % 500 == 0)
      for (size_t sz = 8; sz <= 16384; sz *= 2)
        CHECK_EQ(prd__cache_check(prd__malloc_class_cache(sz)), 0);
  }
  for (int k = 0; k < SLOTS; k++)
    if (model[k].m_p != NULL) {
      check_block(&model[k], k);
      prd_free(model[k].m_p);
      model[k].m_p = NULL;
    }
}

int main(void)
{
  RUN(test_model);
  return prd_test_done();
}
