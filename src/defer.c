/*
 * defer.c: Prudence, deferred frees that the allocator sees (Prasad & Gopinath, "Prudent
 * Memory Reclamation in Procrastination-Based Synchronization", ASPLOS 2016: seed 001).
 *
 * 1. What.  prd_cache_free_deferred(cp, buf) is the turnkey replacement for call_rcu(free)
 *    (001 §4, Listing 2): buf is freed once a grace period has ended, but instead of a
 *    callback queued in the RCU layer, the allocator keeps the object and reuses it as soon
 *    as its grace period is over (001 §4.1: no extended object lifetimes, §3.2).  The cache
 *    keeps serving prd_cache_alloc/prd_cache_free alongside.  PRD_CACHE_OBLIVIOUS caches (and
 *    debugging caches, whose checks need the exact life of each buffer) take the baseline
 *    path instead: prd_call_rcu with a head stored after the buffer (the rcu_head a kernel
 *    structure carries) and a callback that calls prd_cache_free (SLUB + call_rcu, 001 §5).
 *
 * 2. Data structures (001 §4.1, Fig. 4).
 *    - Per thread and cache, a prd_lcache_t: the object cache lc_obj (safe objects, capacity
 *      lc_size) and the latent cache, two generations lc_lat[0] (older) and lc_lat[1]
 *      (newer, open), each an array of lc_size slots tagged with one prd_rcu_get_state()
 *      value, lc_nlat[0] + lc_nlat[1] <= lc_size (001 §4.1: the latent-cache limit is the
 *      object-cache size).  All three arrays have the same shape, so a safe generation merges
 *      into an empty object cache by swapping two pointers (PRUDENCE-NOTES §2).  A thread
 *      finds its record through a direct-mapped thread-local table of PRD_LC_SLOTS entries
 *      indexed by the cache's address, backed by the thread's list of records.
 *    - Size.  lc_size starts at the magazine size of the object size (libumem's table) and
 *      doubles, up to lc_max (512 KiB of objects, at most 4096), whenever an allocation miss
 *      finds latent objects still waiting: the grace period outlasts what the cache holds, so
 *      the deferrals of one grace period would spill into the latent slabs (seed 004's
 *      magazine resizing, which grows on depot contention; here the signal is the grace-period
 *      latency).  Sized so, the deferrals of a grace period merge back by pointer exchange and
 *      the slab lock is not taken per batch (measured: 530 -> 320 instructions per pair).
 *    - Per slab, the latent slab (slab.c section 10): deferred buffers in two generations
 *      tagged with their states, recorded outside the buffers (readers may still read them).
 *    Until the magazine layer (#4) is on main, lc_obj is the per-thread object cache of
 *    Algorithm 1 for caches that have seen deferrals; it then becomes the loaded magazine.
 *
 * 3. The bound on waiting (issue #6, PRUDENCE-NOTES §2).  A generation holds only objects
 *    deferred with the same state, so each object waits exactly for the grace period it
 *    needs, never for one that started after it was deferred (the flaw of Linux's rcu_free
 *    sheaf, ANCHORS.md).  Two generations suffice: rcu.c §4 makes get_state() at most one
 *    grace period past the one in progress, so at any instant at most two states are
 *    unsafe (s and s - 2).  In a latent cache the states of one thread only grow; when a
 *    deferral brings a third state g > gp[1] > gp[0], gp[0] <= g - 4 had ended when g was
 *    read, and is merged before the generations rotate.  In a latent slab the states come
 *    from several threads: the new state is polled before the two tags, so three
 *    unsafe answers would mean three unsafe states at the time of the first poll (slab.c
 *    lat_add).  test_defer checks the bound (bound_* tests).
 *
 * 4. Algorithm 1, line by line.
 *    FREE_DEFERRED (lines 34-51): read the state (one load, rcu.c §4); a latent cache under its
 *      limit takes the object (lines 39-40): into the open generation if the state matches,
 *      else the generations rotate (section 3) and the driver is asked for the closing
 *      generation's grace period (lc_request: once per state and record; §3.4).  If
 *      object cache + latent cache would overflow after the grace period (line 41) the
 *      record asks for a pre-flush (line 42, section 6).  A full latent cache flushes the
 *      object cache sized by the latent count (line 45), merges (line 46), retries (47-48),
 *      and otherwise moves a whole generation to the latent slabs under one hold of the slab
 *      lock (lines 49-51, a batch rather than one object: same place, 1/lc_size of the lock
 *      traffic), where the slabs are pre-moved (lines 52-57, slab.c section 10).
 *    MALLOC (lines 1-12): pop the object cache; on a miss merge the safe generations (7-11,
 *      MERGE_CACHES lines 60-65: stops when the object cache is full); only then refill.
 *    REFILL (lines 13-30): objs_to_refill = size - latent count (line 14; at least 1): the
 *      latent objects will fill the rest when their grace period ends.  The slab layer picks
 *      slabs with the deferred counts (lines 17-21, Fig. 5, slab.c lat_pick) under one lock.
 *    OOM (lines 31-32): when the source is exhausted, the slab layer calls prd__defer_oom:
 *      latent caches are moved to latent slabs, the driver is asked to expedite the latest
 *      latent state, the caller waits for it and merges; PRD_NOSLEEP (and a caller inside a
 *      read-side section, where waiting would never end) merges only what is safe already.
 *    FLUSH: when a free finds the object cache full, it keeps (size - latent)/2 objects: the
 *      usual half, less the room the latent objects will need (001 §4.2 "Object cache flush").
 *
 *    GRACE PERIODS (§3.4, PRUDENCE-NOTES §3): the built-in driver runs grace periods only when
 *      asked, so deferrals ask, each for exactly the state it needs: a generation when it is
 *      half full (early enough that its grace period ends about when the object cache runs
 *      dry) and when it closes; an allocation miss that finds only unsafe latent objects asks
 *      for the newest one's.  A record asks once per state (lc_requested), so the driver is
 *      woken at most once per generation.  Asking several grace periods ahead kept the driver
 *      running back to back: perf showed ~27% of `prd-bench deferred --sizes 64` in the
 *      membarrier IPIs of those grace periods.
 * 5. Counters (001 §5.4, Figs. 7-11): hits = allocations served by the object cache without a
 *    refill (also after a merge), misses = refills; churns = min(refills, flushes); per
 *    record, written by its owner, summed by prd__defer_stats after taking each record
 *    (section 8); records that go away fold theirs into
 *    cache_lc_dead.  The latent-slab counters live in the cache (slab.c).
 *
 * 6. Pre-flush (lines 41-43, 001 §4.2 "Latent cache pre-flush").  A record whose object cache
 *    and latent cache together exceed lc_size sets lc_want_preflush; the first such request
 *    since the job last ran wakes the maintenance thread (prd__maint_wake, magazine.c §9,
 *    after the deferral has left its record): the maintenance thread is our idle-time worker
 *    (PRUDENCE-NOTES §4).  Its job (preflush_job, prd__maint_register) walks the caches, tries
 *    to take each record that asked (section 8; a record in use is skipped, its owner is not
 *    idle, and looked at again at the thread's next wake-up, never spun on), merges what is
 *    safe, then moves the newest latent objects to their latent slabs until the sum fits.
 *    Rate-adaptive from the record's allocations and deferrals since its last pre-flush: when
 *    allocation is slower than deferral, the whole excess moves at once; when faster, half of
 *    it, and the job yields before the next cache (the object cache empties by itself).  It
 *    merges again after moving, so a grace period that ended meanwhile is used.
 *
 * 7. Threads that stop.  A thread's latent objects are reachable by others (section 8):
 *    the OOM path (section 4), cache destruction and pre-flush.  At thread exit (a pthread
 *    key's destructor) every record moves its latent generations, with their states, to the
 *    latent slabs and its safe objects to the slabs: nothing is reused early, nothing lost.
 *
 * 8. Locking.  Order: slab_list_lock -> cache_defer_lock -> record -> cache_lock (-> vmem).
 *    The owner holds its record through an asymmetric handshake instead of a lock (the lock
 *    cost ~130 instructions and four atomic operations per alloc+defer pair): lc_enter stores
 *    lc_busy = 1, runs the RCU reader barrier (O1: a compiler barrier when membarrier is
 *    registered) and loads lc_steal; lc_leave stores lc_busy = 0 (release).  A thief (pre-
 *    flush, OOM, destroy, statistics) takes lc_lock (thieves exclude each other), stores
 *    lc_steal = 1, runs prd__rcu_heavy_barrier (T1: membarrier, a full barrier on every
 *    thread) and waits until lc_busy is 0 (acquire; a try-thief gives up instead).  (O1)/(T1)
 *    is the Dekker pair of rcu.c §3: either the thief sees the owner's lc_busy, or the owner's
 *    load after (O1) sees lc_steal, and then the owner takes lc_lock and waits for the thief.
 *    The owner's load of lc_steal is an acquire that pairs with the thief's releasing store
 *    of 0, so the thief's changes to the record are visible to the owner's next operation.
 *    An owner that must reach cache_defer_lock while inside an operation (thread exit, OOM)
 *    only try-locks it, and thread exit retries after leaving.  Nesting: a refill runs the
 *    cache's constructor, which may allocate from or free to its own cache; lc_depth (owner
 *    only) counts the owner's operations in progress, and a nested one bypasses the record
 *    (magazine layer for alloc/free, latent slabs for a deferral), so it neither touches the
 *    arrays the outer operation is filling nor waits for the lc_lock that operation holds
 *    (test_defer_ctor).  A record is freed only by its
 *    owner, after it is off the cache's list (lc_cache NULL): destroy and exit meet through
 *    the handshake.  Memory ordering: lc_cache is an atomic pointer read relaxed by the
 *    owner's lookup (a thread only looks up its own records); cache_defer_on is
 *    set with a release fetch-or before the first record is published and read relaxed by
 *    prd_cache_alloc/free: a thread that misses the bit takes the slab path, which stays
 *    correct (the bit only decides where safe objects are cached).  The grace-period state
 *    itself carries the RCU ordering: prd__defer_safe() is an acquire load that pairs with
 *    the release store ending the grace period (rcu.c §4), so a merge that sees a generation
 *    safe is ordered after every reader that could have seen its objects.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "annotate.h"
#include "internal.h"
#include "magazine.h"

#define PRD_LC_SLOTS 64   /* thread-local lookup table: one cache line of pointers x 8; a
                             collision only costs a walk of the thread's list */

