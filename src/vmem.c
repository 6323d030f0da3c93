/*
 * vmem.c: resource arenas (Bonwick & Adams, "Magazines and Vmem", USENIX 2001, section 4;
 * the seed 004 slides "Vmem" and shared/VMEM.md restate it).
 *
 * 1. What.  An arena hands out ranges of integers in multiples of its quantum: virtual
 *    addresses, process ids, device minors, offsets.  It never touches the integers it
 *    manages, so it works for things that are not memory (examples/ids.c hands out ids from an
 *    arena whose base is 1).  The arena starts with an initial span [base, base+size) (it may
 *    be empty), grows by prd_vmem_add() and by importing spans from a source arena through
 *    afunc, and gives a wholly free imported span back through ffunc.
 *
 *    Quantum caches (section 14): an arena with qcache_max > 0 serves prd_vmem_alloc and
 *    prd_vmem_free of every multiple of the quantum up to qcache_max from object caches with
 *    magazines in front of itself; prd_vmem_xalloc/xfree and larger sizes use the arena.
 *
 * 2. Segments (paper 4.2, "boundary tags").  Every span and every free or allocated range of
 *    it is a boundary tag (prd_vseg_t), and all tags sit on ONE address-ordered doubly linked
 *    list headed by the sentinel vm_seg0: each span tag is followed by the segments that tile
 *    it exactly.
 *
 *        vm_seg0 <-> [SPAN 1000-2000] <-> [ALLOC 1000-1200] <-> [FREE 1200-2000]
 *                <-> [SPAN 8000-9000] <-> [FREE 8000-8400] <-> [ALLOC 8400-9000] <-> vm_seg0
 *
 *    Span tags are also on a span list (vs_knext/vs_kprev, sorted, headed by vm_seg0), which
 *    is short: it is walked by prd_vmem_add (overlap check) and the "can this ever fit" test.
 *    Free merges a segment with free neighbours on the list (coalescing), so no two free
 *    segments are ever adjacent; a span tag between them keeps spans apart.
 *
 * 3. Freelists (paper 4.3).  A free segment of size s sits on freelist highbit(s): list n
 *    holds sizes in [2^n, 2^(n+1)).  vm_freemap has bit n set while list n is not empty.
 *    64 lists cover every uintptr_t size.
 *
 * 4. Policies (paper 4.3), chosen per call in vmflags:
 *    - instant-fit (default): every segment on list ceil(log2(size)) or above is big enough, so
 *      one bit scan of vm_freemap (count trailing zeros of the bits at or above that list)
 *      names a list whose first segment fits: constant time however fragmented the arena.
 *      Only when no such list exists is list floor(log2(size)) (which may hold a fit) searched.
 *    - best-fit: the smallest fitting segment of the lowest list that holds a fit (from list
 *      floor(log2(size)) up; lists above hold only larger segments).
 *    - first-fit: the lowest-addressed free segment that fits (a walk of the address list).
 *    - next-fit: the first fit at or after the rotor (the end of the previous next-fit
 *      allocation), wrapping around once; ids are then not reused soon.  The rotor is a tag
 *      pointer (vm_rotor) plus an address; removing the rotor's tag moves it to the previous tag,
 *      and a search begins at the first tag that ends after the address (another policy may
 *      have carved the rotor's free segment since, leaving a tag below the rotor's).
 *    With constraints (section 5) a segment may be big enough and still not fit; each policy
 *    then goes on to the next candidate, so every policy finds a fit whenever one exists.
 *
 * 5. Constrained allocation (prd_vmem_xalloc, paper 4.1): the result a satisfies
 *    a % align == phase, [a, a+size) does not cross a multiple of nocross, and
 *    minaddr <= a, a+size <= maxaddr.  A request that no address can meet whatever the
 *    arena holds (phase >= align, size > nocross, phase % nocross + size > nocross,
 *    maxaddr - minaddr < size) is an invalid argument (EINVAL), not a shortage.
 *
 * 6. Allocated segments (paper 4.2) sit in a hash table keyed by start address (multiplicative
 *    hashing of addr >> quantum shift), so free finds its tag in O(1).  The table starts with
 *    16 embedded buckets and grows 4x (new buckets from os.c; hash.h moves the chains, the
 *    table code vmem.c shares with slab.c) whenever the arena holds more than 2 allocated
 *    segments per bucket, so chains stay short as the arena grows; it never shrinks (a
 *    shrink would only save memory that the peak needed anyway).
 *
 * 7. Importing (paper 4.1).  An arena with an afunc that finds no fit imports a span of the
 *    request's size (plus align - quantum when the alignment exceeds the quantum, so the span
 *    surely holds an aligned fit), rounded up to the source's quantum or to vm_import_chunk,
 *    and adds it as an imported span.  Requests with nocross/minaddr/maxaddr do not import:
 *    the source cannot be told those constraints.  When a free leaves an imported span wholly
 *    free, the span goes back through ffunc at once.  afunc and ffunc run with the arena lock
 *    dropped; afunc is always called with PRD_VM_NOSLEEP, so the waiting (section 10) is done
 *    here, bounded, and never inside a source that might wait forever.
 *    The heap arena (prd_heap_arena) has a page quantum and no source arena: its afunc maps
 *    4 MiB-aligned blocks from os.c (requests above 4 MiB are rounded up to a 4 MiB multiple)
 *    and its ffunc unmaps them.  4 MiB: large enough that an import serves many slabs (one
 *    mmap per 1024 pages), a multiple of 2 MiB so blocks can be backed by huge pages, small
 *    enough that a wholly free block goes back to the kernel soon.
 *
 * 8. The tag reserve (paper 4.2).  Tags come from pages mapped by os.c, never from an arena, so
 *    allocating a tag cannot recurse into the arena being served (or any other).  Each arena
 *    keeps its own reserve: before an operation it makes sure it holds as many tags as the
 *    operation can consume (a split takes 2, adding a span 2), mapping one more page when short
 *    (a 4 KiB page holds 63 tags: the first slot links the pages for destroy).  Tags freed by
 *    coalescing go back to the reserve; pages go back to the kernel when the arena is destroyed.
 *
 * 9. Invariants (prd__vmem_check, run by the model test after every step and by Debug builds
 *    at the end of prd_vmem_add/destroy): spans sorted and disjoint; each span's segments tile
 *    it exactly, in order; no two adjacent free segments; every free segment on the freelist of
 *    its size class, every freelist member free, the bitmap equal to the non-empty lists; every
 *    allocated segment in its hash bucket and nothing else there; no imported span wholly free
 *    (but in the heap arena, which keeps what a growth reap frees: section 16); the statistics
 *    equal to what the lists hold; the rotor on the list.
 *
 * 10. Locking.  One mutex per arena (vm_lock) protects all of the above.  Why one: every
 *    operation touches the address list, a freelist and the hash together, and all of them are
 *    O(1) (instant-fit), so the lock is held for a few dozen instructions; finer locks would
 *    cost more than they save, and scaling is the job of the quantum caches and the magazine
 *    layer above (paper section 3), not of the arena.  Lock order: an arena's lock is a leaf;
 *    it is dropped around afunc/ffunc, so a child never holds its lock while taking its
 *    source's, and os.c takes no locks.  PRD_VM_SLEEP waits on vm_cv, which frees and adds
 *    broadcast when vm_waiters > 0 (both under vm_lock, so no wakeup is lost: the mutex orders
 *    the waiter's check against the free).  An arena without afunc waits until a free or an
 *    add makes room, without limit, unless no span could ever hold the request (then ENOMEM at
 *    once).  An importing arena waits in slices of VMEM_SLEEP_SLICE_MS, retrying the import
 *    after each, and fails with ENOMEM after the option vmem_sleep_ms: an exhausted source or
 *    kernel must not hang the process.  A failure to map a page of tags (section 8) is waited
 *    for in the same bounded way, in any arena.  PRD_VM_NOSLEEP fails at once with ENOMEM.
 *
 * 11. Bad input.  Invalid arguments (size 0, size/align/phase/nocross not multiples of the
 *    quantum, align or nocross not a power of two, phase >= align, impossible constraints,
 *    minaddr >= maxaddr, more than one policy flag, NULL arena) return NULL with errno EINVAL.
 *    A bad free (an address that is not the start of an allocated segment: never allocated,
 *    inside a segment, or already free; a wrong size; an alloc/xalloc mispairing within
 *    qcache_max) is reported through prd__report with the arena name, the address and what was
 *    wrong, counted in bad_frees, and then prd__report_done() decides whether to abort.  The
 *    arena is left as it was, except that a mispaired free is still carried out (the segment
 *    and size are right).  Destroying an arena that still holds allocations reports each leaked
 *    segment (the first 16, then a count) and frees them with the arena.
 *
 * 12. Statistics: vm_stats is a prd_vmem_stats_t (its fields come from the one list
 *    PRD_VMEM_STATS in prudence.h), kept under vm_lock by the code that changes the lists, so
 *    prd_vmem_stats copies a consistent snapshot and prd__vmem_check can recount every field
 *    that describes the lists.  prd__vmem_stats_write prints text or JSON from the same list.
 *    Every arena is on one list (vm_next, under vmem_list_lock, taken before any vm_lock) so
 *    that prd__vmem_snapshot can copy all of them for prd_stats_print (stats.c).
 *
 * 13. Constants: VMEM_HASH_LOAD 2 (segments per bucket before growth: a short chain),
 *    VMEM_HASH_GROW 4 (fewer rehashes while an arena fills), VMEM_TAGS_PER_OP 2 (the most
 *    tags one allocation consumes: a split of both ends; an import reserves its own 2 more),
 *    VMEM_SLEEP_SLICE_MS 10 (a retry every 10 ms costs nothing and reacts quickly to a source
 *    that frees), VMEM_LEAKS_SHOWN 16 (enough to see the pattern, short enough to read),
 *    HEAP_CHUNK 4 MiB (section 7), VMEM_DECAY_BATCH 32 MiB (section 16: a madvise of that
 *    much takes a few milliseconds, the longest an allocation waits behind a decay pass or a
 *    purge), VMEM_DECOMMIT_BATCH 16 (section 16: the same for scattered ranges, where each
 *    madvise's TLB shootdown is what costs; 16 of them take a few milliseconds on a 2-core
 *    virtual machine with another thread running), VMEM_DIRTY_SCALE_MAX 64 and
 *    VMEM_DIRTY_SCALED_PCT 100 (section 16: a churn of big blocks needs its whole free space,
 *    which fragmentation makes about its live size, or its peak where it frees all it built;
 *    the decay passes still take back what it leaves), VMEM_QCACHE_RETRY_NS 10 ms (section 14: memory short enough that a cache cannot
 *    be made rarely lasts longer, and a failed try costs a few failed mappings),
 *    VMEM_QC_DRAIN_MS 100 (section 14: a sleeper's drains take other threads' magazines, so
 *    ten a second at most; a free into a magazine wakes no one).
 *
 * 14. Quantum caches (paper section 4.4; seed 004 "quantum caching").  An arena created with
 *    qcache_max > 0 (clamped to PRD_VMEM_NQCACHE quanta) gets, at its first prd_vmem_alloc of
 *    such a size, one object cache per multiple k of the quantum, "<arena>_qc<k>", of objects
 *    of k quanta, PRD_CACHE_NOTOUCH (the objects are integers: never written), whose source is
 *    the arena itself.  Their slabs come from the arena through prd_vmem_xalloc, which never
 *    goes through the quantum caches, so there is no recursion.  prd_vmem_alloc of those sizes
 *    is then a magazine pop (the per-thread fast path of magazine.c) and groups allocations
 *    by size, which cuts fragmentation; prd_vmem_free of those sizes pushes onto a magazine.
 *    The statistics of the arena then count the caches' slabs, not each small allocation.
 *    A free of a cached size is not checked: the magazine takes it (the integers are not
 *    memory, so there is no free mark, and the record of an allocated object is found only
 *    under the cache's lock), so an address never allocated, one freed already (unless it was
 *    the last one freed, the magazine's top) or an xalloc'ed segment goes back into
 *    circulation, as in kmem and libumem; PRUDENCE_DEBUG=verify (which the quantum caches
 *    take like every cache) checks every such free against the cache's records and reports
 *    it, naming the cache.  Section 11's reports cover the sizes the caches do not serve.
 *    Integers freed through the caches stay in their magazines and slabs, so an arena with no
 *    source, whose request finds no room and cannot import, drains every quantum cache once
 *    per call (vmem_qcache_drain, prd__cache_drain: every thread's magazines of them not in
 *    an operation at that instant, the depots, the free slabs, which come back here) and
 *    tries again before it fails or sleeps (Solaris vmem_xalloc reaps its quantum caches the
 *    same way), and a sleeper drains them again every VMEM_QC_DRAIN_MS, since a free into a
 *    magazine wakes no one; without it an ID allocator whose ids were all freed one at a
 *    time failed a larger request, or slept for ever.  An importing arena imports instead (its source is
 *    the shortage's place to act: the heap arena's failure goes to the slab layer's reclaim).
 *    A cache's slab is an xalloc'ed segment of the arena (vs_qslab: made while prd_vmem_alloc
 *    called the cache, vmem_qc_caller); a prd_vmem_free of a cached buffer with the slab's
 *    size by mistake finds that segment at the buffer's address, and is reported as a wrong
 *    size instead of freeing the slab under the cache's live buffers.
 *    A cache's slab is several objects (slab.c's PRD_NOTOUCH_MIN_BUFS) in one run; an arena
 *    without a source that has no such run may still hold the one segment asked for (an ID
 *    allocator nearly full, or its room in runs shorter than a slab).  So when the cache
 *    fails, such an arena serves the request itself, as below (vs_qdirect), with the drain
 *    and the sleep of any request: a cached size fails or sleeps only when the arena has no
 *    room for it, as the API promises.
 *    If the caches cannot be made (no memory), the arena serves every size itself and the
 *    pairing check of section 11 applies, and the first allocation of a cached size after
 *    VMEM_QCACHE_RETRY_NS tries again: a failure is retried, not remembered (an arena that
 *    met a short shortage at its first small allocation would otherwise take vm_lock for
 *    every small size for the rest of its life).  A try only try-locks vmem_qcache_lock (its
 *    caller may be a destructor run by a reap, under cache_reap_lock, which fork's order puts
 *    after it) and keeps the caches it made when a later one fails (destroying them would
 *    take cache_reap_lock); the next try goes on from the first missing one.  What the arena served itself meanwhile
 *    must come back to the arena, not to a cache, whose magazines would take it unchecked
 *    (a NOTOUCH cache cannot tell a foreign integer): such a segment is marked (vs_qdirect)
 *    and counted (vm_qdirect, under vm_lock), and while the count is not 0 a free of a
 *    cached size first looks its address up in the hash (vmem_qdirect_at).  The count is
 *    read relaxed without the lock: the segment's allocation counted it before handing it
 *    out, so the free of a marked segment, which the program orders after that allocation,
 *    reads a count that includes it; a count of 0 misses no marked segment.
 *    The heap arena has qcache_max = HEAP_QCACHE_PAGES pages.  The caches are destroyed first
 *    by prd_vmem_destroy.  Creating them takes vmem_qcache_lock (it nests slab-layer locks).
 *
 * 16. Decay (jemalloc's dirty-page decay, mimalloc's purge).  A free segment remembers whether
 *    its pages may be resident (vs_dirty): PRD_VS_CLEAN when nothing touched them since they
 *    were mapped or decommitted, PRD_VS_NEW when freed since the last decay pass, PRD_VS_AGED
 *    when already dirty at the last pass.  A freed segment is NEW, and so is a segment it
 *    coalesces with (the newest part decides: memory freed a moment ago is not decommitted on
 *    the strength of its neighbour's age, which would make a churning workload refault it);
 *    the two ends a split leaves keep their segment's state.  vm_dirty counts the bytes of
 *    dirty free segments.  A decay pass (prd__vmem_decay, run by the front end's decay job:
 *    cache.c) decommits every AGED segment (every dirty one when `all`: malloc_trim, prd_reap)
 *    and then marks the NEW ones AGED, so a range free for a whole pass period is decommitted
 *    by the next pass, one freed just before a pass by the pass after.  Only an arena whose
 *    integers are memory it may discard (vm_decommit: the heap arena) calls os.c's
 *    prd__os_decommit (MADV_DONTNEED); others only keep the states, which the model test
 *    checks.  A decommitted range reads back as zeroes on first touch, which every caller
 *    accepts: none relies on the heap arena's memory being zero (calloc clears what it takes
 *    from it), and fresh imports are zero anyway.  The decommit runs under vm_lock, so no
 *    allocation can take the range while its pages go (the lock is a leaf and os.c takes
 *    none); a pass drops the lock after every VMEM_DECAY_BATCH bytes or VMEM_DECOMMIT_BATCH
 *    segments decommitted, so other threads wait at most for one batch.  A madvise that fails leaves the segment dirty, and
 *    the walk stops there: a kernel or a seccomp filter that refuses it (EPERM, ENOSYS,
 *    EINVAL) refuses it for every segment, and the dirty bytes, which then never fall, would
 *    make every later free walk the free lists again under vm_lock, each decommit failing,
 *    while the other threads wait for the lock.  So a refusal is reported, with its errno, at
 *    the first (then once per 1024, however successes and refusals alternate:
 *    vm_decommit_refused), and no purge runs until VMEM_DECOMMIT_RETRY_NS later
 *    (vm_decommit_retry_ns); a pass or a reap tries again regardless: a refusal is retried,
 *    never remembered for good.  The pages stay resident meanwhile, as they would with the bound off.
 *    The dirty bound (jemalloc 3's lg_dirty_mult, glibc's trim threshold).  Decay acts on
 *    time, so a program phase that frees its peak and ends (or goes on allocating other
 *    sizes) within decay_ms keeps every freed page resident until then.  So an arena with
 *    vm_decommit also bounds vm_dirty by space: cap = max(option heap_dirty_min, option
 *    heap_dirty_pct percent of bytes_alloc).  A free that leaves vm_dirty above the cap
 *    (tested under vm_lock, where both change) purges, after it dropped the lock
 *    (vmem_purge): under vm_lock again, it re-tests the cap (a
 *    purge by another thread may have restored it) and decommits whole free segments, AGED
 *    ones before NEW ones (the older first: NEW ones are likelier to be taken again soon),
 *    from the largest freelist down and from each list's tail (its oldest members), until
 *    vm_dirty is at most cap / 2.  The half is the hysteresis: a program that frees and
 *    refills around the cap purges once per cap / 2 of net frees, not on every free past it.
 *    Who does it: the freeing thread, inline, one slice a call.  A free to the arena is
 *    already a slow path (a slab or a big block given back), it needs no maintenance thread,
 *    which may be off or unable to start, and the cost stays with the thread that made the
 *    excess.  But a madvise is a TLB shootdown on every core the process runs on (tens to
 *    hundreds of microseconds on a virtual machine), and one call can free a thousand
 *    scattered ranges: the slab layer gives a stalled reader's burst back inside one
 *    allocation.  So a slice is one batch (VMEM_DECOMMIT_BATCH decommits or
 *    VMEM_DECAY_BATCH bytes, the most a pass or purge does under one hold of vm_lock); one
 *    that stops short of the target leaves vm_purge_more set, with the kind of purge that
 *    started it.  Then the maintenance thread's job (heap_purge_job, registered when the
 *    heap arena is made; it wakes about once a second) finishes the purge in batches; while
 *    no such thread runs (a single-threaded program, maint_thread=0) the arena's next frees
 *    and allocations go on with it, a slice each.  The bound so holds within about a
 *    second, or a few calls, of the free that passed it.  The purge hold
 *    (prd__vmem_purge_hold / release, thread-local and nested) is for such runs of frees:
 *    the frees inside it only note the arena, and the release purges once, after they have
 *    coalesced with each other, so a run of neighbouring slabs is one decommit, not one per
 *    few slabs as the cap is passed again and again.  Each decommitted segment counts in
 *    the statistics' decommits (and in decay passes too), each purge begun in purges.
 *    Wholly free spans stay.  The heap arena keeps an imported span that a free leaves
 *    wholly free, dirty like any free segment, and a pass gives it back to the source once
 *    it finds it decommitted (release_clean_spans; prd_reap's pass at once).  Unmapped at
 *    the free, a program that builds a few MiB and frees it all, over and over (a plugin's
 *    constructor and destructor, a per-request arena), mapped and faulted its blocks in
 *    again at every build: 40-100 times glibc's time.  Retained, they are the bound's to
 *    decommit, whose refault count then sees the churn, as jemalloc keeps its address space
 *    and purges.
 *    The bound follows refaults.  A program that frees and allocates more than the bound
 *    between two passes (blocks of a few hundred KiB from many threads) makes the freeing
 *    thread decommit at every few frees, and its next allocations fault the same pages back
 *    in: a madvise (a TLB shootdown on every core of a threaded process) per dozen frees,
 *    under vm_lock, which every other big block's malloc and free then waits for.  So a
 *    segment the bound decommits after a free is marked (vs_purged, kept through splits and
 *    merges, cleared by the next pass), an allocation from it counts its bytes (vm_refault,
 *    counted from one purge after a free to the next, or to a pass), and when a purge after
 *    a free finds more refaulted bytes than half the bound (what a purge down to half of it
 *    took away), the bound's factor (vm_dirty_scale) doubles, up to VMEM_DIRTY_SCALE_MAX and
 *    to the unscaled bound plus VMEM_DIRTY_SCALED_PCT percent of the most bytes allocated
 *    since the last pass (vm_alloc_peak: a program that frees all it built and builds it
 *    again churns its peak, and has next to nothing allocated at the drop): dirty free
 *    memory then stays as large as the program's churn, as glibc's and jemalloc's do, and
 *    no more.  It halves when a free passes the
 *    raised bound with nothing refaulted since the last purge though the program allocated
 *    half the cap meanwhile (the churn is over; this works with decay off too; a run of
 *    frees with no allocation between its purges, a free-all, says nothing), and at a pass
 *    after a period with no refault unless the dirty bytes at their peak in the period
 *    (vm_dirty_peak) filled half of the lower bound; what the churn leaves unused is the
 *    decay passes' to decommit anyway.
 *    The purges of an allocation (the reuse allowance, below) and of a growth reap's frees
 *    mark nothing: their refaults are the allowance's chosen price, not the bound's
 *    mistake.  Measured (docs/benchmarks.md): 8 threads churning blocks of up to 300 KB
 *    made 188,790 decommits in 4,838 purges, 6 times glibc's time; 1,282 in 34 now.
 *    Reuse before purge.  cache.c's growth reap (a cache grew by another 4 MiB of slabs, and
 *    the depots idle since the last reap go back to their slabs) frees a finished phase's
 *    slabs to the heap arena while the heap's allocated bytes are low, so the bound would
 *    decommit nearly all of them, and the growing cache, which takes exactly that memory
 *    next, would fault every page back in.  So the reap marks its thread's frees
 *    (prd__vmem_heap_reuse; vmem_reuse_scope, thread-local): each adds its size to
 *    vm_reuse, the allowance of dirty bytes above the cap (at most vm_dirty).
 *    Every later allocation from the arena pays the allowance down by twice its size, and a
 *    free or an allocation that leaves vm_dirty above cap + vm_reuse (dirty_limit) purges
 *    down to cap / 2 + vm_reuse as above, the allocation after it dropped the lock.  So while
 *    the next phase allocates, the arena purges about one byte for each byte it reuses:
 *    with D bytes freed by reaps and A allocated after them, min(A, D / 2) of the reused
 *    pages are dirty ones (no fault), and once A reaches D / 2 the allowance is spent and
 *    the dirty bytes are within the cap again, the excess purged before the phase ends.
 *    Twice is the hedge of not knowing A: an allowance spent byte for byte would keep
 *    D - A resident when the next phase is smaller than the last; a purge at the free
 *    faults all of min(A, D) back in.  A decay pass zeroes the allowance (what a reap left
 *    for reuse and nobody took is the pass's to decommit); until then, if the allocations
 *    stop, what is left of it stays resident, as it was in the depots before the reap.
 *    Frees by the program itself never add to it: a program that frees its peak and goes
 *    idle gets the bound at once.  Ordering: vm_reuse is read and written under vm_lock
 *    only, like vm_dirty; the scope flag is the thread's own.
 *    Reuse prefers resident pages: flist_insert puts a dirty segment at the head of its list
 *    and a clean one at the tail, and instant-fit takes a list's first member, so of the
 *    segments of one list a dirty one is taken before a clean one (an import's clean rest,
 *    a decommitted segment).  Across lists instant-fit stays constant time and takes the
 *    lowest list that surely fits, clean or not; a decay pass marks segments clean where they
 *    stand (its walk goes on from them), so the order is a preference, not an invariant.
 *
 * 15. fork: prd__vmem_fork_prepare_early takes heap_lock and vmem_qcache_lock (they nest the
 *    slab layer's locks, so they come first), prd__vmem_fork_prepare every arena's vm_lock
 *    (leaves) through the list of all arenas; the child re-initializes every vm_cv and
 *    vm_waiters, since the waiters were threads that the child does not have.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "internal.h"

#define VMEM_HASH_LOAD      2
#define VMEM_HASH_GROW      4
#define VMEM_TAGS_PER_OP    2
#define VMEM_SLEEP_SLICE_MS 10
#define VMEM_LEAKS_SHOWN    16
#define HEAP_CHUNK          ((size_t)4 << 20)
#define VMEM_DECAY_BATCH    ((size_t)32 << 20)
#define VMEM_DECOMMIT_BATCH 16      /* section 16: decommits per hold of vm_lock, per inline purge */
#define VMEM_QCACHE_RETRY_NS ((uint64_t)10000000)   /* section 14 */
#define VMEM_QC_DRAIN_MS    100     /* section 14 */
#define VMEM_DIRTY_SCALE_MAX 64     /* section 16 */
#define VMEM_DIRTY_SCALED_PCT 100   /* section 16 */
#define HEAP_QCACHE_PAGES   8   /* heap quantum caches: 1..8 pages (8: kmem's heap, and slabs of
                                   8+ buffers of 8 pages still fit in one 4 MiB import) */

