/* prd-bench malloc: the malloc family (src/malloc.c) under nine workloads.
 *
 *   random    one thread, random sizes 8 B - 1 KiB: a window of live blocks, each step frees
 *             a random one and allocates a new one in its place (and writes it)
 *   larson    the server pattern of Larson & Krishnan: threads replace random blocks (16 -
 *             512 B) of a shared table region; after every round the regions rotate, so each
 *             thread frees what another thread allocated
 *   prodcons  producer threads allocate messages (64 - 256 B) into single-producer rings,
 *             consumer threads free them
 *   realloc   buffers grown by small steps (a string being built) from 16 B to 256 KiB, and
 *             vectors grown by doubling, then freed
 *   deferred  threads replace blocks (64 B - 4 KiB) of a table; half the frees are deferred
 *             past a grace period: prd_call_rcu(free) (what users of any allocator do today),
 *             or prd_free_deferred when the allocator is libprudence's
 *   threads   thread churn: waves of short-lived threads, each allocating and freeing a few
 *             small blocks (16 - 512 B) and exiting; a thread that lives for the whole run
 *             keeps the process multi-threaded, as in a server that starts a thread per task
 *   bigloop   one thread, blocks of 5 - 25 MiB: a window of four live blocks, each step frees
 *             a random one and allocates a new one in its place, writing 64 bytes of each of
 *             its pages (a buffer filled, then dropped: big blocks reused, or mapped anew)
 *   bigmix    four threads, each a window of 512 live blocks, each step frees a random one
 *             and allocates another in its place, one in eight of up to 300,000 B and the
 *             rest of up to 2 KiB, writing its first 512 bytes (a server's buffers: big
 *             blocks freed and allocated faster than any fixed bound on free pages allows)
 *   alternate one thread, turns of two sizes: 10,000 blocks of 1000 B allocated (each written at
 *             both ends) and freed, then 10,000 of 4000 B, and again; then the same with 2,000
 *             blocks of 4000 B and 20,000 B (a program whose phases take turns, each size's
 *             memory freed whole before the other's grows: kept per class, or purged and
 *             faulted back in at every turn)
 *
 * Two ways to run it:
 *   prd-bench malloc [--json] [--smoke] [--rounds N]
 *       every workload in this process through the C library's malloc and through
 *       prd_malloc, interleaved round by round; medians and the ratio prudence / libc.
 *   prd-bench malloc --workload NAME [--quick | --scale X] [--json]
 *       one workload through plain malloc/free (so that LD_PRELOAD picks the allocator); prints
 *       seconds and peak RSS.  bench/compare-malloc.sh runs this under glibc, jemalloc,
 *       mimalloc, tcmalloc and libprudence-malloc, interleaved, and computes the ratios.
 *
 * --json summary (in-process mode):
 *   {"bench":"malloc","summary":true,"geomean_time_vs_libc":T}
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "internal.h"

#define ROUNDS_DEFAULT 5

typedef struct {
  const char *a_name;
  void *(*a_malloc)(size_t);
  void (*a_free)(void *);
  void *(*a_realloc)(void *, size_t);
} alloc_t;

static const alloc_t alloc_libc = { "libc", malloc, free, realloc };
static const alloc_t alloc_prd = { "prudence", prd_malloc, prd_free, prd_realloc };

static volatile uintptr_t bench_sink;

typedef struct {
  uint64_t s;
} brng_t;

static inline uint64_t brng(brng_t *r)
{
  uint64_t x = r->s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return r->s = x;
}

/* Scale: the number of operations per workload (smoke: tiny; quick: about a second). */
static double bench_scale = 1.0;
static long scaled(long n)
{
  long v = (long)((double)n * bench_scale);
  return v < 100 ? 100 : v;
}

