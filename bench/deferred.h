/* deferred.h: liburcu's half of prd-bench deferred/endurance (bench/urcu_deferred.c for the
 * memb flavour, bench/urcu_qsbr.c for QSBR; compiled only when liburcu is installed:
 * PRD_HAVE_URCU): the `urcu` mode's call_rcu(free), the `batch` mode's synchronize_rcu and
 * the --readers threads of the urcu-memb and urcu-qsbr sources. */
#ifndef PRD_BENCH_DEFERRED_H
#define PRD_BENCH_DEFERRED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The objects the --readers threads read: the writers publish into these slots (release) and
 * retire what they replace; a reader's section loads one slot (acquire) and checks the
 * object's first word, which the writers keep odd, while a freed block's first word holds
 * the allocator's free-list link (even).  Returns the number of reads that saw an even word,
 * and the count of sections in *sections; runs until *stop. */
struct bench_readers {
  uint64_t *_Atomic *br_slots;
  int br_nslots;
  atomic_int *br_stop;
};

/* The body of reader section n, inside the flavour's read_lock/read_unlock (each flavour's
 * loop keeps its own inline read side): reads the object of a slot and says 1 when it looks
 * freed (writers keep its first word odd; a free list's link is even).  Acquire: pairs with
 * the writer's release exchange that published the object. */
static inline long bench_reader_section(const struct bench_readers *br, long n)
{
  uint64_t *o = atomic_load_explicit(&br->br_slots[n % br->br_nslots], memory_order_acquire);
  return o != NULL && !(*(volatile uint64_t *)o & 1);
}

#ifdef PRD_HAVE_URCU
static inline bool bench_urcu_available(void)
{
  return true;
}
/* Bytes of liburcu's struct rcu_head (the malloc'd object carries it after itself). */
size_t bench_urcu_head_size(void);
/* liburcu memb's call_rcu on the head at obj + off, with a callback that frees obj. */
void bench_urcu_call_free(void *obj, size_t off);
void bench_urcu_register(void);
void bench_urcu_unregister(void);
void bench_urcu_barrier(void);
/* The `batch` mode's grace period on each flavour, and the sources that --source names:
 * prd_rcu_set_source with the adapter's prd_rcu_urcu_memb / prd_rcu_urcu_qsbr (0 or -1). */
void bench_urcu_memb_synchronize(void);
void bench_urcu_qsbr_synchronize(void);
int bench_urcu_memb_use_source(void);
int bench_urcu_qsbr_use_source(void);
/* Reader threads' loops (see struct bench_readers); QSBR's announce a quiescent state after
 * every section. */
long bench_urcu_memb_readers(const struct bench_readers *br, long *sections);
long bench_urcu_qsbr_readers(const struct bench_readers *br, long *sections);
#else
/* Without liburcu the mode is not offered (mode_available); nothing below is reached. */
static inline bool bench_urcu_available(void)
{
  return false;
}
static inline size_t bench_urcu_head_size(void)
{
  return 0;
}
static inline void bench_urcu_call_free(void *obj, size_t off)
{
  (void)obj;
  (void)off;
}
static inline void bench_urcu_register(void) {}
static inline void bench_urcu_unregister(void) {}
static inline void bench_urcu_barrier(void) {}
static inline void bench_urcu_memb_synchronize(void) {}
static inline void bench_urcu_qsbr_synchronize(void) {}
static inline int bench_urcu_memb_use_source(void)
{
  return -1;
}
static inline int bench_urcu_qsbr_use_source(void)
{
  return -1;
}
static inline long bench_urcu_memb_readers(const struct bench_readers *br, long *sections)
{
  (void)br;
  *sections = 0;
  return 0;
}
static inline long bench_urcu_qsbr_readers(const struct bench_readers *br, long *sections)
{
  (void)br;
  *sections = 0;
  return 0;
}
#endif

#endif
