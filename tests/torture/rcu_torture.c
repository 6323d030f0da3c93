/* rcu_torture: the RCU torture test, in the spirit of rcutorture / liburcu's urcutorture.
 *
 * N readers traverse an RCU-protected array of object pointers inside read-side sections and
 * check every object they meet twice, with a pause between: its magic (the free path poisons
 * it), its generation (unchanged while the reader holds it) and a payload derived from the
 * generation.  M writers replace objects and retire the old ones after a grace period; freed
 * objects go to a LIFO pool that the next allocation takes from at once and overwrites, so
 * any object reused before its grace period ended is seen.  Retire paths are a table:
 * `prudence` (issue #6) takes objects from a prd cache and retires them with
 * prd_cache_free_deferred, so the allocator itself decides when to reuse them (at once after
 * the grace period: an early reuse overwrites the generation and payload under a reader).
 * --broken frees without a grace period; with --retire prudence it makes Prudence merge
 * latent objects without checking their state.  Both must fail.  --broken-count keeps the
 * grace periods but makes the counted one (src/rcu.c §3) trust a reader whose count is one flip
 * behind (race.h): it must fail too (77 in a build without the race hooks, or where the
 * counted grace period is not used: no membarrier, or not x86-64).
 *
 *   rcu_torture [--seconds N] [--readers N] [--writers N]
 *               [--source builtin|urcu-memb|urcu-qsbr]
 *               [--retire call_rcu|synchronize|prudence] [--broken]
 *               [--broken-count]
 *
 * Prints the counts and violations=N; exits 1 on any violation, 77 when the source is not
 * built in (no liburcu, or a TSan build: liburcu is not TSan-clean), 2 on bad arguments.
 * Sanitizer builds cap the run at 3 seconds.
 *
 * prd-test-wants: urcu
 * prd-test-labels: torture
 * prd-test-timeout: 120
 * prd-test-run: rcu_torture_builtin --seconds 15 --source builtin --retire call_rcu
 * prd-test-run: rcu_torture_builtin_sync --seconds 5 --source builtin --retire synchronize
 * prd-test-run: rcu_torture_urcu_memb --seconds 15 --source urcu-memb
 * prd-test-run: rcu_torture_urcu_qsbr --seconds 15 --source urcu-qsbr
 * prd-test-run-fail: rcu_torture_broken --seconds 10 --source builtin --broken
 * prd-test-run: rcu_torture_prudence --seconds 10 --source builtin --retire prudence
 * prd-test-run: rcu_torture_prudence_memb --seconds 10 --source urcu-memb --retire prudence
 * prd-test-run: rcu_torture_prudence_qsbr --seconds 10 --source urcu-qsbr --retire prudence
 * prd-test-run-fail: rcu_torture_prudence_broken --seconds 10 --source builtin --retire prudence --broken
 * prd-test-run-fail: rcu_torture_broken_count --seconds 20 --source builtin --retire prudence --broken-count
 */
#ifdef PRD_HAVE_URCU
#define _LGPL_SOURCE /* liburcu's inline read side, as its users build it */
#include <urcu/urcu-memb.h>
#include <urcu/urcu-qsbr.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prudence.h"
#include "internal.h" /* prd__defer_broken, the Prudence --broken hook */
#include "race.h"     /* prd__rcu_broken_count, PRD_RACE_HOOKS */
#ifdef PRD_HAVE_URCU
#include "prudence_urcu.h"
#endif

#define T_MAGIC  0x7011c0deu
#define T_POISON 0xdeadbeefu
#define T_NSLOTS 64
#define T_PAYLOAD 6
#define T_PENDING_MAX 20000 /* retirements in flight before a writer waits (bounded memory) */

struct tobj {
  struct prd_rcu_head t_head;
  _Atomic uint32_t t_magic;
  _Atomic uint64_t t_gen;
  uint64_t t_payload[T_PAYLOAD];
  struct tobj *t_pool_next;
};

static struct tobj *_Atomic t_slots[T_NSLOTS];
static atomic_int t_stop;
static _Atomic uint64_t t_gen_next = 1;
static _Atomic long t_reads, t_checks, t_retired, t_freed, t_violations;

/* ---- the pool: freed objects are reused at once (LIFO) -------------------------------- */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tobj *pool_top;

