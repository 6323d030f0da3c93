/* prd-bench threads: how the malloc family scales with threads, against glibc, jemalloc and
 * mimalloc in the same run.  Every workload calls plain malloc and free, and every run is a
 * fresh process of this program (re-executed with LD_PRELOAD set to the allocator's library,
 * unset for glibc), so that each run's placement varies as it does for users.
 *
 *   prd-bench threads [--workloads loop,prodcons,larson] [--threads 1,2,4] [--runs N]
 *                     [--seconds S] [--allocators glibc,jemalloc,mimalloc,prudence]
 *                     [--prudence-lib PATH] [--sharing] [--sharing-ops N] [--json] [--smoke]
 *   (--workloads none with --sharing: the sharing count alone)
 *
 * The workloads (each thread counts its operations until the run's time is up):
 *   loop      the per-thread small-block loop: each thread frees a random slot of its own
 *             array of 1,024 pointers and mallocs a block of 8 - 512 B into it, writing its
 *             first and last byte; no block crosses threads.  One operation: a free and a
 *             malloc.
 *   prodcons  producer/consumer hand-off: thread i mallocs blocks of 8 - 512 B (writing
 *             them) into a single-producer ring of 1,024 slots read by thread i + 1 (mod T:
 *             with one thread, its own ring), up to 32 at a time while there is room, and
 *             frees the blocks its own ring brings; it yields when it could do neither (its
 *             consumer is not running), so no work is dropped.  One operation: a block freed
 *             by the thread it was handed to.
 *   larson    larson-like churn: as loop (8 - 512 B, 1,024 slots each), but one replaced
 *             block in eight is handed to the next thread's ring instead of freed (freed here
 *             when that ring is full), and each thread frees what its ring brings: threads
 *             replace random blocks and free some of each other's.  One operation: a
 *             replacement.
 * The harness writes nothing shared while it runs (each consumer sums what it reads in a
 * local), so the only lines threads share are the rings' and the allocator's.
 * Thread counts: 1, 2, 4 ... up to the online CPUs (sysconf), or --threads LIST.  Each
 * (workload, threads) point runs --runs times (default 6) per allocator, for --seconds
 * (default 1) each, in rounds: round r runs every allocator once, in an order rotated by r,
 * so that none always runs first.  Reported per point: the worst run and the median, in
 * million operations per second.  Allocators: glibc; jemalloc and mimalloc when installed
 * (the Debian libraries bench/common.sh names; a missing one is skipped and named on
 * stderr); prudence, the libprudence-malloc.so beside this program's build (../lib from
 * the directory of this executable), or --prudence-lib PATH.
 *
 * --sharing: the loop workload once more per allocator, run, and thread count of 2 or more,
 * for --sharing-ops operations per thread (default 1,000,000; a count, not a time, so the
 * figure does not depend on the machine's load), counting for each block handed out whether
 * one of the 64-byte lines it covers (its requested bytes, the ones the thread writes) also
 * holds a block live in another thread at that moment: the false sharing an allocator
 * creates between threads that share nothing.  Each thread keeps a count of its live blocks
 * per line in a table of its own (indexed by line address modulo 2^22: lines 256 MiB apart
 * share an entry, which can only over-count), which the others read.  Reported: the median
 * and the largest fraction of shared-line hand-outs over the runs.
 *
 * --json: one line per (workload, allocator, threads):
 *   {"bench":"threads","workload":"loop","allocator":"prudence","threads":2,"worst":W,
 *    "median":M,"runs":[...]}                                   (Mops/s)
 * with --sharing one per (allocator, threads):
 *   {"bench":"threads","workload":"loop-sharing","allocator":"prudence","threads":2,
 *    "shared_median":F,"shared_max":G,"runs":[...]}             (fractions of hand-outs)
 * then the summary (null where a point was not measured):
 *   {"bench":"threads","summary":true,"min_scaling_2t":X,"ratio_vs_best_2t":Y,
 *    "larson_ratio_vs_best":Z,"prodcons_min_scaling_2t":..,"larson_min_scaling_2t":..,
 *    "prodcons_ratio_vs_best_2t":..,"larson_ratio_vs_best_2t":..,"larson_threads":N,
 *    "shared_frac_2t":S,"shared_frac_best_peer_2t":P,"allocators":"..."}
 *   X: prudence's worst 2-thread loop run over its 1-thread loop median (ideal: 2);
 *   Y: prudence's 2-thread loop median over the best peer's 2-thread loop median;
 *   Z: prudence's larson median over the best peer's at the most threads measured (N);
 *   the prodcons_ and larson_ keys: the same as X and Y for those workloads;
 *   S, P: the median shared-line fraction at 2 threads, prudence's and the lowest peer's.
 * --smoke: 50 ms runs, one run, threads 1 and 2, sharing at 20,000 operations.
 * Internal: `prd-bench threads --child WORKLOAD THREADS SECONDS SHARING_OPS` is one run in
 * this process; it prints "ops N ns N handouts N shared N".
 */
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define TH_SLOTS    1024          /* each thread's array of pointers */
#define TH_MIN      8             /* block sizes: TH_MIN .. TH_MAX bytes */
#define TH_MAX      512
#define TH_RING     1024          /* a ring's slots (a power of two) */
#define TH_BATCH    32            /* prodcons: blocks produced, then consumed, per step */
#define TH_HANDOFF  8             /* larson: one replacement in this many hands its block on */
#define TH_CHECK    256           /* operations between two looks at the stop flag */
#define TH_LINES    (1u << 22)    /* sharing: entries of each thread's line table */
#define TH_MAXRUNS  64
#define TH_MAXTHR   16            /* thread counts in one list */
#define TH_NALLOC   4

