/*
 * magazine.h: the hit path of the CPU layer (magazine.c has the theory statement).
 *
 * prd__mag_alloc / prd__mag_free are the whole fast path: find this thread's CPU cache of the
 * cache (prd__mag_here, the ONE place that says where "my CPU cache" is, so that an rseq
 * per-CPU mode can replace it), mark it busy, pop or push one round of the loaded magazine,
 * unmark it.  No lock, no atomic read-modify-write: relaxed/release stores and loads, which
 * are plain moves on x86-64 (theory statement, section 5, counts the instructions).  Every
 * other case goes to one noinline function in magazine.c.
 */
#ifndef PRD_MAGAZINE_H
#define PRD_MAGAZINE_H

#include "internal.h"
#include "race.h"

/* This thread's CPU caches, as the hit paths read them: one thread-local block, so that a
 * hit finds its prd_cpu_cache_t from the thread pointer with no load through mt_tc (section 5
 * of magazine.c: the bounds, the entry's address and the steal flag's owner come from one
 * initial-exec TLS offset).  Only the owner writes it (prd__mag_tc_get, the thread's exit,
 * prd__mag_hold/release), so it needs no atomics.  Until the thread's first miss mt_tc points
 * at a shared empty set and mt_lim is 0, so the hit paths need no NULL test. */
typedef struct prd__mag_tls {
  prd_tcache_t *mt_tc;       /* the thread's set (the registry's, for tc_steal and tc_lock) */
  prd_cpu_cache_t *mt_cc;    /* mt_tc->tc_cc, copied: the array the hit paths index */
  uint32_t mt_lim;           /* hit paths use ids below this: mt_tc->tc_ncc, 0 while held */
  uint32_t mt_hold;          /* prd__mag_hold depth (malloc.c's re-entry guard) */
  uint32_t mt_nokey;         /* misses until the next try for the exit key (section 10) */
} prd__mag_tls_t;
extern _Thread_local prd__mag_tls_t prd__mag_tls
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
/* The layer's globals that hit paths read, each set once before the first cache or CPU cache
 * exists: one cache line of their own (aligned, and padded to the line by the alignment), so
 * that no write of another global (the thread registry's at every thread start and exit, a
 * pre-flush request) takes the line from the cores that read them on every hit.  Named by
 * the macros below. */
typedef struct prd__mag_ro {
  _Alignas(64) uintptr_t mr_mark_secret;  /* prd__mark_secret (section 15) */
  int mr_membarrier;         /* prd__mag_membarrier */
  int mr_annot;              /* prd__mag_annot */
  int mr_plain;              /* prd__mag_plain */
  int mr_defer_light;        /* prd__mag_defer_light */
} prd__mag_ro_t;
extern prd__mag_ro_t prd__mag_ro __attribute__((visibility("hidden")));
/* Nonzero when the process registered for membarrier(PRIVATE_EXPEDITED): the owner then
 * needs only a compiler barrier in the handshake; 0: a full fence (theory section 6). */
#define prd__mag_membarrier (prd__mag_ro.mr_membarrier)
/* Nonzero in ASan builds and when running under valgrind: objects entering a magazine are
 * made inaccessible and leaving it accessible again (annotate.h), so a use after free of an
 * object parked in a magazine is caught; otherwise one load and a branch. */
#define prd__mag_annot (prd__mag_ro.mr_annot)
/* Nonzero when neither of the two above asks for more than the plain hit path: membarrier is
 * registered (under TSan: always) and no tool annotates.  Set once, in the layer's
 * pthread_once, before any thread has CPU caches (so every thread whose mt_lim is above 0
 * reads its final value).  malloc.c enables its own hit path only when it is set, and that
 * path then needs neither test (prd__mag_alloc_plain / prd__mag_free_plain). */
