/*
 * slab.h: the slab layer's lists and slab records, inline, for slab.c and for latent.c
 * (Prudence's latent slabs keep their deferred buffers in the slab layer's slabs: slab.c
 * section 9 is the mechanism, latent.c the policy).  All of it runs under the cache's
 * cache_lock (slab.c section 8).
 */
#ifndef PRD_SLAB_H
#define PRD_SLAB_H

#include "annotate.h"
#include "internal.h"

/* ---- lists (slab.c section 3) ------------------------------------------------------------- */
static inline bool prd__slab_link_empty(const prd_slab_link_t *l)
{
  return l->sl_next == l;
}

static inline void prd__slab_link_insert(prd_slab_link_t *head, prd_slab_link_t *e)
{
  e->sl_next = head->sl_next;
  e->sl_prev = head;
  head->sl_next->sl_prev = e;
  head->sl_next = e;
}

static inline void prd__slab_link_remove(prd_slab_link_t *e)
{
  e->sl_prev->sl_next = e->sl_next;
  e->sl_next->sl_prev = e->sl_prev;
}

static inline prd_slab_t *prd__slab_of_link(prd_slab_link_t *l)
{
  return (prd_slab_t *)((char *)l - offsetof(prd_slab_t, slab_link));
}

/* Deferred buffers of the slab, both latent generations (slab.c section 9). */
static inline uint32_t prd__slab_ndeferred(const prd_slab_t *sp)
{
  return sp->slab_lat_n[0] + sp->slab_lat_n[1];
}

/* The list a slab belongs on, from its reference count (slab.c section 3).  Deferred buffers
 * count as free already (slab.c section 9, slab pre-movement) in a slab that has a free
 * buffer to hand out: a slab whose every allocated buffer is deferred is on the free list, and
 * the bucket of a partial one counts its deferred buffers as free.  A slab with no free buffer
 * is full whatever waits in it: allocation could take nothing from it, and on the free list
 * or in a low partial bucket it filled the refill's bounded scan (latent.c section 5).  A
 * thread's current slab stays on the owned list whatever its count (slab.c section 10). */
static inline uint32_t prd__slab_target(const prd_cache_t *cp, const prd_slab_t *sp)
{
  if (sp->slab_owner != NULL)
    return PRD_SLAB_ON_OWNED;
  if (sp->slab_refcnt == sp->slab_chunks)
    return PRD_SLAB_ON_FULL;
  uint32_t live = sp->slab_refcnt - prd__slab_ndeferred(sp);
  uint32_t nfree = sp->slab_chunks - live;   /* at least 1: refcnt < chunks */
  if (live == 0)
    return PRD_SLAB_ON_FREE;
  return (nfree - 1) >> cp->cache_bucket_shift;
}

static inline prd_slab_link_t *prd__slab_list(prd_cache_t *cp, uint32_t b)
{
  if (b == PRD_SLAB_ON_FULL)
    return &cp->cache_full;
  if (b == PRD_SLAB_ON_FREE)
    return &cp->cache_free;
  if (b == PRD_SLAB_ON_OWNED)
    return &cp->cache_owned;
  return &cp->cache_partial[b];
}

/* Every list of a cache, for walks: index i in [0, PRD_SLAB_NLISTS) -> list id. */
#define PRD_SLAB_NLISTS (PRD_SLAB_BUCKETS + 3)
static inline uint32_t prd__slab_list_id(size_t i)
{
  return i == 0 ? PRD_SLAB_ON_FULL : i == 1 ? PRD_SLAB_ON_FREE
                                   : i == 2 ? PRD_SLAB_ON_OWNED : (uint32_t)(i - 3);
}

static inline void prd__slab_unlink(prd_cache_t *cp, prd_slab_t *sp)
{
  uint32_t b = sp->slab_bucket;
  prd__slab_link_remove(&sp->slab_link);
  if (b == PRD_SLAB_ON_FULL) {
    cp->cache_nfull--;
  } else if (b == PRD_SLAB_ON_FREE) {
    cp->cache_nfree--;
    if (cp->cache_nfree < cp->cache_free_min)   /* the working set grew (slab.c section 6) */
      cp->cache_free_min = cp->cache_nfree;
  } else if (b == PRD_SLAB_ON_OWNED) {
    cp->cache_nowned--;
  } else {
    cp->cache_npartial--;
    if (prd__slab_link_empty(&cp->cache_partial[b]))
      cp->cache_partial_map &= ~(1ull << b);
  }
}

