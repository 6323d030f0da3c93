/*
 * slab.c: the slab layer of object caches (Bonwick, "The Slab Allocator", USENIX 1994: seed 002).
 *
 * 1. What.  A cache hands out objects of one size and type.  It keeps them in their
 *    constructed state between uses (002 §2): the constructor runs when an object first
 *    leaves a fresh slab, the destructor when its slab is destroyed, so freeing and
 *    reallocating an object costs no construction.  Memory comes in slabs from the cache's
 *    source vmem arena and goes back a whole slab at a time (002 §3.1, §3.2).  Because the
 *    source is a vmem arena, a cache can hand out any resource made of integers: a cache with
 *    PRD_CACHE_NOTOUCH never touches its "buffers" (002 §7.1, seed 004).
 *
 * 2. Layout of a slab.  chunk = the distance between buffers: the object size rounded up to
 *    the alignment, plus a reserved word when there is a constructor (so the freelist word
 *    never overwrites constructed state, 002 §3.2.2), plus a debug tag when redzones are on.
 *    - Small layout (chunk < 1/8 of a page, memory, no buffer debugging; 002 §3.2.2): the
 *      slab is one page (or the source's quantum if larger), aligned to its size; the
 *      prd_slab_t sits at the end of it, so free() finds the slab by masking the address;
 *      a free buffer's freelist word is its LAST word, where corruption of a freed buffer is
 *      least likely to break the list (002 §3.2.2).
 *
 *          +-------+-------+-----+-------+--------------+-----------+
 *          | color |  buf  | ... |  buf  | unused tail  | prd_slab  |
 *          +-------+-------+-----+-------+--------------+-----------+
 *
 *    - Packed small layout (caches with PRD_CF_PACKED: malloc's size classes, which find a
 *      buffer's slab through their page map and gain nothing from per-buffer records): the
 *      small layout for any chunk, in a slab of a power of two from one page up to 64 KiB
 *      (128 KiB for chunks above 4 KiB), aligned to its size so masking still finds the
 *      prd_slab_t: the smallest size whose waste (all that is not buffers: tail, prd_slab_t,
 *      bitmaps) is at most 1/64 of it, else the size with the least waste if that is at most
 *      1/32 (640 B: 102 buffers in 64 KiB, 256 B not buffers).  Bonwick's 1/8-page cut comes
 *      from one-page slabs, where a large chunk leaves a large tail; several pages remove
 *      that reason.  A chunk no size fits (a power of two of 4 KiB and more: the prd_slab_t
 *      would take a whole buffer) keeps the layouts below.  Buffer debugging turns it off.
 *    - Large layout (everything else, and every cache with buffer debugging, as "verify all
 *      freed addresses by setting the large-object threshold to zero", 002 §6.2): the slab is
 *      only buffers; the prd_slab_t and one prd_bufctl_t per buffer come from the slab
 *      layer's own small caches, and a per-cache hash table maps a buffer to its bufctl
 *      (002 §3.2.3).  The table doubles (in whole pages from os.c, moved by hash.h, the
 *      table code slab.c shares with vmem.c) when it holds more than 2 bufctls per bucket, so
 *      lookups stay O(1) as the cache grows; every buffer of a live slab is in it, allocated
 *      or free, so a double free is found by one flag test.
 *    - Slab size: the smallest multiple of the page (of the source's quantum for NOTOUCH
 *      caches, with room for at least PRD_NOTOUCH_MIN_BUFS buffers) whose unused tail is at
 *      most 1/8 of the slab: 002 §3.2 found 1/8 the sweet spot between internal fragmentation
 *      (tail) and external fragmentation (big slabs are harder to free).  Stats report it.
 *
 * 3. Lists (002 §3.3, seed 001 Fig. 2, seed 003 §3.3.3).  Each slab is on exactly one list:
 *    full (no free buffer), free (no allocated buffer; newest first), or one of
 *    PRD_SLAB_BUCKETS partial lists indexed by (free count - 1) >> cache_bucket_shift, so
 *    that slabs with the fewest free buffers come first, as 003's radix-sorted page lists.
 *    A 64-bit map of the non-empty partial lists gives the best list with one count-trailing-
 *    zeros: allocation picks it in constant time, so nearly-empty slabs are left alone long
 *    enough to drain and be freed.  With at most 65 buffers per slab the lists are exact;
 *    above, a bucket holds a range of 2^shift free counts.  Only when no partial slab exists
 *    is a free slab used (002 §3.4: "no complete slab will be broken up unless all partial
 *    slabs have been depleted"), and only when none is free does the cache grow.  A slab
 *    that a thread allocates from alone is on none of these but on the owned list (section
 *    10), whatever its count, so that no one else picks it.
 *
 * 4. Buffers of a slab.  slab_head is the freelist of buffers ready to hand out; slab_fresh
 *    holds the buffers the constructor has not run on (all of a new slab's buffers when the
 *    cache has a constructor, and any whose constructor failed).  Allocation takes from
 *    slab_head first; a fresh buffer is constructed after the cache lock is dropped (a
 *    constructor may allocate).  At slab destruction the destructor runs on slab_head only.
 *    A small-layout slab of a cache with neither constructor nor debugging links its
 *    buffers a page at a time (slab_extend), when an allocation finds slab_head empty: the
 *    buffers from slab_unlinked on are free and on no list, and nothing has written them.  A
 *    new slab of a malloc class is 4 to 32 pages, and linking all its buffers at once wrote
 *    every page: a short-lived process that allocates a little in a few classes faulted in
 *    their whole first slabs (about 120 pages for /bin/echo).  Every test of "free" knows
 *    the range: a slab has free buffers when a list does or the range is not empty
 *    (prd__slab_has_free), a buffer in it is free (prd__slab_small_is_free), walks count it free.
 *    A buffer freed to the slab layer while it is on a freelist already is a double free:
 *    the large layout sees it in the bufctl's flags; the small layout looks at the buffer's
 *    freelist word first (NULL or a link of the same slab, else it cannot be free) and only
 *    then walks the slab's lists (prd__slab_small_is_free).  Reported, not linked twice.  So
 *    is a buffer that waits in the slab's latent generations (latent.c: the bufctl's
 *    PRD_BC_DEFERRED, the small layout's bitmaps), whose merge will link it.
 *    A small-layout cache with the free mark (cache_mark_key, magazine.c section 15) gets it
 *    in every buffer the slab layer links without a free having written it: a new slab's
 *    buffers (slab_create, slab_extend) and a latent generation's when it merges; so every
 *    free buffer carries the mark, and a free of one never handed out is a double free to
 *    the front end.  The word is the chunk's first or at 64, the freelist word its last.  The word
 *    of a buffer handed out is set to PRD_SLAB_LINK_ALLOCATED (odd: no link is), so that a
 *    buffer whose last word the user never wrote, common in malloc's classes, is not taken
 *    for a free one by its stale link and does not cost a walk of its slab's lists.
 *
 * 4b. Freelist hardening (option hardened; SLUB's CONFIG_SLAB_FREELIST_HARDENED, mimalloc's
 *    secure mode).  A small-layout free buffer's freelist word is where a write after free,
 *    or an overrun of the buffer before it, lands first; stored plain, the next allocation
 *    but one hands out whatever was written there.  Every small-layout cache stores the
 *    word as next XOR the cache's key XOR the word's own address byte-swapped (slab.h
 *    prd__slab_fl_code; the key is a per-process random secret mixed with the cache's
 *    address, so a word copied to another buffer or cache does not decode).  That alone
 *    keeps section 4's double-free test cheap: a buffer's last word as the program left it
 *    (zeros, or a pointer to a neighbour: an array cleared with memset, a list node whose
 *    last field links to the next node) decodes to no link of its slab, where stored plain
 *    it looked like a free buffer's and each free that reached the slab walked the slab's
 *    freelists, quadratic in a slab's buffers (a Perl program that freed a large hash ran 2.5 times
 *    slower, docs/benchmarks.md).  With the option on when the cache is made, every word the slab
 *    layer follows is also validated before use: NULL, or the link word of a buffer of the same
 *    slab (slab_fl_valid, slab_fl_checked).  A word that fails is reported naming the cache, the
 *    slab and the buffer; the buffer is handed out (its own address is sound) and the rest of that
 *    list is set aside, counted as allocated so that the slab is never freed or picked again with
 *    an empty list (slab_fl_abandon): no wild pointer is handed out, and memory known to be corrupt
 *    is never reused.  The check costs a division on each buffer the slab layer hands out, below
 *    the magazines; caches made without the option skip it (the coding is an exclusive or).
 *
 * 5. Coloring (002 §4.3).  Each new slab starts its buffers cache_color bytes in; the color
 *    advances by the alignment and wraps after cache_maxcolor, the unused tail.  NOTOUCH and
 *    page-per-buffer caches are not colored (no hardware cache to spread over; pages).  A
 *    chunk of whole cache lines (64, 128, 192 ... bytes) is aligned to the line whatever the
 *    alignment asked (cache_layout), as malloc's classes are: with 8-byte color steps most
 *    64-byte buffers straddled two lines, two misses for a lookup and a line shared with
 *    the neighbour another thread may be writing.
 *
 * 6. Reclaim (002 §3.4).  A slab whose last buffer comes back goes to the head of the free
 *    list, and allocation takes free slabs from the head, so the tail holds the slabs unused
 *    longest.  The cache tracks the fewest free slabs it had during the current working-set
 *    interval (option slab_working_set, default the paper's 15 s); that many tail slabs went
 *    untouched for the whole interval, and prd_cache_reap() returns them to the source once
 *    the interval is over (the depot working set of seed 004 and libumem, applied to slabs:
 *    no clock is read on the allocation or free paths).  With decay on (option decay_ms) the
 *    interval is at most decay_ms / 2, and the front end's decay job reaps every cache at
 *    that period (cache.c section 4): a slab free for a whole half period goes back to the
 *    heap arena, where its pages are decommitted a pass later (vmem.c section 16) and any
 *    other size class can take them.  The working set is a hedge against a cache that frees
 *    and regrows slabs in a loop; half the decay delay keeps that hedge (a slab the cache
 *    needs again within it stays) without stranding a finished phase's memory for 15 s.
 *    A cache whose deferred buffers have waited in its slabs (latent slabs, latent.c: a grace
 *    period outlasted its CPU layer, as when a reader is preempted inside its section) grows
 *    in bursts that end at once: when the grace period ends, the burst's slabs come free
 *    together.  Such a cache keeps free at most a quarter of its slabs in use (and
 *    PRD_SLAB_BURST_RESERVE) for longer than PRD_SLAB_BURST_HOLD_NS: an allocation's picks
 *    (which merge the latent slabs) or a free that finds more free slabs than that, and
 *    found so at each such look for 50 ms, gives the least recently used back to the source,
 *    down to an eighth (burst_take), instead of holding the burst's memory for a working-set
 *    interval after each stall: docs/benchmarks.md, "Slabs of a stall given back".  The 50 ms
 *    are the working set's hedge at the scale of a stall: a cache whose use swings between
 *    phases faster than that keeps its slabs (at once, such a cache created and destroyed a
 *    slab per few buffers).
 *    A packed cache (section 2) does not wait for the interval: a free of a buffer that
 *    leaves more than PRD_SLAB_PACK_RESERVE (2) slabs free gives the least recently used
 *    free ones back to the heap arena at once, so memory one size class freed serves the
 *    next phase's other sizes; the two kept are the hedge against a class that frees and
 *    regrows a slab in a loop.  Buffers parked in magazines keep their slabs from being
 *    free, so the slab layer also calls the growth hook (cache.c section 4) after every
 *    PRD_SLAB_GROW_BYTES (4 MiB, one heap import) of slabs user caches made and of large
 *    blocks malloc.c took from the heap arena (prd__slab_grown): cache.c then
 *    empties each depot that moved no magazine since its last call, a slice at a time: while
 *    the hook says work is left (slab_grow_more), it is called again at every such slab or
 *    block, not only at the next mark.  When the source cannot supply a
 *    slab for a user cache, the slab layer asks its one out-of-memory hook, which cache.c
 *    sets (cache.c section 4: the flags' policy, Prudence's wait, reclaim of every cache),
 *    whether to try again; the slab layer's own caches fail at once.  The slab layer always
 *    asks vmem with PRD_VM_NOSLEEP: waiting is decided above it.
 *    Free buffers that are memory.  A NOTOUCH cache over the heap arena (the arena's quantum
 *    caches: malloc's blocks of 5-8 pages) hands out ranges of the heap as integers, and its
 *    partial slabs hold free ranges whose pages stay resident: a server whose blocks of
 *    20 KB die at random keeps a few live in most slabs of eight, and the slabs, never wholly
 *    free, never reach the heap arena's decay.  So the decay pass purges them too
 *    (prd__slab_purge, cache.c section 4): a free buffer found free at one pass (AGED) is
 *    decommitted at the next (CLEAN), as the heap arena does with its free segments; a reap
 *    of everything (prd_reap, malloc_trim) decommits every free one.  The allocation that
 *    hands a buffer out clears its marks, and a freed buffer starts without them; the range
 *    of a clean one reads back as zeroes, which the heap's users accept (vmem.c section 16).  The decommits run under cache_lock, which
 *    keeps allocations off the range, PRD_SLAB_PURGE_BATCH a hold: one walk marks the chosen
 *    buffers (PURGE), a second lists their addresses (in pages of its own, os.c), and each
 *    hold decommits the next batch of the list, finding each through the hash; so an
 *    allocation waits for at most one batch, one that takes a marked buffer between two
 *    holds clears its mark, and a slab destroyed meanwhile takes its bufctls out of the
 *    hash.
 *
 * 7. Debugging (002 §6) lives in debug.c, below this layer: the slab layer calls it when a
 *    slab of a debugging cache is made and destroyed (patterns, redzone tags, guard pages),
 *    to unmap a freed slab (the quarantine) and to report a bad free; the checks at the
 *    user's boundary run in the front end (cache.c).  Objects are annotated for valgrind's
 *    memcheck and ASan when they leave (prd__slab_alloc) and come back (prd__slab_free), by
 *    the helpers of annotate.h that every layer shares.
 *    The page map (pagemap.c, below this layer) has every slab of a memory cache: its
 *    entries are set when the slab is created, before any of its buffers is handed out (a
 *    slab whose entries cannot be set is not made: that allocation fails, the next tries
 *    again), and cleared when it is detached for destruction, under cache_lock, before its
 *    memory goes back (section 10 relies on the lock); each names the
 *    cache by the id it took at creation (prd__slab_cache_init; given back in
 *    prd__slab_cache_fini).  So a memory cache's slab is whole pages, aligned to the page.
 *    Hooks: the out-of-memory hook (section 6) is cache.c's, the latent slabs' two hooks
 *    (section 9) are latent.c's.
 *
 * 8. Locking.  cache_lock protects a cache's slab layer: lists, slabs, hash, statistics.
 *    Order (cache.c's reap and list locks come before it, cache.c section 7):
 *        a user cache's cache_lock
 *          -> the internal caches' locks (audit bufctl -> bufctl -> slab) -> vmem -> os
 *    (debug.c's quarantine lock sits between the caches and vmem.)  No cache_lock is held
 *    while calling the source arena, a constructor, destructor or a hook, so those may
 *    allocate from caches.  The statistics are plain fields under cache_lock; the few read
 *    without it (cache_bufs_total, cache_lat_slab_objs) are stored atomically under it.
 *    There is no other lock-free path in this layer, hence no memory-ordering argument beyond
 *    the mutexes' acquire/release (and the hooks', at slab_pick, and the page map's, at
 *    slab_owned: section 10).
 *
 * 9. Latent slabs, the mechanism (seed 001 §4.1; the policy is latent.c's).  A slab holds two
 *    generations of deferred buffers, each with a count and a grace-period state
 *    (slab_lat_n, slab_lat_gp) and recorded outside the buffers, which readers may still
 *    read: a bitmap per generation just before the prd_slab_t (small layout, one bit per
 *    buffer, sized by the layout) or a list through the bufctls flagged PRD_BC_DEFERRED
 *    (large layout).  A slab with any is on the cache's FIFO of latent slabs (cache_latent).
 *    Deferred buffers stay counted in slab_refcnt but count as free for the list of a slab
 *    that has a free buffer (slab pre-movement): a slab whose allocated buffers are all
 *    deferred goes to the free list's tail, where a reap passes it by until they are merged;
 *    a slab with no free buffer is full until then (latent.c section 4).  The call_rcu
 *    path's head (PRD_CF_DEFERHEAD, defer.c) follows the object in its chunk, and the small
 *    layout's freelist word follows the head.  These records and the
 *    lists' primitives are inline in slab.h, shared with latent.c, which decides which
 *    generation a buffer joins, when one is merged and, while a cache has deferred buffers,
 *    which slab an allocation takes: slab_pick and the reap call it through the two hooks it
 *    sets before the first deferral (prd__slab_set_latent_hooks).
 *
 * 10. Thread-owned slabs (mimalloc's thread-local pages, jemalloc's per-thread runs, SLUB's
 *    per-CPU slab).  A layer above that keeps per-thread state passes an owner, an opaque
 *    token (the magazine layer's thread record), and a hint, the slab it allocated from last
 *    (prd__slab_alloc_own).  Under cache_lock the buffers come from the hinted slab while it
 *    is a slab of this cache owned by the caller and has a free buffer; else from a slab
 *    picked as for anyone (section 3: an unowned partial slab, else a free one, else a new
 *    one), which becomes the caller's current slab: it leaves the partial or free lists for
 *    the owned list (cache_owned), where no other allocation looks.  So two threads that
 *    grow one cache at the same time never get buffers of one slab, and their blocks never
 *    share a cache line.  A slab loses its owner, back to the list its count says, when its
 *    owner takes its last free buffer (its next buffers come from another slab), when the
 *    layer above gives it back (prd__slab_disown: the thread's exit, flush, a reap of its
 *    caches; prd__slab_disown_if: the slabs of the threads that did not survive a fork, in
 *    the child's take-over of their caches), and at a reap of everything (prd__slab_reap
 *    with `all`); destroying the cache destroys it with every other slab.  Frees are
 *    unchanged: any thread frees into any slab, an owned one included, which stays owned (a
 *    free slab too: its owner allocates from it next).  Memory: a thread owns at most one
 *    slab of a cache (the layer above keeps one hint per cache and gives back any other,
 *    magazine.c cc_own_set), so at most one slab per thread and cache is kept from the
 *    others and from reaps, and only while the thread lives and uses the cache.  When no
 *    memory for a new slab can be had, an allocation takes a buffer from any thread's owned
 *    slab rather than fail (memory before separation), without taking the slab over.  With
 *    deferred buffers in the cache, the latent slabs' choice (section 9) picks the slab an
 *    owner takes next, not the one it takes from while it has one; the owned slab stays on
 *    the FIFO of latent slabs, whose merges free its deferred buffers for its owner.  Only
 *    memory caches have owners: a NOTOUCH cache's buffers are integers (no cache lines to
 *    share) and have no page-map entries.  The hint may be stale (the slab lost its owner, was
 *    emptied by frees, destroyed, its memory reused) and is checked without reading what may be
 *    freed (slab_owned): the page map first, under cache_lock; an entry of this cache there
 *    means a slab not yet detached, because slab_detach clears the entries under the same lock
 *    (section 7), so its prd_slab_t is live memory, read next (large layout: found through the
 *    hash); a slab still being made has entries before it is on a list, but its slab_owner
 *    (NULL) was written before the release store of its entries, which the page map's acquire
 *    load pairs with.  The hint names the caller's slab when that slab says the caller owns it,
 *    whatever became of the memory in between.  Everything else is under cache_lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "annotate.h"
#include "hash.h"
#include "internal.h"
#include "pagemap.h"
#include "race.h"
#include "slab.h"

#define PRD_SLAB_MIN_ALIGN   8    /* the freelist word is a pointer */
#define SLAB_LINE            64   /* the cache line: chunks of whole lines are aligned to it */
#define PRD_SLAB_LINK_ALLOCATED ((prd_bufctl_t *)(uintptr_t)1)   /* small layout (section 4) */
#define PRD_NOTOUCH_MIN_BUFS 8    /* integer caches: a slab of fewer would grow on most allocs */
#define PRD_SLAB_SMALL_FRAC  8    /* small layout below 1/8 of a page (002 §3.2.2) */
#define PRD_SLAB_WASTE_FRAC  8    /* unused tail at most 1/8 of the slab (002 §3.2) */
#define PRD_SLAB_MAX_SMALL   8192 /* buffers of a small slab at most (64 KiB / 8 B) */
#define PRD_SLAB_PACK_FRAC   64   /* packed: a slab size whose waste is at most 1/64 ... */
#define PRD_SLAB_PACK_WORST  32   /* ... else the least waste, if at most 1/32 (section 2) */
#define PRD_SLAB_PACK_MAX    ((size_t)64 << 10)    /* packed slabs up to 64 KiB ... */
#define PRD_SLAB_PACK_MAX_BIG ((size_t)128 << 10)  /* ... 128 KiB for chunks above 4 KiB */
#define PRD_SLAB_PACK_BIG    4096 /* chunks above it may take 128 KiB: 5120 B, 6144 B need it */
#define PRD_SLAB_PACK_RESERVE 2   /* free slabs a packed cache keeps (section 6) */
#define PRD_SLAB_PURGE_BATCH 16   /* decommits of free buffers under one hold of cache_lock
                                     (section 6): vmem.c's VMEM_DECOMMIT_BATCH */
