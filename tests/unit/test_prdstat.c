/* tools/prdstat on real snapshots: a child runs a workload with PRUDENCE_STATS_FILE set and
 * prdstat's table of the file it leaves is compared with the expected rows; sorting, column
 * selection, --json pass-through, rates from a series, --watch refreshing as new snapshots
 * replace the file (bounded by --iterations, synchronized through its output, no sleeps),
 * --plot's PNG (both y axes from 0), and the errors for a bad column or a file that is not a
 * snapshot. */
// prd-test-labels: no-preload
// prd-test-timeout: 300
// (300: about eight prdstat --plot runs, each importing matplotlib, 5-6 s apiece under load)
// (no-preload: under LD_PRELOAD of libprudence-malloc the preloaded copy of the library writes
//  its own snapshot, with its malloc caches, to the same PRUDENCE_STATS_FILE)
#include <libgen.h>
#include <sys/stat.h>

#include "internal.h"
#include "prd_test.h"

static char prdstat[1024];
static char dir[256];
static char out[1 << 18];

/* Runs a shell command; its stdout and stderr in out; returns the exit status. */
#define run(...) prd_test_shell(out, sizeof(out), __VA_ARGS__)

/* The lines of out from "caches:" on, with runs of spaces squeezed to one. */
static void squeeze(char *dst, size_t len, const char *from)
{
  const char *p = strstr(out, from);
  size_t n = 0;
  for (; p != NULL && *p != '\0' && n + 1 < len; p++) {
    if (*p == ' ' && (n == 0 || dst[n - 1] == ' '))
      continue;
    if (*p == '\n' && n > 0 && dst[n - 1] == ' ')
      n--;
    dst[n++] = *p;
  }
  dst[n] = '\0';
}

/* Whether the file at path begins with PNG's signature. */
static bool is_png(const char *path)
{
  unsigned char magic[8] = { 0 };
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return false;
  bool ok = fread(magic, 1, sizeof(magic), f) == sizeof(magic) &&
            memcmp(magic, "\x89PNG\r\n\x1a\n", sizeof(magic)) == 0;
  fclose(f);
  return ok;
}

