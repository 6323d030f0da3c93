/*
 * call_rcu.c: callbacks after a grace period (prd_call_rcu, prd_rcu_barrier), over the
 * grace-period state of rcu.c.
 *
 * 1. What.  prd_call_rcu(head, func) runs func(head) once a grace period has passed after the
 *    call (seed 001 §2.2: how a writer frees what it unlinked without waiting), and
 *    prd_rcu_barrier waits until every callback queued before it has run.  The grace periods
 *    are rcu.c's: this file gathers a batch of callbacks, takes the state that must end before
 *    they may run (prd_rcu_get_state) and blocks until it is reached (prd__rcu_wait_raw).  So
 *    it is one user of the grace-period state, as defer.c is another, on the floor above
 *    rcu.c (liburcu keeps call_rcu apart in the same way: urcu-call-rcu-impl.h beside
 *    urcu.c), and it calls only down: rcu.c, thread.c (the worker thread), options.c
 *    (prd__init) and report.c.  rcu.c does not call this file and holds no hook of it: the
 *    worker asks for the state it needs and waits for it, so the grace-period side never
 *    wakes the worker or hands it anything.  Hooks this file sets: the worker's lt_wake
 *    (worker_poke) in thread.c, and the exit destructor of its own pthread key (§6).  Around
 *    prd_rcu_barrier's wait it calls the grace-period source's rs_block_begin/rs_block_end
 *    (a QSBR caller goes offline, rcu.c §6).
 *
 * 2. The queues.  Per-thread wait-free queues (the wfcqueue of liburcu, one producer: the
 *    owner): enqueue = one exchange on a thread-local tail plus a store; liburcu's call_rcu
 *    exchanges on a tail shared by all threads and adds a full fence.  A queue is a dummy head
 *    and an atomic tail in the thread's struct cb_thread.  The producer exchanges the tail,
 *    then links the old tail to its node with a release store that pairs with the consumer's
 *    acquire load of the link (next_load); a consumer that finds a link not stored yet waits
 *    the few instructions until it is (next_wait).  A thread's queue is in the registry
 *    (cbq_lock) from its first call_rcu to its exit, when what is left goes to the orphans
 *    (§6).  Callbacks of one thread run in the order they were queued.  The exit is known
 *    from a pthread key's destructor (thread.c section 6); a thread that cannot have it (the
 *    process's keys all taken) gets no queue, since its queue would outlive it in the
 *    registry, and appends each callback to the orphans under cbq_lock instead; it tries
 *    the key again every CB_NOKEY_CALLS calls, and a new thread at its first.
 *
 * 3. The worker (prd-rcu-cb) splices every queue (and the orphans of exited threads), takes
 *    the state after the splice, waits for it through rcu.c's driver, and invokes the batch;
 *    it sleeps when every queue is empty.  Wake-up without a fence on the producer: the
 *    producer's exchange and its load of cb_sleeping are seq_cst, as are the worker's store
 *    of cb_sleeping and its loads of the tails: one of them sees the other.
 *
 * 4. Starting and ending the worker (thread.c).  The start is claimed under wrk_lock
 *    (wrk_running, wrk_alive) and pthread_create runs with wrk_lock dropped: it allocates
 *    (the new thread's DTV), through this library's malloc when it is preloaded, and that
 *    allocation may queue a callback (a big block's deferred free) or come back to wrk_lock
 *    another way.  A worker that cannot be started clears the claim: the next rcu_barrier or
 *    thread exit tries again, and the first call_rcu (its fast path sees wrk_alive clear)
 *    10 ms after the failure (prd__lthread_may_try): at a thread limit every try maps a
 *    stack and fails a clone, and a program queueing callbacks tried tens of thousands of
 *    times a second.  Meanwhile the callbacks wait in their queues (prd_rcu_barrier runs them
 *    itself).  The worker ends like a sleep: with nothing
 *    queued, no barrier pending and no application thread left (thread.c section 3) it
 *    clears wrk_running and wrk_alive under wrk_lock and returns with cb_sleeping still set,
 *    so the §3 wake-up of a later producer (worker_wake) takes wrk_lock and starts a new one,
 *    as do call_rcu's slow path and rcu_barrier.
 *
 * 5. prd_rcu_barrier bumps cb_barrier_req; a worker pass that read the new value before its
 *    splice saw every callback queued before the call, and publishes cb_barrier_done when
 *    that batch has been invoked.  A barrier with no worker, and none to start, takes the
 *    worker's place (sets wrk_running, so no worker starts and splices under it) and runs
 *    worker passes itself until one finds nothing; its callbacks run with ct_is_worker set,
 *    as on the worker.  A barrier called from a callback would wait for itself, and one
 *    inside a read-side section for a grace period its caller holds up: both are reported
 *    and ignored.
 *
 * 6. Thread exit.  This file's pthread key, armed at a thread's first call_rcu (which also
 *    counts the thread as an application thread, thread.c section 3), moves the thread's
 *    pending callbacks to the orphans and wakes the worker, or starts it when it has ended.
 *    rcu.c's own key unregisters the thread's reader record; the two destructors run in
 *    either order and touch nothing of each other's.  A thread whose destructor has run gets
 *    no queue again: a later key destructor of the program (one made after this file's key,
 *    which is made at load, runs after it in each round) may still call prd_call_rcu, and a
 *    queue it registered then could outlive the thread, when the call came in glibc's last
 *    round (PTHREAD_DESTRUCTOR_ITERATIONS): the registry would then hold the dead thread's
 *    TLS, which the next thread's start zeroes.  Its callbacks go to the orphans instead.
 *
 * 7. Fork.  fork.c's handlers take wrk_lock and cbq_lock after rcu.c's locks
 *    (prd__call_rcu_fork_prepare; fork.c section 2 states the whole order) and release them
 *    first (prd__call_rcu_fork_parent).  In the child prd__call_rcu_fork_child reinitializes
 *    them, moves the other threads' pending callbacks to the orphans and marks the worker as
 *    not running: it starts again at the next call_rcu, rcu_barrier or thread exit (thread.c
 *    forgets its id).  A barrier pending in the parent is done in the child, where no thread
 *    waits for it.
 *    A thread the fork cut between its exchange and its link store never stores the link in
 *    the child, and a chain that a consumer there followed with next_wait would wait for it
 *    for ever.  Each producer has one enqueue at a time, so the missing link is the last one
 *    of its chain: in a dead thread's queue the child repairs it (the tail is the node whose
 *    link is missing, the end of the linked chain its predecessor).  A queue the parent's
 *    worker had spliced before the producer linked is a segment in the middle of the batch in
 *    flight, where its end is no longer known: prepare waits for the batch's links, as for a
 *    batch being invoked (a store away, no lock between: the bounded wait below), and past
 *    the bound the child keeps the batch only as far as it is linked.
 *    The batch a worker pass has spliced lives only on that pass's stack, which the child
 *    lacks, so its bounds and step are kept under cbq_lock too (cb_flight_*): spliced and
 *    waiting for its grace period (FL_WAITING: a whole grace period, the long step), none of
 *    it has run, and the child puts it on the orphans, to run after the child's own grace
 *    period; being invoked (FL_INVOKING), some of it has run and the child could not tell
 *    which, so prepare waits for the invocation to end (cb_flight_cond, with cbq_lock and
 *    wrk_lock dropped, then takes both again in their order).  That wait is for callbacks
 *    only, never for readers: the pass has its grace period by then.  It is bounded
 *    (FORK_CB_WAIT_NS): a callback may wait for a lock the forking thread holds, or for
 *    anything else of the program, and liburcu's fork does not wait for its call_rcu
 *    threads unless the program asks (call_rcu_before_fork).  Past the bound the fork goes
 *    on and the child drops the batch: it cannot tell which of its callbacks ran, and
 *    running one twice (a double free) is worse than running none; in the child, what
 *    those callbacks would have freed stays allocated (the parent runs them).  A fork from
 *    a callback does not wait for itself: the child's copy of the invoking thread finishes
 *    the batch.
 *
 * 8. Lock order: wrk_lock -> cbq_lock (the worker's last look before it sleeps, a barrier's
 *    and an exiting thread's look for pending callbacks).  No lock of this file is held while
 *    a callback runs, while the worker waits for a grace period, or across a call into
 *    rcu.c.  The worker is created (thread.c) under wrk_lock; thread.c's poke takes it alone.
 *
 * 9. Waiting.  prd_call_rcu never waits for readers: it enqueues, and on a thread's first
 *    call (or while no worker runs) registers the queue and starts the worker.  The allocator
 *    calls it (the deferred frees of defer.c's oblivious and debugging caches and of
 *    malloc.c's big blocks), and nothing of the allocator may wait for readers (rcu.c §9).
 *    prd_rcu_barrier exists to wait: it blocks, with a QSBR caller offline meanwhile (rcu.c §9
 *    names the calls that do).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "internal.h"
#include "race.h"

/* A thread's call_rcu state. */
struct cb_thread {
  /* §2 the queue: a dummy head and an atomic tail (wfcqueue with one producer) */
  struct prd_rcu_head ct_head;
  struct prd_rcu_head *_Atomic ct_tail;
  struct cb_thread *ct_next, *ct_prev; /* queue registry (cbq_lock) */
  bool ct_registered;                  /* in the queue registry */
  bool ct_key_set;                     /* the exit destructor is armed (§6) */
  bool ct_is_worker;                   /* the worker, or a barrier in its place (§5) */
  bool ct_exited;                      /* its exit destructor ran: no queue again (§6) */
  uint32_t ct_nokey;                   /* calls until the next try for the exit key (§2) */
};

