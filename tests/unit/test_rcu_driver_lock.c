/* test_rcu_driver_lock: the RCU driver does not sleep on a reader while it holds the grace
 * period's lock (src/rcu.c section 5, drv_gp), so an allocation's bounded wait (section 9)
 * can end a grace period as soon as its last reader has left.
 *
 * The defect this guards: the driver ran each grace period under gp_lock from start to end,
 * and its wait for readers slept (growing to 1 ms per sleep) with the lock held.  An
 * allocation's bounded wait never blocks on gp_lock: finding it taken, it only polled the
 * state.  So once a reader that had held a grace period open for a while left its section,
 * the grace period still ended only when the driver woke from its sleep, up to 1 ms later,
 * and a bounded wait of less than that (defer_poll_us, 1 ms, less whatever it spent) ran out
 * over a grace period that nothing held any more: the cache grew instead (the inline
 * timeouts of `prd-bench deferred --readers 1`).
 *
 * Each round: a reader holds one section open for HOLD_MS, long enough for the driver, asked
 * for the grace period, to reach its longest sleeps; when the reader leaves, the test's
 * bounded wait of WAIT_US must end the grace period (it takes gp_lock while the driver
 * sleeps and runs the remaining scans itself).  The old driver held gp_lock in those sleeps,
 * so most rounds ran out.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#include "internal.h"
#include "prd_test.h"

#define ROUNDS 32        /* rounds counted: no thread of the process was switched out */
#define ROUNDS_TRIED 160 /* at most, when other work preempts this process's threads */
#define HOLD_MS 30      /* the driver's backoff reaches its 1 ms sleeps after about 2 ms */
#define WAIT_US 300     /* well under the old driver's sleep, far over a grace period's scans */
/* The old driver made most rounds run out; a clean-clone suite on the loaded 2-core box, with
 * another test beside this one, ran out 2 or 3 rounds of 8 that no preemption explained.  Half
 * of 32 separates the two: a binomial of 32 at 0.3 passes 16 with probability about 0.01, one
 * at 0.7 stays at or under it with about the same */
#define ROUNDS_MISSED_MAX (ROUNDS / 2)

static atomic_int rd_hold, rd_in, rd_stop;

static void sleep_ms(long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
}

/* Holds one read-side section open each time it is asked (rd_hold), else stays out of any. */
static void *reader(void *arg)
{
  (void)arg;
  prd_rcu_register_thread();
  while (!atomic_load(&rd_stop)) {
    if (!atomic_load(&rd_hold)) {
      sleep_ms(1);
      continue;
    }
    prd_rcu_read_lock();
    atomic_store(&rd_in, 1);
    sleep_ms(HOLD_MS);
    atomic_store(&rd_in, 0);   /* before the unlock: the test's wait starts at most now */
    prd_rcu_read_unlock();
    atomic_store(&rd_hold, 0);
  }
  prd_rcu_unregister_thread();
  return NULL;
}

static void test_bounded_wait_after_reader_left(void)
{
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, reader, NULL), 0);
  int missed = 0, counted = 0, tried = 0;
  for (; counted < ROUNDS && tried < ROUNDS_TRIED; tried++) {
    atomic_store(&rd_hold, 1);
    while (!atomic_load(&rd_in))
      sched_yield();
    prd_gp_t s = prd_rcu_get_state();
    prd_rcu_request_gp(s);   /* the driver runs it, and waits for the reader */
    while (atomic_load(&rd_in))
      sched_yield();
    while (atomic_load(&rd_hold))   /* the reader has left its section */
      sched_yield();
    /* a round in which a thread of this process was switched out (this one in its wait, or
     * the driver holding gp_lock), or in which the wait overran its bound (a sleep in it
     * woke late: no CPU free), measures the machine, not the driver (other work on a loaded
     * machine, as ctest runs two tests at once): not counted.  The defect this guards made
     * the wait run out on time with every thread running or sleeping of its own accord (the
     * driver slept holding gp_lock): those rounds count */
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    uint64_t t0 = prd__now_ns();
    bool ended = prd__rcu_poll_bounded(s, (uint64_t)WAIT_US * 1000);
    uint64_t took = prd__now_ns() - t0;
    getrusage(RUSAGE_SELF, &r1);
    if (r1.ru_nivcsw == r0.ru_nivcsw && took <= (uint64_t)WAIT_US * 1000 * 3 / 2) {
      counted++;
      missed += !ended;
    }
    prd_rcu_wait_state(s);   /* the next round starts with no grace period open */
  }
  atomic_store(&rd_stop, 1);
  CHECK_EQ(pthread_join(th, NULL), 0);
  printf("# %d of %d counted rounds ran out (%d tried)\n", missed, counted, tried);
  if (counted < ROUNDS / 2) {   /* too loaded a machine to measure: said, not failed */
    printf("# skipped: only %d of %d rounds ran without a preemption\n", counted, tried);
    return;
  }
  CHECK(missed <= ROUNDS_MISSED_MAX);
}

int main(void)
{
  RUN(test_bounded_wait_after_reader_left);
  return prd_test_done();
}
