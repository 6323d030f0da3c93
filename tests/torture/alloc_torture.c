/* alloc_torture: the allocator torture, beside rcu_torture (docs/testing.md).
 *
 * Owners allocate, free and defer objects of several object caches and malloc size classes
 * (prd_cache_alloc/free/free_deferred, prd_malloc/free/free_deferred) while visitors take
 * the owners' CPU caches from under them: prd_reap, prd_cache_reap, the pre-flush job of the
 * maintenance thread (prd__maint_wake; defer.c section 6), the interval's idle steal
 * (prd__maint_tick), the destroy of caches of their own (a destroy visits every thread),
 * owner threads that exit and are replaced, and a visitor that forks, has the child allocate,
 * check and free a few objects of every source and _exit (--no-fork leaves it out; a child
 * that does not finish within 5 s is a violation; not in TSan builds, see a_fork).  Readers traverse a table of published
 * objects inside prd_rcu_read_lock sections.
 *
 * Every object carries an owner tag and a generation:
 *  - an allocation swaps its tag for the new owner's: the old tag of a live owner means the
 *    allocator handed the object out twice; a free or deferral that finds another owner's tag
 *    in an object it holds means the same from the other side;
 *  - an owner publishes some objects in the table and the thread that replaces one defers it:
 *    readers check that the generation and its check word of every object they reach do not
 *    change until they leave the section (the grace period after the deferral), so an object
 *    reused before its grace period is seen;
 *  - at the end, everything freed or deferred, each cache's statistics must balance (what the
 *    layers hold = what is in use: defer.c section 5), so a leak is seen;
 *  - a crash (SIGSEGV, SIGBUS) is reported as a violation; the run goes on in a child of the
 *    process that started it, so a death by any signal (a sanitizer's abort, the library's
 *    abort after it reported a bad free) is reported and counted as a violation too.
 * --race-delay N sets the option race_delay (src/race.c: Debug and TSan builds) so the
 * windows open wide.  --broken-handshake restores the owner's old order of the handshake
 * (CPU-cache loads before the steal test) and must make the run fail: the check that this
 * torture finds that defect.
 *
 *   alloc_torture [--seconds S] [--owners N] [--readers N] [--race-delay N] [--no-fork]
 *                 [--broken-handshake]
 *
 * Prints one summary line (seconds, operations, visitor runs per kind, violations); exits 1
 * on any violation, 77 when --broken-handshake is asked of a build without the race hooks or
 * of a TSan build (too slow there to hit the window reliably), 2 on bad arguments.
 * Sanitizer builds cap the run at 5 seconds (not a --broken-handshake run, which ends at its
 * first violation).
 *
 * prd-test-labels: torture
 * prd-test-timeout: 90
 * prd-test-run: alloc_torture_delay --seconds 8 --race-delay 64
 * prd-test-run: alloc_torture_nodelay --seconds 8
 * prd-test-run-fail: alloc_torture_broken_handshake --seconds 40 --race-delay 256 --broken-handshake
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prudence.h"
#include "internal.h" /* prd__maint_wake / prd__maint_tick, prd__malloc_class_cache */
#include "race.h"     /* prd__mag_broken_handshake, PRD_RACE_HOOKS */

#define A_LIVE     0x11fe000000000000ull /* | owner id: held by that owner */
#define A_FREE     0xf7ee0000f7ee0000ull /* freed by its owner */
#define A_RETIRED  0x7e71000000007e71ull /* deferred: readers may still hold it */
#define A_TAGMASK  0xffff000000000000ull
#define A_CHECK(g) ((g) * 0x9e3779b97f4a7c15ull + 0x5bd1e995u)
#define A_HELD     48   /* objects an owner holds at most */
#define A_SLOTS    64   /* the published table */

struct aobj {
  _Atomic uint64_t a_owner;
  _Atomic uint64_t a_gen;
  _Atomic uint64_t a_check;
};

