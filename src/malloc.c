/*
 * malloc.c: the malloc family over object caches (seed 002 §3.1 kmem_alloc, seed 004 libumem),
 * found again by the page map (pagemap.c; seed 003 §3.3.4), big blocks from vmem and the OS.
 *
 * 1. What.  prd_malloc and its family serve any size without a cache argument, the way
 *    kmem_alloc serves the kernel from about 30 caches (002 §3.1) and libumem's malloc serves
 *    a process (004).  Three tiers, by size after rounding:
 *      - size classes (8 B .. 16 KiB): one object cache per class, "malloc-N"; everything the
 *        caches do (magazines when the CPU layer is in, debugging, reaping, statistics)
 *        applies to malloc'd memory unchanged;
 *      - large blocks (16 KiB .. option malloc_mmap_threshold, 4 MiB): whole pages from the
 *        heap vmem arena, which coalesces freed neighbours by boundary tags (seed 003
 *        §3.3.4's coalesce-to-vmblk layer, with vmem in place of its page descriptors); an
 *        arena that cannot import gets the free slabs back (the class caches' out-of-memory
 *        policy, prd__cache_reclaim) and one more try, as a class allocation does;
 *      - huge blocks (>= the threshold): mapped on their own by os.c, so a process's largest
 *        buffers never pin an arena span; a freed one is kept for reuse, within bounds
 *        (section 1b), and unmapped when it is not.
 *    realloc stays in place while the class does not change (a big block: while it shrinks
 *    by less than half); a big block that grows gets half as much again as it had, so that a
 *    buffer grown step by step is copied O(log n) times, not once per page (pages never
 *    written cost no memory).  A huge block that stays huge is never copied: os.c resizes
 *    its mapping with mremap, in place when the address space above it is free, else moved
 *    onto a placeholder mapping made first (so its page-map leaf exists before anything
 *    moves); the kernel moves page-table entries, and pages never touched stay untouched.
 *
 * 1b. Huge blocks kept for reuse.  Mapping a block and unmapping it on every call costs a
 *    page fault per page touched (the kernel zeroes each one) and, in a threaded process, a
 *    TLB shootdown per unmap; a program that allocates and frees big buffers in a loop pays
 *    them every time.  So a freed huge block goes into a small cache (hc_block: address,
 *    bytes, when freed; oldest first, under hc_lock) instead of back to the kernel, bounded
 *    in bytes (option malloc_huge_cache, 128 MiB: docs/benchmarks.md) and in count
 *    (HC_SLOTS 16, so that a search under the lock is a short scan).  A request takes the
 *    smallest kept block of at least its size: its first part when the rest would be a huge
 *    block itself, the rest staying kept (a program that frees a big buffer and then maps
 *    smaller ones, `sort -S`, reuses its pages: kept beside fresh mappings they doubled its
 *    peak RSS), else whole (less than malloc_mmap_threshold wasted); a block put back joins
 *    a kept neighbour it was split from (hc_cut), so the parts come together again;
 *    when none is that large, the largest smaller one is grown by mremap (its pages move,
 *    resident, and only the growth is new memory); a block cut so that realloc grows takes
 *    its growth from the kept rest after it (hc_grow_into: the same mapping, nothing moves).
 *    A block larger than the bound is unmapped at once; putting one in when the bound is
 *    reached unmaps the oldest first.  Kept blocks go back to the kernel when
 *    they sit unused for malloc_huge_decay_ms (the maintenance job hc_job, registered at
 *    start-up with maint.c; it asks for the thread while blocks are kept, so an idle program
 *    gives them back), and all at once when a mapping fails, before it is retried (a huge
 *    block's here, any other's through the caches' pressure reclaim, which calls the reap
 *    hook first: cache.c section 5): kept memory never makes an allocation fail.  A growth
 *    reap (the classes or large blocks grew by 4 MiB) also unmaps the blocks kept since
 *    before the previous one (hc_grow_release, cache.c's grow hook): a program that freed a
 *    big buffer and then grew its heap by 4 MiB has moved on from it, and kept, its pages
 *    would stay resident beside the new ones (sqlite's sorter buffer before its page cache:
 *    peak RSS 1.6 times glibc's); a loop of big blocks takes them back sooner.
 *    calloc zeroes a kept block (a fresh mapping is zero already; big_zero gives a mostly
 *    untouched one back to the kernel instead).  Unmaps happen outside hc_lock.  Memory
 *    ordering: the cache itself is read and written only under hc_lock; hc_nonempty, read
 *    without it by a take, the release and the job's predicate, is a relaxed hint: a stale
 *    false only makes a request map a fresh block (or the job wait a wake-up) while one is
 *    kept, a stale true only takes the lock and finds nothing, so no ordering is needed
 *    beyond the mutex's.
 *
 * 1c. Guarded big blocks (PRUDENCE_DEBUG=redzone or all, option hardened; fixed at start-up
 *    in malloc_guard).  A class block's overrun is caught by its cache's redzone (debug.c);
 *    a big block has no cache, so it carries its own checks (big_guard_*):
 *
 *       p                     p + size              size tag   p + data               end tag
 *       +---------------------+---------------------+----------+-------------------+-----+
 *       | the caller's bytes  | 0xbb up to the tag  | size, ck | guard: read-only  | d,ck|
 *       +---------------------+---------------------+----------+-------------------+-----+
 *       |<------ data pages: size + 16 rounded up (d) -------->|<- one page or more ---->|
 *
 *    A write past the end inside the data pages changes the 0xbb bytes or the size tag and
 *    is reported at free and at realloc ("malloc: write past the end of block P (size N) at
 *    offset K", K the first changed byte); a write past the data pages faults at once on the
 *    guard.  The size tag (the size and a check word: the size XOR the block's address XOR a
 *    constant) keeps the requested size, which malloc_usable_size returns, so a program that
 *    writes up to the usable size does not trip the check; a size tag that does not check
 *    out is itself reported as a write past the end.  The guard is the page after the data
 *    pages and the block's last page, both read-only rather than inaccessible because the
 *    last 16 bytes, the end tag, say where the data pages end: a kept huge block larger than
 *    the request is used whole (the pages between the two stay writable, unused), instead
 *    of being split or trimmed, which in a loop of big blocks turned reuse into unmaps and
 *    new page faults.  So a write running past the data pages faults, a read does not.  The page map's entry counts the guard, so free gives back the
 *    whole range; the guard is made writable again first, so neither the heap arena nor the
 *    huge-block cache ever holds a protected page.  realloc keeps such a block in place
 *    while the new size fits its data pages and is more than half of them (the tail and
 *    size tag rewritten: no system call); a growing one gets its room as any big block
 *    (section 1), as data pages whose tail starts at the size asked for; a huge one is
 *    resized by mremap with its guard made writable first (one mapping again, as mremap
 *    needs) and made anew at the new end.  A guard that cannot be made (mprotect fails: the
 *    kernel's limit on mappings) fails that allocation with ENOMEM after a report; there is
 *    no unguarded fallback.
 *
 * 2. Size classes.  8, 16, 32, 48, 64, then four classes per doubling up to 16 KiB (80, 96,
 *    112, 128, 160, ... 14336, 16384): 37 classes.  Four per doubling bounds the waste: a
 *    request just above a class boundary b gets the next class c <= 5b/4, so at most
 *    (c - b - 1)/c < 1/5 of the block is unused from 64 B up.  Below 64 B the spacing is
 *    the 16 B alignment (max_align_t) itself: 17 B -> 32 B is the worst case (15/32), as in
 *    jemalloc.  Alignment: 8 for the 8 B class (the largest power of two not above the
 *    size), 16 for the other classes, and each power-of-two class is aligned to its size (up
 *    to a page), so that memalign of a small alignment is served from a class: the request
 *    is rounded to the power-of-two class that is at least the alignment.  A class whose size
 *    is a multiple of the 64-byte cache line (192, 320, 384, 448, 640, ...) is aligned to
 *    the line: its buffers never straddle a line, so two buffers of one slab never share one,
 *    whichever threads hold them (at 16-byte alignment the slab's color offsets put every
 *    buffer across a line boundary, and a thread that takes a partial slab in which another
 *    thread's blocks live shares their lines: prd-bench threads --sharing), and a buffer
 *    spans no more lines than its size needs.  Chunks are the size either way, so no memory
 *    changes; only the color offsets step by 64 instead of 16.  Size -> class is
 *    one table lookup: index (size + 7) >> 3 up to 1 KiB, (size + 127) >> 7 above.
 *    Magazines: each class cache asks the CPU layer for magazines of MALLOC_MAG_BYTES
 *    (16 KiB) / class size rounds from the start (the next row of libumem's table: 143 rounds
 *    up to 112 B, 95 at 128 B, 63 at 256 B, 15 at 1 KiB, 1 at 16 KiB).  libumem's starting
 *    rows (15 rounds below 64 B, 3 from 256 B) suit kernel objects; a program's malloc working
 *    set per class is larger, and with them the random workload of prd-bench malloc spent a
 *    fifth of its time in the depot's locks.  16 KiB per magazine bounds what a thread parks:
 *    two magazines per class, 37 classes, at most about 1.2 MiB per thread, most classes far
 *    less; 4 KiB left the depot visits, 32 KiB gained nothing measurable.
 *
 * 3. The page map (pagemap.c, below the slab layer; seed 003 §3.3.4).  free(ptr) has no
 *    size, so free finds what owns ptr from the address alone, in the page map every memory
 *    cache's slabs are in (two dependent loads, no lock; pagemap.c sections 1, 4).  This
 *    file's entries in it:
 *      - a class cache's slab: the slab layer's entry (kind PM_CLASS = PRD_PM_SLAB, the
 *        cache's id, the low 32 bits of the address of the slab's first buffer in bits
 *        32..63) with the class index + 1 as the cache's tag byte (bits 8..15; set once at
 *        start-up, prd__slab_set_pm_tag, before the class has a slab).  Every other entry has
 *        0 there, which names a sentinel class of limit 0, so free's start test below rejects
 *        them without testing the kind first; a slab entry with tag 0 is a buffer of a cache
 *        of prd_cache_create's, reported as such.  The slab layer sets the entries before a
 *        slab's buffers are handed out and clears them before its memory goes back, and does
 *        not make a slab whose entries cannot be set (slab.c section 7), so every slab of a
 *        class is in the map and malloc keeps no slab bookkeeping of its own.  free checks
 *        that a pointer starts a buffer from the entry and the class table alone: offset from
 *        the first buffer below chunks * chunk and a multiple of the chunk (a subtraction of
 *        the entry's 32 bits from the pointer's, a multiplication, a rotation and one
 *        compare, mclass_start_ok with the cache's own constants copied into the class's
 *        line, the shift in one half-word with the free mark's flag, MC_MARK, so that one
 *        load serves both tests), without reading the slab's prd_slab_t, which the first
 *        version did: on a free of another thread's block that load was a cache miss, half of
 *        prd_free's samples in the larson workload;
 *      - the first granule of a large or huge block holds (pages << 16) | kind, kind one of
 *        PM_LARGE (prd_vmem_alloc), PM_LARGEX (prd_vmem_xalloc: aligned), PM_HUGE (os.c),
 *        and PM_DEFERRED (bit 4) while a prd_free_deferred of the block waits for its grace
 *        period, PM_BUSY (bit 5) while a realloc changes a huge block's mapping; the boot
 *        area's granules hold PM_BOOT (section 5).
 *    Memory ordering (beyond pagemap.c section 4's): a big block's entry is stored with
 *    release after the block is ready and read with acquire; clearing it is an atomic
 *    exchange, so two racing frees of one block cannot both free it: the loser sees 0 and
 *    reports a double free.  A deferral sets PM_DEFERRED with a compare-and-swap before it
 *    queues the callback: a free, realloc or second deferral that reads the flag is reported
 *    and touches nothing (the block is the callback's), one racing with the deferral loses
 *    one of the two atomic updates, and the callback frees the entry with the flag, the only
 *    path that accepts it (big_free_deferred).  A realloc that changes a huge block's mapping
 *    sets PM_BUSY the same way first, and stores the new entry (release) once the mapping is
 *    what the entry says: no racing call frees or keeps pages of a size the mapping has not.
 *
 * 4. Bad input (docs/api.md).  A pointer with no entry, or not at the start of a buffer of
 *    its class (checked against the slab's geometry), is reported with prd__error naming the
 *    function and the pointer and is not touched (Debug builds abort after the report unless
 *    abort_on_error=0).  A double free of a big block is seen as a missing entry.  A double
 *    free of a class buffer, without PRUDENCE_DEBUG, is seen at the call by the free mark
 *    (magazine.c section 15: word 0 of a free buffer, tested and written by class_free,
 *    cleared when the buffer is handed out), wherever the first copy is: this thread's
 *    magazine, another thread's, the depot, the slab.  It reports "cache malloc-N: double
 *    free of buffer P" and drops the second copy, so nothing else changes.  The 8-byte class
 *    has no mark (word 0 is its slab freelist word): its double free is seen when the second
 *    copy reaches the slab layer and finds the first on the freelist (slab.c
 *    prd__slab_small_is_free), and not while the first copy is in a magazine (the block is then
 *    handed out twice).  realloc of a freed class block is seen by the same mark: reported
 *    ("cache malloc-N: realloc of freed block P"), NULL and EINVAL, the block not touched;
 *    prd_free_deferred of a freed block as a deferred free (prd_cache_free_deferred).  Not
 *    seen: a free of a block after its prd_free_deferred and before its grace period ends
 *    (a deferred block carries no mark).  PRUDENCE_DEBUG=verify (or more) catches every
 *    double free, at every free, through its own checks.
 *    Sizes that overflow (calloc, reallocarray, pvalloc, anything
 *    above PTRDIFF_MAX) fail with ENOMEM; posix_memalign with an alignment
 *    that is not a power of two multiple of sizeof(void *) returns EINVAL; aligned_alloc with
 *    a non-power-of-two alignment fails with EINVAL; memalign rounds it up, as glibc does.
 *    malloc(0) returns a unique 8-byte block; realloc(p, 0) frees p and returns NULL (glibc).
 *    A size no mapping can commit (os.c section 1b: beyond what the kernel's overcommit
 *    policy allows a plain mmap) fails with ENOMEM, in realloc's mremap growth too.
 *    errno: free and prd_free_deferred keep the caller's errno on every path (POSIX, glibc
 *    2.33 and later): their out-of-line parts (free_slow, the class miss, the double-free
 *    report) save it and put it back, so a failed unmap or a report's write does not leak
 *    into it.  posix_memalign returns ENOMEM and sets errno to it as well, as glibc does.
 *
 * 4b. Deferred frees (seed 001 §5: "kfree_deferred() needs no cache").  prd_free_deferred(p)
 *    is call_rcu(free) for any block of this allocator: the page map names p's class cache
 *    and the block goes down the Prudence path of that cache (prd_cache_free_deferred:
 *    latent caches and slabs, reused as soon as its grace period has ended).  A big block has
 *    no cache: a 24-byte node (so that nothing is written into the block while readers may
 *    still see it) carries it through prd_call_rcu, whose callback frees it; the nodes come
 *    from an internal cache (malloc_defer_node, never in a leak report), else from a reserve
 *    of 256 (free_deferred_in, defer_node_get).
 *
 * 5. Start-up and self-hosting.  The first call initializes under malloc_init_lock.  A
 *    start-up that cannot map memory (the page map's leaves, the heap arena, the magazine
 *    layer's own caches) fails that call with ENOMEM and leaves the allocator not started:
 *    the next call tries again, keeping what the failed attempt made, so one transient
 *    failure never disables malloc for the life of the process.  A class's cache is made at
 *    the class's first allocation (class_cache_make, under the same lock), not at start-up:
 *    a short-lived program uses a dozen of the 37 classes, and making all of them was most
 *    of its start-up (the cache records' pages and their set-up); one that cannot be made
 *    fails that allocation with ENOMEM, and the next one tries again.  A
 *    recursive call from the same thread while that runs (an initialization step that ends
 *    up in malloc under LD_PRELOAD, e.g. backtrace() loading its unwinder for PRUDENCE_DEBUG
 *    =audit) is served from a static bootstrap area (bump allocation, never reused; its
 *    granules are PM_BOOT in the page map, so free ignores them and realloc copies out).
 *    Nothing in the library calls malloc itself: reports use prd__report (no stdio), options
 *    are parsed in place, metadata comes from caches, vmem and os.c.  But a layer below may
 *    call a C library function that allocates (pthread_create allocates the new thread's
 *    DTV with calloc): under LD_PRELOAD that call comes back here while the thread is inside
 *    a cache, perhaps holding a lock.  A per-thread depth counter (initial-exec TLS, moved
 *    only around misses) sends such re-entrant allocations to the boot area and holds
 *    re-entrant frees in a 16-entry per-thread list, freed when the outer call returns.  The
 *    hit paths do not test it: around the same calls the magazine layer's hold
 *    (prd__mag_hold, magazine.h) makes this thread's hit paths miss, so a re-entrant call
 *    reaches the miss functions, which test the depth (section 8).
 *
 * 6. Fork.  The library's pthread_atfork handlers (fork.c) take every lock
 *    of the process before fork and release them after, in the parent and the child, so the
 *    child's only thread finds every structure consistent and can allocate.  fork.c takes
 *    malloc_init_lock (prd__malloc_fork_prepare) as the first of the allocator's locks in that
 *    order and releases it after (prd__malloc_fork_release); this file registers no handler of
 *    its own (two handlers taking one mutex would deadlock the forking thread).  It marks this
 *    thread's fork section (prd__fork_section_enter/leave) around
 *    everything that may take a lock of the order: start-up, the calls into the class caches
 *    (malloc_enter), the heap arena's big blocks (malloc_big, big_free), the maintenance
 *    pokes after a big block's free (free_slow) and the call_rcu of a big block's deferred
 *    free (prd_free_deferred).  hc_lock
 *    (section 1b) is taken after malloc_init_lock and released before it.  A fork from a
 *    signal handler that interrupted one of them then takes no lock, instead of waiting for
 *    one its own thread holds; the hit paths take no lock and are not marked.
 *
 * 7. Lock order: malloc_init_lock (start-up, a class's first allocation) -> the slab layer's
 *    locks -> vmem -> os.
 *    hc_lock is a leaf: nothing is called under it (its unmaps and mremaps run after it is
 *    dropped).  The page map (pagemap.c) has no lock.
 *
 * 8. The hit paths.  prd_malloc and prd_free run the CPU layer's tier 1 inline, in its plain
 *    form (magazine.h prd__mag_alloc_plain / prd__mag_free_plain: no membarrier-mode or tool
 *    test), on a magazine id that malloc keeps itself: per class (mc_hitid, for free, which
 *    finds the class through the page map) and per size slot of the class tables
 *    (malloc_hit1/2, for prd_malloc, which goes from the size to the id in one load).  So a
 *    hit reads neither the class cache nor a start-up or re-entry flag.
 *    The id is MC_NOHIT (magazine id 0, whose CPU-cache entry is always empty, so both halves
 *    miss on it) before start-up and until the class's first miss finds the inline path
 *    allowed (class_enable: the layer's plain mode, no buffer debugging, magazines), and the
 *    thread's bound is 0 while it is inside the layers below (section 5).  Every other case
 *    takes the miss functions (malloc_small_miss, which starts the allocator if needed;
 *    malloc_class_alloc / malloc_class_free, out of line), which mark the thread and go
 *    through prd_cache_alloc / prd_cache_free.
 *    What a hit of prd_malloc (a size up to 1 KiB) does: the size test, the hit id, the
 *    thread's bound, array and set, the CPU layer's pop with its handshake; a hit of prd_free:
 *    NULL and range, the page map, the class and start test (section 3), the hit id, the free
 *    mark's test and store (magazine.c section 15), the CPU layer's push with its handshake.
 *    No lock, no atomic
 *    read-modify-write, no call; docs/benchmarks.md ("The hit paths, counted") gives the
 *    instruction counts and the command.  The wrappers of override.c add a jmp each.
 *    malloc_usable_size of a class buffer takes prd_free's lookup inline and reads the size
 *    from the class's line (a program that counts its memory calls it beside every malloc
 *    and free); everything else goes through malloc_owner (usable_slow).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "magazine.h"
#include "pagemap.h"

/* ---- size classes (section 2) ------------------------------------------------------------ */
#define MC_NCLASSES    37
#define MC_MAX         16384u     /* the largest class; larger sizes are big blocks */
#define MC_SMALL_MAX   1024u      /* table 1 covers sizes up to here in steps of 8 */
#define MC_TAB1        (MC_SMALL_MAX / 8 + 1)
#define MC_TAB2        (MC_MAX / 128 + 1)
#define MC_ALIGN       16u        /* _Alignof(max_align_t) on x86-64 and aarch64 */
#define MC_LINE        64u        /* the cache line: classes of whole lines are aligned to it */
#define MALLOC_MAG_BYTES 16384u   /* bytes of objects per magazine (section 2) */

