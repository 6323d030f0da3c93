/*
 * latent.c: Prudence's latent slabs (seed 001 §4.1; Algorithm 1 lines 17-21, 49-59): deferred
 * buffers that wait for their grace period in the slabs they came from.
 *
 * 1. What.  Deferrals that leave the CPU layer (a latent cache past its limit and the depot's
 *    latent list, a cache without magazines, an exiting thread: defer.c section 2) go to
 *    their slabs, where they wait as deferred buffers: allocated for the slab layer, free for
 *    the user, not yet reusable.  This file is the policy: which generation a deferred buffer
 *    joins, when a generation is merged, which slab a refill takes while deferred buffers
 *    wait.  The slab layer keeps the mechanism (slab.c section 9): the records in each slab,
 *    the FIFO of latent slabs, the lists that count deferred buffers as free, under the
 *    cache's cache_lock, which every function here holds; its list and record primitives
 *    are inline in slab.h.  Two hooks enter here from the slab layer, set before the first
 *    deferral (prd__slab_set_latent_hooks): the refill choice (lat_pick) when the cache has
 *    deferred buffers, and the merge of a free slab's ended generations during a reap.
 *
 * 2. Generations (lines 49-51).  Each slab has two generations of deferred buffers, each
 *    tagged with one grace-period state (slab_lat_gp) and recorded outside the buffers,
 *    since readers may still read them: a bitmap just before the prd_slab_t (small layout)
 *    or a list through the bufctls, flagged PRD_BC_DEFERRED (large layout).  A slab with
 *    deferred buffers is on the cache's FIFO of latent slabs (cache_latent), oldest first.
 *    A generation whose state has ended is merged: its buffers go on the slab's freelist,
 *    counted as freed (lat_merge_gen).  Deferrals come a batch at a time, all with one state,
 *    under one hold of cache_lock (prd__slab_defer_bulk); a batch or buffer whose state has
 *    ended already goes straight to its freelist, counted apart (cache_lat_safe_frees; both
 *    are the statistics' latent_merges).
 *
 * 3. The bound.  A buffer never waits for a grace period that started after it was deferred:
 *    it joins the generation with its own state, else a free one.  A new state is polled
 *    under the lock before the two generations, whose states were all handed out before that
 *    poll; at most two states are unsafe at any instant (rcu.c §4: get_state is at most one
 *    grace period past the one in progress), so if the new state is unsafe, one of the
 *    generations has ended and is merged first (three unsafe answers would mean three unsafe
 *    states at the time of the first poll).  test_bound_latent_slab checks it.
 *
 * 4. Pre-movement (lines 52-57).  Deferred buffers count as free for the slab's list
 *    (slab.c section 9) in a slab that has a free buffer: a slab whose every allocated buffer
 *    is deferred goes to the free list's tail, so that allocation finds the truly free slabs
 *    first, and a partial one's bucket counts its deferred buffers as free
 *    (cache_lat_premoves counts the moves a deferral makes).  A slab with no free buffer
 *    stays full until a merge: Algorithm 1 moves it too (a full slab becomes partial at the
 *    deferral), but allocation can take nothing from it, and such slabs at the head of the
 *    free list or in the low partial buckets filled the refill's scan of PRD_LAT_SCAN slabs
 *    (section 5), so that a cache without magazines grew a slab for nearly every
 *    allocation while a reader held its grace period (docs/benchmarks.md).
 *
 * 5. The refill choice (lines 17-21, Fig. 5).  With deferred buffers in the cache, the slab
 *    to allocate from is chosen here: first the oldest latent slabs whose grace period has
 *    ended are merged from the FIFO's head (one poll when the head is not safe yet, as UMA
 *    polls its first bucket); then among the first PRD_LAT_SCAN partial slabs (fewest free
 *    first) the one with the most live buffers that has a buffer to hand out now, so that
 *    the slabs about to empty are left alone and their pages can go back; a slab whose
 *    allocated buffers are mostly deferred is passed over (cache_lat_skips) while anything
 *    else, a free slab included, can serve.
 *
 * 6. Out of memory and destroy.  prd__slab_lat_merge_all merges every ended generation of a
 *    cache (defer.c's out-of-memory wait and cache destruction, cache.c's reaps and decay
 *    pass, tests); prd__slab_lat_pending
 *    says how many buffers wait and the latest state among them, which defer.c waits for.
 *    The counter cache_lat_slab_objs is stored atomically under cache_lock: the magazine
 *    layer reads it without the lock, as a hint for its miss path.
 */
