/*
 * debug.c: debugging of object caches (Bonwick 1994, seed 002 §6; libumem's names and
 * patterns).  Its reports go through report.c.
 *
 * 1. Where.  The front end (cache.c) tests one word (cache_flags & PRD_CF_DEBUG) on its fast
 *    paths and calls prd__debug_alloc when an object leaves the cache for the user and
 *    prd__debug_free when it comes back, from whichever layer serves it (defer.c calls the
 *    deferred forms).  Every buffer-debugging cache uses the
 *    large layout: its bufctls are external and all in the hash table, so every free is
 *    looked up (freed-address verification, 002 §6.2, "the large-object threshold set to
 *    zero") and no freelist word lives in the buffer, which the patterns may then cover.
 *    bc_dstate is the buffer's state as the user sees it (allocated or not), kept apart from
 *    the slab layer's bc_flags so that a layer in front (magazines) keeps the checks exact.
 *    The debug state and the audit log change under the cache's lock; buffer contents are
 *    checked and filled outside it, by the thread that owns the buffer at that moment.
 * 2. Patterns (002 §6.3): a free buffer holds 0xdeadbeef; allocation checks it (a difference
 *    is reported with its offset and both values), fills 0xbaddcafe and then constructs.
 *    With patterns on, construction happens on every allocation and destruction on every
 *    free, since a freed buffer's contents are the pattern (PRD_CF_SLABCTOR is off); the
 *    same with page-per-buffer (section 6), since a free buffer's pages are inaccessible.
 * 3. Redzones (002 §6.4): the bytes from the object's end to the next 8-byte boundary hold
 *    0xbb and a tag after them holds 0xfeedfacefeedface and the bufctl's address (libumem's
 *    buftag); free checks both, so even a one-byte overrun of an odd-sized object is seen.
 * 4. Auditing (002 §6.1): each bufctl carries a ring of the buffer's last PRD_AUDIT_TX
 *    transactions (thread, time, slab, backtrace() stack of PRD_AUDIT_DEPTH frames); every
 *    report on a buffer prints them, newest first, as 002 §6.8.  Frames print as
 *    symbol+offset where dladdr knows the symbol; what dladdr said of an address is kept
 *    (sym_memo), since a leak report's thousands of stacks share their call sites.
 * 5. Synchronous unmapping (002 §6.5): a slab freed by an UNMAP cache is decommitted and made
 *    inaccessible at once, and held out of its source arena in a quarantine of the last
 *    PRD_UNMAP_QUARANTINE slabs (so a stale access faults for a while even though the
 *    arena, not the kernel, owns the address range); the oldest goes back (made accessible)
 *    when the quarantine is full or its cache is destroyed, with dbg_qlock dropped (the
 *    source's free may take locks that fork.c's order puts before it); a destroy waits for
 *    the releases of its slabs that other threads have begun (dbg_releasing).
 *    Every page protection these features need is checked (dbg_protect): one that fails (the
 *    kernel's limit on mappings) ends the process with a report, as the feature cannot go on.
 * 6. Page-per-buffer (002 §6.6): each buffer starts a page and is followed by an
 *    inaccessible guard page; a free buffer's pages are inaccessible too, so use after free
 *    and overruns past the page fault at the faulting instruction.
 * 7. Leaks (002 §6.7): prd_leak_report (cache.c) walks every cache's allocated buffers and
 *    this file prints each (prd__debug_live_buf); with auditing, its age and allocation stack,
 *    and the young ones are skipped.  A cache destroyed with buffers allocated lists them so.
 * 8. Layering.  This file is buffer-level debugging and sits below the slab layer: the slab
 *    layer calls it when a debugging cache's slab is made or destroyed (section 6's guard
 *    pages, section 2's first fill, the tags of section 3), to quarantine a freed slab
 *    (section 5) and to report a bad free.  It knows no list of caches and walks no slab: it
 *    finds a buffer's bufctl with the slab layer's inline hash lookup (internal.h), and what
 *    walks caches or slabs lives in the front end above it (cache.c: the leak report, the
 *    live-buffer list at destroy, purging magazines before a leak walk).  One hook enters the
 *    front end: the stray-pointer hook (prd__debug_set_locate, set by cache.c at its first
 *    use), which finds, for a bad free of a pointer that starts no buffer, the buffer of its
 *    cache that holds it or another cache that does; without it the report says only "not a
 *    buffer of this cache".  A constructor that fails in prd__debug_alloc hands the buffer
 *    back to the caller, which frees it to the slab layer.
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* ==== debugging of object caches ========================================================== */
#define PRD_PATTERN_FREE     0xdeadbeefu          /* freed memory (002 §6.3) */
#define PRD_PATTERN_UNINIT   0xbaddcafeu          /* allocated, not yet initialized */
#define PRD_REDZONE_PATTERN  0xfeedfacefeedfaceull /* the guard word after a buffer */
#define PRD_REDZONE_BYTE     0xbb                 /* the bytes between object end and tag */
#define PRD_UNMAP_QUARANTINE 64   /* slabs held inaccessible: a stale access faults during
                                     the next 64 slab frees, while the address space held
                                     (64 slabs, decommitted) stays small */

