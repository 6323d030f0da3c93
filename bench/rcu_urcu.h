/* rcu_urcu.h: the liburcu halves of `prd-bench rcu` (bench/urcu_memb.c, bench/urcu_qsbr.c),
 * compiled only when liburcu is installed (PRD_HAVE_URCU).  Each is the same measurement as
 * the built-in one in bench/rcu.c, written with liburcu's own inline (_LGPL_SOURCE) API. */
#ifndef PRD_BENCH_RCU_URCU_H
#define PRD_BENCH_RCU_URCU_H

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