#define prd__mag_plain (prd__mag_ro.mr_plain)
/* Nonzero when neither the handshake nor the RCU layer's reader barrier needs a fence: the
 * process is registered for membarrier here (prd__mag_membarrier) and the built-in RCU's
 * readers run without fences (prd__rcu_reader_fences 0, which never becomes 1 again).  Then
 * the deferral hit path's one barrier after its busy store is a compiler barrier, and
 * otherwise a full fence that serves both (defer.c section 8).  0 until defer.c's slow path
 * has seen both (prd__defer_light_update), which only costs fences meanwhile; written with
 * relaxed atomics, from 0 to 1 at most once per value of the two. */
#define prd__mag_defer_light (prd__mag_ro.mr_defer_light)

/* The largest magazine of the size table (magazine.c section 8). */
#define PRD_MAG_MAX_ROUNDS 4095

PRD_NOINLINE void *prd__mag_alloc_miss(prd_cache_t *cp, int flags);
/* The annotations of annotate.h, out of line (only when prd__mag_annot): returns buf. */
PRD_NOINLINE void *prd__mag_annot_out(prd_cache_t *cp, void *buf);
/* The same, then the free mark cleared (section 15). */
PRD_NOINLINE void *prd__mag_annot_out_mark(prd_cache_t *cp, void *buf);
PRD_NOINLINE void  prd__mag_free_miss(prd_cache_t *cp, void *buf);

/* For Prudence (defer.c), which keeps its latent generations in the CPU cache. */
/* The calling thread's CPU caches with an entry for id (created or grown), or NULL (thread
 * exiting, no memory): no lock held. */
prd_tcache_t *prd__mag_tc_get(uint32_t id);
/* An empty magazine of cp's current size, the depot's if it has one, else a new one
 * (PRD_NOSLEEP); NULL when none could be had.  And the way back for an empty one.  Callable
 * under tc_lock. */
prd_mag_t *prd__mag_new(prd_cache_t *cp);
void prd__mag_free_empty(prd_mag_t *mp);
/* Up to `want` buffers of cp from the slab layer for tc, the calling thread's record, from
 * its current slab (section 3, tier 4; slab.c section 10).  No lock held. */
size_t prd__mag_slab_take(prd_cache_t *cp, prd_tcache_t *tc, void **objs, size_t want,
                          int flags);
/* Rounds of cp's current magazine size. */
uint32_t prd__mag_cur_size(prd_cache_t *cp);
/* Moves cp's depot to the next magazine size for Prudence (section 8: a magazine of at most
 * 512 KiB of objects, less with more than 32 threads): true if it grew; when it cannot, the
 * depot steps down to the size the threads now allow.  No lock held but possibly the
 * caller's tc_lock. */
bool prd__mag_grow(prd_cache_t *cp);
/* Tests: the burst rule of section 8 takes n contended depot visits within window_ns
 * (n = 0: the defaults again).  Set while no thread visits a depot. */
void prd__mag_set_burst(uint32_t n, uint64_t window_ns);
/* Calls fn(cp, cc, arg) with cc's tc_lock held on every CPU cache whose owner is not inside
 * an operation on it (section 6's handshake), for cp or, when cp is NULL, every cache with
 * magazines.  PRD_VISIT_WAIT takes the locks and waits for busy owners; PRD_VISIT_TRY only
 * try-locks and skips busy owners (callers that may hold a lock of the order, idle-time
 * work).  Returns how many CPU caches or threads were skipped. */
enum { PRD_VISIT_WAIT, PRD_VISIT_TRY };
typedef void prd__mag_visit_fn(prd_cache_t *cp, prd_cpu_cache_t *cc, void *arg);
uint32_t prd__mag_visit(prd_cache_t *cp, int mode, prd__mag_visit_fn *fn, void *arg);
/* Tagged magazines in the depot (magazine.c section 13).  lat_put hands over mp holding n
 * deferred objects tagged with grace-period state gp (tc_lock may be held): false when the
 * depot's list would then hold more than cap bytes of objects; *empty (if not NULL) gets an
 * empty magazine of the current size from the depot, or NULL.  lat_out (no lock held) sends
 * every tagged magazine out: the safe ones' objects to the slab layer, the others through
 * mh_tag_out. */
