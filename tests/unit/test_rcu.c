/* test_rcu: unit tests of the grace-period layer (src/rcu.c) with the built-in source: read-side
 * nesting, get_state/poll semantics, request/wait, synchronize against readers, call_rcu order
 * and rcu_barrier, misuse reports (in child processes), thread exit, fork. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"
#include "race.h"

static unsigned long nesting(void)
{
  return prd__rcu_reader.rr_ctr & PRD__RCU_NEST_MASK;
}

static void test_read_lock_nesting(void)
{
  CHECK_EQ(nesting(), 0);
  prd_rcu_read_lock();
  CHECK_EQ(nesting(), 1);
  CHECK_EQ(prd__rcu_reader.rr_fast, 1); /* registered on first use */
  prd_rcu_read_lock();
  prd_rcu_read_lock();
  CHECK_EQ(nesting(), 3);
  prd_rcu_read_unlock();
  CHECK_EQ(nesting(), 2);
  prd_rcu_read_unlock();
  prd_rcu_read_unlock();
  CHECK_EQ(nesting(), 0);
  /* the snapshot is the global phase of the outermost lock */
  prd_rcu_read_lock();
  CHECK_EQ(prd__rcu_reader.rr_ctr & PRD__RCU_PHASE, prd__rcu_gp_ctr & PRD__RCU_PHASE);
  prd_rcu_read_unlock();
}

static void test_get_state_poll(void)
{
  prd_gp_t s1 = prd_rcu_get_state();
  CHECK_EQ(s1 & 1, 0);
  CHECK(prd_rcu_poll_state(0));
  CHECK(prd_rcu_poll_state(s1 - 2)); /* the state before: the last completed one */
  CHECK(!prd_rcu_poll_state(s1 + 2));
  prd_synchronize_rcu();
  CHECK(prd_rcu_poll_state(s1));
  prd_gp_t s2 = prd_rcu_get_state();
  CHECK(s2 >= s1 + 2);
  CHECK(!prd_rcu_poll_state(s2 + 2));
  prd_synchronize_rcu();
  CHECK(prd_rcu_poll_state(s2));
  CHECK(prd_rcu_poll_state(s1)); /* stays ended */
}

static void test_request_wait(void)
{
  prd_gp_t s = prd_rcu_get_state();
  prd_rcu_request_gp(s);
  prd_rcu_request_gp(s); /* twice: the fast path */
  prd_rcu_wait_state(s);
  CHECK(prd_rcu_poll_state(s));
  /* a request alone is enough: the driver ends it without a waiter (poll until it does) */
  s = prd_rcu_get_state();
  prd_rcu_request_gp(s);
  while (!prd_rcu_poll_state(s))
    sched_yield();
  CHECK(prd_rcu_poll_state(s));
  /* waiting on an ended state returns at once */
  prd_rcu_wait_state(s);
  prd_rcu_wait_state(0);
}

/* Pacing: with a huge minimum interval or gather delay only an expedited request or a blocked
 * waiter gets a grace period soon (if pacing ignored them this test would hang until ctest's
 * timeout). */
static void test_pacing_expedited(void)
{
  long old_interval = prd_option_get("rcu_gp_interval_us");
  prd_option_set("rcu_gp_interval_us", "1000000000"); /* 1000 s between driven grace periods */
  prd_gp_t s = prd_rcu_get_state();
  prd_rcu_request_gp(s);         /* the driver paces on this one */
  prd__rcu_request_expedited(s); /* ends the pacing */
  while (!prd_rcu_poll_state(s))
    sched_yield();
  CHECK(prd_rcu_poll_state(s));
  s = prd_rcu_get_state();
  prd_rcu_request_gp(s);
  prd_rcu_wait_state(s); /* a blocked waiter ends it too */
  CHECK(prd_rcu_poll_state(s));
  prd_option_set("rcu_gp_interval_us", "0");
  prd_option_set("rcu_gp_delay_us", "1000000000");
  s = prd_rcu_get_state();
  prd_rcu_wait_state(s);
  CHECK(prd_rcu_poll_state(s));
  prd_option_set("rcu_gp_delay_us", "0");
  prd_option_set("rcu_expedited", "1"); /* no pacing, the writer never sleeps */
  s = prd_rcu_get_state();
  prd_rcu_wait_state(s);
  prd_synchronize_rcu();
  CHECK(prd_rcu_poll_state(s));
  prd_option_set("rcu_expedited", "0");
  char v[32];
  snprintf(v, sizeof(v), "%ld", old_interval);
  prd_option_set("rcu_gp_interval_us", v);
}

