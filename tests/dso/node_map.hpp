// The map type that tests/dso/node_lib.cpp makes and tests/dso/node_main.cpp frees.
#ifndef NODE_MAP_HPP
#define NODE_MAP_HPP
#include <prudence.hpp>

#include <functional>
#include <map>

using node_value = std::pair<const int, long>;
using node_map = std::map<int, long, std::less<int>, prd::cache_allocator<node_value>>;

node_map *dso_make_map(int n);
prd_cache_t *dso_node_cache();
#endif