#define PRD_SLAB_BURST_RESERVE 16 /* free slabs a cache with latent slabs always keeps (section 6) */
#define PRD_SLAB_BURST_HOLD_NS 50000000u   /* ... and how long they must stay past the bound */

/* ---- the slab layer's own caches ------------------------------------------------------- */
static prd_cache_t slab_slab_cache;      /* prd_slab_t of large-layout slabs */
static prd_cache_t slab_bufctl_cache;    /* prd_bufctl_t */
static prd_cache_t slab_audit_cache;     /* prd_bufctl_audit_t (auditing caches) */
static prd__slab_oom_fn *_Atomic slab_oom_hook;   /* cache.c's out-of-memory policy */
static prd__slab_grow_fn *_Atomic slab_grow_hook; /* cache.c's growth reap (section 6) */
static _Atomic uint64_t slab_grown;                /* bytes of user slabs and large blocks
                                                      made since it ran */
static _Atomic bool slab_grow_more;                /* the hook left work for the next slab */

static void slab_disown(prd_cache_t *cp, prd_slab_t *sp);

/* The arena slabs come from.  The slab layer's own caches say NULL: the heap arena, looked
 * up when a slab is needed, so that they exist even if the heap's first creation failed. */
static inline prd_vmem_t *slab_src(const prd_cache_t *cp)
{
  return cp->cache_source != NULL ? cp->cache_source : prd_heap_arena();
}

static size_t slab_source_quantum(prd_vmem_t *vmp)
{
  return vmp != NULL ? prd__vmem_quantum(vmp) : prd__os_page_size();
}

/* ---- lists --------------------------------------------------------------------------------- */
static inline void link_init(prd_slab_link_t *l)
{
  l->sl_next = l->sl_prev = l;
}

/* The latent slabs' hooks (section 9), latent.c's. */
static const prd__slab_latent_hooks_t *_Atomic slab_latent;

void prd__slab_set_latent_hooks(const prd__slab_latent_hooks_t *hooks)
{
  atomic_store_explicit(&slab_latent, hooks, memory_order_release);
}

/* The slab to allocate from: the partial slab with the fewest free buffers, else the newest
 * free slab, else NULL (section 3).  With deferred buffers in latent slabs, latent.c's choice
 * (section 9; seed 001 Fig. 5).  The hooks were stored before the deferral that made
 * cache_lat_slab_objs non-zero released this cache_lock (latent.c lat_hook), and this thread
 * holds it now: the relaxed load sees them. */
static inline prd_slab_t *slab_pick(prd_cache_t *cp)
{
  if (prd_unlikely(cp->cache_lat_slab_objs != 0))
    return atomic_load_explicit(&slab_latent, memory_order_relaxed)->lh_pick(cp);
  return prd__slab_pick_plain(cp);
}

/* ---- the buffer-to-bufctl hash (large layout, 002 §3.2.3) --------------------------------- */
/* The index and the lookup (prd__slab_hash_find) are inline in internal.h: debug.c, below
 * this layer, looks buffers up in the table too, under cache_lock. */
static void hash_insert(prd_cache_t *cp, prd_bufctl_t *bcp)
{
  prd_bufctl_t **bucket = &cp->cache_hash[prd__slab_hash_index(cp, bcp->bc_addr)];
  bcp->bc_hnext = *bucket;
  *bucket = bcp;
  cp->cache_hash_count++;
}

static void hash_remove(prd_cache_t *cp, prd_bufctl_t *bcp)
{
  prd_bufctl_t **pp = &cp->cache_hash[prd__slab_hash_index(cp, bcp->bc_addr)];
  while (*pp != bcp) {
    PRD_ASSERT(*pp != NULL);
    pp = &(*pp)->bc_hnext;
  }
  *pp = bcp->bc_hnext;
  cp->cache_hash_count--;
}

/* Doubles (or more) the table when it averages over 2 bufctls a bucket (hash.h: the table
 * comes from os.c, and if no memory can be had the old table stays). */
