/*
 * maint.c: the maintenance thread, a process-wide service that runs the periodic work of the
 * layers above it (seed 004's per-interval depot work; libumem's umem_update thread).  It
 * knows nothing of caches: layers register callbacks, and this file decides when they run
 * and on which thread.
 *
 * 1. Jobs.  A job is a callback a layer registers once (prd__maint_register), run with no
 *    lock of this file held at each wake-up of the thread (about once a second) and at once
 *    when a layer asks (prd__maint_wake).  The jobs: stats.c's periodic snapshot (registered
 *    at start-up, first), cache.c's decay (free memory back to the kernel after decay_ms),
 *    malloc.c's kept huge blocks (unmapped after malloc_huge_decay_ms), the heap arena's
 *    purges that an inline slice left unfinished (vmem.c section 16, registered when the
 *    heap arena is made) and Prudence's pre-flush (defer.c, at the first deferral).  A job that needs the thread of its own even
 *    while the process has one application thread says so with a predicate given at
 *    registration (stats.c: periodic snapshots are on; malloc.c: huge blocks are kept).  Besides the jobs there is one interval job, the tick
 *    (prd__maint_set_tick): the magazine layer's working-set update, resize check, reap and
 *    idle-thread reap (magazine.c sections 6-8), run once every maint_interval ms, before the
 *    jobs of that wake-up.  Its argument says whether it may wait for its locks (false on the
 *    thread and from prd__maint_tick) or only try them (true: it runs from a slow path whose
 *    caller may hold locks that come after its own).  prd__maint_tick runs the tick and the
 *    jobs now (tests drive intervals with it, without sleeping).
 *
 * 2. When the thread runs.  One thread (option maint_thread) wakes every MAINT_WAKE_MS and
 *    whenever prd__maint_wake sets maint_kick (under maint_lock) and signals it.  It starts
 *    (thread.c: signals blocked, a failure retried at the next poke) only when the work needs
 *    one (maint_needed): once a second application thread uses the allocator (thread.c's
 *    count); when a job asked for an idle-time worker (prd__maint_wake) or a job's predicate
 *    says so, but only while the process is multi-threaded already (another library thread
 *    runs: the grace-period driver, the call_rcu worker; or the kernel counts more than one
 *    thread, such as helper threads that allocated too little to be counted: thread.c §9)
 *    or option maint_alone allows it;
 *    and when a predicate that is the program's own request says so (periodic statistics).
 *    Until then, and with maint_thread=0, the slow paths of the layer that owns
 *    the tick run the work inline (prd__maint_poke): the jobs as often as the thread would
 *    (once a MAINT_WAKE_MS), the tick once an interval has passed, with its try-lock form:
 *    never waiting on a slow path.  A single-threaded program so stays
 *    single-threaded, as it does with glibc, jemalloc or mimalloc, none of which starts a
 *    thread of its own: glibc skips its stdio and fork locking only while a process has one
 *    thread, a fork() from a signal handler can deadlock in glibc's own fork lock in a
 *    multi-threaded one, unshare(CLONE_NEWUSER) refuses a multi-threaded caller, and Python
 *    warns at each fork of one.  The price: memory such a program frees and then leaves
 *    idle goes back at its next slow path after decay_ms, not while it sleeps (maint_alone=1
 *    buys that with the thread).  In a forked child of a TSan build the inline mode is used
 *    (TSan forbids new threads there).
 *
 * 3. Exit rule: the thread never keeps a process alive.  At each wake-up, and at once when
 *    thread.c pokes it (the last counted application thread left), it looks whether any
 *    application thread is left; none: it clears maint_started under maint_lock and returns,
 *    unless a kick is due.  prd__maint_wake sets maint_kick and reads maint_started under
 *    maint_lock, so either the kick keeps the thread or the waker sees it gone and starts
 *    another.  The clearing store is a release and the next start's claim (the
 *    compare-exchange in prd__maint_poke) an acquire, so the thread that starts next owns
 *    thread.c's record of the maintenance thread (maint_lt) after the last writes of the one
 *    that ended; the waker's own path has maint_lock for that.
 *
 * 4. Constants.  MAINT_WAKE_MS 1000: the jobs want about a second's resolution (pre-flush
 *    requests between wake-ups), and a wake-up a second costs nothing; the option
 *    stats_interval_ms, when shorter, sets the period instead (the statistics job writes a
 *    snapshot at each wake-up once that much time has passed); the tick's own period is the
 *    option maint_interval (seed 004's 15 s update interval, shorter by default).  MAINT_SLOTS
 *    8: a handful of layers register jobs; registering more fails (-1) rather than allocate.
 *    MAINT_LOOK_MS 10: how often a magazine miss (prd__maint_poke_miss) asks maint_needed while
 *    no thread runs and one application thread does: the look reads every library thread's
 *    record and every job's predicate, about a hundred instructions, where a program with a
 *    large live set misses on most calls and a single-threaded one never starts the thread
 *    (section 2); a second application thread is seen at once (one load), and prd__maint_wake
 *    and the other pokes (rare events: a huge block's free) look every time.
 *
 * 5. fork.  fork.c calls prd__maint_fork_prepare first of the magazine layer's steps
 *    (maint_lock before mag_reap_lock: fork.c section 2), prd__maint_fork_release last, and
 *    prd__maint_fork_child before the magazine layer takes over the dead threads' caches:
 *    the thread is gone in the child, so it is marked not started and restarts lazily, when
 *    the child needs it (section 2).
 *
 * 6. Lock order: maint_lock is outermost of the magazine layer's (magazine.c section 12);
 *    nothing is called under it but the condition-variable calls and thread.c's poke test.
 *    Jobs and the tick run with it dropped.
 */
