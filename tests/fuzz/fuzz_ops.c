/*
 * fuzz_ops.c: an op-sequence fuzzer of the public API, for libFuzzer (and a replay driver).
 *
 * 1. What.  The input bytes decode to a sequence of calls: object caches (create with varied
 *    sizes, alignments, flags, constructors and sources; alloc, free, free_deferred, reap,
 *    destroy), vmem arenas (create over memory or over integers, importing from a parent or
 *    not; alloc, xalloc with constraints, free, add, destroy; the heap arena), the malloc
 *    family (malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc,
 *    memalign, valloc, pvalloc, usable_size, prd_free_deferred), prd_reap, prd_thread_flush,
 *    grace periods (prd_synchronize_rcu, prd_rcu_barrier, prd_rcu_wait_state, prd_call_rcu)
 *    and read-side sections, and the run-time options that change what these paths do.
 *    Only valid sequences are issued: a call that the documentation calls misuse (a free of
 *    something not live, a grace-period wait inside a read-side section, destroying an arena
 *    that still has users) is skipped, so every report of the library is a defect.
 *
 * 2. The model, checked after every step.  Every live object (cache object, malloc block,
 *    vmem segment) is kept with its size and a fill pattern written at allocation and
 *    verified before it is freed or resized; memory objects may not overlap one another
 *    (across all kinds: they share the address space) and integer segments may not overlap
 *    within their arena; an object lies at the alignment asked for, a malloc block's usable
 *    size covers the request (its last usable byte is written), a vmem segment meets its
 *    xalloc constraints and lies inside its arena's spans.  Every deferred free is kept with
 *    the grace-period state read before the call: an allocation that returns memory of a
 *    deferred object whose grace period has not ended is a reuse before the grace period;
 *    deferred objects freed inside the current read-side section are read (under ASan a
 *    poisoned one is reported).  The statistics of the cache touched must balance:
 *    bufs_inuse = the model's live objects + the objects parked in magazines, latent caches,
 *    latent slabs and depots (docs/api.md), and prd__cache_check / prd__vmem_check find the
 *    layers' invariants intact.
 *
 * 3. End of input.  Read-side sections are left, every live object is verified and freed,
 *    every cache destroyed (after its statistics balance with no user object), every arena
 *    destroyed (after prd_vmem_size says nothing is allocated), prd_rcu_barrier runs when
 *    callbacks are pending, the malloc size classes used must balance with no block live,
 *    and the library must have reported nothing (prd__error_count).  A failed check prints
 *    what failed and aborts, so libFuzzer keeps the input as a crash file.
 *
 * 4. Determinism.  The maintenance thread is off (its work runs on the slow paths of this
 *    thread), and the options the input may change are reset at the start of every input, so
 *    one input replays the same calls; grace periods still end on the library's own threads.
 *
 * Build and run: make fuzz SECONDS=N (clang, libFuzzer, ASan+UBSan, in build-fuzz/); replay
 * one input: make fuzz-replay FILE=path, or build/bin/fuzz_ops_replay path... in any build
 * (tests/fuzz/replay.c; ctest's fuzz_corpus replays tests/fuzz/corpus that way).
 */
#include "internal.h"

#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXCACHES 4
#define MAXARENAS 5          /* slot 0: the heap arena */
#define MAXOBJS   512        /* live objects of every kind */
#define MAXDEFER  2048       /* deferred frees whose grace period the model has not seen end */
#define MAXLIVEB  ((size_t)96 << 20)   /* bytes of live memory objects */
#define FILLEDGE  256        /* bytes filled at each end of an object */
#define CTOR_MAGIC 0x5eed5eedc0ffee11ull
#define NHEADS    64

enum { K_CACHE, K_MALLOC, K_VMEM };

struct obj {
  uintptr_t o_addr;
  size_t o_size;        /* bytes (cache, malloc) or integers (vmem) asked for: the pattern */
  size_t o_extent;      /* what no other live object may overlap (malloc: the usable size) */
  uint32_t o_seed;
  uint8_t o_kind;
  uint8_t o_owner;      /* cache or arena slot */
  bool o_x;             /* vmem: from xalloc */
  bool o_mem;           /* memory (filled, in the global overlap check), not integers */
};

struct fcache {
  prd_cache_t *c_cp;
  size_t c_size, c_align;
  int c_cflags;
  bool c_ctor;
  int c_src;            /* arena slot, 0: the heap arena */
  uint64_t c_live;      /* objects of the cache in the model */
  uint64_t c_pending;   /* deferrals through prd_call_rcu whose callback may not have run */
};

struct farena {
  prd_vmem_t *a_vm;
  bool a_mem;           /* memory (page quantum) or integers */
  int a_parent;         /* slot of the source arena, -1: none */
  size_t a_quantum, a_qcache;
  uintptr_t a_base, a_end, a_limit;   /* root arenas: spans cover [a_base, a_end); adds up to a_limit */
  void *a_map;          /* memory roots: the mapping, a_limit - a_base bytes */
  uint64_t a_live;      /* segments in the model */
};

struct fdefer {
  uintptr_t d_addr;
  size_t d_size;
  prd_gp_t d_gp;        /* prd_rcu_get_state() before the deferral */
  unsigned d_section;   /* read-side section it was deferred in (0: none) */
};

static struct {
  struct obj objs[MAXOBJS];
  size_t nobjs;
  size_t liveb;
  struct fcache caches[MAXCACHES];
  struct farena arenas[MAXARENAS];
  struct fdefer defers[MAXDEFER];
  size_t ndefers;
  unsigned depth;          /* read-side nesting */
  unsigned section;        /* id of the outermost section now held (0: none) */
  unsigned sections;
  uint32_t seed;
  bool ctor_fail;          /* constructors fail (PRD_NOSLEEP allocations only) */
  bool malloc_class_used[64];
  uint64_t step;
  uint64_t n_allocs, n_frees, n_defers, n_gps;   /* what the input did (FUZZ_OPS_VERBOSE=1) */
} S;
static int verbose;   /* FUZZ_OPS_VERBOSE: 1 a summary per input, 2 every step too */

static size_t page;
static uint64_t errors0;
static long opt_defaults[8];
static const char *const opt_names[] = { "slab_working_set", "defer_latent_max_kb",
                                         "defer_depot_kb", "magazines", "rcu_expedited",
                                         "maint_interval", "malloc_mmap_threshold" };
static const long opt_values[][3] = { { 0, 1, 15000 }, { 0, 8, 16384 }, { 0, 4, 8192 },
                                      { 0, 1, 1 }, { 0, 1, 0 }, { 10, 50, 15000 },
                                      { 0, 65536, 4194304 } };

static struct prd_rcu_head heads[NHEADS];
static _Atomic bool head_busy[NHEADS];   /* written by the callback thread, read by the main thread */
static unsigned heads_pending;

/* ---- failure: say what, where, and abort (libFuzzer saves the input) ---- */
__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fuzz_ops: step %llu: ", (unsigned long long)S.step);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  abort();
}
#define EXPECT(cond, ...)   \
  do {                      \
    if (!(cond))            \
      fail(__VA_ARGS__);    \
  } while (0)

/* ---- input: an op byte (op % OP_COUNT; its high bits pick variants), then its arguments ---- */
enum {
  OP_CACHE_CREATE, OP_CACHE_ALLOC, OP_CACHE_ALLOC2, OP_CACHE_BURST, OP_CACHE_FREE,
  OP_CACHE_DEFER, OP_CACHE_RELEASE_BURST, OP_VMEM_CREATE, OP_VMEM_ALLOC, OP_VMEM_XALLOC,
  OP_VMEM_FREE, OP_VMEM_ADD, OP_VMEM_DESTROY, OP_MALLOC, OP_MALLOC2, OP_REALLOC, OP_FREE,
  OP_FREE_DEFERRED, OP_RCU, OP_RCU2, OP_MISC, OP_MISC2, OP_MISC3, OP_MISC4, OP_COUNT
};
/* sub-operations of OP_RCU (argument % 6) and OP_MISC (argument % 6) */
enum { RCU_LOCK, RCU_UNLOCK, RCU_SYNC, RCU_BARRIER, RCU_WAIT, RCU_CALL };
enum { MISC_REAP, MISC_CACHE_REAP, MISC_FLUSH, MISC_CTOR_FAIL, MISC_OPTION, MISC_DESTROY };

