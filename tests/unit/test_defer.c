/* test_defer: Prudence (src/defer.c, src/latent.c), one test per mechanism of issue #6,
 * each shown through the statistics counters, plus the waiting bound of defer.c section 3.
 *
 * prd-test-timeout: 240
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "annotate.h"
#include "internal.h"
#include "magazine.h"
#include "prd_test.h"

static prd_cache_stats_t stats_of(prd_cache_t *cp)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK(prd_cache_stats(cp, &st) == 0);
  return st;
}

/* Sets an option for one test and gives back its old value; opt_pop restores it. */
static long opt_push(const char *name, const char *value)
{
  long old = prd_option_get(name);
  prd_option_set(name, value);
  return old;
}

static void opt_pop(const char *name, long old)
{
  char v[32];
  snprintf(v, sizeof(v), "%ld", old);
  prd_option_set(name, v);
}

/* Waits for the grace period every object deferred so far needs. */
static void wait_all(void)
{
  prd_rcu_wait_state(prd_rcu_get_state());
}

/* The slab layer's view adds up: every buffer it has handed out is with the user, in an
 * object cache (the loaded magazines of threads with latent magazines: oc_objs), a latent
 * cache, a latent slab or a latent magazine in the depot, or parked in the rest of the magazine layer (threads' other
 * magazines, the depot). */
static void check_counts(prd_cache_t *cp, uint64_t user_live)
{
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.bufs_inuse, user_live + st.oc_objs + st.latent_cache_objs + st.latent_slab_objs +
                              st.latent_depot_objs + st.thread_cache_objs + st.depot_rounds);
  CHECK_EQ(prd__cache_check(cp), 0);
}

/* ---- the call_rcu baseline ------------------------------------------------------------------ */
static void test_oblivious(void)
{
  prd_cache_t *cp = prd_cache_create("obl", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_OBLIVIOUS | PRD_CACHE_NODEBUG);
  CHECK(cp != NULL);
  for (int i = 0; i < 10000; i++) {
    void *p = prd_cache_alloc(cp, 0);
    CHECK(p != NULL);
    memset(p, 0x5a, 64);   /* the whole object is the user's: the head is after it */
    prd_cache_free_deferred(cp, p);
  }
  prd_rcu_barrier();
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.deferred_frees, 10000);
  /* freed by the callbacks: back in the slabs or parked in the RCU thread's magazines */
  CHECK_EQ(st.bufs_inuse, st.thread_cache_objs + st.depot_rounds);
  CHECK_EQ(st.latent_cache_objs + st.latent_slab_objs, 0);
  CHECK_EQ(st.latent_merges, 0);   /* the allocator did not see them */
  CHECK_EQ(st.oc_refills, 0);
  /* its object cache is the magazine layer, as for Prudence: the same hit count */
  CHECK_EQ(st.oc_hits, st.mag_allocs - st.mag_slab_allocs);
  prd_cache_destroy(cp);
  errno = 0;
  CHECK(prd_cache_create("x", 64, 0, NULL, NULL, NULL, NULL, NULL,
                         PRD_CACHE_OBLIVIOUS | PRD_CACHE_NOTOUCH) == NULL && errno == EINVAL);
}

/* A buffer of the call_rcu path deferred again while its first deferral waits: reported and
 * ignored.  Queued twice, its head once cut the callback list behind it, and the deferrals
 * queued in between were lost (never freed, nothing reported).  In this process, not a
 * child: the callbacks need the call_rcu thread, which a TSan fork child may not start. */
static void test_oblivious_twice(void)
{
  long abort_old = opt_push("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create("obl2", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_OBLIVIOUS | PRD_CACHE_NODEBUG);
  enum { N = 10 };
  void *x[N], *y[N], *p = prd_cache_alloc(cp, 0);
  for (int i = 0; i < N; i++) {
    x[i] = prd_cache_alloc(cp, 0);
    y[i] = prd_cache_alloc(cp, 0);
  }
  prd_rcu_barrier();
  uint64_t cbs0 = atomic_load(&cp->cache_defer_cbs);
  /* inside a read-side section, so that no callback runs (and reads or writes a buffer)
   * before the second deferral: the first is certainly still queued */
  prd_rcu_read_lock();
  for (int i = 0; i < N; i++)
    prd_cache_free_deferred(cp, x[i]);
  prd_cache_free_deferred(cp, p);
  for (int i = 0; i < N; i++)
    prd_cache_free_deferred(cp, y[i]);
  uint64_t e = prd__error_count();
  prd_cache_free_deferred(cp, p);   /* twice, the first still queued */
  CHECK_EQ(prd__error_count(), e + 1);
  prd_rcu_read_unlock();
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&cp->cache_defer_cbs) - cbs0, 2 * N + 1);   /* none lost */
  /* once its callback ran, a buffer may be deferred again */
  void *q = prd_cache_alloc(cp, 0);
  prd_cache_free_deferred(cp, q);
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&cp->cache_defer_cbs) - cbs0, 2 * N + 2);
  CHECK_EQ(prd__error_count(), e + 1);
  /* a head whose words hold what earlier memory may hold (the callback's address from an
   * earlier deferral, a pointer to this very cache: an earlier object's back-pointer) is
   * not taken for a queued one */
  void *r = prd_cache_alloc(cp, 0);   /* deferred before: its head names the callback */
  prd_defer_head_t *dh = (prd_defer_head_t *)((char *)r + cp->cache_rcu_off);
  prd__annot_chunk_extra(cp, dh, sizeof(*dh));   /* past the object: poisoned under ASan */
  CHECK(dh->dh_head.func != NULL);
  dh->dh_cache = (uintptr_t)cp;
  prd_cache_free_deferred(cp, r);
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&cp->cache_defer_cbs) - cbs0, 2 * N + 3);
  CHECK_EQ(prd__error_count(), e + 1);
  prd_cache_destroy(cp);
  opt_pop("abort_on_error", abort_old);
}

/* Misuse of the call_rcu path in a small-layout cache without magazines (every free reaches
 * the slab layer at once): a buffer freed while its deferral waits, and one deferred while
 * free.  Each is reported when its callback finds it free in its slab, and nothing else
 * changes.  The head and the slab's freelist word once shared a word: the first crashed the
 * callback (it followed the link as its cache), the second cut the slab's freelist. */
static void test_oblivious_misuse(void)
{
#ifdef PRD_ASAN
  /* the callback queue itself runs through the freed buffer's head, which ASan poisoned at
   * the free: ASan reports the misuse first */
  return;
#endif
  long abort_old = opt_push("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create("obl3", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_OBLIVIOUS | PRD_CACHE_NOMAGAZINE |
                                         PRD_CACHE_NODEBUG);
  void *p = prd_cache_alloc(cp, 0), *q = prd_cache_alloc(cp, 0);
  uint64_t e = prd__error_count();
  prd_rcu_read_lock();   /* no callback runs before both misuses */
  prd_cache_free_deferred(cp, p);
  prd_cache_free(cp, p);   /* freed while its deferral waits */
  prd_cache_free(cp, q);
  prd_cache_free_deferred(cp, q);   /* deferred while free */
  prd_rcu_read_unlock();
  prd_rcu_barrier();
  CHECK_EQ(prd__error_count(), e + 2);
  enum { M = 64 };
  void *b[M];
  int dup = 0;
  for (int i = 0; i < M; i++) {
    b[i] = prd_cache_alloc(cp, 0);
    for (int j = 0; j < i; j++)
      dup += b[j] == b[i];
  }
  CHECK_EQ(dup, 0);
  for (int i = 0; i < M; i++)
    prd_cache_free(cp, b[i]);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
  opt_pop("abort_on_error", abort_old);
}

/* ---- the latent cache, merges and hits (mechanisms 1-3) -------------------------------------- */
struct rec { void *r_p; prd_gp_t r_gp; };

static void test_pairs_no_early_reuse(void)
{
  prd_cache_t *cp = prd_cache_create("pairs", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  enum { N = 200000, RING = 4096 };
  static struct rec ring[RING];   /* the states of the last deferrals, by address hash */
  memset(ring, 0, sizeof(ring));
  int early = 0;
  for (int i = 0; i < N; i++) {
    void *p = prd_cache_alloc(cp, 0);
    CHECK(p != NULL);
    struct rec *r = &ring[((uintptr_t)p >> 6) % RING];
    if (r->r_p == p) {   /* handed out again: its grace period must have ended */
      if (!prd_rcu_poll_state(r->r_gp))
        early++;
      r->r_p = NULL;
    }
    r = &ring[((uintptr_t)p >> 6) % RING];
    r->r_p = p;
    r->r_gp = prd_rcu_get_state();   /* <= the state the deferral takes */
    prd_cache_free_deferred(cp, p);
  }
  CHECK_EQ(early, 0);
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.deferred_frees, N);
  CHECK(st.oc_hits > 0);
  CHECK(st.latent_merges > 0);
  CHECK(st.oc_hit_pct > 50.0);
  check_counts(cp, 0);
  wait_all();
  prd_cache_destroy(cp);
}

