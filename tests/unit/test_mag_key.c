/* test_mag_key: the magazine layer's thread-exit key (src/magazine.c section 10) when the
 * process cannot have one.  Guards a defect: the key was made once, in the layer's
 * pthread_once, and its result ignored, so after one failed pthread_key_create (the process's
 * keys all taken) every thread registered its CPU caches under an unmade key (a set of key 0,
 * someone else's value) and none of them was ever flushed or reused at its exit, for the life
 * of the process.  Now a thread that cannot have the key runs without magazines, and the next
 * registration tries again.
 *
 * pthread_key_create is interposed (a definition here, forwarding through dlsym(RTLD_NEXT))
 * so that it fails with EAGAIN while `fail` is set. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "internal.h"
#include "magazine.h"
#include "prd_test.h"

// prd-test-labels: unit no-asan no-tsan no-preload
// (no-asan, no-tsan: the sanitizers' runtimes make keys of their own; no-preload: the
// interposed pthread_key_create would fail the preloaded copy's keys as well)

static _Atomic int fail;
static _Atomic int failed;

int pthread_key_create(pthread_key_t *key, void (*dtor)(void *))
{
  static int (*real)(pthread_key_t *, void (*)(void *));
  if (real == NULL)
    *(void **)&real = dlsym(RTLD_NEXT, "pthread_key_create");
  if (atomic_load(&fail)) {
    atomic_fetch_add(&failed, 1);
    return EAGAIN;
  }
  return real(key, dtor);
}

static prd_cache_t *cp;
static pthread_key_t app_key;

struct seen {
  uint32_t ncc;     /* entries of the thread's CPU-cache record (0: none, no magazines) */
  void *app_value;  /* the application's own key, never set by this thread */
  int dup;          /* buffers handed out twice */
};

static void *worker(void *arg)
{
  struct seen *s = arg;
  enum { N = 200 };
  void *b[N];
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < N; i++) {
      b[i] = prd_cache_alloc(cp, PRD_SLEEP);
      CHECK(b[i] != NULL);
      for (int k = 0; k < i; k++)
        s->dup += b[k] == b[i];
    }
    for (int i = 0; i < N; i++)
      prd_cache_free(cp, b[i]);
  }
  s->ncc = prd__mag_here()->tc_ncc;
  s->app_value = pthread_getspecific(app_key);
  return NULL;
}

static struct seen run_thread(void)
{
  struct seen s = { 0, NULL, 0 };
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, worker, &s), 0);
  pthread_join(t, NULL);
  return s;
}

static void test_key_failure_not_remembered(void)
{
  CHECK_EQ(pthread_key_create(&app_key, NULL), 0);
  atomic_store(&fail, 1);
  cp = prd_cache_create("keytest", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(cp != NULL && cp->cache_magid != 0);

  /* no key: the thread allocates without magazines, and sets no key */
  struct seen s = run_thread();
  CHECK(atomic_load(&failed) > 0);
  CHECK_EQ(s.ncc, 0u);
  CHECK(s.app_value == NULL);
  CHECK_EQ(s.dup, 0);

  /* keys again: the next thread makes it and has magazines */
  atomic_store(&fail, 0);
  s = run_thread();
  CHECK(s.ncc > 0);
  CHECK(s.app_value == NULL);
  CHECK_EQ(s.dup, 0);
  /* its exit ran the destructor: the next thread takes its record instead of mapping one */
  uint64_t maps = prd__mag_thread_maps();
  s = run_thread();
  CHECK(s.ncc > 0);
  CHECK_EQ(prd__mag_thread_maps(), maps);
  CHECK_EQ(prd__cache_check(cp), 0);
}

int main(void)
{
  alarm(60);
  prd_option_set("maint_thread", "0");   /* no library thread registers records meanwhile */
  RUN(test_key_failure_not_remembered);
  return prd_test_done();
}
