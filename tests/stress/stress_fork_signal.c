/*
 * stress_fork_signal.c: fork() from a signal handler, or from inside another fork, must not
 * deadlock.
 *
 * The defect it guards: the fork prepare handler took every lock of the allocator with
 * pthread_mutex_lock even when the forking thread itself already held one: a signal handler
 * that forks after interrupting its thread inside malloc (malloc_init_lock, a CPU cache's or
 * a slab's lock, the heap arena's lock of a big block), inside free, or inside another fork
 * (whose handlers hold all of them from prepare to parent) waited for itself forever.  glibc
 * survives this (single-threaded it takes no malloc lock).  Now a fork takes no lock when
 * the process never had a second thread, nor when the forking thread is inside a section
 * that may hold one (fork.c section 4); the child, which then may only call
 * async-signal-safe functions, exits at once.
 *
 * Three runs, each in a process of its own with a deadline (prd_test_bounded), so that a
 * deadlock fails the test instead of hanging it:
 *   - single: one thread allocates and frees from every tier (classes, the heap arena's big
 *     blocks, huge mappings), reallocates and forks, while an interval timer's SIGALRM forks
 *     from its handler;
 *   - threads: the same on the main thread while a second thread allocates, with the signal
 *     sent to the main thread only (its own forks block it: glibc's fork keeps its handler
 *     list's lock across the fork, and a nested fork would wait for that lock);
 *   - nested: atfork handlers that run inside the library's (registered before them) fork
 *     again, in the prepare, the parent and the child window, with a second thread alive.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "prudence.h"
#include "prd_test.h"

// prd-test-labels: stress no-tsan
// prd-test-timeout: 90
// no-tsan: TSan's runtime starts a thread of its own, so the process is never single-threaded
// for glibc and a fork takes locks in the handler, which TSan reports as signal-unsafe calls;
// and its fork interceptor fails its own checks for a fork inside another fork's handlers.

#define RUN_SECONDS 4.0
#define DEADLINE 15.0

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* fork, the child exits at once, wait: async-signal-safe throughout. */
static int fork_and_reap(void)
{
  int saved = errno;
  pid_t pid = fork();
  if (pid == 0)
    _exit(0);
  int st = 0;
  if (pid > 0)
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
      ;
  errno = saved;
  return pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static _Atomic int handler_forks, handler_bad;
static timer_t alarm_timer;
static bool alarm_rearm;   /* single: the handler arms the timer again */
static uint64_t alarm_rng = 0x9e3779b97f4a7c15ull;

/* 50 to 800 us, at random: the next signal lands anywhere in the interrupted loop, not at
 * once after the handler (a signal that comes while the handler runs waits for its end). */
static long alarm_delay_ns(void)
{
  alarm_rng ^= alarm_rng << 13;
  alarm_rng ^= alarm_rng >> 7;
  alarm_rng ^= alarm_rng << 17;
  return (long)(50000 + alarm_rng % 750000);
}

static void on_alarm(int sig)
{
  (void)sig;
  if (fork_and_reap() != 0)
    atomic_fetch_add(&handler_bad, 1);
  atomic_fetch_add(&handler_forks, 1);
  if (alarm_rearm) {   /* timer_settime is async-signal-safe */
    struct itimerspec its = { { 0, 0 }, { 0, alarm_delay_ns() } };
    timer_settime(alarm_timer, 0, &its, NULL);
  }
}

/* One step of the main loop: every tier of the malloc family, sometimes a fork.  Bursts of
 * one class size miss the magazines (the CPU cache's, the depot's and the slab layer's
 * locks); big blocks take the heap arena's lock. */
static int churn_step(prd_rng_t *r, void **keep, size_t nkeep, bool forks)
{
  size_t k = (size_t)prd_rng_below(r, nkeep);
  uint64_t c = prd_rng_below(r, 100);
  prd_free(keep[k]);
  keep[k] = NULL;
  if (c < 40) {
    void *burst[300];
    size_t size = 1 + prd_rng_below(r, 3000);
    for (int i = 0; i < 300; i++)
      if ((burst[i] = prd_malloc(size)) == NULL)
        return 1;
    for (int i = 0; i < 300; i++)
      prd_free(burst[i]);
    return 0;
  }
  size_t size;
  if (c < 95)
    size = 20000 + prd_rng_below(r, 1 << 20);   /* the heap arena's big blocks */
  else
    size = (5u << 20) + prd_rng_below(r, 1 << 20);   /* huge: a mapping of its own */
  keep[k] = prd_malloc(size);
  if (keep[k] == NULL)
    return 1;
  ((char *)keep[k])[size - 1] = 1;
  if (c % 10 == 0) {
    void *p = prd_realloc(keep[k], size + size / 4);
    if (p == NULL)
      return 1;
    keep[k] = p;
  }
  if (forks && c == 40)
    return fork_and_reap();
  return 0;
}

static int report(int bad, long steps)
{
  printf("# %ld steps, %d forks from the handler\n", steps, atomic_load(&handler_forks));
  fflush(stdout);
  return bad == 0 && atomic_load(&handler_bad) == 0 ? 0 : 1;
}

static int single_run(void)
{
  struct sigaction sa = { 0 };
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  struct sigevent ev = { 0 };
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGALRM;
  if (timer_create(CLOCK_MONOTONIC, &ev, &alarm_timer) != 0)
    return 3;
  alarm_rearm = true;
  struct itimerspec its = { { 0, 0 }, { 0, alarm_delay_ns() } };
  timer_settime(alarm_timer, 0, &its, NULL);
  prd_rng_t r = { 0x5151ull };
  void *keep[64] = { 0 };
  int bad = 0;
  long steps = 0;
  for (double end = now_s() + RUN_SECONDS; now_s() < end; steps++)
    bad += churn_step(&r, keep, 64, true);
  alarm_rearm = false;
  timer_delete(alarm_timer);
  for (int k = 0; k < 64; k++)
    prd_free(keep[k]);
  return report(bad, steps);
}

static _Atomic int stop;
static pthread_t main_thread;

static void *other_churn(void *arg)
{
  (void)arg;
  prd_rng_t r = { 0x7777ull };
  void *keep[64] = { 0 };
  while (!atomic_load_explicit(&stop, memory_order_relaxed))
    (void)churn_step(&r, keep, 64, false);
  for (int k = 0; k < 64; k++)
    prd_free(keep[k]);
  return NULL;
}

/* Signals the main thread, waits for its handler to have run, then a random pause. */
static void *ticker(void *arg)
{
  (void)arg;
  struct timespec poll = { 0, 20 * 1000 };
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    int before = atomic_load(&handler_forks);
    pthread_kill(main_thread, SIGALRM);
    while (atomic_load(&handler_forks) == before && !atomic_load(&stop))
      nanosleep(&poll, NULL);
    struct timespec nap = { 0, alarm_delay_ns() };
    nanosleep(&nap, NULL);
  }
  return NULL;
}

