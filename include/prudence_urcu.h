/*
 * prudence_urcu.h: grace-period sources over liburcu (libprudence-urcu, built when liburcu is
 * installed).  Link with `pkg-config --libs prudence-urcu` (or CMake's prudence::urcu), which
 * is libprudence-urcu kept linked even under --as-needed, liburcu and libprudence.
 *
 * Loading the library registers both sources by name, so the option rcu=urcu-memb or
 * rcu=urcu-qsbr selects them; prd_rcu_set_source(&prd_rcu_urcu_memb) does it in code.  With
 * such a source, read sections are liburcu's: the flavour's rcu_read_lock()/rcu_read_unlock()
 * (urcu_memb_read_lock, urcu_qsbr_read_lock), and threads register with liburcu (or through
 * prd_rcu_register_thread, which forwards).  Grace periods are the flavour's synchronize_rcu,
 * run by prudence's driver thread; prd_rcu_get_state/poll_state/call_rcu work unchanged.
 * QSBR: a thread blocked in prd_synchronize_rcu, prd_rcu_wait_state or prd_rcu_barrier is put
 * offline while it waits (and back online after), so it cannot stall the grace period.
 */
#ifndef PRUDENCE_URCU_H
#define PRUDENCE_URCU_H

#include <prudence.h>

#ifdef __cplusplus
extern "C" {
#endif

PRD_API extern const struct prd_rcu_source prd_rcu_urcu_memb; /* "urcu-memb" */
PRD_API extern const struct prd_rcu_source prd_rcu_urcu_qsbr; /* "urcu-qsbr" */

/* Every program that includes this header refers to the adapter, so a linker that drops
 * shared libraries nothing refers to (--as-needed, the default of Debian's and Ubuntu's
 * toolchains) keeps libprudence-urcu: its constructors register the sources that the option
 * rcu=NAME selects.  Without them that option ends the process (it never falls back to a
 * source that cannot see liburcu's readers). */
static const struct prd_rcu_source *const prd__urcu_linked[]
    __attribute__((used, unused)) = { &prd_rcu_urcu_memb, &prd_rcu_urcu_qsbr };

#ifdef __cplusplus
}
#endif
#endif
