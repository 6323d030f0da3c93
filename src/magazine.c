/*
 * magazine.c: the CPU layer (Bonwick & Adams, "Magazines and Vmem", USENIX 2001: the seed 004
 * slides and shared/VMEM.md; per-CPU caching and miss rates of McKenney & Slingwine, seed 003
 * §3.3.1-3.3.2 and §4.4; seed 002 §7.2 on why the slab layer alone does not scale).
 *
 * 1. What.  In front of each object cache's slab layer sits a per-thread cache of objects
 *    (the paper's per-CPU cache; a user process has threads, not CPUs, and a thread never
 *    migrates off its own cache).  Objects are held in magazines: arrays of M pointers
 *    ("rounds") used as stacks.  Objects in magazines stay constructed (seed 004: only reaping
 *    a magazine destructs its rounds, by handing them back to the slab layer, which runs the
 *    destructor when the slab goes).  Caches created with PRD_CACHE_NOMAGAZINE, and the slab
 *    layer's internal caches, have no CPU layer (cache_magid 0).
 *
 * 2. Data structures.
 *    - prd_tcache_t: one per thread that ever missed, on the thread registry, holding an array
 *      of prd_cpu_cache_t indexed by the cache's cache_magid (a small integer given at cache
 *      creation and recycled at destroy; index 0 is never used).  The array comes from os.c
 *      pages and grows (doubling) on demand, never from malloc: malloc.c sits on this
 *      layer.  An exited thread's record and its array wait on a spare list for the next
 *      thread (section 10).
 *    - prd_cpu_cache_t: cc_loaded (cc_rounds of cc_magsize held) and cc_previous (always full
 *      or empty: cc_prounds), as kmem's cpu cache; hit counters (the allocation hits share
 *      a word with cc_rounds, the free hits are derived: section 5); one cache line for the hit
 *      path.  Its second line holds Prudence's latent cache (defer.c section 2): two latent
 *      generations, magazines of the cache's size tagged with grace-period states, which the
 *      same handshake (section 6) protects.
 *    - prd_depot_t per cache: a list of full and a list of empty magazines under dp_lock
 *      (seed 004 "depot"), each with its working set (section 7).
 *    - prd_magtype_t: the magazine-size table of libumem (section 8); each size has its own
 *      magazine cache, an object cache with PRD_CACHE_NOMAGAZINE ("prd_mag_15" ...).  Object
 *      caches are the front end's (cache.c), above this layer, so this layer does not make
 *      them: prd__mag_cache_init answers PRD__MAG_NEED_TYPES while a row has none, and the
 *      front end asks which row (prd__mag_type_missing), makes its cache and hands it over
 *      (prd__mag_type_publish).  The first creation that wants magazines does it, retried by
 *      the next when that one finds no memory: a failure is never remembered.  The magazine
 *      caches are internal (PRD_CF_INTERNAL), as the slab layer's own caches are: the
 *      statistics leave them out with PRD_STATS_NOINTERNAL, the leak report skips them.
 *
 * 3. Allocation tiers (seed 004; prd__mag_alloc in magazine.h, prd__mag_alloc_miss here):
 *      tier 1  pop a round from cc_loaded                                   (fast path)
 *      tier 2  cc_loaded empty, cc_previous full: exchange them, pop
 *      tier 3  both empty: cc_previous goes to the depot's empty list, a full magazine comes
 *              from the depot's full list, previous = loaded, loaded = full, pop
 *      tier 4  the depot has no full magazine: the slab layer (which constructs if needed);
 *              for malloc's classes (PRD_CF_PACKED) half a magazine at once (a thread's
 *              first refill of the class: MAG_FIRST_REFILL, 8, into the depot's empty
 *              magazine if it has one), the rest pushed onto the loaded magazine (mag_refill), so that a class that only grows
 *              visits the layers below once per magazine rather than once per allocation;
 *              object caches take one object, as the paper's (their parked objects are
 *              constructed memory the caller sized).  Every tier 4 takes from the thread's
 *              current slab (slab.c section 10): the slab layer hands a thread buffers of a
 *              slab it owns, so that two threads growing one cache never get blocks of one
 *              slab, and so never share a cache line.  The CPU cache keeps the hint (cc_own,
 *              past the hit and latent lines, under tc_lock): read under tc_lock before the
 *              slab layer is called with the lock dropped, stored under it after
 *              (cc_own_set, which gives back any other slab a nested call made current: one
 *              current slab per thread and cache).  Prudence's refill (defer.c, through
 *              prd__mag_slab_take) does the same: the hint costs a lock pair per refill, and
 *              its objects are the thread's as much as tier 4's.  Object caches too: the cost
 *              is the tc_lock pair around a tier-4 visit of the slab layer, which takes
 *              cache_lock anyway, and their objects share lines between threads the same way
 *              malloc's do.  cc_empty gives the slab back (thread exit, flush, every reap of
 *              the CPU cache, destroy), so no slab stays owned by a thread that is gone or idle
 *              for a whole interval.  A reaper may give it back while the owner is inside the
 *              slab layer; the owner then stores what the slab layer answered (it owns that slab
 *              again, or a stale hint the slab layer refuses next time), so every slab the thread
 *              owns is in its cc_own when it exits
 *    Free mirrors it:
 *      tier 1  push onto cc_loaded                                           (fast path)
 *      tier 2  cc_loaded full, cc_previous empty: exchange them, push
 *      tier 3  both full: cc_previous goes to the depot's full list, an empty magazine comes
 *              from the depot's empty list or else from the magazine cache (PRD_NOSLEEP: a
 *              free never waits), previous = loaded, loaded = empty, push
 *      tier 4  no empty magazine could be had: the object goes straight to the slab layer
 *    Prudence (defer.c section 4) enters these tiers through the hooks of section 14, for a
 *    cache that has seen deferrals: before tier 2 of allocation, a safe latent generation is
 *    exchanged with the empty loaded magazine (mh_cc_merge: lines 7-11 of seed 001's
 *    Algorithm 1); tier 3 of allocation takes a safe tagged magazine of the depot (section
 *    13) before a full one, and may wait a bounded time for one rather than go to tier 4;
 *    tier 4 of allocation refills the loaded magazine with size - latent objects from the
 *    slab layer (mh_refill: line 14) instead of taking one.  Tier 3 of free also sends the
 *    full loaded magazine to the depot when the thread's latent objects would fill half a
 *    magazine (the flush sized by the latent count, 001 §4.2): they will be the next loaded
 *    magazine once safe.
 *    Why two magazines: after a depot visit the thread holds one full and one empty
 *    magazine, so at least M allocations or M frees separate two depot visits whatever the
 *    pattern (seed 004); prd-bench cache measures depot visits per operation <= 1/M for the
 *    alternating pattern at the boundary.
 *
 * 4. Debugging with magazines on.  prd_cache_free calls prd__debug_free before the object
 *    enters a magazine and prd_cache_alloc calls prd__debug_alloc after it leaves one, as
 *    libumem checks freed buffers as they enter the magazine layer: redzones are checked on
 *    free, the freed pattern stays in the buffer while it sits in a magazine and is verified
 *    on the next allocation, so writes to an object parked in a magazine are found.  Tools:
 *    in ASan builds and under valgrind prd__mag_annot is set, and an object entering a
 *    magazine is made inaccessible (leaving it, accessible again) with the helpers of
 *    annotate.h, as the slab layer does for its free buffers; reaped rounds go back through
 *    prd__slab_free, which annotates them as well.
 *
 * 5. The fast path.  A hit of prd_cache_alloc is a few tests of the front end (NULL cache,
 *    the debug flag of slab.c; a cache with Prudence deferrals stays on this path) and the CPU
 *    layer: the TLS-offset load of the thread's hit block (magazine.h prd__mag_tls: the set, a
 *    copy of its array and its bound, all %fs-relative, so the array is not reached through
 *    the set), the load and test of prd__mag_plain (set when membarrier is registered and no
 *    tool annotates: the plain hit half then tests neither), the id load, the compare with
 *    the bound and branch, the entry address (shift, add of the array), the set's load (for
 *    tc_steal), the busy store, the steal flag's compare in memory and its branch (one
 *    `cmpl $0`, magazine.h prd__mag_steal_pending), the rounds load and its test (the steal
 *    test first: section 6's enter), the magazine load, the round load (the index is the
 *    rounds, the -1 in the displacement), one add to memory that takes the round and counts
 *    the hit (PRD__MAG_RW_ADD: the rounds and the allocation hits share the word cc_rw,
 *    types.h), the busy store, the return value; no stack frame.  A hit of prd_cache_free is
 *    the same with the front end's NULL-buffer test and the round stored instead of loaded,
 *    and the free mark's test and store (below); its add gives the round back and counts
 *    nothing else: the free hits are the allocation hits plus the rounds plus a base that
 *    every other change of the rounds offsets (prd__mag_free_hits, prd__mag_rounds_set), so
 *    statistics, which are read rarely, do the sum instead of every free.
 *    No lock, no atomic read-modify-write, no fence on the path taken: the
 *    `lock orq` in the listing is the seq_cst fence of the fallback (section 6), reached only
 *    without membarrier.  The miss goes to prd__mag_alloc_miss / prd__mag_free_miss.  A hit
 *    of prd_cache_free_deferred (defer.c) reads the grace-period state inline
 *    (prd__rcu_get_state: no call, no stack frame).  docs/benchmarks.md ("Magazine layer")
 *    gives the instruction counts with the command that measures them.
 *    A free of a cache with the free mark (section 15) first tests and writes the mark's word
 *    of the buffer (a load, a compare and a branch, a store), and an allocation hit clears it (a
 *    store): a double free is found wherever the first copy is, so the push itself tests
 *    nothing.  malloc.c calls the plain tier-1 halves (prd__mag_alloc_plain /
 *    prd__mag_free_plain) itself, on a magazine id it
 *    enables only when prd__mag_plain is set (membarrier registered, no tool annotating), so
 *    that its hits test neither mode and only a miss pays its re-entry bookkeeping; its
 *    re-entry guard is the layer's hold (prd__mag_hold: the thread's bound is 0 meanwhile,
 *    so every hit path of the thread misses and the misses serve it under tc_lock).
 * 6. The handshake: taking magazines from a thread that is not running this layer.  Memory
 *    parked in a thread that stopped allocating must come back (prd_reap, cache destroy, the
 *    maintenance tick for caches idle a whole interval).  The owner runs the fast path
 *    without locks, so a reaper may touch a CPU cache only when the owner is not inside an
 *    operation on it, and the owner must not start one while the reaper works:
 *      owner (each fast-path operation)      reaper
 *        cc_busy = 1 (relaxed store)            tc_steal = 1 (seq_cst store)
 *        compiler barrier       ........ A ....  membarrier(PRIVATE_EXPEDITED)
 *        if (tc_steal) -> slow path             lock tc_lock
 *        ... pop or push ...                    if (cc_busy == 0 (acquire)) take magazines
 *        cc_busy = 0 (release store) .... B ..  unlock tc_lock; tc_steal = 0 (release)
 *    A: membarrier makes every running thread of the process execute a full barrier, so it
 *    pairs with the owner's compiler barrier as if that were a fence (the asymmetric fence of
 *    user-space RCU): either the owner's cc_busy = 1 is visible to the reaper's load after
 *    membarrier() returns (the reaper skips this cache), or the owner's load of tc_steal comes
 *    after the barrier and sees 1 (the owner takes the slow path, which locks tc_lock and so
 *    waits for the reaper).  A thread that is not running has passed a context switch, a full
 *    barrier.  B: the owner's release of cc_busy pairs with the reaper's acquire load, so a
 *    reaper that sees 0 also sees the rounds the owner last stored.  The reaper clears
 *    tc_steal with release after its changes; an owner that reads that 0 with acquire sees
 *    them.  Without membarrier (old kernels: registration fails) the owner executes a seq_cst
 *    fence instead of the compiler barrier and the reaper a seq_cst fence instead of the
 *    system call (Dekker with fences); under TSan (PRD_TSAN) both sides use seq_cst stores
 *    and loads, which TSan models (it does not model fences).  The slow path always holds
 *    tc_lock, so it never races a reaper; the owner's fast path needs no lock at all.
 *    The test comes before every load of the CPU cache: this is the rule that makes the
 *    handshake correct without any help from the memory model, and the reason it is one
 *    primitive (magazine.h prd__mag_enter / prd__mag_exit) that every lockless path into a CPU
 *    cache calls (the allocation and free hits, malloc.c's plain halves of them, the deferral
 *    hit of defer.c), never a sequence written out again.  The reaper clears tc_steal when it
 *    is done, so the flag is 0 both before a reaper starts and after it ends; an owner's 0
 *    means "no reaper between my busy store and this test" only for what the owner reads
 *    after the test.  Take a reaper that looked at cc_busy just before the owner's busy store
 *    (it saw 0 and goes on) and an owner that then loads cc_rounds (or cc_lat_n), is
 *    preempted while the reaper changes the cache and clears the flag, and tests: it reads
 *    the cleared flag while holding a value from before the changes, and it pops from a
 *    magazine the reaper took (a NULL cc_loaded, or an object handed out twice), pushes into
 *    one that is gone (a leak), or pushes a deferred object beside a generation the visitor moved to the
 *    latent slabs (the object then sits in both and is handed out twice after its grace
 *    period).  With the test first, a load that follows a 0 is ordered after the reaper's
 *    release of it (acquire), or after the busy store that the reaper will see (A): either
 *    the reaper has finished and its changes are visible, or it has not looked yet and will
 *    skip this cache.  Between enter and exit the owner may load and store as it likes; the
 *    exit's release is B.  Debug and TSan builds mark each step with PRD_RACE() (race.h), on
 *    both sides, for the tortures.
 *    The same handshake serves the latent generations of Prudence (PRUDENCE-NOTES §1): the
 *    deferral hit path (defer.c) runs it like the magazine hit path, and Prudence's visitors
 *    (pre-flush, OOM, destroy: prd__mag_visit) run the reaper's side under mag_reap_lock, so
 *    that a reaper never clears tc_steal while a visitor still works on that thread.  A
 *    reaper that empties a CPU cache with latent generations hands them to Prudence first
 *    (mh_cc_drain, section 14), under the same tc_lock and the same busy test.
 *
 * 7. Depot working set (seed 004; libumem's umem_depot_ws_update/ws_reap).  Each depot list
 *    tracks ml_min, its fewest magazines during the current interval.  At each interval
 *    ml_reaplimit = ml_min and ml_min = ml_total: the reaplimit magazines were not needed for
 *    a whole interval.  A reap destroys min(reaplimit, min) of them (all, under memory
 *    pressure), returning their rounds to the slab layer; the rest is the working set.
 *    cache.c's growth reap empties an idle depot a slice at a time instead
 *    (prd__mag_depot_reap_some: whole magazines for a budget of objects).
 *    The maintenance run also takes back the magazines of thread caches that did no
 *    operation during a whole interval (a cache busy then quiet gives its magazines back
 *    after two intervals).
 *
 * 8. Magazine size (seed 004; libumem's umem_magtype table: {magsize, align, minbuf,
 *    maxbuf}).  A cache starts with the first row whose minbuf is below its chunk size (small
 *    objects 15 rounds, 4 KiB objects 7, 64 KiB ones 1).  Every magazine is aligned to a
 *    cache line and a whole number of lines long (libumem aligns the 1-, 3- and 7-round rows
 *    to 8, 16 and 32 bytes): the free hit writes mag_round[] of the thread's loaded magazine,
 *    and magazines made one after the other for two threads would otherwise share a line,
 *    which every hit of either would then move between their cores (docs/benchmarks.md,
 *    "threads", lists what was checked for sharing between threads).  Each failed try-lock of the depot
 *    counts as contention; when an interval saw more than the option depot_contention
 *    (kmem's 3), and the chunk is below the row's maxbuf, the cache moves to the next row:
 *    new magazines are larger, so depot visits become rarer (this rule only grows them).  An interval
 *    is too slow for a burst: threads that free thousands of objects at once (a batch free
 *    after a grace period, a request's objects at its end) visit the depot every few
 *    operations, and 16 such threads on a 7-round magazine of 4 KiB objects spent nearly all
 *    their time waiting for dp_lock for the whole of a run shorter than maint_interval
 *    (docs/benchmarks.md, "On 16 cores").  So, as FreeBSD's UMA grows its bucket size when
 *    the domain lock is contended, a contended acquisition also counts towards a burst
 *    (depot_burst): MAG_BURST_N of them within MAG_BURST_NS move the cache to the next row
 *    at once, through the whole table while a magazine holds at most MAG_BURST_BYTES of
 *    objects (so 4 KiB objects go past libumem's 31 rounds to 63, and the memory a thread's
 *    three magazines of one cache hold stays under 768 KiB).  Only contention that a program
 *    keeps up at thousands of waits a second reaches it.  A magazine carries its size, so
 *    old ones stay in use; empty old ones are freed when they reach the depot (a burst
 *    growth leaves the depot's empty ones on its list: they are used once more and freed
 *    when they come back empty, since nothing is freed under dp_lock).  A layer above may
 *    start a cache further down the table (prd__mag_set_min_rounds: malloc.c's size
 *    classes, whose working sets are larger than libumem's rows assume).
 *    Prudence grows a cache by another signal (defer.c section 2: an allocation miss that
 *    must refill while latent objects still wait for their grace period), one row at a time
 *    while a magazine holds at most 512 KiB of objects (MAG_LATENT_BYTES), into five rows
 *    past libumem's (255 to 4095 rounds) that only this growth reaches: the latent limit is
 *    the magazine size, so the deferrals of one grace period fit in the latent magazines and
 *    merge back by pointer exchange instead of passing object by object through the latent
 *    slabs (docs/benchmarks.md, "Magazine layer", measures the growth and the last row).  The
 *    byte limit bounds the memory a thread's three magazines of one cache hold (1.5 MiB); a
 *    larger limit buys speed at the largest sizes for proportionally more memory.
 *    Bonwick's magazines are per CPU, so their number is bounded; these are per thread, and a
 *    program of hundreds of threads would hold hundreds of magazines of that size, each
 *    flushed to the slabs at its thread's exit.  So the limit is shared: a magazine of this
 *    growth holds at most MAG_LATENT_ALL_BYTES (16 MiB) over the number of threads on the
 *    registry (mag_latent_bytes): 512 KiB up to 32 threads, so a program of a thread per
 *    core keeps the whole growth on machines of up to 32 cores, and 64 KiB at the least,
 *    from 256 threads.  A thread that the idle-thread reap found idle a whole interval
 *    (section 9; its magazines are then taken) leaves the count until its next miss
 *    (tc_uncounted), so a pool of sleeping threads does not shrink the busy ones' magazines.
 *    The depot remembers the row the other rules reached (dp_mt_floor); when threads arrive
 *    after this growth, the next magazine made, latent miss or interval update moves the
 *    cache back down to the row the bound allows, not below that floor (depot_fit; empty
 *    magazines of the old size are given back, full ones stay in use as after a growth).
 *
 * 9. Maintenance (maint.c, the process-wide maintenance thread).  The layer's periodic work
 *    is maint.c's interval job, mag_tick, registered at the layer's start
 *    (prd__maint_set_tick): every maint_interval ms, for every cache with magazines the
 *    working-set update (section 7), the resize check (section 8) and the reap, then the
 *    idle-thread reap (section 6).  The slow paths poke maint.c with no lock held
 *    (prd__maint_poke): it starts the thread when the work needs one, or runs the work inline
 *    once an interval has passed; inline, mag_tick only tries mag_reap_lock (a slow path's
 *    caller may hold a lock that comes after it, section 12) and skips the interval when a
 *    reap holds it.  A thread's first miss counts it as an application thread (thread.c),
 *    which is what starts the maintenance thread once there are two.
 *    A process with one thread has no maintenance thread, and its inline work runs only
 *    from slow paths: one that frees a large structure and then idles would keep the
 *    freed memory in its depots for good, since nothing runs the decay (cache.c section
 *    4).  So each thread counts the bytes it parked in depots less those it took back
 *    (tc_parked, under tc_lock, in the free and allocation misses that move full
 *    magazines): when that passes MAG_PARK_WAKE_BYTES with decay on, the free miss asks
 *    for the thread (prd__maint_wake, after tc_lock is dropped, like the poke) and starts
 *    the count again.  A program whose frees and allocations balance never reaches it.
 *
 * 10. Threads.  A thread's first miss takes a prd_tcache_t and registers it; a TLS destructor
 *    (pthread key) flushes both magazines of every cache to the depot (full and empty ones as
 *    they are; the rounds of a partly filled one to the slab layer, its magazine to the empty
 *    list) and folds its counters into the depot's, so no object is lost and none leaked;
 *    prd_thread_flush does the same on demand.  Latent generations (Prudence) leave through
 *    mh_cc_drain (section 14), on this path and every other one that empties a CPU cache.
 *    After its destructor a thread's misses go straight to the slab layer.
 *    The key is made at the first registration that needs it (prd__thread_key), not in the
 *    layer's pthread_once: when the process's keys are all taken the creation fails, and a
 *    thread registered without the destructor would keep its record and its magazines' objects
 *    after it exits (and a set of an unmade key would write someone else's).  So a failure is
 *    not remembered: that thread runs without magazines (its misses go to the slab layer, as
 *    after its destructor) and tries again every MAG_NOKEY_MISSES misses, and every new
 *    thread tries at its first; the same when the thread's value cannot be set
 *    (pthread_setspecific may need memory).
 *    Records are reused, not mapped per thread: the destructor (and the fork child's
 *    take-over, section 11) takes the flushed record off the registry and puts it, with its
 *    CPU-cache array, on a spare list (mag_spares, at most MAG_SPARES_MAX; past that the
 *    array is unmapped and the record kept bare, mag_bare), and the next thread's first miss
 *    takes it from there (tc_take); only a thread that finds both lists empty takes a new
 *    record.  Records are slots of shared pages (MAG_TC_SLOT, whole lines: no two records
 *    share one), never unmapped: a page per record made each fork write one page per thread
 *    (the fork handlers take and release every tc_lock, and the child marks every orphan), a
 *    copy-on-write fault each in the parent and the child once the pages were shared
 *    (docs/benchmarks.md, "fork with many threads").  So a program whose threads start,
 *    allocate a little and exit makes no mmap or munmap per thread (each munmap of a
 *    multi-threaded process is a TLB shootdown on every core that runs it), and its records
 *    keep the array size their caches needed.
 *    Why a reused record cannot be corrupted by a visitor of its old owner: every visitor
 *    (the reapers and Prudence's visitors of section 6, statistics, fork) reaches a record
 *    only by walking the registry under mag_registry_lock and holds no pointer to it after
 *    dropping that lock, and the record leaves the registry, is zeroed and enters the spare
 *    list in one hold of that lock, taken after the exiting thread released its tc_lock; a
 *    visitor's tc_steal store is undone in the same hold of the registry lock that made it,
 *    so a spare's tc_steal is 0 (stored again to say so).  The old owner lets go of it before
 *    the flush: its TLS copies (mt_tc, mt_cc, mt_lim) point at the shared empty set, and its
 *    later misses find mag_exiting set.  The new owner takes it under the registry lock, so
 *    the zeroing and every change made before it happen before the new owner's first access
 *    (lock release and acquire).  The zeroing leaves every CPU cache as a fresh mapping
 *    reads: empty, no busy mark, no counters (the flush folded them into the depots), and
 *    no stale entry for an id whose cache was being destroyed while the thread exited (the
 *    exit's flush empties that CPU cache too, as the destroy, which walks the registry, will
 *    not find the record; the id may then be given to a new cache).  tc_lock stays
 *    initialized and unlocked across reuse.
 *
 * 11. fork.  fork.c holds the library's one pthread_atfork registration and states the whole
 *    process's lock order; this layer exports the functions it calls in that order: its
 *    locks in three steps (mag_reap_lock after maint.c's maint_lock, before the slab layer's
 *    reap and list locks; the registry and every tc_lock before the cache locks; mag_id_lock
 *    and every dp_lock after them) and their release.  In the child, prd__mag_fork_child keeps
 *    the forking thread's CPU caches usable and marks the records of the threads that did
 *    not survive the fork as orphans.  It does not flush them, nor give back their current
 *    slabs (section 3, tier 4): a flush frees their rounds into the slabs, a slab given back
 *    is a write to its header, and in a child each page written is a copy, which made the
 *    flush half of a child's page faults and CPU time before its first line, and the slabs
 *    one copy per thread (docs/benchmarks.md, "A fork child of a threaded program" and "fork
 *    with many threads"), a cost that a child that execs or exits at once never needed.  An
 *    orphan is a thread that no longer runs: its CPU caches are those of an idle thread to every
 *    visitor (the busy marks of an operation the fork cut short are cleared in the handler,
 *    or a destroy's visit would wait for them for ever), and what the cut operation had not
 *    stored is lost to the child (a push: one object leaks) or was not yet taken (a pop: the
 *    object is still in the magazine, and no thread of the child holds it).  mag_adopt_orphans
 *    gives back every slab an orphan owns (prd__slab_disown_if: one that a thread inside tier
 *    4 at the fork had made current but not yet stored in cc_own included), then flushes and
 *    unregisters the orphans as their exits would have: at the child's first maintenance
 *    pass, reap, or statistics snapshot, whichever comes first.  Until then their slabs are
 *    owned, out of every other allocation's way (a slab's owner is a record, and records are
 *    never unmapped, so the test reads live memory).  The maintenance thread is restarted
 *    lazily, when the child needs it (maint.c section 5).
 *
 * 12. Lock order:
 *        maint_lock (maint.c) -> mag_reap_lock -> cache_reap_lock -> cache_list_lock
 *          -> mag_registry_lock -> a thread's tc_lock -> cache_lock (user, then internal)
 *          -> mag_id_lock -> dp_lock -> vmem
 *    (cache_reap_lock before the thread caches: a reclaim callback run under it may allocate;
 *    cache_list_lock before the registry: the statistics snapshot reads thread caches under
 *    it.  mag_reap_lock is never waited for under the slab locks: the inline maintenance
 *    run only tries it.)
 *    dp_lock and mag_id_lock are held only for list and table operations (nothing is called
 *    under them).  The slow path holds tc_lock across a depot visit and the PRD_NOSLEEP
 *    allocation of a magazine, but calls the slab layer for tier 4 after dropping it (a
 *    PRD_SLEEP allocation may reap, and a reap takes tc_lock); under tc_lock it only gives a
 *    current slab back (prd__slab_disown: one cache_lock hold, nothing allocated).  Statistics take the registry
 *    and each tc_lock (also under cache_list_lock, from cache.c's statistics snapshot).  Prudence
 *    (defer.c section 8): its visitors take mag_reap_lock -> mag_registry_lock -> tc_lock
 *    (the pre-flush job and the OOM path only try them), its slow paths and the hooks called
 *    under tc_lock take dp_lock or cache_lock (the latent slabs), and its refill calls the
 *    slab layer with tc_lock dropped, as tier 4 does.  Under dp_lock only mh_tag_safe and
 *    mh_tag_wait run (loads, no lock).  Outside all of these: vmem's heap_lock ->
 *    vmem_qcache_lock (making quantum caches creates caches).
 *    fork.c (section 2) gives the whole process's order, which this one is part of.
 *
 * 13. Tagged magazines in the depot (after FreeBSD UMA's SMR buckets, ANCHORS.md; Prudence's
 *    use of them: defer.c sections 2 and 4).  A magazine may carry a tag, a grace-period
 *    state (mag_gp), with the count of its rounds (mag_nlat): the layer above hands a whole
 *    latent generation to its cache's depot this way (prd__mag_lat_put, tc_lock -> dp_lock),
 *    taking an empty magazine back in the same lock hold; thread exit and flush hand theirs
 *    over the same way (mh_cc_drain).  The depot keeps them on a FIFO (dp_lat_head/tail),
 *    bounded by the caller's cap in bytes of objects: past it lat_put refuses, and the
 *    caller sends the objects elsewhere.  Whether a tag is safe the layer above says
 *    (mh_tag_safe: an acquire load pairing with the release store that ends the grace
 *    period, rcu.c §4, read under dp_lock); the objects are not touched before it says so.
 *    Tier 3 of allocation looks at the first MAG_LAT_SCAN (4) tagged magazines, the list
 *    being only roughly ordered by state (several threads push), and takes the first safe one
 *    as its loaded magazine (mag_nlat rounds, possibly fewer than its size) before any full
 *    magazine: the deferred objects are reused first.  When none of them is safe and no full
 *    magazine is there, the layer above's rule (mh_tag_wait, defer.c section 4) may prefer a
 *    wait to growth: the miss then drops its locks, has the oldest one's grace period polled
 *    for a bounded time (mh_depot_wait, never waited out: defer.c section 9) and runs tiers
 *    1-3 once more; when the wait did not end it, or the rule declined, tier 4.  A reap
 *    (prd_cache_reap) gives the safe tagged magazines' objects back to the slab layer; the
 *    maintenance reap only when the interval took none back (dp_lat_idle, set by
 *    depot_update): for a busy cache the list is its circulation, and its length is what the
 *    wait rule measures, so emptying it every maint_interval would make the misses grow the
 *    cache from new slabs until it filled again (docs/benchmarks.md, "Magazine layer").  The
 *    decay pass (cache.c section 4, every decay_ms / 2) takes the list's working set as
 *    libumem's reap takes the full list's: each get counts the safe magazines it leaves behind
 *    among the first MAG_LAT_SPARE_SCAN (16), and the pass takes the fewest a get of its period
 *    left (dp_lat_spare_min; every safe one when no get came, all but 16 when every get saw 16),
 *    oldest first (depot_lat_spares): magazines that no allocation needed, such as the ones a
 *    stall of the grace periods added, which would otherwise circulate for good, while the
 *    circulation itself stays (docs/benchmarks.md, "The decay pass and the deferrals'
 *    circulation").  An allocation miss that finds no safe one counts no spare.  A reap of
 *    everything (prd_reap, destroy) and the OOM path (prd__mag_lat_out) hand the unsafe ones to
 *    the layer above (mh_tag_out), which keeps their states.  Under dp_lock
 *    only list operations and the tag tests; the slab layer and mh_tag_out are called after
 *    unlocking.
 *
 * 14. Hooks of the layer above.  Prudence keeps its latent generations in this layer's CPU
 *    caches and its tagged magazines in the depot, so it takes part in some of this layer's
 *    operations; it does so through one table of hooks (struct prd__mag_hooks, magazine.h)
 *    that defer.c registers once (prd__mag_set_hooks, at the process's first deferral to a
 *    cache with magazines, before any latent generation or tagged magazine exists), and this
 *    file calls nothing above it.  The hooks run only on slow paths, never on a hit path, and
 *    only where latent state exists (a latent generation in the CPU cache, a tagged magazine
 *    in the depot, a cache marked as having deferrals), so a process that defers nothing
 *    never calls one:
 *      mh_cc_merge    allocation miss, before tier 2: a safe latent generation is loaded
 *      mh_tag_safe    a tagged magazine's grace period is over (section 13)
 *      mh_tag_wait    tier 3 found nothing: wait for the oldest tag rather than grow?
 *      mh_depot_wait  that wait, bounded, no lock held (section 13)
 *      mh_refill      tier 4 of a cache with deferrals (section 3)
 *      mh_cc_drain    a CPU cache is emptied (cc_empty: reaps, the idle steal, thread exit,
 *                     flush, destroy, the fork child's take-over)
 *      mh_tag_out     an unsafe tagged magazine leaves the depot (section 13)
 *      mh_unlocked    no lock held, after any of the above ran under this layer's locks: the
 *                     work the layer above noted meanwhile (its grace-period requests: the
 *                     RCU layer's fork handler takes its locks before this layer's, so its
 *                     driver is never called under them; defer.c section 8)
 *    The table's pointer is stored with release and loaded with acquire.  A slow path reaches
 *    a hook through state created after the registration and published under tc_lock or
 *    dp_lock, so it sees the table; tier 4 alone starts from a relaxed load of the cache's
 *    deferral bit and tests the pointer (a thread that sees the bit first takes tier 4 from
 *    the slab layer one object at a time, which stays correct).
 *
 * 15. The free mark: a double free found wherever the first copy is (after mimalloc's
 *    double-free check, made exact).  A free buffer parked in this layer may sit in any
 *    thread's magazine, the depot or a slab; a search of them all on every free is out of
 *    the question, so the buffer says it itself.  A free (prd_cache_free, malloc.c's
 *    class_free: prd__mark_free in magazine.h) first tests the mark's word of the buffer
 *    (below: word 0, or a word past the first line): when it
 *    holds the mark, the buffer's address XOR prd__mark_secret (a per-process random word
 *    with bit 63 set, so never a user-space pointer, and not a value a program writes by
 *    accident), the buffer is free already: reported ("cache NAME: double free of buffer
 *    P") and dropped, nothing else changes.  Otherwise the free writes the mark and pushes
 *    the buffer on as before.  Every path that hands a buffer out clears the word: the
 *    allocation hit (magazine.h, also malloc.c's plain one) and prd__mag_alloc_miss, the one
 *    way out of tiers 1-3 under tc_lock, Prudence's safe latent objects and refill and the
 *    slab layer.  And the slab layer of a small-layout cache writes it into every buffer it
 *    links onto a freelist (a new slab's, page by page, and a deferred one's whose grace
 *    period ended, slab.c section 4), from the cache's cache_mark_key, so a buffer never
 *    handed out carries it too, and a free of one (a pointer to a neighbour block) is found.
 *    So the mark is there exactly while the buffer is free, whatever layer holds it, except
 *    in a large-layout buffer never handed out (the slab layer writes no buffer of that
 *    layout) and in the part of a new slab not linked yet: no scan, one load, compare and branch and one store on
 *    a free, one store on an allocation (docs/benchmarks.md, "The hit paths, counted").  It
 *    makes the free hit's compare of the buffer with the loaded magazine's top round
 *    (free(p); free(p)) redundant: only a free of a cache without the mark makes it.
 *    Where the word is (cache_mark_off, set by mark_cache_init): in a buffer of 192 bytes or
 *    more (PRD_MARK_FAR_MIN), the word at byte 128 (PRD_MARK_FAR), the first of its third
 *    line; in one of 128 to 191 bytes (PRD_MARK_NEAR_MIN), the first word of its second line
 *    (PRD_MARK_NEAR, 64); else word 0.  The first line is the one readers read: a lookup
 *    compares the key and follows the link at the head of an object.  A deferral tests the
 *    mark in a buffer that was just unlinked, whose head line a reader on another core has
 *    often just read, so that line may be in that core's cache rather than this one's, and
 *    the test's load waited for it.  Past the first line the word is written only by this
 *    layer's own clear when the buffer was handed out, and by whatever the program writes
 *    there, so the test reads a line the deferring thread holds.  Why 128 where there is
 *    room: the second line is the first one's neighbour in an aligned 128-byte pair, and
 *    an adjacent-line prefetcher (Intel's L2 spatial prefetcher) fetches the pair together,
 *    so the reader's read of the head took the second line from the deferring thread's
 *    cache as well, and the test waited for it as it did for the head; byte 128 is in
 *    another pair wherever the buffer starts (docs/benchmarks.md, "The free mark off the
 *    readers' line" and "The free mark off the readers' pair of lines").  Whole lines
 *    past the word, so that the small layout's freelist word, the chunk's last, is clear
 *    of it.  Not
 *    in malloc's classes (PRD_CF_PACKED): their hit paths (malloc.c class_free, the plain
 *    allocation hit) find the class, not the cache, and keep word 0, where a free of a
 *    block its program just used finds the line it used.
 *    Which caches (mark_cache_init; the others are PRD_CF_NOMARK and take the front end's
 *    out-of-line path, cache.c, which only calls this layer): the mark's word must be the
 *    cache's to write while the buffer is free, and its own checks must not do better.  Not: a
 *    cache with a constructor (the mark's word may be constructed state; the word the slab
 *    layer reserves past the object is its freelist word), an 8-byte chunk (word 0 is the
 *    freelist word: a mark written into a buffer whose first copy is on its slab would cut
 *    the freelist; the slab layer's freelist check finds that double free when the second
 *    copy reaches the slab, slab.c section 4; free(p); free(p) is the top-round compare's), a
 *    cache without magazines (every free reaches the slab layer at the call, whose checks are
 *    exact there), PRD_CACHE_NOTOUCH (nothing may be written) and buffer debugging (its
 *    checks see every double free, and its free buffers hold patterns or are not mapped).  For
 *    a chunk above 8 bytes the small layout's freelist word is the chunk's last word, so the
 *    mark survives the slab's freelist.
 *    Deferral (prd_cache_free_deferred, defer.c) only tests the mark: a deferred buffer's
 *    readers may still read it, nothing is written into it, so deferring a freed buffer is
 *    found (at the call, or for an open generation and on an external source when the
 *    generation closes, defer.c section 3: then not if the buffer was handed out again
 *    meanwhile), and a plain free of a buffer already
 *    deferred is not (it carries no mark until its grace period ends; the call_rcu path
 *    writes the mark then, the latent generations
 *    hand their buffers back without one, unless the cache was made with the option
 *    hardened: then every merge of a safe generation or tagged magazine marks its objects,
 *    prd__mark_merge, and a copy it finds marked already, a second deferral or a free after
 *    the deferral, is reported and dropped).  malloc.c's realloc tests it too.
 *    Memory ordering: none of its own.  The mark is a plain word of the buffer, written by
 *    the freeing thread before the buffer enters any list (its magazine push, a depot or
 *    slab put under their locks) and read by the next free of it or cleared by the thread
 *    it is handed to.  In a correct program each of those reaches the buffer only through
 *    a hand-off that orders it after the free: the same thread, a lock of the depot or the
 *    slab layer, the handshake's release and acquire for a reaper (section 6), or the
 *    program's own synchronization that passed the pointer on after the allocation that
 *    cleared it.  A double free from two threads at once is a race only in a wrong
 *    program, and may then be missed (both see no mark), never falsely reported.  The
 *    secret is written once, before any cache exists (prd__mag_cache_init's pthread_once),
 *    and read-only after.  Tools: under ASan the test reads a free buffer, which is
 *    poisoned (annotate.h): prd__mark_test alone is not instrumented, the mark is written
 *    before the buffer is poisoned and cleared after it is made accessible again
 *    (prd__mag_annot_out_mark).  Under valgrind a double free reads a word memcheck
 *    considers inaccessible, and memcheck reports that read besides this layer's report.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "annotate.h"
#include "magazine.h"

/* ---- globals ------------------------------------------------------------------------------ */
static prd_tcache_t mag_tc_none;   /* tc_ncc 0: every lookup misses */
_Thread_local prd__mag_tls_t prd__mag_tls __attribute__((tls_model("initial-exec"))) = {
  .mt_tc = &mag_tc_none,
};
/* prd__mag_membarrier, prd__mag_annot, prd__mag_plain (set by the layer's pthread_once) and
 * prd__mark_secret (section 15: set by mark_init_once, before any cache): a line of their own
 * (magazine.h) */