static int threads_run(void)
{
  struct sigaction sa = { 0 };
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  sigset_t alrm, old;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  main_thread = pthread_self();
  pthread_t t[2];
  pthread_sigmask(SIG_BLOCK, &alrm, &old);   /* the threads inherit the blocked signal */
  if (pthread_create(&t[0], NULL, other_churn, NULL) != 0 ||
      pthread_create(&t[1], NULL, ticker, NULL) != 0)
    return 3;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  prd_rng_t r = { 0x5252ull };
  void *keep[64] = { 0 };
  int bad = 0;
  long steps = 0;
  for (double end = now_s() + RUN_SECONDS; now_s() < end; steps++) {
    bad += churn_step(&r, keep, 64, false);
    if (steps % 100 == 0) {
      pthread_sigmask(SIG_BLOCK, &alrm, NULL);
      bad += fork_and_reap();
      pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
  }
  atomic_store(&stop, 1);
  pthread_join(t[0], NULL);
  pthread_join(t[1], NULL);
  for (int k = 0; k < 64; k++)
    prd_free(keep[k]);
  return report(bad, steps);
}

/* Registered before the library's handlers (an earlier constructor), so glibc runs this
 * prepare handler after the library's and these parent and child handlers before the
 * library's: each runs while the library's handlers hold their locks. */
enum { NEST_PREPARE = 1, NEST_PARENT, NEST_CHILD };
static _Atomic int nest_armed;   /* which handler of the next fork forks again */
static _Atomic int nest_forks, nest_bad;

static void nest_fork(int which)
{
  if (atomic_load(&nest_armed) != which)
    return;
  atomic_store(&nest_armed, 0);   /* the nested fork's own handlers do not fork again */
  if (fork_and_reap() != 0)
    atomic_fetch_add(&nest_bad, 1);
  atomic_fetch_add(&nest_forks, 1);
}

static void nest_prepare(void) { nest_fork(NEST_PREPARE); }
static void nest_parent(void) { nest_fork(NEST_PARENT); }
static void nest_child(void) { nest_fork(NEST_CHILD); }

__attribute__((constructor(101))) static void nest_register(void)
{
  pthread_atfork(nest_prepare, nest_parent, nest_child);
}

static void *idle_thread(void *arg)
{
  (void)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    void *p = prd_malloc(100);
    prd_free(p);
    struct timespec nap = { 0, 100 * 1000 };
    nanosleep(&nap, NULL);
  }
  return NULL;
}

static int nested_run(void)
{
  pthread_t t;
  if (pthread_create(&t, NULL, idle_thread, NULL) != 0)   /* glibc's fork: multi-threaded */
    return 3;
  prd_free(prd_malloc(100000));
  int bad = 0;
  for (int i = 0; i < 60; i++) {
    int which = NEST_PREPARE + i % 3, before = atomic_load(&nest_forks);
    atomic_store(&nest_armed, which);
    pid_t pid = fork();
    if (pid == 0) {
      /* the child's window forked again here, the prepare's before the fork */
      bool once = atomic_load(&nest_forks) == before + (which != NEST_PARENT);
      _exit(once && atomic_load(&nest_bad) == 0 ? 0 : 1);
    }
    if (pid < 0)
      return 4;
    atomic_store(&nest_armed, 0);
    if (atomic_load(&nest_forks) != before + (which != NEST_CHILD))
      bad++;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
      ;
    bad += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    void *p = prd_malloc(50000);   /* the parent's locks are all free again */
    prd_free(p);
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  printf("# %d nested forks\n", atomic_load(&nest_forks));
  fflush(stdout);
  return bad == 0 && atomic_load(&nest_bad) == 0 ? 0 : 1;
}

static void test_fork_signal_single(void)
{
  CHECK_EQ(prd_test_bounded(single_run, "single-threaded, fork in SIGALRM", DEADLINE), 0);
}

static void test_fork_signal_threads(void)
{
  CHECK_EQ(prd_test_bounded(threads_run, "two threads, fork in SIGALRM", DEADLINE), 0);
}

static void test_fork_nested(void)
{
  CHECK_EQ(prd_test_bounded(nested_run, "fork inside the fork handlers", DEADLINE), 0);
}

int main(void)
{
  /* no library thread: the single-threaded run stays single-threaded (glibc's view) */
  prd_option_set("maint_thread", "0");
  RUN(test_fork_signal_single);
  RUN(test_fork_signal_threads);
  RUN(test_fork_nested);
  return prd_test_done();
}