#include <pthread.h>
#include <time.h>

#include "internal.h"

#define MAINT_SLOTS 8        /* section 4 */
#define MAINT_WAKE_MS 1000   /* section 4 */
#define MAINT_LOOK_MS 10     /* section 4 */

static pthread_once_t maint_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t maint_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t maint_cv;
static struct {
  prd__maint_fn *mw_fn;
  void *mw_arg;
  bool (*mw_needs)(void);   /* the job wants the thread now (NULL: never on its own) */
  bool mw_asked;            /* that want is the program's request (section 2) */
} maint_work[MAINT_SLOTS];
static _Atomic int maint_nwork;          /* slots filled: stored (release) after the slot */
/* the interval job (section 1): read with no lock (acquire, pairing with the release store
 * of prd__maint_set_tick), because the inline tick runs on slow paths whose callers may hold
 * locks that come after maint_lock in fork.c's order */
static _Atomic(prd__maint_tick_fn *) maint_tick_fn;
static _Atomic bool maint_started;
static _Atomic int maint_kick;             /* prd__maint_wake: run the jobs now */
static _Atomic uint64_t maint_last_ns;     /* when the last tick ran (inline mode) */
static _Atomic uint64_t maint_jobs_ns;     /* when the jobs last ran inline (section 2) */
static bool maint_inline_child;            /* TSan: a forked child must not start threads */
static _Atomic bool maint_wanted;          /* a job asked for the thread (prd__maint_wake) */
static void *maint_main(void *arg);
static void maint_lt_wake(void);
static struct prd__lthread maint_lt = { .lt_name = "prd-maint", .lt_main = maint_main,
                                        .lt_wake = maint_lt_wake };

static void maint_cv_init(void)
{
  prd__lthread_cond_init(&maint_cv);
}

static void maint_init_once(void)
{
  maint_cv_init();
  uint64_t now = prd__now_ns();   /* the first inline run a period after start-up */
  atomic_store_explicit(&maint_last_ns, now, memory_order_relaxed);
  atomic_store_explicit(&maint_jobs_ns, now, memory_order_relaxed);
}

/* ---- registration (section 1) -------------------------------------------------------------- */
int prd__maint_register(prd__maint_fn *fn, void *arg, bool (*needs)(void), bool asked)
{
  pthread_mutex_lock(&maint_lock);
  int rc = -1;
  if (atomic_load_explicit(&maint_nwork, memory_order_relaxed) < MAINT_SLOTS) {
    int n = atomic_load_explicit(&maint_nwork, memory_order_relaxed);
    maint_work[n].mw_fn = fn;
    maint_work[n].mw_arg = arg;
    maint_work[n].mw_needs = needs;
    maint_work[n].mw_asked = asked;
    atomic_store_explicit(&maint_nwork, n + 1, memory_order_release);   /* pairs: maint_count */
    rc = 0;
  }
  pthread_mutex_unlock(&maint_lock);
  return rc;
}

void prd__maint_set_tick(prd__maint_tick_fn *fn)
{
  pthread_once(&maint_once, maint_init_once);
  atomic_store_explicit(&maint_tick_fn, fn, memory_order_release);
}

/* ---- running the work ---------------------------------------------------------------------- */
/* The interval job (no lock of this file held, none taken: `trylock` is the slow paths' form,
 * whose callers may hold locks ordered after maint_lock). */
