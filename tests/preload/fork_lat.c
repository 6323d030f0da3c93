/* What fork() costs the forking thread of a threaded program (docs/benchmarks.md): NT threads
 * (default 1) each allocate and free 20 rounds of 256 blocks of 16 B - 64 KiB, then wait
 * (sleeping 1 ms at a time) or, with BUSY = 1, go on allocating and freeing blocks of up to
 * 4 KiB; the main thread then forks NF times (default 40), 2 ms apart, each child making one
 * malloc and free and leaving with _exit.  Prints the median time of fork() in the parent
 * and the parent's minor page faults per fork (getrusage around each call).  Works under any
 * allocator.
 *
 *   LD_PRELOAD=build/lib/libprudence-malloc.so build/bin/preload_fork_lat [NT [NF [BUSY]]] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 512

static atomic_int stop, ready;
static int busy;

static void *worker(void *arg)
{
  (void)arg;
  void *p[256];
  unsigned s = 1;
  for (int r = 0; r < 20; r++) {
    for (int i = 0; i < 256; i++) {
      s = s * 1103515245u + 12345u;
      p[i] = malloc(16 + (s >> 8) % 65536);
      if (p[i] != NULL)
        memset(p[i], 1, 16);
    }
    for (int i = 0; i < 256; i++)
      free(p[i]);
  }
  atomic_fetch_add(&ready, 1);
  while (!atomic_load(&stop)) {
    if (!busy) {
      usleep(1000);
      continue;
    }
    for (int i = 0; i < 64; i++) {
      s = s * 1103515245u + 12345u;
      p[i] = malloc(16 + (s >> 8) % 4096);
    }
    for (int i = 0; i < 64; i++)
      free(p[i]);
  }
  return NULL;
}

static double now_us(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
  int nt = argc > 1 ? atoi(argv[1]) : 1, nf = argc > 2 ? atoi(argv[2]) : 40;
  busy = argc > 3 ? atoi(argv[3]) : 0;
  if (nt < 0 || nt > MAX_THREADS || nf < 1) {
    fprintf(stderr, "usage: preload_fork_lat [NT (0-%d) [NF (>0) [BUSY]]]\n", MAX_THREADS);
    return 2;
  }
  static pthread_t t[MAX_THREADS];
  for (int i = 0; i < nt; i++)
    if (pthread_create(&t[i], NULL, worker, NULL) != 0)
      return 1;
  while (atomic_load(&ready) < nt)
    usleep(1000);
  double *d = malloc(sizeof(double) * (size_t)nf);
  if (d == NULL)
    return 1;
  long faults = 0;
  for (int i = 0; i < nf; i++) {
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double t0 = now_us();
    pid_t pid = fork();
    if (pid == 0) {
      free(malloc(100));
      _exit(0);
    }
    d[i] = now_us() - t0;
    getrusage(RUSAGE_SELF, &r1);
    faults += r1.ru_minflt - r0.ru_minflt;
    if (pid > 0)
      waitpid(pid, NULL, 0);
    usleep(2000);
  }
  qsort(d, (size_t)nf, sizeof(double), cmp);
  printf("threads %d%s: fork() median %.0f us, parent page faults per fork %.1f\n", nt,
         busy ? " allocating" : " idle", d[nf / 2], (double)faults / nf);
  atomic_store(&stop, 1);
  for (int i = 0; i < nt; i++)
    pthread_join(t[i], NULL);
  free(d);
  return 0;
}
