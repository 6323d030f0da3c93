/*
 * pagemap.c: the page map, which says from an address alone what owns it (seed 003 §3.3.4,
 * Figure 6: "a two-level scheme using a sparse array"), and the registry of cache ids that
 * its slab entries name.
 *
 * 1. What.  free(ptr) has no size and prd_cache_free(cp, buf) may be handed anything, so the
 *    allocator must find what owns an address, and recognize addresses it does not own,
 *    without reading the memory behind them (it may be another cache's, a stack, a mapping
 *    the library never made).  The map covers the 48-bit user address space in 4 KiB
 *    granules (36 bits of granule number) with two levels of 2^18: a static root of 2^18 words
 *    naming the leaves (each leaf's address biased by the first granule it covers, so that a
 *    lookup needs no mask of the granule number: pagemap.h prd__pm_root; 2 MiB of .bss,
 *    untouched until used, so it exists before any constructor runs)
 *    and leaves of 2^18 entries (2 MiB each, mapped by os.c when a granule of their 1 GiB
 *    first becomes ours, never freed; the kernel backs only the pages of a leaf that are
 *    written, 8 bytes per 4 KiB granule).  A lookup is two dependent loads, no lock (inline
 *    in pagemap.h).  The granule is 4 KiB whatever the page size: every slab of a memory
 *    cache is a multiple of the page and aligned to it (slab.c section 2), so no granule
 *    holds two slabs.
 *
 * 2. Entries (pagemap.h).  0: not ours.  A slab entry (kind PRD_PM_SLAB) in every granule of
 *    every slab of every memory cache: the cache's id (bits 16..31), a tag byte its owner may
 *    set (bits 8..15: malloc's class index + 1, so that free finds its class from the entry
 *    without the registry), and the low 32 bits of the address of the slab's first buffer,
 *    negated (bits 32..63: a slab spans less than 2^31 bytes, so the offset of any address of
 *    it from the first buffer is the difference of the low 32 bits, pagemap.h prd__pm_off32:
 *    one add, with no mask of the granule's bits).  The low 32 bits are the cache's cache_pm_tag, so "this granule is a
 *    slab of cp" is one 32-bit compare.  The slab layer sets them when it makes a slab,
 *    before any buffer of it is handed out, and clears them before the slab's memory goes
 *    back (slab.c slab_create, slab_destroy); a slab whose entries cannot be set (no memory
 *    for a leaf) is not made, so every slab of a memory cache is in the map and no failure is
 *    remembered.  A leaf's mapping is tried twice before that: giving the slab up gives back
 *    the span its source may have mapped for it, so the next attempt needs both mappings
 *    again, and a failure of every other mapping would fail every attempt.  NOTOUCH caches have no entries: their buffers are integers, which may equal
 *    any address.  Kinds 1..4 belong to the malloc family (its big blocks and boot area,
 *    malloc.c section 3), which sets and clears them through prd__pm_slot_make.
 *
 * 3. Cache ids.  Each memory cache takes an id at creation (prd__slab_cache_init), from 1 to
 *    65535, and gives it back when it is destroyed, for the next cache to reuse: a cache that
 *    is never destroyed holds one id, a program that creates and destroys caches in a loop
 *    reuses a few.  When all are taken, cache creation fails with ENOSPC and a report: a
 *    cache whose slabs the map could not name would be a cache whose frees go unchecked.
 *    Taking an id is a compare-and-swap of a NULL slot of pm_id_cache to the cache, from a
 *    rotating hint, so cache creation takes no lock here (nothing for fork to order).  The
 *    registry also keeps each live cache's name (pm_id_name, written by the taker before the
 *    cache has a slab, so before any entry names it), for the report of a free of another
 *    cache's buffer.  Such a report racing with that other cache's destruction and the id's
 *    reuse may print the newer cache's name: the free is wrong either way.
 *
 * 4. Memory ordering.  A leaf is published with a release compare-and-swap of its base into
 *    the root, which pairs with the acquire load of every lookup, so a reader that sees the
 *    base sees the leaf's (zero) contents.  An entry is stored with release and read with
 *    acquire; in a correct program the stronger edge is the user's own: the buffer reached
 *    the freeing thread after the allocation returned it, and the allocation returned it
 *    after the entry was stored (slab_create sets the entries before the slab is linked
 *    under cache_lock).  A wrong free racing with the slab's creation or destruction may see
 *    either the old or the new entry, and is reported or not as for either.  An id slot is
 *    taken with an acquire-release CAS; the name is written after it and read by reports
 *    only, which need no order beyond the entry's (the name was written before the slab's
 *    entries were stored with release).
 */
