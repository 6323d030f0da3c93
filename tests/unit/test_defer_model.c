/* Randomized model test of Prudence (src/defer.c, magazine.c, latent.c): random
 * allocations, frees, deferred frees, thread flushes, reaps, grace-period waits and bursts run
 * by short-lived threads, on caches of both slab layouts (one with a constructor), against a
 * reference model: every buffer's state (with the user, deferred with the grace-period state
 * read before its deferral, or back with the allocator).  After EVERY step:
 *   - no buffer is handed out twice, and none before the grace period of its deferral ended
 *     (the state recorded before the call is at most the one the deferral took, so "ended"
 *     for the recorded state is necessary for the real one);
 *   - the counts add up across the layers: bufs_inuse (the slab layer's view) = the user's
 *     buffers + object caches + latent caches + latent slabs + the depot's latent magazines
 *     + threads' magazines + depot (the depot's latent list is switched off, small or at its
 *     default every 500 steps);
 *   - latent objects are never more than the deferred buffers not handed out again, and the
 *     deferral counter matches the model;
 *   - prd__cache_check: slab list membership, counts and latent bitmaps are consistent;
 *   - (builds without sanitizers) a deferred buffer's contents are intact while its grace
 *     period has not ended: the allocator records deferrals outside the buffer, since readers
 *     may still be reading it.  The contents are read first and the state polled after, so a
 *     grace period that ends during the read cannot make the check fail falsely.  Sanitizer
 *     builds skip it: the reads race (by design) with a merge after the grace period, which
 *     TSan reports and which ASan's poisoning of merged buffers would trap.
 * The second test runs the model against Prudence's broken mode in a child and expects it to
 * fail.  PRD_SEED=N repeats a run.
 *
 * prd-test-timeout: 300
 */
#include <pthread.h>
#include <sched.h>

#include "internal.h"
#include "prd_test.h"

#ifdef PRD_TSAN
#define STEPS 4000
#elif defined(PRD_ASAN)
#define STEPS 10000
#else
#define STEPS 40000
#endif
#define MAXLIVE 600
#define TBL (1u << 17)   /* distinct buffers seen: at most one new per step */
#define RING 256         /* recent deferrals whose contents are checked */
#define NCACHES 3

enum { B_NONE, B_LIVE, B_DEFERRED };

struct buf_ent {
  uintptr_t be_addr;
  uint8_t be_state;
  prd_gp_t be_gp;     /* B_DEFERRED: the state read just before the deferral */
  uint64_t be_tag;    /* the pattern the user wrote */
};

struct model {
  const char *m_name;
  size_t m_size;
  bool m_ctor;
  prd_cache_t *m_cp;
  uintptr_t m_live[MAXLIVE];
  size_t m_nlive;
  uint64_t m_pending;    /* deferred and not handed out again */
  uint64_t m_deferred;   /* prd_cache_free_deferred calls */
  uintptr_t m_ring[RING];
  size_t m_ringpos;
  struct buf_ent *m_tbl;
};

static uint64_t model_early, model_twice, model_smashed;
#define CTOR_MAGIC 0x5eedf00dcafe1234ull

static int model_ctor(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  ((uint64_t *)buf)[1] = CTOR_MAGIC;
  return 0;
}

static struct buf_ent *ent_of(struct model *m, uintptr_t a)
{
  size_t i = (size_t)((a >> 4) * 0x9e3779b97f4a7c15ull >> 47) & (TBL - 1);
  for (;;) {
    struct buf_ent *e = &m->m_tbl[i];
    if (e->be_addr == a)
      return e;
    if (e->be_addr == 0) {
      e->be_addr = a;
      e->be_state = B_NONE;
      return e;
    }
    i = (i + 1) & (TBL - 1);
  }
}

/* The tag a buffer carries: its first and last words (both inside the object). */
static void tag_write(struct model *m, void *p, uint64_t tag)
{
  uint64_t *w = p;
  w[0] = tag;
  w[m->m_size / 8 - 1] = ~tag;
}

#if !defined(PRD_TSAN) && !defined(PRD_ASAN)
static bool tag_intact(struct model *m, const void *p, uint64_t tag)
{
  const volatile uint64_t *w = p;
  return w[0] == tag && w[m->m_size / 8 - 1] == ~tag;
}
#endif

static void step_alloc(struct model *m, prd_rng_t *rng)
{
  if (m->m_nlive >= MAXLIVE)
    return;
  int flags = prd_rng_below(rng, 8) == 0 ? PRD_NOSLEEP : PRD_SLEEP;
  void *p = prd_cache_alloc(m->m_cp, flags);
  if (p == NULL) {
    CHECK(flags == PRD_NOSLEEP);
    return;
  }
  struct buf_ent *e = ent_of(m, (uintptr_t)p);
  if (e->be_state == B_LIVE)
    model_twice++;
  if (e->be_state == B_DEFERRED) {
    if (!prd_rcu_poll_state(e->be_gp))
      model_early++;
    m->m_pending--;
  }
  if (m->m_ctor && ((uint64_t *)p)[1] != CTOR_MAGIC)
    model_smashed++;   /* a constructed buffer comes back constructed */
  e->be_state = B_LIVE;
  e->be_tag = prd_rng_next(rng) | 1;
  tag_write(m, p, e->be_tag);
  m->m_live[m->m_nlive++] = (uintptr_t)p;
}