static prd__debug_locate_fn *_Atomic dbg_locate;   /* cache.c's stray-pointer hook */

#define dline prd__debug_line   /* the short name this file uses */

/* One line of a report: to stderr through prd__report when fd < 0, else to fd. */
void prd__debug_line(int fd, const char *fmt, ...)
{
  char line[768];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0)
    line[0] = '\0';
  if (fd < 0)
    prd__report("%s", line);
  else
    prd__write_fmt(fd, "prudence: %s\n", line);
}

/* The page protection a debugging feature needs (pagebuf's inaccessible free buffers and
 * guard pages, unmap's quarantine), or the end of the process: a buffer left inaccessible
 * would be handed out (and fault where the program does nothing wrong), a guard or a freed
 * buffer left accessible would let what the feature is for through unseen.  So a failure,
 * whatever abort_on_error says, is reported (naming the cache and the buffer; at the kernel's
 * limit on mappings, vm.max_map_count, every buffer of pagebuf is a mapping of its own) and
 * ends the process: a safety option that cannot be honoured fails loudly. */
static void dbg_protect(prd_cache_t *cp, void *addr, size_t len, bool accessible)
{
  if ((accessible ? prd__os_protect_rw(addr, len) : prd__os_protect_none(addr, len)) == 0)
    return;
  int e = errno;
  prd__report("cache %s: cannot make %p (%zu bytes) %s: mprotect failed (errno %d%s); "
              "buffer debugging cannot go on", cp->cache_name, addr, len,
              accessible ? "accessible" : "inaccessible", e,
              e == ENOMEM ? ", the kernel's limit on mappings, vm.max_map_count?" : "");
  abort();
}

static size_t dbg_user_bytes(const prd_cache_t *cp)
{
  return cp->cache_buftag_off;   /* the object rounded up to 8 bytes */
}

static size_t dbg_buf_pages(const prd_cache_t *cp)
{
  return cp->cache_chunksize - prd__os_page_size();   /* PAGEBUF: all but the guard page */
}

static void fill32(void *buf, size_t bytes, uint32_t pattern)
{
  uint32_t *w = buf;
  for (size_t i = 0; i < bytes / sizeof(uint32_t); i++)
    w[i] = pattern;
}

/* Offset of the first 32-bit word that is not `pattern`, or (size_t)-1. */
static size_t check32(const void *buf, size_t bytes, uint32_t pattern)
{
  const uint32_t *w = buf;
  for (size_t i = 0; i < bytes / sizeof(uint32_t); i++)
    if (w[i] != pattern)
      return i * sizeof(uint32_t);
  return (size_t)-1;
}

static void audit_capture(prd_audit_tx_t *tx, bool alloc)
{
  tx->tx_time_ns = prd__now_ns();
  tx->tx_thread = (uint64_t)pthread_self();
  tx->tx_slab = NULL;
  tx->tx_alloc = alloc;
  int n = backtrace(tx->tx_stack, PRD_AUDIT_DEPTH);
  tx->tx_depth = n > 0 ? (uint32_t)n : 0;
}

