/*
 * misuse_catalogue.c: what the allocator does with a program that misuses it.
 *
 * Each misuse runs in a child of its own (a fresh process: the program re-executes itself
 * with --one), for each size and each mode, and the child's outcome is classified:
 *   ended     the allocator ended the process: SIGABRT after a "prudence: " report;
 *   reported  a report, and the process went on (to its end, or to a fault later);
 *   crashed   the process died without the allocator's report (a fault, a hang, an internal
 *             assertion), or aborted with no report;
 *   missed    no report and no end: the misuse went through.  "dup" marks a missed run whose
 *             probe (the allocations after the misuse) got the same block twice.
 * Sizes: a small class (64 B), a large class (malloc 4 KiB, a cache of 1 KiB objects, the
 * large slab layout) and a big block (malloc 64 KiB, the heap arena); a cache has no big
 * blocks.  Modes: the default (abort_on_error=1), report-and-continue (abort_on_error=0),
 * PRUDENCE_DEBUG=all and option hardened (abort_on_error=1).  The environment of the child is set to the mode alone.
 *
 *   misuse_catalogue            the table and the totals per mode
 *   misuse_catalogue --floor    the same, then checks the floor below (exit 1 under it)
 *   misuse_catalogue --one MISUSE API SIZE   one run, in this process (what a child does)
 *
 * The floor is what the allocator reaches today: a regression (a misuse that was ended and
 * now is only reported or missed, a report that goes on in a mode that aborts) fails the
 * test.
 */
// prd-test-labels: misuse no-tsan no-asan
// (no-asan: under ASan the tool, not the allocator, reports most misuses and ends the child,
// so the floor would count the tool; no-tsan: 165 children, of which one has a second thread,
// and TSan would only make them slower)
// prd-test-run: misuse_catalogue --floor
// prd-test-timeout: 600
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prd_child.h"
#include "prudence.h"

/* ---- the two APIs, behind one interface -------------------------------------------------- */
enum { API_MALLOC, API_CACHE };
static const char *const api_names[] = { "malloc", "cache" };

static int api;
static size_t size;
static prd_cache_t *cache, *cache_other;

static void *m_alloc(void)
{
  return api == API_MALLOC ? prd_malloc(size) : prd_cache_alloc(cache, PRD_SLEEP);
}

static void m_free(void *p)
{
  if (api == API_MALLOC)
    prd_free(p);
  else
    prd_cache_free(cache, p);
}

static void m_defer(void *p)
{
  if (api == API_MALLOC)
    prd_free_deferred(p);
  else
    prd_cache_free_deferred(cache, p);
}

/* ---- the misuses --------------------------------------------------------------------------- */
static void *thread_free(void *p)
{
  m_free(p);
  return NULL;
}

static void mu_dfree_now(void)
{
  void *p = m_alloc();
  m_free(p);
  m_free(p);
}

static void mu_dfree_later(void)
{
  void *p = m_alloc(), *q = m_alloc();
  m_free(p);
  m_free(q);
  m_free(p);
}

static void mu_dfree_thread(void)
{
  void *p = m_alloc();
  pthread_t t;
  if (pthread_create(&t, NULL, thread_free, p) != 0)
    _exit(2);
  pthread_join(t, NULL);
  m_free(p);
}

static void mu_dfree_deferred(void)
{
  void *p = m_alloc();
  m_defer(p);
  m_free(p);
}

static void mu_defer_freed(void)
{
  void *p = m_alloc();
  m_free(p);
  m_defer(p);
}

static void mu_foreign(void)
{
  /* memory the allocator never owned, with a plausible alignment */
  char *map = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    _exit(2);
  m_free(map + 4096);
}

static void mu_interior(void)
{
  char *p = m_alloc();
  m_free(p + 16);
}

static void mu_stack(void)
{
  _Alignas(64) char local[256];
  memset(local, 0, sizeof(local));
  m_free(local + 64);
}

static void mu_write_after_free(void)
{
  char *p = m_alloc();
  m_free(p);
  memset(p, 0x5a, size);
}

static void mu_overflow(void)
{
  /* two neighbours, the first written 16 bytes past its end, then both freed */
  char *p = m_alloc(), *q = m_alloc();
  memset(p, 0x5a, size + 16);
  m_free(p);
  m_free(q);
}

static void mu_realloc_freed(void)
{
  void *p = prd_malloc(size);
  prd_free(p);
  void *q = prd_realloc(p, size);
  (void)q;
}

