/* Unit tests of the vmem arenas (src/vmem.c): every function, policy and constraint, importing,
 * the heap arena, sleeping, statistics, and every kind of bad input. */
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"

#define Q 16
#define P(x) ((void *)(uintptr_t)(x))
#define U(p) ((uintptr_t)(p))

static prd_vmem_stats_t stats_of(prd_vmem_t *vmp)
{
  prd_vmem_stats_t st;
  memset(&st, 0, sizeof(st));
  st.size = sizeof(st);
  CHECK_EQ(prd_vmem_stats(vmp, &st), 0);
  CHECK_EQ(st.version, PRD_VMEM_STATS_VERSION);
  return st;
}

static void test_create_destroy(void)
{
  prd_vmem_t *a = prd_vmem_create("empty", NULL, 0, Q, NULL, NULL, NULL, 0, PRD_VM_SLEEP);
  CHECK(a != NULL);
  CHECK_STR_CONTAINS(prd__vmem_name(a), "empty");
  CHECK_EQ(prd__vmem_quantum(a), Q);
  CHECK_EQ(prd_vmem_size(a, PRD_VMEM_ALLOC | PRD_VMEM_FREE), 0);
  CHECK(prd_vmem_alloc(a, Q, PRD_VM_NOSLEEP) == NULL && errno == ENOMEM);
  CHECK_EQ(prd__vmem_check(a), 0);
  prd_vmem_destroy(a);

  prd_vmem_t *b = prd_vmem_create("b", P(0x1000), 0x1000, Q, NULL, NULL, NULL, 0, PRD_VM_SLEEP);
  CHECK(b != NULL);
  CHECK_EQ(prd_vmem_size(b, PRD_VMEM_FREE), 0x1000);
  CHECK_EQ(prd_vmem_size(b, PRD_VMEM_ALLOC), 0);
  prd_vmem_stats_t st = stats_of(b);
  CHECK_EQ(st.spans, 1);
  CHECK_EQ(st.segs_free, 1);
  CHECK_EQ(st.bytes_total, 0x1000);
  CHECK_EQ(prd__vmem_check(b), 0);
  prd_vmem_destroy(b);
  prd_vmem_destroy(NULL);   /* a no-op */

  /* a long name is truncated, not overflowed */
  prd_vmem_t *c = prd_vmem_create("a-very-long-arena-name-that-goes-on-and-on", P(Q), Q, Q, NULL,
                                  NULL, NULL, 0, 0);
  CHECK(c != NULL && strlen(prd__vmem_name(c)) < PRD_VMEM_NAMELEN);
  prd_vmem_destroy(c);
}

static void test_alloc_free_coalesce(void)
{
  prd_vmem_t *a = prd_vmem_create("af", P(0x10000), 0x1000, Q, NULL, NULL, NULL, 0, 0);
  void *p[8];
  for (int i = 0; i < 8; i++) {
    p[i] = prd_vmem_alloc(a, 2 * Q, PRD_VM_NOSLEEP);
    CHECK(p[i] != NULL);
    CHECK(U(p[i]) >= 0x10000 && U(p[i]) + 2 * Q <= 0x11000);
    CHECK(PRD_IS_P2ALIGNED(p[i], Q));
    for (int j = 0; j < i; j++)
      CHECK(U(p[i]) + 2 * Q <= U(p[j]) || U(p[j]) + 2 * Q <= U(p[i]));
  }
  CHECK_EQ(prd_vmem_size(a, PRD_VMEM_ALLOC), 16 * Q);
  CHECK_EQ(prd__vmem_check(a), 0);
  /* free in an order that exercises merging with the next, the previous and both */
  int order[8] = { 1, 3, 2, 0, 7, 5, 6, 4 };
  for (int i = 0; i < 8; i++) {
    prd_vmem_free(a, p[order[i]], 2 * Q);
    CHECK_EQ(prd__vmem_check(a), 0);
  }
  prd_vmem_stats_t st = stats_of(a);
  CHECK_EQ(st.segs_free, 1);
  CHECK_EQ(st.segs_alloc, 0);
  CHECK_EQ(st.allocs, 8);
  CHECK_EQ(st.frees, 8);
  CHECK_EQ(st.bytes_free, 0x1000);
  /* the whole arena in one piece, then nothing more */
  void *all = prd_vmem_alloc(a, 0x1000, PRD_VM_NOSLEEP);
  CHECK_EQ(U(all), 0x10000);
  CHECK(prd_vmem_alloc(a, Q, PRD_VM_NOSLEEP) == NULL && errno == ENOMEM);
  CHECK_EQ(stats_of(a).failures, 1);
  prd_vmem_free(a, all, 0x1000);
  CHECK_EQ(prd__vmem_check(a), 0);
  prd_vmem_destroy(a);
}

/* An arena with free holes of sizes 1, 3, 2 quanta (low to high), separated by allocations. */
static prd_vmem_t *holes_arena(void *keep[4])
{
  prd_vmem_t *a = prd_vmem_create("holes", P(0x1000), 64 * Q, Q, NULL, NULL, NULL, 0, 0);
  /* layout: [A 1][h1][A 1][h3 3][A 1][h2 2][A rest] */
  void *x[7];
  size_t sz[7] = { 1, 1, 1, 3, 1, 2, 64 - 9 };
  for (int i = 0; i < 7; i++)
    x[i] = prd_vmem_xalloc(a, sz[i] * Q, 0, 0, 0, NULL, NULL, PRD_VM_NOSLEEP | PRD_VM_FIRSTFIT);
  prd_vmem_xfree(a, x[1], Q);
  prd_vmem_xfree(a, x[3], 3 * Q);
  prd_vmem_xfree(a, x[5], 2 * Q);
  keep[0] = x[0];
  keep[1] = x[2];
  keep[2] = x[4];
  keep[3] = x[6];
  CHECK_EQ(prd__vmem_check(a), 0);
  CHECK_EQ(stats_of(a).segs_free, 3);
  return a;
}

static void holes_destroy(prd_vmem_t *a, void *keep[4])
{
  prd_vmem_xfree(a, keep[0], Q);
  prd_vmem_xfree(a, keep[1], Q);
  prd_vmem_xfree(a, keep[2], Q);
  prd_vmem_xfree(a, keep[3], (64 - 9) * Q);
  CHECK_EQ(stats_of(a).segs_alloc, 0);
  prd_vmem_destroy(a);
}

