/* examples/objcache.c: an object cache with a constructor (the slab allocator's object
 * caching, Bonwick 1994 §2).
 *
 * A "session" holds a mutex and a 4 KiB scratch buffer.  Initializing the mutex and mapping
 * the buffer is the expensive part; the cache does it once per object, when the object is
 * first made, and keeps the object constructed while it is free: prd_cache_alloc returns a
 * ready session, prd_cache_free takes it back without destroying it.  The destructor runs
 * only when the cache gives the memory back.
 *
 *   cc objcache.c $(pkg-config --cflags --libs prudence) -o objcache && ./objcache
 *   PRUDENCE_STATS=1 ./objcache           also prints the statistics table at exit
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <prudence.h>

struct session {
  pthread_mutex_t s_lock;   /* constructed: initialized once, kept across uses */
  char *s_scratch;          /* constructed: a 4 KiB buffer, kept across uses */
  unsigned s_id;            /* set by each user */
  unsigned s_uses;          /* how often this object was handed out (shows the reuse) */
};

static int constructed, destructed;

static int session_ctor(void *buf, void *priv, int flags)
{
  (void)priv;
  (void)flags;
  struct session *s = buf;
  s->s_scratch = malloc(4096);
  if (s->s_scratch == NULL)
    return -1;   /* the allocation fails cleanly; nothing half-built stays */
  pthread_mutex_init(&s->s_lock, NULL);
  s->s_uses = 0;
  constructed++;
  return 0;
}

static void session_dtor(void *buf, void *priv)
{
  (void)priv;
  struct session *s = buf;
  pthread_mutex_destroy(&s->s_lock);
  free(s->s_scratch);
  destructed++;
}

int main(void)
{
  prd_cache_t *cache = prd_cache_create("session", sizeof(struct session), 0, session_ctor,
                                        session_dtor, NULL, NULL, NULL, 0);
  if (cache == NULL) {
    perror("prd_cache_create");
    return 1;
  }
  /* 10 rounds of 100 sessions in use at once: 1000 allocations, 100 constructions */
  struct session *live[100];
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < 100; i++) {
      struct session *s = prd_cache_alloc(cache, PRD_SLEEP);
      if (s == NULL) {
        perror("prd_cache_alloc");
        return 1;
      }
      pthread_mutex_lock(&s->s_lock);   /* ready to use: no initialization here */
      s->s_id = (unsigned)(round * 100 + i);
      s->s_uses++;
      snprintf(s->s_scratch, 4096, "session %u", s->s_id);
      pthread_mutex_unlock(&s->s_lock);
      live[i] = s;
    }
    for (int i = 0; i < 100; i++)
      prd_cache_free(cache, live[i]);
  }
  prd_cache_stats_t st = PRD_CACHE_STATS_INIT;
  prd_cache_stats(cache, &st);
  printf("cache %s: %llu allocations (%llu from the slabs), %d constructions, %llu objects in "
         "%llu bytes of slabs\n", st.name,
         (unsigned long long)(st.mag_size != 0 ? st.mag_allocs : st.allocs),
         (unsigned long long)st.allocs, constructed, (unsigned long long)st.bufs_total,
         (unsigned long long)st.slab_bytes);
  prd_stats_print(stdout, PRD_STATS_NOINTERNAL | PRD_STATS_NOARENAS);   /* every cache */
  prd_cache_destroy(cache);
  printf("destroyed: %d destructions\n", destructed);
  /* every allocation was served (by the per-thread magazines, or by the slabs when the
   * magazine layer is off); the constructor ran once per object, not per allocation */
  uint64_t served = st.mag_size != 0 ? st.mag_allocs : st.allocs;
  int ok = served == 1000 && constructed >= 100 && constructed < 1000 &&
           destructed == constructed;
  printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