/* A request, with the constraints already checked: lo <= a, a + size <= hi. */
struct vreq {
  uintptr_t vr_size, vr_align, vr_phase, vr_nocross, vr_lo, vr_hi;
  bool vr_qdirect;   /* a cached size served while the quantum caches are not made (§14) */
  bool *vr_clean;    /* not NULL: told whether the range came from a clean segment (§16) */
};

/* An imported span a free left wholly free: given back after the lock is dropped. */
struct vrelease {
  uintptr_t vl_start;
  size_t vl_size;
};

static inline int vmem_highbit(uintptr_t x)
{
  return 63 - __builtin_clzll((unsigned long long)x);
}

static inline uintptr_t vseg_size(const prd_vseg_t *vsp)
{
  return vsp->vs_end - vsp->vs_start;
}

/* vm_dirty changes under vm_lock; the relaxed store lets prd__vmem_heap_dirty read it
 * without the lock (a hint for when to run a pass, never a decision about a segment). */
static inline void dirty_add(prd_vmem_t *vmp, size_t plus, size_t minus)
{
  __atomic_store_n(&vmp->vm_dirty, vmp->vm_dirty + plus - minus, __ATOMIC_RELAXED);
  if (vmp->vm_dirty > vmp->vm_dirty_peak)
    vmp->vm_dirty_peak = vmp->vm_dirty;   /* section 16: a pass's test of a raised bound */
}

/* vm_qdirect += d (vm_lock held; relaxed atomics for the unlocked reader, section 14). */
static inline void qdirect_add(prd_vmem_t *vmp, int d)
{
  uint64_t n = atomic_load_explicit(&vmp->vm_qdirect, memory_order_relaxed);
  atomic_store_explicit(&vmp->vm_qdirect, n + (uint64_t)(int64_t)d, memory_order_relaxed);
}

/* Takes the free segment vsp's bytes out of vm_dirty (before it is merged or allocated). */
static inline void dirty_drop(prd_vmem_t *vmp, const prd_vseg_t *vsp)
{
  if (vsp->vs_dirty != PRD_VS_CLEAN)
    dirty_add(vmp, 0, vseg_size(vsp));
}

const char *prd__vmem_name(const prd_vmem_t *vmp)
{
  return vmp->vm_name;
}

size_t prd__vmem_quantum(const prd_vmem_t *vmp)
{
  return vmp->vm_quantum;
}