static inline void prd__slab_list_add(prd_cache_t *cp, prd_slab_t *sp, uint32_t b)
{
  sp->slab_bucket = b;
  /* a slab on the free list ahead of time (its buffers deferred, slab.c section 9) goes to
   * the tail: allocation takes free slabs from the head and finds the truly free ones first */
  if (b == PRD_SLAB_ON_FREE && prd_unlikely(prd__slab_ndeferred(sp) != 0))
    prd__slab_link_insert(cp->cache_free.sl_prev, &sp->slab_link);
  else
    prd__slab_link_insert(prd__slab_list(cp, b), &sp->slab_link);
  if (b == PRD_SLAB_ON_FULL) {
    cp->cache_nfull++;
  } else if (b == PRD_SLAB_ON_FREE) {
    cp->cache_nfree++;
  } else if (b == PRD_SLAB_ON_OWNED) {
    cp->cache_nowned++;
  } else {
    cp->cache_npartial++;
    cp->cache_partial_map |= 1ull << b;
  }
}

/* After the reference count changed: move the slab if its list changed. */
static inline void prd__slab_relist(prd_cache_t *cp, prd_slab_t *sp)
{
  uint32_t b = prd__slab_target(cp, sp);
  if (b != sp->slab_bucket) {
    prd__slab_unlink(cp, sp);
    prd__slab_list_add(cp, sp, b);
  }
}

/* The slab to allocate from when no buffer is deferred: the partial slab with the fewest
 * free buffers, else the newest free slab, else NULL (slab.c section 3). */
static inline prd_slab_t *prd__slab_pick_plain(prd_cache_t *cp)
{
  if (prd_likely(cp->cache_partial_map != 0)) {
    unsigned b = (unsigned)__builtin_ctzll(cp->cache_partial_map);
    return prd__slab_of_link(cp->cache_partial[b].sl_next);
  }
  if (!prd__slab_link_empty(&cp->cache_free))
    return prd__slab_of_link(cp->cache_free.sl_next);
  return NULL;
}

/* ---- the small layout's freelist word (slab.c section 4b) -------------------------------- */
/* The word at `at` stores v XOR the cache's key XOR at's address byte-swapped (SLUB's
 * freelist hardening; every small-layout cache, slab.c section 4b), or v itself when the key
 * is 0 (large-layout and NOTOUCH caches, whose bc_next is no buffer word).  Coding is its
 * own inverse. */
static inline prd_bufctl_t *prd__slab_fl_code(const prd_cache_t *cp, const prd_bufctl_t *at,
                                              prd_bufctl_t *v)
{
  uintptr_t k = cp->cache_fl_key;
  uintptr_t m = k != 0 ? k ^ __builtin_bswap64((uint64_t)(uintptr_t)at) : 0;
  return (prd_bufctl_t *)((uintptr_t)v ^ m);
}

/* The next free buffer's word after bcp's, decoded (unchecked: slab.c validates it). */
static inline prd_bufctl_t *prd__slab_fl_next(const prd_cache_t *cp, const prd_bufctl_t *bcp)
{
  return prd__slab_fl_code(cp, bcp, bcp->bc_next);
}

static inline void prd__slab_fl_set(const prd_cache_t *cp, prd_bufctl_t *bcp, prd_bufctl_t *next)
{
  bcp->bc_next = prd__slab_fl_code(cp, bcp, next);
}

/* The free mark (magazine.c section 15) in a small-layout buffer the slab layer links onto a
 * freelist without a free having written it (a new slab's buffers, a deferred buffer whose
 * grace period ended), for a cache that has the mark: every free buffer then carries it,
 * handed out before or not, so a free of a buffer never handed out is a double free.  The
 * same word and value as magazine.h's prd__mark_set (the buffer's address XOR the key). */
static inline void prd__slab_mark(const prd_cache_t *cp, void *buf)
{
  if (cp->cache_mark_key != 0)
    *(uintptr_t __attribute__((may_alias)) *)((char *)buf + cp->cache_mark_off) =
        (uintptr_t)buf ^ cp->cache_mark_key;
}

/* ---- buffers and slabs ------------------------------------------------------------------ */
static inline void *prd__slab_bufctl_buf(const prd_cache_t *cp, prd_bufctl_t *bcp)
{
  if (cp->cache_flags & PRD_CF_HASH)
    return bcp->bc_addr;
  return (char *)bcp - cp->cache_link_off;
}

/* Small layout: the slab data at the end of the slab holding buf. */
/* Whether sp has a free buffer to hand out: on its lists, or never linked yet (section 4). */
static inline bool prd__slab_has_free(const prd_slab_t *sp)
{
  return sp->slab_head != NULL || sp->slab_fresh != NULL || sp->slab_unlinked < sp->slab_chunks;
}

