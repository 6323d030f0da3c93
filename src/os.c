/*
 * os.c: what the library asks of the kernel: pages, and the clock.  The only file that calls
 * mmap, munmap, madvise or mprotect.
 *
 * 1. Contract.  Every function takes page-multiple sizes and page-aligned addresses (the
 *    layers above guarantee it; Debug builds assert it).  Mappings are anonymous, private,
 *    read-write and zero-filled.  Failure returns NULL (or -1) with errno ENOMEM, never aborts:
 *    running out of memory is a result the layers above handle (vmem sleeps or fails, the
 *    slab layer reaps and retries, Prudence waits for a grace period).
 * 1b. Commit accounting.  Read-write mappings are made without MAP_NORESERVE, so the kernel's
 *    overcommit policy judges each one as it judges any program's plain mmap: under the
 *    default heuristic a single mapping larger than RAM and swap together is refused, under
 *    strict accounting anything beyond the commit limit is, and malloc(1 TiB) fails with
 *    ENOMEM instead of returning a block that no page can back.  A growth by mremap is
 *    charged the same way.  Reservations (prd__os_reserve: PROT_NONE) keep MAP_NORESERVE:
 *    they commit nothing, and the parts made usable later with mprotect stay uncharged, so an
 *    arena may reserve far more address space than it will ever use.
 * 2. Aligned mappings (2 MiB / 4 MiB blocks for the heap arena) over-map by `align` and trim
 *    the ends with munmap, so no address space stays reserved that nobody owns.
 * 3. Returning memory: prd__os_decommit uses MADV_DONTNEED, which frees the pages at once and
 *    makes them read back as zeroes (RSS drops right away; the tests read /proc/self/statm);
 *    unmap gives the address space back too.  An unmap the kernel refuses (a split past
 *    vm.max_map_count: ENOMEM) still gives the pages back, by MADV_DONTNEED, and is reported
 *    at the first refusal and then once per 1024.
 * 4. Fault injection: with the option fault_mmap=N (or PRUDENCE_FAULT_MMAP=N) every Nth call
 *    that would create a mapping fails as if the kernel had said ENOMEM, so the tests of every
 *    layer can prove that allocation failure is handled.  The counter is one relaxed atomic.
 *    prd__os_fault_move_every(N) (tests only) every Nth move (section 6), before mremap runs;
 *    prd__os_fault_unmap_every(N) (tests only) makes every Nth unmap fail as munmap does,
 *    EINVAL and the mapping left in place, so tests can prove that a free whose unmap fails
 *    reports it and keeps the caller's errno.
 * 5. Accounting: bytes mapped now and failed mappings, for statistics and tests.
 * 6. Resizing a mapping (malloc's huge blocks, realloc): mremap, in place or moved, so the
 *    kernel moves page-table entries instead of the caller copying the bytes; a growth counts
 *    as a mapping for fault injection.  prd__os_move moves a mapping onto one the caller made
 *    (MREMAP_FIXED over its own placeholder), so the caller knows the destination, and can
 *    prepare for it, before anything moves; a move that fails gives the placeholder back.
 * 7. The clock: prd__now_ns reads CLOCK_MONOTONIC in nanoseconds for every layer's intervals
 *    and ages (working sets, maintenance and grace-period pacing, snapshot times, debug
 *    records).  Monotonic, because an interval must not jump when the wall clock is set; one
 *    clock for the library, so that times taken by different layers compare.  vDSO call, no
 *    lock, safe inside the allocator.
 * 8. Cancellation (prd__cancel_off / prd__cancel_on, internal.h).  POSIX lets a thread be
 *    cancelled inside the functions it lists as cancellation points (nanosleep,
 *    pthread_cond_wait and timedwait, write, open, read, close ...), and glibc unwinds it from
 *    there with whatever it holds; malloc and free are not among them, and glibc's never act
 *    on a request.  The library calls such functions while it holds its own locks (a bounded
 *    wait for a grace period sleeps under gp_lock, an arena waits on vm_cv under vm_lock, a
 *    report writes under the lock of what it reports), so every such call runs with
 *    cancellation disabled, and no function of the library is a cancellation point: a
 *    pending request is acted on at the thread's next cancellation point outside it, as
 *    with glibc's malloc.  The library's own threads disable it for good at their start
 *    (thread.c).  pthread_setcancelstate changes a word of the thread's own descriptor; only
 *    slow paths (waits, sleeps, writes) pay it.
 * 9. Locks of short critical sections (prd__os_mutex_new_short): a magazine depot's lists
 *    and a slab cache's lists are held for a few pointer operations, and under many threads
 *    they are contended.  A normal mutex then puts each waiter to sleep in the kernel and
 *    wakes it when the lock is free: microseconds per hand-over, a few hundred thousand a
 *    second whatever the core count, while the holder itself needs well under a
 *    microsecond (docs/benchmarks.md, "On 16 cores": the deferral and batch free were flat
 *    from 2 to 16 threads).  glibc's adaptive mutex first retries the lock a bounded number
 *    of times (its tunable glibc.pthread.mutex_spin_count, 100 by default) and sleeps only
 *    then, so a waiter on a held-briefly lock takes it as soon as it is free, and one whose
 *    holder was preempted sleeps after a short spin.  Where the C library has no such kind,
 *    a normal mutex.
 *    These locks live on lock pages of their own, one per 128-byte slot (two cache lines, so
 *    that neither two locks nor a lock and the adjacent-line prefetch of another share a
 *    line), not inside the structures they guard: the fork handlers take and release every
 *    cache's and every depot's lock, and after fork() made the process's pages copy-on-write
 *    each release writes the page that holds the lock, in the parent and in the child alike.
 *    Inside a 2.5 KiB cache structure that was a page copy per lock, each costing a TLB
 *    shootdown in a multi-threaded parent; on lock pages it is one copy per 32 locks.  The
 *    pages are never unmapped (a freed slot goes on a free list for the next cache), and
 *    os_lock_lock, a leaf, guards the list and the current page: fork.c's prepare takes it
 *    after every other lock of the library (prd__os_fork_prepare), so no thread holds it
 *    across a fork.  A page that cannot be mapped fails that one creation (NULL, ENOMEM); the
 *    next creation tries again.
 * 10. Secrets (prd__os_random64): the per-process keys of the freelist words (slab.c section
 *    4b) and of the free mark (magazine.c section 15).  getrandom without blocking; where it
 *    fails (a kernel before 3.17, a seccomp filter that refuses it, a kernel that has no
 *    entropy to give yet this early in boot), the 16 random bytes the kernel gives every
 *    process at exec (getauxval(AT_RANDOM), there since 2.6.29; glibc draws its stack guard
 *    from them too), mixed with the caller's salt, so that the keys stay unguessable from
 *    outside the process.  Only where neither is there, the clock and the address space
 *    layout, reported once: docs/options.md promises a random key.
 * 11. The process-wide barrier (prd__os_membarrier): membarrier(PRIVATE_EXPEDITED), the
 *    writer's half of the magazine handshake and of the grace periods, whose other half is a
 *    compiler barrier only.  Each of the two registers it at its start
 *    (prd__os_membarrier_register: the query, the registration, and the barrier itself tried
 *    once, since a seccomp filter may let the first two through and refuse the command; any
 *    refusal there means fence mode, before anything relies on the barrier).  The kernel may refuse one call for want of memory (ENOMEM: the
 *    cpumask it allocates), or be interrupted; that is not a refusal for good, so such a call
 *    is tried again, 1 ms apart doubling to 64 ms, for about a second in all.  The callers
 *    cannot go on without it (a safety guarantee that cannot be kept fails loudly): they end
 *    the process on what is left, a refusal for good (EPERM from a seccomp filter installed
 *    since the registration, EINVAL) or a second of ENOMEM.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/membarrier.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static size_t os_page;
static _Atomic long os_unmap_every;      /* section 4: tests only */
static _Atomic uint64_t os_unmap_calls;
static _Atomic size_t os_mapped;
static _Atomic uint64_t os_map_calls;
static _Atomic uint64_t os_failures;

