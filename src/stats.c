/*
 * stats.c: statistics output, from the lists that define the statistics.
 *
 * 1. What.  prd_stats_print() prints a table of every cache (one row each, as Linux's
 *    /proc/slabinfo and mdb's ::umastat) and of every arena; prd_stats_json() writes the same
 *    as one JSON document on one line (schema in docs/api.md, "version" PRD_STATS_SCHEMA_VERSION),
 *    so that consecutive documents on a stream make JSON lines; prd_stats_write_file() puts one
 *    document in a file atomically.  tools/prdstat reads them.
 * 2. One list.  The fields come from PRD_CACHE_STATS_FIELDS and PRD_VMEM_STATS (prudence.h)
 *    through a table of (name, kind, offset, meaning) generated here: a field another layer
 *    appends to a list appears in the verbose form and the JSON (so in tools/prdstat) with no
 *    edit to this file.  The cache table is a row a reader takes in at a glance, as
 *    /proc/slabinfo and ::kmastat: cache_table[] picks eleven columns (size, buffers in use and
 *    in all, slabs, slab size, memory held, allocations, the magazine hit rate, deferred frees,
 *    latent objects), each a field of the list or a sum of fields named by what it adds up
 *    (slabs: full + partial + free; latent_objs: in latent caches, slabs and depot magazines).
 *    The arena table shows every arena field but the secondary counters in stats_detail[].
 *    The process's grace periods (PRD_RCU_STATS, rcu.c section 10) come first: one line in the
 *    table form, every field in the verbose form, an "rcu" object in the JSON.
 * 3. Snapshot first.  The printers copy every cache's and arena's statistics into memory
 *    mapped from os.c (not from the allocator being printed), under the list and object locks
 *    (slab.c prd__cache_snapshot, vmem.c prd__vmem_snapshot), drop every lock, and only then
 *    format through stdio, which may allocate (through malloc, which may be this library).
 *    Each cache's row is consistent (one cache_lock hold); rows of different caches are taken
 *    one after another, not at one instant (as slabinfo).
 * 4. Triggers.  PRUDENCE_STATS=1 (option stats) prints the table on stderr at exit.
 *    PRUDENCE_STATS_FILE=path writes a JSON snapshot to path at exit and, every
 *    stats_interval_ms, from prd__stats_periodic, a job of the maintenance thread (maint.c)
 *    registered at start-up; with option stats_append each snapshot is appended to path as
 *    one line (one write(2) with O_APPEND) instead of replacing it, so a run leaves a series for
 *    prdstat --plot.  Replacement writes a temporary file of the writer's own,
 *    "path.tmp.PID.N" (N from a counter of the process, the file created with O_EXCL), and
 *    renames it over path (rename(2) is atomic): a reader sees one whole document, never half
 *    of one, also while two writers (the exit's and the periodic job's, two threads) replace
 *    the same path.  Only a regular file is replaced (or made): a path that names a symbolic
 *    link, a device, a FIFO, a socket or a directory is reported and left alone
 *    (stats_not_replaced).  The exit's snapshot waits for a periodic one in progress and ends
 *    the series (stats_write_lock, stats_exiting), so an exit leaves no temporary file.
 *    This file arms its triggers itself, from a constructor: prd__stats_init reads
 *    PRUDENCE_STATS_FILE and registers the at-exit printer, once (pthread_once), and the
 *    periodic writer runs it first too, so a snapshot asked for before the constructor (from a
 *    program's own constructor) finds the path read.  The options it acts on are options.c's,
 *    which names this file's link anchor (PRD__STATS_LINK): a static link that takes the
 *    options takes this file and its constructor, though no lower file calls it.
 * 5. Constants: STATS_SNAP_INITIAL 64 (room for the caches and arenas of a typical process;
 *    a larger census retries with twice what it found), STATS_PATH_MAX 4096 (PATH_MAX).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "race.h"

#define STATS_SNAP_INITIAL 64
#define STATS_PATH_MAX     4096

struct sbuf {
  char sb_buf[16384];   /* one cache's every field (about 70 with the layers above) in one write */
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
  prd__write_all(fd, sb->sb_buf, sb->sb_len);
}

/* The length of the well-formed UTF-8 sequence at s (1 - 4), or 0 when the bytes there are
 * not one (a stray continuation byte, a cut or overlong sequence, a surrogate, past U+10FFFF). */
