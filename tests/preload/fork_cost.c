/* What a fork child of a threaded program pays before its first line (docs/benchmarks.md):
 * NT threads (default 1) allocate and free blocks of 1 B - 70 KB in a window of 256 slots,
 * writing each block's first 64 bytes; after 200 ms the main thread forks NF times (default 5),
 * 100 ms apart, and each child prints its CPU time (user + system) and minor page faults, as
 * getrusage counts them at its start, and exits.  Works under any allocator.
 *
 *   LD_PRELOAD=build/lib/libprudence-malloc.so build/bin/preload_fork_cost [NT [NF]] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOTS 256
#define MAX_THREADS 64

static atomic_int stop;

static void *worker(void *arg)
{
  (void)arg;
  void *slot[SLOTS] = { 0 };
  unsigned s = 1;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    s = s * 1103515245u + 12345u;
    unsigned i = (s >> 8) % SLOTS;
    free(slot[i]);
    size_t n = 1 + (s >> 16) % 70000;
    slot[i] = malloc(n);
    if (slot[i] != NULL)
      memset(slot[i], 1, n < 64 ? n : 64);
  }
  for (int i = 0; i < SLOTS; i++)
    free(slot[i]);
  return NULL;
}

int main(int argc, char **argv)
{
  int nt = argc > 1 ? atoi(argv[1]) : 1;
  int nf = argc > 2 ? atoi(argv[2]) : 5;
  if (nt < 1 || nt > MAX_THREADS || nf < 1) {
    fprintf(stderr, "usage: %s [threads 1-%d [forks]]\n", argv[0], MAX_THREADS);
    return 2;
  }
  pthread_t t[MAX_THREADS];
  for (int i = 0; i < nt; i++)
    if (pthread_create(&t[i], NULL, worker, NULL) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  usleep(200000);
  for (int k = 0; k < nf; k++) {
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
      struct rusage ru;
      getrusage(RUSAGE_SELF, &ru);
      double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
      printf("child %d: cpu %.2f ms, minor faults %ld\n", k, cpu, ru.ru_minflt);
      fflush(stdout);
      _exit(0);
    }
    if (p < 0) {
      perror("fork");
      return 1;
    }
    waitpid(p, NULL, 0);
    usleep(100000);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < nt; i++)
    pthread_join(t[i], NULL);
  return 0;
}
