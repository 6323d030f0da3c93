/* `prd-bench rcu`: the grace-period layer (src/rcu.c) against liburcu.
 *
 *   read_pair     ns per prd_rcu_read_lock/unlock pair (built-in) vs liburcu memb and qsbr
 *                 (their inline _LGPL_SOURCE read side), one thread, interleaved rounds
 *   gp_latency    prd_synchronize_rcu latency, median and p99 (us), idle and with two reader
 *                 threads in back-to-back read sections; liburcu memb's beside it
 *   call_rcu      callbacks per second, end to end (T threads queue N callbacks each, then
 *                 rcu_barrier) for prd_call_rcu vs liburcu memb's call_rcu, T = 1 and 2
 *   poll_state    ns per prd_rcu_poll_state call
 *
 * Summary (--json): read_pair_vs_urcu_memb = ours/theirs in time (<= 1.1 is the goal),
 * gp_latency_us_p50 (idle), call_rcu_vs_urcu = ours/theirs in throughput, bigger is better
 * (>= 1 is the goal; the median over rounds of the 2-thread ratio).  Without liburcu the
 * comparisons print "n/a (built without liburcu)" and the summary carries null for them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "internal.h"
#include "rcu_urcu.h"

static double read_pair_ns(long iters)
{
  uint64_t t0 = bench_now_ns();
  for (long i = 0; i < iters; i++) {
    prd_rcu_read_lock();
    prd_rcu_read_unlock();
  }
  return (double)(bench_now_ns() - t0) / (double)iters;
}

static double poll_ns(long iters)
{
  prd_gp_t s = prd_rcu_get_state();
  long hits = 0;
  uint64_t t0 = bench_now_ns();
  for (long i = 0; i < iters; i++)
    hits += prd_rcu_poll_state(s - 2 * (prd_gp_t)(i & 1));
  double ns = (double)(bench_now_ns() - t0) / (double)iters;
  return hits >= 0 ? ns : -1;
}

/* ---- readers in the background of the latency test ------------------------------------ */
static atomic_int bg_stop;
static void *bg_reader(void *arg)
{
  (void)arg;
  while (!atomic_load_explicit(&bg_stop, memory_order_relaxed)) {
    prd_rcu_read_lock();
    for (int i = 0; i < 50; i++)
      atomic_signal_fence(memory_order_seq_cst);
    prd_rcu_read_unlock();
  }
  return NULL;
}

static void sync_us(double *out, int n)
{
  for (int i = 0; i < n; i++) {
    uint64_t t0 = bench_now_ns();
    prd_synchronize_rcu();
    out[i] = (double)(bench_now_ns() - t0) / 1e3;
  }
}

/* ---- call_rcu throughput --------------------------------------------------------------- */
static atomic_long cb_count;
static void cb_count_fn(struct prd_rcu_head *h)
{
  (void)h;
  atomic_fetch_add_explicit(&cb_count, 1, memory_order_relaxed);
}

struct cr_arg {
  const struct bench_call_rcu *ca_impl;
  void *ca_heads;
  long ca_n;
};

static void *cr_thread(void *p)
{
  struct cr_arg *a = p;
  a->ca_impl->cr_queue(a->ca_heads, a->ca_n);
  return NULL;
}

double bench_call_rcu_rate(const struct bench_call_rcu *impl, int threads, long per_thread)
{
  pthread_t th[threads];
  struct cr_arg args[threads];
  for (int t = 0; t < threads; t++) {
    args[t].ca_impl = impl;
    args[t].ca_heads = calloc((size_t)per_thread, impl->cr_head_size);
    args[t].ca_n = per_thread;
  }
  atomic_store(impl->cr_count, 0);
  uint64_t t0 = bench_now_ns();
  for (int t = 0; t < threads; t++)
    pthread_create(&th[t], NULL, cr_thread, &args[t]);
  for (int t = 0; t < threads; t++)
    pthread_join(th[t], NULL);
  impl->cr_barrier();
  uint64_t t1 = bench_now_ns();
  long done = atomic_load(impl->cr_count);
  for (int t = 0; t < threads; t++)
    free(args[t].ca_heads);
  return done == threads * per_thread ? (double)done / ((double)(t1 - t0) / 1e9) : -1;
}

static void prd_queue(void *heads, long n)
{
  struct prd_rcu_head *h = heads;
  for (long i = 0; i < n; i++)
    prd_call_rcu(&h[i], cb_count_fn);
}