#include "internal.h"
#include "slab.h"

bool prd__defer_broken;   /* internal.h: the torture's broken mode */
static void lat_hook(void);

/* Generation g of sp has ended its grace period: its buffers become free (lock held). */
static void lat_merge_gen(prd_cache_t *cp, prd_slab_t *sp, int g)
{
  uint32_t n = sp->slab_lat_n[g];
  if (cp->cache_flags & PRD_CF_HASH) {
    prd_bufctl_t *bcp = sp->slab_lat_list[g];
    while (bcp != NULL) {
      prd_bufctl_t *next = bcp->bc_next;
      bcp->bc_flags &= ~(PRD_BC_ALLOC | PRD_BC_DEFERRED);
      prd__annot_object_in(cp, bcp->bc_addr);
      bcp->bc_next = sp->slab_head;
      sp->slab_head = bcp;
      bcp = next;
    }
    sp->slab_lat_list[g] = NULL;
  } else {
    uint64_t *map = prd__slab_lat_map(cp, sp, g);
    char *first = sp->slab_base + sp->slab_color;
    for (size_t w = 0; w < cp->cache_lat_words; w++) {
      uint64_t bits = map[w];
      map[w] = 0;
      while (bits != 0) {
        size_t k = w * 64 + (size_t)__builtin_ctzll(bits);
        bits &= bits - 1;
        char *buf = first + k * cp->cache_chunksize;
        prd__slab_mark(cp, buf);   /* its grace period ended: free, no reader reads it */
        prd__annot_object_in(cp, buf);   /* before the freelist word is written */
        prd_bufctl_t *bcp = (prd_bufctl_t *)(buf + cp->cache_link_off);
        prd__slab_fl_set(cp, bcp, sp->slab_head);
        sp->slab_head = bcp;
      }
    }
  }
  sp->slab_lat_n[g] = 0;
  if (prd__slab_ndeferred(sp) == 0)
    prd__slab_link_remove(&sp->slab_lat_link);
  sp->slab_refcnt -= n;
  cp->cache_frees += n;
  cp->cache_bufs_inuse -= n;
  __atomic_store_n(&cp->cache_lat_slab_objs, cp->cache_lat_slab_objs - n, __ATOMIC_RELAXED);
  cp->cache_lat_slab_merges += n;
}

/* Merges the generations of sp whose grace period has ended; true if any did (lock held).
 * The slab may change lists. */
static bool lat_merge_safe(prd_cache_t *cp, prd_slab_t *sp)
{
  bool any = false;
  for (int g = 0; g < 2; g++)
    if (sp->slab_lat_n[g] != 0 && prd__defer_safe(sp->slab_lat_gp[g])) {
      lat_merge_gen(cp, sp, g);
      any = true;
    }
  if (any) {
    prd__slab_relist(cp, sp);
    if (sp->slab_bucket == PRD_SLAB_ON_FREE && prd__slab_ndeferred(sp) == 0) {
      prd__slab_link_remove(&sp->slab_link);   /* truly free now: to the head */
      prd__slab_link_insert(&cp->cache_free, &sp->slab_link);
    }
  }
  return any;
}

/* Records buf (allocated from sp) as deferred with state gp (lock held): the generation with
 * the same state, else a free generation.  Section 3's bound: a buffer never joins a
 * generation with a later state.  Returns LAT_BAD on a bad deferral (reported by the
 * caller), LAT_SAFE when gp has ended already (the caller frees the buffer), else LAT_ADDED. */