size_t prd__vmem_qcache_limit(const prd_vmem_t *vmp)
{
  return atomic_load_explicit(&vmp->vm_qcache_state, memory_order_acquire) == 1
             ? vmp->vm_qcache_max : 0;
}

/* ---- the tag reserve (section 8) ------------------------------------------------------ */

/* Makes sure the reserve holds at least n tags; 0, or -1 when os.c has no page. */
static int tag_reserve(prd_vmem_t *vmp, size_t n)
{
  while (vmp->vm_ntags < n) {
    size_t page = prd__os_page_size();
    char *p = prd__os_map(page);
    if (p == NULL)
      return -1;
    /* slot 0 links the pages; the others become tags */
    *(void **)p = vmp->vm_tag_pages;
    vmp->vm_tag_pages = p;
    for (size_t off = sizeof(prd_vseg_t); off + sizeof(prd_vseg_t) <= page;
         off += sizeof(prd_vseg_t)) {
      prd_vseg_t *vsp = (prd_vseg_t *)(p + off);
      vsp->vs_knext = vmp->vm_tags;
      vmp->vm_tags = vsp;
      vmp->vm_ntags++;
    }
  }
  return 0;
}

static prd_vseg_t *tag_get(prd_vmem_t *vmp)
{
  prd_vseg_t *vsp = vmp->vm_tags;
  PRD_ASSERT(vsp != NULL && vmp->vm_ntags > 0);
  vmp->vm_tags = vsp->vs_knext;
  vmp->vm_ntags--;
  memset(vsp, 0, sizeof(*vsp));
  return vsp;
}

static void tag_put(prd_vmem_t *vmp, prd_vseg_t *vsp)
{
  vsp->vs_type = 0;
  vsp->vs_knext = vmp->vm_tags;
  vmp->vm_tags = vsp;
  vmp->vm_ntags++;
}

/* ---- the address-ordered list (section 2) --------------------------------------------- */

static void alist_insert_after(prd_vseg_t *prev, prd_vseg_t *vsp)
{
  vsp->vs_aprev = prev;
  vsp->vs_anext = prev->vs_anext;
  prev->vs_anext->vs_aprev = vsp;
  prev->vs_anext = vsp;
}

static void alist_remove(prd_vmem_t *vmp, prd_vseg_t *vsp)
{
  if (vmp->vm_rotor == vsp)
    vmp->vm_rotor = vsp->vs_aprev;
  vsp->vs_aprev->vs_anext = vsp->vs_anext;
  vsp->vs_anext->vs_aprev = vsp->vs_aprev;
}

/* ---- freelists (section 3) ------------------------------------------------------------ */

/* A dirty segment goes to the head of its list, a clean one to the tail: instant-fit takes a
 * list's first member, so within a list it reuses resident pages before it faults in clean
 * ones (section 16). */
static void flist_insert(prd_vmem_t *vmp, prd_vseg_t *vsp)
{
  int n = vmem_highbit(vseg_size(vsp));
  prd_vseg_t *head = &vmp->vm_freelist[n];
  prd_vseg_t *after = vsp->vs_dirty == PRD_VS_CLEAN ? head->vs_kprev : head;
  vsp->vs_kprev = after;
  vsp->vs_knext = after->vs_knext;
  after->vs_knext->vs_kprev = vsp;
  after->vs_knext = vsp;
  vmp->vm_freemap |= (uint64_t)1 << n;
}

static void flist_remove(prd_vmem_t *vmp, prd_vseg_t *vsp)
{
  vsp->vs_kprev->vs_knext = vsp->vs_knext;
  vsp->vs_knext->vs_kprev = vsp->vs_kprev;
  int n = vmem_highbit(vseg_size(vsp));
  prd_vseg_t *head = &vmp->vm_freelist[n];
  if (head->vs_knext == head)
    vmp->vm_freemap &= ~((uint64_t)1 << n);
}

/* ---- the allocated-segment hash (section 6) ------------------------------------------- */

static inline size_t hash_index(const prd_vmem_t *vmp, uintptr_t addr)
{
  uint64_t h = (uint64_t)(addr >> vmp->vm_qshift) * 0x9e3779b97f4a7c15ull;
  return (size_t)(h >> vmp->vm_hash_shift) & vmp->vm_hash_mask;
}

/* Grows the table VMEM_HASH_GROW times (hash.h: the table comes from os.c, and if no memory
 * can be had the old table stays: chains grow longer; correctness does not depend on the
 * table's size). */
static void hash_grow(prd_vmem_t *vmp)
{
  size_t old_n = vmp->vm_hash_mask + 1;
  size_t new_n = old_n * VMEM_HASH_GROW;
  prd_vseg_t **table = prd__hash_table_map(new_n);
  if (table == NULL)
    return;
  prd_vseg_t **old = vmp->vm_hash;
  vmp->vm_hash = table;
  vmp->vm_hash_mask = new_n - 1;
  vmp->vm_hash_shift = 64 - vmem_highbit(new_n);
  PRD__HASH_MOVE(prd_vseg_t, old, old_n, table, vs_knext, hash_index, vmp, vs_start);
  prd__hash_table_unmap(old, old_n, vmp->vm_hash0);
}

static void hash_insert(prd_vmem_t *vmp, prd_vseg_t *vsp)
{
  if (prd_unlikely(vmp->vm_stats.segs_alloc > VMEM_HASH_LOAD * (vmp->vm_hash_mask + 1)))
    hash_grow(vmp);
  size_t b = hash_index(vmp, vsp->vs_start);
  vsp->vs_knext = vmp->vm_hash[b];
  vmp->vm_hash[b] = vsp;
}

static prd_vseg_t **hash_find(prd_vmem_t *vmp, uintptr_t addr)
{
  prd_vseg_t **pp = &vmp->vm_hash[hash_index(vmp, addr)];
  while (*pp != NULL && (*pp)->vs_start != addr)
    pp = &(*pp)->vs_knext;
  return pp;
}

/* ---- spans ---------------------------------------------------------------------------- */

/* The first span tag whose start is >= start (vm_seg0 when none). */
static prd_vseg_t *span_next(prd_vmem_t *vmp, uintptr_t start)
{
  prd_vseg_t *sp = vmp->vm_seg0.vs_knext;
  while (sp != &vmp->vm_seg0 && sp->vs_start < start)
    sp = sp->vs_knext;
  return sp;
}

static bool span_overlaps(prd_vmem_t *vmp, uintptr_t start, uintptr_t end)
{
  prd_vseg_t *next = span_next(vmp, start);
  prd_vseg_t *prev = next->vs_kprev;
  if (next != &vmp->vm_seg0 && next->vs_start < end)
    return true;
  return prev != &vmp->vm_seg0 && prev->vs_end > start;
}

/* Adds [start, end) as a span with one free segment; returns the span's tag.  Needs 2 tags
 * and no overlap. */
static prd_vseg_t *span_insert(prd_vmem_t *vmp, uintptr_t start, uintptr_t end, bool import)
{
  prd_vseg_t *next = span_next(vmp, start);
  prd_vseg_t *sp = tag_get(vmp);
  sp->vs_start = start;
  sp->vs_end = end;
  sp->vs_type = PRD_VS_SPAN;
  sp->vs_import = import;
  /* span list: before next */
  sp->vs_knext = next;
  sp->vs_kprev = next->vs_kprev;
  next->vs_kprev->vs_knext = sp;
  next->vs_kprev = sp;
  /* address list: just before next's span tag (or at the tail when next is vm_seg0) */
  alist_insert_after(next->vs_aprev, sp);
  prd_vseg_t *vsp = tag_get(vmp);
  vsp->vs_start = start;
  vsp->vs_end = end;
  vsp->vs_type = PRD_VS_FREE;
  vsp->vs_dirty = PRD_VS_CLEAN;   /* a fresh import, or integers nobody touched here */
  vsp->vs_purged = 0;
  alist_insert_after(sp, vsp);
  flist_insert(vmp, vsp);
  vmp->vm_stats.spans++;
  vmp->vm_stats.segs_free++;
  vmp->vm_stats.bytes_total += end - start;
  vmp->vm_stats.bytes_free += end - start;
  if (import) {
    vmp->vm_stats.imports++;
    vmp->vm_stats.bytes_imported += end - start;
  }
  return sp;
}

/* Takes the imported span sp, wholly covered by one free segment that is on no freelist, off
 * every list; *rel says what to give back to the source once the lock is dropped. */
static void span_remove_free(prd_vmem_t *vmp, prd_vseg_t *sp, struct vrelease *rel)
{
  prd_vseg_t *vsp = sp->vs_anext;
  PRD_ASSERT(sp->vs_import && vsp->vs_type == PRD_VS_FREE && vsp->vs_start == sp->vs_start &&
             vsp->vs_end == sp->vs_end);
  rel->vl_start = sp->vs_start;
  rel->vl_size = vseg_size(sp);
  dirty_drop(vmp, vsp);
  alist_remove(vmp, vsp);
  tag_put(vmp, vsp);
  alist_remove(vmp, sp);
  sp->vs_kprev->vs_knext = sp->vs_knext;
  sp->vs_knext->vs_kprev = sp->vs_kprev;
  tag_put(vmp, sp);
  vmp->vm_stats.segs_free--;
  vmp->vm_stats.spans--;
  vmp->vm_stats.bytes_total -= rel->vl_size;
  vmp->vm_stats.bytes_free -= rel->vl_size;
  vmp->vm_stats.bytes_imported -= rel->vl_size;
  vmp->vm_stats.releases++;
}

/* ---- allocating and freeing segments -------------------------------------------------- */

/* The arena whose quantum cache this thread is allocating from (prd_vmem_alloc, section 14):
 * an xalloc on that arena meanwhile is the cache's new slab, marked vs_qslab. */
static _Thread_local prd_vmem_t *vmem_qc_caller;

/* Carves [addr, addr+size) out of the free segment vsp (needs 2 tags); returns its tag. */
static prd_vseg_t *seg_alloc(prd_vmem_t *vmp, prd_vseg_t *vsp, uintptr_t addr, uintptr_t size,
                             bool xalloc)
{
  PRD_ASSERT(vsp->vs_type == PRD_VS_FREE && addr >= vsp->vs_start &&
             addr + size <= vsp->vs_end);
  flist_remove(vmp, vsp);
  vmp->vm_stats.segs_free--;
  dirty_drop(vmp, vsp);
  uint8_t dirty = vsp->vs_dirty;   /* the ends a split leaves keep the state (section 16) */
  uint8_t purged = vsp->vs_purged;
  if (purged)   /* pages the bound decommitted after a free, taken again (section 16) */
    vmp->vm_refault += size;
  if (addr > vsp->vs_start) {
    prd_vseg_t *head = tag_get(vmp);
    head->vs_start = vsp->vs_start;
    head->vs_end = addr;
    head->vs_type = PRD_VS_FREE;
    head->vs_dirty = dirty;
    head->vs_purged = purged;
    if (dirty != PRD_VS_CLEAN)
      dirty_add(vmp, addr - vsp->vs_start, 0);
    alist_insert_after(vsp->vs_aprev, head);
    flist_insert(vmp, head);
    vmp->vm_stats.segs_free++;
    vsp->vs_start = addr;
  }
  if (addr + size < vsp->vs_end) {
    prd_vseg_t *tail = tag_get(vmp);
    tail->vs_start = addr + size;
    tail->vs_end = vsp->vs_end;
    tail->vs_type = PRD_VS_FREE;
    tail->vs_dirty = dirty;
    tail->vs_purged = purged;
    if (dirty != PRD_VS_CLEAN)
      dirty_add(vmp, vsp->vs_end - (addr + size), 0);
    alist_insert_after(vsp, tail);
    flist_insert(vmp, tail);
    vmp->vm_stats.segs_free++;
    vsp->vs_end = addr + size;
  }
  vsp->vs_type = PRD_VS_ALLOC;
  vsp->vs_dirty = PRD_VS_CLEAN;
  vsp->vs_purged = 0;
  vsp->vs_xalloc = xalloc;
  vsp->vs_qdirect = 0;
  vsp->vs_qslab = xalloc && vmem_qc_caller == vmp;   /* section 14 */
  vmp->vm_stats.segs_alloc++;
  vmp->vm_stats.bytes_alloc += size;
  if (vmp->vm_stats.bytes_alloc > vmp->vm_alloc_peak)
    vmp->vm_alloc_peak = vmp->vm_stats.bytes_alloc;   /* section 16 */
  vmp->vm_alloc_since += size;
  vmp->vm_stats.bytes_free -= size;
  vmp->vm_stats.allocs++;
  hash_insert(vmp, vsp);
  return vsp;
}

/* Set by prd__vmem_heap_reuse around cache.c's growth reap: this thread's frees to the heap
 * arena are memory the growing caches take next, kept dirty, wholly free spans included
 * (section 16). */
static _Thread_local bool vmem_reuse_scope;

void prd__vmem_heap_reuse(bool on)
{
  vmem_reuse_scope = on;
}

/* The purge hold (section 16): while this thread's depth is above 0, a free that leaves an
 * arena above its dirty limit records the arena here instead of purging, and the release of
 * the outermost hold runs one purge of it.  Thread-local, so no ordering is needed; the
 * purge itself takes vm_lock as any other. */
static _Thread_local struct {
  unsigned depth;
  prd_vmem_t *owed;      /* the arena a held free left above its limit (the heap arena) */
  bool after_free;       /* a purge after a free by the program (not the reuse allowance's) */
} vmem_hold;

/* Who runs a purge (section 16): a free by the program, an allocation or growth reap's free
 * paying the reuse allowance, or the maintenance job that finishes what an inline purge's
 * slice left. */
enum purge_kind { PURGE_FREE = 1, PURGE_REUSE = 2, PURGE_CONTINUE = 3 };
static void vmem_purge(prd_vmem_t *vmp, enum purge_kind kind);

void prd__vmem_purge_hold(void)
{
  vmem_hold.depth++;
}

void prd__vmem_purge_release(void)
{
  if (--vmem_hold.depth > 0 || vmem_hold.owed == NULL)
    return;
  prd_vmem_t *vmp = vmem_hold.owed;
  bool after_free = vmem_hold.after_free;
  vmem_hold.owed = NULL;
  vmem_hold.after_free = false;
  vmem_purge(vmp, after_free ? PURGE_FREE : PURGE_REUSE);
}

