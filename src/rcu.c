/*
 * rcu.c: grace periods, their state, the driver thread, and the grace-period sources.
 *
 * 1. What.  Synchronization by procrastination (seed 001 §2.1): readers run wait-free inside
 *    read-side critical sections; a writer that unlinks an object waits for a grace period,
 *    after which no reader can still hold it, and only then frees it (§2.2, call_rcu).  Prudence
 *    (seed 001 §4) needs more than a callback: "we modify the synchronization mechanism to
 *    provide information on the grace period state to the memory allocator".  So this layer
 *    exports the state of grace periods as a number (§4 below, after Linux's
 *    get_state_synchronize_rcu()/poll_state_synchronize_rcu()), and keeps computing the grace
 *    periods themselves in a *source*: the built-in RCU (§2-§3) or liburcu's memb and qsbr
 *    flavours (src/urcu_memb.c, src/urcu_qsbr.c, a separate library).
 *    call_rcu is a user of this state, not a part of it: call_rcu.c, on the floor above, takes
 *    a state for each batch of callbacks and waits for it (prd__rcu_wait_raw), as liburcu
 *    keeps call_rcu (urcu-call-rcu-impl.h) beside its grace-period code.  This file never
 *    calls it and has no hook of it.  Its hooks are the source's functions (§6: set by
 *    prd_rcu_set_source, or registered by libprudence-urcu or a program) and the driver's
 *    lt_wake (driver_poke), which it sets in thread.c.
 *
 * 2. The built-in read side (include/prudence_rcu.h).  The two-phase scheme of user-level RCU
 *    (Desnoyers, McKenney, Stern, Dagenais, Walpole, IEEE TPDS 2012, §3, the "memb" flavour):
 *    each thread has a record rr_ctr = [flips | nesting], the phase the lowest bit of flips.
 *    The outermost rcu_read_lock copies the global counter prd__rcu_gp_ctr (COUNT | flips)
 *    into rr_ctr, nested locks add COUNT, unlocks subtract it.  A reader is INACTIVE
 *    (nesting 0), ACTIVE_CURRENT (its phase equals the global phase) or ACTIVE_OLD.  Threads register automatically on their first
 *    outermost lock (rr_fast == 0 sends it to prd__rcu_read_lock_slow); a pthread key's
 *    destructor unregisters them at exit and reports a thread that exits inside a section.
 *    The record is in the thread's TLS, which the next thread to start may get and zero, so
 *    it must never stay in the registry after its thread.  glibc runs key destructors in
 *    rounds, at most PTHREAD_DESTRUCTOR_ITERATIONS, each in key order: a program's destructor
 *    that reads after ours ran registers the thread again, and ours, armed again, runs in the
 *    next round; in the last round there is none.  So this file's key is made at the first
 *    registration, after the keys the program made before it (pthread_key_create gives the
 *    lowest free index, so theirs usually come before ours, and their destructors run before
 *    ours in every round, the last included), not at load as the other layers' keys are; a
 *    spare made at load (rcu_spare_v) becomes the key when none can be made then (a program
 *    that took every key).  The destructor stays armed until the last round (it counts them,
 *    rt_exit_rounds), and a registration after it in that round, by a destructor on a key of
 *    a higher index, ends the process with a report (rt_dead) instead of leaving the record
 *    behind.  The count starts at the destructor's first run: a thread whose first
 *    registration is itself in such a destructor counts a round behind, and its record can
 *    outlive it (docs/api.md: not supported; glibc says no round number, and nothing runs
 *    after its last round).
 *
 * 3. The built-in grace period (gp_advance's stages, under gp_lock).
 *        (W1) full barrier on every thread          [done by gp_run before calling the source]
 *        wait until no reader is ACTIVE_OLD          (readers that began before the last flip)
 *        fence; flip the phase bit; fence
 *        (W1b) full barrier on every thread         [with membarrier; below]
 *        wait until no reader is ACTIVE_OLD          (readers that began before this flip)
 *        (W2) full barrier on every thread          [a membarrier except on TSO, below]
 *    Two waits because a reader may load the counter, be preempted, and store its snapshot
 *    after the flip: one flip alone could miss it (TPDS 2012 §3.2, "Why two phases").
 *    Memory ordering.  (R1), the reader's barrier after its snapshot store, pairs with (W1): a
 *    reader whose snapshot the writer does not see after (W1) must see, after (R1), everything
 *    the writer did before (W1), so it cannot reach the unlinked object.  That holds for an
 *    unlink made by the thread that runs (W1), as in liburcu, where the updater synchronizes.
 *    Here retirers are other threads (§4): (W1) makes a retirer's unlink visible by the time it
 *    returns, through the barrier on the retirer's CPU, but the barriers of one membarrier on
 *    different CPUs are not ordered, so a reader could begin a section after its own barrier
 *    and before the retirer's, load the old pointer, and keep its snapshot store buffered past
 *    the scan.  (W1b), a membarrier that begins after (W1) returned, is the barrier on the
 *    reader's CPU that comes after every unlink: a reader the second wait sees idle has no
 *    section that began before (W1b)'s barrier, and sections after it see the unlinks.  (The
 *    window needs a store buffered for microseconds, but TSO sets no bound.)  (R2), before the reader's clearing store, pairs with (W2): when
 *    the writer sees a reader inactive, the reader's loads inside the section are complete
 *    before the writer frees.  The writer reads rr_ctr with acquire loads and the reader clears
 *    it with a release store: on x86 these are plain movs, and they give TSan its
 *    happens-before edge.  On a TSO machine (x86: PRD_RCU_TSO) (W2) needs no membarrier: the
 *    hardware never makes a store visible before an earlier load of the same thread has
 *    completed, and (R2) keeps the compiler from sinking the section's loads below the
 *    clearing store; so when a scan reads a reader's clearing store, or the snapshot of its
 *    next section (a later store), every load of the old section has its value already, and
 *    nothing the writer's side does afterwards (the end of the grace period, a reuse) can
 *    change it.  liburcu keeps (W2) on x86 too; dropping it halves the IPIs of a grace period
 *    (2 membarriers to 1; docs/benchmarks.md, Design choices).  Weakly ordered machines (ARM, POWER) may
 *    let a later store overtake an earlier load, so there (W2) stays a membarrier.
 *    Barriers: with membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) (registered at init) (W1) and
 *    (W2) (off TSO) are membarrier calls and (R1)/(R2) compiler barriers; when the kernel
 *    refuses, or in TSan builds (TSan does not model membarrier: it would report the races that
 *    membarrier prevents), all four are full fences (prd__rcu_full_fence; under TSan a seq_cst
 *    exchange on a local, as gcc rejects fences there: x86 only).  The writer waits for readers
 *    by polling: spins, then sched_yield, then sleeps growing from 1 us to 1 ms (expedited mode:
 *    never sleeps; the driver sleeps with gp_lock dropped, §5).  Readers pay nothing for this
 *    (liburcu's futex wake-up costs the reader a load and a barrier at every outermost unlock).
 *    Counted.  The flip adds PRD__RCU_PHASE (the phase bit is the lowest bit of a count of
 *    flips, 48 bits on LP64), so a reader's rr_ctr names the flip its last outermost section
 *    saw, and an idle reader keeps it.  On x86-64 with membarrier (gp_counted), the built-in
 *    source runs its grace period as: (W1) or none (below); fence; flip to count F; fence; wait
 *    until every registered reader is cleared, where a reader is cleared by
 *      (a) count F, idle or inside a section: the section loaded the counter after the flip,
 *          and on TSO its later loads come after that load, so they see every store that
 *          precedes the flip, the retirers' unlinks among them (ordered before the flip by
 *          (W1) or by the retirers' fences, below); a later section loads the counter later
 *          still; and the record's stores become visible in order, so any section before the
 *          one seen has ended;
 *      (b) idle with an older count, once a membarrier has run since the flip: one the wait
 *          makes after RCU_IDLE_SCANS scans that found such readers (a thread that stopped
 *          reading never shows F).  Its barrier on the reader's CPU drains a snapshot store
 *          still buffered there, so a section not seen began after that barrier, which comes
 *          after every unlink the grace period covers was visible (made so before the flip by
 *          (W1) or by the retirers' fences), and its loads see them.  (W1) itself does not
 *          vouch: its barriers on different CPUs are not ordered (the two-phase scheme's
 *          (W1b) above);
 *      (c) this thread's own idle record (its stores precede its loads).
 *    A reader inside a section with an older count holds the grace period until it shows
 *    something else.  One flip is enough: the two-phase scheme waits twice because a phase bit
 *    cannot tell a section that loaded the counter before the flip from one that loaded it
 *    after; a count can, and (b) covers a reader between its load and its store (that
 *    reader's section loads after the membarrier's barrier, which follows the retirers'
 *    unlinks).  (W2) is not needed (TSO, as above).  A reader that runs sections shows F after
 *    its next one, so such a grace period makes no membarrier besides (W1).
 *    Without (W1) the retirers' unlinks must precede the flip by themselves: while
 *    prd__rcu_gp.gs_retire_fence is set, a retirer runs a full fence between its unlink and its
 *    load of the sequence (prd__rcu_get_state; a deferral's open generation reads it so once,
 *    when it closes, after all its unlinks: defer.c section 3), so a state that this grace
 *    period ends was loaded, after the unlink was visible, before the sequence went odd, and
 *    so before the flip (stores in order).  The flag costs retirers a fence each (deferrals one
 *    per generation), so it is set only while readers run sections (a reader seen
 *    inside one, or with a count of the last two flips), and cleared after RCU_FENCE_QUIET
 *    grace periods in a row saw none (counted_begin).  It goes up before a (W1), and only the
 *    grace periods after that (W1) skip theirs: a retirer that loaded the flag as 0 did so
 *    before it went up, so the (W1)'s barrier on its CPU follows its unlink.  It comes down
 *    after the sequence went odd: every retirer whose state that grace period ends loaded the
 *    sequence before it went odd, and the flag (loaded first) before it came down, so it
 *    fenced; the grace periods after run (W1) again.  Fork's child keeps the mode: it is one
 *    of the threads that obeyed it.  rcu_torture --broken-count (race.h) checks that a wrong
 *    count comparison is seen.
 *
 * 4. Grace-period state.  prd__rcu_gp.gs_seq is a 64-bit sequence: even = idle, odd = a grace period in
 *    progress; gp_run adds 1 at the start and 1 at the end.  prd_rcu_get_state() returns
 *    (seq + 3) & ~1: the end of the next grace period that starts after the call (if one is in
 *    progress it may have started before the object was unlinked, so it does not count).
 *    prd_rcu_poll_state(s) is one acquire load: seq >= s.  The acquire pairs with the release
 *    store that ends a grace period, after (W2), so a caller that sees true is ordered after
 *    every reader the grace period waited for.  get_state orders the caller's unlink before its
 *    load of the sequence with the reader barrier (R1 kind): with membarrier, the (W1) that gp_run
 *    executes after making seq odd acts on the caller too, so either the caller's load sees the
 *    odd value, or its unlink is visible once (W1) returns, before the flip and before the
 *    barrier that vouches for idle readers ((W1b), or §3's (b)).  While grace periods skip
 *    (W1), the caller fences instead (§3, "Counted").  The sequence never wraps in
 *    practice: 2^63 grace periods at one per microsecond last 292,000 years.
 *
 * 5. The driver thread (prd-rcu-gp) advances grace periods only while someone waits: gp_req
 *    holds the largest requested state; prd_rcu_request_gp(s) is one load when s is already
 *    requested (or over), else it raises gp_req under drv_lock and wakes the driver, starting
 *    it on first use (through thread.c: signals blocked).  The start is claimed under
 *    drv_lock (drv_running, drv_alive) and pthread_create runs with drv_lock dropped: it
 *    allocates (the new thread's DTV), through this library's malloc when it is preloaded,
 *    and that allocation may ask for a grace period.  A failed pthread_create clears the claim,
 *    so the next request tries again, and a thread blocked in a wait (prd_rcu_wait_state,
 *    call_rcu.c's worker) runs the grace periods itself (gp_run_until) instead of waiting for
 *    a driver that is not there.  The driver sleeps on drv_cond while gp_req is reached; idle with no waiter
 *    and no application thread left (thread.c section 3), it clears both flags under drv_lock
 *    and returns, and the next request starts a new one.  A request whose fast path sees
 *    gp_req >= s reads drv_alive after an acquire load of gp_req, pairing with the release
 *    store of gp_req under drv_lock: the raiser saw (or made) a running driver, and a driver
 *    leaves only with gp_req reached, so a request never rests on a driver that is gone.  Pacing:
 *    rcu_gp_delay_us (the idle driver waits that long after a first request, so later requests
 *    share the grace period) and rcu_gp_interval_us (minimum time between driven grace
 *    periods); both skipped while a thread is blocked in prd_rcu_wait_state, for expedited
 *    requests (prd__rcu_request_expedited, memory pressure) and with rcu_expedited=1.  A
 *    pacing wait is a timed wait on drv_cond (CLOCK_MONOTONIC), so a waiter or an expedited
 *    request that arrives during it ends it at once.
 *    Why pace by default (rcu_gp_interval_us = 1 ms, the order of Linux's shortest grace
 *    periods, and a tenth of the 10 ms liburcu's call_rcu thread sleeps between batches): a
 *    grace period interrupts every running thread of the process (membarrier IPIs), and an
 *    unpaced driver serving a steady stream of asynchronous requests (Prudence's latent
 *    magazines, one per 64 deferrals or so) runs them back to back, taking a core on a small
 *    machine.  Measured on 2 cores (prd-bench deferred, interval 0 vs 1000): 8-512 B pairs/s
 *    1.3-1.8x higher with the same peak RSS.  Nothing that must wait is slowed: blocked
 *    waiters and expedited requests (the allocator's bounded polls, §9, among them) are not
 *    paced.  A plain request does not wake a pacing driver, only an idle
 *    one (drv_idle): the driver reads gp_req again before its next grace period.
 *    The driver's grace period (drv_gp) scans for readers in windows of DRV_SCAN_NS and waits
 *    between two with gp_lock dropped: an allocation's bounded wait (§9), which never blocks on
 *    gp_lock, then finds it free and ends the grace period itself as soon as the reader has
 *    left, where a driver asleep under gp_lock made it poll until the driver woke (up to 1 ms).
 *    prd_synchronize_rcu runs the grace period itself under gp_lock, and returns at once if a
 *    grace period that started after its call ended while it waited for the lock (so concurrent
 *    callers share grace periods, as liburcu's do).
 *
 * 6. Sources (struct prd_rcu_source, include/prudence.h): chosen once per process, by
 *    prd_rcu_set_source() before first use or by the option rcu=NAME among the registered sources;
 *    fixed at first use (a deferral's first is one, defer.c section 3).  Whether the fixed source
 *    is an external one is published with it (source_note, gs_external): the deferrals then take
 *    its readers, which they cannot see, as running.  gp_run brackets the source's rs_synchronize
 *    with the sequence updates and (W1), so every source gets the same state semantics.  An option
 *    that names a source no linked library registered ends the process (source_missing), whatever
 *    abort_on_error says: a safety choice that cannot be honoured fails loudly, as falling back to
 *    the built-in source, which does not see liburcu's readers, would reuse deferred objects under
 *    them.  The liburcu sources register from libprudence-urcu's constructors, before main; the
 *    library stays linked under --as-needed through prudence_urcu.h, prudence-urcu.pc and CMake's
 *    prudence::urcu.  A thread that registers through prd_rcu_register_thread with such a source is
 *    registered there once, and its exit unregisters it (a pthread key of its own, as the built-in
 *    source's in §2), unless it unregistered: liburcu keeps a registered thread's record, in that
 *    thread's TLS, on its registry until the thread unregisters, and a grace period after the
 *    thread ended would read freed memory.
 *
 * 7. Fork.  The library's pthread_atfork handlers (fork.c, which states the whole process's
 *    lock order in its section 2) take every lock of this file before fork, through
 *    prd__rcu_fork_prepare_gp (gp_lock, reg_lock) and prd__rcu_fork_prepare (drv_lock,
 *    src_lock: the C library's stream-list lock comes between the two), and release them after
 *    (prd__rcu_fork_parent).  In the child prd__rcu_fork_child reinitializes them, forgets
 *    the other threads' reader records and marks the driver as not running: it starts again
 *    on the next request (thread.c forgets its id).  It also runs membarrier_setup again, as
 *    init does; the kernel needs no new registration, as it keeps the registration with the
 *    address space, which fork copies (only exec clears it), so the call finds the child
 *    registered and sets the same mode (use_membarrier, prd__rcu_reader_fences) that the
 *    parent had.  call_rcu.c's fork functions (its §7) do the same for its queues and worker.
 *    A fork that takes no lock (fork.c section 4: from a signal handler, or single-threaded)
 *    calls none of them.  A source's synchronize runs with gp_lock dropped (GP_EXT, §8), as it
 *    may wait for the forking thread itself (an online QSBR thread, a memb reader that waits
 *    for a lock the forking thread holds), prepare waits for one in progress to end, for at
 *    most FORK_EXT_WAIT_NS, then forks anyway, and the child, which lacks the thread that ran it, takes the sequence
 *    back to before that grace period (its states then wait for the child's own grace
 *    periods).  Such a child inherits liburcu's grace-period lock held, and must not wait for
 *    a grace period of that source: the price of a fork that cannot wait for a grace period
 *    that waits for it.  A thread that forks inside a read-side section while another runs a
 *    grace period deadlocks (as with liburcu): not allowed.
 *    A child whose source is not the built-in one inherits that source's registry of
 *    readers, the parent's other threads among them, which liburcu cannot be told to forget:
 *    a grace period of it may wait for a dead reader forever or read the record a dead
 *    thread left in memory the child reuses (an outside test saw the child's driver die of
 *    SIGSEGV in liburcu's synchronize_rcu, started by a refill that wanted the parent's
 *    deferred objects).  So such a child holds back (rcu_fork_hold): the library runs none
 *    of that source's grace periods on its own account (no driver: requests are noted; an
 *    allocation's bounded wait looks once), and the objects deferred before the fork stay
 *    where they are while allocations grow the caches instead; a blocking wait that is not
 *    the child's own (the call_rcu worker, started by an exiting thread's orphaned
 *    callbacks) sleeps until the hold ends.  The hold ends when the child itself uses RCU
 *    (prd__rcu_fork_release: its own deferral past the hit path, call_rcu, a request, a
 *    synchronize, a wait, a barrier, a thread registration, the destruction of a cache
 *    with deferred objects, which waits for them), which liburcu allows only to a child
 *    that released its registrations before the fork, as its README asks.  The allocator's
 *    own requests (prd__rcu_request_gp) do not end it; its end serves the requests noted
 *    during the hold (fork_release: their makers may not ask again).
 *
 * 8. Lock order: gp_lock -> reg_lock (a grace period scans the registry).  drv_lock and
 *    src_lock are leaves: never held while another lock of this file is taken.  The fork
 *    handlers take all four in the order gp, reg, drv, src, which respects the chain.  A grace
 *    period holds gp_lock while it runs, except the driver's built-in one between its windows
 *    of scans (§5) and a bounded wait's that ran out (§9), which leave it in progress for the
 *    next holder, and a source's rs_synchronize, which runs with gp_lock dropped and gp_stage
 *    at GP_EXT (every other holder then waits on gp_ext_cond, or, with a deadline, looks
 *    again later: one grace period at a time still); the built-in source holds
 *    reg_lock for each scan of the readers, never across a sleep.  The
 *    driver is created (thread.c) under drv_lock; thread.c's poke takes it alone.
 *
 * 9. The allocator never waits for readers and never changes the caller's RCU state.  An
 *    allocation may be made by a writer that holds a lock which readers take inside their
 *    read-side sections (in user space readers may block; the kernel's rcu_read_lock sections
 *    may not), or by an online QSBR thread that still holds references: a grace period run or
 *    awaited to its end on its behalf would deadlock with the first (the grace period waits
 *    for a reader that waits for the writer's lock) and, made possible by putting the thread
 *    offline (rs_block_begin), would let the second's objects be reused under it.  So the
 *    layers above wait for grace periods only through prd__rcu_poll_bounded, for a bounded
 *    time: with the built-in source the caller runs the grace period's steps itself while
 *    gp_lock is free (gp_advance; the driver's wake-up waits for a CPU on a loaded machine),
 *    every wait for readers stopping at the deadline and what is left handed to the driver,
 *    expedited; otherwise an expedited request and a poll of the state.  Never
 *    rs_block_begin/end, rs_quiescent_state or rs_thread_offline, never a block on gp_lock.
 *    Stopping half way is safe: the sequence stays odd, gp_stage says which wait comes next,
 *    and the next holder of gp_lock (the driver, a synchronize, another bounded wait) repeats
 *    the scan from there (the driver itself stops so between its windows of scans, §5);
 *    a scan is a set of loads whichever thread makes it, and the fences after it (the flip's,
 *    (W2)) are run by the thread that made the last one.  (W1), a membarrier, acted on every
 *    thread when the grace period began; in fence mode, a local fence, the thread that goes
 *    on runs it again before its first scan.  The
 *    calls that exist to wait (prd_synchronize_rcu, prd_rcu_wait_state, call_rcu.c's
 *    prd_rcu_barrier, cache destroy) still block, with a QSBR caller offline meanwhile: they
 *    are not allocations, and their callers know they wait (as liburcu documents which of its
 *    calls may wait for a grace period).
 *    The retirer's step (prd__rcu_advance_try) is the same with a deadline already passed:
 *    one scan, no wait.  The deferral path takes it at each generation it closes, and only
 *    while the retirers fence (§3, counted): a grace period is then a flip and a scan, no
 *    membarrier, so a thread that retires moves its grace periods on itself and a reader's
 *    next section ends them, where asking the driver meant a paced grace period a
 *    millisecond later on a third runnable thread (docs/benchmarks.md, "The retirer's step").
 *
 * 10. Statistics (prd_rcu_stats, PRD_RCU_STATS in prudence.h): one relaxed atomic counter per
 *    field, bumped only where the slow paths already are: a request that raises gp_req or
 *    gp_exp_req (under drv_lock), a grace period's end in gp_advance (with its length, from
 *    gp_start_ns, both under gp_lock), the driver's grace periods, each membarrier call, a
 *    synchronize or blocking wait that found its state not reached, and each bounded wait of
 *    the allocator (§9) past its first poll, with those that ran out.  Polls, requests
 *    already made and read-side sections count nothing.  The counters publish nothing: a
 *    reader gets each one on its own (relaxed), not all at one instant.
 */