/* A reader inside its section; the grace period must not end before it leaves. */
static atomic_int rd_phase;      /* 1: inside; 2: main has started the synchronize */
static atomic_int rd_left;       /* set just before the reader's (outermost) unlock */
static atomic_int sync_saw_left; /* what the synchronizer saw when it returned */

/* The reader, nested *arg deep (NULL: 1): the grace period must stay open until its
 * outermost unlock. */
static void *reader_holding(void *arg)
{
  int depth = arg != NULL ? *(int *)arg : 1;
  for (int i = 0; i < depth; i++)
    prd_rcu_read_lock();
  atomic_store(&rd_phase, 1);
  while (atomic_load(&rd_phase) != 2)
    sched_yield();
  for (int i = 1; i < depth; i++)
    prd_rcu_read_unlock(); /* still inside */
  for (int i = 0; i < 2000; i++) /* give a broken grace period every chance to end early */
    sched_yield();
  atomic_store(&rd_left, 1);
  prd_rcu_read_unlock();
  return NULL;
}

/* Starts the reader (nested *depth deep) and returns once it is inside its section. */
static pthread_t reader_inside(int *depth)
{
  pthread_t r;
  atomic_store(&rd_phase, 0);
  atomic_store(&rd_left, 0);
  atomic_store(&sync_saw_left, 0);
  pthread_create(&r, NULL, reader_holding, depth);
  while (atomic_load(&rd_phase) != 1)
    sched_yield();
  return r;
}

/* The waiter: prd_synchronize_rcu(), or prd_rcu_wait_state(*arg) when arg is not NULL. */
static void *waiter(void *arg)
{
  atomic_store(&rd_phase, 2);
  if (arg != NULL)
    prd_rcu_wait_state(*(prd_gp_t *)arg);
  else
    prd_synchronize_rcu();
  atomic_store(&sync_saw_left, atomic_load(&rd_left) + 1);
  return NULL;
}

/* A reader nested `depth` deep and a waiter started once it is inside (a synchronize, or,
 * when s is not NULL, a wait for the state *s taken then): the wait must not return before
 * the reader has left. */
static void check_wait_outlasts_reader(int depth, prd_gp_t *s)
{
  pthread_t r = reader_inside(&depth), w;
  if (s != NULL)
    *s = prd_rcu_get_state();
  pthread_create(&w, NULL, waiter, s);
  pthread_join(w, NULL);
  pthread_join(r, NULL);
  CHECK_EQ(atomic_load(&sync_saw_left), 2);
}

static void test_synchronize_waits_for_reader(void)
{
  check_wait_outlasts_reader(1, NULL);
  /* the same through the state interface and the driver */
  prd_gp_t s = 0;
  check_wait_outlasts_reader(1, &s);
  CHECK(prd_rcu_poll_state(s));
}

/* A nested reader keeps the grace period open until its outermost unlock. */
static void test_nested_reader_blocks(void)
{
  check_wait_outlasts_reader(2, NULL);
}

/* ---- call_rcu ------------------------------------------------------------------------- */
#define NCB 1000
struct cb_item {
  struct prd_rcu_head ci_head;
  int ci_index;
  prd_gp_t ci_state; /* state when queued: must have ended when invoked */
};
static struct cb_item cb_items[NCB];
static int cb_order[NCB];
static atomic_int cb_count;
static atomic_int cb_early;

static void cb_record(struct prd_rcu_head *h)
{
  struct cb_item *it = (struct cb_item *)h;
  if (!prd_rcu_poll_state(it->ci_state))
    atomic_fetch_add(&cb_early, 1);
  cb_order[atomic_fetch_add(&cb_count, 1)] = it->ci_index;
}