/* 32 bytes, the array 64-aligned: what a hit reads of its class (mc_hitid, and for a free
 * the start test's mc_inv, mc_chunks and mc_shiftmark) is in one cache line, and the class
 * cache itself is not read. */
typedef struct prd_mclass {
  uint32_t mc_inv;        /* the chunk is m << shift, m odd: m's inverse mod 2^32 */
  /* the shift (bits 0..4, MC_SHIFT_MASK) and MC_MARK: one load serves free's start test and
   * its mark test (the rotation by the shift ignores the bits above 4, so the start test
   * needs no mask instruction either) */
  _Atomic uint16_t mc_shiftmark;
  uint16_t mc_pad;
  uint32_t mc_chunks;     /* buffers per slab (0 in the sentinel) */
  _Atomic uint32_t mc_hitid;   /* the cache's magazine id while the inline hit path may be
                                * taken (section 8), else MC_NOHIT */
  prd_cache_t *_Atomic mc_cache;   /* NULL until the class's first allocation (section 5) */
  uint32_t mc_size;       /* the class size: what malloc_usable_size reports */
  uint32_t mc_align;      /* the alignment every buffer of the class has */
} prd_mclass_t;
/* No hit path: magazine id 0, which no cache has; its CPU-cache entry stays empty (rounds and
 * capacity 0: magazine.c section 2), so both hit halves miss on it.  0, so that the zeroed
 * tables say "no hit path" before start-up. */
#define MC_NOHIT 0u
#define MC_SHIFT_MASK 31u
/* In mc_shiftmark: the hit path is enabled and the cache has the free mark (magazine.c
 * section 15; not the 8-byte class), so free tests and writes it (class_free). */
#define MC_MARK 0x100u

/* Entry 0 is a sentinel (mc_chunks 0: no buffer index is below it), the classes follow: a page-map
 * entry names its class by index + 1 and every other entry by 0, so free's start test
 * (class_start_ok) also rejects entries that are not a class's (section 3). */
static _Alignas(64) prd_mclass_t malloc_cls[MC_NCLASSES + 1];
static prd_mclass_t *const malloc_class = malloc_cls + 1;
static uint8_t malloc_tab1[MC_TAB1];   /* (size + 7) >> 3 -> class, size <= 1 KiB */
static uint8_t malloc_tab2[MC_TAB2];   /* (size + 127) >> 7 -> class, 1 KiB < size <= 16 KiB */
/* The hit id of the class of each size (mc_hitid, kept equal by class_set_hitid), so that
 * prd_malloc's hit goes from the size to the magazine id in one load (section 8); all MC_NOHIT
 * until start-up and each class's first miss.  Up to 1 KiB indexed by the size itself, not
 * by table 1's slot (4 KiB where the slots took 516 bytes; a program's sizes touch a few of
 * its lines): no rounding add and shift on the hit.  Above, table 2's slots. */
static _Atomic uint32_t malloc_hit1[MC_SMALL_MAX + 1];
static _Atomic uint32_t malloc_hit2[MC_TAB2];

/* ---- the page map's entries of this file (section 3; the map is pagemap.c's) ------------- */
#define PM_KIND_MASK     PRD_PM_KIND_MASK
enum { PM_LARGE = 1, PM_LARGEX = 2, PM_HUGE = 3, PM_BOOT = 4, PM_CLASS = PRD_PM_SLAB };
#define PM_CLASS_SHIFT PRD_PM_TAG_SHIFT   /* a class's slab entry: the class index + 1 in its
                                           * tag byte (0 in any other entry) */
#define PM_BIG_SHIFT   16         /* a big block's entry: its pages from bit 16 up */
#define PM_DEFERRED    0x10u      /* a big block's entry: a deferral of it waits (section 3) */
#define PM_BUSY        0x20u      /* a huge block's entry: a realloc resizes it (section 3) */

/* A class buffer's entry: a slab entry whose tag byte names a class (another cache's slab
 * entry has kind PM_CLASS and tag 0). */
static inline bool pm_is_class(uintptr_t e)
{
  return (e & PM_KIND_MASK) == PM_CLASS && ((e >> PM_CLASS_SHIFT) & 0xffu) != 0;
}

/* The class index of a class entry. */
static inline uint32_t pm_class_of(uintptr_t e)
{
  return ((uint32_t)(e >> PM_CLASS_SHIFT) & 0xffu) - 1;
}

/* The class of any entry: the sentinel malloc_cls[0] for entries that are not a class's. */
static inline const prd_mclass_t *pm_mclass(uintptr_t e)
{
  return &malloc_cls[(e >> PM_CLASS_SHIFT) & 0xffu];
}

/* Sets the hit id of class c in its entry and in every size slot of the tables that names
 * it (seq_cst, once per class: section 8).  Class c serves the sizes above the class below's
 * and up to its own (the tables' construction, malloc_classes_build), so only those slots are
 * visited: a walk of every slot for each class was a third of a short program's start-up
 * (about 4,700 instructions a class). */