static void pool_free(struct tobj *o)
{
  atomic_store_explicit(&o->t_magic, T_POISON, memory_order_relaxed);
  atomic_store_explicit(&o->t_gen, ~(uint64_t)0, memory_order_relaxed);
  pthread_mutex_lock(&pool_lock);
  o->t_pool_next = pool_top;
  pool_top = o;
  pthread_mutex_unlock(&pool_lock);
  atomic_fetch_add_explicit(&t_freed, 1, memory_order_relaxed);
}

static prd_cache_t *t_cache; /* --retire prudence: objects come from here */

static struct tobj *obj_alloc(void)
{
  struct tobj *o = NULL;
  if (t_cache != NULL) {
    o = prd_cache_alloc(t_cache, 0);
  } else {
    pthread_mutex_lock(&pool_lock);
    o = pool_top;
    if (o != NULL)
      pool_top = o->t_pool_next;
    pthread_mutex_unlock(&pool_lock);
  }
  if (o == NULL && (o = calloc(1, sizeof(*o))) == NULL) {
    perror("rcu_torture: calloc");
    exit(2);
  }
  uint64_t gen = atomic_fetch_add_explicit(&t_gen_next, 1, memory_order_relaxed);
  for (int k = 0; k < T_PAYLOAD; k++)
    o->t_payload[k] = gen * 31 + (uint64_t)k;
  atomic_store_explicit(&o->t_gen, gen, memory_order_relaxed);
  atomic_store_explicit(&o->t_magic, T_MAGIC, memory_order_relaxed);
  return o;
}

/* ---- sources: how readers enter and leave sections ------------------------------------ */
struct t_source {
  const char *ts_name;
  const struct prd_rcu_source *ts_src; /* NULL: the built-in one */
  void (*ts_lock)(void);
  void (*ts_unlock)(void);
  void (*ts_quiescent)(void);          /* between traversals (QSBR) */
};

static void builtin_lock(void) { prd_rcu_read_lock(); }
static void builtin_unlock(void) { prd_rcu_read_unlock(); }
#ifdef PRD_HAVE_URCU
static void memb_lock(void) { urcu_memb_read_lock(); }
static void memb_unlock(void) { urcu_memb_read_unlock(); }
static void qsbr_lock(void) { urcu_qsbr_read_lock(); }
static void qsbr_unlock(void) { urcu_qsbr_read_unlock(); }
static void qsbr_quiescent(void) { urcu_qsbr_quiescent_state(); }
#endif

static const struct t_source t_sources[] = {
  { "builtin", NULL, builtin_lock, builtin_unlock, NULL },
#ifdef PRD_HAVE_URCU
  { "urcu-memb", &prd_rcu_urcu_memb, memb_lock, memb_unlock, NULL },
  { "urcu-qsbr", &prd_rcu_urcu_qsbr, qsbr_lock, qsbr_unlock, qsbr_quiescent },
#endif
};
static const struct t_source *t_src;

/* ---- retire paths: a table; issue #6 adds `prudence` --------------------------------- */
static void cb_free(struct prd_rcu_head *h)
{
  pool_free((struct tobj *)h);
}

static void retire_call_rcu(struct tobj *o)
{
  prd_call_rcu(&o->t_head, cb_free);
}

static void retire_synchronize(struct tobj *o)
{
  prd_synchronize_rcu();
  pool_free(o);
}

static void retire_prudence(struct tobj *o)
{
  prd_cache_free_deferred(t_cache, o);
  atomic_fetch_add_explicit(&t_freed, 1, memory_order_relaxed); /* the allocator has it */
}

static void retire_broken(struct tobj *o)
{
  pool_free(o); /* no grace period: readers may still hold it */
}

struct t_retire {
  const char *tr_name;
  void (*tr_retire)(struct tobj *o);
  void (*tr_drain)(void); /* waits until every retired object is freed */
};

static const struct t_retire t_retires[] = {
  { "call_rcu", retire_call_rcu, prd_rcu_barrier },
  { "synchronize", retire_synchronize, NULL },
  { "prudence", retire_prudence, NULL },
};
static const struct t_retire t_retire_broken = { "broken", retire_broken, NULL };
static const struct t_retire *t_ret;