/* ---- records and their lookup ------------------------------------------------------------ */
static __thread prd_lcache_t *defer_tl[PRD_LC_SLOTS];
static __thread prd_lcache_t *defer_mine;   /* this thread's records */
static __thread bool defer_key_armed;
static pthread_key_t defer_key;
bool prd__defer_broken;
static pthread_once_t defer_once = PTHREAD_ONCE_INIT;

static void defer_thread_exit(void *arg);
static void preflush_job(void *arg);

static void defer_init_once(void)
{
  (void)pthread_key_create(&defer_key, defer_thread_exit);
  (void)prd__maint_register(preflush_job, NULL);
}

static inline size_t lc_slot(const prd_cache_t *cp)
{
  return ((uintptr_t)cp >> 6) & (PRD_LC_SLOTS - 1);   /* caches are 64-byte aligned */
}

/* Object-cache capacity by chunk size: the magazine sizes of libumem (ANCHORS.md): small
 * objects many rounds, large ones few, about 4 KiB to 64 KiB of objects per cache. */
static uint32_t lc_capacity(size_t chunk)
{
  if (chunk <= 64)
    return 127;
  if (chunk <= 256)
    return 63;
  if (chunk <= 1024)
    return 31;
  if (chunk <= 4096)
    return 15;
  return 7;
}

