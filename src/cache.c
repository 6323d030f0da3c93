/*
 * cache.c: the object-cache front end: the public prd_cache_* API over the slab layer
 * (slab.c), the CPU layer of magazines (magazine.c), Prudence (defer.c) and buffer debugging
 * (debug.c), as illumos kmem_cache_alloc composes its layers (seed 002, seed 004).
 *
 * 1. What.  A cache is one object, prd_cache_t, that every layer keeps its part in: the slab
 *    layer's lists and hash, the CPU layer's magazine id and depot, Prudence's counters, the
 *    debug flags.  This file creates and destroys caches layer by layer, is the door through
 *    which objects leave for the user and come back, keeps the list of all caches (for
 *    reaps, statistics, leak reports and fork), and decides what an allocation does when the
 *    source is out of memory.  Where a layer below must enter this file's work, it goes
 *    through a hook this file sets at its first use (section 5): the slab layer's
 *    out-of-memory hook and debug.c's stray-pointer hook.
 *
 * 2. An allocation and a free through the layers.
 *        prd_cache_alloc:  [debug checks, out of line]  <-  magazine hit (magazine.h)
 *                          <-  magazine miss: depot, Prudence's safe latent objects
 *                          <-  slab layer  <-  vmem source  <-  os
 *        prd_cache_free:   [debug checks]  ->  magazine hit  ->  miss: depot  ->  slab layer
 *    The hit paths are the magazine layer's inline ones (magazine.h): this file adds the
 *    NULL-cache test, one test of cache_flags that sends a debugging cache, a NOTOUCH one or
 *    one without the free mark out of line, on a free the ownership check, and the free
 *    mark's step (magazine.c section 15): a free tests and writes it, an allocation clears
 *    it, so a double free is found wherever the first copy is.
 *    Ownership (prd_cache_free; prd_cache_free_deferred makes the same check, defer.c): the
 *    page map's entry for the buffer's granule must name this cache and the buffer must start
 *    one of its slab's buffers (pagemap.h prd__pm_owns: two dependent loads, a 32-bit compare,
 *    a multiplication, a rotation and a compare; no load of the slab or the buffer, so a
 *    foreign, stack or freed-slab address is never read).  Otherwise the free is reported,
 *    naming the cache the buffer belongs to, no cache, or how far into a buffer it points
 *    (prd__pm_bad_free), and nothing is touched.  The check comes before the free mark, so a
 *    pointer that is not one of the cache's buffers is never written.  NOTOUCH caches hand
 *    out integers, which have no entries, and skip it; debugging caches take their own checks
 *    (debug.c), which find the same misuses through the slab layer's hash.
 *    The debug hooks run at the boundary between the user and the layers, so an object
 *    parked in a magazine is free for the checks, and every object meets them whichever
 *    layer below serves it.
 *    Deferred frees (prd_cache_free_deferred) enter Prudence directly (defer.c): its latent
 *    generations live in the same CPU caches.
 *
 * 3. Creating and destroying.  prd_cache_create checks its arguments, takes the prd_cache_t
 *    from this file's own cache of them (cache_cache), lets the slab layer fill in the layout
 *    (prd__slab_cache_init, which also turns the debugging options into flags and calls
 *    debug.c), gives the cache its CPU layer (prd__mag_cache_init) and only then puts it on
 *    the list, where reaps and the statistics can see it.  prd_cache_destroy undoes it in
 *    the reverse order: Prudence's deferred buffers first (grace periods waited for), off the
 *    list, every magazine back to the slabs, then the deferred buffers a reap running
 *    meanwhile moved into the latent slabs (it held them outside the depot's lock while the
 *    drain ran) waited for too, the buffers still allocated reported (with their stacks
 *    when audited), then the slab layer's part (prd__slab_cache_fini).
 *    prd__cache_create_packed is prd_cache_create for malloc.c's size classes: the same
 *    checks and steps, with the internal flag PRD_CF_PACKED (slab.c section 2: the small
 *    layout in slabs of several pages), which no public flag can ask for.
 *
 * 4. Reclaim (002 §3.4; the working sets of seed 004 and libumem).  A reap of a cache
 *    returns the depot's magazines outside its working set to the slabs first, then makes
 *    free the latent slabs' deferred buffers whose grace period has ended, then returns the
 *    slab layer's free slabs outside its working set to the source (prd__slab_reap).
 *    prd_reap reaps every cache after taking back the magazines parked in other threads'
 *    caches; prd__cache_drain (vmem.c's quantum caches, when their arena runs short) does
 *    the same for one cache with no working set kept.
 *    Out of memory (the slab layer's hook, section 5) an allocation applies its flags:
 *    deferred objects wait for their grace period first (seed 001 Algorithm 1 lines 31-32,
 *    defer.c), at most twice; then PRD_NOSLEEP fails; PRD_SLEEP calls every cache's reclaim
 *    callback, reaps every cache of all its free slabs (the working set is a hedge against
 *    thrashing; failing an allocation is worse) and retries once; PRD_NOFAIL repeats through
 *    the nofail callback.
 *    Decay (option decay_ms; jemalloc's decay, mimalloc's purge): a job of the maintenance
 *    thread (cache_decay, registered at this file's first use) runs every decay_ms / 2: it
 *    reaps every cache, a depot that took and gave no full or tagged magazine since the last
 *    pass entirely (an idle depot has no working set to keep; a busy one keeps its working set
 *    of maint_interval, and of its tagged magazines gives back only the pass's spares,
 *    magazine.c section 13), the latent slabs' deferred buffers whose grace period has ended
 *    (otherwise merged only by a refill from the slabs, which a busy depot whose tagged
 *    magazines circulate may never make), the slabs outside a working set that is at most that
 *    half period
 *    (slab.c section 6); then it runs the heap arena's decay pass, which decommits the free
 *    pages that stayed free for a whole pass period (vmem.c section 16).  So memory freed
 *    and left alone is back with the kernel within about four passes, 2 x decay_ms (depot,
 *    slab, heap arena; the thread wakes once a second, so not sooner than that), and a slab
 *    free long enough is in the heap arena, reusable by every other size class, after at
 *    most decay_ms.  It takes cache_reap_lock with a try-lock (the maintenance work may run
 *    inline on a slow path; a reap running now does the same work); cache_decay_last_ns is
 *    read before it only as a hint and written under it (relaxed: a stale read at worst runs
 *    a pass early or late by one wake-up, never two passes at once).  A pass that leaves
 *    more than DECAY_THREAD_BYTES of dirty free heap pages for the next one asks for the
 *    maintenance thread (prd__maint_wake), so a program whose slow paths ran one pass inline
 *    (at most once a second) gets the rest back while it idles, where the thread would not
 *    make a single-threaded process multi-threaded (maint.c section 2, option maint_alone).  Two other events ask for it while no thread runs, since a
 *    program that frees and then idles runs no slow path that would get to a pass: a thread
 *    that parked more than 8 MiB net in depots (magazine.c section 9), and a large block
 *    freed to the heap arena while it holds more than DECAY_THREAD_BYTES dirty
 *    (prd__cache_decay_nudge, from malloc.c).  It registers no predicate: maint.c asks every
 *    job's predicate on each slow path while the thread is not started, and that would be a
 *    cost on every magazine miss.  Nothing of it runs on a hit path.
 *    Growth reap (the slab layer's growth hook, slab.c section 6): after every 4 MiB of new
 *    slabs and of malloc's large blocks taken from the heap arena (which make no slab, so
 *    malloc.c counts them itself: prd__slab_grown), a depot that moved no magazine, or whose
 *    class made no allocation miss and moved no tagged magazine (depot_draining: it may have
 *    taken full ones, from frees), since the previous growth reap is emptied into its slabs
 *    (cache_grow_reap): a finished phase's
 *    memory, parked in the depot of its class or still arriving there (a program that evicts
 *    old values of one size for new ones of another frees into the old class all through the
 *    new one's growth), goes to the heap arena (a packed cache's free slabs go at once, and so
 *    do all free slabs of such a cache of the heap arena: its quantum caches hold malloc's
 *    blocks of 5-8 pages) where the growing class or blocks take it, within two growth reaps
 *    rather than decay_ms / 2.  It goes GROW_REAP_SLICE objects a call, the
 *    slab layer calling it again at each new slab while work is left (cache_grow_left), so
 *    that no one allocation carries a whole phase's objects back to their slabs.
 *    A class that allocates again before the caches grew by half of what the growth reaps gave
 *    from its depot since it last allocated (cache_grow_first, cache_grow_given: the marks
 *    since its first such reap, the bytes given) alternates with the others: most of what it
 *    gave served no growth, the heap arena purged it, and the class faults it back in.  Its
 *    depot is its working set then (cache_grow_kept): growth reaps pass it by until a decay
 *    pass finds it idle, or the caches grew by twice what it came back for since it last
 *    allocated (grow_kept).  The rule's cost: classes that take turns keep their working
 *    sets side by side instead of one after the other, for as long as they take turns.
 *    The reap runs inside prd__vmem_heap_reuse(true/false): the heap arena keeps what it
 *    frees dirty for that class and purges it as later allocations go (vmem.c section 16).
 *    The internal caches (last on the list) then give back all their free slabs: the
 *    magazines a dropped phase filled, freed by those depot reaps, would otherwise hold
 *    megabytes of free slabs until a decay pass.  Same try-lock and reclaim guard as the
 *    decay pass.
 *    What reaches the heap arena does not wait for decay to leave the resident set: the
 *    arena's dirty bound (vmem.c section 16, options heap_dirty_pct and heap_dirty_min)
 *    decommits, in the freeing thread (a slice a call, the rest by the maintenance thread),
 *    the free pages beyond a few percent of the heap.  So decay is for the last few percent
 *    and for the memory above the heap arena (depots, slabs); the bound is what keeps a
 *    finished phase's peak from staying resident while the program goes on.
 *    prd_reap ends with the heap arena's pass in its `all` form, which decommits every free
 *    page at once; prd__cache_trim (malloc_trim) also reaps every free slab and magazine
 *    regardless of working sets.
 *
 * 5. Hooks.  Two this file offers: prd__cache_set_grow_hook, called at the start of every
 *    growth reap (section 4) with no lock held, for the holding above the caches to give back
 *    what it kept unused for a while (malloc.c's huge blocks kept since the previous growth
 *    reap: a kept block beside a heap that grows is memory counted twice); and
 *    prd__cache_set_reap_hook, the one holding above the caches
 *    that a reap gives back too (malloc.c's kept huge blocks, registered at its start-up):
 *    prd_reap, prd__cache_trim and the pressure reclaim (reclaim_all: a heap import or a
 *    slab that found no memory) call it first, with no lock held, so that kept blocks never
 *    make an allocation of another size fail.  And prd__cache_set_leak_hook, that holding's
 *    part of a leak report (malloc.c's big blocks still allocated, which no cache holds),
 *    called after the caches' buffers are listed, with prd__cache_set_leak_filter, asked of
 *    each buffer before it is listed (under its cache's lock, so it takes none): false for
 *    one that holding has already given up, the program's free of it only waiting for a
 *    grace period (malloc.c's deferred blocks, which are buffers of the heap arena's quantum
 *    caches until their callbacks run).
 *    Hooks this file sets (once, at its first use, before any user cache exists):
 *    - prd__slab_set_oom_hook(cache_oom): the slab layer found no slab and the source no
 *      memory; the hook applies section 4's policy with no lock held and says retry or fail.
 *    - prd__debug_set_locate(cache_locate): debug.c reports a free of a pointer that starts
 *      no buffer of its cache; the hook finds the buffer of the cache that holds the pointer,
 *      or another cache that does, so the report can name it.
 *
 * 6. Debugging that walks caches (002 §6.7) lives here, the buffer-level checks in debug.c:
 *    the leak report walks every cache's allocated buffers (after every magazine went back
 *    to the slabs: objects parked there are free, not leaked), and a cache destroyed with
 *    buffers still allocated lists the first PRD_LIVE_LISTED of them; debug.c prints each.
 *
 * 7. Locking.  cache_list_lock protects the list of all caches; cache_reap_lock serializes
 *    whole-process reaps and cache destruction (a cache cannot vanish under a reap).  Order:
 *        cache_reap_lock -> cache_list_lock -> a cache's cache_lock (slab.c section 8)
 *    The magazine layer's reap lock comes before both and its thread registry after them
 *    (magazine.c's order: the statistics snapshot holds cache_list_lock while it reads thread
 *    caches).  A thread inside a reap does not start a nested pressure reap (cache_in_reclaim),
 *    which would wait for the reap lock it holds.  Reclaim callbacks and destructors run
 *    with no cache_lock held; a reclaim callback must not create or destroy caches.
 *
 * 8. Node caches (prd_node_cache, for prudence.hpp's prd::cache_allocator).  One cache per
 *    (size, alignment) for the whole process, named "prd::node<SIZE,ALIGN>" (at most 27
 *    characters: size up to 1 GiB, alignment up to a page), made at first use and never
 *    destroyed, as std::allocator's memory outlives every container: a global container,
 *    destroyed after anything a destructor could run, still frees into a live cache.  The
 *    lookup lives here, not in the C++ header, so that every copy of the header's code (a
 *    shared library built with hidden visibility has its own) finds the same cache.  The
 *    caches form a push-only list (node_caches, linked through cache_node_next) keyed by
 *    name: a lookup reads it with no lock; a miss creates the cache with no lock held and
 *    publishes it with a compare-and-swap, and a thread that loses the race to an equal cache
 *    destroys its own (no buffer was taken from it) and returns the winner's.  No lock, so
 *    nothing for fork to take.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "magazine.h"
#include "pagemap.h"

#define PRD_CACHE_MAX_BUF (1ul << 30)   /* larger objects do not belong in a cache */
#define PRD_LIVE_LISTED   16   /* live buffers listed at cache destroy (as vmem's leaks):
                                  enough to see the pattern, then a count */
