/*
 * test_decay.c: memory given back (cache.c section 4, slab.c section 6, vmem.c section 16).
 * Each case runs in a child of its own (options and RSS are per process) under a deadline:
 * it mallocs a few tens of MiB in several size classes, touches every byte, frees it all,
 * and reads its RSS from /proc/self/statm.  The bounds are loose (a quarter of what was
 * freed, or a fixed slack of a few MiB) so a loaded machine cannot fail them; the waits poll
 * up to a generous deadline and stop as soon as the RSS is down.
 *
 *   trim          prd__cache_trim (malloc_trim) gives it all back at once
 *   reap          prd_reap decommits the free heap pages at once (working sets kept)
 *   decay_thread  with decay_ms=500, the maintenance thread gives it back while the
 *                 program sleeps
 *   decay_alone   the same with one thread and maint_alone=1: the program frees and sleeps,
 *                 and no slow path runs the work inline; the memory it parked in depots asks
 *                 for the thread (magazine.c section 9); and with large blocks (pages of the
 *                 heap arena, no magazines): their frees ask for it (cache.c section 4)
 *   helper        the same without maint_alone, in a program with one more thread that never
 *                 calls the allocator (a server's idle helper): the process is multi-threaded
 *                 already, so the depots' call for the thread starts it (thread.c section 9)
 *   single        by default a single-threaded program stays single-threaded through all
 *                 that (maint.c section 2): no thread while it sleeps, and its next slow path
 *                 after the delay gives the memory back
 *   single_interval  the same with maint_interval at its default (15 s): the slow paths run
 *                 the decay job as often as the thread would (once a second), not once an
 *                 interval, so a program that goes on with other work gets its freed memory
 *                 back within a few decay periods (it waited for 15 s and more)
 *   decay_off     decay_ms=0: nothing is given back without a reap
 *   reuse         a phase of 640-byte blocks, freed, then a phase of 3-KiB blocks: with decay
 *                 the second phase reuses the first one's pages (no new RSS)
 *   sparse        blocks of 20,000 B (the heap's quantum caches, slabs of eight), seven of
 *                 every eight freed: the free ones, in slabs never wholly free, are
 *                 decommitted by the decay passes, and by malloc_trim at once (slab.c section 6)
 *
 * Each case but reuse turns off the bound on dirty free heap pages (vmem.c section 16, option
 * heap_dirty_pct), which would otherwise decommit most of what is freed at once and leave
 * nothing for the mechanism under test to give back (test_dirty checks the bound).
 *
 * Not in the sanitizer runs: their shadow memory of what was touched counts in the RSS and is
 * never given back.
 */
// prd-test-labels: unit no-asan no-tsan
#include <errno.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "internal.h"
#include "prd_test.h"

#define MIB ((size_t)1 << 20)
#define TOTAL (64 * MIB)   /* bytes each case allocates */
#define SLACK (8 * MIB)    /* what may stay: magazines, the depot's working set, metadata */

