/* test_lthread: the library's own threads (src/thread.c): a failure to create one is retried,
 * not remembered, and nobody blocks on a thread that could not be started; they block every
 * signal; and they keep no process alive.
 *
 * pthread_create is interposed (a definition here, which the library's static copy calls,
 * forwarding to the real one through dlsym(RTLD_NEXT)) so that it fails with EAGAIN on demand.
 * Each group runs in a child bounded by CHILD_WAIT_MS (and alarm() inside it): a hang fails
 * the test instead of blocking ctest. */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "internal.h"
#include "prd_test.h"

// prd-test-labels: unit no-asan no-tsan
// prd-test-timeout: 180
// (no-asan, no-tsan: the sanitizers' runtimes define pthread_create themselves)

#define CHILD_WAIT_MS 20000

static _Atomic int fail_next;   /* creates to fail with EAGAIN; -1: every one */
static _Atomic int failed;      /* creates failed so far */
static void (*_Atomic reenter)(void);   /* called inside each create, before it forwards */

int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
  static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  if (real == NULL)
    *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
  int f = atomic_load(&fail_next);
  while (f != 0) {
    if (f < 0 || atomic_compare_exchange_weak(&fail_next, &f, f - 1)) {
      atomic_fetch_add(&failed, 1);
      return EAGAIN;
    }
  }
  void (*r)(void) = atomic_load(&reenter);
  if (r != NULL)
    r();
  return real(th, attr, fn, arg);
}

