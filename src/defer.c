/*
 * defer.c: Prudence, deferred frees that the allocator sees (Prasad & Gopinath, "Prudent
 * Memory Reclamation in Procrastination-Based Synchronization", ASPLOS 2016: seed 001).
 *
 * 1. What.  prd_cache_free_deferred(cp, buf) is the turnkey replacement for call_rcu(free)
 *    (001 §4, Listing 2): buf is freed once a grace period has ended, but instead of a
 *    callback queued in the RCU layer, the allocator keeps the object and reuses it as soon
 *    as its grace period is over (001 §4.1: no extended object lifetimes, §3.2).  The cache
 *    keeps serving prd_cache_alloc/prd_cache_free alongside, on the magazine layer's hit path.
 *    PRD_CACHE_OBLIVIOUS caches (and debugging caches, whose checks need the exact life of
 *    each buffer) take the baseline path instead: prd_call_rcu with a head stored after the
 *    buffer (the rcu_head a kernel structure carries) and a callback that frees the buffer
 *    as prd_cache_free would, through the debug checks and the magazine layer (SLUB +
 *    call_rcu, 001 §5).
 *
 * 2. Data structures (001 §4.1, Fig. 4; PRUDENCE-NOTES §1-2).
 *    - The object cache of Algorithm 1 is the thread's CPU cache of the magazine layer
 *      (magazine.c, prd_cpu_cache_t): its loaded magazine, with the previous magazine and the
 *      depot behind it.  The latent cache lives in the same prd_cpu_cache_t, in its second
 *      cache line: two latent generations cc_lat[0] (older) and cc_lat[1] (open), each a
 *      magazine of the cache's magazine type holding cc_lat_n[g] deferred objects tagged with
 *      one prd_rcu_get_state() value cc_lat_gp[g].  cc_lat_n[0] + cc_lat_n[1] <= cc_lat_limit,
 *      the cache's magazine capacity (001 §4.1 / line 39: the latent-cache limit is the
 *      object-cache size).  A latent generation has the shape of the loaded magazine, so a
 *      safe one replaces an empty loaded magazine by a pointer exchange (lines 7-11).
 *    - Size.  Magazines start at libumem's size for the object size (magazine.c section 8)
 *      and the depot moves to the next size (prd__mag_grow) whenever an allocation miss has
 *      to refill from the slabs while half a magazine of latent objects or more still waits:
 *      the grace period outlasts what the cache holds, so the deferrals of one grace period
 *      would spill into the latent slabs (seed 004's resizing, by the grace-period latency
 *      instead of depot contention).  A few objects waiting say nothing of the kind: a class
 *      deferred slowly always has some at a miss, and grew at every miss (docs/benchmarks.md,
 *      "Open generations of classes deferred slowly").
 *      It grows while a magazine holds at most 512 KiB of objects, into rows past libumem's
 *      table (255 to 4095 rounds) that only this growth reaches (docs/benchmarks.md,
 *      "Magazine layer", measures both); with more than 32 threads holding magazines the
 *      limit is 16 MiB shared among them, and the cache steps back down as threads arrive
 *      (magazine.c section 8).
 *    - Per cache, the depot's latent list: the magazine layer's tagged magazines (magazine.c
 *      section 13, after FreeBSD UMA's SMR buckets, ANCHORS.md), whole latent generations,
 *      magazine and state, that a full latent cache or an exiting thread handed over, up to
 *      defer_depot_kb of objects (8 MiB by default: what two threads' deferrals of 4 KiB
 *      objects need over a grace period on a small machine, about half the 16 MiB
 *      latent-slab bound of defer_latent_max_kb).  The policy is this file's: which state is
 *      safe, the bound, the rule that waits rather than grows (section 4, REFILL).
 *    - Per slab, the latent slab (latent.c, on slab.c section 9): deferred buffers in two
 *      generations tagged with their states, recorded outside the buffers (readers may still
 *      read them).
 *    - A cache without magazines (PRD_CACHE_NOMAGAZINE, option magazines=0) or a thread past
 *      its magazines' destructor sends each deferral straight to the latent slabs.
 *
 * 3. The bound on waiting (PRUDENCE-NOTES §2).  A generation holds only objects
 *    deferred with the same state, so each object waits exactly for the grace period it
 *    needs, never for one that started after it was deferred (the flaw of Linux's rcu_free
 *    sheaf, ANCHORS.md).  Two generations suffice: rcu.c §4 makes get_state() at most one
 *    grace period past the one in progress, so at any instant at most two states are
 *    unsafe (s and s - 2).  In a CPU cache the states of one thread only grow (but in a fork
 *    child whose parent ran a liburcu source's synchronize: the child takes the sequence back
 *    by one, rcu.c §7, so the forking thread's next state may be below its newer
 *    generation's; rotation polls before it merges, and a merge stops at the first unsafe
 *    generation, so that costs time, never safety); when a
 *    deferral brings a third state g > gp[1] > gp[0], gp[0] <= g - 4 had ended when g was
 *    read, and is merged before the generations rotate.  In a latent slab the states come
 *    from several threads: the new state is polled before the two tags, so three
 *    unsafe answers would mean three unsafe states at the time of the first poll (slab.c
 *    lat_add).  test_defer checks the bound (bound_* tests).
 *    Open generations.  A state read must follow the retirer's unlink: while grace periods
 *    run without (W1) (rcu.c §3, the counted grace period, while readers run sections) that
 *    takes a full fence, which costs each deferral more than the rest of its hit path
 *    (docs/benchmarks.md, "Open generations").  So in that mode a deferral whose handshake is
 *    light (prd__mag_defer_light) reads no state: it pushes into the newer generation while
 *    that one's tag is PRD_LAT_OPEN (far above every state: never safe).  The generation
 *    closes on the slow path, when its magazine is full (the older one first makes room for
 *    it, merged if safe, else whole to the depot), or when a deferral finds the retirers no
 *    longer fencing: that path reads the state with the fence and makes it the tag (cc_seal),
 *    a read that follows every unlink of the generation in the thread's order, as a
 *    deferral's own read follows its unlink.  So every object waits for the grace period
 *    after its generation closes, up to a magazine of deferrals after its own: the cost of
 *    Linux's rcu_free sheaf (ANCHORS.md), paid only in this mode.  There it costs no reuse
 *    in practice: the grace periods are the ones the deferrals ask for, and they ask once per
 *    full generation (the fill sends it to the depot), so the state moved once per magazine
 *    of deferrals with exact tags too (docs/benchmarks.md).  Everything that reads a newer
 *    generation's tag off the hit path (a move to the depot or the latent slabs, a rotation,
 *    the refill's request at an allocation miss, a visitor) seals it first; a visitor's read
 *    follows the owner's unlinks through the handshake it holds (cc_seal).  The older
 *    generation is never open: rotation seals first; it may still be unsafe when the newer one
 *    closes, and then goes whole to the depot.
 *    The free mark, when a generation closes.  The free mark (magazine.c section 15) of an
 *    open generation's buffers is tested when it closes, all at once, not at each deferral
 *    (cc_mark_check): in this mode readers run sections, the buffer just unlinked is in their
 *    caches, and each test waited for another core.  So is every generation's on an external
 *    source (liburcu's flavours, rcu.c §6: prd__rcu_source_external), whose readers this
 *    library does not see: a program takes such a source for its readers, and there the
 *    test at each deferral waited for their cores as well (docs/benchmarks.md, "The
 *    deferral's test of the mark on an external source").  The newer generation's objects from
 *    cc_lat_checked on are the ones not tested yet; every path that takes them (a merge, a
 *    move to the depot or the latent slabs, a rotation, a visitor) seals the generation
 *    first, and the seal tests them.  A cache made with the option hardened tests at the
 *    call in every mode.
 *    How full an open generation gets before it closes adapts (cc_open_adapt): a class
 *    deferred slowly while other classes keep grace periods running filled a whole magazine
 *    (up to 4,095 objects) over many grace periods, so its objects waited long after theirs
 *    had ended, in every such class at once (docs/benchmarks.md, "Open generations of classes
 *    deferred slowly").  A generation open while two grace periods or more began makes the
 *    next close at half its count (PRD_LAT_TARGET_MIN at least); one full within less
 *    doubles the target back.  The hit path pushes below the target (cc_lat_stop) and the
 *    slow path closes at it (cc_open_full); a fast class, whose generations fill within a
 *    grace period, keeps whole magazines.
 *
 * 4. Algorithm 1, line by line.
 *    FREE_DEFERRED (lines 34-51): read the state (one load, rcu.c §4).  The hit path (in
 *      prd_cache_free_deferred, the handshake of magazine.h around it): when the open
 *      generation's tag is the state and it is below cc_lat_stop, the object is pushed
 *      (lines 39-40); cc_lat_stop is the room left under the limit.  If loaded + latent would
 *      overflow the limit after the grace period (line 41) a pre-flush is asked for (line 42,
 *      section 6); cc_lat_room, the limit less the older generation, makes that test one add
 *      and one compare.  Every check before it (the cache's flags, ownership, the free mark)
 *      is inline only for a cache with the free mark and neither debugging nor call_rcu: one
 *      flag test sends the others to an out-of-line front with the same checks.  Everything else is the slow path under tc_lock (defer_slow): a new state
 *      rotates the generations (section 3); a latent cache at its limit merges what is safe
 *      (line 46) and otherwise hands a whole generation to the depot's latent list (one lock,
 *      one pointer: cc_to_depot), or, past defer_depot_kb, moves it to the latent slabs under
 *      one hold of the slab lock (lines 49-51, a batch rather than one object: same place,
 *      1/limit of the lock traffic), where the slabs are pre-moved (lines 52-57, slab.c
 *      section 10).  Why the depot first: when a grace period outlasts a magazine of
 *      deferrals, the latent slabs would take the objects one by one both ways, where a
 *      tagged magazine goes and comes back whole (docs/benchmarks.md).  Line
 *      45's flush before the merge is not needed: a merge takes no room in the loaded
 *      magazine (it replaces an empty one, or goes to the previous one or the slabs).
 *    MALLOC (lines 1-12): the magazine layer's hit path pops the loaded magazine; its miss
 *      (prd__mag_alloc_miss) first exchanges a safe latent generation with the empty loaded
 *      magazine (lines 7-11, the hook mh_cc_merge: defer_cc_merge), then the previous
 *      magazine, the depot (a safe latent magazine of its latent list before a full one).
 *    REFILL (lines 13-30): a miss that finds the depot's latent magazines unsafe, holding
 *      half of defer_depot_kb or, with the latent slabs, 4/5 of the cache's objects (tag_wait,
 *      the hook mh_tag_wait: new objects would only wait beside them until the grace period
 *      ends), first works on the oldest one's grace period for defer_poll_us at most
 *      (depot_wait, the hook mh_depot_wait, section 9; magazine.c section 13: §3.4's bound
 *      paid as a short bounded wait before growth).  With the depot empty, or the wait over,
 *      a cache that has seen deferrals refills the loaded magazine from the slab layer with
 *      size - latent objects (line 14; at least 1: refill_size, under the hook mh_refill):
 *      the latent objects will fill the rest when their grace period ends.  The slab layer picks slabs with the deferred counts (lines 17-21, Fig. 5,
 *      slab.c lat_pick) under one lock.  The slab layer is called with tc_lock dropped (a
 *      constructor may allocate from its own cache, a sleeping allocation may reap), through
 *      the magazine layer (prd__mag_slab_take), which passes the thread's current slab as
 *      tier 4 does (magazine.c section 3, slab.c section 10): the refilled objects are the
 *      thread's, and another thread's objects never share their slab.
 *    OOM (lines 31-32): when the source is exhausted, the slab layer calls prd__defer_oom:
 *      the latent generations of every CPU cache are moved to latent slabs (try-locks only),
 *      the driver is asked to expedite the latest latent state, the caller polls it for
 *      defer_oom_wait_ms at most (section 9) and merges; PRD_NOSLEEP (and a caller inside a
 *      read-side section, whose poll could never succeed) merges only what is safe already;
 *      then the slab layer's own policy (reclaim, ENOMEM).  A refill that got nothing first
 *      polls for the thread's own older generation for defer_poll_us.
 *    FLUSH (001 §4.2 "Object cache flush"): a free that finds both magazines full sends the
 *      previous one to the depot, and also the loaded one when the thread's latent objects
 *      would fill half a magazine: they will be the next loaded magazine once safe, so the
 *      thread keeps room for them instead of a second full magazine.
 *    GRACE PERIODS (§3.4, PRUDENCE-NOTES §3): the built-in driver runs grace periods only when
 *      asked, so deferrals ask, each for exactly the state it needs: a generation when it
 *      closes or leaves the CPU cache (to the depot or the latent slabs); an allocation miss
 *      that finds only unsafe latent objects asks for the newest one's.  A CPU cache asks once
 *      per state (cc_lat_requested), so the driver is woken at most once per generation.
 *      Asking several grace periods ahead, or at half full as well, would keep the driver
 *      running back to back for grace periods no object waits for (their membarrier IPIs
 *      cost the deferrals more than an earlier end saves; docs/benchmarks.md).  While
 *      readers run sections a grace period needs no membarrier (rcu.c section 3), and the
 *      asking thread first moves it on itself, without waiting (gp_requests,
 *      prd__rcu_advance_try: the flip, one scan); the driver is asked only when that did not
 *      reach the state.
 *
 * 5. Counters (001 §5.4, Figs. 7-11), per CPU cache in cc_pcnt (PRD_PC_*: deferrals, merges,
 *    refills, flushes, partial refills, pre-flush moves, waits, resizes, objects handed to
 *    the depot whole), folded into the
 *    depot when the thread goes (dp_dead_pcnt) and summed by prd__mag_pcounts.  The object
 *    cache being the magazine layer, its hits are the magazine layer's, for every cache (the
 *    call_rcu baseline's too, as Fig. 7 sets SLUB's beside Prudence's): oc_misses =
 *    allocations that reached the slab layer (mag_slab_allocs), oc_hits = mag_allocs -
 *    oc_misses; churns = min(refills, flushes) of Prudence's refills and flushes (oc_churns),
 *    and for every mode of the magazine layer's exchanges with the slab layer (slab_oc_churns,
 *    counted in magazine.c: the baseline has no Prudence refills to count).  Inline waits by
 *    kind: latent_cap_waits, depot_gp_waits, oom_gp_waits, summed in gp_waits.  Objects: oc_objs =
 *    the loaded magazines of CPU caches with latent generations, thread_cache_objs = every
 *    other magazine round of the threads, latent_cache_objs = the latent generations,
 *    latent_depot_objs = the depot's latent magazines, so bufs_inuse = user + oc_objs +
 *    latent_cache_objs + latent_slab_objs + latent_depot_objs + thread_cache_objs +
 *    depot_rounds (test_defer check_counts).  The latent-slab counters live in the cache.
 *
 * 6. Pre-flush (lines 41-43, 001 §4.2 "Latent cache pre-flush").  A CPU cache whose loaded
 *    magazine and latent generations together exceed the limit sets cc_want_preflush; the
 *    first such request since the job last ran wakes the maintenance thread (prd__maint_wake,
 *    maint.c, after the deferral has left its CPU cache): the maintenance thread is our
 *    idle-time worker (PRUDENCE-NOTES §4).  Its job (preflush_job, prd__maint_register) visits
 *    every CPU cache through the handshake (prd__mag_visit, try-locks: a CPU cache in use is
 *    skipped, its owner is not idle, and the job looks again at the thread's next wake-up,
 *    never spinning on it),
 *    merges what is safe, then moves the newest latent objects to their latent slabs until
 *    the sum fits.  Rate-adaptive from the CPU cache's allocations and deferrals since its
 *    last pre-flush: when allocation is slower than deferral, the whole excess moves at once;
 *    when faster, half of it, and the job yields afterwards (the loaded magazine empties by
 *    itself).  It merges again after moving, so a grace period that ended meanwhile is used.
 *    The hit path asks only while its flag is clear; the slow path asks again while the job
 *    has nothing pending, so a request whose job never came is not lost for good (a fork
 *    child of a maintenance thread cut between taking pf_pending and its visit).
 *
 * 7. The magazine layer's hooks, and taking a thread's magazines.  At its first deferral to a
 *    cache with magazines (defer_init_once) this file registers the pre-flush job with
 *    maint.c and its hooks with the magazine layer (prd__mag_set_hooks, defer_hooks;
 *    magazine.c section 14), which calls them only on its slow paths: defer_cc_merge,
 *    tag_safe, tag_wait, depot_wait, defer_refill (section 4), cc_drain, tag_out (below) and
 *    gp_requests (section 8).  Every path of the magazine layer that empties a CPU cache
 *    (cc_empty: reap and idle steal, thread exit, prd_thread_flush, cache destroy, the fork
 *    child taking over dead threads) calls cc_drain, which hands the latent generations
 *    whole to the depot's latent list, or past its bound moves them with their states to the
 *    latent slabs and frees their magazines; an unsafe tagged magazine that leaves the depot
 *    goes to the latent slabs with its state (tag_out).  The OOM path and destroy move the
 *    generations to the latent slabs through prd__mag_visit, and the depot's latent
 *    magazines with them (prd__mag_lat_out).  Nothing is reused early (a latent magazine or
 *    latent slab generation is merged only when its state is safe), nothing is lost.
 *
 * 8. Locking and memory ordering.  One handshake for magazines and latent generations
 *    (magazine.c section 6): the deferral hit path enters and leaves the CPU cache with the
 *    same primitive as the magazine hit paths (magazine.h prd__mag_enter / prd__mag_exit:
 *    busy store, barrier, steal test, and only then its loads of the latent cache).  Its
 *    barrier is also the RCU layer's reader barrier before the load of the state (rcu.c §4,
 *    R1 kind: the caller's unlink before the load, paired with (W1)), so the state is read
 *    after the enter: prd__mag_enter_light with prd__mag_defer_light makes it a compiler
 *    barrier when both the handshake and the readers rely on membarrier, else a full fence
 *    that serves both (under TSan the reader barrier is made on its own); the slow path reads
 *    the state with a reader barrier of its own.  While the retirers fence (rcu.c §3) a light
 *    handshake stays light and its state only decides whether the open generation takes the
 *    object (section 3, "Open generations"); the fenced read is the one that seals the
 *    generation, on the slow path or a visitor's.  The
 *    slow path and every visitor hold the thread's tc_lock.  Order: mag_reap_lock
 *    -> mag_registry_lock -> tc_lock -> dp_lock / cache_lock (magazine.c section 12); the
 *    maintenance thread is woken with no lock held.  The RCU layer's fork handler takes its
 *    locks before the magazine layer's, so its driver must never be called under a magazine
 *    lock: a grace period to ask for under one is noted in a thread-local (req_later) and
 *    asked for by gp_requests once the locks are dropped (the slow paths, the visitors'
 *    callers, and the magazine layer through mh_unlocked after each reap, flush, exit and
 *    destroy; a fork child leaves it for the thread's next slow path).  The hit path writes
 *    the open generation's round before the count (both relaxed: only the owner or a visitor
 *    holding the handshake reads the round; the visitor's acquire of cc_busy == 0 pairs with
 *    the owner's release in prd__mag_exit).  cc_lat_n is atomic only so that statistics may
 *    read it under tc_lock alone.  cache_defer_on is set with a release fetch-or at the first
 *    deferral and read relaxed by the refill decision and the statistics (a thread that
 *    misses the bit refills one object at a time, which stays correct).  The grace-period
 *    state itself carries the RCU ordering: prd__defer_safe() is an acquire load that pairs
 *    with the release store ending the grace period (rcu.c §4), so a merge that sees a
 *    generation safe is ordered after every reader that could have seen its objects.
 *
 * 9. No allocation waits for readers, and none changes the caller's RCU state (rcu.c §9).
 *    Algorithm 1 waits in two places (the kernel's line 32, and §3.4's bound on memory): in
 *    user space the allocating thread may hold a lock that readers take inside their
 *    read-side sections, so a grace period awaited there would wait for a reader that waits
 *    for the allocation (a deadlock), and under a QSBR source the wait would have to take the
 *    caller offline, letting objects it still references be reused.  So every wait of this
 *    file and of magazine.c section 13 is prd__rcu_poll_bounded: for a bounded time, the
 *    built-in grace period's steps run on this thread (each wait for readers stopping at the
 *    deadline) or the state polled after an expedited request; no quiescent state or offline
 *    period of the source.  The steady-state throttles (the depot's latent rule,
 *    defer_latent_max_kb, a refill that got nothing) allow defer_poll_us (1 ms: a grace
 *    period without readers takes tens of microseconds, but on a loaded machine the thread
 *    running it, or another holding gp_lock, is preempted for longer, and shorter bounds let
 *    the cache grow under `prd-bench endurance`: docs/benchmarks.md; with a QSBR source no
 *    poll at all, see poll_short) and otherwise let the cache grow: the memory bound holds
 *    while grace periods come and is exceeded, never waited for, while a reader holds one
 *    open.  Out of memory the bound is
 *    defer_oom_wait_ms (100 ms: long beside a grace period, short beside a program that would
 *    otherwise hang), then the allocation fails with ENOMEM (prd_malloc: NULL and ENOMEM).
 *    Nothing else waits: the deferral paths never wait, and prd_cache_destroy, which may wait,
 *    is not an allocation.  test_defer_nowait and test_rcu_urcu (QSBR) check the rule.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "annotate.h"
#include "internal.h"
#include "magazine.h"
#include "pagemap.h"

#define PRD_DEFER_REFILL_MAX 1023   /* objects one refill takes from the slab layer */
/* The tag of an open generation (section 3, "Open generations"): far above every state, so
 * never safe and never a state a deferral reads. */