bool prd__mag_lat_put(prd_cache_t *cp, prd_mag_t *mp, uint32_t n, prd_gp_t gp, uint64_t cap,
                      prd_mag_t **empty);
void prd__mag_lat_out(prd_cache_t *cp);
/* Sums every thread's Prudence counters of cp (and those of threads that exited). */
void prd__mag_pcounts(prd_cache_t *cp, uint64_t pc[PRD_PC_NCOUNTERS]);
/* Deferred objects in cc's latent generations (tc_lock held, or the owner inside its
 * handshake). */
static inline uint32_t prd__mag_latent(const prd_cpu_cache_t *cc)
{
  return atomic_load_explicit(&cc->cc_lat_n[0], memory_order_relaxed) +
         atomic_load_explicit(&cc->cc_lat_n[1], memory_order_relaxed);
}

/* The hooks through which the layer above (Prudence, defer.c) enters this layer's slow paths
 * (magazine.c section 14).  Registered once, with prd__mag_set_hooks, before the first latent
 * generation or tagged magazine exists; called only on slow paths (misses, a CPU cache being
 * emptied, depot reaps), never on a hit path.  Unless said, tc_lock is held and the owner is
 * not inside an operation on cc. */
struct prd__mag_hooks {
  /* Has the grace period of a tagged magazine's state ended?  An acquire load (rcu.c §4);
   * dp_lock may be held. */
  bool (*mh_tag_safe)(prd_gp_t gp);
  /* An allocation miss found no safe tagged magazine and no full one (dp_lock held): true
   * when it should wait for the oldest one's grace period rather than grow the cache. */
  bool (*mh_tag_wait)(prd_cache_t *cp, uint64_t tag_rounds);
  /* That wait, bounded (no lock held): true when the grace period ended (the miss looks at
   * the depot again), false to go on to tier 4. */
  bool (*mh_depot_wait)(uint32_t id, prd_gp_t gp, int flags);
  /* A tagged magazine whose grace period has not ended leaves the depot (reap, destroy, out
   * of memory): its objects and magazine go to the layer above.  No lock held but possibly
   * tc_lock. */
  void (*mh_tag_out)(prd_cache_t *cp, prd_mag_t *mp);
  /* cc's loaded magazine is empty: a safe latent generation takes its place.  True when the
   * loaded magazine has rounds now. */
  bool (*mh_cc_merge)(prd_cache_t *cp, prd_cpu_cache_t *cc);
  /* cc is being emptied (reap, idle steal, thread exit, flush, destroy, fork child): its
   * latent generations leave it; they are gone on return. */
  void (*mh_cc_drain)(prd_cache_t *cp, prd_cpu_cache_t *cc);
  /* Tier 4 of a cache with deferrals (no lock held): refills the loaded magazine of id from
   * the slab layer and returns one object (NULL: out of memory, errno set). */
  void *(*mh_refill)(prd_cache_t *cp, uint32_t id, int flags);
  /* No lock held, after this layer ran the hooks above under its locks: the layer above's
   * work noted meanwhile (grace-period requests). */
  void (*mh_unlocked)(void);
};
void prd__mag_set_hooks(const struct prd__mag_hooks *h);

/* Where is my CPU cache: the set of CPU caches this thread uses now. */
static inline prd_tcache_t *prd__mag_here(void)
{
  return prd__mag_tls.mt_tc;
}

/* The re-entry guard of a layer above (malloc.c section 5): until the matching release every
 * hit path of this thread misses (mt_lim 0), so a call that comes back into the allocator
 * from the C library while this thread is inside a miss (holding tc_lock, changing a CPU
 * cache) never touches a CPU cache on the lockless path.  The misses themselves take tc_lock
 * and serve tier 1 there, so the held thread's own operations stay correct. */
