/* urcu_deferred.c: liburcu memb's half of prd-bench deferred/endurance (bench/deferred.c).
 * The `urcu` mode: malloc + liburcu memb's own call_rcu(free), the reclaimer users pick today
 * (ANCHORS.md); the rcu_head lives after the object in the same malloc'd block, as a
 * structure embeds it.  With --source urcu-memb: the `batch` mode's synchronize_rcu, the
 * library's source (libprudence-urcu's prd_rcu_urcu_memb) and the readers' loop. */
#define _LGPL_SOURCE
#include <urcu/urcu-memb.h>

#include <stdlib.h>

#include "deferred.h"
#include "prudence_urcu.h"

struct urcu_obj_head {
  struct rcu_head uh_head;
  size_t uh_off;
};

static void urcu_free_cb(struct rcu_head *h)
{
  struct urcu_obj_head *uh = caa_container_of(h, struct urcu_obj_head, uh_head);
  free((char *)uh - uh->uh_off);
}

size_t bench_urcu_head_size(void)
{
  return sizeof(struct urcu_obj_head);
}

void bench_urcu_call_free(void *obj, size_t off)
{
  struct urcu_obj_head *uh = (struct urcu_obj_head *)((char *)obj + off);
  uh->uh_off = off;
  urcu_memb_call_rcu(&uh->uh_head, urcu_free_cb);
}

void bench_urcu_register(void)
{
  urcu_memb_register_thread();
}

void bench_urcu_unregister(void)
{
  urcu_memb_unregister_thread();
}

void bench_urcu_barrier(void)
{
  urcu_memb_barrier();
}

void bench_urcu_memb_synchronize(void)
{
  urcu_memb_synchronize_rcu();
}

int bench_urcu_memb_use_source(void)
{
  return prd_rcu_set_source(&prd_rcu_urcu_memb);
}

long bench_urcu_memb_readers(const struct bench_readers *br, long *sections)
{
  long bad = 0, n = 0;
  urcu_memb_register_thread();
  while (!atomic_load_explicit(br->br_stop, memory_order_relaxed)) {
    urcu_memb_read_lock();
    bad += bench_reader_section(br, n);
    urcu_memb_read_unlock();
    n++;
  }
  urcu_memb_unregister_thread();
  *sections = n;
  return bad;
}
