/* test_stats_link: a program linked with the static library that uses only the object-cache
 * API (no prd_stats_* call) still prints the statistics at exit when PRUDENCE_STATS=1 and
 * writes the PRUDENCE_STATS_FILE snapshot.  Guards against stats.c being left out of a static
 * link: no lower file calls it for these triggers (its own constructor arms them), so only
 * the anchor options.c names (PRD__STATS_LINK) makes the linker take it. */
// prd-test-labels: unit no-preload
// (no-preload: under LD_PRELOAD of libprudence-malloc a second copy of the library reads
//  PRUDENCE_STATS_FILE too and writes its own snapshot at exit)
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prudence.h"
#include "prd_test.h"

static char out[1 << 16];
static char file[1 << 20];
static char path[256];

static int child_workload(void)
{
  prd_cache_t *c = prd_cache_create("stats_link", 40, 0, NULL, NULL, NULL, NULL, NULL, 0);
  if (c == NULL)
    return 2;
  void *p = prd_cache_alloc(c, PRD_SLEEP);
  if (p == NULL)
    return 3;
  prd_cache_free(c, p);
  return 0;   /* the cache stays: its row is in the table printed at exit */
}

static void exec_self(void *arg)
{
  (void)arg;
  setenv("PRUDENCE_STATS", "1", 1);
  setenv("PRUDENCE_STATS_FILE", path, 1);
  execl("/proc/self/exe", "/proc/self/exe", "--workload", (char *)NULL);
  _exit(127);
}

static void test_at_exit_triggers(void)
{
  int st = prd_test_child(exec_self, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "caches:\nname ");   /* PRUDENCE_STATS=1: the table on stderr */
  CHECK_STR_CONTAINS(out, "\nstats_link ");
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  if (fd < 0)
    return;
  ssize_t n = read(fd, file, sizeof(file) - 1);
  close(fd);
  CHECK(n > 0);
  file[n > 0 ? n : 0] = '\0';
  CHECK_STR_CONTAINS(file, "\"name\":\"stats_link\"");   /* PRUDENCE_STATS_FILE at exit */
  unlink(path);
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--workload") == 0)
    return child_workload();
  /* in the working directory (ctest: the build directory) */
  snprintf(path, sizeof(path), "prd_test_stats_link.%ld.json", (long)getpid());
  RUN(test_at_exit_triggers);
  return prd_test_done();
}
