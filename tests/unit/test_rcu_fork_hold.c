/* test_rcu_fork_hold: a fork child whose grace-period source is not the built-in one runs
 * none of that source's grace periods until it uses RCU itself (src/rcu.c section 7).
 *
 * The defect this guards: such a child inherits the source's registry of readers, the
 * parent's other threads among them; liburcu cannot be told to forget them, so a grace period
 * of it in the child waits for dead readers or reads records that dead threads left in memory
 * the child reuses.  A child that only allocated started the library's grace-period thread
 * (a refill wanted the objects its parent had deferred), which died of SIGSEGV in liburcu's
 * synchronize_rcu.  Here the source counts its grace periods: the allocator's requests and
 * bounded wait in the child must run none, its own prd_synchronize_rcu must, and after that
 * the driver serves requests again; a child that only requests and polls (the program's
 * prd_rcu_request_gp) ends the hold too, and a request the allocator made during the hold is
 * served once the child ends it with a call that asks for nothing.  (No reader ever exists,
 * so each call of the source's synchronize is a whole grace period.)
 */
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "prd_test.h"

static atomic_int syncs;

static void counting_sync(void)
{
  atomic_fetch_add(&syncs, 1);
}

static const struct prd_rcu_source counting = { .rs_name = "counting",
                                                 .rs_synchronize = counting_sync };

static bool wait_state(prd_gp_t s)
{
  for (int i = 0; i < 10000 && !prd_rcu_poll_state(s); i++)
    usleep(1000);
  return prd_rcu_poll_state(s);
}

/* The child's checks: a bit of the exit status for each that failed. */
static int child_checks(void)
{
  int s0 = atomic_load(&syncs), bad = 0;
  if (!prd__rcu_fork_held())
    bad |= 1;
  prd_gp_t c = prd_rcu_get_state();
  prd__rcu_request_gp(c);   /* the allocator's request, as a refill makes */
  if (prd__rcu_poll_bounded(c, 2000000))   /* looks once: not reached */
    bad |= 2;
  usleep(50000);   /* a driver, had one started, would have run it by now */
  if (atomic_load(&syncs) != s0 || prd_rcu_poll_state(c))
    bad |= 4;
  prd_synchronize_rcu();   /* the child's own use of RCU: it runs one, and ends the hold */
  if (prd__rcu_fork_held() || atomic_load(&syncs) == s0 || !prd_rcu_poll_state(c))
    bad |= 8;
#if !defined(PRD_TSAN) && !defined(PRD_ASAN)
  /* sanitizers cannot start threads in the child of a multi-threaded fork (test_rcu.c's
   * test_fork): the driver's restart is checked in the other builds */
  c = prd_rcu_get_state();
  prd_rcu_request_gp(c);
  if (!wait_state(c))
    bad |= 16;
#endif
  return bad;
}

/* A child whose only use of RCU is the polled interface: the program's request ends the
 * hold, and the driver serves it. */
static int child_polls(void)
{
  int bad = 0;
  if (!prd__rcu_fork_held())
    bad |= 1;
  prd_gp_t c = prd_rcu_get_state();
  prd_rcu_request_gp(c);
  if (prd__rcu_fork_held())
    bad |= 2;
  if (!wait_state(c))
    bad |= 4;
  return bad;
}

/* A child whose allocator asked for a grace period while held (a CPU cache asks once per
 * state, and may not ask again), and which then ends the hold with a call that asks for
 * nothing (thread registration): the request made during the hold is served. */
static int child_registers(void)
{
  int bad = 0;
  if (!prd__rcu_fork_held())
    bad |= 1;
  prd_gp_t c = prd_rcu_get_state();
  prd__rcu_request_gp(c);   /* the allocator's request: held, nothing runs */
  usleep(20000);
  if (prd_rcu_poll_state(c))
    bad |= 2;
  prd_rcu_register_thread();   /* the child uses RCU: the hold ends */
  if (prd__rcu_fork_held())
    bad |= 4;
  if (!wait_state(c))   /* no new request: the one of the hold is served */
    bad |= 8;
  prd_rcu_unregister_thread();
  return bad;
}

static void test_child_holds(void)
{
  CHECK_EQ(prd_rcu_set_source(&counting), 0);
  prd_synchronize_rcu();
  CHECK(atomic_load(&syncs) >= 1);
  /* the driver serves a request in the parent: the child is forked from two threads */
  prd_gp_t s = prd_rcu_get_state();
  prd_rcu_request_gp(s);
  CHECK(wait_state(s));
  CHECK(!prd__rcu_fork_held());
  for (int i = 0; i < 5; i++) {
#if defined(PRD_TSAN) || defined(PRD_ASAN)
    if (i == 3)
      break;   /* child_polls and child_registers need the driver: a thread (child_checks) */
#endif
    pid_t pid = fork();
    if (pid == 0)
      _exit(i < 3 ? child_checks() : i == 3 ? child_polls() : child_registers());
    CHECK(pid > 0);
    int st = 0;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
  }
  /* the parent is not held, and its driver still serves it */
  CHECK(!prd__rcu_fork_held());
  s = prd_rcu_get_state();
  prd_rcu_request_gp(s);
  CHECK(wait_state(s));
}

int main(void)
{
  RUN(test_child_holds);
  return prd_test_done();
}