static const struct bench_call_rcu prd_call_rcu_impl = {
  sizeof(struct prd_rcu_head), prd_queue, prd_rcu_barrier, &cb_count
};

static double call_rcu_rate(int threads, long per_thread)
{
  return bench_call_rcu_rate(&prd_call_rcu_impl, threads, per_thread);
}

static void point(bool json, const char *what, const char *impl, const char *unit, double v)
{
  if (json)
    printf("{\"bench\":\"rcu\",\"point\":\"%s\",\"impl\":\"%s\",\"%s\":%.3f}\n", what, impl,
           unit, v);
}

static int rcu_bench(int argc, char **argv)
{
  struct bench_common bc = { .bc_rounds = 0 };
  argc = bench_parse_common(argc, argv, &bc);
  if (argc > 1) {
    fprintf(stderr, "prd-bench rcu: unknown argument %s\n", argv[1]);
    return 2;
  }
  int rounds = bc.bc_rounds > 0 ? bc.bc_rounds : bc.bc_smoke ? 2 : 7;
  long iters = bc.bc_smoke ? 200000 : 20000000;
  int nsync = bc.bc_smoke ? 50 : 2000;
  long ncb = bc.bc_smoke ? 20000 : 1000000;
  bool json = bc.bc_json;
  int failed = 0;

  /* warm up: register, start the driver and the worker */
  read_pair_ns(1000);
  prd_synchronize_rcu();
  call_rcu_rate(1, 1000);

  /* 1. read-side pair, interleaved rounds */
  double rp_ours[rounds], rp_memb[rounds], rp_qsbr[rounds], rp_ratio[rounds];
  for (int r = 0; r < rounds; r++) {
    bench_progress(&bc, "rcu", "read pair", r, rounds);
    rp_ours[r] = read_pair_ns(iters);
#ifdef PRD_HAVE_URCU
    rp_memb[r] = bench_urcu_memb_read_pair_ns(iters);
    rp_qsbr[r] = bench_urcu_qsbr_read_pair_ns(iters);
    rp_ratio[r] = rp_ours[r] / rp_memb[r];
#else
    rp_memb[r] = rp_qsbr[r] = rp_ratio[r] = 0;
#endif
  }
  double rp_o = bench_median(rp_ours, (size_t)rounds);
  double rp_m = bench_median(rp_memb, (size_t)rounds);
  double rp_q = bench_median(rp_qsbr, (size_t)rounds);
  double rp_x = bench_median(rp_ratio, (size_t)rounds);

  /* 2. poll_state */
  double pl[rounds];
  for (int r = 0; r < rounds; r++)
    pl[r] = poll_ns(iters);
  double pl_ns = bench_median(pl, (size_t)rounds);

  /* 3. grace-period latency: idle, then with two readers */
  double *lat = calloc((size_t)nsync, sizeof(double));
  sync_us(lat, nsync);
  double lat_p50 = bench_percentile(lat, (size_t)nsync, 50);
  double lat_p99 = bench_percentile(lat, (size_t)nsync, 99);
  double memb_p50 = 0, memb_p99 = 0;
#ifdef PRD_HAVE_URCU
  bench_urcu_memb_sync_us(lat, nsync);
  memb_p50 = bench_percentile(lat, (size_t)nsync, 50);
  memb_p99 = bench_percentile(lat, (size_t)nsync, 99);
#endif
  pthread_t bg[2];
  atomic_store(&bg_stop, 0);
  for (int i = 0; i < 2; i++)
    pthread_create(&bg[i], NULL, bg_reader, NULL);
  sync_us(lat, nsync);
  atomic_store(&bg_stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(bg[i], NULL);
  double busy_p50 = bench_percentile(lat, (size_t)nsync, 50);
  double busy_p99 = bench_percentile(lat, (size_t)nsync, 99);
  free(lat);

  /* 4. call_rcu throughput, interleaved rounds, 1 and 2 threads */
  double cr_ours[2][rounds], cr_urcu[2][rounds], cr_ratio[2][rounds];
  for (int r = 0; r < rounds; r++) {
    bench_progress(&bc, "rcu", "call_rcu", r, rounds);
    for (int ti = 0; ti < 2; ti++) {
      cr_ours[ti][r] = call_rcu_rate(ti + 1, ncb);
#ifdef PRD_HAVE_URCU
      cr_urcu[ti][r] = bench_urcu_memb_call_rcu_rate(ti + 1, ncb);
      cr_ratio[ti][r] = cr_ours[ti][r] / cr_urcu[ti][r];
#else
      cr_urcu[ti][r] = cr_ratio[ti][r] = 0;
#endif
      if (cr_ours[ti][r] < 0 || cr_urcu[ti][r] < 0)
        failed = 1; /* a callback was lost */
    }
  }
  bench_progress(&bc, "rcu", "done", rounds, rounds);
  double cr_o[2], cr_u[2], cr_x[2];
  for (int ti = 0; ti < 2; ti++) {
    cr_o[ti] = bench_median(cr_ours[ti], (size_t)rounds);
    cr_u[ti] = bench_median(cr_urcu[ti], (size_t)rounds);
    cr_x[ti] = bench_median(cr_ratio[ti], (size_t)rounds);
  }

#ifdef PRD_HAVE_URCU
  const bool have = true;
#else
  const bool have = false;
#endif
  if (json) {
    point(true, "read_pair", "builtin", "ns", rp_o);
    if (have) {
      point(true, "read_pair", "urcu-memb", "ns", rp_m);
      point(true, "read_pair", "urcu-qsbr", "ns", rp_q);
      point(true, "gp_latency_p50", "urcu-memb", "us", memb_p50);
      point(true, "gp_latency_p99", "urcu-memb", "us", memb_p99);
    }
    point(true, "poll_state", "builtin", "ns", pl_ns);
    point(true, "gp_latency_p50", "builtin", "us", lat_p50);
    point(true, "gp_latency_p99", "builtin", "us", lat_p99);
    point(true, "gp_latency_p50_2readers", "builtin", "us", busy_p50);
    point(true, "gp_latency_p99_2readers", "builtin", "us", busy_p99);
    for (int ti = 0; ti < 2; ti++) {
      char what[32];
      snprintf(what, sizeof(what), "call_rcu_%dthr", ti + 1);
      point(true, what, "builtin", "per_s", cr_o[ti]);
      if (have)
        point(true, what, "urcu-memb", "per_s", cr_u[ti]);
    }
    if (have)
      printf("{\"bench\":\"rcu\",\"summary\":true,\"read_pair_vs_urcu_memb\":%.3f,"
             "\"gp_latency_us_p50\":%.1f,\"call_rcu_vs_urcu\":%.3f}\n",
             rp_x, lat_p50, cr_x[1]);
    else
      printf("{\"bench\":\"rcu\",\"summary\":true,\"read_pair_vs_urcu_memb\":null,"
             "\"gp_latency_us_p50\":%.1f,\"call_rcu_vs_urcu\":null,"
             "\"note\":\"built without liburcu\"}\n", lat_p50);
  } else {
    printf("prd-bench rcu (%d rounds, medians%s)\n", rounds, bc.bc_smoke ? ", smoke" : "");
    printf("  read lock/unlock pair    builtin %.2f ns", rp_o);
    if (have)
      printf("   urcu-memb %.2f ns   urcu-qsbr %.2f ns   ours/memb %.3f (time)\n", rp_m, rp_q,
             rp_x);
    else
      printf("   liburcu: n/a (built without liburcu)\n");
    printf("  prd_rcu_poll_state       %.2f ns\n", pl_ns);
    printf("  synchronize_rcu latency  builtin p50 %.1f us p99 %.1f us; with 2 readers p50 "
           "%.1f us p99 %.1f us", lat_p50, lat_p99, busy_p50, busy_p99);
    if (have)
      printf("; urcu-memb p50 %.1f us p99 %.1f us\n", memb_p50, memb_p99);
    else
      printf("\n");
    for (int ti = 0; ti < 2; ti++) {
      printf("  call_rcu %d thread%s       builtin %.2f M/s", ti + 1, ti ? "s" : " ",
             cr_o[ti] / 1e6);
      if (have)
        printf("   urcu-memb %.2f M/s   ours/theirs %.3f (throughput)\n", cr_u[ti] / 1e6,
               cr_x[ti]);
      else
        printf("   liburcu: n/a (built without liburcu)\n");
    }
  }
  return failed;
}

PRD_BENCH("rcu", "RCU read side, grace-period latency, call_rcu throughput vs liburcu", rcu_bench)
