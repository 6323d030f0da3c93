/* urcu_qsbr.c: liburcu QSBR's read-side pair for `prd-bench rcu` (see bench/rcu.c); the QSBR
 * read lock is empty outside debug builds, so this is the floor any read side can reach. */
#define _LGPL_SOURCE
#include <urcu/urcu-qsbr.h>

#include "bench.h"
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
