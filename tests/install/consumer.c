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
  printf("consumer: libprudence %d.%d linked\n", PRD_VERSION_MAJOR, PRD_VERSION_MINOR);
  return 0;
}
