// prd::cache_allocator across shared libraries: a std::map filled by a library built with
// -fvisibility=hidden (node_lib.cpp) is changed and destroyed here.  Both copies of the
// header's templates must use the same node cache, or the frees here are reported ("not a
// buffer of this cache") and the process aborts.
#include "node_map.hpp"

#include <cstdio>

int main()
{
  node_map *m = dso_make_map(1000);
  prd_cache_t *mine = prd::detail::node_cache<sizeof(node_value), alignof(node_value)>();
  int bad = 0;
  if (dso_node_cache() != mine) {
    std::fprintf(stderr, "the library's node cache %p is not the program's %p\n",
                 static_cast<void *>(dso_node_cache()), static_cast<void *>(mine));
    bad++;
  }
  for (int i = 0; i < 1000; i += 2)
    m->erase(i);
  for (int i = 1000; i < 1100; i++)
    (*m)[i] = i;
  if (m->size() != 600 || (*m)[999] != 2997)
    bad++;
  delete m;
  std::printf("%s - node caches shared with a hidden-visibility library\n", bad ? "not ok" : "ok");
  return bad ? 1 : 0;
}
