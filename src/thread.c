/*
 * thread.c: the library's own threads (the maintenance thread of maint.c, the grace-period
 * driver of rcu.c and the call_rcu worker of call_rcu.c): how they start, and when they end.
 *
 * 1. What.  A library never surprises its host: its threads take none of the application's
 *    signals, a failure to create one is retried rather than remembered, and they never keep
 *    a process alive.  Every library thread is described by a struct prd__lthread (name, main
 *    function, a wake-up function) and started by prd__lthread_start, the one place that
 *    creates threads.
 *
 * 2. Starting.  prd__lthread_start creates the thread detached, with every signal blocked in
 *    the creating thread around pthread_create (a new thread inherits the mask; glibc keeps
 *    its two internal signals), so the application's handlers never run on it and a program
 *    that blocks a signal in all its threads and reads it from a signalfd still gets it.  The
 *    thread names itself (lt_trampoline) and records its id (lt_tid) before it runs.  No lock
 *    of the library is held across pthread_create: it allocates (glibc's calloc of the new
 *    thread's DTV), through this library's malloc when it is preloaded, and that allocation may
 *    come back to the starting thread's lock.  So a caller claims the start under its lock
 *    ("running" set) and calls prd__lthread_start_unlocked, which drops that lock around
 *    pthread_create (maint.c claims with a compare-and-swap and holds no lock).  A failure
 *    (EAGAIN at a thread limit, ENOMEM) returns the error to the caller, which clears its
 *    claim, so the next need tries again: nothing remembers a failure, and
 *    the first failure of a run of failures is reported once.  The needs that come with
 *    every call (rcu.c's requests, call_rcu.c's calls) try again PRD_LTHREAD_RETRY_NS (10 ms)
 *    after a failure, not at each call (each try maps a stack and fails a clone: the start
 *    records the time, prd__lthread_may_try reads it), and the others at each need (a
 *    barrier, a thread exit, the maintenance thread's look, itself paced); a need that is not
 *    retried could leave work behind (a call_rcu callback waits for the next call_rcu,
 *    rcu_barrier or thread exit to retry the worker).  No caller blocks on a thread it could
 *    not start: rcu.c's waiters run the grace period on their own thread, call_rcu.c's
 *    barrier invokes the callbacks itself, and maint.c runs the maintenance work inline on
 *    the slow paths (its section 2).
 *    No start inside glibc's thread bookkeeping.  glibc frees the TLS of dead threads with its
 *    stack-cache lock held, which pthread_create takes: in pthread_join (a fork child's first
 *    join frees the parent's other threads' cached stacks so), pthread_detach of a thread
 *    that has ended, a failed pthread_create, and a detached thread's exit.  A library thread
 *    started from such a free (a magazine miss that finds the maintenance thread needed)
 *    waits on that lock for ever, in the thread that holds it.  So a thread is marked
 *    (prd__lthread_nostart, thread-local, nested) while it is inside those calls (the malloc
 *    replacement defines them over the C library's: override.c section 5), once its
 *    magazine layer's exit destructor ran (magazine.c), and inside a big block's free that
 *    is a thread's first call of the malloc family (malloc.c); and the magazine miss of a
 *    thread's first free, which makes its magazines, asks for none (magazine.c): glibc's
 *    frees are the first calls of a thread that exits without having used the library.  A start asked for by a marked thread returns EAGAIN, neither reported nor
 *    paced: the need is met inline as after any failure, and the next need elsewhere starts
 *    the thread.  Other frees may start it: a program that frees and then sleeps gets its
 *    memory back only so, and a thread that only frees (a consumer) asks for it too.  glibc
 *    takes none of those locks around its calls to malloc, and pthread_create marks its
 *    caller too, so a start's own allocations start nothing more.
 *
 * 3. Ending.  glibc ends the process when its last thread exits (pthread_exit in main, exit(0)
 *    from the last thread), so a library thread that stays would keep a process whose application
 *    threads are all gone alive forever.  Application threads that use the library are counted
 *    (prd__lthread_app_arrive, at a thread's first magazine or RCU use; prd__lthread_app_leave,
 *    from the same files' exit destructors).  When the count falls to zero the leaving thread
 *    records its id (lt_leaver) and pokes every library thread (lt_poked, then its lt_wake), as
 *    a start does while none is counted (a thread the poke found ended, started again for
 *    what the leaver left: its call_rcu callbacks' grace period); each looks at its next
 *    idle point (prd__lthread_idle_exit) for a live application thread in
 *    /proc/self/task: a thread that is not a library thread (its id in lt_table, or its name
 *    starting with LT_PREFIX: a process may hold two copies of the library, a preloaded malloc
 *    beside a program's own, and each must see the other's threads as the library's, or neither
 *    would ever end), not the leaver (which is in its exit destructor, about to go), and neither
 *    a zombie nor dead (a main thread that called pthread_exit stays listed as a zombie until the
 *    process ends).  The main thread (its id the process's) is never taken for a library
 *    thread by its name: a program whose name starts with LT_PREFIX (this project's prd-bench
 *    is one) would otherwise look thread-less, and its library threads would end and restart
 *    every time its other threads ended.  None: the library thread clears its running flag and returns, and the
 *    process ends when the last one has.  A thread that has just been joined may still be listed
 *    for a moment (the kernel wakes the joiner before it has finished the thread's exit), as may
 *    the leaver's sibling that exits at the same time: after a poke that found a live thread, the
 *    library thread looks again LT_QUICK times, 1 ms apart doubling (lt_quick,
 *    prd__lthread_idle_ms), before it waits for longer.  Threads that never used the library are
 *    not counted, so while the count is zero an idle library thread looks again every LT_IDLE_MS
 *    (the idle check, at most one look per LT_IDLE_MS however often the thread idles) instead of
 *    sleeping for good.  A wrong "none" (a thread created by the leaver's later destructors) only
 *    costs a restart: every library thread is started on demand.  The count can also stay
 *    above the truth: a thread that first uses the library in its own exit, after its key
 *    destructors ran (glibc frees a thread's resources with free() then, so a thread that
 *    never used the allocator becomes counted as it goes, and never leaves), so while threads
 *    are counted a library thread still looks every LT_COUNTED_MS, and the scan decides (an
 *    outside tester's process whose main ended with pthread_exit stayed for ever, its
 *    workers' threads having ended that way).  Scanning reads /proc with
 *    open/getdents64/read only (no allocation: this may be malloc).  Without /proc (a chroot,
 *    a sandbox that hides it) the count alone decides: none counted, none alive.  A thread
 *    that never used the library may then still run: its next use starts what it needs.
 *
 * 4. Locks.  None of its own: lt_table fills by compare-exchange.  The pokes take each library
 *    thread's own lock (maint_lock, drv_lock, wrk_lock) from an exit destructor, with no lock
 *    held; the scan of /proc runs under the polled thread's lock, taking none.
 *    Memory ordering.  lt_apps is a plain counter (relaxed read-modify-writes): its fall to
 *    zero is acted on only after the scan of /proc, which is what decides.  lt_poked is set
 *    before lt_wake takes the thread's lock and the thread reads it after that lock's wait
 *    returns, so the lock orders them.  lt_tid and lt_leaver are ids compared, not used to
 *    publish data (relaxed).
 *
 * 5. fork.  Only the forking thread survives: the child forgets the library threads' ids and
 *    counts itself once if it was counted (prd__lthread_fork_child, which fork.c's child
 *    handler calls last, in every child: it takes no lock, so also after a fork that took
 *    none).  The files that own the threads clear their running flags in their own fork
 *    functions and start them again on demand.
 *
 * 6. Exit keys.  The files that keep per-thread state of application threads (magazine.c's
 *    CPU caches, rcu.c's reader records, call_rcu.c's queues) learn of a thread's exit from a
 *    pthread key's destructor.  prd__thread_key makes such a key at the first need, not in an
 *    init-once function: pthread_key_create fails when the process's keys are all taken, and
 *    a failure made once and remembered would leave every later thread without its
 *    destructor, or worse, set the value of a key that was never made (someone else's).  So
 *    a failure is returned, the caller goes on without the destructor in its own safe way,
 *    and the next need tries again.  No lock (a fork may come at any point): the key's value
 *    plus one is published in the caller's slot by compare-exchange (0: none yet); two
 *    threads that race both make a key, and the one that loses deletes its spare.  Memory
 *    ordering: the acq_rel compare-exchange that publishes pairs with the acquire load of
 *    every later call.
 *    The keys are also made when the library is loaded (prd__thread_key_at_load, from a
 *    constructor of the file that owns each: the magazine layer's and call_rcu's; rcu.c makes
 *    a spare there, its key itself at the first registration: rcu.c section 2 says why): a
 *    program that takes every key the process has after that (an outside tester's did, then
 *    started a reader thread) leaves the library its own, where one made at the first need
 *    found none left.  A failure at load is not remembered either: the first need tries
 *    again.  Making a key pins the object that holds this code (section 7), so a plugin
 *    linked with libprudence.a stays loaded from its dlopen on.
 *
 * 7. Staying loaded.  A library thread runs this code until the process ends, and an exit key's
 *    destructor runs it at every thread's exit, so the object that holds it must not be
 *    unmapped under them: a program that dlopen()s a plugin linked with libprudence.a and
 *    dlclose()s it died of SIGSEGV later in a key destructor.  The shared libraries are linked
 *    -z nodelete for that (CMakeLists.txt); for a copy linked into another object, the first
 *    thread start or exit key, made at load (section 6), makes that object RTLD_NODELETE
 *    (lt_pin: dladdr of this file's data, then dlopen with RTLD_NOLOAD | RTLD_NODELETE, whose
 *    handle is kept; for the main program the name does not match and nothing happens, nor
 *    is there need).  Once per process, with no lock of the library held (the callers' claims
 *    are dropped first).
 *
 * 8. Whose threads.  The library's threads belong to the process that loaded it (lt_pid, its
 *    id taken when the library is loaded, or at the first start if the library was used
 *    before its constructor ran) and to each fork child, which takes them over (section 5).
 *    A child of clone(CLONE_VM) without CLONE_THREAD shares the library's memory but is
 *    another process: a vfork child before its exec, a runtime's own kind of thread.  A
 *    thread started there joins that child's thread group and dies with it, while the shared
 *    flags go on saying it runs: the parent's call_rcu callbacks never ran and its barrier
 *    waited for ever, and the child's exit status became its last thread's.  So no library
 *    thread starts in a process other than lt_pid's: the start fails as a failed
 *    pthread_create does (EAGAIN; reported once a process), but sets no pause of the tries
 *    (the pause and the counts are shared with the owner, whose own start has not failed),
 *    and the owner's next need starts it.
 *
 * 9. Threads the library does not count.  A thread is counted at its first magazine or RCU
 *    use (section 3), and a thread that allocates a block or two from a size class that has
 *    no magazines yet never gets there: a server whose main thread does all the work beside
 *    helper threads that rarely allocate counted one.  So a caller that must know whether the
 *    process is multi-threaded already (maint.c section 2: a thread of its own would not make
 *    a single-threaded process multi-threaded) asks the kernel, prd__lthread_process_threaded:
 *    /proc/self/stat's count, every thread of the process (zombies included: a main thread
 *    that called pthread_exit still counts, as it does for glibc), read at most once per
 *    LT_THREADS_MS, the answer kept between (relaxed: a stale one costs a look of 100 ms
 *    more or less), and forgotten in a fork child (section 5), which has one thread.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define LT_MAX 4                        /* maintenance, driver, worker, and room for one more */
