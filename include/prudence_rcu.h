/*
 * prudence_rcu.h: the read side of the built-in RCU, inline (included by prudence.h).
 *
 * The fast path of the two-phase user-level RCU of Desnoyers, McKenney et al. (IEEE TPDS 2012,
 * the "memb" flavour): a per-thread counter holds the nesting depth in its low 16 bits and,
 * above them, the count of grace-period flips its last outermost section saw when it began
 * (kept while the thread is idle).  No atomic read-modify-write, no loop: wait-free.  A lock/unlock pair
 * is about ten instructions: a TLS load, two tests, a load of the global counter, two stores.
 * The writer side, the proof and every barrier's partner are in src/rcu.c §2-§3.
 *
 * Everything here is part of the ABI, not of the API: use the prd_rcu_* functions.
 */
#ifndef PRUDENCE_RCU_H
#define PRUDENCE_RCU_H

#ifndef PRUDENCE_H
#error "include <prudence.h>, not <prudence_rcu.h>"
#endif

/* rr_ctr layout: [ flip count | nesting count ] (liburcu's URCU_GP_CTR_PHASE / NEST_MASK, with
 * the phase bit the lowest bit of a count of flips: the writer adds PRD__RCU_PHASE where liburcu
 * XORs it).  Nesting up to 65,535 levels; the count has the word's upper bits (48 on LP64). */
#define PRD__RCU_NEST_COUNT 1UL
#define PRD__RCU_PHASE      (1UL << 16)
#define PRD__RCU_NEST_MASK  (PRD__RCU_PHASE - 1)

struct prd__rcu_reader {
  unsigned long rr_ctr;  /* written by its thread only (atomic stores); read by the writer */
  unsigned int rr_fast;  /* 1: registered and online; 0: the next outermost lock takes the slow path */
};

/* This thread's reader record (initial-exec TLS: one %fs-relative access). */
extern PRD_API __thread struct prd__rcu_reader prd__rcu_reader
    __attribute__((tls_model("initial-exec")));
/* The global counter: PRD__RCU_NEST_COUNT | flips; the writer adds PRD__RCU_PHASE (src/rcu.c §3). */
extern PRD_API unsigned long prd__rcu_gp_ctr;
/* Nonzero when readers must fence: no membarrier(2) expedited command, or a TSan build. */
extern PRD_API int prd__rcu_reader_fences;

/* Slow paths (src/rcu.c): registration on first use, offline threads, unbalanced unlock. */
PRD_API void prd__rcu_read_lock_slow(void);
PRD_API void prd__rcu_read_unlock_slow(void);

/* A full memory barrier.  gcc refuses atomic_thread_fence under -fsanitize=thread (TSan does
 * not model fences); there a seq_cst read-modify-write of a local variable does the job: a
 * locked instruction on x86 (a full barrier), and no happens-before edge that could hide a
 * race from TSan, as a shared dummy variable would. */
static inline void prd__rcu_full_fence(void)
{
#ifdef PRD_TSAN
  unsigned long prd_dummy = 0;
  (void)__atomic_fetch_add(&prd_dummy, 0, __ATOMIC_SEQ_CST);
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* The reader's barrier, (R1) after the snapshot and (R2) before the clearing store.  With
 * membarrier(2) the writer's membarrier (W1)/(W2) forces a full barrier on every thread that is
 * running our code, so a compiler barrier is enough here; without it (or under TSan, which does
 * not model membarrier) a full fence that pairs with the writer's fence. */
static inline void prd__rcu_reader_barrier(void)
{
#ifdef PRD_TSAN
  prd__rcu_full_fence();
#else
  if (__builtin_expect(__atomic_load_n(&prd__rcu_reader_fences, __ATOMIC_RELAXED) != 0, 0))
    prd__rcu_full_fence();
  else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

/* Enters a read-side critical section (nestable, wait-free, no atomic read-modify-write). */
static inline void prd_rcu_read_lock(void)
{
  struct prd__rcu_reader *r = &prd__rcu_reader;
  unsigned long tmp = r->rr_ctr;
  if (__builtin_expect((tmp & PRD__RCU_NEST_MASK) == 0, 1)) {
    if (__builtin_expect(r->rr_fast == 0, 0)) {
      prd__rcu_read_lock_slow();
      return;
    }
    /* outermost: announce the phase we start in; the writer reads it with an acquire load */
    __atomic_store_n(&r->rr_ctr, __atomic_load_n(&prd__rcu_gp_ctr, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
    prd__rcu_reader_barrier(); /* (R1): the snapshot before our loads; pairs with (W1)/(W2) */
  } else if (__builtin_expect((tmp & PRD__RCU_NEST_MASK) != PRD__RCU_NEST_MASK, 1)) {
    __atomic_store_n(&r->rr_ctr, tmp + PRD__RCU_NEST_COUNT, __ATOMIC_RELAXED);
  } else {
    prd__rcu_read_lock_slow(); /* nesting past PRD__RCU_NEST_MASK: reported, the process ends */
  }
}

/* Leaves a read-side critical section. */
static inline void prd_rcu_read_unlock(void)
{
  struct prd__rcu_reader *r = &prd__rcu_reader;
  unsigned long tmp = r->rr_ctr;
  if (__builtin_expect((tmp & PRD__RCU_NEST_MASK) == PRD__RCU_NEST_COUNT, 1)) {
    prd__rcu_reader_barrier(); /* (R2): our loads before the clearing store; pairs with (W1)/(W2) */
    /* release: a plain mov on x86; it gives TSan the edge to the writer's acquire load */
    __atomic_store_n(&r->rr_ctr, tmp - PRD__RCU_NEST_COUNT, __ATOMIC_RELEASE);
  } else if (__builtin_expect((tmp & PRD__RCU_NEST_MASK) != 0, 1)) {
    __atomic_store_n(&r->rr_ctr, tmp - PRD__RCU_NEST_COUNT, __ATOMIC_RELAXED);
  } else {
    prd__rcu_read_unlock_slow(); /* unlock without lock: reported */
  }
}

#endif /* PRUDENCE_RCU_H */