prd__mag_ro_t prd__mag_ro;
static pthread_once_t mark_once = PTHREAD_ONCE_INIT;
static _Thread_local bool mag_exiting;   /* the TLS destructor ran: no new CPU caches */

/* libumem's table (section 8): {rounds, alignment, start above chunk, grow below chunk}.
 * Every row is aligned to a cache line, where libumem aligns its three smallest to 8, 16 and
 * 32 bytes: a thread writes its loaded magazine on every free hit, and two threads that take
 * magazines one after the other would otherwise share a line (section 8). */
static prd_magtype_t mag_types[] = {
  { 1, 64, 3200, 65536, NULL },
  { 3, 64, 256, 32768, NULL },
  { 7, 64, 64, 16384, NULL },
  { 15, 64, 0, 8192, NULL },
  { 31, 64, 0, 4096, NULL },
  { 47, 64, 0, 2048, NULL },
  { 63, 64, 0, 1024, NULL },
  { 95, 64, 0, 512, NULL },
  { 143, 64, 0, 0, NULL },
  /* past libumem's table: reached only by Prudence's growth (section 8) */
  { 255, 64, 0, 0, NULL },
  { 511, 64, 0, 0, NULL },
  { 1023, 64, 0, 0, NULL },
  { 2047, 64, 0, 0, NULL },
  { 4095, 64, 0, 0, NULL },
};
#define MAG_NTYPES PRD_ARRAY_SIZE(mag_types)
/* rows of libumem's table: the interval rule and prd__mag_set_min_rounds stop there */
#define MAG_NUMEM 9
/* Prudence's growth (section 8): a magazine of at most MAG_LATENT_ALL_BYTES shared among the
 * threads that hold magazines, and never more than MAG_LATENT_BYTES nor held below
 * MAG_LATENT_MIN_BYTES (mag_latent_bytes) */
