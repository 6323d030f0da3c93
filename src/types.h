/*
 * types.h: the internal types of libprudence.
 *
 * Main types, bottom up (each struct's fields carry the struct's prefix, so uses grep):
 *   prd_vmem_t      (vmem.c)   an arena of integers: spans, segments (boundary tags),
 *                              power-of-two freelists, an allocated-segment hash   vm_
 *   prd_vseg_t      (vmem.c)   one boundary tag: a span, a free or an allocated segment  vs_
 *   prd_cache_t     (slab.c)   an object cache: layout, slab lists, hash, statistics   cache_
 *   prd_slab_t      (slab.c)   one slab: its buffers' freelists and reference count     slab_
 *   prd_bufctl_t    (slab.c)   one buffer's control (freelist/hash linkage, address)    bc_
 *   prd_bufctl_audit_t (debug.c) a bufctl with the buffer's transaction log             bca_
 *   prd__cache_snap_t  (cache.c) one cache's statistics, copied for the printers        cs_
 *   prd__arena_snap_t  (vmem.c)  one arena's statistics and names, copied likewise      as_
 *   prd_mag_t       (magazine.c) a magazine: an array of object pointers (rounds)      mag_
 *   prd_magtype_t   (magazine.c) one row of the magazine-size table                    mt_
 *   prd_depot_t     (magazine.c) a cache's depot: full and empty magazine lists        dp_
 *   prd_cpu_cache_t (magazine.c) one thread's loaded/previous magazines of one cache   cc_
 *   prd_tcache_t    (magazine.c) one thread's array of CPU caches, on the registry     tc_
 *
 * Layers above add their types here as they land.
 */
#ifndef PRD_TYPES_H
#define PRD_TYPES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "prudence.h"

/* ---- vmem.c ---------------------------------------------------------------------------- */
/* Segment types (vs_type). */
enum { PRD_VS_SPAN = 1, PRD_VS_FREE = 2, PRD_VS_ALLOC = 4 };
/* Whether a free segment's pages may be resident (vs_dirty, vmem.c section 16): never touched
 * since they were mapped or decommitted; dirty at the last decay pass; freed since it. */
enum { PRD_VS_CLEAN = 0, PRD_VS_AGED = 1, PRD_VS_NEW = 2 };

/* One boundary tag.  Every tag is on the arena's address-ordered list (vs_anext/vs_aprev):
 * a span tag first, then the free and allocated segments that tile that span.  A free segment
 * is also on one power-of-two freelist (vs_knext/vs_kprev, doubly linked); an allocated one is
 * on one hash chain (vs_knext only).  64 bytes, so a page holds a whole number of tags. */
typedef struct prd_vseg prd_vseg_t;
struct prd_vseg {
  uintptr_t vs_start;          /* first integer */
  uintptr_t vs_end;            /* one past the last integer (never wraps to 0) */
  prd_vseg_t *vs_anext, *vs_aprev;   /* address-ordered list of all tags */
  prd_vseg_t *vs_knext, *vs_kprev;   /* freelist (free), hash chain (alloc), tag reserve */
  uint8_t vs_type;             /* PRD_VS_SPAN, PRD_VS_FREE or PRD_VS_ALLOC */
  uint8_t vs_import;           /* span: imported from the source (given back when all free) */
  uint8_t vs_xalloc;           /* alloc: came from prd_vmem_xalloc (must pair with xfree) */
  uint8_t vs_mark;             /* prd__vmem_check: seen on a freelist */
  uint8_t vs_dirty;            /* free, heap arena: PRD_VS_CLEAN, PRD_VS_AGED or PRD_VS_NEW */
  uint8_t vs_qdirect;          /* alloc: a quantum-cached size the arena served itself, the
                                  caches not being made then (vmem.c section 14) */
  uint8_t vs_purged;           /* free, heap arena: decommitted by the bound after a free, since
                                  the last decay pass (vmem.c section 16) */
  uint8_t vs_qslab;            /* alloc: a slab of one of the arena's quantum caches (section 14) */
};

#define PRD_VMEM_NAMELEN   32   /* arena names are copied, truncated to 31 characters */
#define PRD_VMEM_FREELISTS 64   /* one list per power of two of a uintptr_t size */
#define PRD_VMEM_HASH0     16   /* embedded hash buckets before the first resize */
#define PRD_VMEM_NQCACHE   16   /* quantum caches at most (kmem's VMEM_NQCACHE_MAX): more
                                   sizes would spread objects over too many slabs */

