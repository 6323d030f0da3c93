/*
 * options.c: the options of libprudence, from one table (options.h).
 *
 * 1. Sources, in order: the table's defaults; the environment at first use
 *    (PRUDENCE_OPTIONS="name=value,...", PRUDENCE_FAULT_MMAP=N, PRUDENCE_DEBUG=name,... which
 *    sets the option debug from feature names, PRUDENCE_STATS=1 which sets stats);
 *    prd_option_set() at any time.  PRUDENCE_STATS_FILE is a path, read by stats.c, which acts
 *    on the options stats* at exit and at their interval; this file names stats.c's link anchor
 *    (PRD__STATS_LINK, data, not a call), so that a static link of the options takes the
 *    printer that makes PRUDENCE_STATS=1 work in every program.
 * 2. Bad input: an unknown name or a value that does not parse (for debug: a bit that is not
 *    one of PRD_CACHE_DEBUG_ALL's) is reported once on stderr, naming the source, and
 *    ignored; nothing else changes.  Never a crash, never an abort.
 * 3. No allocation: the environment is parsed in place (this runs inside malloc later on).
 * 4. Storage: one _Atomic long per option, read with relaxed loads (prd__opt): an option is a
 *    setting, not a synchronization variable, and a reader seeing an old value briefly is fine.
 * 5. Values: decimal digits, or hexadecimal ones after 0x (a leading zero is not octal; no
 *    sign, no blanks), with k, M or G after a size; yes/no options take 1/0, true/false,
 *    yes/no, on/off.  Options with a floor name it in the report (opt_floor).
 * 6. Fixed options.  A layer that reads an option once for good says so: the grace-period
 *    source (rcu.c, at first use: prd__option_choice reads and fixes it in one hold of
 *    opt_lock; prd_rcu_set_source: prd__option_set_fixed), hardened for malloc (malloc.c, at
 *    its start: prd__option_fix).  A later prd_option_set of a fixed CHOICE option (rcu) is
 *    reported and fails with EBUSY, the value unchanged, so that prd_option_get keeps saying
 *    what is in use; of another (hardened: caches made afterwards do take it) it is done and
 *    reported with what stays as it was.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

enum prd__opt_kind { PRD__OPT_BOOL, PRD__OPT_LONG, PRD__OPT_MS, PRD__OPT_CHOICE };

struct prd__opt_desc {
  const char *od_name;
  enum prd__opt_kind od_kind;
  long od_default;
  const char *od_doc;
  _Atomic long *od_value;
};

#define PRD__OPT_INIT(kind, name, def, doc) .name = (def),
struct prd__options prd__options = { PRD_OPTIONS(PRD__OPT_INIT) };
#undef PRD__OPT_INIT

#define PRD__OPT_DESC(kind, name, def, doc) \
  { #name, PRD__OPT_##kind, (def), doc, &prd__options.name },
static const struct prd__opt_desc opt_table[] = { PRD_OPTIONS(PRD__OPT_DESC) };
#undef PRD__OPT_DESC

static const struct prd__opt_desc *opt_find(const char *name, size_t len)
{
  for (size_t i = 0; i < PRD_ARRAY_SIZE(opt_table); i++)
    if (strlen(opt_table[i].od_name) == len && strncmp(opt_table[i].od_name, name, len) == 0)
      return &opt_table[i];
  return NULL;
}

/* A CHOICE option's names open its meaning: "a|b|c: ...".  Finds the idx-th name; returns its
 * start and sets *len, or NULL when there is none. */
static const char *opt_choice_at(const char *doc, long idx, size_t *len)
{
  const char *end = strchr(doc, ':');
  const char *p = doc;
  if (end == NULL)
    return NULL;
  for (long i = 0; p < end; i++) {
    const char *bar = memchr(p, '|', (size_t)(end - p));
    const char *stop = bar ? bar : end;
    if (i == idx) {
      *len = (size_t)(stop - p);
      return p;
    }
    p = stop + 1;
  }
  return NULL;
}

/* A CHOICE option set to a name outside its list keeps the name here, one slot per option,
 * and its value is then the length of the list: the option's user checks the name (the rcu
 * option: a source the program registered itself, or none, which ends the process: rcu.c §6;
 * a safety choice is never dropped for the default).  Written before the value's release
 * store, read after its acquire load (prd__option_choice). */
