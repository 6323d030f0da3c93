// A shared library built with -fvisibility=hidden (tests/dso/node_main.cpp): its copy of
// prudence.hpp's templates is its own, yet its nodes must come from the process's caches.
#include "node_map.hpp"

#define DSO_EXPORT __attribute__((visibility("default")))

DSO_EXPORT node_map *dso_make_map(int n)
{
  node_map *m = new node_map;
  for (int i = 0; i < n; i++)
    (*m)[i] = i * 3L;
  return m;
}

DSO_EXPORT prd_cache_t *dso_node_cache()
{
  return prd::detail::node_cache<sizeof(node_value), alignof(node_value)>();
}