#define PRD_LAT_OPEN UINT64_MAX
#define DEFER_REFILL_CHUNK 128u     /* ... at a time, through a stack array (1 KiB) */
/* A thread's first refill of a cache takes DEFER_REFILL_FIRST objects, and each one after
 * twice as many, DEFER_REFILL_RAMP times, before the magazine's size alone decides (section
 * 8, REFILL).  A short-lived thread (a pool's worker, a thread per request) that defers a few
 * hundred objects otherwise took a whole magazine (up to 512 KiB of objects) of every class
 * it touched at its first miss, and a few hundred such threads at once held all of them:
 * docs/benchmarks.md, "Threads that come and go, deferring". */
#define DEFER_REFILL_FIRST 16u
#define DEFER_REFILL_RAMP 6

static pthread_once_t defer_once = PTHREAD_ONCE_INIT;
static _Atomic int pf_pending;   /* a CPU cache asked for a pre-flush since the job last ran */
/* The latest state this thread must ask the driver for once it holds no lock of the magazine
 * layer (section 8: the RCU layer's fork handler takes its locks before ours). */
static _Thread_local prd_gp_t defer_req;

static void preflush_job(void *arg);
static const struct prd__mag_hooks defer_hooks;

/* At the first deferral to a cache with latent generations: the pre-flush job and the
 * magazine layer's hooks (section 7), before any latent generation exists. */
