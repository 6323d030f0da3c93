/* Statistics output (src/stats.c): the table, the verbose form and the JSON document come from
 * the stats lists; every cache and arena is in them; bad input; atomic snapshot files; the
 * periodic writer and the at-exit triggers (PRUDENCE_STATS, PRUDENCE_STATS_FILE) in a child
 * started with them set; printing while other threads create and destroy caches and arenas. */
// prd-test-labels: no-preload
// (no-preload: under LD_PRELOAD of libprudence-malloc a second copy of the library reads
//  PRUDENCE_STATS_FILE too and writes its own snapshot at exit)
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "internal.h"
#include "prd_test.h"

static char out[1 << 20];

/* Runs fn(fp) on a memory stream and copies what it wrote into out; returns fn's result. */
static int capture(int (*fn)(FILE *, int), int flags)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *ms = open_memstream(&buf, &len);
  if (ms == NULL)
    return -2;
  int rc = fn(ms, flags);
  fclose(ms);
  size_t n = len < sizeof(out) - 1 ? len : sizeof(out) - 1;
  memcpy(out, buf, n);
  out[n] = '\0';
  free(buf);
  return rc;
}

static int json_adapter(FILE *fp, int flags)
{
  (void)flags;
  return prd_stats_json(fp);
}

/* The whitespace-separated field number `col` of the line that starts with `name `. */
static long long table_cell(const char *text, const char *name, int col, char *word, size_t wl)
{
  char key[128];
  snprintf(key, sizeof(key), "\n%s ", name);
  const char *p = strstr(text, key);
  if (p == NULL)
    return -1;
  p++;
  for (int i = 0; i <= col; i++) {
    while (*p == ' ')
      p++;
    size_t n = strcspn(p, " \n");
    if (i == col) {
      snprintf(word, wl, "%.*s", (int)n, p);
      return strtoll(word, NULL, 10);
    }
    p += n;
  }
  return -1;
}

/* Index of column `name` in the header line that follows `section` ("caches:"). */
static int header_col(const char *text, const char *section, const char *name)
{
  const char *p = strstr(text, section);
  if (p == NULL)
    return -1;
  p = strchr(p, '\n') + 1;
  const char *end = strchr(p, '\n');
  int col = 0;
  while (p < end) {
    while (*p == ' ')
      p++;
    size_t n = strcspn(p, " \n");
    if (n == strlen(name) && strncmp(p, name, n) == 0)
      return col;
    p += n;
    col++;
  }
  return -1;
}

