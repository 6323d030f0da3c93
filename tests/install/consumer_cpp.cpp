// A C++ program outside the project: the installed <prudence.hpp> with strict warnings.
#include <prudence.hpp>

#include <cstdio>
#include <map>

int main()
{
  std::map<int, int, std::less<int>, prd::cache_allocator<std::pair<const int, int>>> m;
  for (int i = 0; i < 1000; i++)
    m[i] = i * i;
  if (m.size() != 1000 || m[31] != 961) {
    std::fprintf(stderr, "consumer_cpp: map contents wrong\n");
    return 1;
  }
  std::printf("consumer_cpp: ok\n");
  return 0;
}