static void audit_record(prd_bufctl_t *bcp, prd_audit_tx_t *tx)
{
  prd_bufctl_audit_t *bca = (prd_bufctl_audit_t *)bcp;
  tx->tx_slab = bcp->bc_slab;
  bca->bca_tx[bca->bca_ntx % PRD_AUDIT_TX] = *tx;
  bca->bca_ntx++;
}

/* What dladdr said of a return address, kept: a leak report lists thousands of buffers
 * whose stacks share their call sites, and a dladdr is a search of the object's symbols (a
 * report of 3,500 buffers at a compiler's exit took 9 s in dladdr).  The name is copied (an
 * object unloaded later takes its strings with it); an address whose object was unloaded
 * and another loaded there may then show the old name.  The table is taken with a try-lock
 * (reports of two threads at once, or a fork child whose parent held it, look up without it). */
#define SYM_SLOTS 2048
#define SYM_NAME 80
static struct sym_memo {
  const void *sm_addr;           /* NULL: free slot */
  uintptr_t sm_off;              /* the address's offset from sm_name's start */
  char sm_name[SYM_NAME];        /* "" : dladdr knew nothing */
} sym_memo[SYM_SLOTS];
static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;

static void sym_resolve(const void *addr, struct sym_memo *out)
{
  Dl_info di;
  out->sm_addr = addr;
  out->sm_name[0] = '\0';
  out->sm_off = 0;
  if (dladdr(addr, &di) == 0)
    return;
  const char *name = di.dli_sname;
  const void *start = di.dli_saddr;
  if (name == NULL && di.dli_fname != NULL) {
    const char *base = strrchr(di.dli_fname, '/');
    name = base ? base + 1 : di.dli_fname;
    start = di.dli_fbase;
  }
  if (name == NULL)
    return;
  snprintf(out->sm_name, sizeof(out->sm_name), "%s", name);
  out->sm_off = (uintptr_t)((const char *)addr - (const char *)start);
}

static void sym_lookup(const void *addr, struct sym_memo *out)
{
  if (pthread_mutex_trylock(&sym_lock) != 0) {
    sym_resolve(addr, out);
    return;
  }
  size_t h = ((uintptr_t)addr >> 2) * 0x9e3779b97f4a7c15ull >> 53;   /* 11 bits */
  for (size_t k = 0; k < 8; k++) {
    struct sym_memo *m = &sym_memo[(h + k) % SYM_SLOTS];
    if (m->sm_addr == addr) {
      *out = *m;
      pthread_mutex_unlock(&sym_lock);
      return;
    }
    if (m->sm_addr == NULL) {
      sym_resolve(addr, m);
      *out = *m;
      pthread_mutex_unlock(&sym_lock);
      return;
    }
  }
  pthread_mutex_unlock(&sym_lock);   /* a full neighbourhood: not kept */
  sym_resolve(addr, out);
}

static void print_frames(int fd, void *const *stack, uint32_t depth)
{
  for (uint32_t i = 1; i < depth; i++) {   /* frame 0 is audit_capture's caller's call */
    struct sym_memo m;
    sym_lookup(stack[i], &m);
    if (m.sm_name[0] != '\0')
      dline(fd, "    %s+%#lx", m.sm_name, (unsigned long)m.sm_off);
    else
      dline(fd, "    %p", stack[i]);
  }
}

static void print_tx(int fd, const prd_cache_t *cp, const prd_audit_tx_t *tx, uint64_t now)
{
  dline(fd, "  %s thread=%#llx time=T-%.6f slab=%p cache: %s", tx->tx_alloc ? "alloc" : "free",
        (unsigned long long)tx->tx_thread, (double)(now - tx->tx_time_ns) / 1e9, tx->tx_slab,
        cp->cache_name);
  print_frames(fd, tx->tx_stack, tx->tx_depth);
}