#define OPT_TEXT_MAX 64
static char opt_text[PRD_ARRAY_SIZE(opt_table)][OPT_TEXT_MAX];

/* The largest MS value, 10^12 ms (about 31 years): 8 x 10^6 times it still fits 64 bits. */
#define OPT_MS_MAX 1000000000000L

/* The least value an option takes, where 0 or a small value would spin a thread (section 5):
 * the maintenance thread wakes every maint_interval ms at most. */
static long opt_floor(const struct prd__opt_desc *d)
{
  return d->od_value == &prd__options.maint_interval ? 10 : 0;
}

/* Parses value text [s, s+len) for option d; 0 on success, OPT_BELOW_FLOOR for a number
 * under opt_floor, -1 for anything else. */
#define OPT_BELOW_FLOOR (-2)
static int opt_parse(const struct prd__opt_desc *d, const char *s, size_t len, long *out)
{
  enum prd__opt_kind kind = d->od_kind;
  char buf[OPT_TEXT_MAX];
  if (kind == PRD__OPT_CHOICE) {
    /* a name of the list: its index; any other: the index past the list, the name kept as
     * text, cut with "..." (which no list name has) when too long to keep, so that its user
     * refuses it rather than the option keep its old value (rcu=: never fall back) */
    const char *name;
    size_t nlen;
    long i;
    for (i = 0; (name = opt_choice_at(d->od_doc, i, &nlen)) != NULL; i++)
      if (nlen == len && strncmp(name, s, len) == 0) {
        *out = i;
        return 0;
      }
    if (len == 0)
      return -1;
    char *text = opt_text[d - opt_table];
    if (len < OPT_TEXT_MAX) {
      memcpy(text, s, len);
      text[len] = '\0';
    } else {
      memcpy(text, s, OPT_TEXT_MAX - 4);
      memcpy(text + OPT_TEXT_MAX - 4, "...", 4);
    }
    *out = i;
    return 0;
  }
  if (len == 0 || len >= sizeof(buf))
    return -1;
  memcpy(buf, s, len);
  buf[len] = '\0';
  if (kind == PRD__OPT_BOOL) {
    static const char *const yes[] = { "1", "true", "yes", "on" };
    static const char *const no[] = { "0", "false", "no", "off" };
    for (size_t i = 0; i < 4; i++) {
      if (strcasecmp(buf, yes[i]) == 0) { *out = 1; return 0; }
      if (strcasecmp(buf, no[i]) == 0) { *out = 0; return 0; }
    }
    return -1;
  }
  /* decimal, or hexadecimal after 0x (the debug bits are written so): the digits are
   * counted first, as strtol would also take blanks, a sign, a second 0x, and read a
   * leading 0 as octal */
  bool hex = buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X');
  const char *digits = hex ? buf + 2 : buf;
  size_t ndig = strspn(digits, hex ? "0123456789abcdefABCDEF" : "0123456789");
  if (ndig == 0)
    return -1;
  char *end;
  errno = 0;
  long v = strtol(digits, &end, hex ? 16 : 10);
  if (errno != 0 || end != digits + ndig)
    return -1;
  long mult = 1;
  if (*end != '\0' && kind == PRD__OPT_LONG) {
    switch (*end) {
    case 'k': case 'K': mult = 1L << 10; break;
    case 'm': case 'M': mult = 1L << 20; break;
    case 'g': case 'G': mult = 1L << 30; break;
    default: return -1;
    }
    end++;
  }
  if (*end != '\0' || v < 0 || (mult > 1 && v > __LONG_MAX__ / mult))
    return -1;
  /* milliseconds are turned into nanoseconds (and doubled, quadrupled) in 64 bits by their
   * users: a larger value would wrap to a short period */
  if (kind == PRD__OPT_MS && v > OPT_MS_MAX)
    return -1;
  if (v * mult < opt_floor(d))
    return OPT_BELOW_FLOOR;
  /* debug holds PRD_CACHE_* debug bits only: another bit is a cache flag (NOTOUCH,
   * NOMAGAZINE, ...) or none, which would change every new cache's behaviour unasked */
  if (d->od_value == &prd__options.debug && ((v * mult) & ~(long)PRD_CACHE_DEBUG_ALL) != 0)
    return -1;
  *out = v * mult;
  return 0;
}

