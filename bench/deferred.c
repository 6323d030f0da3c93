/* prd-bench deferred | endurance | rcuhash: the evaluation of seed 001 §5 (issue #6).
 *
 * Modes (each run in its own child process, so that peak RSS and the metrics belong to one
 * mode; the parent only forks, collects one JSON line per child through a pipe, and orders
 * the runs so that modes interleave round by round):
 *   prudence   prd_cache_alloc + prd_cache_free_deferred (the allocator sees the deferral)
 *   oblivious  the same cache with PRD_CACHE_OBLIVIOUS: prd_call_rcu + a callback calling
 *              prd_cache_free (the SLUB + call_rcu baseline of §5)
 *   malloc     malloc + prd_call_rcu with a callback that frees (the process's own malloc:
 *              glibc, or what LD_PRELOAD put there; bench/compare-deferred.sh)
 *   urcu       malloc + liburcu memb's own call_rcu(free) (bench/urcu_deferred.c; only when
 *              liburcu is installed, and with --readers only on their source, urcu-memb)
 *   batch      malloc + a per-thread array of --batch B retired pointers (default 4096): when
 *              it is full, one synchronize on the run's grace-period source, then free them
 *              all (what liburcu's own benchmarks and many servers do).  The process's malloc,
 *              so it runs under any allocator by LD_PRELOAD as the malloc mode does
 *   prd-malloc prd_malloc + prd_free_deferred: the malloc family's Prudence path (the block's
 *              size class cache, whatever the process's malloc is)
 * Grace-period source (--source builtin|urcu-memb|urcu-qsbr, default builtin): the library's
 * (prd_rcu_set_source in each child, before anything uses RCU: prudence, oblivious, malloc),
 * the batch mode's synchronize (prd_synchronize_rcu, or liburcu's flavour directly) and the
 * readers' sections all use it; a child whose library is fixed on another source fails.
 * The call_rcu modes keep their rcu_head after the object, as a kernel structure carries its
 * own: no extra allocation.  A deferral backlog can outgrow memory (§3.4, Fig. 3); a child
 * whose RSS passes --max-rss-mb (default 4096) waits for its callbacks (prd_rcu_barrier /
 * rcu_barrier) before it goes on, and reports how often (backlog_waits): what an application
 * would have to do.  Prudence never needs it.
 *
 * 1. deferred (§5.2, Fig. 6): every thread (--threads, default: the CPUs) runs --pairs
 *    (default 5,000,000 as the paper) alloc + deferred-free pairs per size, sizes 8 ... 4096.
 *    pairs/s is over the loop (the paper's measure); the §5 metrics of the mode's cache;
 *    gp_s, grace periods per second of the loop: for the library's modes the advance of its
 *    grace-period sequence (prd_rcu_get_state, 2 per grace period), for batch its
 *    synchronizes, -1 for urcu (liburcu's call_rcu thread's are not visible).
 *    --readers R (default 0) adds R threads that stay in short read-side sections of the
 *    source back to back (QSBR: a quiescent state after each), each reading one of the
 *    objects the writers publish; the writers then publish every new object into their
 *    shared slot (release) and retire the one it replaces, instead of retiring it at once.
 *    A read that finds a freed object (its first word, which writers keep odd, even) fails
 *    the run.  Writers default to the CPUs less the readers (at least 1).
 *    Summary: {"bench":"deferred","summary":true,"readers":R,"min_ratio_vs_batch":X,
 *    "rss_ratio_vs_batch":Y,"rss_ratio_vs_batch_4096":Z,"min_ratio_vs_oblivious":A,
 *    "ratio_vs_oblivious_4096":B,"min_ratio_vs_malloc_callrcu":C,
 *    "prd_malloc_min_ratio_vs_batch":D,"prd_malloc_rss_ratio_vs_batch":E}, ratios of medians:
 *    X the min over sizes of prudence over batch (pairs/s), Y the max over sizes of
 *    prudence's peak RSS over batch's, Z that at 4096 B; D and E the same as X and Y for
 *    prd-malloc.
 * 2. endurance (§3.5, §5.5, Fig. 3): every thread updates its own RCU-protected list of 64
 *    512-byte nodes (allocate a new version, copy, publish, defer the old) for --seconds
 *    (default 60); a sampler thread records RSS every 10 ms.  --readers R adds R threads of
 *    the built-in source in short read-side sections, each walking the first nodes of a list
 *    (writers then default to the CPUs less the readers; the urcu mode, whose callbacks wait
 *    for liburcu's readers only, does not run).  growth = mean RSS of the last
 *    tenth / mean RSS of the second tenth.  Summary: {"bench":"endurance","summary":true,
 *    "prudence_rss_growth":G,"oblivious_rss_growth":H,"prudence_peak_mb":P}.
 * 3. rcuhash (§5.3 in spirit): an RCU hash table of 64-byte entries (--size S allocates S
 *    bytes an entry), on --threads threads a mix of lookups inside read-side sections of the
 *    built-in source and --updates PCT percent updates (default 10: 5% inserts, 5% deletes),
 *    a delete unlinking the entry it found under its bucket's lock and retiring it after the
 *    lock (the mode's deferral: batch's synchronize is outside the lock and any section);
 *    --readers R more threads of lookups only.  Modes (--modes): prudence, oblivious,
 *    malloc, batch (urcu is not offered: its readers would need liburcu's read side).  The
 *    updating threads' operations/s, the readers' lookups/s and the metrics of each mode;
 *    summary {"bench":"rcuhash","summary":true,"ratio_vs_oblivious":R,
 *    "ratio_vs_malloc_callrcu":M,"ratio_vs_batch":B,"rss_ratio_vs_batch":Q}, ratios of
 *    medians (B and Q: batch under the process's malloc; bench/compare-rcuhash.sh runs it
 *    under each allocator).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "deferred.h"
#include "internal.h"
#include "prd_child.h"

/* ---- modes -------------------------------------------------------------------------------- */
enum { M_PRUDENCE, M_OBLIVIOUS, M_MALLOC, M_URCU, M_BATCH, M_PMALLOC, M_COUNT };
static const char *const mode_names[M_COUNT] = { "prudence", "oblivious", "malloc", "urcu",
                                                 "batch", "prd-malloc" };

/* ---- grace-period sources (--source) ---------------------------------------------------- */
enum { S_BUILTIN, S_URCU_MEMB, S_URCU_QSBR, S_COUNT };
static const char *const source_names[S_COUNT] = { "builtin", "urcu-memb", "urcu-qsbr" };

/* Fixes the library's source in a child, before anything there uses RCU; a child whose
 * library is already fixed on another source (an earlier benchmark in the same process, or
 * PRUDENCE_OPTIONS=rcu=...) ends, rather than measure readers its grace periods cannot see. */
static void source_use(int src)
{
  if (src == S_URCU_MEMB)
    (void)bench_urcu_memb_use_source();
  else if (src == S_URCU_QSBR)
    (void)bench_urcu_qsbr_use_source();
  else
    (void)prd_rcu_set_source(&prd_rcu_builtin);
  const struct prd_rcu_source *rs = prd_rcu_get_source();
  if (rs == NULL || strcmp(rs->rs_name, source_names[src]) != 0) {
    fprintf(stderr, "prd-bench: the library's grace-period source is %s, not %s\n",
            rs != NULL ? rs->rs_name : "(none)", source_names[src]);
    _exit(2);
  }
}

/* One grace period of the source, as the batch mode's writers call it. */
static void source_synchronize(int src)
{
  if (src == S_URCU_MEMB)
    bench_urcu_memb_synchronize();
  else if (src == S_URCU_QSBR)
    bench_urcu_qsbr_synchronize();
  else
    prd_synchronize_rcu();
}

struct mode_ctx {
  int mc_mode;
  size_t mc_size;
  size_t mc_head_off;        /* call_rcu modes on malloc: the head after the object */
  prd_cache_t *mc_cache;     /* prudence, oblivious */
  long mc_max_rss_kb;
  _Atomic long mc_backlog_waits;
  int mc_source;             /* S_*: batch's synchronize */
  size_t mc_batch;           /* batch: retired pointers per synchronize */
  _Atomic long mc_syncs;     /* batch: synchronizes */
};

