/*
 * fork.c: the process-wide fork orchestration (pthread_atfork).  The library's one atfork
 * registration; its handlers call each layer's small fork functions in the whole-process
 * lock order, which this file states once for the library.
 *
 * 1. What.  A fork copies one thread into the child, with every lock as it was: a lock held
 *    by another thread stays held for good.  So prepare takes every lock of the process in
 *    one order before fork, and parent and child release them after; each layer owns its
 *    locks and exports the functions that take and release them (rcu.c §7, call_rcu.c §7,
 *    vmem.c §15, slab.c, cache.c §7, debug.c, maint.c §5, magazine.c §11, thread.c §5,
 *    os.c §9), and only this file knows the order in which they are called, malloc.c's
 *    start-up lock (the first of the allocator's) included.  One registration: two handlers
 *    taking one mutex would deadlock the forking thread, so no other file registers its own.
 *    The registration is a constructor, so a fork before any cache exists finds every lock
 *    consistent too.  No file calls into this one, so each file with fork functions names
 *    prd__fork_anchor (PRD__FORK_LINK, internal.h): a static link that takes the file takes
 *    this one, and its constructor, with it.
 *
 * 2. The whole-process lock order, as prepare takes it:
 *        rcu gp_lock -> rcu reg_lock -> the C library's stream-list lock
 *          -> rcu drv_lock -> src_lock -> call_rcu wrk_lock -> cbq_lock
 *          -> malloc_init_lock (malloc.c §6)
 *          -> vmem heap_lock -> vmem_qcache_lock -> magazine.c §12's order
 *             (maint_lock -> mag_reap_lock -> cache_reap_lock -> cache_list_lock
 *              -> mag_registry_lock -> every tc_lock -> every cache_lock -> mag_id_lock
 *              -> every dp_lock)
 *          -> debug dbg_qlock -> vmem_list_lock -> every arena's vm_lock
 *          -> os_lock_lock (os.c section 9: the lock pages, a leaf)
 *    Each layer's own order is part of this one (rcu.c §8, call_rcu.c §8, magazine.c §12,
 *    vmem.c §15).  call_rcu.c's locks come after all of rcu.c's: it never holds one across a
 *    call into rcu.c, and rcu.c never calls it.
 *    The stream-list lock (glibc's _IO_list_lock, which fflush(NULL), fopen and fclose hold,
 *    fflush(NULL) while it takes each stream's lock) is glibc's, which its fork takes itself,
 *    after the prepare handlers and before its own malloc locks.  The C library calls the
 *    allocator while it holds a stream's lock (getdelim grows its line with realloc), so if
 *    prepare held an allocator lock when glibc waited for the list lock, a thread in
 *    fflush(NULL) (holding the list lock, waiting for a stream) and one in getline (holding
 *    the stream, waiting in realloc for the lock prepare held) would close a cycle.  prepare
 *    therefore takes the list lock before every lock an allocation may take, rcu's driver and
 *    call_rcu's locks included (a miss may request a grace period; starting a library thread
 *    allocates), as glibc takes it before its malloc locks.  gp_lock and reg_lock come
 *    before it: a grace period holds them while it waits for readers, and a reader may use
 *    stdio inside its read-side section; this needs that no allocation blocks on gp_lock, nor
 *    on reg_lock without gp_lock: an allocation's bounded wait only tries gp_lock (and runs
 *    the grace period's steps under it, bounded), and outside it only tries reg_lock (rcu.c
 *    §9; docs/api.md).  The list lock is recursive: glibc's own acquisition
 *    after ours nests in it, glibc drops its hold before the parent handlers (parent drops
 *    ours), and in the child glibc resets the lock before the child handlers (the child
 *    handler leaves it alone).  glibc takes and resets it only when the process has had a
 *    second thread (__libc_single_threaded clear, the flag its fork reads), and prepare takes
 *    it only then too.  Both are weak references: with a C library that has neither, prepare
 *    takes only the locks of this library.
 *
 * 3. Parent and child.  Both release in the reverse order.  The child then lets each layer
 *    forget the threads that did not survive the fork: rcu.c and call_rcu.c reinitialize
 *    their locks and call_rcu.c orphans the other threads' callbacks (call_rcu.c first, the
 *    reverse of prepare, as in the parent), the magazine layer takes over their CPU caches
 *    (flushed as at thread exit) and keeps the forking thread's, so that thread's caches stay
 *    usable, maint.c marks the maintenance thread as not running (it restarts when the child
 *    needs it), stats.c makes its writers' lock anew (the maintenance thread may have held it
 *    for a snapshot; it takes no lock of the order while the snapshot's locks are its own)
 *    and options.c its option lock (a leaf),
 *    and thread.c forgets the library threads' ids.  thread.c's part takes no lock
 *    and runs in every child, also after a fork that took nothing (section 4).
 *
 * 4. A fork that must not wait.  prepare takes nothing (and that fork's parent and child
 *    handlers release nothing) (i) when the process never had a second thread
 *    (__libc_single_threaded set, glibc's own test for its malloc locks): no other thread can
 *    hold a lock, and the child is a copy of the parent, whatever the forking thread held;
 *    (ii) when the forking thread is inside a fork section (prd__fork_section > 0: malloc.c
 *    marks its start-up, its calls into the class caches and its big blocks; prepare marks
 *    the handlers' own window until parent or child has released everything): the fork comes
 *    from a signal handler or from an atfork handler run inside another fork, and its thread
 *    may hold some of the locks, so waiting for them could wait for itself.  Argument: the
 *    mark is set before a section's first lock and cleared after its last unlock (signal
 *    fences order the relaxed accesses against the lock calls; only the thread and its signal
 *    handlers read it), so a thread outside every section holds none of these locks (the
 *    marked sections are the malloc family's way into them) and its prepare waits only for
 *    other threads, which hold them in the order and release them without waiting for this
 *    one.  Inside a section prepare waits for nothing.  Its parent handler returns before the
 *    interrupted code resumes, which finds its locks as it left them.  The child of such a
 *    fork (POSIX: after a fork in a multi-threaded process or from a signal handler, only
 *    async-signal-safe calls until exec) keeps the locks as they were, held by threads that
 *    are gone or by the interrupted frame, and its handlers touch nothing of the layers'
 *    locks, so _exit and exec never wait.  Forks of one thread nest innermost first, so the
 *    thread's count of forks that took nothing (fork_skipped) tells each parent and child
 *    handler whether its own prepare took the locks.  Not covered: a thread of a
 *    multi-threaded process interrupted inside the other entry points (prd_cache_*,
 *    prd_vmem_*, the grace-period waits), whose fork from a signal handler still waits for
 *    the lock it holds.
 */
