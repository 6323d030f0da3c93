/*
 * hash.h: the chained hash tables that grow, shared by vmem.c (allocated segments by start
 * address) and slab.c (a large-layout cache's bufctls by buffer address).
 *
 * Both tables are arrays of chain heads; a node is linked on its chain through one pointer
 * field of its own, and the owner's mask (and, for vmem, shift) picks the bucket.  Each owner
 * keeps its hashing, its growth policy and its first, embedded table; what they share is here:
 *   - a grown table is whole pages from os.c, never from an object cache, so a table's growth
 *     never recurses into the slab layer;
 *   - growing moves every node onto the new chains, in one pass over the old table, after the
 *     owner has installed the new table and its mask; the old table is then unmapped unless it
 *     is the embedded one.
 * A failed map leaves the old table in use: chains grow longer, lookups stay correct.
 * The move is a macro so that it stays typed (each owner's node type and link field) and its
 * bucket function is called directly; it runs under the owner's lock, off every hit path.
 */
#ifndef PRD_HASH_H
#define PRD_HASH_H

#include <stddef.h>

#include "internal.h"

/* The bytes of a table of n chain heads: whole pages, as os.c maps them. */
static inline size_t prd__hash_bytes(size_t n)
{
  return PRD_P2ROUNDUP(n * sizeof(void *), prd__os_page_size());
}

/* A table of n empty chains from os.c (zero-filled), or NULL when no memory can be had. */
static inline void *prd__hash_table_map(size_t n)
{
  return prd__os_map(prd__hash_bytes(n));
}

/* Unmaps old, a table of old_n chains, unless it is the owner's embedded table table0. */
static inline void prd__hash_table_unmap(void *old, size_t old_n, const void *table0)
{
  if (old != table0)
    prd__os_unmap(old, prd__hash_bytes(old_n));
}

/* Moves every node of type `type` on the old_n chains of `old` onto the chains of `table`,
 * linking through the field `link`; a node goes to bucket index(owner, node->key), so the
 * owner's new table and mask must be in place first. */
#define PRD__HASH_MOVE(type, old, old_n, table, link, index, owner, key)                   \
  do {                                                                                     \
    for (size_t prd__hm_i = 0; prd__hm_i < (old_n); prd__hm_i++) {                         \
      type *prd__hm_node = (old)[prd__hm_i];                                               \
      while (prd__hm_node != NULL) {                                                       \
        type *prd__hm_next = prd__hm_node->link;                                           \
        size_t prd__hm_b = index((owner), prd__hm_node->key);                              \
        prd__hm_node->link = (table)[prd__hm_b];                                           \
        (table)[prd__hm_b] = prd__hm_node;                                                 \
        prd__hm_node = prd__hm_next;                                                       \
      }                                                                                    \
    }                                                                                      \
  } while (0)

#endif /* PRD_HASH_H */
