/* examples/preload.c: an unchanged program on Prudence's malloc, through LD_PRELOAD.
 *
 * An ordinary C program: plain malloc, calloc, realloc and free from four threads, and no
 * call into libprudence.  Run as is, the C library's malloc serves it.  Run with
 * libprudence-malloc.so preloaded, every block comes from Prudence instead: the small ones
 * from the size-class caches malloc-8 .. malloc-16384 (src/malloc.c section 2, each a slab
 * cache with per-thread magazines), the larger ones from the heap arena:
 *
 *   ./build/bin/preload
 *   LD_PRELOAD=$PWD/build/lib/libprudence-malloc.so ./build/bin/preload
 *   LD_PRELOAD=$PWD/build/lib/libprudence-malloc.so PRUDENCE_STATS=1 ./build/bin/preload
 *                                   the statistics table at exit, on stderr: malloc-N rows
 *   LD_PRELOAD=$PWD/build/lib/libprudence-malloc.so PRUDENCE_STATS_FILE=/tmp/p.json \
 *     ./build/bin/preload && ./build/bin/prdstat /tmp/p.json --sort mag_allocs
 *   cc preload.c $(pkg-config --libs prudence-malloc) -pthread    linked in instead
 *
 * Which allocator answered shows without asking it anything: malloc_usable_size of a
 * 100-byte block is the C library's chunk arithmetic (glibc: 104) or Prudence's size class
 * for 100 bytes (112).  The program checks every byte it wrote when it reads it back, so a
 * block handed out twice or a realloc that lost data makes it exit non-zero; its output
 * (but for the usable size) is the same under either allocator.  tests/preload/run.sh
 * (case example) runs it both ways and checks the statistics of the preloaded run;
 * tests/install/run.sh links it with the installed libprudence-malloc.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS  4
#define STRINGS  5000          /* list nodes per thread, 1..300 bytes of text each */
#define GROW_MAX (2u << 20)    /* the realloc'd buffer grows to 2 MiB: classes, then big blocks */
#define ARRAYS   2000          /* calloc'd arrays per thread */

struct node {
  struct node *n_next;
  size_t n_len;
  char n_text[];
};

struct worker {
  pthread_t w_thread;
  uint64_t w_seed;
  int w_errors;            /* bytes read back that differ from what was written */
  uint64_t w_sum;          /* FNV-1a of every string, in list order */
};

static uint64_t next_rand(uint64_t *s)   /* xorshift64 */
{
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

static void *work(void *arg)
{
  struct worker *w = arg;
  uint64_t rng = w->w_seed;

  /* a list of strings of random length, then read back in order and freed */
  struct node *head = NULL, **tail = &head;
  for (int i = 0; i < STRINGS; i++) {
    size_t len = 1 + next_rand(&rng) % 300;
    struct node *n = malloc(sizeof(*n) + len);
    if (n == NULL)
      return NULL;
    n->n_next = NULL;
    n->n_len = len;
    for (size_t j = 0; j < len; j++)
      n->n_text[j] = (char)('a' + (i + j) % 26);
    *tail = n;
    tail = &n->n_next;
  }
  uint64_t h = 1469598103934665603ull;
  int i = 0;
  for (struct node *n = head; n != NULL; i++) {
    for (size_t j = 0; j < n->n_len; j++)
      w->w_errors += n->n_text[j] != (char)('a' + (i + j) % 26);
    h = fnv(h, n->n_text, n->n_len);
    struct node *next = n->n_next;
    free(n);
    n = next;
  }
  w->w_sum = h;

  /* a buffer grown by realloc, its contents checked after every move */
  size_t cap = 16, used = 0;
  unsigned char *buf = malloc(cap);
  while (buf != NULL && cap < GROW_MAX) {
    while (used < cap) {
      buf[used] = (unsigned char)(used * 7);
      used++;
    }
    cap += cap / 2 + next_rand(&rng) % 64;
    unsigned char *nb = realloc(buf, cap);
    if (nb == NULL)
      break;
    buf = nb;
    for (size_t j = 0; j < used; j += 61)
      w->w_errors += buf[j] != (unsigned char)(j * 7);
  }
  free(buf);

  /* calloc'd arrays: zero when handed out, even where an earlier block was written */
  for (int a = 0; a < ARRAYS; a++) {
    size_t count = 1 + next_rand(&rng) % 500;
    uint32_t *arr = calloc(count, sizeof(*arr));
    if (arr == NULL)
      return NULL;
    for (size_t j = 0; j < count; j++) {
      w->w_errors += arr[j] != 0;
      arr[j] = (uint32_t)(j | 0x80000000u);
    }
    free(arr);
  }
  return w;
}

int main(void)
{
  struct worker w[THREADS];
  for (int t = 0; t < THREADS; t++) {
    w[t].w_seed = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
    w[t].w_errors = 0;
    if (pthread_create(&w[t].w_thread, NULL, work, &w[t]) != 0) {
      fprintf(stderr, "preload: pthread_create failed\n");
      return 1;
    }
  }
  int errors = 0, failed = 0;
  uint64_t sum = 0;
  for (int t = 0; t < THREADS; t++) {
    void *r;
    pthread_join(w[t].w_thread, &r);
    failed += r == NULL;
    errors += w[t].w_errors;
    sum ^= w[t].w_sum;
  }
  printf("preload: %d threads, each %d strings in a list, a buffer realloc'd to %u KiB, "
         "%d calloc'd arrays\n", THREADS, STRINGS, GROW_MAX >> 10, ARRAYS);
  printf("preload: contents read back: %d wrong bytes, %d threads out of memory, "
         "checksum %016llx\n", errors, failed, (unsigned long long)sum);

  /* which allocator served us: glibc rounds 100 + 8 bytes of header to 112 and reports
   * 104; Prudence reports its size class */
  void *p = malloc(100);
  printf("preload: malloc_usable_size(malloc(100)) = %zu\n", malloc_usable_size(p));
  free(p);
  return errors == 0 && failed == 0 ? 0 : 1;
}