struct in {
  const uint8_t *p;
  size_t n;
};
static unsigned u8(struct in *in)
{
  if (in->n == 0)
    return 0;
  in->n--;
  return *in->p++;
}
static unsigned u16(struct in *in)
{
  unsigned lo = u8(in);
  return lo | (u8(in) << 8);
}

/* ---- fill patterns: the first and last FILLEDGE bytes ---- */
static unsigned char pat(uint32_t seed, size_t i)
{
  return (unsigned char)((seed * 2654435761u) >> 24 ^ (uint32_t)(i * 31) ^ (uint32_t)(i >> 8));
}
static void fill(unsigned char *p, size_t off, size_t size, uint32_t seed)
{
  size_t a = PRD_MIN(size, off + FILLEDGE);
  for (size_t i = off; i < a; i++)
    p[i] = pat(seed, i);
  for (size_t i = PRD_MAX(a, size > FILLEDGE ? size - FILLEDGE : 0); i < size; i++)
    p[i] = pat(seed, i);
}
/* Offset of the first byte that differs from the pattern (in the filled parts of [off,
 * min(size, upto))), or (size_t)-1. */
static size_t unfilled(const unsigned char *p, size_t off, size_t size, uint32_t seed, size_t upto)
{
  size_t a = PRD_MIN(size, off + FILLEDGE);
  for (size_t i = off; i < a && i < upto; i++)
    if (p[i] != pat(seed, i))
      return i;
  for (size_t i = PRD_MAX(a, size > FILLEDGE ? size - FILLEDGE : 0); i < size && i < upto; i++)
    if (p[i] != pat(seed, i))
      return i;
  return (size_t)-1;
}

static size_t obj_off(const struct obj *o)
{
  return o->o_kind == K_CACHE && S.caches[o->o_owner].c_ctor ? sizeof(uint64_t) : 0;
}

static void obj_verify(const struct obj *o, const char *what)
{
  if (!o->o_mem)
    return;
  const unsigned char *p = (const unsigned char *)o->o_addr;
  size_t bad = unfilled(p, obj_off(o), o->o_size, o->o_seed, (size_t)-1);
  EXPECT(bad == (size_t)-1, "%s: object %p (kind %d, %zu bytes) changed at byte %zu", what,
         (void *)o->o_addr, o->o_kind, o->o_size, bad);
  if (obj_off(o))
    EXPECT(*(const uint64_t *)p == CTOR_MAGIC, "%s: constructed word of %p overwritten", what,
           (void *)o->o_addr);
}

/* ---- deferred frees: no memory comes back before its grace period ---- */
static void defer_prune(void)
{
  size_t j = 0;
  for (size_t i = 0; i < S.ndefers; i++)
    if (!prd_rcu_poll_state(S.defers[i].d_gp))
      S.defers[j++] = S.defers[i];
  S.ndefers = j;
}

static bool defer_room(void)
{
  if (S.ndefers == MAXDEFER)
    defer_prune();
  return S.ndefers < MAXDEFER;
}

static void defer_add(uintptr_t a, size_t size, prd_gp_t gp)
{
  S.defers[S.ndefers++] = (struct fdefer){ a, size, gp, S.section };
}

/* Reads what the current read-side section may still read: the objects deferred inside it. */
static void defer_read_section(void)
{
  volatile unsigned char sink = 0;
  for (size_t i = 0; i < S.ndefers; i++) {
    struct fdefer *d = &S.defers[i];
    if (d->d_section == 0 || d->d_section != S.section)
      continue;
    EXPECT(!prd_rcu_poll_state(d->d_gp), "grace period of %p ended inside the read-side "
           "section that deferred it", (void *)d->d_addr);
    const volatile unsigned char *p = (const volatile unsigned char *)d->d_addr;
    sink ^= p[0];
    sink ^= p[d->d_size - 1];
  }
  (void)sink;
}

/* A new memory object [a, a+size): no live object there, no deferred one still in its grace
 * period. */
static void check_fresh(uintptr_t a, size_t size, const char *what)
{
  for (size_t i = 0; i < S.nobjs; i++) {
    const struct obj *o = &S.objs[i];
    if (!o->o_mem)
      continue;
    EXPECT(a + size <= o->o_addr || o->o_addr + o->o_extent <= a,
           "%s returned [%p, +%zu), which overlaps the live object [%p, +%zu) (kind %d)", what,
           (void *)a, size, (void *)o->o_addr, o->o_extent, o->o_kind);
  }
  for (size_t i = 0; i < S.ndefers; i++) {
    const struct fdefer *d = &S.defers[i];
    if (a + size <= d->d_addr || d->d_addr + d->d_size <= a)
      continue;
    EXPECT(prd_rcu_poll_state(d->d_gp),
           "%s returned [%p, +%zu), which overlaps [%p, +%zu) deferred in grace period %llu, "
           "not yet ended (reused before its grace period)", what, (void *)a, size,
           (void *)d->d_addr, d->d_size, (unsigned long long)d->d_gp);
  }
}

static struct obj *obj_add(uintptr_t a, size_t size, size_t extent, int kind, int owner,
                           bool mem)
{
  struct obj *o = &S.objs[S.nobjs++];
  *o = (struct obj){ .o_addr = a, .o_size = size, .o_extent = extent, .o_seed = ++S.seed,
                     .o_kind = (uint8_t)kind, .o_owner = (uint8_t)owner, .o_mem = mem };
  if (mem) {
    S.liveb += extent;
    fill((unsigned char *)a, obj_off(o), size, o->o_seed);
  }
  return o;
}

static void obj_del(size_t i)
{
  if (S.objs[i].o_mem)
    S.liveb -= S.objs[i].o_extent;
  S.objs[i] = S.objs[--S.nobjs];
}

/* The index of the k-th (mod count) live object of a kind and owner (owner -1: any), or -1. */
static long obj_pick(unsigned k, int kind, int owner)
{
  size_t n = 0;
  for (size_t i = 0; i < S.nobjs; i++)
    if (S.objs[i].o_kind == kind && (owner < 0 || S.objs[i].o_owner == owner))
      n++;
  if (n == 0)
    return -1;
  k %= n;
  for (size_t i = 0; i < S.nobjs; i++)
    if (S.objs[i].o_kind == kind && (owner < 0 || S.objs[i].o_owner == owner) && k-- == 0)
      return (long)i;
  return -1;
}

static bool room(size_t bytes)
{
  return S.nobjs < MAXOBJS && S.liveb + bytes <= MAXLIVEB;
}

/* ---- object caches ---- */
static int fz_ctor(void *buf, void *priv, int flags)
{
  (void)priv;
  if (S.ctor_fail && (flags & PRD_NOSLEEP))
    return -1;
  *(uint64_t *)buf = CTOR_MAGIC;
  return 0;
}

static void fz_dtor(void *buf, void *priv)
{
  (void)priv;
  EXPECT(*(uint64_t *)buf == CTOR_MAGIC, "destructor: object %p is not in its constructed state",
         buf);
}

/* bufs_inuse = the model's objects + what the layers above the slabs hold (docs/api.md).
 * A deferral that takes the call_rcu path (OBLIVIOUS and debugging caches) is freed later by
 * the callback thread, into its own magazines: while one may still run, the statistics are
 * not one snapshot (a magazine that moves from that thread to the depot while they are read
 * is counted twice or not at all), so only bufs_inuse >= live is certain; after
 * prd_rcu_barrier, or with none pending, the balance is exact. */
