/* vmem under memory failure (src/vmem.c over src/os.c's fault injection): every mapping vmem
 * makes (arena structures, tag pages, hash tables, heap blocks) can fail; each failure must
 * come back as NULL with errno ENOMEM, leave the arena consistent and leak nothing. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "internal.h"
#include "prd_test.h"

#define Q 16

static void test_create_fails_cleanly(void)
{
  for (long every = 1; every <= 2; every++) {
    size_t before = prd__os_mapped_bytes();
    prd__os_fault_every(every);   /* 1: the arena itself fails; 2: its first tag page */
    errno = 0;
    prd_vmem_t *a = prd_vmem_create("oom", (void *)0x1000, 0x1000, Q, NULL, NULL, NULL, 0, 0);
    prd__os_fault_every(0);
    CHECK(a == NULL && errno == ENOMEM);
    CHECK_EQ(prd__os_mapped_bytes(), before);
  }
}

/* Enough allocations that tag pages and hash tables must be mapped while every 3rd mapping
 * fails: each failure is ENOMEM, the arena stays consistent, and all of it can be freed. */
static void test_tags_and_hash_under_faults(void)
{
  size_t before = prd__os_mapped_bytes();
  prd_vmem_t *a = prd_vmem_create("tags", (void *)0x100000, 1u << 20, Q, NULL, NULL, NULL, 0, 0);
  CHECK(a != NULL);
  enum { N = 20000 };
  static void *p[N];
  int got = 0, failed = 0;
  prd__os_fault_every(3);
  for (int i = 0; i < N; i++) {
    /* every other one kept, so free segments (tags) pile up */
    p[i] = prd_vmem_alloc(a, Q, PRD_VM_NOSLEEP);
    if (p[i] == NULL) {
      CHECK_EQ(errno, ENOMEM);
      failed++;
    } else {
      got++;
    }
    if (i % 2 == 1 && p[i - 1] != NULL) {
      prd_vmem_free(a, p[i - 1], Q);
      p[i - 1] = NULL;
    }
  }
  prd__os_fault_every(0);
  CHECK(got > 0);
  CHECK(failed > 0);   /* some tag page did fail to map */
  CHECK_EQ(prd__vmem_check(a), 0);
  prd_vmem_stats_t st;
  st.size = sizeof(st);
  prd_vmem_stats(a, &st);
  CHECK_EQ(st.failures, (uint64_t)failed);
  for (int i = 0; i < N; i++)
    if (p[i] != NULL)
      prd_vmem_free(a, p[i], Q);
  CHECK_EQ(prd__vmem_check(a), 0);
  CHECK_EQ(prd_vmem_size(a, PRD_VMEM_ALLOC), 0);
  prd_vmem_destroy(a);
  CHECK_EQ(prd__os_mapped_bytes(), before);
}

static void test_heap_arena_under_faults(void)
{
  prd_vmem_t *h = prd_heap_arena();
  CHECK(h != NULL);
  size_t pg = prd__os_page_size();
  /* every mapping fails: NOSLEEP at once, SLEEP after vmem_sleep_ms, both ENOMEM */
  prd_option_set("vmem_sleep_ms", "20");
  prd__os_fault_every(1);
  CHECK(prd_vmem_alloc(h, pg, PRD_VM_NOSLEEP) == NULL && errno == ENOMEM);
  CHECK(prd_vmem_alloc(h, pg, PRD_VM_SLEEP) == NULL && errno == ENOMEM);
  /* every other mapping fails: a SLEEP allocation retries its import and gets memory */
  prd_option_set("vmem_sleep_ms", "5000");
  for (int i = 0; i < 8; i++) {
    prd__os_fault_every(2);
    char *p = prd_vmem_alloc(h, (size_t)(i + 1) << 20, PRD_VM_SLEEP);
    prd__os_fault_every(0);
    CHECK(p != NULL);
    if (p != NULL) {
      p[0] = 1;
      p[((size_t)(i + 1) << 20) - 1] = 1;
      prd_vmem_free(h, p, (size_t)(i + 1) << 20);
    }
  }
  /* a mix under every-5th failures */
  enum { N = 256 };
  static char *p[N];
  prd__os_fault_every(5);
  int failed = 0;
  for (int i = 0; i < N; i++) {
    size_t sz = pg * (1 + (size_t)(i % 7)) * (i % 31 == 0 ? 512 : 1);
    p[i] = prd_vmem_alloc(h, sz, PRD_VM_NOSLEEP);
    if (p[i] == NULL) {
      CHECK_EQ(errno, ENOMEM);
      failed++;
    } else {
      p[i][0] = (char)i;
    }
  }
  prd__os_fault_every(0);
  CHECK(failed > 0);
  CHECK_EQ(prd__vmem_check(h), 0);
  for (int i = 0; i < N; i++)
    if (p[i] != NULL) {
      CHECK(p[i][0] == (char)i);
      prd_vmem_free(h, p[i], pg * (1 + (size_t)(i % 7)) * (i % 31 == 0 ? 512 : 1));
    }
  CHECK_EQ(prd__vmem_check(h), 0);
  /* All blocks went back.  The quantum caches, which the first failures kept from being made
   * and a later allocation made (vmem.c section 14), give their slabs back at a trim; what
   * stays allocated is the library's record of those caches, a few pages (the test's
   * blocks are one to seven pages, and every 31st is 512 times that) */
  prd__cache_trim();
  CHECK_EQ(atomic_load(&h->vm_qcache_state), 1);
  CHECK(prd_vmem_size(h, PRD_VMEM_ALLOC) < 256 * 1024);
  prd_option_set("vmem_sleep_ms", "1000");
}

