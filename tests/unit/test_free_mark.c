/*
 * test_free_mark.c: the free mark (src/magazine.c section 15) finds a double free wherever the
 * first copy is: under other frees in this thread's magazine, in another thread's magazine,
 * in the depot, on its slab; a deferral of a freed buffer; realloc of a freed block.  Each
 * misuse runs in a child with abort_on_error=0: it must be reported with the cache's name,
 * the process must go on, and no buffer may be handed out twice afterwards.  Each on a cache
 * whose mark is word 0 and on one whose mark is off the first line.  Also the
 * caches without the mark: a constructed cache (word 0 is its state, which survives), and
 * an 8-byte chunk (word 0 is its freelist word), whose double free the slab layer finds.
 * The maintenance thread is off, so nothing moves buffers between layers behind the test.
 */
// prd-test-timeout: 120
#include <pthread.h>

#include "internal.h"
#include "magazine.h"
#include "prd_test.h"

enum { NDISTINCT = 256 };

static prd_cache_stats_t stats(prd_cache_t *cp)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(cp, &st), 0);
  return st;
}

/* n fresh allocations (through alloc) hold no buffer twice; they are freed afterwards. */
static int distinct(void *(*alloc)(void *), void (*release)(void *, void *), void *arg, int n)
{
  static void *b[NDISTINCT];
  int dup = 0;
  for (int i = 0; i < n && i < NDISTINCT; i++) {
    b[i] = alloc(arg);
    for (int k = 0; k < i; k++)
      dup += b[k] == b[i];
  }
  for (int i = 0; i < n && i < NDISTINCT; i++)
    release(arg, b[i]);
  return dup;
}

static void *c_alloc(void *cp)
{
  return prd_cache_alloc(cp, PRD_SLEEP);
}

static void c_free(void *cp, void *buf)
{
  prd_cache_free(cp, buf);
}

static void *m_alloc(void *sz)
{
  return prd_malloc(*(size_t *)sz);
}

static void m_free(void *sz, void *buf)
{
  (void)sz;
  prd_free(buf);
}

/* The second free of p is reported once and dropped: the next allocations differ. */
static void expect_caught(prd_cache_t *cp, void *p)
{
  uint64_t before = prd__error_count();
  prd_cache_free(cp, p);
  CHECK_EQ(prd__error_count(), before + 1);
  CHECK_EQ(distinct(c_alloc, c_free, cp, NDISTINCT), 0);
  CHECK_EQ(prd__cache_check(cp), 0);
}

static void *free_in_thread(void *p)
{
  void **a = p;
  prd_cache_free(a[0], a[1]);
  return NULL;
}

/* A thread that frees p, then holds it in its magazine until told to exit. */
struct holder {
  prd_cache_t *h_cp;
  void *h_buf;
  pthread_mutex_t h_lock;
  pthread_cond_t h_cond;
  int h_state;   /* 0 start, 1 freed, 2 may exit */
};

static void *hold_in_thread(void *arg)
{
  struct holder *h = arg;
  prd_cache_free(h->h_cp, h->h_buf);
  pthread_mutex_lock(&h->h_lock);
  h->h_state = 1;
  pthread_cond_broadcast(&h->h_cond);
  while (h->h_state != 2)
    pthread_cond_wait(&h->h_cond, &h->h_lock);
  pthread_mutex_unlock(&h->h_lock);
  return NULL;
}

/* Every case on a cache of *arg bytes: 64 (the mark in word 0), 160 (the mark off the first
 * line) and 512 (the mark off the first pair of lines, magazine.c section 15). */