static void sleep_ms(long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

static _Atomic int cb_count;
static void cb(struct prd_rcu_head *h)
{
  (void)h;
  atomic_fetch_add(&cb_count, 1);
}

/* Threads of this process whose name starts with "prd-", and how many of them do not block
 * sig (from /proc/self/task/TID/status). */
static int lib_threads(int sig, int *unblocked)
{
  int n = 0;
  *unblocked = 0;
  DIR *d = opendir("/proc/self/task");
  if (d == NULL)
    return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.')
      continue;
    char path[300], buf[4096];
    snprintf(path, sizeof(path), "/proc/self/task/%s/status", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
      continue;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    if (strncmp(buf, "Name:\tprd-", 10) != 0)
      continue;
    n++;
    const char *b = strstr(buf, "SigBlk:\t");
    unsigned long long mask = b != NULL ? strtoull(b + 8, NULL, 16) : 0;
    if (!(mask & (1ull << (sig - 1))))
      ++*unblocked;
  }
  closedir(d);
  return n;
}

/* Runs fn in a child; fails when it does not exit 0 within CHILD_WAIT_MS (then killed). */
static int child_ms;
static void in_child(void (*fn)(void))
{
  fflush(stdout);
  fflush(stderr);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(CHILD_WAIT_MS / 1000);
    prd_t_failures = 0;
    fn();
    fflush(stdout);
    _exit(prd_t_failures == 0 ? 0 : 1);
  }
  int st = 0, ms = 0;
  for (; ms < CHILD_WAIT_MS; ms++) {
    if (waitpid(pid, &st, WNOHANG) == pid)
      break;
    sleep_ms(1);
  }
  if (ms == CHILD_WAIT_MS) {
    fprintf(stderr, "  child still running after %d ms: killed\n", ms);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  child_ms = (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
  if (WIFSIGNALED(st))
    fprintf(stderr, "  child killed by signal %d\n", WTERMSIG(st));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- a failed start is retried, not remembered ------------------------------------------- */
/* Guards: the grace-period driver's and the call_rcu worker's running flags were set before
 * pthread_create and never cleared when it failed, so after one EAGAIN every grace-period
 * wait, every call_rcu callback and every rcu_barrier hung for good. */
static void once_body(void)
{
  /* a wait whose driver fails to start once completes, and the failure was seen */
  atomic_store(&fail_next, 1);
  prd_gp_t s = prd_rcu_get_state();
  prd_rcu_wait_state(s);
  CHECK(prd_rcu_poll_state(s));
  CHECK_EQ(atomic_load(&failed), 1);
  /* an asynchronous request after the failure is served: the driver starts on a later one */
  s = prd_rcu_get_state();
  for (int i = 0; i < 2000 && !prd_rcu_poll_state(s); i++) {
    prd_rcu_request_gp(s);
    sleep_ms(1);
  }
  CHECK(prd_rcu_poll_state(s));
  prd_synchronize_rcu();
  /* call_rcu whose worker fails to start once: rcu_barrier completes with it invoked */
  atomic_store(&fail_next, 1);
  struct prd_rcu_head h1;
  prd_call_rcu(&h1, cb);
  CHECK_EQ(atomic_load(&failed), 2);
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&cb_count), 1);
  /* and later callbacks run without a barrier: the worker was started after all */
  struct prd_rcu_head h2;
  prd_call_rcu(&h2, cb);
  for (int i = 0; i < 2000 && atomic_load(&cb_count) < 2; i++)
    sleep_ms(1);
  CHECK_EQ(atomic_load(&cb_count), 2);
}

static void test_start_fails_once(void)
{
  in_child(once_body);
}

/* Nothing can be started: every blocking call still returns (the waiter runs the grace period,
 * the barrier invokes the callbacks), and so do a cache's deferrals and its destroy. */
static void never_body(void)
{
  atomic_store(&fail_next, -1);
  prd_gp_t s = prd_rcu_get_state();
  prd_rcu_wait_state(s);
  CHECK(prd_rcu_poll_state(s));
  prd_synchronize_rcu();
  struct prd_rcu_head h[3];
  for (int i = 0; i < 3; i++)
    prd_call_rcu(&h[i], cb);
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&cb_count), 3);
  prd_rcu_barrier();   /* nothing pending */
  prd_cache_t *c = prd_cache_create("tlthread", 96, 0, NULL, NULL, NULL, NULL, NULL, 0);
  void *objs[4000];
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < 4000; i++)
      objs[i] = prd_cache_alloc(c, PRD_SLEEP);
    for (int i = 0; i < 4000; i++)
      prd_cache_free_deferred(c, objs[i]);
  }
  prd_cache_destroy(c);
  CHECK(atomic_load(&failed) > 0);
  int unblocked;
  CHECK_EQ(lib_threads(SIGTERM, &unblocked), 0);
  /* a failed start is tried again by the first call_rcu some 10 ms after it, not by every
   * call (at a thread limit each try maps a stack and fails a clone) */
  enum { MANY = 20000 };
  struct prd_rcu_head *many = calloc(MANY, sizeof(*many));
  atomic_store(&failed, 0);
  uint64_t t0 = prd__now_ns();
  for (int i = 0; i < MANY; i++)
    prd_call_rcu(&many[i], cb);
  uint64_t ms = (prd__now_ns() - t0) / 1000000u;
  printf("# %d call_rcu in %llu ms: %d tries to start the worker\n", MANY,
         (unsigned long long)ms, atomic_load(&failed));
  CHECK((uint64_t)atomic_load(&failed) <= ms / 10 + 2);
  prd_rcu_barrier();   /* stands in for the worker */
  CHECK_EQ(atomic_load(&cb_count), 3 + MANY);
  free(many);
  /* the same for the grace-period driver, which requests start */
  atomic_store(&failed, 0);
  t0 = prd__now_ns();
  for (int i = 0; i < MANY; i++)
    prd_rcu_request_gp(prd_rcu_get_state());
  ms = (prd__now_ns() - t0) / 1000000u;
  printf("# %d requests in %llu ms: %d tries to start the driver\n", MANY,
         (unsigned long long)ms, atomic_load(&failed));
  CHECK((uint64_t)atomic_load(&failed) <= ms / 10 + 2);
  prd_synchronize_rcu();   /* run by this thread */
  /* creates work again: the next call_rcu past the retry time starts the worker */
  atomic_store(&fail_next, 0);
  sleep_ms(20);
  struct prd_rcu_head h4;
  prd_call_rcu(&h4, cb);
  for (int i = 0; i < 2000 && atomic_load(&cb_count) < 4 + MANY; i++)
    sleep_ms(1);
  CHECK_EQ(atomic_load(&cb_count), 4 + MANY);
}

static void test_start_fails_always(void)
{
  in_child(never_body);
}

/* ---- a start that comes back into the library ------------------------------------------- */
/* Guards: the grace-period driver, the call_rcu worker and the maintenance thread were
 * started with their lock held (drv_lock, wrk_lock, maint_lock) across pthread_create, which
 * allocates (glibc's calloc of the new thread's DTV: prudence's own malloc when it is
 * preloaded), and that allocation may ask for a grace period, queue a callback or poke the
 * maintenance thread: the starting thread then waited on the lock it held.  Here the
 * interposed pthread_create does those three things itself, as such an allocation would. */
