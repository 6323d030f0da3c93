/* urcu_deferred.c: the `urcu` mode of prd-bench deferred/endurance (bench/deferred.c):
 * malloc + liburcu memb's own call_rcu(free), the reclaimer users pick today (ANCHORS.md).
 * The rcu_head lives after the object in the same malloc'd block, as a structure embeds it. */
#define _LGPL_SOURCE
#include <urcu/urcu-memb.h>

#include <stdlib.h>

#include "deferred.h"

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
