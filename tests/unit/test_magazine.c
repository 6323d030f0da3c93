/*
 * test_magazine.c: the CPU layer (src/magazine.c): every tier transition, the depot, thread
 * exit and prd_thread_flush, the reap handshake with a blocked thread, magazine growth under
 * forced contention (per interval and in a burst), working-set reaping driven by explicit intervals, NOMAGAZINE, debugging
 * with magazines, quantum caches, a randomized model across threads' caches, depot and slabs,
 * and thread churn without mappings.  The maintenance thread is off (maint_thread=0) and the
 * interval long, so every interval is driven by prd__maint_tick(): no sleeping as
 * synchronization.
 */
// prd-test-timeout: 300
#include <pthread.h>
#include <sched.h>
#include <stddef.h>

#include "internal.h"
#include "magazine.h"
#include "prd_test.h"

static prd_cache_stats_t stats(prd_cache_t *cp)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(cp, &st), 0);
  return st;
}

/* Objects the user holds = what the slab layer handed out minus what the CPU layer parks. */
static void check_conservation(prd_cache_t *cp, uint64_t user_live)
{
  prd_cache_stats_t st = stats(cp);
  CHECK_EQ(st.bufs_inuse, user_live + st.thread_cache_objs + st.depot_rounds);
  CHECK_EQ(prd__cache_check(cp), 0);
}

static prd_cpu_cache_t *my_cc(prd_cache_t *cp)
{
  prd_tcache_t *tc = prd__mag_here();
  return cp->cache_magid < tc->tc_ncc ? &tc->tc_cc[cp->cache_magid] : NULL;
}

/* The thread's CPU cache of cp holds rounds (its frees went to its magazines). */
static bool cp_has_rounds(prd_tcache_t *tc, prd_cache_t *cp)
{
  if (cp->cache_magid >= tc->tc_ncc)
    return false;
  prd_cpu_cache_t *cc = &tc->tc_cc[cp->cache_magid];
  return cc->cc_rounds + cc->cc_prounds > 0;
}

/* ---- tiers ------------------------------------------------------------------------------- */
static void test_tiers(void)
{
  prd_cache_t *cp = prd_cache_create("tiers", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL && cp->cache_magid != 0);
  prd_cache_stats_t st = stats(cp);
  uint32_t M = (uint32_t)st.mag_size;
  CHECK_EQ(M, 15);   /* libumem's table: a 64-byte chunk starts with 15 rounds */
  void *objs[64];
  /* first allocation: nothing anywhere: tier 3 visits the depot (empty), tier 4 the slab */
  objs[0] = prd_cache_alloc(cp, 0);
  st = stats(cp);
  CHECK_EQ(st.mag_slab_allocs, 1);
  CHECK_EQ(st.cpu_alloc_miss_rate, 1.0);
  CHECK_EQ(st.depot_alloc_miss_rate, 1.0);
  /* free: tier 3 gets a new empty magazine (loaded), the object goes in */
  prd_cache_free(cp, objs[0]);
  prd_cpu_cache_t *cc = my_cc(cp);
  CHECK(cc != NULL && cc->cc_loaded != NULL && cc->cc_previous == NULL);
  CHECK_EQ(cc->cc_rounds, 1);
  /* tier 1 on alloc and free */
  void *a = prd_cache_alloc(cp, 0);
  CHECK(a == objs[0]);
  st = stats(cp);
  CHECK_EQ(st.mag_alloc_hits, 1);
  prd_cache_free(cp, a);
  CHECK_EQ(stats(cp).mag_free_hits, 1);
  /* fill: allocate 2M+1 from the slab layer, then free them all */
  void *held = prd_cache_alloc(cp, 0);   /* takes the round back: loaded empty */
  for (uint32_t i = 0; i < 2 * M + 1; i++)
    objs[i] = prd_cache_alloc(cp, 0);
  for (uint32_t i = 0; i < 2 * M + 1; i++)
    prd_cache_free(cp, objs[i]);
  /* M frees filled loaded; the next found previous absent: tier 3 (new empty), previous = full
   * loaded; M more filled it; the last: previous full, loaded full: tier 3 again, previous to
   * the depot's full list */
  st = stats(cp);
  CHECK_EQ(st.depot_full_puts, 1);
  CHECK_EQ(st.depot_full_mags, 1);
  CHECK_EQ(cc->cc_rounds, 1);
  CHECK_EQ(cc->cc_prounds, M);
  check_conservation(cp, 1);   /* objs[...] from the first prd_cache_alloc above is held */
  /* tier 2 on alloc: loaded (1 round) empties, previous full: exchange */
  uint64_t visits = st.depot_full_gets;
  void *b = prd_cache_alloc(cp, 0);
  void *c = prd_cache_alloc(cp, 0);
  CHECK(b != NULL && c != NULL);
  CHECK_EQ(cc->cc_rounds, M - 1);
  CHECK_EQ(cc->cc_prounds, 0);
  CHECK_EQ(stats(cp).depot_full_gets, visits);   /* no depot visit */
  /* tier 2 on free: b fills loaded again; for c loaded is full and previous empty: exchange */
  prd_cache_free(cp, b);
  CHECK_EQ(cc->cc_rounds, M);
  prd_cache_free(cp, c);
  CHECK_EQ(cc->cc_rounds, 1);
  CHECK_EQ(cc->cc_prounds, M);
  void *d = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, d);
  prd_cache_free(cp, prd_cache_alloc(cp, 0));
  uint64_t puts = stats(cp).depot_full_puts;
  /* drain everything: loaded M, previous empty -> M allocs, then depot full get (tier 3) */
  void *all[200];
  size_t n = 0;
  while (n < 2 * M + 1)
    all[n++] = prd_cache_alloc(cp, 0);
  st = stats(cp);
  CHECK_EQ(st.depot_full_gets, 1);
  CHECK_EQ(st.depot_empty_puts >= 1, 1);
  CHECK_EQ(st.depot_full_puts, puts);
  check_conservation(cp, n + 1);
  for (size_t i = 0; i < n; i++)
    prd_cache_free(cp, all[i]);
  prd_cache_free(cp, held);
  prd_cache_destroy(cp);
}

