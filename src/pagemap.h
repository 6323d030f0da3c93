/*
 * pagemap.h: the page map's inline lookups (pagemap.c section 3) and its entry format.
 * A lookup is two dependent loads and no lock; the map itself, the leaves and the registry of
 * cache ids are pagemap.c's.
 */
#ifndef PRD_PAGEMAP_H
#define PRD_PAGEMAP_H

#include "internal.h"

#define PRD_PM_GRANULE_SHIFT 12
#define PRD_PM_LEAF_BITS     18
#define PRD_PM_ROOT_BITS     18   /* 12 + 18 + 18 = 48 address bits */
#define PRD_PM_ADDR_BITS     (PRD_PM_GRANULE_SHIFT + PRD_PM_LEAF_BITS + PRD_PM_ROOT_BITS)
#define PRD_PM_LEAF_N        ((size_t)1 << PRD_PM_LEAF_BITS)
#define PRD_PM_ROOT_N        ((size_t)1 << PRD_PM_ROOT_BITS)

/* An entry (pagemap.c section 2).  Bits 0..3: the kind.  PRD_PM_SLAB is a granule of a slab;
 * kinds 1..4 are the malloc family's big blocks and boot area (malloc.c), 0 is "not ours".
 * A slab entry: bits 8..15 the owner's tag byte (malloc's class index + 1; 0 for any other
 * cache), bits 16..31 the cache's id, bits 32..63 the low 32 bits of the address of the
 * slab's first buffer, negated (mod 2^32).  Its low 32 bits are the cache's cache_pm_tag. */
#define PRD_PM_KIND_MASK  0xfu
#define PRD_PM_SLAB       5u
#define PRD_PM_TAG_SHIFT  8
#define PRD_PM_ID_SHIFT   16
#define PRD_PM_FIRST_SHIFT 32
#define PRD_PM_IDS        65536u  /* ids 1 .. 65535; 0 names no cache */

typedef _Atomic uintptr_t prd_pm_entry_t;
/* The root: 2^18 words, static, so the map exists before any constructor runs.  Word i is 0
 * while the 1 GiB it covers has no leaf, else the leaf's "base": its address less i << 21
 * (the byte offset of the first granule of word i's range in a leaf indexed from granule 0),
 * plus 8.  A slot's address is then base - 8 + (a >> 12) * 8 (prd__pm_slot), with no mask
 * of the granule number: one instruction fewer on every lookup, the - 8 is in the load's
 * displacement.  The + 8 keeps a base from being 0: a leaf is page-aligned, and
 * (i << 21) - 8 is not. */
extern prd_pm_entry_t prd__pm_root[PRD_PM_ROOT_N] __attribute__((visibility("hidden")));
#define PRD_PM_ROOT_SHIFT (PRD_PM_GRANULE_SHIFT + PRD_PM_LEAF_BITS)

/* The base that root word i holds for the leaf at `leaf` (pagemap.c's pm_slot_make). */
static inline uintptr_t prd__pm_base_of(const prd_pm_entry_t *leaf, uintptr_t i)
{
  return (uintptr_t)leaf - (i << (PRD_PM_LEAF_BITS + 3)) + sizeof(prd_pm_entry_t);
}

/* The base of the leaf covering a (0: none yet, or a beyond the 48-bit space). */
static inline uintptr_t prd__pm_base(uintptr_t a)
{
  if (prd_unlikely(a >> PRD_PM_ADDR_BITS))
    return 0;
  /* acquire: pairs with the release CAS in pagemap.c's pm_slot_make */
  return atomic_load_explicit(&prd__pm_root[a >> PRD_PM_ROOT_SHIFT], memory_order_acquire);
}

/* The slot of a's granule in the leaf whose base (not 0) covers a. */
static inline prd_pm_entry_t *prd__pm_slot(uintptr_t a, uintptr_t base)
{
  return (prd_pm_entry_t *)(base - sizeof(prd_pm_entry_t) +
                            (a >> PRD_PM_GRANULE_SHIFT) * sizeof(prd_pm_entry_t));
}