/* Frees the allocated segment vsp (already out of the hash) and coalesces it with its free
 * neighbours.  Returns true, filling *rel, when that left an imported span wholly free (not in
 * the heap arena, which keeps it until a pass finds it decommitted: section 16): the span is
 * then already off every list and the caller gives it back after unlocking. */
static bool seg_free(prd_vmem_t *vmp, prd_vseg_t *vsp, struct vrelease *rel)
{
  uintptr_t size = vseg_size(vsp);
  vsp->vs_type = PRD_VS_FREE;
  vsp->vs_xalloc = 0;
  vsp->vs_qslab = 0;
  vmp->vm_stats.segs_alloc--;
  vmp->vm_stats.segs_free++;
  vmp->vm_stats.bytes_alloc -= size;
  vmp->vm_stats.bytes_free += size;
  vmp->vm_stats.frees++;
  prd_vseg_t *next = vsp->vs_anext;
  uint8_t purged = 0;   /* a purged neighbour's pages stay purged ones (section 16) */
  if (next->vs_type == PRD_VS_FREE) {
    purged |= next->vs_purged;
    flist_remove(vmp, next);
    dirty_drop(vmp, next);
    vsp->vs_end = next->vs_end;
    alist_remove(vmp, next);
    tag_put(vmp, next);
    vmp->vm_stats.segs_free--;
  }
  prd_vseg_t *prev = vsp->vs_aprev;
  if (prev->vs_type == PRD_VS_FREE) {
    purged |= prev->vs_purged;
    flist_remove(vmp, prev);
    dirty_drop(vmp, prev);
    vsp->vs_start = prev->vs_start;
    alist_remove(vmp, prev);
    tag_put(vmp, prev);
    vmp->vm_stats.segs_free--;
  }
  vsp->vs_dirty = PRD_VS_NEW;   /* the newest part decides (section 16) */
  vsp->vs_purged = purged;
  dirty_add(vmp, vseg_size(vsp), 0);
  prd_vseg_t *sp = vsp->vs_aprev;
  if (sp->vs_type == PRD_VS_SPAN && sp->vs_import && sp->vs_start == vsp->vs_start &&
      sp->vs_end == vsp->vs_end && !vmp->vm_decommit) {
    span_remove_free(vmp, sp, rel);
    return true;
  }
  flist_insert(vmp, vsp);
  return false;
}

/* ---- fitting (sections 4 and 5) ------------------------------------------------------- */

/* Smallest a >= x with a % align == phase (phase < align); false on overflow. */
static inline bool phase_up(uintptr_t x, uintptr_t align, uintptr_t phase, uintptr_t *out)
{
  if (x <= phase) {
    *out = phase;
    return true;
  }
  uintptr_t t = x - phase;
  if (t > UINTPTR_MAX - (align - 1))
    return false;
  *out = PRD_P2ROUNDUP(t, align) + phase;
  return *out >= x;
}

static inline bool crosses(uintptr_t a, uintptr_t size, uintptr_t nocross)
{
  return nocross != 0 && ((a ^ (a + size - 1)) & ~(nocross - 1)) != 0;
}

/* Does [start, end) hold the request?  Sets *addrp to the lowest address that does. */
static bool range_fit(uintptr_t start, uintptr_t end, const struct vreq *r, uintptr_t *addrp)
{
  if (start < r->vr_lo)
    start = r->vr_lo;
  if (end > r->vr_hi)
    end = r->vr_hi;
  if (start >= end || end - start < r->vr_size)
    return false;
  uintptr_t a;
  if (!phase_up(start, r->vr_align, r->vr_phase, &a))
    return false;
  if (crosses(a, r->vr_size, r->vr_nocross)) {
    uintptr_t b = PRD_P2ALIGN(a, r->vr_nocross);
    if (b > UINTPTR_MAX - r->vr_nocross)
      return false;
    if (!phase_up(b + r->vr_nocross, r->vr_align, r->vr_phase, &a))
      return false;
    if (crosses(a, r->vr_size, r->vr_nocross))
      return false;
  }
  if (a >= end || end - a < r->vr_size)
    return false;
  *addrp = a;
  return true;
}

static inline bool seg_fit(const prd_vseg_t *vsp, const struct vreq *r, uintptr_t *addrp)
{
  return range_fit(vsp->vs_start, vsp->vs_end, r, addrp);
}

/* First fitting segment of freelist n. */
static prd_vseg_t *list_first_fit(prd_vmem_t *vmp, int n, const struct vreq *r, uintptr_t *ap)
{
  prd_vseg_t *head = &vmp->vm_freelist[n];
  for (prd_vseg_t *vsp = head->vs_knext; vsp != head; vsp = vsp->vs_knext)
    if (seg_fit(vsp, r, ap))
      return vsp;
  return NULL;
}

static prd_vseg_t *find_instantfit(prd_vmem_t *vmp, const struct vreq *r, uintptr_t *ap)
{
  int low = vmem_highbit(r->vr_size);
  int sure = PRD_ISP2(r->vr_size) ? low : low + 1;
  /* one bit scan: the lowest non-empty list whose every member is >= size */
  uint64_t map = sure < 64 ? vmp->vm_freemap & (~(uint64_t)0 << sure) : 0;
  while (map != 0) {
    int n = __builtin_ctzll(map);
    prd_vseg_t *vsp = list_first_fit(vmp, n, r, ap);   /* unconstrained: the first member */
    if (vsp != NULL)
      return vsp;
    map &= map - 1;
  }
  if (sure != low && (vmp->vm_freemap & ((uint64_t)1 << low)))
    return list_first_fit(vmp, low, r, ap);
  return NULL;
}

static prd_vseg_t *find_bestfit(prd_vmem_t *vmp, const struct vreq *r, uintptr_t *ap)
{
  uint64_t map = vmp->vm_freemap & (~(uint64_t)0 << vmem_highbit(r->vr_size));
  while (map != 0) {
    int n = __builtin_ctzll(map);
    prd_vseg_t *head = &vmp->vm_freelist[n], *best = NULL;
    uintptr_t a;
    for (prd_vseg_t *vsp = head->vs_knext; vsp != head; vsp = vsp->vs_knext)
      if ((best == NULL || vseg_size(vsp) < vseg_size(best)) && seg_fit(vsp, r, &a)) {
        best = vsp;
        *ap = a;
      }
    if (best != NULL)
      return best;
    map &= map - 1;
  }
  return NULL;
}

/* First fitting free segment on the address list from `from` up to (not including) `to`. */
static prd_vseg_t *alist_first_fit(prd_vseg_t *from, const prd_vseg_t *to, const struct vreq *r,
                                   uintptr_t *ap)
{
  for (prd_vseg_t *vsp = from; vsp != to; vsp = vsp->vs_anext)
    if (vsp->vs_type == PRD_VS_FREE && seg_fit(vsp, r, ap))
      return vsp;
  return NULL;
}

static prd_vseg_t *find_firstfit(prd_vmem_t *vmp, const struct vreq *r, uintptr_t *ap)
{
  return alist_first_fit(vmp->vm_seg0.vs_anext, &vmp->vm_seg0, r, ap);
}

static prd_vseg_t *find_nextfit(prd_vmem_t *vmp, const struct vreq *r, uintptr_t *ap)
{
  /* first pass: at or after the rotor; second pass: from the lowest address (wrap around) */
  struct vreq after = *r;
  if (after.vr_lo < vmp->vm_rotor_addr)
    after.vr_lo = vmp->vm_rotor_addr;
  prd_vseg_t *from = vmp->vm_rotor == &vmp->vm_seg0 ? vmp->vm_seg0.vs_anext : vmp->vm_rotor;
  /* the rotor's tag may have been freed, coalesced and carved again by another policy, which
   * leaves the part below its new start in a tag before it: begin at the first tag that ends
   * after the rotor's address */
  while (from->vs_aprev != &vmp->vm_seg0 && from->vs_aprev->vs_end > vmp->vm_rotor_addr)
    from = from->vs_aprev;
  prd_vseg_t *vsp = alist_first_fit(from, &vmp->vm_seg0, &after, ap);
  if (vsp == NULL)
    vsp = alist_first_fit(vmp->vm_seg0.vs_anext, &vmp->vm_seg0, r, ap);
  return vsp;
}

static prd_vseg_t *vmem_find(prd_vmem_t *vmp, const struct vreq *r, int policy, uintptr_t *ap)
{
  switch (policy) {
  case PRD_VM_BESTFIT:  return find_bestfit(vmp, r, ap);
  case PRD_VM_FIRSTFIT: return find_firstfit(vmp, r, ap);
  case PRD_VM_NEXTFIT:  return find_nextfit(vmp, r, ap);
  default:              return find_instantfit(vmp, r, ap);
  }
}

/* Could the request fit if every span were wholly free?  (No: no free can ever help.) */
static bool vmem_could_fit(prd_vmem_t *vmp, const struct vreq *r)
{
  uintptr_t a;
  for (prd_vseg_t *sp = vmp->vm_seg0.vs_knext; sp != &vmp->vm_seg0; sp = sp->vs_knext)
    if (range_fit(sp->vs_start, sp->vs_end, r, &a))
      return true;
  return false;
}

/* ---- importing (section 7) ------------------------------------------------------------ */

/* Imports a span for the request; called and returns with vm_lock held (drops it around
 * afunc/ffunc).  Returns the new span's tag, or NULL when nothing was imported. */
static prd_vseg_t *vmem_import(prd_vmem_t *vmp, const struct vreq *r, int vmflags)
{
  uintptr_t size = r->vr_size;
  if (r->vr_align > vmp->vm_quantum) {
    if (size > UINTPTR_MAX - r->vr_align)
      return NULL;
    size += r->vr_align - vmp->vm_quantum;
  }
  uintptr_t unit = vmp->vm_quantum;
  if (vmp->vm_source != NULL)
    unit = PRD_MAX(unit, prd__vmem_quantum(vmp->vm_source));
  if (vmp->vm_import_chunk != 0)
    unit = PRD_MAX(unit, vmp->vm_import_chunk);
  if (size > UINTPTR_MAX - unit)
    return NULL;
  size = PRD_P2ROUNDUP(size, unit);
  pthread_mutex_unlock(&vmp->vm_lock);
  void *p = vmp->vm_afunc(vmp->vm_source, size, (vmflags & ~PRD_VM_POLICY_MASK) | PRD_VM_NOSLEEP);
  pthread_mutex_lock(&vmp->vm_lock);
  if (p == NULL)
    return NULL;
  uintptr_t start = (uintptr_t)p;
  const char *why = NULL;
  if (!PRD_IS_P2ALIGNED(start, vmp->vm_quantum) || start + size < start || start + size == 0)
    why = "is not aligned to the quantum or wraps around";
  else if (span_overlaps(vmp, start, start + size))
    why = "overlaps a span the arena already has";
  else if (tag_reserve(vmp, 2 + VMEM_TAGS_PER_OP) != 0)
    why = "";   /* no page for tags: give the span back, fail like a failed import */
  if (why != NULL) {
    if (why[0] != '\0')
      prd__report("vmem '%s': import of [%p, %p) from afunc %s (given back)", vmp->vm_name, p,
                  (void *)(start + size), why);
    pthread_mutex_unlock(&vmp->vm_lock);
    vmp->vm_ffunc(vmp->vm_source, p, size);
    pthread_mutex_lock(&vmp->vm_lock);
    return NULL;
  }
  return span_insert(vmp, start, start + size, true);
}

/* ---- the allocation loop -------------------------------------------------------------- */

static uint64_t vmem_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits on vm_cv until woken or until `until_ms` (CLOCK_MONOTONIC) when it is not 0. */
static void vmem_wait(prd_vmem_t *vmp, uint64_t until_ms)
{
  vmp->vm_waiters++;
  vmp->vm_stats.waits++;
  if (until_ms == 0) {
    prd__cond_wait(&vmp->vm_cv, &vmp->vm_lock);
  } else {
    struct timespec ts = { (time_t)(until_ms / 1000), (long)(until_ms % 1000) * 1000000L };
    prd__cond_timedwait(&vmp->vm_cv, &vmp->vm_lock, &ts);
  }
  vmp->vm_waiters--;
}

static size_t dirty_limit(const prd_vmem_t *vmp);
static void vmem_qcache_drain(prd_vmem_t *vmp);