static void hash_grow(prd_cache_t *cp)
{
  size_t old_n = cp->cache_hash_mask + 1;
  if (cp->cache_hash_count <= 2 * old_n)
    return;
  size_t new_n = old_n;
  while (new_n < cp->cache_hash_count)
    new_n *= 2;
  new_n *= 2;
  prd_bufctl_t **nt = prd__hash_table_map(new_n);
  if (nt == NULL)
    return;
  prd_bufctl_t **ot = cp->cache_hash;
  cp->cache_hash = nt;
  cp->cache_hash_mask = new_n - 1;
  PRD__HASH_MOVE(prd_bufctl_t, ot, old_n, nt, bc_hnext, prd__slab_hash_index, cp, bc_addr);
  prd__hash_table_unmap(ot, old_n, cp->cache_hash0);
}

/* ---- the freelist word (section 4b) -------------------------------------------------------- */
/* Whether the freelist words the slab layer follows are validated (section 4b): the small
 * layout of a cache made with the option hardened. */
static inline bool slab_fl_checked(const prd_cache_t *cp)
{
  return (cp->cache_flags & (PRD_CF_HARDENED | PRD_CF_HASH)) == PRD_CF_HARDENED;
}

/* Whether a decoded freelist word is NULL or the link word of a buffer of slab sp. */
static bool slab_fl_valid(const prd_cache_t *cp, const prd_slab_t *sp, const prd_bufctl_t *w)
{
  if (w == NULL)
    return true;
  uintptr_t first = (uintptr_t)sp->slab_base + sp->slab_color + cp->cache_link_off;
  uintptr_t a = (uintptr_t)w;
  return a >= first && (a - first) % cp->cache_chunksize == 0 &&
         (a - first) / cp->cache_chunksize < sp->slab_chunks;
}

/* The next buffer on a freelist, for walks: with the key set, a word that is not valid ends
 * the walk (the allocation that reaches it reports it, section 4b). */
static prd_bufctl_t *slab_fl_step(const prd_cache_t *cp, const prd_slab_t *sp,
                                  const prd_bufctl_t *bcp)
{
  prd_bufctl_t *next = prd__slab_fl_next(cp, bcp);
  if (prd_unlikely(slab_fl_checked(cp)) && !slab_fl_valid(cp, sp, next))
    return NULL;
  return next;
}

typedef struct slab_fl_bad {   /* a corrupt word found under the lock, reported after it */
  void *fb_buf;
  prd_slab_t *fb_slab;
  prd_bufctl_t *fb_word;
} slab_fl_bad_t;

/* A freelist of sp holds a corrupt word and is cut at it (lock held): the free buffers no
 * longer reachable, those not on the other list `other`, are counted as allocated, so the
 * slab is never freed nor picked with nothing to give (section 4b).  The buffer whose word
 * was corrupt is the caller's, counted by it. */
static void slab_fl_abandon(prd_cache_t *cp, prd_slab_t *sp, const prd_bufctl_t *other)
{
  uint32_t reach = 0;
  for (const prd_bufctl_t *p = other; p != NULL && reach < sp->slab_chunks;
       p = slab_fl_step(cp, sp, p))
    reach++;
  /* on the lists (the caller's buffer among them): the free ones less the never-linked */
  uint32_t onlists = sp->slab_unlinked - sp->slab_refcnt;
  uint32_t lost = onlists > reach + 1 ? onlists - reach - 1 : 0;
  sp->slab_refcnt += lost;
  cp->cache_bufs_inuse += lost;
}

/* ---- buffers and slabs --------------------------------------------------------------------- */
/* Frees the external structures of a large-layout slab whose buffers are all on its lists. */
static void slab_free_bufctls(prd_cache_t *cp, prd_bufctl_t *list)
{
  while (list != NULL) {
    prd_bufctl_t *next = list->bc_next;
    prd__slab_free(cp->cache_bufctl_cache, list);
    list = next;
  }
}

/* Whether cp's slabs link their buffers a page at a time (section 4): small layout, no
 * constructor run by the slab layer, no debugging. */
static inline bool slab_lazy(const prd_cache_t *cp)
{
  return !(cp->cache_flags & (PRD_CF_HASH | PRD_CF_SLABCTOR | PRD_CF_DEBUG));
}

#define SLAB_LINK_BYTES 4096   /* a lazy slab links about this many bytes of buffers at a time */

/* Links the next page's worth of sp's never-linked buffers onto slab_head, the lowest
 * address first out; false when none is left (lock held, or the slab not yet seen). */
static bool slab_extend(prd_cache_t *cp, prd_slab_t *sp)
{
  uint32_t from = sp->slab_unlinked;
  if (from >= sp->slab_chunks)
    return false;
  uint32_t to = from + (uint32_t)PRD_MAX((size_t)1, SLAB_LINK_BYTES / cp->cache_chunksize);
  to = PRD_MIN(to, sp->slab_chunks);
  char *first = sp->slab_base + sp->slab_color;
  for (uint32_t i = to; i-- > from;) {
    char *buf = first + (size_t)i * cp->cache_chunksize;
    prd_bufctl_t *bcp = (prd_bufctl_t *)(buf + cp->cache_link_off);
    prd__slab_mark(cp, buf);
    prd__slab_fl_set(cp, bcp, sp->slab_head);
    sp->slab_head = bcp;
  }
  sp->slab_unlinked = to;
  return true;
}

/* Makes a slab from the source arena (no lock held).  Its buffers are linked on slab_fresh
 * when the slab layer constructs, else on slab_head, all at once or, for a lazy cache, the
 * first page's worth (section 4).  NULL when the source or an internal cache has no memory:
 * nothing is left allocated. */
static prd_slab_t *slab_create(prd_cache_t *cp, size_t color)
{
  prd_vmem_t *src = slab_src(cp);
  if (src == NULL)
    return NULL;
  char *base = prd_vmem_xalloc(src, cp->cache_slabsize, cp->cache_slab_align, 0, 0, NULL, NULL,
                               PRD_VM_NOSLEEP);
  if (base == NULL)
    return NULL;
  /* a cache of memory writes its slabs: an arena the program made may hand out integers (an
   * id arena from 1), whose "slab" at 0x1000 would fault far from the mistake.  The heap
   * arena and those the library made are memory; others are asked (mincore), per slab */
  if (!(cp->cache_flags & (PRD_CACHE_NOTOUCH | PRD_CF_INTERNAL)) && src != prd_heap_arena() &&
      !prd__os_is_mapped(base, cp->cache_slabsize)) {
    prd__report("cache %s: the slab [%p, %p) from arena %s is not mapped memory (an arena of "
                "integers? a cache of them needs PRD_CACHE_NOTOUCH): not used", cp->cache_name,
                (void *)base, (void *)(base + cp->cache_slabsize), prd__vmem_name(src));
    prd_vmem_xfree(src, base, cp->cache_slabsize);
    return NULL;
  }
  prd__annot_slab_reset(cp, base, cp->cache_slabsize);   /* it may hold another's poison */
  prd_slab_t *sp;
  bool large = (cp->cache_flags & PRD_CF_HASH) != 0;
  if (large) {
    sp = prd__slab_alloc(&slab_slab_cache, PRD_NOSLEEP);
    if (sp == NULL) {
      prd_vmem_xfree(src, base, cp->cache_slabsize);
      return NULL;
    }
  } else {
    sp = (prd_slab_t *)(base + cp->cache_slabsize - sizeof(prd_slab_t));
  }
  sp->slab_cache = cp;
  sp->slab_base = base;
  sp->slab_head = NULL;
  sp->slab_fresh = NULL;
  sp->slab_refcnt = 0;
  sp->slab_chunks = cp->cache_chunks;
  sp->slab_color = (uint32_t)color;
  sp->slab_bucket = PRD_SLAB_ON_FREE;
  sp->slab_owner = NULL;
  sp->slab_lat_n[0] = sp->slab_lat_n[1] = 0;
  sp->slab_lat_gp[0] = sp->slab_lat_gp[1] = 0;
  sp->slab_lat_list[0] = sp->slab_lat_list[1] = NULL;
  if (cp->cache_lat_words != 0)
    memset(prd__slab_lat_map(cp, sp, 0), 0, 2 * cp->cache_lat_words * sizeof(uint64_t));
  prd_bufctl_t **listp = (cp->cache_flags & PRD_CF_SLABCTOR) ? &sp->slab_fresh : &sp->slab_head;
  bool lazy = slab_lazy(cp);
  sp->slab_unlinked = lazy ? 0 : cp->cache_chunks;
  if (lazy)
    (void)slab_extend(cp, sp);
  /* the others: every buffer now, from the last one down, so the lowest address is handed
   * out first */
  for (uint32_t i = lazy ? 0 : cp->cache_chunks; i-- > 0;) {
    char *buf = base + color + (size_t)i * cp->cache_chunksize;
    prd_bufctl_t *bcp;
    if (large) {
      bcp = prd__slab_alloc(cp->cache_bufctl_cache, PRD_NOSLEEP);
      if (bcp == NULL) {
        slab_free_bufctls(cp, *listp);
        prd__slab_free(&slab_slab_cache, sp);
        prd_vmem_xfree(src, base, cp->cache_slabsize);
        return NULL;
      }
      bcp->bc_addr = buf;
      bcp->bc_slab = sp;
      bcp->bc_flags = 0;
      bcp->bc_dstate = 0;
      bcp->bc_hnext = NULL;
      if (cp->cache_flags & PRD_CACHE_AUDIT) {
        prd_bufctl_audit_t *bca = (prd_bufctl_audit_t *)bcp;
        bca->bca_cache = cp;
        bca->bca_ntx = 0;
      }
    } else {
      bcp = (prd_bufctl_t *)(buf + cp->cache_link_off);
      prd__slab_mark(cp, buf);
    }
    prd__slab_fl_set(cp, bcp, *listp);
    *listp = bcp;
  }
  /* in the page map before any of its buffers can be handed out; no memory for a leaf: the
   * slab is undone as when a bufctl is missing (before the debug layer has touched it), so
   * every slab of a memory cache is in the map (pagemap.c section 2) */
  if (cp->cache_pm_tag != 0 && !prd__pm_slab_set(cp, base, cp->cache_slabsize, color)) {
    if (large) {
      slab_free_bufctls(cp, *listp);
      prd__slab_free(&slab_slab_cache, sp);
    }
    prd_vmem_xfree(src, base, cp->cache_slabsize);
    return NULL;
  }
  if (prd_unlikely(cp->cache_flags & PRD_CF_DEBUG))
    prd__debug_slab_create(cp, sp);
  return sp;
}

/* Destroys a slab that is off every list and out of the hash (no lock held): destructs the
 * constructed free buffers, frees the external structures, returns the memory. */
static void slab_destroy(prd_cache_t *cp, prd_slab_t *sp)
{
  char *base = sp->slab_base;
  prd__annot_slab_reset(cp, base, cp->cache_slabsize);   /* the dtor and the source touch it */
  if (cp->cache_dtor != NULL && (cp->cache_flags & PRD_CF_SLABCTOR))
    for (prd_bufctl_t *bcp = sp->slab_head; bcp != NULL; bcp = slab_fl_step(cp, sp, bcp))
      cp->cache_dtor(prd__slab_bufctl_buf(cp, bcp), cp->cache_private);
  if (prd_unlikely(cp->cache_flags & PRD_CF_DEBUG))
    prd__debug_slab_destroy(cp, sp);
  if (cp->cache_flags & PRD_CF_HASH) {
    prd_bufctl_t *head = sp->slab_head, *fresh = sp->slab_fresh;
    prd__slab_free(&slab_slab_cache, sp);
    slab_free_bufctls(cp, head);
    slab_free_bufctls(cp, fresh);
  }
  if (cp->cache_flags & PRD_CACHE_UNMAP)
    prd__debug_unmap(cp, base, cp->cache_slabsize);
  else
    prd_vmem_xfree(slab_src(cp), base, cp->cache_slabsize);
}

/* Takes a slab off its list, out of the page map and its bufctls out of the hash, for
 * destruction (lock held).  Out of the page map here, under the lock, while the memory is
 * still this cache's: a page-map entry of the cache seen under cache_lock then means a slab
 * not detached, whose prd_slab_t may be read (slab_owned, section 10). */
