/* Unit tests of the slab layer (src/slab.c): layouts, constructed state, coloring, lists,
 * reclaim, caches of integers, exhaustion, bad input, statistics. */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>

#include "internal.h"
#include "prd_test.h"
#include "slab.h"

static size_t page;

static prd_cache_stats_t stats_of(prd_cache_t *cp)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(cp, &st), 0);
  return st;
}

static void set_ws_ms(const char *ms)
{
  CHECK_EQ(prd_option_set("slab_working_set", ms), 0);
}

/* ---- creation and bad arguments ------------------------------------------------------------ */
static void test_create_bad_args(void)
{
  uint64_t r0 = prd__error_count();
  errno = 0;
  CHECK(prd_cache_create("x", 0, 0, NULL, NULL, NULL, NULL, NULL, 0) == NULL);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK(prd_cache_create("x", 16, 3, NULL, NULL, NULL, NULL, NULL, 0) == NULL);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK(prd_cache_create("x", 16, 2 * page, NULL, NULL, NULL, NULL, NULL, 0) == NULL);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK(prd_cache_create(NULL, 16, 0, NULL, NULL, NULL, NULL, NULL, 0) == NULL);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK(prd_cache_create("x", 16, 0, NULL, NULL, NULL, NULL, NULL, 0x40000000) == NULL);
  CHECK_EQ(errno, EINVAL);
  /* a cache of memory over an arena of integers: its slab is found not mapped and not used
   * (the first allocation faulted, writing a slab at 0x1000); the same arena serves a NOTOUCH
   * cache, and an arena of real memory with a quantum under a page serves a cache of memory */
  prd_vmem_t *ids = prd_vmem_create("ids", (void *)1, 100000, 1, NULL, NULL, NULL, 0, 0);
  CHECK(ids != NULL);
  prd_cache_t *mc = prd_cache_create("x_over_ids", 64, 0, NULL, NULL, NULL, NULL, ids, 0);
  CHECK(mc != NULL);
  if (mc != NULL) {
    uint64_t r2 = prd__error_count();
    errno = 0;
    CHECK(prd_cache_alloc(mc, PRD_NOSLEEP) == NULL);
    CHECK_EQ(errno, ENOMEM);
    CHECK(prd__error_count() > r2);
    prd_cache_destroy(mc);
  }
  prd_cache_t *idc = prd_cache_create("idc", 1, 1, NULL, NULL, NULL, NULL, ids, PRD_CACHE_NOTOUCH);
  CHECK(idc != NULL);
  if (idc != NULL) {
    void *id = prd_cache_alloc(idc, PRD_NOSLEEP);
    CHECK(id != NULL);
    prd_cache_free(idc, id);
    prd_cache_destroy(idc);
  }
  prd_vmem_destroy(ids);
  size_t msz = 1 << 20;
  char *mem = mmap(NULL, msz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(mem != MAP_FAILED);
  prd_vmem_t *a64 = prd_vmem_create("a64", mem, msz, 64, NULL, NULL, NULL, 0, 0);
  prd_cache_t *c64 = prd_cache_create("over_a64", 100, 0, NULL, NULL, NULL, NULL, a64, 0);
  CHECK(a64 != NULL && c64 != NULL);
  if (c64 != NULL) {
    char *o = prd_cache_alloc(c64, PRD_NOSLEEP);
    CHECK(o != NULL);
    if (o != NULL) {
      memset(o, 1, 100);
      prd_cache_free(c64, o);
    }
    prd_cache_destroy(c64);
  }
  prd_vmem_destroy(a64);
  munmap(mem, msz);
  CHECK(prd__error_count() >= r0 + 5);   /* each one reported */
  errno = 0;
  CHECK(prd_cache_alloc(NULL, 0) == NULL);
  CHECK_EQ(errno, EINVAL);
  prd_cache_t *cp = prd_cache_create("x", 16, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL);
  uint64_t r1 = prd__error_count();
  prd_cache_free(cp, NULL);   /* a no-op, not an error */
  CHECK_EQ(prd__error_count(), r1);
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  errno = 0;
  CHECK_EQ(prd_cache_stats(NULL, &st), -1);
  CHECK_EQ(errno, EINVAL);
  st.version = PRD_CACHE_STATS_VERSION + 1;
  CHECK_EQ(prd_cache_stats(cp, &st), -1);
  st.version = PRD_CACHE_STATS_VERSION;
  st.size = 4;
  CHECK_EQ(prd_cache_stats(cp, &st), -1);
  prd_cache_destroy(cp);
}

/* ---- layouts across sizes and alignments ------------------------------------------------- */
static int ctor_count, dtor_count;
static int ctor_fail;   /* the next ctor fails when set */

struct obj_hdr {
  uint32_t oh_magic;    /* constructed state */
};
#define OBJ_MAGIC 0x0b1ec7edu

static int count_ctor(void *buf, void *priv, int flags)
{
  (void)flags;
  CHECK(priv == (void *)&ctor_count);
  if (ctor_fail) {
    ctor_fail = 0;
    return -1;
  }
  CHECK(((struct obj_hdr *)buf)->oh_magic != OBJ_MAGIC);   /* never constructed twice */
  ctor_count++;
  ((struct obj_hdr *)buf)->oh_magic = OBJ_MAGIC;
  return 0;
}

static void count_dtor(void *buf, void *priv)
{
  CHECK(priv == (void *)&ctor_count);
  CHECK(((struct obj_hdr *)buf)->oh_magic == OBJ_MAGIC);
  ((struct obj_hdr *)buf)->oh_magic = 0;
  dtor_count++;
}

static void exercise_layout(size_t size, size_t align, bool ctor)
{
  char name[32];
  snprintf(name, sizeof(name), "l%zu_%zu%s", size, align, ctor ? "c" : "");
  prd_cache_t *cp = prd_cache_create(name, size, align, ctor ? count_ctor : NULL,
                                     ctor ? count_dtor : NULL, NULL, &ctor_count, NULL,
                                     PRD_CACHE_NODEBUG);
  CHECK(cp != NULL);
  if (cp == NULL)
    return;
  prd_cache_stats_t st = stats_of(cp);
  size_t a = st.align;   /* what was asked, or more: whole lines are aligned to the line */
  CHECK(a >= (align ? align : 8));
  CHECK(st.chunk_size >= size);
  CHECK(st.chunk_size % a == 0);
  CHECK(st.tail_waste <= 0.125);   /* internal fragmentation under 1/8 (002 §3.2) */
  CHECK(st.bufs_per_slab >= 1);
  size_t small_chunk = ctor ? PRD_P2ROUNDUP(size, 8) + 8 : PRD_MAX(size, 8);
  CHECK_EQ(st.large_layout, PRD_P2ROUNDUP(small_chunk, a) >= page / 8);
  if (!st.large_layout)
    CHECK_EQ(st.slab_size, page);
  size_t n = 2 * st.bufs_per_slab + 1;
  if (n > 2000)
    n = 2000;
  unsigned char **bufs = calloc(n, sizeof(*bufs));
  size_t hdr = ctor ? sizeof(struct obj_hdr) : 0;
  for (size_t i = 0; i < n; i++) {
    bufs[i] = prd_cache_alloc(cp, PRD_SLEEP);
    CHECK(bufs[i] != NULL);
    if (bufs[i] == NULL)
      return;
    CHECK(PRD_IS_P2ALIGNED(bufs[i], a));
    if (ctor)
      CHECK(((struct obj_hdr *)bufs[i])->oh_magic == OBJ_MAGIC);
    if (size > hdr)
      memset(bufs[i] + hdr, (int)(i & 0xff), size - hdr);   /* the whole object is usable */
  }
  for (size_t i = 0; i < n; i++) {   /* no two buffers overlap */
    for (size_t k = hdr; k < size; k += (size > 64 ? size / 7 : 1))
      if (bufs[i][k] != (unsigned char)(i & 0xff)) {
        CHECK(bufs[i][k] == (unsigned char)(i & 0xff));
        break;
      }
    if (ctor)
      CHECK(((struct obj_hdr *)bufs[i])->oh_magic == OBJ_MAGIC);
  }
  CHECK_EQ(prd__cache_check(cp), 0);
  st = stats_of(cp);
  CHECK_EQ(st.bufs_inuse, n);
  CHECK(st.slabs_full >= 2 || st.bufs_per_slab > n / 2);
  for (size_t i = 0; i < n; i++)
    prd_cache_free(cp, bufs[i]);
  CHECK_EQ(prd__cache_check(cp), 0);
  st = stats_of(cp);
  CHECK_EQ(st.bufs_inuse, 0);
  CHECK_EQ(st.slabs_free, st.slab_creates);
  free(bufs);
  prd_cache_destroy(cp);
}

static void test_layouts(void)
{
  static const size_t sizes[] = { 1, 2, 3, 7, 8, 9, 12, 15, 16, 24, 31, 32, 40, 48, 63, 64, 96,
                                  100, 127, 128, 200, 255, 256, 384, 400, 500, 504, 511, 512,
                                  513, 640, 1000, 1024, 1500, 2048, 3000, 4095, 4096, 4097,
                                  5000, 8191, 8192, 10000, 16384, 32768, 40000, 65536 };
  static const size_t aligns[] = { 0, 8, 16, 64, 512, 4096 };
  int c0 = ctor_count;
  for (size_t i = 0; i < PRD_ARRAY_SIZE(sizes); i++)
    for (size_t j = 0; j < PRD_ARRAY_SIZE(aligns); j++) {
      if (aligns[j] > page)
        continue;
      exercise_layout(sizes[i], aligns[j], false);
      if (sizes[i] >= sizeof(struct obj_hdr))
        exercise_layout(sizes[i], aligns[j], true);
    }
  CHECK(ctor_count > c0);
  CHECK_EQ(ctor_count, dtor_count);   /* destroy destructed every constructed object */
}

/* ---- constructed state ---------------------------------------------------------------------- */
/* Distinct buffers handed out so far: the objects that entered the cache. */
static void *distinct[4096];
static size_t ndistinct;

static void note_distinct(void *p)
{
  for (size_t i = 0; i < ndistinct; i++)
    if (distinct[i] == p)
      return;
  if (ndistinct < PRD_ARRAY_SIZE(distinct))
    distinct[ndistinct++] = p;
}

static void ctor_dtor_run(size_t size)
{
  ctor_count = dtor_count = 0;
  ndistinct = 0;
  prd_cache_t *cp = prd_cache_create("ctor", size, 0, count_ctor, count_dtor, NULL, &ctor_count,
                                     NULL, PRD_CACHE_NODEBUG);
  enum { N = 300 };
  void *b[N];
  for (int i = 0; i < N; i++)
    note_distinct(b[i] = prd_cache_alloc(cp, 0));
  CHECK_EQ(ctor_count, N);   /* once per object entering the cache */
  for (int i = 0; i < N; i++)
    prd_cache_free(cp, b[i]);
  CHECK_EQ(dtor_count, 0);   /* freeing keeps the constructed state */
  prd_rng_t rng = { 12345 };
  for (int r = 0; r < 20; r++) {
    int n = 1 + (int)prd_rng_below(&rng, N);
    for (int i = 0; i < n; i++) {
      note_distinct(b[i] = prd_cache_alloc(cp, 0));
      CHECK(((struct obj_hdr *)b[i])->oh_magic == OBJ_MAGIC);
    }
    for (int i = 0; i < n; i++)
      prd_cache_free(cp, b[n - 1 - i]);
  }
  /* exactly once per object: a buffer that comes back is not constructed again */
  CHECK_EQ(ctor_count, ndistinct);
  CHECK_EQ(dtor_count, 0);
  prd_cache_reap(cp);   /* inside the working set: nothing goes */
  CHECK_EQ(dtor_count, 0);
  set_ws_ms("0");
  prd_cache_reap(cp);
  set_ws_ms("15000");
  CHECK_EQ(dtor_count, ctor_count);   /* exactly once, when the slabs were destroyed */
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.slab_destroys, st.slab_creates);
  CHECK_EQ(st.bufs_total, 0);
  /* constructing again after the reap */
  int c0 = ctor_count;
  b[0] = prd_cache_alloc(cp, 0);
  CHECK_EQ(ctor_count, c0 + 1);
  prd_cache_free(cp, b[0]);
  prd_cache_destroy(cp);
  CHECK_EQ(dtor_count, ctor_count);
}