/* batch: this thread's retired pointers (mode_thread_begin allocates the array) */
static _Thread_local void **batch_ptrs;
static _Thread_local size_t batch_len;

/* One synchronize on the source, then the whole array freed. */
static void batch_flush(struct mode_ctx *mc)
{
  source_synchronize(mc->mc_source);
  atomic_fetch_add_explicit(&mc->mc_syncs, 1, memory_order_relaxed);
  for (size_t i = 0; i < batch_len; i++)
    free(batch_ptrs[i]);
  batch_len = 0;
}

struct malloc_obj_head {
  struct prd_rcu_head mh_head;
  size_t mh_off;
};

static void malloc_cb(struct prd_rcu_head *h)
{
  struct malloc_obj_head *mh = (struct malloc_obj_head *)h;
  free((char *)mh - mh->mh_off);
}

static void mode_setup(struct mode_ctx *mc, int mode, size_t size, long max_rss_mb)
{
  memset(mc, 0, sizeof(*mc));
  mc->mc_mode = mode;
  mc->mc_size = size;
  mc->mc_head_off = PRD_P2ROUNDUP(size, 16);
  mc->mc_max_rss_kb = max_rss_mb * 1024;
  mc->mc_source = S_BUILTIN;
  mc->mc_batch = 4096;
  if (mode == M_PRUDENCE || mode == M_OBLIVIOUS) {
    char name[32];
    snprintf(name, sizeof(name), "%s-%zu", mode_names[mode], size);
    mc->mc_cache = prd_cache_create(name, size, 0, NULL, NULL, NULL, NULL, NULL,
                                    PRD_CACHE_NODEBUG |
                                        (mode == M_OBLIVIOUS ? PRD_CACHE_OBLIVIOUS : 0));
    if (mc->mc_cache == NULL) {
      perror("prd-bench: prd_cache_create");
      exit(2);
    }
  }
}

static inline void *mode_alloc(struct mode_ctx *mc)
{
  if (mc->mc_cache != NULL)
    return prd_cache_alloc(mc->mc_cache, 0);
  if (mc->mc_mode == M_PMALLOC)
    return prd_malloc(mc->mc_size);
  if (mc->mc_mode == M_URCU)
    return malloc(mc->mc_head_off + bench_urcu_head_size());
  if (mc->mc_mode == M_BATCH)
    return malloc(mc->mc_size);
  return malloc(mc->mc_head_off + sizeof(struct malloc_obj_head));
}

static inline void mode_defer(struct mode_ctx *mc, void *p)
{
  if (mc->mc_cache != NULL) {
    prd_cache_free_deferred(mc->mc_cache, p);
  } else if (mc->mc_mode == M_PMALLOC) {
    prd_free_deferred(p);
  } else if (mc->mc_mode == M_URCU) {
    bench_urcu_call_free(p, mc->mc_head_off);
  } else if (mc->mc_mode == M_BATCH) {
    batch_ptrs[batch_len++] = p;
    if (batch_len == mc->mc_batch)
      batch_flush(mc);
  } else {
    struct malloc_obj_head *mh = (struct malloc_obj_head *)((char *)p + mc->mc_head_off);
    mh->mh_off = mc->mc_head_off;
    prd_call_rcu(&mh->mh_head, malloc_cb);
  }
}

static void mode_thread_begin(struct mode_ctx *mc)
{
  if (mc->mc_mode == M_URCU)
    bench_urcu_register();
  if (mc->mc_mode == M_BATCH) {
    batch_ptrs = malloc(mc->mc_batch * sizeof(*batch_ptrs));
    batch_len = 0;
    if (batch_ptrs == NULL) {
      perror("prd-bench: batch array");
      exit(2);
    }
  }
}

static void mode_thread_end(struct mode_ctx *mc)
{
  if (mc->mc_mode == M_URCU)
    bench_urcu_unregister();
  if (mc->mc_mode == M_BATCH) {   /* what the thread retired last: freed before it ends */
    if (batch_len > 0)
      batch_flush(mc);
    free(batch_ptrs);
    batch_ptrs = NULL;
  }
}

/* Waits for every callback (the call_rcu modes). */
static void mode_drain(struct mode_ctx *mc)
{
  if (mc->mc_mode == M_URCU)
    bench_urcu_barrier();
  else if (mc->mc_mode != M_PRUDENCE && mc->mc_mode != M_BATCH && mc->mc_mode != M_PMALLOC)
    prd_rcu_barrier();
}

/* The backlog guard (see the header): every 65536 pairs. */
static inline void mode_guard(struct mode_ctx *mc, long i)
{
  if ((i & 65535) != 65535 || mc->mc_mode == M_PRUDENCE || mc->mc_mode == M_BATCH ||
      mc->mc_mode == M_PMALLOC)
    return;
  if (bench_rss_kb() > mc->mc_max_rss_kb) {
    atomic_fetch_add(&mc->mc_backlog_waits, 1);
    mode_drain(mc);
  }
}

/* The mode's §5 metrics as JSON fields, each counted the same way for every mode that has a
 * prd cache (docs/benchmarks.md, "How the paper's metrics are counted"): hits (Fig. 7) are the
 * magazine layer's; churns (Fig. 8) are refill/flush pairs between the magazine layer and the
 * slab layer (slab_oc_churns: Prudence's own oc_churns counts only its refills and flushes,
 * so the call_rcu baseline would show 0); slab churns (Fig. 9) and peak slabs (Fig. 10) are
 * the slab layer's; total fragmentation (Fig. 11) is the cache's slab memory over the objects
 * the application holds (`held`, given by the benchmark), as the paper's f_t, not over the
 * slab layer's in-use count, which includes objects parked in magazines and deferred objects
 * (that figure is slab_total_frag); with nothing held f_t is undefined: null.  The process's
 * grace periods (prd_rcu_stats) for every mode, the call_rcu-on-malloc ones too (they use
 * prd_call_rcu); urcu's own grace periods are liburcu's and not counted here. */
static void mode_metrics_json(struct mode_ctx *mc, uint64_t held, char *buf, size_t len)
{
  int n = snprintf(buf, len, "\"backlog_waits\":%ld", atomic_load(&mc->mc_backlog_waits));
  if (mc->mc_mode == M_URCU || n < 0 || (size_t)n >= len)
    return;   /* liburcu's grace periods: not this library's to count */
  prd_rcu_stats_t gs;
  memset(&gs, 0, sizeof(gs));
  gs.size = sizeof(gs);
  (void)prd_rcu_stats(&gs);
  n += snprintf(buf + n, len - (size_t)n,
                ",\"gp_requests\":%llu,\"gp_completed\":%llu,"
                "\"gp_by_driver\":%llu,\"gp_ms\":%.1f,\"gp_inline_waits\":%llu,"
                "\"gp_inline_timeouts\":%llu,\"membarriers\":%llu,\"gp_fenced\":%llu,"
                "\"app_objs\":%llu",
                (unsigned long long)gs.gp_requests,
                (unsigned long long)gs.gp_completed, (unsigned long long)gs.gp_by_driver,
                (double)gs.gp_ns / 1e6, (unsigned long long)gs.gp_inline_waits,
                (unsigned long long)gs.gp_inline_timeouts, (unsigned long long)gs.membarriers,
                (unsigned long long)gs.gp_fenced, (unsigned long long)held);
  if (mc->mc_cache == NULL || n < 0 || (size_t)n >= len)
    return;
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  prd_cache_stats(mc->mc_cache, &st);
  char frag[32];
  if (held > 0)
    snprintf(frag, sizeof(frag), "%.3f",
             (double)st.slab_bytes / ((double)held * (double)st.buf_size));
  else
    snprintf(frag, sizeof(frag), "null");
  snprintf(buf + n, len - (size_t)n,
           ",\"oc_hit_pct\":%.2f,\"slab_oc_churns\":%llu,\"slab_refills\":%llu,"
           "\"slab_flushes\":%llu,\"oc_churns\":%llu,\"oc_refills\":%llu,"
           "\"oc_flushes\":%llu,\"slab_churns\":%llu,\"slabs_peak\":%llu,\"total_frag\":%s,"
           "\"slab_total_frag\":%.3f,\"slab_bytes\":%llu,"
           "\"latent_merges\":%llu,\"partial_refills\":%llu,\"preflush_moves\":%llu,"
           "\"slab_premoves\":%llu,\"deferred_frees\":%llu,\"latent_depot_moves\":%llu,"
           "\"gp_waits\":%llu,\"latent_cap_waits\":%llu,\"depot_gp_waits\":%llu,"
           "\"oom_gp_waits\":%llu",
           st.oc_hit_pct, (unsigned long long)st.slab_oc_churns,
           (unsigned long long)st.slab_refills, (unsigned long long)st.slab_flushes,
           (unsigned long long)st.oc_churns, (unsigned long long)st.oc_refills,
           (unsigned long long)st.oc_flushes, (unsigned long long)st.slab_churns,
           (unsigned long long)st.slabs_peak, frag, st.total_frag,
           (unsigned long long)st.slab_bytes,
           (unsigned long long)st.latent_merges, (unsigned long long)st.partial_refills,
           (unsigned long long)st.preflush_moves, (unsigned long long)st.slab_premoves,
           (unsigned long long)st.deferred_frees, (unsigned long long)st.latent_depot_moves,
           (unsigned long long)st.gp_waits, (unsigned long long)st.latent_cap_waits,
           (unsigned long long)st.depot_gp_waits, (unsigned long long)st.oom_gp_waits);
}

