/* deferred.h: liburcu's half of the `urcu` mode of prd-bench deferred/endurance
 * (bench/urcu_deferred.c, compiled only when liburcu is installed: PRD_HAVE_URCU). */
#ifndef PRD_BENCH_DEFERRED_H
#define PRD_BENCH_DEFERRED_H

#include <stdbool.h>
#include <stddef.h>

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
#endif

#endif
