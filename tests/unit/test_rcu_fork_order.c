/* test_rcu_fork_order: an allocation's bounded wait for a grace period (src/rcu.c section 9)
 * blocks on no lock of fork's order (src/fork.c section 2).
 *
 * The defect this guards: once its bounded wait had run out, prd__rcu_poll_bounded looked at
 * the reader registry to remember a reader that held the grace period open, and blocked on
 * reg_lock with gp_lock already dropped.  fork's prepare takes gp_lock, then reg_lock, then
 * the C library's stream-list lock.  So a thread in getline (holding its FILE's lock, its
 * realloc on a class that had seen deferrals, waiting for a grace period a reader held open),
 * a thread in fflush(NULL) (holding the list lock, waiting for that FILE) and a thread in fork
 * (holding gp_lock and reg_lock, waiting for the list lock) closed a cycle: the getline thread
 * waited for reg_lock.
 *
 * Here another thread holds gp_lock and reg_lock as fork's prepare does (its first step,
 * prd__rcu_fork_prepare_gp) for HOLD_MS, and this thread makes a bounded wait of WAIT_US
 * meanwhile: it must return within about its bound.  The old code returned only when the
 * holder let go.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "internal.h"
#include "prd_test.h"

#define HOLD_MS 1500
#define WAIT_US 1000
#define RETURN_MS_MAX 500   /* the bound is 1 ms: a preempted thread still returns in this */

static atomic_int held, release_now;

static void sleep_ms(long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

static void *fork_prepare_holder(void *arg)
{
  (void)arg;
  prd__rcu_fork_prepare_gp();   /* gp_lock, reg_lock: the first locks of fork's order */
  atomic_store(&held, 1);
  for (int i = 0; i < HOLD_MS && !atomic_load(&release_now); i++)
    sleep_ms(1);
  prd__rcu_fork_parent_gp();
  return NULL;
}

static void test_bounded_wait_takes_no_fork_lock(void)
{
  prd_synchronize_rcu();   /* the source fixed, the registry made, outside the measurement */
  pthread_t h;
  CHECK(pthread_create(&h, NULL, fork_prepare_holder, NULL) == 0);
  while (!atomic_load(&held))
    sched_yield();
  prd_gp_t s = prd_rcu_get_state();   /* cannot end: the holder has gp_lock */
  uint64_t t0 = prd__now_ns();
  bool reached = prd__rcu_poll_bounded(s, (uint64_t)WAIT_US * 1000);
  uint64_t ms = (prd__now_ns() - t0) / 1000000;
  atomic_store(&release_now, 1);
  pthread_join(h, NULL);
  printf("  bounded wait of %d us with fork's first locks held: %s after %llu ms\n", WAIT_US,
         reached ? "reached" : "gave up", (unsigned long long)ms);
  CHECK(!reached);
  CHECK(ms < RETURN_MS_MAX);
  prd_synchronize_rcu();   /* the grace period asked for ends once the locks are free */
  CHECK(prd_rcu_poll_state(s));
}

int main(void)
{
  RUN(test_bounded_wait_takes_no_fork_lock);
  return prd_test_done();
}