/* The most the object cache (and the latent cache) may grow to (section 2): 512 KiB of
 * objects, at most 4096; the arrays are mapped for it at once, but only touched pages cost. */
static uint32_t lc_capacity_max(size_t chunk, uint32_t size)
{
  size_t m = (512 * 1024) / (chunk ? chunk : 1);
  if (m > 4096)
    m = 4096;
  return m > size ? (uint32_t)m : size;
}

static void lc_counters_fold(prd_cache_t *cp, prd_lcache_t *lc)
{
  for (int i = 0; i < PRD_LC_NCOUNTERS; i++)
    cp->cache_lc_dead[i] += lc->lc_cnt[i];
  memset(lc->lc_cnt, 0, sizeof(lc->lc_cnt));
}

/* Frees a record that is off its cache's list (owner only). */
static void lc_free(prd_lcache_t *lc)
{
  for (size_t i = 0; i < PRD_LC_SLOTS; i++)
    if (defer_tl[i] == lc)
      defer_tl[i] = NULL;
  pthread_mutex_destroy(&lc->lc_lock);
  prd__os_unmap(lc, lc->lc_mapsize);
}

static PRD_NOINLINE prd_lcache_t *lc_lookup_slow(prd_cache_t *cp, bool create)
{
  prd_lcache_t **pp = &defer_mine, *lc;
  while ((lc = *pp) != NULL) {
    prd_cache_t *owner = atomic_load_explicit(&lc->lc_cache, memory_order_acquire);
    if (owner == cp) {
      defer_tl[lc_slot(cp)] = lc;
      return lc;
    }
    if (owner == NULL) {   /* its cache was destroyed: the record goes */
      *pp = lc->lc_tnext;
      lc_free(lc);
      continue;
    }
    pp = &lc->lc_tnext;
  }
  if (!create)
    return NULL;
  pthread_once(&defer_once, defer_init_once);
  if (!defer_key_armed) {
    (void)pthread_setspecific(defer_key, &defer_mine);
    defer_key_armed = true;
  }
  uint32_t size = lc_capacity(cp->cache_chunksize);
  uint32_t max = lc_capacity_max(cp->cache_chunksize, size);
  size_t bytes = PRD_P2ROUNDUP(sizeof(prd_lcache_t) + 3 * (size_t)max * sizeof(void *),
                               prd__os_page_size());
  lc = prd__os_map(bytes);
  if (lc == NULL)
    return NULL;
  pthread_mutex_init(&lc->lc_lock, NULL);
  lc->lc_mapsize = bytes;
  lc->lc_size = size;
  lc->lc_max = max;
  void **arrays = (void **)(lc + 1);
  lc->lc_obj = arrays;
  lc->lc_lat[0] = arrays + max;
  lc->lc_lat[1] = arrays + 2 * (size_t)max;
  atomic_store_explicit(&lc->lc_cache, cp, memory_order_relaxed);
  pthread_mutex_lock(&cp->cache_defer_lock);
  cp->cache_lc_size = size;
  lc->lc_prev = NULL;
  lc->lc_next = cp->cache_lcaches;
  if (cp->cache_lcaches != NULL)
    cp->cache_lcaches->lc_prev = lc;
  cp->cache_lcaches = lc;
  lc->lc_listed = true;
  pthread_mutex_unlock(&cp->cache_defer_lock);
  /* release: the record is on the list before allocation starts to look for it */
  if (!(atomic_load_explicit(&cp->cache_defer_on, memory_order_relaxed) & PRD_DEFER_LATENT))
    atomic_fetch_or_explicit(&cp->cache_defer_on, PRD_DEFER_LATENT, memory_order_release);
  lc->lc_tnext = defer_mine;
  defer_mine = lc;
  defer_tl[lc_slot(cp)] = lc;
  return lc;
}

/* The calling thread's record for cp (created when `create`), or NULL. */
static inline prd_lcache_t *lc_lookup(prd_cache_t *cp, bool create)
{
  prd_lcache_t *lc = defer_tl[lc_slot(cp)];
  if (prd_likely(lc != NULL) &&
      prd_likely(atomic_load_explicit(&lc->lc_cache, memory_order_relaxed) == cp))
    return lc;
  return lc_lookup_slow(cp, create);
}

/* ---- the handshake (section 8): the owner's operations against another thread's ------------ */
/* The owner enters an operation on its record: a store, the reader barrier (O1) and a load;
 * when another thread is taking the record, it waits for it on lc_lock.  Returns whether it
 * holds lc_lock (lc_leave needs to know). */