static void slab_detach(prd_cache_t *cp, prd_slab_t *sp)
{
  prd__slab_unlink(cp, sp);
  if (cp->cache_pm_tag != 0)
    prd__pm_slab_clear(sp->slab_base, cp->cache_slabsize);
  if (prd__slab_ndeferred(sp) != 0) {   /* destroyed with deferred buffers (destroy only) */
    prd__slab_link_remove(&sp->slab_lat_link);
    __atomic_store_n(&cp->cache_lat_slab_objs, cp->cache_lat_slab_objs - prd__slab_ndeferred(sp),
                     __ATOMIC_RELAXED);   /* read without the lock by magazine.c */
  }
  if (cp->cache_flags & PRD_CF_HASH) {
    for (prd_bufctl_t *bcp = sp->slab_head; bcp != NULL; bcp = bcp->bc_next)
      hash_remove(cp, bcp);
    for (prd_bufctl_t *bcp = sp->slab_fresh; bcp != NULL; bcp = bcp->bc_next)
      hash_remove(cp, bcp);
  }
  cp->cache_slab_destroys++;
  /* an atomic store under cache_lock: magazine.c section 13 reads it without the lock */
  __atomic_store_n(&cp->cache_bufs_total, cp->cache_bufs_total - sp->slab_chunks,
                   __ATOMIC_RELAXED);
}

/* Destroys a chain of detached slabs linked through slab_link.sl_next (no lock held).  The
 * source's dirty bound purges once, after the last (vmem.c section 16): the chain's slabs
 * first coalesce into whole free ranges, each decommitted with one call, where a purge at
 * each slab's free would decommit the run piecemeal, a madvise (a TLB shootdown on every
 * core the process runs on) for every few slabs of a burst given back. */
static void slab_destroy_chain(prd_cache_t *cp, prd_slab_link_t *chain)
{
  if (chain == NULL)
    return;
  prd__vmem_purge_hold();
  while (chain != NULL) {
    prd_slab_link_t *next = chain->sl_next;
    slab_destroy(cp, prd__slab_of_link(chain));
    chain = next;
  }
  prd__vmem_purge_release();
}

/* Grows the cache by one slab (called and returning with cache_lock held; drops it while it
 * asks the source).  The new slab goes on the free list; false when no memory came. */
static bool cache_grow(prd_cache_t *cp)
{
  size_t color = cp->cache_color;
  cp->cache_color = color + cp->cache_align > cp->cache_maxcolor ? 0 : color + cp->cache_align;
  pthread_mutex_unlock(cp->cache_lock);
  prd_slab_t *sp = slab_create(cp, color);
  if (sp != NULL && !(cp->cache_flags & PRD_CF_INTERNAL))
    prd__slab_grown(cp->cache_slabsize);
  pthread_mutex_lock(cp->cache_lock);
  if (sp == NULL)
    return false;
  if (cp->cache_flags & PRD_CF_HASH) {
    for (prd_bufctl_t *bcp = sp->slab_head; bcp != NULL; bcp = bcp->bc_next)
      hash_insert(cp, bcp);
    for (prd_bufctl_t *bcp = sp->slab_fresh; bcp != NULL; bcp = bcp->bc_next)
      hash_insert(cp, bcp);
    hash_grow(cp);
  }
  prd__slab_list_add(cp, sp, PRD_SLAB_ON_FREE);
  cp->cache_slab_creates++;
  /* atomic store under cache_lock, as in slab_detach */
  __atomic_store_n(&cp->cache_bufs_total, cp->cache_bufs_total + sp->slab_chunks,
                   __ATOMIC_RELAXED);
  uint64_t nslabs = cp->cache_nfull + cp->cache_npartial + cp->cache_nfree + cp->cache_nowned;
  if (nslabs > cp->cache_slabs_peak)
    cp->cache_slabs_peak = nslabs;
  return true;
}

/* ---- reclaiming (002 §3.4) ------------------------------------------------------------------ */
/* Detaches up to n free slabs onto chain (linked through slab_link.sl_next, for
 * slab_destroy_chain once the lock is dropped), from the least recently used; returns the
 * chain.  A slab on the free list ahead of time (section 9) keeps its pages until its deferred
 * buffers are merged (latent.c, when their grace period has ended: the hooks are set, as in
 * slab_pick).  cache_lock held. */
static prd_slab_link_t *free_tail_take(prd_cache_t *cp, uint64_t n, prd_slab_link_t *chain)
{
  for (prd_slab_link_t *l = cp->cache_free.sl_prev, *prev; n > 0 && l != &cp->cache_free;
       l = prev) {
    prev = l->sl_prev;
    prd_slab_t *sp = prd__slab_of_link(l);
    if (prd__slab_ndeferred(sp) != 0)
      (void)atomic_load_explicit(&slab_latent, memory_order_relaxed)->lh_merge_safe(cp, sp);
    if (sp->slab_refcnt != 0)
      continue;
    slab_detach(cp, sp);
    sp->slab_link.sl_next = chain;
    chain = &sp->slab_link;
    n--;
  }
  return chain;
}

/* Section 6's bound for a cache whose deferred buffers have waited in its slabs: once the free
 * slabs have stayed beyond a quarter of the slabs in use (and PRD_SLAB_BURST_RESERVE) for
 * PRD_SLAB_BURST_HOLD_NS, those past an eighth go onto chain, the least recently used first.
 * cache_lock held.  The clock is read only while the cache is past the bound. */
static prd_slab_link_t *burst_take(prd_cache_t *cp, prd_slab_link_t *chain)
{
  if (prd_likely(cp->cache_lat_slab_merges == 0) || (cp->cache_flags & PRD_CF_PACKED))
    return chain;
  uint64_t used = cp->cache_nfull + cp->cache_npartial + cp->cache_nowned;
  if (cp->cache_nfree <= PRD_MAX((uint64_t)PRD_SLAB_BURST_RESERVE, used / 4)) {
    cp->cache_burst_ns = 0;
    return chain;
  }
  uint64_t now = prd__now_ns();
  if (cp->cache_burst_ns == 0 || now - cp->cache_burst_ns < PRD_SLAB_BURST_HOLD_NS) {
    if (cp->cache_burst_ns == 0)
      cp->cache_burst_ns = now;
    return chain;
  }
  cp->cache_burst_ns = 0;
  uint64_t keep = PRD_MAX((uint64_t)PRD_SLAB_BURST_RESERVE, used / 8);
  return free_tail_take(cp, cp->cache_nfree - keep, chain);
}

/* Returns the free slabs outside the working set (all of them when `all`) to the source.
 * The working set (section 6, as the depot's of seed 004 / libumem): cache_free_min is the
 * fewest free slabs the cache had since the current interval began; that many slabs at the
 * tail of the free list (it is newest first) were not touched for the whole interval.  When
 * an interval has passed, a reap may free that many, and a new interval begins. */
void prd__slab_reap(prd_cache_t *cp, bool all)
{
  uint64_t ws = (uint64_t)prd__opt(slab_working_set) * 1000000ull;
  uint64_t decay = (uint64_t)prd__opt(decay_ms) * 1000000ull / 2;
  if (decay != 0 && decay < ws)
    ws = decay;   /* decay's half period bounds the working set (section 6) */
  uint64_t now = prd__now_ns();
  prd_slab_link_t *chain = NULL;
  pthread_mutex_lock(cp->cache_lock);
  /* a reap of everything takes the threads' current slabs back too (section 10) */
  while (all && !prd__slab_link_empty(&cp->cache_owned))
    slab_disown(cp, prd__slab_of_link(cp->cache_owned.sl_next));
  uint64_t n = cp->cache_nfree;
  if (!all && ws != 0) {
    if (now - cp->cache_ws_start_ns >= ws) {
      cp->cache_ws_reapable = cp->cache_free_min;
      cp->cache_free_min = cp->cache_nfree;
      cp->cache_ws_start_ns = now;
    }
    n = PRD_MIN(n, cp->cache_ws_reapable);
    cp->cache_ws_reapable -= n;
  }
  chain = free_tail_take(cp, n, chain);
  pthread_mutex_unlock(cp->cache_lock);
  slab_destroy_chain(cp, chain);
}

/* One walk of cp's slabs with free buffers (cache_lock held): every free buffer of the large
 * layout.  Without `addrs`, the aged ones not clean (every one not clean when `all`) are
 * marked PURGE and counted, the others aged; with it, the addresses of at most n marked ones
 * go there, and their number is returned. */
static size_t purge_walk(prd_cache_t *cp, bool all, uintptr_t *addrs, size_t n)
{
  size_t k = 0;
  uintptr_t pmask = prd__os_page_size() - 1;
  for (int b = -1; b < PRD_SLAB_BUCKETS; b++) {
    prd_slab_link_t *head = b < 0 ? &cp->cache_free : &cp->cache_partial[b];
    for (prd_slab_link_t *l = head->sl_next; l != head; l = l->sl_next) {
      for (prd_bufctl_t *bcp = prd__slab_of_link(l)->slab_head; bcp != NULL;
           bcp = bcp->bc_next) {
        uint32_t f = bcp->bc_flags;
        if (addrs != NULL) {
          if (f & PRD_BC_PURGE) {
            addrs[k++] = (uintptr_t)bcp->bc_addr;
            if (k == n)
              return k;
          }
        } else if (!(f & PRD_BC_CLEAN) && ((uintptr_t)bcp->bc_addr & pmask) == 0) {
          if ((f & PRD_BC_AGED) || all) {
            bcp->bc_flags = f | PRD_BC_PURGE;
            k++;
          } else {
            bcp->bc_flags = f | PRD_BC_AGED;
          }
        }
      }
    }
  }
  return k;
}

size_t prd__slab_purge(prd_cache_t *cp, bool all)
{
  size_t page = prd__os_page_size();
  if (!(cp->cache_flags & PRD_CACHE_NOTOUCH) || cp->cache_source != prd_heap_arena() ||
      cp->cache_chunksize % page != 0)
    return 0;
  pthread_mutex_lock(cp->cache_lock);
  size_t n = purge_walk(cp, all, NULL, 0);
  pthread_mutex_unlock(cp->cache_lock);
  if (n == 0)
    return 0;
  /* the chosen ones' addresses, so that each hold finds its batch through the hash instead
   * of walking the lists again (a slab may go, and its bufctls with it, between two holds);
   * no room for the list: the marks stay, and the next pass tries again */
  size_t bytes = PRD_P2ROUNDUP(n * sizeof(uintptr_t), page);
  uintptr_t *addrs = prd__os_map(bytes);
  if (addrs == NULL)
    return 0;
  PRD_RACE();   /* race widening (race.h): allocations between the holds */
  pthread_mutex_lock(cp->cache_lock);
  n = purge_walk(cp, all, addrs, n);
  pthread_mutex_unlock(cp->cache_lock);
  size_t done = 0;
  for (size_t i = 0; i < n; i += PRD_SLAB_PURGE_BATCH) {
    PRD_RACE();
    pthread_mutex_lock(cp->cache_lock);
    for (size_t j = i; j < n && j < i + PRD_SLAB_PURGE_BATCH; j++) {
      /* allocated since (its marks cleared), or its slab gone (no bufctl, or another's) */
      prd_bufctl_t *bcp = prd__slab_hash_find(cp, (void *)addrs[j]);
      if (bcp == NULL || !(bcp->bc_flags & PRD_BC_PURGE))
        continue;
      /* a refusal (EPERM from a seccomp filter) leaves it resident: not marked clean, tried
       * again at the next pass, as the heap arena does */
      bool ok = prd__os_decommit(bcp->bc_addr, cp->cache_chunksize) == 0;
      bcp->bc_flags = (bcp->bc_flags & ~PRD_BC_PURGE) | (ok ? PRD_BC_CLEAN : 0);
      done += ok;
    }
    pthread_mutex_unlock(cp->cache_lock);
  }
  prd__os_unmap(addrs, bytes);
  return done * cp->cache_chunksize;
}

void prd__slab_set_oom_hook(prd__slab_oom_fn *fn)
{
  atomic_store_explicit(&slab_oom_hook, fn, memory_order_release);
}

void prd__slab_set_grow_hook(prd__slab_grow_fn *fn)
{
  atomic_store_explicit(&slab_grow_hook, fn, memory_order_release);
}

/* A user cache made a slab, or malloc.c took a large block from the heap arena (which makes
 * no slab), of `bytes` (no lock held): every PRD_SLAB_GROW_BYTES of them the growth hook
 * (section 6) with mark set, and at each one while it left work, without.  The count and the
 * flag are relaxed hints: two threads crossing the mark together may both call the hook,
 * whose reap takes a try-lock, a lost reset only calls it early, and a stale flag calls it
 * once more or waits for the next mark. */
void prd__slab_grown(size_t bytes)
{
  uint64_t n = atomic_fetch_add_explicit(&slab_grown, bytes, memory_order_relaxed);
  bool mark = n + bytes >= PRD_SLAB_GROW_BYTES;
  if (!mark && !atomic_load_explicit(&slab_grow_more, memory_order_relaxed))
    return;
  if (mark)
    atomic_store_explicit(&slab_grown, 0, memory_order_relaxed);
  prd__slab_grow_fn *fn = atomic_load_explicit(&slab_grow_hook, memory_order_acquire);
  if (fn != NULL)
    atomic_store_explicit(&slab_grow_more, fn(mark), memory_order_relaxed);
}

