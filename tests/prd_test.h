/*
 * prd_test.h: the small test harness every test program includes (header only).
 *
 *   CHECK(cond), CHECK_EQ(a, b), CHECK_STR_CONTAINS(s, sub)  record a failure and go on
 *   RUN(fn)        runs one test function, prints "ok - fn" or "not ok - fn" (TAP style)
 *   prd_test_done() prints "N passed, N failed" and returns the exit status for main
 *   prd_test_child(fn, arg, buf, len) runs fn in a child process with stderr captured into
 *                  buf; returns the child's wait status (for reports that abort); the fork
 *                  and the capture are prd_child_run (prd_child.h), which bench/ uses too
 *   prd_test_child_ok(fn) runs fn(NULL) in a child that exits non-zero on a failed CHECK, and
 *                  CHECKs its exit (its output shown when it failed)
 *   prd_test_segv(st, buf) whether a prd_test_child died of a fault (under a sanitizer,
 *                  whose own handler reports the fault and exits, from the report in buf)
 *   prd_test_bounded(fn, what, seconds) runs fn in a child process group with a deadline;
 *                  returns its exit status, or -1 after killing it (a deadlock fails fast)
 *   prd_rng_*      a seeded xorshift generator; the seed comes from PRD_SEED or the clock
 *                  and is printed, so a failing randomized run can be repeated
 */
#ifndef PRD_TEST_H
#define PRD_TEST_H

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "prd_child.h"

static int prd_t_failures __attribute__((unused)); /* checks failed in the current test */
static int prd_t_passed, prd_t_failed;

#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                \
      prd_t_failures++;                                                                \
    }                                                                                  \
  } while (0)

#define CHECK_EQ(a, b)                                                                 \
  do {                                                                                 \
    long long prd_a_ = (long long)(a), prd_b_ = (long long)(b);                        \
    if (prd_a_ != prd_b_) {                                                            \
      fprintf(stderr, "  FAIL %s:%d: %s == %s (%lld != %lld)\n", __FILE__, __LINE__,   \
              #a, #b, prd_a_, prd_b_);                                                 \
      prd_t_failures++;                                                                \
    }                                                                                  \
  } while (0)

#define CHECK_STR_CONTAINS(s, sub)                                                     \
  do {                                                                                 \
    const char *prd_s_ = (s);                                                          \
    if (prd_s_ == NULL || strstr(prd_s_, (sub)) == NULL) {                             \
      fprintf(stderr, "  FAIL %s:%d: \"%s\" not in output:\n%s\n", __FILE__, __LINE__, \
              (sub), prd_s_ ? prd_s_ : "(null)");                                      \
      prd_t_failures++;                                                                \
    }                                                                                  \
  } while (0)

#define RUN(fn)                                                                        \
  do {                                                                                 \
    prd_t_failures = 0;                                                                \
    fn();                                                                              \
    if (prd_t_failures == 0) {                                                         \
      prd_t_passed++;                                                                  \
      printf("ok - %s\n", #fn);                                                        \
    } else {                                                                           \
      prd_t_failed++;                                                                  \
      printf("not ok - %s (%d checks failed)\n", #fn, prd_t_failures);                \
    }                                                                                  \
    fflush(stdout);                                                                    \
  } while (0)

static inline int prd_test_done(void)
{
  printf("%d passed, %d failed\n", prd_t_passed, prd_t_failed);
  return prd_t_failed == 0 ? 0 : 1;
}

/* prd_test_child's child: stderr and stdout go to the pipe, then fn(arg) runs. */
struct prd_test_child_call {
  void (*fn)(void *);
  void *arg;
};

static inline void prd_test_child_body(void *call, int fd)
{
  struct prd_test_child_call *c = call;
  dup2(fd, STDERR_FILENO);
  dup2(fd, STDOUT_FILENO);
  c->fn(c->arg);
}

/* Runs fn(arg) in a child with stderr (and stdout) captured into buf (NUL-terminated).
 * Returns the raw wait status: WIFSIGNALED/WTERMSIG tell an abort from an exit. */
static inline int prd_test_child(void (*fn)(void *), void *arg, char *buf, size_t len)
{
  struct prd_test_child_call c = { fn, arg };
  return prd_child_run(prd_test_child_body, &c, buf, len);
}

/* fn(NULL) in a child that runs its own CHECKs and exits non-zero when one failed: CHECKs
 * that it exited 0, and shows what it wrote otherwise. */
/* Uses up the process's mappings (the kernel's vm.max_map_count): one region of inaccessible
 * pages, every other one made readable, until mprotect fails; for a child that tests what the
 * library does at the limit.  False when the region could not be made. */
static inline bool prd_test_use_up_mappings(void)
{
  long max = 65530;
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  if (f != NULL) {
    if (fscanf(f, "%ld", &max) != 1)
      max = 65530;
    fclose(f);
  }
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = (size_t)max + 16;
  char *r = mmap(NULL, n * pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED)
    return false;
  for (size_t i = 0; i < n; i += 2)
    if (mprotect(r + i * pg, pg, PROT_READ) != 0)
      break;
  return true;
}

static inline void prd_test_child_ok(void (*fn)(void *))
{
  char buf[4096];
  int st = prd_test_child(fn, NULL, buf, sizeof(buf));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
    fprintf(stderr, "%s", buf);
}

static inline bool prd_test_segv(int st, const char *buf)
{
  if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)
    return true;
#if defined(PRD_ASAN) || defined(PRD_TSAN)
  return strstr(buf, "Sanitizer:DEADLYSIGNAL") != NULL || strstr(buf, "SEGV") != NULL;
#else
  (void)buf;
  return false;
#endif
}

/* Runs fn() in a child process that leads its own process group, and waits for it at most
 * `seconds`: returns fn's exit status, or -1 after killing the group (the child and every
 * process it forked) when it had not finished.  A deadlock then fails the test at once,
 * instead of holding ctest until its timeout. */
static inline int prd_test_bounded(int (*fn)(void), const char *what, double seconds)
{
  pid_t pid = prd_child_fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    setpgid(0, 0);
    _exit(fn());
  }
  setpgid(pid, pid);   /* both sides: whichever runs first */
  struct timespec t0, now, nap = { 0, 10 * 1000 * 1000 };
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 && errno != EINTR)
      return -1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9 > seconds)
      break;
    nanosleep(&nap, NULL);
  }
  printf("# %s: not finished after %.0f s (deadlock): killed\n", what, seconds);
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
    ;
  return -1;
}

