/*
 * internal.h: what the files of libprudence share, grouped by the file that defines it.
 * Cross-file internal names start with prd__; file-local ones are static.
 */
#ifndef PRD_INTERNAL_H
#define PRD_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "options.h"
#include "types.h"

/* ---- compiler helpers ---------------------------------------------------------------- */
#define prd_likely(x)   __builtin_expect(!!(x), 1)
#define prd_unlikely(x) __builtin_expect(!!(x), 0)
#define PRD_NOINLINE    __attribute__((noinline))
#define PRD_COLD        __attribute__((cold))
#define PRD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define PRD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define PRD_P2ALIGN(x, a)   ((x) & -(a))                   /* round down to a power of two */
#define PRD_P2ROUNDUP(x, a) (-(-(x) & -(a)))               /* round up to a power of two */
#define PRD_ISP2(x)         (((x) & ((x) - 1)) == 0)
#define PRD_IS_P2ALIGNED(v, a) ((((uintptr_t)(v)) & ((uintptr_t)(a) - 1)) == 0)
#define PRD_MIN(a, b) ((a) < (b) ? (a) : (b))
#define PRD_MAX(a, b) ((a) > (b) ? (a) : (b))

/* A spin-wait's pause: the CPU's hint where it has one, else a compiler barrier. */
static inline void prd__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* ---- report.c: reporting errors and internal assertions (a leaf: libc only) --------- */
/* Prints "prudence: <message>" on stderr without allocating (safe inside the allocator)
 * and counts it.  Callers that print several lines call prd__report_done() once after. */
void prd__report(const char *fmt, ...) PRD_PRINTF(1, 2) PRD_COLD;
/* Aborts when the option abort_on_error is set; else returns. */
void prd__report_done(void) PRD_COLD;
/* prd__report + prd__report_done. */
void prd__error(const char *fmt, ...) PRD_PRINTF(1, 2) PRD_COLD;
/* A condition that may repeat without end (a refused munmap or madvise) is reported at its
 * first occurrence and then once per PRD_REPORT_EVERY: whether its n-th (from 1) is. */
#define PRD_REPORT_EVERY 1024
static inline bool prd__report_due(uint64_t n)
{
  return n == 1 || n % PRD_REPORT_EVERY == 0;
}
/* Number of errors reported so far (tests read it). */
uint64_t prd__error_count(void);
_Noreturn void prd__assert_fail(const char *expr, const char *file, int line) PRD_COLD;
/* Write a formatted text of at most 1 KiB to fd without allocating; used by every printer
 * that may run inside malloc. */
void prd__vwrite(int fd, const char *fmt, va_list ap);
void prd__write_fmt(int fd, const char *fmt, ...) PRD_PRINTF(2, 3);
/* Writes all of [p, p+len) to fd (retrying short and interrupted writes): 0, or -1 with
 * errno on an error (the reporters ignore it; the snapshot writer of stats.c does not). */
int prd__write_all(int fd, const char *p, size_t len);

#ifdef PRD_DEBUG
#define PRD_ASSERT(e) ((e) ? (void)0 : prd__assert_fail(#e, __FILE__, __LINE__))
#else
#define PRD_ASSERT(e) ((void)0)
#endif

/* ---- options.c ----------------------------------------------------------------------- */
#define PRD__OPT_FIELD(kind, name, def, doc) _Atomic long name;
struct prd__options { PRD_OPTIONS(PRD__OPT_FIELD) };
#undef PRD__OPT_FIELD
extern struct prd__options prd__options;
/* Read an option (relaxed: options are settings, not synchronization). */
#define prd__opt(name) atomic_load_explicit(&prd__options.name, memory_order_relaxed)
/* Reads PRUDENCE_OPTIONS and friends once; every entry point may call it, it is idempotent. */
void prd__init(void);
/* Calls fn for every option of the table, in table order (docs check, stats printers). */
void prd__options_foreach(void (*fn)(void *arg, const char *name, long def, const char *doc),
                          void *arg);
/* PRUDENCE_DEBUG's list of feature names -> PRD_CACHE_* bits; bad names reported as `src`. */
long prd__debug_parse(const char *list, const char *src);

/* ---- slab.c: the slab layer (Bonwick 1994) -------------------------------------------- */
void prd__slab_init(void);
/* The slab layer's part of a cache: layout, lock and lists from the creation arguments (0, or
 * -1 when no layout fits), and its teardown when nothing uses the cache any more. */
int   prd__slab_cache_init(prd_cache_t *cp, const char *name, size_t size, size_t align,
                           prd_ctor_fn *ctor, prd_dtor_fn *dtor, prd_reclaim_fn *reclaim,
                           void *priv, prd_vmem_t *source, uint32_t flags);
void  prd__slab_cache_fini(prd_cache_t *cp);
/* The slab layer's own caches, i = 0, 1, ..., then NULL. */
prd_cache_t *prd__slab_internal_cache(size_t i);
/* The slab layer alone, under the cache lock: the layers above call these on a miss. */
void *prd__slab_alloc(prd_cache_t *cp, int flags);
void  prd__slab_free(prd_cache_t *cp, void *buf);
/* Bulk forms (one hold of cache_lock): up to `want` buffers into out[] (how many, 0 with
 * ENOMEM), and n buffers back. */
size_t prd__slab_alloc_bulk(prd_cache_t *cp, void **out, size_t want, int flags);
/* The same for a thread that keeps a slab of its own (slab.c section 10): owner is its opaque
 * token (the magazine layer's thread record), *slabp its current slab (a hint, NULL: none),
 * updated. */
size_t prd__slab_alloc_own(prd_cache_t *cp, void **out, size_t want, int flags,
                           const void *owner, void **slabp);
/* slab loses owner when it is still owner's current slab of cp (thread exit, flush, reaps). */
void  prd__slab_disown(prd_cache_t *cp, const void *owner, void *slab);
/* Every owned slab of cp whose owner `gone` names loses its owner (the fork child's
 * take-over of the dead threads' caches). */
void  prd__slab_disown_if(prd_cache_t *cp, bool (*gone)(const void *owner));
void  prd__slab_free_bulk(prd_cache_t *cp, void *const *bufs, size_t n);
/* The out-of-memory hook (cache.c sets it): a user cache's slab could not be had; called with
 * no lock held, *state 0 at an allocation's first call and the hook's between calls.  True:
 * try again; false: the allocation fails (ENOMEM). */