#include <errno.h>
#include <limits.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "race.h"

/* ---- §2 the reader records ------------------------------------------------------------- */
__thread struct prd__rcu_reader prd__rcu_reader __attribute__((tls_model("initial-exec")));
unsigned long prd__rcu_gp_ctr = PRD__RCU_NEST_COUNT;
int prd__rcu_reader_fences = 1; /* fences until init has registered membarrier */

/* A thread's RCU state beyond the public reader record. */
struct rcu_thread {
  struct prd__rcu_reader *rt_reader;  /* &prd__rcu_reader of this thread */
  struct rcu_thread *rt_next, *rt_prev; /* reader registry (reg_lock) */
  bool rt_registered;                  /* in the reader registry */
  bool rt_offline;                     /* prd_rcu_thread_offline() called (built-in source) */
  bool rt_key_set;                     /* the exit destructor is armed */
  bool rt_warned_source;               /* prd_rcu_read_lock with another source: reported */
  bool rt_dead;                        /* its destructor's last round ran (§2): no record */
  unsigned rt_exit_rounds;             /* rounds of key destructors its destructor ran in */
};

#ifndef PTHREAD_DESTRUCTOR_ITERATIONS
#define PTHREAD_DESTRUCTOR_ITERATIONS 4
#endif

static __thread struct rcu_thread rcu_self __attribute__((tls_model("initial-exec")));

