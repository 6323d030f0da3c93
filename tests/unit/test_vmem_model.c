/* Randomized model test of vmem (src/vmem.c): 10^6 random operations (alloc and xalloc with
 * every policy and random constraints, free, xfree, add, and the occasional bad free) against
 * a reference model, a map of the integers (one byte per quantum: outside the arena, free, or
 * allocated).  After every step prd__vmem_check verifies the arena's invariants (segments
 * sorted, non-overlapping, coalesced, on the right freelist, inside their spans, statistics
 * adding up) and the test verifies the result against the model: an allocation lies in free
 * integers of the arena and meets its constraints; a failure happens only when the model has
 * no place that meets them.  Every 1024 steps a walk of the arena is compared with the model.
 * A second, shorter run does the same for an arena that imports from a parent and gives its
 * spans back (test_import_model).
 *
 *   test_vmem_model [OPS]   (default 10^6; fewer under ASan/TSan; PRD_SEED repeats a run)
 */
// prd-test-timeout: 600
#include "internal.h"
#include "prd_test.h"

#define Q        4u                /* quantum: integers, not bytes */
#define NQ       2048u             /* the universe, in quanta */
#define BASE     ((uintptr_t)0x1000)
#define INIT_Q   512u              /* the initial span */
#define REGION_Q 256u              /* later spans are added in regions of this size */
#define MAXLIVE  4096

enum { M_OUT = 0, M_FREE = 1, M_ALLOC = 2 };

static unsigned char model[NQ];
static bool span_first[NQ];   /* the first quantum of a span: free runs do not cross it */
static struct live { uintptr_t addr; size_t size; bool x; } live[MAXLIVE];
static int nlive;
static uint64_t model_alloc_bytes, model_total_bytes;
static int next_region;   /* regions after the initial span: [INIT_Q + k*REGION_Q, ...) */

static size_t qi(uintptr_t addr) { return (addr - BASE) / Q; }

static void model_set(uintptr_t addr, size_t size, unsigned char v)
{
  for (size_t i = qi(addr); i < qi(addr) + size / Q; i++)
    model[i] = v;
}

static bool model_all(uintptr_t addr, size_t size, unsigned char v)
{
  if (addr < BASE || addr + size > BASE + (uintptr_t)NQ * Q)
    return false;
  for (size_t i = qi(addr); i < qi(addr) + size / Q; i++)
    if (model[i] != v)
      return false;
  return true;
}

struct req {
  size_t size, align, phase, nocross;
  uintptr_t lo, hi;   /* hi = 0: none */
};

static bool meets(const struct req *r, uintptr_t a)
{
  if (a % r->align != r->phase)
    return false;
  if (r->nocross && (a / r->nocross) != ((a + r->size - 1) / r->nocross))
    return false;
  if (a < r->lo || (r->hi && a + r->size > r->hi))
    return false;
  return true;
}

/* Is there any place in the model that meets r?  (Brute force over free runs.) */
static bool model_feasible(const struct req *r)
{
  size_t i = 0;
  while (i < NQ) {
    if (model[i] != M_FREE) {
      i++;
      continue;
    }
    size_t j = i + 1;
    while (j < NQ && model[j] == M_FREE && !span_first[j])
      j++;
    uintptr_t s = BASE + i * Q, e = BASE + j * Q;
    if (e - s >= r->size)
      for (uintptr_t a = s; a + r->size <= e; a += Q)
        if (meets(r, a))
          return true;
    i = j;
  }
  return false;
}

struct walk_cmp { uintptr_t cursor; int bad; };

static void walk_alloc(void *arg, void *addr, size_t size)
{
  struct walk_cmp *w = arg;
  if (!model_all((uintptr_t)addr, size, M_ALLOC))
    w->bad++;
  w->cursor += size;
}

static void walk_free(void *arg, void *addr, size_t size)
{
  struct walk_cmp *w = arg;
  if (!model_all((uintptr_t)addr, size, M_FREE))
    w->bad++;
  w->cursor += size;
}

static size_t rand_size(prd_rng_t *rng)
{
  /* mostly small, sometimes large: 1..8 quanta 70%, up to 64 quanta 25%, up to 512 5% */
  uint64_t k = prd_rng_below(rng, 100);
  size_t n = k < 70 ? 1 + prd_rng_below(rng, 8) : k < 95 ? 1 + prd_rng_below(rng, 64)
                                                          : 1 + prd_rng_below(rng, 512);
  return n * Q;
}