static inline bool lc_enter(prd_lcache_t *lc)
{
  lc->lc_depth++;
  atomic_store_explicit(&lc->lc_busy, 1, memory_order_relaxed);
  prd__rcu_reader_barrier();   /* (O1): pairs with the thief's heavy barrier (T1) */
  /* acquire: a thief that just finished released lc_steal after its changes to the record */
  if (prd_likely(!atomic_load_explicit(&lc->lc_steal, memory_order_acquire)))
    return false;
  atomic_store_explicit(&lc->lc_busy, 0, memory_order_release);
  pthread_mutex_lock(&lc->lc_lock);
  return true;
}

static inline void lc_leave(prd_lcache_t *lc, bool locked)
{
  lc->lc_depth--;
  if (prd_unlikely(locked))
    pthread_mutex_unlock(&lc->lc_lock);
  else   /* release: a thief that sees 0 sees the operation's changes (acquire below) */
    atomic_store_explicit(&lc->lc_busy, 0, memory_order_release);
}

/* Whether the owner is already inside an operation on this record: a refill runs the cache's
 * constructor, and a constructor may allocate from (or free to) its own cache.  The nested
 * call must not touch the arrays the outer one is filling (nor take lc_lock, which the outer
 * call may hold), so it bypasses the record: the magazine layer for alloc/free, the latent
 * slabs for a deferral. */
static inline bool lc_nested(const prd_lcache_t *lc)
{
  return prd_unlikely(lc->lc_depth != 0);
}

/* Another thread takes a record (pre-flush, OOM, destroy, statistics): lc_lock against other
 * thieves and against an owner that saw lc_steal; then lc_steal, the heavy barrier (T1) and a
 * wait for the owner to leave its operation.  (O1)/(T1): either the owner's lc_busy store is
 * visible to the thief after (T1), or the owner's load after (O1) sees lc_steal and it takes
 * lc_lock.  `wait` false: a try (fails when the lock or the owner is busy). */
static bool lc_steal(prd_lcache_t *lc, bool wait)
{
  if (wait)
    pthread_mutex_lock(&lc->lc_lock);
  else if (pthread_mutex_trylock(&lc->lc_lock) != 0)
    return false;
  atomic_store_explicit(&lc->lc_steal, 1, memory_order_relaxed);
  prd__rcu_heavy_barrier();   /* (T1) */
  while (atomic_load_explicit(&lc->lc_busy, memory_order_acquire)) {
    if (!wait) {
      atomic_store_explicit(&lc->lc_steal, 0, memory_order_release);
      pthread_mutex_unlock(&lc->lc_lock);
      return false;
    }
    sched_yield();
  }
  return true;
}

static void lc_unsteal(prd_lcache_t *lc)
{
  atomic_store_explicit(&lc->lc_steal, 0, memory_order_release);
  pthread_mutex_unlock(&lc->lc_lock);
}

/* ---- the latent cache (the record held: owner inside an operation, or stolen) ----------------- */
static inline uint32_t lc_nlat(const prd_lcache_t *lc)
{
  return lc->lc_nlat[0] + lc->lc_nlat[1];
}

static inline void lc_latent_publish(prd_lcache_t *lc)
{
  atomic_store_explicit(&lc->lc_latent, lc_nlat(lc), memory_order_relaxed);
}

/* FLUSH (001 §4.2): keep (size - latent) / 2 objects, give the rest back in one batch. */
static void lc_flush(prd_cache_t *cp, prd_lcache_t *lc)
{
  uint32_t keep = (lc->lc_size - lc_nlat(lc)) / 2;
  if (lc->lc_nobj <= keep)
    return;
  prd__slab_free_bulk(cp, lc->lc_obj + keep, lc->lc_nobj - keep);
  lc->lc_nobj = keep;
  lc->lc_cnt[PRD_LC_FLUSHES]++;
}

/* MERGE_CACHES (lines 60-65): safe generations into the object cache until it is full; the
 * older generation first (if it is not safe, the newer one is not either).  Returns the
 * number of objects merged. */
static uint32_t lc_merge(prd_lcache_t *lc)
{
  uint32_t merged = 0;
  for (int g = 0; g < 2; g++) {
    uint32_t n = lc->lc_nlat[g];
    if (n == 0)
      continue;
    if (!prd__defer_safe(lc->lc_gp[g]))
      break;
    if (lc->lc_nobj == 0) {
      /* a whole batch by pointer exchange (PRUDENCE-NOTES §2) */
      void **t = lc->lc_obj;
      lc->lc_obj = lc->lc_lat[g];
      lc->lc_lat[g] = t;
      lc->lc_nobj = n;
      lc->lc_nlat[g] = 0;
      merged += n;
      continue;
    }
    uint32_t room = lc->lc_size - lc->lc_nobj;
    uint32_t k = PRD_MIN(room, n);
    memcpy(lc->lc_obj + lc->lc_nobj, lc->lc_lat[g] + (n - k), k * sizeof(void *));
    lc->lc_nobj += k;
    lc->lc_nlat[g] = n - k;
    merged += k;
    if (k < n)
      break;   /* the object cache is full (line 64) */
  }
  if (merged != 0) {
    lc->lc_cnt[PRD_LC_MERGES] += merged;
    lc_latent_publish(lc);
  }
  return merged;
}

/* Asks the driver for the grace period of state gp (section 4): once per state and record,
 * so that a generation costs at most one wake-up of the driver. */
