/*
 * prudence.h: the public interface of libprudence.
 *
 * libprudence is a layered user-space allocator: an OS page layer, vmem resource arenas,
 * slab object caches, a per-thread magazine layer, a grace-period (RCU) layer, and on top
 * Prudence, which makes RCU-deferred frees visible to the allocator.  Every type is opaque;
 * every public name starts with prd_.  docs/api.md says what each function does with bad input.
 */
#ifndef PRUDENCE_H
#define PRUDENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PRD_API __attribute__((visibility("default")))
#else
#define PRD_API
#endif

/* The release (CMake's project version; tests/install checks that pkg-config says the same) */
#define PRD_VERSION_MAJOR 0
#define PRD_VERSION_MINOR 2
#define PRD_VERSION_PATCH 0

/* ------------------------------------------------------------------------------------------
 * Allocation flags, shared by every layer so that a caller's flags pass straight down.
 * ------------------------------------------------------------------------------------------ */
#define PRD_SLEEP    0x0000  /* default: try everything (reap, reclaim, wait) before failing */
#define PRD_NOSLEEP  0x0001  /* fail at once rather than wait */
#define PRD_NOFAIL   0x0002  /* never return NULL: retry through the nofail callback */

/* ------------------------------------------------------------------------------------------
 * vmem: resource arenas (src/vmem.c; Bonwick & Adams 2001, see shared/VMEM.md)
 * ------------------------------------------------------------------------------------------ */
typedef struct prd_vmem prd_vmem_t;
typedef void *prd_vmem_alloc_fn(prd_vmem_t *src, size_t size, int vmflags);
typedef void  prd_vmem_free_fn(prd_vmem_t *src, void *addr, size_t size);

/* vmflags: one of SLEEP/NOSLEEP, combined with at most one policy (instant-fit if none). */
#define PRD_VM_SLEEP       PRD_SLEEP    /* wait until a free makes room (woken by frees) */
#define PRD_VM_NOSLEEP     PRD_NOSLEEP  /* fail at once with errno ENOMEM */
#define PRD_VM_INSTANTFIT  0x0100       /* constant time: first segment of a list that surely fits */
#define PRD_VM_BESTFIT     0x0200       /* smallest free segment that fits */
#define PRD_VM_FIRSTFIT    0x0400       /* lowest-addressed free segment that fits */
#define PRD_VM_NEXTFIT     0x0800       /* first fit after the previous allocation (a rotor) */
#define PRD_VM_POLICY_MASK 0x0f00

/* typemask for prd_vmem_size / prd_vmem_walk */
#define PRD_VMEM_ALLOC 0x1
#define PRD_VMEM_FREE  0x2

PRD_API prd_vmem_t *prd_vmem_create(const char *name, void *base, size_t size, size_t quantum,
                                    prd_vmem_alloc_fn *afunc, prd_vmem_free_fn *ffunc,
                                    prd_vmem_t *source, size_t qcache_max, int vmflags);
PRD_API void   prd_vmem_destroy(prd_vmem_t *vmp);
PRD_API void  *prd_vmem_alloc(prd_vmem_t *vmp, size_t size, int vmflags);
PRD_API void   prd_vmem_free(prd_vmem_t *vmp, void *addr, size_t size);
PRD_API void  *prd_vmem_xalloc(prd_vmem_t *vmp, size_t size, size_t align, size_t phase,
                               size_t nocross, void *minaddr, void *maxaddr, int vmflags);
PRD_API void   prd_vmem_xfree(prd_vmem_t *vmp, void *addr, size_t size);
PRD_API void  *prd_vmem_add(prd_vmem_t *vmp, void *addr, size_t size, int vmflags);
PRD_API size_t prd_vmem_size(prd_vmem_t *vmp, int typemask);
PRD_API void   prd_vmem_walk(prd_vmem_t *vmp, int typemask,
                             void (*fn)(void *arg, void *addr, size_t size), void *arg);
PRD_API prd_vmem_t *prd_heap_arena(void);

/* Per-arena statistics, versioned.  One X-macro list generates the fields, and every printer
 * (prd-bench, tests) walks the same list, so the names never drift:
 *   X(field, meaning) */