static void class_set_hitid(uint32_t c, uint32_t id)
{
  atomic_store_explicit(&malloc_class[c].mc_hitid, id, memory_order_seq_cst);
  uint32_t lo = c == 0 ? 0 : malloc_class[c - 1].mc_size + 1, hi = malloc_class[c].mc_size;
  for (uint32_t s = lo; s <= hi && s <= MC_SMALL_MAX; s++)
    if (malloc_tab1[(s + 7) >> 3] == c)
      atomic_store_explicit(&malloc_hit1[s], id, memory_order_seq_cst);
  for (uint32_t i = (lo + 127) >> 7; i <= hi >> 7 && i < MC_TAB2; i++)
    if (malloc_tab2[i] == c)
      atomic_store_explicit(&malloc_hit2[i], id, memory_order_seq_cst);
}

/* ---- start-up (section 5) ---------------------------------------------------------------- */
#define MALLOC_BOOT_SIZE (256u << 10)   /* what a dlopen'd unwinder asks for, with room */
static _Alignas(4096) char malloc_boot[MALLOC_BOOT_SIZE];
static _Atomic size_t malloc_boot_used;
static pthread_mutex_t malloc_init_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int malloc_state;          /* 0 not yet (or the last attempt failed), 1 ready */
static _Thread_local bool malloc_in_init; /* this thread is initializing */
static size_t malloc_page;
static prd_vmem_t *malloc_heap;
static bool malloc_guard;         /* big blocks have a checked tail and a guard page (1c) */
static void hc_job(void *arg);   /* the huge-block cache's maintenance job (section 1b) */
static void hc_grow_release(void);   /* its part of a growth reap (section 1b) */
static bool hc_job_needs(void);

static void *malloc_boot_alloc(size_t size, size_t align)
{
  if (align < MC_ALIGN)
    align = MC_ALIGN;
  size_t old = atomic_load_explicit(&malloc_boot_used, memory_order_relaxed);
  uintptr_t base = (uintptr_t)malloc_boot;   /* aligned to a page only: align the address */
  for (;;) {
    size_t start = (size_t)(PRD_P2ROUNDUP(base + old, align) - base);
    if (start > MALLOC_BOOT_SIZE || MALLOC_BOOT_SIZE - start < size) {
      errno = ENOMEM;
      return NULL;
    }
    if (atomic_compare_exchange_weak_explicit(&malloc_boot_used, &old, start + size,
                                              memory_order_relaxed, memory_order_relaxed))
      return malloc_boot + start;
  }
}

static void malloc_classes_build(void)
{
  uint32_t n = 0;
  uint32_t sizes[MC_NCLASSES];
  sizes[n++] = 8;
  sizes[n++] = 16;
  sizes[n++] = 32;
  sizes[n++] = 48;
  sizes[n++] = 64;
  for (uint32_t base = 64; base < MC_MAX; base *= 2)
    for (uint32_t k = 1; k <= 4; k++)
      sizes[n++] = base + k * (base / 4);
  PRD_ASSERT(n == MC_NCLASSES && sizes[n - 1] == MC_MAX);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t s = sizes[i];
    uint32_t align = s < MC_ALIGN ? s : MC_ALIGN;
    if (PRD_ISP2(s))
      align = (uint32_t)PRD_MIN((size_t)s, malloc_page);
    else if (s % MC_LINE == 0)
      align = MC_LINE;   /* whole lines: no buffer straddles one (section 2) */
    malloc_class[i].mc_size = s;
    malloc_class[i].mc_align = align;
  }
  uint32_t c = 0;
  for (uint32_t i = 0; i < MC_TAB1; i++) {
    while (sizes[c] < i * 8)
      c++;
    malloc_tab1[i] = (uint8_t)c;
  }
  for (uint32_t i = 0; i < MC_TAB2; i++) {
    while (sizes[c] < i * 128)
      c++;
    malloc_tab2[i] = (uint8_t)c;
  }
}

/* Makes class c's cache, under malloc_init_lock (section 5): its name, the start test's
 * constants in the class's line, its page-map tag and its magazines' least size; the cache
 * is published last (release: pairs with the acquire load of malloc_class_alloc, so a
 * thread that sees it sees the line's constants; a free finds them through a page-map entry
 * of a slab, made after the cache).  NULL when the cache could not be made. */
static prd_cache_t *class_create(uint32_t c)
{
  char name[PRD_CACHE_NAME_MAX];
  char digits[12];
  uint32_t s = malloc_class[c].mc_size, nd = 0;
  do {
    digits[nd++] = (char)('0' + s % 10);
    s /= 10;
  } while (s != 0);
  memcpy(name, "malloc-", 7);
  for (uint32_t k = 0; k < nd; k++)
    name[7 + k] = digits[nd - 1 - k];
  name[7 + nd] = '\0';
  prd_cache_t *cp = prd__cache_create_packed(name, malloc_class[c].mc_size,
                                             malloc_class[c].mc_align);
  if (cp == NULL)
    return NULL;
  /* the start test's constants are the cache's own (pagemap.c), copied into the class's
   * line so that free reads only that (section 3) */
  malloc_class[c].mc_inv = cp->cache_pm_inv;
  atomic_store_explicit(&malloc_class[c].mc_shiftmark, (uint16_t)cp->cache_pm_shift,
                        memory_order_relaxed);
  malloc_class[c].mc_chunks = (uint32_t)cp->cache_chunks;
  prd__slab_set_pm_tag(cp, c + 1);
  prd__mag_set_min_rounds(cp, MALLOC_MAG_BYTES / malloc_class[c].mc_size);
  atomic_store_explicit(&malloc_class[c].mc_cache, cp, memory_order_release);
  return cp;
}

/* One attempt at start-up, under malloc_init_lock.  What an earlier, failed attempt made
 * (the page map's leaves, the heap arena) is kept, and the steps that failed are tried
 * again; nothing remembers the failure (section 5).  The classes' caches are made later,
 * each at its class's first allocation (class_cache_make). */
static void big_leaks(prd__debug_live_t *lc);
static bool big_leak_keep(const void *buf);

static bool malloc_start(void)
{
  prd__init();
  malloc_page = prd__os_page_size();
  if (!prd__pm_set_range((uintptr_t)malloc_boot, MALLOC_BOOT_SIZE, PM_BOOT))
    return false;
  malloc_classes_build();
  malloc_heap = prd_heap_arena();
  if (malloc_heap == NULL)
    return false;
  malloc_guard = (prd__opt(debug) & PRD_CACHE_REDZONE) != 0 || prd__opt(hardened) != 0;
  prd__option_fix("hardened", prd__opt(hardened)
                  ? "malloc started hardened and stays so; caches made from now on follow "
                    "the new value"
                  : "malloc started without it and stays so (set it in PRUDENCE_OPTIONS); "
                    "caches made from now on follow the new value");
  static bool hc_job_registered;   /* under malloc_init_lock */
  if (!hc_job_registered) {
    hc_job_registered = prd__maint_register(hc_job, NULL, hc_job_needs, false) == 0;
    prd__cache_set_reap_hook(prd__malloc_huge_trim);   /* prd_reap, malloc_trim: at once */
    prd__cache_set_grow_hook(hc_grow_release);         /* a growing heap: the idle ones */
    prd__cache_set_leak_hook(big_leaks);               /* prd_leak_report: big blocks */
    prd__cache_set_leak_filter(big_leak_keep);         /* ... and not the deferred ones */
  }
  return true;
}

static PRD_NOINLINE PRD_COLD bool malloc_init_slow(void)
{
  if (malloc_in_init)
    return false;   /* recursion from our own start-up: the caller uses the boot area */
  pthread_mutex_lock(&malloc_init_lock);
  bool ok = atomic_load_explicit(&malloc_state, memory_order_acquire) != 0;
  if (!ok) {
    malloc_in_init = true;
    ok = malloc_start();
    /* release: the class table and caches before the state (pairs with malloc_ready) */
    if (ok)
      atomic_store_explicit(&malloc_state, 1, memory_order_release);
    malloc_in_init = false;
  }
  pthread_mutex_unlock(&malloc_init_lock);
  return ok;
}

static inline bool malloc_ready(void)
{
  /* acquire: pairs with the release store at the end of malloc_init_slow */
  if (prd_likely(atomic_load_explicit(&malloc_state, memory_order_acquire) > 0))
    return true;
  prd__fork_section_enter();   /* start-up holds malloc_init_lock (section 6) */
  bool ok = malloc_init_slow();
  prd__fork_section_leave();
  return ok;
}

/* ---- tiers ----------------------------------------------------------------------------------- */
static inline uint32_t malloc_class_index(size_t size)
{
  if (prd_likely(size <= MC_SMALL_MAX))
    return malloc_tab1[(size + 7) >> 3];
  return malloc_tab2[(size + 127) >> 7];
}

/* Re-entry (section 5): > 0 while this thread is inside a class cache.  A lower layer that
 * calls into the C library (pthread_create for the CPU layer's maintenance thread allocates
 * the new thread's DTV with calloc) comes back here under LD_PRELOAD: such a call must not
 * enter the caches again (it could wait for a lock its own thread holds), so allocations are
 * served from the boot area and frees wait in a short per-thread list until the outer call
 * returns. */
#define MALLOC_PENDING 16   /* frees held during one re-entry: pthread_create frees none */
static _Thread_local unsigned malloc_depth;
static _Thread_local unsigned malloc_npending;
static _Thread_local void *malloc_pending[MALLOC_PENDING];
static _Atomic uint64_t malloc_reentry_leaks;   /* frees lost for want of room (counted) */

static PRD_NOINLINE void malloc_pending_flush(void)
{
  while (malloc_npending > 0) {
    void *p = malloc_pending[--malloc_npending];
    prd_free(p);
  }
}

/* Around every call into the layers below: the depth for this file's miss paths, and the
 * magazine layer's hold, which makes this thread's inline hit paths miss meanwhile (so a
 * re-entrant call reaches the tests of depth above). */
static inline void malloc_enter(void)
{
  malloc_depth++;
  prd__mag_hold();
  prd__fork_section_enter();   /* the layers below take locks of the fork order (section 6) */
}

static inline void malloc_leave(void)
{
  prd__fork_section_leave();
  prd__mag_release();
  malloc_depth--;
  if (prd_unlikely(malloc_npending != 0))
    malloc_pending_flush();
}

/* The inline hit path of class c is enabled (section 8) at the class's first miss after the
 * magazine layer has started (so prd__mag_plain has its final value): when the layer's plain
 * hit path applies (membarrier, no tools), the cache takes the ordinary front end (no buffer
 * debugging: fixed at creation) and it has magazines.  Every slab of a class is in the page
 * map (a slab whose entries cannot be made is not made: slab.c section 7), so nothing turns
 * the path off again. */
static PRD_NOINLINE void class_enable(uint32_t c)
{
  prd_cache_t *cp = malloc_class[c].mc_cache;
  if ((cp->cache_flags & PRD_CF_DEBUG) || cp->cache_magid == 0 || !prd__mag_plain)
    return;
  /* before the id: a free that sees the id and not yet the mark only pushes an unmarked
   * buffer (a double free of it missed), never the other way round */
  if (!(cp->cache_flags & PRD_CF_NOMARK) && cp->cache_mark_off == 0)   /* word 0: a class's */
    atomic_fetch_or_explicit(&malloc_class[c].mc_shiftmark, MC_MARK, memory_order_relaxed);
  class_set_hitid(c, cp->cache_magid);
}

static inline void class_maybe_enable(uint32_t c)
{
  if (prd_unlikely(atomic_load_explicit(&malloc_class[c].mc_hitid, memory_order_relaxed) ==
                   MC_NOHIT))
    class_enable(c);
}

/* Class c's cache, made now if this is the class's first allocation (section 5); NULL, errno
 * ENOMEM, when it could not be made (the next allocation tries again).  Inside malloc_enter:
 * what making it allocates through the C library is served from the boot area. */
static PRD_NOINLINE PRD_COLD prd_cache_t *class_cache_make(uint32_t c)
{
  pthread_mutex_lock(&malloc_init_lock);
  prd_cache_t *cp = atomic_load_explicit(&malloc_class[c].mc_cache, memory_order_relaxed);
  if (cp == NULL)
    cp = class_create(c);
  pthread_mutex_unlock(&malloc_init_lock);
  if (cp == NULL)
    errno = ENOMEM;
  return cp;
}

/* Class c's cache, made if needed (malloc_enter held). */
static inline prd_cache_t *class_cache_get(uint32_t c)
{
  /* acquire: pairs with class_create's release (the class's line, the cache) */
  prd_cache_t *cp = atomic_load_explicit(&malloc_class[c].mc_cache, memory_order_acquire);
  return prd_likely(cp != NULL) ? cp : class_cache_make(c);
}

