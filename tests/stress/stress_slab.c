/* Multi-threaded stress of the slab layer: threads allocate and free on shared caches of every
 * layout, hand objects to each other through a shared exchange (so frees come from other
 * threads), while one thread reaps every cache over and over and another creates and destroys
 * caches; at the end every invariant and count must hold.  Runs under TSan in `make test`. */
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"

#if defined(PRD_TSAN) || defined(PRD_ASAN)
#define ITERS 100000
#else
#define ITERS 1000000
#endif
#define WORKERS 4
#define SLOTS 64
#define XSLOTS 256

static prd_cache_t *caches[3];
static const size_t sizes[3] = { 48, 1500, 64 };
static _Atomic(void *) exchange[XSLOTS];
static atomic_int stop;
static atomic_long ctors, dtors;

struct obj {
  uint32_t o_magic;    /* constructed state */
  uint32_t o_cache;    /* which cache it belongs to */
  uint64_t o_owner;    /* written by the thread that holds it */
};
#define OBJ_MAGIC 0x5eedf00du

static int obj_ctor(void *buf, void *priv, int flags)
{
  (void)flags;
  struct obj *o = buf;
  o->o_magic = OBJ_MAGIC;
  o->o_cache = (uint32_t)(uintptr_t)priv;
  atomic_fetch_add_explicit(&ctors, 1, memory_order_relaxed);
  return 0;
}

static void obj_dtor(void *buf, void *priv)
{
  struct obj *o = buf;
  if (o->o_magic != OBJ_MAGIC || o->o_cache != (uint32_t)(uintptr_t)priv)
    abort();
  atomic_fetch_add_explicit(&dtors, 1, memory_order_relaxed);
}

static void obj_free(struct obj *o)
{
  if (o->o_magic != OBJ_MAGIC)
    abort();
  prd_cache_free(caches[o->o_cache], o);
}

static void *worker(void *arg)
{
  uint64_t id = (uint64_t)(uintptr_t)arg;
  prd_rng_t rng = { 0x9e3779b97f4a7c15ull * (id + 1) };
  struct obj *mine[SLOTS] = { 0 };
  for (int i = 0; i < ITERS; i++) {
    size_t k = (size_t)prd_rng_below(&rng, SLOTS);
    uint64_t r = prd_rng_below(&rng, 10);
    if (mine[k] != NULL && mine[k]->o_owner != id)
      abort();   /* somebody else wrote into an object we hold */
    if (r < 2 && mine[k] != NULL) {
      /* hand it over: the exchange's acq_rel pairs with the taker's, so the taker sees our
       * writes to the object, and we see the previous holder's writes to what we take */
      struct obj *got = atomic_exchange_explicit(&exchange[prd_rng_below(&rng, XSLOTS)],
                                                 mine[k], memory_order_acq_rel);
      mine[k] = got;
      if (got != NULL)
        got->o_owner = id;
    } else if (mine[k] != NULL) {
      obj_free(mine[k]);
      mine[k] = NULL;
    } else {
      uint32_t c = (uint32_t)prd_rng_below(&rng, 3);
      struct obj *o = prd_cache_alloc(caches[c], PRD_SLEEP);
      if (o == NULL || o->o_magic != OBJ_MAGIC || o->o_cache != c)
        abort();
      o->o_owner = id;
      mine[k] = o;
    }
  }
  for (size_t k = 0; k < SLOTS; k++)
    if (mine[k] != NULL)
      obj_free(mine[k]);
  return NULL;
}

static void *reaper(void *arg)
{
  (void)arg;
  while (!atomic_load_explicit(&stop, memory_order_acquire)) {
    prd_reap();
    for (int c = 0; c < 3; c++)
      prd__cache_reap_all(caches[c]);
    sched_yield();
  }
  return NULL;
}

static void *churner(void *arg)
{
  (void)arg;
  int n = 0;
  while (!atomic_load_explicit(&stop, memory_order_acquire)) {
    prd_cache_t *cp = prd_cache_create("churn", 32 + (size_t)(n % 7) * 100, 0, NULL, NULL, NULL,
                                       NULL, NULL, 0);
    void *p[16];
    for (int i = 0; i < 16; i++)
      p[i] = prd_cache_alloc(cp, 0);
    for (int i = 0; i < 16; i++)
      prd_cache_free(cp, p[i]);
    prd_cache_destroy(cp);
    n++;
  }
  return NULL;
}

static void test_stress(void)
{
  caches[0] = prd_cache_create("stress_small", sizes[0], 0, obj_ctor, obj_dtor, NULL,
                               (void *)(uintptr_t)0, NULL, 0);
  caches[1] = prd_cache_create("stress_large", sizes[1], 0, obj_ctor, obj_dtor, NULL,
                               (void *)(uintptr_t)1, NULL, 0);
  caches[2] = prd_cache_create("stress_debug", sizes[2], 0, obj_ctor, obj_dtor, NULL,
                               (void *)(uintptr_t)2, NULL,
                               PRD_CACHE_VERIFY | PRD_CACHE_REDZONE | PRD_CACHE_AUDIT);
  pthread_t t[WORKERS], rt, ct;
  for (uintptr_t i = 0; i < WORKERS; i++)
    pthread_create(&t[i], NULL, worker, (void *)i);
  pthread_create(&rt, NULL, reaper, NULL);
  pthread_create(&ct, NULL, churner, NULL);
  for (int i = 0; i < WORKERS; i++)
    pthread_join(t[i], NULL);
  atomic_store_explicit(&stop, 1, memory_order_release);
  pthread_join(rt, NULL);
  pthread_join(ct, NULL);
  for (size_t s = 0; s < XSLOTS; s++) {
    struct obj *o = atomic_exchange(&exchange[s], NULL);
    if (o != NULL)
      obj_free(o);
  }
  for (int c = 0; c < 3; c++) {
    CHECK_EQ(prd__cache_check(caches[c]), 0);
    prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
    prd_cache_stats(caches[c], &st);
    CHECK_EQ(st.bufs_inuse, 0);
    CHECK_EQ(st.allocs, st.frees);
    CHECK(st.allocs > 0);
    CHECK(st.slab_creates >= st.slab_destroys);
  }
  uint64_t errs = prd__error_count();
  for (int c = 0; c < 3; c++)
    prd_cache_destroy(caches[c]);
  CHECK_EQ(prd__error_count(), errs);
  CHECK_EQ(atomic_load(&ctors), atomic_load(&dtors));   /* every constructed object destructed */
}

int main(void)
{
  prd_option_set("magazines", "0");   /* this tests the layers below the CPU layer */
  RUN(test_stress);
  return prd_test_done();
}