static pthread_mutex_t gp_lock = PTHREAD_MUTEX_INITIALIZER;  /* one grace period at a time */
static pthread_cond_t gp_ext_cond;   /* with gp_lock: a source's synchronize ended (§8) */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER; /* reader registry */
static struct rcu_thread *reg_head;
static _Atomic unsigned long rcu_key_v;   /* the exit destructor's key (thread.c section 6) */
static _Atomic unsigned long rcu_spare_v; /* one made at load, for when rcu_key_v cannot be (§2) */
static pthread_once_t rcu_once = PTHREAD_ONCE_INIT;
static bool use_membarrier;

/* ---- §4 state -------------------------------------------------------------------------- */
/* The sequence alone on its line: every poll reads it, only gp_run writes it.  Shared with
 * the layers above through prd__rcu_poll (internal.h), an inline copy of prd_rcu_poll_state. */
struct prd__rcu_gp_state prd__rcu_gp;

/* ---- §5 driver ------------------------------------------------------------------------- */
static pthread_mutex_t drv_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t drv_cond = PTHREAD_COND_INITIALIZER;     /* driver sleeps here */
static pthread_cond_t drv_done_cond = PTHREAD_COND_INITIALIZER; /* waiters sleep here */
static _Atomic uint64_t gp_req;       /* largest requested state */
static _Atomic uint64_t gp_exp_req;   /* largest state requested expedited */
static int drv_waiters;               /* threads blocked in wait_state (drv_lock) */
static bool drv_running;              /* the driver thread exists (drv_lock) */
static bool drv_idle;                 /* it sleeps until a request (drv_lock) */
static _Atomic bool drv_alive;        /* the same, read without the lock by request_gp */
static void *driver_main(void *arg);
static void driver_poke(void);
static struct prd__lthread drv_lt = { .lt_name = "prd-rcu-gp", .lt_main = driver_main,
                                      .lt_wake = driver_poke };

/* ---- §6 sources ------------------------------------------------------------------------ */
static pthread_mutex_t src_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct prd_rcu_source *_Atomic rcu_src;
#define RCU_MAX_SOURCES 8 /* builtin, two liburcu flavours, room for a test's or a user's */
static const struct prd_rcu_source *src_table[RCU_MAX_SOURCES];
static int src_count;

static const struct prd_rcu_source *rcu_source(void);

/* ---- §10 statistics -------------------------------------------------------------------- */
/* One relaxed counter per field of PRD_RCU_STATS (prudence.h), bumped on slow paths only. */
#define RCU_STAT_ENUM(name, doc) RCU_ST_##name,
enum { PRD_RCU_STATS(RCU_STAT_ENUM) RCU_ST_COUNT };
#undef RCU_STAT_ENUM
static _Atomic uint64_t rcu_stat[RCU_ST_COUNT];
static uint64_t gp_start_ns;   /* gp_lock: when the grace period in progress began */

static void rcu_count(int which, uint64_t n)
{
  atomic_fetch_add_explicit(&rcu_stat[which], n, memory_order_relaxed);
}

/* ---- barriers -------------------------------------------------------------------------- */
/* Total store order: a CPU never lets a later store become visible before an earlier load
 * has completed (x86).  §3 uses it to do without (W2)'s membarrier. */
#if defined(__x86_64__) || defined(__i386__)
#define PRD_RCU_TSO 1
#else
#define PRD_RCU_TSO 0
#endif
/* The counted grace period (§3): on a TSO machine with a 64-bit word and membarrier. */
#if PRD_RCU_TSO && ULONG_MAX > 0xffffffffUL
#define RCU_COUNTED 1
#else
#define RCU_COUNTED 0
#endif
#define RCU_FENCE_QUIET 16  /* grace periods in a row that saw no reader reading: (W1) again */
#define RCU_IDLE_SCANS 4    /* scans held only by readers seen idle before a membarrier vouches */
static bool gp_counted;     /* RCU_COUNTED and membarrier registered (membarrier_setup) */

/* (W1)/(W2): a full barrier on every thread of the process, or on this one in fence mode. */
static void smp_mb_master(void)
{
  if (use_membarrier) {
    rcu_count(RCU_ST_membarriers, 1);
    int e = prd__os_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
    if (e != 0) {
      /* registered at start, refused now for good (a seccomp filter installed since), or for
       * want of memory for a second (os.c section 11): the readers run without fences and
       * this barrier is their half, so no grace period can be trusted.  A fence here is not
       * that half; the process ends, whatever abort_on_error says (a safety guarantee that
       * cannot be kept fails loudly, as debug.c's protections do) */
      prd__report("rcu: membarrier(PRIVATE_EXPEDITED) failed (errno %d) after it was "
                  "registered: readers run without fences, so grace periods cannot be kept",
                  e);
      abort();
    }
  } else {
    prd__rcu_full_fence();
  }
}

/* Registers membarrier; fence mode if the kernel refuses (or TSan: see §3).  The barrier
 * itself is tried once too: a seccomp filter may let the query and the registration through
 * and refuse the command, and a refusal found at the first grace period, with readers
 * already relying on it, can only end the process (§3). */
static void membarrier_setup(void)
{
#ifdef PRD_TSAN
  use_membarrier = false;
#else
  use_membarrier = prd__os_membarrier_register();
#endif
  /* No reader is registered yet (init runs before the first registration), or in the fork
   * child this is the only thread: switching modes here is safe. */
  __atomic_store_n(&prd__rcu_reader_fences, use_membarrier ? 0 : 1, __ATOMIC_RELAXED);
  gp_counted = RCU_COUNTED && use_membarrier;
}

static void rcu_thread_exit(void *arg);

/* A spare of the reader records' exit key, made at load (thread.c section 6; §2 says why the
 * key itself is made later). */
__attribute__((constructor)) static void rcu_key_at_load(void)
{
  prd__thread_key_at_load(&rcu_spare_v, rcu_thread_exit);
}

/* drv_cond waits with timeouts on CLOCK_MONOTONIC (pacing); set up before any use. */
static void drv_cond_setup(void)
{
  prd__lthread_cond_init(&drv_cond);
  prd__lthread_cond_init(&gp_ext_cond);
}

static void rcu_init_once(void)
{
  prd__init();
  drv_cond_setup();
  membarrier_setup();
}

static void rcu_init(void)
{
  pthread_once(&rcu_once, rcu_init_once);
}

/* ---- §2 registration ------------------------------------------------------------------- */
/* The exit destructor, on the key made at load or at the first registration that needs it
 * (thread.c section 6); no key that was not made is ever set.  False when the key cannot be
 * made, or the value cannot be set. */
static bool exit_key_arm(_Atomic unsigned long *slot, void (*dtor)(void *), void *value,
                         bool *set)
{
  if (!*set) {
    pthread_key_t key;
    if (!prd__thread_key(slot, dtor, &key) || pthread_setspecific(key, value) != 0)
      return false;
    *set = true;
    prd__lthread_app_arrive();   /* its exit may leave the library threads alone (§5) */
  }
  return true;
}

/* A reader must leave the registry when its thread ends: its record is in the thread's TLS,
 * which is freed (or becomes another thread's) then, and the grace periods read it.  Without
 * the destructor there is no safe way on: the record could not be unregistered, and a reader
 * not registered is not waited for.  So the process ends, whatever abort_on_error says (a
 * safety guarantee that cannot be kept fails loudly); a spare key is made at load, so only a
 * process that had no key left before the library was loaded, nor at this thread's first
 * section, gets here. */
static void arm_exit_destructor(struct rcu_thread *t)
{
  if (prd_likely(exit_key_arm(&rcu_key_v, rcu_thread_exit, t, &t->rt_key_set)))
    return;
  /* no key left: the spare made at load becomes the key, for this thread and every later
   * one (acq_rel: as prd__thread_key's publication) */
  unsigned long none = 0, spare = atomic_load_explicit(&rcu_spare_v, memory_order_acquire);
  if (spare != 0)
    atomic_compare_exchange_strong_explicit(&rcu_key_v, &none, spare, memory_order_acq_rel,
                                            memory_order_acquire);
  if (exit_key_arm(&rcu_key_v, rcu_thread_exit, t, &t->rt_key_set))
    return;
  prd__report("rcu: no thread-exit destructor for this reader thread (pthread_key_create or "
              "pthread_setspecific failed: the process's pthread keys are all taken): its "
              "record would outlive it, and grace periods would read freed memory");
  abort();
}