/* Whether this thread has called the family's slow paths before (an allocation's miss, a big
 * block's allocation or free).  A big block's free that is a thread's first call (glibc's
 * frees of dead threads' TLS, with its stack-cache lock held, in a thread that exits having
 * never used the library: a module's large thread-local block is a big block) marks the
 * thread: no library thread starts inside it (thread.c section 2).  Class frees need no mark:
 * the magazine miss of a thread's first free asks for none (magazine.c). */
static __thread bool malloc_seen __attribute__((tls_model("initial-exec")));

static PRD_NOINLINE void *malloc_class_alloc(uint32_t c)
{
  if (prd_unlikely(malloc_depth != 0))
    return malloc_boot_alloc(malloc_class[c].mc_size, malloc_class[c].mc_align);
  int saved = errno;   /* a success keeps it: a mapping refused on the way may have set it */
  malloc_seen = true;
  malloc_enter();
  prd_cache_t *cp = class_cache_get(c);
  if (prd_unlikely(cp == NULL)) {
    /* no memory to make the class's cache: what the other classes' magazines and slabs hold
     * goes back (the pressure policy of their out-of-memory hook, which a class allocation
     * gets), then one more try; not re-entrant here (the depth test above) */
    prd__cache_reclaim();
    cp = class_cache_get(c);
  }
  void *buf = cp != NULL ? prd_cache_alloc(cp, PRD_SLEEP) : NULL;
  malloc_leave();
  if (cp != NULL)
    class_maybe_enable(c);
  if (buf != NULL)
    errno = saved;
  return buf;
}

static void malloc_class_free_in(uint32_t c, void *p)
{
  if (prd_unlikely(malloc_depth != 0)) {
    if (malloc_npending < MALLOC_PENDING)
      malloc_pending[malloc_npending++] = p;
    else
      atomic_fetch_add_explicit(&malloc_reentry_leaks, 1, memory_order_relaxed);
    return;
  }
  malloc_enter();
  prd_cache_free(atomic_load_explicit(&malloc_class[c].mc_cache, memory_order_relaxed), p);
  malloc_leave();
  class_maybe_enable(c);
}

static PRD_NOINLINE void malloc_class_free(uint32_t c, void *p)
{
  int saved = errno;   /* free keeps errno (section 4); set again on every return below */
  malloc_class_free_in(c, p);
  errno = saved;
}

/* The report of a double free seen by the free mark (keeps errno, section 4). */
static PRD_NOINLINE PRD_COLD void malloc_double_free(const prd_mclass_t *mc, void *p)
{
  prd__mag_double_free(atomic_load_explicit(&mc->mc_cache, memory_order_relaxed), p,
                       "double free");
}

/* The hit paths (section 8): the magazine layer's plain tier 1 inline on the class's hit id,
 * which is MC_NOHIT (so the hit misses) unless class_enable allowed it, and which misses
 * while this thread is inside the layers below (prd__mag_hold: a re-entrant call must not
 * touch the CPU cache the outer call may be changing).  Only a hit can stay here: it calls
 * nothing, so it needs no re-entry mark; every miss goes to the functions above, which mark
 * the thread before entering the layers below. */
static inline void *class_alloc(uint32_t c)
{
  uint32_t id = atomic_load_explicit(&malloc_class[c].mc_hitid, memory_order_relaxed);
  void *buf;
  if (prd_likely(prd__mag_alloc_plain(id, &buf)))
    return buf;
  return malloc_class_alloc(c);
}

static inline void class_free(const prd_mclass_t *mc, uint32_t sm, void *p)
{
  uint32_t id = atomic_load_explicit(&mc->mc_hitid, memory_order_relaxed);
  /* the free mark, word 0 of the buffer (magazine.c section 15), for a class with a hit
   * path and the mark (MC_MARK in sm, the class's mc_shiftmark as the start test loaded it;
   * class_enable: never with buffer debugging, whose free buffers may not even be mapped):
   * tested and written before the push, so a double free stops here wherever the first copy
   * is.  On a miss it is taken off again: prd_cache_free (or a re-entrant free's later
   * prd_free) runs the same step. */
  if (prd_likely(sm & MC_MARK)) {
    if (prd_unlikely(prd__mark_test(p, 0))) {   /* a class's mark is word 0 */
      malloc_double_free(mc, p);
      return;
    }
    prd__mark_set(p, 0);
    if (prd_likely(prd__mag_free_plain(id, p, false) > 0))
      return;
    prd__mark_clear(p, 0);
  } else {
    /* no mark (the 8-byte class): the top round is compared, free(p); free(p) */
    int r = prd__mag_free_plain(id, p, true);
    if (prd_likely(r > 0))
      return;
    if (r < 0) {
      malloc_double_free(mc, p);
      return;
    }
  }
  malloc_class_free((uint32_t)(mc - malloc_class), p);
}

/* ---- the huge-block cache (section 1b) ------------------------------------------------------ */
#define HC_SLOTS    16      /* blocks kept at most (section 1b) */

typedef struct prd_hblock {
  void *hb_addr;
  size_t hb_bytes;
  uint64_t hb_freed_ns;   /* when it was put back (prd__now_ns) */
} prd_hblock_t;

static pthread_mutex_t hc_lock = PTHREAD_MUTEX_INITIALIZER;
static prd_hblock_t hc_block[HC_SLOTS];   /* oldest first */
static unsigned hc_n;
static size_t hc_bytes;
static _Atomic bool hc_nonempty;          /* hc_n != 0, for the job's predicate (no lock) */

/* The addresses where hc_take split a kept block (hc_lock held): a block put back joins a
 * kept neighbour only across one of them, so that the parts of one mapping come together
 * again and blocks of different mappings stay apart (what is kept, and the tests of it, do
 * not depend on where the kernel placed the mappings).  A cut forgotten when the table is
 * full only keeps two parts apart; one left from a block since unmapped may join two blocks
 * that meet there later, one range of address space all the same (munmap takes any range; an
 * mremap the kernel refuses across two mappings is a growth that fails, handled as any). */
#define HC_CUTS (2 * HC_SLOTS)
static char *hc_cut[HC_CUTS];
static unsigned hc_ncut;

static void hc_cut_add(char *a)
{
  if (hc_ncut == HC_CUTS) {   /* the oldest goes */
    memmove(&hc_cut[0], &hc_cut[1], (HC_CUTS - 1) * sizeof(hc_cut[0]));
    hc_ncut--;
  }
  hc_cut[hc_ncut++] = a;
}

/* Whether a is a cut, which is then forgotten. */
static bool hc_cut_forget(const char *a)
{
  for (unsigned i = 0; i < hc_ncut; i++)
    if (hc_cut[i] == a) {
      hc_cut[i] = hc_cut[--hc_ncut];
      return true;
    }
  return false;
}

/* Removes block i (hc_lock held). */
static void hc_remove(unsigned i)
{
  hc_bytes -= hc_block[i].hb_bytes;
  hc_n--;
  memmove(&hc_block[i], &hc_block[i + 1], (hc_n - i) * sizeof(hc_block[0]));
  atomic_store_explicit(&hc_nonempty, hc_n != 0, memory_order_relaxed);
}

/* A kept block for a request of `bytes` (a multiple of the page) aligned to `align`, taken
 * out of the cache, its size in *got: the smallest of at least `bytes`, split when what is
 * left would be a huge block itself (malloc_mmap_threshold or more): the request takes its
 * first `bytes`, the rest stays kept in its place (a mapping's pages can be given back apart,
 * so the two are blocks of their own), and a program that frees one big buffer and then maps
 * smaller ones reuses its pages instead of holding them beside new ones; else whole (less
 * than the threshold wasted).  Without one (and no alignment asked for) the largest smaller
 * one, grown by mremap, which moves its pages rather than copying or faulting them again, so
 * only the growth is new memory.  NULL when none serves. */
static void *hc_take(size_t bytes, size_t align, size_t *got)
{
  if (!atomic_load_explicit(&hc_nonempty, memory_order_relaxed))
    return NULL;
  pthread_mutex_lock(&hc_lock);
  unsigned best = HC_SLOTS, below = HC_SLOTS;
  for (unsigned i = 0; i < hc_n; i++) {
    size_t b = hc_block[i].hb_bytes;
    if (b >= bytes && ((uintptr_t)hc_block[i].hb_addr & (align - 1)) == 0 &&
        (best == HC_SLOTS || b < hc_block[best].hb_bytes))
      best = i;
    if (b < bytes && (below == HC_SLOTS || b > hc_block[below].hb_bytes))
      below = i;
  }
  if (best == HC_SLOTS && align <= malloc_page)
    best = below;
  void *p = NULL;
  if (best != HC_SLOTS) {
    p = hc_block[best].hb_addr;
    *got = hc_block[best].hb_bytes;
    if (*got > bytes && *got - bytes >= (size_t)prd__opt(malloc_mmap_threshold)) {
      /* split: the rest, a huge block itself, keeps its slot and its time of freeing */
      hc_block[best].hb_addr = (char *)p + bytes;
      hc_block[best].hb_bytes = *got - bytes;
      hc_cut_add((char *)p + bytes);
      hc_bytes -= bytes;
      *got = bytes;
    } else {
      hc_remove(best);
    }
  }
  pthread_mutex_unlock(&hc_lock);
  if (p != NULL && *got < bytes) {
    void *g = prd__os_remap(p, *got, bytes, true);
    if (g == NULL) {
      prd__os_unmap(p, *got);   /* the kernel is short: the block goes back to it */
      return NULL;
    }
    p = g;
    *got = bytes;
  }
  return p;
}

/* realloc's growth of a huge block that ends at `end`, where hc_take split it from a kept
 * block (a cut) whose rest is still kept there: the rest's first `need` bytes, or all of it
 * when what would stay is no huge block, become the block's, mapped already in the same
 * mapping, so no page moves and none is mapped anew (sqlite's sorter grows its buffer by
 * doubling: moved onto fresh mappings, it stood beside the kept rest of the block it was cut
 * from).  Returns the bytes taken (at least `need`), or 0. */
static size_t hc_grow_into(char *end, size_t need)
{
  if (!atomic_load_explicit(&hc_nonempty, memory_order_relaxed))
    return 0;
  size_t took = 0;
  pthread_mutex_lock(&hc_lock);
  for (unsigned i = 0; i < hc_n; i++) {
    if (hc_block[i].hb_addr != end || hc_block[i].hb_bytes < need || !hc_cut_forget(end))
      continue;
    size_t rest = hc_block[i].hb_bytes - need;
    if (rest >= (size_t)prd__opt(malloc_mmap_threshold)) {
      hc_block[i].hb_addr = end + need;
      hc_block[i].hb_bytes = rest;
      hc_bytes -= need;
      hc_cut_add(end + need);
      took = need;
    } else {
      took = hc_block[i].hb_bytes;
      hc_remove(i);
    }
    break;
  }
  pthread_mutex_unlock(&hc_lock);
  return took;
}

/* Unmaps the blocks in v[0 .. n) (no lock held). */
static void hc_unmap(const prd_hblock_t *v, unsigned n)
{
  for (unsigned i = 0; i < n; i++)
    prd__os_unmap(v[i].hb_addr, v[i].hb_bytes);
}

/* Keeps a freed huge block for reuse, joined with a kept neighbour it was split from, making
 * room by unmapping the oldest ones; false when it is not kept (larger than the bound, or the
 * bound is 0): the caller unmaps it. */
static bool hc_put(void *p, size_t bytes)
{
  long lim = prd__opt(malloc_huge_cache);
  if (lim <= 0 || bytes > (size_t)lim)
    return false;
  prd_hblock_t out[HC_SLOTS];
  unsigned nout = 0;
  uint64_t now = prd__now_ns();
  pthread_mutex_lock(&hc_lock);
  /* a kept neighbour across a cut (the two were one block before hc_take split it): one
   * block again, the newest, so that splits do not leave the cache in pieces too small for
   * the next large request */
  for (unsigned i = 0; i < hc_n; i++) {
    char *a = hc_block[i].hb_addr;
    size_t n = hc_block[i].hb_bytes;
    char *cut = a + n == (char *)p ? (char *)p : (char *)p + bytes == a ? a : NULL;
    if (cut != NULL && bytes + n <= (size_t)lim && hc_cut_forget(cut)) {
      p = a < (char *)p ? a : p;
      bytes += n;
      hc_remove(i);
      i = (unsigned)-1;   /* the joined block may meet another cut: from the start */
    }
  }
  while (hc_n == HC_SLOTS || hc_bytes + bytes > (size_t)lim) {
    out[nout++] = hc_block[0];
    hc_remove(0);
  }
  hc_block[hc_n++] = (prd_hblock_t){ .hb_addr = p, .hb_bytes = bytes, .hb_freed_ns = now };
  hc_bytes += bytes;
  atomic_store_explicit(&hc_nonempty, true, memory_order_relaxed);
  pthread_mutex_unlock(&hc_lock);
  hc_unmap(out, nout);
  return true;
}