static void maint_tick(bool trylock)
{
  prd__maint_tick_fn *fn = atomic_load_explicit(&maint_tick_fn, memory_order_acquire);
  if (fn != NULL && fn(trylock))
    atomic_store_explicit(&maint_last_ns, prd__now_ns(), memory_order_relaxed);
}

/* The jobs registered so far: the acquire pairs with the release of prd__maint_register, so
 * the slots below the count are seen filled (no lock: maint_needed runs on every slow path
 * while the thread is not started). */
static int maint_count(void)
{
  return atomic_load_explicit(&maint_nwork, memory_order_acquire);
}

/* The registered jobs (no lock held while they run). */
static void maint_jobs(void)
{
  int nw = maint_count();
  for (int i = 0; i < nw; i++)
    maint_work[i].mw_fn(maint_work[i].mw_arg);
}

void prd__maint_tick(void)
{
  maint_tick(false);
  maint_jobs();
}

/* One wake-up's work, on the thread or inline (`trylock`, section 2): the tick once
 * maint_interval has passed since it last ran, then the jobs. */
static void maint_run(uint64_t now, bool trylock)
{
  uint64_t last = atomic_load_explicit(&maint_last_ns, memory_order_relaxed);
  if (now - last >= (uint64_t)prd__opt(maint_interval) * 1000000ull)
    maint_tick(trylock);   /* sets maint_last_ns when it ran (its try-locks may all fail) */
  maint_jobs();
}

/* The maintenance thread: wakes every MAINT_WAKE_MS at most, runs the registered jobs at each
 * wake and the tick once maint_interval has passed. */
static void *maint_main(void *arg)
{
  (void)arg;
  for (;;) {
    long ms = PRD_MIN(prd__opt(maint_interval), MAINT_WAKE_MS);
    long snap = prd__opt(stats_interval_ms);   /* a shorter snapshot period (section 4) */
    if (snap > 0 && snap < ms)
      ms = snap;
    long look = prd__lthread_idle_ms(&maint_lt);   /* quick looks after a poke (thread.c) */
    if (look >= 0 && look < ms)
      ms = look;
    struct timespec ts;
    prd__lthread_deadline(&ts, CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&maint_lock);
    /* prd__maint_wake signals it with maint_kick set, thread.c's poke with lt_poked set
     * (both under maint_lock) */
    while (!atomic_load_explicit(&maint_kick, memory_order_relaxed) &&
           !prd__lthread_poked(&maint_lt) &&
           prd__cond_timedwait(&maint_cv, &maint_lock, &ts) == 0)
      ;
    /* No application thread left (thread.c section 3; looked at each wake-up while none is
     * counted): exit, unless a kick is due.  prd__maint_wake sets maint_kick and reads
     * maint_started under maint_lock: it sees the thread gone and starts another, or this
     * thread sees its kick (section 3). */
    if (!atomic_load_explicit(&maint_kick, memory_order_relaxed) &&
        prd__lthread_idle_exit(&maint_lt)) {
      /* release: the next thread's claim (the compare-exchange of prd__maint_poke, acquire)
       * is ordered after this thread's last writes to maint_lt, which the next one owns */
      atomic_store_explicit(&maint_started, false, memory_order_release);
      pthread_mutex_unlock(&maint_lock);
      return NULL;
    }
    atomic_store_explicit(&maint_kick, 0, memory_order_relaxed);
    pthread_mutex_unlock(&maint_lock);
    if (!prd__opt(maint_thread))
      continue;
    maint_run(prd__now_ns(), false);
  }
  return NULL;
}

/* thread.c's poke (no lock held): the thread looks for application threads at once. */
static void maint_lt_wake(void)
{
  pthread_mutex_lock(&maint_lock);
  pthread_cond_signal(&maint_cv);
  pthread_mutex_unlock(&maint_lock);
}

/* Whether the process would be single-threaded without this thread (section 2): one
 * application thread counted at most, no other library thread running, maint_alone off, and
 * the kernel counts one thread (the threads that never reached the count: thread.c §9). */
static bool maint_alone_now(void)
{
  return prd__lthread_apps() <= 1 && !prd__opt(maint_alone) &&
         !prd__lthread_others(&maint_lt) && !prd__lthread_process_threaded();
}

/* Whether the work needs a thread of its own now (section 2): a second application thread
 * uses the allocator (idle threads' caches to take back, a thread to run beside); a job
 * asked for an idle-time worker, or a job's predicate says it is due at its own interval,
 * unless the thread would make a single-threaded process multi-threaded; a predicate that is
 * the program's own request (periodic statistics) says so. */
