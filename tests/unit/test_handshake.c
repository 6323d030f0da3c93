/*
 * test_handshake.c: the owner/visitor handshake of the magazine layer (src/magazine.c section
 * 6, magazine.h prd__mag_enter), under race widening (option race_delay, src/race.c).
 *
 * The defect it guards: the hit paths loaded the CPU cache (cc_rounds, cc_lat_n) between the
 * busy store and the steal test.  A visitor clears tc_steal when it is done, so an owner
 * preempted between its load and its test read the cleared flag while holding a value from
 * before the visitor emptied the cache, and popped from a magazine that was gone (a NULL
 * cc_loaded: a crash) or handed out an object twice.  One thread allocates and frees (and
 * defers) in a loop while another calls prd_reap() in a loop, with the handshake's steps
 * widened; the owner's objects carry its tag, so a double hand-out is seen as well as a
 * crash.  The run happens in a child process, so that a crash is a failed check, not a dead
 * test.  The last test runs the same child with the old order restored
 * (prd__mag_broken_handshake) and expects it to fail: the check can fail.
 *
 * prd-test-labels: torture
 * prd-test-timeout: 120
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "internal.h"
#include "race.h"
#include "prd_test.h"

#ifdef PRD_RACE_HOOKS
#define HS_SECONDS 4.0          /* the run with the handshake as it is */
#define HS_BROKEN_SECONDS 30.0  /* the old order: until it fails (about a second when idle) */
#define HS_HELD 8

static atomic_int hs_stop;
static _Atomic long hs_bad, hs_ops, hs_reaps;
static prd_cache_t *hs_cache;

static void *hs_owner(void *arg)
{
  (void)arg;
  _Atomic uint64_t *held[HS_HELD];
  uint64_t me = (uint64_t)(uintptr_t)&held, k = 0;
  while (!atomic_load_explicit(&hs_stop, memory_order_relaxed)) {
    for (int i = 0; i < HS_HELD; i++) {
      held[i] = prd_cache_alloc(hs_cache, 0);
      uint64_t old = atomic_exchange_explicit(held[i], me, memory_order_relaxed);
      if (old == me)   /* this thread holds it already: handed out twice */
        atomic_fetch_add(&hs_bad, 1);
    }
    for (int i = 0; i < HS_HELD; i++) {
      atomic_store_explicit(held[i], 0, memory_order_relaxed);
      if ((++k & 7) == 0)
        prd_cache_free_deferred(hs_cache, (void *)held[i]);
      else
        prd_cache_free(hs_cache, (void *)held[i]);
    }
    atomic_fetch_add_explicit(&hs_ops, 2 * HS_HELD, memory_order_relaxed);
  }
  return NULL;
}

static void *hs_reaper(void *arg)
{
  (void)arg;
  while (!atomic_load_explicit(&hs_stop, memory_order_relaxed)) {
    prd_reap();
    atomic_fetch_add_explicit(&hs_reaps, 1, memory_order_relaxed);
  }
  return NULL;
}

/* The child: owner against reaper for HS_SECONDS (HS_BROKEN_SECONDS at most with the old
 * order); exits 0 when no object was handed out twice (a crash kills it). */
static void hs_child(bool broken)
{
  prd_option_set("race_delay", "256");
  prd__mag_broken_handshake = broken;
  hs_cache = prd_cache_create("handshake", 64, 0, NULL, NULL, NULL, NULL, NULL,
                              PRD_CACHE_NODEBUG);
  if (hs_cache == NULL)
    _exit(2);
  pthread_t o, r;
  pthread_create(&o, NULL, hs_owner, NULL);
  pthread_create(&r, NULL, hs_reaper, NULL);
  struct timespec tick = { 0, 10 * 1000 * 1000 };
  double seconds = broken ? HS_BROKEN_SECONDS : HS_SECONDS;
  for (double t = 0; t < seconds && atomic_load(&hs_bad) == 0; t += 0.01)
    nanosleep(&tick, NULL);
  atomic_store(&hs_stop, 1);
  pthread_join(o, NULL);
  pthread_join(r, NULL);
  fprintf(stderr, "  owner operations %ld, reaps %ld, objects handed out twice %ld\n",
          atomic_load(&hs_ops), atomic_load(&hs_reaps), atomic_load(&hs_bad));
  _exit(atomic_load(&hs_bad) == 0 ? 0 : 1);
}

/* Runs the child (this program again with an argument: a fresh process, as TSan wants for
 * threads after a fork) and returns its wait status. */
static int hs_run(const char *self, bool broken)
{
  pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, broken ? "--child-broken" : "--child", (char *)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

static const char *hs_self;

static void test_owner_against_reaper(void)
{
  int st = hs_run(hs_self, false);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (WIFSIGNALED(st))
    fprintf(stderr, "  the owner crashed (signal %d)\n", WTERMSIG(st));
}

static void test_old_order_fails(void)
{
  /* the old order: loads before the steal test; the same run must crash or hand out twice */
  int st = hs_run(hs_self, true);
  CHECK(!(WIFEXITED(st) && WEXITSTATUS(st) == 0));
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--child") == 0)
    hs_child(false);
  if (argc > 1 && strcmp(argv[1], "--child-broken") == 0)
    hs_child(true);
  hs_self = "/proc/self/exe";
  RUN(test_owner_against_reaper);
  RUN(test_old_order_fails);
  return prd_test_done();
}
#else
int main(void)
{
  fprintf(stderr, "test_handshake: needs the race hooks (a Debug or TSan build): skipped\n");
  return 77;
}
#endif