static __thread struct cb_thread cb_self __attribute__((tls_model("initial-exec")));

static pthread_mutex_t cbq_lock = PTHREAD_MUTEX_INITIALIZER; /* queue registry, orphans */
static struct cb_thread *cbq_head;
static struct prd_rcu_head *cb_orphan_first, *cb_orphan_last;
/* The batch a worker pass has spliced, from the splice to the end of its invocation (§7), all
 * under cbq_lock: a fork child runs again what was only waiting for its grace period, and a
 * fork waits while the batch is being invoked */
enum { FL_NONE, FL_WAITING, FL_INVOKING };
static struct prd_rcu_head *cb_flight_first, *cb_flight_last;
static int cb_flight_state;
static pthread_cond_t cb_flight_cond = PTHREAD_COND_INITIALIZER;   /* FL_INVOKING ended */
static pthread_mutex_t wrk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wrk_cond = PTHREAD_COND_INITIALIZER;  /* the worker sleeps here */
static pthread_cond_t wrk_done_cond = PTHREAD_COND_INITIALIZER; /* rcu_barrier waits here */
static _Atomic bool cb_sleeping;
static _Atomic bool wrk_alive;
static bool wrk_running;              /* wrk_lock */
static _Atomic uint64_t cb_barrier_req, cb_barrier_done;
static _Atomic uint64_t cb_invoked;
static void *worker_main(void *arg);
static void worker_poke(void);
static struct prd__lthread wrk_lt = { .lt_name = "prd-rcu-cb", .lt_main = worker_main,
                                      .lt_wake = worker_poke };