struct prd_vmem {
  char vm_name[PRD_VMEM_NAMELEN];
  pthread_mutex_t vm_lock;     /* protects everything below (one lock per arena) */
  pthread_cond_t vm_cv;        /* PRD_VM_SLEEP waiters; broadcast by frees and adds */
  uint32_t vm_waiters;         /* threads waiting on vm_cv */
  size_t vm_quantum;           /* power of two; every size and address is a multiple */
  int vm_qshift;               /* log2(vm_quantum) */
  size_t vm_qcache_max;        /* stored for the quantum caches of a later layer */
  size_t vm_import_chunk;      /* imports are rounded up to this (0: to the source quantum) */
  prd_vmem_alloc_fn *vm_afunc; /* import from vm_source */
  prd_vmem_free_fn *vm_ffunc;  /* give an imported span back */
  prd_vmem_t *vm_source;
  prd_vseg_t vm_seg0;          /* sentinel of the address-ordered list */
  prd_vseg_t *vm_rotor;        /* next-fit: the tag of the last next-fit allocation */
  uintptr_t vm_rotor_addr;     /* next-fit: search from here first */
  uint64_t vm_freemap;         /* bit n set: vm_freelist[n] is not empty */
  prd_vseg_t vm_freelist[PRD_VMEM_FREELISTS];  /* sentinels; list n: size in [2^n, 2^(n+1)) */
  prd_vseg_t **vm_hash;        /* allocated segments by start address */
  size_t vm_hash_mask;         /* buckets - 1 (a power of two) */
  int vm_hash_shift;           /* 64 - log2(buckets), for multiplicative hashing */
  prd_vseg_t *vm_hash0[PRD_VMEM_HASH0];
  prd_vseg_t *vm_tags;         /* the tag reserve (linked through vs_knext) */
  size_t vm_ntags;             /* tags in the reserve */
  void *vm_tag_pages;          /* pages the tags were carved from (first word links them) */
  prd_vmem_stats_t vm_stats;   /* the statistics (fields from PRD_VMEM_STATS) */
  bool vm_decommit;            /* the integers are memory this arena may decommit (the heap) */
  size_t vm_dirty;             /* bytes of free segments with vs_dirty set (section 16); stored
                                  with relaxed atomics so prd__vmem_heap_dirty reads it unlocked */
  size_t vm_reuse;             /* dirty free bytes allowed above the bound for reuse: what growth
                                  reaps freed, less twice what was allocated since (section 16) */
  size_t vm_refault;           /* bytes allocated from vs_purged segments since the last decay
                                  pass or the last rise of vm_dirty_scale (section 16) */
  unsigned vm_dirty_scale;     /* the bound's factor, 1 to VMEM_DIRTY_SCALE_MAX (section 16) */
  size_t vm_alloc_peak;        /* the most bytes allocated since the last decay pass: what a
                                  raised bound may keep dirty (section 16) */
  size_t vm_alloc_since;       /* bytes allocated since the last purge after a free (16) */
  size_t vm_dirty_peak;        /* the most dirty free bytes since the last decay pass (16) */
  uint64_t vm_decommit_retry_ns;   /* the kernel refused a decommit: no purge before this
                                      (prd__now_ns; 0: none refused; section 16) */
  uint64_t vm_decommit_refused;    /* refusals so far: the first reported, then each 1024th */
  uint8_t vm_purge_more;       /* an inline purge stopped after its slice short of its target:
                                  PURGE_FREE or PURGE_REUSE, the kind that started it; 0 none
                                  (section 16) */
  prd_vmem_t *vm_next, *vm_prev;   /* the list of all arenas, under vmem_list_lock */
  /* quantum caches (vmem.c section 14): vm_qcache[k-1] serves size k * quantum; made at first use */
  _Atomic int vm_qcache_state;            /* 0 not yet, 1 made, -1 never (magazines=0) */
  _Atomic uint64_t vm_qcache_retry_ns;    /* no try to make them before (a failed try) */
  _Atomic uint64_t vm_qdirect;            /* allocated segments with vs_qdirect (vm_lock) */
  int vm_nqcache;
  struct prd_cache *vm_qcache[PRD_VMEM_NQCACHE];
};

/* One arena as the statistics printers see it: copied under the arena's lock, printed after
 * every lock is dropped (stats.c). */
typedef struct prd__arena_snap {
  char as_name[PRD_VMEM_NAMELEN];
  char as_source[PRD_VMEM_NAMELEN];   /* the source arena's name, "" when none */
  uint64_t as_quantum;
  prd_vmem_stats_t as_stats;
} prd__arena_snap_t;