/* Section 6: why each option is fixed (NULL: it is not); a fixed CHOICE option refuses a
 * change, another takes it with a report.  A CHOICE
 * option's set, its read and its fix hold opt_lock, so that a set that passed the fixed test
 * cannot store its name after a fix read the value (the option then named a source not in
 * use), nor write the text slot under a reader.  Only those: a yes/no or number option is
 * set without a lock, as before there were fixed options (a signal handler may set one while
 * the thread it interrupted does).  Reports are written after the lock is dropped (a report
 * blocked on a full stderr held every set and the first use of RCU).  A leaf; a fork's child
 * makes it anew (prd__options_fork_child). */
static pthread_mutex_t opt_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(const char *) opt_fixed[PRD_ARRAY_SIZE(opt_table)];

static void opt_lock_for(const struct prd__opt_desc *d)
{
  if (d->od_kind == PRD__OPT_CHOICE)
    pthread_mutex_lock(&opt_lock);
}

static void opt_unlock_for(const struct prd__opt_desc *d)
{
  if (d->od_kind == PRD__OPT_CHOICE)
    pthread_mutex_unlock(&opt_lock);
}

/* release: pairs with opt_set_in's acquire load (the reason's text before its pointer) */
static void opt_fix_in(const struct prd__opt_desc *d, const char *why)
{
  atomic_store_explicit(&opt_fixed[d - opt_table], why, memory_order_release);
}

void prd__option_fix(const char *name, const char *why)
{
  const struct prd__opt_desc *d = opt_find(name, strlen(name));
  if (d == NULL)
    return;
  opt_lock_for(d);
  opt_fix_in(d, why);
  opt_unlock_for(d);
}

void prd__options_fork_child(void)
{
  pthread_mutex_init(&opt_lock, NULL);
}

enum opt_outcome { OPT_DONE, OPT_DONE_NOTED, OPT_FIXED, OPT_BAD, OPT_LOW };

/* One set, its lock held when it has one; `force`: a fixed option too
 * (prd__option_set_fixed).  *fixed: the fixed reason seen, for the report. */
static enum opt_outcome opt_set_in(const struct prd__opt_desc *d, const char *val, size_t vlen,
                                   bool force, const char **fixed)
{
  size_t i = (size_t)(d - opt_table);
  *fixed = atomic_load_explicit(&opt_fixed[i], memory_order_acquire);
  /* before the parse: a CHOICE's parse writes its text slot, which the value in use names */
  if (*fixed != NULL && d->od_kind == PRD__OPT_CHOICE && !force)
    return OPT_FIXED;
  long v;
  int why = opt_parse(d, val, vlen, &v);
  if (why != 0)
    return why == OPT_BELOW_FLOOR ? OPT_LOW : OPT_BAD;
  bool noted = *fixed != NULL && !force &&
               v != atomic_load_explicit(d->od_value, memory_order_relaxed);
  /* release: a CHOICE option's text (opt_text) before the value that points at it */
  atomic_store_explicit(d->od_value, v, memory_order_release);
  return noted ? OPT_DONE_NOTED : OPT_DONE;
}

/* The report of a set's outcome, with no lock held; its result and errno. */
static int opt_outcome(const struct prd__opt_desc *d, const char *val, size_t vlen,
                       const char *src, enum opt_outcome o, const char *fixed)
{
  switch (o) {
  case OPT_DONE:
    if (prd__opt(verbose) && strcmp(src, "prd_option_set") == 0)
      prd__report("%s: option %s set to '%.*s'", src, d->od_name, (int)vlen, val);
    return 0;
  case OPT_DONE_NOTED:
    prd__report("%s: option %s set to '%.*s': %s", src, d->od_name, (int)vlen, val, fixed);
    return 0;
  case OPT_FIXED:
    prd__report("%s: option %s is fixed: %s; not changed to '%.*s'", src, d->od_name, fixed,
                (int)vlen, val);
    errno = EBUSY;
    return -1;
  case OPT_LOW:
    prd__report("%s: value '%.*s' for option %s is below its least, %ld (ignored)", src,
                (int)vlen, val, d->od_name, opt_floor(d));
    break;
  case OPT_BAD:
    prd__report("%s: bad value '%.*s' for option %s (ignored)", src, (int)vlen, val,
                d->od_name);
    break;
  }
  errno = EINVAL;
  return -1;
}