static size_t rss_bytes(void)
{
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, res = 0;
  if (f != NULL) {
    if (fscanf(f, "%lu %lu", &size, &res) != 2)
      res = 0;
    fclose(f);
  }
  return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

#define CAP ((size_t)1 << 17)   /* blocks at most: 64 MiB of 640-byte blocks is 104858 */
static void *blocks[CAP];     /* static: the bookkeeping is no part of what the library holds */
static size_t bsizes[CAP];
static size_t nblocks;

/* Mallocs `total` bytes in blocks of the sizes given (round robin, 0-terminated), each
 * touched. */
static void alloc_all(const size_t *sizes, size_t total)
{
  nblocks = 0;
  size_t got = 0, k = 0;
  while (sizes[k] != 0)
    k++;
  for (size_t i = 0; got < total && nblocks < CAP; i++) {
    size_t sz = sizes[i % k];
    void *p = prd_malloc(sz);
    if (p == NULL)
      break;
    memset(p, 0xa5, sz);
    bsizes[nblocks] = sz;
    blocks[nblocks++] = p;
    got += sz;
  }
}

/* Frees every block but one in KEEP of the heap arena's (16 KiB and up), which stay live so
 * that the 4 MiB blocks of the heap arena stay partly used: their free pages must be
 * decommitted, not unmapped with a wholly free block.  Returns the bytes kept live. */
#define KEEP 16
static size_t free_all(void)
{
  size_t kept = 0;
  for (size_t i = 0; i < nblocks; i++) {
    if (bsizes[i] >= (16 << 10) && i % KEEP == 0)
      kept += bsizes[i];
    else
      prd_free(blocks[i]);
  }
  nblocks = 0;
  return kept;
}

static const size_t mixed[] = { 64, 640, 2048, 8192, 48 << 10, 0 };

/* RSS after a warm-up (the library's own structures mapped), before the big allocation.
 * Turns the dirty bound off (see above) unless `bounded`. */
static size_t base_rss_bounded(bool bounded)
{
  if (!bounded && prd_option_set("heap_dirty_pct", "1000000") != 0)
    _exit(2);
  void *p = prd_malloc(100);
  prd_free(p);
  return rss_bytes();
}

static size_t base_rss(void)
{
  return base_rss_bounded(false);
}

/* Waits up to `seconds` for the RSS to fall to at most `bound`, driving the maintenance
 * work itself when `drive` (a single-threaded test has no maintenance thread). */
static size_t wait_rss(size_t bound, double seconds, bool drive)
{
  size_t r = rss_bytes();
  for (int i = 0; i < (int)(seconds * 20) && r > bound; i++) {
    usleep(50000);
    if (drive)
      prd__maint_tick();
    r = rss_bytes();
  }
  return r;
}

/* Zeroes the stack below the caller: a structure the next call leaves uninitialized reads
 * zeroes, not whatever an earlier call left there. */
static PRD_NOINLINE void stack_zero(void)
{
  volatile char buf[32768];
  for (size_t i = 0; i < sizeof(buf); i++)
    buf[i] = 0;
}

static int case_trim(void)
{
  size_t base = base_rss();
  alloc_all(mixed, TOTAL);
  size_t peak = rss_bytes();
  size_t kept = free_all();
  errno = 12345;   /* malloc_trim and prd_reap leave errno alone, as glibc's trim does */
  stack_zero();
  size_t released = prd__cache_trim();
  int trim_errno = errno;
  stack_zero();
  prd_reap();
  int reap_errno = errno;
  size_t after = rss_bytes();
  printf("# trim: base %zu MiB, peak %zu MiB, live %zu MiB, after %zu MiB, released %zu MiB, "
         "errno after trim %d, after reap %d\n", base / MIB, peak / MIB, kept / MIB, after / MIB,
         released / MIB, trim_errno, reap_errno);
  fflush(stdout);
  return peak >= base + TOTAL / 2 && released >= TOTAL / 2 && after <= base + kept + SLACK &&
                 trim_errno == 12345 && reap_errno == 12345
             ? 0
             : 1;
}

static int case_reap(void)
{
  static const size_t big[] = { 48 << 10, 96 << 10, 0 };   /* pages of the heap arena */
  size_t base = base_rss();
  alloc_all(big, TOTAL);
  size_t peak = rss_bytes();
  size_t kept = free_all();
  size_t before = rss_bytes();
  prd_reap();
  size_t after = rss_bytes();
  printf("# reap: base %zu MiB, peak %zu MiB, live %zu MiB, after free %zu MiB, after prd_reap "
         "%zu MiB\n", base / MIB, peak / MIB, kept / MIB, before / MIB, after / MIB);
  fflush(stdout);
  return peak >= base + TOTAL / 2 && before >= base + TOTAL / 2 && after <= base + kept + SLACK
             ? 0
             : 1;
}

static _Atomic bool second_stop;
static int task_count(void);

static void *second_thread(void *arg)
{
  (void)arg;
  prd_free(prd_malloc(100));   /* a second application thread: the maintenance thread starts */
  while (!atomic_load(&second_stop))   /* and lives on, as a server's idle worker */
    usleep(10000);
  return NULL;
}

/* With decay_ms=500 and a second thread running fn: the RSS before, at the peak, what stays
 * allocated, after the delay (waited for until within SLACK of what stays), and the
 * process's threads then (the maintenance thread among them). */
struct beside { size_t base, peak, kept, after; int threads; };
static int decay_beside(void *(*fn)(void *), const size_t *sizes, struct beside *r)
{
  if (prd_option_set("decay_ms", "500") != 0)   /* maint_interval stays 15 s: idle depots */
    return 2;
  r->base = base_rss();
  pthread_t t;
  if (pthread_create(&t, NULL, fn, NULL) != 0)
    return 3;
  alloc_all(sizes, TOTAL);
  r->peak = rss_bytes();
  r->kept = free_all();
  r->after = wait_rss(r->base + r->kept + SLACK, 20, false);
  r->threads = task_count();
  atomic_store(&second_stop, true);
  pthread_join(t, NULL);
  return 0;
}

static int case_decay_thread(void)
{
  struct beside r;
  int rc = decay_beside(second_thread, mixed, &r);
  if (rc != 0)
    return rc;
  printf("# decay_thread: base %zu MiB, peak %zu MiB, live %zu MiB, after the delay %zu MiB\n",
         r.base / MIB, r.peak / MIB, r.kept / MIB, r.after / MIB);
  fflush(stdout);
  return r.peak >= r.base + TOTAL / 2 && r.after <= r.base + r.kept + SLACK ? 0 : 1;
}

static int case_decay_alone(void)
{
  static const size_t classes[] = { 64, 640, 2048, 8192, 0 };   /* all through the magazines */
  if (prd_option_set("decay_ms", "500") != 0 || prd_option_set("maint_alone", "1") != 0)
    return 2;
  size_t base = base_rss();
  alloc_all(classes, TOTAL);
  size_t peak = rss_bytes();
  (void)free_all();
  size_t after = wait_rss(base + SLACK, 20, false);
  printf("# decay_alone: base %zu MiB, peak %zu MiB, after the delay %zu MiB\n", base / MIB,
         peak / MIB, after / MIB);
  fflush(stdout);
  return peak >= base + TOTAL / 2 && after <= base + SLACK ? 0 : 1;
}

static void *helper_thread(void *arg)
{
  (void)arg;
  while (!atomic_load(&second_stop))   /* never allocates: counted by the kernel alone */
    usleep(10000);
  return NULL;
}

static int case_helper(void)
{
  static const size_t classes[] = { 64, 640, 2048, 8192, 0 };
  struct beside r;
  int rc = decay_beside(helper_thread, classes, &r);
  if (rc != 0)
    return rc;
  printf("# helper: base %zu MiB, peak %zu MiB, live %zu MiB, after the delay %zu MiB, "
         "threads %d\n", r.base / MIB, r.peak / MIB, r.kept / MIB, r.after / MIB, r.threads);
  fflush(stdout);
  return r.peak >= r.base + TOTAL / 2 && r.after <= r.base + r.kept + SLACK && r.threads == 3
             ? 0
             : 1;
}

static int case_decay_alone_big(void)
{
  static const size_t big[] = { 48 << 10, 96 << 10, 0 };
  if (prd_option_set("decay_ms", "500") != 0 || prd_option_set("maint_alone", "1") != 0)
    return 2;
  size_t base = base_rss();
  alloc_all(big, TOTAL);
  size_t peak = rss_bytes();
  size_t kept = free_all();
  size_t after = wait_rss(base + kept + SLACK, 20, false);
  printf("# decay_alone_big: base %zu MiB, peak %zu MiB, live %zu MiB, after the delay %zu "
         "MiB\n", base / MIB, peak / MIB, kept / MIB, after / MIB);
  fflush(stdout);
  return peak >= base + TOTAL / 2 && after <= base + kept + SLACK ? 0 : 1;
}

/* The process's threads, from /proc/self/task. */
static int task_count(void)
{
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (d == NULL)
    return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static int case_single(void)
{
  if (prd_option_set("decay_ms", "500") != 0 || prd_option_set("maint_interval", "100") != 0)
    return 2;
  size_t base = base_rss();
  alloc_all(mixed, TOTAL);
  size_t peak = rss_bytes();
  size_t kept = free_all();
  usleep(1500000);   /* three decay periods asleep: a thread would have given it back */
  int threads = task_count();
  size_t asleep = rss_bytes();
  /* the next slow paths (a big block's free asks for the decay) run it inline */
  size_t after = asleep;
  for (int i = 0; i < 40 && after > base + kept + SLACK; i++) {
    prd_free(prd_malloc(100000));
    usleep(50000);
    after = rss_bytes();
  }
  printf("# single: base %zu MiB, peak %zu MiB, live %zu MiB, threads %d, asleep %zu MiB, "
         "after slow paths %zu MiB\n", base / MIB, peak / MIB, kept / MIB, threads,
         asleep / MIB, after / MIB);
  fflush(stdout);
  return peak >= base + TOTAL / 2 && threads == 1 && after <= base + kept + SLACK ? 0 : 1;
}

static int case_single_interval(void)
{
  if (prd_option_set("decay_ms", "500") != 0)   /* maint_interval stays 15 s */
    return 2;
  size_t base = base_rss();
  alloc_all(mixed, TOTAL);
  size_t peak = rss_bytes();
  size_t kept = free_all();
  /* the program goes on: slow paths every 50 ms for at most 12 s */
  size_t after = rss_bytes();
  int ms = 0;
  for (; ms < 12000 && after > base + kept + SLACK; ms += 50) {
    prd_free(prd_malloc(100000));
    usleep(50000);
    after = rss_bytes();
  }
  printf("# single_interval: base %zu MiB, peak %zu MiB, live %zu MiB, threads %d, after %d ms "
         "of slow paths %zu MiB\n", base / MIB, peak / MIB, kept / MIB, task_count(), ms,
         after / MIB);
  fflush(stdout);
  return peak >= base + TOTAL / 2 && after <= base + kept + SLACK ? 0 : 1;
}

static int case_decay_off(void)
{
  if (prd_option_set("decay_ms", "0") != 0 || prd_option_set("maint_interval", "100") != 0)
    return 2;
  size_t base = base_rss();
  alloc_all(mixed, TOTAL);
  size_t peak = rss_bytes();
  size_t kept = free_all();
  size_t after = wait_rss(0, 1.5, true);   /* 1.5 s of maintenance ticks and jobs */
  printf("# decay_off: base %zu MiB, peak %zu MiB, live %zu MiB, after 1.5 s %zu MiB\n",
         base / MIB, peak / MIB, kept / MIB, after / MIB);
  fflush(stdout);
  return peak >= base + TOTAL / 2 && after >= base + kept + TOTAL / 2 ? 0 : 1;
}

static int case_reuse(void)
{
  if (prd_option_set("decay_ms", "200") != 0 || prd_option_set("maint_interval", "100") != 0)
    return 2;
  static const size_t small[] = { 640, 0 }, other[] = { 3072, 0 };
  size_t base = base_rss_bounded(true);
  alloc_all(small, TOTAL);
  size_t peak1 = rss_bytes();
  (void)free_all();
  /* the decay delay passes: the 640-byte slabs go back to the heap arena */
  for (int i = 0; i < 20; i++) {
    usleep(50000);
    prd__maint_tick();
  }
  alloc_all(other, TOTAL);
  size_t peak2 = rss_bytes();
  (void)free_all();
  printf("# reuse: base %zu MiB, 640 B phase %zu MiB, then 3 KiB phase %zu MiB\n", base / MIB,
         peak1 / MIB, peak2 / MIB);
  fflush(stdout);
  return peak1 >= base + TOTAL / 2 && peak2 <= peak1 + SLACK ? 0 : 1;
}

/* Pages of the blocks v[i] (i % 8 != 0, `size` bytes each) that are resident. */
static size_t resident_freed(void **v, size_t n, size_t size)
{
  size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (size + page - 1) / page, in = 0;
  unsigned char vec[64];
  for (size_t i = 0; i < n; i++) {
    if (i % 8 == 0 || ((uintptr_t)v[i] & (page - 1)) != 0 || pages > sizeof(vec))
      continue;
    if (mincore(v[i], pages * page, vec) != 0)
      continue;
    for (size_t k = 0; k < pages; k++)
      in += vec[k] & 1;
  }
  return in;
}

static int case_sparse(void)
{
  enum { SIZE = 20000, N = 2048 };   /* 40 MB: 256 slabs of eight */
  if (prd_option_set("decay_ms", "200") != 0 || prd_option_set("maint_interval", "100") != 0)
    return 2;
  size_t rounds[2];
  for (int r = 0; r < 2; r++) {
    for (size_t i = 0; i < N; i++) {
      blocks[i] = prd_malloc(SIZE);
      if (blocks[i] == NULL)
        return 3;
      memset(blocks[i], 1, SIZE);
    }
    for (size_t i = 0; i < N; i++)
      if (i % 8 != 0)
        prd_free(blocks[i]);
    size_t before = resident_freed(blocks, N, SIZE);
    if (r == 0) {
      (void)prd__cache_trim();
    } else {
      for (int k = 0; k < 20 && resident_freed(blocks, N, SIZE) > before / 8; k++) {
        usleep(100000);
        prd__maint_tick();
      }
    }
    rounds[r] = resident_freed(blocks, N, SIZE);
    printf("# sparse, %s: %zu of the freed blocks' pages resident, %zu after\n",
           r == 0 ? "malloc_trim" : "decay", before, rounds[r]);
    fflush(stdout);
    if (before < N * 4)
      return 4;   /* what was freed was resident: the test means something */
    for (size_t i = 0; i < N; i += 8)
      prd_free(blocks[i]);
  }
  return rounds[0] <= N / 2 && rounds[1] <= N / 2 ? 0 : 1;
}

static void test_trim(void) { CHECK_EQ(prd_test_bounded(case_trim, "trim", 60), 0); }
static void test_reap(void) { CHECK_EQ(prd_test_bounded(case_reap, "reap", 60), 0); }
static void test_decay_thread(void)
{
  CHECK_EQ(prd_test_bounded(case_decay_thread, "decay_thread", 60), 0);
}
static void test_decay_alone(void)
{
  CHECK_EQ(prd_test_bounded(case_decay_alone, "decay_alone", 60), 0);
}
static void test_helper(void) { CHECK_EQ(prd_test_bounded(case_helper, "helper", 60), 0); }
static void test_decay_alone_big(void)
{
  CHECK_EQ(prd_test_bounded(case_decay_alone_big, "decay_alone_big", 60), 0);
}
static void test_single(void) { CHECK_EQ(prd_test_bounded(case_single, "single", 60), 0); }
static void test_single_interval(void)
{
  CHECK_EQ(prd_test_bounded(case_single_interval, "single_interval", 60), 0);
}
static void test_decay_off(void) { CHECK_EQ(prd_test_bounded(case_decay_off, "decay_off", 60), 0); }
static void test_reuse(void) { CHECK_EQ(prd_test_bounded(case_reuse, "reuse", 60), 0); }
static void test_sparse(void) { CHECK_EQ(prd_test_bounded(case_sparse, "sparse", 60), 0); }

int main(void)
{
  RUN(test_trim);
  RUN(test_reap);
  RUN(test_decay_thread);
  RUN(test_decay_alone);
  RUN(test_decay_alone_big);
  RUN(test_helper);
  RUN(test_single);
  RUN(test_single_interval);
  RUN(test_decay_off);
  RUN(test_reuse);
  RUN(test_sparse);
  return prd_test_done();
}