#define LT_IDLE_MS 1000                 /* the idle check's period (magazine.c's wake-up) */
#define LT_COUNTED_MS 5000              /* the same while threads are counted (section 3) */
#define LT_QUICK 8                      /* looks after a poke, 1 ms apart doubling: 255 ms */
#define LT_PREFIX "prd-"                /* every library thread's name starts so */
#define LT_THREADS_MS 100               /* section 9: the kernel's thread count read so often */
#define PRD_LTHREAD_RETRY_NS 10000000u  /* section 2: 10 ms between tries of a need at every call */

static struct prd__lthread *_Atomic lt_table[LT_MAX];   /* every one ever started */
static _Atomic int lt_apps;                     /* counted application threads alive */
static _Atomic pid_t lt_leaver;                 /* the last counted thread, in its exit */
static _Atomic pid_t lt_pid;                    /* the process whose threads these are (§8) */
static _Atomic uint64_t lt_threads_read_ns;    /* §9: when the kernel's count was read; 0: never */
static _Atomic bool lt_threaded;                /* §9: what it said */
static __thread bool lt_counted __attribute__((tls_model("initial-exec")));
static __thread bool lt_library __attribute__((tls_model("initial-exec")));
static __thread unsigned lt_nostart __attribute__((tls_model("initial-exec")));   /* §2 */

