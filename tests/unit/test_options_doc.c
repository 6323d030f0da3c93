/* docs/options.md must list exactly the options of the table in src/options.h: a test that
 * fails when they drift (add a row to docs/options.md when you add an option).  And the range
 * it states for options in milliseconds, and that a report stays on its line. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>
#include <unistd.h>

#include "internal.h"
#include "prd_test.h"

static char doc[65536];

static void check_in_doc(void *arg, const char *name, long def, const char *text)
{
  (void)def;
  (void)text;
  int *missing = arg;
  char row[256];
  snprintf(row, sizeof(row), "\n| %s |", name);
  if (strstr(doc, row) == NULL) {
    fprintf(stderr, "  option '%s' is in src/options.h but has no row '| %s |' in docs/options.md\n",
            name, name);
    (*missing)++;
  }
}

static void test_every_option_documented(void)
{
  int missing = 0;
  prd__options_foreach(check_in_doc, &missing);
  CHECK_EQ(missing, 0);
}

static void test_every_documented_option_exists(void)
{
  /* each table row "| name | default | meaning |" after the header must name an option */
  int rows = 0;
  for (char *p = strstr(doc, "\n| "); p != NULL; p = strstr(p + 1, "\n| ")) {
    char name[128];
    if (sscanf(p + 3, "%127[a-z0-9_]", name) != 1 || strcmp(name, "name") == 0)
      continue;
    rows++;
    errno = 0;
    if (prd_option_get(name) == -1 && errno == EINVAL) {
      fprintf(stderr, "  docs/options.md lists '%s', which src/options.h does not have\n", name);
      CHECK(0);
    }
  }
  CHECK(rows > 0);
}

/* Milliseconds up to 10^12; above, refused (their nanoseconds once wrapped to a short period:
 * 18446744073710 ms made the periodic snapshots come every 0.45 ms). */
static void test_ms_range(void)
{
  long before = prd_option_get("stats_interval_ms");
  errno = 0;
  CHECK_EQ(prd_option_set("stats_interval_ms", "18446744073710"), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(prd_option_set("decay_ms", "1000000000001"), -1);
  CHECK_EQ(prd_option_get("stats_interval_ms"), before);
  CHECK_EQ(prd_option_set("stats_interval_ms", "1000000000000"), 0);
  CHECK_EQ(prd_option_get("stats_interval_ms"), 1000000000000L);
  char b[32];
  snprintf(b, sizeof(b), "%ld", before);
  CHECK_EQ(prd_option_set("stats_interval_ms", b), 0);
}

/* Values are decimal, or hexadecimal after 0x: a leading zero is not octal, blanks and signs
 * are refused (decay_ms=010000 was 4096 ms, heap_dirty_pct= 5 was taken, =5 refused). */
static void test_decimal_only(void)
{
  long before = prd_option_get("decay_ms");
  CHECK_EQ(prd_option_set("decay_ms", "010000"), 0);
  CHECK_EQ(prd_option_get("decay_ms"), 10000);
  CHECK_EQ(prd_option_set("decay_ms", "0x10"), 0);
  CHECK_EQ(prd_option_get("decay_ms"), 16);
  CHECK_EQ(prd_option_set("decay_ms", "10000"), 0);
  static const char *const bad[] = { "0x", "0x-1", "0x 1", "0x0x10", "00x5", " 5", "5 ", "+5",
                                     "-5", "" };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    errno = 0;
    CHECK_EQ(prd_option_set("decay_ms", bad[i]), -1);
    CHECK_EQ(errno, EINVAL);
    CHECK_EQ(prd_option_get("decay_ms"), 10000);
  }
  CHECK_EQ(prd_option_set("magazines", " 1"), -1);
  /* debug holds debug bits only, after a size suffix too (16k was taken as 16384) */
  CHECK_EQ(prd_option_set("debug", "16k"), -1);
  CHECK_EQ(prd_option_set("debug", "0x10k"), -1);
  CHECK_EQ(prd_option_get("debug"), 0);
  char b[32];
  snprintf(b, sizeof(b), "%ld", before);
  CHECK_EQ(prd_option_set("decay_ms", b), 0);
}