static void defer_init_once(void)
{
  (void)prd__maint_register(preflush_job, NULL, NULL, false);
  prd__mag_set_hooks(&defer_hooks);
  /* the grace-period source fixed before the first latent generation: whether it is an
   * external one decides where its buffers' mark is tested (section 3), and a source named
   * by the option alone would otherwise be fixed only at the first grace period */
  (void)prd_rcu_get_source();
}

/* ---- one CPU cache's latent generations (tc_lock held, or the owner inside its handshake) - */
static inline uint32_t lat_n(const prd_cpu_cache_t *cc, int g)
{
  return atomic_load_explicit(&cc->cc_lat_n[g], memory_order_relaxed);
}

static inline void lat_set(prd_cpu_cache_t *cc, int g, uint32_t n)
{
  atomic_store_explicit(&cc->cc_lat_n[g], n, memory_order_relaxed);
  if (g == 1 && cc->cc_lat_checked > n)
    cc->cc_lat_checked = n;
}

/* A counter of cc: written by the owner or under tc_lock while the owner is out (section 5). */
static inline void cc_count(prd_cpu_cache_t *cc, int i, uint64_t k)
{
  atomic_store_explicit(&cc->cc_pcnt[i],
                        atomic_load_explicit(&cc->cc_pcnt[i], memory_order_relaxed) + k,
                        memory_order_relaxed);
}

/* Section 3, "Open generations": the count at which the open generation closes, its
 * magazine's size or the adapted target below it (cc_open_adapt). */
#define PRD_LAT_TARGET_MIN 32u
static inline uint32_t lat1_size(const prd_cpu_cache_t *cc)
{
  return cc->cc_lat[1] != NULL ? cc->cc_lat[1]->mag_size : 0;
}

static inline uint32_t open_cap(const prd_cpu_cache_t *cc)
{
  uint32_t size = lat1_size(cc);
  uint32_t t = cc->cc_lat_target;
  return t != 0 && t < size ? t : size;
}

/* An open generation closes on state gp (cc_seal, defer_slow): the count at which the next
 * one closes follows how long this one stayed open.  Open while two grace periods or more
 * began, its first objects waited for grace periods that had ended while it filled, held for
 * nothing (a class deferred slowly among others that keep grace periods running): the next
 * one closes at half this one's count, PRD_LAT_TARGET_MIN at least.  Full within less, the
 * target doubles back towards the magazine's size.  tc_lock held, or the owner. */
static void cc_open_adapt(prd_cpu_cache_t *cc, prd_gp_t gp)
{
  uint32_t n = lat_n(cc, 1), cap = open_cap(cc), size = lat1_size(cc);
  uint32_t began = ((uint32_t)gp - cc->cc_lat_opened) / 2;   /* states move by 2 */
  if (began >= 2)
    cc->cc_lat_target = PRD_MAX(PRD_LAT_TARGET_MIN, n / 2);
  else if (n >= cap && cc->cc_lat_target != 0)
    cc->cc_lat_target = cap >= size / 2 ? 0 : cap * 2;
}

/* Notes state gp for gp_requests, which asks the driver once no lock is held. */
static inline void req_later(prd_gp_t gp)
{
  PRD_ASSERT(gp != PRD_LAT_OPEN);   /* sealed first (cc_seal) */
  if (gp > defer_req)
    defer_req = gp;
}

/* mh_unlocked (no lock held): the grace period noted under locks, moved on by this thread
 * while that costs no wait (prd__rcu_advance_try), else asked of the driver. */
static void gp_requests(void)
{
  prd_gp_t gp = defer_req;
  if (gp != 0) {
    defer_req = 0;
    if (!prd__rcu_advance_try(gp))
      prd__rcu_request_gp(gp);
  }
}

/* Asks the driver for the grace period of state gp (section 4): once per state. */
static inline void cc_request(prd_cpu_cache_t *cc, prd_gp_t gp)
{
  if (gp > cc->cc_lat_requested) {
    cc->cc_lat_requested = gp;
    req_later(gp);
  }
}

/* Section 3, "The free mark, when a generation closes": the free mark of the newer
 * generation's objects not tested yet (from cc_lat_checked), tested when it closes.  The hit
 * path does not test it while readers are taken to run sections (an open generation, or any
 * generation on an external source): the buffer it defers was just unlinked, and its first
 * line, where a small buffer's mark is, is then in the readers' caches, so the test's load
 * waited for another core at every deferral, and the caller's next locked instruction (its
 * next unlink's exchange) waited for that load (docs/benchmarks.md, "The deferral's test of
 * the mark, once a generation").  Here the loads are independent of each other and overlap.
 * A buffer that carries the mark was free when it was deferred (or was freed after its
 * deferral): reported as at the call and dropped from the generation; one whose memory is no
 * longer a buffer of cp was free too, its slab given back since: reported and dropped without
 * reading it.  Not found, as docs/api.md says: a freed buffer handed out again between its
 * deferral and this test (it carries no mark), and one whose slab was given back and made
 * again at the same place meanwhile, in the large layout, whose new slabs mark nothing.  A
 * buffer tested at the call is tested again here, which finds nothing new.  tc_lock held, or
 * the owner out of its hit path. */
static void cc_mark_check(prd_cache_t *cp, prd_cpu_cache_t *cc)
{
  uint32_t n = lat_n(cc, 1), k = cc->cc_lat_checked, off = cp->cache_mark_off;
  if (k >= n || (cp->cache_flags & PRD_CF_NOMARK))
    return;
  prd_mag_t *mp = cc->cc_lat[1];
  for (uint32_t i = k; i < n; i++) {
    void *o = mp->mag_round[i];
    if (prd_unlikely(!prd__pm_owns(cp, o) || prd__mark_test(o, off))) {
      prd__mag_double_free(cp, o, "deferred free");
      continue;
    }
    mp->mag_round[k++] = o;
  }
  if (k != n) {   /* not deferred after all: the count as if refused at the call */
    cc_count(cc, PRD_PC_DEFERRED, (uint64_t)k - n);
    lat_set(cc, 1, k);
  }
  cc->cc_lat_checked = k;
}

/* The open generation closes on state gp, read after its every deferral (cc_seal, and
 * defer_slow with its own read): the next one's target, the buffers' free mark, the tag. */
