/*
 * ids.c: vmem for something that is not memory.  An arena of the integers 1..32 hands out
 * process-id-like numbers with next-fit, so a freed id is not handed out again soon (a
 * process that exits does not lend its pid to the next one at once), and wraps around when it
 * reaches the end.  The arena never touches the integers: they are just names.
 *
 * It checks its own output and exits non-zero if any answer differs from what next-fit must
 * give.  Built and run by ctest (label example) and against the installed library.
 */
#include <errno.h>
#include <prudence.h>
#include <stdint.h>
#include <stdio.h>

#define PID_MAX 32   /* small, so that the example wraps around */

static int failures;

static void expect(const char *what, void *got, uintptr_t want)
{
  uintptr_t g = (uintptr_t)got;
  printf("  %-52s %3lu%s\n", what, (unsigned long)g, g == want ? "" : "   <-- WRONG");
  if (g != want)
    failures++;
}

static void *next_pid(prd_vmem_t *pids)
{
  return prd_vmem_alloc(pids, 1, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT);
}

static void show_free(void *arg, void *addr, size_t size)
{
  (void)arg;
  printf(" [%lu..%lu]", (unsigned long)(uintptr_t)addr,
         (unsigned long)((uintptr_t)addr + size - 1));
}

int main(void)
{
  prd_vmem_t *pids = prd_vmem_create("pids", (void *)1, PID_MAX, 1, NULL, NULL, NULL, 0,
                                     PRD_VM_SLEEP);
  if (pids == NULL) {
    perror("prd_vmem_create");
    return 1;
  }
  printf("pids: an arena of the integers 1..%d, next-fit\n", PID_MAX);
  char what[64];
  for (uintptr_t i = 1; i <= 10; i++) {
    snprintf(what, sizeof(what), "process %lu starts, gets pid", (unsigned long)i);
    expect(what, next_pid(pids), i);
  }
  prd_vmem_free(pids, (void *)3, 1);
  prd_vmem_free(pids, (void *)5, 1);
  printf("  pids 3 and 5 exit\n");
  expect("the next process gets (not 3: next-fit moves on)", next_pid(pids), 11);
  for (uintptr_t i = 12; i <= PID_MAX; i++)
    if (next_pid(pids) != (void *)i)
      failures++;
  printf("  pids 12..%d handed out\n", PID_MAX);
  expect("at the end it wraps around to the lowest free pid", next_pid(pids), 3);
  expect("and then", next_pid(pids), 5);
  errno = 0;
  void *none = next_pid(pids);
  expect("all 32 in use: no pid (NULL)", none, 0);
  if (errno != ENOMEM)
    failures++;
  for (uintptr_t i = 8; i < 16; i++)
    prd_vmem_free(pids, (void *)i, 1);
  printf("  pids 8..15 exit\n");
  void *block = prd_vmem_xalloc(pids, 4, 4, 0, 0, NULL, NULL, PRD_VM_NOSLEEP);
  expect("four consecutive pids aligned to 4 (xalloc) start at", block, 8);
  expect("integers in use", (void *)(uintptr_t)prd_vmem_size(pids, PRD_VMEM_ALLOC), 28);
  printf("  free ranges:");
  prd_vmem_walk(pids, PRD_VMEM_FREE, show_free, NULL);
  printf("\n");
  prd_vmem_xfree(pids, block, 4);
  for (uintptr_t i = 1; i <= PID_MAX; i++)
    if (i < 8 || i >= 16)
      prd_vmem_free(pids, (void *)i, 1);
  expect("after every process exits, integers in use",
         (void *)(uintptr_t)prd_vmem_size(pids, PRD_VMEM_ALLOC), 0);
  prd_vmem_destroy(pids);
  printf("%s\n", failures == 0 ? "ids: all answers as expected" : "ids: WRONG ANSWERS");
  return failures == 0 ? 0 : 1;
}