#define MAG_LATENT_BYTES (512 * 1024)
#define MAG_LATENT_MIN_BYTES (64 * 1024)
#define MAG_LATENT_ALL_BYTES (16 * 1024 * 1024)
/* A burst of contention (section 8): MAG_BURST_N contended acquisitions of dp_lock within
 * MAG_BURST_NS grow the cache's magazines while one holds at most MAG_BURST_BYTES of objects.
 * The two limits are variables for the tests (prd__mag_set_burst). */
#define MAG_BURST_N 32
#define MAG_BURST_NS 10000000ull   /* 10 ms: 3,200 contended visits a second */
#define MAG_BURST_BYTES (256 * 1024)
static uint32_t mag_burst_n = MAG_BURST_N;
static uint64_t mag_burst_ns = MAG_BURST_NS;
_Static_assert(PRD_MAG_MAX_ROUNDS == 4095, "PRD_MAG_MAX_ROUNDS is the last row's size");

static pthread_once_t mag_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mag_reap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mag_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mag_id_lock = PTHREAD_MUTEX_INITIALIZER;
static prd_tcache_t *mag_threads;          /* the registry */
static prd_tcache_t *mag_spares;           /* records of exited threads (section 10) */
static _Atomic bool mag_orphans;           /* the registry holds orphans (section 11) */
static uint32_t mag_nspares;               /* on mag_spares (mag_registry_lock) */
static prd_tcache_t *mag_bare;             /* records past the spares, bare (section 10) */
static char *mag_tc_next;                  /* the record page's next slot (mag_registry_lock) */
static uint32_t mag_tc_slots;              /* slots left in that page */
/* a record's slot: whole lines, so no two threads' records share one (section 10) */
#define MAG_TC_SLOT PRD_P2ROUNDUP(sizeof(prd_tcache_t), (size_t)128)
static _Atomic uint32_t mag_nthreads;      /* on the registry, less those idle (section 8) */

/* The most a magazine of Prudence's growth holds (section 8): MAG_LATENT_ALL_BYTES over the
 * counted threads, within [MAG_LATENT_MIN_BYTES, MAG_LATENT_BYTES].  The count only sizes
 * magazines, so relaxed reads and updates do: a count that a thread's arrival, exit or idle
 * reap makes stale moves the bound by one thread's share until the next growth, magazine or
 * interval reads it again (and a miss that races the idle reap leaves its thread uncounted
 * until its next miss). */
static size_t mag_latent_bytes(void)
{
  uint32_t n = atomic_load_explicit(&mag_nthreads, memory_order_relaxed);
  size_t b = MAG_LATENT_ALL_BYTES / (n != 0 ? n : 1);
  return PRD_MIN(PRD_MAX(b, (size_t)MAG_LATENT_MIN_BYTES), (size_t)MAG_LATENT_BYTES);
}
static _Atomic uint64_t mag_thread_maps;    /* records and CPU-cache arrays mapped (tests) */
/* Net bytes a thread parks in depots before it asks for the maintenance thread (section 9):
 * beyond a working set's worth of magazines (37 malloc classes x 2 x 16 KiB is 1.2 MiB), and
 * small next to what decay is for. */
#define MAG_PARK_WAKE_BYTES ((int64_t)8 << 20)
#define MAG_SPARES_MAX 64   /* a burst of up to this many threads starts with no mapping; the
                               arrays kept for it stay below 64 CPU-cache arrays */
static prd_cache_t **mag_caches;           /* by id; MAG_DYING while a destroy empties it */
static size_t mag_caches_cap;              /* entries mapped */
static uint32_t mag_nids = 1;              /* ids in use are below this; 0 is never given */
#define MAG_DYING ((prd_cache_t *)1)
/* The cache whose id is MAG_DYING (at most one: destroys hold mag_reap_lock), for an exiting
 * thread's flush (tc_flush); under mag_id_lock */
static prd_cache_t *mag_dying;

static const struct prd__mag_hooks *_Atomic mag_hooks_p;   /* section 14 */

static void mag_init_once(void);
static _Atomic bool mag_types_ready;   /* every row has its cache (section 2) */

/* ---- the hooks of the layer above (section 14) ------------------------------------------- */
void prd__mag_set_hooks(const struct prd__mag_hooks *h)
{
  atomic_store_explicit(&mag_hooks_p, h, memory_order_release);
}

/* The hooks, on a slow path that found latent generations or tagged magazines: they exist
 * only after the layer above registered (acquire: pairs with the release above; the state
 * that leads here was published later, under tc_lock or dp_lock). */
static const struct prd__mag_hooks *mag_hooks(void)
{
  return atomic_load_explicit(&mag_hooks_p, memory_order_acquire);
}

/* No lock held: the layer above's work noted under this layer's locks. */
static void mag_unlocked(void)
{
  const struct prd__mag_hooks *h = mag_hooks();
  if (h != NULL)
    h->mh_unlocked();
}

/* ---- the table of caches by id ----------------------------------------------------------- */
static prd_cache_t *mag_cache_of(uint32_t id)
{
  pthread_mutex_lock(&mag_id_lock);
  prd_cache_t *cp = id < mag_nids ? mag_caches[id] : NULL;
  pthread_mutex_unlock(&mag_id_lock);
  return cp == MAG_DYING ? NULL : cp;
}

static uint32_t mag_id_count(void)
{
  pthread_mutex_lock(&mag_id_lock);
  uint32_t n = mag_nids;
  pthread_mutex_unlock(&mag_id_lock);
  return n;
}

/* The lowest free id (0 when no memory for the table), stored in cp->cache_magid before cp is
 * published in the table, under mag_id_lock: a maintenance tick that finds cp there
 * (mag_cache_of) reads the id through the same lock. */
static uint32_t mag_id_get(prd_cache_t *cp)
{
  pthread_mutex_lock(&mag_id_lock);
  uint32_t id = 1;
  while (id < mag_nids && mag_caches[id] != NULL)
    id++;
  if (id >= mag_caches_cap) {
    size_t page = prd__os_page_size();
    size_t ncap = PRD_MAX(mag_caches_cap * 2, page / sizeof(prd_cache_t *));
    prd_cache_t **nt = prd__os_map(ncap * sizeof(prd_cache_t *));
    if (nt == NULL) {
      pthread_mutex_unlock(&mag_id_lock);
      return 0;
    }
    if (mag_caches != NULL) {
      memcpy(nt, mag_caches, mag_caches_cap * sizeof(prd_cache_t *));
      prd__os_unmap(mag_caches, mag_caches_cap * sizeof(prd_cache_t *));
    }
    mag_caches = nt;
    mag_caches_cap = ncap;
  }
  cp->cache_magid = id;
  mag_caches[id] = cp;
  if (id >= mag_nids)
    mag_nids = id + 1;
  pthread_mutex_unlock(&mag_id_lock);
  return id;
}

static void mag_id_set(uint32_t id, prd_cache_t *cp)
{
  pthread_mutex_lock(&mag_id_lock);
  if (cp == MAG_DYING)
    mag_dying = mag_caches[id];
  else if (mag_caches[id] == MAG_DYING)
    mag_dying = NULL;
  mag_caches[id] = cp;
  pthread_mutex_unlock(&mag_id_lock);
}

/* The cache of id while a destroy empties it (MAG_DYING), else NULL. */
static prd_cache_t *mag_dying_of(uint32_t id)
{
  pthread_mutex_lock(&mag_id_lock);
  prd_cache_t *cp = id < mag_nids && mag_caches[id] == MAG_DYING ? mag_dying : NULL;
  pthread_mutex_unlock(&mag_id_lock);
  return cp;
}

/* ---- magazines ------------------------------------------------------------------------- */
static const prd_magtype_t *mag_type_of(uint32_t size)
{
  for (size_t i = 0; i < MAG_NTYPES; i++)
    if (mag_types[i].mt_magsize == size)
      return &mag_types[i];
  PRD_ASSERT(!"magazine of unknown size");
  return &mag_types[0];
}

/* A row's cache (section 2): a relaxed atomic load, since another thread that saw the row
 * missing may still compare-and-swap it (and fail) while this one uses it; the ordering is
 * prd__mag_type_missing's argument. */
static prd_cache_t *mag_type_cache(const prd_magtype_t *mt)
{
  return __atomic_load_n(&mt->mt_cache, __ATOMIC_RELAXED);
}

/* A new magazine that found no memory: none is tried again for MAG_NEW_RETRY_NS.  Every
 * caller can do without (a free goes to the slab layer, a miss to the slabs), and at an
 * address-space limit each try was a refused mapping: a program that freed millions of
 * blocks there made one every few frees, ten times its time without the limit.  A pause, not
 * a remembered failure: the first try after it maps again.  Relaxed: a hint, under no lock. */
#define MAG_NEW_RETRY_NS 10000000ull   /* 10 ms */
static _Atomic uint64_t mag_new_retry_ns;

static prd_mag_t *mag_new(const prd_magtype_t *mt)
{
  uint64_t until = atomic_load_explicit(&mag_new_retry_ns, memory_order_relaxed);
  if (prd_unlikely(until != 0) && prd__now_ns() < until)
    return NULL;
  prd_mag_t *mp = prd__slab_alloc(mag_type_cache(mt), PRD_NOSLEEP);
  if (mp != NULL) {
    mp->mag_next = NULL;
    mp->mag_size = mt->mt_magsize;
  } else {
    atomic_store_explicit(&mag_new_retry_ns, prd__now_ns() + MAG_NEW_RETRY_NS,
                          memory_order_relaxed);
  }
  return mp;
}

/* Destroys a chain of magazines: their first rounds[i] rounds go back to the slab layer (which
 * keeps them constructed until their slab goes), the magazines to their cache.  No lock held
 * but possibly the owner's tc_lock. */
static void mag_destroy(prd_cache_t *cp, prd_mag_t *mp, uint32_t rounds)
{
  /* the rounds under one hold of the slab lock (a reap empties whole depots this way) */
  if (rounds != 0)
    prd__slab_free_bulk(cp, mp->mag_round, rounds);
  prd__slab_free(mag_type_cache(mag_type_of(mp->mag_size)), mp);
}

/* Fig. 8: an object-cache flush, buffers of the magazine layer back to the slab layer
 * (reaps, thread exit, a free with no empty magazine), whichever mode the cache frees in;
 * safe latent magazines that go back whole are merges (latent_merges), not flushes. */
static void mag_count_flush(prd_cache_t *cp)
{
  atomic_fetch_add_explicit(&cp->cache_slab_flushes, 1, memory_order_relaxed);
}

static void mag_destroy_chain(prd_cache_t *cp, prd_mag_t *chain, bool full)
{
  while (chain != NULL) {
    prd_mag_t *next = chain->mag_next;
    if (full && chain->mag_size != 0)
      mag_count_flush(cp);
    mag_destroy(cp, chain, full ? chain->mag_size : 0);
    chain = next;
  }
}