static bool mode_available(int mode)
{
  return mode != M_URCU || bench_urcu_available();
}

/* ---- running one measurement in a child ------------------------------------------------- */
struct child_call {
  void (*fn)(void *arg, char *out, size_t len);
  void *arg;
};

/* The child: runs the measurement, writes its line to the pipe, exits 1 on a short write. */
static void child_body(void *call, int fd)
{
  struct child_call *c = call;
  char line[4096];
  line[0] = '\0';
  c->fn(c->arg, line, sizeof(line));
  size_t n = strlen(line);
  ssize_t w = write(fd, line, n);
  _exit(w == (ssize_t)n ? 0 : 1);
}

/* Runs fn(arg, out, len) in a child process; its output line comes back in out.  0 or -1. */
static int run_child(void (*fn)(void *arg, char *out, size_t len), void *arg, char *out,
                     size_t len)
{
  struct child_call c = { fn, arg };
  int st = prd_child_run(child_body, &c, out, len);
  return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && out[0] != '\0' ? 0 : -1;
}

static double json_num(const char *line, const char *key)
{
  char pat[64];
  snprintf(pat, sizeof(pat), "\"%s\":", key);
  const char *p = strstr(line, pat);
  return p != NULL ? strtod(p + strlen(pat), NULL) : -1;
}

static int default_threads(void)
{
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* Parses "a,b,c" of sizes (bytes, 1 or more; at most max of them); 0 on any error. */
static size_t parse_sizes(const char *s, size_t *out, size_t max)
{
  size_t n = 0;
  for (;;) {
    char *end;
    errno = 0;
    long v = bench_digits_first(s) ? strtol(s, &end, 10) : 0;
    if (v == 0 || errno == ERANGE || v < 1 || n == max || (*end != ',' && *end != '\0'))
      return 0;
    out[n++] = (size_t)v;
    if (*end == '\0')
      return n;
    s = end + 1;
  }
}

/* Parses "m1,m2" of mode names into a bitmask (0 on error). */
static unsigned parse_modes(const char *s)
{
  unsigned mask = 0;
  char buf[128];
  snprintf(buf, sizeof(buf), "%s", s);
  for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ","))
    for (int m = 0; m < M_COUNT; m++)
      if (strcmp(tok, mode_names[m]) == 0)
        mask |= 1u << m;
  return mask;
}

/* ---- 1. deferred: the micro benchmark ----------------------------------------------------- */
struct pairs_arg {
  int pa_mode;
  size_t pa_size;
  long pa_pairs;
  int pa_threads;
  long pa_max_rss_mb;
  int pa_readers;
  int pa_source;
  size_t pa_batch;
};

struct pairs_thread {
  struct mode_ctx *pt_mc;
  long pt_pairs;
  pthread_barrier_t *pt_start;
  uint64_t *_Atomic *pt_slot;   /* with readers: where this writer publishes; else NULL */
  uint64_t pt_t0, pt_t1;         /* the loop's start and end (ns) */
};

static void *pairs_thread_main(void *p)
{
  struct pairs_thread *pt = p;
  struct mode_ctx *mc = pt->pt_mc;
  uint64_t *_Atomic *slot = pt->pt_slot;
  mode_thread_begin(mc);
  pthread_barrier_wait(pt->pt_start);
  pt->pt_t0 = bench_now_ns();
  for (long i = 0; i < pt->pt_pairs; i++) {
    uint64_t *o = mode_alloc(mc);
    o[0] = (uint64_t)i << 1 | 1;   /* the object is used: its first word written, odd */
    if (slot != NULL) {
      /* release: the readers' acquire load of the slot sees the first word written; the
       * replaced object is unreachable once the exchange is done, so it can be retired */
      uint64_t *old = atomic_exchange_explicit(slot, o, memory_order_acq_rel);
      if (old != NULL)
        mode_defer(mc, old);
    } else {
      mode_defer(mc, o);
    }
    mode_guard(mc, i);
  }
  if (slot != NULL) {   /* the last published object, retired too */
    uint64_t *old = atomic_exchange_explicit(slot, NULL, memory_order_acq_rel);
    if (old != NULL)
      mode_defer(mc, old);
  }
  mode_thread_end(mc);
  pt->pt_t1 = bench_now_ns();
  return NULL;
}

/* ---- readers (--readers) ------------------------------------------------------------------ */
struct reader_thread {
  struct bench_readers rt_br;
  int rt_source;
  long rt_sections;
  long rt_bad;
};

/* The built-in source's reader loop (the liburcu flavours': bench/urcu_deferred.c,
 * bench/urcu_qsbr.c, the same with their read side). */
static long builtin_readers(const struct bench_readers *br, long *sections)
{
  long bad = 0, n = 0;
  prd_rcu_register_thread();
  while (!atomic_load_explicit(br->br_stop, memory_order_relaxed)) {
    prd_rcu_read_lock();
    bad += bench_reader_section(br, n);
    prd_rcu_read_unlock();
    n++;
  }
  prd_rcu_unregister_thread();
  *sections = n;
  return bad;
}

static void *reader_thread_main(void *p)
{
  struct reader_thread *rt = p;
  if (rt->rt_source == S_URCU_MEMB)
    rt->rt_bad = bench_urcu_memb_readers(&rt->rt_br, &rt->rt_sections);
  else if (rt->rt_source == S_URCU_QSBR)
    rt->rt_bad = bench_urcu_qsbr_readers(&rt->rt_br, &rt->rt_sections);
  else
    rt->rt_bad = builtin_readers(&rt->rt_br, &rt->rt_sections);
  return NULL;
}

/* The grace periods the library has run so far, from its sequence (src/rcu.c §4: 2 a
 * grace period; get_state rounds to an even end, so a difference is exact to one). */
static prd_gp_t library_gps(void)
{
  return prd_rcu_get_state() / 2;
}