static void cc_close_open(prd_cache_t *cp, prd_cpu_cache_t *cc, prd_gp_t gp)
{
  cc_open_adapt(cc, gp);
  cc_mark_check(cp, cc);
  cc->cc_lat_gp[1] = gp;
}

/* Section 3, "Open generations": the newer generation's state, read now if its tag is still
 * PRD_LAT_OPEN, before anything reads it (tc_lock held, the owner out of its hit path, or
 * the owner itself).  Every deferral it holds came before this read: the owner's in its
 * program order; for a visitor, the owner's release of the handshake that the visitor
 * acquired orders them before it (section 8).  prd__rcu_get_state makes the retirer's
 * barrier (the fence while grace periods run without (W1)), so the state covers them as it
 * covers a deferral's own unlink.  The buffers' free mark is tested first (cc_mark_check),
 * read in the same order after the owner's pushes, as the hit path would have read it; on
 * an external source, an exact generation's untested buffers are tested the same way. */
static void cc_seal(prd_cache_t *cp, prd_cpu_cache_t *cc)
{
  if (lat_n(cc, 1) == 0)
    return;
  if (cc->cc_lat_gp[1] == PRD_LAT_OPEN)
    cc_close_open(cp, cc, prd__rcu_get_state());
  else if (prd__rcu_source_external())
    cc_mark_check(cp, cc);
}

/* Recomputes where the deferral hit path stops (section 4): the room under the limit in the
 * open generation. */
static void cc_restop(prd_cpu_cache_t *cc)
{
  uint32_t stop = 0;
  prd_mag_t *mp = cc->cc_lat[1];
  if (mp != NULL) {
    uint32_t n0 = lat_n(cc, 0);
    uint32_t room = cc->cc_lat_limit > n0 ? cc->cc_lat_limit - n0 : 0;
    stop = PRD_MIN(room, mp->mag_size);
    if (cc->cc_lat_gp[1] == PRD_LAT_OPEN)
      stop = PRD_MIN(stop, open_cap(cc));
  }
  cc->cc_lat_stop = stop;
  cc->cc_lat_room = cc->cc_lat_limit > lat_n(cc, 0) ? cc->cc_lat_limit - lat_n(cc, 0) : 0;
}

/* Objects that become free in a magazine: inaccessible to ASan/valgrind (magazine.c §4). */
static void cc_annot_in(prd_cache_t *cp, void *const *objs, uint32_t n)
{
  if (prd_unlikely(prd__mag_annot))
    for (uint32_t i = 0; i < n; i++)
      prd__annot_object_in(cp, objs[i]);
}

/* MERGE_CACHES (lines 60-65) for one safe generation g: its objects join the thread's safe
 * objects, by pointer exchange with an empty loaded magazine, by copy into the loaded one
 * when they fit, as the previous magazine when full and the previous is empty; otherwise they
 * are freed to the slab layer (one lock).  The generation is left empty. */
static void cc_merge_gen(prd_cache_t *cp, prd_cpu_cache_t *cc, int g)
{
  PRD_RACE();   /* race widening (race.h): a latent transition */
  if (g == 1)
    cc_seal(cp, cc);
  prd_mag_t *mp = cc->cc_lat[g];
  uint32_t n = lat_n(cc, g);
  if (n == 0)
    return;
  cc_count(cc, PRD_PC_MERGES, n);
  n = prd__mark_merge(cp, mp->mag_round, n);   /* free now: the mark (magazine.c section 15) */
  uint32_t r = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
  if (r == 0) {   /* PRUDENCE-NOTES §2: a whole batch by pointer exchange */
    cc_annot_in(cp, mp->mag_round, n);
    cc->cc_lat[g] = cc->cc_loaded;   /* empty, or NULL */
    cc->cc_loaded = mp;
    cc->cc_magsize = mp->mag_size;
    prd__mag_rounds_set(cc, n);
  } else if (r + n <= cc->cc_magsize) {
    cc_annot_in(cp, mp->mag_round, n);
    memcpy(&cc->cc_loaded->mag_round[r], mp->mag_round, n * sizeof(void *));
    prd__mag_rounds_set(cc, r + n);
  } else if (n == mp->mag_size && cc->cc_prounds == 0) {   /* (n: a full one, none dropped) */
    cc_annot_in(cp, mp->mag_round, n);
    cc->cc_lat[g] = cc->cc_previous;   /* empty, or NULL */
    cc->cc_previous = mp;
    cc->cc_prounds = n;
  } else {
    prd__slab_free_bulk(cp, mp->mag_round, n);
    cc_count(cc, PRD_PC_FLUSHES, 1);
    atomic_fetch_add_explicit(&cp->cache_slab_flushes, 1, memory_order_relaxed);   /* Fig. 8 */
  }
  lat_set(cc, g, 0);
}

/* Safe generations merge, the older first (if it is not safe, the newer is not either). */
static void cc_merge_safe(prd_cache_t *cp, prd_cpu_cache_t *cc)
{
  for (int g = 0; g < 2; g++) {
    if (lat_n(cc, g) == 0)
      continue;
    if (!prd__defer_safe(cc->cc_lat_gp[g]))
      break;
    cc_merge_gen(cp, cc, g);
  }
}

/* Moves the newest k objects of generation g to the latent slabs, with its state; its grace
 * period is asked for once the caller holds no lock (req_later). */
static void cc_to_slabs(prd_cache_t *cp, prd_cpu_cache_t *cc, int g, uint32_t k)
{
  PRD_RACE();   /* race widening (race.h): a latent transition */
  if (g == 1)
    cc_seal(cp, cc);
  uint32_t n = lat_n(cc, g);
  k = PRD_MIN(k, n);
  if (k == 0)
    return;
  req_later(cc->cc_lat_gp[g]);
  (void)prd__slab_defer_bulk(cp, cc->cc_lat[g]->mag_round + (n - k), k, cc->cc_lat_gp[g]);
  lat_set(cc, g, n - k);
}

/* Hands generation g whole to the depot's latent list with its state (magazine.c section 13):
 * O(1) where the latent slabs take object by object.  True when the depot took it; the
 * generation then holds an empty magazine from the depot (if `refill` and one was there) or
 * none, and its grace period is asked for once the caller holds no lock. */
static bool cc_to_depot(prd_cache_t *cp, prd_cpu_cache_t *cc, int g, bool refill)
{
  PRD_RACE();   /* race widening (race.h): a latent transition */
  if (g == 1)
    cc_seal(cp, cc);
  uint32_t n = lat_n(cc, g);
  prd_mag_t *empty = NULL;
  uint64_t cap = (uint64_t)prd__opt(defer_depot_kb) * 1024;   /* the depot list's bound */
  if (n == 0 ||
      !prd__mag_lat_put(cp, cc->cc_lat[g], n, cc->cc_lat_gp[g], cap, refill ? &empty : NULL))
    return false;
  req_later(cc->cc_lat_gp[g]);
  cc->cc_lat[g] = empty;
  lat_set(cc, g, 0);
  cc_count(cc, PRD_PC_TODEPOT, n);
  return true;
}

/* mh_tag_out: an unsafe tagged magazine of the depot to the latent slabs with its state, the
 * magazine freed (section 7); its grace period is asked for once no lock is held. */
static void tag_out(prd_cache_t *cp, prd_mag_t *mp)
{
  PRD_RACE();   /* race widening (race.h): a latent transition */
  req_later(mp->mag_gp);
  (void)prd__slab_defer_bulk(cp, mp->mag_round, mp->mag_nlat, mp->mag_gp);
  prd__mag_free_empty(mp);
}

/* The older generation leaves the CPU cache: merged if safe, else whole to the depot's latent
 * list, else to the latent slabs with its state. */
static void cc_older_out(prd_cache_t *cp, prd_cpu_cache_t *cc)
{
  if (lat_n(cc, 0) == 0)
    return;
  if (prd__defer_safe(cc->cc_lat_gp[0]))
    cc_merge_gen(cp, cc, 0);
  else if (!cc_to_depot(cp, cc, 0, true))
    cc_to_slabs(cp, cc, 0, lat_n(cc, 0));
}

/* A deferral brings a new state while the open generation holds objects (section 3): the
 * open generation closes (its grace period is asked for), the older one, safe by section 3,
 * merges, and the generations rotate.  The new open generation gets a magazine of the
 * current size (an emptied one of an outgrown size is given back); it may be left NULL when
 * none can be had. */
static void cc_rotate(prd_cache_t *cp, prd_cpu_cache_t *cc)
{
  PRD_RACE();   /* race widening (race.h): a latent transition */
  cc_seal(cp, cc);
  cc_request(cc, cc->cc_lat_gp[1]);
  /* unsafe only after an open generation (section 3), else by section 3 unreachable */
  cc_older_out(cp, cc);
  prd_mag_t *t = cc->cc_lat[0];
  cc->cc_lat[0] = cc->cc_lat[1];
  cc->cc_lat_gp[0] = cc->cc_lat_gp[1];
  lat_set(cc, 0, lat_n(cc, 1));
  cc->cc_lat[1] = t;
  lat_set(cc, 1, 0);
  cc->cc_lat_limit = prd__mag_cur_size(cp);
  if (t != NULL && t->mag_size < cc->cc_lat_limit) {
    prd__mag_free_empty(t);
    cc->cc_lat[1] = NULL;
  }
}

/* ---- the magazine layer's hooks (magazine.h; tc_lock held, the owner out of its operations) */
/* mh_cc_merge, lines 7-11: the loaded magazine is empty; a safe latent generation takes its
 * place. */
