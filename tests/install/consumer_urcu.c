/*
 * consumer_urcu.c: a liburcu program that picks Prudence's grace-period source with the
 * option only (PRUDENCE_OPTIONS=rcu=urcu-memb) and does not include prudence_urcu.h, so
 * nothing in it refers to libprudence-urcu.  The defect this guards: linked with
 * -lprudence-urcu under --as-needed (the default of Debian's and Ubuntu's toolchains), the
 * linker dropped the adapter, and the library fell back to its built-in RCU, which does not
 * see liburcu's readers.  tests/install/run.sh links it the documented ways (pkg-config
 * prudence-urcu, CMake prudence::urcu) with --as-needed and expects the option honoured: the
 * source is urcu-memb and a grace period waits for a liburcu reader.  Linked with a bare
 * -lprudence-urcu it must instead exit non-zero, naming the option (never fall back).
 */
#include <urcu/urcu-memb.h>

#include <prudence.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int reader_in, reader_out;

static void *reader(void *arg)
{
  (void)arg;
  urcu_memb_register_thread();
  urcu_memb_read_lock();
  atomic_store(&reader_in, 1);
  struct timespec ts = { 0, 200 * 1000 * 1000 }; /* a grace period must outlast this */
  nanosleep(&ts, NULL);
  atomic_store(&reader_out, 1);
  urcu_memb_read_unlock();
  urcu_memb_unregister_thread();
  return NULL;
}

int main(void)
{
  pthread_t t;
  pthread_create(&t, NULL, reader, NULL);
  while (!atomic_load(&reader_in))
    sched_yield();
  prd_synchronize_rcu(); /* fixes the source: the option's, or the process ends */
  int waited = atomic_load(&reader_out);
  pthread_join(t, NULL);
  const char *name = prd_rcu_get_source()->rs_name;
  printf("source=%s waited_for_reader=%d\n", name, waited);
  return strcmp(name, "urcu-memb") == 0 && waited ? 0 : 1;
}
