/*
 * race.c: race widening (Debug and TSan builds; race.h).
 *
 * 1. What.  A race between two threads needs one of them to stop between two of its steps
 *    while the other runs a whole sequence of its own.  On an idle machine that happens about
 *    as often as a preemption lands in a window of a few instructions: a torture could run for
 *    days before it sees it once.  PRD_RACE() marks such steps; with the option race_delay=N
 *    (0: off, the default) each mark pauses with probability N/1024, so the windows of every
 *    protocol that carries marks open wide enough for a torture of seconds.
 * 2. Where the marks are.  The owner's side of the handshake (magazine.h prd__mag_enter:
 *    between the busy store, the barrier, the steal test and the first load) and the visitors'
 *    (magazine.c mag_steal and prd__mag_visit: between setting tc_steal, the barrier, the busy
 *    test, the changes and clearing tc_steal); the grace-period machine (rcu.c gp_run, between
 *    the odd sequence and (W1), and the driver before it takes gp_lock); each latent transition
 *    of defer.c (rotate, merge, to the depot, to the latent slabs); the holds of slab.c's
 *    purge of free buffers (prd__slab_purge: allocations take chosen buffers between them);
 *    call_rcu.c's enqueue, between the tail's exchange and the link (a fork cuts it there).
 * 3. The pause.  Drawn at random so that neither side settles into a rhythm: half the pauses
 *    spin (up to 1024 `pause` instructions: up to tens of microseconds, the thread stays on
 *    its CPU), a quarter yield the CPU (the other side runs a step), a quarter sleep up to
 *    100 us (the other side runs a whole sequence, as after a preemption).  The generator is a
 *    per-thread xorshift: no lock, no allocation (the marks run inside malloc), no system call
 *    but the pause itself.
 * 4. Release builds compile the marks out (race.h); the option stays in the table so that one
 *    PRUDENCE_OPTIONS line serves every build, and is ignored there.
 */
#include <sched.h>
#include <time.h>

#include "race.h"

#ifdef PRD_RACE_HOOKS
bool prd__mag_broken_handshake;
bool prd__rcu_broken_count;

static _Thread_local uint64_t race_rng __attribute__((tls_model("initial-exec")));
static _Atomic uint64_t race_seed = 0x9e3779b97f4a7c15ull;

static uint64_t race_next(void)
{
  uint64_t x = race_rng;
  if (x == 0)   /* a thread's first draw: a seed of its own */
    x = atomic_fetch_add_explicit(&race_seed, 0x9e3779b97f4a7c15ull, memory_order_relaxed) |
        1;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  race_rng = x;
  return x;
}

void prd__race_pause(void)
{
  uint64_t r = race_next();
  long n = prd__opt(race_delay);
  if ((long)(r & 1023) >= n)
    return;
  r >>= 10;
  switch (r & 3) {
  case 0:
  {
    int old = prd__cancel_off();   /* os.c section 8 */
    nanosleep(&(struct timespec){ 0, (long)((r >> 2) % 100 + 1) * 1000 }, NULL);
    prd__cancel_on(old);
    break;
  }
  case 1:
    sched_yield();
    break;
  default:
    for (uint64_t i = (r >> 2) & 1023; i > 0; i--) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#else
      atomic_signal_fence(memory_order_seq_cst);   /* a loop the compiler keeps */
#endif
    }
    break;
  }
}
#endif