static void pairs_child(void *arg, char *out, size_t len)
{
  struct pairs_arg *pa = arg;
  struct mode_ctx mc;
  source_use(pa->pa_source);
  mode_setup(&mc, pa->pa_mode, pa->pa_size, pa->pa_max_rss_mb);
  mc.mc_source = pa->pa_source;
  mc.mc_batch = pa->pa_batch;
  int nt = pa->pa_threads, nr = pa->pa_readers;
  pthread_t th[64], rth[64];
  struct pairs_thread pt[64];
  static struct reader_thread rt[64];
  static uint64_t *_Atomic slots[64];
  atomic_int stop = 0;
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)nt + 1);
  for (int r = 0; r < nr; r++) {
    rt[r] = (struct reader_thread){ { slots, nt, &stop }, pa->pa_source, 0, 0 };
    if (pthread_create(&rth[r], NULL, reader_thread_main, &rt[r]) != 0) {
      perror("prd-bench: reader thread");
      _exit(2);
    }
  }
  for (int t = 0; t < nt; t++) {
    pt[t] = (struct pairs_thread){ &mc, pa->pa_pairs, &start, nr > 0 ? &slots[t] : NULL, 0, 0 };
    pthread_create(&th[t], NULL, pairs_thread_main, &pt[t]);
  }
  prd_gp_t g0 = library_gps();
  pthread_barrier_wait(&start);
  /* the loop's time is the writers' own (first start to last end): this thread may not run
   * again until they are done, with readers spinning on every CPU */
  uint64_t t0 = UINT64_MAX, t1 = 0;
  for (int t = 0; t < nt; t++) {
    pthread_join(th[t], NULL);
    t0 = PRD_MIN(t0, pt[t].pt_t0);
    t1 = PRD_MAX(t1, pt[t].pt_t1);
  }
  prd_gp_t g1 = library_gps();
  atomic_store(&stop, 1);   /* the readers end with the writers: none outlives the run */
  long sections = 0, bad = 0;
  for (int r = 0; r < nr; r++) {
    pthread_join(rth[r], NULL);
    sections += rt[r].rt_sections;
    bad += rt[r].rt_bad;
  }
  uint64_t t2a = bench_now_ns();
  mode_drain(&mc);
  uint64_t t2 = bench_now_ns();
  char metrics[2048];
  mode_metrics_json(&mc, 0, metrics, sizeof(metrics));   /* every object deferred: none held */
  double secs = (double)(t1 - t0) / 1e9;
  double gps = pa->pa_mode == M_BATCH  ? (double)atomic_load(&mc.mc_syncs) / secs
               : pa->pa_mode == M_URCU ? -1
                                       : (double)(g1 - g0) / secs;
  snprintf(out, len,
           "{\"bench\":\"deferred\",\"mode\":\"%s\",\"size\":%zu,\"threads\":%d,"
           "\"readers\":%d,\"source\":\"%s\",\"batch\":%zu,"
           "\"pairs_per_thread\":%ld,\"pairs_s\":%.0f,\"gp_s\":%.0f,\"reader_sections_s\":%.0f,"
           "\"reader_errors\":%ld,\"drain_ms\":%.1f,\"peak_rss_kb\":%ld,%s}",
           mode_names[pa->pa_mode], pa->pa_size, nt, nr, source_names[pa->pa_source],
           pa->pa_batch, pa->pa_pairs, (double)pa->pa_pairs * nt / secs, gps,
           (double)sections / secs, bad, (double)(t2 - t2a) / 1e6, bench_peak_rss_kb(), metrics);
  if (bad > 0) {   /* a reader saw a freed object: no line, so the run fails */
    fprintf(stderr, "prd-bench deferred: %ld reads of freed objects in %s\n", bad, out);
    out[0] = '\0';
  }
}

#define MAX_SIZES 16
#define MAX_RSS_MB (LONG_MAX / 1024)   /* --max-rss-mb: the limit in KiB is a long */

static void usage_deferred(void)
{
  fprintf(stderr, "usage: prd-bench deferred [--pairs N] [--threads N] [--sizes a,b,...] "
                  "[--modes prudence,oblivious,malloc,urcu,batch,prd-malloc] [--batch B] "
                  "[--readers R] [--source builtin|urcu-memb|urcu-qsbr] [--max-rss-mb N] "
                  "[--rounds N] "
                  "[--json] [--smoke]\n");
}

/* Whether mode m runs with these readers on this source: liburcu's call_rcu (urcu) waits
 * only for memb readers, so with readers it runs on that source alone. */
static bool mode_runs(int m, unsigned modes, int readers, int source)
{
  return (modes & (1u << m)) && mode_available(m) &&
         (m != M_URCU || readers == 0 || source == S_URCU_MEMB);
}