static void cache_balance(const struct fcache *c, const char *what)
{
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  EXPECT(prd_cache_stats(c->c_cp, &st) == 0, "prd_cache_stats failed");
  uint64_t parked = st.oc_objs + st.latent_cache_objs + st.latent_slab_objs +
                    st.latent_depot_objs + st.thread_cache_objs + st.depot_rounds;
  EXPECT(c->c_pending > 0 ? st.bufs_inuse >= c->c_live
                          : st.bufs_inuse >= parked && st.bufs_inuse - parked == c->c_live,
         "%s: cache %s does not balance: bufs_inuse %llu, parked %llu (oc %llu, latent cache "
         "%llu, latent slab %llu, latent depot %llu, thread %llu, depot %llu), model %llu live "
         "+ %llu pending callbacks", what, st.name, (unsigned long long)st.bufs_inuse,
         (unsigned long long)parked, (unsigned long long)st.oc_objs,
         (unsigned long long)st.latent_cache_objs, (unsigned long long)st.latent_slab_objs,
         (unsigned long long)st.latent_depot_objs, (unsigned long long)st.thread_cache_objs,
         (unsigned long long)st.depot_rounds, (unsigned long long)c->c_live,
         (unsigned long long)c->c_pending);
  EXPECT(st.bufs_inuse <= st.bufs_total, "%s: cache %s: bufs_inuse %llu > bufs_total %llu",
         what, st.name, (unsigned long long)st.bufs_inuse, (unsigned long long)st.bufs_total);
  EXPECT(prd__cache_check(c->c_cp) == 0, "%s: prd__cache_check(%s) found a broken invariant",
         what, st.name);
}

static void arena_check(int slot, const char *what);
static int arena_pick(unsigned k, bool heap);

static void op_cache_create(struct in *in)
{
  int k = -1;
  for (int i = 0; i < MAXCACHES; i++)
    if (S.caches[i].c_cp == NULL) {
      k = i;
      break;
    }
  unsigned b = u8(in), lo = u8(in), al = u8(in), fl = u8(in);
  if (k < 0)
    return;
  size_t size;
  switch (b >> 6) {
  case 0: size = 1 + (b & 63); break;
  case 1: size = 64 + (b & 63) * 16 + (lo & 15); break;
  case 2: size = 1024 + (b & 63) * 240 + lo; break;
  default: size = 16384 + (b & 63) * 2048 + lo * 8; break;
  }
  size_t align = al % 14 == 0 ? 0 : (size_t)1 << (al % 14 - 1);   /* 0, 1 .. 4096 */
  int cflags = 0;
  bool ctor = fl & 2;
  if (fl & 1)
    cflags |= PRD_CACHE_NOMAGAZINE;
  if (fl & 4)
    cflags |= PRD_CACHE_OBLIVIOUS;
  static const int dbg[4] = { 0, PRD_CACHE_PATTERNS | PRD_CACHE_REDZONE,
                              PRD_CACHE_VERIFY | PRD_CACHE_AUDIT,
                              PRD_CACHE_PATTERNS | PRD_CACHE_VERIFY };
  cflags |= dbg[(fl >> 3) & 3];
  if ((fl & 0x60) == 0x20)
    cflags |= PRD_CACHE_UNMAP;
  if ((fl & 0x60) == 0x40 && size <= 4096)
    cflags |= PRD_CACHE_PAGEBUF;
  if (ctor && size < sizeof(uint64_t))
    size = sizeof(uint64_t);
  int src = 0;
  if (fl & 0x80)   /* the first memory arena after slot (lo % MAXARENAS) */
    for (int j = 0; j < MAXARENAS; j++) {
      int a = (int)((lo + (unsigned)j) % MAXARENAS);
      if (a != 0 && S.arenas[a].a_vm != NULL && S.arenas[a].a_mem) {
        src = a;
        break;
      }
    }
  char name[PRD_CACHE_NAME_MAX];
  snprintf(name, sizeof(name), "fuzz%d-%zu", k, size);
  prd_cache_t *cp = prd_cache_create(name, size, align, ctor ? fz_ctor : NULL,
                                     ctor ? fz_dtor : NULL, NULL, NULL,
                                     src ? S.arenas[src].a_vm : NULL, cflags);
  EXPECT(cp != NULL, "prd_cache_create(%s, %zu, %zu, cflags %#x) failed: errno %d", name, size,
         align, cflags, errno);
  S.caches[k] = (struct fcache){ .c_cp = cp, .c_size = size, .c_align = align,
                                 .c_cflags = cflags, .c_ctor = ctor, .c_src = src };
}

static int cache_pick(unsigned k)
{
  for (int j = 0; j < MAXCACHES; j++) {
    int i = (int)((k + (unsigned)j) % MAXCACHES);
    if (S.caches[i].c_cp != NULL)
      return i;
  }
  return -1;
}

static void cache_alloc_one(int k, int flags)
{
  struct fcache *c = &S.caches[k];
  if (!room(c->c_size))
    return;
  void *p = prd_cache_alloc(c->c_cp, flags);
  if (p == NULL) {
    /* allowed: a failed constructor, a full source arena, or a NOSLEEP allocation */
    EXPECT(errno == ENOMEM, "prd_cache_alloc failed with errno %d, not ENOMEM", errno);
    EXPECT((flags & PRD_NOSLEEP) || c->c_src != 0,
           "a PRD_SLEEP allocation from the heap arena failed");
    return;
  }
  uintptr_t a = (uintptr_t)p;
  size_t al = c->c_align ? c->c_align : 8;
  EXPECT(a % al == 0, "cache object %p not aligned to %zu", p, al);
  check_fresh(a, c->c_size, "prd_cache_alloc");
  if (c->c_ctor)
    EXPECT(*(uint64_t *)p == CTOR_MAGIC, "prd_cache_alloc: %p handed out unconstructed", p);
  obj_add(a, c->c_size, c->c_size, K_CACHE, k, true);
  c->c_live++;
  S.n_allocs++;
}

/* Frees (how 0), defers (1) or frees through the slab layer's view of the model object i. */
static void cache_release(size_t i, int how)
{
  struct obj o = S.objs[i];
  struct fcache *c = &S.caches[o.o_owner];
  obj_verify(&o, how ? "prd_cache_free_deferred" : "prd_cache_free");
  obj_del(i);
  c->c_live--;
  S.n_frees += how == 0;
  S.n_defers += how != 0;
  if (how == 0) {
    prd_cache_free(c->c_cp, (void *)o.o_addr);
    return;
  }
  defer_add(o.o_addr, o.o_size, prd_rcu_get_state());
  if (c->c_cflags & (PRD_CACHE_OBLIVIOUS | PRD_CACHE_DEBUG_ALL))   /* the call_rcu path */
    c->c_pending++;
  prd_cache_free_deferred(c->c_cp, (void *)o.o_addr);
}

static void op_cache_alloc(struct in *in, bool burst)
{
  unsigned sel = u8(in), n = burst ? 1 + u8(in) % 64 : 1;
  int k = cache_pick(sel & 3);
  if (k < 0)
    return;
  int flags = (sel & 4) ? PRD_NOSLEEP : PRD_SLEEP;
  for (unsigned j = 0; j < n; j++)
    cache_alloc_one(k, flags);
  cache_balance(&S.caches[k], "prd_cache_alloc");
}

static void op_cache_release(struct in *in, int how, bool burst)
{
  unsigned sel = u8(in), pick = u8(in), n = burst ? 1 + u8(in) % 64 : 1;
  int k = cache_pick(sel & 3);
  if (k < 0)
    return;
  for (unsigned j = 0; j < n; j++) {
    long i = obj_pick(pick + j * 7, K_CACHE, k);
    if (i < 0 || (how == 1 && !defer_room()))
      break;
    cache_release((size_t)i, how);
  }
  cache_balance(&S.caches[k], how ? "prd_cache_free_deferred" : "prd_cache_free");
}