/* ---- readers and writers -------------------------------------------------------------- */
static void violation(const char *what, int slot, uint64_t gen)
{
  long n = atomic_fetch_add(&t_violations, 1);
  if (n < 5)
    fprintf(stderr, "rcu_torture: violation: %s (slot %d, generation %llu)\n", what, slot,
            (unsigned long long)gen);
}

static void check_obj(struct tobj *o, int slot)
{
  uint32_t m = atomic_load_explicit(&o->t_magic, memory_order_relaxed);
  uint64_t g = atomic_load_explicit(&o->t_gen, memory_order_relaxed);
  if (m != T_MAGIC) {
    violation(m == T_POISON ? "freed object seen" : "bad magic", slot, g);
    return;
  }
  for (int k = 0; k < T_PAYLOAD; k++)
    if (o->t_payload[k] != g * 31 + (uint64_t)k) {
      violation("payload overwritten", slot, g);
      return;
    }
}

static void *reader_main(void *arg)
{
  uint64_t rng = (uint64_t)(intptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  if (t_src->ts_src != NULL)
    prd_rcu_register_thread();
  while (!atomic_load_explicit(&t_stop, memory_order_relaxed)) {
    t_src->ts_lock();
    for (int i = 0; i < T_NSLOTS; i++) {
      struct tobj *o = atomic_load_explicit(&t_slots[i], memory_order_acquire);
      uint64_t g = atomic_load_explicit(&o->t_gen, memory_order_relaxed);
      check_obj(o, i);
      rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
      if ((rng & 15) == 0) /* hold it a while: a premature free lands in the window */
        for (int k = 0; k < 200; k++)
          atomic_signal_fence(memory_order_seq_cst);
      if ((rng & 1023) == 1)
        sched_yield(); /* preempted inside a read-side section */
      check_obj(o, i);
      if (atomic_load_explicit(&o->t_gen, memory_order_relaxed) != g)
        violation("generation changed under a reader", i, g);
    }
    t_src->ts_unlock();
    if (t_src->ts_quiescent)
      t_src->ts_quiescent();
    atomic_fetch_add_explicit(&t_reads, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&t_checks, T_NSLOTS, memory_order_relaxed);
  }
  if (t_src->ts_src != NULL)
    prd_rcu_unregister_thread();
  return NULL;
}

static void *writer_main(void *arg)
{
  uint64_t rng = (uint64_t)(intptr_t)arg * 0x2545f4914f6cdd1dull + 3;
  while (!atomic_load_explicit(&t_stop, memory_order_relaxed)) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    int slot = (int)(rng % T_NSLOTS);
    struct tobj *old = atomic_exchange_explicit(&t_slots[slot], obj_alloc(), memory_order_acq_rel);
    t_ret->tr_retire(old);
    long retired = atomic_fetch_add_explicit(&t_retired, 1, memory_order_relaxed) + 1;
    if (t_ret->tr_drain && retired - atomic_load(&t_freed) > T_PENDING_MAX)
      t_ret->tr_drain();
  }
  return NULL;
}

static void usage(void)
{
  fprintf(stderr, "usage: rcu_torture [--seconds N] [--readers N] [--writers N] "
                  "[--source builtin|urcu-memb|urcu-qsbr] "
                  "[--retire call_rcu|synchronize|prudence] [--broken] [--broken-count]\n");
  exit(2);
}

int main(int argc, char **argv)
{
  double seconds = 15;
  int nreaders = 4, nwriters = 2;
  bool broken = false, broken_count = false;
  const char *source = "builtin", *retire = "call_rcu";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--broken") == 0) {
      broken = true;
      continue;
    }
    if (strcmp(a, "--broken-count") == 0) {
      broken_count = true;
      continue;
    }
    if (v == NULL)
      usage();
    i++;
    if (strcmp(a, "--seconds") == 0)
      seconds = atof(v);
    else if (strcmp(a, "--readers") == 0)
      nreaders = atoi(v);
    else if (strcmp(a, "--writers") == 0)
      nwriters = atoi(v);
    else if (strcmp(a, "--source") == 0)
      source = v;
    else if (strcmp(a, "--retire") == 0)
      retire = v;
    else
      usage();
  }
  if (nreaders < 1 || nwriters < 1 || seconds <= 0)
    usage();
#if defined(PRD_TSAN) || defined(PRD_ASAN)
  if (seconds > 3)
    seconds = 3; /* sanitizer builds: keep the suite fast */