static int deferred_main(int argc, char **argv)
{
  struct bench_common bc = { .bc_rounds = 3 };
  argc = bench_parse_common(argc, argv, &bc);
  long pairs = bc.bc_smoke ? 20000 : 5000000;
  int threads = 0;   /* 0: the CPUs less the readers */
  int readers = 0, source = S_BUILTIN;
  long batch = 4096;
  long max_rss_mb = 4096;
  size_t sizes[MAX_SIZES] = { 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096 };
  size_t nsizes = 10;
  unsigned modes = (1u << M_COUNT) - 1;
  if (bc.bc_smoke) {
    sizes[0] = 64;
    sizes[1] = 4096;
    nsizes = 2;
    bc.bc_rounds = 1;
  }
  for (int i = 1; i < argc; i += 2) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) {   /* every option takes a value */
      fprintf(stderr, "prd-bench %s: %s needs a value\n", argv[0], argv[i]);
      usage_deferred();
      return 2;
    }
    if (strcmp(argv[i], "--pairs") == 0)
      pairs = bench_arg_long(argv[0], argv[i], v, 1, LONG_MAX);
    else if (strcmp(argv[i], "--threads") == 0)
      threads = (int)bench_arg_long(argv[0], argv[i], v, 1, 64);
    else if (strcmp(argv[i], "--max-rss-mb") == 0)
      max_rss_mb = bench_arg_long(argv[0], argv[i], v, 1, MAX_RSS_MB);
    else if (strcmp(argv[i], "--sizes") == 0) {
      nsizes = parse_sizes(v, sizes, MAX_SIZES);
      if (nsizes == 0) {
        fprintf(stderr, "prd-bench %s: --sizes '%s' is not a list of sizes (bytes, at least 1; "
                "%d at most)\n", argv[0], v, MAX_SIZES);
        return 2;
      }
    } else if (strcmp(argv[i], "--modes") == 0)
      modes = parse_modes(v);
    else if (strcmp(argv[i], "--batch") == 0)
      batch = bench_arg_long(argv[0], argv[i], v, 1, LONG_MAX);
    else if (strcmp(argv[i], "--readers") == 0)
      readers = (int)bench_arg_long(argv[0], argv[i], v, 0, 64);
    else if (strcmp(argv[i], "--source") == 0) {
      for (source = 0; source < S_COUNT && strcmp(v, source_names[source]) != 0; source++)
        ;
    } else {
      usage_deferred();
      return 2;
    }
  }
  if (threads == 0)
    threads = PRD_MAX(1, default_threads() - readers);
  int rounds = bc.bc_rounds;
  if (pairs < 1 || threads < 1 || threads > 64 || nsizes == 0 || modes == 0 || batch < 1 ||
      readers < 0 || readers > 64 || source == S_COUNT) {
    usage_deferred();
    return 2;
  }
  /* the source is --source's; one that PRUDENCE_OPTIONS names too must be the same, or the
   * run would measure another source than the environment asked for */
  const char *o = getenv("PRUDENCE_OPTIONS");
  size_t sn = strlen(source_names[source]);
  while (o != NULL && *o != '\0') {
    bool named = strncmp(o, "rcu=", 4) == 0;
    if (named && (strncmp(o + 4, source_names[source], sn) != 0 ||
                  (o[4 + sn] != ',' && o[4 + sn] != '\0'))) {
      fprintf(stderr, "prd-bench deferred: PRUDENCE_OPTIONS names another grace-period source "
                      "than --source %s\n", source_names[source]);
      return 2;
    }
    o = strchr(o, ',');
    o = o != NULL ? o + 1 : NULL;
  }
  if (source != S_BUILTIN && !bench_urcu_available()) {
    fprintf(stderr, "prd-bench deferred: --source %s needs liburcu (not in this build)\n",
            source_names[source]);
    return 2;
  }
  static double v[MAX_SIZES][M_COUNT][BENCH_ROUNDS_MAX], rss[MAX_SIZES][M_COUNT][BENCH_ROUNDS_MAX];
  static char last[MAX_SIZES][M_COUNT][4096];
  int failures = 0;
  if (!bc.bc_json)
    printf("deferred (seed 001 §5.2, Fig. 6): %d threads x %ld alloc+deferred-free pairs per "
           "size, %d readers, source %s, batch %ld, median of %d rounds, each run in its own "
           "process\n", threads, pairs, readers, source_names[source], batch, rounds);
  for (int r = 0; r < rounds; r++)
    for (size_t s = 0; s < nsizes; s++)
      for (int k = 0; k < M_COUNT; k++) {
        int m = (k + r + (int)s) % M_COUNT;   /* rotate the order: interleaved */
        if (!mode_runs(m, modes, readers, source))
          continue;
        bench_progress(&bc, "deferred", mode_names[m], r * (int)nsizes + (int)s,
                       rounds * (int)nsizes);
        struct pairs_arg pa = { m,       sizes[s], pairs,  threads,
                                max_rss_mb, readers, source, (size_t)batch };
        char line[4096];
        if (run_child(pairs_child, &pa, line, sizeof(line)) != 0) {
          fprintf(stderr, "prd-bench deferred: mode %s size %zu failed\n", mode_names[m],
                  sizes[s]);
          failures++;
          v[s][m][r] = 0;
          continue;
        }
        v[s][m][r] = json_num(line, "pairs_s");
        rss[s][m][r] = json_num(line, "peak_rss_kb");
        snprintf(last[s][m], sizeof(last[s][m]), "%s", line);
        if (bc.bc_json)
          printf("%s\n", line);
      }
  double med[MAX_SIZES][M_COUNT], mrss[MAX_SIZES][M_COUNT];
  for (size_t s = 0; s < nsizes; s++)
    for (int m = 0; m < M_COUNT; m++) {
      bool on = mode_runs(m, modes, readers, source);
      med[s][m] = on ? bench_median(v[s][m], (size_t)rounds) : 0;
      mrss[s][m] = on ? bench_median(rss[s][m], (size_t)rounds) : 0;
    }
  double min_obl = 0, r4096 = 0, min_mal = 0, min_bat = 0, rss_bat = 0, rss_bat4096 = 0;
  double min_pm = 0, rss_pm = 0;
  bool have_obl = false, have_mal = false, have_bat = false, have_pm = false;
  if (!bc.bc_json) {
    printf("  %6s", "size");
    for (int m = 0; m < M_COUNT; m++)
      if (mode_runs(m, modes, readers, source))
        printf(" %13s", mode_names[m]);
    printf(" %10s %10s %10s %10s   (Mpairs/s; ratios: prudence over; RSS: peak, MB)\n",
           "/oblivious", "/malloc", "/batch", "RSS/batch");
  }
  for (size_t s = 0; s < nsizes; s++) {
    double ro = med[s][M_OBLIVIOUS] > 0 ? med[s][M_PRUDENCE] / med[s][M_OBLIVIOUS] : 0;
    double rm = med[s][M_MALLOC] > 0 ? med[s][M_PRUDENCE] / med[s][M_MALLOC] : 0;
    double rb = med[s][M_BATCH] > 0 ? med[s][M_PRUDENCE] / med[s][M_BATCH] : 0;
    double rr = mrss[s][M_BATCH] > 0 ? mrss[s][M_PRUDENCE] / mrss[s][M_BATCH] : 0;
    if (med[s][M_OBLIVIOUS] > 0 && med[s][M_PRUDENCE] > 0) {
      min_obl = have_obl ? PRD_MIN(min_obl, ro) : ro;
      have_obl = true;
      if (sizes[s] == 4096)
        r4096 = ro;
    }
    if (med[s][M_MALLOC] > 0 && med[s][M_PRUDENCE] > 0) {
      min_mal = have_mal ? PRD_MIN(min_mal, rm) : rm;
      have_mal = true;
    }
    if (med[s][M_BATCH] > 0 && med[s][M_PMALLOC] > 0) {
      double p = med[s][M_PMALLOC] / med[s][M_BATCH], q = mrss[s][M_PMALLOC] / mrss[s][M_BATCH];
      min_pm = have_pm ? PRD_MIN(min_pm, p) : p;
      rss_pm = have_pm ? PRD_MAX(rss_pm, q) : q;
      have_pm = true;
    }
    if (med[s][M_BATCH] > 0 && med[s][M_PRUDENCE] > 0) {
      min_bat = have_bat ? PRD_MIN(min_bat, rb) : rb;
      rss_bat = have_bat ? PRD_MAX(rss_bat, rr) : rr;
      have_bat = true;
      if (sizes[s] == 4096)
        rss_bat4096 = rr;
    }
    if (!bc.bc_json) {
      printf("  %6zu", sizes[s]);
      for (int m = 0; m < M_COUNT; m++)
        if (mode_runs(m, modes, readers, source))
          printf(" %13.2f", med[s][m] / 1e6);
      printf(" %10.2f %10.2f %10.2f %10.2f\n", ro, rm, rb, rr);
    }
  }
  if (!bc.bc_json) {
    printf("  peak RSS MB and grace periods/s of the last round, by mode:\n");
    for (size_t s = 0; s < nsizes; s++) {
      printf("  %6zu", sizes[s]);
      for (int m = 0; m < M_COUNT; m++)
        if (mode_runs(m, modes, readers, source) && last[s][m][0] != '\0')
          printf("  %s %.1f MB %.0f gp/s", mode_names[m],
                 json_num(last[s][m], "peak_rss_kb") / 1024, json_num(last[s][m], "gp_s"));
      printf("\n");
    }
    printf("  metrics of the last round (prudence | oblivious; docs/benchmarks.md says how "
           "each is counted):\n");
    for (size_t s = 0; s < nsizes; s++) {
      if (!(modes & 1u << M_PRUDENCE) || !(modes & 1u << M_OBLIVIOUS))
        break;
      printf("  %6zu hits %5.1f%% | %5.1f%%  obj churns %7.0f | %7.0f  slab churns %7.0f | "
             "%7.0f  peak slabs %6.0f | %6.0f  peak RSS MB %6.1f | %6.1f\n", sizes[s],
             json_num(last[s][M_PRUDENCE], "oc_hit_pct"),
             json_num(last[s][M_OBLIVIOUS], "oc_hit_pct"),
             json_num(last[s][M_PRUDENCE], "slab_oc_churns"),
             json_num(last[s][M_OBLIVIOUS], "slab_oc_churns"),
             json_num(last[s][M_PRUDENCE], "slab_churns"),
             json_num(last[s][M_OBLIVIOUS], "slab_churns"),
             json_num(last[s][M_PRUDENCE], "slabs_peak"),
             json_num(last[s][M_OBLIVIOUS], "slabs_peak"),
             json_num(last[s][M_PRUDENCE], "peak_rss_kb") / 1024,
             json_num(last[s][M_OBLIVIOUS], "peak_rss_kb") / 1024);
    }
    printf("  grace periods of the last round, per mode: completed per second of the loop, "
           "inline waits per pair (total fragmentation: none, the benchmark holds no "
           "object at the end)\n");
    for (size_t s = 0; s < nsizes; s++) {
      printf("  %6zu", sizes[s]);
      for (int m = 0; m < M_COUNT; m++) {
        if (!(modes & (1u << m)) || !mode_available(m) || last[s][m][0] == '\0' ||
            json_num(last[s][m], "gp_completed") < 0)   /* urcu: liburcu's own */
          continue;
        double pairs_s = json_num(last[s][m], "pairs_s");
        double secs = pairs_s > 0 ? json_num(last[s][m], "pairs_per_thread") *
                                        json_num(last[s][m], "threads") / pairs_s : 0;
        double pairs_all = pairs_s * secs;
        printf("  %s %7.0f gp/s %.5f waits/pair", mode_names[m],
               secs > 0 ? json_num(last[s][m], "gp_completed") / secs : 0,
               pairs_all > 0 ? json_num(last[s][m], "gp_inline_waits") / pairs_all : 0);
      }
      printf("\n");
    }
  }
  printf("{\"bench\":\"deferred\",\"summary\":true,\"readers\":%d,\"min_ratio_vs_batch\":%.3f,"
         "\"rss_ratio_vs_batch\":%.3f,\"rss_ratio_vs_batch_4096\":%.3f,"
         "\"min_ratio_vs_oblivious\":%.3f,\"ratio_vs_oblivious_4096\":%.3f,"
         "\"min_ratio_vs_malloc_callrcu\":%.3f,\"prd_malloc_min_ratio_vs_batch\":%.3f,"
         "\"prd_malloc_rss_ratio_vs_batch\":%.3f}\n",
         readers, have_bat ? min_bat : 0.0, have_bat ? rss_bat : 0.0, rss_bat4096,
         have_obl ? min_obl : 0.0, r4096, have_mal ? min_mal : 0.0, have_pm ? min_pm : 0.0,
         have_pm ? rss_pm : 0.0);
  return failures == 0 ? 0 : 1;
}