#define PRD_VMEM_STATS(X)                                                                   \
  X(bytes_total,    "integers (bytes for memory) in all spans")                             \
  X(bytes_alloc,    "integers allocated")                                                   \
  X(bytes_free,     "integers free")                                                        \
  X(bytes_imported, "integers in spans imported from the source")                           \
  X(allocs,         "successful allocations (alloc and xalloc)")                            \
  X(frees,          "successful frees")                                                     \
  X(failures,       "allocations that failed for lack of resource (ENOMEM)")                \
  X(imports,        "spans imported from the source")                                       \
  X(releases,       "imported spans given back to the source")                              \
  X(waits,          "times a PRD_VM_SLEEP allocation waited")                               \
  X(bad_frees,      "bad frees reported (never allocated, wrong size, twice, mispaired)")   \
  X(segs_alloc,     "allocated segments now")                                               \
  X(segs_free,      "free segments now")                                                    \
  X(spans,          "spans now")                                                            \
  X(decommits,      "free segments decommitted (decay passes, the dirty bound, reaps)")     \
  X(purges,         "frees that found the dirty free bytes above their bound (vmem.c 16)")

#define PRD_VMEM_STATS_VERSION 2
typedef struct prd_vmem_stats_s {
  size_t   size;     /* set by the caller to sizeof(prd_vmem_stats_t); nothing past it is written */
  uint32_t version;  /* set by prd_vmem_stats to PRD_VMEM_STATS_VERSION */
#define PRD__VMEM_STAT_FIELD(name, doc) uint64_t name;
  PRD_VMEM_STATS(PRD__VMEM_STAT_FIELD)
#undef PRD__VMEM_STAT_FIELD
} prd_vmem_stats_t;
/* Fills *st (up to st->size bytes) with a consistent snapshot of the arena's statistics.
 * Returns 0, or -1 with errno EINVAL (NULL arguments, st->size too small for the header). */
PRD_API int prd_vmem_stats(prd_vmem_t *vmp, prd_vmem_stats_t *st);

/* ------------------------------------------------------------------------------------------
 * Object caches: the slab layer (src/slab.c; Bonwick 1994, seed 002)
 * ------------------------------------------------------------------------------------------ */
typedef struct prd_cache prd_cache_t;
/* Constructor: puts a buffer into its constructed state; 0 ok, -1 failed (allowed only when
 * flags has PRD_NOSLEEP: the allocation then fails cleanly).  Runs once per object entering
 * the cache, never under a cache lock. */
typedef int  prd_ctor_fn(void *buf, void *priv, int flags);
/* Destructor: undoes the constructor when the object leaves the cache (its slab is freed). */
typedef void prd_dtor_fn(void *buf, void *priv);
/* Reclaim callback: the allocator is short of memory; give back what you can. */
typedef void prd_reclaim_fn(void *priv);

/* cflags of prd_cache_create.  The debug bits are the same as the names of PRUDENCE_DEBUG
 * (patterns,redzone,verify,audit,unmap,pagebuf,leaks or all), which sets them for every cache
 * created after it is read (at start-up) unless the cache says PRD_CACHE_NODEBUG. */
#define PRD_CACHE_NOTOUCH   0x0001  /* objects are not memory (integer ranges): never touched */
#define PRD_CACHE_NODEBUG   0x0002  /* ignore the process-wide PRUDENCE_DEBUG flags */
#define PRD_CACHE_NOMAGAZINE 0x0004 /* no per-thread magazines: every call takes the slab layer */
#define PRD_CACHE_PATTERNS  0x0010  /* freed 0xdeadbeef checked on alloc, then 0xbaddcafe */
#define PRD_CACHE_REDZONE   0x0020  /* a 0xfeedface guard after each buffer, checked on free */
#define PRD_CACHE_VERIFY    0x0040  /* every free is checked to be an allocated buffer here */
#define PRD_CACHE_AUDIT     0x0080  /* per-buffer transaction log: thread, time, stack */
#define PRD_CACHE_UNMAP     0x0100  /* free slabs destroyed at once, their pages inaccessible */
#define PRD_CACHE_PAGEBUF   0x0200  /* each buffer on its own page(s) before a guard page */
#define PRD_CACHE_LEAKS     0x0400  /* leak report at exit (implies AUDIT) */
#define PRD_CACHE_DEBUG_ALL 0x07f0
#define PRD_CACHE_OBLIVIOUS 0x0800  /* deferred frees go through prd_call_rcu() and a callback
                                       that calls prd_cache_free(): the allocator does not see
                                       them (the SLUB + call_rcu baseline of seed 001 §5) */