static void test_policies(void)
{
  void *k[4];
  /* best-fit: 2 quanta go to the 2-quantum hole (highest address), not the 3-quantum one */
  prd_vmem_t *a = holes_arena(k);
  void *p = prd_vmem_alloc(a, 2 * Q, PRD_VM_NOSLEEP | PRD_VM_BESTFIT);
  CHECK_EQ(U(p), 0x1000 + 7 * Q);
  prd_vmem_free(a, p, 2 * Q);
  /* first-fit: the lowest address that fits: the 3-quantum hole */
  p = prd_vmem_alloc(a, 2 * Q, PRD_VM_NOSLEEP | PRD_VM_FIRSTFIT);
  CHECK_EQ(U(p), 0x1000 + 3 * Q);
  prd_vmem_free(a, p, 2 * Q);
  /* instant-fit: 2 quanta is a power of two, so list 2Q (holes of 2 and 3) surely fits */
  p = prd_vmem_alloc(a, 2 * Q, PRD_VM_NOSLEEP);
  CHECK(U(p) == 0x1000 + 3 * Q || U(p) == 0x1000 + 7 * Q);
  prd_vmem_free(a, p, 2 * Q);
  /* instant-fit of 3 quanta: no list of sizes >= 4Q with a free segment; it searches list 2Q */
  p = prd_vmem_alloc(a, 3 * Q, PRD_VM_NOSLEEP | PRD_VM_INSTANTFIT);
  CHECK_EQ(U(p), 0x1000 + 3 * Q);
  prd_vmem_free(a, p, 3 * Q);
  /* best-fit of 1 quantum: the 1-quantum hole */
  p = prd_vmem_alloc(a, Q, PRD_VM_NOSLEEP | PRD_VM_BESTFIT);
  CHECK_EQ(U(p), 0x1000 + Q);
  prd_vmem_free(a, p, Q);
  /* nothing of 4 quanta */
  CHECK(prd_vmem_alloc(a, 4 * Q, PRD_VM_NOSLEEP) == NULL && errno == ENOMEM);
  CHECK(prd_vmem_alloc(a, 4 * Q, PRD_VM_NOSLEEP | PRD_VM_BESTFIT) == NULL);
  CHECK(prd_vmem_alloc(a, 4 * Q, PRD_VM_NOSLEEP | PRD_VM_FIRSTFIT) == NULL);
  CHECK(prd_vmem_alloc(a, 4 * Q, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT) == NULL);
  CHECK_EQ(prd__vmem_check(a), 0);
  holes_destroy(a, k);
}

static void test_nextfit_rotor(void)
{
  prd_vmem_t *a = prd_vmem_create("ids", P(1), 8, 1, NULL, NULL, NULL, 0, 0);
  uintptr_t got[8];
  for (int i = 0; i < 5; i++)
    got[i] = U(prd_vmem_alloc(a, 1, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT));
  for (int i = 0; i < 5; i++)
    CHECK_EQ(got[i], (uintptr_t)i + 1);
  /* freeing 2 does not make it the next id: the rotor goes on to 6 */
  prd_vmem_free(a, P(2), 1);
  CHECK_EQ(U(prd_vmem_alloc(a, 1, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT)), 6);
  CHECK_EQ(U(prd_vmem_alloc(a, 1, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT)), 7);
  CHECK_EQ(U(prd_vmem_alloc(a, 1, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT)), 8);
  /* at the end it wraps around to the lowest free id */
  CHECK_EQ(U(prd_vmem_alloc(a, 1, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT)), 2);
  CHECK(prd_vmem_alloc(a, 1, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT) == NULL);
  CHECK_EQ(prd__vmem_check(a), 0);
  /* free everything (the rotor's tag goes away in coalescing) and start again */
  for (uintptr_t i = 1; i <= 8; i++)
    prd_vmem_free(a, P(i), 1);
  CHECK_EQ(prd__vmem_check(a), 0);
  uintptr_t n = U(prd_vmem_alloc(a, 1, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT));
  CHECK(n >= 1 && n <= 8);
  prd_vmem_free(a, P(n), 1);
  prd_vmem_destroy(a);
}

/* The rotor's free segment carved again by another policy: the next next-fit still takes the
 * first fit at or after the rotor's address, neither skipping the part below the carved
 * segment nor wrapping around to an id just freed. */
static void test_nextfit_rotor_carved(void)
{
  for (uintptr_t sz = 10; sz <= 50; sz += 40) {
    prd_vmem_t *a = prd_vmem_create("ids", P(0x1000), 100, 1, NULL, NULL, NULL, 0, 0);
    void *x = prd_vmem_alloc(a, 10, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT);   /* the rotor: +10 */
    CHECK_EQ(U(x), 0x1000);
    prd_vmem_free(a, x, 10);   /* the rotor's tag coalesces into the whole span */
    void *c = prd_vmem_xalloc(a, sz, 0, 0, 0, P(0x1032), NULL, PRD_VM_NOSLEEP | PRD_VM_FIRSTFIT);
    CHECK_EQ(U(c), 0x1032);
    void *n = prd_vmem_alloc(a, 10, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT);
    CHECK_EQ(U(n), 0x100a);
    CHECK_EQ(prd__vmem_check(a), 0);
    prd_vmem_free(a, n, 10);
    prd_vmem_xfree(a, c, sz);
    prd_vmem_destroy(a);
  }
}

