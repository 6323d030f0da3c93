/* Randomized model test of the slab layer: random allocations, frees and reaps on caches of
 * every layout, against a reference model (the set of live buffers), with every invariant of
 * the slab layer (prd__cache_check: list membership matches slab state, counts add up) and
 * the statistics checked after every step.  PRD_SEED=N repeats a run. */
// prd-test-timeout: 300
#include "internal.h"
#include "prd_test.h"

#ifdef PRD_TSAN
#define STEPS 8000
#elif defined(PRD_ASAN)
#define STEPS 15000
#else
#define STEPS 50000
#endif
#define MAXLIVE 400

struct live {
  uintptr_t l_addr;
  uint64_t l_tag;
};

struct model {
  const char *m_name;
  size_t m_size, m_align;
  bool m_ctor, m_notouch;
  int m_cflags;
  size_t m_arena_bytes;     /* 0: the heap arena */
  prd_vmem_t *m_arena;
  void *m_mem;
  prd_cache_t *m_cp;
  struct live m_live[MAXLIVE];
  size_t m_nlive;
  uint64_t m_allocs, m_frees, m_fails;
};

#define MAGIC 0xc0ffee11u

static int model_ctor(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  *(uint32_t *)buf = MAGIC;
  return 0;
}

static void model_dtor(void *buf, void *priv)
{
  (void)priv;
  CHECK_EQ(*(uint32_t *)buf, MAGIC);
}

static void model_open(struct model *m)
{
  size_t page = prd__os_page_size();
  if (m->m_notouch) {
    m->m_arena = prd_vmem_create(m->m_name, (void *)(uintptr_t)(1u << 20), m->m_arena_bytes, 1,
                                 NULL, NULL, NULL, 0, PRD_VM_NOSLEEP);
  } else if (m->m_arena_bytes != 0) {
    m->m_mem = prd__os_map(m->m_arena_bytes);
    m->m_arena = prd_vmem_create(m->m_name, m->m_mem, m->m_arena_bytes, page, NULL, NULL, NULL,
                                 0, PRD_VM_NOSLEEP);
  }
  m->m_cp = prd_cache_create(m->m_name, m->m_size, m->m_align, m->m_ctor ? model_ctor : NULL,
                             m->m_ctor ? model_dtor : NULL, NULL, NULL, m->m_arena,
                             m->m_cflags | (m->m_notouch ? PRD_CACHE_NOTOUCH : 0));
  CHECK(m->m_cp != NULL);
}

static bool overlaps(const struct model *m, uintptr_t a)
{
  for (size_t i = 0; i < m->m_nlive; i++) {
    uintptr_t b = m->m_live[i].l_addr;
    if (a < b + m->m_size && b < a + m->m_size)
      return true;
  }
  return false;
}

/* The tag lives after the constructed word (if any); the last byte holds its low byte. */
static size_t tag_off(const struct model *m)
{
  return m->m_ctor ? sizeof(uint32_t) : 0;
}

static void tag_write(const struct model *m, uintptr_t a, uint64_t tag)
{
  if (m->m_notouch)
    return;
  unsigned char *p = (unsigned char *)a;
  size_t off = tag_off(m);
  size_t n = PRD_MIN(sizeof(tag), m->m_size - off);
  memcpy(p + off, &tag, n);
  p[m->m_size - 1] = (unsigned char)tag;
}

static bool tag_ok(const struct model *m, uintptr_t a, uint64_t tag)
{
  if (m->m_notouch)
    return true;
  const unsigned char *p = (const unsigned char *)a;
  size_t off = tag_off(m);
  size_t n = PRD_MIN(sizeof(tag), m->m_size - off);
  return memcmp(p + off, &tag, n) == 0 && p[m->m_size - 1] == (unsigned char)tag &&
         (!m->m_ctor || *(const uint32_t *)p == MAGIC);
}