static void cache_destroy(int k)
{
  struct fcache *c = &S.caches[k];
  for (long i; (i = obj_pick(0, K_CACHE, k)) >= 0;)
    cache_release((size_t)i, 0);
  if (c->c_pending > 0) {   /* so that the balance is exact (cache_balance) */
    prd_rcu_barrier();
    c->c_pending = 0;
  }
  cache_balance(c, "before prd_cache_destroy");
  prd_cache_destroy(c->c_cp);
  int src = c->c_src;
  *c = (struct fcache){ 0 };
  if (src != 0)
    arena_check(src, "after prd_cache_destroy");
}

/* ---- vmem ---- */
static size_t arena_in_use_by(int slot)   /* caches and child arenas that use the arena */
{
  size_t n = 0;
  for (int i = 0; i < MAXCACHES; i++)
    n += S.caches[i].c_cp != NULL && S.caches[i].c_src == slot;
  for (int i = 1; i < MAXARENAS; i++)
    n += S.arenas[i].a_vm != NULL && S.arenas[i].a_parent == slot;
  return n;
}

static int arena_root(int slot)
{
  while (S.arenas[slot].a_parent > 0)
    slot = S.arenas[slot].a_parent;
  return slot;
}

static void arena_check(int slot, const char *what)
{
  struct farena *a = &S.arenas[slot];
  if (slot == 0)
    return;   /* the heap arena: checked by the library's own tests, shared with everything */
  EXPECT(prd__vmem_check(a->a_vm) == 0, "%s: prd__vmem_check(arena %d) found a broken "
         "invariant", what, slot);
  if (a->a_qcache == 0 && arena_in_use_by(slot) == 0) {
    size_t sum = 0;
    for (size_t i = 0; i < S.nobjs; i++)
      if (S.objs[i].o_kind == K_VMEM && S.objs[i].o_owner == slot)
        sum += S.objs[i].o_size;
    EXPECT(prd_vmem_size(a->a_vm, PRD_VMEM_ALLOC) == sum, "%s: arena %d: %zu integers "
           "allocated, the model has %zu", what, slot, prd_vmem_size(a->a_vm, PRD_VMEM_ALLOC),
           sum);
  }
}

static void op_vmem_create(struct in *in)
{
  unsigned b = u8(in), sz = u8(in), q = u8(in);
  int k = -1;
  for (int i = 1; i < MAXARENAS; i++)
    if (S.arenas[i].a_vm == NULL) {
      k = i;
      break;
    }
  if (k < 0)
    return;
  struct farena *a = &S.arenas[k];
  *a = (struct farena){ .a_parent = -1 };
  char name[32];
  snprintf(name, sizeof(name), "fuzz-arena%d", k);
  int parent = (b & 1) ? arena_pick(b >> 3, false) : -1;   /* import from another of ours */
  if (parent > 0) {
    struct farena *p = &S.arenas[parent];
    a->a_mem = p->a_mem;
    a->a_quantum = p->a_quantum;
    a->a_parent = parent;
    a->a_qcache = (b & 2) ? a->a_quantum * (1 + q % 16) : 0;
    a->a_vm = prd_vmem_create(name, NULL, 0, a->a_quantum,
                              prd_vmem_alloc, prd_vmem_free, p->a_vm,
                              a->a_qcache, PRD_VM_NOSLEEP);
  } else {
    a->a_mem = (b & 2) != 0;
    a->a_quantum = a->a_mem ? page : (size_t)1 << (q % 7);
    size_t nq = 16 + sz * 4;   /* quanta in the initial span; as many again may be added */
    size_t bytes = nq * a->a_quantum;
    if (a->a_mem) {
      a->a_map = prd__os_map(2 * bytes);
      EXPECT(a->a_map != NULL, "no memory for an arena of %zu bytes", 2 * bytes);
      a->a_base = (uintptr_t)a->a_map;
    } else {
      a->a_base = ((uintptr_t)1 << 40) + ((uintptr_t)k << 32);
    }
    a->a_end = a->a_base + bytes;
    a->a_limit = a->a_base + 2 * bytes;
    a->a_qcache = (b & 4) ? a->a_quantum * (1 + q % 16) : 0;
    a->a_vm = prd_vmem_create(name, (void *)a->a_base, bytes, a->a_quantum, NULL, NULL, NULL,
                              a->a_qcache, PRD_VM_NOSLEEP);
  }
  EXPECT(a->a_vm != NULL, "prd_vmem_create(%s) failed: errno %d", name, errno);
  arena_check(k, "prd_vmem_create");
}

static int arena_pick(unsigned k, bool heap)
{
  for (int j = 0; j < MAXARENAS; j++) {
    int i = (int)((k + (unsigned)j) % MAXARENAS);
    if ((i == 0 && heap) || (i != 0 && S.arenas[i].a_vm != NULL))
      return i;
  }
  return -1;
}

static void op_vmem_alloc(struct in *in, bool x)
{
  unsigned sel = u8(in), n = u8(in), c1 = u8(in), c2 = u8(in);
  int k = arena_pick(sel & 7, true);
  if (k < 0)
    return;
  struct farena *a = &S.arenas[k];
  size_t q = a->a_quantum;
  size_t size = q * (1 + (n < 224 ? n % 16 : n % 96));
  int flags = ((sel & 8) ? PRD_VM_NOSLEEP : PRD_VM_SLEEP) | PRD_VM_INSTANTFIT << ((sel >> 4) & 3);
  if (k != 0)
    flags |= PRD_VM_NOSLEEP;   /* an arena without a source would wait for a free forever */
  if (!room(a->a_mem ? size : 0))
    return;
  size_t align = 0, phase = 0, nocross = 0;
  uintptr_t lo = 0, hi = 0;
  void *p;
  if (x) {
    align = q << (c1 % 6);
    phase = q * ((c1 >> 3) % (align / q));
    if (c2 & 1) {
      size_t nc = q << (3 + (c2 >> 1) % 6);
      if (phase % nc + size <= nc && nc >= align)
        nocross = nc;
    }
    if ((c2 & 0x80) && k != 0) {
      uintptr_t rb = S.arenas[arena_root(k)].a_base, re = S.arenas[arena_root(k)].a_end;
      lo = rb + q * ((c2 >> 1) % 32);
      hi = lo + size + q * (c1 % 64);
      if (hi > re)
        hi = re;
      if (hi <= lo || hi - lo < size)
        lo = hi = 0;
    }
    if (nocross != 0)   /* constrained: never imports, so a PRD_VM_SLEEP would only wait out
                           vmem_sleep_ms before its ENOMEM (docs/api.md) */
      flags |= PRD_VM_NOSLEEP;
    p = prd_vmem_xalloc(a->a_vm ? a->a_vm : prd_heap_arena(), size, align, phase, nocross,
                        (void *)lo, (void *)hi, flags);
  } else {
    p = prd_vmem_alloc(a->a_vm ? a->a_vm : prd_heap_arena(), size, flags);
  }
  if (p == NULL) {
    EXPECT(errno == ENOMEM, "prd_vmem_%salloc failed with errno %d", x ? "x" : "", errno);
    /* the heap arena imports what it lacks, except for constrained requests (docs/api.md) */
    EXPECT(k != 0 || nocross != 0, "the heap arena had no room for %zu bytes", size);
    return;
  }
  uintptr_t ad = (uintptr_t)p;
  EXPECT(ad % q == 0, "segment %p not a multiple of the quantum %zu", p, q);
  if (x) {
    EXPECT(ad % align == phase, "xalloc: %p is not at phase %zu of %zu", p, phase, align);
    EXPECT(nocross == 0 || ad / nocross == (ad + size - 1) / nocross,
           "xalloc: [%p, +%zu) crosses a multiple of %zu", p, size, nocross);
    EXPECT(lo == 0 || (ad >= lo && ad + size <= hi), "xalloc: [%p, +%zu) outside [%p, %p)", p,
           size, (void *)lo, (void *)hi);
  }
  if (k != 0) {
    const struct farena *r = &S.arenas[arena_root(k)];
    EXPECT(ad >= r->a_base && ad + size <= r->a_end, "segment [%p, +%zu) outside the spans "
           "[%p, %p) of its arena", p, size, (void *)r->a_base, (void *)r->a_end);
  }
  if (a->a_mem) {
    check_fresh(ad, size, x ? "prd_vmem_xalloc" : "prd_vmem_alloc");
  } else {
    for (size_t i = 0; i < S.nobjs; i++) {
      const struct obj *o = &S.objs[i];
      if (o->o_kind == K_VMEM && !o->o_mem && arena_root(o->o_owner) == arena_root(k))
        EXPECT(ad + size <= o->o_addr || o->o_addr + o->o_size <= ad,
               "integers [%p, +%zu) overlap the live segment [%p, +%zu)", p, size,
               (void *)o->o_addr, o->o_size);
    }
  }
  struct obj *o = obj_add(ad, size, size, K_VMEM, k, a->a_mem);
  S.n_allocs++;
  o->o_x = x;
  if (k != 0)
    a->a_live++;
  arena_check(k, x ? "prd_vmem_xalloc" : "prd_vmem_alloc");
}