typedef bool prd__slab_oom_fn(prd_cache_t *cp, int flags, unsigned *state);
void  prd__slab_set_oom_hook(prd__slab_oom_fn *fn);
/* The growth hook (cache.c sets it; slab.c section 6): after every PRD_SLAB_GROW_BYTES of
 * slabs that user caches made and large blocks malloc.c took from the heap arena, called by
 * the one that made the last, with no lock held, `mark` set; while it returns true (work
 * left), called again, without `mark`, by each one that makes another. */
typedef bool prd__slab_grow_fn(bool mark);
#define PRD_SLAB_GROW_BYTES  ((uint64_t)4 << 20)   /* growth between two marks: the heap
                                                        arena's import */
void  prd__slab_set_grow_hook(prd__slab_grow_fn *fn);
/* Counts `bytes` of heap growth toward that hook (no lock held). */
void  prd__slab_grown(size_t bytes);
/* Returns the free slabs outside the working set (all: every free slab) to the source. */
void  prd__slab_reap(prd_cache_t *cp, bool all);
/* A NOTOUCH cache over the heap arena: decommits the free buffers free since the last call
 * (all: every free one) (slab.c section 6); the bytes it tried (a refusal keeps them). */
size_t prd__slab_purge(prd_cache_t *cp, bool all);
/* Large layout: the bufctl of a buffer (allocated or free), or NULL.  cache_lock held.
 * Inline, as a read of the slab layer's table: debug.c, below it, looks buffers up too. */
static inline size_t prd__slab_hash_index(const prd_cache_t *cp, const void *buf)
{
  return ((uintptr_t)buf >> cp->cache_hash_shift) & cp->cache_hash_mask;
}

static inline prd_bufctl_t *prd__slab_hash_find(prd_cache_t *cp, const void *buf)
{
  prd_bufctl_t *bcp = cp->cache_hash[prd__slab_hash_index(cp, buf)];
  while (bcp != NULL && bcp->bc_addr != buf)
    bcp = bcp->bc_hnext;
  return bcp;
}
/* The start of the buffer of cp whose chunk holds addr, or NULL.  cache_lock held. */
void *prd__slab_containing(prd_cache_t *cp, const void *addr);
/* Every allocated buffer (bcp NULL for the small layout; debugging caches: as the user
 * sees it), those deferred in the latent slabs too when `deferred`.  cache_lock held. */
typedef void prd__walk_fn(void *arg, prd_cache_t *cp, void *buf, prd_bufctl_t *bcp);
void  prd__slab_walk_allocated(prd_cache_t *cp, prd__walk_fn *fn, void *arg, bool deferred);
/* The slab layer's and the latent slabs' fields of the cache's statistics. */
void  prd__slab_stats(prd_cache_t *cp, prd_cache_stats_t *st);
/* Checks the invariants of the cache's slab layer; returns the number broken (reported). */
int   prd__cache_check(prd_cache_t *cp);
/* Sets the tag byte of a cache's page-map entries (malloc.c: its class index + 1), before
 * the cache has a slab. */
void  prd__slab_set_pm_tag(prd_cache_t *cp, uint32_t tag);

/* ---- magazine.c: the CPU layer (fast paths in magazine.h) ------------------------------- */
/* Gives cp its CPU layer (unless NOMAGAZINE or internal): a depot and a magazine id; -1 when
 * there is no memory for them (the creation then fails); PRD__MAG_NEED_TYPES while the
 * magazine caches are not all made: the front end makes them (the two calls below), then
 * calls again. */
#define PRD__MAG_NEED_TYPES 1
/* Per-thread records and CPU-cache arrays mapped so far (a thread that reuses an exited
 * thread's maps none; tests). */
uint64_t prd__mag_thread_maps(void);
int   prd__mag_cache_init(prd_cache_t *cp);
/* A row of the magazine-size table without its cache: true and what to make (name, buffer
 * size, alignment); false once every row has one. */
bool  prd__mag_type_missing(size_t *row, char name[PRD_CACHE_NAME_MAX], size_t *size,
                            size_t *align);
/* Hands cp (made internal, without magazines, not yet on the list) to the row; false when
 * another thread's cache got there first: the caller unmakes cp. */
bool  prd__mag_type_publish(size_t row, prd_cache_t *cp);
/* Before cp is torn down: every thread's and the depot's magazines back to the slabs. */
void  prd__mag_cache_fini(prd_cache_t *cp);
/* Magazines of cp hold at least `rounds` rounds (the next row of the table) from now on. */
void  prd__mag_set_min_rounds(prd_cache_t *cp, uint32_t rounds);
/* Destroys the depot's magazines outside its working set (all: every one). */
void  prd__mag_depot_reap(prd_cache_t *cp, bool all);
/* The decay pass's reap of cp's depot: as prd__mag_depot_reap, but a busy depot keeps its
 * tagged magazines, the circulation of its deferrals (magazine.c section 13). */
void  prd__mag_depot_decay(prd_cache_t *cp, bool all);
/* Destroys whole magazines of the depot for about *budget objects (at least one magazine)
 * and takes them off *budget: full ones, then tagged ones, oldest first (their objects to the
 * slabs when safe, else with their states to the latent slabs), then, once both are gone,
 * the empty ones.  True while full or tagged magazines remain.  No lock held. */
bool  prd__mag_depot_reap_some(prd_cache_t *cp, size_t *budget);
/* Full and tagged magazines the depot took and gave since cp was made (a depot that moved
 * none between two looks has no working set: cache.c's decay and growth reaps). */
uint64_t prd__mag_depot_moves(prd_cache_t *cp);
/* The allocation misses that visited the depot since cp was made, and every move of a
 * tagged magazine: unchanged between two looks, the class did not allocate (it may have
 * freed) and no deferral circulated through it (cache.c's growth reap). */
uint64_t prd__mag_depot_allocs(prd_cache_t *cp);
/* Takes back the magazines of every other thread not inside an operation (the handshake);
 * with `only`, that cache's alone, this thread's too (cache.c's drain). */
void  prd__mag_reap_threads(prd_cache_t *only);
/* This thread's and every other thread's magazines and all depots back to the slab layer. */
void  prd__mag_purge_all(void);
/* Fills the CPU layer's fields of st. */
void  prd__mag_stats(prd_cache_t *cp, prd_cache_stats_t *st);
/* In a fork child, takes over the CPU caches of the threads that did not survive the fork,
 * if not done yet (no lock held). */
void  prd__mag_adopt(void);
/* Fork (magazine.c section 11; fork.c calls these in its whole-process order): mag_reap_lock;
 * the registry and every tc_lock; mag_id_lock and every dp_lock; their releases; in the
 * child, the marks of the records of the threads that are gone, taken over later. */