/* ---- sources: object caches and malloc classes ------------------------------------------ */
struct asrc {
  const char *s_name;
  size_t s_size;
  prd_cache_t *s_cache;   /* NULL: prd_malloc of s_size */
  prd_cache_t *s_stats;   /* the cache whose statistics balance (a malloc class's own) */
  uint64_t s_user0;       /* in use before the run (the malloc classes may hold others') */
};
static struct asrc a_srcs[] = {
  { "cache32", 32, NULL, NULL, 0 },   { "cache64", 64, NULL, NULL, 0 },
  { "cache200", 200, NULL, NULL, 0 }, { "cache1k", 1024, NULL, NULL, 0 },
  { "malloc48", 48, NULL, NULL, 0 },  { "malloc256", 256, NULL, NULL, 0 },
  { "malloc2000", 2000, NULL, NULL, 0 },
};
#define A_NSRC (sizeof(a_srcs) / sizeof(a_srcs[0]))
#define A_NCACHES 4   /* the first four are object caches */

static void *src_alloc(const struct asrc *s)
{
  return s->s_cache != NULL ? prd_cache_alloc(s->s_cache, 0) : prd_malloc(s->s_size);
}
static void src_free(const struct asrc *s, void *p)
{
  if (s->s_cache != NULL)
    prd_cache_free(s->s_cache, p);
  else
    prd_free(p);
}
static void src_defer(const struct asrc *s, void *p)
{
  if (s->s_cache != NULL)
    prd_cache_free_deferred(s->s_cache, p);
  else
    prd_free_deferred(p);
}

/* ---- state and reporting --------------------------------------------------------------- */
static atomic_int a_stop;
static _Atomic uint64_t a_gen_next = 1, a_owner_next = 1;
static _Atomic long a_allocs, a_frees, a_defers, a_publishes, a_reads, a_violations;
enum { V_REAP, V_CACHE_REAP, V_PREFLUSH, V_IDLE, V_DESTROY, V_EXIT, V_FORK, V_NKINDS };
static const char *const v_names[V_NKINDS] = { "reap", "cache_reap", "preflush", "idle_steal",
                                               "destroy", "thread_exit", "fork" };
static _Atomic long a_visits[V_NKINDS];
static struct aobj *_Atomic a_slots[A_SLOTS];   /* slot i holds objects of source i % A_NSRC */

/* A live owner's tag: A_LIVE and an owner id handed out so far.  A buffer's memory may hold
 * any word of a dead object: a slab made again on the same pages with another color, or a
 * slab of another cache, puts a buffer's first word where a dead object's generation, check
 * word or freelist word was, and one random word in 65,536 has the tag's top bits.  An id
 * below a_owner_next makes such a word look live once in 2^48 / ids. */
static bool tag_live(uint64_t tag)
{
  uint64_t id = tag & ~A_TAGMASK;
  return (tag & A_TAGMASK) == A_LIVE && id != 0 && id < atomic_load(&a_owner_next);
}

static void violation(const char *what, const void *p, uint64_t a, uint64_t b)
{
  long n = atomic_fetch_add(&a_violations, 1);
  if (n < 5)
    fprintf(stderr, "alloc_torture: violation: %s (object %p: %#llx / %#llx)\n", what, p,
            (unsigned long long)a, (unsigned long long)b);
}

#if !defined(PRD_TSAN) && !defined(PRD_ASAN) /* the sanitizers report crashes themselves */
static void crash_handler(int sig)
{
  char msg[160];
  int len = snprintf(msg, sizeof(msg),
                     "alloc_torture: violation: crash (signal %d) after %ld operations\n", sig,
                     atomic_load(&a_allocs) + atomic_load(&a_frees) + atomic_load(&a_defers));
  if (write(2, msg, (size_t)len) < 0)
    _exit(1);
  _exit(1);
}
#endif

static uint64_t rng_next(uint64_t *r)
{
  uint64_t x = *r;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *r = x;
}

/* A new object of source s for owner `me`: takes the tag, then a fresh generation. */
static struct aobj *obj_get(const struct asrc *s, uint64_t me)
{
  struct aobj *o = src_alloc(s);
  if (o == NULL) {
    violation("allocation failed", NULL, 0, 0);
    return NULL;
  }
  uint64_t old = atomic_exchange_explicit(&o->a_owner, A_LIVE | me, memory_order_relaxed);
  if (tag_live(old))
    violation("object handed out twice (it has a live owner)", o, old, A_LIVE | me);
  uint64_t g = atomic_fetch_add_explicit(&a_gen_next, 1, memory_order_relaxed);
  atomic_store_explicit(&o->a_gen, g, memory_order_relaxed);
  atomic_store_explicit(&o->a_check, A_CHECK(g), memory_order_relaxed);
  atomic_fetch_add_explicit(&a_allocs, 1, memory_order_relaxed);
  return o;
}

