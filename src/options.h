/*
 * options.h: THE table of options (one X-macro list; src/options.c builds the parser, the
 * defaults and the printer from it, and docs/options.md is checked against it by a test).
 *
 *   X(kind, name, default, meaning)
 *   kind: BOOL (0/1, also true/false/yes/no/on/off), LONG (integer, k/m/g suffixes), MS (ms,
 *         at most 10^12: larger values are refused, their nanoseconds would not fit 64 bits),
 *         CHOICE (one of the '|'-separated names that open the meaning, before the ':'; the
 *         value is the name's index, prd__option_choice() gives the name back; any other
 *         name is kept too, as the index past the list (cut to 60 bytes and "..." past 63),
 *         and its user checks it)
 *
 * Add an option here and nowhere else; read it with prd__opt(name).
 */
#ifndef PRD_OPTIONS_H
#define PRD_OPTIONS_H

/* RCU pacing (src/rcu.c §5): 0 lets the driver start a grace period as soon as one is asked
 * for; a positive interval batches the requests that arrive within it into one grace period
 * (fewer grace periods, longer waits).  Expedited requests and blocked waiters skip it. */
#define PRD_OPTIONS(X)                                                                          \
  X(BOOL, abort_on_error, 1,                                                                    \
    "end the process (abort) after reporting a bad free or corruption, as glibc does; 0: "      \
    "report and continue")                                                                      \
  X(BOOL, verbose, 0,                                                                           \
    "report on stderr the options the environment set, at start-up, and each prd_option_set") \
  X(LONG, fault_mmap, 0,                                                                        \
    "fault injection: make every Nth OS mapping fail (0 = off; also PRUDENCE_FAULT_MMAP=N)")    \
  X(MS, vmem_sleep_ms, 1000,                                                                    \
    "how long a PRD_VM_SLEEP allocation from an importing arena retries a failed import "      \
    "before it returns NULL with ENOMEM")                                                     \
  X(MS, slab_working_set, 15000,                                                                \
    "ms a free slab stays in its cache before a reap may return it (seed 002 3.4: 15 s)")      \
  X(MS, decay_ms, 10000,                                                                       \
    "ms free memory stays committed: free slabs go back to the heap arena and its free pages "  \
    "are decommitted (MADV_DONTNEED) within decay_ms/2 to 2 x decay_ms (0: only on reaps)")     \
  X(LONG, heap_dirty_pct, 3,                                                                   \
    "percent of the heap arena's allocated bytes its free pages may keep committed (dirty) "  \
    "before the free that passes the bound decommits the excess, down to half the bound; "    \
    "raised (up to 64x, at most the allocated bytes) while purged pages are faulted back in") \
  X(LONG, heap_dirty_min, 4l << 20,                                                            \
    "bytes of dirty free heap pages always allowed, whatever heap_dirty_pct says (the bound "   \
    "is the larger of the two)")                                                               \
  X(LONG, malloc_mmap_threshold, 4l << 20,                                                      \
    "malloc: blocks of at least this many bytes are mapped on their own and unmapped on free " \
    "(0: never; smaller big blocks come from the heap arena)")                                 \
  X(LONG, malloc_huge_cache, 128l << 20,                                                        \
    "malloc: bytes of freed blocks at or above malloc_mmap_threshold kept mapped for reuse "    \
    "(at most 16; unmapped after malloc_huge_decay_ms unused, or at once when a mapping "      \
    "fails; 0: unmap on free)")                                                                 \
  X(MS, malloc_huge_decay_ms, 10000,                                                            \
    "malloc: ms a kept huge block may stay unused before the maintenance thread unmaps it")     \
  X(BOOL, magazines, 1,                                                                         \
    "0: caches created afterwards have no CPU layer, arenas no quantum caches")                \
  X(BOOL, maint_thread, 1,                                                                      \
    "run the maintenance thread (started when needed); 0: its work runs on slow paths")        \
  X(BOOL, maint_alone, 0,                                                                       \
    "1: a process with one application thread may get the maintenance thread for idle-time "  \
    "work (decay, kept huge blocks, pre-flush); 0: it stays single-threaded")                  \
  X(MS, maint_interval, 15000,                                                                  \
    "ms between maintenance runs: depot working set, magazine resizing, reaping (seed 004)")   \
  X(LONG, depot_contention, 3,                                                                  \
    "failed depot try-locks per interval above which a cache's magazines grow (kmem's 3)")     \
  X(BOOL, hardened, 0,                                                                          \
    "encoded, validated freelist words in small-layout caches made afterwards, and a guard "   \
    "page and a checked tail after every big malloc block (set before start-up); a guard "    \
    "page that cannot be made fails that allocation with a report, never falls back")       \
  X(LONG, debug, 0,                                                                             \
    "debug flags for every new cache, as PRD_CACHE_* bits; PRUDENCE_DEBUG=patterns,... by name") \
  X(CHOICE, rcu, 0,                                                                             \
    "builtin|urcu-memb|urcu-qsbr: the grace-period source, fixed at first use (urcu-*: link "   \
    "libprudence-urcu; or the name of a source the program registered; naming a source not "     \
    "linked or registered ends the process, never falls back)")                                  \
  X(LONG, rcu_gp_interval_us, 1000,                                                             \
    "minimum microseconds between grace periods started by the RCU driver thread (batching; "  \
    "waiters and expedited requests, the allocator's polls among them, are not paced)")         \
  X(LONG, rcu_gp_delay_us, 0,                                                                   \
    "microseconds the idle RCU driver waits after a first request so later ones share its "     \
    "grace period")                                                                             \
  X(BOOL, rcu_expedited, 0,                                                                     \
    "expedited grace periods: no pacing, and the writer polls readers without sleeping")      \
  X(LONG, defer_latent_max_kb, 16384,                                                          \
    "Prudence: KiB of deferred objects a cache's latent slabs may hold before a refill polls " \
    "for their grace period (defer_poll_us) before it grows the cache (seed 001 3.4; 0 = off)") \
  X(LONG, defer_poll_us, 1000,                                                                 \
    "Prudence: microseconds an allocation polls for deferred objects' grace period (requested " \
    "expedited) before it grows the cache instead; it never waits longer (no allocation waits " \
    "for readers)")                                                                             \
  X(MS, defer_oom_wait_ms, 100,                                                                 \
    "Prudence: ms an allocation that finds the arena exhausted polls for deferred objects' "    \
    "grace period before it fails with ENOMEM")                                                 \
  X(LONG, defer_depot_kb, 8192,                                                                \
    "Prudence: KiB of deferred objects a cache's depot may hold in whole latent magazines "    \
    "(tagged with their grace period) before full latent caches spill into the latent slabs "  \
    "(0 = never: Algorithm 1's latent slabs only)")                                            \
  X(LONG, race_delay, 0,                                                                        \
    "race widening, Debug and TSan builds only (ignored in Release): each step of the "         \
    "handshake, the grace-period machine and Prudence's latent transitions pauses (spin, "     \
    "yield or a sleep up to 100 us) with probability N/1024 (0 = off; src/race.c)")            \
  X(BOOL, stats, 0, "print the statistics table on stderr at exit (also PRUDENCE_STATS=1)")    \
  X(MS, stats_interval_ms, 1000,                                                                \
    "ms between the JSON snapshots written to PRUDENCE_STATS_FILE (0: only at exit)")          \
  X(BOOL, stats_append, 0,                                                                      \
    "append each snapshot to PRUDENCE_STATS_FILE as one line instead of replacing the file")

#endif