static bool defer_cc_merge(prd_cache_t *cp, prd_cpu_cache_t *cc)
{
  for (int g = 0; g < 2; g++) {   /* lines 7-11: the older generation first */
    if (lat_n(cc, g) == 0)
      continue;
    if (!prd__defer_safe(cc->cc_lat_gp[g]))
      break;
    cc_merge_gen(cp, cc, g);   /* the loaded magazine is empty: a pointer exchange */
    cc_restop(cc);
    return atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed) != 0;
  }
  return false;
}

/* Both generations to the latent slabs; the magazines stay (OOM, destroy). */
static void cc_latent_out(prd_cache_t *cp, prd_cpu_cache_t *cc, void *arg)
{
  (void)arg;
  cc_to_slabs(cp, cc, 0, lat_n(cc, 0));
  cc_to_slabs(cp, cc, 1, lat_n(cc, 1));
  cc_restop(cc);
}

/* mh_cc_drain (section 7): whole generations to the depot's list while it has room, the rest
 * to the latent slabs; the latent cache is left empty. */
static void cc_drain(prd_cache_t *cp, prd_cpu_cache_t *cc)
{
  for (int g = 0; g < 2; g++)   /* whole generations to the depot while it has room */
    (void)cc_to_depot(cp, cc, g, false);
  cc_latent_out(cp, cc, NULL);
  for (int g = 0; g < 2; g++)
    if (cc->cc_lat[g] != NULL) {
      prd__mag_free_empty(cc->cc_lat[g]);
      cc->cc_lat[g] = NULL;
    }
  cc->cc_lat_stop = 0;
  cc->cc_lat_room = 0;
  cc->cc_lat_limit = 0;
  cc->cc_lat_gp[0] = cc->cc_lat_gp[1] = 0;
  cc->cc_lat_requested = 0;   /* the id may serve another cache later: ask afresh */
  cc->cc_lat_target = 0;
  atomic_store_explicit(&cc->cc_want_preflush, 0, memory_order_relaxed);
}

/* The refill size (line 14: size less the latent count, at least 1), asking for the latent
 * objects' grace period; *waiting: half a magazine of latent objects or more still waits
 * (section 2: the magazine grows). */
static uint32_t refill_size(prd_cache_t *cp, prd_cpu_cache_t *cc, bool *waiting)
{
  cc_seal(cp, cc);
  uint32_t lat = prd__mag_latent(cc);
  uint32_t size = prd__mag_cur_size(cp);
  if (cc->cc_loaded != NULL && cc->cc_loaded->mag_size > size)
    size = cc->cc_loaded->mag_size;
  *waiting = lat != 0 && lat >= size / 2;
  if (lat != 0)   /* the objects that would have served this miss: their grace period */
    cc_request(cc, cc->cc_lat_gp[lat_n(cc, 1) != 0 ? 1 : 0]);
  uint32_t want = size > lat ? size - lat : 1;   /* line 14 */
  if (want < size)
    cc_count(cc, PRD_PC_PARTIAL, 1);   /* the latent objects' share (partial_refills) */
  /* a thread's first refills of this cache take DEFER_REFILL_FIRST objects, twice as many at
   * each refill after (the CPU cache's count starts at 0 with each thread) */
  uint64_t nref = atomic_load_explicit(&cc->cc_pcnt[PRD_PC_REFILLS], memory_order_relaxed);
  uint32_t ramp = DEFER_REFILL_FIRST << (nref < DEFER_REFILL_RAMP ? nref : DEFER_REFILL_RAMP);
  return PRD_MIN(PRD_MIN(want, ramp), (uint32_t)PRD_DEFER_REFILL_MAX);
}

static bool in_read_section(void)
{
  const struct prd_rcu_source *src = prd_rcu_get_source();
  return src->rs_read_ongoing != NULL && src->rs_read_ongoing() != 0;
}

/* The steady-state throttles' wait (section 9): state s within defer_poll_us at most.  A
 * source that holds every grace period for its online threads (rs_block_begin set: QSBR)
 * cannot end one while the caller, online as a rule, polls, and nothing here may take it
 * offline: ask, look once, and grow. */
static bool poll_short(prd_gp_t s)
{
  uint64_t ns = prd_rcu_get_source()->rs_block_begin != NULL
                    ? 0 : (uint64_t)prd__opt(defer_poll_us) * 1000;
  return prd__rcu_poll_bounded(s, ns);
}

/* mh_tag_safe: a tagged magazine's state (section 8: the acquire load ending the wait). */
static bool tag_safe(prd_gp_t gp)
{
  return prd__defer_safe(gp);
}

/* mh_tag_wait, the depot rule (section 4, REFILL): an allocation miss that found no safe
 * tagged magazine and no full one waits for the oldest one's grace period rather than grow
 * the cache when the depot's list holds half its bound (defer_depot_kb), or when the list and
 * the latent slabs together hold DEPOT_POP of the cache's objects: new objects would only
 * wait beside them until the grace period ends.  dp_lock held; the slab layer's counts are
 * read without its lock (relaxed atomics, stored under it). */
#define DEPOT_POP_NUM 4
#define DEPOT_POP_DEN 5
static bool tag_wait(prd_cache_t *cp, uint64_t tag_rounds)
{
  uint64_t total = __atomic_load_n(&cp->cache_bufs_total, __ATOMIC_RELAXED);
  uint64_t lat_slab = __atomic_load_n(&cp->cache_lat_slab_objs, __ATOMIC_RELAXED);
  return 2 * tag_rounds * cp->cache_chunksize >= (uint64_t)prd__opt(defer_depot_kb) * 1024 ||
         DEPOT_POP_DEN * (tag_rounds + lat_slab) >= DEPOT_POP_NUM * total;
}

/* mh_depot_wait: the depot rule's wait, the oldest tagged magazine's grace period polled for
 * defer_poll_us at most (section 9), unless flags has PRD_NOSLEEP or the thread is inside a
 * read-side section.  No lock held. */
static bool depot_wait(uint32_t id, prd_gp_t gp, int flags)
{
  if ((flags & PRD_NOSLEEP) || in_read_section())
    return false;
  bool safe = poll_short(gp);
  prd_tcache_t *tc = prd__mag_here();
  pthread_mutex_lock(&tc->tc_lock);   /* the counters of cc: the owner under tc_lock (§5) */
  cc_count(&tc->tc_cc[id], PRD_PC_DEPOTWAITS, 1);
  pthread_mutex_unlock(&tc->tc_lock);
  return safe;
}

/* Pops the loaded magazine after a merge (tc_lock held), NULL when it is empty. */
static void *cc_pop(prd_cache_t *cp, prd_cpu_cache_t *cc)
{
  uint32_t r = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
  if (r == 0)
    return NULL;
  void *buf = cc->cc_loaded->mag_round[r - 1];
  prd__mag_rounds_set(cc, r - 1);
  if (prd_unlikely(prd__mag_annot))
    prd__mag_annot_out(cp, buf);
  return buf;
}

static void *refill(prd_cache_t *cp, uint32_t id, int flags, uint32_t want, bool waiting)
{
  /* the CPU caches may be remapped by a nested call (a constructor allocating from another
   * cache): &tc->tc_cc[id] is taken afresh after each call out */
  prd_tcache_t *tc = prd__mag_here();
  gp_requests();   /* refill_size's, made under tc_lock */
  if (waiting && prd__mag_grow(cp))   /* section 2: the grace period outlasts the magazine */
    cc_count(&tc->tc_cc[id], PRD_PC_RESIZES, 1);
  /* §3.4, bounded memory: past defer_latent_max_kb of latent-slab objects a refill asks for
   * their grace period expedited and polls it for defer_poll_us before it grows the cache
   * (section 9: never longer, the grace period may be waiting for this caller) */
  long cap_kb = prd__opt(defer_latent_max_kb);
  if (cap_kb > 0 && !(flags & PRD_NOSLEEP)) {
    prd_gp_t maxgp;
    uint64_t n = prd__slab_lat_pending(cp, &maxgp);
    if (n * cp->cache_chunksize > (uint64_t)cap_kb * 1024 && !prd__defer_safe(maxgp) &&
        !in_read_section()) {
      (void)poll_short(maxgp);
      cc_count(&tc->tc_cc[id], PRD_PC_CAPWAITS, 1);
    }
  }
  /* taken DEFER_REFILL_CHUNK objects at a time: a whole magazine's array on the stack (8 KiB
   * for 1,023 rounds) would overflow a small thread stack or a signal handler's alternate
   * stack, on which a plain allocation's miss fits */
  void *objs[DEFER_REFILL_CHUNK];
  size_t ask = PRD_MIN(want, DEFER_REFILL_CHUNK);
  size_t got = prd__mag_slab_take(cp, tc, objs, ask, flags | PRD_NOSLEEP);
  if (got == 0 && !(flags & PRD_NOSLEEP) && !in_read_section()) {
    /* lines 31-32 for this thread's own latent objects: poll for the older generation
     * (section 9); the slab layer's out-of-memory path below polls longer for everyone's */
    pthread_mutex_lock(&tc->tc_lock);
    prd_cpu_cache_t *cc = &tc->tc_cc[id];
    cc_seal(cp, cc);
    int g = lat_n(cc, 0) != 0 ? 0 : lat_n(cc, 1) != 0 ? 1 : -1;
    prd_gp_t wgp = g >= 0 ? cc->cc_lat_gp[g] : 0;
    pthread_mutex_unlock(&tc->tc_lock);
    if (g >= 0) {
      (void)poll_short(wgp);   /* the merge below takes the generation only if it is safe */
      pthread_mutex_lock(&tc->tc_lock);
      cc = &tc->tc_cc[id];
      cc_count(cc, PRD_PC_OOMWAITS, 1);
      void *buf = NULL;
      if (atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed) != 0 ||
          defer_cc_merge(cp, cc))
        buf = cc_pop(cp, cc);
      pthread_mutex_unlock(&tc->tc_lock);
      if (buf != NULL)
        return buf;
    }
  }
  if (got == 0)   /* the slab layer's own policy: reclaim, other latent objects, nofail */
    return prd__slab_alloc(cp, flags);
  uint32_t more = got < ask ? 0 : want - (uint32_t)got;   /* still wanted after this chunk */
  void *buf = objs[--got];
  for (bool first = true;; first = false) {
    pthread_mutex_lock(&tc->tc_lock);
    prd_cpu_cache_t *cc = &tc->tc_cc[id];
    if (first)
      cc_count(cc, PRD_PC_REFILLS, 1);
    uint32_t k = 0;
    if (got != 0) {
      uint32_t r = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed);
      if (cc->cc_loaded == NULL ||
          (first && r == 0 && cc->cc_loaded->mag_size < (uint32_t)got + more)) {
        prd_mag_t *mp = prd__mag_new(cp);   /* a magazine of the current size */
        if (mp != NULL) {
          if (cc->cc_loaded != NULL)
            prd__mag_free_empty(cc->cc_loaded);
          cc->cc_loaded = mp;
          cc->cc_magsize = mp->mag_size;
          r = 0;
        }
      }
      if (cc->cc_loaded != NULL) {
        k = PRD_MIN((uint32_t)got, cc->cc_magsize - r);
        cc_annot_in(cp, objs, k);
        memcpy(&cc->cc_loaded->mag_round[r], objs, k * sizeof(void *));
        prd__mag_rounds_set(cc, r + k);
      }
    }
    pthread_mutex_unlock(&tc->tc_lock);
    if (got > k) {   /* no room after all (a nested call filled the magazine): back */
      prd__slab_free_bulk(cp, objs + k, got - k);
      break;
    }
    if (more == 0)
      break;
    ask = PRD_MIN(more, DEFER_REFILL_CHUNK);
    got = prd__mag_slab_take(cp, tc, objs, ask, flags | PRD_NOSLEEP);
    more = got < ask ? 0 : more - (uint32_t)got;   /* the slab layer had no more */
    if (got == 0)
      break;
  }
  if (prd_unlikely(prd__mag_annot))
    prd__annot_object_out(cp, buf);
  return buf;
}

