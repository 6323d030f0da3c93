/*
 * report.c: error reports and internal assertions, a leaf.
 *
 * 1. Reports go to stderr through write(2) from a stack buffer: the allocator reports from
 *    inside malloc, where stdio (which may allocate) is not safe.  Each line starts with
 *    "prudence: " and names the arena or cache, the buffer and what was wrong.
 * 2. After a report the caller decides, through prd__report_done(), whether to abort: it does
 *    when the option abort_on_error is set, the default in every build.  A report means the
 *    heap is not what the program believes it is (a double free, a buffer of another cache, a
 *    write after free): going on would hand the same block out twice or corrupt another
 *    object later, far from the cause, so the process ends at the report that names the cache
 *    and the buffer, as glibc does.  abort_on_error=0 reports and continues (the bad free is
 *    dropped); tests set it and then check that the structure stayed consistent.
 * 3. PRD_ASSERT checks internal invariants in Debug builds only; a failed assertion always
 *    aborts: it means our own state is wrong, not the caller's input.
 * 4. Place in the layers: every file that reports calls down into this one, and this one
 *    calls only the C library (vsnprintf, write, abort), so a report can come from any
 *    layer, under any of its locks, without a cycle.  The one thing it reads of the library
 *    is the option abort_on_error, a relaxed load of options.c's storage (prd__opt), not a
 *    call.  It takes no lock: each line is one write(2) of at most 1 KiB, and the report
 *    count is a relaxed counter (tests read it, nothing is ordered by it).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static _Atomic uint64_t report_count;

int prd__write_all(int fd, const char *p, size_t len)
{
  int old = prd__cancel_off();   /* a report may write under a lock (os.c section 8) */
  int rc = 0;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (w == 0)
        errno = EIO;
      rc = -1;
      break;
    }
    p += w;
    len -= (size_t)w;
  }
  int saved = errno;
  prd__cancel_on(old);
  errno = saved;
  return rc;
}

void prd__vwrite(int fd, const char *fmt, va_list ap)
{
  char buf[1024];
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  if (n < 0)
    return;
  prd__write_all(fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

void prd__write_fmt(int fd, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  prd__vwrite(fd, fmt, ap);
  va_end(ap);
}

/* One report, one line: "prudence: ", the message (cut at 1,000 bytes, "..." then) and the
 * newline, in one write, so that a long message never runs into the next report. */
static void report_v(const char *fmt, va_list ap)
{
  static const char head[] = "prudence: ";
  char out[sizeof(head) - 1 + 1000 + 4 + 1];
  char *line = out + sizeof(head) - 1;
  memcpy(out, head, sizeof(head) - 1);
  int n = vsnprintf(line, 1000 + 1, fmt, ap);
  size_t len = n < 0 ? 0 : (size_t)n;
  if (len > 1000) {
    memcpy(line + 1000, "...", 3);
    len = 1003;
  }
  line[len] = '\n';
  prd__write_all(STDERR_FILENO, out, sizeof(head) - 1 + len + 1);
  atomic_fetch_add_explicit(&report_count, 1, memory_order_relaxed);
}

void prd__report(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  report_v(fmt, ap);
  va_end(ap);
}

void prd__report_done(void)
{
  if (prd__opt(abort_on_error)) {
    prd__write_fmt(STDERR_FILENO, "prudence: aborting (set PRUDENCE_OPTIONS=abort_on_error=0 to go on)\n");
    abort();
  }
}

void prd__error(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  report_v(fmt, ap);
  va_end(ap);
  prd__report_done();
}

uint64_t prd__error_count(void)
{
  return atomic_load_explicit(&report_count, memory_order_relaxed);
}

void prd__assert_fail(const char *expr, const char *file, int line)
{
  prd__write_fmt(STDERR_FILENO, "prudence: internal assertion failed: %s (%s:%d)\n", expr, file, line);
  abort();
}