static void *vmem_do_alloc(prd_vmem_t *vmp, const struct vreq *r, int vmflags, bool xalloc,
                           bool may_import)
{
  int policy = vmflags & PRD_VM_POLICY_MASK;
  uint64_t deadline = 0;
  prd_vseg_t *fresh = NULL;   /* the span this call just imported */
  bool drained = false;       /* the quantum caches were drained for this call (section 14) */
  pthread_mutex_lock(&vmp->vm_lock);
  for (;;) {
    prd_vseg_t *just = fresh;   /* valid only right after the import (no unlock since) */
    fresh = NULL;
    /* no page for tags is a memory shortage like a failed import: a bounded wait below */
    bool no_tags = tag_reserve(vmp, VMEM_TAGS_PER_OP) != 0;
    if (!no_tags) {
      uintptr_t addr;
      prd_vseg_t *vsp = vmem_find(vmp, r, policy, &addr);
      if (vsp != NULL) {
        if (r->vr_clean != NULL)   /* the segment's state, which its parts keep (§16) */
          *r->vr_clean = vsp->vs_dirty == PRD_VS_CLEAN;
        vsp = seg_alloc(vmp, vsp, addr, r->vr_size, xalloc);
        if (r->vr_qdirect) {   /* section 14: its free must come back here */
          vsp->vs_qdirect = 1;
          qdirect_add(vmp, 1);
        }
        if (policy == PRD_VM_NEXTFIT) {
          vmp->vm_rotor = vsp;
          vmp->vm_rotor_addr = addr + r->vr_size;
        }
        /* A free by another thread while the lock was dropped for the import may have made
         * the room the fit took: then the span imported for this request is still wholly
         * free, and goes back to the source as any wholly free imported span does. */
        struct vrelease rel = { 0, 0 };
        if (just != NULL && just->vs_anext->vs_type == PRD_VS_FREE &&
            just->vs_anext->vs_start == just->vs_start && just->vs_anext->vs_end == just->vs_end) {
          flist_remove(vmp, just->vs_anext);
          span_remove_free(vmp, just, &rel);
        }
        /* An allocation pays down the reuse allowance by twice its size; the dirty memory
         * above what is left of it is purged, here as after a free, and a purge that an
         * earlier call left unfinished goes on by another slice (section 16). */
        bool purge = vmp->vm_purge_more != 0;
        if (vmp->vm_reuse != 0) {
          vmp->vm_reuse -= PRD_MIN(vmp->vm_reuse, 2 * (size_t)r->vr_size);
          purge = purge || vmp->vm_dirty > dirty_limit(vmp);
        }
        pthread_mutex_unlock(&vmp->vm_lock);
        if (rel.vl_size != 0)
          vmp->vm_ffunc(vmp->vm_source, (void *)rel.vl_start, rel.vl_size);
        if (purge)
          vmem_purge(vmp, PURGE_REUSE);
        return (void *)addr;
      }
      if (just != NULL) {
        /* The span imported for this request (sized and aligned for it, and the lock not
         * dropped since) does not hold it: that cannot happen unless the sizing above is
         * wrong.  Give the span back rather than import forever. */
        struct vrelease rel;
        flist_remove(vmp, just->vs_anext);
        span_remove_free(vmp, just, &rel);
        prd__report("vmem '%s': the span [%p, %p) imported for %zu integers does not hold "
                    "them (given back)", vmp->vm_name, (void *)rel.vl_start,
                    (void *)(rel.vl_start + rel.vl_size), (size_t)r->vr_size);
        pthread_mutex_unlock(&vmp->vm_lock);
        vmp->vm_ffunc(vmp->vm_source, (void *)rel.vl_start, rel.vl_size);
        pthread_mutex_lock(&vmp->vm_lock);
        break;
      }
      if (vmp->vm_afunc != NULL && may_import && (fresh = vmem_import(vmp, r, vmflags)) != NULL)
        continue;
      /* no source to import from: what the quantum caches hold free may be the room, given
       * back once per call, with vm_lock dropped (section 14); not for a slab of one of them
       * (this thread is inside that cache's refill, whose magazines a drain would empty) */
      if (vmp->vm_afunc == NULL && !drained && vmem_qc_caller != vmp &&
          atomic_load_explicit(&vmp->vm_qcache_state, memory_order_acquire) == 1) {
        drained = true;
        pthread_mutex_unlock(&vmp->vm_lock);
        vmem_qcache_drain(vmp);
        pthread_mutex_lock(&vmp->vm_lock);
        /* look again whatever the drain gave back: with vm_lock dropped, a free may have
         * made the room, and it woke no one (this thread was not waiting yet) */
        continue;
      }
    }
    if (vmflags & PRD_VM_NOSLEEP)
      break;
    if (vmp->vm_afunc == NULL && !no_tags) {
      /* only a free (or an add) can make room: wait for it, unless nothing ever could.  A
       * free of a cached size goes into a quantum cache's magazine and wakes no one: with
       * the caches, the wait is a slice, after which they are drained again (section 14) */
      if (!vmem_could_fit(vmp, r))
        break;
      bool qc = atomic_load_explicit(&vmp->vm_qcache_state, memory_order_acquire) == 1 &&
                vmem_qc_caller != vmp;
      vmem_wait(vmp, qc ? vmem_now_ms() + VMEM_QC_DRAIN_MS : 0);
      drained = false;
      continue;
    }
    uint64_t now = vmem_now_ms();
    if (deadline == 0)
      deadline = now + (uint64_t)prd__opt(vmem_sleep_ms);
    if (now >= deadline)
      break;
    vmem_wait(vmp, PRD_MIN(deadline, now + VMEM_SLEEP_SLICE_MS));
  }
  vmp->vm_stats.failures++;
  pthread_mutex_unlock(&vmp->vm_lock);
  errno = ENOMEM;
  return NULL;
}

/* The policy bits: at most one.  Bits above them belong to the layers above and pass through. */
static bool vmem_qcache_ready(prd_vmem_t *vmp);

static bool vmflags_ok(int vmflags)
{
  int policy = vmflags & PRD_VM_POLICY_MASK;
  return PRD_ISP2(policy);
}

static void *vmem_alloc(prd_vmem_t *vmp, size_t size, int vmflags, bool *clean)
{
  if (vmp == NULL || size == 0 || (size & (vmp->vm_quantum - 1)) != 0 || !vmflags_ok(vmflags)) {
    errno = EINVAL;
    return NULL;
  }
  bool cached = size <= vmp->vm_qcache_max;
  if (cached && vmem_qcache_ready(vmp)) {
    prd_vmem_t *outer = vmem_qc_caller;   /* an import from an arena with caches of its own */
    vmem_qc_caller = vmp;
    int saved = errno;
    /* an arena without a source serves the request itself when the cache fails (below), so
     * the cache must not take PRD_NOFAIL's way out (its nofail callback, or exit) first */
    int cflags = vmflags & (vmp->vm_afunc != NULL ? PRD_NOSLEEP | PRD_NOFAIL : PRD_NOSLEEP);
    void *p = prd_cache_alloc(vmp->vm_qcache[(size >> vmp->vm_qshift) - 1],
                              cflags);   /* section 14 */
    vmem_qc_caller = outer;
    /* a cache's slab is several objects in one run: an arena without a source that has no
     * such run may still have the one segment asked for (section 14, the direct serving) */
    if (p != NULL || vmp->vm_afunc != NULL)
      return p;
    errno = saved;
  }
  struct vreq r = { size, vmp->vm_quantum, 0, 0, 0, UINTPTR_MAX, cached, clean };
  return vmem_do_alloc(vmp, &r, vmflags, false, true);
}

void *prd_vmem_alloc(prd_vmem_t *vmp, size_t size, int vmflags)
{
  return vmem_alloc(vmp, size, vmflags, NULL);
}

static void *vmem_xalloc(prd_vmem_t *vmp, size_t size, size_t align, size_t phase,
                         size_t nocross, void *minaddr, void *maxaddr, int vmflags, bool *clean)
{
  if (vmp == NULL || !vmflags_ok(vmflags))
    goto einval;
  size_t q = vmp->vm_quantum;
  if (align == 0)
    align = q;
  uintptr_t lo = (uintptr_t)minaddr, hi = maxaddr ? (uintptr_t)maxaddr : UINTPTR_MAX;
  if (size == 0 || ((size | align | phase | nocross) & (q - 1)) != 0)
    goto einval;
  if (!PRD_ISP2(align) || phase >= align || !PRD_ISP2(nocross))
    goto einval;
  /* the size and the phase's offset within a nocross unit must fit in one (written so that
   * a size near the top of the range cannot wrap the sum) */
  if (nocross != 0 && (size > nocross || (phase & (nocross - 1)) > nocross - size))
    goto einval;
  if (lo >= hi || hi - lo < size)
    goto einval;
  struct vreq r = { size, align, phase, nocross, lo, hi, false, clean };
  bool may_import = nocross == 0 && minaddr == NULL && maxaddr == NULL;
  return vmem_do_alloc(vmp, &r, vmflags, true, may_import);
einval:
  errno = EINVAL;
  return NULL;
}

void *prd_vmem_xalloc(prd_vmem_t *vmp, size_t size, size_t align, size_t phase, size_t nocross,
                      void *minaddr, void *maxaddr, int vmflags)
{
  return vmem_xalloc(vmp, size, align, phase, nocross, minaddr, maxaddr, vmflags, NULL);
}

void *prd__vmem_alloc_clean(prd_vmem_t *vmp, size_t size, size_t align, int vmflags,
                            bool *clean)
{
  *clean = false;   /* a quantum cache's object: not known */
  return align == 0 ? vmem_alloc(vmp, size, vmflags, clean)
                    : vmem_xalloc(vmp, size, align, 0, 0, NULL, NULL, vmflags, clean);
}

/* ---- freeing (section 11 for bad frees) ----------------------------------------------- */

/* The bound on vm_dirty (section 16): the larger of the option heap_dirty_min and
 * heap_dirty_pct percent of the bytes allocated (vm_lock held). */
static size_t dirty_cap(const prd_vmem_t *vmp)
{
  size_t floor = (size_t)prd__opt(heap_dirty_min);
  uint64_t pct = (uint64_t)prd__opt(heap_dirty_pct), part = vmp->vm_stats.bytes_alloc / 100;
  if (pct != 0 && part > SIZE_MAX / pct)
    return SIZE_MAX;   /* a percentage that large is no bound */
  size_t base = PRD_MAX(floor, (size_t)(part * pct));
  unsigned scale = vmp->vm_dirty_scale;
  if (scale == 1)
    return base;
  /* raised by refaults (section 16): at most the unscaled bound plus VMEM_DIRTY_SCALED_PCT
   * of the most bytes allocated since the last pass (a program that frees all it built and
   * builds it again churns its peak, not what is left at the drop) */
  size_t peak = vmp->vm_alloc_peak / 100 * VMEM_DIRTY_SCALED_PCT;
  size_t most = base > SIZE_MAX - peak ? SIZE_MAX : base + peak;
  return base > most / scale ? most : base * scale;
}

/* The dirty free bytes a free or an allocation may leave before it purges: the bound plus
 * the reuse allowance (vm_lock held). */
static size_t dirty_limit(const prd_vmem_t *vmp)
{
  size_t cap = dirty_cap(vmp);
  return cap > SIZE_MAX - vmp->vm_reuse ? SIZE_MAX : cap + vmp->vm_reuse;
}

/* Says what is wrong with freeing addr, which is not the start of an allocated segment. */
static void vmem_report_bad_addr(prd_vmem_t *vmp, uintptr_t addr, size_t size, const char *fn)
{
  for (prd_vseg_t *vsp = vmp->vm_seg0.vs_anext; vsp != &vmp->vm_seg0; vsp = vsp->vs_anext) {
    if (vsp->vs_type == PRD_VS_SPAN || addr < vsp->vs_start || addr >= vsp->vs_end)
      continue;
    if (vsp->vs_type == PRD_VS_FREE)
      prd__report("vmem '%s': %s(%p, %zu): address is free: never allocated or freed twice",
                  vmp->vm_name, fn, (void *)addr, size);
    else
      prd__report("vmem '%s': %s(%p, %zu): address is inside the allocated segment [%p, %p), "
                  "not at its start", vmp->vm_name, fn, (void *)addr, size,
                  (void *)vsp->vs_start, (void *)vsp->vs_end);
    return;
  }
  prd__report("vmem '%s': %s(%p, %zu): address is in no span of the arena: never allocated here",
              vmp->vm_name, fn, (void *)addr, size);
}

static void vmem_free_common(prd_vmem_t *vmp, void *addr, size_t size, bool xfree)
{
  const char *fn = xfree ? "prd_vmem_xfree" : "prd_vmem_free";
  if (vmp == NULL) {
    prd__error("vmem: %s(%p, %zu): NULL arena", fn, addr, size);
    return;
  }
  bool bad = false, purge = false;
  struct vrelease rel;
  bool release = false;
  pthread_mutex_lock(&vmp->vm_lock);
  prd_vseg_t **pp = hash_find(vmp, (uintptr_t)addr);
  prd_vseg_t *vsp = *pp;
  if (vsp == NULL) {
    vmem_report_bad_addr(vmp, (uintptr_t)addr, size, fn);
    bad = true;
  } else if (vseg_size(vsp) != size) {
    prd__report("vmem '%s': %s(%p, %zu): wrong size: the segment at %p has size %zu",
                vmp->vm_name, fn, addr, size, addr, (size_t)vseg_size(vsp));
    bad = true;
  } else if (vsp->vs_qslab && !xfree) {
    /* what prd_vmem_alloc handed out at addr is a quantum cache's buffer, whose slab has
     * this size by chance: freeing the slab would hand its live buffers out again */
    prd__report("vmem '%s': %s(%p, %zu): wrong size: the segment at %p is a slab of one of "
                "the arena's quantum caches, not an allocation of %zu (not freed)",
                vmp->vm_name, fn, addr, size, addr, size);
    bad = true;
  } else {
    if ((bool)vsp->vs_xalloc != xfree && size <= vmp->vm_qcache_max) {
      prd__report("vmem '%s': %s(%p, %zu): the segment came from prd_vmem_%s; sizes up to "
                  "qcache_max (%zu) must pair alloc/free and xalloc/xfree (freed anyway)",
                  vmp->vm_name, fn, addr, size, vsp->vs_xalloc ? "xalloc" : "alloc",
                  vmp->vm_qcache_max);
      bad = true;
    }
    *pp = vsp->vs_knext;
    if (vsp->vs_qdirect)   /* section 14 */
      qdirect_add(vmp, -1);
    release = seg_free(vmp, vsp, &rel);
    if (vmp->vm_decommit && vmem_reuse_scope)   /* a growth reap's free (section 16) */
      vmp->vm_reuse = PRD_MIN(vmp->vm_reuse + size, vmp->vm_dirty);
    purge = vmp->vm_decommit &&   /* section 16 */
            (vmp->vm_dirty > dirty_limit(vmp) || vmp->vm_purge_more != 0);
    if (vmp->vm_waiters > 0)
      pthread_cond_broadcast(&vmp->vm_cv);   /* pairs with vmem_wait: both under vm_lock */
  }
  if (bad)
    vmp->vm_stats.bad_frees++;
  pthread_mutex_unlock(&vmp->vm_lock);
  if (release)
    vmp->vm_ffunc(vmp->vm_source, (void *)rel.vl_start, rel.vl_size);
  if (purge && vmem_hold.depth > 0 && (vmem_hold.owed == NULL || vmem_hold.owed == vmp)) {
    vmem_hold.owed = vmp;   /* the hold's release purges once (section 16) */
    vmem_hold.after_free |= !vmem_reuse_scope;
  } else if (purge) {   /* a growth reap's frees are the reuse allowance's (section 16) */
    vmem_purge(vmp, vmem_reuse_scope ? PURGE_REUSE : PURGE_FREE);
  }
  if (bad)
    prd__report_done();
}

/* addr starts a segment the arena served itself at a cached size (section 14). */
static bool vmem_qdirect_at(prd_vmem_t *vmp, void *addr)
{
  pthread_mutex_lock(&vmp->vm_lock);
  prd_vseg_t *vsp = *hash_find(vmp, (uintptr_t)addr);
  bool direct = vsp != NULL && vsp->vs_qdirect;
  pthread_mutex_unlock(&vmp->vm_lock);
  return direct;
}