PRD_API prd_cache_t *prd_cache_create(const char *name, size_t size, size_t align,
                                      prd_ctor_fn *ctor, prd_dtor_fn *dtor,
                                      prd_reclaim_fn *reclaim, void *priv, prd_vmem_t *source,
                                      int cflags);
PRD_API void *prd_cache_alloc(prd_cache_t *cp, int flags);
PRD_API void  prd_cache_free(prd_cache_t *cp, void *buf);
PRD_API void  prd_cache_destroy(prd_cache_t *cp);
/* The process's one cache of size-byte objects aligned to align, named "prd::node<SIZE,ALIGN>",
 * made on first use and never destroyed (do not destroy it): the same cache for every caller
 * and every shared library, so a buffer taken in one may be freed in another, at any time up
 * to the process's end.  Thread-safe.  prudence.hpp's prd::cache_allocator takes its nodes
 * here.  Bad arguments (as prd_cache_create's) or no memory: NULL. */
PRD_API prd_cache_t *prd_node_cache(size_t size, size_t align);
/* Prudence (seed 001 §4): frees buf after a grace period, as call_rcu(free) would, but the
 * allocator sees it: it is reused as soon as the grace period has ended.  Callable anywhere,
 * inside read-side sections too; never blocks on a grace period.  Bad input is reported
 * (NULL cache; a pointer that is not a buffer of cp is found at the call in every build, and
 * not deferred; a freed buffer too, in a cache with the free mark; docs/api.md). */
PRD_API void  prd_cache_free_deferred(prd_cache_t *cp, void *buf);
/* Gives back to the source arena the free slabs that stayed free for a whole working-set
 * interval (option slab_working_set, default 15 s). */
PRD_API void  prd_cache_reap(prd_cache_t *cp);
/* prd_cache_reap for every cache, after taking back the magazines parked in the caches of
 * other threads (those not inside an allocation this instant): their objects go back to the
 * slab layer.  The depot keeps the magazines of its working set (option maint_interval). */
PRD_API void  prd_reap(void);
/* Hands the calling thread's magazines of every cache to the depots (full and empty ones as
 * they are, the rounds of partly filled ones to the slab layer).  Thread exit does the same. */
PRD_API void  prd_thread_flush(void);

/* PRD_NOFAIL: when an allocation cannot be satisfied even after reaping every cache and
 * calling the reclaim callbacks, the callback decides: return PRD_NOFAIL_RETRY to try again,
 * or PRD_NOFAIL_EXIT(status) to end the process with exit(status) (called once, as libumem).
 * Without a callback the process exits with status 255 after a report. */
#define PRD_NOFAIL_RETRY        0
#define PRD_NOFAIL_EXIT(status) (0x100 | ((status) & 0xff))
PRD_API void  prd_set_nofail_callback(int (*cb)(void));

/* Leak detection: lists, on fp, every buffer of every cache still allocated and allocated at
 * least older_than_seconds ago (ages and stacks need auditing; without it every allocated
 * buffer is listed, age unknown).  Returns the number listed.  PRUDENCE_DEBUG=leaks runs it
 * at exit with older_than_seconds = 0, from the library's destructor: after the program's
 * atexit handlers and destructors. */
PRD_API size_t prd_leak_report(FILE *fp, double older_than_seconds);

/* Statistics of one cache, versioned: the caller sets st->size = sizeof(*st) and
 * st->version = PRD_CACHE_STATS_VERSION (PRD_CACHE_STATS_INIT does both); the library fills
 * the fields that both sides know.  The fields come from one list, so that every printer and
 * the JSON writer stay in step with the struct.  Later layers append fields. */