static pid_t lt_gettid(void)
{
  return (pid_t)syscall(SYS_gettid);
}

/* ---- §2 starting ---------------------------------------------------------------------- */
/* Into the first free slot of lt_table, once (a compare-exchange per slot: no lock, so a
 * fork can never find one held). */
static void lt_register(struct prd__lthread *lt)
{
  for (int i = 0; i < LT_MAX; i++) {
    struct prd__lthread *cur = atomic_load_explicit(&lt_table[i], memory_order_acquire);
    if (cur == NULL &&
        atomic_compare_exchange_strong_explicit(&lt_table[i], &cur, lt, memory_order_release,
                                                memory_order_acquire))
      return;
    if (cur == lt)
      return;
  }
  PRD_ASSERT(!"more library threads than LT_MAX");
}

static void *lt_trampoline(void *arg)
{
  struct prd__lthread *lt = arg;
  pid_t self = lt_gettid();
  lt_library = true;
  (void)prd__cancel_off();   /* for good: no library thread is a cancellation point (os.c §8) */
  atomic_store_explicit(&lt->lt_tid, self, memory_order_relaxed);
  pthread_setname_np(pthread_self(), lt->lt_name);
  void *r = lt->lt_main(NULL);
  /* a successor started once the owner cleared its running flag may have stored its id */
  pid_t expect = self;
  atomic_compare_exchange_strong_explicit(&lt->lt_tid, &expect, 0, memory_order_relaxed,
                                          memory_order_relaxed);
  return r;
}

