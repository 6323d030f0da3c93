/*
 * test_maint.c: the maintenance work (src/maint.c) started from a slow path.
 *   spin  A free that keeps a huge block pokes the maintenance job before anything else set
 *         the layer up (magazines=0: the magazine layer never registers its tick).  The
 *         thread that poke starts must sleep between its wake-ups: its condition variable
 *         was once left with the realtime clock while the thread computed its deadlines
 *         on the monotonic one, so every wait timed out at once and the idle process spun a
 *         core.  Checked: the process's CPU time over a second of idleness.
 *   fork  A destructor that runs under the reap lock (prd_reap, slab_working_set=0) allocates
 *         from a cache with magazines; the miss runs the interval tick inline (one thread:
 *         no maintenance thread yet, maint_interval=100) while another thread forks.  The
 *         inline tick, the slow paths' try-lock form, once took maint_lock with a blocking
 *         lock, out of fork.c's order (section 2), and the two threads deadlocked.
 * Each mode re-executes this program with its options (read once, at start-up) and runs under
 * alarm(): a hang fails the test.
 */
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "internal.h"
#include "prd_test.h"

// prd-test-run: test_maint_spin spin
// prd-test-run: test_maint_fork fork

/* ---- spin ------------------------------------------------------------------------------- */
static double cpu_seconds(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void test_idle_does_not_spin(void)
{
  size_t n = (size_t)8 << 20;
  unsigned char *p = prd_malloc(n);
  CHECK(p != NULL);
  memset(p, 1, n);
  prd_free(p);   /* kept for reuse: the poke finds a job that needs the thread */
  double before = cpu_seconds();
  usleep(1000000);
  double used = cpu_seconds() - before;
  if (used >= 0.3)
    fprintf(stderr, "%.3f s of CPU in 1 s of idleness\n", used);
  CHECK(used < 0.3);
}

/* ---- fork ------------------------------------------------------------------------------- */
static prd_cache_t *fk_x, *fk_y;
static pthread_mutex_t fk_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fk_cv = PTHREAD_COND_INITIALIZER;
static int fk_go;

static int fk_ctor(void *buf, void *priv, int flags)
{
  (void)buf;
  (void)priv;
  (void)flags;
  return 0;
}

static void fk_dtor(void *buf, void *priv)
{
  (void)buf;
  (void)priv;
  static int once;
  if (once++)
    return;
  pthread_mutex_lock(&fk_m);
  fk_go = 1;
  pthread_cond_signal(&fk_cv);
  pthread_mutex_unlock(&fk_m);
  usleep(300000);   /* the other thread is in fork()'s prepare handlers by now */
  void *o = prd_cache_alloc(fk_y, PRD_SLEEP);   /* a miss: the inline tick */
  CHECK(o != NULL);
  prd_cache_free(fk_y, o);
}

static void *fk_forker(void *arg)
{
  (void)arg;
  pthread_mutex_lock(&fk_m);
  while (!fk_go)
    pthread_cond_wait(&fk_cv, &fk_m);
  pthread_mutex_unlock(&fk_m);
  pid_t pid = fork();
  if (pid == 0)
    _exit(0);
  CHECK(pid > 0);
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  return NULL;
}

static void test_inline_tick_and_fork(void)
{
  fk_x = prd_cache_create("maint_x", 256, 0, fk_ctor, fk_dtor, NULL, NULL, NULL,
                          PRD_CACHE_NOMAGAZINE);
  fk_y = prd_cache_create("maint_y", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(fk_x != NULL && fk_y != NULL);
  void *o = prd_cache_alloc(fk_x, PRD_SLEEP);
  CHECK(o != NULL);
  prd_cache_free(fk_x, o);
  usleep(150000);   /* past maint_interval: the next miss runs the tick */
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, fk_forker, NULL), 0);
  prd_reap();       /* slab_working_set=0: x's free slab goes, its destructor runs */
  pthread_join(t, NULL);
  CHECK_EQ(fk_go, 1);   /* the destructor ran, under the reap */
  prd_cache_destroy(fk_y);
  prd_cache_destroy(fk_x);
}

int main(int argc, char **argv)
{
  if (argc < 2)
    return 2;
  bool spin = strcmp(argv[1], "spin") == 0;
  if (getenv("PRUDENCE_OPTIONS") == NULL) {
    setenv("PRUDENCE_OPTIONS", spin ? "magazines=0" : "slab_working_set=0,maint_interval=100",
           1);
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  alarm(20);   /* a hang ends the test (SIGALRM) */
  if (spin)
    RUN(test_idle_does_not_spin);
  else
    RUN(test_inline_tick_and_fork);
  return prd_test_done();
}
