/* urcu_memb.c: liburcu memb's side of `prd-bench rcu` (see bench/rcu.c): the read-side pair,
 * synchronize_rcu latency and call_rcu throughput, each exactly as the built-in is measured.
 * liburcu's inline read side (_LGPL_SOURCE), as its users build it. */
#define _LGPL_SOURCE
#include <urcu/urcu-memb.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "bench.h"
#include "rcu_urcu.h"

double bench_urcu_memb_read_pair_ns(long iters)
{
  urcu_memb_register_thread();
  uint64_t t0 = bench_now_ns();
  for (long i = 0; i < iters; i++) {
    urcu_memb_read_lock();
    urcu_memb_read_unlock();
  }
  uint64_t t1 = bench_now_ns();
  urcu_memb_unregister_thread();
  return (double)(t1 - t0) / (double)iters;
}

void bench_urcu_memb_sync_us(double *out, int n)
{
  /* a registered reader thread (this one, outside any section), as on our side: with no
   * reader registered liburcu returns at once without a grace period */
  urcu_memb_register_thread();
  for (int i = 0; i < n; i++) {
    uint64_t t0 = bench_now_ns();
    urcu_memb_synchronize_rcu();
    out[i] = (double)(bench_now_ns() - t0) / 1e3;
  }
  urcu_memb_unregister_thread();
}

static atomic_long cb_count;
static void cb_count_fn(struct rcu_head *h)
{
  (void)h;
  atomic_fetch_add_explicit(&cb_count, 1, memory_order_relaxed);
}

static void urcu_queue(void *heads, long n)
{
  struct rcu_head *h = heads;
  urcu_memb_register_thread();
  for (long i = 0; i < n; i++)
    urcu_memb_call_rcu(&h[i], cb_count_fn);
  urcu_memb_unregister_thread();
}

static const struct bench_call_rcu urcu_call_rcu_impl = {
  sizeof(struct rcu_head), urcu_queue, urcu_memb_barrier, &cb_count
};

double bench_urcu_memb_call_rcu_rate(int threads, long per_thread)
{
  return bench_call_rcu_rate(&urcu_call_rcu_impl, threads, per_thread);
}