#define PRD_OOM_WAITS     2    /* grace-period waits before the flags' policy: a second only
                                  if the first one gave buffers back */
#define GROW_REAP_SLICE   4096   /* objects a growth reap gives back a call (section 4):
                                    a fraction of a millisecond */
#define DECAY_THREAD_BYTES ((size_t)4 << 20)   /* dirty heap bytes worth a thread of its own
                                  (section 4): one heap-arena import */

static prd_cache_t cache_cache;          /* prd_cache_t itself */
static pthread_mutex_t cache_list_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cache_reap_lock = PTHREAD_MUTEX_INITIALIZER;
static prd_cache_t *cache_list;          /* newest first: the internal caches come last */
static _Atomic uint64_t cache_decay_last_ns;   /* when the decay job last ran (section 4) */
static int (*_Atomic cache_nofail_cb)(void);
static _Thread_local bool cache_in_reclaim;  /* a reclaim callback that allocates can't recurse */

/* ---- the list of all caches ------------------------------------------------------------- */
static void cache_list_insert(prd_cache_t *cp)
{
  pthread_mutex_lock(&cache_list_lock);
  cp->cache_prev = NULL;
  cp->cache_next = cache_list;
  if (cache_list != NULL)
    cache_list->cache_prev = cp;
  cache_list = cp;
  pthread_mutex_unlock(&cache_list_lock);
}