static inline void prd__mag_hold(void)
{
  prd__mag_tls.mt_hold++;
  prd__mag_tls.mt_lim = 0;
}

static inline void prd__mag_release(void)
{
  if (--prd__mag_tls.mt_hold == 0)
    prd__mag_tls.mt_lim = prd__mag_tls.mt_tc->tc_ncc;
}

/* The owner's half of the handshake (theory section 6), the ONE way a lockless path enters a
 * CPU cache: the magazine hit paths below (and through them malloc.c's plain halves) and the
 * deferral hit path of defer.c all begin with prd__mag_enter (the deferral with
 * prd__mag_enter_light, the same steps) and end with prd__mag_exit, so the order of the steps
 * cannot differ between copies.
 *   enter: cc_busy = 1; the barrier (pairs with the visitor's membarrier(), or without it with
 *          the visitor's seq_cst fence); the steal test; and only after it, if it passed, may
 *          the caller load anything of the CPU cache (section 6 says why no load may come
 *          before the test).  False: a visitor is at work, cc_busy is 0 again, and the caller
 *          takes its slow path, which holds tc_lock.
 *   exit:  cc_busy = 0 (release).
 * Under TSan the store and the test are seq_cst accesses instead, which TSan understands (it
 * does not model fences).  `plain`: the caller knows prd__mag_plain is set (membarrier
 * registered), so the compiler barrier is the whole barrier; a constant after inlining.
 * PRD_RACE() marks each step for the race widening of Debug and TSan builds (race.h). */

/* The busy store and the barrier after it: a compiler barrier when `light` (the process is
 * registered for membarrier, which the visitor sends), else a full fence. */
static inline void prd__mag_busy_enter_light(prd_cpu_cache_t *cc, bool light)
{
#ifdef PRD_TSAN
  (void)light;
  atomic_store_explicit(&cc->cc_busy, 1, memory_order_seq_cst);
  PRD_RACE();
#else
  atomic_store_explicit(&cc->cc_busy, 1, memory_order_relaxed);
  PRD_RACE();
  if (light)
    atomic_signal_fence(memory_order_seq_cst);   /* pairs with the reaper's membarrier() */
  else
    atomic_thread_fence(memory_order_seq_cst);   /* pairs with the reaper's seq_cst fence */
#endif
}

static inline bool prd__mag_steal_pending(prd_tcache_t *tc)
{
#ifdef PRD_TSAN
  return atomic_load_explicit(&tc->tc_steal, memory_order_seq_cst) != 0;
#elif defined(__x86_64__)
  /* acquire, as below: on x86-64 a plain load is one, and this is one instruction fewer
   * (`cmpl $0` on the flag in memory, where compilers load an atomic into a register and
   * test it: they do not fold atomic accesses into other instructions).  The "memory"
   * clobber keeps the compiler from moving any access of the CPU cache above the test (the
   * acquire's compiler half); the busy store and the barrier stay before it (the barrier is
   * itself a compiler barrier). */
  bool pending;
  __asm__ volatile("cmpl $0, %1" : "=@ccne"(pending) : "m"(tc->tc_steal) : "memory");
  return pending;
#else
  /* acquire: reading the reaper's release of tc_steal = 0 makes its changes visible */
  return atomic_load_explicit(&tc->tc_steal, memory_order_acquire) != 0;
#endif
}

/* exit: release, so a reaper that reads cc_busy == 0 (acquire) sees this operation's stores. */
static inline void prd__mag_exit(prd_cpu_cache_t *cc)
{
  PRD_RACE();
  atomic_store_explicit(&cc->cc_busy, 0, memory_order_release);
}

/* prd__mag_enter with the barrier's strength given (prd__mag_busy_enter_light): the deferral
 * hit path passes prd__mag_defer_light, its barrier being the RCU layer's reader barrier too. */