/* "previous transactions on buffer ...", newest first (002 §6.8).  cache_lock held. */
static void print_history(int fd, const prd_cache_t *cp, const void *buf, prd_bufctl_t *bcp)
{
  if (bcp == NULL || !(cp->cache_flags & PRD_CACHE_AUDIT))
    return;
  prd_bufctl_audit_t *bca = (prd_bufctl_audit_t *)bcp;
  uint64_t now = prd__now_ns();
  uint32_t n = PRD_MIN(bca->bca_ntx, (uint32_t)PRD_AUDIT_TX);
  dline(fd, "previous transactions on buffer %p:", buf);
  for (uint32_t k = 0; k < n; k++)
    print_tx(fd, cp, &bca->bca_tx[(bca->bca_ntx - 1 - k) % PRD_AUDIT_TX], now);
  if (bca->bca_ntx > PRD_AUDIT_TX)
    dline(fd, "  (%u earlier transactions not kept)", bca->bca_ntx - PRD_AUDIT_TX);
}

/* The lines every buffer report ends with: the buffer, its bufctl, its history. */
static void report_buffer(prd_cache_t *cp, const void *buf, prd_bufctl_t *bcp)
{
  dline(-1, "buffer=%p bufctl=%p cache: %s", buf, (void *)bcp, cp->cache_name);
  pthread_mutex_lock(cp->cache_lock);
  print_history(-1, cp, buf, bcp);
  pthread_mutex_unlock(cp->cache_lock);
}

void prd__debug_cache_init(prd_cache_t *cp)
{
  if (cp->cache_flags & PRD_CACHE_AUDIT) {
    /* backtrace() loads its unwinder (and may allocate) on first use: do it here, not in
     * the middle of an allocation */
    void *frames[2];
    (void)backtrace(frames, 2);
  }
}

void prd__debug_slab_create(prd_cache_t *cp, prd_slab_t *sp)
{
  size_t page = prd__os_page_size();
  prd_bufctl_t *heads[2] = { sp->slab_head, sp->slab_fresh };
  for (int h = 0; h < 2; h++)
    for (prd_bufctl_t *bcp = heads[h]; bcp != NULL; bcp = bcp->bc_next) {
      char *buf = bcp->bc_addr;
      bcp->bc_dstate = 0;
      if (cp->cache_flags & PRD_CF_BUFTAG) {
        prd_buftag_t *bt = (prd_buftag_t *)(buf + cp->cache_buftag_off);
        bt->bt_redzone = PRD_REDZONE_PATTERN;
        bt->bt_bufctl = bcp;
      }
      if (cp->cache_flags & PRD_CACHE_PATTERNS)
        fill32(buf, dbg_user_bytes(cp), PRD_PATTERN_FREE);
      if (cp->cache_flags & PRD_CACHE_PAGEBUF) {
        dbg_protect(cp, buf + dbg_buf_pages(cp), page, false);   /* the guard page */
        dbg_protect(cp, buf, dbg_buf_pages(cp), false);          /* free: inaccessible */
      }
    }
}

void prd__debug_slab_destroy(prd_cache_t *cp, prd_slab_t *sp)
{
  if (cp->cache_flags & PRD_CACHE_PAGEBUF)
    dbg_protect(cp, sp->slab_base, cp->cache_slabsize, true);
}

