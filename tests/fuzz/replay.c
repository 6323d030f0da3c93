/*
 * replay.c: runs fuzz_ops.c's LLVMFuzzerTestOneInput on files, without libFuzzer, so that
 * every build (gcc Debug, ASan, TSan, under LD_PRELOAD) replays the seed corpus and every
 * input the fuzzer ever found (tests/fuzz/corpus; ctest's fuzz_corpus).
 *
 *   fuzz_ops_replay PATH...   each PATH a file or a directory of files (not recursive);
 *                             prints one line per input, exits 1 if one could not be read
 *   fuzz_ops_replay --make-seeds DIR   writes the structured seeds (fuzz_ops.c) into DIR
 * A failed check in the harness aborts with the step and what failed (fuzz_ops.c).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_ops_write_seeds(const char *dir);

static int replay_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (size_t r; buf != NULL && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += r;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (nb == NULL)
        free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf == NULL) {
    fprintf(stderr, "%s: no memory\n", path);
    return 1;
  }
  printf("replay %s (%zu bytes)\n", path, n);
  fflush(stdout);
  LLVMFuzzerTestOneInput(buf, n);
  free(buf);
  return 0;
}

static int cmp(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_path(const char *path)
{
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    return 1;
  }
  if (!S_ISDIR(st.st_mode))
    return replay_file(path);
  DIR *d = opendir(path);
  if (d == NULL) {
    perror(path);
    return 1;
  }
  char **names = NULL;
  size_t n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.')
      continue;
    char **nn = realloc(names, (n + 1) * sizeof(*names));
    if (nn == NULL)
      break;
    names = nn;
    size_t len = strlen(path) + strlen(e->d_name) + 2;
    if ((names[n] = malloc(len)) == NULL)
      break;
    snprintf(names[n++], len, "%s/%s", path, e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof(*names), cmp);   /* the same order on every run */
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    bad |= replay_file(names[i]);
    free(names[i]);
  }
  free(names);
  return bad;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE|DIR...  or  %s --make-seeds DIR\n", argv[0], argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "--make-seeds") == 0)
    return argc == 3 ? fuzz_ops_write_seeds(argv[2]) : 2;
  LLVMFuzzerInitialize(&argc, &argv);
  int bad = 0;
  for (int i = 1; i < argc; i++)
    bad |= replay_path(argv[i]);
  printf("%s\n", bad ? "replay: some inputs could not be read" : "replay: all inputs passed");
  return bad;
}
