/* A program outside the project: uses only <prudence.h> and the installed library. */
#include <errno.h>
#include <prudence.h>
#include <stdio.h>

int main(void)
{
  if (prd_option_set("verbose", "1") != 0 || prd_option_get("verbose") != 1) {
    fprintf(stderr, "consumer: option round trip failed\n");
    return 1;
  }
  errno = 0;
  if (prd_option_get("no_such_option") != -1 || errno != EINVAL) {
    fprintf(stderr, "consumer: unknown option not rejected\n");
    return 1;
  }
  prd_cache_t *cp = prd_cache_create("consumer", 40, 8, NULL, NULL, NULL, NULL, NULL, 0);
  void *a = cp ? prd_cache_alloc(cp, PRD_SLEEP) : NULL;
  void *ids[4];
  prd_vmem_t *ids_arena = prd_vmem_create("consumer-ids", (void *)1, 100, 1, NULL, NULL, NULL,
                                          0, PRD_VM_SLEEP);
  for (int i = 0; i < 4; i++)
    ids[i] = ids_arena ? prd_vmem_alloc(ids_arena, 1, PRD_VM_NOSLEEP | PRD_VM_NEXTFIT) : NULL;
  if (a == NULL || ids[0] != (void *)1 || ids[3] != (void *)4) {
    fprintf(stderr, "consumer: cache or arena failed\n");
    return 1;
  }
  for (int i = 0; i < 4; i++)
    prd_vmem_free(ids_arena, ids[i], 1);
  prd_vmem_destroy(ids_arena);
  prd_cache_free(cp, a);
  prd_cache_destroy(cp);
  printf("consumer: libprudence %d.%d.%d linked\n", PRD_VERSION_MAJOR, PRD_VERSION_MINOR,
         PRD_VERSION_PATCH);
  return 0;
}