size_t prd__os_page_size(void)
{
  size_t p = __atomic_load_n(&os_page, __ATOMIC_RELAXED);
  if (prd_unlikely(p == 0)) {
    long v = sysconf(_SC_PAGESIZE);
    p = v > 0 ? (size_t)v : 4096;
    __atomic_store_n(&os_page, p, __ATOMIC_RELAXED);
  }
  return p;
}

/* True when this is the Nth call counted by `calls` (every > 0; section 4). */
static bool os_fault_nth(long every, _Atomic uint64_t *calls)
{
  if (prd_likely(every <= 0))
    return false;
  uint64_t n = atomic_fetch_add_explicit(calls, 1, memory_order_relaxed) + 1;
  return n % (uint64_t)every == 0;
}

/* True when this mapping must fail because of fault injection. */
static bool os_fault_now(void)
{
  if (!os_fault_nth(prd__opt(fault_mmap), &os_map_calls))
    return false;
  atomic_fetch_add_explicit(&os_failures, 1, memory_order_relaxed);
  return true;
}

static void *os_mmap(size_t size, int prot)
{
  PRD_ASSERT(size > 0 && size % prd__os_page_size() == 0);
  if (os_fault_now()) {
    errno = ENOMEM;
    return NULL;
  }
  /* only reservations skip the commit check (section 1b) */
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (prot == PROT_NONE ? MAP_NORESERVE : 0);
  void *p = mmap(NULL, size, prot, flags, -1, 0);
  if (p == MAP_FAILED) {
    atomic_fetch_add_explicit(&os_failures, 1, memory_order_relaxed);
    errno = ENOMEM;
    return NULL;
  }
  atomic_fetch_add_explicit(&os_mapped, size, memory_order_relaxed);
  return p;
}

