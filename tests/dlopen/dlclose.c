/* dlclose of the libraries: a program that is not linked with libprudence dlopen()s it, uses
 * it from its own threads (each gets magazines and the library's thread-exit key), starts the
 * library's threads (a second thread, deferred frees, a grace period, a call_rcu callback),
 * dlclose()s it, lets its threads exit and runs on, then opens it again.  The libraries are
 * linked with -z nodelete (CMakeLists.txt): their threads and key destructors outlive any
 * dlclose, so the library stays mapped and the second dlopen finds the same copy.  Without it
 * the process died of SIGSEGV after the dlclose, in a key destructor or a library thread.
 *
 *   test_dlclose LIBRARY [FLAG]   (FLAG: local (default) or global, the dlopen mode) */
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void *(*malloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void (*void_fn)(void);

static malloc_fn p_malloc;
static free_fn p_free, p_free_deferred;
static sem_t used, closed;

static void *worker(void *arg)
{
  (void)arg;
  for (int i = 0; i < 1000; i++) {
    void *p = p_malloc(64 + (size_t)i % 512);
    if (i % 2)
      p_free(p);
    else
      p_free_deferred(p);
  }
  sem_post(&used);
  while (sem_wait(&closed) != 0)
    ;
  return NULL;   /* exits after the dlclose: the library's key destructor runs now */
}

static void *load(const char *lib, int mode, void **h)
{
  *h = dlopen(lib, RTLD_NOW | mode);
  if (*h == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
    exit(1);
  }
  p_malloc = (malloc_fn)dlsym(*h, "prd_malloc");
  p_free = (free_fn)dlsym(*h, "prd_free");
  p_free_deferred = (free_fn)dlsym(*h, "prd_free_deferred");
  void *sync = dlsym(*h, "prd_synchronize_rcu");
  if (p_malloc == NULL || p_free == NULL || p_free_deferred == NULL || sync == NULL) {
    fprintf(stderr, "dlsym: %s\n", dlerror());
    exit(1);
  }
  return sync;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: test_dlclose LIBRARY [local|global]\n");
    return 2;
  }
  int mode = argc > 2 && strcmp(argv[2], "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL;
  void *first = NULL;
  for (int round = 0; round < 2; round++) {
    void *h;
    void_fn sync = (void_fn)load(argv[1], mode, &h);
    if (round == 0)
      first = (void *)p_malloc;
    else if ((void *)p_malloc != first) {
      fprintf(stderr, "the second dlopen mapped another copy of the library\n");
      return 1;
    }
    sem_init(&used, 0, 0);
    sem_init(&closed, 0, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
      if (pthread_create(&t[i], NULL, worker, NULL) != 0) {
        perror("pthread_create");
        return 1;
      }
    for (int i = 0; i < 2; i++)
      while (sem_wait(&used) != 0)
        ;
    sync();   /* a grace period: the library's driver thread runs */
    for (int i = 0; i < 100; i++)
      p_free_deferred(p_malloc(100));
    if (dlclose(h) != 0) {
      fprintf(stderr, "dlclose: %s\n", dlerror());
      return 1;
    }
    for (int i = 0; i < 2; i++)
      sem_post(&closed);
    for (int i = 0; i < 2; i++)
      pthread_join(t[i], NULL);
    usleep(300000);   /* the library's threads wake (pacing, maintenance) meanwhile */
    sem_destroy(&used);
    sem_destroy(&closed);
  }
  puts("ok - the library survived dlclose twice");
  return 0;
}
