/* Tests of the slab layer's debugging features (seed 002 §6, src/debug.c): each provokes its
 * error in a child process and checks the report. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "internal.h"
#include "prd_test.h"

static size_t page;

/* A child that died of an access to an inaccessible page (or, under ASan, reported it). */
static bool faulted(int st, const char *out)
{
  if (WIFSIGNALED(st))
    return WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGBUS;
  return WEXITSTATUS(st) != 0 && strstr(out, "SEGV") != NULL;
}

/* ---- freed-memory patterns (002 §6.3) -------------------------------------------------------- */
static void modify_freed_child(void *arg)
{
  prd_option_set("abort_on_error", arg != NULL ? "1" : "0");
  prd_cache_t *cp = prd_cache_create("snode_cache", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_PATTERNS | PRD_CACHE_AUDIT);
  uint32_t *p = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, p);
  p[6] = 0x34;   /* use after free, at offset 0x18 as in 002 §6.8 */
  uint32_t *q = prd_cache_alloc(cp, 0);
  printf("same %d\n", p == q);
  printf("check %d\n", prd__cache_check(cp));
  prd_cache_free(cp, q);
  prd_cache_destroy(cp);
}

static void test_patterns_modified_after_free(void)
{
  char out[16384];
  int st = prd_test_child(modify_freed_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "prudence: cache snode_cache: buffer modified after being freed");
  CHECK_STR_CONTAINS(out, "modification occurred at offset 0x18 (0xdeadbeef replaced by 0x34)");
  CHECK_STR_CONTAINS(out, "buffer=0x");
  CHECK_STR_CONTAINS(out, "bufctl=0x");
  CHECK_STR_CONTAINS(out, "previous transactions on buffer");
  CHECK_STR_CONTAINS(out, "alloc thread=");
  CHECK_STR_CONTAINS(out, "free thread=");
  CHECK_STR_CONTAINS(out, "time=T-");
  CHECK_STR_CONTAINS(out, "same 1");
  CHECK_STR_CONTAINS(out, "check 0");
  /* abort_on_error=1: the report, then abort */
  st = prd_test_child(modify_freed_child, (void *)1, out, sizeof(out));
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK_STR_CONTAINS(out, "buffer modified after being freed");
}

static int pat_ctor_calls, pat_dtor_calls, pat_ctor_saw_uninit;

static int pat_ctor(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  pat_ctor_calls++;
  if (((uint32_t *)buf)[0] == 0xbaddcafeu && ((uint32_t *)buf)[9] == 0xbaddcafeu)
    pat_ctor_saw_uninit++;
  ((uint32_t *)buf)[0] = 1;
  return 0;
}

static void pat_dtor(void *buf, void *priv)
{
  (void)priv;
  CHECK_EQ(((uint32_t *)buf)[0], 1);
  pat_dtor_calls++;
}

static void test_patterns_fill(void)
{
  prd_cache_t *cp = prd_cache_create("pat", 40, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_PATTERNS);
  uint32_t *p = prd_cache_alloc(cp, 0);
  for (int i = 0; i < 10; i++)
    CHECK_EQ(p[i], 0xbaddcafeu);   /* uninitialized */
  prd_cache_free(cp, p);
  for (int i = 0; i < 10; i++)
    CHECK_EQ(p[i], 0xdeadbeefu);   /* freed (the slab stays: reading is safe here) */
  prd_cache_destroy(cp);
  /* with a constructor: constructed on every allocation, destructed on every free */
  cp = prd_cache_create("patc", 40, 0, pat_ctor, pat_dtor, NULL, NULL, NULL, PRD_CACHE_PATTERNS);
  for (int r = 0; r < 3; r++) {
    p = prd_cache_alloc(cp, 0);
    CHECK_EQ(p[0], 1);
    prd_cache_free(cp, p);
  }
  CHECK_EQ(pat_ctor_calls, 3);
  CHECK_EQ(pat_ctor_saw_uninit, 3);   /* 0xbaddcafe before the ctor */
  CHECK_EQ(pat_dtor_calls, 3);
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
  CHECK_EQ(pat_dtor_calls, 3);   /* nothing constructed was left in the slabs */
}