static void vmem_release(size_t i)
{
  struct obj o = S.objs[i];
  obj_verify(&o, "prd_vmem_free");
  obj_del(i);
  S.n_frees++;
  prd_vmem_t *vm = o.o_owner ? S.arenas[o.o_owner].a_vm : prd_heap_arena();
  if (o.o_x)
    prd_vmem_xfree(vm, (void *)o.o_addr, o.o_size);
  else
    prd_vmem_free(vm, (void *)o.o_addr, o.o_size);
  if (o.o_owner)
    S.arenas[o.o_owner].a_live--;
  arena_check(o.o_owner, "prd_vmem_free");
}

static void op_vmem_free(struct in *in)
{
  long i = obj_pick(u8(in), K_VMEM, -1);
  if (i >= 0)
    vmem_release((size_t)i);
}

static void op_vmem_add(struct in *in)
{
  int k = arena_pick(u8(in), false);
  if (k < 0 || S.arenas[k].a_parent > 0)
    return;
  struct farena *a = &S.arenas[k];
  if (a->a_end == a->a_limit)
    return;
  /* the rest of the reserved range, leaving out its first quantum on integer arenas so that
   * spans are not always adjacent */
  uintptr_t start = a->a_end + (a->a_mem ? 0 : a->a_quantum);
  void *r = prd_vmem_add(a->a_vm, (void *)start, a->a_limit - start, PRD_VM_NOSLEEP);
  EXPECT(r == (void *)start, "prd_vmem_add(%p) failed: errno %d", (void *)start, errno);
  a->a_end = a->a_limit;
  arena_check(k, "prd_vmem_add");
}

static void cache_destroy(int k);
static void arena_destroy(int k)
{
  for (int i = 0; i < MAXCACHES; i++)
    if (S.caches[i].c_cp != NULL && S.caches[i].c_src == k)
      cache_destroy(i);
  for (int i = 1; i < MAXARENAS; i++)
    if (S.arenas[i].a_vm != NULL && S.arenas[i].a_parent == k)
      arena_destroy(i);
  for (long i; (i = obj_pick(0, K_VMEM, k)) >= 0;)
    vmem_release((size_t)i);
  struct farena *a = &S.arenas[k];
  EXPECT(prd__vmem_check(a->a_vm) == 0, "prd__vmem_check(arena %d) before destroy", k);
  /* the quantum caches may still hold free segments: they go with the arena */
  if (a->a_qcache == 0)
    EXPECT(prd_vmem_size(a->a_vm, PRD_VMEM_ALLOC) == 0, "arena %d: %zu integers allocated "
           "with nothing live", k, prd_vmem_size(a->a_vm, PRD_VMEM_ALLOC));
  int parent = a->a_parent;
  prd_vmem_destroy(a->a_vm);
  if (a->a_map != NULL)
    prd__os_unmap(a->a_map, a->a_limit - a->a_base);
  *a = (struct farena){ 0 };
  if (parent > 0)
    arena_check(parent, "after destroying an importing arena");
}

/* ---- the malloc family ---- */
static size_t msize(struct in *in)
{
  unsigned b = u8(in);
  switch (b >> 6) {
  case 0: return b & 63;
  case 1: return u8(in) * 16u + (b & 15);
  case 2: return u16(in) % 20000;
  default: return ((size_t)u16(in) % 1100 + 1) * 4096 + (b & 63);   /* big and huge */
  }
}

/* Marks the size class of cache cp as used by this input (checked at its end). */
static void malloc_class_note(prd_cache_t *cp)
{
  for (unsigned i = 0; cp != NULL && i < PRD_ARRAY_SIZE(S.malloc_class_used); i++) {
    size_t cs = prd__malloc_class_size(i);
    if (cs == 0)
      break;
    if (prd__malloc_class_cache(cs) == cp) {
      S.malloc_class_used[i] = true;
      break;
    }
  }
}

static void malloc_take(void *p, size_t req, size_t align, const char *what)
{
  uintptr_t a = (uintptr_t)p;
  size_t us = prd_malloc_usable_size(p);
  EXPECT(us >= req, "%s(%zu): usable size %zu is smaller", what, req, us);
  size_t nat = req >= 16 ? 16 : req >= 8 ? 8 : 1;   /* docs/api.md: the natural alignment */
  if (align < nat)
    align = nat;
  EXPECT(a % align == 0, "%s(%zu): %p not aligned to %zu", what, req, p, align);
  check_fresh(a, PRD_MAX(us, (size_t)1), what);
  ((volatile unsigned char *)p)[us - 1] = 0xa5;   /* every usable byte is usable */
  obj_add(a, req, PRD_MAX(us, (size_t)1), K_MALLOC, 0, true);
  S.n_allocs++;
  malloc_class_note(prd__malloc_pm_cache(p));
}

static void op_malloc(struct in *in, unsigned how)
{
  size_t size = msize(in);
  unsigned ab = u8(in);
  if (!room(size + 4096))
    return;
  void *p = NULL;
  size_t align = 0;
  const char *what = "malloc";
  switch (how % 7) {
  case 0:
    p = prd_malloc(size);
    break;
  case 1: {
    size_t n = 1 + ab % 8;
    what = "calloc";
    p = prd_calloc(n, size / n);
    size = n * (size / n);
    if (p != NULL)
      for (size_t i = 0; i < size; i += (size > 4 * FILLEDGE ? 61 : 1))
        EXPECT(((unsigned char *)p)[i] == 0, "calloc: byte %zu of %p is not zero", i, p);
    break;
  }
  case 2:
    what = "posix_memalign";
    align = sizeof(void *) << (ab % 13);
    EXPECT(prd_posix_memalign(&p, align, size) == 0, "posix_memalign(%zu, %zu) failed", align,
           size);
    break;
  case 3:
    what = "aligned_alloc";
    align = (size_t)1 << (ab % 16);
    p = prd_aligned_alloc(align, size);
    break;
  case 4:
    what = "memalign";
    align = (size_t)1 << (ab % 14);
    p = prd_memalign(align, size);
    break;
  case 5:
    what = "valloc";
    align = page;
    p = prd_valloc(size);
    break;
  default:
    what = "pvalloc";
    align = page;
    p = prd_pvalloc(size);
    break;
  }
  EXPECT(p != NULL, "%s(%zu) failed: errno %d", what, size, errno);
  malloc_take(p, size, align, what);
}