static void test_call_rcu_order(void)
{
  atomic_store(&cb_count, 0);
  atomic_store(&cb_early, 0);
  uint64_t before = prd__call_rcu_invoked();
  for (int i = 0; i < NCB; i++) {
    cb_items[i].ci_index = i;
    cb_items[i].ci_state = prd_rcu_get_state();
    prd_call_rcu(&cb_items[i].ci_head, cb_record);
  }
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&cb_count), NCB);
  CHECK_EQ(atomic_load(&cb_early), 0);
  CHECK_EQ(prd__call_rcu_invoked() - before, NCB);
  int in_order = 1;
  for (int i = 0; i < NCB; i++)
    if (cb_order[i] != i)
      in_order = 0;
  CHECK(in_order);
}

/* A callback must not run while a reader that began before call_rcu is still inside. */
static atomic_int cb_ran;
static void cb_flag(struct prd_rcu_head *h)
{
  (void)h;
  atomic_store(&cb_ran, atomic_load(&rd_left) + 1);
}

static void test_call_rcu_waits_for_reader(void)
{
  static struct prd_rcu_head h;
  int depth = 1;
  atomic_store(&cb_ran, 0);
  pthread_t r = reader_inside(&depth);
  prd_call_rcu(&h, cb_flag);
  atomic_store(&rd_phase, 2);
  pthread_join(r, NULL);
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&cb_ran), 2);
}

static void test_rcu_barrier_empty(void)
{
  prd_rcu_barrier();
  prd_rcu_barrier();
  CHECK(1 == 1 && prd__call_rcu_invoked() >= NCB);
}

/* Callbacks queued by a thread that exits before they run: the orphans still run. */
static struct prd_rcu_head exit_heads[64];
static atomic_int exit_ran;
static void cb_exit(struct prd_rcu_head *h)
{
  (void)h;
  atomic_fetch_add(&exit_ran, 1);
}
static void *queue_and_exit(void *arg)
{
  (void)arg;
  for (int i = 0; i < 64; i++)
    prd_call_rcu(&exit_heads[i], cb_exit);
  return NULL;
}

static void test_call_rcu_thread_exit(void)
{
  pthread_t t;
  atomic_store(&exit_ran, 0);
  pthread_create(&t, NULL, queue_and_exit, NULL);
  pthread_join(t, NULL);
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&exit_ran), 64);
}

/* A callback that queues another: the second runs after a later grace period. */
static struct prd_rcu_head chain_a, chain_b;
static atomic_int chain_done;
static prd_gp_t chain_state;
static void cb_chain_b(struct prd_rcu_head *h)
{
  (void)h;
  atomic_store(&chain_done, prd_rcu_poll_state(chain_state) ? 1 : -1);
}
static void cb_chain_a(struct prd_rcu_head *h)
{
  (void)h;
  chain_state = prd_rcu_get_state();
  prd_call_rcu(&chain_b, cb_chain_b);
}

static void test_call_rcu_from_callback(void)
{
  atomic_store(&chain_done, 0);
  prd_call_rcu(&chain_a, cb_chain_a);
  prd_rcu_barrier(); /* runs a; b may still be queued */
  prd_rcu_barrier(); /* runs b */
  CHECK_EQ(atomic_load(&chain_done), 1);
}

/* ---- misuse, reported ------------------------------------------------------------------ */
static void child_sync_in_section(void *arg)
{
  (void)arg;
  prd_rcu_read_lock();
  prd_synchronize_rcu(); /* abort_on_error is on in the test builds' Debug default */
  prd_rcu_read_unlock();
}

static void test_synchronize_in_read_section(void)
{
  char buf[4096];
  prd_option_set("abort_on_error", "1");
  int st = prd_test_child(child_sync_in_section, NULL, buf, sizeof(buf));
  CHECK(WIFSIGNALED(st));
  CHECK_STR_CONTAINS(buf, "prd_synchronize_rcu called inside a read-side critical section");
  /* in-process with abort_on_error=0: reported, and it returns instead of deadlocking */
  prd_option_set("abort_on_error", "0");
  uint64_t errs = prd__error_count();
  prd_rcu_read_lock();
  prd_synchronize_rcu();
  prd_rcu_wait_state(prd_rcu_get_state());
  prd_rcu_barrier();
  prd_rcu_quiescent_state();
  prd_rcu_read_unlock();
  CHECK_EQ(prd__error_count() - errs, 4);
  prd_option_set("abort_on_error", "1");
}

static void *exit_inside(void *arg)
{
  (void)arg;
  prd_rcu_read_lock();
  prd_rcu_read_lock();
  return NULL;
}

