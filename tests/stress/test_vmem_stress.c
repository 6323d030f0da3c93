/* Multi-threaded stress test of vmem (src/vmem.c); it runs under TSan in make test.
 *
 * Threads share one arena of integers ("shared", every policy, alloc and xalloc), one child
 * arena that imports from it and gives spans back ("child"), and the heap arena (real memory:
 * each thread writes its pattern into what it gets and checks it before freeing).  Ownership of
 * every quantum of "shared" is claimed with a compare-and-swap on an owner table, so two
 * threads handed the same integers are caught at once.  A thread that holds nothing may
 * allocate with PRD_VM_SLEEP (the others free everything they hold in bounded time, so it is
 * woken); a thread that holds something uses PRD_VM_NOSLEEP, so no one waits on a waiter.
 * At the end every arena must be empty, consistent (prd__vmem_check) and its statistics must
 * balance.
 */
// prd-test-labels: stress
// prd-test-timeout: 300
#include <pthread.h>

#include "internal.h"
#include "prd_test.h"

#define NTHREADS 4
#define Q        8u
#define NQ       (1u << 12)   /* small enough that threads run it dry and sleep */
#define BASE     ((uintptr_t)1 << 20)
#define HOLD     32

#if defined(PRD_TSAN) || defined(PRD_ASAN)
#define ITERS 20000   /* the sanitizers make each operation much slower */
#else
#define ITERS 200000
#endif

static prd_vmem_t *shared, *child;
static _Atomic int owner[NQ];
static _Atomic long overlaps;

static void claim(uintptr_t addr, size_t size, int me)
{
  for (size_t i = (addr - BASE) / Q; i < (addr - BASE + size) / Q; i++) {
    int expect = 0;
    if (!atomic_compare_exchange_strong(&owner[i], &expect, me))
      atomic_fetch_add(&overlaps, 1);
  }
}

static void unclaim(uintptr_t addr, size_t size, int me)
{
  for (size_t i = (addr - BASE) / Q; i < (addr - BASE + size) / Q; i++) {
    int expect = me;
    if (!atomic_compare_exchange_strong(&owner[i], &expect, 0))
      atomic_fetch_add(&overlaps, 1);
  }
}

struct held { prd_vmem_t *vmp; uintptr_t addr; size_t size; bool x; };

static void release(struct held *h, int me)
{
  if (h->vmp == shared)
    unclaim(h->addr, h->size, me);
  if (h->vmp == prd_heap_arena()) {
    unsigned char *p = (unsigned char *)h->addr;
    if (p[0] != (unsigned char)me || p[h->size - 1] != (unsigned char)me)
      atomic_fetch_add(&overlaps, 1);
  }
  if (h->x)
    prd_vmem_xfree(h->vmp, (void *)h->addr, h->size);
  else
    prd_vmem_free(h->vmp, (void *)h->addr, h->size);
}

static void *worker(void *arg)
{
  int me = (int)(intptr_t)arg;
  prd_rng_t rng = { 0x9e3779b97f4a7c15ull * (uint64_t)me + 1 };
  static const int policies[4] = { PRD_VM_INSTANTFIT, PRD_VM_BESTFIT, PRD_VM_FIRSTFIT,
                                   PRD_VM_NEXTFIT };
  struct held hold[HOLD];
  int n = 0;
  size_t pg = prd__os_page_size();
  for (long it = 0; it < ITERS; it++) {
    uint64_t op = prd_rng_below(&rng, 100);
    if (n == HOLD || (n > 0 && op < 45)) {
      int k = (int)prd_rng_below(&rng, (uint64_t)n);
      release(&hold[k], me);
      hold[k] = hold[--n];
      continue;
    }
    struct held h = { shared, 0, 0, false };
    int flags = (n == 0 ? PRD_VM_SLEEP : PRD_VM_NOSLEEP) | policies[prd_rng_below(&rng, 4)];
    void *p;
    if (op < 75) {
      h.size = Q * (1 + prd_rng_below(&rng, 64));
      h.x = prd_rng_below(&rng, 4) == 0;
      p = h.x ? prd_vmem_xalloc(shared, h.size, Q << prd_rng_below(&rng, 5), 0, 0, NULL, NULL,
                                flags)
              : prd_vmem_alloc(shared, h.size, flags);
    } else if (op < 95) {
      h.vmp = child;
      h.size = Q * (1 + prd_rng_below(&rng, 16));
      p = prd_vmem_alloc(child, h.size, flags | PRD_VM_NOSLEEP);
    } else {
      h.vmp = prd_heap_arena();
      h.size = pg * (1 + prd_rng_below(&rng, 4));
      p = prd_vmem_alloc(h.vmp, h.size, flags);
    }
    if (p == NULL) {
      if (errno != ENOMEM)
        atomic_fetch_add(&overlaps, 1);
      continue;
    }
    h.addr = (uintptr_t)p;
    if (h.vmp == shared)
      claim(h.addr, h.size, me);
    if (h.vmp == prd_heap_arena()) {
      ((unsigned char *)p)[0] = (unsigned char)me;
      ((unsigned char *)p)[h.size - 1] = (unsigned char)me;
    }
    hold[n++] = h;
  }
  while (n > 0)
    release(&hold[--n], me);
  return NULL;
}