/* ---- redzones (002 §6.4) ------------------------------------------------------------------ */
static void redzone_child(void *arg)
{
  prd_option_set("abort_on_error", "0");
  size_t where = (size_t)(uintptr_t)arg;
  prd_cache_t *cp = prd_cache_create("rz", 13, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_REDZONE);
  unsigned char *p = prd_cache_alloc(cp, 0);
  p[where] = 'x';
  prd_cache_free(cp, p);
  printf("check %d\n", prd__cache_check(cp));
  /* the buffer was freed despite the report, and can be used again */
  p = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, p);
  prd_cache_destroy(cp);
  printf("end\n");
}

static void test_redzone(void)
{
  char out[16384];
  int st = prd_test_child(redzone_child, (void *)(uintptr_t)13, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache rz: redzone violation: write past the end of buffer");
  CHECK_STR_CONTAINS(out, "(size 13)");
  CHECK_STR_CONTAINS(out, "at offset 0xd (0xbb replaced by 0x78)");
  CHECK_STR_CONTAINS(out, "bufctl=0x");
  CHECK_STR_CONTAINS(out, "check 0");
  CHECK_STR_CONTAINS(out, "end");
  st = prd_test_child(redzone_child, (void *)(uintptr_t)17, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "at offset 0x10 (0xfeedfacefeedface replaced by 0xfeedfacefeed78ce)");
}

/* ---- freed-address verification (002 §6.2) --------------------------------------------------- */
static void verify_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create("vcache", 32, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_VERIFY);
  prd_cache_t *other = prd_cache_create("ocache", 32, 0, NULL, NULL, NULL, NULL, NULL, 0);
  char *a = prd_cache_alloc(cp, 0);
  char *b = prd_cache_alloc(cp, 0);
  char *o = prd_cache_alloc(other, 0);
  prd_cache_free(cp, a + 4);   /* interior */
  prd_cache_free(cp, o);       /* another cache's */
  prd_cache_free(cp, a);
  prd_cache_free(cp, a);       /* double */
  int x;
  prd_cache_free(cp, &x);      /* not a buffer at all */
  printf("check %d inuse-ok %d\n", prd__cache_check(cp), prd_cache_alloc(cp, 0) == a);
  prd_cache_free(cp, a);
  prd_cache_free(cp, b);
  prd_cache_free(other, o);
  prd_cache_destroy(cp);
  prd_cache_destroy(other);
}

static void test_verify(void)
{
  char out[16384];
  int st = prd_test_child(verify_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache vcache: bad free of");
  CHECK_STR_CONTAINS(out, "not the start of a buffer (offset 0x4 into buffer");
  CHECK_STR_CONTAINS(out, "it is a buffer of cache ocache, not of this cache");
  CHECK_STR_CONTAINS(out, "cache vcache: double free of buffer");
  CHECK_STR_CONTAINS(out, "not a buffer of this cache");
  CHECK_STR_CONTAINS(out, "check 0 inuse-ok 1");
}

/* ---- auditing: destroying a cache with live objects names them with their stacks ------------ */
static void live_audit_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_cache_t *cp = prd_cache_create("auditcache", 200, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_AUDIT);
  void *p = prd_cache_alloc(cp, 0);
  void *q = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, q);
  printf("live %p\n", p);
  prd_cache_destroy(cp);
}