static bool maint_needed(void)
{
  if (prd__lthread_apps() >= 2)
    return true;
  /* alone is asked only when something wants the thread: it may read /proc */
  if (atomic_load_explicit(&maint_wanted, memory_order_relaxed) && !maint_alone_now())
    return true;
  int nw = maint_count();
  for (int i = 0; i < nw; i++)
    if (maint_work[i].mw_needs != NULL && maint_work[i].mw_needs() &&
        (maint_work[i].mw_asked || !maint_alone_now()))
      return true;
  return false;
}

/* When a miss last asked maint_needed (section 4); relaxed: a stale value costs one look
 * more or less. */
static _Atomic uint64_t maint_look_ns;

static void maint_poke(bool always_look)
{
  bool threaded = prd__opt(maint_thread) && !maint_inline_child;
  if (threaded && prd_likely(atomic_load_explicit(&maint_started, memory_order_relaxed)))
    return;
  uint64_t now = prd__now_ns();   /* one clock read for the look and the interval */
  if (threaded) {
    bool look = always_look || prd__lthread_apps() >= 2 ||
                now - atomic_load_explicit(&maint_look_ns, memory_order_relaxed) >=
                    MAINT_LOOK_MS * 1000000ull;
    /* claimed before pthread_create, with no lock held: pthread_create may call malloc, which
     * may be this library's and come back here (it then sees the claim and returns) */
    bool expect = false;
    if (look) {
      atomic_store_explicit(&maint_look_ns, now, memory_order_relaxed);
      if (maint_needed() && atomic_compare_exchange_strong(&maint_started, &expect, true)) {
        /* the condition variable with its monotonic clock before the thread that waits on
         * it (a poke may come before anything else set this file up: a kept huge block's
         * free) */
        pthread_once(&maint_once, maint_init_once);
        if (prd__lthread_start(&maint_lt) == 0)
          return;
        atomic_store_explicit(&maint_started, false, memory_order_relaxed);   /* try again later */
      }
    }
    /* no thread (not needed yet, starting, or it could not be started): the work inline */
  }
  /* the jobs as often as the thread would run them (MAINT_WAKE_MS), the tick once an
   * interval; one slow path at a time (the exchange; relaxed: a clock reading) */
  uint64_t interval = (uint64_t)prd__opt(maint_interval) * 1000000ull;
  uint64_t jobs = atomic_load_explicit(&maint_jobs_ns, memory_order_relaxed);
  if (now - jobs < PRD_MIN(interval, (uint64_t)MAINT_WAKE_MS * 1000000ull) ||
      !atomic_compare_exchange_strong_explicit(&maint_jobs_ns, &jobs, now,
                                               memory_order_relaxed, memory_order_relaxed))
    return;
  maint_run(now, true);
}

void prd__maint_poke(void)
{
  maint_poke(true);
}

void prd__maint_poke_miss(void)
{
  maint_poke(false);
}

void prd__maint_wake(void)
{
  pthread_once(&maint_once, maint_init_once);
  if (!prd__opt(maint_thread) || maint_inline_child) {
    prd__maint_poke();   /* inline mode: runs the work if an interval passed */
    return;
  }
  atomic_store_explicit(&maint_wanted, true, memory_order_relaxed);
  /* the kick under maint_lock, then maint_started: pairs with the exit test of maint_main */
  pthread_mutex_lock(&maint_lock);
  atomic_store_explicit(&maint_kick, 1, memory_order_relaxed);
  bool running = atomic_load_explicit(&maint_started, memory_order_relaxed);
  if (running)
    pthread_cond_signal(&maint_cv);
  pthread_mutex_unlock(&maint_lock);
  if (!running)
    prd__maint_poke();   /* starts it: a new thread runs the jobs at once (the kick is set) */
}

bool prd__maint_running(void)
{
  return atomic_load_explicit(&maint_started, memory_order_relaxed);
}

/* ---- fork (section 5) ------------------------------------------------------------------------ */
PRD__FORK_LINK();
void prd__maint_fork_prepare(void)
{
  pthread_mutex_lock(&maint_lock);
}

void prd__maint_fork_release(void)
{
  pthread_mutex_unlock(&maint_lock);
}

/* In the child, with every lock released: the maintenance thread is gone. */
void prd__maint_fork_child(void)
{
  maint_cv_init();
  atomic_store_explicit(&maint_started, false, memory_order_relaxed);
#ifdef PRD_TSAN
  maint_inline_child = true;   /* TSan does not support threads started after fork() */
#endif
}