/* Unmaps the kept blocks freed at or before `before` (UINT64_MAX: all); whether any was. */
static bool hc_release(uint64_t before)
{
  if (!atomic_load_explicit(&hc_nonempty, memory_order_relaxed))
    return false;
  prd_hblock_t out[HC_SLOTS];
  unsigned nout = 0;
  pthread_mutex_lock(&hc_lock);
  /* oldest first: the blocks old enough are a prefix */
  while (hc_n > 0 && hc_block[0].hb_freed_ns <= before) {
    out[nout++] = hc_block[0];
    hc_remove(0);
  }
  pthread_mutex_unlock(&hc_lock);
  hc_unmap(out, nout);
  return nout > 0;
}

/* The maintenance job (maint.c): blocks unused for malloc_huge_decay_ms go back to the
 * kernel.  It asks for the thread while the cache holds any, so that an idle program gives
 * them back. */
static void hc_job(void *arg)
{
  (void)arg;
  int saved = errno;
  uint64_t now = prd__now_ns();
  uint64_t decay = (uint64_t)prd__opt(malloc_huge_decay_ms) * 1000000u;
  if (now > decay)
    (void)hc_release(now - decay);
  errno = saved;
}

static bool hc_job_needs(void)
{
  return atomic_load_explicit(&hc_nonempty, memory_order_relaxed);
}

size_t prd__malloc_huge_cached(void)
{
  pthread_mutex_lock(&hc_lock);
  size_t b = hc_bytes;
  pthread_mutex_unlock(&hc_lock);
  return b;
}

/* The growth reap's hook (cache.c section 5): the classes or large blocks grew by another
 * 4 MiB.  A block kept since before the previous growth reap stayed unused while the heap grew
 * by that much: memory the program has moved on from (a sorter's buffer freed before its page
 * cache grows), whose pages would stay resident beside the new ones; it goes back to the
 * kernel.  A loop of big blocks takes them back between two growth reaps and keeps them, as
 * a program that grows no heap (the growth reaps' count is a relaxed hint: hc_grow_ns under
 * hc_lock orders nothing else). */
static uint64_t hc_grow_ns;   /* hc_lock: when the previous growth reap asked */
static void hc_grow_release(void)
{
  int saved = errno;
  uint64_t now = prd__now_ns();
  pthread_mutex_lock(&hc_lock);
  uint64_t before = hc_grow_ns;
  hc_grow_ns = now;
  pthread_mutex_unlock(&hc_lock);
  if (before != 0)
    (void)hc_release(before);
  errno = saved;
}

void prd__malloc_huge_trim(void)
{
  int saved = errno;
  (void)hc_release(UINT64_MAX);
  errno = saved;
}

/* ---- guarded big blocks (section 1c) ------------------------------------------------------ */
#define BG_TAG   16u                       /* a tag: a value and its check word */
#define BG_BYTE  0xbb                      /* the tail between the size and the size tag */
#define BG_CHECK 0x5a17ab1e0ddba11ull      /* mixed into the check words */

typedef struct big_tag {
  uint64_t bt_value;
  uint64_t bt_check;   /* bt_value ^ the block's address ^ the salt ^ BG_CHECK */
} big_tag_t;

static inline void big_tag_put(void *at, const void *p, uint64_t v, uint64_t salt)
{
  big_tag_t t = { v, v ^ (uint64_t)(uintptr_t)p ^ salt ^ BG_CHECK };
  memcpy(at, &t, sizeof(t));
}

/* A tag's value, or UINT64_MAX when its check word does not match. */
static inline uint64_t big_tag_get(const void *at, const void *p, uint64_t salt)
{
  big_tag_t t;
  memcpy(&t, at, sizeof(t));
  return (t.bt_value ^ (uint64_t)(uintptr_t)p ^ salt ^ BG_CHECK) == t.bt_check ? t.bt_value
                                                                                 : UINT64_MAX;
}

/* The data pages' bytes of a guarded block of `bytes` at p, from the end tag in the last
 * 16 bytes of its (read-only) guard; the guard is then [data, bytes).  A tag the kernel kept
 * read-only can only be wrong if the program changed the protection: reported, and the
 * smallest guard (one page) assumed. */
static size_t big_guard_data(const void *p, size_t bytes)
{
  uint64_t d = big_tag_get((const char *)p + bytes - BG_TAG, p, bytes);
  if (d == UINT64_MAX || d > bytes - malloc_page || d % malloc_page != 0 || d < malloc_page) {
    prd__error("malloc: the guard of block %p is overwritten (its protection was changed)", p);
    return bytes - malloc_page;
  }
  return (size_t)d;
}

/* Writes the tail pattern and the size tag of a guarded block of `size` bytes at p whose
 * data pages hold `data` bytes. */
static void big_guard_tail(void *p, size_t size, size_t data)
{
  memset((char *)p + size, BG_BYTE, data - BG_TAG - size);
  big_tag_put((char *)p + data - BG_TAG, p, size, 0);
}

/* The requested size of a guarded block, from its size tag; SIZE_MAX when the tag was
 * written over. */
static size_t big_guard_size(const void *p, size_t data)
{
  uint64_t n = big_tag_get((const char *)p + data - BG_TAG, p, 0);
  return n == UINT64_MAX || n > data - BG_TAG ? SIZE_MAX : (size_t)n;
}

/* Checks that bytes [k, end) of a guarded block of `size` bytes still hold the tail
 * pattern, reporting the first changed one; whether they did. */
static bool big_guard_range(const char *fn, const void *p, size_t size, size_t k, size_t end)
{
  const unsigned char *b = p;
  const uint64_t w8 = 0x0101010101010101ull * BG_BYTE;
  while (k < end && (k & 7) != 0 && b[k] == BG_BYTE)
    k++;
  while (k + 8 <= end) {   /* a word at a time while it matches */
    uint64_t w;
    memcpy(&w, b + k, sizeof(w));
    if (w != w8)
      break;
    k += 8;
  }
  while (k < end && b[k] == BG_BYTE)
    k++;
  if (k == end)
    return true;
  prd__error("malloc: write past the end of block %p (size %zu) at offset %zu (%s: 0x%02x "
             "where 0x%02x belongs)", p, size, k, fn, b[k], BG_BYTE);
  return false;
}

/* Checks a guarded block's tail and size tag, reporting the first changed byte; whether
 * they were intact. */
static bool big_guard_check(const char *fn, const void *p, size_t data)
{
  size_t size = big_guard_size(p, data);
  if (size == SIZE_MAX) {
    prd__error("malloc: write past the end of block %p at offset %zu (%s: its size tag at the "
               "end of its last page is overwritten)", p, data - BG_TAG, fn);
    return false;
  }
  return big_guard_range(fn, p, size, size, data - BG_TAG);
}

/* Makes the guard of a block of `bytes` at p whose first `data` bytes are its data pages,
 * after writing its tail, its size tag and (while the guard is still writable) its end tag:
 * the page after the data and the last page read-only (the pages between, a kept block's
 * surplus, stay as they are: protecting them would cost a page-table walk over resident
 * memory at every malloc and free); false (after a report) when the kernel would not: the
 * caller fails the allocation with ENOMEM (not a corruption, so not a reason to end the
 * process) or, in realloc, ends the process as a corruption would. */
static bool big_guard_make(void *p, size_t size, size_t data, size_t bytes)
{
  big_guard_tail(p, size, data);
  big_tag_put((char *)p + bytes - BG_TAG, p, data, bytes);
  if (prd__os_protect_ro((char *)p + data, malloc_page) == 0 &&
      (bytes - data == malloc_page ||
       prd__os_protect_ro((char *)p + bytes - malloc_page, malloc_page) == 0))
    return true;
  /* once a process: at the limit every later big allocation fails the same way, and a
   * report each would bury the program's own output (ENOMEM says it to the caller) */
  static atomic_bool reported;
  if (!atomic_exchange_explicit(&reported, true, memory_order_relaxed))
    prd__report("malloc: no guard page for a block of %zu bytes (mprotect failed: the "
                "kernel's limit on mappings?): the allocation fails with ENOMEM, and so does "
                "every big allocation that meets the limit again (not reported)", size);
  return false;
}

/* realloc's block that could not get its guard again: reported, and the process ends (unless
 * abort_on_error=0) as for a corruption, since the block has moved or changed already. */
static PRD_NOINLINE PRD_COLD void big_guard_lost(const void *p)
{
  prd__report("realloc(%p): the block has no guard page (mprotect failed: the kernel's limit "
              "on mappings?)", p);
  prd__report_done();
}

/* Makes a guarded block's guard pages writable again before its range is given back or
 * resized; false when the kernel refused (the caller keeps the range out of use). */
static bool big_guard_drop(void *p, size_t data, size_t bytes)
{
  return prd__os_protect_rw((char *)p + data, malloc_page) == 0 &&
         (bytes - data == malloc_page ||
          prd__os_protect_rw((char *)p + bytes - malloc_page, malloc_page) == 0);
}

/* A big block: pages from the heap arena, or its own mapping above the threshold; its bytes
 * zeroed when `zero` (calloc) unless they are zero already: a fresh mapping's, or a range of
 * the heap arena that is clean (mapped or decommitted since it was last used). */
static void *malloc_big_in(size_t size, size_t align, bool zero);

static PRD_NOINLINE void *malloc_big(size_t size, size_t align, bool zero)
{
  int saved = errno;   /* a success keeps it: a mapping refused on the way may have set it */
  malloc_seen = true;
  prd__fork_section_enter();   /* the heap arena's locks (section 6) */
  void *p = malloc_big_in(size, align, zero);
  prd__fork_section_leave();
  if (p != NULL)
    errno = saved;
  return p;
}

/* A big block that could not be made whole goes back where it came from: NULL, ENOMEM. */
static void *big_undo(void *p, size_t bytes, uintptr_t kind)
{
  if (kind == PM_HUGE)
    prd__os_unmap(p, bytes);
  else if (kind == PM_LARGEX)
    prd_vmem_xfree(malloc_heap, p, bytes);
  else
    prd_vmem_free(malloc_heap, p, bytes);
  errno = ENOMEM;
  return NULL;
}

/* A fresh mapping for a huge block, aligned past a page when asked. */
static void *huge_map(size_t bytes, size_t align)
{
  return align > malloc_page ? prd__os_map_aligned(bytes, align) : prd__os_map(bytes);
}

/* calloc's zeroing of a big block not known to be zero (a kept huge block, or heap pages
 * freed since they were last decommitted).  A block of BIG_ZERO_LOOK pages or more of which
 * fewer than one page in BIG_ZERO_FEW is resident (a program that touched little of it before
 * it freed it) goes back to the kernel instead, whole pages, which read back as zeroes: the
 * pages the program touches then fault in as a fresh mapping's would, the others never, where
 * a memset faulted in every one (threads churning calloc'd blocks that touch two pages of
 * each: docs/benchmarks.md, "calloc of big blocks").  A block with more resident is written:
 * a program that used that much of it likely does so again, and each round would fault its
 * pages in again (a loop that writes nearly half of each block it callocs did so at every
 * round when half resident was the line).  Written too if the kernel refuses. */
#define BIG_ZERO_LOOK 64   /* pages: 256 KiB, where a memset costs more than two system calls */
#define BIG_ZERO_FEW 8
static void big_zero(void *p, size_t size)
{
  size_t len = PRD_P2ROUNDUP(size, malloc_page), pages = len / malloc_page;
  if (pages < BIG_ZERO_LOOK || BIG_ZERO_FEW * prd__os_resident(p, len) >= pages ||
      prd__os_decommit(p, len) != 0)
    memset(p, 0, size);
}

