/*
 * types.h: the internal types of libprudence.
 *
 * Main types, bottom up (each struct's fields carry the struct's prefix, so uses grep):
 *   prd_vmem_t      (vmem.c)   an arena of integers: spans, segments (boundary tags),
 *                              power-of-two freelists, an allocated-segment hash   vm_
 *   prd_vseg_t      (vmem.c)   one boundary tag: a span, a free or an allocated segment  vs_
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

#endif