static void test_ctor_dtor_counting(void)
{
  ctor_dtor_run(48);     /* small layout */
  ctor_dtor_run(1000);   /* large layout */
}

static void ctor_fail_run(size_t size)
{
  ctor_count = dtor_count = 0;
  prd_cache_t *cp = prd_cache_create("cfail", size, 0, count_ctor, count_dtor, NULL,
                                     &ctor_count, NULL, PRD_CACHE_NODEBUG);
  void *a = prd_cache_alloc(cp, 0);
  CHECK(a != NULL);
  ctor_fail = 1;
  errno = 0;
  void *b = prd_cache_alloc(cp, PRD_NOSLEEP);
  CHECK(b == NULL);
  CHECK_EQ(errno, ENOMEM);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.alloc_fails, 1);
  CHECK_EQ(st.bufs_inuse, 1);
  b = prd_cache_alloc(cp, PRD_NOSLEEP);   /* the failed buffer is constructed now */
  CHECK(b != NULL && ((struct obj_hdr *)b)->oh_magic == OBJ_MAGIC);
  CHECK_EQ(ctor_count, 2);
  prd_cache_free(cp, a);
  prd_cache_free(cp, b);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
  CHECK_EQ(dtor_count, 2);
}

static void test_ctor_failure(void)
{
  ctor_fail_run(40);
  ctor_fail_run(2000);
}