static void op_realloc(struct in *in, bool array)
{
  unsigned pick = u8(in);
  size_t size = msize(in);
  long i = obj_pick(pick, K_MALLOC, -1);
  if (!room(size + 4096))
    return;
  if (i < 0) {   /* realloc(NULL, n) = malloc(n) */
    void *p = prd_realloc(NULL, size);
    EXPECT(p != NULL, "realloc(NULL, %zu) failed", size);
    malloc_take(p, size, 0, "realloc(NULL)");
    return;
  }
  struct obj o = S.objs[i];
  obj_verify(&o, "realloc");
  obj_del((size_t)i);
  void *p = array ? prd_reallocarray((void *)o.o_addr, size ? 2 : 0, size / 2)
                  : prd_realloc((void *)o.o_addr, size);
  if (array)
    size = size ? 2 * (size / 2) : 0;
  if (size == 0) {   /* frees, returns NULL (as glibc) */
    EXPECT(p == NULL, "realloc(p, 0) returned %p", p);
    return;
  }
  EXPECT(p != NULL, "realloc(%p, %zu) failed: errno %d", (void *)o.o_addr, size, errno);
  size_t bad = unfilled(p, 0, o.o_size, o.o_seed, size);
  EXPECT(bad == (size_t)-1, "realloc(%p, %zu) -> %p lost byte %zu of %zu", (void *)o.o_addr,
         size, p, bad, o.o_size);
  malloc_take(p, size, 0, "realloc");
}

static void op_free(struct in *in, bool deferred)
{
  long i = obj_pick(u8(in), K_MALLOC, -1);
  if (i < 0 || (deferred && !defer_room()))
    return;
  struct obj o = S.objs[i];
  obj_verify(&o, deferred ? "prd_free_deferred" : "prd_free");
  size_t us = prd_malloc_usable_size((void *)o.o_addr);
  obj_del((size_t)i);
  S.n_frees += !deferred;
  S.n_defers += deferred;
  if (!deferred) {
    prd_free((void *)o.o_addr);
    return;
  }
  defer_add(o.o_addr, PRD_MAX(us, (size_t)1), prd_rcu_get_state());
  if (prd__malloc_pm_cache((void *)o.o_addr) == NULL) {
    /* a block of no size class goes through prd_call_rcu, on a node from the 32-byte class */
    heads_pending++;
    malloc_class_note(prd__malloc_class_cache(32));
  }
  prd_free_deferred((void *)o.o_addr);
}

/* ---- grace periods ---- */
static void head_cb(struct prd_rcu_head *h)
{
  head_busy[h - heads] = false;
}

static void op_rcu(struct in *in)
{
  unsigned w = u8(in);
  switch (w % 6) {
  case RCU_LOCK:
    if (S.depth < 4) {
      if (S.depth == 0)
        S.section = ++S.sections;
      prd_rcu_read_lock();
      S.depth++;
    }
    break;
  case RCU_UNLOCK:
    if (S.depth > 0) {
      defer_read_section();
      prd_rcu_read_unlock();
      if (--S.depth == 0)
        S.section = 0;
    }
    break;
  case RCU_SYNC:
    if (S.depth == 0) {
      prd_gp_t s = prd_rcu_get_state();
      prd_synchronize_rcu();
      S.n_gps++;
      EXPECT(prd_rcu_poll_state(s), "prd_synchronize_rcu returned before the grace period %llu "
             "ended", (unsigned long long)s);
      defer_prune();
    }
    break;
  case RCU_BARRIER:
    if (S.depth == 0) {
      prd_rcu_barrier();
      for (int i = 0; i < NHEADS; i++)
        EXPECT(!head_busy[i], "prd_rcu_barrier returned before callback %d ran", i);
      heads_pending = 0;
      for (int k = 0; k < MAXCACHES; k++)
        S.caches[k].c_pending = 0;
    }
    break;
  case RCU_WAIT:
    if (S.depth == 0) {
      prd_gp_t s = prd_rcu_get_state();
      prd_rcu_wait_state(s);
      S.n_gps++;
      EXPECT(prd_rcu_poll_state(s), "prd_rcu_wait_state(%llu) returned early",
             (unsigned long long)s);
    } else {
      prd_rcu_request_gp(prd_rcu_get_state());
    }
    break;
  default:   /* RCU_CALL */
    for (int i = 0; i < NHEADS; i++)
      if (!head_busy[i]) {
        head_busy[i] = true;
        heads_pending++;
        prd_call_rcu(&heads[i], head_cb);
        break;
      }
    break;
  }
  if (S.depth > 0)
    defer_read_section();
}

static void op_misc(struct in *in)
{
  unsigned w = u8(in), v = u8(in);
  switch (w % 6) {
  case MISC_REAP:
    prd_reap();
    break;
  case MISC_CACHE_REAP: {
    int k = cache_pick(v);
    if (k >= 0) {
      prd_cache_reap(S.caches[k].c_cp);
      cache_balance(&S.caches[k], "prd_cache_reap");
    }
    break;
  }
  case MISC_FLUSH:
    prd_thread_flush();
    break;
  case MISC_CTOR_FAIL:
    S.ctor_fail = !S.ctor_fail;
    break;
  case MISC_OPTION: {
    unsigned o = v % PRD_ARRAY_SIZE(opt_names);
    char val[32];
    snprintf(val, sizeof(val), "%ld", opt_values[o][(v >> 4) % 3]);
    EXPECT(prd_option_set(opt_names[o], val) == 0, "prd_option_set(%s, %s)", opt_names[o], val);
    break;
  }
  default: {   /* MISC_DESTROY */
    int k = cache_pick(v);
    if (k >= 0 && S.depth == 0)
      cache_destroy(k);
    break;
  }
  }
}