/* Takes a random buffer away from the user's set. */
static struct buf_ent *take_live(struct model *m, prd_rng_t *rng, void **pp)
{
  size_t k = prd_rng_below(rng, m->m_nlive);
  uintptr_t a = m->m_live[k];
  m->m_live[k] = m->m_live[--m->m_nlive];
  *pp = (void *)a;
  return ent_of(m, a);
}

static void step_free(struct model *m, prd_rng_t *rng)
{
  if (m->m_nlive == 0)
    return;
  void *p;
  struct buf_ent *e = take_live(m, rng, &p);
  e->be_state = B_NONE;
  prd_cache_free(m->m_cp, p);
}

static void step_defer(struct model *m, prd_rng_t *rng)
{
  if (m->m_nlive == 0)
    return;
  void *p;
  struct buf_ent *e = take_live(m, rng, &p);
  e->be_state = B_DEFERRED;
  e->be_gp = prd_rcu_get_state();   /* <= the state the deferral takes */
  m->m_pending++;
  m->m_deferred++;
  m->m_ring[m->m_ringpos++ % RING] = (uintptr_t)p;
  prd_cache_free_deferred(m->m_cp, p);
}

/* Alloc, free and deferral, the operations a short-lived thread also runs. */
static void step_user(struct model *m, prd_rng_t *rng)
{
  uint64_t op = prd_rng_below(rng, 100);
  if (op < 45)
    step_alloc(m, rng);
  else if (op < 65)
    step_free(m, rng);
  else
    step_defer(m, rng);
}

struct burst {
  struct model *bu_m;
  prd_rng_t bu_rng;
  int bu_steps;
};

/* A thread that runs a burst on the model and exits: its magazines, object caches and latent
 * caches are flushed at exit, latent objects keeping their states.  The main thread is blocked
 * in pthread_join meanwhile, which orders the model's accesses. */
static void *burst_main(void *arg)
{
  struct burst *bu = arg;
  for (int i = 0; i < bu->bu_steps; i++)
    step_user(bu->bu_m, &bu->bu_rng);
  return NULL;
}

static void step_burst(struct model *m, prd_rng_t *rng)
{
  struct burst bu = { m, { prd_rng_next(rng) | 1 }, 20 + (int)prd_rng_below(rng, 200) };
  pthread_t th;
  CHECK(pthread_create(&th, NULL, burst_main, &bu) == 0);
  pthread_join(th, NULL);
}

/* The invariants listed at the top, after every step. */
static void check_model(struct model *m)
{
  /* prd_cache_stats reads the layers one after the other, each under its own lock, while the
   * maintenance and pre-flush threads may move objects between them (depot -> slabs, latent
   * cache -> latent slabs): a reading can catch an object in flight.  A lost or duplicated
   * object shows in every reading; an object in flight only in some.  So the identity must
   * hold in one of up to 200 readings. */
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  uint64_t parked = 0;
  for (int attempt = 0; attempt < 200; attempt++) {
    st = (prd_cache_stats_t)PRD_CACHE_STATS_INIT;
    CHECK(prd_cache_stats(m->m_cp, &st) == 0);
    parked = st.oc_objs + st.latent_cache_objs + st.latent_slab_objs + st.latent_depot_objs +
             st.thread_cache_objs + st.depot_rounds;
    if (st.bufs_inuse == (uint64_t)m->m_nlive + parked &&
        st.latent_cache_objs + st.latent_slab_objs + st.latent_depot_objs <= m->m_pending)
      break;
    sched_yield();
  }
  CHECK_EQ(st.bufs_inuse, (uint64_t)m->m_nlive + parked);
  CHECK(st.latent_cache_objs + st.latent_slab_objs + st.latent_depot_objs <= m->m_pending);
  CHECK_EQ(st.deferred_frees, m->m_deferred);
  CHECK_EQ(prd__cache_check(m->m_cp), 0);
  CHECK_EQ(model_early, 0);
  CHECK_EQ(model_twice, 0);
  CHECK_EQ(model_smashed, 0);
#if !defined(PRD_TSAN) && !defined(PRD_ASAN)
  for (int i = 0; i < 4; i++) {
    uintptr_t a = m->m_ring[(m->m_ringpos - 1 - (size_t)i) % RING];
    if (a == 0)
      continue;
    struct buf_ent *e = ent_of(m, a);
    if (e->be_state != B_DEFERRED)
      continue;
    bool intact = tag_intact(m, (void *)a, e->be_tag);   /* read first, then poll */
    if (!prd_rcu_poll_state(e->be_gp))
      CHECK(intact);
  }
#endif
}