static const int policies[4] = { PRD_VM_INSTANTFIT, PRD_VM_BESTFIT, PRD_VM_FIRSTFIT,
                                 PRD_VM_NEXTFIT };

static void test_model(long ops)
{
  prd_rng_t rng = prd_rng_seeded("test_vmem_model");
  memset(model, M_OUT, sizeof(model));
  memset(span_first, 0, sizeof(span_first));
  span_first[0] = true;
  nlive = 0;
  model_alloc_bytes = 0;
  next_region = 0;
  prd_vmem_t *a = prd_vmem_create("model", (void *)BASE, INIT_Q * Q, Q, NULL, NULL, NULL, 16 * Q, 0);
  CHECK(a != NULL);
  if (a == NULL)
    return;
  model_set(BASE, INIT_Q * Q, M_FREE);
  model_total_bytes = INIT_Q * Q;
  long n_alloc = 0, n_fail = 0, n_free = 0, n_add = 0, n_bad = 0, n_decay = 0;
  bool freed_since_pass = true;   /* decay (vmem.c section 16): a free since the last pass */
  uint64_t errors0 = prd__error_count();
  int failures_before = prd_t_failures;
  for (long step = 0; step < ops && prd_t_failures == failures_before; step++) {
    uint64_t op = prd_rng_below(&rng, 10000);
    if (op < 1 && nlive > 0) {
      /* a bad free: wrong size of a live segment (reported, nothing changes) */
      struct live *l = &live[prd_rng_below(&rng, (uint64_t)nlive)];
      if (l->x)
        prd_vmem_xfree(a, (void *)l->addr, l->size + Q);
      else
        prd_vmem_free(a, (void *)l->addr, l->size + Q);
      n_bad++;
    } else if (op < 20) {
      /* a decay pass: never more than was dirty; the `all` form leaves nothing dirty, and so
       * does a pass with no free since the one before (every dirty segment was aged then) */
      bool all = prd_rng_below(&rng, 2) == 0;
      size_t dirty0 = prd__vmem_dirty(a);
      CHECK(prd__vmem_decay(a, all) <= dirty0);
      if (all || !freed_since_pass)
        CHECK_EQ(prd__vmem_dirty(a), 0);
      freed_since_pass = false;
      n_decay++;
    } else if (op < 40 && INIT_Q + (size_t)(next_region + 1) * REGION_Q <= NQ) {
      /* add the next region as a span, leaving a gap of one quantum at its start so spans
       * are not always adjacent (adjacent spans stay separate; the model knows the gap) */
      uintptr_t start = BASE + (INIT_Q + (size_t)next_region * REGION_Q) * Q;
      size_t size = REGION_Q * Q;
      if (next_region % 2 == 0) {
        start += Q;
        size -= Q;
      }
      CHECK(prd_vmem_add(a, (void *)start, size, PRD_VM_NOSLEEP) == (void *)start);
      model_set(start, size, M_FREE);
      span_first[qi(start)] = true;
      model_total_bytes += size;
      next_region++;
      n_add++;
    } else if (op < 5500 || nlive == 0) {
      if (nlive == MAXLIVE)
        continue;
      struct req r = { rand_size(&rng), Q, 0, 0, 0, 0 };
      int flags = PRD_VM_NOSLEEP | policies[prd_rng_below(&rng, 4)];
      bool x = prd_rng_below(&rng, 3) == 0;
      void *p;
      if (x) {
        if (prd_rng_below(&rng, 2))
          r.align = Q << prd_rng_below(&rng, 7);
        if (r.align > Q && prd_rng_below(&rng, 2))
          r.phase = Q * prd_rng_below(&rng, r.align / Q);
        if (prd_rng_below(&rng, 4) == 0) {
          size_t nc = Q << (3 + prd_rng_below(&rng, 7));
          if ((r.phase % nc) + r.size <= nc)
            r.nocross = nc;
        }
        if (prd_rng_below(&rng, 3) == 0) {
          r.lo = BASE + Q * prd_rng_below(&rng, NQ);
          r.hi = r.lo + r.size + Q * prd_rng_below(&rng, NQ / 2);
        }
        p = prd_vmem_xalloc(a, r.size, r.align, r.phase, r.nocross, (void *)r.lo, (void *)r.hi,
                            flags);
      } else {
        p = prd_vmem_alloc(a, r.size, flags);
      }
      if (p != NULL) {
        uintptr_t ad = (uintptr_t)p;
        CHECK(model_all(ad, r.size, M_FREE));
        CHECK(meets(&r, ad));
        model_set(ad, r.size, M_ALLOC);
        live[nlive].addr = ad;
        live[nlive].size = r.size;
        live[nlive].x = x;
        nlive++;
        model_alloc_bytes += r.size;
        n_alloc++;
      } else {
        CHECK_EQ(errno, ENOMEM);
        if (model_feasible(&r)) {   /* every policy finds a fit when one exists */
          fprintf(stderr, "  %s(size %zu align %zu phase %zu nocross %zu lo %#lx hi %#lx, "
                  "flags %#x) failed but the model has room\n", x ? "xalloc" : "alloc",
                  r.size, r.align, r.phase, r.nocross, (unsigned long)r.lo,
                  (unsigned long)r.hi, flags);
          CHECK(0);
        }
        n_fail++;
      }
    } else {
      int k = (int)prd_rng_below(&rng, (uint64_t)nlive);
      struct live l = live[k];
      live[k] = live[--nlive];
      if (l.x)
        prd_vmem_xfree(a, (void *)l.addr, l.size);
      else
        prd_vmem_free(a, (void *)l.addr, l.size);
      model_set(l.addr, l.size, M_FREE);
      model_alloc_bytes -= l.size;
      n_free++;
      freed_since_pass = true;
    }
    CHECK_EQ(prd__vmem_check(a), 0);
    CHECK(prd__vmem_dirty(a) <= prd_vmem_size(a, PRD_VMEM_FREE));
    CHECK_EQ(prd_vmem_size(a, PRD_VMEM_ALLOC), model_alloc_bytes);
    CHECK_EQ(prd_vmem_size(a, PRD_VMEM_ALLOC | PRD_VMEM_FREE), model_total_bytes);
    if ((step & 1023) == 0) {
      struct walk_cmp w = { 0, 0 };
      prd_vmem_walk(a, PRD_VMEM_ALLOC, walk_alloc, &w);
      prd_vmem_walk(a, PRD_VMEM_FREE, walk_free, &w);
      CHECK_EQ(w.bad, 0);
      CHECK_EQ(w.cursor, model_total_bytes);
    }
    if (prd_t_failures != failures_before)
      fprintf(stderr, "  first failure at step %ld\n", step);
  }
  prd_vmem_stats_t st;
  st.size = sizeof(st);
  prd_vmem_stats(a, &st);
  CHECK_EQ(st.allocs, (uint64_t)n_alloc);
  CHECK_EQ(st.frees, (uint64_t)n_free);
  CHECK_EQ(st.failures, (uint64_t)n_fail);
  CHECK_EQ(st.bad_frees, (uint64_t)n_bad);
  CHECK_EQ(prd__error_count(), errors0 + (uint64_t)n_bad);
  CHECK(n_decay > 0);
  printf("# %ld ops: %ld allocs, %ld failed, %ld frees, %ld adds, %ld bad frees, %ld decay "
         "passes; %llu free and %llu allocated segments at the end\n", ops, n_alloc, n_fail,
         n_free, n_add, n_bad, n_decay, (unsigned long long)st.segs_free, (unsigned long long)st.segs_alloc);
  for (int i = 0; i < nlive; i++) {
    if (live[i].x)
      prd_vmem_xfree(a, (void *)live[i].addr, live[i].size);
    else
      prd_vmem_free(a, (void *)live[i].addr, live[i].size);
  }
  CHECK_EQ(prd__vmem_check(a), 0);
  CHECK_EQ(prd_vmem_size(a, PRD_VMEM_ALLOC), 0);
  prd_vmem_destroy(a);
}