static inline void lc_request(prd_lcache_t *lc, prd_gp_t gp)
{
  if (gp > lc->lc_requested) {
    lc->lc_requested = gp;
    prd_rcu_request_gp(gp);
  }
}

/* Moves generation g (or its newest k objects) to the latent slabs. */
static void lc_to_slabs(prd_cache_t *cp, prd_lcache_t *lc, int g, uint32_t k)
{
  uint32_t n = lc->lc_nlat[g];
  k = PRD_MIN(k, n);
  if (k == 0)
    return;
  prd_rcu_request_gp(lc->lc_gp[g]);
  prd__slab_defer_bulk(cp, lc->lc_lat[g] + (n - k), k, lc->lc_gp[g]);
  lc->lc_nlat[g] = n - k;
  lc_latent_publish(lc);
}

/* Puts buf (state gp) into the latent cache, which has room (section 3). */
static void lc_put(prd_cache_t *cp, prd_lcache_t *lc, void *buf, prd_gp_t gp)
{
  if (prd_unlikely(lc->lc_nlat[1] != 0 && lc->lc_gp[1] != gp)) {
    /* a new state: the older generation has ended (section 3); merge it, free what does
     * not fit (it is safe), and the open generation becomes the older one */
    if (lc->lc_nlat[0] != 0) {
      (void)lc_merge(lc);
      if (lc->lc_nlat[0] != 0) {
        if (prd__defer_safe(lc->lc_gp[0])) {
          prd__slab_free_bulk(cp, lc->lc_lat[0], lc->lc_nlat[0]);
          lc->lc_cnt[PRD_LC_FLUSHES]++;
        } else {
          /* by section 3 unreachable; stay correct: the latent slabs keep its state */
          lc_to_slabs(cp, lc, 0, lc->lc_nlat[0]);
        }
        lc->lc_nlat[0] = 0;
      }
    }
    if (lc->lc_nlat[1] != 0) {
      lc_request(lc, lc->lc_gp[1]);   /* the generation closes: its grace period (section 4) */
      void **t = lc->lc_lat[0];
      lc->lc_lat[0] = lc->lc_lat[1];
      lc->lc_lat[1] = t;
      lc->lc_nlat[0] = lc->lc_nlat[1];
      lc->lc_gp[0] = lc->lc_gp[1];
      lc->lc_nlat[1] = 0;
    }
  }
  if (lc->lc_nlat[1] == 0)
    lc->lc_gp[1] = gp;
  lc->lc_lat[1][lc->lc_nlat[1]++] = buf;
  /* §3.4, section 4: the open generation asks for its own grace period when it is half full
   * (early enough that it ends about when the object cache runs dry, PRUDENCE-NOTES §3) */
  if (prd_unlikely(lc->lc_nlat[1] == lc->lc_size / 2 + 1))
    lc_request(lc, lc->lc_gp[1]);
  lc_latent_publish(lc);
}

/* ---- the pre-flush job of the maintenance thread (section 6) -------------------------------- */
static _Atomic int pf_pending;      /* a record asked (or was busy) since the job last looked */

static void lc_preflush(prd_cache_t *cp, prd_lcache_t *lc, bool *backoff)
{
  (void)lc_merge(lc);
  uint32_t sum = lc->lc_nobj + lc_nlat(lc);
  if (sum > lc->lc_size) {
    uint32_t excess = sum - lc->lc_size;
    bool alloc_faster = lc->lc_rate_alloc > lc->lc_rate_defer;
    uint32_t k = alloc_faster ? (excess + 1) / 2 : excess;
    *backoff = *backoff || alloc_faster;
    uint32_t from1 = PRD_MIN(k, lc->lc_nlat[1]);
    lc_to_slabs(cp, lc, 1, from1);
    lc_to_slabs(cp, lc, 0, k - from1);
    lc->lc_cnt[PRD_LC_PREFLUSH] += k;
    (void)lc_merge(lc);   /* a grace period that ended meanwhile (001 §4.2) */
  }
  lc->lc_rate_alloc = lc->lc_rate_defer = 0;
  atomic_store_explicit(&lc->lc_want_preflush, 0, memory_order_relaxed);
}

static void preflush_cache(void *arg, prd_cache_t *cp)
{
  (void)arg;
  if (!(atomic_load_explicit(&cp->cache_defer_on, memory_order_acquire) & PRD_DEFER_LATENT))
    return;
  bool backoff = false;
  pthread_mutex_lock(&cp->cache_defer_lock);
  for (prd_lcache_t *lc = cp->cache_lcaches; lc != NULL; lc = lc->lc_next) {
    if (!atomic_load_explicit(&lc->lc_want_preflush, memory_order_relaxed))
      continue;
    if (!lc_steal(lc, false)) {
      /* its owner is busy with it: not idle time; look again at the next wake-up */
      atomic_store_explicit(&pf_pending, 1, memory_order_relaxed);
      continue;
    }
    lc_preflush(cp, lc, &backoff);
    lc_unsteal(lc);
  }
  pthread_mutex_unlock(&cp->cache_defer_lock);
  if (backoff)
    sched_yield();   /* allocation is faster than deferral: the application goes first */
}

/* The job (prd__maint_register): runs on the maintenance thread at each of its wake-ups (or
 * inline from a slow path with maint_thread=0), no lock held. */