PRD_BENCH("deferred", "seed 001 §5.2 Fig. 6: alloc + deferred-free pairs per size, by mode",
          deferred_main)

/* ---- 2. endurance ------------------------------------------------------------------------- */
#define END_NODES 64       /* nodes per thread's list */
#define END_OBJ 512        /* the paper's object size (§3.5) */
#define END_SAMPLES_MAX 100000

struct end_node {
  struct end_node *_Atomic en_next;
  uint64_t en_key;
  uint64_t en_version;
  char en_payload[END_OBJ - 24];
};

struct end_arg {
  int ea_mode;
  double ea_seconds;
  int ea_threads;
  long ea_max_rss_mb;
  int ea_readers;
};

static atomic_int end_stop;
static _Atomic long end_updates;

struct end_thread {
  struct mode_ctx *et_mc;
  struct end_node *_Atomic et_head;
};

static void *end_thread_main(void *p)
{
  struct end_thread *et = p;
  struct mode_ctx *mc = et->et_mc;
  mode_thread_begin(mc);
  struct end_node *prev = NULL;
  for (int i = END_NODES; i-- > 0;) {   /* build the list */
    struct end_node *n = mode_alloc(mc);
    n->en_key = (uint64_t)i;
    n->en_version = 0;
    atomic_store_explicit(&n->en_next, prev, memory_order_relaxed);
    prev = n;
  }
  atomic_store_explicit(&et->et_head, prev, memory_order_release);
  uint64_t rng = (uint64_t)(uintptr_t)et | 1;
  long i = 0;
  while (!atomic_load_explicit(&end_stop, memory_order_relaxed)) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    uint64_t key = rng % END_NODES;
    /* the list's only writer is this thread: find the node and the link that points to it */
    struct end_node *_Atomic *link = &et->et_head;
    struct end_node *old = atomic_load_explicit(link, memory_order_relaxed);
    while (old->en_key != key) {
      link = &old->en_next;
      old = atomic_load_explicit(link, memory_order_relaxed);
    }
    struct end_node *nw = mode_alloc(mc);
    nw->en_key = key;
    nw->en_version = old->en_version + 1;
    memcpy(nw->en_payload, old->en_payload, sizeof(nw->en_payload));
    atomic_store_explicit(&nw->en_next, atomic_load_explicit(&old->en_next,
                                                             memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(link, nw, memory_order_release);   /* publish the new version */
    mode_defer(mc, old);
    mode_guard(mc, i++);
  }
  atomic_fetch_add(&end_updates, i);
  mode_thread_end(mc);
  return NULL;
}

/* --readers: threads of the built-in source that stay in short read-side sections, each
 * walking the first nodes of one writer's list (acquire loads: they pair with the writers'
 * release stores that publish a node), so grace periods must wait for them as an RCU program's
 * readers make them wait. */
#define END_READ_NODES 4
struct end_reader {
  struct end_thread *er_lists;
  int er_nlists;
  long er_sections;
  uint64_t er_sum;   /* what the sections read, kept so that the reads stay */
};

static void *end_reader_main(void *p)
{
  struct end_reader *er = p;
  long n = 0;
  uint64_t sum = 0;
  prd_rcu_register_thread();
  while (!atomic_load_explicit(&end_stop, memory_order_relaxed)) {
    prd_rcu_read_lock();
    struct end_node *nd =
        atomic_load_explicit(&er->er_lists[n % er->er_nlists].et_head, memory_order_acquire);
    for (int k = 0; k < END_READ_NODES && nd != NULL; k++) {
      sum += nd->en_version;
      nd = atomic_load_explicit(&nd->en_next, memory_order_acquire);
    }
    prd_rcu_read_unlock();
    n++;
  }
  prd_rcu_unregister_thread();
  er->er_sum = sum;
  er->er_sections = n;
  return NULL;
}

static void end_child(void *arg, char *out, size_t len)
{
  struct end_arg *ea = arg;
  struct mode_ctx mc;
  mode_setup(&mc, ea->ea_mode, END_OBJ, ea->ea_max_rss_mb);
  int nt = ea->ea_threads;
  pthread_t th[64];
  static struct end_thread et[64];
  long nsamples = (long)(ea->ea_seconds * 100);
  if (nsamples > END_SAMPLES_MAX)
    nsamples = END_SAMPLES_MAX;
  if (nsamples < 10)
    nsamples = 10;
  long *rss = calloc((size_t)nsamples, sizeof(long));
  for (int t = 0; t < nt; t++) {
    et[t].et_mc = &mc;
    pthread_create(&th[t], NULL, end_thread_main, &et[t]);
  }
  int nr = ea->ea_readers;
  pthread_t rth[64];
  static struct end_reader er[64];
  for (int r = 0; r < nr; r++) {
    er[r] = (struct end_reader){ et, nt, 0, 0 };
    if (pthread_create(&rth[r], NULL, end_reader_main, &er[r]) != 0) {
      perror("prd-bench: reader thread");
      _exit(2);
    }
  }
  /* the sampler: every 10 ms, on an absolute clock so that the samples do not drift */
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (long k = 0; k < nsamples; k++) {
    next.tv_nsec += 10 * 1000 * 1000;
    if (next.tv_nsec >= 1000000000) {
      next.tv_nsec -= 1000000000;
      next.tv_sec++;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
      ;
    rss[k] = bench_rss_kb();
  }
  atomic_store(&end_stop, 1);
  for (int t = 0; t < nt; t++)
    pthread_join(th[t], NULL);
  long sections = 0;
  for (int r = 0; r < nr; r++) {
    pthread_join(rth[r], NULL);
    sections += er[r].er_sections;
  }
  /* growth: mean of the last tenth over the mean of the second tenth */
  long tenth = nsamples / 10;
  double a = 0, b = 0;
  for (long k = tenth; k < 2 * tenth; k++)
    a += (double)rss[k];
  for (long k = nsamples - tenth; k < nsamples; k++)
    b += (double)rss[k];
  double growth = a > 0 ? b / a : 0;
  char metrics[2048];
  mode_metrics_json(&mc, (uint64_t)nt * END_NODES, metrics, sizeof(metrics));   /* the lists */
  size_t n = (size_t)snprintf(out, len,
                              "{\"bench\":\"endurance\",\"mode\":\"%s\",\"threads\":%d,"
                              "\"readers\":%d,\"reader_sections\":%ld,"
                              "\"seconds\":%g,\"updates\":%ld,\"rss_growth\":%.4f,"
                              "\"peak_rss_kb\":%ld,%s,\"interval_ms\":10,\"rss_kb\":[",
                              mode_names[ea->ea_mode], nt, nr, sections, ea->ea_seconds,
                              atomic_load(&end_updates), growth, bench_peak_rss_kb(), metrics);
  /* the series, thinned to fit the line (every k-th sample) */
  long step = 1;
  while (nsamples / step * 9 + n + 8 > len)
    step++;
  for (long k = 0; k < nsamples && n + 16 < len; k += step)
    n += (size_t)snprintf(out + n, len - n, "%s%ld", k ? "," : "", rss[k]);
  snprintf(out + n, len - n, "],\"sample_step\":%ld}", step);
  free(rss);
}

static int endurance_main(int argc, char **argv)
{
  struct bench_common bc = { .bc_rounds = 1 };
  argc = bench_parse_common(argc, argv, &bc);
  double seconds = bc.bc_smoke ? 0.5 : 60;
  int threads = -1, readers = 0;
  long max_rss_mb = 4096;
  unsigned modes = (1u << M_PRUDENCE) | (1u << M_OBLIVIOUS) | (1u << M_MALLOC) | (1u << M_URCU);
  for (int i = 1; i < argc; i += 2) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) {   /* every option takes a value */
      fprintf(stderr, "prd-bench %s: %s needs a value\n", argv[0], argv[i]);
      return 2;
    }
    if (strcmp(argv[i], "--seconds") == 0)
      seconds = bench_arg_positive(argv[0], argv[i], v, 1e6);
    else if (strcmp(argv[i], "--threads") == 0)
      threads = (int)bench_arg_long(argv[0], argv[i], v, 1, 64);
    else if (strcmp(argv[i], "--readers") == 0)
      readers = (int)bench_arg_long(argv[0], argv[i], v, 0, 64);
    else if (strcmp(argv[i], "--max-rss-mb") == 0)
      max_rss_mb = bench_arg_long(argv[0], argv[i], v, 1, MAX_RSS_MB);
    else if (strcmp(argv[i], "--modes") == 0)
      modes = parse_modes(v);
    else {
      fprintf(stderr, "usage: prd-bench endurance [--seconds S] [--threads N] [--readers R] "
                      "[--modes ...] [--max-rss-mb N] [--json] [--smoke]\n");
      return 2;
    }
  }
  if (threads < 0)   /* as deferred: the CPUs less the readers, at least 1 */
    threads = PRD_MAX(default_threads() - readers, 1);
  if (seconds <= 0 || threads < 1 || threads > 64 || readers < 0 || readers > 64 || modes == 0)
    return 2;
  /* each child writes a line with up to END_SAMPLES_MAX samples: a big buffer */
  static char line[1 << 20];
  double growth[M_COUNT] = { 0 }, peak[M_COUNT] = { 0 };
  int failures = 0;
  if (!bc.bc_json)
    printf("endurance (seed 001 §3.5, Fig. 3): %d threads update their RCU lists of %d-byte "
           "nodes for %gs per mode, %d readers; RSS every 10 ms\n  %10s %10s %12s %12s\n",
           threads, END_OBJ, seconds, readers, "mode", "growth", "peak RSS MB", "updates/s");
  for (int m = 0; m < M_COUNT; m++) {
    if (!(modes & (1u << m)) || !mode_available(m))
      continue;
    /* the urcu mode's callbacks wait for liburcu's readers, which these are not */
    if (readers > 0 && m == M_URCU)
      continue;
    struct end_arg ea = { m, seconds, threads, max_rss_mb, readers };
    if (run_child(end_child, &ea, line, sizeof(line)) != 0) {
      fprintf(stderr, "prd-bench endurance: mode %s failed\n", mode_names[m]);
      failures++;
      continue;
    }
    growth[m] = json_num(line, "rss_growth");
    peak[m] = json_num(line, "peak_rss_kb") / 1024;
    if (bc.bc_json)
      printf("%s\n", line);
    else
      printf("  %10s %10.3f %12.1f %12.0f\n", mode_names[m], growth[m], peak[m],
             json_num(line, "updates") / seconds);
  }
  printf("{\"bench\":\"endurance\",\"summary\":true,\"prudence_rss_growth\":%.4f,"
         "\"oblivious_rss_growth\":%.4f,\"prudence_peak_mb\":%.1f}\n", growth[M_PRUDENCE],
         growth[M_OBLIVIOUS], peak[M_PRUDENCE]);
  return failures == 0 ? 0 : 1;
}