void  prd__mag_fork_prepare_reap(void);
void  prd__mag_fork_prepare_threads(void);
void  prd__mag_fork_prepare_depots(void);
void  prd__mag_fork_release_depots(void);
void  prd__mag_fork_release_threads(void);
void  prd__mag_fork_release_reap(void);
void  prd__mag_fork_child(void);
/* No file calls into fork.c (pthread_atfork calls its handlers), so a static link would leave
 * it out, and with it every fork handler.  Each file that has fork functions names its anchor
 * once (PRD__FORK_LINK();, at file scope), so that linking the file links fork.c too. */
extern const char prd__fork_anchor __attribute__((visibility("hidden")));
#define PRD__FORK_LINK() \
  __attribute__((used)) static const char *const prd__fork_link = &prd__fork_anchor
/* > 0 while this thread is inside a section that may hold a lock of the fork order: the
 * malloc family's paths into the layers below (malloc.c) and the fork handlers' own window
 * (prepare to parent or child).  A fork started there (from a signal handler) takes none of
 * the locks (fork.c section 4).  Read only by this thread, also from a signal handler: relaxed
 * accesses and signal fences, which order them against the section's lock calls. */
extern _Thread_local _Atomic unsigned prd__fork_section
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
static inline void prd__fork_section_enter(void)
{
  atomic_store_explicit(&prd__fork_section,
                        atomic_load_explicit(&prd__fork_section, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);   /* the mark before the first lock */
}
static inline void prd__fork_section_leave(void)
{
  atomic_signal_fence(memory_order_seq_cst);   /* the last unlock before the mark goes */
  atomic_store_explicit(&prd__fork_section,
                        atomic_load_explicit(&prd__fork_section, memory_order_relaxed) - 1,
                        memory_order_relaxed);
}

/* ---- debug.c: debugging of caches (Bonwick 1994 §6), out of the fast paths ------------- */
void  prd__debug_cache_init(prd_cache_t *cp);
void  prd__debug_slab_create(prd_cache_t *cp, prd_slab_t *sp);
void  prd__debug_slab_destroy(prd_cache_t *cp, prd_slab_t *sp);
/* An object leaves the cache for the user: checks and fills; NULL if its ctor failed (the
 * caller then gives the buffer back to the slab layer). */
void *prd__debug_alloc(prd_cache_t *cp, void *buf, int flags);
/* An object comes back from the user: 0 to go on freeing it, -1 when it was a bad free
 * (reported; the caller must not free it). */
int   prd__debug_free(prd_cache_t *cp, void *buf);
/* Deferred frees of debugging caches: the checks at the call (0, or -1 after a report), and
 * the free proper after the grace period. */
int   prd__debug_defer(prd_cache_t *cp, void *buf);
int   prd__debug_free_deferred(prd_cache_t *cp, void *buf);
/* Reports a bad free of buf (bcp: its bufctl when found), named a deferred free when
 * `deferral`, and calls prd__report_done. */
void  prd__debug_bad_free(prd_cache_t *cp, const void *buf, prd_bufctl_t *bcp, bool deferral);
/* True when buf (a buffer start of cp) is allocated to the user by cp's records. */
bool  prd__debug_allocated(prd_cache_t *cp, const void *buf);
/* The stray-pointer hook (cache.c sets it): for a bad free of addr, not the start of any
 * buffer of cp: the buffer of cp whose chunk holds addr (*bcpp its bufctl, large layout), or
 * NULL with owner[PRD_CACHE_NAME_MAX] the name of another cache that holds it ("" if none). */
typedef void *prd__debug_locate_fn(prd_cache_t *cp, const void *addr, prd_bufctl_t **bcpp,
                                   char *owner);
void  prd__debug_set_locate(prd__debug_locate_fn *fn);
/* One line of a report: to stderr through prd__report when fd < 0, else to fd. */
void  prd__debug_line(int fd, const char *fmt, ...) PRD_PRINTF(2, 3);
/* A report of live buffers (leaks, a cache destroyed in use): prd__debug_live_buf is the
 * walk function that prints one (age and stack when audited) into the report lc. */
typedef struct prd__debug_live {
  int lc_fd;                     /* where: stderr through prd__report when < 0 */
  uint64_t lc_now;               /* the report's time (prd__now_ns) */
  uint64_t lc_min_age_ns;        /* audited buffers younger than this are left out */
  size_t lc_listed, lc_limit, lc_seen;   /* printed, the most printed, all counted */
} prd__debug_live_t;
void  prd__debug_live_buf(void *lc, prd_cache_t *cp, void *buf, prd_bufctl_t *bcp);
/* Synchronous unmapping: the slab's pages made inaccessible, held out of the source for a
 * while; flush gives back those of a cache being destroyed. */
void  prd__debug_unmap(prd_cache_t *cp, void *base, size_t size);
void  prd__debug_unmap_flush(prd_cache_t *cp);

/* Fork: the quarantine lock (fork.c's order: after the depot locks, before vmem's). */
void  prd__debug_fork_prepare(void);
void  prd__debug_fork_release(void);
void  prd__debug_fork_child(void);   /* the releases of dead threads are forgotten */

/* ---- stats.c: printing statistics from their one list -------------------------------- */
/* One cache's statistics as "name value  # meaning" lines, or one JSON object (a line). */
void  prd__cache_stats_write(int fd, const prd_cache_stats_t *st, bool json);
/* Reads PRUDENCE_STATS_FILE and registers the at-exit printer (PRUDENCE_STATS=1, option
 * stats) and snapshot writer, once: stats.c's constructor calls it, and its readers of the
 * path before they read it. */
void  prd__stats_init(void);
/* No file calls stats.c for its at-exit triggers (its constructor arms them), so a static link
 * would leave it out.  options.c, which holds the options it acts on, names this anchor once
 * (PRD__STATS_LINK();, at file scope): linking the options links stats.c too. */
extern const char prd__stats_anchor __attribute__((visibility("hidden")));
#define PRD__STATS_LINK() \
  __attribute__((used)) static const char *const prd__stats_link = &prd__stats_anchor
/* The periodic writer: when PRUDENCE_STATS_FILE is set and stats_interval_ms has passed
 * since the last snapshot (now_ns: CLOCK_MONOTONIC), writes one.  Returns 1 when it wrote,
 * 0 when it was not due, -1 when the write failed (reported once).  stats.c's job of the
 * maintenance thread (maint.c) calls it; tests call it directly. */
int   prd__stats_periodic(uint64_t now_ns);
/* Periodic snapshots are on (PRUDENCE_STATS_FILE and stats_interval_ms > 0): the maintenance
 * thread then runs even in a single-threaded process, to take them at their interval. */
bool  prd__stats_periodic_on(void);

/* The current name of CHOICE option `name` into buf; 0, or -1 (unknown, not a choice, short
 * buf).  fix_why not NULL: the option is read for good, a later set refused (options.c §6). */
int prd__option_choice(const char *name, char *buf, size_t len, const char *fix_why);
/* The option `name` has been read for good (options.c section 6): `why` says so in the report
 * of a later prd_option_set (which fails with EBUSY for a CHOICE option). */
void prd__option_fix(const char *name, const char *why);
/* Sets `name` to `value` and fixes it (refused afterwards), in one step; src names the caller
 * in a report.  0, or -1 (unknown name, bad value). */
int prd__option_set_fixed(const char *name, const char *value, const char *src,
                          const char *why);
/* options.c: the child's option lock, which another thread may have held at the fork */
void prd__options_fork_child(void);

/* ---- defer.c: Prudence (seed 001 §4) ------------------------------------------------------ */
/* Out of memory with deferred objects waiting (Algorithm 1 lines 31-32), cache_lock not held:
 * moves the threads' latent generations to latent slabs (try-locks), polls for their grace
 * period for defer_oom_wait_ms at most (defer.c section 9: never a wait for readers) unless
 * flags say PRD_NOSLEEP (or the caller is inside a read-side section), merges what is safe.
 * True if any buffer came back. */
bool  prd__defer_oom(prd_cache_t *cp, int flags);
/* The deferral's hit path alone, for a buffer of cp that passed the ownership check: true when
 * buf went into this thread's open latent generation; false when nothing was done (a freed
 * buffer, the slow path's cases, a debugging or call_rcu cache) and the caller calls
 * prd_cache_free_deferred.  Calls nothing, takes no lock (malloc.c's prd_free_deferred, ahead
 * of its re-entry mark, as its free's hit path). */
bool  prd__defer_hit_plain(prd_cache_t *cp, void *buf);
/* Before a cache is destroyed: every thread's latent generations to the latent slabs, their
 * grace periods and the call_rcu path's callbacks waited for.  False (reported) when the
 * caller is inside a read-side section and the cache has had deferred frees: the destroy is
 * refused. */
bool  prd__defer_cache_destroy(prd_cache_t *cp);
/* After the CPU layer of a cache being destroyed is gone: deferred buffers that reached the
 * latent slabs after prd__defer_cache_destroy (a reap that held a depot's latent magazines
 * while it ran) wait for their grace period and are merged. */
void  prd__defer_cache_settle(prd_cache_t *cp);
/* Prudence's fields of a cache's statistics, after the magazine layer's (cache_lock not held). */
void  prd__defer_stats(prd_cache_t *cp, prd_cache_stats_t *st);

/* ---- latent.c: Prudence's latent slabs (seed 001 §4.1) ----------------------------------- */
/* Test hook (rcu_torture --retire prudence --broken): latent objects merge without their
 * grace-period check (prd__defer_safe, for latent.c and defer.c alike), which the torture test
 * must catch.  Set before any deferral.  Defined on latent.c's floor, the lower of the two. */
extern bool prd__defer_broken;
/* For defer.c: n deferred buffers with state gp into their slabs' latent generations
 * (returns how many were safe already and freed); merge every safe generation (returns
 * buffers merged); whether any wait, and the latest state among them. */
size_t prd__slab_defer_bulk(prd_cache_t *cp, void *const *bufs, size_t n, prd_gp_t gp);
size_t prd__slab_lat_merge_all(prd_cache_t *cp);
uint64_t prd__slab_lat_pending(prd_cache_t *cp, prd_gp_t *maxgp);

/* ---- cache.c: the object-cache front end (prd_cache_*) ------------------------------------ */
/* prd_cache_create(name, size, align) of a cache with the packed slab layout (slab.c section
 * 2: the small layout in slabs of several pages): malloc.c's size classes. */
prd_cache_t *prd__cache_create_packed(const char *name, size_t size, size_t align);
/* prd_cache_create of one of the library's own caches (PRD_CF_INTERNAL: no magazines, no
 * debugging, never destroyed, left out of leak reports): malloc.c's deferral nodes. */
prd_cache_t *prd__cache_create_internal(const char *name, size_t size, size_t align);
/* Statistics of every cache (user caches first) into out[0 .. max-1], taken under the
 * cache-list lock; returns how many caches there are (more than max: call again, larger). */
size_t prd__cache_snapshot(prd__cache_snap_t *out, size_t max);
/* Returns every free slab to the source now, ignoring the working set (the depot's magazines
 * first). */
void  prd__cache_reap_all(prd_cache_t *cp);
/* malloc_trim: every cache's magazines and free slabs back to the heap arena regardless of
 * working sets, then every free heap page decommitted; returns the bytes given back. */
size_t prd__cache_trim(void);
/* Everything cp holds free back to its source at once: every thread's magazines of cp (those
 * not inside an operation), its depot, its latent slabs' ended generations, every free slab.
 * For vmem's quantum caches when their arena runs short (vmem.c section 14).  No lock held. */
void  prd__cache_drain(prd_cache_t *cp);
/* Memory pressure (cache.c section 4's policy, as the slab layer's out-of-memory hook):
 * every cache's reclaim callback, then every free slab back to its source.  No lock held. */
void  prd__cache_reclaim(void);
/* The one holding above the caches that prd_reap and malloc_trim give back too (malloc.c's
 * kept huge blocks), called first, no lock held (cache.c section 5). */
void  prd__cache_set_reap_hook(void (*fn)(void));
/* The same holding's part of a growth reap (cache.c section 4): asked, no lock held, to give
 * back what it kept unused for a while, as the caches give their idle depots. */
void  prd__cache_set_grow_hook(void (*fn)(void));
/* The same holding's part of a leak report (prd_leak_report, after the caches' buffers):
 * lists what it holds allocated into the report (malloc.c's big blocks), counting each in
 * lc_seen. */
void  prd__cache_set_leak_hook(void (*fn)(prd__debug_live_t *lc));
/* Asked of each buffer a leak report would list, under its cache's lock: false leaves it out
 * (malloc.c: a block whose prd_free_deferred waits for its grace period). */
void  prd__cache_set_leak_filter(bool (*fn)(const void *buf));
/* After memory went back to the heap arena outside the caches (malloc.c's large blocks), no
 * lock held: asks for the maintenance thread when decay is on, none runs and the arena holds
 * more dirty free pages than a thread is worth (cache.c section 4). */
void  prd__cache_decay_nudge(void);
/* Whether buf, a buffer start of cp, is the user's as far as cp can tell without a search: a
 * cache with buffer debugging asks its records, one with the free mark tests it (free:
 * false), one with neither says true.  For callers that would read the buffer (malloc.c's
 * realloc copies it). */
bool  prd__cache_buf_allocated(prd_cache_t *cp, const void *buf);
/* Fork (fork.c's order): the reap and list locks, later every cache lock; release all. */
void  prd__cache_fork_prepare(void);
void  prd__cache_fork_prepare_caches(void);
void  prd__cache_fork_release(void);

/* ---- thread.c: the library's own threads (signals blocked, retried, never kept alive) -- */
struct prd__lthread {
  const char *lt_name;                /* its name in /proc: "prd-", at most 15 characters */
  void *(*lt_main)(void *);           /* called with NULL */
  void (*lt_wake)(void);              /* wakes it from its idle wait (no lock held) */
  _Atomic int lt_tid;                 /* the running thread's id, 0 when none */
  _Atomic bool lt_poked;              /* the last counted application thread left: look */
  _Atomic int lt_failures;            /* failed starts since the last success */
  _Atomic uint64_t lt_retry_ns;       /* a failed start: no new try before (0: none) */
  int lt_quick;                       /* quick looks left after a poke (the thread's own) */
  uint64_t lt_looked_ns;              /* its last look at /proc (the thread's own) */
};
/* Creates lt's thread detached, named, with every signal blocked: 0, or the error (the first
 * of a run of failures reported).  The caller keeps its running flag clear on failure, so
 * its next need tries again, and must not block waiting for the thread. */
int   prd__lthread_start(struct prd__lthread *lt);
/* The same from a caller that holds `held` (its thread's lock, with its start claimed under
 * it): held is dropped around pthread_create and taken again (thread.c section 2). */
int   prd__lthread_start_unlocked(struct prd__lthread *lt, pthread_mutex_t *held);
/* Marks the calling thread as inside glibc's thread bookkeeping (on) or out of it (off),
 * nested: no library thread starts while it is (thread.c section 2). */
void  prd__lthread_nostart(bool on);
/* False within PRD_LTHREAD_RETRY_NS of lt's last failed start: a need that comes with every
 * call tries again then, not at each call (thread.c section 2). */
bool  prd__lthread_may_try(const struct prd__lthread *lt);
/* The calling thread is one of the library's. */
bool  prd__lthread_self(void);
/* A thread's first magazine or RCU use, and its exit destructor: the count of application
 * threads; the last one to leave pokes every library thread (thread.c section 3). */
void  prd__lthread_app_arrive(void);
void  prd__lthread_app_leave(void);
int   prd__lthread_apps(void);
/* Whether a library thread other than `lt` runs now (its thread id recorded): the process is
 * not single-threaded then, whatever the count of application threads says. */
bool  prd__lthread_others(const struct prd__lthread *lt);
/* Whether the kernel counts more than one thread in this process now, whoever made them
 * (/proc/self/stat; false without /proc), read at most once per LT_THREADS_MS (thread.c
 * section 9). */
bool  prd__lthread_process_threaded(void);
/* Tests: the scan for live application threads behaves as without /proc (thread.c §3). */
extern bool prd__lthread_no_proc;
/* The pthread key with exit destructor dtor kept in *slot (its value plus one; 0: none yet),
 * made at the first call; false when it cannot be made now, and the next call tries again
 * (thread.c section 6). */
bool  prd__thread_key(_Atomic unsigned long *slot, void (*dtor)(void *), pthread_key_t *key);
/* The same key made when the library is loaded (a constructor of its owner), ahead of a
 * program that may take every key later; a failure is left to the first need. */
void  prd__thread_key_at_load(_Atomic unsigned long *slot, void (*dtor)(void *));
/* In every forked child (fork.c's child handler, last): forgets the library threads' ids and
 * counts this thread once if it was counted.  Stores only atomics and this thread's own
 * variables, so it is async-signal-safe (thread.c section 5). */
void  prd__lthread_fork_child(void);
/* At a library thread's idle point: true when no application thread is left (it then clears
 * its running flag and returns).  prd__lthread_poked: a look is due (a wait loop's test). */
bool  prd__lthread_idle_exit(struct prd__lthread *lt);
bool  prd__lthread_poked(struct prd__lthread *lt);
/* How long an idle library thread may sleep before it looks again, in milliseconds: long
 * while counted application threads live (the last to leave wakes it; the look is for a
 * count that stays above the truth, thread.c section 3), short while none is counted. */
long  prd__lthread_idle_ms(const struct prd__lthread *lt);
/* *ts = now + ms on `clock`, the absolute deadline of a library thread's timed wait. */
void  prd__lthread_deadline(struct timespec *ts, clockid_t clock, long ms);
/* A library thread's condition variable, whose timed waits run on CLOCK_MONOTONIC (immune to
 * the wall clock being set). */
void  prd__lthread_cond_init(pthread_cond_t *cond);
/* An idle library thread's wait on cond (mutex held, its prd__lthread_idle_exit just said
 * stay), for prd__lthread_idle_ms; cond runs on `clock`. */
void  prd__lthread_idle_wait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                             const struct prd__lthread *lt);