/* ---- lists: the partial slab with the fewest free buffers first ------------------------------ */
static void test_fewest_free_first(void)
{
  prd_cache_t *cp = prd_cache_create("fewest", 256, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  prd_cache_stats_t st = stats_of(cp);
  size_t per = st.bufs_per_slab;
  CHECK(per >= 4);
  void **b = calloc(3 * per, sizeof(void *));
  for (size_t i = 0; i < 3 * per; i++)
    b[i] = prd_cache_alloc(cp, 0);
  /* slab 0: free 1 buffer; slab 1: free 3; slab 2: free 2 (slabs fill in order) */
  size_t freed[3] = { 1, 3, 2 };
  for (size_t s = 0; s < 3; s++)
    for (size_t k = 0; k < freed[s]; k++) {
      prd_cache_free(cp, b[s * per + k]);
      b[s * per + k] = NULL;
    }
  CHECK_EQ(prd__cache_check(cp), 0);
  /* the next allocations come from slab 0 (1 free), then slab 2 (2 free), then slab 1 */
  size_t expect[6] = { 0, 2, 2, 1, 1, 1 };
  for (size_t i = 0; i < 6; i++) {
    char *p = prd_cache_alloc(cp, 0);
    size_t which = 3;
    for (size_t s = 0; s < 3; s++) {
      char *lo = b[s * per + per - 1];   /* a buffer still allocated in slab s */
      if (PRD_P2ALIGN((uintptr_t)p, page) == PRD_P2ALIGN((uintptr_t)lo, page))
        which = s;
    }
    CHECK_EQ(which, expect[i]);
    for (size_t k = 0; k < 3 * per; k++)
      if (b[k] == NULL) {
        b[k] = p;
        break;
      }
  }
  for (size_t i = 0; i < 3 * per; i++)
    prd_cache_free(cp, b[i]);
  free(b);
  prd_cache_destroy(cp);
}

/* ---- coloring (002 §4.3) ------------------------------------------------------------------- */
static void coloring_run(size_t size, size_t align)
{
  prd_cache_t *cp = prd_cache_create("color", size, align, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  prd_cache_stats_t st = stats_of(cp);
  size_t a = st.align;   /* what was asked, or more: whole lines are aligned to the line */
  CHECK(a >= (align ? align : 8));
  size_t ncolors = st.color_max / a + 1;
  CHECK(st.color_max > 0);
  size_t slabs = ncolors + 3;
  size_t n = slabs * st.bufs_per_slab;
  void **b = calloc(n, sizeof(void *));
  size_t seen = 0;
  for (size_t i = 0; i < n; i++) {
    b[i] = prd_cache_alloc(cp, 0);
    if (i % st.bufs_per_slab == 0) {
      /* the first buffer of each new slab sits at the slab's color */
      size_t off = (uintptr_t)b[i] & (st.slab_size - 1);
      if (st.slab_size > page)
        off = (uintptr_t)b[i] % st.slab_size;
      CHECK_EQ(off, (seen % ncolors) * a);
      seen++;
    }
  }
  CHECK_EQ(seen, slabs);
  for (size_t i = 0; i < n; i++)
    prd_cache_free(cp, b[i]);
  free(b);
  prd_cache_destroy(cp);
}

static void test_coloring(void)
{
  coloring_run(200, 8);     /* the paper's example: colors 0, 8, ... up to the tail */
  coloring_run(128, 0);     /* whole lines: colors step by the line (slab.c section 2) */
  coloring_run(72, 0);      /* not whole lines: colors step by 8 */
  coloring_run(1000, 0);    /* large layout */
}

/* ---- reclaim: reap returns memory (002 §3.4) ------------------------------------------------- */
static long rss_pages(void)
{
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, rss = 0;
  if (f != NULL) {
    if (fscanf(f, "%ld %ld", &size, &rss) != 2)
      rss = 0;
    fclose(f);
  }
  return rss;
}

static void test_reap_returns_memory(void)
{
  prd_cache_t *cp = prd_cache_create("reap", 256, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  size_t bytes = 48u << 20;
  size_t n = bytes / 256;
  void **b = malloc(n * sizeof(void *));
  long rss0 = rss_pages();
  for (size_t i = 0; i < n; i++) {
    b[i] = prd_cache_alloc(cp, 0);
    memset(b[i], 0x5a, 256);
  }
  long rss1 = rss_pages();
  CHECK(rss1 - rss0 >= (long)(bytes / page) * 9 / 10);
  for (size_t i = 0; i < n; i++)
    prd_cache_free(cp, b[i]);
  prd_cache_stats_t st = stats_of(cp);
  uint64_t nslabs = st.slabs_free;
  CHECK_EQ(st.slabs_full + st.slabs_partial, 0);
  CHECK(nslabs >= n / st.bufs_per_slab);
  prd_cache_reap(cp);   /* all of them inside the 15 s working set: kept */
  CHECK_EQ(stats_of(cp).slabs_free, nslabs);
  CHECK_EQ(stats_of(cp).slab_destroys, 0);
  set_ws_ms("0");
  prd_reap();
  set_ws_ms("15000");
  st = stats_of(cp);
  CHECK_EQ(st.slabs_free, 0);
  CHECK_EQ(st.slab_destroys, nslabs);
  CHECK_EQ(st.slab_churns, nslabs);
  CHECK_EQ(st.slabs_peak, nslabs);
  long rss2 = rss_pages();
  CHECK(rss1 - rss2 >= (long)(bytes / page) * 3 / 4);   /* the kernel got the pages back */
  free(b);
  prd_cache_destroy(cp);
}

static int cmp_uintptr(const void *a, const void *b)
{
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return (x > y) - (x < y);
}

/* The working set: a reap frees only the free slabs that stayed unused for a whole interval
 * (the fewest free slabs seen during it).  Time must pass for an interval to end: the test
 * sleeps longer than the 1 ms interval it sets (time passing, not synchronization). */
static void sleep_ms(long ms)
{
  struct timespec ts = { 0, ms * 1000000L };
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

static void test_working_set(void)
{
  set_ws_ms("1");
  prd_cache_t *cp = prd_cache_create("ws", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  size_t per = stats_of(cp).bufs_per_slab;
  void **b = calloc(4 * per, sizeof(void *));
  for (size_t i = 0; i < 4 * per; i++)
    b[i] = prd_cache_alloc(cp, 0);
  for (size_t i = 0; i < 4 * per; i++)
    prd_cache_free(cp, b[i]);
  CHECK_EQ(stats_of(cp).slabs_free, 4);
  sleep_ms(3);
  prd_cache_reap(cp);   /* in the first interval the cache had no free slab at some point */
  CHECK_EQ(stats_of(cp).slabs_free, 4);
  void *p = prd_cache_alloc(cp, 0);   /* uses one slab: the working set is 1 slab */
  prd_cache_free(cp, p);
  sleep_ms(3);
  prd_cache_reap(cp);   /* 3 slabs stayed free for the whole interval */
  CHECK_EQ(stats_of(cp).slabs_free, 1);
  CHECK_EQ(stats_of(cp).slab_destroys, 3);
  CHECK_EQ(prd__cache_check(cp), 0);
  /* the one that was used is the one kept: allocation takes it first without growing */
  p = prd_cache_alloc(cp, 0);
  CHECK_EQ(stats_of(cp).slab_creates, 4);
  prd_cache_free(cp, p);
  set_ws_ms("15000");
  free(b);
  prd_cache_destroy(cp);
}

/* ---- a cache of integers (002 §7.1, seed 004: vmem makes any resource cacheable) ---------- */
/* A NOTOUCH cache whose buffers are small against its source's quantum (8-byte ids in an
 * arena of 4 KiB quanta, where a memory cache would take the small layout, with its slab
 * record and freelist words inside the slab) still has the large layout: the integers are not
 * memory, and any touch would fault. */
static void test_notouch_small_chunk(void)
{
  prd_vmem_t *ids = prd_vmem_create("ids4k", (void *)0x10000000, 64 * 4096, 4096, NULL, NULL,
                                    NULL, 0, PRD_VM_NOSLEEP);
  CHECK(ids != NULL);
  prd_cache_t *cp = prd_cache_create("small_ids", 8, 0, NULL, NULL, NULL, NULL, ids,
                                     PRD_CACHE_NOTOUCH);
  CHECK(cp != NULL);
  CHECK_EQ(stats_of(cp).large_layout, 1);
  enum { N = 600 };
  static void *got[N];
  for (int i = 0; i < N; i++) {
    got[i] = prd_cache_alloc(cp, PRD_NOSLEEP);
    CHECK(got[i] != NULL);
    CHECK((uintptr_t)got[i] >= 0x10000000 && (uintptr_t)got[i] + 8 <= 0x10000000 + 64 * 4096);
    for (int j = 0; j < i; j++)
      CHECK(got[j] != got[i]);
  }
  for (int i = 0; i < N; i++)
    prd_cache_free(cp, got[i]);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
  prd_vmem_destroy(ids);
}

static void test_notouch_integers(void)
{
  /* ids 1000 .. 1000+65536: nothing is mapped there, so any touch would fault */
  prd_vmem_t *ids = prd_vmem_create("ids", (void *)1000, 65536, 1, NULL, NULL, NULL, 0,
                                    PRD_VM_NOSLEEP);
  CHECK(ids != NULL);
  prd_cache_t *cp = prd_cache_create("idrange", 16, 16, NULL, NULL, NULL, NULL, ids,
                                     PRD_CACHE_NOTOUCH | PRD_CACHE_VERIFY | PRD_CACHE_AUDIT);
  CHECK(cp != NULL);
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.large_layout, 1);
  CHECK_EQ(st.color_max, 0);
  CHECK(st.bufs_per_slab >= 8);
  size_t max = 65536 / 16;
  uintptr_t *got = calloc(max + 1, sizeof(uintptr_t));
  size_t n = 0;
  for (;;) {
    void *p = prd_cache_alloc(cp, PRD_NOSLEEP);
    if (p == NULL)
      break;
    CHECK((uintptr_t)p >= 1000 && (uintptr_t)p + 16 <= 1000 + 65536);
    CHECK((uintptr_t)p % 16 == 0);
    CHECK(n < max);
    if (n >= max)
      break;
    got[n++] = (uintptr_t)p;
  }
  CHECK(n >= max - 2 * st.bufs_per_slab);   /* the arena is used up to the slab granularity */
  st = stats_of(cp);
  CHECK(st.hash_buckets >= st.bufs_total / 2);   /* the hash grew with the cache */
  CHECK(st.hash_buckets > PRD_HASH_INITIAL);
  /* the ranges are disjoint: sorted, each starts at least 16 after the previous */
  qsort(got, n, sizeof(got[0]), cmp_uintptr);
  for (size_t i = 1; i < n; i++)
    if (got[i] < got[i - 1] + 16) {
      CHECK(got[i] >= got[i - 1] + 16);
      break;
    }
  CHECK_EQ(prd__cache_check(cp), 0);
  for (size_t i = 0; i < n; i++)
    prd_cache_free(cp, (void *)got[i]);
  prd__cache_reap_all(cp);
  CHECK_EQ(prd_vmem_size(ids, PRD_VMEM_ALLOC), 0);   /* every integer came back */
  prd_cache_destroy(cp);
  prd_vmem_destroy(ids);
  free(got);
}

/* ---- exhaustion (the source cannot supply) ------------------------------------------------- */
static void *os_import(prd_vmem_t *src, size_t size, int vmflags)
{
  (void)src;
  (void)vmflags;
  return prd__os_map(size);
}

static void os_release(prd_vmem_t *src, void *addr, size_t size)
{
  (void)src;
  prd__os_unmap(addr, size);
}

static void test_exhaustion_fault_injection(void)
{
  prd_vmem_t *arena = prd_vmem_create("oom", NULL, 0, page, os_import, os_release, NULL, 0,
                                      PRD_VM_NOSLEEP);
  prd_cache_t *cp = prd_cache_create("oom", 512, 0, NULL, NULL, NULL, NULL, arena,
                                     PRD_CACHE_NODEBUG);
  void *a = prd_cache_alloc(cp, 0);
  CHECK(a != NULL);
  prd_cache_stats_t st = stats_of(cp);
  void **b = calloc(st.bufs_per_slab, sizeof(void *));
  for (size_t i = 1; i < st.bufs_per_slab; i++)   /* fill the first slab */
    b[i] = prd_cache_alloc(cp, 0);
  size_t mapped = prd__os_mapped_bytes();
  prd__os_fault_every(1);   /* every mapping fails */
  int flags[2] = { PRD_NOSLEEP, PRD_SLEEP };
  for (int k = 0; k < 2; k++) {
    errno = 0;
    CHECK(prd_cache_alloc(cp, flags[k]) == NULL);
    CHECK_EQ(errno, ENOMEM);
  }
  CHECK(prd__os_mapped_bytes() <= mapped);   /* nothing leaked on the failed paths */
  CHECK_EQ(prd__cache_check(cp), 0);
  st = stats_of(cp);
  CHECK_EQ(st.alloc_fails, 2);
  CHECK_EQ(st.bufs_inuse, st.bufs_per_slab);
  prd__os_fault_every(0);   /* memory returns */
  void *c = prd_cache_alloc(cp, 0);
  CHECK(c != NULL);
  prd_cache_free(cp, c);
  prd_cache_free(cp, a);
  for (size_t i = 1; i < st.bufs_per_slab; i++)
    prd_cache_free(cp, b[i]);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
  prd_vmem_destroy(arena);
  free(b);
}

/* A fixed arena shared by two caches: when one cannot grow, the other's memory is reclaimed. */
static prd_cache_t *stash_cache;
static void *stash[4096];
static size_t nstash;
static int reclaim_calls, nofail_calls;

static void stash_reclaim(void *priv)
{
  CHECK(priv == (void *)stash);
  reclaim_calls++;
  while (nstash > 0)
    prd_cache_free(stash_cache, stash[--nstash]);
}

static int nofail_cb(void)
{
  nofail_calls++;
  while (nstash > 0)
    prd_cache_free(stash_cache, stash[--nstash]);
  return PRD_NOFAIL_RETRY;
}

static void fill_stash(void)
{
  while (nstash < PRD_ARRAY_SIZE(stash)) {
    void *p = prd_cache_alloc(stash_cache, PRD_NOSLEEP);
    if (p == NULL)
      break;
    stash[nstash++] = p;
  }
}

/* ---- a slab links its buffers a page at a time (section 4) ----------------------------------- */
/* A packed cache (the malloc classes' kind) has slabs of several pages: its first allocation
 * links one page's worth of buffers, the rest are free and on no list.  A never-linked buffer
 * given to free is a double free (reported, not linked); every buffer still goes out once. */
static void test_lazy_link(void)
{
  prd_cache_t *cp = prd__cache_create_packed("lazy64", 64, 0);
  CHECK(cp != NULL && !(cp->cache_flags & PRD_CF_HASH) && cp->cache_slabsize >= 4 * page);
  char *b0 = prd_cache_alloc(cp, 0);
  CHECK(b0 != NULL);
  prd_slab_t *sp = prd__slab_small(cp, b0);
  uint32_t chunks = sp->slab_chunks;
  CHECK(sp->slab_unlinked <= page / cp->cache_chunksize + 1 && sp->slab_unlinked < chunks);
  prd_option_set("abort_on_error", "0");
  uint64_t r0 = prd__error_count();
  char *last = sp->slab_base + sp->slab_color + (size_t)(chunks - 1) * cp->cache_chunksize;
  prd_cache_free(cp, last);
  CHECK_EQ(prd__error_count(), r0 + 1);
  prd_option_set("abort_on_error", "1");
  /* three slabs' worth, each buffer once, the lists consistent */
  enum { MAXB = 4096 };
  static char *got[MAXB];
  size_t n = PRD_MIN((size_t)3 * chunks, (size_t)MAXB);
  got[0] = b0;
  for (size_t i = 1; i < n; i++) {
    got[i] = prd_cache_alloc(cp, 0);
    CHECK(got[i] != NULL);
  }
  CHECK_EQ(prd__cache_check(cp), 0);
  size_t dup = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      dup += got[i] == got[j];
  CHECK_EQ(dup, 0);
  for (size_t i = 0; i < n; i++)
    prd_cache_free(cp, got[i]);
  CHECK_EQ(prd__cache_check(cp), 0);
  CHECK_EQ(stats_of(cp).bufs_inuse, 0);
  prd_cache_destroy(cp);
}

static void test_reclaim_on_exhaustion(void)
{
  size_t bytes = 64 * page;
  void *mem = prd__os_map(bytes);
  prd_vmem_t *arena = prd_vmem_create("fixed", mem, bytes, page, NULL, NULL, NULL, 0,
                                      PRD_VM_NOSLEEP);
  for (int mode = 0; mode < 2; mode++) {
    reclaim_calls = nofail_calls = 0;
    stash_cache = prd_cache_create("stash", 256, 0, NULL, NULL, mode == 0 ? stash_reclaim : NULL,
                                   stash, arena, PRD_CACHE_NODEBUG);
    prd_cache_t *other = prd_cache_create("other", 300, 0, NULL, NULL, NULL, NULL, arena,
                                          PRD_CACHE_NODEBUG);
    fill_stash();
    CHECK(nstash > 0);
    CHECK_EQ(prd_vmem_size(arena, PRD_VMEM_FREE), 0);   /* the arena is exhausted */
    errno = 0;
    CHECK(prd_cache_alloc(other, PRD_NOSLEEP) == NULL);   /* NOSLEEP fails fast */
    CHECK_EQ(errno, ENOMEM);
    CHECK_EQ(reclaim_calls, 0);
    void *p;
    if (mode == 0) {
      p = prd_cache_alloc(other, PRD_SLEEP);   /* reclaim callback, reap all, retry */
      CHECK_EQ(reclaim_calls, 1);
    } else {
      prd_set_nofail_callback(nofail_cb);
      p = prd_cache_alloc(other, PRD_NOFAIL);   /* the nofail callback frees, then retry */
      CHECK_EQ(nofail_calls, 1);
      prd_set_nofail_callback(NULL);
    }
    CHECK(p != NULL);
    CHECK_EQ(stats_of(stash_cache).slabs_free, 0);   /* reaped despite the working set */
    CHECK_EQ(prd__cache_check(other), 0);
    CHECK_EQ(prd__cache_check(stash_cache), 0);
    prd_cache_free(other, p);
    prd_cache_destroy(other);
    prd_cache_destroy(stash_cache);
    CHECK_EQ(prd_vmem_size(arena, PRD_VMEM_ALLOC), 0);
  }
  prd_vmem_destroy(arena);
  prd__os_unmap(mem, bytes);
}

static int nofail_exit_cb(void)
{
  return PRD_NOFAIL_EXIT(7);
}

static void nofail_exit_child(void *arg)
{
  (void)arg;
  void *mem = prd__os_map(8 * page);
  prd_vmem_t *arena = prd_vmem_create("tiny", mem, 8 * page, page, NULL, NULL, NULL, 0, 0);
  prd_cache_t *cp = prd_cache_create("tiny", 1024, 0, NULL, NULL, NULL, NULL, arena, 0);
  prd_set_nofail_callback(nofail_exit_cb);
  for (int i = 0; i < 1000; i++)
    (void)prd_cache_alloc(cp, PRD_NOFAIL);
  _exit(99);   /* not reached: the callback ends the process */
}

static void test_nofail_exit(void)
{
  char out[4096];
  int st = prd_test_child(nofail_exit_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}

/* ---- bad frees, without debugging flags ------------------------------------------------------ */
static void bad_frees_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *big = prd_cache_create("bigobj", 1000, 0, NULL, NULL, NULL, NULL, NULL,
                                      PRD_CACHE_NODEBUG);
  prd_cache_t *small = prd_cache_create("smallobj", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                        PRD_CACHE_NODEBUG);
  char *a = prd_cache_alloc(big, 0);
  char *s = prd_cache_alloc(small, 0);
  prd_cache_free(big, a + 8);   /* interior pointer */
  prd_cache_free(big, s);       /* a buffer of another cache */
  prd_cache_free(small, a);     /* the other way round */
  prd_cache_free(big, a);
  prd_cache_free(big, a);       /* double free */
  printf("checks %d %d\n", prd__cache_check(big), prd__cache_check(small));
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  prd_cache_stats(big, &st);
  printf("inuse %llu\n", (unsigned long long)st.bufs_inuse);
  prd_cache_free(small, s);
  prd_cache_destroy(big);
  prd_cache_destroy(small);
}

static void test_bad_frees(void)
{
  char out[16384];
  int st = prd_test_child(bad_frees_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* the front end's ownership check (cache.c section 2) refuses them before any layer */
  CHECK_STR_CONTAINS(out, "cache bigobj: free of buffer");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (interior, 8 bytes into a buffer");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache (it belongs to cache smallobj;");
  CHECK_STR_CONTAINS(out, "cache smallobj: free of buffer");
  CHECK_STR_CONTAINS(out, "(it belongs to cache bigobj;");
  CHECK_STR_CONTAINS(out, "cache bigobj: double free of buffer");
  CHECK_STR_CONTAINS(out, "checks 0 0");
  CHECK_STR_CONTAINS(out, "inuse 0");
}

static void bad_free_aborts_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "1");
  prd_cache_t *big = prd_cache_create("bigobj", 1000, 0, NULL, NULL, NULL, NULL, NULL, 0);
  char *a = prd_cache_alloc(big, 0);
  prd_cache_free(big, a);
  prd_cache_free(big, a);
}

static void test_bad_free_aborts(void)
{
  char out[8192];
  int st = prd_test_child(bad_free_aborts_child, NULL, out, sizeof(out));
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK_STR_CONTAINS(out, "double free");
  CHECK_STR_CONTAINS(out, "aborting");
}

static void destroy_live_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  ctor_count = dtor_count = 0;
  prd_cache_t *cp = prd_cache_create("livecache", 100, 0, count_ctor, count_dtor, NULL,
                                     &ctor_count, NULL, PRD_CACHE_NODEBUG);
  void *keep[3];
  for (int i = 0; i < 3; i++)
    keep[i] = prd_cache_alloc(cp, 0);
  void *f = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, f);
  printf("keep %p\n", keep[1]);
  size_t before = prd__os_mapped_bytes();
  prd_cache_destroy(cp);
  printf("dtors %d of %d\n", dtor_count, ctor_count);   /* only the free one */
  printf("released %d\n", prd__os_mapped_bytes() <= before);
}

static void test_destroy_with_live_objects(void)
{
  char out[16384];
  int st = prd_test_child(destroy_live_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache livecache: destroyed with 3 buffers still allocated");
  char line[64];
  const char *k = strstr(out, "keep ");
  if (k != NULL && sscanf(k, "keep %63s", line) == 1) {
    char want[96];
    snprintf(want, sizeof(want), "buffer=%s", line);
    CHECK_STR_CONTAINS(out, want);
  }
  CHECK_STR_CONTAINS(out, "dtors 1 of 4");
  CHECK_STR_CONTAINS(out, "released 1");
}

/* ---- statistics: printer and JSON writer from the one list ----------------------------------- */
static void test_stats_printers(void)
{
  prd_cache_t *cp = prd_cache_create("st\"ats", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  void *p = prd_cache_alloc(cp, 0);
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.size, sizeof(st));
  CHECK_EQ(st.version, PRD_CACHE_STATS_VERSION);
  CHECK(strcmp(st.name, "st\"ats") == 0);
  CHECK_EQ(st.allocs, 1);
  CHECK_EQ(st.bufs_inuse, 1);
  CHECK_EQ(st.slabs_partial, 1);
  CHECK(st.total_frag > 1.0);
  CHECK(st.total_frag == (double)st.slab_size / 64.0);
  int fds[2];
  CHECK(pipe(fds) == 0);
  prd__cache_stats_write(fds[1], &st, true);
  prd__cache_stats_write(fds[1], &st, false);
  close(fds[1]);
  char out[8192];
  ssize_t n = read(fds[0], out, sizeof(out) - 1);
  close(fds[0]);
  out[n > 0 ? n : 0] = '\0';
  CHECK_STR_CONTAINS(out, "{\"name\":\"st\\\"ats\",\"buf_size\":64,");
  CHECK_STR_CONTAINS(out, "\"allocs\":1,");
  CHECK_STR_CONTAINS(out, "\"total_frag\":");
#define FIELD_PRESENT(kind, name, doc) CHECK_STR_CONTAINS(out, "  " #name " ");
  PRD_CACHE_STATS_FIELDS(FIELD_PRESENT)
#undef FIELD_PRESENT
  /* an older caller's smaller struct: nothing written past its size */
  struct {
    prd_cache_stats_t s;
    char guard[8];
  } small;
  memset(&small, 0x77, sizeof(small));
  small.s.size = offsetof(prd_cache_stats_t, buf_size);
  small.s.version = 1;
  CHECK_EQ(prd_cache_stats(cp, &small.s), 0);
  CHECK(strcmp(small.s.name, "st\"ats") == 0);
  CHECK((unsigned char)((char *)&small.s.buf_size)[0] == 0x77);
  prd_cache_free(cp, p);
  prd_cache_destroy(cp);
}

static void test_debug_names(void)
{
  uint64_t r0 = prd__error_count();
  long bits = prd__debug_parse("patterns,bogus,audit", "test");
  CHECK_EQ(bits, PRD_CACHE_PATTERNS | PRD_CACHE_AUDIT);
  CHECK_EQ(prd__error_count(), r0 + 1);
  CHECK_EQ(prd__debug_parse("all", "test"), PRD_CACHE_DEBUG_ALL);
  CHECK_EQ(prd__debug_parse("leaks", "test"), PRD_CACHE_LEAKS | PRD_CACHE_AUDIT);
}

/* The double-free test of a free that reaches the slab (slab.c section 4) walks the slab's
 * freelists only when the buffer's link word decodes to a link of its slab: a buffer whose
 * last word the program set to 0 (memset), or to the address of a neighbour in the slab (a
 * list node's trailing link), must not cost a walk.  Stored plain, both looked like a free
 * buffer's word, and freeing a slab's worth of such buffers walked the growing freelist at
 * each free (a Perl program 2.5 times slower).  Every free here is correct: no report. */
static void test_free_no_walk(void)
{
  const size_t sizes[] = { 16, 64, 200 };
  for (size_t k = 0; k < PRD_ARRAY_SIZE(sizes); k++) {
    size_t size = sizes[k];
    prd_cache_t *cp = prd_cache_create("nowalk", size, 0, NULL, NULL, NULL, NULL, NULL,
                                       PRD_CACHE_NOMAGAZINE | PRD_CACHE_NODEBUG);
    CHECK(cp != NULL && !(cp->cache_flags & PRD_CF_HASH));
    enum { N = 2000 };
    static void *b[N];
    for (size_t i = 0; i < N; i++) {
      b[i] = prd_cache_alloc(cp, 0);
      CHECK(b[i] != NULL);
    }
    for (size_t i = 0; i < N; i++) {   /* last word: 0, or the next buffer's address */
      void *last = i % 2 == 0 ? NULL : b[(i + 1) % N];
      memset(b[i], 0, size);
      memcpy((char *)b[i] + size - sizeof(void *), &last, sizeof(last));
    }
    uint64_t walks = prd__slab_fl_walks(), errs = prd__error_count();
    for (size_t i = 0; i < N; i++)
      prd_cache_free(cp, b[i]);
    CHECK_EQ(prd__slab_fl_walks() - walks, 0);
    CHECK_EQ(prd__error_count() - errs, 0);
    CHECK_EQ(prd__cache_check(cp), 0);
    prd_cache_destroy(cp);
  }
}

int main(void)
{
  prd_option_set("magazines", "0");   /* this tests the layers below the CPU layer */
  page = prd__os_page_size();
  RUN(test_create_bad_args);
  RUN(test_layouts);
  RUN(test_ctor_dtor_counting);
  RUN(test_ctor_failure);
  RUN(test_fewest_free_first);
  RUN(test_coloring);
  RUN(test_reap_returns_memory);
  RUN(test_working_set);
  RUN(test_notouch_integers);
  RUN(test_notouch_small_chunk);
  RUN(test_exhaustion_fault_injection);
  RUN(test_lazy_link);
  RUN(test_reclaim_on_exhaustion);
  RUN(test_nofail_exit);
  RUN(test_bad_frees);
  RUN(test_bad_free_aborts);
  RUN(test_destroy_with_live_objects);
  RUN(test_stats_printers);
  RUN(test_debug_names);
  RUN(test_free_no_walk);
  return prd_test_done();
}