/* ---- slab.c ---------------------------------------------------------------------------- */
#define PRD_SLAB_BUCKETS    64   /* partial-slab lists by free count: one bitmap word, and
                                    exact for slabs of up to 65 buffers (all large layouts) */
#define PRD_HASH_INITIAL    64   /* buckets of a new cache's buffer-to-bufctl hash (kmem's
                                    KMEM_HASH_INITIAL): 8 slabs of 8 buffers before a resize */
#define PRD_AUDIT_TX        4    /* transactions kept per buffer: the current owner's alloc,
                                    the free before it and the pair before that (002 §6.8) */
#define PRD_AUDIT_DEPTH     12   /* stack frames per transaction: past the library's own 2-3
                                    frames to the caller's callers */

/* A circular doubly linked list with a sentinel: slabs move between lists in O(1). */
typedef struct prd_slab_link {
  struct prd_slab_link *sl_next, *sl_prev;
} prd_slab_link_t;

typedef struct prd_slab prd_slab_t;

/* A buffer's control.  For the small layout only bc_next exists: it is the last word of the
 * free buffer (seed 002 3.2.2).  For the large layout it is a separate structure from an
 * internal cache, and sits in the cache's hash table for its slab's whole life. */
typedef struct prd_bufctl {
  struct prd_bufctl *bc_next;    /* next free buffer of the slab (free buffers only) */
  struct prd_bufctl *bc_hnext;   /* hash chain (large layout) */
  void *bc_addr;                 /* the buffer */
  prd_slab_t *bc_slab;           /* its slab */
  uint32_t bc_flags;             /* PRD_BC_*: state as the slab layer sees it */
  uint32_t bc_dstate;            /* debug: as the user sees it (PRD_BC_ALLOC, _DEFERRED or 0) */
} prd_bufctl_t;
#define PRD_BC_ALLOC 0x1         /* handed out by the slab layer */
#define PRD_BC_DEFERRED 0x2      /* in its slab's latent slab (defer.c), still allocated */
#define PRD_BC_AGED 0x4          /* free since the last purge pass (slab.c section 6) */
#define PRD_BC_PURGE 0x8         /* chosen by this purge pass, not decommitted yet */
#define PRD_BC_CLEAN 0x10        /* free and decommitted by a purge pass */
#define PRD_BC_PURGED (PRD_BC_AGED | PRD_BC_PURGE | PRD_BC_CLEAN)   /* an allocation clears */

/* One transaction on a buffer (auditing, seed 002 6.1). */
typedef struct prd_audit_tx {
  uint64_t tx_time_ns;           /* CLOCK_MONOTONIC */
  uint64_t tx_thread;            /* the thread (pthread_self) */
  void *tx_slab;
  uint32_t tx_alloc;             /* 1 alloc, 0 free */
  uint32_t tx_depth;             /* frames in tx_stack */
  void *tx_stack[PRD_AUDIT_DEPTH];
} prd_audit_tx_t;

/* A bufctl with the log of the buffer's last PRD_AUDIT_TX transactions (a ring). */
typedef struct prd_bufctl_audit {
  prd_bufctl_t bca_bc;           /* first: a prd_bufctl_audit_t * is a prd_bufctl_t * */
  struct prd_cache *bca_cache;
  uint32_t bca_ntx;              /* transactions recorded so far (the ring's next is % TX) */
  prd_audit_tx_t bca_tx[PRD_AUDIT_TX];
} prd_bufctl_audit_t;

/* A slab: one piece of the source arena cut into equal buffers (seed 002 3.2). */
struct prd_slab {
  prd_slab_link_t slab_link;     /* on the cache's full, partial[b] or free list */
  struct prd_cache *slab_cache;
  char *slab_base;               /* start of the slab's memory (or integer range) */
  prd_bufctl_t *slab_head;       /* free buffers needing no construction by the slab layer */
  prd_bufctl_t *slab_fresh;      /* free buffers never constructed (or whose ctor failed) */
  uint32_t slab_refcnt;          /* buffers allocated */
  uint32_t slab_chunks;          /* buffers in the slab */
  uint32_t slab_color;           /* offset of the first buffer from slab_base */
  uint32_t slab_bucket;          /* the list it is on: PRD_SLAB_ON_* or a partial bucket */
  uint32_t slab_unlinked;        /* buffers [slab_unlinked, slab_chunks) are free and on no
                                  * list yet: linked a page at a time (slab.c section 4) */
  const void *slab_owner;        /* the thread record whose current slab it is (slab.c section
                                  * 10), NULL: none; under cache_lock */
  /* the latent slab (seed 001 §4.1, defer.c): deferred buffers of this slab, still counted in
   * slab_refcnt, in at most two generations, each tagged with one grace-period state; they
   * are recorded outside the buffers (readers may still read them): a bitmap before the
   * prd_slab_t (small layout) or a list through the bufctls (large layout) */
  prd_slab_link_t slab_lat_link; /* on cache_latent while it has deferred buffers */
  uint32_t slab_lat_n[2];        /* buffers in generation g */
  prd_gp_t slab_lat_gp[2];       /* generation g's grace-period state */
  prd_bufctl_t *slab_lat_list[2];/* large layout: generation g through bc_next */
};
#define PRD_SLAB_ON_OWNED 0xfffffffdu
#define PRD_SLAB_ON_FULL 0xfffffffeu
#define PRD_SLAB_ON_FREE 0xffffffffu