enum { LAT_BAD, LAT_ADDED, LAT_SAFE };
static int lat_add(prd_cache_t *cp, prd_slab_t *sp, void *buf, prd_bufctl_t *bcp, prd_gp_t gp)
{
  /* deferred twice, the first copy still recorded: tested before the merge below, which
   * would put that copy on the freelist and let this one be recorded beside it */
  if (!(cp->cache_flags & PRD_CF_HASH) && prd__slab_small_is_deferred(cp, sp, buf))
    return LAT_BAD;
  int g;
  if (sp->slab_lat_n[0] != 0 && sp->slab_lat_gp[0] == gp) {
    g = 0;
  } else if (sp->slab_lat_n[1] != 0 && sp->slab_lat_gp[1] == gp) {
    g = 1;
  } else {
    /* a new state: poll it here, under the lock, then the two generations, whose states
     * were all handed out before this poll.  At most two states are unsafe at any instant
     * (rcu.c §4: get_state is at most one grace period past the one in progress), so if gp
     * is unsafe, one of the generations has ended (three unsafe answers would mean three
     * unsafe states at the time of the first poll) */
    if (prd__defer_safe(gp))
      return LAT_SAFE;
    (void)lat_merge_safe(cp, sp);
    if (sp->slab_lat_n[0] == 0)
      g = 0;
    else if (sp->slab_lat_n[1] == 0)
      g = 1;
    else {
      /* unreachable by the argument above; stay correct anyway: wait for the later state */
      PRD_ASSERT(!"three unsafe grace-period states");
      g = sp->slab_lat_gp[0] > sp->slab_lat_gp[1] ? 0 : 1;
      if (gp > sp->slab_lat_gp[g])
        sp->slab_lat_gp[g] = gp;
      gp = sp->slab_lat_gp[g];
    }
  }
  if (cp->cache_flags & PRD_CF_HASH) {
    bcp->bc_flags |= PRD_BC_DEFERRED;
    bcp->bc_next = sp->slab_lat_list[g];
    sp->slab_lat_list[g] = bcp;
  } else {
    size_t k = prd__slab_lat_index(cp, sp, buf);
    prd__slab_lat_map(cp, sp, g)[k / 64] |= 1ull << (k % 64);
  }
  if (prd__slab_ndeferred(sp) == 0)   /* joins the FIFO of latent slabs at the tail */
    prd__slab_link_insert(cp->cache_latent.sl_prev, &sp->slab_lat_link);
  sp->slab_lat_gp[g] = gp;
  sp->slab_lat_n[g]++;
  __atomic_store_n(&cp->cache_lat_slab_objs, cp->cache_lat_slab_objs + 1, __ATOMIC_RELAXED);
  if (gp > cp->cache_lat_maxgp)
    cp->cache_lat_maxgp = gp;
  return LAT_ADDED;
}

/* Puts n deferred buffers, all with state gp, into their latent slabs under one hold of
 * cache_lock (Algorithm 1 line 50, a batch at a time), moving each slab ahead of time
 * (lines 52-57).  A buffer whose state has already ended goes straight back to its slab.
 * Returns how many were safe already (freed at once). */