/* The quantum caches (vmem.c section 14) that could not be made at an arena's first small
 * allocation are made at a later one: the failure is retried, not remembered.  What the arena
 * served itself meanwhile goes back to the arena when freed, not into a cache. */
static void qcache_retry(void *arg)
{
  (void)arg;
  enum { PG = 4096, NQ = 64 };
  prd_vmem_t *a = prd_vmem_create("qretry", (void *)0x10000000, 1u << 24, PG, NULL, NULL, NULL,
                                  8 * PG, 0);
  CHECK(a != NULL);
  prd__os_fault_every(1);   /* every mapping fails: the caches cannot be made */
  char *p = prd_vmem_alloc(a, PG, PRD_VM_NOSLEEP);
  prd__os_fault_every(0);
  CHECK(p != NULL);   /* served by the arena from its span */
  CHECK_EQ(atomic_load(&a->vm_qcache_state), 0);
  CHECK_EQ(atomic_load(&a->vm_qdirect), 1);
  struct timespec ts = { 0, 20 * 1000 * 1000 };   /* past the retry interval */
  nanosleep(&ts, NULL);
  static char *q[NQ];
  for (int i = 0; i < NQ; i++) {
    size_t sz = (size_t)PG * (1 + (size_t)(i % 8));
    q[i] = prd_vmem_alloc(a, sz, PRD_VM_NOSLEEP);
    CHECK(q[i] != NULL);
    CHECK(q[i] + sz <= p || q[i] >= p + PG);   /* never the arena's segment, live */
  }
  CHECK_EQ(atomic_load(&a->vm_qcache_state), 1);
  prd_vmem_stats_t st;
  st.size = sizeof(st);
  prd_vmem_stats(a, &st);
  uint64_t segs = st.segs_alloc;
  prd_vmem_free(a, p, PG);   /* to the arena: its hash has it */
  prd_vmem_stats(a, &st);
  CHECK_EQ(st.segs_alloc, segs - 1);
  CHECK_EQ(st.bad_frees, 0);
  CHECK_EQ(atomic_load(&a->vm_qdirect), 0);
  for (int i = 0; i < NQ; i++)
    prd_vmem_free(a, q[i], (size_t)PG * (1 + (size_t)(i % 8)));
  CHECK_EQ(prd__vmem_check(a), 0);
  prd_vmem_destroy(a);
  exit(prd_t_failures != 0);
}

/* In a child forked before the other tests, which make caches: no cache exists there yet, so
 * making the quantum caches must map memory, and the injected faults make it fail. */
static void test_qcache_retry(void)
{
  prd_test_child_ok(qcache_retry);
}

/* A retry of the quantum caches from a destructor that a reap runs (cache_reap_lock held)
 * while another thread forks: fork's prepare takes vmem_qcache_lock before cache_reap_lock
 * (fork.c section 2), so a retry that waited for vmem_qcache_lock deadlocked with it.  The
 * retry only try-locks: the destructor's allocation is served by the arena itself. */
static prd_vmem_t *qf_arena;
static atomic_int qf_in_dtor;

static int qf_ctor(void *buf, void *priv, int flags)
{
  (void)buf;
  (void)priv;
  (void)flags;
  return 0;
}

static void qf_dtor(void *buf, void *priv)
{
  (void)buf;
  (void)priv;
  if (atomic_exchange(&qf_in_dtor, 1) != 0)
    return;
  struct timespec ts = { 0, 100 * 1000 * 1000 };   /* the fork's prepare takes its locks */
  nanosleep(&ts, NULL);
  void *p = prd_vmem_alloc(qf_arena, 4096, PRD_VM_NOSLEEP);
  if (p == NULL)
    _exit(3);
}

static void *qf_reaper(void *arg)
{
  prd_cache_t *u = arg;
  enum { N = 20000 };
  static void *o[N];
  for (int i = 0; i < N; i++)
    o[i] = prd_cache_alloc(u, PRD_SLEEP);
  for (int i = 0; i < N; i++)
    prd_cache_free(u, o[i]);
  (void)prd__cache_trim();   /* every free slab: the destructor runs under cache_reap_lock */
  return NULL;
}

static int qcache_retry_fork(void)
{
  qf_arena = prd_vmem_create("qfork", (void *)0x10000000, 1u << 24, 4096, NULL, NULL, NULL,
                             8 * 4096, 0);
  prd__os_fault_every(1);   /* the first try at the quantum caches fails */
  void *p = prd_vmem_alloc(qf_arena, 4096, PRD_VM_NOSLEEP);
  prd__os_fault_every(0);
  if (p == NULL || atomic_load(&qf_arena->vm_qcache_state) != 0)
    return 2;
  struct timespec ts = { 0, 20 * 1000 * 1000 };   /* past the retry interval */
  nanosleep(&ts, NULL);
  prd_cache_t *u = prd_cache_create("qf_user", 64, 0, qf_ctor, qf_dtor, NULL, NULL, NULL, 0);
  pthread_t t;
  pthread_create(&t, NULL, qf_reaper, u);
  while (!atomic_load(&qf_in_dtor))
    sched_yield();
  pid_t pid = fork();
  if (pid == 0)
    _exit(0);
  waitpid(pid, NULL, 0);
  pthread_join(t, NULL);
  return 0;
}

static void test_qcache_retry_fork(void)
{
  CHECK_EQ(prd_test_bounded(qcache_retry_fork, "quantum-cache retry in a reap, fork", 30), 0);
}

int main(void)
{
  prd_option_set("abort_on_error", "0");
  RUN(test_qcache_retry);
  RUN(test_qcache_retry_fork);   /* before any test of this process makes a cache */
  RUN(test_create_fails_cleanly);
  RUN(test_tags_and_hash_under_faults);
  RUN(test_heap_arena_under_faults);
  return prd_test_done();
}
