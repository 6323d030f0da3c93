/*
 * race.h: race widening, the delay injection of the Debug and TSan builds (race.c has the
 * statement).
 *
 * PRD_RACE() marks one step of a concurrent protocol (the handshake of magazine.c section 6 on
 * both sides, the grace-period machine of rcu.c, the latent transitions of defer.c).  With the
 * option race_delay=N it pauses there now and then (race.c), so that an interleaving that needs
 * a thread to stop between two steps happens in seconds instead of once a week.  It expands to
 * nothing unless the build has the hooks (PRD_RACE_HOOKS: Debug, TSan, or the CMake option
 * PRD_RACE_DELAY): Release's hit paths carry no trace of it.
 *
 * prd__mag_broken_handshake (hooks builds only) is the torture's switch that restores the
 * owner's old order (CPU-cache loads before the steal test, magazine.h prd__mag_late_steal): it
 * exists to show that the torture finds that defect, never to be set otherwise.
 * prd__rcu_broken_count (hooks builds only) is rcu_torture's switch that makes the counted
 * grace period (rcu.c §3) take a reader whose count is one flip behind for one that began
 * after the flip: the same, for the count's comparison.
 */
#ifndef PRD_RACE_H
#define PRD_RACE_H

#include "internal.h"

#if defined(PRD_DEBUG) || defined(PRD_TSAN) || defined(PRD_RACE_DELAY)
#define PRD_RACE_HOOKS 1
/* One pause, or none, as the option race_delay draws it (out of line: the caller pays one
 * load and one branch while the option is 0). */
PRD_NOINLINE PRD_COLD void prd__race_pause(void);
#define PRD_RACE() \
  (prd_unlikely(prd__opt(race_delay) != 0) ? prd__race_pause() : (void)0)
extern bool prd__mag_broken_handshake;
extern bool prd__rcu_broken_count;
#else
#define PRD_RACE() ((void)0)
#define prd__mag_broken_handshake false
#define prd__rcu_broken_count false
#endif

#endif
