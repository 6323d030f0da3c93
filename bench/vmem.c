/*
 * prd-bench vmem: does vmem allocation stay constant-time as an arena fragments?
 * (Bonwick & Adams 2001, section 4.5: vmem against the linear resource map it replaced.)
 *
 * Setup, for each fragmentation level F in {0, 1k, 10k, 100k} free segments: an arena of
 * integers (quantum 16) in which 2F one-quantum segments were allocated and every other one
 * freed again, leaving F one-quantum holes below one large free tail.  The linear map
 * (bench/rmap.c, first fit over a sorted array, as rmalloc did) is given the same free ranges.
 * Both are checked to hold exactly the same free ranges before timing.
 *
 * Measured: one alloc+free pair of a request of 2..8 quanta (a fixed sequence, the same for
 * every allocator), which fits in none of the holes, only in the tail: instant-fit finds it with
 * one bit scan, best-fit with one short list, the linear map after scanning all F holes (and
 * scanning again to free).  Each point is the median over rounds of ns per pair; rounds run the
 * levels and allocators interleaved so drift on a shared machine hits all of them alike.
 *
 *   prd-bench vmem [--json] [--smoke] [--rounds N]
 * --json: one object per point, then {"bench":"vmem","summary":true,"instantfit_ratio":R1,
 * "bestfit_ratio":R2,"linear_ratio":R3}, each ratio ns/op at the largest level (100k) over
 * ns/op at 0 in the same run.  Goal: instantfit_ratio <= 1.5, linear_ratio >= 100.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "prudence.h"
#include "rmap.h"

#define VB_Q       16u
#define VB_BASE    ((uintptr_t)1 << 32)
#define VB_SIZE    ((size_t)1 << 36)     /* integers in the arena: the tail never runs out */
#define VB_NSIZES  64
#define VB_LEVELS  4
#define VB_ALLOCS  3

enum { A_INSTANT, A_BEST, A_LINEAR };
static const char *const vb_names[VB_ALLOCS] = { "instantfit", "bestfit", "linear" };
static const char *const vb_titles[VB_ALLOCS] = { "instant-fit", "best-fit", "linear map" };

struct vb_level {
  size_t vl_free;            /* free segments (holes) below the tail */
  prd_vmem_t *vl_arena;      /* shared by instant-fit and best-fit: each pair restores it */
  struct rmap vl_map;
};

static size_t vb_sizes[VB_NSIZES];

/* ns per alloc+free pair over n pairs, or a negative value when an allocation failed. */
static double vb_time(struct vb_level *lv, int which, long n)
{
  int flags = PRD_VM_NOSLEEP | (which == A_BEST ? PRD_VM_BESTFIT : PRD_VM_INSTANTFIT);
  uint64_t t0 = bench_now_ns();
  if (which == A_LINEAR) {
    for (long i = 0; i < n; i++) {
      size_t s = vb_sizes[i & (VB_NSIZES - 1)];
      uintptr_t a = rmap_alloc(&lv->vl_map, s);
      if (a == 0)
        return -1;
      rmap_free(&lv->vl_map, a, s);
    }
  } else {
    for (long i = 0; i < n; i++) {
      size_t s = vb_sizes[i & (VB_NSIZES - 1)];
      void *p = prd_vmem_alloc(lv->vl_arena, s, flags);
      if (p == NULL)
        return -1;
      prd_vmem_free(lv->vl_arena, p, s);
    }
  }
  return (double)(bench_now_ns() - t0) / (double)n;
}

struct vb_cmp {
  const struct rmap *vc_map;
  size_t vc_i;
  int vc_bad;
};

static void vb_cmp_seg(void *arg, void *addr, size_t size)
{
  struct vb_cmp *c = arg;
  const struct rmap_ent *e = &c->vc_map->rm_ent[c->vc_i++];
  if (e->m_size != size || e->m_addr != (uintptr_t)addr)
    c->vc_bad++;
}