PRD_BENCH("endurance", "seed 001 §3.5/§5.5 Fig. 3: RSS over time of RCU list updates, by mode",
          endurance_main)

/* ---- 3. rcuhash ----------------------------------------------------------------------------- */
#define HASH_BUCKETS 4096
#define HASH_KEYS 16384    /* keys drawn from here: about half present at steady state */

/* An entry; --size S allocates S bytes for it (at least this much), of which the lookups and
 * updates touch this head, as a larger record's first line. */
struct hentry {
  struct hentry *_Atomic he_next;
  uint64_t he_key;
  uint64_t he_value[6];
};

struct rcuhash {
  struct hentry *_Atomic rh_bucket[HASH_BUCKETS];
  pthread_mutex_t rh_lock[64];   /* writers: striped by bucket */
};

struct hash_arg {
  int ha_mode;
  double ha_seconds;
  int ha_threads;      /* threads of the mix (lookups, inserts, deletes) */
  int ha_readers;      /* threads of lookups only */
  int ha_updates;      /* percent of the mix's operations that update: half insert, half delete */
  size_t ha_size;
  size_t ha_batch;
  long ha_max_rss_mb;
};

static struct rcuhash hash_table;
static atomic_int hash_stop;

struct hash_thread {
  struct mode_ctx *ht_mc;
  long ht_ops;
  long ht_hits;
  int ht_id;
  int ht_updates;      /* percent; 0: a reader */
};

/* One lookup of key in its bucket, inside a read-side section of the built-in source. */
static long hash_lookup(uint64_t key)
{
  long hit = 0;
  prd_rcu_read_lock();
  for (struct hentry *e = atomic_load_explicit(&hash_table.rh_bucket[key % HASH_BUCKETS],
                                               memory_order_acquire);
       e != NULL; e = atomic_load_explicit(&e->he_next, memory_order_acquire))
    if (e->he_key == key) {
      hit = e->he_value[0] == key;
      break;
    }
  prd_rcu_read_unlock();
  return hit;
}

/* An insert of key (when absent) or a delete (when present), under the bucket's lock; the
 * deleted entry is retired after the lock is dropped (the mode's deferral). */
static void hash_update(struct mode_ctx *mc, uint64_t key, bool insert, long ops)
{
  unsigned b = (unsigned)(key % HASH_BUCKETS);
  pthread_mutex_t *lk = &hash_table.rh_lock[b % 64];
  pthread_mutex_lock(lk);
  struct hentry *_Atomic *link = &hash_table.rh_bucket[b];
  struct hentry *e = atomic_load_explicit(link, memory_order_relaxed);
  while (e != NULL && e->he_key != key) {
    link = &e->he_next;
    e = atomic_load_explicit(link, memory_order_relaxed);
  }
  if (insert && e == NULL) {
    struct hentry *n = mode_alloc(mc);
    n->he_key = key;
    for (int k = 0; k < 6; k++)
      n->he_value[k] = key;
    atomic_store_explicit(&n->he_next, NULL, memory_order_relaxed);
    atomic_store_explicit(link, n, memory_order_release);
  } else if (!insert && e != NULL) {
    atomic_store_explicit(link, atomic_load_explicit(&e->he_next, memory_order_relaxed),
                          memory_order_release);
    pthread_mutex_unlock(lk);
    mode_defer(mc, e);   /* outside the lock and any read-side section */
    mode_guard(mc, ops);
    return;
  }
  pthread_mutex_unlock(lk);
}

static void *hash_thread_main(void *p)
{
  struct hash_thread *ht = p;
  struct mode_ctx *mc = ht->ht_mc;
  if (ht->ht_updates > 0)
    mode_thread_begin(mc);
  uint64_t rng = ((uint64_t)ht->ht_id + 1) * 0x9e3779b97f4a7c15ull;
  long ops = 0, hits = 0;
  while (!atomic_load_explicit(&hash_stop, memory_order_relaxed)) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    uint64_t key = (rng >> 24) % HASH_KEYS;   /* bits apart from the operation's */
    int op = (int)((rng & 0xffff) % 200);      /* half-percent steps */
    if (op >= 2 * ht->ht_updates)
      hits += hash_lookup(key);
    else
      hash_update(mc, key, op < ht->ht_updates, ops);
    ops++;
  }
  ht->ht_ops = ops;
  ht->ht_hits = hits;
  if (ht->ht_updates > 0)
    mode_thread_end(mc);
  return NULL;
}