/* Internal cache flags (above the public PRD_CACHE_* bits, which cache_flags also holds). */
#define PRD_CF_HASH     0x00010000u  /* large layout: external slabs and bufctls, hash table */
#define PRD_CF_DEBUG    0x00020000u  /* buffer debugging: the one flag the fast path tests */
#define PRD_CF_SLABCTOR 0x00040000u  /* the slab layer constructs (ctor, no patterns or pagebuf) */
#define PRD_CF_BUFTAG   0x00080000u  /* a debug tag follows each buffer (redzone, bufctl) */
#define PRD_CF_INTERNAL 0x00100000u  /* the library's own cache (slab, front end, magazines) */
#define PRD_CF_DEFERHEAD 0x00200000u /* a prd_defer_head_t follows each buffer (call_rcu path) */
#define PRD_CF_PACKED   0x00400000u  /* small layout in slabs of several pages (slab.c section 2) */
#define PRD_CF_NOMARK   0x00800000u  /* no free mark (magazine.c section 15): out-of-line front */
#define PRD_CF_HARDENED 0x01000000u  /* made with the option hardened (slab.c 4b, magazine.c 15) */
#define PRD_CF_BUF_DEBUG (PRD_CACHE_PATTERNS | PRD_CACHE_REDZONE | PRD_CACHE_VERIFY |       \
                          PRD_CACHE_AUDIT | PRD_CACHE_PAGEBUF)

/* The debug tag after each buffer of a cache with PRD_CF_BUFTAG (libumem's buftag). */
typedef struct prd_buftag {
  uint64_t bt_redzone;           /* PRD_REDZONE_PATTERN */
  prd_bufctl_t *bt_bufctl;       /* the buffer's bufctl: a report can name it */
} prd_buftag_t;

/* ---- magazine.c ------------------------------------------------------------------------ */
/* A magazine (seed 004): a stack of up to mag_size constructed objects ("rounds").  Its size
 * travels with it, so magazines of an older, smaller size stay usable after a resize. */
typedef struct prd_mag prd_mag_t;
struct prd_mag {
  prd_mag_t *mag_next;           /* depot list linkage */
  uint32_t mag_size;             /* capacity M */
  uint32_t mag_nlat;             /* on the depot's latent list: its deferred rounds */
  prd_gp_t mag_gp;               /* on the depot's latent list: their grace-period state */
  void *mag_round[];             /* mag_round[0 .. rounds-1] are held */
};

/* One row of the magazine-size table (libumem's umem_magtype): caches of objects above
 * mt_minbuf start at this size; a cache grows to it only while its chunk is below mt_maxbuf. */
typedef struct prd_magtype {
  uint32_t mt_magsize;           /* rounds */
  uint32_t mt_align;             /* alignment of the magazine buffers */
  size_t mt_minbuf;              /* start here when the chunk is above this */
  size_t mt_maxbuf;              /* grow into this size only when the chunk is below this */
  struct prd_cache *mt_cache;    /* where magazines of this size come from */
} prd_magtype_t;

/* A list of magazines of the depot, with its working set (seed 004; libumem's umem_maglist). */
typedef struct prd_maglist {
  prd_mag_t *ml_list;
  uint64_t ml_total;             /* magazines on the list */
  uint64_t ml_min;               /* fewest during this interval */
  uint64_t ml_reaplimit;         /* outside the working set of the last interval: reapable */
  uint64_t ml_gets, ml_puts;     /* statistics */
} prd_maglist_t;