void *prd__debug_alloc(prd_cache_t *cp, void *buf, int flags)
{
  uint32_t f = cp->cache_flags;
  prd_audit_tx_t tx;
  if (f & PRD_CACHE_AUDIT)
    audit_capture(&tx, true);
  pthread_mutex_lock(cp->cache_lock);
  prd_bufctl_t *bcp = prd__slab_hash_find(cp, buf);
  PRD_ASSERT(bcp != NULL && bcp->bc_dstate == 0);
  bcp->bc_dstate = PRD_BC_ALLOC;
  if (f & PRD_CACHE_AUDIT)
    audit_record(bcp, &tx);
  pthread_mutex_unlock(cp->cache_lock);

  if (f & PRD_CACHE_PAGEBUF)
    dbg_protect(cp, buf, dbg_buf_pages(cp), true);
  if (f & PRD_CACHE_PATTERNS) {
    size_t off = check32(buf, dbg_user_bytes(cp), PRD_PATTERN_FREE);
    if (off != (size_t)-1) {
      dline(-1, "cache %s: buffer modified after being freed", cp->cache_name);
      dline(-1, "modification occurred at offset %#zx (%#x replaced by %#x)", off,
            PRD_PATTERN_FREE, ((const uint32_t *)buf)[off / sizeof(uint32_t)]);
      report_buffer(cp, buf, bcp);
      prd__report_done();
    }
    fill32(buf, dbg_user_bytes(cp), PRD_PATTERN_UNINIT);
  }
  if (f & PRD_CF_BUFTAG) {
    memset((char *)buf + cp->cache_bufsize, PRD_REDZONE_BYTE,
           cp->cache_buftag_off - cp->cache_bufsize);
    prd_buftag_t *bt = (prd_buftag_t *)((char *)buf + cp->cache_buftag_off);
    bt->bt_redzone = PRD_REDZONE_PATTERN;
    bt->bt_bufctl = bcp;
  }
  if (!(f & PRD_CF_SLABCTOR) && cp->cache_ctor != NULL &&
      cp->cache_ctor(buf, cp->cache_private, flags) != 0) {
    /* the constructor failed: the buffer goes back as it came */
    pthread_mutex_lock(cp->cache_lock);
    bcp->bc_dstate = 0;
    pthread_mutex_unlock(cp->cache_lock);
    if (f & PRD_CACHE_PATTERNS)
      fill32(buf, dbg_user_bytes(cp), PRD_PATTERN_FREE);
    if (f & PRD_CACHE_PAGEBUF)
      dbg_protect(cp, buf, dbg_buf_pages(cp), false);
    return NULL;   /* the caller frees it to the slab layer and counts the failure */
  }
  return buf;
}

/* A report of `what` (a free, a deferred free) of buffer buf whose state says `why`, with
 * the buffer's record (report_buffer); no lock held. */
static void dbg_buf_report(prd_cache_t *cp, void *buf, prd_bufctl_t *bcp, const char *what,
                           const char *why)
{
  dline(-1, "cache %s: %s of buffer %p: %s", cp->cache_name, what, buf, why);
  report_buffer(cp, buf, bcp);
  prd__report_done();
}

/* A deferred free of a debugging cache (defer.c): the state checks now, so that a buffer
 * deferred twice or never allocated is reported at the call; the patterns wait for the
 * grace period (readers may still read the buffer), when the callback calls
 * prd__debug_free_deferred.  0, or -1 after a report. */
int prd__debug_defer(prd_cache_t *cp, void *buf)
{
  pthread_mutex_lock(cp->cache_lock);
  prd_bufctl_t *bcp = prd__slab_hash_find(cp, buf);
  if (bcp == NULL || bcp->bc_dstate != PRD_BC_ALLOC) {
    bool deferred = bcp != NULL && bcp->bc_dstate == PRD_BC_DEFERRED;
    pthread_mutex_unlock(cp->cache_lock);
    if (deferred)
      dbg_buf_report(cp, buf, bcp, "deferred free", "deferred twice (it is deferred already)");
    else
      prd__debug_bad_free(cp, buf, bcp, true);
    return -1;
  }
  bcp->bc_dstate = PRD_BC_DEFERRED;
  pthread_mutex_unlock(cp->cache_lock);
  return 0;
}

static int debug_free(prd_cache_t *cp, void *buf, uint32_t expect);

bool prd__debug_allocated(prd_cache_t *cp, const void *buf)
{
  pthread_mutex_lock(cp->cache_lock);
  prd_bufctl_t *bcp = prd__slab_hash_find(cp, buf);
  bool live = bcp != NULL && bcp->bc_dstate == PRD_BC_ALLOC;
  pthread_mutex_unlock(cp->cache_lock);
  return live;
}

