/* examples/urcu_deferred.c: a liburcu program moving from call_rcu(free) to
 * prd_free_deferred().
 *
 * The program keeps liburcu's read side (urcu-memb: urcu_memb_read_lock) and tells Prudence
 * to take its grace periods from liburcu (prd_rcu_urcu_memb, from libprudence-urcu).  Its blocks come from prd_malloc.  Phase 1 retires replaced blocks the
 * usual way, with urcu_memb_call_rcu and a callback that calls prd_free.  Phase 2 makes the
 * one-line change: prd_free_deferred(old).  The allocator then keeps the block until
 * liburcu's grace period has ended and reuses it at once, without a callback per block.
 *
 *   cc urcu_deferred.c $(pkg-config --cflags --libs prudence-urcu)
 */
// prd-test-needs: urcu
// prd-test-labels: no-tsan
/* no-tsan: liburcu's read side is not TSan-clean (see test_rcu_urcu) */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <urcu/urcu-memb.h>

#include <prudence.h>
#include <prudence_urcu.h>

#define LIVE 0x600dd00du
#define DEAD 0xdeadbeefu
#define SLOTS 32
#define UPDATES 100000

struct block {
  struct rcu_head b_rcu;    /* phase 1 only: liburcu's callback head */
  _Atomic unsigned b_magic;
  unsigned b_value;
};

static struct block *_Atomic slot[SLOTS];
static atomic_bool stop;
static atomic_long reads, bad_reads;

static void *reader(void *arg)
{
  (void)arg;
  urcu_memb_register_thread();
  while (!atomic_load(&stop)) {
    urcu_memb_read_lock();
    for (int i = 0; i < SLOTS; i++) {
      struct block *b = atomic_load_explicit(&slot[i], memory_order_acquire);
      if (atomic_load_explicit(&b->b_magic, memory_order_relaxed) != LIVE)
        atomic_fetch_add(&bad_reads, 1);
      atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
    }
    urcu_memb_read_unlock();
  }
  urcu_memb_unregister_thread();
  return NULL;
}

static struct block *block_new(unsigned value)
{
  struct block *b = prd_malloc(sizeof(*b));
  if (b == NULL) {
    perror("prd_malloc");
    exit(1);
  }
  atomic_store_explicit(&b->b_magic, LIVE, memory_order_relaxed);
  b->b_value = value;
  return b;
}

static void block_free_cb(struct rcu_head *head)
{
  struct block *b = caa_container_of(head, struct block, b_rcu);
  atomic_store_explicit(&b->b_magic, DEAD, memory_order_relaxed);
  prd_free(b);
}

static void run(int phase)
{
  for (unsigned u = 0; u < UPDATES; u++) {
    int i = (int)(u % SLOTS);
    struct block *old = atomic_load(&slot[i]);
    atomic_store_explicit(&slot[i], block_new(u), memory_order_release);
    if (phase == 1) {
      urcu_memb_call_rcu(&old->b_rcu, block_free_cb);   /* before */
    } else {
      prd_free_deferred(old);                            /* after: the one-line change */
    }
  }
}

int main(void)
{
  /* before any use of RCU or deferral: Prudence's grace periods are liburcu's (the option
   * PRUDENCE_OPTIONS=rcu=urcu-memb does the same once libprudence-urcu is loaded) */
  if (prd_rcu_set_source(&prd_rcu_urcu_memb) != 0) {
    fprintf(stderr, "urcu_deferred: could not select the urcu-memb source\n");
    return 1;
  }
  urcu_memb_register_thread();
  for (int i = 0; i < SLOTS; i++)
    atomic_store(&slot[i], block_new(0));
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, reader, NULL);
  run(1);
  urcu_memb_barrier();
  run(2);
  atomic_store(&stop, true);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  printf("urcu_deferred: %d updates with call_rcu(free), %d with prd_free_deferred, "
         "%ld reads, %ld bad reads, grace periods from %s\n",
         UPDATES, UPDATES, atomic_load(&reads), atomic_load(&bad_reads),
         prd_rcu_get_source()->rs_name);
  for (int i = 0; i < SLOTS; i++)
    prd_free(atomic_load(&slot[i]));
  urcu_memb_unregister_thread();
  return atomic_load(&bad_reads) == 0 ? 0 : 1;
}