/* Entries in the table (its threads joined): the objects the application holds. */
static uint64_t hash_entries(void)
{
  uint64_t n = 0;
  for (int b = 0; b < HASH_BUCKETS; b++)
    for (struct hentry *e = atomic_load_explicit(&hash_table.rh_bucket[b], memory_order_acquire);
         e != NULL; e = atomic_load_explicit(&e->he_next, memory_order_relaxed))
      n++;
  return n;
}

static void hash_child(void *arg, char *out, size_t len)
{
  struct hash_arg *ha = arg;
  struct mode_ctx mc;
  mode_setup(&mc, ha->ha_mode, ha->ha_size, ha->ha_max_rss_mb);
  mc.mc_batch = ha->ha_batch;
  for (int i = 0; i < 64; i++)
    pthread_mutex_init(&hash_table.rh_lock[i], NULL);
  int nt = ha->ha_threads, n = ha->ha_threads + ha->ha_readers;
  pthread_t th[128];
  struct hash_thread ht[128];
  uint64_t t0 = bench_now_ns();
  for (int t = 0; t < n; t++) {
    ht[t] = (struct hash_thread){ &mc, 0, 0, t, t < nt ? ha->ha_updates : 0 };
    pthread_create(&th[t], NULL, hash_thread_main, &ht[t]);
  }
  struct timespec ts = { (time_t)ha->ha_seconds,
                         (long)((ha->ha_seconds - (double)(time_t)ha->ha_seconds) * 1e9) };
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
  atomic_store(&hash_stop, 1);
  long ops = 0, lookups = 0;
  for (int t = 0; t < n; t++) {
    pthread_join(th[t], NULL);
    if (t < nt)
      ops += ht[t].ht_ops;
    else
      lookups += ht[t].ht_ops;
  }
  uint64_t t1 = bench_now_ns();
  double secs = (double)(t1 - t0) / 1e9;
  char metrics[2048];
  mode_metrics_json(&mc, hash_entries(), metrics, sizeof(metrics));
  snprintf(out, len, "{\"bench\":\"rcuhash\",\"mode\":\"%s\",\"threads\":%d,\"readers\":%d,"
           "\"updates_pct\":%d,\"size\":%zu,\"batch\":%zu,\"ops_s\":%.0f,"
           "\"reader_lookups_s\":%.0f,\"syncs\":%ld,\"peak_rss_kb\":%ld,%s}",
           mode_names[ha->ha_mode], nt, ha->ha_readers, ha->ha_updates, ha->ha_size,
           ha->ha_batch, (double)ops / secs, (double)lookups / secs,
           atomic_load(&mc.mc_syncs), bench_peak_rss_kb(), metrics);
}

static int rcuhash_main(int argc, char **argv)
{
  struct bench_common bc = { .bc_rounds = 3 };
  argc = bench_parse_common(argc, argv, &bc);
  double seconds = bc.bc_smoke ? 0.2 : 3;
  int threads = default_threads(), readers = 0, updates = 10;
  size_t size = sizeof(struct hentry), batch = 4096;
  /* urcu is not offered: its readers would need liburcu's read side (the built-in is used) */
  unsigned modes = 1u << M_PRUDENCE | 1u << M_OBLIVIOUS | 1u << M_MALLOC | 1u << M_BATCH;
  if (bc.bc_smoke)
    bc.bc_rounds = 1;
  for (int i = 1; i < argc; i += 2) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (v == NULL) {   /* every option takes a value */
      fprintf(stderr, "prd-bench %s: %s needs a value\n", argv[0], argv[i]);
      return 2;
    }
    if (strcmp(argv[i], "--seconds") == 0)
      seconds = bench_arg_positive(argv[0], argv[i], v, 1e6);
    else if (strcmp(argv[i], "--threads") == 0)
      threads = (int)bench_arg_long(argv[0], argv[i], v, 1, 128);
    else if (strcmp(argv[i], "--readers") == 0)
      readers = (int)bench_arg_long(argv[0], argv[i], v, 0, 127);
    else if (strcmp(argv[i], "--updates") == 0)
      updates = (int)bench_arg_long(argv[0], argv[i], v, 1, 100);
    else if (strcmp(argv[i], "--size") == 0)
      size = (size_t)bench_arg_long(argv[0], argv[i], v, (long)sizeof(struct hentry), LONG_MAX);
    else if (strcmp(argv[i], "--batch") == 0)
      batch = (size_t)bench_arg_long(argv[0], argv[i], v, 1, LONG_MAX);
    else if (strcmp(argv[i], "--modes") == 0)
      modes = parse_modes(v);
    else {
      fprintf(stderr, "usage: prd-bench rcuhash [--seconds S] [--threads N] [--readers R] "
                      "[--updates PCT] [--size S] [--batch B] [--modes m,...] [--rounds N] "
                      "[--json] [--smoke]\n");
      return 2;
    }
  }
  int rounds = bc.bc_rounds;
  if (seconds <= 0 || threads < 1 || readers < 0 || threads + readers > 128 || updates < 1 ||
      updates > 100 || size < sizeof(struct hentry) || batch < 1 || modes == 0 ||
      (modes & 1u << M_URCU)) {
    fprintf(stderr, "prd-bench rcuhash: bad arguments (urcu is not offered)\n");
    return 2;
  }
  static double v[M_COUNT][BENCH_ROUNDS_MAX];
  static long rss[M_COUNT][BENCH_ROUNDS_MAX];
  int failures = 0;
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < M_COUNT; k++) {
      int m = (k + r) % M_COUNT;
      if (!(modes & 1u << m))
        continue;
      struct hash_arg ha = { m, seconds, threads, readers, updates, size, batch, 4096 };
      char line[4096];
      if (run_child(hash_child, &ha, line, sizeof(line)) != 0) {
        failures++;
        continue;
      }
      v[m][r] = json_num(line, "ops_s");
      rss[m][r] = (long)json_num(line, "peak_rss_kb");
      if (bc.bc_json)
        printf("%s\n", line);
    }
  double med[M_COUNT] = { 0 }, mrss[M_COUNT] = { 0 };
  for (int m = 0; m < M_COUNT; m++)
    if (modes & 1u << m) {
      med[m] = bench_median(v[m], (size_t)rounds);
      double d[BENCH_ROUNDS_MAX];
      for (int r = 0; r < rounds; r++)
        d[r] = (double)rss[m][r];
      mrss[m] = bench_median(d, (size_t)rounds);
    }
  if (!bc.bc_json) {
    printf("rcuhash: %d threads (%d%% updates: inserts and deferred deletes), %d readers, "
           "%zu-byte entries, %gs, median of %d rounds (updating threads' Mops/s, peak RSS "
           "MB)\n", threads, updates, readers, size, seconds, rounds);
    for (int m = 0; m < M_COUNT; m++)
      if (modes & 1u << m)
        printf("  %-9s %8.2f %7.1f\n", mode_names[m], med[m] / 1e6, mrss[m] / 1024);
  }
  printf("{\"bench\":\"rcuhash\",\"summary\":true,\"ratio_vs_oblivious\":%.3f,"
         "\"ratio_vs_malloc_callrcu\":%.3f,\"ratio_vs_batch\":%.3f,\"rss_ratio_vs_batch\":%.3f}\n",
         med[M_OBLIVIOUS] > 0 ? med[M_PRUDENCE] / med[M_OBLIVIOUS] : 0,
         med[M_MALLOC] > 0 ? med[M_PRUDENCE] / med[M_MALLOC] : 0,
         med[M_BATCH] > 0 ? med[M_PRUDENCE] / med[M_BATCH] : 0,
         mrss[M_BATCH] > 0 ? mrss[M_PRUDENCE] / mrss[M_BATCH] : 0);
  return failures == 0 ? 0 : 1;
}

PRD_BENCH("rcuhash", "seed 001 §5.3 in spirit: RCU hash table 90/5/5 with deferred deletes",
          rcuhash_main)
