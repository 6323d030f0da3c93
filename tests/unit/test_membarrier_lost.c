/* membarrier refused after the library registered it, as a seccomp filter that a program (or
 * a sandbox it enters) installs once running makes it: the readers of the built-in RCU and the
 * owners of magazines then run without the fences that barrier stands in for, so neither a
 * grace period nor a visit to another thread's magazines can be kept.  The process ends with a
 * report, whatever abort_on_error says, instead of going on without the guarantee (each case
 * in a child).  A filter in place from the start that lets the query and the registration
 * through and refuses only the barrier is found at start-up, when nothing relies on it yet:
 * fence mode, and the program runs.  Not under TSan, whose builds use fences instead of
 * membarrier. */
// prd-test-labels: no-tsan
#include <errno.h>
#include <pthread.h>
#include <signal.h>
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

/* Every thread's membarrier fails with EPERM from now on; false when seccomp is refused. */
static bool refuse_membarrier(void)
{
  return prd_test_refuse(__NR_membarrier, -1, 0, EPERM, true) == 0;
}

/* Only membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) fails, with EPERM, from now on. */
static bool refuse_membarrier_command(void)
{
  return prd_test_refuse(__NR_membarrier, 0, 1 << 3 /* PRIVATE_EXPEDITED */, EPERM, false) == 0;
}

static bool membarrier_registered(void)
{
  /* the library registers PRIVATE_EXPEDITED when the kernel offers it; a test of a kernel
   * without it has nothing to lose */
  long cmds = syscall(__NR_membarrier, 0 /* QUERY */, 0, 0);
  return cmds > 0 && (cmds & (1 << 3)) != 0;   /* MEMBARRIER_CMD_PRIVATE_EXPEDITED */
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

/* A child: another thread with magazines and reader sections, membarrier refused, then
 * `what` (0: a reap of every thread's magazines, 1: a grace period).  Never returns normally:
 * the library ends it. */
static void lose_membarrier(void *arg)
{
  int what = (int)(intptr_t)arg;
  prd_option_set("abort_on_error", "0");   /* the end does not depend on it */
  prd_free(prd_malloc(48));
  prd_synchronize_rcu();
  pthread_t t;
  if (pthread_create(&t, NULL, allocator, NULL) != 0)
    _exit(3);
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
  prd_free(prd_malloc(48));   /* the library's first use */
  prd_synchronize_rcu();
  pthread_t t;
  if (pthread_create(&t, NULL, allocator, NULL) != 0)
    _exit(3);
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

int main(void)
{
  if (!membarrier_registered()) {
    printf("# no membarrier(PRIVATE_EXPEDITED) here: skipped\n");
    return 77;
  }
  RUN(test_reap_ends);
  RUN(test_grace_period_ends);
  RUN(test_refused_from_the_start_runs);
  return prd_test_done();
}
