/*
 * override.c: the C library's allocation names over the malloc family (libprudence-malloc.so).
 *
 * 1. What.  Every entry point a program or library can reach the C allocator through is
 *    defined here, so that LD_PRELOAD=libprudence-malloc.so (or linking -lprudence-malloc)
 *    displaces glibc's malloc completely (ANCHORS.md: libumem's users found that a missed
 *    entry point leaves two allocators fighting over one pointer): malloc, free, cfree,
 *    calloc, realloc, reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
 *    malloc_usable_size, malloc_trim, glibc's __libc_malloc, __libc_free, __libc_calloc,
 *    __libc_realloc, __libc_memalign, __libc_valloc and __libc_pvalloc, and the C++
 *    operators new and delete in every variant (plain, sized, array, aligned; the nothrow
 *    deletes; the nothrow news are the C++ runtime's over these, section 2), and the thread
 *    calls of section 5.  This is the only file besides malloc.c that defines names of the C
 *    library, and it is built only into libprudence-malloc.so.
 *
 * 2. C++ operators in C.  The operators are defined here under their Itanium-ABI mangled
 *    names (_Znwm is operator new(size_t), ...), so the library needs no C++ runtime and a
 *    C program preloading it does not pull libstdc++ in.  A throwing operator new that gets
 *    NULL does what the standard asks: it calls the installed new_handler and retries while
 *    there is one, else throws std::bad_alloc.  Both come from libstdc++ through weak
 *    references (std::get_new_handler and std::__throw_bad_alloc): any program that calls
 *    operator new links libstdc++, so they resolve; if they do not, the process aborts
 *    rather than return NULL from a throwing new.
 *    The nothrow forms of operator new are not defined here: the C++ runtime's own are the
 *    standard's default behaviour, a call of the (replaced) throwing form that returns nullptr
 *    where it throws (libstdc++ since GCC 9, libc++; older libstdc++ runs the new_handler loop
 *    over malloc, ours too).  So they run the new_handler loop here and return nullptr also
 *    when the handler throws std::bad_alloc, which C cannot catch.  The nothrow deletes stay:
 *    they only free.
 *
 * 3. Start-up, threads and fork are malloc.c's (sections 5 and 6): this file only forwards.
 *    The library is built with the initial-exec TLS model (CMakeLists.txt), so no thread-local
 *    access inside the allocator can call __tls_get_addr, which may itself call malloc.
 *
 * 4. The hottest names are aliases.  malloc, free, cfree and malloc_usable_size are the
 *    symbols of prd_malloc, prd_free and prd_malloc_usable_size themselves (defined in
 *    malloc.c under PRD_OVERRIDE_NAMES, which only this library's build sets: an alias must
 *    name a function of its own translation unit), so a call through them is not a call of
 *    a function that jumps on: one branch less on every malloc and free.  The declarations
 *    below still say that this library exports them.
 *
 * 5. glibc's thread bookkeeping.  pthread_join, its try/timed/clock forms, pthread_detach
 *    (of a thread that has ended), pthread_create, thrd_join and thrd_detach may free a dead
 *    thread's TLS with glibc's stack-cache lock held, which pthread_create takes: a library
 *    thread started from such a free waits for the lock for ever, in the thread that holds it
 *    (thread.c section 2).  So they are defined here too, each marking its thread for the
 *    call (prd__lthread_nostart) around the C library's own, found once with dlsym(RTLD_NEXT).
 *    A symbol the C library does not have (an old glibc without pthread_clockjoin_np) makes
 *    the call fail with ENOSYS, which no program that found it at link time can reach.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <threads.h>

#include "internal.h"

#define PRD_EXPORT __attribute__((visibility("default")))

/* ---- the C library's names ------------------------------------------------------------- */
/* malloc, free, cfree and malloc_usable_size: aliases defined in malloc.c (section 4); the
 * others forward. */
PRD_EXPORT void *malloc(size_t size);
PRD_EXPORT void free(void *ptr);
PRD_EXPORT void cfree(void *ptr);
PRD_EXPORT void *calloc(size_t n, size_t size);
PRD_EXPORT void *realloc(void *ptr, size_t size);
PRD_EXPORT void *reallocarray(void *ptr, size_t n, size_t size);
PRD_EXPORT int posix_memalign(void **memptr, size_t align, size_t size);
PRD_EXPORT void *aligned_alloc(size_t align, size_t size);
PRD_EXPORT void *memalign(size_t align, size_t size);
PRD_EXPORT void *valloc(size_t size);
PRD_EXPORT void *pvalloc(size_t size);
PRD_EXPORT size_t malloc_usable_size(void *ptr);
PRD_EXPORT int malloc_trim(size_t pad);
/* glibc's own names of its allocator, which some programs and libraries call directly (to
 * reach "the real malloc" under a hook): a block they get must be one free takes, and one
 * they free may come from malloc (mimalloc and tcmalloc define them too) */