#define PRD_CACHE_STATS_VERSION 2
#define PRD_CACHE_NAME_MAX 32
/* X(kind, name, meaning); kind STR (char[PRD_CACHE_NAME_MAX]), U64, F64 */
#define PRD_CACHE_STATS_FIELDS(X)                                                               \
  X(STR, name, "cache name")                                                                    \
  X(U64, buf_size, "object size asked for (bytes)")                                             \
  X(U64, align, "buffer alignment (bytes)")                                                     \
  X(U64, chunk_size, "bytes one buffer takes in a slab (rounding, linkage word, debug tag)")     \
  X(U64, slab_size, "bytes per slab, from the source arena")                                    \
  X(U64, bufs_per_slab, "buffers per slab")                                                     \
  X(U64, color_max, "largest color offset (bytes): the unused tail that coloring cycles over")  \
  X(F64, tail_waste, "unused tail of a slab / slab size (internal fragmentation, under 1/8)")   \
  X(U64, large_layout, "1: external slab and bufctl structures and a hash table; 0: in-slab")   \
  X(U64, allocs, "buffers the slab layer handed out, refills too (the calls: mag_allocs)")     \
  X(U64, frees, "buffers given back to the slab layer, flushes too (the calls: mag_frees)") \
  X(U64, alloc_fails, "allocations that returned NULL")                                         \
  X(U64, slab_creates, "slabs created (cache grows)")                                           \
  X(U64, slab_destroys, "slabs destroyed (cache shrinks)")                                      \
  X(U64, slab_churns, "grow/shrink pairs (seed 001 5.4): each shrink pairs an earlier grow")   \
  X(U64, slabs_full, "slabs with every buffer allocated")                                       \
  X(U64, slabs_partial, "slabs with some buffers allocated, and threads' current slabs")        \
  X(U64, slabs_free, "slabs with no buffer allocated (kept for the working set)")               \
  X(U64, slabs_peak, "most slabs the cache held at once")                                       \
  X(U64, bufs_inuse, "buffers allocated now")                                                   \
  X(U64, bufs_total, "buffers in all slabs")                                                    \
  X(U64, hash_buckets, "buffer-to-bufctl hash buckets (large layout), else 0")                  \
  X(F64, total_frag,                                                                            \
    "f_t = slabs * slab_size / (bufs_inuse * buf_size) (seed 001 4.2); 0 when none in use")     \
  X(U64, slab_bytes, "bytes of slabs the cache holds now (slabs * slab_size)")                 \
  X(U64, deferred_frees, "prd_cache_free_deferred calls (seed 001 5.4, Fig. 12); of an "      \
                         "OBLIVIOUS cache's, those whose callback ran")                        \
  X(U64, oc_hits, "allocations served by the object cache (magazines) without a refill (Fig. 7)") \
  X(U64, oc_misses, "allocations that found the object cache empty and reached the slab layer") \
  X(F64, oc_hit_pct, "oc_hits / (oc_hits + oc_misses) * 100 (seed 001 Fig. 7)")               \
  X(U64, oc_refills, "object-cache refills from the slab layer")                              \
  X(U64, oc_flushes, "object-cache flushes to the slab layer")                                \
  X(U64, oc_churns, "refill/flush pairs (seed 001 Fig. 8): min(refills, flushes)")            \
  X(U64, oc_objs, "safe objects in Prudence object caches now")                                \
  X(U64, oc_resizes, "object/latent cache growths: a grace period outlasted what they held")  \
  X(U64, latent_cache_objs, "deferred objects in latent caches now")                          \
  X(U64, latent_slab_objs, "deferred objects in latent slabs now")                            \
  X(U64, latent_depot_objs, "deferred objects in latent magazines parked in the depot now")   \
  X(U64, latent_depot_moves, "deferred objects handed to the depot in whole latent magazines") \
  X(U64, latent_merges, "deferred objects merged back after their grace period (cache and slab)") \
  X(U64, partial_refills, "refills that took fewer than a full object cache (line 14)")      \
  X(U64, preflush_moves, "latent objects pre-flushed to latent slabs (lines 41-43)")          \
  X(U64, slab_premoves, "slabs moved ahead of time at deferral (lines 52-57)")               \
  X(U64, frag_skips, "refill choices that passed over a mostly deferred slab (Fig. 5)")       \
  X(U64, oom_gp_waits, "bounded polls for a grace period instead of failing (lines 31-32)") \
  X(U64, latent_cap_waits,                                                                      \
    "refills that polled for a grace period past defer_latent_max_kb of latent-slab objects (3.4)") \
  X(U64, mag_size, "rounds per new magazine now (0: no magazine layer)")                        \
  X(U64, mag_allocs, "allocations through the magazine layer (hits and depot visits)")         \
  X(U64, mag_frees, "frees through the magazine layer (hits and depot visits)")                 \
  X(U64, mag_resizes, "magazine size changes (depot contention, seed 004; latent growth and its step down)")                   \
  X(U64, mag_alloc_hits, "allocations served by a thread's loaded or previous magazine")        \
  X(U64, mag_free_hits, "frees taken by a thread's loaded or previous magazine")                \
  X(U64, depot_full_gets, "full magazines taken from the depot")                                \
  X(U64, depot_full_puts, "full magazines given to the depot")                                  \
  X(U64, depot_empty_gets, "empty magazines taken from the depot")                              \
  X(U64, depot_empty_puts, "empty magazines given to the depot")                                \
  X(U64, depot_contention, "depot lock try-locks that failed")                                  \
  X(U64, depot_full_mags, "full magazines in the depot now")                                    \
  X(U64, depot_empty_mags, "empty magazines in the depot now")                                  \
  X(U64, depot_rounds, "objects in the depot's full magazines now")                             \
  X(U64, thread_cache_objs, "objects in threads' loaded and previous magazines now")            \
  X(U64, mag_slab_allocs, "allocations the magazine layer passed to the slab layer")            \
  X(U64, mag_slab_frees, "frees the magazine layer passed to the slab layer (no empty magazine)") \
  X(F64, cpu_alloc_miss_rate, "allocs that needed the depot / allocs (seed 003 4.4)")           \
  X(F64, cpu_free_miss_rate, "frees that needed the depot / frees (seed 003 4.4)")              \
  X(F64, depot_alloc_miss_rate, "depot alloc visits with no full magazine / visits")            \
  X(F64, depot_free_miss_rate, "depot free visits with no empty magazine / visits")           \
  X(U64, depot_gp_waits,                                                                        \
    "allocation misses that polled for the depot's oldest latent magazine (defer_depot_kb, 3.4)") \
  X(U64, gp_waits, "inline grace-period polls: latent_cap_waits + oom_gp_waits + depot_gp_waits") \
  X(U64, slab_refills, "object-cache refills from the slab layer, every mode (Fig. 8)")       \
  X(U64, slab_flushes, "object-cache flushes of buffers to the slab layer, every mode (Fig. 8)") \
  X(U64, slab_oc_churns, "refill/flush pairs with the slab layer: min(slab_refills, slab_flushes)")

