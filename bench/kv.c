/* prd-bench kv: the memory of an in-memory key-value server, through plain malloc, free and
 * malloc_usable_size (so that LD_PRELOAD picks the allocator; bench/compare-kv.sh runs it
 * under glibc, jemalloc, mimalloc, tcmalloc and libprudence-malloc, interleaved).
 *
 *   prd-bench kv [--keys N] [--wait-ms MS] [--phase a|b|ab] [--keep] [--latency] [--json]
 *                [--smoke]
 *
 * The store, as a server's dictionary: a table of buckets (a power of two, at least one per
 * key) chaining malloc'd entries {next, key, value} (24 B); a key is a malloc'd 17-byte string
 * ("key:" and 12 digits, 18 B with its NUL); a value is a malloc'd 6-byte header (length and
 * flags) and the phase's size in bytes (512 B: a 518-byte block), written whole.  A SET of a
 * key that exists replaces its value as a server does: a fresh malloc, then the free of the
 * old one.
 * Keys are drawn uniformly from --keys N (default 1,000,000) with a fixed seed.
 *   A (fresh process): N SETs of 512 B values (about 0.632 N keys live at the end).
 *   B (fresh process): N/2 SETs of 100 B, then 3N/10 SETs of 2,000 B, every key dropped,
 *     then A's N SETs of 512 B: memory freed in one size class must serve another.
 *   C (at the end of each): every key dropped; the RSS at once and after --wait-ms
 *     (default 2000).
 * Each phase runs in a child process forked before it allocates anything, so that A and B
 * both start fresh.  --keep ends each phase with its keys live and no C, and the child exits
 * through exit(), so that an allocator's exit-time statistics (PRUDENCE_STATS=1 or
 * PRUDENCE_STATS_FILE, MALLOC_CONF=stats_print:true, MIMALLOC_SHOW_STATS=1) show the phase's
 * end.  Per phase: SETs per second (all of the phase's SETs), the RSS (VmRSS),
 * the usable total (the sum of malloc_usable_size over the live blocks, the table included,
 * kept as the workload goes) and RSS / usable at the end of the phase, then C's two RSS.
 *
 * --latency times every SET on its own as well (two clock reads more a SET, so its rate is
 * not the plain run's): the slowest SET of the phase and the SETs over 1 ms, the pauses a
 * server's client sees (an allocator's work inside one malloc or free, page faults, the
 * scheduler).
 *
 * --json, one line per phase: {"bench":"kv","phase":"A","keys":N,"live":L,"sets":S,
 *   "set_per_s":R,"rss_kb":K,"usable_kb":U,"ratio":X,"drop_rss_kb":D,"wait_rss_kb":W}
 *   and with --latency "max_set_ms":M,"sets_over_1ms":C before the closing brace.
 */
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define KV_KEY_MAX 32   /* "key:" + 12 digits (more above 10^12 keys) + NUL */

struct kv_entry {
  struct kv_entry *e_next;   /* the bucket's chain */
  char *e_key;
  char *e_val;               /* KV_VAL_HDR bytes of header, then the value's bytes */
};

/* What a server keeps before a value's bytes (its length and flags, as an sds header). */
#define KV_VAL_HDR 6

struct kv_store {
  struct kv_entry **kv_tab;  /* the buckets */
  size_t kv_mask;      /* buckets - 1 */
  size_t kv_live;      /* keys present */
  size_t kv_usable;    /* malloc_usable_size of every live block, the table's included */
  uint64_t kv_seed;    /* the key generator's state */
};

static uint64_t kv_rand(struct kv_store *kv)
{
  uint64_t x = kv->kv_seed;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  kv->kv_seed = x;
  return x;
}

/* FNV-1a over the key's bytes, as a server hashes the key it is sent. */
static size_t kv_hash(const char *s)
{
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s != '\0'; s++)
    h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return (size_t)h;
}

static int kv_init(struct kv_store *kv, size_t keys)
{
  size_t buckets = 16;
  while (buckets < keys)
    buckets *= 2;
  kv->kv_tab = calloc(buckets, sizeof(*kv->kv_tab));
  if (kv->kv_tab == NULL)
    return -1;
  kv->kv_mask = buckets - 1;
  kv->kv_live = 0;
  kv->kv_usable = malloc_usable_size(kv->kv_tab);
  kv->kv_seed = 0x9e3779b97f4a7c15ull;
  return 0;
}

