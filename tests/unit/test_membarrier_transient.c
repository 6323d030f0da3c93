/* membarrier refused for a moment (src/os.c section 11): the kernel may fail one call with
 * ENOMEM (it allocates a cpumask) or be interrupted.  The writer's halves of the magazine
 * handshake and of the grace periods once ended the process at the first such failure, as
 * for a refusal for good; an outside tester's fault injection ended every run so.  They try
 * again now, and end the process only when the refusal lasts (about a second).
 *
 * syscall() is interposed (a definition here, forwarding through dlsym(RTLD_NEXT)): while
 * `fail_left` is above 0, membarrier(PRIVATE_EXPEDITED) fails with ENOMEM.  Not under TSan,
 * whose builds use fences instead of membarrier. */
// prd-test-labels: unit no-tsan no-preload
// (no-preload: the preloaded copy's calls would meet the interposer too)
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* A child: another thread with magazines and reader sections, then reaps (`what` 0) or
 * grace periods (1) while membarrier fails `n` times. */
static void refused_for_a_while(void *arg)
{
  intptr_t v = (intptr_t)arg;
  int what = (int)(v & 1), n = (int)(v >> 1);
  prd_free(prd_malloc(48));
  prd_synchronize_rcu();
  pthread_t t;
  if (pthread_create(&t, NULL, allocator, NULL) != 0)
    _exit(3);
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
  long cmds = syscall(SYS_membarrier, CMD_QUERY, 0, 0);
  if (cmds <= 0 || (cmds & CMD_PRIVATE_EXPEDITED) == 0) {
    printf("# no membarrier(PRIVATE_EXPEDITED) here: skipped\n");
    return 77;
  }
  alarm(60);
  RUN(test_reap_goes_on);
  RUN(test_grace_period_goes_on);
  RUN(test_lasting_refusal_ends);
  return prd_test_done();
}