bool prd__os_is_mapped(const void *addr, size_t size)
{
  uintptr_t page = prd__os_page_size();
  uintptr_t ends[2] = { (uintptr_t)addr & ~(page - 1),
                        ((uintptr_t)addr + (size ? size - 1 : 0)) & ~(page - 1) };
  unsigned char v;
  int saved = errno;
  bool ok = true;
  for (int k = 0; k < 2 && ok; k++)
    ok = mincore((void *)ends[k], 1, &v) == 0;   /* ENOMEM: not mapped */
  errno = saved;
  return ok;
}

size_t prd__os_resident(const void *addr, size_t size)
{
  size_t page = prd__os_page_size(), n = 0;
  unsigned char v[256];
  int saved = errno;
  for (size_t off = 0; off < size; off += sizeof(v) * page) {
    size_t len = PRD_MIN(size - off, sizeof(v) * page);
    if (mincore((char *)addr + off, len, v) != 0)
      break;
    for (size_t k = 0; k < (len + page - 1) / page; k++)
      n += v[k] & 1;
  }
  errno = saved;
  return n;
}

void *prd__os_map(size_t size)
{
  return os_mmap(size, PROT_READ | PROT_WRITE);
}

/* Over-map by `align`, then unmap the unaligned head and the tail. */
static void *os_map_aligned_prot(size_t size, size_t align, int prot)
{
  size_t page = prd__os_page_size();
  if (align <= page)
    return os_mmap(size, prot);
  PRD_ASSERT(PRD_ISP2(align));
  if (size + align < size) {
    errno = ENOMEM;
    return NULL;
  }
  char *raw = os_mmap(size + align, prot);
  if (raw == NULL)
    return NULL;
  char *aligned = (char *)PRD_P2ROUNDUP((uintptr_t)raw, align);
  size_t head = (size_t)(aligned - raw);
  size_t tail = align - head;
  if (head > 0)
    prd__os_unmap(raw, head);
  if (tail > 0)
    prd__os_unmap(aligned + size, tail);
  return aligned;
}

void *prd__os_map_aligned(size_t size, size_t align)
{
  return os_map_aligned_prot(size, align, PROT_READ | PROT_WRITE);
}

void *prd__os_reserve(size_t size, size_t align)
{
  return os_map_aligned_prot(size, align, PROT_NONE);
}

int prd__os_commit(void *addr, size_t size)
{
  return prd__os_protect_rw(addr, size);
}

