/*
 * rmap.h: the linear resource map that vmem replaced (the baseline of `prd-bench vmem`).
 *
 * This is the classic Unix rmalloc/rmfree, implemented faithfully: a map is an array of
 * (size, address) entries sorted by address, ended by an entry of size 0; each entry is a free
 * range.  rmap_alloc is first fit: it scans from the lowest address for the first entry large
 * enough, takes the request from its start, and removes the entry (shifting the rest down) when
 * it becomes empty.  rmap_free scans for the first entry above the address, coalesces with the
 * entry before and/or after, or inserts a new entry (shifting the rest up).  Both are linear in
 * the number of free ranges, which is the behaviour the vmem paper measured against.  As in the
 * original, address 0 means failure, so a map must not contain 0.
 */
#ifndef PRD_BENCH_RMAP_H
#define PRD_BENCH_RMAP_H

#include <stddef.h>
#include <stdint.h>

struct rmap_ent {
  size_t m_size;      /* 0: the end of the map */
  uintptr_t m_addr;
};

struct rmap {
  struct rmap_ent *rm_ent;   /* rm_cap entries, the last always the terminator */
  size_t rm_cap;
  uint64_t rm_lost;          /* frees dropped because the map was full (as rmfree did) */
};

/* A map of at most cap - 1 free ranges, initially empty; 0 or -1 (no memory). */
int rmap_init(struct rmap *mp, size_t cap);
void rmap_fini(struct rmap *mp);
/* First-fit allocation of size; 0 when nothing fits. */
uintptr_t rmap_alloc(struct rmap *mp, size_t size);
/* Gives [addr, addr+size) back, coalescing with its neighbours. */
void rmap_free(struct rmap *mp, uintptr_t addr, size_t size);
/* Setup only: makes the map hold exactly these n sorted, disjoint, non-adjacent ranges (what
 * a sequence of rmap_free calls would leave, without its quadratic cost).  0, or -1 when the
 * ranges are not like that or do not fit. */
int rmap_load(struct rmap *mp, const struct rmap_ent *ranges, size_t n);
/* Number of free ranges in the map. */
size_t rmap_count(const struct rmap *mp);

#endif