static inline prd_slab_t *prd__slab_small(const prd_cache_t *cp, const void *buf)
{
  uintptr_t base = PRD_P2ALIGN((uintptr_t)buf, cp->cache_slabsize);
  return (prd_slab_t *)(base + cp->cache_slabsize - sizeof(prd_slab_t));
}

/* Small layout: generation g's bitmap of deferred buffers, just before the prd_slab_t. */
static inline uint64_t *prd__slab_lat_map(const prd_cache_t *cp, prd_slab_t *sp, int g)
{
  return (uint64_t *)((char *)sp - 2 * cp->cache_lat_words * sizeof(uint64_t)) +
         (size_t)g * cp->cache_lat_words;
}

/* Deferred buffers whose grace period has ended already, given back at once (latent.c): as
 * prd__slab_free_bulk, with a bad one reported as a bad deferral. */
void prd__slab_free_bulk_deferred(prd_cache_t *cp, void *const *bufs, size_t n);
/* A deferral the slab layer refuses: "cache NAME: deferred free of buffer P: WHY (ignored)",
 * WHY one of these (lock not held). */
PRD_NOINLINE PRD_COLD void prd__slab_bad_deferral(prd_cache_t *cp, void *buf, const char *why);
#define PRD_SLAB_WHY_TWICE   "deferred twice (it is deferred already)"
#define PRD_SLAB_WHY_FREED   "it is free already (deferred twice, or freed before)"
#define PRD_SLAB_WHY_FOREIGN "not a buffer allocated from this cache"

/* Small layout: buf's index in sp, its bit in the latent bitmaps. */
static inline size_t prd__slab_lat_index(const prd_cache_t *cp, const prd_slab_t *sp,
                                         const void *buf)
{
  return (size_t)((const char *)buf - (sp->slab_base + sp->slab_color)) / cp->cache_chunksize;
}

/* Small layout: whether buf waits in a latent generation of sp, deferred and its grace
 * period not known to have ended, so that freeing or deferring it again would make its merge
 * link it a second time (slab.c section 4, latent.c section 2; lock held). */
static inline bool prd__slab_small_is_deferred(const prd_cache_t *cp, prd_slab_t *sp,
                                               const void *buf)
{
  if (prd__slab_ndeferred(sp) == 0)
    return false;
  size_t k = prd__slab_lat_index(cp, sp, buf);
  uint64_t bit = 1ull << (k % 64);
  return ((prd__slab_lat_map(cp, sp, 0)[k / 64] | prd__slab_lat_map(cp, sp, 1)[k / 64]) &
          bit) != 0;
}

/* Small layout: whether the buffer of link word bcp is free in its slab already (on a
 * freelist, or never linked), so that giving it back again would be a double free (slab.c
 * section 4; lock held). */
bool prd__slab_small_is_free(const prd_cache_t *cp, const prd_slab_t *sp,
                             const prd_bufctl_t *bcp);
/* How many times that test walked a slab's freelists, in the process (tests). */
uint64_t prd__slab_fl_walks(void);

/* A buffer back on its slab's freelist (lock held; the caller relists the slab). */
static inline void prd__slab_put(prd_cache_t *cp, prd_slab_t *sp, prd_bufctl_t *bcp)
{
  if (cp->cache_flags & PRD_CF_HASH)
    bcp->bc_flags &= ~(PRD_BC_ALLOC | PRD_BC_DEFERRED);
  prd__annot_object_in(cp, prd__slab_bufctl_buf(cp, bcp));   /* before the freelist word */
  prd__slab_fl_set(cp, bcp, sp->slab_head);
  sp->slab_head = bcp;
  sp->slab_refcnt--;
  cp->cache_frees++;
  cp->cache_bufs_inuse--;
}

/* ---- the latent slabs' hooks (slab.c section 9; latent.c sets them) ---------------------- */
/* With deferred buffers in a cache, the slab layer asks latent.c which slab to allocate
 * from (the refill choice), and a reap asks it to merge a free slab's ended generations.
 * Set before the first deferral into a latent slab, so never needed before they are set. */
typedef struct prd__slab_latent_hooks {
  prd_slab_t *(*lh_pick)(prd_cache_t *cp);
  bool (*lh_merge_safe)(prd_cache_t *cp, prd_slab_t *sp);
} prd__slab_latent_hooks_t;
void prd__slab_set_latent_hooks(const prd__slab_latent_hooks_t *hooks);

#endif
