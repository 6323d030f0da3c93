/*
 * test_malloc_huge.c: huge blocks (src/malloc.c sections 1b and 4, src/os.c section 1b).
 *   - freed huge blocks are kept and reused: a steady loop of big malloc/free maps and unmaps
 *     nothing (every mapping made to fail, every unmap too, and the loop still runs with the
 *     mapped bytes unchanged); the bounds in bytes and count hold; the maintenance job gives
 *     kept blocks back after malloc_huge_decay_ms; calloc of a kept block is zeroed; a part
 *     of a kept block grows by realloc into the kept rest, in place;
 *   - sizes no plain mmap could commit fail with ENOMEM (malloc, calloc, realloc,
 *     aligned_alloc, posix_memalign, which also sets errno as glibc does);
 *   - free, prd_free_deferred and malloc_usable_size keep errno when an unmap fails or a
 *     report is written;
 *   - a realloc whose move of the mapping fails copies instead and leaks no mapping;
 *   - a block kept unused for a while goes back when the classes grow (a growth reap), so a
 *     freed buffer does not stay resident beside the memory that replaces it.
 * Each case that frees a huge block runs in a child, so that options and fault injection stay
 * local, and so that this process starts no library thread (the maintenance job's thread
 * starts while blocks are kept) before it forks the next child.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"
#include "prd_test.h"

#define MIB ((size_t)1 << 20)

/* A huge block of `bytes` written and freed, with decay off: the cache keeps it (its address
 * is returned, for the caller to recognize). */
static char *kept_block(size_t bytes)
{
  prd_option_set("malloc_huge_decay_ms", "600000");   /* no decay during the test */
  char *p = prd_malloc(bytes);
  CHECK(p != NULL);
  memset(p, 0xab, bytes);
  prd_free(p);
  CHECK_EQ(prd__malloc_huge_cached(), bytes);
  return p;
}