/* A number option set from a signal handler while the interrupted thread sets one: no lock
 * is taken for such options (a lock of the rcu option's kind deadlocked here). */
static volatile sig_atomic_t sig_sets;
static void set_in_handler(int sig)
{
  (void)sig;
  int saved = errno;   /* a handler's duty: the parse sets it */
  if (prd_option_set("decay_ms", "9") == 0)
    sig_sets++;
  errno = saved;
}

static void signal_sets(void *arg)
{
  (void)arg;
  prd_option_set("verbose", "0");
  signal(SIGALRM, set_in_handler);
  struct itimerval it = { { 0, 200 }, { 0, 200 } };
  setitimer(ITIMER_REAL, &it, NULL);
  /* half a second of sets under the timer's signals (a deadlock hangs here) */
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    for (int i = 0; i < 1000; i++)
      (void)prd_option_set("decay_ms", "0x10");
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 500000000L);
  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer(ITIMER_REAL, &off, NULL);
  _exit(0);
}

static void test_set_in_signal_handler(void)
{
  static char out[1 << 16];
  int st = prd_test_child(signal_sets, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fprintf(stderr, "%.2000s\n", out);
}

/* maint_interval=0 made the maintenance thread spin (a quarter of a core while the program
 * slept): it takes 10 ms at least. */
static void test_floor(void)
{
  long before = prd_option_get("maint_interval");
  errno = 0;
  CHECK_EQ(prd_option_set("maint_interval", "0"), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(prd_option_set("maint_interval", "9"), -1);
  CHECK_EQ(prd_option_get("maint_interval"), before);
  CHECK_EQ(prd_option_set("maint_interval", "10"), 0);
  CHECK_EQ(prd_option_get("maint_interval"), 10);
  char b[32];
  snprintf(b, sizeof(b), "%ld", before);
  CHECK_EQ(prd_option_set("maint_interval", b), 0);
}

/* rcu set by two threads while the first use of RCU chooses the source: a set that passed
 * the fixed test before the choice stored its name after it, and the option named a source
 * not in use (an outside tester: 46 runs in 100).  Each round in a child of its own (the
 * source is the process's). */
static struct prd_rcu_source race_src;
static atomic_int race_go, race_stop;

static void *rcu_setter(void *arg)
{
  (void)arg;
  atomic_store(&race_go, 1);
  for (unsigned i = 0; !atomic_load(&race_stop); i++)
    (void)prd_option_set("rcu", (i & 1) ? "racesrc" : "builtin");
  return NULL;
}

static void rcu_race_child(void *arg)
{
  (void)arg;
  prd_option_set("verbose", "0");
  race_src = prd_rcu_builtin;
  race_src.rs_name = "racesrc";
  if (prd_rcu_register_source(&race_src) != 0)
    _exit(2);
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], NULL, rcu_setter, NULL);
  while (!atomic_load(&race_go))
    ;
  for (volatile int k = 0; k < 20000; k++)
    ;
  prd_synchronize_rcu();
  atomic_store(&race_stop, 1);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  long want = strcmp(prd_rcu_get_source()->rs_name, "builtin") == 0 ? 0 : 3;
  _exit(prd_option_get("rcu") == want ? 0 : 1);
}

static void test_rcu_fix_race(void)
{
  static char out[1 << 16];
  int bad = 0;
  for (int i = 0; i < 20; i++) {
    int st = prd_test_child(rcu_race_child, NULL, out, sizeof(out));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      bad++;
  }
  CHECK_EQ(bad, 0);
}

/* rcu before the source is chosen (this process never uses RCU): a name outside the option's
 * list is kept for the source's choice to check (a program's own source may have it), and a
 * name too long to keep is kept cut, never dropped for the old value. */