static void preflush_job(void *arg)
{
  (void)arg;
  if (atomic_exchange_explicit(&pf_pending, 0, memory_order_acq_rel))
    prd__cache_foreach(preflush_cache, NULL);
}

/* Line 42, SCHEDULE_IDLE_PREFLUSH: one relaxed load when already asked.  Returns whether the
 * maintenance thread should be woken (the caller does it after leaving the record). */
static bool preflush_schedule(prd_lcache_t *lc)
{
  if (atomic_load_explicit(&lc->lc_want_preflush, memory_order_relaxed))
    return false;
  atomic_store_explicit(&lc->lc_want_preflush, 1, memory_order_relaxed);
  return !atomic_exchange_explicit(&pf_pending, 1, memory_order_acq_rel);
}

/* ---- the call_rcu path (PRD_CACHE_OBLIVIOUS, debugging caches) ------------------------------ */
static void defer_callback(struct prd_rcu_head *h)
{
  prd_defer_head_t *dh = (prd_defer_head_t *)h;
  prd_cache_t *cp = dh->dh_cache;
  void *buf = (char *)dh - cp->cache_rcu_off;
  atomic_fetch_add_explicit(&cp->cache_defer_cbs, 1, memory_order_relaxed);
  if (prd_unlikely(cp->cache_flags & PRD_CF_DEBUG)) {
    if (prd__debug_free_deferred(cp, buf) == 0)
      prd__slab_free(cp, buf);
    return;
  }
  prd_cache_free(cp, buf);
}

static void defer_call_rcu(prd_cache_t *cp, void *buf)
{
  if (prd_unlikely(cp->cache_flags & PRD_CF_DEBUG) && prd__debug_defer(cp, buf) != 0)
    return;
  if (prd_unlikely(!(atomic_load_explicit(&cp->cache_defer_on, memory_order_relaxed) &
                     PRD_DEFER_CALLRCU)))
    atomic_fetch_or_explicit(&cp->cache_defer_on, PRD_DEFER_CALLRCU, memory_order_relaxed);
  prd_defer_head_t *dh = (prd_defer_head_t *)((char *)buf + cp->cache_rcu_off);
  prd__annot_chunk_extra(cp, dh, sizeof(*dh));   /* past the object: ours while it is out */
  dh->dh_cache = cp;
  prd_call_rcu(&dh->dh_head, defer_callback);
}

/* ---- the public entry and the paths of prd_cache_alloc / prd_cache_free ------------------- */
void prd_cache_free_deferred(prd_cache_t *cp, void *buf)
{
  if (buf == NULL)
    return;
  if (prd_unlikely(cp == NULL)) {
    prd__error("prd_cache_free_deferred: NULL cache for buffer %p (ignored)", buf);
    return;
  }
  if (cp->cache_flags & PRD_CF_DEFERHEAD) {
    defer_call_rcu(cp, buf);
    return;
  }
  prd_gp_t gp = prd_rcu_get_state();                          /* line 35 */
  prd_lcache_t *lc = lc_lookup(cp, true);
  if (prd_unlikely(lc == NULL || lc_nested(lc))) {   /* no record (no memory), or nested in a
                                                      * constructor: straight to the latent slab */
    prd_rcu_request_gp(gp);
    prd__slab_defer_bulk(cp, &buf, 1, gp);
    return;
  }
  bool locked = lc_enter(lc);
  lc->lc_cnt[PRD_LC_DEFERRED]++;
  lc->lc_rate_defer++;
  if (prd_likely(lc_nlat(lc) < lc->lc_size)) {                /* line 39: fast path */
    lc_put(cp, lc, buf, gp);                                  /* line 40 */
    bool wake = false;
    if (lc->lc_nobj + lc_nlat(lc) > lc->lc_size)              /* line 41 */
      wake = preflush_schedule(lc);                           /* line 42 */
    lc_leave(lc, locked);
    if (prd_unlikely(wake))
      prd__maint_wake();
    return;
  }
  lc_flush(cp, lc);                                           /* line 45 */
  (void)lc_merge(lc);                                         /* line 46 */
  if (lc_nlat(lc) >= lc->lc_size) {                           /* lines 49-51 */
    int g = lc->lc_nlat[0] != 0 ? 0 : 1;
    lc_to_slabs(cp, lc, g, lc->lc_nlat[g]);
  }
  lc_put(cp, lc, buf, gp);                                    /* lines 47-48 */
  lc_leave(lc, locked);
}

static bool in_read_section(void)
{
  const struct prd_rcu_source *src = prd_rcu_get_source();
  return src->rs_read_ongoing != NULL && src->rs_read_ongoing() != 0;
}