/* Calls fn on every cache on the list (user caches, then internal), under cache_list_lock. */
static void cache_foreach(void (*fn)(void *arg, prd_cache_t *cp), void *arg)
{
  pthread_mutex_lock(&cache_list_lock);
  for (prd_cache_t *cp = cache_list; cp != NULL; cp = cp->cache_next)
    fn(arg, cp);
  pthread_mutex_unlock(&cache_list_lock);
}

static bool cache_oom(prd_cache_t *cp, int flags, unsigned *state);
static void cache_decay(void *arg);
static bool cache_grow_reap(bool mark);
static void *cache_locate(prd_cache_t *cp, const void *addr, prd_bufctl_t **bcpp, char *owner);

static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_init_once(void)
{
  prd__slab_init();   /* the slab layer's own caches */
  int rc = prd__slab_cache_init(&cache_cache, "prd_cache", sizeof(prd_cache_t), 64, NULL, NULL,
                                NULL, NULL, NULL, PRD_CACHE_NODEBUG | PRD_CF_INTERNAL);
  PRD_ASSERT(rc == 0);
  (void)rc;
  prd_cache_t *ip;
  for (size_t i = 0; (ip = prd__slab_internal_cache(i)) != NULL; i++)
    cache_list_insert(ip);
  cache_list_insert(&cache_cache);
  prd__slab_set_oom_hook(cache_oom);
  prd__slab_set_grow_hook(cache_grow_reap);
  prd__debug_set_locate(cache_locate);
  atomic_store_explicit(&cache_decay_last_ns, prd__now_ns(), memory_order_relaxed);
  (void)prd__maint_register(cache_decay, NULL, NULL, false);   /* section 4 */
}

static void cache_init(void)
{
  pthread_once(&cache_once, cache_init_once);
}

/* ---- the public front end ------------------------------------------------------------------- */
/* The out-of-line front end (cache_alloc_slow, cache_free_slow) is for buffer debugging
 * (and, for a free, NOTOUCH); a cache without the free mark takes the inline paths less the
 * mark's test and clear (section 2).  A cache with Prudence deferrals stays on the magazine
 * layer's hit path: its latent generations live in the same CPU caches (defer.c section 2). */

/* The debug hooks run at the boundary between the user and the layers, so objects parked in
 * magazines are "free" for the checks.  A buffer whose constructor failed in debug.c goes
 * back to the slab layer as it came. */
static PRD_NOINLINE void *cache_alloc_slow(prd_cache_t *cp, int flags)
{
  void *buf = prd__mag_alloc(cp, flags, false);
  if (buf == NULL || !(cp->cache_flags & PRD_CF_DEBUG))
    return buf;   /* no debugging: a cache without the free mark */
  if (prd_likely(prd__debug_alloc(cp, buf, flags) != NULL))
    return buf;
  prd__slab_free(cp, buf);
  pthread_mutex_lock(cp->cache_lock);
  cp->cache_alloc_fails++;
  pthread_mutex_unlock(cp->cache_lock);
  errno = ENOMEM;
  return NULL;
}

static PRD_NOINLINE void cache_free_slow(prd_cache_t *cp, void *buf)
{
  if ((cp->cache_flags & PRD_CF_DEBUG) && prd__debug_free(cp, buf) != 0)
    return;
  prd__mag_free(cp, buf, true);   /* no free mark: the top round is compared */
}

void *prd_cache_alloc(prd_cache_t *cp, int flags)
{
  if (prd_unlikely(cp == NULL)) {
    prd__report("prd_cache_alloc: NULL cache");
    errno = EINVAL;
    return NULL;
  }
  /* one flag test keeps a marked cache on its path; a cache without the mark (a
   * constructor, an 8-byte chunk) takes the same one less the mark's clear, inline too (out
   * of line it cost 12 instructions more); buffer debugging goes out of line */
  if (prd_unlikely(cp->cache_flags & (PRD_CF_DEBUG | PRD_CF_NOMARK))) {
    /* the flags read again here: the hit path above tests them in memory, one instruction */
    __asm__("" ::: "memory");
    if (cp->cache_flags & PRD_CF_DEBUG)
      return cache_alloc_slow(cp, flags);
    return prd__mag_alloc(cp, flags, false);
  }
  /* the CPU layer, then the slab layer (magazine.c); the free mark cleared on the way out */
  return prd__mag_alloc(cp, flags, true);
}

void prd_cache_free(prd_cache_t *cp, void *buf)
{
  if (buf == NULL)
    return;
  if (prd_unlikely(cp == NULL)) {
    prd__error("prd_cache_free: NULL cache for buffer %p (not freed)", buf);
    return;
  }
  /* one flag test: buffer debugging (checks of its own, out of line), NOTOUCH (integers, not
   * in the page map) or no free mark (the ownership check, then the hit with its top-round
   * compare, inline too); else the ownership check (section 2) and the free mark inline */
  if (prd_unlikely(cp->cache_flags & (PRD_CF_DEBUG | PRD_CACHE_NOTOUCH | PRD_CF_NOMARK))) {
    /* the flags read again here: the path below tests them in memory, one instruction */
    __asm__("" ::: "memory");
    if (cp->cache_flags & (PRD_CF_DEBUG | PRD_CACHE_NOTOUCH))
      cache_free_slow(cp, buf);
    else if (prd__pm_check(cp, buf, "free"))
      prd__mag_free(cp, buf, true);   /* no free mark: the top round is compared */
    return;
  }
  /* a bad pointer and a double free stop here; then the CPU layer, the slab layer */
  if (prd__pm_check(cp, buf, "free") && prd__mark_free(cp, buf, "double free"))
    prd__mag_free(cp, buf, false);
}

/* ---- creating and destroying caches (section 3) --------------------------------------------- */
static _Atomic bool cache_leaks_at_exit;   /* a cache with PRD_CACHE_LEAKS was made */

/* The report at exit: from this object's destructor, after the program's atexit handlers
 * and its own destructors, so that blocks they free are not listed (an atexit handler ran
 * before the destructors of every object).  The main program is finalized before the shared
 * objects it needs; linked into it, the lowest priority runs this after its default ones.
 * Another shared object's destructors may still come after it. */
__attribute__((destructor(101))) static void cache_leaks_fini(void)
{
  if (atomic_load_explicit(&cache_leaks_at_exit, memory_order_relaxed))
    prd_leak_report(stderr, 0);
}

/* A cache from checked arguments (section 3), its slab layer and CPU layer set up, not yet on
 * the list; NULL with errno when it cannot be made. */