/* ---- maint.c: the maintenance thread and its jobs (knows nothing of caches) ----------- */
/* A job: run with no lock held at each wake-up of the thread (about a second) and at once on
 * prd__maint_wake.  `needs` (or NULL) says when the job wants the thread even while one
 * application thread runs; `asked`: that want is the program's explicit request (periodic
 * statistics), which may start the thread in a single-threaded process; any other waits
 * for a second thread of the process (maint.c section 2).  0, or -1 when the few slots are
 * taken. */
typedef void prd__maint_fn(void *arg);
int   prd__maint_register(prd__maint_fn *fn, void *arg, bool (*needs)(void), bool asked);
/* The interval job (the magazine layer's), run once every maint_interval before the jobs:
 * `trylock` when it runs inline from a slow path and must not wait for its locks; it
 * returns false when it did not run (a try-lock failed: the interval is not restarted). */
typedef bool prd__maint_tick_fn(bool trylock);
void  prd__maint_set_tick(prd__maint_tick_fn *fn);
/* On the slow paths with no lock held: starts the thread when it is needed, else (and in
 * inline mode) runs the tick and the jobs once an interval has passed. */
void  prd__maint_poke(void);
/* The same from a magazine miss, which a program with a large live set takes on most of its
 * calls: while the thread is not started and one application thread runs, it asks whether
 * the thread is needed at most once every MAINT_LOOK_MS (maint.c section 4). */