static inline bool prd__mag_enter_light(prd_cpu_cache_t *cc, prd_tcache_t *tc, bool light)
{
  PRD_RACE();   /* before the busy store: a visitor looks at cc_busy 0 meanwhile */
  prd__mag_busy_enter_light(cc, light);
  PRD_RACE();
  if (prd_likely(prd__mag_broken_handshake || !prd__mag_steal_pending(tc))) {
    PRD_RACE();
    return true;
  }
  prd__mag_exit(cc);
  return false;
}

static inline bool prd__mag_enter(prd_cpu_cache_t *cc, prd_tcache_t *tc, bool plain)
{
  return prd__mag_enter_light(cc, tc, plain || prd_likely(prd__mag_membarrier));
}

/* The old, wrong order, for the torture's --broken-handshake switch only (race.h): with it
 * prd__mag_enter skips the steal test and the caller makes it here, after its first loads.
 * True: the caller returns its miss (cc_busy is 0 again).  A constant false in every build
 * without the race hooks, and while the switch is off a load and a branch of Debug builds. */
static inline bool prd__mag_late_steal(prd_cpu_cache_t *cc, prd_tcache_t *tc)
{
  if (prd_likely(!prd__mag_broken_handshake))
    return false;
  PRD_RACE();
  if (!prd__mag_steal_pending(tc))
    return false;
  prd__mag_exit(cc);
  return true;
}

/* A per-thread counter: only its owner writes it, so no atomic read-modify-write; readers
 * load it relaxed.  On x86-64 one `addq $1` to memory (the C11 load + store of an atomic is
 * three instructions: compilers do not fuse atomic accesses): an aligned 8-byte store is
 * single-copy atomic there, so a reader sees the old or the new value, as with the load +
 * store.  TSan builds keep the C11 form, which TSan sees. */
#if defined(__x86_64__) && !defined(PRD_TSAN)
#define PRD__MAG_COUNT(c) __asm__("addq $1, %0" : "+m"(*(uint64_t *)&(c)))
#else
#define PRD__MAG_COUNT(c) \
  atomic_store_explicit(&(c), atomic_load_explicit(&(c), memory_order_relaxed) + 1, \
                        memory_order_relaxed)
#endif

/* The hits' change of cc_rw (types.h: the rounds in bits 0..15, the unfolded allocation hits
 * above), owner-only inside the handshake, in one add to memory as PRD__MAG_COUNT: a pop adds
 * 0xffff (the rounds, at least 1, lose one and carry one into the count), a push adds 1 (the
 * rounds, below cc_magsize, gain one).  A reader sees the old or the new word. */
#define PRD__MAG_RW_POP  0xffffu
#define PRD__MAG_RW_PUSH 1u
#define PRD__MAG_RW_SHIFT 16
#if defined(__x86_64__) && !defined(PRD_TSAN)
#define PRD__MAG_RW_ADD(cc, d) __asm__("addq %1, %0" : "+m"(*(uint64_t *)&(cc)->cc_rw) : "i"(d))
#else
#define PRD__MAG_RW_ADD(cc, d) \
  atomic_store_explicit(&(cc)->cc_rw, \
                        atomic_load_explicit(&(cc)->cc_rw, memory_order_relaxed) + (d), \
                        memory_order_relaxed)
#endif

/* The allocation hits of cc: the folded ones and those in cc_rw's count.  The count has 48
 * bits: it is folded into cc_alloc_hits at every miss of the thread on this cache
 * (prd__mag_fold_hits), so it wraps only after 2^48 allocation hits with no miss between
 * (more than a month at 10^8 a second). */
static inline uint64_t prd__mag_alloc_hits(const prd_cpu_cache_t *cc)
{
  return atomic_load_explicit(&cc->cc_alloc_hits, memory_order_relaxed) +
         (atomic_load_explicit(&cc->cc_rw, memory_order_relaxed) >> PRD__MAG_RW_SHIFT);
}

/* cc_rw's count into cc_alloc_hits (the owner under tc_lock, or a visitor with tc_lock while
 * the owner is out). */
