/* stress_rcu: many threads mixing every RCU operation at once (built-in source), for TSan and
 * ASan: nested read sections over a shared pointer whose objects writers replace and retire
 * through call_rcu, synchronize or wait_state; threads that come and go (registration and
 * exit); rcu_barrier from several threads.  Readers check each object's magic: a retired
 * object is poisoned before it is freed, so a grace period that ends early is seen (and ASan
 * sees a use after free).
 * prd-test-labels: stress
 * prd-test-timeout: 300 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"

#define MAGIC 0x5eed5eedu
#define POISON 0xdeadbeefu

struct obj {
  struct prd_rcu_head o_head;
  _Atomic unsigned o_magic;
  unsigned o_value;
};

#define NSLOTS 8
static struct obj *_Atomic slots[NSLOTS];
static atomic_int stop;
static atomic_long bad, reads, retired;

#if defined(PRD_TSAN)
#define ITERS 3000
#elif defined(PRD_ASAN)
#define ITERS 4000
#else
#define ITERS 20000
#endif

static void obj_free(struct prd_rcu_head *h)
{
  struct obj *o = (struct obj *)h;
  atomic_store_explicit(&o->o_magic, POISON, memory_order_relaxed);
  free(o);
  atomic_fetch_add(&retired, 1);
}

static struct obj *obj_new(unsigned v)
{
  struct obj *o = malloc(sizeof(*o));
  atomic_store_explicit(&o->o_magic, MAGIC, memory_order_relaxed);
  o->o_value = v;
  return o;
}

static void *reader(void *arg)
{
  prd_rng_t r = { (uint64_t)(intptr_t)arg * 0x9e3779b97f4a7c15ull + 1 };
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    prd_rcu_read_lock();
    int nest = (int)prd_rng_below(&r, 3);
    for (int i = 0; i < nest; i++)
      prd_rcu_read_lock();
    for (int i = 0; i < NSLOTS; i++) {
      struct obj *o = atomic_load_explicit(&slots[i], memory_order_acquire);
      if (atomic_load_explicit(&o->o_magic, memory_order_relaxed) != MAGIC || o->o_value > ITERS * 8u)
        atomic_fetch_add(&bad, 1);
    }
    for (int i = 0; i < nest; i++)
      prd_rcu_read_unlock();
    prd_rcu_read_unlock();
    atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
    if (prd_rng_below(&r, 64) == 0)
      prd_rcu_quiescent_state();
  }
  return NULL;
}

static void *writer(void *arg)
{
  int id = (int)(intptr_t)arg;
  prd_rng_t r = { (uint64_t)id * 0x2545f4914f6cdd1dull + 7 };
  for (int it = 0; it < ITERS; it++) {
    int slot = (int)prd_rng_below(&r, NSLOTS);
    struct obj *old = atomic_exchange(&slots[slot], obj_new((unsigned)it));
    switch (prd_rng_below(&r, 16)) {
    case 0:
      prd_synchronize_rcu();
      obj_free(&old->o_head);
      break;
    case 1: {
      prd_gp_t s = prd_rcu_get_state();
      prd_rcu_request_gp(s);
      prd_rcu_wait_state(s);
      obj_free(&old->o_head);
      break;
    }
    case 2:
      if (id == 0 && prd_rng_below(&r, 16) == 0)
        prd_rcu_barrier();
      prd_call_rcu(&old->o_head, obj_free);
      break;
    default:
      prd_call_rcu(&old->o_head, obj_free);
      break;
    }
  }
  return NULL;
}

/* Threads that read once and exit: registration and unregistration under load. */
static void *short_lived(void *arg)
{
  (void)arg;
  prd_rcu_read_lock();
  struct obj *o = atomic_load_explicit(&slots[0], memory_order_acquire);
  if (atomic_load_explicit(&o->o_magic, memory_order_relaxed) != MAGIC)
    atomic_fetch_add(&bad, 1);
  prd_rcu_read_unlock();
  if ((intptr_t)arg & 1)
    prd_call_rcu(&obj_new(0)->o_head, obj_free);
  return NULL;
}

static void *spawner(void *arg)
{
  (void)arg;
  for (intptr_t i = 0; !atomic_load(&stop); i++) {
    pthread_t t;
    pthread_create(&t, NULL, short_lived, (void *)i);
    pthread_join(t, NULL);
  }
  return NULL;
}

static void test_stress(void)
{
  enum { NR = 3, NW = 3 };
  pthread_t rd[NR], wr[NW], sp;
  for (int i = 0; i < NSLOTS; i++)
    atomic_store(&slots[i], obj_new(0));
  for (int i = 0; i < NR; i++)
    pthread_create(&rd[i], NULL, reader, (void *)(intptr_t)i);
  pthread_create(&sp, NULL, spawner, NULL);
  for (int i = 0; i < NW; i++)
    pthread_create(&wr[i], NULL, writer, (void *)(intptr_t)i);
  for (int i = 0; i < NW; i++)
    pthread_join(wr[i], NULL);
  atomic_store(&stop, 1);
  for (int i = 0; i < NR; i++)
    pthread_join(rd[i], NULL);
  pthread_join(sp, NULL);
  prd_rcu_barrier();
  for (int i = 0; i < NSLOTS; i++)
    obj_free(&atomic_load(&slots[i])->o_head);
  printf("# reads=%ld retired=%ld bad=%ld\n", atomic_load(&reads), atomic_load(&retired),
         atomic_load(&bad));
  CHECK_EQ(atomic_load(&bad), 0);
  CHECK(atomic_load(&retired) >= NW * ITERS);
}

int main(void)
{
  RUN(test_stress);
  return prd_test_done();
}