void  prd__maint_poke_miss(void);
/* Runs one interval's work (the tick, then the jobs) now: tests drive intervals with it. */
void  prd__maint_tick(void);
/* Wakes the maintenance thread now to run the registered jobs (the tick still waits for its
 * interval); no lock may be held that a job takes.  Inline mode: the work runs if an interval
 * has passed. */
void  prd__maint_wake(void);
/* Whether the maintenance thread runs now (a relaxed hint, for callers that ask for it). */
bool  prd__maint_running(void);
/* Fork (maint.c section 5): maint_lock first of the magazine layer's locks, released last;
 * in the child the thread is gone and restarts lazily. */
void  prd__maint_fork_prepare(void);
void  prd__maint_fork_release(void);
void  prd__maint_fork_child(void);
/* stats.c: the child's PRUDENCE_STATS_FILE writers' lock, which another thread may have held */
void  prd__stats_fork_child(void);

/* ---- pagemap.c: address -> owner (lookups inline in pagemap.h) ------------------------ */
/* The slot of a's granule, its leaf made if needed; NULL with no memory for a leaf. */
_Atomic uintptr_t *prd__pm_slot_make(uintptr_t a);
/* Sets every granule of [base, base + size) to v (0 clears); false, with nothing set, when a
 * leaf could not be had. */
