/*
 * stress_malloc_deferred.c: prd_free_deferred with readers checking.  Writer threads replace
 * the blocks of a shared table (random sizes, class and big blocks) and hand the old block to
 * prd_free_deferred; reader threads, inside read-side sections, follow the table's pointers
 * and check that every block they reach is intact (its stamp matches its size) until their
 * section ends.  A block reused before its grace period ended would be overwritten by a
 * writer's new stamp while a reader still holds it: the check fails.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"

// prd-test-labels: stress
// prd-test-timeout: 300

#if defined(PRD_TSAN) || defined(PRD_ASAN)
#define WRITER_OPS 20000
#else
#define WRITER_OPS 200000
#endif
#define WRITERS 2
#define READERS 2
#define SLOTS 256

typedef struct {
  uint32_t o_size;
  uint32_t o_stamp;   /* o_size * 2654435761: what a reader checks */
  uint32_t o_tail[];  /* o_tail[k] = o_stamp + k for the words that fit */
} obj_t;

static _Atomic(obj_t *) table[SLOTS];
static _Atomic int writers_left = WRITERS;
static _Atomic long bad, reads;

static obj_t *make(prd_rng_t *r)
{
  uint32_t size = (uint32_t)(prd_rng_below(r, 20) == 0 ? 20000 + prd_rng_below(r, 60000)
                                                         : 16 + prd_rng_below(r, 2000));
  obj_t *o = prd_malloc(size);
  o->o_size = size;
  o->o_stamp = size * 2654435761u;
  uint32_t words = (size - (uint32_t)sizeof(obj_t)) / 4;
  for (uint32_t k = 0; k < words; k += 7)
    o->o_tail[k] = o->o_stamp + k;
  return o;
}

static int check(const obj_t *o)
{
  if (o->o_stamp != o->o_size * 2654435761u)
    return 0;
  uint32_t words = (o->o_size - (uint32_t)sizeof(obj_t)) / 4;
  for (uint32_t k = 0; k < words; k += 7)
    if (o->o_tail[k] != o->o_stamp + k)
      return 0;
  return 1;
}

static void *writer(void *arg)
{
  prd_rng_t r = { 0xabcdef12345ull * ((uintptr_t)arg + 1) };
  for (int i = 0; i < WRITER_OPS; i++) {
    obj_t *o = make(&r);
    /* release: the stamp before the pointer (pairs with the readers' acquire) */
    obj_t *old = atomic_exchange_explicit(&table[prd_rng_below(&r, SLOTS)], o,
                                          memory_order_acq_rel);
    if (old != NULL)
      prd_free_deferred(old);
  }
  atomic_fetch_sub(&writers_left, 1);
  return NULL;
}

static void *reader(void *arg)
{
  prd_rng_t r = { 0x5555aaaa1234ull * ((uintptr_t)arg + 1) };
  while (atomic_load_explicit(&writers_left, memory_order_acquire) > 0) {
    prd_rcu_read_lock();
    for (int k = 0; k < 16; k++) {
      obj_t *o = atomic_load_explicit(&table[prd_rng_below(&r, SLOTS)], memory_order_acquire);
      if (o != NULL && !check(o))
        atomic_fetch_add(&bad, 1);
    }
    prd_rcu_read_unlock();
    atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
  }
  return NULL;
}

static void test_deferred_readers(void)
{
  pthread_t w[WRITERS], rd[READERS];
  for (uintptr_t i = 0; i < READERS; i++)
    CHECK_EQ(pthread_create(&rd[i], NULL, reader, (void *)i), 0);
  for (uintptr_t i = 0; i < WRITERS; i++)
    CHECK_EQ(pthread_create(&w[i], NULL, writer, (void *)i), 0);
  for (int i = 0; i < WRITERS; i++)
    pthread_join(w[i], NULL);
  for (int i = 0; i < READERS; i++)
    pthread_join(rd[i], NULL);
  for (int i = 0; i < SLOTS; i++) {
    obj_t *o = atomic_load(&table[i]);
    if (o != NULL) {
      CHECK(check(o));
      prd_free(o);
    }
  }
  prd_rcu_barrier();
  printf("# %ld read sections\n", atomic_load(&reads));
  CHECK_EQ(atomic_load(&bad), 0);
  CHECK_EQ(prd__error_count(), 0);
}

int main(void)
{
  RUN(test_deferred_readers);
  return prd_test_done();
}