/* The alternating pattern at the magazine boundary visits the depot at most once per M ops. */
static void test_alternating_boundary(void)
{
  prd_cache_t *cp = prd_cache_create("alt", 32, 0, NULL, NULL, NULL, NULL, NULL, 0);
  uint32_t M = (uint32_t)stats(cp).mag_size;
  void *objs[64];
  for (uint32_t i = 0; i < M; i++)
    objs[i] = prd_cache_alloc(cp, 0);
  for (uint32_t i = 0; i < M; i++)
    prd_cache_free(cp, objs[i]);   /* loaded exactly full */
  prd_cache_stats_t s0 = stats(cp);
  uint64_t ops = 0;
  for (int k = 0; k < 10000; k++) {
    void *x = prd_cache_alloc(cp, 0);
    prd_cache_free(cp, x);
    void *y = prd_cache_alloc(cp, 0);
    prd_cache_free(cp, y);
    prd_cache_free(cp, prd_cache_alloc(cp, 0));
    ops += 6;
  }
  prd_cache_stats_t s1 = stats(cp);
  uint64_t visits = (s1.depot_full_gets - s0.depot_full_gets) +
                    (s1.depot_empty_gets - s0.depot_empty_gets) +
                    (s1.mag_slab_allocs - s0.mag_slab_allocs);
  CHECK(visits * M <= ops);
  prd_thread_flush();
  for (uint32_t i = 0; i < M; i++)
    objs[i] = prd_cache_alloc(cp, 0);
  for (uint32_t i = 0; i < M; i++)
    prd_cache_free(cp, objs[i]);
  prd_cache_destroy(cp);
}

/* ---- thread exit, flush, reap of a blocked thread ------------------------------------------ */
struct holder {
  prd_cache_t *h_cp;
  int h_n;
  pthread_mutex_t h_lock;
  pthread_cond_t h_cv;
  int h_stage;   /* 1: objects parked; 2: may go on */
};

static void *park_and_block(void *arg)
{
  struct holder *h = arg;
  void *objs[256];
  for (int i = 0; i < h->h_n; i++)
    objs[i] = prd_cache_alloc(h->h_cp, 0);
  for (int i = 0; i < h->h_n; i++)
    prd_cache_free(h->h_cp, objs[i]);
  pthread_mutex_lock(&h->h_lock);
  h->h_stage = 1;
  pthread_cond_broadcast(&h->h_cv);
  while (h->h_stage != 2)
    pthread_cond_wait(&h->h_cv, &h->h_lock);
  pthread_mutex_unlock(&h->h_lock);
  /* the reaper took our magazines: the caches must still work */
  for (int i = 0; i < h->h_n; i++)
    objs[i] = prd_cache_alloc(h->h_cp, 0);
  for (int i = 0; i < h->h_n; i++)
    prd_cache_free(h->h_cp, objs[i]);
  return NULL;
}