static inline void prd__mag_fold_hits(prd_cpu_cache_t *cc)
{
  uint64_t w = atomic_load_explicit(&cc->cc_rw, memory_order_relaxed);
  uint64_t ah = atomic_load_explicit(&cc->cc_alloc_hits, memory_order_relaxed);
  atomic_store_explicit(&cc->cc_alloc_hits, ah + (w >> PRD__MAG_RW_SHIFT), memory_order_relaxed);
  atomic_store_explicit(&cc->cc_rw, w & ((1u << PRD__MAG_RW_SHIFT) - 1), memory_order_relaxed);
}

/* The free hits of cc: the free hit path counts nothing but its round (magazine.c section 5);
 * a free hit adds a round, a counted allocation hit takes one, and every other change of the
 * rounds is offset in cc_free_base (prd__mag_rounds_set), so the free hits are the allocation
 * hits plus the rounds plus the base.  A reader that races the owner may see the parts of
 * two moments: off by one or two while the owner runs, exact once it has stopped, as the
 * counters read one by one were. */
static inline uint64_t prd__mag_free_hits(const prd_cpu_cache_t *cc)
{
  uint64_t w = atomic_load_explicit(&cc->cc_rw, memory_order_relaxed);
  return atomic_load_explicit(&cc->cc_alloc_hits, memory_order_relaxed) +
         (w >> PRD__MAG_RW_SHIFT) + (w & ((1u << PRD__MAG_RW_SHIFT) - 1)) +
         atomic_load_explicit(&cc->cc_free_base, memory_order_relaxed);
}

/* cc_rounds = r by anything but a counted hit (an exchange, a reload, a refill, a merge, an
 * uncounted pop or push, emptying): the base takes the opposite change, so the free hits
 * stay what they were.  The owner (tc_lock held, or inside its handshake) or a visitor with
 * tc_lock while the owner is out: only one of them writes cc at a time. */
static inline void prd__mag_rounds_set(prd_cpu_cache_t *cc, uint32_t r)
{
  uint32_t old = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
  uint64_t base = atomic_load_explicit(&cc->cc_free_base, memory_order_relaxed);
  atomic_store_explicit(&cc->cc_free_base, base + old - r, memory_order_relaxed);
  atomic_store_explicit(&cc->cc_rounds, r, memory_order_relaxed);
}

/* The free mark (magazine.c section 15): a word of a free buffer of a cache that has it
 * (not PRD_CF_NOMARK), holding the buffer's address XOR a per-process random secret (bit 63
 * set: never a pointer a program holds).  Written by the free step (prd__mark_free) before the
 * buffer enters any layer, cleared by every path that hands the buffer out, so "the mark is
 * there" is "freed and not handed out since", whichever layer holds the first copy.  The word
 * is at the cache's cache_mark_off: 0, PRD_MARK_NEAR for a buffer of PRD_MARK_NEAR_MIN bytes or
 * more, PRD_MARK_FAR for one of PRD_MARK_FAR_MIN or more: off the line readers read first, and
 * where there is room off the pair of lines an adjacent-line prefetcher fetches with it
 * (section 15).
 * prd__mark_secret is set once, before the first cache exists, and never changes. */
#define prd__mark_secret (prd__mag_ro.mr_mark_secret)
typedef uintptr_t __attribute__((may_alias)) prd__mark_word_t;
#define PRD_MARK_FAR     128u   /* the first word of a buffer's third line: another pair */
#define PRD_MARK_FAR_MIN 192u   /* three whole lines: the small layout's freelist word (the
                                   chunk's last) stays clear of it */
#define PRD_MARK_NEAR     64u   /* the first word of a buffer's second line */
#define PRD_MARK_NEAR_MIN 128u  /* two whole lines, for the same reason */

static inline uintptr_t prd__mark_of(const void *buf)
{
  return (uintptr_t)buf ^ prd__mark_secret;
}

/* The test reads the word of a buffer that, on a double free, is free: poisoned under ASan
 * (annotate.h), so this read alone is not instrumented; the write of the mark comes before
 * the buffer is poisoned and its clear after it is made accessible again. */