/* ---- one input ---- */
static void teardown(void)
{
  while (S.depth > 0) {
    defer_read_section();
    prd_rcu_read_unlock();
    S.depth--;
  }
  S.section = 0;
  for (long i; (i = obj_pick(0, K_MALLOC, -1)) >= 0;) {
    obj_verify(&S.objs[i], "free at the end");
    void *p = (void *)S.objs[i].o_addr;
    obj_del((size_t)i);
    prd_free(p);
  }
  for (long i; (i = obj_pick(0, K_VMEM, 0)) >= 0;)
    vmem_release((size_t)i);
  for (int k = 1; k < MAXARENAS; k++)
    if (S.arenas[k].a_vm != NULL && S.arenas[k].a_parent < 0)
      arena_destroy(k);
  for (int k = 0; k < MAXCACHES; k++)
    if (S.caches[k].c_cp != NULL)
      cache_destroy(k);
  EXPECT(S.nobjs == 0 && S.liveb == 0, "%zu objects left in the model", S.nobjs);
  if (heads_pending) {
    prd_rcu_barrier();
    for (int i = 0; i < NHEADS; i++)
      EXPECT(!head_busy[i], "prd_rcu_barrier returned before callback %d ran", i);
    heads_pending = 0;
  }
  for (unsigned i = 0; i < PRD_ARRAY_SIZE(S.malloc_class_used); i++) {
    if (!S.malloc_class_used[i])
      continue;
    struct fcache c = { .c_cp = prd__malloc_class_cache(prd__malloc_class_size(i)) };
    if (c.c_cp != NULL)
      cache_balance(&c, "malloc class at the end of the input");
  }
  if (verbose)
    printf("  %llu steps: %llu allocations, %llu frees, %llu deferred frees, %llu grace-period "
           "waits\n", (unsigned long long)S.step, (unsigned long long)S.n_allocs,
           (unsigned long long)S.n_frees, (unsigned long long)S.n_defers,
           (unsigned long long)S.n_gps);
  EXPECT(prd__error_count() == errors0, "the library reported %llu errors",
         (unsigned long long)(prd__error_count() - errors0));
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  page = prd__os_page_size();
  verbose = getenv("FUZZ_OPS_VERBOSE") ? atoi(getenv("FUZZ_OPS_VERBOSE")) : 0;
  /* the maintenance thread's idle steal would make a run depend on timing (section 4) */
  prd_option_set("maint_thread", "0");
  for (unsigned i = 0; i < PRD_ARRAY_SIZE(opt_names); i++)
    opt_defaults[i] = prd_option_get(opt_names[i]);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (page == 0)
    LLVMFuzzerInitialize(NULL, NULL);
  for (unsigned i = 0; i < PRD_ARRAY_SIZE(opt_names); i++) {
    char val[32];
    snprintf(val, sizeof(val), "%ld", opt_defaults[i]);
    prd_option_set(opt_names[i], val);
  }
  memset(&S, 0, sizeof(S));
  S.arenas[0] = (struct farena){ .a_mem = true, .a_parent = -1, .a_quantum = page };
  errors0 = prd__error_count();
  struct in in = { data, size };
  while (in.n > 0) {
    S.step++;
    unsigned op = u8(&in);
    if (verbose > 1)
      printf("  step %llu: op %u (%u), %zu live objects, %zu deferred, section depth %u\n",
             (unsigned long long)S.step, op % OP_COUNT, op, S.nobjs, S.ndefers, S.depth);
    switch (op % OP_COUNT) {
    case OP_CACHE_CREATE: op_cache_create(&in); break;
    case OP_CACHE_ALLOC: case OP_CACHE_ALLOC2: op_cache_alloc(&in, false); break;
    case OP_CACHE_BURST: op_cache_alloc(&in, true); break;
    case OP_CACHE_FREE: op_cache_release(&in, 0, false); break;
    case OP_CACHE_DEFER: op_cache_release(&in, 1, false); break;
    case OP_CACHE_RELEASE_BURST: op_cache_release(&in, (op >> 5) & 1, true); break;
    case OP_VMEM_CREATE: op_vmem_create(&in); break;
    case OP_VMEM_ALLOC: op_vmem_alloc(&in, false); break;
    case OP_VMEM_XALLOC: op_vmem_alloc(&in, true); break;
    case OP_VMEM_FREE: op_vmem_free(&in); break;
    case OP_VMEM_ADD: op_vmem_add(&in); break;
    case OP_VMEM_DESTROY: {
      int k = arena_pick(u8(&in), false);
      if (k > 0 && S.depth == 0)
        arena_destroy(k);
      break;
    }
    case OP_MALLOC: case OP_MALLOC2: op_malloc(&in, op >> 5); break;
    case OP_REALLOC: op_realloc(&in, (op >> 5) & 1); break;
    case OP_FREE: op_free(&in, false); break;
    case OP_FREE_DEFERRED: op_free(&in, true); break;
    case OP_RCU: case OP_RCU2: op_rcu(&in); break;
    default: op_misc(&in); break;
    }
  }
  teardown();
  return 0;
}

/* ---- structured seeds: short programs in the encoding above, so that the fuzzer starts
 * from inputs that reach deep states (full magazines, latent caches past their caps, an arena
 * as a cache's source, nested read-side sections) instead of finding them byte by byte.
 * fuzz_ops_replay --make-seeds DIR writes them (tests/fuzz/corpus holds the result). ---- */
struct seed {
  uint8_t b[512];
  size_t n;
};

static void sb(struct seed *s, int n, ...)
{
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n && s->n < sizeof(s->b); i++)
    s->b[s->n++] = (uint8_t)va_arg(ap, int);
  va_end(ap);
}

/* An op byte for op whose high bits satisfy the variant test ok(byte). */
static uint8_t opv(int op, bool (*ok)(unsigned, int), int arg)
{
  for (unsigned b = (unsigned)op; b < 256; b += OP_COUNT)
    if (ok(b, arg))
      return (uint8_t)b;
  return (uint8_t)op;
}
static bool v_release(unsigned b, int defer) { return (int)((b >> 5) & 1) == defer; }
static bool v_malloc(unsigned b, int how) { return (int)((b >> 5) % 7) == how; }

/* an option: o indexes opt_names, idx its values in opt_values */
static void s_option(struct seed *s, unsigned o, unsigned idx)
{
  for (unsigned v = 0; v < 256; v++)
    if (v % PRD_ARRAY_SIZE(opt_names) == o && (v >> 4) % 3 == idx) {
      sb(s, 3, OP_MISC, MISC_OPTION, (int)v);
      return;
    }
}
static void s_rcu(struct seed *s, int what) { sb(s, 2, OP_RCU, what); }
static void s_misc(struct seed *s, int what, int arg) { sb(s, 3, OP_MISC, what, arg); }
/* cache k (sel & 3), NOSLEEP with bit 2 */
static void s_burst(struct seed *s, int k, int n) { sb(s, 3, OP_CACHE_BURST, k, n - 1); }
static void s_release(struct seed *s, int k, int defer, int n)
{
  sb(s, 4, opv(OP_CACHE_RELEASE_BURST, v_release, defer), k, 0, n - 1);
}
/* size byte: see op_cache_create; fl: 1 NOMAGAZINE, 2 ctor, 4 OBLIVIOUS, 8/16/24 debug
 * sets, 0x20 UNMAP, 0x40 PAGEBUF, 0x80 source arena */
static void s_cache(struct seed *s, int sizeb, int lo, int al, int fl)
{
  sb(s, 5, OP_CACHE_CREATE, sizeb, lo, al, fl);
}
static void s_malloc(struct seed *s, int how, int sizeb, int x1, int x2, int ab)
{
  sb(s, 1, opv(OP_MALLOC, v_malloc, how));
  sb(s, 1, sizeb);
  if ((sizeb >> 6) == 1)
    sb(s, 1, x1);
  else if ((sizeb >> 6) >= 2)
    sb(s, 2, x1, x2);
  sb(s, 1, ab);
}

typedef void seed_fn(struct seed *s);

static void seed_cache_cycle(struct seed *s)
{
  s_cache(s, 0x50, 3, 0, 0);              /* 323 bytes, magazines */
  for (int r = 0; r < 3; r++) {
    s_burst(s, 0, 64);
    s_release(s, 0, 0, 32);
    s_release(s, 0, 1, 32);               /* deferred */
    s_burst(s, 0, 64);
    s_rcu(s, RCU_SYNC);
    s_release(s, 0, 1, 64);
  }
  s_misc(s, MISC_FLUSH, 0);
  s_misc(s, MISC_REAP, 0);
  s_burst(s, 0, 64);
  s_misc(s, MISC_DESTROY, 0);
}

static void seed_debug_section(struct seed *s)
{
  s_cache(s, 0x30, 0, 5, 0x0a);           /* 49 bytes, align 16, ctor, patterns + redzone */
  s_cache(s, 0x81, 7, 0, 0x12);           /* ~1.3 KiB, ctor, verify + audit */
  s_burst(s, 0, 40);
  s_burst(s, 1, 20);
  s_rcu(s, RCU_LOCK);
  s_release(s, 0, 1, 20);
  s_release(s, 1, 1, 10);
  s_rcu(s, RCU_LOCK);                     /* nested */
  s_burst(s, 0, 30);
  s_rcu(s, RCU_UNLOCK);
  s_burst(s, 1, 10);
  s_rcu(s, RCU_UNLOCK);
  s_rcu(s, RCU_BARRIER);
  s_release(s, 0, 0, 50);
  s_misc(s, MISC_CACHE_REAP, 1);
}

