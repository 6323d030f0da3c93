/* membarrier refused after the library registered it, as a seccomp filter that a program (or
 * a sandbox it enters) installs once running makes it: the readers of the built-in RCU and the
 * owners of magazines then run without the fences that barrier stands in for, so neither a
 * grace period nor a visit to another thread's magazines can be kept.  The process ends with a
 * report, whatever abort_on_error says, instead of going on without the guarantee (each case
 * in a child).  A filter in place from the start that lets the query and the registration
 * through and refuses only the barrier is found at start-up, when nothing relies on it yet:
 * fence mode, and the program runs.  Not under TSan, whose builds use fences instead of
 * membarrier.
 *
 * A refusal for a moment (os.c section 11): the kernel may fail one call with ENOMEM (it
 * allocates a cpumask) or be interrupted.  Both halves once ended the process at the first
 * such failure too; an outside tester's fault injection ended every run so.  They try again
 * now, for about a second, and end the process only when the refusal lasts.  syscall() is
 * interposed for that (a definition here, forwarding through dlsym(RTLD_NEXT)): while
 * `fail_left` is above 0, membarrier(PRIVATE_EXPEDITED) fails with ENOMEM. */
// prd-test-labels: no-tsan
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prd_seccomp.h"
#include "prd_test.h"
#include "prudence.h"
#include "prudence_rcu.h"

#define CMD_QUERY 0
#define CMD_PRIVATE_EXPEDITED (1 << 3)

static _Atomic int fail_left;
static _Atomic int failed;