/* Counters of Prudence in one CPU cache, by index (folded into the depot's dp_dead_pcnt when
 * the thread goes away).  Written by the owner (PRD__MAG_COUNT) or under tc_lock by a thief
 * while the owner is out of its operations; read relaxed.  Two lists: the counters that are a
 * field of prd_cache_stats_t by themselves, X(counter, field), copied by one macro in defer.c,
 * and those that a field sums with other counts, X(counter). */
#define PRD_PC_FIELDS(X)                                                                     \
  X(REFILLS, oc_refills) X(FLUSHES, oc_flushes) X(RESIZES, oc_resizes)                      \
  X(PARTIAL, partial_refills) X(PREFLUSH, preflush_moves) X(TODEPOT, latent_depot_moves)    \
  X(CAPWAITS, latent_cap_waits) X(DEPOTWAITS, depot_gp_waits)
#define PRD_PC_SUMMED(X) X(DEFERRED) X(MERGES) X(OOMWAITS)
#define PRD__PC_ENUM2(c, f) PRD_PC_##c,
#define PRD__PC_ENUM1(c) PRD_PC_##c,
enum { PRD_PC_FIELDS(PRD__PC_ENUM2) PRD_PC_SUMMED(PRD__PC_ENUM1) PRD_PC_NCOUNTERS };
#undef PRD__PC_ENUM2
#undef PRD__PC_ENUM1

/* The depot of one cache: everything under dp_lock. */
typedef struct prd_depot {
  pthread_mutex_t *dp_lock;      /* on the lock pages (os.c section 9), set at creation */
  prd_maglist_t dp_full, dp_empty;
  uint64_t dp_rounds;            /* objects in the full list's magazines */
  const prd_magtype_t *dp_magtype;   /* the size new magazines get */
  const prd_magtype_t *dp_mt_floor;  /* the largest row a rule other than Prudence's set */
  _Atomic uint64_t dp_contention;    /* failed try-locks (counted before blocking) */
  uint64_t dp_contention_prev;   /* at the last interval update */
  uint32_t dp_burst_n;           /* contended acquisitions since dp_burst_ns (magazine.c §8) */
  uint64_t dp_burst_ns;          /* when the current burst window started */
  uint64_t dp_resizes;
  uint64_t dp_alloc_visits, dp_alloc_misses;   /* CPU-layer alloc misses; of those, no full */
  uint64_t dp_free_visits, dp_free_misses;     /* CPU-layer free misses; of those, no empty */
  uint64_t dp_to_slab_allocs, dp_to_slab_frees; /* objects that went on to the slab layer */
  uint64_t dp_dead_alloc_hits, dp_dead_free_hits;   /* counters of threads that exited */
  uint64_t dp_dead_pcnt[PRD_PC_NCOUNTERS];   /* their Prudence counters, and the depot's own */
  /* Prudence's latent magazines parked in the depot (magazine.c section 13, defer.c section
   * 4): latent generations that a full latent cache handed over whole, each tagged with its
   * grace-period state (mag_gp) and count (mag_nlat); oldest first, taken by an allocation
   * miss once safe */
  prd_mag_t *dp_lat_head, *dp_lat_tail;
  uint64_t dp_lat_mags, dp_lat_rounds;   /* on the list now */
  uint64_t dp_lat_puts, dp_lat_gets;     /* handed over; taken back as loaded magazines */
  uint64_t dp_lat_gets_prev;             /* dp_lat_gets at the last interval's update */
  bool dp_lat_idle;                      /* that interval took none back: the reap may */
  uint32_t dp_lat_spare_min;  /* the fewest safe ones a get left behind since the last decay
                               * pass (UINT32_MAX: no get), which the next one takes */
} prd_depot_t;

/* One thread's CPU cache of one object cache (seed 004's per-CPU cache, per thread here).
 * The owner reads and writes it without a lock (cc_busy set around each lockless operation);
 * its slow path, reapers and statistics take tc_lock.  The first cache line is the magazine
 * layer's hit path; the second holds Prudence's latent cache (defer.c section 2): two latent
 * generations, each a magazine tagged with one grace-period state. */