static void mu_wrong_cache(void)
{
  void *p = prd_cache_alloc(cache_other, PRD_SLEEP);
  prd_cache_free(cache, p);
}

static const struct misuse {
  const char *mu_name;
  void (*mu_fn)(void);
  int mu_api;          /* API_MALLOC or API_CACHE: only that one; -1: both */
} misuses[] = {
  { "dfree-now", mu_dfree_now, -1 },
  { "dfree-later", mu_dfree_later, -1 },
  { "dfree-thread", mu_dfree_thread, -1 },
  { "dfree-deferred", mu_dfree_deferred, -1 },
  { "defer-freed", mu_defer_freed, -1 },
  { "foreign", mu_foreign, -1 },
  { "interior", mu_interior, -1 },
  { "stack", mu_stack, -1 },
  { "write-after-free", mu_write_after_free, -1 },
  { "overflow", mu_overflow, -1 },
  { "realloc-freed", mu_realloc_freed, API_MALLOC },
  { "wrong-cache", mu_wrong_cache, API_CACHE },
};
#define NMISUSES (sizeof(misuses) / sizeof(misuses[0]))

static const size_t malloc_sizes[] = { 64, 4096, 65536 };
static const size_t cache_sizes[] = { 64, 1024 };

/* After the misuse: a grace period (deferred buffers come back), then enough allocations to
 * empty what the misuse touched (magazines, the slab); the same block twice is a block that
 * two owners will write.  Exit 3 then, else 0. */
static int probe(void)
{
  enum { N = 512 };
  static void *got[N];
  prd_synchronize_rcu();
  prd_rcu_barrier();
  for (int i = 0; i < N; i++) {
    got[i] = m_alloc();
    for (int j = 0; j < i; j++)
      if (got[i] != NULL && got[j] == got[i]) {
        fprintf(stderr, "misuse: block %p handed out twice\n", got[i]);
        return 3;
      }
  }
  return 0;
}

static int run_one(const char *name, const char *apiname, const char *sz)
{
  api = strcmp(apiname, "cache") == 0 ? API_CACHE : API_MALLOC;
  size = strtoul(sz, NULL, 10);
  if (api == API_CACHE) {
    cache = prd_cache_create("misuse", size, 0, NULL, NULL, NULL, NULL, NULL, 0);
    cache_other = prd_cache_create("misuse-other", size, 0, NULL, NULL, NULL, NULL, NULL, 0);
    if (cache == NULL || cache_other == NULL)
      return 2;
  }
  for (size_t i = 0; i < NMISUSES; i++)
    if (strcmp(misuses[i].mu_name, name) == 0) {
      misuses[i].mu_fn();
      return probe();
    }
  return 2;
}

/* ---- the parent: one child per run, classified ------------------------------------------- */
enum { O_ENDED, O_REPORTED, O_CRASHED, O_MISSED, O_DUP, O_N };
static const char outcome_letter[O_N] = { 'E', 'R', 'C', 'M', 'D' };

static const struct mode {
  const char *md_name;
  const char *md_options;   /* PRUDENCE_OPTIONS, or NULL */
  const char *md_debug;     /* PRUDENCE_DEBUG, or NULL */
} modes[] = {
  { "default", NULL, NULL },
  { "continue", "abort_on_error=0", NULL },
  { "debug=all", NULL, "all" },
  { "hardened", "hardened=1", NULL },
};
#define NMODES (sizeof(modes) / sizeof(modes[0]))

struct child_args {
  const struct mode *ca_mode;
  const char *ca_misuse, *ca_api;
  char ca_size[24];
};

static void child_exec(void *arg, int fd)
{
  struct child_args *ca = arg;
  dup2(fd, STDERR_FILENO);
  unsetenv("PRUDENCE_OPTIONS");
  unsetenv("PRUDENCE_DEBUG");
  if (ca->ca_mode->md_options != NULL)
    setenv("PRUDENCE_OPTIONS", ca->ca_mode->md_options, 1);
  if (ca->ca_mode->md_debug != NULL)
    setenv("PRUDENCE_DEBUG", ca->ca_mode->md_debug, 1);
  alarm(5);   /* a hang (a freelist made circular by the misuse) is a crash, not a stuck test */
  execl("/proc/self/exe", "misuse_catalogue", "--one", ca->ca_misuse, ca->ca_api, ca->ca_size,
        (char *)NULL);
  _exit(2);
}