/* The owner `me` gives o up: its tag must still be its own (`me` 0: any live owner, for a
 * published object, which the thread that took it out of the table now holds). */
static void obj_put(const struct asrc *s, struct aobj *o, uint64_t me, bool defer)
{
  uint64_t tag = atomic_load_explicit(&o->a_owner, memory_order_relaxed);
  if (me != 0 ? tag != (A_LIVE | me) : !tag_live(tag))
    violation("object changed owner while held (handed out twice)", o, tag, A_LIVE | me);
  atomic_store_explicit(&o->a_owner, defer ? A_RETIRED : A_FREE, memory_order_relaxed);
  if (defer) {
    src_defer(s, o);
    atomic_fetch_add_explicit(&a_defers, 1, memory_order_relaxed);
  } else {
    src_free(s, o);
    atomic_fetch_add_explicit(&a_frees, 1, memory_order_relaxed);
  }
}

/* ---- owners ------------------------------------------------------------------------------ */
struct held { struct aobj *h_obj; unsigned h_src; };

static void *owner_main(void *arg)
{
  uint64_t rng = (uint64_t)(uintptr_t)arg * 0x2545f4914f6cdd1dull + 7;
  uint64_t me = atomic_fetch_add(&a_owner_next, 1) & 0xffffffffu;
  struct held held[A_HELD];
  unsigned n = 0;
  /* each owner lives for a while and exits (its magazines go to the depot), then a new one
   * takes its place: thread exit is one of the visitors */
  uint64_t life = 20000 + rng_next(&rng) % 200000;
  unsigned s = 0;
  for (uint64_t op = 0; op < life && !atomic_load_explicit(&a_stop, memory_order_relaxed);
       op++) {
    uint64_t r = rng_next(&rng);
    unsigned kind = (unsigned)(r % 100);
    if ((op & 63) == 0) /* bursts on one source, as programs do: its CPU cache stays hot */
      s = (unsigned)((r >> 40) % A_NSRC);
    if (n < A_HELD && (kind < 45 || n == 0)) {
      struct aobj *o = obj_get(&a_srcs[s], me);
      if (o != NULL)
        held[n++] = (struct held){ o, s };
      continue;
    }
    unsigned i = (unsigned)((r >> 16) % n);
    struct held h = held[i];
    held[i] = held[--n];
    if (kind < 75) {
      obj_put(&a_srcs[h.h_src], h.h_obj, me, false);
    } else if (kind < 92) {
      obj_put(&a_srcs[h.h_src], h.h_obj, me, true);
    } else {
      /* publish: a slot of the object's source; the object it replaces is retired here */
      unsigned slot = h.h_src + A_NSRC * (unsigned)((r >> 24) % (A_SLOTS / A_NSRC));
      struct aobj *old = atomic_exchange_explicit(&a_slots[slot], h.h_obj, memory_order_acq_rel);
      atomic_fetch_add_explicit(&a_publishes, 1, memory_order_relaxed);
      if (old != NULL)
        obj_put(&a_srcs[h.h_src], old, 0, true);
    }
  }
  while (n > 0) {
    struct held h = held[--n];
    obj_put(&a_srcs[h.h_src], h.h_obj, me, (n & 1) != 0);
  }
  return NULL;
}

static void nap(uint64_t *rng, long max_us)
{
  struct timespec ts = { 0, (long)(rng_next(rng) % (uint64_t)max_us) * 1000 };
  nanosleep(&ts, NULL);
}

/* ---- readers ----------------------------------------------------------------------------- */
static void *reader_main(void *arg)
{
  uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  while (!atomic_load_explicit(&a_stop, memory_order_relaxed)) {
    prd_rcu_read_lock();
    for (int i = 0; i < A_SLOTS; i++) {
      struct aobj *o = atomic_load_explicit(&a_slots[i], memory_order_acquire);
      if (o == NULL)
        continue;
      uint64_t g = atomic_load_explicit(&o->a_gen, memory_order_relaxed);
      uint64_t c = atomic_load_explicit(&o->a_check, memory_order_relaxed);
      if (c != A_CHECK(g))
        violation("published object overwritten (reused before its grace period)", o, g, c);
      uint64_t r = rng_next(&rng);
      if ((r & 15) == 0) /* hold it a while: an early reuse lands in the window */
        for (int k = 0; k < 300; k++)
          atomic_signal_fence(memory_order_seq_cst);
      if ((r & 1023) == 1)
        sched_yield(); /* preempted inside the read-side section */
      if (atomic_load_explicit(&o->a_gen, memory_order_relaxed) != g ||
          atomic_load_explicit(&o->a_check, memory_order_relaxed) != c)
        violation("generation changed under a reader (reused before its grace period)", o, g,
                  atomic_load_explicit(&o->a_gen, memory_order_relaxed));
    }
    prd_rcu_read_unlock();
    atomic_fetch_add_explicit(&a_reads, 1, memory_order_relaxed);
    if ((rng_next(&rng) & 7) == 0)
      nap(&rng, 100); /* leave the CPUs to owners and visitors now and then */
  }
  return NULL;
}