typedef struct prd_cpu_cache {
  /* aligned: 4 whole cache lines, so an entry never straddles a line (and the hit path
   * indexes the array by a shift) */
  _Alignas(64) _Atomic uint32_t cc_busy;      /* owner inside a lockless operation (the handshake) */
  uint32_t cc_magsize;           /* capacity of cc_loaded (0: no loaded magazine) */
  /* one word for the rounds in cc_loaded (cc_rounds: bits 0..15, at most PRD_MAG_MAX_ROUNDS)
   * and the allocation hits not yet folded into cc_alloc_hits (bits 16..63), so that an
   * allocation hit takes its round and counts itself with one add of 0xffff, and a free hit
   * adds its round with one add of 1 (magazine.h PRD__MAG_POP / PRD__MAG_PUSH).  cc_rounds
   * is the word's low half-word (little-endian, asserted below): loads and stores of it leave
   * the count alone.  Owner-only writes (or a visitor with tc_lock while the owner is out),
   * read relaxed */
  union {
    _Atomic uint64_t cc_rw;
    _Atomic uint16_t cc_rounds;
  };
  prd_mag_t *cc_loaded;
  prd_mag_t *cc_previous;
  _Atomic uint64_t cc_alloc_hits;    /* the folded allocation hits (prd__mag_alloc_hits) */
  /* the free hits are not counted one by one: they are cc_alloc_hits + cc_rounds + this
   * (mod 2^64, magazine.h prd__mag_free_hits), since a counted pop takes a round and a free
   * hit adds one; every other change of cc_rounds moves this by the opposite amount
   * (prd__mag_rounds_set).  Written by the owner (tc_lock held, or inside its handshake) or a
   * visitor holding tc_lock while the owner is out, read relaxed */
  _Atomic uint64_t cc_free_base;
  uint64_t cc_misses;            /* depot visits (under tc_lock) */
  uint32_t cc_prounds;           /* rounds in cc_previous (it is always full or empty) */
  /* -- Prudence (defer.c section 3): the newer generation's first objects whose free mark
   * was tested (cc_mark_check); under tc_lock, or the owner out of its hit path */
  uint32_t cc_lat_checked;
  /* -- Prudence (defer.c): changed by the owner's deferral hit path (busy set) or under tc_lock */
  prd_mag_t *cc_lat[2];          /* latent generations: [0] older, [1] open (NULL: none yet) */
  _Atomic uint32_t cc_lat_n[2];  /* deferred objects in each */
  prd_gp_t cc_lat_gp[2];         /* each generation's grace-period state */
  uint32_t cc_lat_stop;          /* the hit path pushes while cc_lat_n[1] < this (defer.c) */
  uint32_t cc_lat_limit;         /* latent objects at most: the magazine capacity (line 39) */
  prd_gp_t cc_lat_requested;     /* the latest state this CPU cache asked the driver for */
  _Atomic uint32_t cc_want_preflush; /* lines 41-43: the maintenance job should pre-flush */
  uint32_t cc_lat_room;          /* cc_lat_limit less cc_lat_n[0] (0 if below): line 41's test */
  uint64_t cc_pf_ops;            /* allocation hits at the last pre-flush (rate, defer.c §6) */
  uint64_t cc_pf_defers;         /* deferrals at the last pre-flush */
  _Atomic uint64_t cc_pcnt[PRD_PC_NCOUNTERS];
  /* -- the thread's current slab of this cache (magazine.c section 3, slab.c section 10): a
   * hint, checked by the slab layer under cache_lock; under tc_lock */
  void *cc_own;
  uint64_t cc_idle_mark;         /* maintenance: operations seen at the last interval */
  /* -- Prudence's open generations (defer.c section 3), under tc_lock: the count at which the
   * next one closes (0: its magazine's size), and the low 32 bits of the state read when the
   * open one took its first object */
  uint32_t cc_lat_target;
  uint32_t cc_lat_opened;
} prd_cpu_cache_t;
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "cc_rounds is the low half-word of cc_rw");
_Static_assert(sizeof(prd_cpu_cache_t) == 256, "a CPU cache is 4 lines: the hit paths shift");

/* One thread's CPU caches, indexed by cache_magid; on the thread registry. */
typedef struct prd_tcache {
  uint32_t tc_ncc;               /* entries in tc_cc (written by the owner under tc_lock) */
  _Atomic uint32_t tc_steal;     /* a reaper is taking magazines: use the locked path */
  prd_cpu_cache_t *tc_cc;
  size_t tc_cc_bytes;            /* size of tc_cc's mapping */
  int64_t tc_parked;             /* bytes this thread put into depots less those it took
                                  * (under tc_lock; magazine.c section 6: the decay wake) */
  pthread_mutex_t tc_lock;
  struct prd_tcache *tc_next, *tc_prev;   /* the registry (mag_registry_lock) */
  bool tc_orphan;                /* a fork child's record of a thread that did not survive the
                                  * fork, not yet taken over (mag_registry_lock; magazine.c
                                  * section 11) */
  _Atomic bool tc_uncounted;     /* idle a whole interval: not among the threads that share
                                  * Prudence's magazine limit (magazine.c section 8) */
} prd_tcache_t;