static void test_xalloc_constraints(void)
{
  prd_vmem_t *a = prd_vmem_create("x", P(0x10000), 0x10000, Q, NULL, NULL, NULL, 0, 0);
  int policies[4] = { PRD_VM_INSTANTFIT, PRD_VM_BESTFIT, PRD_VM_FIRSTFIT, PRD_VM_NEXTFIT };
  for (int k = 0; k < 4; k++) {
    int f = PRD_VM_NOSLEEP | policies[k];
    void *dent = prd_vmem_alloc(a, Q, f);   /* so the free segment starts unaligned */
    /* align */
    void *p = prd_vmem_xalloc(a, 3 * Q, 0x1000, 0, 0, NULL, NULL, f);
    CHECK(p != NULL && PRD_IS_P2ALIGNED(p, 0x1000));
    /* align + phase */
    void *q = prd_vmem_xalloc(a, Q, 0x100, 0x30, 0, NULL, NULL, f);
    CHECK(q != NULL && (U(q) & 0xff) == 0x30);
    /* nocross: 4 quanta that must not cross a 0x80 boundary, starting from a phase that
     * would cross it */
    void *r = prd_vmem_xalloc(a, 4 * Q, 0x40, 0x20, 0x80, NULL, NULL, f);
    CHECK(r != NULL && (U(r) & 0x3f) == 0x20);
    CHECK(r != NULL && (U(r) & ~(uintptr_t)0x7f) == ((U(r) + 4 * Q - 1) & ~(uintptr_t)0x7f));
    /* minaddr / maxaddr */
    void *s = prd_vmem_xalloc(a, 2 * Q, 0, 0, 0, P(0x18000), P(0x18100), f);
    CHECK(U(s) >= 0x18000 && U(s) + 2 * Q <= 0x18100);
    void *t = prd_vmem_xalloc(a, Q, 0, 0, 0, NULL, P(0x10100), f);
    CHECK(t != NULL && U(t) + Q <= 0x10100);
    /* a window that is full fails with ENOMEM */
    void *w1 = prd_vmem_xalloc(a, 0x80, 0, 0, 0, P(0x1f000), P(0x1f080), f);
    CHECK(U(w1) == 0x1f000);
    CHECK(prd_vmem_xalloc(a, Q, 0, 0, 0, P(0x1f000), P(0x1f080), f) == NULL && errno == ENOMEM);
    CHECK_EQ(prd__vmem_check(a), 0);
    prd_vmem_xfree(a, w1, 0x80);
    prd_vmem_xfree(a, t, Q);
    prd_vmem_xfree(a, s, 2 * Q);
    prd_vmem_xfree(a, r, 4 * Q);
    prd_vmem_xfree(a, q, Q);
    prd_vmem_xfree(a, p, 3 * Q);
    prd_vmem_free(a, dent, Q);
    CHECK_EQ(stats_of(a).segs_free, 1);
  }
  /* the whole arena aligned to itself */
  void *all = prd_vmem_xalloc(a, 0x10000, 0x10000, 0, 0, NULL, NULL, PRD_VM_NOSLEEP);
  CHECK_EQ(U(all), 0x10000);
  prd_vmem_xfree(a, all, 0x10000);
  /* an alignment the span cannot meet: ENOMEM (the arena could grow by prd_vmem_add) */
  CHECK(prd_vmem_xalloc(a, Q, 0x100000, 0, 0, NULL, NULL, PRD_VM_SLEEP) == NULL && errno == ENOMEM);
  CHECK_EQ(prd__vmem_check(a), 0);
  prd_vmem_destroy(a);
}

struct walk_rec {
  uintptr_t addr[8];
  size_t size[8];
  int n;
};

static void walk_fn(void *arg, void *addr, size_t size)
{
  struct walk_rec *w = arg;
  if (w->n < 8) {
    w->addr[w->n] = U(addr);
    w->size[w->n] = size;
  }
  w->n++;
}

static void test_add_walk_size(void)
{
  prd_vmem_t *a = prd_vmem_create("add", NULL, 0, Q, NULL, NULL, NULL, 0, 0);
  CHECK(prd_vmem_add(a, P(0x3000), 0x1000, PRD_VM_SLEEP) == P(0x3000));
  CHECK(prd_vmem_add(a, P(0x1000), 0x1000, PRD_VM_SLEEP) == P(0x1000));
  CHECK(prd_vmem_add(a, P(0x2000), 0x1000, PRD_VM_SLEEP) == P(0x2000));   /* adjacent: fine */
  CHECK(prd_vmem_add(a, P(0x1800), 0x1000, 0) == NULL && errno == EINVAL);    /* overlaps */
  CHECK(prd_vmem_add(a, P(0x3ff0), 0x20, 0) == NULL && errno == EINVAL);      /* overlaps */
  CHECK(prd_vmem_add(a, P(0x5008), 0x10, 0) == NULL && errno == EINVAL);      /* unaligned */
  CHECK(prd_vmem_add(a, P(0x5000), 0, 0) == NULL && errno == EINVAL);         /* empty */
  CHECK(prd_vmem_add(a, NULL, 0x10, 0) == NULL && errno == EINVAL);           /* address 0 */
  CHECK(prd_vmem_add(NULL, P(0x5000), 0x10, 0) == NULL && errno == EINVAL);
  CHECK_EQ(stats_of(a).spans, 3);
  CHECK_EQ(prd_vmem_size(a, PRD_VMEM_FREE), 0x3000);
  CHECK_EQ(prd__vmem_check(a), 0);
  /* spans are separate: 0x1800 bytes fit in none of them */
  CHECK(prd_vmem_alloc(a, 0x1800, PRD_VM_NOSLEEP) == NULL);
  void *p = prd_vmem_alloc(a, 0x100, PRD_VM_NOSLEEP | PRD_VM_FIRSTFIT);
  CHECK_EQ(U(p), 0x1000);
  CHECK_EQ(prd_vmem_size(a, PRD_VMEM_ALLOC), 0x100);
  CHECK_EQ(prd_vmem_size(a, PRD_VMEM_ALLOC | PRD_VMEM_FREE), 0x3000);
  /* the walk sees segments in address order */
  struct walk_rec w;
  memset(&w, 0, sizeof(w));
  prd_vmem_walk(a, PRD_VMEM_ALLOC | PRD_VMEM_FREE, walk_fn, &w);
  CHECK_EQ(w.n, 4);
  CHECK(w.addr[0] == 0x1000 && w.size[0] == 0x100);
  CHECK(w.addr[1] == 0x1100 && w.size[1] == 0xf00);
  CHECK(w.addr[2] == 0x2000 && w.addr[3] == 0x3000);
  memset(&w, 0, sizeof(w));
  prd_vmem_walk(a, PRD_VMEM_ALLOC, walk_fn, &w);
  CHECK(w.n == 1 && w.addr[0] == 0x1000);
  memset(&w, 0, sizeof(w));
  prd_vmem_walk(a, PRD_VMEM_FREE, walk_fn, &w);
  CHECK_EQ(w.n, 3);
  prd_vmem_free(a, p, 0x100);
  prd_vmem_destroy(a);
}