static void start_all(void);
static struct prd_rcu_head reenter_heads[64];
static _Atomic int reenter_n;
static void reenter_all(void)
{
  int i = atomic_fetch_add(&reenter_n, 1);
  prd_rcu_request_gp(prd_rcu_get_state());
  prd__rcu_request_expedited(prd_rcu_get_state());
  if (i < 64)
    prd_call_rcu(&reenter_heads[i], cb);
  prd__maint_wake();
}

static void reenter_body(void)
{
  atomic_store(&reenter, reenter_all);
  /* the driver: a request starts it */
  prd_gp_t s = prd_rcu_get_state();
  prd_rcu_request_gp(s);
  prd_rcu_wait_state(s);
  CHECK(prd_rcu_poll_state(s));
  /* the worker: a callback starts it */
  struct prd_rcu_head h;
  prd_call_rcu(&h, cb);
  prd_rcu_barrier();
  /* the maintenance thread: two threads that use the allocator at once start it */
  start_all();
  int unblocked;
  int n = lib_threads(SIGTERM, &unblocked);
  for (int i = 0; i < 200 && n < 3; i++) {   /* names come with the threads' first steps */
    sleep_ms(10);
    n = lib_threads(SIGTERM, &unblocked);
  }
  CHECK(n >= 3);
  atomic_store(&reenter, NULL);
  prd_rcu_barrier();
  CHECK(atomic_load(&reenter_n) >= 3);
  CHECK_EQ(atomic_load(&cb_count), 1 + PRD_MIN(atomic_load(&reenter_n), 64) + 1);
}

static void test_start_reenters(void)
{
  in_child(reenter_body);
}

/* ---- signals ----------------------------------------------------------------------------- */
static pthread_barrier_t both_counted;

/* The two threads overlap: each has used the allocator (and is counted) before either goes
 * on, so the process has two application threads at once and the maintenance thread starts
 * whatever the scheduler does (run one after the other, it would not). */
static void *alloc_thread(void *arg)
{
  prd_cache_t *c = arg;
  prd_cache_free(c, prd_cache_alloc(c, PRD_SLEEP));
  pthread_barrier_wait(&both_counted);
  for (int r = 0; r < 100; r++) {
    void *p[64];
    for (int i = 0; i < 64; i++)
      p[i] = prd_cache_alloc(c, PRD_SLEEP);
    for (int i = 0; i < 64; i++)
      prd_cache_free_deferred(c, p[i]);
  }
  return NULL;
}

/* Starts every library thread: two threads allocate and defer (the maintenance thread and the
 * driver), a callback (the worker). */
static void start_all(void)
{
  prd_cache_t *c = prd_cache_create("tlthread2", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  pthread_t t[2];
  pthread_barrier_init(&both_counted, NULL, 2);
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, alloc_thread, c);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  pthread_barrier_destroy(&both_counted);
  struct prd_rcu_head h;
  prd_call_rcu(&h, cb);
  prd_rcu_barrier();
  prd_rcu_wait_state(prd_rcu_get_state());
}

/* Guards: the maintenance thread was created without blocking signals, so a process that
 * blocks SIGTERM in its threads and reads it from a signalfd was killed by it. */
static void signals_body(void)
{
  start_all();
  int unblocked = 0;
  /* a thread just created carries its creator's name until it has run its first steps (it
   * names itself): on a loaded machine, look again for a while */
  int n = lib_threads(SIGTERM, &unblocked);
  for (int i = 0; i < 200 && n < 3; i++) {
    sleep_ms(10);
    n = lib_threads(SIGTERM, &unblocked);
  }
  printf("  %d library threads, %d with SIGTERM unblocked\n", n, unblocked);
  /* prd-maint, prd-rcu-gp, prd-rcu-cb: the check saw each (and a preloaded malloc's own) */
  CHECK(n >= 3);
  CHECK_EQ(unblocked, 0);
  lib_threads(SIGUSR1, &unblocked);
  CHECK_EQ(unblocked, 0);
}

static void test_signals_blocked(void)
{
  in_child(signals_body);
}

/* ---- a clone(CLONE_VM) child starts none (thread.c section 8) --------------------------- */
/* Guards: a child made by clone(CLONE_VM) without CLONE_THREAD (a vfork child before its
 * exec, a runtime's own threads) that called prd_call_rcu started the call_rcu worker in its
 * own thread group; the worker died with the child while the shared flags said it ran, so
 * the parent's callbacks never ran and its barrier waited for ever; and the child's exit
 * status became its last thread's (0, not the 5 it returned). */
static struct prd_rcu_head clone_heads[11];
static int clone_child(void *arg)
{
  (void)arg;
  prd_call_rcu(&clone_heads[10], cb);
  return 5;
}