static void test_reap_blocked_thread(void)
{
  prd_cache_t *cp = prd_cache_create("parked", 100, 0, NULL, NULL, NULL, NULL, NULL, 0);
  struct holder h = { cp, 10, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
  pthread_t t;
  pthread_create(&t, NULL, park_and_block, &h);
  pthread_mutex_lock(&h.h_lock);
  while (h.h_stage != 1)
    pthread_cond_wait(&h.h_cv, &h.h_lock);
  pthread_mutex_unlock(&h.h_lock);
  prd_cache_stats_t st = stats(cp);
  CHECK_EQ(st.thread_cache_objs, 10);
  CHECK_EQ(st.bufs_inuse, 10);
  prd_reap();   /* the owner is blocked: the handshake lets the reaper take its magazines */
  st = stats(cp);
  CHECK_EQ(st.thread_cache_objs, 0);
  CHECK_EQ(st.bufs_inuse, 0);
  pthread_mutex_lock(&h.h_lock);
  h.h_stage = 2;
  pthread_cond_broadcast(&h.h_cv);
  pthread_mutex_unlock(&h.h_lock);
  pthread_join(t, NULL);
  /* thread exit flushed: nothing in thread caches, everything in the depot or slabs */
  st = stats(cp);
  CHECK_EQ(st.thread_cache_objs, 0);
  CHECK_EQ(st.bufs_inuse, st.depot_rounds);
  CHECK_EQ(st.mag_alloc_hits + st.mag_slab_allocs + st.depot_full_gets >= 20, 1);
  check_conservation(cp, 0);
  prd_cache_destroy(cp);
}

static void test_thread_flush(void)
{
  prd_cache_t *cp = prd_cache_create("flush", 40, 0, NULL, NULL, NULL, NULL, NULL, 0);
  uint32_t M = (uint32_t)stats(cp).mag_size;
  void *objs[64];
  for (uint32_t i = 0; i < M + 3; i++)
    objs[i] = prd_cache_alloc(cp, 0);
  for (uint32_t i = 0; i < M + 3; i++)
    prd_cache_free(cp, objs[i]);   /* previous full (M), loaded 3: partial */
  prd_thread_flush();
  prd_cache_stats_t st = stats(cp);
  CHECK_EQ(st.thread_cache_objs, 0);
  CHECK_EQ(st.depot_full_mags, 1);
  CHECK_EQ(st.depot_rounds, M);
  CHECK_EQ(st.depot_empty_mags, 1);   /* the partial one: rounds to slabs, magazine kept */
  CHECK_EQ(st.bufs_inuse, M);
  check_conservation(cp, 0);
  prd_cache_destroy(cp);
}

/* ---- thread churn: records reused, not mapped (section 10) ---------------------------------- */
#define CHURN_WAVE 4
struct churn {
  prd_cache_t *ch_cp;
  bool ch_hit;   /* this thread's CPU cache served it (a record was had) */
};

static void *churn_thread(void *arg)
{
  struct churn *ch = arg;
  void *objs[8];
  for (int i = 0; i < 8; i++)
    objs[i] = prd_cache_alloc(ch->ch_cp, 0);
  for (int i = 0; i < 8; i++)
    prd_cache_free(ch->ch_cp, objs[i]);
  prd_tcache_t *tc = prd__mag_here();
  ch->ch_hit = cp_has_rounds(tc, ch->ch_cp);
  return NULL;
}

static void churn_wave(prd_cache_t *cp, int *hits)
{
  pthread_t t[CHURN_WAVE];
  struct churn ch[CHURN_WAVE];
  for (int i = 0; i < CHURN_WAVE; i++) {
    ch[i] = (struct churn){ cp, false };
    pthread_create(&t[i], NULL, churn_thread, &ch[i]);
  }
  for (int i = 0; i < CHURN_WAVE; i++) {
    pthread_join(t[i], NULL);
    *hits += ch[i].ch_hit;
  }
}

/* Waves of threads that allocate a little and exit map no per-thread memory after the first
 * wave: each takes an exited thread's record and CPU-cache array (a mapping per thread before,
 * two at the first miss of each: 512 for these 256 threads); each still gets its CPU cache
 * (its frees land in its magazine, unless a magazine could not be had). */
static void test_thread_churn(void)
{
  prd_cache_t *cp = prd_cache_create("churn", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  int hits = 0;
  churn_wave(cp, &hits);   /* the first wave maps its records; they are kept at exit */
  CHECK_EQ(hits, CHURN_WAVE);
  enum { WAVES = 64 };
  uint64_t m0 = prd__mag_thread_maps();
  hits = 0;
  for (int w = 0; w < WAVES; w++)
    churn_wave(cp, &hits);
  uint64_t maps = prd__mag_thread_maps() - m0;
  printf("  %d threads after the first wave: %llu per-thread mappings, %d hits\n",
         WAVES * CHURN_WAVE, (unsigned long long)maps, hits);
  /* a library thread (the maintenance thread, the call_rcu worker) that takes a spare record
   * meanwhile leaves a wave one short: a record and an array mapped, once for that thread */
  CHECK(maps <= 8);
  CHECK(hits >= WAVES * CHURN_WAVE * 9 / 10);
  check_conservation(cp, 0);
  prd_cache_destroy(cp);
}

/* ---- working set, contention ------------------------------------------------------------- */
static void test_working_set_reap(void)
{
  prd_cache_t *cp = prd_cache_create("ws", 48, 0, NULL, NULL, NULL, NULL, NULL, 0);
  uint32_t M = (uint32_t)stats(cp).mag_size;
  prd__maint_tick();   /* start an interval */
  enum { N = 400 };
  static void *objs[N];
  for (int i = 0; i < N; i++)
    objs[i] = prd_cache_alloc(cp, 0);
  for (int i = 0; i < N; i++)
    prd_cache_free(cp, objs[i]);   /* busy: the depot fills with full magazines */
  prd_cache_stats_t st = stats(cp);
  uint64_t full = st.depot_full_mags;
  CHECK(full >= N / M - 3);
  /* interval 1 ends: the full list was empty at its start (minimum 0): nothing reapable; the
   * thread cache was active: it stays */
  prd__maint_tick();
  st = stats(cp);
  CHECK_EQ(st.depot_full_mags, full);
  CHECK(st.thread_cache_objs > 0);
  /* interval 2, quiet: all of it stayed unused for a whole interval */
  prd__maint_tick();
  st = stats(cp);
  CHECK_EQ(st.depot_full_mags, 0);
  CHECK_EQ(st.thread_cache_objs, 0);
  CHECK_EQ(st.bufs_inuse, 0);
  check_conservation(cp, 0);
  prd_cache_destroy(cp);
}

struct worker {
  prd_cache_t *w_cp;
  int w_n;
};

static void *miss_once(void *arg)
{
  struct worker *w = arg;
  void *objs[400];
  for (int i = 0; i < w->w_n; i++)
    objs[i] = prd_cache_alloc(w->w_cp, 0);
  for (int i = 0; i < w->w_n; i++)
    prd_cache_free(w->w_cp, objs[i]);
  return NULL;
}

/* One contended depot visit: the depot lock is held while a worker's first visit waits. */
static void contend_once(prd_cache_t *cp, int n)
{
  prd_depot_t *dp = &cp->cache_depot;
  uint64_t c0 = atomic_load(&dp->dp_contention);
  pthread_mutex_lock(dp->dp_lock);
  struct worker w = { cp, n };
  pthread_t t;
  pthread_create(&t, NULL, miss_once, &w);
  while (atomic_load(&dp->dp_contention) == c0)
    sched_yield();
  pthread_mutex_unlock(dp->dp_lock);
  pthread_join(t, NULL);
}

static void test_growth_under_contention(void)
{
  prd_option_set("depot_contention", "2");
  prd_cache_t *cp = prd_cache_create("grow", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd__maint_tick();
  uint64_t m0 = stats(cp).mag_size;
  for (int round = 0; round < 3; round++)
    contend_once(cp, 3);
  CHECK(stats(cp).depot_contention >= 3);
  prd__maint_tick();   /* 3 > 2 in one interval: the next magazine size */
  prd_cache_stats_t st = stats(cp);
  CHECK(st.mag_size > m0);
  CHECK_EQ(st.mag_resizes, 1);
  prd__maint_tick();   /* no contention this interval: no growth */
  CHECK_EQ(stats(cp).mag_resizes, 1);
  /* new magazines have the new size and everything still adds up */
  struct worker w = { cp, 300 };
  miss_once(&w);
  check_conservation(cp, 0);
  prd_option_set("depot_contention", "3");
  prd_cache_destroy(cp);
}

/* The burst rule (magazine.c section 8): contended visits close together grow the magazines
 * at once, with no interval passing, through the whole table while a magazine holds at most
 * 256 KiB of objects; the same visits spread out grow nothing. */
static void test_growth_in_burst(void)
{
  prd_cache_t *cp = prd_cache_create("burst", 4096, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_stats_t st = stats(cp);
  CHECK_EQ(st.mag_size, 1);   /* libumem's row for objects above 3,200 B */
  prd__mag_set_burst(4, 0);   /* a window of 0 ns: no two visits are close enough */
  for (int i = 0; i < 12; i++)
    contend_once(cp, 20);
  CHECK_EQ(stats(cp).mag_resizes, 0);
  prd__mag_set_burst(4, 60ull * 1000000000);   /* 4 within a minute: a burst */
  uint64_t sizes[10] = { 0 };
  int n = 0;
  for (int i = 0; i < 48 && n < 10; i++) {
    contend_once(cp, 20);
    st = stats(cp);
    if (n == 0 || st.mag_size != sizes[n - 1])
      sizes[n++] = st.mag_size;
  }
  /* 1, 3, 7, 15, 31, then past the interval rule's last row for 4 KiB objects (31) to 47
   * and 63: 95 rounds would hold 380 KiB */
  CHECK_EQ(n, 7);
  CHECK_EQ(sizes[n - 1], 63);
  CHECK(sizes[n - 1] * st.chunk_size <= 256 * 1024);
  CHECK_EQ(st.mag_resizes, 6);
  CHECK_EQ(prd__mag_cur_size(cp), 63);
  prd__mag_set_burst(0, 0);
  /* the magazines made before the growths are used and given back; everything adds up */
  struct worker w = { cp, 300 };
  miss_once(&w);
  check_conservation(cp, 0);
  prd_cache_destroy(cp);
}

/* ---- bypass and debugging ---------------------------------------------------------------- */
static void test_nomagazine(void)
{
  prd_cache_t *cp = prd_cache_create("nomag", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NOMAGAZINE);
  CHECK_EQ(cp->cache_magid, 0);
  void *a = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, a);
  prd_cache_stats_t st = stats(cp);
  CHECK_EQ(st.bufs_inuse, 0);
  CHECK_EQ(st.mag_size, 0);
  CHECK_EQ(st.mag_alloc_hits + st.mag_free_hits, 0);
  prd_cache_destroy(cp);
}

static void write_after_free(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "1");
  prd_cache_t *cp = prd_cache_create("dbgmag", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_PATTERNS | PRD_CACHE_REDZONE);
  uint32_t *p = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, p);     /* into the magazine, filled with the freed pattern */
  CHECK(my_cc(cp) != NULL && my_cc(cp)->cc_rounds == 1);
  p[3] = 0x12345678;         /* written while parked in the magazine */
  (void)prd_cache_alloc(cp, 0);
  printf("not reached\n");
}

static void test_debug_with_magazines(void)
{
  char out[4096];
  int st = prd_test_child(write_after_free, NULL, out, sizeof(out));
  CHECK(WIFSIGNALED(st));
  CHECK_STR_CONTAINS(out, "cache dbgmag: buffer modified after being freed");
  CHECK(strstr(out, "not reached") == NULL);
  /* a double free is still caught with magazines on (verify) */
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create("dbl", 64, 0, NULL, NULL, NULL, NULL, NULL, PRD_CACHE_VERIFY);
  void *a = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, a);
  uint64_t e0 = prd__error_count();
  prd_cache_free(cp, a);
  CHECK(prd__error_count() > e0);
  CHECK_EQ(stats(cp).thread_cache_objs, 1);   /* the bad free did not enter a magazine */
  prd_cache_destroy(cp);
  prd_option_set("abort_on_error", "1");
}