static void model_step(struct model *m, prd_rng_t *rng, uint64_t step)
{
  uint64_t r = prd_rng_below(rng, 100);
  if (r < 52 && m->m_nlive < MAXLIVE) {
    uintptr_t a = (uintptr_t)prd_cache_alloc(m->m_cp, PRD_NOSLEEP);
    if (a == 0) {
      /* only when the source has no room for another slab and no slab has a free buffer */
      prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
      prd_cache_stats(m->m_cp, &st);
      CHECK(m->m_arena != NULL);
      CHECK_EQ(st.bufs_inuse, st.bufs_total);
      if (m->m_arena != NULL)
        CHECK(prd_vmem_size(m->m_arena, PRD_VMEM_FREE) < st.slab_size + st.slab_size);
      m->m_fails++;
      return;
    }
    CHECK(a % (m->m_align ? m->m_align : (m->m_notouch ? 1 : 8)) == 0);
    CHECK(!overlaps(m, a));
    if (m->m_ctor)
      CHECK_EQ(*(uint32_t *)a, MAGIC);   /* handed out constructed */
    tag_write(m, a, step);
    m->m_live[m->m_nlive].l_addr = a;
    m->m_live[m->m_nlive].l_tag = step;
    m->m_nlive++;
    m->m_allocs++;
  } else if (r < 96 && m->m_nlive > 0) {
    size_t i = (size_t)prd_rng_below(rng, m->m_nlive);
    struct live l = m->m_live[i];
    CHECK(tag_ok(m, l.l_addr, l.l_tag));   /* nobody else wrote into it */
    prd_cache_free(m->m_cp, (void *)l.l_addr);
    m->m_live[i] = m->m_live[--m->m_nlive];
    m->m_frees++;
  } else if (r < 98) {
    prd__cache_reap_all(m->m_cp);   /* reap ignoring the working set */
    prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
    prd_cache_stats(m->m_cp, &st);
    CHECK_EQ(st.slabs_free, 0);
  } else {
    prd_cache_reap(m->m_cp);   /* inside the working set: nothing free goes */
  }
}

static void model_verify(struct model *m)
{
  CHECK_EQ(prd__cache_check(m->m_cp), 0);
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  prd_cache_stats(m->m_cp, &st);
  CHECK_EQ(st.bufs_inuse, m->m_nlive);
  CHECK_EQ(st.allocs - st.frees, m->m_nlive);
  CHECK_EQ(st.frees, m->m_frees);
  CHECK(st.bufs_total >= m->m_nlive);
  CHECK(st.bufs_total == (st.slabs_full + st.slabs_partial + st.slabs_free) * st.bufs_per_slab);
  CHECK(st.slabs_peak >= st.slabs_full + st.slabs_partial + st.slabs_free);
}

static void model_close(struct model *m)
{
  while (m->m_nlive > 0) {
    struct live l = m->m_live[--m->m_nlive];
    CHECK(tag_ok(m, l.l_addr, l.l_tag));
    prd_cache_free(m->m_cp, (void *)l.l_addr);
    m->m_frees++;
  }
  model_verify(m);
  prd_cache_destroy(m->m_cp);
  if (m->m_arena != NULL) {
    CHECK_EQ(prd_vmem_size(m->m_arena, PRD_VMEM_ALLOC), 0);   /* every slab went back */
    prd_vmem_destroy(m->m_arena);
  }
  if (m->m_mem != NULL)
    prd__os_unmap(m->m_mem, m->m_arena_bytes);
}

static struct model models[] = {
  { .m_name = "small", .m_size = 24 },
  { .m_name = "small_ctor", .m_size = 100, .m_ctor = true },
  { .m_name = "odd", .m_size = 13, .m_align = 16 },
  { .m_name = "large", .m_size = 700 },
  { .m_name = "large_ctor", .m_size = 3000, .m_align = 64, .m_ctor = true },
  { .m_name = "debug", .m_size = 40, .m_cflags = PRD_CACHE_VERIFY | PRD_CACHE_REDZONE |
                                                 PRD_CACHE_PATTERNS | PRD_CACHE_AUDIT },
  { .m_name = "integers", .m_size = 8, .m_notouch = true, .m_arena_bytes = 4096 },
  { .m_name = "fixed", .m_size = 200, .m_arena_bytes = 16 * 4096 },
  { .m_name = "fixed_large", .m_size = 1500, .m_ctor = true, .m_arena_bytes = 24 * 4096 },
};

static void test_model(void)
{
  prd_rng_t rng = prd_rng_seeded("test_slab_model");
  for (size_t k = 0; k < PRD_ARRAY_SIZE(models); k++)
    model_open(&models[k]);
  for (uint64_t step = 1; step <= STEPS * PRD_ARRAY_SIZE(models); step++) {
    struct model *m = &models[prd_rng_below(&rng, PRD_ARRAY_SIZE(models))];
    model_step(m, &rng, step);
    model_verify(m);
    if (prd_t_failures > 0) {
      fprintf(stderr, "  first failure at step %llu in cache %s\n", (unsigned long long)step,
              m->m_name);
      break;
    }
  }
  uint64_t fails = 0;
  for (size_t k = 0; k < PRD_ARRAY_SIZE(models); k++) {
    fails += models[k].m_fails;
    model_close(&models[k]);
  }
  CHECK(fails > 0);   /* the fixed arenas were exhausted at least once */
}

int main(void)
{
  prd_option_set("magazines", "0");   /* this tests the layers below the CPU layer */
  RUN(test_model);
  return prd_test_done();
}