#include <errno.h>
#include <string.h>

#include "pagemap.h"

prd_pm_entry_t prd__pm_root[PRD_PM_ROOT_N];

/* ---- leaves (section 1) ---------------------------------------------------------------- */
/* The slot of a's granule, making its leaf if needed; NULL when no memory for a leaf (or a
 * beyond the 48-bit space). */
prd_pm_entry_t *prd__pm_slot_make(uintptr_t a)
{
  if (a >> PRD_PM_ADDR_BITS)
    return NULL;
  uintptr_t i = a >> PRD_PM_ROOT_SHIFT;
  prd_pm_entry_t *rootp = &prd__pm_root[i];
  uintptr_t base = atomic_load_explicit(rootp, memory_order_acquire);
  if (base == 0) {
    /* tried twice (section 2) */
    prd_pm_entry_t *fresh = prd__os_map(PRD_PM_LEAF_N * sizeof(prd_pm_entry_t));
    if (fresh == NULL)
      fresh = prd__os_map(PRD_PM_LEAF_N * sizeof(prd_pm_entry_t));
    if (fresh == NULL)
      return NULL;
    uintptr_t nb = prd__pm_base_of(fresh, i);
    /* release: the leaf's contents before its base (pairs with prd__pm_base's acquire) */
    if (atomic_compare_exchange_strong_explicit(rootp, &base, nb, memory_order_acq_rel,
                                                memory_order_acquire))
      base = nb;
    else
      prd__os_unmap(fresh, PRD_PM_LEAF_N * sizeof(prd_pm_entry_t));   /* another thread won */
  }
  return prd__pm_slot(a, base);
}

/* Sets the entries of [base, base + size) to v, or for a slab (first != 0 or tag != 0) to
 * each granule's slab entry; on a missing leaf the entries set are cleared again and false
 * returned.  Clearing (v 0, tag 0) finds the leaves that setting made. */
static bool pm_store_range(uintptr_t base, size_t size, uintptr_t v, uint32_t tag,
                           uintptr_t first)
{
  uintptr_t g;
  for (g = base; g < base + size; g += (uintptr_t)1 << PRD_PM_GRANULE_SHIFT) {
    prd_pm_entry_t *slot = prd__pm_slot_make(g);
    if (slot == NULL)
      break;
    uintptr_t e = v;
    if (tag != 0) {
      e = ((uintptr_t)(0u - (uint32_t)first) << PRD_PM_FIRST_SHIFT) | tag;
    }
    atomic_store_explicit(slot, e, memory_order_release);
  }
  if (g >= base + size)
    return true;
  (void)pm_store_range(base, (size_t)(g - base), 0, 0, 0);
  return false;
}

bool prd__pm_set_range(uintptr_t base, size_t size, uintptr_t v)
{
  return pm_store_range(base, size, v, 0, 0);
}

/* ---- slabs (section 2) ------------------------------------------------------------------- */
bool prd__pm_slab_set(const prd_cache_t *cp, void *base, size_t size, size_t first)
{
  uintptr_t b = (uintptr_t)base;
  return pm_store_range(b, size, 0, cp->cache_pm_tag, b + first);
}

void prd__pm_walk(void (*fn)(void *arg, uintptr_t a, uintptr_t e), void *arg)
{
  for (uintptr_t r = 0; r < PRD_PM_ROOT_N; r++) {
    uintptr_t base = atomic_load_explicit(&prd__pm_root[r], memory_order_acquire);
    if (base == 0)
      continue;
    for (uintptr_t i = 0; i < PRD_PM_LEAF_N; i++) {
      uintptr_t a = (r << PRD_PM_ROOT_SHIFT) | (i << PRD_PM_GRANULE_SHIFT);
      uintptr_t e = atomic_load_explicit(prd__pm_slot(a, base), memory_order_acquire);
      if (e != 0)
        fn(arg, a, e);
    }
  }
}

void prd__pm_slab_clear(void *base, size_t size)
{
  (void)pm_store_range((uintptr_t)base, size, 0, 0, 0);
}