int prd__os_decommit(void *addr, size_t size)
{
  PRD_ASSERT(PRD_IS_P2ALIGNED(addr, prd__os_page_size()));
  if (madvise(addr, size, MADV_DONTNEED) != 0)
    return -1;
  return 0;
}

void *prd__os_remap(void *addr, size_t old_size, size_t new_size, bool may_move)
{
  PRD_ASSERT(PRD_IS_P2ALIGNED(addr, prd__os_page_size()));
  PRD_ASSERT(old_size > 0 && old_size % prd__os_page_size() == 0);
  PRD_ASSERT(new_size > 0 && new_size % prd__os_page_size() == 0);
  if (new_size > old_size && os_fault_now()) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = mremap(addr, old_size, new_size, may_move ? MREMAP_MAYMOVE : 0);
  if (p == MAP_FAILED) {
    atomic_fetch_add_explicit(&os_failures, 1, memory_order_relaxed);
    errno = ENOMEM;
    return NULL;
  }
  if (new_size > old_size)
    atomic_fetch_add_explicit(&os_mapped, new_size - old_size, memory_order_relaxed);
  else
    atomic_fetch_sub_explicit(&os_mapped, old_size - new_size, memory_order_relaxed);
  return p;
}

/* A move that failed gives the caller's placeholder back (section 6).  mremap unmaps the
 * destination first and may fail after that, or fail before it: the placeholder is gone, or
 * whole (the kernel unmaps a destination whole or not at all).  A probe with
 * MAP_FIXED_NOREPLACE, which maps only into a hole, finds a hole: gone.  Else something is
 * there, the placeholder or (in the moment since the failure) another thread's new mapping
 * in the hole: it is ours, and unmapped, only if its first word still holds the cookie the
 * move wrote there, read with process_vm_readv, which fails instead of faulting on memory
 * that is not readable.  When that cannot be told (process_vm_readv refused), nothing is
 * unmapped and it is reported: unmapping another thread's memory would be far worse than
 * keeping the placeholder. */
#define OS_MOVE_COOKIE 0x9e3779b97f4a7c15ull

static uintptr_t os_move_cookie(const void *to)
{
  return (uintptr_t)to ^ (uintptr_t)OS_MOVE_COOKIE;
}

static void os_move_failed(void *to, size_t size)
{
  void *q = mmap(to, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
                 MAP_FIXED_NOREPLACE, -1, 0);
  if (q != MAP_FAILED)
    (void)munmap(q, size);   /* the hole's probe, or a kernel's hint mapped elsewhere */
  if (q == to) {   /* a hole: the kernel had unmapped the placeholder */
    atomic_fetch_sub_explicit(&os_mapped, size, memory_order_relaxed);
    return;
  }
  uintptr_t w = 0;
  struct iovec local = { &w, sizeof(w) }, remote = { to, sizeof(w) };
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (n == (ssize_t)sizeof(w) && w == os_move_cookie(to)) {
    prd__os_unmap(to, size);   /* the placeholder, whole */
  } else if (n >= 0 || errno == EFAULT) {   /* another mapping took the hole: ours is gone */
    atomic_fetch_sub_explicit(&os_mapped, size, memory_order_relaxed);
  } else {
    prd__report("os: a failed move's placeholder at %p (%zu bytes) may be left mapped "
                "(process_vm_readv: errno %d)", to, size, errno);
  }
}

static _Atomic long os_move_every;      /* section 4: tests only */
static _Atomic uint64_t os_move_calls;

int prd__os_move(void *from, size_t old_size, void *to, size_t new_size)
{
  PRD_ASSERT(PRD_IS_P2ALIGNED(from, prd__os_page_size()));
  PRD_ASSERT(PRD_IS_P2ALIGNED(to, prd__os_page_size()));
  *(volatile uintptr_t *)to = os_move_cookie(to);   /* the placeholder's, until the move */
  void *p = os_fault_nth(atomic_load_explicit(&os_move_every, memory_order_relaxed),
                         &os_move_calls)
                ? MAP_FAILED
                : mremap(from, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, to);
  if (p == MAP_FAILED) {
    atomic_fetch_add_explicit(&os_failures, 1, memory_order_relaxed);
    os_move_failed(to, new_size);
    errno = ENOMEM;
    return -1;
  }
  /* the mapping at `to` (new_size, counted when it was made) was replaced; `from` is gone */
  atomic_fetch_sub_explicit(&os_mapped, old_size, memory_order_relaxed);
  return 0;
}

