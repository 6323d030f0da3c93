/*
 * stress_malloc.c: many threads allocate random sizes from every tier, free their own blocks
 * and each other's (blocks are handed over through a shared array of slots), and run realloc
 * chains; every block carries its owner's stamp, checked before it is freed or grown.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"

// prd-test-labels: stress
// prd-test-timeout: 300

#if defined(PRD_TSAN) || defined(PRD_ASAN)
#define THREADS 4
#define OPS 20000
#else
#define THREADS 8
#define OPS 200000
#endif
#define XSLOTS 1024
#define LOCAL 64

typedef struct {
  uint32_t h_size;   /* bytes stamped after the header */
  uint32_t h_seed;
} hdr_t;

static _Atomic(hdr_t *) xchg[XSLOTS];
static _Atomic int bad;
static uint64_t seed0;

static hdr_t *make(prd_rng_t *r, size_t n)
{
  if (n < sizeof(hdr_t))
    n = sizeof(hdr_t);
  hdr_t *h = prd_malloc(n);
  if (h == NULL)
    return NULL;
  h->h_size = (uint32_t)(n - sizeof(hdr_t));
  h->h_seed = (uint32_t)prd_rng_next(r);
  unsigned char *d = (unsigned char *)(h + 1);
  for (uint32_t i = 0; i < h->h_size; i += 61)
    d[i] = (unsigned char)(h->h_seed + i);
  return h;
}

static int ok(const hdr_t *h)
{
  const unsigned char *d = (const unsigned char *)(h + 1);
  for (uint32_t i = 0; i < h->h_size; i += 61)
    if (d[i] != (unsigned char)(h->h_seed + i))
      return 0;
  return 1;
}

static size_t rsize(prd_rng_t *r)
{
  uint64_t k = prd_rng_below(r, 100);
  if (k < 80)
    return 8 + prd_rng_below(r, 1024);
  if (k < 97)
    return 1024 + prd_rng_below(r, 16384);
  return 16384 + prd_rng_below(r, 300000);
}

static void *worker(void *arg)
{
  prd_rng_t r = { seed0 ^ (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull };
  hdr_t *local[LOCAL] = { 0 };
  for (int op = 0; op < OPS; op++) {
    unsigned k = (unsigned)prd_rng_below(&r, LOCAL);
    uint64_t what = prd_rng_below(&r, 10);
    if (local[k] == NULL) {
      local[k] = make(&r, rsize(&r));
    } else if (what < 3) {
      /* hand it to whoever takes the slot; free what was there (another thread's) */
      hdr_t *old = atomic_exchange_explicit(&xchg[prd_rng_below(&r, XSLOTS)], local[k],
                                            memory_order_acq_rel);
      local[k] = NULL;
      if (old != NULL) {
        if (!ok(old))
          atomic_fetch_add(&bad, 1);
        prd_free(old);
      }
    } else if (what < 6) {
      /* a realloc chain step: grow or shrink, the stamped prefix must survive */
      hdr_t *h = local[k];
      if (!ok(h))
        atomic_fetch_add(&bad, 1);
      size_t n = rsize(&r);
      uint32_t keep = (uint32_t)PRD_MIN((size_t)h->h_size, n > sizeof(hdr_t) ? n - sizeof(hdr_t) : 0);
      hdr_t *q = prd_realloc(h, n < sizeof(hdr_t) ? sizeof(hdr_t) : n);
      if (q == NULL) {
        atomic_fetch_add(&bad, 1);
        continue;
      }
      q->h_size = keep;
      if (!ok(q))
        atomic_fetch_add(&bad, 1);
      local[k] = q;
    } else {
      if (!ok(local[k]))
        atomic_fetch_add(&bad, 1);
      prd_free(local[k]);
      local[k] = NULL;
    }
  }
  for (int k = 0; k < LOCAL; k++)
    prd_free(local[k]);
  return NULL;
}

static void test_threads(void)
{
  prd_rng_t r = prd_rng_seeded("stress_malloc");
  seed0 = prd_rng_next(&r);
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++)
    CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  for (int i = 0; i < XSLOTS; i++) {
    hdr_t *h = atomic_load(&xchg[i]);
    if (h != NULL) {
      CHECK(ok(h));
      prd_free(h);
    }
  }
  CHECK_EQ(atomic_load(&bad), 0);
  CHECK_EQ(prd__error_count(), 0);
  for (size_t sz = 8; sz <= 16384; sz *= 2)
    CHECK_EQ(prd__cache_check(prd__malloc_class_cache(sz)), 0);
}

int main(void)
{
  RUN(test_threads);
  return prd_test_done();
}