bool prd__vmem_qdirect(prd_vmem_t *vmp, const void *addr)
{
  /* relaxed: the segment's own allocation counted it and happens before the caller's use of
   * the block, so the count reads nonzero while it is allocated */
  return prd_unlikely(atomic_load_explicit(&vmp->vm_qdirect, memory_order_relaxed) != 0) &&
         vmem_qdirect_at(vmp, (void *)(uintptr_t)addr);
}

void prd_vmem_free(prd_vmem_t *vmp, void *addr, size_t size)
{
  /* a cached size goes to its cache, unless the arena served it itself before the caches
   * were made (section 14, prd__vmem_qdirect) */
  if (vmp != NULL && size != 0 && size <= vmp->vm_qcache_max &&
      (size & (vmp->vm_quantum - 1)) == 0 &&
      atomic_load_explicit(&vmp->vm_qcache_state, memory_order_acquire) == 1 &&
      !prd__vmem_qdirect(vmp, addr)) {
    prd_cache_free(vmp->vm_qcache[(size >> vmp->vm_qshift) - 1], addr);   /* section 14 */
    return;
  }
  vmem_free_common(vmp, addr, size, false);
}

void prd_vmem_xfree(prd_vmem_t *vmp, void *addr, size_t size)
{
  vmem_free_common(vmp, addr, size, true);
}

/* ---- adding spans, sizes, walks, statistics ------------------------------------------- */

void *prd_vmem_add(prd_vmem_t *vmp, void *addr, size_t size, int vmflags)
{
  (void)vmflags;   /* adding never waits: it only needs tags, which come from os.c */
  uintptr_t start = (uintptr_t)addr;
  if (vmp == NULL || addr == NULL || size == 0 || ((start | size) & (vmp->vm_quantum - 1)) != 0 ||
      size > UINTPTR_MAX - start) {
    errno = EINVAL;
    return NULL;
  }
  pthread_mutex_lock(&vmp->vm_lock);
  if (span_overlaps(vmp, start, start + size)) {
    pthread_mutex_unlock(&vmp->vm_lock);
    errno = EINVAL;
    return NULL;
  }
  if (tag_reserve(vmp, 2) != 0) {
    pthread_mutex_unlock(&vmp->vm_lock);
    errno = ENOMEM;
    return NULL;
  }
  span_insert(vmp, start, start + size, false);
  if (vmp->vm_waiters > 0)
    pthread_cond_broadcast(&vmp->vm_cv);
  pthread_mutex_unlock(&vmp->vm_lock);
#ifdef PRD_DEBUG
  PRD_ASSERT(prd__vmem_check(vmp) == 0);
#endif
  return addr;
}

size_t prd_vmem_size(prd_vmem_t *vmp, int typemask)
{
  if (vmp == NULL)
    return 0;
  size_t n = 0;
  pthread_mutex_lock(&vmp->vm_lock);
  if (typemask & PRD_VMEM_ALLOC)
    n += vmp->vm_stats.bytes_alloc;
  if (typemask & PRD_VMEM_FREE)
    n += vmp->vm_stats.bytes_free;
  pthread_mutex_unlock(&vmp->vm_lock);
  return n;
}

void prd_vmem_walk(prd_vmem_t *vmp, int typemask, void (*fn)(void *arg, void *addr, size_t size),
                   void *arg)
{
  if (vmp == NULL || fn == NULL)
    return;
  pthread_mutex_lock(&vmp->vm_lock);
  for (prd_vseg_t *vsp = vmp->vm_seg0.vs_anext; vsp != &vmp->vm_seg0; vsp = vsp->vs_anext) {
    if ((vsp->vs_type == PRD_VS_ALLOC && (typemask & PRD_VMEM_ALLOC)) ||
        (vsp->vs_type == PRD_VS_FREE && (typemask & PRD_VMEM_FREE)))
      fn(arg, (void *)vsp->vs_start, vseg_size(vsp));
  }
  pthread_mutex_unlock(&vmp->vm_lock);
}

int prd_vmem_stats(prd_vmem_t *vmp, prd_vmem_stats_t *st)
{
  if (vmp == NULL || st == NULL ||
      st->size < offsetof(prd_vmem_stats_t, version) + sizeof(st->version)) {
    errno = EINVAL;
    return -1;
  }
  prd_vmem_stats_t snap;
  pthread_mutex_lock(&vmp->vm_lock);
  snap = vmp->vm_stats;
  pthread_mutex_unlock(&vmp->vm_lock);
  size_t n = PRD_MIN(st->size, sizeof(snap));
  snap.size = st->size;
  snap.version = PRD_VMEM_STATS_VERSION;
  memcpy(st, &snap, n);
  return 0;
}

/* Writes the statistics to fd as one line: "name: field=value ..." or, with json, one JSON
 * object.  Both forms walk PRD_VMEM_STATS, so they always name the same fields. */
static void vmem_stats_write(prd_vmem_t *vmp, int fd, bool json)
{
  prd_vmem_stats_t st;
  st.size = sizeof(st);
  if (prd_vmem_stats(vmp, &st) != 0)
    return;
  char buf[1024];
  size_t n = 0;
#define VMEM_PUT(...)                                                                        \
  do {                                                                                       \
    int w_ = snprintf(buf + n, sizeof(buf) - n, __VA_ARGS__);                                \
    if (w_ > 0)                                                                              \
      n = PRD_MIN(sizeof(buf) - 1, n + (size_t)w_);                                          \
  } while (0)
  VMEM_PUT(json ? "{\"arena\":\"%s\",\"version\":%u" : "%s:", vmp->vm_name, st.version);
#define VMEM_PUT_STAT(name, doc)                                                             \
  VMEM_PUT(json ? ",\"" #name "\":%llu" : " " #name "=%llu", (unsigned long long)st.name);
  PRD_VMEM_STATS(VMEM_PUT_STAT)
#undef VMEM_PUT_STAT
  VMEM_PUT("%s\n", json ? "}" : "");
#undef VMEM_PUT
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0)
      return;
    p += w;
    n -= (size_t)w;
  }
}

void prd__vmem_stats_write(prd_vmem_t *vmp, int fd, bool json)
{
  int old = prd__cancel_off();   /* write is a cancellation point (os.c section 8) */
  vmem_stats_write(vmp, fd, json);
  prd__cancel_on(old);
}

/* ---- create and destroy --------------------------------------------------------------- */

/* The list of all arenas, for the statistics printers (section 12).  Lock order:
 * vmem_list_lock -> vm_lock; nothing holds an arena's lock while creating or destroying one. */
static pthread_mutex_t vmem_list_lock = PTHREAD_MUTEX_INITIALIZER;
static prd_vmem_t *vmem_list_head, *vmem_list_tail;
static pthread_mutex_t vmem_qcache_lock = PTHREAD_MUTEX_INITIALIZER;   /* section 14 */

static void vmem_list_insert(prd_vmem_t *vmp)
{
  pthread_mutex_lock(&vmem_list_lock);
  vmp->vm_next = NULL;
  vmp->vm_prev = vmem_list_tail;
  if (vmem_list_tail != NULL)
    vmem_list_tail->vm_next = vmp;
  else
    vmem_list_head = vmp;
  vmem_list_tail = vmp;
  pthread_mutex_unlock(&vmem_list_lock);
}

static void vmem_list_remove(prd_vmem_t *vmp)
{
  pthread_mutex_lock(&vmem_list_lock);
  if (vmp->vm_prev != NULL)
    vmp->vm_prev->vm_next = vmp->vm_next;
  else if (vmem_list_head == vmp)
    vmem_list_head = vmp->vm_next;
  if (vmp->vm_next != NULL)
    vmp->vm_next->vm_prev = vmp->vm_prev;
  else if (vmem_list_tail == vmp)
    vmem_list_tail = vmp->vm_prev;
  vmp->vm_next = vmp->vm_prev = NULL;
  pthread_mutex_unlock(&vmem_list_lock);
}

size_t prd__vmem_snapshot(prd__arena_snap_t *out, size_t max)
{
  size_t n = 0;
  pthread_mutex_lock(&vmem_list_lock);
  for (prd_vmem_t *vmp = vmem_list_head; vmp != NULL; vmp = vmp->vm_next, n++) {
    if (n >= max)
      continue;
    prd__arena_snap_t *as = &out[n];
    memcpy(as->as_name, vmp->vm_name, sizeof(as->as_name));
    memset(as->as_source, 0, sizeof(as->as_source));
    /* the source outlives its importers (they are destroyed first), and names never change */
    if (vmp->vm_source != NULL)
      memcpy(as->as_source, vmp->vm_source->vm_name, sizeof(as->as_source));
    as->as_quantum = vmp->vm_quantum;
    pthread_mutex_lock(&vmp->vm_lock);
    as->as_stats = vmp->vm_stats;
    pthread_mutex_unlock(&vmp->vm_lock);
  }
  pthread_mutex_unlock(&vmem_list_lock);
  return n;
}