/* §7: the object that holds this code made RTLD_NODELETE, once, before the first thread or
 * exit key that outlives a dlclose could point into it.  Not in the malloc replacement, which
 * is linked -z nodelete and whose key may be made inside the dynamic loader's own mallocs. */
#ifndef PRD_OVERRIDE_NAMES
static _Atomic int lt_pinned;
#endif
static void lt_pin(void)
{
#ifndef PRD_OVERRIDE_NAMES
  if (atomic_load_explicit(&lt_pinned, memory_order_relaxed) != 0 ||
      atomic_exchange_explicit(&lt_pinned, 1, memory_order_relaxed) != 0)
    return;
  Dl_info info;
  if (dladdr((const void *)&lt_pinned, &info) != 0 && info.dli_fname != NULL &&
      info.dli_fname[0] != '\0')
    (void)dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);   /* kept */
#endif
}

/* §8: the process id the threads belong to, taken at load (a constructor) or, if the library
 * is used before, at the first start; a fork child stores its own (prd__lthread_fork_child). */
static pid_t lt_owner(void)
{
  pid_t owner = atomic_load_explicit(&lt_pid, memory_order_relaxed);
  if (owner == 0) {
    pid_t me = getpid();
    owner = atomic_compare_exchange_strong_explicit(&lt_pid, &owner, me, memory_order_relaxed,
                                                    memory_order_relaxed) ? me : owner;
  }
  return owner;
}

__attribute__((constructor)) static void lt_pid_init(void)
{
  (void)lt_owner();
}

void prd__lthread_nostart(bool on)
{
  lt_nostart += on ? 1u : -1u;
}