static void test_exit_in_read_section(void)
{
  pthread_t t;
  prd_option_set("abort_on_error", "0");
  uint64_t errs = prd__error_count();
  pthread_create(&t, NULL, exit_inside, NULL);
  pthread_join(t, NULL);
  CHECK_EQ(prd__error_count() - errs, 1);
  prd_option_set("abort_on_error", "1");
  prd_synchronize_rcu(); /* does not stall on the dead reader */
}

static void child_exit_inside(void *arg)
{
  (void)arg;
  pthread_t t;
  pthread_create(&t, NULL, exit_inside, NULL);
  pthread_join(t, NULL);
}

static void test_exit_in_read_section_child(void)
{
#if defined(PRD_TSAN) || defined(PRD_ASAN)
  /* sanitizers cannot start threads in the child of a multi-threaded fork (see test_fork);
   * the in-process test above covers the report */
  return;
#endif
  char buf[4096];
  int st = prd_test_child(child_exit_inside, NULL, buf, sizeof(buf));
  CHECK(WIFSIGNALED(st));
  CHECK_STR_CONTAINS(buf, "thread exited inside a read-side critical section (nesting 2)");
}

static void test_bad_calls(void)
{
  prd_option_set("abort_on_error", "0");
  uint64_t errs = prd__error_count();
  prd_rcu_read_unlock(); /* unbalanced */
  CHECK_EQ(nesting(), 0);
  prd_call_rcu(NULL, cb_exit);
  static struct prd_rcu_head h;
  prd_call_rcu(&h, NULL);
  /* offline, then a read lock: reported, and the lock still works */
  prd_rcu_thread_offline();
  prd_rcu_read_lock();
  CHECK_EQ(nesting(), 1);
  prd_rcu_thread_offline(); /* inside a section: reported, ignored */
  prd_rcu_unregister_thread(); /* inside a section: reported, ignored */
  prd_rcu_read_unlock();
  CHECK_EQ(prd__error_count() - errs, 6);
  prd_rcu_thread_offline();
  prd_rcu_thread_online();
  prd_rcu_read_lock(); /* online again: no report */
  prd_rcu_read_unlock();
  prd_rcu_quiescent_state(); /* outside a section: fine */
  prd_rcu_unregister_thread();
  CHECK_EQ(prd__rcu_reader.rr_fast, 0);
  prd_rcu_read_lock(); /* registers again */
  CHECK_EQ(prd__rcu_reader.rr_fast, 1);
  prd_rcu_read_unlock();
  prd_rcu_register_thread();
  CHECK_EQ(prd__error_count() - errs, 6);
  prd_option_set("abort_on_error", "1");
}

static void rcu_src_sync(void) {}
static const struct prd_rcu_source other_src = { .rs_name = "other", .rs_synchronize = rcu_src_sync };
static const struct prd_rcu_source nameless = { .rs_name = NULL, .rs_synchronize = rcu_src_sync };
static const struct prd_rcu_source dup_builtin = { .rs_name = "builtin", .rs_synchronize = rcu_src_sync };