/* Appends the decimal digits of v to buf at *n (no stdio inside the allocator). */
static void vmem_put_num(char *buf, size_t *n, size_t cap, size_t v)
{
  char d[24];
  int nd = 0;
  do {
    d[nd++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  while (nd > 0 && *n + 1 < cap)
    buf[(*n)++] = d[--nd];
  buf[*n] = '\0';
}

/* Makes the quantum caches of vmp at first use; true when they serve its small sizes. */
static bool vmem_qcache_ready(prd_vmem_t *vmp)
{
  int st = atomic_load_explicit(&vmp->vm_qcache_state, memory_order_acquire);
  if (prd_likely(st != 0))
    return st == 1;
  /* a failed try is retried, after VMEM_QCACHE_RETRY_NS (relaxed: a hint; the try itself is
   * under vmem_qcache_lock) */
  uint64_t now = prd__now_ns();
  if (now < atomic_load_explicit(&vmp->vm_qcache_retry_ns, memory_order_relaxed))
    return false;
  /* the heap arena first: the caches' slabs and records come from it, and its creation takes
   * heap_lock, which fork's order puts before vmem_qcache_lock (fork.c section 2) */
  if (prd_heap_arena() == NULL)
    return false;
  /* only tried: the caller may be a destructor that a reap runs under cache_reap_lock, which
   * fork's order puts after vmem_qcache_lock; a busy lock is another thread making the
   * caches, and the arena serves this call itself meanwhile */
  if (pthread_mutex_trylock(&vmem_qcache_lock) != 0)
    return false;
  st = atomic_load_explicit(&vmp->vm_qcache_state, memory_order_relaxed);
  if (st == 0) {
    int n = (int)(vmp->vm_qcache_max >> vmp->vm_qshift);
    int k;
    /* from the first not made yet: the caches a failed try made stay, unused until all are
     * (destroying them could take cache_reap_lock, which a reaping caller holds) */
    for (k = vmp->vm_nqcache; k < n; k++) {
      char name[PRD_CACHE_NAME_MAX];
      size_t len = strnlen(vmp->vm_name, PRD_CACHE_NAME_MAX - 8);
      memcpy(name, vmp->vm_name, len);
      name[len++] = '_';
      name[len++] = 'q';
      name[len++] = 'c';
      vmem_put_num(name, &len, sizeof(name), (size_t)k + 1);
      vmp->vm_qcache[k] = prd_cache_create(name, ((size_t)k + 1) << vmp->vm_qshift, 0, NULL,
                                           NULL, NULL, NULL, vmp, PRD_CACHE_NOTOUCH);
      if (vmp->vm_qcache[k] == NULL)
        break;
    }
    vmp->vm_nqcache = k;
    if (k < n) {   /* no memory: the arena serves every size itself, and tries again later */
      atomic_store_explicit(&vmp->vm_qcache_retry_ns, now + VMEM_QCACHE_RETRY_NS,
                            memory_order_relaxed);
    } else {
      st = 1;
      atomic_store_explicit(&vmp->vm_qcache_state, st, memory_order_release);
    }
  }
  pthread_mutex_unlock(&vmem_qcache_lock);
  return st == 1;
}

/* An allocation that found no room in an arena without a source (section 14): every quantum
 * cache gives back all it holds free (prd__cache_drain: the magazines of every thread, this
 * one's too, then the depot and the free slabs, which come back here), as Solaris vmem
 * reaps its quantum caches before it fails or sleeps.  Nothing when it has none; not from
 * inside a drain (a slab's return never allocates, but a caller may nest). */
static __thread bool vmem_draining;

static void vmem_qcache_drain(prd_vmem_t *vmp)
{
  if (vmem_draining || atomic_load_explicit(&vmp->vm_qcache_state, memory_order_acquire) != 1)
    return;
  vmem_draining = true;
  for (int k = 0; k < vmp->vm_nqcache; k++)
    prd__cache_drain(vmp->vm_qcache[k]);
  vmem_draining = false;
}

static prd_vmem_t *vmem_create(const char *name, void *base, size_t size, size_t quantum,
                               prd_vmem_alloc_fn *afunc, prd_vmem_free_fn *ffunc,
                               prd_vmem_t *source, size_t qcache_max, size_t import_chunk)
{
  prd__init();
  uintptr_t start = (uintptr_t)base;
  if (quantum == 0 || !PRD_ISP2(quantum) || ((start | size | qcache_max) & (quantum - 1)) != 0 ||
      (size > 0 && (start == 0 || size > UINTPTR_MAX - start)) ||
      (afunc == NULL) != (ffunc == NULL) || (source != NULL && afunc == NULL)) {
    errno = EINVAL;
    return NULL;
  }
  size_t bytes = PRD_P2ROUNDUP(sizeof(prd_vmem_t), prd__os_page_size());
  prd_vmem_t *vmp = prd__os_map(bytes);
  if (vmp == NULL)
    return NULL;
  const char *nm = name != NULL ? name : "(unnamed)";
  size_t len = strnlen(nm, PRD_VMEM_NAMELEN - 1);
  memcpy(vmp->vm_name, nm, len);
  vmp->vm_name[len] = '\0';
  pthread_mutex_init(&vmp->vm_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&vmp->vm_cv, &ca);
  pthread_condattr_destroy(&ca);
  vmp->vm_quantum = quantum;
  vmp->vm_qshift = vmem_highbit(quantum);
  vmp->vm_qcache_max = qcache_max;
  vmp->vm_import_chunk = import_chunk;
  vmp->vm_afunc = afunc;
  vmp->vm_ffunc = ffunc;
  vmp->vm_source = source;
  prd_vseg_t *s0 = &vmp->vm_seg0;
  s0->vs_anext = s0->vs_aprev = s0->vs_knext = s0->vs_kprev = s0;
  s0->vs_type = PRD_VS_SPAN;
  for (int i = 0; i < PRD_VMEM_FREELISTS; i++)
    vmp->vm_freelist[i].vs_knext = vmp->vm_freelist[i].vs_kprev = &vmp->vm_freelist[i];
  vmp->vm_rotor = s0;
  vmp->vm_hash = vmp->vm_hash0;
  vmp->vm_hash_mask = PRD_VMEM_HASH0 - 1;
  vmp->vm_hash_shift = 64 - vmem_highbit(PRD_VMEM_HASH0);
  vmp->vm_stats.size = sizeof(vmp->vm_stats);
  vmp->vm_stats.version = PRD_VMEM_STATS_VERSION;
  vmp->vm_qcache_max = PRD_MIN(qcache_max, PRD_VMEM_NQCACHE * quantum);
  vmp->vm_dirty_scale = 1;   /* section 16 */
  if (!prd__opt(magazines))   /* the arena alone (option magazines=0) */
    atomic_store_explicit(&vmp->vm_qcache_state, -1, memory_order_relaxed);
  if (size > 0) {
    if (tag_reserve(vmp, 2) != 0) {
      prd_vmem_destroy(vmp);
      errno = ENOMEM;
      return NULL;
    }
    span_insert(vmp, start, start + size, false);
  }
  vmem_list_insert(vmp);
  return vmp;
}

prd_vmem_t *prd_vmem_create(const char *name, void *base, size_t size, size_t quantum,
                            prd_vmem_alloc_fn *afunc, prd_vmem_free_fn *ffunc,
                            prd_vmem_t *source, size_t qcache_max, int vmflags)
{
  (void)vmflags;   /* creating never waits: the arena and its first tags come from os.c */
  return vmem_create(name, base, size, quantum, afunc, ffunc, source, qcache_max, 0);
}

void prd_vmem_destroy(prd_vmem_t *vmp)
{
  if (vmp == NULL)
    return;
  /* every cache made, also by a try that failed on a later one (section 14); no other
   * thread uses an arena being destroyed, so none is making them now */
  for (int k = 0; k < vmp->vm_nqcache; k++)
    prd_cache_destroy(vmp->vm_qcache[k]);   /* their slabs go back to this arena */
#ifdef PRD_DEBUG
  PRD_ASSERT(prd__vmem_check(vmp) == 0);
#endif
  vmem_list_remove(vmp);
  pthread_mutex_lock(&vmp->vm_lock);
  uint64_t leaks = vmp->vm_stats.segs_alloc;
  if (leaks > 0) {
    prd__report("vmem '%s': destroyed with %llu allocated segments (%llu integers) still in it",
                vmp->vm_name, (unsigned long long)leaks,
                (unsigned long long)vmp->vm_stats.bytes_alloc);
    uint64_t shown = 0;
    for (prd_vseg_t *vsp = vmp->vm_seg0.vs_anext; vsp != &vmp->vm_seg0; vsp = vsp->vs_anext) {
      if (vsp->vs_type != PRD_VS_ALLOC)
        continue;
      if (shown++ < VMEM_LEAKS_SHOWN)
        prd__report("vmem '%s': leaked segment [%p, %p) size %zu (from prd_vmem_%s)",
                    vmp->vm_name, (void *)vsp->vs_start, (void *)vsp->vs_end,
                    (size_t)vseg_size(vsp), vsp->vs_xalloc ? "xalloc" : "alloc");
    }
    if (shown > VMEM_LEAKS_SHOWN)
      prd__report("vmem '%s': ... and %llu more leaked segments", vmp->vm_name,
                  (unsigned long long)(shown - VMEM_LEAKS_SHOWN));
  }
  pthread_mutex_unlock(&vmp->vm_lock);
  /* imported spans go back to the source, leaked segments and all */
  for (prd_vseg_t *sp = vmp->vm_seg0.vs_knext; sp != &vmp->vm_seg0; sp = sp->vs_knext)
    if (sp->vs_import)
      vmp->vm_ffunc(vmp->vm_source, (void *)sp->vs_start, vseg_size(sp));
  size_t page = prd__os_page_size();
  prd__hash_table_unmap(vmp->vm_hash, vmp->vm_hash_mask + 1, vmp->vm_hash0);
  void *tp = vmp->vm_tag_pages;
  while (tp != NULL) {
    void *next = *(void **)tp;
    prd__os_unmap(tp, page);
    tp = next;
  }
  pthread_cond_destroy(&vmp->vm_cv);
  pthread_mutex_destroy(&vmp->vm_lock);
  prd__os_unmap(vmp, PRD_P2ROUNDUP(sizeof(prd_vmem_t), page));
  if (leaks > 0)
    prd__report_done();
}

/* ---- the heap arena (section 7) ------------------------------------------------------- */

static void *heap_import(prd_vmem_t *src, size_t size, int vmflags)
{
  (void)src;
  (void)vmflags;
  return prd__os_map_aligned(size, HEAP_CHUNK);
}

static void heap_release(prd_vmem_t *src, void *addr, size_t size)
{
  (void)src;
  prd__os_unmap(addr, size);
}

static _Atomic(prd_vmem_t *) heap_arena;
static void heap_purge_job(void *arg);
static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;

prd_vmem_t *prd_heap_arena(void)
{
  /* acquire pairs with the release store below: a thread that sees the pointer sees the
   * initialized arena.  Creation may fail (no memory); the next call tries again. */
  prd_vmem_t *vmp = atomic_load_explicit(&heap_arena, memory_order_acquire);
  if (prd_likely(vmp != NULL))
    return vmp;
  bool made = false;
  pthread_mutex_lock(&heap_lock);
  vmp = atomic_load_explicit(&heap_arena, memory_order_relaxed);
  if (vmp == NULL) {
    vmp = vmem_create("heap", NULL, 0, prd__os_page_size(), heap_import, heap_release, NULL,
                      HEAP_QCACHE_PAGES * prd__os_page_size(), HEAP_CHUNK);
    if (vmp != NULL) {
      vmp->vm_decommit = true;   /* its integers are the library's own memory (section 16) */
      atomic_store_explicit(&heap_arena, vmp, memory_order_release);
      made = true;
    }
  }
  pthread_mutex_unlock(&heap_lock);
  /* the job that finishes purges (section 16); outside heap_lock, which the fork order
   * takes after maint_lock */
  if (made)
    (void)prd__maint_register(heap_purge_job, NULL, NULL, false);
  return vmp;
}

/* ---- decay (section 16) ---------------------------------------------------------------- */
#define VMEM_DECOMMIT_RETRY_NS 1000000000ull   /* 1 s: a refused decommit's pause of purges */

/* A decommit that failed (vm_lock held): no purge for VMEM_DECOMMIT_RETRY_NS; the first
 * refusal after a success is reported, with the errno's number: strerror may allocate (an
 * unknown number, a translated message), and under vm_lock that allocation can come back to
 * this arena, whose lock this thread holds. */
static void decommit_refused(prd_vmem_t *vmp, int err)
{
  uint64_t n = ++vmp->vm_decommit_refused;
  if (prd__report_due(n))
    prd__report("vmem '%s': madvise(MADV_DONTNEED) failed (errno %d): free pages stay "
                "resident; tried again in 1 s; %" PRIu64 " refused so far (reported at the "
                "first and every %d)", vmp->vm_name, err, n, PRD_REPORT_EVERY);
  vmp->vm_decommit_retry_ns = prd__now_ns() + VMEM_DECOMMIT_RETRY_NS;
}

/* Decommits f (vm_lock held, vm_decommit set); false when the kernel refused. */
static bool decommit_seg(prd_vmem_t *vmp, prd_vseg_t *f)
{
  if (prd__os_decommit((void *)f->vs_start, vseg_size(f)) != 0) {
    decommit_refused(vmp, errno);
    return false;
  }
  vmp->vm_decommit_retry_ns = 0;
  return true;
}

/* The heap arena's wholly free imported spans whose pages are decommitted go back to the
 * source (section 16: it keeps them at the free), a batch of them per hold of vm_lock, each
 * unmapped with no lock held.  Called by a pass after its decommits, with no lock held. */
#define VMEM_RELEASE_BATCH 16
static void release_clean_spans(prd_vmem_t *vmp)
{
  for (;;) {
    struct vrelease rel[VMEM_RELEASE_BATCH];
    int n = 0;
    pthread_mutex_lock(&vmp->vm_lock);
    for (prd_vseg_t *sp = vmp->vm_seg0.vs_knext, *next; sp != &vmp->vm_seg0 &&
         n < VMEM_RELEASE_BATCH; sp = next) {
      next = sp->vs_knext;
      prd_vseg_t *f = sp->vs_anext;
      if (!sp->vs_import || f->vs_type != PRD_VS_FREE || f->vs_start != sp->vs_start ||
          f->vs_end != sp->vs_end || f->vs_dirty != PRD_VS_CLEAN)
        continue;
      flist_remove(vmp, f);
      span_remove_free(vmp, sp, &rel[n++]);
    }
    pthread_mutex_unlock(&vmp->vm_lock);
    for (int i = 0; i < n; i++)
      vmp->vm_ffunc(vmp->vm_source, (void *)rel[i].vl_start, rel[i].vl_size);
    if (n < VMEM_RELEASE_BATCH)
      return;
  }
}

/* One pass: decommits the AGED free segments (every dirty one when `all`), dropping the lock
 * after each VMEM_DECAY_BATCH bytes, then marks the NEW ones AGED in one more hold (a NEW one
 * aged before a restarted walk would be decommitted by that walk, a pass early).  Returns
 * the bytes decommitted (marked clean, in an arena without vm_decommit). */
size_t prd__vmem_decay(prd_vmem_t *vmp, bool all)
{
  size_t total = 0;
  bool more;
  do {
    size_t batch = 0;
    unsigned calls = 0;
    bool refused = false;
    more = false;
    pthread_mutex_lock(&vmp->vm_lock);
    vmp->vm_reuse = 0;   /* what a growth reap left for reuse is the pass's to age (section 16) */
    for (int n = 0; n < PRD_VMEM_FREELISTS && !more && !refused; n++) {
      prd_vseg_t *head = &vmp->vm_freelist[n];
      for (prd_vseg_t *f = head->vs_knext; f != head; f = f->vs_knext) {
        if (f->vs_dirty == PRD_VS_CLEAN || (f->vs_dirty == PRD_VS_NEW && !all))
          continue;
        if (batch >= VMEM_DECAY_BATCH || calls >= VMEM_DECOMMIT_BATCH) {
          more = true;
          break;
        }
        if (vmp->vm_decommit && !decommit_seg(vmp, f)) {
          refused = true;   /* stays dirty, as every other: the next pass tries again */
          break;
        }
        dirty_drop(vmp, f);
        f->vs_dirty = PRD_VS_CLEAN;
        f->vs_purged = 0;
        vmp->vm_stats.decommits++;
        batch += vseg_size(f);
        calls++;
      }
    }
    if (!more) {
      for (int n = 0; n < PRD_VMEM_FREELISTS; n++) {
        prd_vseg_t *head = &vmp->vm_freelist[n];
        for (prd_vseg_t *f = head->vs_knext; f != head; f = f->vs_knext) {
          if (f->vs_dirty == PRD_VS_NEW)
            f->vs_dirty = PRD_VS_AGED;
          f->vs_purged = 0;   /* a refault counts within one pass period (section 16) */
        }
      }
      /* a period without refaults whose dirty bytes stayed within half of the next lower
       * factor's bound, at their peak (a program that frees all it built is at its low
       * between its drops): the raised factor is not used any more */
      if (vmp->vm_dirty_scale > 1 && vmp->vm_refault == 0) {
        unsigned scale = vmp->vm_dirty_scale;
        vmp->vm_dirty_scale = scale / 2;
        if (vmp->vm_dirty_peak > dirty_cap(vmp) / 2)
          vmp->vm_dirty_scale = scale;
      }
      vmp->vm_dirty_peak = vmp->vm_dirty;
      vmp->vm_refault = 0;
      vmp->vm_alloc_peak = vmp->vm_stats.bytes_alloc;   /* a new period's peak */
    }
    pthread_mutex_unlock(&vmp->vm_lock);
    total += batch;
  } while (more);
  if (vmp->vm_decommit)
    release_clean_spans(vmp);
  return total;
}

/* One hold of vm_lock for vmem_purge: decommits dirty free segments, AGED ones before NEW
 * ones, from the largest freelist down and the oldest first within a list (its tail: lists
 * take dirty segments at the head), until vm_dirty is at most `target`.  True when it
 * stopped after VMEM_DECAY_BATCH bytes or VMEM_DECOMMIT_BATCH decommits with more to do.  A
 * decommitted segment moves to the tail of its list (clean ones go there), behind the walk,
 * which goes on from its old neighbour. */
static bool purge_batch(prd_vmem_t *vmp, size_t target, bool after_free)
{
  size_t batch = 0;
  unsigned calls = 0;
  for (int age = 0; age < 2; age++) {
    uint8_t want = age == 0 ? PRD_VS_AGED : PRD_VS_NEW;
    for (int n = PRD_VMEM_FREELISTS - 1; n >= 0; n--) {
      prd_vseg_t *head = &vmp->vm_freelist[n];
      for (prd_vseg_t *f = head->vs_kprev, *prev; f != head; f = prev) {
        prev = f->vs_kprev;
        if (vmp->vm_dirty <= target)
          return false;
        if (f->vs_dirty != want)
          continue;
        if (batch >= VMEM_DECAY_BATCH || calls >= VMEM_DECOMMIT_BATCH)
          return true;
        if (!decommit_seg(vmp, f))
          return false;   /* stays dirty: purges pause (section 16) */
        dirty_drop(vmp, f);
        f->vs_dirty = PRD_VS_CLEAN;
        f->vs_purged = after_free;
        vmp->vm_stats.decommits++;
        batch += vseg_size(f);
        calls++;
        flist_remove(vmp, f);
        flist_insert(vmp, f);
      }
    }
  }
  return false;
}

/* The dirty bound (section 16), run with no lock held by a free or an allocation that left
 * vm_dirty above dirty_limit or found a purge unfinished (one slice: a batch), or by the
 * maintenance job that finishes such a purge (batches until done).  It decommits down to
 * half the cap plus the reuse allowance.  A call that finds the bound already restored by
 * another thread's purge does nothing. */
static void vmem_purge(prd_vmem_t *vmp, enum purge_kind kind)
{
  pthread_mutex_lock(&vmp->vm_lock);
  uint8_t more = vmp->vm_purge_more;
  /* an unfinished purge is the job's while the maintenance thread runs (it wakes about once
   * a second); without the thread the arena's next calls go on with it, a slice each */
  if (more == 0 ? kind == PURGE_CONTINUE : kind != PURGE_CONTINUE && prd__maint_running()) {
    pthread_mutex_unlock(&vmp->vm_lock);
    return;
  }
  /* a continuation marks what it decommits as the purge that started it would */
  bool after_free = (more != 0 ? more : kind) == PURGE_FREE;
  size_t cap = dirty_cap(vmp);
  if (more == 0 && kind == PURGE_FREE) {
    /* the bound's own pages taken again since the last pass, more than the bound itself:
     * the program frees and allocates more than it allows, and each purge is faulted back
     * in; double the factor, and look again */
    unsigned scale = vmp->vm_dirty_scale;
    if (vmp->vm_refault > cap / 2 && scale < VMEM_DIRTY_SCALE_MAX) {
      vmp->vm_dirty_scale = PRD_MIN(scale * 2, (unsigned)VMEM_DIRTY_SCALE_MAX);
      cap = dirty_cap(vmp);
    } else if (scale > 1 && vmp->vm_refault == 0 && vmp->vm_alloc_since >= cap / 2 &&
               vmp->vm_dirty > dirty_limit(vmp)) {
      /* over the raised bound with nothing refaulted since the last rise or purge, though
       * the program allocated meanwhile: the churn that raised it is over (with decay off,
       * no pass would ever say so).  Not in a run of frees with no allocation between its
       * purges: a program freeing all it built passes the bound again and again */
      vmp->vm_dirty_scale = scale / 2;
      cap = dirty_cap(vmp);
    }
    vmp->vm_refault = 0;   /* counted from this purge to the next (or to a pass) */
    vmp->vm_alloc_since = 0;
  }
  if ((more != 0 || vmp->vm_dirty > dirty_limit(vmp)) &&
      (vmp->vm_decommit_retry_ns == 0 || prd__now_ns() >= vmp->vm_decommit_retry_ns)) {
    if (more == 0)
      vmp->vm_stats.purges++;
    size_t target = cap / 2 + vmp->vm_reuse;
    bool left;
    while ((left = purge_batch(vmp, target, after_free)) && kind == PURGE_CONTINUE) {
      pthread_mutex_unlock(&vmp->vm_lock);
      pthread_mutex_lock(&vmp->vm_lock);
      target = dirty_cap(vmp) / 2 + vmp->vm_reuse;
    }
    /* a slice that left work: the maintenance job or the arena's next calls go on */
    vmp->vm_purge_more = left ? (more != 0 ? more : (uint8_t)kind) : 0;
  } else if (more != 0) {
    vmp->vm_purge_more = 0;   /* decommits refused: the pause, as for any purge */
  }
  pthread_mutex_unlock(&vmp->vm_lock);
}

/* The maintenance job (section 16): finishes the heap arena's purge that inline slices left. */
static void heap_purge_job(void *arg)
{
  (void)arg;
  prd_vmem_t *vmp = atomic_load_explicit(&heap_arena, memory_order_acquire);
  if (vmp != NULL)
    vmem_purge(vmp, PURGE_CONTINUE);
}

size_t prd__vmem_dirty(prd_vmem_t *vmp)
{
  return __atomic_load_n(&vmp->vm_dirty, __ATOMIC_RELAXED);
}

size_t prd__vmem_heap_decay(bool all)
{
  prd_vmem_t *vmp = atomic_load_explicit(&heap_arena, memory_order_acquire);
  return vmp != NULL ? prd__vmem_decay(vmp, all) : 0;
}

size_t prd__vmem_heap_dirty(void)
{
  prd_vmem_t *vmp = atomic_load_explicit(&heap_arena, memory_order_acquire);
  return vmp != NULL ? prd__vmem_dirty(vmp) : 0;
}

/* ---- the invariant checker (section 9) ------------------------------------------------ */

#define VCHECK(cond, ...)                                                                    \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      prd__report("vmem '%s': invariant broken: " __VA_ARGS__);                              \
      bad++;                                                                                 \
    }                                                                                        \
  } while (0)