/* One SET of a random key of [0, keys) to a fresh value of vsize bytes.  -1: no memory. */
static int kv_set(struct kv_store *kv, size_t keys, size_t vsize)
{
  char key[KV_KEY_MAX];
  snprintf(key, sizeof(key), "key:%012llu", (unsigned long long)(kv_rand(kv) % keys));
  struct kv_entry **bucket = &kv->kv_tab[kv_hash(key) & kv->kv_mask], *e = *bucket;
  while (e != NULL && strcmp(e->e_key, key) != 0)
    e = e->e_next;
  char *val = malloc(KV_VAL_HDR + vsize);
  if (val == NULL)
    return -1;
  uint32_t len = (uint32_t)vsize;
  memcpy(val, &len, sizeof(len));
  memset(val + sizeof(len), 0, KV_VAL_HDR - sizeof(len));
  memset(val + KV_VAL_HDR, 'v', vsize);
  kv->kv_usable += malloc_usable_size(val);
  if (e == NULL) {
    size_t klen = strlen(key) + 1;
    e = malloc(sizeof(*e));
    char *k = malloc(klen);
    if (e == NULL || k == NULL) {
      free(e);
      free(k);
      free(val);
      return -1;
    }
    memcpy(k, key, klen);
    e->e_key = k;
    e->e_next = *bucket;
    *bucket = e;
    kv->kv_usable += malloc_usable_size(e) + malloc_usable_size(k);
    kv->kv_live++;
  } else {
    kv->kv_usable -= malloc_usable_size(e->e_val);
    free(e->e_val);
  }
  e->e_val = val;
  return 0;
}

/* Drops every key (the buckets stay). */
static void kv_drop_all(struct kv_store *kv)
{
  for (size_t i = 0; i <= kv->kv_mask; i++) {
    struct kv_entry *e = kv->kv_tab[i];
    while (e != NULL) {
      struct kv_entry *next = e->e_next;
      kv->kv_usable -= malloc_usable_size(e->e_key) + malloc_usable_size(e->e_val) +
                       malloc_usable_size(e);
      free(e->e_key);
      free(e->e_val);
      free(e);
      e = next;
    }
    kv->kv_tab[i] = NULL;
  }
  kv->kv_live = 0;
}

/* The slowest SET and the SETs over 1 ms (--latency). */
struct kv_lat {
  bool kl_on;
  uint64_t kl_max_ns;
  uint64_t kl_over_1ms;
};

/* n SETs of vsize bytes; adds their time to *ns, and each SET's to *lat when it is on. */
static int kv_run(struct kv_store *kv, size_t keys, size_t n, size_t vsize, uint64_t *ns,
                  struct kv_lat *lat)
{
  uint64_t t0 = bench_now_ns();
  for (size_t i = 0; i < n; i++) {
    uint64_t a = lat->kl_on ? bench_now_ns() : 0;
    if (kv_set(kv, keys, vsize) != 0)
      return -1;
    if (lat->kl_on) {
      uint64_t d = bench_now_ns() - a;
      if (d > lat->kl_max_ns)
        lat->kl_max_ns = d;
      lat->kl_over_1ms += d > 1000000;
    }
  }
  *ns += bench_now_ns() - t0;
  return 0;
}