/* ---- importing ------------------------------------------------------------------------ */

/* prd_vmem_alloc and prd_vmem_free have the afunc/ffunc signatures: an arena imports from
 * another arena by naming them (as in the paper). */

static void test_import_release(void)
{
  prd_vmem_t *parent = prd_vmem_create("parent", P(0x100000), 0x10000, 0x100, NULL, NULL, NULL, 0, 0);
  prd_vmem_t *child = prd_vmem_create("child", NULL, 0, Q, prd_vmem_alloc, prd_vmem_free, parent, 0, 0);
  CHECK(child != NULL);
  void *p = prd_vmem_alloc(child, Q, PRD_VM_NOSLEEP);
  CHECK(p != NULL && U(p) >= 0x100000 && U(p) < 0x110000);
  CHECK_EQ(prd_vmem_size(parent, PRD_VMEM_ALLOC), 0x100);   /* rounded to the parent's quantum */
  void *p2 = prd_vmem_alloc(child, Q, PRD_VM_NOSLEEP);     /* from the same imported span */
  CHECK_EQ(stats_of(child).imports, 1);
  /* an aligned request imports enough to align within the span */
  void *x = prd_vmem_xalloc(child, 0x200, 0x1000, 0, 0, NULL, NULL, PRD_VM_NOSLEEP);
  CHECK(x != NULL && PRD_IS_P2ALIGNED(x, 0x1000));
  CHECK_EQ(stats_of(child).imports, 2);
  /* constrained requests do not import */
  CHECK(prd_vmem_xalloc(child, 0x400, 0, 0, 0, P(0x200000), NULL, PRD_VM_NOSLEEP) == NULL);
  CHECK_EQ(prd__vmem_check(child), 0);
  CHECK_EQ(prd__vmem_check(parent), 0);
  prd_vmem_free(child, p, Q);
  CHECK_EQ(stats_of(child).releases, 0);   /* p2 still holds the span */
  prd_vmem_free(child, p2, Q);
  CHECK_EQ(stats_of(child).releases, 1);
  prd_vmem_xfree(child, x, 0x200);
  prd_vmem_stats_t st = stats_of(child);
  CHECK_EQ(st.releases, 2);
  CHECK_EQ(st.spans, 0);
  CHECK_EQ(st.bytes_total, 0);
  CHECK_EQ(prd_vmem_size(parent, PRD_VMEM_ALLOC), 0);
  CHECK_EQ(prd__vmem_check(child), 0);
  CHECK_EQ(prd__vmem_check(parent), 0);
  /* the parent runs dry: the child fails (NOSLEEP at once) */
  void *big = prd_vmem_alloc(parent, 0x10000, PRD_VM_NOSLEEP);
  CHECK(big != NULL);
  CHECK(prd_vmem_alloc(child, Q, PRD_VM_NOSLEEP) == NULL && errno == ENOMEM);
  /* a child destroyed with imported spans gives them back */
  prd_vmem_free(parent, big, 0x10000);
  void *c1 = prd_vmem_alloc(child, Q, PRD_VM_NOSLEEP);
  CHECK(c1 != NULL);
  prd_vmem_free(child, c1, Q);
  prd_vmem_destroy(child);
  CHECK_EQ(prd_vmem_size(parent, PRD_VMEM_ALLOC), 0);
  prd_vmem_destroy(parent);
}

static void test_heap_arena(void)
{
  prd_vmem_t *h = prd_heap_arena();
  CHECK(h != NULL);
  CHECK(prd_heap_arena() == h);
  size_t pg = prd__os_page_size();
  CHECK_EQ(prd__vmem_quantum(h), pg);
  size_t mapped0 = prd__os_mapped_bytes();
  char *p = prd_vmem_alloc(h, 3 * pg, PRD_VM_SLEEP);
  CHECK(p != NULL && PRD_IS_P2ALIGNED(p, pg));
  memset(p, 0x5a, 3 * pg);   /* real memory */
  CHECK(prd__os_mapped_bytes() >= mapped0 + (4u << 20));
  char *q = prd_vmem_xalloc(h, 2u << 20, 2u << 20, 0, 0, NULL, NULL, PRD_VM_SLEEP);
  CHECK(q != NULL && PRD_IS_P2ALIGNED(q, 2u << 20));
  q[0] = 1;
  q[(2u << 20) - 1] = 2;
  char *big = prd_vmem_alloc(h, 9u << 20, PRD_VM_SLEEP);   /* larger than one block */
  CHECK(big != NULL);
  big[0] = 1;
  big[(9u << 20) - 1] = 1;
  CHECK_EQ(prd__vmem_check(h), 0);
  prd_vmem_free(h, big, 9u << 20);
  prd_vmem_xfree(h, q, 2u << 20);
  prd_vmem_free(h, p, 3 * pg);
  CHECK_EQ(prd__vmem_check(h), 0);
  /* every block is wholly free again: the heap arena keeps them (a program that frees all
   * it built builds it again), its dirty bound decommitting what is over it; a pass that
   * finds them decommitted, here a reap's, gives every block back to the kernel */
  CHECK(prd__vmem_heap_dirty() <= (4u << 20));
  (void)prd__vmem_heap_decay(true);
  CHECK_EQ(prd__vmem_check(h), 0);
  CHECK_EQ(prd_vmem_size(h, PRD_VMEM_ALLOC | PRD_VMEM_FREE), 0);
  CHECK_EQ(stats_of(h).releases, stats_of(h).imports);
  CHECK(prd__os_mapped_bytes() < mapped0 + (1u << 20));   /* only tag pages remain */
}

/* ---- sleeping ------------------------------------------------------------------------- */

struct sleeper {
  prd_vmem_t *vmp;
  size_t size;
  void *got;
};

static void *sleeper_main(void *arg)
{
  struct sleeper *s = arg;
  s->got = prd_vmem_alloc(s->vmp, s->size, PRD_VM_SLEEP);
  return NULL;
}