static void test_audit_destroy_live(void)
{
  char out[16384];
  int st = prd_test_child(live_audit_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache auditcache: destroyed with 1 buffer still allocated");
  CHECK_STR_CONTAINS(out, "s ago by thread 0x");
  CHECK_STR_CONTAINS(out, "\nprudence:     ");   /* at least one stack frame */
  const char *l = strstr(out, "live ");
  char want[64];
  if (l != NULL && sscanf(l, "live %40s", want + 7) == 1) {
    memcpy(want, "buffer=", 7);
    CHECK_STR_CONTAINS(out, want);
  }
}

/* ---- synchronous unmapping (002 §6.5) -------------------------------------------------------- */
static void unmap_child(void *arg)
{
  (void)arg;
  prd_cache_t *cp = prd_cache_create("unmapc", 96, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_UNMAP);
  volatile char *p = prd_cache_alloc(cp, 0);
  p[0] = 1;
  prd_cache_free(cp, (void *)p);
  prd_cache_stats_t s = PRD_CACHE_STATS_INIT;
  prd_cache_stats(cp, &s);
  printf("destroyed %llu free %llu\n", (unsigned long long)s.slab_destroys,
         (unsigned long long)s.slabs_free);
  fflush(stdout);
  p[0] = 2;   /* must fault */
  printf("not reached\n");
}

static void test_unmap(void)
{
  char out[16384];
  int st = prd_test_child(unmap_child, NULL, out, sizeof(out));
  CHECK(faulted(st, out));
  CHECK_STR_CONTAINS(out, "destroyed 1 free 0");
  CHECK(strstr(out, "not reached") == NULL);
  /* and in normal use an unmapping cache works and gives everything back on destroy */
  prd_cache_t *cp = prd_cache_create("unmapok", 96, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_UNMAP);
  void *v[200];
  for (int r = 0; r < 3; r++) {
    for (int i = 0; i < 200; i++) {
      v[i] = prd_cache_alloc(cp, 0);
      memset(v[i], i, 96);
    }
    for (int i = 0; i < 200; i++)
      prd_cache_free(cp, v[i]);
  }
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
}

/* ---- page-per-buffer (002 §6.6) -------------------------------------------------------------- */
static void pagebuf_child(void *arg)
{
  int what = (int)(uintptr_t)arg;
  prd_cache_t *cp = prd_cache_create("pagebuf", 100, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_PAGEBUF);
  volatile char *p = prd_cache_alloc(cp, 0);
  printf("aligned %d\n", PRD_IS_P2ALIGNED(p, page));
  fflush(stdout);
  if (what == 0) {
    p[page] = 1;   /* the guard page after the buffer */
  } else {
    prd_cache_free(cp, (void *)p);
    (void)p[0];    /* a freed buffer's page */
  }
  printf("not reached\n");
}

static void test_pagebuf(void)
{
  char out[16384];
  for (uintptr_t what = 0; what < 2; what++) {
    int st = prd_test_child(pagebuf_child, (void *)what, out, sizeof(out));
    CHECK(faulted(st, out));
    CHECK_STR_CONTAINS(out, "aligned 1");
    CHECK(strstr(out, "not reached") == NULL);
  }
  prd_cache_t *cp = prd_cache_create("pagebufok", 3000, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_PAGEBUF | PRD_CACHE_PATTERNS | PRD_CACHE_REDZONE);
  void *v[20];
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < 20; i++) {
      v[i] = prd_cache_alloc(cp, 0);
      memset(v[i], i, 3000);
    }
    for (int i = 0; i < 20; i++)
      prd_cache_free(cp, v[i]);
  }
  CHECK_EQ(prd__cache_check(cp), 0);
  prd_cache_destroy(cp);
}

/* A constructor with page-per-buffer and no patterns.  The defect: the slab layer kept
 * constructing buffers itself, as for a cache without debugging, but a free page-per-buffer
 * buffer is inaccessible (PROT_NONE from the moment its slab is made), so the first
 * allocation crashed in the constructor, and a destroy in the destructor.  A child process,
 * so that the crash is a failed check. */
static int pbc_constructed;
static int pagebuf_ctor(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  *(uint64_t *)buf = 0x5eed;
  pbc_constructed++;
  return 0;
}

static void pagebuf_dtor(void *buf, void *priv)
{
  (void)priv;
  if (*(uint64_t *)buf == 0x5eed)
    pbc_constructed--;
}