bool  prd__pm_set_range(uintptr_t base, size_t size, uintptr_t v);
/* A slab of cp at base, size bytes, its first buffer at base + first: its entries set (false,
 * none set, when a leaf could not be had), and cleared. */
bool  prd__pm_slab_set(const prd_cache_t *cp, void *base, size_t size, size_t first);
void  prd__pm_slab_clear(void *base, size_t size);
/* Calls fn(arg, a, e) for every granule a whose entry e is not 0, in address order: for
 * reports at the end (it reads every leaf made, 2 MiB each), not for paths that run often. */
void  prd__pm_walk(void (*fn)(void *arg, uintptr_t a, uintptr_t e), void *arg);
/* Fills in cp's cache_pm_inv and cache_pm_shift from its chunk size. */
void  prd__pm_chunk_inverse(prd_cache_t *cp);
/* A cache id for cp (1 .. 65535), or 0 with ENOSPC when all are taken; given back at the
 * cache's end.  The name of the live cache with an id (NULL: none). */
uint32_t prd__pm_id_take(const prd_cache_t *cp);
void  prd__pm_id_give(uint32_t id);
const char *prd__pm_id_name(uint32_t id);
/* Tests: hand out ids up to n only (0: all of them). */
void  prd__pm_id_set_limit(uint32_t n);
/* Reports (prd__error) that `what` ("free", "deferred free") of buf for cp was refused: buf
 * is another cache's, no cache's, or inside a buffer of cp. */
void  prd__pm_bad_free(const prd_cache_t *cp, const void *buf, const char *what) PRD_COLD;

/* ---- os.c: the only file that talks to the kernel about memory ------------------------ */
size_t prd__os_page_size(void);
/* Reserve and commit `size` bytes (page multiple), read-write, zero-filled.  NULL + ENOMEM. */
void  *prd__os_map(size_t size);
/* Whether the pages of [addr, addr + size) that hold its first and last byte are mapped
 * (mincore): two system calls, for a check on a slow path (slab.c's slabs from an arena the
 * program made). */
bool   prd__os_is_mapped(const void *addr, size_t size);
/* As prd__os_map, aligned to `align` (a power of two >= the page size). */
void  *prd__os_map_aligned(size_t size, size_t align);
/* Resizes the mapping [addr, addr + old_size) to new_size (page multiples), in place or, when
 * may_move, wherever the kernel finds room (mremap): its address, or NULL + ENOMEM (the old
 * mapping unchanged).  A shrink is always in place. */
void  *prd__os_remap(void *addr, size_t old_size, size_t new_size, bool may_move);
/* Moves the mapping [from, from + old_size) onto `to`, a mapping of new_size bytes the caller
 * made with prd__os_map, growing it to new_size (mremap MREMAP_FIXED): 0, or -1 + ENOMEM with
 * the old mapping unchanged and the placeholder at `to` given back (os.c os_move_failed: the
 * kernel may have unmapped it already, and another mapping may have taken its place since,
 * which is left alone); the caller leaves its range alone either way. */
int    prd__os_move(void *from, size_t old_size, void *to, size_t new_size);
/* Reserve address space only (PROT_NONE); prd__os_commit makes part of it usable. */
void  *prd__os_reserve(size_t size, size_t align);
int    prd__os_commit(void *addr, size_t size);
/* Return memory to the kernel: the range stays mapped and reads back as zeroes. */
int    prd__os_decommit(void *addr, size_t size);
/* Pages of [addr, addr + size) (page-aligned addr) resident now (mincore); the count so far
 * where part of the range is not mapped. */
size_t prd__os_resident(const void *addr, size_t size);
/* 64 random bits for a per-process secret (os.c section 10); callers that draw more than one
 * pass different salts. */
uint64_t prd__os_random64(uint64_t salt);
/* membarrier(cmd, 0, 0), tried again for about a second while the kernel refuses it for
 * want of memory (os.c section 11): 0, or the errno of the refusal that stays. */
int      prd__os_membarrier(int cmd);
/* Registers membarrier(PRIVATE_EXPEDITED) and tries the barrier once: false (fence mode) when
 * the kernel lacks it or refuses any step (os.c section 11). */
bool     prd__os_membarrier_register(void);
void   prd__os_unmap(void *addr, size_t size);
/* Make a range inaccessible (debug: unmapped slabs, guard pages) or usable again. */
int    prd__os_protect_none(void *addr, size_t size);
int    prd__os_protect_rw(void *addr, size_t size);
int    prd__os_protect_ro(void *addr, size_t size);   /* read-only: writes fault */
/* Fault injection: every nth mapping fails (0 = off).  Also option fault_mmap. */
void   prd__os_fault_every(long n);
/* Tests: every Nth prd__os_move fails before it moves anything (ENOMEM); 0 = off. */
void   prd__os_fault_move_every(long n);
/* Tests: every Nth prd__os_unmap fails as munmap does (EINVAL, nothing unmapped); 0 = off. */
void   prd__os_fault_unmap_every(long n);
/* Bytes currently mapped through os.c, and the number of failed mappings so far. */
size_t prd__os_mapped_bytes(void);
uint64_t prd__os_map_failures(void);
/* A mutex for critical sections of a few pointer operations that many threads may contend:
 * adaptive (a bounded spin before sleeping) where the C library has it, initialized, in a
 * slot of the lock pages (os.c section 9); NULL with ENOMEM when no page could be mapped.
 * prd__os_mutex_free destroys it and gives the slot back (NULL: nothing). */