/* mh_refill, tier 4 of a cache with deferrals (REFILL, lines 13-33): the size under tc_lock,
 * then the refill with no lock held. */
static void *defer_refill(prd_cache_t *cp, uint32_t id, int flags)
{
  prd_tcache_t *tc = prd__mag_here();
  bool waiting;
  pthread_mutex_lock(&tc->tc_lock);
  uint32_t want = refill_size(cp, &tc->tc_cc[id], &waiting);
  pthread_mutex_unlock(&tc->tc_lock);
  return refill(cp, id, flags, want, waiting);
}

static const struct prd__mag_hooks defer_hooks = {
  .mh_tag_safe = tag_safe,
  .mh_tag_wait = tag_wait,
  .mh_depot_wait = depot_wait,
  .mh_tag_out = tag_out,
  .mh_cc_merge = defer_cc_merge,
  .mh_cc_drain = cc_drain,
  .mh_refill = defer_refill,
  .mh_unlocked = gp_requests,
};

/* ---- the pre-flush job of the maintenance thread (section 6) ------------------------------ */
struct pf_ctx { bool pf_backoff; };

static void preflush_cc(prd_cache_t *cp, prd_cpu_cache_t *cc, void *arg)
{
  struct pf_ctx *ctx = arg;
  if (!atomic_load_explicit(&cc->cc_want_preflush, memory_order_relaxed))
    return;
  cc_merge_safe(cp, cc);
  uint64_t ops = prd__mag_alloc_hits(cc) +
                 cc->cc_misses;
  uint64_t defers = atomic_load_explicit(&cc->cc_pcnt[PRD_PC_DEFERRED], memory_order_relaxed);
  uint32_t lat = prd__mag_latent(cc);
  uint32_t sum = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed) + lat;
  if (sum > cc->cc_lat_limit && lat != 0) {
    uint32_t excess = sum - cc->cc_lat_limit;
    bool alloc_faster = ops - cc->cc_pf_ops > defers - cc->cc_pf_defers;
    uint32_t k = PRD_MIN(alloc_faster ? (excess + 1) / 2 : excess, lat);
    ctx->pf_backoff = ctx->pf_backoff || alloc_faster;
    uint32_t from1 = PRD_MIN(k, lat_n(cc, 1));   /* the newest first */
    cc_to_slabs(cp, cc, 1, from1);
    cc_to_slabs(cp, cc, 0, k - from1);
    cc_count(cc, PRD_PC_PREFLUSH, k);
    cc_merge_safe(cp, cc);   /* a grace period that ended meanwhile (001 §4.2) */
  }
  cc->cc_pf_ops = ops;
  cc->cc_pf_defers = defers;
  cc_restop(cc);
  atomic_store_explicit(&cc->cc_want_preflush, 0, memory_order_relaxed);
}

/* The job (prd__maint_register): runs on the maintenance thread at each of its wake-ups (or
 * inline from a slow path with maint_thread=0), no lock held. */
static void preflush_job(void *arg)
{
  (void)arg;
  if (!atomic_exchange_explicit(&pf_pending, 0, memory_order_acq_rel))
    return;
  struct pf_ctx ctx = { false };
  /* try-locks: in inline mode (maint_thread=0) the job runs from a slow path whose caller may
   * hold a slab lock, under which mag_reap_lock is never waited for (magazine.c section 12) */
  if (prd__mag_visit(NULL, PRD_VISIT_TRY, preflush_cc, &ctx) != 0)
    atomic_store_explicit(&pf_pending, 1, memory_order_relaxed);   /* busy: next wake-up */
  gp_requests();
  if (ctx.pf_backoff)
    sched_yield();   /* allocation is faster than deferral: the application goes first */
}

/* Line 42, SCHEDULE_IDLE_PREFLUSH, after the deferral left its CPU cache (no lock held). */
static PRD_NOINLINE void preflush_ask(prd_cpu_cache_t *cc)
{
  atomic_store_explicit(&cc->cc_want_preflush, 1, memory_order_relaxed);
  if (!atomic_exchange_explicit(&pf_pending, 1, memory_order_acq_rel))
    prd__maint_wake();
}

/* ---- the call_rcu path (PRD_CACHE_OBLIVIOUS, debugging caches) ------------------------------ */
/* A queued head's dh_cache: cp's address XOR the head's XOR the free mark's secret
 * (magazine.c section 15), and back. */
static inline uintptr_t dh_cache_code(const prd_defer_head_t *dh, const prd_cache_t *cp)
{
  return (uintptr_t)cp ^ (uintptr_t)dh ^ prd__mark_secret;
}

static inline prd_cache_t *dh_cache_of(const prd_defer_head_t *dh, uintptr_t code)
{
  return (prd_cache_t *)(code ^ (uintptr_t)dh ^ prd__mark_secret);
}

static void defer_callback(struct prd_rcu_head *h)
{
  prd_defer_head_t *dh = (prd_defer_head_t *)h;
  prd_cache_t *cp = dh_cache_of(dh, __atomic_load_n(&dh->dh_cache, __ATOMIC_RELAXED));
  void *buf = (char *)dh - cp->cache_rcu_off;
  /* no longer queued (defer_call_rcu), before the buffer is free */
  __atomic_store_n(&dh->dh_cache, 0, __ATOMIC_RELAXED);
  atomic_fetch_add_explicit(&cp->cache_defer_cbs, 1, memory_order_relaxed);
  if (prd_unlikely(cp->cache_flags & PRD_CF_DEBUG)) {
    if (prd__debug_free_deferred(cp, buf) == 0)
      prd__slab_free(cp, buf);
    return;
  }
  /* as prd_cache_free does without debugging: the free mark (its readers are gone; found
   * there, the buffer was freed while its deferral waited, and is not freed again), then
   * the CPU layer */
  if ((cp->cache_flags & PRD_CF_NOMARK) || prd__mark_free(cp, buf, "deferred free"))
    prd__mag_free(cp, buf, false);
}

/* Out of line: the hit path of prd_cache_free_deferred then needs no stack frame. */
static PRD_NOINLINE void defer_call_rcu(prd_cache_t *cp, void *buf)
{
  if (prd_unlikely(cp->cache_flags & PRD_CF_DEBUG) && prd__debug_defer(cp, buf) != 0)
    return;
  if (prd_unlikely(!(atomic_load_explicit(&cp->cache_defer_on, memory_order_relaxed) &
                     PRD_DEFER_CALLRCU)))
    atomic_fetch_or_explicit(&cp->cache_defer_on, PRD_DEFER_CALLRCU, memory_order_relaxed);
  prd_defer_head_t *dh = (prd_defer_head_t *)((char *)buf + cp->cache_rcu_off);
  prd__annot_chunk_extra(cp, dh, sizeof(*dh));   /* past the object: ours while it is out */
  /* deferred twice while the first waits: queued again, the head would cut the callback
   * list behind it and lose the deferrals queued between (its callback clears dh_cache
   * first).  The head is past the object, so only this file writes it while the buffer is
   * out; a chunk never deferred holds whatever its memory held before, and dh_cache's code
   * (the per-process secret in it) is not a value that memory holds by accident, a pointer
   * to the cache left by an earlier cache's object included.  Ordering: prd_call_rcu's
   * queue orders the code's store before the callback's loads; the callback's clear comes
   * before the buffer is freed, and the buffer reaches its next owner only through the
   * allocator's hand-offs, so a correct deferral reads 0.  A wrong program's deferral that
   * races the callback reads either value (relaxed atomics: a missed report, never a false
   * one) */
  uintptr_t code = dh_cache_code(dh, cp);
  if (prd_unlikely(__atomic_load_n(&dh->dh_cache, __ATOMIC_RELAXED) == code &&
                   dh->dh_head.func == defer_callback)) {
    prd__error("cache %s: deferred free of buffer %p: deferred twice (it is deferred "
               "already) (ignored)", cp->cache_name, buf);
    return;
  }
  __atomic_store_n(&dh->dh_cache, code, __ATOMIC_RELAXED);
  prd_call_rcu(&dh->dh_head, defer_callback);
}

