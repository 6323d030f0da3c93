/* examples/rcu_list.c: an RCU-protected list whose removed nodes go back to their cache with
 * prd_cache_free_deferred() instead of call_rcu(free) (seed 001 §4, Listing 2).
 *
 * Readers walk the list inside prd_rcu_read_lock()/unlock() and check every node they meet.
 * The writer replaces nodes (copy, update, publish, retire the old one): the old node is handed
 * to the allocator at once, which keeps it until its grace period has ended and then reuses it
 * for the next replacement.  When the allocator hands a node out again, the writer first
 * writes DEAD into it: a reader that ever sees DEAD has met a node reused before its grace
 * period ended.  The program checks that this never happens.
 *
 *   cc rcu_list.c $(pkg-config --cflags --libs prudence) -o rcu_list && ./rcu_list
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <prudence.h>

#define LIVE 0x11fe11feu
#define DEAD 0xdeadbeefu
#define NODES 64
#define UPDATES 200000
#define READERS 2

struct node {
  _Atomic unsigned n_magic;
  unsigned n_key, n_version;
  struct node *_Atomic n_next;
};

static prd_cache_t *node_cache;
static struct node *_Atomic head;
static atomic_bool stop;
static atomic_long reads, bad_reads;

static void *reader(void *arg)
{
  (void)arg;
  while (!atomic_load(&stop)) {
    prd_rcu_read_lock();
    for (struct node *n = atomic_load_explicit(&head, memory_order_acquire); n != NULL;
         n = atomic_load_explicit(&n->n_next, memory_order_acquire)) {
      if (atomic_load_explicit(&n->n_magic, memory_order_relaxed) != LIVE)
        atomic_fetch_add(&bad_reads, 1);
      atomic_fetch_add_explicit(&reads, 1, memory_order_relaxed);
    }
    prd_rcu_read_unlock();
  }
  return NULL;
}

static struct node *node_new(unsigned key, unsigned version, struct node *next)
{
  struct node *n = prd_cache_alloc(node_cache, PRD_SLEEP);
  if (n == NULL) {
    perror("prd_cache_alloc");
    exit(1);
  }
  /* the node may be one that readers saw before: it must be past its grace period, so
   * marking it dead first cannot be seen by any reader */
  atomic_store_explicit(&n->n_magic, DEAD, memory_order_relaxed);
  n->n_key = key;
  n->n_version = version;
  atomic_store_explicit(&n->n_next, next, memory_order_relaxed);
  atomic_store_explicit(&n->n_magic, LIVE, memory_order_relaxed);
  return n;
}

int main(void)
{
  node_cache = prd_cache_create("rcu_list.node", sizeof(struct node), 0, NULL, NULL, NULL, NULL,
                                NULL, 0);
  if (node_cache == NULL)
    return 1;
  for (unsigned k = NODES; k-- > 0;)
    atomic_store(&head, node_new(k, 0, atomic_load(&head)));

  pthread_t t[READERS];
  for (int i = 0; i < READERS; i++)
    pthread_create(&t[i], NULL, reader, NULL);

  /* the writer: replace node number (u % NODES) with a new version, retire the old one */
  for (unsigned u = 0; u < UPDATES; u++) {
    unsigned key = u % NODES;
    struct node *_Atomic *link = &head;
    struct node *old = atomic_load(link);
    while (old->n_key != key) {
      link = &old->n_next;
      old = atomic_load(link);
    }
    struct node *copy = node_new(key, old->n_version + 1, atomic_load(&old->n_next));
    atomic_store_explicit(link, copy, memory_order_release);   /* publish */
    prd_cache_free_deferred(node_cache, old);   /* was: call_rcu(&old->rcu, free_node) */
  }
  atomic_store(&stop, true);
  for (int i = 0; i < READERS; i++)
    pthread_join(t[i], NULL);

  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  prd_cache_stats(node_cache, &st);
  printf("rcu_list: %u updates, %ld node reads, %ld bad reads\n", UPDATES, atomic_load(&reads),
         atomic_load(&bad_reads));
  printf("rcu_list: %llu deferred frees, %llu reused after their grace period, %llu slabs at "
         "peak for %d live nodes\n",
         (unsigned long long)st.deferred_frees, (unsigned long long)st.latent_merges,
         (unsigned long long)st.slabs_peak, NODES);
  return atomic_load(&bad_reads) == 0 && st.deferred_frees == UPDATES ? 0 : 1;
}