static _Atomic unsigned long cb_key_v;   /* the exit destructor's key (thread.c section 6) */
static pthread_once_t cb_once = PTHREAD_ONCE_INIT;

static void cb_thread_exit(void *arg);

/* The exit key made at load (thread.c section 6). */
__attribute__((constructor)) static void cb_key_at_load(void)
{
  prd__thread_key_at_load(&cb_key_v, cb_thread_exit);
}

static void cb_init_once(void)
{
  prd__init();
  prd__lthread_cond_init(&cb_flight_cond);   /* fork's bounded wait (§7): monotonic */
}

static void cb_init(void)
{
  pthread_once(&cb_once, cb_init_once);
}

/* The exit destructor, on the key made at the first registration that needs it (thread.c
 * section 6); false when the key cannot be made or the value set (§2: the thread then gets
 * no queue).  No key that was not made is ever set. */
#define CB_NOKEY_CALLS 1024   /* a failing pthread_key_create walks every key: not every call */

static bool cb_arm_exit(struct cb_thread *t)
{
  if (!t->ct_key_set) {
    if (t->ct_nokey != 0) {
      t->ct_nokey--;
      return false;
    }
    pthread_key_t key;
    if (!prd__thread_key(&cb_key_v, cb_thread_exit, &key) || pthread_setspecific(key, t) != 0) {
      t->ct_nokey = CB_NOKEY_CALLS;
      return false;
    }
    t->ct_key_set = true;
    prd__lthread_app_arrive();   /* its exit may leave the worker alone (§4) */
  }
  return true;
}

