/* examples/rcu_mixed.c: what a server that replaces RCU-protected values of mixed sizes keeps in
 * memory, with prd_free_deferred() against the batch free that many RCU programs use.
 *
 * One writer replaces values in 4,096 shared slots at a steady rate (RATE replacements a
 * millisecond, then a 1 ms sleep): a new value from prd_malloc() of 16 to 528 bytes (one in
 * eight of 16 to 16,400), published with an exchange, the old one retired.  READERS threads read random
 * slots inside prd_rcu_read_lock()/unlock() and check each value's two words.  Retiring is
 * prd_free_deferred(old) in the "deferred" run, and in the "batch" run an array of 1,024
 * retired values, then prd_synchronize_rcu() and prd_free() of them all: the same allocator
 * both times (under libprudence-malloc, prd_malloc is malloc).  Each run is a child
 * process; it prints its RSS after 1 s and at its end, its largest, and the replacements.  A
 * reader that finds a value changed under it fails the program.
 *
 *   cc rcu_mixed.c $(pkg-config --cflags --libs prudence) -o rcu_mixed
 *   ./rcu_mixed [SECONDS [RATE [READERS]]]        (defaults: 2 s, 100, 1)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* usleep; the project's build defines it already */
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <prudence.h>

#define SLOTS 4096
#define BATCH 1024

static uint64_t *_Atomic slot[SLOTS];
static atomic_int stop;
static atomic_ulong bad;

static uint64_t now_ms(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static long rss_kb(void)
{
  long pages = -1, rss = -1;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f != NULL) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
      rss = -1;
    fclose(f);
  }
  return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static uint64_t next_rand(uint64_t *s)
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *reader(void *arg)
{
  uint64_t seed = 0x9e3779b97f4a7c15u + (uintptr_t)arg;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    prd_rcu_read_lock();
    uint64_t *v = atomic_load_explicit(&slot[next_rand(&seed) % SLOTS], memory_order_acquire);
    if (v != NULL) {
      uint64_t g = v[0];
      if (v[1] != ~g)
        atomic_fetch_add(&bad, 1);
      for (volatile int k = 0; k < 50; k++)
        ;
      if (v[0] != g)   /* freed and handed out again inside the section */
        atomic_fetch_add(&bad, 1);
    }
    prd_rcu_read_unlock();
  }
  return NULL;
}

static int run(int deferred, int seconds, int rate, int readers)
{
  pthread_t th[16];
  for (int i = 0; i < readers; i++)
    if (pthread_create(&th[i], NULL, reader, (void *)(uintptr_t)i) != 0)
      return 2;
  static void *batch[BATCH];
  int nb = 0;
  uint64_t seed = 1, g = 0, t0 = now_ms();
  unsigned long updates = 0;
  long first = -1, most = 0, last = 0;
  for (uint64_t t = t0; t - t0 < (uint64_t)seconds * 1000; t = now_ms()) {
    for (int k = 0; k < rate; k++) {
      size_t size = 16 + next_rand(&seed) % ((next_rand(&seed) & 7) ? 512 : 16384);
      uint64_t *v = prd_malloc(size);
      if (v == NULL)
        return 2;
      v[0] = ++g;
      v[1] = ~g;
      uint64_t *old = atomic_exchange(&slot[next_rand(&seed) % SLOTS], v);
      if (old == NULL)
        continue;
      if (deferred) {
        prd_free_deferred(old);
      } else {
        batch[nb++] = old;
        if (nb == BATCH) {
          prd_synchronize_rcu();
          for (int i = 0; i < nb; i++)
            prd_free(batch[i]);
          nb = 0;
        }
      }
    }
    updates += (unsigned long)rate;
    usleep(1000);
    last = rss_kb();
    most = last > most ? last : most;
    if (first < 0 && now_ms() - t0 >= 1000)
      first = last;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < readers; i++)
    pthread_join(th[i], NULL);
  printf("%-8s RSS after 1 s %6ld kB, at the end %6ld kB, largest %6ld kB; %lu replacements, "
         "%lu bad reads\n", deferred ? "deferred" : "batch", first, last, most, updates,
         atomic_load(&bad));
  fflush(stdout);   /* the child ends with _exit */
  return atomic_load(&bad) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
  int seconds = argc > 1 ? atoi(argv[1]) : 2;
  int rate = argc > 2 ? atoi(argv[2]) : 100;
  int readers = argc > 3 ? atoi(argv[3]) : 1;
  if (seconds < 1 || rate < 1 || readers < 0 || readers > 16) {
    fprintf(stderr, "usage: rcu_mixed [SECONDS [RATE [READERS (0-16)]]]\n");
    return 2;
  }
  int rc = 0;
  for (int deferred = 1; deferred >= 0; deferred--) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
      return 2;
    if (pid == 0)
      _exit(run(deferred, seconds, rate, readers));
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      rc = 1;
  }
  return rc;
}