/* ---- random ---------------------------------------------------------------------------------- */
static double w_random(const alloc_t *a)
{
  enum { WINDOW = 8192 };
  static void *slot[WINDOW];
  brng_t r = { 0x2545f4914f6cdd1dull };
  long ops = scaled(4000000);
  uint64_t t0 = bench_now_ns();
  for (long i = 0; i < ops; i++) {
    unsigned k = (unsigned)(brng(&r) % WINDOW);
    a->a_free(slot[k]);
    size_t n = 8 + brng(&r) % 1017;
    char *p = a->a_malloc(n);
    p[0] = (char)i;
    p[n - 1] = (char)i;
    slot[k] = p;
  }
  for (unsigned k = 0; k < WINDOW; k++) {
    a->a_free(slot[k]);
    slot[k] = NULL;
  }
  return (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- larson ---------------------------------------------------------------------------------- */
#define LARSON_THREADS 4
#define LARSON_SLOTS   4096      /* per region */
struct larson {
  const alloc_t *l_alloc;
  pthread_barrier_t l_bar;
  long l_rounds, l_ops;
  void *l_slot[LARSON_THREADS][LARSON_SLOTS];
};

struct larson_arg {
  struct larson *la_l;
  unsigned la_id;
};

static void *larson_thread(void *arg)
{
  struct larson_arg *la = arg;
  struct larson *l = la->la_l;
  brng_t r = { 0x9e3779b97f4a7c15ull * (la->la_id + 1) };
  for (long round = 0; round < l->l_rounds; round++) {
    void **slot = l->l_slot[(la->la_id + (unsigned long)round) % LARSON_THREADS];
    for (long i = 0; i < l->l_ops; i++) {
      unsigned k = (unsigned)(brng(&r) % LARSON_SLOTS);
      l->l_alloc->a_free(slot[k]);
      size_t n = 16 + brng(&r) % 497;
      char *p = l->l_alloc->a_malloc(n);
      p[0] = (char)i;
      slot[k] = p;
    }
    pthread_barrier_wait(&l->l_bar);   /* regions rotate: the next round frees others' blocks */
  }
  return NULL;
}

static double w_larson(const alloc_t *a)
{
  static struct larson l;
  memset(&l, 0, sizeof(l));
  l.l_alloc = a;
  l.l_rounds = 40;
  l.l_ops = scaled(50000);
  pthread_barrier_init(&l.l_bar, NULL, LARSON_THREADS);
  pthread_t t[LARSON_THREADS];
  struct larson_arg args[LARSON_THREADS];
  uint64_t t0 = bench_now_ns();
  for (unsigned i = 0; i < LARSON_THREADS; i++) {
    args[i].la_l = &l;
    args[i].la_id = i;
    pthread_create(&t[i], NULL, larson_thread, &args[i]);
  }
  for (unsigned i = 0; i < LARSON_THREADS; i++)
    pthread_join(t[i], NULL);
  for (unsigned i = 0; i < LARSON_THREADS; i++)
    for (unsigned k = 0; k < LARSON_SLOTS; k++)
      a->a_free(l.l_slot[i][k]);
  double s = (double)(bench_now_ns() - t0) / 1e9;
  pthread_barrier_destroy(&l.l_bar);
  return s;
}

/* ---- producer/consumer ----------------------------------------------------------------------- */
#define PC_PAIRS 2
#define PC_RING  1024
struct pc_ring {
  _Alignas(64) _Atomic unsigned long pr_head;   /* written by the producer */
  _Alignas(64) _Atomic unsigned long pr_tail;   /* written by the consumer */
  _Alignas(64) void *pr_buf[PC_RING];
  const alloc_t *pr_alloc;
  long pr_n;
};

static void *pc_producer(void *arg)
{
  struct pc_ring *q = arg;
  brng_t r = { 0xdeadbeefcafef00dull ^ (uintptr_t)q };
  for (long i = 0; i < q->pr_n; i++) {
    char *p = q->pr_alloc->a_malloc(64 + brng(&r) % 193);
    p[0] = (char)i;
    unsigned long h = atomic_load_explicit(&q->pr_head, memory_order_relaxed);
    /* acquire: the consumer's release of the tail says the slot is empty again */
    while (h - atomic_load_explicit(&q->pr_tail, memory_order_acquire) >= PC_RING)
      sched_yield();
    q->pr_buf[h % PC_RING] = p;
    /* release: the slot's pointer (and the block's contents) before the new head */
    atomic_store_explicit(&q->pr_head, h + 1, memory_order_release);
  }
  return NULL;
}

static void *pc_consumer(void *arg)
{
  struct pc_ring *q = arg;
  for (long i = 0; i < q->pr_n; i++) {
    unsigned long t = atomic_load_explicit(&q->pr_tail, memory_order_relaxed);
    /* acquire: pairs with the producer's release of the head */
    while (atomic_load_explicit(&q->pr_head, memory_order_acquire) == t)
      sched_yield();
    char *p = q->pr_buf[t % PC_RING];
    bench_sink += (uintptr_t)p[0];
    q->pr_alloc->a_free(p);
    atomic_store_explicit(&q->pr_tail, t + 1, memory_order_release);
  }
  return NULL;
}

static double w_prodcons(const alloc_t *a)
{
  static struct pc_ring q[PC_PAIRS];
  pthread_t t[2 * PC_PAIRS];
  uint64_t t0 = bench_now_ns();
  for (int i = 0; i < PC_PAIRS; i++) {
    atomic_store(&q[i].pr_head, 0);
    atomic_store(&q[i].pr_tail, 0);
    q[i].pr_alloc = a;
    q[i].pr_n = scaled(1000000);
    pthread_create(&t[2 * i], NULL, pc_producer, &q[i]);
    pthread_create(&t[2 * i + 1], NULL, pc_consumer, &q[i]);
  }
  for (int i = 0; i < 2 * PC_PAIRS; i++)
    pthread_join(t[i], NULL);
  return (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- realloc growth -------------------------------------------------------------------------- */
static double w_realloc(const alloc_t *a)
{
  long reps = scaled(60);
  uint64_t t0 = bench_now_ns();
  for (long rep = 0; rep < reps; rep++) {
    /* a string built a few bytes at a time */
    size_t n = 16;
    char *s = a->a_malloc(n);
    for (size_t len = 0; len < (256u << 10); len += 24) {
      if (len + 24 > n) {
        n = len + 24;
        s = a->a_realloc(s, n);
      }
      memset(s + len, 'x', 24);
    }
    bench_sink += (uintptr_t)s[100];
    a->a_free(s);
    /* vectors grown by doubling */
    for (int v = 0; v < 64; v++) {
      size_t cap = 8;
      long *vec = a->a_malloc(cap * sizeof(long));
      for (size_t i = 0; i < 4096; i++) {
        if (i == cap) {
          cap *= 2;
          vec = a->a_realloc(vec, cap * sizeof(long));
        }
        vec[i] = (long)i;
      }
      bench_sink += (uintptr_t)vec[4095];
      a->a_free(vec);
    }
  }
  return (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- deferred frees -------------------------------------------------------------------------- */
#define DEF_THREADS 2
#define DEF_SLOTS   2048
struct dobj {
  struct prd_rcu_head d_head;   /* first: the callback gets the block back from it */
  const alloc_t *d_alloc;
};

/* prd_free_deferred of the preloaded libprudence-malloc (set by run_one), used for plain
 * malloc's blocks; prd_malloc's blocks use this program's own prd_free_deferred */
static void (*def_preloaded_free_deferred)(void *);

static void def_cb(struct prd_rcu_head *h)
{
  struct dobj *o = (struct dobj *)h;
  o->d_alloc->a_free(o);
}

/* A worker thread's share of a workload (deferred, bigmix): its allocator, number and steps. */
struct work_arg {
  const alloc_t *wa_alloc;
  unsigned wa_id;
  long wa_ops;
};

static void *def_thread(void *arg)
{
  struct work_arg *da = arg;
  const alloc_t *a = da->wa_alloc;
  void (*free_deferred)(void *) = a == &alloc_prd ? prd_free_deferred
                                                  : def_preloaded_free_deferred;
  void *slot[DEF_SLOTS] = { 0 };
  brng_t r = { 0x1234567887654321ull * (da->wa_id + 1) };
  for (long i = 0; i < da->wa_ops; i++) {
    unsigned k = (unsigned)(brng(&r) % DEF_SLOTS);
    struct dobj *old = slot[k];
    if (old != NULL) {
      if (brng(&r) & 1)
        a->a_free(old);
      else if (free_deferred != NULL)
        free_deferred(old);
      else
        prd_call_rcu(&old->d_head, def_cb);
    }
    size_t n = 64 + brng(&r) % 4033;
    struct dobj *o = a->a_malloc(n);
    o->d_alloc = a;
    slot[k] = o;
  }
  for (unsigned k = 0; k < DEF_SLOTS; k++)
    a->a_free(slot[k]);
  return NULL;
}

/* Runs n (at most WORKERS_MAX) threads of fn, each with ops steps, and waits for them. */
#define WORKERS_MAX 8
static void run_workers(const alloc_t *a, unsigned n, long ops, void *(*fn)(void *))
{
  pthread_t t[WORKERS_MAX];
  struct work_arg args[WORKERS_MAX];
  for (unsigned i = 0; i < n; i++) {
    args[i] = (struct work_arg){ a, i, ops };
    pthread_create(&t[i], NULL, fn, &args[i]);
  }
  for (unsigned i = 0; i < n; i++)
    pthread_join(t[i], NULL);
}

static double w_deferred(const alloc_t *a)
{
  uint64_t t0 = bench_now_ns();
  run_workers(a, DEF_THREADS, scaled(1000000), def_thread);
  prd_rcu_barrier();   /* every deferred free done: the time includes them */
  return (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- thread churn ---------------------------------------------------------------------------- */
#define THR_WAVE   4    /* threads alive at once */
#define THR_BLOCKS 8    /* blocks each allocates and frees */
struct thr_arg {
  const alloc_t *ta_alloc;
  unsigned ta_id;
};

static void *thr_short(void *arg)
{
  struct thr_arg *ta = arg;
  brng_t r = { 0x9e3779b97f4a7c15ull * (ta->ta_id + 1) };
  char *p[THR_BLOCKS];
  for (int i = 0; i < THR_BLOCKS; i++) {
    p[i] = ta->ta_alloc->a_malloc(16 + brng(&r) % 497);
    p[i][0] = (char)i;
  }
  for (int i = 0; i < THR_BLOCKS; i++) {
    bench_sink += (uintptr_t)p[i][0];
    ta->ta_alloc->a_free(p[i]);
  }
  return NULL;
}

/* The resident thread sleeps until the run ends (it takes no CPU from the churn). */
static pthread_mutex_t thr_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t thr_cv = PTHREAD_COND_INITIALIZER;
static bool thr_stop;   /* thr_lock */

static void *thr_resident(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&thr_lock);
  while (!thr_stop)
    pthread_cond_wait(&thr_cv, &thr_lock);
  pthread_mutex_unlock(&thr_lock);
  return NULL;
}

static double w_threads(const alloc_t *a)
{
  thr_stop = false;
  pthread_t res;
  pthread_create(&res, NULL, thr_resident, NULL);
  long waves = scaled(20000) / THR_WAVE;
  uint64_t t0 = bench_now_ns();
  for (long w = 0; w < waves; w++) {
    pthread_t t[THR_WAVE];
    struct thr_arg args[THR_WAVE];
    for (unsigned i = 0; i < THR_WAVE; i++) {
      args[i].ta_alloc = a;
      args[i].ta_id = (unsigned)(w * THR_WAVE) + i;
      pthread_create(&t[i], NULL, thr_short, &args[i]);
    }
    for (unsigned i = 0; i < THR_WAVE; i++)
      pthread_join(t[i], NULL);
  }
  double s = (double)(bench_now_ns() - t0) / 1e9;
  pthread_mutex_lock(&thr_lock);
  thr_stop = true;
  pthread_cond_signal(&thr_cv);
  pthread_mutex_unlock(&thr_lock);
  pthread_join(res, NULL);
  return s;
}

/* ---- big blocks ------------------------------------------------------------------------------ */
static double w_bigloop(const alloc_t *a)
{
  enum { WINDOW = 4, PAGE = 4096 };
  static char *slot[WINDOW];
  brng_t r = { 0x9e3779b97f4a7c15ull };
  long ops = scaled(3000);
  uint64_t t0 = bench_now_ns();
  for (long i = 0; i < ops; i++) {
    uint64_t x = brng(&r);
    int k = (int)(x % WINDOW);
    a->a_free(slot[k]);
    size_t sz = ((size_t)5 << 20) + (size_t)((x >> 8) % ((size_t)20 << 20));
    char *p = a->a_malloc(sz);
    for (size_t off = 0; off < sz; off += PAGE)
      memset(p + off, (int)i, sz - off < 64 ? sz - off : 64);
    slot[k] = p;
  }
  for (int k = 0; k < WINDOW; k++) {
    bench_sink += (uintptr_t)(slot[k] != NULL ? slot[k][0] : 0);
    a->a_free(slot[k]);
    slot[k] = NULL;
  }
  return (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- big and small blocks from several threads ----------------------------------------------- */
#define MIX_THREADS 4
#define MIX_WINDOW  512

static void *mix_thread(void *arg)
{
  struct work_arg *ma = arg;
  brng_t r = { 0x9e3779b97f4a7c15ull * (ma->wa_id + 1) };
  char *slot[MIX_WINDOW] = { NULL };
  for (long i = 0; i < ma->wa_ops; i++) {
    uint64_t x = brng(&r);
    int k = (int)(x % MIX_WINDOW);
    ma->wa_alloc->a_free(slot[k]);
    size_t sz = (x >> 16) % 8 == 0 ? 1 + (size_t)((x >> 20) % 300000)
                                   : 1 + (size_t)((x >> 20) % 2048);
    char *p = ma->wa_alloc->a_malloc(sz);
    memset(p, (int)i, sz < 512 ? sz : 512);
    slot[k] = p;
  }
  for (int k = 0; k < MIX_WINDOW; k++) {
    bench_sink += (uintptr_t)(slot[k] != NULL ? slot[k][0] : 0);
    ma->wa_alloc->a_free(slot[k]);
  }
  return NULL;
}

static double w_bigmix(const alloc_t *a)
{
  uint64_t t0 = bench_now_ns();
  run_workers(a, MIX_THREADS, scaled(200000), mix_thread);
  return (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- two sizes taking turns ------------------------------------------------------------------ */
static void alternate_turns(const alloc_t *a, size_t s0, size_t s1, long n, long turns)
{
  char **v = a->a_malloc((size_t)n * sizeof(char *));
  for (long t = 0; t < turns; t++) {
    size_t sz = t % 2 == 0 ? s0 : s1;
    for (long i = 0; i < n; i++) {
      v[i] = a->a_malloc(sz);
      v[i][0] = (char)i;
      v[i][sz - 1] = (char)t;
    }
    for (long i = 0; i < n; i++) {
      bench_sink += (uintptr_t)v[i][0];
      a->a_free(v[i]);
    }
  }
  a->a_free(v);
}

static double w_alternate(const alloc_t *a)
{
  long turns = scaled(200);
  uint64_t t0 = bench_now_ns();
  alternate_turns(a, 1000, 4000, 10000, turns);
  alternate_turns(a, 4000, 20000, 2000, turns);
  return (double)(bench_now_ns() - t0) / 1e9;
}

/* ---- driver ---------------------------------------------------------------------------------- */
static const struct workload {
  const char *wl_name;
  double (*wl_fn)(const alloc_t *);
} workloads[] = {
  { "random", w_random },
  { "larson", w_larson },
  { "prodcons", w_prodcons },
  { "realloc", w_realloc },
  { "deferred", w_deferred },
  { "threads", w_threads },
  { "bigloop", w_bigloop },
  { "bigmix", w_bigmix },
  { "alternate", w_alternate },
};

static const struct workload *find_workload(const char *name)
{
  for (size_t i = 0; i < PRD_ARRAY_SIZE(workloads); i++)
    if (strcmp(workloads[i].wl_name, name) == 0)
      return &workloads[i];
  return NULL;
}

/* One workload through plain malloc (the compare script's unit of measurement). */
static int run_one(const struct workload *w, bool json)
{
  /* under LD_PRELOAD=libprudence-malloc.so, its own prd_free_deferred (this program's static
   * copy of libprudence is another allocator instance, which does not own these blocks) */
  void *h = dlopen("libprudence-malloc.so", RTLD_NOLOAD | RTLD_LAZY);
  if (h != NULL)
    *(void **)&def_preloaded_free_deferred = dlsym(h, "prd_free_deferred");
  double s = w->wl_fn(&alloc_libc);
  long rss = bench_peak_rss_kb();
  if (json)
    printf("{\"bench\":\"malloc\",\"workload\":\"%s\",\"seconds\":%.4f,\"peak_rss_kb\":%ld}\n",
           w->wl_name, s, rss);
  else
    printf("%s: %.4f s, peak RSS %ld KiB\n", w->wl_name, s, rss);
  return 0;
}

static int bench_malloc_main(int argc, char **argv)
{
  struct bench_common bc = { .bc_rounds = ROUNDS_DEFAULT };
  argc = bench_parse_common(argc, argv, &bc);
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--workload") == 0)
      only = bench_arg_text(argv[0], "--workload", argv[++i], "a workload's name");
    else if (strcmp(argv[i], "--quick") == 0)
      bench_scale = 0.25;
    else if (strcmp(argv[i], "--scale") == 0)
      bench_scale = bench_arg_positive(argv[0], "--scale", argv[++i], 1000);
    else {
      fprintf(stderr, "prd-bench malloc: unknown argument %s (--workload NAME, --quick, "
              "--scale X)\n", argv[i]);
      return 2;
    }
  }
  if (bc.bc_smoke)
    bench_scale = 0.002;
  if (only != NULL) {
    const struct workload *w = find_workload(only);
    if (w == NULL) {
      fprintf(stderr, "prd-bench malloc: unknown workload %s\n", only);
      return 2;
    }
    return run_one(w, bc.bc_json);
  }
  int rounds = bc.bc_smoke ? 1 : bc.bc_rounds;
  if (!bc.bc_json)
    printf("malloc workloads in one process (seconds, median of %d interleaved rounds)\n"
           "  %-10s %10s %10s %8s\n", rounds, "workload", "libc", "prudence", "ratio");
  double logsum = 0;
  for (size_t w = 0; w < PRD_ARRAY_SIZE(workloads); w++) {
    double vl[BENCH_ROUNDS_MAX], vp[BENCH_ROUNDS_MAX];
    for (int r = 0; r < rounds; r++) {
      bench_progress(&bc, "malloc", workloads[w].wl_name, r, rounds);
      if (r % 2 == 0) {
        vl[r] = workloads[w].wl_fn(&alloc_libc);
        vp[r] = workloads[w].wl_fn(&alloc_prd);
      } else {
        vp[r] = workloads[w].wl_fn(&alloc_prd);
        vl[r] = workloads[w].wl_fn(&alloc_libc);
      }
    }
    double ml = bench_median(vl, (size_t)rounds), mp = bench_median(vp, (size_t)rounds);
    double ratio = ml > 0 ? mp / ml : 0;
    logsum += ratio > 0 ? __builtin_log(ratio) : 0;
    if (bc.bc_json)
      printf("{\"bench\":\"malloc\",\"workload\":\"%s\",\"libc_s\":%.4f,\"prudence_s\":%.4f,"
             "\"ratio\":%.3f}\n", workloads[w].wl_name, ml, mp, ratio);
    else
      printf("  %-10s %10.4f %10.4f %8.3f\n", workloads[w].wl_name, ml, mp, ratio);
  }
  double geo = __builtin_exp(logsum / (double)PRD_ARRAY_SIZE(workloads));
  if (bc.bc_json)
    printf("{\"bench\":\"malloc\",\"summary\":true,\"geomean_time_vs_libc\":%.3f}\n", geo);
  else
    printf("  geometric mean of prudence / libc: %.3f\n"
           "  (bench/compare-malloc.sh compares with jemalloc, mimalloc, tcmalloc, and RSS)\n",
           geo);
  return 0;
}

PRD_BENCH("malloc",
          "malloc family: random, larson, prodcons, realloc, deferred, threads, bigloop, bigmix workloads",
          bench_malloc_main)
