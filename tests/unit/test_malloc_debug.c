/*
 * test_malloc_debug.c: the debugging features of the slab layer (PRUDENCE_DEBUG) work for
 * malloc'd memory: a double free of a small block, a write past the end of a block, a write
 * to a freed block are each reported naming the size-class cache.  The program re-executes
 * itself with PRUDENCE_DEBUG set, because the flags apply to caches created after start-up.
 */
#include <errno.h>
#include <signal.h>

#include "internal.h"
#include "prd_test.h"

static void double_free(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  char *p = prd_malloc(24);
  prd_free(p);
  uint64_t before = prd__error_count();
  prd_free(p);
  _exit(prd__error_count() > before ? 0 : 3);
}

static void test_double_free(void)
{
  static char out[8192];
  int st = prd_test_child(double_free, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache malloc-32: double free of buffer");
}

static void overrun(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  char *p = prd_malloc(40);
  size_t u = prd_malloc_usable_size(p);
  p[u] = 'x';   /* one past the usable size: the redzone */
  uint64_t before = prd__error_count();
  prd_free(p);
  _exit(prd__error_count() > before ? 0 : 3);
}

static void test_redzone(void)
{
  static char out[8192];
  int st = prd_test_child(overrun, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "cache malloc-48: redzone violation");
}

static void use_after_free(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  char *p = prd_malloc(100);
  prd_free(p);
  p[10] = 1;   /* a write to freed memory, found when the buffer is handed out again */
  uint64_t before = prd__error_count();
  for (int i = 0; i < 1000 && prd__error_count() == before; i++)
    (void)prd_malloc(100);
  _exit(prd__error_count() > before ? 0 : 3);
}

static void test_patterns(void)
{
  static char out[8192];
  int st = prd_test_child(use_after_free, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "malloc-112");
  CHECK_STR_CONTAINS(out, "deadbeef");
}

/* realloc of a freed block of a debugging class.  The defect this guards: realloc tested the
 * free mark, which debugging caches do not have, so it copied the freed block (with pagebuf,
 * a read of a page made inaccessible: SIGSEGV and no message) and then reported a "double
 * free".  It must report the realloc, return NULL with EINVAL, and leave the block alone.
 * The 3000-byte class is first made here, after the option adds pagebuf. */
static void realloc_freed(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  if (arg != NULL)
    prd_option_set("debug", "0x270");   /* patterns, redzone, verify, pagebuf */
  size_t sz = arg != NULL ? 3000 : 100;
  char *p = prd_malloc(sz);
  prd_free(p);
  uint64_t before = prd__error_count();
  errno = 0;
  void *q = prd_realloc(p, 2 * sz);
  _exit(q == NULL && errno == EINVAL && prd__error_count() == before + 1 ? 0 : 3);
}

static void test_realloc_freed(void)
{
  static char out[8192];
  for (int pagebuf = 0; pagebuf < 2; pagebuf++) {
    int st = prd_test_child(realloc_freed, pagebuf ? (void *)1 : NULL, out, sizeof(out));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_STR_CONTAINS(out, pagebuf ? "cache malloc-3072: realloc of freed block"
                                    : "cache malloc-112: realloc of freed block");
  }
}

static void test_fresh_pattern(void)
{
  /* a new block holds 0xbaddcafe (uninitialized), not zeroes */
  uint32_t *p = prd_malloc(64);
  CHECK(p != NULL && p[0] == 0xbaddcafeu && p[15] == 0xbaddcafeu);
  prd_free(p);
}

int main(int argc, char **argv)
{
  (void)argc;
  if (getenv("PRUDENCE_DEBUG") == NULL) {
    setenv("PRUDENCE_DEBUG", "patterns,redzone,verify", 1);
    execv("/proc/self/exe", argv);
    perror("execv");
    return 1;
  }
  RUN(test_double_free);
  RUN(test_redzone);
  RUN(test_patterns);
  RUN(test_realloc_freed);
  RUN(test_fresh_pattern);
  return prd_test_done();
}