/* regular alloc/free keep working beside deferrals, and counts add up */
static void test_mixed(void)
{
  prd_cache_t *cp = prd_cache_create("mixed", 100, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  void *held[1000];
  prd_rng_t rng = prd_rng_seeded("test_mixed");
  size_t n = 0;
  for (int i = 0; i < 50000; i++) {
    uint64_t op = prd_rng_below(&rng, 10);
    if (op < 5 && n < 1000) {
      held[n] = prd_cache_alloc(cp, 0);
      CHECK(held[n] != NULL);
      memset(held[n], (int)i, 100);
      n++;
    } else if (op < 8 && n > 0) {
      size_t k = prd_rng_below(&rng, n);
      prd_cache_free_deferred(cp, held[k]);
      held[k] = held[--n];
    } else if (n > 0) {
      size_t k = prd_rng_below(&rng, n);
      prd_cache_free(cp, held[k]);
      held[k] = held[--n];
    }
    if (i % 1000 == 0)
      check_counts(cp, n);
  }
  check_counts(cp, n);
  while (n > 0)
    prd_cache_free(cp, held[--n]);
  wait_all();
  prd_cache_destroy(cp);
}

/* ---- the bound of defer.c section 3 ------------------------------------------------------ */
/* A latent slab: a buffer deferred with an earlier state merges when that state ends, even
 * though a buffer with a later state joined its slab. */
static void test_bound_latent_slab(void)
{
  prd_cache_t *cp = prd_cache_create("bound", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  void *b[2];
  CHECK_EQ(prd__slab_alloc_bulk(cp, b, 2, 0), 2);
  prd_gp_t s1 = prd_rcu_get_state();
  prd_gp_t s2 = s1 + 2;   /* the grace period after: nobody asks for it */
  CHECK_EQ(prd__slab_defer_bulk(cp, &b[0], 1, s1), 0);
  CHECK_EQ(prd__slab_defer_bulk(cp, &b[1], 1, s2), 0);
  CHECK_EQ(stats_of(cp).latent_slab_objs, 2);
  prd_rcu_wait_state(s1);
  CHECK_EQ(prd__slab_lat_merge_all(cp), prd_rcu_poll_state(s2) ? 2u : 1u);
  if (!prd_rcu_poll_state(s2))
    CHECK_EQ(stats_of(cp).latent_slab_objs, 1);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_rcu_wait_state(s2);
  CHECK_EQ(prd__slab_lat_merge_all(cp), prd_rcu_poll_state(s2) ? 1u : 0u);
  prd_cache_destroy(cp);
}

/* A latent cache: object A (state s1) comes back after s1 ends while B (a later state) still
 * waits: A did not wait for B's grace period.  The driver is told to hold back grace periods
 * that nobody waits for, so B's is still pending when A is checked. */
static void test_bound_latent_cache(void)
{
  long old_delay = opt_push("rcu_gp_delay_us", "2000000");
  prd_cache_t *cp = prd_cache_create("boundc", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  void *a = prd_cache_alloc(cp, 0);
  void *b = prd_cache_alloc(cp, 0);
  wait_all();   /* no grace period in progress: the state read below is the deferral's */
  void *keep[300];
  int nk = 0;
  prd_gp_t s1 = prd_rcu_get_state();
  prd_cache_free_deferred(cp, a);
  prd_rcu_wait_state(s1);   /* a waiter skips the delay */
  prd_gp_t s2 = prd_rcu_get_state();
  prd_cache_free_deferred(cp, b);
  bool seen_a = false;
  while (nk < 300 && !seen_a) {
    keep[nk] = prd_cache_alloc(cp, 0);
    CHECK(keep[nk] != b || prd_rcu_poll_state(s2));
    seen_a = keep[nk] == a;
    nk++;
  }
  if (!prd_rcu_poll_state(s2))
    CHECK(seen_a);   /* A came back while B's grace period had not ended */
  while (nk > 0)
    prd_cache_free(cp, keep[--nk]);
  opt_pop("rcu_gp_delay_us", old_delay);
  wait_all();
  prd_cache_destroy(cp);
}

/* ---- latent slabs and slab pre-movement (mechanisms 2, 6) ----------------------------------- */
static void test_latent_slab_overflow_premove(void)
{
  /* the grace period stays pending; Algorithm 1's overflow: the latent slabs only */
  long old_delay = opt_push("rcu_gp_delay_us", "2000000");
  long old_depot = opt_push("defer_depot_kb", "0");
  prd_cache_t *cp = prd_cache_create("lslab", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  enum { N = 200 };
  void *b[N];
  for (int i = 0; i < N; i++)
    b[i] = prd_cache_alloc(cp, 0);
  /* one buffer of every eight freed at once: the slabs (8 buffers of 512 B) have a free
   * buffer each, so pre-movement applies to them (a slab with none stays full) */
  for (int i = 0; i < N; i += 8)
    prd_cache_free(cp, b[i]);
  prd_reap();   /* the freed ones back in their slabs */
  prd_gp_t s = prd_rcu_get_state();
  for (int i = 0; i < N; i++)
    if (i % 8 != 0)
      prd_cache_free_deferred(cp, b[i]);
  prd_cache_stats_t st = stats_of(cp);
  if (!prd_rcu_poll_state(s)) {
    CHECK(st.latent_cache_objs <= 31);    /* the limit: the object-cache size */
    CHECK(st.latent_slab_objs > 0);       /* the rest overflowed to latent slabs */
    CHECK(st.slab_premoves > 0);          /* slabs moved at deferral time */
    CHECK(st.slabs_free > 0);             /* slabs whose every allocated object is deferred */
  }
  check_counts(cp, 0);
  opt_pop("rcu_gp_delay_us", old_delay);
  opt_pop("defer_depot_kb", old_depot);
  prd_rcu_wait_state(s);
  /* a refill now merges the safe latent slabs (line 17: slab choice merges on the way) */
  uint64_t merges0 = stats_of(cp).latent_merges;
  for (int i = 0; i < N; i++)
    b[i] = prd_cache_alloc(cp, 0);
  st = stats_of(cp);
  CHECK(st.latent_merges > merges0);
  CHECK(st.slabs_peak <= (uint64_t)(N / 8 + 2));   /* reused, not grown */
  check_counts(cp, N);
  for (int i = 0; i < N; i++)
    prd_cache_free(cp, b[i]);
  prd_cache_destroy(cp);
}

/* Guards the defect: a slab whose every buffer was allocated and then deferred stayed on the
 * free list (pre-moved), ahead of the slabs that still had free buffers, and the refill looks
 * at the first 10 free slabs only; once ten such slabs led the list, every allocation of a
 * cache without magazines grew a new slab and left its other buffers unused behind them (an
 * outside tester's 100,000 allocate-then-defer calls with a reader in its section: 99,860
 * slabs of 15 buffers, 390 MB).  A slab with no free buffer now stays full. */
static void test_latent_slabs_fill(void)
{
  long old_delay = opt_push("rcu_gp_delay_us", "2000000");   /* the grace period stays pending */
  prd_cache_t *cp = prd_cache_create("lfill", 256, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG | PRD_CACHE_NOMAGAZINE);
  enum { N = 3000 };
  prd_gp_t s = prd_rcu_get_state();
  for (int i = 0; i < N; i++)
    prd_cache_free_deferred(cp, prd_cache_alloc(cp, 0));
  prd_cache_stats_t st = stats_of(cp);
  if (!prd_rcu_poll_state(s)) {
    uint64_t per_slab = st.bufs_total / (st.slabs_full + st.slabs_partial + st.slabs_free);
    CHECK(st.slabs_peak <= N / per_slab + 2);   /* every slab filled before the next */
  }
  opt_pop("rcu_gp_delay_us", old_delay);
  prd_rcu_wait_state(s);
  check_counts(cp, 0);
  prd_cache_destroy(cp);
}

/* ---- the depot's latent magazines (magazine.c section 13) ---------------------------------- */
struct alloc_one_arg { prd_cache_t *ao_cp; void *ao_buf; };

static void *alloc_one_thread(void *arg)
{
  struct alloc_one_arg *ao = arg;
  ao->ao_buf = prd_cache_alloc(ao->ao_cp, 0);
  return NULL;
}

static void test_depot_latent(void)
{
  /* the driver leaves the grace period pending; the depot holds 96 objects of 512 B */
  long old_delay = opt_push("rcu_gp_delay_us", "2000000");
  long old_depot = opt_push("defer_depot_kb", "48");
  prd_cache_t *cp = prd_cache_create("dlat", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  enum { N = 400 };
  static void *b[N], *c[N];
  for (int i = 0; i < N; i++)
    b[i] = prd_cache_alloc(cp, 0);
  prd_gp_t s = prd_rcu_get_state();
  for (int i = 0; i < N; i++)
    prd_cache_free_deferred(cp, b[i]);
  prd_cache_stats_t st = stats_of(cp);
  bool pending = !prd_rcu_poll_state(s);
  if (pending) {
    CHECK(st.latent_cache_objs <= 31);          /* the limit: the object-cache size */
    CHECK(st.latent_depot_objs > 0);            /* whole generations handed to the depot */
    CHECK(st.latent_depot_objs <= 96);          /* ... within defer_depot_kb */
    CHECK(st.latent_depot_moves >= st.latent_depot_objs);
    CHECK(st.latent_slab_objs > 0);             /* the rest: Algorithm 1's latent slabs */
  }
  /* nothing comes back before its grace period, from the depot or anywhere; PRD_NOSLEEP
   * allocations never wait for it */
  for (int i = 0; i < N; i++) {
    c[i] = prd_cache_alloc(cp, PRD_NOSLEEP);
    CHECK(c[i] != NULL);
    for (int k = 0; k < N; k++)
      if (c[i] == b[k])
        CHECK(prd_rcu_poll_state(s));
  }
  /* c stays allocated until the thread below has allocated: its frees would fill the depot
   * with full magazines, which a miss takes before it considers a wait */
  check_counts(cp, N);
  /* a sleeping allocation that misses while the depot's latent magazines hold half their
   * bound, none safe, asks for their grace period expedited (the paced driver would wait
   * 2 s), polls it, and takes one back whole, before any full magazine: a new thread, whose
   * first allocation misses.  The poll is bounded (defer_poll_us; it never waits for
   * readers, defer.c section 9): lengthened here so that a loaded machine, whose driver may
   * wait for a CPU, still ends the grace period within it */
  long old_poll = opt_push("defer_poll_us", "2000000");
  st = stats_of(cp);
  uint64_t merges0 = st.latent_merges, lat0 = st.latent_depot_objs;
  uint64_t waits0 = st.depot_gp_waits, gpw0 = st.gp_waits;
  pending = !prd_rcu_poll_state(s);
  CHECK(!pending || 2 * lat0 * 512 >= 48 * 1024);
  struct alloc_one_arg ao = { cp, NULL };
  pthread_t t;
  pthread_create(&t, NULL, alloc_one_thread, &ao);
  pthread_join(t, NULL);
  CHECK(ao.ao_buf != NULL);
  st = stats_of(cp);
  if (pending) {
    CHECK(st.depot_gp_waits > waits0);   /* the depot rule's wait, counted as its own */
    CHECK(st.gp_waits > gpw0);           /* and in the cache's inline waits */
    CHECK(prd_rcu_poll_state(s));
  }
  if (lat0 > 0) {
    CHECK(st.latent_depot_objs < lat0);
    CHECK(st.latent_merges > merges0);
  }
  check_counts(cp, N + 1);
  prd_cache_free(cp, ao.ao_buf);
  for (int i = 0; i < N; i++)
    prd_cache_free(cp, c[i]);
  opt_pop("defer_poll_us", old_poll);
  opt_pop("rcu_gp_delay_us", old_delay);
  prd_rcu_wait_state(s);
  /* a reap gives safe latent magazines' objects back to the slab layer */
  prd_cache_reap(cp);
  CHECK_EQ(stats_of(cp).latent_depot_objs, 0);
  check_counts(cp, 0);
  opt_pop("defer_depot_kb", old_depot);
  prd_cache_destroy(cp);
}

/* ---- refill slab choice (mechanism 7, Fig. 5) ---------------------------------------------- */
/* The growth reap (cache.c section 4) empties the depots that moved no magazine since the
 * previous one: a finished phase's memory.  A depot whose deferred objects circulate as
 * tagged magazines is busy, though no full magazine moves: it keeps them (before, such a
 * reap gave every tagged magazine out, the unsafe ones object by object to the latent
 * slabs, in the allocation that crossed the 4 MiB mark); once it goes quiet, the next reap
 * takes them. */
static void test_growth_reap_busy_depot(void)
{
  long old_delay = opt_push("rcu_gp_delay_us", "2000000");
  long old_depot = opt_push("defer_depot_kb", "1024");
  long old_decay = opt_push("decay_ms", "0");   /* no decay pass between the steps */
  prd_cache_t *cp = prd_cache_create("gbusy", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  enum { N = 600 };
  static void *b[N];
  for (int i = 0; i < N; i++)
    b[i] = prd_cache_alloc(cp, 0);
  prd__slab_grown((size_t)4 << 20);   /* a growth reap: the depot's moves noted (none) */
  for (int i = 0; i < N; i++)
    prd_cache_free_deferred(cp, b[i]);
  prd_cache_stats_t st = stats_of(cp);
  CHECK(st.latent_depot_objs > 0);    /* whole generations handed to the depot */
  uint64_t in_depot = st.latent_depot_objs;
  prd__slab_grown((size_t)4 << 20);   /* tagged magazines moved since: busy, kept */
  CHECK_EQ(stats_of(cp).latent_depot_objs, in_depot);
  prd__slab_grown((size_t)4 << 20);   /* nothing moved since: idle, given out */
  CHECK_EQ(stats_of(cp).latent_depot_objs, 0);
  check_counts(cp, 0);
  prd_rcu_barrier();
  prd_cache_destroy(cp);
  opt_pop("decay_ms", old_decay);
  opt_pop("defer_depot_kb", old_depot);
  opt_pop("rcu_gp_delay_us", old_delay);
}

/* The depot's tagged magazines on its list now (dp_lock: the maintenance work may run). */
static uint64_t lat_mags(prd_cache_t *cp)
{
  pthread_mutex_lock(cp->cache_depot.dp_lock);
  uint64_t n = cp->cache_depot.dp_lat_mags;
  pthread_mutex_unlock(cp->cache_depot.dp_lock);
  return n;
}

/* A child's maintenance driven by hand: no maintenance thread and an interval that never
 * comes by itself, so prd__maint_tick runs the interval and the decay pass (its period 1 ms,
 * the caller sleeps past it). */
static void decay_driven(void)
{
  CHECK_EQ(prd_option_set("maint_thread", "0"), 0);
  CHECK_EQ(prd_option_set("maint_interval", "100000000"), 0);
  CHECK_EQ(prd_option_set("decay_ms", "2"), 0);
}

/* The decay pass (cache.c section 4) takes of a busy depot's tagged magazines only the spares
 * of its period, the fewest safe ones an allocation's visit to the depot left behind
 * (magazine.c section 13): the rest is the circulation of its deferrals, which, emptied every
 * pass, came back from the slabs object by object.  Once the depot is idle, the passes give
 * every safe one back.  In a child whose maintenance is driven by hand (decay_driven). */
static void decay_busy_child(void *arg)
{
  (void)arg;
  decay_driven();
  CHECK_EQ(prd_option_set("rcu_gp_delay_us", "2000000"), 0);   /* generations reach the depot */
  prd_cache_t *cp = prd_cache_create("dbusy", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  prd__mag_set_min_rounds(cp, 255);   /* a few whole generations per batch below */
  enum { N = 2000 };
  static void *b[N], *c[N], *d[N];
  for (int i = 0; i < N; i++) {   /* these visits find the list empty: no spare */
    b[i] = prd_cache_alloc(cp, 0);
    c[i] = prd_cache_alloc(cp, 0);
  }
  for (int i = 0; i < N; i++)
    prd_cache_free_deferred(cp, b[i]);
  prd_synchronize_rcu();   /* every tagged magazine safe */
  uint64_t m = lat_mags(cp);
  CHECK(m >= 3 && m - 2 < 16);   /* exact counts below (16: the spares a get counts) */
  /* allocations until a miss takes one; with the empty visits before, the pass takes none */
  int n = 0;
  while (n < N && lat_mags(cp) == m)
    d[n++] = prd_cache_alloc(cp, 0);
  usleep(3000);
  prd__maint_tick();   /* an interval that took one (kept) and a decay pass */
  CHECK_EQ(lat_mags(cp), m - 1);
  /* the next pass's get leaves m - 2 spares */
  while (n < N && lat_mags(cp) == m - 1)
    d[n++] = prd_cache_alloc(cp, 0);
  CHECK_EQ(lat_mags(cp), m - 2);
  /* more generations reach the list, waiting while this thread reads, safe after */
  prd_rcu_read_lock();
  for (int i = 0; i < N; i++)
    prd_cache_free_deferred(cp, c[i]);
  prd_rcu_read_unlock();
  uint64_t more = lat_mags(cp) - (m - 2);
  CHECK(more > 0);
  prd_synchronize_rcu();
  usleep(3000);
  prd__maint_tick();   /* the pass takes its m - 2 spares, oldest first */
  CHECK_EQ(lat_mags(cp), more);
  for (int i = 0; i < n; i++)
    prd_cache_free(cp, d[i]);
  /* idle from here: the next intervals and passes give the rest back */
  for (int t = 0; t < 4 && lat_mags(cp) != 0; t++) {
    usleep(3000);
    prd__maint_tick();
  }
  CHECK_EQ(stats_of(cp).latent_depot_objs, 0);
  check_counts(cp, 0);
  prd_cache_destroy(cp);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

/* The decay pass frees the latent slabs' deferred buffers whose grace period has ended
 * (cache.c section 4): without it they waited for a refill from the slabs, which a depot
 * whose tagged magazines circulate may never make, and a reader's stall kept its burst's
 * slabs for good.  In a child whose maintenance is driven by hand (decay_driven). */
static void decay_latent_child(void *arg)
{
  (void)arg;
  decay_driven();
  CHECK_EQ(prd_option_set("defer_depot_kb", "64"), 0);   /* the overflow to the latent slabs */
  prd_cache_t *cp = prd_cache_create("dlslab", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  enum { N = 3000 };
  static void *b[N];
  for (int i = 0; i < N; i++)
    b[i] = prd_cache_alloc(cp, 0);
  prd_rcu_read_lock();   /* a stall: no grace period ends while the burst is deferred */
  for (int i = 0; i < N; i++)
    prd_cache_free_deferred(cp, b[i]);
  prd_rcu_read_unlock();
  CHECK(stats_of(cp).latent_slab_objs > 0);
  prd_synchronize_rcu();
  usleep(3000);
  prd__maint_tick();   /* a decay pass: merged, no allocation needed */
  CHECK_EQ(stats_of(cp).latent_slab_objs, 0);
  check_counts(cp, 0);
  prd_cache_destroy(cp);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_decay_latent_slabs(void)
{
  prd_test_child_ok(decay_latent_child);
}

static void test_decay_busy_depot(void)
{
  prd_test_child_ok(decay_busy_child);
}

/* The growth reap gives a phase's objects back a slice at a time (cache.c section 4): the
 * allocation that crosses the mark takes the first slice, each new slab after it the next,
 * until the depot is empty; a class that allocates again meanwhile keeps the rest.  A class
 * that allocated since the last mark is in use at this one, though it freed since. */
static uint64_t depot_rounds_after_slabs(prd_cache_t *cp, int slabs)
{
  for (int i = 0; i < slabs; i++)
    prd__slab_grown(4096);   /* a new slab: the next slice while work is left */
  return stats_of(cp).depot_rounds;
}

static void test_growth_reap_slices(void)
{
  long old_decay = opt_push("decay_ms", "0");   /* no decay pass between the steps */
  prd_cache_t *cp = prd_cache_create("gslice", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  enum { N = 40000 };
  void **b = malloc(N * sizeof(void *));
  CHECK(b != NULL);
  for (int round = 0; round < 2 && b != NULL; round++) {
    for (int i = 0; i < N; i++)
      b[i] = prd_cache_alloc(cp, 0);
    for (int i = 0; i < N; i++)
      prd_cache_free(cp, b[i]);   /* a phase's objects, parked in the depot */
    uint64_t parked = stats_of(cp).depot_rounds;
    CHECK(parked > 3 * 4096);
    prd__slab_grown((size_t)4 << 20);   /* a mark: the class allocated since the last one */
    CHECK_EQ(stats_of(cp).depot_rounds, parked);
    prd__slab_grown((size_t)4 << 20);   /* a mark: it only freed since, its first slice goes */
    uint64_t first = stats_of(cp).depot_rounds;
    CHECK(first < parked);
    CHECK(first > 0);   /* not the whole phase in one allocation */
    if (round == 0) {
      CHECK_EQ(depot_rounds_after_slabs(cp, 100), 0);   /* the next slabs carry the rest */
    } else {
      for (int i = 0; i < 2000; i++)   /* in use again: magazines move */
        b[i] = prd_cache_alloc(cp, 0);
      for (int i = 0; i < 2000; i++)
        prd_cache_free(cp, b[i]);
      uint64_t used = stats_of(cp).depot_rounds;
      CHECK(used > 0);
      CHECK_EQ(depot_rounds_after_slabs(cp, 100), used);   /* its working set: kept */
    }
    check_counts(cp, 0);
  }
  free(b);
  prd_cache_destroy(cp);
  opt_pop("decay_ms", old_decay);
}

static void test_refill_choice(void)
{
  prd_cache_t *cp = prd_cache_create("fig5", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.bufs_per_slab, 8);
  void *a[16];
  CHECK_EQ(prd__slab_alloc_bulk(cp, a, 16, 0), 16);
  /* which slab is which: the slab layer hands out a slab's buffers in address order */
  char *s1 = a[0], *s2 = a[8];
  CHECK((char *)a[7] - s1 == 7 * 512 && (char *)a[15] - s2 == 7 * 512);
  prd__slab_free_bulk(cp, a + 2, 6);    /* slab A: 2 live */
  prd__slab_free_bulk(cp, a + 11, 5);   /* slab B: 3 allocated ... */
  prd_gp_t far = prd_rcu_get_state() + 2;
  CHECK_EQ(prd__slab_defer_bulk(cp, a + 8, 2, far), 0);   /* ... 2 of them deferred */
  void *x;
  CHECK_EQ(prd__slab_alloc_bulk(cp, &x, 1, 0), 1);
  if (!prd_rcu_poll_state(far)) {
    CHECK((char *)x >= s1 && (char *)x < s1 + 8 * 512);   /* slab A, as Fig. 5 */
    CHECK(stats_of(cp).frag_skips >= 1);
  }
  CHECK_EQ(prd__cache_check(cp), 0);
  prd__slab_free_bulk(cp, &x, 1);
  prd__slab_free_bulk(cp, a, 2);
  prd__slab_free_bulk(cp, a + 10, 1);
  prd_rcu_wait_state(far);
  prd_cache_destroy(cp);
}

/* ---- partial refill and flush sized by the latent count (mechanism 4) ---------------------- */
static void test_partial_refill(void)
{
  long old_delay = opt_push("rcu_gp_delay_us", "2000000");
  prd_cache_t *cp = prd_cache_create("partial", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  void *b[400];
  for (int i = 0; i < 400; i++)
    b[i] = prd_cache_alloc(cp, 0);
  prd_gp_t s = prd_rcu_get_state();
  for (int i = 0; i < 10; i++)
    prd_cache_free_deferred(cp, b[i]);
  uint64_t p0 = stats_of(cp).partial_refills;
  void *c[300];
  for (int i = 0; i < 300; i++)
    c[i] = prd_cache_alloc(cp, 0);
  if (!prd_rcu_poll_state(s)) {
    CHECK(stats_of(cp).partial_refills > p0);
    CHECK(stats_of(cp).oc_resizes > 0);   /* misses with latent objects waiting: it grew */
  }
  /* regular frees overflow the object cache: flushes */
  for (int i = 0; i < 300; i++)
    prd_cache_free(cp, c[i]);
  prd_cache_stats_t st = stats_of(cp);
  CHECK(st.oc_flushes > 0);
  CHECK(st.oc_churns > 0);
  check_counts(cp, 390);
  opt_pop("rcu_gp_delay_us", old_delay);
  for (int i = 10; i < 400; i++)
    prd_cache_free(cp, b[i]);
  prd_rcu_wait_state(s);
  prd_cache_destroy(cp);
}

/* ---- pre-flush on the idle thread (mechanism 5) ------------------------------------------- */
static void test_preflush(void)
{
  long old_delay = opt_push("rcu_gp_delay_us", "2000000");
  prd_cache_t *cp = prd_cache_create("preflush", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  void *b[300];
  for (int i = 0; i < 300; i++)
    b[i] = prd_cache_alloc(cp, 0);
  for (int i = 0; i < 100; i++)   /* the object cache fills up again */
    prd_cache_free(cp, b[i]);
  prd_gp_t s = prd_rcu_get_state();
  for (int i = 100; i < 200; i++)  /* object cache + latent cache > size: line 41 */
    prd_cache_free_deferred(cp, b[i]);
  /* the pre-flush job runs on the maintenance thread: wait for it (no time limit but ctest's) */
  prd_cache_stats_t st = stats_of(cp);
  while (st.preflush_moves == 0 && !prd_rcu_poll_state(s)) {
    sched_yield();
    st = stats_of(cp);
  }
  if (st.preflush_moves != 0) {
    /* a snapshot reads the layers one after the other (the latent slabs before the
     * magazine layer's counters), so the reading that first showed the counter may have
     * read the latent slabs before the move: read again, after it */
    st = stats_of(cp);
    CHECK(st.latent_slab_objs + st.latent_merges > 0);
    CHECK(st.oc_objs + st.latent_cache_objs <= 127 || prd_rcu_poll_state(s));
  }
  check_counts(cp, 100);
  opt_pop("rcu_gp_delay_us", old_delay);
  for (int i = 200; i < 300; i++)
    prd_cache_free(cp, b[i]);
  prd_rcu_wait_state(s);
  prd_cache_destroy(cp);
}

/* ---- out of memory: wait for a grace period instead of failing (mechanism 8) -------------- */
static void test_oom_waits(void)
{
  size_t page = prd__os_page_size();
  size_t size = 16 * page;
  void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(base != MAP_FAILED);
  prd_vmem_t *vm = prd_vmem_create("oomarena", base, size, page, NULL, NULL, NULL, 0,
                                   PRD_VM_SLEEP);
  prd_cache_t *cp = prd_cache_create("oom", 512, 0, NULL, NULL, NULL, NULL, vm,
                                     PRD_CACHE_NODEBUG);
  size_t n = 0;
  void *b[200];
  while (n < 200 && (b[n] = prd_cache_alloc(cp, PRD_NOSLEEP)) != NULL)
    n++;
  CHECK(n > 0 && n < 200);   /* the arena is exhausted */
  for (size_t i = 0; i < n; i++)
    prd_cache_free_deferred(cp, b[i]);
  /* everything is deferred; a sleeping allocation waits for the grace period (lines 31-32) */
  void *x = prd_cache_alloc(cp, PRD_SLEEP);
  CHECK(x != NULL);
  prd_cache_stats_t st = stats_of(cp);
  CHECK(st.oom_gp_waits + st.latent_merges > 0);
  prd_cache_free(cp, x);
  /* PRD_NOSLEEP: fill again, defer, wait outside; the allocation merges what is safe */
  n = 0;
  while (n < 200 && (b[n] = prd_cache_alloc(cp, PRD_NOSLEEP)) != NULL)
    n++;
  for (size_t i = 0; i < n; i++)
    prd_cache_free_deferred(cp, b[i]);
  wait_all();
  x = prd_cache_alloc(cp, PRD_NOSLEEP);
  CHECK(x != NULL);
  prd_cache_free(cp, x);
  check_counts(cp, 0);
  prd_cache_destroy(cp);
  prd_vmem_destroy(vm);
  munmap(base, size);
}

/* ---- thread exit keeps the states (mechanism 9) ------------------------------------------- */
struct exit_arg { prd_cache_t *ea_cp; void *ea_p[100]; prd_gp_t ea_gp; };

static void *exit_thread(void *arg)
{
  struct exit_arg *ea = arg;
  for (int i = 0; i < 100; i++)
    ea->ea_p[i] = prd_cache_alloc(ea->ea_cp, 0);
  ea->ea_gp = prd_rcu_get_state();
  for (int i = 0; i < 100; i++)
    prd_cache_free_deferred(ea->ea_cp, ea->ea_p[i]);
  return NULL;
}

static void test_thread_exit(void)
{
  long old_delay = opt_push("rcu_gp_delay_us", "2000000");
  prd_cache_t *cp = prd_cache_create("texit", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  struct exit_arg ea = { .ea_cp = cp };
  pthread_t t;
  pthread_create(&t, NULL, exit_thread, &ea);
  pthread_join(t, NULL);
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.latent_cache_objs, 0);   /* the record went away with the thread */
  CHECK_EQ(st.deferred_frees, 100);
  /* nothing lost: whole generations went to the depot's latent list with their states */
  CHECK_EQ(st.bufs_inuse, st.latent_depot_objs + st.latent_slab_objs);
  CHECK(st.latent_depot_objs > 0 || prd_rcu_poll_state(ea.ea_gp));
  /* nothing reused early: allocations here never return them before their grace period */
  void *x[300];
  for (int i = 0; i < 300; i++) {
    x[i] = prd_cache_alloc(cp, 0);
    for (int k = 0; k < 100; k++)
      if (x[i] == ea.ea_p[k])
        CHECK(prd_rcu_poll_state(ea.ea_gp));
  }
  for (int i = 0; i < 300; i++)
    prd_cache_free(cp, x[i]);
  opt_pop("rcu_gp_delay_us", old_delay);
  prd_cache_destroy(cp);   /* waits for the latent slabs' grace period */
}

/* Threads that start, defer and exit one after the other: each exit leaves its empty
 * magazine on the depot's list, and the next thread's first refill and first deferral take
 * magazines from that list before making new ones, so the list stays short however many
 * threads come and go (it grew by one magazine per thread, never reaped while it grew). */
static void *defer_one_thread(void *arg)
{
  prd_cache_t *cp = arg;
  prd_cache_free_deferred(cp, prd_cache_alloc(cp, 0));
  return NULL;
}

static void test_thread_churn_magazines(void)
{
  prd_cache_t *cp = prd_cache_create("tchurn", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  enum { THREADS = 400 };
  for (int i = 0; i < THREADS; i++) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, defer_one_thread, cp), 0);
    pthread_join(t, NULL);
  }
  prd_cache_stats_t st = stats_of(cp);
  printf("  %d threads: depot empty magazines %llu (puts %llu, gets %llu)\n", THREADS,
         (unsigned long long)st.depot_empty_mags, (unsigned long long)st.depot_empty_puts,
         (unsigned long long)st.depot_empty_gets);
  CHECK_EQ(st.deferred_frees, THREADS);
  CHECK(st.depot_empty_puts >= THREADS - 1);   /* every exit left one */
  CHECK(st.depot_empty_mags <= 4);              /* and the next thread took it */
  prd_cache_destroy(cp);
}

/* A new thread's first refills of a cache with deferrals take a few objects, not the cache's
 * whole (grown) magazine: the thread below allocates 40 objects and defers them, in a cache
 * whose magazines were grown to their largest size first. */
static void *alloc_defer_some(void *arg)
{
  prd_cache_t *cp = arg;
  for (int i = 0; i < 40; i++)
    prd_cache_free_deferred(cp, prd_cache_alloc(cp, PRD_SLEEP));
  return NULL;
}

static void test_refill_ramp(void)
{
  prd_cache_t *cp = prd_cache_create("ramp", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  while (prd__mag_grow(cp))
    ;
  CHECK(prd__mag_cur_size(cp) >= 1023);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, alloc_defer_some, cp), 0);
  pthread_join(t, NULL);
  uint64_t taken = stats_of(cp).allocs;   /* from the slab layer */
  printf("  a new thread's first refills took %llu objects (magazine of %u)\n",
         (unsigned long long)taken, prd__mag_cur_size(cp));
  CHECK(taken <= 120);   /* 40 used: refills of 16, 32 and 64 at most */
  prd_cache_destroy(cp);
}

/* Prudence's growth is bounded by the threads that hold magazines (magazine.c section 8): a
 * magazine holds at most 16 MiB over their number, never more than 512 KiB, and the depot steps
 * back down when threads arrive after it grew; threads idle a whole interval do not count
 * until their next miss.  The threads below each take one object (and
 * so a record on the registry), then wait until the main thread has looked. */
struct holder {
  prd_cache_t *h_cp;
  pthread_barrier_t *h_bar;
};

static void *hold_magazines(void *arg)
{
  struct holder *h = arg;
  void *obj = prd_cache_alloc(h->h_cp, PRD_SLEEP);
  pthread_barrier_wait(h->h_bar);   /* every thread holds its magazines */
  pthread_barrier_wait(h->h_bar);   /* the main thread has checked, and reaped them idle */
  prd_cache_free(h->h_cp, obj);     /* a miss: the thread counts again */
  pthread_barrier_wait(h->h_bar);
  pthread_barrier_wait(h->h_bar);
  return NULL;
}

static void test_growth_bounded_by_threads(void)
{
  prd_cache_t *cp = prd_cache_create("tbound", 512, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  while (prd__mag_grow(cp))
    ;
  uint32_t alone = prd__mag_cur_size(cp);
  CHECK_EQ(alone, 1023);   /* 1023 x 512 B: the last row within 512 KiB */
  /* a cache that a layer above started at 63 rounds of 4 KiB (252 KiB) steps back down no
   * further than that */
  prd_cache_t *cp2 = prd_cache_create("tfloor", 4096, 0, NULL, NULL, NULL, NULL, NULL,
                                      PRD_CACHE_NODEBUG);
  prd__mag_set_min_rounds(cp2, 63);
  CHECK_EQ(prd__mag_cur_size(cp2), 63);
  while (prd__mag_grow(cp2))
    ;
  CHECK_EQ(prd__mag_cur_size(cp2), 95);   /* 143 x 4 KiB would be past 512 KiB */
  enum { THREADS = 100 };   /* with this one, 16 MiB / 101: rows of at most 166 KiB */
  pthread_t t[THREADS];
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, THREADS + 1);
  struct holder h = { cp, &bar };
  for (int i = 0; i < THREADS; i++)
    CHECK_EQ(pthread_create(&t[i], NULL, hold_magazines, &h), 0);
  pthread_barrier_wait(&bar);
  /* the next magazine any thread takes is of the stepped-down size, and a latent miss's
   * growth does not take it back up */
  prd__mag_free_empty(prd__mag_new(cp));
  uint32_t crowded = prd__mag_cur_size(cp);
  CHECK(!prd__mag_grow(cp));
  CHECK_EQ(prd__mag_cur_size(cp), crowded);
  prd__mag_free_empty(prd__mag_new(cp2));
  CHECK_EQ(prd__mag_cur_size(cp2), 63);
  printf("  magazine rounds: %u alone, %u with %d more threads\n", alone, crowded, THREADS);
  CHECK(crowded * 512u <= (16u << 20) / (THREADS + 1));
  CHECK(crowded >= 127);   /* never below 64 KiB of objects */
  /* threads idle for a whole interval (two ticks: the first marks, the second finds nothing
   * done since) leave the count: the growth goes on while they sleep */
  prd__maint_tick();
  prd__maint_tick();
  while (prd__mag_grow(cp))
    ;
  CHECK_EQ(prd__mag_cur_size(cp), alone);
  pthread_barrier_wait(&bar);
  pthread_barrier_wait(&bar);   /* each has missed once since: counted again */
  prd__mag_free_empty(prd__mag_new(cp));
  CHECK_EQ(prd__mag_cur_size(cp), crowded);
  pthread_barrier_wait(&bar);
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&bar);
  /* the threads gone, the growth goes back up to the single thread's size */
  while (prd__mag_grow(cp))
    ;
  CHECK_EQ(prd__mag_cur_size(cp), alone);
  prd_cache_destroy(cp);
  prd_cache_destroy(cp2);
}

/* n objects of cp (made with PRD_CACHE_NOMAGAZINE) allocated, then deferred inside a read-side
 * section, which the caller ends: no grace period ends meanwhile, so with no magazines every
 * deferral waits in the latent slabs and none is merged early. */
static void latent_burst(prd_cache_t *cp, void **objs, int n)
{
  for (int i = 0; i < n; i++)
    objs[i] = prd_cache_alloc(cp, 0);
  prd_rcu_read_lock();
  for (int i = 0; i < n; i++)
    prd_cache_free_deferred(cp, objs[i]);
}

/* A burst through the latent slabs (a grace period that outlasted the CPU layer: a reader
 * preempted in its section) grows the cache; when its grace period ends, its slabs come free
 * together, and the cache keeps no more than a quarter of its slabs in use free past 50 ms
 * (slab.c section 6), instead of all of them for a working-set interval. */
static void test_burst_slabs_given_back(void)
{
  prd_cache_t *cp = prd_cache_create("burst", 256, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NOMAGAZINE | PRD_CACHE_NODEBUG);
  enum { N = 4000 };
  static void *objs[N];
  latent_burst(cp, objs, N);   /* the burst */
  prd_rcu_read_unlock();
  prd_synchronize_rcu();
  void *keep = prd_cache_alloc(cp, 0);   /* the merges of the ended grace period */
  prd_cache_stats_t st = stats_of(cp);
  CHECK(st.slabs_free > 100);   /* kept while they may be the swing of a busy cache ... */
  usleep(60000);
  prd_cache_free(cp, keep);     /* ... but not past 50 ms */
  keep = prd_cache_alloc(cp, 0);
  st = stats_of(cp);
  uint64_t used = st.slabs_full + st.slabs_partial;
  printf("  after the burst: %llu slabs in use, %llu free (of %llu at the peak)\n",
         (unsigned long long)used, (unsigned long long)st.slabs_free,
         (unsigned long long)st.slabs_peak);
  CHECK(st.slabs_peak >= 100);
  CHECK(st.slabs_free <= 16 || st.slabs_free <= used / 4);
  prd_cache_free(cp, keep);
  prd_cache_destroy(cp);
}

/* A reap makes free what the latent slabs hold past its grace period, so that their slabs
 * can go (before, they waited for the cache's next allocation to merge them). */
static void test_reap_merges_latent_slabs(void)
{
  prd_cache_t *cp = prd_cache_create("lreap", 128, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NOMAGAZINE | PRD_CACHE_NODEBUG);
  enum { N = 300 };
  static void *objs[N];
  latent_burst(cp, objs, N);
  prd_cache_stats_t st = stats_of(cp);
  CHECK_EQ(st.latent_slab_objs, N);
  prd_rcu_read_unlock();
  prd_synchronize_rcu();
  prd_cache_reap(cp);
  st = stats_of(cp);
  CHECK_EQ(st.latent_slab_objs, 0);
  CHECK_EQ(st.bufs_inuse, 0);
  CHECK_EQ(st.slabs_full + st.slabs_partial, 0);
  prd_cache_destroy(cp);
}

/* ---- bounded memory under a flood (mechanism 10, §3.4) ------------------------------------- */
static void test_flood_bounded(void)
{
  long old_cap = opt_push("defer_latent_max_kb", "1024");
  long old_depot = opt_push("defer_depot_kb", "512");
  /* the throttles poll for the grace period, bounded, and grow the cache when it has not
   * ended (no allocation waits for readers, defer.c section 9): a poll long beside a grace
   * period without readers makes the bound hold on a loaded machine too, whose driver may
   * wait for a CPU for milliseconds (the default's figures: docs/benchmarks.md) */
  long old_poll = opt_push("defer_poll_us", "100000");
  prd_cache_t *cp = prd_cache_create("flood", 256, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
#if defined(PRD_TSAN) || defined(PRD_ASAN)
  enum { N = 200000 };
#else
  enum { N = 2000000 };
#endif
  for (int i = 0; i < N; i++) {
    void *p = prd_cache_alloc(cp, 0);
    CHECK(p != NULL);
    prd_cache_free_deferred(cp, p);
  }
  prd_cache_stats_t st = stats_of(cp);
  /* a steady state while grace periods end within the poll: the latent slabs stay under
   * defer_latent_max_kb (1 MiB here) and the depot's latent magazines under defer_depot_kb
   * (512 KiB): within twice their sum, against N * 256 B = 512 MB */
  CHECK(st.slabs_peak * st.slab_size <= 2 * (1024 + 512) * 1024);
  CHECK(st.latent_depot_objs * 256 <= 512 * 1024);
  CHECK(st.oc_hit_pct > 50.0);
  opt_pop("defer_latent_max_kb", old_cap);
  opt_pop("defer_depot_kb", old_depot);
  opt_pop("defer_poll_us", old_poll);
  wait_all();
  prd_cache_destroy(cp);
}

/* ---- the latent cache inside the magazine layer ------------------------------------------- */
/* A cache with deferrals keeps prd_cache_alloc/prd_cache_free on the magazine hit path. */
static void test_hit_path_stays(void)
{
  prd_cache_t *cp = prd_cache_create("hitpath", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  void *p = prd_cache_alloc(cp, 0);
  CHECK(p != NULL);
  prd_cache_free_deferred(cp, p);
  void *q = prd_cache_alloc(cp, 0);   /* a magazine is loaded now */
  prd_cache_free(cp, q);
  prd_cache_stats_t st0 = stats_of(cp);
  for (int i = 0; i < 1000; i++) {
    void *x = prd_cache_alloc(cp, 0);
    CHECK(x != NULL);
    prd_cache_free(cp, x);
  }
  prd_cache_stats_t st1 = stats_of(cp);
  CHECK_EQ(st1.mag_alloc_hits - st0.mag_alloc_hits, 1000);
  CHECK_EQ(st1.mag_free_hits - st0.mag_free_hits, 1000);
  CHECK_EQ(st1.deferred_frees, 1);
  check_counts(cp, 0);
  wait_all();
  prd_cache_destroy(cp);
}

/* prd_thread_flush and prd_reap take the thread's latent magazines: the objects move to the
 * latent slabs with their states, none is lost, none handed out before its grace period. */
static uint64_t latent_seen(prd_cache_t *cp)
{
  prd_cache_stats_t st = stats_of(cp);
  return st.latent_cache_objs + st.latent_slab_objs + st.latent_merges;
}

static void flush_check(prd_cache_t *cp, void *const *b, int n, prd_gp_t s, bool reap,
                        uint64_t seen0)
{
  prd_cache_stats_t st;
  if (!prd_rcu_poll_state(s))
    CHECK_EQ(latent_seen(cp) - seen0, (uint64_t)n);   /* all waiting (or merged after s) */
  st = stats_of(cp);
  CHECK(st.latent_cache_objs > 0 || prd_rcu_poll_state(s));   /* in this thread's magazines */
  if (reap)
    prd_reap();
  else
    prd_thread_flush();
  st = stats_of(cp);
  CHECK_EQ(st.latent_cache_objs, 0);
  check_counts(cp, 0);
  void *x[200];
  for (int i = 0; i < 200; i++) {
    x[i] = prd_cache_alloc(cp, 0);
    CHECK(x[i] != NULL);
    for (int k = 0; k < n; k++)
      if (x[i] == b[k])
        CHECK(prd_rcu_poll_state(s));
  }
  for (int i = 0; i < 200; i++)
    prd_cache_free(cp, x[i]);
}

static void test_flush_reap_keep_states(void)
{
  long old_delay = opt_push("rcu_gp_delay_us", "2000000");
  prd_cache_t *cp = prd_cache_create("tflush", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  for (int round = 0; round < 2; round++) {
    void *b[10];
    for (int i = 0; i < 10; i++)
      b[i] = prd_cache_alloc(cp, 0);
    prd_gp_t s = prd_rcu_get_state();
    uint64_t d0 = stats_of(cp).deferred_frees, seen0 = latent_seen(cp);
    for (int i = 0; i < 10; i++)
      prd_cache_free_deferred(cp, b[i]);
    CHECK_EQ(stats_of(cp).deferred_frees - d0, 10);
    flush_check(cp, b, 10, s, round == 1, seen0);
  }
  opt_pop("rcu_gp_delay_us", old_delay);
  wait_all();
  prd_cache_destroy(cp);
}

/* ---- destroy with objects still deferred, and bad input ----------------------------------- */
static void destroy_child(void *arg)
{
  (void)arg;
  prd_cache_t *cp = prd_cache_create("dd", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_VERIFY);
  void *p = prd_cache_alloc(cp, 0);
  prd_option_set("abort_on_error", "0");
  /* inside a read-side section, so that the first deferral's grace period cannot end (and
   * its buffer be merged back free) before the second: a preemption between the two calls
   * would otherwise turn "deferred twice" into "it is already free" */
  prd_rcu_read_lock();
  prd_cache_free_deferred(cp, p);
  prd_cache_free_deferred(cp, p);   /* twice: reported at the call */
  prd_cache_free_deferred(NULL, p);
  prd_cache_free(NULL, p);   /* a bad free: reported, abort_on_error decides */
  prd_rcu_read_unlock();
  prd_rcu_barrier();
  /* a deferral of a freed buffer is named so, not a double free */
  void *q = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, q);
  prd_cache_free_deferred(cp, q);
  prd_cache_destroy(cp);
  exit(prd__error_count() >= 2 ? 0 : 1);
}

/* A buffer deferred twice where the latent slabs see it (small layout 64 B, large 3000 B):
 * the second copy while the first waits (the slab's bitmap or the bufctl's flag), after the
 * first was merged back to the freelist (free in its slab), and after the first's grace
 * period ended but before a merge is reported and ignored; so is a free of a buffer that
 * waits in its slab, and a deferral of a freed buffer with a state that has ended.  Each of the last three once recorded or linked a buffer twice: the
 * slab's counts went wrong and the next merge linked it again (a crash in the list code, or
 * a buffer handed out twice). */
static void double_defer_child(void *arg)
{
  size_t size = *(const size_t *)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create("dd2", size, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  enum { N = 64 };
  void *b[N], *c[2 * N];
  if (prd__slab_alloc_bulk(cp, b, N, 0) != N)
    exit(2);
  prd_gp_t s1 = prd_rcu_get_state();
  (void)prd__slab_defer_bulk(cp, b, N, s1);
  (void)prd__slab_defer_bulk(cp, b, 1, s1);   /* while the first waits */
  long e1 = prd__error_count();
  prd_rcu_wait_state(s1);
  if (prd__slab_lat_merge_all(cp) != N)
    exit(3);
  prd_gp_t s2 = prd_rcu_get_state();
  (void)prd__slab_defer_bulk(cp, b, N, s2);   /* after the first was merged: free already */
  long e2 = prd__error_count();
  prd_rcu_wait_state(s2);
  (void)prd__slab_lat_merge_all(cp);
  if (prd__cache_check(cp) != 0)
    exit(4);
  size_t got = prd__slab_alloc_bulk(cp, c, 2 * N, 0);
  for (size_t i = 0; i < got; i++)
    for (size_t j = 0; j < i; j++)
      if (c[i] == c[j])
        exit(5);   /* handed out twice */
  /* deferred again after the first copy's grace period ended and before anything merged it:
   * the second deferral's new state merges the first copy inside the latent slab, and the
   * second copy must still be seen (it was once recorded beside the merged one); and a free
   * of a buffer that waits in its slab (once linked, then linked again by its merge) */
  void *d = c[0], *f = c[1];
  prd_gp_t s3 = prd_rcu_get_state();
  (void)prd__slab_defer_bulk(cp, &d, 1, s3);
  prd_rcu_wait_state(s3);
  (void)prd__slab_defer_bulk(cp, &d, 1, prd_rcu_get_state());
  long e3 = prd__error_count();
  prd_gp_t s4 = prd_rcu_get_state();
  (void)prd__slab_defer_bulk(cp, &f, 1, s4);
  prd__slab_free_bulk(cp, &f, 1);
  long e4 = prd__error_count();
  prd__slab_free_bulk(cp, c + 2, got - 2);
  prd_rcu_wait_state(s4);
  (void)prd__slab_lat_merge_all(cp);
  if (prd__cache_check(cp) != 0)
    exit(6);
  got = prd__slab_alloc_bulk(cp, c, 2 * N, 0);
  for (size_t i = 0; i < got; i++)
    for (size_t j = 0; j < i; j++)
      if (c[i] == c[j])
        exit(8);
  prd__slab_free_bulk(cp, c, got);
  /* a freed buffer deferred with a state that has ended: given back at once, and reported
   * as the deferral it is, not as a double free */
  (void)prd__slab_defer_bulk(cp, c, 1, s1);
  long e5 = prd__error_count();
  if (prd__cache_check(cp) != 0)
    exit(9);
  bool counts = e1 == 1 && e2 == 1 + N && e3 == e2 + 1 && e4 == e3 + 1 && e5 == e4 + 1;
  if (!counts)
    fprintf(stderr, "# errors %ld %ld %ld %ld %ld\n", e1, e2, e3, e4, e5);
  exit(counts ? 0 : 7);
}

static void test_double_defer_slab(void)
{
  static const size_t sizes[] = { 64, 3000 };
  for (size_t i = 0; i < PRD_ARRAY_SIZE(sizes); i++) {
    char buf[1 << 16];
    int st = prd_test_child(double_defer_child, (void *)&sizes[i], buf, sizeof(buf));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fprintf(stderr, "# size %zu: status %d\n%s", sizes[i], st, buf);
    CHECK_STR_CONTAINS(buf, "deferred twice (it is deferred already)");
    CHECK_STR_CONTAINS(buf, "it is free already");
    CHECK_STR_CONTAINS(buf, "it is deferred and not back in its slab yet");
    CHECK(strstr(buf, "double free") == NULL);   /* every report names the deferral */
  }
}

/* A cache made with the option hardened, in a child that goes on after its reports. */
static prd_cache_t *hardened_cache(const char *name, size_t size)
{
  prd_option_set("abort_on_error", "0");
  prd_option_set("hardened", "1");
  return prd_cache_create(name, size, 0, NULL, NULL, NULL, NULL, NULL, PRD_CACHE_NODEBUG);
}

/* With the option hardened, deferred objects get the free mark when their grace period ends
 * and they merge (magazine.c section 15): a buffer deferred twice whose copies merge before
 * either is handed out again is reported and handed out once.  Both ways a merge happens:
 * the thread's own latent generation (the loaded magazine empty), and a tagged magazine the
 * depot holds (a generation the thread handed over when it was full). */
static void hardened_defer_child(void *arg)
{
  bool depot = arg != NULL;
  prd_cache_t *cp = hardened_cache("hd", 128);
  enum { N = 4000 };
  static void *b[N], *c[N + 8];
  size_t n = depot ? N : 8;
  for (size_t i = 0; i < n; i++)
    b[i] = prd_cache_alloc(cp, 0);
  prd_cache_free_deferred(cp, b[0]);
  prd_cache_free_deferred(cp, b[0]);   /* twice, in one generation */
  for (size_t i = 1; i < n; i++)
    prd_cache_free_deferred(cp, b[i]);
  wait_all();
  /* enough allocations to empty the loaded magazine, so that a miss merges the generation */
  size_t got = 0;
  for (; got < N; got++)
    c[got] = prd_cache_alloc(cp, 0);
  for (size_t i = 0; i < got; i++)
    for (size_t j = 0; j < i; j++)
      if (c[i] == c[j])
        exit(5);   /* handed out twice */
  printf("errors %llu\n", (unsigned long long)prd__error_count());
  exit(prd__error_count() == 1 ? 0 : 6);
}

/* prd__mark_merge itself: a copy found marked is dropped and reported, the others are marked
 * and packed to the front; nothing is touched in a cache made without the option. */
static void mark_merge_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *plain = prd_cache_create("mm0", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                        PRD_CACHE_NODEBUG);
  prd_option_set("hardened", "1");
  prd_cache_t *cp = prd_cache_create("mm1", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  void *a = prd_cache_alloc(cp, 0), *b = prd_cache_alloc(cp, 0), *c = prd_cache_alloc(plain, 0);
  void *objs[4] = { a, b, a, b };
  uint32_t n = prd__mark_merge(cp, objs, 4);
  void *one[1] = { c };
  uint32_t m = prd__mark_merge(plain, one, 1);
  exit(n == 2 && objs[0] == a && objs[1] == b && prd__mark_test(a, cp->cache_mark_off) &&
               prd__mark_test(b, cp->cache_mark_off) && m == 1 &&
               !prd__mark_test(c, plain->cache_mark_off) && prd__error_count() == 2
           ? 0
           : 1);
}

/* The third way a deferred buffer becomes free: prd_reap gives the safe generation's objects
 * back to the slab layer (magazine.c lat_chain_out).  They get the mark there too, so a free
 * after the deferral is reported at the call and the buffer is handed out once; and a
 * deferral made twice is reported when the reap merges it. */
static void hardened_reap_child(void *arg)
{
  bool twice = arg != NULL;
  prd_cache_t *cp = hardened_cache("hr", 64);
  char *p = prd_cache_alloc(cp, 0), *q = prd_cache_alloc(cp, 0);
  prd_cache_free_deferred(cp, p);
  if (twice)
    prd_cache_free_deferred(cp, p);
  wait_all();
  prd_reap();
  if (!twice)
    prd_cache_free(cp, p);   /* freed after its deferral: found by the mark */
  enum { N = 300 };
  int seen = 0;
  for (int i = 0; i < N; i++)
    seen += prd_cache_alloc(cp, 0) == p;
  printf("errors %llu seen %d\n", (unsigned long long)prd__error_count(), seen);
  (void)q;
  exit(seen == 1 && prd__error_count() == 1 ? 0 : 6);
}

static void test_hardened_double_defer(void)
{
  for (int twice = 0; twice < 2; twice++) {
    char buf[4096];
    int st = prd_test_child(hardened_reap_child, twice ? (void *)1 : NULL, buf, sizeof(buf));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fprintf(stderr, "# reap, twice %d: status %d\n%s", twice, st, buf);
    CHECK_STR_CONTAINS(buf, twice ? "deferred twice, or freed after its deferral"
                                  : "cache hr: double free of buffer");
  }
  char out[4096];
  int st0 = prd_test_child(mark_merge_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st0) && WEXITSTATUS(st0) == 0);
  CHECK_STR_CONTAINS(out, "cache mm1: deferred free of buffer");
  for (int depot = 0; depot < 2; depot++) {
    char buf[1 << 14];
    int st = prd_test_child(hardened_defer_child, depot ? (void *)1 : NULL, buf, sizeof(buf));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fprintf(stderr, "# depot %d: status %d\n%s", depot, st, buf);
    CHECK_STR_CONTAINS(buf, "deferred twice, or freed after its deferral");
  }
}

static void test_bad_input(void)
{
  char buf[4096];
  int st = prd_test_child(destroy_child, NULL, buf, sizeof(buf));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(buf, "cache dd: deferred free of buffer");
  CHECK_STR_CONTAINS(buf, "deferred twice (it is deferred already)");
  CHECK_STR_CONTAINS(buf, "prd_cache_free_deferred: NULL cache for buffer");
  CHECK_STR_CONTAINS(buf, "(it is already free)");
  CHECK(strstr(buf, "double free") == NULL);
  CHECK_STR_CONTAINS(buf, "(not deferred)");
  CHECK_STR_CONTAINS(buf, "prd_cache_free: NULL cache for buffer");
  CHECK_STR_CONTAINS(buf, "(not freed)");
  prd_cache_free_deferred(NULL, NULL);   /* NULL buffer: nothing */
}

/* The deferral's front with its checks folded into one flag test, the NULL buffer's test
 * moved behind the ownership check and the state read after the handshake's barrier: a
 * NULL buffer is still ignored silently by a plain cache (the page map never owns it: it is
 * tested on the refusal's path) and by a cache without the free mark (a constructor's, on
 * its own inline branch, which skips only the mark); an interior pointer is still refused,
 * by both, naming the
 * deferral; and both caches' deferrals still reach the latent cache and come back only
 * after their grace period. */
static int ctor_zero(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  memset(buf, 0, 64);
  return 0;
}

static void front_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *plain = prd_cache_create("dfplain", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                        PRD_CACHE_NODEBUG);
  prd_cache_t *ctor = prd_cache_create("dfctor", 64, 0, ctor_zero, NULL, NULL, NULL, NULL,
                                       PRD_CACHE_NODEBUG);
  uint64_t e0 = prd__error_count();
  prd_cache_free_deferred(plain, NULL);
  prd_cache_free_deferred(ctor, NULL);
  prd_cache_free_deferred(NULL, NULL);
  if (prd__error_count() != e0)
    exit(2);
  prd_cache_t *cps[2] = { plain, ctor };
  for (int c = 0; c < 2; c++) {
    char *p = prd_cache_alloc(cps[c], 0);
    prd_cache_free_deferred(cps[c], p + 8);   /* refused, not deferred */
    prd_gp_t s = prd_rcu_get_state();
    for (int i = 0; i < 3; i++) {   /* the slow path's first deferral, then hits */
      prd_cache_free_deferred(cps[c], p);
      p = prd_cache_alloc(cps[c], 0);
      if (p == NULL)
        exit(3);
    }
    prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
    if (prd_cache_stats(cps[c], &st) != 0 || st.deferred_frees != 3)
      exit(4);
    prd_cache_free(cps[c], p);
    prd_rcu_wait_state(s);
  }
  if (prd__error_count() != e0 + 2)
    exit(5);
  prd_cache_destroy(plain);
  prd_cache_destroy(ctor);
  exit(0);
}

static void test_front_checks(void)
{
  char buf[4096];
  int st = prd_test_child(front_child, NULL, buf, sizeof(buf));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(buf, "cache dfplain: deferred free of buffer");
  CHECK_STR_CONTAINS(buf, "cache dfctor: deferred free of buffer");
}

/* The allocation counts stay exact across the depot rule's wait (magazine.c section 13): a
 * miss whose first pass counted its depot visit and asked for the wait took its round in a
 * second pass, which counted it as a hit too (mag_allocs ran ahead of the allocations). */
static void test_counts_across_depot_wait(void)
{
  prd_cache_t *cp = prd_cache_create("dcount", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  enum { N = 2000 };
  static void *p[N];
  prd_cache_stats_t s0 = PRD_CACHE_STATS_INIT, s1 = PRD_CACHE_STATS_INIT;
  prd_cache_stats(cp, &s0);
  uint64_t made = 0;
  for (int k = 0; k < 400; k++) {
    for (int i = 0; i < N; i++) {
      p[i] = prd_cache_alloc(cp, PRD_SLEEP);
      made++;
    }
    for (int i = 0; i < N; i++)
      prd_cache_free_deferred(cp, p[i]);
    prd_cache_stats(cp, &s1);
    if (k >= 50 && s1.depot_gp_waits > 0)
      break;
  }
  prd_cache_stats(cp, &s1);
  if (s1.depot_gp_waits == 0)
    fprintf(stderr, "  (no depot wait in this run: the count is checked without one)\n");
  CHECK_EQ(s1.mag_allocs - s0.mag_allocs, made);
  prd_rcu_barrier();
  prd_cache_destroy(cp);
}

/* A destroy inside a read-side section, of a cache with deferred frees, is refused and
 * reported, the cache left as it is; after the section the cache works and its destroy
 * waits for the deferrals as always.  Guards the defect: the destroy went on, counted the
 * deferred buffers as live and freed their slabs while readers could still read them, and a
 * PRD_CACHE_OBLIVIOUS cache was freed with callbacks queued that named it (with
 * abort_on_error=0, memory corrupted after the report).  arg: the cache's flags. */
static void destroy_in_section_child(void *arg)
{
  int flags = (int)(intptr_t)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create("def20", 64, 0, NULL, NULL, NULL, NULL, NULL, flags);
  void *q[20];
  for (int i = 0; i < 20; i++) {
    q[i] = prd_cache_alloc(cp, 0);
    memset(q[i], 0x5a, 64);
  }
  prd_rcu_read_lock();   /* first: no grace period that would free a deferral ends now */
  for (int i = 0; i < 20; i++)
    prd_cache_free_deferred(cp, q[i]);
  prd_cache_destroy(cp);
  bool intact = true;   /* what a reader of the section may still read */
  for (int i = 0; i < 20; i++)
    for (int b = 0; b < 64; b++)
      intact &= ((unsigned char *)q[i])[b] == 0x5a;
  prd_rcu_read_unlock();
  void *p = prd_cache_alloc(cp, 0);   /* the cache is still there */
  prd_cache_free(cp, p);
  printf("intact=%d usable=%d\n", intact, p != NULL);
  fflush(stdout);
  prd_cache_destroy(cp);
  printf("destroyed after the section\n");
  fflush(stdout);
  _exit(0);
}

static void test_destroy_in_section(void)
{
#ifdef PRD_TSAN
  return;   /* the child starts library threads: TSan forbids threads after a fork */
#endif
  static const int flags[] = { PRD_CACHE_NODEBUG | PRD_CACHE_NOMAGAZINE, PRD_CACHE_AUDIT,
                               0, PRD_CACHE_OBLIVIOUS };
  for (size_t f = 0; f < PRD_ARRAY_SIZE(flags); f++) {
    static char out[8192];
    int st = prd_test_child(destroy_in_section_child, (void *)(intptr_t)flags[f], out,
                            sizeof(out));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_STR_CONTAINS(out, "prd_cache_destroy(def20): called inside an RCU read-side "
                            "section");
    CHECK_STR_CONTAINS(out, "(ignored: the cache is left as it is)");
    CHECK_STR_CONTAINS(out, "intact=1 usable=1");
    CHECK_STR_CONTAINS(out, "destroyed after the section");
    CHECK(strstr(out, "still allocated") == NULL);
  }
}

/* A destroy from an RCU callback, of a cache whose deferred frees take the call_rcu path
 * (PRD_CACHE_OBLIVIOUS), is refused and reported: the callbacks queued after this one cannot
 * be waited for there.  Guards the defect: the barrier refused itself (its report named
 * neither the destroy nor the cache), the destroy went on, and the queued callbacks then
 * freed into the destroyed cache (a crash with abort_on_error=0).  A cache on the latent
 * path is destroyed from a callback as anywhere. */
static prd_cache_t *cb_cache;
static _Atomic int cb_destroyed;

static void destroy_cb(struct prd_rcu_head *h)
{
  (void)h;
  prd_cache_destroy(cb_cache);
  atomic_store(&cb_destroyed, 1);
}

static void destroy_in_callback_child(void *arg)
{
  int flags = (int)(intptr_t)arg;
  prd_option_set("abort_on_error", "0");
  cb_cache = prd_cache_create("defcb", 64, 0, NULL, NULL, NULL, NULL, NULL, flags);
  enum { N = 40 };
  void *q[N];
  for (int i = 0; i < N; i++)
    q[i] = prd_cache_alloc(cb_cache, 0);
  static struct prd_rcu_head h;
  for (int i = 0; i < N / 2; i++)
    prd_cache_free_deferred(cb_cache, q[i]);
  prd_call_rcu(&h, destroy_cb);
  for (int i = N / 2; i < N; i++)   /* queued after the callback that destroys */
    prd_cache_free_deferred(cb_cache, q[i]);
  prd_rcu_barrier();
  printf("destroyed in the callback=%d\n", atomic_load(&cb_destroyed));
  if (flags & PRD_CACHE_OBLIVIOUS) {
    void *p = prd_cache_alloc(cb_cache, 0);   /* still there: refused */
    prd_cache_free(cb_cache, p);
    prd_cache_destroy(cb_cache);
    printf("destroyed after the barrier\n");
  }
  fflush(stdout);
  _exit(0);
}

static void test_destroy_in_callback(void)
{
#ifdef PRD_TSAN
  return;   /* the child starts library threads: TSan forbids threads after a fork */
#endif
  static const int flags[] = { PRD_CACHE_OBLIVIOUS, 0 };
  for (size_t f = 0; f < PRD_ARRAY_SIZE(flags); f++) {
    static char out[8192];
    int st = prd_test_child(destroy_in_callback_child, (void *)(intptr_t)flags[f], out,
                            sizeof(out));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_STR_CONTAINS(out, "destroyed in the callback=1");
    CHECK(strstr(out, "still allocated") == NULL);
    if (flags[f] & PRD_CACHE_OBLIVIOUS) {
      CHECK_STR_CONTAINS(out, "prd_cache_destroy(defcb): called from an RCU callback");
      CHECK_STR_CONTAINS(out, "destroyed after the barrier");
    } else {
      CHECK(strstr(out, "prd_cache_destroy(defcb)") == NULL);
    }
  }
}

/* Every deferred object that comes back after its grace period counts in latent_merges, those
 * whose grace period had ended by the time they reached the slab layer too (a drain of a
 * thread's safe generations with the depot's latent list off, and the deferrals of a cache
 * without magazines). */
static void test_merges_count_every_deferral(void)
{
  long old_depot = opt_push("defer_depot_kb", "0");
  prd_cache_t *caches[2] = {
    prd_cache_create("mergecnt", 64, 0, NULL, NULL, NULL, NULL, NULL, PRD_CACHE_NODEBUG),
    prd_cache_create("mergecnt_nomag", 64, 0, NULL, NULL, NULL, NULL, NULL,
                     PRD_CACHE_NODEBUG | PRD_CACHE_NOMAGAZINE),
  };
  for (int c = 0; c < 2; c++) {
    prd_cache_t *cp = caches[c];
    void *b[100];
    for (int round = 0; round < 3; round++) {
      for (int i = 0; i < 100; i++)
        CHECK((b[i] = prd_cache_alloc(cp, 0)) != NULL);
      for (int i = 0; i < 100; i++)
        prd_cache_free_deferred(cp, b[i]);
      wait_all();
      prd_thread_flush();   /* the safe generations leave through the slab layer */
    }
    (void)prd__slab_lat_merge_all(cp);
    prd_cache_stats_t st = stats_of(cp);
    CHECK_EQ(st.deferred_frees, 300);
    CHECK_EQ(st.latent_merges, st.deferred_frees);
    check_counts(cp, 0);
    prd_cache_destroy(cp);
  }
  opt_pop("defer_depot_kb", old_depot);
}

/* ---- open generations (defer.c section 3): deferrals while readers run sections ------------ */
static atomic_int og_stop, og_hold, og_held;

/* A reader that runs sections back to back; while og_hold is set it stays inside one. */
static void *og_reader(void *arg)
{
  (void)arg;
  prd_rcu_register_thread();
  while (!atomic_load(&og_stop)) {
    prd_rcu_read_lock();
    if (atomic_load(&og_hold)) {
      atomic_store(&og_held, 1);
      while (atomic_load(&og_hold))
        sched_yield();
      atomic_store(&og_held, 0);
    }
    prd_rcu_read_unlock();
  }
  prd_rcu_unregister_thread();
  return NULL;
}

/* og_reader running in *th: the mode starts when a grace period sees a reader inside a
 * section (x86-64 with membarrier, the built-in source; elsewhere no generation is ever
 * open). */
static void og_reader_start(pthread_t *th)
{
  atomic_store(&og_stop, 0);
  CHECK(pthread_create(th, NULL, og_reader, NULL) == 0);
  for (int i = 0; i < 2000 && !prd__rcu_retire_fenced(); i++)
    prd_synchronize_rcu();
}

/* A 64-byte cache whose CPU cache and latent magazines exist, and og_reader running. */
static prd_cache_t *og_start(const char *name, pthread_t *th)
{
  prd_cache_t *cp = prd_cache_create(name, 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  void *warm = prd_cache_alloc(cp, 0);
  prd_cache_free_deferred(cp, warm);
  wait_all();
  og_reader_start(th);
  return cp;
}

/* While the retirers fence, the hit path reads no state and leaves the generation open; the
 * state it is tagged with when it closes is read then, after every deferral in it.  Checked
 * with the grace periods: the state read before the deferrals ends while the reader runs
 * sections, then the reader holds one section from before a state read after the last
 * deferral; the thread's flush closes the open generation, and none of its objects may come
 * back while that section is held (a tag read before or at the generation's first deferral
 * would have ended already).  The generations that closed during the loop (the magazine
 * full) were tagged then, after their own deferrals: theirs may come back. */
static void test_open_generation(void)
{
  pthread_t th;
  prd_cache_t *cp = og_start("opengen", &th);
  enum { N = 40 };
  void *b[N];
  for (int i = 0; i < N; i++)
    CHECK((b[i] = prd_cache_alloc(cp, 0)) != NULL);
  prd_gp_t s_first = prd_rcu_get_state();
  for (int i = 0; i < N; i++)
    prd_cache_free_deferred(cp, b[i]);
  prd_gp_t s_last = prd_rcu_get_state();
  prd_cpu_cache_t *cc = &prd__mag_tls.mt_cc[cp->cache_magid];
  /* the newest deferrals, in the open generation (the flag may have dropped meanwhile: then
   * the generation was tagged at the next deferral, or none is open) */
  int n_open = cc->cc_lat_gp[1] == UINT64_MAX ? (int)cc->cc_lat_n[1] : 0;   /* PRD_LAT_OPEN */
  if (prd__rcu_retire_fenced() && prd__mag_membarrier)
    CHECK(n_open > 0);
  prd_rcu_wait_state(s_first);
  atomic_store(&og_hold, 1);
  while (!atomic_load(&og_held))
    sched_yield();
  prd_gp_t s_held = prd_rcu_get_state();   /* cannot end while the section is held */
  CHECK(s_held >= s_last);
  prd_thread_flush();   /* the open generation closes and leaves the CPU cache */
  void *x[400];
  for (int i = 0; i < 400; i++) {
    CHECK((x[i] = prd_cache_alloc(cp, 0)) != NULL);
    for (int k = N - n_open; k < N; k++)
      if (x[i] == b[k])
        CHECK(prd_rcu_poll_state(s_held));   /* never while the section is held */
  }
  CHECK(!prd_rcu_poll_state(s_held));
  atomic_store(&og_hold, 0);
  atomic_store(&og_stop, 1);
  pthread_join(th, NULL);
  for (int i = 0; i < 400; i++)
    prd_cache_free(cp, x[i]);
  wait_all();
  check_counts(cp, 0);
  prd_cache_destroy(cp);
}

/* The reader stopped, every grace period over, then OG_N allocations into x: none of the
 * three buffers sent (deferred, or freed and deferred) may come out twice. */
enum { OG_N = 300 };

static void *og_cache_alloc(prd_cache_t *cp)
{
  return prd_cache_alloc(cp, 0);
}

static void *og_malloc64(prd_cache_t *cp)
{
  (void)cp;
  return prd_malloc(64);
}

static void og_handouts(pthread_t th, void *(*alloc)(prd_cache_t *), prd_cache_t *cp, void **x,
                        void *const sent[3])
{
  atomic_store(&og_stop, 1);
  pthread_join(th, NULL);
  wait_all();
  int seen[3] = { 0, 0, 0 };
  for (int i = 0; i < OG_N; i++) {
    CHECK((x[i] = alloc(cp)) != NULL);
    for (int k = 0; k < 3; k++)
      seen[k] += x[i] == sent[k];
  }
  CHECK(seen[0] <= 1 && seen[1] <= 1 && seen[2] <= 1);
}

/* A freed buffer deferred into an open generation: the hit path does not test its mark; the
 * generation's close does (defer.c cc_open_check), reports it as a deferral of a freed
 * buffer and drops it, so that it is handed out once, not twice.  A buffer deferred
 * correctly beside it comes back as usual.  Without the mode (no membarrier, TSan) the test
 * is the call's, and the report comes at once; either way exactly one. */
static void test_open_generation_freed(void)
{
  long abort_old = opt_push("abort_on_error", "0");
  pthread_t th;
  prd_cache_t *cp = og_start("openfreed", &th);
  void *a = prd_cache_alloc(cp, 0), *p = prd_cache_alloc(cp, 0), *b = prd_cache_alloc(cp, 0);
  prd_cache_free_deferred(cp, a);   /* the generation opens (or is tagged) */
  prd_cache_free(cp, p);
  uint64_t e = prd__error_count();
  prd_cache_free_deferred(cp, p);   /* a freed buffer */
  prd_cache_free_deferred(cp, b);
  prd_cpu_cache_t *cc = &prd__mag_tls.mt_cc[cp->cache_magid];
  bool open = cc->cc_lat_gp[1] == UINT64_MAX;   /* PRD_LAT_OPEN */
  if (open)
    CHECK_EQ(prd__error_count(), e);       /* not at the call */
  prd_thread_flush();                      /* the generation closes: tested */
  CHECK_EQ(prd__error_count(), e + 1);
  void *x[OG_N], *sent[3] = { a, p, b };
  og_handouts(th, og_cache_alloc, cp, x, sent);
  CHECK_EQ(prd__error_count(), e + 1);
  for (int i = 0; i < OG_N; i++)
    prd_cache_free(cp, x[i]);
  wait_all();
  check_counts(cp, 0);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
  opt_pop("abort_on_error", abort_old);
}

/* The same through the malloc family: prd_free_deferred takes the deferral's hit path ahead of
 * its re-entry mark (malloc.c), into the size class's open generation; a freed block it is
 * given is reported once, at the call or at the close, and handed out once. */
static void test_open_generation_freed_malloc(void)
{
  long abort_old = opt_push("abort_on_error", "0");
  pthread_t th;
  og_reader_start(&th);
  void *w = prd_malloc(64);
  prd_free_deferred(w);   /* the class's latent generation exists */
  void *a = prd_malloc(64), *p = prd_malloc(64), *b = prd_malloc(64);
  prd_free_deferred(a);
  prd_free(p);
  uint64_t e = prd__error_count();
  prd_free_deferred(p);   /* a freed block */
  prd_free_deferred(b);
  prd_thread_flush();
  CHECK_EQ(prd__error_count(), e + 1);
  void *x[OG_N], *sent[3] = { a, p, b };
  og_handouts(th, og_malloc64, NULL, x, sent);
  CHECK_EQ(prd__error_count(), e + 1);
  for (int i = 0; i < OG_N; i++)
    prd_free(x[i]);
  opt_pop("abort_on_error", abort_old);
}

/* A cache deferred into slowly while grace periods keep running (four deferrals each): its
 * open generations close at the adapted target (defer.c cc_open_adapt), not at a magazine's
 * worth, so what waits in the CPU cache stays within two targets; every object still comes
 * back only after its grace period (check_counts, and the reader's section below). */
static void test_open_generation_target(void)
{
  pthread_t th;
  prd_cache_t *cp = og_start("opentarget", &th);
  prd_cpu_cache_t *cc = &prd__mag_tls.mt_cc[cp->cache_magid];
  uint32_t most = 0;
  for (int i = 0; i < 4000; i++) {
    prd_cache_free_deferred(cp, prd_cache_alloc(cp, 0));
    if (i % 4 == 3)
      prd_synchronize_rcu();
    if (i >= 2000)
      most = PRD_MAX(most, cc->cc_lat_n[0] + cc->cc_lat_n[1]);
  }
  if (prd__rcu_retire_fenced() && prd__mag_membarrier) {
    uint32_t size = cc->cc_lat[1] != NULL ? cc->cc_lat[1]->mag_size : 0;
    CHECK(cc->cc_lat_target != 0 && cc->cc_lat_target < size);
    CHECK(most <= 2 * cc->cc_lat_target + 4);
    if (most > 2 * cc->cc_lat_target + 4)
      fprintf(stderr, "# target %u, magazine %u, most waiting %u\n", cc->cc_lat_target, size,
              most);
  }
  atomic_store(&og_stop, 1);
  pthread_join(th, NULL);
  wait_all();
  check_counts(cp, 0);
  prd_cache_destroy(cp);
}

int main(void)
{
  /* first, while this process has no thread: its child starts the RCU threads (TSan
   * refuses new threads in the child of a multi-threaded fork) */
  RUN(test_bad_input);
  RUN(test_decay_busy_depot);
  RUN(test_decay_latent_slabs);
  RUN(test_double_defer_slab);
  RUN(test_hardened_double_defer);
  RUN(test_front_checks);
  RUN(test_oblivious);
  RUN(test_oblivious_twice);
  RUN(test_oblivious_misuse);
  RUN(test_pairs_no_early_reuse);
  RUN(test_mixed);
  RUN(test_bound_latent_slab);
  RUN(test_bound_latent_cache);
  RUN(test_latent_slab_overflow_premove);
  RUN(test_latent_slabs_fill);
  RUN(test_destroy_in_section);
  RUN(test_destroy_in_callback);
  RUN(test_depot_latent);
  RUN(test_growth_reap_busy_depot);
  RUN(test_growth_reap_slices);
  RUN(test_refill_choice);
  RUN(test_partial_refill);
  RUN(test_preflush);
  RUN(test_oom_waits);
  RUN(test_thread_exit);
  RUN(test_thread_churn_magazines);
  RUN(test_refill_ramp);
  RUN(test_growth_bounded_by_threads);
  RUN(test_burst_slabs_given_back);
  RUN(test_reap_merges_latent_slabs);
  RUN(test_flood_bounded);
  RUN(test_hit_path_stays);
  RUN(test_flush_reap_keep_states);
  RUN(test_counts_across_depot_wait);
  RUN(test_open_generation);
  RUN(test_open_generation_freed);
  RUN(test_open_generation_freed_malloc);
  RUN(test_open_generation_target);
  RUN(test_merges_count_every_deferral);
  return prd_test_done();
}