/* ---- §2 the queues --------------------------------------------------------------------- */
static struct prd_rcu_head *next_load(struct prd_rcu_head *n)
{
  return __atomic_load_n(&n->next, __ATOMIC_ACQUIRE);
}

/* The successor of a node that is not the last: its producer may be between its exchange and
 * its link store (a few instructions), so wait for the link. */
static struct prd_rcu_head *next_wait(struct prd_rcu_head *n)
{
  struct prd_rcu_head *next;
  for (unsigned i = 0; (next = next_load(n)) == NULL; i++) {
    if (i < 64)
      prd__cpu_relax();
    else
      sched_yield();
  }
  return next;
}

/* The last node reachable from n through stored links, stopping at `stop` (NULL: none): a
 * chain a fork cut is followed only as far as it is linked (§7). */
static struct prd_rcu_head *chain_end(struct prd_rcu_head *n, struct prd_rcu_head *stop)
{
  while (n != stop && next_load(n) != NULL)
    n = next_load(n);
  return n;
}

static void cbq_init(struct cb_thread *t)
{
  __atomic_store_n(&t->ct_head.next, NULL, __ATOMIC_RELAXED);
  atomic_store_explicit(&t->ct_tail, &t->ct_head, memory_order_relaxed);
}

/* seq_cst: the tail load is the worker's half of the §3 wake-up handshake. */
static bool cbq_empty(struct cb_thread *t)
{
  return atomic_load(&t->ct_tail) == &t->ct_head;
}

/* Takes every node of t's queue (consumer side, cbq_lock held).  Returns the first node and
 * sets *last, or NULL.  last->next stays NULL: later enqueues link to the dummy head. */
static struct prd_rcu_head *cbq_splice(struct cb_thread *t, struct prd_rcu_head **last)
{
  if (cbq_empty(t))
    return NULL;
  struct prd_rcu_head *first = next_wait(&t->ct_head);
  __atomic_store_n(&t->ct_head.next, NULL, __ATOMIC_RELAXED);
  *last = atomic_exchange(&t->ct_tail, &t->ct_head);
  return first;
}

static void cb_append(struct prd_rcu_head **first, struct prd_rcu_head **last,
                      struct prd_rcu_head *f, struct prd_rcu_head *l)
{
  if (*first == NULL)
    *first = f;
  else
    __atomic_store_n(&(*last)->next, f, __ATOMIC_RELAXED);
  *last = l;
}

static void cbq_register(struct cb_thread *t)
{
  cb_init();
  if (!cb_arm_exit(t))
    return;   /* no exit destructor: no queue (§2) */
  cbq_init(t);
  pthread_mutex_lock(&cbq_lock);
  t->ct_prev = NULL;
  t->ct_next = cbq_head;
  if (cbq_head != NULL)
    cbq_head->ct_prev = t;
  cbq_head = t;
  t->ct_registered = true;
  pthread_mutex_unlock(&cbq_lock);
}

/* cbq_lock held: moves t's pending callbacks to the orphans and drops its queue.  `dead`: t's
 * thread no longer exists (fork child) and may have died between its exchange and its link,
 * so the chain is followed only as far as it is linked. */
static void cbq_orphan_locked(struct cb_thread *t, bool dead)
{
  struct prd_rcu_head *first, *last;
  if (dead) {
    /* the end of the linked chain; a tail past it is the node whose link the fork cut */
    struct prd_rcu_head *tail = atomic_load(&t->ct_tail), *end = chain_end(&t->ct_head, NULL);
    if (end != tail)
      __atomic_store_n(&end->next, tail, __ATOMIC_RELAXED);
    first = next_load(&t->ct_head);
    last = tail;
  } else {
    first = cbq_splice(t, &last);
  }
  if (first != NULL)
    cb_append(&cb_orphan_first, &cb_orphan_last, first, last);
  if (t->ct_prev != NULL)
    t->ct_prev->ct_next = t->ct_next;
  else
    cbq_head = t->ct_next;
  if (t->ct_next != NULL)
    t->ct_next->ct_prev = t->ct_prev;
  t->ct_registered = false;
}