int prd__debug_free(prd_cache_t *cp, void *buf)
{
  return debug_free(cp, buf, PRD_BC_ALLOC);
}

int prd__debug_free_deferred(prd_cache_t *cp, void *buf)
{
  return debug_free(cp, buf, PRD_BC_DEFERRED);
}

static int debug_free(prd_cache_t *cp, void *buf, uint32_t expect)
{
  uint32_t f = cp->cache_flags;
  prd_audit_tx_t tx;
  if (f & PRD_CACHE_AUDIT)
    audit_capture(&tx, false);
  pthread_mutex_lock(cp->cache_lock);
  prd_bufctl_t *bcp = prd__slab_hash_find(cp, buf);
  if (bcp == NULL || bcp->bc_dstate != expect) {
    bool deferred = bcp != NULL && bcp->bc_dstate == PRD_BC_DEFERRED;
    pthread_mutex_unlock(cp->cache_lock);
    if (deferred)   /* a free of a buffer whose deferral waits for its grace period */
      dbg_buf_report(cp, buf, bcp, "free", "it is deferred (given to a deferred free, whose "
                     "grace period has not ended; not freed)");
    else
      prd__debug_bad_free(cp, buf, bcp, expect == PRD_BC_DEFERRED);
    return -1;
  }
  bcp->bc_dstate = 0;
  if (f & PRD_CACHE_AUDIT)
    audit_record(bcp, &tx);
  pthread_mutex_unlock(cp->cache_lock);

  if (f & PRD_CF_BUFTAG) {
    const unsigned char *b = buf;
    size_t bad = (size_t)-1;
    uint64_t found = 0, expected = PRD_REDZONE_BYTE;
    for (size_t i = cp->cache_bufsize; i < cp->cache_buftag_off && bad == (size_t)-1; i++)
      if (b[i] != PRD_REDZONE_BYTE) {
        bad = i;
        found = b[i];
      }
    prd_buftag_t *bt = (prd_buftag_t *)((char *)buf + cp->cache_buftag_off);
    if (bad == (size_t)-1 && bt->bt_redzone != PRD_REDZONE_PATTERN) {
      bad = cp->cache_buftag_off;
      found = bt->bt_redzone;
      expected = PRD_REDZONE_PATTERN;
    }
    if (bad == (size_t)-1 && bt->bt_bufctl != bcp) {
      bad = cp->cache_buftag_off + offsetof(prd_buftag_t, bt_bufctl);
      found = (uint64_t)(uintptr_t)bt->bt_bufctl;
      expected = (uint64_t)(uintptr_t)bcp;
    }
    if (bad != (size_t)-1) {
      dline(-1, "cache %s: redzone violation: write past the end of buffer %p (size %zu)",
            cp->cache_name, buf, cp->cache_bufsize);
      dline(-1, "at offset %#zx (%#llx replaced by %#llx)", bad, (unsigned long long)expected,
            (unsigned long long)found);
      report_buffer(cp, buf, bcp);
      prd__report_done();
    }
  }
  if (!(f & PRD_CF_SLABCTOR) && cp->cache_dtor != NULL)
    cp->cache_dtor(buf, cp->cache_private);
  if (f & PRD_CACHE_PATTERNS)
    fill32(buf, dbg_user_bytes(cp), PRD_PATTERN_FREE);
  if (f & PRD_CACHE_PAGEBUF)
    dbg_protect(cp, buf, dbg_buf_pages(cp), false);
  return 0;
}

/* ---- bad frees ------------------------------------------------------------------------------ */
void prd__debug_set_locate(prd__debug_locate_fn *fn)
{
  atomic_store_explicit(&dbg_locate, fn, memory_order_release);
}

static void dbg_double_free(prd_cache_t *cp, const void *buf, prd_bufctl_t *bcp, bool deferral)
{
  dline(-1, "cache %s: %s of buffer %p (it is already free)", cp->cache_name,
        deferral ? "deferred free" : "double free", buf);
  report_buffer(cp, buf, bcp);
  prd__report_done();
}

