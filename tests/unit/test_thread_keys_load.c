/* test_thread_keys_load: the library's thread-exit keys are made when it is loaded
 * (src/thread.c section 6).  Guards an outside tester's finding: a program that took every
 * pthread key the process has, after its first allocation and before its first read-side
 * section, then started a reader thread: the built-in RCU's key, made at the first
 * registration, could not be made, and the reader's first section ended the process (with
 * abort_on_error=0 the reader's record outlived its thread; a later synchronize spun for
 * ever).  Here every layer keeps its key: the reader registers and unregisters, a thread gets
 * magazines and a call_rcu queue, and nothing is reported. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "magazine.h"
#include "prd_test.h"

// prd-test-labels: unit no-asan no-tsan no-preload
// (no-asan, no-tsan: the sanitizers' runtimes make keys of their own as they go, and take
// every key the program leaves; no-preload: the preloaded copy's keys are not this copy's)

enum { MAX_KEYS = 4096 };
static pthread_key_t taken[MAX_KEYS];
static int ntaken;
static prd_cache_t *cp;
static _Atomic int cb_ran;

static void cb_count(struct prd_rcu_head *h)
{
  (void)h;
  atomic_fetch_add(&cb_ran, 1);
}

struct seen {
  uint32_t ncc;   /* entries of the thread's CPU-cache record (0: no magazines) */
};

static void *worker(void *arg)
{
  struct seen *s = arg;
  prd_rcu_read_lock();
  prd_rcu_read_unlock();
  void *b[64];
  for (int i = 0; i < 64; i++)
    b[i] = prd_cache_alloc(cp, PRD_SLEEP);
  for (int i = 0; i < 64; i++)
    prd_cache_free(cp, b[i]);
  s->ncc = prd__mag_here()->tc_ncc;
  static struct prd_rcu_head heads[2][4];
  static _Atomic int round;
  int r = atomic_fetch_add(&round, 1) & 1;
  for (int i = 0; i < 4; i++)
    prd_call_rcu(&heads[r][i], cb_count);
  prd_rcu_barrier();
  return NULL;
}

static void test_keys_taken_after_load(void)
{
  prd_option_set("maint_thread", "0");
  cp = prd_cache_create("keyload", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL);
  while (ntaken < MAX_KEYS && pthread_key_create(&taken[ntaken], NULL) == 0)
    ntaken++;
  pthread_key_t k;
  CHECK(pthread_key_create(&k, NULL) != 0);   /* the process has none left */
  uint64_t errors = prd__error_count();
  for (int i = 0; i < 2; i++) {   /* the second thread: after the first's exit destructors */
    struct seen s = { 0 };
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, worker, &s), 0);
    pthread_join(t, NULL);
    CHECK(s.ncc > 0);
  }
  CHECK_EQ(atomic_load(&cb_ran), 8);
  prd_synchronize_rcu();   /* the readers' records left the registry with their threads */
  CHECK_EQ(prd__error_count(), errors);
  for (int i = 0; i < ntaken; i++)
    pthread_key_delete(taken[i]);
  printf("  %d keys taken by the program after the library's\n", ntaken);
}

int main(void)
{
  alarm(60);
  RUN(test_keys_taken_after_load);
  return prd_test_done();
}