#define PRD__CS_STR(n) char n[PRD_CACHE_NAME_MAX]
#define PRD__CS_U64(n) uint64_t n
#define PRD__CS_F64(n) double n
#define PRD__CS_FIELD(kind, n, doc) PRD__CS_##kind(n);
typedef struct prd_cache_stats_s {
  size_t size;        /* sizeof the caller's struct */
  uint32_t version;   /* PRD_CACHE_STATS_VERSION the caller was built with */
  PRD_CACHE_STATS_FIELDS(PRD__CS_FIELD)
} prd_cache_stats_t;
#ifdef __cplusplus
/* C++ has designated initializers only from C++20 and warns of the fields they leave out
 * (-Wmissing-field-initializers): a zeroed struct with the same two fields set. */
#define PRD_CACHE_STATS_INIT                                                                    \
  ([] {                                                                                         \
    prd_cache_stats_t prd__st{};                                                                \
    prd__st.size = sizeof(prd_cache_stats_t);                                                   \
    prd__st.version = PRD_CACHE_STATS_VERSION;                                                  \
    return prd__st;                                                                             \
  }())
#else
#define PRD_CACHE_STATS_INIT                                                                    \
  { .size = sizeof(prd_cache_stats_t), .version = PRD_CACHE_STATS_VERSION }
#endif
/* Fills *st; 0, or -1 with errno EINVAL (NULL cache or st, size too small, unknown version). */
PRD_API int prd_cache_stats(prd_cache_t *cp, prd_cache_stats_t *st);