/* Builds level lv in both allocators; 0, or -1 with a message. */
static int vb_build(struct vb_level *lv)
{
  size_t f = lv->vl_free;
  lv->vl_arena = prd_vmem_create("bench", (void *)VB_BASE, VB_SIZE, VB_Q, NULL, NULL, NULL, 0,
                                 PRD_VM_SLEEP);
  if (lv->vl_arena == NULL)
    return -1;
  /* 2F one-quantum segments from the bottom, then every other one freed */
  for (size_t i = 0; i < 2 * f; i++) {
    void *p = prd_vmem_alloc(lv->vl_arena, VB_Q, PRD_VM_NOSLEEP);   /* the tail's start */
    if (p != (void *)(VB_BASE + i * VB_Q))
      return -1;
  }
  for (size_t i = 0; i < 2 * f; i += 2)
    prd_vmem_free(lv->vl_arena, (void *)(VB_BASE + i * VB_Q), VB_Q);
  /* the same free ranges in the linear map */
  struct rmap_ent *r = calloc(f + 1, sizeof(*r));
  if (r == NULL || rmap_init(&lv->vl_map, f + 16) != 0)
    return -1;
  for (size_t i = 0; i < f; i++) {
    r[i].m_addr = VB_BASE + 2 * i * VB_Q;
    r[i].m_size = VB_Q;
  }
  r[f].m_addr = VB_BASE + 2 * f * VB_Q;
  r[f].m_size = VB_SIZE - 2 * f * VB_Q;
  int rc = rmap_load(&lv->vl_map, r, f + 1);
  free(r);
  if (rc != 0)
    return -1;
  struct vb_cmp c = { &lv->vl_map, 0, 0 };
  prd_vmem_walk(lv->vl_arena, PRD_VMEM_FREE, vb_cmp_seg, &c);
  if (c.vc_bad != 0 || c.vc_i != rmap_count(&lv->vl_map)) {
    fprintf(stderr, "vmem bench: arena and linear map differ at level %zu\n", f);
    return -1;
  }
  /* the same sequence gives the same answers (the tail's start) in all three */
  for (int i = 0; i < VB_NSIZES; i++) {
    size_t s = vb_sizes[i];
    void *p = prd_vmem_alloc(lv->vl_arena, s, PRD_VM_NOSLEEP);
    void *q = prd_vmem_alloc(lv->vl_arena, s, PRD_VM_NOSLEEP | PRD_VM_BESTFIT);
    uintptr_t a = rmap_alloc(&lv->vl_map, s);
    bool same = p != NULL && q != NULL && a == (uintptr_t)p && (uintptr_t)q == a + s;
    if (q != NULL)
      prd_vmem_free(lv->vl_arena, q, s);
    if (p != NULL)
      prd_vmem_free(lv->vl_arena, p, s);
    if (a != 0)
      rmap_free(&lv->vl_map, a, s);
    if (!same) {
      fprintf(stderr, "vmem bench: allocators disagree at level %zu\n", f);
      return -1;
    }
  }
  return 0;
}