/* ---- visitors ---------------------------------------------------------------------------- */

static void visit_destroy(uint64_t *rng)
{
  /* a cache of the visitor's own, used and destroyed: the destroy visits every thread's
   * CPU caches (tc_steal on each) while the owners run on theirs */
  prd_cache_t *cp = prd_cache_create("torture_scratch", 96, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_NODEBUG);
  if (cp == NULL) {
    violation("prd_cache_create failed", NULL, 0, 0);
    return;
  }
  void *objs[64];
  int n = (int)(rng_next(rng) % 64);
  for (int i = 0; i < n; i++)
    if ((objs[i] = prd_cache_alloc(cp, 0)) == NULL)
      violation("scratch allocation failed", NULL, 0, 0);
  for (int i = 0; i < n; i++)
    if (objs[i] != NULL) {
      if (i & 1)
        prd_cache_free_deferred(cp, objs[i]);
      else
        prd_cache_free(cp, objs[i]);
    }
  prd_cache_destroy(cp);
}

/* The child of a fork: a few objects of each source, checked and freed; exit code 0 if fine. */
static void fork_child(void)
{
  for (unsigned s = 0; s < A_NSRC; s++) {
    struct aobj *o[8];
    for (int i = 0; i < 8; i++) {
      o[i] = src_alloc(&a_srcs[s]);
      if (o[i] == NULL)
        _exit(3);
      atomic_store_explicit(&o[i]->a_gen, (uint64_t)i, memory_order_relaxed);
    }
    for (int i = 0; i < 8; i++)
      if (atomic_load_explicit(&o[i]->a_gen, memory_order_relaxed) != (uint64_t)i)
        _exit(4);
    for (int i = 0; i < 8; i++)
      src_free(&a_srcs[s], o[i]);
  }
  _exit(0);
}

static void visit_fork(void)
{
  pid_t pid = fork();
  if (pid < 0)
    return;
  if (pid == 0)
    fork_child();
  int status = 0;
  for (int i = 0; i < 500; i++) { /* 5 s */
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        violation("fork child failed", NULL, (uint64_t)status, 0);
      return;
    }
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    nanosleep(&ts, NULL);
  }
  violation("fork child hung", NULL, (uint64_t)pid, 0);
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
}

#ifdef PRD_TSAN
/* the fork prepare handler holds every cache's lock at once, more than TSan's deadlock
 * detector tracks (64): TSan builds leave the fork visitor out */
static bool a_fork = false;
#else
static bool a_fork = true;
#endif

static void *visitor_main(void *arg)
{
  int kind = (int)(intptr_t)arg;
  uint64_t rng = (uint64_t)(kind + 1) * 0x94d049bb133111ebull;
  while (!atomic_load_explicit(&a_stop, memory_order_relaxed)) {
    switch (kind) {
    case V_REAP:
      prd_reap(); /* back to back: the visitor that empties every thread's CPU caches */
      break;
    case V_CACHE_REAP:
      prd_cache_reap(a_srcs[rng_next(&rng) % A_NCACHES].s_cache);
      nap(&rng, 300);
      break;
    case V_PREFLUSH:
      prd__maint_wake();
      nap(&rng, 500);
      break;
    case V_IDLE:
      prd__maint_tick();
      nap(&rng, 2000);
      break;
    case V_DESTROY:
      visit_destroy(&rng);
      nap(&rng, 2000);
      break;
    case V_FORK:
      visit_fork();
      nap(&rng, 20000);
      break;
    }
    atomic_fetch_add_explicit(&a_visits[kind], 1, memory_order_relaxed);
  }
  return NULL;
}

