/* urcu_qsbr.c: liburcu QSBR's read-side pair for `prd-bench rcu` (see bench/rcu.c); the QSBR
 * read lock is empty outside debug builds, so this is the floor any read side can reach.  And
 * QSBR's half of prd-bench deferred --source urcu-qsbr (bench/deferred.c): the `batch` mode's
 * synchronize_rcu, the library's source and the readers' loop. */
#define _LGPL_SOURCE
#include <urcu/urcu-qsbr.h>

#include "bench.h"
#include "deferred.h"
#include "prudence_urcu.h"
#include "rcu_urcu.h"

double bench_urcu_qsbr_read_pair_ns(long iters)
{
  urcu_qsbr_register_thread();
  uint64_t t0 = bench_now_ns();
  for (long i = 0; i < iters; i++) {
    urcu_qsbr_read_lock();
    urcu_qsbr_read_unlock();
    __asm__ __volatile__("" ::: "memory"); /* keep the (otherwise empty) loop */
  }
  uint64_t t1 = bench_now_ns();
  urcu_qsbr_unregister_thread();
  return (double)(t1 - t0) / (double)iters;
}

void bench_urcu_qsbr_synchronize(void)
{
  urcu_qsbr_synchronize_rcu(); /* puts the caller offline while it waits, if it is online */
}

int bench_urcu_qsbr_use_source(void)
{
  return prd_rcu_set_source(&prd_rcu_urcu_qsbr);
}

long bench_urcu_qsbr_readers(const struct bench_readers *br, long *sections)
{
  long bad = 0, n = 0;
  urcu_qsbr_register_thread();
  while (!atomic_load_explicit(br->br_stop, memory_order_relaxed)) {
    urcu_qsbr_read_lock();
    bad += bench_reader_section(br, n);
    urcu_qsbr_read_unlock();
    urcu_qsbr_quiescent_state(); /* between sections: the reader holds no reference */
    n++;
  }
  urcu_qsbr_unregister_thread();
  *sections = n;
  return bad;
}