static void clone_vm_body(void)
{
  static char stack[1 << 16] __attribute__((aligned(16)));
  atomic_store(&cb_count, 0);
  pid_t pid = clone(clone_child, stack + sizeof(stack), CLONE_VM | SIGCHLD, NULL);
  CHECK(pid > 0);
  int st = 0;
  if (pid > 0)
    while (waitpid(pid, &st, 0) < 0)
      ;
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 5);
  for (int i = 0; i < 10; i++)
    prd_call_rcu(&clone_heads[i], cb);
  prd_rcu_barrier();   /* alarm() ends the child if it waits for ever */
  CHECK_EQ(atomic_load(&cb_count), 11);   /* the clone child's callback too */
}

static void test_clone_vm_child(void)
{
  in_child(clone_vm_body);
}

/* ---- no library thread keeps a process alive ------------------------------------------- */
/* Guards: with the maintenance thread (and the RCU threads) running, a process whose last
 * thread called pthread_exit never ended. */
static int tasks(void)
{
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  if (d != NULL)
    closedir(d);
  return n;
}

static int named_threads(const char *name);
static void exit_body(void)
{
  start_all();
  if (tasks() < 4) {   /* main and the three library threads: else this proves nothing */
    fprintf(stderr, "  %d threads, %d counted, maint %d driver %d worker %d\n", tasks(),
            prd__lthread_apps(), named_threads("prd-maint"), named_threads("prd-rcu-gp"),
            named_threads("prd-rcu-cb"));
    _exit(2);
  }
  pthread_exit(NULL);   /* the process must end, with status 0 */
}

static void test_pthread_exit_ends_process(void)
{
  in_child(exit_body);
  printf("  child with every library thread ended %d ms after its start\n", child_ms);
}

/* Guards: without /proc (a chroot, a sandbox) the scan said "alive", so the library threads
 * stayed after main's pthread_exit and the process never ended (and, every thread of it
 * blocking every signal, not even on SIGTERM).  The count decides there now. */
static void exit_no_proc_body(void)
{
  prd__lthread_no_proc = true;
  /* main counted first: without /proc the count alone decides, and the count falling to
   * zero while main, not yet counted, joins start_all's threads would end the library
   * threads early (a wrong "none": a restart at the next need, thread.c section 3) */
  struct prd_rcu_head h;
  prd_call_rcu(&h, cb);
  prd_rcu_barrier();
  exit_body();
}

static void test_pthread_exit_no_proc(void)
{
  in_child(exit_no_proc_body);
  printf("  child without /proc ended %d ms after its start\n", child_ms);
}

/* A thread that never used the library is an application thread too: the library threads
 * stay while it lives (they serve it when it starts using them), and end after it. */
static void *late_user(void *arg)
{
  (void)arg;
  sleep_ms(300);   /* main has left meanwhile, and the library threads have looked */
  int before = atomic_load(&cb_count);
  struct prd_rcu_head h;
  prd_call_rcu(&h, cb);
  prd_rcu_barrier();
  prd_rcu_wait_state(prd_rcu_get_state());
  int unblocked;
  if (atomic_load(&cb_count) != before + 1 || lib_threads(SIGTERM, &unblocked) < 2)
    _exit(3);
  return NULL;   /* the last thread: the process ends with status 0 */
}

static void late_body(void)
{
  start_all();
  pthread_t t;
  pthread_create(&t, NULL, late_user, NULL);
  pthread_exit(NULL);
}

static void test_uncounted_thread(void)
{
  in_child(late_body);
  printf("  child ended %d ms after its start\n", child_ms);
}

/* Guards: a main thread whose name started with "prd-" (the library threads' prefix; this
 * project's prd-bench is such a program) was taken for a library thread, so once the other
 * application threads ended the library threads found no application thread left and ended
 * (to be started again at the next need), while the process went on. */
static int named_threads(const char *name)
{
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.')
      continue;
    char path[300], comm[64] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
      continue;
    if (fgets(comm, sizeof(comm), f) != NULL)
      comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
    n += strcmp(comm, name) == 0;
  }
  if (d != NULL)
    closedir(d);
  return n;
}

static void prefix_main_body(void)
{
  pthread_setname_np(pthread_self(), "prd-app-main");
  start_all();   /* two application threads start the maintenance thread, then end */
  for (int i = 0; i < 200 && named_threads("prd-maint") == 0; i++)
    sleep_ms(10);
  CHECK(named_threads("prd-maint") >= 1);   /* two under a preloaded malloc of its own */
  sleep_ms(700);   /* past the quick looks after the last thread's poke (255 ms) */
  CHECK(named_threads("prd-maint") >= 1);
}