/* True when this unmap must fail because of fault injection (section 4). */
static bool os_unmap_fault_now(void)
{
  if (!os_fault_nth(atomic_load_explicit(&os_unmap_every, memory_order_relaxed),
                    &os_unmap_calls))
    return false;
  errno = EINVAL;   /* what munmap says of a range it refuses */
  return true;
}

/* A refused munmap (section 3): the kernel refuses to split a mapping past vm.max_map_count
 * with ENOMEM.  The range stays mapped (its address space is lost to the process) but its
 * pages go back (MADV_DONTNEED does not split the mapping), so memory is not lost with it; the
 * first refusal is reported, then one line per 1024, not one each. */
static _Atomic uint64_t os_unmap_refused;

static PRD_COLD void os_unmap_refused_now(void *addr, size_t size, int err)
{
  int released = madvise(addr, size, MADV_DONTNEED) == 0;
  uint64_t n = atomic_fetch_add_explicit(&os_unmap_refused, 1, memory_order_relaxed) + 1;
  if (prd__report_due(n))
    prd__report("os: munmap(%p, %zu) failed (errno %d): %s; %" PRIu64 " refused so far "
                "(reported at the first and every %d)", addr, size, err,
                released ? "its pages were given back, its address space stays mapped"
                         : "it stays mapped, and MADV_DONTNEED was refused too",
                n, PRD_REPORT_EVERY);
}

void prd__os_unmap(void *addr, size_t size)
{
  PRD_ASSERT(PRD_IS_P2ALIGNED(addr, prd__os_page_size()));
  if (!os_unmap_fault_now() && munmap(addr, size) == 0)
    atomic_fetch_sub_explicit(&os_mapped, size, memory_order_relaxed);
  else
    os_unmap_refused_now(addr, size, errno);
}

int prd__os_protect_none(void *addr, size_t size)
{
  return mprotect(addr, size, PROT_NONE);
}

int prd__os_protect_ro(void *addr, size_t size)
{
  return mprotect(addr, size, PROT_READ);
}

