/* test_exit_rounds: the program's pthread key destructors that use the library after the
 * library's own destructors ran (src/rcu.c section 2, src/call_rcu.c section 6).  glibc runs
 * destructors in rounds (at most PTHREAD_DESTRUCTOR_ITERATIONS), each in key order, and a
 * destructor that sets its value again runs in the next round too.  The magazine and
 * call_rcu keys are made at load, before the program's; the reader records' key at the
 * first registration.  Guards: a destructor that called prd_call_rcu in glibc's last round,
 * after the library's, registered a queue whose exit destructor never ran: the queue, in the
 * dead thread's TLS, stayed in the registry, the next thread's start zeroed it, and the
 * call_rcu worker waited for ever for a link (prd_rcu_barrier hung).  A reader record
 * registered so would stay in the registry the same way: a destructor on a key made before
 * the reader key (key_before) reads in every round, the last included, as before the keys
 * were made at load; one on a key made after it (key_after) may read until the round before
 * the last, and is refused, loudly, in the last. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prd_test.h"
#include "prudence.h"
#include "prudence_rcu.h"

// prd-test-labels: unit no-tsan
// (no-tsan: TSan's runtime crashes on any malloc in a thread's late destructor rounds, this
// library or not: its thread state is gone by then)

static pthread_key_t key_before, key_after;
static pthread_key_t *_Atomic key = &key_before;   /* the key the next threads use */
static _Atomic int what;   /* 0: prd_call_rcu in each round; 1: a read-side section */
static _Atomic int last_round;   /* the last round that uses the library (1..4) */
static _Atomic int queued, ran;

static void cb(struct prd_rcu_head *h)
{
  atomic_fetch_add(&ran, 1);
  free(h);
}

static void use_library(void)
{
  if (atomic_load(&what) == 0) {
    struct prd_rcu_head *h = malloc(sizeof(*h));
    if (h == NULL)
      return;
    atomic_fetch_add(&queued, 1);
    prd_call_rcu(h, cb);
  } else {
    prd_rcu_read_lock();
    prd_rcu_read_unlock();
  }
}

/* The program's destructor: sets its value again for rounds 2..4, uses the library in
 * rounds up to last_round. */
static void dtor(void *v)
{
  int round = (int)(intptr_t)v;
  if (round <= atomic_load(&last_round))
    use_library();
  if (round < 4)
    pthread_setspecific(*atomic_load(&key), (void *)(intptr_t)(round + 1));
}

static void *worker(void *arg)
{
  (void)arg;
  pthread_setspecific(*atomic_load(&key), (void *)(intptr_t)1);
  use_library();   /* the library's destructors are armed first */
  return NULL;
}

static void run_threads(int n)
{
  for (int i = 0; i < n; i++) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, worker, NULL), 0);
    pthread_join(t, NULL);
  }
}

static void test_call_rcu_every_round(void)
{
  atomic_store(&key, &key_after);
  atomic_store(&what, 0);
  atomic_store(&last_round, 4);
  run_threads(100);
  prd_rcu_barrier();   /* hung (main's alarm ends the test then) */
  CHECK_EQ(atomic_load(&ran), atomic_load(&queued));
  CHECK_EQ(atomic_load(&queued), 500);
}

/* Sections in every round on a key made before the reader key (a lower index), and in rounds
 * 1..3 on one made after it (a higher index): each registration is undone in the next round (or in the same round, after it);
 * new threads (which may get a dead one's TLS) and grace periods go on. */
static void test_reader_rounds(void)
{
  atomic_store(&what, 1);
  atomic_store(&key, &key_before);
  atomic_store(&last_round, 4);
  run_threads(100);
  prd_synchronize_rcu();
  atomic_store(&key, &key_after);
  atomic_store(&last_round, 3);
  run_threads(100);
  prd_synchronize_rcu();
}

/* A section in the last round, after the library's destructor: the process ends with a
 * report. */
static void reader_last_round_child(void *arg)
{
  (void)arg;
  atomic_store(&what, 1);
  atomic_store(&key, &key_after);
  atomic_store(&last_round, 4);
  run_threads(1);
  _exit(4);   /* not reached */
}

static void test_reader_last_round_refused(void)
{
  char out[4096];
  int st = prd_test_child(reader_last_round_child, NULL, out, sizeof(out));
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK_STR_CONTAINS(out, "rcu: a read-side section in a pthread key destructor's last round");
}

int main(void)
{
  alarm(60);
  CHECK_EQ(pthread_key_create(&key_before, dtor), 0);   /* before the reader key */
  prd_rcu_read_lock();   /* this thread's registration makes the reader key */
  prd_rcu_read_unlock();
  CHECK_EQ(pthread_key_create(&key_after, dtor), 0);    /* after every library key */
  RUN(test_call_rcu_every_round);
  RUN(test_reader_rounds);
  RUN(test_reader_last_round_refused);
  return prd_test_done();
}