/* ---- the end: the counts must balance ---------------------------------------------------- */
static bool user_objs(const struct asrc *s, uint64_t *user)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  if (prd_cache_stats(s->s_stats, &st) != 0)
    return false;
  *user = st.bufs_inuse - (st.oc_objs + st.latent_cache_objs + st.latent_slab_objs +
                           st.latent_depot_objs + st.thread_cache_objs + st.depot_rounds);
  return true;
}

static void check_balance(void)
{
  for (unsigned s = 0; s < A_NSRC; s++) {
    uint64_t user = 0;
    bool ok = false;
    /* the maintenance thread may be moving objects between layers while the statistics are
     * read: a few tries, a moment apart */
    for (int t = 0; t < 20 && !ok; t++) {
      ok = user_objs(&a_srcs[s], &user) && user == a_srcs[s].s_user0;
      if (!ok) {
        struct timespec ts = { 0, 50 * 1000 * 1000 };
        nanosleep(&ts, NULL);
      }
    }
    if (!ok) {
      fprintf(stderr, "alloc_torture: %s: %llu objects in use at the end, %llu before\n",
              a_srcs[s].s_name, (unsigned long long)user, (unsigned long long)a_srcs[s].s_user0);
      violation("the counts do not balance (a leak)", a_srcs[s].s_stats, user,
                a_srcs[s].s_user0);
    }
    if (prd__cache_check(a_srcs[s].s_stats) != 0)
      violation("cache invariants broken", a_srcs[s].s_stats, s, 0);
  }
}

static void usage(void)
{
  fprintf(stderr, "usage: alloc_torture [--seconds S] [--owners N] [--readers N] "
                  "[--race-delay N] [--no-fork] [--broken-handshake]\n");
  exit(2);
}

static int torture_main(int argc, char **argv)
{
  double seconds = 10;
  int nowners = 4, nreaders = 2;
  long delay = 0;
  bool broken = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--broken-handshake") == 0) {
      broken = true;
      continue;
    }
    if (strcmp(a, "--no-fork") == 0) {
      a_fork = false;
      continue;
    }
    if (i + 1 >= argc)
      usage();
    const char *v = argv[++i];
    if (strcmp(a, "--seconds") == 0)
      seconds = atof(v);
    else if (strcmp(a, "--owners") == 0)
      nowners = atoi(v);
    else if (strcmp(a, "--readers") == 0)
      nreaders = atoi(v);
    else if (strcmp(a, "--race-delay") == 0)
      delay = atol(v);
    else
      usage();
  }
  if (nowners < 1 || nreaders < 0 || seconds <= 0 || delay < 0 || delay > 1024)
    usage();
#if defined(PRD_TSAN) || defined(PRD_ASAN)
  if (seconds > 5 && !broken)
    seconds = 5; /* sanitizer builds: keep the suite fast (a broken run ends at its failure) */
#endif
#ifdef PRD_TSAN
  if (broken) {
    /* TSan runs the owners about a hundred times slower: a 15 s run made 100k operations
     * and, on a loaded machine, no violation; the Debug and ASan runs prove the check */
    fprintf(stderr, "alloc_torture: --broken-handshake is not run under TSan: skipped\n");
    return 77;
  }
#endif
#ifdef PRD_RACE_HOOKS
  prd__mag_broken_handshake = broken;
#else
  if (broken) {
    fprintf(stderr, "alloc_torture: --broken-handshake needs the race hooks (a Debug or TSan "
                    "build, or -DPRD_RACE_DELAY=ON): skipped\n");
    return 77;
  }
  if (delay != 0)
    fprintf(stderr, "alloc_torture: race_delay is compiled out of this build: no delays\n");
#endif
  char dv[32];
  snprintf(dv, sizeof(dv), "%ld", delay);
  if (prd_option_set("race_delay", dv) != 0) {
    perror("alloc_torture: prd_option_set race_delay");
    return 2;
  }
#if !defined(PRD_TSAN) && !defined(PRD_ASAN)
  signal(SIGSEGV, crash_handler);
  signal(SIGBUS, crash_handler);