static void pagebuf_ctor_child(void *arg)
{
  (void)arg;
  for (int cf = 0; cf < 2; cf++) {   /* without and with a redzone */
    prd_cache_t *cp = prd_cache_create("pagebufctor", 40, 0, pagebuf_ctor, pagebuf_dtor, NULL,
                                       NULL, NULL,
                                       PRD_CACHE_PAGEBUF | (cf ? PRD_CACHE_REDZONE : 0));
    void *v[8];
    int bad = 0;
    for (int r = 0; r < 3; r++) {
      for (int i = 0; i < 8; i++) {
        v[i] = prd_cache_alloc(cp, 0);
        bad += *(uint64_t *)v[i] != 0x5eed;   /* handed out constructed */
      }
      for (int i = 0; i < 8; i++)
        prd_cache_free(cp, v[i]);
    }
    printf("check %d unconstructed %d\n", prd__cache_check(cp), bad);
    prd_cache_destroy(cp);
    printf("constructed and not destructed %d\n", pbc_constructed);
  }
}

static void test_pagebuf_ctor(void)
{
  char out[16384];
  int st = prd_test_child(pagebuf_ctor_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "check 0 unconstructed 0\nconstructed and not destructed 0\n"
                          "check 0 unconstructed 0\nconstructed and not destructed 0\n");
}

/* ---- everything at once, in normal use ------------------------------------------------------- */
static void test_all_features_normal_use(void)
{
  static const size_t sizes[] = { 1, 24, 100, 1000, 5000 };
  uint64_t r0 = prd__error_count();
  for (size_t s = 0; s < PRD_ARRAY_SIZE(sizes); s++) {
    bool c = sizes[s] >= 4;   /* the ctor writes a word */
    prd_cache_t *cp = prd_cache_create("allfeat", sizes[s], 0, c ? pat_ctor : NULL,
                                       c ? pat_dtor : NULL, NULL, NULL, NULL,
                                       PRD_CACHE_DEBUG_ALL & ~PRD_CACHE_LEAKS);
    prd_rng_t rng = { 77 + s };
    void *v[64] = { 0 };
    for (int i = 0; i < 2000; i++) {
      size_t k = prd_rng_below(&rng, 64);
      if (v[k] != NULL) {
        prd_cache_free(cp, v[k]);
        v[k] = NULL;
      } else {
        v[k] = prd_cache_alloc(cp, 0);
        if (sizes[s] >= 4)
          memset((char *)v[k] + 4, 0x11, sizes[s] - 4);
      }
    }
    CHECK_EQ(prd__cache_check(cp), 0);
    for (size_t k = 0; k < 64; k++)
      prd_cache_free(cp, v[k]);
    prd_cache_destroy(cp);
  }
  CHECK_EQ(prd__error_count(), r0);   /* correct use reports nothing */
}

/* ---- leak detection (002 §6.7) --------------------------------------------------------------- */
static void leak_report_child(void *arg)
{
  (void)arg;
  prd_cache_t *cp = prd_cache_create("leaky", 48, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_AUDIT);
  prd_cache_t *plain = prd_cache_create("plainleaky", 48, 0, NULL, NULL, NULL, NULL, NULL,
                                        PRD_CACHE_NODEBUG);
  (void)prd_cache_alloc(cp, 0);
  (void)prd_cache_alloc(cp, 0);
  void *f = prd_cache_alloc(cp, 0);
  prd_cache_free(cp, f);
  (void)prd_cache_alloc(plain, 0);
  size_t n = prd_leak_report(stdout, 0);
  printf("listed %zu\n", n);
  n = prd_leak_report(stdout, 3600);   /* only the unaudited one has no age to filter by */
  printf("old %zu\n", n);
  /* ages past 2^64 ns: the same (the conversion to nanoseconds listed every buffer) */
  n = prd_leak_report(stdout, 1e12) + prd_leak_report(stdout, 1e300) +
      prd_leak_report(stdout, (double)INFINITY);
  printf("ancient %zu\n", n);
}