static void workload(void)
{
  /* the figures checked below are the slab layer's: no magazines parking the frees */
  prd_option_set("magazines", "0");
  prd_cache_t *a = prd_cache_create("ps_objects", 120, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *b = prd_cache_create("ps_small", 16, 0, NULL, NULL, NULL, NULL, NULL, 0);
  void *pa[1000];
  for (int i = 0; i < 1000; i++)
    pa[i] = prd_cache_alloc(a, PRD_SLEEP);
  for (int i = 0; i < 400; i++)
    prd_cache_free(a, pa[i]);
  for (int i = 0; i < 10; i++)
    (void)prd_cache_alloc(b, PRD_SLEEP);
  /* exits with them live: the snapshot at exit shows them */
}

static void test_table_of_a_real_run(void)
{
  char snap[512];
  snprintf(snap, sizeof(snap), "%s/run.json", dir);
  CHECK_EQ(run("PRUDENCE_STATS_FILE=%s /proc/%ld/exe --workload", snap, (long)getpid()), 0);
  struct stat st;
  CHECK(stat(snap, &st) == 0 && st.st_size > 0);

  CHECK_EQ(run("%s %s --columns name,buf_size,allocs,frees,bufs_inuse --no-arenas", prdstat,
               snap), 0);
  char got[4096];
  squeeze(got, sizeof(got), "caches:");
  /* sorted by slab_bytes, the largest first (the default) */
  CHECK_STR_CONTAINS(got, "caches:\n"
                          "name buf_size allocs frees bufs_inuse\n"
                          "ps_objects 120 1000 400 600\n"
                          "ps_small 16 10 0 10\n");
  CHECK(strstr(out, "prd_slab") == NULL);   /* internal caches only with --internal */
  CHECK(strstr(out, "arenas:") == NULL);

  CHECK_EQ(run("%s %s --columns name,allocs --sort allocs --asc --no-arenas", prdstat, snap), 0);
  squeeze(got, sizeof(got), "caches:");
  CHECK_STR_CONTAINS(got, "name allocs\nps_small 10\nps_objects 1000\n");

  CHECK_EQ(run("%s %s --internal --sort name --asc", prdstat, snap), 0);
  CHECK_STR_CONTAINS(out, "\nprd_slab ");
  CHECK_STR_CONTAINS(out, "\narenas:\nname ");
  CHECK_STR_CONTAINS(out, "\nheap ");
  CHECK(strstr(out, "\nps_objects ") < strstr(out, "\nps_small "));

  /* --json passes the document through unchanged */
  CHECK_EQ(run("%s %s --json | cmp - %s", prdstat, snap, snap), 0);

  /* errors: a bad column, a file that is not a snapshot, a missing file */
  CHECK(run("%s %s --sort no_such_field", prdstat, snap) != 0);
  CHECK_STR_CONTAINS(out, "no column named 'no_such_field'");
  CHECK(strstr(out, "caches:") == NULL);
  CHECK(run("%s %s --columns name,bogus", prdstat, snap) != 0);
  CHECK_STR_CONTAINS(out, "no column named bogus");
  CHECK(run("echo '{\"a\":1}' | %s -", prdstat) != 0);
  CHECK_STR_CONTAINS(out, "not a prudence statistics snapshot");
  /* JSON that is no object, and bytes that are not UTF-8: the same message, exit status 1 (a
   * Python traceback once) */
  static const char *const not_snapshots[] = { "5", "null", "true", "\"text\"", "[5]",
                                               "{\"schema\":\"caf\\351\"}" };
  for (size_t i = 0; i < PRD_ARRAY_SIZE(not_snapshots); i++) {
    CHECK_EQ(run("printf '%s' | %s -", not_snapshots[i], prdstat), 1);
    CHECK_STR_CONTAINS(out, "not a prudence statistics snapshot");
    CHECK(strstr(out, "Traceback") == NULL);
  }
  CHECK_EQ(run("printf '\\351t\\351' > %s/latin1.json && %s %s/latin1.json", dir, prdstat,
               dir), 1);
  CHECK_STR_CONTAINS(out, "latin1.json: line 1 is not JSON");
  CHECK(strstr(out, "Traceback") == NULL);
  CHECK(run("%s %s/missing.json", prdstat, dir) != 0);
  CHECK_STR_CONTAINS(out, "missing.json");
  /* a line that is not JSON names the file; so does --watch, which ends on a file that is
   * not a snapshot (it waited for ever, silent, once); --cache goes with --plot */
  CHECK_EQ(run("printf 'x\\n{}\\n' > %s/notjson.txt && timeout -k 5 20 %s %s/notjson.txt", dir,
               prdstat, dir), 1);
  CHECK_STR_CONTAINS(out, "notjson.txt: line 1 is not JSON");
  CHECK_EQ(run("timeout -k 5 20 %s %s/notjson.txt --watch --interval 0.05", prdstat, dir), 1);
  CHECK_STR_CONTAINS(out, "notjson.txt: line 1 is not JSON");
  /* one line only: it was taken for a snapshot being appended, and --watch waited for ever */
  CHECK_EQ(run("echo 'hello world' > %s/oneline.txt && timeout -k 5 20 %s %s/oneline.txt "
               "--watch --interval 0.05", dir, prdstat, dir), 1);
  CHECK_STR_CONTAINS(out, "oneline.txt: line 1 is not JSON");
  CHECK(run("%s %s --cache ps_objects", prdstat, snap) != 0);
  CHECK_STR_CONTAINS(out, "--cache goes with --plot");
  /* a missing file under --watch: waited for, said once */
  /* 5 s: Python's start alone took up to 0.9 s under load, and the message comes after it */
  CHECK_EQ(run("timeout -k 5 5 %s %s/missing.json --watch --interval 0.05", prdstat, dir), 124);
  CHECK_STR_CONTAINS(out, "missing.json: No such file or directory (waiting for it)");
  unlink(snap);
}

/* Snapshots prdstat cannot read as version 1 (a later version may rename fields), or whose
 * fields prdstat reads have another type, and --watch on a file without a snapshot: a message
 * that says which, exit status 1. */
static void test_bad_snapshots(void)
{
#define SNAP "{\"schema\":\"prudence-stats\",\"version\":"
  CHECK_EQ(run("echo '" SNAP "99}' | %s -", prdstat), 1);
  CHECK_STR_CONTAINS(out, "snapshot version 99 is not supported (this prdstat reads version 1)");
  CHECK(strstr(out, "prudence pid") == NULL);
  CHECK_EQ(run("echo '" SNAP "\"1\"}' | %s -", prdstat), 1);
  CHECK_STR_CONTAINS(out, "malformed snapshot: \"version\" is \"1\", not a whole number");
  CHECK_EQ(run("echo '" SNAP "1,\"caches\":[{\"name\":\"x\"}],"
               "\"arenas\":\"no\"}' | %s -", prdstat), 1);
  CHECK_STR_CONTAINS(out, "malformed snapshot: \"arenas\" is not a list of objects");
  CHECK(strstr(out, "no column") == NULL && strstr(out, "Traceback") == NULL);
  CHECK_EQ(run("echo '" SNAP "1,\"caches\":[5]}' | %s -", prdstat), 1);
  CHECK_STR_CONTAINS(out, "malformed snapshot: \"caches\" is not a list of objects with");
  CHECK_EQ(run("echo '" SNAP "1,\"time\":\"noon\"}' | %s -", prdstat), 1);
  CHECK_STR_CONTAINS(out, "malformed snapshot: \"time\" is not a number");
  /* an explicit null, and a field deeper than the top level: named malformed, no traceback */
  CHECK_EQ(run("echo '" SNAP "1,\"caches\":null}' | %s -", prdstat), 1);
  CHECK_STR_CONTAINS(out, "malformed snapshot: \"caches\" is not a list");
  CHECK_EQ(run("echo '" SNAP "1,\"os\":{\"mapped_bytes\":\"lots\"},\"caches\":[]}' | %s -",
               prdstat), 1);
  CHECK_STR_CONTAINS(out, "malformed snapshot (");
  CHECK(strstr(out, "Traceback") == NULL);
  /* caches without the default sort column: shown unsorted; one named is still required */
  CHECK_EQ(run("echo '" SNAP "1,\"caches\":[{\"name\":\"x\"}]}' | %s -",
               prdstat), 0);
  CHECK_STR_CONTAINS(out, "caches:\nname\nx\n");
  CHECK_EQ(run("echo '" SNAP "1,\"caches\":[{\"name\":\"x\"}]}' | %s - "
               "--sort slab_bytes", prdstat), 1);
  CHECK_STR_CONTAINS(out, "no column named 'slab_bytes'");
#undef SNAP
  /* --watch on a file that holds no snapshot: waited for a bounded time, said once, then
   * ended as not a snapshot; a negative --iterations and a NaN --interval are refused */
  CHECK_EQ(run(": > %s/empty.json && timeout -k 5 30 %s %s/empty.json --watch --interval 0.05",
               dir, prdstat, dir), 1);
  CHECK_STR_CONTAINS(out, "empty.json: no snapshot yet (waiting for one, 10 s at most)\n"
                          "prdstat: ");
  CHECK_STR_CONTAINS(out, "empty.json: no snapshot in 10 s: not a prudence statistics snapshot");
  CHECK_EQ(run("timeout -k 5 20 %s %s/empty.json --watch --iterations -1", prdstat, dir), 1);
  CHECK_STR_CONTAINS(out, "--iterations must be 0 (until interrupted) or more");
  CHECK_EQ(run("timeout -k 5 20 %s %s/empty.json --watch --interval nan", prdstat, dir), 1);
  CHECK_STR_CONTAINS(out, "--interval must be positive");
  CHECK(strstr(out, "Traceback") == NULL);
  char empty[512];
  snprintf(empty, sizeof(empty), "%s/empty.json", dir);
  unlink(empty);
}

/* A series from this process: prd_stats_json appended to a stream after each phase. */
static void test_series_rates_and_plot(void)
{
  char series[512];
  snprintf(series, sizeof(series), "%s/series.jsonl", dir);
  FILE *f = fopen(series, "w");
  /* slab-layer counts: the magazine layer would park the frees */
  prd_cache_t *c = prd_cache_create("ps_series", 256, 0, NULL, NULL, NULL, NULL, NULL,
                                    PRD_CACHE_NOMAGAZINE);
  prd_cache_t *dc = prd_cache_create("ps_deferred", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  static void *bufs[4000];
  int n = 0;
  for (int phase = 0; phase < 5; phase++) {
    int target = phase < 3 ? (phase + 1) * 1000 : (5 - phase) * 1000;
    while (n < target)
      bufs[n++] = prd_cache_alloc(c, PRD_SLEEP);
    while (n > target)
      prd_cache_free(c, bufs[--n]);
    /* and a deferred free, in a cache of its own: latent until a grace period has passed */
    prd_cache_free_deferred(dc, prd_cache_alloc(dc, PRD_SLEEP));
    CHECK_EQ(prd_stats_json(f), 0);
  }
  fclose(f);
  /* the last snapshot, with rates since the one before it */
  CHECK_EQ(run("%s %s --columns name,allocs,frees,allocs/s,frees/s --no-arenas", prdstat,
               series), 0);
  CHECK_STR_CONTAINS(out, "allocs/s");
  char got[4096];
  squeeze(got, sizeof(got), "\nps_series ");
  double allocs = 0, frees = 0, ar = -1, fr = -1;
  CHECK_EQ(sscanf(got, "\nps_series %lf %lf %lf %lf", &allocs, &frees, &ar, &fr), 4);
  CHECK(allocs == 3000 && frees == 2000);
  CHECK(ar == 0 && fr > 0);   /* the last phase only freed */
  /* an incomplete last line (a writer in mid-append) is skipped */
  f = fopen(series, "a");
  fputs("{\"schema\":\"prudence-stats\",\"caches\":[{\"na", f);
  fclose(f);
  CHECK_EQ(run("%s %s --columns name,allocs --no-arenas", prdstat, series), 0);
  CHECK_STR_CONTAINS(out, "ps_series");

  if (run("/usr/bin/python3 -c 'import matplotlib'") != 0) {
    printf("# matplotlib missing: --plot not tested (make deps installs python3-matplotlib)\n");
  } else {
    char png[512];
    snprintf(png, sizeof(png), "%s/series.png", dir);
    CHECK_EQ(run("%s %s --plot %s --cache ps_series", prdstat, series, png), 0);
    CHECK_STR_CONTAINS(out, "5 snapshots");
    CHECK_STR_CONTAINS(out, "latent: latent_cache_objs, latent_slab_objs");
    /* both y axes from 0: the memory held (0.25 to 0.75 MiB here) would otherwise be drawn
     * on an axis starting near its smallest value */
    double mlo = -1, mhi = -1, llo = -1, lhi = -1;
    const char *axes = strstr(out, "y axes: ");
    CHECK(axes != NULL && sscanf(axes, "y axes: MiB from %lf to %lf, latent from %lf to %lf",
                                 &mlo, &mhi, &llo, &lhi) == 4);
    CHECK(mlo == 0 && mhi > 0.7 && llo == 0 && lhi > 0);
    CHECK_EQ(run("%s %s --plot %s --cache ps_deferred", prdstat, series, png), 0);
    CHECK_STR_CONTAINS(out, "cache ps_deferred, 5 snapshots; latent:");
    axes = strstr(out, "y axes: ");
    CHECK(axes != NULL && sscanf(axes, "y axes: MiB from %lf to %lf, latent from %lf to %lf",
                                 &mlo, &mhi, &llo, &lhi) == 4);
    CHECK(mlo == 0 && mhi > 0 && llo == 0 && lhi > 0);
    CHECK(is_png(png));
    unlink(png);
    /* default: the user cache that held the most memory */
    CHECK_EQ(run("%s %s --plot %s", prdstat, series, png), 0);
    CHECK_STR_CONTAINS(out, "cache ps_series");
    CHECK(run("%s %s --plot %s --cache nosuch", prdstat, series, png) != 0);
    CHECK_STR_CONTAINS(out, "no cache named 'nosuch'");
    unlink(png);
    /* the file named is the file written, and the one said: a name without an extension too
     * (a PNG; matplotlib left to itself writes NAME.png) */
    CHECK_EQ(run("cd %s && %s %s --plot plain", dir, prdstat, series), 0);
    CHECK_STR_CONTAINS(out, "prdstat: wrote plain (cache ps_series");
    snprintf(png, sizeof(png), "%s/plain", dir);
    CHECK(is_png(png));
    unlink(png);
    CHECK_EQ(run("test -e %s/plain.png", dir), 1);
    /* a file that cannot be written: one message naming it and the error, exit status 1, no
     * traceback, nothing written (a directory is not taken for DIR.png) */
    CHECK_EQ(run("%s %s --plot %s/nodir/p.png", prdstat, series, dir), 1);
    CHECK_STR_CONTAINS(out, "/nodir/p.png: No such file or directory\n");
    CHECK(strstr(out, "Traceback") == NULL && strstr(out, "wrote") == NULL);
    CHECK_EQ(run("%s %s --plot %s", prdstat, series, dir), 1);
    CHECK_STR_CONTAINS(out, ": is a directory (--plot names the file to write)\n");
    CHECK_EQ(run("test -e %s.png", dir), 1);
    CHECK_EQ(run("%s %s --plot %s/p.txt", prdstat, series, dir), 1);
    CHECK_STR_CONTAINS(out, "p.txt: matplotlib writes no .txt files (it writes ");
    CHECK_EQ(run("test -e %s/p.txt", dir), 1);
  }
  while (n > 0)
    prd_cache_free(c, bufs[--n]);
  prd_cache_destroy(c);
  prd_cache_destroy(dc);   /* waits for its deferred objects */
  unlink(series);
}

/* --watch: refreshes when a new snapshot replaces the file, with rates. */
static void test_watch(void)
{
  char snap[512], cmd[2048];
  snprintf(snap, sizeof(snap), "%s/watch.json", dir);
  prd_cache_t *c = prd_cache_create("ps_watch", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  static void *bufs[3000];
  int n = 0;
  CHECK_EQ(prd_stats_write_file(snap), 0);
  snprintf(cmd, sizeof(cmd), "%s %s --watch --interval 0.02 --iterations 3 --no-arenas "
           "--columns name,allocs,allocs/s 2>&1", prdstat, snap);
  FILE *w = popen(cmd, "r");
  CHECK(w != NULL);
  if (w == NULL)
    return;
  char line[1024];
  int refreshes = 0;
  size_t got = 0;
  out[0] = '\0';
  while (fgets(line, sizeof(line), w) != NULL) {
    size_t l = strlen(line);
    if (got + l < sizeof(out)) {
      memcpy(out + got, line, l + 1);
      got += l;
    }
    if (strncmp(line, "--- refresh ", 12) == 0) {
      refreshes++;
      /* prdstat has read the file: make the next snapshot (it shows up within --interval) */
      for (int i = 0; i < 1000; i++)
        bufs[n++] = prd_cache_alloc(c, PRD_SLEEP);
      CHECK_EQ(prd_stats_write_file(snap), 0);
    }
  }
  int st = pclose(w);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ(refreshes, 3);
  const char *r2 = strstr(out, "--- refresh 2");
  CHECK(r2 != NULL);
  if (r2 != NULL) {
    const char *row = strstr(r2, "\nps_watch ");
    double allocs = 0, rate = 0;
    CHECK(row != NULL && sscanf(row, "\nps_watch %lf %lf", &allocs, &rate) == 2);
    CHECK(allocs == 1000 && rate > 0);
  }
  while (n > 0)
    prd_cache_free(c, bufs[--n]);
  prd_cache_destroy(c);
  unlink(snap);
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--workload") == 0) {
    workload();
    return 0;
  }
  char exe[1024];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0)
    return 1;
  exe[len] = '\0';
  /* build/bin/prdstat, copied there by cmake; run with Debian's python for matplotlib */
  snprintf(prdstat, sizeof(prdstat), "/usr/bin/python3 %s/prdstat", dirname(exe));
  snprintf(dir, sizeof(dir), "/tmp/prd_test_prdstat.XXXXXX");
  if (mkdtemp(dir) == NULL)
    return 1;
  RUN(test_table_of_a_real_run);
  RUN(test_bad_snapshots);
  RUN(test_series_rates_and_plot);
  RUN(test_watch);
  rmdir(dir);
  return prd_test_done();
}
