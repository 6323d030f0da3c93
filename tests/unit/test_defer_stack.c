/* The stack a deferring program's allocations need.  A thread of a small stack (16 KiB is
 * PTHREAD_STACK_MIN) or a signal handler on an alternate stack allocates with as much room as
 * glibc's malloc needs; a cache with deferrals refills its magazines through defer.c, which
 * must not need much more than the plain path's refill (a magazine's whole array on the stack,
 * 8 KiB, overflowed such threads).  Measured, not guessed: each workload runs in a thread on a
 * stack painted with a pattern, and the depth is where the pattern was overwritten.
 * Not under TSan: its runtime refuses a thread stack under about 900 KiB, and its frames are
 * its own. */
// prd-test-labels: no-tsan
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "prd_test.h"
#include "prudence.h"

#define STACK (256 * 1024)
#define PAINT 0xa5

static void *plain_loop(void *arg)
{
  (void)arg;
  for (int i = 0; i < 20000; i++)
    prd_free(prd_malloc(64 + (size_t)(i % 4) * 8));
  return NULL;
}

static void *deferred_loop(void *arg)
{
  (void)arg;
  for (int i = 0; i < 20000; i++)
    prd_free_deferred(prd_malloc(64 + (size_t)(i % 4) * 8));
  return NULL;
}

/* The deepest stack use of fn in a thread of its own, in bytes. */
static size_t depth(void *(*fn)(void *))
{
  unsigned char *st = mmap(NULL, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
  CHECK(st != MAP_FAILED);
  memset(st, PAINT, STACK);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstack(&at, st, STACK);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, &at, fn, NULL), 0);
  pthread_join(t, NULL);
  pthread_attr_destroy(&at);
  size_t low = 0;   /* the stack grows down: the first byte from the bottom that changed */
  while (low < STACK && st[low] == PAINT)
    low++;
  munmap(st, STACK);
  return STACK - low;
}

static void test_deferred_refill_stack(void)
{
  size_t plain = depth(plain_loop);
  size_t deferred = depth(deferred_loop);
  size_t again = depth(deferred_loop);   /* with the caches grown: refills of whole magazines */
  printf("# stack depth: plain %zu, deferred %zu and %zu bytes\n", plain, deferred, again);
  CHECK(deferred <= plain + 3072);
  CHECK(again <= plain + 3072);
}

int main(void)
{
  RUN(test_deferred_refill_stack);
  return prd_test_done();
}