static void test_leak_report(void)
{
  char out[16384];
  int st = prd_test_child(leak_report_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache leaky: buffer=");
  CHECK_STR_CONTAINS(out, "s ago by thread");
  CHECK_STR_CONTAINS(out, "cache plainleaky: buffer=");
  CHECK_STR_CONTAINS(out, "age and stack unknown");
  CHECK_STR_CONTAINS(out, "listed 3");
  CHECK_STR_CONTAINS(out, "old 1");
  CHECK_STR_CONTAINS(out, "ancient 3");
  CHECK_STR_CONTAINS(out, "leak report: 3 buffers allocated for at least 0.000 s");
}

/* PRUDENCE_DEBUG is read at start-up: run this program again with it set. */
static int leak_exit_main(void)
{
  prd_cache_t *cp = prd_cache_create("leaked", 100, 0, NULL, NULL, NULL, NULL, NULL, 0);
  for (int i = 0; i < 3; i++)
    (void)prd_cache_alloc(cp, 0);
  return 0;   /* the leak report runs at exit */
}

/* The program's own destructor frees two of three buffers: the report at exit comes after
 * it and lists one.  An atexit handler ran before every destructor and listed three. */
static prd_cache_t *dtor_cache;
static void *dtor_bufs[3];
__attribute__((destructor)) static void leak_dtor_frees(void)
{
  for (int i = 0; dtor_cache != NULL && i < 2; i++)
    prd_cache_free(dtor_cache, dtor_bufs[i]);
}

static int leak_dtor_main(void)
{
  dtor_cache = prd_cache_create("dtorleaks", 100, 0, NULL, NULL, NULL, NULL, NULL, 0);
  for (int i = 0; i < 3; i++)
    dtor_bufs[i] = prd_cache_alloc(dtor_cache, 0);
  return 0;
}

/* This program again, with PRUDENCE_DEBUG set and a mode flag (arg: {debug, flag}). */
static void exec_self_child(void *arg)
{
  const char *const *a = arg;
  setenv("PRUDENCE_DEBUG", a[0], 1);
  execl("/proc/self/exe", "test_slab_debug", a[1], (char *)NULL);
  _exit(127);
}

/* Runs this program again as exec_self_child does; its exit status, its output in out. */
static int run_self(const char *debug, const char *flag, char *out, size_t len)
{
  const char *a[2] = { debug, flag };
  return prd_test_child(exec_self_child, (void *)a, out, len);
}

static void test_leaks_after_destructors(void)
{
  char out[16384];
  int st = run_self("leaks", "--leak-dtor", out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache dtorleaks: buffer=");
  CHECK_STR_CONTAINS(out, "leak report: 1 buffer allocated");
}

static void test_leaks_at_exit(void)
{
  char out[16384];
  int st = run_self("leaks,bogus", "--leak-exit", out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "PRUDENCE_DEBUG: unknown debug feature 'bogus'");
  CHECK_STR_CONTAINS(out, "cache leaked: buffer=");
  CHECK_STR_CONTAINS(out, "s ago by thread");
  CHECK_STR_CONTAINS(out, "leak report: 3 buffers allocated");
}

static void cflag_leaks_child(void *arg)
{
  (void)arg;
  prd_cache_t *cp = prd_cache_create("flagleaks", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_LEAKS);
  (void)prd_cache_alloc(cp, 0);
  exit(0);   /* runs the atexit leak report */
}

static void test_leaks_cflag_at_exit(void)
{
  char out[16384];
  int st = prd_test_child(cflag_leaks_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache flagleaks: buffer=");
  CHECK_STR_CONTAINS(out, "s ago by thread");
  CHECK_STR_CONTAINS(out, "leak report: 1 buffer allocated");
}

/* PRUDENCE_DEBUG turns abort_on_error on; PRUDENCE_OPTIONS, read after it, can turn it off. */
static void exec_abort_option_child(void *arg)
{
  setenv("PRUDENCE_DEBUG", "patterns", 1);
  if (arg != NULL)
    setenv("PRUDENCE_OPTIONS", "abort_on_error=0", 1);
  execl("/proc/self/exe", "test_slab_debug", "--print-abort", (char *)NULL);
  _exit(127);
}

static void test_debug_env_abort_option(void)
{
  char out[4096];
  int st = prd_test_child(exec_abort_option_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "abort_on_error=1 debug=16");
  st = prd_test_child(exec_abort_option_child, (void *)1, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "abort_on_error=0 debug=16");
}

/* ---- the unmap quarantine against fork, and the leak report's age ----------------------------- */
/* A quarantined slab given back to a source arena that imports from a quantum-caching arena:
 * the release goes on into that arena's quantum cache (its magazine and slab locks).  It was
 * made with dbg_qlock held, which fork.c's order puts after those locks: with a thread forking
 * meanwhile, the two deadlocked within a second or two.  Two threads free the only buffer of
 * a slab over and over (each free unmaps a slab, each unmap releases the oldest quarantined
 * one) while a third forks; the run must go on to its end. */
static prd_cache_t *qf_cache;
static atomic_int qf_stop;
static atomic_long qf_frees, qf_forks;

static void *qf_churn(void *arg)
{
  (void)arg;
  while (!atomic_load(&qf_stop)) {
    void *p = prd_cache_alloc(qf_cache, 0);
    if (p != NULL)
      prd_cache_free(qf_cache, p);
    atomic_fetch_add(&qf_frees, 1);
  }
  return NULL;
}

static void *qf_forker(void *arg)
{
  (void)arg;
  while (!atomic_load(&qf_stop)) {
    pid_t pid = fork();
    if (pid == 0)
      _exit(0);
    if (pid > 0)
      waitpid(pid, NULL, 0);
    atomic_fetch_add(&qf_forks, 1);
  }
  return NULL;
}

static void quarantine_fork_child(void *arg)
{
  (void)arg;
  alarm(20);   /* a deadlock ends the child: SIGALRM */
  prd_option_set("magazines", "1");   /* the quantum cache of arena b has its magazines */
  prd_vmem_t *b = prd_vmem_create("qf_b", NULL, 0, 4096, prd_vmem_alloc, prd_vmem_free,
                                  prd_heap_arena(), 64 * 1024, PRD_VM_SLEEP);
  prd_vmem_t *a = prd_vmem_create("qf_a", NULL, 0, 4096, prd_vmem_alloc, prd_vmem_free, b, 0,
                                  PRD_VM_SLEEP);
  qf_cache = prd_cache_create("qf_unmap", 96, 0, NULL, NULL, NULL, NULL, a,
                              PRD_CACHE_UNMAP | PRD_CACHE_NOMAGAZINE);
  if (a == NULL || b == NULL || qf_cache == NULL)
    _exit(2);
  pthread_t t[3];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, qf_churn, NULL);
  pthread_create(&t[2], NULL, qf_forker, NULL);
  usleep(3000000);
  atomic_store(&qf_stop, 1);
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], NULL);
  printf("frees %ld forks %ld\n", atomic_load(&qf_frees), atomic_load(&qf_forks));
  fflush(stdout);
  prd_cache_destroy(qf_cache);
  prd_vmem_destroy(a);
  prd_vmem_destroy(b);
  _exit(0);
}

