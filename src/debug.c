/*
 * debug.c: error reports and internal assertions.
 *
 * 1. Reports go to stderr through write(2) from a stack buffer: the allocator reports from
 *    inside malloc, where stdio (which may allocate) is not safe.  Each line starts with
 *    "prudence: " and names the arena or cache, the buffer and what was wrong.
 * 2. After a report the caller decides, through prd__report_done(), whether to abort: it does
 *    when the option abort_on_error is set (default in Debug builds).  Tests set it to 0 and
 *    then check that the structure stayed consistent.
 * 3. PRD_ASSERT checks internal invariants in Debug builds only; a failed assertion always
 *    aborts: it means our own state is wrong, not the caller's input.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

static _Atomic uint64_t report_count;

void prd__vwrite(int fd, const char *fmt, va_list ap)
{
  char buf[1024];
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  if (n < 0)
    return;
  size_t len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
  const char *p = buf;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w <= 0)
      return;
    p += w;
    len -= (size_t)w;
  }
}

static void write_fmt(int fd, const char *fmt, ...) PRD_PRINTF(2, 3);
static void write_fmt(int fd, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  prd__vwrite(fd, fmt, ap);
  va_end(ap);
}

void prd__report(const char *fmt, ...)
{
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0)
    line[0] = '\0';
  write_fmt(STDERR_FILENO, "prudence: %s\n", line);
  atomic_fetch_add_explicit(&report_count, 1, memory_order_relaxed);
}

void prd__report_done(void)
{
  if (prd__opt(abort_on_error)) {
    write_fmt(STDERR_FILENO, "prudence: aborting (set PRUDENCE_OPTIONS=abort_on_error=0 to go on)\n");
    abort();
  }
}

void prd__error(const char *fmt, ...)
{
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0)
    line[0] = '\0';
  prd__report("%s", line);
  prd__report_done();
}

uint64_t prd__error_count(void)
{
  return atomic_load_explicit(&report_count, memory_order_relaxed);
}

void prd__assert_fail(const char *expr, const char *file, int line)
{
  write_fmt(STDERR_FILENO, "prudence: internal assertion failed: %s (%s:%d)\n", expr, file, line);
  abort();
}