/* One phase ('A' or 'B') and C after it, in this (child) process; prints its line. */
static int kv_phase(char phase, size_t keys, long wait_ms, bool keep, bool latency, bool json)
{
  struct kv_lat lat = { .kl_on = latency };
  struct kv_store kv;
  if (kv_init(&kv, keys) != 0)
    return 1;
  uint64_t ns = 0;
  size_t sets = 0;
  if (phase == 'B') {
    if (kv_run(&kv, keys, keys / 2, 100, &ns, &lat) != 0 ||
        kv_run(&kv, keys, keys * 3 / 10, 2000, &ns, &lat) != 0)
      return 1;
    sets += keys / 2 + keys * 3 / 10;
    uint64_t t0 = bench_now_ns();
    kv_drop_all(&kv);
    ns += bench_now_ns() - t0;
  }
  if (kv_run(&kv, keys, keys, 512, &ns, &lat) != 0)
    return 1;
  sets += keys;
  long rss = bench_rss_kb();
  size_t usable_kb = kv.kv_usable / 1024, live = kv.kv_live;
  double rate = ns > 0 ? (double)sets * 1e9 / (double)ns : 0;
  double ratio = usable_kb > 0 ? (double)rss / (double)usable_kb : 0;
  long rss_drop = -1, rss_wait = -1;
  if (!keep) {
    kv_drop_all(&kv);
    rss_drop = bench_rss_kb();
    if (wait_ms > 0)
      usleep((useconds_t)wait_ms * 1000);
    rss_wait = bench_rss_kb();
  }
  if (json) {
    printf("{\"bench\":\"kv\",\"phase\":\"%c\",\"keys\":%zu,\"live\":%zu,\"sets\":%zu,"
           "\"set_per_s\":%.0f,\"rss_kb\":%ld,\"usable_kb\":%zu,\"ratio\":%.3f,"
           "\"drop_rss_kb\":%ld,\"wait_rss_kb\":%ld", phase, keys, live, sets, rate, rss,
           usable_kb, ratio, rss_drop, rss_wait);
    if (latency)
      printf(",\"max_set_ms\":%.3f,\"sets_over_1ms\":%llu", (double)lat.kl_max_ns / 1e6,
             (unsigned long long)lat.kl_over_1ms);
    printf("}\n");
  } else {
    printf("kv %c: %zu SETs (%zu keys live) at %.0f SET/s; RSS %ld KiB, usable %zu KiB, "
           "RSS/usable %.3f; all dropped: RSS %ld KiB, after %ld ms %ld KiB\n", phase, sets,
           live, rate, rss, usable_kb, ratio, rss_drop, wait_ms, rss_wait);
    if (latency)
      printf("kv %c: slowest SET %.3f ms, %llu SETs over 1 ms\n", phase,
             (double)lat.kl_max_ns / 1e6, (unsigned long long)lat.kl_over_1ms);
  }
  fflush(stdout);
  if (!keep)
    free(kv.kv_tab);
  return 0;
}

static int bench_kv_main(int argc, char **argv)
{
  struct bench_common bc = { 0 };
  argc = bench_parse_common(argc, argv, &bc);
  long keys = 1000000, wait_ms = 2000;
  const char *phases = "ab";
  bool keep = false, latency = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--keys") == 0)
      keys = bench_arg_long(argv[0], "--keys", argv[++i], 10, LONG_MAX);
    else if (strcmp(argv[i], "--wait-ms") == 0)
      wait_ms = bench_arg_long(argv[0], "--wait-ms", argv[++i], 0, LONG_MAX);
    else if (strcmp(argv[i], "--phase") == 0)
      phases = bench_arg_text(argv[0], "--phase", argv[++i], "a, b or ab");
    else if (strcmp(argv[i], "--keep") == 0)
      keep = true;
    else if (strcmp(argv[i], "--latency") == 0)
      latency = true;
    else {
      fprintf(stderr, "prd-bench kv: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (bc.bc_smoke) {
    keys = 20000;
    wait_ms = 0;
  }
  if (keys < 10 || wait_ms < 0 || strspn(phases, "ab") != strlen(phases) || *phases == '\0') {
    fprintf(stderr, "prd-bench kv: --keys >= 10, --wait-ms >= 0, --phase of a and b\n");
    return 2;
  }
  fflush(stdout);
  for (const char *p = phases; *p != '\0'; p++) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "prd-bench kv: fork failed\n");
      return 1;
    }
    if (pid == 0) {
      int rc = kv_phase((char)(*p - 'a' + 'A'), (size_t)keys, wait_ms, keep, latency,
                        bc.bc_json);
      if (keep)
        exit(rc);   /* the allocator's exit-time statistics, with the phase's keys live */
      _exit(rc);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "prd-bench kv: phase %c failed (out of memory?)\n", *p);
      return 1;
    }
  }
  return 0;
}

PRD_BENCH("kv", "a key-value server's RSS / usable bytes and SET rate (LD_PRELOAD an allocator)",
          bench_kv_main)