struct prd_cache {
  /* -- identity and layout: set at creation, read-only after ----------------------------- */
  char cache_name[PRD_CACHE_NAME_MAX];
  uint32_t cache_flags;          /* PRD_CACHE_* | PRD_CF_*: one word, one test (seed 002 6) */
  uint32_t cache_chunks;         /* buffers per slab */
  /* the page map (pagemap.c section 2): the low 32 bits of this cache's slab entries (kind,
   * owner's tag byte, id; 0 for NOTOUCH caches, which have none), and the chunk as m << shift,
   * m odd, with m's inverse mod 2^32, for prd__pm_start_ok */
  uint32_t cache_pm_tag;
  uint32_t cache_pm_inv;
  uint32_t cache_pm_shift;
  /* magazine.c: the index of this cache in every thread's CPU caches (0: no magazines).  Here,
   * in the line of the fields above, and not with the depot: the hit paths of prd_cache_alloc
   * and prd_cache_free read only this line, which nothing writes after creation, while every
   * depot visit writes dp_lock's line */
  uint32_t cache_magid;
  /* magazine.c section 15: where a free buffer's free mark is, 0, PRD_MARK_NEAR or
   * PRD_MARK_FAR (with the fields above: the hit paths read it) */
  uint32_t cache_mark_off;
  size_t cache_bufsize;          /* object size asked for */
  size_t cache_align;
  size_t cache_chunksize;        /* distance between buffers */
  size_t cache_slabsize;
  size_t cache_slab_align;       /* alignment asked of the source for each slab */
  size_t cache_link_off;         /* small layout: offset of the freelist word in a buffer */
  /* The free mark's secret when the cache has the mark (magazine.c section 15), else 0: the
   * small layout's slabs write the mark into every buffer they link onto a freelist (slab.c
   * section 4), so a buffer never handed out carries it too */
  uintptr_t cache_mark_key;
  uintptr_t cache_fl_key;        /* small layout: the freelist words' key (0: stored plain,
                                  * the large layout and NOTOUCH; slab.c section 4b) */
  size_t cache_buftag_off;       /* debug: offset of the prd_buftag_t in a buffer */
  size_t cache_maxcolor;         /* largest color offset */
  uint32_t cache_bucket_shift;   /* free count - 1 >> shift = partial bucket */
  uint32_t cache_hash_shift;     /* address >> shift before masking */
  prd_ctor_fn *cache_ctor;
  prd_dtor_fn *cache_dtor;
  prd_reclaim_fn *cache_reclaim;
  void *cache_private;
  prd_vmem_t *cache_source;
  struct prd_cache *cache_bufctl_cache;   /* where bufctls come from (large layout) */

  /* -- the list of all caches: under the global cache-list lock ------------------------- */
  struct prd_cache *cache_next, *cache_prev;
  struct prd_cache *cache_node_next;      /* prd_node_cache's list (cache.c section 8): set
                                             once, before the cache is published on it */

  /* -- the slab layer: everything below is under cache_lock ------------------------------ */
  pthread_mutex_t *cache_lock;   /* on the lock pages (os.c section 9), set at creation */
  uint64_t cache_partial_map;    /* bit b: cache_partial[b] is not empty */
  size_t cache_color;            /* the next slab's color */
  prd_slab_link_t cache_full;
  prd_slab_link_t cache_free;    /* newest first: the tail is the least recently used */
  prd_slab_link_t cache_owned;   /* slabs a thread allocates from alone (slab.c section 10) */
  uint64_t cache_free_min;       /* fewest free slabs during this working-set interval */
  uint64_t cache_ws_reapable;    /* free slabs outside the working set of the last interval */
  uint64_t cache_ws_start_ns;    /* when the current interval began */
  uint64_t cache_burst_ns;       /* when free slabs were first seen past section 6's burst
                                    bound, since they last were not (0: not past it) */
  prd_slab_link_t cache_partial[PRD_SLAB_BUCKETS];
  prd_bufctl_t **cache_hash;     /* buffer -> bufctl (large layout) */
  size_t cache_hash_mask;        /* buckets - 1 */
  size_t cache_hash_count;       /* bufctls in the table */
  prd_bufctl_t *cache_hash0[PRD_HASH_INITIAL];   /* the first table, in place */
  /* statistics (prd_cache_stats) */
  uint64_t cache_allocs, cache_frees, cache_alloc_fails;
  uint64_t cache_slab_creates, cache_slab_destroys;
  uint64_t cache_nfull, cache_npartial, cache_nfree, cache_slabs_peak;
  uint64_t cache_nowned;         /* on cache_owned */
  uint64_t cache_bufs_inuse, cache_bufs_total;