/* ------------------------------------------------------------------------------------------
 * RCU: grace periods and their state (src/rcu.c, call_rcu: src/call_rcu.c; seed 001 §2.1-2.2, §4)
 * ------------------------------------------------------------------------------------------ */
/* readers: the built-in RCU's read side is inline (prudence_rcu.h).  Threads register on first
 * use and unregister at exit; with a liburcu source, read sections are the flavour's own
 * rcu_read_lock()/rcu_read_unlock() and register/quiescent/offline/online forward to it. */
static inline void prd_rcu_read_lock(void);    /* nestable, wait-free, no atomic RMW */
static inline void prd_rcu_read_unlock(void);
PRD_API void prd_rcu_register_thread(void);     /* optional: threads register on first use */
PRD_API void prd_rcu_unregister_thread(void);   /* also done at thread exit */
PRD_API void prd_rcu_quiescent_state(void);     /* QSBR mode */
PRD_API void prd_rcu_thread_offline(void);
PRD_API void prd_rcu_thread_online(void);

/* writers */
PRD_API void prd_synchronize_rcu(void);
struct prd_rcu_head {
  struct prd_rcu_head *next;
  void (*func)(struct prd_rcu_head *);
};
PRD_API void prd_call_rcu(struct prd_rcu_head *head, void (*func)(struct prd_rcu_head *));
PRD_API void prd_rcu_barrier(void);

/* grace-period state, for the allocator and for users (Linux get_state_synchronize_rcu /
 * poll_state_synchronize_rcu).  A prd_gp_t is a 64-bit grace-period sequence: it never wraps
 * in practice (2^63 grace periods at one per microsecond take 292,000 years). */
typedef uint64_t prd_gp_t;
PRD_API prd_gp_t prd_rcu_get_state(void);        /* the grace period that must end for something retired now */
PRD_API bool     prd_rcu_poll_state(prd_gp_t s); /* has it ended? a single load in the common case */
PRD_API void     prd_rcu_request_gp(prd_gp_t s); /* ask the driver to make it end soon (async) */
PRD_API void     prd_rcu_wait_state(prd_gp_t s); /* block until it has ended */

/* Grace-period statistics of the process, versioned as prd_vmem_stats_t: counted on the
 * slow paths only (a request that raises the requested state, a grace period's start and
 * end, a wait), never on a read-side section, a poll or a request already made.
 * gp_requests does not count prd_synchronize_rcu, which runs its grace periods itself, nor
 * the grace periods an allocation's bounded wait or the retirer's step runs on its own
 * thread, so gp_completed may exceed it.  membarriers counts each membarrier call of a grace
 * period (none in fence mode): with the built-in source on x86-64, its (W1), except in the
 * grace periods counted in gp_fenced, and one more in one held for 4 scans by readers idle
 * since an older flip; with the built-in source elsewhere, (W1), (W1b) and, off x86, (W2);
 * with a liburcu source, (W1) only (docs/api.md, prd_rcu_stats).
 *   X(field, meaning) */
#define PRD_RCU_STATS(X)                                                                    \
  X(gp_requests,     "requests that raised the requested state (request_gp, expedited, waits; " \
                     "not prd_synchronize_rcu)")                                            \
  X(gp_expedited,    "requests that raised the expedited state (no pacing until reached)")  \
  X(gp_completed,    "grace periods completed")                                             \
  X(gp_by_driver,    "of which the driver thread ran (the rest: callers, inline)")          \
  X(gp_ns,           "nanoseconds from the start to the end of the completed grace periods") \
  X(gp_syncs,        "prd_synchronize_rcu calls that found their state not reached")       \
  X(gp_blocking_waits, "blocking waits (prd_rcu_wait_state, call_rcu, cache destroy)")      \
  X(gp_inline_waits, "the allocator's bounded waits (rcu.c 9) that found the state not reached") \
  X(gp_inline_timeouts, "of which ran out before the grace period ended")                   \
  X(membarriers,     "membarrier(PRIVATE_EXPEDITED) calls of the grace periods (rcu.c 3)")  \
  X(gp_fenced,       "of the completed, built-in ones without (W1): retirers fenced (rcu.c 3)")