static size_t utf8_len(const unsigned char *s)
{
  unsigned c = s[0];
  size_t len;
  unsigned min;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, min = 0x10000;
  else
    return 0;
  unsigned cp = c & (0x7fu >> len);
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;   /* also the terminating NUL */
    cp = cp << 6 | (s[i] & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

/* A JSON string, quoted, of s (a cache or arena name, at most PRD_CACHE_NAME_MAX - 1 bytes,
 * which may hold any byte): escapes what JSON requires, keeps well-formed UTF-8 and writes
 * any other byte as U+FFFD, so the document is valid UTF-8 whatever the name (6 bytes at
 * most per byte).  Both writers use it: the fd writer (prd__cache_stats_write) and the stdio
 * one (prd_stats_json). */
#define JSON_STR_MAX (6 * PRD_CACHE_NAME_MAX + 3)
static void json_quote(char out[JSON_STR_MAX], const char *s)
{
  size_t n = 0;
  out[n++] = '"';
  while (*s != '\0' && n + 6 + 2 <= JSON_STR_MAX) {
    unsigned char c = (unsigned char)*s;
    size_t len = utf8_len((const unsigned char *)s);   /* 1 for every byte below 0x80 */
    if (c == '"' || c == '\\') {
      out[n++] = '\\';
      out[n++] = (char)c;
    } else if (c < 0x20) {
      n += (size_t)snprintf(out + n, JSON_STR_MAX - n, "\\u%04x", c);
    } else if (len == 0) {
      memcpy(out + n, "\\ufffd", 6);   /* not UTF-8: the replacement character */
      n += 6;
    } else {
      memcpy(out + n, s, len);
      n += len;
    }
    s += len == 0 ? 1 : len;
  }
  out[n++] = '"';
  out[n] = '\0';
}

#define STATS_TEXT_STR(n, doc) sb_add(&sb, "  %-14s %-20s # %s\n", #n, st->n, doc);
#define STATS_TEXT_U64(n, doc)                                                                  \
  sb_add(&sb, "  %-14s %-20llu # %s\n", #n, (unsigned long long)st->n, doc);
#define STATS_TEXT_F64(n, doc) sb_add(&sb, "  %-14s %-20.4f # %s\n", #n, st->n, doc);
#define STATS_TEXT(kind, n, doc) STATS_TEXT_##kind(n, doc)

#define STATS_JSON_STR(n)                                                                       \
  json_quote(quoted, st->n);                                                                    \
  sb_add(&sb, "%s\"%s\":%s", sep, #n, quoted);
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
    char quoted[JSON_STR_MAX];
    sb_add(&sb, "{");
    PRD_CACHE_STATS_FIELDS(STATS_JSON)
    sb_add(&sb, "}\n");
  } else {
    sb_add(&sb, "cache %s\n", st->name);
    PRD_CACHE_STATS_FIELDS(STATS_TEXT)
  }
  sb_flush(fd, &sb);
}

/* ==== the census: every cache and arena, copied (section 3) =============================== */
struct stats_snap {
  prd__cache_snap_t *ss_caches;
  prd__arena_snap_t *ss_arenas;
  size_t ss_ncaches, ss_narenas;
  void *ss_map;
  size_t ss_map_bytes;
  uint64_t ss_mapped;       /* bytes mapped through os.c */
  uint64_t ss_map_failures;
  prd_rcu_stats_t ss_rcu;   /* the process's grace periods (rcu.c section 10) */
  double ss_time;           /* CLOCK_REALTIME seconds */
  uint64_t ss_mono_ns;      /* CLOCK_MONOTONIC */
};

static void snap_release(struct stats_snap *ss)
{
  if (ss->ss_map != NULL)
    prd__os_unmap(ss->ss_map, ss->ss_map_bytes);
  ss->ss_map = NULL;
}

/* Takes the census into memory from os.c; 0, or -1 with errno ENOMEM. */
static int snap_take(struct stats_snap *ss)
{
  size_t ncap = STATS_SNAP_INITIAL, acap = STATS_SNAP_INITIAL;
  memset(ss, 0, sizeof(*ss));
  for (;;) {
    size_t page = prd__os_page_size();
    size_t bytes = PRD_P2ROUNDUP(ncap * sizeof(prd__cache_snap_t) +
                                     acap * sizeof(prd__arena_snap_t), page);
    void *map = prd__os_map(bytes);
    if (map == NULL) {
      errno = ENOMEM;
      return -1;
    }
    prd__cache_snap_t *caches = map;
    prd__arena_snap_t *arenas = (prd__arena_snap_t *)(caches + ncap);
    size_t nc = prd__cache_snapshot(caches, ncap);
    size_t na = prd__vmem_snapshot(arenas, acap);
    if (nc <= ncap && na <= acap) {
      ss->ss_caches = caches;
      ss->ss_arenas = arenas;
      ss->ss_ncaches = nc;
      ss->ss_narenas = na;
      ss->ss_map = map;
      ss->ss_map_bytes = bytes;
      break;
    }
    /* more than room for: the lists grew; try again with twice what was found */
    prd__os_unmap(map, bytes);
    ncap = PRD_MAX(ncap, 2 * nc);
    acap = PRD_MAX(acap, 2 * na);
  }
  ss->ss_mapped = prd__os_mapped_bytes();
  ss->ss_map_failures = prd__os_map_failures();
  ss->ss_rcu.size = sizeof(ss->ss_rcu);
  (void)prd_rcu_stats(&ss->ss_rcu);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ss->ss_time = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
  ss->ss_mono_ns = prd__now_ns();
  return 0;
}

/* ==== columns, generated from the lists (section 2) ======================================= */
enum stats_kind { SK_STR, SK_U64, SK_F64, SK_SUM };

struct stats_col {
  const char *sc_name;
  enum stats_kind sc_kind;
  size_t sc_off;            /* in prd__cache_snap_t or prd__arena_snap_t */
  const char *sc_doc;
  size_t sc_plus[2];        /* SK_SUM: the U64 fields added to the one at sc_off (0: none) */
};

#define STATS_CACHE_COL(kind, n, doc) \
  { #n, SK_##kind, offsetof(prd__cache_snap_t, cs_stats.n), doc, { 0, 0 } },
static const struct stats_col cache_cols[] = { PRD_CACHE_STATS_FIELDS(STATS_CACHE_COL) };
#undef STATS_CACHE_COL

/* The cache table (section 2): slabinfo's and ::kmastat's columns, and Prudence's.  Each is
 * a field of the list, or a sum of fields named by what it adds up. */
#define CS(n) offsetof(prd__cache_snap_t, cs_stats.n)
#define STATS_TABLE_COL(kind, n) { #n, SK_##kind, CS(n), NULL, { 0, 0 } }
static const struct stats_col cache_table[] = {
  STATS_TABLE_COL(STR, name),
  STATS_TABLE_COL(U64, buf_size),
  STATS_TABLE_COL(U64, bufs_inuse),
  STATS_TABLE_COL(U64, bufs_total),
  { "slabs", SK_SUM, CS(slabs_full), NULL, { CS(slabs_partial), CS(slabs_free) } },
  STATS_TABLE_COL(U64, slab_size),
  STATS_TABLE_COL(U64, slab_bytes),
  STATS_TABLE_COL(U64, allocs),
  STATS_TABLE_COL(F64, oc_hit_pct),
  STATS_TABLE_COL(U64, deferred_frees),
  { "latent_objs", SK_SUM, CS(latent_cache_objs), NULL,
    { CS(latent_slab_objs), CS(latent_depot_objs) } },
};
#undef STATS_TABLE_COL
#undef CS

#define STATS_ARENA_COL(n, doc) \
  { #n, SK_U64, offsetof(prd__arena_snap_t, as_stats.n), doc, { 0, 0 } },
static const struct stats_col arena_cols[] = {
  { "name", SK_STR, offsetof(prd__arena_snap_t, as_name), "arena name", { 0, 0 } },
  { "source", SK_STR, offsetof(prd__arena_snap_t, as_source), "the arena it imports from",
    { 0, 0 } },
  { "quantum", SK_U64, offsetof(prd__arena_snap_t, as_quantum), "unit of allocation", { 0, 0 } },
  PRD_VMEM_STATS(STATS_ARENA_COL)
};
#undef STATS_ARENA_COL

/* Secondary counters left out of the arena table (section 2); the verbose form and the JSON
 * have them. */
static const char *const stats_detail[] = { "bytes_imported", "waits", "spans" };

static bool col_in_table(const struct stats_col *c)
{
  for (size_t i = 0; i < PRD_ARRAY_SIZE(stats_detail); i++)
    if (strcmp(c->sc_name, stats_detail[i]) == 0)
      return false;
  return true;
}

/* Byte counts print as 12.3K/4.0M/1.2G in the table (exact in the verbose form and JSON). */
static bool col_is_bytes(const struct stats_col *c)
{
  size_t len = strlen(c->sc_name);
  return strncmp(c->sc_name, "bytes_", 6) == 0 ||
         (len > 6 && strcmp(c->sc_name + len - 6, "_bytes") == 0);
}

/* Percentages print with one decimal in the table. */
static bool col_is_pct(const struct stats_col *c)
{
  size_t len = strlen(c->sc_name);
  return len > 4 && strcmp(c->sc_name + len - 4, "_pct") == 0;
}

static void cell_format(const struct stats_col *c, const void *row, bool human, char *out,
                        size_t len)
{
  const char *p = (const char *)row + c->sc_off;
  switch (c->sc_kind) {
  case SK_STR:
    snprintf(out, len, "%s", p[0] != '\0' ? p : "-");
    break;
  case SK_U64:
  case SK_SUM: {
    uint64_t v, w;
    memcpy(&v, p, sizeof(v));
    for (size_t i = 0; c->sc_kind == SK_SUM && i < PRD_ARRAY_SIZE(c->sc_plus); i++)
      if (c->sc_plus[i] != 0) {
        memcpy(&w, (const char *)row + c->sc_plus[i], sizeof(w));
        v += w;
      }
    static const char units[] = "KMGTPE";
    if (human && col_is_bytes(c) && v >= 10240) {
      double d = (double)v;
      int u = -1;
      while (d >= 1024.0 && u < 5) {
        d /= 1024.0;
        u++;
      }
      snprintf(out, len, "%.1f%c", d, units[u]);
    } else {
      snprintf(out, len, "%llu", (unsigned long long)v);
    }
    break;
  }
  case SK_F64: {
    double v;
    memcpy(&v, p, sizeof(v));
    snprintf(out, len, human && col_is_pct(c) ? "%.1f" : "%.3f", v);
    break;
  }
  }
}

#define STATS_CELL 64

/* One table: a header of the columns' names, a row per element; widths fit the widest. */
static void table_print(FILE *fp, const struct stats_col *cols, size_t ncols, const void *rows,
                        size_t stride, size_t nrows, const bool *skip)
{
  size_t width[PRD_ARRAY_SIZE(cache_cols) > PRD_ARRAY_SIZE(arena_cols)
                   ? PRD_ARRAY_SIZE(cache_cols) : PRD_ARRAY_SIZE(arena_cols)];
  char cell[STATS_CELL];
  for (size_t c = 0; c < ncols; c++) {
    width[c] = strlen(cols[c].sc_name);
    for (size_t r = 0; r < nrows; r++) {
      if (skip != NULL && skip[r])
        continue;
      cell_format(&cols[c], (const char *)rows + r * stride, true, cell, sizeof(cell));
      width[c] = PRD_MAX(width[c], strlen(cell));
    }
  }
  for (size_t c = 0; c < ncols; c++)
    if (col_in_table(&cols[c]))
      fprintf(fp, c == 0 ? "%-*s" : " %*s", (int)width[c], cols[c].sc_name);
  fputc('\n', fp);
  for (size_t r = 0; r < nrows; r++) {
    if (skip != NULL && skip[r])
      continue;
    for (size_t c = 0; c < ncols; c++) {
      if (!col_in_table(&cols[c]))
        continue;
      cell_format(&cols[c], (const char *)rows + r * stride, true, cell, sizeof(cell));
      if (cols[c].sc_kind == SK_STR)
        fprintf(fp, c == 0 ? "%-*s" : " %-*s", (int)width[c], cell);
      else
        fprintf(fp, " %*s", (int)width[c], cell);
    }
    fputc('\n', fp);
  }
}

/* Every field of one element, "  field value  # meaning", as libumem's ::umem_cache -v. */
static void block_print(FILE *fp, const char *what, const struct stats_col *cols, size_t ncols,
                        const void *row)
{
  char cell[STATS_CELL];
  fprintf(fp, "%s %s\n", what, (const char *)row + cols[0].sc_off);
  for (size_t c = 1; c < ncols; c++) {
    cell_format(&cols[c], row, false, cell, sizeof(cell));
    fprintf(fp, "  %-16s %-20s # %s\n", cols[c].sc_name, cell, cols[c].sc_doc);
  }
}

/* The process's grace periods (section 2): one line, or every field with its meaning. */
static void rcu_print(FILE *fp, const prd_rcu_stats_t *r, bool verbose)
{
  if (verbose) {
    fprintf(fp, "rcu\n");
#define STATS_RCU_LINE(n, doc) \
  fprintf(fp, "  %-16s %-20llu # %s\n", #n, (unsigned long long)r->n, doc);
    PRD_RCU_STATS(STATS_RCU_LINE)
#undef STATS_RCU_LINE
    return;
  }
  fprintf(fp, "grace periods: %llu requested, %llu completed (%llu by the driver, %.1f ms in "
          "all), %llu inline waits (%llu ran out), %llu synchronize, %llu blocking waits, "
          "%llu membarriers (%llu grace periods without one at their start)\n",
          (unsigned long long)r->gp_requests, (unsigned long long)r->gp_completed,
          (unsigned long long)r->gp_by_driver, (double)r->gp_ns / 1e6,
          (unsigned long long)r->gp_inline_waits, (unsigned long long)r->gp_inline_timeouts,
          (unsigned long long)r->gp_syncs, (unsigned long long)r->gp_blocking_waits,
          (unsigned long long)r->membarriers, (unsigned long long)r->gp_fenced);
}

static int stream_result(FILE *fp)
{
  if (fflush(fp) != 0 || ferror(fp)) {
    if (errno == 0)
      errno = EIO;
    return -1;
  }
  return 0;
}

static int stats_print(FILE *fp, int flags)
{
  if (fp == NULL || (flags & ~(PRD_STATS_VERBOSE | PRD_STATS_NOCACHES | PRD_STATS_NOARENAS |
                               PRD_STATS_NOINTERNAL)) != 0) {
    prd__report("prd_stats_print: %s (nothing printed)",
                fp == NULL ? "NULL stream" : "unknown flags");
    errno = EINVAL;
    return -1;
  }
  struct stats_snap ss;
  if (snap_take(&ss) != 0)
    return -1;
  /* every lock is dropped from here on (section 3) */
  size_t shown = 0;
  bool *skip = NULL;
  bool skipmem[STATS_SNAP_INITIAL];
  skip = ss.ss_ncaches <= STATS_SNAP_INITIAL ? skipmem : calloc(ss.ss_ncaches, sizeof(bool));
  if (skip == NULL) {
    snap_release(&ss);
    errno = ENOMEM;
    return -1;
  }
  for (size_t i = 0; i < ss.ss_ncaches; i++) {
    skip[i] = (flags & PRD_STATS_NOINTERNAL) && ss.ss_caches[i].cs_internal;
    shown += !skip[i];
  }
  fprintf(fp, "prudence statistics: pid %ld, %zu caches, %zu arenas, %.1f MiB mapped from the OS\n",
          (long)getpid(), shown, ss.ss_narenas, (double)ss.ss_mapped / 1048576.0);
  rcu_print(fp, &ss.ss_rcu, (flags & PRD_STATS_VERBOSE) != 0);
  if (!(flags & PRD_STATS_NOCACHES)) {
    if (flags & PRD_STATS_VERBOSE) {
      for (size_t i = 0; i < ss.ss_ncaches; i++)
        if (!skip[i])
          block_print(fp, "cache", cache_cols, PRD_ARRAY_SIZE(cache_cols), &ss.ss_caches[i]);
    } else {
      fprintf(fp, "caches:\n");
      table_print(fp, cache_table, PRD_ARRAY_SIZE(cache_table), ss.ss_caches,
                  sizeof(prd__cache_snap_t), ss.ss_ncaches, skip);
    }
  }
  if (!(flags & PRD_STATS_NOARENAS)) {
    if (flags & PRD_STATS_VERBOSE) {
      for (size_t i = 0; i < ss.ss_narenas; i++)
        block_print(fp, "arena", arena_cols, PRD_ARRAY_SIZE(arena_cols), &ss.ss_arenas[i]);
    } else {
      fprintf(fp, "arenas:\n");
      table_print(fp, arena_cols, PRD_ARRAY_SIZE(arena_cols), ss.ss_arenas,
                  sizeof(prd__arena_snap_t), ss.ss_narenas, NULL);
    }
  }
  if (skip != skipmem)
    free(skip);
  snap_release(&ss);
  return stream_result(fp);
}

int prd_stats_print(FILE *fp, int flags)
{
  int old = prd__cancel_off();   /* fprintf is a cancellation point (os.c section 8) */
  int r = stats_print(fp, flags);
  prd__cancel_on(old);
  return r;
}

/* ==== JSON ================================================================================ */
static void json_fields(FILE *fp, const struct stats_col *cols, size_t ncols, const void *row)
{
  for (size_t c = 0; c < ncols; c++) {
    const char *p = (const char *)row + cols[c].sc_off;
    fprintf(fp, "%s\"%s\":", c == 0 ? "" : ",", cols[c].sc_name);
    if (cols[c].sc_kind == SK_STR) {
      char quoted[JSON_STR_MAX];
      json_quote(quoted, p);
      fputs(quoted, fp);
    } else if (cols[c].sc_kind == SK_U64) {
      uint64_t v;
      memcpy(&v, p, sizeof(v));
      fprintf(fp, "%llu", (unsigned long long)v);
    } else {
      double v;
      memcpy(&v, p, sizeof(v));
      if (isfinite(v))
        fprintf(fp, "%.6f", v);   /* always a fraction: readers see a float, not an int */
      else
        fputs("null", fp);   /* JSON has no NaN or infinity */
    }
  }
}

static _Atomic uint64_t stats_seq;   /* documents written by this process */

static int stats_json(FILE *fp)
{
  if (fp == NULL) {
    prd__report("prd_stats_json: NULL stream (nothing written)");
    errno = EINVAL;
    return -1;
  }
  struct stats_snap ss;
  if (snap_take(&ss) != 0)
    return -1;
  uint64_t seq = atomic_fetch_add_explicit(&stats_seq, 1, memory_order_relaxed) + 1;
  fprintf(fp, "{\"schema\":\"prudence-stats\",\"version\":%d,\"pid\":%ld,\"seq\":%llu,"
          "\"time\":%.6f,\"mono_ns\":%llu,\"os\":{\"mapped_bytes\":%llu,\"map_failures\":%llu},"
          "\"caches\":[",
          PRD_STATS_SCHEMA_VERSION, (long)getpid(), (unsigned long long)seq, ss.ss_time,
          (unsigned long long)ss.ss_mono_ns, (unsigned long long)ss.ss_mapped,
          (unsigned long long)ss.ss_map_failures);
  for (size_t i = 0; i < ss.ss_ncaches; i++) {
    fputs(i == 0 ? "{" : ",{", fp);
    json_fields(fp, cache_cols, PRD_ARRAY_SIZE(cache_cols), &ss.ss_caches[i]);
    fprintf(fp, ",\"internal\":%s}", ss.ss_caches[i].cs_internal ? "true" : "false");
  }
  fputs("],\"rcu\":{", fp);
  const char *sep = "";
#define STATS_RCU_JSON(n, doc) \
  fprintf(fp, "%s\"%s\":%llu", sep, #n, (unsigned long long)ss.ss_rcu.n); \
  sep = ",";
  PRD_RCU_STATS(STATS_RCU_JSON)
#undef STATS_RCU_JSON
  fputs("},\"arenas\":[", fp);
  for (size_t i = 0; i < ss.ss_narenas; i++) {
    fputs(i == 0 ? "{" : ",{", fp);
    json_fields(fp, arena_cols, PRD_ARRAY_SIZE(arena_cols), &ss.ss_arenas[i]);
    fputc('}', fp);
  }
  fputs("]}\n", fp);
  snap_release(&ss);
  return stream_result(fp);
}

int prd_stats_json(FILE *fp)
{
  int old = prd__cancel_off();   /* fprintf is a cancellation point (os.c section 8) */
  int r = stats_json(fp);
  prd__cancel_on(old);
  return r;
}

/* ==== snapshot files (section 4) ========================================================== */
/* The document in memory (stdio's memstream; no allocator lock is held by then). */
static char *json_document(size_t *lenp)
{
  char *doc = NULL;
  size_t len = 0;
  FILE *ms = open_memstream(&doc, &len);
  if (ms == NULL)
    return NULL;
  int rc = prd_stats_json(ms);
  int saved = errno;
  if (fclose(ms) != 0 || rc != 0) {
    free(doc);
    errno = rc != 0 ? saved : EIO;
    return NULL;
  }
  *lenp = len;
  return doc;
}

/* The appending writer's write (its file opened with O_NONBLOCK): all of doc, waiting for room
 * at most STATS_PIPE_WAIT_MS in all (a FIFO whose reader holds it open and does not read, or
 * reads slowly, would otherwise hold the writer, and the process at its exit, for ever: the
 * rest is dropped, ETIMEDOUT), with SIGPIPE blocked (a reader that closed early is EPIPE, a
 * failed write, not the end of the program; a SIGPIPE this write raised is taken back). */
#define STATS_PIPE_WAIT_MS 1000
static _Atomic bool stats_line_open;   /* a FIFO's line was cut by the bound: end it first */
/* Writes all of p until monotonic time `deadline`, polling for room: the bytes written, with
 * errno set (ETIMEDOUT at the deadline) when fewer than len. */
static size_t write_until(int fd, const char *p, size_t len, uint64_t deadline)
{
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(fd, p + done, len - done);
    if (w > 0) {
      done += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    uint64_t now = prd__now_ns();
    if (w < 0 && errno == EAGAIN && now < deadline) {
      struct pollfd pfd = { fd, POLLOUT, 0 };
      (void)poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1);
      continue;
    }
    if (w == 0 || errno == EAGAIN)
      errno = w == 0 ? EIO : ETIMEDOUT;
    break;
  }
  return done;
}

static int stats_write_bounded(int fd, const char *p, size_t len)
{
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  sigset_t pending;
  bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
  uint64_t deadline = prd__now_ns() + (uint64_t)STATS_PIPE_WAIT_MS * 1000000u;
  int rc = 0;
  /* the rest of a line the bound cut, if any, is dropped: its newline goes first, so that the
   * stream stays one snapshot a line (the cut one fails to parse, the next does not); with no
   * room even for that, this snapshot is dropped whole */
  if (atomic_exchange_explicit(&stats_line_open, false, memory_order_relaxed) &&
      write_until(fd, "\n", 1, deadline) != 1) {
    if (errno == ETIMEDOUT)
      atomic_store_explicit(&stats_line_open, true, memory_order_relaxed);
    rc = -1;
  } else {
    size_t done = write_until(fd, p, len, deadline);
    if (done != len) {
      rc = -1;
      if (errno == ETIMEDOUT && done != 0)
        atomic_store_explicit(&stats_line_open, true, memory_order_relaxed);
    }
  }
  int saved = errno;
  if (rc != 0 && saved == EPIPE && !was_pending) {
    struct timespec zero = { 0, 0 };
    (void)sigtimedwait(&pipe_set, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = saved;
  return rc;
}

/* What a snapshot that replaces its file refuses to replace (section 4): anything that exists
 * and is not a regular file.  rename(2) would put a regular file in the place of a device
 * node (run as root, PRUDENCE_STATS_FILE=/dev/null replaced the system's /dev/null), a FIFO,
 * a socket or a symbolic link, silently.  NULL: path is a regular file or does not exist. */
static const char *stats_not_replaced(const char *path)
{
  struct stat st;
  if (lstat(path, &st) != 0 || S_ISREG(st.st_mode))
    return NULL;
  return S_ISLNK(st.st_mode)  ? "a symbolic link"
         : S_ISDIR(st.st_mode) ? "a directory"
         : S_ISFIFO(st.st_mode) ? "a FIFO"
         : S_ISSOCK(st.st_mode) ? "a socket"
                                : "a device";
}

static void stats_report_not_replaced(const char *who, const char *path, const char *what,
                                      bool env)
{
  prd__report("%s: %s is %s, which a snapshot does not replace (nothing written; name a "
              "regular file%s)", who, path, what,
              env ? ", or a device or FIFO with stats_append=1, which writes to it" : "");
}

/* -1 with errno EEXIST and *what set when path is something stats_not_replaced refuses. */
static int stats_file_write_in(const char *path, bool append, const char **what)
{
  *what = NULL;
  if (!append && (*what = stats_not_replaced(path)) != NULL) {
    errno = EEXIST;
    return -1;
  }
  size_t len;
  char *doc = json_document(&len);
  if (doc == NULL)
    return -1;
  int rc = -1, saved = 0;
  if (append) {
    /* one write(2) of one line with O_APPEND: lines of concurrent writers never interleave.
     * Opened without blocking: a FIFO that no reader has open fails at once (ENXIO, reported
     * as any unwritable file) instead of holding the writer, and the process at its exit, for
     * ever; a reader that is there gets STATS_PIPE_WAIT_MS to take the line */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd >= 0) {
      rc = stats_write_bounded(fd, doc, len);
      saved = errno;
      close(fd);
    } else {
      saved = errno;
    }
  } else {
    /* a temporary file of this writer's own (the process, and a number no other writer of
     * it gets), created exclusively: two writers of one path (the exit's and the periodic
     * job's, or two threads) never truncate or rename each other's file, so the reader sees
     * one whole document or the other, and each rename finds its file */
    static _Atomic uint64_t tmp_seq;
    char tmp[STATS_PATH_MAX + 48];
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 8; tries++) {
      snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%llu", path, (long)getpid(),
               (unsigned long long)atomic_fetch_add_explicit(&tmp_seq, 1, memory_order_relaxed));
      fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno != EEXIST)
        break;   /* a left-over of a dead process of the same pid: the next number */
    }
    if (fd >= 0) {
      rc = prd__write_all(fd, doc, len);
      saved = errno;
      if (close(fd) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
      }
      PRD_RACE();   /* the temporary file exists: a process exit here left it (section 4) */
      if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        saved = errno;
      }
      if (rc != 0)
        unlink(tmp);
    } else {
      saved = errno;
    }
  }
  free(doc);
  if (rc != 0)
    errno = saved;
  return rc;
}

static int stats_file_write(const char *path, bool append, const char **what)
{
  int old = prd__cancel_off();   /* open, write and close are cancellation points (os.c section 8) */
  int r = stats_file_write_in(path, append, what);
  prd__cancel_on(old);
  return r;
}

/* The writers of snapshot files (the periodic job, prd_stats_write_file and the exit's
 * snapshot) take turns: a process that ends while the maintenance thread replaces the file
 * left its temporary file behind, one run in a few dozen with snapshots every millisecond.
 * The exit's writer takes the lock (bounded: it may be a signal handler's exit on the very
 * thread that holds it), so a write in progress ends first, and sets stats_exiting, after
 * which the periodic job writes no more (a prd_stats_write_file that starts after the exit's
 * snapshot is the caller's: the process may end during it). */
static pthread_mutex_t stats_write_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool stats_exiting;   /* set under stats_write_lock, unless its wait ran out */
#define STATS_EXIT_WAIT_MS 2000   /* a FIFO's reader gets STATS_PIPE_WAIT_MS of it */

int prd_stats_write_file(const char *path)
{
  if (path == NULL || path[0] == '\0' || strlen(path) >= STATS_PATH_MAX) {
    prd__report("prd_stats_write_file: %s (nothing written)",
                path == NULL ? "NULL path" : path[0] == '\0' ? "empty path" : "path too long");
    errno = EINVAL;
    return -1;
  }
  const char *what;
  pthread_mutex_lock(&stats_write_lock);   /* an exit waits for it too (section 4) */
  int rc = stats_file_write(path, false, &what);
  int saved = errno;
  pthread_mutex_unlock(&stats_write_lock);
  if (what != NULL)
    stats_report_not_replaced("prd_stats_write_file", path, what, false);
  errno = saved;
  return rc;
}

/* ==== PRUDENCE_STATS, PRUDENCE_STATS_FILE (section 4) ===================================== */
static char stats_path[STATS_PATH_MAX];      /* set once, under stats_once (prd__stats_init) */
static _Atomic uint64_t stats_last_ns;       /* when the last periodic snapshot was taken */
static _Atomic bool stats_failed_reported;

static int stats_file_snapshot_in(void)
{
  const char *what;
  int rc = stats_file_write(stats_path, prd__opt(stats_append) != 0, &what);
  if (rc != 0 && !atomic_exchange_explicit(&stats_failed_reported, true, memory_order_relaxed)) {
    if (what != NULL)
      stats_report_not_replaced("PRUDENCE_STATS_FILE", stats_path, what, true);
    else
      prd__report("PRUDENCE_STATS_FILE: cannot write %s: %s (reported once)", stats_path,
                  strerror(errno));
  }
  return rc;
}

static int stats_file_snapshot(void)
{
  pthread_mutex_lock(&stats_write_lock);
  int rc = atomic_load_explicit(&stats_exiting, memory_order_relaxed) ? 0
                                                                     : stats_file_snapshot_in();
  pthread_mutex_unlock(&stats_write_lock);
  return rc;
}

/* In a fork's child (fork.c section 3): the lock is taken around a snapshot, which takes the
 * cache and arena locks of fork.c's order inside it, never the other way round; a thread that
 * held it is not in the child. */
void prd__stats_fork_child(void)
{
  pthread_mutex_init(&stats_write_lock, NULL);
}

static void stats_file_last(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += STATS_EXIT_WAIT_MS / 1000;
  bool locked = pthread_mutex_timedlock(&stats_write_lock, &ts) == 0;
  atomic_store_explicit(&stats_exiting, true, memory_order_relaxed);
  (void)stats_file_snapshot_in();
  if (locked)
    pthread_mutex_unlock(&stats_write_lock);
}

int prd__stats_periodic(uint64_t now_ns)
{
  prd__stats_init();
  long interval = prd__opt(stats_interval_ms);
  if (stats_path[0] == '\0' || interval <= 0)
    return 0;
  uint64_t last = atomic_load_explicit(&stats_last_ns, memory_order_relaxed);
  if (last != 0 && now_ns - last < (uint64_t)interval * 1000000u)
    return 0;
  /* one caller per interval: the one whose exchange succeeds writes (relaxed: the value is
   * a clock reading, it publishes nothing else) */
  if (!atomic_compare_exchange_strong_explicit(&stats_last_ns, &last, now_ns,
                                               memory_order_relaxed, memory_order_relaxed))
    return 0;
  return stats_file_snapshot() == 0 ? 1 : -1;
}

bool prd__stats_periodic_on(void)
{
  prd__stats_init();
  return stats_path[0] != '\0' && prd__opt(stats_interval_ms) > 0;
}

static void stats_atexit(void)
{
  if (prd__opt(stats))
    (void)prd_stats_print(stderr, 0);
  if (stats_path[0] != '\0')
    stats_file_last();
}

/* The periodic snapshot as a job of the maintenance thread (maint.c section 1): run at each of
 * its wake-ups, written every stats_interval_ms; it wants the thread while snapshots are on. */
static void stats_job(void *arg)
{
  (void)arg;
  (void)prd__stats_periodic(prd__now_ns());
}

static pthread_once_t stats_once = PTHREAD_ONCE_INIT;
const char prd__stats_anchor = 0;   /* named by options.c (PRD__STATS_LINK, internal.h) */

static void stats_init_once(void)
{
  const char *p = getenv("PRUDENCE_STATS_FILE");
  if (p != NULL && p[0] != '\0') {
    if (strlen(p) >= sizeof(stats_path))
      prd__report("PRUDENCE_STATS_FILE: path longer than %d bytes (ignored)", STATS_PATH_MAX - 1);
    else
      memcpy(stats_path, p, strlen(p) + 1);
  }
  atexit(stats_atexit);
  (void)prd__maint_register(stats_job, NULL, prd__stats_periodic_on, true);
}

void prd__stats_init(void)
{
  /* stats_path is written once, under stats_once: every reader passes here first, so the
   * write happens before its read (pthread_once orders it) */
  pthread_once(&stats_once, stats_init_once);
}

/* Section 4: the triggers are armed at load time, before main, whatever the program calls. */
__attribute__((constructor)) static void stats_constructor(void)
{
  prd__stats_init();
}
