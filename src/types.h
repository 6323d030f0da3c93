/*
 * types.h: the internal types of libprudence.
 *
 * Main types, bottom up (each struct's fields carry the struct's prefix, so uses grep):
 *   prd_vmem_t      (vmem.c)   an arena of integers: spans, segments (boundary tags),
 *                              power-of-two freelists, an allocated-segment hash   vm_
 *   prd_vseg_t      (vmem.c)   one boundary tag: a span, a free or an allocated segment  vs_
 *
 * Layers above add their types here as they land.
 */
#ifndef PRD_TYPES_H
#define PRD_TYPES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prudence.h"

/* ---- vmem.c ---------------------------------------------------------------------------- */
/* Segment types (vs_type). */
enum { PRD_VS_SPAN = 1, PRD_VS_FREE = 2, PRD_VS_ALLOC = 4 };

/* One boundary tag.  Every tag is on the arena's address-ordered list (vs_anext/vs_aprev):
 * a span tag first, then the free and allocated segments that tile that span.  A free segment
 * is also on one power-of-two freelist (vs_knext/vs_kprev, doubly linked); an allocated one is
 * on one hash chain (vs_knext only).  64 bytes, so a page holds a whole number of tags. */
typedef struct prd_vseg prd_vseg_t;
struct prd_vseg {
  uintptr_t vs_start;          /* first integer */
  uintptr_t vs_end;            /* one past the last integer (never wraps to 0) */
  prd_vseg_t *vs_anext, *vs_aprev;   /* address-ordered list of all tags */
  prd_vseg_t *vs_knext, *vs_kprev;   /* freelist (free), hash chain (alloc), tag reserve */
  uint8_t vs_type;             /* PRD_VS_SPAN, PRD_VS_FREE or PRD_VS_ALLOC */
  uint8_t vs_import;           /* span: imported from the source (given back when all free) */
  uint8_t vs_xalloc;           /* alloc: came from prd_vmem_xalloc (must pair with xfree) */
  uint8_t vs_mark;             /* prd__vmem_check: seen on a freelist */
  uint8_t vs_pad[4];
};

#define PRD_VMEM_NAMELEN   32   /* arena names are copied, truncated to 31 characters */
#define PRD_VMEM_FREELISTS 64   /* one list per power of two of a uintptr_t size */
#define PRD_VMEM_HASH0     16   /* embedded hash buckets before the first resize */

struct prd_vmem {
  char vm_name[PRD_VMEM_NAMELEN];
  pthread_mutex_t vm_lock;     /* protects everything below (one lock per arena) */
  pthread_cond_t vm_cv;        /* PRD_VM_SLEEP waiters; broadcast by frees and adds */
  uint32_t vm_waiters;         /* threads waiting on vm_cv */
  size_t vm_quantum;           /* power of two; every size and address is a multiple */
  int vm_qshift;               /* log2(vm_quantum) */
  size_t vm_qcache_max;        /* stored for the quantum caches of a later layer */
  size_t vm_import_chunk;      /* imports are rounded up to this (0: to the source quantum) */
  prd_vmem_alloc_fn *vm_afunc; /* import from vm_source */
  prd_vmem_free_fn *vm_ffunc;  /* give an imported span back */
  prd_vmem_t *vm_source;
  prd_vseg_t vm_seg0;          /* sentinel of the address-ordered list */
  prd_vseg_t *vm_rotor;        /* next-fit: the tag of the last next-fit allocation */
  uintptr_t vm_rotor_addr;     /* next-fit: search from here first */
  uint64_t vm_freemap;         /* bit n set: vm_freelist[n] is not empty */
  prd_vseg_t vm_freelist[PRD_VMEM_FREELISTS];  /* sentinels; list n: size in [2^n, 2^(n+1)) */
  prd_vseg_t **vm_hash;        /* allocated segments by start address */
  size_t vm_hash_mask;         /* buckets - 1 (a power of two) */
  int vm_hash_shift;           /* 64 - log2(buckets), for multiplicative hashing */
  prd_vseg_t *vm_hash0[PRD_VMEM_HASH0];
  prd_vseg_t *vm_tags;         /* the tag reserve (linked through vs_knext) */
  size_t vm_ntags;             /* tags in the reserve */
  void *vm_tag_pages;          /* pages the tags were carved from (first word links them) */
  prd_vmem_stats_t vm_stats;   /* the statistics (fields from PRD_VMEM_STATS) */
};

#endif