/* The entry of the granule holding p (0: not ours). */
static inline uintptr_t prd__pm_get(const void *p)
{
  uintptr_t a = (uintptr_t)p;
  uintptr_t base = prd__pm_base(a);
  if (prd_unlikely(base == 0))
    return 0;
  /* acquire: pairs with the release store that set the entry (pagemap.c section 4) */
  return atomic_load_explicit(prd__pm_slot(a, base), memory_order_acquire);
}

/* The cache id of a slab entry (0 for any other entry). */
static inline uint32_t prd__pm_id_of(uintptr_t e)
{
  return (e & PRD_PM_KIND_MASK) == PRD_PM_SLAB ? (uint32_t)(e >> PRD_PM_ID_SHIFT) & 0xffffu : 0;
}

/* The offset of address a from the first buffer of the slab whose granule entry is e, mod
 * 2^32: the low 32 bits of a plus the entry's negated ones (no mask of a's granule bits; an
 * add, where a subtraction would need a copy of a, which the caller keeps). */
static inline uint32_t prd__pm_off32(uintptr_t e, uintptr_t a)
{
  return (uint32_t)(e >> PRD_PM_FIRST_SHIFT) + (uint32_t)a;
}

/* The address of the first buffer of the slab whose granule entry is e, for an address a in
 * that slab: a slab spans less than 2^31 bytes, so the offset mod 2^32, taken as signed, is
 * the offset (negative when a lies before the first buffer, in the slab's head). */
static inline uintptr_t prd__pm_first_of(uintptr_t e, uintptr_t a)
{
  return a - (uintptr_t)(intptr_t)(int32_t)prd__pm_off32(e, a);
}

/* Whether address a, in a slab granule whose entry is e, starts one of the slab's `chunks`
 * buffers of d = m * 2^shift bytes (m odd, inv its inverse mod 2^32): the offset x from the
 * first buffer (mod 2^32, prd__pm_off32) is a multiple of d below chunks * d, in one compare.  Exact
 * division by a multiplicative inverse (Granlund and Montgomery, "Division by invariant
 * integers using multiplication", 1994, section 9; as compilers test x % d == 0): rotating
 * x * inv (mod 2^32) right by shift gives x / d when d divides x, and otherwise a value above
 * (2^32 - 1) / d, which is at least chunks because a slab's chunks * d is below 2^31
 * (prd__pm_chunk_inverse asserts it); an offset below the first buffer wraps to 2^32 - (less
 * than a slab), whose quotient is far above chunks too.  So index < chunks means "starts a
 * buffer of this slab". */
static inline bool prd__pm_start_ok(uintptr_t e, uintptr_t a, uint32_t inv, uint32_t shift,
                                    uint32_t chunks)
{
  uint32_t x = prd__pm_off32(e, a) * inv;
  return prd_likely(((x >> shift) | (x << ((32u - shift) & 31u))) < chunks);
}

/* Whether buf is a buffer of cp by the page map: its granule's entry names cp (the low 32 bits
 * are cp's cache_pm_tag: kind, owner's tag byte and id) and buf starts a buffer of the slab.
 * The check prd_cache_free and prd_cache_free_deferred make (cache.c section 2); not for
 * NOTOUCH caches, whose buffers are integers with no entries. */
static inline bool prd__pm_owns(const prd_cache_t *cp, const void *buf)
{
  uintptr_t e = prd__pm_get(buf);
  return (uint32_t)e == cp->cache_pm_tag &&
         prd__pm_start_ok(e, (uintptr_t)buf, cp->cache_pm_inv, cp->cache_pm_shift,
                          cp->cache_chunks);
}

/* prd__pm_owns, and the report (prd__pm_bad_free, naming `what`) when buf is not cp's: the
 * check of a free (cache.c section 2), in one place for prd_cache_free and the deferral. */
static inline bool prd__pm_check(const prd_cache_t *cp, const void *buf, const char *what)
{
  if (prd_likely(prd__pm_owns(cp, buf)))
    return true;
  prd__pm_bad_free(cp, buf, what);
  return false;
}

#endif