/* Runs a shell command (printf format) with its stdout and stderr captured into buf
 * (NUL-terminated, cut at len - 1 bytes).  Returns its exit status, or -1 when it could not
 * run or did not exit normally. */
static inline int prd_test_shell(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int prd_test_shell(char *buf, size_t len, const char *fmt, ...)
{
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
  fflush(stdout);
  FILE *f = popen(cmd, "r");
  if (f == NULL)
    return -1;
  size_t n = len > 0 ? fread(buf, 1, len - 1, f) : 0;
  if (len > 0)
    buf[n] = '\0';
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- TSan and fork ------------------------------------------------------------------- */
/* TSan's deadlock detector tracks at most 64 mutexes held at once by one thread, and the
 * fork handlers (fork.c) hold one per cache, per depot and per thread cache.
 * A test that forks with many caches alive defines PRD_TEST_FORKS_WITH_MANY_LOCKS before
 * including this file: under TSan the detector is then off for that program (races are still
 * detected; the other tests keep lock-order checking). */
#if defined(PRD_TSAN) && defined(PRD_TEST_FORKS_WITH_MANY_LOCKS)
const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
  return "detect_deadlocks=0";
}
#endif

/* ---- seeded random numbers --------------------------------------------------------- */
typedef struct { uint64_t s; } prd_rng_t;

static inline uint64_t prd_rng_next(prd_rng_t *r)
{
  uint64_t x = r->s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return r->s = x;
}

/* Uniform in [0, n). */
static inline uint64_t prd_rng_below(prd_rng_t *r, uint64_t n)
{
  return n == 0 ? 0 : prd_rng_next(r) % n;
}

static inline prd_rng_t prd_rng_seeded(const char *what)
{
  const char *env = getenv("PRD_SEED");
  uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
  if (seed == 0)
    seed = 0x9e3779b97f4a7c15ull;
  printf("# %s: PRD_SEED=%" PRIu64 "\n", what, seed);
  prd_rng_t r = { seed };
  return r;
}

#endif