/* ---- quantum caches ------------------------------------------------------------------------ */
static void test_quantum_caches(void)
{
  uint64_t e0 = prd__error_count();
  prd_vmem_t *a = prd_vmem_create("qc", (void *)(uintptr_t)0x100000, 0x100000, 16, NULL, NULL,
                                  NULL, 64, 0);
  void *x[4][20];
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 20; i++) {
      x[k][i] = prd_vmem_alloc(a, (size_t)(k + 1) * 16, PRD_VM_NOSLEEP);
      CHECK(x[k][i] != NULL && ((uintptr_t)x[k][i] & 15) == 0);
    }
  CHECK_EQ(atomic_load(&a->vm_qcache_state), 1);
  CHECK_EQ(a->vm_nqcache, 4);
  /* distinct and disjoint ranges */
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 20; i++)
      for (int l = 0; l < 4; l++)
        for (int j = 0; j < 20; j++)
          if (k != l || i != j) {
            uintptr_t s1 = (uintptr_t)x[k][i], e1 = s1 + (size_t)(k + 1) * 16;
            uintptr_t s2 = (uintptr_t)x[l][j], e2 = s2 + (size_t)(l + 1) * 16;
            if (!(e1 <= s2 || e2 <= s1))
              CHECK(!"overlap");
          }
  /* the arena holds the caches' slabs, not the 80 small allocations */
  prd_vmem_stats_t vs = { .size = sizeof(vs) };
  prd_vmem_stats(a, &vs);
  CHECK(vs.allocs < 80);
  /* xalloc bypasses the caches */
  void *big = prd_vmem_xalloc(a, 32, 0, 0, 0, NULL, NULL, PRD_VM_NOSLEEP);
  prd_vmem_stats_t vs2 = { .size = sizeof(vs2) };
  prd_vmem_stats(a, &vs2);
  CHECK_EQ(vs2.allocs, vs.allocs + 1);
  prd_vmem_xfree(a, big, 32);
  prd_cache_stats_t st = stats(a->vm_qcache[1]);
  CHECK_EQ(st.bufs_inuse, 20);
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 20; i++)
      prd_vmem_free(a, x[k][i], (size_t)(k + 1) * 16);
  st = stats(a->vm_qcache[1]);
  CHECK_EQ(st.thread_cache_objs + st.depot_rounds, st.bufs_inuse);   /* freed into magazines */
  /* larger sizes go to the arena itself */
  void *l = prd_vmem_alloc(a, 128, PRD_VM_NOSLEEP);
  CHECK(l != NULL);
  prd_vmem_free(a, l, 128);
  prd_vmem_destroy(a);   /* destroys the caches first: their slabs come back, no leak */
  CHECK_EQ(prd__error_count(), e0);
  /* the heap arena serves page-sized allocations from its quantum caches */
  size_t pg = prd__os_page_size();
  void *p = prd_vmem_alloc(prd_heap_arena(), 2 * pg, 0);
  CHECK(p != NULL);
  memset(p, 0x5a, 2 * pg);
  CHECK_EQ(atomic_load(&prd_heap_arena()->vm_qcache_state), 1);
  prd_vmem_free(prd_heap_arena(), p, 2 * pg);
}