/* ---- thread-owned slabs (section 10) -------------------------------------------------------- */
/* The slab of cp that holds address `hint` when the page map has it as a slab of cp and
 * `owner` owns it, else NULL (cache_lock held).  The page map first: an entry of cp seen
 * under cache_lock is a slab not yet detached (slab_detach clears it under the lock), whose
 * prd_slab_t is live memory; a slab still being made (its entries set, not yet on a list) has
 * slab_owner NULL, written before the release store of its entries that the acquire load of
 * prd__pm_get pairs with.  So a stale hint never reads freed memory. */
static prd_slab_t *slab_owned(prd_cache_t *cp, const void *hint, const void *owner)
{
  if (hint == NULL || cp->cache_pm_tag == 0)
    return NULL;
  uintptr_t e = prd__pm_get(hint);
  if ((uint32_t)e != cp->cache_pm_tag)
    return NULL;
  prd_slab_t *sp;
  if (cp->cache_flags & PRD_CF_HASH) {
    prd_bufctl_t *bcp = prd__slab_hash_find(cp, (void *)prd__pm_first_of(e, (uintptr_t)hint));
    if (bcp == NULL)   /* being made: not in the hash yet */
      return NULL;
    sp = bcp->bc_slab;
  } else {
    sp = prd__slab_small(cp, hint);
  }
  return sp->slab_owner == owner ? sp : NULL;
}

/* sp, partial or free and unowned, becomes owner's current slab (lock held). */
static void slab_own(prd_cache_t *cp, prd_slab_t *sp, const void *owner)
{
  sp->slab_owner = owner;
  prd__slab_relist(cp, sp);
}

/* sp loses its owner and goes to the list its count says (lock held). */
static void slab_disown(prd_cache_t *cp, prd_slab_t *sp)
{
  sp->slab_owner = NULL;
  prd__slab_relist(cp, sp);
}

/* An owned slab with a buffer to hand out, for an allocation that found no memory for a new
 * slab (lock held): memory before the separation of threads. */
static prd_slab_t *slab_pick_owned(prd_cache_t *cp)
{
  for (prd_slab_link_t *l = cp->cache_owned.sl_next; l != &cp->cache_owned; l = l->sl_next) {
    prd_slab_t *sp = prd__slab_of_link(l);
    if (prd__slab_has_free(sp))
      return sp;
  }
  return NULL;
}

void prd__slab_disown(prd_cache_t *cp, const void *owner, void *slab)
{
  if (slab == NULL || cp->cache_pm_tag == 0)
    return;
  pthread_mutex_lock(cp->cache_lock);
  prd_slab_t *sp = slab_owned(cp, slab, owner);
  if (sp != NULL)
    slab_disown(cp, sp);
  pthread_mutex_unlock(cp->cache_lock);
}

void prd__slab_disown_if(prd_cache_t *cp, bool (*gone)(const void *owner))
{
  pthread_mutex_lock(cp->cache_lock);
  for (prd_slab_link_t *l = cp->cache_owned.sl_next, *next; l != &cp->cache_owned; l = next) {
    next = l->sl_next;   /* a slab given back leaves the list */
    prd_slab_t *sp = prd__slab_of_link(l);
    if (gone(sp->slab_owner))
      slab_disown(cp, sp);
  }
  pthread_mutex_unlock(cp->cache_lock);
}

/* The allocation miss: no partial or free slab (cache_lock held).  Grows the cache; when the
 * source is out of memory, a user cache asks the out-of-memory hook (section 6) with the lock
 * dropped whether to try again.  Returns a slab with a free buffer with the lock held, or
 * NULL with the lock released and errno ENOMEM. */
static PRD_NOINLINE prd_slab_t *slab_alloc_miss(prd_cache_t *cp, int flags)
{
  unsigned oom_state = 0;   /* the hook's, for this allocation */
  for (;;) {
    prd_slab_t *sp = slab_pick(cp);
    if (sp != NULL)
      return sp;
    if (cache_grow(cp))
      continue;
    /* no memory for a slab: another thread's current slab rather than fail (section 10) */
    if ((sp = slab_pick_owned(cp)) != NULL)
      return sp;
    prd__slab_oom_fn *oom = atomic_load_explicit(&slab_oom_hook, memory_order_acquire);
    if (oom != NULL && !(cp->cache_flags & PRD_CF_INTERNAL)) {
      pthread_mutex_unlock(cp->cache_lock);
      bool again = oom(cp, flags, &oom_state);
      pthread_mutex_lock(cp->cache_lock);
      if (again)
        continue;
    }
    cp->cache_alloc_fails++;
    pthread_mutex_unlock(cp->cache_lock);
    errno = ENOMEM;
    return NULL;
  }
}

/* ---- the slab layer proper ------------------------------------------------------------------ */
/* Takes up to `want` buffers into out[] under one hold of cache_lock (a refill of an object
 * cache above takes many at once, seed 001 Algorithm 1 lines 15-25).  Buffers that need their
 * constructor get it after the lock is dropped; one whose constructor fails goes back.
 * Returns how many (at least 1), or 0 with errno ENOMEM.
 * With an owner (section 10): from owner's current slab, *slabp, while it is one and has a
 * buffer; else from a slab picked as without one, which becomes owner's current slab; a
 * current slab that runs out of free buffers loses its owner.  *slabp is then owner's current
 * slab, or NULL. */
size_t prd__slab_alloc_own(prd_cache_t *cp, void **out, size_t want, int flags,
                           const void *owner, void **slabp)
{
  size_t nc = 0, nf = 0;   /* constructed ones from the front of out[], fresh from the back */
  slab_fl_bad_t bad = { NULL, NULL, NULL };   /* a corrupt freelist word, reported unlocked */
  pthread_mutex_lock(cp->cache_lock);
  prd_slab_t *own = owner != NULL ? slab_owned(cp, *slabp, owner) : NULL;
  while (nc + nf < want) {
    prd_slab_t *sp = own;
    if (sp == NULL) {
      sp = slab_pick(cp);
      if (prd_unlikely(sp == NULL)) {
        /* a refill that has some buffers grows once more, never waits or fails */
        if (nc + nf > 0) {
          if (cache_grow(cp))
            continue;
          break;
        }
        sp = slab_alloc_miss(cp, flags);
        if (sp == NULL) {
          if (owner != NULL)
            *slabp = NULL;
          return 0;
        }
      }
      /* a memory cache's (the page map finds it again); another's only when memory is out */
      if (owner != NULL && sp->slab_owner == NULL && cp->cache_pm_tag != 0) {
        slab_own(cp, sp, owner);
        own = sp;
      }
    }
    while (nc + nf < want &&
           (sp->slab_head != NULL || sp->slab_fresh != NULL || slab_extend(cp, sp))) {
      prd_bufctl_t *bcp = sp->slab_head;
      bool fresh = false;
      prd_bufctl_t **listp = &sp->slab_head;
      if (prd_unlikely(bcp == NULL)) {
        listp = &sp->slab_fresh;
        bcp = sp->slab_fresh;
        fresh = true;
      }
      prd_bufctl_t *next = prd__slab_fl_next(cp, bcp);
      if (prd_unlikely(slab_fl_checked(cp)) && !slab_fl_valid(cp, sp, next)) {
        if (bad.fb_buf == NULL)
          bad = (slab_fl_bad_t){ (char *)bcp - cp->cache_link_off, sp, next };
        next = NULL;
        slab_fl_abandon(cp, sp, fresh ? sp->slab_head : sp->slab_fresh);
      }
      *listp = next;
      sp->slab_refcnt++;
      void *buf;
      if (cp->cache_flags & PRD_CF_HASH) {
        bcp->bc_flags = (bcp->bc_flags & ~PRD_BC_PURGED) | PRD_BC_ALLOC;
        buf = bcp->bc_addr;
      } else {
        buf = (char *)bcp - cp->cache_link_off;
        bcp->bc_next = PRD_SLAB_LINK_ALLOCATED;
      }
      if (prd_likely(!fresh))
        out[nc++] = buf;
      else
        out[want - 1 - nf++] = buf;
    }
    if (sp == own && !prd__slab_has_free(sp)) {
      slab_disown(cp, sp);   /* drained: the next buffers come from another slab */
      own = NULL;
    } else {
      prd__slab_relist(cp, sp);
    }
  }
  cp->cache_allocs += nc + nf;
  cp->cache_bufs_inuse += nc + nf;
  if (owner != NULL)
    *slabp = own != NULL ? own->slab_base : NULL;
  /* the picks above merged latent slabs whose grace period ended: a burst's slabs, free now */
  prd_slab_link_t *burst = burst_take(cp, NULL);
  pthread_mutex_unlock(cp->cache_lock);
  slab_destroy_chain(cp, burst);
  if (prd_unlikely(bad.fb_buf != NULL))
    prd__error("cache %s: corrupt freelist word in free buffer %p of slab %p (it decodes to %p, "
               "no buffer of the slab): written after free, or by an overrun of the buffer "
               "before it; the slab's other free buffers are set aside", cp->cache_name,
               bad.fb_buf, (void *)bad.fb_slab, (void *)bad.fb_word);
  for (size_t i = 0; i < nc; i++)
    prd__annot_object_out(cp, out[i]);
  /* the fresh ones, out[want - nf .. want), get their constructor now, with no lock held
   * (section 4), in place: one whose constructor fails leaves a NULL there */
  for (size_t i = want - nf; i < want; i++) {
    void *buf = out[i];
    prd__annot_object_out(cp, buf);
    if (prd_likely(cp->cache_ctor(buf, cp->cache_private, flags) == 0))
      continue;
    out[i] = NULL;
    /* the constructor failed: the buffer goes back unconstructed */
    pthread_mutex_lock(cp->cache_lock);
    prd_bufctl_t *bcp;
    prd_slab_t *sp;
    if (cp->cache_flags & PRD_CF_HASH) {
      bcp = prd__slab_hash_find(cp, buf);
      bcp->bc_flags &= ~PRD_BC_ALLOC;
      sp = bcp->bc_slab;
    } else {
      bcp = (prd_bufctl_t *)((char *)buf + cp->cache_link_off);
      sp = prd__slab_small(cp, buf);
    }
    prd__slab_fl_set(cp, bcp, sp->slab_fresh);
    sp->slab_fresh = bcp;
    sp->slab_refcnt--;
    prd__slab_relist(cp, sp);
    cp->cache_allocs--;
    cp->cache_bufs_inuse--;
    cp->cache_alloc_fails++;
    pthread_mutex_unlock(cp->cache_lock);
  }
  /* then they join the constructed ones at the front.  The write index never passes the
   * read index (it starts at nc <= want - nf and moves at most once per read), so no entry
   * is overwritten before it is read */
  for (size_t i = want - nf; i < want; i++)
    if (out[i] != NULL)
      out[nc++] = out[i];
  if (nc == 0)
    errno = ENOMEM;
  return nc;
}

size_t prd__slab_alloc_bulk(prd_cache_t *cp, void **out, size_t want, int flags)
{
  return prd__slab_alloc_own(cp, out, want, flags, NULL, NULL);
}

void *prd__slab_alloc(prd_cache_t *cp, int flags)
{
  void *buf;
  return prd__slab_alloc_bulk(cp, &buf, 1, flags) == 1 ? buf : NULL;
}

static _Atomic uint64_t slab_fl_walks;   /* prd__slab_small_is_free's walks (tests) */

uint64_t prd__slab_fl_walks(void)
{
  return atomic_load_explicit(&slab_fl_walks, memory_order_relaxed);
}

/* Small layout: whether the buffer of link word bcp is on a freelist of its slab already, i.e.
 * coming back again is a double free (section 4; malloc's double frees without debugging,
 * src/malloc.c section 4).  A free buffer's link word is NULL or the link word of another
 * buffer of the same slab; an allocated buffer's last word is the user's data, which rarely
 * looks like that, so the freelists are walked (at most slab_chunks steps) only then.  Lock
 * held.  A slab with no buffer allocated has every buffer free. */
bool prd__slab_small_is_free(const prd_cache_t *cp, const prd_slab_t *sp,
                             const prd_bufctl_t *bcp)
{
  if (sp->slab_refcnt == 0)
    return true;
  const char *buf = (const char *)bcp - cp->cache_link_off;
  if ((size_t)(buf - (sp->slab_base + sp->slab_color)) / cp->cache_chunksize >= sp->slab_unlinked)
    return true;   /* never linked, never handed out (section 4) */
  prd_bufctl_t *w = bcp->bc_next;
  prd__annot_defined(&w, sizeof(w));   /* user data may be undefined for memcheck */
  w = prd__slab_fl_code(cp, bcp, w);
  if (w != NULL && prd__slab_small(cp, w) != sp)
    return false;
  atomic_fetch_add_explicit(&slab_fl_walks, 1, memory_order_relaxed);
  const prd_bufctl_t *heads[2] = { sp->slab_head, sp->slab_fresh };
  for (int h = 0; h < 2; h++) {
    uint32_t n = 0;
    for (const prd_bufctl_t *p = heads[h]; p != NULL && n <= sp->slab_chunks;
         p = slab_fl_step(cp, sp, p), n++)
      if (p == bcp)
        return true;
  }
  return false;
}