static void test_sleep_woken_by_free(void)
{
  prd_vmem_t *a = prd_vmem_create("sleep", P(0x1000), 4 * Q, Q, NULL, NULL, NULL, 0, 0);
  void *all = prd_vmem_alloc(a, 4 * Q, PRD_VM_NOSLEEP);
  CHECK(all != NULL);
  struct sleeper s = { a, 2 * Q, NULL };
  pthread_t t;
  pthread_create(&t, NULL, sleeper_main, &s);
  /* Whether the sleeper is already waiting or not, this free makes room and wakes it. */
  prd_vmem_free(a, all, 4 * Q);
  pthread_join(t, NULL);
  CHECK(s.got != NULL);
  prd_vmem_free(a, s.got, 2 * Q);
  /* a request that no span could ever hold fails at once even with SLEEP */
  CHECK(prd_vmem_alloc(a, 8 * Q, PRD_VM_SLEEP) == NULL && errno == ENOMEM);
  prd_vmem_destroy(a);
}

static void *fail_alloc(prd_vmem_t *src, size_t size, int flags)
{
  (void)src;
  (void)size;
  CHECK(flags & PRD_VM_NOSLEEP);   /* the source is never asked to wait */
  errno = ENOMEM;
  return NULL;
}

static void never_free(prd_vmem_t *src, void *addr, size_t size)
{
  (void)src;
  (void)addr;
  (void)size;
  CHECK(0);
}

static void test_sleep_import_failure_is_bounded(void)
{
  long old = prd_option_get("vmem_sleep_ms");
  CHECK_EQ(prd_option_set("vmem_sleep_ms", "30"), 0);
  prd_vmem_t *a = prd_vmem_create("dry", NULL, 0, Q, fail_alloc, never_free, NULL, 0, 0);
  CHECK(prd_vmem_alloc(a, Q, PRD_VM_SLEEP) == NULL && errno == ENOMEM);
  prd_vmem_stats_t st = stats_of(a);
  CHECK(st.waits >= 1);
  CHECK_EQ(st.failures, 1);
  CHECK(prd_vmem_alloc(a, Q, PRD_VM_NOSLEEP) == NULL && errno == ENOMEM);
  prd_vmem_destroy(a);
  char buf[32];
  snprintf(buf, sizeof(buf), "%ld", old);
  prd_option_set("vmem_sleep_ms", buf);
}

/* ---- bad input ------------------------------------------------------------------------ */