#include <pthread.h>

#include "internal.h"

const char prd__fork_anchor = 0;   /* named by every file with fork functions (internal.h) */

_Thread_local _Atomic unsigned prd__fork_section __attribute__((tls_model("initial-exec")));
/* This thread's forks whose prepare took nothing and whose parent or child handler has not
 * run yet (section 4: forks of one thread nest, innermost first). */
static _Thread_local unsigned fork_skipped;
/* The prepare of this thread's fork that took the locks also took the stream-list lock. */
static _Thread_local bool fork_io;

/* glibc's stream-list lock (a recursive lock; glibc takes it itself after the prepare
 * handlers and, when it took it, resets it in the child before the child handlers), and its
 * "no thread was ever created" flag (the one glibc's fork reads).  Weak: a C library without
 * them leaves them NULL, and then the stream lock is not taken and every fork takes our locks. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
extern char __libc_single_threaded __attribute__((weak));

/* Whether this fork must take no lock (section 4): the process never had a second thread,
 * so no other thread can hold one, or this thread is inside a section that may hold some
 * (a fork from a signal handler, or from an atfork handler run inside another fork). */
static bool fork_takes_nothing(void)
{
  if (atomic_load_explicit(&prd__fork_section, memory_order_relaxed) != 0)
    return true;
  return &__libc_single_threaded != NULL && __libc_single_threaded != 0;
}

/* Section 2's order. */
static void fork_prepare(void)
{
  if (fork_takes_nothing()) {
    fork_skipped++;
    return;
  }
  prd__fork_section_enter();   /* until the parent or child handler has released everything */
  fork_io = _IO_list_lock != NULL && _IO_list_unlock != NULL;
  prd__rcu_fork_prepare_gp();
  if (fork_io)
    _IO_list_lock();
  prd__rcu_fork_prepare();
  prd__call_rcu_fork_prepare();
  prd__malloc_fork_prepare();
  prd__vmem_fork_prepare_early();
  prd__maint_fork_prepare();
  prd__mag_fork_prepare_reap();
  prd__cache_fork_prepare();
  prd__mag_fork_prepare_threads();
  prd__cache_fork_prepare_caches();
  prd__mag_fork_prepare_depots();
  prd__debug_fork_prepare();
  prd__vmem_fork_prepare();
  prd__os_fork_prepare();
}

/* The allocator's locks, malloc's start-up lock last, in the reverse of their order (vmem's,
 * rcu's and call_rcu's are released by their parent and child functions, which differ). */
static void fork_release(void)
{
  prd__debug_fork_release();
  prd__mag_fork_release_depots();
  prd__cache_fork_release();
  prd__mag_fork_release_threads();
  prd__mag_fork_release_reap();
  prd__maint_fork_release();
  prd__malloc_fork_release();
}

static void fork_parent(void)
{
  if (fork_skipped > 0) {
    fork_skipped--;   /* this fork's prepare took nothing */
    return;
  }
  prd__os_fork_release();
  prd__vmem_fork_parent();
  fork_release();
  prd__call_rcu_fork_parent();
  prd__rcu_fork_parent();
  if (fork_io)
    _IO_list_unlock();   /* glibc has dropped its own hold of it already */
  prd__rcu_fork_parent_gp();
  prd__fork_section_leave();
}

static void fork_child(void)
{
  if (fork_skipped > 0) {
    /* Nothing was taken: touch no lock.  Single-threaded, the child is a copy of the parent,
     * locks included; after a fork from a signal handler it may only call async-signal-safe
     * functions, and the locks stay as the fork found them.  thread.c's part only stores
     * atomics (section 3). */
    fork_skipped--;
    prd__lthread_fork_child();
    return;
  }
  prd__os_fork_release();
  prd__vmem_fork_child();
  fork_release();
  prd__debug_fork_child();
  prd__call_rcu_fork_child();
  prd__rcu_fork_child();
  /* the stream-list lock: glibc has reset it before the child handlers (it takes and
   * resets it exactly when the process had a second thread, as this prepare does) */
  prd__maint_fork_child();
  prd__mag_fork_child();
  prd__stats_fork_child();
  prd__options_fork_child();
  prd__fork_section_leave();
  prd__lthread_fork_child();
}

/* The one atfork registration of the library, at load time (section 1). */
__attribute__((constructor)) static void fork_register_atfork(void)
{
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}