#ifdef PRD_ASAN
__attribute__((no_sanitize_address))
#endif
static inline bool prd__mark_test(const void *buf, uint32_t off)
{
  return *(const prd__mark_word_t *)((const char *)buf + off) == prd__mark_of(buf);
}

static inline void prd__mark_set(void *buf, uint32_t off)
{
  *(prd__mark_word_t *)((char *)buf + off) = prd__mark_of(buf);
}

static inline void prd__mark_clear(void *buf, uint32_t off)
{
  *(prd__mark_word_t *)((char *)buf + off) = 0;
}

/* Tier 1 of allocation on the CPU cache of magazine id `id`: pop from the loaded magazine
 * into *bufp; false when the magazine layer must take the miss.  `plain` (a constant after
 * inlining): the caller knows prd__mag_plain is set, so neither the membarrier mode nor the
 * tools are tested (cp is then not used, and may be NULL).  `mark` (a constant too): the
 * hit clears the free mark (section 15), at offset moff. */
static inline bool prd__mag_alloc_hit_mode(prd_cache_t *cp, uint32_t id, bool plain, bool mark,
                                           uint32_t moff, void **bufp)
{
  if (prd_likely(id < prd__mag_tls.mt_lim)) {
    prd_cpu_cache_t *cc = &prd__mag_tls.mt_cc[id];
    prd_tcache_t *tc = prd__mag_tls.mt_tc;
    if (prd_likely(prd__mag_enter(cc, tc, plain))) {
      size_t r = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
      if (prd_unlikely(prd__mag_late_steal(cc, tc)))
        return false;
      if (prd_likely(r > 0)) {
        void *buf = cc->cc_loaded->mag_round[r - 1];
        PRD_RACE();
        PRD__MAG_RW_ADD(cc, PRD__MAG_RW_POP);   /* rounds r - 1, one allocation hit more */
        prd__mag_exit(cc);
        if (!plain && prd_unlikely(prd__mag_annot))   /* the tools, then the mark */
          buf = mark ? prd__mag_annot_out_mark(cp, buf) : prd__mag_annot_out(cp, buf);
        else if (mark)
          prd__mark_clear(buf, moff);
        *bufp = buf;
        return true;
      }
      prd__mag_exit(cc);
    }
  }
  return false;
}

/* Tier 1 for a caller that has seen prd__mag_plain set (malloc.c's classes: their hit ids
 * are enabled only then, section 8 there); false: the caller takes its miss, marking itself
 * re-entrant first (src/malloc.c section 5).  The result is a flag, not a NULL test of the
 * round, so the caller's hit returns without a second test.  Word 0 is cleared: a class's
 * mark is there (section 15), and a class without one hands word 0 to the program anyway. */
static inline bool prd__mag_alloc_plain(uint32_t id, void **bufp)
{
  return prd__mag_alloc_hit_mode(NULL, id, true, true, 0, bufp);
}

/* prd_cache_alloc's CPU layer: the plain hit half when prd__mag_plain is set (one test in
 * place of the membarrier-mode and tool tests), else the full one; then the miss.  `mark`
 * (a constant after inlining): the caller knows cp has the free mark, which a hit clears
 * (the miss clears it itself, by the cache's flags). */
static inline void *prd__mag_alloc(prd_cache_t *cp, int flags, bool mark)
{
  void *buf;
  uint32_t id = cp->cache_magid;
  uint32_t moff = mark ? cp->cache_mark_off : 0;
  if (prd_likely(prd__mag_plain) ? prd__mag_alloc_hit_mode(NULL, id, true, mark, moff, &buf)
                                 : prd__mag_alloc_hit_mode(cp, id, false, mark, moff, &buf))
    return buf;
  return prd__mag_alloc_miss(cp, flags);
}

/* Deferred objects that become free (a merge of a safe latent generation or tagged
 * magazine): the free mark set on each, a copy already marked reported and dropped; returns
 * how many of objs stay (magazine.c section 15). */