/* ---- the randomized model: several threads, a shared pool of live objects ------------------- */
#define MODEL_CACHES 3
#define MODEL_LIVE 512
static prd_cache_t *model_cp[MODEL_CACHES];
static pthread_mutex_t model_lock = PTHREAD_MUTEX_INITIALIZER;
static void *model_live[MODEL_CACHES][MODEL_LIVE];
static int model_nlive[MODEL_CACHES];
static long model_steps = 20000;

static void *model_thread(void *arg)
{
  prd_rng_t r = { (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1 };
  for (long s = 0; s < model_steps; s++) {
    int c = (int)prd_rng_below(&r, MODEL_CACHES);
    int op = (int)prd_rng_below(&r, 100);
    pthread_mutex_lock(&model_lock);
    if (op < 52 && model_nlive[c] < MODEL_LIVE) {
      pthread_mutex_unlock(&model_lock);
      uint64_t *p = prd_cache_alloc(model_cp[c], 0);
      CHECK(p != NULL);
      /* never handed out twice: the first word carries the owner mark while live */
      CHECK(p[0] != 0xa11c0000a11cull);
      p[0] = 0xa11c0000a11cull;
      pthread_mutex_lock(&model_lock);
      if (model_nlive[c] < MODEL_LIVE) {
        model_live[c][model_nlive[c]++] = p;
        p = NULL;
      }
      pthread_mutex_unlock(&model_lock);
      if (p != NULL) {   /* another thread filled the pool meanwhile */
        p[0] = 0;
        prd_cache_free(model_cp[c], p);
      }
    } else if (model_nlive[c] > 0) {
      int i = (int)prd_rng_below(&r, (uint64_t)model_nlive[c]);
      uint64_t *p = model_live[c][i];
      model_live[c][i] = model_live[c][--model_nlive[c]];
      pthread_mutex_unlock(&model_lock);
      p[0] = 0;
      prd_cache_free(model_cp[c], p);
    } else {
      pthread_mutex_unlock(&model_lock);
    }
    if (s % 5000 == 4999)
      prd_thread_flush();
  }
  return NULL;
}

static void test_model(void)
{
  size_t sizes[MODEL_CACHES] = { 16, 200, 3000 };
  for (int c = 0; c < MODEL_CACHES; c++)
    model_cp[c] = prd_cache_create("model", sizes[c], 0, NULL, NULL, NULL, NULL, NULL, 0);
  enum { T = 4 };
  for (int round = 0; round < 3; round++) {
    pthread_t t[T];
    for (long i = 0; i < T; i++)
      pthread_create(&t[i], NULL, model_thread, (void *)(i + 1 + round * T));
    for (int i = 0; i < T; i++)
      pthread_join(t[i], NULL);
    /* quiescent: the counts add up across thread caches, depot and slabs */
    for (int c = 0; c < MODEL_CACHES; c++) {
      check_conservation(model_cp[c], (uint64_t)model_nlive[c]);
      CHECK_EQ(stats(model_cp[c]).thread_cache_objs, 0);   /* all those threads exited */
    }
    prd__maint_tick();
  }
  for (int c = 0; c < MODEL_CACHES; c++) {
    while (model_nlive[c] > 0) {
      uint64_t *p = model_live[c][--model_nlive[c]];
      p[0] = 0;
      prd_cache_free(model_cp[c], p);
    }
    prd_cache_destroy(model_cp[c]);
  }
}

/* What the hit paths of prd_cache_alloc and prd_cache_free read of the cache (the flags, the
 * page-map check's constants, the magazine id) is one cache line that nothing writes after
 * creation.  Guards the defect where cache_magid sat beside the depot, in the line of dp_lock,
 * so that every depot visit of one thread took away the line that every hit of every other
 * thread reads. */
static void test_hit_fields_one_line(void)
{
  prd_cache_t *cp = prd_cache_create("hitline", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL);
  CHECK_EQ((uintptr_t)cp % 64, 0);   /* lines of the struct are lines of memory */
  size_t line = offsetof(prd_cache_t, cache_flags) / 64;
  size_t hit[] = { offsetof(prd_cache_t, cache_magid), offsetof(prd_cache_t, cache_pm_tag),
                   offsetof(prd_cache_t, cache_pm_inv), offsetof(prd_cache_t, cache_pm_shift),
                   offsetof(prd_cache_t, cache_chunks) };
  for (size_t i = 0; i < PRD_ARRAY_SIZE(hit); i++)
    CHECK_EQ(hit[i] / 64, line);
  /* the locks the misses take are in other lines */
  size_t dp = offsetof(prd_cache_t, cache_depot) + offsetof(prd_depot_t, dp_lock);
  CHECK(dp / 64 != line && (dp + sizeof(pthread_mutex_t) - 1) / 64 != line);
  size_t cl = offsetof(prd_cache_t, cache_lock);
  CHECK(cl / 64 != line && (cl + sizeof(pthread_mutex_t) - 1) / 64 != line);
  prd_cache_destroy(cp);
}

/* ---- two threads' per-thread state is never in one cache line --------------------------- */
/* The hit paths write a thread's CPU cache (cc_rounds, its counters) and its loaded magazine
 * (mag_round[] on every free hit) with no lock: if a line held another thread's CPU cache or
 * magazine, every hit of the two would move that line between their cores (false sharing).
 * Guards the defect where the small magazines (1, 3 and 7 rounds: caches of objects above
 * 256 B, malloc's classes from 2 KiB up) were 8-, 16- or 32-byte aligned, so that two threads
 * that got magazines one after the other held one line between them.  The records and arrays
 * of the threads are checked too (they are whole pages of their own today). */
#define APART_CACHES 8
static prd_cache_t *apart_cp[APART_CACHES];
static pthread_barrier_t apart_bar;
struct apart_state {
  uintptr_t as_lo[2 * APART_CACHES + 2], as_hi[2 * APART_CACHES + 2];   /* [lo, hi) ranges */
  int as_n;
};
static struct apart_state apart[2];

static void apart_add(struct apart_state *s, const void *p, size_t bytes)
{
  s->as_lo[s->as_n] = (uintptr_t)p;
  s->as_hi[s->as_n++] = (uintptr_t)p + bytes;
}

static void *apart_thread(void *arg)
{
  int me = (int)(intptr_t)arg;
  for (int c = 0; c < APART_CACHES; c++)
    for (int turn = 0; turn < 2; turn++) {
      if (turn == me) {   /* one thread after the other: their magazines come in turn */
        void *o[3];
        for (int i = 0; i < 3; i++)
          o[i] = prd_cache_alloc(apart_cp[c], PRD_SLEEP);
        for (int i = 0; i < 3; i++)
          prd_cache_free(apart_cp[c], o[i]);
      }
      pthread_barrier_wait(&apart_bar);
    }
  struct apart_state *s = &apart[me];
  prd_tcache_t *tc = prd__mag_here();
  apart_add(s, tc, sizeof(*tc));
  apart_add(s, tc->tc_cc, (size_t)tc->tc_ncc * sizeof(prd_cpu_cache_t));
  for (int c = 0; c < APART_CACHES; c++) {
    prd_cpu_cache_t *cc = my_cc(apart_cp[c]);
    CHECK(cc != NULL && cc->cc_loaded != NULL);
    prd_mag_t *mags[2] = { cc->cc_loaded, cc->cc_previous };
    for (int k = 0; k < 2; k++)
      if (mags[k] != NULL)
        apart_add(s, mags[k], sizeof(prd_mag_t) + mags[k]->mag_size * sizeof(void *));
  }
  pthread_barrier_wait(&apart_bar);   /* both hold their magazines while main compares */
  pthread_barrier_wait(&apart_bar);
  return NULL;
}

static void test_threads_lines_apart(void)
{
  for (int c = 0; c < APART_CACHES; c++) {
    apart_cp[c] = prd_cache_create("apart", 4096, 0, NULL, NULL, NULL, NULL, NULL, 0);
    CHECK(apart_cp[c] != NULL && apart_cp[c]->cache_magid != 0);
  }
  memset(apart, 0, sizeof(apart));
  pthread_barrier_init(&apart_bar, NULL, 3);
  pthread_barrier_t *bar = &apart_bar;
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, apart_thread, (void *)(intptr_t)i);
  for (int c = 0; c < APART_CACHES; c++)   /* the threads' turns (main takes part) */
    for (int turn = 0; turn < 2; turn++)
      pthread_barrier_wait(bar);
  pthread_barrier_wait(bar);
  CHECK_EQ(stats(apart_cp[0]).mag_size, 1);   /* the smallest magazines of the table */
  int shared = 0;
  for (int i = 0; i < apart[0].as_n; i++)
    for (int j = 0; j < apart[1].as_n; j++) {
      uintptr_t lo0 = apart[0].as_lo[i] >> 6, hi0 = (apart[0].as_hi[i] - 1) >> 6;
      uintptr_t lo1 = apart[1].as_lo[j] >> 6, hi1 = (apart[1].as_hi[j] - 1) >> 6;
      if (lo0 <= hi1 && lo1 <= hi0) {
        if (shared++ < 4)
          fprintf(stderr, "thread 0's [%#lx, %#lx) and thread 1's [%#lx, %#lx) share a line\n",
                  (unsigned long)apart[0].as_lo[i], (unsigned long)apart[0].as_hi[i],
                  (unsigned long)apart[1].as_lo[j], (unsigned long)apart[1].as_hi[j]);
      }
    }
  CHECK_EQ(shared, 0);
  pthread_barrier_wait(bar);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&apart_bar);
  for (int c = 0; c < APART_CACHES; c++)
    prd_cache_destroy(apart_cp[c]);
}