static void test_table_rows(void)
{
  prd_cache_t *a = prd_cache_create("tstat_a", 100, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *b = prd_cache_create("tstat_b", 3000, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(a != NULL && b != NULL);
  void *pa[37], *pb[5];
  for (int i = 0; i < 37; i++)
    pa[i] = prd_cache_alloc(a, PRD_SLEEP);
  for (int i = 0; i < 5; i++)
    pb[i] = prd_cache_alloc(b, PRD_SLEEP);
  CHECK_EQ(capture(prd_stats_print, 0), 0);
  CHECK_STR_CONTAINS(out, "prudence statistics: pid");
  CHECK_STR_CONTAINS(out, "\ncaches:\nname ");
  CHECK_STR_CONTAINS(out, "\narenas:\nname ");
  CHECK_STR_CONTAINS(out, "\nheap ");
  CHECK_STR_CONTAINS(out, "\nprd_bufctl ");   /* internal caches are listed by default */
  char word[64];
  int inuse = header_col(out, "caches:", "bufs_inuse");
  int size = header_col(out, "caches:", "buf_size");
  int allocs = header_col(out, "caches:", "allocs");
  CHECK(inuse > 0 && size > 0 && allocs > 0);
  CHECK_EQ(table_cell(out, "tstat_a", inuse, word, sizeof(word)), 37);
  CHECK_EQ(table_cell(out, "tstat_b", inuse, word, sizeof(word)), 5);
  CHECK_EQ(table_cell(out, "tstat_a", size, word, sizeof(word)), 100);
  CHECK_EQ(table_cell(out, "tstat_b", allocs, word, sizeof(word)), 5);
  /* layout details are only in the verbose form */
  CHECK_EQ(header_col(out, "caches:", "color_max"), -1);
  CHECK(header_col(out, "caches:", "slab_bytes") > 0);
  CHECK(header_col(out, "arenas:", "bytes_alloc") > 0);

  CHECK_EQ(capture(prd_stats_print, PRD_STATS_NOINTERNAL | PRD_STATS_NOARENAS), 0);
  CHECK(strstr(out, "\nprd_bufctl ") == NULL);
  CHECK(strstr(out, "arenas:") == NULL);
  CHECK_STR_CONTAINS(out, "\ntstat_a ");
  CHECK_EQ(capture(prd_stats_print, PRD_STATS_NOCACHES), 0);
  CHECK(strstr(out, "caches:") == NULL);
  CHECK_STR_CONTAINS(out, "\nheap ");

  for (int i = 0; i < 37; i++)
    prd_cache_free(a, pa[i]);
  for (int i = 0; i < 5; i++)
    prd_cache_free(b, pb[i]);
  CHECK_EQ(capture(prd_stats_print, 0), 0);
  /* freed objects may sit in this thread's magazines: in use for the slab layer */
  prd_cache_stats_t sa = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(a, &sa), 0);
  CHECK_EQ(table_cell(out, "tstat_a", inuse, word, sizeof(word)),
           sa.thread_cache_objs + sa.depot_rounds);
  prd_cache_destroy(a);
  prd_cache_destroy(b);
  CHECK_EQ(capture(prd_stats_print, 0), 0);
  CHECK(strstr(out, "\ntstat_a ") == NULL);
}

/* The cache table: slabinfo's columns and Prudence's, the sums named by what they add up,
 * and no cache of the library's own with PRD_STATS_NOINTERNAL (the magazine caches too). */
static void test_table_columns(void)
{
  static const char *const cols[] = { "name", "buf_size", "bufs_inuse", "bufs_total", "slabs",
                                      "slab_size", "slab_bytes", "allocs", "oc_hit_pct",
                                      "deferred_frees", "latent_objs" };
  prd_cache_t *c = prd_cache_create("tstat_cols", 200, 0, NULL, NULL, NULL, NULL, NULL, 0);
  CHECK(c != NULL);
  void *p[50];
  for (int i = 0; i < 50; i++)
    p[i] = prd_cache_alloc(c, PRD_SLEEP);
  for (int i = 40; i < 50; i++)
    prd_cache_free_deferred(c, p[i]);
  CHECK_EQ(capture(prd_stats_print, PRD_STATS_NOINTERNAL | PRD_STATS_NOARENAS), 0);
  for (size_t i = 0; i < PRD_ARRAY_SIZE(cols); i++)
    CHECK_EQ(header_col(out, "caches:", cols[i]), (int)i);
  CHECK_EQ(header_col(out, "caches:", "mag_allocs"), -1);   /* the full set: verbose, JSON */
  CHECK(strstr(out, "\nprd_mag_") == NULL);
  CHECK(strstr(out, "\nprd_slab ") == NULL);
  char word[64];
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  CHECK_EQ(prd_cache_stats(c, &st), 0);
  CHECK_EQ(table_cell(out, "tstat_cols", 4, word, sizeof(word)),
           (long long)(st.slabs_full + st.slabs_partial + st.slabs_free));
  CHECK_EQ(table_cell(out, "tstat_cols", 9, word, sizeof(word)), 10);
  long long latent = table_cell(out, "tstat_cols", 10, word, sizeof(word));
  CHECK(latent >= 0 && latent <= 10);
  /* the magazine caches are listed without the flag, as the slab layer's own are */
  CHECK_EQ(capture(prd_stats_print, PRD_STATS_NOARENAS), 0);
  CHECK_STR_CONTAINS(out, "\nprd_mag_");
  CHECK_STR_CONTAINS(out, "\nprd_slab ");
  for (int i = 0; i < 40; i++)
    prd_cache_free(c, p[i]);
  prd_cache_destroy(c);
}

/* Every field of both lists is in the verbose form (with its meaning) and in the JSON. */
#define FIELD_NAME(kind, n, doc) #n,
static const char *const cache_fields[] = { PRD_CACHE_STATS_FIELDS(FIELD_NAME) };
#undef FIELD_NAME
#define VFIELD_NAME(n, doc) #n,
static const char *const arena_fields[] = { PRD_VMEM_STATS(VFIELD_NAME) };
#undef VFIELD_NAME

static void test_every_field(void)
{
  prd_cache_t *c = prd_cache_create("tstat_fields", 24, 0, NULL, NULL, NULL, NULL, NULL, 0);
  void *p = prd_cache_alloc(c, PRD_SLEEP);
  CHECK_EQ(capture(prd_stats_print, PRD_STATS_VERBOSE), 0);
  CHECK_STR_CONTAINS(out, "cache tstat_fields\n");
  CHECK_STR_CONTAINS(out, "arena heap\n");
  CHECK_STR_CONTAINS(out, "# object size asked for (bytes)");
  char key[96];
  for (size_t i = 1; i < PRD_ARRAY_SIZE(cache_fields); i++) {
    snprintf(key, sizeof(key), "\n  %s ", cache_fields[i]);
    CHECK_STR_CONTAINS(out, key);
  }
  for (size_t i = 0; i < PRD_ARRAY_SIZE(arena_fields); i++) {
    snprintf(key, sizeof(key), "\n  %s ", arena_fields[i]);
    CHECK_STR_CONTAINS(out, key);
  }
  CHECK_EQ(capture(json_adapter, 0), 0);
  for (size_t i = 0; i < PRD_ARRAY_SIZE(cache_fields); i++) {
    snprintf(key, sizeof(key), "\"%s\":", cache_fields[i]);
    CHECK_STR_CONTAINS(out, key);
  }
  for (size_t i = 0; i < PRD_ARRAY_SIZE(arena_fields); i++) {
    snprintf(key, sizeof(key), "\"%s\":", arena_fields[i]);
    CHECK_STR_CONTAINS(out, key);
  }
  prd_cache_free(c, p);
  prd_cache_destroy(c);
}

static void test_json_document(void)
{
  prd_cache_t *c = prd_cache_create("we\"ird\nname", 40, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *d = prd_cache_create("tstat_json", 40, 0, NULL, NULL, NULL, NULL, NULL, 0);
  /* names that are not UTF-8 (a Latin-1 byte, a cut sequence) and one that is */
  prd_cache_t *l1 = prd_cache_create("caf\xe9", 40, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *cut = prd_cache_create("x\xe2\x82", 40, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_t *u8 = prd_cache_create("caf\xc3\xa9 \xe2\x82\xac", 40, 0, NULL, NULL, NULL, NULL,
                                     NULL, 0);
  CHECK(l1 != NULL && cut != NULL && u8 != NULL);
  void *bufs[3];
  for (int i = 0; i < 3; i++)
    bufs[i] = prd_cache_alloc(d, PRD_SLEEP);
  CHECK_EQ(capture(json_adapter, 0), 0);
  char head[64];
  snprintf(head, sizeof(head), "{\"schema\":\"prudence-stats\",\"version\":%d,",
           PRD_STATS_SCHEMA_VERSION);
  CHECK(strncmp(out, head, strlen(head)) == 0);
  /* one line: the only newline ends the document */
  CHECK(strchr(out, '\n') == out + strlen(out) - 1);
  CHECK_STR_CONTAINS(out, "\"name\":\"we\\\"ird\\u000aname\"");
  CHECK_STR_CONTAINS(out, "\"name\":\"caf\\ufffd\"");
  CHECK_STR_CONTAINS(out, "\"name\":\"x\\ufffd\\ufffd\"");
  CHECK_STR_CONTAINS(out, "\"name\":\"caf\xc3\xa9 \xe2\x82\xac\"");
  /* the document is valid UTF-8: no byte of 0x80 and above but in whole sequences */
  size_t bad_utf8 = 0;
  for (const unsigned char *q = (const unsigned char *)out; *q != '\0'; q++) {
    if (*q < 0x80)
      continue;
    size_t len = (*q & 0xe0) == 0xc0 ? 2 : (*q & 0xf0) == 0xe0 ? 3 : (*q & 0xf8) == 0xf0 ? 4 : 0;
    for (size_t i = 1; len != 0 && i < len; i++)
      if ((q[i] & 0xc0) != 0x80)
        len = 0;
    if (len == 0) {
      bad_utf8++;
      continue;
    }
    q += len - 1;
  }
  CHECK_EQ(bad_utf8, 0);
  const char *obj = strstr(out, "\"name\":\"tstat_json\"");
  CHECK(obj != NULL);
  if (obj != NULL) {
    const char *inuse = strstr(obj, "\"bufs_inuse\":");
    CHECK(inuse != NULL && strtol(inuse + 13, NULL, 10) == 3);
    CHECK_STR_CONTAINS(obj, "\"internal\":false");
  }
  CHECK_STR_CONTAINS(out, "\"internal\":true");
  CHECK_STR_CONTAINS(out, "\"arenas\":[{\"name\":\"heap\",\"source\":\"\"");
  /* brackets balance outside strings */
  int depth = 0, mindepth = 0;
  bool in_str = false;
  for (const char *p = out; *p; p++) {
    if (in_str) {
      if (*p == '\\')
        p++;
      else if (*p == '"')
        in_str = false;
      continue;
    }
    if (*p == '"')
      in_str = true;
    else if (*p == '{' || *p == '[')
      depth++;
    else if (*p == '}' || *p == ']')
      depth--;
    if (depth < mindepth)
      mindepth = depth;
  }
  CHECK_EQ(depth, 0);
  CHECK_EQ(mindepth, 0);
  /* seq grows by one per document */
  const char *s1 = strstr(out, "\"seq\":");
  long seq1 = s1 ? strtol(s1 + 6, NULL, 10) : -1;
  CHECK_EQ(capture(json_adapter, 0), 0);
  const char *s2 = strstr(out, "\"seq\":");
  CHECK_EQ(s2 ? strtol(s2 + 6, NULL, 10) : -2, seq1 + 1);
  for (int i = 0; i < 3; i++)
    prd_cache_free(d, bufs[i]);
  prd_cache_destroy(c);
  prd_cache_destroy(d);
  prd_cache_destroy(l1);
  prd_cache_destroy(cut);
  prd_cache_destroy(u8);
}

/* More caches than the first snapshot has room for: the census retries, and lists them all. */
static void test_many_caches(void)
{
  enum { N = 150 };
  prd_cache_t *cs[N];
  char name[32];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof(name), "tstat_many_%03d", i);
    cs[i] = prd_cache_create(name, 16 + (size_t)i, 0, NULL, NULL, NULL, NULL, NULL, 0);
  }
  CHECK_EQ(capture(prd_stats_print, PRD_STATS_NOARENAS), 0);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof(name), "\ntstat_many_%03d ", i);
    CHECK_STR_CONTAINS(out, name);
  }
  for (int i = 0; i < N; i++)
    prd_cache_destroy(cs[i]);
}