/* The allocation miss (lines 7-33), lc_lock held. */
static PRD_NOINLINE void *lc_alloc_miss(prd_cache_t *cp, prd_lcache_t *lc, int flags)
{
  if (lc_merge(lc) != 0) {                                    /* lines 7-11 */
    lc->lc_cnt[PRD_LC_HITS]++;
    return lc->lc_obj[--lc->lc_nobj];
  }
  lc->lc_cnt[PRD_LC_MISSES]++;
  /* the latent objects that would have served this miss still wait: the grace period takes
   * longer than this cache holds.  Grow it (seed 004's magazine resizing, by another signal):
   * twice the size, up to lc_max, so that the deferrals of one grace period fit and merge by
   * pointer exchange instead of going through the latent slabs */
  if (lc_nlat(lc) != 0 && lc->lc_size < lc->lc_max) {
    lc->lc_size = PRD_MIN(2 * lc->lc_size, lc->lc_max);
    lc->lc_cnt[PRD_LC_RESIZES]++;
  }
  /* §3.4, bounded memory: past defer_latent_max_kb of latent-slab objects a refill waits for
   * their grace period rather than grow the cache, so that a thread deferring in a tight
   * loop reaches a steady state however slowly grace periods come (a loaded machine) */
  long cap_kb = prd__opt(defer_latent_max_kb);
  if (cap_kb > 0 && !(flags & PRD_NOSLEEP)) {
    prd_gp_t maxgp;
    uint64_t n = prd__slab_lat_pending(cp, &maxgp);
    if (n * cp->cache_chunksize > (uint64_t)cap_kb * 1024 && !prd__defer_safe(maxgp) &&
        !in_read_section()) {
      prd__rcu_request_expedited(maxgp);
      prd_rcu_wait_state(maxgp);
      lc->lc_cnt[PRD_LC_CAPWAITS]++;
    }
  }
  uint32_t nlat = lc_nlat(lc);
  if (nlat != 0)   /* the objects that would have served this miss: their grace period */
    lc_request(lc, lc->lc_gp[lc->lc_nlat[1] != 0 ? 1 : 0]);
  uint32_t want = lc->lc_size > nlat ? lc->lc_size - nlat : 1;   /* line 14 */
  if (want < lc->lc_size)
    lc->lc_cnt[PRD_LC_PARTIAL]++;
  size_t got = prd__slab_alloc_bulk(cp, lc->lc_obj, want, flags | PRD_NOSLEEP);
  if (got == 0 && nlat != 0 && !(flags & PRD_NOSLEEP) && !in_read_section()) {
    /* lines 31-32 for this thread's own latent objects: wait for the older generation */
    int g = lc->lc_nlat[0] != 0 ? 0 : 1;
    prd__rcu_request_expedited(lc->lc_gp[g]);
    prd_rcu_wait_state(lc->lc_gp[g]);
    lc->lc_cnt[PRD_LC_OOMWAITS]++;
    if (lc_merge(lc) != 0)
      return lc->lc_obj[--lc->lc_nobj];
  }
  if (got == 0)   /* the slab layer's own policy: reclaim, other latent objects, nofail */
    got = prd__slab_alloc_bulk(cp, lc->lc_obj, want, flags);
  if (got == 0)
    return NULL;
  lc->lc_cnt[PRD_LC_REFILLS]++;
  lc->lc_nobj = (uint32_t)got;
  return lc->lc_obj[--lc->lc_nobj];
}

void *prd__defer_alloc(prd_cache_t *cp, int flags)
{
  prd_lcache_t *lc = lc_lookup(cp, true);
  if (prd_unlikely(lc == NULL))
    return prd__slab_alloc(cp, flags);
  if (lc_nested(lc))
    return prd__mag_alloc(cp, flags);
  bool locked = lc_enter(lc);
  lc->lc_rate_alloc++;
  void *buf;
  if (prd_likely(lc->lc_nobj != 0)) {                         /* lines 3-6 */
    lc->lc_cnt[PRD_LC_HITS]++;
    buf = lc->lc_obj[--lc->lc_nobj];
  } else {
    buf = lc_alloc_miss(cp, lc, flags);
  }
  lc_leave(lc, locked);
  if (buf != NULL)
    prd__annot_object_out(cp, buf);
  return buf;
}

bool prd__defer_free(prd_cache_t *cp, void *buf)
{
  prd_lcache_t *lc = lc_lookup(cp, false);
  if (lc == NULL || lc_nested(lc))
    return false;   /* the caller frees through the magazine layer */
  bool locked = lc_enter(lc);
  if (lc->lc_nobj >= lc->lc_size - PRD_MIN(lc_nlat(lc), lc->lc_size - 1))
    lc_flush(cp, lc);
  prd__annot_object_in(cp, buf);   /* free for the user: a use after free is seen by ASan */
  lc->lc_obj[lc->lc_nobj++] = buf;
  lc_leave(lc, locked);
  return true;
}

/* ---- reaching other threads' records (sections 4 and 7) ----------------------------------- */
/* Moves a record's latent objects (with their states) to the latent slabs and its safe
 * objects to the slabs (lc_lock held). */
static void lc_drain(prd_cache_t *cp, prd_lcache_t *lc)
{
  lc_to_slabs(cp, lc, 0, lc->lc_nlat[0]);
  lc_to_slabs(cp, lc, 1, lc->lc_nlat[1]);
  if (lc->lc_nobj != 0) {
    prd__slab_free_bulk(cp, lc->lc_obj, lc->lc_nobj);
    lc->lc_nobj = 0;
  }
}

static void lc_unlist(prd_cache_t *cp, prd_lcache_t *lc)
{
  if (!lc->lc_listed)
    return;
  if (lc->lc_prev != NULL)
    lc->lc_prev->lc_next = lc->lc_next;
  else
    cp->cache_lcaches = lc->lc_next;
  if (lc->lc_next != NULL)
    lc->lc_next->lc_prev = lc->lc_prev;
  lc->lc_listed = false;
  lc_counters_fold(cp, lc);
}