static void reader_register(struct rcu_thread *t)
{
  rcu_init();
  if (t->rt_registered)
    return;
  if (prd_unlikely(t->rt_dead)) {
    prd__report("rcu: a read-side section in a pthread key destructor's last round, after "
                "the library's: this thread's record would outlive it, and grace periods "
                "would read freed memory");
    abort();
  }
  arm_exit_destructor(t);   /* before the record is linked: no record without it */
  t->rt_reader = &prd__rcu_reader;
  pthread_mutex_lock(&reg_lock);
  t->rt_prev = NULL;
  t->rt_next = reg_head;
  if (reg_head != NULL)
    reg_head->rt_prev = t;
  reg_head = t;
  t->rt_registered = true;
  pthread_mutex_unlock(&reg_lock);
}

static void reader_unregister(struct rcu_thread *t)
{
  if (!t->rt_registered)
    return;
  pthread_mutex_lock(&reg_lock);
  if (t->rt_prev != NULL)
    t->rt_prev->rt_next = t->rt_next;
  else
    reg_head = t->rt_next;
  if (t->rt_next != NULL)
    t->rt_next->rt_prev = t->rt_prev;
  t->rt_registered = false;
  pthread_mutex_unlock(&reg_lock);
  prd__rcu_reader.rr_fast = 0;
}

static unsigned long reader_nesting(void)
{
  return prd__rcu_reader.rr_ctr & PRD__RCU_NEST_MASK;
}

static int builtin_read_ongoing(void);

void prd__rcu_read_lock_slow(void)
{
  struct rcu_thread *t = &rcu_self;
  if (reader_nesting() == PRD__RCU_NEST_MASK) {
    /* one more would carry into the flip count, which grace periods trust (§3) */
    prd__report("rcu: prd_rcu_read_lock nested more than %lu levels deep",
                (unsigned long)PRD__RCU_NEST_MASK);
    abort();
  }
  if (t->rt_offline) {
    prd__error("rcu: prd_rcu_read_lock on an offline thread (call prd_rcu_thread_online first)");
    t->rt_offline = false;
  }
  reader_register(t);
  const struct prd_rcu_source *src = rcu_source();
  /* a source over the built-in read side says so with the built-in's rs_read_ongoing */
  if (src->rs_read_ongoing != builtin_read_ongoing && !t->rt_warned_source) {
    t->rt_warned_source = true;
    prd__report("rcu: prd_rcu_read_lock used while the grace-period source is %s: it does not "
                "protect against that source's grace periods (use the flavour's rcu_read_lock)",
                src->rs_name);
  }
  prd__rcu_reader.rr_fast = 1;
  prd_rcu_read_lock();
}

void prd__rcu_read_unlock_slow(void)
{
  prd__error("rcu: prd_rcu_read_unlock without a matching prd_rcu_read_lock (ignored)");
}

/* ---- §3 the built-in grace period ------------------------------------------------------ */
static bool expedited_now(void);

/* The kth sleep of a backoff: 1 us doubling up to 1 ms (the writer's waits for readers, the
 * driver's sleeps between windows of scans). */
static uint64_t backoff_ns(unsigned k)
{
  return (uint64_t)1000 << PRD_MIN(k, 10u);
}

static void sleep_ns(uint64_t ns)
{
  struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
  int old = prd__cancel_off();   /* a bounded wait sleeps under gp_lock (os.c section 8) */
  nanosleep(&ts, NULL);
  prd__cancel_on(old);
}

/* Waits after the nth unsuccessful scan: spin, then yield, then sleep 1 us .. 1 ms. */
static void reader_backoff(unsigned n)
{
  if (n < 16) {
    for (int i = 0; i < 64; i++)
      prd__cpu_relax();
  } else if (n < 64 || expedited_now()) {
    sched_yield();
  } else {
    sleep_ns(backoff_ns(n - 64));
  }
}

/* True when some registered reader is ACTIVE_OLD with respect to the current phase.  With
 * `try`, reg_lock is only tried, and a registry held by another thread reads as no reader:
 * the caller holds no gp_lock then (an allocation after its bounded wait, §9), and blocking
 * there would take reg_lock outside gp_lock, against fork's order (fork.c section 2: its
 * prepare holds gp_lock and reg_lock while it waits for the C library's stream-list lock,
 * whose holder may wait for a FILE lock that this allocating thread holds). */
static bool readers_old(bool try)
{
  unsigned long gp = __atomic_load_n(&prd__rcu_gp_ctr, __ATOMIC_RELAXED);
  if (!try)
    pthread_mutex_lock(&reg_lock);
  else if (pthread_mutex_trylock(&reg_lock) != 0)
    return false;
  bool old = false;
  for (struct rcu_thread *t = reg_head; t != NULL && !old; t = t->rt_next) {
    /* acquire: pairs with the reader's release clearing store (after R2) */
    unsigned long v = __atomic_load_n(&t->rt_reader->rr_ctr, __ATOMIC_ACQUIRE);
    old = (v & PRD__RCU_NEST_MASK) != 0 && ((v ^ gp) & PRD__RCU_PHASE) != 0;
  }
  pthread_mutex_unlock(&reg_lock);
  return old;
}

/* The wait after the nth scan that found a reader in the way: reader_backoff, its sleeps cut
 * at monotonic time `deadline` (ns; UINT64_MAX: none; a bounded runner, §9); false when the
 * deadline has passed.  `quick`: the first three spins are 8, 16 and 32 pauses (the counted
 * grace period's: a reader running sections shows the new count after its next one). */
static bool reader_wait(unsigned n, uint64_t deadline, bool quick)
{
  if (deadline != UINT64_MAX) {
    uint64_t now = prd__now_ns();
    if (now >= deadline)
      return false;
    if (n >= 64) {
      sleep_ns(PRD_MIN(backoff_ns(n - 64), deadline - now));
      return true;
    }
  }
  if (quick && n < 3) {
    for (int i = 0; i < 8 << n; i++)
      prd__cpu_relax();
  } else {
    reader_backoff(n);
  }
  return true;
}

/* Waits until no reader is ACTIVE_OLD; false when monotonic time `deadline` (ns) passed first
 * (a bounded runner, §9: the same backoff, its sleeps cut at the deadline). */
static bool wait_for_readers_until(uint64_t deadline)
{
  for (unsigned n = 0; readers_old(false); n++)
    if (!reader_wait(n, deadline, false))
      return false;
  return true;
}

static bool gp_fenced_w1;   /* gp_lock: a (W1) ran while gs_retire_fence was set */
static bool gp_mb;          /* gp_lock: a membarrier since this grace period's flip */
static bool gp_saw_reader;  /* gp_lock: this grace period saw a reader running sections */
static unsigned gp_quiet = RCU_FENCE_QUIET; /* gp_lock: grace periods in a row that saw none */

/* gp_lock held, the sequence just made odd: (W1), or, while the retirers fence, a grace period
 * without it.  Retirers fence from a grace period that saw a reader running sections
 * (counted_scan) until RCU_FENCE_QUIET in a row saw none.  The flag goes up before a (W1),
 * and only the grace periods after that (W1) skip theirs: a retirer that loaded the flag as 0
 * did so before it went up, so its unlink precedes its barrier of that (W1) (§3, "Counted").
 * It comes down after the sequence went odd, so every retirer whose state this grace period
 * ends loaded it as 1 and fenced, and the next grace period runs (W1) again. */
static void counted_begin(void)
{
  bool want = gp_quiet < RCU_FENCE_QUIET;
  bool fenced = atomic_load_explicit(&prd__rcu_gp.gs_retire_fence, memory_order_relaxed) != 0;
  if (want && !fenced) {
    /* relaxed: the (W1) below (a syscall that begins with a full barrier) publishes it */
    atomic_store_explicit(&prd__rcu_gp.gs_retire_fence, 1, memory_order_relaxed);
    fenced = true;
    gp_fenced_w1 = false;
  }
  gp_saw_reader = false;
  gp_mb = false;   /* (W1) does not vouch for idle readers: only a membarrier after the flip */
  if (fenced && gp_fenced_w1) {
    rcu_count(RCU_ST_gp_fenced, 1);
  } else {
    smp_mb_master(); /* (W1) */
    gp_fenced_w1 = fenced;
  }
  if (!want && fenced) {
    atomic_store_explicit(&prd__rcu_gp.gs_retire_fence, 0, memory_order_relaxed);
    gp_fenced_w1 = false;
  }
}

/* One counted scan of the registry (reg_lock taken, or only tried with `try`: a held
 * registry reads as nothing in the way, as readers_old's).  *saw is set when a reader runs
 * sections: it is inside one, or began one since the flip before this one (a reader that
 * stopped reading keeps an old count).  Bit 1: a reader inside a section
 * that began before the flip (its count is not the current one); bit 0: a reader seen idle
 * with an older count, which only a membarrier since the flip (`mb`) lets the scan trust.
 * 0: nothing holds the grace period. */
#define HOLD_IDLE 1
#define HOLD_ACTIVE 2
static int counted_scan(bool try, bool mb, bool *saw)
{
  unsigned long gp = __atomic_load_n(&prd__rcu_gp_ctr, __ATOMIC_RELAXED);
  if (!try)
    pthread_mutex_lock(&reg_lock);
  else if (pthread_mutex_trylock(&reg_lock) != 0)
    return 0;
  int hold = 0;
  for (struct rcu_thread *t = reg_head; t != NULL && !(hold & HOLD_ACTIVE); t = t->rt_next) {
    /* acquire: pairs with the reader's release clearing store (after R2) */
    unsigned long v = __atomic_load_n(&t->rt_reader->rr_ctr, __ATOMIC_ACQUIRE);
    bool idle = (v & PRD__RCU_NEST_MASK) == 0;
    /* a reader: inside a section, or its last one began after one of the last two flips */
    *saw |= !idle || gp / PRD__RCU_PHASE - v / PRD__RCU_PHASE <= 1;
    if (((v ^ gp) & ~PRD__RCU_NEST_MASK) == 0)
      continue;            /* its last section began after the flip */
    if (prd__rcu_broken_count && (((v + PRD__RCU_PHASE) ^ gp) & ~PRD__RCU_NEST_MASK) == 0)
      continue;            /* the torture's wrong comparison (race.h) */
    if (idle)
      /* this thread's own record needs no barrier: its stores precede its loads */
      hold |= mb || t == &rcu_self ? 0 : HOLD_IDLE;
    else
      hold |= HOLD_ACTIVE;
  }
  pthread_mutex_unlock(&reg_lock);
  return hold;
}

/* A reader inside a section that holds the grace period in progress, by the scan of the
 * grace period's kind; reg_lock only tried (readers_old's `try`: no gp_lock held). */
static bool reader_in_section_try(void)
{
  bool saw = false;
  return gp_counted ? (counted_scan(true, true, &saw) & HOLD_ACTIVE) != 0 : readers_old(true);
}