uint32_t prd__mark_merge(prd_cache_t *cp, void **objs, uint32_t n);

/* The free mark found in a buffer being freed: it is free already, wherever its first copy
 * is.  Reported (naming the cache, the buffer and `what`: "double free", "deferral"), not
 * freed again; keeps errno (magazine.c section 15). */
PRD_NOINLINE PRD_COLD void prd__mag_double_free(prd_cache_t *cp, void *buf, const char *what);

/* The free step of the mark (section 15), for a cache that has it: false when buf holds the
 * mark (free already: reported as `what`, the caller drops the call); else the mark is
 * written and the caller pushes buf on.  One load, compare and branch, one store, before buf
 * enters any list, so a reaper or another thread that takes buf from a magazine later sees
 * it (its hand-off orders the store, section 15).  `what` is a constant after inlining. */
static inline bool prd__mark_free(prd_cache_t *cp, void *buf, const char *what)
{
  uint32_t off = cp->cache_mark_off;
  if (prd_unlikely(prd__mark_test(buf, off))) {
    prd__mag_double_free(cp, buf, what);
    return false;
  }
  prd__mark_set(buf, off);
  return true;
}

/* Tier 1 of free: push onto the loaded magazine of magazine id `id`.  1: pushed; 0: the
 * caller takes the miss (prd__mag_free_miss).  A double free is the free mark's to find
 * (prd__mark_free, before this); a caller without it passes `top` (a constant after
 * inlining) and gets -1 when buf is the loaded magazine's top round (free(p); free(p):
 * reported by the caller, not pushed).  `plain` as for allocation. */
static inline int prd__mag_free_hit_mode(uint32_t id, void *buf, bool plain, bool top)
{
  if (prd_likely(id < prd__mag_tls.mt_lim)) {
    prd_cpu_cache_t *cc = &prd__mag_tls.mt_cc[id];
    prd_tcache_t *tc = prd__mag_tls.mt_tc;
    if (prd_likely(prd__mag_enter(cc, tc, plain))) {
      size_t r = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
      if (prd_unlikely(prd__mag_late_steal(cc, tc)))
        return 0;
      /* under ASan or valgrind (prd__mag_annot) every free takes the slow path, which
       * annotates the object before it enters the magazine */
      if (prd_likely(r < cc->cc_magsize && (plain || !prd__mag_annot))) {
        prd_mag_t *mp = cc->cc_loaded;
        if (top && r > 0 && prd_unlikely(mp->mag_round[r - 1] == buf)) {
          prd__mag_exit(cc);
          return -1;
        }
        mp->mag_round[r] = buf;
        PRD_RACE();
        PRD__MAG_RW_ADD(cc, PRD__MAG_RW_PUSH);   /* rounds r + 1: counted by the round itself
                                                  * (prd__mag_free_hits) */
        prd__mag_exit(cc);
        return 1;
      }
      prd__mag_exit(cc);
    }
  }
  return 0;
}

/* Tier 1 of free for a caller that has seen prd__mag_plain set (as prd__mag_alloc_plain). */
static inline int prd__mag_free_plain(uint32_t id, void *buf, bool top)
{
  return prd__mag_free_hit_mode(id, buf, true, top);
}

/* The CPU layer of a free: the caller ran the mark's step (`top` false), or cp has no mark
 * and the top round is compared (`top`, a constant after inlining). */
static inline void prd__mag_free(prd_cache_t *cp, void *buf, bool top)
{
  uint32_t id = cp->cache_magid;
  int r = prd_likely(prd__mag_plain) ? prd__mag_free_hit_mode(id, buf, true, top)
                                     : prd__mag_free_hit_mode(id, buf, false, top);
  if (prd_likely(r > 0))
    return;
  if (top && r < 0)
    prd__mag_double_free(cp, buf, "double free");
  else
    prd__mag_free_miss(cp, buf);
}

#endif