PRD_EXPORT void *__libc_malloc(size_t size);
PRD_EXPORT void __libc_free(void *ptr);
PRD_EXPORT void *__libc_calloc(size_t n, size_t size);
PRD_EXPORT void *__libc_realloc(void *ptr, size_t size);
PRD_EXPORT void *__libc_memalign(size_t align, size_t size);
PRD_EXPORT void *__libc_valloc(size_t size);
PRD_EXPORT void *__libc_pvalloc(size_t size);

void *calloc(size_t n, size_t size) { return prd_calloc(n, size); }
void *realloc(void *ptr, size_t size) { return prd_realloc(ptr, size); }
void *reallocarray(void *ptr, size_t n, size_t size) { return prd_reallocarray(ptr, n, size); }
int posix_memalign(void **memptr, size_t align, size_t size)
{
  return prd_posix_memalign(memptr, align, size);
}
void *aligned_alloc(size_t align, size_t size) { return prd_aligned_alloc(align, size); }
void *memalign(size_t align, size_t size) { return prd_memalign(align, size); }
void *valloc(size_t size) { return prd_valloc(size); }
void *pvalloc(size_t size) { return prd_pvalloc(size); }
void *__libc_malloc(size_t size) { return prd_malloc(size); }
void __libc_free(void *ptr) { prd_free(ptr); }
void *__libc_calloc(size_t n, size_t size) { return prd_calloc(n, size); }
void *__libc_realloc(void *ptr, size_t size) { return prd_realloc(ptr, size); }
void *__libc_memalign(size_t align, size_t size) { return prd_memalign(align, size); }
void *__libc_valloc(size_t size) { return prd_valloc(size); }
void *__libc_pvalloc(size_t size) { return prd_pvalloc(size); }

/* glibc's signature and result: 1 if memory went back to the kernel, else 0.  The kept huge
 * blocks are unmapped (malloc.c section 1b, through cache.c's reap hook), every cache's
 * magazines and free slabs go back to the heap arena regardless of working sets and every
 * free heap page is decommitted (cache.c section 4); pad (glibc keeps that much at the top
 * of its heap) has no counterpart in an allocator without one heap top, so it is ignored. */
int malloc_trim(size_t pad)
{
  (void)pad;
  size_t huge = prd__malloc_huge_cached();   /* given back by the trim's reap hook */
  return prd__cache_trim() > 0 || huge > 0;
}

/* ---- glibc's thread bookkeeping (section 5) ---------------------------------------------- */
PRD_EXPORT int pthread_join(pthread_t t, void **ret);
PRD_EXPORT int pthread_tryjoin_np(pthread_t t, void **ret);
PRD_EXPORT int pthread_timedjoin_np(pthread_t t, void **ret, const struct timespec *abstime);
PRD_EXPORT int pthread_clockjoin_np(pthread_t t, void **ret, clockid_t clock,
                                    const struct timespec *abstime);
PRD_EXPORT int pthread_detach(pthread_t t);
PRD_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
                              void *arg);
PRD_EXPORT int thrd_join(thrd_t t, int *res);
PRD_EXPORT int thrd_detach(thrd_t t);

/* The C library's definition of `name`, looked up once (relaxed: a race looks it up twice
 * and stores the same address); NULL if it has none. */
static void *next_fn(_Atomic(void *) *slot, const char *name)
{
  void *fn = atomic_load_explicit(slot, memory_order_relaxed);
  if (fn == NULL) {
    fn = dlsym(RTLD_NEXT, name);
    atomic_store_explicit(slot, fn, memory_order_relaxed);
  }
  return fn;
}

/* Calls the C library's `name` with the arguments that follow, its thread marked: no library
 * thread starts inside (section 5). */