/* Frees n buffers to their slabs under one hold of cache_lock (a flush of an object cache
 * above gives many back at once).  A bad free is reported with the lock dropped and skipped.
 * The small layout's link words are prefetched SLAB_FREE_AHEAD buffers ahead: a reap hands
 * back buffers freed long ago, whose lines are cold, and each is read (the freelist check)
 * and written (the link); fetched one after the other those misses were most of a reap's
 * time.  A prefetch never faults, whatever the pointer. */
#define SLAB_FREE_AHEAD 8

/* A deferral the slab layer refuses (latent.c's and the free path's below), reported naming
 * why (lock not held). */
PRD_NOINLINE PRD_COLD void prd__slab_bad_deferral(prd_cache_t *cp, void *buf, const char *why)
{
  prd__error("cache %s: deferred free of buffer %p: %s (ignored)", cp->cache_name, buf, why);
}

/* A free of a buffer that waits in its slab's latent generations (latent.c): its merge frees
 * it when its grace period has ended, so this free is dropped (lock not held). */
static PRD_NOINLINE PRD_COLD void slab_free_deferred(prd_cache_t *cp, void *buf)
{
  prd__error("cache %s: free of buffer %p: it is deferred and not back in its slab yet (not "
             "freed)", cp->cache_name, buf);
}

/* The free of n buffers; `deferral`: they are deferred buffers whose grace period has ended
 * already (latent.c), so a bad one is reported as a bad deferral. */
static void slab_free_bulk(prd_cache_t *cp, void *const *bufs, size_t n, bool deferral)
{
  bool hash = (cp->cache_flags & PRD_CF_HASH) != 0;
  prd_slab_link_t *chain = NULL;   /* packed caches' free slabs beyond the reserve */
  pthread_mutex_lock(cp->cache_lock);
  if (!hash)
    for (size_t i = 0; i < n && i < SLAB_FREE_AHEAD; i++)
      __builtin_prefetch((char *)bufs[i] + cp->cache_link_off, 1);
  for (size_t i = 0; i < n; i++) {
    void *buf = bufs[i];
    if (!hash && i + SLAB_FREE_AHEAD < n)
      __builtin_prefetch((char *)bufs[i + SLAB_FREE_AHEAD] + cp->cache_link_off, 1);
    prd_slab_t *sp;
    prd_bufctl_t *bcp;
    if (hash) {
      bcp = prd__slab_hash_find(cp, buf);
      if (prd_unlikely(bcp == NULL ||
                       (bcp->bc_flags & (PRD_BC_ALLOC | PRD_BC_DEFERRED)) != PRD_BC_ALLOC)) {
        bool waits = bcp != NULL && (bcp->bc_flags & PRD_BC_DEFERRED);   /* under the lock */
        pthread_mutex_unlock(cp->cache_lock);
        if (deferral)
          prd__slab_bad_deferral(cp, buf, waits ? PRD_SLAB_WHY_TWICE
                                        : bcp != NULL ? PRD_SLAB_WHY_FREED
                                                      : PRD_SLAB_WHY_FOREIGN);
        else if (waits)
          slab_free_deferred(cp, buf);
        else
          prd__debug_bad_free(cp, buf, bcp, false);
        pthread_mutex_lock(cp->cache_lock);
        continue;
      }
      bcp->bc_flags &= ~PRD_BC_ALLOC;
      sp = bcp->bc_slab;
    } else {
      sp = prd__slab_small(cp, buf);
      if (prd_unlikely(sp->slab_cache != cp)) {
        pthread_mutex_unlock(cp->cache_lock);
        prd__debug_bad_free(cp, buf, NULL, false);
        pthread_mutex_lock(cp->cache_lock);
        continue;
      }
      bcp = (prd_bufctl_t *)((char *)buf + cp->cache_link_off);
      if (prd_unlikely(prd__slab_small_is_free(cp, sp, bcp))) {
        pthread_mutex_unlock(cp->cache_lock);
        if (deferral)
          prd__slab_bad_deferral(cp, buf, PRD_SLAB_WHY_FREED);
        else
          prd__error("cache %s: double free of buffer %p (it is already free in its slab; "
                     "not freed again)", cp->cache_name, buf);
        pthread_mutex_lock(cp->cache_lock);
        continue;
      }
      /* deferred and waiting in its slab: its merge will free it (the large layout's
       * PRD_BC_DEFERRED test above) */
      if (prd_unlikely(prd__slab_small_is_deferred(cp, sp, buf))) {
        pthread_mutex_unlock(cp->cache_lock);
        if (deferral)
          prd__slab_bad_deferral(cp, buf, PRD_SLAB_WHY_TWICE);
        else
          slab_free_deferred(cp, buf);
        pthread_mutex_lock(cp->cache_lock);
        continue;
      }
    }
    prd__slab_put(cp, sp, bcp);
    if (deferral)   /* a deferred buffer whose grace period ended before it reached here */
      cp->cache_lat_safe_frees++;
    if (prd_unlikely(sp->slab_refcnt == 0) && (cp->cache_flags & PRD_CACHE_UNMAP)) {
      /* synchronous unmapping (002 §6.5): the free slab is destroyed at once */
      slab_detach(cp, sp);
      pthread_mutex_unlock(cp->cache_lock);
      slab_destroy(cp, sp);
      pthread_mutex_lock(cp->cache_lock);
      continue;
    }
    prd__slab_relist(cp, sp);
    /* a packed cache gives a free slab beyond its reserve back at once (section 6) */
    if (prd_unlikely(sp->slab_bucket == PRD_SLAB_ON_FREE) && (cp->cache_flags & PRD_CF_PACKED) &&
        cp->cache_nfree > PRD_SLAB_PACK_RESERVE)
      chain = free_tail_take(cp, cp->cache_nfree - PRD_SLAB_PACK_RESERVE, chain);
  }
  chain = burst_take(cp, chain);
  pthread_mutex_unlock(cp->cache_lock);
  slab_destroy_chain(cp, chain);
}

void prd__slab_free_bulk(prd_cache_t *cp, void *const *bufs, size_t n)
{
  slab_free_bulk(cp, bufs, n, false);
}

void prd__slab_free_bulk_deferred(prd_cache_t *cp, void *const *bufs, size_t n)
{
  slab_free_bulk(cp, bufs, n, true);
}

void prd__slab_free(prd_cache_t *cp, void *buf)
{
  prd__slab_free_bulk(cp, &buf, 1);
}

/* ---- creating and destroying caches --------------------------------------------------------- */
/* Buffers of chunk bytes in a small-layout slab of slabsize bytes, after the prd_slab_t and
 * the two latent bitmaps (section 9), whose words go in *lat_words. */
static size_t small_chunks(size_t slabsize, size_t chunk, size_t *lat_words)
{
  size_t avail = slabsize - sizeof(prd_slab_t);
  *lat_words = (avail / chunk + 63) / 64;
  if (2 * *lat_words * sizeof(uint64_t) >= avail)
    return 0;
  return (avail - 2 * *lat_words * sizeof(uint64_t)) / chunk;
}

/* A packed cache's small-layout slab size (section 2): the smallest power of two from unit
 * to the bound whose waste (everything that is not a buffer: tail, prd_slab_t, bitmaps) is
 * at most 1/PRD_SLAB_PACK_FRAC of it, else the one with the least waste if that is at most
 * 1/PRD_SLAB_PACK_WORST; 0 when none is (the cache takes the usual layouts). */
static size_t pack_slabsize(size_t chunk, size_t unit)
{
  size_t max = chunk > PRD_SLAB_PACK_BIG ? PRD_SLAB_PACK_MAX_BIG : PRD_SLAB_PACK_MAX;
  size_t best = 0, best_waste = 0, lw;
  for (size_t s = unit; s <= max; s *= 2) {
    size_t n = small_chunks(s, chunk, &lw);
    if (n == 0)
      continue;
    if (n > PRD_SLAB_MAX_SMALL)
      break;
    size_t waste = s - n * chunk;
    if (waste * PRD_SLAB_PACK_FRAC <= s)
      return s;
    if (waste * PRD_SLAB_PACK_WORST <= s && (best == 0 || waste * best < best_waste * s)) {
      best = s;
      best_waste = waste;
    }
  }
  return best;
}

/* Chooses chunk, slab size, layout and color range (section 2).  0, or -1 (EINVAL). */
static int cache_layout(prd_cache_t *cp, size_t size, size_t align)
{
  uint32_t f = cp->cache_flags;
  size_t page = prd__os_page_size();
  size_t q = slab_source_quantum(cp->cache_source);
  bool notouch = (f & PRD_CACHE_NOTOUCH) != 0;
  /* a NOTOUCH cache's buffers are integers, not memory: only the large layout (records out
   * of the slab, found through the hash) leaves them untouched, whatever the chunk's size
   * against the source's quantum (the small layout would write its slab record and freelist
   * words at those addresses) */
  if (notouch) {
    cp->cache_flags |= PRD_CF_HASH;
    f = cp->cache_flags;
  }
  size_t minalign = notouch ? 1 : PRD_SLAB_MIN_ALIGN;
  if (align < minalign)
    align = minalign;
  if (f & PRD_CACHE_PAGEBUF)
    align = page;
  size_t chunk;
  if (f & PRD_CF_BUFTAG)
    chunk = PRD_P2ROUNDUP(size, sizeof(uint64_t)) + sizeof(prd_buftag_t);
  else if (notouch || (f & PRD_CF_HASH))
    chunk = size;
  else if (f & PRD_CF_SLABCTOR)
    chunk = PRD_P2ROUNDUP(size, sizeof(void *)) + sizeof(void *);   /* the reserved word */
  else
    chunk = PRD_MAX(size, sizeof(void *));
  /* the call_rcu path's head after everything else (section 9), and the small layout's
   * freelist word after the head: a misused buffer (freed while its deferral is queued, or
   * deferred while free) would otherwise have its head and its link in one word, and the
   * callback would follow a link, or the slab a head */
  size_t head = (f & PRD_CF_DEFERHEAD) ? sizeof(prd_defer_head_t) : 0;
  if (head != 0) {
    cp->cache_rcu_off = PRD_P2ROUNDUP(chunk, sizeof(void *));
    chunk = cp->cache_rcu_off + head + sizeof(void *);
  }
  chunk = PRD_P2ROUNDUP(chunk, align);
  size_t unit = notouch ? q : PRD_MAX(page, q);
  size_t packed = 0;   /* a packed cache's small-layout slab size, when one fits */
  if ((f & PRD_CF_PACKED) && !(f & PRD_CF_HASH) && !notouch && PRD_ISP2(unit))
    packed = pack_slabsize(chunk, unit);
  if (!(f & PRD_CF_HASH) && packed == 0 && chunk >= unit / PRD_SLAB_SMALL_FRAC) {
    /* large layout: no freelist word in the buffer, so no reserved word either */
    cp->cache_flags |= PRD_CF_HASH;
    f = cp->cache_flags;
    chunk = size;
    if (head != 0) {
      cp->cache_rcu_off = PRD_P2ROUNDUP(chunk, sizeof(void *));
      chunk = cp->cache_rcu_off + head;
    }
    chunk = PRD_P2ROUNDUP(chunk, align);
  }
  cp->cache_link_off = chunk - sizeof(void *);
  cp->cache_buftag_off = PRD_P2ROUNDUP(size, sizeof(uint64_t));
  if (f & PRD_CACHE_PAGEBUF)
    chunk = PRD_P2ROUNDUP(chunk, page) + page;   /* the guard page */
  size_t slabsize, avail;
  if (!(f & PRD_CF_HASH) && (packed != 0 || (chunk < unit / PRD_SLAB_SMALL_FRAC &&
      PRD_ISP2(unit) && (unit - sizeof(prd_slab_t)) / chunk <= PRD_SLAB_MAX_SMALL))) {
    slabsize = packed != 0 ? packed : unit;
    /* the latent bitmaps, two generations of one bit per buffer (section 9): deferred
     * buffers cannot be linked through their own memory, readers may still read it */
    (void)small_chunks(slabsize, chunk, &cp->cache_lat_words);
    avail = slabsize - sizeof(prd_slab_t) - 2 * cp->cache_lat_words * sizeof(uint64_t);
    cp->cache_slab_align = slabsize;
  } else {
    cp->cache_flags |= PRD_CF_HASH;
    f = cp->cache_flags;
    size_t minsize = notouch ? PRD_NOTOUCH_MIN_BUFS * chunk : chunk;
    slabsize = (minsize + unit - 1) / unit * unit;
    while ((slabsize % chunk) * PRD_SLAB_WASTE_FRAC > slabsize)
      slabsize += unit;
    avail = slabsize;
    cp->cache_slab_align = PRD_MAX(align, q);
    /* a memory cache's slab is whole granules of the page map (pagemap.c section 1), which
     * UNMAP and PAGEBUF need anyway; an integer cache's is its quantum */
    if (!notouch)
      cp->cache_slab_align = PRD_MAX(cp->cache_slab_align, page);
  }
  size_t chunks = avail / chunk;
  if (chunks == 0 || chunks > UINT32_MAX)
    return -1;
  /* a chunk of whole cache lines is aligned to the line, as the malloc classes are: colors
   * then step by a line and no buffer straddles two (the chunk is unchanged: no memory) */
  if (!notouch && chunk % SLAB_LINE == 0 && align < SLAB_LINE)
    align = SLAB_LINE;
  cp->cache_align = align;
  cp->cache_chunksize = chunk;
  cp->cache_slabsize = slabsize;
  cp->cache_chunks = (uint32_t)chunks;
  size_t tail = avail - chunks * chunk;
  cp->cache_maxcolor = (notouch || (f & PRD_CACHE_PAGEBUF)) ? 0 : PRD_P2ALIGN(tail, align);
  cp->cache_color = 0;
  uint32_t shift = 0;
  while (chunks >= 2 && ((chunks - 2) >> shift) >= PRD_SLAB_BUCKETS)
    shift++;
  cp->cache_bucket_shift = shift;
  /* hash on the bits above the chunk size: neighbouring buffers land in neighbouring buckets */
  uint32_t hs = 0;
  while (((size_t)1 << (hs + 1)) <= chunk)
    hs++;
  cp->cache_hash_shift = hs;
  return 0;
}