static void cache_child(void *arg)
{
  size_t size = *(size_t *)arg;
  char name[32];
  snprintf(name, sizeof(name), "fm%zu", size);
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create(name, size, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL && cp->cache_magid != 0 && !(cp->cache_flags & PRD_CF_NOMARK));
  unsigned off = size >= PRD_MARK_FAR_MIN    ? PRD_MARK_FAR
                 : size >= PRD_MARK_NEAR_MIN ? PRD_MARK_NEAR
                                             : 0;
  CHECK_EQ(cp->cache_mark_off, off);

  if (off != 0) {
    /* a free and the allocation that hands the buffer out again write nothing before the
     * mark's word: not in the first line, where readers read, nor from 192 bytes in the
     * line fetched with it (the hit is LIFO: the same buffer comes back); the free wrote
     * the mark's word, which the allocation cleared */
    unsigned char *b = prd_cache_alloc(cp, PRD_SLEEP);
    memset(b, 0x3c, size);
    prd_cache_free(cp, b);
    CHECK(prd__mark_test(b, off));
    CHECK(prd_cache_alloc(cp, PRD_SLEEP) == b);
    int same = 0;
    for (unsigned i = 0; i < off; i++)
      same += b[i] == 0x3c;
    CHECK_EQ(same, (int)off);
    CHECK(!prd__mark_test(b, off));
    prd_cache_free(cp, b);
  }

  /* after other frees: p is under q in this thread's loaded magazine */
  void *p = prd_cache_alloc(cp, PRD_SLEEP), *q = prd_cache_alloc(cp, PRD_SLEEP);
  prd_cache_free(cp, p);
  prd_cache_free(cp, q);
  expect_caught(cp, p);

  /* in another thread's magazine, that thread still running */
  struct holder h = { cp, prd_cache_alloc(cp, PRD_SLEEP), PTHREAD_MUTEX_INITIALIZER,
                      PTHREAD_COND_INITIALIZER, 0 };
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, hold_in_thread, &h), 0);
  pthread_mutex_lock(&h.h_lock);
  while (h.h_state != 1)
    pthread_cond_wait(&h.h_cond, &h.h_lock);
  pthread_mutex_unlock(&h.h_lock);
  expect_caught(cp, h.h_buf);
  pthread_mutex_lock(&h.h_lock);
  h.h_state = 2;
  pthread_cond_broadcast(&h.h_cond);
  pthread_mutex_unlock(&h.h_lock);
  pthread_join(t, NULL);

  /* freed by a thread that exited: the first copy went to the depot with its magazine */
  void *a[2] = { cp, prd_cache_alloc(cp, PRD_SLEEP) };
  CHECK_EQ(pthread_create(&t, NULL, free_in_thread, a), 0);
  pthread_join(t, NULL);
  expect_caught(cp, a[1]);

  /* in the depot: freed first of enough buffers that its full magazine went there */
  enum { NMANY = 100 };
  static void *many[NMANY];
  for (int i = 0; i < NMANY; i++)
    many[i] = prd_cache_alloc(cp, PRD_SLEEP);
  for (int i = 0; i < NMANY; i++)
    prd_cache_free(cp, many[i]);
  CHECK(stats(cp).depot_rounds > 0);
  expect_caught(cp, many[0]);

  /* on its slab: every magazine back to the slab layer */
  p = prd_cache_alloc(cp, PRD_SLEEP);
  prd_cache_free(cp, p);
  prd__mag_purge_all();
  CHECK_EQ(stats(cp).depot_rounds, 0u);
  expect_caught(cp, p);

  /* a deferral of a freed buffer: reported, not deferred */
  p = prd_cache_alloc(cp, PRD_SLEEP);
  prd_cache_free(cp, p);
  uint64_t before = prd__error_count();
  prd_cache_free_deferred(cp, p);
  CHECK_EQ(prd__error_count(), before + 1);
  /* the same on the deferral's hit path (a generation open: the first deferral took the slow
   * path), where the mark is tested after the handshake's barrier */
  void *first = prd_cache_alloc(cp, PRD_SLEEP);
  p = prd_cache_alloc(cp, PRD_SLEEP);
  prd_cache_free_deferred(cp, first);
  prd_cache_free(cp, p);
  before = prd__error_count();
  prd_cache_free_deferred(cp, p);
  CHECK_EQ(prd__error_count(), before + 1);
  prd_synchronize_rcu();
  prd_rcu_barrier();
  CHECK_EQ(distinct(c_alloc, c_free, cp, NDISTINCT), 0);
  CHECK_EQ(prd__cache_check(cp), 0);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_cache(void)
{
  static char out[16384];
  static const size_t sizes[] = { 64, 160, 512 };
  for (size_t i = 0; i < PRD_ARRAY_SIZE(sizes); i++) {
    size_t size = sizes[i];
    char want[64];
    int st = prd_test_child(cache_child, &size, out, sizeof(out));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    snprintf(want, sizeof(want), "cache fm%zu: double free of buffer", size);
    CHECK_STR_CONTAINS(out, want);
    snprintf(want, sizeof(want), "cache fm%zu: deferred free of buffer", size);
    CHECK_STR_CONTAINS(out, want);
    if (prd_t_failures != 0)
      fprintf(stderr, "%s", out);
  }
}