static int opt_set(const char *name, size_t nlen, const char *val, size_t vlen, const char *src)
{
  const struct prd__opt_desc *d = opt_find(name, nlen);
  if (d == NULL) {
    prd__report("%s: unknown option '%.*s' (ignored)", src, (int)nlen, name);
    errno = EINVAL;
    return -1;
  }
  const char *fixed;
  opt_lock_for(d);
  enum opt_outcome o = opt_set_in(d, val, vlen, false, &fixed);
  opt_unlock_for(d);
  return opt_outcome(d, val, vlen, src, o, fixed);
}

int prd__option_set_fixed(const char *name, const char *value, const char *src,
                          const char *why)
{
  prd__init();
  const struct prd__opt_desc *d = opt_find(name, strlen(name));
  if (d == NULL)
    return -1;
  const char *fixed;
  size_t vlen = strlen(value);
  opt_lock_for(d);
  enum opt_outcome o = opt_set_in(d, value, vlen, true, &fixed);
  if (o == OPT_DONE || o == OPT_DONE_NOTED)
    opt_fix_in(d, why);
  opt_unlock_for(d);
  return opt_outcome(d, value, vlen, src, o, fixed);
}

/* "a=1,b=2": each entry set in turn; a bad entry is reported and the rest still apply. */
static void opt_parse_list(const char *list, const char *src)
{
  const char *p = list;
  while (*p != '\0') {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *eq = memchr(p, '=', len);
    if (len > 0) {
      if (eq == NULL)
        prd__report("%s: '%.*s' is not name=value (ignored)", src, (int)len, p);
      else
        (void)opt_set(p, (size_t)(eq - p), eq + 1, len - (size_t)(eq - p) - 1, src);
    }
    p += len;
    if (*p == ',')
      p++;
  }
}

/* PRUDENCE_DEBUG=patterns,redzone,verify,audit,unmap,pagebuf,leaks|all: the names of the
 * PRD_CACHE_* debug bits (include/prudence.h).  A bad name is reported and skipped. */
static const struct { const char *dn_name; long dn_bits; } debug_names[] = {
  { "patterns", PRD_CACHE_PATTERNS }, { "redzone", PRD_CACHE_REDZONE },
  { "verify", PRD_CACHE_VERIFY },     { "audit", PRD_CACHE_AUDIT },
  { "unmap", PRD_CACHE_UNMAP },       { "pagebuf", PRD_CACHE_PAGEBUF },
  { "leaks", PRD_CACHE_LEAKS | PRD_CACHE_AUDIT }, { "all", PRD_CACHE_DEBUG_ALL },
};

long prd__debug_parse(const char *list, const char *src)
{
  long bits = 0;
  const char *p = list;
  while (*p != '\0') {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    size_t i;
    for (i = 0; i < PRD_ARRAY_SIZE(debug_names); i++)
      if (strlen(debug_names[i].dn_name) == len && strncmp(debug_names[i].dn_name, p, len) == 0)
        break;
    if (i < PRD_ARRAY_SIZE(debug_names))
      bits |= debug_names[i].dn_bits;
    else if (len > 0)
      prd__report("%s: unknown debug feature '%.*s' (ignored; known: patterns, redzone, "
                  "verify, audit, unmap, pagebuf, leaks, all)", src, (int)len, p);
    p += len;
    if (*p == ',')
      p++;
  }
  return bits;
}

/* Option verbose, at start-up: one report of every option the environment set away from its
 * default, by the value in use (a CHOICE by its name).  No allocation (section 3). */