static void *malloc_big_in(size_t size, size_t align, bool zero)
{
  if (size > (size_t)PTRDIFF_MAX - 3 * malloc_page) {
    errno = ENOMEM;
    return NULL;
  }
  size_t bytes = PRD_P2ROUNDUP(size, malloc_page);
  if (malloc_guard)   /* the tag, then the guard page (section 1c) */
    bytes = PRD_P2ROUNDUP(size + BG_TAG, malloc_page) + malloc_page;
  uintptr_t kind;
  void *p;
  bool fresh = false;   /* zero already */
  long huge = prd__opt(malloc_mmap_threshold);
  if (huge > 0 && bytes >= (size_t)huge) {
    kind = PM_HUGE;
    size_t got;
    p = hc_take(bytes, align > malloc_page ? align : malloc_page, &got);
    if (p != NULL) {
      bytes = got;
    } else {
      fresh = true;
      p = huge_map(bytes, align);
      /* the kept blocks may be what the kernel is short of: give them back, try again; then
       * what the caches and the heap arena hold (the pressure reclaim, which unmaps the
       * arena's wholly free blocks: an address-space limit), not from a re-entrant call
       * (section 5), and once more */
      if (p == NULL && hc_release(UINT64_MAX))
        p = huge_map(bytes, align);
      if (p == NULL && malloc_depth == 0) {
        prd__cache_reclaim();
        p = huge_map(bytes, align);
      }
    }
  } else {
    kind = align > malloc_page ? PM_LARGEX : PM_LARGE;
    /* a heap arena that could not import: free slabs go back to it (the pressure policy
     * of the class caches' out-of-memory hook), then once more, import included, so that a
     * mapping the kernel refused once is retried, as a class allocation's is.  Not from a
     * re-entrant call, whose thread may hold the locks a reclaim takes (section 5) */
    for (int tries = 0;; tries++) {
      /* a range from a clean segment (a fresh import, or decommitted) is zero already */
      p = prd__vmem_alloc_clean(malloc_heap, bytes, kind == PM_LARGEX ? align : 0,
                                PRD_VM_NOSLEEP, &fresh);
      if (p != NULL || tries == 1)
        break;
      if (malloc_depth == 0)
        prd__cache_reclaim();
    }
    /* the growth reap's count (slab.c section 6, cache.c section 4): a large block makes no
     * slab; not one of a size the heap's quantum caches serve, whose slabs count as they are
     * made (a block from their magazines is reuse, not growth); not from a re-entrant call
     * (section 5), inside the fork section as the frees' jobs (free_slow) */
    if (p != NULL && malloc_depth == 0 &&
        (kind == PM_LARGEX || bytes > prd__vmem_qcache_limit(malloc_heap))) {
      prd__fork_section_enter();
      prd__slab_grown(bytes);
      prd__fork_section_leave();
    }
  }
  if (p == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  prd_pm_entry_t *slot = prd__pm_slot_make((uintptr_t)p);
  if (slot == NULL)
    return big_undo(p, bytes, kind);
  if (zero && !fresh)
    big_zero(p, size);
  size_t data = PRD_P2ROUNDUP(size + BG_TAG, malloc_page);   /* when guarded (1c) */
  if (malloc_guard && !big_guard_make(p, size, data, bytes)) {
    (void)big_guard_drop(p, data, bytes);   /* the guard may be half made */
    return big_undo(p, bytes, kind);
  }
  size_t npages = bytes / malloc_page;
  atomic_store_explicit(slot, ((uintptr_t)npages << PM_BIG_SHIFT) | kind, memory_order_release);
  return p;
}

static inline size_t big_bytes(uintptr_t e)
{
  return (size_t)(e >> PM_BIG_SHIFT) * malloc_page;
}

/* prd_leak_report's part (cache.c section 5): the big blocks still allocated that no cache
 * holds, found by their page-map entries (a block's first page has one; freed blocks have
 * none, kept huge ones neither).  Not those the heap arena's quantum caches served (up to
 * 8 pages, by prd_vmem_alloc: PM_LARGE): the report lists them as those caches' buffers;
 * but one of those sizes the arena served itself (its caches not made yet when several
 * threads took their first such block at once, or no memory for them) is this list's.
 * A deferred one is not listed: its callback frees it.  No stack or age: only the classes'
 * buffers are audited. */
static void big_leak_one(void *arg, uintptr_t a, uintptr_t e)
{
  prd__debug_live_t *lc = arg;
  uint32_t kind = e & PM_KIND_MASK;
  if ((kind != PM_LARGE && kind != PM_LARGEX && kind != PM_HUGE) || (e & PM_DEFERRED))
    return;
  if (kind == PM_LARGE && big_bytes(e) <= prd__vmem_qcache_limit(malloc_heap) &&
      !prd__vmem_qdirect(malloc_heap, (void *)a))
    return;
  lc->lc_seen++;
  if (lc->lc_listed >= lc->lc_limit)
    return;
  lc->lc_listed++;
  prd__debug_line(lc->lc_fd, "malloc: big block=%p of %zu bytes still allocated (blocks over "
                  "16 KiB are not audited: age and stack unknown)", (void *)a, big_bytes(e));
}

static void big_leaks(prd__debug_live_t *lc)
{
  prd__pm_walk(big_leak_one, lc);
}

/* The leak report's filter of the caches' buffers (cache.c section 5): a block of the heap
 * arena's quantum caches (PM_LARGE) whose deferral waits for its grace period is the
 * program's no more, though its cache still counts it allocated until the callback. */
static bool big_leak_keep(const void *buf)
{
  uintptr_t e = prd__pm_get(buf);
  return (e & PM_KIND_MASK) != PM_LARGE || !(e & PM_DEFERRED);
}

/* Allocation of `size` bytes aligned to `align` (a power of two; 0 for the default). */
static void *malloc_aligned(size_t size, size_t align)
{
  if (prd_unlikely(!malloc_ready())) {
    if (malloc_in_init)
      return malloc_boot_alloc(size == 0 ? 1 : size, align);
    errno = ENOMEM;
    return NULL;
  }
  size_t need = size == 0 ? 1 : size;
  if (align > 8 && align <= MC_ALIGN && need < align)
    need = align;   /* every class from 16 B up is 16-aligned */
  if (align > MC_ALIGN && align <= malloc_page) {
    /* the power-of-two class at least the alignment is aligned to it (section 2) */
    size_t p2 = need < align ? align : need;
    if (p2 <= MC_MAX && PRD_ISP2(p2) == 0)
      p2 = (size_t)1 << (64 - __builtin_clzll((unsigned long long)p2));
    need = p2;
  }
  if (need <= MC_MAX && align <= malloc_page)
    return class_alloc(malloc_class_index(need));
  return malloc_big(need, align, false);
}

/* ---- free and lookups ----------------------------------------------------------------------- */
/* Whether address a, in a granule whose class entry is e, starts a buffer of its slab
 * (pagemap.h prd__pm_start_ok: a multiplication, a rotation, one compare), with the class's
 * copy of its cache's constants.  Any entry may be passed: one that is not a class's names
 * the sentinel, whose chunks 0 fail. */
static inline bool mclass_start_ok_sm(const prd_mclass_t *mc, uint32_t sm, uintptr_t e,
                                      uintptr_t a)
{
  return prd__pm_start_ok(e, a, mc->mc_inv, sm & MC_SHIFT_MASK, mc->mc_chunks);
}

/* The class's mc_shiftmark (relaxed: MC_MARK is set once, class_enable). */
static inline uint32_t mclass_sm(const prd_mclass_t *mc)
{
  return atomic_load_explicit(&mc->mc_shiftmark, memory_order_relaxed);
}

static inline bool mclass_start_ok(const prd_mclass_t *mc, uintptr_t e, uintptr_t a)
{
  return mclass_start_ok_sm(mc, mclass_sm(mc), e, a);
}

static inline bool class_start_ok(uintptr_t e, uintptr_t a)
{
  return mclass_start_ok(pm_mclass(e), e, a);
}

static inline prd_cache_t *class_cache_of(uintptr_t e)
{
  /* a class entry is a slab of the class's cache, made after the cache was published (the
   * page map's acquire orders this load after that) */
  return atomic_load_explicit(&malloc_class[pm_class_of(e)].mc_cache, memory_order_relaxed);
}

static PRD_NOINLINE PRD_COLD void malloc_bad(const char *fn, const void *p, const char *why)
{
  prd__error("%s(%p): %s (not touched)", fn, p, why);
}

/* p is in a slab of an object cache that is not malloc's (prd_cache_create's). */
static PRD_NOINLINE PRD_COLD void malloc_bad_cache(const char *fn, const void *p, uintptr_t e)
{
  const char *name = prd__pm_id_name(prd__pm_id_of(e));
  prd__error("%s(%p): in a slab of cache %s, not a malloc block (not touched)", fn, p,
             name != NULL ? name : "(destroyed)");
}

/* What p is, for free/realloc/usable_size: its entry, or 0 after a report.  `ok`: the flags
 * of a big block's entry the caller takes as they are (a constant after inlining). */
static inline uintptr_t malloc_owner_ok(const char *fn, const void *p, uintptr_t ok)
{
  uintptr_t e = prd__pm_get(p);
  if (prd_unlikely(e == 0)) {
    malloc_bad(fn, p, "not allocated by prudence, or freed already");
    return 0;
  }
  if ((e & PM_KIND_MASK) == PM_CLASS) {
    if (prd_unlikely(!pm_is_class(e))) {
      malloc_bad_cache(fn, p, e);
      return 0;
    }
    if (prd_unlikely(!class_start_ok(e, (uintptr_t)p))) {
      malloc_bad(fn, p, "inside a block, not at its start");
      return 0;
    }
  } else if ((e & PM_KIND_MASK) != PM_BOOT &&
             prd_unlikely(((uintptr_t)p & (malloc_page - 1)) != 0)) {
    malloc_bad(fn, p, "inside the first page of a large block, not at its start");
    return 0;
  } else if (prd_unlikely(e & (PM_DEFERRED | PM_BUSY) & ~ok)) {
    malloc_bad(fn, p, e & PM_BUSY ? "being reallocated by another call"
                                  : "deferred by prd_free_deferred, its grace period not ended yet");
    return 0;
  }
  return e;
}

static inline uintptr_t malloc_owner(const char *fn, const void *p)
{
  return malloc_owner_ok(fn, p, 0);
}

static void big_free_in(const char *fn, void *p, uintptr_t e);

static void big_free(const char *fn, void *p, uintptr_t e)
{
  prd__fork_section_enter();   /* the heap arena's locks (section 6) */
  big_free_in(fn, p, e);
  prd__fork_section_leave();
}

static void big_free_in(const char *fn, void *p, uintptr_t e)
{
  uintptr_t a = (uintptr_t)p;
  prd_pm_entry_t *slot = prd__pm_slot(a, prd__pm_base(a));
  /* the exchange makes one of two racing frees of the block the loser (section 3) */
  if (atomic_exchange_explicit(slot, 0, memory_order_acq_rel) != e) {
    malloc_bad(fn, p, "freed twice (concurrently)");
    return;
  }
  size_t bytes = big_bytes(e);
  if (malloc_guard) {
    size_t data = big_guard_data(p, bytes);
    (void)big_guard_check(fn, p, data);
    if (!big_guard_drop(p, data, bytes)) {
      /* a protected page must not go back to the arena or the huge-block cache */
      prd__report("%s(%p): the guard page could not be made accessible again: the block's "
                  "%zu bytes are kept out of use", fn, p, bytes);
      prd__report_done();
      return;
    }
  }
  switch (e & PM_KIND_MASK) {
  case PM_HUGE:
    if (!hc_put(p, bytes))
      prd__os_unmap(p, bytes);
    break;
  case PM_LARGEX:
    prd_vmem_xfree(malloc_heap, p, bytes);
    break;
  default:
    prd_vmem_free(malloc_heap, p, bytes);
    break;
  }
}

static void free_entry(const char *fn, void *p, uintptr_t e)
{
  if (prd_likely((e & PM_KIND_MASK) == PM_CLASS))
    class_free(pm_mclass(e), mclass_sm(pm_mclass(e)), p);
  else if ((e & PM_KIND_MASK) != PM_BOOT)
    big_free(fn, p, e);
}

static size_t entry_usable(const void *p, uintptr_t e)
{
  switch (e & PM_KIND_MASK) {
  case PM_CLASS:
    return class_cache_of(e)->cache_bufsize;
  case PM_BOOT:
    /* bootstrap blocks: up to the end of the area (their sizes are not kept) */
    return (size_t)(malloc_boot + MALLOC_BOOT_SIZE - (const char *)p);
  default:
    if (malloc_guard) {   /* the size asked for (section 1c); a broken tag: up to it */
      size_t data = big_guard_data(p, big_bytes(e)), n = big_guard_size(p, data);
      return n != SIZE_MAX ? n : data - BG_TAG;
    }
    return big_bytes(e);
  }
}

/* free of anything but a class buffer, and of bad pointers (out of the hit path); `fn` names
 * the call in reports. */
static void free_named(const char *fn, void *ptr)
{
  int saved = errno;   /* free keeps errno (section 4): unmaps and reports may set it */
  uintptr_t e = malloc_owner(fn, ptr);
  if (e != 0) {
    free_entry(fn, ptr, e);
    /* a kept block wants the job that gives it back (section 1b); not from a re-entrant
     * free, whose thread is inside the layers the tick would enter (section 5).  Both may
     * take locks of the fork order (maint_lock; the jobs run inline when no maintenance
     * thread runs): inside the fork section (section 6) */
    prd__fork_section_enter();
    if ((e & PM_KIND_MASK) == PM_HUGE && malloc_depth == 0)
      prd__maint_poke();
    /* pages back in the heap arena: decay wants a thread to run it (cache.c section 4) */
    else if (((e & PM_KIND_MASK) == PM_LARGE || (e & PM_KIND_MASK) == PM_LARGEX) &&
             malloc_depth == 0)
      prd__cache_decay_nudge();
    prd__fork_section_leave();
  }
  errno = saved;
}

static PRD_NOINLINE void free_slow(void *ptr)
{
  bool mark = !malloc_seen;   /* see malloc_seen */
  malloc_seen = true;
  if (mark)
    prd__lthread_nostart(true);
  free_named("free", ptr);
  if (mark)
    prd__lthread_nostart(false);
}

/* ---- the public family -------------------------------------------------------------------- */
/* prd_malloc's miss of a class size, and every class size before start-up (the hit ids are
 * MC_NOHIT until then, so no state test is needed on the hit). */
static PRD_NOINLINE void *malloc_small_miss(size_t size)
{
  if (prd_unlikely(atomic_load_explicit(&malloc_state, memory_order_acquire) == 0))
    return malloc_aligned(size, 0);
  return malloc_class_alloc(malloc_class_index(size));
}

void *prd_malloc(size_t size)
{
  /* size 0 looks up the 8-byte class (malloc_hit1[0]): a unique block, as glibc */
  uint32_t id;
  if (prd_likely(size <= MC_SMALL_MAX))
    id = atomic_load_explicit(&malloc_hit1[size], memory_order_relaxed);
  else if (size <= MC_MAX)
    id = atomic_load_explicit(&malloc_hit2[(size + 127) >> 7], memory_order_relaxed);
  else
    return malloc_aligned(size, 0);
  void *buf;
  if (prd_likely(prd__mag_alloc_plain(id, &buf)))
    return buf;
  return malloc_small_miss(size);
}

/* The class of ptr when ptr is the start of a buffer in a class slab, else NULL: the hit
 * paths' page-map lookup (prd_free, prd_malloc_usable_size).  One test, of the root index, for
 * addresses beyond the map; NULL needs none of its own: it takes root entry 0, which has no
 * leaf or, if it has one, the entry of granule 0, which no slab holds (0: the sentinel); and
 * a class entry whose slab starts a buffer at ptr (the sentinel's limit fails every other
 * entry, section 3). */
static inline const prd_mclass_t *class_of_start(const void *ptr, uint32_t *smp)
{
  uintptr_t a = (uintptr_t)ptr;
  uintptr_t root = a >> (PRD_PM_GRANULE_SHIFT + PRD_PM_LEAF_BITS);
  if (prd_likely(root < PRD_PM_ROOT_N)) {
    /* acquire: pairs with the release CAS in pagemap.c (as prd__pm_base) */
    uintptr_t base = atomic_load_explicit(&prd__pm_root[root], memory_order_acquire);
    if (prd_likely(base != 0)) {
      uintptr_t e = atomic_load_explicit(prd__pm_slot(a, base), memory_order_acquire);
      const prd_mclass_t *mc = pm_mclass(e);
      /* mc in a register of its own: without this, gcc forms the address of each atomic
       * field load from the table's address and the index again (a lea more per field) */
      __asm__("" : "+r"(mc));
      uint32_t sm = mclass_sm(mc);
      if (prd_likely(mclass_start_ok_sm(mc, sm, e, a))) {
        *smp = sm;
        return mc;
      }
    }
  }
  return NULL;
}

void prd_free(void *ptr)
{
  uint32_t sm;
  const prd_mclass_t *mc = class_of_start(ptr, &sm);
  if (prd_likely(mc != NULL))
    class_free(mc, sm, ptr);
  else if (ptr != NULL)
    free_slow(ptr);
}

void *prd_calloc(size_t n, size_t size)
{
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  /* a big block is zeroed by malloc_big unless it is zero already (a fresh mapping, a clean
   * range of the heap arena) */
  if (total > MC_MAX && malloc_ready())
    return malloc_big(total, 0, true);
  void *p = prd_malloc(total);
  if (p == NULL)
    return NULL;
  memset(p, 0, total);
  return p;
}

/* malloc_usable_size of anything but a class buffer, and of bad pointers. */
static PRD_NOINLINE size_t usable_slow(void *ptr)
{
  if (ptr == NULL)
    return 0;
  int saved = errno;   /* a report's write may set it (a closed stderr): errno is the caller's */
  /* a deferred big block is readable until its grace period ends, as a deferred class
   * block is: its size, no report */
  uintptr_t e = malloc_owner_ok("malloc_usable_size", ptr, PM_DEFERRED);
  size_t n = e == 0 ? 0 : entry_usable(ptr, e);
  errno = saved;
  return n;
}

size_t prd_malloc_usable_size(void *ptr)
{
  /* a class buffer as prd_free finds it, its size from the class's line: a program that
   * counts its memory calls this beside every malloc and free.  Anything else, NULL and bad
   * pointers (reported) take usable_slow */
  uint32_t sm;
  const prd_mclass_t *mc = class_of_start(ptr, &sm);
  return prd_likely(mc != NULL) ? mc->mc_size : usable_slow(ptr);
}

/* realloc of a huge block to a size that stays huge (section 1): the kernel resizes or moves
 * the mapping (os.c mremap), nothing is copied.  Grows in place when the address space above
 * is free, else onto a placeholder mapping made first, so that its page-map leaf exists
 * before anything moves.  NULL (errno ENOMEM) when it could not: the block is unchanged and
 * the caller copies instead, unless *bad is set (the block was freed meanwhile: reported). */
static void *huge_resize(void *ptr, uintptr_t e, size_t bytes, bool *bad)
{
  size_t old = big_bytes(e);
  uintptr_t a = (uintptr_t)ptr;
  prd_pm_entry_t *slot = prd__pm_slot(a, prd__pm_base(a));
  uintptr_t ne = ((uintptr_t)(bytes / malloc_page) << PM_BIG_SHIFT) | PM_HUGE;
  /* the block is this call's while its mapping changes (section 3): a racing free, realloc
   * or deferral of it (user errors) finds PM_BUSY and reports, or loses its own atomic
   * update, instead of freeing or keeping pages of the size the mapping no longer has */
  uintptr_t want = e;
  if (!atomic_compare_exchange_strong_explicit(slot, &want, e | PM_BUSY, memory_order_acq_rel,
                                               memory_order_acquire)) {
    malloc_bad("realloc", ptr, "freed, deferred or reallocated while being reallocated");
    *bad = true;
    return NULL;
  }
  if (bytes > old) {   /* into the kept rest of the block it was cut from (section 1b) */
    size_t took = hc_grow_into((char *)ptr + old, bytes - old);
    if (took != 0) {
      ne = ((uintptr_t)((old + took) / malloc_page) << PM_BIG_SHIFT) | PM_HUGE;
      atomic_store_explicit(slot, ne, memory_order_release);
      return ptr;
    }
  }
  if (prd__os_remap(ptr, old, bytes, false) != NULL) {   /* in place (a shrink always is) */
    atomic_store_explicit(slot, ne, memory_order_release);
    return ptr;
  }
  void *to = prd__os_map(bytes);
  prd_pm_entry_t *nslot = to != NULL ? prd__pm_slot_make((uintptr_t)to) : NULL;
  if (nslot == NULL || prd__os_move(ptr, old, to, bytes) != 0) {   /* the move gives the
                                                                       * placeholder back */
    if (to != NULL && nslot == NULL) {
      prd__os_unmap(to, bytes);
      errno = ENOMEM;
    }
    atomic_store_explicit(slot, e, memory_order_release);   /* still at ptr, unchanged */
    return NULL;
  }
  atomic_store_explicit(slot, 0, memory_order_release);
  atomic_store_explicit(nslot, ne, memory_order_release);
  return to;
}

/* huge_resize for a guarded block (section 1c): the guard page is made accessible (so the
 * mapping is one again, as mremap needs), the mapping resized to data pages for `want`
 * bytes and a guard, then the tail, with `size` in the tag, and the guard are made at the new
 * end.  NULL when it could not be resized (the block unchanged, its guard made again; a
 * block freed meanwhile: *bad, as huge_resize): the caller copies instead. */
static void *huge_resize_guarded(void *ptr, uintptr_t e, size_t size, size_t want, bool *bad)
{
  size_t old = big_bytes(e), odata = big_guard_data(ptr, old);
  size_t data = PRD_P2ROUNDUP(want + BG_TAG, malloc_page), bytes = data + malloc_page;
  if (!big_guard_check("realloc", ptr, odata) || !big_guard_drop(ptr, odata, old))
    return NULL;
  void *np = huge_resize(ptr, e, bytes, bad);
  if (np == NULL) {
    if (!*bad && !big_guard_make(ptr, big_guard_size(ptr, odata), odata, old))
      big_guard_lost(ptr);
    return NULL;
  }
  /* a guard that cannot be made is reported (and ends the process unless abort_on_error=0);
   * the block itself is sound and is returned */
  if (!big_guard_make(np, size, data, bytes))
    big_guard_lost(np);
  return np;
}

static PRD_NOINLINE void *realloc_slow(void *ptr, size_t size)
{
  if (ptr == NULL)
    return prd_malloc(size);
  uintptr_t e = malloc_owner("realloc", ptr);
  if (e == 0) {
    errno = EINVAL;
    return NULL;
  }
  if ((e & PM_KIND_MASK) == PM_CLASS && !prd__cache_buf_allocated(class_cache_of(e), ptr)) {
    /* a freed class block (its free mark, magazine.c section 15, or a debugging cache's
     * records, whose freed buffers may be unmapped or hold patterns): not copied, not freed */
    prd__error("cache %s: realloc of freed block %p (not touched)",
               class_cache_of(e)->cache_name, ptr);
    errno = EINVAL;
    return NULL;
  }
  if (size == 0) {   /* glibc: free and return NULL */
    free_entry("realloc", ptr, e);
    return NULL;
  }
  size_t old = entry_usable(ptr, e);
  uint32_t kind = e & PM_KIND_MASK;
  if (kind == PM_CLASS) {
    /* in place while the class does not change (section 1) */
    if (size <= old && malloc_class_index(size) == pm_class_of(e))
      return ptr;
  } else if (kind != PM_BOOT && malloc_guard) {
    /* in place while it fits the data pages and fills more than half of them (1c) */
    /* a growth checks the bytes it hands over, the rest of the tail is checked at free (a
     * string grown a few bytes at a time costs no scan of its room); a shrink checks all */
    size_t data = big_guard_data(ptr, big_bytes(e)), osize = big_guard_size(ptr, data);
    if (size > MC_MAX && size <= data - BG_TAG && size > data / 2 && osize != SIZE_MAX &&
        (size <= osize ? big_guard_check("realloc", ptr, data)
                       : big_guard_range("realloc", ptr, osize, osize, size))) {
      if (size < osize)
        memset((char *)ptr + size, BG_BYTE, osize - size);
      big_tag_put((char *)ptr + data - BG_TAG, ptr, size, 0);
      return ptr;
    }
  } else if (kind != PM_BOOT && size > MC_MAX && size <= old && size > old / 2) {
    return ptr;   /* a big block shrinking by less than half keeps its pages */
  }
  int saved = errno;   /* a success keeps it: a refused remap or room on the way may set it */
  size_t want = size;
  if (size > old && size > MC_MAX && old + old / 2 > size && old + old / 2 > old)
    want = old + old / 2;   /* a growing big block: room for the next steps (section 1) */
  long huge = prd__opt(malloc_mmap_threshold);
  if (kind == PM_HUGE && huge > 0 && size >= (size_t)huge &&
      want <= (size_t)PTRDIFF_MAX - 3 * malloc_page) {
    bool bad = false;
    void *np = malloc_guard ? huge_resize_guarded(ptr, e, size, want, &bad)
                            : huge_resize(ptr, e, PRD_P2ROUNDUP(want, malloc_page), &bad);
    if (np != NULL)
      errno = saved;
    if (np != NULL || bad)
      return np;
  }
  void *np = prd_malloc(want);
  bool roomy = np != NULL && want != size;
  if (np == NULL && want != size)
    np = prd_malloc(size);
  if (np == NULL)
    return NULL;   /* ptr is left as it was */
  if (malloc_guard && roomy)   /* pages for `want`, the size asked for in the tag (1c) */
    big_guard_tail(np, size, big_guard_data(np, big_bytes(prd__pm_get(np))));
  memcpy(np, ptr, PRD_MIN(old, size));
  free_entry("realloc", ptr, e);
  errno = saved;
  return np;
}

void *prd_realloc(void *ptr, size_t size)
{
  /* the common cases first, without the bad-input bookkeeping (section 1): a class block
   * whose class does not change, a big block that shrinks by less than half or grows within
   * its pages (a string grown a few bytes at a time).  One test for NULL and the map's
   * bounds, as prd_free; anything else takes the full path below. */
  uintptr_t a = (uintptr_t)ptr;
  if (prd_likely(((a - 1) >> PRD_PM_ADDR_BITS) == 0) &&
      prd_likely(size != 0)) {
    /* acquire: pairs with the release CAS in pagemap.c (as prd__pm_base) */
    uintptr_t base = atomic_load_explicit(&prd__pm_root[a >> PRD_PM_ROOT_SHIFT],
                                          memory_order_acquire);
    if (prd_likely(base != 0)) {
      uintptr_t e = atomic_load_explicit(prd__pm_slot(a, base), memory_order_acquire);
      uint32_t kind = e & PM_KIND_MASK;
      if (kind == PM_CLASS) {
        /* and not freed, as the class's free mark says (class_free); a class without
         * MC_MARK (the 8-byte one, one without a hit path) asks realloc_slow, which tests
         * the mark by the class cache's flags */
        const prd_mclass_t *mc = pm_mclass(e);
        uint32_t sm = mclass_sm(mc);
        if (size <= MC_MAX && mclass_start_ok_sm(mc, sm, e, a) &&
            malloc_class_index(size) == pm_class_of(e) && (sm & MC_MARK) &&
            !prd__mark_test(ptr, 0))
          return ptr;
      } else if (kind != 0 && kind != PM_BOOT && (a & (malloc_page - 1)) == 0 &&
                 !(e & (PM_DEFERRED | PM_BUSY))) {   /* else realloc_slow reports it */
        size_t old = big_bytes(e);
        if (size > MC_MAX && size <= old && size > old / 2 && !malloc_guard)
          return ptr;
      }
    }
  }
  return realloc_slow(ptr, size);
}

void *prd_reallocarray(void *ptr, size_t n, size_t size)
{
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return prd_realloc(ptr, total);
}

int prd_posix_memalign(void **memptr, size_t align, size_t size)
{
  if (memptr == NULL)
    return EINVAL;
  if (align < sizeof(void *) || !PRD_ISP2(align))
    return EINVAL;
  void *p = malloc_aligned(size, align);
  if (p == NULL) {
    errno = ENOMEM;   /* returned and set, as glibc does */
    return ENOMEM;
  }
  *memptr = p;
  return 0;
}

void *prd_aligned_alloc(size_t align, size_t size)
{
  if (align == 0 || !PRD_ISP2(align)) {
    errno = EINVAL;
    return NULL;
  }
  return malloc_aligned(size, align);
}

void *prd_memalign(size_t align, size_t size)
{
  if (align == 0)
    align = 1;
  /* as glibc: above the largest power of two an alignment cannot be rounded up to one
   * (EINVAL); below it a bad alignment is rounded up, and one no block can have fails as an
   * allocation does (ENOMEM) */
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return NULL;
  }
  if (!PRD_ISP2(align))
    align = (size_t)1 << (64 - __builtin_clzll((unsigned long long)align));
  return malloc_aligned(size, align);
}