static void test_main_named_like_library(void)
{
  in_child(prefix_main_body);
}

/* Guards: the free miss that found the maintenance thread needed started it, from inside
 * free().  glibc frees dead threads' TLS with its stack-cache lock held (pthread_join: in a
 * fork child the first join frees the parent's other threads' stacks so; a detached
 * thread's exit), pthread_create takes that lock, and the thread waited for itself for ever.
 * The joins are marked by the preloaded library (tests/preload/threads.c, join); a thread's
 * first free, which makes its magazines, asks for no thread (glibc's frees are the first
 * calls of a thread that exits without having used the library).  Here a second thread's
 * first call is a free, a miss after which the thread is needed (it arrives with it): no
 * thread may start there; its later frees, a consumer's, start it. */
#define FREE_N 4096
static void *free_n[FREE_N];
static pthread_barrier_t free_first, free_more, free_end;

static void *free_thread(void *arg)
{
  (void)arg;
  prd_free(free_n[0]);
  pthread_barrier_wait(&free_first);
  pthread_barrier_wait(&free_more);   /* the main thread has looked */
  for (int i = 1; i < FREE_N; i++)
    prd_free(free_n[i]);
  pthread_barrier_wait(&free_end);   /* stays counted until the main thread looked again */
  return NULL;
}

static void free_body(void)
{
  for (int i = 0; i < FREE_N; i++)
    free_n[i] = prd_malloc(64);
  CHECK_EQ(named_threads("prd-maint"), 0);   /* one application thread: none yet */
  pthread_barrier_init(&free_first, NULL, 2);
  pthread_barrier_init(&free_more, NULL, 2);
  pthread_barrier_init(&free_end, NULL, 2);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, free_thread, NULL), 0);
  pthread_barrier_wait(&free_first);
  sleep_ms(200);   /* a thread started by the first free has named itself by now */
  int first = named_threads("prd-maint");
  pthread_barrier_wait(&free_more);
  int after = 0;
  for (int i = 0; i < 200 && (after = named_threads("prd-maint")) == 0; i++)
    sleep_ms(10);
  printf("  maintenance threads after a thread's first free: %d, after its other frees: %d\n",
         first, after);
  CHECK_EQ(first, 0);
  CHECK(after >= 1);
  pthread_barrier_wait(&free_end);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&free_first);
  pthread_barrier_destroy(&free_more);
  pthread_barrier_destroy(&free_end);
}

static void test_no_start_in_free(void)
{
  in_child(free_body);
}

/* ---- the last thread's callbacks do not hold the process ---------------------------------- */
/* Guards: main ended with pthread_exit and the one other thread queued a callback and
 * returned.  Its exit poked the library threads, but the worker's grace period for that
 * callback then started the driver (again), after the poke: the driver looked only an idle
 * period (LT_IDLE_MS, a second) after its last look, and a driver whose waiter had not left
 * when it went idle did not take the poke either.  Every run ended a second late; ends
 * within tens of milliseconds now. */
static void cb_free(struct prd_rcu_head *h)
{
  free(h);
}

static void *last_caller(void *arg)
{
  (void)arg;
  struct prd_rcu_head *h = malloc(sizeof(*h));
  if (h != NULL)
    prd_call_rcu(h, cb_free);
  return NULL;
}

static void last_callback_body(void)
{
  pthread_t t;
  if (pthread_create(&t, NULL, last_caller, NULL) != 0)
    _exit(3);
  pthread_exit(NULL);
}

static void test_last_callback_exit_prompt(void)
{
  int worst = 0;
  for (int i = 0; i < 3; i++) {
    in_child(last_callback_body);
    worst = child_ms > worst ? child_ms : worst;
  }
  printf("  the slowest of 3 children ended %d ms after its start\n", worst);
  CHECK(worst < 700);   /* a second (LT_IDLE_MS) when a library thread waits out its period */
}

int main(void)
{
  RUN(test_start_fails_once);
  RUN(test_start_fails_always);
  RUN(test_start_reenters);
  RUN(test_signals_blocked);
  RUN(test_clone_vm_child);
  RUN(test_pthread_exit_ends_process);
  RUN(test_pthread_exit_no_proc);
  RUN(test_uncounted_thread);
  RUN(test_last_callback_exit_prompt);
  RUN(test_main_named_like_library);
  RUN(test_no_start_in_free);
  return prd_test_done();
}