/* A small-layout cache's freelist key (section 4b): the process's secret, drawn once
 * (prd__os_random64, os.c section 10), mixed with the cache's address; never 0.  The first
 * caller draws it; a race draws it twice and one value wins, each caller using the value it
 * stored or found (relaxed: any value works, each cache keeps the one it got). */
static uintptr_t slab_fl_key(const prd_cache_t *cp)
{
  static _Atomic uintptr_t secret;
  uintptr_t s = atomic_load_explicit(&secret, memory_order_relaxed);
  if (s == 0) {
    uintptr_t r = (uintptr_t)prd__os_random64(1) | 1;
    uintptr_t none = 0;
    s = atomic_compare_exchange_strong_explicit(&secret, &none, r, memory_order_relaxed,
                                                memory_order_relaxed) ? r : none;
  }
  uintptr_t k = s ^ ((uintptr_t)cp * 0x9e3779b97f4a7c15ull);
  return k != 0 ? k : s;
}

/* Fills in the slab layer's part of a cache: its name, flags, callbacks, layout, lock and
 * lists (section 2).  The internal caches are static; the others come from cache.c.  0, or
 * -1: EINVAL when no slab layout fits, ENOMEM when no lock page could be mapped, ENOSPC when
 * no cache id is left. */
int prd__slab_cache_init(prd_cache_t *cp, const char *name, size_t size, size_t align,
                         prd_ctor_fn *ctor, prd_dtor_fn *dtor, prd_reclaim_fn *reclaim,
                         void *priv, prd_vmem_t *source, uint32_t flags)
{
  memset(cp, 0, sizeof(*cp));
  size_t n = strlen(name);
  if (n >= PRD_CACHE_NAME_MAX)
    n = PRD_CACHE_NAME_MAX - 1;
  memcpy(cp->cache_name, name, n);
  cp->cache_name[n] = '\0';
  if (flags & PRD_CACHE_NOTOUCH)   /* nothing that writes to buffers */
    flags &= ~(uint32_t)(PRD_CACHE_PATTERNS | PRD_CACHE_REDZONE | PRD_CACHE_UNMAP |
                         PRD_CACHE_PAGEBUF);
  if (flags & PRD_CACHE_LEAKS)
    flags |= PRD_CACHE_AUDIT;
  if (flags & PRD_CF_BUF_DEBUG)
    flags |= PRD_CF_DEBUG | PRD_CF_HASH;
  if (flags & PRD_CACHE_REDZONE)
    flags |= PRD_CF_BUFTAG;
  /* a free buffer that holds the pattern, or whose pages are inaccessible, cannot keep its
   * constructed state: the debug layer constructs at every allocation instead (debug.c) */
  if (ctor != NULL && !(flags & (PRD_CACHE_PATTERNS | PRD_CACHE_PAGEBUF)))
    flags |= PRD_CF_SLABCTOR;
  /* deferred frees that take the call_rcu path carry their head in the chunk (defer.c) */
  if ((flags & (PRD_CACHE_OBLIVIOUS | PRD_CACHE_DEBUG_ALL)) && !(flags & PRD_CACHE_NOTOUCH) &&
      !(flags & PRD_CF_INTERNAL))
    flags |= PRD_CF_DEFERHEAD;
  cp->cache_flags = flags;
  cp->cache_bufsize = size;
  cp->cache_ctor = ctor;
  cp->cache_dtor = dtor;
  cp->cache_reclaim = reclaim;
  cp->cache_private = priv;
  cp->cache_source = source;
  if (cache_layout(cp, size, align) != 0) {
    errno = EINVAL;
    return -1;
  }
  cp->cache_lock = prd__os_mutex_new_short();   /* os.c section 9 */
  if (cp->cache_lock == NULL)
    return -1;   /* ENOMEM */
  /* a memory cache's slabs are in the page map under its id (pagemap.c sections 2, 3) */
  if (!(flags & PRD_CACHE_NOTOUCH)) {
    uint32_t id = prd__pm_id_take(cp);
    if (id == 0) {
      prd__os_mutex_free(cp->cache_lock);
      cp->cache_lock = NULL;
      errno = ENOSPC;
      return -1;
    }
    cp->cache_pm_tag = (id << PRD_PM_ID_SHIFT) | PRD_PM_SLAB;
    prd__pm_chunk_inverse(cp);
  }
  if (!(cp->cache_flags & PRD_CACHE_NOTOUCH) && prd__opt(hardened))
    cp->cache_flags |= PRD_CF_HARDENED;
  if (!(cp->cache_flags & (PRD_CF_HASH | PRD_CACHE_NOTOUCH)))
    cp->cache_fl_key = slab_fl_key(cp);   /* every small layout (section 4b) */
  cp->cache_bufctl_cache = (flags & PRD_CACHE_AUDIT) ? &slab_audit_cache : &slab_bufctl_cache;
  link_init(&cp->cache_full);
  link_init(&cp->cache_latent);
  link_init(&cp->cache_free);
  link_init(&cp->cache_owned);
  for (size_t b = 0; b < PRD_SLAB_BUCKETS; b++)
    link_init(&cp->cache_partial[b]);
  cp->cache_ws_start_ns = prd__now_ns();
  cp->cache_hash = cp->cache_hash0;
  cp->cache_hash_mask = PRD_HASH_INITIAL - 1;
  if (flags & PRD_CF_DEBUG)
    prd__debug_cache_init(cp);
  return 0;
}

static pthread_once_t slab_once = PTHREAD_ONCE_INIT;

static void slab_init_once(void)
{
  prd__init();
  prd_vmem_t *heap = NULL;   /* the heap arena, found when a slab is needed (slab_src) */
  uint32_t f = PRD_CACHE_NODEBUG | PRD_CF_INTERNAL;
  /* order: each of these takes its structures only from the ones created before it */
  int rc = prd__slab_cache_init(&slab_slab_cache, "prd_slab", sizeof(prd_slab_t), 0, NULL,
                                NULL, NULL, NULL, heap, f);
  rc |= prd__slab_cache_init(&slab_bufctl_cache, "prd_bufctl", sizeof(prd_bufctl_t), 0, NULL,
                             NULL, NULL, NULL, heap, f);
  rc |= prd__slab_cache_init(&slab_audit_cache, "prd_bufctl_audit", sizeof(prd_bufctl_audit_t),
                             0, NULL, NULL, NULL, NULL, heap, f);
  PRD_ASSERT(rc == 0);
  (void)rc;
  PRD_ASSERT(!(slab_slab_cache.cache_flags & PRD_CF_HASH));
  PRD_ASSERT(!(slab_bufctl_cache.cache_flags & PRD_CF_HASH));
}

void prd__slab_init(void)
{
  pthread_once(&slab_once, slab_init_once);
}

/* The slab layer's own caches, i = 0, 1, ... in creation order, then NULL (cache.c lists
 * them with every other cache, for reaps and statistics). */
prd_cache_t *prd__slab_internal_cache(size_t i)
{
  prd_cache_t *const internal[] = { &slab_slab_cache, &slab_bufctl_cache, &slab_audit_cache };
  return i < PRD_ARRAY_SIZE(internal) ? internal[i] : NULL;
}

/* Tears down the slab layer's part of a cache that nothing uses any more (its CPU layer
 * gone, off cache.c's list): every slab destroyed, the hash table and lock with them.
 * Buffers still allocated (reported by the caller) lose their slabs too: their bufctls go
 * back on the slabs' unconstructed lists first, so that the slabs' external structures are
 * all freed and no destructor runs on an object still in use. */
void prd__slab_cache_fini(prd_cache_t *cp)
{
  pthread_mutex_lock(cp->cache_lock);
  if (cp->cache_bufs_inuse > 0 && (cp->cache_flags & PRD_CF_HASH))
    for (size_t h = 0; h <= cp->cache_hash_mask; h++)
      for (prd_bufctl_t *bcp = cp->cache_hash[h]; bcp != NULL; bcp = bcp->bc_hnext)
        if (bcp->bc_flags & PRD_BC_ALLOC) {
          bcp->bc_flags &= ~PRD_BC_ALLOC;
          bcp->bc_next = bcp->bc_slab->slab_fresh;
          bcp->bc_slab->slab_fresh = bcp;
        }
  prd_slab_link_t *chain = NULL;
  for (size_t i = 0; i < PRD_SLAB_NLISTS; i++) {
    prd_slab_link_t *list = prd__slab_list(cp, prd__slab_list_id(i));
    while (!prd__slab_link_empty(list)) {
      prd_slab_t *sp = prd__slab_of_link(list->sl_next);
      slab_detach(cp, sp);
      sp->slab_link.sl_next = chain;
      chain = &sp->slab_link;
    }
  }
  pthread_mutex_unlock(cp->cache_lock);
  /* the live buffers are on no freelist: the destructor runs only on free ones */
  slab_destroy_chain(cp, chain);
  if (cp->cache_flags & PRD_CACHE_UNMAP)
    prd__debug_unmap_flush(cp);
  prd__hash_table_unmap(cp->cache_hash, cp->cache_hash_mask + 1, cp->cache_hash0);
  prd__os_mutex_free(cp->cache_lock);
  cp->cache_lock = NULL;
  /* every slab's entries are cleared: the id is free for another cache */
  prd__pm_id_give((cp->cache_pm_tag >> PRD_PM_ID_SHIFT) & 0xffffu);
}

void prd__slab_set_pm_tag(prd_cache_t *cp, uint32_t tag)
{
  pthread_mutex_lock(cp->cache_lock);
  PRD_ASSERT(cp->cache_slab_creates == 0 && cp->cache_pm_tag != 0 && tag != 0 && tag <= 0xffu);
  cp->cache_pm_tag |= tag << PRD_PM_TAG_SHIFT;
  pthread_mutex_unlock(cp->cache_lock);
}

/* ---- walking, statistics, invariants -------------------------------------------------------- */
/* Calls fn on every buffer of cp that is allocated, and on those that wait in the latent
 * slabs when `deferred` (cache_lock held).  A destroy inside a read-side section lists those
 * as live; a leak report does not count them (the program freed them). */
