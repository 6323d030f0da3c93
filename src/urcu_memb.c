/*
 * urcu_memb.c: the "urcu-memb" grace-period source, over liburcu's memb flavour (part of
 * libprudence-urcu; the core library never depends on liburcu).
 *
 * 1. Grace periods are urcu_memb_synchronize_rcu(), called by prudence's driver thread (or by a
 *    thread in prd_synchronize_rcu) with prudence's gp_lock dropped (rcu.c §8: GP_EXT),
 *    after the (W1) barrier of src/rcu.c §4; liburcu's own barriers (membarrier, or fences)
 *    order its readers.
 * 2. Readers use liburcu's urcu_memb_read_lock(); urcu_memb_read_ongoing() lets prudence detect
 *    a blocking call inside a read-side section.  The memb flavour has no quiescent states.
 * 3. A constructor registers the source by name (option rcu=urcu-memb).  A program that picks
 *    it by that option alone refers to nothing here, so the ways to link the library keep it
 *    linked under --as-needed (include/prudence_urcu.h, cmake/prudence-urcu.pc.in,
 *    prudence::urcu); without it the option ends the process (src/rcu.c §6).  One file per
 *    flavour keeps each flavour's headers (and their name-mapping macros) to themselves.
 */
#define _LGPL_SOURCE   /* URCU_TLS(urcu_memb_reader): the registration test below */
#include <urcu/urcu-memb.h>

#include "prudence_urcu.h"

/* Registration as liburcu sees it.  A thread may be registered through liburcu's own call as
 * well as through prd_rcu_register_thread, and unregistered through either; liburcu's
 * register and unregister each assert the opposite state and end the process.  So the
 * source's calls act only when the state must change: a second registration, an
 * unregistration of a thread liburcu never registered or already unregistered (the exit
 * destructor after the program's own urcu_memb_unregister_thread) do nothing.  The flag
 * is liburcu's own, set and cleared by the thread itself, so reading it needs no order. */
static void memb_register(void)
{
  if (!URCU_TLS(urcu_memb_reader).registered)
    urcu_memb_register_thread();
}

static void memb_unregister(void)
{
  if (URCU_TLS(urcu_memb_reader).registered)
    urcu_memb_unregister_thread();
}

const struct prd_rcu_source prd_rcu_urcu_memb = {
  .rs_name = "urcu-memb",
  .rs_synchronize = urcu_memb_synchronize_rcu,
  .rs_register_thread = memb_register,
  .rs_unregister_thread = memb_unregister,
  .rs_quiescent_state = NULL,
  .rs_thread_offline = NULL,
  .rs_thread_online = NULL,
  .rs_read_ongoing = urcu_memb_read_ongoing,
  .rs_block_begin = NULL,
  .rs_block_end = NULL,
};

__attribute__((constructor)) static void urcu_memb_source_register(void)
{
  (void)prd_rcu_register_source(&prd_rcu_urcu_memb);
}