void *prd_valloc(size_t size)
{
  size_t page = prd__os_page_size();
  return malloc_aligned(size, page);
}

void *prd_pvalloc(size_t size)
{
  size_t page = prd__os_page_size();
  if (size > SIZE_MAX - page) {
    errno = ENOMEM;
    return NULL;
  }
  return malloc_aligned(size == 0 ? page : PRD_P2ROUNDUP(size, page), page);
}

/* ---- deferred frees (seed 001 §5: kfree_deferred needs no cache) ---------------------------- */
/* A big block has no cache to park it in: a node carries it through prd_call_rcu, so nothing
 * is written into the block while readers may still see it.  The nodes come from a cache of
 * the library's own (made at the first deferral, under malloc_init_lock as a class's cache
 * is), so that a leak report does not list them: the program freed the blocks they carry. */
struct malloc_defer_node {
  struct prd_rcu_head mdn_head;   /* first: the callback gets the node back from it */
  void *mdn_block;
};

static _Atomic(prd_cache_t *) mdn_cache;

/* The end of a big block's deferral: its entry, flagged by the deferral (section 3), is
 * freed here and nowhere else.  The flag keeps every other call off the block meanwhile, so
 * the entry is still the deferral's; the exchange in big_free_in says so once more. */
static void big_free_deferred(void *p)
{
  int saved = errno;
  uintptr_t e = prd__pm_get(p);
  if (prd_unlikely((e & PM_DEFERRED) == 0))
    malloc_bad("prd_free_deferred", p, "its entry lost the deferral's flag (corrupt)");
  else
    big_free("prd_free_deferred", p, e);
  prd__fork_section_enter();   /* as free_named: the decay or huge-block job wants a thread */
  if ((e & PM_KIND_MASK) == PM_HUGE && malloc_depth == 0)
    prd__maint_poke();
  else if (malloc_depth == 0)
    prd__cache_decay_nudge();
  prd__fork_section_leave();
  errno = saved;
}