static void test_rcu_names(void)
{
  CHECK_EQ(prd_option_set("rcu", "nonesuch"), 0);
  CHECK_EQ(prd_option_get("rcu"), 3);
  CHECK_EQ(prd_option_set("rcu", "builtin"), 0);
  CHECK_EQ(prd_option_get("rcu"), 0);
  CHECK_EQ(prd_option_set("rcu", "a-name-longer-than-the-sixty-three-bytes-an-option-value-may-have"), 0);
  CHECK_EQ(prd_option_get("rcu"), 3);
  CHECK_EQ(prd_option_set("rcu", "builtin"), 0);
}

/* An option read for good: rcu after the first use of RCU is refused (it was accepted, read
 * back as set, and the built-in source stayed in use); hardened after malloc started is set
 * for the caches made afterwards and says what stays as it was.  In a child: the source is
 * the process's. */
static void late_options(void *arg)
{
  (void)arg;
  prd_synchronize_rcu();
  long rcu = prd_option_get("rcu");
  errno = 0;
  if (prd_option_set("rcu", "urcu-memb") != -1 || errno != EBUSY || prd_option_get("rcu") != rcu)
    _exit(2);
  void *p = prd_malloc(40000);
  prd_free(p);
  if (prd_option_set("hardened", "1") != 0 || prd_option_get("hardened") != 1)
    _exit(3);
  _exit(0);
}

static void test_fixed_options(void)
{
  static char out[8192];
  int st = prd_test_child(late_options, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "option rcu is fixed: the grace-period source is chosen at the first "
                          "use of RCU; not changed to 'urcu-memb'");
  CHECK_STR_CONTAINS(out, "option hardened set to '1': malloc started without it");
}

/* A report longer than the line buffer keeps its newline: it was cut before it, and the next
 * report ran on in the same line. */
static void two_reports(void *arg)
{
  (void)arg;
  static char name[1200];
  memset(name, 'x', sizeof(name) - 1);
  prd__report("unknown option '%s' (ignored)", name);
  prd__report("the next report");
  _exit(0);
}

static void test_long_report_one_line(void)
{
  static char out[8192];
  int st = prd_test_child(two_reports, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "xxx...\nprudence: the next report\n");
}

/* Option verbose: the options the environment set are reported at start-up, by the value in
 * use, and each prd_option_set after.  The environment is read at start-up: this program runs
 * again with it set. */
static void exec_verbose_child(void *arg)
{
  (void)arg;
  setenv("PRUDENCE_OPTIONS", "decay_ms=500,verbose=1,rcu=builtin,bogus=1", 1);
  execl("/proc/self/exe", "test_options_doc", "--verbose-set", (char *)NULL);
  _exit(127);
}

static void test_verbose(void)
{
  static char out[8192];
  int st = prd_test_child(exec_verbose_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "PRUDENCE_OPTIONS: unknown option 'bogus' (ignored)");
  CHECK_STR_CONTAINS(out, "prudence: options set by the environment: verbose=1 decay_ms=500\n");
  CHECK_STR_CONTAINS(out, "prudence: prd_option_set: option maint_interval set to '20000'\n");
}

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--verbose-set") == 0)
    return prd_option_set("maint_interval", "20000") == 0 ? 0 : 1;
  FILE *f = fopen(PRD_SOURCE_DIR "/docs/options.md", "r");
  if (f == NULL) {
    perror(PRD_SOURCE_DIR "/docs/options.md");
    return 1;
  }
  size_t n = fread(doc + 1, 1, sizeof(doc) - 2, f);
  doc[0] = '\n';
  doc[n + 1] = '\0';
  fclose(f);
  RUN(test_every_option_documented);
  RUN(test_every_documented_option_exists);
  RUN(test_ms_range);
  RUN(test_decimal_only);
  RUN(test_floor);
  RUN(test_set_in_signal_handler);
  RUN(test_rcu_names);
  RUN(test_rcu_fix_race);
  RUN(test_fixed_options);
  RUN(test_long_report_one_line);
  RUN(test_verbose);
  return prd_test_done();
}
