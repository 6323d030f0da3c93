/*
 * urcu_qsbr.c: the "urcu-qsbr" grace-period source, over liburcu's QSBR flavour (part of
 * libprudence-urcu).
 *
 * 1. Grace periods are urcu_qsbr_synchronize_rcu(), run by prudence's driver thread (not a
 *    QSBR thread) with prudence's gp_lock dropped (rcu.c §8: GP_EXT).  Registered threads
 *    must announce quiescent states (prd_rcu_quiescent_state or urcu_qsbr_quiescent_state)
 *    or go offline around blocking.
 * 2. Blocking in prudence: a thread that waits for a grace period (prd_synchronize_rcu,
 *    prd_rcu_wait_state, prd_rcu_barrier) is put offline while it waits (rs_block_begin /
 *    rs_block_end) when it was online, or every grace period would wait for it: a deadlock.
 * 3. An online QSBR thread is not necessarily inside a read-side section (QSBR read locks are
 *    empty), so this source cannot detect a synchronize inside one: rs_read_ongoing is NULL.
 */
#define _LGPL_SOURCE   /* URCU_TLS(urcu_qsbr_reader): the registration test below */
#include <urcu/urcu-qsbr.h>

#include "prudence_urcu.h"

/* Registration as liburcu sees it: acted on only when liburcu's own per-thread flag says the
 * state must change (urcu_memb.c says why). */
static void qsbr_register(void)
{
  if (!URCU_TLS(urcu_qsbr_reader).registered)
    urcu_qsbr_register_thread();
}

static void qsbr_unregister(void)
{
  if (URCU_TLS(urcu_qsbr_reader).registered)
    urcu_qsbr_unregister_thread();
}

static int qsbr_block_begin(void)
{
  int online = urcu_qsbr_read_ongoing();
  if (online)
    urcu_qsbr_thread_offline();
  return online;
}

static void qsbr_block_end(int was_online)
{
  if (was_online)
    urcu_qsbr_thread_online();
}

const struct prd_rcu_source prd_rcu_urcu_qsbr = {
  .rs_name = "urcu-qsbr",
  .rs_synchronize = urcu_qsbr_synchronize_rcu,
  .rs_register_thread = qsbr_register,
  .rs_unregister_thread = qsbr_unregister,
  .rs_quiescent_state = urcu_qsbr_quiescent_state,
  .rs_thread_offline = urcu_qsbr_thread_offline,
  .rs_thread_online = urcu_qsbr_thread_online,
  .rs_read_ongoing = NULL,
  .rs_block_begin = qsbr_block_begin,
  .rs_block_end = qsbr_block_end,
};

__attribute__((constructor)) static void urcu_qsbr_source_register(void)
{
  (void)prd_rcu_register_source(&prd_rcu_urcu_qsbr);
}