static void seed_oblivious_nomag(struct seed *s)
{
  s_cache(s, 0x10, 0, 0, 0x04);           /* 17 bytes, OBLIVIOUS */
  s_cache(s, 0x45, 1, 8, 0x01);           /* 145 bytes, align 128, no magazines */
  for (int r = 0; r < 2; r++) {
    s_burst(s, 0, 64);
    s_burst(s, 1, 64);
    s_release(s, 0, 1, 64);
    s_release(s, 1, 1, 40);
    s_rcu(s, RCU_CALL);
    s_burst(s, 1, 30);
    s_rcu(s, RCU_WAIT);
  }
  s_rcu(s, RCU_BARRIER);
  s_misc(s, MISC_REAP, 0);
}

static void seed_malloc_family(struct seed *s)
{
  for (int how = 0; how < 7; how++) {
    s_malloc(s, how, 0x20 + how, 0, 0, how * 3);          /* tiny */
    s_malloc(s, how, 0x40 | how, 10 * how + 5, 0, how);  /* classes */
    s_malloc(s, how, 0x80, 0x10, 0x4e, 2);               /* ~20 KiB: big */
  }
  s_malloc(s, 0, 0xc0, 0x10, 0x04, 0);                   /* 4 MiB and more: huge */
  sb(s, 4, opv(OP_REALLOC, v_release, 0), 1, 0x80, 0x40); /* realloc to ~16 KiB */
  sb(s, 4, opv(OP_REALLOC, v_release, 0), 2, 0x41, 0x07); /* to a class */
  sb(s, 5, opv(OP_REALLOC, v_release, 1), 3, 0xc0, 0x20, 0x01);   /* reallocarray, big */
  sb(s, 3, opv(OP_REALLOC, v_release, 0), 4, 0x00);      /* realloc(p, 0) frees */
  for (int i = 0; i < 8; i++)
    sb(s, 2, OP_FREE_DEFERRED, i * 3);
  sb(s, 2, OP_FREE, 1);
  s_rcu(s, RCU_SYNC);
  for (int how = 0; how < 7; how++)
    s_malloc(s, how, 0x40 | how, 10 * how + 5, 0, how);
  for (int i = 0; i < 6; i++)
    sb(s, 2, OP_FREE_DEFERRED, i);
  s_rcu(s, RCU_BARRIER);
}

static void seed_vmem(struct seed *s)
{
  sb(s, 4, OP_VMEM_CREATE, 0x04, 40, 2);   /* integers, quantum 4, quantum caches */
  sb(s, 4, OP_VMEM_CREATE, 0x00, 20, 0);   /* integers, quantum 1 */
  for (int i = 0; i < 12; i++) {
    sb(s, 5, OP_VMEM_XALLOC, 1 + (i & 1) + 0x10 * (i & 3), i * 5, i * 9 + 3, 0x81 + 4 * i);
    sb(s, 5, OP_VMEM_ALLOC, 1 + (i & 1) + 0x10 * (i & 3), i, 0, 0);
  }
  sb(s, 2, OP_VMEM_ADD, 1);
  sb(s, 2, OP_VMEM_ADD, 2);
  sb(s, 4, OP_VMEM_CREATE, 0x01 | (1 << 3), 0, 3);   /* imports from arena 1 */
  for (int i = 0; i < 8; i++) {
    sb(s, 5, OP_VMEM_ALLOC, 3, i * 7, 0, 0);
    sb(s, 2, OP_VMEM_FREE, i * 5);
  }
  sb(s, 2, OP_VMEM_DESTROY, 3);
  for (int i = 0; i < 6; i++)
    sb(s, 2, OP_VMEM_FREE, i);
}

static void seed_arena_source(struct seed *s)
{
  sb(s, 4, OP_VMEM_CREATE, 0x02, 8, 0);    /* memory: 48 pages, as many again to add */
  s_cache(s, 0x5f, 1, 0, 0x80);            /* 545 bytes from arena 1 */
  s_cache(s, 0xc2, 0, 0, 0x82);            /* ~20 KiB, ctor, from arena 1 */
  for (int r = 0; r < 4; r++) {
    s_burst(s, 0, 64);
    s_burst(s, 1 | 4, 8);                  /* NOSLEEP */
  }
  s_release(s, 0, 1, 64);
  s_release(s, 1, 1, 4);
  s_burst(s, 0, 64);                       /* PRD_SLEEP: may wait for the deferred ones */
  sb(s, 5, OP_VMEM_ALLOC, 1, 3, 0, 0);
  sb(s, 2, OP_VMEM_ADD, 1);
  s_burst(s, 1, 8);
  sb(s, 5, OP_VMEM_XALLOC, 1, 4, 2, 0x01);
  s_misc(s, MISC_REAP, 0);
  sb(s, 2, OP_VMEM_DESTROY, 1);            /* its caches first */
}

static void seed_latent_caps(struct seed *s)
{
  s_option(s, 0, 0);                       /* slab_working_set 0 */
  s_option(s, 1, 1);                       /* defer_latent_max_kb 8 */
  s_option(s, 2, 1);                       /* defer_depot_kb 4 */
  s_option(s, 5, 1);                       /* maint_interval 50 ms */
  s_cache(s, 0x4f, 0, 0, 0);               /* 304 bytes */
  s_cache(s, 0x2f, 0, 0, 0x01);            /* 48 bytes, no magazines */
  for (int r = 0; r < 8; r++) {
    s_burst(s, r & 1, 64);
    s_release(s, r & 1, 1, 64);
    if (r == 4)
      s_misc(s, MISC_FLUSH, 0);
  }
  s_misc(s, MISC_CACHE_REAP, 0);
  s_rcu(s, RCU_SYNC);
  s_burst(s, 0, 64);
  s_misc(s, MISC_REAP, 0);
}

static void seed_ctor_fail(struct seed *s)
{
  s_cache(s, 0x42, 0, 0, 0x02);            /* 96 bytes, ctor */
  s_misc(s, MISC_CTOR_FAIL, 0);
  s_burst(s, 0 | 4, 16);                   /* NOSLEEP: the constructor fails */
  s_misc(s, MISC_CTOR_FAIL, 0);
  s_burst(s, 0 | 4, 16);
  s_option(s, 3, 0);                       /* magazines 0: for caches created after */
  s_cache(s, 0x42, 0, 0, 0x02);
  s_burst(s, 1, 16);
  s_release(s, 1, 1, 8);
  s_misc(s, MISC_DESTROY, 1);
}

static void seed_heap_vmem(struct seed *s)
{
  for (int i = 0; i < 8; i++) {
    sb(s, 5, OP_VMEM_ALLOC, 0 | (i & 3) << 4, i * 2, 0, 0);            /* the heap arena */
    sb(s, 5, OP_VMEM_XALLOC, 0 | (i & 3) << 4, 224 + i, i * 8 + 2, 0);  /* aligned */
  }
  s_malloc(s, 0, 0x80, 0x00, 0x80, 0);
  for (int i = 0; i < 8; i++)
    sb(s, 2, OP_VMEM_FREE, i * 3);
  s_misc(s, MISC_REAP, 0);
}

static const struct { const char *name; seed_fn *fn; } seeds[] = {
  { "seed-cache-cycle", seed_cache_cycle },
  { "seed-debug-section", seed_debug_section },
  { "seed-oblivious-nomag", seed_oblivious_nomag },
  { "seed-malloc-family", seed_malloc_family },
  { "seed-vmem", seed_vmem },
  { "seed-arena-source", seed_arena_source },
  { "seed-latent-caps", seed_latent_caps },
  { "seed-ctor-fail", seed_ctor_fail },
  { "seed-heap-vmem", seed_heap_vmem },
};

int fuzz_ops_write_seeds(const char *dir);
int fuzz_ops_write_seeds(const char *dir)
{
  for (size_t i = 0; i < PRD_ARRAY_SIZE(seeds); i++) {
    struct seed s = { .n = 0 };
    seeds[i].fn(&s);
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, seeds[i].name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(s.b, 1, s.n, f) != s.n || fclose(f) != 0) {
      perror(path);
      return 1;
    }
    printf("%s: %zu bytes\n", path, s.n);
  }
  return 0;
}
