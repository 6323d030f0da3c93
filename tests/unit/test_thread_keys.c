/* test_thread_keys: the thread-exit keys (src/thread.c section 6) when the process cannot
 * have one.  Guards a defect: each key (the magazine layer's, the built-in RCU's, call_rcu's)
 * was made once, in an init-once function, and after one failed pthread_key_create (the
 * process's keys all taken) every thread set its value on the key that was never made, that
 * is key 0, someone else's (here the application's own), and the magazine layer's records
 * were never flushed or reused at their threads' exit, for the life of the process.  Now a
 * thread that cannot have the key goes on in its layer's safe way (no magazines; its
 * call_rcu callbacks to the orphans; an RCU reader, which must be registered, reported) and
 * the next registration tries again.
 *
 * pthread_key_create is interposed (a definition here, forwarding through dlsym(RTLD_NEXT))
 * so that it fails with EAGAIN while `fail` is set.  It is set from the start, so the keys the
 * library makes at load fail too (test_thread_keys_load has them), and each group runs in a
 * child forked before the library made any key, so each starts with none. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "magazine.h"
#include "prd_test.h"

// prd-test-labels: unit no-asan no-tsan no-preload
// (no-asan, no-tsan: the sanitizers' runtimes make keys of their own; no-preload: the
// interposed pthread_key_create would fail the preloaded copy's keys as well)

static _Atomic int fail = 1;   /* the library's keys at load fail: main clears it */
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

static void magazine_child(void *arg)
{
  (void)arg;
  prd_option_set("maint_thread", "0");   /* no library thread registers records meanwhile */
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
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_magazine_key(void)
{
  static char out[8192];
  int st = prd_test_child(magazine_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

static _Atomic int cb_ran;

static void cb_count(struct prd_rcu_head *h)
{
  (void)h;
  atomic_fetch_add(&cb_ran, 1);
}

/* call_rcu from a new thread, then the barrier; *arg: the application's key seen after */
static void *callrcu_worker(void *arg)
{
  static struct prd_rcu_head head[4];
  for (int i = 0; i < 4; i++)
    prd_call_rcu(&head[i], cb_count);
  prd_rcu_barrier();
  *(void **)arg = pthread_getspecific(app_key);
  return NULL;
}

/* With no key a thread's callbacks go to the orphans (no queue that would outlive it): they
 * run, the barrier returns, no key is set; with keys again the next thread has its queue. */
static void callrcu_child(void *arg)
{
  (void)arg;
  atomic_store(&fail, 1);
  void *app_value = NULL;
  pthread_t t;
  uint64_t before = prd__error_count();
  CHECK_EQ(pthread_create(&t, NULL, callrcu_worker, &app_value), 0);
  pthread_join(t, NULL);
  CHECK(atomic_load(&failed) > 0);
  CHECK_EQ(atomic_load(&cb_ran), 4);
  CHECK(app_value == NULL);
  CHECK_EQ(prd__error_count(), before);
  atomic_store(&fail, 0);
  CHECK_EQ(pthread_create(&t, NULL, callrcu_worker, &app_value), 0);
  pthread_join(t, NULL);
  CHECK_EQ(atomic_load(&cb_ran), 8);
  CHECK(app_value == NULL);
  /* that thread's exit ran its destructor: a third thread's callbacks run as well */
  CHECK_EQ(pthread_create(&t, NULL, callrcu_worker, &app_value), 0);
  pthread_join(t, NULL);
  CHECK_EQ(atomic_load(&cb_ran), 12);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_callrcu_key(void)
{
  static char out[8192];
  int st = prd_test_child(callrcu_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

static void *reader_worker(void *arg)
{
  prd_rcu_read_lock();
  prd_rcu_read_unlock();
  *(void **)arg = pthread_getspecific(app_key);
  return NULL;
}

/* A reader must be registered, and its record must leave the registry when its thread
 * ends, so with no key the process ends, whatever abort_on_error says.  With
 * abort_on_error=0 it once went on: the record stayed in the registry after its thread, the
 * grace periods read it in freed TLS, and a later thread with the same TLS address linked the
 * registry into a loop (a synchronize spun for ever) or a scan crashed. */
static void reader_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  atomic_store(&fail, 1);
  void *app_value = NULL;
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, reader_worker, &app_value), 0);
  pthread_join(t, NULL);
  _exit(4);   /* not reached: the reader's first section ends the process */
}

static void test_reader_key(void)
{
  static char out[8192];
  int st = prd_test_child(reader_child, NULL, out, sizeof(out));
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK_STR_CONTAINS(out, "rcu: no thread-exit destructor for this reader thread");
  if (prd_t_failures != 0)
    fprintf(stderr, "%s", out);
}

int main(void)
{
  alarm(60);
  CHECK(atomic_load(&failed) > 0);   /* the library tried its keys at load */
  atomic_store(&fail, 0);
  CHECK_EQ(pthread_key_create(&app_key, NULL), 0);   /* before the library made any */
  RUN(test_magazine_key);
  RUN(test_callrcu_key);
  RUN(test_reader_key);
  return prd_test_done();
}