static void run_model(int steps, const char *seedname)
{
  static struct model models[NCACHES];
  models[0] = (struct model){ .m_name = "dm-64", .m_size = 64 };
  models[1] = (struct model){ .m_name = "dm-704", .m_size = 704, .m_ctor = true };
  models[2] = (struct model){ .m_name = "dm-3072", .m_size = 3072 };   /* the large layout */
  model_early = model_twice = model_smashed = 0;
  for (int c = 0; c < NCACHES; c++) {
    struct model *m = &models[c];
    m->m_cp = prd_cache_create(m->m_name, m->m_size, 0, m->m_ctor ? model_ctor : NULL, NULL,
                               NULL, NULL, NULL, PRD_CACHE_NODEBUG);
    CHECK(m->m_cp != NULL);
    m->m_tbl = calloc(TBL, sizeof(struct buf_ent));
    CHECK(m->m_tbl != NULL);
  }
  prd_rng_t rng = prd_rng_seeded(seedname);
  uint64_t ops[8] = { 0 };
  static const char *const depot_kb[] = { "0", "8", "8192" };
  for (int i = 0; i < steps; i++) {
    struct model *m = &models[prd_rng_below(&rng, NCACHES)];
    /* the depot's latent list (magazine.c section 13): off, a few magazines, the default */
    if (i % 500 == 0)
      prd_option_set("defer_depot_kb", depot_kb[prd_rng_below(&rng, 3)]);
    uint64_t op = prd_rng_below(&rng, 1000);
    if (op < 940) {
      step_user(m, &rng);
      ops[0]++;
    } else if (op < 955) {
      prd_thread_flush();
      ops[1]++;
    } else if (op < 965) {
      prd_cache_reap(m->m_cp);
      ops[2]++;
    } else if (op < 970) {
      prd_reap();
      ops[3]++;
    } else if (op < 985) {
      prd_rcu_wait_state(prd_rcu_get_state());
      ops[4]++;
    } else if (op < 990) {
      /* a burst of deferrals with no allocation: the latent cache overflows into the latent
       * slabs, with the slabs pre-moved */
      for (int k = 0; k < 64; k++)
        step_defer(m, &rng);
      ops[5]++;
    } else {
      step_burst(m, &rng);
      ops[6]++;
    }
    check_model(m);
    if (prd_t_failures > 0) {
      fprintf(stderr, "test_defer_model: first failure at step %d (cache %s)\n", i, m->m_name);
      break;
    }
  }
  fprintf(stderr, "steps: user %llu, flush %llu, cache_reap %llu, reap %llu, gp wait %llu, "
                  "defer burst %llu, thread burst %llu\n",
          (unsigned long long)ops[0], (unsigned long long)ops[1], (unsigned long long)ops[2],
          (unsigned long long)ops[3], (unsigned long long)ops[4], (unsigned long long)ops[5],
          (unsigned long long)ops[6]);
  /* the end: everything back, every grace period over, nothing lost */
  for (int c = 0; c < NCACHES; c++) {
    struct model *m = &models[c];
    while (m->m_nlive > 0)
      step_free(m, &rng);
    prd_rcu_wait_state(prd_rcu_get_state());
    prd_thread_flush();
    prd_cache_reap(m->m_cp);
    check_model(m);
    prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
    CHECK(prd_cache_stats(m->m_cp, &st) == 0);
    CHECK(st.latent_merges > 0);
    CHECK(st.oc_hits > 0);
    prd_cache_destroy(m->m_cp);
    free(m->m_tbl);
  }
}

static void test_model(void)
{
  run_model(STEPS, "test_defer_model");
}

/* The model can fail: with Prudence's broken mode (latent objects merged without checking
 * their grace-period state, the --broken mode of rcu_torture) it sees a buffer handed out
 * before its grace period ended, or a deferred buffer overwritten by a merge into its slab.
 * The broken run is this program started again with --broken (exec, not a bare fork: TSan
 * kills a forked child that starts threads, and the model needs the RCU driver's). */
static int broken_run(void)
{
  prd__defer_broken = true;
  run_model(STEPS, "test_defer_model broken");
  return prd_t_failures > 0 ? 1 : 0;
}

static void test_model_catches_broken(void)
{
  static char out[1 << 16];
  int status = prd_test_shell(out, sizeof(out), "/proc/%ld/exe --broken", (long)getpid());
  CHECK_EQ(status, 1);
  CHECK_STR_CONTAINS(out, "first failure at step");
  CHECK(strstr(out, "model_early") != NULL || strstr(out, ": intact") != NULL);
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--broken") == 0)
    return broken_run();
  RUN(test_model);
  RUN(test_model_catches_broken);
  return prd_test_done();
}