/* The importing side: a child arena that imports from a parent and gives spans back.  Random
 * alloc/xalloc/free on the child; after every step both arenas are checked, the parent holds
 * exactly what the child imported, and every child allocation lies in memory the parent handed
 * out (in the model: allocated in the parent's map) and in no other live child allocation. */
static void test_import_model(long ops)
{
  prd_rng_t rng = prd_rng_seeded("test_vmem_model import");
  memset(model, M_OUT, sizeof(model));
  nlive = 0;
  prd_vmem_t *parent = prd_vmem_create("parent", (void *)BASE, NQ * Q, 4 * Q, NULL, NULL, NULL,
                                       0, 0);
  prd_vmem_t *kid = prd_vmem_create("kid", NULL, 0, Q, prd_vmem_alloc, prd_vmem_free, parent,
                                    0, 0);
  CHECK(parent != NULL && kid != NULL);
  if (parent == NULL || kid == NULL)
    return;
  int failures_before = prd_t_failures;
  for (long step = 0; step < ops && prd_t_failures == failures_before; step++) {
    /* few live allocations, so imported spans often become wholly free and go back */
    if (nlive == 0 || prd_rng_below(&rng, 100) < (nlive < 16 ? 70u : 30u)) {
      size_t size = rand_size(&rng);
      int flags = PRD_VM_NOSLEEP | policies[prd_rng_below(&rng, 4)];
      bool x = prd_rng_below(&rng, 4) == 0;
      void *p = x ? prd_vmem_xalloc(kid, size, Q << prd_rng_below(&rng, 6), 0, 0, NULL, NULL,
                                    flags)
                  : prd_vmem_alloc(kid, size, flags);
      if (p == NULL) {
        CHECK_EQ(errno, ENOMEM);
        continue;
      }
      uintptr_t ad = (uintptr_t)p;
      /* inside the parent's universe, and on integers no live child allocation holds */
      CHECK(ad >= BASE && ad + size <= BASE + (uintptr_t)NQ * Q);
      CHECK(model_all(ad, size, M_OUT));
      model_set(ad, size, M_ALLOC);
      live[nlive].addr = ad;
      live[nlive].size = size;
      live[nlive].x = x;
      nlive++;
    } else {
      int k = (int)prd_rng_below(&rng, (uint64_t)nlive);
      struct live l = live[k];
      live[k] = live[--nlive];
      (l.x ? prd_vmem_xfree : prd_vmem_free)(kid, (void *)l.addr, l.size);
      model_set(l.addr, l.size, M_OUT);
    }
    CHECK_EQ(prd__vmem_check(kid), 0);
    CHECK_EQ(prd__vmem_check(parent), 0);
    prd_vmem_stats_t ks, ps;
    ks.size = ps.size = sizeof(ks);
    prd_vmem_stats(kid, &ks);
    prd_vmem_stats(parent, &ps);
    CHECK_EQ(ks.bytes_imported, ps.bytes_alloc);   /* the child holds what the parent gave */
    CHECK_EQ(ks.bytes_total, ks.bytes_imported);
    CHECK_EQ(ks.imports - ks.releases, ps.segs_alloc);
    if (prd_t_failures != failures_before)
      fprintf(stderr, "  first failure at step %ld\n", step);
  }
  while (nlive > 0) {
    struct live l = live[--nlive];
    (l.x ? prd_vmem_xfree : prd_vmem_free)(kid, (void *)l.addr, l.size);
  }
  prd_vmem_stats_t ks;
  ks.size = sizeof(ks);
  prd_vmem_stats(kid, &ks);
  printf("# import model: %llu imports, %llu releases\n", (unsigned long long)ks.imports,
         (unsigned long long)ks.releases);
  CHECK(ks.imports > 0 && ks.imports == ks.releases);
  CHECK_EQ(prd_vmem_size(parent, PRD_VMEM_ALLOC), 0);   /* every span went back */
  prd_vmem_destroy(kid);
  prd_vmem_destroy(parent);
}

static long model_ops = 1000000;

static void test_vmem_import_model(void)
{
  test_import_model(model_ops / 10);
}

static void test_vmem_model(void)
{
  test_model(model_ops);
}

int main(int argc, char **argv)
{
  prd_option_set("magazines", "0");   /* this tests the layers below the CPU layer */
#if defined(PRD_ASAN)
  model_ops = 100000;   /* ASan makes each step several times slower */
#elif defined(PRD_TSAN)
  model_ops = 30000;    /* TSan more so; the test is single-threaded, TSan finds little here */
#endif
  if (argc > 1)
    model_ops = atol(argv[1]);
  prd_option_set("abort_on_error", "0");
  RUN(test_vmem_model);
  RUN(test_vmem_import_model);
  return prd_test_done();
}