static void defer_thread_exit(void *arg)
{
  (void)arg;
  prd_lcache_t *lc;
  while ((lc = defer_mine) != NULL) {
    bool locked = lc_enter(lc);
    prd_cache_t *cp = atomic_load_explicit(&lc->lc_cache, memory_order_relaxed);
    if (cp != NULL) {
      /* the record -> cache_defer_lock is against the order: try, and retry after leaving
       * (destroy may be waiting for this record under cache_defer_lock) */
      if (pthread_mutex_trylock(&cp->cache_defer_lock) != 0) {
        lc_leave(lc, locked);
        sched_yield();
        continue;
      }
      lc_drain(cp, lc);
      lc_unlist(cp, lc);
      atomic_store_explicit(&lc->lc_cache, NULL, memory_order_relaxed);
      pthread_mutex_unlock(&cp->cache_defer_lock);
    }
    lc_leave(lc, locked);
    defer_mine = lc->lc_tnext;
    lc_free(lc);
  }
  defer_key_armed = false;
}

bool prd__defer_oom(prd_cache_t *cp, int flags)
{
  /* other threads' latent caches to the latent slabs, where this path can reach them; the
   * caller may hold its own record's lock: try-locks only (section 8) */
  if (pthread_mutex_trylock(&cp->cache_defer_lock) == 0) {
    for (prd_lcache_t *lc = cp->cache_lcaches; lc != NULL; lc = lc->lc_next)
      if (lc_steal(lc, false)) {
        lc_to_slabs(cp, lc, 0, lc->lc_nlat[0]);
        lc_to_slabs(cp, lc, 1, lc->lc_nlat[1]);
        lc_unsteal(lc);
      }
    pthread_mutex_unlock(&cp->cache_defer_lock);
  }
  if (prd__slab_lat_merge_all(cp) != 0)
    return true;
  prd_gp_t maxgp;
  if (!prd__slab_lat_pending(cp, &maxgp) || (flags & PRD_NOSLEEP) || in_read_section())
    return false;
  prd__rcu_request_expedited(maxgp);                          /* lines 31-32 */
  prd_rcu_wait_state(maxgp);
  atomic_fetch_add_explicit(&cp->cache_oom_waits, 1, memory_order_relaxed);
  return prd__slab_lat_merge_all(cp) != 0;
}

void prd__defer_cache_destroy(prd_cache_t *cp)
{
  uint32_t on = atomic_load_explicit(&cp->cache_defer_on, memory_order_acquire);
  if (on & PRD_DEFER_CALLRCU)
    prd_rcu_barrier();   /* every callback that names cp has run */
  pthread_mutex_lock(&cp->cache_defer_lock);
  prd_lcache_t *lc;
  while ((lc = cp->cache_lcaches) != NULL) {
    (void)lc_steal(lc, true);
    lc_drain(cp, lc);
    lc_unlist(cp, lc);
    atomic_store_explicit(&lc->lc_cache, NULL, memory_order_relaxed);   /* owner frees it */
    lc_unsteal(lc);
  }
  pthread_mutex_unlock(&cp->cache_defer_lock);
  prd_gp_t maxgp;
  if (prd__slab_lat_pending(cp, &maxgp)) {
    if (in_read_section()) {
      prd__report("prd_cache_destroy(%s): called inside an RCU read-side section with "
                  "deferred objects waiting: they are reported as live", cp->cache_name);
    } else {
      prd__rcu_request_expedited(maxgp);
      prd_rcu_wait_state(maxgp);
      (void)prd__slab_lat_merge_all(cp);
    }
  }
}

void prd__defer_stats(prd_cache_t *cp, prd_cache_stats_t *st)
{
  uint64_t c[PRD_LC_NCOUNTERS];
  uint64_t latent = 0, objs = 0;
  pthread_mutex_lock(&cp->cache_defer_lock);
  memcpy(c, cp->cache_lc_dead, sizeof(c));
  for (prd_lcache_t *lc = cp->cache_lcaches; lc != NULL; lc = lc->lc_next) {
    (void)lc_steal(lc, true);
    for (int i = 0; i < PRD_LC_NCOUNTERS; i++)
      c[i] += lc->lc_cnt[i];
    latent += lc_nlat(lc);
    objs += lc->lc_nobj;
    lc_unsteal(lc);
  }
  pthread_mutex_unlock(&cp->cache_defer_lock);
  st->deferred_frees = c[PRD_LC_DEFERRED] +
                       atomic_load_explicit(&cp->cache_defer_cbs, memory_order_relaxed);
  st->oc_hits = c[PRD_LC_HITS];
  st->oc_misses = c[PRD_LC_MISSES];
  st->oc_hit_pct = c[PRD_LC_HITS] + c[PRD_LC_MISSES] == 0 ? 0.0
                   : 100.0 * (double)c[PRD_LC_HITS] /
                         (double)(c[PRD_LC_HITS] + c[PRD_LC_MISSES]);
  st->oc_refills = c[PRD_LC_REFILLS];
  st->oc_flushes = c[PRD_LC_FLUSHES];
  st->oc_churns = PRD_MIN(c[PRD_LC_REFILLS], c[PRD_LC_FLUSHES]);
  st->latent_cache_objs = latent;
  st->oc_objs = objs;
  st->oc_resizes = c[PRD_LC_RESIZES];
  st->latent_merges += c[PRD_LC_MERGES];
  st->partial_refills = c[PRD_LC_PARTIAL];
  st->preflush_moves = c[PRD_LC_PREFLUSH];
  st->latent_cap_waits = c[PRD_LC_CAPWAITS];
  st->oom_gp_waits = c[PRD_LC_OOMWAITS] +
                    atomic_load_explicit(&cp->cache_oom_waits, memory_order_relaxed);
}