static int ctor_word(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  memset(buf, 0x5c, 24);
  return 0;
}

/* The caches without the mark (magazine.c section 15): a constructed cache's state is not
 * touched by free and reallocation; an 8-byte chunk's double free is found on its slab. */
static void layout_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create("fmctor", 24, 0, ctor_word, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL && (cp->cache_flags & PRD_CF_NOMARK));
  unsigned char *p = prd_cache_alloc(cp, PRD_SLEEP), *q = prd_cache_alloc(cp, PRD_SLEEP);
  prd_cache_free(cp, p);
  prd_cache_free(cp, q);
  expect_caught(cp, q);   /* the top round of the magazine: compared there */
  p = prd_cache_alloc(cp, PRD_SLEEP);
  for (int i = 0; i < 24; i++)
    CHECK_EQ(p[i], 0x5c);
  prd_cache_free(cp, p);

  prd_cache_t *c8 = prd_cache_create("fm8", 8, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(c8 != NULL && (c8->cache_flags & PRD_CF_NOMARK));
  p = prd_cache_alloc(c8, PRD_SLEEP);
  prd_cache_free(c8, p);
  expect_caught(c8, p);
  p = prd_cache_alloc(c8, PRD_SLEEP);
  prd_cache_free(c8, p);
  prd__mag_purge_all();   /* on its slab, the freelist word over the mark */
  uint64_t before = prd__error_count();
  prd_cache_free(c8, p);   /* into the magazine: the mark is gone */
  CHECK_EQ(prd__error_count(), before);
  prd__mag_purge_all();    /* the second copy reaches the slab, which finds the first */
  CHECK_EQ(prd__error_count(), before + 1);
  CHECK_EQ(distinct(c_alloc, c_free, c8, NDISTINCT), 0);
  CHECK_EQ(prd__cache_check(c8), 0);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_layouts(void)
{
  static char out[16384];
  int st = prd_test_child(layout_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache fmctor: double free of buffer");
  CHECK_STR_CONTAINS(out, "cache fm8: double free of buffer");
  CHECK_STR_CONTAINS(out, "already free in its slab");
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

/* free(p); free(p) on a cache without the mark where the first free filled the loaded
 * magazine.  Guards a defect: the top-round compare was made only by a free that could push
 * (the hit, or the miss's tier 1 with room), so the second free, finding the magazine full,
 * went on to tier 2 or 3, pushed p into the other magazine and p was handed out twice.  For
 * a constructed cache and for malloc's 8-byte class (whose tier 4 refills a magazine, so
 * that the loaded one is often full). */
static void full_top_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create("fmfull", 24, 0, ctor_word, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL && (cp->cache_flags & PRD_CF_NOMARK));
  prd_cache_stats_t st = stats(cp);
  uint32_t m = (uint32_t)st.mag_size;
  CHECK(m > 0 && m <= NDISTINCT);
  static void *b[NDISTINCT];
  for (uint32_t i = 0; i < m; i++)
    b[i] = prd_cache_alloc(cp, PRD_SLEEP);
  for (uint32_t i = 0; i < m; i++)   /* the first free gets an empty magazine; m fill it */
    prd_cache_free(cp, b[i]);
  prd_tcache_t *tc = prd__mag_here();
  CHECK(tc != NULL && tc->tc_cc[cp->cache_magid].cc_rounds == m);
  expect_caught(cp, b[m - 1]);

  /* malloc-8: blocks freed until the loaded magazine is full, the last freed on top (at
   * most two magazines' worth of pushes from wherever the loaded one stood) */
  char *e = prd_malloc(8);
  prd_free(e);
  prd_cache_t *c8 = prd__malloc_class_cache(8);
  prd_cpu_cache_t *cc = &prd__mag_here()->tc_cc[c8->cache_magid];
  enum { NBLK = 8192 };
  static void *blk[NBLK];
  uint32_t n = 2 * cc->cc_magsize + 2;
  CHECK(cc->cc_magsize > 0 && n <= NBLK);
  for (uint32_t i = 0; i < n; i++)
    blk[i] = prd_malloc(8);
  uint32_t k = 0;
  while (k < n && cc->cc_rounds < cc->cc_magsize)
    prd_free(blk[k++]);
  CHECK(k > 0 && cc->cc_rounds == cc->cc_magsize);
  uint64_t before = prd__error_count();
  prd_free(blk[k - 1]);
  CHECK_EQ(prd__error_count(), before + 1);
  size_t eight = 8;
  CHECK_EQ(distinct(m_alloc, m_free, &eight, NDISTINCT), 0);
  while (k < n)
    prd_free(blk[k++]);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_full_top(void)
{
  static char out[16384];
  int st = prd_test_child(full_top_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache fmfull: double free of buffer");
  CHECK_STR_CONTAINS(out, "cache malloc-8: double free of buffer");
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

/* A free of a buffer never handed out: the neighbour of a fresh class's or cache's first
 * buffer, which the refill took from its slab into this thread's magazine.  The defect this
 * guards: the mark was written only by a free, so a buffer the slab layer had linked but
 * never handed out carried none; the free pushed it, and the next two allocations returned
 * it twice (malloc and prd_cache_*, release and hardened).  The small layout's slabs now
 * mark every buffer they link (slab.c section 4): the free is reported as a double free,
 * nothing is pushed. */
static void never_allocated_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  /* sizes whose page of linked buffers holds the neighbour whatever the refill takes (under
   * ASan a miss takes one buffer; a 3 KiB chunk is linked one at a time, so its neighbour is
   * in the part not linked yet, the documented gap) */
  static const size_t sizes[] = { 16, 64, 112, 512, 2000 };
  for (size_t i = 0; i < PRD_ARRAY_SIZE(sizes); i++) {
    size_t sz = sizes[i];
    char *p = prd_malloc(sz);
    uint64_t before = prd__error_count();
    prd_free(p + prd_malloc_usable_size(p));
    CHECK_EQ(prd__error_count(), before + 1);
    CHECK_EQ(distinct(m_alloc, m_free, &sz, NDISTINCT), 0);
    prd_free(p);
  }
  static const size_t csizes[] = { 64, 200 };
  for (size_t i = 0; i < PRD_ARRAY_SIZE(csizes); i++) {
    prd_cache_t *cp = prd_cache_create(i ? "fmnever200" : "fmnever64", csizes[i], 0, NULL, NULL,
                                       NULL, NULL, NULL, 0);
    char *p = prd_cache_alloc(cp, PRD_SLEEP);
    uint64_t before = prd__error_count();
    prd_cache_free(cp, p + stats(cp).chunk_size);
    CHECK_EQ(prd__error_count(), before + 1);
    CHECK_EQ(distinct(c_alloc, c_free, cp, NDISTINCT), 0);
    prd_cache_free(cp, p);
    CHECK_EQ(prd__cache_check(cp), 0);
  }
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_never_allocated(void)
{
  static char out[16384];
  int st = prd_test_child(never_allocated_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache malloc-64: double free of buffer");
  CHECK_STR_CONTAINS(out, "cache fmnever200: double free of buffer");
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

static void *mfree_in_thread(void *p)
{
  prd_free(p);
  return NULL;
}

static void malloc_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  static const size_t sizes[] = { 64, 4096 };
  for (size_t i = 0; i < PRD_ARRAY_SIZE(sizes); i++) {
    size_t sz = sizes[i];
    /* warm the class (its first miss enables the inline hit path) */
    void *w = prd_malloc(sz);
    prd_free(w);
    /* after other frees */
    void *p = prd_malloc(sz), *q = prd_malloc(sz);
    prd_free(p);
    prd_free(q);
    uint64_t before = prd__error_count();
    prd_free(p);
    CHECK_EQ(prd__error_count(), before + 1);
    CHECK_EQ(distinct(m_alloc, m_free, &sz, NDISTINCT), 0);
    /* freed by another thread */
    pthread_t t;
    p = prd_malloc(sz);
    CHECK_EQ(pthread_create(&t, NULL, mfree_in_thread, p), 0);
    pthread_join(t, NULL);
    before = prd__error_count();
    prd_free(p);
    CHECK_EQ(prd__error_count(), before + 1);
    CHECK_EQ(distinct(m_alloc, m_free, &sz, NDISTINCT), 0);
    /* realloc of a freed block, same class and another: NULL, the block untouched */
    p = prd_malloc(sz);
    prd_free(p);
    before = prd__error_count();
    errno = 0;
    CHECK(prd_realloc(p, sz) == NULL);
    CHECK_EQ(errno, EINVAL);
    CHECK(prd_realloc(p, 3 * sz) == NULL);
    CHECK_EQ(prd__error_count(), before + 2);
    CHECK_EQ(distinct(m_alloc, m_free, &sz, NDISTINCT), 0);
    /* a deferral of a freed block */
    p = prd_malloc(sz);
    prd_free(p);
    before = prd__error_count();
    prd_free_deferred(p);
    CHECK_EQ(prd__error_count(), before + 1);
    prd_synchronize_rcu();
    prd_rcu_barrier();
    CHECK_EQ(distinct(m_alloc, m_free, &sz, NDISTINCT), 0);
    CHECK_EQ(prd__cache_check(prd__malloc_class_cache(sz)), 0);
  }
  /* the 8-byte class has no mark: free(p); free(p) is its magazine's top round */
  char *e = prd_malloc(8);
  prd_free(e);
  uint64_t before = prd__error_count();
  prd_free(e);
  CHECK_EQ(prd__error_count(), before + 1);
  size_t eight = 8;
  CHECK_EQ(distinct(m_alloc, m_free, &eight, NDISTINCT), 0);
  /* a live block reallocated in place is not mistaken for a freed one */
  char *r = prd_malloc(40);
  memset(r, 1, 40);
  CHECK(prd_realloc(r, 48) == r);
  prd_free(r);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_malloc(void)
{
  static char out[16384];
  int st = prd_test_child(malloc_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache malloc-64: double free of buffer");
  CHECK_STR_CONTAINS(out, "cache malloc-4096: double free of buffer");
  CHECK_STR_CONTAINS(out, "cache malloc-64: realloc of freed block");
  CHECK_STR_CONTAINS(out, "cache malloc-4096: realloc of freed block");
  CHECK_STR_CONTAINS(out, "cache malloc-64: deferred free of buffer");
  CHECK_STR_CONTAINS(out, "cache malloc-8: double free of buffer");
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

int main(void)
{
  prd_option_set("maint_thread", "0");
  prd_option_set("maint_interval", "100000000");
  RUN(test_cache);
  RUN(test_layouts);
  RUN(test_malloc);
  RUN(test_full_top);
  RUN(test_never_allocated);
  return prd_test_done();
}