/* ---- §4 starting the worker, §3 waking it ---------------------------------------------- */
/* wrk_lock held: true when the worker runs (or a barrier stands in for it, §5) or this thread
 * started it; false when it could not be started (the flags clear again: the next call_rcu,
 * rcu_barrier or thread exit tries again).  wrk_lock is dropped around pthread_create (§4),
 * so callers look at their conditions again after it. */
static bool worker_start_locked(void)
{
  if (wrk_running)
    return true;
  wrk_running = true;   /* claimed: no second start, and no barrier stands in, meanwhile */
  atomic_store_explicit(&wrk_alive, true, memory_order_release);
  int rc = prd__lthread_start_unlocked(&wrk_lt, &wrk_lock);
  if (rc == 0)
    return true;
  wrk_running = false;
  atomic_store_explicit(&wrk_alive, false, memory_order_release);
  pthread_cond_broadcast(&wrk_done_cond);   /* barriers that counted on it: look again */
  return false;
}

static PRD_NOINLINE void worker_start(void)
{
  cb_init();
  pthread_mutex_lock(&wrk_lock);
  (void)worker_start_locked();
  pthread_mutex_unlock(&wrk_lock);
}

/* wrk_lock held: a sleeping worker wakes; an exited one (or one never started) starts. */
static void worker_kick_locked(void)
{
  if (worker_start_locked())
    pthread_cond_signal(&wrk_cond);
}

static void worker_wake(void)
{
  /* seq_cst load after the producer's seq_cst exchange: §3 */
  if (atomic_load(&cb_sleeping) && atomic_exchange(&cb_sleeping, false)) {
    pthread_mutex_lock(&wrk_lock);
    worker_kick_locked();
    pthread_mutex_unlock(&wrk_lock);
  }
}

/* thread.c's poke (no lock held): the worker looks for application threads at once. */
static void worker_poke(void)
{
  pthread_mutex_lock(&wrk_lock);
  pthread_cond_signal(&wrk_cond);
  pthread_mutex_unlock(&wrk_lock);
}

static bool cb_pending(void);

/* New orphans (no lock held): the worker may be asleep (or gone) with them pending. */
static void orphans_kick(void)
{
  atomic_store(&cb_sleeping, false);
  pthread_mutex_lock(&wrk_lock);
  if (wrk_running)
    pthread_cond_signal(&wrk_cond);
  else if (cb_pending())
    (void)worker_start_locked();
  pthread_mutex_unlock(&wrk_lock);
}

/* ---- prd_call_rcu ---------------------------------------------------------------------- */
static PRD_NOINLINE void call_rcu_slow(struct cb_thread *t)
{
  prd__rcu_fork_release();   /* a fork child's first call_rcu: it uses RCU (rcu.c §7) */
  if (!t->ct_registered && !t->ct_exited)
    cbq_register(t);
  /* a start that failed (a thread limit) is tried again by the first call 10 ms later, not
   * by every call meanwhile (thread.c section 2) */
  if (!atomic_load_explicit(&wrk_alive, memory_order_acquire) && prd__lthread_may_try(&wrk_lt))
    worker_start();
}

void prd_call_rcu(struct prd_rcu_head *head, void (*func)(struct prd_rcu_head *))
{
  if (prd_unlikely(head == NULL || func == NULL)) {
    prd__error("prd_call_rcu: NULL %s (ignored)", head == NULL ? "head" : "func");
    return;
  }
  struct cb_thread *t = &cb_self;
  if (prd_unlikely(!t->ct_registered || !atomic_load_explicit(&wrk_alive,
                                                              memory_order_relaxed)))
    call_rcu_slow(t);
  head->func = func;
  __atomic_store_n(&head->next, NULL, __ATOMIC_RELAXED);
  if (prd_unlikely(!t->ct_registered)) {   /* no queue (§2): to the orphans */
    pthread_mutex_lock(&cbq_lock);
    cb_append(&cb_orphan_first, &cb_orphan_last, head, head);
    pthread_mutex_unlock(&cbq_lock);
    orphans_kick();
    return;
  }
  /* seq_cst exchange: publishes the node to the worker's splice and orders it before the
   * cb_sleeping load in worker_wake (§3) */
  struct prd_rcu_head *prev = atomic_exchange(&t->ct_tail, head);
  PRD_RACE();   /* the window a fork can cut (§7) */
  __atomic_store_n(&prev->next, head, __ATOMIC_RELEASE); /* pairs with next_load's acquire */
  worker_wake();
}