pthread_mutex_t *prd__os_mutex_new_short(void);
void   prd__os_mutex_free(pthread_mutex_t *m);
/* fork.c's prepare takes the lock pages' lock last; parent and child release it. */
void   prd__os_fork_prepare(void);
void   prd__os_fork_release(void);
/* The library's clock: CLOCK_MONOTONIC nanoseconds (os.c section 7). */
uint64_t prd__now_ns(void);
/* Cancellation (os.c section 8): no function of the library is a cancellation point, so every
 * wait, sleep and write of the library runs between these two: a thread cancelled there would
 * leave the library's locks held.  A pending request is acted on at the thread's next
 * cancellation point after the library returns. */
static inline int prd__cancel_off(void)
{
  int old = PTHREAD_CANCEL_ENABLE;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  return old;
}

static inline void prd__cancel_on(int old)
{
  int dummy;
  pthread_setcancelstate(old, &dummy);
}

/* pthread_cond_wait and pthread_cond_timedwait with cancellation off: every wait of the
 * library on a condition variable is one of these. */
static inline void prd__cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex)
{
  int old = prd__cancel_off();
  pthread_cond_wait(cond, mutex);
  prd__cancel_on(old);
}

static inline int prd__cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex,
                                      const struct timespec *ts)
{
  int old = prd__cancel_off();
  int rc = pthread_cond_timedwait(cond, mutex, ts);
  prd__cancel_on(old);
  return rc;
}

/* ---- vmem.c: resource arenas ------------------------------------------------------------ */
/* The arena's name and quantum (for the reports and the slab layer above). */
const char *prd__vmem_name(const prd_vmem_t *vmp);
size_t prd__vmem_quantum(const prd_vmem_t *vmp);
/* The largest size the arena's quantum caches serve (object caches, which the leak report and
 * the statistics see as caches), 0 when it has none. */
size_t prd__vmem_qcache_limit(const prd_vmem_t *vmp);
/* prd_vmem_alloc (align 0) or prd_vmem_xalloc with only an alignment, and *clean: whether the
 * range came from a clean segment (vmem.c section 16: mapped or decommitted since its last
 * use, so an arena of memory that decommits reads it as zeroes); false for a quantum
 * cache's object. */
void  *prd__vmem_alloc_clean(prd_vmem_t *vmp, size_t size, size_t align, int vmflags,
                             bool *clean);
/* addr starts a segment of a quantum-cached size that the arena served itself (section 14:
 * its caches were not made yet, or could not be), so no quantum cache lists it. */
bool  prd__vmem_qdirect(prd_vmem_t *vmp, const void *addr);
/* Checks every invariant of the arena (theory statement, section 9) under its lock; reports
 * each broken one through prd__report and returns how many were found (0: consistent). */
int prd__vmem_check(prd_vmem_t *vmp);
/* Decay (vmem.c section 16): a pass over an arena, the heap arena's pass, dirty free bytes;
 * between prd__vmem_heap_reuse(true) and (false) (cache.c's growth reap) the calling thread's
 * frees to the heap arena are kept dirty for the growing caches to reuse. */
size_t prd__vmem_decay(prd_vmem_t *vmp, bool all);
size_t prd__vmem_dirty(prd_vmem_t *vmp);
size_t prd__vmem_heap_decay(bool all);
size_t prd__vmem_heap_dirty(void);
void prd__vmem_heap_reuse(bool on);
/* Between prd__vmem_purge_hold and its release (nested: the outermost release counts) the
 * calling thread's frees that leave an arena above its dirty bound do not purge each; the
 * release purges once, after every free of the run has coalesced with its neighbours
 * (vmem.c section 16).  Takes no lock itself: call the release with none held. */
void prd__vmem_purge_hold(void);
void prd__vmem_purge_release(void);
/* Writes the arena's statistics to fd as one line of text or one JSON object, both from the
 * list PRD_VMEM_STATS. */
void prd__vmem_stats_write(prd_vmem_t *vmp, int fd, bool json);
/* Statistics of every arena (oldest first) into out[0 .. max-1], under the arena-list lock;
 * returns how many arenas there are (more than max: call again with more room). */
size_t prd__vmem_snapshot(prd__arena_snap_t *out, size_t max);
/* Fork: every arena's lock (and the heap's creation lock) taken / released; the child also
 * resets the condition variables whose waiters did not survive. */
void prd__vmem_fork_prepare_early(void);
void prd__vmem_fork_prepare(void);
void prd__vmem_fork_parent(void);
void prd__vmem_fork_child(void);

/* ---- rcu.c: grace periods (the public part is in prudence.h / prudence_rcu.h) ----------- */
/* The grace-period sequence (rcu.c §4): even idle, odd while a grace period runs. */
struct prd__rcu_gp_state {
  _Alignas(64) _Atomic uint64_t gs_seq;
  /* Nonzero while grace periods run without (W1) (rcu.c §3, the counted grace period): a
   * retirer then runs a full fence between its unlink and its load of gs_seq.  On gs_seq's
   * line, which every deferral loads anyway. */
  _Atomic int gs_retire_fence;
  /* Nonzero once the process's source is not the built-in one (rcu.c §6): this library does
   * not see its readers.  Written before the source is published, never changed after; read
   * relaxed.  A deferral that read it as set leaves the buffer's mark to the generation's
   * seal (defer.c section 3), which reads it as set too: the same thread's later load, or a
   * visitor's, ordered after that deferral by the handshake (read-read coherence). */
  _Atomic int gs_external;
  char gs_pad[64 - sizeof(uint64_t) - 2 * sizeof(int)];
};
extern struct prd__rcu_gp_state prd__rcu_gp __attribute__((visibility("hidden")));
/* prd_rcu_poll_state inline, for the allocator's fast paths: one acquire load (it pairs with
 * the release store that ends a grace period). */
static inline bool prd__rcu_poll(prd_gp_t s)
{
  return atomic_load_explicit(&prd__rcu_gp.gs_seq, memory_order_acquire) >= s;
}
/* prd_rcu_get_state inline, for the deferral paths (rcu.c §4): the end of the next grace period
 * that starts after the call, for a caller that has just made the reader barrier or one
 * at least as strong (the deferral hit path's handshake: a full fence, or a compiler barrier
 * when the readers need no fences, magazine.h prd__mag_defer_light). */