static void opt_report_set(void)
{
  char line[1024];
  size_t n = 0;
  for (size_t i = 0; i < PRD_ARRAY_SIZE(opt_table) && n < sizeof(line); i++) {
    const struct prd__opt_desc *d = &opt_table[i];
    long v = atomic_load_explicit(d->od_value, memory_order_acquire);
    if (v == d->od_default)
      continue;
    int w;
    size_t clen;
    const char *c = d->od_kind == PRD__OPT_CHOICE ? opt_choice_at(d->od_doc, v, &clen) : NULL;
    if (d->od_kind == PRD__OPT_CHOICE && c == NULL) {
      c = opt_text[i];
      clen = strlen(c);
    }
    if (c != NULL)
      w = snprintf(line + n, sizeof(line) - n, " %s=%.*s", d->od_name, (int)clen, c);
    else
      w = snprintf(line + n, sizeof(line) - n, " %s=%ld", d->od_name, v);
    if (w < 0)
      break;
    n += (size_t)w;
  }
  if (n >= sizeof(line))
    n = sizeof(line) - 1;
  line[n] = '\0';
  prd__report("options set by the environment:%s", n > 0 ? line : " none");
}

static pthread_once_t opt_once = PTHREAD_ONCE_INIT;

static void opt_init_once(void)
{
  /* PRUDENCE_DEBUG first: debugging turns abort_on_error on (as libumem stops at the first
   * corruption it finds), and PRUDENCE_OPTIONS=abort_on_error=0 may still turn it off */
  const char *s = getenv("PRUDENCE_DEBUG");
  if (s != NULL) {
    long bits = prd__debug_parse(s, "PRUDENCE_DEBUG");
    atomic_store_explicit(&prd__options.debug, bits, memory_order_relaxed);
    if (bits != 0)
      atomic_store_explicit(&prd__options.abort_on_error, 1, memory_order_relaxed);
  }
  s = getenv("PRUDENCE_OPTIONS");
  if (s != NULL)
    opt_parse_list(s, "PRUDENCE_OPTIONS");
  s = getenv("PRUDENCE_FAULT_MMAP");
  if (s != NULL)
    (void)opt_set("fault_mmap", strlen("fault_mmap"), s, strlen(s), "PRUDENCE_FAULT_MMAP");
  s = getenv("PRUDENCE_STATS");
  if (s != NULL)
    (void)opt_set("stats", strlen("stats"), s, strlen(s), "PRUDENCE_STATS");
  if (prd__opt(verbose))
    opt_report_set();
}

void prd__init(void)
{
  pthread_once(&opt_once, opt_init_once);
}

PRD__STATS_LINK();

__attribute__((constructor)) static void opt_constructor(void)
{
  prd__init();
}

int prd_option_set(const char *name, const char *value)
{
  prd__init();
  if (name == NULL || value == NULL) {
    prd__report("prd_option_set: NULL %s (ignored)", name == NULL ? "name" : "value");
    errno = EINVAL;
    return -1;
  }
  return opt_set(name, strlen(name), value, strlen(value), "prd_option_set");
}

long prd_option_get(const char *name)
{
  prd__init();
  const struct prd__opt_desc *d = name ? opt_find(name, strlen(name)) : NULL;
  if (d == NULL) {
    errno = EINVAL;
    return -1;
  }
  return atomic_load_explicit(d->od_value, memory_order_relaxed);
}

void prd__options_foreach(void (*fn)(void *arg, const char *name, long def, const char *doc),
                          void *arg)
{
  for (size_t i = 0; i < PRD_ARRAY_SIZE(opt_table); i++)
    fn(arg, opt_table[i].od_name, opt_table[i].od_default, opt_table[i].od_doc);
}

int prd__option_choice(const char *name, char *buf, size_t len, const char *fix_why)
{
  prd__init();
  const struct prd__opt_desc *d = opt_find(name, strlen(name));
  size_t nlen;
  const char *s;
  if (d == NULL || d->od_kind != PRD__OPT_CHOICE || len == 0)
    return -1;
  opt_lock_for(d);
  s = opt_choice_at(d->od_doc, atomic_load_explicit(d->od_value, memory_order_acquire), &nlen);
  if (s == NULL) {   /* a name outside the list (opt_text) */
    s = opt_text[d - opt_table];
    nlen = strlen(s);
  }
  int rc = -1;
  if (nlen < len) {
    memcpy(buf, s, nlen);
    buf[nlen] = '\0';
    rc = 0;
  }
  if (fix_why != NULL)   /* read for good: no set comes between this read and the fix */
    opt_fix_in(d, fix_why);
  opt_unlock_for(d);
  return rc;
}