static volatile uintptr_t th_sink;

static inline uint64_t th_rand(uint64_t *s)
{
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

/* ---- one run (the child) ------------------------------------------------------------------ */
/* A single-producer single-consumer ring of block pointers.  The producer publishes its head
 * with release after writing the slots (and the blocks); the consumer reads it with acquire
 * before reading them, and releases its tail after taking them, which the producer's acquire
 * load pairs with before it writes those slots again. */
struct th_ring {
  _Alignas(64) _Atomic unsigned long r_head;   /* the producer's */
  _Alignas(64) _Atomic unsigned long r_tail;   /* the consumer's */
  _Alignas(64) void *r_slot[TH_RING];
};

struct th_thread {
  _Alignas(64) struct th_run *t_run;
  unsigned t_id;
  uint64_t t_ops;
  uint64_t t_handouts, t_shared;
  uint64_t t_end_ns;
  uintptr_t t_sink;            /* what the consumer read of its blocks */
  pthread_t t_th;
  void *t_slot[TH_SLOTS];
  struct th_ring t_ring;       /* what the previous thread hands this one */
};

struct th_run {
  int tr_workload;             /* 0 loop, 1 prodcons, 2 larson */
  unsigned tr_threads;
  uint64_t tr_sharing_ops;     /* loop with the sharing count: operations per thread */
  pthread_barrier_t tr_start;
  _Alignas(64) _Atomic int tr_stop;
  _Alignas(64) uint64_t tr_start_ns;
  struct th_thread *tr_thr;
  _Atomic uint8_t *tr_lines;   /* sharing: tr_threads tables of TH_LINES counts */
};

static const char *const th_wnames[] = { "loop", "prodcons", "larson" };

static inline size_t th_size(uint64_t *s)
{
  return TH_MIN + th_rand(s) % (TH_MAX - TH_MIN + 1);
}

static inline char *th_malloc(size_t n)
{
  char *p = malloc(n);
  if (p == NULL) {
    fprintf(stderr, "prd-bench threads: out of memory\n");
    _exit(1);
  }
  p[0] = (char)n;
  p[n - 1] = (char)n;
  return p;
}

/* Sharing (loop with tr_sharing_ops): the lines of [p, p + n) in thread me's table go up or
 * down by one.  Relaxed: each table has one writer; readers want a recent value, no order. */
static void th_lines_add(struct th_run *run, unsigned me, const char *p, size_t n, int d)
{
  _Atomic uint8_t *t = run->tr_lines + (size_t)me * TH_LINES;
  for (uintptr_t l = (uintptr_t)p >> 6; l <= ((uintptr_t)p + n - 1) >> 6; l++) {
    _Atomic uint8_t *c = &t[l & (TH_LINES - 1)];
    atomic_store_explicit(c, (uint8_t)(atomic_load_explicit(c, memory_order_relaxed) + d),
                          memory_order_relaxed);
  }
}

/* Does a line of [p, p + n) hold a block live in another thread? */
static bool th_lines_shared(struct th_run *run, unsigned me, const char *p, size_t n)
{
  for (uintptr_t l = (uintptr_t)p >> 6; l <= ((uintptr_t)p + n - 1) >> 6; l++)
    for (unsigned o = 0; o < run->tr_threads; o++)
      if (o != me &&
          atomic_load_explicit(&run->tr_lines[(size_t)o * TH_LINES + (l & (TH_LINES - 1))],
                               memory_order_relaxed) != 0)
        return true;
  return false;
}

/* Puts p on the ring; false when the ring is full (the consumer is behind). */
static bool ring_put(struct th_ring *q, void *p)
{
  unsigned long h = atomic_load_explicit(&q->r_head, memory_order_relaxed);
  /* acquire: pairs with the consumer's release of the tail (the slot is free again) */
  if (h - atomic_load_explicit(&q->r_tail, memory_order_acquire) >= TH_RING)
    return false;
  q->r_slot[h & (TH_RING - 1)] = p;
  /* release: the slot and the block's bytes before the head that shows them */
  atomic_store_explicit(&q->r_head, h + 1, memory_order_release);
  return true;
}

/* Frees every block the ring holds (reading a byte of each into *sink: the consumer uses
 * what it is handed); returns how many. */
static uint64_t ring_drain(struct th_ring *q, uintptr_t *sink)
{
  unsigned long t = atomic_load_explicit(&q->r_tail, memory_order_relaxed);
  /* acquire: pairs with the producer's release of the head */
  unsigned long h = atomic_load_explicit(&q->r_head, memory_order_acquire);
  for (unsigned long i = t; i != h; i++) {
    char *p = q->r_slot[i & (TH_RING - 1)];
    *sink += (uintptr_t)p[0];
    free(p);
  }
  /* release: the slots are read before the producer may write them again */
  atomic_store_explicit(&q->r_tail, h, memory_order_release);
  return h - t;
}

static bool th_stopped(struct th_run *run, uint64_t ops)
{
  if (run->tr_sharing_ops != 0)
    return ops >= run->tr_sharing_ops;
  return (ops % TH_CHECK) == 0 && atomic_load_explicit(&run->tr_stop, memory_order_relaxed);
}

static void th_loop(struct th_thread *t, struct th_run *run, uint64_t *seed)
{
  bool share = run->tr_sharing_ops != 0;
  size_t size[TH_SLOTS];
  for (unsigned k = 0; k < TH_SLOTS; k++) {
    size[k] = th_size(seed);
    t->t_slot[k] = th_malloc(size[k]);
    if (share)
      th_lines_add(run, t->t_id, t->t_slot[k], size[k], 1);
  }
  pthread_barrier_wait(&run->tr_start);
  uint64_t ops = 0;
  do {
    for (unsigned i = 0; i < TH_CHECK; i++) {
      unsigned k = (unsigned)(th_rand(seed) % TH_SLOTS);
      if (share)
        th_lines_add(run, t->t_id, t->t_slot[k], size[k], -1);
      free(t->t_slot[k]);
      size_t n = th_size(seed);
      char *p = th_malloc(n);
      if (share) {
        t->t_handouts++;
        t->t_shared += th_lines_shared(run, t->t_id, p, n);
        th_lines_add(run, t->t_id, p, n, 1);
      }
      t->t_slot[k] = p;
      size[k] = n;
    }
    ops += TH_CHECK;
  } while (!th_stopped(run, ops));
  t->t_ops = ops;
}

/* The producer waits for room rather than drop work: when its consumer is behind (or not
 * running) it drains its own ring, and yields when that was empty too. */
static void th_prodcons(struct th_thread *t, struct th_run *run, uint64_t *seed)
{
  struct th_ring *out = &run->tr_thr[(t->t_id + 1) % run->tr_threads].t_ring;
  uintptr_t sink = 0;
  char *next = NULL;
  pthread_barrier_wait(&run->tr_start);
  uint64_t ops = 0;
  do {
    unsigned put = 0;
    for (; put < TH_BATCH; put++) {
      if (next == NULL)
        next = th_malloc(th_size(seed));
      if (!ring_put(out, next))
        break;
      next = NULL;
    }
    uint64_t got = ring_drain(&t->t_ring, &sink);
    if (put == 0 && got == 0)
      sched_yield();
    ops += got;
  } while (!atomic_load_explicit(&run->tr_stop, memory_order_relaxed));
  free(next);
  t->t_ops = ops;
  t->t_sink = sink;
}

static void th_larson(struct th_thread *t, struct th_run *run, uint64_t *seed)
{
  struct th_ring *out = &run->tr_thr[(t->t_id + 1) % run->tr_threads].t_ring;
  uintptr_t sink = 0;
  for (unsigned k = 0; k < TH_SLOTS; k++)
    t->t_slot[k] = th_malloc(th_size(seed));
  pthread_barrier_wait(&run->tr_start);
  uint64_t ops = 0;
  do {
    for (unsigned i = 0; i < TH_CHECK; i++) {
      unsigned k = (unsigned)(th_rand(seed) % TH_SLOTS);
      /* a full ring: the next thread is behind, this block is freed here */
      if (i % TH_HANDOFF != 0 || !ring_put(out, t->t_slot[k]))
        free(t->t_slot[k]);
      t->t_slot[k] = th_malloc(th_size(seed));
    }
    ring_drain(&t->t_ring, &sink);
    ops += TH_CHECK;
  } while (!th_stopped(run, ops));
  t->t_ops = ops;
  t->t_sink = sink;
}

static void *th_main(void *arg)
{
  struct th_thread *t = arg;
  struct th_run *run = t->t_run;
  uint64_t seed = 0x9e3779b97f4a7c15ull * (t->t_id + 1);
  if (run->tr_workload == 0)
    th_loop(t, run, &seed);
  else if (run->tr_workload == 1)
    th_prodcons(t, run, &seed);
  else
    th_larson(t, run, &seed);
  t->t_end_ns = bench_now_ns();
  return NULL;
}

static int th_child(int workload, unsigned threads, double seconds, uint64_t sharing_ops)
{
  struct th_run run = { .tr_workload = workload, .tr_threads = threads,
                        .tr_sharing_ops = sharing_ops };
  /* the harness's own memory is mapped, not malloc'd: the allocator sees only the
   * workload's blocks */
  size_t bytes = threads * sizeof(struct th_thread);
  run.tr_thr = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (run.tr_thr == MAP_FAILED)
    return 1;
  if (sharing_ops != 0) {
    run.tr_lines = mmap(NULL, (size_t)threads * TH_LINES, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (run.tr_lines == MAP_FAILED)
      return 1;
  }
  pthread_barrier_init(&run.tr_start, NULL, threads + 1);
  for (unsigned i = 0; i < threads; i++) {
    run.tr_thr[i].t_run = &run;
    run.tr_thr[i].t_id = i;
    if (pthread_create(&run.tr_thr[i].t_th, NULL, th_main, &run.tr_thr[i]) != 0) {
      fprintf(stderr, "prd-bench threads: cannot create thread %u\n", i);
      return 1;
    }
  }
  pthread_barrier_wait(&run.tr_start);
  run.tr_start_ns = bench_now_ns();
  if (sharing_ops == 0) {
    uint64_t until = run.tr_start_ns + (uint64_t)(seconds * 1e9);
    for (uint64_t now; (now = bench_now_ns()) < until;) {
      uint64_t left = until - now;
      usleep((useconds_t)(left > 100000000u ? 100000 : left / 1000 + 1));
    }
    atomic_store_explicit(&run.tr_stop, 1, memory_order_relaxed);
  }
  uint64_t ops = 0, end = 0, handouts = 0, shared = 0;
  for (unsigned i = 0; i < threads; i++) {
    struct th_thread *t = &run.tr_thr[i];
    pthread_join(t->t_th, NULL);
    ops += t->t_ops;
    handouts += t->t_handouts;
    shared += t->t_shared;
    if (t->t_end_ns > end)
      end = t->t_end_ns;
  }
  for (unsigned i = 0; i < threads; i++) {   /* what is left, untimed */
    th_sink += run.tr_thr[i].t_sink;
    ring_drain(&run.tr_thr[i].t_ring, &run.tr_thr[i].t_sink);
    if (workload != 1)
      for (unsigned k = 0; k < TH_SLOTS; k++)
        free(run.tr_thr[i].t_slot[k]);
  }
  printf("ops %llu ns %llu handouts %llu shared %llu\n", (unsigned long long)ops,
         (unsigned long long)(end - run.tr_start_ns), (unsigned long long)handouts,
         (unsigned long long)shared);
  fflush(stdout);
  return 0;
}

/* ---- the driver (the parent) -------------------------------------------------------------- */
struct th_alloc {
  const char *a_name;
  char a_lib[1024];            /* LD_PRELOAD value; "" for glibc */
};

/* The allocators of --allocators that are there; returns how many. */
static int th_allocators(const char *list, const char *prudence_lib, struct th_alloc *a)
{
  static const char *const libdir = "/usr/lib/x86_64-linux-gnu";   /* as bench/common.sh */
  static const char *const je[] = { "libjemalloc.so.2", "libjemalloc.so", NULL };
  static const char *const mi[] = { "libmimalloc.so.2", "libmimalloc.so", NULL };
  int n = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", list);
  for (char *save = NULL, *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
    struct th_alloc *x = &a[n];
    x->a_lib[0] = '\0';
    const char *const *names = NULL;
    if (strcmp(w, "glibc") == 0)
      x->a_name = "glibc";
    else if (strcmp(w, "jemalloc") == 0)
      x->a_name = "jemalloc", names = je;
    else if (strcmp(w, "mimalloc") == 0)
      x->a_name = "mimalloc", names = mi;
    else if (strcmp(w, "prudence") == 0) {
      x->a_name = "prudence";
      if (prudence_lib != NULL)
        snprintf(x->a_lib, sizeof(x->a_lib), "%s", prudence_lib);
      else {
        char exe[900];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (len <= 0)
          return -1;
        exe[len] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL)
          *slash = '\0';
        snprintf(x->a_lib, sizeof(x->a_lib), "%s/../lib/libprudence-malloc.so", exe);
      }
      if (access(x->a_lib, R_OK) != 0) {
        fprintf(stderr, "prd-bench threads: %s not found (build it, or --prudence-lib)\n",
                x->a_lib);
        return -1;
      }
    } else {
      fprintf(stderr, "prd-bench threads: unknown allocator %s\n", w);
      return -1;
    }
    if (names != NULL) {
      for (int i = 0; names[i] != NULL && x->a_lib[0] == '\0'; i++) {
        snprintf(x->a_lib, sizeof(x->a_lib), "%s/%s", libdir, names[i]);
        if (access(x->a_lib, R_OK) != 0)
          x->a_lib[0] = '\0';
      }
      if (x->a_lib[0] == '\0') {
        fprintf(stderr, "prd-bench threads: %s not installed in %s: skipped\n", w, libdir);
        continue;
      }
    }
    if (++n == TH_NALLOC)
      break;
  }
  return n;
}

/* One run in a fresh process of this program under a's library: ops/s in *rate, and the
 * shared-line fraction in *frac when sharing_ops is not 0.  -1: the child failed. */
static int th_spawn(const struct th_alloc *a, int workload, unsigned threads, double seconds,
                    uint64_t sharing_ops, double *rate, double *frac)
{
  char wl[8], th[16], sec[32], sh[32];
  snprintf(wl, sizeof(wl), "%d", workload);
  snprintf(th, sizeof(th), "%u", threads);
  snprintf(sec, sizeof(sec), "%.3f", seconds);
  snprintf(sh, sizeof(sh), "%llu", (unsigned long long)sharing_ops);
  int fd[2];
  if (pipe(fd) != 0)
    return -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    if (a->a_lib[0] != '\0')
      setenv("LD_PRELOAD", a->a_lib, 1);
    else
      unsetenv("LD_PRELOAD");
    execl("/proc/self/exe", "prd-bench", "threads", "--child", wl, th, sec, sh, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char out[256];
  size_t len = 0;
  for (ssize_t r; len < sizeof(out) - 1 && (r = read(fd[0], out + len, sizeof(out) - 1 - len));)
    if (r > 0)
      len += (size_t)r;
    else if (errno != EINTR)
      break;
  out[len] = '\0';
  close(fd[0]);
  int st;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return -1;
  unsigned long long ops, ns, handouts, shared;
  if (sscanf(out, "ops %llu ns %llu handouts %llu shared %llu", &ops, &ns, &handouts,
             &shared) != 4 || ns == 0)
    return -1;
  *rate = (double)ops * 1e9 / (double)ns;
  *frac = handouts > 0 ? (double)shared / (double)handouts : 0;
  return 0;
}

static int th_parse_list(const char *s, unsigned *v, int max)
{
  int n = 0;
  char *end;
  while (*s != '\0') {
    if (!bench_digits_first(s))
      return -1;
    long x = strtol(s, &end, 10);
    if (x < 1 || x > 1024 || n == max)
      return -1;
    v[n++] = (unsigned)x;
    if ((*end != ',' && *end != '\0') || (*end == ',' && end[1] == '\0'))
      return -1;   /* a trailing comma too, as --sizes refuses it */
    s = *end == ',' ? end + 1 : end;
  }
  return n;
}

/* The results of one point: runs[allocator][run]. */
struct th_point {
  double p_v[TH_NALLOC][TH_MAXRUNS];
  double p_worst[TH_NALLOC], p_median[TH_NALLOC], p_max[TH_NALLOC];
  bool p_done;
};

static void th_stats(struct th_point *p, int nalloc, int runs)
{
  for (int a = 0; a < nalloc; a++) {
    double s[TH_MAXRUNS];
    memcpy(s, p->p_v[a], sizeof(double) * (size_t)runs);
    p->p_median[a] = bench_median(s, (size_t)runs);   /* sorts s */
    p->p_worst[a] = s[0];
    p->p_max[a] = s[runs - 1];
  }
  p->p_done = true;
}

static void th_print_point(bool json, const char *wname, const struct th_alloc *al, int nalloc,
                           unsigned threads, const struct th_point *p, int runs, bool sharing)
{
  for (int a = 0; a < nalloc; a++) {
    if (json) {
      if (sharing)
        printf("{\"bench\":\"threads\",\"workload\":\"%s\",\"allocator\":\"%s\",\"threads\":%u,"
               "\"shared_median\":%.4f,\"shared_max\":%.4f,\"runs\":[", wname, al[a].a_name,
               threads, p->p_median[a], p->p_max[a]);
      else
        printf("{\"bench\":\"threads\",\"workload\":\"%s\",\"allocator\":\"%s\",\"threads\":%u,"
               "\"worst\":%.3f,\"median\":%.3f,\"runs\":[", wname, al[a].a_name, threads,
               p->p_worst[a] / 1e6, p->p_median[a] / 1e6);
      for (int r = 0; r < runs; r++)
        printf(sharing ? "%s%.4f" : "%s%.3f", r ? "," : "",
               sharing ? p->p_v[a][r] : p->p_v[a][r] / 1e6);
      printf("]}\n");
    } else if (sharing) {
      printf("  %-10s %-9s %7u %12.4f %12.4f\n", wname, al[a].a_name, threads, p->p_median[a],
             p->p_max[a]);
    } else {
      printf("  %-10s %-9s %7u %12.2f %12.2f\n", wname, al[a].a_name, threads,
             p->p_worst[a] / 1e6, p->p_median[a] / 1e6);
    }
  }
  fflush(stdout);
}

/* The summary's number, or null. */
static void th_num(const char *key, double v, bool last)
{
  if (v > 0)
    printf("\"%s\":%.3f%s", key, v, last ? "" : ",");
  else
    printf("\"%s\":null%s", key, last ? "" : ",");
}

static int bench_threads_main(int argc, char **argv)
{
  struct bench_common bc = { 0 };
  argc = bench_parse_common(argc, argv, &bc);
  if (argc == 6 && strcmp(argv[1], "--child") == 0)
    return th_child(atoi(argv[2]), (unsigned)atoi(argv[3]), atof(argv[4]),
                    strtoull(argv[5], NULL, 10));
  const char *workloads = "loop,prodcons,larson", *allocs = "glibc,jemalloc,mimalloc,prudence";
  const char *threads_arg = NULL, *prudence_lib = NULL;
  int runs = bc.bc_rounds > 0 ? bc.bc_rounds : 6;
  double seconds = 1.0;
  bool sharing = false;
  long long sharing_ops = 1000000;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--workloads") == 0)
      workloads = bench_arg_text(argv[0], "--workloads", argv[++i],
                                 "a list of loop, prodcons, larson");
    else if (strcmp(argv[i], "--threads") == 0)
      threads_arg = bench_arg_text(argv[0], "--threads", argv[++i], "a list of thread counts");
    else if (strcmp(argv[i], "--runs") == 0)
      runs = (int)bench_arg_long(argv[0], "--runs", argv[++i], 1, TH_MAXRUNS);
    else if (strcmp(argv[i], "--seconds") == 0)
      seconds = bench_arg_positive(argv[0], "--seconds", argv[++i], 1e6);
    else if (strcmp(argv[i], "--allocators") == 0)
      allocs = bench_arg_text(argv[0], "--allocators", argv[++i],
                              "a list of glibc, jemalloc, mimalloc, prudence");
    else if (strcmp(argv[i], "--prudence-lib") == 0)
      prudence_lib = bench_arg_text(argv[0], "--prudence-lib", argv[++i],
                                    "the path of libprudence-malloc.so");
    else if (strcmp(argv[i], "--sharing") == 0)
      sharing = true;
    else if (strcmp(argv[i], "--sharing-ops") == 0)
      sharing_ops = bench_arg_long(argv[0], "--sharing-ops", argv[++i], 1, LONG_MAX);
    else {
      fprintf(stderr, "prd-bench threads: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  unsigned tlist[TH_MAXTHR];
  int nthr = 0;
  if (threads_arg != NULL) {
    nthr = th_parse_list(threads_arg, tlist, TH_MAXTHR);
  } else {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    for (unsigned t = 1; nthr < TH_MAXTHR; t *= 2) {
      tlist[nthr++] = t > (unsigned long)cpus ? (unsigned)cpus : t;
      if (t >= (unsigned long)cpus)
        break;
    }
  }
  if (bc.bc_smoke) {
    runs = 1;
    seconds = 0.05;
    sharing = true;
    sharing_ops = 20000;
    if (threads_arg == NULL) {
      tlist[0] = 1, tlist[1] = 2;
      nthr = 2;
    }
  }
  int wl[3], nwl = 0;
  char wbuf[128];
  snprintf(wbuf, sizeof(wbuf), "%s", strcmp(workloads, "none") == 0 ? "" : workloads);
  for (char *save = NULL, *w = strtok_r(wbuf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
    int k = 0;
    while (k < 3 && strcmp(w, th_wnames[k]) != 0)
      k++;
    if (k == 3 || nwl == 3) {
      fprintf(stderr, "prd-bench threads: workloads are loop, prodcons, larson\n");
      return 2;
    }
    wl[nwl++] = k;
  }
  if (nthr <= 0) {
    fprintf(stderr, "prd-bench threads: --threads '%s' is not a list of thread counts from 1 "
                    "to 1024 (%d at most)\n", threads_arg, TH_MAXTHR);
    return 2;
  }
  struct th_alloc al[TH_NALLOC];
  int nalloc = th_allocators(allocs, prudence_lib, al);
  if (nalloc <= 0)
    return 2;
  int ours = -1;
  for (int a = 0; a < nalloc; a++)
    if (strcmp(al[a].a_name, "prudence") == 0)
      ours = a;

  /* every point, runs rotated: [workload][thread index]; the sharing points last */
  static struct th_point pt[3][TH_MAXTHR], shp[TH_MAXTHR];
  memset(pt, 0, sizeof(pt));
  memset(shp, 0, sizeof(shp));
  int nsh = 0;
  for (int k = 0; k < nthr; k++)
    nsh += sharing && tlist[k] >= 2;
  int steps = runs * nalloc * (nwl * nthr + nsh), step = 0;
  if (!bc.bc_json)
    printf("prd-bench threads: %d runs of %.2f s per point, Mops/s (worst, median)\n"
           "  %-10s %-9s %7s %12s %12s\n", runs, seconds, "workload", "allocator", "threads",
           "worst", "median");
  for (int r = 0; r < runs; r++)
    for (int w = 0; w <= nwl; w++)
      for (int k = 0; k < nthr; k++) {
        bool shpass = w == nwl;
        if (shpass && (!sharing || tlist[k] < 2))
          continue;
        for (int i = 0; i < nalloc; i++) {
          int a = (i + r) % nalloc;
          double rate, frac;
          bench_progress(&bc, "threads", shpass ? "sharing" : th_wnames[wl[w]], ++step, steps);
          if (th_spawn(&al[a], shpass ? 0 : wl[w], tlist[k], seconds,
                       shpass ? (uint64_t)sharing_ops : 0, &rate, &frac) != 0) {
            fprintf(stderr, "prd-bench threads: a run of %s under %s with %u threads failed\n",
                    shpass ? "loop --sharing" : th_wnames[wl[w]], al[a].a_name, tlist[k]);
            return 1;
          }
          if (shpass)
            shp[k].p_v[a][r] = frac;
          else
            pt[w][k].p_v[a][r] = rate;
        }
      }
  for (int w = 0; w < nwl; w++)
    for (int k = 0; k < nthr; k++) {
      th_stats(&pt[w][k], nalloc, runs);
      th_print_point(bc.bc_json, th_wnames[wl[w]], al, nalloc, tlist[k], &pt[w][k], runs, false);
    }
  if (nsh > 0 && !bc.bc_json)
    printf("shared-line hand-outs of loop, %lld operations per thread (median, largest)\n",
           sharing_ops);
  for (int k = 0; k < nthr; k++)
    if (sharing && tlist[k] >= 2) {
      th_stats(&shp[k], nalloc, runs);
      th_print_point(bc.bc_json, "loop-sharing", al, nalloc, tlist[k], &shp[k], runs, true);
    }

  /* the summary: prudence against itself at one thread and against the best peer */
  double scal[3] = { 0 }, vs2[3] = { 0 }, vsmax[3] = { 0 }, shared2 = 0, shared_peer = 0;
  int k1 = -1, k2 = -1, kmax = 0;
  for (int k = 0; k < nthr; k++) {
    if (tlist[k] == 1 && k1 < 0)
      k1 = k;
    if (tlist[k] == 2 && k2 < 0)
      k2 = k;
    if (tlist[k] > tlist[kmax])
      kmax = k;
  }
  for (int w = 0; ours >= 0 && w < nwl; w++) {
    int x = wl[w];
    if (k1 >= 0 && k2 >= 0 && pt[w][k1].p_median[ours] > 0)
      scal[x] = pt[w][k2].p_worst[ours] / pt[w][k1].p_median[ours];
    for (int pass = 0; pass < 2; pass++) {
      int k = pass == 0 ? k2 : kmax;
      double best = 0;
      for (int a = 0; k >= 0 && a < nalloc; a++)
        if (a != ours && pt[w][k].p_median[a] > best)
          best = pt[w][k].p_median[a];
      double v = k >= 0 && best > 0 ? pt[w][k].p_median[ours] / best : 0;
      if (pass == 0)
        vs2[x] = v;
      else
        vsmax[x] = v;
    }
  }
  if (sharing && ours >= 0 && k2 >= 0) {
    shared2 = shp[k2].p_median[ours];
    shared_peer = -1;
    for (int a = 0; a < nalloc; a++)
      if (a != ours && (shared_peer < 0 || shp[k2].p_median[a] < shared_peer))
        shared_peer = shp[k2].p_median[a];
  }
  if (bc.bc_json) {
    printf("{\"bench\":\"threads\",\"summary\":true,");
    th_num("min_scaling_2t", scal[0], false);
    th_num("ratio_vs_best_2t", vs2[0], false);
    th_num("larson_ratio_vs_best", vsmax[2], false);
    th_num("prodcons_min_scaling_2t", scal[1], false);
    th_num("prodcons_ratio_vs_best_2t", vs2[1], false);
    th_num("larson_min_scaling_2t", scal[2], false);
    th_num("larson_ratio_vs_best_2t", vs2[2], false);
    printf("\"larson_threads\":%u,", tlist[kmax]);
    /* fractions may be 0: printed as they are when measured */
    if (sharing && ours >= 0 && k2 >= 0)
      printf("\"shared_frac_2t\":%.4f,\"shared_frac_best_peer_2t\":%.4f,", shared2,
             shared_peer < 0 ? 0 : shared_peer);
    else
      printf("\"shared_frac_2t\":null,\"shared_frac_best_peer_2t\":null,");
    printf("\"allocators\":\"");
    for (int a = 0; a < nalloc; a++)
      printf("%s%s", a ? " " : "", al[a].a_name);
    printf("\"}\n");
  } else if (ours >= 0) {
    printf("prudence: loop 2-thread worst / 1-thread median %.3f (goal >= 1.8), 2-thread median "
           "/ best peer's %.3f (goal >= 0.95); larson at %u threads / best peer's %.3f\n",
           scal[0], vs2[0], tlist[kmax], vsmax[2]);
  }
  return 0;
}

PRD_BENCH("threads", "scaling with threads: per-thread loop, producer/consumer, larson-like "
          "churn, against glibc, jemalloc, mimalloc (each run a fresh process)",
          bench_threads_main)