/* ---- the public entry ----------------------------------------------------------------------- */
/* No CPU cache (no magazines, thread exiting, no memory): straight to the latent slab. */
static void defer_direct(prd_cache_t *cp, void *buf, prd_gp_t gp)
{
  prd__rcu_request_gp(gp);
  (void)prd__slab_defer_bulk(cp, &buf, 1, gp);
  atomic_fetch_add_explicit(&cp->cache_defer_direct, 1, memory_order_relaxed);
}

/* The open generation's magazine is full (an open one: at its target, section 3); the latent
 * cache is at its limit (line 39). */
static inline bool cc_open_full(const prd_cpu_cache_t *cc)
{
  return cc->cc_lat[1] != NULL &&
         lat_n(cc, 1) >= (cc->cc_lat_gp[1] == PRD_LAT_OPEN ? open_cap(cc) : lat1_size(cc));
}

static inline bool cc_full(const prd_cpu_cache_t *cc)
{
  return lat_n(cc, 0) + lat_n(cc, 1) >= cc->cc_lat_limit || cc_open_full(cc);
}

/* prd__mag_defer_light set once both halves of it hold (magazine.h): the magazine layer's
 * membarrier, set before any CPU cache exists, and the RCU layer's fence-free readers, set
 * at its initialization and never undone (rcu.c §3). */
static void defer_light_update(void)
{
  if (prd_unlikely(!__atomic_load_n(&prd__mag_defer_light, __ATOMIC_RELAXED)) &&
      prd__mag_membarrier && __atomic_load_n(&prd__rcu_reader_fences, __ATOMIC_RELAXED) == 0)
    __atomic_store_n(&prd__mag_defer_light, 1, __ATOMIC_RELAXED);
}

/* prd__mag_defer_light, relaxed: on x86-64 one `cmpl $0` on the flag in memory, where
 * compilers load an atomic into a register and test it (as magazine.h's steal test). */
static inline bool defer_light(void)
{
#if defined(__x86_64__) && !defined(PRD_TSAN)
  bool light;
  __asm__("cmpl $0, %1" : "=@ccne"(light) : "m"(prd__mag_defer_light));
  return light;
#else
  return __atomic_load_n(&prd__mag_defer_light, __ATOMIC_RELAXED) != 0;
#endif
}

/* Everything but the hit path (section 4), tc_lock held for the CPU cache's part.  The state
 * is read here (line 35), after the caller's unlink as on the hit path. */
static PRD_NOINLINE void defer_slow(prd_cache_t *cp, void *buf)
{
  prd__rcu_fork_release();   /* a fork child defers: it uses RCU (rcu.c §7) */
  prd_gp_t gp = prd__rcu_get_state();                         /* line 35 */
  if (prd_unlikely(!(atomic_load_explicit(&cp->cache_defer_on, memory_order_relaxed) &
                     PRD_DEFER_LATENT))) {
    pthread_once(&defer_once, defer_init_once);
    atomic_fetch_or_explicit(&cp->cache_defer_on, PRD_DEFER_LATENT, memory_order_release);
  }
  defer_light_update();
  /* the new generation is left open while the hit path would push into one (section 3) */
  bool open = defer_light() && prd__rcu_retire_fenced();
  uint32_t id = cp->cache_magid;
  prd_tcache_t *tc;
  if (id == 0 || (tc = prd__mag_tc_get(id)) == NULL) {
    defer_direct(cp, buf, gp);
    return;
  }
  pthread_mutex_lock(&tc->tc_lock);
  prd_cpu_cache_t *cc = &tc->tc_cc[id];
  bool pending = lat_n(cc, 1) != 0 && cc->cc_lat_gp[1] == PRD_LAT_OPEN;
  if (open && pending && !cc_open_full(cc)) {
    /* the open generation stays open while its magazine has room: the older one makes room
     * for it */
    if (cc_full(cc))
      cc_older_out(cp, cc);
  } else {
    /* an open generation closes: gp was read after every deferral it holds (cc_seal) */
    if (pending)
      cc_close_open(cp, cc, gp);
    if (lat_n(cc, 1) != 0 && (open || cc->cc_lat_gp[1] != gp))
      cc_rotate(cp, cc);                                      /* section 3 */
  }
  if (cc_full(cc)) {                                          /* line 39 fails */
    cc_merge_safe(cp, cc);                                    /* line 46 */
    /* lines 49-51: a whole generation to the depot's latent list while it has room, else
     * to the latent slabs (section 4) */
    if (cc_full(cc) && lat_n(cc, 0) != 0 && !cc_open_full(cc) &&
        !cc_to_depot(cp, cc, 0, true))
      cc_to_slabs(cp, cc, 0, lat_n(cc, 0));
    if (cc_full(cc) && !cc_to_depot(cp, cc, 1, true))
      cc_to_slabs(cp, cc, 1, lat_n(cc, 1));
  }
  if (cc->cc_lat[1] == NULL) {   /* first deferral, or the magazine went in a merge */
    cc->cc_lat[1] = prd__mag_new(cp);
    cc->cc_lat_limit = prd__mag_cur_size(cp);
    lat_set(cc, 1, 0);
  }
  if (cc->cc_lat[1] == NULL || lat_n(cc, 0) >= cc->cc_lat_limit) {
    cc_restop(cc);
    pthread_mutex_unlock(&tc->tc_lock);
    gp_requests();
    defer_direct(cp, buf, gp);
    return;
  }
  uint32_t n1 = lat_n(cc, 1);
  if (n1 == 0) {
    cc->cc_lat_gp[1] = open ? PRD_LAT_OPEN : gp;
    cc->cc_lat_opened = (uint32_t)gp;
  }
  cc->cc_lat[1]->mag_round[n1] = buf;                         /* line 40 */
  lat_set(cc, 1, n1 + 1);
  cc_count(cc, PRD_PC_DEFERRED, 1);
  bool ask = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed) + prd__mag_latent(cc) >
                 cc->cc_lat_limit &&                          /* line 41 */
             (!atomic_load_explicit(&cc->cc_want_preflush, memory_order_relaxed) ||
              !atomic_load_explicit(&pf_pending, memory_order_relaxed));
  cc_restop(cc);
  pthread_mutex_unlock(&tc->tc_lock);
  gp_requests();
  if (ask)
    preflush_ask(&tc->tc_cc[id]);                             /* line 42 */
}

/* The hit path (section 4), for a buffer that passed the checks but the free mark's, which
 * `marked` asks of it: the handshake of magazine.h around one push, on the CPU cache the
 * magazine hit paths use (mt_lim is 0 while a layer above holds this thread's magazine
 * layer, so a re-entrant deferral takes the slow path as they do).  The handshake's barrier
 * is also the reader barrier before the state's load (section 8), which therefore comes
 * after it.  The mark is loaded after that barrier too: the buffer was just unlinked, its
 * line is often in a reader's cache, and a full barrier (without membarrier) would wait for
 * that load, where after it the load overlaps the push and the caller's next steps.  While
 * the retirers fence (rcu.c §3) the light handshake pushes into an open generation instead
 * (section 3), and does not load the mark: readers run sections then, the caller's next
 * locked instruction would wait for the load all the same, and the generation's close tests
 * every buffer it took at once (cc_mark_check); on an external source neither does any
 * deferral (section 3, "The free mark, when a generation closes").  1: pushed; -1: the
 * mark found (nothing done; the caller reports); 0: the slow path's (nothing done).
 * `may_ask` (a constant after inlining): a push that wants a pre-flush asks for it here
 * (line 42); without it such a push is left to the slow path, which asks, so that the hit
 * calls nothing. */
static inline __attribute__((always_inline)) int defer_hit(prd_cache_t *cp, void *buf,
                                                           bool marked, bool may_ask)
{
  uint32_t id = cp->cache_magid;
  if (prd_unlikely(id >= prd__mag_tls.mt_lim))
    return 0;
  prd_cpu_cache_t *cc = &prd__mag_tls.mt_cc[id];
  prd_tcache_t *tc = prd__mag_tls.mt_tc;
  /* while grace periods run without (W1) (rcu.c §3) a light handshake pushes into an open
   * generation and reads no state (section 3, "Open generations"); the flag is loaded
   * first */
  bool light = prd_likely(defer_light());
  bool open = light && prd__rcu_retire_fenced();
  if (prd_unlikely(!prd__mag_enter_light(cc, tc, light)))
    return 0;
#ifdef PRD_TSAN
  prd__rcu_reader_barrier();   /* TSan's handshake has no fence: the reader barrier's own */
#endif
  /* the mark is tested when the generation closes (cc_mark_check) while readers are taken
   * to run sections: an open generation, and any on an external source; but in a cache made
   * with the option hardened, at the call */
  bool late = open || prd__rcu_source_external();
  if (marked && (!late || (cp->cache_flags & PRD_CF_HARDENED)) &&
      prd_unlikely(prd__mark_test(buf, cp->cache_mark_off))) {
    prd__mag_exit(cc);
    return -1;
  }
  prd_gp_t gp = open ? PRD_LAT_OPEN : prd__rcu_get_state_fenced();   /* line 35 */
  uint32_t n = atomic_load_explicit(&cc->cc_lat_n[1], memory_order_relaxed);
  if (prd_unlikely(prd__mag_late_steal(cc, tc)))
    return 0;
  if (prd_likely(gp == cc->cc_lat_gp[1] && n < cc->cc_lat_stop)) {   /* line 39 */
    /* line 41: loaded + latent over the limit, as rounds + n + 1 > limit - cc_lat_n[0] */
    bool ask = atomic_load_explicit(&cc->cc_rounds, memory_order_relaxed) + n + 1 >
                   cc->cc_lat_room &&
               !atomic_load_explicit(&cc->cc_want_preflush, memory_order_relaxed);
    if (!may_ask && prd_unlikely(ask)) {
      prd__mag_exit(cc);
      return 0;
    }
    cc->cc_lat[1]->mag_round[n] = buf;                          /* line 40 */
    PRD_RACE();
    atomic_store_explicit(&cc->cc_lat_n[1], n + 1, memory_order_relaxed);
    PRD__MAG_COUNT(cc->cc_pcnt[PRD_PC_DEFERRED]);
    prd__mag_exit(cc);
    if (prd_unlikely(ask))
      preflush_ask(cc);                                         /* line 42 */
    return 1;
  }
  prd__mag_exit(cc);
  return 0;
}