int prd__lthread_start(struct prd__lthread *lt)
{
  if (lt_nostart != 0)
    return EAGAIN;   /* inside glibc's thread bookkeeping (§2): the next need starts it */
  if (getpid() != lt_owner()) {   /* §8: a clone(CLONE_VM) child is not this process */
    static atomic_flag told = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&told))
      prd__report("thread %s not started in process %d, which the library's fork handlers "
                  "did not make (a clone(CLONE_VM) or vfork child, or a fork without "
                  "pthread_atfork's handlers): its threads are process %d's", lt->lt_name,
                  (int)getpid(), (int)lt_owner());
    return EAGAIN;   /* no retry pause: the owner's next need starts it at once */
  }
  lt_pin();
  lt_register(lt);
  /* started with no application thread counted (a callback's grace period after the last
   * one left, whose poke found this thread ended or not yet started): it looks at its first
   * idle point, not an idle period after its last life's look (section 3) */
  if (atomic_load_explicit(&lt_apps, memory_order_relaxed) == 0)
    atomic_store_explicit(&lt->lt_poked, true, memory_order_relaxed);
  pthread_t th;
  pthread_attr_t attr;
  sigset_t all, old;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&th, &attr, lt_trampoline, lt);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  if (rc == 0) {
    atomic_store_explicit(&lt->lt_failures, 0, memory_order_relaxed);
    atomic_store_explicit(&lt->lt_retry_ns, 0, memory_order_relaxed);
    return 0;
  }
  atomic_store_explicit(&lt->lt_retry_ns, prd__now_ns() + PRD_LTHREAD_RETRY_NS,
                        memory_order_relaxed);
  if (atomic_fetch_add_explicit(&lt->lt_failures, 1, memory_order_relaxed) == 0)
    prd__report("cannot create thread %s (%s): retried when next needed", lt->lt_name,
                strerror(rc));
  return rc;
}

bool prd__lthread_may_try(const struct prd__lthread *lt)
{
  /* relaxed: a hint; a try it lets through early or late only costs or delays one start */
  uint64_t t = atomic_load_explicit(&lt->lt_retry_ns, memory_order_relaxed);
  return t == 0 || prd__now_ns() >= t;
}

int prd__lthread_start_unlocked(struct prd__lthread *lt, pthread_mutex_t *held)
{
  pthread_mutex_unlock(held);
  int rc = prd__lthread_start(lt);
  pthread_mutex_lock(held);
  return rc;
}

bool prd__lthread_self(void)
{
  return lt_library;
}

/* ---- §3 ending ------------------------------------------------------------------------ */
void prd__lthread_app_arrive(void)
{
  if (lt_counted || lt_library)
    return;
  lt_counted = true;
  atomic_fetch_add_explicit(&lt_apps, 1, memory_order_relaxed);
}

void prd__lthread_app_leave(void)
{
  if (!lt_counted)
    return;
  lt_counted = false;
  if (atomic_fetch_sub_explicit(&lt_apps, 1, memory_order_relaxed) != 1)
    return;
  atomic_store_explicit(&lt_leaver, lt_gettid(), memory_order_relaxed);
  for (int i = 0; i < LT_MAX; i++) {
    /* every one, running or not: a thread still starting looks at its first idle point */
    struct prd__lthread *lt = atomic_load_explicit(&lt_table[i], memory_order_acquire);
    if (lt != NULL) {
      atomic_store_explicit(&lt->lt_poked, true, memory_order_relaxed);
      lt->lt_wake();
    }
  }
}

int prd__lthread_apps(void)
{
  return atomic_load_explicit(&lt_apps, memory_order_relaxed);
}

/* A hint (lt_tid relaxed, as everywhere it is compared): a thread that is starting or ending
 * meanwhile moves maint.c's decision by one look, which its next poke makes again. */
bool prd__lthread_others(const struct prd__lthread *self)
{
  for (int i = 0; i < LT_MAX; i++) {
    struct prd__lthread *lt = atomic_load_explicit(&lt_table[i], memory_order_acquire);
    if (lt != NULL && lt != self && atomic_load_explicit(&lt->lt_tid, memory_order_relaxed) != 0)
      return true;
  }
  return false;
}

/* /proc/self/stat's num_threads (field 20; comm, field 2, may hold spaces and parentheses:
 * the fields after it follow the last ')'), or 0 when it cannot be read. */
static long lt_kernel_threads(void)
{
  if (prd__lthread_no_proc)
    return 0;
  int old = prd__cancel_off();   /* open, read and close are cancellation points */
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  char buf[1024];
  ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
  if (fd >= 0)
    close(fd);
  prd__cancel_on(old);
  if (len <= 0)
    return 0;
  buf[len] = '\0';
  char *p = strrchr(buf, ')');
  if (p == NULL)
    return 0;
  p++;   /* the space before field 3: " S ppid ..." */
  for (int field = 3; field < 20 && p != NULL; field++)   /* to the space before field 20 */
    p = strchr(p + 1, ' ');
  if (p == NULL)
    return 0;
  long n = 0;
  for (p++; *p >= '0' && *p <= '9'; p++)
    n = n * 10 + (*p - '0');
  return n;
}