/* ---- the hit counts add up ---------------------------------------------------------------
 * Every prd_cache_alloc and prd_cache_free is a hit of the CPU layer or a depot visit, so
 * mag_allocs and mag_frees (hits + visits) equal the calls made.  The free hits are not
 * counted one by one but derived from the allocation hits, the rounds and a base that every
 * other change of the rounds offsets (magazine.h prd__mag_free_hits, prd__mag_rounds_set):
 * this guards that derivation on every path that changes the rounds (tier 2 exchanges, tier 3
 * reloads, tier 4 refills, uncounted pops and pushes after a depot visit, a reaper emptying
 * another thread's cache, a flush, a thread's exit folding its counts into the depot), where
 * a change not offset would make the totals drift. */
enum { HC_THREADS = 2, HC_OPS = 20000, HC_LIVE = 200 };
static prd_cache_t *hc_cp;
static _Atomic uint64_t hc_allocs, hc_frees;

static void *hc_thread(void *arg)
{
  prd_rng_t rng = prd_rng_seeded("hit counts");
  rng.s ^= (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull;
  if (rng.s == 0)
    rng.s = 1;
  void *live[HC_LIVE];
  uint32_t n = 0;
  uint64_t allocs = 0, frees = 0;
  for (uint32_t i = 0; i < HC_OPS; i++) {
    /* runs of allocations and of frees, long enough to cross magazines both ways */
    bool alloc = n == 0 || (n < HC_LIVE && prd_rng_below(&rng, 100) < ((i / 97) % 2 ? 75 : 25));
    if (alloc) {
      live[n] = prd_cache_alloc(hc_cp, 0);
      CHECK(live[n] != NULL);
      n++;
      allocs++;
    } else {
      uint32_t k = (uint32_t)prd_rng_below(&rng, n);
      prd_cache_free(hc_cp, live[k]);
      live[k] = live[--n];
      frees++;
    }
    if (i % 4999 == 0)
      prd_thread_flush();
  }
  while (n > 0) {
    prd_cache_free(hc_cp, live[--n]);
    frees++;
  }
  atomic_fetch_add(&hc_allocs, allocs);
  atomic_fetch_add(&hc_frees, frees);
  return NULL;
}

static void *hc_reaper(void *arg)
{
  _Atomic bool *stop = arg;
  while (!atomic_load(stop)) {
    prd_reap();   /* takes the magazines of the other threads' caches that are not busy */
    sched_yield();
  }
  return NULL;
}

static void test_hit_counts_add_up(void)
{
  hc_cp = prd_cache_create("hitcounts", 48, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(hc_cp != NULL);
  /* this thread first: every tier, then a reap of its own cache and a flush */
  void *objs[100];
  for (int i = 0; i < 100; i++)
    objs[i] = prd_cache_alloc(hc_cp, 0);
  for (int i = 0; i < 100; i++)
    prd_cache_free(hc_cp, objs[i]);
  for (int i = 0; i < 60; i++)
    objs[i] = prd_cache_alloc(hc_cp, 0);
  prd_cache_stats_t st = stats(hc_cp);
  CHECK_EQ(st.mag_allocs, 160);
  CHECK_EQ(st.mag_frees, 100);
  prd_reap();
  for (int i = 0; i < 60; i++)
    prd_cache_free(hc_cp, objs[i]);
  prd_thread_flush();
  st = stats(hc_cp);
  CHECK_EQ(st.mag_allocs, 160);
  CHECK_EQ(st.mag_frees, 160);
  /* threads that exit, with a reaper emptying their caches meanwhile */
  _Atomic bool stop = false;
  pthread_t r, t[HC_THREADS];
  pthread_create(&r, NULL, hc_reaper, &stop);
  for (long i = 0; i < HC_THREADS; i++)
    pthread_create(&t[i], NULL, hc_thread, (void *)(i + 1));
  for (int i = 0; i < HC_THREADS; i++)
    pthread_join(t[i], NULL);
  atomic_store(&stop, true);
  pthread_join(r, NULL);
  st = stats(hc_cp);
  CHECK_EQ(st.mag_allocs, 160 + atomic_load(&hc_allocs));
  CHECK_EQ(st.mag_frees, 160 + atomic_load(&hc_frees));
  check_conservation(hc_cp, 0);
  prd_cache_destroy(hc_cp);
}

/* A reclaim callback that frees a few of its own cache's objects, fewer than a magazine
 * holds, when that cache cannot grow (a fixed arena).  Guards the defect: the frees went into
 * the allocating thread's own magazine, and the retry, which looks at the slab layer only,
 * failed with ENOMEM beside them; the next allocation, a magazine hit, succeeded. */
static prd_cache_t *few_cache;
static void *few[4096];
static size_t nfew;
static int few_calls;

static void few_reclaim(void *priv)
{
  (void)priv;
  few_calls++;
  for (int i = 0; i < 5 && nfew > 0; i++)
    prd_cache_free(few_cache, few[--nfew]);
}

static void test_reclaim_own_cache(void)
{
  size_t page = prd__os_page_size();
  size_t bytes = 16 * page;
  void *mem = prd__os_map(bytes);
  prd_vmem_t *arena = prd_vmem_create("fixed_own", mem, bytes, page, NULL, NULL, NULL, 0, 0);
  few_cache = prd_cache_create("few", 256, 0, NULL, NULL, few_reclaim, NULL, arena, 0);
  nfew = 0;
  few_calls = 0;
  while (nfew < PRD_ARRAY_SIZE(few) && (few[nfew] = prd_cache_alloc(few_cache, PRD_NOSLEEP)))
    nfew++;
  CHECK(nfew > 5);
  errno = 0;
  void *p = prd_cache_alloc(few_cache, PRD_SLEEP);
  CHECK(p != NULL);
  CHECK_EQ(few_calls, 1);
  if (p != NULL)
    few[nfew++] = p;
  while (nfew > 0)
    prd_cache_free(few_cache, few[--nfew]);
  CHECK_EQ(prd__cache_check(few_cache), 0);
  prd_cache_destroy(few_cache);
  prd_vmem_destroy(arena);
  prd__os_unmap(mem, bytes);
}

int main(void)
{
  prd_option_set("maint_thread", "0");
  prd_option_set("maint_interval", "100000000");
#if defined(PRD_TSAN) || defined(PRD_ASAN)
  model_steps = 5000;
#endif
  RUN(test_tiers);
  RUN(test_alternating_boundary);
  RUN(test_thread_flush);
  RUN(test_thread_churn);
  RUN(test_reap_blocked_thread);
  RUN(test_working_set_reap);
  RUN(test_growth_under_contention);
  RUN(test_growth_in_burst);
  RUN(test_nomagazine);
  RUN(test_debug_with_magazines);
  RUN(test_quantum_caches);
  RUN(test_model);
  RUN(test_threads_lines_apart);
  RUN(test_hit_fields_one_line);
  RUN(test_hit_counts_add_up);
  RUN(test_reclaim_own_cache);
  return prd_test_done();
}