/* The hit path, then the slow path behind it. */
static inline __attribute__((always_inline)) void defer_latent(prd_cache_t *cp, void *buf,
                                                               bool marked)
{
  int r = defer_hit(cp, buf, marked, true);
  if (prd_likely(r > 0))
    return;
  /* a freed buffer (magazine.c section 15): the mark is only read, never written here, a
   * deferred buffer's readers may still read it */
  if (r < 0 || (marked && prd_unlikely(prd__mark_test(buf, cp->cache_mark_off)))) {
    prd__mag_double_free(cp, buf, "deferred free");
    return;
  }
  defer_slow(cp, buf);
}

bool prd__defer_hit_plain(prd_cache_t *cp, void *buf)
{
  uint32_t f = cp->cache_flags;
  if (prd_unlikely(f & (PRD_CF_DEBUG | PRD_CACHE_NOTOUCH | PRD_CF_DEFERHEAD)))
    return false;
  return defer_hit(cp, buf, !(f & PRD_CF_NOMARK), false) > 0;
}

/* Not one of cp's buffers by the page map, or NULL (ignored, as free(NULL)). */
static PRD_NOINLINE PRD_COLD void defer_not_owned(prd_cache_t *cp, void *buf)
{
  if (buf != NULL)
    prd__pm_bad_free(cp, buf, "deferred free");
}

static PRD_NOINLINE PRD_COLD void defer_no_cache(void *buf)
{
  if (buf != NULL)
    prd__error("prd_cache_free_deferred: NULL cache for buffer %p (not deferred)", buf);
}

/* A debugging, NOTOUCH or call_rcu cache: the same checks, each where its cache has it, then
 * the call_rcu path or the latent cache. */
static PRD_NOINLINE void defer_front_slow(prd_cache_t *cp, void *buf)
{
  if (buf == NULL)
    return;
  uint32_t f = cp->cache_flags;
  if (!(f & (PRD_CF_DEBUG | PRD_CACHE_NOTOUCH)) && !prd__pm_check(cp, buf, "deferred free"))
    return;
  if (!(f & PRD_CF_NOMARK) && prd__mark_test(buf, cp->cache_mark_off)) {
    prd__mag_double_free(cp, buf, "deferred free");
    return;
  }
  if (f & PRD_CF_DEFERHEAD)
    defer_call_rcu(cp, buf);
  else
    defer_latent(cp, buf, false);
}

void prd_cache_free_deferred(prd_cache_t *cp, void *buf)
{
  if (prd_unlikely(cp == NULL)) {
    defer_no_cache(buf);
    return;
  }
  /* one flag test keeps a plain marked cache on the path below; a plain cache without the
   * mark (a constructor, an 8-byte chunk) takes the same path less the mark's test, inline
   * too (out of line it cost 8 instructions more a deferral); debugging, NOTOUCH and
   * call_rcu caches go out of line (defer_front_slow) */
  if (prd_unlikely(cp->cache_flags &
                   (PRD_CF_DEBUG | PRD_CACHE_NOTOUCH | PRD_CF_NOMARK | PRD_CF_DEFERHEAD))) {
    /* the flags read again here: the hit path above tests them in memory, one instruction */
    __asm__("" ::: "memory");
    if (cp->cache_flags & (PRD_CF_DEBUG | PRD_CACHE_NOTOUCH | PRD_CF_DEFERHEAD))
      defer_front_slow(cp, buf);
    else if (prd_unlikely(!prd__pm_owns(cp, buf)))
      defer_not_owned(cp, buf);
    else
      defer_latent(cp, buf, false);
    return;
  }
  /* ownership first (as prd_cache_free, cache.c section 2): nothing below reads a buffer, its
   * slab record or its memory before the page map said it is one of this cache's; NULL is
   * never one (granule 0 has no slab entry), so its test is on the refusal's cold path */
  if (prd_unlikely(!prd__pm_owns(cp, buf))) {
    defer_not_owned(cp, buf);
    return;
  }
  defer_latent(cp, buf, true);   /* and the free mark's test (a freed buffer), in there */
}

/* ---- reaching other threads' latent generations (sections 4 and 7) ------------------------- */
bool prd__defer_oom(prd_cache_t *cp, int flags)
{
  /* every CPU cache's latent generations to the latent slabs, where this path can reach
   * them; the caller may hold locks of the order: try-locks only (section 8) */
  (void)prd__mag_visit(cp, PRD_VISIT_TRY, cc_latent_out, NULL);
  prd__mag_lat_out(cp);   /* and the depot's latent magazines */
  gp_requests();
  if (prd__slab_lat_merge_all(cp) != 0)
    return true;
  prd_gp_t maxgp;
  if (!prd__slab_lat_pending(cp, &maxgp) || (flags & PRD_NOSLEEP) || in_read_section())
    return false;
  /* lines 31-32, bounded (section 9): out of memory, the caller would rather wait than fail,
   * but not for a grace period that may be waiting for it: then the slab layer fails */
  (void)prd__rcu_poll_bounded(maxgp, (uint64_t)prd__opt(defer_oom_wait_ms) * 1000000);
  atomic_fetch_add_explicit(&cp->cache_oom_waits, 1, memory_order_relaxed);
  return prd__slab_lat_merge_all(cp) != 0;
}

bool prd__defer_cache_destroy(prd_cache_t *cp)
{
  uint32_t on = atomic_load_explicit(&cp->cache_defer_on, memory_order_acquire);
  /* the deferred buffers' grace periods cannot end while this thread is inside a read-side
   * section, and freeing the cache without them would free memory that readers may still
   * read, or leave callbacks that name a freed cache: refused, the cache left as it is (a
   * synchronize inside a section is refused the same way, rcu.c) */
  if (on != 0 && in_read_section()) {
    prd__error("prd_cache_destroy(%s): called inside an RCU read-side section, after deferred "
               "frees to the cache whose grace periods cannot end there (ignored: the cache "
               "is left as it is)", cp->cache_name);
    return false;
  }
  /* and an RCU callback cannot wait for the callbacks queued after its own (the barrier
   * would wait for itself): a cache whose deferred frees took the call_rcu path is refused
   * there too; the latent path's grace periods end without callbacks */
  if ((on & PRD_DEFER_CALLRCU) && prd__call_rcu_in_callback()) {
    prd__error("prd_cache_destroy(%s): called from an RCU callback, after deferred frees to "
               "the cache whose callbacks cannot be waited for there (ignored: the cache is "
               "left as it is)", cp->cache_name);
    return false;
  }
  if (on & PRD_DEFER_CALLRCU)
    prd_rcu_barrier();   /* every callback that names cp has run */
  if ((on & PRD_DEFER_LATENT) && cp->cache_magid != 0)
    (void)prd__mag_visit(cp, PRD_VISIT_WAIT, cc_latent_out, NULL);
  prd__mag_lat_out(cp);
  gp_requests();
  prd__defer_cache_settle(cp);
  return true;
}

void prd__defer_cache_settle(prd_cache_t *cp)
{
  prd_gp_t maxgp;
  if (prd__slab_lat_pending(cp, &maxgp)) {
    prd__rcu_request_expedited(maxgp);
    prd_rcu_wait_state(maxgp);   /* never inside a section: the destroy refused that */
    (void)prd__slab_lat_merge_all(cp);
  }
}

void prd__defer_stats(prd_cache_t *cp, prd_cache_stats_t *st)
{
  uint64_t c[PRD_PC_NCOUNTERS];
  prd__mag_pcounts(cp, c);
  st->deferred_frees = c[PRD_PC_DEFERRED] +
                       atomic_load_explicit(&cp->cache_defer_direct, memory_order_relaxed) +
                       atomic_load_explicit(&cp->cache_defer_cbs, memory_order_relaxed);
  /* section 5: the object cache is the magazine layer, for Prudence and for the call_rcu
   * baseline alike (SLUB's per-CPU object cache in the paper's Fig. 7), so the two hit rates
   * stand side by side */
  st->oc_misses = st->mag_slab_allocs;
  st->oc_hits = st->mag_allocs > st->oc_misses ? st->mag_allocs - st->oc_misses : 0;
  st->oc_hit_pct = st->oc_hits + st->oc_misses == 0 ? 0.0
                   : 100.0 * (double)st->oc_hits / (double)(st->oc_hits + st->oc_misses);
#define DEFER_PC_COPY(counter, field) st->field = c[PRD_PC_##counter];
  PRD_PC_FIELDS(DEFER_PC_COPY)
#undef DEFER_PC_COPY
  st->oc_churns = PRD_MIN(c[PRD_PC_REFILLS], c[PRD_PC_FLUSHES]);
  st->latent_merges += c[PRD_PC_MERGES];
  st->oom_gp_waits = c[PRD_PC_OOMWAITS] +
                    atomic_load_explicit(&cp->cache_oom_waits, memory_order_relaxed);
  st->gp_waits = st->latent_cap_waits + st->depot_gp_waits + st->oom_gp_waits;
}
