/* A plugin that carries its own copy of the library, linked from libprudence.a (a module of
 * test_dlclose): the prd_ functions it uses are exported from it, as the archive's public
 * names are.  Its copy starts threads and makes exit keys like the shared library, so a
 * dlclose must leave it mapped (thread.c section 7). */
#include <stddef.h>

#include "prudence.h"
#include "prudence_rcu.h"

/* What the program looks up with dlsym; referenced here so that the linker takes the
 * archive's members that define them. */
__attribute__((visibility("default"))) int plugin_uses_prudence(void);
int plugin_uses_prudence(void)
{
  void *p = prd_malloc(32);
  prd_free_deferred(p);
  prd_free(prd_malloc(16));
  prd_synchronize_rcu();
  return 1;
}