#endif
  for (size_t i = 0; i < sizeof(t_sources) / sizeof(t_sources[0]); i++)
    if (strcmp(t_sources[i].ts_name, source) == 0)
      t_src = &t_sources[i];
  if (t_src == NULL) {
    bool known = strcmp(source, "urcu-memb") == 0 || strcmp(source, "urcu-qsbr") == 0;
    fprintf(stderr, "rcu_torture: source %s %s\n", source,
            known ? "not built in (no liburcu): skipped" : "unknown");
    return known ? 77 : 2;
  }
  for (size_t i = 0; i < sizeof(t_retires) / sizeof(t_retires[0]); i++)
    if (strcmp(t_retires[i].tr_name, retire) == 0)
      t_ret = &t_retires[i];
  if (t_ret == NULL) {
    fprintf(stderr, "rcu_torture: unknown retire path %s\n", retire);
    return 2;
  }
  if (broken_count) {
#if defined(PRD_RACE_HOOKS) && defined(__x86_64__)
    prd_synchronize_rcu(); /* the RCU layer's init: membarrier registered, or reader fences */
    if (__atomic_load_n(&prd__rcu_reader_fences, __ATOMIC_RELAXED) == 0 &&
        strcmp(t_src->ts_name, "builtin") == 0) {
      prd__rcu_broken_count = true;
    } else
#endif
    {
      fprintf(stderr, "rcu_torture: --broken-count needs the built-in source's counted grace "
                      "period and a build with the race hooks: skipped\n");
      return 77;
    }
  }
  if (strcmp(t_ret->tr_name, "prudence") == 0) {
    t_cache = prd_cache_create("torture", sizeof(struct tobj), 0, NULL, NULL, NULL, NULL, NULL,
                               PRD_CACHE_NODEBUG);
    if (t_cache == NULL) {
      perror("rcu_torture: prd_cache_create");
      return 2;
    }
    prd__defer_broken = broken; /* Prudence's own broken mode: merges without the check */
  } else if (broken) {
    t_ret = &t_retire_broken;
  }
#ifdef PRD_TSAN
  if (t_src->ts_src != NULL) {
    /* liburcu (not built with TSan) publishes with volatile accesses that TSan reports as
     * races in its inline read side: its flavours are tortured in the other builds */
    fprintf(stderr, "rcu_torture: source %s not run under TSan (liburcu is not TSan-clean): "
                    "skipped\n", source);
    return 77;
  }
#endif
  if (t_src->ts_src != NULL && prd_rcu_set_source(t_src->ts_src) != 0) {
    perror("rcu_torture: prd_rcu_set_source");
    return 2;
  }

  for (int i = 0; i < T_NSLOTS; i++)
    atomic_store(&t_slots[i], obj_alloc());
  prd_gp_t gp0 = prd_rcu_get_state();
  pthread_t *th = calloc((size_t)(nreaders + nwriters), sizeof(*th));
  for (int i = 0; i < nreaders; i++)
    pthread_create(&th[i], NULL, reader_main, (void *)(intptr_t)i);
  for (int i = 0; i < nwriters; i++)
    pthread_create(&th[nreaders + i], NULL, writer_main, (void *)(intptr_t)i);
  /* run for the time asked; a violation ends the run early */
  struct timespec tick = { 0, 50 * 1000 * 1000 };
  for (double t = 0; t < seconds && atomic_load(&t_violations) == 0; t += 0.05)
    nanosleep(&tick, NULL);
  atomic_store(&t_stop, 1);
  for (int i = 0; i < nreaders + nwriters; i++)
    pthread_join(th[i], NULL);
  if (t_ret->tr_drain)
    t_ret->tr_drain();
  prd_gp_t gp1 = prd_rcu_get_state();
  free(th);
  printf("rcu_torture: source=%s retire=%s%s seconds=%g readers=%d writers=%d reads=%ld "
         "checks=%ld retirements=%ld grace_periods=%llu violations=%ld\n",
         t_src->ts_name, t_ret->tr_name, broken ? " (broken: no grace period)" : "", seconds,
         nreaders, nwriters, atomic_load(&t_reads), atomic_load(&t_checks),
         atomic_load(&t_retired), (unsigned long long)((gp1 - gp0) / 2),
         atomic_load(&t_violations));
  return atomic_load(&t_violations) == 0 ? 0 : 1;
}