static void test_invalid_arguments(void)
{
  /* create */
  CHECK(prd_vmem_create("q0", P(0x1000), 0x1000, 0, NULL, NULL, NULL, 0, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_create("q3", P(0x1000), 0x1000, 3, NULL, NULL, NULL, 0, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_create("base", P(0x1008), 0x1000, Q, NULL, NULL, NULL, 0, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_create("size", P(0x1000), 0x1008, Q, NULL, NULL, NULL, 0, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_create("zero", NULL, 0x1000, Q, NULL, NULL, NULL, 0, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_create("wrap", P(UINTPTR_MAX - 0xfff), 0x1000, Q, NULL, NULL, NULL, 0, 0) == NULL &&
        errno == EINVAL);
  CHECK(prd_vmem_create("afunc", NULL, 0, Q, prd_vmem_alloc, NULL, NULL, 0, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_create("qc", NULL, 0, Q, NULL, NULL, NULL, 8, 0) == NULL && errno == EINVAL);

  prd_vmem_t *a = prd_vmem_create("inval", P(0x10000), 0x10000, Q, NULL, NULL, NULL, 0, 0);
  /* alloc */
  errno = 0;
  CHECK(prd_vmem_alloc(a, 0, 0) == NULL && errno == EINVAL);                     /* size 0 */
  CHECK(prd_vmem_alloc(a, Q + 1, 0) == NULL && errno == EINVAL);                 /* not a multiple */
  CHECK(prd_vmem_alloc(NULL, Q, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_alloc(a, Q, PRD_VM_BESTFIT | PRD_VM_NEXTFIT) == NULL && errno == EINVAL);
  /* xalloc */
  CHECK(prd_vmem_xalloc(a, 0, 0, 0, 0, NULL, NULL, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_xalloc(a, 24, 0, 0, 0, NULL, NULL, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_xalloc(a, Q, 24, 0, 0, NULL, NULL, 0) == NULL && errno == EINVAL);     /* align % q */
  CHECK(prd_vmem_xalloc(a, Q, 48, 0, 0, NULL, NULL, 0) == NULL && errno == EINVAL);     /* not P2 */
  CHECK(prd_vmem_xalloc(a, Q, 64, 64, 0, NULL, NULL, 0) == NULL && errno == EINVAL);    /* phase >= align */
  CHECK(prd_vmem_xalloc(a, Q, 64, 8, 0, NULL, NULL, 0) == NULL && errno == EINVAL);     /* phase % q */
  CHECK(prd_vmem_xalloc(a, Q, 0, 0, 48, NULL, NULL, 0) == NULL && errno == EINVAL);     /* nocross not P2 */
  CHECK(prd_vmem_xalloc(a, 4 * Q, 0, 0, 2 * Q, NULL, NULL, 0) == NULL && errno == EINVAL); /* size > nocross */
  CHECK(prd_vmem_xalloc(a, 2 * Q, 0x100, 0x30, 0x40, NULL, NULL, 0) == NULL && errno == EINVAL);
  /* a size that wraps the phase's offset plus the size: refused, not ENOMEM after a search */
  errno = 0;
  CHECK(prd_vmem_xalloc(a, SIZE_MAX - Q + 1, 0x100, 0x30, 0x40, NULL, NULL, 0) == NULL &&
        errno == EINVAL);
  CHECK(prd_vmem_xalloc(a, Q, 0, 0, 0, P(0x12000), P(0x12000), 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_xalloc(a, Q, 0, 0, 0, P(0x13000), P(0x12000), 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_xalloc(a, 4 * Q, 0, 0, 0, P(0x12000), P(0x12020), 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_xalloc(NULL, Q, 0, 0, 0, NULL, NULL, 0) == NULL && errno == EINVAL);
  CHECK(prd_vmem_stats(a, NULL) == -1 && errno == EINVAL);
  prd_vmem_stats_t st;
  st.size = 4;
  CHECK(prd_vmem_stats(a, &st) == -1 && errno == EINVAL);
  /* nothing of that changed the arena */
  st = stats_of(a);
  CHECK_EQ(st.allocs, 0);
  CHECK_EQ(st.failures, 0);
  CHECK_EQ(prd__vmem_check(a), 0);
  prd_vmem_destroy(a);
}

static void stats_write_child(void *arg)
{
  prd_vmem_t *a = prd_vmem_create("printed", P(0x1000), 0x1000, Q, NULL, NULL, NULL, 0, 0);
  void *p = prd_vmem_alloc(a, Q, 0);
  prd__vmem_stats_write(a, 2, *(bool *)arg);
  prd_vmem_free(a, p, Q);
  prd_vmem_destroy(a);
}

static void test_stats_write(void)
{
  static char buf[4096];
  bool json = false;
  prd_test_child(stats_write_child, &json, buf, sizeof(buf));
  CHECK_STR_CONTAINS(buf, "printed: bytes_total=4096 bytes_alloc=16 bytes_free=4080");
  CHECK_STR_CONTAINS(buf, "segs_alloc=1 segs_free=1 spans=1");
  json = true;
  prd_test_child(stats_write_child, &json, buf, sizeof(buf));
  CHECK_STR_CONTAINS(buf, "{\"arena\":\"printed\",\"version\":2,\"bytes_total\":4096,");
  CHECK_STR_CONTAINS(buf, "\"allocs\":1,");
  CHECK_STR_CONTAINS(buf, "\"spans\":1,");
  CHECK_STR_CONTAINS(buf, "\"purges\":0}");
}

static void test_stats_versioned(void)
{
  prd_vmem_t *a = prd_vmem_create("stats", P(0x1000), 0x1000, Q, NULL, NULL, NULL, 0, 0);
  /* an older, shorter struct: fields past its size are not written */
  prd_vmem_stats_t st;
  memset(&st, 0xee, sizeof(st));
  st.size = offsetof(prd_vmem_stats_t, bytes_alloc);
  CHECK_EQ(prd_vmem_stats(a, &st), 0);
  CHECK_EQ(st.version, PRD_VMEM_STATS_VERSION);
  CHECK_EQ(st.bytes_total, 0x1000);
  CHECK(st.bytes_alloc == 0xeeeeeeeeeeeeeeeeull);
  prd_vmem_destroy(a);
}

/* Bad frees: reported (arena name, address, what), counted, and the arena stays consistent. */
static void test_bad_frees_keep_arena_consistent(void)
{
  prd_vmem_t *a = prd_vmem_create("badfree", P(0x10000), 0x1000, Q, NULL, NULL, NULL, 4 * Q, 0);
  void *p = prd_vmem_alloc(a, 2 * Q, 0);
  void *x = prd_vmem_xalloc(a, 2 * Q, 0, 0, 0, NULL, NULL, 0);
  void *big = prd_vmem_xalloc(a, 8 * Q, 0, 0, 0, NULL, NULL, 0);   /* above qcache_max */
  uint64_t e0 = prd__error_count();
  prd_vmem_free(a, P(0x20000), Q);          /* outside every span */
  prd_vmem_free(a, P(0x10800), Q);          /* free, never allocated */
  prd_vmem_free(a, (char *)p + Q, Q);       /* inside an allocated segment */
  prd_vmem_free(a, p, 3 * Q);               /* wrong size */
  CHECK_EQ(prd__error_count(), e0 + 4);
  CHECK_EQ(stats_of(a).bad_frees, 4);
  CHECK_EQ(stats_of(a).segs_alloc, 3);
  CHECK_EQ(prd__vmem_check(a), 0);
  prd_vmem_free(a, p, 2 * Q);
  prd_vmem_free(a, p, 2 * Q);               /* double free */
  CHECK_EQ(prd__error_count(), e0 + 5);
  prd_vmem_free(a, x, 2 * Q);               /* xalloc freed with free, within qcache_max */
  CHECK_EQ(prd__error_count(), e0 + 6);
  prd_vmem_free(a, big, 8 * Q);             /* above qcache_max: pairing not required */
  CHECK_EQ(prd__error_count(), e0 + 6);
  prd_vmem_stats_t st = stats_of(a);
  CHECK_EQ(st.bad_frees, 6);
  CHECK_EQ(st.segs_alloc, 0);               /* the mispaired free was still carried out */
  CHECK_EQ(prd__vmem_check(a), 0);
  void *y = prd_vmem_alloc(a, 2 * Q, 0);
  prd_vmem_xfree(a, y, 2 * Q);              /* alloc freed with xfree */
  CHECK_EQ(prd__error_count(), e0 + 7);
  CHECK_EQ(prd__vmem_check(a), 0);
  prd_vmem_destroy(a);
}

static void bad_free_child(void *arg)
{
  int which = *(int *)arg;
  prd_option_set("abort_on_error", "0");
  prd_vmem_t *a = prd_vmem_create("kid-arena", P(0x10000), 0x1000, Q, NULL, NULL, NULL, 4 * Q, 0);
  void *p = prd_vmem_alloc(a, 2 * Q, 0);
  void *x = prd_vmem_xalloc(a, Q, 0, 0, 0, NULL, NULL, 0);
  switch (which) {
  case 0: prd_vmem_free(a, P(0x10800), Q); break;
  case 1: prd_vmem_free(a, p, Q); break;
  case 2: prd_vmem_free(a, p, 2 * Q); prd_vmem_free(a, p, 2 * Q); break;
  case 3: prd_vmem_free(a, x, Q); break;
  case 4: prd_vmem_destroy(a); return;   /* leaks p and x */
  case 5: prd_option_set("abort_on_error", "1"); prd_vmem_free(a, P(0x20000), Q); break;
  }
  printf("consistent=%d\n", prd__vmem_check(a) == 0);
}

static void test_bad_free_reports(void)
{
  static char buf[8192];
  static const char *const expect[] = {
    "never allocated or freed twice", "wrong size", "never allocated or freed twice",
    "came from prd_vmem_xalloc", "leaked segment", "in no span"
  };
  for (int which = 0; which < 6; which++) {
    int status = prd_test_child(bad_free_child, &which, buf, sizeof(buf));
    CHECK_STR_CONTAINS(buf, "kid-arena");
    CHECK_STR_CONTAINS(buf, expect[which]);
    if (which < 4)
      CHECK_STR_CONTAINS(buf, "consistent=1");
    if (which == 1)
      CHECK_STR_CONTAINS(buf, "0x10000");
    if (which == 4) {
      CHECK_STR_CONTAINS(buf, "2 allocated segments");
      CHECK_STR_CONTAINS(buf, "xalloc");
    }
    if (which == 5)   /* abort_on_error=1: the report, then abort */
      CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    else
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

/* Reuse prefers resident pages (vmem.c sections 3 and 16): of two free segments on one
 * freelist, an allocation takes the dirty one even when a clean one went on the list after it.
 * Guards the freelist order that put every segment at the head, so a span added (or imported)
 * after a free hid the free, resident segment and the allocation faulted in fresh pages. */
static void test_dirty_first(void)
{
  prd_vmem_t *a = prd_vmem_create("dirtyfirst", P(0x10000), 8 * Q, Q, NULL, NULL, NULL, 0, 0);
  void *x = prd_vmem_alloc(a, 4 * Q, PRD_VM_NOSLEEP), *y = prd_vmem_alloc(a, 4 * Q, PRD_VM_NOSLEEP);
  CHECK(x != NULL && y != NULL);
  prd_vmem_free(a, x, 4 * Q);   /* dirty: y keeps it from coalescing */
  CHECK(prd_vmem_add(a, P(0x20000), 4 * Q, PRD_VM_NOSLEEP) != NULL);   /* clean, same list */
  void *z = prd_vmem_alloc(a, 4 * Q, PRD_VM_NOSLEEP);
  CHECK(z == x);
  CHECK_EQ(prd__vmem_check(a), 0);
  prd_vmem_free(a, z, 4 * Q);
  prd_vmem_free(a, y, 4 * Q);
  prd_vmem_destroy(a);
}

static void test_destroy_non_empty(void)
{
  prd_vmem_t *parent = prd_vmem_create("p2", P(0x100000), 0x10000, Q, NULL, NULL, NULL, 0, 0);
  prd_vmem_t *child = prd_vmem_create("leaky", NULL, 0, Q, prd_vmem_alloc, prd_vmem_free, parent, 0, 0);
  for (int i = 0; i < 20; i++)
    CHECK(prd_vmem_alloc(child, Q, 0) != NULL);
  uint64_t e0 = prd__error_count();
  prd_vmem_destroy(child);   /* reports 16 segments, a count of the rest, and a header */
  CHECK_EQ(prd__error_count(), e0 + 18);
  CHECK_EQ(prd_vmem_size(parent, PRD_VMEM_ALLOC), 0);   /* the imported span went back */
  CHECK_EQ(prd__vmem_check(parent), 0);
  prd_vmem_destroy(parent);
}

/* A wrong-size free of a quantum-cached segment whose size happens to be that of the cache's
 * slab (an xalloc'ed segment of the arena starting at the same address) is reported and frees
 * nothing; it freed the slab, whose live buffers were then handed out again. */
static void test_qcache_slab_not_freed_by_wrong_size(void)
{
  prd_option_set("magazines", "1");   /* as by default: the caches' slabs as a program has them */
  prd_vmem_t *v = prd_vmem_create("qv", (void *)0x10, 0x10000, 0x10, NULL, NULL, NULL, 0x80, 0);
  char *a = prd_vmem_alloc(v, 0x20, 0);
  char *b = prd_vmem_alloc(v, 0x20, 0);   /* stays allocated */
  uint64_t bad0 = stats_of(v).bad_frees;
  int tries = 0;
  for (size_t sz = 0x90; sz <= 0x400; sz += 0x10, tries++)   /* above qcache_max */
    prd_vmem_free(v, a, sz);   /* each reported, whatever the slab's size (0x100 here) */
  CHECK_EQ(stats_of(v).bad_frees, bad0 + (uint64_t)tries);
  int overlaps = 0;
  char *p[40];
  for (int i = 0; i < 40; i++) {
    size_t sz = i % 2 ? 0x10 : 0x40;
    p[i] = prd_vmem_alloc(v, sz, 0);
    overlaps += p[i] < b + 0x20 && b < p[i] + sz;
    overlaps += p[i] < a + 0x20 && a < p[i] + sz;
  }
  CHECK_EQ(overlaps, 0);
  for (int i = 0; i < 40; i++)
    prd_vmem_free(v, p[i], i % 2 ? 0x10 : 0x40);
  prd_vmem_free(v, a, 0x20);
  prd_vmem_free(v, b, 0x20);
  CHECK_EQ(stats_of(v).bad_frees, bad0 + (uint64_t)tries);
  CHECK_EQ(prd__vmem_check(v), 0);
  prd_vmem_destroy(v);
  prd_option_set("magazines", "0");
}

/* An arena with no source and quantum caches (an ID allocator): integers freed one at a time
 * sit in the caches' magazines, here and in another thread's, and in their slabs; a request
 * larger than qcache_max that needs them drains the caches before it fails (it failed with
 * ENOMEM, or slept forever, while every integer was free). */
static _Atomic int ids_phase;

static void *ids_thread(void *arg)
{
  prd_vmem_t *ids = arg;
  void *x[300];
  for (int i = 0; i < 300; i++)
    x[i] = prd_vmem_alloc(ids, 1, PRD_VM_NOSLEEP);
  for (int i = 0; i < 300; i++)
    prd_vmem_free(ids, x[i], 1);   /* into this thread's magazines */
  atomic_store(&ids_phase, 1);
  while (atomic_load(&ids_phase) != 2)   /* alive, its magazines parked */
    usleep(1000);
  return NULL;
}

static void *ids_sleeper(void *arg)
{
  return prd_vmem_alloc(arg, 500, PRD_VM_SLEEP);
}

/* A cached size that the arena has room for but no run of a whole cache slab (several
 * objects): served by the arena itself, SLEEP and NOSLEEP alike, and freed back to it. */
static void test_qcache_room_without_slab(void)
{
  prd_option_set("magazines", "1");
  prd_vmem_t *ids = prd_vmem_create("ids4", (void *)1, 4, 1, NULL, NULL, NULL, 1, 0);
  void *p = prd_vmem_alloc(ids, 1, PRD_VM_NOSLEEP);
  CHECK(p != NULL);
  void *q = prd_vmem_alloc(ids, 1, PRD_VM_SLEEP);
  CHECK(q != NULL && q != p);
  void *r = prd_vmem_alloc(ids, 1, PRD_VM_SLEEP | PRD_NOFAIL);   /* not the cache's exit */
  CHECK(r != NULL && r != p && r != q);
  prd_vmem_free(ids, p, 1);
  prd_vmem_free(ids, q, 1);
  prd_vmem_free(ids, r, 1);
  CHECK_EQ(prd_vmem_size(ids, PRD_VMEM_FREE), 4);
  /* every id, one at a time, then none left: NOSLEEP fails at once */
  void *all[4];
  for (int i = 0; i < 4; i++)
    CHECK((all[i] = prd_vmem_alloc(ids, 1, PRD_VM_NOSLEEP)) != NULL);
  errno = 0;
  CHECK(prd_vmem_alloc(ids, 1, PRD_VM_NOSLEEP) == NULL && errno == ENOMEM);
  for (int i = 0; i < 4; i++)
    prd_vmem_free(ids, all[i], 1);
  CHECK_EQ(prd__vmem_check(ids), 0);
  prd_vmem_destroy(ids);

  /* 64 quanta, sizes 1-3 quanta cached (their slabs keep 48 quanta): 4 quanta still fit */
  prd_vmem_t *b = prd_vmem_create("b64", P(0x100000), 64 * Q, Q, NULL, NULL, NULL, 4 * Q, 0);
  for (size_t k = 1; k <= 3; k++) {
    void *x = prd_vmem_alloc(b, k * Q, PRD_VM_NOSLEEP);
    CHECK(x != NULL);
    prd_vmem_free(b, x, k * Q);
  }
  int e = errno;
  void *y = prd_vmem_alloc(b, 4 * Q, PRD_VM_NOSLEEP);
  CHECK(y != NULL);
  CHECK_EQ(errno, e);   /* the cache's failure does not show */
  void *z = prd_vmem_alloc(b, 4 * Q, PRD_VM_SLEEP);
  CHECK(z != NULL && z != y);
  prd_vmem_free(b, y, 4 * Q);
  prd_vmem_free(b, z, 4 * Q);
  CHECK_EQ(prd__vmem_check(b), 0);
  prd_vmem_destroy(b);
  prd_option_set("magazines", "0");
}

static void test_qcache_drained_before_failing(void)
{
  prd_option_set("magazines", "1");   /* the quantum caches with their CPU layer */
  prd_vmem_t *ids = prd_vmem_create("ids", (void *)1, 1000, 1, NULL, NULL, NULL, 8,
                                    PRD_VM_SLEEP);
  pthread_t t;
  atomic_store(&ids_phase, 0);
  CHECK_EQ(pthread_create(&t, NULL, ids_thread, ids), 0);
  while (atomic_load(&ids_phase) != 1)
    usleep(1000);
  static void *x[700];
  for (int i = 0; i < 700; i++) {
    x[i] = prd_vmem_alloc(ids, 1, PRD_VM_NOSLEEP);
    CHECK(x[i] != NULL);
  }
  for (int i = 0; i < 700; i++)
    prd_vmem_free(ids, x[i], 1);
  CHECK(prd_vmem_size(ids, PRD_VMEM_FREE) < 1000);   /* parked in the caches */
  void *all = prd_vmem_alloc(ids, 1000, PRD_VM_NOSLEEP);
  CHECK_EQ((uintptr_t)all, 1);
  prd_vmem_free(ids, all, 1000);
  void *half = prd_vmem_alloc(ids, 500, PRD_VM_SLEEP);   /* and no sleep for ever */
  CHECK(half != NULL);
  prd_vmem_free(ids, half, 500);
  atomic_store(&ids_phase, 2);
  pthread_join(t, NULL);
  /* a sleeper while every id is taken: the frees that follow go into magazines and wake
   * no one, so its wait drains the caches again after each slice */
  static void *y[1000];
  for (int i = 0; i < 1000; i++)
    CHECK((y[i] = prd_vmem_alloc(ids, 1, PRD_VM_NOSLEEP)) != NULL);
  pthread_t s;
  CHECK_EQ(pthread_create(&s, NULL, ids_sleeper, ids), 0);
  usleep(50000);   /* it sleeps */
  for (int i = 0; i < 1000; i++)
    prd_vmem_free(ids, y[i], 1);
  void *got = NULL;
  pthread_join(s, &got);
  CHECK(got != NULL);
  prd_vmem_free(ids, got, 500);
  CHECK_EQ(prd__vmem_check(ids), 0);
  prd_vmem_destroy(ids);
  prd_option_set("magazines", "0");
}

int main(void)
{
  prd_option_set("magazines", "0");   /* this tests the layers below the CPU layer */
  prd_option_set("abort_on_error", "0");
  RUN(test_create_destroy);
  RUN(test_alloc_free_coalesce);
  RUN(test_policies);
  RUN(test_nextfit_rotor);
  RUN(test_nextfit_rotor_carved);
  RUN(test_xalloc_constraints);
  RUN(test_add_walk_size);
  RUN(test_import_release);
  RUN(test_heap_arena);
  RUN(test_sleep_woken_by_free);
  RUN(test_sleep_import_failure_is_bounded);
  RUN(test_invalid_arguments);
  RUN(test_stats_versioned);
  RUN(test_stats_write);
  RUN(test_bad_frees_keep_arena_consistent);
  RUN(test_bad_free_reports);
  RUN(test_dirty_first);
  RUN(test_destroy_non_empty);
  RUN(test_qcache_drained_before_failing);
  RUN(test_qcache_room_without_slab);
  RUN(test_qcache_slab_not_freed_by_wrong_size);
  return prd_test_done();
}
