/* rmap.c: the linear resource map baseline (see rmap.h). */
#include <stdlib.h>
#include <string.h>

#include "rmap.h"

int rmap_init(struct rmap *mp, size_t cap)
{
  mp->rm_ent = calloc(cap, sizeof(*mp->rm_ent));
  mp->rm_cap = cap;
  mp->rm_lost = 0;
  return mp->rm_ent != NULL && cap >= 1 ? 0 : -1;
}

void rmap_fini(struct rmap *mp)
{
  free(mp->rm_ent);
  mp->rm_ent = NULL;
}

size_t rmap_count(const struct rmap *mp)
{
  size_t n = 0;
  while (mp->rm_ent[n].m_size != 0)
    n++;
  return n;
}

uintptr_t rmap_alloc(struct rmap *mp, size_t size)
{
  for (struct rmap_ent *bp = mp->rm_ent; bp->m_size != 0; bp++) {
    if (bp->m_size >= size) {
      uintptr_t a = bp->m_addr;
      bp->m_addr += size;
      if ((bp->m_size -= size) == 0) {
        /* the entry is used up: shift the rest (terminator included) down */
        do {
          bp++;
          (bp - 1)->m_addr = bp->m_addr;
        } while (((bp - 1)->m_size = bp->m_size) != 0);
      }
      return a;
    }
  }
  return 0;
}

void rmap_free(struct rmap *mp, uintptr_t addr, size_t size)
{
  struct rmap_ent *bp = mp->rm_ent;
  while (bp->m_addr <= addr && bp->m_size != 0)
    bp++;
  if (bp > mp->rm_ent && (bp - 1)->m_addr + (bp - 1)->m_size == addr) {
    /* joins the range below; perhaps the one above too */
    (bp - 1)->m_size += size;
    if (bp->m_size != 0 && addr + size == bp->m_addr) {
      (bp - 1)->m_size += bp->m_size;
      while (bp->m_size != 0) {
        bp++;
        (bp - 1)->m_addr = bp->m_addr;
        (bp - 1)->m_size = bp->m_size;
      }
    }
    return;
  }
  if (bp->m_size != 0 && addr + size == bp->m_addr) {
    /* joins the range above */
    bp->m_addr -= size;
    bp->m_size += size;
    return;
  }
  /* a new range: shift the rest up by one, if there is room */
  struct rmap_ent *end = bp;
  while (end->m_size != 0)
    end++;
  if ((size_t)(end - mp->rm_ent) + 1 >= mp->rm_cap) {
    mp->rm_lost++;
    return;
  }
  memmove(bp + 1, bp, (size_t)(end - bp + 1) * sizeof(*bp));
  bp->m_addr = addr;
  bp->m_size = size;
}

int rmap_load(struct rmap *mp, const struct rmap_ent *ranges, size_t n)
{
  if (n + 1 > mp->rm_cap)
    return -1;
  for (size_t i = 0; i < n; i++) {
    if (ranges[i].m_size == 0 || (i > 0 && ranges[i - 1].m_addr + ranges[i - 1].m_size >=
                                                ranges[i].m_addr))
      return -1;   /* not sorted, or adjacent ranges that rmap_free would have joined */
    mp->rm_ent[i] = ranges[i];
  }
  mp->rm_ent[n].m_size = 0;
  mp->rm_ent[n].m_addr = 0;
  return 0;
}
