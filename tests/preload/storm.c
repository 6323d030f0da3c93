/* Threads that come and go, deferring (docs/benchmarks.md): NT threads at a
 * time on however many cores, each making ITER malloc/free steps over 32 slots
 * of patterned blocks (a quarter of its frees through prd_free_deferred when
 * the preloaded allocator has it), some blocks handed to other threads through
 * an exchange array, an RCU reader in short sections all the while; WAVES waves
 * of NT threads created and joined.  Works under any allocator (the prd_
 * functions are looked up with dlsym): NODEFER=1 frees everything at once,
 * NOREADER=1 runs no reader, SMALL=1 keeps sizes at 8 KiB and under.  Prints
 * the time and the peak RSS.
 *
 *   LD_PRELOAD=build/lib/libprudence-malloc.so SMALL=1 build/bin/preload_storm
 * 200 4 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
static int getenv_small;
static void (*fdef)(void *);
static void (*rl)(void);
static void (*ru)(void);
#define XS 4096
static _Atomic(unsigned long *) xchg[XS];
static atomic_int stop;
static atomic_long bad, ops, created, createfail;
static int NT = 200, ITER = 3000;
static inline void mark(unsigned long *p, size_t n) {
  p[0] = (unsigned long)p ^ 0xabcdef;
  p[n / 8 - 1] = ~(unsigned long)p;
}
static inline int ok(unsigned long *p, size_t n) {
  return p[0] == ((unsigned long)p ^ 0xabcdef) &&
         p[n / 8 - 1] == ~(unsigned long)p;
}
static size_t szof(unsigned long r) {
  static const size_t s[] = {24,  32,   48,   64,   96,    128,  256,
                             512, 1024, 4096, 8192, 20000, 70000};
  return s[r % (getenv_small ? 11 : 13)];
}
static void *worker(void *a) {
  unsigned long r = (unsigned long)a * 2654435761u + 1;
  unsigned long *mine[32] = {0};
  size_t msz[32];
  for (int i = 0; i < ITER && !stop; i++) {
    r = r * 6364136223846793005ul + 1442695040888963407ul;
    int k = (r >> 33) % 32;
    if (mine[k]) {
      if (!ok(mine[k], msz[k]))
        bad++;
      if (fdef && (r >> 40) % 4 == 0)
        fdef(mine[k]);
      else
        free(mine[k]);
    }
    size_t n = szof(r >> 20);
    unsigned long *p = malloc(n);
    if (!p) {
      bad++;
      continue;
    }
    mark(p, n);
    p[1] = n;
    mine[k] = p;
    msz[k] = n;
    /* cross-thread: swap with the exchange slot */
    if ((r >> 50) % 4 == 0) {
      unsigned long *q = malloc(64);
      mark(q, 64);
      q[1] = 64;
      unsigned long *o = atomic_exchange(&xchg[(r >> 8) % XS], q);
      if (o) {
        if (!ok(o, o[1]))
          bad++;
        free(o);
      }
    }
    ops++;
  }
  for (int k = 0; k < 32; k++)
    if (mine[k]) {
      if (!ok(mine[k], msz[k]))
        bad++;
      free(mine[k]);
    }
  return NULL;
}
static void *reader(void *a) {
  (void)a;
  while (!stop) {
    if (rl) {
      rl();
      struct timespec t = {0, 2000000};
      nanosleep(&t, NULL);
      ru();
    } else
      usleep(2000);
  }
  return NULL;
}
int main(int argc, char **argv) {
  getenv_small = getenv("SMALL") != NULL;
  if (getenv("ITER"))
    ITER = atoi(getenv("ITER"));
  if (argc > 1)
    NT = atoi(argv[1]);
  int waves = argc > 2 ? atoi(argv[2]) : 10;
  fdef = getenv("NODEFER") ? NULL : dlsym(RTLD_DEFAULT, "prd_free_deferred");
  rl = getenv("NOREADER") ? NULL : dlsym(RTLD_DEFAULT, "prd_rcu_read_lock");
  ru = dlsym(RTLD_DEFAULT, "prd_rcu_read_unlock");
  pthread_t rt;
  pthread_create(&rt, NULL, reader, NULL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_t *t = calloc(NT, sizeof *t);
  for (int w = 0; w < waves; w++) {
    for (long i = 0; i < NT; i++) {
      int e;
      while ((e = pthread_create(&t[i], NULL, worker, (void *)(w * NT + i))) ==
             EAGAIN) {
        createfail++;
        usleep(1000);
      }
      if (e) {
        printf("create %d\n", e);
        return 2;
      }
      created++;
    }
    for (int i = 0; i < NT; i++)
      pthread_join(t[i], NULL);
  }
  stop = 1;
  pthread_join(rt, NULL);
  for (int i = 0; i < XS; i++) {
    unsigned long *o = xchg[i];
    if (o) {
      if (!ok(o, o[1]))
        bad++;
      free(o);
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  struct rusage ru_;
  getrusage(RUSAGE_SELF, &ru_);
  printf("%s: threads=%ld createfail=%ld ops=%ld bad=%ld time=%.2fs "
         "maxrss=%ldMB\n",
         fdef ? "prudence" : "other", (long)created, (long)createfail,
         (long)ops, (long)bad,
         (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
         ru_.ru_maxrss / 1024);
  return bad ? 1 : 0;
}