void prd__slab_walk_allocated(prd_cache_t *cp, prd__walk_fn *fn, void *arg, bool deferred)
{
  for (size_t i = 0; i < PRD_SLAB_NLISTS; i++) {
    prd_slab_link_t *list = prd__slab_list(cp, prd__slab_list_id(i));
    for (prd_slab_link_t *l = list->sl_next; l != list; l = l->sl_next) {
      prd_slab_t *sp = prd__slab_of_link(l);
      if (sp->slab_refcnt == 0)
        continue;   /* free; a slab on the free list ahead of time (its buffers deferred,
                     * section 9) is walked */
      char *first = sp->slab_base + sp->slab_color;
      if (cp->cache_flags & PRD_CF_HASH) {
        for (uint32_t k = 0; k < sp->slab_chunks; k++) {
          prd_bufctl_t *bcp = prd__slab_hash_find(cp, first + (size_t)k * cp->cache_chunksize);
          /* a debugging cache knows the user's view (an object a layer above holds free is
           * not the user's; a deferred one is PRD_BC_DEFERRED there until its grace period
           * ends); the others know what the slab layer handed out */
          bool alloc, def;
          if (bcp == NULL) {
            alloc = def = false;
          } else if (cp->cache_flags & PRD_CF_DEBUG) {
            alloc = bcp->bc_dstate == PRD_BC_ALLOC || bcp->bc_dstate == PRD_BC_DEFERRED;
            def = bcp->bc_dstate == PRD_BC_DEFERRED;
          } else {
            alloc = (bcp->bc_flags & PRD_BC_ALLOC) != 0;
            def = (bcp->bc_flags & PRD_BC_DEFERRED) != 0;
          }
          if (alloc && (deferred || !def))
            fn(arg, cp, bcp->bc_addr, bcp);
        }
        continue;
      }
      uint64_t freemap[PRD_SLAB_MAX_SMALL / 64];
      memset(freemap, 0, sizeof(freemap));
      prd_bufctl_t *heads[2] = { sp->slab_head, sp->slab_fresh };
      for (int h = 0; h < 2; h++)
        for (prd_bufctl_t *bcp = heads[h]; bcp != NULL; bcp = slab_fl_step(cp, sp, bcp)) {
          size_t k = (size_t)((char *)prd__slab_bufctl_buf(cp, bcp) - first) / cp->cache_chunksize;
          if (k < PRD_SLAB_MAX_SMALL)
            freemap[k / 64] |= 1ull << (k % 64);
        }
      for (uint32_t k = 0; k < sp->slab_unlinked; k++) {   /* the rest were never linked */
        char *buf = first + (size_t)k * cp->cache_chunksize;
        if (!(freemap[k / 64] & (1ull << (k % 64))) &&
            (deferred || !prd__slab_small_is_deferred(cp, sp, buf)))
          fn(arg, cp, buf, NULL);
      }
    }
  }
}

/* The buffer of cp whose chunk contains addr, or NULL (cache_lock held; for reports). */
void *prd__slab_containing(prd_cache_t *cp, const void *addr)
{
  for (size_t i = 0; i < PRD_SLAB_NLISTS; i++) {
    prd_slab_link_t *list = prd__slab_list(cp, prd__slab_list_id(i));
    for (prd_slab_link_t *l = list->sl_next; l != list; l = l->sl_next) {
      prd_slab_t *sp = prd__slab_of_link(l);
      char *first = sp->slab_base + sp->slab_color;
      char *end = first + (size_t)sp->slab_chunks * cp->cache_chunksize;
      if ((const char *)addr >= first && (const char *)addr < end)
        return first + (size_t)((const char *)addr - first) / cp->cache_chunksize *
                           cp->cache_chunksize;
    }
  }
  return NULL;
}

/* The slab layer's and the latent slabs' fields of a cache's statistics (cache.c composes
 * them with the other layers'). */
void prd__slab_stats(prd_cache_t *cp, prd_cache_stats_t *st)
{
  memcpy(st->name, cp->cache_name, sizeof(st->name));
  st->buf_size = cp->cache_bufsize;
  st->align = cp->cache_align;
  st->chunk_size = cp->cache_chunksize;
  st->slab_size = cp->cache_slabsize;
  st->bufs_per_slab = cp->cache_chunks;
  st->color_max = cp->cache_maxcolor;
  size_t used = (size_t)cp->cache_chunks * cp->cache_chunksize;
  if (!(cp->cache_flags & PRD_CF_HASH))
    used += sizeof(prd_slab_t) + 2 * cp->cache_lat_words * sizeof(uint64_t);
  st->tail_waste = (double)(cp->cache_slabsize - used) / (double)cp->cache_slabsize;
  st->large_layout = (cp->cache_flags & PRD_CF_HASH) != 0;
  pthread_mutex_lock(cp->cache_lock);
  st->allocs = cp->cache_allocs;
  st->frees = cp->cache_frees;
  st->alloc_fails = cp->cache_alloc_fails;
  st->slab_creates = cp->cache_slab_creates;
  st->slab_destroys = cp->cache_slab_destroys;
  st->slabs_full = cp->cache_nfull;
  st->slabs_partial = cp->cache_npartial + cp->cache_nowned;   /* current slabs: partial */
  st->slabs_free = cp->cache_nfree;
  st->slabs_peak = cp->cache_slabs_peak;
  st->bufs_inuse = cp->cache_bufs_inuse;
  st->bufs_total = cp->cache_bufs_total;
  st->hash_buckets = (cp->cache_flags & PRD_CF_HASH) ? cp->cache_hash_mask + 1 : 0;
  st->latent_slab_objs = cp->cache_lat_slab_objs;
  st->latent_merges = cp->cache_lat_slab_merges + cp->cache_lat_safe_frees;
  st->slab_premoves = cp->cache_lat_premoves;
  st->frag_skips = cp->cache_lat_skips;
  pthread_mutex_unlock(cp->cache_lock);
}

/* Checks every invariant of the slab layer of cp; reports each broken one and returns how
 * many (0: consistent).  Tests call it after every step of the model test. */
int prd__cache_check(prd_cache_t *cp)
{
  int bad = 0;
#define CHECK_INV(cond)                                                                         \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      prd__report("cache %s: invariant broken: %s", cp->cache_name, #cond);                    \
      bad++;                                                                                    \
    }                                                                                           \
  } while (0)
  pthread_mutex_lock(cp->cache_lock);
  uint64_t nfull = 0, npartial = 0, nfree = 0, nowned = 0, inuse = 0, total = 0, hashed = 0;
  uint64_t latent = 0;
  for (uint32_t b = 0; b < PRD_SLAB_BUCKETS; b++)
    CHECK_INV(prd__slab_link_empty(&cp->cache_partial[b]) ==
              !(cp->cache_partial_map & (1ull << b)));
  for (size_t i = 0; i < PRD_SLAB_NLISTS; i++) {
    uint32_t id = prd__slab_list_id(i);
    prd_slab_link_t *list = prd__slab_list(cp, id);
    for (prd_slab_link_t *l = list->sl_next; l != list; l = l->sl_next) {
      CHECK_INV(l->sl_next->sl_prev == l);
      prd_slab_t *sp = prd__slab_of_link(l);
      CHECK_INV(sp->slab_cache == cp);
      CHECK_INV(sp->slab_bucket == id);
      CHECK_INV(prd__slab_target(cp, sp) == id);
      CHECK_INV(sp->slab_chunks == cp->cache_chunks);
      CHECK_INV(sp->slab_color <= cp->cache_maxcolor);
      CHECK_INV((sp->slab_owner != NULL) == (id == PRD_SLAB_ON_OWNED));
      if (id == PRD_SLAB_ON_FULL)
        nfull++;
      else if (id == PRD_SLAB_ON_FREE)
        nfree++;
      else if (id == PRD_SLAB_ON_OWNED)
        nowned++;
      else
        npartial++;
      if (!(cp->cache_flags & PRD_CF_HASH))
        CHECK_INV(prd__slab_small(cp, sp->slab_base) == sp);
      uint32_t nfreebufs = 0;
      char *first = sp->slab_base + sp->slab_color;
      prd_bufctl_t *heads[2] = { sp->slab_head, sp->slab_fresh };
      for (int h = 0; h < 2; h++)
        for (prd_bufctl_t *bcp = heads[h]; bcp != NULL && nfreebufs <= sp->slab_chunks;
             bcp = slab_fl_step(cp, sp, bcp)) {
          char *buf = prd__slab_bufctl_buf(cp, bcp);
          CHECK_INV(buf >= first && (size_t)(buf - first) % cp->cache_chunksize == 0 &&
                    (size_t)(buf - first) / cp->cache_chunksize < sp->slab_chunks);
          if (cp->cache_flags & PRD_CF_HASH) {
            CHECK_INV(bcp->bc_slab == sp && !(bcp->bc_flags & PRD_BC_ALLOC));
            CHECK_INV(bcp->bc_dstate == 0);   /* free in the slab: free for the user too */
            CHECK_INV(prd__slab_hash_find(cp, buf) == bcp);
          }
          nfreebufs++;
        }
      if (!(cp->cache_flags & PRD_CF_SLABCTOR))
        CHECK_INV(sp->slab_fresh == NULL);
      /* the never-linked buffers (section 4): only a lazy cache's slab has any */
      CHECK_INV(sp->slab_unlinked <= sp->slab_chunks);
      CHECK_INV(slab_lazy(cp) || sp->slab_unlinked == sp->slab_chunks);
      nfreebufs += sp->slab_chunks - sp->slab_unlinked;
      /* the latent slab (section 9) */
      CHECK_INV(prd__slab_ndeferred(sp) <= sp->slab_refcnt);
      for (int g = 0; g < 2; g++) {
        uint32_t cnt = 0;
        if (cp->cache_flags & PRD_CF_HASH) {
          for (prd_bufctl_t *bcp = sp->slab_lat_list[g]; bcp != NULL && cnt <= sp->slab_chunks;
               bcp = bcp->bc_next) {
            CHECK_INV(bcp->bc_slab == sp && (bcp->bc_flags & PRD_BC_DEFERRED) &&
                      (bcp->bc_flags & PRD_BC_ALLOC));
            cnt++;
          }
        } else if (cp->cache_lat_words != 0) {
          uint64_t *map = prd__slab_lat_map(cp, sp, g);
          for (size_t w = 0; w < cp->cache_lat_words; w++)
            cnt += (uint32_t)__builtin_popcountll(map[w]);
        }
        CHECK_INV(cnt == sp->slab_lat_n[g]);
      }
      latent += prd__slab_ndeferred(sp);
      CHECK_INV(nfreebufs + sp->slab_refcnt == sp->slab_chunks);
      if (cp->cache_flags & PRD_CF_HASH) {
        uint32_t alloc = 0;
        for (uint32_t k = 0; k < sp->slab_chunks; k++) {
          prd_bufctl_t *bcp = prd__slab_hash_find(cp, first + (size_t)k * cp->cache_chunksize);
          CHECK_INV(bcp != NULL && bcp->bc_slab == sp);
          if (bcp != NULL && (bcp->bc_flags & PRD_BC_ALLOC))
            alloc++;
        }
        CHECK_INV(alloc == sp->slab_refcnt);
        hashed += sp->slab_chunks;
      }
      inuse += sp->slab_refcnt;
      total += sp->slab_chunks;
    }
  }
  CHECK_INV(nfull == cp->cache_nfull);
  CHECK_INV(latent == cp->cache_lat_slab_objs);
  uint64_t latent_fifo = 0;
  for (prd_slab_link_t *l = cp->cache_latent.sl_next; l != &cp->cache_latent; l = l->sl_next) {
    prd_slab_t *sp = (prd_slab_t *)((char *)l - offsetof(prd_slab_t, slab_lat_link));
    CHECK_INV(prd__slab_ndeferred(sp) != 0);
    latent_fifo += prd__slab_ndeferred(sp);
  }
  CHECK_INV(latent_fifo == latent);
  CHECK_INV(npartial == cp->cache_npartial);
  CHECK_INV(nfree == cp->cache_nfree);
  CHECK_INV(nowned == cp->cache_nowned);
  CHECK_INV(nowned == 0 || cp->cache_pm_tag != 0);
  CHECK_INV(inuse == cp->cache_bufs_inuse);
  CHECK_INV(total == cp->cache_bufs_total);
  CHECK_INV(cp->cache_allocs - cp->cache_frees == cp->cache_bufs_inuse);
  CHECK_INV(cp->cache_slab_creates - cp->cache_slab_destroys == nfull + npartial + nfree + nowned);
  CHECK_INV(nfull + npartial + nfree + nowned <= cp->cache_slabs_peak);
  CHECK_INV(cp->cache_free_min <= nfree);
  if (cp->cache_flags & PRD_CF_HASH) {
    CHECK_INV(hashed == cp->cache_hash_count);
    size_t chained = 0;
    for (size_t h = 0; h <= cp->cache_hash_mask; h++)
      for (prd_bufctl_t *bcp = cp->cache_hash[h]; bcp != NULL && chained <= hashed;
           bcp = bcp->bc_hnext) {
        CHECK_INV(prd__slab_hash_index(cp, bcp->bc_addr) == h);
        chained++;
      }
    CHECK_INV(chained == hashed);
  }
  pthread_mutex_unlock(cp->cache_lock);
#undef CHECK_INV
  return bad;
}