/* ---- reuse ------------------------------------------------------------------------------ */
static void reuse_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  char *p = kept_block(8 * MIB);
  /* calloc takes the kept block (the only fit) and must zero it */
  unsigned char *z = prd_calloc(1, 7 * MIB);
  CHECK(z == (unsigned char *)p);
  size_t nonzero = 0;
  for (size_t i = 0; i < 7 * MIB; i++)
    nonzero += z[i] != 0;
  CHECK_EQ(nonzero, 0);
  CHECK(prd_malloc_usable_size(z) >= 7 * MIB);
  prd_free(z);
  /* warm the cache with blocks covering 5..25 MiB, then run the loop with every mapping and
   * every unmap failing: it must be served from the kept blocks alone */
  void *warm[4];
  static const size_t wsz[4] = { 6, 10, 16, 25 };
  for (int i = 0; i < 4; i++)
    warm[i] = prd_malloc(wsz[i] * MIB);
  for (int i = 0; i < 4; i++)
    prd_free(warm[i]);
  size_t mapped = prd__os_mapped_bytes();
  prd__os_fault_every(1);
  prd__os_fault_unmap_every(1);
  uint64_t x = 88172645463325252ull;
  int fails = 0;
  for (int i = 0; i < 200; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t sz = 5 * MIB + (size_t)(x % (20 * MIB));
    char *b = prd_malloc(sz);
    if (b == NULL) {
      fails++;
      continue;
    }
    b[0] = 1;
    b[sz - 1] = 2;
    prd_free(b);
  }
  prd__os_fault_every(0);
  prd__os_fault_unmap_every(0);
  CHECK_EQ(fails, 0);
  CHECK_EQ(prd__os_mapped_bytes(), mapped);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_reuse(void)
{
  static char out[8192];
  int st = prd_test_child(reuse_child, NULL, out, sizeof(out));
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
    fprintf(stderr, "%s", out);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- a big buffer freed, then smaller ones: split, not mapped beside it -------------------- */
/* sort -S frees its 100 MiB buffer and then maps four of 25 MiB: they used to be fresh
 * mappings while the kept block stayed resident, twice glibc's peak RSS.  Now each takes the
 * first part of the kept block, and the four map nothing.  (40 MiB and 9 MiB here: the
 * default threshold, 4 MiB, is what a rest must reach to stay kept.) */
static void split_child(void *arg)
{
  (void)arg;
  char *p = kept_block(40 * MIB);
  /* the page map's leaves for the parts' starts first: a leaf covers 1 GiB of addresses, and
   * a block placed across the end of one (about 4 % of placements) gives the parts past it
   * the next leaf, a mapping of the map's own (2 MiB), not of a block's */
  for (int i = 0; i < 4; i++)
    CHECK(prd__pm_slot_make((uintptr_t)p + (size_t)i * 9 * MIB) != NULL);
  size_t mapped = prd__os_mapped_bytes();
  char *q[4];
  for (int i = 0; i < 4; i++) {
    q[i] = prd_malloc(9 * MIB);
    CHECK(q[i] == p + (size_t)i * 9 * MIB);   /* the kept block's parts, in order */
    memset(q[i], i, 9 * MIB);
    /* the rest stays kept: every rest here is at least the 4 MiB threshold */
    CHECK_EQ(prd__malloc_huge_cached(), 40 * MIB - (size_t)(i + 1) * 9 * MIB);
  }
  CHECK_EQ(prd__os_mapped_bytes(), mapped);
  for (int i = 0; i < 4; i++)
    prd_free(q[i]);
  CHECK_EQ(prd__malloc_huge_cached(), 40 * MIB);
  CHECK_EQ(prd__os_mapped_bytes(), mapped);
  /* the parts joined again: one 40 MiB block, which a request that would leave less than a
   * huge block (4 MiB) takes whole */
  char *w = prd_malloc(37 * MIB);
  CHECK(w == p);
  CHECK(prd_malloc_usable_size(w) >= 40 * MIB);
  CHECK_EQ(prd__os_mapped_bytes(), mapped);
  prd_free(w);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_split(void)
{
  static char out[8192];
  int st = prd_test_child(split_child, NULL, out, sizeof(out));
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
    fprintf(stderr, "%s", out);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- a part of a kept block grown by realloc: into the rest, in place -------------------- */
/* sqlite's sorter frees a 64 MiB buffer, then starts another at 4 MiB and doubles it with
 * realloc: the first part of the kept block, each doubling moved onto a fresh mapping while
 * the kept rest stayed resident beside it.  Now the growth takes the rest's first pages (the
 * same mapping): the block stays where it is, nothing is mapped, the contents stay. */
static void grow_into_child(void *arg)
{
  (void)arg;
  char *p = kept_block(40 * MIB);
  CHECK(prd__pm_slot_make((uintptr_t)p) != NULL);
  size_t mapped = prd__os_mapped_bytes();
  char *q = prd_malloc(5 * MIB);
  CHECK(q == p);   /* the kept block's first part */
  memset(q, 0x5c, 5 * MIB);
  for (size_t sz = 10 * MIB; sz <= 20 * MIB; sz *= 2) {
    char *r = prd_realloc(q, sz);
    CHECK(r == p);   /* grown in place, into the kept rest */
    CHECK_EQ(prd__malloc_huge_cached(), 40 * MIB - sz);
    q = r;
  }
  size_t bad = 0;
  for (size_t i = 0; i < 5 * MIB; i++)
    bad += (unsigned char)q[i] != 0x5c;
  CHECK_EQ(bad, 0);
  memset(q, 0x3d, 20 * MIB);
  /* a growth that would leave less than a huge block takes the whole rest */
  char *r = prd_realloc(q, 37 * MIB);
  CHECK(r == p);
  CHECK_EQ(prd__malloc_huge_cached(), 0);
  CHECK(prd_malloc_usable_size(r) >= 40 * MIB);
  CHECK_EQ(prd__os_mapped_bytes(), mapped);
  prd_free(r);
  CHECK_EQ(prd__malloc_huge_cached(), 40 * MIB);
  /* and the whole block moves and shrinks as any other */
  r = prd_realloc(prd_malloc(40 * MIB), 8 * MIB);
  CHECK(r != NULL);
  prd_free(r);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_grow_into_rest(void)
{
  prd_test_child_ok(grow_into_child);
}

/* ---- bounds and decay ------------------------------------------------------------------- */
static void bounds_child(void *arg)
{
  (void)arg;
  prd_option_set("malloc_huge_decay_ms", "600000");
  prd_option_set("malloc_huge_cache", "32m");
  prd_free(prd_malloc(40 * MIB));                    /* larger than the bound: not kept */
  CHECK_EQ(prd__malloc_huge_cached(), 0);
  void *b[20];
  for (int i = 0; i < 3; i++)
    b[i] = prd_malloc(12 * MIB);
  for (int i = 0; i < 3; i++)
    prd_free(b[i]);
  CHECK_EQ(prd__malloc_huge_cached(), 24 * MIB);   /* the oldest made room: 36 > 32 */
  /* no kept block is large enough: the largest smaller one is grown (mremap), so only the
   * growth is new mapping */
  size_t before = prd__os_mapped_bytes();
  char *g = prd_malloc(20 * MIB);
  CHECK(g != NULL);
  CHECK_EQ(prd__os_mapped_bytes() - before, 8 * MIB);
  CHECK_EQ(prd__malloc_huge_cached(), 12 * MIB);
  CHECK(prd_malloc_usable_size(g) >= 20 * MIB);
  g[20 * MIB - 1] = 1;
  prd_free(g);   /* 12 + 20 = 32: both kept */
  CHECK_EQ(prd__malloc_huge_cached(), 32 * MIB);
  /* prd_reap gives the kept blocks back at once (cache.c's reap hook) */
  size_t held = prd__os_mapped_bytes();
  prd_reap();
  CHECK_EQ(prd__malloc_huge_cached(), 0);
  CHECK(held - prd__os_mapped_bytes() >= 32 * MIB);
  /* the count: at most 16 blocks whatever their bytes */
  prd_option_set("malloc_huge_cache", "1g");
  for (int i = 0; i < 20; i++)
    b[i] = prd_malloc(4 * MIB);
  size_t mapped = prd__os_mapped_bytes();
  for (int i = 0; i < 20; i++)
    prd_free(b[i]);
  CHECK_EQ(prd__malloc_huge_cached(), 16 * 4 * MIB);
  CHECK_EQ(mapped - prd__os_mapped_bytes(), 4 * 4 * MIB);   /* the four oldest unmapped */
  /* decay: the job leaves young blocks, unmaps those unused for the delay */
  prd__maint_tick();
  CHECK_EQ(prd__malloc_huge_cached(), 16 * 4 * MIB);
  prd_option_set("malloc_huge_decay_ms", "50");
  usleep(100 * 1000);
  prd__maint_tick();
  CHECK_EQ(prd__malloc_huge_cached(), 0);
  CHECK_EQ(mapped - prd__os_mapped_bytes(), 20 * 4 * MIB);
  /* 0: nothing kept */
  prd_option_set("malloc_huge_cache", "0");
  prd_free(prd_malloc(8 * MIB));
  CHECK_EQ(prd__malloc_huge_cached(), 0);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_bounds(void)
{
  static char out[8192];
  int st = prd_test_child(bounds_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- absurd sizes: ENOMEM ------------------------------------------------------------------ */
/* The kernel's overcommit mode: 1 ("always") lets any mapping through, so nothing can refuse
 * the sizes below there. */
static int overcommit_mode(void)
{
  int fd = open("/proc/sys/vm/overcommit_memory", O_RDONLY);
  if (fd < 0)
    return -1;
  char c = 0;
  ssize_t n = read(fd, &c, 1);
  close(fd);
  return n == 1 ? c - '0' : -1;
}

static void absurd_child(void *arg)
{
  (void)arg;
  static const size_t sizes[] = { (size_t)1 << 40, (size_t)64 << 40 };   /* 1 TiB, 64 TiB */
  for (size_t i = 0; i < PRD_ARRAY_SIZE(sizes); i++) {
    size_t sz = sizes[i];
    errno = 0;
    CHECK(prd_malloc(sz) == NULL);
    CHECK_EQ(errno, ENOMEM);
    errno = 0;
    CHECK(prd_calloc(1, sz) == NULL);
    CHECK_EQ(errno, ENOMEM);
    errno = 0;
    CHECK(prd_calloc(sz / 8, 8) == NULL);
    CHECK_EQ(errno, ENOMEM);
    errno = 0;
    CHECK(prd_aligned_alloc(1 << 21, sz) == NULL);
    CHECK_EQ(errno, ENOMEM);
    errno = 0;
    CHECK(prd_memalign(4096, sz) == NULL);
    CHECK_EQ(errno, ENOMEM);
    void *m = (void *)1;
    errno = 0;
    CHECK_EQ(prd_posix_memalign(&m, 64, sz), ENOMEM);
    CHECK_EQ(errno, ENOMEM);   /* set too, as glibc */
    CHECK(m == (void *)1);
    /* realloc of a huge block (mremap growth) and of a small one: NULL, the block kept */
    char *h = prd_malloc(8 * MIB);
    char *s = prd_malloc(100);
    CHECK(h != NULL && s != NULL);
    h[0] = 'h';
    s[0] = 's';
    errno = 0;
    CHECK(prd_realloc(h, sz) == NULL);
    CHECK_EQ(errno, ENOMEM);
    errno = 0;
    CHECK(prd_realloc(s, sz) == NULL);
    CHECK_EQ(errno, ENOMEM);
    CHECK(h[0] == 'h' && s[0] == 's');
    CHECK(prd_malloc_usable_size(h) >= 8 * MIB);
    prd_free(h);
    prd_free(s);
  }
  /* an ordinary huge block still works afterwards (no failure is remembered) */
  char *p = prd_malloc(64 * MIB);
  CHECK(p != NULL);
  if (p != NULL)
    p[64 * MIB - 1] = 1;
  prd_free(p);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_absurd_sizes(void)
{
  if (overcommit_mode() == 1) {
    printf("# overcommit_memory=1: the kernel commits any size; ENOMEM cases skipped\n");
    return;
  }
  static char out[8192];
  int st = prd_test_child(absurd_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* posix_memalign's failure sets errno too (the size overflows: no kernel involved) */
static void test_posix_memalign_errno(void)
{
  void *m = NULL;
  errno = 0;
  CHECK_EQ(prd_posix_memalign(&m, 64, SIZE_MAX - 100), ENOMEM);
  CHECK_EQ(errno, ENOMEM);
}

/* ---- free keeps errno ----------------------------------------------------------------------- */
static void errno_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_option_set("malloc_huge_cache", "0");   /* every huge free unmaps */
  /* a failing unmap of a huge block: reported, errno kept */
  char *h = prd_malloc(8 * MIB);
  CHECK(h != NULL);
  prd__os_fault_unmap_every(1);
  errno = 4242;
  prd_free(h);
  CHECK_EQ(errno, 4242);
  /* the same through prd_free_deferred: its callback frees on the RCU thread; wait for it */
  char *d = prd_malloc(8 * MIB);
  errno = 4343;
  prd_free_deferred(d);
  CHECK_EQ(errno, 4343);
  prd_synchronize_rcu();
  prd_rcu_barrier();
  prd__os_fault_unmap_every(0);
  /* reports that cannot be written (stderr closed: write fails with EBADF) */
  static char not_ours[64];
  int saved_fd = dup(2);
  close(2);
  errno = 4444;
  prd_free(not_ours);
  CHECK_EQ(errno, 4444);
  errno = 4545;
  prd_free_deferred(not_ours);
  CHECK_EQ(errno, 4545);
  char *c = prd_malloc(40);
  prd_free(c);
  errno = 4646;
  prd_free(c);   /* double free, seen at once (the top round) */
  CHECK_EQ(errno, 4646);
  char *l = prd_malloc(100000);   /* heap arena */
  errno = 4747;
  prd_free(l);
  CHECK_EQ(errno, 4747);
  errno = 4848;
  prd_free(l);   /* double free of a big block */
  CHECK_EQ(errno, 4848);
  /* malloc_usable_size of a pointer that is not ours: reported, errno kept.  The defect this
   * guards: its slow path reported without saving errno, so a program with stderr closed
   * (a daemon) found EBADF in errno after the call */
  errno = 4949;
  CHECK_EQ(prd_malloc_usable_size(not_ours), 0);
  CHECK_EQ(errno, 4949);
  dup2(saved_fd, 2);
  close(saved_fd);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_free_keeps_errno(void)
{
  static char out[8192];
  int st = prd_test_child(errno_child, NULL, out, sizeof(out));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_STR_CONTAINS(out, "munmap");
}

/* ---- kept blocks give way to an allocation of another size -------------------------------- */
/* The defect this guards: kept huge blocks were given back when a huge block's mapping failed,
 * but not when a heap import (a class slab, a large block) did: the caches' pressure reclaim
 * never called the reap hook, so with the address space limited a program that had freed a
 * 48 MiB block got ENOMEM for small blocks while that block stayed mapped.  Here the address
 * space is limited to what the process has plus 64 MiB (the heap's reservations add some
 * room); after a 48 MiB block is freed (and kept), small allocations run into the limit: the
 * kept block must have been given back by then, and they must have got more than 40 MiB. */
static size_t vm_bytes(void)
{
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (f != NULL) {
    if (fscanf(f, "%lu", &pages) != 1)
      pages = 0;
    fclose(f);
  }
  return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static void kept_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_option_set("malloc_huge_decay_ms", "600000");   /* kept for the whole test */
  void *warm = prd_malloc(100);   /* start-up's reservations made before the limit */
  prd_free(warm);
  void *big = prd_malloc(48 * MIB);
  CHECK(big != NULL);
  memset(big, 1, 48 * MIB);
  prd_free(big);
  CHECK_EQ(prd__malloc_huge_cached(), 48 * MIB);
  struct rlimit rl = { vm_bytes() + 64 * MIB, RLIM_INFINITY };
  CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
  size_t got = 0;
  for (int i = 0; i < 4096; i++) {   /* at most 256 MiB: the limit ends it long before */
    if (prd_malloc(64 << 10) == NULL)
      break;
    got += 64 << 10;
  }
  printf("small blocks after the kept one: %zu MiB, kept %zu MiB\n", got / MIB,
         prd__malloc_huge_cached() / MIB);
  CHECK(got >= 40 * MIB);
  CHECK_EQ(prd__malloc_huge_cached(), 0);
  fflush(stdout);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

/* Runs child, which sets an address-space limit, in a child process and prints what it said;
 * not in the sanitizer builds, which reserve terabytes of shadow that such a limit breaks. */
static void limited_run(void (*child)(void *))
{
#if defined(PRD_ASAN) || defined(PRD_TSAN)
  (void)child;
#else
  static char out[8192];
  int st = prd_test_child(child, NULL, out, sizeof(out));
  fputs(out, stdout);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
#endif
}

static void test_kept_gives_way(void)
{
  limited_run(kept_child);
}

/* ---- at an address-space limit: frees, then another class ------------------------------ */
/* Guards defects outside testers found with RLIMIT_AS: with the limit filled by 16-byte
 * blocks, freeing them tried a new magazine, a refused mapping each, every few frees (924,044
 * failed mmaps, ten times the free loop's time without the limit).  Then classes not used
 * before must be served, and blocks of their own mapping, though the heap arena kept the
 * freed blocks' address space (malloc of 8-64 MB failed until malloc_trim), and a success
 * keeps errno (a refused mapping on its way set it: a malloc or realloc returned a block with
 * errno ENOMEM).
 * (The tester's preloaded program also found such a class's first malloc failing, its cache
 * not made for want of memory that magazines held: malloc.c's class_alloc now reclaims and
 * tries once more; this direct form leaves the heap with free slabs, so it does not get
 * there.) */
static void limit_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  void *warm = prd_malloc(16);   /* start-up's reservations made before the limit */
  prd_free(warm);
  struct rlimit rl = { vm_bytes() + 64 * MIB, RLIM_INFINITY };
  CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
  void **list = NULL;
  size_t n = 0;
  for (;;) {
    void **p = prd_malloc(16);
    if (p == NULL)
      break;
    *p = list;
    list = p;
    n++;
  }
  prd_vmem_stats_t st0 = { .size = sizeof(st0) };
  CHECK_EQ(prd_vmem_stats(prd_heap_arena(), &st0), 0);
  while (list != NULL) {
    void **next = *list;
    prd_free(list);
    list = next;
  }
  prd_vmem_stats_t st1 = { .size = sizeof(st1) };
  CHECK_EQ(prd_vmem_stats(prd_heap_arena(), &st1), 0);
  errno = 0;
  void *a = prd_malloc(2600), *b = prd_malloc(11000);   /* classes not used before */
  /* a block of its own mapping, where the heap arena keeps the freed blocks' address space
   * (vmem.c section 16): the pressure reclaim unmaps them first */
  void *h = prd_malloc(24 * MIB);
  void *r = b != NULL ? prd_realloc(b, 6 * MIB) : NULL;   /* grows onto a mapping too */
  if (r != NULL)
    b = r;
  int err = errno;
  printf("# limit: %zu blocks of 16 B; %llu refused heap allocations while freeing them; then "
         "2600 B %s, 11000 B %s, 24 MiB %s, realloc to 6 MiB %s, errno %d\n", n,
         (unsigned long long)(st1.failures - st0.failures), a != NULL ? "ok" : "ENOMEM",
         b != NULL ? "ok" : "ENOMEM", h != NULL ? "ok" : "ENOMEM", r != NULL ? "ok" : "ENOMEM",
         err);
  CHECK(n > 1000000);
  CHECK(st1.failures - st0.failures < 1000);
  CHECK(a != NULL && b != NULL && h != NULL && r != NULL);
  CHECK_EQ(err, 0);   /* a success keeps errno, whatever was refused on the way */
  prd_free(a);
  prd_free(b);
  prd_free(h);
  fflush(stdout);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_limit_other_class(void)
{
  limited_run(limit_child);
}

/* ---- a huge realloc whose move fails --------------------------------------------------- */
/* realloc of a huge block that cannot grow in place maps a placeholder and moves the block
 * onto it (malloc.c huge_resize).  The defect this guards: when the move failed, the block
 * stayed where it was (right) but the placeholder, the new size's worth of mapping, was never
 * unmapped, so every failing realloc leaked it.  Here every move fails: realloc copies
 * instead, the data survives, and once everything is freed the mapped bytes are what they
 * were before, but for page-map leaves. */
static void move_child(void *arg)
{
  (void)arg;
  prd_option_set("abort_on_error", "0");
  prd_option_set("malloc_huge_cache", "0");   /* every huge free unmaps */
  size_t before = prd__os_mapped_bytes();
  prd__os_fault_move_every(1);
  for (int i = 0; i < 4; i++) {
    size_t sz = (size_t)(8 + 4 * i) * MIB;
    char *p = prd_malloc(sz);
    CHECK(p != NULL);
    char *guard = prd_malloc(64 * MIB);   /* a mapping above, so that p cannot grow in place */
    memset(p, 0x5a, sz);
    char *q = prd_realloc(p, 2 * sz);
    CHECK(q != NULL);
    size_t bad = 0;
    for (size_t j = 0; j < sz; j += 4096)
      bad += q[j] != 0x5a;
    CHECK_EQ(bad, 0);
    prd_free(q);
    prd_free(guard);
  }
  prd__os_fault_move_every(0);
  /* what may stay: page-map leaves made for the placeholders' addresses (2 MiB each, one per
   * GiB of address space, kept for good); one leaked placeholder is 16 MiB at least */
  size_t after = prd__os_mapped_bytes();
  printf("mapped before %zu KiB, after %zu KiB\n", before >> 10, after >> 10);
  fflush(stdout);
  CHECK(after >= before && after - before < 16 * MIB);
  _exit(prd_t_failures == 0 ? 0 : 1);
}

static void test_move_fails(void)
{
  static char out[8192];
  int st = prd_test_child(move_child, NULL, out, sizeof(out));
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
    fputs(out, stderr);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- a growing heap gives idle kept blocks back ----------------------------------------- */
/* Guards the defect of a kept block beside a growing heap: a program that freed a 24 MiB
 * buffer (sqlite's sorter) and then grew its page cache kept both resident until
 * malloc_huge_decay_ms: peak RSS 1.6 times glibc's. */
static void grow_child(void *arg)
{
  (void)arg;
  (void)kept_block(24 * MIB);
  enum { N = 10000 };
  static void *v[N];
  for (int i = 0; i < N; i++) {   /* 48 MiB of class slabs: a dozen growth reaps, of which
                                   * the second finds the block kept since the first */
    v[i] = prd_malloc(4368);
    CHECK(v[i] != NULL);
    memset(v[i], 1, 4368);
  }
  CHECK_EQ(prd__malloc_huge_cached(), 0);
  for (int i = 0; i < N; i++)
    prd_free(v[i]);
  exit(prd_t_failures != 0);
}

static void test_grow_gives_back(void)
{
  prd_test_child_ok(grow_child);
}

/* ---- a realloc racing with a deferral of the same huge block ---------------------------- */
/* A program bug, but one the allocator must survive: the in-place shrink resized the mapping
 * before it updated the entry, so a deferral that flagged the entry between the two left it
 * at the old size, and its callback kept a block whose tail was no longer mapped (the next
 * allocation of that size faulted).  Now whichever update comes second is reported and the
 * entry always says what is mapped. */
static void *race_blk;
static _Atomic int race_go, race_ready;

static void *race_realloc(void *arg)
{
  (void)arg;
  atomic_fetch_add(&race_ready, 1);
  while (!atomic_load(&race_go))
    ;
  return prd_realloc(race_blk, 5u << 20);   /* a shrink in place */
}

static void *race_defer(void *arg)
{
  (void)arg;
  atomic_fetch_add(&race_ready, 1);
  while (!atomic_load(&race_go))
    ;
  prd_free_deferred(race_blk);
  return NULL;
}

static void test_realloc_races_deferral(void)
{
  long old_abort = prd_option_get("abort_on_error");
  prd_option_set("abort_on_error", "0");
  enum { ITERS = 150 };
  const size_t from = 16u << 20;
  int faults = 0;
  for (int i = 0; i < ITERS; i++) {
    race_blk = prd_malloc(from);
    atomic_store(&race_go, 0);
    atomic_store(&race_ready, 0);
    pthread_t a, b;
    void *moved = NULL;
    pthread_create(&a, NULL, race_realloc, NULL);
    pthread_create(&b, NULL, race_defer, NULL);
    while (atomic_load(&race_ready) < 2)
      ;
    atomic_store(&race_go, 1);
    pthread_join(a, &moved);
    pthread_join(b, NULL);
    prd_rcu_barrier();   /* the deferral's callback has freed what the entry says */
    if (moved != NULL && moved != race_blk)
      prd_free(moved);
    /* every page of the next blocks of that size is mapped: touch each one's last page */
    char *v[2];
    for (int k = 0; k < 2; k++) {
      v[k] = prd_malloc(from);
      unsigned char in;
      if (v[k] != NULL && mincore(v[k] + from - 4096, 4096, &in) != 0)
        faults++;   /* ENOMEM: the block's last page is not mapped */
    }
    for (int k = 0; k < 2; k++)
      prd_free(v[k]);
  }
  prd_option_set("abort_on_error", old_abort ? "1" : "0");
  CHECK_EQ(faults, 0);
}

int main(void)
{
  RUN(test_reuse);
  RUN(test_split);
  RUN(test_grow_into_rest);
  RUN(test_bounds);
  RUN(test_absurd_sizes);
  RUN(test_posix_memalign_errno);
  RUN(test_free_keeps_errno);
  RUN(test_move_fails);
  RUN(test_kept_gives_way);
  RUN(test_limit_other_class);
  RUN(test_grow_gives_back);
  RUN(test_realloc_races_deferral);
  return prd_test_done();
}