int prd__os_protect_rw(void *addr, size_t size)
{
  if (mprotect(addr, size, PROT_READ | PROT_WRITE) != 0) {
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

void prd__os_fault_every(long n)
{
  atomic_store_explicit(&os_map_calls, 0, memory_order_relaxed);
  atomic_store_explicit(&prd__options.fault_mmap, n, memory_order_relaxed);
}

void prd__os_fault_move_every(long n)
{
  atomic_store_explicit(&os_move_calls, 0, memory_order_relaxed);
  atomic_store_explicit(&os_move_every, n, memory_order_relaxed);
}

void prd__os_fault_unmap_every(long n)
{
  atomic_store_explicit(&os_unmap_calls, 0, memory_order_relaxed);
  atomic_store_explicit(&os_unmap_every, n, memory_order_relaxed);
}

size_t prd__os_mapped_bytes(void)
{
  return atomic_load_explicit(&os_mapped, memory_order_relaxed);
}

uint64_t prd__os_map_failures(void)
{
  return atomic_load_explicit(&os_failures, memory_order_relaxed);
}

static void os_mutex_init_short(pthread_mutex_t *m)
{
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
  pthread_mutexattr_t a;
  if (pthread_mutexattr_init(&a) == 0) {
    int ok = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP) == 0 &&
             pthread_mutex_init(m, &a) == 0;
    pthread_mutexattr_destroy(&a);
    if (ok)
      return;
  }
#endif
  pthread_mutex_init(m, NULL);
}

/* Section 9's lock pages: a slot holds a mutex while in use, the free list's link when free. */
#define OS_LOCK_SLOT 128
typedef union __attribute__((aligned(OS_LOCK_SLOT))) os_lock_slot {
  pthread_mutex_t ls_mutex;
  union os_lock_slot *ls_next;
  unsigned char ls_pad[OS_LOCK_SLOT];
} os_lock_slot_t;
_Static_assert(sizeof(os_lock_slot_t) == OS_LOCK_SLOT, "a lock slot is two cache lines");

/* The first slots are static, so the library's own caches, which are made before any other,
 * never fail for want of a page. */
#define OS_LOCK_STATIC 16
static os_lock_slot_t os_lock_first[OS_LOCK_STATIC];
static pthread_mutex_t os_lock_lock = PTHREAD_MUTEX_INITIALIZER;
static os_lock_slot_t *os_lock_free;     /* freed slots */
static os_lock_slot_t *os_lock_next = os_lock_first;   /* the current page's first unused slot */
static os_lock_slot_t *os_lock_end = os_lock_first + OS_LOCK_STATIC;   /* and its end */

pthread_mutex_t *prd__os_mutex_new_short(void)
{
  pthread_mutex_lock(&os_lock_lock);
  os_lock_slot_t *ls = os_lock_free;
  if (ls != NULL) {
    os_lock_free = ls->ls_next;
  } else {
    if (os_lock_next == os_lock_end) {
      size_t page = prd__os_page_size();
      os_lock_slot_t *pg = prd__os_map(page);
      if (pg == NULL) {
        pthread_mutex_unlock(&os_lock_lock);
        return NULL;   /* ENOMEM: nothing remembered, the next creation maps again */
      }
      os_lock_next = pg;
      os_lock_end = pg + page / sizeof(*pg);
    }
    ls = os_lock_next++;
  }
  pthread_mutex_unlock(&os_lock_lock);
  os_mutex_init_short(&ls->ls_mutex);
  return &ls->ls_mutex;
}

void prd__os_mutex_free(pthread_mutex_t *m)
{
  if (m == NULL)
    return;
  pthread_mutex_destroy(m);
  os_lock_slot_t *ls = (os_lock_slot_t *)(void *)m;
  pthread_mutex_lock(&os_lock_lock);
  ls->ls_next = os_lock_free;
  os_lock_free = ls;
  pthread_mutex_unlock(&os_lock_lock);
}

/* fork (fork.c section 2: the last lock prepare takes) */
PRD__FORK_LINK();
void prd__os_fork_prepare(void)
{
  pthread_mutex_lock(&os_lock_lock);
}

void prd__os_fork_release(void)
{
  pthread_mutex_unlock(&os_lock_lock);
}

/* A mix of 64 bits (splitmix64's finalizer): every input bit changes about half the output. */
static uint64_t os_mix64(uint64_t x)
{
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t prd__os_random64(uint64_t salt)
{
  uint64_t r;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r))
    return r;
  const unsigned char *at = (const unsigned char *)getauxval(AT_RANDOM);
  if (at != NULL) {
    uint64_t a, b;
    memcpy(&a, at, sizeof(a));
    memcpy(&b, at + 8, sizeof(b));
    return os_mix64(a ^ os_mix64(b ^ os_mix64(salt + 0x9e3779b97f4a7c15ull)));
  }
  static atomic_flag told = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&told))
    prd__report("no random source (getrandom failed, no AT_RANDOM): the process's keys come "
                "from the clock and the address space layout");
  return os_mix64(prd__now_ns() ^ ((uint64_t)(uintptr_t)&r << 17) ^ os_mix64(salt));
}

/* ---- section 11: membarrier ------------------------------------------------------------------ */
bool prd__os_membarrier_register(void)
{
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
         syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
         syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
}

int prd__os_membarrier(int cmd)
{
  long wait_ms = 1;
  for (long waited = 0;; waited += wait_ms, wait_ms = wait_ms < 64 ? wait_ms * 2 : 64) {
    if (syscall(SYS_membarrier, cmd, 0, 0) == 0)
      return 0;
    int e = errno;
    if ((e != ENOMEM && e != EAGAIN && e != EINTR) || waited >= 1000)
      return e;
    struct timespec ts = { 0, wait_ms * 1000000L };
    int old = prd__cancel_off();   /* not a cancellation point of the caller's (section 8) */
    nanosleep(&ts, NULL);
    prd__cancel_on(old);
  }
}

uint64_t prd__now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
