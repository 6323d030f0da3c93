/*
 * stats.c: printing statistics, from the one list that defines them.
 *
 * 1. The fields of prd_cache_stats_t come from PRD_CACHE_STATS_FIELDS in prudence.h; the
 *    text printer and the JSON writer below expand the same list, so a field added there
 *    appears everywhere with nothing else to edit.
 * 2. No stdio: the printers format into a stack buffer and write(2) it (they may run inside
 *    the allocator, or at exit from a leak or statistics hook).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct sbuf {
  char sb_buf[4096];
  size_t sb_len;
};

static void sb_add(struct sbuf *sb, const char *fmt, ...) PRD_PRINTF(2, 3);
static void sb_add(struct sbuf *sb, const char *fmt, ...)
{
  if (sb->sb_len >= sizeof(sb->sb_buf))
    return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(sb->sb_buf + sb->sb_len, sizeof(sb->sb_buf) - sb->sb_len, fmt, ap);
  va_end(ap);
  if (n > 0)
    sb->sb_len = PRD_MIN(sb->sb_len + (size_t)n, sizeof(sb->sb_buf) - 1);
}

static void sb_flush(int fd, struct sbuf *sb)
{
  const char *p = sb->sb_buf;
  size_t len = sb->sb_len;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w <= 0)
      return;
    p += w;
    len -= (size_t)w;
  }
}

/* JSON string: the cache name may hold any byte; escape what JSON requires. */
static void sb_json_str(struct sbuf *sb, const char *s)
{
  sb_add(sb, "\"");
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      sb_add(sb, "\\%c", c);
    else if (c < 0x20)
      sb_add(sb, "\\u%04x", c);
    else
      sb_add(sb, "%c", c);
  }
  sb_add(sb, "\"");
}

#define STATS_TEXT_STR(n, doc) sb_add(&sb, "  %-14s %-20s # %s\n", #n, st->n, doc);
#define STATS_TEXT_U64(n, doc)                                                                  \
  sb_add(&sb, "  %-14s %-20llu # %s\n", #n, (unsigned long long)st->n, doc);
#define STATS_TEXT_F64(n, doc) sb_add(&sb, "  %-14s %-20.4f # %s\n", #n, st->n, doc);
#define STATS_TEXT(kind, n, doc) STATS_TEXT_##kind(n, doc)

#define STATS_JSON_STR(n)                                                                       \
  sb_add(&sb, "%s\"%s\":", sep, #n);                                                            \
  sb_json_str(&sb, st->n);
#define STATS_JSON_U64(n) sb_add(&sb, "%s\"%s\":%llu", sep, #n, (unsigned long long)st->n);
#define STATS_JSON_F64(n) sb_add(&sb, "%s\"%s\":%.6g", sep, #n, st->n);
#define STATS_JSON(kind, n, doc)                                                                \
  STATS_JSON_##kind(n);                                                                         \
  sep = ",";

void prd__cache_stats_write(int fd, const prd_cache_stats_t *st, bool json)
{
  struct sbuf sb;
  sb.sb_len = 0;
  sb.sb_buf[0] = '\0';
  if (json) {
    const char *sep = "";
    sb_add(&sb, "{");
    PRD_CACHE_STATS_FIELDS(STATS_JSON)
    sb_add(&sb, "}\n");
  } else {
    sb_add(&sb, "cache %s\n", st->name);
    PRD_CACHE_STATS_FIELDS(STATS_TEXT)
  }
  sb_flush(fd, &sb);
}