static void test_bad_input(void)
{
  prd_option_set("abort_on_error", "0");
  errno = 0;
  CHECK_EQ(prd_stats_print(NULL, 0), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(prd_stats_print(stdout, 0x100), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(prd_stats_json(NULL), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(prd_stats_write_file(NULL), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(prd_stats_write_file(""), -1);
  CHECK_EQ(errno, EINVAL);
  errno = 0;
  CHECK_EQ(prd_stats_write_file("/nonexistent-dir-prd/stats.json"), -1);
  CHECK_EQ(errno, ENOENT);
}

static char tmpdir[256];

static size_t read_file(const char *path, char *buf, size_t len)
{
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, len - 1, f);
  buf[n] = '\0';
  fclose(f);
  return n;
}

static int dir_entries(const char *dir)
{
  DIR *d = opendir(dir);
  int n = 0;
  if (d == NULL)
    return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.')
      n++;
  closedir(d);
  return n;
}

static void test_write_file(void)
{
  char path[512];
  snprintf(path, sizeof(path), "%s/snap.json", tmpdir);
  prd_cache_t *c = prd_cache_create("tstat_file", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  void *p = prd_cache_alloc(c, PRD_SLEEP);
  CHECK_EQ(prd_stats_write_file(path), 0);
  CHECK_EQ(prd_stats_write_file(path), 0);   /* replaces it */
  CHECK(read_file(path, out, sizeof(out)) > 0);
  CHECK(strncmp(out, "{\"schema\":\"prudence-stats\"", 26) == 0);
  CHECK(strchr(out, '\n') == out + strlen(out) - 1);   /* one document, not two */
  CHECK_STR_CONTAINS(out, "\"name\":\"tstat_file\"");
  CHECK_EQ(dir_entries(tmpdir), 1);   /* no temporary file left behind */
  unlink(path);
  prd_cache_free(c, p);
  prd_cache_destroy(c);
}

/* Two threads replace one path while a third reads it: every read is one whole document and
 * every write succeeds.  The writers once shared the temporary name path.tmp.PID: one
 * truncated the other's file, or renamed it away before the other's rename (ENOENT). */
static char wr_path[512];
static atomic_int wr_stop, wr_fails, wr_torn, wr_reads;

static void *wr_writer(void *arg)
{
  (void)arg;
  for (int i = 0; i < 150; i++)
    if (prd_stats_write_file(wr_path) != 0)
      atomic_fetch_add(&wr_fails, 1);
  return NULL;
}

static void *wr_reader(void *arg)
{
  (void)arg;
  static char buf[1 << 20];
  while (!atomic_load(&wr_stop)) {
    size_t n = read_file(wr_path, buf, sizeof(buf));   /* the path always exists: 0 is empty */
    atomic_fetch_add(&wr_reads, 1);
    if (n < 3 || strncmp(buf, "{\"schema\"", 9) != 0 || strchr(buf, '\n') != buf + n - 1)
      atomic_fetch_add(&wr_torn, 1);
  }
  return NULL;
}

static void test_write_file_concurrent(void)
{
  snprintf(wr_path, sizeof(wr_path), "%s/race.json", tmpdir);
  prd_cache_t *c = prd_cache_create("tstat_race", 64, 0, NULL, NULL, NULL, NULL, NULL, 0);
  void *p = prd_cache_alloc(c, PRD_SLEEP);
  CHECK_EQ(prd_stats_write_file(wr_path), 0);
  pthread_t w[2], r;
  CHECK_EQ(pthread_create(&r, NULL, wr_reader, NULL), 0);
  for (int i = 0; i < 2; i++)
    CHECK_EQ(pthread_create(&w[i], NULL, wr_writer, NULL), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(w[i], NULL);
  atomic_store(&wr_stop, 1);
  pthread_join(r, NULL);
  CHECK_EQ(atomic_load(&wr_fails), 0);
  CHECK_EQ(atomic_load(&wr_torn), 0);
  CHECK(atomic_load(&wr_reads) > 0);
  CHECK_EQ(dir_entries(tmpdir), 1);   /* no temporary file left behind */
  unlink(wr_path);
  prd_cache_free(c, p);
  prd_cache_destroy(c);
}

/* ---- the triggers, in a child started with the environment set ------------------------- */
static const char *self_exe;

struct child_env {
  const char *ce_file;
  const char *ce_stats;
  const char *ce_options;
  const char *ce_mode;
};

static void exec_self(void *arg)
{
  struct child_env *ce = arg;
  if (ce->ce_file)
    setenv("PRUDENCE_STATS_FILE", ce->ce_file, 1);
  if (ce->ce_stats)
    setenv("PRUDENCE_STATS", ce->ce_stats, 1);
  if (ce->ce_options)
    setenv("PRUDENCE_OPTIONS", ce->ce_options, 1);
  execl(self_exe, self_exe, ce->ce_mode, (char *)NULL);
  _exit(127);
}

static void exec_self_alarm(void *arg)
{
  alarm(20);
  exec_self(arg);
}

static int child_periodic(void)
{
  /* run with PRUDENCE_STATS_FILE, stats_append=1, stats_interval_ms=1000 */
  prd_cache_t *c = prd_cache_create("tstat_child", 48, 0, NULL, NULL, NULL, NULL, NULL, 0);
  void *p = prd_cache_alloc(c, PRD_SLEEP);
  uint64_t t0 = 5000000000ull;   /* any clock value: the writer only compares them */
  int r1 = prd__stats_periodic(t0);
  int r2 = prd__stats_periodic(t0 + 999000000ull);        /* not yet due */
  int r3 = prd__stats_periodic(t0 + 1000000000ull);       /* due */
  prd_cache_free(c, p);
  printf("periodic %d %d %d\n", r1, r2, r3);
  return 0;   /* the at-exit snapshot and table follow */
}

/* Two threads (the maintenance thread may start) idle for 1.2 s, the periodic writer on. */
static void *idle_thread(void *arg)
{
  (void)arg;
  usleep(1200000);
  return NULL;
}

static int child_short_interval(void)
{
  prd_cache_t *c = prd_cache_create("tstat_short", 48, 0, NULL, NULL, NULL, NULL, NULL, 0);
  prd_cache_free(c, prd_cache_alloc(c, PRD_SLEEP));
  pthread_t t;
  if (pthread_create(&t, NULL, idle_thread, NULL) != 0)
    return 1;
  pthread_join(t, NULL);
  return 0;
}

/* stats_interval_ms under a second is honoured: the maintenance thread woke once a second
 * whatever it said, so 100 ms wrote two snapshots in 1.2 s, not about twelve. */
static void test_short_interval(void)
{
  char path[512];
  snprintf(path, sizeof(path), "%s/short.jsonl", tmpdir);
  struct child_env ce = { path, NULL, "stats_append=1,stats_interval_ms=100", "--short-child" };
  int st = prd_test_child(exec_self_alarm, &ce, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  static char file[1 << 20];
  CHECK(read_file(path, file, sizeof(file)) > 0);
  int lines = 0;
  for (const char *p = file; (p = strchr(p, '\n')) != NULL; p++)
    lines++;
  printf("# snapshots in 1.2 s at 100 ms: %d\n", lines);
  CHECK(lines >= 6);
  unlink(path);
}

static void test_env_triggers(void)
{
  char path[512], opts[128];
  snprintf(path, sizeof(path), "%s/series.jsonl", tmpdir);
  /* the child drives the periodic writer by hand: no maintenance thread calling it too */
  snprintf(opts, sizeof(opts), "stats_append=1,stats_interval_ms=1000,maint_thread=0");
  struct child_env ce = { path, "1", opts, "--periodic-child" };
  int st = prd_test_child(exec_self, &ce, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "periodic 1 0 1");
  /* PRUDENCE_STATS=1: the table on stderr at exit, with the child's cache */
  CHECK_STR_CONTAINS(out, "caches:\nname ");
  CHECK_STR_CONTAINS(out, "\ntstat_child ");
  static char file[1 << 20];
  CHECK(read_file(path, file, sizeof(file)) > 0);
  int lines = 0;
  for (const char *p = file; (p = strchr(p, '\n')) != NULL; p++)
    lines++;
  CHECK_EQ(lines, 3);   /* two periodic snapshots and the one at exit, appended */
  CHECK_STR_CONTAINS(file, "\"name\":\"tstat_child\"");
  unlink(path);

  /* without stats_append the file holds exactly one document, the one written at exit */
  struct child_env ce2 = { path, "0", "stats_interval_ms=1000", "--periodic-child" };
  st = prd_test_child(exec_self, &ce2, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(strstr(out, "caches:") == NULL);
  CHECK(read_file(path, file, sizeof(file)) > 0);
  CHECK(strchr(file, '\n') == file + strlen(file) - 1);
  CHECK_STR_CONTAINS(file, "\"bufs_inuse\":0");
  CHECK_EQ(dir_entries(tmpdir), 1);
  unlink(path);

  /* stats_interval_ms=0: no periodic snapshots */
  struct child_env ce3 = { path, NULL, "stats_interval_ms=0", "--periodic-child" };
  st = prd_test_child(exec_self, &ce3, out, sizeof(out));
  CHECK_STR_CONTAINS(out, "periodic 0 0 0");
  unlink(path);

  /* an unwritable file is reported once, and the program still exits normally */
  struct child_env ce4 = { "/nonexistent-dir-prd/s.json", NULL, NULL, "--periodic-child" };
  st = prd_test_child(exec_self, &ce4, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "periodic -1 0 -1");
  CHECK_STR_CONTAINS(out, "PRUDENCE_STATS_FILE: cannot write /nonexistent-dir-prd/s.json");
  const char *first = strstr(out, "cannot write");
  CHECK(first != NULL && strstr(first + 1, "cannot write") == NULL);

  /* a FIFO that nobody reads, appended to: reported, and the program exits (it waited for a
   * reader at its exit for ever; the alarm, kept across the child's exec, ends a hang) */
  char fifo[512];
  snprintf(fifo, sizeof(fifo), "%s/stats.fifo", tmpdir);
  CHECK_EQ(mkfifo(fifo, 0600), 0);
  struct child_env ce5 = { fifo, NULL, "stats_append=1", "--periodic-child" };
  st = prd_test_child(exec_self_alarm, &ce5, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "PRUDENCE_STATS_FILE: cannot write");
  unlink(fifo);
}

/* A snapshot that replaces its file does not replace what is not a regular file: a symbolic
 * link, a FIFO (and, run as root, a device node: PRUDENCE_STATS_FILE=/dev/null replaced the
 * system's /dev/null with a JSON file).  Reported, nothing written, the thing left as it was. */
static void test_not_replaced(void)
{
  char target[512], link[512], fifo[512];
  snprintf(target, sizeof(target), "%s/target.json", tmpdir);
  snprintf(link, sizeof(link), "%s/link.json", tmpdir);
  snprintf(fifo, sizeof(fifo), "%s/fifo.json", tmpdir);
  FILE *f = fopen(target, "w");
  CHECK(f != NULL);
  fputs("mine\n", f);
  fclose(f);
  CHECK_EQ(symlink(target, link), 0);
  CHECK_EQ(mkfifo(fifo, 0600), 0);
  prd_option_set("abort_on_error", "0");
  errno = 0;
  CHECK_EQ(prd_stats_write_file(link), -1);
  CHECK_EQ(errno, EEXIST);
  struct stat st;
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
  char buf[64];
  CHECK_EQ(read_file(target, buf, sizeof(buf)), 5);
  /* at exit, through PRUDENCE_STATS_FILE: reported once, the program ends normally */
  struct child_env ce = { fifo, NULL, NULL, "--periodic-child" };
  int rc = prd_test_child(exec_self_alarm, &ce, out, sizeof(out));
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
  CHECK_STR_CONTAINS(out, "PRUDENCE_STATS_FILE: ");
  CHECK_STR_CONTAINS(out, "fifo.json is a FIFO, which a snapshot does not replace");
  CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
  struct child_env ce2 = { link, NULL, NULL, "--periodic-child" };
  rc = prd_test_child(exec_self_alarm, &ce2, out, sizeof(out));
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
  CHECK_STR_CONTAINS(out, "link.json is a symbolic link, which a snapshot does not replace");
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
  CHECK_EQ(read_file(target, buf, sizeof(buf)), 5);
  CHECK_EQ(dir_entries(tmpdir), 3);   /* no temporary file left behind either */
  unlink(link);
  unlink(fifo);
  unlink(target);
  prd_option_set("abort_on_error", "1");
}

/* A process that exits while the periodic writer replaces the file left the writer's
 * temporary file behind (one run in a few dozen with snapshots every millisecond): the
 * exit's snapshot now waits for the periodic one, after which no periodic one starts.  The
 * child's second thread writes back to back, as the maintenance thread's job; race_delay
 * (Debug and TSan builds) widens the window between its write and its rename. */
static void *exit_writer(void *arg)
{
  (void)arg;
  for (uint64_t t = 1000000000ull;; t += 1000000000ull)
    (void)prd__stats_periodic(t);
  return NULL;
}

static int child_exit_during_write(void)
{
  pthread_t t;
  pthread_create(&t, NULL, exit_writer, NULL);
  struct timespec ts = { 0, (long)(getpid() % 5) * 1000000L + 1000000L };
  nanosleep(&ts, NULL);
  exit(0);
}

static void test_exit_during_write(void)
{
  char path[512];
  snprintf(path, sizeof(path), "%s/s.json", tmpdir);
  struct child_env ce = { path, NULL, "stats_interval_ms=1,race_delay=2", "--exit-child" };
  for (int i = 0; i < 30; i++) {
    int rc = prd_test_child(exec_self_alarm, &ce, out, sizeof(out));
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
  }
  CHECK_EQ(dir_entries(tmpdir), 1);   /* s.json alone */
  unlink(path);
}

/* ---- printing while caches and arenas come and go (TSan checks the locking) ------------- */
#ifdef PRD_TSAN
#define CHURN_ROUNDS 60
#else
#define CHURN_ROUNDS 300
#endif
static _Atomic int churn_stop;

static void *churn(void *arg)
{
  long id = (long)arg;
  char name[32];
  for (int r = 0; r < CHURN_ROUNDS || !atomic_load(&churn_stop); r++) {
    if (r >= 100000)
      break;
    snprintf(name, sizeof(name), "tstat_churn%ld_%d", id, r % 7);
    prd_cache_t *c = prd_cache_create(name, 32 + (size_t)(r % 5) * 100, 0, NULL, NULL, NULL,
                                      NULL, NULL, 0);
    prd_vmem_t *v = prd_vmem_create("tstat_arena", (void *)0x10000, 1 << 20, 16, NULL, NULL,
                                    NULL, 0, PRD_VM_SLEEP);
    void *bufs[16];
    for (int i = 0; i < 16; i++)
      bufs[i] = prd_cache_alloc(c, PRD_SLEEP);
    void *seg = prd_vmem_alloc(v, 64, PRD_VM_NOSLEEP);
    for (int i = 0; i < 16; i++)
      prd_cache_free(c, bufs[i]);
    prd_vmem_free(v, seg, 64);
    prd_vmem_destroy(v);
    prd_cache_destroy(c);
  }
  return NULL;
}

static void test_print_during_churn(void)
{
  pthread_t t[2];
  atomic_store(&churn_stop, 0);
  for (long i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, churn, (void *)i);
  int bad = 0;
  for (int i = 0; i < CHURN_ROUNDS / 3; i++) {
    bad += capture(prd_stats_print, 0) != 0;
    bad += capture(json_adapter, 0) != 0;
  }
  atomic_store(&churn_stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  CHECK_EQ(bad, 0);
  CHECK_EQ(capture(prd_stats_print, 0), 0);
  CHECK(strstr(out, "tstat_churn") == NULL);
  CHECK(strstr(out, "tstat_arena") == NULL);
}

/* A document larger than a pipe holds (64 KiB): 300 caches, then the at-exit snapshot. */
static int child_big_document(void)
{
  for (int i = 0; i < 300; i++) {
    char name[32];
    snprintf(name, sizeof(name), "tstat_big%d", i);
    prd_cache_t *c = prd_cache_create(name, 48, 0, NULL, NULL, NULL, NULL, NULL, 0);
    prd_cache_free(c, prd_cache_alloc(c, PRD_SLEEP));
  }
  printf("child done\n");
  return 0;
}

/* Two snapshots of a large document: one periodic (the reader is not reading yet: cut by
 * the writer's bound), then the one at exit. */
static int child_big_twice(void)
{
  child_big_document();
  printf("periodic %d\n", prd__stats_periodic(5000000000ull));
  return 0;
}

/* A reader that starts reading once the writer has filled the FIFO and its bound (1 s from
 * the write's start) has run out, and keeps what it reads.  Waiting for the full pipe, not
 * a fixed time from the child's start, keeps the order on a loaded machine, where the child
 * may take longer than any fixed delay to reach its periodic snapshot. */
static char drained[2 << 20];
static size_t drained_len;
static void *late_reader(void *arg)
{
  int fd = *(int *)arg;
  int cap = fcntl(fd, F_GETPIPE_SZ);
  for (int i = 0; i < 6000; i++) {   /* up to 60 s */
    int avail = 0;
    if (ioctl(fd, FIONREAD, &avail) == 0 && cap > 0 && avail >= cap)
      break;
    usleep(10000);
  }
  usleep(1200000);
  for (;;) {
    struct pollfd pfd = { fd, POLLIN, 0 };
    if (poll(&pfd, 1, 20000) != 1)
      break;
    ssize_t n = read(fd, drained + drained_len, sizeof(drained) - 1 - drained_len);
    if (n <= 0)
      break;
    drained_len += (size_t)n;
  }
  drained[drained_len] = '\0';
  close(fd);
  return NULL;
}

/* A FIFO's reader that takes 10 bytes of the first snapshot and closes it. */
static void *early_closer(void *arg)
{
  int fd = *(int *)arg;
  struct pollfd pfd = { fd, POLLIN, 0 };
  char b[10];
  if (poll(&pfd, 1, 20000) == 1)
    (void)read(fd, b, sizeof(b));
  close(fd);
  return NULL;
}

/* A FIFO to append to with a reader that holds it open: one that never reads (the snapshot
 * is dropped after the writer's bound, and the child exits), one that closes after a few
 * bytes (EPIPE: reported, not SIGPIPE's end of the child). */
static void test_fifo_readers(void)
{
  char fifo[512];
  snprintf(fifo, sizeof(fifo), "%s/held.fifo", tmpdir);
  CHECK_EQ(mkfifo(fifo, 0600), 0);
  int rd = open(fifo, O_RDONLY | O_NONBLOCK);
  CHECK(rd >= 0);
  struct child_env ce = { fifo, NULL, "stats_append=1,stats_interval_ms=0", "--big-child" };
  int st = prd_test_child(exec_self_alarm, &ce, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "child done");
  CHECK_STR_CONTAINS(out, "PRUDENCE_STATS_FILE: cannot write");
  close(rd);

  rd = open(fifo, O_RDONLY | O_NONBLOCK);
  CHECK(rd >= 0);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, early_closer, &rd), 0);
  st = prd_test_child(exec_self_alarm, &ce, out, sizeof(out));
  pthread_join(t, NULL);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "child done");

  /* a snapshot cut by the bound, then the next: the cut line ends before the next begins,
   * which is whole */
  rd = open(fifo, O_RDONLY | O_NONBLOCK);
  CHECK(rd >= 0);
  CHECK_EQ(pthread_create(&t, NULL, late_reader, &rd), 0);
  struct child_env ce2 = { fifo, NULL, "stats_append=1,stats_interval_ms=1000,maint_thread=0",
                           "--big-twice-child" };
  st = prd_test_child(exec_self_alarm, &ce2, out, sizeof(out));
  pthread_join(t, NULL);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "periodic -1");
  char *last = strrchr(drained, '{');
  while (last != NULL && strncmp(last, "{\"schema\"", 9) != 0) {   /* the last document */
    *last = '\0';
    last = strrchr(drained, '{');
  }
  CHECK(last != NULL && (last == drained || last[-1] == '\n'));
  CHECK(drained_len > 0 && drained[drained_len - 1] == '\n');
  unlink(fifo);
}

int main(int argc, char **argv)
{
  self_exe = "/proc/self/exe";
  if (argc > 1 && strcmp(argv[1], "--periodic-child") == 0)
    return child_periodic();
  if (argc > 1 && strcmp(argv[1], "--short-child") == 0)
    return child_short_interval();
  if (argc > 1 && strcmp(argv[1], "--exit-child") == 0)
    return child_exit_during_write();
  if (argc > 1 && strcmp(argv[1], "--big-child") == 0)
    return child_big_document();
  if (argc > 1 && strcmp(argv[1], "--big-twice-child") == 0)
    return child_big_twice();
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/prd_test_stats.XXXXXX");
  if (mkdtemp(tmpdir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  RUN(test_table_rows);
  RUN(test_table_columns);
  RUN(test_every_field);
  RUN(test_json_document);
  RUN(test_many_caches);
  RUN(test_bad_input);
  RUN(test_write_file);
  RUN(test_write_file_concurrent);
  RUN(test_env_triggers);
  RUN(test_short_interval);
  RUN(test_fifo_readers);
  RUN(test_not_replaced);
  RUN(test_exit_during_write);
  RUN(test_print_during_churn);
  rmdir(tmpdir);
  return prd_test_done();
}