/* Nodes for the deferrals that find no memory for one (the nodes' cache could not grow: a
 * failed mapping, an address-space limit).  Without a node the block could only be kept for
 * good, a transient failure made permanent; with one from here it is freed after its grace
 * period as any other, and the node comes back when its callback runs.  A bit per node, taken
 * and given back by compare-and-swap: no lock, so nothing for fork to take, and usable inside
 * read-side sections and the allocator's own paths.  Only when all are in flight is a block
 * kept. */
#define MDN_RESERVE_WORDS 4
static struct malloc_defer_node mdn_reserve[MDN_RESERVE_WORDS * 64];
static _Atomic uint64_t mdn_reserve_used[MDN_RESERVE_WORDS];

static struct malloc_defer_node *defer_node_reserve_take(void)
{
  for (int w = 0; w < MDN_RESERVE_WORDS; w++) {
    uint64_t used = atomic_load_explicit(&mdn_reserve_used[w], memory_order_relaxed);
    while (~used != 0) {
      int bit = __builtin_ctzll(~used);
      /* acquire: pairs with the release of the callback that gave the node back, whose
       * writes to it come before this taker's */
      if (atomic_compare_exchange_weak_explicit(&mdn_reserve_used[w], &used,
                                                used | (1ull << bit), memory_order_acquire,
                                                memory_order_relaxed))
        return &mdn_reserve[w * 64 + bit];
    }
  }
  return NULL;
}

/* A node for a deferral: from the nodes' cache, else from the reserve; NULL when neither
 * has one. */
static struct malloc_defer_node *defer_node_get(void)
{
  /* acquire: pairs with the release below (the cache made before its pointer is seen) */
  prd_cache_t *cp = atomic_load_explicit(&mdn_cache, memory_order_acquire);
  if (prd_unlikely(cp == NULL)) {
    malloc_enter();   /* malloc_init_lock is in fork's order (section 6) */
    pthread_mutex_lock(&malloc_init_lock);
    cp = atomic_load_explicit(&mdn_cache, memory_order_relaxed);
    if (cp == NULL) {   /* a failure is not remembered: the next deferral tries again */
      cp = prd__cache_create_internal("malloc_defer_node", sizeof(struct malloc_defer_node), 0);
      atomic_store_explicit(&mdn_cache, cp, memory_order_release);
    }
    pthread_mutex_unlock(&malloc_init_lock);
    malloc_leave();
  }
  struct malloc_defer_node *n = NULL;
  if (cp != NULL) {
    malloc_enter();
    n = prd_cache_alloc(cp, PRD_SLEEP);
    malloc_leave();
  }
  return n != NULL ? n : defer_node_reserve_take();
}

/* Gives n back, to the reserve when it is one of its nodes, else to the nodes' cache. */
static void defer_node_put(struct malloc_defer_node *n)
{
  /* compared as addresses: a pointer difference with a node outside the array is undefined */
  uintptr_t off = (uintptr_t)n - (uintptr_t)mdn_reserve;
  if (off < sizeof(mdn_reserve)) {
    uintptr_t i = off / sizeof(*n);
    atomic_fetch_and_explicit(&mdn_reserve_used[i / 64], ~(1ull << (i % 64)),
                              memory_order_release);
    return;
  }
  malloc_enter();
  prd_cache_free(atomic_load_explicit(&mdn_cache, memory_order_relaxed), n);
  malloc_leave();
}

static void malloc_defer_cb(struct prd_rcu_head *h)
{
  struct malloc_defer_node *n = (struct malloc_defer_node *)h;
  void *p = n->mdn_block;
  defer_node_put(n);
  big_free_deferred(p);
}

static void free_deferred_in(void *ptr);

/* Everything but a class block's deferral hit: errno kept (section 4). */
static PRD_NOINLINE void free_deferred_slow(void *ptr)
{
  int saved = errno;
  free_deferred_in(ptr);
  errno = saved;
}

void prd_free_deferred(void *ptr)
{
  /* a class block as prd_free finds it (class_of_start), then the deferral's hit path of its
   * cache, which calls nothing, takes no lock and sets no errno: no re-entry mark (as free's
   * hit path, section 8; a re-entrant call finds the thread's magazine layer held and
   * misses).  The rest out of line, so that this path saves no registers and no errno */
  uint32_t sm;
  const prd_mclass_t *mc = class_of_start(ptr, &sm);
  if (prd_likely(mc != NULL) &&
      prd_likely(prd__defer_hit_plain(atomic_load_explicit(&mc->mc_cache, memory_order_relaxed),
                                      ptr)))
    return;
  free_deferred_slow(ptr);
}

static void free_deferred_in(void *ptr)
{
  if (ptr == NULL)
    return;
  uintptr_t e = malloc_owner("prd_free_deferred", ptr);
  if (e == 0)
    return;
  switch (e & PM_KIND_MASK) {
  case PM_CLASS:
    /* the Prudence path of the block's size class (defer.c), marked: prd_free_deferred tried
     * its hit path already */
    malloc_enter();
    prd_cache_free_deferred(class_cache_of(e), ptr);
    malloc_leave();
    return;
  case PM_BOOT:
    return;
  default: {
    struct malloc_defer_node *n = defer_node_get();
    if (n == NULL) {
      /* no memory for the node and the reserve all in flight: waiting here could deadlock
       * inside a read-side section, and freeing now could pull the block from under a
       * reader; the block is kept (leaked) */
      prd__report("prd_free_deferred(%p): no memory to defer the free of a %zu-byte block "
                  "(and %d reserved nodes in flight): the block is kept", ptr, big_bytes(e),
                  MDN_RESERVE_WORDS * 64);
      return;
    }
    n->mdn_block = ptr;
    /* the flag first (section 3): from here the block is the callback's */
    uintptr_t a = (uintptr_t)ptr;
    uintptr_t want = e;
    if (!atomic_compare_exchange_strong_explicit(prd__pm_slot(a, prd__pm_base(a)), &want,
                                                 e | PM_DEFERRED, memory_order_acq_rel,
                                                 memory_order_acquire)) {
      defer_node_put(n);
      malloc_bad("prd_free_deferred", ptr, want & PM_DEFERRED
                                               ? "deferred twice (it is deferred already)"
                                               : "freed or resized while being deferred");
      return;
    }
    prd__fork_section_enter();   /* call_rcu.c's queue and worker locks (section 6) */
    prd_call_rcu(&n->mdn_head, malloc_defer_cb);
    prd__fork_section_leave();
    return;
  }
  }
}

/* ---- internal queries (tests, stats) ------------------------------------------------------ */
prd_cache_t *prd__malloc_class_cache(size_t size)
{
  if (!malloc_ready() || size > MC_MAX)
    return NULL;
  malloc_enter();
  prd_cache_t *cp = class_cache_get(malloc_class_index(size == 0 ? 1 : size));
  malloc_leave();
  return cp;
}

uint32_t prd__malloc_hit_id(size_t size)
{
  if (size <= MC_SMALL_MAX)
    return atomic_load_explicit(&malloc_hit1[size], memory_order_relaxed);
  if (size <= MC_MAX)
    return atomic_load_explicit(&malloc_hit2[(size + 127) >> 7], memory_order_relaxed);
  return MC_NOHIT;
}

size_t prd__malloc_class_size(unsigned i)
{
  if (!malloc_ready() || i >= MC_NCLASSES)
    return 0;
  return malloc_class[i].mc_size;
}

uintptr_t prd__malloc_pm_entry(const void *p)
{
  return prd__pm_get(p);
}

prd_cache_t *prd__malloc_pm_cache(const void *p)
{
  uintptr_t e = prd__pm_get(p);
  return pm_is_class(e) ? class_cache_of(e) : NULL;
}

/* ---- the C library's names of the hottest entry points (override.c section 4) -------------- */
#ifdef PRD_OVERRIDE_NAMES
/* libprudence-malloc.so only (CMakeLists.txt): malloc, free, cfree and malloc_usable_size are
 * the same symbols as their prd_ functions, not functions that jump to them, so a program's
 * call reaches the hit path with one branch fewer.  An alias needs its target in the same
 * translation unit, hence here; override.c defines every other name. */
#define PRD_ALIAS(name, target) \
  extern __typeof(target) name __attribute__((alias(#target), visibility("default")))
PRD_ALIAS(malloc, prd_malloc);
PRD_ALIAS(free, prd_free);
PRD_ALIAS(cfree, prd_free);
PRD_ALIAS(malloc_usable_size, prd_malloc_usable_size);
#undef PRD_ALIAS
#endif

/* ---- fork (section 6) ---------------------------------------------------------------------- */
void prd__malloc_fork_prepare(void)
{
  pthread_mutex_lock(&malloc_init_lock);   /* the first of the allocator's locks in fork.c */
  pthread_mutex_lock(&hc_lock);            /* a leaf: nothing is taken under it */
}

void prd__malloc_fork_release(void)
{
  pthread_mutex_unlock(&hc_lock);
  pthread_mutex_unlock(&malloc_init_lock);
}

PRD__FORK_LINK();