/* ---- §3 the worker --------------------------------------------------------------------- */
/* Every pending callback (all queues and the orphans) into one list. */
static struct prd_rcu_head *cb_gather(struct prd_rcu_head **last)
{
  struct prd_rcu_head *first = NULL, *f, *l;
  *last = NULL;
  pthread_mutex_lock(&cbq_lock);
  if (cb_orphan_first != NULL) {
    cb_append(&first, last, cb_orphan_first, cb_orphan_last);
    cb_orphan_first = cb_orphan_last = NULL;
  }
  for (struct cb_thread *t = cbq_head; t != NULL; t = t->ct_next)
    if ((f = cbq_splice(t, &l)) != NULL)
      cb_append(&first, last, f, l);
  if (first != NULL) {   /* in flight (§7) */
    cb_flight_first = first;
    cb_flight_last = *last;
    cb_flight_state = FL_WAITING;
  }
  pthread_mutex_unlock(&cbq_lock);
  return first;
}

/* The spliced batch's next step (§7): FL_INVOKING before its first callback runs, FL_NONE
 * after its last (a fork waiting for that is woken). */
static void cb_flight_set(int state)
{
  pthread_mutex_lock(&cbq_lock);
  cb_flight_state = state;
  if (state == FL_NONE) {
    cb_flight_first = cb_flight_last = NULL;
    pthread_cond_broadcast(&cb_flight_cond);
  }
  pthread_mutex_unlock(&cbq_lock);
}

static bool cb_pending(void)
{
  bool any = false;
  pthread_mutex_lock(&cbq_lock);
  any = cb_orphan_first != NULL;
  for (struct cb_thread *t = cbq_head; t != NULL && !any; t = t->ct_next)
    any = !cbq_empty(t);
  pthread_mutex_unlock(&cbq_lock);
  return any;
}

static uint64_t cb_invoke(struct prd_rcu_head *first, struct prd_rcu_head *last)
{
  uint64_t n = 0;
  for (struct prd_rcu_head *h = first; h != NULL;) {
    /* read the link before the callback frees the node */
    struct prd_rcu_head *next = h == last ? NULL : next_wait(h);
    h->func(h);
    n++;
    h = next;
  }
  return n;
}

static void barrier_publish(uint64_t req)
{
  pthread_mutex_lock(&wrk_lock);
  if (atomic_load_explicit(&cb_barrier_done, memory_order_relaxed) < req)
    atomic_store_explicit(&cb_barrier_done, req, memory_order_relaxed);
  pthread_cond_broadcast(&wrk_done_cond);
  pthread_mutex_unlock(&wrk_lock);
}

/* One pass of the worker: every pending callback, after a grace period that began after the
 * splice; then the barrier request read before the splice is published.  True when it
 * invoked any.  Run by the worker, or by a barrier whose worker could not be started. */
static bool worker_pass(void)
{
  /* acquire: a barrier request read here happens before the splice below (§5) */
  uint64_t req = atomic_load_explicit(&cb_barrier_req, memory_order_acquire);
  struct prd_rcu_head *last;
  struct prd_rcu_head *first = cb_gather(&last);
  if (first != NULL) {
    prd__rcu_wait_raw(prd_rcu_get_state());
    cb_flight_set(FL_INVOKING);
    atomic_fetch_add_explicit(&cb_invoked, cb_invoke(first, last), memory_order_relaxed);
    cb_flight_set(FL_NONE);
  }
  if (req > atomic_load_explicit(&cb_barrier_done, memory_order_relaxed))
    barrier_publish(req);
  return first != NULL;
}