int prd__vmem_check(prd_vmem_t *vmp)
{
  int bad = 0;
  const char *nm = vmp->vm_name;
  pthread_mutex_lock(&vmp->vm_lock);
  prd_vseg_t *s0 = &vmp->vm_seg0;
  prd_vmem_stats_t c;
  memset(&c, 0, sizeof(c));
  uint64_t nfree = 0, nalloc = 0, nspans_listed = 0, ndirty = 0;
  bool rotor_seen = vmp->vm_rotor == s0;
  prd_vseg_t *span = NULL;
  uintptr_t cursor = 0, prev_span_end = 0;
  /* freelists and the bitmap (first, marking their members) */
  for (int n = 0; n < PRD_VMEM_FREELISTS; n++) {
    prd_vseg_t *head = &vmp->vm_freelist[n];
    bool empty = head->vs_knext == head;
    VCHECK(empty == !(vmp->vm_freemap & ((uint64_t)1 << n)), "freemap bit %d is wrong", nm, n);
    for (prd_vseg_t *f = head->vs_knext; f != head; f = f->vs_knext) {
      nfree++;
      VCHECK(f->vs_knext->vs_kprev == f, "freelist %d links are not symmetric", nm, n);
      VCHECK(f->vs_type == PRD_VS_FREE && vmem_highbit(vseg_size(f)) == n,
             "freelist %d holds [%p, %p) of type %d", nm, n, (void *)f->vs_start,
             (void *)f->vs_end, f->vs_type);
      f->vs_mark = 1;   /* "seen on a freelist": cleared by the address walk below */
    }
  }
  prd_vseg_t *prev = s0;
  for (prd_vseg_t *vsp = s0->vs_anext; vsp != s0; prev = vsp, vsp = vsp->vs_anext) {
    VCHECK(vsp->vs_aprev == prev, "%s", nm, "address list links are not symmetric");
    if (vsp == vmp->vm_rotor)
      rotor_seen = true;
    VCHECK(vsp->vs_start < vsp->vs_end, "%s [%p, %p) is empty or wraps", nm,
           vsp->vs_type == PRD_VS_SPAN ? "span" : "segment", (void *)vsp->vs_start,
           (void *)vsp->vs_end);
    VCHECK(((vsp->vs_start | vsp->vs_end) & (vmp->vm_quantum - 1)) == 0,
           "[%p, %p) not quantum-aligned", nm, (void *)vsp->vs_start, (void *)vsp->vs_end);
    if (vsp->vs_type == PRD_VS_SPAN) {
      if (span != NULL)
        VCHECK(cursor == span->vs_end, "span [%p, %p) not tiled: segments end at %p", nm,
               (void *)span->vs_start, (void *)span->vs_end, (void *)cursor);
      VCHECK(span == NULL || vsp->vs_start >= prev_span_end,
             "span [%p, %p) overlaps or is out of order", nm, (void *)vsp->vs_start,
             (void *)vsp->vs_end);
      span = vsp;
      cursor = vsp->vs_start;
      prev_span_end = vsp->vs_end;
      c.spans++;
      c.bytes_total += vseg_size(vsp);
      if (vsp->vs_import)
        c.bytes_imported += vseg_size(vsp);
      VCHECK(!vsp->vs_import || vmp->vm_decommit ||
                 !(vsp->vs_anext->vs_type == PRD_VS_FREE &&
                   vsp->vs_anext->vs_start == vsp->vs_start &&
                   vsp->vs_anext->vs_end == vsp->vs_end),
             "imported span [%p, %p) is wholly free but was not given back", nm,
             (void *)vsp->vs_start, (void *)vsp->vs_end);
      continue;
    }
    VCHECK(span != NULL, "segment [%p, %p) before any span", nm, (void *)vsp->vs_start,
           (void *)vsp->vs_end);
    VCHECK(vsp->vs_start == cursor, "segment [%p, %p) does not follow %p", nm,
           (void *)vsp->vs_start, (void *)vsp->vs_end, (void *)cursor);
    VCHECK(span == NULL || vsp->vs_end <= span->vs_end, "segment [%p, %p) outside its span", nm,
           (void *)vsp->vs_start, (void *)vsp->vs_end);
    cursor = vsp->vs_end;
    if (vsp->vs_type == PRD_VS_FREE) {
      c.segs_free++;
      c.bytes_free += vseg_size(vsp);
      VCHECK(vsp->vs_dirty <= PRD_VS_NEW, "free segment [%p, %p) has dirty state %d", nm,
             (void *)vsp->vs_start, (void *)vsp->vs_end, vsp->vs_dirty);
      if (vsp->vs_dirty != PRD_VS_CLEAN)
        ndirty += vseg_size(vsp);
      VCHECK(prev->vs_type != PRD_VS_FREE, "free segments [%p, %p) and [%p, %p) not coalesced",
             nm, (void *)prev->vs_start, (void *)prev->vs_end, (void *)vsp->vs_start,
             (void *)vsp->vs_end);
      /* on the freelist of its size class?  (the freelist pass above marked its members) */
      VCHECK(vsp->vs_mark == 1, "free segment [%p, %p) not on freelist %d", nm,
             (void *)vsp->vs_start, (void *)vsp->vs_end, vmem_highbit(vseg_size(vsp)));
      vsp->vs_mark = 0;
    } else if (vsp->vs_type == PRD_VS_ALLOC) {
      c.segs_alloc++;
      c.bytes_alloc += vseg_size(vsp);
      VCHECK(vsp->vs_dirty == PRD_VS_CLEAN, "allocated segment [%p, %p) marked dirty", nm,
             (void *)vsp->vs_start, (void *)vsp->vs_end);
      VCHECK(*hash_find(vmp, vsp->vs_start) == vsp, "allocated segment [%p, %p) not in the hash",
             nm, (void *)vsp->vs_start, (void *)vsp->vs_end);
    } else {
      VCHECK(0, "tag [%p, %p) has type %d", nm, (void *)vsp->vs_start, (void *)vsp->vs_end,
             vsp->vs_type);
    }
  }
  VCHECK(s0->vs_aprev == prev, "%s", nm, "address list tail link is wrong");
  if (span != NULL)
    VCHECK(cursor == span->vs_end, "last span [%p, %p) not tiled", nm, (void *)span->vs_start,
           (void *)span->vs_end);
  VCHECK(rotor_seen, "%s", nm, "next-fit rotor is not on the address list");
  /* the hash */
  for (size_t b = 0; b <= vmp->vm_hash_mask; b++)
    for (prd_vseg_t *h = vmp->vm_hash[b]; h != NULL; h = h->vs_knext) {
      nalloc++;
      VCHECK(h->vs_type == PRD_VS_ALLOC && hash_index(vmp, h->vs_start) == b,
             "hash bucket %zu holds [%p, %p) of type %d", nm, b, (void *)h->vs_start,
             (void *)h->vs_end, h->vs_type);
    }
  for (prd_vseg_t *sp = s0->vs_knext; sp != s0; sp = sp->vs_knext)
    nspans_listed++;
  VCHECK(nfree == c.segs_free, "freelists hold %llu segments, the address list %llu", nm,
         (unsigned long long)nfree, (unsigned long long)c.segs_free);
  VCHECK(nalloc == c.segs_alloc, "hash holds %llu segments, the address list %llu", nm,
         (unsigned long long)nalloc, (unsigned long long)c.segs_alloc);
  VCHECK(ndirty == vmp->vm_dirty, "vm_dirty is %zu, the free segments say %llu", nm,
         vmp->vm_dirty, (unsigned long long)ndirty);
  VCHECK(nspans_listed == c.spans, "span list holds %llu spans, the address list %llu", nm,
         (unsigned long long)nspans_listed, (unsigned long long)c.spans);
  /* the statistics */
  const prd_vmem_stats_t *s = &vmp->vm_stats;
#define VMEM_CHECK_STAT(f)                                                                   \
  VCHECK(s->f == c.f, "statistic " #f " is %llu, the lists say %llu", nm,                    \
         (unsigned long long)s->f, (unsigned long long)c.f)
  VMEM_CHECK_STAT(spans);
  VMEM_CHECK_STAT(segs_free);
  VMEM_CHECK_STAT(segs_alloc);
  VMEM_CHECK_STAT(bytes_total);
  VMEM_CHECK_STAT(bytes_free);
  VMEM_CHECK_STAT(bytes_alloc);
  VMEM_CHECK_STAT(bytes_imported);
#undef VMEM_CHECK_STAT
  VCHECK(s->bytes_total == s->bytes_alloc + s->bytes_free, "%s", nm,
         "bytes_total != bytes_alloc + bytes_free");
  VCHECK(s->imports - s->releases <= s->spans, "%s", nm, "more imported spans than spans");
  pthread_mutex_unlock(&vmp->vm_lock);
  return bad;
}

/* ---- fork (section 15; called by fork.c's pthread_atfork handlers) ------------------------- */
PRD__FORK_LINK();
void prd__vmem_fork_prepare_early(void)
{
  pthread_mutex_lock(&heap_lock);
  pthread_mutex_lock(&vmem_qcache_lock);
}

void prd__vmem_fork_prepare(void)
{
  pthread_mutex_lock(&vmem_list_lock);
  for (prd_vmem_t *vmp = vmem_list_head; vmp != NULL; vmp = vmp->vm_next)
    pthread_mutex_lock(&vmp->vm_lock);
}

void prd__vmem_fork_parent(void)
{
  for (prd_vmem_t *vmp = vmem_list_head; vmp != NULL; vmp = vmp->vm_next)
    pthread_mutex_unlock(&vmp->vm_lock);
  pthread_mutex_unlock(&vmem_list_lock);
  pthread_mutex_unlock(&vmem_qcache_lock);
  pthread_mutex_unlock(&heap_lock);
}

void prd__vmem_fork_child(void)
{
  for (prd_vmem_t *vmp = vmem_list_head; vmp != NULL; vmp = vmp->vm_next) {
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&vmp->vm_cv, &ca);
    pthread_condattr_destroy(&ca);
    vmp->vm_waiters = 0;
  }
  prd__vmem_fork_parent();
}