size_t prd__slab_defer_bulk(prd_cache_t *cp, void *const *bufs, size_t n, prd_gp_t gp)
{
  lat_hook();
  bool hash = (cp->cache_flags & PRD_CF_HASH) != 0;
  bool safe = prd__defer_safe(gp);
  if (safe) {
    prd__slab_free_bulk_deferred(cp, bufs, n);
    return n;
  }
  pthread_mutex_lock(cp->cache_lock);
  for (size_t i = 0; i < n; i++) {
    void *buf = bufs[i];
    prd_slab_t *sp;
    prd_bufctl_t *bcp = NULL;
    bool ok;
    const char *why = PRD_SLAB_WHY_FOREIGN;
    if (hash) {
      bcp = prd__slab_hash_find(cp, buf);
      ok = bcp != NULL && (bcp->bc_flags & (PRD_BC_ALLOC | PRD_BC_DEFERRED)) == PRD_BC_ALLOC;
      if (bcp != NULL && (bcp->bc_flags & PRD_BC_DEFERRED))
        why = PRD_SLAB_WHY_TWICE;
      else if (bcp != NULL && !ok)
        why = PRD_SLAB_WHY_FREED;
      sp = ok ? bcp->bc_slab : NULL;
    } else {
      sp = prd__slab_small(cp, buf);
      ok = sp->slab_cache == cp &&
           (size_t)((char *)buf - (sp->slab_base + sp->slab_color)) % cp->cache_chunksize == 0;
      /* a copy already merged (or freed) is on the freelist: recording it as deferred would
       * count a free buffer as allocated and deferred, and its merge would link it twice */
      if (ok && prd__slab_small_is_free(cp, sp,
                                        (prd_bufctl_t *)((char *)buf + cp->cache_link_off))) {
        ok = false;
        why = PRD_SLAB_WHY_FREED;
      }
    }
    if (ok) {
      uint32_t before = sp->slab_bucket;
      int r = lat_add(cp, sp, buf, bcp, gp);
      ok = r != LAT_BAD;
      if (!ok)
        why = PRD_SLAB_WHY_TWICE;
      if (r == LAT_SAFE) {   /* merged at once: its grace period has ended */
        prd__slab_put(cp, sp, bcp != NULL ? bcp
                                     : (prd_bufctl_t *)((char *)buf + cp->cache_link_off));
        prd__slab_relist(cp, sp);
        cp->cache_lat_safe_frees++;
      } else if (r == LAT_ADDED) {
        prd__slab_relist(cp, sp);
        /* pre-movement: full -> partial at deferral, or onto the free list when every
         * allocated buffer is deferred (lines 54-57) */
        if (sp->slab_bucket != before &&
            (before == PRD_SLAB_ON_FULL || sp->slab_bucket == PRD_SLAB_ON_FREE))
          cp->cache_lat_premoves++;
      }
    }
    if (prd_unlikely(!ok)) {
      pthread_mutex_unlock(cp->cache_lock);
      prd__slab_bad_deferral(cp, buf, why);
      pthread_mutex_lock(cp->cache_lock);
    }
  }
  pthread_mutex_unlock(cp->cache_lock);
  return 0;
}

/* Merges every latent-slab generation whose grace period has ended; returns how many
 * buffers came back (the out-of-memory path, destroy, reaps, the decay pass, tests).  A cache
 * with nothing deferred in its slabs is passed without its lock (the relaxed count, section
 * 6: a deferral racing it waits for the next call, as one made just after would). */
size_t prd__slab_lat_merge_all(prd_cache_t *cp)
{
  if (__atomic_load_n(&cp->cache_lat_slab_objs, __ATOMIC_RELAXED) == 0)
    return 0;
  pthread_mutex_lock(cp->cache_lock);
  uint64_t before = cp->cache_lat_slab_merges;
  for (size_t i = 0; i < PRD_SLAB_NLISTS && cp->cache_lat_slab_objs != 0; i++) {
    prd_slab_link_t *list = prd__slab_list(cp, prd__slab_list_id(i));
    /* a merge moves the slab to the head of another list: the saved next stays valid */
    for (prd_slab_link_t *l = list->sl_next, *next; l != list && cp->cache_lat_slab_objs != 0;
         l = next) {
      next = l->sl_next;
      prd_slab_t *sp = prd__slab_of_link(l);
      if (prd__slab_ndeferred(sp) != 0)
        (void)lat_merge_safe(cp, sp);
    }
  }
  size_t merged = (size_t)(cp->cache_lat_slab_merges - before);
  pthread_mutex_unlock(cp->cache_lock);
  return merged;
}

/* How many buffers wait in the latent slabs of cp, and the latest state among them. */
uint64_t prd__slab_lat_pending(prd_cache_t *cp, prd_gp_t *maxgp)
{
  pthread_mutex_lock(cp->cache_lock);
  uint64_t n = cp->cache_lat_slab_objs;
  *maxgp = cp->cache_lat_maxgp;
  pthread_mutex_unlock(cp->cache_lock);
  return n;
}

/* Refill slab choice with deferred buffers in the cache (Algorithm 1 lines 17-21, Fig. 5).
 * Among the first PRD_LAT_SCAN partial slabs (fewest free first), whose safe generations
 * are merged on the way, take the one with the most live (allocated, not deferred) buffers
 * that has a buffer to hand out now: refilling from it leaves the slabs that are about to
 * empty alone, so their pages can go back (less total fragmentation).  A slab whose
 * allocated buffers are mostly deferred is passed over while anything else, a free slab
 * included, can serve; it is taken only before growing the cache. */
