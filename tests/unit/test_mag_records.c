/*
 * test_mag_records.c: the magazine layer's per-thread records (src/magazine.c section 10) at
 * the edges of a thread's life.
 *   exit_destroy  A thread frees every object it took of a cache (they wait in its loaded
 *                 magazine) and exits while another thread destroys that cache.  The exit's
 *                 flush skipped the cache being destroyed, and the destroy's visit, which
 *                 walks the registry, no longer found the record: the objects and their
 *                 magazine were lost, and the destroy reported them as live buffers (and
 *                 aborted).  Checked: no report over many rounds.
 *   spare_nomap   A thread takes a spare record (an exited thread's, whose array has 16
 *                 entries), and its first miss on a cache past those entries cannot map a
 *                 larger array (mmap fails).  The hit paths' array pointer was left NULL with
 *                 their bound taken from the record, and the next hit crashed.  Checked: the
 *                 thread goes on, its allocations served.
 */
#include <pthread.h>
#include <semaphore.h>

#include "internal.h"
#include "prd_test.h"

// prd-test-labels: unit no-preload
// (no-preload: fault_mmap would make the preloaded copy's mappings fail as well)

/* ---- a thread's exit against its cache's destroy --------------------------------------------- */
#define ED_OTHERS 64
#define ED_ROUNDS 300
static prd_cache_t *ed_other[ED_OTHERS], *ed_target;
static sem_t ed_done;

static void *ed_worker(void *arg)
{
  (void)arg;
  void *p[5];
  for (int c = 0; c < ED_OTHERS; c++) {   /* partly filled magazines: a longer flush */
    for (int i = 0; i < 5; i++)
      p[i] = prd_cache_alloc(ed_other[c], 0);
    for (int i = 0; i < 5; i++)
      prd_cache_free(ed_other[c], p[i]);
  }
  for (int i = 0; i < 5; i++)
    p[i] = prd_cache_alloc(ed_target, 0);
  for (int i = 0; i < 5; i++)
    prd_cache_free(ed_target, p[i]);   /* all freed: they wait in this thread's magazine */
  sem_post(&ed_done);
  return NULL;   /* the exit's flush next */
}

static void test_exit_against_destroy(void)
{
  prd_option_set("abort_on_error", "0");
  uint64_t reports = prd__error_count();
  CHECK_EQ(sem_init(&ed_done, 0, 0), 0);
  for (int c = 0; c < ED_OTHERS; c++) {
    char name[32];
    snprintf(name, sizeof(name), "ed_other%d", c);
    ed_other[c] = prd_cache_create(name, 64 + 8 * (size_t)c, 0, NULL, NULL, NULL, NULL, NULL, 0);
    CHECK(ed_other[c] != NULL);
  }
  for (int r = 0; r < ED_ROUNDS; r++) {
    ed_target = prd_cache_create("ed_target", 48, 0, NULL, NULL, NULL, NULL, NULL, 0);
    CHECK(ed_target != NULL);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, ed_worker, NULL), 0);
    pthread_detach(t);
    sem_wait(&ed_done);
    prd_cache_destroy(ed_target);   /* every object was freed: nothing may be reported */
  }
  usleep(100000);   /* the last exit */
  for (int c = 0; c < ED_OTHERS; c++)
    prd_cache_destroy(ed_other[c]);
  CHECK_EQ(prd__error_count() - reports, 0);
  prd_option_set("abort_on_error", "1");
}

/* ---- a spare record whose array cannot grow ------------------------------------------------- */
static void *sn_first(void *arg)
{
  (void)arg;
  void *p = prd_malloc(16);   /* class ids below 16: its record keeps a 16-entry array */
  prd_free(p);
  return NULL;
}

static void *sn_second(void *arg)
{
  (void)arg;
  prd_option_set("fault_mmap", "1");   /* every mapping fails ... */
  void *big = prd_malloc(3000);        /* ... the array for this class's id among them */
  prd_option_set("fault_mmap", "0");
  void *small = prd_malloc(16);        /* an id below the spare array's bound */
  CHECK(small != NULL);
  prd_free(small);
  prd_free(big);
  return NULL;
}

static void test_spare_record_no_mapping(void)
{
  for (int i = 0; i < 64; i++) {   /* free buffers in the classes' slabs: no mapping needed */
    void *a = prd_malloc(3000), *b = prd_malloc(16);
    prd_free(a);
    prd_free(b);
  }
  prd_thread_flush();
  prd_reap();
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, sn_first, NULL), 0);
  pthread_join(t, NULL);   /* its record goes to the spare list */
  CHECK_EQ(pthread_create(&t, NULL, sn_second, NULL), 0);
  pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  alarm(120);
  RUN(test_spare_record_no_mapping);   /* first: no spare record with a larger array yet */
  RUN(test_exit_against_destroy);
  return prd_test_done();
}