void prd__mag_free_empty(prd_mag_t *mp)
{
  prd__slab_free(mag_type_cache(mag_type_of(mp->mag_size)), mp);
}

uint32_t prd__mag_cur_size(prd_cache_t *cp)
{
  prd_depot_t *dp = &cp->cache_depot;
  pthread_mutex_lock(dp->dp_lock);
  uint32_t n = dp->dp_magtype->mt_magsize;
  pthread_mutex_unlock(dp->dp_lock);
  return n;
}

/* ---- the depot (dp_lock held unless said) ------------------------------------------------- */
static bool depot_fit(prd_cache_t *cp, prd_mag_t **old);
/* After a contended acquisition of dp_lock (held): the burst rule of section 8.  One clock
 * read per MAG_BURST_N contended acquisitions; the window starts at the previous read. */
static void depot_burst(prd_cache_t *cp)
{
  prd_depot_t *dp = &cp->cache_depot;
  if (++dp->dp_burst_n < mag_burst_n)
    return;
  uint64_t now = prd__now_ns();
  bool burst = now - dp->dp_burst_ns <= mag_burst_ns;
  dp->dp_burst_n = 0;
  dp->dp_burst_ns = now;
  const prd_magtype_t *mt = dp->dp_magtype;
  if (burst && mt + 1 < mag_types + MAG_NTYPES &&
      (size_t)mt[1].mt_magsize * cp->cache_chunksize <= MAG_BURST_BYTES) {
    dp->dp_magtype = dp->dp_mt_floor = mt + 1;
    dp->dp_resizes++;
  }
}

void prd__mag_set_burst(uint32_t n, uint64_t window_ns)
{
  mag_burst_n = n != 0 ? n : MAG_BURST_N;
  mag_burst_ns = n != 0 ? window_ns : MAG_BURST_NS;
}

static void depot_lock(prd_cache_t *cp)
{
  prd_depot_t *dp = &cp->cache_depot;
  if (pthread_mutex_trylock(dp->dp_lock) != 0) {
    /* counted before blocking, so a test can see that a thread is about to wait */
    atomic_fetch_add_explicit(&dp->dp_contention, 1, memory_order_relaxed);
    pthread_mutex_lock(dp->dp_lock);
    depot_burst(cp);
  }
}

/* Unlinks the first magazine of a list (NULL if empty), keeping its working set. */
static prd_mag_t *maglist_unlink(prd_maglist_t *ml)
{
  prd_mag_t *mp = ml->ml_list;
  if (mp != NULL) {
    ml->ml_list = mp->mag_next;
    ml->ml_total--;
    if (ml->ml_total < ml->ml_min)
      ml->ml_min = ml->ml_total;
  }
  return mp;
}

/* A thread takes a magazine from the depot (counted: depot_*_gets). */
static prd_mag_t *maglist_get(prd_maglist_t *ml)
{
  prd_mag_t *mp = maglist_unlink(ml);
  if (mp != NULL)
    ml->ml_gets++;
  return mp;
}

static void maglist_put(prd_maglist_t *ml, prd_mag_t *mp)
{
  mp->mag_next = ml->ml_list;
  ml->ml_list = mp;
  ml->ml_total++;
  ml->ml_puts++;
}

/* Gives an empty magazine to the depot; one of an outgrown size is returned for freeing. */
static prd_mag_t *depot_put_empty(prd_depot_t *dp, prd_mag_t *mp)
{
  if (mp->mag_size != dp->dp_magtype->mt_magsize)
    return mp;
  maglist_put(&dp->dp_empty, mp);
  return NULL;
}

static void depot_put_full(prd_depot_t *dp, prd_mag_t *mp)
{
  maglist_put(&dp->dp_full, mp);
  dp->dp_rounds += mp->mag_size;
}

/* The depot's empty magazine first (tc_lock -> dp_lock, section 12), else a new one: threads
 * that start, take a magazine and exit one after the other reuse the ones their
 * predecessors' exits left on the empty list, which would otherwise grow by one per thread.
 * The empty list holds magazines of the current size only (depot_put_empty, depot_set_size). */
prd_mag_t *prd__mag_new(prd_cache_t *cp)
{
  prd_depot_t *dp = &cp->cache_depot;
  prd_mag_t *old = NULL;
  depot_lock(cp);
  if (dp->dp_magtype != dp->dp_mt_floor)   /* grown: threads may have arrived since */
    (void)depot_fit(cp, &old);
  prd_mag_t *mp = maglist_get(&dp->dp_empty);
  const prd_magtype_t *mt = dp->dp_magtype;
  pthread_mutex_unlock(dp->dp_lock);
  mag_destroy_chain(cp, old, false);
  return mp != NULL ? mp : mag_new(mt);
}

/* Takes n magazines off a list onto *chain. */
static void maglist_take(prd_maglist_t *ml, uint64_t n, prd_mag_t **chain, uint64_t *rounds)
{
  for (; n > 0; n--) {
    prd_mag_t *mp = maglist_unlink(ml);   /* reaped, not taken by a thread */
    if (mp == NULL)
      break;
    if (rounds != NULL)
      *rounds -= mp->mag_size;
    mp->mag_next = *chain;
    *chain = mp;
  }
}

/* ---- Prudence's latent magazines in the depot (section 13; dp_lock held unless said) ---- */
#define MAG_LAT_SPARE_SCAN 16   /* tagged magazines a get counts as spares behind it (section 13) */
#define MAG_LAT_SCAN 4   /* latent magazines an allocation miss looks at: states of several
                            threads interleave on the list, so the oldest may not be first */

bool prd__mag_lat_put(prd_cache_t *cp, prd_mag_t *mp, uint32_t n, prd_gp_t gp,
                      uint64_t cap, prd_mag_t **empty)
{
  prd_depot_t *dp = &cp->cache_depot;
  if (empty != NULL)
    *empty = NULL;
  if (cp->cache_magid == 0)
    return false;
  depot_lock(cp);
  if ((dp->dp_lat_rounds + n) * cp->cache_chunksize > cap) {
    pthread_mutex_unlock(dp->dp_lock);
    return false;
  }
  mp->mag_nlat = n;
  mp->mag_gp = gp;
  mp->mag_next = NULL;
  if (dp->dp_lat_tail != NULL)
    dp->dp_lat_tail->mag_next = mp;
  else
    dp->dp_lat_head = mp;
  dp->dp_lat_tail = mp;
  dp->dp_lat_mags++;
  dp->dp_lat_rounds += n;
  dp->dp_lat_puts++;
  if (empty != NULL)   /* of the current size, or of the one before a burst (section 8) */
    *empty = maglist_get(&dp->dp_empty);
  pthread_mutex_unlock(dp->dp_lock);
  return true;
}

/* Unlinks mp, which follows prev (NULL: the head), from the latent list. */
static void depot_lat_unlink(prd_depot_t *dp, prd_mag_t *prev, prd_mag_t *mp)
{
  if (prev != NULL)
    prev->mag_next = mp->mag_next;
  else
    dp->dp_lat_head = mp->mag_next;
  if (dp->dp_lat_tail == mp)
    dp->dp_lat_tail = prev;
  dp->dp_lat_mags--;
  dp->dp_lat_rounds -= mp->mag_nlat;
  mp->mag_next = NULL;
}

/* The safe ones among the first `scan` tagged magazines of the list. */
static uint64_t depot_lat_nsafe(const prd_depot_t *dp, uint64_t scan)
{
  uint64_t safe = 0, seen = 0;
  for (prd_mag_t *mp = dp->dp_lat_head; mp != NULL && seen < scan; mp = mp->mag_next, seen++)
    safe += mag_hooks()->mh_tag_safe(mp->mag_gp);
  return safe;
}

/* An allocation miss takes a safe latent magazine (its grace period over: mh_tag_safe is an
 * acquire load that pairs with the release ending the grace period, rcu.c §4), or NULL; the
 * safe ones it leaves behind are the pass's spares as far as it has seen (none when it finds
 * none to take, the list empty included). */
static prd_mag_t *depot_lat_get(prd_depot_t *dp)
{
  prd_mag_t *prev = NULL, *mp = dp->dp_lat_head;
  for (int i = 0; i < MAG_LAT_SCAN && mp != NULL; i++, prev = mp, mp = mp->mag_next)
    if (mag_hooks()->mh_tag_safe(mp->mag_gp)) {
      depot_lat_unlink(dp, prev, mp);
      dp->dp_lat_gets++;
      uint32_t spares = (uint32_t)depot_lat_nsafe(dp, MAG_LAT_SPARE_SCAN);
      dp->dp_lat_spare_min = PRD_MIN(dp->dp_lat_spare_min, spares);
      return mp;
    }
  dp->dp_lat_spare_min = 0;
  return NULL;
}

/* Unlinks the safe latent magazines (every one when `all`), oldest first and at most `max`,
 * onto a chain for lat_chain_out. */
static prd_mag_t *depot_lat_take(prd_depot_t *dp, bool all, uint64_t max)
{
  prd_mag_t *chain = NULL, *prev = NULL, *mp = dp->dp_lat_head;
  for (uint64_t n = 0; mp != NULL && n < max;) {
    prd_mag_t *next = mp->mag_next;
    if (all || mag_hooks()->mh_tag_safe(mp->mag_gp)) {
      depot_lat_unlink(dp, prev, mp);
      mp->mag_next = chain;
      chain = mp;
      n++;
    } else {
      prev = mp;
    }
    mp = next;
  }
  return chain;
}

/* No lock held: a safe latent magazine's objects go back to the slab layer, an unsafe one
 * goes to the layer above (mh_tag_out: the latent slabs with its state), which notes work for
 * mh_unlocked, run by the caller once it holds no lock. */
static void lat_chain_out(prd_cache_t *cp, prd_mag_t *chain)
{
  uint64_t merged = 0;
  while (chain != NULL) {
    prd_mag_t *next = chain->mag_next;
    if (mag_hooks()->mh_tag_safe(chain->mag_gp)) {
      /* deferred objects back after their grace period: free now, so they get the free
       * mark first as at every merge (section 15; a copy found marked is dropped) */
      uint32_t n = prd__mark_merge(cp, chain->mag_round, chain->mag_nlat);
      merged += n;
      mag_destroy(cp, chain, n);
    } else {
      mag_hooks()->mh_tag_out(cp, chain);
    }
    chain = next;
  }
  if (merged != 0) {   /* counted with the depot's Prudence counters (latent_merges) */
    prd_depot_t *dp = &cp->cache_depot;
    pthread_mutex_lock(dp->dp_lock);
    dp->dp_dead_pcnt[PRD_PC_MERGES] += merged;
    pthread_mutex_unlock(dp->dp_lock);
  }
}

void prd__mag_lat_out(prd_cache_t *cp)
{
  if (cp->cache_magid == 0)
    return;
  prd_depot_t *dp = &cp->cache_depot;
  pthread_mutex_lock(dp->dp_lock);
  prd_mag_t *chain = depot_lat_take(dp, true, UINT64_MAX);
  pthread_mutex_unlock(dp->dp_lock);
  lat_chain_out(cp, chain);
}

/* The decay pass's share of the safe tagged magazines (section 13): the spares of its period,
 * the fewest a get left behind; every safe one when no get came; when every get saw a whole
 * window of spares (MAG_LAT_SPARE_SCAN: it counts no further), all but a window's worth, at
 * least the window. */
static uint64_t depot_lat_spares(prd_depot_t *dp)
{
  uint32_t spare = dp->dp_lat_spare_min;
  if (spare == UINT32_MAX)
    return UINT64_MAX;
  if (spare < MAG_LAT_SPARE_SCAN)
    return spare;
  uint64_t safe = depot_lat_nsafe(dp, UINT64_MAX);
  uint64_t window = MAG_LAT_SPARE_SCAN;
  return PRD_MAX(safe - PRD_MIN(safe, window), window);
}

/* What a reap takes of the depot's tagged magazines that are safe (section 13): all of them
 * (prd_cache_reap), all of them when the interval took none back (the maintenance reap), the
 * spares of the pass (the decay pass). */
enum lat_reap { LAT_SAFE, LAT_IDLE, LAT_SPARE };

/* Reaps the depot of cp (no lock held): the magazines outside the working set, or every one
 * when `all` (section 7); Prudence's latent magazines as `lat_rule` says, or every one when
 * `all` (the unsafe ones to the latent slabs, section 13). */
static void depot_reap(prd_cache_t *cp, bool all, enum lat_reap lat_rule)
{
  if (cp->cache_magid == 0)
    return;
  prd_depot_t *dp = &cp->cache_depot;
  prd_mag_t *full = NULL, *empty = NULL;
  pthread_mutex_lock(dp->dp_lock);
  prd_maglist_t *lists[2] = { &dp->dp_full, &dp->dp_empty };
  prd_mag_t **chains[2] = { &full, &empty };
  for (int i = 0; i < 2; i++) {
    prd_maglist_t *ml = lists[i];
    uint64_t n = all ? ml->ml_total : PRD_MIN(ml->ml_reaplimit, ml->ml_min);
    ml->ml_reaplimit -= PRD_MIN(n, ml->ml_reaplimit);
    maglist_take(ml, n, chains[i], i == 0 ? &dp->dp_rounds : NULL);
  }
  uint64_t nlat = UINT64_MAX;   /* every safe one (every one when `all`) */
  if (!all && lat_rule == LAT_IDLE && !dp->dp_lat_idle)
    nlat = 0;
  if (lat_rule == LAT_SPARE) {
    if (!all)
      nlat = depot_lat_spares(dp);
    dp->dp_lat_spare_min = UINT32_MAX;   /* the next pass counts afresh */
  }
  prd_mag_t *lat = nlat != 0 ? depot_lat_take(dp, all, nlat) : NULL;
  pthread_mutex_unlock(dp->dp_lock);
  mag_destroy_chain(cp, full, true);
  mag_destroy_chain(cp, empty, false);
  lat_chain_out(cp, lat);
}

void prd__mag_depot_reap(prd_cache_t *cp, bool all)
{
  depot_reap(cp, all, LAT_SAFE);
}

void prd__mag_depot_decay(prd_cache_t *cp, bool all)
{
  depot_reap(cp, all, LAT_SPARE);
}

bool prd__mag_depot_reap_some(prd_cache_t *cp, size_t *budget)
{
  if (cp->cache_magid == 0)
    return false;
  prd_depot_t *dp = &cp->cache_depot;
  prd_mag_t *full = NULL, *empty = NULL, *lat = NULL;
  size_t taken = 0;
  uint64_t nfull = 0;
  pthread_mutex_lock(dp->dp_lock);
  /* whole magazines while the budget lasts, the first one whatever its size: full ones,
   * then the tagged ones (oldest first), then the empty ones, which hold no object */
  while (dp->dp_full.ml_list != NULL && (taken == 0 || taken < *budget)) {
    taken += dp->dp_full.ml_list->mag_size;
    maglist_take(&dp->dp_full, 1, &full, &dp->dp_rounds);
    nfull++;
  }
  dp->dp_full.ml_reaplimit -= PRD_MIN(nfull, dp->dp_full.ml_reaplimit);
  while (dp->dp_full.ml_list == NULL && dp->dp_lat_head != NULL &&
         (taken == 0 || taken < *budget)) {
    prd_mag_t *mp = dp->dp_lat_head;
    taken += mp->mag_nlat;
    depot_lat_unlink(dp, NULL, mp);
    mp->mag_next = lat;
    lat = mp;
  }
  if (dp->dp_full.ml_list == NULL && dp->dp_lat_head == NULL) {
    maglist_take(&dp->dp_empty, dp->dp_empty.ml_total, &empty, NULL);
    dp->dp_empty.ml_reaplimit = 0;
  }
  bool more = dp->dp_full.ml_list != NULL || dp->dp_lat_head != NULL;
  pthread_mutex_unlock(dp->dp_lock);
  mag_destroy_chain(cp, full, true);
  mag_destroy_chain(cp, empty, false);
  lat_chain_out(cp, lat);
  *budget -= PRD_MIN(taken, *budget);
  return more;
}

/* The depot's activity: full gets and puts, or with `allocs` the allocation misses that
 * visited it instead (whether or not they found a full magazine: a class refilled from its
 * slabs allocates too), and every tagged magazine's move (section 13: a cache whose deferred
 * objects circulate through its depot is busy even when no full magazine moves, and a reap of
 * an idle depot gives every tagged one out, the unsafe ones object by object to the latent
 * slabs). */
static uint64_t depot_moves(prd_cache_t *cp, bool allocs)
{
  if (cp->cache_magid == 0)
    return 0;
  prd_depot_t *dp = &cp->cache_depot;
  pthread_mutex_lock(dp->dp_lock);
  uint64_t n = (allocs ? dp->dp_alloc_visits : dp->dp_full.ml_gets + dp->dp_full.ml_puts) +
               dp->dp_lat_puts + dp->dp_lat_gets;
  pthread_mutex_unlock(dp->dp_lock);
  return n;
}

uint64_t prd__mag_depot_moves(prd_cache_t *cp)
{
  return depot_moves(cp, false);
}

uint64_t prd__mag_depot_allocs(prd_cache_t *cp)
{
  return depot_moves(cp, true);
}

/* New magazines of the depot get row mt from now on (dp_lock held).  The empty list holds
 * magazines of the current size only, so its magazines, of the old size, go onto *old for
 * the caller to destroy after unlocking; full ones stay in use (a magazine carries its
 * size). */