static prd_cache_t *cache_make(const char *name, size_t size, size_t align, prd_ctor_fn *ctor,
                               prd_dtor_fn *dtor, prd_reclaim_fn *reclaim, void *priv,
                               prd_vmem_t *source, uint32_t flags);

static prd_cache_t *cache_create(const char *name, size_t size, size_t align, prd_ctor_fn *ctor,
                                 prd_dtor_fn *dtor, prd_reclaim_fn *reclaim, void *priv,
                                 prd_vmem_t *source, int cflags, uint32_t xflags);

prd_cache_t *prd_cache_create(const char *name, size_t size, size_t align, prd_ctor_fn *ctor,
                              prd_dtor_fn *dtor, prd_reclaim_fn *reclaim, void *priv,
                              prd_vmem_t *source, int cflags)
{
  return cache_create(name, size, align, ctor, dtor, reclaim, priv, source, cflags, 0);
}

/* ---- node caches (section 8) ------------------------------------------------------------ */
static _Atomic(prd_cache_t *) node_caches;

/* The node cache named name, of size-byte objects, on the list from first up to (not
 * including) stop, or NULL (the size too: a name cut at PRD_CACHE_NAME_MAX names several). */
static prd_cache_t *node_find(prd_cache_t *first, prd_cache_t *stop, const char *name,
                              size_t size)
{
  for (prd_cache_t *cp = first; cp != stop; cp = cp->cache_node_next)
    if (cp->cache_bufsize == size && strcmp(cp->cache_name, name) == 0)
      return cp;
  return NULL;
}

prd_cache_t *prd_node_cache(size_t size, size_t align)
{
  char name[PRD_CACHE_NAME_MAX];
  int len = snprintf(name, sizeof(name), "prd::node<%zu,%zu>", size, align);
  if (len < 0 || (size_t)len >= sizeof(name)) {   /* no slab holds such a size anyway */
    errno = EINVAL;
    return NULL;
  }
  prd_cache_t *head = atomic_load_explicit(&node_caches, memory_order_acquire);
  prd_cache_t *cp = node_find(head, NULL, name, size);
  if (cp != NULL)
    return cp;
  prd_cache_t *made = prd_cache_create(name, size, align, NULL, NULL, NULL, NULL, NULL, 0);
  if (made == NULL)
    return NULL;
  prd_cache_t *seen = head;
  for (;;) {
    made->cache_node_next = seen;
    if (atomic_compare_exchange_weak_explicit(&node_caches, &seen, made, memory_order_release,
                                              memory_order_acquire))
      return made;
    /* seen is the new head: look at what was pushed since head */
    if ((cp = node_find(seen, head, name, size)) != NULL) {
      prd_cache_destroy(made);
      return cp;
    }
    head = seen;
  }
}

prd_cache_t *prd__cache_create_packed(const char *name, size_t size, size_t align)
{
  return cache_create(name, size, align, NULL, NULL, NULL, NULL, NULL, 0, PRD_CF_PACKED);
}

prd_cache_t *prd__cache_create_internal(const char *name, size_t size, size_t align)
{
  return cache_create(name, size, align, NULL, NULL, NULL, NULL, NULL,
                      PRD_CACHE_NOMAGAZINE | PRD_CACHE_NODEBUG, PRD_CF_INTERNAL);
}

