/* Prudence with constructed objects: refills construct fresh buffers in bulk (slab.c
 * prd__slab_alloc_bulk), and a constructor may itself allocate from its own cache while the
 * thread's loaded magazine is being refilled (defer.c's refill calls the slab layer
 * with tc_lock dropped).  Every live object must be
 * distinct and constructed, with the magazine layer and with Prudence deferrals alike. */
#include "internal.h"
#include "prd_test.h"

#define NOBJ 3000
#define OBJ_SIZE 64
#define MAGIC 0x5a

static prd_cache_t *cp;
static _Thread_local int ctor_depth;
static _Atomic long ctor_calls, nested_allocs;
static bool nest;

static int ctor(void *buf, void *priv, int flags)
{
  (void)priv;
  memset(buf, MAGIC, OBJ_SIZE);
  atomic_fetch_add(&ctor_calls, 1);
  if (nest && ctor_depth == 0) {   /* a constructor that uses its own cache, once */
    ctor_depth++;
    void *x = prd_cache_alloc(cp, flags);
    if (x != NULL) {
      atomic_fetch_add(&nested_allocs, 1);
      prd_cache_free(cp, x);
    }
    ctor_depth--;
  }
  return 0;
}

static int cmp_ptr(const void *a, const void *b)
{
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return (x > y) - (x < y);
}

/* Allocates NOBJ objects per round, checks they are distinct and constructed, then frees or
 * defers all of them; returns the number of rounds that saw a duplicate or a bad object. */
static int rounds(bool deferred, int nrounds)
{
  static void *v[NOBJ], *w[NOBJ];
  int bad = 0;
  for (int r = 0; r < nrounds; r++) {
    for (int i = 0; i < NOBJ; i++) {
      v[i] = prd_cache_alloc(cp, PRD_SLEEP);
      CHECK(v[i] != NULL);
      if (v[i] != NULL && ((unsigned char *)v[i])[0] != MAGIC)
        bad++;
    }
    memcpy(w, v, sizeof(w));
    qsort(w, NOBJ, sizeof(void *), cmp_ptr);
    for (int i = 1; i < NOBJ; i++)
      if (w[i] == w[i - 1]) {
        fprintf(stderr, "  round %d: %p handed out twice\n", r, w[i]);
        bad++;
        break;
      }
    for (int i = 0; i < NOBJ; i++) {
      if (deferred)
        prd_cache_free_deferred(cp, v[i]);
      else
        prd_cache_free(cp, v[i]);
    }
  }
  return bad;
}

static void run_mode(bool deferred, bool nested)
{
  nest = nested;
  atomic_store(&ctor_calls, 0);
  atomic_store(&nested_allocs, 0);
  cp = prd_cache_create(deferred ? "ctor.deferred" : "ctor.mag", OBJ_SIZE, 8, ctor, NULL, NULL,
                        NULL, NULL, 0);
  CHECK(cp != NULL);
  if (cp == NULL)
    return;
  CHECK_EQ(rounds(deferred, 12), 0);
  CHECK(atomic_load(&ctor_calls) >= NOBJ);
  if (nested)
    CHECK(atomic_load(&nested_allocs) > 0);
  prd_cache_destroy(cp);
}

static void test_magazines_constructed(void) { run_mode(false, false); }
static void test_deferred_constructed(void) { run_mode(true, false); }
static void test_magazines_ctor_allocates_own_cache(void) { run_mode(false, true); }
static void test_deferred_ctor_allocates_own_cache(void) { run_mode(true, true); }

int main(void)
{
  prd_option_set("abort_on_error", "0");
  RUN(test_magazines_constructed);
  RUN(test_deferred_constructed);
  RUN(test_magazines_ctor_allocates_own_cache);
  RUN(test_deferred_ctor_allocates_own_cache);
  return prd_test_done();
}