static int vmem_bench(int argc, char **argv)
{
  struct bench_common bc = { false, false, 0 };
  argc = bench_parse_common(argc, argv, &bc);
  if (argc > 1) {
    fprintf(stderr, "usage: prd-bench vmem [--json] [--smoke] [--rounds N]\n");
    return 2;
  }
  int rounds = bc.bc_rounds > 0 ? bc.bc_rounds : bc.bc_smoke ? 3 : 15;
  long vmem_ops = bc.bc_smoke ? 2000 : 50000;
  long linear_work = bc.bc_smoke ? 200000 : 2000000;   /* pairs x holes per linear timing */
  size_t levels[VB_LEVELS] = { 0, 1000, 10000, 100000 };
  int nlevels = bc.bc_smoke ? 2 : VB_LEVELS;
  /* the request sizes: 2..8 quanta, a fixed pseudo-random sequence */
  uint64_t x = 0x2545f4914f6cdd1dull;
  for (int i = 0; i < VB_NSIZES; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    vb_sizes[i] = VB_Q * (2 + (size_t)(x % 7));
  }
  struct vb_level lv[VB_LEVELS];
  memset(lv, 0, sizeof(lv));
  for (int l = 0; l < nlevels; l++) {
    lv[l].vl_free = levels[l];
    bench_progress(&bc, "vmem", "building arenas", l, nlevels);
    if (vb_build(&lv[l]) != 0) {
      fprintf(stderr, "vmem bench: setup failed at level %zu (errno %d)\n", levels[l], errno);
      return 1;
    }
  }
  double *ns[VB_LEVELS][VB_ALLOCS];
  for (int l = 0; l < nlevels; l++)
    for (int a = 0; a < VB_ALLOCS; a++)
      ns[l][a] = calloc((size_t)rounds, sizeof(double));
  long ops[VB_LEVELS][VB_ALLOCS];
  for (int l = 0; l < nlevels; l++) {
    long lin = linear_work / (long)(levels[l] + 1);
    ops[l][A_INSTANT] = ops[l][A_BEST] = vmem_ops;
    ops[l][A_LINEAR] = lin < 20 ? 20 : lin > vmem_ops ? vmem_ops : lin;
    for (int a = 0; a < VB_ALLOCS; a++)   /* warm up: caches, hash table, branch predictors */
      (void)vb_time(&lv[l], a, ops[l][a] / 4 + 1);
  }
  for (int r = 0; r < rounds; r++) {
    bench_progress(&bc, "vmem", "timing", r, rounds);
    for (int k = 0; k < nlevels * VB_ALLOCS; k++) {
      /* rotate the order every round */
      int idx = (k + r) % (nlevels * VB_ALLOCS);
      int l = idx / VB_ALLOCS, a = idx % VB_ALLOCS;
      double t = vb_time(&lv[l], a, ops[l][a]);
      if (t < 0) {
        fprintf(stderr, "vmem bench: %s failed to allocate at level %zu\n", vb_names[a],
                levels[l]);
        return 1;
      }
      ns[l][a][r] = t;
    }
  }
  bench_progress(&bc, "vmem", "timing", rounds, rounds);
  double med[VB_LEVELS][VB_ALLOCS];
  for (int l = 0; l < nlevels; l++)
    for (int a = 0; a < VB_ALLOCS; a++)
      med[l][a] = bench_median(ns[l][a], (size_t)rounds);
  int top = nlevels - 1;
  double ratio[VB_ALLOCS];
  for (int a = 0; a < VB_ALLOCS; a++)
    ratio[a] = med[top][a] / med[0][a];
  if (bc.bc_json) {
    for (int l = 0; l < nlevels; l++)
      for (int a = 0; a < VB_ALLOCS; a++)
        printf("{\"bench\":\"vmem\",\"allocator\":\"%s\",\"free_segments\":%zu,"
               "\"ns_per_op\":%.2f,\"ops\":%ld,\"rounds\":%d}\n", vb_names[a], levels[l],
               med[l][a], ops[l][a], rounds);
    printf("{\"bench\":\"vmem\",\"summary\":true,\"instantfit_ratio\":%.3f,"
           "\"bestfit_ratio\":%.3f,\"linear_ratio\":%.3f}\n", ratio[A_INSTANT], ratio[A_BEST],
           ratio[A_LINEAR]);
  } else {
    printf("vmem: ns per alloc+free of 2-8 quanta (median of %d rounds) as the arena fragments\n",
           rounds);
    printf("  %-14s %12s %12s %12s\n", "free segments", vb_titles[0], vb_titles[1], vb_titles[2]);
    for (int l = 0; l < nlevels; l++)
      printf("  %-14zu %12.1f %12.1f %12.1f\n", levels[l], med[l][A_INSTANT], med[l][A_BEST],
             med[l][A_LINEAR]);
    char label[32];
    snprintf(label, sizeof(label), "ratio %zu/0", levels[top]);
    printf("  %-14s %12.2f %12.2f %12.1f\n", label, ratio[A_INSTANT], ratio[A_BEST],
           ratio[A_LINEAR]);
    printf("  goal: instant-fit ratio <= 1.5 (constant time), linear map ratio >= 100\n");
  }
  for (int l = 0; l < nlevels; l++) {
    for (size_t i = 1; i < 2 * levels[l]; i += 2)   /* the segments between the holes */
      prd_vmem_free(lv[l].vl_arena, (void *)(VB_BASE + i * VB_Q), VB_Q);
    prd_vmem_destroy(lv[l].vl_arena);
    rmap_fini(&lv[l].vl_map);
    for (int a = 0; a < VB_ALLOCS; a++)
      free(ns[l][a]);
  }
  return 0;
}

PRD_BENCH("vmem", "vmem instant-fit/best-fit vs a linear resource map as arenas fragment",
          vmem_bench)