#define NEXT_CALL(type, name, ...)                                                            \
  do {                                                                                        \
    static _Atomic(void *) slot;                                                              \
    prd__lthread_nostart(true);   /* dlsym may allocate too */                                \
    type next = (type)next_fn(&slot, #name);                                                  \
    if (next == NULL) {                                                                       \
      prd__lthread_nostart(false);                                                            \
      return ENOSYS;                                                                          \
    }                                                                                         \
    int rc = next(__VA_ARGS__);                                                               \
    prd__lthread_nostart(false);                                                              \
    return rc;                                                                                \
  } while (0)

typedef int join_fn(pthread_t, void **);
typedef int timedjoin_fn(pthread_t, void **, const struct timespec *);
typedef int clockjoin_fn(pthread_t, void **, clockid_t, const struct timespec *);
typedef int detach_fn(pthread_t);
typedef int create_fn(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int thrd_join_fn(thrd_t, int *);
typedef int thrd_detach_fn(thrd_t);

int pthread_join(pthread_t t, void **ret)
{
  NEXT_CALL(join_fn *, pthread_join, t, ret);
}

int pthread_tryjoin_np(pthread_t t, void **ret)
{
  NEXT_CALL(join_fn *, pthread_tryjoin_np, t, ret);
}

int pthread_timedjoin_np(pthread_t t, void **ret, const struct timespec *abstime)
{
  NEXT_CALL(timedjoin_fn *, pthread_timedjoin_np, t, ret, abstime);
}

int pthread_clockjoin_np(pthread_t t, void **ret, clockid_t clock,
                         const struct timespec *abstime)
{
  NEXT_CALL(clockjoin_fn *, pthread_clockjoin_np, t, ret, clock, abstime);
}

int pthread_detach(pthread_t t)
{
  NEXT_CALL(detach_fn *, pthread_detach, t);
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
  NEXT_CALL(create_fn *, pthread_create, t, attr, fn, arg);
}

int thrd_join(thrd_t t, int *res)
{
  NEXT_CALL(thrd_join_fn *, thrd_join, t, res);
}

int thrd_detach(thrd_t t)
{
  NEXT_CALL(thrd_detach_fn *, thrd_detach, t);
}

/* ---- C++ (section 2) --------------------------------------------------------------------- */
typedef void (*cxx_new_handler)(void);
extern cxx_new_handler _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* A throwing operator new got no memory: new_handler loop, then std::bad_alloc. */
static PRD_NOINLINE void *cxx_new_failed(size_t size, size_t align)
{
  for (;;) {
    cxx_new_handler h = _ZSt15get_new_handlerv != NULL ? _ZSt15get_new_handlerv() : NULL;
    if (h == NULL)
      break;
    h();
    void *p = align != 0 ? prd_aligned_alloc(align, size) : prd_malloc(size);
    if (p != NULL)
      return p;
  }
  if (_ZSt17__throw_bad_allocv != NULL)
    _ZSt17__throw_bad_allocv();
  prd__report("operator new(%zu): out of memory and no C++ runtime to throw std::bad_alloc",
              size);
  abort();
}

static inline void *cxx_new(size_t size)
{
  void *p = prd_malloc(size);
  return prd_likely(p != NULL) ? p : cxx_new_failed(size, 0);
}

static inline void *cxx_new_aligned(size_t size, size_t align)
{
  void *p = prd_aligned_alloc(align, size);
  return prd_likely(p != NULL) ? p : cxx_new_failed(size, align);
}

/* std::nothrow_t and std::align_val_t are passed as an ignored pointer and a size_t. */
PRD_EXPORT void *_Znwm(size_t size);
PRD_EXPORT void *_Znam(size_t size);
PRD_EXPORT void *_ZnwmSt11align_val_t(size_t size, size_t align);
PRD_EXPORT void *_ZnamSt11align_val_t(size_t size, size_t align);
PRD_EXPORT void _ZdlPv(void *p);
PRD_EXPORT void _ZdaPv(void *p);
PRD_EXPORT void _ZdlPvm(void *p, size_t size);
PRD_EXPORT void _ZdaPvm(void *p, size_t size);
PRD_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt);
PRD_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt);
PRD_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t align);
PRD_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t align);
PRD_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t align);
PRD_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t align);
PRD_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align, const void *nt);
PRD_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align, const void *nt);

void *_Znwm(size_t size) { return cxx_new(size); }
void *_Znam(size_t size) { return cxx_new(size); }
void *_ZnwmSt11align_val_t(size_t size, size_t align) { return cxx_new_aligned(size, align); }
void *_ZnamSt11align_val_t(size_t size, size_t align) { return cxx_new_aligned(size, align); }
void _ZdlPv(void *p) { prd_free(p); }
void _ZdaPv(void *p) { prd_free(p); }
void _ZdlPvm(void *p, size_t size) { (void)size; prd_free(p); }
void _ZdaPvm(void *p, size_t size) { (void)size; prd_free(p); }
void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; prd_free(p); }
void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { (void)nt; prd_free(p); }
void _ZdlPvSt11align_val_t(void *p, size_t align) { (void)align; prd_free(p); }
void _ZdaPvSt11align_val_t(void *p, size_t align) { (void)align; prd_free(p); }
void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t align)
{
  (void)size;
  (void)align;
  prd_free(p);
}
void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t align)
{
  (void)size;
  (void)align;
  prd_free(p);
}
void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align, const void *nt)
{
  (void)align;
  (void)nt;
  prd_free(p);
}
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t align, const void *nt)
{
  (void)align;
  (void)nt;
  prd_free(p);
}