#define PRD_RCU_STATS_VERSION 2
typedef struct prd_rcu_stats_s {
  size_t   size;     /* set by the caller to sizeof(prd_rcu_stats_t); nothing past it is written */
  uint32_t version;  /* set by prd_rcu_stats to PRD_RCU_STATS_VERSION */
#define PRD__RCU_STAT_FIELD(name, doc) uint64_t name;
  PRD_RCU_STATS(PRD__RCU_STAT_FIELD)
#undef PRD__RCU_STAT_FIELD
} prd_rcu_stats_t;
/* Fills *st (up to st->size bytes) with the process's grace-period counters (each read on its
 * own, relaxed: not one instant).  Returns 0, or -1 with errno EINVAL (NULL, st->size too
 * small for the header). */
PRD_API int prd_rcu_stats(prd_rcu_stats_t *st);

/* Grace-period sources.  A source computes grace periods; src/rcu.c keeps the state sequence,
 * the driver thread and call_rcu on top of any source.  rs_name and rs_synchronize are
 * required, the rest may be NULL.  rs_synchronize is called by one thread at a time, after a
 * full memory barrier on every thread of the process (membarrier, or a fence in fence mode),
 * and must return only when every read-side section that began before the call has ended. */
struct prd_rcu_source {
  const char *rs_name;                 /* "builtin", "urcu-memb", "urcu-qsbr", ... */
  void (*rs_synchronize)(void);        /* one full grace period (blocking) */
  void (*rs_register_thread)(void);    /* called again for a registered thread: must do nothing */
  void (*rs_unregister_thread)(void);  /* likewise for a thread not registered */
  void (*rs_quiescent_state)(void);
  void (*rs_thread_offline)(void);
  void (*rs_thread_online)(void);
  int  (*rs_read_ongoing)(void);       /* nonzero inside a read-side section (detects misuse);
                                          prd_rcu_builtin's marks a source built over the
                                          built-in read side (prd_rcu_read_lock) */
  int  (*rs_block_begin)(void);        /* before this thread blocks on a grace period (QSBR: go offline) */
  void (*rs_block_end)(int token);     /* after; gets rs_block_begin's result */
};
/* The built-in RCU (always available). */
PRD_API extern const struct prd_rcu_source prd_rcu_builtin;
/* Chooses the process's source; only before first use of RCU.  0, or -1 with errno EINVAL
 * (NULL, no name or no rs_synchronize) or EBUSY (a source is already in use; nothing changes). */
PRD_API int prd_rcu_set_source(const struct prd_rcu_source *src);
/* Makes a source selectable by name through the option rcu=NAME (libprudence-urcu registers
 * "urcu-memb" and "urcu-qsbr" from a constructor).  0, or -1 with errno EINVAL (bad source)
 * or EEXIST (another source has that name) or ENOSPC (table full). */
PRD_API int prd_rcu_register_source(const struct prd_rcu_source *src);
/* The source in use (fixes it if none is yet). */
PRD_API const struct prd_rcu_source *prd_rcu_get_source(void);

/* ------------------------------------------------------------------------------------------
 * Statistics output (src/stats.c): every cache and every arena, from the lists above.
 * ------------------------------------------------------------------------------------------ */
/* flags of prd_stats_print (0: the cache table, then the arena table) */
#define PRD_STATS_VERBOSE   0x1  /* every field of every cache and arena, with its meaning */
#define PRD_STATS_NOCACHES  0x2  /* leave out the caches */
#define PRD_STATS_NOARENAS  0x4  /* leave out the arenas */
#define PRD_STATS_NOINTERNAL 0x8 /* leave out the library's own caches (prd_slab, prd_mag_15, ...) */
#define PRD_STATS_SCHEMA_VERSION 1   /* "version" of the JSON document (docs/api.md) */
/* Prints a table of every cache (one row each, like /proc/slabinfo) and every arena on fp.
 * The statistics are copied first; nothing is printed while an allocator lock is held.
 * Returns 0, or -1 with errno EINVAL (NULL fp, unknown flags) or ENOMEM (no memory for the
 * snapshot) or the error of a failed write. */
PRD_API int prd_stats_print(FILE *fp, int flags);
/* Writes one JSON document, on one line, holding every cache and arena (docs/api.md gives
 * the schema).  Consecutive documents on one stream make a JSON-lines stream for prdstat.
 * Returns 0 or -1 with errno as prd_stats_print. */
