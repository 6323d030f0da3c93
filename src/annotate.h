/*
 * annotate.h: telling memcheck (valgrind) and AddressSanitizer which objects of a cache the
 * user may touch, so that a use after free inside a cache is reported by those tools.
 *
 * 1. What.  Memory a cache holds looks allocated to valgrind and ASan: it came from mmap and
 *    the slab layer writes to it.  These helpers mark an object's bytes unusable when it comes
 *    back to a cache (memcheck: no access; ASan: poisoned) and usable when it leaves for the
 *    user, so a read or write through a stale pointer is an error in those tools, with a
 *    stack.  Every layer calls the same helpers at its boundary: the slab layer in
 *    prd__slab_alloc/prd__slab_free (slab.c), the magazine and Prudence layers when an object
 *    enters or leaves a magazine or a deferred list.  Marking twice is harmless.
 * 2. Which bytes.  Handed out: the object, [buf, buf + cache_bufsize) (ASan then also sees an
 *    overrun into the chunk's padding); valgrind marks it defined when the cache keeps
 *    constructed state (a constructor, seed 002 §2) and undefined otherwise, as malloc.  Taken
 *    back: the whole chunk, except the freelist word of the small layout (the slab layer
 *    links free buffers through it, section 2 of slab.c).  A slab being created or destroyed
 *    is made ordinary memory again (its source may hand it to another cache).
 * 3. Which caches.  Not PRD_CACHE_NOTOUCH caches (their "objects" are integers, not memory)
 *    and not caches with buffer debugging (PRD_CF_DEBUG): their free buffers are watched by
 *    the cache's own checks (patterns, redzones, guard pages), which report with the buffer's
 *    audit history and must be able to read and fill free buffers.
 * 4. Cost.  Built with PRD_VALGRIND (CMake option, on when valgrind/memcheck.h exists): a
 *    client request is a few instructions when the program does not run under valgrind.
 *    Built with ASan (PRD_ASAN): a shadow-memory write per object.  Otherwise nothing.
 */
#ifndef PRD_ANNOTATE_H
#define PRD_ANNOTATE_H

#include <stddef.h>

#include "types.h"

#ifdef PRD_VALGRIND
#include <valgrind/memcheck.h>
#endif
#ifdef PRD_ASAN
#include <sanitizer/asan_interface.h>
#endif

#if defined(PRD_VALGRIND) || defined(PRD_ASAN)
#define PRD_ANNOTATE 1
#endif

#ifdef PRD_ANNOTATE
static inline bool prd__annot_cache(const prd_cache_t *cp)
{
  return !(cp->cache_flags & (PRD_CACHE_NOTOUCH | PRD_CF_DEBUG));
}
#endif

/* An object leaves the cache for the user (or a constructor). */
static inline void prd__annot_object_out(const prd_cache_t *cp, void *buf)
{
#ifdef PRD_ANNOTATE
  if (!prd__annot_cache(cp))
    return;
#ifdef PRD_ASAN
  ASAN_UNPOISON_MEMORY_REGION(buf, cp->cache_bufsize);
#endif
#ifdef PRD_VALGRIND
  if (cp->cache_ctor != NULL)
    (void)VALGRIND_MAKE_MEM_DEFINED(buf, cp->cache_bufsize);
  else
    (void)VALGRIND_MAKE_MEM_UNDEFINED(buf, cp->cache_bufsize);
#endif
#else
  (void)cp;
  (void)buf;
#endif
}

/* An object comes back into the cache: nobody but the cache may touch it now. */
static inline void prd__annot_object_in(const prd_cache_t *cp, void *buf)
{
#ifdef PRD_ANNOTATE
  if (!prd__annot_cache(cp))
    return;
  bool small = !(cp->cache_flags & PRD_CF_HASH);
#ifdef PRD_ASAN
  ASAN_POISON_MEMORY_REGION(buf, cp->cache_chunksize);
  if (small)
    ASAN_UNPOISON_MEMORY_REGION((char *)buf + cp->cache_link_off, sizeof(void *));
#endif
#ifdef PRD_VALGRIND
  (void)VALGRIND_MAKE_MEM_NOACCESS(buf, cp->cache_chunksize);
  if (small)
    (void)VALGRIND_MAKE_MEM_DEFINED((char *)buf + cp->cache_link_off, sizeof(void *));
#endif
#else
  (void)cp;
  (void)buf;
#endif
}

/* Bytes of a chunk past the object that a layer above uses while the object is out
 * (defer.c's call_rcu head after a deferred object): usable until the object comes back. */
static inline void prd__annot_chunk_extra(const prd_cache_t *cp, void *addr, size_t len)
{
#ifdef PRD_ANNOTATE
  if (!prd__annot_cache(cp))
    return;
#ifdef PRD_ASAN
  ASAN_UNPOISON_MEMORY_REGION(addr, len);
#endif
#ifdef PRD_VALGRIND
  (void)VALGRIND_MAKE_MEM_UNDEFINED(addr, len);
#endif
#else
  (void)cp;
  (void)addr;
  (void)len;
#endif
}

/* A copy of bytes the user may never have written, about to be tested: defined for memcheck
 * (the test is a heuristic filter whose outcome is confirmed another way). */
static inline void prd__annot_defined(void *addr, size_t len)
{
#ifdef PRD_VALGRIND
  (void)VALGRIND_MAKE_MEM_DEFINED(addr, len);
#else
  (void)addr;
  (void)len;
#endif
}

/* A slab's memory becomes ordinary memory (created from, or going back to, its source). */
static inline void prd__annot_slab_reset(const prd_cache_t *cp, void *base, size_t size)
{
#ifdef PRD_ANNOTATE
  if (!prd__annot_cache(cp))
    return;
#ifdef PRD_ASAN
  ASAN_UNPOISON_MEMORY_REGION(base, size);
#endif
#ifdef PRD_VALGRIND
  (void)VALGRIND_MAKE_MEM_DEFINED(base, size);
#endif
#else
  (void)cp;
  (void)base;
  (void)size;
#endif
}

#endif