static inline prd_gp_t prd__rcu_get_state_fenced(void)
{
  return (atomic_load_explicit(&prd__rcu_gp.gs_seq, memory_order_acquire) + 3) &
         ~(uint64_t)1;
}
/* True once the source is an external one (gs_external): relaxed, a flag set once. */
static inline bool prd__rcu_source_external(void)
{
  return atomic_load_explicit(&prd__rcu_gp.gs_external, memory_order_relaxed) != 0;
}
/* True while retirers must fence (gs_retire_fence): loaded before the barrier it chooses. */
static inline bool prd__rcu_retire_fenced(void)
{
  /* the caller's unlink stays before this load in program order (rcu.c §3: a retirer that
   * loaded the flag as 0 did so after its unlink), even when inlined into the caller */
  atomic_signal_fence(memory_order_seq_cst);
  return atomic_load_explicit(&prd__rcu_gp.gs_retire_fence, memory_order_relaxed) != 0;
}
/* The same with the retirer's barrier first: the reader barrier (R1 kind: the caller's unlink
 * before the load, paired with (W1)), or a full fence while grace periods run without (W1). */
static inline prd_gp_t prd__rcu_get_state(void)
{
  if (prd_unlikely(prd__rcu_retire_fenced()))
    prd__rcu_full_fence();
  else
    prd__rcu_reader_barrier();
  return prd__rcu_get_state_fenced();
}
/* Prudence (latent.c, defer.c): has the grace period of state s ended?  Every latent merge
 * asks this. */
static inline bool prd__defer_safe(prd_gp_t s)
{
  return prd__rcu_poll(s) || prd_unlikely(prd__defer_broken);
}
/* The allocator's bounded wait (rcu.c §9): state s within ns nanoseconds at most, the
 * built-in grace period's steps run on the calling thread while gp_lock is free (each wait for
 * readers stopping at the deadline, the rest left to the driver), else requested expedited and
 * polled; true when it was reached.  Never changes the caller's RCU state (no offline, no
 * quiescent state): allocations call this, never prd_rcu_wait_state or prd_synchronize_rcu. */
bool prd__rcu_poll_bounded(prd_gp_t s, uint64_t ns);
/* A retirer's step of the built-in grace period for state s, never a wait (rcu.c §9): while
 * readers run sections and grace periods need no membarrier, and gp_lock is free, the flip
 * when none is in progress and one scan of the readers; true when s has been reached.  False
 * at once otherwise (another source, the caller inside a section, a membarrier to make):
 * the caller then asks the driver. */
bool prd__rcu_advance_try(prd_gp_t s);
/* prd_rcu_request_gp for the allocator's own requests: it does not end a fork child's hold
 * (rcu.c §7), as the public one, the program's, does. */
void prd__rcu_request_gp(prd_gp_t s);
/* prd_rcu_request_gp, and no pacing until state s is reached (memory pressure). */
void prd__rcu_request_expedited(prd_gp_t s);
/* A fork child whose grace-period source is not the built-in one runs none of its grace
 * periods until it uses RCU itself (rcu.c §7): held says so, release ends it (the child's
 * own deferral, call_rcu, request, synchronize, wait, barrier or thread registration calls
 * it).  No lock of the library held when it is called. */
bool prd__rcu_fork_held(void);
void prd__rcu_fork_release(void);
/* Blocks until state s, through the driver (or running grace periods on the calling thread
 * when no driver can be started), with no misuse checks and no rs_block_begin/end: the
 * call_rcu worker's wait (call_rcu.c §3), on a thread that is no reader of any source. */
void prd__rcu_wait_raw(prd_gp_t s);
/* A blocking call made inside a read-side section (the built-in one, or the source's
 * rs_read_ongoing): reported as `what` "called inside a read-side critical section", true. */
bool prd__rcu_in_read_section(const struct prd_rcu_source *src, const char *what);
/* Fork (§7; called by fork.c's atfork handlers, in the order of its section 2):
 * prepare_gp takes gp_lock and reg_lock, prepare drv_lock and src_lock; parent releases the
 * last two, parent_gp the first two; child re-initializes them and forgets the threads that
 * did not survive the fork. */
void prd__rcu_fork_prepare_gp(void);
void prd__rcu_fork_prepare(void);
void prd__rcu_fork_parent(void);
void prd__rcu_fork_parent_gp(void);
void prd__rcu_fork_child(void);

/* ---- call_rcu.c: callbacks after a grace period (prd_call_rcu, prd_rcu_barrier) -------- */
/* Callbacks the call_rcu worker has invoked so far (tests, benchmarks). */
uint64_t prd__call_rcu_invoked(void);
/* Whether this thread is running RCU callbacks (the worker, or a barrier in its place), where
 * prd_rcu_barrier would wait for itself (§5). */
bool prd__call_rcu_in_callback(void);
/* Fork (call_rcu.c §7; called by fork.c's atfork handlers, after rcu.c's prepare functions):
 * prepare takes wrk_lock and cbq_lock, parent releases them; child re-initializes them,
 * orphans the callbacks of the threads that did not survive the fork and forgets the worker. */
void prd__call_rcu_fork_prepare(void);
void prd__call_rcu_fork_parent(void);
void prd__call_rcu_fork_child(void);

/* ---- malloc.c: the malloc family, size classes, the page map ------------------------- */
/* The class cache that serves `size`, made if the class had none yet (NULL above the
 * largest class, or when it could not be made). */
prd_cache_t *prd__malloc_class_cache(size_t size);
/* The magazine id prd_malloc's hit path looks up for `size` (0: it misses; section 8). */
uint32_t prd__malloc_hit_id(size_t size);
/* The size of class i (0 past the last): tests walk the table with it. */
size_t prd__malloc_class_size(unsigned i);
/* The page-map entry of p's granule (0: not ours). */
uintptr_t prd__malloc_pm_entry(const void *p);
/* The class cache named by p's page-map entry (NULL: not a class slab's granule). */
prd_cache_t *prd__malloc_pm_cache(const void *p);
/* Bytes of freed huge blocks kept for reuse now (malloc.c section 1b). */
size_t prd__malloc_huge_cached(void);
/* Unmaps every kept huge block now; errno is kept. */
void prd__malloc_huge_trim(void);
/* Fork (fork.c's order: the first of the allocator's locks, after rcu's queue locks):
 * malloc_init_lock and the huge-block cache's lock taken / released (in the parent and in
 * the child). */
void prd__malloc_fork_prepare(void);
void prd__malloc_fork_release(void);

#endif