static void *worker_main(void *arg)
{
  (void)arg;
  cb_self.ct_is_worker = true;
  for (;;) {
    if (worker_pass())
      continue;
    /* sleep: announce it (seq_cst), then look once more (§3) */
    pthread_mutex_lock(&wrk_lock);
    atomic_store(&cb_sleeping, true);
    while (!cb_pending() && atomic_load(&cb_barrier_req) ==
                                atomic_load_explicit(&cb_barrier_done, memory_order_relaxed) &&
           atomic_load(&cb_sleeping)) {
      /* Nothing queued and no application thread left: exit with cb_sleeping still set, so a
       * producer's worker_wake (or its call_rcu, seeing wrk_alive clear) starts a new worker:
       * the exit is a sleep from which the wake-up of §3 restarts. */
      if (prd__lthread_idle_exit(&wrk_lt)) {
        wrk_running = false;
        atomic_store_explicit(&wrk_alive, false, memory_order_release);
        pthread_mutex_unlock(&wrk_lock);
        return NULL;
      }
      prd__lthread_idle_wait(&wrk_cond, &wrk_lock, CLOCK_REALTIME, &wrk_lt);
    }
    atomic_store(&cb_sleeping, false);
    pthread_mutex_unlock(&wrk_lock);
  }
  return NULL;
}

/* ---- §5 rcu_barrier -------------------------------------------------------------------- */
void prd_rcu_barrier(void)
{
  prd__rcu_fork_release();
  const struct prd_rcu_source *src = prd_rcu_get_source();
  if (cb_self.ct_is_worker) {
    prd__error("rcu: prd_rcu_barrier called from an RCU callback (it would deadlock; ignored)");
    return;
  }
  if (prd__rcu_in_read_section(src, "prd_rcu_barrier"))
    return;
  cb_init();
  int token = src->rs_block_begin ? src->rs_block_begin() : 0;
  /* release: every callback queued before this call, to the worker pass that reads it */
  uint64_t target = atomic_fetch_add_explicit(&cb_barrier_req, 1, memory_order_release) + 1;
  atomic_store(&cb_sleeping, false);
  bool stood_in = false;
  pthread_mutex_lock(&wrk_lock);
  while (atomic_load_explicit(&cb_barrier_done, memory_order_relaxed) < target) {
    if (worker_start_locked()) {   /* (re)started if it had exited: §4 */
      /* a start drops wrk_lock (§4): the new worker's pass may have published our target
       * meanwhile, and its broadcast would then be lost to a wait that begins after it */
      if (atomic_load_explicit(&cb_barrier_done, memory_order_relaxed) >= target)
        break;
      pthread_cond_signal(&wrk_cond);
      prd__cond_wait(&wrk_done_cond, &wrk_lock);
      continue;
    }
    /* No worker, and none can be started now: this thread takes the worker's place for a
     * pass (wrk_running keeps another from starting meanwhile, whose splice could take
     * callbacks queued before this call and leave them uninvoked past our publish). */
    wrk_running = true;
    pthread_mutex_unlock(&wrk_lock);
    cb_self.ct_is_worker = true;   /* a callback's rcu_barrier is reported, as on the worker */
    int old = prd__cancel_off();   /* the callbacks run as on the worker: not cancellable */
    while (worker_pass())
      ;
    prd__cancel_on(old);
    cb_self.ct_is_worker = false;
    pthread_mutex_lock(&wrk_lock);
    wrk_running = false;
    stood_in = true;
    pthread_cond_broadcast(&wrk_done_cond);   /* other barriers: look again, without us */
  }
  /* callbacks queued while we stood in found no worker to start: one more try for them */
  if (stood_in && cb_pending())
    worker_kick_locked();
  pthread_mutex_unlock(&wrk_lock);
  if (src->rs_block_end)
    src->rs_block_end(token);
}

uint64_t prd__call_rcu_invoked(void)
{
  return atomic_load_explicit(&cb_invoked, memory_order_relaxed);
}

bool prd__call_rcu_in_callback(void)
{
  return cb_self.ct_is_worker;
}