bool prd__lthread_process_threaded(void)
{
  uint64_t now = prd__now_ns();
  uint64_t last = atomic_load_explicit(&lt_threads_read_ns, memory_order_relaxed);
  if (last != 0 && now - last < LT_THREADS_MS * 1000000ull)
    return atomic_load_explicit(&lt_threaded, memory_order_relaxed);
  bool t = lt_kernel_threads() > 1;
  atomic_store_explicit(&lt_threaded, t, memory_order_relaxed);
  atomic_store_explicit(&lt_threads_read_ns, now, memory_order_relaxed);
  return t;
}

bool prd__lthread_poked(struct prd__lthread *lt)
{
  return atomic_load_explicit(&lt->lt_poked, memory_order_relaxed);
}

long prd__lthread_idle_ms(const struct prd__lthread *lt)
{
  /* a poke not taken yet (an idle point that could not look: the driver's waiters had not
   * left) is taken at the next one, soon */
  if (atomic_load_explicit(&lt->lt_poked, memory_order_relaxed))
    return 1;
  if (lt->lt_quick > 0)
    return 1l << (LT_QUICK - 1 - lt->lt_quick);
  return atomic_load_explicit(&lt_apps, memory_order_relaxed) > 0 ? LT_COUNTED_MS : LT_IDLE_MS;
}

void prd__lthread_deadline(struct timespec *ts, clockid_t clock, long ms)
{
  clock_gettime(clock, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

void prd__lthread_cond_init(pthread_cond_t *cond)
{
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cond, &attr);
  pthread_condattr_destroy(&attr);
}

void prd__lthread_idle_wait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                            const struct prd__lthread *lt)
{
  long ms = prd__lthread_idle_ms(lt);
  if (ms < 0) {
    prd__cond_wait(cond, mutex);
    return;
  }
  struct timespec ts;
  prd__lthread_deadline(&ts, clock, ms);
  prd__cond_timedwait(cond, mutex, &ts);
}

static bool lt_is_library(pid_t tid)
{
  for (int i = 0; i < LT_MAX; i++) {
    struct prd__lthread *lt = atomic_load_explicit(&lt_table[i], memory_order_acquire);
    if (lt != NULL && atomic_load_explicit(&lt->lt_tid, memory_order_relaxed) == tid)
      return true;
  }
  return false;
}

/* The state letter of /proc/self/task/TID/stat ("tid (comm) S ..."; comm may hold spaces and
 * parentheses: the state follows the last ')'), or 'X' when the task is gone; 'L' when the
 * name starts with LT_PREFIX (a library thread, of this copy of the library or another). */
static char lt_task_state(const char *tid)
{
  char path[64] = "/proc/self/task/";
  size_t n = strlen(path), k = strlen(tid);
  if (n + k + sizeof("/stat") > sizeof(path))
    return 'R';
  memcpy(path + n, tid, k);
  memcpy(path + n + k, "/stat", sizeof("/stat"));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 'X';
  char buf[512];
  ssize_t len = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (len <= 0)
    return 'X';
  buf[len] = '\0';
  char *lp = strchr(buf, '(');
  if (lp != NULL && strncmp(lp + 1, LT_PREFIX, sizeof(LT_PREFIX) - 1) == 0)
    return 'L';
  char *rp = strrchr(buf, ')');
  return rp != NULL && rp[1] == ' ' && rp[2] != '\0' ? rp[2] : 'R';
}

bool prd__lthread_no_proc;   /* internal.h: tests, the scan as without /proc */

/* True when /proc/self/task lists a live application thread (§3); when it cannot be read,
 * whether a counted application thread lives. */