/* gp_lock held, the counter flipped: waits until nothing holds the grace period (false at
 * monotonic time `deadline`, as wait_for_readers_until); after RCU_IDLE_SCANS scans that found
 * readers idle with an older count, a membarrier vouches for every idle reader. */
static bool counted_wait_until(uint64_t deadline)
{
  unsigned idle = 0;
  for (unsigned n = 0;; n++) {
    int hold = counted_scan(false, gp_mb, &gp_saw_reader);
    if (hold == 0)
      break;
    if ((hold & HOLD_IDLE) && ++idle >= RCU_IDLE_SCANS) {
      smp_mb_master();
      gp_mb = true;
      continue;
    }
    if (!reader_wait(n, deadline, true))
      return false;
  }
  gp_quiet = gp_saw_reader ? 0 : PRD_MIN(gp_quiet + 1, (unsigned)RCU_FENCE_QUIET);
  return true;
}

/* The built-in grace period in its two stages (gp_lock held, (W1) executed): 1 waits for the
 * readers of the previous phase and flips, 2 waits for the readers that began before the flip
 * and runs (W2).  gp_stage keeps where a bounded runner (§9) stopped, so that the next
 * holder of gp_lock goes on from there: a scan is a scan whichever thread makes it, and the
 * fences below are run by the thread that makes the last scan before them. */
static int gp_stage; /* gp_lock: 0 none in progress, 1 (W1) done, 2 phase flipped,
                      * GP_EXT a source's rs_synchronize runs with gp_lock dropped (§8) */
#define GP_EXT 3

/* gp_lock held: waits (gp_lock dropped meanwhile) until the source's synchronize that
 * another thread runs (GP_EXT) has ended; false at monotonic time `deadline` (ns; UINT64_MAX:
 * none) if it has not. */
static bool gp_ext_wait(uint64_t deadline)
{
  struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
  while (gp_stage == GP_EXT) {
    if (deadline == UINT64_MAX)
      prd__cond_wait(&gp_ext_cond, &gp_lock);
    else if (prd__cond_timedwait(&gp_ext_cond, &gp_lock, &ts) == ETIMEDOUT)
      return gp_stage != GP_EXT;
  }
  return true;
}

static bool builtin_stages(int *stage, uint64_t deadline, bool counted)
{
  if (*stage == 1) {
    if (!counted && !wait_for_readers_until(deadline))   /* readers of the previous phase */
      return false;
    /* Writer-local ordering, paired with no reader barrier (liburcu has the same two): the
     * first scan's loads complete before the flip is stored, and the flip is visible before
     * the second scan, else the writer could wait forever on readers that keep starting in
     * the old phase (progress, not safety: safety comes from (W1)/(R1) and (W2)/(R2)). */
    prd__rcu_full_fence();
    __atomic_store_n(&prd__rcu_gp_ctr, prd__rcu_gp_ctr + PRD__RCU_PHASE, __ATOMIC_RELAXED);
    prd__rcu_full_fence();
    /* (W1b), two-phase only: a reader seen idle by the second wait is trusted, which needs a
     * barrier on its CPU after every retirer's unlink is visible (after (W1) returned, §3) */
    if (!counted && use_membarrier)
      smp_mb_master();
    *stage = 2;
  }
  if (counted)
    return counted_wait_until(deadline);   /* no (W2): counted only on TSO */
  if (!wait_for_readers_until(deadline))     /* readers that began before the flip */
    return false;
  /* (W2), paired with the readers' (R2); with membarrier on TSO (R2) alone keeps their loads
   * before the clearing store (§3), and fence mode's (W2) is a local fence either way */
  if (!PRD_RCU_TSO || !use_membarrier)
    smp_mb_master();
  return true;
}

/* rs_synchronize of the built-in source, which gp_advance never calls (it runs the stages
 * itself, under gp_lock, with gp_stage): only a source of a program's own that wraps the
 * built-in one calls it, as that source's step, (W1) executed, gp_lock dropped and gp_stage
 * at GP_EXT, so no other grace period runs meanwhile (§8).  Its stage is its own. */
static void builtin_synchronize(void)
{
  int stage = 1;
  (void)builtin_stages(&stage, UINT64_MAX, false);
}

static int builtin_read_ongoing(void)
{
  return reader_nesting() != 0;
}

static void builtin_register(void)
{
  struct rcu_thread *t = &rcu_self;
  t->rt_offline = false;
  reader_register(t);
  prd__rcu_reader.rr_fast = 1;
}

static void builtin_unregister(void)
{
  if (reader_nesting() != 0) {
    prd__error("rcu: prd_rcu_unregister_thread inside a read-side critical section (ignored)");
    return;
  }
  reader_unregister(&rcu_self);
}

static void builtin_offline(void)
{
  if (reader_nesting() != 0) {
    prd__error("rcu: prd_rcu_thread_offline inside a read-side critical section (ignored)");
    return;
  }
  rcu_self.rt_offline = true;
  prd__rcu_reader.rr_fast = 0; /* a read_lock while offline takes the slow path: reported */
}

static void builtin_online(void)
{
  rcu_self.rt_offline = false;
  if (rcu_self.rt_registered)
    prd__rcu_reader.rr_fast = 1;
}

const struct prd_rcu_source prd_rcu_builtin = {
  .rs_name = "builtin",
  .rs_synchronize = builtin_synchronize,
  .rs_register_thread = builtin_register,
  .rs_unregister_thread = builtin_unregister,
  .rs_quiescent_state = NULL, /* memb: outside a section a thread is quiescent (checked) */
  .rs_thread_offline = builtin_offline,
  .rs_thread_online = builtin_online,
  .rs_read_ongoing = builtin_read_ongoing,
  .rs_block_begin = NULL,
  .rs_block_end = NULL,
};

/* ---- §6 sources ------------------------------------------------------------------------ */
static bool source_valid(const struct prd_rcu_source *src)
{
  return src != NULL && src->rs_name != NULL && src->rs_name[0] != '\0' &&
         src->rs_synchronize != NULL;
}

static const struct prd_rcu_source *source_find(const char *name)
{
  if (strcmp(name, prd_rcu_builtin.rs_name) == 0)
    return &prd_rcu_builtin;
  for (int i = 0; i < src_count; i++)
    if (strcmp(src_table[i]->rs_name, name) == 0)
      return src_table[i];
  return NULL;
}

/* The option names a source that no linked library registered.  Falling back to another
 * source would be unsafe: the built-in RCU does not see liburcu's readers, so deferred
 * objects would be reused under them.  So the process ends, whatever abort_on_error says,
 * with a message that names the option and what to link.  _exit, not exit: this may run on
 * the driver thread, or inside an allocation, where atexit handlers must not run. */
_Noreturn static PRD_COLD void source_missing(const char *name)
{
  char known[RCU_MAX_SOURCES * 24 + 16];
  size_t n = (size_t)snprintf(known, sizeof(known), "%s", prd_rcu_builtin.rs_name);
  for (int i = 0; i < src_count && n < sizeof(known); i++)
    n += (size_t)snprintf(known + n, sizeof(known) - n, ", %s", src_table[i]->rs_name);
  prd__report("rcu: option rcu=%s names no grace-period source of this program (it has: %s); "
              "urcu-memb and urcu-qsbr need libprudence-urcu linked (pkg-config --libs "
              "prudence-urcu, CMake prudence::urcu, or #include <prudence_urcu.h> and "
              "-lprudence-urcu), a source of the program's own needs prd_rcu_register_source "
              "before first use: exiting, as another source would not see the program's "
              "readers", name, known);
  _exit(EXIT_FAILURE);
}

/* The source about to be published: whether it is the built-in one, for the deferrals'
 * hit path (prd__rcu_source_external), written before the release that publishes it. */
static void source_note(const struct prd_rcu_source *src)
{
  atomic_store_explicit(&prd__rcu_gp.gs_external, src != &prd_rcu_builtin,
                        memory_order_relaxed);
}

static PRD_NOINLINE const struct prd_rcu_source *source_fix(void)
{
  rcu_init();
  pthread_mutex_lock(&src_lock);
  const struct prd_rcu_source *src = atomic_load_explicit(&rcu_src, memory_order_relaxed);
  if (src == NULL) {
    char name[64];
    src = &prd_rcu_builtin;
    if (prd__option_choice("rcu", name, sizeof(name),
                           "the grace-period source is chosen at the first use of RCU") == 0) {
      const struct prd_rcu_source *found = source_find(name);
      if (found == NULL)
        source_missing(name); /* does not return */
      src = found;
    }
    source_note(src);
    atomic_store_explicit(&rcu_src, src, memory_order_release);
  }
  pthread_mutex_unlock(&src_lock);
  return src;
}

static const struct prd_rcu_source *rcu_source(void)
{
  const struct prd_rcu_source *src = atomic_load_explicit(&rcu_src, memory_order_acquire);
  return prd_likely(src != NULL) ? src : source_fix();
}

int prd_rcu_set_source(const struct prd_rcu_source *src)
{
  if (!source_valid(src)) {
    prd__report("prd_rcu_set_source: %s", src == NULL ? "NULL source"
                                          : "source without rs_name or rs_synchronize");
    errno = EINVAL;
    return -1;
  }
  rcu_init();
  pthread_mutex_lock(&src_lock);
  const struct prd_rcu_source *cur = atomic_load_explicit(&rcu_src, memory_order_relaxed);
  int rc = 0;
  if (cur == NULL) {
    source_note(src);
    atomic_store_explicit(&rcu_src, src, memory_order_release);
    /* the option says which source is in use (prd_option_get), and stays so */
    (void)prd__option_set_fixed("rcu", src->rs_name, "prd_rcu_set_source",
                                "the grace-period source was set by prd_rcu_set_source");
  } else if (cur != src)
    rc = -1;
  pthread_mutex_unlock(&src_lock);
  if (rc != 0) {
    /* said, not only returned: a program that does not test the result runs on a source
     * that may not see its readers */
    prd__report("prd_rcu_set_source(%s): the source %s is in use already (fixed at the first "
                "use of RCU or by an earlier call); not changed", src->rs_name, cur->rs_name);
    errno = EBUSY;
  }
  return rc;
}

int prd_rcu_register_source(const struct prd_rcu_source *src)
{
  if (!source_valid(src)) {
    prd__report("prd_rcu_register_source: %s", src == NULL ? "NULL source"
                                               : "source without rs_name or rs_synchronize");
    errno = EINVAL;
    return -1;
  }
  int rc = 0;
  pthread_mutex_lock(&src_lock);
  const struct prd_rcu_source *old = source_find(src->rs_name);
  if (old != NULL && old != src) {
    errno = EEXIST;
    rc = -1;
  } else if (old == NULL) {
    if (src_count == RCU_MAX_SOURCES) {
      errno = ENOSPC;
      rc = -1;
    } else {
      src_table[src_count++] = src;
    }
  }
  pthread_mutex_unlock(&src_lock);
  return rc;
}

const struct prd_rcu_source *prd_rcu_get_source(void)
{
  return rcu_source();
}