/* ---- §6 thread exit -------------------------------------------------------------------- */
static void cb_thread_exit(void *arg)
{
  struct cb_thread *t = arg;
  t->ct_key_set = false;
  t->ct_exited = true;
  if (t->ct_registered) {
    pthread_mutex_lock(&cbq_lock);
    cbq_orphan_locked(t, false);
    pthread_mutex_unlock(&cbq_lock);
    orphans_kick();
  }
  prd__lthread_app_leave();
}

/* ---- §7 fork --------------------------------------------------------------------------- */
PRD__FORK_LINK();
/* How long fork's prepare lets a batch being invoked end (§7): callbacks that free objects
 * take microseconds; one that waits for the program (a lock the forking thread holds) may
 * never end while it forks. */
#define FORK_CB_WAIT_NS 20000000u

/* Both locks held, the batch spliced and waiting: waits, until the deadline, for the links a
 * producer between its exchange and its store still owes it (§7). */
static void flight_settle(uint64_t deadline)
{
  for (struct prd_rcu_head *h = cb_flight_first; h != cb_flight_last;) {
    struct prd_rcu_head *next = next_load(h);
    if (next != NULL)
      h = next;
    else if (prd__now_ns() < deadline)
      sched_yield();
    else
      return;
  }
}

void prd__call_rcu_fork_prepare(void)
{
  uint64_t deadline = prd__now_ns() + FORK_CB_WAIT_NS;
  for (;;) {
    pthread_mutex_lock(&wrk_lock);
    pthread_mutex_lock(&cbq_lock);
    /* not while a batch is being invoked (§7), unless this thread invokes it (a fork from a
     * callback: the child's copy of this thread goes on with the batch), or the bound ran
     * out (the child drops the batch) */
    if (cb_flight_state != FL_INVOKING || cb_self.ct_is_worker || prd__now_ns() >= deadline) {
      if (cb_flight_state == FL_WAITING)
        flight_settle(deadline);
      return;
    }
    pthread_mutex_unlock(&wrk_lock);
    struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
    while (cb_flight_state == FL_INVOKING &&
           prd__cond_timedwait(&cb_flight_cond, &cbq_lock, &ts) != ETIMEDOUT)
      ;
    pthread_mutex_unlock(&cbq_lock);
  }
}

void prd__call_rcu_fork_parent(void)
{
  pthread_mutex_unlock(&cbq_lock);
  pthread_mutex_unlock(&wrk_lock);
}

void prd__call_rcu_fork_child(void)
{
  pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cinit = PTHREAD_COND_INITIALIZER;
  struct cb_thread *self = &cb_self;
  cbq_lock = wrk_lock = init;
  wrk_cond = wrk_done_cond = cinit;
  prd__lthread_cond_init(&cb_flight_cond);
  /* a batch the parent's worker spliced and was waiting for: none of it ran, so it runs
   * here, after the child's own grace period (§7).  One being invoked is this thread's own,
   * which the child's copy of this thread goes on with, or another thread's that prepare's
   * bounded wait did not see end: some of it ran, the child cannot tell which, and drops it */
  if (cb_flight_state == FL_WAITING) {
    /* as far as it is linked: a producer the fork cut before it linked a segment of it left
     * the rest out of reach (§7) */
    cb_flight_last = chain_end(cb_flight_first, cb_flight_last);
    cb_append(&cb_orphan_first, &cb_orphan_last, cb_flight_first, cb_flight_last);
    cb_flight_first = cb_flight_last = NULL;
    cb_flight_state = FL_NONE;
  } else if (cb_flight_state == FL_INVOKING && !self->ct_is_worker) {
    cb_flight_first = cb_flight_last = NULL;
    cb_flight_state = FL_NONE;
  }
  /* only this thread exists now */
  for (struct cb_thread *t = cbq_head, *next; t != NULL; t = next) {
    next = t->ct_next;
    if (t != self)
      cbq_orphan_locked(t, true);
  }
  wrk_running = false;
  atomic_store(&wrk_alive, false);
  atomic_store(&cb_sleeping, false);
  atomic_store(&cb_barrier_done, atomic_load(&cb_barrier_req));
  self->ct_is_worker = false;
}