PRD_API int prd_stats_json(FILE *fp);
/* Writes the JSON document to path atomically: to "path.tmp.PID.N" first (N from a counter of
 * the process, the file created exclusively), then rename(2), so a reader never sees half a
 * document.  Returns 0, or -1 with errno (EINVAL: NULL, empty or over-long path; EEXIST: path
 * names something other than a regular file, nothing written; otherwise the error of
 * open/write/rename, the temporary file removed). */
PRD_API int prd_stats_write_file(const char *path);

/* ------------------------------------------------------------------------------------------
 * The malloc family (src/malloc.c): 37 size-class caches (8 B .. 16 KiB), big blocks from the
 * heap arena, huge ones (option malloc_mmap_threshold) mapped on their own.  Same contracts as
 * the C library's functions; libprudence-malloc.so defines the standard names over these.
 * Bad pointers (not from here, inside a block, freed twice) are reported and not touched.
 * ------------------------------------------------------------------------------------------ */
/* A block of at least `size` bytes aligned to 16 (8 for sizes up to 8); malloc(0) returns a
 * unique block.  NULL with errno ENOMEM when no memory or size > PTRDIFF_MAX. */
PRD_API void  *prd_malloc(size_t size);
/* n * size zeroed bytes; NULL with ENOMEM when n * size overflows. */
PRD_API void  *prd_calloc(size_t n, size_t size);
/* Resizes, keeping min(old, new) bytes; in place while the size class does not change.
 * realloc(NULL, n) = malloc(n); realloc(p, 0) frees p and returns NULL (as glibc).  On failure
 * NULL with ENOMEM and p untouched; a pointer not from here: reported, NULL with EINVAL. */
PRD_API void  *prd_realloc(void *ptr, size_t size);
/* realloc(ptr, n * size), NULL with ENOMEM on overflow (ptr untouched). */
PRD_API void  *prd_reallocarray(void *ptr, size_t n, size_t size);
PRD_API void   prd_free(void *ptr);
/* 0, EINVAL (align not a power of two multiple of sizeof(void *)), or ENOMEM. */
PRD_API int    prd_posix_memalign(void **memptr, size_t align, size_t size);
/* NULL with EINVAL when align is not a power of two. */
PRD_API void  *prd_aligned_alloc(size_t align, size_t size);
/* As glibc: an alignment that is not a power of two is rounded up to one (0: 1); above 2^63
 * there is none: NULL with EINVAL; one no block can have (2^63) NULL with ENOMEM. */
PRD_API void  *prd_memalign(size_t align, size_t size);
PRD_API void  *prd_valloc(size_t size);
PRD_API void  *prd_pvalloc(size_t size);
/* Bytes usable in the block (>= the size asked for); 0 for NULL.  A pointer not from here, or
 * inside a block: reported, and the process ends unless abort_on_error=0 (then 0). */
PRD_API size_t prd_malloc_usable_size(void *ptr);
/* call_rcu(free) for any block from prd_malloc and its family (or, in a program preloading
 * libprudence-malloc, from malloc): the block is freed after a grace period, through the
 * Prudence path of its size class (reused as soon as the grace period has ended); a block
 * above the largest class goes through prd_call_rcu.  Callable inside read-side sections;
 * never blocks.  NULL: nothing.  A pointer not from here: reported, not touched. */
PRD_API void   prd_free_deferred(void *ptr);

/* ------------------------------------------------------------------------------------------
 * Options (src/options.c): PRUDENCE_OPTIONS="name=value,...", PRUDENCE_DEBUG=...
 * ------------------------------------------------------------------------------------------ */
/* Sets option `name` from its text form.  Returns 0, or -1 with errno EINVAL (unknown name,
 * bad value or NULL; nothing changes) or EBUSY (rcu once the grace-period source is chosen;
 * nothing changes). */
PRD_API int  prd_option_set(const char *name, const char *value);
/* Reads an integer-valued option; returns -1 with errno EINVAL for an unknown name. */
PRD_API long prd_option_get(const char *name);

#include "prudence_rcu.h"

#ifdef __cplusplus
}
#endif
#endif /* PRUDENCE_H */