/* ---- §4 state -------------------------------------------------------------------------- */
prd_gp_t prd_rcu_get_state(void)
{
  return prd__rcu_get_state(); /* the reader barrier pairs with (W1), §4 */
}

bool prd_rcu_poll_state(prd_gp_t s)
{
  return prd__rcu_poll(s);
}

/* One grace period with gp_lock held: the sequence, (W1), the source, the end.  With the
 * built-in source and a deadline (monotonic ns; UINT64_MAX: none) the waits for readers stop
 * at the deadline: false, the grace period left in progress (odd sequence, gp_stage) for the
 * next call, from any thread, to go on with. */
static bool gp_advance(const struct prd_rcu_source *src, uint64_t deadline)
{
  if (gp_stage == GP_EXT) {
    /* another thread runs the source's synchronize with gp_lock dropped (§8): its end is
     * the end of a grace period.  A caller with a deadline looks again later (the driver
     * waits for it before it calls this, drv_gp; a bounded wait runs no source's
     * synchronize, §9). */
    if (deadline != UINT64_MAX)
      return false;
    return gp_ext_wait(UINT64_MAX);
  }
  bool counted = gp_counted && src == &prd_rcu_builtin;
  uint64_t s = atomic_load_explicit(&prd__rcu_gp.gs_seq, memory_order_relaxed);
  if (gp_stage == 0) {
    PRD_ASSERT((s & 1) == 0);
    atomic_store_explicit(&prd__rcu_gp.gs_seq, s + 1, memory_order_relaxed);
    gp_start_ns = prd__now_ns();
    PRD_RACE(); /* race widening (src/race.h) */
    if (counted)
      counted_begin(); /* (W1), or none while the retirers fence */
    else
      smp_mb_master(); /* (W1): the odd sequence and the retirers' unlinks before the waits */
    if (src->rs_synchronize != builtin_synchronize) {
      /* a source's synchronize cannot be bounded, and may wait for the thread that forks
       * (an online QSBR thread): it runs with gp_lock dropped, so that fork's prepare, which
       * takes gp_lock, never waits for it unboundedly (§7).  GP_EXT keeps every other holder
       * of gp_lock from starting or ending a grace period meanwhile. */
      gp_stage = GP_EXT;
      pthread_mutex_unlock(&gp_lock);
      PRD_RACE(); /* race widening (src/race.h) */
      int old = prd__cancel_off();   /* liburcu's waits are cancellation points (os.c §8) */
      src->rs_synchronize();
      prd__cancel_on(old);
      pthread_mutex_lock(&gp_lock);
      gp_stage = 0;
      pthread_cond_broadcast(&gp_ext_cond);
      s += 2;
      goto end;
    }
    gp_stage = 1;
    s += 2;
  } else {
    PRD_ASSERT((s & 1) == 1);
    s += 1;
    /* going on with a grace period another thread began (§9): a membarrier (W1) acted on
     * this thread too; fence mode's (W1) is a local fence, so run it here before the scans */
    if (!use_membarrier)
      smp_mb_master();
  }
  if (!builtin_stages(&gp_stage, deadline, counted))
    return false;
  gp_stage = 0;
end:
  /* release: everything the grace period observed before a poller that sees the end */
  atomic_store_explicit(&prd__rcu_gp.gs_seq, s, memory_order_release);
  rcu_count(RCU_ST_gp_completed, 1);
  rcu_count(RCU_ST_gp_ns, prd__now_ns() - gp_start_ns);
  return true;
}

static void gp_run(const struct prd_rcu_source *src)
{
  (void)gp_advance(src, UINT64_MAX);
}