static void test_threads(void)
{
  shared = prd_vmem_create("shared", (void *)BASE, (size_t)NQ * Q, Q, NULL, NULL, NULL, 0, 0);
  child = prd_vmem_create("child", NULL, 0, Q, prd_vmem_alloc, prd_vmem_free, shared, 0, 0);
  CHECK(shared != NULL && child != NULL);
  CHECK(prd_heap_arena() != NULL);
  pthread_t t[NTHREADS];
  for (int i = 0; i < NTHREADS; i++)
    pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(i + 1));
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(t[i], NULL);
  CHECK_EQ(atomic_load(&overlaps), 0);
  prd_vmem_stats_t c, s;
  c.size = s.size = sizeof(c);
  prd_vmem_stats(child, &c);
  prd_vmem_stats(shared, &s);
  printf("# shared: %llu allocs, %llu failures, %llu waits; child: %llu imports, %llu releases\n",
         (unsigned long long)s.allocs, (unsigned long long)s.failures,
         (unsigned long long)s.waits, (unsigned long long)c.imports,
         (unsigned long long)c.releases);
  fflush(stdout);
  prd__vmem_stats_write(shared, 1, false);
  prd__vmem_stats_write(child, 1, false);
  CHECK_EQ(c.allocs, c.frees);
  CHECK_EQ(c.imports, c.releases);
  CHECK_EQ(c.bytes_total, 0);
  CHECK_EQ(s.allocs, s.frees);
  CHECK_EQ(s.bytes_alloc, 0);
  CHECK_EQ(s.segs_free, 1);
  CHECK(c.imports > 0);
  CHECK_EQ(prd__vmem_check(child), 0);
  CHECK_EQ(prd__vmem_check(shared), 0);
  CHECK_EQ(prd__vmem_check(prd_heap_arena()), 0);
  CHECK_EQ(prd_vmem_size(prd_heap_arena(), PRD_VMEM_ALLOC), 0);
  prd_vmem_destroy(child);
  prd_vmem_destroy(shared);
}

/* Six threads share an arena with room for three chunks; each takes one with PRD_VM_SLEEP,
 * checks that it owns it alone, and frees it.  Every allocation must succeed (a thread holds at
 * most one chunk, so a sleeper is always woken by someone's free). */
#define SLEEPERS 6
#define CHUNK    (64 * Q)
static prd_vmem_t *tight;
static _Atomic int chunk_owner[3];

static void *sleeper(void *arg)
{
  int me = (int)(intptr_t)arg;
  for (long it = 0; it < ITERS / 10; it++) {
    void *p = prd_vmem_alloc(tight, CHUNK, PRD_VM_SLEEP | (it % 2 ? PRD_VM_BESTFIT : 0));
    if (p == NULL) {
      atomic_fetch_add(&overlaps, 1);
      continue;
    }
    size_t k = ((uintptr_t)p - BASE) / CHUNK;
    int expect = 0;
    if (k >= 3 || !atomic_compare_exchange_strong(&chunk_owner[k], &expect, me))
      atomic_fetch_add(&overlaps, 1);
    expect = me;
    if (k < 3 && !atomic_compare_exchange_strong(&chunk_owner[k], &expect, 0))
      atomic_fetch_add(&overlaps, 1);
    prd_vmem_free(tight, p, CHUNK);
  }
  return NULL;
}

static void test_sleepers(void)
{
  tight = prd_vmem_create("tight", (void *)BASE, 3 * CHUNK, Q, NULL, NULL, NULL, 0, 0);
  atomic_store(&overlaps, 0);
  pthread_t t[SLEEPERS];
  for (int i = 0; i < SLEEPERS; i++)
    pthread_create(&t[i], NULL, sleeper, (void *)(intptr_t)(i + 1));
  for (int i = 0; i < SLEEPERS; i++)
    pthread_join(t[i], NULL);
  CHECK_EQ(atomic_load(&overlaps), 0);
  prd_vmem_stats_t s;
  s.size = sizeof(s);
  prd_vmem_stats(tight, &s);
  printf("# tight: %llu allocs, %llu waits\n", (unsigned long long)s.allocs,
         (unsigned long long)s.waits);
  CHECK_EQ(s.allocs, (uint64_t)SLEEPERS * (ITERS / 10));
  CHECK_EQ(s.frees, s.allocs);
  CHECK_EQ(s.failures, 0);
  CHECK_EQ(prd__vmem_check(tight), 0);
  prd_vmem_destroy(tight);
}

int main(void)
{
  prd_option_set("magazines", "0");   /* this tests the layers below the CPU layer */
  RUN(test_threads);
  RUN(test_sleepers);
  return prd_test_done();
}