static void depot_set_size(prd_depot_t *dp, const prd_magtype_t *mt, prd_mag_t **old)
{
  dp->dp_magtype = mt;
  maglist_take(&dp->dp_empty, dp->dp_empty.ml_total, old, NULL);
  dp->dp_empty.ml_min = dp->dp_empty.ml_reaplimit = 0;
}

/* The next magazine size, when the chunk allows (section 8): for depot contention, the next
 * row of libumem's table while the chunk is below the row's maxbuf; for Prudence (`latent`),
 * the next row of the whole table while a magazine holds at most mag_latent_bytes() of
 * objects.  dp_lock held; the empty magazines, now too small, go onto *old (depot_set_size). */
static bool depot_grow(prd_cache_t *cp, prd_mag_t **old, bool latent)
{
  prd_depot_t *dp = &cp->cache_depot;
  const prd_magtype_t *mt = dp->dp_magtype;
  if (latent) {
    if (mt + 1 >= mag_types + MAG_NTYPES ||
        (size_t)mt[1].mt_magsize * cp->cache_chunksize > mag_latent_bytes())
      return false;
  } else if (mt + 1 >= mag_types + MAG_NUMEM || cp->cache_chunksize >= mt->mt_maxbuf) {
    return false;
  }
  depot_set_size(dp, mt + 1, old);
  if (!latent)
    dp->dp_mt_floor = mt + 1;
  dp->dp_resizes++;
  return true;
}

/* Prudence's growth undone as threads arrive (section 8): back down the table, not below
 * the row the other rules reached, while a magazine holds more than mag_latent_bytes.
 * dp_lock held; the empty magazines, now too large, go onto *old (depot_set_size). */
static bool depot_fit(prd_cache_t *cp, prd_mag_t **old)
{
  prd_depot_t *dp = &cp->cache_depot;
  const prd_magtype_t *mt = dp->dp_magtype;
  size_t limit = mag_latent_bytes();
  while (mt > dp->dp_mt_floor && (size_t)mt->mt_magsize * cp->cache_chunksize > limit)
    mt--;
  if (mt == dp->dp_magtype)
    return false;
  depot_set_size(dp, mt, old);
  dp->dp_resizes++;
  return true;
}

/* One interval's update of a depot: working set and magazine size (sections 7, 8). */
static void depot_update(prd_cache_t *cp)
{
  prd_depot_t *dp = &cp->cache_depot;
  prd_mag_t *old = NULL;
  pthread_mutex_lock(dp->dp_lock);
  prd_maglist_t *lists[2] = { &dp->dp_full, &dp->dp_empty };
  for (int i = 0; i < 2; i++) {
    lists[i]->ml_reaplimit = lists[i]->ml_min;
    lists[i]->ml_min = lists[i]->ml_total;
  }
  dp->dp_lat_idle = dp->dp_lat_gets == dp->dp_lat_gets_prev;   /* section 13 */
  dp->dp_lat_gets_prev = dp->dp_lat_gets;
  uint64_t cont = atomic_load_explicit(&dp->dp_contention, memory_order_relaxed);
  if (cont - dp->dp_contention_prev > (uint64_t)prd__opt(depot_contention))
    (void)depot_grow(cp, &old, false);
  else
    (void)depot_fit(cp, &old);
  dp->dp_contention_prev = cont;
  pthread_mutex_unlock(dp->dp_lock);
  mag_destroy_chain(cp, old, false);
}

bool prd__mag_grow(prd_cache_t *cp)
{
  prd_depot_t *dp = &cp->cache_depot;
  prd_mag_t *old = NULL;
  pthread_mutex_lock(dp->dp_lock);
  bool grew = depot_grow(cp, &old, true);
  if (!grew)
    (void)depot_fit(cp, &old);   /* threads arrived since the last growth */
  pthread_mutex_unlock(dp->dp_lock);
  mag_destroy_chain(cp, old, false);
  return grew;
}

/* ---- per-thread CPU caches ------------------------------------------------------------------ */
/* Empties one CPU cache (tc_lock held; its owner is not inside an operation on it).  to_depot:
 * full and empty magazines go to the depot (thread exit, flush); else everything is destroyed,
 * rounds back to the slab layer (reaps, destroy).  Counters are folded into the depot. */
static void cc_empty(prd_cache_t *cp, const prd_tcache_t *tc, prd_cpu_cache_t *cc,
                     bool to_depot, bool fold)
{
  prd_depot_t *dp = &cp->cache_depot;
  /* the thread's current slab goes back to the cache's lists (section 3, tier 4) */
  if (cc->cc_own != NULL) {
    prd__slab_disown(cp, tc, cc->cc_own);
    cc->cc_own = NULL;
  }
  /* latent generations: the layer above takes them out first (mh_cc_drain, section 14) */
  if (cc->cc_lat[0] != NULL || cc->cc_lat[1] != NULL)
    mag_hooks()->mh_cc_drain(cp, cc);
  uint64_t pc[PRD_PC_NCOUNTERS];
  for (int i = 0; i < PRD_PC_NCOUNTERS; i++) {
    pc[i] = atomic_load_explicit(&cc->cc_pcnt[i], memory_order_relaxed);
    if (fold)
      atomic_store_explicit(&cc->cc_pcnt[i], 0, memory_order_relaxed);
  }
  if (fold)
    cc->cc_pf_ops = cc->cc_pf_defers = 0;
  prd_mag_t *mags[2] = { cc->cc_loaded, cc->cc_previous };
  uint32_t rounds[2] = { atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed),
                         cc->cc_prounds };
  cc->cc_loaded = cc->cc_previous = NULL;
  prd__mag_rounds_set(cc, 0);
  cc->cc_prounds = 0;
  cc->cc_magsize = 0;
  uint64_t ah = prd__mag_alloc_hits(cc);
  uint64_t fh = prd__mag_free_hits(cc);
  if (fold) {
    atomic_store_explicit(&cc->cc_alloc_hits, 0, memory_order_relaxed);
    atomic_store_explicit(&cc->cc_rw, 0, memory_order_relaxed);   /* rounds 0, count 0 */
    atomic_store_explicit(&cc->cc_free_base, 0, memory_order_relaxed);
    cc->cc_misses = 0;
    cc->cc_idle_mark = 0;
  }
  prd_mag_t *give[2] = { NULL, NULL };
  uint32_t give_rounds[2] = { 0, 0 };
  pthread_mutex_lock(dp->dp_lock);
  if (fold) {
    dp->dp_dead_alloc_hits += ah;
    dp->dp_dead_free_hits += fh;
    for (int i = 0; i < PRD_PC_NCOUNTERS; i++)
      dp->dp_dead_pcnt[i] += pc[i];
  }
  for (int i = 0; i < 2; i++) {
    prd_mag_t *mp = mags[i];
    if (mp == NULL)
      continue;
    if (to_depot && rounds[i] == mp->mag_size) {
      depot_put_full(dp, mp);
    } else if (to_depot && rounds[i] == 0) {
      give[i] = depot_put_empty(dp, mp);
    } else {
      give[i] = mp;
      give_rounds[i] = rounds[i];
    }
  }
  pthread_mutex_unlock(dp->dp_lock);
  for (int i = 0; i < 2; i++)
    if (give[i] != NULL) {
      if (to_depot && give_rounds[i] > 0) {
        /* partly filled: its rounds to the slab layer, the magazine to the empty list */
        for (uint32_t k = 0; k < give_rounds[i]; k++)
          prd__slab_free(cp, give[i]->mag_round[k]);
        mag_count_flush(cp);
        pthread_mutex_lock(dp->dp_lock);
        give[i] = depot_put_empty(dp, give[i]);
        pthread_mutex_unlock(dp->dp_lock);
        if (give[i] != NULL)
          mag_destroy(cp, give[i], 0);
      } else {
        if (give_rounds[i] > 0)
          mag_count_flush(cp);
        mag_destroy(cp, give[i], give_rounds[i]);
      }
    }
}

/* The key of the exit destructor (section 10; thread.c section 6), and how many of its misses
 * a thread that could not have it lets pass before it tries again (a failing
 * pthread_key_create walks every key: trying at every miss made such a thread's allocations
 * several times slower). */
#define MAG_NOKEY_MISSES 1024
static _Atomic unsigned long mag_key_v;
static void tc_unregister_free(prd_tcache_t *tc);
static void mag_thread_exit(void *arg);

/* The exit key made at load (thread.c section 6). */
__attribute__((constructor)) static void mag_key_at_load(void)
{
  prd__thread_key_at_load(&mag_key_v, mag_thread_exit);
}

/* A record for a new thread (section 10), mag_registry_lock held: a spare with its CPU-cache
 * array, else a bare one, else a new slot of the record pages, which maps a page when none
 * is left (the lock dropped around the mapping).  NULL with the lock dropped when no page can
 * be mapped (the next miss tries again). */
static prd_tcache_t *tc_take(void)
{
  prd_tcache_t *tc;
  if ((tc = mag_spares) != NULL) {
    mag_spares = tc->tc_next;
    mag_nspares--;
    return tc;
  }
  if ((tc = mag_bare) != NULL) {
    mag_bare = tc->tc_next;
    return tc;
  }
  if (mag_tc_slots == 0) {
    pthread_mutex_unlock(&mag_registry_lock);
    size_t page = prd__os_page_size();
    char *pg = prd__os_map(page);
    if (pg == NULL)
      return NULL;
    atomic_fetch_add_explicit(&mag_thread_maps, 1, memory_order_relaxed);
    pthread_mutex_lock(&mag_registry_lock);
    if (mag_tc_slots == 0) {
      mag_tc_next = pg;
      mag_tc_slots = (uint32_t)(page / MAG_TC_SLOT);
    } else {
      prd__os_unmap(pg, page);   /* another thread mapped one meanwhile */
    }
  }
  tc = (prd_tcache_t *)(void *)mag_tc_next;
  mag_tc_next += MAG_TC_SLOT;
  mag_tc_slots--;
  pthread_mutex_init(&tc->tc_lock, NULL);
  return tc;
}

/* The calling thread's CPU caches, created or grown so that `id` has an entry; NULL when the
 * thread is exiting, no memory could be mapped, or the exit destructor cannot be had (section
 * 10; the caller then uses the slab layer, and the next miss tries again). */
prd_tcache_t *prd__mag_tc_get(uint32_t id)
{
  prd_tcache_t *tc = prd__mag_tls.mt_tc;
  if (prd_unlikely(tc == &mag_tc_none)) {
    if (mag_exiting)
      return NULL;
    pthread_once(&mag_once, mag_init_once);
    pthread_key_t key;
    if (prd__mag_tls.mt_nokey != 0) {   /* no key at this thread's last try: not yet again */
      prd__mag_tls.mt_nokey--;
      return NULL;
    }
    if (!prd__thread_key(&mag_key_v, mag_thread_exit, &key)) {
      prd__mag_tls.mt_nokey = MAG_NOKEY_MISSES;
      return NULL;
    }
    /* an exited thread's record, its CPU caches empty and zeroed (section 10), else a new
     * one; a failed mapping is not remembered: the next miss tries again */
    pthread_mutex_lock(&mag_registry_lock);
    tc = tc_take();
    if (tc == NULL)
      return NULL;   /* tc_take dropped the lock */
    tc->tc_prev = NULL;
    tc->tc_parked = 0;
    tc->tc_next = mag_threads;
    if (mag_threads != NULL)
      mag_threads->tc_prev = tc;
    mag_threads = tc;
    atomic_fetch_add_explicit(&mag_nthreads, 1, memory_order_relaxed);
    pthread_mutex_unlock(&mag_registry_lock);
    /* no lock held: setspecific may allocate.  When it fails the record leaves the registry
     * again, unused, for the spare list (a visitor that found it meanwhile did so under the
     * registry lock, which this hold excludes), and the thread goes on without magazines
     * until its next miss */
    if (pthread_setspecific(key, tc) != 0) {
      pthread_mutex_lock(&mag_registry_lock);
      tc_unregister_free(tc);
      pthread_mutex_unlock(&mag_registry_lock);
      return NULL;
    }
    prd__mag_tls.mt_tc = tc;
    /* a spare record has an array already: the copy the hit paths index names it from now
     * on, so that a bound taken from the record (prd__mag_release) never comes with a NULL
     * array, whatever fails below */
    prd__mag_tls.mt_cc = tc->tc_cc;
    prd__lthread_app_arrive();   /* a second one starts the maintenance thread (maint.c) */
  }
  if (prd_unlikely(id >= tc->tc_ncc)) {
    size_t page = prd__os_page_size();
    size_t want = PRD_MAX((size_t)(id + 1) * 2, (size_t)16) * sizeof(prd_cpu_cache_t);
    size_t bytes = PRD_P2ROUNDUP(want, page);
    prd_cpu_cache_t *ncc = prd__os_map(bytes);   /* zero-filled: empty CPU caches */
    if (ncc == NULL)
      return NULL;
    atomic_fetch_add_explicit(&mag_thread_maps, 1, memory_order_relaxed);
    pthread_mutex_lock(&tc->tc_lock);
    prd_cpu_cache_t *old = tc->tc_cc;
    size_t old_bytes = tc->tc_cc_bytes;
    if (old != NULL)
      memcpy(ncc, old, (size_t)tc->tc_ncc * sizeof(prd_cpu_cache_t));
    tc->tc_cc = ncc;
    tc->tc_cc_bytes = bytes;
    tc->tc_ncc = (uint32_t)(bytes / sizeof(prd_cpu_cache_t));
    pthread_mutex_unlock(&tc->tc_lock);
    if (old != NULL)
      prd__os_unmap(old, old_bytes);
  }
  /* a miss of a thread the idle reap left out of the count (section 8): back in */
  if (prd_unlikely(atomic_load_explicit(&tc->tc_uncounted, memory_order_relaxed)) &&
      atomic_exchange_explicit(&tc->tc_uncounted, false, memory_order_relaxed))
    atomic_fetch_add_explicit(&mag_nthreads, 1, memory_order_relaxed);
  /* the hit paths' copies (magazine.h): only this thread changes tc_cc and tc_ncc */
  prd__mag_tls.mt_cc = tc->tc_cc;
  if (prd__mag_tls.mt_hold == 0)
    prd__mag_tls.mt_lim = tc->tc_ncc;
  return tc;
}

static bool cc_holds_anything(const prd_cpu_cache_t *cc)
{
  return cc->cc_loaded != NULL || cc->cc_previous != NULL || cc->cc_lat[0] != NULL ||
         cc->cc_lat[1] != NULL || cc->cc_own != NULL;
}

/* Flushes every CPU cache of tc to the depots (tc_lock held).  `leaving` (mag_registry_lock
 * held too, and tc about to leave the registry: a thread's exit, a fork child's dead threads):
 * also the CPU cache of a cache being destroyed (MAG_DYING), which the destroy's visit would
 * otherwise miss (it walks the registry, and tc will not be on it), losing its objects and
 * magazines.  Its cache is alive then: a CPU cache that still holds anything has not been
 * visited (the visit empties it), and the destroy cannot visit it, nor get past its visit,
 * while this thread holds the registry lock. */
static void tc_flush(prd_tcache_t *tc, bool fold, bool leaving)
{
  uint32_t n = PRD_MIN(tc->tc_ncc, mag_id_count());
  for (uint32_t id = 1; id < n; id++) {
    prd_cache_t *cp = mag_cache_of(id);
    if (cp == NULL && leaving && cc_holds_anything(&tc->tc_cc[id]))
      cp = mag_dying_of(id);
    if (cp != NULL)
      cc_empty(cp, tc, &tc->tc_cc[id], true, fold);
  }
}

uint64_t prd__mag_thread_maps(void)
{
  return atomic_load_explicit(&mag_thread_maps, memory_order_relaxed);
}

/* Takes a flushed record off the registry (mag_registry_lock held, its tc_lock not held) and
 * keeps it, with its CPU-cache array, for the next thread (section 10), or unmaps both when
 * MAG_SPARES_MAX are kept already. */
static void tc_unregister_free(prd_tcache_t *tc)
{
  if (tc->tc_prev != NULL)
    tc->tc_prev->tc_next = tc->tc_next;
  else
    mag_threads = tc->tc_next;
  if (tc->tc_next != NULL)
    tc->tc_next->tc_prev = tc->tc_prev;
  if (!atomic_exchange_explicit(&tc->tc_uncounted, false, memory_order_relaxed))
    atomic_fetch_sub_explicit(&mag_nthreads, 1, memory_order_relaxed);
  atomic_store_explicit(&tc->tc_steal, 0, memory_order_relaxed);
  tc->tc_prev = NULL;
  if (mag_nspares < MAG_SPARES_MAX) {
    /* as a fresh mapping reads: every CPU cache empty, no counter, no busy mark (the flush
     * left the live caches' entries so; a cache destroyed meanwhile may have left its own) */
    if (tc->tc_cc != NULL)
      memset(tc->tc_cc, 0, (size_t)tc->tc_ncc * sizeof(prd_cpu_cache_t));
    tc->tc_next = mag_spares;
    mag_spares = tc;
    mag_nspares++;
    return;
  }
  /* past the spares' bound the array goes back and the record stays, bare (section 10) */
  if (tc->tc_cc != NULL)
    prd__os_unmap(tc->tc_cc, tc->tc_cc_bytes);
  tc->tc_cc = NULL;
  tc->tc_ncc = 0;
  tc->tc_cc_bytes = 0;
  tc->tc_next = mag_bare;
  mag_bare = tc;
}

