/* rcu_urcu.h: the call_rcu throughput driver that `prd-bench rcu` shares between the built-in
 * RCU (bench/rcu.c, always built) and its liburcu halves (bench/urcu_memb.c, bench/urcu_qsbr.c,
 * compiled only when liburcu is installed: PRD_HAVE_URCU).  Each liburcu half is the same
 * measurement as the built-in one, written with liburcu's own inline (_LGPL_SOURCE) API. */
#ifndef PRD_BENCH_RCU_URCU_H
#define PRD_BENCH_RCU_URCU_H

#include <stdatomic.h>
#include <stddef.h>

/* One call_rcu implementation for the shared throughput driver (bench/rcu.c): the size of a
 * callback head, how a thread queues n callbacks on an array of heads (each callback bumps
 * *cr_count), and the barrier that waits for them all. */
struct bench_call_rcu {
  size_t cr_head_size;
  void (*cr_queue)(void *heads, long n);
  void (*cr_barrier)(void);
  atomic_long *cr_count;
};
/* `threads` threads each queue `per_thread` callbacks, then the barrier: callbacks per second
 * end to end, or -1 when a callback went missing. */
double bench_call_rcu_rate(const struct bench_call_rcu *impl, int threads, long per_thread);

/* ns per rcu_read_lock/rcu_read_unlock pair over `iters` pairs (the thread registers). */
double bench_urcu_memb_read_pair_ns(long iters);
double bench_urcu_qsbr_read_pair_ns(long iters);
/* liburcu memb's synchronize_rcu latency with the calling thread registered: `n` samples in
 * microseconds into out[]. */
void bench_urcu_memb_sync_us(double *out, int n);
/* `threads` threads each queue `per_thread` callbacks with call_rcu, then rcu_barrier:
 * callbacks per second, end to end. */
double bench_urcu_memb_call_rcu_rate(int threads, long per_thread);

#endif