#endif

  for (unsigned s = 0; s < A_NSRC; s++) {
    struct asrc *src = &a_srcs[s];
    if (s < A_NCACHES) {
      src->s_cache = prd_cache_create(src->s_name, src->s_size, 0, NULL, NULL, NULL, NULL, NULL,
                                      PRD_CACHE_NODEBUG);
      src->s_stats = src->s_cache;
    } else {
      prd_free(prd_malloc(src->s_size)); /* the class exists from here on */
      src->s_stats = prd__malloc_class_cache(src->s_size);
    }
    if (src->s_stats == NULL || !user_objs(src, &src->s_user0)) {
      fprintf(stderr, "alloc_torture: no cache for %s\n", src->s_name);
      return 2;
    }
  }

  pthread_t *readers = calloc((size_t)nreaders + 1, sizeof(pthread_t));
  pthread_t visitors[V_NKINDS];
  bool vrun[V_NKINDS] = { false };
  for (int i = 0; i < nreaders; i++)
    pthread_create(&readers[i], NULL, reader_main, (void *)(intptr_t)i);
  for (int k = 0; k < V_NKINDS; k++) {
    if (k == V_EXIT || (k == V_FORK && !a_fork))
      continue;
    pthread_create(&visitors[k], NULL, visitor_main, (void *)(intptr_t)k);
    vrun[k] = true;
  }
  /* the owners: each exits after a while and a new one takes its place */
  pthread_t *owners = calloc((size_t)nowners, sizeof(pthread_t));
  uint64_t next_id = 0;
  for (int i = 0; i < nowners; i++)
    pthread_create(&owners[i], NULL, owner_main, (void *)(uintptr_t)++next_id);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    double el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9;
    if (el >= seconds || atomic_load(&a_violations) != 0)
      break;
    for (int i = 0; i < nowners; i++)
      if (pthread_tryjoin_np(owners[i], NULL) == 0) {
        atomic_fetch_add(&a_visits[V_EXIT], 1);
        pthread_create(&owners[i], NULL, owner_main, (void *)(uintptr_t)++next_id);
      }
    struct timespec tick = { 0, 10 * 1000 * 1000 };
    nanosleep(&tick, NULL);
  }
  atomic_store(&a_stop, 1);
  for (int i = 0; i < nowners; i++)
    pthread_join(owners[i], NULL);
  for (int k = 0; k < V_NKINDS; k++)
    if (vrun[k])
      pthread_join(visitors[k], NULL);
  for (int i = 0; i < nreaders; i++)
    pthread_join(readers[i], NULL);
  for (int i = 0; i < A_SLOTS; i++) {
    struct aobj *o = atomic_exchange(&a_slots[i], NULL);
    if (o != NULL)
      obj_put(&a_srcs[i % A_NSRC], o, 0, true);
  }
  prd_option_set("race_delay", "0");
  check_balance();
  clock_gettime(CLOCK_MONOTONIC, &now);
  double el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9;
  long ops = atomic_load(&a_allocs) + atomic_load(&a_frees) + atomic_load(&a_defers);
  printf("alloc_torture: seconds=%.1f owners=%d readers=%d race_delay=%ld%s operations=%ld "
         "(allocs=%ld frees=%ld defers=%ld publishes=%ld) reads=%ld visitors:",
         el, nowners, nreaders, delay, broken ? " (broken handshake)" : "", ops,
         atomic_load(&a_allocs), atomic_load(&a_frees), atomic_load(&a_defers),
         atomic_load(&a_publishes), atomic_load(&a_reads));
  for (int k = 0; k < V_NKINDS; k++)
    if (vrun[k] || k == V_EXIT)
      printf(" %s=%ld", v_names[k], atomic_load(&a_visits[k]));
  printf(" violations=%ld\n", atomic_load(&a_violations));
  if (atomic_load(&a_violations) == 0) /* a cache with objects in use would be reported again */
    for (unsigned s = 0; s < A_NCACHES; s++)
      prd_cache_destroy(a_srcs[s].s_cache);
  free(owners);
  free(readers);
  return atomic_load(&a_violations) == 0 ? 0 : 1;
}

/* The run in a child: whatever kills it (a signal the crash handler does not catch, an abort
 * after a report of the library, a sanitizer's) is a violation, reported here, not a death of
 * the test program that ctest would count against a run that must fail. */
int main(int argc, char **argv)
{
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    perror("alloc_torture: fork");
    return 2;
  }
  if (pid == 0)
    exit(torture_main(argc, argv));
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      perror("alloc_torture: waitpid");
      return 2;
    }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  fprintf(stderr, "alloc_torture: violation: the run died of signal %d\n", WTERMSIG(status));
  return 1;
}