static void test_sources(void)
{
  prd_option_set("abort_on_error", "0");
  CHECK(prd_rcu_get_source() == &prd_rcu_builtin);
  errno = 0;
  uint64_t before = prd__error_count();
  CHECK_EQ(prd_rcu_set_source(&other_src), -1); /* in use already: said, too */
  CHECK_EQ(errno, EBUSY);
  CHECK_EQ(prd__error_count(), before + 1);
  CHECK_EQ(prd_rcu_set_source(&prd_rcu_builtin), 0); /* the one in use: fine */
  errno = 0;
  CHECK_EQ(prd_rcu_set_source(NULL), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(prd_rcu_register_source(&nameless), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(prd_rcu_register_source(&dup_builtin), -1);
  CHECK_EQ(errno, EEXIST);
  CHECK_EQ(prd_rcu_register_source(&other_src), 0);
  CHECK_EQ(prd_rcu_register_source(&other_src), 0); /* again: the same source, fine */
  CHECK(prd_rcu_get_source() == &prd_rcu_builtin);
  /* the source is fixed already: the option is refused, and still names the source in use
   * (test_options_doc checks names outside the list before the source is chosen) */
  errno = 0;
  CHECK_EQ(prd_option_set("rcu", "nonesuch"), -1);
  CHECK_EQ(errno, EBUSY);
  CHECK_EQ(prd_option_get("rcu"), 0);
  CHECK(prd_rcu_get_source() == &prd_rcu_builtin);
  prd_option_set("abort_on_error", "1");
}

/* ---- fork while other threads use RCU -------------------------------------------------- */
static atomic_int fork_stop;
/* No malloc in these threads: a sanitizer's allocator lock held by a thread at fork time
 * stays locked in the child (ASan's is not fork-safe), which is not what this tests. */
struct fork_item {
  struct prd_rcu_head fi_head;
  atomic_int fi_busy;
};
static struct fork_item fork_items[3][64];
static void cb_fork_item(struct prd_rcu_head *h)
{
  atomic_store(&((struct fork_item *)h)->fi_busy, 0);
}
static void *fork_busy(void *arg)
{
  int id = (int)(intptr_t)arg;
  for (unsigned i = 0; !atomic_load(&fork_stop); i++) {
    prd_rcu_read_lock();
    prd_rcu_read_unlock();
    struct fork_item *it = &fork_items[id][i % 64];
    if (atomic_load(&it->fi_busy) == 0) {
      atomic_store(&it->fi_busy, 1);
      prd_call_rcu(&it->fi_head, cb_fork_item);
    }
    if (id == 0)
      prd_synchronize_rcu();
    else
      prd_rcu_request_gp(prd_rcu_get_state());
  }
  return NULL;
}

static void test_fork(void)
{
  pthread_t th[3];
  atomic_store(&fork_stop, 0);
  for (int i = 0; i < 3; i++)
    pthread_create(&th[i], NULL, fork_busy, (void *)(intptr_t)i);
  int forks = 0, ok = 0;
#ifdef PRD_TSAN
  int nforks = 3;
#else
  int nforks = 10;
#endif
  for (int i = 0; i < nforks; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      /* the child: the driver and worker start again on demand */
      prd_rcu_read_lock();
      prd_rcu_read_unlock();
      prd_synchronize_rcu();
      prd_gp_t s = prd_rcu_get_state();
#if defined(PRD_TSAN) || defined(PRD_ASAN)
      /* Sanitizers cannot start threads in the child of a multi-threaded fork (TSan refuses;
       * gcc 12's ASan does not lock its allocator around fork, so a new thread's start-up can
       * block on a lock another parent thread held): no driver, no worker here;
       * prd_synchronize_rcu runs the grace period in this thread.  The Debug and clang builds
       * run the full child. */
      prd_synchronize_rcu();
      _exit(prd_rcu_poll_state(s) ? 0 : 3);
#else
      static struct cb_item it;
      prd_rcu_wait_state(s);
      atomic_store(&cb_count, 0);
      it.ci_state = prd_rcu_get_state();
      prd_call_rcu(&it.ci_head, cb_record);
      prd_rcu_barrier();
      _exit(prd_rcu_poll_state(s) && atomic_load(&cb_count) == 1 ? 0 : 3);
#endif
    }
    if (pid > 0) {
      forks++;
      int st;
      waitpid(pid, &st, 0);
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        ok++;
    }
  }
  atomic_store(&fork_stop, 1);
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  prd_rcu_barrier();
  CHECK_EQ(forks, nforks);
  CHECK_EQ(ok, nforks);
}

/* ---- fork while the worker waits for a batch's grace period ------------------------------ */
/* The worker splices a queued callback and waits for its grace period, which a reader holds
 * open; a fork then.  The batch was on the worker's stack only, so the child once lost it: its
 * prd_rcu_barrier returned with the callback never run (and an oblivious cache's buffer
 * leaked).  The child must run it, after a grace period of its own. */
static atomic_int inflight_ran, inflight_in, inflight_stop;
static struct prd_rcu_head inflight_head;
static void cb_inflight(struct prd_rcu_head *h)
{
  (void)h;
  atomic_fetch_add(&inflight_ran, 1);
}

static void *inflight_reader(void *arg)
{
  (void)arg;
  prd_rcu_read_lock();
  atomic_store(&inflight_in, 1);
  while (!atomic_load(&inflight_stop))
    usleep(1000);
  prd_rcu_read_unlock();
  return NULL;
}

static void test_call_rcu_fork_in_flight(void)
{
#if defined(PRD_TSAN) || defined(PRD_ASAN)
  return;   /* the child needs a worker thread (see test_fork) */
#endif
  pthread_t r;
  atomic_store(&inflight_stop, 0);
  CHECK_EQ(pthread_create(&r, NULL, inflight_reader, NULL), 0);
  while (!atomic_load(&inflight_in))
    usleep(1000);
  prd_call_rcu(&inflight_head, cb_inflight);
  usleep(200000);   /* the worker has spliced it and waits for the reader */
  CHECK_EQ(atomic_load(&inflight_ran), 0);
  pid_t pid = fork();
  if (pid == 0) {
    prd_rcu_barrier();   /* every callback queued before it has run, in this process too */
    _exit(atomic_load(&inflight_ran) == 1 ? 0 : 3);
  }
  CHECK(pid > 0);
  int st = 0;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  atomic_store(&inflight_stop, 1);
  pthread_join(r, NULL);
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&inflight_ran), 1);
}