static void test_unmap_quarantine_fork(void)
{
#if defined(PRD_TSAN)
  return;   /* forks of a multi-threaded process in a loop: TSan's own locks */
#endif
  static char out[4096];
  int st = prd_test_child(quarantine_fork_child, NULL, out, sizeof(out));
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
    fprintf(stderr, "%s", out);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "frees ");
}

/* A buffer allocated by another thread while the report walks the caches is younger than the
 * report's clock: it was listed as a leak, "allocated 18446744073.7 s ago". */
static prd_cache_t *ly_cache;
static atomic_int ly_stop;

static void *ly_worker(void *arg)
{
  (void)arg;
  while (!atomic_load(&ly_stop)) {
    void *p = prd_cache_alloc(ly_cache, 0);
    for (volatile int i = 0; i < 200; i++)
      ;
    prd_cache_free(ly_cache, p);
  }
  return NULL;
}

static void test_leak_report_young(void)
{
  ly_cache = prd_cache_create("ly_young", 64, 0, NULL, NULL, NULL, NULL, NULL, PRD_CACHE_AUDIT);
  prd_cache_t *big = prd_cache_create("ly_walked_first", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                      PRD_CACHE_AUDIT);
  enum { NBIG = 20000 };
  static void *kept[NBIG];
  for (int i = 0; i < NBIG; i++)
    kept[i] = prd_cache_alloc(big, 0);
  pthread_t t;
  atomic_store(&ly_stop, 0);
  CHECK_EQ(pthread_create(&t, NULL, ly_worker, NULL), 0);
  FILE *devnull = fopen("/dev/null", "w");
  size_t listed = 0;
  for (int i = 0; i < 50; i++)
    listed += prd_leak_report(devnull, 3600.0);   /* nothing here is an hour old */
  fclose(devnull);
  atomic_store(&ly_stop, 1);
  pthread_join(t, NULL);
  CHECK_EQ(listed, 0);
  for (int i = 0; i < NBIG; i++)
    prd_cache_free(big, kept[i]);
  prd_cache_destroy(big);
  prd_cache_destroy(ly_cache);
}