/* prd_cache_create with internal flags xflags (PRD_CF_PACKED) added after the checks. */
static prd_cache_t *cache_create(const char *name, size_t size, size_t align, prd_ctor_fn *ctor,
                                 prd_dtor_fn *dtor, prd_reclaim_fn *reclaim, void *priv,
                                 prd_vmem_t *source, int cflags, uint32_t xflags)
{
  cache_init();
  const char *what = NULL;
  size_t page = prd__os_page_size();
  if (name == NULL)
    what = "NULL name";
  else if (size == 0)
    what = "size 0";
  else if (size > PRD_CACHE_MAX_BUF)
    what = "size larger than 1 GiB";
  else if (align != 0 && !PRD_ISP2(align))
    what = "alignment not a power of two";
  else if (align > page)
    what = "alignment larger than a page";
  else if (cflags & ~(PRD_CACHE_NOTOUCH | PRD_CACHE_NODEBUG | PRD_CACHE_NOMAGAZINE |
                      PRD_CACHE_DEBUG_ALL | PRD_CACHE_OBLIVIOUS))
    what = "unknown cflags";
  else if ((cflags & PRD_CACHE_OBLIVIOUS) && (cflags & PRD_CACHE_NOTOUCH))
    what = "PRD_CACHE_OBLIVIOUS needs memory for its call_rcu head (not with NOTOUCH)";
  if (what != NULL) {
    prd__report("prd_cache_create(%s, size %zu, align %zu): %s", name ? name : "NULL", size,
                align, what);
    errno = EINVAL;
    return NULL;
  }
  if (source == NULL && (source = prd_heap_arena()) == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  uint32_t flags = (uint32_t)cflags | xflags;
  if (!(flags & PRD_CACHE_NODEBUG))
    flags |= (uint32_t)prd__opt(debug) & PRD_CACHE_DEBUG_ALL;
  prd_cache_t *cp = cache_make(name, size, align, ctor, dtor, reclaim, priv, source, flags);
  if (cp == NULL)
    return NULL;
  cache_list_insert(cp);
  if (flags & PRD_CACHE_LEAKS)   /* the leak report at exit (002 §6.7) */
    atomic_store_explicit(&cache_leaks_at_exit, true, memory_order_relaxed);
  return cp;
}

/* A cache that cache_make made and no one else saw: no buffer was allocated from it. */
static void cache_unmake(prd_cache_t *cp)
{
  prd__slab_cache_fini(cp);
  prd__slab_free(&cache_cache, cp);
}

/* The magazine layer's own caches (magazine.c section 2), one per row of its size table:
 * object caches without magazines, internal, made here because object caches are this
 * file's.  A row that another thread filled first gets its cache, and ours is unmade before
 * anyone could see it.  False when one cannot be made (no memory): the creation that wanted
 * magazines fails, and the next one tries the rows still missing. */
static bool cache_mag_types(void)
{
  size_t row, size, align;
  char name[PRD_CACHE_NAME_MAX];
  while (prd__mag_type_missing(&row, name, &size, &align)) {
    prd_cache_t *cp = cache_make(name, size, align, NULL, NULL, NULL, NULL, prd_heap_arena(),
                                 PRD_CACHE_NOMAGAZINE | PRD_CACHE_NODEBUG | PRD_CF_INTERNAL);
    if (cp == NULL)
      return false;
    if (prd__mag_type_publish(row, cp))
      cache_list_insert(cp);
    else
      cache_unmake(cp);
  }
  return true;
}

static prd_cache_t *cache_make(const char *name, size_t size, size_t align, prd_ctor_fn *ctor,
                               prd_dtor_fn *dtor, prd_reclaim_fn *reclaim, void *priv,
                               prd_vmem_t *source, uint32_t flags)
{
  prd_cache_t *cp = prd__slab_alloc(&cache_cache, PRD_SLEEP);
  if (cp == NULL)
    return NULL;
  if (prd__slab_cache_init(cp, name, size, align, ctor, dtor, reclaim, priv, source, flags) !=
      0) {
    /* EINVAL: no layout; ENOSPC: no cache id left (pagemap.c section 3); ENOMEM: no page
     * for its lock, an out-of-memory failure like any other, not reported */
    int err = errno;
    if (err != ENOMEM)
      prd__report("prd_cache_create(%s, size %zu, align %zu): %s", name, size, align,
                  err == ENOSPC ? "no cache id left (each live memory cache holds one of 65535)"
                                : "no slab layout fits");
    prd__slab_free(&cache_cache, cp);
    errno = err;
    return NULL;
  }
  /* the CPU layer in front (magazine.c), once its own caches exist */
  int rc = prd__mag_cache_init(cp);
  if (rc == PRD__MAG_NEED_TYPES)
    rc = cache_mag_types() ? prd__mag_cache_init(cp) : -1;
  if (rc != 0) {
    prd__slab_cache_fini(cp);   /* no slab yet: the lock, and the page map's id */
    prd__slab_free(&cache_cache, cp);
    errno = ENOMEM;
    return NULL;
  }
  return cp;
}

static void cache_report_live(prd_cache_t *cp);

void prd_cache_destroy(prd_cache_t *cp)
{
  if (cp == NULL) {
    prd__report("prd_cache_destroy: NULL cache (ignored)");
    return;
  }
  if (cp->cache_flags & PRD_CF_INTERNAL) {
    prd__error("prd_cache_destroy: %s is one of the library's own caches (ignored)", cp->cache_name);
    return;
  }
  /* deferred buffers first: latent caches drained, grace periods waited for (defer.c);
   * refused inside a read-side section */
  if (!prd__defer_cache_destroy(cp))
    return;
  pthread_mutex_lock(&cache_reap_lock);
  pthread_mutex_lock(&cache_list_lock);
  if (cp->cache_prev != NULL)
    cp->cache_prev->cache_next = cp->cache_next;
  else
    cache_list = cp->cache_next;
  if (cp->cache_next != NULL)
    cp->cache_next->cache_prev = cp->cache_prev;
  pthread_mutex_unlock(&cache_list_lock);
  /* no reap can be inside this cache now (a reap holds cache_reap_lock from start to end),
   * and none can find it any more: the destructors below run without the reap lock */
  pthread_mutex_unlock(&cache_reap_lock);
  /* off the list, no statistics snapshot or reap can see the CPU layer go: every magazine's
   * rounds back to the slabs first (magazine.c) */
  prd__mag_cache_fini(cp);
  /* a reap (a depot reap or the magazine layer's tick) may have held latent magazines of
   * this cache outside the depot's lock while the drain above ran, and put them into the
   * latent slabs after it: none can still be at work now (off the list, the CPU layer gone),
   * so what they put there waits for its grace period here */
  prd__defer_cache_settle(cp);

  pthread_mutex_lock(cp->cache_lock);
  uint64_t live = cp->cache_bufs_inuse;
  if (live > 0)
    cache_report_live(cp);   /* names them, with their stacks when audited */
  pthread_mutex_unlock(cp->cache_lock);
  prd__slab_cache_fini(cp);   /* the live buffers' slabs too (slab.c) */
  prd__slab_free(&cache_cache, cp);
  if (live > 0)
    prd__report_done();
}

/* ---- reclaiming (section 4) ------------------------------------------------------------------ */
/* The slab half of a reap and of a decay pass, after the depot's: deferred buffers in the
 * latent slabs whose grace period has ended are free, merged now so that their slabs can go
 * with it (else they wait for a refill from the slabs, which a depot whose tagged magazines
 * circulate may never make); then the free slabs outside the working set (all of them when
 * `all`). */
static void cache_reap_slabs(prd_cache_t *cp, bool all)
{
  (void)prd__slab_lat_merge_all(cp);
  prd__slab_reap(cp, all);
}

static void cache_reap(prd_cache_t *cp, bool all)
{
  prd__mag_depot_reap(cp, all);   /* the depot's magazines outside its working set first */
  cache_reap_slabs(cp, all);
}

/* The head of the cache list, for a walk under cache_reap_lock: the list only loses members
 * under it, and new caches go in at the head, behind the walker, so the walk is safe with the
 * list lock dropped. */
static prd_cache_t *cache_first(void)
{
  pthread_mutex_lock(&cache_list_lock);
  prd_cache_t *cp = cache_list;
  pthread_mutex_unlock(&cache_list_lock);
  return cp;
}

/* Whether a count is what *last says, which takes it anew (depot_idle, depot_draining). */
static bool unchanged(uint64_t now, uint64_t *last)
{
  bool same = now == *last;
  *last = now;
  return same;
}

/* Whether cp's depot took and gave no full or tagged magazine since *last was taken; takes it
 * anew. */
static bool depot_idle(prd_cache_t *cp, uint64_t *last)
{
  return unchanged(prd__mag_depot_moves(cp), last);
}

/* The growth reap's test (section 4): no allocation miss of cp visited its depot and no
 * tagged magazine moved since the last look (*last: the count then).  Frees may still fill
 * it: a class whose blocks a program goes on freeing while it allocates another (a cache that
 * evicts old values of one size for new ones of another) is a finished phase too.  A class
 * that allocates is not, though its refills come from its slabs and no magazine moves (a
 * program that alternates two classes, each freed whole before the other grows, had the
 * growing one's frees reaped as they came, purged and faulted back at every turn).  A depot
 * whose deferred objects circulate as tagged magazines is busy however they move. */
static bool depot_draining(prd_cache_t *cp, uint64_t *last)
{
  return unchanged(prd__mag_depot_allocs(cp), last);
}

/* The growth reap's marks so far (cache_reap_lock). */
static uint64_t cache_grow_marks;

/* cp allocated again since the last mark (cache_reap_lock held): if the growth reaps gave its
 * depot back since it last allocated, and the caches grew by less than half of that meanwhile,
 * most of it cannot have served their growth: the heap arena purged it, and cp faults it back
 * in now.  A class that comes back that soon alternates with the others, and its depot is its
 * working set: growth reaps leave it alone from now on (section 4). */
static void grow_came_back(prd_cache_t *cp)
{
  if (cp->cache_grow_given != 0 &&
      (cache_grow_marks - cp->cache_grow_first) * PRD_SLAB_GROW_BYTES < cp->cache_grow_given / 2)
    cp->cache_grow_kept = cp->cache_grow_given;
  cp->cache_grow_given = 0;
  cp->cache_grow_used = cache_grow_marks;
}

/* Whether growth reaps leave cp's depot alone (cache_reap_lock held): its class alternates
 * with others, unless the caches have grown by twice what it came back for since it last
 * allocated (its turns are over, and the growth needs its memory; with decay off no pass
 * would ever say so). */
static bool grow_kept(prd_cache_t *cp)
{
  if (cp->cache_grow_kept != 0 && (cache_grow_marks - cp->cache_grow_used) *
                                      PRD_SLAB_GROW_BYTES >= 2 * cp->cache_grow_kept)
    cp->cache_grow_kept = 0;
  return cp->cache_grow_kept != 0;
}

/* Reaps every cache (cache_reap_lock held): user caches first, then the internal caches,
 * which the user caches' slabs just gave bufctls and slab structures back to. */
static void reap_all_locked(bool all)
{
  for (prd_cache_t *cp = cache_first(); cp != NULL; cp = cp->cache_next)
    cache_reap(cp, all);
}

static void (*_Atomic cache_reap_hook)(void);   /* section 5 */
static void (*_Atomic cache_grow_hook)(void);   /* section 5 */
static void (*_Atomic cache_leak_hook)(prd__debug_live_t *lc);   /* section 5 */
static bool (*_Atomic cache_leak_filter)(const void *buf);        /* section 5 */

/* Memory pressure: what is kept above the caches (the reap hook: malloc's kept huge blocks,
 * which may be what the kernel is short of), every cache's owner asked to give memory back,
 * then the threads' magazines taken back, the callbacks' frees among them (a callback frees
 * into its thread's magazine, the allocating thread's own included, where the retry in the
 * slab layer would not see them), then every free slab reaped, and the heap arena's pass in
 * its `all` form.  No lock held on entry
 * (mag_reap_lock comes before cache_reap_lock). */
static void reclaim_all(void)
{
  if (cache_in_reclaim)
    return;
  void (*hook)(void) = atomic_load_explicit(&cache_reap_hook, memory_order_acquire);
  if (hook != NULL)
    hook();
  cache_in_reclaim = true;
  pthread_mutex_lock(&cache_reap_lock);
  pthread_mutex_lock(&cache_list_lock);
  prd_cache_t *first = cache_list;
  pthread_mutex_unlock(&cache_list_lock);
  for (prd_cache_t *cp = first; cp != NULL; cp = cp->cache_next)
    if (cp->cache_reclaim != NULL)
      cp->cache_reclaim(cp->cache_private);
  pthread_mutex_unlock(&cache_reap_lock);
  prd__mag_reap_threads(NULL);
  pthread_mutex_lock(&cache_reap_lock);
  reap_all_locked(true);
  pthread_mutex_unlock(&cache_reap_lock);
  /* the heap arena's free pages decommitted and its wholly free blocks unmapped (vmem.c
   * section 16 keeps them for reuse): what a mapping elsewhere, at an address-space limit,
   * may be short of */
  (void)prd__vmem_heap_decay(true);
  cache_in_reclaim = false;
}

void prd__cache_reclaim(void)
{
  reclaim_all();
}

void prd__cache_drain(prd_cache_t *cp)
{
  prd__mag_reap_threads(cp);
  cache_reap(cp, true);
}

void prd_cache_reap(prd_cache_t *cp)
{
  if (cp == NULL) {
    prd__report("prd_cache_reap: NULL cache (ignored)");
    return;
  }
  cache_reap(cp, false);
}

/* prd_reap (all = false: working sets kept) and malloc_trim (all): every cache, then the heap
 * arena's decommit of every free page.  Returns the bytes given back to the kernel: the heap
 * arena's imported bytes that went (unmapped) and those decommitted. */
void prd__cache_set_reap_hook(void (*fn)(void))
{
  atomic_store_explicit(&cache_reap_hook, fn, memory_order_release);
}

void prd__cache_set_grow_hook(void (*fn)(void))
{
  atomic_store_explicit(&cache_grow_hook, fn, memory_order_release);
}

void prd__cache_set_leak_hook(void (*fn)(prd__debug_live_t *lc))
{
  atomic_store_explicit(&cache_leak_hook, fn, memory_order_release);
}

void prd__cache_set_leak_filter(bool (*fn)(const void *buf))
{
  atomic_store_explicit(&cache_leak_filter, fn, memory_order_release);
}

static size_t reap_and_decommit(bool all)
{
  int saved = errno;   /* prd_reap and malloc_trim leave errno as they found it */
  void (*hook)(void) = atomic_load_explicit(&cache_reap_hook, memory_order_acquire);
  if (hook != NULL)
    hook();
  /* a destructor run by this reap that allocates must not start a pressure reap, which
   * would wait for the reap lock this thread holds */
  bool nested = cache_in_reclaim;
  prd_vmem_stats_t before = { .size = sizeof(before) }, after = { .size = sizeof(after) };
  prd_vmem_t *heap = prd_heap_arena();
  bool counted = heap != NULL && prd_vmem_stats(heap, &before) == 0;
  prd__mag_reap_threads(NULL);   /* magazines parked in other threads' caches (magazine.c) */
  cache_in_reclaim = true;
  pthread_mutex_lock(&cache_reap_lock);
  reap_all_locked(all);
  /* the free ranges the heap's quantum caches keep in their slabs, every one (slab.c 6) */
  size_t purged = 0;
  for (prd_cache_t *cp = cache_first(); cp != NULL; cp = cp->cache_next)
    purged += prd__slab_purge(cp, true);
  pthread_mutex_unlock(&cache_reap_lock);
  cache_in_reclaim = nested;
  size_t released = purged + prd__vmem_heap_decay(true);
  if (counted && prd_vmem_stats(heap, &after) == 0 && after.bytes_imported < before.bytes_imported)
    released += before.bytes_imported - after.bytes_imported;
  errno = saved;
  return released;
}

void prd_reap(void)
{
  (void)reap_and_decommit(false);
}

size_t prd__cache_trim(void)
{
  return reap_and_decommit(true);
}

/* The decay job (section 4): at most once per half decay period, on the maintenance thread
 * or inline on a slow path (no lock held either way). */
static void cache_decay(void *arg)
{
  (void)arg;
  uint64_t period = (uint64_t)prd__opt(decay_ms) * 1000000ull / 2;
  if (prd__opt(decay_ms) == 0)
    return;
  uint64_t now = prd__now_ns();
  if (now - atomic_load_explicit(&cache_decay_last_ns, memory_order_relaxed) < period)
    return;
  if (pthread_mutex_trylock(&cache_reap_lock) != 0)
    return;   /* a reap or a cache destruction runs now: try at the next wake-up */
  atomic_store_explicit(&cache_decay_last_ns, now, memory_order_relaxed);
  bool nested = cache_in_reclaim;
  cache_in_reclaim = true;
  for (prd_cache_t *cp = cache_first(); cp != NULL; cp = cp->cache_next) {
    /* a depot that took and gave no full or tagged magazine for a whole pass has no working
     * set to keep: all of its magazines go to the slabs (section 4) */
    bool idle = depot_idle(cp, &cp->cache_decay_depot);
    prd__mag_depot_decay(cp, idle);
    if (idle)
      cp->cache_grow_kept = 0;   /* its alternation is over: growth reaps may take it */
    cache_reap_slabs(cp, false);
    (void)prd__slab_purge(cp, false);   /* the heap's quantum caches' free ranges (slab.c 6) */
  }
  pthread_mutex_unlock(&cache_reap_lock);
  cache_in_reclaim = nested;
  (void)prd__vmem_heap_decay(false);
  /* pages left dirty for the next pass: make sure a thread will run it (section 4) */
  if (prd__vmem_heap_dirty() > DECAY_THREAD_BYTES)
    prd__maint_wake();
}

bool prd__cache_buf_allocated(prd_cache_t *cp, const void *buf)
{
  if (cp->cache_flags & PRD_CF_DEBUG)
    return prd__debug_allocated(cp, buf);
  if (!(cp->cache_flags & PRD_CF_NOMARK))
    return !prd__mark_test(buf, cp->cache_mark_off);
  return true;
}

void prd__cache_decay_nudge(void)
{
  if (prd__opt(decay_ms) != 0 && !prd__maint_running() &&
      prd__vmem_heap_dirty() > DECAY_THREAD_BYTES)
    prd__maint_wake();
}

/* The slab layer's growth hook (section 4): user caches made another PRD_SLAB_GROW_BYTES of slabs
 * (`mark`), or one more slab while the last call left work.  At a mark, a depot that moved no
 * magazine, or whose class made no allocation miss and moved no tagged magazine (depot_draining),
 * since the last mark holds what a finished phase freed, or is still freeing (a class that grows
 * from its slabs has an empty one): all of it goes to the slabs, whose free slabs a packed cache
 * gives to the heap arena at once (slab.c section 6), and another cache of the heap arena (the
 * arena's own quantum caches, whose slabs hold malloc's blocks of 5-8 pages) gives all of them,
 * for the growing cache to take.  That is work in proportion to the phase (millions of objects,
 * tens of milliseconds inside one allocation), so it goes GROW_REAP_SLICE objects a call: the
 * allocations of the next slabs carry the rest, the growing cache taking the slabs freed so far.
 * A class that allocates again meanwhile is in use: its depot is left alone.  A reap or cache
 * destruction running now (the try-lock), or a reclaim on this thread, skips it; true while work
 * is left. */
static bool cache_grow_reap(bool mark)
{
  if (cache_in_reclaim)
    return !mark;   /* a continuation waits for the next slab; a mark for the next mark */
  /* the holding above the caches first, with no lock held, as the reap hook (section 5) */
  void (*hook)(void) = atomic_load_explicit(&cache_grow_hook, memory_order_acquire);
  if (mark && hook != NULL)
    hook();
  if (pthread_mutex_trylock(&cache_reap_lock) != 0)
    return true;   /* another reap runs: look again at the next slab */
  cache_in_reclaim = true;
  prd_vmem_t *heap = prd_heap_arena();
  prd__vmem_heap_reuse(true);   /* what it frees, the growing caches take next (vmem.c 16) */
  size_t budget = GROW_REAP_SLICE;
  bool left = false;
  if (mark)
    cache_grow_marks++;
  for (prd_cache_t *cp = cache_first(); cp != NULL; cp = cp->cache_next) {
    if (cp->cache_flags & PRD_CF_INTERNAL)
      continue;
    if (mark) {
      bool idle = depot_idle(cp, &cp->cache_grow_moves);
      bool draining = depot_draining(cp, &cp->cache_grow_depot);
      if (!draining)
        grow_came_back(cp);
      cp->cache_grow_left = (draining || idle) && !grow_kept(cp);
    } else if (cp->cache_grow_left && !depot_draining(cp, &cp->cache_grow_depot))
      cp->cache_grow_left = false;   /* in use again: its magazines are its working set */
    if (!cp->cache_grow_left)
      continue;
    if (budget == 0) {
      left = true;
      continue;
    }
    /* (a reap takes magazines without counting moves: the snapshot stays right) */
    size_t before = budget;
    cp->cache_grow_left = prd__mag_depot_reap_some(cp, &budget);
    if (before > budget) {
      if (cp->cache_grow_given == 0)
        cp->cache_grow_first = cache_grow_marks;
      cp->cache_grow_given += (uint64_t)(before - budget) * cp->cache_chunksize;
    }
    left |= cp->cache_grow_left;
    if (cp->cache_source == heap)
      prd__slab_reap(cp, true);
  }
  if (!left)
    /* the internal caches last: the magazines (and slab structures) the depots gave back
     * leave slabs free, which go to the heap arena too, rather than after decay_ms / 2 */
    for (prd_cache_t *cp = cache_first(); cp != NULL; cp = cp->cache_next)
      if (cp->cache_flags & PRD_CF_INTERNAL)
        prd__slab_reap(cp, true);
  prd__vmem_heap_reuse(false);
  pthread_mutex_unlock(&cache_reap_lock);
  cache_in_reclaim = false;
  return left;
}

void prd__cache_reap_all(prd_cache_t *cp)
{
  cache_reap(cp, true);
}

void prd_set_nofail_callback(int (*cb)(void))
{
  atomic_store_explicit(&cache_nofail_cb, cb, memory_order_release);
}

/* PRD_NOFAIL and nothing worked: the callback says retry or exit (once, as libumem). */
static void nofail_wait(prd_cache_t *cp)
{
  static atomic_flag exiting = ATOMIC_FLAG_INIT;
  int (*cb)(void) = atomic_load_explicit(&cache_nofail_cb, memory_order_acquire);
  int r = cb != NULL ? cb() : PRD_NOFAIL_EXIT(255);
  if (r == PRD_NOFAIL_RETRY)
    return;
  if (cb == NULL)
    prd__report("cache %s: PRD_NOFAIL allocation cannot be satisfied and no nofail callback "
                "is set: exiting with status 255", cp->cache_name);
  if (atomic_flag_test_and_set(&exiting))
    for (;;)
      pause();
  exit(r & 0xff);
}

/* The slab layer's out-of-memory hook (section 5): the source had no slab for a user cache
 * (no lock held).  *state is 0 at the first call of one allocation and kept between calls:
 * the grace-period waits made (low bits) and whether every cache was reaped (OOM_RECLAIMED).
 * True: the slab layer tries again; false: the allocation fails with ENOMEM. */
#define OOM_RECLAIMED 0x100u
static bool cache_oom(prd_cache_t *cp, int flags, unsigned *state)
{
  unsigned waits = *state & 0xffu;
  bool reclaimed = (*state & OOM_RECLAIMED) != 0;
  /* seed 001 Algorithm 1 lines 31-32: deferred objects wait for a grace period: wait for
   * it (PRD_NOSLEEP: merge only what is already safe) and retry before failing */
  if (waits < PRD_OOM_WAITS && atomic_load_explicit(&cp->cache_defer_on, memory_order_relaxed)) {
    waits = prd__defer_oom(cp, flags) ? waits + 1 : PRD_OOM_WAITS;
    *state = waits | (reclaimed ? OOM_RECLAIMED : 0);
    return true;
  }
  if ((flags & PRD_NOSLEEP) || (reclaimed && !(flags & PRD_NOFAIL)))
    return false;
  if (reclaimed)
    nofail_wait(cp);
  reclaim_all();
  *state = waits | OOM_RECLAIMED;
  return true;
}

/* ---- statistics (stats.c prints them) -------------------------------------------------------- */
static void cache_stats_fill(prd_cache_t *cp, prd_cache_stats_t *st)
{
  memset(st, 0, sizeof(*st));
  prd__mag_stats(cp, st);    /* the CPU layer's fields (magazine.c) */
  prd__slab_stats(cp, st);   /* the slab layer's and the latent slabs' (slab.c) */
  prd__defer_stats(cp, st);  /* the latent caches' counters (defer.c) */
  /* seed 001 §5.4 counts a churn per grow/shrink pair: every shrink pairs an earlier grow */
  st->slab_churns = PRD_MIN(st->slab_creates, st->slab_destroys);
  uint64_t slabs = st->slabs_full + st->slabs_partial + st->slabs_free;
  st->total_frag = st->bufs_inuse == 0 ? 0.0
                   : (double)slabs * (double)st->slab_size /
                         ((double)st->bufs_inuse * (double)st->buf_size);
  st->slab_bytes = slabs * st->slab_size;
}

/* The statistics printers' walker (stats.c): copies, so that they print with no lock held.
 * Lock order as section 7: cache_list_lock, then each cache_lock in cache_stats_fill. */
size_t prd__cache_snapshot(prd__cache_snap_t *out, size_t max)
{
  cache_init();
  prd__mag_adopt();   /* a fork child counts no dead thread's cache */
  size_t n = 0;
  pthread_mutex_lock(&cache_list_lock);
  for (prd_cache_t *cp = cache_list; cp != NULL; cp = cp->cache_next, n++)
    if (n < max) {
      cache_stats_fill(cp, &out[n].cs_stats);
      out[n].cs_stats.size = sizeof(out[n].cs_stats);
      out[n].cs_stats.version = PRD_CACHE_STATS_VERSION;
      out[n].cs_internal = (cp->cache_flags & PRD_CF_INTERNAL) != 0;
    }
  pthread_mutex_unlock(&cache_list_lock);
  return n;
}

int prd_cache_stats(prd_cache_t *cp, prd_cache_stats_t *st)
{
  if (cp == NULL || st == NULL || st->size < offsetof(prd_cache_stats_t, name) ||
      st->version == 0 || st->version > PRD_CACHE_STATS_VERSION) {
    errno = EINVAL;
    return -1;
  }
  prd_cache_stats_t full;
  size_t size = st->size;
  uint32_t version = st->version;
  prd__mag_adopt();   /* a fork child counts no dead thread's cache */
  cache_stats_fill(cp, &full);
  memcpy(st, &full, PRD_MIN(size, sizeof(full)));
  st->size = size;
  st->version = version;
  return 0;
}

/* ---- debugging that walks caches (section 6) ------------------------------------------------ */
/* The buffers still allocated in a cache being destroyed (cache_lock held). */
static void cache_report_live(prd_cache_t *cp)
{
  prd__debug_live_t lc = { -1, prd__now_ns(), 0, 0, PRD_LIVE_LISTED, 0 };
  prd__debug_line(-1, "cache %s: destroyed with %llu buffer%s still allocated:", cp->cache_name,
                  (unsigned long long)cp->cache_bufs_inuse, cp->cache_bufs_inuse == 1 ? "" : "s");
  prd__slab_walk_allocated(cp, prd__debug_live_buf, &lc, true);
  if (lc.lc_seen > lc.lc_listed)
    prd__debug_line(-1, "cache %s: ... and %zu more", cp->cache_name, lc.lc_seen - lc.lc_listed);
}

/* A buffer of the leak walk, listed unless the filter (section 5) says it is freed. */
static void leak_buf(void *arg, prd_cache_t *cp, void *buf, prd_bufctl_t *bcp)
{
  bool (*keep)(const void *) = atomic_load_explicit(&cache_leak_filter, memory_order_acquire);
  if (keep == NULL || keep(buf))
    prd__debug_live_buf(arg, cp, buf, bcp);
}

static void leak_cache(void *arg, prd_cache_t *cp)
{
  if (cp->cache_flags & PRD_CF_INTERNAL)
    return;
  pthread_mutex_lock(cp->cache_lock);
  prd__slab_walk_allocated(cp, leak_buf, arg, false);
  pthread_mutex_unlock(cp->cache_lock);
}

static size_t leak_report(FILE *fp, double older_than_seconds)
{
  prd__mag_purge_all();   /* objects parked in magazines are free, not leaked */
  cache_init();
  if (fp == NULL)
    fp = stderr;
  if (!(older_than_seconds >= 0))
    older_than_seconds = 0;
  fflush(fp);
  /* an age past 2^64 ns (585 years, infinity) lists none: the conversion saturates */
  double ns = older_than_seconds * 1e9;
  uint64_t min_age = ns < 18446744073709549568.0 ? (uint64_t)ns : UINT64_MAX;
  prd__debug_live_t lc = { fileno(fp), prd__now_ns(), min_age, 0, SIZE_MAX, 0 };
  cache_foreach(leak_cache, &lc);
  void (*hook)(prd__debug_live_t *) = atomic_load_explicit(&cache_leak_hook,
                                                           memory_order_acquire);
  if (hook != NULL)
    hook(&lc);
  prd__debug_line(lc.lc_fd, "leak report: %zu buffer%s allocated for at least %.3f s",
                  lc.lc_seen, lc.lc_seen == 1 ? "" : "s", older_than_seconds);
  return lc.lc_seen;
}

size_t prd_leak_report(FILE *fp, double older_than_seconds)
{
  int old = prd__cancel_off();   /* its writes are cancellation points (os.c section 8) */
  size_t r = leak_report(fp, older_than_seconds);
  prd__cancel_on(old);
  return r;
}

/* debug.c's stray-pointer hook (section 5), for the report of a bad free of addr to cp: the
 * buffer of cp whose chunk holds addr (and *bcpp its bufctl, large layout), else NULL with
 * owner[] the name of another cache that holds it ("" if none). */
struct owner_find {
  const void *of_addr;
  const prd_cache_t *of_skip;
  char *of_name;
  void *of_buf;
};

static void owner_probe(void *arg, prd_cache_t *cp)
{
  struct owner_find *of = arg;
  if (cp == of->of_skip || of->of_buf != NULL)
    return;
  pthread_mutex_lock(cp->cache_lock);
  void *b = prd__slab_containing(cp, of->of_addr);
  pthread_mutex_unlock(cp->cache_lock);
  if (b != NULL) {
    of->of_buf = b;
    memcpy(of->of_name, cp->cache_name, PRD_CACHE_NAME_MAX);
  }
}

static void *cache_locate(prd_cache_t *cp, const void *addr, prd_bufctl_t **bcpp, char *owner)
{
  pthread_mutex_lock(cp->cache_lock);
  char *start = prd__slab_containing(cp, addr);
  prd_bufctl_t *sbcp = NULL;
  if (start != NULL && (cp->cache_flags & PRD_CF_HASH))
    sbcp = prd__slab_hash_find(cp, start);
  pthread_mutex_unlock(cp->cache_lock);
  owner[0] = '\0';
  *bcpp = sbcp;
  if (start != NULL)
    return start;
  struct owner_find of = { addr, cp, owner, NULL };
  cache_foreach(owner_probe, &of);
  return NULL;
}

/* ---- fork (fork.c's pthread_atfork handlers call these, in its lock order) ---------------- */
PRD__FORK_LINK();
/* Takes the reap and list locks (the magazine layer's thread registry comes after them in
 * fork.c's order: the statistics snapshot holds cache_list_lock while it reads thread caches). */
void prd__cache_fork_prepare(void)
{
  pthread_mutex_lock(&cache_reap_lock);
  pthread_mutex_lock(&cache_list_lock);
}

/* Takes every cache's lock in list order (section 7), after the threads' cache locks. */
void prd__cache_fork_prepare_caches(void)
{
  for (prd_cache_t *cp = cache_list; cp != NULL; cp = cp->cache_next)
    pthread_mutex_lock(cp->cache_lock);
}

/* Releases them (parent and child alike: the child's only thread is the one that took them). */
void prd__cache_fork_release(void)
{
  for (prd_cache_t *cp = cache_list; cp != NULL; cp = cp->cache_next)
    pthread_mutex_unlock(cp->cache_lock);
  pthread_mutex_unlock(&cache_list_lock);
  pthread_mutex_unlock(&cache_reap_lock);
}