static bool lt_app_alive_scan(void)
{
  int fd = prd__lthread_no_proc ? -1
                                : open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return atomic_load_explicit(&lt_apps, memory_order_relaxed) > 0;
  pid_t leaver = atomic_load_explicit(&lt_leaver, memory_order_relaxed);
  bool alive = false;
  union { char b[4096]; uint64_t align; } buf;
  for (;;) {
    long len = syscall(SYS_getdents64, fd, buf.b, sizeof(buf.b));
    if (len < 0)
      alive = atomic_load_explicit(&lt_apps, memory_order_relaxed) > 0;
    if (len <= 0 || alive)
      break;
    for (long off = 0; off < len && !alive;) {
      /* struct linux_dirent64: d_ino 8, d_off 8, d_reclen 2, d_type 1, d_name */
      unsigned short reclen;
      memcpy(&reclen, buf.b + off + 16, sizeof(reclen));
      const char *name = buf.b + off + 19;
      off += reclen;
      if (name[0] < '0' || name[0] > '9')
        continue;
      pid_t tid = 0;
      for (const char *p = name; *p >= '0' && *p <= '9'; p++)
        tid = tid * 10 + (*p - '0');
      if (tid == leaver || lt_is_library(tid))
        continue;
      if (tid == getpid()) {   /* the main thread is the application's, whatever its name */
        char st = lt_task_state(name);
        alive = st != 'Z' && st != 'X' && st != 'x';
        continue;
      }
      char st = lt_task_state(name);
      alive = st != 'Z' && st != 'X' && st != 'x' && st != 'L';
    }
  }
  close(fd);
  return alive;
}

/* lt_app_alive_scan with cancellation off (its open, read and close are cancellation points;
 * os.c section 8). */
static bool lt_app_alive(void)
{
  int old = prd__cancel_off();
  bool alive = lt_app_alive_scan();
  prd__cancel_on(old);
  return alive;
}

bool prd__lthread_idle_exit(struct prd__lthread *lt)
{
  uint64_t now = prd__now_ns();
  if (atomic_exchange_explicit(&lt->lt_poked, false, memory_order_relaxed)) {
    lt->lt_quick = LT_QUICK;
  } else if (lt->lt_quick == 0) {
    /* no poke: the idle check, at most once per LT_IDLE_MS however often the thread idles
     * (a driver serving uncounted threads goes idle after every grace period) */
    long period = atomic_load_explicit(&lt_apps, memory_order_relaxed) > 0 ? LT_COUNTED_MS
                                                                            : LT_IDLE_MS;
    if (now - lt->lt_looked_ns < (uint64_t)period * 1000000u)
      return false;
  }
  lt->lt_looked_ns = now;
  if (!lt_app_alive()) {
    lt->lt_quick = 0;   /* the thread ends: one started later begins with no quick looks */
    return true;
  }
  if (lt->lt_quick > 0)
    lt->lt_quick--;
  return false;
}

/* ---- §5 fork -------------------------------------------------------------------------- */
PRD__FORK_LINK();
void prd__lthread_fork_child(void)
{
  for (int i = 0; i < LT_MAX; i++) {
    struct prd__lthread *lt = atomic_load_explicit(&lt_table[i], memory_order_relaxed);
    if (lt != NULL) {
      atomic_store_explicit(&lt->lt_tid, 0, memory_order_relaxed);
      atomic_store_explicit(&lt->lt_poked, false, memory_order_relaxed);
      lt->lt_quick = 0;
    }
  }
  lt_library = false;
  atomic_store_explicit(&lt_pid, getpid(), memory_order_relaxed);   /* §8 */
  atomic_store_explicit(&lt_apps, lt_counted ? 1 : 0, memory_order_relaxed);
  atomic_store_explicit(&lt_threads_read_ns, 0, memory_order_relaxed);   /* §9: read afresh */
  atomic_store_explicit(&lt_leaver, 0, memory_order_relaxed);
}

/* ---- exit keys (section 6) ------------------------------------------------------------ */
bool prd__thread_key(_Atomic unsigned long *slot, void (*dtor)(void *), pthread_key_t *key)
{
  unsigned long v = atomic_load_explicit(slot, memory_order_acquire);
  if (prd_unlikely(v == 0)) {
    lt_pin();
    pthread_key_t k;
    if (pthread_key_create(&k, dtor) != 0)
      return false;
    if (atomic_compare_exchange_strong_explicit(slot, &v, (unsigned long)k + 1,
                                                memory_order_acq_rel, memory_order_acquire))
      v = (unsigned long)k + 1;
    else
      pthread_key_delete(k);   /* another thread published its key first */
  }
  *key = (pthread_key_t)(v - 1);
  return true;
}

void prd__thread_key_at_load(_Atomic unsigned long *slot, void (*dtor)(void *))
{
  pthread_key_t key;
  (void)prd__thread_key(slot, dtor, &key);   /* failed: the first need tries again */
}
