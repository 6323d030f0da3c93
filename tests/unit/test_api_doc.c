/* docs/api.md must name every public function: a test that fails when the headers and the
 * document drift (add a row to docs/api.md when you add a function).
 *
 * The public functions are the prd_ names (not prd__, which are internal) that a header in
 * include/ declares, defines or calls as a function or function-like macro: a name followed by
 * '(' outside comments, in a statement that is not a typedef (prd_ctor_fn and the other
 * callback types are types).  Each must occur in docs/api.md as a whole word.  Each class of
 * include/prudence.hpp must occur as prd::NAME.  The other way: each "prd_name(" that
 * docs/api.md shows must be such a function, so a renamed or removed one is not left there.
 *
 * --drop NAME checks a copy of the document with NAME blanked out: it must fail (the run
 * below marked prd-test-run-fail), which shows the check can fail. */
// prd-test-run: test_api_doc
// prd-test-run-fail: test_api_doc_can_fail --drop prd_cache_alloc
#include <dirent.h>
#include <stdbool.h>

#include "prd_test.h"

#define MAX_NAMES 512

static char doc[1 << 18];
static char names[MAX_NAMES][64];
static int nnames;

static bool ident_char(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static size_t read_file(const char *path, char *buf, size_t len)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "  cannot read %s\n", path);
    return 0;
  }
  size_t n = fread(buf, 1, len - 1, f);
  buf[n] = '\0';
  fclose(f);
  CHECK(n < len - 1);   /* the whole file fits */
  return n;
}

/* Whether word occurs in text with no identifier character on either side. */
static bool has_word(const char *text, const char *word)
{
  size_t wl = strlen(word);
  for (const char *p = strstr(text, word); p != NULL; p = strstr(p + 1, word))
    if ((p == text || !ident_char(p[-1])) && !ident_char(p[wl]))
      return true;
  return false;
}

static bool known(const char *name)
{
  for (int i = 0; i < nnames; i++)
    if (strcmp(names[i], name) == 0)
      return true;
  return false;
}

/* Comments become spaces, so that a name mentioned in prose is not taken for a declaration. */
static void strip_comments(char *s)
{
  for (char *p = s; *p != '\0'; p++) {
    if (p[0] == '/' && p[1] == '*') {
      char *e = strstr(p + 2, "*/");
      char *end = e != NULL ? e + 2 : p + strlen(p);
      memset(p, ' ', (size_t)(end - p));
      p = end - 1;
    } else if (p[0] == '/' && p[1] == '/') {
      while (*p != '\0' && *p != '\n')
        *p++ = ' ';
      if (*p == '\0')
        break;
    }
  }
}

/* The prd_ functions of one C header, added to names[]. */
static void scan_header(char *s)
{
  strip_comments(s);
  const char *stmt = s;   /* where the current statement or preprocessor line began */
  for (char *p = s; *p != '\0'; p++) {
    if (*p == ';' || *p == '{' || *p == '}') {
      stmt = p + 1;
      continue;
    }
    if (*p == '#') {
      stmt = p;
      continue;
    }
    if (strncmp(p, "prd_", 4) != 0 || (p > s && ident_char(p[-1])) || p[4] == '_')
      continue;
    char *e = p;
    while (ident_char(*e))
      e++;
    char *q = e;
    while (*q == ' ' || *q == '\t' || *q == '\n')
      q++;
    size_t len = (size_t)(e - p);
    if (*q == '(' && len < sizeof(names[0])) {
      char name[64];
      memcpy(name, p, len);
      name[len] = '\0';
      char saved = *p;
      *p = '\0';
      bool is_type = has_word(stmt, "typedef");
      *p = saved;
      if (!is_type && !known(name) && nnames < MAX_NAMES)
        strcpy(names[nnames++], name);
    }
    p = e - 1;
  }
}

static char header[1 << 18];

static void test_every_function_documented(void)
{
  DIR *d = opendir(PRD_SOURCE_DIR "/include");
  CHECK(d != NULL);
  if (d == NULL)
    return;
  int headers = 0, classes = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t l = strlen(de->d_name);
    bool c_header = l > 2 && strcmp(de->d_name + l - 2, ".h") == 0;
    bool cxx_header = l > 4 && strcmp(de->d_name + l - 4, ".hpp") == 0;
    if (!c_header && !cxx_header)
      continue;
    char path[512];
    snprintf(path, sizeof(path), "%s/include/%s", PRD_SOURCE_DIR, de->d_name);
    if (read_file(path, header, sizeof(header)) == 0)
      continue;
    headers++;
    if (c_header) {
      scan_header(header);
      continue;
    }
    /* C++: each "class NAME" must be documented as prd::NAME */
    strip_comments(header);
    for (const char *p = strstr(header, "class "); p != NULL; p = strstr(p + 1, "class ")) {
      char cls[64], qualified[80];
      if ((p > header && ident_char(p[-1])) || sscanf(p + 6, "%63[A-Za-z0-9_]", cls) != 1)
        continue;
      classes++;
      snprintf(qualified, sizeof(qualified), "prd::%s", cls);
      if (!has_word(doc, qualified)) {
        fprintf(stderr, "  include/%s: class %s is not in docs/api.md as %s\n", de->d_name,
                cls, qualified);
        CHECK(0);
      }
    }
  }
  closedir(d);
  CHECK(headers >= 2 && classes >= 3);
  CHECK(nnames >= 40);   /* the scan found the API (vmem, caches, RCU, malloc, stats, ...) */
  for (int i = 0; i < nnames; i++) {
    if (!has_word(doc, names[i])) {
      fprintf(stderr, "  %s is declared in include/ but docs/api.md does not name it\n",
              names[i]);
      CHECK(0);
    }
  }
}

static void test_every_documented_function_exists(void)
{
  int shown = 0;
  for (const char *p = strstr(doc, "prd_"); p != NULL; p = strstr(p + 1, "prd_")) {
    if ((p > doc && ident_char(p[-1])) || p[4] == '_')
      continue;
    const char *e = p;
    while (ident_char(*e))
      e++;
    if (*e != '(' || (size_t)(e - p) >= sizeof(names[0]))
      continue;
    char name[64];
    memcpy(name, p, (size_t)(e - p));
    name[e - p] = '\0';
    shown++;
    if (!known(name)) {
      fprintf(stderr, "  docs/api.md shows %s(, which no header in include/ declares\n", name);
      CHECK(0);
    }
  }
  CHECK(shown > 0);
}

int main(int argc, char **argv)
{
  if (read_file(PRD_SOURCE_DIR "/docs/api.md", doc, sizeof(doc)) == 0)
    return 1;
  if (argc == 3 && strcmp(argv[1], "--drop") == 0) {
    size_t l = strlen(argv[2]);
    for (char *p = strstr(doc, argv[2]); p != NULL; p = strstr(p + l, argv[2]))
      memset(p, 'x', l);
  }
  RUN(test_every_function_documented);
  RUN(test_every_documented_function_exists);
  return prd_test_done();
}