/* The inverse of the chunk's odd part and the chunk's power of two (prd__pm_start_ok). */
void prd__pm_chunk_inverse(prd_cache_t *cp)
{
  size_t d = cp->cache_chunksize;
  PRD_ASSERT(d != 0 && (uint64_t)cp->cache_chunks * d < ((uint64_t)1 << 31));
  uint32_t j = (uint32_t)__builtin_ctzll((unsigned long long)d);
  uint32_t m = (uint32_t)(d >> j);
  uint32_t inv = m;   /* Newton's iteration doubles the correct low bits: 3, 6, ... 48 */
  for (int k = 0; k < 4; k++)
    inv *= 2u - m * inv;
  PRD_ASSERT(m * inv == 1u);
  cp->cache_pm_inv = inv;
  cp->cache_pm_shift = j;
}

/* ---- cache ids (section 3) ------------------------------------------------------------- */
static const prd_cache_t *_Atomic pm_id_cache[PRD_PM_IDS];
static char pm_id_name[PRD_PM_IDS][PRD_CACHE_NAME_MAX];
static _Atomic uint32_t pm_id_hint = 1;
static _Atomic uint32_t pm_id_limit = PRD_PM_IDS - 1;   /* the last id handed out */

uint32_t prd__pm_id_take(const prd_cache_t *cp)
{
  uint32_t limit = atomic_load_explicit(&pm_id_limit, memory_order_relaxed);
  uint32_t start = atomic_load_explicit(&pm_id_hint, memory_order_relaxed);
  if (start == 0 || start > limit)
    start = 1;
  uint32_t id = start;
  do {
    const prd_cache_t *none = NULL;
    if (atomic_load_explicit(&pm_id_cache[id], memory_order_relaxed) == NULL &&
        atomic_compare_exchange_strong_explicit(&pm_id_cache[id], &none, cp,
                                                memory_order_acq_rel, memory_order_relaxed)) {
      atomic_store_explicit(&pm_id_hint, id + 1, memory_order_relaxed);
      memcpy(pm_id_name[id], cp->cache_name, PRD_CACHE_NAME_MAX);
      return id;
    }
    id = id == limit ? 1 : id + 1;
  } while (id != start);
  errno = ENOSPC;
  return 0;
}

void prd__pm_id_give(uint32_t id)
{
  if (id == 0)
    return;
  /* release: the cache's last entries were cleared before its id is free for another */
  atomic_store_explicit(&pm_id_cache[id], NULL, memory_order_release);
}

const char *prd__pm_id_name(uint32_t id)
{
  if (id == 0 || atomic_load_explicit(&pm_id_cache[id], memory_order_acquire) == NULL)
    return NULL;
  return pm_id_name[id];
}

void prd__pm_id_set_limit(uint32_t n)
{
  atomic_store_explicit(&pm_id_limit, n == 0 || n >= PRD_PM_IDS ? PRD_PM_IDS - 1 : n,
                        memory_order_relaxed);
}

/* ---- the report of a free that the page map refused (cache.c section 2) ---------------- */
void prd__pm_bad_free(const prd_cache_t *cp, const void *buf, const char *what)
{
  uintptr_t a = (uintptr_t)buf;
  uintptr_t e = prd__pm_get(buf);
  uint32_t id = prd__pm_id_of(e);
  if (id != 0 && id == ((cp->cache_pm_tag >> PRD_PM_ID_SHIFT) & 0xffffu)) {
    /* one of this cache's slabs, but not the start of a buffer */
    intptr_t off = (intptr_t)(a - prd__pm_first_of(e, a));
    if (off >= 0 && (size_t)off < (size_t)cp->cache_chunks * cp->cache_chunksize) {
      size_t into = (size_t)off % cp->cache_chunksize;
      prd__error("cache %s: %s of buffer %p: not a buffer of this cache (interior, %zu byte%s "
                 "into a buffer; not touched)", cp->cache_name, what, buf, into,
                 into == 1 ? "" : "s");
    } else {
      prd__error("cache %s: %s of buffer %p: not a buffer of this cache (inside one of its "
                 "slabs, outside every buffer; not touched)", cp->cache_name, what, buf);
    }
    return;
  }
  const char *other = id != 0 ? prd__pm_id_name(id) : NULL;
  prd__error("cache %s: %s of buffer %p: not a buffer of this cache (it belongs to %s%s; not "
             "touched)", cp->cache_name, what, buf, other != NULL ? "cache " : "no cache",
             other != NULL ? other : "");
}
