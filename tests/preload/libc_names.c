/* glibc's own names of its allocator (__libc_malloc, ...), which some programs call to reach
 * "the real malloc": under the preloaded allocator a block from one of them is freed by free,
 * and a block from malloc by __libc_free.  Under glibc the same program runs as well.  A
 * preloaded allocator that does not define them hands such a block to glibc's allocator, and
 * free then reports a pointer it never made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

int main(void)
{
  for (size_t n = 1; n <= (1u << 22); n *= 3) {
    char *a = __libc_malloc(n);
    char *b = malloc(n);
    char *c = __libc_calloc(1, n);
    if (a == NULL || b == NULL || c == NULL)
      return 1;
    memset(a, 1, n);
    memset(b, 2, n);
    for (size_t i = 0; i < n; i++)
      if (c[i] != 0)
        return 2;
    a = __libc_realloc(a, 2 * n);
    b = realloc(b, n + 100);
    if (a == NULL || b == NULL || a[n - 1] != 1 || b[n - 1] != 2)
      return 3;
    free(a);
    __libc_free(b);
    free(c);
  }
  void *m = __libc_memalign(4096, 100), *v = __libc_valloc(100), *p = __libc_pvalloc(100);
  if (m == NULL || v == NULL || p == NULL || ((size_t)m | (size_t)v | (size_t)p) % 4096 != 0)
    return 4;
  free(m);
  __libc_free(v);
  free(p);
  puts("libc names: ok");
  return 0;
}
