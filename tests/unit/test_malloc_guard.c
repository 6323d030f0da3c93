/*
 * test_malloc_guard.c: big blocks (over 16 KiB: the heap arena's large tier and the huge
 * tier of their own mappings) under PRUDENCE_DEBUG=redzone (src/malloc.c section 1c): a
 * write past the end is reported at free or realloc naming the block, its size and the
 * offset; a write past the block's last page faults at once on its guard page;
 * malloc_usable_size is the size asked for; realloc in place, realloc of a huge block and a
 * huge block reused from the kept-block cache keep the checked tail and the guard right.
 * The program re-executes itself with PRUDENCE_DEBUG=redzone (fixed at start-up).
 */
#include <signal.h>

#include "internal.h"
#include "prd_test.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* ---- a write past the end, reported at free ------------------------------------------------ */
static void overrun_child(void *arg)
{
  size_t size = *(size_t *)arg;
  prd_option_set("abort_on_error", "0");
  char *p = prd_malloc(size);
  if (p == NULL || prd_malloc_usable_size(p) != size)
    _exit(2);
  p[size] = 'x';   /* one byte past the end */
  printf("block %p\n", (void *)p);
  fflush(stdout);
  uint64_t before = prd__error_count();
  prd_free(p);
  _exit(prd__error_count() == before + 1 ? 0 : 3);
}