#define PRD_LAT_SCAN 10   /* seed 001 §5.4: "traverses the first 10 slabs": latency vs choice */
static prd_slab_t *lat_pick(prd_cache_t *cp)
{
  /* first the oldest latent slabs whose grace period has ended, from the head of the FIFO
   * (one poll when the head is not safe yet, as UMA polls its first bucket) */
  for (uint64_t budget = cp->cache_lat_slab_objs; budget != 0 &&
       !prd__slab_link_empty(&cp->cache_latent); budget--) {
    prd_slab_link_t *l = cp->cache_latent.sl_next;
    prd_slab_t *sp = (prd_slab_t *)((char *)l - offsetof(prd_slab_t, slab_lat_link));
    if (!lat_merge_safe(cp, sp))
      break;
    if (prd__slab_ndeferred(sp) != 0) {   /* its newer generation waits: to the tail */
      prd__slab_link_remove(l);
      prd__slab_link_insert(cp->cache_latent.sl_prev, l);
    }
  }
  if (cp->cache_lat_slab_objs == 0)
    return prd__slab_pick_plain(cp);
  prd_slab_t *cand[PRD_LAT_SCAN];
  size_t nc = 0;
  for (uint64_t map = cp->cache_partial_map; map != 0 && nc < PRD_LAT_SCAN; map &= map - 1) {
    prd_slab_link_t *list = &cp->cache_partial[__builtin_ctzll(map)];
    for (prd_slab_link_t *l = list->sl_next; l != list && nc < PRD_LAT_SCAN; l = l->sl_next)
      cand[nc++] = prd__slab_of_link(l);
  }
  prd_slab_t *best = NULL, *mostly = NULL;
  uint32_t best_live = 0;
  for (size_t i = 0; i < nc; i++) {
    prd_slab_t *sp = cand[i];
    if (prd__slab_ndeferred(sp) != 0)
      (void)lat_merge_safe(cp, sp);
    if (!prd__slab_has_free(sp))
      continue;   /* its free buffers are all still deferred */
    uint32_t live = sp->slab_refcnt - prd__slab_ndeferred(sp);
    if (prd__slab_ndeferred(sp) * 2 > sp->slab_refcnt) {   /* mostly deferred */
      if (mostly == NULL)
        mostly = sp;
      continue;
    }
    if (best == NULL || live > best_live) {
      best = sp;
      best_live = live;
    }
  }
  if (best != NULL) {
    if (mostly != NULL)
      cp->cache_lat_skips++;
    return best;
  }
  /* a free slab: one with no deferred buffer, else one whose deferred buffers are safe */
  prd_slab_t *partly = NULL;
  size_t seen = 0;
  for (prd_slab_link_t *l = cp->cache_free.sl_next, *next; l != &cp->cache_free &&
       seen < PRD_LAT_SCAN; l = next, seen++) {
    next = l->sl_next;
    prd_slab_t *sp = prd__slab_of_link(l);
    if (prd__slab_ndeferred(sp) != 0)
      (void)lat_merge_safe(cp, sp);
    if (prd__slab_ndeferred(sp) == 0) {
      if (mostly != NULL)
        cp->cache_lat_skips++;
      return sp;
    }
    if (partly == NULL && prd__slab_has_free(sp))
      partly = sp;
  }
  return mostly != NULL ? mostly : partly;
}

static const prd__slab_latent_hooks_t lat_hooks = { lat_pick, lat_merge_safe };

/* Gives the slab layer its hooks before this thread's deferral takes a cache_lock (section
 * 1).  Ordering: the release store of `hooked` follows the hooks' store, and a thread that
 * reads it true with acquire skips the store but happens after it; the slab layer reads the
 * hooks only in a cache with deferred buffers, under the cache_lock that such a deferral
 * released, so its relaxed load sees them (slab.c slab_pick). */
static void lat_hook(void)
{
  static _Atomic bool hooked;
  if (prd_unlikely(!atomic_load_explicit(&hooked, memory_order_acquire))) {
    prd__slab_set_latent_hooks(&lat_hooks);
    atomic_store_explicit(&hooked, true, memory_order_release);
  }
}