static int classify(int status, const char *out)
{
  bool report = strstr(out, "prudence: ") != NULL && strstr(out, "internal assertion") == NULL;
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && report)
    return O_ENDED;
  if (report)
    return O_REPORTED;   /* and went on, whatever happened to it afterwards */
  if (WIFSIGNALED(status))
    return O_CRASHED;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
    return O_DUP;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return O_MISSED;
  return O_CRASHED;   /* the child could not run its misuse */
}

/* The floor, per mode, of the 55 runs (12 misuses, 10 of them through both APIs; 3 malloc
 * sizes, 2 cache sizes): how many the allocator detects, ended where the mode aborts and
 * reported where it goes on, and no report that went on in a mode that aborts.  These are
 * the counts the allocator reaches in Debug and Release builds; raise them as checks are
 * added. */
static const struct floor {
  int fl_ended_min, fl_ended_max;
  int fl_reported_min, fl_reported_max;
} floors[NMODES] = {
  { 41, 55, 0, 0 },    /* default: every report ends the process */
  { 0, 0, 41, 55 },    /* continue: the same misuses reported, none ended */
  { 48, 55, 0, 0 },    /* debug=all */
  { 42, 55, 0, 0 },    /* hardened: the default's, and a big block's overflow */
};

int main(int argc, char **argv)
{
  if (argc == 5 && strcmp(argv[1], "--one") == 0) {
    /* _exit: no exit-time work (the leak report of PRUDENCE_DEBUG=leaks would list the
     * probe's blocks as reports of its own) */
    int rc = run_one(argv[2], argv[3], argv[4]);
    fflush(stdout);
    _exit(rc);
  }
  bool check = argc > 1 && strcmp(argv[1], "--floor") == 0;

  int count[NMODES][O_N];
  memset(count, 0, sizeof(count));
  printf("%-18s %-6s %6s", "misuse", "api", "size");
  for (size_t m = 0; m < NMODES; m++)
    printf(" %10s", modes[m].md_name);
  printf("\n");
  for (size_t i = 0; i < NMISUSES; i++) {
    for (int a = API_MALLOC; a <= API_CACHE; a++) {
      if (misuses[i].mu_api >= 0 && misuses[i].mu_api != a)
        continue;
      const size_t *sizes = a == API_MALLOC ? malloc_sizes : cache_sizes;
      size_t nsizes = a == API_MALLOC ? 3 : 2;
      for (size_t s = 0; s < nsizes; s++) {
        printf("%-18s %-6s %6zu", misuses[i].mu_name, api_names[a], sizes[s]);
        for (size_t m = 0; m < NMODES; m++) {
          struct child_args ca = { &modes[m], misuses[i].mu_name, api_names[a], "" };
          snprintf(ca.ca_size, sizeof(ca.ca_size), "%zu", sizes[s]);
          static char out[1 << 16];
          int st = prd_child_run(child_exec, &ca, out, sizeof(out));
          int o = st < 0 ? O_CRASHED : classify(st, out);
          count[m][o]++;
          printf(" %10c", outcome_letter[o]);
        }
        printf("\n");
        fflush(stdout);
      }
    }
  }
  printf("\nE ended by the allocator, R reported and continued, C crashed without a report, "
         "M missed, D missed and a block handed out twice\n\n");
  printf("%-10s %6s %9s %8s %7s %4s\n", "mode", "ended", "reported", "crashed", "missed", "dup");
  int bad = 0;
  for (size_t m = 0; m < NMODES; m++) {
    int *c = count[m];
    printf("%-10s %6d %9d %8d %7d %4d\n", modes[m].md_name, c[O_ENDED], c[O_REPORTED],
           c[O_CRASHED], c[O_MISSED] + c[O_DUP], c[O_DUP]);
    const struct floor *f = &floors[m];
    if (c[O_ENDED] < f->fl_ended_min || c[O_ENDED] > f->fl_ended_max ||
        c[O_REPORTED] < f->fl_reported_min || c[O_REPORTED] > f->fl_reported_max) {
      printf("  under the floor: ended %d..%d, reported %d..%d\n", f->fl_ended_min,
             f->fl_ended_max, f->fl_reported_min, f->fl_reported_max);
      bad = 1;
    }
  }
  return check ? bad : 0;
}