  /* -- the layers above the slab layer (magazine.c, defer.c) add their fields here ------- */
  /* defer.c (Prudence).  Latent slabs: under cache_lock, with the slab fields above. */
  prd_slab_link_t cache_latent;  /* slabs with deferred buffers, by first deferral (FIFO) */
  uint64_t cache_lat_slab_objs;  /* deferred buffers in latent slabs now (stored atomically:
                                    magazine.c's depot_lat_wait reads it without the lock) */
  uint64_t cache_lat_premoves;   /* slab pre-movements (Algorithm 1 lines 52-57) */
  uint64_t cache_lat_slab_merges;/* latent-slab buffers merged back after their grace period */
  uint64_t cache_lat_safe_frees; /* deferred buffers whose grace period had ended when they
                                  * reached the slab layer: freed at once (latent_merges) */
  uint64_t cache_lat_skips;      /* refill choices that passed over a mostly deferred slab */
  prd_gp_t cache_lat_maxgp;      /* the latest state in any latent slab (OOM waits for it) */
  size_t cache_lat_words;        /* small layout: 64-bit words per latent bitmap generation */
  size_t cache_rcu_off;          /* PRD_CF_DEFERHEAD: offset of the prd_defer_head_t */
  _Atomic uint32_t cache_defer_on;   /* PRD_DEFER_* bits: which deferral paths were used */
  _Atomic uint32_t cache_want_preflush;  /* a CPU cache of this cache asked for a pre-flush */
  _Atomic uint64_t cache_defer_cbs;  /* call_rcu path: callbacks run (one writer, the worker) */
  _Atomic uint64_t cache_defer_direct;   /* deferrals that went straight to the latent slabs
                                          * (no CPU cache: no magazines, thread exiting) */
  _Atomic uint64_t cache_oom_waits;  /* grace periods waited for by the slab layer's OOM path */
  /* magazine.c, on its slab-layer paths (section 3 tier 4, mag_destroy), every mode: the
   * object cache's refills from and flushes to the slab layer (Fig. 8) */
  _Atomic uint64_t cache_slab_refills;
  _Atomic uint64_t cache_slab_flushes;
  /* magazine.c (its id, cache_magid, is with the identity above) */
  prd_depot_t cache_depot;
  /* cache.c's decay job (under cache_reap_lock): the depot's full-magazine gets and puts at
   * its last pass; unchanged at the next, the depot was idle for a whole pass */
  uint64_t cache_decay_depot;
  uint64_t cache_grow_depot;     /* its allocation misses and tagged moves at cache.c's last
                                    growth reap */
  uint64_t cache_grow_moves;     /* its magazine moves then (depot_idle) */
  bool cache_grow_left;          /* that reap has more of its depot to empty (cache_reap_lock) */
  uint64_t cache_grow_first;     /* the mark of the first of those reaps since it last
                                    allocated ... */
  uint64_t cache_grow_given;     /* ... and the bytes they gave back since */
  uint64_t cache_grow_used;      /* the last mark at which it had allocated */
  uint64_t cache_grow_kept;      /* not 0: its class came back before the growth could take
                                    the bytes those reaps gave (this many): they leave its
                                    depot alone (cache.c section 4) */
};

/* One cache as the statistics printers see it (copied, then printed with no lock held). */
typedef struct prd__cache_snap {
  prd_cache_stats_t cs_stats;
  bool cs_internal;              /* one of the slab layer's own caches */
} prd__cache_snap_t;

/* ---- defer.c (Prudence, seed 001 §4) ------------------------------------------------------ */
#define PRD_DEFER_LATENT 0x1   /* Prudence deferrals were made (statistics: oc_* fields) */
#define PRD_DEFER_CALLRCU 0x2  /* call_rcu deferrals were made: destroy runs prd_rcu_barrier */
/* The head the call_rcu path (PRD_CACHE_OBLIVIOUS, debug caches) writes after a buffer. */
typedef struct prd_defer_head {
  struct prd_rcu_head dh_head;
  /* while queued: the cache's address XOR the head's XOR the free mark's secret, so that no
   * value a program leaves in the chunk reads as a queued head (defer.c); 0 otherwise */
  uintptr_t dh_cache;
} prd_defer_head_t;

#endif
