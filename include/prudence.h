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

#define PRD_VERSION_MAJOR 0
#define PRD_VERSION_MINOR 1

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
  X(spans,          "spans now")

#define PRD_VMEM_STATS_VERSION 1
typedef struct prd_vmem_stats {
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
 * Options (src/options.c): PRUDENCE_OPTIONS="name=value,...", PRUDENCE_DEBUG=...
 * ------------------------------------------------------------------------------------------ */
/* Sets option `name` from its text form.  Returns 0, or -1 with errno EINVAL (unknown name or
 * bad value; nothing changes). */
PRD_API int  prd_option_set(const char *name, const char *value);
/* Reads an integer-valued option; returns -1 with errno EINVAL for an unknown name. */
PRD_API long prd_option_get(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* PRUDENCE_H */