void prd__debug_bad_free(prd_cache_t *cp, const void *buf, prd_bufctl_t *bcp, bool deferral)
{
  const char *op = deferral ? "deferred free" : "free";
  if (bcp != NULL) {
    dbg_double_free(cp, buf, bcp, deferral);
    return;
  }
  /* where the pointer lies: cache.c looks in the slabs and the caches (section 8) */
  prd__debug_locate_fn *locate = atomic_load_explicit(&dbg_locate, memory_order_acquire);
  char owner[PRD_CACHE_NAME_MAX] = { 0 };
  prd_bufctl_t *sbcp = NULL;
  char *start = locate != NULL ? locate(cp, buf, &sbcp, owner) : NULL;
  if (start == buf) {   /* a buffer of this cache that is free (no bufctl in the hash) */
    dbg_double_free(cp, buf, sbcp, deferral);
    return;
  }
  if (start != NULL) {
    dline(-1, "cache %s: bad %s of %p: not the start of a buffer (offset %#zx into buffer %p)",
          cp->cache_name, op, buf, (size_t)((const char *)buf - start), (void *)start);
    report_buffer(cp, start, sbcp);
    prd__report_done();
    return;
  }
  if (owner[0] != '\0')
    dline(-1, "cache %s: bad %s of %p: it is a buffer of cache %s, not of this cache",
          cp->cache_name, op, buf, owner);
  else
    dline(-1, "cache %s: bad %s of %p: not a buffer of this cache (nor of another: a foreign "
          "pointer, or a buffer freed already whose slab has been given back)",
          cp->cache_name, op, buf);
  prd__report_done();
}

/* ---- live buffers and leaks ----------------------------------------------------------------- */
/* One buffer of a live-buffer report (cache.c walks the caches and their slabs). */
void prd__debug_live_buf(void *arg, prd_cache_t *cp, void *buf, prd_bufctl_t *bcp)
{
  prd__debug_live_t *lc = arg;
  const prd_audit_tx_t *last = NULL;
  if (bcp != NULL && (cp->cache_flags & PRD_CACHE_AUDIT)) {
    prd_bufctl_audit_t *bca = (prd_bufctl_audit_t *)bcp;
    if (bca->bca_ntx > 0)
      last = &bca->bca_tx[(bca->bca_ntx - 1) % PRD_AUDIT_TX];
    /* a buffer allocated after the report took its time (another thread, during the walk)
     * is younger than any age: not a leak, and its age is not negative */
    if (last != NULL && (last->tx_time_ns >= lc->lc_now ||
                         lc->lc_now - last->tx_time_ns < lc->lc_min_age_ns))
      return;
  }
  lc->lc_seen++;
  if (lc->lc_listed >= lc->lc_limit)
    return;
  lc->lc_listed++;
  if (last != NULL) {
    dline(lc->lc_fd, "cache %s: buffer=%p bufctl=%p allocated %.6f s ago by thread %#llx:",
          cp->cache_name, buf, (void *)bcp, (double)(lc->lc_now - last->tx_time_ns) / 1e9,
          (unsigned long long)last->tx_thread);
    print_frames(lc->lc_fd, last->tx_stack, last->tx_depth);
  } else {
    dline(lc->lc_fd, "cache %s: buffer=%p bufctl=%p still allocated (no audit: age and stack "
          "unknown)", cp->cache_name, buf, (void *)bcp);
  }
}

/* ---- synchronous unmapping: the quarantine -------------------------------------------------- */
static struct {
  prd_cache_t *q_cache;
  void *q_addr;
  size_t q_size;
} dbg_quarantine[PRD_UNMAP_QUARANTINE];
static unsigned dbg_qnext;
static pthread_mutex_t dbg_qlock = PTHREAD_MUTEX_INITIALIZER;
/* The quarantined slabs being given back now, with dbg_qlock dropped: their caches, so that a
 * cache's destroy waits for the releases of its slabs that other threads started (a slot per
 * releasing thread; a release that finds none free waits for one) */
#define DBG_RELEASING 64
static prd_cache_t *dbg_releasing[DBG_RELEASING];
static pthread_cond_t dbg_qcond = PTHREAD_COND_INITIALIZER;   /* a release has ended */