static void check_overrun(size_t size)
{
  static char out[8192];
  int st = prd_test_child(overrun_child, &size, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char want[160];
  void *p = NULL;
  const char *b = strstr(out, "block 0x");
  CHECK(b != NULL && sscanf(b, "block %p", &p) == 1);
  snprintf(want, sizeof(want), "malloc: write past the end of block %p (size %zu) at offset %zu",
           p, size, size);
  CHECK_STR_CONTAINS(out, want);
}

static void test_overrun_large(void)
{
  check_overrun(64 * KIB);
  check_overrun(64 * KIB + 3);   /* odd size: the tail starts mid-word */
}

static void test_overrun_huge(void)
{
  check_overrun(5 * MIB);
}

/* ---- a write past the last page faults ------------------------------------------------------ */
struct walk {
  size_t size;     /* the block's size */
  size_t first;    /* then, when nonzero: freed, and a block of this size taken (kept cache) */
};

static void walk_child(void *arg)
{
  struct walk *w = arg;
  size_t size = w->size;
  char *p = prd_malloc(size);
  if (w->first != 0) {
    prd_free(p);
    size = w->first;
    p = prd_malloc(size);
  }
  if (p == NULL || prd_malloc_usable_size(p) != size)
    _exit(2);
  /* byte by byte from the end: the tail, then the guard page, which must fault within a
   * page and a tag of the end (a store that lands on writable memory goes on) */
  for (size_t k = size; k < size + 2 * prd__os_page_size() + 16; k++)
    ((volatile char *)p)[k] = 1;
  _exit(4);   /* no fault */
}

static void check_walk(size_t size, size_t first)
{
  static char out[4096];
  struct walk w = { size, first };
  int st = prd_test_child(walk_child, &w, out, sizeof(out));
  CHECK(prd_test_segv(st, out));
}

static void test_guard_page(void)
{
  check_walk(64 * KIB, 0);
  check_walk(100 * KIB + 5, 0);
  check_walk(5 * MIB + 1, 0);
}

static void test_guard_after_reuse(void)
{
  /* an 8 MiB block kept after its free serves a 5 MiB request: its guard must follow the
   * 5 MiB, not the 8 */
  check_walk(8 * MIB, 5 * MIB);
  check_walk(5 * MIB, 7 * MIB);   /* a kept smaller block grown by mremap */
}

/* ---- realloc --------------------------------------------------------------------------------- */
static void realloc_child(void *arg)
{
  size_t from = ((size_t *)arg)[0], to = ((size_t *)arg)[1];
  prd_option_set("abort_on_error", "0");
  char *p = prd_malloc(from);
  memset(p, 7, from);
  char *q = prd_realloc(p, to);
  if (q == NULL || prd_malloc_usable_size(q) != to)
    _exit(2);
  for (size_t k = 0; k < (from < to ? from : to); k += 4093)
    if (q[k] != 7)
      _exit(5);
  memset(q, 8, to);   /* every usable byte: no report */
  q[to] = 'x';
  printf("block %p\n", (void *)q);
  fflush(stdout);
  uint64_t before = prd__error_count();
  prd_free(q);
  _exit(prd__error_count() == before + 1 ? 0 : 3);
}

static void check_realloc(size_t from, size_t to)
{
  static char out[8192];
  size_t arg[2] = { from, to };
  int st = prd_test_child(realloc_child, arg, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  void *p = NULL;
  const char *b = strstr(out, "block 0x");
  CHECK(b != NULL && sscanf(b, "block %p", &p) == 1);
  char want[160];
  snprintf(want, sizeof(want), "malloc: write past the end of block %p (size %zu) at offset %zu",
           p, to, to);
  CHECK_STR_CONTAINS(out, want);
}

static void test_realloc(void)
{
  check_realloc(100 * KIB, 90 * KIB);        /* in place, shrinking */
  check_realloc(100 * KIB, 100 * KIB + 9);   /* in place, growing within the data pages */
  check_realloc(40 * KIB, 300 * KIB);        /* moved */
  check_realloc(5 * MIB, 6 * MIB + 1);       /* huge to huge (no mremap growth) */
  check_realloc(6 * MIB, 5 * MIB);           /* huge, shrinking in place */
  check_realloc(100 * KIB, 20 * KIB);        /* big to big, shrinking by more than half */
}

static void realloc_overrun_child(void *arg)
{
  size_t to = *(size_t *)arg;
  prd_option_set("abort_on_error", "0");
  char *p = prd_malloc(100 * KIB);
  p[100 * KIB + 1] = 'x';
  uint64_t before = prd__error_count();
  p = prd_realloc(p, to);   /* the overrun is found by realloc */
  _exit(prd__error_count() > before && p != NULL ? 0 : 3);
}

static void test_realloc_reports(void)
{
  size_t to[] = { 90 * KIB, 100 * KIB + 9 };   /* shrinking, growing in place */
  for (int i = 0; i < 2; i++) {
    static char out[8192];
    int st = prd_test_child(realloc_overrun_child, &to[i], out, sizeof(out));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_STR_CONTAINS(out, "(size 102400) at offset 102401 (realloc");
  }
}

/* A buffer grown step by step (in place within its pages, copied with room to grow, huge
 * ones resized by mremap): at every step the usable size is the size asked for, the contents
 * are kept, and writing every usable byte raises no report; one byte more is reported. */
static void grow_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  size_t size = 20 * KIB;
  unsigned char *p = prd_malloc(size);
  memset(p, 1, size);
  uint64_t before = prd__error_count();
  while (size < 12 * MIB) {
    size_t next = size + size / 8 + 4091;
    p = prd_realloc(p, next);
    if (p == NULL || prd_malloc_usable_size(p) != next)
      _exit(2);
    for (size_t k = 0; k < size; k += 997)
      if (p[k] != 1)
        _exit(5);
    memset(p + size, 1, next - size);
    size = next;
  }
  if (prd__error_count() != before)
    _exit(6);
  p[size] = 2;
  prd_free(p);
  _exit(prd__error_count() == before + 1 ? 0 : 3);
}

static void test_realloc_steps(void)
{
  static char out[8192];
  int st = prd_test_child(grow_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "malloc: write past the end of block");
}

/* ---- calloc and the usable size --------------------------------------------------------------- */
static void test_calloc_usable(void)
{
  for (int round = 0; round < 2; round++) {   /* the second takes kept blocks */
    size_t sizes[] = { 17 * KIB, 64 * KIB - 1, 5 * MIB + 7 };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
      unsigned char *p = prd_calloc(1, sizes[i]);
      CHECK(p != NULL);
      CHECK_EQ(prd_malloc_usable_size(p), sizes[i]);
      size_t nonzero = 0;
      for (size_t k = 0; k < sizes[i]; k++)
        nonzero += p[k] != 0;
      CHECK_EQ(nonzero, 0);
      memset(p, 0xee, sizes[i]);
      uint64_t before = prd__error_count();
      prd_free(p);
      CHECK_EQ(prd__error_count(), before);
    }
  }
}

int main(int argc, char **argv)
{
  (void)argc;
  if (getenv("PRUDENCE_DEBUG") == NULL) {
    setenv("PRUDENCE_DEBUG", "redzone", 1);
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  RUN(test_overrun_large);
  RUN(test_overrun_huge);
  RUN(test_guard_page);
  RUN(test_guard_after_reuse);
  RUN(test_realloc);
  RUN(test_realloc_reports);
  RUN(test_realloc_steps);
  RUN(test_calloc_usable);
  return prd_test_done();
}