/* ---- fork while a callback waits for a lock the forking thread holds -------------------- */
/* A callback of a batch being invoked takes a mutex that the forking thread holds.  The
 * defect this guards: fork's prepare waited for the batch to end, and the batch waited for
 * the fork: a deadlock, where liburcu's fork does not wait for its call_rcu threads.  The
 * wait is bounded now; the child drops the batch (it cannot tell which callbacks ran: the
 * blocked one must not run there again) and its barrier returns; the parent runs every
 * callback once.  The second callback may be in the batch (dropped in the child) or queued
 * after it (run by the child's barrier): either is right. */
static pthread_mutex_t locked_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int locked_in, locked_ran[2];
static struct prd_rcu_head locked_heads[2];
static void cb_locked(struct prd_rcu_head *h)
{
  if (h == &locked_heads[0]) {
    atomic_store(&locked_in, 1);
    pthread_mutex_lock(&locked_mu);
    pthread_mutex_unlock(&locked_mu);
  }
  atomic_fetch_add(&locked_ran[h == &locked_heads[1]], 1);
}

static void test_call_rcu_fork_callback_blocked(void)
{
  pthread_mutex_lock(&locked_mu);
  prd_call_rcu(&locked_heads[0], cb_locked);
  prd_call_rcu(&locked_heads[1], cb_locked);
  while (!atomic_load(&locked_in))
    usleep(1000);
  alarm(30);   /* the old prepare hung here */
  uint64_t t0 = prd__now_ns();
  pid_t pid = fork();
  if (pid == 0) {
#if !defined(PRD_TSAN) && !defined(PRD_ASAN)
    prd_rcu_barrier();   /* the dropped batch is not waited for (the child needs a worker) */
#endif
    _exit(atomic_load(&locked_ran[0]) == 0 && atomic_load(&locked_ran[1]) <= 1 ? 0 : 3);
  }
  uint64_t fork_ms = (prd__now_ns() - t0) / 1000000;
  CHECK(pid > 0);
  int st = 0;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  alarm(0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(fork_ms < 5000);
  pthread_mutex_unlock(&locked_mu);
  prd_rcu_barrier();
  CHECK_EQ(atomic_load(&locked_ran[0]), 1);
  CHECK_EQ(atomic_load(&locked_ran[1]), 1);
}

/* ---- fork while a producer is between its exchange and its link --------------------------- */
/* prd_call_rcu exchanges its queue's tail, then links the old tail to the node.  A fork between
 * the two leaves the link unstored in the child for ever: in a queue the worker had spliced
 * into its batch (waiting for a grace period), the child's worker waited for it in next_wait
 * and its prd_rcu_barrier never returned; in a queue not spliced, the child dropped the node.
 * Producers here do nothing but call_rcu, with the window widened (race_delay, hooks builds),
 * while this thread forks.  Each child's barrier must return (SIGALRM ends one that hangs),
 * no callback may run twice, and every item queued before the fork must have run, but the
 * ones a producer was queueing at the fork (not queued yet, or cut after its exchange: those
 * must run too, and the parent counts the children where one did). */
enum { CUT_ITEMS = 64, CUT_PRODUCERS = 2 };
struct cut_item {
  struct prd_rcu_head ci_head;
  atomic_int ci_queued;
};
static struct cut_item cut_items[CUT_PRODUCERS][CUT_ITEMS];
static struct cut_item *_Atomic cut_cur[CUT_PRODUCERS];
static atomic_int cut_stop, cut_twice;

static void cb_cut(struct prd_rcu_head *h)
{
  if (atomic_exchange(&((struct cut_item *)h)->ci_queued, 0) != 1)
    atomic_fetch_add(&cut_twice, 1);
}

static void *cut_producer(void *arg)
{
  int id = (int)(intptr_t)arg;
  for (unsigned i = 0; !atomic_load_explicit(&cut_stop, memory_order_relaxed); i++) {
    struct cut_item *it = &cut_items[id][i % CUT_ITEMS];
    if (atomic_load(&it->ci_queued) != 0) {
      sched_yield();
      continue;
    }
    atomic_store(&cut_cur[id], it);
    atomic_store(&it->ci_queued, 1);
    prd_call_rcu(&it->ci_head, cb_cut);
    atomic_store(&cut_cur[id], NULL);
  }
  return NULL;
}

/* The child: 0 when every item queued before the fork ran once and no cut one did, 1 when a
 * cut one ran too, 3 when one ran twice, 4 when one was lost. */
static int cut_child(void)
{
  alarm(20);
  prd_rcu_barrier();
  if (atomic_load(&cut_twice) != 0)
    return 3;
  int cut_ran = 0;
  for (int p = 0; p < CUT_PRODUCERS; p++)
    for (int i = 0; i < CUT_ITEMS; i++) {
      struct cut_item *it = &cut_items[p][i];
      if (it == atomic_load(&cut_cur[p]))
        cut_ran |= atomic_load(&it->ci_queued) == 0;
      else if (atomic_load(&it->ci_queued) != 0)
        return 4;
    }
  return cut_ran;
}

static void test_call_rcu_fork_cut_enqueue(void)
{
#if defined(PRD_TSAN) || defined(PRD_ASAN)
  return;   /* the child needs a worker thread (see test_fork) */
#endif
  (void)prd_option_set("race_delay", "1024");   /* absent from Release: no widening there */
  pthread_t th[CUT_PRODUCERS];
  atomic_store(&cut_stop, 0);
  for (int i = 0; i < CUT_PRODUCERS; i++)
    CHECK_EQ(pthread_create(&th[i], NULL, cut_producer, (void *)(intptr_t)i), 0);
  int ok = 0, cut_ran = 0, nforks = 30;
  for (int i = 0; i < nforks; i++) {
    usleep(2000);
    pid_t pid = fork();
    if (pid == 0)
      _exit(cut_child());
    CHECK(pid > 0);
    int st = 0;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) <= 1) {
      ok++;
      cut_ran += WEXITSTATUS(st);
    } else {
      fprintf(stderr, "test_call_rcu_fork_cut_enqueue: child %s %d\n",
              WIFEXITED(st) ? "exited" : "killed by signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
  }
  atomic_store(&cut_stop, 1);
  for (int i = 0; i < CUT_PRODUCERS; i++)
    pthread_join(th[i], NULL);
  (void)prd_option_set("race_delay", "0");
  prd_rcu_barrier();
  CHECK_EQ(ok, nforks);
  CHECK_EQ(atomic_load(&cut_twice), 0);
  printf("  children where a cut enqueue ran: %d of %d\n", cut_ran, nforks);
#ifdef PRD_RACE_HOOKS
  CHECK(cut_ran > 0);   /* the widened window: most forks land in it */
#endif
}

int main(void)
{
  RUN(test_read_lock_nesting);
  RUN(test_get_state_poll);
  RUN(test_request_wait);
  RUN(test_pacing_expedited);
  RUN(test_synchronize_waits_for_reader);
  RUN(test_nested_reader_blocks);
  RUN(test_call_rcu_order);
  RUN(test_call_rcu_waits_for_reader);
  RUN(test_rcu_barrier_empty);
  RUN(test_call_rcu_thread_exit);
  RUN(test_call_rcu_from_callback);
  RUN(test_synchronize_in_read_section);
  RUN(test_exit_in_read_section);
  RUN(test_exit_in_read_section_child);
  RUN(test_bad_calls);
  RUN(test_sources);
  RUN(test_call_rcu_fork_in_flight);
  RUN(test_call_rcu_fork_callback_blocked);
  RUN(test_call_rcu_fork_cut_enqueue);
  RUN(test_fork);
  return prd_test_done();
}