/* The TLS destructor (section 10). */
static void mag_thread_exit(void *arg)
{
  prd_tcache_t *tc = arg;
  mag_exiting = true;
  /* glibc frees what it keeps of dead threads' stacks later in this exit, with its
   * stack-cache lock held: no library thread starts from here on (thread.c section 2) */
  prd__lthread_nostart(true);
  prd__mag_tls.mt_lim = 0;
  prd__mag_tls.mt_cc = NULL;
  prd__mag_tls.mt_tc = &mag_tc_none;
  pthread_mutex_lock(&mag_registry_lock);
  pthread_mutex_lock(&tc->tc_lock);
  tc_flush(tc, true, true);
  pthread_mutex_unlock(&tc->tc_lock);
  tc_unregister_free(tc);
  pthread_mutex_unlock(&mag_registry_lock);
  mag_unlocked();   /* work the layer above noted under the locks (section 14) */
  prd__lthread_app_leave();   /* the last application thread: library threads end too */
}

/* A slab owner (a thread record: records are never unmapped) that did not survive the fork
 * (mag_registry_lock held). */
static bool tc_gone(const void *owner)
{
  return owner != NULL && ((const prd_tcache_t *)owner)->tc_orphan;
}

/* The fork child's take-over (section 11): each orphan record is flushed and leaves the
 * registry as its thread's exit would have done (mag_thread_exit).  No lock of this layer held
 * but mag_reap_lock; the caller runs mag_unlocked once it holds none.  mag_orphans is read
 * without the lock: it is set only in the child's fork handler, before any other thread of
 * the child exists, and a stale true costs one hold of the registry lock.  True when it took
 * the registry lock (work for mag_unlocked may have been noted). */
static bool mag_adopt_orphans(void)
{
  if (!atomic_load_explicit(&mag_orphans, memory_order_relaxed))
    return false;
  pthread_mutex_lock(&mag_registry_lock);
  /* the dead threads' current slabs go back first, while their records are still orphans:
   * one that forked inside tier 4 had a slab made current that its cc_own does not name yet
   * (section 3), which its flush would miss */
  uint32_t n = mag_id_count();
  for (uint32_t id = 1; id < n; id++) {
    prd_cache_t *cp = mag_cache_of(id);
    if (cp != NULL)
      prd__slab_disown_if(cp, tc_gone);
  }
  prd_tcache_t *tc = mag_threads;
  while (tc != NULL) {
    prd_tcache_t *next = tc->tc_next;
    if (tc->tc_orphan) {
      pthread_mutex_lock(&tc->tc_lock);
      tc_flush(tc, true, true);
      pthread_mutex_unlock(&tc->tc_lock);
      tc->tc_orphan = false;
      tc_unregister_free(tc);
    }
    tc = next;
  }
  atomic_store_explicit(&mag_orphans, false, memory_order_relaxed);
  pthread_mutex_unlock(&mag_registry_lock);
  return true;
}

void prd__mag_adopt(void)
{
  if (mag_adopt_orphans())
    mag_unlocked();
}

void prd_thread_flush(void)
{
  prd_tcache_t *tc = prd__mag_tls.mt_tc;
  if (tc == &mag_tc_none)
    return;
  pthread_mutex_lock(&tc->tc_lock);
  tc_flush(tc, false, false);
  pthread_mutex_unlock(&tc->tc_lock);
  mag_unlocked();
}

/* ---- the reaper's half of the handshake (section 6) ------------------------------------------ */
static void handshake_fence(void)
{
#ifndef PRD_TSAN
  if (prd__mag_membarrier) {
    int e = prd__os_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);   /* A */
    if (e != 0) {
      /* registered at start, refused now for good (a seccomp filter installed since), or
       * for want of memory for a second (os.c section 11): the owners test tc_steal behind
       * a compiler barrier only, so a visitor could take a magazine from under an owner's
       * operation.  The process ends, whatever abort_on_error says (a safety guarantee that
       * cannot be kept fails loudly) */
      prd__report("magazines: membarrier(PRIVATE_EXPEDITED) failed (errno %d) after it was "
                  "registered: another thread's magazines cannot be taken safely", e);
      abort();
    }
  } else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* The reaper's side of A (section 6), mag_registry_lock held: tc_steal = 1 on every other
 * thread's set, then the barrier that pairs with the owners' compiler barrier.  Returns the
 * calling thread's set, never marked: it is not inside an operation while it reaps. */
static prd_tcache_t *steal_flag_all(void)
{
  prd_tcache_t *self = prd__mag_tls.mt_tc;
  for (prd_tcache_t *tc = mag_threads; tc != NULL; tc = tc->tc_next)
    if (tc != self)
      atomic_store_explicit(&tc->tc_steal, 1, memory_order_seq_cst);
  PRD_RACE();   /* race widening (race.h): each step of the visitor's side */
  handshake_fence();
  PRD_RACE();
  return self;
}

static bool cc_is_busy(prd_cpu_cache_t *cc)
{
#ifdef PRD_TSAN
  return atomic_load_explicit(&cc->cc_busy, memory_order_seq_cst) != 0;
#else
  return atomic_load_explicit(&cc->cc_busy, memory_order_acquire) != 0;   /* pairs with B */
#endif
}

enum steal_mode { STEAL_ALL, STEAL_IDLE, STEAL_ONE_CACHE, STEAL_ONE_CACHE_TRY };

/* Takes magazines from other threads' CPU caches (mag_reap_lock held): every cache not busy
 * (STEAL_ALL), those idle for a whole interval (STEAL_IDLE), or those of `only`, waiting for
 * an owner that is inside an operation (STEAL_ONE_CACHE: the cache is being destroyed) or
 * not (STEAL_ONE_CACHE_TRY: a drain, prd__mag_reap_threads of one cache). */
static void mag_steal(enum steal_mode mode, prd_cache_t *only)
{
  pthread_mutex_lock(&mag_registry_lock);
  prd_tcache_t *self = steal_flag_all();
  uint32_t nids = mag_id_count();
  for (prd_tcache_t *tc = mag_threads; tc != NULL; tc = tc->tc_next) {
    bool own = tc == self;
    bool idle = mode == STEAL_IDLE && !own;   /* every CPU cache idle a whole interval */
    pthread_mutex_lock(&tc->tc_lock);
    uint32_t n = PRD_MIN(tc->tc_ncc, nids);
    for (uint32_t id = 1; id < n; id++) {
      prd_cpu_cache_t *cc = &tc->tc_cc[id];
      prd_cache_t *cp = only != NULL ? (id == only->cache_magid ? only : NULL)
                                     : mag_cache_of(id);
      if (cp == NULL)
        continue;
      while (!own && cc_is_busy(cc)) {
        if (mode != STEAL_ONE_CACHE)
          break;
        pthread_mutex_unlock(&tc->tc_lock);
        sched_yield();
        pthread_mutex_lock(&tc->tc_lock);
      }
      if (!own && cc_is_busy(cc)) {
        idle = false;
        continue;
      }
      if (mode == STEAL_IDLE) {
        uint64_t ops = prd__mag_alloc_hits(cc) +
                       prd__mag_free_hits(cc) +
                       cc->cc_misses +
                       atomic_load_explicit(&cc->cc_pcnt[PRD_PC_DEFERRED], memory_order_relaxed);
        if (ops != cc->cc_idle_mark) {
          cc->cc_idle_mark = ops;
          idle = false;
          continue;
        }
      }
      if (cc_holds_anything(cc) || mode == STEAL_ONE_CACHE) {
        PRD_RACE();   /* between the busy test and the changes: the owner may start one */
        cc_empty(cp, tc, cc, false, mode == STEAL_ONE_CACHE);
        PRD_RACE();
      }
    }
    pthread_mutex_unlock(&tc->tc_lock);
    /* a thread idle a whole interval leaves the count that shares Prudence's limit (section
     * 8) until its next miss; the exchange pairs with the miss's and the exit's, so that the
     * count moves once each way */
    if (idle && !atomic_exchange_explicit(&tc->tc_uncounted, true, memory_order_relaxed))
      atomic_fetch_sub_explicit(&mag_nthreads, 1, memory_order_relaxed);
    PRD_RACE();
    if (!own)
      atomic_store_explicit(&tc->tc_steal, 0, memory_order_release);   /* owner: acquire */
    PRD_RACE();
  }
  pthread_mutex_unlock(&mag_registry_lock);
}

void prd__mag_reap_threads(prd_cache_t *only)
{
  if (only != NULL ? only->cache_magid == 0 : mag_id_count() <= 1)
    return;
  pthread_mutex_lock(&mag_reap_lock);
  (void)mag_adopt_orphans();
  mag_steal(only != NULL ? STEAL_ONE_CACHE_TRY : STEAL_ALL, only);
  pthread_mutex_unlock(&mag_reap_lock);
  mag_unlocked();
}

/* The handshake of mag_steal for Prudence's visitors (defer.c: pre-flush, OOM, destroy).
 * mag_reap_lock serializes them with the reapers: a reaper that cleared tc_steal while a
 * visitor still worked on that thread's caches would let the owner in. */
uint32_t prd__mag_visit(prd_cache_t *cp, int mode, prd__mag_visit_fn *fn, void *arg)
{
  if (mode == PRD_VISIT_TRY) {
    if (pthread_mutex_trylock(&mag_reap_lock) != 0)
      return 1;
    if (pthread_mutex_trylock(&mag_registry_lock) != 0) {
      pthread_mutex_unlock(&mag_reap_lock);
      return 1;
    }
  } else {
    pthread_mutex_lock(&mag_reap_lock);
    pthread_mutex_lock(&mag_registry_lock);
  }
  uint32_t skipped = 0;
  prd_tcache_t *self = steal_flag_all();
  uint32_t nids = mag_id_count();
  for (prd_tcache_t *tc = mag_threads; tc != NULL; tc = tc->tc_next) {
    bool own = tc == self;
    if (mode == PRD_VISIT_TRY) {
      if (pthread_mutex_trylock(&tc->tc_lock) != 0) {
        skipped++;
        if (!own)
          atomic_store_explicit(&tc->tc_steal, 0, memory_order_release);
        continue;
      }
    } else {
      pthread_mutex_lock(&tc->tc_lock);
    }
    uint32_t n = PRD_MIN(tc->tc_ncc, nids);
    for (uint32_t id = 1; id < n; id++) {
      prd_cache_t *vcp = cp != NULL ? (id == cp->cache_magid ? cp : NULL) : mag_cache_of(id);
      if (vcp == NULL)
        continue;
      prd_cpu_cache_t *cc = &tc->tc_cc[id];
      while (!own && mode == PRD_VISIT_WAIT && cc_is_busy(cc)) {
        pthread_mutex_unlock(&tc->tc_lock);
        sched_yield();
        pthread_mutex_lock(&tc->tc_lock);
      }
      if (!own && cc_is_busy(cc)) {
        skipped++;
        continue;
      }
      if (cc->cc_lat[0] != NULL || cc->cc_lat[1] != NULL || cc->cc_loaded != NULL)
        PRD_RACE();   /* between the busy test and the changes (a cache with something) */
      fn(vcp, cc, arg);
    }
    pthread_mutex_unlock(&tc->tc_lock);
    PRD_RACE();
    if (!own)
      atomic_store_explicit(&tc->tc_steal, 0, memory_order_release);   /* owner: acquire */
    PRD_RACE();
  }
  pthread_mutex_unlock(&mag_registry_lock);
  pthread_mutex_unlock(&mag_reap_lock);
  return skipped;
}

void prd__mag_pcounts(prd_cache_t *cp, uint64_t pc[PRD_PC_NCOUNTERS])
{
  memset(pc, 0, PRD_PC_NCOUNTERS * sizeof(uint64_t));
  uint32_t id = cp->cache_magid;
  if (id == 0)
    return;
  pthread_mutex_lock(&mag_registry_lock);
  for (prd_tcache_t *tc = mag_threads; tc != NULL; tc = tc->tc_next) {
    pthread_mutex_lock(&tc->tc_lock);
    if (id < tc->tc_ncc)
      for (int i = 0; i < PRD_PC_NCOUNTERS; i++)
        pc[i] += atomic_load_explicit(&tc->tc_cc[id].cc_pcnt[i], memory_order_relaxed);
    pthread_mutex_unlock(&tc->tc_lock);
  }
  prd_depot_t *dp = &cp->cache_depot;
  pthread_mutex_lock(dp->dp_lock);
  for (int i = 0; i < PRD_PC_NCOUNTERS; i++)
    pc[i] += dp->dp_dead_pcnt[i];
  pthread_mutex_unlock(dp->dp_lock);
  pthread_mutex_unlock(&mag_registry_lock);
}

/* ---- the maintenance tick (section 9) ------------------------------------------------------- */
/* One interval's work, maint.c's interval job.  trylock: the inline mode runs it from a slow
 * path whose caller may hold locks that come after mag_reap_lock (a reclaim callback under the
 * slab reap lock), so it never waits for mag_reap_lock (a reap running now does the same
 * work) and reports that it did not run. */
static bool mag_tick(bool trylock)
{
  if (!trylock)
    pthread_mutex_lock(&mag_reap_lock);
  else if (pthread_mutex_trylock(&mag_reap_lock) != 0)
    return false;
  (void)mag_adopt_orphans();   /* a fork child's first pass takes over the dead threads' caches */
  uint32_t n = mag_id_count();
  for (uint32_t id = 1; id < n; id++) {
    prd_cache_t *cp = mag_cache_of(id);   /* cannot be destroyed: we hold mag_reap_lock */
    if (cp == NULL)
      continue;
    depot_update(cp);
    depot_reap(cp, false, LAT_IDLE);
  }
  mag_steal(STEAL_IDLE, NULL);
  pthread_mutex_unlock(&mag_reap_lock);
  mag_unlocked();   /* the idle steal's latent objects (section 14) */
  return true;
}

/* ---- the slow paths (tiers 2-4, section 3) ------------------------------------------------ */
PRD_NOINLINE void *prd__mag_annot_out(prd_cache_t *cp, void *buf)
{
  prd__annot_object_out(cp, buf);
  return buf;
}

PRD_NOINLINE void *prd__mag_annot_out_mark(prd_cache_t *cp, void *buf)
{
  prd__annot_object_out(cp, buf);
  prd__mark_clear(buf, cp->cache_mark_off);
  return buf;
}

/* Tier 2: loaded and previous change places; the old loaded, holding old_rounds, becomes the
 * previous (tc_lock held). */
static void cc_exchange(prd_cpu_cache_t *cc, uint32_t old_rounds)
{
  prd_mag_t *t = cc->cc_loaded;
  uint32_t prounds = cc->cc_prounds;
  cc->cc_loaded = cc->cc_previous;
  cc->cc_previous = t;
  cc->cc_prounds = old_rounds;
  cc->cc_magsize = cc->cc_loaded->mag_size;
  prd__mag_rounds_set(cc, prounds);
}

/* End of tier 3: previous = loaded (holding old_rounds), loaded = mp (holding rounds). */
static void cc_reload(prd_cpu_cache_t *cc, prd_mag_t *mp, uint32_t old_rounds, uint32_t rounds)
{
  cc->cc_previous = cc->cc_loaded;
  cc->cc_prounds = old_rounds;
  cc->cc_loaded = mp;
  cc->cc_magsize = mp->mag_size;
  prd__mag_rounds_set(cc, rounds);
}

/* Tier 3 found nothing to load: counted as a depot miss that goes to the slab layer. */
static void depot_alloc_miss(prd_depot_t *dp)
{
  dp->dp_alloc_misses++;
  dp->dp_to_slab_allocs++;
}

/* Tiers 1-3 of an allocation miss (section 3), tc_lock held: a round, or NULL for tier 4.
 * `first`: the miss's first pass, which counts its depot visit and may ask for the wait of
 * section 13 (*wait: the oldest tagged magazine's tag; not counted as a miss then).  *give:
 * an empty magazine of an outgrown size, for the caller to destroy once it holds no lock. */