/* ---- pagebuf at the kernel's limit on mappings ------------------------------------------------ */
/* Every buffer of pagebuf is a mapping of its own (its protection differs from its
 * neighbours').  At the kernel's limit (vm.max_map_count) mprotect fails; the failure was
 * ignored, and a buffer still inaccessible was handed out: the program died of a SIGSEGV on a
 * correct access, with no word.  Now the process ends with a report naming the cache. */
static void map_limit_child(void *arg)
{
  (void)arg;
  if (!prd_test_use_up_mappings())
    _exit(3);
  printf("mappings used up\n");
  fflush(stdout);
  prd_cache_t *cp = prd_cache_create("pb_limit", 64, 0, NULL, NULL, NULL, NULL, NULL,
                                     PRD_CACHE_PAGEBUF);
  for (int k = 0; k < 64; k++) {
    char *b = prd_cache_alloc(cp, 0);
    if (b != NULL)
      b[0] = 1;   /* an allocated buffer must be accessible */
  }
  _exit(0);
}

static void test_pagebuf_map_limit(void)
{
#if defined(PRD_ASAN) || defined(PRD_TSAN)
  return;   /* the sanitizers' runtimes map memory of their own at any time */
#endif
  static char out[8192];
  int st = prd_test_child(map_limit_child, NULL, out, sizeof(out));
  if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT))
    fprintf(stderr, "%s", out);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK_STR_CONTAINS(out, "cache pb_limit: cannot make");
  CHECK_STR_CONTAINS(out, "buffer debugging cannot go on");
}

int main(int argc, char **argv)
{
  prd_option_set("magazines", "0");   /* this tests the layers below the CPU layer */
  if (argc > 1 && strcmp(argv[1], "--leak-exit") == 0)
    return leak_exit_main();
  if (argc > 1 && strcmp(argv[1], "--leak-dtor") == 0)
    return leak_dtor_main();
  if (argc > 1 && strcmp(argv[1], "--print-abort") == 0) {
    printf("abort_on_error=%ld debug=%ld\n", prd_option_get("abort_on_error"),
           prd_option_get("debug"));
    return 0;
  }
  page = prd__os_page_size();
  RUN(test_patterns_modified_after_free);
  RUN(test_patterns_fill);
  RUN(test_redzone);
  RUN(test_verify);
  RUN(test_audit_destroy_live);
  RUN(test_unmap);
  RUN(test_pagebuf);
  RUN(test_pagebuf_ctor);
  RUN(test_pagebuf_map_limit);
  RUN(test_all_features_normal_use);
  RUN(test_leak_report);
  RUN(test_leak_report_young);
  RUN(test_unmap_quarantine_fork);
  RUN(test_leaks_at_exit);
  RUN(test_leaks_cflag_at_exit);
  RUN(test_leaks_after_destructors);
  RUN(test_debug_env_abort_option);
  return prd_test_done();
}