/* Gives a quarantined slab back to its cache's source, with no lock of this file held: the
 * source's free may go on into other caches and arenas (an importing arena's ffunc, a quantum
 * cache's magazine and slab locks), all of which fork.c's order puts before dbg_qlock. */
static void quarantine_release(prd_cache_t *cp, void *addr, size_t size)
{
  dbg_protect(cp, addr, size, true);
  prd_vmem_xfree(cp->cache_source, addr, size);
}

static bool releasing(const prd_cache_t *cp)
{
  for (unsigned k = 0; k < DBG_RELEASING; k++)
    if (dbg_releasing[k] == cp)
      return true;
  return false;
}

void prd__debug_unmap(prd_cache_t *cp, void *base, size_t size)
{
  (void)prd__os_decommit(base, size);
  dbg_protect(cp, base, size, false);
  pthread_mutex_lock(&dbg_qlock);
  unsigned slot = 0;
  for (;;) {   /* a slot to announce the release in: the ring's entry is taken only with one */
    while (slot < DBG_RELEASING && dbg_releasing[slot] != NULL)
      slot++;
    if (slot < DBG_RELEASING)
      break;
    prd__cond_wait(&dbg_qcond, &dbg_qlock);
    slot = 0;
  }
  unsigned i = dbg_qnext;
  dbg_qnext = (i + 1) % PRD_UNMAP_QUARANTINE;
  prd_cache_t *ocp = dbg_quarantine[i].q_cache;
  void *oaddr = dbg_quarantine[i].q_addr;
  size_t osize = dbg_quarantine[i].q_size;
  dbg_quarantine[i].q_cache = cp;
  dbg_quarantine[i].q_addr = base;
  dbg_quarantine[i].q_size = size;
  dbg_releasing[slot] = ocp;   /* ocp's destroy waits for this release (NULL: none) */
  pthread_mutex_unlock(&dbg_qlock);
  if (ocp != NULL) {
    quarantine_release(ocp, oaddr, osize);
    pthread_mutex_lock(&dbg_qlock);
    dbg_releasing[slot] = NULL;
    pthread_cond_broadcast(&dbg_qcond);
    pthread_mutex_unlock(&dbg_qlock);
  }
}

/* The cache is being destroyed: its quarantined slabs go back to its source, after the
 * releases of its slabs that other threads started have ended, before its source may go. */
void prd__debug_unmap_flush(prd_cache_t *cp)
{
  struct { void *addr; size_t size; } mine[PRD_UNMAP_QUARANTINE];
  unsigned n = 0;
  pthread_mutex_lock(&dbg_qlock);
  for (unsigned i = 0; i < PRD_UNMAP_QUARANTINE; i++)
    if (dbg_quarantine[i].q_cache == cp) {
      mine[n].addr = dbg_quarantine[i].q_addr;
      mine[n].size = dbg_quarantine[i].q_size;
      n++;
      dbg_quarantine[i].q_cache = NULL;
    }
  while (releasing(cp))
    prd__cond_wait(&dbg_qcond, &dbg_qlock);
  pthread_mutex_unlock(&dbg_qlock);
  for (unsigned k = 0; k < n; k++)
    quarantine_release(cp, mine[k].addr, mine[k].size);
}

/* ---- fork (called by fork.c's pthread_atfork handlers, after the depot locks) -------------- */
PRD__FORK_LINK();
void prd__debug_fork_prepare(void)
{
  pthread_mutex_lock(&dbg_qlock);
}

void prd__debug_fork_release(void)
{
  pthread_mutex_unlock(&dbg_qlock);
}

/* The child (after fork_release): the threads that were giving quarantined slabs back are
 * gone, their slabs with them; no destroy may wait for them. */
void prd__debug_fork_child(void)
{
  pthread_cond_t cinit = PTHREAD_COND_INITIALIZER;
  dbg_qcond = cinit;
  memset(dbg_releasing, 0, sizeof(dbg_releasing));
}