static void *alloc_tiers(prd_cache_t *cp, prd_tcache_t *tc, bool first, prd_gp_t *wait,
                         prd_mag_t **give)
{
  prd_cpu_cache_t *cc = &tc->tc_cc[cp->cache_magid];
  prd_depot_t *dp = &cp->cache_depot;
  bool visited = false;
  /* a second pass's round is not a hit: the first pass counted the miss's depot visit */
  bool counted = !first;
  prd__mag_fold_hits(cc);   /* the hits' count, before it could wrap (types.h cc_rw) */
  for (;;) {
    uint32_t r = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
    /* tier 1: the loaded magazine has a round (we came here for a steal request) */
    if (r > 0) {
      void *buf = cc->cc_loaded->mag_round[r - 1];
      if (!visited && !counted) {   /* a counted hit: the free hits stay (prd__mag_free_hits) */
        atomic_store_explicit(&cc->cc_rounds, r - 1, memory_order_relaxed);
        PRD__MAG_COUNT(cc->cc_alloc_hits);
      } else {
        prd__mag_rounds_set(cc, r - 1);
      }
      if (prd_unlikely(prd__mag_annot))
        prd__mag_annot_out(cp, buf);
      return buf;
    }
    /* before tier 2: a safe latent generation becomes the loaded magazine (mh_cc_merge,
     * Algorithm 1 lines 7-11: the deferred objects are reused first) */
    if (prd__mag_latent(cc) != 0 && mag_hooks()->mh_cc_merge(cp, cc))
      continue;
    /* tier 2: loaded is empty and previous full: exchange them */
    if (cc->cc_prounds > 0) {
      cc_exchange(cc, 0);
      continue;
    }
    if (visited)
      return NULL;
    /* tier 3: both empty: previous to the depot's empty list, a safe tagged magazine
     * (section 13) or else a full one from the depot */
    visited = true;
    if (first)
      cc->cc_misses++;
    depot_lock(cp);
    if (first)
      dp->dp_alloc_visits++;
    prd_mag_t *fmp = depot_lat_get(dp);
    bool tagged = fmp != NULL;
    uint32_t frounds = tagged ? fmp->mag_nlat : 0;
    if (fmp == NULL && (fmp = maglist_get(&dp->dp_full)) != NULL) {
      frounds = fmp->mag_size;
      dp->dp_rounds -= frounds;
      tc->tc_parked -= (int64_t)frounds * (int64_t)cp->cache_chunksize;   /* section 9 */
    }
    if (fmp == NULL) {
      /* nothing to load: tier 4, or first the wait of section 13 when the layer above's
       * rule prefers it to growing the cache */
      if (first && dp->dp_lat_head != NULL && mag_hooks()->mh_tag_wait(cp, dp->dp_lat_rounds))
        *wait = dp->dp_lat_head->mag_gp;
      else
        depot_alloc_miss(dp);
      pthread_mutex_unlock(dp->dp_lock);
      return NULL;
    }
    if (cc->cc_previous != NULL)
      *give = depot_put_empty(dp, cc->cc_previous);
    pthread_mutex_unlock(dp->dp_lock);
    if (tagged) {   /* deferred objects, free in a magazine now (section 4) */
      frounds = prd__mark_merge(cp, fmp->mag_round, frounds);
      if (prd_unlikely(prd__mag_annot))
        for (uint32_t i = 0; i < frounds; i++)
          prd__annot_object_in(cp, fmp->mag_round[i]);
      atomic_store_explicit(&cc->cc_pcnt[PRD_PC_MERGES],
                            atomic_load_explicit(&cc->cc_pcnt[PRD_PC_MERGES],
                                                 memory_order_relaxed) + frounds,
                            memory_order_relaxed);
    }
    cc_reload(cc, fmp, 0, frounds);
  }
}

static void *mag_alloc_miss(prd_cache_t *cp, int flags);

/* Every buffer that leaves the layers below tier 1 (tiers 1-3 under tc_lock, Prudence's
 * safe latent objects and refill, the slab layer) leaves through here: the free mark is
 * cleared once, after the tools made the buffer accessible (section 15). */
PRD_NOINLINE void *prd__mag_alloc_miss(prd_cache_t *cp, int flags)
{
  void *buf = mag_alloc_miss(cp, flags);
  if (buf != NULL && !(cp->cache_flags & PRD_CF_NOMARK))
    prd__mark_clear(buf, cp->cache_mark_off);
  return buf;
}

/* Tier 4's refill (section 3): up to `want` buffers from the slab layer under one hold of its
 * lock (no other lock held: it may grow the cache, and growth may reap), one returned and
 * the others pushed onto the loaded magazine (a new one when the thread has none), so that
 * the next allocations hit.  Half a magazine, as jemalloc fills half a thread cache's bin:
 * the frees that follow find room in the loaded magazine, so that the refilled buffers are
 * not parked in the depot as they are and the thread's magazines do not hold more of the
 * slabs than a round trip of half a magazine needs (a full refill left a churning
 * single-threaded program's heap with twice the free dirty pages, and its decay asked for
 * the maintenance thread).  Nothing is written into the buffers: a buffer the slab layer
 * kept since its free still carries the free mark (the slab's link word is the chunk's
 * last, section 15), a fresh one was never handed out, so the mark is in the magazine
 * exactly where it was in the slab and the hit that hands a buffer out clears it.  What the
 * magazine cannot take (a nested call filled it, no magazine could be had) goes back.
 * Memory ordering: the rounds are written under tc_lock, as tiers 1-3 write them. */
#define MAG_REFILL_MAX 256   /* buffers one refill takes: its stack array (2 KiB) */
/* A thread's first refill of a class takes this many: a thread that starts, allocates a
 * little and exits would otherwise take half a magazine per class and hand the rest back
 * to the slab layer at its exit, one link check each; its later refills take half. */
#define MAG_FIRST_REFILL 8

/* The thread's current slab of cp after a call of the slab layer that began with `hint`
 * (tc_lock held; section 3, tier 4).  Stored even when it is the hint: meanwhile a reaper
 * may have given the hint back and set cc_own to NULL, and the call then made the same slab
 * current again.  A nested call from a constructor may have made another slab current: that
 * one is given back, so that the thread has one current slab of a cache at most, and every
 * one is in its cc_own, where its exit and flush find it. */
static void cc_own_set(prd_cache_t *cp, const prd_tcache_t *tc, prd_cpu_cache_t *cc,
                       void *hint, void *own)
{
  void *cur = cc->cc_own;
  if (cur != NULL && cur != hint && cur != own)
    prd__slab_disown(cp, tc, cur);
  cc->cc_own = own;
}

/* Tier 4's buffers from the slab layer, from the thread's current slab (section 3): `hint`
 * is cc_own as read under tc_lock before the call (not held now); the slab the thread has
 * now is stored under tc_lock (cc_own_set).  Only a call that ends with none, as it began,
 * skips the lock. */
static size_t mag_slab_take(prd_cache_t *cp, prd_tcache_t *tc, void *hint, void **objs,
                            size_t want, int flags)
{
  void *own = hint;
  size_t got = prd__slab_alloc_own(cp, objs, want, flags, tc, &own);
  if (got != 0)   /* Fig. 8: an object-cache refill, whichever mode the cache frees in */
    atomic_fetch_add_explicit(&cp->cache_slab_refills, 1, memory_order_relaxed);
  PRD_RACE();   /* a reaper may give the slab back before it is stored */
  if (own != NULL || hint != NULL) {
    pthread_mutex_lock(&tc->tc_lock);
    /* taken afresh: a nested call (a constructor) may have remapped the CPU caches */
    cc_own_set(cp, tc, &tc->tc_cc[cp->cache_magid], hint, own);
    pthread_mutex_unlock(&tc->tc_lock);
  }
  return got;
}

size_t prd__mag_slab_take(prd_cache_t *cp, prd_tcache_t *tc, void **objs, size_t want,
                          int flags)
{
  pthread_mutex_lock(&tc->tc_lock);
  void *hint = tc->tc_cc[cp->cache_magid].cc_own;
  pthread_mutex_unlock(&tc->tc_lock);
  return mag_slab_take(cp, tc, hint, objs, want, flags);
}

static void *mag_refill(prd_cache_t *cp, prd_tcache_t *tc, void *hint, uint32_t want,
                        int flags)
{
  void *objs[MAG_REFILL_MAX];
  void *own = hint;
  size_t got = prd__slab_alloc_own(cp, objs, PRD_MIN(want, (uint32_t)MAG_REFILL_MAX), flags,
                                   tc, &own);
  PRD_RACE();   /* a reaper may give the slab back before it is stored */
  uint32_t k = 0;
  pthread_mutex_lock(&tc->tc_lock);
  /* taken afresh: a nested call (a constructor) may have remapped the CPU caches */
  prd_cpu_cache_t *cc = &tc->tc_cc[cp->cache_magid];
  cc_own_set(cp, tc, cc, hint, own);
  if (got <= 1) {
    pthread_mutex_unlock(&tc->tc_lock);
    return got == 1 ? objs[0] : NULL;
  }
  uint32_t r = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
  if (cc->cc_loaded == NULL) {
    prd_mag_t *mp = prd__mag_new(cp);   /* the depot's empty one first (PRD_NOSLEEP) */
    if (mp != NULL) {
      cc->cc_loaded = mp;
      cc->cc_magsize = mp->mag_size;
      r = 0;
    }
  }
  if (cc->cc_loaded != NULL && cc->cc_magsize > r) {
    /* objs[0] is returned; the rest pushed last first, so that the pops go in their order
     * (a slab's fresh buffers by rising address) */
    k = PRD_MIN((uint32_t)got - 1, cc->cc_magsize - r);
    for (uint32_t i = 0; i < k; i++)
      cc->cc_loaded->mag_round[r + i] = objs[k - i];
    prd__mag_rounds_set(cc, r + k);
  }
  pthread_mutex_unlock(&tc->tc_lock);
  if (got - 1 > k)
    prd__slab_free_bulk(cp, objs + 1 + k, got - 1 - k);
  return objs[0];
}

static void *mag_alloc_miss(prd_cache_t *cp, int flags)
{
  uint32_t id = cp->cache_magid;
  prd_tcache_t *tc;
  if (id == 0 || (tc = prd__mag_tc_get(id)) == NULL)
    return prd__slab_alloc(cp, flags);
  prd__maint_poke_miss();
  prd_gp_t wait = 0;
  prd_mag_t *give = NULL;
  uint32_t want = 1;   /* tier 4's buffers (mag_refill) */
  void *own = NULL;    /* tier 4's current slab (section 3) */
  pthread_mutex_lock(&tc->tc_lock);
  void *buf = alloc_tiers(cp, tc, true, &wait, &give);
  if (wait != 0) {
    /* section 13: the depot's tagged magazines are many and none is safe: the oldest one's
     * grace period, polled for a bounded time by the layer above (mh_depot_wait, no lock
     * held), then tiers 1-3 once more before new objects from the slabs */
    pthread_mutex_unlock(&tc->tc_lock);
    if (give != NULL)
      mag_destroy(cp, give, 0);
    give = NULL;
    bool over = mag_hooks()->mh_depot_wait(id, wait, flags);
    pthread_mutex_lock(&tc->tc_lock);
    if (over) {
      buf = alloc_tiers(cp, tc, false, &wait, &give);
    } else {   /* not over, or no poll (PRD_NOSLEEP, a read-side section): tier 4 */
      depot_lock(cp);
      depot_alloc_miss(&cp->cache_depot);
      pthread_mutex_unlock(cp->cache_depot.dp_lock);
    }
  }
  if (buf == NULL && (cp->cache_flags & (PRD_CF_PACKED | PRD_CF_DEBUG)) == PRD_CF_PACKED &&
      !prd__mag_annot) {
    /* tier 4 of malloc's classes refills half a magazine (section 3): of the loaded one's
     * size, or of the depot's for a thread that has none yet (one that only allocates gets
     * its first magazine here) */
    prd_cpu_cache_t *cc = &tc->tc_cc[id];
    want = cc->cc_loaded != NULL ? cc->cc_magsize / 2 : 0;
  }
  if (buf == NULL)
    own = tc->tc_cc[id].cc_own;
  pthread_mutex_unlock(&tc->tc_lock);
  if (give != NULL)
    mag_destroy(cp, give, 0);
  if (buf != NULL)
    return buf;
  /* tier 4 of a cache with deferrals: the layer above refills the loaded magazine with size
   * less its latent objects (mh_refill, Algorithm 1 line 14) and returns one */
  const struct prd__mag_hooks *h = mag_hooks();   /* NULL: no deferral yet in the process */
  if (h != NULL &&
      (atomic_load_explicit(&cp->cache_defer_on, memory_order_relaxed) & PRD_DEFER_LATENT))
    return h->mh_refill(cp, id, flags);
  /* tier 4: no full magazine in the depot: the slab layer (tc_lock dropped: it may reap),
   * half a magazine at once (mag_refill) */
  if (want == 0)   /* a thread's first refill of the class: a few (MAG_FIRST_REFILL) */
    want = PRD_MIN(prd__mag_cur_size(cp) / 2, MAG_FIRST_REFILL);
  if (want > 1)
    return mag_refill(cp, tc, own, want, flags);
  return mag_slab_take(cp, tc, own, &buf, 1, flags) == 1 ? buf : NULL;
}

/* A free or a deferral found the free mark in buf (section 15): it is free already, and
 * its first copy stays where it is.  free and prd_free_deferred keep errno (malloc.c). */
void prd__mag_double_free(prd_cache_t *cp, void *buf, const char *what)
{
  int saved = errno;
  prd__error("cache %s: %s of buffer %p (it is already free; not freed again)",
             cp->cache_name, what, buf);
  errno = saved;
}

/* Deferred objects whose grace period ended become free here (section 15), in a cache made
 * with the option hardened: each gets the free mark before any thread can take it, so that a
 * second deferral, or a free after the deferral, that meets it before it is handed out
 * again is found.  A copy that carries the mark already: reported and dropped, the others
 * packed to the front.  Returns how many stay.  (Without the option nothing is touched: a
 * load, compare and store of every merged object, about 12 instructions of a deferral's
 * 127, for a check that sees only the copies that meet.)  Before the tools' annotations. */
uint32_t prd__mark_merge(prd_cache_t *cp, void **objs, uint32_t n)
{
  if ((cp->cache_flags & (PRD_CF_HARDENED | PRD_CF_NOMARK)) != PRD_CF_HARDENED)
    return n;
  uint32_t k = 0, off = cp->cache_mark_off;
  for (uint32_t i = 0; i < n; i++) {
    void *o = objs[i];
    if (prd_unlikely(prd__mark_test(o, off))) {
      prd__error("cache %s: deferred free of buffer %p: deferred twice, or freed after its "
                 "deferral (it is already free; not freed again)", cp->cache_name, o);
      continue;
    }
    prd__mark_set(o, off);
    objs[k++] = o;
  }
  return k;
}

PRD_NOINLINE void prd__mag_free_miss(prd_cache_t *cp, void *buf)
{
  uint32_t id = cp->cache_magid;
  prd_tcache_t *tc;
  /* a thread's first use of the layer a free (glibc's frees of dead threads' TLS, with its
   * stack-cache lock held, are the first calls of a thread that never allocated, as it
   * exits): that free asks for no library thread (thread.c section 2) */
  bool first = prd__mag_tls.mt_tc == &mag_tc_none;
  if (id == 0 || (tc = prd__mag_tc_get(id)) == NULL) {
    prd__slab_free(cp, buf);
    return;
  }
  if (!first)
    prd__maint_poke_miss();
  prd_depot_t *dp = &cp->cache_depot;
  bool done = false, visited = false, wake = false;
  uint64_t parked = 0;   /* rounds put into the depot full */
  pthread_mutex_lock(&tc->tc_lock);
  prd_cpu_cache_t *cc = &tc->tc_cc[id];
  prd__mag_fold_hits(cc);   /* the hits' count, before it could wrap (types.h cc_rw) */
  for (;;) {
    uint32_t r = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
    if (!visited && (cp->cache_flags & PRD_CF_NOMARK) && r > 0 &&
        cc->cc_loaded->mag_round[r - 1] == buf) {
      /* the top-round compare of a hit without the free mark, for frees that come here
       * under the tools, and for a full loaded magazine (free(p); free(p) where the first
       * free filled it: the hit could not push, so it did not compare) */
      pthread_mutex_unlock(&tc->tc_lock);
      prd__mag_double_free(cp, buf, "double free");
      return;
    }
    /* tier 1: room in the loaded magazine (we came here for a steal request) */
    if (r < cc->cc_magsize) {
      if (prd_unlikely(prd__mag_annot))
        prd__annot_object_in(cp, buf);
      cc->cc_loaded->mag_round[r] = buf;
      if (!visited)   /* a free hit, counted by the round itself (prd__mag_free_hits) */
        atomic_store_explicit(&cc->cc_rounds, r + 1, memory_order_relaxed);
      else
        prd__mag_rounds_set(cc, r + 1);
      done = true;
      break;
    }
    /* tier 2: loaded is full (or absent) and previous empty: exchange them */
    if (cc->cc_previous != NULL && cc->cc_prounds == 0) {
      cc_exchange(cc, r);
      continue;
    }
    if (visited)
      break;
    /* tier 3: both full: previous to the depot's full list, an empty one from its empty
     * list or else from the magazine cache */
    visited = true;
    cc->cc_misses++;
    depot_lock(cp);
    dp->dp_free_visits++;
    prd_mag_t *emp = maglist_get(&dp->dp_empty);
    if (emp == NULL) {
      dp->dp_free_misses++;
      const prd_magtype_t *mt = dp->dp_magtype;
      pthread_mutex_unlock(dp->dp_lock);
      emp = mag_new(mt);   /* PRD_NOSLEEP: a free never waits, and never reaps */
      pthread_mutex_lock(dp->dp_lock);
      if (emp == NULL) {
        dp->dp_to_slab_frees++;
        pthread_mutex_unlock(dp->dp_lock);
        break;
      }
    }
    if (cc->cc_previous != NULL) {
      parked += cc->cc_previous->mag_size;
      depot_put_full(dp, cc->cc_previous);
    }
    uint32_t lat = prd__mag_latent(cc);
    if (cc->cc_lat[1] != NULL)   /* Prudence: the object cache is flushed (Fig. 8 churns) */
      PRD__MAG_COUNT(cc->cc_pcnt[PRD_PC_FLUSHES]);
    if (lat != 0 && 2 * lat >= r && cc->cc_loaded != NULL && r == cc->cc_loaded->mag_size) {
      /* Prudence, flush sized by the latent count (001 §4.2): the latent objects will be the
       * next loaded magazine once safe, so the full loaded one goes to the depot too and the
       * thread keeps room for them instead of a second full magazine */
      parked += cc->cc_loaded->mag_size;
      depot_put_full(dp, cc->cc_loaded);
      pthread_mutex_unlock(dp->dp_lock);
      cc->cc_previous = NULL;
      cc->cc_prounds = 0;
      cc->cc_loaded = emp;
      cc->cc_magsize = emp->mag_size;
      prd__mag_rounds_set(cc, 0);
      continue;
    }
    pthread_mutex_unlock(dp->dp_lock);
    cc_reload(cc, emp, r, 0);
  }
  if (parked != 0) {   /* section 9: memory parked for good in a process with no thread */
    tc->tc_parked += (int64_t)(parked * cp->cache_chunksize);
    if (tc->tc_parked > MAG_PARK_WAKE_BYTES && prd__opt(decay_ms) != 0) {
      tc->tc_parked = 0;
      wake = true;
    }
  }
  pthread_mutex_unlock(&tc->tc_lock);
  if (wake)
    prd__maint_wake();
  /* tier 4: no empty magazine could be had: straight to the slab layer */
  if (!done) {
    prd__slab_free(cp, buf);
    mag_count_flush(cp);
  }
}