/* ---- §5 the driver --------------------------------------------------------------------- */
static uint64_t now_us(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static bool expedited_now(void)
{
  return prd__opt(rcu_expedited) ||
         atomic_load_explicit(&gp_exp_req, memory_order_relaxed) >
             atomic_load_explicit(&prd__rcu_gp.gs_seq, memory_order_relaxed);
}

/* drv_lock held: pace until `until` (monotonic us), unless a thread blocks on a grace period
 * or a request is expedited: both signal drv_cond, which ends the wait early. */
static void drv_pace_locked(uint64_t until)
{
  while (drv_waiters == 0 && !expedited_now()) {
    uint64_t t = now_us();
    if (t >= until)
      break;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (until - t) * 1000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    prd__cond_timedwait(&drv_cond, &drv_lock, &ts); /* drv_cond runs on CLOCK_MONOTONIC */
  }
}

/* thread.c's poke (no lock held): the driver looks for application threads at once. */
static void driver_poke(void)
{
  pthread_mutex_lock(&drv_lock);
  pthread_cond_signal(&drv_cond);
  pthread_mutex_unlock(&drv_lock);
}

/* The driver's grace period (gp_lock held; dropped and taken again meanwhile).  Its waits
 * for readers are scans for DRV_SCAN_NS at a time (gp_advance with a deadline), and between
 * two it waits with gp_lock dropped, yielding, then sleeping from 1 us to 1 ms (expedited:
 * yielding only).  So an allocation's bounded wait (§9), which never blocks on gp_lock, finds
 * it free while the driver sleeps on a reader, and once the reader has left it ends the grace
 * period itself instead of polling until the driver wakes: a driver that slept holding gp_lock
 * let a bound of defer_poll_us run out over a grace period nothing held any more, and the
 * cache grew.  Stopping between scans is the same hand-over as a bounded wait's (§9: the
 * sequence stays odd, gp_stage says which wait comes next; gp_lock's release and acquire
 * order the stage and the flip for the next holder).  Returns once a grace period has
 * ended: true when the driver ended it, false when another holder did meanwhile. */
#define DRV_SCAN_NS 20000u   /* one window of scans: spins and yields over a reader's section */
static bool drv_gp(const struct prd_rcu_source *src)
{
  /* another thread runs the source's synchronize with gp_lock dropped (§8): its end ends
   * the grace period in progress; wait for it here (the wait drops gp_lock), not in the
   * loop below, whose windows would only spin on it */
  if (gp_stage == GP_EXT) {
    (void)gp_ext_wait(UINT64_MAX);
    return false;
  }
  uint64_t seq = atomic_load_explicit(&prd__rcu_gp.gs_seq, memory_order_relaxed);
  for (unsigned n = 0; !gp_advance(src, prd__now_ns() + DRV_SCAN_NS); n++) {
    pthread_mutex_unlock(&gp_lock);
    if (n < 4 || expedited_now())
      sched_yield();
    else
      sleep_ns(backoff_ns(n - 4));
    pthread_mutex_lock(&gp_lock);
    uint64_t now = atomic_load_explicit(&prd__rcu_gp.gs_seq, memory_order_relaxed);
    if (gp_stage == 0 && now > (seq | 1))   /* another holder ended the one in progress */
      return false;
  }
  return true;
}

static void *driver_main(void *arg)
{
  (void)arg;
  uint64_t last_end = 0;
  pthread_mutex_lock(&drv_lock);
  for (;;) {
    bool slept = false;
    while (prd_rcu_poll_state(atomic_load_explicit(&gp_req, memory_order_relaxed))) {
      /* idle, nobody waiting: no application thread left means no reason to stay (§5) */
      if (drv_waiters == 0 && prd__lthread_idle_exit(&drv_lt)) {
        drv_running = false;
        atomic_store_explicit(&drv_alive, false, memory_order_relaxed);
        pthread_mutex_unlock(&drv_lock);
        return NULL;
      }
      drv_idle = true;
      prd__lthread_idle_wait(&drv_cond, &drv_lock, CLOCK_MONOTONIC, &drv_lt);
      drv_idle = false;
      slept = true;
    }
    long delay = prd__opt(rcu_gp_delay_us), interval = prd__opt(rcu_gp_interval_us);
    uint64_t until = 0;
    if (slept && delay > 0)
      until = now_us() + (uint64_t)delay;
    if (interval > 0 && last_end + (uint64_t)interval > until)
      until = last_end + (uint64_t)interval;
    if (until != 0)
      drv_pace_locked(until);
    pthread_mutex_unlock(&drv_lock);
    const struct prd_rcu_source *src = rcu_source();
    PRD_RACE(); /* race widening (src/race.h) */
    pthread_mutex_lock(&gp_lock);
    /* a prd_synchronize_rcu may have served the requests while we paced or took the lock */
    if (!prd_rcu_poll_state(atomic_load_explicit(&gp_req, memory_order_relaxed))) {
      if (drv_gp(src))
        rcu_count(RCU_ST_gp_by_driver, 1);
    }
    pthread_mutex_unlock(&gp_lock);
    last_end = now_us();
    pthread_mutex_lock(&drv_lock);
    pthread_cond_broadcast(&drv_done_cond);
  }
  return NULL;
}

/* drv_lock held: true when the driver runs or this thread started it.  drv_lock is dropped
 * around pthread_create (§5): it allocates (the new thread's DTV), through this library's
 * malloc when it is preloaded, and that allocation may ask for a grace period and come back
 * to drv_lock.  So the start is claimed first (drv_running, drv_alive), and a request or a
 * waiter that comes meanwhile counts on it; a start that failed clears the claim, and wakes
 * the waiters, which then run the grace period themselves (prd__rcu_wait_raw). */
static bool drv_start_locked(void)
{
  if (drv_running)
    return true;
  if (prd__rcu_fork_held())   /* §7: a fork child's source runs nothing on its own */
    return false;
  /* a start that failed (a thread limit) is tried again 10 ms later, not at every request
   * meanwhile, each try mapping a stack and failing a clone; a waiter runs the grace period
   * itself meanwhile (§9) */
  if (!prd__lthread_may_try(&drv_lt))
    return false;
  drv_running = true;
  atomic_store_explicit(&drv_alive, true, memory_order_relaxed);
  int rc = prd__lthread_start_unlocked(&drv_lt, &drv_lock);
  if (rc == 0)
    return true;
  drv_running = false;   /* a request 10 ms later tries again (thread.c section 2) */
  atomic_store_explicit(&drv_alive, false, memory_order_relaxed);
  pthread_cond_broadcast(&drv_done_cond);
  return false;
}

/* With drv_lock held (dropped and taken again when it starts the driver): raise gp_req to s,
 * start the driver, or wake it if it sleeps idle;
 * `hurry` wakes it from a pacing wait too (a blocked waiter, an expedited request).  A plain
 * request needs no wake-up while the driver paces or runs: it reads gp_req again before its
 * next grace period (waking it at every request made it sleep and wake again for nothing:
 * a third of the context switches of `prd-bench deferred --sizes 4096`). */
static bool request_locked(prd_gp_t s, bool hurry)
{
  /* release: pairs with prd_rcu_request_gp's acquire (its drv_alive is then at least as
   * new as the drv_alive this request saw) */
  if (atomic_load_explicit(&gp_req, memory_order_relaxed) < s) {
    atomic_store_explicit(&gp_req, s, memory_order_release);
    rcu_count(RCU_ST_gp_requests, 1);
  }
  if (!drv_start_locked())
    return false;
  if (drv_idle || hurry)
    pthread_cond_signal(&drv_cond);
  return true;
}

void prd_rcu_request_gp(prd_gp_t s)
{
  prd__rcu_fork_release();   /* the program asks: it uses RCU (§7) */
  prd__rcu_request_gp(s);
}

void prd__rcu_request_gp(prd_gp_t s)
{
  if (prd_rcu_poll_state(s))
    return;
  /* one more load: already requested, and the driver exists to serve it (acquire: the
   * request that raised gp_req saw the driver running, or started it) */
  if (atomic_load_explicit(&gp_req, memory_order_acquire) >= s &&
      atomic_load_explicit(&drv_alive, memory_order_relaxed))
    return;
  rcu_init();
  pthread_mutex_lock(&drv_lock);
  request_locked(s, false);
  pthread_mutex_unlock(&drv_lock);
}

void prd__rcu_request_expedited(prd_gp_t s)
{
  if (prd_rcu_poll_state(s))
    return;
  rcu_init();
  pthread_mutex_lock(&drv_lock);
  if (atomic_load_explicit(&gp_exp_req, memory_order_relaxed) < s) {
    atomic_store_explicit(&gp_exp_req, s, memory_order_relaxed);
    rcu_count(RCU_ST_gp_expedited, 1);
  }
  request_locked(s, true);  /* signals drv_cond: ends a pacing wait */
  pthread_mutex_unlock(&drv_lock);
}

/* Wakes the threads blocked in prd__rcu_wait_raw after a grace period that was not the
 * driver's ended (no lock held): they look at the state again. */
static void drv_done_wake(void)
{
  pthread_mutex_lock(&drv_lock);
  pthread_cond_broadcast(&drv_done_cond);
  pthread_mutex_unlock(&drv_lock);
}

/* gp_lock held: grace periods on this thread until poll(s); gp_lock released. */
static void gp_run_held(const struct prd_rcu_source *src, prd_gp_t s)
{
  while (!prd_rcu_poll_state(s))
    gp_run(src);
  pthread_mutex_unlock(&gp_lock);
}

/* Runs grace periods on this thread until poll(s): a waiter whose driver could not be
 * started (no lock held). */
static void gp_run_until(prd_gp_t s)
{
  pthread_mutex_lock(&gp_lock);
  gp_run_held(rcu_source(), s);
  drv_done_wake();
}

/* Blocks until poll(s), through the driver, or on this thread when no driver can be started;
 * no checks (call_rcu.c's worker uses it too). */
void prd__rcu_wait_raw(prd_gp_t s)
{
  rcu_init();
  rcu_count(RCU_ST_gp_blocking_waits, 1);
  pthread_mutex_lock(&drv_lock);
  drv_waiters++;
  (void)request_locked(s, true);
  /* drv_running read again after each wake-up: a start that another thread claimed may
   * have failed meanwhile (drv_start_locked) */
  while ((drv_running || prd__rcu_fork_held()) && !prd_rcu_poll_state(s))
    prd__cond_wait(&drv_done_cond, &drv_lock);   /* held: until the child uses RCU (§7) */
  drv_waiters--;
  pthread_mutex_unlock(&drv_lock);
  if (!prd_rcu_poll_state(s))
    gp_run_until(s);
}

/* Reports a blocking grace-period wait inside a read-side section; true if it was one. */
bool prd__rcu_in_read_section(const struct prd_rcu_source *src, const char *what)
{
  if (reader_nesting() != 0 || (src->rs_read_ongoing != NULL && src->rs_read_ongoing())) {
    prd__error("rcu: %s called inside a read-side critical section (it would deadlock; "
               "ignored)", what);
    return true;
  }
  return false;
}

void prd_rcu_wait_state(prd_gp_t s)
{
  if (prd_rcu_poll_state(s))
    return;
  prd__rcu_fork_release();
  const struct prd_rcu_source *src = rcu_source();
  if (prd__rcu_in_read_section(src, "prd_rcu_wait_state"))
    return;
  int token = src->rs_block_begin ? src->rs_block_begin() : 0;
  prd__rcu_wait_raw(s);
  if (src->rs_block_end)
    src->rs_block_end(token);
}

/* Runs grace periods on the calling thread, under gp_lock, until state s is reached (none if
 * one that began after s was taken ended meanwhile; at most two: s is at most the next one's
 * end, §4); then wakes the waiters whose state they reached.  `what` names the caller in the
 * report of a call inside a read-side section, which returns at once. */
#define SYNC_SPINS 128 /* polls of ~64 pauses: about 200 us, ten grace periods without readers */

static void fork_release(bool serve);

static void sync_until(prd_gp_t s, const char *what)
{
  fork_release(false);
  if (prd_rcu_poll_state(s))
    return;
  const struct prd_rcu_source *src = rcu_source();
  if (prd__rcu_in_read_section(src, what))
    return;
  rcu_count(RCU_ST_gp_syncs, 1);
  int token = src->rs_block_begin ? src->rs_block_begin() : 0;
  /* Another thread running a grace period holds gp_lock for its length (tens of us): poll
   * the state meanwhile, as its end may be ours, and block on the lock only after
   * SYNC_SPINS polls (a futex sleep and wake-up cost about as much as the wait). */
  bool locked = false;
  for (unsigned n = 0; n < SYNC_SPINS && !prd_rcu_poll_state(s); n++) {
    if (pthread_mutex_trylock(&gp_lock) == 0) {
      locked = true;
      break;
    }
    for (int i = 0; i < 64; i++)
      prd__cpu_relax();
  }
  if (!locked && !prd_rcu_poll_state(s)) {
    pthread_mutex_lock(&gp_lock);
    locked = true;
  }
  if (locked)
    gp_run_held(src, s);
  if (src->rs_block_end)
    src->rs_block_end(token);
  drv_done_wake();
}

void prd_synchronize_rcu(void)
{
  sync_until(prd_rcu_get_state(), "prd_synchronize_rcu");
}

/* The allocator's only way to wait for a grace period (§9), for at most `ns` nanoseconds.
 * With the built-in source, and gp_lock free, the caller runs the grace period's steps itself
 * (no hand-off to the driver, whose wake-up waits for a CPU on a loaded machine), each wait
 * for readers stopping at the deadline; a grace period it cannot finish stays in progress
 * (gp_advance) and is asked of the driver, expedited, which goes on with it.  Otherwise (a
 * liburcu source, whose synchronize cannot be bounded, or gp_lock held by another grace
 * period) it asks the driver and polls the state: spins for the first POLL_SPIN_NS, then
 * sched_yield (on a loaded machine the driver may be waiting for this CPU), past POLL_SLEEP_NS
 * short sleeps (only out-of-memory's long polls get there).  It never blocks on gp_lock and
 * never calls the source's rs_block_begin/end or a quiescent-state function: the caller's
 * RCU state is what it was, and no reader can hold it past the bound. */
#define POLL_SPIN_NS 5000u     /* a few grace periods' worth of state loads, then yield */
#define POLL_SLEEP_NS 200000u  /* past this, sleep 50 us at a time instead of yielding */

/* The built-in grace period's steps on this thread while gp_lock is free (a try-lock: never
 * a block on it, §9), until state s or monotonic time `deadline` (ns; each wait for readers
 * stops there, the stages left for the next holder); the waiters blocked on a state this
 * reached are woken.  1: s reached; 0: the deadline came first; -1: gp_lock was held. */
static int gp_run_try(prd_gp_t s, uint64_t deadline)
{
  if (pthread_mutex_trylock(&gp_lock) != 0)
    return -1;
  bool done = true;
  while (done && !prd_rcu_poll_state(s))
    done = gp_advance(&prd_rcu_builtin, deadline);
  pthread_mutex_unlock(&gp_lock);
  drv_done_wake();   /* blocked waiters whose state this reached */
  return done ? 1 : 0;
}

/* The sequence when this thread's last bounded wait ran out with a reader holding the grace
 * period open (perhaps one that waits for this thread).  While it has not moved another wait
 * would only run out again: it is not made.  Any progress (the driver, asked for it when the
 * wait ran out, starts or ends a grace period) allows the next.  With the built-in source, a
 * wait that ran out with no reader in the way (a runner or the driver preempted on a loaded
 * machine) is not remembered: the grace period will end soon, and the next miss waits for it
 * rather than grow.  Another source's readers are not visible here, and its grace period is
 * the driver's synchronize: a wait that ran out is remembered, or while one reader stays in
 * its section every miss polls the whole bound again (a reader inside one section for
 * seconds cut a thread's allocations 90-fold under urcu-memb), and in a fork child, where
 * such a source's grace periods never end (§7), every miss did. */
static _Thread_local uint64_t poll_gave_up = UINT64_MAX;

bool prd__rcu_poll_bounded(prd_gp_t s, uint64_t ns)
{
  if (prd_rcu_poll_state(s))
    return true;
  rcu_count(RCU_ST_gp_inline_waits, 1);
  /* a wait that would only run out again, or a fork child's hold (§7): no grace period of
   * the source to wait for */
  if (atomic_load_explicit(&prd__rcu_gp.gs_seq, memory_order_relaxed) == poll_gave_up ||
      prd__rcu_fork_held()) {
    rcu_count(RCU_ST_gp_inline_timeouts, 1);
    return false;
  }
  uint64_t start = prd__now_ns();
  const struct prd_rcu_source *src = rcu_source();
  /* a reader of this thread would make its own grace period wait: never inside a section */
  bool inline_gp = src == &prd_rcu_builtin && reader_nesting() == 0;
  if (!inline_gp)
    prd__rcu_request_expedited(s);
  for (;;) {
    int run = inline_gp ? gp_run_try(s, start + ns) : -1;
    if (run == 1)
      return true;
    if (run == 0)
      break;   /* a reader held it to the deadline */
    if (prd_rcu_poll_state(s))
      return true;
    uint64_t t = prd__now_ns() - start;
    if (t >= ns)
      break;
    if (t < POLL_SPIN_NS) {
      for (int i = 0; i < 64; i++)
        prd__cpu_relax();
    } else if (t < POLL_SLEEP_NS) {
      sched_yield();
    } else {
      sleep_ns(PRD_MIN(ns - t, (uint64_t)50000));
    }
  }
  /* not reached: the driver, expedited, ends it (and a grace period left in progress here) */
  if (inline_gp)
    prd__rcu_request_expedited(s);
  if (!inline_gp || reader_in_section_try())
    poll_gave_up = atomic_load_explicit(&prd__rcu_gp.gs_seq, memory_order_relaxed);
  bool reached = prd_rcu_poll_state(s);
  if (!reached)
    rcu_count(RCU_ST_gp_inline_timeouts, 1);
  return reached;
}

/* The retirer's step (internal.h): gp_advance with a deadline already passed, so each wait
 * for readers is one scan; the stages stay where it stopped (gp_stage), for the next holder
 * of gp_lock.  Only while the retirers fence (the counted grace period skips (W1)): a grace
 * period then costs a flip and a scan, where otherwise its membarrier interrupts every CPU
 * (the driver paces those).  A reader running sections shows the new count after its next
 * one, so a retirer that steps at each closed generation ends its grace periods itself, with
 * no wake-up of the driver (a third runnable thread beside a reader and a writer). */
bool prd__rcu_advance_try(prd_gp_t s)
{
  if (prd_rcu_poll_state(s))
    return true;
  rcu_init();   /* gp_counted is set once, in the pthread_once: its load is ordered after */
  return gp_counted && prd__rcu_retire_fenced() && rcu_source() == &prd_rcu_builtin &&
         reader_nesting() == 0 && gp_run_try(s, 0) == 1;
}

/* ---- §10 statistics -------------------------------------------------------------------- */
int prd_rcu_stats(prd_rcu_stats_t *st)
{
  if (st == NULL || st->size < offsetof(prd_rcu_stats_t, gp_requests)) {
    errno = EINVAL;
    return -1;
  }
  prd_rcu_stats_t full;
  full.size = st->size;
  full.version = PRD_RCU_STATS_VERSION;
#define RCU_STAT_COPY(name, doc) \
  full.name = atomic_load_explicit(&rcu_stat[RCU_ST_##name], memory_order_relaxed);
  PRD_RCU_STATS(RCU_STAT_COPY)
#undef RCU_STAT_COPY
  memcpy(st, &full, PRD_MIN(st->size, sizeof(full)));
  return 0;
}

/* ---- thread functions, forwarded to the source ------------------------------------------ */
/* A thread registered through prd_rcu_register_thread with a source of its own (liburcu's
 * flavours): that source until it unregisters, so that its exit unregisters it there as the
 * built-in source's destructor does (§2).  liburcu keeps a registered thread's record, which
 * is in the thread's TLS, on its registry until the thread unregisters: a thread that exits
 * registered leaves freed memory there, which the next grace period reads.  The key's value
 * is the source; the flag says the key is set (the thread counts as an application thread
 * once, thread.c section 3, as for the built-in source). */
static __thread const struct prd_rcu_source *rcu_ext_src __attribute__((tls_model("initial-exec")));
static __thread bool rcu_ext_key_set __attribute__((tls_model("initial-exec")));
static _Atomic unsigned long rcu_ext_key_v;   /* thread.c section 6 */

static void rcu_ext_thread_exit(void *arg)
{
  const struct prd_rcu_source *src = arg;
  rcu_ext_key_set = false;
  if (rcu_ext_src == src) {
    rcu_ext_src = NULL;
    if (src->rs_read_ongoing && src->rs_read_ongoing())
      prd__error("rcu: thread exited inside a read-side critical section of source %s (its "
                 "grace periods no longer wait for it)", src->rs_name);
    src->rs_unregister_thread();
  }
  prd__lthread_app_leave();
}

void prd_rcu_register_thread(void)
{
  prd__rcu_fork_release();
  const struct prd_rcu_source *src = rcu_source();
  if (src == &prd_rcu_builtin || src->rs_unregister_thread == NULL) {
    if (src->rs_register_thread)
      src->rs_register_thread();
    return;
  }
  /* the source's register again even when this file registered the thread already: the
   * program may have unregistered it through the source's own call since (liburcu's
   * urcu_memb_unregister_thread), and a source's register does nothing for a thread it has
   * registered (include/prudence.h; the urcu sources test liburcu's own flag) */
  if (src->rs_register_thread)
    src->rs_register_thread();
  if (rcu_ext_src == src)
    return;   /* the exit destructor is armed already */
  rcu_ext_src = src;
  if (!exit_key_arm(&rcu_ext_key_v, rcu_ext_thread_exit, (void *)src, &rcu_ext_key_set))
    prd__error("rcu: no thread-exit destructor for this thread (pthread_key_create or "
               "pthread_setspecific failed): it will not unregister from its liburcu source "
               "at exit");
}

void prd_rcu_unregister_thread(void)
{
  const struct prd_rcu_source *src = rcu_source();
  if (src->rs_unregister_thread)
    src->rs_unregister_thread();
  if (rcu_ext_src == src)
    rcu_ext_src = NULL;
}

/* Sources of the memb kind need no quiescent-state announcements (a thread outside a
 * read-side section is quiescent): what remains is checking that the caller is outside one. */
void prd_rcu_quiescent_state(void)
{
  const struct prd_rcu_source *src = rcu_source();
  if (src->rs_quiescent_state)
    src->rs_quiescent_state();
  else if (reader_nesting() != 0 || (src->rs_read_ongoing && src->rs_read_ongoing()))
    prd__error("rcu: prd_rcu_quiescent_state inside a read-side critical section");
}

void prd_rcu_thread_offline(void)
{
  const struct prd_rcu_source *src = rcu_source();
  if (src->rs_thread_offline)
    src->rs_thread_offline();
}

void prd_rcu_thread_online(void)
{
  const struct prd_rcu_source *src = rcu_source();
  if (src->rs_thread_online)
    src->rs_thread_online();
}

/* ---- §2 thread exit -------------------------------------------------------------------- */
static void rcu_thread_exit(void *arg)
{
  struct rcu_thread *t = arg;
  t->rt_key_set = false;
  /* armed again until glibc's last round, so that a registration by a later destructor of
   * the program is undone in the next round, or refused in the last (§2) */
  if (++t->rt_exit_rounds < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_key_t key;
    if (prd__thread_key(&rcu_key_v, rcu_thread_exit, &key) && pthread_setspecific(key, t) == 0)
      t->rt_key_set = true;
  } else {
    t->rt_dead = true;
  }
  if (t->rt_registered) {
    unsigned long nest = reader_nesting();
    if (nest != 0) {
      /* clear first: the grace periods waiting for this thread must not stall */
      __atomic_store_n(&prd__rcu_reader.rr_ctr, 0, __ATOMIC_RELEASE);
      prd__error("rcu: thread exited inside a read-side critical section (nesting %lu)", nest);
    }
    reader_unregister(t);
  }
  prd__lthread_app_leave();
}

/* ---- §7 fork --------------------------------------------------------------------------- */
PRD__FORK_LINK();
/* The child's hold on a source's grace periods (§7).  Set only in the child, where one
 * thread runs until it starts others; relaxed: a thread the child starts later sees the
 * value of its creation or a later one, and a stale true only delays a grace period. */
static _Atomic bool rcu_fork_hold;

bool prd__rcu_fork_held(void)
{
  return atomic_load_explicit(&rcu_fork_hold, memory_order_relaxed);
}

/* The end of the hold.  With `serve`, a request noted while held gets the driver: it started
 * none (drv_start_locked), and the one who made it may not ask again (a CPU cache asks once
 * per state, defer.c section 4).  A synchronize ends the hold without: it runs the grace
 * periods on its own thread at once (and a sanitizer's fork child may start no thread). */
static void fork_release(bool serve)
{
  if (prd_unlikely(atomic_load_explicit(&rcu_fork_hold, memory_order_relaxed))) {
    /* under drv_lock, a leaf: a blocking wait held back (prd__rcu_wait_raw) tests the flag
     * under it, so it either sees false or is woken here */
    pthread_mutex_lock(&drv_lock);
    atomic_store_explicit(&rcu_fork_hold, false, memory_order_relaxed);
    prd_gp_t s = atomic_load_explicit(&gp_req, memory_order_relaxed);
    if (serve && !prd_rcu_poll_state(s))
      (void)request_locked(s, false);
    pthread_cond_broadcast(&drv_done_cond);
    pthread_mutex_unlock(&drv_lock);
  }
}

void prd__rcu_fork_release(void)
{
  fork_release(true);
}

/* How long fork's prepare lets a source's synchronize in progress (GP_EXT) end before it
 * forks anyway: long enough for a grace period of liburcu's without a stalled reader
 * (microseconds to a millisecond or two), short against one that waits for the forking
 * thread itself (an online QSBR thread; a reader that waits for a lock the forking thread
 * holds), which can never end while it forks. */
#define FORK_EXT_WAIT_NS 20000000u

void prd__rcu_fork_prepare_gp(void)
{
  pthread_mutex_lock(&gp_lock);
  if (gp_stage == GP_EXT) {
    /* a child that inherits the synchronize in progress finds liburcu's own grace-period
     * lock held by a thread it does not have: let it end first, for a bounded time.  Any
     * source's may be waiting for this thread: a QSBR one for this thread online, a memb one
     * for a reader whose section waits for a lock this thread holds (allowed: sections may
     * take locks that updaters hold) or for a reader that just runs long; liburcu alone never
     * makes a fork wait for readers */
    (void)gp_ext_wait(prd__now_ns() + FORK_EXT_WAIT_NS);
  }
  pthread_mutex_lock(&reg_lock);
}

void prd__rcu_fork_prepare(void)
{
  pthread_mutex_lock(&drv_lock);
  pthread_mutex_lock(&src_lock);
}

void prd__rcu_fork_parent(void)
{
  pthread_mutex_unlock(&src_lock);
  pthread_mutex_unlock(&drv_lock);
}

void prd__rcu_fork_parent_gp(void)
{
  pthread_mutex_unlock(&reg_lock);
  pthread_mutex_unlock(&gp_lock);
}

void prd__rcu_fork_child(void)
{
  pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cinit = PTHREAD_COND_INITIALIZER;
  struct rcu_thread *self = &rcu_self;
  gp_lock = reg_lock = drv_lock = src_lock = init;
  drv_cond = drv_done_cond = cinit;
  drv_cond_setup();
  membarrier_setup();
  /* only this thread exists now */
  reg_head = NULL;
  if (self->rt_registered) {
    self->rt_next = self->rt_prev = NULL;
    reg_head = self;
  }
  drv_running = false;
  drv_idle = false;
  atomic_store(&drv_alive, false);
  drv_waiters = 0;
  if (gp_stage == GP_EXT) {
    /* the thread that ran the source's synchronize is not in the child: that grace period
     * never began here.  The sequence goes back to the even value before it, so every state
     * that waited for it waits for the child's next grace periods instead, which begin after
     * the fork (later, never earlier: no object is reused sooner than it would have been). */
    gp_stage = 0;
    atomic_store(&prd__rcu_gp.gs_seq, atomic_load(&prd__rcu_gp.gs_seq) - 1);
  }
  /* requests of the parent's threads die with them; this thread's next request restarts */
  atomic_store(&gp_req, atomic_load(&prd__rcu_gp.gs_seq));
  const struct prd_rcu_source *src = atomic_load_explicit(&rcu_src, memory_order_relaxed);
  atomic_store_explicit(&rcu_fork_hold, src != NULL && src != &prd_rcu_builtin,
                        memory_order_relaxed);
}
