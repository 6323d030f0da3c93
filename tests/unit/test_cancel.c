/* Thread cancellation (src/os.c section 8): no function of the library is a cancellation
 * point.  A thread cancelled while it waits inside the library (an allocation's bounded wait
 * for a grace period, prd_synchronize_rcu, prd_rcu_wait_state, an arena's PRD_VM_SLEEP wait)
 * goes on to the end of the call and is cancelled at its next cancellation point outside,
 * so no lock of the library stays held and the rest of the process goes on.  Each case runs
 * in a child with a deadline: a lock left held by a cancelled thread hangs the next grace
 * period or arena operation.  Each victim records, in a cleanup handler, whether it was
 * inside the library when the cancellation acted. */
#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"

static atomic_int stop_reader, reader_in;
static atomic_int in_lib;          /* the victim is inside a call of the library */
static atomic_int cancelled_in;    /* -1 not cancelled, else in_lib when it was */

static void *long_reader(void *arg)
{
  long ms = (long)arg;
  while (!atomic_load(&stop_reader)) {   /* read-side sections of ms each, back to back */
    prd_rcu_read_lock();
    atomic_store(&reader_in, 1);
    struct timespec ts = { 0, ms * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
      ;
    prd_rcu_read_unlock();
  }
  return NULL;
}

static void on_cancel(void *arg)
{
  (void)arg;
  atomic_store(&cancelled_in, atomic_load(&in_lib));
}

static pthread_t start_reader(long ms)
{
  atomic_store(&stop_reader, 0);
  atomic_store(&reader_in, 0);
  pthread_t r;
  pthread_create(&r, NULL, long_reader, (void *)ms);
  while (!atomic_load(&reader_in))
    usleep(100);
  return r;
}

/* Cancels victim after ms, joins it; 0 when it was cancelled outside the library. */
static int cancel_victim(pthread_t victim, long ms)
{
  usleep((useconds_t)ms * 1000);
  pthread_cancel(victim);
  void *res;
  pthread_join(victim, &res);
  return res == PTHREAD_CANCELED && atomic_load(&cancelled_in) == 0 ? 0 : 1;
}

/* An allocation and a deferred free in a loop whose only cancellation point is the
 * program's own pthread_testcancel: the allocations' bounded waits (a reader holds every
 * grace period for 5 ms) sleep inside the library. */
static void *alloc_victim(void *arg)
{
  (void)arg;
  pthread_cleanup_push(on_cancel, NULL);
  for (unsigned i = 0;; i++) {
    atomic_store(&in_lib, 1);
    void *p = prd_malloc(256);
    prd_free_deferred(p);
    atomic_store(&in_lib, 0);
    if (i % 64 == 0)
      pthread_testcancel();
  }
  pthread_cleanup_pop(0);
  return NULL;
}

static int run_alloc(void)
{
  atomic_store(&cancelled_in, -1);
  pthread_t r = start_reader(5);
  pthread_t w;
  pthread_create(&w, NULL, alloc_victim, NULL);
  int bad = cancel_victim(w, 300);
  atomic_store(&stop_reader, 1);
  pthread_join(r, NULL);
  prd_synchronize_rcu();   /* hangs if the victim left gp_lock held */
  void *p = prd_malloc(256);
  prd_free_deferred(p);
  prd_rcu_barrier();
  return bad;
}

/* A thread blocked in a grace-period wait (mode 0: prd_synchronize_rcu, 1:
 * prd_rcu_wait_state) while a reader holds the grace period for 200 ms. */
static void *gp_victim(void *arg)
{
  long mode = (long)arg;
  pthread_cleanup_push(on_cancel, NULL);
  atomic_store(&in_lib, 1);
  if (mode == 0)
    prd_synchronize_rcu();
  else
    prd_rcu_wait_state(prd_rcu_get_state());
  atomic_store(&in_lib, 0);
  pthread_testcancel();
  pthread_cleanup_pop(0);
  return NULL;
}

static int run_gp(long mode)
{
  atomic_store(&cancelled_in, -1);
  pthread_t r = start_reader(200);
  pthread_t v;
  pthread_create(&v, NULL, gp_victim, (void *)mode);
  usleep(50 * 1000);   /* the victim waits for the reader */
  atomic_store(&stop_reader, 1);   /* the reader ends its section within 200 ms */
  int bad = cancel_victim(v, 0);
  pthread_join(r, NULL);
  prd_synchronize_rcu();   /* hangs if the victim left gp_lock or drv_lock held */
  prd_rcu_wait_state(prd_rcu_get_state());
  return bad;
}

static int run_synchronize(void)
{
  return run_gp(0);
}

static int run_wait_state(void)
{
  return run_gp(1);
}

/* A PRD_VM_SLEEP allocation waits on a full arena without a source until a free. */
static prd_vmem_t *full_arena;

static void *vmem_victim(void *arg)
{
  (void)arg;
  pthread_cleanup_push(on_cancel, NULL);
  atomic_store(&in_lib, 1);
  void *p = prd_vmem_alloc(full_arena, 4096, PRD_VM_SLEEP);
  atomic_store(&in_lib, 0);
  (void)p;
  pthread_testcancel();
  pthread_cleanup_pop(0);
  return NULL;
}

static int run_vmem(void)
{
  atomic_store(&cancelled_in, -1);
  full_arena = prd_vmem_create("full", (void *)0x10000000, 4 * 4096, 4096, NULL, NULL, NULL, 0, 0);
  void *seg[4];
  for (int i = 0; i < 4; i++)
    seg[i] = prd_vmem_alloc(full_arena, 4096, PRD_VM_NOSLEEP);
  pthread_t v;
  pthread_create(&v, NULL, vmem_victim, NULL);
  usleep(50 * 1000);   /* the victim waits on the arena */
  pthread_cancel(v);
  usleep(50 * 1000);
  prd_vmem_free(full_arena, seg[0], 4096);   /* hangs if the victim left vm_lock held */
  void *res;
  pthread_join(v, &res);
  int bad = res == PTHREAD_CANCELED && atomic_load(&cancelled_in) == 0 ? 0 : 1;
  for (int i = 1; i < 4; i++)
    prd_vmem_free(full_arena, seg[i], 4096);
  return bad;
}

static void test_alloc_wait(void)
{
  CHECK_EQ(prd_test_bounded(run_alloc, "cancel in an allocation's wait", 30), 0);
}

static void test_synchronize(void)
{
  CHECK_EQ(prd_test_bounded(run_synchronize, "cancel in prd_synchronize_rcu", 30), 0);
}

static void test_wait_state(void)
{
  CHECK_EQ(prd_test_bounded(run_wait_state, "cancel in prd_rcu_wait_state", 30), 0);
}

static void test_vmem_sleep(void)
{
  CHECK_EQ(prd_test_bounded(run_vmem, "cancel in a PRD_VM_SLEEP wait", 30), 0);
}

int main(void)
{
  RUN(test_alloc_wait);
  RUN(test_synchronize);
  RUN(test_wait_state);
  RUN(test_vmem_sleep);
  return prd_test_done();
}