/* ---- caches ------------------------------------------------------------------------------ */
/* The per-process secret of the free mark (section 15): random (prd__os_random64, os.c
 * section 10), with bit 63 set so that a mark is never a user-space address. */
static void mark_init_once(void)
{
  prd__mark_secret = (uintptr_t)(prd__os_random64(2) | (1ull << 63));
}

/* Whether cp has the free mark (section 15), else PRD_CF_NOMARK, and where it is.  None
 * where the mark's word is the user's constructed state (a constructor: the slab layer's
 * reserved word past the object is the small layout's freelist word, and the large layout
 * has none), where word 0 is the freelist word (an 8-byte chunk: a mark written into a
 * buffer whose first copy is on its slab would cut the slab's freelist) or not a whole word
 * of the object, without magazines (every free reaches the slab layer at the call, whose
 * checks are exact there), where nothing may be written (NOTOUCH), and where buffer
 * debugging watches free buffers (its own checks find double frees).  After cache_magid is
 * known. */
static void mark_cache_init(prd_cache_t *cp)
{
  pthread_once(&mark_once, mark_init_once);
  uint32_t f = cp->cache_flags & ~PRD_CF_NOMARK;
  if (cp->cache_magid == 0 || (f & (PRD_CACHE_NOTOUCH | PRD_CF_DEBUG)) ||
      cp->cache_ctor != NULL || cp->cache_bufsize < sizeof(uintptr_t) ||
      (!(f & PRD_CF_HASH) && cp->cache_link_off == 0))
    f |= PRD_CF_NOMARK;
  cp->cache_flags = f;
  /* off the first line, and off its pair where there is room (section 15): not malloc's
   * classes (PRD_CF_PACKED), whose hit paths find the class, not the cache, and keep word 0 */
  cp->cache_mark_off = 0;
  if (!(f & (PRD_CF_NOMARK | PRD_CF_PACKED)))
    cp->cache_mark_off = cp->cache_bufsize >= PRD_MARK_FAR_MIN    ? PRD_MARK_FAR
                         : cp->cache_bufsize >= PRD_MARK_NEAR_MIN ? PRD_MARK_NEAR
                                                                  : 0;
  /* before the cache's first slab: the slab layer marks what it links (section 15) */
  cp->cache_mark_key = (f & PRD_CF_NOMARK) ? 0 : prd__mark_secret;
}

static int mag_cache_init(prd_cache_t *cp);

int prd__mag_cache_init(prd_cache_t *cp)
{
  int rc = mag_cache_init(cp);
  mark_cache_init(cp);
  return rc;
}

static int mag_cache_init(prd_cache_t *cp)
{
  cp->cache_magid = 0;
  if ((cp->cache_flags & (PRD_CACHE_NOMAGAZINE | PRD_CF_INTERNAL)) || !prd__opt(magazines))
    return 0;
  pthread_once(&mag_once, mag_init_once);
  if (!atomic_load_explicit(&mag_types_ready, memory_order_acquire))
    return PRD__MAG_NEED_TYPES;   /* section 2: the front end makes the magazine caches */
  prd_depot_t *dp = &cp->cache_depot;
  memset(dp, 0, sizeof(*dp));
  dp->dp_lock = prd__os_mutex_new_short();   /* os.c section 9 */
  if (dp->dp_lock == NULL)
    return -1;   /* ENOMEM */
  const prd_magtype_t *mt = mag_types;
  while (cp->cache_chunksize <= mt->mt_minbuf)
    mt++;
  dp->dp_magtype = dp->dp_mt_floor = mt;
  dp->dp_lat_spare_min = UINT32_MAX;
  /* mag_id_get sets cache_magid; no memory for the id table: the creation fails rather than
   * make a cache that would run without magazines for its whole life */
  if (mag_id_get(cp) == 0) {
    cp->cache_magid = 0;
    prd__os_mutex_free(dp->dp_lock);
    dp->dp_lock = NULL;
    return -1;
  }
  return 0;
}

/* A layer above asks for magazines of at least `rounds` rounds from the start (malloc.c's
 * size classes: libumem's starting rows were sized for kernel-era memory, and a general
 * malloc's working set per class is larger; section 8).  It only grows the size, as the
 * contention rule does, and the row it reaches is the floor depot_fit keeps; empty
 * magazines of the old size are given back. */
void prd__mag_set_min_rounds(prd_cache_t *cp, uint32_t rounds)
{
  if (cp->cache_magid == 0)
    return;
  prd_depot_t *dp = &cp->cache_depot;
  prd_mag_t *old = NULL;
  pthread_mutex_lock(dp->dp_lock);
  const prd_magtype_t *mt = dp->dp_magtype;
  while (mt->mt_magsize < rounds && mt + 1 < mag_types + MAG_NUMEM)
    mt++;
  if (mt != dp->dp_magtype) {
    depot_set_size(dp, mt, &old);
    dp->dp_mt_floor = mt;
  }
  pthread_mutex_unlock(dp->dp_lock);
  mag_destroy_chain(cp, old, false);
}

/* Before the slab layer tears cp down: every thread's magazines of cp and the depot's go back
 * to the slab layer, and the id is freed for reuse. */
void prd__mag_cache_fini(prd_cache_t *cp)
{
  uint32_t id = cp->cache_magid;
  if (id == 0)
    return;
  pthread_mutex_lock(&mag_reap_lock);
  mag_id_set(id, MAG_DYING);   /* thread exits and ticks skip it from now on */
  mag_steal(STEAL_ONE_CACHE, cp);
  prd__mag_depot_reap(cp, true);
  mag_id_set(id, NULL);
  pthread_mutex_unlock(&mag_reap_lock);
  mag_unlocked();
  prd__os_mutex_free(cp->cache_depot.dp_lock);
  cp->cache_depot.dp_lock = NULL;
  cp->cache_magid = 0;
}

/* The CPU layer's fields of prd_cache_stats_t (sections 3, 7, 8; seed 003 §4.4 miss rates). */
void prd__mag_stats(prd_cache_t *cp, prd_cache_stats_t *st)
{
  uint32_t id = cp->cache_magid;
  if (id == 0)
    return;
  prd_depot_t *dp = &cp->cache_depot;
  uint64_t ah = 0, fh = 0, objs = 0, ocobjs = 0, latent = 0;
  pthread_mutex_lock(&mag_registry_lock);
  for (prd_tcache_t *tc = mag_threads; tc != NULL; tc = tc->tc_next) {
    pthread_mutex_lock(&tc->tc_lock);
    if (id < tc->tc_ncc) {
      prd_cpu_cache_t *cc = &tc->tc_cc[id];
      ah += prd__mag_alloc_hits(cc);
      fh += prd__mag_free_hits(cc);
      uint64_t loaded = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
      /* a CPU cache with latent generations is a Prudence object cache: its loaded
       * magazine is Algorithm 1's object cache (oc_objs), the previous one stays magazine
       * layer (thread_cache_objs); defer.c section 5 */
      if (cc->cc_lat[1] != NULL || cc->cc_lat[0] != NULL) {
        ocobjs += loaded;
        objs += cc->cc_prounds;
      } else {
        objs += loaded + cc->cc_prounds;
      }
      latent += prd__mag_latent(cc);
    }
    pthread_mutex_unlock(&tc->tc_lock);
  }
  pthread_mutex_lock(dp->dp_lock);
  st->mag_size = dp->dp_magtype->mt_magsize;
  st->mag_resizes = dp->dp_resizes;
  st->mag_alloc_hits = ah + dp->dp_dead_alloc_hits;
  st->mag_free_hits = fh + dp->dp_dead_free_hits;
  st->depot_full_gets = dp->dp_full.ml_gets;
  st->depot_full_puts = dp->dp_full.ml_puts;
  st->depot_empty_gets = dp->dp_empty.ml_gets;
  st->depot_empty_puts = dp->dp_empty.ml_puts;
  st->depot_contention = atomic_load_explicit(&dp->dp_contention, memory_order_relaxed);
  st->depot_full_mags = dp->dp_full.ml_total;
  st->depot_empty_mags = dp->dp_empty.ml_total;
  st->depot_rounds = dp->dp_rounds;
  st->latent_depot_objs = dp->dp_lat_rounds;
  st->mag_slab_allocs = dp->dp_to_slab_allocs;
  st->mag_slab_frees = dp->dp_to_slab_frees;
  st->slab_refills = atomic_load_explicit(&cp->cache_slab_refills, memory_order_relaxed);
  st->slab_flushes = atomic_load_explicit(&cp->cache_slab_flushes, memory_order_relaxed);
  st->slab_oc_churns = PRD_MIN(st->slab_refills, st->slab_flushes);
  uint64_t av = dp->dp_alloc_visits, am = dp->dp_alloc_misses;
  uint64_t fv = dp->dp_free_visits, fm = dp->dp_free_misses;
  pthread_mutex_unlock(dp->dp_lock);
  pthread_mutex_unlock(&mag_registry_lock);
  st->thread_cache_objs = objs;
  st->oc_objs = ocobjs;
  st->latent_cache_objs = latent;
  uint64_t allocs = st->mag_alloc_hits + av, frees = st->mag_free_hits + fv;
  st->mag_allocs = allocs;
  st->mag_frees = frees;
  st->cpu_alloc_miss_rate = allocs ? (double)av / (double)allocs : 0.0;
  st->cpu_free_miss_rate = frees ? (double)fv / (double)frees : 0.0;
  st->depot_alloc_miss_rate = av ? (double)am / (double)av : 0.0;
  st->depot_free_miss_rate = fv ? (double)fm / (double)fv : 0.0;
}

void prd__mag_purge_all(void)
{
  prd_thread_flush();
  prd__mag_reap_threads(NULL);
  pthread_mutex_lock(&mag_reap_lock);
  uint32_t n = mag_id_count();
  for (uint32_t id = 1; id < n; id++) {
    prd_cache_t *cp = mag_cache_of(id);
    if (cp != NULL)
      prd__mag_depot_reap(cp, true);
  }
  pthread_mutex_unlock(&mag_reap_lock);
}

/* ---- fork (section 11; fork.c calls these in the whole-process order it states) ---------- */
PRD__FORK_LINK();
/* mag_reap_lock: after maint.c's maint_lock, before the slab layer's reap and list locks. */
void prd__mag_fork_prepare_reap(void)
{
  pthread_mutex_lock(&mag_reap_lock);
}

/* The thread registry and every thread's tc_lock: after the slab list lock, before the
 * cache locks. */
void prd__mag_fork_prepare_threads(void)
{
  pthread_mutex_lock(&mag_registry_lock);
  for (prd_tcache_t *tc = mag_threads; tc != NULL; tc = tc->tc_next)
    pthread_mutex_lock(&tc->tc_lock);
}

/* mag_id_lock and every depot's dp_lock: after the cache locks. */
void prd__mag_fork_prepare_depots(void)
{
  pthread_mutex_lock(&mag_id_lock);
  for (uint32_t id = 1; id < mag_nids; id++)
    if (mag_caches[id] != NULL && mag_caches[id] != MAG_DYING)
      pthread_mutex_lock(mag_caches[id]->cache_depot.dp_lock);
}

void prd__mag_fork_release_depots(void)
{
  for (uint32_t id = 1; id < mag_nids; id++)
    if (mag_caches[id] != NULL && mag_caches[id] != MAG_DYING)
      pthread_mutex_unlock(mag_caches[id]->cache_depot.dp_lock);
  pthread_mutex_unlock(&mag_id_lock);
}

void prd__mag_fork_release_threads(void)
{
  for (prd_tcache_t *tc = mag_threads; tc != NULL; tc = tc->tc_next)
    pthread_mutex_unlock(&tc->tc_lock);
  pthread_mutex_unlock(&mag_registry_lock);
}

void prd__mag_fork_release_reap(void)
{
  pthread_mutex_unlock(&mag_reap_lock);
}

/* In the child, with every lock released (after maint.c's part): the other threads are gone.
 * Their records stay registered, marked orphans, for mag_adopt (section 11); a CPU cache that
 * its owner was inside of at the fork loses its busy mark, which no one would clear.  Only
 * marks that are set are written: every write here is a copy of a page. */
void prd__mag_fork_child(void)
{
  prd_tcache_t *self = prd__mag_tls.mt_tc;
  pthread_mutex_lock(&mag_registry_lock);
  for (prd_tcache_t *tc = mag_threads; tc != NULL; tc = tc->tc_next) {
    if (tc == self)
      continue;
    if (atomic_load_explicit(&tc->tc_steal, memory_order_relaxed) != 0)
      atomic_store_explicit(&tc->tc_steal, 0, memory_order_relaxed);
    for (uint32_t id = 0; id < tc->tc_ncc; id++)
      if (atomic_load_explicit(&tc->tc_cc[id].cc_busy, memory_order_relaxed) != 0)
        atomic_store_explicit(&tc->tc_cc[id].cc_busy, 0, memory_order_relaxed);
    tc->tc_orphan = true;
    atomic_store_explicit(&mag_orphans, true, memory_order_relaxed);
  }
  pthread_mutex_unlock(&mag_registry_lock);
}

/* ---- initialization ------------------------------------------------------------------------- */
/* The magazine caches, one per row of mag_types (section 2): the front end makes them for the
 * first cache creation that wants magazines, and when that fails (no memory) the next creation
 * tries again from the rows still missing, so a failure is never remembered (a pthread_once
 * would remember it, or leave a row NULL for good).  No lock: two threads may race to make a
 * row; the first compare-and-swap publishes its cache and the other's is unmade, before either
 * is on the list of caches.  Memory ordering: each row's compare-and-swap (release) and the
 * store of mag_types_ready (release) pair with the acquire loads here and in
 * prd__mag_cache_init; a cache that has magazines was made after its creator saw every row,
 * and reaches other threads only through their own synchronization with that creator, so the
 * plain loads of mt_cache elsewhere see it. */
bool prd__mag_type_missing(size_t *row, char name[PRD_CACHE_NAME_MAX], size_t *size,
                           size_t *align)
{
  for (size_t i = 0; i < MAG_NTYPES; i++) {
    prd_magtype_t *mt = &mag_types[i];
    if (__atomic_load_n(&mt->mt_cache, __ATOMIC_ACQUIRE) != NULL)
      continue;
    int n = 0;
    const char *pfx = "prd_mag_";
    for (; pfx[n] != '\0'; n++)
      name[n] = pfx[n];
    char digits[12];
    int nd = 0;
    for (uint32_t v = mt->mt_magsize; v > 0; v /= 10)
      digits[nd++] = (char)('0' + v % 10);
    while (nd > 0)
      name[n++] = digits[--nd];
    name[n] = '\0';
    *row = i;
    *size = sizeof(prd_mag_t) + (size_t)mt->mt_magsize * sizeof(void *);
    *align = mt->mt_align;
    return true;
  }
  atomic_store_explicit(&mag_types_ready, true, memory_order_release);
  return false;
}

bool prd__mag_type_publish(size_t row, prd_cache_t *cp)
{
  prd_cache_t *none = NULL;
  return __atomic_compare_exchange_n(&mag_types[row].mt_cache, &none, cp, false,
                                     __ATOMIC_RELEASE, __ATOMIC_ACQUIRE);
}

static void mag_init_once(void)
{
  prd__maint_set_tick(mag_tick);
#if defined(PRD_ASAN)
  prd__mag_annot = 1;
#elif defined(PRD_VALGRIND)
  prd__mag_annot = RUNNING_ON_VALGRIND ? 1 : 0;
#endif
#ifndef PRD_TSAN
  /* the barrier is tried once too, before any owner relies on it: a seccomp filter may let
   * the query and the registration through and refuse the command (fence mode then) */
  if (prd__os_membarrier_register())
    prd__mag_membarrier = 1;
  prd__mag_plain = prd__mag_membarrier && !prd__mag_annot;
#else
  prd__mag_plain = !prd__mag_annot;   /* the hit paths use seq_cst accesses (section 6) */
#endif
}