long syscall(long nr, ...)
{
  static long (*real)(long, ...);
  if (real == NULL)
    *(void **)&real = dlsym(RTLD_NEXT, "syscall");
  va_list ap;
  va_start(ap, nr);
  long a[6];
  for (int i = 0; i < 6; i++)
    a[i] = va_arg(ap, long);
  va_end(ap);
  if (nr == SYS_membarrier && a[0] == CMD_PRIVATE_EXPEDITED) {
    int left = atomic_load(&fail_left);
    while (left > 0 && !atomic_compare_exchange_weak(&fail_left, &left, left - 1))
      ;
    if (left > 0) {
      atomic_fetch_add(&failed, 1);
      errno = ENOMEM;
      return -1;
    }
  }
  return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* Every thread's membarrier fails with EPERM from now on; false when seccomp is refused. */
static bool refuse_membarrier(void)
{
  return prd_test_refuse(__NR_membarrier, -1, 0, EPERM, true) == 0;
}

/* Only membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) fails, with EPERM, from now on. */
static bool refuse_membarrier_command(void)
{
  return prd_test_refuse(__NR_membarrier, 0, CMD_PRIVATE_EXPEDITED, EPERM, false) == 0;
}

static bool membarrier_registered(void)
{
  /* the library registers PRIVATE_EXPEDITED when the kernel offers it; a test of a kernel
   * without it has nothing to lose */
  long cmds = syscall(__NR_membarrier, CMD_QUERY, 0, 0);
  return cmds > 0 && (cmds & CMD_PRIVATE_EXPEDITED) != 0;
}

static atomic_int stop;

static void *allocator(void *arg)
{
  (void)arg;
  prd_rcu_register_thread();
  while (!atomic_load(&stop)) {
    prd_rcu_read_lock();
    prd_free(prd_malloc(48));
    prd_rcu_read_unlock();
  }
  prd_rcu_unregister_thread();
  return NULL;
}

/* In a child: this thread's magazines and a grace period first, then another thread with
 * magazines and reader sections (allocator); the child exits 3 if it cannot start. */
static pthread_t start_allocator(void)
{
  prd_free(prd_malloc(48));
  prd_synchronize_rcu();
  pthread_t t;
  if (pthread_create(&t, NULL, allocator, NULL) != 0)
    _exit(3);
  return t;
}

/* A child: another thread with magazines and reader sections, membarrier refused, then
 * `what` (0: a reap of every thread's magazines, 1: a grace period).  Never returns normally:
 * the library ends it. */
static void lose_membarrier(void *arg)
{
  int what = (int)(intptr_t)arg;
  prd_option_set("abort_on_error", "0");   /* the end does not depend on it */
  pthread_t t = start_allocator();
  usleep(100000);
  if (!refuse_membarrier())
    _exit(77);
  for (int i = 0; i < 200; i++) {
    if (what == 0)
      prd_reap();
    else
      prd_synchronize_rcu();
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  _exit(0);
}

static void check_ends(int what, const char *msg)
{
  char buf[4096];
  int st = prd_test_child(lose_membarrier, (void *)(intptr_t)what, buf, sizeof(buf));
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
    printf("# seccomp refused: skipped\n");
    return;
  }
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK(strstr(buf, msg) != NULL);
  if (strstr(buf, msg) == NULL)
    fprintf(stderr, "%s", buf);
}

static void test_reap_ends(void)
{
  check_ends(0, "magazines: membarrier(PRIVATE_EXPEDITED) failed (errno 1) after it was registered");
}

static void test_grace_period_ends(void)
{
  check_ends(1, "rcu: membarrier(PRIVATE_EXPEDITED) failed (errno 1) after it was registered");
}

/* A child whose library starts under the filter: reaps and grace periods beside another
 * thread's magazines and sections, then a clean exit. */
static void start_refused(void *arg)
{
  (void)arg;
  if (!refuse_membarrier_command())
    _exit(77);
  pthread_t t = start_allocator();   /* the library's first use */
  for (int i = 0; i < 200; i++) {
    prd_reap();
    prd_synchronize_rcu();
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  _exit(0);
}

/* Guards the defect: the library registered membarrier when the query and the registration
 * succeeded, and met the refusal of the barrier itself at the first grace period, which it
 * can only end the process for. */
static void test_refused_from_the_start_runs(void)
{
  char buf[4096];
  int st = prd_test_child(start_refused, NULL, buf, sizeof(buf));
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
    printf("# seccomp refused: skipped\n");
    return;
  }
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fprintf(stderr, "%s", buf);
}

/* A child: another thread with magazines and reader sections, then reaps (`what` 0) or
 * grace periods (1) while membarrier fails `n` times. */
static void refused_for_a_while(void *arg)
{
  intptr_t v = (intptr_t)arg;
  int what = (int)(v & 1), n = (int)(v >> 1);
  pthread_t t = start_allocator();
  usleep(50000);
  atomic_store(&fail_left, n);
  for (int i = 0; i < 20; i++) {
    if (what == 0)
      prd_reap();
    else
      prd_synchronize_rcu();
  }
  int seen = atomic_load(&failed);
  atomic_store(&fail_left, 0);
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  printf("membarrier failed %d times\n", seen);
  fflush(stdout);
  _exit(seen == n ? 0 : 4);
}

static void check_goes_on(int what)
{
  char buf[4096];
  int st = prd_test_child(refused_for_a_while, (void *)(intptr_t)(what | (3 << 1)), buf,
                          sizeof(buf));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(buf, "membarrier failed 3 times");
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fprintf(stderr, "%s", buf);
}

static void test_reap_goes_on(void)
{
  check_goes_on(0);
}

static void test_grace_period_goes_on(void)
{
  check_goes_on(1);
}

/* A refusal that lasts still ends the process, after about a second of tries. */
static void test_lasting_refusal_ends(void)
{
  char buf[4096];
  int st = prd_test_child(refused_for_a_while, (void *)(intptr_t)(1 | (1000000 << 1)), buf,
                          sizeof(buf));
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK_STR_CONTAINS(buf, "membarrier(PRIVATE_EXPEDITED) failed (errno 12) after it was registered");
}

int main(void)
{
  if (!membarrier_registered()) {
    printf("# no membarrier(PRIVATE_EXPEDITED) here: skipped\n");
    return 77;
  }
  RUN(test_reap_ends);
  RUN(test_grace_period_ends);
  RUN(test_refused_from_the_start_runs);
  RUN(test_reap_goes_on);
  RUN(test_grace_period_goes_on);
  RUN(test_lasting_refusal_ends);
  return prd_test_done();
}
